"""The asymptotic regret lower bound of the paper (§4) as a linear program.

For means ``mu`` (K,) and precision ``W = 1 / sigma**2`` (K, K) (row = arm played,
column = arm observed), with ``i*`` the smallest index among the maximisers of ``mu``,
``Delta_i = mu_i* - mu_i`` and ``Delta_min`` the smallest positive gap::

    c*(mu) = argmin  sum_i c_i Delta_i
             s.t.    sum_j W[j, i] c_j >= 2 / Delta_i**2     (i != i*)
                     sum_j W[j, i] c_j >= 2 / Delta_min**2   (i  = i*)
                     c >= 0,

and ``liminf R_T / log T >= sum_i c*_i Delta_i``.

* ``c*`` is the canonical optimum of :func:`jaxbandit.lp.solve`: among the optimal
  ``c`` the one with the smallest ``sum(c)`` (then the lexicographically smallest).
  ``c_i*`` costs nothing, so without this rule the optimal set is unbounded.
* Noise-free observations (``W[j, i] = inf``, ``sigma = 0``) are taken as the limit
  ``sigma -> 0``: any ``c_j > 0`` then satisfies constraint ``i``, so the constraint is
  dropped (its row of ``A`` and ``b_i`` are 0; ``observed_exactly[i]`` is True).  The
  value is the infimum; ``c*`` may put ``c_j = 0`` on the noise-free observer (an
  arbitrarily small positive amount suffices).
* Ties for the best mean make ``i*`` and ``Delta_min`` ill-defined: status
  ``TIED_BEST_ARM``.  An arm that no row observes makes the LP infeasible.

Everything here is pure and jit/vmap-able, and reports failures as status codes; the
host API :func:`jaxbandit.bound.lower_bound` raises for them and rescues the lanes a
float solve cannot certify.  The warm starts (:func:`warm_start`,
:func:`check_warm_start`, :func:`reuse_warm_start`) let a policy re-solve the LP at
slowly moving estimated means in ``O(K^2)`` per round.
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp

from jaxbandit import lp
from jaxbandit._types import Array, ArrayLike
from jaxbandit.lp.numerics import dot
from jaxbandit.reductions import all_true

__all__ = [
    "LPWarmStart",
    "LowerBoundProblem",
    "LowerBoundSolution",
    "LowerBoundStatus",
    "WarmAnchor",
    "anchor_warm_start",
    "check_warm_start",
    "initial_warm_start",
    "lower_bound_problem",
    "noise_free_arms",
    "reuse_warm_start",
    "reuse_warm_start_at",
    "right_hand_side",
    "solve_lower_bound",
    "solve_lower_bound_warm",
    "warm_start",
]


class LowerBoundStatus(lp.LPStatus):
    """:class:`jaxbandit.lp.LPStatus` codes plus the ones specific to the bound."""

    TIED_BEST_ARM = 5  # several arms share the best mean: i* and Delta_min undefined

    NAMES = {**lp.LPStatus.NAMES, 5: "tied_best_arm"}


class LowerBoundProblem(NamedTuple):
    """The LP ``min cost @ c  s.t.  A c >= b, c >= 0`` of one instance.

    Attributes:
        cost: ``(K,)`` the gaps ``Delta`` (``cost[i*] = 0``).
        A: ``(K, K)`` ``W^T`` (row ``i`` = information about arm ``i``); rows observed
            exactly (some ``W[j, i] = inf``) are zero.
        b: ``(K,)`` ``2 / Delta_i**2``, ``2 / Delta_min**2`` at ``i*``, 0 on rows observed
            exactly.
        best_arm: ``()`` int32 ``i*``.
        min_gap: ``()`` ``Delta_min`` (1 when undefined, with a tie status).
        observed_exactly: ``(K,)`` bool, the dropped (noise-free) constraints.
        status: ``()`` int32, ``OPTIMAL`` (0, the problem is well defined) or
            ``TIED_BEST_ARM``.
    """

    cost: Array
    A: Array
    b: Array
    best_arm: Array
    min_gap: Array
    observed_exactly: Array
    status: Array


class LowerBoundSolution(NamedTuple):
    """Result of :func:`solve_lower_bound` (leading batch axis under ``vmap``).

    Attributes:
        c: ``(K,)`` the canonical ``c*`` (meaningful when ``status == 0``).
        value: ``()`` ``sum_i c*_i Delta_i``; ``+inf`` unless ``status == 0``.
        status: ``()`` int32 :class:`LowerBoundStatus`.
        num_iterations: ``()`` int32 simplex pivots.
        basis: ``(K,)`` int32 optimal basis, for warm starts.
    """

    c: Array
    value: Array
    status: Array
    num_iterations: Array
    basis: Array


class WarmAnchor(NamedTuple):
    """Where a warm start's basis was last verified, and how far that certificate reaches.

    Attributes:
        gaps: ``(K,)`` the LP's costs, the gaps ``Delta_i``, at the means of the last
            passing :func:`check_warm_start`.
        rhs: ``(K,)`` the LP's ``b`` there.
        best_arm: ``()`` int32 ``i*`` there.
        values: ``(K,)`` the refined basic values there (basis order).
        value_error: ``(K,)`` a bound on their error (:func:`jaxbandit.lp.value_error`).
        value_size: ``(K,)`` ``|B^-1| |b|`` there, the scale of the check's tolerance.
        cost_room: ``(fall, rise)``, each ``((K,), (K,))``: the basis stays the
            canonical optimum for every ``mu`` with the same ``i*`` at which it stays
            primal feasible and whose gaps move each nonbasic reduced cost by less
            than its rooms
            (:attr:`jaxbandit.lp.BasisSensitivity.cost_room`); zeros when there is no
            certificate (no passing check since the basis changed).
    """

    gaps: Array
    rhs: Array
    best_arm: Array
    values: Array
    value_error: Array
    value_size: Array
    cost_room: tuple


class LPWarmStart(NamedTuple):
    """State a policy carries between solves: the last optimal basis, factorised.

    The LP's constraint matrix ``A = W^T`` does not depend on the means, so the inverse
    of the basis matrix stays valid from one solve to the next; re-checking the basis
    at new means is then a few ``K x K`` products (:func:`check_warm_start`), and while
    the gaps stay near those of the last passing check no check is needed at all
    (:func:`reuse_warm_start`).

    Attributes:
        factor: a :class:`jaxbandit.lp.BasisFactor` (``basis`` ``(K,)``, ``inverse``
            ``(K, K)``, ``condition`` ``()``).
        anchor: a :class:`WarmAnchor`.
        positions: ``(K,)`` int32, where each ``c_j`` sits among the basic values
            (``K``: not basic), so that placing them is a gather, not a one-hot sum.
    """

    factor: lp.BasisFactor
    anchor: WarmAnchor
    positions: Array

    @property
    def basis(self) -> Array:
        return self.factor.basis


def _check_shapes(mu, precision):
    mu = jnp.asarray(mu)
    if mu.ndim != 1 or mu.shape[0] < 2:
        raise ValueError(f"mu must have shape (K,) with K >= 2, got shape {mu.shape}.")
    if not jnp.issubdtype(mu.dtype, jnp.floating):
        raise TypeError(f"mu must be a floating-point array, got dtype {mu.dtype}.")
    precision = jnp.asarray(precision, mu.dtype)
    num_arms = mu.shape[0]
    if precision.shape != (num_arms, num_arms):
        raise ValueError(
            f"precision must have shape {(num_arms, num_arms)} to match mu, "
            f"got shape {precision.shape}."
        )
    return mu, precision


def noise_free_arms(precision: ArrayLike) -> Array:
    """``(K,)`` bool: the arms some arm observes without noise (``W[j, i] = inf``).  The
    LP drops their constraints (their row of ``A`` and ``b_i`` are 0)."""
    return jnp.any(jnp.isinf(jnp.asarray(precision)), axis=0)


def right_hand_side(gaps: ArrayLike, min_gap: ArrayLike, noise_free: ArrayLike) -> Array:
    """``(K,)`` the LP's ``b``: ``2 / Delta_i**2``, ``2 / Delta_min**2`` where the gap is 0
    (``i*``, and arms tied with it), 0 where ``noise_free`` (:func:`noise_free_arms`)."""
    gaps = jnp.asarray(gaps)
    rhs = 2 / jnp.square(jnp.where(gaps > 0, gaps, min_gap))
    return jnp.where(noise_free, jnp.zeros_like(rhs), rhs)


def _information_matrix(precision) -> Array:
    """The LP's ``A``: ``W^T`` with the rows of noise-free observations zeroed."""
    matrix = jnp.asarray(precision).T
    return jnp.where(noise_free_arms(precision)[:, None], jnp.zeros_like(matrix), matrix)


