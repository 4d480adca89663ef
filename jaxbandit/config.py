"""Sweep configurations: TOML files (or dicts) describing a regret sweep, validated.

A sweep is instances x policies x hyper-parameter grids x horizons x runs.  Every key is
checked here, on the host, before anything is compiled; a bad key raises
:class:`ConfigError` naming the file, the key and the reason.

Schema (all keys not listed are errors)::

    name = "demo"             # optional label of the sweep
    seed = 0                  # integer >= 0
    runs = 200                # runs per cell, integer >= 1
    horizon = 10000           # integer in [1, 2**30], or a list of them (one sweep axis)
    precision = "float32"     # or "float64" (enables 64-bit JAX for the sweep)
    times = 100               # geometric grid of ~N points (N <= the longest horizon, or
                              #   100), or an explicit list of rounds
    chunk_size = 1024         # rounds per compiled chunk (checkpoint granularity)
    solve_batch = 256         # optional: LP solve buffer of policies with a solve step

    [checkpoint]              # how often a running cell group saves its state
    every_chunks = 100        # (does not change results, so not part of the fingerprint)
    every_seconds = 60.0

    [[instances]]
    type = "bandit"           # a constructor of jaxbandit.instances: bandit,
    name = "b5"               #   full_information, graph, revealing_arm, random;
    mu = [1.0, 0.8, 0.5]      #   "default" (name picks one of default_instances());
    sigma = 1.0               #   "explicit" (mu and sigma given; "inf" strings allowed)

    [monitor]                 # optional: a per-round check of every cell's policy state
    name = "estimator_deviation"   # (jaxbandit.monitors), recorded at the recording times
    alphas = [1.0, 4.5]

    [[policies]]
    name = "ucb_n"            # a registered policy (jaxbandit.policies.names()), or an
                              #   import path "package.module:factory" of your own
    label = "UCB-N"           # optional display label
    alpha = [0.25, 1, 4.01]   # hyper-parameters; a list is a grid (Cartesian product)

Numeric hyper-parameters that a policy keeps in its ``params`` are traced by the engine,
so a grid of them on instances with the same number of arms is one compiled program;
cells whose policies compute different things (a hyper-parameter captured in a
closure, another factory) run as separate programs (see :func:`SweepConfig.plan`).
"""

from __future__ import annotations

import contextlib
import copy
import dataclasses
import hashlib
import importlib.resources
import inspect
import itertools
import json
import math
import os
import re
import sys
from typing import Any, Optional, Union

import numpy as np

from jaxbandit import instances as instances_module
from jaxbandit import monitors as monitors_module
from jaxbandit import policies as policies_module
from jaxbandit.base import options_record
from jaxbandit.engine import MAX_ROUNDS, policy_code, policy_key
from jaxbandit._numbers import check_held
from jaxbandit.fingerprint import computation_key, stable_digest
from jaxbandit.instances import Instance, check_representable, check_unique_best
from jaxbandit.io import cell_label
from jaxbandit.result import geometric_times

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - exercised on Python 3.10 only
    import tomli as tomllib

__all__ = [
    "ConfigError",
    "SweepConfig",
    "InstanceSpec",
    "PolicySpec",
    "Cell",
    "Group",
    "load",
    "loads",
    "demo_config",
]

_TOP_KEYS = {
    "name", "seed", "runs", "horizon", "precision", "times", "chunk_size", "solve_batch",
    "checkpoint", "instances", "policies", "monitor",
}
_REQUIRED_TOP = ("runs", "horizon", "instances", "policies")
_CHECKPOINT_KEYS = {"every_chunks", "every_seconds"}
_INSTANCE_TYPES = ("bandit", "full_information", "graph", "revealing_arm", "random", "default", "explicit")
_POLICY_RESERVED = {"name", "label"}
_INF_STRINGS = {"inf", "+inf", "infinity", "+infinity"}
_DEFAULT_TIMES = 100  # points of the default geometric grid of recording times


class ConfigError(ValueError):
    """A sweep configuration is invalid.

    Attributes:
        source: the file (or ``"<dict>"``) the configuration came from.
        key: dotted path of the offending key, e.g. ``"policies[1].alpha"``.
        reason: what is wrong with it.
    """

    def __init__(self, source: str, key: str, reason: str):
        self.source, self.key, self.reason = source, key, reason
        where = f"key '{key}'" if key else "top level"
        super().__init__(f"{source}: {where}: {reason}")


