"""Plain NumPy re-implementations of the policies (float64), written independently of
the JAX code.  The tests feed them the engine's noise and compare arm sequences; the
benchmarks time ``ucb_n`` and ``lp_explore`` over many runs at once as their NumPy
baselines."""

import functools

import jax
import jax.numpy as jnp
import numpy as np
from scipy.optimize import linprog

from jaxbandit import rng


def engine_noise(seed: int, instance_index: int, run: int, horizon: int, num_arms: int) -> np.ndarray:
    """``(horizon, K)`` standard normals the engine uses for this run (round t at row t-1)."""
    key = rng.run_keys(rng.stream_key(seed, rng.NOISE_STREAM), instance_index, run)
    with jax.enable_x64(True):
        return np.asarray(_noise_rows(key, np.arange(horizon), num_arms))


@functools.partial(jax.jit, static_argnums=2)  # one program per horizon, not one per operation
def _noise_rows(key, rounds, num_arms):
    return jax.vmap(lambda t: rng.standard_normal(key, t, num_arms, jnp.float64))(rounds)


def engine_draws(family, seed: int, instance_index: int, run: int, horizon: int, num_arms: int) -> np.ndarray:
    """``(horizon, K)`` float64 numbers the engine draws for this run under the noise
    ``family`` (a :class:`jaxbandit.noise.NoiseFamily`; round t at row t-1): standard
    normals (Gaussian), unscaled Student's t draws, else the uniforms in (0, 1]."""
    key = rng.run_keys(rng.stream_key(seed, rng.NOISE_STREAM), instance_index, run)
    with jax.enable_x64(True):
        return np.asarray(_draw_rows(family.name, family.df, key, np.arange(horizon), num_arms))


@functools.partial(jax.jit, static_argnums=(0, 1, 4))
def _draw_rows(name, df, key, rounds, num_arms):
    if name == "gaussian":
        draw = lambda t: rng.standard_normal(key, t, num_arms, jnp.float64)  # noqa: E731
    elif name == "student_t":
        draw = lambda t: rng.student_t(key, t, num_arms, df, jnp.float64)  # noqa: E731
    else:
        draw = lambda t: rng.uniform(key, t, num_arms, jnp.float64)  # noqa: E731
    return jax.vmap(draw)(rounds)


def family_observe(family, mu, sigma, arm, draws):
    """The samples ``arm`` reveals under ``family`` from the round's ``draws`` (as
    :func:`engine_draws` gives them), 0 where it reveals nothing; vectorised like
    :func:`observe`.  Written from the families' definitions in the README."""
    row = sigma[arm]
    revealed = np.isfinite(row)
    scale = np.where(revealed, row, 0.0)
    if family.name == "bernoulli":
        values = (draws <= mu).astype(np.float64)  # a 1 with probability mu_j
    elif family.name == "gaussian":
        values = mu + scale * draws
    elif family.name == "uniform":
        values = mu + scale * ((2 * draws - 1) * np.sqrt(3))  # variance sigma**2
    elif family.name == "rademacher":
        values = mu + scale * np.where(draws > 0.5, 1.0, -1.0)
    elif family.name == "student_t":
        values = mu + scale * (draws * np.sqrt((family.df - 2) / family.df))  # variance sigma**2
    else:
        raise ValueError(family)
    return np.where(revealed, values, 0.0)


def initial_side_arm(sigma: np.ndarray, t: int) -> int:
    """Paper's initial rounds: at round t <= K play argmin_i sigma[i, t-1] (first on ties)."""
    column = sigma[:, t - 1]
    return int(np.flatnonzero(column == column.min())[0])


