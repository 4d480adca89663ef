"""The engine: agreement with a NumPy loop, reproducibility invariances, bad input."""

import math
import sys

import jax
import numpy as np
import pytest

import jaxbandit as jb
from jaxbandit import instances
from tests import reference

INF = np.inf
# Distinct gaps, so the arm played each round can be read off the per-round regret.
GENERAL = jb.Instance(
    [0.9, 0.5, 0.2, 0.65],
    [[1.0, INF, 0.5, INF], [2.0, 0.7, INF, 1.5], [INF, 0.4, 1.5, 3.0], [0.3, INF, INF, 1.0]],
)


@pytest.mark.parametrize("policy_name, reference_fn", [("ucb_n", reference.ucb_n_arms), ("greedy", reference.greedy_arms)])
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


def test_results_do_not_depend_on_run_count_or_chunk_size(reference_runs):
    more = jb.simulate(jb.policies.make("ts_n"), GENERAL, 2500, 300, seed=4, chunk_size=333)
    np.testing.assert_array_equal(more.regret[:100], reference_runs.regret)
    np.testing.assert_array_equal(more.counts[:100], reference_runs.counts)
    # runs simulated separately (first_run) are the same runs
    tail = jb.simulate(jb.policies.make("ts_n"), GENERAL, 2500, 50, seed=4, first_run=50)
    np.testing.assert_array_equal(tail.regret, reference_runs.regret[50:])
    # a different seed gives different runs
    other = jb.simulate(jb.policies.make("ts_n"), GENERAL, 2500, 100, seed=5)
    assert not np.array_equal(other.regret, reference_runs.regret)


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


def test_batch_of_instances_equals_separate_simulations(reference_runs):
    batch = instances.stack([GENERAL, instances.full_information(GENERAL.mu)])
    result = jb.simulate(jb.policies.make("ts_n"), batch, 2500, 100, seed=4)
    assert result.regret.shape == (2, 100, len(result.times))
    assert result.counts.shape == (2, 100, 4)
    np.testing.assert_array_equal(result.regret[0], reference_runs.regret)
    assert result.final_regret[1].mean() < result.final_regret[0].mean()


def test_play_counts_kept_by_the_policy_or_the_engine_agree():
    """A policy's ``counts_fn`` spares the engine its own copy of the counts; without
    it the engine counts.  Same regret and counts either way, for any chunk size."""
    policy = jb.policies.make("ucb_n")
    engine_counted = policy._replace(name="ucb_n_engine_counts", counts_fn=None)
    a = jb.simulate(policy, GENERAL, 700, 20, seed=1, chunk_size=100)
    b = jb.simulate(engine_counted, GENERAL, 700, 20, seed=1, chunk_size=300)
    np.testing.assert_array_equal(a.regret, b.regret)
    np.testing.assert_array_equal(a.counts, b.counts)
    np.testing.assert_array_equal(a.counts.sum(axis=1), 700)


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
        ({"horizon": 0}, "horizon must be a positive integer, got 0"),
        ({"horizon": 10.5}, "horizon must be a positive integer, got 10.5"),
        ({"runs": -3}, "runs must be a positive integer, got -3"),
        ({"seed": -1}, "seed must be in"),
        ({"times": [5, 3]}, "times must be strictly increasing"),
        ({"times": [0, 3]}, r"times must lie in \[1, horizon=100\]"),
        ({"times": [3, 200]}, r"times must lie in \[1, horizon=100\]"),
        ({"dtype": "int32"}, "dtype must be float32 or float64"),
        ({"dtype": "float64"}, "needs 64-bit JAX"),
        ({"chunk_size": 0}, "chunk_size must be a positive integer"),
    ],
)
def test_bad_simulate_arguments(kwargs, message):
    args = {"horizon": 100, "runs": 2}
    args.update(kwargs)
    with pytest.raises(ValueError, match=message):
        jb.simulate(jb.policies.make("ucb"), GENERAL, **args)


def test_bad_policy_and_instance_arguments():
    with pytest.raises(ValueError, match="policy must be a Policy"):
        jb.simulate("ucb", GENERAL, 10, 1)
    with pytest.raises(ValueError, match="instance must be a jaxbandit.Instance"):
        jb.simulate(jb.policies.make("ucb"), (GENERAL.mu, GENERAL.sigma), 10, 1)