@dataclasses.dataclass(frozen=True)
class InstanceSpec:
    """One resolved instance of the sweep (``index`` is its noise-stream index)."""

    label: str
    index: int
    instance: Instance
    entry: dict  # the config entry it came from


@dataclasses.dataclass(frozen=True)
class PolicySpec:
    """One ``[[policies]]`` entry: a registered policy and its grid of parameter sets."""

    label: str
    name: str
    grid: tuple  # of dicts: every combination of the entry's parameter values


@dataclasses.dataclass(frozen=True)
class Cell:
    """One (instance, policy, parameter set, horizon) of the sweep."""

    instance: str  # instance label
    instance_index: int
    policy: str  # policy label
    policy_name: str  # registry name
    params: dict  # the parameter set as written in the config (for labels)


@dataclasses.dataclass(frozen=True)
class Group:
    """Cells simulated together: one policy, one static configuration, one K, one horizon.

    All cells of a group run as ONE compiled program: the instances are stacked into a
    batch and the numeric hyper-parameters are passed as per-cell arrays.
    """

    id: str
    policy_name: str
    static: dict  # non-traced constructor arguments (part of the compiled program)
    horizon: int
    num_arms: int
    cells: tuple  # of Cell
    cell_kwargs: tuple  # of dicts, the constructor arguments of each cell
    fingerprint: str


@dataclasses.dataclass(frozen=True)
class SweepConfig:
    """A validated sweep configuration (see the module docstring for the schema)."""

    source: str
    raw: dict  # the configuration as given (JSON-able)
    name: str
    seed: int
    runs: int
    horizons: tuple
    precision: str
    times: Union[int, tuple]  # number of geometric points, or explicit rounds
    chunk_size: int
    solve_batch: Optional[int]
    checkpoint_every_chunks: Optional[int]
    checkpoint_every_seconds: Optional[float]
    instances: tuple  # of InstanceSpec
    policies: tuple  # of PolicySpec
    monitor: Optional[dict] = None  # {"name": ..., **arguments} of a jaxbandit.monitors monitor

    def make_monitor(self):
        """The configured :class:`~jaxbandit.monitors.Monitor`, or None."""
        if self.monitor is None:
            return None
        arguments = {k: v for k, v in self.monitor.items() if k != "name"}
        return monitors_module.make(self.monitor["name"], **arguments)

    def times_for(self, horizon: int) -> np.ndarray:
        """``(P,)`` int64 rounds at which regret is recorded for ``horizon``."""
        if isinstance(self.times, int):
            return geometric_times(horizon, self.times)
        explicit = np.asarray([t for t in self.times if t <= horizon], dtype=np.int64)
        if explicit.size == 0 or explicit[-1] != horizon:
            explicit = np.append(explicit, horizon)
        return explicit

    def plan(self) -> list:
        """Cell groups in execution order (deterministic for a given configuration)."""
        groups = []
        for horizon in self.horizons:
            for policy in self.policies:
                for static, grid in _split_by_computation(policy):
                    by_arms: dict = {}
                    for spec in self.instances:
                        by_arms.setdefault(spec.instance.num_arms, []).append(spec)
                    for num_arms, specs in by_arms.items():
                        cells, cell_kwargs = [], []
                        for spec in specs:
                            for kwargs in grid:
                                cells.append(Cell(spec.label, spec.index, policy.label, policy.name, dict(kwargs)))
                                cell_kwargs.append(dict(kwargs))
                        group_id = f"g{len(groups):03d}"
                        description = {
                            "config": self.fingerprint(),
                            "id": group_id,
                            "policy": policy.name,
                            "static": static,
                            "horizon": horizon,
                            "cells": [dataclasses.asdict(c) for c in cells],
                        }
                        groups.append(
                            Group(
                                id=group_id,
                                policy_name=policy.name,
                                static=static,
                                horizon=horizon,
                                num_arms=num_arms,
                                cells=tuple(cells),
                                cell_kwargs=tuple(cell_kwargs),
                                fingerprint=_digest(description),
                            )
                        )
        return groups

    def fingerprint(self) -> str:
        """Hash of everything that determines the results (not the checkpoint cadence).

        It covers the configuration as written, the resolved instance arrays (so a
        changed built-in instance is detected) and the policies actually run.
        """
        raw = {k: v for k, v in self.raw.items() if k != "checkpoint"}
        resolved = [
            {"label": s.label, "mu": _encode_array(s.instance.mu), "sigma": _encode_array(s.instance.sigma)}
            for s in self.instances
        ]
        return _digest({"raw": raw, "instances": resolved, "policies": [p.name for p in self.policies]})

    def resolved_policies(self) -> list:
        """What every ``[[policies]]`` entry resolves to, as JSON: per parameter set of
        its grid, the built policy's ``params`` (numbers), ``options`` and a digest of
        its ``code``.

        Defaults and code are part of it: a factory whose default changed, or a policy
        whose functions were edited (a user's ``module:factory``, a built-in in a new
        version), computes something else from the same configuration text, and a
        sweep directory records this to refuse it.
        """
        with _importable_beside(self.source):
            resolved = [
                {
                    "label": spec.label,
                    "name": spec.name,
                    "grid": [_resolve(policies_module.make(spec.name, **kwargs)) for kwargs in spec.grid],
                }
                for spec in self.policies
            ]
        return json.loads(json.dumps(resolved, sort_keys=True, allow_nan=False))

    def resolved_settings(self) -> dict:
        """The run settings as they resolve, defaults included, as JSON: seed, runs,
        precision, each horizon's recording times and the monitor (its name and a digest
        of its code).

        The fingerprint covers the configuration as written; a default that changed (a
        new version's grid of recording times, say) computes something else from the
        same text, and a sweep directory records this to refuse it.
        """
        monitor = self.make_monitor()
        settings = {
            "seed": self.seed,
            "runs": self.runs,
            "precision": self.precision,
            "times": {str(h): self.times_for(h).tolist() for h in self.horizons},
            "monitor": None if monitor is None else {"name": monitor.name, "code": stable_digest(computation_key(monitor))},
        }
        return json.loads(json.dumps(settings, sort_keys=True))

    def instance_table(self) -> dict:
        """``{label: {"mu": ..., "sigma": ...}}`` with ``inf`` as the string ``"inf"``."""
        return {
            s.label: {"index": s.index, "mu": _encode_array(s.instance.mu), "sigma": _encode_array(s.instance.sigma)}
            for s in self.instances
        }


