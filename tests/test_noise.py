"""Noise families: naming and checking them, the law of each family's observations
(drawn through the engine's own ``environment.observe``), noise that depends only on
(seed, instance, run, round), common random numbers across policies (NumPy loops fed
the engine's draws), and every registered policy under every family.

Compiled programs are shared: one observe program per family for the statistics, and
every simulation at ``K = 3`` with 4 runs and 60 recording times reuses the engine
compiled for the first (per policy and family)."""

import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from scipy import stats

import jaxbandit as jb
from jaxbandit import environment, rng
from jaxbandit.noise import NoiseFamily
from tests import reference

INF = np.inf
STUDENT = jb.noise.student_t(df=3)
FAMILIES = (jb.noise.gaussian(), jb.noise.bernoulli(), jb.noise.uniform(), jb.noise.rademacher(), STUDENT)
OTHER_FAMILIES = FAMILIES[1:]  # the Gaussian one is tested throughout the suite
MU = np.array([0.2, 0.5, 0.9])
# Arm 0 reveals every arm (three noise levels), arms 1 and 2 only themselves; valid for
# every family (Bernoulli: means in [0, 1], finite sigma >= 1/2).
SIGMA = np.array([[0.5, 1.0, 2.0], [INF, 0.7, INF], [INF, INF, 0.5]])
HORIZON, RUNS, TIMES = 60, 4, np.arange(1, 61)


def _instance(family) -> jb.Instance:
    return jb.Instance(MU, SIGMA, noise=family)


# -- naming and checking ----------------------------------------------------------------


def test_families_by_name_label_and_value():
    assert [f.label for f in FAMILIES] == ["gaussian", "bernoulli", "uniform", "rademacher", "student_t(df=3)"]
    for family in FAMILIES:
        assert jb.noise.resolve(family.label) == family and jb.noise.resolve(family) == family
        assert hash(family) == hash(jb.noise.resolve(family.label))  # static: a cache key
    assert jb.noise.student_t(2.5).label == "student_t(df=2.5)"
    assert jb.noise.resolve("student_t(df=2.5)") == jb.noise.resolve("student_t(df= 25e-1 )") == jb.noise.student_t(2.5)
    assert jb.noise.student_t(3) == jb.noise.student_t(3.0)


@pytest.mark.parametrize(
    "value, message",
    [
        ("gauss", r"noise must be one of 'gaussian', 'bernoulli', 'uniform', 'rademacher'.*got 'gauss'"),
        (3, r"noise must be one of .*got 3"),
        (None, r"noise must be one of .*got None"),
        ("student_t", r"noise 'student_t' needs its degrees of freedom"),
        ("student_t(df=two)", r"noise must be one of .*got 'student_t\(df=two\)'"),
        ("student_t(df=1_0)", r"noise must be one of .*got 'student_t\(df=1_0\)'"),  # a number as the command line reads one
        ("student_t(df=inf)", r"noise must be one of .*got 'student_t\(df=inf\)'"),
        ("student_t(df=2)", r"noise 'student_t\(df=2\)': df must be a finite number > 2 .*got 2.0"),
        (NoiseFamily("student_t", float("inf")), r"df must be a finite number > 2.*got inf"),
        (NoiseFamily("gaussian", 3.0), r"noise must be one of"),
    ],
)
def test_bad_noise_names_the_argument(value, message):
    with pytest.raises(jb.ArgumentError, match=message) as caught:
        jb.noise.resolve(value)
    assert caught.value.argument == "noise"
    with pytest.raises(ValueError, match=message):
        jb.instances.bandit([0.5, 0.2], noise=value)


@pytest.mark.parametrize("df", [2, 1.5, float("nan"), "3", True])
def test_student_t_needs_df_above_2(df):
    with pytest.raises(jb.ArgumentError, match="df must be a") as caught:
        jb.noise.student_t(df)
    assert caught.value.argument == "df"


