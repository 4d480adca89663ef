"""Baselines from the literature: ucb_maxn, eps_greedy_lp, ucb_lp, oracle_etc.

Per policy: the decision rule on hand-built states, the arm sequence of a plain NumPy
loop fed the engine's noise (and policy uniforms), bad parameters; then statistical
sanity checks, each stating its sample size and tolerance.
"""

import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from scipy.optimize import linprog

import jaxbandit as jb
from jaxbandit import estimator, instances, rng
from jaxbandit.base import Context
from jaxbandit.compile_options import Program
from jaxbandit.policies import lp_baselines
from jaxbandit.policies.lp_baselines import eps_greedy_lp, ucb_lp
from jaxbandit.policies.ucb import ucb_n_index
from jaxbandit.policies.ucb_maxn import maxn_arm, ucb_maxn
from tests import reference

INF = np.inf
# Distinct gaps (the arm played can be read off the per-round regret), a mix of graph
# edges and weighted side observations, and an arm observed better by another arm.
GENERAL = jb.Instance(
    [0.9, 0.5, 0.2, 0.65, 0.35],
    [
        [1.0, INF, 0.5, INF, 2.0],
        [2.0, 0.7, INF, 1.5, INF],
        [INF, 0.4, 1.5, 3.0, INF],
        [0.3, INF, INF, 1.0, 0.8],
        [INF, INF, 1.2, INF, 1.0],
    ],
)
HORIZON, RUNS, SEED = 300, 3, 11
# Every float32 simulation in this file has K = 5, 200 runs and 300 recording times,
# so that each policy's engine compiles once for the file (the horizon and the
# policies' parameters are traced); the NumPy loops follow the first RUNS runs.
ENGINE_RUNS, NUM_TIMES = 200, 300
# The cover LP at K = 5 in float32, compiled once for every test that solves it (with
# the host's compiler options, as the LP tests' programs: the same bits, less compile).
SOLVE_COVER = Program(lp_baselines.solve_cover)


def _times(first: int, last: int) -> np.ndarray:
    """NUM_TIMES recording rounds from ``first`` to ``last``, evenly spread."""
    return np.unique(np.linspace(first, last, NUM_TIMES).round().astype(np.int64))


def _simulate(policy, inst, horizon, seed, times=None) -> jb.Result:
    """``ENGINE_RUNS`` float32 runs of ``policy`` recorded at NUM_TIMES rounds (by
    default spread over the whole horizon)."""
    times = _times(1, horizon) if times is None else times
    assert len(times) == NUM_TIMES and inst.num_arms == 5
    return jb.simulate(policy, inst, horizon, ENGINE_RUNS, seed, times=times)


def _context(inst: jb.Instance, params: dict, horizon: int = 100, dtype=jnp.float32) -> Context:
    sigma = jnp.asarray(inst.sigma, dtype)
    return Context(
        sigma=sigma,
        precision=1.0 / jnp.square(sigma),
        horizon=jnp.int32(horizon),
        true_mean=jnp.asarray(inst.mu, dtype),
        params={k: jnp.asarray(v, dtype) for k, v in params.items()},
    )


def _stats(inst: jb.Instance, plays: list[tuple[int, list[float]]]) -> estimator.EstimatorState:
    """Estimator after the given (arm, observed values) rounds."""
    sigma = jnp.asarray(inst.sigma, jnp.float32)
    precision = 1.0 / jnp.square(sigma)
    stats = estimator.init(inst.num_arms, jnp.float32)
    for arm, values in plays:
        stats = estimator.update(stats, arm, jnp.asarray(values, jnp.float32), precision[arm])
    return stats


