"""The simulation engine: the only place that loops over rounds and vmaps over runs.

Every batched array is laid out ``(num_cells, num_runs, ...)``.  A *cell* is one
instance with one set of policy hyper-parameters.  A jitted *chunk* runs up to
``chunk_size`` rounds; the host loops over chunks (:mod:`jaxbandit.runner`), so memory
does not depend on the horizon and progress and checkpoints happen between chunks.

Randomness (DESIGN §4): the noise of run ``r`` at round ``t`` is a pure function of
``(seed, cell's noise index, r, t)`` (:mod:`jaxbandit.rng`), so results do not depend on
how many runs are simulated together, the chunk size, the solve buffers or the device
count, and two policies run with the same seed see the same noise.  The noise family
(:mod:`jaxbandit.noise`) is static: each family compiles its own program.

The engine counts each run's plays itself (regret comes from these counts, never from
a policy's state) and records the first round in which a policy chose an arm outside
``[0, num_arms)``, which the runner turns into an error.
"""

from __future__ import annotations

import collections
import functools
import gc
from typing import Any, Callable, NamedTuple, Optional

import jax
import jax.numpy as jnp
import numpy as np
from jax._src import dtypes as jax_dtypes

from jaxbandit import compaction, environment, estimator
from jaxbandit._types import Array
from jaxbandit.base import Context, Policy, int32_arm, saturating_finish, saturating_select
from jaxbandit.compile_options import Program
from jaxbandit.fingerprint import computation_key, numpy_arrays, stable_digest
from jaxbandit.instances import Instance
from jaxbandit.monitors import Monitor
from jaxbandit.noise import GAUSSIAN, NoiseFamily
from jaxbandit.placement import per_device
from jaxbandit.policy_check import PolicyError
from jaxbandit.reductions import ordered_sum

__all__ = [
    "DEFAULT_CHUNK_SIZE",
    "EngineCarry",
    "MAX_ROUNDS",
    "Simulation",
    "cached_simulation",
    "drop_older_jax_copies",
    "make_context",
    "make_simulation",
    "policy_key",
]

DEFAULT_CHUNK_SIZE = 1024
# Largest horizon and chunk size.  Round counts are int32 on the device, and a chunk's
# end and the next consolidation are computed past the current round: this keeps them
# far from overflowing (where they would stall the simulation).
MAX_ROUNDS = 2**30
_CACHE_SIZE = 32  # compiled engines kept per process (each holds its executables)


class EngineCarry(NamedTuple):
    """Everything the loop over rounds carries: a checkpoint of a simulation."""

    state: Any  # policy state, leaves (C, R, ...)
    counts: Array  # (C, R, K) int32 plays of each arm
    regret: Array  # (C, R, P) regret at the recording times so far
    invalid_round: Array  # (C, R) int32 first round with an arm outside [0, K); 0 if none
    invalid_arm: Array  # (C, R) int32 the arm chosen then
    nan_round: Array  # (C, R) int32 first round at which the state was seen to hold a NaN; 0 if none
    next_record: Array  # () int32 index into the recording times
    round: Array  # () int32 rounds done
    monitor_state: Any = None  # a monitor's state, leaves (C, R, ...)
    monitor_record: Any = None  # {name: (C, R, P)} its reports at the recording times


class Simulation(NamedTuple):
    """The jitted pieces of the engine for one policy (built by :func:`make_simulation`)."""

    init: Callable  # (ctx, num_runs, num_times) -> EngineCarry
    run_chunk: Callable  # (carry, t0, horizon, times, noise_keys, policy_keys, env, ctx, mesh) -> carry
    diagnostics: Callable  # (state) -> {name: (C, R)}
    chunk_size: int
    as_built: Callable  # () -> bool: its policy and monitor still compute what they did when it was built
    built_from: tuple  # (policy, monitor): the objects its functions close over


def _vmap_cells_runs(fn, run_axes, cell_axes):
    """vmap ``fn`` over runs (inner) then cells (outer).

    With a single cell, the per-cell arguments (the instance, the context) enter
    unbatched: a row lookup such as ``precision[arm]`` is then a gather on the arm
    alone, without building (cell, arm) index pairs every round.
    """
    per_cell = tuple(r is None and c == 0 for r, c in zip(run_axes, cell_axes))

    def call(*args):
        cell_leaves = [jax.tree_util.tree_leaves(a) for a, p in zip(args, per_cell) if p]
        single = any(leaves and leaves[0].shape[0] == 1 for leaves in cell_leaves)
        axes = cell_axes
        if single:
            args = tuple(jax.tree_util.tree_map(lambda x: x[0], a) if p else a for a, p in zip(args, per_cell))
            axes = tuple(None if p else c for c, p in zip(cell_axes, per_cell))
        return jax.vmap(jax.vmap(fn, in_axes=run_axes), in_axes=axes)(*args)

    return call


