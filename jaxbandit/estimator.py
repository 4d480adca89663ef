"""The weighted maximum-likelihood estimator of the paper, eq. (1), for one run.

For each arm ``j``: ``zeta_j = sum_i N_i W[i, j]`` (the weighted number of samples) and
``mu_hat_j = sum_tau W[i_tau, j] X_{j,tau} / zeta_j``.

Two-level accumulation, for speed and for float32 accuracy over 10**7 rounds:

* every round, :func:`update` adds the new samples to small *recent* sums with plain
  additions (two passes over the state, the least a round can cost);
* every so often, :func:`consolidate` folds the recent weights into ``zeta`` with
  Kahan compensation (adding 1 to 1.7e7 is not lost, as a plain float32 sum would lose
  it), and *re-centres* the weighted sum: the centre ``shift`` moves to the current
  estimate and the sum keeps only the residual around it, so a large mean never
  cancels catastrophically and the sums stay O(noise).  The rounds after which to
  consolidate are fixed (:func:`consolidation_due`), so results do not depend on how a
  simulation is cut into chunks.  :func:`step` does both, for loops of your own;
* a noise-free observation (``sigma = 0``, ``W = inf``) is the limit sigma -> 0: its
  weight is capped at :func:`max_weight` (1.8e15 in float32), which makes it exact to
  rounding against any realistic amount of noisy data, and no ``inf`` or NaN is formed.

Before an arm is observed its estimate is 0 and ``zeta`` is 0 (policies treat
``zeta = 0`` as "unexplored"); nothing is divided by zero.  :func:`consolidate`,
:func:`mean` and :func:`weighted_counts` are elementwise over arms, so they apply
unchanged to batched states ``(..., num_arms)``.

In a policy: ``init`` in ``init_fn``, :func:`update` in ``update_fn``, and a
``consolidate_fn`` that applies :func:`consolidate` to the estimator in the state (or
``consolidate_fn=estimator.consolidate`` when the state is the estimator itself); the
engine calls it at the rounds :func:`consolidation_due` names (see :mod:`jaxbandit.base`).
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from jaxbandit._numbers import ArgumentError, integer
from jaxbandit._types import Array

__all__ = [
    "EstimatorState",
    "init",
    "from_estimates",
    "update",
    "consolidate",
    "consolidation_due",
    "next_consolidation",
    "step",
    "mean",
    "weighted_counts",
    "max_weight",
]

# After the first 2**k rounds (k < 8) and then every 256 rounds: early points keep the
# first, un-centred sums short; folding every 256 rounds makes its cost a small fraction
# of a round's.
CONSOLIDATION_PERIOD = 256


class EstimatorState(NamedTuple):
    """Sufficient statistics of one run (all ``(num_arms,)``).

    The weighted number of samples is ``zeta + recent_zeta`` and the estimate is
    ``shift + recent_sum / (zeta + recent_zeta)``.
    """

    counts: Array  # int32 N_i: plays of each arm
    zeta: Array  # consolidated weighted number of samples (a Kahan sum)
    shift: Array  # centre of the weighted sum: the estimate at the last consolidation
    recent_zeta: Array  # weights since the last consolidation, minus Kahan's error term
    recent_sum: Array  # sum of W * (X - shift): the residual left at the last
    #                    consolidation plus what was added since


def max_weight(dtype) -> float:
    """Largest precision used: ``sqrt(finfo.max) * 1e-4`` (1.8e15 in float32).

    Sums of 10**8 such weights and their products with O(1e4) observations stay finite.
    """
    return float(np.sqrt(np.finfo(dtype).max) * 1e-4)


def init(num_arms: int, dtype=jnp.float32) -> EstimatorState:
    """The state of no observation: ``(num_arms,)`` zeros."""
    zeros = jnp.zeros(integer("num_arms", num_arms, 1), dtype)
    return EstimatorState(jnp.zeros(num_arms, jnp.int32), zeros, zeros, zeros, zeros)


def from_estimates(counts, zeta, mean, dtype=jnp.float32) -> EstimatorState:
    """A consolidated state with the given ``(num_arms,)`` plays, weighted counts and
    estimates (to unit-test a policy on a hand-built situation)."""
    shapes = {name: jnp.shape(value) for name, value in (("counts", counts), ("zeta", zeta), ("mean", mean))}
    if len(set(shapes.values())) != 1 or len(shapes["counts"]) != 1:
        shown = ", ".join(f"{name} {shape}" for name, shape in shapes.items())
        raise ArgumentError(f"counts, zeta and mean must be (num_arms,) arrays of one length, got shapes {shown}.")
    zeros = jnp.zeros(jnp.shape(counts), dtype)
    return EstimatorState(
        counts=jnp.asarray(counts, jnp.int32),
        zeta=jnp.asarray(zeta, dtype),
        shift=jnp.asarray(mean, dtype),
        recent_zeta=zeros,
        recent_sum=zeros,
    )


def update(state: EstimatorState, arm: Array, values: Array, precision_row: Array) -> EstimatorState:
    """Add the observations of one round to the recent sums.

    Args:
        state: current statistics.
        arm: scalar int, the arm played, in ``[0, num_arms)`` (another counts for no
            arm: the engine refuses such an arm, a loop of your own must too).
        values: ``(num_arms,)`` observed samples (ignored where ``precision_row == 0``).
        precision_row: ``(num_arms,)`` ``W[arm, :]`` (``inf`` for noise-free samples).

    Returns:
        The updated :class:`EstimatorState` (call :func:`consolidate` when
        :func:`consolidation_due` says so, or use :func:`step`).
    """
    dtype = state.zeta.dtype
    weight = jnp.minimum(precision_row.astype(dtype), max_weight(dtype))
    # where(), not a product: an unobserved entry may hold anything, even inf.
    increment = jnp.where(weight > 0, weight * (values - state.shift), jnp.zeros_like(weight))
    num_arms = state.counts.shape[-1]
    return state._replace(
        counts=state.counts + jax.nn.one_hot(arm, num_arms, dtype=jnp.int32),
        recent_zeta=state.recent_zeta + weight,
        recent_sum=state.recent_sum + increment,
    )


def consolidate(state: EstimatorState) -> EstimatorState:
    """Fold the recent weights into ``zeta`` and re-centre on the current estimate."""
    # Kahan step: ``recent_zeta`` already holds minus the previous error term, so the
    # compensation carries over; minus the new error term starts the next block.
    increment = state.recent_zeta
    zeta = state.zeta + increment
    error = (zeta - state.zeta) - increment
    total = zeta - error
    observed = total > 0
    safe_total = jnp.where(observed, total, jnp.ones_like(total))
    shift = jnp.where(observed, state.shift + state.recent_sum / safe_total, state.shift)
    # Keep what the rounded new centre does not account for: the estimate is unchanged
    # up to one rounding of ``moved * total``, and the residual stays near zero.
    moved = shift - state.shift
    return EstimatorState(
        counts=state.counts,
        zeta=zeta,
        shift=shift,
        recent_zeta=-error,
        recent_sum=jnp.where(observed, state.recent_sum - moved * total, jnp.zeros_like(total)),
    )


def consolidation_due(rounds_done: Array) -> Array:
    """Whether to consolidate after ``rounds_done`` rounds: at 1, 2, 4, ..., 128, then every 256."""
    rounds_done = jnp.asarray(rounds_done, jnp.int32)
    power_of_two = (rounds_done & (rounds_done - 1)) == 0
    return (rounds_done > 0) & (power_of_two | (rounds_done % CONSOLIDATION_PERIOD == 0))


def next_consolidation(rounds_done: Array) -> Array:
    """The smallest round count ``> rounds_done`` at which :func:`consolidation_due` holds."""
    rounds_done = jnp.asarray(rounds_done, jnp.int32)
    next_power_of_two = jnp.left_shift(jnp.int32(1), 32 - jax.lax.clz(rounds_done))
    next_period = (rounds_done // CONSOLIDATION_PERIOD + 1) * CONSOLIDATION_PERIOD
    return jnp.where(rounds_done < CONSOLIDATION_PERIOD, next_power_of_two, next_period)


def step(state: EstimatorState, rounds_done: Array, arm: Array, values: Array, precision_row: Array) -> EstimatorState:
    """:func:`update`, then :func:`consolidate` if due; ``rounds_done`` counts this round."""
    state = update(state, arm, values, precision_row)
    return jax.lax.cond(consolidation_due(rounds_done), consolidate, lambda s: s, state)


def weighted_counts(state: EstimatorState) -> Array:
    """``(num_arms,)`` weighted number of samples ``zeta`` (0 before any observation)."""
    return state.zeta + state.recent_zeta


def mean(state: EstimatorState) -> Array:
    """``(num_arms,)`` estimated means ``mu_hat`` (0 for arms not yet observed)."""
    zeta = weighted_counts(state)
    observed = zeta > 0
    safe_zeta = jnp.where(observed, zeta, jnp.ones_like(zeta))
    # A reciprocal rather than a division: callers that also need 1 / zeta (UCB
    # widths) then share one division per arm (XLA merges the identical expressions).
    estimate = state.shift + state.recent_sum * (1 / safe_zeta)
    return jnp.where(observed, estimate, jnp.zeros_like(estimate))