# -- helpers ------------------------------------------------------------------------


def _digest(obj) -> str:
    return hashlib.sha256(json.dumps(obj, sort_keys=True, allow_nan=False).encode()).hexdigest()[:16]


def _resolve(policy) -> dict:
    """A built policy's ``params`` (numbers; non-finite ones as strings), ``options``
    (:func:`jaxbandit.base.options_record`) and ``code``
    (:func:`jaxbandit.engine.policy_code`)."""

    def number(value):
        value = np.asarray(value, dtype=np.float64)
        if value.ndim:
            return [number(v) for v in value]
        return float(value) if np.isfinite(value) else str(float(value))

    return {
        "params": {k: number(v) for k, v in policy.params.items()},
        "options": options_record(policy.options),
        "code": policy_code(policy),
    }


def _encode_array(array: np.ndarray):
    """Nested lists with ``inf`` written as ``"inf"`` (JSON and TOML cannot hold inf)."""
    return [_encode_array(a) for a in array] if np.ndim(array) else ("inf" if np.isinf(array) else float(array))


def decode_array(value) -> np.ndarray:
    """Inverse of the ``"inf"`` encoding: nested lists -> float64 array."""
    return np.asarray(_decode_numbers(value), dtype=np.float64)


def _decode_numbers(value):
    if isinstance(value, list):
        return [_decode_numbers(v) for v in value]
    if isinstance(value, str) and value.strip().lower() in _INF_STRINGS:
        return math.inf
    return value


