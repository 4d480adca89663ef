"""Property-based tests (hypothesis) of the input boundary.

Valid instances and sweep configurations, drawn at random, build and round-trip. Bad
values in any argument of the Python API or any key of a configuration always raise the
project's own error, naming the argument or key and showing the value where it can.
The bad values are booleans, strings, None, NaN, infinities, negative numbers, zero,
huge numbers, values float32 cannot hold, lists where scalars belong and wrong shapes.
For a configuration the error is a ConfigError whose ``key`` is that key. It is never a
numpy, JAX or pydantic traceback. Only the error's class, its ``key`` and the value in
its message are checked, never the wording, so these tests outlive a rewrite of the
configuration schema.

Nothing here builds the engine or solves an LP. simulate, SimulationRun and lower_bound
check their arguments first: most before any JAX program is compiled, the rest right
after the few small programs that put an instance on the device. :func:`_nothing_compiled`
fails a test that gets further. The examples are derandomized and few, so CI is
reproducible and the file takes seconds.

A case that misbehaves is left out of its strategy only under a ``# FOUND:`` comment
saying what happens, so that it is added back once it is fixed.
"""

from __future__ import annotations

import contextlib
import copy
import dataclasses
import decimal
import inspect
import itertools
import json
import math
import re
import traceback
import warnings
from pathlib import Path
from typing import Any, Callable, Optional
from unittest import mock

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import jaxbandit as jb
from jaxbandit import bound, config, instances, monitors, policies, runner
from jaxbandit.base import OWN_ARM
from jaxbandit.config import ConfigError
from jaxbandit.engine import MAX_ROUNDS
from jaxbandit.policies.lp_explore import CASE_C_RULES, TheoryWarning
from jaxbandit.result import check_times, geometric_times

_COMMON = dict(
    deadline=None,
    derandomize=True,  # the same examples on every run: CI is reproducible
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
)
VALID = settings(max_examples=50, **_COMMON)  # whole instances, batches and blind instances
# whole configurations: resolving one traces each of its policies for each arm count
# and precision it holds (the contract check), this file's most costly examples
CONFIGURATIONS = settings(max_examples=25, **_COMMON)
PER_CASE = settings(max_examples=20, **_COMMON)  # one argument or key, parametrized over many

PACKAGE = Path(jb.__file__).resolve().parent


# -- what an error must be ------------------------------------------------------------


_ITSELF = object()


@dataclasses.dataclass(frozen=True)
class Bad:
    """A bad value, and whether the error message should show it. Shape errors, for
    one, say what shape was expected rather than repeat the array. ``show`` is what the
    message should show when that is not the value itself: the bad entry of a list."""

    value: Any
    shown: bool = True
    show: Any = _ITSELF

    @property
    def expected(self):
        return self.value if self.show is _ITSELF else self.show


def _spellings(value) -> tuple:
    """``(quoted, numbers)``: how a message may write ``value``. A string, list or table
    appears as its repr: it carries its own quotes or brackets. A number may also appear
    as a float (``-1`` as ``-1.0``, ``2**64`` as ``1.8446744073709552e+19``)."""
    if isinstance(value, float) and math.isnan(value):
        return set(), {"nan"}
    if isinstance(value, (int, float, np.number)) and not isinstance(value, (bool, np.bool_)):
        numbers = {repr(value), str(value)}
        if isinstance(value, (float, np.floating)) or abs(value) < 2**1024:  # an int beyond float64 has no float spelling
            number = float(value)
            numbers |= {repr(number), str(np.float64(number)), f"{number:g}"}
            if number.is_integer():
                numbers.add(str(int(number)))
        return set(), {n.lower() for n in numbers}
    if isinstance(value, str):
        return {repr(value).lower()}, set()  # quoted: "1" in a message is not the string "1"
    return {repr(value).lower(), str(value).lower()}, set()


def _shows(message: str, value) -> bool:
    """Whether ``message`` writes ``value``. A number must stand as a token of its own,
    not as a digit of another ("0" in "instances[0]" does not count)."""
    text = message.lower()
    quoted, numbers = _spellings(value)
    if any(spelling in text for spelling in quoted):
        return True
    return any(re.search(rf"(?<![\w.]){re.escape(n)}(?!\.?\w)", text) for n in numbers)


def assert_own_error(excinfo, must_mention, bad: Optional[Bad] = None) -> None:
    """The exception caught by ``pytest.raises`` is one of jaxbandit's own.

    It must be a ValueError or TypeError whose class is defined in jaxbandit, or a plain
    ValueError or TypeError raised by jaxbandit's code: the traceback's last frame is in
    a file under jaxbandit/. Its message must name every string in ``must_mention``, and
    show ``bad.value`` when ``bad.shown``. A numpy error raised from C code called by
    jaxbandit also ends in a jaxbandit frame. Its message (numpy's "setting an array
    element with a sequence") names no argument, which is why the message is checked too.
    """
    err = excinfo.value
    kind = type(err)
    assert isinstance(err, (ValueError, TypeError)), f"{kind.__module__}.{kind.__qualname__}: {err}"
    frames = traceback.extract_tb(err.__traceback__)
    last = Path(frames[-1].filename).resolve() if frames else None
    own_class = kind.__module__.startswith("jaxbandit")
    raised_here = kind in (ValueError, TypeError) and last is not None and last.is_relative_to(PACKAGE)
    assert own_class or raised_here, f"{kind.__module__}.{kind.__qualname__} raised in {last}: {err}"
    message = str(err)
    for name in (must_mention,) if isinstance(must_mention, str) else must_mention:
        assert name in message, f"the error does not name {name!r}: {message}"
    if bad is not None and bad.shown:
        assert _shows(message, bad.expected), f"the error does not show the value {bad.expected!r}: {message}"