# --------------------------------------------------------------------------- bad input
@pytest.mark.parametrize(
    "name, params, message",
    [
        ("ucb_maxn", {"alpha": 0.0}, "alpha must be a finite number > 0, got 0.0"),
        ("ucb_maxn", {"alpha": -1}, "alpha must be a finite number > 0, got -1.0"),
        ("ucb_maxn", {"alpha": float("nan")}, "alpha must be a finite number > 0, got nan"),
        ("ucb_maxn", {"alpha": "big"}, "alpha must be a number > 0, got 'big'"),
        ("eps_greedy_lp", {"c": 0}, "c must be a finite number > 0, got 0.0"),
        ("eps_greedy_lp", {"d": -0.5}, "d must be a finite number > 0, got -0.5"),
        ("ucb_lp", {"c": float("inf")}, "c must be a finite number > 0, got inf"),
        ("ucb_lp", {"alpha": 0}, "alpha must be a finite number > 0, got 0.0"),
        ("ucb_lp", {"d": 0.1}, "got unknown parameter(s) ['d']"),
    ],
)
def test_bad_parameters_are_rejected(name, params, message):
    with pytest.raises(ValueError) as info:
        jb.policies.make(name, **params)
    assert message in str(info.value)


# ------------------------------------------------------------------------ decision rules
# Graph on 3 arms: playing 0 reveals {0, 1}; 1 reveals {1}; 2 reveals {0, 2}.
TRIANGLE = instances.graph([0.0, 0.0, 0.0], [[0, 1, 0], [0, 0, 0], [1, 0, 0]], sigma=1.0)


def _maxn(plays, t=10):
    stats = _stats(TRIANGLE, plays)
    arm, target = maxn_arm(stats, jnp.asarray(TRIANGLE.precision, jnp.float32), jnp.int32(t), jnp.float32(1.0))
    return int(arm), int(target)


def test_ucb_maxn_plays_the_best_observer_of_the_index_winner():
    # Arm 1 is seen once (zeta = 1), arm 0 nine times: the index picks 1 (0.3 + 2.15 vs
    # 0.5 + 0.72); among its observers {0, 1} arm 0 has the larger mean: play 0.
    assert _maxn([(0, [0.5, 0.3, 0.0])] + [(2, [0.5, 0.0, -1.0])] * 8) == (0, 1)
    # If the target itself has the best mean among its observers, it is played.
    assert _maxn([(0, [0.3, 0.5, 0.0])] + [(2, [0.3, 0.0, -1.0])] * 8) == (1, 1)
    # Arm 2 is observed only by itself: it is played whenever it is the target.
    assert _maxn([(0, [0.9, 0.9, 0.0])] * 6 + [(2, [0.9, 0.0, 0.3])]) == (2, 2)


def test_ucb_maxn_ties_go_to_the_smallest_index_and_initial_rounds_come_first():
    # Equal means among the observers {0, 1} of the target 1: the smaller index (0) wins.
    assert _maxn([(0, [0.5, 0.5, 0.0])] + [(2, [0.5, 0.0, -1.0])] * 8) == (0, 1)
    # Equal indices (same statistics on every arm): the target is arm 0.
    sym = instances.full_information([0.0, 0.0, 0.0])
    arm, target = maxn_arm(_stats(sym, [(1, [0.2, 0.2, 0.2])]), jnp.asarray(sym.precision, jnp.float32), jnp.int32(5), jnp.float32(1.0))
    assert int(target) == 0 and int(arm) == 0
    # Rounds t <= K play the paper's initial rounds (argmin_i sigma[i, t-1]).
    policy = ucb_maxn()
    ctx = _context(GENERAL, policy.params)
    state = policy.init_fn(ctx)
    for t in range(1, GENERAL.num_arms + 1):
        decision = policy.select_fn(None, state, jnp.int32(t), ctx)
        assert int(decision.arm) == reference.initial_side_arm(GENERAL.sigma, t)
        assert not bool(decision.needs_solve)


