"""The runner: agreement with a NumPy loop, reproducibility invariances, bad input."""

import functools
import json
import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jaxbandit as jb
from jaxbandit import checkpoints, engine, instances, runner
from tests import reference, user_policies

INF = np.inf
# Distinct gaps, so the arm played each round can be read off the per-round regret.
GENERAL = jb.Instance(
    [0.9, 0.5, 0.2, 0.65],
    [[1.0, INF, 0.5, INF], [2.0, 0.7, INF, 1.5], [INF, 0.4, 1.5, 3.0], [0.3, INF, INF, 1.0]],
)


@pytest.mark.parametrize(
    "policy_name, reference_fn", [("ucb_n", reference.ucb_n_arms), ("ucb", reference.ucb_arms), ("greedy", reference.greedy_arms)]
)
def test_engine_matches_numpy_loop_fed_the_same_noise(policy_name, reference_fn):
    horizon, runs, seed = 300, 3, 11
    with jax.enable_x64(True):
        result = jb.simulate(
            jb.policies.make(policy_name), GENERAL, horizon, runs, seed,
            times=np.arange(1, horizon + 1), dtype="float64",
        )
    for run in range(runs):
        z = reference.engine_noise(seed, 0, run, horizon, GENERAL.num_arms)
        expected = reference_fn(GENERAL.mu, GENERAL.sigma, horizon, z)
        got = reference.arms_from_regret(result.regret[run], GENERAL.gaps)
        np.testing.assert_array_equal(got, expected)
        np.testing.assert_array_equal(result.counts[run], np.bincount(expected, minlength=4))


def test_float32_engine_follows_the_float64_one():
    horizon, runs = 300, 8
    times = np.arange(1, horizon + 1)
    r32 = jb.simulate(jb.policies.make("ucb_n"), GENERAL, horizon, runs, 3, times=times)
    with jax.enable_x64(True):
        r64 = jb.simulate(jb.policies.make("ucb_n"), GENERAL, horizon, runs, 3, times=times, dtype="float64")
    # near-ties can flip an argmax in float32; nearly all runs agree exactly
    same = np.all(np.isclose(r32.regret, r64.regret, rtol=1e-5), axis=1)
    assert same.mean() >= 0.75


@pytest.fixture(scope="module")
def reference_runs():
    return jb.simulate(jb.policies.make("ts_n"), GENERAL, 2500, 100, seed=4, chunk_size=1024)


def test_horizons_share_one_compiled_engine(reference_runs):
    """Another horizon records at another number of default times: the engine's
    recording buffer holds a multiple of 32 times, so the chunk compiled for the
    reference runs serves this one too, and the regret at the times both record is
    the same (the padded records are dropped)."""
    sim = runner.cached_simulation(jb.policies.make("ts_n"), engine.DEFAULT_CHUNK_SIZE, None)
    compiled = sim.run_chunk._cache_size()
    shorter = jb.simulate(jb.policies.make("ts_n"), GENERAL, 1000, 100, seed=4)
    assert len(shorter.times) != len(reference_runs.times)
    assert shorter.regret.shape == (100, len(shorter.times))
    assert sim.run_chunk._cache_size() == compiled
    shared, here, there = np.intersect1d(shorter.times, reference_runs.times, return_indices=True)
    assert len(shared) >= 20
    np.testing.assert_array_equal(shorter.regret[:, here], reference_runs.regret[:, there])


def test_results_do_not_depend_on_run_count_or_chunk_size(reference_runs):
    more = jb.simulate(jb.policies.make("ts_n"), GENERAL, 2500, 300, seed=4, chunk_size=333)
    np.testing.assert_array_equal(more.regret[:100], reference_runs.regret)
    np.testing.assert_array_equal(more.counts[:100], reference_runs.counts)
    # runs simulated separately (first_run) are the same runs, numpy integers as Python's
    tail = jb.simulate(jb.policies.make("ts_n"), GENERAL, 2500, np.uint8(50), seed=4, first_run=np.int8(50))
    np.testing.assert_array_equal(tail.regret, reference_runs.regret[50:])
    # a different seed gives different runs
    other = jb.simulate(jb.policies.make("ts_n"), GENERAL, 2500, 100, seed=5)
    assert not np.array_equal(other.regret, reference_runs.regret)