def _record_invalid(carry: EngineCarry, arm: Array, round_number: Array, num_arms: int):
    """Keep the first round (and arm) where ``arm`` left ``[0, num_arms)``, per run."""
    first = ((arm < 0) | (arm >= num_arms)) & (carry.invalid_round == 0)
    return (
        jnp.where(first, round_number, carry.invalid_round),
        jnp.where(first, arm, carry.invalid_arm),
    )


def _per_run(init_fn, ctx: Context, num_runs: int):
    """``init_fn`` of each cell, broadcast to its runs: leaves ``(C, R, ...)``."""
    state = jax.vmap(init_fn)(ctx)
    return jax.tree_util.tree_map(lambda x: jnp.broadcast_to(x[:, None], (x.shape[0], num_runs) + x.shape[1:]), state)


def _make_init(policy: Policy, monitor: Optional[Monitor]) -> Callable:
    """``(ctx, num_runs, num_times) -> EngineCarry`` before the first round."""

    def init(ctx: Context, num_runs: int, num_times: int) -> EngineCarry:
        num_cells, num_arms = ctx.true_mean.shape
        no_run = jnp.zeros((num_cells, num_runs), jnp.int32)
        monitor_state = monitor_record = None
        if monitor is not None:
            monitor_state = _per_run(monitor.init_fn, ctx, num_runs)
            report = jax.eval_shape(jax.vmap(jax.vmap(monitor.report_fn)), monitor_state)
            monitor_record = {k: jnp.zeros(s.shape + (num_times,), s.dtype) for k, s in report.items()}
        return EngineCarry(
            state=_per_run(policy.init_fn, ctx, num_runs),
            counts=jnp.zeros((num_cells, num_runs, num_arms), jnp.int32),
            regret=jnp.zeros((num_cells, num_runs, num_times), ctx.true_mean.dtype),
            invalid_round=no_run,
            invalid_arm=no_run,
            nan_round=no_run,
            next_record=jnp.zeros((), jnp.int32),
            round=jnp.zeros((), jnp.int32),
            monitor_state=monitor_state,
            monitor_record=monitor_record,
        )

    return init


def _make_round(policy: Policy, solve_batch: Optional[int], monitor: Optional[Monitor], noise: NoiseFamily) -> Callable:
    """``(carry, t, noise_keys, policy_keys, env, ctx) -> carry``: round ``t + 1`` of every run."""
    select = _vmap_cells_runs(saturating_select(policy.select_fn), (0, 0, None, None), (0, 0, None, 0))
    update = _vmap_cells_runs(policy.update_fn, (0, 0, 0, None), (0, 0, 0, 0))

    def observe_one(run_key, t, arm, env):
        return environment.observe(run_key, t, arm, env, noise)

    observe = _vmap_cells_runs(observe_one, (0, None, 0, None), (0, None, 0, 0))
    solver = policy.solver
    if solver is not None:
        finish = _vmap_cells_runs(saturating_finish(solver.finish_fn), (0, 0, 0, None, None), (0, 0, 0, None, 0))
    if monitor is not None:
        watch = _vmap_cells_runs(monitor.update_fn, (0, 0, None, None), (0, 0, None, 0))

    def one_round(carry: EngineCarry, t: Array, noise_keys, policy_keys, env, ctx) -> EngineCarry:
        round_number = t + 1  # policies count rounds from 1
        monitor_state = None if monitor is None else watch(carry.monitor_state, carry.state, round_number, ctx)
        decision = select(policy_keys, carry.state, round_number, ctx)
        state = carry.state
        if solver is None:
            arm = decision.arm
        else:
            answer, state = compaction.serve_solver(solver, decision, state, ctx, solve_batch)
            arm, state = finish(state, decision, answer, round_number, ctx)
        arm = int32_arm(arm)
        num_arms = carry.counts.shape[-1]
        invalid_round, invalid_arm = _record_invalid(carry, arm, round_number, num_arms)
        values = observe(noise_keys, t, arm, env)
        state = update(state, arm, values, ctx)
        counts = carry.counts + jax.nn.one_hot(arm, num_arms, dtype=jnp.int32)
        return carry._replace(
            state=state, counts=counts, invalid_round=invalid_round, invalid_arm=invalid_arm, monitor_state=monitor_state
        )

    return one_round