def test_exploration_arm_inverts_the_cdf_of_the_cover():
    weights = jnp.asarray([0.0, 2.0, 0.0, 1.0], jnp.float32)
    for u, expected in [(1e-9, 1), (0.3, 1), (0.66, 1), (0.67, 3), (0.999, 3), (1.0, 3)]:
        assert int(lp_baselines.exploration_arm(weights, jnp.float32(u))) == expected
    # Uniform weights: the same arm as eps_greedy's floor(u K).
    uniform = jnp.ones(5, jnp.float32)
    for u in np.linspace(0.01, 0.99, 37):
        assert int(lp_baselines.exploration_arm(uniform, jnp.float32(u))) == math.floor(np.float32(u) * 5)


def _scipy_cover_value(precision: np.ndarray) -> float:
    best = precision.max(axis=0)
    normalised = np.where(np.isinf(best), np.isinf(precision).astype(float), 0.0)
    finite = np.isfinite(best)
    normalised[:, finite] = precision[:, finite] / best[finite]
    k = precision.shape[0]
    result = linprog(np.ones(k), A_ub=-normalised.T, b_ub=-np.ones(k), bounds=[(0, None)] * k, method="highs")
    assert result.status == 0
    return float(result.fun)


def test_cover_lp_matches_scipy_and_reduces_to_the_dominating_set_relaxation():
    # Every case has K = 5: the solver compiles once.
    rs = np.random.default_rng(0)
    cases = [instances.random(rs, 5, inf_prob=0.5) for _ in range(6)]
    cases += [instances.default_instances()[name] for name in instances.default_instances()]
    # a noise-free observer: column 2 is seen exactly by arm 0
    noise_free = [[1.0, INF, 0.0, INF, INF], [INF, 1.0, 0.5, INF, INF], [INF, INF, 1.0, INF, INF]]
    noise_free += [[INF, INF, INF, 1.0, 0.5], [INF, INF, INF, INF, 1.0]]
    cases.append(jb.Instance([0.1, 0.2, 0.3, 0.4, 0.5], noise_free))
    solve = SOLVE_COVER
    constraints = jax.jit(lp_baselines.cover_constraints)
    for inst in cases:
        z, status = solve(jnp.asarray(inst.precision, jnp.float32))
        z = np.asarray(z, np.float64)
        assert int(status) == 0
        _, matrix, _ = constraints(jnp.asarray(inst.precision, jnp.float32))
        assert np.all(np.asarray(matrix) @ z >= 1 - 1e-5)  # feasible
        assert z.sum() == pytest.approx(_scipy_cover_value(inst.precision), rel=1e-5)
    # Graph feedback: exactly P2 of Buccapatnam et al. (adjacency with self-loops).
    rs = np.random.default_rng(1)
    for _ in range(5):
        adjacency = rs.uniform(size=(5, 5)) < 0.3
        inst = instances.graph(np.linspace(0, 1, 5), adjacency, sigma=2.0)
        closed = adjacency | np.eye(5, dtype=bool)
        expected = linprog(np.ones(5), A_ub=-closed.T.astype(float), b_ub=-np.ones(5), bounds=[(0, None)] * 5, method="highs").fun
        z, _ = solve(jnp.asarray(inst.precision, jnp.float32))
        assert float(jnp.sum(z)) == pytest.approx(expected, rel=1e-5)
    # Star: the hub alone; bandit: every arm.
    star = instances.default_instances()["graph_star"]
    np.testing.assert_allclose(solve(jnp.asarray(star.precision, jnp.float32))[0], [1, 0, 0, 0, 0])
    bandit = instances.bandit([0.1, 0.2, 0.3, 0.4, 0.5], [0.5, 1.0, 2.0, 3.0, 4.0])
    np.testing.assert_allclose(solve(jnp.asarray(bandit.precision, jnp.float32))[0], np.ones(5))


