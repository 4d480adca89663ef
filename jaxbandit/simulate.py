"""The simulation engine: the only place that scans over time and vmaps over runs.

Layout of every batched array: ``(num_cells, num_runs, ...)``.  A *cell* is one
instance with one set of policy hyper-parameters; ``simulate`` uses one cell per
instance.  Time is a ``lax.scan`` over rounds inside a jitted *chunk* of
``chunk_size`` rounds; the host loops over chunks, so memory does not depend on the
horizon and a caller can observe progress or checkpoint between chunks.

Randomness (DESIGN §4): the noise of run ``r`` at round ``t`` is a pure function of
``(seed, instance index, r, t)`` (see :mod:`jaxbandit.rng`), so results do not depend
on the number of runs simulated together, the chunk size, the solve buffer or the
device count, and two policies run with the same seed see the same noise.
"""

from __future__ import annotations

import dataclasses
import functools
import time
from typing import Any, Callable, NamedTuple, Optional

import jax
import jax.numpy as jnp
import numpy as np

from jaxbandit import environment, estimator, rng
from jaxbandit._types import Array
from jaxbandit.base import Context, Decision, Policy
from jaxbandit.instances import Instance

__all__ = ["Result", "simulate", "geometric_times", "SimulationRun", "Simulation", "EngineCarry", "make_context"]

DEFAULT_CHUNK_SIZE = 1024


def geometric_times(horizon: int, num_points: int = 100) -> np.ndarray:
    """About ``num_points`` distinct rounds from 1 to ``horizon``, geometrically spaced.

    Returns:
        ``(P,)`` int64, strictly increasing, ``P <= num_points``, last == ``horizon``.
    """
    grid = np.geomspace(1, horizon, num_points)
    times = np.unique(np.round(grid).astype(np.int64))
    times = times[(times >= 1) & (times <= horizon)]
    if times[-1] != horizon:
        times = np.append(times, horizon)
    return times


def _check_times(times, horizon: int) -> np.ndarray:
    arr = np.asarray(times)
    if arr.ndim != 1 or arr.size == 0:
        raise ValueError(f"times must be a non-empty 1-D sequence of rounds, got shape {arr.shape}.")
    if not np.issubdtype(arr.dtype, np.integer):
        if not np.all(np.isfinite(arr)) or np.any(arr != np.round(arr)):
            raise ValueError(f"times must be integers, got {arr.tolist()}.")
        arr = arr.astype(np.int64)
    if np.any(np.diff(arr) <= 0):
        raise ValueError(f"times must be strictly increasing, got {arr.tolist()}.")
    if arr[0] < 1 or arr[-1] > horizon:
        raise ValueError(f"times must lie in [1, horizon={horizon}], got {arr.tolist()}.")
    if arr[-1] != horizon:
        arr = np.append(arr, horizon)  # the final regret is always recorded
    return arr.astype(np.int64)


def _check_positive_int(name: str, value) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        raise ValueError(f"{name} must be a positive integer, got {value!r}.")
    if value <= 0:
        raise ValueError(f"{name} must be a positive integer, got {value!r}.")
    return int(value)


def _check_dtype(dtype) -> Any:
    try:
        dtype = jnp.dtype(dtype)
    except TypeError as err:
        raise ValueError(f"dtype must be float32 or float64, got {dtype!r}.") from err
    if dtype not in (jnp.float32, jnp.float64):
        raise ValueError(f"dtype must be float32 or float64, got {dtype!r}.")
    if dtype == jnp.float64 and not jax.config.jax_enable_x64:
        raise ValueError(
            "dtype='float64' needs 64-bit JAX: set JAX_ENABLE_X64=1 or call "
            "jax.config.update('jax_enable_x64', True) before simulating."
        )
    return dtype


@dataclasses.dataclass(frozen=True)
class Result:
    """Outcome of :func:`simulate`.

    Attributes:
        times: ``(P,)`` int, increasing, last == horizon: rounds at which regret was recorded.
        regret: ``(runs, P)`` float64 pseudo-regret ``sum_j N_j(t) Delta_j`` (a leading
            instance axis for a batch of instances).
        counts: ``(runs, K)`` int64 pulls of each arm at the horizon (leading instance axis
            for a batch).
        diagnostics: per-run counters of the policy, each ``(runs,)`` (or ``(I, runs)``).
        policy: policy name;  params: its hyper-parameters;  options: static options.
        seed, horizon, runs, dtype: as simulated.  wall_time: seconds.
    """

    times: np.ndarray
    regret: np.ndarray
    counts: np.ndarray
    diagnostics: dict
    policy: str
    params: dict
    options: dict
    seed: int
    horizon: int
    runs: int
    dtype: str
    wall_time: float

    @property
    def final_regret(self) -> np.ndarray:
        """``(runs,)`` (or ``(I, runs)``) regret at the horizon."""
        return self.regret[..., -1]

    def mean_regret(self) -> np.ndarray:
        """``(P,)`` (or ``(I, P)``) mean over runs."""
        return self.regret.mean(axis=-2)

    def standard_error(self) -> np.ndarray:
        """``(P,)`` (or ``(I, P)``) standard error of the mean over runs."""
        runs = self.regret.shape[-2]
        if runs < 2:
            return np.full(self.regret.shape[:-2] + self.regret.shape[-1:], np.nan)
        return self.regret.std(axis=-2, ddof=1) / np.sqrt(runs)


