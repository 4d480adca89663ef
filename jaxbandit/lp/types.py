"""What the LP solver returns and the constants it is tuned by.

The result types of :func:`~jaxbandit.lp.solver.solve`, the basis checks and the
factored warm start, the status codes, and the dtype-dependent tolerances and step
counts that several modules share.  Nothing here computes on the LP.
"""

from __future__ import annotations

from typing import NamedTuple, Optional

import jax.numpy as jnp

from jaxbandit._types import Array

__all__ = [
    "CONDITION_LIMIT",
    "BasisCheck",
    "BasisFactor",
    "BasisSensitivity",
    "LPSolution",
    "LPStatus",
    "check_factor_shapes",
    "check_refinements",
    "default_refactorizations",
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
    """Result of :func:`~jaxbandit.lp.solver.solve` (add a leading batch axis under ``vmap``).

    Attributes:
        x: ``(n,)`` the canonical optimal solution if ``status == OPTIMAL``; otherwise
            the last basic point, clipped to ``x >= 0`` (finite, meaningless).
        objective: ``()`` ``cost @ x`` if ``status == OPTIMAL``, ``+inf`` otherwise.
        status: ``()`` int32, an :class:`LPStatus` code.
        num_iterations: ``()`` int32, simplex pivots used.
        basis: ``(m,)`` int32 sorted indices of the basic variables among
            ``(x, surplus)`` (``n + m`` variables; surplus ``i`` is ``n + i``).  Feed it
            back as a warm start (:func:`~jaxbandit.lp.solver.check_basis`,
            ``solve(initial_basis=...)``).
    """

    x: Array
    objective: Array
    status: Array
    num_iterations: Array
    basis: Array


class BasisSensitivity(NamedTuple):
    """What :func:`~jaxbandit.lp.warm_start.quick_check` learns about nearby LPs with the same ``A``.

    Attributes:
        values: ``(m,)`` the refined basic values ``x_B = B^-1 b`` (basis order).
        cost_radius: ``()`` the basis stays the canonical optimum for every cost
            ``c'`` with ``max_j |c'_j - c_j| < cost_radius`` and ``c'_j = 0`` wherever
            ``c_j = 0``, at any ``b`` where it stays primal feasible: every nonbasic
            reduced cost of the cost objective stays positive, except those that such
            a change cannot move (zero, with a positive reduced cost of ``sum(x)``).
            ``0`` when a nonbasic reduced cost that can move is within its rounding
            error of zero, or the check failed.
        cost_room: ``(fall, rise)``, each ``((n,), (m,))`` over the (structural,
            surplus) columns: the basis stays the canonical optimum for every such cost
            ``c'`` whose fall and rise of each nonbasic reduced cost (bounded by
            :func:`~jaxbandit.lp.warm_start.reduced_cost_moves`) are below its rooms
            here, at any ``b`` where it stays primal feasible; ``inf`` where a column is
            basic or cannot move (and a strictly positive one's room to rise), zeros
            where the check failed.  A finer test than ``cost_radius``, which every
            cost inside the radius passes.
    """

    values: Array
    cost_radius: Array
    cost_room: tuple


class BasisCheck(NamedTuple):
    """Result of :func:`~jaxbandit.lp.solver.check_basis` and
    :func:`~jaxbandit.lp.warm_start.quick_check`.

    Attributes:
        ok: ``()`` bool, the basis is primal feasible and *strictly* lexicographically
            dual feasible, so its point is the unique canonical optimum.
        solution: the :class:`LPSolution` of that basis (status ``OPTIMAL`` iff ok,
            else ``NUMERICAL_ERROR``; ``num_iterations = 0``).
        sensitivity: a :class:`BasisSensitivity` (``quick_check`` only, else None).
    """

    ok: Array
    solution: LPSolution
    sensitivity: Optional[BasisSensitivity] = None


class BasisFactor(NamedTuple):
    """A basis with its inverse, for cheap re-checks while ``A`` stays fixed.

    Besides ``B^-1`` it keeps what every check would otherwise recompute from the basis
    alone: ``B`` itself (rebuilt inside a check, XLA would fuse its gather and select
    into every loop that reads it, and the extra-precise residuals read each entry once
    per column), ``B`` split into the halves of those residuals, ``|B^-1|`` without its
    rounding residues (each an ``m x m`` pass per check under ``vmap``), and the reduced
    costs of the tie-breaking objective ``sum(x)``, whose costs, hence duals, do not
    change between checks, and the bounds that let a re-use skip a residual.  A factor
    is so five ``m x m`` arrays and a few vectors (``lp_explore`` keeps one per run).

    Attributes:
        basis: ``(m,)`` int32 sorted basic-variable indices among ``(x, surplus)``.
        matrix_high, matrix_low: ``(m, m)`` ``B = matrix_high + matrix_low`` (exactly;
            non-finite entries of ``A`` read as 0), split as by
            :func:`~jaxbandit.lp.numerics.split`: the leading halves of the
            significands, and the rest.
        inverse: ``(m, m)`` ``B^-1`` (zeros if ``B`` is singular).
        condition: ``()`` Skeel's ``max_i (|B^-1| |B| 1)_i`` (``inf`` if singular).
        abs_inverse: ``(m, m)`` ``|B^-1|`` with the rounding residues zeroed: entries at
            most ``m eps`` times the largest of their column, taken as the structural
            zeros they are here (see ``warm_start._cost_room``).
        tie_reduced: ``((n,), (m,))`` the reduced costs of ``sum(x)`` on the
            (structural, surplus) columns, refined as
            :func:`~jaxbandit.lp.warm_start.quick_check` computes the cost objective's.
        tie_size: ``((n,), (m,))`` their magnitudes, the scale of their rounding error.
        shift_bound, shift_tail: ``(m, m)`` ``H`` and ``(m,)`` ``q``: moving basic values
            computed as ``x + X s`` (``X`` the computed inverse) to a new right-hand
            side shifted by ``s`` adds at most ``H |s| + q max|s|`` to their error
            (``inf`` when ``X`` is too far from ``B^-1`` to bound; see
            :func:`~jaxbandit.lp.warm_start.shifted_values`).
    """

    basis: Array
    matrix_high: Array
    matrix_low: Array
    inverse: Array
    condition: Array
    abs_inverse: Array
    tie_reduced: tuple[Array, Array]
    tie_size: tuple[Array, Array]
    shift_bound: Array
    shift_tail: Array

    @property
    def matrix(self) -> Array:
        """``(m, m)`` ``B``."""
        return self.matrix_high + self.matrix_low


def default_tolerance(dtype) -> float:
    """Relative feasibility tolerance used for ``dtype`` (float32: 1e-5, float64: 1e-9)."""
    return 1e-9 if jnp.dtype(dtype) == jnp.float64 else 1e-5


def default_refactorizations(dtype) -> int:
    """Re-factorisation rounds :func:`~jaxbandit.lp.solver.solve` allows for ``dtype``
    (float32: 2, float64: 3).

    float32: a second round certifies some LPs that one round leaves uncertified (a
    GPU's approximate division can send one astray); each round costs time only in
    batches where some lane needs it."""
    return 3 if jnp.dtype(dtype) == jnp.float64 else 2


# Largest eps * cond(B) of a certified basis (cond: lp.solver._condition's measure;
# a re-used factor's, Skeel's max_i (|B^-1| |B| 1)_i).  The basic values get one step of
# iterative refinement with an extra-precise residual, which contracts their error by
# about eps * cond(B): at 1e-2 the refined values are accurate to ~1e-2 * eps * cond.
CONDITION_LIMIT = 1e-2


def check_refinements(dtype) -> int:
    """Refinement steps of :func:`~jaxbandit.lp.warm_start.quick_check`'s values (its
    hot path in simulations), and of a fresh tableau's values and duals
    (:func:`~jaxbandit.lp.tableau.factorised_tableau`).

    Step k leaves an error of about ``(eps cond(B))**(k + 1) |x|_inf`` on each value.
    float32: two steps (``solve`` returns four), which bring a small component next to
    a huge one (a free arm's) to about ``eps`` of itself; a third would only add to
    the cost of every check.  float64: one step, below ``1e-16 |x|_inf`` for any
    ``cond(B) <= 1e8``.
    """
    return 2 if jnp.dtype(dtype) == jnp.float32 else 1


def check_factor_shapes(factor: BasisFactor, m: int, n: int) -> None:
    """Raise ``ValueError`` unless ``factor`` is a factor of an ``(m, n)`` ``A``."""
    shapes = [a.shape for a in (factor.matrix_high, factor.matrix_low, factor.inverse, factor.abs_inverse)]
    tie_shapes = [a.shape for a in factor.tie_reduced + factor.tie_size]
    if (
        factor.basis.shape != (m,)
        or any(shape != (m, m) for shape in shapes)
        or tie_shapes != [(n,), (m,)] * 2
    ):
        raise ValueError(
            f"factor must be a BasisFactor of an ({m}, {n}) A: got basis shape {factor.basis.shape}, "
            f"matrix halves, inverse and abs_inverse shapes {shapes} and tie-break shapes "
            f"{tie_shapes}, expected ({m},), ({m}, {m}) and ({n},), ({m},)."
        )
