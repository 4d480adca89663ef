"""The verified lexicographic dual simplex: :func:`solve` and :func:`check_basis`.

Canonical solution.  Among the optimal solutions, :func:`solve` returns the
lexicographic minimiser of ``(cost @ x, sum(x), x[0], x[1], ..., x[n-1])``: the
optimal ``x`` with the smallest ``sum(x)`` and, should several remain, the
lexicographically smallest of those.  This point is unique, so warm and cold solves
describe the same answer.  The dual simplex carries all these objectives at once (a
lexicographic ratio test, which in exact arithmetic also rules out cycling), so no
second solve is needed.  Ties are decided to the relative tolerance of
:func:`~jaxbandit.lp.types.default_tolerance` (1e-5 in float32, 1e-9 in float64): a
vertex whose cost exceeds the optimum's by less than that counts as optimal, so where
two vertices are that close in cost, ``x`` is the canonical point among them (its cost
within the tolerance of the optimum), and the two precisions may pick different ones.

Exactness.  Pivots update a dense tableau (rank-one updates).  The basis they end on
is then re-factorised from the original data (Gauss-Jordan over its structural
columns); the basic values and the duals get iterative refinement with an
extra-precise residual (:mod:`jaxbandit.lp.numerics`), so they are accurate even where
a huge component (a free arm) cancels against small ones.  The basis is accepted
(status ``OPTIMAL``) only if it is *verified*: basic values and reduced costs
non-negative to ``feasibility_tolerance`` relative to their own magnitudes, every row
of ``A x >= b`` met to ``4 * feasibility_tolerance`` of its activity, and
``eps * cond(B) <= 1e-2``.  A basis that fails takes the pivot its fresh tableau calls
for (dual simplex while primal infeasible, a primal clean-up step while dual
infeasible) and is re-factorised and re-verified, up to ``max_refactorizations``
rounds; a pivot that makes the basis singular is undone and small pivots are then
refused.  What still fails is reported as ``NUMERICAL_ERROR`` or ``MAX_ITERATIONS``,
never as a confident answer: in float32 that happens mostly to badly scaled data
(entries spanning many decades), which should be re-solved in float64.

Under ``vmap`` the loops run until the slowest LP of the batch is done (at most
``max_iterations`` pivots).
"""

from __future__ import annotations

import functools
from typing import NamedTuple

import jax
import jax.numpy as jnp

from jaxbandit._types import Array, ArrayLike
from jaxbandit.lp.numerics import divide, dot, refined_values, residual
from jaxbandit.lp.pivoting import Step, classified_step, pivot_loop, refined_step
from jaxbandit.lp.tableau import (
    Scaled,
    Tableau,
    basic_point,
    check_inputs,
    factor_tableau,
    factorised_tableau,
    magnitudes_of,
    pivot,
    scale,
    surplus_tableau,
)
from jaxbandit.lp.types import (
    CONDITION_LIMIT,
    BasisCheck,
    BasisFactor,
    LPSolution,
    LPStatus,
    check_factor_shapes,
    default_refactorizations,
    default_tolerance,
)

__all__ = ["WARM_PIVOTS", "check_basis", "solve"]


class _Verdict(NamedTuple):
    step: Step  # the next pivot, chosen on the fresh tableau with refined values
    finite: Array
    well_conditioned: Array  # eps * cond(B) small enough to trust the verdict
    optimal: Array  # primal feasible and lexicographically dual feasible
    strictly_dual_feasible: Array  # valid dual simplex start, unique optimum
    infeasible: Array  # a Farkas row


def _finite_tableau(tableau: Tableau) -> tuple[Array, Tableau]:
    """``(finite, tableau)``: whether every entry is finite, and the tableau with the
    others zeroed (a singular basis must not spread NaN into the verdict)."""
    finite = jnp.all(jnp.isfinite(tableau.rows))
    rows = jnp.where(finite, tableau.rows, jnp.zeros_like(tableau.rows))
    return finite, Tableau(rows, tableau.basis)