@pytest.mark.slow
def test_ucb_regret_matches_lai_robbins_constant():
    """UCB (alpha=1) on a 2-armed Gaussian bandit: regret / log T -> alpha 2 sigma^2 / Delta.

    sigma = 2, Delta = 2: the constant is 4.  2000 runs, T = 1e5: measured 3.94 with a
    standard error of 0.035; tolerance 5% of the constant.  The ratio approaches the
    constant from below, so it also increases from T = 1e3 to 1e5.
    """
    result = jb.simulate(jb.policies.make("ucb", alpha=1.0), instances.bandit([2.0, 0.0], sigma=2.0), 100_000, 2000, seed=0, times=[1000, 10_000, 100_000])
    ratio = result.regret.mean(axis=0) / np.log(result.times)
    standard_error = result.regret.std(axis=0, ddof=1) / math.sqrt(2000) / np.log(result.times)
    assert abs(ratio[-1] - 4.0) < 0.05 * 4.0, (ratio, standard_error)
    assert standard_error[-1] < 0.05
    assert ratio[0] < ratio[1] < ratio[2]


# -- the compacted solve path (policies with solve_fn / fallback_solve_fn) ------------

from typing import NamedTuple  # noqa: E402

import jax.numpy as jnp  # noqa: E402

from jaxbandit import estimator  # noqa: E402
from jaxbandit.base import Decision, Policy  # noqa: E402
import importlib  # noqa: E402
from jaxbandit.policies._common import estimator_update  # noqa: E402


class _Answer(NamedTuple):
    arm: jnp.ndarray
    needs_fallback: jnp.ndarray


def _needs(state, t):
    # run-dependent: depends on the run's own counts
    return (t % 3 == 0) & (state.stats.counts[0] % 2 == 0)


def _first_stage(mean):
    return _Answer(jnp.argmin(mean).astype(jnp.int32), mean[0] > mean[1])


def _second_stage(mean):
    return _Answer(jnp.argmax(mean[::-1]).astype(jnp.int32), jnp.asarray(False))


def _toy_policy(name: str, compacted: bool) -> Policy:
    """Greedy, except that some run-dependent rounds play the answer of a 'solve'."""

    def select_fn(key, state, t, ctx):
        mean = estimator.mean(state.stats)
        greedy = jnp.argmax(mean).astype(jnp.int32)
        needs = _needs(state, t)
        if compacted:
            return Decision(greedy, needs, mean)
        first = _first_stage(mean)
        answer = jnp.where(first.needs_fallback, _second_stage(mean).arm, first.arm)
        return Decision(jnp.where(needs, answer, greedy), jnp.asarray(False))

    def update_fn(state, arm, values, ctx):
        return estimator_update(state, arm, values, ctx.precision, jnp.asarray(False))

    def finish_fn(state, decision, answer, t, ctx):
        return jnp.where(decision.needs_solve, answer.arm, decision.arm), state

    return Policy(
        name, {}, importlib.import_module("jaxbandit.policies.ucb")._init, select_fn, update_fn, lambda s: {},
        solve_fn=(lambda request, ctx: _first_stage(request)) if compacted else None,
        finish_fn=finish_fn if compacted else None,
        fallback_solve_fn=(lambda request, ctx: _second_stage(request)) if compacted else None,
    )


def test_buffer_sizes_shrink_by_four_down_to_the_smallest():
    assert sys.modules["jaxbandit.simulate"].buffer_sizes(256) == (256, 64, 16)
    assert sys.modules["jaxbandit.simulate"].buffer_sizes(100) == (100, 25)
    assert sys.modules["jaxbandit.simulate"].buffer_sizes(8) == (8,)


def test_compacted_solves_equal_dense_evaluation_for_any_buffer_size():
    batch = instances.stack([GENERAL, instances.full_information(GENERAL.mu)])
    dense = jb.simulate(_toy_policy("toy_dense", False), batch, 200, 13, seed=2)
    # 64: buffers of 26 (clipped to the 26 runs) and 16, so passes of both sizes run.
    for solve_batch in (1, 4, 64, None):
        compacted = jb.simulate(_toy_policy("toy_compacted", True), batch, 200, 13, seed=2, solve_batch=solve_batch)
        np.testing.assert_array_equal(compacted.regret, dense.regret)
        np.testing.assert_array_equal(compacted.counts, dense.counts)


