"""``ossb``: OSSB(epsilon, gamma) of Combes, Magureanu and Proutiere, "Minimal Exploration
in Structured Stochastic Bandits" (NeurIPS 2017, arXiv:1711.00400), with the paper's
lower-bound LP (:mod:`jaxbandit.bound_lp`) as its allocation problem.

OSSB as published (Algorithm 1, "OSSB(epsilon, gamma)"; the allocation ``c(m)`` solves the
lower-bound problem (2)-(3) at the empirical means ``m``).  It keeps a counter ``s`` of
the rounds in which it did not exploit, starting at 0.  In round ``t``:

* **exploitation** — if ``N_x(t) >= (1 + gamma) c_x(m(t)) log t`` for every arm ``x``,
  play the empirical best arm ``x*(m(t))`` (``s`` unchanged);
* otherwise ``s += 1``, and with ``X(t) = argmin_x N_x(t)`` (the least played arm):
  **estimation** — if ``N_{X(t)}(t) <= epsilon s``, play ``X(t)``;
  **exploration** — else play ``argmin_x N_x(t) / c_x(m(t))`` (the arm furthest behind
  its allocation; arms with ``c_x = 0`` are never chosen).

Theorem 2 bounds its regret by the lower bound times ``F(epsilon, gamma, theta)``,
which tends to 1 as ``epsilon`` and ``gamma`` tend to 0 (the guarantee itself is stated
for small ``epsilon > 0`` and ``gamma > 0``).  With ``epsilon >= 1 / K`` estimation takes
over: playing the least-informed arms in turn keeps ``min zeta`` near ``s / K``.

Translation to side observations (``zeta`` the weighted counts of eq. (1) of our
paper, ``b`` the LP's right-hand side: ``2 / Delta_i**2``, ``2 / Delta_min**2`` for
``i*``, 0 on constraints observed without noise):

* *Enough information* is the LP's own constraints at the current ``zeta``:
  exploitation when ``zeta_i >= (1 + gamma) log t b_i`` for every ``i``, i.e. when
  ``N / ((1 + gamma) log t)`` is feasible for the LP.  This is ``lp_explore``'s Case A
  test with ``(1 + gamma) log t`` in place of ``4 alpha log t``.  It credits
  information gathered as a side effect and needs no LP solve, so the LP is solved
  only in exploration rounds.  The literal test ``N_i >= (1 + gamma) c_i log t`` for
  every ``i`` implies this one (``W^T c >= b``) but not conversely, and would need
  ``c`` in every round.  On a standard bandit the two coincide.
* *Exploration* tracks the allocation on plays, as published: ``c`` allocates plays,
  so the arm played is ``argmin_i N_i / c_i`` over ``c_i > 0``, read as computed: a
  nonbasic component of the canonical optimum is an exact 0, and a re-used ``c``
  answers only where its certified box decides every sign (a zero basic component
  that rounding leaves positive wins only while ``N_i / c_i`` stays below the
  others', a play or a few).  No threshold relative to ``max c``: ``c`` spans
  ``Delta**-2``, and an arm below such a threshold would never be explored while its
  own constraint kept exploitation from ever holding (linear regret).  Ratios equal
  up to a relative ``RATIO_TIE_TOLERANCE`` are ties, broken by the smallest index
  (arms that share a binding constraint get ``c`` equal up to rounding).
* *Estimation* is about the least-informed arm ``j = argmin zeta`` rather than the
  least-played one: when ``zeta_j <= epsilon s``, play the action that observes ``j``
  most precisely, ``argmin_k sigma[k, j]``.  The literal version compares and picks by
  counts ``N``, and plays ``X(t)`` itself, which on general ``sigma`` may say little
  about the arm that is short of information.  ``epsilon`` is thus per unit of
  precision: with unit noise ``zeta`` counts samples, as ``N`` does on a standard
  bandit.
* *Initial rounds*: the published algorithm starts from ``N = 0, m = 0`` (its first
  round exploits, as ``log 1 = 0``; unplayed arms are then picked up by estimation, as
  ``0 <= epsilon s``), and public implementations play each arm once first.  Here
  rounds ``t <= K`` play the paper's initial rounds, as ``lp_explore`` does (for arm
  ``j = t - 1`` play ``argmin_i sigma[i, j]``, the smallest index on ties), so every
  ``zeta_j > 0`` afterwards; they do not count in ``s``.

Corner cases (never NaN; each is counted in the diagnostics):

* a tie for the best estimated mean makes the LP ill-defined (``i*``, ``Delta_min``):
  the round is not an exploitation round (``s += 1``) and plays the estimation arm,
  counted in ``estimation`` and ``tie_fallbacks`` (as ``lp_explore`` plays Case B);
* an LP not solved to a verified optimum (status != optimal): the estimation arm,
  counted in ``lp_failures``;
* no ``c_i > 0`` in an exploration round (only when every constraint is dropped, and
  then exploitation holds): ``argmax mu_hat``, counted in ``no_arm_fallbacks``.

The LP work is ``lp_explore``'s (see :mod:`jaxbandit.policies.lp_explore`): the canonical
optimum of :mod:`jaxbandit.lp`, each run's factorised warm start, and three stages served
only to the runs in an exploration round — re-use of the certified warm start, a check
of the warm basis, a full simplex solve.

Defaults ``epsilon = gamma = 0``: the limit in which Theorem 2's factor tends to 1,
and the values public re-implementations of the paper's experiments use.  With
``epsilon = 0`` estimation never fires after the initial rounds (every ``zeta_j > 0``).
"""