def test_runs_cut_into_groups_are_the_runs_of_one_group(monkeypatch):
    """A policy with a solver runs its runs on a CPU in groups, one a core: 40 runs in
    two groups of 20 are the 40 runs of one group."""
    ucb_n = jb.policies.make("ucb_n")
    asks_nothing = lambda key, state, t, ctx: ucb_n.select_fn(key, state, t, ctx)._replace(request=jnp.float32(0))  # noqa: E731
    stage = jb.Stage(lambda request, state, ctx: (jnp.int32(0), jnp.asarray(True)))
    solver = jb.Solver((stage,), lambda state, decision, answer, t, ctx: (decision.arm, state))
    policy = ucb_n._replace(select_fn=asks_nothing, solver=solver, name="ucb_n_with_a_solver")
    results = {}
    for cores in (1, 2):
        monkeypatch.setattr(runner, "cpu_threads", lambda cores=cores: cores)
        run = jb.SimulationRun(policy, GENERAL, 200, 40, seed=1)
        assert runner._run_groups(run.inputs, run._placement) == cores
        run.advance()
        results[cores] = run.result()
    np.testing.assert_array_equal(results[2].regret, results[1].regret)
    np.testing.assert_array_equal(results[2].counts, results[1].counts)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_recorded_regret_does_not_depend_on_how_many_runs_share_the_program(dtype):
    """The regret recorded at every round, K = 10: 4 runs alone are the first 4 of 12,
    to the bit (a product over the arms whose rounding followed the runs' dimension
    made them differ by an ulp)."""
    inst = jb.instances.bandit(np.linspace(1.0, 0.1, 10))
    simulate = lambda runs: jb.simulate(
        jb.policies.make("ucb_n"), inst, 200, runs, seed=2, times=np.arange(1, 201), dtype=dtype
    )
    with jax.enable_x64(dtype == "float64"):
        few, more = simulate(4), simulate(12)
    np.testing.assert_array_equal(few.counts, more.counts[:4])
    np.testing.assert_array_equal(few.regret, more.regret[:4])


def test_a_run_keeps_the_64_bit_mode_it_was_set_up_in():
    """A float64 run set up in a ``with jax.enable_x64(True):`` scope goes on, checkpoints
    (saying so) and restores outside it, to the results of a run inside it throughout (it
    failed in JAX's loop, and its checkpoint said x64 False beside float64)."""
    inst = jb.instances.bandit(np.linspace(1.0, 0.1, 10))
    setting = dict(seed=2, times=np.arange(1, 201), dtype="float64", chunk_size=100)
    make = lambda: jb.SimulationRun(jb.policies.make("ucb_n"), inst, 200, 4, **setting)  # noqa: E731
    with jax.enable_x64(True):
        whole = jb.simulate(jb.policies.make("ucb_n"), inst, 200, 4, **setting)
        run, resumed = make(), make()
        run.advance(max_chunks=1)
    saved = run.checkpoint()
    assert json.loads(str(saved["identity"]))["x64"] is True
    run.advance()
    resumed.restore(saved)
    resumed.advance()
    for result in (run.result(), resumed.result()):
        assert result.regret.dtype == np.float64
        np.testing.assert_array_equal(result.regret, whole.regret)


def test_compiling_ahead_leaves_nothing_to_compile_and_changes_nothing(reference_runs):
    run = jb.SimulationRun(jb.policies.make("ts_n"), GENERAL, 2500, 100, seed=4, chunk_size=500)
    assert run.compile() > 0
    compiled = []

    def listener(event, duration, **kwargs):
        if event == "/jax/core/compile/backend_compile_duration":
            compiled.append(duration)

    jax.monitoring.register_event_duration_secs_listener(listener)
    try:
        run.advance()
    finally:
        jax.monitoring.unregister_event_duration_listener(listener)
    assert compiled == []
    np.testing.assert_array_equal(run.result().regret, reference_runs.regret)


