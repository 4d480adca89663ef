"""Gaussian Thompson sampling (flat prior, known noise).

* ``ts`` — own-arm feedback only: posterior ``N(mean_i, sigma_ii^2 / N_i)`` from the
  arm's own rewards; each arm is played once first.
* ``ts_n`` — all side observations: posterior ``N(mu_hat_i, 1 / zeta_i)`` from the
  weighted estimator (paper eq. (1)); starts with the paper's initial rounds.

Each round draws one posterior sample per arm from the run's policy stream at counter
``t`` and plays the argmax (smallest index on ties).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from jaxbandit import estimator, rng
from jaxbandit.base import Policy, play
from jaxbandit.policies._common import estimator_policy, initial_side_arm

__all__ = ["ts", "ts_n", "posterior_sample"]


def _standard_normal_apart(key, t, num: int, dtype) -> jnp.ndarray:
    """``rng.standard_normal(key, t, num, dtype)``, computed apart from its consumer on CPU.

    XLA:CPU fuses an elementwise producer into the reduction that consumes it and then
    evaluates it one element at a time, unvectorized.  The ``argmax`` over a posterior
    sample would run the Threefry blocks and the Box-Muller transform that way, several
    times slower than the vectorized loop the same draw gets when it is stored, as the
    observation noise is.  A conditional is a fusion boundary that XLA keeps
    (``optimization_barrier`` is dropped before fusion on CPU); both branches are the
    same draw, so the value never depends on the predicate.  Other backends take the
    plain draw.
    """

    def draw():
        return rng.standard_normal(key, t, num, dtype)

    def stored():
        # Any predicate XLA cannot fold will do: both branches compute the same thing.
        predicate = (jnp.asarray(t).astype(jnp.uint32) & jnp.uint32(1)) == 0
        return jax.lax.cond(predicate, draw, draw)

    return jax.lax.platform_dependent(cpu=stored, default=draw)


def posterior_sample(key, t, stats: estimator.EstimatorState) -> jnp.ndarray:
    """``(K,)`` draws from ``N(mu_hat, 1/zeta)`` (exact arms: their known mean).

    The standard normals are ``rng.standard_normal(key, t, K)``, whatever the backend.
    """
    zeta = estimator.weighted_counts(stats)
    dtype = zeta.dtype
    noise = _standard_normal_apart(key, t, zeta.shape[-1], dtype)
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