def lower_bound_problem(mu: ArrayLike, precision: ArrayLike) -> LowerBoundProblem:
    """Build the lower-bound LP of one instance (pure, jit/vmap-able).

    Args:
        mu: ``(K,)`` means (their dtype is the LP's; float64 needs ``jax_enable_x64``).
        precision: ``(K, K)`` ``W = 1 / sigma**2``, ``inf`` allowed (noise-free).

    Returns:
        A :class:`LowerBoundProblem`.
    """
    mu, precision = _check_shapes(mu, precision)
    dtype = mu.dtype
    top = jnp.max(mu)
    best_arm = jnp.argmax(mu).astype(jnp.int32)
    gaps = top - mu
    tied = jnp.sum(mu == top) > 1
    positive = gaps > 0
    min_gap = jnp.min(jnp.where(positive, gaps, jnp.inf))
    min_gap = jnp.where(jnp.isfinite(min_gap), min_gap, jnp.ones((), dtype))
    # Arms tied with i* have gap 0; they only occur with the tie status.
    observed_exactly = noise_free_arms(precision)
    rhs = right_hand_side(gaps, min_gap, observed_exactly)
    matrix = _information_matrix(precision)  # the warm starts factor this same matrix
    status = jnp.where(tied, LowerBoundStatus.TIED_BEST_ARM, LowerBoundStatus.OPTIMAL)
    return LowerBoundProblem(
        cost=gaps,
        A=matrix,
        b=rhs,
        best_arm=best_arm,
        min_gap=min_gap,
        observed_exactly=observed_exactly,
        status=status.astype(jnp.int32),
    )