from __future__ import annotations

from typing import NamedTuple

import jax.numpy as jnp

from jaxbandit import estimator, lp
from jaxbandit._types import Array
from jaxbandit.base import Context, Decision, Policy, Solver
from jaxbandit.bound_lp import (
    LowerBoundSolution,
    LPWarmStart,
    initial_warm_start,
    noise_free_arms,
)
from jaxbandit.policies._allocation import LPAnswer, allocation_stages, ratio_choice_is_certain, round_tests
from jaxbandit.policies._common import check_nonnegative, consolidate_stats, log_round, params_check, update_stats
from jaxbandit.policies.lp_explore import RATIO_TIE_TOLERANCE
from jaxbandit.reductions import first_true

__all__ = ["Branch", "OSSBState", "ossb"]

_check_params = params_check(epsilon=check_nonnegative, gamma=check_nonnegative)


class Branch:
    """Which branch of OSSB a round took (stored in the request)."""

    INITIAL = 0
    EXPLOITATION = 1
    ESTIMATION = 2
    EXPLORATION = 3
    TIE = 4  # tie for the best mean: played as estimation


class Counters(NamedTuple):
    """Per-run counts of rounds by branch, LP work and fallbacks (all int32 scalars)."""

    initial_rounds: Array
    exploitation: Array
    estimation: Array
    exploration: Array
    lp_reuses: Array
    lp_warm_solves: Array
    lp_full_solves: Array
    lp_failures: Array
    no_arm_fallbacks: Array
    tie_fallbacks: Array


class OSSBState(NamedTuple):
    stats: estimator.EstimatorState
    exploration_counter: Array  # s: rounds after the initial ones that did not exploit, int32
    warm: LPWarmStart  # optimal basis of the run's last LP solve, factorised
    counters: Counters


class OSSBRequest(NamedTuple):
    mean: Array  # (K,) mu_hat
    min_gap: Array  # () Delta_min at mu_hat (1 with a tie, where no LP is solved)
    best_arm: Array  # int32 argmax mu_hat
    branch: Array  # int32 Branch code
    estimation_arm: Array  # int32 argmin_k sigma[k, argmin zeta] (LP-failure fallback)
    gaps: Array  # (K,) the LP's costs at mu_hat


def _exploration_arm(solution: LowerBoundSolution, request: OSSBRequest, counts):
    """The arm an exploration round plays given the LP's answer, and whether none qualified.

    ``argmin_i N_i / c_i`` over ``c_i > 0``; ratios within a
    relative ``RATIO_TIE_TOLERANCE`` of the smallest are ties, broken by the smallest
    index.  Fallbacks: no ``c_i`` qualifies, ``argmax mu_hat`` (``no_arm``); the LP
    failed, the estimation arm.

    Args:
        solution: the stage's answer (``c`` ``(K,)``, ``status``).
        request: the run's :class:`OSSBRequest`.
        counts: ``(K,)`` int32 plays ``N``.

    Returns:
        ``(arm, no_arm)``: int32 and bool scalars.
    """
    c = solution.c
    counts = counts.astype(c.dtype)
    eligible = c > 0
    ratio = jnp.where(eligible, counts / jnp.where(eligible, c, 1), jnp.inf)
    smallest = jnp.min(ratio)
    lp_arm = first_true(ratio <= smallest * (1 + RATIO_TIE_TOLERANCE))
    any_eligible = smallest < jnp.inf  # an eligible arm's ratio is finite
    solved = solution.status == lp.LPStatus.OPTIMAL
    arm = jnp.where(solved, jnp.where(any_eligible, lp_arm, request.best_arm), request.estimation_arm)
    return arm.astype(jnp.int32), solved & ~any_eligible


def _exploration_arm_is_certain(low, high, request: OSSBRequest, counts):
    """Whether :func:`_exploration_arm` gives one answer for every ``c`` with
    ``low <= c <= high`` (``(K,)`` each), an optimal solution's."""
    del request  # the rule reads c and the counts only
    counts = counts.astype(low.dtype)
    surely, maybe = low > 0, high > 0  # eligible
    return ratio_choice_is_certain(counts, low, high, surely, maybe, RATIO_TIE_TOLERANCE)