def test_checkpoint_restores_only_into_the_same_simulation(reference_runs):
    """A checkpoint names the simulation it belongs to: another instance, seed,
    horizon or policy code is refused naming what differs, a dict without identity is
    refused, and
    the same simulation resumes to the uninterrupted results, even from a checkpoint
    whose runs were padded for another device count (100 runs on 8 devices: 104)."""
    policy = jb.policies.make("ts_n")
    first = jb.SimulationRun(policy, GENERAL, 2500, 100, seed=4)
    first.advance(max_chunks=1)
    saved = first.checkpoint()
    other = instances.full_information(GENERAL.mu)
    with pytest.raises(ValueError, match=r"another simulation; they differ in horizon 2500 \(here 1000\), instance, seed 4 \(here 5\), times\.$"):
        jb.SimulationRun(policy, other, 1000, 100, seed=5).restore(saved)
    with pytest.raises(ValueError, match="does not say which simulation it belongs to"):
        jb.SimulationRun(policy, GENERAL, 2500, 100, seed=4).restore({k: v for k, v in saved.items() if k != "identity"})
    # the same arrays under another noise family: other observations
    uniform = jb.Instance(GENERAL.mu, GENERAL.sigma, noise="uniform")
    with pytest.raises(ValueError, match=r"another simulation; they differ in noise 'gaussian' \(here 'uniform'\)\.$"):
        jb.SimulationRun(policy, uniform, 2500, 100, seed=4).restore(saved)
    # the same name, other code (an edited function): the state would mix two policies
    edited = policy._replace(diagnostics_fn=lambda state: {})
    with pytest.raises(ValueError, match=r"another simulation; they differ in policy_code\.$"):
        jb.SimulationRun(edited, GENERAL, 2500, 100, seed=4).restore(saved)
    # which runs, how many, their noise streams, the monitor and the dtype are named too
    for kwargs, named in (
        ({"first_run": 4}, r"first_run 0 \(here 4\)"),
        ({"runs": 60}, r"runs 100 \(here 60\)"),
        ({"noise_index": [1]}, "noise_index"),
        ({"monitor": jb.monitors.estimator_deviation()}, r"monitor None \(here 'estimator_deviation'\), monitor_code"),
    ):
        with pytest.raises(jb.ArgumentError, match=rf"another simulation; they differ in {named}\.$"):
            jb.SimulationRun(policy, GENERAL, 2500, **{"runs": 100, "seed": 4, **kwargs}).restore(saved)
    # a hyper-parameter is named
    with pytest.raises(ValueError, match=r"another simulation; they differ in params\['alpha'\]\.$"):
        ucb = functools.partial(jb.SimulationRun, instance=GENERAL, horizon=2500, runs=100, seed=4)
        ucb(jb.policies.make("ucb_n", alpha=2.0)).restore(ucb(jb.policies.make("ucb_n", alpha=1.0)).checkpoint())
    # an incomplete checkpoint is refused before anything of it is restored
    untouched = jb.SimulationRun(policy, GENERAL, 2500, 100, seed=4)
    with pytest.raises(ValueError, match="the checkpoint has no 'wall_time' entry"):
        untouched.restore({k: v for k, v in saved.items() if k != "wall_time"})
    assert untouched.rounds_done == 0
    renamed = {("leaf_9999" if k == "leaf_0001" else k): v for k, v in saved.items()}  # the count still matches
    with pytest.raises(ValueError, match="engine arrays"):
        untouched.restore(renamed)
    # not a checkpoint at all, a damaged identity, a leaf of another shape: named as such
    with pytest.raises(jb.ArgumentError, match=r"restore takes what checkpoint\(\) returned .*, got NoneType"):
        untouched.restore(None)
    with pytest.raises(jb.ArgumentError, match="'identity' entry is not the JSON record"):
        untouched.restore({**saved, "identity": np.asarray("{not json")})
    with jax.enable_x64(True), pytest.raises(jb.ArgumentError, match=r"another simulation; they differ in x64 False \(here True\)\.$"):
        jb.SimulationRun(policy, GENERAL, 2500, 100, seed=4).restore(saved)  # a policy's float64 values compute otherwise
    with pytest.raises(jb.ArgumentError, match=r"'wall_time' is not one number of seconds: array\(\[1\., 2\.\]\)"):
        untouched.restore({**saved, "wall_time": np.asarray([1.0, 2.0])})
    wrong = np.zeros(saved["leaf_0001"].shape[:1] + (100, 7), saved["leaf_0001"].dtype)
    with pytest.raises(jb.ArgumentError, match=r"checkpoint leaf 1 has shape \(\d+, 100, 7\)"):
        untouched.restore({**saved, "leaf_0001": wrong})
    assert untouched.rounds_done == 0

    padded = {k: np.concatenate([v, v[:, :4]], axis=1) if k.startswith("leaf_") and v.ndim >= 2 else v for k, v in saved.items()}
    resumed = jb.SimulationRun(policy, GENERAL, 2500, 100, seed=4)
    resumed.restore(padded)
    assert resumed.rounds_done == first.rounds_done
    resumed.advance()
    np.testing.assert_array_equal(resumed.result().regret, reference_runs.regret)
    # an identity that names no noise family is a Gaussian simulation's
    identity = json.loads(str(saved["identity"]))
    assert identity.pop("noise") == "gaussian"
    unnamed = jb.SimulationRun(policy, GENERAL, 2500, 100, seed=4)
    unnamed.restore({**saved, "identity": np.asarray(json.dumps(identity, sort_keys=True))})
    assert unnamed.rounds_done == first.rounds_done
    # fewer padded runs than here (from fewer devices): filled up, the real runs kept
    fitted = checkpoints.fit_runs(np.arange(12).reshape(2, 3, 2), 4, 3)
    assert fitted.shape == (2, 4, 2)
    np.testing.assert_array_equal(fitted[:, :3], np.arange(12).reshape(2, 3, 2))


def test_batch_of_instances_equals_separate_simulations(reference_runs):
    batch = instances.stack([GENERAL, instances.full_information(GENERAL.mu)])
    result = jb.simulate(jb.policies.make("ts_n"), batch, 2500, 100, seed=4)
    assert result.regret.shape == (2, 100, len(result.times))
    assert result.counts.shape == (2, 100, 4)
    np.testing.assert_array_equal(result.regret[0], reference_runs.regret)
    assert result.final_regret[1].mean() < result.final_regret[0].mean()
    # the statistics are over each instance's runs
    assert result.mean_regret().shape == result.standard_error().shape == (2, len(result.times))
    np.testing.assert_allclose(result.mean_regret(), result.regret.mean(axis=1), rtol=1e-12)
    np.testing.assert_allclose(result.standard_error(), result.regret.std(axis=1, ddof=1) / np.sqrt(100), rtol=1e-12)