def test_lp_policies_explore_or_exploit_on_a_hand_built_state():
    # After the initial rounds, find rounds where the policy coin says explore / exploit
    # and check the arm: the cover's draw, or argmax mean / argmax UCB-N index.
    inst = instances.default_instances()["graph_star"]  # cover = hub (arm 0) alone
    plays = [(0, [0.2, 0.5, 0.7, 0.8, 1.0])] + [(i, [0.0] * 5) for i in range(1, 5)]
    plays += [(4, [0.0, 0.0, 0.0, 0.0, 1.0])] * 3
    key = rng.run_keys(rng.stream_key(5, rng.POLICY_STREAM), 0, 0)
    for policy, exploit in [
        (eps_greedy_lp(c=1.0, d=0.5), lambda s, t: int(jnp.argmax(estimator.mean(s)))),
        (ucb_lp(c=2.0, alpha=1.0), lambda s, t: int(jnp.argmax(ucb_n_index(s, jnp.int32(t), jnp.float32(1.0))))),
    ]:
        ctx = _context(inst, policy.params)
        # init_fn's state (its cover, from the solver compiled once) with these statistics
        weights, status = SOLVE_COVER(ctx.precision)
        state = lp_baselines.LPExplorationState(_stats(inst, plays), jnp.int32(0), weights, status)
        scale = 1.0 / 0.25 if policy.name == "eps_greedy_lp" else 2.0  # c / d**2, or c
        seen = set()
        select = jax.jit(policy.select_fn)
        for t in range(9, 60):
            coin = float(rng.uniform(key, jnp.int32(t), 2)[0])
            arm = int(select(key, state, jnp.int32(t), ctx).arm)
            explore = coin <= min(1.0, scale * 1.0 / t)  # gamma* = 1
            assert arm == (0 if explore else exploit(state.stats, t))
            seen.add(explore)
        assert seen == {True, False}


# ------------------------------------------------------------- NumPy reference loops
def _maxn_arms(mu, sigma, horizon, z, alpha=1.0):
    est = reference.WeightedEstimate(sigma)
    k = mu.size
    observes = np.isfinite(sigma)
    arms = np.zeros(horizon, np.int64)
    for t in range(1, horizon + 1):
        if t <= k:
            arm = reference.initial_side_arm(sigma, t)
        else:
            index = est.mean + np.sqrt(2 * alpha * np.log(t) / est.weights)
            target = int(np.argmax(index))
            observers = np.flatnonzero(observes[:, target])
            arm = int(observers[np.argmax(est.mean[observers])])
        arms[t - 1] = arm
        est.add(arm, reference.observe(mu, sigma, arm, z[t - 1]))
    return arms


def _lp_arms(mu, sigma, horizon, z, uniforms, cover, scale, kind, alpha=1.0):
    """eps_greedy_lp (kind='greedy', scale=c/d**2) or ucb_lp (kind='ucb', scale=c)."""
    est = reference.WeightedEstimate(sigma)
    k = mu.size
    gamma = cover.sum()
    cdf = np.cumsum(cover) / gamma
    arms = np.zeros(horizon, np.int64)
    for t in range(1, horizon + 1):
        if t <= k:
            arm = reference.initial_side_arm(sigma, t)
        elif uniforms[t - 1, 0] <= min(1.0, scale * gamma / t):
            arm = min(int(np.sum(cdf <= uniforms[t - 1, 1])), int(np.flatnonzero(cover > 0)[-1]))
        elif kind == "greedy":
            arm = int(np.argmax(est.mean))
        else:
            arm = int(np.argmax(est.mean + np.sqrt(2 * alpha * np.log(t) / est.weights)))
        arms[t - 1] = arm
        est.add(arm, reference.observe(mu, sigma, arm, z[t - 1]))
    return arms


def _policy_uniforms(seed, run, horizon):
    key = rng.run_keys(rng.stream_key(seed, rng.POLICY_STREAM), 0, run)
    with jax.enable_x64(True):
        draw = jax.vmap(lambda t: rng.uniform(key, t, 2, jnp.float64))
        return np.asarray(draw(jnp.arange(1, horizon + 1)))  # policies count t from 1


