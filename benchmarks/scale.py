"""The LP policies at the scale of their setting: Case C on random feedback graphs by K,
against ``ucb_n`` in the same process.

Usage:  python benchmarks/scale.py [--arms 10,20,50,100] [--runs 100] [--horizon 20000]
        [--horizons 100=2000] [--policies lp_explore,ossb] [--dtype float32]
        [--round-policies lp_explore] [--round-arms 10] [--round-runs 1,10000] [--round-start 1024] [--round-rounds 256]

The instance of each K: ``jb.instances.graph(mu, adjacency)`` with ``mu ~ U(0, 1)``, each
directed edge present with probability 0.2, self-loops added (NumPy seed 0).  At these
horizons every round of the LP policies after the initial ones is in Case C.

Prints one JSON line per case:

* ``scale``, one per K: for ``ucb_n`` and each of ``--policies``, the compile time (the
  chunk step, as ``SimulationRun.compile``, timed apart; wall and process CPU time), the size of the compiled program
  (``stablehlo_lines`` of the lowered chunk step, where a jitted helper is written once
  however often it is called, and ``hlo_instructions`` of the compiled one, after XLA
  has inlined every call and optimised it), the seconds of one ``--runs`` x
  horizon simulation (compile excluded) and its ratio to ``ucb_n``'s, and the LP stage
  counters (mean per run: re-uses, checks, full solves, Case C rounds);
* ``round_time``, one per K of ``--round-arms`` and run count of ``--round-runs``:
  seconds per round of rounds ``--round-start + 1 .. + --round-rounds`` (every run in
  Case C) for ``ucb_n`` and each policy, and the ratio.  One run is a proxy for a
  launch-bound accelerator round (a chain of small steps costs its length there).

Every ratio is against ``ucb_n`` timed in the same process, so that the load of a shared
machine weighs on both.  ``--dtype float64`` runs every simulation in float64 (the LP
policies' ``lp_failures``, the full solves float32 cannot certify, by precision).
"""

from __future__ import annotations

import argparse
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import jax
import numpy as np

import jaxbandit as jb
from benchmarks._common import emit, int_list, long_simulation_programs, machine

EDGE_PROBABILITY = 0.2
COUNTERS = ("case_c", "lp_reuses", "lp_warm_solves", "lp_full_solves", "lp_failures")


def graph_instance(num_arms: int) -> jb.Instance:
    """The random feedback graph of ``num_arms`` arms (NumPy seed 0)."""
    gen = np.random.default_rng(0)
    mu = gen.uniform(0.0, 1.0, num_arms)
    adjacency = gen.random((num_arms, num_arms)) < EDGE_PROBABILITY
    return jb.instances.graph(mu, adjacency)


def _simulation(name: str, inst: jb.Instance, horizon: int, runs: int, chunk: int, dtype: str) -> jb.SimulationRun:
    return jb.SimulationRun(
        jb.policies.make(name), inst, horizon, runs, 0, times=[horizon], chunk_size=min(chunk, horizon), dtype=dtype
    )


def compiled_size(run: jb.SimulationRun) -> tuple[float, float, int, int]:
    """Compile ``run``'s chunk step (:meth:`~jaxbandit.SimulationRun.compile`):
    the wall and process CPU seconds it took (CPU time is disturbed less by other jobs),
    the lines of its StableHLO text and the instructions of the optimised HLO."""
    start, cpu_start = time.perf_counter(), time.process_time()
    run.compile()
    wall, cpu = time.perf_counter() - start, time.process_time() - cpu_start
    lowered = run._sim.run_chunk.lower(*run._chunk_arguments())
    compiled = lowered.compile()  # the program just compiled, from JAX's caches
    instructions = sum(" = " in line for line in compiled.as_text().splitlines())
    return wall, cpu, len(lowered.as_text().splitlines()), instructions


def scale_case(name: str, inst: jb.Instance, horizon: int, runs: int, chunk: int, dtype: str) -> dict:
    """Compile time, program size, seconds for the whole horizon and the LP counters."""
    run = _simulation(name, inst, horizon, runs, chunk, dtype)
    compile_seconds, compile_cpu_seconds, lines, instructions = compiled_size(run)
    start = time.perf_counter()
    run.advance()
    seconds = time.perf_counter() - start
    diagnostics = run.diagnostics()
    counters = {k: float(np.asarray(diagnostics[k]).mean()) for k in COUNTERS if k in diagnostics}
    return {
        "compile_seconds": compile_seconds, "compile_cpu_seconds": compile_cpu_seconds, "stablehlo_lines": lines,
        "hlo_instructions": instructions, "seconds": seconds, "counters": counters,
    }  # fmt: skip