def test_common_random_numbers_across_policies():
    """Two policies with the same seed see the same noise: both match NumPy loops fed
    one noise array, and their paired difference has a smaller spread than unpaired."""
    horizon, seed = 200, 8
    with jax.enable_x64(True):
        a = jb.simulate(jb.policies.make("ucb_n"), GENERAL, horizon, 2, seed, times=np.arange(1, horizon + 1), dtype="float64")
        b = jb.simulate(jb.policies.make("greedy"), GENERAL, horizon, 2, seed, times=np.arange(1, horizon + 1), dtype="float64")
    z = reference.engine_noise(seed, 0, 1, horizon, 4)
    np.testing.assert_array_equal(reference.arms_from_regret(a.regret[1], GENERAL.gaps), reference.ucb_n_arms(GENERAL.mu, GENERAL.sigma, horizon, z))
    np.testing.assert_array_equal(reference.arms_from_regret(b.regret[1], GENERAL.gaps), reference.greedy_arms(GENERAL.mu, GENERAL.sigma, horizon, z))


def test_result_fields_and_times():
    result = jb.simulate(jb.policies.make("ucb"), GENERAL, 1000, 5, seed=0)
    assert result.times[-1] == 1000 and np.all(np.diff(result.times) > 0)
    assert 50 <= len(result.times) <= 100
    assert result.regret.dtype == np.float64 and result.regret.shape == (5, len(result.times))
    assert result.counts.shape == (5, 4) and np.all(result.counts.sum(axis=1) == 1000)
    np.testing.assert_allclose(result.final_regret, result.counts @ GENERAL.gaps, rtol=1e-6)
    assert np.all(np.diff(result.regret, axis=1) >= 0)
    np.testing.assert_allclose(result.mean_regret(), result.regret.mean(axis=0), rtol=1e-12)
    np.testing.assert_allclose(result.standard_error(), result.regret.std(axis=0, ddof=1) / np.sqrt(5), rtol=1e-12)
    assert result.diagnostics["initial_rounds"].shape == (5,)
    assert np.all(result.diagnostics["initial_rounds"] == 4)
    custom = jb.simulate(jb.policies.make("ucb"), GENERAL, 100, 2, times=[10, 50])
    np.testing.assert_array_equal(custom.times, [10, 50, 100])


def test_noise_free_instance_never_produces_nan():
    inst = jb.Instance([1.0, 0.5, 0.0], [[0.0, 1.0, INF], [INF, 0.0, INF], [1.0, 1.0, 0.0]])
    for name in jb.policies.names():
        if name in ("ucb", "ucb_n", "ts", "ts_n", "greedy", "eps_greedy"):
            result = jb.simulate(jb.policies.make(name), inst, 300, 4, seed=1)
            assert np.all(np.isfinite(result.regret)), name
    # with exact observations of every arm, greedy commits to the best arm after round K
    result = jb.simulate(jb.policies.make("greedy"), inst, 300, 4, seed=1)
    np.testing.assert_array_equal(result.counts[:, 0], 300 - 2)


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"horizon": 0}, "horizon must be an integer >= 1, got 0"),
        ({"horizon": 10.5}, "horizon must be an integer >= 1, got float 10.5"),
        # round counts are int32 on the device: beyond this a chunk's end would overflow
        ({"horizon": 2**31 - 2}, r"horizon must be at most 1073741824, got 2147483646"),
        ({"runs": -3}, "runs must be an integer >= 1, got -3"),
        ({"seed": -1}, "seed must be an integer >= 0, got -1"),
        ({"times": [5, 3]}, "times must be strictly increasing"),
        ({"times": [0, 3]}, r"times must lie in \[1, horizon=100\]"),
        ({"times": [3, 200]}, r"times must lie in \[1, horizon=100\]"),
        # unsigned differences wrap around: [8, 3] would pass a difference test and replay rounds 4-8
        ({"times": np.array([8, 3], np.uint32)}, r"times must be strictly increasing, got \[8, 3\]"),
        ({"times": np.array([2**64 - 1], np.uint64)}, r"times must lie in \[1, horizon=100\]"),
        ({"times": [3 + 7j, 8]}, "times must be integers"),  # not their real part
        ({"times": [True, 8]}, r"times must be integers, got \[True, 8\]"),  # not round 1
        # in uint32 arithmetic first_run + runs wraps to 1: runs 2**32 - 1 and 0 would be
        # simulated, and run 0 twice
        ({"first_run": np.uint32(2**32 - 1)}, r"run indices must stay below 2\*\*32, got first_run \+ runs = 4294967297"),
        ({"progress": 5}, r"progress must be a function \(rounds_done, horizon\) or None, got 5"),
        ({"dtype": "int32"}, "dtype must be float32 or float64"),
        ({"dtype": None}, "dtype must be float32 or float64, got None"),  # numpy reads None as float64
        ({"times": [1e20]}, r"times must lie in \[1, horizon=100\], got \[1e\+20\]"),  # not the int64 it wraps to
        ({"dtype": "float64"}, "needs 64-bit JAX"),
        ({"chunk_size": 0}, "chunk_size must be an integer >= 1"),
        ({"chunk_size": 2**31}, r"chunk_size must be at most 1073741824, got 2147483648"),
        ({"devices": []}, r"devices must be a non-empty sequence of JAX devices, got \[\]"),
        ({"devices": ["cpu"]}, "devices must be a non-empty sequence of JAX devices"),
        ({"devices": jax.devices()[:1] * 2}, "devices must be distinct"),
    ],
)
def test_bad_simulate_arguments(kwargs, message):
    args = {"horizon": 100, "runs": 2}
    args.update(kwargs)
    with pytest.raises(ValueError, match=message):
        jb.simulate(jb.policies.make("ucb"), GENERAL, **args)


