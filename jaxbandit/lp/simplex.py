"""The lexicographic dual simplex: :func:`solve` and :func:`check_basis`.

Canonical solution.  Among the optimal solutions, :func:`solve` returns the
lexicographic minimiser of ``(cost @ x, sum(x), x[0], x[1], ..., x[n-1])``: the
optimal ``x`` with the smallest ``sum(x)`` and, should several remain, the
lexicographically smallest of those.  This point is unique, so warm and cold solves,
and both precisions, describe the same answer.  The dual simplex carries all these
objectives at once (a lexicographic ratio test, which in exact arithmetic also rules
out cycling), so no second solve is needed.  Ties are decided to rounding-error
tolerances, so in degenerate cases the two precisions agree to their tolerance, not
bit for bit.

Exactness.  Pivots update a dense tableau (rank-one updates).  The basis they end on
is then re-factorised from the original data (Gauss-Jordan, one ``m x m``
elimination); the basic values and the duals get iterative refinement with an
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
from typing import TYPE_CHECKING, NamedTuple, Optional

import jax
import jax.numpy as jnp

from jaxbandit._types import Array, ArrayLike
from jaxbandit.lp.numerics import (
    _divide,
    _dot,
    _gauss_jordan,
    _pivot_rows,
    _power_of_two_reciprocal,
    _refined_values,
    _residual,
    _row_residuals,
    _rows_dot,
)

if TYPE_CHECKING:  # only an annotation: warm_start depends on this module, not back
    from jaxbandit.lp.warm_start import BasisSensitivity

__all__ = [
    "BasisCheck",
    "LPSolution",
    "LPStatus",
    "check_basis",
    "default_refactorizations",
    "default_tolerance",
    "solve",
    "surplus_basis",
]


class LPStatus:
    """Status codes (``int32``) of :class:`LPSolution`."""

    OPTIMAL = 0  # verified optimal basis: x, objective are the canonical optimum
    INFEASIBLE = 1  # verified Farkas row: no x >= 0 satisfies A x >= b
    MAX_ITERATIONS = 2  # pivot budget spent before a verified answer
    NUMERICAL_ERROR = 3  # refactorisations could not verify the basis (ill-conditioned)
    INVALID_INPUT = 4  # non-finite data or a negative cost

    NAMES = {
        0: "optimal",
        1: "infeasible",
        2: "max_iterations",
        3: "numerical_error",
        4: "invalid_input",
    }


class LPSolution(NamedTuple):
    """Result of :func:`solve` (add a leading batch axis under ``vmap``).

    Attributes:
        x: ``(n,)`` the canonical optimal solution if ``status == OPTIMAL``; otherwise
            the last basic point, clipped to ``x >= 0`` (finite, meaningless).
        objective: ``()`` ``cost @ x`` if ``status == OPTIMAL``, ``+inf`` otherwise.
        status: ``()`` int32, an :class:`LPStatus` code.
        num_iterations: ``()`` int32, simplex pivots used.
        basis: ``(m,)`` int32 sorted indices of the basic variables among
            ``(x, surplus)`` (``n + m`` variables; surplus ``i`` is ``n + i``).  Feed it
            back as a warm start (:func:`check_basis`, ``solve(initial_basis=...)``).
    """

    x: Array
    objective: Array
    status: Array
    num_iterations: Array
    basis: Array


class BasisCheck(NamedTuple):
    """Result of :func:`check_basis` and :func:`~jaxbandit.lp.warm_start.quick_check`.

    Attributes:
        ok: ``()`` bool, the basis is primal feasible and *strictly* lexicographically
            dual feasible, so its point is the unique canonical optimum.
        solution: the :class:`LPSolution` of that basis (status ``OPTIMAL`` iff ok,
            else ``NUMERICAL_ERROR``; ``num_iterations = 0``).
        sensitivity: a :class:`~jaxbandit.lp.warm_start.BasisSensitivity` (``quick_check``
            only, else None).
    """

    ok: Array
    solution: LPSolution
    sensitivity: Optional[BasisSensitivity] = None


def default_tolerance(dtype) -> float:
    """Relative feasibility tolerance used for ``dtype`` (float32: 1e-5, float64: 1e-9)."""
    return 1e-9 if jnp.dtype(dtype) == jnp.float64 else 1e-5


def default_refactorizations(dtype) -> int:
    """Re-factorisation rounds :func:`solve` allows for ``dtype`` (float32: 2, float64: 3).

    float32: a second round certifies some LPs that one round leaves uncertified (a
    GPU's approximate division can send one astray); each round costs time only in
    batches where some lane needs it."""
    return 3 if jnp.dtype(dtype) == jnp.float64 else 2


def surplus_basis(num_constraints: int, num_variables: int) -> Array:
    """The all-surplus basis (``x = 0``): a valid ``initial_basis`` for any LP."""
    return jnp.arange(num_variables, num_variables + num_constraints, dtype=jnp.int32)


class _Scaled(NamedTuple):
    """The LP after power-of-two row and column scaling (exact in floating point)."""

    matrix: Array  # [A', -I], N = n + m
    rhs: Array  # b'
    objectives: Array  # level 0: cost', level 1: column scales (sum x)
    column_scale: Array  # x = column_scale * x'
    valid: Array


class _Tableau(NamedTuple):
    """Dense simplex tableau: ``m`` constraint rows then the two objective rows.

    Row ``i < m`` reads ``z[basis[i]] + sum_j rows[i, j] z[j] = rows[i, N]`` over the
    nonbasic ``j``; the slack block ``rows[:m, n:N]`` equals ``-B^{-1}``.  Rows ``m``
    and ``m + 1`` hold the reduced costs of the two objectives (last column: minus the
    objective value).
    """

    rows: Array
    basis: Array


def _validated(cost, matrix, rhs):
    """``(valid, cost, matrix, rhs)``: ``valid`` = finite data and ``cost >= 0``.

    Invalid data is replaced by zeros so that nothing downstream sees inf/NaN; callers
    report it in the status.
    """
    valid = (
        jnp.all(jnp.isfinite(matrix))
        & jnp.all(jnp.isfinite(rhs))
        & jnp.all(jnp.isfinite(cost))
        & jnp.all(cost >= 0)
    )
    zero_if_invalid = lambda a: jnp.where(valid, a, jnp.zeros_like(a))
    return valid, zero_if_invalid(cost), zero_if_invalid(matrix), zero_if_invalid(rhs)


def _scale(cost, matrix, rhs) -> _Scaled:
    """Validate (:func:`_validated`) and equilibrate the LP by powers of two."""
    m, n = matrix.shape
    dtype = matrix.dtype
    valid, cost, matrix, rhs = _validated(cost, matrix, rhs)
    # Rows: |b'_i| ~ 1 so that "row i is violated" means the same for every row (rows
    # with b_i = 0 use their largest entry).  Columns: max_i |A'_ij| ~ 1.
    row_size = jnp.where(rhs != 0, jnp.abs(rhs), jnp.max(jnp.abs(matrix), axis=1))
    row_scale = _power_of_two_reciprocal(row_size)
    matrix = matrix * row_scale[:, None]
    column_scale = _power_of_two_reciprocal(jnp.max(jnp.abs(matrix), axis=0))
    matrix = matrix * column_scale[None, :]
    scaled_cost = cost * column_scale
    cost_scale = _power_of_two_reciprocal(jnp.max(scaled_cost))
    sum_scale = _power_of_two_reciprocal(jnp.max(column_scale))
    zeros = jnp.zeros((m,), dtype)
    objectives = jnp.stack(
        [
            jnp.concatenate([scaled_cost * cost_scale, zeros]),
            jnp.concatenate([column_scale * sum_scale, zeros]),
        ]
    )
    full = jnp.concatenate([matrix, -jnp.eye(m, dtype=dtype)], axis=1)
    return _Scaled(full, rhs * row_scale, objectives, column_scale, valid)


def _tableau(scaled: _Scaled, basis) -> _Tableau:
    """Build the tableau of ``basis`` from the original data: one ``m x m`` elimination.

    The basic values and both objectives' duals get iterative refinement with an
    extra-precise residual (two steps in float32, one in float64: as
    :func:`_check_refinements`), so they are accurate to about ``eps`` even when they
    cancel.  In float32 one step is not enough once ``eps cond(B)`` reaches a few 1e-3:
    a zero reduced cost can then come out below minus its noise level, and the optimal
    basis would be refused.
    """
    basis = jnp.sort(basis)  # a canonical order makes warm and cold results bit-equal
    matrix = scaled.matrix
    m = basis.shape[0]
    n = matrix.shape[1] - m
    basis_matrix = matrix[:, basis]
    solved = _gauss_jordan(basis_matrix, jnp.concatenate([matrix, scaled.rhs[:, None]], axis=1))
    body, values = solved[:, :-1], solved[:, -1]
    inverse = -body[:, n:]  # the surplus columns of M are -I
    values = _refined_values(inverse, basis_matrix, values, scaled.rhs, _check_refinements(matrix.dtype))
    # Duals y = g_B B^-1 of both objectives, refined the same way; the reduced costs
    # g - y M then follow with an extra-precise product too.
    weights = scaled.objectives[:, basis]  # (2, m)
    duals = _rows_dot(weights, inverse)
    for _ in range(_check_refinements(matrix.dtype)):
        duals = duals + _rows_dot(_row_residuals(basis_matrix, duals, weights), inverse)
    reduced = _row_residuals(matrix, duals, scaled.objectives)
    objective_values = jnp.sum(weights * values[None, :], axis=1)
    body = jnp.concatenate([body, values[:, None]], axis=1)
    reduced = jnp.concatenate([reduced, -objective_values[:, None]], axis=1)
    return _Tableau(jnp.concatenate([body, reduced], axis=0), basis)


# Largest eps * cond(B) of a certified basis.  The basic values get one step of
# iterative refinement with an extra-precise residual, which contracts their error by
# about eps * cond(B): at 1e-2 the refined values are accurate to ~1e-2 * eps * cond.
_CONDITION_LIMIT = 1e-2


class _Magnitudes(NamedTuple):
    """Absolute values that bound the rounding error of tableau quantities."""

    inverse: Array  # (m, m) |B^-1|, read off the tableau (its surplus block is -B^-1)
    basis_matrix: Array  # (m, m) |B|
    body: Array  # (m, N) |B^-1 M|
    matrix: Array  # (m, N) |M|


def _magnitudes(tableau: _Tableau, scaled: _Scaled) -> _Magnitudes:
    rows, basis = tableau
    m = basis.shape[0]
    total = scaled.matrix.shape[1]
    n = total - m
    matrix = jnp.abs(scaled.matrix)
    return _Magnitudes(
        inverse=jnp.abs(rows[:m, n:total]),
        basis_matrix=matrix[:, basis],
        body=jnp.abs(rows[:m, :total]),
        matrix=matrix,
    )


def _reduced_cost_noise(reduced, costs, weights, magnitudes: _Magnitudes, tolerance):
    """How negative a reduced cost ``d = g - g_B B^-1 M = g - y M`` may be and still be 0.

    ``tolerance`` times its terms ``|g_j| + |y| |M_j| + |g_B| |B^-1 M_j|`` (relative
    dual feasibility; the last term is how the tableau computes it).  The duals are the
    surplus block of ``d`` (``d_{n+i} = y_i``).

    Args:
        reduced: ``(L, N)`` reduced costs, one row per objective.
        costs: ``(L, N)`` the objectives' costs ``g``.
        weights: ``(L, m)`` the objectives' costs of the basic variables ``g_B``.

    Returns:
        ``(L, N)`` non-negative.
    """
    m, total = magnitudes.matrix.shape
    duals = jnp.abs(reduced[:, total - m :])
    magnitude = (
        jnp.abs(costs)
        + _rows_dot(duals, magnitudes.matrix)
        + _rows_dot(jnp.abs(weights), magnitudes.body)
    )
    return tolerance * magnitude


def _row_scales(rows, scaled: _Scaled, m, n):
    """Magnitude of each basic value ``(B^-1 b')_i``: ``(|B^-1| |b'|)_i``."""
    return _dot(jnp.abs(rows[:m, n : n + m]), jnp.abs(scaled.rhs))


class _DualStep(NamedTuple):
    """The dual simplex half of :class:`_Step`: all a primal infeasible basis needs."""

    primal_feasible: Array
    farkas: Array
    leave: Array
    enter: Array
    can_pivot: Array  # some column may enter on the leaving row


def _dual_step(
    tableau: _Tableau, scaled: _Scaled, magnitudes, nonbasic, tolerance, careful, classify_only=False
) -> _DualStep:
    """Primal feasibility, and the dual simplex step on the most infeasible row
    (relative to its magnitude), entering column by the lexicographic ratio test."""
    rows, basis = tableau
    m = basis.shape[0]
    n = scaled.matrix.shape[1] - m
    dtype = rows.dtype
    values = rows[:m, -1]
    violation = _divide(values, jnp.maximum(_row_scales(rows, scaled, m, n), jnp.finfo(dtype).tiny))
    leave = jnp.argmin(violation).astype(jnp.int32)
    primal_feasible = jnp.min(violation) >= -tolerance  # violation[leave], without a gather
    # The whole row, as the pivot reads it (one gather for both); its surplus block is
    # the row of -B^-1.
    full_row = rows[leave]
    pivot_row = full_row[: n + m]
    entry_noise = 64 * jnp.finfo(dtype).eps * _dot(jnp.abs(full_row[n : n + m]), magnitudes.matrix)
    # Every entry beyond its rounding error may be the pivot: the lexicographic ratio
    # test decides.  Preferring only large entries (above tolerance * the row's
    # largest) would pick columns whose ratio is not the minimum: the next basis would
    # be dual infeasible, and the primal clean-up would pivot on that same small entry.
    # Small pivots are refused only once one has led to a singular basis (``careful``).
    usable = nonbasic & (pivot_row < -entry_noise)
    stable = usable & (pivot_row < -tolerance * jnp.max(jnp.abs(pivot_row)))
    candidates = jnp.where(careful, stable, usable)
    # Infeasibility needs a row with no usable entry at all, whatever careful refuses.
    farkas = ~primal_feasible & ~jnp.any(usable)
    if classify_only:  # the warm-start check needs no pivot
        enter = jnp.int32(0)
    else:
        enter = _entering_column(tableau, magnitudes, scaled, pivot_row, candidates, tolerance)
    return _DualStep(primal_feasible, farkas, leave, enter, jnp.any(candidates))


class _PrimalStep(NamedTuple):
    """The primal half of :class:`_Step`: dual feasibility and the clean-up pivot."""

    dual_feasible: Array
    strictly_dual_feasible: Array
    leave: Array
    enter: Array


def _primal_step(
    tableau: _Tableau, scaled: _Scaled, magnitudes, nonbasic, values, body, tolerance, precise, classify_only
) -> _PrimalStep:
    """Dual feasibility, and the primal simplex step on the most negative reduced cost
    (relative to its rounding-error level; cost first, at tied cost the sum) with a
    Harris ratio test.  ``values`` ``(m,)`` and ``body`` ``(m, N)`` are the tableau's
    basic values and ``B^-1 M``."""
    rows, basis = tableau
    m = basis.shape[0]
    total = scaled.matrix.shape[1]
    n = total - m
    dtype = rows.dtype
    reduced = rows[m : m + 2, :total]
    noise = _reduced_cost_noise(
        reduced, scaled.objectives, scaled.objectives[:, basis], magnitudes, tolerance
    )
    cost_tied = jnp.abs(reduced[0]) <= noise[0]
    improving = nonbasic[None, :] & (reduced < -noise)
    improving_sum = improving[1] & cost_tied
    relative = _divide(reduced, jnp.maximum(noise, jnp.finfo(dtype).tiny))
    by_cost = jnp.any(improving[0])
    enter = jnp.where(
        by_cost,
        jnp.argmin(jnp.where(improving[0], relative[0], jnp.inf)).astype(jnp.int32),
        jnp.argmin(jnp.where(improving_sum, relative[1], jnp.inf)).astype(jnp.int32),
    )
    # Primal ratio test on the entering column.  An entry blocks if it exceeds
    # tolerance times its own magnitude (|B^-1| |M_q|): entries of one column can differ
    # by many orders (a free arm's huge value next to small ones).
    column = body[:, enter]
    matrix_column = scaled.matrix[:, enter]
    if precise and not classify_only:  # one step of refinement with an extra-precise residual
        inverse = -body[:, n:]
        column = column + _dot(inverse, _residual(scaled.matrix[:, basis], column, matrix_column))
    blocking = column > tolerance * _dot(magnitudes.inverse, jnp.abs(matrix_column))
    safe_column = jnp.where(blocking, column, jnp.ones_like(column))
    ratios = jnp.where(blocking, _divide(jnp.maximum(values, 0), safe_column), jnp.inf)
    # Harris: of the rows whose ratio is within tolerance of the minimum, pivot on the
    # largest entry (a degenerate row with a tiny entry would make B nearly singular).
    row_scale = _row_scales(rows, scaled, m, n)
    bound = jnp.min(jnp.where(blocking, _divide(jnp.maximum(values, 0) + tolerance * row_scale, safe_column), jnp.inf))
    near_minimum = blocking & (ratios <= bound)
    leave = jnp.argmax(jnp.where(near_minimum, column, -jnp.inf)).astype(jnp.int32)
    # Both objectives are >= 0 on x >= 0, so an unblocked improving column is noise.
    dual_feasible = ~(by_cost | jnp.any(improving_sum)) | ~jnp.any(blocking)
    strictly = jnp.all(
        ~nonbasic | (reduced[0] > noise[0]) | (cost_tied & (reduced[1] > noise[1]))
    )
    return _PrimalStep(dual_feasible, strictly, leave, enter)


class _Step(NamedTuple):
    """What the current basis calls for: a dual pivot, a primal pivot, or nothing."""

    primal_feasible: Array  # every basic value >= -tolerance * its magnitude
    farkas: Array  # a violated row with no negative entry: proven infeasible
    dual_feasible: Array  # no nonbasic column improves an objective noticeably
    strictly_dual_feasible: Array  # every nonbasic column is strictly worse (unique optimum)
    leave: Array  # pivot row
    enter: Array  # pivot column
    can_pivot: Array


def _next_step(
    tableau: _Tableau,
    scaled: _Scaled,
    tolerance,
    careful=False,
    precise: bool = False,
    classify_only: bool = False,
) -> _Step:
    """Classify the basis and pick the next pivot: the dual simplex step
    (:func:`_dual_step`) while primal infeasible, else the primal clean-up step
    (:func:`_primal_step`).  ``careful`` refuses small dual pivots; ``precise`` refines
    the entering column first (used on freshly factorised tableaus); ``classify_only``
    skips choosing the dual pivot (a check needs only the verdict)."""
    rows, basis = tableau
    m = basis.shape[0]
    total = scaled.matrix.shape[1]
    nonbasic = _nonbasic_mask(basis, total)
    values = rows[:m, -1]
    body = rows[:m, :total]
    magnitudes = _magnitudes(tableau, scaled)
    dual = _dual_step(tableau, scaled, magnitudes, nonbasic, tolerance, careful, classify_only)
    primal = _primal_step(tableau, scaled, magnitudes, nonbasic, values, body, tolerance, precise, classify_only)
    dual_step = ~dual.primal_feasible
    return _Step(
        primal_feasible=dual.primal_feasible,
        farkas=dual.farkas,
        dual_feasible=primal.dual_feasible,
        strictly_dual_feasible=primal.strictly_dual_feasible,
        leave=jnp.where(dual_step, dual.leave, primal.leave),
        enter=jnp.where(dual_step, dual.enter, primal.enter),
        can_pivot=jnp.where(dual_step, dual.can_pivot, ~primal.dual_feasible),
    )


class _Verdict(NamedTuple):
    step: _Step  # the next pivot, chosen on the fresh tableau with refined values
    finite: Array
    well_conditioned: Array  # eps * cond(B) small enough to trust the verdict
    optimal: Array  # primal feasible and lexicographically dual feasible
    strictly_dual_feasible: Array  # valid dual simplex start, unique optimum
    infeasible: Array  # a Farkas row


def _verdict(
    tableau: _Tableau, scaled: _Scaled, tolerance, careful=False, classify_only: bool = False
) -> _Verdict:
    """Classify a freshly factorised tableau: verified optimal, a valid dual simplex
    start, proven infeasible, and the pivot it calls for next."""
    finite = jnp.all(jnp.isfinite(tableau.rows))
    rows = jnp.where(finite, tableau.rows, jnp.zeros_like(tableau.rows))
    tableau = _Tableau(rows, tableau.basis)
    step = _next_step(tableau, scaled, tolerance, careful, precise=True, classify_only=classify_only)
    # Skeel's condition number max_i (|B^-1| |B| 1)_i bounds the relative error of the
    # basic solution by about eps * cond: beyond `_CONDITION_LIMIT` nothing is certified.
    magnitudes = _magnitudes(tableau, scaled)
    condition = jnp.max(_dot(magnitudes.inverse, jnp.sum(magnitudes.basis_matrix, axis=1)))
    well_conditioned = jnp.finfo(rows.dtype).eps * condition <= _CONDITION_LIMIT
    # What callers measure: the returned (clipped) point satisfies every row to a
    # relative 4 * tolerance of its activity.
    m = tableau.basis.shape[0]
    n = scaled.matrix.shape[1] - m
    point = jnp.maximum(_basic_point(tableau, n)[:n], 0)
    structural = scaled.matrix[:, :n]
    shortfall = _residual(structural, point, scaled.rhs)  # b' - A' x'
    activity = _dot(jnp.abs(structural), point) + jnp.abs(scaled.rhs)
    satisfied = jnp.all(shortfall <= 4 * tolerance * activity)
    return _Verdict(
        step=step,
        finite=finite,
        well_conditioned=well_conditioned,
        optimal=finite & well_conditioned & satisfied & step.primal_feasible & step.dual_feasible,
        strictly_dual_feasible=finite & step.strictly_dual_feasible,
        infeasible=finite & step.farkas,
    )


def _surplus_tableau(scaled: _Scaled) -> _Tableau:
    """The tableau of the all-surplus basis, exactly: ``B = -I``, so the body is ``-M``,
    the basic values are ``-b'``, the duals are 0 and the reduced costs are the
    objectives themselves (what :func:`_tableau` computes for it, without an
    elimination)."""
    m = scaled.rhs.shape[0]
    n = scaled.matrix.shape[1] - m
    body = jnp.concatenate([-scaled.matrix, -scaled.rhs[:, None]], axis=1)
    reduced = jnp.concatenate([scaled.objectives, jnp.zeros((2, 1), scaled.matrix.dtype)], axis=1)
    return _Tableau(jnp.concatenate([body, reduced], axis=0), surplus_basis(m, n))


def _undecided_verdict() -> _Verdict:
    """A verdict that decides nothing and calls for no pivot: the cold start's."""
    false, zero = jnp.bool_(False), jnp.int32(0)
    step = _Step(
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


def _basic_point(tableau: _Tableau, num_variables: int):
    m = tableau.basis.shape[0]
    values = jnp.zeros((num_variables + m,), tableau.rows.dtype)
    return values.at[tableau.basis].set(tableau.rows[:m, -1])


def _nonbasic_mask(basis, size):
    return jnp.all(jnp.arange(size, dtype=jnp.int32)[:, None] != basis[None, :], axis=1)


def _entering_column(
    tableau: _Tableau, magnitudes: _Magnitudes, scaled: _Scaled, pivot_row, candidates, tolerance
):
    """Lexicographic ratio test on the leaving row ``pivot_row`` (``(N,)``, the
    tableau's row without its value) among the ``candidates`` columns.

    Levels: cost, sum(x), then x[0], ..., x[n-1], whose reduced costs are ``-rows[r]``
    for a basic ``x[k]`` in row ``r`` and ``e_k`` for a nonbasic one.  At each level a
    Harris-style bound keeps every column whose ratio is within rounding error of the
    minimum (so no reduced cost turns negative beyond its rounding error); the next
    level breaks the tie, and the first index breaks what is left.
    """
    rows, basis = tableau
    m = basis.shape[0]
    total = rows.shape[1] - 1
    n = total - m
    denominator = jnp.where(candidates, -pivot_row, jnp.ones_like(pivot_row))
    columns = jnp.arange(total, dtype=jnp.int32)

    def level_values(level):
        """Reduced costs of objective ``level`` and their rounding-error level.

        One row at a time (the sum's noise too is computed only at its level): a pivot
        is mostly decided at the cost level, and the later levels then never run."""
        first_two = jnp.minimum(level, 1)
        k = jnp.clip(level - 2, 0, n - 1)
        k_row = jnp.argmax(jnp.append(basis == k, True)).astype(jnp.int32)  # m if nonbasic
        unit = (columns == k).astype(rows.dtype)
        lexicographic = jnp.where(k_row < m, -rows[jnp.minimum(k_row, m - 1), :total], unit)
        objective = level < 2
        values = jnp.where(objective, rows[m + first_two, :total], lexicographic)
        costs = jnp.where(objective, scaled.objectives[first_two], unit)
        weights = jnp.where(
            objective,
            scaled.objectives[first_two, basis],
            (jnp.arange(m, dtype=jnp.int32) == k_row).astype(rows.dtype),
        )
        noise = _reduced_cost_noise(values[None, :], costs[None, :], weights[None, :], magnitudes, tolerance)
        return values, noise[0]

    def cond(carry):
        level, remaining = carry
        return (level < n + 2) & (jnp.sum(remaining) > 1)

    def narrow(remaining, values, noise):
        ratio = jnp.where(remaining, _divide(values, denominator), jnp.inf)
        bound = jnp.min(jnp.where(remaining, _divide(values + noise, denominator), jnp.inf))
        return remaining & (ratio <= bound)

    def body(carry):
        level, remaining = carry
        return level + 1, narrow(remaining, *level_values(level))

    # The cost level outside the loop (it keeps a lone candidate, so it is always safe
    # to apply): most pivots are decided there, and the loop then never runs.
    remaining = narrow(candidates, *level_values(jnp.int32(0)))
    _, remaining = jax.lax.while_loop(cond, body, (jnp.int32(1), remaining))
    return jnp.argmax(remaining).astype(jnp.int32)


class _PivotState(NamedTuple):
    tableau: _Tableau
    num_iterations: Array
    running: Array


def _pivot(tableau: _Tableau, leave, enter) -> _Tableau:
    """Rank-one tableau update; the pivot row becomes ``row / pivot``."""
    rows, basis = tableau
    leaving = jnp.arange(rows.shape[0], dtype=jnp.int32) == leave
    rows = _pivot_rows(rows, leave, leaving, rows[:, enter])
    basis = jnp.where(leaving[: basis.shape[0]], enter.astype(jnp.int32), basis)
    return _Tableau(rows, basis)


def _pivot_loop(
    tableau: _Tableau, scaled: _Scaled, num_iterations, max_iterations, tolerance, careful
):
    """Simplex pivots until optimal, a Farkas row, no usable pivot, or the budget.

    Dual steps first, in a loop of their own: while the basis is primal infeasible the
    next pivot is always the dual one, so that loop takes exactly the pivots of the
    full one without computing its primal half (small kernels that a vmapped loop pays
    for until its slowest lane is done).  The full loop then takes the primal clean-up
    steps, where :func:`_may_take_primal_step` says rounding may have left one.
    """

    def dual_body(state: _PivotState) -> _PivotState:
        magnitudes = _magnitudes(state.tableau, scaled)
        nonbasic = _nonbasic_mask(state.tableau.basis, scaled.matrix.shape[1])
        step = _dual_step(state.tableau, scaled, magnitudes, nonbasic, tolerance, careful)
        go = ~step.primal_feasible & step.can_pivot
        pivoted = _pivot(state.tableau, step.leave, step.enter)
        new = jax.tree.map(lambda a, b: jnp.where(go, a, b), pivoted, state.tableau)
        return _PivotState(new, state.num_iterations + go.astype(jnp.int32), go)

    def step(state: _PivotState) -> _PivotState:
        next_step = _next_step(state.tableau, scaled, tolerance, careful)
        go = next_step.can_pivot
        pivoted = _pivot(state.tableau, next_step.leave, next_step.enter)
        new = jax.tree.map(lambda a, b: jnp.where(go, a, b), pivoted, state.tableau)
        return _PivotState(new, state.num_iterations + go.astype(jnp.int32), go)

    def cond(state: _PivotState):
        return state.running & (state.num_iterations < max_iterations)

    state = _PivotState(tableau, num_iterations, jnp.bool_(True))
    state = jax.lax.while_loop(cond, dual_body, state)
    running = _may_take_primal_step(state.tableau, scaled, tolerance)
    state = jax.lax.while_loop(cond, step, state._replace(running=running))
    return state.tableau.basis, state.num_iterations


def _may_take_primal_step(tableau: _Tableau, scaled: _Scaled, tolerance):
    """False only where :func:`_next_step` cannot call for a pivot after the dual loop.

    That loop stops primal feasible (then a pivot needs a nonbasic column that improves
    the cost, ``d_cost < -noise <= 0``, or the sum at a tied cost, ``d_sum < 0`` with
    ``|d_cost| <= noise``) or with no usable dual pivot (then the dual step it would
    take again has none either).  The cost row's noise is taken twice over, so that its
    rounding cannot make this test refuse what ``_next_step`` would take: a cheap look
    (one noise row) instead of a whole step, which is what the second loop's first
    round costs otherwise.
    """
    rows, basis = tableau
    m = basis.shape[0]
    total = scaled.matrix.shape[1]
    reduced = rows[m : m + 2, :total]
    noise = _reduced_cost_noise(
        reduced[:1], scaled.objectives[:1], scaled.objectives[:1, basis], _magnitudes(tableau, scaled), tolerance
    )[0]
    improving = (reduced[0] < 0) | ((reduced[1] < 0) & (jnp.abs(reduced[0]) <= 2 * noise))
    return jnp.any(_nonbasic_mask(basis, total) & improving)


# Refinement steps of the returned basic values beyond the tableau's.  The error
# of a step is about eps * cond(B) times that of the last *normwise*: when one basic
# value is huge (an arm that costs nothing) the small, costly ones can keep a large
# relative error in float32 after one step.
_FINAL_REFINEMENTS = 2


def _check_refinements(dtype) -> int:
    """Refinement steps of :func:`~jaxbandit.lp.warm_start.quick_check`'s values (its
    hot path in simulations), and of a fresh tableau's values and duals (:func:`_tableau`).

    Step k leaves an error of about ``(eps cond(B))**(k + 1) |x|_inf`` on each value.
    float32: two steps (``solve`` returns four), which bring a small component next to
    a huge one (the case above) to about ``eps`` of itself; a third would only add to
    the cost of every check.  float64: one step, below ``1e-16 |x|_inf`` for any
    ``cond(B) <= 1e8``.
    """
    return 2 if jnp.dtype(dtype) == jnp.float32 else 1


def _solution(tableau: _Tableau, scaled: _Scaled, cost, status, num_iterations) -> LPSolution:
    n = cost.shape[0]
    m = tableau.basis.shape[0]
    inverse = -tableau.rows[:m, n : n + m]  # the surplus columns of B^-1 M are -B^-1
    values = _refined_values(
        inverse, scaled.matrix[:, tableau.basis], tableau.rows[:m, -1], scaled.rhs, _FINAL_REFINEMENTS
    )
    tableau = _Tableau(tableau.rows.at[:m, -1].set(values), tableau.basis)
    rows = jnp.where(jnp.isfinite(tableau.rows), tableau.rows, jnp.zeros_like(tableau.rows))
    point = jnp.maximum(_basic_point(_Tableau(rows, tableau.basis), n)[:n], 0)
    x = jnp.where(scaled.valid, point * scaled.column_scale, jnp.zeros_like(point))
    objective = jnp.where(status == LPStatus.OPTIMAL, _dot(cost, x), jnp.inf).astype(x.dtype)
    return LPSolution(
        x=x,
        objective=objective,
        status=jnp.asarray(status, jnp.int32),
        num_iterations=jnp.asarray(num_iterations, jnp.int32),
        basis=tableau.basis.astype(jnp.int32),
    )


def _check_inputs(cost, matrix, rhs):
    matrix = jnp.asarray(matrix)
    if matrix.ndim != 2:
        raise ValueError(f"A must have shape (m, n), got shape {matrix.shape}.")
    m, n = matrix.shape
    dtype = jnp.result_type(matrix)
    if not jnp.issubdtype(dtype, jnp.floating):
        raise TypeError(f"A must be a floating-point array, got dtype {dtype}.")
    cost = jnp.asarray(cost, dtype)
    rhs = jnp.asarray(rhs, dtype)
    if cost.shape != (n,):
        raise ValueError(f"cost must have shape ({n},) to match A {matrix.shape}, got {cost.shape}.")
    if rhs.shape != (m,):
        raise ValueError(f"b must have shape ({m},) to match A {matrix.shape}, got {rhs.shape}.")
    return cost, matrix, rhs


class _Round(NamedTuple):
    """What :func:`solve` carries from one re-factorisation round to the next."""

    tableau: _Tableau  # freshly factorised (or the exact surplus tableau)
    verdict: _Verdict  # of that tableau
    num_iterations: Array
    rounds: Array
    careful: Array  # a small pivot made B singular: no more small pivots
    from_initial_basis: Array  # started from initial_basis: may restart cold


def _cold_round(scaled: _Scaled) -> _Round:
    """The start from the surplus basis.  It needs no elimination and no verdict: the
    surplus tableau is exact, and the first round's pivot loop picks its first pivot
    itself."""
    return _Round(
        _surplus_tableau(scaled),
        _undecided_verdict(),
        jnp.int32(0),
        jnp.int32(0),
        jnp.bool_(False),
        jnp.bool_(False),
    )


def _warm_round(scaled: _Scaled, initial_basis, tolerance, cold: _Round) -> _Round:
    """The start from ``initial_basis`` where it is strictly lexicographically dual
    feasible (a valid dual simplex start), else ``cold``."""
    warm = _tableau(scaled, initial_basis)
    warm_verdict = _verdict(warm, scaled, tolerance)
    use_warm = warm_verdict.strictly_dual_feasible
    return jax.tree.map(
        lambda a, c: jnp.where(use_warm, a, c),
        cold._replace(tableau=warm, verdict=warm_verdict, from_initial_basis=jnp.bool_(True)),
        cold,
    )


def _working(carry: _Round, scaled: _Scaled, max_iterations: int, max_refactorizations: int):
    """No verdict yet, and budget left for another round."""
    v = carry.verdict
    done = ~scaled.valid | v.optimal | v.infeasible | (carry.careful & ~v.step.can_pivot)
    return ~done & (carry.rounds <= max_refactorizations) & (carry.num_iterations < max_iterations)


def _must_restart(carry: _Round, scaled: _Scaled, max_iterations: int, max_refactorizations: int):
    """The solve from ``initial_basis`` stopped without a verdict: start over cold."""
    v = carry.verdict
    working = _working(carry, scaled, max_iterations, max_refactorizations)
    return carry.from_initial_basis & ~working & scaled.valid & ~(v.optimal | v.infeasible)


def _pivot_round(carry: _Round, scaled: _Scaled, tolerance, max_iterations: int) -> _Round:
    """The pivot the verdict chose on the fresh tableau, then the pivot loop, then a
    re-factorisation of the basis it ends on and a new verdict."""
    step = carry.verdict.step
    tableau = jax.tree.map(
        lambda a, b: jnp.where(step.can_pivot, a, b),
        _pivot(carry.tableau, step.leave, step.enter),
        carry.tableau,
    )
    num_iterations = carry.num_iterations + step.can_pivot.astype(jnp.int32)
    # The first round pivots on until the updated tableau says it is done.  Later
    # rounds take only that one pivot, then re-factorise: the updated tableau has gone
    # astray once already, so each further pivot is chosen on exact data (and a full
    # loop there would hold up every lane of a vmapped batch).
    loop_budget = jnp.where(carry.rounds == 0, max_iterations, num_iterations)
    basis, num_iterations = _pivot_loop(
        tableau, scaled, num_iterations, loop_budget, tolerance, carry.careful
    )
    tableau = _tableau(scaled, basis)
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
        carry.from_initial_basis,
    )


def _final_status(carry: _Round, scaled: _Scaled, max_iterations: int):
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
    max_iterations: int | None = None,
    max_refactorizations: int | None = None,
    feasibility_tolerance: float | None = None,
) -> LPSolution:
    """Solve ``min cost @ x  s.t.  A x >= b, x >= 0`` (``cost >= 0``) exactly.

    Args:
        cost: ``(n,)`` non-negative costs.
        A: ``(m, n)`` constraint matrix (float32 or float64; sets the working dtype).
        b: ``(m,)`` right-hand side.
        initial_basis: ``(m,)`` a previous :attr:`LPSolution.basis` to start from.  Used
            only if it is strictly lexicographically dual feasible for this data;
            otherwise the surplus basis is used.  If the solve from it ends without a
            verdict (no verified optimum, no Farkas row), the solve restarts from the
            surplus basis with a fresh budget, so the answer is never worse than a cold
            solve's: the same verified optimum, or exactly the cold solve's result
            (``num_iterations`` then counts the cold solve's pivots only).
        max_iterations: pivot budget (default ``3 * (m + n)``).
        max_refactorizations: how often a basis that fails verification is re-factorised
            and pivoted on again, one pivot per round (default
            :func:`default_refactorizations`; under ``vmap`` every lane waits for the
            rounds any lane needs).
        feasibility_tolerance: relative tolerance (default :func:`default_tolerance`).

        The three settings may be traced scalars: one compiled program serves any
        values (a default left at None is a constant of the program).

    Returns:
        An :class:`LPSolution` with the canonical optimum (see the module docstring).
    """
    cost, matrix, rhs = _check_inputs(cost, A, b)
    m, n = matrix.shape
    tolerance = (
        default_tolerance(matrix.dtype) if feasibility_tolerance is None else feasibility_tolerance
    )
    tolerance = jnp.asarray(tolerance, matrix.dtype)
    if max_iterations is None:
        max_iterations = 3 * (m + n)
    if max_refactorizations is None:
        max_refactorizations = default_refactorizations(matrix.dtype)
    scaled = _scale(cost, matrix, rhs)
    cold = _cold_round(scaled)
    initial = cold
    if initial_basis is not None:
        initial_basis = jnp.asarray(initial_basis, jnp.int32)
        if initial_basis.shape != (m,):
            raise ValueError(f"initial_basis must have shape ({m},), got {initial_basis.shape}.")
        initial = _warm_round(scaled, initial_basis, tolerance, cold)

    budget = {"max_iterations": max_iterations, "max_refactorizations": max_refactorizations}
    working = functools.partial(_working, scaled=scaled, **budget)
    restart = functools.partial(_must_restart, scaled=scaled, **budget)
    pivot_round = functools.partial(_pivot_round, scaled=scaled, tolerance=tolerance, max_iterations=max_iterations)
    # The cold loop stays free of the restart logic, whose extra branch every cold
    # solve would pay for.
    if initial_basis is None:
        carry = jax.lax.while_loop(working, pivot_round, initial)
    else:
        carry = jax.lax.while_loop(
            lambda c: working(c) | restart(c),
            lambda c: jax.lax.cond(restart(c), lambda _: cold, pivot_round, c),
            initial,
        )
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
    cost, matrix, rhs = _check_inputs(cost, A, b)
    m, n = matrix.shape
    tolerance = (
        default_tolerance(matrix.dtype) if feasibility_tolerance is None else feasibility_tolerance
    )
    basis = jnp.asarray(basis, jnp.int32)
    if basis.shape != (m,):
        raise ValueError(f"basis must have shape ({m},), got {basis.shape}.")
    scaled = _scale(cost, matrix, rhs)
    tableau = _tableau(scaled, basis)
    verdict = _verdict(tableau, scaled, jnp.asarray(tolerance, matrix.dtype), classify_only=True)
    ok = scaled.valid & verdict.optimal & verdict.strictly_dual_feasible
    status = jnp.where(ok, LPStatus.OPTIMAL, LPStatus.NUMERICAL_ERROR)
    return BasisCheck(ok, _solution(tableau, scaled, cost, status, jnp.int32(0)))
