"""``lp_explore``: Algorithm 1 of the paper (§5), asymptotically optimal for any ``sigma``.

Rounds ``1..K`` (initial): for arm ``j = t - 1`` play ``argmin_i sigma[i, j]`` (smallest
index on ties).  Then, with ``s = 4 alpha log t`` and the weighted estimates of eq. (1):

* **Case A** — if ``N(t) / s`` is feasible for the LP at ``mu_hat``, i.e.
  ``zeta_i >= s b_i(mu_hat)`` for every ``i`` (``b`` the LP's right-hand side), play
  ``argmax mu_hat``.
* **Case B** — elif ``min_i zeta_i < beta(n_e) / K`` with ``beta(x) = x**gamma / (2 sbar**2)``,
  ``sbar = max_i min_j sigma[j, i]``: for ``j = argmin_k zeta_k`` play
  ``argmin_k sigma[k, j]`` (the pseudocode's ``sigma_{k,i}`` is a typo for
  ``sigma_{k,j}``, and its ``4a`` is ``4 alpha``); ``n_e += 1``.
* **Case C** — else solve the LP at ``mu_hat`` and play an arm with ``N_i < s c*_i``;
  ``n_e += 1``.  The paper leaves the choice open: ``case_c_rule="largest_deficit"``
  (default) plays the smallest ``N_i / (s c*_i)`` (ratios within a relative 1e-5 are
  ties, broken by the smallest index), ``"smallest_index"`` the first such arm.

Corner cases (never NaN; each is counted in the diagnostics):

* a tie for the best estimated mean makes the LP ill-defined (``Delta_min`` and the
  constraint of the best arm): the round is treated as Case B (collect the most
  informative sample of the least-explored arm), counted in ``case_b`` and in
  ``tie_fallbacks``;
* an LP that is not solved to a verified optimum (status != optimal): Case B's arm is
  played, counted in ``lp_failures``;
* no arm with ``N_i < s c*_i`` in Case C (impossible in exact arithmetic, since then
  ``N / s`` would be feasible and Case A would hold): ``argmax mu_hat`` is played,
  counted in ``no_arm_fallbacks``.

LP solves use the canonical optimum of :mod:`jaxbandit.lp` (smallest ``sum c`` among the
optima), so the algorithm is deterministic.  A Case C round computes ``c*`` with the
three stages of :mod:`jaxbandit.policies._allocation` (re-use of a certified warm start,
``lp_reuses``; a check of the warm basis, ``lp_warm_solves``; the full simplex,
``lp_full_solves``), served by the engine only to the runs in Case C.

Defaults: ``alpha = 4.5`` (the theorem needs ``alpha > 4``; smaller values explore less
and often do better in practice, but void the guarantee and emit a
:class:`TheoryWarning`), ``gamma = 0.5`` (any value in (0, 1) is covered by the theorem;
0.5 balances the uniform-exploration budget ``n_e**gamma`` against how fast the LP
estimate becomes reliable).
"""

from __future__ import annotations

import warnings
from typing import NamedTuple

import jax.numpy as jnp

from jaxbandit import estimator, lp
from jaxbandit._numbers import ArgumentError
from jaxbandit._types import Array
from jaxbandit.base import Context, Decision, Policy, Solver
from jaxbandit.bound_lp import (
    LowerBoundSolution,
    LPWarmStart,
    initial_warm_start,
    noise_free_arms,
)
from jaxbandit.policies._allocation import LPAnswer, allocation_stages, ratio_choice_is_certain, round_tests
from jaxbandit.policies._common import (
    check_exploration,
    check_unit_interval,
    consolidate_stats,
    log_round,
    params_check,
    update_stats,
)
from jaxbandit.reductions import all_true, first_true

__all__ = ["CASE_C_RULES", "Case", "LPExploreState", "TheoryWarning", "lp_explore"]

CASE_C_RULES = ("largest_deficit", "smallest_index")
RATIO_TIE_TOLERANCE = 1e-5  # relative; see _case_c_arm
_check_ranges = params_check(alpha=check_exploration, gamma=check_unit_interval)


def _check_params(params) -> dict:
    """The hyper-parameters' ranges, and a :class:`TheoryWarning` for ``alpha <= 4``:
    for the factory's values and for every cell of a grid given as ``params``."""
    checked = _check_ranges(params)
    if checked["alpha"] <= 4:
        warnings.warn(
            f"lp_explore: alpha={checked['alpha']} <= 4 is outside the paper's regret guarantee (alpha > 4).",
            TheoryWarning,
            stacklevel=3,
        )
    return checked


class TheoryWarning(UserWarning):
    """A hyper-parameter outside the range covered by the paper's regret guarantee."""