@pytest.mark.parametrize("name", ["ucb_maxn", "eps_greedy_lp", "ucb_lp"])
def test_engine_matches_numpy_loop_fed_the_same_noise(name):
    params = {"ucb_maxn": {}, "eps_greedy_lp": {"c": 1.0, "d": 0.4}, "ucb_lp": {"c": 3.0}}[name]
    policy = jb.policies.make(name, **params)
    times = np.arange(1, HORIZON + 1)
    if name == "ucb_maxn":
        with jax.enable_x64(True):
            result = jb.simulate(policy, GENERAL, HORIZON, RUNS, SEED, times=times, dtype="float64")
    else:
        # float32 engine (the LP solver does not run under float64 + strict promotion
        # yet); a near-tie could flip an argmax against the float64 loop, but not in
        # these 3 x 300 rounds.  The engine runs ENGINE_RUNS runs (the shape of the
        # other float32 simulations); a run does not depend on how many others there are.
        result = _simulate(policy, GENERAL, HORIZON, SEED, times=times)
        cover = np.asarray(SOLVE_COVER(jnp.asarray(GENERAL.precision, jnp.float32))[0], np.float64)
    explored = 0
    for run in range(RUNS):
        z = reference.engine_noise(SEED, 0, run, HORIZON, GENERAL.num_arms)
        if name == "ucb_maxn":
            expected = _maxn_arms(GENERAL.mu, GENERAL.sigma, HORIZON, z)
        else:
            uniforms = _policy_uniforms(SEED, run, HORIZON)
            scale = params["c"] / params.get("d", 1.0) ** 2
            kind = "greedy" if name == "eps_greedy_lp" else "ucb"
            expected = _lp_arms(GENERAL.mu, GENERAL.sigma, HORIZON, z, uniforms, cover, scale, kind)
            explored += int(np.sum(uniforms[GENERAL.num_arms:, 0] <= np.minimum(1, scale * cover.sum() / np.arange(GENERAL.num_arms + 1, HORIZON + 1))))
        got = reference.arms_from_regret(result.regret[run], GENERAL.gaps)
        np.testing.assert_array_equal(got, expected)
        np.testing.assert_array_equal(result.counts[run], np.bincount(expected, minlength=GENERAL.num_arms))
    if name != "ucb_maxn":
        # the first K rounds play each arm once, and are counted as the initial rounds
        np.testing.assert_array_equal(result.diagnostics["initial_rounds"], GENERAL.num_arms)
        assert explored > 5  # the exploration branch was exercised
        assert float(np.sum(cover)) > 1  # and the cover is not a single arm


# ------------------------------------------------------------------ statistical sanity
def test_ucb_maxn_equals_ucb_n_on_a_standard_bandit():
    # Arm for arm: on a bandit the only observer of the target is the target itself.
    # 200 runs x 2000 rounds, exact equality of the regret at 300 recorded rounds and of
    # every final count.
    inst = instances.default_instances()["bandit"]
    a = _simulate(ucb_maxn(), inst, 2000, seed=2)
    b = _simulate(jb.policies.make("ucb_n"), inst, 2000, seed=2)
    np.testing.assert_array_equal(a.regret, b.regret)
    np.testing.assert_array_equal(a.counts, b.counts)


def test_eps_greedy_lp_equals_eps_greedy_on_a_standard_bandit():
    # z* = 1, gamma* = K: the same schedule c K / t and the same uniform draw (d = 1).
    # 200 runs x 2000 rounds, exact equality of every final count.
    inst = instances.default_instances()["bandit"]
    a = _simulate(eps_greedy_lp(c=1.0, d=1.0), inst, 2000, seed=2)
    b = _simulate(jb.policies.make("eps_greedy", c=1.0), inst, 2000, seed=2)
    np.testing.assert_array_equal(a.counts, b.counts)


