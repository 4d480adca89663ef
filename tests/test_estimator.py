"""The weighted ML estimator (paper eq. (1)) against a plain NumPy loop."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxbandit import estimator, rng

INF = np.inf


def _numpy_estimate(arms, values, sigma):
    """Direct eq. (1): weighted sums over the observed samples, float64 (no sigma = 0)."""
    k = sigma.shape[0]
    weights = np.zeros(k)
    sums = np.zeros(k)
    exact = np.full(k, np.nan)
    for arm, x in zip(arms, values):
        for j in range(k):
            if sigma[arm, j] == 0 and np.isnan(exact[j]):
                exact[j] = x[j]
            elif 0 < sigma[arm, j] < INF:
                weights[j] += 1 / sigma[arm, j] ** 2
                sums[j] += x[j] / sigma[arm, j] ** 2
    with np.errstate(invalid="ignore", divide="ignore"):
        mean = np.where(weights > 0, sums / weights, 0.0)
    mean = np.where(np.isnan(exact), mean, exact)
    zeta = np.where(np.isnan(exact), weights, INF)
    return mean, zeta


def _run_estimator(arms, values, sigma, dtype):
    precision = 1.0 / jnp.square(jnp.asarray(sigma, dtype))

    def step(state, inputs):
        t, arm, x = inputs
        return estimator.step(state, t + 1, arm, x, precision[arm]), None

    inputs = (jnp.arange(len(arms)), jnp.asarray(arms), jnp.asarray(values, dtype))
    state, _ = jax.lax.scan(step, estimator.init(sigma.shape[0], dtype), inputs)
    return state


def test_matches_numpy_loop_on_same_draws():
    gen = np.random.default_rng(0)
    sigma = np.array([[1.0, INF, 0.5, INF], [2.0, 0.7, INF, INF], [INF, INF, 1.5, 3.0], [0.3, INF, INF, 1.0]])
    mu = np.array([0.3, -1.0, 2.0, 0.1])
    arms = gen.integers(0, 4, size=400)
    values = mu + np.where(np.isfinite(sigma[arms]), sigma[arms], 0.0) * gen.standard_normal((400, 4))
    values = np.where(np.isfinite(sigma[arms]), values, 0.0)
    state = _run_estimator(arms, values, sigma, jnp.float32)
    mean, zeta = _numpy_estimate(arms, values, sigma)
    np.testing.assert_allclose(estimator.mean(state), mean, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(estimator.weighted_counts(state), zeta, rtol=1e-6)
    np.testing.assert_array_equal(state.counts, np.bincount(arms, minlength=4))


def test_unobserved_arms_are_zero_not_nan():
    sigma = np.array([[1.0, INF], [INF, 1.0]])
    state = _run_estimator(np.array([0, 0]), np.array([[1.0, 0.0], [3.0, 0.0]]), sigma, jnp.float32)
    np.testing.assert_array_equal(estimator.mean(state), [2.0, 0.0])
    np.testing.assert_array_equal(estimator.weighted_counts(state), [2.0, 0.0])
    # an unobserved entry may hold anything, inf and NaN included, once its arm has samples too
    arms, values = np.array([1, 0, 0]), np.array([[0.0, 2.0], [1.0, 0.0], [3.0, 0.0]])
    clean = _run_estimator(arms, values, sigma, jnp.float32)
    dirty = _run_estimator(arms, np.where(values == 0.0, [[np.inf, np.inf], [np.inf, np.nan], [-np.inf, np.nan]], values), sigma, jnp.float32)
    for read in (estimator.mean, estimator.weighted_counts):
        np.testing.assert_array_equal(read(dirty), read(clean))
    np.testing.assert_array_equal(estimator.mean(clean), [2.0, 2.0])


def test_noise_free_observation_is_the_sigma_to_zero_limit():
    sigma = np.array([[0.0, 1.0], [1.0, 1.0]])
    arms = np.array([1, 1, 0, 1])
    values = np.array([[5.0, 1.0], [7.0, 2.0], [4.2, 3.0], [9.0, 4.0]])
    state = _run_estimator(arms, values, sigma, jnp.float32)
    mean, zeta = estimator.mean(state), estimator.weighted_counts(state)
    assert np.all(np.isfinite(mean)) and np.all(np.isfinite(zeta))
    assert float(mean[0]) == pytest.approx(4.2, abs=1e-6)  # exact sample wins over noisy ones
    assert float(zeta[0]) >= estimator.max_weight(np.float32)
    assert float(mean[1]) == pytest.approx(2.5)
    # the same as a tiny sigma, numerically
    tiny = _run_estimator(arms, values, np.array([[1e-6, 1.0], [1.0, 1.0]]), jnp.float32)
    assert float(estimator.mean(tiny)[0]) == pytest.approx(4.2, abs=1e-4)


def test_float32_accurate_over_ten_million_rounds():
    """10**7 rounds, means ~1000, three noise levels: the float32 estimator vs eq. (1) in
    float64 on the same draws.

    The statistical error of the estimate is ~5e-4 here.  Float32 must add nothing beyond
    the rounding of the final value (two float32 spacings of |mu|, ~1e-4), and zeta must
    be exact to 1e-6 relative (a plain float32 running sum stalls at 2**24 and a plain
    running mean drifts by ~1e-2).
    """
    num_rounds = 10_000_000
    sigma = np.array([[1.0, 3.0, INF], [INF, 0.5, 2.0], [0.8, INF, 1.0]])
    mu = np.array([1000.0, -2000.0, 1234.5])
    block = 1000  # rounds whose draws are made at once (the same draws as one at a time)
    with jax.enable_x64(True):
        key = rng.run_keys(rng.stream_key(5, 0), 0, 0)

        def step(state32, inputs):
            t, arm, x, p = inputs
            return estimator.step(state32, t + 1, arm, x, p), None

        def rounds(carry, first):
            state32, (weighted_sum, weights) = carry
            t = first + jnp.arange(block)
            z = jax.vmap(lambda t: rng.standard_normal(key, t, 3, jnp.float64))(t)
            arm = (t * 7 // 3) % 3
            rows = jnp.asarray(sigma)[arm]
            x = jnp.where(jnp.isfinite(rows), jnp.asarray(mu)[None, :] + jnp.where(jnp.isfinite(rows), rows, 0.0) * z, 0.0)
            p64 = 1.0 / jnp.square(rows)
            # Unrolled: the same steps in the same order, fewer loop iterations to run.
            state32 = jax.lax.scan(step, state32, (t, arm, x.astype(jnp.float32), p64.astype(jnp.float32)), unroll=8)[0]
            # The float64 reference is eq. (1) itself, summed a block at a time: the
            # float64 estimator's value up to float64 rounding, far below a float32
            # spacing, without a second chain of sequential steps beside the float32 one.
            return (state32, (weighted_sum + jnp.sum(p64 * x, axis=0), weights + jnp.sum(p64, axis=0))), None

        initial = (estimator.init(3, jnp.float32), (jnp.zeros(3), jnp.zeros(3)))
        run = jax.jit(lambda: jax.lax.scan(rounds, initial, jnp.arange(0, num_rounds, block))[0])
        state32, (weighted_sum, weights) = run()
        mean32 = np.asarray(estimator.mean(state32), np.float64)
        mean64 = np.asarray(weighted_sum / weights)
        zeta32 = np.asarray(estimator.weighted_counts(state32), np.float64)
        zeta64 = np.asarray(weights)
    spacing = np.spacing(np.abs(mu).astype(np.float32)).astype(np.float64)
    assert np.all(np.abs(mean32 - mean64) <= 2 * spacing), (mean32, mean64)
    np.testing.assert_allclose(zeta32, zeta64, rtol=1e-6)
    assert np.max(np.abs(mean64 - mu)) < 5 * np.max(1 / np.sqrt(zeta64))


def test_consolidation_schedule():
    """Due after 1, 2, 4, ..., 128 rounds and every 256 after; next_* agrees with due."""
    rounds = np.arange(0, 3000)
    due = np.asarray(jax.vmap(estimator.consolidation_due)(jnp.asarray(rounds)))
    expected = {1, 2, 4, 8, 16, 32, 64, 128} | set(range(256, 3000, 256))
    assert set(rounds[due]) == expected
    following = np.asarray(jax.vmap(estimator.next_consolidation)(jnp.asarray(rounds)))
    for n, nxt in zip(rounds[:-300], following[:-300]):
        assert nxt == min(m for m in expected if m > n)


def test_consolidate_keeps_the_estimate_and_recentres():
    """Folding the recent sums changes mean and zeta by at most a rounding, and leaves
    the consolidated sum a small residual around the new centre."""
    gen = np.random.default_rng(3)
    sigma = np.array([[1.0, 2.0, INF], [INF, 0.5, 1.0], [0.7, INF, 3.0]])
    precision = 1.0 / jnp.square(jnp.asarray(sigma, jnp.float32))
    state = estimator.init(3, jnp.float32)
    for _ in range(50):
        arm = int(gen.integers(3))
        x = jnp.asarray(1000.0 + gen.standard_normal(3), jnp.float32)
        state = estimator.update(state, arm, x, precision[arm])
    folded = estimator.consolidate(state)
    np.testing.assert_allclose(estimator.mean(folded), estimator.mean(state), rtol=2e-7)
    np.testing.assert_allclose(estimator.weighted_counts(folded), estimator.weighted_counts(state), rtol=1e-7)
    np.testing.assert_allclose(folded.shift, estimator.mean(state), rtol=2e-7)
    # What is left around the new centre is rounding, not data.
    assert np.all(np.abs(folded.recent_sum) <= 1e-3 * np.asarray(estimator.weighted_counts(folded)))
    assert np.all(np.abs(folded.recent_zeta) <= 1e-6 * np.asarray(estimator.weighted_counts(folded)))


def test_what_a_policy_of_your_own_builds_on_refuses_bad_shapes():
    """The estimator's constructors, for a policy or a unit test of your own: the
    package's error naming the argument, not JAX's about shapes."""
    from jaxbandit import ArgumentError

    with pytest.raises(ArgumentError, match=r"num_arms must be an integer >= 1, got float 2.5"):
        estimator.init(2.5)
    with pytest.raises(ArgumentError, match=r"num_arms must be an integer >= 1, got -1"):
        estimator.init(-1)
    with pytest.raises(ArgumentError, match=r"counts, zeta and mean must be \(num_arms,\) arrays of one length, got shapes counts \(2,\), zeta \(3,\), mean \(2,\)"):
        estimator.from_estimates([1, 2], [1.0, 2.0, 3.0], [0.0, 0.0])
    state = estimator.from_estimates([1, 2], [1.0, 2.0], [0.5, 0.25])
    np.testing.assert_array_equal(estimator.mean(state), np.float32([0.5, 0.25]))
