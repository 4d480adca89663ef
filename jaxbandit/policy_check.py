"""Check a policy against the contract of :mod:`jaxbandit.base` (and a monitor against
that of :mod:`jaxbandit.monitors`) before a long run starts.

An abstract evaluation (a trace: nothing is computed) of every function of the
policy on one run's shapes, made twice to see that it gives the same programs each
time, catches what would otherwise surface as an obscure tracing error deep in the
engine, or not at all: results that depend on when the engine traces a function, a
``select_fn`` that returns a float or a vector, a state whose structure or dtypes
change between ``init_fn`` and ``update_fn``, a hyper-parameter the functions read
but ``params`` lacks, a monitor report that is not one scalar per run (the engine
would record it in the wrong places).  Each error names the function, what it
returned and what was expected.
"""

from __future__ import annotations

import random
import re
import threading
from typing import Any, Callable, Mapping

import jax
import jax.numpy as jnp
from jax.extend import core as jex_core
import numpy as np

from jaxbandit._numbers import describe, is_real
from jaxbandit.base import BATCHING, OWN_ARM, Context, Decision, Policy, Solver, Stage, saturating_finish, saturating_select
from jaxbandit.estimator import EstimatorState

__all__ = ["PolicyError", "check_monitor", "check_policy", "check_policy_fields"]

_INT32 = jax.ShapeDtypeStruct((), np.int32)  # a round t, or an arm
_ADDRESS = re.compile(r" at 0x[0-9a-fA-F]+")  # of an object, in its printed form


class PolicyError(ValueError):
    """A policy breaks the contract of :mod:`jaxbandit.base`, or a monitor that of
    :mod:`jaxbandit.monitors` (the message names the function, or ``argument`` the
    hyper-parameter of ``Policy.params`` at fault)."""

    def __init__(self, message: str, *, argument: str | None = None):
        super().__init__(message)
        self.argument = argument


def _describe(tree) -> str:
    """A short, readable description of an abstract value."""
    if isinstance(tree, jax.ShapeDtypeStruct):
        weak = " (weakly typed: a Python number, or computed from one)" if getattr(tree, "weak_type", False) else ""
        return f"{tree.dtype}{list(tree.shape)}{weak}"
    leaves, treedef = jax.tree_util.tree_flatten(tree)
    if len(leaves) == 1 and treedef == jax.tree_util.tree_structure(0):
        return _describe(leaves[0])
    return f"{type(tree).__name__} {jax.tree_util.tree_map(_describe, tree)}"


class _Params(dict):
    """One cell's abstract hyper-parameters, the names the functions evaluated with
    them read (``read``), and the ``(name, jaxpr)`` of each evaluation in turn
    (``programs``)."""

    def __init__(self, params):
        super().__init__(params)
        self.read: set = set()
        self.programs: list = []


def _twice(check: Callable[[_Params], Any], params: Mapping) -> _Params:
    """Run ``check`` (every evaluation of a policy's or monitor's functions, in the
    engine's order) twice, each on its own :class:`_Params`, and raise a
    :class:`PolicyError` unless both passes traced the same programs: a function that
    reads a global that it or another function updates while traced (or a generator of
    its own: the global ones are caught by :func:`_evaluate`) gives results that depend
    on when the engine traces it (for each run count and chunk size).  Returns the
    first pass's ``_Params``."""
    passes = []
    for _ in range(2):
        passes.append(_Params(params))
        check(passes[-1])
    for (name, traced), (_, again) in zip(passes[0].programs, passes[1].programs):
        if not _same_program(traced, again):
            raise PolicyError(
                f"{name} gave another program when traced a second time: it reads something that changes while it is "
                "traced (a Python or numpy random number, a global it or another function updates), so its results "
                "would depend on the run count and chunk size; draw randomness with jaxbandit.rng from the key and "
                "keep state in the policy's state."
            )
    return passes[0]