def _condition(tableau: Tableau, magnitudes, n: int) -> Array:
    """How much the rounding of the basis solve may grow, by Skeel's measures: the
    smaller of ``max_i (|B^-1| |B| 1)_i`` and, at this basis's solution, the larger of
    ``cond(B, x) = || |B^-1| |B| |x| || / ||x||`` (basic values) and ``cond(B^T, y)``
    (both objectives' duals).  Either bounds the relative error of the refined values
    (max norm) by about ``eps * cond``: beyond ``CONDITION_LIMIT`` nothing is certified.
    The second is not inflated by a column whose large entries meet only a slack's row
    (one arm observed far more precisely than the others)."""
    m = tableau.basis.shape[0]
    inverse, basis_matrix = magnitudes.inverse, magnitudes.basis_matrix
    whole = jnp.max(dot(inverse, jnp.sum(basis_matrix, axis=1)))
    values = jnp.abs(tableau.rows[:m, -1])  # x_B, in the basis's order
    duals = jnp.abs(tableau.rows[m:, n : n + m])  # y of each objective (d_{n+i} = y_i)
    tiny = jnp.finfo(values.dtype).tiny  # a zero x or y is exact: its measure is 0
    primal = divide(jnp.max(dot(inverse, dot(basis_matrix, values))), jnp.maximum(jnp.max(values), tiny))
    dual = divide(jnp.max(dot(dot(duals, basis_matrix), inverse), axis=1), jnp.maximum(jnp.max(duals, axis=1), tiny))
    return jnp.minimum(whole, jnp.maximum(primal, jnp.max(dual)))


def _judged(tableau: Tableau, scaled: Scaled, tolerance, finite, step: Step) -> _Verdict:
    """The verdict on a freshly factorised (and :func:`_finite_tableau`) tableau whose
    basis ``step`` classifies: verified optimal, a valid dual simplex start, proven
    infeasible."""
    m = tableau.basis.shape[0]
    n = scaled.matrix.shape[1] - m
    magnitudes = magnitudes_of(tableau, scaled)
    well_conditioned = jnp.finfo(tableau.rows.dtype).eps * _condition(tableau, magnitudes, n) <= CONDITION_LIMIT
    # What callers measure: the returned (clipped) point satisfies every row to a
    # relative 4 * tolerance of its activity.
    point = jnp.maximum(basic_point(tableau, n)[:n], 0)
    structural = scaled.matrix[:, :n]
    shortfall = residual(structural, point, scaled.rhs)  # b' - A' x'
    activity = dot(jnp.abs(structural), point) + jnp.abs(scaled.rhs)
    satisfied = jnp.all(shortfall <= 4 * tolerance * activity)
    return _Verdict(
        step=step,
        finite=finite,
        well_conditioned=well_conditioned,
        optimal=finite & well_conditioned & satisfied & step.primal_feasible & step.dual_feasible,
        strictly_dual_feasible=finite & step.strictly_dual_feasible,
        infeasible=finite & step.farkas,
    )


def _verdict(tableau: Tableau, scaled: Scaled, tolerance, careful) -> _Verdict:
    """Classify a freshly factorised tableau and choose the primal pivot it calls for
    next, or say that it calls for a dual one (:func:`~jaxbandit.lp.pivoting.refined_step`;
    ``careful`` as there)."""
    finite, tableau = _finite_tableau(tableau)
    return _judged(tableau, scaled, tolerance, finite, refined_step(tableau, scaled, tolerance, careful))


def _check_verdict(tableau: Tableau, scaled: Scaled, tolerance) -> _Verdict:
    """Classify a freshly factorised tableau only (no pivot chosen): the basis check's."""
    finite, tableau = _finite_tableau(tableau)
    return _judged(tableau, scaled, tolerance, finite, classified_step(tableau, scaled, tolerance))


def _undecided_verdict() -> _Verdict:
    """A verdict that decides nothing and calls for no pivot: the cold start's."""
    false, zero = jnp.bool_(False), jnp.int32(0)
    step = Step(
        primal_feasible=false,
        farkas=false,
        dual_feasible=false,
        strictly_dual_feasible=false,
        leave=zero,
        enter=zero,
        can_pivot=false,
    )
    return _Verdict(
        step=step,
        finite=jnp.bool_(True),
        well_conditioned=jnp.bool_(True),
        optimal=false,
        strictly_dual_feasible=false,
        infeasible=false,
    )


