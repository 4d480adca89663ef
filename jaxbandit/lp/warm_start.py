"""The factored warm start: re-check a basis in ``O(m^2)`` while ``A`` stays fixed.

A simplex basis matrix ``B = [A, -I][:, basis]`` depends on ``A`` and the index set
only.  When only ``cost`` and ``b`` change between solves (the lower-bound LP at new
estimated means), :func:`factor_basis` inverts ``B`` once and :func:`quick_check`
re-verifies the basis at new data with a few ``m x m`` products: the tests of
:func:`~jaxbandit.lp.solver.check_basis`, with a margin for its own rounding, so that
a basis it accepts is the canonical optimum :func:`~jaxbandit.lp.solver.solve`
returns (same basis, values equal up to rounding).  Its
:class:`BasisSensitivity` says how far the costs may move with that answer unchanged,
and :func:`shifted_values` moves the basic values to a new ``b`` with an error bound,
so that a caller may skip checks altogether near a verified point.
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp

from jaxbandit._types import Array, ArrayLike
from jaxbandit.lp.numerics import (
    basis_gauss_jordan,
    basis_residual,
    divide,
    dot,
    leading_axis,
    power_of_two_reciprocal,
    refined_values,
    residual,
    residual_rounding,
    split,
    transposed_residual,
)
from jaxbandit.lp.tableau import check_inputs, validated
from jaxbandit.lp.types import (
    CONDITION_LIMIT,
    BasisCheck,
    BasisFactor,
    BasisSensitivity,
    LPSolution,
    LPStatus,
    check_factor_shapes,
    check_refinements,
    default_tolerance,
)

__all__ = [
    "factor_basis",
    "quick_check",
    "reduced_cost_moves",
    "shifted_values",
    "value_error",
    "value_size",
]


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
    row_scale = power_of_two_reciprocal(jnp.max(jnp.abs(basis_matrix), axis=1))
    scaled = basis_matrix * row_scale[:, None]
    column_scale = power_of_two_reciprocal(jnp.max(jnp.abs(scaled), axis=0))
    scaled = scaled * column_scale[None, :]
    augmented = jnp.concatenate([scaled, jnp.eye(m, dtype=matrix.dtype)], axis=1)
    inverse = basis_gauss_jordan(augmented, jnp.arange(m, dtype=jnp.int32), basis, n)[:, m:]
    inverse = column_scale[:, None] * inverse * row_scale[None, :]  # B^-1 = C S^-1 R
    condition = jnp.max(dot(jnp.abs(inverse), jnp.sum(jnp.abs(basis_matrix), axis=1)))
    finite = jnp.all(jnp.isfinite(inverse)) & jnp.isfinite(condition)
    inverse = jnp.where(finite, inverse, jnp.zeros_like(inverse))
    condition = jnp.where(finite, condition, jnp.inf).astype(matrix.dtype)
    abs_inverse = jnp.abs(inverse)
    # Entries of B^-1 below the rounding error of their column (m eps of its largest)
    # are the structural zeros they stand for, computed with a residue (a covered
    # constraint's zero dual).  Were one real, a cost change would move a reduced cost
    # through it by a rounding-level amount only.  A true reduction for the column
    # maxima, not `leading_axis`: XLA would fuse that chain into the elementwise pass
    # and recompute every entry of B^-1 (scales and all) m times.
    residue = abs_inverse <= m * jnp.finfo(matrix.dtype).eps * jnp.max(abs_inverse, axis=0)[None, :]
    high, low = split(basis_matrix)
    tie_reduced, tie_size = _reduced_costs(
        jnp.ones((n,), matrix.dtype),
        (basis < n).astype(matrix.dtype),
        inverse,
        abs_inverse,
        (high, low),
        finite_matrix,
        jnp.abs(finite_matrix),
    )
    shift_bound, shift_tail = _shift_bounds(inverse, abs_inverse, (high, low), jnp.abs(basis_matrix), finite, basis, n)
    return BasisFactor(
        basis, high, low, inverse, condition, jnp.where(residue, 0, abs_inverse), tie_reduced, tie_size,
        shift_bound, shift_tail,
    )  # fmt: skip


def _basic_part(values, basis, n: int):
    """``values`` ``(n,)`` of the structural columns read at the basic positions ``(m,)``
    (0 where a surplus is basic)."""
    return jnp.where(basis < n, values[jnp.clip(basis, 0, n - 1)], 0)


def _shift_bounds(inverse, abs_inverse, split_matrix, abs_matrix, finite, basis, num_variables):
    """``(H, q)`` of :class:`BasisFactor`: with ``F = I - B X`` (in about twice the
    working precision, so it measures the computed ``X`` as it is, element growth
    included; ``|F|`` bounded with that residual's own error, ``u |F| + rho |B||X|``,
    :func:`~jaxbandit.lp.numerics.residual_rounding`) and ``f = ||F||_inf < 1/2``,
    ``B^-1 = X (I - F)^-1``, so ``|(B^-1 - X) s| <= |X||F| |s| + |X||F||F| 1 max|s| /
    (1 - f)``; the product ``X s`` rounds by at most ``gamma_m |X||s|``, ``gamma_k =
    k u / (1 - k u)`` with ``u = eps / 2`` in any order of summation, and ``s`` itself
    may be off by ``u |s|`` (a shift ``b' - b`` rounded; a residual's own rounding in
    :func:`value_error`), which ``B^-1`` carries as at most ``u |X||s| + u |X||F||s|``.
    ``H = (1 + 8 m u)(|X||F| + gamma_{m+1} |X|)``, ``gamma_{m+1} >= gamma_m + u``: the
    factor covers ``u |X||F|`` and the rounding of ``H``, of ``H |s|`` and of the sum they
    enter (all of non-negative terms).  Built once per basis, they spare each shift an
    extra-precise residual."""
    m = inverse.shape[0]
    eps = jnp.finfo(inverse.dtype).eps
    identity = jnp.eye(m, dtype=inverse.dtype)
    unit = eps / 2
    gamma = (m + 1) * unit / (1 - (m + 1) * unit)
    rho = residual_rounding(m, inverse.dtype)
    gap = jax.vmap(
        lambda x, e: basis_residual(split_matrix, x, e, basis, num_variables), in_axes=(1, 1), out_axes=1
    )(inverse, identity)
    abs_gap = (1 + 2 * unit) * jnp.abs(gap) + rho * dot(abs_matrix, abs_inverse)
    row_sums = jnp.sum(abs_gap, axis=1)
    f = jnp.max(row_sums)
    growth = dot(abs_inverse, abs_gap)
    bounded = finite & (f < 0.5)
    shift_bound = jnp.where(bounded, (1 + 8 * m * unit) * (growth + gamma * abs_inverse), jnp.inf)
    shift_tail = jnp.where(bounded, 2 * dot(growth, row_sums) / (1 - jnp.minimum(f, 0.5)), jnp.inf)
    return shift_bound, shift_tail


def _reduced_costs(g, g_basic, inverse, abs_inverse, basis_matrix, matrix, abs_matrix):
    """Reduced costs ``d = g - y M`` of the objective ``g`` at a basis, ``M = [A, -I]``,
    with the duals ``y = g_B B^-1`` refined once (extra-precise residual), and their
    magnitudes, the scale of their rounding error.

    The magnitudes are those of :func:`~jaxbandit.lp.solver.check_basis`, ``|g_j| +
    |y| |M_j| + |g_B| |B^-1 M_j|``, with the last term bounded by ``|g_B| |B^-1| |M_j|``
    (no ``m x m x n`` product): a larger noise level can only make a check refuse more,
    never accept what ``check_basis`` refuses.  Per-column quantities stay (structural,
    surplus) pairs, never stacked or concatenated: under ``vmap`` on CPU each slice of a
    stack is a copy kernel of its own.

    Shapes: ``g`` ``(n,)``, ``g_basic`` ``(m,)``, ``inverse`` and ``abs_inverse`` (the
    plain ``|B^-1|``) ``(m, m)``, ``basis_matrix`` the :func:`split` halves of ``B``,
    ``matrix`` and ``abs_matrix`` ``(m, n)`` (finite).  Returns ``(d, size)``, each a
    ``((n,), (m,))`` pair (the surplus columns' ``d`` is ``y``).
    """
    y = dot(g_basic, inverse)
    y = y + dot(transposed_residual(basis_matrix, y, g_basic), inverse)
    spread = dot(jnp.abs(g_basic), abs_inverse) + jnp.abs(y)
    size = (jnp.abs(g) + dot(spread, abs_matrix), spread)
    return (g - dot(y, matrix), y), size


def _nonbasic_columns(basis, m: int, n: int):
    """``(placed, nonbasic)``: ``placed`` ``(m, n)`` bool, basic row ``i`` holds ``x_j``;
    ``nonbasic`` a ``((n,), (m,))`` bool pair over the (structural, surplus) columns.
    One-hot comparisons rather than scatters (a vmapped scatter is a slow loop on CPU)."""
    placed = basis[:, None] == jnp.arange(n, dtype=jnp.int32)[None, :]  # (m, n)
    nonbasic = (
        ~leading_axis(jnp.logical_or, placed),
        ~leading_axis(jnp.logical_or, basis[:, None] == n + jnp.arange(m, dtype=jnp.int32)[None, :]),
    )
    return placed, nonbasic


def _strictly_dual_feasible(cost_reduced, noise, slack, factor: BasisFactor, nonbasic, tolerance, margin):
    """Every nonbasic column strictly worse, by more than its noise plus the check's
    slack: on the cost objective, or, where that is tied, on ``sum(x)`` (whose reduced
    costs come with the factor).  All but ``tolerance`` and ``margin`` are
    ``((n,), (m,))`` pairs over the (structural, surplus) columns."""
    sum_reduced, sum_size = factor.tie_reduced, factor.tie_size
    strictly = jnp.bool_(True)
    for part in range(2):
        tied = jnp.abs(cost_reduced[part]) <= noise[part] - slack[part]
        decided = (cost_reduced[part] > noise[part] + slack[part]) | (
            tied & (sum_reduced[part] > tolerance * sum_size[part] + margin * sum_size[part])
        )
        strictly = strictly & jnp.all(~nonbasic[part] | decided)
    return strictly


def _checked_point(values, placed, matrix, abs_matrix, rhs, tolerance, margin):
    """``(x, satisfied)``: the basic point ``(n,)``, clipped at 0, and whether it meets
    every row of ``A x >= b`` to ``4 * tolerance`` of the row's activity, less the
    check's margin."""
    x = jnp.maximum(leading_axis(jnp.add, jnp.where(placed, values[:, None], 0)), 0)
    shortfall = rhs - dot(matrix, x)
    activity = dot(abs_matrix, x) + jnp.abs(rhs)
    return x, jnp.all(shortfall <= (4 * tolerance - margin) * activity)


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
    and ``b`` may have changed).  The refined basic values and duals meet the tests of
    :func:`~jaxbandit.lp.solver.check_basis` *with a margin* for the rounding of this
    computation (``8 sqrt(m) eps`` relative to each quantity's magnitude), and only if
    ``eps * cond(B) <= 1e-2``.  So ``ok`` is conservative: the basis is one
    ``check_basis`` accepts too, and its point the canonical optimum
    :func:`~jaxbandit.lp.solver.solve` returns (same basis, values equal up to a few
    units in the last place).  When ``ok`` is False call ``solve``.

    Args:
        cost, A, b: the LP, as in :func:`~jaxbandit.lp.solver.solve`.
        factor: a :class:`BasisFactor` of ``A``.
        feasibility_tolerance: relative tolerance (default
            :func:`~jaxbandit.lp.types.default_tolerance`).

    Returns:
        A :class:`~jaxbandit.lp.types.BasisCheck` with its :class:`BasisSensitivity`.
    """
    cost, matrix, rhs = check_inputs(cost, A, b)
    m, n = matrix.shape
    dtype = matrix.dtype
    eps = jnp.finfo(dtype).eps
    tolerance = (
        default_tolerance(dtype) if feasibility_tolerance is None else feasibility_tolerance
    )
    margin = 8 * (m**0.5) * eps  # rounding error of the products below, relative
    valid, cost, _, rhs = validated(cost, matrix, rhs)
    # Not validated's matrix, which depends on cost and b: under vmap with one shared A
    # it would be a (batch, m, n) array, built and read at every check.
    matrix = jnp.where(jnp.isfinite(matrix), matrix, 0)
    check_factor_shapes(factor, m, n)
    basis, inverse = factor.basis, factor.inverse
    basis_matrix = (factor.matrix_high, factor.matrix_low)
    abs_inverse = jnp.abs(inverse)

    # Primal: x_B = B^-1 b, refined; feasible to the tolerance of check_basis.
    values = dot(inverse, rhs)
    values = refined_values(inverse, basis_matrix, values, rhs, check_refinements(dtype))
    value_size = dot(abs_inverse, jnp.abs(rhs))
    primal_feasible = jnp.all(values >= -(tolerance - margin) * value_size)

    # Reduced costs of the cost objective, refined; those of the tie-break sum(x) come
    # with the factor (they depend on the basis only).
    abs_matrix = jnp.abs(matrix)
    cost_basic = _basic_part(cost, basis, n)  # (m,)
    cost_reduced, cost_size = _reduced_costs(
        cost, cost_basic, inverse, abs_inverse, basis_matrix, matrix, abs_matrix
    )
    noise = tuple(tolerance * size for size in cost_size)
    slack = tuple(margin * size for size in cost_size)
    placed, nonbasic = _nonbasic_columns(basis, m, n)
    strictly = _strictly_dual_feasible(cost_reduced, noise, slack, factor, nonbasic, tolerance, margin)
    x, satisfied = _checked_point(values, placed, matrix, abs_matrix, rhs, tolerance, margin)

    well_conditioned = eps * factor.condition <= CONDITION_LIMIT
    finite = jnp.all(jnp.isfinite(values))
    for part in cost_reduced + factor.tie_reduced:
        finite = finite & jnp.all(jnp.isfinite(part))
    ok = valid & finite & well_conditioned & primal_feasible & strictly & satisfied
    x = jnp.where(ok, x, jnp.zeros_like(x))
    status = jnp.where(ok, LPStatus.OPTIMAL, LPStatus.NUMERICAL_ERROR).astype(jnp.int32)
    objective = jnp.where(ok, dot(cost, x), jnp.inf).astype(dtype)
    # Zero costs stay zero (the lower-bound LP: the best arm's gap), so only the basic
    # variables with a nonzero cost move the duals.
    moving = cost_basic != 0
    radius, room = _cost_room(cost_reduced, noise, slack, nonbasic, cost != 0, moving, factor.abs_inverse, abs_matrix)
    sensitivity = BasisSensitivity(
        values=jnp.where(ok, values, jnp.zeros_like(values)),
        cost_radius=jnp.where(ok, radius, jnp.zeros_like(radius)),
        cost_room=jax.tree.map(lambda part: jnp.where(ok, part, jnp.zeros_like(part)), room),
    )
    solution = LPSolution(x, objective, status, jnp.int32(0), basis.astype(jnp.int32))
    return BasisCheck(ok, solution, sensitivity)


def _cost_room(reduced, noise, slack, nonbasic, moving_cost, moving_basic, abs_inverse, abs_matrix):
    """How far each nonbasic reduced cost of the cost objective may fall, and rise, with
    the check's verdict on it unchanged (its rooms), and the max-norm radius of the
    nonzero structural costs that keeps them all (``0`` if none holds).

    A cost change ``delta`` moves the duals by ``delta_B B^-1``, so reduced cost ``j``
    moves by at most ``|delta_j| + |delta_B| |B^-1| |M_j|`` (the most
    :func:`reduced_cost_moves` counts), at most ``|delta|_inf`` times its gain
    ``1[j has a moving cost] + v |M_j|``, ``v = |B^-1|^T 1[basic with a moving cost]``.
    A strictly positive one may fall by what it exceeds ``noise + slack`` by and rise
    without limit; a tied one (within ``noise - slack`` of zero, decided by the
    ``sum(x)`` objective, which does not move) may move either way by what keeps it
    tied.  Ties are common here: a constraint that the free best arm covers has a zero
    dual, and its surplus column a zero reduced cost and a zero gain once the rounding
    residues of ``B^-1`` are dropped.  Rooms and radius are halved: the moves are
    computed with the computed ``B^-1``, which is itself off by up to ``eps cond(B)``
    (at most ``CONDITION_LIMIT``), and ``noise`` moves a little with the costs.

    Shapes: ``reduced``, ``noise``, ``slack``, ``nonbasic`` pairs of ``(n,)`` (structural
    columns) and ``(m,)`` (surplus columns); ``moving_cost`` ``(n,)``; ``moving_basic``
    ``(m,)``; ``abs_inverse`` ``(m, m)`` (:attr:`BasisFactor.abs_inverse`, the residues
    dropped); ``abs_matrix`` ``(m, n)``.  Returns ``(radius, (fall, rise))``: ``()``,
    ``inf`` when no reduced cost can move, and two ``((n,), (m,))`` pairs of halved
    rooms, ``inf`` where a column is basic or cannot move (or, for ``rise``, is strictly
    positive).
    """
    dtype = abs_matrix.dtype
    dual_gain = dot(moving_basic.astype(dtype), abs_inverse)  # v, (m,)
    gains = (moving_cost.astype(dtype) + dot(dual_gain, abs_matrix), dual_gain)
    smallest, roomy, falls, rises = jnp.asarray(jnp.inf, dtype), jnp.bool_(True), [], []
    for d, d_noise, d_slack, free, gain in zip(reduced, noise, slack, nonbasic, gains):
        positive = d > d_noise + d_slack
        room = jnp.where(positive, d - (d_noise + d_slack), (d_noise - d_slack) - jnp.abs(d))
        constrained = free & (gain > 0)
        ratio = jnp.where(constrained, divide(room, jnp.where(constrained, gain, 1)), jnp.inf)
        smallest = jnp.minimum(smallest, jnp.min(ratio))
        roomy = roomy & jnp.all(~constrained | (room > 0))
        half = jnp.where(constrained, 0.5 * room, jnp.inf)
        half = jnp.where(jnp.isnan(half), 0, half).astype(dtype)
        falls.append(half)
        rises.append(jnp.where(positive, jnp.asarray(jnp.inf, dtype), half))
    radius = jnp.where(roomy, 0.5 * smallest, 0)
    return jnp.where(jnp.isnan(radius), 0, radius).astype(dtype), (tuple(falls), tuple(rises))


def reduced_cost_moves(factor: BasisFactor, cost_change: ArrayLike, matrix: ArrayLike):
    """How far each reduced cost of ``factor``'s basis falls and rises when the costs
    change by ``cost_change``, to compare with :attr:`BasisSensitivity.cost_room`.

    The move is ``Delta_j = delta_j - (delta_B X) M_j``, ``M = [A, -I]``, computed
    signed with the computed inverse ``X``, and bounded by ``|delta_j| + |delta_B| |X|
    |M_j|`` (two products of non-negative terms, scaled up by their rounding).  A fall
    is ``min(bound, max(-Delta_j, 0) + bound / 2)``, a rise the same with ``Delta_j``:
    half the bound is the allowance for what the computed move may miss (``X`` off by
    up to ``eps cond(B) <= CONDITION_LIMIT``, the products' rounding), so a fall is
    never counted larger than the unsigned bound, and a move in a reduced cost's favour
    spends at most half of it.

    Args:
        factor: the :class:`BasisFactor` the check used.
        cost_change: ``(n,)`` the change of the structural costs (zero where they were).
        matrix: ``(m, n)`` ``A`` (non-finite entries read as 0).

    Returns:
        ``(fall, rise)``, each a ``((n,), (m,))`` pair over the (structural, surplus)
        columns.
    """
    change = jnp.asarray(cost_change)
    matrix = jnp.where(jnp.isfinite(matrix), matrix, 0)
    m, n = matrix.shape
    dtype = change.dtype
    rounding = 1 + (2 * m + 2) * jnp.finfo(dtype).eps
    basic_change = _basic_part(change, factor.basis, n)
    dual_bound = rounding * dot(jnp.abs(basic_change), factor.abs_inverse)
    bounds = (rounding * (jnp.abs(change) + dot(dual_bound, jnp.abs(matrix))), dual_bound)
    dual = dot(basic_change, factor.inverse)
    moves = (change - dot(dual, matrix), dual)  # the surplus column -e_i moves by dual_i
    counted = lambda move, bound: jnp.minimum(bound, jnp.maximum(move, 0) + bound / 2)
    fall = tuple(counted(-move, bound) for move, bound in zip(moves, bounds))
    rise = tuple(counted(move, bound) for move, bound in zip(moves, bounds))
    return fall, rise


def value_size(factor: BasisFactor, rhs: ArrayLike) -> Array:
    """``|B^-1| |b|`` ``(m,)``: the scale of :func:`quick_check`'s feasibility tolerance."""
    return dot(jnp.abs(factor.inverse), jnp.abs(rhs))


def value_error(factor: BasisFactor, values: ArrayLike, rhs: ArrayLike) -> Array:
    """A bound ``(m,)`` on ``|values - B^-1 rhs|`` (``inf`` where not finite), a
    posteriori from the residual ``r = rhs - B x`` in about twice the working precision:
    ``x - B^-1 rhs = -B^-1 r``, the correction ``X r`` through the computed inverse
    ``X`` plus what the factor's shift bounds say ``B^-1 - X`` can add to it,
    ``H |r| + q max|r|`` (:func:`shifted_values`), with ``|r|`` enlarged by the
    residual's own rounding (``rho |B| |x|``, which ``|X|`` carries too;
    :func:`~jaxbandit.lp.numerics.residual_rounding`), plus ``eps |x|`` for the rounding
    of ``x``.  The signed correction, not ``|X| |r|``: a refined ``x`` leaves a residual
    of the size of its own rounding, which ``|X| |r|`` would spread over every component."""
    values = jnp.asarray(values)
    m = values.shape[0]
    eps = jnp.finfo(values.dtype).eps
    unit = eps / 2
    rho = residual_rounding(m, values.dtype)
    r = residual((factor.matrix_high, factor.matrix_low), values, rhs)
    # The residual, a long elementwise chain, is read by products only (I r adds zeros
    # to each entry: r but for the sign of a zero; where r is not finite the bound is
    # inf either way); XLA would compute it again in each elementwise consumer.
    correction, r = dot(factor.inverse, r), dot(jnp.eye(m, dtype=values.dtype), r)
    abs_basis = jnp.abs(factor.matrix_high) + jnp.abs(factor.matrix_low)
    rounding = rho * dot(abs_basis, jnp.abs(values))
    abs_residual = (1 + 2 * unit) * jnp.abs(r) + rounding
    # |X| in full, not factor.abs_inverse: dropping its rounding residues would
    # understate a bound (they are structural zeros only for the check's room).
    through_inverse = dot(factor.shift_bound, abs_residual) + dot(jnp.abs(factor.inverse), rounding)
    error = jnp.abs(correction) + through_inverse + factor.shift_tail * jnp.max(abs_residual)
    error = (1 + 2 * (m + 2) * unit) * error + eps * jnp.abs(values)
    return jnp.where(jnp.isfinite(error), error, jnp.inf)


def shifted_values(factor: BasisFactor, values: ArrayLike, error: ArrayLike, rhs: ArrayLike, new_rhs: ArrayLike):
    """The basic values of ``factor``'s basis at a new right-hand side, with an error bound.

    ``x_B(b') = x_B(b) + B^-1 (b' - b)``: one ``m x m`` product, no refinement.  The
    bound adds to ``error`` (that of ``values``, :func:`value_error`) what the shift
    ``s = b' - b`` through the computed inverse can add, ``H |s| + q max|s|`` (the
    factor's :attr:`~BasisFactor.shift_bound` and :attr:`~BasisFactor.shift_tail`),
    and ``eps |x|`` for the rounding of the sum: a second ``m x m`` product, of
    non-negative terms.

    Args:
        factor: the :class:`BasisFactor` the check used.
        values: ``(m,)`` the basic values at ``rhs`` (:attr:`BasisSensitivity.values`).
        error: ``(m,)`` a bound on their error.
        rhs: ``(m,)`` the right-hand side of that check.
        new_rhs: ``(m,)`` the new right-hand side.

    Returns:
        ``(values, error, relative_step)``: ``(m,)`` values and errors with
        ``|values - B^-1 new_rhs| <= error`` (``inf`` where not finite), and ``()``
        ``max_k |new_rhs_k - rhs_k| / rhs_k`` (``inf`` if some ``rhs_k = 0`` moved).
    """
    rhs, new_rhs = jnp.asarray(rhs), jnp.asarray(new_rhs)
    eps = jnp.finfo(rhs.dtype).eps
    step = new_rhs - rhs
    outside = jnp.where(step == 0, 0, jnp.inf)
    relative_step = jnp.max(jnp.where(rhs > 0, divide(jnp.abs(step), jnp.where(rhs > 0, rhs, 1)), outside))
    values = jnp.asarray(values) + dot(factor.inverse, step)
    abs_step = jnp.abs(step)
    error = jnp.asarray(error) + dot(factor.shift_bound, abs_step)
    error = error + factor.shift_tail * jnp.max(abs_step) + eps * jnp.abs(values)
    return values, jnp.where(jnp.isfinite(error), error, jnp.inf), relative_step