def _make_record(monitor: Optional[Monitor]) -> Callable:
    """``(carry, regret, monitor_record, next_record, env) -> (regret, monitor_record, next_record)``."""

    def record(carry: EngineCarry, regret, monitor_record, next_record, env):
        """Write the current pseudo-regret (and the monitor's report) into slot ``next_record``."""
        gaps = jax.vmap(environment.gaps)(env.mu)  # (C, K)
        # Elementwise products summed in a fixed order, not a dot: a run's regret must
        # not depend on how many runs share the program (or a device).
        current = ordered_sum(carry.counts.astype(gaps.dtype) * gaps[:, None, :])  # (C, R)
        if monitor is not None:
            report = jax.vmap(jax.vmap(monitor.report_fn))(carry.monitor_state)
            monitor_record = {k: v.at[:, :, next_record].set(report[k]) for k, v in monitor_record.items()}
        return regret.at[:, :, next_record].set(current), monitor_record, next_record + 1

    return record


def _make_chunk(one_round: Callable, record: Callable, consolidate: Optional[Callable], chunk_size: int) -> Callable:
    """``(carry, t0, horizon, times, noise_keys, policy_keys, env, ctx, mesh) -> carry``:
    up to ``chunk_size`` rounds from round ``t0``, on each device of ``mesh`` over its own
    runs (:func:`~jaxbandit.placement.per_device`; ``None``: one device).

    Loops with traced trip counts: the last chunk simply runs fewer rounds.  The chunk
    is cut into segments that end at the next recording time or the next consolidation
    (fixed round counts, so results do not depend on the chunk size), so the per-round
    body has no branch at all.
    """

    def local_chunk(carry, t0, horizon, times, noise_keys, policy_keys, env, ctx):
        end = jnp.minimum(horizon, t0 + chunk_size)
        num_times = times.shape[0]

        def body(t, carry):
            return one_round(carry, t, noise_keys, policy_keys, env, ctx)

        def segment(carry):
            start = carry.round
            pending = carry.next_record < num_times
            next_time = jnp.where(pending, times[jnp.minimum(carry.next_record, num_times - 1)], end)
            stop = jnp.minimum(jnp.minimum(end, estimator.next_consolidation(start)), next_time)
            carry = jax.lax.fori_loop(start, stop, body, carry)
            carry = carry._replace(round=stop)
            # Branch only on what a branch changes: a cond over the whole carry copies it.
            regret, monitor_record, next_record = jax.lax.cond(
                pending & (stop == next_time),
                lambda r, m, i: record(carry, r, m, i, env),
                lambda r, m, i: (r, m, i),
                carry.regret,
                carry.monitor_record,
                carry.next_record,
            )
            carry = carry._replace(regret=regret, monitor_record=monitor_record, next_record=next_record)
            due = estimator.consolidation_due(stop)
            if consolidate is not None:
                state = jax.lax.cond(due, consolidate, lambda s: s, carry.state)
                carry = carry._replace(state=state)
            # A NaN a policy wrote into its state is reported (by the runner) rather than
            # steering its choices silently.  It is looked for at rounds fixed in advance,
            # not per round (a pass over the whole state) nor at chunk ends (whether a
            # passing NaN is seen would then depend on the chunk size).
            looked = due | (stop == horizon) | (pending & (stop == next_time))
            first = looked & _holds_nan(carry.state) & (carry.nan_round == 0)
            return carry._replace(nan_round=jnp.where(first, stop, carry.nan_round))

        return jax.lax.while_loop(lambda c: c.round < end, segment, carry)

    def run_chunk(carry, t0, horizon, times, noise_keys, policy_keys, env, ctx, mesh):
        step = local_chunk if mesh is None else per_device(local_chunk, mesh)
        return step(carry, t0, horizon, times, noise_keys, policy_keys, env, ctx)

    return run_chunk


