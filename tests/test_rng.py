"""Counter-based noise: known answers, distribution, independence from batching."""

import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxbandit import rng
from jaxbandit._numbers import ArgumentError


def test_threefry_known_answers():
    # Random123 known-answer test for threefry2x32 with 20 rounds.
    zero = jnp.uint32(0)
    x0, x1 = rng.threefry2x32((zero, zero), (zero, zero))
    assert (int(x0), int(x1)) == (0x6B200159, 0x99BA4EFE)
    ones = jnp.uint32(0xFFFFFFFF)
    x0, x1 = rng.threefry2x32((ones, ones), (ones, ones))
    assert (int(x0), int(x1)) == (0x1CB996FC, 0xBB002BE7)


def test_threefry_matches_jax_internal_implementation():
    from jax._src.random.threefry2x32 import threefry_2x32

    key = jnp.array([0x13198A2E, 0x03707344], dtype=jnp.uint32)
    c0 = jnp.arange(64, dtype=jnp.uint32) * jnp.uint32(2654435761)
    c1 = jnp.arange(64, dtype=jnp.uint32) ^ jnp.uint32(0xDEADBEEF)
    a, b = rng.threefry2x32((key[0], key[1]), (c0, c1))
    ref = threefry_2x32(key, jnp.concatenate([c0, c1]))
    np.testing.assert_array_equal(np.concatenate([a, b]), np.asarray(ref))


@pytest.fixture(scope="module")
def normal_sample():
    """4 runs x 2**17 rounds x 8 arms = 4.2M normals from the engine's generator."""
    keys = rng.run_keys(rng.stream_key(123, rng.NOISE_STREAM), 0, jnp.arange(4))
    draw = jax.jit(jax.vmap(jax.vmap(lambda k, t: rng.standard_normal(k, t, 8), (None, 0)), (0, None)))
    return np.asarray(draw(keys, jnp.arange(2**17)), dtype=np.float64).ravel()


def test_normal_moments(normal_sample):
    z = normal_sample
    n = z.size
    # Standard errors of the sample moments of N(0,1): mean 1/sqrt(n), variance
    # sqrt(2/n), skewness sqrt(6/n), excess kurtosis sqrt(24/n); tolerance 5 s.e.
    assert abs(z.mean()) < 5 / math.sqrt(n)
    assert abs(z.var() - 1) < 5 * math.sqrt(2 / n)
    skew = np.mean(z**3) / z.std() ** 3
    kurt = np.mean(z**4) / z.var() ** 2 - 3
    assert abs(skew) < 5 * math.sqrt(6 / n)
    assert abs(kurt) < 5 * math.sqrt(24 / n)


def test_normal_tails_and_cdf(normal_sample):
    z = normal_sample
    n = z.size
    # Two-sided tail probabilities against the exact normal tail, 5 binomial s.e.
    for threshold in (1.0, 2.0, 3.0, 4.0):
        p = math.erfc(threshold / math.sqrt(2))
        observed = np.mean(np.abs(z) > threshold)
        assert abs(observed - p) < 5 * math.sqrt(p * (1 - p) / n) + 1e-7, threshold
    # Kolmogorov-Smirnov distance: the 0.1% critical value is about 1.95 / sqrt(n).
    sample = np.sort(z[:200_000])
    cdf = 0.5 * (1 + np.vectorize(math.erf)(sample / math.sqrt(2)))
    grid = np.arange(1, sample.size + 1) / sample.size
    assert np.max(np.abs(cdf - grid)) < 1.95 / math.sqrt(sample.size)


def test_extreme_bits_give_finite_tails():
    # The smallest uniform the transform can produce bounds the tail; it must be finite.
    words = jnp.array([0, 0, 0xFFFFFFFF], dtype=jnp.uint32)
    extra = jnp.array([0, 0xFF, 0xFFFFFFFF], dtype=jnp.uint32)
    u = rng._unit_interval(words, extra, jnp.float32)
    assert np.all(np.asarray(u) > 0) and np.all(np.asarray(u) <= 1)
    radius = np.sqrt(-2 * np.log(np.asarray(u, np.float64)))
    assert 7.4 < radius.max() < 7.6


