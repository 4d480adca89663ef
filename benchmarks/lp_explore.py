"""``lp_explore`` (the paper's Algorithm 1): run-rounds per second against ``ucb_n`` in the
same process, and end to end against the NumPy + SciPy (HiGHS) implementation of the
same algorithm in ``tests/reference.py`` (runs as arrays, a Python loop over rounds, one
``linprog`` per Case C run-round).

Usage:  python benchmarks/lp_explore.py [--arms 5,10,20] [--runs 1000,10000]
        [--rounds 4096] [--numpy-runs 100] [--numpy-rounds 2000]
        [--long-horizon 1000000 --long-runs 1000 --long-arms 5,10,20] [--late 1000,32768,16384]

Prints one JSON line per case:

* ``lp_explore_no_lp_rounds``: full information with large gaps, the first ``--rounds``
  rounds: Case A once the estimates settle, after a start-up in which every run is in
  Case C;
* ``lp_explore_case_a_steady_state``: the same instance, rounds ``rounds + 1 .. 2
  rounds``, where no run needs the LP: the cost of a round without one;
* ``ucb_n`` and ``lp_explore`` on a random general instance over ``--rounds`` (whatever
  case mix it has; ``mean_case_counts`` says which);
* ``numpy_highs_vs_engine``: both implementations at ``--numpy-runs`` on that instance,
  and the engine again at the largest ``--runs``: the NumPy loop pays one ``linprog``
  per Case C run-round whatever the run count, while the engine's cost per run-round
  falls with more runs;
* with ``--late``, ``late_rounds``: a segment of rounds after the start-up;
* with ``--long-horizon``, ``long_horizon``: one long run of each policy at each K of
  ``--long-arms`` (``peak_rss_mib`` is the process's peak so far: run one K per
  process to read it per K).

Every ratio is against a baseline timed in the same process (``ucb_n``, the NumPy
loop), so that the load of a shared machine weighs on both.
"""

from __future__ import annotations

import argparse
import os
import resource
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import jax  # noqa: E402
import numpy as np  # noqa: E402

import jaxbandit as jb  # noqa: E402
from benchmarks._common import best_wall_and_cpu, emit, int_list, machine, numpy_noise, random_instance  # noqa: E402
from benchmarks._common import long_simulation_programs  # noqa: E402
from jaxbandit.engine import DEFAULT_CHUNK_SIZE  # noqa: E402
from tests import reference  # noqa: E402


def instance(num_arms: int) -> jb.Instance:
    """The random general instance of every case but the full-information ones."""
    return random_instance(3, num_arms)


def _run(policy: jb.Policy, inst: jb.Instance, horizon: int, runs: int, seed: int, chunk: int) -> jb.SimulationRun:
    """A run recording the final round only, in chunks of at most ``chunk`` rounds: the
    compiled program depends on the chunk length and the number of recording times (in
    blocks of 32), so every timing of one policy at one run count below shares one
    program."""
    return jb.SimulationRun(policy, inst, horizon, runs, seed, times=[horizon], chunk_size=min(chunk, horizon))


def engine_time(name: str, inst: jb.Instance, runs: int, horizon: int, chunk: int = 1024, **params):
    """Seconds for ``horizon`` rounds of ``runs`` runs (compile excluded), and diagnostics."""
    policy = jb.policies.make(name, **params)
    chunk = min(chunk, horizon)
    seconds = []
    for _ in range(2):  # best of two; each run set up and compiled before the clock starts
        sim = _run(policy, inst, horizon, runs, 1, chunk)
        sim.compile()
        start = time.perf_counter()
        sim.advance()
        seconds.append(time.perf_counter() - start)
    diagnostics = {k: float(v.mean()) for k, v in sim.diagnostics().items()}
    return min(seconds), diagnostics


def timed_chunk(sim: jb.SimulationRun):
    """Seconds for the next chunk of ``sim``, and the mean per-run counts of its rounds
    (each of the policy's diagnostics, differenced)."""
    before = sim.diagnostics()
    start = time.perf_counter()
    sim.advance(1)
    seconds = time.perf_counter() - start
    after = sim.diagnostics()
    return seconds, {k: float((after[k] - before[k]).mean()) for k in after}


def steady_state_time(name: str, inst: jb.Instance, runs: int, rounds: int):
    """Seconds for rounds ``rounds + 1 .. 2 rounds`` of a long run (best of two): the
    per-round cost once the start-up phase is over; and the counts of those rounds."""
    policy = jb.policies.make(name)
    best, counts = np.inf, {}
    for _ in range(2):
        sim = _run(policy, inst, 10**7, runs, 0, rounds)
        sim.advance(1)  # compiles; the start-up rounds
        seconds, counts = timed_chunk(sim)
        best = min(best, seconds)
    return best, counts


