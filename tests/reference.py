"""Plain NumPy re-implementations used as references by the tests (float64, one run)."""

import jax
import jax.numpy as jnp
import numpy as np

from jaxbandit import rng


def engine_noise(seed: int, instance_index: int, run: int, horizon: int, num_arms: int) -> np.ndarray:
    """``(horizon, K)`` standard normals the engine uses for this run (round t at row t-1)."""
    key = rng.run_keys(rng.stream_key(seed, rng.NOISE_STREAM), instance_index, run)
    with jax.enable_x64(True):
        draw = jax.vmap(lambda t: rng.standard_normal(key, t, num_arms, jnp.float64))
        return np.asarray(draw(jnp.arange(horizon)))


def initial_side_arm(sigma: np.ndarray, t: int) -> int:
    """Paper's initial rounds: at round t <= K play argmin_i sigma[i, t-1] (first on ties)."""
    column = sigma[:, t - 1]
    return int(np.flatnonzero(column == column.min())[0])


class WeightedEstimate:
    """Direct weighted sums (no compensation, no centring) for reference loops."""

    def __init__(self, sigma):
        self.sigma = np.asarray(sigma, np.float64)
        k = self.sigma.shape[0]
        self.counts = np.zeros(k, np.int64)
        self.weights = np.zeros(k)
        self.sums = np.zeros(k)

    def add(self, arm, values):
        self.counts[arm] += 1
        row = self.sigma[arm]
        seen = np.isfinite(row)
        self.weights[seen] += 1 / row[seen] ** 2
        self.sums[seen] += values[seen] / row[seen] ** 2

    @property
    def mean(self):
        return np.divide(self.sums, self.weights, out=np.zeros_like(self.sums), where=self.weights > 0)


def observe(mu, sigma, arm, z_t):
    row = sigma[arm]
    return np.where(np.isfinite(row), mu + np.where(np.isfinite(row), row, 0.0) * z_t, 0.0)


def ucb_n_arms(mu, sigma, horizon, z, alpha=1.0) -> np.ndarray:
    """Arm sequence of UCB-N (weighted estimator, paper's initial rounds) on noise ``z``."""
    mu, sigma = np.asarray(mu, np.float64), np.asarray(sigma, np.float64)
    k = mu.size
    est = WeightedEstimate(sigma)
    arms = np.zeros(horizon, np.int64)
    for t in range(1, horizon + 1):
        if t <= k:
            arm = initial_side_arm(sigma, t)
        else:
            index = est.mean + np.sqrt(2 * alpha * np.log(t) / est.weights)
            arm = int(np.argmax(index))
        arms[t - 1] = arm
        est.add(arm, observe(mu, sigma, arm, z[t - 1]))
    return arms


def greedy_arms(mu, sigma, horizon, z) -> np.ndarray:
    """Arm sequence of greedy on the weighted estimator, on noise ``z``."""
    mu, sigma = np.asarray(mu, np.float64), np.asarray(sigma, np.float64)
    est = WeightedEstimate(sigma)
    arms = np.zeros(horizon, np.int64)
    for t in range(1, horizon + 1):
        arm = initial_side_arm(sigma, t) if t <= mu.size else int(np.argmax(est.mean))
        arms[t - 1] = arm
        est.add(arm, observe(mu, sigma, arm, z[t - 1]))
    return arms


def arms_from_regret(regret_per_round: np.ndarray, gaps: np.ndarray) -> np.ndarray:
    """Recover the arm sequence from regret recorded every round (gaps must be distinct)."""
    increments = np.diff(np.concatenate([[0.0], regret_per_round]))
    return np.array([int(np.argmin(np.abs(gaps - inc))) for inc in increments])
