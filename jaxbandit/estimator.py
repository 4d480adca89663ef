"""The weighted maximum-likelihood estimator of the paper, eq. (1), for one run.

For each arm ``j``: ``zeta_j = sum_i N_i W[i, j]`` (the weighted number of samples) and
``mu_hat_j = sum_tau W[i_tau, j] X_{j,tau} / zeta_j``.

Numerics (float32 must stay accurate over 10**7 rounds):

* ``zeta`` and the weighted sum are accumulated with Kahan compensation, so adding a
  weight of 1 to 1.7e7 is not lost (plain float32 addition drops it);
* observations are centred on the first value seen for the arm (``shift``), so a large
  mean does not cancel catastrophically in the running sum;
* a noise-free observation (``sigma = 0``, ``W = inf``) is the limit sigma -> 0: its
  weight is capped at :func:`max_weight` (1.8e15 in float32), which makes it exact to
  rounding against any realistic amount of noisy data, and no ``inf`` or NaN is formed.

Before an arm is observed its estimate is 0 and ``zeta`` is 0 (policies treat
``zeta = 0`` as "unexplored"); nothing is divided by zero.
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from jaxbandit._types import Array

__all__ = ["EstimatorState", "init", "update", "mean", "weighted_counts", "kahan_add", "max_weight"]


class EstimatorState(NamedTuple):
    """Sufficient statistics of one run (all ``(num_arms,)``)."""

    counts: Array  # int32 N_i: plays of each arm
    zeta: Array  # weighted number of samples (Kahan sum)
    zeta_error: Array  # its compensation: the true sum is zeta - zeta_error
    shift: Array  # first observation of each arm (centring)
    weighted_sum: Array  # sum of W * (X - shift) (Kahan sum)
    weighted_sum_error: Array  # its compensation


def max_weight(dtype) -> float:
    """Largest precision used: ``sqrt(finfo.max) * 1e-4`` (1.8e15 in float32).

    Sums of 10**8 such weights and their products with O(1e4) observations stay finite.
    """
    return float(np.sqrt(np.finfo(dtype).max) * 1e-4)


def kahan_add(total: Array, error: Array, increment: Array) -> tuple[Array, Array]:
    """Compensated summation step: returns the new ``(total, error)``."""
    corrected = increment - error
    new_total = total + corrected
    new_error = (new_total - total) - corrected
    return new_total, new_error


def init(num_arms: int, dtype=jnp.float32) -> EstimatorState:
    zeros = jnp.zeros(num_arms, dtype)
    return EstimatorState(
        counts=jnp.zeros(num_arms, jnp.int32),
        zeta=zeros,
        zeta_error=zeros,
        shift=zeros,
        weighted_sum=zeros,
        weighted_sum_error=zeros,
    )


def update(state: EstimatorState, arm: Array, values: Array, precision_row: Array) -> EstimatorState:
    """Add the observations of one round.

    Args:
        state: current statistics.
        arm: scalar int, the arm played.
        values: ``(num_arms,)`` observed samples (ignored where ``precision_row == 0``).
        precision_row: ``(num_arms,)`` ``W[arm, :]`` (``inf`` for noise-free samples).

    Returns:
        The updated :class:`EstimatorState`.
    """
    dtype = state.zeta.dtype
    weight = jnp.minimum(precision_row.astype(dtype), max_weight(dtype))
    shift = jnp.where((state.zeta == 0) & (weight > 0), values, state.shift)
    zeta, zeta_error = kahan_add(state.zeta, state.zeta_error, weight)
    weighted_sum, weighted_sum_error = kahan_add(
        state.weighted_sum, state.weighted_sum_error, weight * (values - shift)
    )
    num_arms = state.counts.shape[0]
    return EstimatorState(
        counts=state.counts + jax.nn.one_hot(arm, num_arms, dtype=jnp.int32),
        zeta=zeta,
        zeta_error=zeta_error,
        shift=shift,
        weighted_sum=weighted_sum,
        weighted_sum_error=weighted_sum_error,
    )


def mean(state: EstimatorState) -> Array:
    """``(num_arms,)`` estimated means ``mu_hat`` (0 for arms not yet observed)."""
    observed = state.zeta > 0
    safe_zeta = jnp.where(observed, state.zeta, jnp.ones_like(state.zeta))
    estimate = state.shift + (state.weighted_sum - state.weighted_sum_error) / safe_zeta
    return jnp.where(observed, estimate, jnp.zeros_like(estimate))


def weighted_counts(state: EstimatorState) -> Array:
    """``(num_arms,)`` weighted number of samples ``zeta`` (0 before any observation)."""
    return state.zeta - state.zeta_error