def _finish(problem: LowerBoundProblem, solution: lp.LPSolution) -> LowerBoundSolution:
    tied = problem.status != LowerBoundStatus.OPTIMAL
    # A >= 0 and b >= 0: the LP is infeasible exactly when an arm with b_i > 0 is
    # observed by no row.  Trust that over a floating-point Farkas row.
    unobserved = jnp.any(jnp.all(problem.A == 0, axis=1) & (problem.b > 0))
    status = jnp.where(
        solution.status == LowerBoundStatus.INFEASIBLE,
        jnp.where(unobserved, LowerBoundStatus.INFEASIBLE, LowerBoundStatus.NUMERICAL_ERROR),
        solution.status,
    )
    status = jnp.where(tied, problem.status, status).astype(jnp.int32)
    value = jnp.where(tied, jnp.inf, solution.objective).astype(solution.x.dtype)
    return LowerBoundSolution(solution.x, value, status, solution.num_iterations, solution.basis)


def solve_lower_bound(
    mu: ArrayLike,
    precision: ArrayLike,
    *,
    initial_basis: ArrayLike | None = None,
    initial_factor: lp.BasisFactor | None = None,
    max_iterations: int | None = None,
    max_refactorizations: int | None = None,
    feasibility_tolerance: float | None = None,
) -> LowerBoundSolution:
    """Solve the lower-bound LP of one instance (pure, jit/vmap-able).

    Args:
        mu: ``(K,)`` means.
        precision: ``(K, K)`` ``1 / sigma**2``.
        initial_basis: optional ``(K,)`` warm-start basis (see :func:`jaxbandit.lp.solve`).
        initial_factor: or the same start from a factorised one, e.g.
            ``LPWarmStart.factor`` (see :func:`jaxbandit.lp.solve`).
        max_iterations: pivot budget (default ``6 K``).
        max_refactorizations, feasibility_tolerance: as in :func:`jaxbandit.lp.solve`.

    Returns:
        A :class:`LowerBoundSolution`.
    """
    problem = lower_bound_problem(mu, precision)
    solution = lp.solve(
        problem.cost,
        problem.A,
        problem.b,
        initial_basis=initial_basis,
        initial_factor=initial_factor,
        max_iterations=max_iterations,
        max_refactorizations=max_refactorizations,
        feasibility_tolerance=feasibility_tolerance,
    )
    return _finish(problem, solution)