class _Checker:
    """Raises :class:`ConfigError` for one source."""

    def __init__(self, source: str):
        self.source = source

    def fail(self, key: str, reason: str):
        raise ConfigError(self.source, key, reason)

    def table(self, key: str, value) -> dict:
        if not isinstance(value, dict):
            self.fail(key, f"must be a table, got {_type_name(value)} {value!r}")
        return value

    def unknown(self, key_prefix: str, table: dict, allowed, hint: str = ""):
        for name in table:
            if name not in allowed:
                full = f"{key_prefix}.{name}" if key_prefix else name
                self.fail(full, f"unknown key; allowed keys: {', '.join(sorted(allowed))}{hint}")

    def integer(self, key: str, value, minimum: int) -> int:
        if isinstance(value, bool) or not isinstance(value, int):
            self.fail(key, f"must be an integer >= {minimum}, got {_type_name(value)} {value!r}")
        if value < minimum:
            self.fail(key, f"must be an integer >= {minimum}, got {value}")
        return value

    def positive_number(self, key: str, value) -> float:
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value <= 0:
            self.fail(key, f"must be a finite number > 0, got {_type_name(value)} {value!r}")
        return float(value)

    def string(self, key: str, value) -> str:
        if not isinstance(value, str) or not value:
            self.fail(key, f"must be a non-empty string, got {_type_name(value)} {value!r}")
        return value

    def plain(self, key: str, value):
        """Reject TOML values with no JSON equivalent (dates, times)."""
        if isinstance(value, dict):
            for k, v in value.items():
                self.plain(f"{key}.{k}" if key else k, v)
        elif isinstance(value, list):
            for i, v in enumerate(value):
                self.plain(f"{key}[{i}]", v)
        elif not isinstance(value, (str, int, float, bool)):
            self.fail(key, f"unsupported value type {_type_name(value)} ({value!r})")
        elif isinstance(value, float) and not math.isfinite(value):
            self.fail(key, f'non-finite numbers must be written as the string "inf", got {value!r}')


def _type_name(value) -> str:
    return {bool: "boolean", int: "integer", float: "float", str: "string", list: "array", dict: "table"}.get(
        type(value), type(value).__name__
    )


# -- parsing ------------------------------------------------------------------------


def loads(text: str, source: str = "<string>") -> SweepConfig:
    """Parse and validate TOML text."""
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as err:
        raise ConfigError(source, "", f"invalid TOML: {err}") from err
    return from_dict(data, source)


def load(config: Union[str, os.PathLike, dict, SweepConfig]) -> SweepConfig:
    """A validated :class:`SweepConfig` from a TOML path, a dict or a SweepConfig."""
    if isinstance(config, SweepConfig):
        return config
    if isinstance(config, dict):
        return from_dict(config, "<dict>")
    path = os.fspath(config)
    try:
        with open(path, "rb") as handle:
            text = handle.read().decode("utf-8")
    except OSError as err:
        raise ConfigError(path, "", f"cannot read the file: {err.strerror}") from err
    except UnicodeDecodeError as err:
        raise ConfigError(path, "", f"not UTF-8 text ({err.reason} at byte {err.start})") from err
    return loads(text, path)


def from_dict(data: dict, source: str = "<dict>") -> SweepConfig:
    """Validate a configuration dict (as parsed from TOML)."""
    check = _Checker(source)
    check.table("", data)
    data = copy.deepcopy(data)
    check.plain("", data)
    check.unknown("", data, _TOP_KEYS)
    for key in _REQUIRED_TOP:
        if key not in data:
            check.fail(key, "missing required key")

    name = check.string("name", data.get("name", "sweep"))
    seed = check.integer("seed", data.get("seed", 0), 0)
    if seed >= 2**64:
        check.fail("seed", f"must be < 2**64, got {seed}")
    runs = check.integer("runs", data["runs"], 1)
    if runs > 2**32:
        check.fail("runs", f"must be at most 2**32 (run indices are 32-bit), got {runs}")
    horizons = _parse_horizons(check, data["horizon"])
    precision = data.get("precision", "float32")
    if precision not in ("float32", "float64"):
        check.fail("precision", f'must be "float32" or "float64", got {precision!r}')
    times = _parse_times(check, data.get("times", _DEFAULT_TIMES), horizons)
    chunk_size = check.integer("chunk_size", data.get("chunk_size", 1024), 1)
    if chunk_size > MAX_ROUNDS:
        check.fail("chunk_size", f"must be at most {MAX_ROUNDS}, got {chunk_size}")
    solve_batch = data.get("solve_batch")
    if solve_batch is not None:
        solve_batch = check.integer("solve_batch", solve_batch, 1)

    every_chunks, every_seconds = _parse_checkpoint(check, data.get("checkpoint", {}))

    instance_specs = _parse_instances(check, data["instances"], precision)
    policy_specs = _parse_policies(check, data["policies"], precision)
    monitor = _parse_monitor(check, data.get("monitor"))

    return SweepConfig(
        source=source,
        raw=data,
        name=name,
        seed=seed,
        runs=runs,
        horizons=horizons,
        precision=precision,
        times=times,
        chunk_size=chunk_size,
        solve_batch=solve_batch,
        checkpoint_every_chunks=every_chunks,
        checkpoint_every_seconds=every_seconds,
        instances=tuple(instance_specs),
        policies=tuple(policy_specs),
        monitor=monitor,
    )