def test_student_t_too_close_to_2_is_not_simulated():
    """Near df = 2 much of the variance lies in tails the 40-bit uniforms cannot reach:
    a simulation (Python or a configuration) refuses it, naming df; the family itself
    stays valid, so that results recorded with it still load."""
    family = jb.noise.student_t(2.2)
    message = r"noise 'student_t\(df=2.2\)': df = 2.2 is too close to 2: 7.363% of Student's t variance .*df >= 2.383\)"
    with pytest.raises(jb.ArgumentError, match=message) as caught:
        jb.noise.check_drawn(family)
    assert caught.value.argument == "df"
    with pytest.raises(jb.ArgumentError, match=message):
        jb.SimulationRun(jb.policies.make("ucb_n"), jb.instances.bandit([0.5, 0.2], noise=family), 10, 2)
    entry = {"type": "bandit", "mu": [0.5, 0.2], "noise": {"family": "student_t", "df": 2.2}}
    with pytest.raises(jb.config.ConfigError, match=r"key 'instances\[0\]': " + message[:40]):
        jb.config.load({"runs": 1, "horizon": 10, "instances": [entry], "policies": [{"name": "ucb_n"}]})
    jb.noise.check_drawn(jb.noise.student_t(2.383))  # 0.99% of it: simulated
    assert jb.noise.cut_variance_share(2.382) > jb.noise.MAX_CUT_VARIANCE_SHARE
    with pytest.raises(jb.ArgumentError, match="df must be a finite number > 2"):
        jb.noise.cut_variance_share(1.5)


@pytest.mark.parametrize("df", [2.05, 2.4, 3.0, 10.0])
def test_cut_variance_share_is_that_of_the_draws_grid(df):
    """The share against the variance of the law the draws follow, summed over the
    grid of uniforms ``(j + 1/2) 2**-40`` (its first 10**6 cells term by term, the rest
    by their integral): within 1e-4 of it.  A huge df loses no digits: the share tends
    to cell 0's, ``2**-40 (1 - log 2)``."""
    a = 2.0 / df
    cells = 2.0**40
    first = np.sum((np.arange(10**6) + 0.5) ** -a)
    rest = ((cells) ** (1 - a) - (10.0**6) ** (1 - a)) / (1 - a)
    mean_power = (first + rest) * cells**a / cells  # E[u**-a] on the grid
    grid_variance = df * (mean_power - 1) / 2  # E[T**2] = E[r**2] / 2, r**2 = df (u**-a - 1)
    share = 1 - grid_variance / (df / (df - 2))
    assert jb.noise.cut_variance_share(df) == pytest.approx(share, rel=1e-4)
    assert jb.noise.cut_variance_share(1e300) == pytest.approx(2.0**-40 * (1 - math.log(2)), rel=1e-12)


@pytest.mark.parametrize("dtype", [jnp.float32, jnp.float64])
def test_student_t_with_a_huge_df_is_its_gaussian_limit(dtype):
    """A df the exponent -2 log(u) / df underflows in (or that the dtype cannot hold)
    draws the normals of the same blocks, never 0 or NaN."""
    with jax.enable_x64(dtype == jnp.float64):
        key = rng.run_keys(rng.stream_key(0, rng.NOISE_STREAM), 0, 0)
        rounds = jnp.arange(64)
        normal = np.asarray(jax.jit(jax.vmap(lambda t: rng.standard_normal(key, t, 64, dtype)))(rounds))
        for df in (3e38, 1e39, 1e300, 1.7e308):
            t = np.asarray(jax.jit(jax.vmap(lambda t: rng.student_t(key, t, 64, df, dtype)))(rounds))
            np.testing.assert_allclose(t, normal, rtol=1e-5 if dtype == jnp.float32 else 1e-12, atol=0)


# -- the law of the observations ----------------------------------------------------------

# 4 runs x 2**15 rounds: n = 131,072 samples of each arm; every tolerance is 5 standard errors.
STAT_RUNS, STAT_ROUNDS = 4, 2**15
N = STAT_RUNS * STAT_ROUNDS


def _draw(family, arm, rounds=STAT_ROUNDS, mu=MU, sigma=SIGMA):
    """``(STAT_RUNS * rounds, K)`` float64: ``environment.observe`` of ``arm`` (float32)."""
    env = environment.make_params(mu, sigma)
    keys = rng.run_keys(rng.stream_key(5, rng.NOISE_STREAM), 0, jnp.arange(STAT_RUNS))
    one = lambda key, t: environment.observe(key, t, jnp.int32(arm), env, family)  # noqa: E731
    draw = jax.jit(jax.vmap(jax.vmap(one, (None, 0)), (0, None)))
    return np.asarray(draw(keys, jnp.arange(rounds)), np.float64).reshape(-1, len(mu))


def _check_mean(x, mean, sd):
    assert np.all(np.abs(x.mean(axis=0) - mean) < 5 * sd / math.sqrt(len(x))), (x.mean(axis=0), mean)


