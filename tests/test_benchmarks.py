"""The benchmark scripts run at toy sizes and print the JSON lines their README reads.

No timing is asserted (unit tests never do).  What is checked can be wrong: every
field a script documents is there with its type; each ratio is finite, positive and
the one its own record's seconds or rates give; case counts add up to the rounds; and
where a script sets the NumPy + HiGHS loop against the engine, both ran the same
algorithm.  Each script runs in its own process, as a user runs it, so a script's own
settings (x64, sys.path) cannot leak into other tests; only the option checks, which
each script's ``main`` makes before any work, are called in this process.
"""

import argparse
import importlib
import json
import math
import os
import subprocess
import sys

import pytest

from jaxbandit import compile_cache, compile_options

# Almost all of the time is compiling the engine (lp_explore's most) and the LP solver.
pytestmark = pytest.mark.slow

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CASES = ("initial_rounds", "case_a", "case_b", "case_c")  # lp_explore's rounds, by case


def _launch(script, *args) -> subprocess.CompletedProcess:
    """Run ``benchmarks/<script>`` with ``args`` (output captured), with JAX's persistent
    compile cache in the test session's directory (see conftest): the scripts do not
    turn it on themselves, and a script that compiles a program twice (``lp.py``'s
    batched solve, in its solve case and again in its warm-start case) then compiles
    it once.  At these sizes compiling is nearly all of a script's time, so every
    program compiles with the host's quick options (``compile_options.CPU_OPTIONS``,
    the same bits).  No record depends on either."""
    env = dict(os.environ)
    quick = " ".join(f"--{name}={str(value).lower()}" for name, value in compile_options.CPU_OPTIONS.items())
    env["XLA_FLAGS"] = f"{env.get('XLA_FLAGS', '')} {quick}".strip()
    session_cache = env.get(compile_cache.ENV_VAR, compile_cache.OFF)
    if session_cache.lower() != compile_cache.OFF:
        env["JAX_COMPILATION_CACHE_DIR"] = session_cache
    return subprocess.run(
        [sys.executable, os.path.join(REPO, "benchmarks", script), *args],
        cwd=REPO, capture_output=True, text=True, timeout=600, check=False, env=env,
    )  # fmt: skip


def _run(script, *args):
    """Run ``benchmarks/<script>`` with ``args``; return its records by case (each case
    printed once at these sizes)."""
    proc = _launch(script, *args)
    assert proc.returncode == 0, f"{script} failed:\n{proc.stderr[-3000:]}"
    records = [json.loads(line) for line in proc.stdout.splitlines() if line.strip()]
    by_case = {record["case"]: record for record in records}
    assert len(by_case) == len(records), [record["case"] for record in records]
    for record in records:
        _machine(record["machine"])
    return by_case


def _machine(info):
    assert isinstance(info["platform"], str) and isinstance(info["jax"], str), info
    assert isinstance(info["cpu_count"], int) and info["cpu_count"] >= 1, info
    assert isinstance(info["usable_cpus"], int) and 1 <= info["usable_cpus"] <= info["cpu_count"], info
    assert isinstance(info["settings"], dict) and all(isinstance(v, str) for v in info["settings"].values()), info
    assert info["backend"] in ("cpu", "gpu", "cuda", "rocm", "tpu"), info
    assert info["devices"] and all(isinstance(d, str) for d in info["devices"]), info


def _positive(record, *keys):
    for key in keys:
        value = record[key]
        assert type(value) in (int, float) and math.isfinite(value) and value > 0, (key, record)


def _fields(record, **types):
    for key, kind in types.items():
        assert isinstance(record[key], kind) and not isinstance(record[key], bool), (key, record)


def _counts(counts, rounds, *, initial):
    """Each of the rounds counted in exactly one case; ``initial`` of them initial."""
    assert all(isinstance(counts[key], float) for key in CASES), counts
    assert sum(counts[key] for key in CASES) == pytest.approx(rounds), counts
    assert counts["initial_rounds"] == initial, counts


