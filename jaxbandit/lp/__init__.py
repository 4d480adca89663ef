"""Small dense linear programs, solved exactly in JAX by a lexicographic dual simplex.

Standard form (one LP; add batch axes with ``jax.vmap``)::

    minimise    cost @ x
    subject to  A @ x >= b,   x >= 0,        with cost >= 0,

``A`` of shape ``(m, n)``.  Non-negative costs make the LP bounded and the all-surplus
basis (``x = 0``) dual feasible, so a dual simplex needs no phase 1: this is the shape
of covering LPs such as the bandit lower bound.  Costs with a negative entry are
reported as ``LPStatus.INVALID_INPUT``.

* :mod:`jaxbandit.lp.simplex`: :func:`solve` returns the canonical optimum (the
  lexicographic minimiser of ``(cost @ x, sum(x), x[0], ..., x[n-1])``) only once it
  is verified, else a status code; :func:`check_basis` re-verifies a previous basis at
  new data with one elimination.
* :mod:`jaxbandit.lp.warm_start`: while ``A`` stays fixed, :func:`factor_basis` keeps
  ``B^-1`` and :func:`quick_check` re-checks a basis with a few ``m x m`` products.
* :mod:`jaxbandit.lp.numerics`: the extra-precise arithmetic both rely on.

Everything is pure, fixed-shape and jit/vmap-able.
"""

from jaxbandit.lp.simplex import (
    BasisCheck,
    LPSolution,
    LPStatus,
    check_basis,
    default_refactorizations,
    default_tolerance,
    solve,
    surplus_basis,
)
from jaxbandit.lp.warm_start import (
    BasisFactor,
    BasisSensitivity,
    factor_basis,
    quick_check,
    shifted_values,
    value_size,
)

__all__ = [
    "BasisCheck",
    "BasisFactor",
    "BasisSensitivity",
    "LPSolution",
    "LPStatus",
    "check_basis",
    "default_tolerance",
    "factor_basis",
    "quick_check",
    "shifted_values",
    "solve",
    "surplus_basis",
    "value_size",
]
