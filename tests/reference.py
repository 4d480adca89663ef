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


def lower_bound_highs(mean, sigma):
    """Canonical c* of the paper's LP at ``mean`` with HiGHS (scipy.optimize.linprog).

    Stage 1 minimises ``Delta @ c``; stage 2 minimises ``sum c`` among the optima
    (the canonical solution).  Returns ``(c, ok)``; ``ok`` is False on a tie for the best
    mean or a solver failure.
    """
    from scipy.optimize import linprog

    mean = np.asarray(mean, np.float64)
    sigma = np.asarray(sigma, np.float64)
    best = int(np.argmax(mean))
    if np.sum(mean == mean[best]) > 1:
        return None, False
    gaps = mean[best] - mean
    min_gap = np.min(gaps[gaps > 0])
    with np.errstate(divide="ignore"):
        precision = 1.0 / sigma**2
    rhs = np.where(np.arange(mean.size) == best, 2 / min_gap**2, 2 / np.where(gaps > 0, gaps, 1.0) ** 2)
    a_ub, b_ub = -precision.T, -rhs  # W^T c >= b
    first = linprog(gaps, A_ub=a_ub, b_ub=b_ub, bounds=(0, None), method="highs")
    if first.status != 0:
        return None, False
    optimum = first.fun
    a2 = np.vstack([a_ub, gaps])
    b2 = np.append(b_ub, optimum + 1e-9 * max(1.0, abs(optimum)))
    second = linprog(np.ones_like(gaps), A_ub=a2, b_ub=b2, bounds=(0, None), method="highs")
    if second.status != 0:
        return None, False
    return second.x, True


def lp_explore_arms(mu, sigma, horizon, z, alpha=4.5, gamma=0.5, rule="largest_deficit"):
    """Arm sequence of the paper's Algorithm 1 on noise ``z`` (NumPy + HiGHS, one run).

    Written from the paper's pseudocode (with the Case B typo fixed) independently of
    the JAX policy; corner cases follow the policy's documented fallbacks.
    """
    mu, sigma = np.asarray(mu, np.float64), np.asarray(sigma, np.float64)
    k = mu.size
    est = WeightedEstimate(sigma)
    best_observer = np.argmin(sigma, axis=0)
    sbar_squared = np.max(np.min(sigma, axis=0)) ** 2
    exploration_rounds = 0
    arms = np.zeros(horizon, np.int64)
    cases = []
    for t in range(1, horizon + 1):
        if t <= k:
            arm, case = int(best_observer[t - 1]), "initial"
        else:
            mean, zeta = est.mean, est.weights
            s = 4 * alpha * np.log(t)
            top = np.max(mean)
            tie = np.sum(mean == top) > 1
            if not tie:
                gaps = top - mean
                min_gap = np.min(gaps[gaps > 0])
                b = np.where(gaps > 0, 2 / np.where(gaps > 0, gaps, 1.0) ** 2, 2 / min_gap**2)
            if not tie and np.all(zeta >= s * b):
                arm, case = int(np.argmax(mean)), "A"
            elif tie or np.min(zeta) < exploration_rounds**gamma / (2 * sbar_squared) / k:
                arm, case = int(best_observer[np.argmin(zeta)]), "B"
                exploration_rounds += 1
            else:
                c, ok = lower_bound_highs(mean, sigma)
                exploration_rounds += 1
                case = "C"
                if not ok:
                    arm = int(best_observer[np.argmin(zeta)])
                else:
                    target = s * c
                    deficient = est.counts < target
                    if not deficient.any():
                        arm = int(np.argmax(mean))
                    elif rule == "largest_deficit":
                        ratio = np.where(deficient, est.counts / np.where(deficient, target, 1.0), np.inf)
                        arm = int(np.flatnonzero(ratio <= ratio.min() * (1 + 1e-5))[0])
                    else:
                        arm = int(np.flatnonzero(deficient)[0])
        arms[t - 1] = arm
        cases.append(case)
        est.add(arm, observe(mu, sigma, arm, z[t - 1]))
    return arms, cases


def ossb_arms(mu, sigma, horizon, z, epsilon=0.0, gamma=0.0, positive_tolerance=1e-4, ratio_tolerance=1e-5):
    """Arm sequence of OSSB(epsilon, gamma) with the paper's LP on noise ``z`` (NumPy + HiGHS).

    Written from OSSB's pseudocode (Combes et al. 2017, Algorithm 1) with the
    side-observation reading documented in ``jaxbandit.policies.ossb``, independently of
    the JAX policy: exploitation when ``zeta >= (1 + gamma) log t b``; else ``s += 1``,
    estimation (best observer of ``argmin zeta``) when ``min zeta <= epsilon s``, else
    ``argmin N_i / c_i`` over ``c_i > positive_tolerance * max c``.  Returns the arms and
    the branch of each round.
    """
    mu, sigma = np.asarray(mu, np.float64), np.asarray(sigma, np.float64)
    k = mu.size
    est = WeightedEstimate(sigma)
    best_observer = np.argmin(sigma, axis=0)
    counter = 0
    arms = np.zeros(horizon, np.int64)
    branches = []
    for t in range(1, horizon + 1):
        if t <= k:
            arm, branch = int(best_observer[t - 1]), "initial"
        else:
            mean, zeta = est.mean, est.weights
            scale = (1 + gamma) * np.log(t)
            top = np.max(mean)
            tie = np.sum(mean == top) > 1
            if not tie:
                gaps = top - mean
                min_gap = np.min(gaps[gaps > 0])
                b = np.where(gaps > 0, 2 / np.where(gaps > 0, gaps, 1.0) ** 2, 2 / min_gap**2)
            if not tie and np.all(zeta >= scale * b):
                arm, branch = int(np.argmax(mean)), "exploitation"
            else:
                counter += 1
                estimation_arm = int(best_observer[np.argmin(zeta)])
                if tie:
                    arm, branch = estimation_arm, "tie"
                elif np.min(zeta) <= epsilon * counter:
                    arm, branch = estimation_arm, "estimation"
                else:
                    branch = "exploration"
                    c, ok = lower_bound_highs(mean, sigma)
                    if not ok:
                        arm = estimation_arm
                    else:
                        eligible = c > positive_tolerance * np.max(c)
                        if not eligible.any():
                            arm = int(np.argmax(mean))
                        else:
                            ratio = np.where(eligible, est.counts / np.where(eligible, c, 1.0), np.inf)
                            arm = int(np.flatnonzero(ratio <= ratio.min() * (1 + ratio_tolerance))[0])
        arms[t - 1] = arm
        branches.append(branch)
        est.add(arm, observe(mu, sigma, arm, z[t - 1]))
    return arms, branches