def test_lp_benchmark_solve_and_warm_cases():
    # 8 LPs: the host API's smallest batch.  The solve and warm-start cases run one
    # compiled solve (the session's compile cache); the host case's program is compiled
    # with the host's options (jaxbandit.compile_options), so it is another one.
    records = _run(
        "lp.py", "--arms", "3", "--batches", "8", "--dtypes", "float64",
        "--repeat", "1", "--reference-size", "2", "--loop-lps", "8", "--large", "8",
    )  # fmt: skip
    assert set(records) == {"solve", "lower_bound", "warm_check"}
    solve = records["solve"]
    assert (solve["num_arms"], solve["batch"], solve["dtype"], solve["accuracy_sample"]) == (3, 8, "float64", 2)
    _positive(solve, "seconds", "lps_per_second", "linprog_lps_per_second", "speedup_vs_linprog")
    assert solve["lps_per_second"] == pytest.approx(8 / solve["seconds"])
    assert solve["speedup_vs_linprog"] == pytest.approx(solve["lps_per_second"] / solve["linprog_lps_per_second"])
    _positive(solve, "highspy_lps_per_second", "speedup_vs_highspy")
    assert solve["speedup_vs_highspy"] == pytest.approx(solve["lps_per_second"] / solve["highspy_lps_per_second"])
    assert solve["highspy_fraction_optimal"] == 1.0
    assert 0 <= solve["highspy_max_relative_difference_vs_linprog"] <= 1e-9
    # Toy LPs: every one solved, to HiGHS's objective, in a few pivots.
    assert solve["fraction_optimal"] == 1.0
    assert 0 <= solve["max_relative_error_vs_highs"] <= 1e-9
    assert 0 <= solve["mean_pivots"] <= 10
    host = records["lower_bound"]  # the same LPs through the host API, in its pieces
    assert (host["batch"], host["lanes"], host["fraction_optimal"], host["mean_pivots"]) == (8, 8, 1.0, None)  # 8 LPs run on one piece of 8 lanes
    assert 0 <= host["max_relative_error_vs_highs"] <= 1e-9
    assert host["speedup_vs_highspy"] == pytest.approx(host["lps_per_second"] / host["highspy_lps_per_second"])
    warm = records["warm_check"]
    assert (warm["num_arms"], warm["batch"], warm["dtype"]) == (3, 8, "float64")
    assert warm["loop_iterations"] == 4  # at least 4 batches, even for 8 LPs of 8
    for full, other, ratio in (
        ("full_solve_seconds", "check_seconds", "full_over_check"),
        ("full_solve_seconds", "reuse_seconds", "full_over_reuse"),
        ("loop_full_solve_seconds", "loop_check_seconds", "loop_full_over_check"),
        ("loop_full_solve_seconds", "loop_reuse_seconds", "loop_full_over_reuse"),
    ):
        _positive(warm, full, other, ratio)
        assert warm[ratio] == pytest.approx(warm[full] / warm[other]), ratio
    for key in ("fraction_check_ok", "fraction_reuse_ok_1e-3", "fraction_reuse_ok_1e-5"):
        assert 0 <= warm[key] <= 1, (key, warm)


