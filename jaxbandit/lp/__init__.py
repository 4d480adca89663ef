"""Small dense linear programs, solved exactly in JAX by a lexicographic dual simplex.

Standard form (one LP; add batch axes with ``jax.vmap``)::

    minimise    cost @ x
    subject to  A @ x >= b,   x >= 0,        with cost >= 0,

``A`` of shape ``(m, n)``.  Non-negative costs make the LP bounded and the all-surplus
basis (``x = 0``) dual feasible, so a dual simplex needs no phase 1: this is the shape
of covering LPs such as the bandit lower bound.  Costs with a negative entry are
reported as ``LPStatus.INVALID_INPUT``.

Modules, one concept each; the imports form a DAG (``types``, ``numerics`` <-
``tableau`` <- ``pivoting`` <- ``solver``; ``warm_start`` <- ``types``, ``numerics``,
``tableau``):

* :mod:`jaxbandit.lp.types`: result types, status codes and shared tolerances, so
  that no module imports a type from the module that computes it.
* :mod:`jaxbandit.lp.numerics`: extra-precise arithmetic and small dense linear
  algebra, which knows nothing of an LP.
* :mod:`jaxbandit.lp.tableau`: the data scaled and the tableau of a basis (built,
  refined, pivoted): the state, apart from the rules that move it.
* :mod:`jaxbandit.lp.pivoting`: the pivot rules (dual step, primal clean-up,
  lexicographic ratio test) and the pivot loop: what chooses the next basis.
* :mod:`jaxbandit.lp.solver`: :func:`solve` (rounds of pivoting, re-factorisation and
  verification: the canonical optimum, the lexicographic minimiser of ``(cost @ x,
  sum(x), x[0], ..., x[n-1])``, only once verified, else a status code) and
  :func:`check_basis` (one elimination).
* :mod:`jaxbandit.lp.warm_start`: :func:`factor_basis` and :func:`quick_check`, the
  ``O(m^2)`` re-check while ``A`` stays fixed, which needs no pivoting at all.

Everything is pure, fixed-shape and jit/vmap-able.
"""

from jaxbandit.lp.solver import check_basis, solve
from jaxbandit.lp.tableau import surplus_basis
from jaxbandit.lp.types import (
    BasisCheck,
    BasisFactor,
    BasisSensitivity,
    LPSolution,
    LPStatus,
    default_refactorizations,
    default_tolerance,
)
from jaxbandit.lp.warm_start import (
    factor_basis,
    quick_check,
    reduced_cost_moves,
    shifted_values,
    value_error,
    value_size,
)

__all__ = [
    "BasisCheck",
    "BasisFactor",
    "BasisSensitivity",
    "LPSolution",
    "LPStatus",
    "check_basis",
    "default_refactorizations",
    "default_tolerance",
    "factor_basis",
    "quick_check",
    "reduced_cost_moves",
    "shifted_values",
    "solve",
    "surplus_basis",
    "value_error",
    "value_size",
]
