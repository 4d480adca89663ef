"""The simplex tableau: the LP's data prepared, the tableau of a basis, and its updates.

The data is checked (:func:`check_inputs`, :func:`validated`) and equilibrated by
powers of two (:func:`scale`, exact in floating point).  The tableau of a basis is
built from that data by elimination over its structural columns and extra-precise
refinement (:func:`factorised_tableau`), from a kept inverse (:func:`factor_tableau`),
or exactly for the surplus basis (:func:`surplus_tableau`); a pivot updates it by a
rank-one step (:func:`pivot`).  :func:`magnitudes_of` and :func:`reduced_cost_noise`
give the rounding-error levels that every feasibility test of the pivoting reads.
Those called from many places are jitted, as in :mod:`jaxbandit.lp.numerics`.
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp

from jaxbandit._types import Array
from jaxbandit.lp.numerics import (
    basis_gauss_jordan,
    dot,
    pivot_rows,
    power_of_two_reciprocal,
    refined_values,
    row_residuals,
    rows_dot,
)
from jaxbandit.lp.types import BasisFactor, check_refinements

__all__ = [
    "Magnitudes",
    "Scaled",
    "Tableau",
    "basic_point",
    "check_inputs",
    "factor_tableau",
    "factorised_tableau",
    "magnitudes_of",
    "nonbasic_mask",
    "pivot",
    "reduced_cost_noise",
    "row_scales",
    "scale",
    "surplus_basis",
    "surplus_tableau",
    "validated",
]


def surplus_basis(num_constraints: int, num_variables: int) -> Array:
    """The all-surplus basis (``x = 0``): a valid ``initial_basis`` for any LP."""
    return jnp.arange(num_variables, num_variables + num_constraints, dtype=jnp.int32)


def check_inputs(cost, matrix, rhs):
    """``(cost, matrix, rhs)`` as arrays of ``A``'s floating dtype; raises
    ``ValueError``/``TypeError`` on shapes ``(n,)``, ``(m, n)``, ``(m,)`` that do not match."""
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


class Scaled(NamedTuple):
    """The LP after power-of-two row and column scaling (exact in floating point)."""

    matrix: Array  # [A', -I], N = n + m
    rhs: Array  # b'
    objectives: Array  # level 0: cost', level 1: column scales (sum x)
    column_scale: Array  # x = column_scale * x'
    row_scale: Array  # b' = row_scale * b
    valid: Array


class Tableau(NamedTuple):
    """Dense simplex tableau: ``m`` constraint rows then the two objective rows.

    Row ``i < m`` reads ``z[basis[i]] + sum_j rows[i, j] z[j] = rows[i, N]`` over the
    nonbasic ``j``; the slack block ``rows[:m, n:N]`` equals ``-B^{-1}``.  Rows ``m``
    and ``m + 1`` hold the reduced costs of the two objectives (last column: minus the
    objective value).
    """

    rows: Array
    basis: Array


def validated(cost, matrix, rhs):
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


def scale(cost, matrix, rhs) -> Scaled:
    """Validate (:func:`validated`) and equilibrate the LP by powers of two."""
    m, n = matrix.shape
    dtype = matrix.dtype
    valid, cost, matrix, rhs = validated(cost, matrix, rhs)
    # Rows: |b'_i| ~ 1 so that "row i is violated" means the same for every row (rows
    # with b_i = 0 use their largest entry).  Columns: max_i |A'_ij| ~ 1.
    row_size = jnp.where(rhs != 0, jnp.abs(rhs), jnp.max(jnp.abs(matrix), axis=1))
    row_scale = power_of_two_reciprocal(row_size)
    matrix = matrix * row_scale[:, None]
    column_scale = power_of_two_reciprocal(jnp.max(jnp.abs(matrix), axis=0))
    matrix = matrix * column_scale[None, :]
    scaled_cost = cost * column_scale
    cost_scale = power_of_two_reciprocal(jnp.max(scaled_cost))
    sum_scale = power_of_two_reciprocal(jnp.max(column_scale))
    zeros = jnp.zeros((m,), dtype)
    objectives = jnp.stack(
        [
            jnp.concatenate([scaled_cost * cost_scale, zeros]),
            jnp.concatenate([column_scale * sum_scale, zeros]),
        ]
    )
    full = jnp.concatenate([matrix, -jnp.eye(m, dtype=dtype)], axis=1)
    return Scaled(full, rhs * row_scale, objectives, column_scale, row_scale, valid)


@jax.jit
def factorised_tableau(scaled: Scaled, basis) -> Tableau:
    """Build the tableau of ``basis`` from the original data: one elimination per
    structural basic column (:func:`~jaxbandit.lp.numerics.basis_gauss_jordan`).

    The basic values and both objectives' duals get iterative refinement with an
    extra-precise residual (two steps in float32, one in float64: as
    :func:`~jaxbandit.lp.types.check_refinements`), so they are accurate to about
    ``eps`` even when they cancel.  In float32 one step is not enough once ``eps
    cond(B)`` reaches a few 1e-3: a zero reduced cost can then come out below minus its
    noise level, and the optimal basis would be refused.
    """
    basis = jnp.sort(basis)  # a canonical order makes warm and cold results bit-equal
    matrix = scaled.matrix
    m = basis.shape[0]
    n = matrix.shape[1] - m
    basis_matrix = matrix[:, basis]
    solved = basis_gauss_jordan(jnp.concatenate([matrix, scaled.rhs[:, None]], axis=1), basis, basis, n)
    body, values = solved[:, :-1], solved[:, -1]
    inverse = -body[:, n:]  # the surplus columns of M are -I
    values = refined_values(inverse, basis_matrix, values, scaled.rhs, check_refinements(matrix.dtype))
    # Duals y = g_B B^-1 of both objectives, refined the same way; the reduced costs
    # g - y M then follow with an extra-precise product too.
    weights = scaled.objectives[:, basis]  # (2, m)
    duals = rows_dot(weights, inverse)
    for _ in range(check_refinements(matrix.dtype)):
        duals = duals + rows_dot(row_residuals(basis_matrix, duals, weights), inverse)
    reduced = row_residuals(matrix, duals, scaled.objectives)
    objective_values = jnp.sum(weights * values[None, :], axis=1)
    body = jnp.concatenate([body, values[:, None]], axis=1)
    reduced = jnp.concatenate([reduced, -objective_values[:, None]], axis=1)
    return Tableau(jnp.concatenate([body, reduced], axis=0), basis)


def factor_tableau(scaled: Scaled, factor: BasisFactor) -> Tableau:
    """The tableau of ``factor.basis`` from the factor's inverse: products, no
    elimination and no refinement (a start for pivots, not a verdict).

    With row scales ``R`` and column scales ``C``, the scaled basis matrix is
    ``B' = R B D`` (``D``: the column scale of each structural basic column, ``1 / r_i``
    for a basic surplus ``i``), so ``B'^-1 = D^-1 B^-1 R^-1``: powers of two, exact.
    """
    matrix = scaled.matrix
    basis = factor.basis
    m = basis.shape[0]
    n = matrix.shape[1] - m
    structural = basis < n
    basic_scale = jnp.where(
        structural,
        scaled.column_scale[jnp.clip(basis, 0, n - 1)],
        1 / scaled.row_scale[jnp.clip(basis - n, 0, m - 1)],
    )
    inverse = factor.inverse / basic_scale[:, None] / scaled.row_scale[None, :]
    values = dot(inverse, scaled.rhs)
    weights = scaled.objectives[:, basis]  # (2, m)
    reduced = scaled.objectives - dot(dot(weights, inverse), matrix)
    body = jnp.concatenate([dot(inverse, matrix), values[:, None]], axis=1)
    reduced = jnp.concatenate([reduced, -dot(weights, values)[:, None]], axis=1)
    return Tableau(jnp.concatenate([body, reduced], axis=0), basis)


def surplus_tableau(scaled: Scaled) -> Tableau:
    """The tableau of the all-surplus basis, exactly: ``B = -I``, so the body is ``-M``,
    the basic values are ``-b'``, the duals are 0 and the reduced costs are the
    objectives themselves (what :func:`factorised_tableau` computes for it, without an
    elimination)."""
    m = scaled.rhs.shape[0]
    n = scaled.matrix.shape[1] - m
    body = jnp.concatenate([-scaled.matrix, -scaled.rhs[:, None]], axis=1)
    reduced = jnp.concatenate([scaled.objectives, jnp.zeros((2, 1), scaled.matrix.dtype)], axis=1)
    return Tableau(jnp.concatenate([body, reduced], axis=0), surplus_basis(m, n))


@jax.jit
def pivot(tableau: Tableau, leave, enter) -> Tableau:
    """Rank-one tableau update; the pivot row becomes ``row / pivot``."""
    rows, basis = tableau
    leaving = jnp.arange(rows.shape[0], dtype=jnp.int32) == leave
    rows = pivot_rows(rows, leave, leaving, rows[:, enter])
    basis = jnp.where(leaving[: basis.shape[0]], enter.astype(jnp.int32), basis)
    return Tableau(rows, basis)


def basic_point(tableau: Tableau, num_variables: int):
    """``(num_variables + m,)`` the basic point: the basic values at ``basis``, 0 elsewhere."""
    m = tableau.basis.shape[0]
    values = jnp.zeros((num_variables + m,), tableau.rows.dtype)
    return values.at[tableau.basis].set(tableau.rows[:m, -1])


def nonbasic_mask(basis, size):
    """``(size,)`` bool: column ``j`` is not in ``basis``."""
    return jnp.all(jnp.arange(size, dtype=jnp.int32)[:, None] != basis[None, :], axis=1)


class Magnitudes(NamedTuple):
    """Absolute values that bound the rounding error of tableau quantities."""

    inverse: Array  # (m, m) |B^-1|, read off the tableau (its surplus block is -B^-1)
    basis_matrix: Array  # (m, m) |B|
    body: Array  # (m, N) |B^-1 M|
    matrix: Array  # (m, N) |M|


def magnitudes_of(tableau: Tableau, scaled: Scaled) -> Magnitudes:
    """The :class:`Magnitudes` of ``tableau``'s basis."""
    rows, basis = tableau
    m = basis.shape[0]
    total = scaled.matrix.shape[1]
    n = total - m
    matrix = jnp.abs(scaled.matrix)
    return Magnitudes(
        inverse=jnp.abs(rows[:m, n:total]),
        basis_matrix=matrix[:, basis],
        body=jnp.abs(rows[:m, :total]),
        matrix=matrix,
    )


@jax.jit
def reduced_cost_noise(reduced, costs, weights, magnitudes: Magnitudes, tolerance):
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
        + rows_dot(duals, magnitudes.matrix)
        + rows_dot(jnp.abs(weights), magnitudes.body)
    )
    return tolerance * magnitude


def row_scales(rows, scaled: Scaled, m, n):
    """Magnitude of each basic value ``(B^-1 b')_i``: ``(|B^-1| |b'|)_i``."""
    return dot(jnp.abs(rows[:m, n : n + m]), jnp.abs(scaled.rhs))
