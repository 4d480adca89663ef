"""The observation model (paper §2) for one run.

Playing arm ``i`` at round ``t`` reveals ``X_j = mu_j + sigma[i, j] * z[t, j]`` for every
arm ``j`` with ``sigma[i, j] < inf``; the reward collected is ``X_i``.  The standard
normals ``z[t, :]`` depend only on the run key and ``t`` (not on the arm played), so two
policies run with the same seed see the same noise: common random numbers.  Other noise
families (:mod:`jaxbandit.noise`) draw their numbers the same way.
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp

from jaxbandit import noise as noise_families
from jaxbandit._types import Array

__all__ = ["EnvParams", "make_params", "observe", "gaps"]


class EnvParams(NamedTuple):
    """One instance on the device.

    Attributes:
        mu: ``(num_arms,)`` true means.
        sigma: ``(num_arms, num_arms)`` noise levels (``inf`` = not observed).
        precision: ``(num_arms, num_arms)`` ``1 / sigma**2``.
        noise_scale: ``(num_arms, num_arms)`` sigma with ``inf`` replaced by 0.
        revealed_mean: ``(num_arms, num_arms)`` ``mu[j]`` where row ``i`` reveals ``j``, else 0.
    """

    mu: Array
    sigma: Array
    precision: Array
    noise_scale: Array
    revealed_mean: Array


def make_params(mu, sigma, dtype=jnp.float32) -> EnvParams:
    """Device parameters from host arrays (leading batch axes allowed)."""
    return _make_params(jnp.asarray(mu, dtype), jnp.asarray(sigma, dtype))


@jax.jit  # one program per shape, where run op by op each operation would compile one
def _make_params(mu, sigma) -> EnvParams:
    precision = 1.0 / jnp.square(sigma)  # 1/inf = 0 and 1/0 = inf, as intended
    revealed = jnp.isfinite(sigma)
    noise_scale = jnp.where(revealed, sigma, jnp.zeros_like(sigma))
    revealed_mean = jnp.where(revealed, mu[..., None, :], jnp.zeros_like(sigma))
    return EnvParams(mu, sigma, precision, noise_scale, revealed_mean)


def observe(
    run_key: Array, t: Array, arm: Array, params: EnvParams, noise: noise_families.NoiseFamily = noise_families.GAUSSIAN
) -> Array:
    """Samples revealed by playing ``arm`` at round ``t`` (0-based).

    Args:
        run_key: ``(2,)`` uint32 noise key of the run.
        t: scalar round index.
        arm: scalar int, the arm played.
        params: the instance.
        noise: the instance's noise family (static).

    Returns:
        ``(num_arms,)`` observations; entries the play does not reveal are set to 0
        (their precision is 0, so estimators ignore them).
    """
    # Precomputed rows keep this to a gather and, for Gaussian noise, one multiply-add per arm.
    return noise_families.sample(noise, run_key, t, params.revealed_mean[arm], params.noise_scale[arm])


def gaps(mu: Array) -> Array:
    """``(num_arms,)`` suboptimality gaps ``max(mu) - mu``."""
    return jnp.max(mu) - mu
