"""Gaussian Thompson sampling (flat prior, known noise).

* ``ts`` — own-arm feedback only: posterior ``N(mean_i, sigma_ii^2 / N_i)`` from the
  arm's own rewards; each arm is played once first.
* ``ts_n`` — all side observations: posterior ``N(mu_hat_i, 1 / zeta_i)`` from the
  weighted estimator (paper eq. (1)); starts with the paper's initial rounds.

Each round draws one posterior sample per arm from the run's policy stream at counter
``t`` and plays the argmax (smallest index on ties).
"""

from __future__ import annotations

import jax.numpy as jnp

from jaxbandit import estimator, rng
from jaxbandit.base import Policy, play
from jaxbandit.policies._common import estimator_policy, initial_side_arm

__all__ = ["ts", "ts_n", "posterior_sample"]


def posterior_sample(key, t, stats: estimator.EstimatorState) -> jnp.ndarray:
    """``(K,)`` draws from ``N(mu_hat, 1/zeta)`` (exact arms: their known mean)."""
    zeta = estimator.weighted_counts(stats)
    dtype = zeta.dtype
    noise = rng.standard_normal(key, t, zeta.shape[-1], dtype)
    safe_zeta = jnp.where(zeta > 0, zeta, jnp.ones_like(zeta))
    sample = estimator.mean(stats) + noise / jnp.sqrt(safe_zeta)
    return jnp.where(zeta > 0, sample, jnp.asarray(jnp.inf, dtype))


def ts() -> Policy:
    """Thompson sampling with own-arm feedback only (no hyper-parameters)."""

    def select_fn(key, state, t, ctx):
        num_arms = ctx.sigma.shape[-1]
        sample = posterior_sample(key, t, state.stats)
        return play(jnp.where(t <= num_arms, t - 1, jnp.argmax(sample).astype(jnp.int32)))

    return estimator_policy("ts", {}, select_fn, own_arm_only=True)


def ts_n() -> Policy:
    """Thompson sampling with side observations (no hyper-parameters)."""

    def select_fn(key, state, t, ctx):
        num_arms = ctx.sigma.shape[-1]
        sample = posterior_sample(key, t, state.stats)
        return play(jnp.where(t <= num_arms, initial_side_arm(ctx, t), jnp.argmax(sample).astype(jnp.int32)))

    return estimator_policy("ts_n", {}, select_fn)
