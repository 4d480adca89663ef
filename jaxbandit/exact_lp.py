"""The canonical LP optimum in exact rational arithmetic: the host's last resort.

:func:`jaxbandit.lp.solve` certifies its answer to a relative tolerance and reports
what it cannot certify.  In float64 that happens only to badly scaled lower-bound LPs
(``sigma`` spanning decades, ``cond(B)`` near ``1 / eps``).  The host API
(:func:`jaxbandit.bound.lower_bound`) solves those few in exact arithmetic here, so it
answers every feasible instance: the same lexicographic dual simplex as
:mod:`jaxbandit.lp`, on a tableau of :class:`fractions.Fraction`.  It is plain Python,
slow (its time grows with ``K`` and with how badly scaled the data are), and is never
run inside ``jit``.

The LP is the one whose data are the given floating-point numbers, which are exact
rationals: the answer is its exact canonical optimum, the lexicographic minimiser of
``(cost @ x, sum(x), x[0], ..., x[n-1])`` (see :mod:`jaxbandit.lp`), rounded once to
float64 at the end.
"""

from __future__ import annotations

from fractions import Fraction
from typing import NamedTuple, Sequence

import numpy as np

from jaxbandit.lp import LPStatus

__all__ = ["ExactSolution", "solve_exact"]


class ExactSolution(NamedTuple):
    """Result of :func:`solve_exact`.

    Attributes:
        x: ``(n,)`` float64, the canonical optimum rounded to nearest (zeros unless
            ``status == OPTIMAL``).
        objective: ``cost @ x`` of the exact optimum, rounded (``inf`` unless optimal).
        status: an :class:`jaxbandit.lp.LPStatus` (``OPTIMAL``, ``INFEASIBLE``,
            ``INVALID_INPUT`` or ``MAX_ITERATIONS``).
        num_iterations: dual simplex pivots taken (the factorisation not counted).
        basis: ``(m,)`` int32 sorted optimal basis among ``(x, surplus)``.
    """

    x: np.ndarray
    objective: float
    status: int
    num_iterations: int
    basis: np.ndarray


class _Tableau:
    """``B^-1 [A, -I | b]`` with the reduced costs of ``cost`` and ``sum(x)``, exactly.

    ``rows[r]`` is row ``r`` of the constraint tableau (``N + 1`` entries, the last one
    the basic value); ``costs`` the reduced costs of the two objectives (same layout).
    The reduced costs of the tie-breaking objectives ``x[k]`` are read off the rows
    (:meth:`reduced_costs`), not carried.
    """

    def __init__(self, cost, matrix: Sequence[Sequence[Fraction]], rhs: Sequence[Fraction]):
        m, n = len(matrix), len(matrix[0])
        self.size, self.num_variables = n + m, n
        self.rows = [
            list(matrix[i]) + [Fraction(-1 if k == i else 0) for k in range(m)] + [rhs[i]]
            for i in range(m)
        ]
        self.costs = [list(cost) + [Fraction(0)] * (m + 1), [Fraction(1)] * n + [Fraction(0)] * (m + 1)]
        self.basis = [None] * m

    def reduced_costs(self, column: int) -> list:
        """The reduced costs of nonbasic ``column`` for every objective, in order:
        ``cost``, ``sum(x)``, ``x[0]``, ..., ``x[n-1]`` (``x[k]``'s is
        ``[column == k] - (B^-1 M)[row of k, column]``, zero if ``k`` is not basic)."""
        row_of = {j: r for r, j in enumerate(self.basis)}
        tie_breaks = [
            Fraction(int(column == k)) - (self.rows[row_of[k]][column] if k in row_of else 0)
            for k in range(self.num_variables)
        ]
        return [g[column] for g in self.costs] + tie_breaks

    def pivot(self, row: int, column: int) -> None:
        pivot_row = self.rows[row]
        scale = pivot_row[column]
        pivot_row[:] = [value / scale for value in pivot_row]
        support = [j for j, value in enumerate(pivot_row) if value]  # the data are sparse
        for other in self.rows + self.costs:
            if other is pivot_row or not other[column]:
                continue
            factor = other[column]
            for j in support:
                other[j] -= factor * pivot_row[j]
        self.basis[row] = column


def _as_fractions(array: np.ndarray) -> list:
    return [[Fraction(float(v)) for v in row] for row in np.atleast_2d(array)]


def _lexicographically_nonnegative(column: Sequence[Fraction]) -> bool:
    for value in column:
        if value:
            return value > 0
    return True


def _factor(tableau: _Tableau, basis: Sequence[int]) -> bool:
    """Pivot ``basis`` in (partial pivoting on magnitude); False if it is singular."""
    free_rows = set(range(len(tableau.rows)))
    for column in basis:
        candidates = [r for r in free_rows if tableau.rows[r][column]]
        if not candidates:
            return False
        row = max(candidates, key=lambda r: abs(tableau.rows[r][column]))
        tableau.pivot(row, column)
        free_rows.remove(row)
    return True