@contextlib.contextmanager
def _quiet():
    """lp_explore warns for alpha <= 4 (outside its guarantee): warnings are errors here."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", TheoryWarning)
        yield


class _Compiled(AssertionError):
    """Raised in place of checking the policy, building the engine or solving an LP."""


# JAX's events for lowering and compiling a program (lowering happens on a hit of the
# persistent compile cache too); tracing alone (jax.eval_shape) records neither
_COMPILE_EVENTS = ("/jax/core/compile/jaxpr_to_mlir_module_duration", "/jax/core/compile/backend_compile_duration")
NOTHING, HELPERS, POLICY_CHECK = "nothing", "helpers", "policy check"


@contextlib.contextmanager
def _nothing_compiled(allow: str = NOTHING):
    """A bad argument must be refused before anything is compiled.

    SimulationRun checks its arguments in three stages. Most checks come before any JAX
    call (``allow=NOTHING``: no program may be lowered or compiled). The
    hyper-parameters' values (in ``engine.make_context``), their float32 rounding
    through the policy's check_params and the monitor's type come after make_context
    has compiled the small programs that put the instance on the device (``HELPERS``).
    noise_index is checked after the policy's abstract evaluation (``POLICY_CHECK``). In every case the engine
    is never built and no LP is solved. ``_check_policy_once``, ``cached_simulation``
    (or the engine it returns) and ``bound._solve_batch`` are replaced by a failure.
    A configuration is checked before any JAX call (``NOTHING``).
    """
    lowered = []

    def listen(event, seconds, **kwargs):
        if event in _COMPILE_EVENTS:
            lowered.append(event)

    def refuse(*args, **kwargs):
        raise _Compiled("reached compilation: the bad argument was not refused first")

    class Engine:  # what cached_simulation returns: building its initial state compiles it
        def __getattr__(self, name):
            refuse()

    replace = [(bound, "_solve_batch", refuse)]
    if allow == POLICY_CHECK:
        replace.append((runner, "cached_simulation", lambda *args, **kwargs: Engine()))
    else:
        replace += [(runner, "_check_policy_once", refuse), (runner, "cached_simulation", refuse)]
    jax.monitoring.register_event_duration_secs_listener(listen)
    try:
        with contextlib.ExitStack() as stack:
            for module, name, replacement in replace:
                # private names: a refactor may rename them, and the compile events still guard
                if hasattr(module, name):
                    stack.enter_context(mock.patch.object(module, name, replacement))
            yield
    finally:
        jax.monitoring.unregister_event_duration_listener(listen)
    if allow == NOTHING:
        assert not lowered, f"{len(lowered)} JAX programs were lowered or compiled before the argument was refused"


def _raises_own(call: Callable, must_mention, bad: Optional[Bad] = None, allow: str = NOTHING):
    with _quiet(), _nothing_compiled(allow), pytest.raises((ValueError, TypeError)) as excinfo:
        call()
    assert not isinstance(excinfo.value, _Compiled), str(excinfo.value)
    assert_own_error(excinfo, must_mention, bad)
    return excinfo


def test_assert_own_error_tells_foreign_errors_apart():
    def foreign():  # a plain ValueError raised outside jaxbandit/ (here, in tests/)
        raise ValueError("mu is wrong")

    with pytest.raises(ValueError) as outside:
        foreign()
    with pytest.raises(AssertionError, match="raised in"):
        assert_own_error(outside, "mu")
    with pytest.raises(TypeError) as numpy_error:
        np.random.default_rng("abc")
    with pytest.raises(AssertionError, match="raised in"):
        assert_own_error(numpy_error, ())
    with pytest.raises(ValueError) as own:
        jb.Instance([1.0, "x"], np.ones((2, 2)))
    assert_own_error(own, "mu", Bad("x"))
    with pytest.raises(AssertionError, match="does not name 'sigma'"):
        assert_own_error(own, "sigma")
    with pytest.raises(AssertionError, match="does not show the value"):
        assert_own_error(own, "mu", Bad(12345.5))


# -- values ---------------------------------------------------------------------------

# float32-exact numbers: an instance built from them is the same in float32 and float64,
# so a float32 sweep takes it whole, and jax arrays of them equal numpy arrays of them
MEANS = st.floats(-1000, 1000, width=32, allow_subnormal=False)
NOISE = st.one_of(st.floats(2**-10, 2**10, width=32), st.just(0.0))  # 0: a noise-free sample
POSITIVE_VALUES = st.floats(2**-8, 2**8, width=32)
INF_SPELLINGS = st.sampled_from(["inf", "Inf", "+inf", "infinity", "INFINITY", " inf "])

BOOLEANS = st.booleans()
TEXT = st.sampled_from(["1", "0.5", "abc", "", "nan", "-1", "inf"])
# what float() would take, and None; a Decimal is not a number anywhere (one rule for
# scalars and array entries)
NOT_NUMBERS = st.one_of(BOOLEANS, TEXT, st.none(), st.just(decimal.Decimal("0.5")))
NAN = st.just(math.nan)
INFINITIES = st.sampled_from([math.inf, -math.inf])
NEGATIVE = st.one_of(st.integers(-(2**70), -1), st.floats(max_value=-5e-324, allow_infinity=False))
ZERO = st.sampled_from([0, 0.0, -0.0])
HUGE = st.just(10**400)  # an int beyond float's range
AT_LEAST_ONE = st.one_of(st.floats(min_value=1.0, allow_infinity=False), st.integers(1, 2**70))
FRACTIONS = st.floats(-1e9, 1e9).filter(lambda x: not x.is_integer())
# whole floats are integers (2e4 is how TOML and scientific notation write 20000)
WHOLE_FLOATS = st.integers(-(10**6), 10**6).map(float)
FINITE_FLOATS = st.floats(allow_nan=False, allow_infinity=False)


def _floats_but_whole(low: int, high: int):
    """Finite floats but the whole ones from ``low`` to ``high`` (valid integers there)."""
    return FINITE_FLOATS.filter(lambda v: not (v.is_integer() and low <= v <= high))


LISTS = st.lists(POSITIVE_VALUES, min_size=1, max_size=3)
NESTED = st.lists(st.lists(POSITIVE_VALUES, min_size=1, max_size=2), min_size=1, max_size=2)
# finite noise levels whose precision 1 / sigma**2 is 0 in float64 (or only in float32)
NOISE_VANISHING_IN_FLOAT64 = st.floats(min_value=1.5e154, allow_infinity=False)
NOISE_VANISHING_IN_FLOAT32 = st.floats(min_value=2e19, max_value=1e150)
FLOAT32_OVERFLOW = st.floats(min_value=3.5e38, max_value=1e300)  # finite, inf in float32
FLOAT32_ZERO = st.floats(min_value=5e-324, max_value=1e-46)  # nonzero, 0 in float32
FLOAT32_BELOW_ONE = st.floats(min_value=1 - 2**-25, max_value=1.0, exclude_min=True, exclude_max=True)  # 1.0 in float32
IDENTIFIERS = st.from_regex(r"[a-z][a-z0-9_]{0,8}", fullmatch=True)


def shown(*strategies):
    return st.one_of(*strategies).map(Bad)


def unshown(*strategies):
    return st.one_of(*strategies).map(lambda v: Bad(v, shown=False))


def _merged_in_float32(low=1.0, high=1e6):
    """``(a, b)``: ``b`` the float64 number just above the float32-exact ``a``, which
    float32 rounds back onto ``a``, or a pair a user would write (4.5, 4.5000001)."""
    pairs = st.floats(low, high, width=32).map(lambda a: (a, float(np.nextafter(a, math.inf))))
    return st.one_of(st.just((4.5, 4.5000001)), pairs) if low <= 4.5 <= high else pairs


def bad_integer(minimum: int, maximum: Optional[int] = None, *, none: bool = True, huge: bool = True):
    """What a strict integer argument (>= minimum, <= maximum) must refuse."""
    below = st.integers(-(2**70), minimum - 1)
    parts = [BOOLEANS, TEXT, NAN, INFINITIES, FRACTIONS, LISTS, below, st.integers(-(10**6), minimum - 1).map(float)]
    if none:
        parts.append(st.none())
    if maximum is not None and huge:
        parts.append(st.integers(maximum + 1, 2**100))
    return shown(*parts)


POSITIVE, NONNEGATIVE, UNIT = "finite number > 0", "finite number >= 0", "number in (0, 1)"


def bad_number(rule: str):
    """What a hyper-parameter with ``rule`` must refuse, in Python."""
    parts = [NOT_NUMBERS, LISTS, NAN, INFINITIES, NEGATIVE, HUGE]
    if rule != NONNEGATIVE:
        parts.append(ZERO)
    if rule == UNIT:
        parts.append(AT_LEAST_ONE)
    return shown(*parts)


# -- valid instances ------------------------------------------------------------------


@st.composite
def means(draw, num_arms: int):
    """Distinct means, so the best arm is unique."""
    return draw(st.lists(MEANS, min_size=num_arms, max_size=num_arms, unique=True))


@st.composite
def general_sigma(draw, num_arms: int):
    """A K x K matrix of noise levels and infs in which some row observes every arm."""
    sigma = np.array(
        draw(st.lists(st.lists(st.one_of(NOISE, st.just(math.inf)), min_size=num_arms, max_size=num_arms),
                      min_size=num_arms, max_size=num_arms))  # fmt: skip
    )
    for column in range(num_arms):
        if np.all(np.isinf(sigma[:, column])):
            sigma[draw(st.integers(0, num_arms - 1)), column] = draw(NOISE)
    return sigma


@dataclasses.dataclass
class InstanceCase:
    """An instance built by one constructor, with that constructor's arguments and the
    same instance written as a configuration entry."""

    kind: str
    kwargs: dict
    entry: dict
    instance: jb.Instance


KINDS = ("explicit", "bandit", "full_information", "graph", "revealing_arm", "random")


def _encoded(sigma: np.ndarray, draw) -> list:
    """``sigma`` as nested lists for a configuration, ``inf`` as one of its spellings."""
    return [[draw(INF_SPELLINGS) if math.isinf(x) else float(x) for x in row] for row in sigma]


@st.composite
def instance_cases(draw, num_arms: Optional[int] = None, single: bool = False):
    """A valid instance from any constructor (``single``: not a batch)."""
    kind = draw(st.sampled_from(KINDS))
    k = draw(st.integers(2, 6)) if num_arms is None else num_arms
    if kind == "explicit":
        mu, sigma = draw(means(k)), draw(general_sigma(k))
        kwargs = {"mu": mu, "sigma": sigma}
        entry = {"mu": mu, "sigma": _encoded(sigma, draw)}
        if draw(st.booleans()):  # the type may be left out when mu and sigma are given
            entry = {"type": "explicit", **entry}
        return InstanceCase(kind, kwargs, entry, jb.Instance(mu, sigma))
    if kind == "bandit":
        mu = draw(means(k))
        sigma = draw(st.one_of(st.floats(2**-10, 2**10, width=32), st.lists(NOISE, min_size=k, max_size=k)))
        kwargs = {"mu": mu, "sigma": sigma}
        built = instances.bandit(**kwargs)
    elif kind == "full_information":
        kwargs = {"mu": draw(means(k)), "sigma": draw(NOISE)}
        built = instances.full_information(**kwargs)
    elif kind == "graph":
        adjacency = draw(st.lists(st.lists(st.booleans(), min_size=k, max_size=k), min_size=k, max_size=k))
        kwargs = {"mu": draw(means(k)), "adjacency": adjacency, "sigma": draw(NOISE)}
        built = instances.graph(**kwargs)
        kwargs = {**kwargs, "adjacency": [[int(a) for a in row] for row in adjacency]}  # TOML has no booleans here
    elif kind == "revealing_arm":
        mu = draw(means(k))  # the last one is the revealing arm's
        kwargs = {"mu": mu[:-1], "reveal_mean": mu[-1], "sigma": draw(NOISE)}
        if draw(st.booleans()):
            kwargs["reveal_sigma"] = draw(NOISE)
        built = instances.revealing_arm(**kwargs)
    else:
        low = draw(st.integers(-100, 100))
        log_low = draw(st.floats(-2, 1.5))
        kwargs = {
            "seed": draw(st.integers(0, 2**63 - 1)),
            "num_arms": k,
            # wide enough that no two means meet in float32
            "mean_range": [float(low), float(low + draw(st.integers(10, 100)))],
            "log10_sigma_range": [log_low, log_low + draw(st.floats(0, 0.5))],
            "inf_prob": draw(st.floats(0, 0.9)),
        }
        if not single and draw(st.booleans()):
            kwargs["num_instances"] = draw(st.integers(1, 3))
        built = instances.random(**kwargs)
    entry = {"type": kind, **{name: list(v) if isinstance(v, tuple) else v for name, v in kwargs.items()}}
    return InstanceCase(kind, kwargs, entry, built)


def _check_constructed(case: InstanceCase) -> None:
    """What each constructor promises about the matrix it builds."""
    inst, kwargs = case.instance, case.kwargs
    mu, sigma = inst.mu, inst.sigma
    k = inst.num_arms
    off_diagonal = ~np.eye(k, dtype=bool)
    if case.kind == "explicit":
        np.testing.assert_array_equal(mu, kwargs["mu"])
        np.testing.assert_array_equal(sigma, kwargs["sigma"])
    elif case.kind == "bandit":
        np.testing.assert_array_equal(np.diagonal(sigma), np.broadcast_to(kwargs["sigma"], (k,)))
        assert np.all(np.isinf(sigma[off_diagonal]))
    elif case.kind == "full_information":
        assert np.all(sigma == kwargs["sigma"])
    elif case.kind == "graph":
        observed = np.array(kwargs["adjacency"], dtype=bool) | np.eye(k, dtype=bool)
        np.testing.assert_array_equal(np.isfinite(sigma), observed)
        assert np.all(sigma[observed] == kwargs["sigma"])
    elif case.kind == "revealing_arm":
        assert k == len(kwargs["mu"]) + 1 and mu[-1] == kwargs["reveal_mean"]
        np.testing.assert_array_equal(sigma[-1], kwargs.get("reveal_sigma", kwargs["sigma"]))
        assert np.all(np.diagonal(sigma)[:-1] == kwargs["sigma"])
        assert np.all(np.isinf(sigma[:-1][off_diagonal[:-1]]))
    else:
        low, high = kwargs["mean_range"]
        assert np.all((low <= mu) & (mu <= high))
        finite = sigma[np.isfinite(sigma)]
        log_low, log_high = kwargs["log10_sigma_range"]
        assert np.all((finite >= 10**log_low * (1 - 1e-12)) & (finite <= 10**log_high * (1 + 1e-12)))
        assert np.all(np.isfinite(np.diagonal(sigma, axis1=-2, axis2=-1)))
        assert instances.random(**kwargs) == inst  # the seed makes it
        assert inst.is_batch == ("num_instances" in kwargs)
    if case.kind != "random":
        np.testing.assert_array_equal(mu[: len(kwargs["mu"])], kwargs["mu"])


# -- valid instances build and round-trip --------------------------------------------


@VALID
@given(case=instance_cases())
def test_valid_instances_build_with_every_constructor(case):
    inst = case.instance
    _check_constructed(case)
    batch_shape = inst.mu.shape[:-1]
    k = inst.num_arms
    assert 2 <= k <= 6 and inst.sigma.shape == batch_shape + (k, k)
    assert inst.mu.dtype == inst.sigma.dtype == np.float64
    assert not inst.mu.flags.writeable and not inst.sigma.flags.writeable
    assert np.all(np.any(np.isfinite(inst.sigma), axis=-2)), "every arm is observed by some row"
    with np.errstate(divide="ignore"):
        np.testing.assert_array_equal(inst.precision, 1.0 / np.square(inst.sigma))
    np.testing.assert_array_equal(inst.best_arm, np.argmax(inst.mu, axis=-1))
    assert np.all(inst.gaps >= 0) and np.all(np.sum(inst.gaps == 0, axis=-1) == 1)  # one best arm
    # round trips: its own arrays, nested lists, jax arrays of float32-exact values
    assert jb.Instance(inst.mu, inst.sigma) == inst
    assert jb.Instance(inst.mu.tolist(), inst.sigma.tolist(), allow_ties=False) == inst
    if case.kind == "explicit":
        assert jb.Instance(jnp.asarray(case.kwargs["mu"]), jnp.asarray(case.kwargs["sigma"])) == inst
    if inst.is_batch:
        assert instances.stack([inst[i] for i in range(inst.num_instances)]) == inst


@VALID
@given(data=st.data())
def test_stacking_round_trips(data):
    k = data.draw(st.integers(2, 6), label="num_arms")
    built = [c.instance for c in data.draw(st.lists(instance_cases(k, single=True), min_size=1, max_size=4))]
    batch = instances.stack(built)
    assert batch.is_batch and batch.num_instances == len(built) and batch.num_arms == k
    for i, inst in enumerate(built):
        assert batch[i] == inst
    assert jb.Instance(batch.mu, batch.sigma) == batch
    np.testing.assert_array_equal(batch.best_arm, [inst.best_arm for inst in built])
    # one instance of the batch with an arm nobody observes: the batch names it
    where = data.draw(st.integers(0, len(built) - 1), label="instance")
    arm = data.draw(st.integers(0, k - 1), label="arm")
    sigma = np.array(batch.sigma)
    sigma[where, :, arm] = np.inf
    excinfo = _raises_own(lambda: jb.Instance(batch.mu, sigma), ("sigma", f"arm {arm}"))
    if len(built) > 1:
        assert f"instance {where}" in str(excinfo.value)


# -- valid configurations resolve and round-trip --------------------------------------

POLICY_GRIDS = {
    "greedy": {},
    "ts": {},
    "ts_n": {},
    "oracle_etc": {},
    "ucb": {"alpha": POSITIVE_VALUES},
    "ucb_n": {"alpha": POSITIVE_VALUES},
    "ucb_maxn": {"alpha": POSITIVE_VALUES},
    "eps_greedy": {"c": POSITIVE_VALUES},
    "eps_greedy_lp": {"c": POSITIVE_VALUES, "d": POSITIVE_VALUES},
    "ucb_lp": {"c": POSITIVE_VALUES, "alpha": POSITIVE_VALUES},
    "lp_explore": {
        "alpha": st.floats(4.0625, 64, width=32),
        "gamma": st.floats(2**-8, 1 - 2**-8, width=32),
        "case_c_rule": st.sampled_from(CASE_C_RULES),
    },
    "ossb": {"epsilon": st.one_of(st.just(0.0), POSITIVE_VALUES), "gamma": st.one_of(st.just(0.0), POSITIVE_VALUES)},
}
# the policies refused an instance with an arm that reveals nothing about itself
OWN_ARM_POLICIES = {name for name in POLICY_GRIDS if policies.make(name).options.get("feedback") == OWN_ARM}


@st.composite
def policy_entries(draw, own_arm: bool = True):
    """``(entries, grids)``: ``[[policies]]`` tables, and the grid each resolves to
    (``own_arm=False``: no policy that learns an arm only by playing it)."""
    known = sorted(name for name in POLICY_GRIDS if own_arm or name not in OWN_ARM_POLICIES)
    names = draw(st.lists(st.sampled_from(known), min_size=1, max_size=3, unique=True))
    entries, grids = [], []
    for i, name in enumerate(names):
        entry = {"name": name}
        if draw(st.booleans()):
            entry["label"] = f"P{i}"
        axes = []
        for param, values in POLICY_GRIDS[name].items():
            if not draw(st.booleans()):
                continue  # the factory's default
            if draw(st.booleans()):
                entry[param] = draw(values)
                axes.append([(param, entry[param])])
            else:
                entry[param] = draw(st.lists(values, min_size=1, max_size=3, unique=True))
                axes.append([(param, v) for v in entry[param]])
        entries.append(entry)
        grids.append(tuple(dict(combo) for combo in itertools.product(*axes)))
    return entries, grids


@st.composite
def configurations(draw):
    """``(raw, instances, grids)``: a valid configuration dict, the ``(label, Instance)``
    each of its instance entries resolves to, and each policy entry's grid."""
    cases = draw(st.lists(instance_cases(), min_size=1, max_size=4))
    defaults = draw(st.lists(st.sampled_from(list(instances.default_instances())), max_size=2, unique=True))
    built = {name: inst for name, inst in instances.default_instances().items() if name in defaults}
    entries = [({"type": "default", "name": name}, [(name, built[name])]) for name in defaults]
    for i, case in enumerate(cases):
        label = f"e{i}"
        inst = case.instance
        labelled = [(f"{label}/{j}", inst[j]) for j in range(inst.num_instances)] if inst.is_batch else [(label, inst)]
        entries.append(({**case.entry, "name": label}, labelled))
    entries = draw(st.permutations(entries))
    # an arm that reveals nothing about itself is refused to the policies learning only from their own plays
    self_observed = all(np.isfinite(np.diagonal(inst.sigma)).all() for _, pairs in entries for _, inst in pairs)
    policy_tables, grids = draw(policy_entries(own_arm=self_observed))
    rounds = st.integers(1, 10**6)
    horizon = draw(st.one_of(rounds, st.lists(rounds, min_size=1, max_size=3, unique=True)))
    longest = max(horizon) if isinstance(horizon, list) else horizon
    times = draw(st.one_of(
        st.integers(2, max(longest, 100)),
        st.lists(st.integers(1, longest), min_size=1, max_size=6, unique=True).map(sorted),
    ))  # fmt: skip
    raw = {"runs": draw(st.integers(1, 1000)), "horizon": horizon}
    optional = {
        "name": st.from_regex(r"[A-Za-z][A-Za-z0-9_ -]{0,10}", fullmatch=True),
        "seed": st.integers(0, 2**63 - 1),  # TOML integers are 64-bit
        "precision": st.sampled_from(["float32", "float64"]),
        "times": st.just(times),
        "chunk_size": st.integers(1, 2**30),
        "solve_batch": st.integers(1, 2**20),
        "checkpoint": st.fixed_dictionaries({}, optional={
            "every_chunks": st.integers(1, 1000), "every_seconds": st.floats(0.5, 1e4, width=32),
        }),  # fmt: skip
        "monitor": st.lists(st.sampled_from([0.5, 1.0, 2.0, 4.5, 8.0]), min_size=1, max_size=3, unique=True).map(
            lambda alphas: {"name": "estimator_deviation", "alphas": alphas}
        ),
    }
    for key, strategy in optional.items():
        if draw(st.booleans()):
            raw[key] = draw(strategy)
    raw["instances"] = [entry for entry, _ in entries]
    raw["policies"] = policy_tables
    return raw, [pair for _, pairs in entries for pair in pairs], grids