def test_params_are_checked_as_the_engine_holds_them():
    """A value float32 rounds out of the policy's range is refused, naming the rounding
    (0.99999999 ran as gamma = 1.0), as is one it rounds to 0; a hyper-parameter that
    ``params`` does not name keeps the policy's value."""
    pair = instances.stack([GENERAL, GENERAL])
    with pytest.raises(
        ValueError,
        match=r"params of cell 1 for policy 'lp_explore': gamma must be in \(0, 1\), got 1.0 \(gamma = 0.99999999 is 1.0 in float32; use dtype='float64'\)\.",
    ):
        jb.SimulationRun(jb.policies.make("lp_explore"), pair, 20, 2, params={"gamma": [0.5, 0.99999999]})
    with pytest.raises(ValueError, match=r"parameter 'alpha' = 1e-46 is 0 in float32"):
        jb.SimulationRun(jb.policies.make("ucb_n", alpha=1e-46), GENERAL, 20, 2)
    run = jb.SimulationRun(jb.policies.make("lp_explore", alpha=5.0), pair, 20, 2, params={"gamma": [0.5, 0.9]})
    assert run.params == {"alpha": 5.0, "gamma": [0.5, 0.9]}


def test_bad_advance_arguments():
    run = jb.SimulationRun(jb.policies.make("ucb"), GENERAL, 100, 2)
    for bad in (-1, 0, "2", 1.5, True):  # not "nothing" for -1 or "two chunks" for 1.5
        with pytest.raises(ValueError, match=rf"max_chunks must be an integer >= 1, got .*{bad!r}"):
            run.advance(max_chunks=bad)
    assert run.rounds_done == 0


def test_params_name_only_the_policys_hyper_parameters():
    """A misspelt name would be recorded in the results as if it had been used."""
    policy = jb.policies.make("ucb")
    with pytest.raises(ValueError, match=r"params names \['alhpa'\], which policy 'ucb' does not have; its hyper-parameters are \['alpha'\]"):
        jb.SimulationRun(policy, GENERAL, 100, 2, params={"alpha": 1.0, "alhpa": 2.0})
    with pytest.raises(ValueError, match=r"params must be a dict of the policy's hyper-parameters, got \[1.0\]"):
        jb.SimulationRun(policy, GENERAL, 100, 2, params=[1.0])


def test_noise_index_must_name_a_noise_stream():
    """Only integers in [0, 2**32) name a stream: cast to uint32, 0.9, NaN and 2**32
    would all become stream 0, another cell's noise."""
    policy = jb.policies.make("ucb_n")
    for bad in ([0.9], [np.nan], [2**32], [-1], [True], [0, 1]):
        with pytest.raises(ValueError, match=r"noise_index must hold one integer in \[0, 2\*\*32\) per cell \(1\), got"):
            jb.SimulationRun(policy, GENERAL, 100, 2, noise_index=bad)
    jb.SimulationRun(policy, GENERAL, 100, 2, noise_index=[2**32 - 1])