def _same_program(traced, again) -> bool:
    """Two closed jaxprs compute the same: equal equations and equal constants, nested
    programs included (compared as structures: printing large programs is slow)."""
    return _same_value(traced, again)


def _same_arrays(x, y) -> bool:
    keys = [jax.dtypes.issubdtype(getattr(v, "dtype", None), jax.dtypes.prng_key) for v in (x, y)]
    if any(keys):  # typed random keys: the same kind of key, with the same data
        if not all(keys) or x.dtype != y.dtype:
            return False
        x, y = jax.random.key_data(x), jax.random.key_data(y)
    x, y = np.asarray(x), np.asarray(y)
    return x.shape == y.shape and x.dtype == y.dtype and np.array_equal(x, y, equal_nan=x.dtype.kind in "fc")


def _same_atom(x, y, names: dict) -> bool:
    """Two operands: the same literal, or variables bound at the same place (``names``
    maps the first program's variables to the second's)."""
    if isinstance(x, jex_core.Literal) or isinstance(y, jex_core.Literal):
        return type(x) is type(y) and x.aval == y.aval and _same_arrays(x.val, y.val)
    return names.get(x) is y


def _bind(xs, ys, names: dict) -> bool:
    """Bind each of ``xs`` to the ``ys`` at its place, if their types agree."""
    if len(xs) != len(ys) or any(type(x) is not type(y) or x.aval != y.aval for x, y in zip(xs, ys)):
        return False
    names.update(zip(xs, ys))
    return True


def _same_jaxpr(x, y) -> bool:
    names: dict = {}
    if not (_bind(x.constvars, y.constvars, names) and _bind(x.invars, y.invars, names)):
        return False
    if len(x.eqns) != len(y.eqns):
        return False
    for a, b in zip(x.eqns, y.eqns):
        if a.primitive != b.primitive or len(a.invars) != len(b.invars) or a.params.keys() != b.params.keys():
            return False
        if not all(_same_atom(u, v, names) for u, v in zip(a.invars, b.invars)):
            return False
        if not all(_same_value(a.params[key], b.params[key]) for key in a.params):
            return False
        if not _bind(a.outvars, b.outvars, names):
            return False
    return len(x.outvars) == len(y.outvars) and all(_same_atom(u, v, names) for u, v in zip(x.outvars, y.outvars))


def _same_value(x, y) -> bool:
    """Two parameters of equations (or whole programs): nested programs compared as
    structures, arrays by value, anything else as JAX prints it."""
    if isinstance(x, jex_core.ClosedJaxpr) and isinstance(y, jex_core.ClosedJaxpr):
        return _same_jaxpr(x.jaxpr, y.jaxpr) and len(x.consts) == len(y.consts) and all(
            _same_arrays(u, v) for u, v in zip(x.consts, y.consts)
        )
    if isinstance(x, jex_core.Jaxpr) and isinstance(y, jex_core.Jaxpr):
        return _same_jaxpr(x, y)
    if isinstance(x, (tuple, list)) and isinstance(y, (tuple, list)):
        return type(x) is type(y) and len(x) == len(y) and all(_same_value(u, v) for u, v in zip(x, y))
    if isinstance(x, (np.ndarray, jax.Array)) or isinstance(y, (np.ndarray, jax.Array)):
        return _same_arrays(x, y)
    if isinstance(x, frozenset):
        return x == y
    # as JAX prints a parameter: a function made anew at each trace (a callback's) is
    # the same function
    return type(x) is type(y) and _ADDRESS.sub("", str(x)) == _ADDRESS.sub("", str(y))