def _parse_horizons(check: _Checker, horizon) -> tuple:
    """``horizon``: an integer or a non-empty array of distinct integers, each in
    ``[1, MAX_ROUNDS]``."""
    if isinstance(horizon, list):
        if not horizon:
            check.fail("horizon", "must be an integer >= 1 or a non-empty array of them, got []")
        horizons = tuple(check.integer(f"horizon[{i}]", h, 1) for i, h in enumerate(horizon))
        if len(set(horizons)) != len(horizons):
            check.fail("horizon", f"has repeated values {list(horizons)}")
    else:
        horizons = (check.integer("horizon", horizon, 1),)
    if max(horizons) > MAX_ROUNDS:
        check.fail("horizon", f"must be at most {MAX_ROUNDS}, got {max(horizons)}")
    return horizons


def _parse_times(check: _Checker, times, horizons: tuple):
    """``times``: a number of grid points (an int) or the explicit rounds (a tuple)."""
    if isinstance(times, list):
        if not times:
            check.fail("times", "an explicit grid must list at least one round")
        values = tuple(check.integer(f"times[{i}]", t, 1) for i, t in enumerate(times))
        if any(b <= a for a, b in zip(values, values[1:])):
            check.fail("times", f"explicit rounds must be strictly increasing, got {list(values)}")
        if values[-1] > max(horizons):
            check.fail("times", f"explicit rounds must be <= the horizon {max(horizons)}, got {values[-1]}")
        return values
    if isinstance(times, int) and not isinstance(times, bool):
        times = check.integer("times", times, 2)
        # A grid records each round at most once: more points than rounds only cost
        # memory (the grid is built in full before its repeats are dropped).
        limit = max(max(horizons), _DEFAULT_TIMES)
        if times > limit:
            check.fail("times", f"must be at most {limit} grid points (the longest horizon, or "
                                f"{_DEFAULT_TIMES} if that is larger), got {times}")  # fmt: skip
        return times
    check.fail("times", "must be a number of grid points (integer >= 2) or an array of rounds, "
                        f"got {_type_name(times)} {times!r}")  # fmt: skip


def _parse_checkpoint(check: _Checker, value) -> tuple:
    """``[checkpoint]``: ``(every_chunks, every_seconds)``, either may be None; every
    60 s unless ``every_chunks`` alone is given."""
    checkpoint = check.table("checkpoint", value)
    check.unknown("checkpoint", checkpoint, _CHECKPOINT_KEYS)
    every_chunks = checkpoint.get("every_chunks")
    if every_chunks is not None:
        every_chunks = check.integer("checkpoint.every_chunks", every_chunks, 1)
    every_seconds = checkpoint.get("every_seconds", None if every_chunks is not None else 60.0)
    if every_seconds is not None:
        every_seconds = check.positive_number("checkpoint.every_seconds", every_seconds)
    return every_chunks, every_seconds


def _parse_monitor(check: _Checker, value) -> Optional[dict]:
    """The ``[monitor]`` table: ``name`` (a monitor of :mod:`jaxbandit.monitors`) and its
    arguments, e.g. ``name = "estimator_deviation"``, ``alphas = [1.0, 4.5]``."""
    if value is None:
        return None
    table = check.table("monitor", value)
    if "name" not in table:
        check.fail("monitor.name", f"missing; one of {', '.join(sorted(monitors_module.REGISTRY))}")
    name = check.string("monitor.name", table["name"])
    if name not in monitors_module.REGISTRY:
        check.fail("monitor.name", f"unknown monitor {name!r}; known monitors: {', '.join(sorted(monitors_module.REGISTRY))}")
    accepted = set(inspect.signature(monitors_module.REGISTRY[name]).parameters) - {"estimator_fn"}
    arguments = {k: v for k, v in table.items() if k != "name"}
    check.unknown("monitor", arguments, accepted | {"name"}, f" (arguments of monitor {name!r} plus name)")
    try:
        monitors_module.make(name, **arguments)
    except (ValueError, TypeError) as err:
        bad = _blame(arguments, str(err))
        check.fail(f"monitor.{bad}" if bad else "monitor", str(err).rstrip("."))
    return dict(table)