class WeightedEstimate:
    """Direct weighted sums (no compensation, no centring) for reference loops: of one
    run (arrays ``(K,)``), or with ``runs``, of that many runs at once (``(runs, K)``)."""

    def __init__(self, sigma, runs=None):
        self.sigma = np.asarray(sigma, np.float64)
        k = self.sigma.shape[0]
        shape = (k,) if runs is None else (runs, k)
        self.counts = np.zeros(shape, np.int64)
        self.weights = np.zeros(shape)
        self.sums = np.zeros(shape)
        # Row i is what playing arm i adds: an entry it does not reveal has an infinite
        # variance, so it adds no weight, and a finite value divided by it adds zero.
        self._variance = self.sigma**2
        self.precision = precision_matrix(self.sigma)

    def add(self, arm, values):
        """Add the samples ``arm`` reveals: an arm and ``values`` of shape ``(K,)``, or
        ``(runs,)`` arms and ``(runs, K)`` values.  Unrevealed entries must be finite
        (``observe`` gives 0) and are ignored."""
        arm = np.asarray(arm)
        self.counts[(*np.indices(arm.shape), arm)] += 1
        self.weights += self.precision[arm]
        self.sums += values / self._variance[arm]

    @property
    def mean(self):
        return np.divide(self.sums, self.weights, out=np.zeros_like(self.sums), where=self.weights > 0)


def precision_matrix(sigma):
    """``1 / sigma**2``: 0 where sigma is inf (and inf where it is 0)."""
    with np.errstate(divide="ignore"):
        return 1 / np.asarray(sigma, np.float64) ** 2


def observe(mu, sigma, arm, z_t):
    """The samples ``arm`` reveals with standard normals ``z_t`` (0 where it reveals
    nothing); vectorised like ``WeightedEstimate.add``."""
    row = sigma[arm]
    return np.where(np.isfinite(row), mu + np.where(np.isfinite(row), row, 0.0) * z_t, 0.0)


def one_run(z):
    """``noise`` for one run from its ``(horizon, K)`` normals (rows are rounds 1, 2, ...)."""
    return lambda t: z[None, t - 1]


def ucb_n(mu, sigma, horizon, runs, noise, alpha=1.0, family=None) -> np.ndarray:
    """``(runs, horizon)`` arms of UCB-N (weighted estimator, paper's initial rounds),
    the runs as arrays and a Python loop over rounds; ``noise(t)`` gives round t's
    ``(runs, K)`` standard normals, or with a noise ``family`` its draws
    (:func:`family_observe`)."""
    mu, sigma = np.asarray(mu, np.float64), np.asarray(sigma, np.float64)
    est = WeightedEstimate(sigma, runs)
    # Fewer passes over the runs than ``observe`` and ``est.mean`` (this loop is also
    # benchmarks/throughput.py's NumPy baseline), with the same values: a play's samples
    # where revealed (mu elsewhere, which ``add`` ignores), and the means once the
    # initial rounds have observed every arm.
    noise_sd = np.where(np.isfinite(sigma), sigma, 0.0)
    arms = np.zeros((runs, horizon), np.int64)
    for t in range(1, horizon + 1):
        if t <= mu.size:
            arm = np.full(runs, initial_side_arm(sigma, t))
        else:
            index = est.sums / est.weights + np.sqrt(2 * alpha * np.log(t) / est.weights)
            arm = np.argmax(index, axis=-1)
        arms[:, t - 1] = arm
        if family is None:
            est.add(arm, mu + noise_sd[arm] * noise(t))
        else:
            est.add(arm, family_observe(family, mu, sigma, arm, noise(t)))
    return arms


def ucb_n_arms(mu, sigma, horizon, z, alpha=1.0, family=None) -> np.ndarray:
    """Arm sequence of UCB-N on one run's noise ``z`` (the draws of ``family``, if given)."""
    return ucb_n(mu, sigma, horizon, 1, one_run(z), alpha, family)[0]


def ucb_arms(mu, sigma, horizon, z, alpha=1.0) -> np.ndarray:
    """Arm sequence of UCB with own-arm feedback on one run's noise ``z``: each arm
    once, then ``argmax mean_i + sigma_ii sqrt(2 alpha log t / N_i)``, ``mean_i`` the
    average of arm i's own rewards."""
    mu, sigma = np.asarray(mu, np.float64), np.asarray(sigma, np.float64)
    sums, counts = np.zeros(mu.size), np.zeros(mu.size)
    arms = np.zeros(horizon, np.int64)
    for t in range(1, horizon + 1):
        if t <= mu.size:
            arm = t - 1
        else:
            arm = int(np.argmax(sums / counts + np.diagonal(sigma) * np.sqrt(2 * alpha * np.log(t) / counts)))
        arms[t - 1] = arm
        sums[arm] += observe(mu, sigma, arm, z[t - 1])[arm]
        counts[arm] += 1
    return arms