@pytest.mark.slow
def test_lp_based_policies_beat_ucb_on_a_star_graph():
    # Star on 5 arms: the hub (arm 0, gap 0.3) observes every arm; the leaves only
    # themselves.  The cover is the hub alone (gamma* = 1).  200 runs x 5000 rounds,
    # common random numbers; the paired mean difference must be below zero by more than
    # 3 standard errors.  Parameters: eps_greedy_lp(c=1, d=Delta_min=0.3),
    # ucb_lp(c=10) (hub exploration at rate 10/t).
    mu = [0.7, 1.0, 0.5, 0.3, 0.0]
    star = np.zeros((5, 5), dtype=bool)
    star[0, :] = True
    inst = instances.graph(mu, star, sigma=1.0)
    horizon, runs = 5000, ENGINE_RUNS
    base = _simulate(jb.policies.make("ucb"), inst, horizon, seed=3).final_regret
    for policy in [eps_greedy_lp(c=1.0, d=0.3), ucb_lp(c=10.0)]:
        diff = _simulate(policy, inst, horizon, seed=3).final_regret - base
        stderr = diff.std(ddof=1) / np.sqrt(runs)
        assert diff.mean() < -3 * stderr, (policy.name, diff.mean(), stderr, base.mean())


@pytest.mark.slow
def test_full_information_regret_stops_growing():
    # Full information, K = 5 (default instance), 200 runs.  Regret from T = 1000 to
    # T = 10000 (recorded at 300 rounds in between): ucb_maxn (greedy on full information) must grow by less than 1.0 on
    # average (mean + 3 SE); eps_greedy_lp / ucb_lp keep their forced exploration
    # (cover = one arm, rate c gamma*/(d^2 t)), so their growth must match the expected
    # cost of that exploration within 3 SE + 10%, i.e. no growth beyond it.
    inst = instances.default_instances()["full_information"]
    runs, times = ENGINE_RUNS, _times(1000, 10000)
    cover = np.asarray(SOLVE_COVER(jnp.asarray(inst.precision, jnp.float32))[0], np.float64)
    explore_gap = float(cover @ inst.gaps / cover.sum())
    for policy, scale in [(ucb_maxn(), 0.0), (eps_greedy_lp(c=1.0, d=0.5), 4.0), (ucb_lp(c=1.0), 1.0)]:
        result = _simulate(policy, inst, times[-1], seed=4, times=times)
        growth = result.regret[:, -1] - result.regret[:, 0]
        stderr = growth.std(ddof=1) / np.sqrt(runs)
        expected = explore_gap * sum(min(1.0, scale * cover.sum() / t) for t in range(times[0] + 1, times[-1] + 1))
        assert growth.mean() <= 1.10 * expected + 3 * stderr + 1.0, (policy.name, growth.mean(), expected, stderr)
        assert growth.mean() >= 0.90 * expected - 3 * stderr - 1.0, (policy.name, growth.mean(), expected, stderr)


# ------------------------------------------------------------------------- oracle ETC
# Both oracle_etc tests share one engine: 200 runs, 3000 recording times.
ORACLE_TIMES = 3000


def _lower_bound_c(inst: jb.Instance) -> np.ndarray:
    """c* of the instance from the NumPy + HiGHS reference (canonical, as the policy's),
    independent of the policy's own solver."""
    c, ok = reference.lower_bound_highs(inst.mu, inst.precision)
    assert ok
    return c


def test_oracle_etc_follows_its_schedule_then_commits():
    # Every round of the first RUNS of ENGINE_RUNS runs (a run does not depend on how
    # many others there are).
    inst = GENERAL
    horizon = ORACLE_TIMES
    c = _lower_bound_c(inst)
    quota = np.ceil(c * np.log(horizon))
    with jax.enable_x64(False):
        result = jb.simulate(jb.policies.make("oracle_etc"), inst, horizon, ENGINE_RUNS, SEED, times=np.arange(1, horizon + 1))
    explore = int(quota.sum())
    assert 0 < explore < horizon
    for run in range(RUNS):
        arms = reference.arms_from_regret(result.regret[run], inst.gaps)
        # exploration in index order: quota[0] plays of arm 0, then arm 1, ...
        np.testing.assert_array_equal(arms[:explore], np.repeat(np.arange(inst.num_arms), quota.astype(int)))
        # then one arm for ever: the best weighted estimate after exploration
        z = reference.engine_noise(SEED, 0, run, horizon, inst.num_arms)
        est = reference.WeightedEstimate(inst.sigma)
        for t in range(explore):
            est.add(arms[t], reference.observe(inst.mu, inst.sigma, arms[t], z[t]))
        assert np.all(arms[explore:] == int(np.argmax(est.mean)))
        assert result.diagnostics["exploration_rounds"][run] == explore
        assert result.diagnostics["committed_arm"][run] == int(np.argmax(est.mean))
        assert result.diagnostics["lp_status"][run] == 0