def _entries(check: _Checker, key: str, value) -> list:
    if not isinstance(value, list) or not value:
        check.fail(key, f"must be a non-empty array of tables ([[{key}]]), got {_type_name(value)} {value!r}")
    for i, entry in enumerate(value):
        check.table(f"{key}[{i}]", entry)
    return value


_CONSTRUCTORS = {
    "bandit": instances_module.bandit,
    "full_information": instances_module.full_information,
    "graph": instances_module.graph,
    "revealing_arm": instances_module.revealing_arm,
    "random": instances_module.random,
}


def _parse_instances(check: _Checker, value, precision: str) -> list:
    specs: list = []
    labels: set = set()
    defaults = None
    for i, entry in enumerate(_entries(check, "instances", value)):
        key = f"instances[{i}]"
        kind = entry.get("type", "explicit" if "mu" in entry and "sigma" in entry else None)
        if kind is None:
            check.fail(f"{key}.type", f"missing; one of {', '.join(_INSTANCE_TYPES)} (or give mu and sigma)")
        if kind not in _INSTANCE_TYPES:
            check.fail(f"{key}.type", f"unknown instance type {kind!r}; known types: {', '.join(_INSTANCE_TYPES)}")
        args = {k: v for k, v in entry.items() if k not in ("type", "name")}
        if kind == "default":
            check.unknown(key, args, set(), " (a default instance takes only type and name)")
            if "name" not in entry:
                check.fail(f"{key}.name", "missing; a default instance is chosen by name")
            name = check.string(f"{key}.name", entry["name"])
            defaults = instances_module.default_instances() if defaults is None else defaults
            if name not in defaults:
                check.fail(f"{key}.name", f"unknown default instance {name!r}; known: {', '.join(defaults)}")
            built = [(name, defaults[name])]
        else:
            label = check.string(f"{key}.name", entry.get("name", f"{kind}_{i}"))
            if kind == "explicit":
                allowed, factory = {"mu", "sigma"}, Instance
            else:
                factory = _CONSTRUCTORS[kind]
                allowed = set(inspect.signature(factory).parameters)
            check.unknown(key, args, allowed, f" (for type {kind!r})")
            required = {"mu", "sigma"} if kind == "explicit" else {
                p.name for p in inspect.signature(factory).parameters.values()
                if p.default is inspect.Parameter.empty
            }
            for name in sorted(required - set(args)):
                check.fail(f"{key}.{name}", f"missing; required for type {kind!r}")
            decoded = {}
            for name, arg in args.items():
                decoded[name] = _decode_numbers(arg)
                # every constructor argument is a number or an array of them: true and
                # "0.9" are not, even where float() would convert them
                if not _is_numeric_tree(decoded[name]):
                    check.fail(f"{key}.{name}", f'must be numbers (or "inf" strings), got {arg!r}')
                if isinstance(decoded[name], list):
                    try:
                        np.asarray(decoded[name], dtype=np.float64)
                    except ValueError:
                        check.fail(f"{key}.{name}", f"must be a rectangular array (rows of equal length), got {arg!r}")
                if name == "mu" and _contains_inf(decoded[name]):
                    check.fail(f"{key}.mu", f"means must be finite, got {arg!r}")
            if kind == "random":
                for name in ("seed", "num_arms", "num_instances"):
                    if name in decoded:
                        check.integer(f"{key}.{name}", decoded[name], 0 if name == "seed" else 1)
            try:
                inst = factory(**decoded)
            except (ValueError, TypeError) as err:
                bad = _blame(decoded, str(err))
                check.fail(f"{key}.{bad}" if bad else key, str(err).rstrip("."))
            except MemoryError as err:  # num_arms = 1000000: a sigma of 7 TiB
                check.fail(key, f"too large to build ({err})")
            if inst.is_batch:  # random(num_instances=n): one instance each
                built = [(f"{label}/{k}", inst[k]) for k in range(inst.num_instances)]
            else:
                built = [(label, inst)]
        for label, inst in built:
            if label in labels:
                check.fail(f"{key}.name", f"duplicate instance name {label!r}; names must be unique")
            where = f"{label}: " if len(built) > 1 else ""  # which of random's instances
            try:
                # here rather than when its group runs, after the sweep directory is written
                check_representable(inst.mu[None], inst.sigma[None], precision, 'precision = "float64"')
                # a study of a tie has no lower bound, and the LP policies fall back every round
                check_unique_best(inst.mu)
            except ValueError as err:
                check.fail(key, f"{where}{err}".rstrip("."))
            labels.add(label)
            specs.append(InstanceSpec(label=label, index=len(specs), instance=inst, entry=dict(entry)))
    return specs