def _note_reads(params: _Params, jaxpr, args) -> None:
    """Add to ``params.read`` the hyper-parameters of a ``Context`` among ``args`` that
    ``jaxpr`` (of one trace on ``args``) reads: their inputs appear in an equation or
    an output (a nested computation's equation counts as a read)."""
    used = {id(v) for eqn in jaxpr.jaxpr.eqns for v in eqn.invars} | {id(v) for v in jaxpr.jaxpr.outvars}
    leaves = jax.tree_util.tree_flatten_with_path(args)[0]
    for (path, _), invar in zip(leaves, jaxpr.jaxpr.invars):
        keys = [getattr(entry, "name", getattr(entry, "key", None)) for entry in path]
        if "params" in keys[:-1] and isinstance(args[path[0].idx], Context) and id(invar) in used:
            params.read.add(keys[keys.index("params") + 1])


def _global_generators() -> tuple:
    """The states of Python's and numpy's global random generators, to compare."""
    kind, words, position, has_gauss, cached = np.random.get_state()
    return random.getstate(), kind, words.tobytes(), position, has_gauss, cached


def _drew(fn: Callable, args) -> bool:
    """Whether ``fn``, whose trace changed the global generators' states, drew from them:
    certainly where this is the only thread; else (another thread may have drawn) if
    its program changes with their states, set to four seeds and restored after."""
    if threading.active_count() == 1:
        return True
    saved = random.getstate(), np.random.get_state()
    try:
        programs = []
        for seed in range(4):
            random.seed(seed)
            np.random.seed(seed)
            programs.append(jax.make_jaxpr(lambda *a: fn(*a))(*args))
    finally:
        random.setstate(saved[0])
        np.random.set_state(saved[1])
    return any(not _same_program(programs[0], other) for other in programs[1:])


def _evaluate(name: str, fn: Callable, params: _Params, *args, with_jaxpr: bool = False):
    """The shapes of ``fn(*args)`` (with ``with_jaxpr``, the pair ``(jaxpr, shapes)``)
    from one new trace, with any failure re-raised as a :class:`PolicyError`; the
    hyper-parameters it reads are added to ``params.read``, its program to
    ``params.programs``."""
    if not callable(fn):
        raise PolicyError(f"{name} must be a function, got {fn!r}.")
    generators = _global_generators()
    try:
        # traced anew (JAX keeps the trace of a function it traced on these shapes)
        jaxpr, shapes = jax.make_jaxpr(lambda *a: fn(*a), return_shape=True)(*args)
    except PolicyError:
        raise
    except KeyError as err:
        missing = err.args[0] if err.args else None
        if isinstance(missing, str) and missing not in params:
            # the failed lookup may be ctx.params or any dict the function reads: say both
            raise PolicyError(
                f"{name} failed on one run's abstract inputs: KeyError: {missing!r}. If that is a "
                f"hyper-parameter (ctx.params[{missing!r}]), the policy's params do not define it "
                f"(params: {sorted(params)}); add it to Policy(params=...)."
            ) from err
        raise PolicyError(f"{name} failed on one run's abstract inputs: KeyError: {err}") from err
    except Exception as err:  # any failure of user code is reported with its function
        raise PolicyError(f"{name} failed on one run's abstract inputs: {type(err).__name__}: {err}") from err
    if _global_generators() != generators and _drew(fn, args):
        # a draw fixes its number into the program; the second trace may draw the same
        raise PolicyError(
            f"{name} drew from Python's or numpy's global random generator while it was traced: "
            "a number drawn then is one constant of the compiled program, the same for every run and "
            "round. Draw with jaxbandit.rng from the key the engine passes."
        )
    _note_reads(params, jaxpr, args)
    params.programs.append((name, jaxpr))
    return (jaxpr, shapes) if with_jaxpr else shapes