class Case:
    """Which branch of Algorithm 1 a round took (stored in the request)."""

    INITIAL = 0
    A = 1
    B = 2
    C = 3
    TIE = 4  # tie for the best mean: played as Case B


class Counters(NamedTuple):
    """Per-run counts of rounds by case, LP work and fallbacks (all int32 scalars)."""

    initial_rounds: Array
    case_a: Array
    case_b: Array
    case_c: Array
    lp_reuses: Array
    lp_warm_solves: Array
    lp_full_solves: Array
    lp_failures: Array
    no_arm_fallbacks: Array
    tie_fallbacks: Array


class LPExploreState(NamedTuple):
    stats: estimator.EstimatorState
    exploration_rounds: Array  # n_e, int32
    warm: LPWarmStart  # optimal basis of the run's last LP solve, factorised
    counters: Counters


class LPRequest(NamedTuple):
    mean: Array  # (K,) mu_hat; the stages read the warm start from the run's state
    min_gap: Array  # () Delta_min at mu_hat (1 with a tie, where no LP is solved)
    best_arm: Array  # int32 argmax mu_hat
    case: Array  # int32 Case code
    case_b_arm: Array  # int32, the Case B arm (LP-failure fallback)
    gaps: Array  # (K,) the LP's costs at mu_hat (lower_bound_problem(mean).cost)
    scale: Array  # () s = 4 alpha log t


def _case_c_arm(solution: LowerBoundSolution, request: LPRequest, counts, case_c_rule: str):
    """The arm a Case C round plays given the LP's answer, and whether no arm qualified.

    An arm qualifies if ``N_i < s c*_i``.  ``"largest_deficit"`` plays the smallest
    ``N_i / (s c*_i)``: ratios equal up to ``RATIO_TIE_TOLERANCE`` are ties (arms that
    share a binding constraint get ``c*`` equal up to rounding), broken by the smallest
    index, so the choice does not hinge on the last bits of the LP solution.
    ``"smallest_index"`` plays the first.  Fallbacks: no arm qualifies, ``argmax mu_hat``
    (``no_arm``); the LP failed, Case B's arm.

    Args:
        solution: the stage's answer (``c`` ``(K,)``, ``status``).
        request: the run's :class:`LPRequest`.
        counts: ``(K,)`` int32 plays ``N``.

    Returns:
        ``(arm, no_arm)``: int32 and bool scalars.
    """
    target = request.scale * solution.c  # s c*
    counts = counts.astype(target.dtype)
    deficient = counts < target
    if case_c_rule == "largest_deficit":
        ratio = jnp.where(deficient, counts / jnp.where(deficient, target, 1), jnp.inf)
        smallest = jnp.min(ratio)
        near_best = ratio <= smallest * (1 + RATIO_TIE_TOLERANCE)
        lp_arm = first_true(near_best)
        any_deficient = smallest < jnp.inf  # a deficient arm's ratio is finite
    else:
        lp_arm = first_true(deficient)
        any_deficient = deficient[lp_arm]
    solved = solution.status == lp.LPStatus.OPTIMAL
    arm = jnp.where(solved, jnp.where(any_deficient, lp_arm, request.best_arm), request.case_b_arm)
    return arm.astype(jnp.int32), solved & ~any_deficient


def _case_c_arm_is_certain(low, high, request: LPRequest, counts, case_c_rule: str):
    """Whether :func:`_case_c_arm` gives one answer for every ``c`` with
    ``low <= c <= high`` (``(K,)`` each), an optimal solution's."""
    counts = counts.astype(low.dtype)
    target_low, target_high = request.scale * low, request.scale * high
    surely, maybe = counts < target_low, counts < target_high  # deficient
    if case_c_rule == "largest_deficit":
        return ratio_choice_is_certain(counts, target_low, target_high, surely, maybe, RATIO_TIE_TOLERANCE)
    return all_true(surely == maybe)


def _init(ctx: Context) -> LPExploreState:
    num_arms = ctx.sigma.shape[-1]
    zero = jnp.zeros((), jnp.int32)
    return LPExploreState(
        stats=estimator.init(num_arms, ctx.sigma.dtype),
        exploration_rounds=zero,
        warm=initial_warm_start(ctx.precision),
        counters=Counters(*([zero] * len(Counters._fields))),
    )