def test_lp_explore_benchmark_against_ucb_n_and_numpy():
    # One run count throughout: the engine compiles once per configuration, and that
    # is most of the time this takes.
    runs, rounds = 4, 64
    records = _run(
        "lp_explore.py", "--arms", "3", "--runs", str(runs), "--rounds", str(rounds),
        "--numpy-runs", str(runs), "--numpy-rounds", str(rounds),
        "--long-horizon", str(rounds), "--long-runs", str(runs), "--long-arms", "3",
    )  # fmt: skip
    assert set(records) == {
        "lp_explore_no_lp_rounds",
        "lp_explore_case_a_steady_state",
        "ucb_n",
        "lp_explore",
        "numpy_highs_vs_engine",
        "long_horizon",
    }
    for record in records.values():
        assert (record["num_arms"], record["runs"]) == (3, runs), record
    ucb = records["ucb_n"]
    _positive(ucb, "run_rounds_per_s")

    for case in ("lp_explore_no_lp_rounds", "lp_explore_case_a_steady_state"):
        record = records[case]
        assert record["rounds"] == rounds
        _positive(record, "run_rounds_per_s", "ucb_n_run_rounds_per_s", "cost_ratio_vs_ucb_n")
        ratio = record["ucb_n_run_rounds_per_s"] / record["run_rounds_per_s"]
        assert record["cost_ratio_vs_ucb_n"] == pytest.approx(ratio), case
    _counts(records["lp_explore_no_lp_rounds"]["mean_case_counts"], rounds, initial=3)
    # Rounds 65-128 of full information with large gaps: every run in Case A, no LP.
    steady = records["lp_explore_case_a_steady_state"]["mean_case_counts"]
    _counts(steady, rounds, initial=0)
    assert steady["case_a"] == rounds, steady

    explore = records["lp_explore"]
    _positive(explore, "run_rounds_per_s", "cost_ratio_vs_ucb_n")
    assert explore["cost_ratio_vs_ucb_n"] == pytest.approx(ucb["run_rounds_per_s"] / explore["run_rounds_per_s"])
    _counts(explore["mean_case_counts"], rounds, initial=3)

    numpy_case = records["numpy_highs_vs_engine"]
    assert (numpy_case["rounds"], numpy_case["study_runs"]) == (rounds, runs)
    _positive(
        numpy_case, "numpy_run_rounds_per_s", "engine_run_rounds_per_s", "speedup",
        "engine_run_rounds_per_s_at_study_runs", "speedup_at_study_runs",
    )  # fmt: skip
    numpy_rate = numpy_case["numpy_run_rounds_per_s"]
    assert numpy_case["speedup"] == pytest.approx(numpy_case["engine_run_rounds_per_s"] / numpy_rate)
    at_study_runs = numpy_case["engine_run_rounds_per_s_at_study_runs"] / numpy_rate
    assert numpy_case["speedup_at_study_runs"] == pytest.approx(at_study_runs)
    numpy_counts, engine_counts = numpy_case["numpy_mean_case_counts"], numpy_case["engine_mean_case_counts"]
    _counts(numpy_counts, rounds, initial=3)
    _counts(engine_counts, rounds, initial=3)
    # One linprog call per Case C run-round: what the NumPy loop's time is made of.
    _fields(numpy_case, numpy_linprog_calls=int)
    assert numpy_case["numpy_linprog_calls"] == runs * numpy_counts["case_c"] > 0
    # Same algorithm, other noise: on this instance every run is in Case C from the
    # end of the initial rounds to round 64 whatever the noise, in both.
    assert {key: numpy_counts[key] for key in CASES} == {key: engine_counts[key] for key in CASES}

    long_run = records["long_horizon"]
    assert long_run["horizon"] == rounds
    _positive(
        long_run, "seconds", "ucb_n_seconds", "cost_ratio_vs_ucb_n", "cpu_seconds", "ucb_n_cpu_seconds",
        "cpu_cost_ratio_vs_ucb_n", "compile_seconds", "ucb_n_compile_seconds", "seconds_including_compile",
        "cost_ratio_including_compile", "run_rounds_per_s", "peak_rss_mib",
    )  # fmt: skip
    assert long_run["cost_ratio_vs_ucb_n"] == pytest.approx(long_run["seconds"] / long_run["ucb_n_seconds"])
    cpu_ratio = long_run["cpu_seconds"] / long_run["ucb_n_cpu_seconds"]
    assert long_run["cpu_cost_ratio_vs_ucb_n"] == pytest.approx(cpu_ratio)
    with_compile = long_run["seconds"] + long_run["compile_seconds"]
    assert long_run["seconds_including_compile"] == pytest.approx(with_compile)
    ucb_with_compile = long_run["ucb_n_seconds"] + long_run["ucb_n_compile_seconds"]
    assert long_run["cost_ratio_including_compile"] == pytest.approx(with_compile / ucb_with_compile)
    assert long_run["run_rounds_per_s"] == pytest.approx(runs * rounds / long_run["seconds"])
    assert math.isfinite(long_run["mean_final_regret"]) and long_run["mean_final_regret"] > 0
    _counts(long_run["mean_case_counts"], rounds, initial=3)