def _blame(names, message: str) -> Optional[str]:
    """The argument an error message is about: the first of ``names`` it mentions."""
    found = [(m.start(), n) for n in names for m in [re.search(rf"\b{re.escape(n)}\b", message)] if m]
    return min(found)[1] if found else None


def _is_numeric_tree(value) -> bool:
    if isinstance(value, list):
        return all(_is_numeric_tree(v) for v in value)
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _contains_inf(value) -> bool:
    if isinstance(value, list):
        return any(_contains_inf(v) for v in value)
    return isinstance(value, float) and math.isinf(value)


def _split_by_computation(policy: PolicySpec) -> list:
    """The grid of ``policy`` split into ``(static, grid)`` parts, each one program.

    Arguments a policy keeps out of its traced ``params`` are static; and two parameter
    sets share a program only if their policies compute the same thing
    (:func:`jaxbandit.engine.policy_key`): a value captured in a closure splits them.
    """
    parts: dict = {}
    for kwargs in policy.grid:
        built = policies_module.make(policy.name, **kwargs)
        static = {k: v for k, v in kwargs.items() if k not in built.params}
        key = (json.dumps(static, sort_keys=True), policy_key(built))
        parts.setdefault(key, (static, []))[1].append(kwargs)
    return list(parts.values())


@contextlib.contextmanager
def _importable_beside(source: str):
    """The configuration file's directory on the module search path, so that a policy
    named ``"module:factory"`` may live next to the file that names it."""
    directory = os.path.dirname(os.path.abspath(source)) if os.path.isfile(source) else None
    if directory is None or directory in sys.path:
        yield
        return
    sys.path.append(directory)
    try:
        yield
    finally:
        sys.path.remove(directory)


def _parse_policies(check: _Checker, value, precision: str) -> list:
    with _importable_beside(check.source):
        return _parse_policy_entries(check, value, precision)


def _grid_value(value):
    """What makes two grid values one cell: numbers by value (1 and 1.0 alike), anything
    else by its JSON text (true is not 1)."""
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return ("number", float(value))
    return ("json", json.dumps(value, sort_keys=True))


def _check_held_in_float32(check: _Checker, key: str, values: list) -> None:
    """A grid's values as the engine holds them: finite, nonzero where given so, and
    distinct (two values float32 rounds to one would run the same numbers as two
    labelled cells)."""
    try:
        check_held(key.rsplit(".", 1)[-1], np.asarray(values, np.float64), np.float32, 'precision = "float64"')
    except ValueError as err:
        check.fail(key, str(err).rstrip("."))
    held = [float(np.float32(v)) for v in values]
    if len(set(held)) != len(held):
        check.fail(key, f"grid values {values} are not all distinct in float32 (precision); use precision = \"float64\"")


def _check_rounded_policies(check: _Checker, key: str, name: str, grid: tuple, numeric: set) -> None:
    """Each cell's policy built again from its numbers as float32 holds them, so that a
    value it rounds out of the policy's range (``gamma = 0.99999999`` to 1.0) is refused
    here, not run."""
    for kwargs in grid:
        rounded = {k: float(np.float32(v)) for k, v in kwargs.items() if k in numeric and float(np.float32(v)) != v}
        if not rounded:
            continue
        try:
            policies_module.make(name, **{**kwargs, **rounded})
        except (ValueError, TypeError) as err:
            param = _blame(rounded, str(err)) or next(iter(rounded))
            check.fail(
                f"{key}.{param}",
                f"{kwargs[param]!r} is {rounded[param]!r} in float32 (precision), where {str(err).rstrip('.')}; "
                'use precision = "float64"',
            )