def test_oracle_etc_observes_every_arm_before_it_commits():
    """An arm that reveals every arm noise-free: c* = 0, so no quota asks for a play,
    but a commitment needs a sample of each arm.  Every run plays the revealing arm (its
    precision on arm 0 is the largest) once, which tells it every mean exactly, then
    commits to the best arm: regret 1.0, the revealing arm's gap, in every run (before,
    a run committed on arm 0's single sample, to an arm never observed when it was
    negative)."""
    inst = instances.revealing_arm([1.0, 0.8, 0.6, 0.4], reveal_mean=0.0, reveal_sigma=0.0)
    result = jb.simulate(jb.policies.make("oracle_etc"), inst, 50, 16, seed=0)
    np.testing.assert_array_equal(result.final_regret, 1.0)
    np.testing.assert_array_equal(result.diagnostics["committed_arm"], 0)
    np.testing.assert_array_equal(result.diagnostics["exploration_rounds"], 1)


def test_oracle_etc_commits_on_the_estimate_with_the_last_exploration_sample():
    """A quota of one play each, arm 0 played (0.5 seen): the update of arm 1's play
    (10 seen) ends the exploration and commits to arm 1, whose only sample is that one."""
    from jaxbandit.policies.oracle_etc import ETCState

    inst = instances.bandit([0.5, 0.4], 1.0)
    state = ETCState(
        stats=_stats(inst, [(0, [0.5, 0.0])]),
        quota=jnp.ones(2, jnp.float32),
        committed_arm=jnp.int32(-1),
        exploration_rounds=jnp.int32(1),
        lp_status=jnp.int32(0),
    )
    after = jb.policies.make("oracle_etc").update_fn(state, jnp.int32(1), jnp.float32([0.0, 10.0]), _context(inst, {}))
    assert int(after.committed_arm) == 1 and int(after.exploration_rounds) == 2


@pytest.mark.slow
def test_oracle_etc_regret_is_bounded_on_full_information_and_near_the_bound_elsewhere():
    # 200 runs (recorded at 3000 rounds, the other oracle_etc test's shape).  Full
    # information: c* sits on the best arm, so exploration is free and
    # the regret at T = 20000 is at most the misidentification risk: mean < 5.
    # Bandit: regret = sum_i quota_i Delta_i (+ rare commit errors): mean within 10% +
    # 3 SE of sum_i ceil(c*_i log T) Delta_i.
    for name, limit in [("full_information", None), ("bandit", "schedule")]:
        inst = instances.default_instances()[name]
        horizon, runs = 20000, ENGINE_RUNS
        times = np.linspace(1, horizon, ORACLE_TIMES).round().astype(np.int64)
        final = jb.simulate(jb.policies.make("oracle_etc"), inst, horizon, runs, seed=6, times=times).final_regret
        stderr = final.std(ddof=1) / np.sqrt(runs)
        if limit is None:
            assert final.mean() < 5.0, final.mean()
        else:
            c = _lower_bound_c(inst)
            schedule = float(np.ceil(c * np.log(horizon)) @ inst.gaps)
            assert abs(final.mean() - schedule) <= 0.10 * schedule + 3 * stderr, (final.mean(), schedule)
