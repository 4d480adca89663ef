"""Small sweep configurations shared by the sweep, CLI and plotting tests.

Every test sweep uses the same shapes (cells, runs, time grid, chunk size) so that the
engine compiles once per policy for the whole test session.  ``cases`` is a test policy:
UCB-N plus ``case_a/b/c`` counters (which arm mod 3 was played), standing in for the
diagnostics of ``lp_explore``; it also counts how often its ``select_fn`` is traced.
It is registered only while a test module that uses it runs (:func:`registered`).
"""

from __future__ import annotations

import contextlib
import copy
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import NamedTuple

import jax.numpy as jnp
import numpy as np

from jaxbandit import policies
from jaxbandit.base import Policy

REPO = Path(__file__).resolve().parents[1]
CASES_POLICY = "test_cases"


_TRACE_COUNTS: dict = {}


class _TraceCounter:
    """Traces per policy name.  The engine's cache key describes what a policy's code
    reads (this object's class, the methods the code names and the globals they read,
    a dict by its value), so counts it could see would change the very key they count:
    they are read through ``globals()`` by a name the code does not spell, which the
    key does not follow."""

    __slots__ = ()

    def add(self, name: str) -> None:
        counts = globals()["_TRACE_COUNTS"]
        counts[name] = counts.get(name, 0) + 1

    def __getitem__(self, name: str) -> int:
        return globals()["_TRACE_COUNTS"].get(name, 0)


TRACES = _TraceCounter()


class CasesState(NamedTuple):
    inner: object
    cases: jnp.ndarray  # (3,) int32


def cases_factory(name: str):
    """A factory of test policies registered as ``name`` (a new name: a new engine)."""

    def factory(alpha: float = 1.0) -> Policy:
        return _cases_policy(name, alpha)

    return factory


_INNER = policies.make("ucb_n")  # its functions read alpha from ctx.params: one engine for every alpha


def _cases_policy(name: str, alpha: float) -> Policy:
    def init_fn(ctx):
        return CasesState(_INNER.init_fn(ctx), jnp.zeros(3, jnp.int32))

    def select_fn(key, state, t, ctx):
        TRACES.add(name)  # runs at trace time only
        return _INNER.select_fn(key, state.inner, t, ctx)

    def update_fn(state, arm, values, ctx):
        cases = state.cases + (jnp.arange(3) == arm % 3).astype(jnp.int32)
        return CasesState(_INNER.update_fn(state.inner, arm, values, ctx), cases)

    def consolidate_fn(state):
        return CasesState(_INNER.consolidate_fn(state.inner), state.cases)

    def diagnostics_fn(state):
        return {"case_a": state.cases[0], "case_b": state.cases[1], "case_c": state.cases[2]}

    return Policy(
        init_fn, select_fn, update_fn, diagnostics_fn, consolidate_fn=consolidate_fn, name=name, params={"alpha": alpha}
    )


cases_policy = cases_factory(CASES_POLICY)


@contextlib.contextmanager
def registered():
    """The test policy in the registry, for the duration of a test module only."""
    policies.register(CASES_POLICY, cases_policy)
    try:
        yield
    finally:
        policies.REGISTRY.pop(CASES_POLICY, None)

BASE = {
    "name": "test",
    "seed": 3,
    "runs": 6,  # not a multiple of 4: the 4-device test pads the runs axis
    "horizon": 1500,
    "times": 12,
    "chunk_size": 128,
    "checkpoint": {"every_chunks": 2},
    "instances": [{"type": "default", "name": "bandit"}, {"type": "default", "name": "graph_star"}],
    "policies": [
        {"name": CASES_POLICY, "label": "cases", "alpha": [0.5, 1.0, 2.0]},
        {"name": "ts_n"},
    ],
}


def base_config(**changes) -> dict:
    config = copy.deepcopy(BASE)
    config.update(changes)
    return config


def result_arrays(directory) -> dict:
    """Every array of every finished group, keyed ``"gNNN/name"``."""
    arrays = {}
    for path in sorted(Path(directory, "groups").glob("*.npz")):
        with np.load(path) as data:
            arrays.update({f"{path.stem}/{k}": data[k] for k in data.files})
    return arrays


def assert_identical(a: dict, b: dict) -> None:
    assert sorted(a) == sorted(b)
    for key in a:
        assert a[key].dtype == b[key].dtype, key
        np.testing.assert_array_equal(a[key], b[key], err_msg=key)


def write_config_toml(path, config: dict) -> Path:
    """A TOML file for the test configuration (a tiny writer: the shapes used here)."""

    def value(v):
        return json.dumps(v)  # ints, floats, strings and flat arrays read the same in TOML

    lines = []
    for key, v in config.items():
        if not isinstance(v, (dict, list)) or (isinstance(v, list) and not isinstance(v[0], dict)):
            lines.append(f"{key} = {value(v)}")
    for key, v in config.items():
        if isinstance(v, dict):
            lines.append(f"[{key}]")
            lines += [f"{k} = {value(x)}" for k, x in v.items()]
        elif isinstance(v, list) and isinstance(v[0], dict):
            for entry in v:
                lines.append(f"[[{key}]]")
                lines += [f"{k} = {value(x)}" for k, x in entry.items()]
    Path(path).write_text("\n".join(lines) + "\n")
    return Path(path)


def cli_process(args, env_extra=None, **kwargs) -> subprocess.Popen:
    """``python -m jaxbandit.cli ARGS`` in a subprocess, the test policy registered."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(REPO), env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    env.update(env_extra or {})
    code = (
        "import sys; from tests import sweep_fixtures as fx; from jaxbandit.cli import main\n"
        "with fx.registered(): sys.exit(main(sys.argv[1:]))"
    )
    return subprocess.Popen([sys.executable, "-c", code, *args], env=env, cwd=REPO, **kwargs)