def round_seconds(name: str, inst: jb.Instance, runs: int, start: int, rounds: int, dtype: str) -> float:
    """Seconds per round of rounds ``start + 1 .. start + rounds`` (compiled and advanced
    to ``start`` first, untimed)."""
    run = _simulation(name, inst, start + rounds, runs, rounds, dtype)
    run.compile()
    while run.rounds_done < start:
        run.advance(1)
    begin = time.perf_counter()
    run.advance(1)
    return (time.perf_counter() - begin) / rounds


def _horizons(parser, text: str) -> dict:
    """``"100=2000,50=5000"`` -> ``{100: 2000, 50: 5000}``."""
    out = {}
    for item in (x for x in text.split(",") if x.strip()):
        try:
            arms, horizon = (int(v) for v in item.split("="))
        except ValueError:
            parser.error(f"--horizons: expected K=T items, got {text!r}")
        if arms < 2 or horizon < 1:
            parser.error(f"--horizons: expected K >= 2 and T >= 1, got {text!r}")
        if arms in out:
            parser.error(f"--horizons: K = {arms} is given twice, in {text!r}")
        out[arms] = horizon
    return out


def _names(parser, option: str, text: str) -> list:
    names = [p.strip() for p in text.split(",") if p.strip()]
    unknown = [p for p in names if p not in jb.policies.names()]
    if unknown:
        parser.error(f"{option}: unknown policy name {unknown[0]!r}")
    return names


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=" ".join(__doc__.split("\n\n")[0].split()))
    parser.add_argument("--arms", default="10,20,50,100")
    parser.add_argument("--runs", type=int, default=100)
    parser.add_argument("--horizon", type=int, default=20000)
    parser.add_argument("--horizons", default="", help="K=T,...: another horizon for these K")
    parser.add_argument("--chunk", type=int, default=1024)
    parser.add_argument("--policies", default="lp_explore,ossb")
    parser.add_argument("--round-policies", default="lp_explore", help="the policies of the round_time cases")
    parser.add_argument("--round-arms", default="10")
    parser.add_argument("--round-runs", default="1,10000")
    parser.add_argument("--round-start", type=int, default=1024)
    parser.add_argument("--round-rounds", type=int, default=256)
    parser.add_argument("--dtype", choices=("float32", "float64"), default="float32")
    args = parser.parse_args(argv)
    arm_counts = int_list(parser, "--arms", args.arms, 2)
    round_arms = int_list(parser, "--round-arms", args.round_arms, 2)
    round_runs = int_list(parser, "--round-runs", args.round_runs, 1)
    horizons = _horizons(parser, args.horizons)
    for option in ("runs", "horizon", "chunk", "round_rounds"):
        if getattr(args, option) < 1:
            parser.error(f"--{option.replace('_', '-')}: must be >= 1, got {getattr(args, option)}")
    if args.round_start < 0:
        parser.error(f"--round-start: must be >= 0, got {args.round_start}")
    if args.round_start % args.round_rounds:
        parser.error(f"--round-start: must be a multiple of --round-rounds, got {args.round_start}")
    if unused := sorted(set(horizons) - set(arm_counts)):
        parser.error(f"--horizons: K = {unused[0]} is not in --arms {args.arms!r}")
    policies = _names(parser, "--policies", args.policies)
    round_policies = _names(parser, "--round-policies", args.round_policies)
    if args.dtype == "float64":
        jax.config.update("jax_enable_x64", True)
    info = machine()
    for num_arms in arm_counts:
        inst = graph_instance(num_arms)
        horizon = horizons.get(num_arms, args.horizon)
        cases = {name: scale_case(name, inst, horizon, args.runs, args.chunk, args.dtype) for name in ["ucb_n", *policies]}
        base = cases["ucb_n"]["seconds"]
        for name in policies:
            cases[name]["ratio_vs_ucb_n"] = cases[name]["seconds"] / base
        emit({
            "case": "scale", "num_arms": num_arms, "runs": args.runs, "horizon": horizon, "dtype": args.dtype,
            "edge_probability": EDGE_PROBABILITY, "policies": cases, "machine": info,
        })  # fmt: skip
    for num_arms in round_arms:
        inst = graph_instance(num_arms)
        for runs in round_runs:
            names = ["ucb_n", *round_policies]
            seconds = {name: round_seconds(name, inst, runs, args.round_start, args.round_rounds, args.dtype) for name in names}
            emit({
                "case": "round_time", "num_arms": num_arms, "runs": runs, "dtype": args.dtype, "first_round": args.round_start + 1,
                "rounds": args.round_rounds, "seconds_per_round": seconds,
                "ratio_vs_ucb_n": {name: seconds[name] / seconds["ucb_n"] for name in round_policies}, "machine": info,
            })  # fmt: skip
    return 0


if __name__ == "__main__":
    long_simulation_programs()
    raise SystemExit(main())