def _holds_nan(state) -> Array:
    """``(C, R)`` bool: some floating-point leaf of the run's state is NaN."""
    flags = [
        jnp.any(jnp.isnan(leaf).reshape(leaf.shape[:2] + (-1,)), axis=-1)
        for leaf in jax.tree_util.tree_leaves(state)
        if jnp.issubdtype(leaf.dtype, jnp.inexact)
    ]
    return functools.reduce(jnp.logical_or, flags) if flags else False


def make_simulation(
    policy: Policy,
    chunk_size: int = DEFAULT_CHUNK_SIZE,
    solve_batch: Optional[int] = None,
    monitor: Optional[Monitor] = None,
    noise: NoiseFamily = GAUSSIAN,
    quick_compile: bool = False,
) -> Simulation:
    """Build the jitted pieces of the engine for ``policy`` under the noise family
    ``noise`` (shapes are traced lazily); ``quick_compile``: the chunk step compiles
    with the host's compiler options (:mod:`jaxbandit.compile_options`), for a short
    simulation."""
    consolidate = None if policy.consolidate_fn is None else jax.vmap(jax.vmap(policy.consolidate_fn))
    one_round = _make_round(policy, solve_batch, monitor, noise)
    holds, as_built = _as_built(policy, monitor)
    run_chunk = as_built(_make_chunk(one_round, _make_record(monitor), consolidate, chunk_size))
    if policy.diagnostics_fn is None:
        diagnostics = lambda state: {}  # noqa: E731 - nothing to vmap (a policy may keep no arrays)
    else:
        diagnostics = jax.jit(as_built(jax.vmap(jax.vmap(policy.diagnostics_fn))))
    return Simulation(
        init=Program(as_built(_make_init(policy, monitor)), static_argnums=(1, 2)),  # runs once a simulation
        run_chunk=(Program if quick_compile else jax.jit)(run_chunk, donate_argnums=(0,), static_argnums=(8,)),
        diagnostics=diagnostics,
        chunk_size=chunk_size,
        as_built=holds,
        built_from=(policy, monitor),
    )


def changed_in_place(policy: Policy) -> PolicyError:
    """The error for a simulation whose policy (or monitor) was changed in place since it
    was set up."""
    return PolicyError(
        f"policy {policy.name!r} (or its monitor) reads other values than when its simulation was set up: "
        "something its functions read was changed in place since. Set up a simulation after the change (a new "
        "SimulationRun, jb.simulate), with a policy whose settings no later change reaches (its own closure or object)."
    )


def _as_built(policy: Policy, monitor: Optional[Monitor]) -> tuple[Callable, Callable]:
    """``(holds, guard)``: whether ``policy`` and ``monitor`` still compute what they did
    now, and a wrapper for the engine's jitted functions that refuses to trace them once
    a value they read was changed in place since the last trace (a change their own
    tracing makes, a count of traces, is what the program compiled then holds).  jit
    traces lazily and the engine's functions close over ``policy``: the program would
    otherwise be the new computation's, kept under the old one's key
    (:func:`cached_simulation`)."""
    current = lambda: (policy_key(policy), computation_key(monitor))  # noqa: E731
    built = current()
    traced_as = [built]  # the key as the last trace left it

    def guard(function: Callable) -> Callable:
        @functools.wraps(function)
        def traced(*args, **kwargs):
            if current() != traced_as[0]:
                raise changed_in_place(policy)
            drop_older_jax_copies(policy, monitor)
            out = function(*args, **kwargs)
            traced_as[0] = current()
            return out

        return traced

    return lambda: current() == built, guard


_SIMULATIONS: collections.OrderedDict = collections.OrderedDict()


def _jax_holds_older_values(array: np.ndarray) -> bool:
    """Whether JAX keeps a conversion of ``array`` to its canonical dtype (float64 to
    float32 without x64) that no longer holds the array's values.

    JAX converts a numpy array that a traced function reads once, and keeps the copy for
    as long as the copy lives: the program of an earlier simulation keeps it alive, and
    a later trace then reads the copy, not the values the array was changed to in place.
    (``jax._src.dtypes.canonicalize_value`` is that conversion; no public function
    reaches its cache.)"""
    try:
        held = np.asarray(jax_dtypes.canonicalize_value(array))
    except Exception:  # noqa: BLE001 - not a value JAX takes: its trace will say so
        return False
    return held.dtype != array.dtype and held.tobytes() != array.astype(held.dtype).tobytes()