# Refinement steps of the returned basic values beyond the tableau's.  The error
# of a step is about eps * cond(B) times that of the last *normwise*: when one basic
# value is huge (an arm that costs nothing) the small, costly ones can keep a large
# relative error in float32 after one step.
_FINAL_REFINEMENTS = 2


def _solution(tableau: Tableau, scaled: Scaled, cost, status, num_iterations) -> LPSolution:
    """The :class:`LPSolution` of ``tableau``'s basis, its values refined once more and
    unscaled (``cost`` ``(n,)`` the original costs)."""
    n = cost.shape[0]
    m = tableau.basis.shape[0]
    inverse = -tableau.rows[:m, n : n + m]  # the surplus columns of B^-1 M are -B^-1
    values = refined_values(
        inverse, scaled.matrix[:, tableau.basis], tableau.rows[:m, -1], scaled.rhs, _FINAL_REFINEMENTS
    )
    tableau = Tableau(tableau.rows.at[:m, -1].set(values), tableau.basis)
    rows = jnp.where(jnp.isfinite(tableau.rows), tableau.rows, jnp.zeros_like(tableau.rows))
    point = jnp.maximum(basic_point(Tableau(rows, tableau.basis), n)[:n], 0)
    x = jnp.where(scaled.valid, point * scaled.column_scale, jnp.zeros_like(point))
    objective = jnp.where(status == LPStatus.OPTIMAL, dot(cost, x), jnp.inf).astype(x.dtype)
    return LPSolution(
        x=x,
        objective=objective,
        status=jnp.asarray(status, jnp.int32),
        num_iterations=jnp.asarray(num_iterations, jnp.int32),
        basis=tableau.basis.astype(jnp.int32),
    )


class _Round(NamedTuple):
    """What :func:`solve` carries from one re-factorisation round to the next."""

    tableau: Tableau  # freshly factorised (or the exact surplus tableau)
    verdict: _Verdict  # of that tableau
    num_iterations: Array
    rounds: Array
    careful: Array  # a small pivot made B singular: no more small pivots
    warm: Array  # the round from a given basis: its verdict may not be final


def _cold_round(scaled: Scaled) -> _Round:
    """The start from the surplus basis.  It needs no elimination and no verdict: the
    surplus tableau is exact, and the first round's pivot loop picks its first pivot
    itself."""
    return _Round(
        surplus_tableau(scaled),
        _undecided_verdict(),
        jnp.int32(0),
        jnp.int32(0),
        jnp.bool_(False),
        jnp.bool_(False),
    )


# Pivots a warm start may take before its basis is judged.  Nearly every warm basis
# that a re-check refuses is one to three pivots from the new optimum; under vmap each
# pivot of this budget costs every lane of the batch, and a start that needs more
# is solved cold instead.
WARM_PIVOTS = 8


def _warm_pivot_round(carry: _Round, scaled: Scaled, tolerance, max_iterations, cold: _Round) -> _Round:
    """:func:`_pivot_round`, whose first round may start from any basis: its pivots
    are then at most :data:`WARM_PIVOTS`, and its verdict is kept only where final,
    else the solve starts over from ``cold``.

    From a start that is not lexicographically dual feasible the pivots do not keep
    the lexicographic order, so an optimal verdict is final only with a unique optimum
    (strictly dual feasible: every other vertex is worse on the cost, or on ``sum(x)``
    at a tied cost), hence the canonical one; a Farkas row is final however it was
    reached.  After a pivot that made the basis singular, the tableau kept was never
    factorised: nothing said of it is final.  One round function serves both, so the
    program holds one copy of it.
    """
    budget = jnp.where(carry.warm, jnp.minimum(max_iterations, WARM_PIVOTS), max_iterations)
    new = _pivot_round(carry, scaled, tolerance, budget)
    v = new.verdict
    final = ~new.careful & ((v.optimal & v.strictly_dual_feasible) | v.infeasible)
    restart = carry.warm & ~final
    return jax.tree.map(lambda a, c: jnp.where(restart, c, a), new._replace(warm=jnp.bool_(False)), cold)