def _check_variance(x, variance, fourth_moment):
    """Sample variance against ``variance``; its standard error is
    ``sqrt((E (X - mu)**4 - variance**2) / n)``."""
    error = np.sqrt((fourth_moment - variance**2) / len(x))
    assert np.all(np.abs(x.var(axis=0) - variance) < 5 * error), (x.var(axis=0), variance)


def _check_ks(standardized, cdf):
    """Kolmogorov-Smirnov distance of the pooled standardized samples below its 0.1%
    critical value, about 1.95 / sqrt(m)."""
    sample = np.sort(standardized.ravel())
    grid = np.arange(1, sample.size + 1) / sample.size
    assert np.max(np.abs(cdf(sample) - grid)) < 1.95 / math.sqrt(sample.size)


SCALE = SIGMA[0]  # arm 0's row: the noise levels of the samples drawn below


def test_gaussian_observations():
    x = _draw(jb.noise.gaussian(), 0)
    _check_mean(x, MU, SCALE)
    _check_variance(x, SCALE**2, 3 * SCALE**4)
    _check_ks((x - MU) / SCALE, stats.norm.cdf)


def test_bernoulli_observations_are_the_frequency_of_ones():
    x = _draw(jb.noise.bernoulli(), 0)
    assert set(np.unique(x)) <= {0.0, 1.0}
    # the mean is the frequency of ones: binomial standard error sqrt(mu (1 - mu) / n)
    _check_mean(x, MU, np.sqrt(MU * (1 - MU)))
    # the boundary means: never a 1 at mu = 0, always at mu = 1
    edges = _draw(jb.noise.bernoulli(), 0, 64, np.array([0.0, 1.0, 0.5]), SIGMA)
    assert np.all(edges[:, 0] == 0) and np.all(edges[:, 1] == 1)


def test_uniform_observations():
    x = _draw(jb.noise.uniform(), 0)
    half_width = SCALE * math.sqrt(3)
    assert np.all(np.abs(x - MU) <= half_width * (1 + 1e-6))
    _check_mean(x, MU, SCALE)
    _check_variance(x, SCALE**2, 9 / 5 * SCALE**4)  # E U**4 = 1/5 for U uniform on (-1, 1)
    _check_ks((x - MU) / half_width, lambda v: np.clip((v + 1) / 2, 0, 1))


def test_rademacher_observations():
    x = _draw(jb.noise.rademacher(), 0)
    np.testing.assert_allclose(np.abs(x - MU), np.broadcast_to(SCALE, x.shape), rtol=1e-6)
    up = np.mean(x > MU, axis=0)
    assert np.all(np.abs(up - 0.5) < 5 * math.sqrt(0.25 / N)), up


@pytest.mark.parametrize("df", [3, 10])
def test_student_t_observations(df):
    """df = 3: the mean (its variance is finite) and the law (KS against scipy's t);
    df = 10 also the variance (its fourth moment, 3 (df - 2) / (df - 4) sigma**4, is
    finite)."""
    x = _draw(jb.noise.student_t(df), 0)
    _check_mean(x, MU, SCALE)
    scale = SCALE * math.sqrt((df - 2) / df)  # of the t variable
    _check_ks((x - MU) / scale, stats.t(df).cdf)
    if df > 4:
        _check_variance(x, SCALE**2, 3 * (df - 2) / (df - 4) * SCALE**4)


def test_rng_student_t_tails_are_finite():
    """The smallest uniform the draws can take gives the largest t radius: finite."""
    key = rng.run_keys(rng.stream_key(0, rng.NOISE_STREAM), 0, 0)
    draws = np.asarray(jax.jit(jax.vmap(lambda t: rng.student_t(key, t, 4, 2.01)))(jnp.arange(4096)))
    assert np.all(np.isfinite(draws))


@pytest.mark.parametrize("family", FAMILIES, ids=lambda f: f.label)
def test_unrevealed_entries_are_zero_and_draws_do_not_depend_on_the_arm(family):
    """Arm 1 reveals only itself: the others read 0.  Arm 1's sample is the same
    number whichever arm is played: the same uniform thresholded at mu_1 (Bernoulli),
    the same standardized draw times the play's sigma (the others)."""
    by_hub, by_itself = _draw(family, 0, 256), _draw(family, 1, 256)
    assert np.all(by_itself[:, [0, 2]] == 0)
    if family.name == "bernoulli":
        np.testing.assert_array_equal(by_hub[:, 1], by_itself[:, 1])
    else:
        standardized = lambda x, s: (x[:, 1] - MU[1]) / s  # noqa: E731
        np.testing.assert_allclose(standardized(by_hub, SIGMA[0, 1]), standardized(by_itself, SIGMA[1, 1]), atol=1e-5)


