"""The LP allocation ``c*(mu_hat)`` for policies built on the paper's LP (``lp_explore``,
``ossb``): the per-round tests that decide whether a run needs it, and the three
:class:`~jaxbandit.base.Stage` s that compute it for just the runs that do.

Each run keeps the optimal basis of its last solve with the inverse of its basis
matrix (the LP's matrix ``W^T`` does not depend on the means, so the inverse stays
valid), anchored at the gaps of its last passing check.  A run that needs ``c*``
goes through:

1. *re-use* (:func:`jaxbandit.bound_lp.reuse_warm_start_at`): while ``i*`` is the same
   arm and the gaps' (the LP's costs') moves from the anchor's keep every nonbasic
   reduced cost within its certified rooms, the basis stays optimal as long as it stays
   primal feasible, so ``c* = c*(anchor) + B^-1 (b - b(anchor))`` with an error bound:
   six ``K x K`` products (the bounds' from what the basis's factorisation keeps).  It
   is taken where the bound gives each ``c_i`` to ``tol``, or where the policy's choice
   is the same for every ``c`` in the box the bound draws (``choice_is_certain``):
   that box holds the exact ``c*``, so the arm is the exact optimum's however small a
   component the bound cannot give to ``tol``;
2. *check* (:func:`jaxbandit.bound_lp.check_warm_start`): the basis verified at the new
   estimates, a few ``K x K`` products with refinement; a pass re-anchors;
3. the full simplex, from that basis (a few pivots as a rule, else cold), whose new
   basis is factorised for the next checks.

The answer is the canonical optimum whichever stage gives it (the same basis; ``c*``
equal up to rounding, or, re-used, within a certified relative 1e-5 in float32 and
1e-9 in float64 or a certified box whose every point gives the same arm).  The stage
that answers a run also chooses its arm, so that this work too is done only for the
runs that need the LP.  Where ratios sit at the rule's tie tolerance, an arm can hinge
on the last bits of ``c*``, and so on which stage answered.

The policies' states carry ``stats`` (the weighted estimator) and ``warm`` (an
:class:`~jaxbandit.bound_lp.LPWarmStart`); their requests carry ``mean``, ``gaps``,
``min_gap`` and ``best_arm``.
"""

from __future__ import annotations

from typing import Callable, NamedTuple

import jax
import jax.numpy as jnp

from jaxbandit import estimator, lp
from jaxbandit._types import Array
from jaxbandit.base import Context, Stage
from jaxbandit.bound_lp import (
    LowerBoundSolution,
    anchor_warm_start,
    check_warm_start,
    noise_free_arms,
    reuse_warm_start_at,
    right_hand_side,
    solve_lower_bound,
    warm_start,
)
from jaxbandit.reductions import all_true

__all__ = ["LPAnswer", "RoundTests", "allocation_stages", "ratio_choice_is_certain", "round_tests"]


class LPAnswer(NamedTuple):
    """What a stage answers for one run."""

    arm: Array  # int32 the arm chosen from c* (or its fallback) by the stage that answered
    no_arm: Array  # bool: solved, but c* named no arm (the policy's fallback was played)
    c: Array  # (K,) c*(mu_hat)
    status: Array  # int32 lp.LPStatus
    basis: Array  # (K,) int32 the optimal basis
    needs_fallback: Array  # bool: this stage could not answer, go on to the next
    reused: Array  # bool: this answer re-used the warm start's certified region
    full_solve: Array  # bool: this answer came from the full solve
    anchor_values: Array  # (K,) the check's basic values, to anchor the warm start
    cost_room: tuple  # (fall, rise) pairs of (K,): the check's rooms of each reduced cost (zeros unless it passed)


class RoundTests(NamedTuple):
    """What a round needs to know about one run before any LP (all scalars but ``gaps``)."""

    best_arm: Array  # int32 argmax mu_hat (the smallest index among ties)
    tie: Array  # bool: another arm shares the best mean
    covered: Array  # bool: zeta_i >= s b_i(mu_hat) for every i (never with a tie)
    least_explored: Array  # int32 argmin zeta (the smallest index among ties)
    min_zeta: Array
    min_gap: Array  # Delta_min, the smallest positive gap (1 with a tie)
    gaps: Array  # (K,) mu_hat[i*] - mu_hat, the LP's costs