def warm_start(precision: ArrayLike, basis: ArrayLike) -> LPWarmStart:
    """Factorise ``basis`` of the LP with this ``precision`` (one ``K x K`` inversion).

    The result has no anchor yet: the first :func:`check_warm_start` that passes gives
    it one (:func:`anchor_warm_start`).

    Args:
        precision: ``(K, K)`` ``1 / sigma**2``.
        basis: ``(K,)`` int, e.g. :attr:`LowerBoundSolution.basis`.
    """
    precision = jnp.asarray(precision)
    num_arms = precision.shape[-1]
    zeros = jnp.zeros((num_arms,), precision.dtype)
    anchor = WarmAnchor(
        gaps=zeros,
        rhs=zeros,
        best_arm=jnp.zeros((), jnp.int32),
        values=zeros,
        value_error=zeros,
        value_size=zeros,
        cost_room=((zeros, zeros), (zeros, zeros)),
    )
    factor = lp.factor_basis(_information_matrix(precision), basis)
    placed = factor.basis[:, None] == jnp.arange(num_arms, dtype=jnp.int32)[None, :]
    positions = jnp.where(jnp.any(placed, axis=0), jnp.argmax(placed, axis=0), num_arms).astype(jnp.int32)
    return LPWarmStart(factor, anchor, positions)


def initial_warm_start(precision: ArrayLike) -> LPWarmStart:
    """The warm start before any solve: the all-surplus basis (``c = 0``)."""
    num_arms = jnp.shape(precision)[-1]
    return warm_start(precision, lp.surplus_basis(num_arms, num_arms))


def check_warm_start(
    mu: ArrayLike, precision: ArrayLike, warm: LPWarmStart
) -> tuple[Array, LowerBoundSolution, lp.BasisSensitivity]:
    """Re-check the previous basis at new means: ``O(K^2)`` work (:func:`jaxbandit.lp.quick_check`).

    Under ``vmap`` run this for the whole batch, gather the lanes with ``ok == False``
    and run :func:`solve_lower_bound` on those only (then :func:`warm_start` on the new
    basis).

    Returns:
        ``(ok, solution, sensitivity)``: when ``ok``, the solution is the canonical
        optimum a full solve returns (same basis; ``c`` equal up to rounding, a few units
        in the last place); ``sensitivity`` feeds :func:`anchor_warm_start`.
    """
    problem = lower_bound_problem(mu, precision)
    check = lp.quick_check(problem.cost, problem.A, problem.b, warm.factor)
    solution = _finish(problem, check.solution)
    return check.ok & (problem.status == LowerBoundStatus.OPTIMAL), solution, check.sensitivity


def anchor_warm_start(
    warm: LPWarmStart, mu: ArrayLike, precision: ArrayLike, values: ArrayLike, cost_room: tuple
) -> LPWarmStart:
    """``warm`` anchored at ``mu``, where :func:`check_warm_start` passed.

    Args:
        warm: the warm start that was checked.
        mu: ``(K,)`` the means of that check.
        precision: ``(K, K)``.
        values, cost_room: the check's ``sensitivity.values`` ``(K,)`` and
            ``sensitivity.cost_room`` (the tolerance's scale is
            computed here, so a policy need not carry it through the engine's answers).
    """
    problem = lower_bound_problem(mu, precision)
    value_size = lp.value_size(warm.factor, problem.b)
    # The costs are the gaps, so the re-use moves the reduced costs by the gaps' moves
    # from here, and tests that i* is the same arm.
    optimal = problem.status == LowerBoundStatus.OPTIMAL
    anchor = WarmAnchor(
        gaps=problem.cost,
        rhs=problem.b,
        best_arm=problem.best_arm,
        values=jnp.asarray(values),
        value_error=lp.value_error(warm.factor, values, problem.b),
        value_size=value_size,
        cost_room=jax.tree.map(lambda part: jnp.where(optimal, jnp.asarray(part), 0).astype(problem.b.dtype), cost_room),
    )
    return warm._replace(anchor=anchor)