def _toml_value(value) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return repr(value)  # repr(nan), repr(inf), 1e-05 are TOML too
    if isinstance(value, str):
        return _toml_string(value)
    if isinstance(value, list):
        return "[" + ", ".join(_toml_value(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{_toml_string(k)} = {_toml_value(v)}" for k, v in value.items()) + "}"
    raise TypeError(value)


def _toml_string(text: str) -> str:
    """A TOML basic string: JSON's escapes, but non-ASCII characters as they are (JSON
    would write surrogate pairs, which TOML refuses) and DEL escaped (TOML refuses it raw)."""
    return json.dumps(text, ensure_ascii=False).replace("\x7f", "\\u007f")


def _toml_safe(value) -> bool:
    """Whether TOML can hold ``value``: no None, integers of 64 bits."""
    if isinstance(value, dict):
        return all(isinstance(k, str) and _toml_safe(v) for k, v in value.items())
    if isinstance(value, list):
        return all(_toml_safe(v) for v in value)
    if isinstance(value, int) and not isinstance(value, bool):
        return -(2**63) <= value < 2**63
    return isinstance(value, (str, float, bool))


def _toml(data: dict) -> Optional[str]:
    """``data`` as TOML text, or None if TOML cannot hold it."""
    if not _toml_safe(data):
        return None
    def tables(value) -> bool:  # an array of tables, written [[key]]
        return isinstance(value, list) and bool(value) and all(isinstance(e, dict) for e in value)

    def pairs(table: dict) -> list:
        return [f"{_toml_string(k)} = {_toml_value(v)}" for k, v in table.items()]

    lines = pairs({k: v for k, v in data.items() if not isinstance(v, dict) and not tables(v)})
    for key, value in data.items():
        if isinstance(value, dict):
            lines += ["", f"[{_toml_string(key)}]", *pairs(value)]
    for key, value in data.items():
        if tables(value):
            for entry in value:
                lines += ["", f"[[{_toml_string(key)}]]", *pairs(entry)]
    return "\n".join(lines) + "\n"


@CONFIGURATIONS
@given(case=configurations())
def test_valid_configurations_resolve_to_the_instances_built_directly(case):
    raw, expected, grids = case
    with _quiet():
        cfg = config.from_dict(copy.deepcopy(raw))
    assert cfg.raw == raw
    assert [(s.label, s.index) for s in cfg.instances] == [(label, i) for i, (label, _) in enumerate(expected)]
    for spec, (label, inst) in zip(cfg.instances, expected):
        assert spec.instance == inst, label
        assert spec.instance.mu.dtype == spec.instance.sigma.dtype == np.float64
    assert [p.grid for p in cfg.policies] == grids
    assert [p.label for p in cfg.policies] == [p.get("label", p["name"]) for p in raw["policies"]]
    assert cfg.horizons == tuple(raw["horizon"] if isinstance(raw["horizon"], list) else [raw["horizon"]])
    assert (cfg.seed, cfg.runs, cfg.precision) == (raw.get("seed", 0), raw["runs"], raw.get("precision", "float32"))
    for horizon in cfg.horizons:
        times = cfg.times_for(horizon)
        np.testing.assert_array_equal(check_times(times, horizon), times)
        assert times[-1] == horizon
    cells = sum(len(group.cells) for group in cfg.plan())
    assert cells == len(expected) * sum(len(grid) for grid in grids) * len(cfg.horizons)
    # the same configuration written as TOML resolves to the same sweep
    with _quiet():
        again = config.loads(_toml(raw))
    assert again.raw == raw and again.fingerprint() == cfg.fingerprint()
    # and so do its resolved instances written back as explicit mu and sigma
    table = cfg.instance_table()
    explicit = [{"name": label, "mu": row["mu"], "sigma": row["sigma"]} for label, row in table.items()]
    with _quiet():
        written_back = config.from_dict({**copy.deepcopy(raw), "instances": explicit})
    assert [s.instance for s in written_back.instances] == [s.instance for s in cfg.instances]


# -- the Python API refuses bad arguments ---------------------------------------------
#
# Each case is a function of hypothesis's ``draw`` returning (call, names, bad): calling
# ``call`` must raise jaxbandit's own error that names ``names`` and shows ``bad``.


@st.composite
def valid_pairs(draw):
    k = draw(st.integers(2, 6))
    return draw(means(k)), draw(general_sigma(k))


def _put(values: list, draw, bad):
    """``values`` (a copy) with one entry replaced by ``bad``."""
    values = list(values)
    values[draw(st.integers(0, len(values) - 1))] = bad
    return values


def _put_in_matrix(matrix, draw, bad) -> list:
    rows = np.asarray(matrix).tolist()
    row = draw(st.integers(0, len(rows) - 1))
    rows[row] = _put(rows[row], draw, bad)
    return rows


# a mean must be a finite number; a nested list makes the array ragged
BAD_MEAN = shown(NOT_NUMBERS, NAN, INFINITIES, LISTS)
# a noise level must be a number >= 0 (inf allowed) whose precision does not vanish
BAD_NOISE_ENTRY = shown(NOT_NUMBERS, NAN, NEGATIVE, st.just(-math.inf), NOISE_VANISHING_IN_FLOAT64, LISTS)
# a constructor's scalar noise level: the same, and inf (no arm is observed then)
BAD_NOISE_SCALAR = st.one_of(BAD_NOISE_ENTRY, unshown(st.just(math.inf)))


def _instance_mu_entry(draw):
    mu, sigma = draw(valid_pairs())
    bad = draw(BAD_MEAN)
    mu = _put(mu, draw, bad.value)
    return lambda: jb.Instance(mu, sigma), "mu", bad


def _instance_mu_shape(draw):
    mu, sigma = draw(valid_pairs())
    k = len(mu)
    mu, sigma = draw(st.sampled_from([
        (mu[0], sigma),  # a scalar
        (np.array(mu)[None, None], sigma[None, None]),  # 3-D
        (mu[:1], sigma[:1, :1]),  # one arm
        (np.zeros((0, k)), np.ones((0, k, k))),  # an empty batch
        (mu + [min(mu) - 1.0], sigma),  # K + 1 means for a K x K sigma
    ]))  # fmt: skip
    return lambda: jb.Instance(mu, sigma), "mu", None


def _instance_sigma_entry(draw):
    mu, sigma = draw(valid_pairs())
    bad = draw(BAD_NOISE_ENTRY)
    sigma = _put_in_matrix(sigma, draw, bad.value)
    return lambda: jb.Instance(mu, sigma), "sigma", bad


def _instance_sigma_shape(draw):
    mu, sigma = draw(valid_pairs())
    ragged = sigma.tolist()
    ragged[draw(st.integers(0, len(mu) - 1))].pop()
    sigma = draw(st.sampled_from([sigma[:, :-1], np.diagonal(sigma), sigma[None], ragged, sigma[0, 0]]))
    return lambda: jb.Instance(mu, sigma), "sigma", None


def _instance_unobserved_arm(draw):
    mu, sigma = draw(valid_pairs())
    arm = draw(st.integers(0, len(mu) - 1))
    sigma[:, arm] = np.inf
    return lambda: jb.Instance(mu, sigma), ("sigma", f"arm {arm}"), None


def _instance_tied_best(draw):
    mu, sigma = draw(valid_pairs())
    best = int(np.argmax(mu))
    other = draw(st.integers(0, len(mu) - 1).filter(lambda i: i != best))
    mu[other] = mu[best]
    return lambda: jb.Instance(mu, sigma, allow_ties=False), "mu", Bad(mu[best])


def _constructor_mu(draw):
    name = draw(st.sampled_from(["bandit", "full_information", "graph", "revealing_arm"]))
    factory = getattr(instances, name)
    mu = draw(means(draw(st.integers(2, 5))))
    arguments = {"adjacency": np.eye(len(mu))} if name == "graph" else {}
    if draw(st.booleans()):
        bad = draw(BAD_MEAN)
        mu = _put(mu, draw, bad.value)
    else:  # not (K,): a matrix, or a scalar
        bad, mu = None, draw(st.sampled_from([[mu], mu[0]]))
    return lambda: factory(mu, **arguments), "mu", bad


def _bandit_too_few_arms(draw):
    mu = draw(st.lists(MEANS, max_size=1))
    return lambda: instances.bandit(mu), "mu", None


def _bandit_sigma(draw):
    mu = draw(means(draw(st.integers(2, 5))))
    k = len(mu)
    kind = draw(st.sampled_from(["scalar", "entry", "length"]))
    if kind == "scalar":
        bad = draw(BAD_NOISE_SCALAR.filter(lambda b: not isinstance(b.value, list)))
        sigma = bad.value
    elif kind == "entry":
        bad = draw(BAD_NOISE_ENTRY.filter(lambda b: not isinstance(b.value, list)))
        sigma = _put([1.0] * k, draw, bad.value)
    else:  # one noise level per arm, but not K of them
        bad = None
        sigma = draw(st.lists(POSITIVE_VALUES, min_size=1, max_size=2 * k).filter(lambda s: len(s) != k))
    return lambda: instances.bandit(mu, sigma), "sigma", bad


def _scalar_sigma(draw):
    """full_information, graph and revealing_arm take one noise level."""
    name = draw(st.sampled_from(["full_information", "graph", "revealing_arm"]))
    mu = draw(means(draw(st.integers(2, 5))))
    bad = draw(BAD_NOISE_SCALAR)
    if name == "graph":
        return lambda: instances.graph(mu, np.eye(len(mu)), bad.value), "sigma", bad
    return lambda: getattr(instances, name)(mu, sigma=bad.value), "sigma", bad


def _graph_adjacency(draw):
    mu = draw(means(draw(st.integers(2, 5))))
    k = len(mu)
    if draw(st.booleans()):
        entry = st.one_of(st.integers(2, 2**70), st.integers(-(2**70), -1), FRACTIONS, NAN, INFINITIES, TEXT,
                          st.none(), st.just(1 + 0j))  # fmt: skip
        bad = draw(shown(entry))
        adjacency = _put_in_matrix(np.eye(k, dtype=int), draw, bad.value)
    else:
        bad = None
        adjacency = draw(st.sampled_from([np.eye(k + 1), np.ones(k), np.ones((k, k, 1)), 1, [[0] * k] * (k - 1) + [[0]]]))
    return lambda: instances.graph(mu, adjacency), "adjacency", bad


def _revealing_arm_numbers(draw):
    mu = draw(means(draw(st.integers(1, 4))))
    name = draw(st.sampled_from(["reveal_mean", "reveal_sigma"]))
    not_numbers = NOT_NUMBERS if name == "reveal_mean" else st.one_of(BOOLEANS, TEXT)  # None: reveal_sigma's default
    out_of_range = st.one_of(NAN, INFINITIES) if name == "reveal_mean" else st.one_of(NAN, INFINITIES, NEGATIVE)
    bad = draw(shown(not_numbers, LISTS, out_of_range))
    return lambda: instances.revealing_arm(mu, **{name: bad.value}), name, bad


def _random_integers(draw):
    # Whole floats (4.0) are integers; moderate sizes (10**6 arms: a sigma of 7 TiB)
    # allocate, so none is drawn.
    name = draw(st.sampled_from(["seed", "num_arms", "num_instances"]))
    minimum = {"seed": 0, "num_arms": 2, "num_instances": 1}[name]
    bad = draw(shown(BOOLEANS, TEXT, NAN, INFINITIES, FRACTIONS, LISTS, st.integers(-(2**70), minimum - 1),
                     *([st.none()] if name != "num_instances" else [])))  # fmt: skip
    arguments = {"seed": 0, "num_arms": 3, name: bad.value}
    return lambda: instances.random(**arguments), name, bad


def _random_inf_prob(draw):
    bad = draw(shown(NOT_NUMBERS, LISTS, NAN, INFINITIES, NEGATIVE, AT_LEAST_ONE))
    return lambda: instances.random(0, 3, inf_prob=bad.value), "inf_prob", bad


def _pairs_with_a_bad_end(end, bad_end, kind):
    """Pairs ``(end, bad)`` or ``(bad, end)`` whose error should show the bad end."""
    return st.tuples(end, bad_end, st.booleans()).map(
        lambda t: Bad(kind([t[0], t[1]] if t[2] else [t[1], t[0]]), show=t[1])
    )


def _random_ranges(draw):
    name = draw(st.sampled_from(["mean_range", "log10_sigma_range"]))
    end = st.floats(-100, 100)
    pair = st.tuples(end, end).filter(lambda p: p[0] != p[1]).map(lambda p: (max(p), min(p)))  # reversed
    bad = draw(st.one_of(
        shown(end, TEXT, BOOLEANS, st.none(), pair),
        shown(st.lists(end, min_size=0, max_size=1), st.lists(end, min_size=3, max_size=4)),  # not two numbers
        _pairs_with_a_bad_end(end, st.one_of(NOT_NUMBERS, NAN, INFINITIES), tuple),
        shown(st.just((-1e308, 1e308))),  # a width that overflows
        *([shown(st.tuples(st.floats(-100, 100), st.floats(151, 1e300)))] if name == "log10_sigma_range" else []),
    ))  # fmt: skip
    return lambda: instances.random(0, 3, **{name: bad.value}), name, bad


def _stack(draw):
    one = instances.bandit([1.0, 0.5])
    entries, names = draw(st.sampled_from([
        ([], "instances"),
        ([one, "x"], "instances[1]"),
        ([one, (one.mu, one.sigma)], "instances[1]"),
        ([one, instances.bandit([1.0, 0.5, 0.25])], "K"),
        ([instances.stack([one, one])], "instances[0]"),  # a batch is not a single instance
    ]))  # fmt: skip
    return lambda: instances.stack(entries), names, None


INSTANCE_CASES = {
    "Instance.mu-entry": _instance_mu_entry,
    "Instance.mu-shape": _instance_mu_shape,
    "Instance.sigma-entry": _instance_sigma_entry,
    "Instance.sigma-shape": _instance_sigma_shape,
    "Instance.sigma-unobserved-arm": _instance_unobserved_arm,
    "Instance.allow_ties=False": _instance_tied_best,
    "constructors.mu": _constructor_mu,
    "bandit.too-few-arms": _bandit_too_few_arms,
    "bandit.sigma": _bandit_sigma,
    "full_information-graph-revealing_arm.sigma": _scalar_sigma,
    "graph.adjacency": _graph_adjacency,
    "revealing_arm.reveal_mean-reveal_sigma": _revealing_arm_numbers,
    "random.num_arms-num_instances": _random_integers,
    "random.inf_prob": _random_inf_prob,
    "random.mean_range-log10_sigma_range": _random_ranges,
    "stack": _stack,
}


@pytest.mark.parametrize("case", INSTANCE_CASES.values(), ids=INSTANCE_CASES.keys())
@PER_CASE
@given(data=st.data())
def test_instances_refuse_bad_arguments(case, data):
    call, names, bad = case(data.draw)
    _raises_own(call, names, bad)


# the hyper-parameters of the built-in policies and the rule each must follow
RULES = {
    ("eps_greedy", "c"): POSITIVE,
    ("ucb", "alpha"): POSITIVE,
    ("ucb_n", "alpha"): POSITIVE,
    ("ucb_maxn", "alpha"): POSITIVE,
    ("eps_greedy_lp", "c"): POSITIVE,
    ("eps_greedy_lp", "d"): POSITIVE,
    ("ucb_lp", "c"): POSITIVE,
    ("ucb_lp", "alpha"): POSITIVE,
    ("lp_explore", "alpha"): POSITIVE,
    ("lp_explore", "gamma"): UNIT,
    ("ossb", "epsilon"): NONNEGATIVE,
    ("ossb", "gamma"): NONNEGATIVE,
}
OPTIONS = {("lp_explore", "case_c_rule"): CASE_C_RULES}
# a valid value of each rule, for the other cells of a grid
GOOD = {POSITIVE: 0.5, NONNEGATIVE: 0.125, UNIT: 0.25}


def _built_in_policies() -> list:
    """The registry's own policies (other tests in a process may register more)."""
    return [n for n in policies.names() if policies.REGISTRY[n].__module__.startswith("jaxbandit.policies")]


def test_the_rules_cover_every_built_in_hyper_parameter():
    declared = {(n, p) for n in _built_in_policies() for p in inspect.signature(policies.REGISTRY[n]).parameters}
    assert declared == set(RULES) | set(OPTIONS)


def _hyper_parameter(draw):
    (name, param), rule = draw(st.sampled_from(sorted(RULES.items())))
    bad = draw(bad_number(rule))
    return lambda: policies.make(name, **{param: bad.value}), param, bad


def _case_c_rule(draw):
    bad = draw(shown(st.text(max_size=6).filter(lambda s: s not in CASE_C_RULES), NOT_NUMBERS, FINITE_FLOATS, LISTS))
    return lambda: policies.make("lp_explore", case_c_rule=bad.value), "case_c_rule", bad


def _unknown_parameter(draw):
    name = draw(st.sampled_from(_built_in_policies()))
    accepted = set(inspect.signature(policies.REGISTRY[name]).parameters)
    param = draw(IDENTIFIERS.filter(lambda p: p not in accepted))
    return lambda: policies.make(name, **{param: 1.0}), param, None


def _unknown_policy(draw):
    # Import paths come from a fixed list: a drawn one could name any callable, os:system
    # included. "jaxbandit.instances:bandit" is a callable that is not a policy factory.
    bad = draw(shown(
        st.text(min_size=1, max_size=8).filter(lambda s: ":" not in s and s not in policies.REGISTRY),
        st.sampled_from([
            "jaxbandit_no_such_module:factory",
            "jaxbandit.instances:no_such_factory",
            "jaxbandit.instances:",
            ":",
            ":x",
            "jaxbandit.instances:bandit",
            "jaxbandit.instances:a..b",
            "jaxbandit.instances:DEFAULT_INSTANCES",  # not callable
            "jaxbandit.instances:default_instances",  # returns a dict
        ]),
        st.just(""), st.none(), BOOLEANS, st.integers(), LISTS,
    ))  # fmt: skip
    return lambda: policies.make(bad.value), "polic", bad  # "policy" or "a policy name"


POLICY_CASES = {
    "make.hyper-parameter": _hyper_parameter,
    "make.case_c_rule": _case_c_rule,
    "make.unknown-parameter": _unknown_parameter,
    "make.unknown-policy": _unknown_policy,
}


@pytest.mark.parametrize("case", POLICY_CASES.values(), ids=POLICY_CASES.keys())
@PER_CASE
@given(data=st.data())
def test_policies_refuse_bad_names_and_hyper_parameters(case, data):
    call, names, bad = case(data.draw)
    _raises_own(call, names, bad)


@st.composite
def bad_times(draw, horizon: int):
    """Recording times for ``horizon`` that are not strictly increasing rounds in
    ``[1, horizon]``, as Bad."""
    rounds = sorted(draw(st.sets(st.integers(1, horizon), min_size=1, max_size=4)))
    kind = draw(st.sampled_from(["entry", "order", "shape"]))
    if kind == "entry":
        value = draw(st.one_of(
            NOT_NUMBERS, NAN, INFINITIES, FRACTIONS, st.integers(-(2**70), 0), st.integers(horizon + 1, 2**70),
            st.just([2, 3]),  # ragged
            st.floats(min_value=horizon + 1, allow_infinity=False),
        ))  # fmt: skip
        return Bad(_put(rounds, draw, value), show=value)
    if kind == "order":
        times = rounds + [rounds[-1]] if len(rounds) == 1 or draw(st.booleans()) else rounds[::-1]
        return Bad(times, shown=False)
    return Bad(draw(st.sampled_from([[], [rounds], rounds[0]])), shown=False)


POLICY = policies.make("ucb_n")
INSTANCE = instances.bandit([1.0, 0.5])


_RUN_ONLY = {"params", "noise_index"}  # SimulationRun's arguments that simulate does not take


# the arguments SimulationRun checks after some JAX call (see _nothing_compiled)
_CHECKED_AFTER = {"monitor": HELPERS, "params.alpha": HELPERS, "noise_index": POLICY_CHECK}


def _simulation(argument: str, bad: Bad, names=None, case: Optional[str] = None):
    """A call of simulate or SimulationRun with ``argument=bad.value``."""

    def call(entry):
        entry = jb.SimulationRun if argument in _RUN_ONLY else entry
        kwargs = {"horizon": 10, "runs": 2, argument: bad.value}
        return lambda: entry(kwargs.pop("policy", POLICY), kwargs.pop("instance", INSTANCE), **kwargs)

    return call, names or argument, bad, _CHECKED_AFTER.get(case or argument, NOTHING)


def _choices(argument: str, values: list, shown: bool = True):
    return lambda draw: _simulation(argument, Bad(draw(st.sampled_from(values)), shown=shown))


def _params_unknown(draw):
    name = draw(IDENTIFIERS.filter(lambda p: p != "alpha"))  # ucb_n has alpha only
    return _simulation("params", Bad({name: 1.0}, shown=False), names=name)


def _params_alpha(draw):
    bad = draw(st.one_of(
        st.one_of(NOT_NUMBERS, NAN, NEGATIVE, ZERO).map(lambda v: Bad({"alpha": v}, show=v)),
        # a table of values (a grid on one instance is a list): the message gives the shape
        st.lists(POSITIVE_VALUES, min_size=1, max_size=3).map(lambda v: Bad({"alpha": [v, v]}, shown=False)),
        st.just(Bad({"alpha": []}, shown=False)),  # no cell at all
    ))  # fmt: skip
    return _simulation("params", bad, names="alpha", case="params.alpha")


SIMULATION_ARGUMENTS = {
    "horizon": lambda draw: _simulation("horizon", draw(bad_integer(1, MAX_ROUNDS))),
    "runs": lambda draw: _simulation(
        # more than 2**32 runs are refused; fewer are valid, and 2**31 of them is
        # memory the test does not want
        "runs", draw(st.one_of(bad_integer(1, huge=False), shown(st.integers(2**32 + 1, 2**100))))
    ),
    "seed": lambda draw: _simulation("seed", draw(shown(
        NOT_NUMBERS, _floats_but_whole(0, 2**64 - 1), NAN, INFINITIES, LISTS, st.integers(-(2**70), -1), st.integers(2**64, 2**100),
    ))),  # fmt: skip
    "chunk_size": lambda draw: _simulation("chunk_size", draw(bad_integer(1, MAX_ROUNDS))),
    # a huge solve_batch is taken: the buffer is speed only, and has no maximum
    "solve_batch": lambda draw: _simulation("solve_batch", draw(bad_integer(1, none=False))),
    "first_run": lambda draw: _simulation("first_run", draw(st.one_of(
        bad_integer(0, huge=False),
        unshown(st.integers(2**32, 2**100)),  # the message shows first_run + runs
    ))),  # fmt: skip
    "times": lambda draw: _simulation("times", draw(bad_times(10))),
    # "float64" is left out: without 64-bit JAX it is refused as needing jax_enable_x64,
    # which depends on the environment.
    "dtype": lambda draw: _simulation("dtype", draw(st.one_of(
        shown(st.sampled_from(["float16", "int32", "int64", "uint8", "complex64", "bool", "abc", "", "1", "V4"])),
        shown(st.none(), BOOLEANS, st.integers(), FINITE_FLOATS, st.just([]), st.just(np.float32(1.0))),
        # shown as the dtype they name: dtype(bfloat16), dtype('float16'), dtype('O')
        unshown(st.sampled_from(["bfloat16", np.float16, np.int32, object])),  # ">f4" is float32: taken
    ))),  # fmt: skip
    "params": lambda draw: _simulation("params", draw(shown(st.sampled_from([[1.0], "alpha", 1.0])))),
    "params.unknown": lambda draw: _params_unknown(draw),
    "params.alpha": lambda draw: _params_alpha(draw),
    "policy": _choices("policy", ["ucb_n", None, 1.0, policies.REGISTRY["ucb_n"]]),  # a name, a factory
    "instance": _choices("instance", [None, [1.0, 0.5], (INSTANCE.mu, INSTANCE.sigma), "bandit"], shown=False),
    "monitor": _choices("monitor", ["estimator_deviation", 1, [1.0], POLICY]),
    "devices": _choices("devices", ["cpu", [], [1], 5, ["cpu"]]),
    "noise_index": _choices("noise_index", [[0.5], [-1], [2**32], [0, 1], [[0]], [True]], shown=False),
}


@pytest.mark.parametrize("case", SIMULATION_ARGUMENTS.values(), ids=SIMULATION_ARGUMENTS.keys())
@PER_CASE
@given(data=st.data(), entry=st.sampled_from([jb.simulate, jb.SimulationRun]))
def test_simulation_arguments_are_refused_before_compiling(case, data, entry):
    call, names, bad, allow = case(data.draw)
    _raises_own(call(entry), names, bad, allow)


@st.composite
def blind_instances(draw):
    """``(instance, arm)``: a valid instance in which ``arm`` (and maybe others) reveals
    nothing about itself, ``sigma[arm, arm] = inf``, while another row observes it."""
    k = draw(st.integers(2, 6))
    mu, sigma = draw(means(k)), draw(general_sigma(k))
    blind = draw(st.sets(st.integers(0, k - 1), min_size=1, max_size=k))
    for arm in blind:
        sigma[arm, arm] = np.inf
        if np.all(np.isinf(sigma[:, arm])):
            sigma[draw(st.integers(0, k - 1).filter(lambda row: row != arm)), arm] = draw(NOISE)
    return jb.Instance(mu, sigma), int(np.flatnonzero(np.isinf(np.diagonal(sigma)))[0])


@VALID
@given(blind=blind_instances(), policy=st.sampled_from(["ucb", "ts"]))
def test_own_arm_policies_refuse_an_arm_blind_to_itself_before_compiling(blind, policy):
    """ucb and ts learn an arm only from its own plays: an instance with an inf on the
    diagonal is refused, naming sigma and the first such arm."""
    inst, arm = blind
    _raises_own(lambda: jb.SimulationRun(policies.make(policy), inst, 1, 1), ("sigma", f"arm {arm}"))


def _float32_mu(draw):
    if draw(st.booleans()):
        bad = draw(shown(FLOAT32_OVERFLOW))
        inst = instances.bandit([bad.value, 0.5])
    else:
        low, high = draw(_merged_in_float32())
        bad, inst = Bad(high), instances.bandit([high, low])
    return lambda: jb.SimulationRun(POLICY, inst, 1, 1), "mu", bad


def _float32_sigma(draw):
    bad = draw(shown(NOISE_VANISHING_IN_FLOAT32))
    inst = instances.bandit([1.0, 0.5], bad.value)
    return lambda: jb.SimulationRun(POLICY, inst, 1, 1), "sigma", bad


def _float32_hyper_parameter(draw):
    (name, param), rule = draw(st.sampled_from(sorted(RULES.items())))
    # valid in float64 (make takes them), not in float32
    bad = draw(shown(FLOAT32_ZERO, FLOAT32_BELOW_ONE) if rule == UNIT else shown(FLOAT32_OVERFLOW, FLOAT32_ZERO))

    def call():
        with _quiet():
            policy = policies.make(name, **{param: bad.value})  # float64 numbers: valid
        return jb.SimulationRun(policy, INSTANCE, 1, 1)

    return call, param, bad


def _float32_grid(draw):
    """Two cells whose values float32 holds as one: one value run under two labels."""
    (name, param), rule = draw(st.sampled_from(sorted(RULES.items())))
    low, high = draw(_merged_in_float32(2**-8, 0.5) if rule == UNIT else _merged_in_float32())
    batch = instances.stack([INSTANCE, INSTANCE])
    with _quiet():
        policy = policies.make(name)
    return lambda: jb.SimulationRun(policy, batch, 1, 1, params={param: np.array([low, high])}), param, Bad(low)


FLOAT32_CASES = {
    "instance.mu": _float32_mu,
    "instance.sigma": _float32_sigma,
    "hyper-parameter": _float32_hyper_parameter,
    "params-grid": _float32_grid,
}
# FOUND: the monitor's alphas are not checked against the simulation's dtype. A float32
# simulation takes estimator_deviation(alphas=[1e39]) (inf in float32) or [1e-46]
# (0 in float32), and so does a configuration with precision = "float32" in
# [monitor] alphas. The monitor computes jnp.asarray(alphas, dtype). Left out.


@pytest.mark.parametrize("case", FLOAT32_CASES.values(), ids=FLOAT32_CASES.keys())
@PER_CASE
@given(data=st.data())
def test_float32_simulations_refuse_values_float32_cannot_hold(case, data):
    call, names, bad = case(data.draw)
    # an instance is checked before any JAX call, hyper-parameters after make_context's helpers
    _raises_own(call, names, bad, NOTHING if case in (_float32_mu, _float32_sigma) else HELPERS)


def _lower_bound_instance(draw):
    bad = draw(unshown(st.sampled_from([None, [1.0, 0.5], (INSTANCE.mu, INSTANCE.sigma), "bandit", 1.0, INSTANCE.mu])))
    return lambda: jb.lower_bound(bad.value), "instance", bad


def _lower_bound_dtype(draw):
    bad = draw(st.one_of(
        shown(st.sampled_from(["float16", "bfloat16", "int32", "int64", "complex64", "abc", "", "1"])),
        shown(st.none(), BOOLEANS, st.integers(), FINITE_FLOATS, st.just([]), st.just(np.float64(3.0))),
        unshown(st.sampled_from([np.float16, np.int32, object])),
    ))  # fmt: skip
    return lambda: jb.lower_bound(INSTANCE, dtype=bad.value), "dtype", bad


def _lower_bound_throw(draw):
    bad = draw(shown(TEXT, st.none(), st.integers(), FINITE_FLOATS, NAN, LISTS))
    return lambda: jb.lower_bound(INSTANCE, throw=bad.value), "throw", bad


def _lower_bound_gap(draw):
    """Gaps whose 2 / gap**2 leaves float64 (or gaps beyond float32), before any LP."""
    dtype = draw(st.sampled_from([np.float64, np.float32]))
    huge = FLOAT32_OVERFLOW if dtype == np.float32 else st.floats(min_value=1e154, max_value=1e308)
    bad = draw(shown(st.floats(min_value=1e-200, max_value=1e-155), huge))
    inst = jb.Instance([0.0, -bad.value], np.ones((2, 2)))
    return lambda: jb.lower_bound(inst, dtype=dtype), ("mu", "gap"), bad


def _lower_bound_float32_sigma(draw):
    bad = draw(shown(NOISE_VANISHING_IN_FLOAT32))
    inst = jb.Instance([1.0, 0.5], [[bad.value, 1.0], [1.0, 1.0]])
    return lambda: jb.lower_bound(inst, dtype=np.float32), "sigma", bad


LOWER_BOUND_CASES = {
    "instance": _lower_bound_instance,
    "dtype": _lower_bound_dtype,
    "throw": _lower_bound_throw,
    "mu-gap": _lower_bound_gap,
    "float32-sigma": _lower_bound_float32_sigma,
}


@pytest.mark.parametrize("case", LOWER_BOUND_CASES.values(), ids=LOWER_BOUND_CASES.keys())
@PER_CASE
@given(data=st.data())
def test_lower_bound_refuses_bad_arguments_before_solving(case, data):
    call, names, bad = case(data.draw)
    _raises_own(call, names, bad)


def _geometric_times(draw):
    # num_points is at most 2**30: the grid is built in full
    name = draw(st.sampled_from(["horizon", "num_points"]))
    bad = draw(bad_integer(1 if name == "horizon" else 2, 2**62 if name == "horizon" else 2**30))
    arguments = {"horizon": 100, name: bad.value}
    return lambda: geometric_times(**arguments), name, bad


def _check_times(draw):
    horizon = draw(st.integers(1, 1000))
    if draw(st.booleans()):
        bad = draw(bad_integer(1, 2**62))
        return lambda: check_times([1], bad.value), "horizon", bad
    bad = draw(bad_times(horizon))
    return lambda: check_times(bad.value, horizon), "times", bad


def _monitor_alphas(draw):
    low, high = draw(st.floats(0.01, 100).map(lambda a: (a, a * (1 + 1e-9))))  # both reported as alpha{a:g}
    bad = draw(shown(
        FINITE_FLOATS, NOT_NUMBERS, st.just([]),
        st.lists(POSITIVE_VALUES, max_size=2).flatmap(
            lambda good: st.one_of(NOT_NUMBERS, NAN, INFINITIES, NEGATIVE, ZERO, LISTS, HUGE).map(lambda b: good + [b])
        ),
        st.just([low, high]),
    ))  # fmt: skip
    return lambda: monitors.estimator_deviation(alphas=bad.value), "alphas", bad


def _monitor_estimator_fn(draw):
    bad = draw(shown(NOT_NUMBERS, FINITE_FLOATS, LISTS))
    return lambda: monitors.estimator_deviation(estimator_fn=bad.value), "estimator_fn", bad


def _monitor_name(draw):
    bad = draw(shown(st.text(max_size=8).filter(lambda s: s not in monitors.REGISTRY)))
    return lambda: monitors.make(bad.value), "monitor", bad


TIMES_AND_MONITOR_CASES = {
    "geometric_times": _geometric_times,
    "check_times": _check_times,
    "estimator_deviation.alphas": _monitor_alphas,
    "estimator_deviation.estimator_fn": _monitor_estimator_fn,
    "monitors.make": _monitor_name,
}


@pytest.mark.parametrize("case", TIMES_AND_MONITOR_CASES.values(), ids=TIMES_AND_MONITOR_CASES.keys())
@PER_CASE
@given(data=st.data())
def test_recording_times_and_monitors_refuse_bad_arguments(case, data):
    call, names, bad = case(data.draw)
    _raises_own(call, names, bad)


# -- a configuration refuses bad values in every key ----------------------------------


def _base_config() -> dict:
    """A valid configuration with every kind of entry; each test puts one bad value in."""
    return {
        "name": "boundary",
        "seed": 1,
        "runs": 2,
        "horizon": [10, 20],
        "precision": "float32",
        "times": 5,
        "chunk_size": 8,
        "solve_batch": 4,
        "checkpoint": {"every_chunks": 2, "every_seconds": 5.0},
        "monitor": {"name": "estimator_deviation", "alphas": [1.0, 4.5]},
        "instances": [
            {"type": "bandit", "name": "b", "mu": [1.0, 0.5, 0.25], "sigma": 1.0},
            {"type": "full_information", "name": "f", "mu": [1.0, 0.5], "sigma": 1.0},
            {"type": "graph", "name": "g", "mu": [1.0, 0.5, 0.25], "sigma": 1.0,
             "adjacency": [[0, 1, 0], [0, 0, 1], [1, 0, 0]]},
            {"type": "revealing_arm", "name": "r", "mu": [1.0, 0.5], "reveal_mean": 0.0, "sigma": 1.0,
             "reveal_sigma": 0.5},
            {"type": "random", "name": "x", "seed": 3, "num_arms": 3, "mean_range": [0.0, 1.0],
             "log10_sigma_range": [-0.5, 0.5], "inf_prob": 0.3, "num_instances": 2},  # fmt: skip
            {"type": "default", "name": "bandit"},
            {"type": "explicit", "name": "e", "mu": [0.75, 0.125], "sigma": [[1.0, "inf"], [0.5, 2.0]]},
        ],
        "policies": [
            {"name": "ucb_n", "label": "U", "alpha": [0.5, 1.0]},
            {"name": "lp_explore", "alpha": 4.5, "gamma": [0.25, 0.5], "case_c_rule": "largest_deficit"},
            {"name": "ossb", "epsilon": 0.0, "gamma": 0.125},
            {"name": "eps_greedy_lp", "c": 1.0, "d": 2.0},
            {"name": "ucb_lp", "c": 1.0, "alpha": 2.0},
            {"name": "eps_greedy", "c": 2.0},
        ],
    }


BASE_POLICIES = {(i, p): RULES[(entry["name"], p)] for i, entry in enumerate(_base_config()["policies"])
                 for p in entry if (entry["name"], p) in RULES}  # fmt: skip


def test_the_base_configuration_is_valid():
    with _quiet():
        cfg = config.from_dict(_base_config())
    assert len(cfg.instances) == 8 and len(cfg.policies) == 6


@dataclasses.dataclass(frozen=True)
class Edit:
    """A bad value at ``path``, and the key the error must name.

    The key may also name a key below it ("horizon[1]" for "horizon"). ``entry`` is an
    instance entry, for the checks of a whole instance (its float32 representability);
    the error may name that entry instead. ``delete`` removes the key."""

    path: str
    bad: Bad
    key: str
    entry: Optional[str] = None
    delete: bool = False


_PART = re.compile(r"[^.\[\]]+|\[\d+\]")


def _apply(data: dict, edit: Edit) -> None:
    parts = _PART.findall(edit.path)
    target = data
    for part in parts[:-1]:
        target = target[int(part[1:-1])] if part.startswith("[") else target[part]
    last = int(parts[-1][1:-1]) if parts[-1].startswith("[") else parts[-1]
    if edit.delete:
        del target[last]
    else:
        target[last] = edit.bad.value


def _slot(path: str, strategy, key: Optional[str] = None, entry: Optional[str] = None):
    return lambda draw: Edit(path, draw(strategy), key or path, entry)


def _unknown_key(table: str, allowed: set):
    def slot(draw):
        name = draw(IDENTIFIERS.filter(lambda k: k not in allowed))
        path = f"{table}.{name}" if table else name
        return Edit(path, Bad(1, shown=False), path)

    return slot


def _missing(path: str):
    return lambda draw: Edit(path, Bad(None, shown=False), path, delete=True)


# the schema as config's docstring documents it (its private sets may go in a rewrite)
TOP_KEYS = {"name", "seed", "runs", "horizon", "precision", "times", "chunk_size", "solve_batch", "checkpoint",
            "instances", "policies", "monitor"}  # fmt: skip
CHECKPOINT_KEYS = {"every_chunks", "every_seconds"}
INSTANCE_TYPES = ("bandit", "full_information", "graph", "revealing_arm", "random", "default", "explicit", "file")

# what a configuration refuses, by the kind of value a key takes
C_NON_FINITE = st.sampled_from([math.nan, math.inf, -math.inf])  # TOML has nan and inf: refused as such
C_SCALARS = st.one_of(BOOLEANS, TEXT, st.none(), C_NON_FINITE, st.just({}))


def c_integer(minimum: int, maximum: Optional[int] = None, lists: bool = True):
    # a whole float is an integer (TOML writes 2e4 so): only those out of range are refused
    parts = [C_SCALARS, FRACTIONS, st.integers(-(2**70), minimum - 1), st.integers(-(10**6), minimum - 1).map(float)]
    if maximum is not None:
        parts.append(st.integers(maximum + 1, 2**100))
    if lists:
        parts.append(LISTS)
    return shown(*parts)


C_STRING = shown(st.integers(), FINITE_FLOATS, BOOLEANS, LISTS, st.just(""), st.just({}), st.none(), C_NON_FINITE)
C_NOT_TABLE = shown(st.integers(), TEXT, BOOLEANS, LISTS, st.none())

TOP_SLOTS = {
    "name": _slot("name", C_STRING),
    "seed": _slot("seed", c_integer(0, 2**64 - 1)),
    "runs": _slot("runs", c_integer(1, 2**32)),
    "horizon": _slot("horizon", st.one_of(c_integer(1, MAX_ROUNDS, lists=False), shown(st.just([])))),
    "horizon[1]": _slot("horizon[1]", c_integer(1, MAX_ROUNDS), key="horizon"),
    "horizon-repeated": _slot("horizon", unshown(st.integers(1, 100).map(lambda h: [h, h]))),
    "precision": _slot("precision", shown(
        st.text(max_size=8).filter(lambda s: s not in ("float32", "float64")),
        st.integers(), FINITE_FLOATS, BOOLEANS, LISTS, st.none(), C_NON_FINITE,
    )),  # fmt: skip
    # a whole float is an integer: 2.0 .. 100.0 are valid grids, 6.0 .. 20.0 valid last rounds
    "times": _slot("times", shown(C_SCALARS, _floats_but_whole(2, 100), st.integers(-(2**70), 1), st.integers(101, 2**70))),
    # the last of the explicit rounds (the longest horizon is 20)
    "times[2]": _slot("times", st.one_of(
        C_SCALARS, _floats_but_whole(6, 20), LISTS, st.integers(-(2**70), 0), st.integers(21, 2**70),
    ).map(lambda v: Bad([1, 5, v], show=v))),  # fmt: skip
    "times-order": _slot("times", unshown(st.sampled_from([[], [5, 1], [1, 1], [[1, 2]]]))),
    "chunk_size": _slot("chunk_size", c_integer(1, MAX_ROUNDS)),
    "solve_batch": _slot("solve_batch", c_integer(1)),
    "instances": _slot("instances", shown(st.integers(), TEXT, BOOLEANS, st.none(), st.just([]), st.just({}))),
    "instances[0]": _slot("instances[0]", C_NOT_TABLE),
    "policies": _slot("policies", shown(st.integers(), TEXT, BOOLEANS, st.none(), st.just([]), st.just({}))),
    "policies[0]": _slot("policies[0]", C_NOT_TABLE),
    "unknown": _unknown_key("", TOP_KEYS),
    **{f"missing-{key}": _missing(key) for key in ("runs", "horizon", "instances", "policies")},
}

CHECKPOINT_AND_MONITOR_SLOTS = {
    "checkpoint": _slot("checkpoint", C_NOT_TABLE),
    "checkpoint.every_chunks": _slot("checkpoint.every_chunks", c_integer(1)),
    "checkpoint.every_seconds": _slot("checkpoint.every_seconds", shown(C_SCALARS, NEGATIVE, ZERO, LISTS)),
    "checkpoint.unknown": _unknown_key("checkpoint", CHECKPOINT_KEYS),
    "monitor": _slot("monitor", C_NOT_TABLE),
    "monitor.name": _slot("monitor.name", shown(st.text(max_size=8).filter(lambda s: s not in monitors.REGISTRY),
                                               st.integers(), BOOLEANS, LISTS, st.none())),  # fmt: skip
    "monitor.alphas": _slot("monitor.alphas", st.one_of(
        shown(POSITIVE_VALUES, st.just([]), st.floats(0.01, 100).map(lambda a: [a, a * (1 + 1e-9)])),
        st.one_of(C_SCALARS, NEGATIVE, ZERO, NESTED).map(lambda b: Bad([1.0, b], show=b)),  # one bad entry
    )),  # fmt: skip
    "monitor.unknown": _unknown_key("monitor", {"name", "alphas"}),
    "missing-monitor.name": _missing("monitor.name"),
}


def _entry_key(i: int, name: str):
    return f"instances[{i}].{name}"


C_MEAN_ENTRY = shown(BOOLEANS, TEXT, st.none(), C_NON_FINITE, NESTED, st.just({}), st.just([]))
C_NOISE_ENTRY = shown(BOOLEANS, TEXT.filter(lambda s: s != "inf"), st.none(), C_NON_FINITE, NEGATIVE,
                      NOISE_VANISHING_IN_FLOAT64, st.just({}), st.just([]))  # fmt: skip
C_NOISE_SCALAR = shown(BOOLEANS, TEXT.filter(lambda s: s != "inf"), st.none(), C_NON_FINITE, NEGATIVE,
                       NOISE_VANISHING_IN_FLOAT64, st.just({}))  # fmt: skip
C_NOT_NUMBERS = st.one_of(BOOLEANS, TEXT.filter(lambda s: s != "inf"), st.none(), C_NON_FINITE, st.just({}))


def _mu_slots(i: int, shapes: bool) -> dict:
    slots = {
        f"instances[{i}].mu[1]": _slot(f"instances[{i}].mu[1]", C_MEAN_ENTRY, key=_entry_key(i, "mu")),
        # the whole instance is checked in float32 (the precision): a mean it overflows
        f"instances[{i}].mu[0]-float32": _slot(f"instances[{i}].mu[0]", shown(FLOAT32_OVERFLOW),
                                               key=_entry_key(i, "mu"), entry=f"instances[{i}]"),  # fmt: skip
    }
    if shapes:  # mu of another shape (the other arguments do not depend on K)
        slots[f"instances[{i}].mu-shape"] = _slot(f"instances[{i}].mu", unshown(
            st.sampled_from([0.5, [[1.0, 0.5]], [1.0], []])), key=_entry_key(i, "mu"))  # fmt: skip
    return slots


def _merged_means(draw):
    """A better arm that float32 rounds onto a worse one: refused as the whole entry."""
    low, high = draw(_merged_in_float32())
    return Edit("instances[0].mu", Bad([high, low, 0.25], show=high), "instances[0].mu", entry="instances[0]")


def _noise_scalar(i: int, strings_inf: bool, lists_shown: bool):
    parts = [C_NOISE_SCALAR, *([unshown(st.just("inf"))] if strings_inf else [])]
    # bandit takes K levels: other lengths are refused by their shape, not shown
    lists = st.lists(POSITIVE_VALUES, max_size=2) if not lists_shown else st.lists(POSITIVE_VALUES, max_size=3)
    parts.append(shown(lists) if lists_shown else unshown(lists))
    return {
        f"instances[{i}].sigma": _slot(f"instances[{i}].sigma", st.one_of(*parts)),
        f"instances[{i}].sigma-float32": _slot(f"instances[{i}].sigma", shown(NOISE_VANISHING_IN_FLOAT32),
                                               entry=f"instances[{i}]"),  # fmt: skip
    }


def _pairs(i: int, name: str):
    end = st.floats(-100, 100)
    return _slot(f"instances[{i}].{name}", st.one_of(
        shown(end, TEXT.filter(lambda s: s != "inf"), BOOLEANS, st.none(), C_NON_FINITE),
        shown(st.lists(end, max_size=1), st.lists(end, min_size=3, max_size=4)),
        shown(st.tuples(end, end).filter(lambda p: p[0] != p[1]).map(lambda p: [max(p), min(p)])),  # reversed
        _pairs_with_a_bad_end(end, st.one_of(C_NOT_NUMBERS, st.just("inf")), list),
        *([shown(st.just([-0.5, 1e300]))] if name == "log10_sigma_range" else []),
    ))  # fmt: skip


INSTANCE_SLOTS = {
    "instances[0].type": _slot("instances[0].type", shown(
        st.text(max_size=8).filter(lambda s: s not in INSTANCE_TYPES), st.integers(), BOOLEANS, LISTS, st.none())),
    "instances[0].name": _slot("instances[0].name", C_STRING),
    "instances[6].name-duplicate": _slot("instances[6].name", shown(st.sampled_from(["b", "f", "x/0", "bandit"]))),
    **_mu_slots(0, shapes=True),
    **_mu_slots(1, shapes=True),
    **_mu_slots(2, shapes=False),  # graph: another K is blamed on adjacency
    **_mu_slots(3, shapes=False),  # revealing_arm: one mean more than it is given
    **_mu_slots(6, shapes=False),  # explicit: another K is blamed on sigma
    "instances[0].mu-merged-in-float32": _merged_means,
    **_noise_scalar(0, strings_inf=True, lists_shown=False),  # bandit: one level per arm, or one for all
    **_noise_scalar(1, strings_inf=True, lists_shown=True),
    **_noise_scalar(2, strings_inf=True, lists_shown=True),
    # revealing_arm: sigma = "inf" is valid beside reveal_sigma = 0.5
    **_noise_scalar(3, strings_inf=False, lists_shown=True),
    "instances[0].sigma[1]": _slot("instances[0].sigma",
                                   C_NOISE_ENTRY.map(lambda b: Bad([1.0, b.value, 1.0], show=b.value)),
                                   key=_entry_key(0, "sigma")),  # fmt: skip
    # inf (TOML's own) is no information there, as "inf" is
    "instances[6].sigma[0][1]": _slot("instances[6].sigma[0][1]", C_NOISE_ENTRY.filter(lambda b: b.value != math.inf),
                                      key=_entry_key(6, "sigma")),  # fmt: skip
    "instances[6].sigma-float32": _slot("instances[6].sigma[1][0]", shown(NOISE_VANISHING_IN_FLOAT32),
                                        key=_entry_key(6, "sigma"), entry="instances[6]"),  # fmt: skip
    "instances[6].sigma-shape": _slot("instances[6].sigma", unshown(st.sampled_from([
        [[1.0, "inf"], [0.5]],  # ragged
        [[1.0, 1.0, 1.0]] * 3,  # K = 3 for two means
        [["inf", 1.0], ["inf", 2.0]],  # arm 0 observed by no row
        [1.0, 1.0],  # (one number is a standard bandit's: tests/test_instance_file.py)
    ]))),  # fmt: skip
    "instances[2].adjacency[0][1]": _slot("instances[2].adjacency[0][1]", st.one_of(
        # true and false are flags, as 1 and 0
        shown(st.integers(2, 2**62), st.integers(-(2**62), -1), FRACTIONS, C_NOT_NUMBERS.filter(lambda v: not isinstance(v, bool))),
        st.just(Bad("inf", show=math.inf)),  # read as the number
    ), key=_entry_key(2, "adjacency")),  # fmt: skip
    "instances[2].adjacency-shape": _slot("instances[2].adjacency", unshown(st.sampled_from([
        [[0, 1, 0, 0]] * 4, [[0, 1], [0, 0]], [0, 1, 0], 1, [[0, 1, 0], [0, 0], [1, 0, 0]],
    ]))),  # fmt: skip
    "instances[3].reveal_mean": _slot("instances[3].reveal_mean", shown(C_NOT_NUMBERS, LISTS, st.just("inf"))),
    "instances[3].reveal_mean-float32": _slot("instances[3].reveal_mean", shown(FLOAT32_OVERFLOW),
                                              entry="instances[3]"),  # fmt: skip
    "instances[3].reveal_sigma": _slot("instances[3].reveal_sigma", shown(C_NOT_NUMBERS, LISTS, NEGATIVE, st.just("inf"))),
    "instances[3].reveal_sigma-float32": _slot("instances[3].reveal_sigma", shown(NOISE_VANISHING_IN_FLOAT32),
                                               entry="instances[3]"),  # fmt: skip
    "instances[4].seed": _slot("instances[4].seed", c_integer(0)),
    "instances[4].num_arms": _slot("instances[4].num_arms",
                                   shown(C_SCALARS, FRACTIONS, LISTS, st.integers(-(2**70), 1))),  # fmt: skip
    # too large to build: the entry is named, since the size is num_arms and num_instances together
    "instances[4].num_arms-huge": _slot("instances[4].num_arms", unshown(st.just(2**63)), entry="instances[4]"),
    "instances[4].num_instances": _slot("instances[4].num_instances",
                                        shown(C_SCALARS, FRACTIONS, LISTS, st.integers(-(2**70), 0))),  # fmt: skip
    "instances[4].inf_prob": _slot("instances[4].inf_prob", shown(C_SCALARS, LISTS, NEGATIVE, AT_LEAST_ONE)),
    "instances[4].mean_range": _pairs(4, "mean_range"),
    "instances[4].log10_sigma_range": _pairs(4, "log10_sigma_range"),
    "instances[5].name": _slot("instances[5].name", shown(
        st.text(max_size=8).filter(lambda s: s not in list(instances.default_instances())),
        st.integers(), BOOLEANS, st.none(),
    )),  # fmt: skip
    **{f"instances[{i}].unknown": _unknown_key(f"instances[{i}]", allowed)
       for i, allowed in [(0, {"type", "name", "mu", "sigma"}), (2, {"type", "name", "mu", "sigma", "adjacency"}),
                          (4, {"type", "name", *inspect.signature(instances.random).parameters}),
                          (5, {"type", "name"}), (6, {"type", "name", "mu", "sigma"})]},  # fmt: skip
    **{f"missing-{path}": _missing(path) for path in (
        "instances[0].mu", "instances[2].adjacency", "instances[4].seed", "instances[4].num_arms",
        "instances[5].name", "instances[6].sigma",
    )},  # fmt: skip
}


def _config_bad_hyper_parameter(rule: str):
    """What a policy's key refuses as a grid value: C_SCALARS, the rule's range, and
    values float32 (the precision) holds as inf or 0."""
    parts = [C_SCALARS, NEGATIVE, FLOAT32_OVERFLOW, FLOAT32_ZERO, NESTED]
    if rule != NONNEGATIVE:
        parts.append(ZERO)
    if rule == UNIT:
        parts += [AT_LEAST_ONE, FLOAT32_BELOW_ONE]
    return shown(*parts)


def _hyper_parameter_slot(i: int, param: str, rule: str):
    path = f"policies[{i}].{param}"

    def slot(draw):
        bad = draw(_config_bad_hyper_parameter(rule))
        if draw(st.booleans()):  # one cell of a grid
            return Edit(path, Bad([GOOD[rule], bad.value], show=bad.value), path)
        if isinstance(bad.value, list):  # a grid itself: its first value is the bad one
            return Edit(path, Bad(bad.value, show=bad.value[0]), path)
        return Edit(path, bad, path)

    return slot


def _grid_slot(i: int, param: str, rule: str):
    """Grids that are not grids of distinct values (as float32 holds them)."""
    path = f"policies[{i}].{param}"

    def slot(draw):
        low, high = draw(_merged_in_float32(2**-8, 0.5) if rule == UNIT else _merged_in_float32())
        bad = draw(st.sampled_from([
            Bad([low, high], show=high),  # one value in float32
            Bad([low, low], show=low),  # repeated
            Bad([], shown=False),  # empty
        ]))  # fmt: skip
        return Edit(path, bad, path)

    return slot


POLICY_SLOTS = {
    **{f"policies[{i}].{p}": _hyper_parameter_slot(i, p, rule) for (i, p), rule in BASE_POLICIES.items()},
    **{f"policies[{i}].{p}-grid": _grid_slot(i, p, rule) for (i, p), rule in BASE_POLICIES.items()},
    "policies[1].case_c_rule": _slot("policies[1].case_c_rule", shown(
        st.text(max_size=8).filter(lambda s: s not in CASE_C_RULES), st.integers(), BOOLEANS, st.none(), st.just({}))),
    "policies[0].name": _slot("policies[0].name", shown(
        st.text(min_size=1, max_size=8).filter(lambda s: ":" not in s and s not in policies.REGISTRY),
        st.sampled_from(["jaxbandit_no_such_module:factory", "jaxbandit.instances:no_such_factory", ":", ":x"]),
        st.just(""), st.integers(), BOOLEANS, LISTS, st.none(), st.just({}),
    )),  # fmt: skip
    "policies[0].label": _slot("policies[0].label", C_STRING),
    "policies[2].label-duplicate": _slot("policies[2].label", shown(st.sampled_from(["U", "lp_explore"]))),
    **{f"policies[{i}].unknown": _unknown_key(f"policies[{i}]", {"name", "label", *accepted})
       for i, accepted in [(0, {"alpha"}), (1, {"alpha", "gamma", "case_c_rule"}), (5, {"c"})]},  # fmt: skip
    "missing-policies[0].name": _missing("policies[0].name"),
}


def _read_inf(value):
    """``value`` as an instance entry reads it: "inf" strings (any case, +, spaces) as inf."""
    if isinstance(value, list):
        return [_read_inf(v) for v in value]
    if isinstance(value, str) and value.strip().lower() in ("inf", "+inf", "infinity", "+infinity"):
        return math.inf
    return value


def _check_config_slot(slot, data) -> None:
    edit = slot(data.draw)
    raw = _base_config()
    _apply(raw, edit)
    with _quiet(), _nothing_compiled(), pytest.raises((ValueError, TypeError)) as excinfo:
        config.from_dict(copy.deepcopy(raw))
    bad = edit.bad
    assert_own_error(excinfo, ())
    err = excinfo.value
    assert isinstance(err, ConfigError), f"{type(err).__name__}: {err}"
    allowed = {edit.key} | ({edit.entry} if edit.entry else set())
    assert err.key in allowed or err.key.startswith(edit.key + "["), f"key {err.key!r}, not {edit.key!r}: {err}"
    if bad.shown:  # in the message, not in the key it names ("instances[0]" shows no 0)
        reason = str(err).replace(err.key, "") if err.key else str(err)
        # an instance entry reads "inf" strings as inf, and may show that
        read = _read_inf(bad.expected) if edit.path.startswith("instances[") else bad.expected
        assert _shows(reason, bad.expected) or _shows(reason, read), f"the error does not show {bad.expected!r}: {err}"
    text = _toml(raw)
    if text is not None:  # the same configuration as TOML: the same key
        with _quiet(), pytest.raises(ConfigError) as from_text:
            config.loads(text)
        assert from_text.value.key == err.key, f"{from_text.value} / {err}"


@pytest.mark.parametrize("slot", TOP_SLOTS.values(), ids=TOP_SLOTS.keys())
@PER_CASE
@given(data=st.data())
def test_configuration_top_level_keys_refuse_bad_values(slot, data):
    _check_config_slot(slot, data)


@pytest.mark.parametrize("slot", CHECKPOINT_AND_MONITOR_SLOTS.values(), ids=CHECKPOINT_AND_MONITOR_SLOTS.keys())
@PER_CASE
@given(data=st.data())
def test_configuration_checkpoint_and_monitor_keys_refuse_bad_values(slot, data):
    _check_config_slot(slot, data)


@pytest.mark.parametrize("slot", INSTANCE_SLOTS.values(), ids=INSTANCE_SLOTS.keys())
@PER_CASE
@given(data=st.data())
def test_configuration_instance_keys_refuse_bad_values(slot, data):
    _check_config_slot(slot, data)


@pytest.mark.parametrize("slot", POLICY_SLOTS.values(), ids=POLICY_SLOTS.keys())
@PER_CASE
@given(data=st.data())
def test_configuration_policy_keys_refuse_bad_values(slot, data):
    _check_config_slot(slot, data)


@pytest.mark.parametrize(
    "call, argument",
    [
        (lambda: jb.load(None), "directory"),
        (lambda: jb.sweep.run({"runs": 1}, None), "out_dir"),
        (lambda: jb.sweep.run([1, 2], "out"), "config"),
        (lambda: jb.config.load(3), "config"),
        (lambda: jb.load(""), "directory"),  # Path("") is the working directory
    ],
)
def test_a_path_argument_that_is_no_path_is_named(call, argument):
    """Not a traceback from pathlib or os: ``str(None)`` would be a file name."""
    with pytest.raises(jb.ArgumentError) as caught:
        call()
    assert caught.value.argument == argument


@pytest.mark.parametrize(
    "keywords, argument",
    [({"progress": print}, "progress"), ({"progress": "no"}, "progress"), ({"after_chunk": 3}, "after_chunk")],
)
def test_a_sweeps_progress_flag_and_callback_are_checked(tmp_path, keywords, argument):
    """``progress`` is a flag (``after_chunk`` is the callback): a function given for it
    would be taken as True and never called."""
    with pytest.raises(jb.ArgumentError) as caught:
        jb.sweep.run({"runs": 1}, tmp_path / "out", **keywords)
    assert caught.value.argument == argument
    assert not (tmp_path / "out").exists()