def _working(carry: _Round, scaled: Scaled, max_iterations: int, max_refactorizations: int):
    """No verdict yet, and budget left for another round."""
    v = carry.verdict
    done = ~scaled.valid | v.optimal | v.infeasible | (carry.careful & ~v.step.can_pivot)
    return ~done & (carry.rounds <= max_refactorizations) & (carry.num_iterations < max_iterations)


def _pivot_round(carry: _Round, scaled: Scaled, tolerance, max_iterations: int) -> _Round:
    """The pivot the verdict calls for on the fresh tableau, then the pivot loop, then a
    re-factorisation of the basis it ends on and a new verdict."""
    step = carry.verdict.step
    # A primal pivot is the verdict's (its entering column refined); a dual one the
    # pivot loop chooses itself, the same pivot on the same tableau.
    primal = step.can_pivot & step.primal_feasible
    tableau = jax.tree.map(
        lambda a, b: jnp.where(primal, a, b),
        pivot(carry.tableau, step.leave, step.enter),
        carry.tableau,
    )
    num_iterations = carry.num_iterations + primal.astype(jnp.int32)
    # The first round pivots on until the updated tableau says it is done.  Later
    # rounds take only the verdict's pivot, then re-factorise: the updated tableau has
    # gone astray once already, so each further pivot is chosen on exact data (and a
    # full loop there would hold up every lane of a vmapped batch).
    dual = step.can_pivot & ~step.primal_feasible
    loop_budget = jnp.where(carry.rounds == 0, max_iterations, num_iterations + dual.astype(jnp.int32))
    basis, num_iterations = pivot_loop(tableau, scaled, num_iterations, loop_budget, tolerance, carry.careful)
    tableau = factorised_tableau(scaled, basis)
    # A singular basis (a pivot on rounding noise): back to the last good one.
    singular = ~jnp.all(jnp.isfinite(tableau.rows))
    tableau = jax.tree.map(lambda a, b: jnp.where(singular, a, b), carry.tableau, tableau)
    careful = carry.careful | singular
    return _Round(
        tableau,
        _verdict(tableau, scaled, tolerance, careful),
        num_iterations,
        carry.rounds + 1,
        careful,
        carry.warm,
    )


def _final_status(carry: _Round, scaled: Scaled, max_iterations: int):
    v = carry.verdict
    return jnp.select(
        [~scaled.valid, v.optimal, v.infeasible, carry.num_iterations >= max_iterations],
        [LPStatus.INVALID_INPUT, LPStatus.OPTIMAL, LPStatus.INFEASIBLE, LPStatus.MAX_ITERATIONS],
        LPStatus.NUMERICAL_ERROR,
    )