@pytest.mark.parametrize(
    "script, args, message",
    [
        ("lp_explore", ["--long-arms", "x"], "--long-arms: expected comma-separated integers, got 'x'"),
        ("lp_explore", ["--arms", "1"], "--arms: every value must be >= 2, got '1'"),
        ("lp_explore", ["--runs", ""], "--runs: give at least one run count"),
        ("lp_explore", ["--late", "1000,100,64"], "--late: expected RUNS,START,ROUNDS"),
        ("scale", ["--arms", "1"], "--arms: every value must be >= 2, got '1'"),
        ("scale", ["--horizons", "10=x"], "--horizons: expected K=T items, got '10=x'"),
        ("scale", ["--policies", "lp_explore,nonexistent"], "--policies: unknown policy name 'nonexistent'"),
        ("scale", ["--round-start", "100", "--round-rounds", "64"], "--round-start: must be a multiple of --round-rounds"),
        ("scale", ["--dtype", "float16"], "--dtype: invalid choice: 'float16'"),
        ("throughput", ["--runs", "0"], "--runs: every value must be >= 1, got '0'"),
        ("throughput", ["--runs", ""], "--runs: give at least one run count"),
        ("throughput", ["--numpy-rounds", "0"], "--numpy-rounds: must be >= 1, got 0"),
        ("throughput", ["--policies", "greedy,nonexistent"], "--policies: unknown policy name 'nonexistent'"),
        ("lp", ["--arms", "3", "--batches", "1", "--reference-size", "0"], "--reference-size: must be >= 1, got 0"),
        ("lp", ["--arms", "3", "--batches", "1", "--repeat", "0"], "--repeat: must be >= 1, got 0"),
        ("memory", ["--horizons", "1e3,abc"], "--horizons: every value must be a whole number >= 1, got '1e3,abc'"),
        ("memory", ["--horizons", "500.7", "--runs", "2"], "--horizons: every value must be a whole number >= 1, got '500.7'"),
        ("memory", ["--horizons", ""], "--horizons: give at least one horizon"),
        ("memory", ["--horizons", "10", "--policy", "nope"], "--policy: unknown policy name 'nope'"),
        ("memory", ["--horizons", "1e10"], "--horizons: every value must be at most 1073741824, got '1e10'"),
        ("scale", ["--arms", "3", "--horizons", "5=100"], "--horizons: K = 5 is not in --arms '3'"),
        ("scale", ["--arms", "5", "--horizons", "5=100,5=7"], "--horizons: K = 5 is given twice"),
        ("scale", ["--round-start", "-64", "--round-rounds", "64"], "--round-start: must be >= 0, got -64"),
    ],
)
def test_benchmarks_refuse_bad_options_before_any_work(script, args, message, capsys):
    main = importlib.import_module(f"benchmarks.{script}").main
    with pytest.raises(SystemExit) as exited:
        main(args)
    assert exited.value.code == 2
    assert message in capsys.readouterr().err


def test_memory_horizons_in_either_notation():
    from benchmarks.memory import horizon_list

    assert horizon_list(argparse.ArgumentParser(), "1e3, 2000,") == [1000, 2000]


def test_throughput_benchmark():
    records = _run(
        "throughput.py", "--policies", "greedy", "--arms", "3", "--runs", "8",
        "--rounds", "64", "--numpy-rounds", "16", "--quick",  # --quick: other defaults, not these
    )  # fmt: skip
    # ucb_n is always timed: the reference of every policy's cost.
    assert set(records) == {"numpy_ucb_n", "bare_sampling", "ucb_n", "greedy"}
    for record in records.values():
        assert (record["num_arms"], record["runs"], record["rounds"]) == (3, 8, 64), record
        _positive(record, "run_rounds_per_s")
    numpy_rate = records["numpy_ucb_n"]["run_rounds_per_s"]
    assert records["numpy_ucb_n"]["numpy_rounds"] == 16
    sampling = records["bare_sampling"]
    # Timed before and after the policies; the faster figure is the one used.
    assert len(sampling["run_rounds_per_s_each"]) == 2
    assert sampling["run_rounds_per_s"] == max(sampling["run_rounds_per_s_each"])
    assert sampling["ratio_vs_numpy"] == pytest.approx(sampling["run_rounds_per_s"] / numpy_rate)
    ucb_rate = records["ucb_n"]["run_rounds_per_s"]
    for name in ("ucb_n", "greedy"):
        record = records[name]
        rate = record["run_rounds_per_s"]
        _positive(record, "ratio_vs_numpy", "ratio_vs_sampling", "cost_vs_ucb_n", "cpu_cost_vs_ucb_n")
        assert record["ratio_vs_numpy"] == pytest.approx(rate / numpy_rate), name
        assert record["ratio_vs_sampling"] == pytest.approx(rate / sampling["run_rounds_per_s"]), name
        assert record["cost_vs_ucb_n"] == pytest.approx(ucb_rate / rate), name
    assert records["ucb_n"]["cost_vs_ucb_n"] == records["ucb_n"]["cpu_cost_vs_ucb_n"] == 1.0


