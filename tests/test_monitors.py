"""Monitors: the estimator-deviation monitor of Lemma 4.2 against a direct NumPy
computation, its bound, and its plumbing through the engine."""

import types

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jaxbandit as jb
from jaxbandit import monitors
from jaxbandit.policy_check import PolicyError
from tests import reference

INF = np.inf
GENERAL = jb.Instance(
    [0.9, 0.5, 0.2, 0.65],
    [[1.0, INF, 0.5, INF], [2.0, 0.7, INF, 1.5], [INF, 0.4, 1.5, 3.0], [0.3, INF, INF, 1.0]],
)
ALPHAS = (0.25, 0.5, 1.0)


def _numpy_outside(mu, sigma, arms, z, alpha):
    """Per round t: is some arm with zeta_i >= max_j W[j, i] outside its interval?"""
    est = reference.WeightedEstimate(sigma)
    best_precision = np.max(np.where(np.isfinite(sigma), 1 / sigma**2, 0.0), axis=0)
    outside = np.zeros(len(arms), bool)
    for t, arm in enumerate(arms, start=1):
        if t >= 2:
            counted = (est.weights >= best_precision) & (est.weights > 0)
            error = np.abs(est.mean - mu)
            outside[t - 1] = np.any(counted & (error**2 * est.weights > 2 * alpha * np.log(t)))
        est.add(arm, reference.observe(mu, sigma, arm, z[t - 1]))
    return outside


def test_estimator_deviation_counts_match_numpy():
    """ucb_n, 3 runs x 400 rounds in float64: the monitor's counts and first rounds at
    every recording time equal those of a direct NumPy computation on the same arms."""
    horizon, runs, seed = 400, 3, 5
    times = np.arange(10, horizon + 1, 10)
    monitor = monitors.estimator_deviation(alphas=ALPHAS)
    with jax.enable_x64(True):
        result = jb.simulate(jb.policies.make("ucb_n"), GENERAL, horizon, runs, seed, times=np.arange(1, horizon + 1),
                             dtype="float64", monitor=monitor)  # fmt: skip
    assert sum(int(result.monitor[f"outside_rounds_alpha{a:g}"][:, -1].sum()) for a in ALPHAS) > 0
    for run in range(runs):
        z = reference.engine_noise(seed, 0, run, horizon, 4)
        arms = reference.arms_from_regret(result.regret[run], GENERAL.gaps)
        for alpha in ALPHAS:
            outside = _numpy_outside(GENERAL.mu, GENERAL.sigma, arms, z, alpha)
            counted = np.cumsum(outside)
            got = result.monitor[f"outside_rounds_alpha{alpha:g}"][run]
            np.testing.assert_array_equal(got[times - 1], counted[times - 1])
            first = np.flatnonzero(outside)
            expected_first = np.where(times >= first[0] + 1, first[0] + 1, 0) if first.size else np.zeros_like(times)
            np.testing.assert_array_equal(result.monitor[f"first_outside_alpha{alpha:g}"][run][times - 1], expected_first)


def test_deviation_bound():
    np.testing.assert_allclose(monitors.deviation_bound([3, 5, 100], 4.0), [2 * 1 / 9, 2 * 2 / 25, 2 * 7 / 1e4])
    # t = 2: one interval of the lemma's proof, not the printed formula's 0 (a single
    # Gaussian sample leaves the alpha = 4 interval with probability 2 Phi(-sqrt(8 log 2)))
    assert monitors.deviation_bound(2, 4.0) == pytest.approx(2 * 2.0**-2)
    assert monitors.deviation_bound(3, 0.5, num_arms=10) == 1.0


def test_a_monitor_needs_nothing_from_the_policy_but_where_its_estimator_is():
    """A user policy whose state is the estimator itself, and a batch of cells."""
    from tests import user_policies

    monitor = monitors.estimator_deviation(alphas=(0.5,), estimator_fn=lambda stats: stats)
    batch = jb.instances.stack([GENERAL, jb.instances.full_information(GENERAL.mu)])
    result = jb.simulate(user_policies.fixed_arm(1), batch, 300, 4, seed=0, monitor=monitor)
    outside = result.monitor["outside_rounds_alpha0.5"]
    assert outside.shape == (2, 4, len(result.times))
    assert np.all(np.diff(outside, axis=-1) >= 0)
    assert np.all(outside[..., -1].sum(axis=1) > 0)  # counted in both cells: a monitor of zeros fails
    frame = result.to_pandas()  # each run's report at the horizon; every recording time with curves
    np.testing.assert_array_equal(frame["outside_rounds_alpha0.5"], outside[..., -1].ravel())
    np.testing.assert_array_equal(result.to_pandas(curves=True)["outside_rounds_alpha0.5"], outside.ravel())
    assert jb.simulate(user_policies.fixed_arm(1), batch, 300, 4, seed=0).monitor == {}