def _dual_feasible(tableau: _Tableau) -> bool:
    basic = set(tableau.basis)
    return all(
        _lexicographically_nonnegative(tableau.reduced_costs(j))
        for j in range(tableau.size)
        if j not in basic
    )


def _start(cost, matrix, rhs, basis) -> _Tableau:
    """The tableau of ``basis`` if it is lexicographically dual feasible, else of the
    all-surplus basis (always dual feasible: every cost is non-negative)."""
    m, n = len(matrix), len(matrix[0])
    if basis is not None:
        tableau = _Tableau(cost, matrix, rhs)
        if _factor(tableau, sorted(int(j) for j in basis)) and _dual_feasible(tableau):
            return tableau
    tableau = _Tableau(cost, matrix, rhs)
    _factor(tableau, range(n, n + m))
    return tableau


def _entering(tableau: _Tableau, row: int):
    """The lexicographic ratio test on ``row`` (None: no negative entry, infeasible)."""
    entries = tableau.rows[row]
    basic = set(tableau.basis)
    candidates = [j for j in range(tableau.size) if j not in basic and entries[j] < 0]
    if not candidates:
        return None

    def key(j):
        return tuple(-d / entries[j] for d in tableau.reduced_costs(j)) + (j,)

    # Compare on the first objective and build the whole key only for the ties.
    first = {j: -tableau.costs[0][j] / entries[j] for j in candidates}
    smallest = min(first.values())
    return min((j for j in candidates if first[j] == smallest), key=key)


def solve_exact(cost, A, b, basis=None, *, max_iterations: int | None = None) -> ExactSolution:
    """The canonical optimum of ``min cost @ x, A x >= b, x >= 0`` in exact arithmetic.

    Args:
        cost: ``(n,)`` finite, non-negative.
        A: ``(m, n)`` finite.
        b: ``(m,)`` finite.
        basis: optional ``(m,)`` indices among ``(x, surplus)``, e.g. the basis a
            floating-point solve ended on: used as the start if it is non-singular and
            dual feasible (then a few pivots usually finish), else ignored.  A wrong
            shape or an index outside ``[0, n + m)`` raises ``ValueError``.
        max_iterations: pivot cap (default ``20 (m + n)``; the lexicographic ratio test
            cannot cycle, the cap only bounds the time).

    Returns:
        An :class:`ExactSolution`.
    """
    cost, A, b = (np.asarray(v, np.float64) for v in (cost, A, b))
    m, n = A.shape
    if cost.shape != (n,) or b.shape != (m,):
        raise ValueError(f"cost {cost.shape} and b {b.shape} must match A {A.shape}.")
    invalid = not (np.all(np.isfinite(A)) and np.all(np.isfinite(b)) and np.all(np.isfinite(cost)))
    if invalid or np.any(cost < 0):
        return ExactSolution(np.zeros(n), np.inf, LPStatus.INVALID_INPUT, 0, np.arange(n, n + m, dtype=np.int32))
    if basis is not None:
        basis = np.asarray(basis)
        if basis.shape != (m,) or not np.all((basis >= 0) & (basis < n + m)):
            raise ValueError(f"basis must hold {m} indices in [0, {n + m}), got {basis.tolist()}.")
    cap = 20 * (m + n) if max_iterations is None else max_iterations
    exact_cost = _as_fractions(cost)[0]
    tableau = _start(exact_cost, _as_fractions(A), _as_fractions(b)[0], basis)
    status, pivots = LPStatus.OPTIMAL, 0
    while True:
        # Dual simplex, Bland's choice of the leaving row: the infeasible row whose basic
        # variable has the smallest index.
        infeasible = [r for r, row in enumerate(tableau.rows) if row[-1] < 0]
        if not infeasible:
            break
        if pivots >= cap:
            status = LPStatus.MAX_ITERATIONS
            break
        row = min(infeasible, key=lambda r: tableau.basis[r])
        column = _entering(tableau, row)
        if column is None:
            status = LPStatus.INFEASIBLE
            break
        tableau.pivot(row, column)
        pivots += 1
    values = [Fraction(0)] * (n + m)
    for r, j in enumerate(tableau.basis):
        values[j] = tableau.rows[r][-1]
    final_basis = np.sort(np.asarray(tableau.basis, np.int32))
    if status != LPStatus.OPTIMAL:
        return ExactSolution(np.zeros(n), np.inf, status, pivots, final_basis)
    objective = sum((c * v for c, v in zip(exact_cost, values[:n])), Fraction(0))
    x = np.array([float(v) for v in values[:n]], np.float64)
    return ExactSolution(x, float(objective), LPStatus.OPTIMAL, pivots, final_basis)