def _parse_policy_entries(check: _Checker, value, precision: str) -> list:
    specs: list = []
    labels: set = set()
    cell_labels: dict = {}  # cell label -> index of the entry that has it
    for i, entry in enumerate(_entries(check, "policies", value)):
        key = f"policies[{i}]"
        if "name" not in entry:
            check.fail(f"{key}.name", f"missing; one of {', '.join(policies_module.names())} or 'package.module:factory'")
        name = check.string(f"{key}.name", entry["name"])
        try:
            factory = policies_module.resolve(name)
        except ValueError as err:
            check.fail(f"{key}.name", str(err).rstrip("."))
        label = check.string(f"{key}.label", entry.get("label", name))
        params = {k: v for k, v in entry.items() if k not in _POLICY_RESERVED}
        try:
            signature = list(inspect.signature(factory).parameters.values())
        except (TypeError, ValueError):
            signature = None
        if signature is None or any(p.kind == inspect.Parameter.VAR_KEYWORD for p in signature):
            accepted = set(params)  # the factory takes any keyword: it names a wrong one itself
        else:
            accepted = {p.name for p in signature}
        check.unknown(key, params, accepted | _POLICY_RESERVED, f" (parameters of policy {name!r} plus name and label)")
        axes = []
        for param, values in params.items():
            values = values if isinstance(values, list) else [values]
            if not values:
                check.fail(f"{key}.{param}", "an empty grid; give at least one value")
            for v in values:
                if isinstance(v, (list, dict)):
                    check.fail(f"{key}.{param}", f"grid values must be scalars, got {_type_name(v)} {v!r}")
            if len({_grid_value(v) for v in values}) != len(values):
                check.fail(f"{key}.{param}", f"grid has repeated values {values}")
            axes.append([(param, v) for v in values])
        grid = tuple(dict(combo) for combo in itertools.product(*axes))
        numeric: set = set()  # the parameters the policy keeps in its (traced) params
        for kwargs in grid:
            try:
                built = policies_module.make(name, **kwargs)
            except (ValueError, TypeError) as err:
                bad = _blame(kwargs, str(err))
                check.fail(f"{key}.{bad}" if bad else key, str(err).rstrip("."))
            numeric |= set(kwargs) & set(built.params)
        for param in sorted(numeric):
            # true and "4.5" are not numbers, even where a factory would convert them
            values = params[param] if isinstance(params[param], list) else [params[param]]
            for v in values:
                if isinstance(v, bool) or not isinstance(v, (int, float)):
                    check.fail(f"{key}.{param}", f"must be a number (or an array of them), got {_type_name(v)} {v!r}")
            if precision == "float32":  # the engine casts the traced params to the simulation's precision
                _check_held_in_float32(check, f"{key}.{param}", values)
        if precision == "float32":
            _check_rounded_policies(check, key, name, grid, numeric)
        if label in labels:
            check.fail(f"{key}.label", f"duplicate policy label {label!r}; give each entry a distinct label")
        labels.add(label)
        for kwargs in grid:  # results and plots tell cells apart by these labels
            cell = cell_label(label, dict(sorted(kwargs.items())))  # as results store the params
            if cell_labels.get(cell) == i:
                check.fail(key, f"two of its cells would both be labelled {cell!r}; give grid values that print apart")
            if cell in cell_labels:
                check.fail(
                    f"{key}.label",
                    f"a cell labelled {cell!r}, as one of policies[{cell_labels[cell]}] is; give the entry another label",
                )
            cell_labels[cell] = i
        specs.append(PolicySpec(label=label, name=name, grid=grid))
    return specs


# -- the built-in demo --------------------------------------------------------------

def demo_config() -> SweepConfig:
    """The demo sweep run by ``jaxbandit demo`` (the package's ``demo.toml``)."""
    text = importlib.resources.files("jaxbandit").joinpath("demo.toml").read_text(encoding="utf-8")
    return loads(text, "<demo>")