def drop_older_jax_copies(policy: Policy, monitor: Optional[Monitor] = None) -> None:
    """Before ``policy`` is traced: drop what keeps JAX's copies of the arrays it reads
    alive where those copies hold older values: the engines built from them, then, if
    that is not enough, JAX's caches (whose programs then compile again); a PolicyError
    if something else keeps them."""
    stale = [a for a in numpy_arrays(policy, monitor) if _jax_holds_older_values(a)]
    if not stale:
        return
    for key, simulation in list(_SIMULATIONS.items()):
        if any(a is b for a in stale for b in numpy_arrays(*simulation.built_from)):
            del _SIMULATIONS[key]
    gc.collect()
    if any(_jax_holds_older_values(a) for a in stale):
        jax.clear_caches()
        gc.collect()
    if any(_jax_holds_older_values(a) for a in stale):
        raise PolicyError(
            f"policy {policy.name!r} reads a numpy array that was changed in place after an earlier simulation "
            "read it, and JAX still holds that simulation's copy of its old values (converted to "
            f"{jax_dtypes.canonicalize_value(stale[0]).dtype}); a trace would read them. Give the policy a new array "
            "instead of changing one in place (or one of JAX's canonical dtype, float32 without x64)."
        )


def policy_key(policy: Policy) -> tuple:
    """What ``policy`` computes (see :mod:`jaxbandit.fingerprint`): its functions and
    static options, never its name or the values of its traced ``params``."""
    return computation_key(
        policy.init_fn, policy.select_fn, policy.update_fn, policy.diagnostics_fn,
        policy.consolidate_fn, policy.solver, dict(policy.options), sorted(policy.params),
    )  # fmt: skip


def policy_code(policy: Policy) -> str:
    """:func:`policy_key` as a digest that every process computes alike
    (:func:`~jaxbandit.fingerprint.stable_digest`): for records checked by a later run."""
    return stable_digest(policy_key(policy))


def cached_simulation(
    policy: Policy,
    chunk_size: int,
    solve_batch: Optional[int],
    monitor: Optional[Monitor] = None,
    noise: NoiseFamily = GAUSSIAN,
    quick_compile: bool = False,
) -> Simulation:
    """The engine for ``policy`` (and ``monitor``) under ``noise``, built once per
    computation (:func:`policy_key`), noise family and compile mode
    (:func:`make_simulation`).

    Two policies share a compiled program only if they compute the same thing; numeric
    hyper-parameters live in ``ctx.params`` (traced), so a grid of them shares one.  An
    engine whose own policy was changed in place since it was built is built again (its
    functions read the policy it was built from).
    """
    key = (policy_key(policy), chunk_size, solve_batch, computation_key(monitor), noise, quick_compile)
    if key in _SIMULATIONS and not _SIMULATIONS[key].as_built():  # its policy was changed in place
        del _SIMULATIONS[key]
    if key in _SIMULATIONS:
        _SIMULATIONS.move_to_end(key)
    else:
        _SIMULATIONS[key] = make_simulation(policy, chunk_size, solve_batch, monitor, noise, quick_compile)
        while len(_SIMULATIONS) > _CACHE_SIZE:
            _SIMULATIONS.popitem(last=False)
    return _SIMULATIONS[key]


def make_context(instance: Instance, cell_params: dict, horizon: int, dtype) -> tuple[environment.EnvParams, Context]:
    """Device-side instance parameters and policy context, with a leading cell axis.

    Args:
        instance: one instance (one cell) or a batch (one cell per instance).
        cell_params: hyper-parameters, each a number or ``(C,)`` one value per cell
            (checked: :func:`jaxbandit.run_inputs.check_param_values`).
        horizon: the number of rounds.
        dtype: float32 or float64.

    Returns:
        ``(env, ctx)`` with leaves ``(C, ...)``.
    """
    mu = np.atleast_2d(instance.mu)
    sigma = instance.sigma if instance.is_batch else instance.sigma[None]
    env = environment.make_params(mu, sigma, dtype)
    num_cells = mu.shape[0]
    params = {name: jnp.asarray(np.broadcast_to(np.asarray(v, np.float64), (num_cells,)), dtype) for name, v in cell_params.items()}
    ctx = Context(
        sigma=env.sigma,
        precision=env.precision,
        horizon=jnp.asarray(np.full((num_cells,), horizon, np.int32)),
        true_mean=env.mu,
        params=params,
    )
    return env, ctx