def greedy_arms(mu, sigma, horizon, z, family=None) -> np.ndarray:
    """Arm sequence of greedy on the weighted estimator, on noise ``z`` (the draws of
    ``family``, if given)."""
    mu, sigma = np.asarray(mu, np.float64), np.asarray(sigma, np.float64)
    est = WeightedEstimate(sigma)
    arms = np.zeros(horizon, np.int64)
    for t in range(1, horizon + 1):
        arm = initial_side_arm(sigma, t) if t <= mu.size else int(np.argmax(est.mean))
        arms[t - 1] = arm
        if family is None:
            est.add(arm, observe(mu, sigma, arm, z[t - 1]))
        else:
            est.add(arm, family_observe(family, mu, sigma, arm, z[t - 1]))
    return arms


def arms_from_regret(regret_per_round: np.ndarray, gaps: np.ndarray) -> np.ndarray:
    """Recover the arm sequence from regret recorded every round (gaps must be distinct)."""
    increments = np.diff(np.concatenate([[0.0], regret_per_round]))
    return np.array([int(np.argmin(np.abs(gaps - inc))) for inc in increments])


def lower_bound_problem(mean):
    """The paper's LP at ``mean`` (arms on the last axis): ``(gaps, b, tie)``.

    The LP minimises ``gaps @ c`` subject to ``W^T c >= b`` and ``c >= 0``, with
    ``b_i = 2 / gaps_i^2`` and, for the best arm, ``2 / min positive gap^2``; ``tie``:
    the best mean is not unique (no such LP).
    """
    top = np.max(mean, axis=-1, keepdims=True)
    tie = np.sum(mean == top, axis=-1) > 1
    gaps = top - mean
    positive = gaps > 0
    min_gap = np.min(np.where(positive, gaps, np.inf), axis=-1, keepdims=True)
    b = np.where(positive, 2 / np.where(positive, gaps, 1.0) ** 2, 2 / min_gap**2)
    return gaps, b, tie


def solve_highs(gaps, b, precision):
    """One ``scipy.optimize.linprog`` (HiGHS) call: the LP of ``lower_bound_problem``."""
    return linprog(gaps, A_ub=-precision.T, b_ub=-b, bounds=(0, None), method="highs")


def lower_bound_highs(mean, precision, canonical=True):
    """c* of the paper's LP at ``mean`` with HiGHS; ``precision = 1 / sigma**2``.

    Stage 1 minimises ``Delta @ c``; with ``canonical``, stage 2 minimises ``sum c``
    among the optima (the canonical solution, which the policy computes); without, the
    answer is stage 1's optimum (one ``linprog`` call: the same c* wherever the optimum
    is unique).  Returns ``(c, ok)``; ``ok`` is False on a tie for the best mean or a
    solver failure.
    """
    gaps, b, tie = lower_bound_problem(np.asarray(mean, np.float64))
    if tie:
        return None, False
    first = solve_highs(gaps, b, precision)
    if first.status != 0:
        return None, False
    if not canonical:
        return first.x, True
    optimum = first.fun
    a2 = np.vstack([-precision.T, gaps])
    b2 = np.append(-b, optimum + 1e-9 * max(1.0, abs(optimum)))
    second = linprog(np.ones_like(gaps), A_ub=a2, b_ub=b2, bounds=(0, None), method="highs")
    if second.status != 0:
        return None, False
    return second.x, True


def allocation_arm(counts, target, mean, rule="largest_deficit"):
    """Case C's arm, given the LP's targets ``s c*``: the best arm if none is below its
    target, else the most deficient (smallest ``N_i / target_i``, the first within a
    relative 1e-5 of it) or, with ``rule="first_deficient"``, the first below."""
    deficient = counts < target
    if not deficient.any():
        return int(np.argmax(mean))
    if rule == "largest_deficit":
        ratio = np.where(deficient, counts / np.where(deficient, target, 1.0), np.inf)
        return int(np.flatnonzero(ratio <= ratio.min() * (1 + 1e-5))[0])
    return int(np.flatnonzero(deficient)[0])


CASES = ("initial", "A", "B", "C")  # lp_explore's cases, by code


