"""The pivot rules of the lexicographic dual simplex and its pivot loop.

A basis is classified and its next pivot chosen: the dual simplex step while the basis
is primal infeasible (leaving row by a steepest edge in the 1-norm, entering column by a
lexicographic ratio test over ``(cost, sum(x), x[0], ..., x[n-1])``), else a primal
clean-up step with a Harris ratio test where rounding has left a reduced cost
negative.  Three variants of that choice serve three callers, composed from the same
halves: :func:`next_step` (the pivot loop, on an updated tableau), :func:`refined_step`
(a solve's verdict on a freshly factorised tableau: the primal entering column refined
first, the dual pivot left to the pivot loop) and :func:`classified_step` (a basis
check: the verdict only, no dual pivot).
:func:`pivot_loop` pivots until the updated tableau says it is done.

``careful`` below is not a mode: it is a traced ``()`` bool carried per LP (a small
pivot has made the basis singular once), so under ``vmap`` it differs between lanes
and selects with ``jnp.where``; a function per value would need a ``lax.cond``, which
``vmap`` turns into running both.
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp

from jaxbandit._types import Array
from jaxbandit.lp.numerics import divide, dot, residual
from jaxbandit.lp.tableau import (
    Magnitudes,
    Scaled,
    Tableau,
    magnitudes_of,
    nonbasic_mask,
    pivot,
    reduced_cost_noise,
    row_scales,
)

__all__ = [
    "Step",
    "classified_step",
    "next_step",
    "pivot_loop",
    "refined_step",
]


class _DualStep(NamedTuple):
    """The dual simplex half of :class:`Step`: all a primal infeasible basis needs."""

    primal_feasible: Array
    farkas: Array
    leave: Array
    enter: Array
    can_pivot: Array  # some column may enter on the leaving row


class _DualRow(NamedTuple):
    """The leaving row of a dual step and the columns that may enter on it."""

    primal_feasible: Array
    farkas: Array
    leave: Array
    pivot_row: Array  # (N,) the tableau's row without its value
    candidates: Array  # (N,) bool


def _dual_row(tableau: Tableau, scaled: Scaled, magnitudes, nonbasic, tolerance, careful) -> _DualRow:
    """Primal feasibility, the leaving row (a steepest edge in the 1-norm) and the columns
    that may enter on it."""
    rows, basis = tableau
    m = basis.shape[0]
    n = scaled.matrix.shape[1] - m
    dtype = rows.dtype
    values = rows[:m, -1]
    violation = divide(values, jnp.maximum(row_scales(rows, scaled, m, n), jnp.finfo(dtype).tiny))
    # A basic surplus is also held to its constraint's activity, the scale of the
    # verdict's point check (A x >= b to 4 tolerance of |A| x + |b|): where |B^-1| |b|
    # carries a huge free arm, it alone would let a surplus far below zero pass, and
    # the solve would end on a basis its verdict refuses.
    surplus = basis >= n
    point = jnp.where(surplus, 0, jnp.maximum(values, 0))  # the structural basic values, clipped
    activity = dot(magnitudes.basis_matrix, point) + jnp.abs(scaled.rhs)
    short = surplus & (values < -4 * tolerance * activity[jnp.where(surplus, basis - n, 0)])
    infeasible = (violation < -tolerance) | short
    primal_feasible = ~jnp.any(infeasible)
    # The leaving row: of the infeasible ones, the most infeasible against the 1-norm of
    # its row of B^-1 on the unscaled data (dual steepest edge in that norm; the surplus
    # block holds -B^-1 of the scaled data, the column scales cancel and the row scales
    # weigh its entries).  Relative to |B^-1| |b|, the rows of a large b (an arm with
    # a small gap) would crowd out the others and a cold solve take more pivots; under
    # vmap every lane waits for the longest solve of its batch.
    edge = dot(magnitudes.inverse, scaled.row_scale)
    steepness = divide(values, jnp.maximum(edge, jnp.finfo(dtype).tiny))
    leave = jnp.argmin(jnp.where(infeasible, steepness, jnp.inf)).astype(jnp.int32)
    # The whole row, as the pivot reads it (one gather for both); its surplus block is
    # the row of -B^-1.
    full_row = rows[leave]
    pivot_row = full_row[: n + m]
    entry_noise = 64 * jnp.finfo(dtype).eps * dot(jnp.abs(full_row[n : n + m]), magnitudes.matrix)
    # Every entry beyond its rounding error may be the pivot: the lexicographic ratio
    # test decides.  Preferring only large entries (above tolerance * the row's
    # largest) would pick columns whose ratio is not the minimum: the next basis would
    # be dual infeasible, and the primal clean-up would pivot on that same small entry.
    # Small pivots are refused only once one has led to a singular basis (``careful``).
    usable = nonbasic & (pivot_row < -entry_noise)
    stable = usable & (pivot_row < -tolerance * jnp.max(jnp.abs(pivot_row)))
    candidates = jnp.where(careful, stable, usable)
    # Infeasibility needs a row with no usable entry at all, whatever careful refuses.
    farkas = ~primal_feasible & ~jnp.any(usable)
    return _DualRow(primal_feasible, farkas, leave, pivot_row, candidates)


def _dual_step(tableau: Tableau, scaled: Scaled, magnitudes, nonbasic, tolerance, careful) -> _DualStep:
    """Primal feasibility, and the dual simplex step: leaving row as :func:`_dual_row`
    chooses it, entering column by the lexicographic ratio test."""
    row = _dual_row(tableau, scaled, magnitudes, nonbasic, tolerance, careful)
    enter = _entering_column(tableau, magnitudes, scaled, row.pivot_row, row.candidates, tolerance)
    return _DualStep(row.primal_feasible, row.farkas, row.leave, enter, jnp.any(row.candidates))


def _dual_classification(tableau: Tableau, scaled: Scaled, magnitudes, nonbasic, tolerance, careful) -> _DualStep:
    """:func:`_dual_step` without its entering column (``enter = 0``): a solve's verdict
    needs only whether a dual pivot is called for (the pivot loop then takes it), a
    basis check only the classification."""
    row = _dual_row(tableau, scaled, magnitudes, nonbasic, tolerance, careful)
    return _DualStep(row.primal_feasible, row.farkas, row.leave, jnp.int32(0), jnp.any(row.candidates))


class _PrimalStep(NamedTuple):
    """The primal half of :class:`Step`: dual feasibility and the clean-up pivot."""

    dual_feasible: Array
    strictly_dual_feasible: Array
    leave: Array
    enter: Array


class _Pricing(NamedTuple):
    """The entering column of a primal step and the reduced-cost tests behind it."""

    reduced: Array  # (2, N) reduced costs of both objectives
    noise: Array  # (2, N) their rounding-error levels
    cost_tied: Array  # (N,) bool, the cost's reduced cost is 0 to its noise
    improving_sum: Array  # (N,) bool, improves sum(x) at a tied cost
    by_cost: Array  # some nonbasic column improves the cost
    enter: Array


def _pricing(tableau: Tableau, scaled: Scaled, magnitudes, nonbasic, tolerance) -> _Pricing:
    """The most negative reduced cost (relative to its rounding-error level; cost
    first, at tied cost the sum)."""
    rows, basis = tableau
    m = basis.shape[0]
    total = scaled.matrix.shape[1]
    dtype = rows.dtype
    reduced = rows[m : m + 2, :total]
    noise = reduced_cost_noise(reduced, scaled.objectives, scaled.objectives[:, basis], magnitudes, tolerance)
    cost_tied = jnp.abs(reduced[0]) <= noise[0]
    improving = nonbasic[None, :] & (reduced < -noise)
    improving_sum = improving[1] & cost_tied
    relative = divide(reduced, jnp.maximum(noise, jnp.finfo(dtype).tiny))
    by_cost = jnp.any(improving[0])
    enter = jnp.where(
        by_cost,
        jnp.argmin(jnp.where(improving[0], relative[0], jnp.inf)).astype(jnp.int32),
        jnp.argmin(jnp.where(improving_sum, relative[1], jnp.inf)).astype(jnp.int32),
    )
    return _Pricing(reduced, noise, cost_tied, improving_sum, by_cost, enter)


def _ratio_test(
    tableau: Tableau, scaled: Scaled, magnitudes, nonbasic, values, tolerance, pricing: _Pricing, column, matrix_column
) -> _PrimalStep:
    """Dual feasibility, and the Harris ratio test on the entering ``column`` ``(m,)``
    of ``B^-1 M`` (``matrix_column`` ``(m,)`` the same column of ``M``)."""
    rows, basis = tableau
    m = basis.shape[0]
    n = scaled.matrix.shape[1] - m
    # An entry blocks if it exceeds tolerance times its own magnitude (|B^-1| |M_q|):
    # entries of one column can differ by many orders (a free arm's huge value next to
    # small ones).
    blocking = column > tolerance * dot(magnitudes.inverse, jnp.abs(matrix_column))
    safe_column = jnp.where(blocking, column, jnp.ones_like(column))
    ratios = jnp.where(blocking, divide(jnp.maximum(values, 0), safe_column), jnp.inf)
    # Harris: of the rows whose ratio is within tolerance of the minimum, pivot on the
    # largest entry (a degenerate row with a tiny entry would make B nearly singular).
    row_scale = row_scales(rows, scaled, m, n)
    bound = jnp.min(jnp.where(blocking, divide(jnp.maximum(values, 0) + tolerance * row_scale, safe_column), jnp.inf))
    near_minimum = blocking & (ratios <= bound)
    leave = jnp.argmax(jnp.where(near_minimum, column, -jnp.inf)).astype(jnp.int32)
    # Both objectives are >= 0 on x >= 0, so an unblocked improving column is noise.
    reduced, noise, cost_tied = pricing.reduced, pricing.noise, pricing.cost_tied
    dual_feasible = ~(pricing.by_cost | jnp.any(pricing.improving_sum)) | ~jnp.any(blocking)
    strictly = jnp.all(~nonbasic | (reduced[0] > noise[0]) | (cost_tied & (reduced[1] > noise[1])))
    return _PrimalStep(dual_feasible, strictly, leave, pricing.enter)


def _primal_step(tableau: Tableau, scaled: Scaled, magnitudes, nonbasic, values, body, tolerance) -> _PrimalStep:
    """Dual feasibility, and the primal simplex step on the most negative reduced cost
    (:func:`_pricing`) with a Harris ratio test, on the entering column as the tableau
    holds it.  ``values`` ``(m,)`` and ``body`` ``(m, N)`` are the tableau's basic
    values and ``B^-1 M``."""
    pricing = _pricing(tableau, scaled, magnitudes, nonbasic, tolerance)
    column = body[:, pricing.enter]
    matrix_column = scaled.matrix[:, pricing.enter]
    return _ratio_test(tableau, scaled, magnitudes, nonbasic, values, tolerance, pricing, column, matrix_column)


def _refined_primal_step(tableau: Tableau, scaled: Scaled, magnitudes, nonbasic, values, body, tolerance) -> _PrimalStep:
    """:func:`_primal_step` with the entering column first refined by one step with an
    extra-precise residual (on a freshly factorised tableau, where ``-body[:, n:]`` is
    an accurate ``B^-1``)."""
    basis = tableau.basis
    n = scaled.matrix.shape[1] - basis.shape[0]
    pricing = _pricing(tableau, scaled, magnitudes, nonbasic, tolerance)
    column = body[:, pricing.enter]
    matrix_column = scaled.matrix[:, pricing.enter]
    inverse = -body[:, n:]
    column = column + dot(inverse, residual(scaled.matrix[:, basis], column, matrix_column))
    return _ratio_test(tableau, scaled, magnitudes, nonbasic, values, tolerance, pricing, column, matrix_column)


class Step(NamedTuple):
    """What the current basis calls for: a dual pivot, a primal pivot, or nothing."""

    primal_feasible: Array  # basic values >= -tolerance * magnitude (surplus: and 4 tolerance * activity)
    farkas: Array  # a violated row with no negative entry: proven infeasible
    dual_feasible: Array  # no nonbasic column improves an objective noticeably
    strictly_dual_feasible: Array  # every nonbasic column is strictly worse (unique optimum)
    leave: Array  # pivot row
    enter: Array  # pivot column
    can_pivot: Array


class _StepInputs(NamedTuple):
    """What both halves of a step read off the tableau."""

    nonbasic: Array  # (N,) bool
    values: Array  # (m,) basic values
    body: Array  # (m, N) B^-1 M
    magnitudes: Magnitudes


def _step_inputs(tableau: Tableau, scaled: Scaled) -> _StepInputs:
    rows, basis = tableau
    m = basis.shape[0]
    total = scaled.matrix.shape[1]
    nonbasic = nonbasic_mask(basis, total)
    values = rows[:m, -1]
    body = rows[:m, :total]
    return _StepInputs(nonbasic, values, body, magnitudes_of(tableau, scaled))


def _combined(dual: _DualStep, primal: _PrimalStep) -> Step:
    """The dual step while primal infeasible, else the primal one."""
    dual_first = ~dual.primal_feasible
    return Step(
        primal_feasible=dual.primal_feasible,
        farkas=dual.farkas,
        dual_feasible=primal.dual_feasible,
        strictly_dual_feasible=primal.strictly_dual_feasible,
        leave=jnp.where(dual_first, dual.leave, primal.leave),
        enter=jnp.where(dual_first, dual.enter, primal.enter),
        can_pivot=jnp.where(dual_first, dual.can_pivot, ~primal.dual_feasible),
    )


def next_step(tableau: Tableau, scaled: Scaled, tolerance, careful) -> Step:
    """Classify the basis of an updated tableau and pick the next pivot: the dual
    simplex step (:func:`_dual_step`) while primal infeasible, else the primal clean-up
    step (:func:`_primal_step`).  ``careful`` (traced ``()`` bool) refuses small dual
    pivots."""
    inputs = _step_inputs(tableau, scaled)
    nonbasic, magnitudes = inputs.nonbasic, inputs.magnitudes
    dual = _dual_step(tableau, scaled, magnitudes, nonbasic, tolerance, careful)
    primal = _primal_step(tableau, scaled, magnitudes, nonbasic, inputs.values, inputs.body, tolerance)
    return _combined(dual, primal)


def refined_step(tableau: Tableau, scaled: Scaled, tolerance, careful) -> Step:
    """The verdict on a freshly factorised tableau: :func:`next_step`'s classification,
    the primal step's entering column refined first (:func:`_refined_primal_step`),
    and no entering column on the dual side (``enter`` is 0 there: the pivot loop
    chooses the dual pivot itself, on this same tableau)."""
    inputs = _step_inputs(tableau, scaled)
    nonbasic, magnitudes = inputs.nonbasic, inputs.magnitudes
    dual = _dual_classification(tableau, scaled, magnitudes, nonbasic, tolerance, careful)
    primal = _refined_primal_step(tableau, scaled, magnitudes, nonbasic, inputs.values, inputs.body, tolerance)
    return _combined(dual, primal)


def classified_step(tableau: Tableau, scaled: Scaled, tolerance) -> Step:
    """The feasibility verdicts of :func:`next_step` without choosing a dual pivot
    (``enter`` is 0 on the dual side): what a basis check reads."""
    inputs = _step_inputs(tableau, scaled)
    nonbasic, magnitudes = inputs.nonbasic, inputs.magnitudes
    dual = _dual_classification(tableau, scaled, magnitudes, nonbasic, tolerance, False)
    primal = _primal_step(tableau, scaled, magnitudes, nonbasic, inputs.values, inputs.body, tolerance)
    return _combined(dual, primal)


def _entering_column(tableau: Tableau, magnitudes: Magnitudes, scaled: Scaled, pivot_row, candidates, tolerance):
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
        noise = reduced_cost_noise(values[None, :], costs[None, :], weights[None, :], magnitudes, tolerance)
        return values, noise[0]

    def cond(carry):
        level, remaining = carry
        return (level < n + 2) & (jnp.sum(remaining) > 1)

    def narrow(remaining, values, noise):
        ratio = jnp.where(remaining, divide(values, denominator), jnp.inf)
        bound = jnp.min(jnp.where(remaining, divide(values + noise, denominator), jnp.inf))
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
    tableau: Tableau
    num_iterations: Array
    running: Array


def pivot_loop(tableau: Tableau, scaled: Scaled, num_iterations, max_iterations, tolerance, careful):
    """Simplex pivots until optimal, a Farkas row, no usable pivot, or the budget.

    Dual steps first, in a loop of their own: while the basis is primal infeasible the
    next pivot is always the dual one, so that loop takes exactly the pivots of the
    full one without computing its primal half (small kernels that a vmapped loop pays
    for until its slowest lane is done).  The full loop then takes the primal clean-up
    steps, where :func:`_may_take_primal_step` says rounding may have left one.

    Returns:
        ``(basis, num_iterations)``: ``(m,)`` the basis it ends on, ``()`` the pivot count.
    """

    columns = jnp.arange(scaled.matrix.shape[1], dtype=jnp.int32)

    def dual_body(carry):
        state, nonbasic = carry
        magnitudes = magnitudes_of(state.tableau, scaled)
        step = _dual_step(state.tableau, scaled, magnitudes, nonbasic, tolerance, careful)
        go = ~step.primal_feasible & step.can_pivot
        pivoted = pivot(state.tableau, step.leave, step.enter)
        new = jax.tree.map(lambda a, b: jnp.where(go, a, b), pivoted, state.tableau)
        # The nonbasic mask follows the pivot (the leaving column joins, the entering
        # one leaves) instead of being compared out of the basis at every step.
        swapped = (nonbasic & (columns != step.enter)) | (columns == state.tableau.basis[step.leave])
        return _PivotState(new, state.num_iterations + go.astype(jnp.int32), go), jnp.where(go, swapped, nonbasic)

    def step(state: _PivotState) -> _PivotState:
        chosen = next_step(state.tableau, scaled, tolerance, careful)
        go = chosen.can_pivot
        pivoted = pivot(state.tableau, chosen.leave, chosen.enter)
        new = jax.tree.map(lambda a, b: jnp.where(go, a, b), pivoted, state.tableau)
        return _PivotState(new, state.num_iterations + go.astype(jnp.int32), go)

    def cond(state: _PivotState):
        return state.running & (state.num_iterations < max_iterations)

    state = _PivotState(tableau, num_iterations, jnp.bool_(True))
    state, _ = jax.lax.while_loop(
        lambda carry: cond(carry[0]), dual_body, (state, nonbasic_mask(tableau.basis, scaled.matrix.shape[1]))
    )
    running = _may_take_primal_step(state.tableau, scaled, tolerance)
    state = jax.lax.while_loop(cond, step, state._replace(running=running))
    return state.tableau.basis, state.num_iterations


def _may_take_primal_step(tableau: Tableau, scaled: Scaled, tolerance):
    """False only where :func:`next_step` cannot call for a pivot after the dual loop.

    That loop stops primal feasible (then a pivot needs a nonbasic column that improves
    the cost, ``d_cost < -noise <= 0``, or the sum at a tied cost, ``d_sum < 0`` with
    ``|d_cost| <= noise``) or with no usable dual pivot (then the dual step it would
    take again has none either).  The cost row's noise is taken twice over, so that its
    rounding cannot make this test refuse what ``next_step`` would take: a cheap look
    (one noise row) instead of a whole step, which is what the second loop's first
    round costs otherwise.
    """
    rows, basis = tableau
    m = basis.shape[0]
    total = scaled.matrix.shape[1]
    reduced = rows[m : m + 2, :total]
    noise = reduced_cost_noise(
        reduced[:1], scaled.objectives[:1], scaled.objectives[:1, basis], magnitudes_of(tableau, scaled), tolerance
    )[0]
    improving = (reduced[0] < 0) | ((reduced[1] < 0) & (jnp.abs(reduced[0]) <= 2 * noise))
    return jnp.any(nonbasic_mask(basis, total) & improving)