def _init(ctx: Context) -> OSSBState:
    num_arms = ctx.sigma.shape[-1]
    zero = jnp.zeros((), jnp.int32)
    return OSSBState(
        stats=estimator.init(num_arms, ctx.sigma.dtype),
        exploration_counter=zero,
        warm=initial_warm_start(ctx.precision),
        counters=Counters(*([zero] * len(Counters._fields))),
    )


def _select(key, state: OSSBState, t, ctx: Context) -> Decision:
    del key  # deterministic
    num_arms = ctx.sigma.shape[-1]
    dtype = ctx.sigma.dtype
    best_observer = jnp.argmin(ctx.sigma, axis=0).astype(jnp.int32)  # (K,)
    mean = estimator.mean(state.stats)
    zeta = estimator.weighted_counts(state.stats)
    scale = (1 + ctx.params["gamma"]) * log_round(t, dtype)
    tests = round_tests(mean, zeta, scale, noise_free_arms(ctx.precision))
    # s as it stands after this round if the round does not exploit (the
    # pseudo-code increments s before the estimation test).
    counter = (state.exploration_counter + 1).astype(dtype)
    estimation = tests.min_zeta <= ctx.params["epsilon"] * counter
    # Nested wheres, not jnp.select: under vmap, select costs one more reduction.
    branch = jnp.where(
        t <= num_arms,
        Branch.INITIAL,
        jnp.where(
            tests.tie,
            Branch.TIE,
            jnp.where(
                tests.covered, Branch.EXPLOITATION, jnp.where(estimation, Branch.ESTIMATION, Branch.EXPLORATION)
            ),
        ),
    ).astype(jnp.int32)
    estimation_arm = best_observer[tests.least_explored]
    initial_arm = best_observer[jnp.clip(t - 1, 0, num_arms - 1)]
    arm = jnp.where(
        branch == Branch.INITIAL,
        initial_arm,
        jnp.where(branch == Branch.EXPLOITATION, tests.best_arm, estimation_arm),
    )
    request = OSSBRequest(mean, tests.min_gap, tests.best_arm, branch, estimation_arm, tests.gaps)
    return Decision(arm=arm.astype(jnp.int32), needs_solve=branch == Branch.EXPLORATION, request=request)


def _finish(state: OSSBState, decision: Decision, answer: LPAnswer, t, ctx: Context):
    request: OSSBRequest = decision.request
    explore = decision.needs_solve
    solved = explore & (answer.status == lp.LPStatus.OPTIMAL)
    arm = jnp.where(explore, answer.arm, decision.arm)

    branch = request.branch
    counters = state.counters
    count = lambda flag: flag.astype(jnp.int32)
    estimated = (branch == Branch.ESTIMATION) | (branch == Branch.TIE)
    counters = Counters(
        initial_rounds=counters.initial_rounds + count(branch == Branch.INITIAL),
        exploitation=counters.exploitation + count(branch == Branch.EXPLOITATION),
        estimation=counters.estimation + count(estimated),
        exploration=counters.exploration + count(explore),
        lp_reuses=counters.lp_reuses + count(explore & answer.reused),
        lp_warm_solves=counters.lp_warm_solves + count(explore & ~answer.reused & ~answer.full_solve),
        lp_full_solves=counters.lp_full_solves + count(explore & answer.full_solve),
        lp_failures=counters.lp_failures + count(explore & ~solved),
        no_arm_fallbacks=counters.no_arm_fallbacks + count(explore & answer.no_arm),
        tie_fallbacks=counters.tie_fallbacks + count(branch == Branch.TIE),
    )
    new_state = OSSBState(
        stats=state.stats,
        exploration_counter=state.exploration_counter + count(estimated | explore),
        warm=state.warm,  # a full solve's basis came in through its stage's fold
        counters=counters,
    )
    return arm, new_state


def _diagnostics(state: OSSBState) -> dict:
    out = state.counters._asdict()
    out["exploration_counter"] = state.exploration_counter
    return out


def ossb(epsilon: float = 0.0, gamma: float = 0.0) -> Policy:
    """OSSB(epsilon, gamma) with the paper's LP (see the module docstring).

    Args:
        epsilon: estimation rate ``>= 0``: estimation plays when the least-informed
            arm's ``zeta`` is at most ``epsilon`` times the number of non-exploitation
            rounds (default 0; below ``1 / K``, or estimation takes over).
        gamma: exploitation slack ``>= 0``: exploit once ``zeta >= (1 + gamma) log t b``
            (default 0).

    Returns:
        A :class:`~jaxbandit.base.Policy` whose LP solves are batched by the engine.

    Raises:
        ValueError: ``epsilon`` or ``gamma`` is not a finite number ``>= 0``.
    """
    params = _check_params({"epsilon": epsilon, "gamma": gamma})

    solver = Solver(stages=allocation_stages(_exploration_arm, _exploration_arm_is_certain), finish_fn=_finish)
    return Policy(
        _init, _select, update_stats, _diagnostics, consolidate_fn=consolidate_stats, solver=solver,
        name="ossb", params=params, check_params=_check_params,
    )  # fmt: skip