def reuse_warm_start_at(gaps, rhs, best_arm, precision, warm: LPWarmStart, decided=None) -> tuple[Array, Array]:
    """:func:`reuse_warm_start` for a problem already built, without a tie.

    Args:
        gaps: ``(K,)`` ``lower_bound_problem(mu, precision).cost``, the gaps at the means.
        rhs: ``(K,)`` its ``b``.
        best_arm: ``()`` int32, its ``best_arm``.
        precision: ``(K, K)`` ``1 / sigma**2``.
        warm: the run's :class:`LPWarmStart`.
        decided: optional ``(low, high) -> bool`` (``(K,)`` each): whether the caller
            does the same with every ``c`` in that box, which holds ``c*``.  Where it
            does, ``c`` is taken though some ``c_i`` is not known to ``tol``: what the
            caller does with it is what it would do with ``c*``.

    Returns:
        ``(ok, c)``: ``c`` ``(K,)`` the canonical optimum when ``ok`` (each ``c_i`` to
        ``tol``, or within the box ``decided`` accepted), else zeros.
    """
    anchor = warm.anchor
    num_arms = rhs.shape[0]
    dtype = rhs.dtype
    values, error, step = lp.shifted_values(warm.factor, anchor.values, anchor.value_error, anchor.rhs, rhs)
    structural = warm.basis < num_arms
    by_arm = lambda basic: jnp.concatenate([basic, jnp.zeros((1,), dtype)])[warm.positions]  # (m,) -> (K,) c
    tolerance = lp.default_tolerance(dtype)
    # Primal feasible to the check's tolerance (-tolerance |B^-1| |b|, with |B^-1| |b|
    # no smaller than the anchor's shrunk by the relative step), as the check accepts:
    # a degenerate basic value (full information: the best arm's constraint and that
    # of the arm with the smallest gap coincide, so one surplus is exactly 0) passes.
    floor = -tolerance * anchor.value_size * jnp.maximum(1 - step, 0)
    feasible = values - error >= floor
    # Each basic c_i to `tolerance` relative, or, where it is zero within its error
    # bound (degenerate), to `tolerance` of the largest.
    largest = jnp.max(jnp.where(structural, jnp.abs(values), 0))
    degenerate = (jnp.abs(values) <= 2 * error) & (error <= tolerance * largest)
    accurate = ~structural | (error <= tolerance * jnp.abs(values)) | degenerate
    if decided is not None:  # c* is within `error` of `values`
        accurate = accurate | decided(*(by_arm(jnp.maximum(values + sign * error, 0)) for sign in (-1, 1)))
    # Inside the certified region: the gaps' moves from the anchor's (with i* the same
    # arm, the costs' moves) move no nonbasic reduced cost out of its rooms.  The tests
    # are per arm, so that all share one reduction (each costs a pass under vmap); the
    # bound LP has as many surplus columns as structural ones.  The trade: four K x K
    # products in every re-use, for fewer checks (a few products with extra-precise
    # refinement each): a room per column, and signed moves that spend at most half
    # the room on a reduced cost moving away from zero, let through moves that one
    # radius for every gap, the largest move against the smallest room, would refuse.
    falls, rises = lp.reduced_cost_moves(warm.factor, gaps - anchor.gaps, _information_matrix(precision))
    fall_room, rise_room = anchor.cost_room
    inside = (falls[0] < fall_room[0]) & (falls[1] < fall_room[1]) & (rises[0] < rise_room[0]) & (rises[1] < rise_room[1])
    ok = all_true(feasible & accurate & inside) & (best_arm == anchor.best_arm)
    c = by_arm(jnp.maximum(values, 0))
    return ok, jnp.where(ok, c, 0).astype(dtype)