def test_a_grid_on_one_instance_makes_a_cell_per_value_on_its_noise():
    """``params`` with one value per cell on a single instance: the cells of the
    stacked instance with one noise stream, and each cell the run of its value alone."""
    policy = jb.policies.make("ucb_n")

    def result(instance, **kwargs):
        run = jb.SimulationRun(policy, instance, 150, 3, seed=2, **kwargs)
        run.advance()
        return run.result()

    grid = result(GENERAL, params={"alpha": [0.5, 2.0]})
    assert grid.regret.shape == (2, 3, len(grid.times))
    stacked = result(jb.instances.stack([GENERAL] * 2), params={"alpha": [0.5, 2.0]}, noise_index=[0, 0])
    np.testing.assert_array_equal(grid.regret, stacked.regret)
    np.testing.assert_array_equal(grid.regret[1], result(GENERAL, params={"alpha": 2.0}).regret)
    # a noise stream given is the one the cells run on
    third = result(GENERAL, params={"alpha": [0.5, 2.0]}, noise_index=[3, 3])
    np.testing.assert_array_equal(third.regret, result(jb.instances.stack([GENERAL] * 2), params={"alpha": [0.5, 2.0]}, noise_index=[3, 3]).regret)
    assert not np.array_equal(third.regret, grid.regret)
    with pytest.raises(ValueError, match=r"parameter 'alpha' must be a scalar or have one value per cell \(3\), got shape \(2,\)"):
        jb.SimulationRun(jb.policies.make("lp_explore"), GENERAL, 150, 3, params={"alpha": [4.5, 5.0], "gamma": [0.3, 0.5, 0.7]})
    # the values a simulation records are those it computes with, set at its set-up:
    # not those the caller's array holds later, which would label alpha 0.5's runs 4.0
    values = np.array([0.5, 2.0])
    changed = jb.SimulationRun(policy, GENERAL, 150, 3, seed=2, params={"alpha": values})
    values[:] = [4.0, 8.0]
    changed.advance()
    assert changed.result().params == {"alpha": [0.5, 2.0]}
    np.testing.assert_array_equal(changed.result().regret, grid.regret)
    assert changed.identity() == jb.SimulationRun(policy, GENERAL, 150, 3, seed=2, params={"alpha": [0.5, 2.0]}).identity()


def test_params_values_go_through_the_policys_own_check():
    """A grid given as ``params`` gets the ranges the factory checks: a negative
    exploration scale would otherwise run (its square root a NaN index nobody sees)."""
    two_cells = jb.Instance(np.stack([GENERAL.mu] * 2), np.stack([GENERAL.sigma] * 2))
    with pytest.warns(jb.policies.lp_explore.TheoryWarning):
        lp_explore = jb.policies.make("lp_explore", alpha=1.0)
    with pytest.raises(ValueError, match=r"params of cell 1 for policy 'lp_explore': alpha must be a finite number > 0, got -1.0"):
        jb.SimulationRun(lp_explore, two_cells, 100, 2, params={"alpha": [4.5, -1.0], "gamma": 0.5})
    with pytest.raises(ValueError, match=r"params of cell 0 for policy 'lp_explore': gamma must be in \(0, 1\), got 1.0"):
        jb.SimulationRun(lp_explore, two_cells, 100, 2, params={"alpha": 4.5, "gamma": 1.0})
    with pytest.raises(ValueError, match=r"params for policy 'ossb': epsilon must be a finite number >= 0, got -0.5"):
        jb.SimulationRun(jb.policies.make("ossb"), GENERAL, 100, 2, params={"epsilon": -0.5, "gamma": 0.0})
    for name, params in (("ucb_n", {"alpha": 0.0}), ("eps_greedy", {"c": -1.0}), ("ucb_maxn", {"alpha": -2.0}),
                         ("eps_greedy_lp", {"c": 1.0, "d": 0.0}), ("ucb_lp", {"c": -1.0, "alpha": 1.0})):  # fmt: skip
        bad = next(key for key, value in params.items() if value <= 0)
        with pytest.raises(ValueError, match=rf"params for policy '{name}': {bad} must be a finite number > 0"):
            jb.SimulationRun(jb.policies.make(name), GENERAL, 100, 2, params=params)
    # a user's policy: its check sees one cell's values at a time, as floats
    seen = []

    def check_params(params):
        seen.append(params)
        if params["eps"] > 1:
            raise ValueError(f"eps must be at most 1, got {params['eps']!r}.")

    policy = user_policies.traced_threshold()._replace(check_params=check_params)
    with pytest.raises(ValueError, match=r"params of cell 1 for policy 'traced_threshold': eps must be at most 1, got 3.0"):
        jb.SimulationRun(policy, two_cells, 100, 2, params={"eps": [1, 3]})
    assert seen == [{"eps": 1.0}, {"eps": 3.0}]
    with pytest.raises(jb.PolicyError, match=r"check_params must be a function or None, got 1"):
        jb.SimulationRun(policy._replace(check_params=1), GENERAL, 100, 2)
    # a check_params with a bug of its own (a key the params do not hold): named, not a bare KeyError
    buggy = policy._replace(check_params=lambda params: params["alpha"] > 0)
    with pytest.raises(jb.PolicyError, match=r"policy 'traced_threshold': check_params\(\{'eps': 0.1\}\) failed \(KeyError: 'alpha'\)"):
        jb.SimulationRun(buggy, GENERAL, 100, 2)

