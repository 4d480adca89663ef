"""Small dense linear programs, solved exactly in JAX by a lexicographic dual simplex.

Standard form (one LP; add batch axes with ``jax.vmap``)::

    minimise    cost @ x
    subject to  A @ x >= b,   x >= 0,        with cost >= 0,

``A`` of shape ``(m, n)``.  Non-negative costs make the LP bounded and make the
all-surplus basis (``x = 0``) dual feasible, so a dual simplex needs no phase 1:
this is the shape of covering LPs such as the bandit lower bound.  Costs with a
negative entry are reported as ``LPStatus.INVALID_INPUT``.

Canonical solution.  Among the optimal solutions, :func:`solve` returns the
lexicographic minimiser of ``(cost @ x, sum(x), x[0], x[1], ..., x[n-1])``: the
optimal ``x`` with the smallest ``sum(x)`` and, should several remain, the
lexicographically smallest of those.  This point is unique.  The dual simplex
carries all these objectives at once (the lexicographic ratio test, which also rules
out cycling), so no second solve is needed.

Exactness.  Pivots update a dense tableau; the last basis is then re-factorised from
the original data (one ``m x m`` solve) and *verified* (primal and dual feasibility,
relative tolerance ``feasibility_tolerance``).  A basis that fails the check is
pivoted on from the fresh tableau, up to ``max_refactorizations`` times.  ``x`` and
``objective`` therefore come from a verified basis, in float32 as in float64.

Everything is pure, fixed-shape and jit/vmap-able.  Under ``vmap`` the pivot loop
runs until the slowest LP of the batch is done (at most ``max_iterations`` pivots).
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp
from jaxbandit._types import Array, ArrayLike

__all__ = [
    "LPStatus",
    "LPSolution",
    "BasisCheck",
    "solve",
    "check_basis",
    "surplus_basis",
    "default_tolerance",
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
    """Result of :func:`check_basis`.

    Attributes:
        ok: ``()`` bool, the basis is primal feasible and *strictly* lexicographically
            dual feasible, so its point is the unique canonical optimum.
        solution: the :class:`LPSolution` of that basis (status ``OPTIMAL`` iff ok,
            else ``NUMERICAL_ERROR``; ``num_iterations = 0``).
    """

    ok: Array
    solution: LPSolution


def default_tolerance(dtype) -> float:
    """Relative feasibility tolerance used for ``dtype`` (float32: 1e-5, float64: 1e-9)."""
    return 1e-9 if jnp.dtype(dtype) == jnp.float64 else 1e-5


def surplus_basis(num_constraints: int, num_variables: int) -> Array:
    """The all-surplus basis (``x = 0``): a valid ``initial_basis`` for any LP."""
    return jnp.arange(num_variables, num_variables + num_constraints, dtype=jnp.int32)


# -- internals ---------------------------------------------------------------------


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


def _power_of_two_reciprocal(x):
    """``2**-round(log2(x))`` for ``x > 0`` (1 elsewhere): scaling that adds no rounding."""
    safe = jnp.where(x > 0, x, jnp.ones_like(x))
    return jnp.where(x > 0, jnp.exp2(-jnp.round(jnp.log2(safe))), jnp.ones_like(x))


def _scale(cost, matrix, rhs) -> _Scaled:
    m, n = matrix.shape
    dtype = matrix.dtype
    valid = (
        jnp.all(jnp.isfinite(matrix))
        & jnp.all(jnp.isfinite(rhs))
        & jnp.all(jnp.isfinite(cost))
        & jnp.all(cost >= 0)
    )
    # Replace invalid data so nothing downstream sees inf/NaN; the status reports it.
    matrix = jnp.where(valid, matrix, jnp.zeros_like(matrix))
    rhs = jnp.where(valid, rhs, jnp.zeros_like(rhs))
    cost = jnp.where(valid, cost, jnp.zeros_like(cost))
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
    """Build the tableau of ``basis`` from the original data: one ``m x m`` solve."""
    basis = jnp.sort(basis)  # a canonical order makes warm and cold results bit-equal
    matrix = scaled.matrix
    augmented = jnp.concatenate([matrix, scaled.rhs[:, None]], axis=1)
    body = jnp.linalg.solve(matrix[:, basis], augmented)
    objectives = jnp.concatenate(
        [scaled.objectives, jnp.zeros((2, 1), matrix.dtype)], axis=1
    )
    reduced = objectives - scaled.objectives[:, basis] @ body
    return _Tableau(jnp.concatenate([body, reduced], axis=0), basis)


class _Verdict(NamedTuple):
    finite: Array
    primal_feasible: Array
    optimal: Array  # primal feasible and lexicographically dual feasible
    strictly_dual_feasible: Array  # valid dual simplex start, unique optimum
    infeasible: Array  # a verified Farkas row


def _basic_point(tableau: _Tableau, num_variables: int):
    m = tableau.basis.shape[0]
    values = jnp.zeros((num_variables + m,), tableau.rows.dtype)
    values = values.at[tableau.basis].set(tableau.rows[:m, -1])
    return values


def _nonbasic_mask(basis, size):
    return jnp.ones((size,), bool).at[basis].set(False)


def _inverse_abs(rows, m, n):
    """``|B^-1|`` read off the tableau (its surplus block is ``-B^-1``)."""
    return jnp.abs(rows[:m, n : n + m])


def _row_scales(rows, scaled: _Scaled, m, n):
    """Rounding-error scale of each basic value ``(B^-1 b')_i``: ``(|B^-1| |b'|)_i``."""
    return _inverse_abs(rows, m, n) @ jnp.abs(scaled.rhs)


def _reduced_cost_scales(rows, weights, scaled: _Scaled, m, n):
    """Rounding-error scale of reduced costs ``g - g_B B^-1 M``, one row per objective.

    Args:
        weights: ``(L, m)`` the objectives' costs of the basic variables, ``g_B``.

    Returns:
        ``(L, N)`` the componentwise bound ``|g| + |g_B| |B^-1| |M|`` (up to ``eps``).
    """
    through_basis = jnp.abs(weights) @ _inverse_abs(rows, m, n)  # (L, m)
    return through_basis @ jnp.abs(scaled.matrix)


def _verdict(tableau: _Tableau, scaled: _Scaled, tolerance) -> _Verdict:
    rows, basis = tableau
    m = basis.shape[0]
    total = scaled.matrix.shape[1]
    n = total - m
    finite = jnp.all(jnp.isfinite(rows))
    rows = jnp.where(finite, rows, jnp.zeros_like(rows))
    nonbasic = _nonbasic_mask(basis, total)

    # Primal: each basic value >= -tolerance * its rounding-error scale, the same test
    # the pivot loop stops on.
    values = rows[:m, -1]
    primal_feasible = jnp.all(values >= -tolerance * _row_scales(rows, scaled, m, n))

    # Dual: reduced costs >= -tolerance * their rounding-error scale, lexicographically:
    # a cost-level tie (|d0| within tolerance) must have a non-negative sum level.
    reduced = rows[m : m + 2, :total]
    slack = tolerance * (
        scaled.objectives + _reduced_cost_scales(rows, scaled.objectives[:, basis], scaled, m, n)
    )
    cost_tied = jnp.abs(reduced[0]) <= slack[0]
    dual_feasible = jnp.all(
        ~nonbasic | ((reduced[0] >= -slack[0]) & (~cost_tied | (reduced[1] >= -slack[1])))
    )
    strictly = jnp.all(~nonbasic | (reduced[0] > slack[0]) | (cost_tied & (reduced[1] > slack[1])))

    # Farkas: a row whose basic value is clearly negative while every nonbasic entry is
    # >= 0 (relative to the row's largest entry): then no x >= 0 satisfies it.
    entries = jnp.where(nonbasic[None, :], rows[:m, :total], jnp.zeros((m, total), rows.dtype))
    entry_scale = jnp.max(jnp.abs(entries), axis=1)
    row_scale = _row_scales(rows, scaled, m, n)
    farkas_row = (values < -tolerance * row_scale) & jnp.all(
        entries >= -tolerance * entry_scale[:, None], axis=1
    )

    primal_feasible = primal_feasible & finite
    return _Verdict(
        finite=finite,
        primal_feasible=primal_feasible,
        optimal=primal_feasible & dual_feasible & finite,
        strictly_dual_feasible=strictly & finite,
        infeasible=jnp.any(farkas_row) & finite & ~primal_feasible,
    )


class _PivotState(NamedTuple):
    tableau: _Tableau
    num_iterations: Array
    running: Array


def _entering_column(rows, basis, leave, candidates, scaled: _Scaled, tolerance):
    """Lexicographic ratio test on row ``leave`` among the ``candidates`` columns.

    Levels: cost, sum(x), then x[0], ..., x[n-1], whose reduced costs are ``-rows[r]``
    for a basic ``x[k]`` in row ``r`` and ``e_k`` for a nonbasic one.  At each level a
    Harris-style bound keeps every column whose ratio is within rounding error of the
    minimum (so no reduced cost turns negative beyond its tolerance); the next level
    breaks the tie, and the first index breaks what is left.
    """
    m = basis.shape[0]
    total = rows.shape[1] - 1
    n = total - m
    pivot_row = rows[leave, :total]
    denominator = jnp.where(candidates, -pivot_row, jnp.ones_like(pivot_row))
    row_of = jnp.full((total,), -1, jnp.int32).at[basis].set(jnp.arange(m, dtype=jnp.int32))
    objective_scales = scaled.objectives + _reduced_cost_scales(
        rows, scaled.objectives[:, basis], scaled, m, n
    )

    def level_values(level):
        """Reduced costs of objective ``level`` and their rounding-error scales."""
        k = jnp.clip(level - 2, 0, n - 1)
        k_row = row_of[k]
        is_basic = k_row >= 0
        unit = (jnp.arange(total) == k).astype(rows.dtype)
        weights = jnp.where(jnp.arange(m) == k_row, 1, 0).astype(rows.dtype)[None, :]
        lexicographic = jnp.where(is_basic, -rows[jnp.maximum(k_row, 0), :total], unit)
        lexicographic_scale = unit + _reduced_cost_scales(rows, weights, scaled, m, n)[0]
        level_01 = jnp.minimum(level, 1)
        values = jnp.where(level < 2, rows[m + level_01, :total], lexicographic)
        scales = jnp.where(level < 2, objective_scales[level_01], lexicographic_scale)
        return values, scales

    def cond(carry):
        level, remaining = carry
        return (level < n + 2) & (jnp.sum(remaining) > 1)

    def body(carry):
        level, remaining = carry
        values, scales = level_values(level)
        ratio = jnp.where(remaining, values / denominator, jnp.inf)
        bound = jnp.min(jnp.where(remaining, (values + tolerance * scales) / denominator, jnp.inf))
        return level + 1, remaining & (ratio <= bound)

    _, remaining = jax.lax.while_loop(cond, body, (jnp.int32(0), candidates))
    return jnp.argmax(remaining)


def _pivot_loop(tableau: _Tableau, scaled: _Scaled, num_iterations, max_iterations, tolerance):
    """Dual simplex pivots until primal feasible, a Farkas row, or the budget."""
    m = tableau.basis.shape[0]
    total = scaled.matrix.shape[1]
    n = total - m

    def step(state: _PivotState) -> _PivotState:
        rows, basis = state.tableau
        # Leaving row: the largest infeasibility relative to its rounding-error scale.
        row_scale = _row_scales(rows, scaled, m, n)
        violation = rows[:m, -1] / jnp.maximum(row_scale, jnp.finfo(rows.dtype).tiny)
        leave = jnp.argmin(violation)
        feasible = violation[leave] >= -tolerance
        pivot_row = rows[leave, :total]
        nonbasic = _nonbasic_mask(basis, total)
        candidates = nonbasic & (pivot_row < -tolerance * jnp.max(jnp.abs(pivot_row)))
        stop = feasible | ~jnp.any(candidates)
        enter = _entering_column(rows, basis, leave, candidates, scaled, tolerance)
        # Rank-one update; the pivot row becomes row / pivot.
        pivot = rows[leave, enter]
        column = rows[:, enter].at[leave].add(-1.0)
        new_rows = rows - column[:, None] * (rows[leave] / pivot)[None, :]
        new_rows = jnp.where(stop, rows, new_rows)
        new_basis = jnp.where(stop, basis, basis.at[leave].set(enter.astype(jnp.int32)))
        return _PivotState(
            _Tableau(new_rows, new_basis),
            state.num_iterations + jnp.where(stop, 0, 1).astype(jnp.int32),
            ~stop,
        )

    def cond(state: _PivotState):
        return state.running & (state.num_iterations < max_iterations)

    state = jax.lax.while_loop(cond, step, _PivotState(tableau, num_iterations, jnp.bool_(True)))
    return state.tableau.basis, state.num_iterations


def _solution(tableau: _Tableau, scaled: _Scaled, cost, status, num_iterations) -> LPSolution:
    n = cost.shape[0]
    rows = jnp.where(jnp.isfinite(tableau.rows), tableau.rows, jnp.zeros_like(tableau.rows))
    point = jnp.maximum(_basic_point(_Tableau(rows, tableau.basis), n)[:n], 0)
    x = jnp.where(scaled.valid, point * scaled.column_scale, jnp.zeros_like(point))
    objective = jnp.where(status == LPStatus.OPTIMAL, cost @ x, jnp.inf).astype(x.dtype)
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


def solve(
    cost: ArrayLike,
    A: ArrayLike,
    b: ArrayLike,
    *,
    initial_basis: ArrayLike | None = None,
    max_iterations: int | None = None,
    max_refactorizations: int = 3,
    feasibility_tolerance: float | None = None,
) -> LPSolution:
    """Solve ``min cost @ x  s.t.  A x >= b, x >= 0`` (``cost >= 0``) exactly.

    Args:
        cost: ``(n,)`` non-negative costs.
        A: ``(m, n)`` constraint matrix (float32 or float64; sets the working dtype).
        b: ``(m,)`` right-hand side.
        initial_basis: ``(m,)`` a previous :attr:`LPSolution.basis` to start from.  Used
            only if it is strictly lexicographically dual feasible for this data (so the
            answer is unchanged); otherwise the surplus basis is used.
        max_iterations: pivot budget (default ``3 * (m + n)``).
        max_refactorizations: how often a basis that fails verification is re-factorised
            and pivoted on again.
        feasibility_tolerance: relative tolerance (default :func:`default_tolerance`).

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
    scaled = _scale(cost, matrix, rhs)

    start = surplus_basis(m, n)
    tableau = _tableau(scaled, start)
    verdict = _verdict(tableau, scaled, tolerance)
    if initial_basis is not None:
        initial_basis = jnp.asarray(initial_basis, jnp.int32)
        if initial_basis.shape != (m,):
            raise ValueError(f"initial_basis must have shape ({m},), got {initial_basis.shape}.")
        warm = _tableau(scaled, initial_basis)
        warm_verdict = _verdict(warm, scaled, tolerance)
        use_warm = warm_verdict.strictly_dual_feasible
        tableau, verdict = jax.tree.map(
            lambda a, c: jnp.where(use_warm, a, c), (warm, warm_verdict), (tableau, verdict)
        )

    class Carry(NamedTuple):
        tableau: _Tableau
        verdict: _Verdict
        num_iterations: Array
        rounds: Array

    def done(carry: Carry):
        v = carry.verdict
        return ~scaled.valid | ~v.finite | v.optimal | v.infeasible

    def cond(carry: Carry):
        return ~done(carry) & (carry.rounds <= max_refactorizations) & (
            carry.num_iterations < max_iterations
        )

    def body(carry: Carry) -> Carry:
        basis, num_iterations = _pivot_loop(
            carry.tableau, scaled, carry.num_iterations, max_iterations, tolerance
        )
        tableau = _tableau(scaled, basis)
        return Carry(tableau, _verdict(tableau, scaled, tolerance), num_iterations, carry.rounds + 1)

    carry = jax.lax.while_loop(
        cond, body, Carry(tableau, verdict, jnp.int32(0), jnp.int32(0))
    )
    v = carry.verdict
    status = jnp.select(
        [~scaled.valid, v.optimal, v.infeasible, carry.num_iterations >= max_iterations],
        [LPStatus.INVALID_INPUT, LPStatus.OPTIMAL, LPStatus.INFEASIBLE, LPStatus.MAX_ITERATIONS],
        LPStatus.NUMERICAL_ERROR,
    )
    return _solution(carry.tableau, scaled, cost, status, carry.num_iterations)


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
    verdict = _verdict(tableau, scaled, jnp.asarray(tolerance, matrix.dtype))
    ok = scaled.valid & verdict.optimal & verdict.strictly_dual_feasible
    status = jnp.where(ok, LPStatus.OPTIMAL, LPStatus.NUMERICAL_ERROR)
    return BasisCheck(ok, _solution(tableau, scaled, cost, status, jnp.int32(0)))