def _same_state(name: str, expected, got) -> None:
    """``got`` must have ``expected``'s structure, shapes and dtypes (a loop carry)."""
    if jax.tree_util.tree_structure(expected) != jax.tree_util.tree_structure(got):
        raise PolicyError(
            f"{name} returned a state of another structure than init_fn's: got "
            f"{jax.tree_util.tree_structure(got)}, expected {jax.tree_util.tree_structure(expected)}."
        )
    paths = jax.tree_util.tree_flatten_with_path(expected)[0]
    for (path, want), have in zip(paths, jax.tree_util.tree_leaves(got)):
        same = want.shape == have.shape and want.dtype == have.dtype
        if not same or getattr(want, "weak_type", False) != getattr(have, "weak_type", False):
            raise PolicyError(
                f"{name} changed the state leaf state{jax.tree_util.keystr(path)}: got {_describe(have)}, "
                f"expected {_describe(want)} as init_fn made it (a state keeps its shapes and dtypes; "
                "build leaves with an explicit dtype, e.g. jnp.asarray(x, jnp.float32))."
            )


def _scalar(name: str, what: str, value, kind: str) -> None:
    """``value`` must be a scalar of ``kind``: ``"an integer"`` or ``"a bool"``."""
    is_array = isinstance(value, jax.ShapeDtypeStruct)  # None or a tuple has no dtype to look at
    integer = is_array and jnp.issubdtype(value.dtype, jnp.integer)
    ok_dtype = integer if kind == "an integer" else is_array and value.dtype == jnp.bool_
    if not is_array or value.shape != () or not ok_dtype:
        raise PolicyError(f"{name} returned {what} = {_describe(value)}; expected {kind} scalar (shape ()).")


def _scalars(name: str, report) -> None:
    """``report`` (a policy's diagnostics, or a monitor's report) must be a dict of one
    scalar per run, named by strings (the names its records are stored under)."""
    if not isinstance(report, dict):
        raise PolicyError(f"{name} returned {_describe(report)}; expected a dict of scalars.")
    for key, value in report.items():
        if not isinstance(key, str):
            raise PolicyError(f"{name} returned the key {key!r}; expected names that are strings.")
        if not isinstance(value, jax.ShapeDtypeStruct) or value.shape != ():
            raise PolicyError(f"{name} returned {key!r} = {_describe(value)}; expected a scalar per run (shape ()).")


def _check_solver(solver, state, decision, ctx: Context, params: dict):
    if not isinstance(solver, Solver):
        raise PolicyError(f"Policy.solver must be a jaxbandit.Solver or None, got {solver!r}.")
    if not isinstance(solver.stages, tuple) or not solver.stages:
        raise PolicyError(f"Solver.stages must be a non-empty tuple of Stage, got {solver.stages!r}.")
    answer_shape = None
    for i, stage in enumerate(solver.stages):
        name = f"Solver.stages[{i}].solve_fn"
        if not isinstance(stage, Stage):
            raise PolicyError(f"Solver.stages[{i}] must be a jaxbandit.Stage, got {stage!r}.")
        if stage.batching not in BATCHING:
            raise PolicyError(f"Solver.stages[{i}].batching must be one of {BATCHING}, got {stage.batching!r}.")
        if stage.batching == "single_pass" and stage.fold_fn is not None:
            raise PolicyError(f"Solver.stages[{i}] is single_pass, which cannot have a fold_fn.")
        pair = _evaluate(name, stage.solve_fn, params, decision.request, state, ctx)
        if not isinstance(pair, tuple) or len(pair) != 2:
            raise PolicyError(f"{name} returned {_describe(pair)}; expected a pair (answer, resolved).")
        answer, resolved = pair
        _scalar(name, "resolved", resolved, "a bool")
        if answer_shape is None:
            answer_shape = answer
        elif jax.tree_util.tree_map(_describe, answer) != jax.tree_util.tree_map(_describe, answer_shape):
            raise PolicyError(
                f"{name} returned an answer {_describe(answer)}; every stage must answer like "
                f"Solver.stages[0]: {_describe(answer_shape)}."
            )
        if stage.fold_fn is not None:
            fold_name = f"Solver.stages[{i}].fold_fn"
            _same_state(fold_name, state, _evaluate(fold_name, stage.fold_fn, params, state, answer, ctx))
    finished = _evaluate("Solver.finish_fn", saturating_finish(solver.finish_fn), params, state, decision, answer_shape, _INT32, ctx)
    if not isinstance(finished, tuple) or len(finished) != 2:
        raise PolicyError(f"Solver.finish_fn returned {_describe(finished)}; expected a pair (arm, state).")
    _scalar("Solver.finish_fn", "arm", finished[0], "an integer")
    _same_state("Solver.finish_fn", state, finished[1])


