"""The weighted maximum-likelihood estimator of the paper, eq. (1), for one run.

For each arm ``j``: ``zeta_j = sum_i N_i W[i, j]`` (the weighted number of samples) and
``mu_hat_j = sum_tau W[i_tau, j] X_{j,tau} / zeta_j``.

Numerics (float32 must stay accurate over 10**7 rounds):

* ``zeta`` and the weighted sum are accumulated with Kahan compensation, so adding a
  weight of 1 to 1.7e7 is not lost (plain float32 addition would drop it);
* observations are centred on the first value seen for the arm (``shift``), so a large
  mean does not cancel catastrophically in the running sum;
* a noise-free observation (``sigma = 0``, ``W = inf``) is the limit sigma -> 0: the arm's
  mean becomes known exactly (``exact``) and ``zeta = inf``; no NaN is ever formed.

Before an arm is observed its estimate is 0 and ``zeta`` is 0 (policies treat
``zeta = 0`` as "unexplored"); nothing is divided by zero.
"""

from __future__ import annotations

from typing import NamedTuple

import jax.numpy as jnp

from jaxbandit._types import Array

__all__ = ["EstimatorState", "init", "update", "mean", "weighted_counts", "kahan_add"]


class EstimatorState(NamedTuple):
    """Sufficient statistics of one run (all ``(num_arms,)``)."""

    counts: Array  # int32 N_i: plays of each arm
    zeta: Array  # finite part of the weighted number of samples
    zeta_error: Array  # Kahan compensation of zeta
    shift: Array  # first finite-noise observation of each arm (centring)
    weighted_sum: Array  # sum of W * (X - shift) over finite-noise observations
    weighted_sum_error: Array  # Kahan compensation of weighted_sum
    exact: Array  # bool: a noise-free observation has been seen
    exact_value: Array  # that observation


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
        exact=jnp.zeros(num_arms, bool),
        exact_value=zeros,
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
    dtype = state.zeta.dtype.type
    noise_free = jnp.isinf(precision_row)
    weight = jnp.where(noise_free, dtype(0), precision_row).astype(dtype)
    observed = weight > 0
    first = observed & (state.zeta == 0)
    shift = jnp.where(first, values, state.shift)
    centred = jnp.where(observed, values - shift, dtype(0))
    zeta, zeta_error = kahan_add(state.zeta, state.zeta_error, weight)
    weighted_sum, weighted_sum_error = kahan_add(
        state.weighted_sum, state.weighted_sum_error, weight * centred
    )
    return EstimatorState(
        counts=state.counts.at[arm].add(1),
        zeta=zeta,
        zeta_error=zeta_error,
        shift=shift,
        weighted_sum=weighted_sum,
        weighted_sum_error=weighted_sum_error,
        exact=state.exact | noise_free,
        exact_value=jnp.where(noise_free & ~state.exact, values, state.exact_value),
    )


def mean(state: EstimatorState) -> Array:
    """``(num_arms,)`` estimated means ``mu_hat`` (0 for arms not yet observed)."""
    safe_zeta = jnp.where(state.zeta > 0, state.zeta, jnp.ones_like(state.zeta))
    weighted = state.shift + (state.weighted_sum - state.weighted_sum_error) / safe_zeta
    weighted = jnp.where(state.zeta > 0, weighted, jnp.zeros_like(weighted))
    return jnp.where(state.exact, state.exact_value, weighted)


def weighted_counts(state: EstimatorState) -> Array:
    """``(num_arms,)`` weighted number of samples ``zeta`` (``inf`` once seen noise-free)."""
    zeta = state.zeta - state.zeta_error
    return jnp.where(state.exact, jnp.asarray(jnp.inf, zeta.dtype), zeta)