def test_own_arm_policies_refuse_an_arm_that_does_not_observe_itself():
    """Arm 1 is observed only by playing arm 0: ucb and ts (own-arm feedback) would play
    it forever, its index never coming down."""
    blind = jb.Instance([1.0, 0.5], [[1.0, 1.0], [1.0, np.inf]])
    for name in ("ucb", "ts"):
        with pytest.raises(ValueError, match=rf"policy '{name}' learns each arm only from its own plays, but arm 1 reveals nothing about itself"):
            jb.simulate(jb.policies.make(name), blind, 10, 2)
    with pytest.raises(ValueError, match=r"instance 1: policy 'ucb' .* arm 1"):
        jb.simulate(jb.policies.make("ucb"), jb.instances.stack([jb.instances.bandit([1.0, 0.5]), blind]), 10, 2)
    assert jb.policies.make("ucb_n").options.get("feedback") is None


def test_the_longest_horizon_runs_to_its_end():
    """The last chunks before ``MAX_ROUNDS`` (the run fast-forwarded to 300 rounds
    before it) end exactly at the horizon and record there: no round count overflows."""
    horizon = engine.MAX_ROUNDS
    sim = jb.SimulationRun(jb.policies.make("ucb_n"), GENERAL, horizon, 2, 0, times=[horizon - 100, horizon])
    sim.carry = sim.carry._replace(round=np.int32(horizon - 300))
    sim.advance(max_chunks=3)
    assert sim.done and sim.rounds_done == horizon
    assert np.all(sim.result().regret > 0)


def test_bad_policy_and_instance_arguments():
    with pytest.raises(ValueError, match="policy must be a jaxbandit.Policy"):
        jb.simulate("ucb", GENERAL, 10, 1)
    with pytest.raises(ValueError, match="instance must be a jaxbandit.Instance"):
        jb.simulate(jb.policies.make("ucb"), (GENERAL.mu, GENERAL.sigma), 10, 1)


@pytest.mark.slow
def test_ucb_regret_matches_lai_robbins_constant():
    """UCB (alpha=1) on a 2-armed Gaussian bandit: regret / log T -> alpha 2 sigma^2 / Delta.

    sigma = 2, Delta = 2: the constant is 4.  2000 runs, T = 1e5; tolerance 5% of the
    constant, and a standard error below 0.05.  The ratio approaches the constant from
    below, so it also increases from T = 1e3 to 1e5.
    """
    result = jb.simulate(jb.policies.make("ucb", alpha=1.0), instances.bandit([2.0, 0.0], sigma=2.0), 100_000, 2000, seed=0, times=[1000, 10_000, 100_000])
    ratio = result.regret.mean(axis=0) / np.log(result.times)
    standard_error = result.regret.std(axis=0, ddof=1) / math.sqrt(2000) / np.log(result.times)
    assert abs(ratio[-1] - 4.0) < 0.05 * 4.0, (ratio, standard_error)
    assert standard_error[-1] < 0.05
    assert ratio[0] < ratio[1] < ratio[2]


def test_a_signal_stops_a_simulation_after_its_chunk_and_advance_goes_on(default_signal_handlers):
    """Ctrl-C during a chunk of ``advance()`` (Python's own handlers set): the chunk
    finishes, ``Stopped`` is raised, and ``advance()`` goes on from there to the same
    results as an uninterrupted run."""
    import signal

    from jaxbandit import stopping

    policy = jb.policies.make("ucb_n")
    whole = jb.SimulationRun(policy, GENERAL, 300, 4, seed=2, chunk_size=100)
    whole.advance()
    stopped = jb.SimulationRun(policy, GENERAL, 300, 4, seed=2, chunk_size=100)
    with pytest.raises(stopping.Stopped):
        stopped.advance(progress=lambda done, horizon: done == 100 and signal.raise_signal(signal.SIGINT))
    assert stopped.rounds_done == 100 and signal.getsignal(signal.SIGINT) is signal.default_int_handler
    stopped.advance()
    np.testing.assert_array_equal(stopped.result().regret, whole.result().regret)
    np.testing.assert_array_equal(stopped.result().counts, whole.result().counts)
    # asked for after the last chunk: taken as advance() returns, not dropped
    last = jb.SimulationRun(policy, GENERAL, 300, 4, seed=2, chunk_size=100)
    with pytest.raises(stopping.Stopped):
        last.advance(progress=lambda done, horizon: done == horizon and signal.raise_signal(signal.SIGINT))
    assert last.done and signal.getsignal(signal.SIGINT) is signal.default_int_handler
    np.testing.assert_array_equal(last.result().regret, whole.result().regret)
    # a handler the user set is theirs: it is called, the run goes on, and it stays
    calls = []
    users = lambda signum, frame: calls.append(signum)  # noqa: E731
    signal.signal(signal.SIGINT, users)
    theirs = jb.SimulationRun(policy, GENERAL, 300, 4, seed=2, chunk_size=100)
    try:
        theirs.advance(progress=lambda done, horizon: done == 100 and signal.raise_signal(signal.SIGINT))
    except stopping.Stopped:  # a KeyboardInterrupt would stop the whole test session
        pytest.fail("the run took the signal over the user's own handler")
    assert theirs.done and calls == [signal.SIGINT] and signal.getsignal(signal.SIGINT) is users
    np.testing.assert_array_equal(theirs.result().regret, whole.result().regret)


