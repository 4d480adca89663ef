"""Serve a :class:`~jaxbandit.base.Solver`'s stages to just the runs that need them.

Under ``vmap`` a per-run ``lax.cond`` runs both branches for every run, so an LP solve
written inside a policy's round would cost every run every round.  Instead the engine
calls :func:`serve_solver`: the requests of the runs that need a stage are gathered
into a fixed-size buffer, solved as one vmapped batch and scattered back, repeated
until every waiting run is served (zero times when none is).  Results never depend on
the buffer sizes, only the speed does.

Batched arrays here have leaves ``(num_cells, num_runs, ...)``; the per-cell context
has leaves ``(num_cells, ...)``.
"""

from __future__ import annotations

import functools
import math
from typing import Callable, Optional

import jax
import jax.numpy as jnp

from jaxbandit._types import Array
from jaxbandit.base import Context, Decision, Solver

__all__ = ["buffer_sizes", "serve", "serve_solver", "stage_buffer_size"]

DEFAULT_SOLVE_BATCH = 256


def buffer_sizes(batch: int, smallest: int = 16) -> tuple:
    """``batch``, ``batch // 4``, ... down to ``smallest``: the buffers a
    ``"single_pass"`` stage chooses from (each size is one more compiled copy of it)."""
    sizes = [batch]
    while sizes[-1] // 4 >= smallest:
        sizes.append(sizes[-1] // 4)
    return tuple(sizes)


def stage_buffer_size(batching: str, total_runs: int, solve_batch: Optional[int]) -> int:
    """The one buffer size of a ``"compact"`` or ``"rare"`` stage (see
    :class:`~jaxbandit.base.Stage`), repeated until every waiting run is served.

    One size, not smaller ones for the last runs too: each further size would be
    another compiled copy of the stage, only to spare the idle lanes of a round's last
    pass.  A ``"compact"`` stage serves the runs an earlier stage left, a small fraction
    of them in most rounds (a burst in some), so by default its buffer is a sixteenth of
    the runs (the next power of two, 8 at least, ``DEFAULT_SOLVE_BATCH`` at most): the
    many rounds with few waiting pay for few idle lanes, and a burst costs more passes.
    A ``"rare"`` stage's lanes cost real work (a full simplex), so its buffer is sized to
    the runs (1/128 of them, 4 at least, ``solve_batch / 8`` at most) rather than to the
    batch: a round with a couple of such solves then pays for few idle lanes.
    """
    batch = solve_batch or min(total_runs, DEFAULT_SOLVE_BATCH)
    if batching == "rare":
        return max(1, min(batch // 8, max(4, total_runs // 128)))
    if solve_batch:
        return solve_batch
    sixteenth = 1 << (math.ceil(total_runs / 16) - 1).bit_length()
    return min(batch, max(8, sixteenth))


class _Runs:
    """The runs of a batch laid out flat, and what the waiting ones need."""

    def __init__(self, needs: Array, ctx: Context):
        self.num_cells, self.num_runs = needs.shape
        self.total = self.num_cells * self.num_runs
        self.needs = self.flat(needs)
        self.position = jnp.cumsum(self.needs.astype(jnp.int32)) - 1  # rank among the waiting
        self.waiting = self.position[-1] + 1
        self.ctx = ctx
        # With one cell every lane has the same ctx: it goes in unbatched rather than
        # gathered per lane, so what a stage derives from it (an LP's matrix) is built
        # once per buffer, not once per lane.
        self.ctx_axis = None if self.num_cells == 1 else 0

    def flat(self, x):
        return x.reshape((self.total,) + x.shape[2:])

    def unflat(self, x):
        return x.reshape((self.num_cells, self.num_runs) + x.shape[1:])

    def lane_ctx(self, index):
        if self.num_cells == 1:
            return jax.tree_util.tree_map(lambda x: x[0], self.ctx)
        return jax.tree_util.tree_map(lambda x: x[index // self.num_runs], self.ctx)

    def gather_and_solve(self, solve_fn, size, start, requests, states):
        """Solve the waiting runs ranked ``start .. start + size - 1``.

        Returns the answers, the lanes' states and ctx, and where each lane goes
        (``total``, past the end, for an idle lane: dropped by a scatter).
        """
        in_range = self.needs & (self.position >= start) & (self.position < start + size)
        slot = jnp.where(in_range, self.position - start, size)
        index = jnp.zeros((size,), jnp.int32).at[slot].set(jnp.arange(self.total, dtype=jnp.int32), mode="drop")
        valid = jnp.arange(size, dtype=jnp.int32) < self.waiting - start
        take = lambda tree: jax.tree_util.tree_map(lambda x: x[index], tree)
        lane_states, lane_ctx = take(states), self.lane_ctx(index)
        solved = jax.vmap(solve_fn, (0, 0, self.ctx_axis))(take(requests), lane_states, lane_ctx)
        return solved, lane_states, lane_ctx, jnp.where(valid, index, self.total)


def _single_pass(runs: _Runs, solve_fn: Callable, requests, states, answer_shape):
    """A cheap stage: every run at once when more than a quarter wait, else one pass of
    the smallest of ``buffer_sizes(total / 4)`` that holds them all (no loop: a
    pass's fixed cost exceeds that of idle lanes).  Runs not waiting get zeros."""
    pass_sizes = buffer_sizes(max(runs.total // 4, 1))

    def one_pass(size):
        solved, _, _, _ = runs.gather_and_solve(solve_fn, size, 0, requests, states)
        # Each run reads its lane (a run with no lane reads past the end: zeros), rather
        # than scattering into zeros: that would build a zero array per leaf per round.
        lane = jnp.where(runs.needs, runs.position, size)
        take = lambda a: jnp.take(a, lane, axis=0, mode="fill", fill_value=0)
        return jax.tree_util.tree_map(take, solved)

    def every_run():
        cells = lambda tree: jax.tree_util.tree_map(runs.unflat, tree)
        solved = jax.vmap(jax.vmap(solve_fn, (0, 0, None)), (0, 0, 0))(cells(requests), cells(states), runs.ctx)
        keep = lambda a: jnp.where(runs.needs.reshape(runs.needs.shape + (1,) * (a.ndim - 1)), a, jnp.zeros_like(a))
        return jax.tree_util.tree_map(lambda a: keep(runs.flat(a)), solved)

    del answer_shape  # every branch builds its own answers: carrying them copied them
    fits = jnp.sum(jnp.asarray(pass_sizes, jnp.int32) >= runs.waiting, dtype=jnp.int32)
    choice = jnp.where(runs.waiting > pass_sizes[0], jnp.int32(0), fits)
    branches = [every_run] + [functools.partial(one_pass, size) for size in pass_sizes]
    return jax.lax.switch(choice, branches)


def _compacted(runs: _Runs, solve_fn, fold_fn, size: int, requests, states, answer_shape):
    """Passes of one buffer of ``size`` until every waiting run is served; with
    ``fold_fn``, each served run's state is folded and scattered back."""
    size = min(size, runs.total)
    scatter = lambda target: lambda whole, part: whole.at[target].set(part, mode="drop")
    # Only a stage that folds carries the states through its loop; one that just reads
    # them reads the value it was given (a large state passed unchanged through a loop
    # can cost XLA a copy of it).
    carried = states if fold_fn is not None else None

    def serve_pass(start, answers, carried):
        current = states if carried is None else carried
        solved, lane_states, lane_ctx, target = runs.gather_and_solve(solve_fn, size, start, requests, current)
        answers = jax.tree_util.tree_map(scatter(target), answers, solved)
        if fold_fn is not None:
            folded = jax.vmap(fold_fn, (0, 0, runs.ctx_axis))(lane_states, solved, lane_ctx)
            # Write back only the leaves the fold replaced: one returned as it came in
            # (the same traced value, which vmap keeps) is unchanged.
            carried = jax.tree_util.tree_map(
                lambda whole, old, new: whole if new is old else scatter(target)(whole, new),
                carried, lane_states, folded,
            )  # fmt: skip
        return start + size, answers, carried

    zeros = jax.tree_util.tree_map(lambda s: jnp.zeros((runs.total,) + s.shape, s.dtype), answer_shape)
    loop = (jnp.int32(0), zeros, carried)
    _, answers, new_states = jax.lax.while_loop(lambda loop: loop[0] < runs.waiting, lambda loop: serve_pass(*loop), loop)
    return answers, (states if fold_fn is None else new_states)


def serve(
    solve_fn: Callable,
    needs: Array,
    requests,
    state,
    ctx: Context,
    *,
    size: int,
    fold_fn: Optional[Callable] = None,
    single_pass: bool = False,
):
    """Run ``solve_fn`` for exactly the runs with ``needs``.

    Args:
        solve_fn: ``(request, state, ctx) -> answer`` for one run.
        needs: ``(C, R)`` bool.
        requests, state: pytrees with leaves ``(C, R, ...)``.
        ctx: :class:`~jaxbandit.base.Context` with leaves ``(C, ...)``.
        size: the buffer size (:func:`stage_buffer_size`); unused with
            ``single_pass``, which chooses among :func:`buffer_sizes`.
        fold_fn: optional ``(state, answer, ctx) -> state`` for each served run.
        single_pass: serve a cheap stage without a loop (no ``fold_fn``).

    Returns:
        ``(answers, state)``: answers with leaves ``(C, R, ...)`` (zeros for runs that
        did not need the stage) and the state with the served runs folded.
    """
    if single_pass and fold_fn is not None:
        raise ValueError("a single_pass stage cannot have a fold_fn.")
    runs = _Runs(needs, ctx)
    flat = lambda tree: jax.tree_util.tree_map(runs.flat, tree)
    requests, states = flat(requests), flat(state)
    first = lambda tree: jax.tree_util.tree_map(lambda x: x[0], tree)
    answer_shape = jax.eval_shape(solve_fn, first(requests), first(states), first(ctx))
    if single_pass:
        answers, new_states = _single_pass(runs, solve_fn, requests, states, answer_shape), None
    else:
        answers, new_states = _compacted(runs, solve_fn, fold_fn, size, requests, states, answer_shape)
    answers = jax.tree_util.tree_map(runs.unflat, answers)
    return answers, (state if fold_fn is None else jax.tree_util.tree_map(runs.unflat, new_states))


def _serve_stage(stage, needs, decision: Decision, state, ctx, total_runs, solve_batch):
    """One stage; its answers are ``(answer, resolved)`` pairs."""
    size = stage_buffer_size(stage.batching, total_runs, solve_batch)
    fold_fn = None if stage.fold_fn is None else (lambda s, pair, c: stage.fold_fn(s, pair[0], c))
    return serve(
        stage.solve_fn, needs, decision.request, state, ctx,
        size=size, fold_fn=fold_fn, single_pass=stage.batching == "single_pass",
    )  # fmt: skip


def serve_solver(solver: Solver, decision: Decision, state, ctx: Context, solve_batch: Optional[int] = None):
    """Every stage of ``solver`` for the runs that need it; returns ``(answer, state)``.

    The first stage serves the runs with ``decision.needs_solve``; each later stage
    those the stages before it left unresolved.  Scalar predicates (does any run need
    it?) guard the first stage and the later ones as a group, so these are real
    branches and rounds without solves skip the compaction's fixed cost.  The later
    stages share one branch: XLA copied the large state leaves through a nested cond
    per stage.

    Args:
        decision: leaves ``(C, R, ...)``.
        state: the policy state, leaves ``(C, R, ...)``.

    Returns:
        The final answer of each run (leaves ``(C, R, ...)``; zeros where no stage ran)
        and the state after the stages' folds.
    """
    needs = decision.needs_solve
    total_runs = needs.shape[0] * needs.shape[1]
    first_stage, later_stages = solver.stages[0], solver.stages[1:]

    def first(state):
        return _serve_stage(first_stage, needs, decision, state, ctx, total_runs, solve_batch)

    shape = jax.eval_shape(first, state)[0]
    placeholder = jax.tree_util.tree_map(lambda s: jnp.zeros(s.shape, s.dtype), shape)
    if first_stage.fold_fn is None:
        # The state is only read: it goes in, not out (a cond that returns a large
        # value unchanged can cost XLA a copy of it).
        answered = jax.lax.cond(jnp.any(needs), lambda s: first(s)[0], lambda s: placeholder, state)
    else:
        answered, state = jax.lax.cond(jnp.any(needs), first, lambda s: (placeholder, s), state)
    if not later_stages:
        return answered[0], state

    def later(answered, state):
        for stage in later_stages:
            waiting = needs & ~answered[1]
            found, state = _serve_stage(stage, waiting, decision, state, ctx, total_runs, solve_batch)
            expand = lambda x: waiting.reshape(waiting.shape + (1,) * (x.ndim - 2))
            answered = jax.tree_util.tree_map(lambda a, f: jnp.where(expand(a), f, a), answered, found)
        return answered, state

    unresolved = jnp.any(needs & ~answered[1])
    # The untaken branch passes the state through: XLA updates it in place.
    answered, state = jax.lax.cond(unresolved, later, lambda a, s: (a, s), answered, state)
    return answered[0], state
