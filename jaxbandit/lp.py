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
carries all these objectives at once (a lexicographic ratio test, which in exact
arithmetic also rules out cycling), so no second solve is needed.  Ties are decided
to rounding-error tolerances, so in degenerate cases the two precisions agree to
their tolerance, not bit for bit.

Exactness.  Pivots update a dense tableau (rank-one updates).  The basis they end on
is then re-factorised from the original data (Gauss-Jordan, one ``m x m``
elimination); the basic values and the duals get one step of iterative refinement
with an extra-precise (compensated) residual, so they are accurate even where a huge
component (a free arm) cancels against small ones; the returned values get two more
steps, which the small, costly components of such a point need in float32.  The
basis is accepted (status ``OPTIMAL``) only if it is *verified*: basic values and
reduced costs non-negative to ``feasibility_tolerance`` relative to their own
magnitudes, every row of ``A x >= b`` met to ``4 * feasibility_tolerance`` of its
activity, and ``eps * cond(B) <= 1e-2``.
A basis that fails takes the pivot its fresh tableau calls for (dual simplex while
primal infeasible, a primal clean-up step while dual infeasible) and is re-factorised
and re-verified, up to ``max_refactorizations`` rounds; a pivot that makes the basis
singular is undone and small pivots are then refused.  What still fails is reported
as ``NUMERICAL_ERROR`` or ``MAX_ITERATIONS``, never as a confident answer.  In float32
on a CPU that happened to none of 10^4 random lower-bound LPs at K = 10 and 20, to 5 of
10^4 at K = 50, and to about a third of badly scaled ones (sigma spanning 1e-3..1e3):
re-solve those lanes in float64.  On a GPU, float32 division is refined to the CPU's
accuracy (:func:`_divide`); with it an H100 certified all 10^4 at K = 10 too.

Warm starts.  :func:`check_basis` re-verifies a previous basis at new data (one
elimination, then the tests above; bit-equal to :func:`solve` when it passes).  When
only ``cost`` and ``b`` change and ``A`` stays fixed (the lower-bound LP at new
estimated means), :func:`factor_basis` keeps ``B^-1`` and :func:`quick_check` re-checks
with a few ``m x m`` products: same tests, with a margin for its own rounding, and the
same basis and values up to rounding when it passes.