def test_a_signal_during_a_simulation_s_setup_stops_it_before_its_first_chunk(default_signal_handlers):
    """Ctrl-C while ``jb.simulate`` sets its run up (here while the contract check traces
    the policy, as the signal arrives in a script's first seconds): ``Stopped`` before
    any chunk runs, not a ``KeyboardInterrupt`` out of a compile."""
    import signal

    from jaxbandit import stopping

    ucb_n = jb.policies.make("ucb_n")
    fired = []

    def select_fn(key, state, t, ctx):
        if not fired:
            fired.append(True)
            signal.raise_signal(signal.SIGINT)
        return ucb_n.select_fn(key, state, t, ctx)

    chunks = []
    with pytest.raises(stopping.Stopped):
        jb.simulate(ucb_n._replace(select_fn=select_fn), GENERAL, 300, 4, chunk_size=100, progress=lambda d, h: chunks.append(d))
    assert fired and chunks == []


def test_noise_levels_the_estimator_would_weigh_otherwise_are_refused():
    """A precision ``1 / sigma**2`` above the estimator's cap on one sample's weight
    (sigma below 2.3e-8 in float32) would count the sample as less precise than it is,
    so that results would change with the instance's units; a subnormal one (sigma
    above 9.2e18 in float32) XLA flushes to 0, ignoring the sample.  Both are refused,
    naming the entry; where kept, means and noise scaled by a power of two play the
    same arms."""
    ucb_n = jb.policies.make("ucb_n")
    mu = np.array([1.0, 0.5, 0.2])
    with pytest.raises(jb.ArgumentError, match=r"^instance sigma\[0, 0\] = 1e-08 is nonzero but its precision 1 / sigma\*\*2 is more than the 1.84e\+15 the estimator gives one sample in float32 \(sigma at least 2.33e-08\): .*, or dtype='float64'\.$") as caught:
        jb.simulate(ucb_n, instances.bandit(mu * 1e-8, 1e-8), 50, 2)
    assert caught.value.argument == "instance"
    with pytest.raises(jb.ArgumentError, match=r"^instance sigma\[1, 1\] = 1.2e\+19 is finite but its precision 1 / sigma\*\*2 is 0 in float32, or below its smallest normal number, which XLA flushes to 0 \(the sample would be ignored\)"):
        jb.simulate(ucb_n, jb.Instance(mu, np.diag([1.0, 1.2e19, 1.0]) + np.where(np.eye(3) > 0, 0, np.inf)), 50, 2)
    scale = 2.0**-20
    one = jb.simulate(ucb_n, instances.bandit(mu, 1.0), 300, 4, seed=1)
    small = jb.simulate(ucb_n, instances.bandit(mu * scale, scale), 300, 4, seed=1)
    np.testing.assert_array_equal(small.counts, one.counts)
    np.testing.assert_array_equal(small.regret, one.regret * scale)


# Simulations on named devices among 4 forced host devices, in a process of their own:
# printed as JSON (where every array of each lived, and the regret it gave).
_NAMED_DEVICES_SCRIPT = """
import json
import jax, numpy as np
import jaxbandit as jb
devices = jax.devices()
policy, inst = jb.policies.make("ucb_n"), jb.instances.default_instances()["graph_star"]
out = {}
named = {"every": None, "first": devices[:1], "third": devices[2:3], "second_and_third": devices[1:3]}
for name, chosen in named.items():
    run = jb.SimulationRun(policy, inst, 50, 3, 0, chunk_size=20, devices=chosen)
    where = lambda *trees: {d.id for leaf in jax.tree_util.tree_leaves(trees) for d in leaf.devices()}
    set_up = where(run._carries, run._keys, run._env, run._ctx, run._times_device)
    run.advance()
    out[name] = {"devices": sorted(set_up | where(run._carries)), "regret": run.result().regret.tolist()}
print(json.dumps(out))
"""


def test_runs_live_on_the_devices_named():
    """``devices=`` is where a simulation's arrays live and its chunks run, also for
    one device that is not JAX's default one: its initial state, keys, context and
    carries (4 forced host devices, ``ucb_n``, 3 runs x 50 rounds in chunks of 20), to
    the bits of the first device alone."""
    import os
    import subprocess
    import sys

    env = dict(os.environ, XLA_FLAGS="--xla_force_host_platform_device_count=4", JAX_PLATFORMS="cpu")
    proc = subprocess.run([sys.executable, "-c", _NAMED_DEVICES_SCRIPT], env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = json.loads(proc.stdout)
    assert out["every"]["devices"] == [0, 1, 2, 3]  # the default: every visible device
    assert out["first"]["devices"] == [0]
    assert out["third"]["devices"] == [2]
    assert out["second_and_third"]["devices"] == [1, 2]
    for name in ("every", "third", "second_and_third"):
        assert out[name]["regret"] == out["first"]["regret"], name
