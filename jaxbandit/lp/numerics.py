"""Extra-precise arithmetic and small dense linear algebra for the simplex.

Error-free transformations (:func:`_two_sum`, :func:`split`) give residuals in about
twice the working precision (:func:`residual`), which iterative refinement
(:func:`refined_values`) turns into basic values accurate to about ``eps`` even when
they cancel.  On a CPU a float32 residual is summed in float64 instead
(:func:`_wide_residual`): one product kernel rather than a loop of error-free steps,
and more accurate.  Elsewhere float64 is slow (most GPUs) or absent (TPUs), so there,
and for float64 data, the error-free transformations serve.  Every division goes
through :func:`divide`, and every power of two is built from its bits, so CPU and GPU
differ only in the form of a float32 residual.  Loops over small axes (up
to ``UNROLL_LIMIT``) are unrolled on purpose: under ``vmap`` XLA on CPU runs small
batched products and middle-axis reductions as library kernels much slower than one
fused elementwise pass.  Longer ones are ``fori_loop`` s over the same steps, so that
the program does not grow with the axis.

The functions the solver calls from many places are jitted: a program traces each once
per shape and dtype rather than once per call.  XLA inlines the calls before it
optimises the program, so they compute what the code written out in place would.
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp

__all__ = [
    "UNROLL_LIMIT",
    "basis_gauss_jordan",
    "basis_residual",
    "divide",
    "dot",
    "leading_axis",
    "pivot_rows",
    "power_of_two_reciprocal",
    "refined_values",
    "residual",
    "residual_rounding",
    "row_residuals",
    "rows_dot",
    "split",
    "transposed_residual",
]


# Longest loop over an axis of the LP written out.  Under vmap on a CPU a written-out
# loop is one fused pass and a lax loop one kernel per step, but every step written out
# is program text that XLA compiles (compile time grows with K), so beyond this a loop.
# Not a loop of a few steps written out per iteration: XLA then fuses them differently
# and a residual can change in its last bit.
UNROLL_LIMIT = 16


def _power_of_two(exponent, dtype):
    """``2**exponent`` built from its bit pattern, ``exponent`` clipped to the normal range.

    Exact on every backend; ``jnp.ldexp`` is not: it computes ``pow(2.0, exponent)``,
    which XLA's GPU compiler evaluates as a polynomial approximation of ``exp2``.
    """
    info = jnp.finfo(dtype)
    int_type = jnp.int32 if info.bits == 32 else jnp.int64
    biased = jnp.clip(exponent, info.minexp, info.maxexp - 1).astype(int_type) + (info.maxexp - 1)
    return jax.lax.bitcast_convert_type(biased << info.nmant, dtype)


def power_of_two_reciprocal(x):
    """``2**-round(log2(x))`` for ``x > 0`` (1 elsewhere): scaling that adds no rounding.

    Read off and built from the exponent bits (``frexp``, :func:`_power_of_two`), not
    computed as ``exp2(-round(log2(x)))``: XLA evaluates ``exp2``, ``log2`` and ``pow``
    by fast approximations on CPU and GPU, so that would not give exact powers of two
    and scaling would round every entry.
    """
    safe = jnp.where(x > 0, x, jnp.ones_like(x))
    fraction, exponent = jnp.frexp(safe)  # safe = fraction * 2**exponent, fraction in [0.5, 1)
    nearest = jnp.where(fraction >= 0.5**0.5, exponent, exponent - 1)  # round(log2(safe))
    return jnp.where(x > 0, _power_of_two(-nearest, x.dtype), jnp.ones_like(x))


def _two_sum(a, b):
    """``a + b = s + e`` exactly (Knuth)."""
    s = a + b
    b_virtual = s - a
    return s, (a - (s - b_virtual)) + (b - b_virtual)


@jax.jit
def split(v):
    """``v = high + low`` with both halves short enough that their products are exact.

    ``high`` is ``v`` rounded (half away from zero) to ``digits // 2`` significant
    bits (12 in float32, 26 in float64), so ``|low| <= ulp(high) / 2`` has at most as
    many.  The rounding is done on the bit pattern: add half of the dropped part, clear
    it.  Not Veltkamp's ``c - (c - v)``, which a compiler may turn into a fused
    multiply-add; not ``lax.reduce_precision`` (the same rounding, ties to even),
    which XLA's GPU compiler fails to compile in some fusions.
    """
    info = jnp.finfo(v.dtype)
    dropped = info.nmant - ((info.nmant + 1) // 2 - 1)  # 12 (float32) or 27 (float64)
    bits_type = jnp.uint32 if info.bits == 32 else jnp.uint64
    bits = jax.lax.bitcast_convert_type(v, bits_type)
    half, keep = bits_type(1 << (dropped - 1)), bits_type(~((1 << dropped) - 1) & ((1 << info.bits) - 1))
    high = jax.lax.bitcast_convert_type((bits + half) & keep, v.dtype)
    return high, v - high


def dot(a, b):
    """Matrix product in full working precision: on GPUs the default lets float32
    products run in TF32 (10-bit mantissa), far too coarse for a simplex."""
    return jnp.matmul(a, b, precision=jax.lax.Precision.HIGHEST)


def _halves(matrix):
    """The :func:`split` halves of ``matrix``, or ``matrix`` itself if it is a pair of them."""
    if isinstance(matrix, tuple):
        return tuple(jnp.asarray(a) for a in matrix)
    return split(jnp.asarray(matrix))


def _accumulated(high, low, x_high, x_low, x, carry):
    """One column's step of :func:`_residual_by`: ``carry`` ``(total, errors)`` less the
    column (halves ``high``, ``low``) times ``x`` (halves ``x_high``, ``x_low``)."""
    total, errors = carry
    total, error = _two_sum(total, -high * x_high)
    return total, errors + error - (high * x_low + low * x)


def _two_sum_residual(column, matrix, x, rhs):
    """``rhs - sum_j column(matrix, j) * x[j]`` in about twice the working precision
    (after Ogita-Rump-Oishi): :func:`residual` and :func:`transposed_residual` in
    float64 and off a CPU, which differ only in how a column is read (``column(a, j)``,
    ``a[:, j]`` or ``a[j]``).

    The basic solution of a covering LP often has one huge component (a free arm) next
    to small ones that are differences of large terms; a residual in working precision
    cannot refine those.  Both operands are split into half-length parts, so every
    partial product is exact.  The leading products ``high * high`` carry the
    cancellation: they are accumulated with error-free sums (Knuth's TwoSum, errors
    summed separately, i.e. Sum2).  The rest, ``high * x_low + low * x``, is smaller by
    half the significand and is summed plainly with the errors (its rounding, and a
    compiler contracting it into fused multiply-adds, change the result only at that
    smaller size).  Up to ``UNROLL_LIMIT`` columns the loop is unrolled into one fused
    elementwise pass, with no separate product kernels; beyond, it is a ``fori_loop``
    over the same steps in the same order (the same result, bit for bit).

    ``matrix`` may also be its :func:`split` halves (a kept basis matrix is split once,
    not at every check).
    """
    matrix_high, matrix_low = _halves(matrix)
    x, rhs = jnp.asarray(x), jnp.asarray(rhs)
    x_high, x_low = split(x)

    def accumulate(j, carry):
        return _accumulated(column(matrix_high, j), column(matrix_low, j), x_high[j], x_low[j], x[j], carry)

    carry = (rhs, jnp.zeros_like(rhs))
    if x.shape[0] <= UNROLL_LIMIT:
        for j in range(x.shape[0]):
            carry = accumulate(j, carry)
    else:
        carry = jax.lax.fori_loop(0, x.shape[0], accumulate, carry)
    total, errors = carry
    return total + errors


def _wide_residual(contracted, matrix, x, rhs):
    """``rhs - M x`` of float32 data in float64, rounded to float32 once: every product
    of two float32 numbers is exact in float64, the product ``M x`` rounds by at most
    ``gamma_m |M||x|`` and the subtraction by ``2^-53`` of its result, in float64's
    unit (:func:`residual_rounding` bounds both).  ``contracted``: the axis of
    ``matrix`` that ``x`` multiplies (1 for ``M x``, 0 for ``x M``).  Built from ``lax``
    primitives, whose dtypes are the ones given (a ``jax.numpy`` product traced inside
    ``jax.eval_shape`` came out float32 here).
    """
    with jax.enable_x64(True):
        wide = lambda a: jax.lax.convert_element_type(a, jnp.float64)
        # split's halves add up to their float32 exactly
        full = jax.lax.add(*(wide(half) for half in matrix)) if isinstance(matrix, tuple) else wide(matrix)
        dimensions = (((contracted,), (0,)), ((), ()))
        product = jax.lax.dot_general(full, wide(x), dimensions, precision=jax.lax.Precision.HIGHEST)
        return jax.lax.convert_element_type(jax.lax.sub(wide(rhs), product), jnp.float32)


def _platform_form(cpu, default, matrix, x, rhs):
    """``cpu(matrix, x, rhs)`` for float32 data in a program for a CPU, else
    ``default(matrix, x, rhs)``: the one place a residual's form is chosen
    (``tests/test_lower_bound.py`` traces a GPU's form through it on a CPU)."""
    if x.dtype != jnp.float32:
        return default(matrix, x, rhs)
    return jax.lax.platform_dependent(matrix, x, rhs, cpu=cpu, default=default)


def _residual_by(column, contracted, matrix, x, rhs):
    """:func:`_wide_residual` for float32 data on a CPU, else :func:`_two_sum_residual`."""
    wide, two_sum = functools.partial(_wide_residual, contracted), functools.partial(_two_sum_residual, column)
    return _platform_form(wide, two_sum, matrix, jnp.asarray(x), jnp.asarray(rhs))


@jax.jit
def residual(matrix, x, rhs):
    """``rhs - matrix @ x`` in about twice the working precision (:func:`_residual_by`).

    Shapes: ``matrix`` ``(m, k)`` (or its :func:`split` halves), ``x`` ``(k,)``, ``rhs``
    ``(m,)``.  Returns ``(m,)``.
    """
    return _residual_by(lambda a, j: a[:, j], 1, matrix, x, rhs)


def residual_rounding(m: int, dtype):
    """``rho``: ``|computed - exact| <= u |computed| + rho |M| |x|`` for the extra-precise
    residual ``rhs - M x`` of ``m`` terms (:func:`residual`, :func:`transposed_residual`,
    :func:`basis_residual`), ``u = eps / 2``, ``gamma_k = k u / (1 - k u)``.

    Only the leading products are summed error-free.  The cross terms ``high * x_low +
    low * x`` of a column, at most ``2 eta |M_j| |x_j|`` (``eta = 2^-h``, ``h`` the bits a
    :func:`split` keeps in its high half: a low half is at most ``eta`` of its value),
    are summed plainly with the error-free sums' errors, and ``low * x`` and the cross
    sum are rounded: ``(gamma_{2m} + 2u) 2.02 eta``.  Those errors are ``u`` of each
    partial sum, at most ``gamma_m (|rhs| + |M||x|)`` together, and ``|rhs| <= |M||x| +
    |r|``: ``2.02 gamma_{2m} gamma_m``.  The 1.01 covers the second-order rest.  So
    ``rho`` is of the order of ``4 m u eta`` (about ``m 2^-34`` in float32), far above the
    ``m^2 u^2`` of a Dot2 whose every product is split.

    On a CPU a float32 residual is computed in float64 (:func:`_wide_residual`): beyond
    its final rounding, ``u |computed|``, it errs by at most ``gamma_m |M||x|`` in
    float64's unit (some ``2^-18`` of this ``rho |M||x|``) and ``2^-53`` of its float64
    result.  That last term, like the error-free form's second-order rest (of order
    ``gamma_m^2 |r|``), lies outside ``u |computed| + rho |M||x|`` where the final
    rounding is a tie; both are far below the further ``u |computed|`` that the bounds
    built on a residual add (``(1 + 2u) |r|``: :func:`~jaxbandit.lp.warm_start.value_error`,
    the factor's shift bounds).
    """
    info = jnp.finfo(dtype)
    unit = info.eps / 2
    eta = 2.0 ** -((info.nmant + 1) // 2)  # split keeps 12 bits (float32), 26 (float64)
    gamma = lambda k: k * unit / (1 - k * unit)
    return 1.01 * ((gamma(2 * m) + 2 * unit) * 2.02 * eta + 2.02 * gamma(2 * m) * gamma(m))


@jax.jit
def transposed_residual(matrix, x, rhs):
    """``rhs - x @ matrix`` in about twice the working precision (:func:`_residual_by`),
    reading the rows of ``matrix``, so no transposed copy is made.

    Shapes: ``matrix`` ``(k, m)`` (or its :func:`split` halves), ``x`` ``(k,)``, ``rhs``
    ``(m,)``.  Returns ``(m,)``.
    """
    return _residual_by(lambda a, j: a[j], 0, matrix, x, rhs)


def _structural_first(structural):
    """``(order, count)``: the positions of a basis, its structural ones (``structural``
    ``(m,)`` bool) first, each group in basis order; and how many are structural."""
    order = jnp.argsort(~structural, stable=True).astype(jnp.int32)
    return order, jnp.sum(structural, dtype=jnp.int32)


def basis_residual(matrix, x, rhs, basis, num_variables: int):
    """:func:`residual` ``rhs - B x`` for a simplex basis matrix ``B = [A, -I][:, basis]``
    (or its :func:`split` halves), its loop over the structural columns only.

    A surplus column (a multiple of ``e_r``) adds to its row ``r`` alone and exact
    zeros elsewhere, so after the loop one elementwise step takes every row's own
    surplus term.  For a sorted ``basis`` (structural columns first) these are the
    steps of :func:`residual` in its order: the same result, bit for bit (but for the
    sign of a zero, and where ``x`` is not finite).  Up to ``UNROLL_LIMIT`` columns, and
    for float32 data on a CPU (one product: :func:`_wide_residual`), it is
    :func:`residual` itself.

    Shapes: ``matrix`` ``(m, m)``, ``x`` and ``rhs`` ``(m,)``, ``basis`` ``(m,)`` int.
    Returns ``(m,)``.
    """
    x, rhs = jnp.asarray(x), jnp.asarray(rhs)
    if x.shape[0] <= UNROLL_LIMIT:
        return residual(matrix, x, rhs)
    loop = functools.partial(_basis_two_sum_residual, basis=basis, num_variables=num_variables)
    return _platform_form(residual, loop, matrix, x, rhs)


def _basis_two_sum_residual(matrix, x, rhs, basis, num_variables: int):
    """:func:`basis_residual`'s loop over the structural columns, of error-free steps."""
    m = x.shape[0]
    matrix_high, matrix_low = _halves(matrix)
    x_high, x_low = split(x)
    order, count = _structural_first(basis < num_variables)

    def accumulate(k, carry):
        j = order[k]
        return _accumulated(matrix_high[:, j], matrix_low[:, j], x_high[j], x_low[j], x[j], carry)

    carry = jax.lax.fori_loop(0, count, accumulate, (rhs, jnp.zeros_like(rhs)))
    owner = basis[None, :] == num_variables + jnp.arange(m, dtype=basis.dtype)[:, None]  # row r, position j
    covered = jnp.any(owner, axis=1)
    own = jnp.argmax(owner, axis=1)  # the position of row r's surplus column
    entry = lambda half: jnp.take_along_axis(half, own[:, None], axis=1)[:, 0]
    stepped = _accumulated(entry(matrix_high), entry(matrix_low), x_high[own], x_low[own], x[own], carry)
    total, errors = (jnp.where(covered, a, b) for a, b in zip(stepped, carry))
    return total + errors


def rows_dot(rows, matrix):
    """``rows @ matrix`` for a few rows (``(r, m) @ (m, n)``), one vector-matrix product
    per row: under ``vmap`` XLA on CPU runs a batched ``(r, m) @ (m, n)`` with small
    ``r`` and ``m`` much slower than ``r`` vector-matrix products."""
    return jnp.stack([dot(rows[k], matrix) for k in range(rows.shape[0])])


@jax.jit
def row_residuals(matrix, ys, gs):
    """``gs[k] - ys[k] @ matrix`` for each of a few rows ``k`` (``ys`` ``(r, m)``, ``gs``
    ``(r, n)``), each as :func:`transposed_residual`.  An unrolled loop over the ``r`` rows: with a
    trailing axis of ``r`` (or an inner ``vmap``) XLA on CPU lays the batch out badly."""
    return jnp.stack([transposed_residual(matrix, ys[k], gs[k]) for k in range(ys.shape[0])])


def _refined_divide(numerator, denominator):
    """``numerator / denominator`` followed, in float32, by one Newton step on an exact
    residual: ``q + (numerator - q * denominator) / denominator``, with ``q *
    denominator`` taken as exact partial products of :func:`split` halves (so neither
    rounding nor a compiler's fused multiply-adds spoil it).  A quotient within a few
    ulp comes back correctly rounded but for near-ties (below about 1e-30 the step
    itself is subnormal and helps less).  Where the step is not finite (a zero or
    infinite operand) ``q`` is kept."""
    quotient = numerator / denominator
    if quotient.dtype != jnp.float32:
        return quotient  # float64 division is correctly rounded on CPUs and GPUs
    (q_high, q_low), (d_high, d_low) = split(quotient), split(denominator)
    # numerator - q_high * d_high is exact (the two agree to ~12 bits: Sterbenz).
    residual = (numerator - q_high * d_high) - (q_high * d_low + q_low * d_high + q_low * d_low)
    step = residual / denominator
    return jnp.where(jnp.isfinite(step), quotient + step, quotient)


@jax.jit
def divide(numerator, denominator):
    """``numerator / denominator``, correctly rounded but for near-ties on every
    backend; every division of the solver goes through here.  GPUs divide float32
    approximately (XLA lowers it to ``div.full.f32``, within 2 ulp), which is enough to
    change the solver's verdicts, so every float32 quotient off the CPU gets one Newton
    step on an exact residual (:func:`_refined_divide`).  CPUs divide correctly
    rounded, so there the plain quotient is kept."""
    return jax.lax.platform_dependent(
        numerator, denominator, cpu=lambda x, y: x / y, default=_refined_divide
    )


def leading_axis(combine, rows):
    """``combine``-reduce ``(m, ...)`` over its leading axis as an unrolled chain of
    elementwise ops (a loop beyond ``UNROLL_LIMIT`` rows, same order).  Under ``vmap``
    that axis is a middle one, and XLA on CPU hands a middle-axis reduction to a library
    kernel much slower than one fused elementwise pass."""
    rows = jnp.asarray(rows)
    if rows.shape[0] <= UNROLL_LIMIT:
        return functools.reduce(combine, [rows[k] for k in range(rows.shape[0])])
    return jax.lax.fori_loop(1, rows.shape[0], lambda k, total: combine(total, rows[k]), rows[0])


def pivot_rows(rows, p, chosen, column):
    """``rows`` after a pivot on row ``p`` of ``column`` (``rows @ e_j`` for the
    entering ``j``): row ``p`` becomes ``rows[p] / column[p]`` and ``column`` the unit
    vector ``e_p``.  ``chosen`` is ``arange(len(rows)) == p``: a mask rather than
    ``.at[p]`` scatters, which under ``vmap`` add a kernel or two each, for the same
    arithmetic."""
    factors = jnp.where(chosen, column - 1.0, column)
    return rows - factors[:, None] * divide(rows[p], column[p])[None, :]


@functools.partial(jax.jit, static_argnames="num_variables")
def basis_gauss_jordan(augmented, columns, basis, num_variables: int):
    """``B^-1 augmented`` for the simplex basis ``B = [A, -I][:, basis]``, by
    Gauss-Jordan elimination with partial pivoting over ``B``'s structural columns only,
    in the order they take in ``basis``.

    A surplus column (a multiple of ``e_r``) needs no elimination: the rows whose
    surplus is basic are kept out of the pivot choice, so eliminating the structural
    columns on the other rows leaves every ``e_r`` exact, and dividing row ``r`` by its
    entry there finishes it.  A basis with ``k`` structural columns costs ``k`` rank-one
    updates (the pivot row marked by a mask as in :func:`pivot_rows`) instead of ``m``;
    under ``vmap`` the loop runs to the batch's largest ``k``.  Written out rather than
    calling LAPACK: batched small factorisations are slow on CPU under ``vmap``, and
    this runs the same on any device.

    Args:
        augmented: ``(m, c)``; column ``columns[i]`` is ``B``'s column ``i``.
        columns: ``(m,)`` int.
        basis: ``(m,)`` int, indices among ``(x, surplus)``.
        num_variables: ``n``.

    Returns:
        ``(m, c)`` with row ``i`` that of ``basis[i]``; non-finite where ``B`` is
        singular.
    """
    m = basis.shape[0]
    rows = jnp.arange(m, dtype=jnp.int32)
    structural = basis < num_variables
    surplus_row = jnp.where(structural, -1, basis - num_variables)
    covered = jnp.any(rows[:, None] == surplus_row[None, :], axis=1)
    order, count = _structural_first(structural)

    def eliminate(k, carry):
        augmented, used, pivot_order = carry
        position = order[k]
        column = augmented[:, columns[position]]
        p = jnp.argmax(jnp.where(used, -1, jnp.abs(column))).astype(jnp.int32)
        chosen = rows == p
        augmented = pivot_rows(augmented, p, chosen, column)
        return augmented, used | chosen, jnp.where(rows == position, p, pivot_order)

    augmented, _, pivot_order = jax.lax.fori_loop(
        0, count, eliminate, (augmented, covered, jnp.maximum(surplus_row, 0).astype(jnp.int32))
    )
    solved = augmented[pivot_order]
    # A surplus row still reads its column's entry (-1 up to scaling) on the left.
    entries = jnp.take_along_axis(solved, columns[:, None], axis=1)[:, 0]
    return divide(solved, jnp.where(structural, 1, entries).astype(solved.dtype)[:, None])


@functools.partial(jax.jit, static_argnames="steps")
def refined_values(inverse, basis_matrix, values, rhs, steps: int):
    """``steps`` steps of iterative refinement of ``B^-1 rhs`` (extra-precise residuals).

    Shapes: ``inverse`` ``(m, m)`` ``B^-1``, ``basis_matrix`` ``(m, m)`` ``B`` (or its
    :func:`split` halves), ``values`` and ``rhs`` ``(m,)``.  Returns ``(m,)``.
    """
    for _ in range(steps):
        values = values + dot(inverse, residual(basis_matrix, values, rhs))
    return values