def lp_explore(mu, sigma, horizon, runs, noise, alpha=4.5, gamma=0.5, rule="largest_deficit", canonical=True):
    """The paper's Algorithm 1 (NumPy + HiGHS) for ``runs`` runs at once.

    Written from the paper's pseudocode (with the Case B typo fixed) independently of
    the JAX policy; corner cases follow the policy's documented fallbacks.  The runs are
    arrays and the rounds a Python loop; each run in Case C solves its LP with
    ``lower_bound_highs`` (``canonical``: two ``linprog`` calls, as the policy's
    answer; without, one).  ``noise(t)`` gives round t's ``(runs, K)`` standard normals.

    Returns ``(arms, cases)``, both ``(runs, horizon)``; a case is an index into ``CASES``.
    """
    mu, sigma = np.asarray(mu, np.float64), np.asarray(sigma, np.float64)
    k = mu.size
    est = WeightedEstimate(sigma, runs)
    best_observer = np.argmin(sigma, axis=0)
    sbar_squared = np.max(np.min(sigma, axis=0)) ** 2
    exploration_rounds = np.zeros(runs)  # Case B and C rounds so far
    arms = np.zeros((runs, horizon), np.int64)
    cases = np.zeros((runs, horizon), np.int8)
    for t in range(1, horizon + 1):
        if t <= k:
            arm, case = np.full(runs, best_observer[t - 1]), CASES.index("initial")
        else:
            mean, zeta = est.mean, est.weights
            s = 4 * alpha * np.log(t)
            _, b, tie = lower_bound_problem(mean)
            case_a = ~tie & np.all(zeta >= s * b, axis=-1)
            threshold = np.power(exploration_rounds, gamma) / (2 * sbar_squared) / k
            case_b = ~case_a & (tie | (np.min(zeta, axis=-1) < threshold))
            case = np.where(case_a, CASES.index("A"), np.where(case_b, CASES.index("B"), CASES.index("C")))
            # Case B, and Case C where the LP fails: the best observer of the least observed arm
            arm = np.where(case_a, np.argmax(mean, axis=-1), best_observer[np.argmin(zeta, axis=-1)])
            for r in np.flatnonzero(case == CASES.index("C")):
                c, ok = lower_bound_highs(mean[r], est.precision, canonical)
                if ok:
                    arm[r] = allocation_arm(est.counts[r], s * c, mean[r], rule)
            exploration_rounds += ~case_a
        arms[:, t - 1] = arm
        cases[:, t - 1] = case
        est.add(arm, observe(mu, sigma, arm, noise(t)))
    return arms, cases


def lp_explore_arms(mu, sigma, horizon, z, alpha=4.5, gamma=0.5, rule="largest_deficit"):
    """Arm sequence of Algorithm 1 on one run's noise ``z``, and each round's case
    (a name in ``CASES``)."""
    arms, cases = lp_explore(mu, sigma, horizon, 1, one_run(z), alpha, gamma, rule)
    return arms[0], [CASES[c] for c in cases[0]]


def ossb_arms(mu, sigma, horizon, z, epsilon=0.0, gamma=0.0, ratio_tolerance=1e-5):
    """Arm sequence of OSSB(epsilon, gamma) with the paper's LP on noise ``z`` (NumPy + HiGHS).

    Written from OSSB's pseudocode (Combes et al. 2017, Algorithm 1) with the
    side-observation reading documented in ``jaxbandit.policies.ossb``, independently of
    the JAX policy: exploitation when ``zeta >= (1 + gamma) log t b``; else ``s += 1``,
    estimation (best observer of ``argmin zeta``) when ``min zeta <= epsilon s``, else
    ``argmin N_i / c_i`` over ``c_i > 0``.  Returns the arms and
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
            _, b, tie = lower_bound_problem(mean)
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
                    c, ok = lower_bound_highs(mean, est.precision)
                    if not ok:
                        arm = estimation_arm
                    else:
                        eligible = c > 0
                        if not eligible.any():
                            arm = int(np.argmax(mean))
                        else:
                            ratio = np.where(eligible, est.counts / np.where(eligible, c, 1.0), np.inf)
                            arm = int(np.flatnonzero(ratio <= ratio.min() * (1 + ratio_tolerance))[0])
        arms[t - 1] = arm
        branches.append(branch)
        est.add(arm, observe(mu, sigma, arm, z[t - 1]))
    return arms, branches