def test_bad_monitors():
    with pytest.raises(ValueError, match=r"alphas must be a non-empty list of finite numbers > 0, got \(0,\)"):
        monitors.estimator_deviation(alphas=(0,))
    # each alpha reports under its own name: two that print alike would overwrite one another
    with pytest.raises(ValueError, match=r"alphas \[0.5, 0.5000001\] would all be reported as alpha0.5"):
        monitors.estimator_deviation(alphas=(0.5, 0.5000001))
    with pytest.raises(ValueError, match=r"alphas \[2.0, 2.0\] would all be reported as alpha2"):
        monitors.estimator_deviation(alphas=[2, 2])
    # "45" is not alphas 4 and 5; numpy booleans, strings and complex values are not numbers, nor an int beyond float64
    for alphas in ("45", 1.0, [True], [[1.0, 2.0]], [np.True_], np.array([True]), ["2"], [np.complex128(2 + 1j)], [10**400]):
        with pytest.raises(jb.ArgumentError, match="alphas must be a"):
            monitors.estimator_deviation(alphas=alphas)
    # an array of any kind, as lists are: JAX's too
    assert monitors._check_alphas(jnp.asarray([1.0, 4.5])) == monitors._check_alphas(np.array([1, 4.5])) == (1.0, 4.5)
    with pytest.raises(ValueError, match="estimator_fn must be a function"):
        monitors.estimator_deviation(estimator_fn=1)
    with pytest.raises(jb.ArgumentError, match="unknown monitor 'nope'"):
        monitors.make("nope")
    with pytest.raises(jb.ArgumentError, match=r"monitor 'estimator_deviation' got unknown parameter\(s\) \['alpha'\]; it accepts \['alphas', 'estimator_fn'\]"):
        monitors.make("estimator_deviation", alpha=1)
    with pytest.raises(ValueError, match="monitor must be a jaxbandit.monitors.Monitor or None"):
        jb.simulate(jb.policies.make("ucb_n"), GENERAL, 10, 2, monitor="estimator_deviation")


def _counting_monitor(report_fn):
    """Counts the rounds of a run; ``report_fn`` reports the count."""
    return monitors.Monitor(lambda ctx: jnp.zeros((), jnp.float32), lambda state, policy_state, t, ctx: state + 1, report_fn, name="count")


@pytest.mark.parametrize(
    "monitor, message",
    [
        # a report of shape (1,) would be written into the wrong recording slots
        (_counting_monitor(lambda state: {"n": state[None]}), r"monitor report_fn returned 'n' = float32\[1\]; expected a scalar per run"),
        (_counting_monitor(lambda state: state), r"monitor report_fn returned float32\[\]; expected a dict of scalars"),
        (_counting_monitor(lambda state: {}), r"monitor report_fn returned \{\}; expected a non-empty dict of scalars"),
        (_counting_monitor(lambda state: {1: state}), r"monitor report_fn returned the key 1; expected names that are strings"),
        (
            monitors.Monitor(lambda ctx: jnp.zeros((), jnp.int32), lambda s, p, t, ctx: s.astype(jnp.float32), lambda s: {"n": s}),
            r"monitor update_fn changed the state leaf state: got float32\[\].*expected int32\[\]",
        ),
        (monitors.Monitor(1, 2, 3), r"monitor init_fn must be a function, got 1"),
    ],
)
def test_a_monitor_that_breaks_its_contract_is_refused_before_the_run(monitor, message):
    with pytest.raises(PolicyError, match=message):
        jb.SimulationRun(jb.policies.make("ucb_n"), GENERAL, 20, 2, monitor=monitor)


def test_a_custom_monitor_reports_at_every_recording_time():
    monitor = _counting_monitor(lambda state: {"n": state})
    result = jb.simulate(jb.policies.make("ucb_n"), GENERAL, 20, 2, times=[5, 10, 20], monitor=monitor)
    np.testing.assert_array_equal(result.monitor["n"], [[5, 10, 20]] * 2)
    run = jb.SimulationRun(jb.policies.make("ucb_n"), GENERAL, 20, 2, times=[5, 10, 20], monitor=monitor, chunk_size=12)
    run.advance(max_chunks=1)  # round 12: the reports of rounds 5 and 10, not a slot still empty
    np.testing.assert_array_equal(run.monitor_record()["n"], [[[5, 10]] * 2])