class EngineCarry(NamedTuple):
    """Everything the scan carries; a checkpoint of a simulation between chunks."""

    state: Any  # policy state, leaves (C, R, ...)
    counts: Optional[Array]  # (C, R, K) int32, or None where the policy counts its plays
    regret: Array  # (C, R, P) recorded regret
    next_record: Array  # () int32 index into times
    round: Array  # () int32 rounds done


class Simulation(NamedTuple):
    """A compiled engine for one policy and shapes (built by :func:`make_simulation`)."""

    init: Callable  # (ctx, num_runs, num_times) -> EngineCarry
    run_chunk: Callable  # (carry, t0, horizon, times, noise_keys, policy_keys, env, ctx) -> carry
    diagnostics: Callable  # (state) -> dict of (C, R)
    chunk_size: int
    play_counts: Callable  # (carry) -> (C, R, K) int32


def _consolidate_estimators(state):
    """Consolidate every weighted estimator inside a (batched) policy state."""
    is_estimator = lambda x: isinstance(x, estimator.EstimatorState)
    return jax.tree_util.tree_map(
        lambda x: estimator.consolidate(x) if is_estimator(x) else x, state, is_leaf=is_estimator
    )


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
            args = tuple(
                jax.tree_util.tree_map(lambda x: x[0], a) if p else a for a, p in zip(args, per_cell)
            )
            axes = tuple(None if p else c for c, p in zip(cell_axes, per_cell))
        return jax.vmap(jax.vmap(fn, in_axes=run_axes), in_axes=axes)(*args)

    return call