def test_polynomial_cosine_accuracy():
    turns = jnp.linspace(0, 1, 100_001, endpoint=False, dtype=jnp.float32)
    approx = np.asarray(rng._cos_turns(turns, jnp.float32), np.float64)
    exact = np.cos(2 * np.pi * np.asarray(turns, np.float64))
    assert np.max(np.abs(approx - exact)) < 1e-6


def test_noise_depends_only_on_key_and_counter():
    key_stream = rng.stream_key(7, rng.NOISE_STREAM)
    few = rng.run_keys(key_stream, 3, jnp.arange(5))
    many = rng.run_keys(key_stream, 3, jnp.arange(50))
    np.testing.assert_array_equal(few, many[:5])
    z_one = rng.standard_normal(many[4], 11, 6)
    z_batch = jax.vmap(lambda k: rng.standard_normal(k, 11, 6))(many)
    np.testing.assert_array_equal(z_one, z_batch[4])
    # different streams, cells and seeds give different keys
    assert not np.array_equal(rng.run_keys(key_stream, 4, jnp.arange(5)), few)
    assert not np.array_equal(rng.run_keys(rng.stream_key(7, rng.POLICY_STREAM), 3, jnp.arange(5)), few)
    assert not np.array_equal(rng.run_keys(rng.stream_key(8, rng.NOISE_STREAM), 3, jnp.arange(5)), few)
    # every bit of a 64-bit seed counts: seeds apart in their high words are other streams
    assert rng.seed_words(2**48 + 5) == (5, 2**16) and rng.seed_words(2**64 - 1) == (2**32 - 1, 2**32 - 1)
    keys = {np.asarray(rng.stream_key(seed, rng.NOISE_STREAM)).tobytes() for seed in (0, 2**32, 2**48, 2**63)}
    assert len(keys) == 4


@pytest.mark.parametrize("seed", [-1, 2**64, 1.5, "1", True])
def test_bad_seed(seed):
    with pytest.raises(ValueError, match="seed"):
        rng.seed_words(seed)


def test_a_folded_key_draws_independently_of_its_run_key():
    """At one counter, ``uniform`` and ``standard_normal`` share their blocks (``z**2 <=
    -2 log u``: strongly dependent); drawn from ``fold_in(key, 1)`` the uniforms are
    uncorrelated with the normals, ``|z|`` included: 2**16 runs at counter 7, tolerance
    5 standard errors of a correlation (``1 / sqrt(n)``)."""
    keys = rng.run_keys(rng.stream_key(9, rng.POLICY_STREAM), 0, jnp.arange(2**16))
    t = jnp.uint32(7)
    z = np.asarray(jax.vmap(lambda k: rng.standard_normal(k, t, 1)[0])(keys), np.float64)
    shared = np.asarray(jax.vmap(lambda k: rng.uniform(k, t, 1)[0])(keys), np.float64)
    folded = np.asarray(jax.vmap(lambda k: rng.uniform(rng.fold_in(k, 1), t, 1)[0])(keys), np.float64)
    assert np.corrcoef(shared, np.abs(z))[0, 1] < -0.5
    bound = 5 / math.sqrt(z.size)
    for normals in (z, np.abs(z), z**2):
        assert abs(np.corrcoef(folded, normals)[0, 1]) < bound
    assert abs(folded.mean() - 0.5) < 5 * math.sqrt(1 / 12 / z.size)
    # another datum, another key; never the run key itself
    one, two = (np.asarray(rng.fold_in(keys[0], d)) for d in (1, 2))
    assert one.dtype == np.uint32 and one.shape == (2,)
    assert not np.array_equal(one, two) and not np.array_equal(one, np.asarray(keys[0]))
    # data is one integer in [0, 2**32) (a traced one: an integer scalar), never rounded
    # or wrapped onto another's key
    traced = jax.jit(rng.fold_in)(keys[0], jnp.int32(1))
    np.testing.assert_array_equal(traced, one)
    for bad in (1.7, True, "1", -1, 2**32 + 1, np.int64(2**32 + 1), [1, 2], jnp.float32(1.2)):
        with pytest.raises(ArgumentError, match=r"^data must be") as caught:
            rng.fold_in(keys[0], bad)
        assert caught.value.argument == "data"
    with pytest.raises(ArgumentError, match=r"^data must be an integer scalar, got float32\[\]"):
        jax.jit(rng.fold_in)(keys[0], jnp.float32(1.0))