def _all_stages(policy, decision, state, ctx, sizes, fallback_sizes):
    """Every solve stage in sequence, unconditionally (the engine skips the later ones
    behind a cond when no run needs them)."""
    simulate_module = sys.modules["jaxbandit.simulate"]
    answers = simulate_module._first_stage(policy, decision, state, ctx, sizes)
    return simulate_module._later_stages(policy, decision, answers, state, ctx, sizes, fallback_sizes)


def test_fallback_update_reaches_exactly_the_runs_the_fallback_served():
    num_cells, num_runs = 2, 23
    request = jnp.arange(num_cells * num_runs, dtype=jnp.float32).reshape(num_cells, num_runs)
    needs = (request % 3) != 0
    first = lambda r, ctx: _Answer(jnp.int32(1), (r % 2) == 1)
    second = lambda r, ctx: _Answer(jnp.int32(2), jnp.asarray(False))
    update = lambda state, answer, ctx: state + 100 * answer.arm.astype(jnp.float32) + ctx
    policy = Policy("toy", {}, None, None, None, None, solve_fn=first, fallback_solve_fn=second, fallback_update_fn=update)
    ctx = jnp.asarray([0.5, 0.25])  # a per-cell context leaf
    decision = Decision(jnp.zeros_like(needs, jnp.int32), needs, request)
    served = needs & ((request % 2) == 1)
    state = -request
    for sizes, fallback_sizes in (((64, 16), (8, 2)), ((4,), (1,)), ((46,), (46,))):
        answers, new_state = jax.jit(
            lambda d, s: _all_stages(policy, d, s, ctx, sizes, fallback_sizes)
        )(decision, state)
        np.testing.assert_array_equal(answers.arm, np.where(served, 2, np.where(needs, 1, 0)))
        expected = np.where(served, -request + 200 + np.asarray(ctx)[:, None], -request)
        np.testing.assert_array_equal(new_state, expected)


def test_three_stages_serve_exactly_the_runs_each_needs():
    """A cheap first stage (served in one pass, or for every run when more than a
    quarter wait), a check with a state update, a full solve with another: each later
    stage serves exactly the runs the previous one could not answer."""
    num_cells, num_runs = 2, 23
    request = jnp.arange(num_cells * num_runs, dtype=jnp.float32).reshape(num_cells, num_runs)
    first = lambda r, ctx: _Answer(jnp.int32(1), (r % 2) == 1)
    check = lambda r, ctx: _Answer(jnp.int32(2), (r % 4) == 3)
    full = lambda r, ctx: _Answer(jnp.int32(3), jnp.asarray(False))
    check_update = lambda state, answer, ctx: state + 10 * answer.arm.astype(jnp.float32) + ctx
    full_update = lambda state, answer, ctx: state + 1000 * answer.arm.astype(jnp.float32) + ctx
    policy = Policy(
        "toy3", {}, None, None, None, None, solve_fn=first, fallback_solve_fn=full,
        fallback_update_fn=full_update, check_fn=check, check_update_fn=check_update,
    )
    ctx = jnp.asarray([0.5, 0.25])
    r = np.asarray(request)
    # 2/3 of the runs wait (the first stage runs for all), then 1/7 (compacted).
    for needs in ((request % 3) != 0, (request % 7) == 0):
        decision = Decision(jnp.zeros_like(needs, jnp.int32), needs, request)
        checked = np.asarray(needs) & (r % 2 == 1)
        solved = checked & (r % 4 == 3)
        for sizes in ((64, 16), (4,), (46,)):
            answers, state = jax.jit(
                lambda d, s: _all_stages(policy, d, s, ctx, sizes, (2,))
            )(decision, -request)
            expected_arm = np.where(solved, 3, np.where(checked, 2, np.where(needs, 1, 0)))
            np.testing.assert_array_equal(answers.arm, expected_arm)
            c = np.asarray(ctx)[:, None]
            expected = -r + np.where(checked, 20 + c, 0) + np.where(solved, 3000 + c, 0)
            np.testing.assert_array_equal(state, expected)