# -- noise that depends only on (seed, instance, run, round) -------------------------------


@pytest.mark.parametrize("family", OTHER_FAMILIES, ids=lambda f: f.label)
def test_a_runs_results_do_not_depend_on_runs_batch_or_chunks(family):
    """Runs 2 and 3 of a 4-run simulation are the runs of a 2-run simulation from
    run 2, as the first instance of a batch of two, in chunks of 16 rounds."""
    inst = _instance(family)
    whole = jb.simulate(jb.policies.make("ucb_n"), inst, HORIZON, RUNS, seed=3, times=TIMES)
    other = jb.Instance(MU[::-1].copy(), SIGMA, noise=family)
    part = jb.simulate(
        jb.policies.make("ucb_n"), jb.instances.stack([inst, other]), HORIZON, 2, seed=3,
        times=TIMES, first_run=2, chunk_size=16,
    )  # fmt: skip
    assert whole.noise == part.noise == family.label
    np.testing.assert_array_equal(part.regret[0], whole.regret[2:])
    np.testing.assert_array_equal(part.counts[0], whole.counts[2:])


# -- common random numbers: NumPy loops fed the engine's draws ------------------------------

# Distinct gaps (the arm played each round is read off the per-round regret), side
# observations of several noise levels, every finite sigma >= 1/2 (Bernoulli).
GENERAL = np.array([0.9, 0.5, 0.2, 0.65])
GENERAL_SIGMA = np.array([[1.0, INF, 0.5, INF], [2.0, 0.7, INF, 1.5], [INF, 0.6, 1.5, 3.0], [0.5, INF, INF, 1.0]])


@pytest.mark.parametrize("family", OTHER_FAMILIES, ids=lambda f: f.label)
def test_policies_see_the_same_draws_as_numpy_loops(family):
    """ucb_n and greedy (float64, one seed) follow NumPy loops fed one array of the
    engine's draws arm for arm, over 200 rounds of 2 runs: each observation is the
    family's formula of the round's draw, whatever the policy (common random numbers).
    For Bernoulli: the engine's uniforms thresholded at mu_j."""
    horizon, runs, seed = 200, 2, 8
    inst = jb.Instance(GENERAL, GENERAL_SIGMA, noise=family)
    times = np.arange(1, horizon + 1)
    with jax.enable_x64(True):
        results = {
            name: jb.simulate(jb.policies.make(name), inst, horizon, runs, seed, times=times, dtype="float64")
            for name in ("ucb_n", "greedy")
        }
    loops = {"ucb_n": reference.ucb_n_arms, "greedy": reference.greedy_arms}
    for run in range(runs):
        draws = reference.engine_draws(family, seed, 0, run, horizon, 4)
        for name, result in results.items():
            expected = loops[name](GENERAL, GENERAL_SIGMA, horizon, draws, family=family)
            np.testing.assert_array_equal(reference.arms_from_regret(result.regret[run], inst.gaps), expected)
            np.testing.assert_array_equal(result.counts[run], np.bincount(expected, minlength=4))


# -- every registered policy under every family ---------------------------------------------

# Each policy under one of the non-Gaussian families, in turn (the rest of the suite runs
# every policy under Gaussian noise): a family changes only the observations, which every
# policy reads the same way, so each family runs under several policies and each policy
# once (lp_explore and ossb, a Solver each, take seconds to compile).


def _policy_family_pairs():
    for number, name in enumerate(jb.policies.names()):
        family = OTHER_FAMILIES[number % len(OTHER_FAMILIES)]
        yield pytest.param(name, family, id=f"{name}-{family.label}")


@pytest.mark.parametrize("name, family", list(_policy_family_pairs()))
def test_every_policy_runs_under_a_family_other_than_gaussian(name, family):
    """A few rounds past the initial ones, 4 runs: the plays add up, the regret is
    finite and grows, the result names the family (a NaN in a policy's state or an
    invalid arm would raise)."""
    result = jb.simulate(jb.policies.make(name), _instance(family), HORIZON, RUNS, seed=1, times=TIMES)
    assert result.noise == family.label
    assert np.all(result.counts.sum(axis=1) == HORIZON)
    assert np.all(np.isfinite(result.regret)) and np.all(np.diff(result.regret, axis=1) >= 0)
    np.testing.assert_allclose(result.final_regret, result.counts @ _instance(family).gaps, rtol=1e-5)