Everything is pure, fixed-shape and jit/vmap-able.  Under ``vmap`` the loops run
until the slowest LP of the batch is done (at most ``max_iterations`` pivots).
"""

from __future__ import annotations

import functools
from typing import NamedTuple, Optional

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
    "BasisFactor",
    "factor_basis",
    "quick_check",
    "BasisSensitivity",
    "value_scales",
    "shifted_values",
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


class BasisSensitivity(NamedTuple):
    """What :func:`quick_check` learns about nearby LPs with the same ``A``.

    Attributes:
        values: ``(m,)`` the refined basic values ``x_B = B^-1 b`` (basis order).
        cost_radius: ``()`` the basis stays the canonical optimum for every cost
            ``c'`` with ``max_j |c'_j - c_j| < cost_radius`` and ``c'_j = 0`` wherever
            ``c_j = 0``, at any ``b`` where it stays primal feasible: every nonbasic
            reduced cost of the cost objective stays positive, except those that such
            a change cannot move (zero, with a positive reduced cost of ``sum(x)``).
            ``0`` when a nonbasic reduced cost that can move is within its rounding
            error of zero, or the check failed.
    """

    values: Array
    cost_radius: Array


class BasisCheck(NamedTuple):
    """Result of :func:`check_basis` and :func:`quick_check`.

    Attributes:
        ok: ``()`` bool, the basis is primal feasible and *strictly* lexicographically
            dual feasible, so its point is the unique canonical optimum.
        solution: the :class:`LPSolution` of that basis (status ``OPTIMAL`` iff ok,
            else ``NUMERICAL_ERROR``; ``num_iterations = 0``).
        sensitivity: a :class:`BasisSensitivity` (:func:`quick_check` only, else None).
    """

    ok: Array
    solution: LPSolution
    sensitivity: Optional[BasisSensitivity] = None


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


def _power_of_two(exponent, dtype):
    """``2**exponent`` built from its bit pattern, ``exponent`` clipped to the normal range.

    Exact on every backend; ``jnp.ldexp`` is not: it computes ``pow(2.0, exponent)``,
    which XLA's GPU compiler evaluates as a polynomial approximation of ``exp2``.
    """
    info = jnp.finfo(dtype)
    int_type = jnp.int32 if info.bits == 32 else jnp.int64
    biased = jnp.clip(exponent, info.minexp, info.maxexp - 1).astype(int_type) + (info.maxexp - 1)
    return jax.lax.bitcast_convert_type(biased << info.nmant, dtype)


def _power_of_two_reciprocal(x):
    """``2**-round(log2(x))`` for ``x > 0`` (1 elsewhere): scaling that adds no rounding.

    Read off and built from the exponent bits (``frexp``, :func:`_power_of_two`), not
    computed as ``exp2(-round(log2(x)))``: XLA evaluates ``exp2``, ``log2`` and ``pow``
    by fast approximations on the CPU and the GPU (``2**13`` came out as 8192.004), so
    those "powers of two" were not, and scaling rounded every entry.
    """
    safe = jnp.where(x > 0, x, jnp.ones_like(x))
    fraction, exponent = jnp.frexp(safe)  # safe = fraction * 2**exponent, fraction in [0.5, 1)
    nearest = jnp.where(fraction >= 0.5**0.5, exponent, exponent - 1)  # round(log2(safe))
    return jnp.where(x > 0, _power_of_two(-nearest, x.dtype), jnp.ones_like(x))


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


def _two_sum(a, b):
    """``a + b = s + e`` exactly (Knuth)."""
    s = a + b
    b_virtual = s - a
    return s, (a - (s - b_virtual)) + (b - b_virtual)


def _split(v):
    """``v = high + low`` with both halves short enough that their products are exact.

    ``high`` is ``v`` rounded (half away from zero) to ``digits // 2`` significant
    bits (12 in float32, 26 in float64), so ``|low| <= ulp(high) / 2`` has at most as
    many.  The rounding is done on the bit pattern: add half of the dropped part, clear
    it.  Not Veltkamp's ``c - (c - v)``, which a compiler may turn into a fused
    multiply-add; not ``lax.reduce_precision`` (the same rounding, ties to even),
    which XLA's GPU compiler (jax 0.10-0.11) fails to compile in some fusions ("Failed
    to translate module to LLVM IR", at K = 3 in ``solve``).
    """
    info = jnp.finfo(v.dtype)
    dropped = info.nmant - ((info.nmant + 1) // 2 - 1)  # 12 (float32) or 27 (float64)
    bits_type = jnp.uint32 if info.bits == 32 else jnp.uint64
    bits = jax.lax.bitcast_convert_type(v, bits_type)
    half, keep = bits_type(1 << (dropped - 1)), bits_type(~((1 << dropped) - 1) & ((1 << info.bits) - 1))
    high = jax.lax.bitcast_convert_type((bits + half) & keep, v.dtype)
    return high, v - high


def _dot(a, b):
    """Matrix product in full working precision: on GPUs the default lets float32
    products run in TF32 (10-bit mantissa), far too coarse for a simplex."""
    return jnp.matmul(a, b, precision=jax.lax.Precision.HIGHEST)


def _residual(matrix, x, rhs, *, transposed: bool = False):
    """``rhs - matrix @ x`` (``rhs - x @ matrix`` if ``transposed``) in about twice the
    working precision (after Ogita-Rump-Oishi).

    The basic solution of a covering LP often has one huge component (a free arm) next
    to small ones that are differences of large terms; a residual in working precision
    cannot refine those.  Both operands are split into half-length parts, so every
    partial product is exact.  The leading products ``high * high`` carry the
    cancellation: they are accumulated with error-free sums (Knuth's TwoSum, errors
    summed separately, i.e. Sum2).  The rest, ``high * x_low + low * x``, is smaller by
    half the significand and is summed plainly with the errors (its rounding, and a
    compiler contracting it into fused multiply-adds, as XLA on CPU does, change the
    result only at that smaller size).  It is all one loop over the columns of
    ``matrix`` (its rows if ``transposed``, so no transposed copy is made), unrolled:
    one fused elementwise pass, with no separate products (those took 40% of the time
    under ``vmap`` on CPU).

    Shapes: ``matrix`` ``(m, k)``, ``x`` ``(k,)``, ``rhs`` ``(m,)``; transposed: ``matrix``
    ``(k, m)``.  ``matrix`` may also be its :func:`_split` halves (a kept basis matrix is
    split once, not at every check).
    """
    matrix_high, matrix_low = matrix if isinstance(matrix, tuple) else _split(matrix)
    x_high, x_low = _split(x)
    column = (lambda a, j: a[j]) if transposed else (lambda a, j: a[:, j])
    total = rhs
    errors = jnp.zeros_like(rhs)
    for j in range(x.shape[0]):
        high, low = column(matrix_high, j), column(matrix_low, j)
        total, error = _two_sum(total, -high * x_high[j])
        errors = errors + error - (high * x_low[j] + low * x[j])
    return total + errors


def _rows_dot(rows, matrix):
    """``rows @ matrix`` for a few rows (``(r, m) @ (m, n)``), one vector-matrix product
    per row.  Under ``vmap`` XLA on CPU runs a batched ``(2, 5) @ (5, 5)`` 18x slower
    than two ``(5,) @ (5, 5)`` (520 vs 2 x 29 ns in float32), ``(2, 10) @ (10, 10)``
    about as fast."""
    return jnp.stack([_dot(rows[k], matrix) for k in range(rows.shape[0])])


def _row_residuals(matrix, ys, gs):
    """``gs[k] - ys[k] @ matrix`` for each of a few rows ``k`` (``ys`` ``(r, m)``, ``gs``
    ``(r, n)``), each as :func:`_residual`.  An unrolled loop over the ``r`` rows: with a
    trailing axis of 2 (or an inner ``vmap``) XLA on CPU lays the batch out badly, and
    the dual refinement of :func:`quick_check` ran 1.6x slower."""
    return jnp.stack([_residual(matrix, ys[k], gs[k], transposed=True) for k in range(ys.shape[0])])


def _refined_divide(numerator, denominator):
    """``numerator / denominator`` followed, in float32, by one Newton step on an exact
    residual: ``q + (numerator - q * denominator) / denominator``, with ``q *
    denominator`` taken as exact partial products of :func:`_split` halves (so neither
    rounding nor a compiler's fused multiply-adds spoil it).  A quotient within a few
    ulp comes back correctly rounded but for near-ties (measured: 2.45 ulp in, 0.50
    out, for quotients in 1e-18..1e18; below about 1e-30 the step itself is
    subnormal and helps less).  Where the step is not finite (a zero or infinite
    operand) ``q`` is kept."""
    quotient = numerator / denominator
    if quotient.dtype != jnp.float32:
        return quotient  # float64 division is correctly rounded on CPUs and GPUs
    (q_high, q_low), (d_high, d_low) = _split(quotient), _split(denominator)
    # numerator - q_high * d_high is exact (the two agree to ~12 bits: Sterbenz).
    residual = (numerator - q_high * d_high) - (q_high * d_low + q_low * d_high + q_low * d_low)
    step = residual / denominator
    return jnp.where(jnp.isfinite(step), quotient + step, quotient)


def _divide(numerator, denominator):
    """``numerator / denominator``, correctly rounded but for near-ties on every
    backend; every division of the solver goes through here.  XLA lowers float32
    division on NVIDIA GPUs to ``div.full.f32`` (up to 2 ulp): on an H100 that left
    0.73% of 10^4 well-scaled K = 10 float32 LPs uncertified, and none with
    :func:`_refined_divide` (as with IEEE division).  CPUs divide correctly rounded, so
    there the plain quotient is kept and results are unchanged (bit for bit)."""
    return jax.lax.platform_dependent(
        numerator, denominator, cpu=lambda x, y: x / y, default=_refined_divide
    )


def _leading_axis(combine, rows):
    """``combine``-reduce ``(m, ...)`` over its leading axis as an unrolled chain of
    elementwise ops.  Under ``vmap`` that axis is a middle one, and XLA on CPU hands a
    middle-axis reduction to a library kernel that took 60-120 us for a
    ``(2000, 5, 5)`` batch, several times one fused elementwise pass."""
    return functools.reduce(combine, [rows[k] for k in range(rows.shape[0])])


def _pivot_rows(rows, p, chosen, column):
    """``rows`` after a pivot on row ``p`` of ``column`` (``rows @ e_j`` for the
    entering ``j``): row ``p`` becomes ``rows[p] / column[p]`` and ``column`` the unit
    vector ``e_p``.  ``chosen`` is ``arange(len(rows)) == p``: a mask, not ``.at[p]``
    scatters, which under ``vmap`` were a kernel or two each (an elimination step took
    16 kernels with them, 9 without), for the same arithmetic (bit-equal results)."""
    factors = jnp.where(chosen, column - 1.0, column)
    return rows - factors[:, None] * _divide(rows[p], column[p])[None, :]


def _gauss_jordan(matrix, rhs):
    """Solve ``matrix @ X = rhs`` by Gauss-Jordan elimination with partial pivoting.

    Written out (``m`` rank-one updates) rather than calling LAPACK: batched small
    factorisations are slow on CPU under ``vmap``, and this runs the same on any device.
    The pivot row is marked by a mask (see :func:`_pivot_rows`): 9 kernels a step.

    Args:
        matrix: ``(m, m)``.
        rhs: ``(m, r)``.

    Returns:
        ``(m, r)``; non-finite where ``matrix`` is singular.
    """
    m = matrix.shape[0]
    augmented = jnp.concatenate([matrix, rhs], axis=1)
    rows = jnp.arange(m, dtype=jnp.int32)

    def eliminate(k, carry):
        augmented, used, pivot_rows = carry
        column = augmented[:, k]
        p = jnp.argmax(jnp.where(used, -1, jnp.abs(column))).astype(jnp.int32)
        chosen = rows == p
        augmented = _pivot_rows(augmented, p, chosen, column)
        return augmented, used | chosen, jnp.where(rows == k, p, pivot_rows)

    augmented, _, pivot_rows = jax.lax.fori_loop(
        0, m, eliminate, (augmented, jnp.zeros((m,), bool), jnp.zeros((m,), jnp.int32))
    )
    return augmented[pivot_rows, m:]


def _tableau(scaled: _Scaled, basis) -> _Tableau:
    """Build the tableau of ``basis`` from the original data: one ``m x m`` elimination.

    The basic values and both objectives' duals get iterative refinement with an
    extra-precise residual (two steps in float32, one in float64: as
    :func:`_check_refinements`), so they are accurate to about ``eps`` even when they
    cancel.  In float32 one step was not enough at ``eps cond(B)`` of a few 1e-3: a
    reduced cost that is 0 came out as -2.3e-4 against a noise level of 2.0e-4
    (K = 50), and the optimal basis was refused.
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
    # test decides.  (Preferring entries above tolerance * the row's largest, as this
    # code once did, picks columns whose ratio is not the minimum: the next basis is dual
    # infeasible, and the primal clean-up then pivots on that same small entry.  On
    # 9,760 test LPs it tripled the float32 NUMERICAL_ERROR count.)  Small pivots are
    # refused only once one has led to a singular basis (``careful``).
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
    """Classify the basis and pick the next pivot (dual simplex first, primal clean-up).

    Primal infeasible: dual simplex step on the most infeasible row (relative to its
    magnitude), entering column by the lexicographic ratio test.  Primal feasible but a
    reduced cost below minus its rounding-error level (cost first; at tied cost, the
    sum): primal simplex step on the most negative one (relative to that level), with
    a Harris ratio test.  ``careful`` refuses small dual pivots; ``precise`` refines the
    entering column first (used on freshly factorised tableaus).
    """
    rows, basis = tableau
    m = basis.shape[0]
    total = scaled.matrix.shape[1]
    n = total - m
    dtype = rows.dtype
    nonbasic = _nonbasic_mask(basis, total)
    values = rows[:m, -1]
    body = rows[:m, :total]
    magnitudes = _magnitudes(tableau, scaled)

    dual = _dual_step(tableau, scaled, magnitudes, nonbasic, tolerance, careful, classify_only)
    primal_feasible, leave_dual, enter_dual = dual.primal_feasible, dual.leave, dual.enter

    # -- dual feasibility and the primal clean-up step -------------------------------
    reduced = rows[m : m + 2, :total]
    noise = _reduced_cost_noise(
        reduced, scaled.objectives, scaled.objectives[:, basis], magnitudes, tolerance
    )
    cost_tied = jnp.abs(reduced[0]) <= noise[0]
    improving = nonbasic[None, :] & (reduced < -noise)
    improving_sum = improving[1] & cost_tied
    relative = _divide(reduced, jnp.maximum(noise, jnp.finfo(dtype).tiny))
    by_cost = jnp.any(improving[0])
    enter_primal = jnp.where(
        by_cost,
        jnp.argmin(jnp.where(improving[0], relative[0], jnp.inf)).astype(jnp.int32),
        jnp.argmin(jnp.where(improving_sum, relative[1], jnp.inf)).astype(jnp.int32),
    )
    # Primal ratio test on the entering column.  An entry blocks if it exceeds
    # tolerance times its own magnitude (|B^-1| |M_q|): entries of one column can differ
    # by many orders (a free arm's huge value next to small ones).
    column = body[:, enter_primal]
    matrix_column = scaled.matrix[:, enter_primal]
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
    leave_primal = jnp.argmax(jnp.where(near_minimum, column, -jnp.inf)).astype(jnp.int32)
    # Both objectives are >= 0 on x >= 0, so an unblocked improving column is noise.
    dual_feasible = ~(by_cost | jnp.any(improving_sum)) | ~jnp.any(blocking)
    strictly = jnp.all(
        ~nonbasic | (reduced[0] > noise[0]) | (cost_tied & (reduced[1] > noise[1]))
    )

    dual_step = ~primal_feasible
    return _Step(
        primal_feasible=primal_feasible,
        farkas=dual.farkas,
        dual_feasible=dual_feasible,
        strictly_dual_feasible=strictly,
        leave=jnp.where(dual_step, leave_dual, leave_primal),
        enter=jnp.where(dual_step, enter_dual, enter_primal),
        can_pivot=jnp.where(dual_step, dual.can_pivot, ~dual_feasible),
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
    full one, without its primal half (at m = 20, 50 instead of 81 small kernels per
    pivot, which a vmapped loop pays until its slowest lane is done).  The full loop
    then takes the primal clean-up steps, where :func:`_may_take_primal_step` says
    rounding may have left one (on none of the 24,000 LPs of the test sweeps).
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
# value is huge (an arm that costs nothing) the small, costly ones can keep a relative
# error of 1e-3 in float32 after one step (seen on a wide-sigma K = 15 instance).
_FINAL_REFINEMENTS = 2


def _check_refinements(dtype) -> int:
    """Refinement steps of :func:`quick_check`'s values (its hot path in simulations),
    and of a fresh tableau's values and duals (:func:`_tableau`).

    Step k leaves an error of about ``(eps cond(B))**(k + 1) |x|_inf`` on each value.
    float32: two steps (``solve`` returns four): on the wide-sigma instance above
    (``eps cond ~ 5e-6``) one step left 6e-4 of a small component, two leave ~1e-8 of
    it; a third would cost another ~15% of the check.  float64: one step, below
    ``1e-16 |x|_inf`` for any ``cond(B) <= 1e8``.
    """
    return 2 if jnp.dtype(dtype) == jnp.float32 else 1


def _refined_values(inverse, basis_matrix, values, rhs, steps: int):
    """``steps`` steps of iterative refinement of ``B^-1 rhs`` (extra-precise residuals)."""
    for _ in range(steps):
        values = values + _dot(inverse, _residual(basis_matrix, values, rhs))
    return values


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


@functools.partial(
    jax.jit, static_argnames=("max_iterations", "max_refactorizations", "feasibility_tolerance")
)
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
            and pivoted on again, one pivot per round (default 3 in float64, 2 in
            float32; under ``vmap`` every lane waits for the rounds any lane needs).
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
    if max_refactorizations is None:
        # float32: a second round certified the 2 of 10^4 random K = 20 LPs that one
        # round left uncertified (3 of 7 at K = 50; +10-16% time for a batch of 10^4 in
        # which some lane needs it, nothing where none does), and the K = 20 LP of the
        # bigger test sweep that a GPU's approximate division (emulated) sent astray.
        max_refactorizations = 3 if matrix.dtype == jnp.float64 else 2
    scaled = _scale(cost, matrix, rhs)

    class Carry(NamedTuple):
        tableau: _Tableau
        verdict: _Verdict
        num_iterations: Array
        rounds: Array
        careful: Array  # a small pivot made B singular: no more small pivots
        from_initial_basis: Array  # started from initial_basis: may restart cold

    # The cold start needs no elimination and no verdict: the surplus tableau is exact,
    # and the first round's pivot loop picks its first pivot itself.
    cold = Carry(
        _surplus_tableau(scaled),
        _undecided_verdict(),
        jnp.int32(0),
        jnp.int32(0),
        jnp.bool_(False),
        jnp.bool_(False),
    )
    initial = cold
    if initial_basis is not None:
        initial_basis = jnp.asarray(initial_basis, jnp.int32)
        if initial_basis.shape != (m,):
            raise ValueError(f"initial_basis must have shape ({m},), got {initial_basis.shape}.")
        warm = _tableau(scaled, initial_basis)
        warm_verdict = _verdict(warm, scaled, tolerance)
        use_warm = warm_verdict.strictly_dual_feasible
        initial = jax.tree.map(
            lambda a, c: jnp.where(use_warm, a, c),
            cold._replace(tableau=warm, verdict=warm_verdict, from_initial_basis=jnp.bool_(True)),
            cold,
        )

    def done(carry: Carry):
        v = carry.verdict
        return ~scaled.valid | v.optimal | v.infeasible | (carry.careful & ~v.step.can_pivot)

    def working(carry: Carry):
        return ~done(carry) & (carry.rounds <= max_refactorizations) & (
            carry.num_iterations < max_iterations
        )

    def restart(carry: Carry):
        # The solve from initial_basis stopped without a verdict: start over cold.
        v = carry.verdict
        return carry.from_initial_basis & ~working(carry) & scaled.valid & ~(v.optimal | v.infeasible)

    def restarting_body(carry: Carry) -> Carry:
        return jax.lax.cond(restart(carry), lambda _: cold, pivot_round, carry)

    def pivot_round(carry: Carry) -> Carry:
        # The pivot the verdict chose on the fresh tableau, then the pivot loop.
        step = carry.verdict.step
        tableau = jax.tree.map(
            lambda a, b: jnp.where(step.can_pivot, a, b),
            _pivot(carry.tableau, step.leave, step.enter),
            carry.tableau,
        )
        num_iterations = carry.num_iterations + step.can_pivot.astype(jnp.int32)
        # The first round pivots on until the updated tableau says it is done.  Later
        # rounds take only that one pivot, then re-factorise: the updated tableau went
        # astray once, so each further pivot is chosen on exact data.  (A loop in later
        # rounds made float32 batches of 10^4 3.5x slower at K = 10 and solved at most
        # one more LP of them.)
        loop_budget = jnp.where(carry.rounds == 0, max_iterations, num_iterations)
        basis, num_iterations = _pivot_loop(
            tableau, scaled, num_iterations, loop_budget, tolerance, carry.careful
        )
        tableau = _tableau(scaled, basis)
        # A singular basis (a pivot on rounding noise): back to the last good one.
        singular = ~jnp.all(jnp.isfinite(tableau.rows))
        tableau = jax.tree.map(lambda a, b: jnp.where(singular, a, b), carry.tableau, tableau)
        careful = carry.careful | singular
        return Carry(
            tableau,
            _verdict(tableau, scaled, tolerance, careful),
            num_iterations,
            carry.rounds + 1,
            careful,
            carry.from_initial_basis,
        )

    # The cold loop stays free of the restart logic: with it, cold float64 solves ran
    # 2x slower at K = 10.
    if initial_basis is None:
        carry = jax.lax.while_loop(working, pivot_round, initial)
    else:
        carry = jax.lax.while_loop(lambda c: working(c) | restart(c), restarting_body, initial)
    v = carry.verdict
    status = jnp.select(
        [~scaled.valid, v.optimal, v.infeasible, carry.num_iterations >= max_iterations],
        [LPStatus.INVALID_INPUT, LPStatus.OPTIMAL, LPStatus.INFEASIBLE, LPStatus.MAX_ITERATIONS],
        LPStatus.NUMERICAL_ERROR,
    )
    return _solution(carry.tableau, scaled, cost, status, carry.num_iterations)


@functools.partial(jax.jit, static_argnames=("feasibility_tolerance",))
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
    verdict = _verdict(tableau, scaled, jnp.asarray(tolerance, matrix.dtype), classify_only=True)
    ok = scaled.valid & verdict.optimal & verdict.strictly_dual_feasible
    status = jnp.where(ok, LPStatus.OPTIMAL, LPStatus.NUMERICAL_ERROR)
    return BasisCheck(ok, _solution(tableau, scaled, cost, status, jnp.int32(0)))



# -- factored warm start: the O(m^2) re-check ---------------------------------------


class BasisFactor(NamedTuple):
    """A basis with its inverse, for cheap re-checks while ``A`` stays fixed.

    A simplex basis matrix ``B = [A, -I][:, basis]`` depends on ``A`` and the index set
    only, not on ``cost`` or ``b``: when only those change between solves (the
    lower-bound LP at new estimated means), ``B^-1`` can be kept and every re-check is a
    few ``m x m`` products (:func:`quick_check`) instead of an elimination.

    What every check would otherwise recompute from ``B`` and ``B^-1`` is kept too, as
    it depends on the basis only.  ``B`` itself: rebuilt inside a check, XLA fuses its
    gather and select into every loop that reads it (the extra-precise residuals read
    each entry once per column), which made :func:`quick_check` 2-3x slower on CPU.
    ``B`` split into the halves of the extra-precise residuals, and ``|B^-1|`` without
    its rounding residues: under ``vmap`` each was an ``m x m`` pass per check, and
    together they took 60% of a float64 check at ``m = 20`` (19.8 -> 7.6 ms for 2000).
    So are the reduced costs of the tie-breaking objective ``sum(x)``: its costs do not
    change between checks, so neither do its duals (they were 5 of a check's 16
    products).  A factor is so four ``m x m`` arrays and a few vectors (``lp_explore``
    keeps one per run).

    Attributes:
        basis: ``(m,)`` int32 sorted basic-variable indices among ``(x, surplus)``.
        matrix_high, matrix_low: ``(m, m)`` ``B = matrix_high + matrix_low`` (exactly;
            non-finite entries of ``A`` read as 0), split as by ``_split``: the leading
            halves of the significands, and the rest.
        inverse: ``(m, m)`` ``B^-1`` (zeros if ``B`` is singular).
        condition: ``()`` Skeel's ``max_i (|B^-1| |B| 1)_i`` (``inf`` if singular).
        abs_inverse: ``(m, m)`` ``|B^-1|`` with the rounding residues zeroed: entries at
            most ``m eps`` times the largest of their column, taken as the structural
            zeros they are here (see ``_cost_radius``).
        tie_reduced: ``((n,), (m,))`` the reduced costs of ``sum(x)`` on the
            (structural, surplus) columns, refined as :func:`quick_check` computes the
            cost objective's.
        tie_size: ``((n,), (m,))`` their magnitudes, the scale of their rounding error.
    """

    basis: Array
    matrix_high: Array
    matrix_low: Array
    inverse: Array
    condition: Array
    abs_inverse: Array
    tie_reduced: tuple[Array, Array]
    tie_size: tuple[Array, Array]

    @property
    def matrix(self) -> Array:
        """``(m, m)`` ``B``."""
        return self.matrix_high + self.matrix_low


def _basis_matrix(matrix, basis):
    """``[A, -I][:, basis]`` without building ``[A, -I]``."""
    m, n = matrix.shape
    structural = matrix[:, jnp.clip(basis, 0, n - 1)]
    surplus = -(jnp.arange(m, dtype=jnp.int32)[:, None] == (basis - n)[None, :]).astype(matrix.dtype)
    return jnp.where((basis < n)[None, :], structural, surplus)


def factor_basis(A: ArrayLike, basis: ArrayLike) -> BasisFactor:
    """Invert the basis matrix of ``basis`` once (pure, jit/vmap-able).

    The matrix is equilibrated by powers of two (exact) before a Gauss-Jordan
    inversion, so badly scaled data (``sigma`` spanning decades) loses nothing to the
    scaling itself; what is left is measured by the stored condition number.

    Args:
        A: ``(m, n)`` constraint matrix.
        basis: ``(m,)`` int indices of basic variables among ``(x, surplus)``.

    Returns:
        A :class:`BasisFactor`.
    """
    matrix = jnp.asarray(A)
    if matrix.ndim != 2 or not jnp.issubdtype(matrix.dtype, jnp.floating):
        raise ValueError(f"A must be a floating-point (m, n) array, got {matrix.dtype} {matrix.shape}.")
    m, n = matrix.shape
    basis = jnp.sort(jnp.asarray(basis, jnp.int32))
    if basis.shape != (m,):
        raise ValueError(f"basis must have shape ({m},) to match A {matrix.shape}, got {basis.shape}.")
    finite_matrix = jnp.where(jnp.isfinite(matrix), matrix, 0)
    basis_matrix = _basis_matrix(finite_matrix, basis)
    row_scale = _power_of_two_reciprocal(jnp.max(jnp.abs(basis_matrix), axis=1))
    scaled = basis_matrix * row_scale[:, None]
    column_scale = _power_of_two_reciprocal(jnp.max(jnp.abs(scaled), axis=0))
    scaled = scaled * column_scale[None, :]
    inverse = _gauss_jordan(scaled, jnp.eye(m, dtype=matrix.dtype))
    inverse = column_scale[:, None] * inverse * row_scale[None, :]  # B^-1 = C S^-1 R
    condition = jnp.max(_dot(jnp.abs(inverse), jnp.sum(jnp.abs(basis_matrix), axis=1)))
    finite = jnp.all(jnp.isfinite(inverse)) & jnp.isfinite(condition)
    inverse = jnp.where(finite, inverse, jnp.zeros_like(inverse))
    condition = jnp.where(finite, condition, jnp.inf).astype(matrix.dtype)
    abs_inverse = jnp.abs(inverse)
    # Entries of B^-1 below the rounding error of their column (m eps of its largest)
    # are the structural zeros they stand for, computed with a residue (a covered
    # constraint's zero dual; seen at 1e-19 relative).  Were one real, a cost change
    # would move a reduced cost through it by a rounding-level amount only.  A true
    # reduction for the column maxima, not `_leading_axis`: XLA fused that chain into
    # the elementwise pass, which then recomputed every entry of B^-1 (scales and all)
    # m times per entry (32 lanes at m = 10, with the select that keeps the result:
    # 230-310 us before, 120-165 us after).
    residue = abs_inverse <= m * jnp.finfo(matrix.dtype).eps * jnp.max(abs_inverse, axis=0)[None, :]
    high, low = _split(basis_matrix)
    tie_reduced, tie_size = _reduced_costs(
        jnp.ones((n,), matrix.dtype),
        (basis < n).astype(matrix.dtype),
        inverse,
        abs_inverse,
        (high, low),
        finite_matrix,
        jnp.abs(finite_matrix),
    )
    return BasisFactor(
        basis, high, low, inverse, condition, jnp.where(residue, 0, abs_inverse), tie_reduced, tie_size
    )


def _reduced_costs(g, g_basic, inverse, abs_inverse, basis_matrix, matrix, abs_matrix):
    """Reduced costs ``d = g - y M`` of the objective ``g`` at a basis, ``M = [A, -I]``,
    with the duals ``y = g_B B^-1`` refined once (extra-precise residual), and their
    magnitudes, the scale of their rounding error.

    The magnitudes are those of :func:`check_basis`, ``|g_j| + |y| |M_j| + |g_B| |B^-1
    M_j|``, with the last term bounded by ``|g_B| |B^-1| |M_j|`` (no ``m x m x n``
    product): a larger noise level can only make a check refuse more, never accept what
    :func:`check_basis` refuses.  Per-column quantities stay (structural, surplus)
    pairs, never stacked or concatenated: under ``vmap`` on CPU each slice of a stack is
    a kernel of its own (a sixth of a check's kernels at ``m = 5`` were such copies).

    Shapes: ``g`` ``(n,)``, ``g_basic`` ``(m,)``, ``inverse`` and ``abs_inverse`` (the
    plain ``|B^-1|``) ``(m, m)``, ``basis_matrix`` the :func:`_split` halves of ``B``,
    ``matrix`` and ``abs_matrix`` ``(m, n)`` (finite).  Returns ``(d, size)``, each a
    ``((n,), (m,))`` pair (the surplus columns' ``d`` is ``y``).
    """
    y = _dot(g_basic, inverse)
    y = y + _dot(_residual(basis_matrix, y, g_basic, transposed=True), inverse)
    spread = _dot(jnp.abs(g_basic), abs_inverse) + jnp.abs(y)
    size = (jnp.abs(g) + _dot(spread, abs_matrix), spread)
    return (g - _dot(y, matrix), y), size


@functools.partial(jax.jit, static_argnames=("feasibility_tolerance",))
def quick_check(
    cost: ArrayLike,
    A: ArrayLike,
    b: ArrayLike,
    factor: BasisFactor,
    *,
    feasibility_tolerance: float | None = None,
) -> BasisCheck:
    """The warm-start check with a kept inverse: ``O(m^2)`` work, no elimination.

    ``factor`` must come from :func:`factor_basis` with this same ``A`` (only ``cost``
    and ``b`` may have changed).  The basic values get two steps of iterative
    refinement with an extra-precise residual in float32 (one in float64, see
    ``_check_refinements``) and both objectives' duals one (:func:`solve` two in float32),
    then the tests of :func:`check_basis` are applied *with a margin* for the rounding
    error of this computation (``8 sqrt(m) eps`` relative to each quantity's
    magnitude), and only if ``eps * cond(B) <= 1e-2``.  So ``ok`` is conservative: a
    basis that passes is one :func:`check_basis` accepts too (up to the rounding of
    those tests themselves), and its point is the canonical optimum :func:`solve`
    returns: the same basis, with values equal up to rounding (a few units in the last
    place, not bit for bit).  When ``ok`` is False call :func:`solve`.

    Args:
        cost, A, b: the LP, as in :func:`solve`.
        factor: a :class:`BasisFactor` of ``A``.
        feasibility_tolerance: relative tolerance (default :func:`default_tolerance`).

    Returns:
        A :class:`BasisCheck`.
    """
    cost, matrix, rhs = _check_inputs(cost, A, b)
    m, n = matrix.shape
    dtype = matrix.dtype
    eps = jnp.finfo(dtype).eps
    tolerance = (
        default_tolerance(dtype) if feasibility_tolerance is None else feasibility_tolerance
    )
    margin = 8 * (m**0.5) * eps  # rounding error of the products below, relative
    valid, cost, _, rhs = _validated(cost, matrix, rhs)
    # Not _validated's matrix, which depends on cost and b: under vmap with one shared A
    # it would be a (batch, m, n) array, built and read at every check.
    matrix = jnp.where(jnp.isfinite(matrix), matrix, 0)
    basis, inverse = factor.basis, factor.inverse
    basis_matrix = (factor.matrix_high, factor.matrix_low)
    shapes = [a.shape for a in (factor.matrix_high, factor.matrix_low, inverse, factor.abs_inverse)]
    tie_shapes = [a.shape for a in factor.tie_reduced + factor.tie_size]
    if (
        basis.shape != (m,)
        or any(shape != (m, m) for shape in shapes)
        or tie_shapes != [(n,), (m,)] * 2
    ):
        raise ValueError(
            f"factor must be a BasisFactor of an ({m}, {n}) A: got basis shape {basis.shape}, "
            f"matrix halves, inverse and abs_inverse shapes {shapes} and tie-break shapes "
            f"{tie_shapes}, expected ({m},), ({m}, {m}) and ({n},), ({m},)."
        )
    abs_inverse = jnp.abs(inverse)

    # Primal: x_B = B^-1 b, refined; feasible to the tolerance of check_basis.
    values = _dot(inverse, rhs)
    values = _refined_values(inverse, basis_matrix, values, rhs, _check_refinements(dtype))
    value_size = _dot(abs_inverse, jnp.abs(rhs))
    primal_feasible = jnp.all(values >= -(tolerance - margin) * value_size)

    # Reduced costs of the cost objective, refined; those of the tie-break sum(x) come
    # with the factor (they depend on the basis only).
    abs_matrix = jnp.abs(matrix)
    cost_basic = jnp.where(basis < n, cost[jnp.clip(basis, 0, n - 1)], 0)  # (m,)
    cost_reduced, cost_size = _reduced_costs(
        cost, cost_basic, inverse, abs_inverse, basis_matrix, matrix, abs_matrix
    )
    sum_reduced, sum_size = factor.tie_reduced, factor.tie_size
    noise = tuple(tolerance * size for size in cost_size)
    slack = tuple(margin * size for size in cost_size)
    # One-hot comparisons rather than scatters (a vmapped scatter is a slow loop on CPU).
    placed = basis[:, None] == jnp.arange(n, dtype=jnp.int32)[None, :]  # (m, n)
    nonbasic = (
        ~_leading_axis(jnp.logical_or, placed),
        ~_leading_axis(jnp.logical_or, basis[:, None] == n + jnp.arange(m, dtype=jnp.int32)[None, :]),
    )
    strictly = jnp.bool_(True)
    for part in range(2):
        tied = jnp.abs(cost_reduced[part]) <= noise[part] - slack[part]
        decided = (cost_reduced[part] > noise[part] + slack[part]) | (
            tied & (sum_reduced[part] > tolerance * sum_size[part] + margin * sum_size[part])
        )
        strictly = strictly & jnp.all(~nonbasic[part] | decided)

    # The returned (clipped) point meets every row to 4 * tolerance of its activity.
    x = jnp.maximum(_leading_axis(jnp.add, jnp.where(placed, values[:, None], 0)), 0)
    shortfall = rhs - _dot(matrix, x)
    activity = _dot(abs_matrix, x) + jnp.abs(rhs)
    satisfied = jnp.all(shortfall <= (4 * tolerance - margin) * activity)

    well_conditioned = eps * factor.condition <= _CONDITION_LIMIT
    finite = jnp.all(jnp.isfinite(values))
    for part in cost_reduced + sum_reduced:
        finite = finite & jnp.all(jnp.isfinite(part))
    ok = valid & finite & well_conditioned & primal_feasible & strictly & satisfied
    x = jnp.where(ok, x, jnp.zeros_like(x))
    status = jnp.where(ok, LPStatus.OPTIMAL, LPStatus.NUMERICAL_ERROR).astype(jnp.int32)
    objective = jnp.where(ok, _dot(cost, x), jnp.inf).astype(dtype)
    # Zero costs stay zero (the lower-bound LP: the best arm's gap), so only the basic
    # variables with a nonzero cost move the duals.
    moving = cost_basic != 0
    radius = _cost_radius(cost_reduced, noise, slack, nonbasic, cost != 0, moving, factor.abs_inverse, abs_matrix)
    sensitivity = BasisSensitivity(
        values=jnp.where(ok, values, jnp.zeros_like(values)),
        cost_radius=jnp.where(ok, radius, jnp.zeros_like(radius)),
    )
    solution = LPSolution(x, objective, status, jnp.int32(0), basis.astype(jnp.int32))
    return BasisCheck(ok, solution, sensitivity)


def _cost_radius(reduced, noise, slack, nonbasic, moving_cost, moving_basic, abs_inverse, abs_matrix):
    """How far (max norm) the nonzero structural costs may move with the check's verdict
    on every nonbasic column of the cost objective unchanged (``0`` if none holds).

    A cost change ``delta`` moves the duals by ``delta_B B^-1``, at most
    ``|delta|_inf v`` with ``v = |B^-1|^T 1[basic with a moving cost]``, so reduced cost
    ``j`` moves by at most ``|delta|_inf (1[j has a moving cost] + v |M_j|)`` (its
    gain).  Its room: for a strictly positive one, what it exceeds ``noise + slack`` by;
    for a tied one (within ``noise - slack`` of zero, decided by the ``sum(x)``
    objective, which does not move), what it may grow before it is no longer tied.
    Ties are common here: a constraint that the free best arm covers has a zero dual,
    and its surplus column a zero reduced cost and a zero gain once the rounding
    residues of ``B^-1`` are dropped.  Half the smallest ratio is returned: the bound
    uses the computed ``B^-1``, which is itself off by up to ``eps cond(B)`` (at most
    ``_CONDITION_LIMIT``), and ``noise`` moves a little with the costs.

    Shapes: ``reduced``, ``noise``, ``slack``, ``nonbasic`` pairs of ``(n,)`` (structural
    columns) and ``(m,)`` (surplus columns); ``moving_cost`` ``(n,)``; ``moving_basic``
    ``(m,)``; ``abs_inverse`` ``(m, m)`` (:attr:`BasisFactor.abs_inverse`, the residues
    dropped); ``abs_matrix`` ``(m, n)``.  Returns ``()``, ``inf`` when no reduced cost
    can move.
    """
    dtype = abs_matrix.dtype
    dual_gain = _dot(moving_basic.astype(dtype), abs_inverse)  # v, (m,)
    gains = (moving_cost.astype(dtype) + _dot(dual_gain, abs_matrix), dual_gain)
    smallest, roomy = jnp.asarray(jnp.inf, dtype), jnp.bool_(True)
    for d, d_noise, d_slack, free, gain in zip(reduced, noise, slack, nonbasic, gains):
        positive = d > d_noise + d_slack
        room = jnp.where(positive, d - (d_noise + d_slack), (d_noise - d_slack) - jnp.abs(d))
        constrained = free & (gain > 0)
        ratio = jnp.where(constrained, _divide(room, jnp.where(constrained, gain, 1)), jnp.inf)
        smallest = jnp.minimum(smallest, jnp.min(ratio))
        roomy = roomy & jnp.all(~constrained | (room > 0))
    radius = jnp.where(roomy, 0.5 * smallest, 0)
    return jnp.where(jnp.isnan(radius), 0, radius).astype(dtype)


def value_scales(factor: BasisFactor, rhs: ArrayLike) -> tuple[Array, Array]:
    """``(|B^-1| |b|, |B^-1| |B| |B^-1| |b|)``, both ``(m,)`` (three products).

    The first is the scale of :func:`quick_check`'s feasibility tolerance.  The second
    (the error size) bounds the error of ``B^-1 b`` computed with the stored inverse:
    the inverse a Gauss-Jordan elimination computes is off by about
    ``m eps |B^-1| |B| |B^-1|`` entrywise, so ``B^-1 b`` is off by about ``m eps`` times
    it, per component."""
    abs_inverse = jnp.abs(factor.inverse)
    value_size = _dot(abs_inverse, jnp.abs(rhs))
    error_size = _dot(abs_inverse, _dot(jnp.abs(factor.matrix), value_size))
    return value_size, error_size


def shifted_values(factor: BasisFactor, values: ArrayLike, errors: ArrayLike, rhs: ArrayLike, new_rhs: ArrayLike):
    """The basic values of ``factor``'s basis at a new right-hand side, with an error bound.

    ``x_B(b') = x_B(b) + B^-1 (b' - b)``: one ``m x m`` product, no refinement.  The
    bound covers the anchor's own error (a few units in the last place after
    :func:`quick_check`'s refinement), the error of the computed ``B^-1`` (see
    :func:`value_scales`, with a factor 4 for element growth) and the product's
    rounding, per component; it needs ``b > 0`` wherever ``b'`` differs from ``b``.

    Args:
        factor: the :class:`BasisFactor` the check used.
        values: ``(m,)`` the basic values at ``rhs`` (:attr:`BasisSensitivity.values`).
        errors: ``(m,)`` the error size of :func:`value_scales` at ``rhs``.
        rhs: ``(m,)`` the right-hand side of that check.
        new_rhs: ``(m,)`` the new right-hand side.

    Returns:
        ``(values, error, relative_step)``: ``(m,)`` values and errors with
        ``|values - B^-1 new_rhs| <= error`` (``inf`` where the bound does not apply),
        and ``()`` ``max_k |new_rhs_k - rhs_k| / rhs_k`` (``inf`` if some ``rhs_k = 0``
        moved).
    """
    rhs, new_rhs = jnp.asarray(rhs), jnp.asarray(new_rhs)
    m = rhs.shape[0]
    eps = jnp.finfo(rhs.dtype).eps
    step = new_rhs - rhs
    # |B^-1| |B| |B^-1| |step| <= error_size * max_k |step_k| / b_k (no more products).
    outside = jnp.where(step == 0, 0, jnp.inf)
    relative_step = jnp.max(jnp.where(rhs > 0, _divide(jnp.abs(step), jnp.where(rhs > 0, rhs, 1)), outside))
    anchor = jnp.asarray(values)
    values = anchor + _dot(factor.inverse, step)
    error = 4 * eps * jnp.abs(anchor) + eps * jnp.abs(values)
    error = error + 4 * m * eps * jnp.asarray(errors) * relative_step
    return values, jnp.where(jnp.isfinite(error), error, jnp.inf), relative_step