def test_deviation_bound_arguments():
    for t in (0, 1, [2, np.nan], "10", [True, 3]):
        with pytest.raises(jb.ArgumentError, match=r"t must be"):
            monitors.deviation_bound(t, 4.5)
    for alpha in (-4.5, 0, np.inf, "4.5", True, [4.5]):
        with pytest.raises(ValueError, match=r"alpha must be a (finite )?number > 0"):  # the number rule, then its range
            monitors.deviation_bound(10, alpha)
    for num_arms in (-3, 0, 2.5, True, "2"):  # not a negative probability, not 2.5 arms
        with pytest.raises(ValueError, match=r"num_arms must be an integer >= 1"):
            monitors.deviation_bound(10, 4.5, num_arms=num_arms)


def test_the_default_monitor_finds_the_estimator_or_says_where_to_look():
    from jaxbandit import estimator

    stats = estimator.init(3)
    assert monitors._stats(stats) is stats and monitors._stats(types.SimpleNamespace(stats=stats)) is stats
    with pytest.raises(ValueError, match=r"the estimator_deviation monitor cannot find the policy's estimator: its state is a tuple.*estimator_fn="):
        monitors._stats((stats, 0))


def test_a_sweep_records_its_monitor_and_resumes_it_bit_identically(tmp_path):
    config = {
        "runs": 3, "horizon": 600, "times": 8, "chunk_size": 128, "checkpoint": {"every_chunks": 1},
        "instances": [{"type": "default", "name": "general"}],
        "policies": [{"name": "ucb_n", "alpha": [0.5, 1.0]}],
        "monitor": {"name": "estimator_deviation", "alphas": [0.5, 2.0]},
    }  # fmt: skip
    whole = jb.sweep.run(config, tmp_path / "whole", progress=False)
    assert sorted(whole.cells[0].monitor) == ["first_outside_alpha0.5", "first_outside_alpha2", "outside_rounds_alpha0.5", "outside_rounds_alpha2"]
    assert whole.cells[0].monitor["outside_rounds_alpha0.5"].shape == (3, len(whole.cells[0].times))

    def stop(group, rounds):
        if rounds >= 256:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        jb.sweep.run(config, tmp_path / "resumed", progress=False, after_chunk=stop)
    resumed = jb.sweep.run(config, tmp_path / "resumed", progress=False)
    for a, b in zip(whole.cells, resumed.cells):
        for name in a.monitor:
            np.testing.assert_array_equal(a.monitor[name], b.monitor[name])
        np.testing.assert_array_equal(a.regret, b.regret)


def test_bad_monitor_tables():
    base = {"runs": 1, "horizon": 5, "instances": [{"type": "default", "name": "bandit"}], "policies": [{"name": "ucb"}]}
    for monitor, message in (
        ({"alphas": [1.0]}, r"key 'monitor.name': missing"),
        ({"name": "nope"}, r"key 'monitor.name': unknown monitor 'nope'"),
        ({"name": "estimator_deviation", "alpha": 1}, r"key 'monitor.alpha': unknown key"),
        ({"name": "estimator_deviation", "alphas": [-1]}, r"key 'monitor.alphas': alphas must be a non-empty list of finite numbers > 0"),
        ({"name": "estimator_deviation", "alphas": "45"}, r"key 'monitor.alphas': alphas must be a non-empty list of finite numbers > 0, got '45'"),
    ):
        with pytest.raises(jb.ConfigError, match=message):
            jb.config.load(dict(base, monitor=monitor))


def test_a_checkpoint_resumes_only_with_the_monitor_it_was_taken_with():
    """The same monitor name with other alphas counts something else: its checkpoint is
    refused rather than resumed, which would count the old alphas' rounds under the new
    names (no chunk is run: the check is on the identities)."""
    policy = jb.policies.make("ucb_n")
    taken = jb.SimulationRun(policy, GENERAL, 512, 4, monitor=monitors.estimator_deviation(alphas=(0.1,)))
    saved = taken.checkpoint()
    other = jb.SimulationRun(policy, GENERAL, 512, 4, monitor=monitors.estimator_deviation(alphas=(8.0,)))
    with pytest.raises(ValueError, match=r"another simulation; they differ in monitor_code\.$"):
        other.restore(saved)
    jb.SimulationRun(policy, GENERAL, 512, 4, monitor=monitors.estimator_deviation(alphas=(0.1,))).restore(saved)