def buffer_sizes(batch: int, smallest: int = 16) -> tuple:
    """The buffer sizes a compacted solve may use: ``batch``, ``batch / 4``, ... down to
    ``smallest`` (each size is one compiled copy of the solver)."""
    sizes = [batch]
    while sizes[-1] // 4 >= smallest:
        sizes.append(sizes[-1] // 4)
    return tuple(sizes)


def _solve_compacted(
    solve_fn: Callable,
    needs: Array,
    requests,
    ctx: Context,
    sizes: tuple,
    state=None,
    update_fn: Optional[Callable] = None,
    one_pass: bool = False,
    reads_state: bool = False,
):
    """Run ``solve_fn`` only for runs with ``needs``, in buffers of the given sizes.

    The requests of the runs that need a solve are gathered into a fixed-size buffer,
    solved as one vmapped batch, and scattered back; a ``while_loop`` repeats until
    every such run is served (zero times when none is), so the result never depends on
    the sizes.  Each pass takes the largest buffer the waiting runs fill (else the
    smallest): 100 waiting runs cost 64 + 16 + 16 + 16 solves, not ``sizes[0]`` = 256.

    With ``one_pass`` (a cheap ``solve_fn`` without ``update_fn``, where the fixed cost
    of a pass exceeds that of idle lanes) there is no loop: when more than a quarter of
    all runs wait, ``solve_fn`` runs for every run, with no gathers or scatters at all;
    otherwise in one pass of the smallest of the buffers ``buffer_sizes(runs / 4)``
    (not ``sizes``) that holds them all: 37 of 1000 waiting runs take one pass of 62.

    Runs that did not ask get a zero answer.  With ``update_fn``, each served run's
    ``state`` becomes ``update_fn(state, answer, ctx)`` (gathered and scattered back, so
    the cost is per served run; a leaf that ``update_fn`` returns as it received it is
    not scattered back).

    Args:
        solve_fn: ``(request, ctx) -> answer`` for one run; ``(request, ctx, state)``
            with ``reads_state``.
        needs: ``(C, R)`` bool.
        requests: pytree with leaves ``(C, R, ...)``.
        ctx: :class:`Context` with leaves ``(C, ...)``.
        sizes: decreasing buffer sizes (see :func:`buffer_sizes`).
        state: pytree with leaves ``(C, R, ...)`` (with ``update_fn`` or ``reads_state``).
        update_fn: optional ``(state, answer, ctx) -> state`` for one run.
        one_pass: see above.
        reads_state: pass each run's state to ``solve_fn``.

    Returns:
        Answers with leaves ``(C, R, ...)``, and the updated ``state``.
    """
    if one_pass and update_fn is not None:
        raise ValueError("one_pass stages cannot update states.")
    num_cells, num_runs = needs.shape
    total_runs = num_cells * num_runs
    flat = lambda x: x.reshape((total_runs,) + x.shape[2:])
    unflat = lambda x: x.reshape((num_cells, num_runs) + x.shape[1:])
    needs = flat(needs)
    requests = jax.tree_util.tree_map(flat, requests)
    position = jnp.cumsum(needs.astype(jnp.int32)) - 1
    total = position[-1] + 1
    states = None if update_fn is None and not reads_state else jax.tree_util.tree_map(flat, state)
    first = lambda tree: jax.tree_util.tree_map(lambda x: x[0], tree)
    one_state = (first(states),) if reads_state else ()
    answer_shape = jax.eval_shape(solve_fn, first(requests), first(ctx), *one_state)
    zero_answers = lambda: jax.tree_util.tree_map(lambda s: jnp.zeros((total_runs,) + s.shape, s.dtype), answer_shape)

    # With one cell every lane has the same ctx: it goes in unbatched rather than
    # gathered per lane, so what a stage derives from it (the LP's matrix) is built
    # once, not once per lane of every buffer.
    ctx_axis = None if num_cells == 1 else 0
    lane_ctx = lambda index: (
        first(ctx) if num_cells == 1 else jax.tree_util.tree_map(lambda x: x[index // num_runs], ctx)
    )

    def gather_and_solve(size, start, current_states):
        """Solve the waiting runs numbered ``start .. start + size - 1``; returns the
        answers, the runs' states and ctx, and where each lane goes (``total_runs``:
        an idle lane, dropped by the scatter)."""
        slot = jnp.where(needs & (position >= start) & (position < start + size), position - start, size)
        index = jnp.zeros((size,), jnp.int32).at[slot].set(jnp.arange(total_runs, dtype=jnp.int32), mode="drop")
        valid = jnp.arange(size, dtype=jnp.int32) < total - start
        batch_requests = jax.tree_util.tree_map(lambda x: x[index], requests)
        lane_states = None if current_states is None else jax.tree_util.tree_map(lambda x: x[index], current_states)
        batch_ctx = lane_ctx(index)
        in_axes, extra = ((0, ctx_axis, 0), (lane_states,)) if reads_state else ((0, ctx_axis), ())
        solved = jax.vmap(solve_fn, in_axes)(batch_requests, batch_ctx, *extra)
        return solved, lane_states, batch_ctx, jnp.where(valid, index, total_runs)

    scatter = lambda target: lambda a, s: a.at[target].set(s, mode="drop")

    if one_pass:
        pass_sizes = buffer_sizes(max(total_runs // 4, 1))

        def single_pass(size):
            solved, _, _, _ = gather_and_solve(size, 0, states)
            # Each run reads its lane (a run with no lane reads past the end: zeros),
            # rather than zeros scattered into: that built and copied a zero array per
            # answer leaf, every round, before scattering into it.
            lane = jnp.where(needs, position, size)
            take = lambda a: jnp.take(a, lane, axis=0, mode="fill", fill_value=0)
            return jax.tree_util.tree_map(take, solved)

        def dense():
            cells = lambda tree: jax.tree_util.tree_map(unflat, tree)
            extra = (cells(states),) if reads_state else ()
            in_axes = (0, None) + (0,) * len(extra)
            every = jax.vmap(jax.vmap(solve_fn, in_axes), (0, 0) + (0,) * len(extra))(cells(requests), ctx, *extra)
            keep = lambda a: jnp.where(needs.reshape(needs.shape + (1,) * (a.ndim - 1)), a, jnp.zeros_like(a))
            return jax.tree_util.tree_map(lambda a: keep(flat(a)), every)

        # Branch 0 evaluates every run; branch i > 0 is one pass of pass_sizes[i - 1].
        # Each branch builds its answers itself: a loop or switch carrying them copied
        # them every pass.
        fits = jnp.sum(jnp.asarray(pass_sizes, jnp.int32) >= total, dtype=jnp.int32)
        choice = jnp.where(total > pass_sizes[0], jnp.int32(0), fits)
        branches = [dense] + [functools.partial(single_pass, size) for size in pass_sizes]
        answers = jax.lax.switch(choice, branches)
        return jax.tree_util.tree_map(unflat, answers), state

    sizes = tuple(sorted({min(size, total_runs) for size in sizes}, reverse=True))
    # Only a stage that updates the states carries them through its loop; one that just
    # reads them reads the value it was given (passing a large state through a loop or
    # a cond that leaves it unchanged can cost XLA a copy of it).
    carried = states if update_fn is not None else None

    def serve(size, start, answers, carried):
        solved, lane_states, batch_ctx, target = gather_and_solve(size, start, states if carried is None else carried)
        answers = jax.tree_util.tree_map(scatter(target), answers, solved)
        if update_fn is not None:
            updated = jax.vmap(update_fn, (0, 0, ctx_axis))(lane_states, solved, batch_ctx)
            # Scatter back only the leaves the update replaced: one it returns as it got
            # them (the same traced value; vmap keeps it) is unchanged.
            carried = jax.tree_util.tree_map(
                lambda whole, old, new: whole if new is old else scatter(target)(whole, new),
                carried, lane_states, updated,
            )
        return start + size, answers, carried

    # Each pass takes the largest size the waiting runs fill, the smallest for the rest:
    # one loop per size, largest first.  Not a switch over the sizes: XLA copied the
    # carried states through its branches, every pass.
    loop = (jnp.int32(0), zero_answers(), carried)
    for size in sizes[:-1]:
        loop = jax.lax.while_loop(
            lambda loop, size=size: total - loop[0] >= size, lambda loop, size=size: serve(size, *loop), loop
        )
    loop = jax.lax.while_loop(lambda loop: loop[0] < total, lambda loop: serve(sizes[-1], *loop), loop)
    _, answers, new_states = loop
    answers = jax.tree_util.tree_map(unflat, answers)
    return answers, (state if update_fn is None else jax.tree_util.tree_map(unflat, new_states))


def _first_stage(policy: Policy, decision: Decision, state, ctx: Context, sizes: tuple):
    """``solve_fn`` for every run that asks (answers with leaves ``(C, R, ...)``)."""
    # A first stage that a check follows is the cheap one (a re-use): one pass.
    answers, _ = _solve_compacted(
        policy.solve_fn, decision.needs_solve, decision.request, ctx, sizes,
        state=state, one_pass=policy.check_fn is not None, reads_state=policy.solve_reads_state,
    )
    return answers


def _has_later_stages(policy: Policy) -> bool:
    return policy.check_fn is not None or policy.fallback_solve_fn is not None


def _later_stages(
    policy: Policy, decision: Decision, answers, state, ctx: Context, sizes: tuple, fallback_sizes: tuple
):
    """Each for the runs whose answer so far has ``needs_fallback``: ``check_fn`` (if
    any, in buffers of ``sizes``) and ``fallback_solve_fn`` (if any, in buffers of
    ``fallback_sizes``), with ``check_update_fn`` / ``fallback_update_fn`` (if any)
    applied to the states of the runs each served.  Returns ``(answers, state)``."""
    later = (
        (policy.check_fn, policy.check_update_fn, sizes),
        (policy.fallback_solve_fn, policy.fallback_update_fn, fallback_sizes),
    )
    for solve_fn, update_fn, stage_sizes in later:
        if solve_fn is None:
            continue
        needs = decision.needs_solve & answers.needs_fallback
        # Inside one stage sequence, not behind a cond per stage: XLA copied every large
        # leaf of the state a nested cond passes through (the warm starts of all runs).
        found, state = _solve_compacted(
            solve_fn, needs, decision.request, ctx, stage_sizes,
            state=state, update_fn=update_fn, reads_state=policy.solve_reads_state,
        )
        expand = lambda x: needs.reshape(needs.shape + (1,) * (x.ndim - 2))
        answers = jax.tree_util.tree_map(lambda a, f: jnp.where(expand(a), f, a), answers, found)
    return answers, state


def make_simulation(policy: Policy, chunk_size: int = DEFAULT_CHUNK_SIZE, solve_batch: Optional[int] = None) -> Simulation:
    """Build the jitted pieces of the engine for ``policy`` (shapes are traced lazily)."""


    def init(ctx: Context, num_runs: int, num_times: int) -> EngineCarry:
        state = jax.vmap(policy.init_fn)(ctx)
        state = jax.tree_util.tree_map(
            lambda x: jnp.broadcast_to(x[:, None], (x.shape[0], num_runs) + x.shape[1:]), state
        )
        num_cells, num_arms = ctx.true_mean.shape
        return EngineCarry(
            state=state,
            counts=None if policy.counts_fn else jnp.zeros((num_cells, num_runs, num_arms), jnp.int32),
            regret=jnp.zeros((num_cells, num_runs, num_times), ctx.true_mean.dtype),
            next_record=jnp.zeros((), jnp.int32),
            round=jnp.zeros((), jnp.int32),
        )

    select = _vmap_cells_runs(policy.select_fn, (0, 0, None, None), (0, 0, None, 0))
    update = _vmap_cells_runs(policy.update_fn, (0, 0, 0, None), (0, 0, 0, 0))
    observe = _vmap_cells_runs(environment.observe, (0, None, 0, None), (0, None, 0, 0))
    if policy.solve_fn is not None:
        finish = _vmap_cells_runs(policy.finish_fn, (0, 0, 0, None, None), (0, 0, 0, None, 0))

    def one_round(carry: EngineCarry, t: Array, noise_keys, policy_keys, env, ctx):
        round_number = t + 1  # policies count rounds from 1
        decision = select(policy_keys, carry.state, round_number, ctx)
        state = carry.state
        if policy.solve_fn is None:
            arm = decision.arm
        else:
            num_cells, num_runs = decision.needs_solve.shape
            batch = solve_batch or min(num_cells * num_runs, 256)
            # Full solves are rare once warm starts work: one small buffer of its own (each
            # buffer size is one more compiled copy of the solver: compile memory), sized
            # to the runs: a full solve's lanes cost work, not just launches, and a
            # round with a few of them paid for idle ones (1000 runs at K = 10, rounds
            # 4,097-5,120, ~2.5 full solves a round: 0.57-0.60 s with 7 or 8 lanes,
            # 0.89-1.17 s with 32; with 10^4 runs there are ten times as many: 32 stays).
            sizes = buffer_sizes(batch)
            fallback_sizes = (max(1, min(batch // 8, max(4, num_cells * num_runs // 128))),)
            first = lambda state: _first_stage(policy, decision, state, ctx, sizes)
            placeholder = jax.tree_util.tree_map(
                lambda s: jnp.zeros(s.shape, s.dtype), jax.eval_shape(first, state)
            )
            # Most rounds of a long run need no solve at all, and most that do are served
            # by the first stage: scalar predicates, so these are real branches and such
            # rounds skip the compaction (and its fixed cost per stage) entirely.
            answers = jax.lax.cond(jnp.any(decision.needs_solve), first, lambda s: placeholder, state)
            if _has_later_stages(policy):
                later = lambda a, s: _later_stages(policy, decision, a, s, ctx, sizes, fallback_sizes)
                waiting = jnp.any(decision.needs_solve & answers.needs_fallback)
                # The untaken branch passes the state through: XLA updates it in place.
                answers, state = jax.lax.cond(waiting, later, lambda a, s: (a, s), answers, state)
            arm, state = finish(state, decision, answers, round_number, ctx)
        arm = arm.astype(jnp.int32)
        values = observe(noise_keys, t, arm, env)
        state = update(state, arm, values, ctx)
        if policy.counts_fn is not None:
            return carry._replace(state=state)
        num_arms = carry.counts.shape[-1]
        counts = carry.counts + jax.nn.one_hot(arm, num_arms, dtype=jnp.int32)
        return carry._replace(state=state, counts=counts)

    def play_counts(carry: EngineCarry) -> Array:
        """``(C, R, K)`` plays of each arm so far."""
        if policy.counts_fn is None:
            return carry.counts
        return jax.vmap(jax.vmap(policy.counts_fn))(carry.state)

    def record(counts, regret, next_record, env):
        """Write the current pseudo-regret into slot ``next_record`` of ``regret``."""
        gaps = jax.vmap(environment.gaps)(env.mu)  # (C, K)
        # Full precision: GPUs would otherwise form float32 products in TF32.
        current = jnp.einsum(
            "crk,ck->cr", counts.astype(gaps.dtype), gaps, precision=jax.lax.Precision.HIGHEST
        )
        return regret.at[:, :, next_record].set(current), next_record + 1

    def run_chunk(carry, t0, horizon, times, noise_keys, policy_keys, env, ctx):
        # Loops with traced trip counts: the last chunk simply runs fewer rounds.  (A
        # ``cond(t < horizon)`` around each round would copy the whole carry every round,
        # which cost a third of the throughput.)  The chunk is cut into segments that end
        # where the estimators consolidate (fixed round counts, so the results do not
        # depend on the chunk size).
        end = jnp.minimum(horizon, t0 + chunk_size)
        num_times = times.shape[0]

        def body(t, carry):
            return one_round(carry, t, noise_keys, policy_keys, env, ctx)

        def segment(carry):
            # Rounds [start, stop): up to the next consolidation or recording time, so
            # the per-round body has no branch at all.
            start = carry.round
            pending = carry.next_record < num_times
            next_time = jnp.where(pending, times[jnp.minimum(carry.next_record, num_times - 1)], end)
            stop = jnp.minimum(jnp.minimum(end, estimator.next_consolidation(start)), next_time)
            carry = jax.lax.fori_loop(start, stop, body, carry)
            carry = carry._replace(round=stop)
            # Branch only on what a branch changes: a cond over the whole carry copies it.
            regret, next_record = jax.lax.cond(
                pending & (stop == next_time),
                lambda r, i: record(play_counts(carry), r, i, env),
                lambda r, i: (r, i),
                carry.regret,
                carry.next_record,
            )
            carry = carry._replace(regret=regret, next_record=next_record)
            state = jax.lax.cond(
                estimator.consolidation_due(stop), _consolidate_estimators, lambda s: s, carry.state
            )
            return carry._replace(state=state)

        return jax.lax.while_loop(lambda c: c.round < end, segment, carry)

    diagnostics = jax.jit(
        lambda state: jax.vmap(jax.vmap(policy.diagnostics_fn))(state)
    )
    return Simulation(
        init=jax.jit(init, static_argnums=(1, 2)),
        run_chunk=jax.jit(run_chunk, donate_argnums=(0,)),
        diagnostics=diagnostics,
        chunk_size=chunk_size,
        play_counts=jax.jit(play_counts),
    )


_SIMULATION_CACHE: dict = {}


def _cached_simulation(policy: Policy, chunk_size: int, solve_batch: Optional[int]) -> Simulation:
    # A policy's functions depend only on its name, its static options and the traced
    # ``ctx.params``, so one compiled engine serves every policy built with the same
    # name and options (numeric hyper-parameters do not trigger a recompile).
    key = (policy.name, tuple(sorted((k, repr(v)) for k, v in policy.options.items())), chunk_size, solve_batch)
    if key not in _SIMULATION_CACHE:
        _SIMULATION_CACHE[key] = make_simulation(policy, chunk_size, solve_batch)
    return _SIMULATION_CACHE[key]


def make_context(
    instance: Instance, params: dict, horizon: int, dtype
) -> tuple[environment.EnvParams, Context]:
    """Device-side instance parameters and policy context with a leading cell axis.

    Args:
        instance: one instance (one cell) or a batch (one cell per instance).
        params: hyper-parameters, each a scalar or a ``(num_cells,)`` sequence.
    """
    mu = np.atleast_2d(instance.mu)
    sigma = instance.sigma if instance.is_batch else instance.sigma[None]
    env = environment.make_params(mu, sigma, dtype)
    num_cells = mu.shape[0]
    cell_params = {}
    for name, value in params.items():
        value = np.asarray(value, dtype=np.float64)
        if value.ndim > 1 or (value.ndim == 1 and value.shape[0] != num_cells):
            raise ValueError(
                f"parameter {name!r} must be a scalar or have one value per cell "
                f"({num_cells}), got shape {value.shape}."
            )
        cell_params[name] = jnp.asarray(np.broadcast_to(value, (num_cells,)), dtype)
    ctx = Context(
        sigma=env.sigma,
        precision=env.precision,
        horizon=jnp.full((num_cells,), horizon, jnp.int32),
        true_mean=env.mu,
        params=cell_params,
    )
    return env, ctx


def _to_host(array) -> np.ndarray:
    """A (possibly sharded) device array as one numpy array.  With several processes
    (multi-host ``jax.distributed``) the shards of the other hosts are gathered."""
    if jax.process_count() > 1:
        from jax.experimental import multihost_utils

        return np.asarray(multihost_utils.process_allgather(array, tiled=True))
    return np.asarray(array)


class SimulationRun:
    """A simulation in progress: advance it chunk by chunk, checkpoint it, resume it.

    ``simulate`` is the one-call front end; sweeps use this class directly to save the
    engine state at chunk boundaries.  A *cell* is one instance with one set of policy
    hyper-parameters: pass a batch ``instance`` (one per cell) and/or ``params`` with one
    value per cell.  ``noise_index`` gives each cell's index in the noise stream (cells
    that share an instance should share it, so they see the same noise).

    With several JAX devices the runs axis is sharded over all of them (a
    ``NamedSharding`` over a 1-D mesh); results are identical to one device because each
    run's noise depends only on its own index.
    """

    def __init__(
        self,
        policy: Policy,
        instance: Instance,
        horizon: int,
        runs: int,
        seed: int = 0,
        times=None,
        *,
        params: Optional[dict] = None,
        noise_index=None,
        dtype="float32",
        chunk_size: int = DEFAULT_CHUNK_SIZE,
        solve_batch: Optional[int] = None,
        first_run: int = 0,
        devices=None,
    ):
        if not isinstance(policy, Policy):
            raise ValueError(f"policy must be a Policy from jaxbandit.policies.make, got {policy!r}.")
        if not isinstance(instance, Instance):
            raise ValueError(f"instance must be a jaxbandit.Instance, got {type(instance).__name__}.")
        self.policy = policy
        self.instance = instance
        self.horizon = _check_positive_int("horizon", horizon)
        self.runs = _check_positive_int("runs", runs)
        self.chunk_size = _check_positive_int("chunk_size", chunk_size)
        if solve_batch is not None:
            solve_batch = _check_positive_int("solve_batch", solve_batch)
        if isinstance(first_run, bool) or not isinstance(first_run, (int, np.integer)) or first_run < 0:
            raise ValueError(f"first_run must be a non-negative integer, got {first_run!r}.")
        if first_run + runs > 2**32:
            raise ValueError(f"run indices must stay below 2**32, got first_run + runs = {first_run + runs}.")
        rng.seed_words(seed)  # validates the seed
        self.seed = int(seed)
        self.dtype = _check_dtype(dtype)
        self.times = geometric_times(self.horizon) if times is None else _check_times(times, self.horizon)
        self.params = dict(policy.params if params is None else params)
        self._sim = _cached_simulation(policy, self.chunk_size, solve_batch)
        self._env, self._ctx = make_context(instance, self.params, self.horizon, self.dtype)
        num_cells = self._env.mu.shape[0]
        if noise_index is None:
            noise_index = np.arange(num_cells)
        noise_index = np.asarray(noise_index)
        if noise_index.shape != (num_cells,) or np.any(noise_index < 0):
            raise ValueError(f"noise_index must be {num_cells} non-negative integers, got {noise_index!r}.")

        self.devices = list(jax.devices() if devices is None else devices)
        # Pad the runs to a multiple of the device count; padded runs are real runs with
        # larger indices, simulated and then dropped, so they change nothing.
        self._padded_runs = -(-self.runs // len(self.devices)) * len(self.devices)
        self._sharding = None
        if len(self.devices) > 1:
            mesh = jax.sharding.Mesh(np.array(self.devices), ("runs",))
            self._sharding = jax.sharding.NamedSharding(mesh, jax.sharding.PartitionSpec(None, "runs"))
        cell_index = jnp.asarray(noise_index, jnp.uint32)[:, None]
        run_index = jnp.arange(first_run, first_run + self._padded_runs, dtype=jnp.uint32)[None, :]
        self._noise_keys = self._shard(rng.run_keys(rng.stream_key(seed, rng.NOISE_STREAM), cell_index, run_index))
        self._policy_keys = self._shard(rng.run_keys(rng.stream_key(seed, rng.POLICY_STREAM), cell_index, run_index))
        self._times_device = jnp.asarray(self.times, jnp.int32)
        self.carry = self._shard_carry(self._sim.init(self._ctx, self._padded_runs, len(self.times)))
        self.wall_time = 0.0

    def _shard(self, array):
        if self._sharding is None:
            return array
        return jax.device_put(array, self._sharding)

    def _shard_carry(self, carry: EngineCarry) -> EngineCarry:
        if self._sharding is None:
            return carry
        batched = lambda x: self._shard(x) if x.ndim >= 2 else x
        return EngineCarry(
            state=jax.tree_util.tree_map(batched, carry.state),
            counts=None if carry.counts is None else self._shard(carry.counts),
            regret=self._shard(carry.regret),
            next_record=carry.next_record,
            round=carry.round,
        )

    @property
    def rounds_done(self) -> int:
        return int(self.carry.round)

    @property
    def done(self) -> bool:
        return self.rounds_done >= self.horizon

    def _chunk_arguments(self) -> tuple:
        return (
            self.carry,
            jnp.int32(self.rounds_done),
            jnp.int32(self.horizon),
            self._times_device,
            self._noise_keys,
            self._policy_keys,
            self._env,
            self._ctx,
        )

    def compile(self) -> float:
        """Compile the chunk step now rather than in the first :meth:`advance`; returns
        the seconds it took (so that compilation and simulation can be timed apart).

        The executable goes to JAX's caches, which :meth:`advance` then hits: it is
        shared by every run with the same policy, chunk size, solve batch and shapes in
        this process.  Results do not change.
        """
        start = time.perf_counter()
        self._sim.run_chunk.lower(*self._chunk_arguments()).compile()
        return time.perf_counter() - start

    def advance(self, max_chunks: Optional[int] = None, progress: Optional[Callable[[int, int], None]] = None) -> int:
        """Run up to ``max_chunks`` chunks (all remaining by default); returns rounds done.

        The first call also compiles the chunk step (counted in :attr:`wall_time`) unless
        :meth:`compile` did."""
        chunks = 0
        while not self.done and (max_chunks is None or chunks < max_chunks):
            start = time.perf_counter()
            self.carry = self._sim.run_chunk(*self._chunk_arguments())
            # The next chunk starts where this one ended; rounds beyond the horizon were
            # skipped, so the round counter is min(first round + chunk, horizon).
            jax.block_until_ready(self.carry.round)
            self.wall_time += time.perf_counter() - start
            chunks += 1
            if progress is not None:
                progress(self.rounds_done, self.horizon)
        return self.rounds_done

    def diagnostics(self) -> dict:
        """The policy's per-run counters now: ``{name: (C, runs) numpy}``."""
        values = self._sim.diagnostics(self.carry.state)
        return {k: _to_host(v)[:, : self.runs] for k, v in values.items()}

    def checkpoint(self) -> dict:
        """The engine state as a flat dict of numpy arrays (exact; see :meth:`restore`)."""
        leaves = jax.tree_util.tree_leaves(self.carry)
        arrays = {f"leaf_{i:04d}": _to_host(leaf) for i, leaf in enumerate(leaves)}
        arrays["wall_time"] = np.asarray(self.wall_time)
        return arrays

    def restore(self, arrays: dict) -> None:
        """Resume from :meth:`checkpoint` output of an identically configured run."""
        leaves, treedef = jax.tree_util.tree_flatten(self.carry)
        if len(arrays) - 1 != len(leaves):
            raise ValueError("checkpoint does not match this simulation (different policy or shapes).")
        restored = []
        for i, leaf in enumerate(leaves):
            saved = np.asarray(arrays[f"leaf_{i:04d}"])
            if saved.shape != leaf.shape or saved.dtype != leaf.dtype:
                raise ValueError(
                    f"checkpoint leaf {i} has shape {saved.shape} {saved.dtype}, expected "
                    f"{leaf.shape} {leaf.dtype}."
                )
            restored.append(jnp.asarray(saved))
        self.carry = self._shard_carry(jax.tree_util.tree_unflatten(treedef, restored))
        self.wall_time = float(arrays["wall_time"])

    def result(self) -> Result:
        """The :class:`Result` (call when :attr:`done`)."""
        if not self.done:
            raise RuntimeError(f"simulation not finished: {self.rounds_done} of {self.horizon} rounds done.")
        runs = self.runs
        diagnostics = self.diagnostics()
        regret = _to_host(self.carry.regret).astype(np.float64)[:, :runs]
        counts = _to_host(self._sim.play_counts(self.carry)).astype(np.int64)[:, :runs]
        single = not self.instance.is_batch and all(np.ndim(v) == 0 for v in self.params.values())
        if single:
            regret, counts = regret[0], counts[0]
            diagnostics = {k: v[0] for k, v in diagnostics.items()}
        return Result(
            times=self.times,
            regret=regret,
            counts=counts,
            diagnostics=diagnostics,
            policy=self.policy.name,
            params={k: (np.asarray(v).tolist()) for k, v in self.params.items()},
            options=dict(self.policy.options),
            seed=self.seed,
            horizon=self.horizon,
            runs=runs,
            dtype=str(jnp.dtype(self.dtype)),
            wall_time=self.wall_time,
        )


def simulate(
    policy: Policy,
    instance: Instance,
    horizon: int,
    runs: int,
    seed: int = 0,
    times=None,
    *,
    dtype="float32",
    chunk_size: int = DEFAULT_CHUNK_SIZE,
    solve_batch: Optional[int] = None,
    first_run: int = 0,
    devices=None,
    progress: Optional[Callable[[int, int], None]] = None,
) -> Result:
    """Simulate ``runs`` independent runs of ``policy`` on ``instance`` for ``horizon`` rounds.

    Args:
        policy: from :func:`jaxbandit.policies.make`.
        instance: an :class:`~jaxbandit.instances.Instance` (or a batch of them: every
            output then gets a leading instance axis).
        horizon: number of rounds T >= 1.
        runs: number of independent runs R >= 1.
        seed: integer seed; run ``r`` of instance ``i`` is the same whatever ``runs``,
            ``chunk_size``, ``solve_batch`` or the number of devices.
        times: rounds at which to record regret (default: ~100 geometric points);
            ``horizon`` is always included.
        dtype: ``"float32"`` (default) or ``"float64"`` (needs ``jax_enable_x64``).
        chunk_size: rounds per compiled chunk (memory and progress granularity only).
        solve_batch: size of the buffer of runs solved together in a round (policies with
            a ``solve_fn``; not the cheap first stage of a policy with a ``check_fn``,
            which takes one pass of up to a quarter of the runs, nor the full solve of a
            policy with a ``fallback_solve_fn``, whose buffer is ``max(4, runs // 128)``
            capped at ``solve_batch // 8``, and at least 1; ``solve_batch`` defaults to
            ``min(runs, 256)``); does not change results.
        first_run: index of the first run (to simulate runs ``first_run ...`` separately).
        devices: JAX devices to shard the runs over (default: all visible devices).
        progress: optional ``callback(rounds_done, horizon)`` called after each chunk.

    Returns:
        A :class:`Result`.
    """
    run = SimulationRun(
        policy,
        instance,
        horizon,
        runs,
        seed,
        times,
        dtype=dtype,
        chunk_size=chunk_size,
        solve_batch=solve_batch,
        first_run=first_run,
        devices=devices,
    )
    run.advance(progress=progress)
    return run.result()
