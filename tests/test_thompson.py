"""Thompson sampling's posterior draw: the same numbers as the plain formula, and the
right distribution."""

import math

import jax
import jax.numpy as jnp
import numpy as np

from jaxbandit import estimator, rng
from jaxbandit.policies.thompson import posterior_sample

NUM_RUNS, NUM_ARMS = 4000, 6


def _plain_posterior_sample(key, t, stats):
    """The draw written directly, with no fusion boundary around the normals."""
    zeta = estimator.weighted_counts(stats)
    noise = rng.standard_normal(key, t, zeta.shape[-1], zeta.dtype)
    safe_zeta = jnp.where(zeta > 0, zeta, jnp.ones_like(zeta))
    sample = estimator.mean(stats) + noise / jnp.sqrt(safe_zeta)
    return jnp.where(zeta > 0, sample, jnp.asarray(jnp.inf, zeta.dtype))


def _batch():
    """Per-run keys and statistics; about one arm in five is unexplored (zeta = 0)."""
    gen = np.random.default_rng(0)
    zeta = np.where(gen.random((NUM_RUNS, NUM_ARMS)) < 0.2, 0.0, gen.exponential(50.0, (NUM_RUNS, NUM_ARMS)))
    mean = gen.normal(size=(NUM_RUNS, NUM_ARMS))
    counts = gen.integers(0, 100, (NUM_RUNS, NUM_ARMS))
    stats = jax.vmap(estimator.from_estimates)(counts, zeta.astype(np.float32), mean.astype(np.float32))
    keys = rng.run_keys(rng.stream_key(5, rng.POLICY_STREAM), 0, jnp.arange(NUM_RUNS))
    return keys, stats


def test_posterior_sample_equals_the_plain_formula_bitwise():
    keys, stats = _batch()
    new = jax.jit(jax.vmap(posterior_sample, (0, None, 0)))
    plain = jax.jit(jax.vmap(_plain_posterior_sample, (0, None, 0)))
    new_argmax = jax.jit(jax.vmap(lambda k, t, s: jnp.argmax(posterior_sample(k, t, s)), (0, None, 0)))
    plain_argmax = jax.jit(jax.vmap(lambda k, t, s: jnp.argmax(_plain_posterior_sample(k, t, s)), (0, None, 0)))
    for t in (1, 2, 7, 2**31 - 1):  # odd and even rounds take different (identical) branches
        t = jnp.int32(t)
        np.testing.assert_array_equal(
            np.asarray(new(keys, t, stats)).view(np.uint32), np.asarray(plain(keys, t, stats)).view(np.uint32)
        )
        np.testing.assert_array_equal(new_argmax(keys, t, stats), plain_argmax(keys, t, stats))


def test_posterior_sample_eager_matches_jit():
    keys, stats = _batch()
    jitted = jax.jit(jax.vmap(posterior_sample, (0, None, 0)))(keys, jnp.int32(3), stats)
    for run in range(3):
        one = jax.tree_util.tree_map(lambda x: x[run], stats)
        np.testing.assert_allclose(posterior_sample(keys[run], 3, one), jitted[run], rtol=1e-6)


def test_posterior_sample_distribution():
    """``(sample - mu_hat) * sqrt(zeta)`` is N(0, 1) where zeta > 0 and the sample is
    +inf where zeta = 0.  About 19,000 standardized draws; mean and variance within
    5 standard errors (1/sqrt(n) and sqrt(2/n))."""
    keys, stats = _batch()
    sample = np.asarray(jax.jit(jax.vmap(posterior_sample, (0, None, 0)))(keys, jnp.int32(10), stats), np.float64)
    zeta = np.asarray(stats.zeta, np.float64)
    explored = zeta > 0
    assert np.all(np.isposinf(sample[~explored]))
    z = (sample[explored] - np.asarray(stats.shift, np.float64)[explored]) * np.sqrt(zeta[explored])
    n = z.size
    assert abs(z.mean()) < 5 / math.sqrt(n)
    assert abs(z.var() - 1) < 5 * math.sqrt(2 / n)