def round_tests(mean, zeta, scale, observed_exactly) -> RoundTests:
    """Whether ``zeta / scale`` is feasible for the LP at ``mean``, and what a fallback
    needs, with the arms visited in one reduction.

    Under ``vmap`` on a CPU each reduction over the arms costs about as much as a
    whole round of ``ucb_n``, so the tie test, the feasibility test ``zeta >= s b`` and
    ``argmin zeta`` share one pass.  ``b`` is the LP's right-hand side
    (:func:`jaxbandit.bound_lp.lower_bound_problem`): ``2 / Delta_i**2`` for the other
    arms and ``2 / Delta_min**2`` for ``i*``, 0 on rows observed exactly.  As the
    rounded ``s * (2 / Delta**2)`` does not increase with ``Delta``, ``i*``'s test
    against ``Delta_min`` is the same as testing ``zeta_{i*}`` against every other
    arm's ``s b_i``: the same comparisons as building ``b``, to the last bit.

    Args:
        mean, zeta: ``(K,)`` estimates and weighted counts.
        scale: ``()`` ``s > 0`` (``4 alpha log t`` in Algorithm 1).
        observed_exactly: ``(K,)`` bool, :func:`jaxbandit.bound_lp.noise_free_arms`.
    """
    num_arms = mean.shape[0]
    best_arm = jnp.argmax(mean).astype(jnp.int32)
    gaps = mean[best_arm] - mean
    others = jnp.arange(num_arms, dtype=jnp.int32) != best_arm
    positive = gaps > 0  # the other arms, unless one ties with i* (then never covered)
    need = scale * (2 / jnp.square(jnp.where(positive, gaps, 1)))  # s b_i for i != i*: finite
    covered = (observed_exactly | (zeta >= need)) & (observed_exactly[best_arm] | (zeta[best_arm] >= need))

    def combine(left, right):
        gap_l, covered_l, zeta_l, arm_l = left
        gap_r, covered_r, zeta_r, arm_r = right
        right_first = (zeta_r < zeta_l) | ((zeta_r == zeta_l) & (arm_r < arm_l))
        return (
            jnp.minimum(gap_l, gap_r),
            covered_l & covered_r,
            jnp.where(right_first, zeta_r, zeta_l),
            jnp.where(right_first, arm_r, arm_l),
        )

    dtype = mean.dtype
    operands = (jnp.where(others, gaps, jnp.inf), covered | ~others, zeta, jnp.arange(num_arms, dtype=jnp.int32))
    identity = (jnp.asarray(jnp.inf, dtype), jnp.asarray(True), jnp.asarray(jnp.inf, zeta.dtype), jnp.int32(num_arms))
    min_gap, all_covered, min_zeta, least_explored = jax.lax.reduce(operands, identity, combine, (0,))
    tie = min_gap == 0
    # With a tie no LP is solved; 1 keeps the b built from it finite.
    min_gap = jnp.where(tie, jnp.ones_like(min_gap), min_gap)
    return RoundTests(best_arm, tie, ~tie & all_covered, least_explored, min_zeta, min_gap, gaps)


def ratio_choice_is_certain(counts, low, high, surely, maybe, tolerance: float) -> Array:
    """Whether the rule "the first eligible arm whose ``counts / target`` is within a
    relative ``tolerance`` of the smallest such ratio, if any arm is eligible" gives the
    same answer for every ``target`` with ``low <= target <= high`` and every
    eligibility between ``surely`` and ``maybe``.

    An arm is within the threshold when its ratio is within ``tolerance`` of every
    other eligible arm's.  Rounding is monotone, so the rounded ratios of any such
    ``target`` lie between those of the bounds.  The answer is certain when every arm's
    eligibility is, and each eligible arm is within the threshold for every ``target``
    (its largest ratio against the others' smallest) or beyond it for every ``target``
    (its smallest against the others' largest).

    Args:
        counts: ``(K,)`` plays, in ``low``'s dtype.
        low, high: ``(K,)`` bounds on the targets; a surely eligible arm's ``low`` is
            positive.
        surely, maybe: ``(K,)`` bool: eligible for every ``target`` in the box, for some.
        tolerance: the rule's relative tie tolerance.
    """
    ratio_low = jnp.where(surely, counts / jnp.where(surely, high, 1), jnp.inf)
    ratio_high = jnp.where(surely, counts / jnp.where(surely, low, 1), jnp.inf)
    within = ratio_high <= _smallest_of_the_others(ratio_low) * (1 + tolerance)
    beyond = ratio_low > _smallest_of_the_others(ratio_high) * (1 + tolerance)
    return all_true((surely == maybe) & (~surely | within | beyond))


