"""The benchmark scripts run, at toy sizes, and print the JSON lines their README reads.

They are not timed here (unit tests never assert timings); this only keeps them from
breaking unnoticed when the library's API moves.  Each runs in its own process, as a
user runs it, so a script's own settings (x64, sys.path) cannot leak into other tests.
"""

import json
import math
import os
import subprocess
import sys

import pytest

# About a minute, almost all of it compiling lp_explore's engine.
pytestmark = pytest.mark.slow

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _launch(script, *args) -> subprocess.CompletedProcess:
    """Run ``benchmarks/<script>`` with ``args`` (output captured)."""
    return subprocess.run(
        [sys.executable, os.path.join(REPO, "benchmarks", script), *args],
        cwd=REPO, capture_output=True, text=True, timeout=600, check=False,
    )  # fmt: skip


def _run(script, *args):
    """Run ``benchmarks/<script>`` with ``args``; return its records, one per JSON line."""
    proc = _launch(script, *args)
    assert proc.returncode == 0, f"{script} failed:\n{proc.stderr[-3000:]}"
    lines = [line for line in proc.stdout.splitlines() if line.strip()]
    assert lines, f"{script} printed nothing"
    return [json.loads(line) for line in lines]


def _positive(record, key):
    value = record[key]
    assert isinstance(value, (int, float)) and math.isfinite(value) and value > 0, (key, record)


def _cases(records):
    return {record["case"] for record in records}


def test_lp_benchmark_solve_and_warm_cases():
    records = _run(
        "lp.py", "--arms", "3", "--batches", "2", "--dtypes", "float64",
        "--repeat", "1", "--reference-size", "2", "--loop-lps", "8",
    )  # fmt: skip
    assert _cases(records) == {"solve", "warm_check"}
    solve = next(r for r in records if r["case"] == "solve")
    for key in ("lps_per_second", "linprog_lps_per_second", "speedup_vs_linprog"):
        _positive(solve, key)
    # Toy LPs: every one solved, to HiGHS's objective.
    assert solve["fraction_optimal"] == 1.0
    assert solve["max_relative_error_vs_highs"] <= 1e-9
    warm = next(r for r in records if r["case"] == "warm_check")
    for key in ("loop_full_solve_seconds", "loop_check_seconds", "loop_reuse_seconds", "loop_full_over_check"):
        _positive(warm, key)
    assert 0 <= warm["fraction_check_ok"] <= 1


def test_lp_explore_benchmark_against_ucb_n_and_numpy():
    records = _run(
        "lp_explore.py", "--arms", "3", "--runs", "8", "--rounds", "64",
        "--numpy-runs", "4", "--numpy-rounds", "64",
        "--long-horizon", "64", "--long-runs", "8", "--long-arms", "3",
    )  # fmt: skip
    assert _cases(records) == {
        "lp_explore_no_lp_rounds",
        "lp_explore_case_a_steady_state",
        "ucb_n",
        "lp_explore",
        "numpy_highs_vs_engine",
        "long_horizon",
    }
    for record in records:
        _positive(record, "run_rounds_per_s" if record["case"] != "numpy_highs_vs_engine" else "speedup")
    explore = next(r for r in records if r["case"] == "lp_explore")
    counts = explore["mean_case_counts"]
    # Every round of every run is counted in exactly one phase or case.
    assert counts["initial_rounds"] + counts["case_a"] + counts["case_b"] + counts["case_c"] == pytest.approx(64)
    numpy_case = next(r for r in records if r["case"] == "numpy_highs_vs_engine")
    assert numpy_case["numpy_linprog_calls"] > 0
    long_run = next(r for r in records if r["case"] == "long_horizon")
    assert (long_run["num_arms"], long_run["runs"], long_run["horizon"]) == (3, 8, 64)
    _positive(long_run, "cost_ratio_vs_ucb_n")


@pytest.mark.parametrize(
    "script, args, message",
    [
        ("lp_explore.py", ["--long-arms", "x"], "--long-arms: expected comma-separated integers, got 'x'"),
        ("lp_explore.py", ["--arms", "1"], "--arms: every value must be >= 2, got '1'"),
        ("lp_explore.py", ["--runs", ""], "--runs: give at least one run count"),
        ("lp_explore.py", ["--late", "1000,100,64"], "--late: expected RUNS,START,ROUNDS"),
        ("throughput.py", ["--runs", "0"], "--runs: every value must be >= 1, got '0'"),
    ],
)
def test_benchmarks_reject_bad_lists(script, args, message):
    proc = _launch(script, *args)
    assert proc.returncode == 2 and message in proc.stderr, proc.stderr[-2000:]


def test_throughput_benchmark():
    records = _run(
        "throughput.py", "--policies", "ucb_n", "--arms", "3", "--runs", "8",
        "--rounds", "64", "--numpy-rounds", "16",
    )  # fmt: skip
    assert _cases(records) == {"numpy_ucb_n", "bare_sampling", "ucb_n"}
    for record in records:
        _positive(record, "run_rounds_per_s")


def test_memory_benchmark():
    (record,) = _run("memory.py", "--horizons", "2000", "--runs", "8")
    assert record["case"] == "sweep_peak_memory" and record["horizon"] == 2000
    _positive(record, "peak_rss_mib")