def reuse_warm_start(mu: ArrayLike, precision: ArrayLike, warm: LPWarmStart) -> tuple[Array, LowerBoundSolution]:
    """The canonical optimum near the anchor of ``warm``, without any check: ``O(K^2)``.

    While ``i*`` is the same arm and the gaps' moves from the anchor's move each
    nonbasic reduced cost by less than its rooms (``warm.anchor.cost_room``,
    :func:`jaxbandit.lp.reduced_cost_moves`: four ``K x K`` products), the basis stays
    the canonical optimum as long as it stays primal feasible
    (:class:`jaxbandit.lp.BasisSensitivity`), so
    ``c*(mu) = c*(anchor) + B^-1 (b(mu) - b(anchor))`` on the basic variables: one
    ``K x K`` product, and a second of non-negative terms for the error bound (the
    factor's bounds on the shift, no residual).  ``ok`` requires every basic value, less its error bound
    (:func:`jaxbandit.lp.shifted_values`), to be feasible to the check's tolerance
    ``tol = lp.default_tolerance`` (``-tol |B^-1| |b|``), and that bound to be within
    ``tol`` (1e-5 float32, 1e-9 float64) of each basic ``c_i`` (of the largest, for a
    ``c_i`` that is zero within its bound).  ``c`` is clipped at 0, as the check's is.
    When ``ok`` is False, call :func:`check_warm_start`.

    Returns:
        ``(ok, solution)``: when ``ok``, ``solution`` is the canonical optimum with each
        ``c_i`` within a relative ``tol`` (the basis is the same one a full
        solve returns).
    """
    mu = jnp.asarray(mu)
    problem = lower_bound_problem(mu, precision)
    ok, c = reuse_warm_start_at(problem.cost, problem.b, problem.best_arm, precision, warm)
    ok = ok & (problem.status == LowerBoundStatus.OPTIMAL)
    c = jnp.where(ok, c, 0)
    value = jnp.where(ok, dot(problem.cost, c), jnp.inf).astype(c.dtype)
    status = jnp.where(ok, LowerBoundStatus.OPTIMAL, LowerBoundStatus.NUMERICAL_ERROR).astype(jnp.int32)
    return ok, LowerBoundSolution(c, value, status, jnp.int32(0), warm.basis.astype(jnp.int32))


def solve_lower_bound_warm(
    mu: ArrayLike, precision: ArrayLike, warm: LPWarmStart
) -> tuple[LowerBoundSolution, LPWarmStart, Array]:
    """Re-use, else check, else fully solve; return the new warm start.

    Under ``vmap`` every branch runs for every lane (``lax.cond`` becomes a select);
    use :func:`reuse_warm_start` and :func:`check_warm_start` plus a compacted
    :func:`solve_lower_bound` to avoid it (as ``lp_explore`` does).

    Returns:
        ``(solution, new_warm, used_full_solve)``; the solution is the canonical optimum
        (see :func:`check_warm_start` and :func:`reuse_warm_start`).
    """
    reused_ok, reused = reuse_warm_start(mu, precision, warm)

    def check():
        ok, checked, sensitivity = check_warm_start(mu, precision, warm)

        def full_solve():
            solution = solve_lower_bound(mu, precision)
            optimal = solution.status == LowerBoundStatus.OPTIMAL
            new_warm = jax.tree.map(
                lambda a, b: jnp.where(optimal, a, b), warm_start(precision, solution.basis), warm
            )
            return solution, new_warm, jnp.asarray(True)

        anchored = lambda: (
            checked,
            anchor_warm_start(warm, mu, precision, sensitivity.values, sensitivity.cost_room),
            jnp.asarray(False),
        )
        return jax.lax.cond(ok, anchored, full_solve)

    return jax.lax.cond(reused_ok, lambda: (reused, warm, jnp.asarray(False)), check)