@jax.jit
def solve(
    cost: ArrayLike,
    A: ArrayLike,
    b: ArrayLike,
    *,
    initial_basis: ArrayLike | None = None,
    initial_factor: BasisFactor | None = None,
    max_iterations: int | None = None,
    max_refactorizations: int | None = None,
    feasibility_tolerance: float | None = None,
) -> LPSolution:
    """Solve ``min cost @ x  s.t.  A x >= b, x >= 0`` (``cost >= 0``) exactly.

    Args:
        cost: ``(n,)`` non-negative costs.
        A: ``(m, n)`` constraint matrix (float32 or float64; sets the working dtype).
        b: ``(m,)`` right-hand side.
        initial_basis: ``(m,)`` a basis to start from (e.g. a previous
            :attr:`LPSolution.basis`), whatever its feasibility for this data: at most
            :data:`WARM_PIVOTS` pivots from it, then a verdict.  Kept only if that
            verdict is final (a verified unique optimum, or a Farkas row); otherwise
            the solve starts over from the surplus basis with a fresh budget.  So the
            answer is the cold solve's: the same verified canonical optimum, or exactly
            the cold solve's result (``num_iterations`` then counts the cold solve's
            pivots only).
        initial_factor: instead of ``initial_basis``, a
            :class:`~jaxbandit.lp.types.BasisFactor` of this ``A``
            (:func:`~jaxbandit.lp.warm_start.factor_basis`): the same start, its tableau
            built from the kept inverse rather than by elimination.
        max_iterations: pivot budget (default ``3 * (m + n)``).
        max_refactorizations: how often a basis that fails verification is re-factorised
            and pivoted on again, one pivot per round (default
            :func:`~jaxbandit.lp.types.default_refactorizations`; under ``vmap`` every
            lane waits for the rounds any lane needs).
        feasibility_tolerance: relative tolerance (default
            :func:`~jaxbandit.lp.types.default_tolerance`).

        The three settings may be traced scalars: one compiled program serves any
        values (a default left at None is a constant of the program).

    Returns:
        An :class:`LPSolution` with the canonical optimum (see the module docstring).
    """
    if initial_basis is not None and initial_factor is not None:
        raise ValueError("give initial_basis or initial_factor, not both.")
    cost, matrix, rhs = check_inputs(cost, A, b)
    m, n = matrix.shape
    tolerance = (
        default_tolerance(matrix.dtype) if feasibility_tolerance is None else feasibility_tolerance
    )
    tolerance = jnp.asarray(tolerance, matrix.dtype)
    if max_iterations is None:
        max_iterations = 3 * (m + n)
    if max_refactorizations is None:
        max_refactorizations = default_refactorizations(matrix.dtype)
    scaled = scale(cost, matrix, rhs)
    cold = _cold_round(scaled)
    start = None
    if initial_basis is not None:
        initial_basis = jnp.asarray(initial_basis, jnp.int32)
        if initial_basis.shape != (m,):
            raise ValueError(f"initial_basis must have shape ({m},), got {initial_basis.shape}.")
        start = factorised_tableau(scaled, initial_basis)
    if initial_factor is not None:
        check_factor_shapes(initial_factor, m, n)
        start = factor_tableau(scaled, initial_factor)

    budget = {"max_iterations": max_iterations, "max_refactorizations": max_refactorizations}
    working = functools.partial(_working, scaled=scaled, **budget)
    round_args = {"scaled": scaled, "tolerance": tolerance, "max_iterations": max_iterations}
    if start is None:
        carry = jax.lax.while_loop(working, functools.partial(_pivot_round, **round_args), cold)
    else:
        warm_round = functools.partial(_warm_pivot_round, cold=cold, **round_args)
        carry = jax.lax.while_loop(working, warm_round, cold._replace(tableau=start, warm=jnp.bool_(True)))
    status = _final_status(carry, scaled, max_iterations)
    return _solution(carry.tableau, scaled, cost, status, carry.num_iterations)


@jax.jit
def check_basis(
    cost: ArrayLike,
    A: ArrayLike,
    b: ArrayLike,
    basis: ArrayLike,
    *,
    feasibility_tolerance: float | None = None,
) -> BasisCheck:
    """Verify a candidate basis with one ``m x m`` solve (no pivots): the warm-start check.

    ``ok`` means the basis is primal feasible and strictly lexicographically dual
    feasible, hence its point is the canonical optimum: then ``solution`` equals what
    :func:`solve` returns (bit for bit, same basis).  Otherwise call :func:`solve`.

    Args:
        cost, A, b: the LP, as in :func:`solve`.
        basis: ``(m,)`` int indices of basic variables among ``(x, surplus)``.
        feasibility_tolerance: as in :func:`solve` (a traced scalar or None).

    Returns:
        A :class:`BasisCheck`.
    """
    cost, matrix, rhs = check_inputs(cost, A, b)
    m, n = matrix.shape
    tolerance = (
        default_tolerance(matrix.dtype) if feasibility_tolerance is None else feasibility_tolerance
    )
    basis = jnp.asarray(basis, jnp.int32)
    if basis.shape != (m,):
        raise ValueError(f"basis must have shape ({m},), got {basis.shape}.")
    scaled = scale(cost, matrix, rhs)
    tableau = factorised_tableau(scaled, basis)
    verdict = _check_verdict(tableau, scaled, jnp.asarray(tolerance, matrix.dtype))
    ok = scaled.valid & verdict.optimal & verdict.strictly_dual_feasible
    status = jnp.where(ok, LPStatus.OPTIMAL, LPStatus.NUMERICAL_ERROR)
    return BasisCheck(ok, _solution(tableau, scaled, cost, status, jnp.int32(0)))