def test_memory_benchmark():
    horizon, runs = 2000, 8
    records = _run("memory.py", "--horizons", str(horizon), "--runs", str(runs))
    record = records["sweep_peak_memory"]
    assert (record["horizon"], record["runs"], record["config"]["policy"]) == (horizon, runs, "ucb_n")
    _positive(record, "peak_rss_mib", "wall_s", "run_rounds_per_s", "final_regret_mean")
    # A process that has imported JAX and run a sweep: tens of MiB at least, not tens of GiB.
    assert 50 < record["peak_rss_mib"] < 50_000
    # wall_s is rounded to 10 ms in the record; the rate is from the unrounded time.
    assert record["run_rounds_per_s"] == pytest.approx(horizon * runs / record["wall_s"], rel=0.02)
    assert record["device_peak_mib"] is None or record["device_peak_mib"] > 0


def test_scale_benchmark():
    """One K, one policy, a short horizon (set per K), one run count for the round times
    (with the chunk size of the round times, so that their programs are compiled once).
    The chunk step's shapes (K = 3, 4 runs, 64-round chunks) are those of the
    ``lp_explore.py`` test above, so this process loads that program from the session's
    compile cache rather than compiling it again."""
    runs, horizon, rounds = 4, 64, 64
    records = _run(
        "scale.py", "--arms", "3", "--runs", str(runs), "--horizon", "96", "--horizons", f"3={horizon}", "--chunk", str(rounds),
        "--policies", "lp_explore", "--round-arms", "3", "--round-runs", str(runs), "--round-start", str(rounds),
        "--round-rounds", str(rounds),
    )  # fmt: skip
    assert set(records) == {"scale", "round_time"}
    scale = records["scale"]
    assert (scale["num_arms"], scale["runs"], scale["horizon"], scale["dtype"]) == (3, runs, horizon, "float32")
    assert set(scale["policies"]) == {"ucb_n", "lp_explore"}
    for case in scale["policies"].values():
        _positive(case, "compile_seconds", "compile_cpu_seconds", "seconds", "stablehlo_lines", "hlo_instructions")
        _fields(case, stablehlo_lines=int, hlo_instructions=int)
    explore = scale["policies"]["lp_explore"]
    assert explore["ratio_vs_ucb_n"] == pytest.approx(explore["seconds"] / scale["policies"]["ucb_n"]["seconds"])
    counters = explore["counters"]
    stages = counters["lp_reuses"] + counters["lp_warm_solves"] + counters["lp_full_solves"]
    assert 0 < counters["case_c"] <= horizon - 3 and stages == pytest.approx(counters["case_c"]), counters
    assert scale["policies"]["ucb_n"]["counters"] == {}
    timing = records["round_time"]
    assert (timing["num_arms"], timing["runs"], timing["first_round"], timing["rounds"]) == (3, runs, rounds + 1, rounds)
    assert timing["dtype"] == "float32"
    seconds = timing["seconds_per_round"]
    _positive(seconds, "ucb_n", "lp_explore")
    assert timing["ratio_vs_ucb_n"] == {"lp_explore": pytest.approx(seconds["lp_explore"] / seconds["ucb_n"])}


def test_lp_explore_benchmark_refuses_bad_counts_before_running(capsys):
    from benchmarks import lp_explore

    for argv, message in ((["--rounds", "0"], "--rounds: must be >= 1, got 0"), (["--long-horizon", "-5"], "--long-horizon: must be >= 0")):
        with pytest.raises(SystemExit):
            lp_explore.main(argv)
        assert message in capsys.readouterr().err