def _smallest_of_the_others(values) -> Array:
    """``(K,)``: for each entry of ``values`` ``(K,)``, the smallest of the others.

    An argmin and a min: one variadic reduction for the two smallest ran slower on
    XLA's CPU backend, the more so as K grows (``benchmarks/README.md``)."""
    arms = jnp.arange(values.shape[0], dtype=jnp.int32)
    first = jnp.argmin(values).astype(jnp.int32)
    second = jnp.min(jnp.where(arms == first, jnp.inf, values))
    return jnp.where(arms == first, second, values[first])


def allocation_stages(choose_arm: Callable, choice_is_certain: Callable) -> tuple:
    """The re-use, check and full-solve stages of ``c*(request.mean)``.

    Args:
        choose_arm: ``(solution, request, counts) -> (arm, no_arm)``: the arm to play
            given a :class:`~jaxbandit.bound_lp.LowerBoundSolution`, the run's request and
            its ``(K,)`` int32 plays.
        choice_is_certain: ``(low, high, request, counts) -> bool``: whether
            ``choose_arm`` gives the same ``(arm, no_arm)`` for every optimal solution
            whose ``c`` lies within ``low <= c <= high`` (``(K,)`` each): the re-use
            answers where it does, with the exact ``c*``'s arm, also where its ``c`` is
            not known to ``tol``.

    Returns:
        Three :class:`~jaxbandit.base.Stage` s answering :class:`LPAnswer` s.
    """

    def answer(
        request, state, solution, needs_fallback, reused=False, full_solve=False, anchor_values=None, cost_room=None
    ):
        zeros = jnp.zeros_like(solution.c)
        arm, no_arm = choose_arm(solution, request, state.stats.counts)
        return LPAnswer(
            arm=arm,
            no_arm=no_arm,
            c=solution.c,
            status=solution.status,
            basis=solution.basis,
            needs_fallback=jnp.asarray(needs_fallback),
            reused=jnp.asarray(reused),
            full_solve=jnp.asarray(full_solve),
            anchor_values=zeros if anchor_values is None else anchor_values,
            cost_room=((zeros, zeros), (zeros, zeros)) if cost_room is None else cost_room,
        )

    def reuse(request, state, ctx: Context):
        # b is built here, not when the request is, so that only the runs that need c* build it.
        rhs = right_hand_side(request.gaps, request.min_gap, noise_free_arms(ctx.precision))
        counts = state.stats.counts
        decided = lambda low, high: choice_is_certain(low, high, request, counts)
        ok, c = reuse_warm_start_at(request.gaps, rhs, request.best_arm, ctx.precision, state.warm, decided)
        status = jnp.where(ok, lp.LPStatus.OPTIMAL, lp.LPStatus.NUMERICAL_ERROR).astype(jnp.int32)
        solution = LowerBoundSolution(c, jnp.zeros((), c.dtype), status, jnp.int32(0), state.warm.basis)
        return answer(request, state, solution, ~ok, reused=ok), ok

    def check(request, state, ctx: Context):
        ok, solution, sensitivity = check_warm_start(request.mean, ctx.precision, state.warm)
        checked = answer(
            request, state, solution, ~ok, anchor_values=sensitivity.values, cost_room=sensitivity.cost_room
        )
        return checked, ok

    def anchor(state, checked: LPAnswer, ctx: Context):
        # A passing check anchors the warm start at these means; only the anchor's
        # leaves change, so only they are written back.
        mean = estimator.mean(state.stats)
        anchored = anchor_warm_start(state.warm, mean, ctx.precision, checked.anchor_values, checked.cost_room)
        passed = ~checked.needs_fallback
        new_anchor = jax.tree.map(lambda a, b: jnp.where(passed, a, b), anchored.anchor, state.warm.anchor)
        return state._replace(warm=state.warm._replace(anchor=new_anchor))

    def full_solve(request, state, ctx: Context):
        # From the run's basis, a few pivots away from the new optimum as a rule; the
        # canonical answer is the cold solve's whatever the start.
        solution = solve_lower_bound(request.mean, ctx.precision, initial_factor=state.warm.factor)
        return answer(request, state, solution, False, full_solve=True), jnp.asarray(True)

    def new_basis(state, solved: LPAnswer, ctx: Context):
        # Only an optimal full solve changes the basis: factorise it for the next checks.
        optimal = solved.status == lp.LPStatus.OPTIMAL
        new = warm_start(ctx.precision, solved.basis)
        return state._replace(warm=jax.tree.map(lambda a, b: jnp.where(optimal, a, b), new, state.warm))

    return (
        Stage(reuse, batching="single_pass"),
        Stage(check, fold_fn=anchor),
        Stage(full_solve, fold_fn=new_basis, batching="rare"),
    )