def _select(key, state: LPExploreState, t, ctx: Context) -> Decision:
    del key  # deterministic
    num_arms = ctx.sigma.shape[-1]
    dtype = ctx.sigma.dtype
    best_observer = jnp.argmin(ctx.sigma, axis=0).astype(jnp.int32)  # (K,)
    mean = estimator.mean(state.stats)
    zeta = estimator.weighted_counts(state.stats)
    scale = 4 * ctx.params["alpha"] * log_round(t, dtype)
    tests = round_tests(mean, zeta, scale, noise_free_arms(ctx.precision))
    # beta(n_e) / K with sbar^2 floored at the smallest variance the estimator uses.
    sbar_squared = jnp.maximum(jnp.max(jnp.min(jnp.square(ctx.sigma), axis=0)), 1 / estimator.max_weight(dtype))
    beta = state.exploration_rounds.astype(dtype) ** ctx.params["gamma"] / (2 * sbar_squared)
    case_b = tests.min_zeta < beta / num_arms
    # Nested wheres, not jnp.select: under vmap, select stacks its conditions and
    # takes an argmax over them, one more reduction pass over the runs per round.
    case = jnp.where(
        t <= num_arms,
        Case.INITIAL,
        jnp.where(tests.tie, Case.TIE, jnp.where(tests.covered, Case.A, jnp.where(case_b, Case.B, Case.C))),
    ).astype(jnp.int32)
    case_b_arm = best_observer[tests.least_explored]
    initial_arm = best_observer[jnp.clip(t - 1, 0, num_arms - 1)]
    arm = jnp.where(case == Case.INITIAL, initial_arm, jnp.where(case == Case.A, tests.best_arm, case_b_arm))
    request = LPRequest(mean, tests.min_gap, tests.best_arm, case, case_b_arm, tests.gaps, scale)
    return Decision(arm=arm.astype(jnp.int32), needs_solve=case == Case.C, request=request)


def _finish(state: LPExploreState, decision: Decision, answer: LPAnswer, t, ctx: Context):
    request: LPRequest = decision.request
    case_c = decision.needs_solve
    solved = case_c & (answer.status == lp.LPStatus.OPTIMAL)
    # The stage that answered chose the Case C arm (for just the runs it served).
    arm = jnp.where(case_c, answer.arm, decision.arm)

    case = request.case
    counters = state.counters
    count = lambda flag: flag.astype(jnp.int32)
    counters = Counters(
        initial_rounds=counters.initial_rounds + count(case == Case.INITIAL),
        case_a=counters.case_a + count(case == Case.A),
        case_b=counters.case_b + count((case == Case.B) | (case == Case.TIE)),
        case_c=counters.case_c + count(case_c),
        lp_reuses=counters.lp_reuses + count(case_c & answer.reused),
        lp_warm_solves=counters.lp_warm_solves + count(case_c & ~answer.reused & ~answer.full_solve),
        lp_full_solves=counters.lp_full_solves + count(case_c & answer.full_solve),
        lp_failures=counters.lp_failures + count(case_c & ~solved),
        no_arm_fallbacks=counters.no_arm_fallbacks + count(case_c & answer.no_arm),
        tie_fallbacks=counters.tie_fallbacks + count(case == Case.TIE),
    )
    explored = (case == Case.B) | (case == Case.C) | (case == Case.TIE)
    new_state = LPExploreState(
        stats=state.stats,
        exploration_rounds=state.exploration_rounds + count(explored),
        warm=state.warm,  # a full solve's basis came in through its stage's fold
        counters=counters,
    )
    return arm, new_state


def _diagnostics(state: LPExploreState) -> dict:
    out = state.counters._asdict()
    out["exploration_rounds"] = state.exploration_rounds
    return out


def lp_explore(alpha: float = 4.5, gamma: float = 0.5, case_c_rule: str = "largest_deficit") -> Policy:
    """Algorithm 1 of the paper (see the module docstring).

    Args:
        alpha: exploration scale in ``(0, 1e30]``; the guarantee needs ``alpha > 4`` (default 4.5).
        gamma: uniform-exploration exponent in (0, 1) (default 0.5).
        case_c_rule: ``"largest_deficit"`` (default) or ``"smallest_index"``.

    Returns:
        A two-phase :class:`~jaxbandit.base.Policy` (its LP solves are batched by the engine).
    """
    if case_c_rule not in CASE_C_RULES:
        raise ArgumentError(f"case_c_rule must be one of {CASE_C_RULES}, got {case_c_rule!r}.", argument="case_c_rule")
    params = _check_params({"alpha": alpha, "gamma": gamma})

    choose_arm = lambda solution, request, counts: _case_c_arm(solution, request, counts, case_c_rule)
    is_certain = lambda low, high, request, counts: _case_c_arm_is_certain(low, high, request, counts, case_c_rule)
    solver = Solver(stages=allocation_stages(choose_arm, is_certain), finish_fn=_finish)
    return Policy(
        _init, _select, update_stats, _diagnostics, consolidate_fn=consolidate_stats, solver=solver,
        name="lp_explore", params=params, options={"case_c_rule": case_c_rule}, check_params=_check_params,
    )  # fmt: skip