def _check_estimators_consolidated(state) -> None:
    """A weighted estimator in the state needs a ``consolidate_fn``: without one its
    float32 sums silently lose accuracy (``update_fn`` cannot consolidate itself: it is
    not told the round)."""
    found = jax.tree_util.tree_flatten_with_path(state, is_leaf=lambda x: isinstance(x, EstimatorState))[0]
    paths = [jax.tree_util.keystr(path) for path, leaf in found if isinstance(leaf, EstimatorState)]
    if paths:
        raise PolicyError(
            f"the state holds a jaxbandit.estimator.EstimatorState at state{paths[0]} but the policy has no "
            "consolidate_fn, so its sums would lose accuracy over long runs; pass "
            "consolidate_fn=jaxbandit.estimator.consolidate (the state is the estimator) or a function that "
            "consolidates that field."
        )


def check_policy_fields(policy: Policy) -> None:
    """Raise :class:`PolicyError` for a :class:`~jaxbandit.base.Policy` field of the
    wrong kind: a name that is not a string, ``params`` or ``options`` that are not
    dicts with string keys, a ``params`` value that is not one number, a
    ``check_params`` that is not a function, or a ``feedback`` option other than
    :data:`~jaxbandit.base.OWN_ARM` (a misspelt one would skip the check it asks for)."""
    if not isinstance(policy.name, str):
        raise PolicyError(f"Policy.name must be a string, got {policy.name!r}.")
    for field in ("params", "options"):
        value = getattr(policy, field)
        if not isinstance(value, Mapping) or not all(isinstance(k, str) for k in value):
            raise PolicyError(f"Policy.{field} must be a dict with string keys, got {value!r}.")
    for name, value in policy.params.items():
        if not is_real(value):  # an array would be read as one value per cell of a grid
            shape = np.shape(value) if isinstance(value, (list, tuple)) or hasattr(value, "shape") else ()
            hint = (
                " A grid of values is given to jb.SimulationRun(..., params={name: [...]}) or in a sweep's configuration; "
                "an array the policy reads (a per-arm weight) belongs in its functions, not in params."
            )
            raise PolicyError(
                f"policy {policy.name!r}: Policy.params[{name!r}] must be one number, got "
                + (f"an array of shape {shape}.{hint}" if shape else f"{describe(value)}."),
                argument=name,
            )
    if policy.check_params is not None and not callable(policy.check_params):
        raise PolicyError(f"Policy.check_params must be a function or None, got {policy.check_params!r}.")
    feedback = policy.options.get("feedback", OWN_ARM)
    if feedback != OWN_ARM:
        raise PolicyError(f"Policy.options['feedback'] can only be {OWN_ARM!r}, got {feedback!r}.")


def check_policy(policy: Policy, ctx: Context) -> set:
    """Raise :class:`PolicyError` if ``policy`` breaks the contract on ``ctx``'s shapes;
    return the names of ``ctx.params`` its functions read.

    Args:
        policy: the policy to check (a :class:`~jaxbandit.base.Policy` whose fields
            :func:`check_policy_fields` passed where it entered: ``policies.make`` or
            the simulation's arguments).
        ctx: the :class:`~jaxbandit.base.Context` of ONE cell (arrays or
            ``jax.ShapeDtypeStruct``; ``sigma`` is ``(num_arms, num_arms)``).
    """
    return _twice(lambda params: _check_policy_once(policy, ctx, params), ctx.params).read