def late_time(name: str, inst: jb.Instance, runs: int, start: int, rounds: int):
    """Seconds for rounds ``start + 1 .. start + rounds`` of one run (compiled and
    advanced to ``start`` first, untimed), and the counts of those rounds."""
    sim = _run(jb.policies.make(name), inst, start + rounds, runs, 0, rounds)
    sim.compile()  # START = 0 would otherwise time the compilation with the first chunk
    while sim.rounds_done < start:
        sim.advance(1)
    return timed_chunk(sim)


def numpy_case_counts(cases) -> dict:
    """Mean rounds per run in each case of ``reference.lp_explore``'s ``cases``, under
    the names of the engine's counters."""
    names = {"initial": "initial_rounds", "A": "case_a", "B": "case_b", "C": "case_c"}
    return {names[case]: float((cases == code).sum(axis=1).mean()) for code, case in enumerate(reference.CASES)}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=" ".join(__doc__.split("\n\n")[0].split()))
    parser.add_argument("--arms", default="5,10,20")
    parser.add_argument("--runs", default="1000,10000")
    parser.add_argument("--rounds", type=int, default=4096)
    parser.add_argument("--numpy-runs", type=int, default=100)
    parser.add_argument("--numpy-rounds", type=int, default=2000)
    parser.add_argument("--long-horizon", type=int, default=0, help="also time T=this (at each K of --long-arms)")
    parser.add_argument("--long-arms", default="10", help="the K of the --long-horizon runs (default 10)")
    parser.add_argument("--long-runs", type=int, default=1000)
    parser.add_argument(
        "--late",
        default="",
        help="RUNS,START,ROUNDS: also time rounds START+1..START+ROUNDS of RUNS runs at K=10 "
        "(after the start-up, where Case C rounds re-use the last check)",
    )
    args = parser.parse_args(argv)
    # Every value is checked before anything runs.
    for option in ("rounds", "numpy_runs", "numpy_rounds", "long_runs"):
        if getattr(args, option) < 1:
            parser.error(f"--{option.replace('_', '-')}: must be >= 1, got {getattr(args, option)}")
    if args.long_horizon < 0:
        parser.error(f"--long-horizon: must be >= 0 (0: no long run), got {args.long_horizon}")
    run_counts = int_list(parser, "--runs", args.runs, 1)
    if not run_counts:
        parser.error("--runs: give at least one run count")
    arm_counts = int_list(parser, "--arms", args.arms, 2)
    long_arms = int_list(parser, "--long-arms", args.long_arms, 2)
    late = int_list(parser, "--late", args.late, 0)
    if args.late and (len(late) != 3 or min(late[0], late[2]) < 1 or late[1] % late[2]):
        parser.error(
            f"--late: expected RUNS,START,ROUNDS (RUNS, ROUNDS >= 1, START a multiple of ROUNDS), got {args.late!r}"
        )
    info = machine()
    for num_arms in arm_counts:
        inst = instance(num_arms)
        for runs in run_counts:
            config = {"num_arms": num_arms, "runs": runs, "rounds": args.rounds}
            # Rounds where no run needs the LP: full information with large gaps stays
            # in Case A after the initial rounds.
            easy = jb.instances.full_information(np.linspace(10.0, 0.0, num_arms))
            # The first `rounds` rounds, then (no LP at all any more) the next `rounds`.
            for case, timer in (
                ("lp_explore_no_lp_rounds", engine_time),
                ("lp_explore_case_a_steady_state", steady_state_time),
            ):
                ucb_seconds, _ = timer("ucb_n", easy, runs, args.rounds)
                lp_seconds, counts = timer("lp_explore", easy, runs, args.rounds)
                emit(
                    {
                        "case": case,
                        **config,
                        "run_rounds_per_s": runs * args.rounds / lp_seconds,
                        "ucb_n_run_rounds_per_s": runs * args.rounds / ucb_seconds,
                        "cost_ratio_vs_ucb_n": lp_seconds / ucb_seconds,
                        "mean_case_counts": counts,
                        "machine": info,
                    }
                )
            ucb_seconds, _ = engine_time("ucb_n", inst, runs, args.rounds)
            lp_seconds, diag = engine_time("lp_explore", inst, runs, args.rounds)
            ucb_rate = runs * args.rounds / ucb_seconds
            lp_rate = runs * args.rounds / lp_seconds
            emit({"case": "ucb_n", **config, "run_rounds_per_s": ucb_rate, "machine": info})
            emit(
                {
                    "case": "lp_explore",
                    **config,
                    "run_rounds_per_s": lp_rate,
                    "cost_ratio_vs_ucb_n": ucb_rate / lp_rate,
                    "mean_case_counts": diag,
                    "machine": info,
                }
            )
        # End to end against NumPy + HiGHS on the same instance and horizon.  One linprog
        # call per Case C run-round (canonical=False): the policy's tie-break among optimal
        # c* would take a second call, and changes c* only where the optimum is not unique.
        runs, rounds = args.numpy_runs, args.numpy_rounds
        start = time.perf_counter()
        noise = numpy_noise(0, runs, num_arms)
        _, cases = reference.lp_explore(inst.mu, inst.sigma, rounds, runs, noise, canonical=False)
        numpy_seconds = time.perf_counter() - start
        jax_seconds, diag = engine_time("lp_explore", inst, runs, rounds)
        # The NumPy loop pays one linprog per Case C run-round, so its rate per run-round
        # does not grow with the number of runs; the engine's does.  Also time the
        # engine at the study's run count (the largest of --runs) on the same rounds.
        study_runs = max(run_counts)
        study_seconds, _ = engine_time("lp_explore", inst, study_runs, rounds)
        numpy_rate = runs * rounds / numpy_seconds
        emit(
            {
                "case": "numpy_highs_vs_engine",
                "num_arms": num_arms,
                "runs": runs,
                "rounds": rounds,
                "numpy_run_rounds_per_s": numpy_rate,
                "numpy_linprog_calls": int((cases == reference.CASES.index("C")).sum()),
                "numpy_mean_case_counts": numpy_case_counts(cases),
                "engine_run_rounds_per_s": runs * rounds / jax_seconds,
                "speedup": numpy_seconds / jax_seconds,
                "engine_mean_case_counts": diag,
                "study_runs": study_runs,
                "engine_run_rounds_per_s_at_study_runs": study_runs * rounds / study_seconds,
                "speedup_at_study_runs": study_runs * rounds / study_seconds / numpy_rate,
                "machine": info,
            }
        )
    if args.late:
        runs, start, rounds = late
        inst = instance(10)
        seconds, counts = {}, {}
        for name in ("ucb_n", "lp_explore"):
            seconds[name], counts[name] = late_time(name, inst, runs, start, rounds)
        emit(
            {
                "case": "late_rounds",
                "num_arms": 10,
                "runs": runs,
                "first_round": start + 1,
                "rounds": rounds,
                "run_rounds_per_s": runs * rounds / seconds["lp_explore"],
                "ucb_n_run_rounds_per_s": runs * rounds / seconds["ucb_n"],
                "cost_ratio_vs_ucb_n": seconds["lp_explore"] / seconds["ucb_n"],
                "mean_counts": counts["lp_explore"],
                "machine": info,
            }
        )
    for num_arms in long_arms if args.long_horizon else []:
        # One long run of each: the average cost per run-round over a whole horizon,
        # where Case C rounds are the rare ones.  The compilation (once per process,
        # whatever the horizon) is timed apart.
        inst = instance(num_arms)
        seconds, cpu_seconds, compile_seconds = {}, {}, {}
        for name in ("ucb_n", "lp_explore"):
            run = _run(jb.policies.make(name), inst, args.long_horizon, args.long_runs, 0, DEFAULT_CHUNK_SIZE)
            jax.clear_caches()  # an earlier case may have compiled this program: time a fresh compile
            compile_seconds[name] = run.compile()
            seconds[name], cpu_seconds[name] = best_wall_and_cpu(run.advance)
        result = run.result()  # lp_explore's
        with_compile = {name: seconds[name] + compile_seconds[name] for name in seconds}
        emit(
            {
                "case": "long_horizon",
                "num_arms": num_arms,
                "runs": args.long_runs,
                "horizon": args.long_horizon,
                "seconds": seconds["lp_explore"],
                "ucb_n_seconds": seconds["ucb_n"],
                "cost_ratio_vs_ucb_n": seconds["lp_explore"] / seconds["ucb_n"],
                "cpu_seconds": cpu_seconds["lp_explore"],
                "ucb_n_cpu_seconds": cpu_seconds["ucb_n"],
                "cpu_cost_ratio_vs_ucb_n": cpu_seconds["lp_explore"] / cpu_seconds["ucb_n"],
                "compile_seconds": compile_seconds["lp_explore"],
                "ucb_n_compile_seconds": compile_seconds["ucb_n"],
                "seconds_including_compile": with_compile["lp_explore"],
                "cost_ratio_including_compile": with_compile["lp_explore"] / with_compile["ucb_n"],
                "run_rounds_per_s": args.long_runs * args.long_horizon / seconds["lp_explore"],
                "mean_final_regret": float(result.final_regret.mean()),
                "peak_rss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
                "mean_case_counts": {k: float(v.mean()) for k, v in result.diagnostics.items()},
                "machine": info,
            }
        )
    return 0


if __name__ == "__main__":
    long_simulation_programs()
    raise SystemExit(main())