def _check_policy_once(policy: Policy, ctx: Context, params: _Params) -> None:
    """One pass of :func:`check_policy`: every function evaluated in the engine's order."""
    state = _evaluate("init_fn", policy.init_fn, params, ctx)
    key = jax.ShapeDtypeStruct((2,), np.uint32)
    select_jaxpr, decision = _evaluate("select_fn", saturating_select(policy.select_fn), params, key, state, _INT32, ctx, with_jaxpr=True)
    if not isinstance(decision, Decision):
        raise PolicyError(
            f"select_fn returned {_describe(decision)}; expected a jaxbandit.Decision "
            "(jaxbandit.policies.play(arm) for an arm that needs no solve)."
        )
    _scalar("select_fn", "Decision.arm", decision.arm, "an integer")
    _scalar("select_fn", "Decision.needs_solve", decision.needs_solve, "a bool")
    if policy.solver is not None:
        _check_solver(policy.solver, state, decision, ctx, params)
    elif decision.request is not None:
        raise PolicyError(
            f"select_fn returned a Decision with a request ({_describe(decision.request)}) but the policy has "
            "no solver, so no run would ever be served; give Policy(solver=jaxbandit.Solver(...)), or "
            "return jaxbandit.policies.play(arm)."
        )
    # needs_solve (the second output, after the arm) asks for no solve only as the constant
    # False jaxbandit.play makes: a literal in the jaxpr, which holds its value (a variable has none)
    elif getattr(select_jaxpr.jaxpr.outvars[1], "val", True):
        raise PolicyError(
            "select_fn returned a Decision whose needs_solve may be True (it is not the constant False of "
            "jaxbandit.play), but the policy has no solver: a run "
            "that asks for a solve would play Decision.arm unserved; give Policy(solver=jaxbandit.Solver(...)), "
            "or return jaxbandit.policies.play(arm)."
        )
    if policy.consolidate_fn is None:
        _check_estimators_consolidated(state)
    values = jax.ShapeDtypeStruct((ctx.sigma.shape[-1],), ctx.sigma.dtype)
    _same_state("update_fn", state, _evaluate("update_fn", policy.update_fn, params, state, _INT32, values, ctx))
    if policy.consolidate_fn is not None:
        _same_state("consolidate_fn", state, _evaluate("consolidate_fn", policy.consolidate_fn, params, state))
    if policy.diagnostics_fn is not None:
        _scalars("diagnostics_fn", _evaluate("diagnostics_fn", policy.diagnostics_fn, params, state))


def check_monitor(monitor: Any, policy: Policy, ctx: Context) -> None:
    """Raise :class:`PolicyError` if ``monitor`` breaks the contract of
    :class:`~jaxbandit.monitors.Monitor` on ``ctx``'s shapes, watching ``policy``
    (already checked by :func:`check_policy`).

    Args:
        monitor: a :class:`~jaxbandit.monitors.Monitor`.
        policy: the policy whose state it watches.
        ctx: the :class:`~jaxbandit.base.Context` of ONE cell, as for :func:`check_policy`.
    """
    _twice(lambda params: _check_monitor_once(monitor, policy, ctx, params), ctx.params)


def _check_monitor_once(monitor: Any, policy: Policy, ctx: Context, params: _Params) -> None:
    """One pass of :func:`check_monitor`."""
    state = _evaluate("monitor init_fn", monitor.init_fn, params, ctx)
    policy_state = jax.eval_shape(policy.init_fn, ctx)
    updated = _evaluate("monitor update_fn", monitor.update_fn, params, state, policy_state, _INT32, ctx)
    _same_state("monitor update_fn", state, updated)
    report = _evaluate("monitor report_fn", monitor.report_fn, params, state)
    if isinstance(report, dict) and not report:  # a monitor that reports nothing records nothing
        raise PolicyError("monitor report_fn returned {}; expected a non-empty dict of scalars.")
    _scalars("monitor report_fn", report)
