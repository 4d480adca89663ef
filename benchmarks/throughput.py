"""Engine throughput: run-rounds per second for each policy, the bare observation
sampling, and the same UCB-N work by a vectorized NumPy loop (``tests/reference.py``:
runs as arrays, a Python loop over rounds), in one process.

Usage:  python benchmarks/throughput.py [--quick] [--policies ucb_n,ts_n] [--arms 10,50]
        [--runs 1000,10000] [--rounds 2048]

Prints one JSON line per case (``numpy_ucb_n``, ``bare_sampling``, then each policy), with
"num_arms", "runs", "rounds" (``--rounds``; the NumPy loop runs ``numpy_rounds``),
"run_rounds_per_s" and "machine"; the sampling's and the policies' lines have
"ratio_vs_numpy", the policies' "ratio_vs_sampling" and their cost per run-round
relative to ``ucb_n`` (always timed, as the reference): "cost_vs_ucb_n" from wall time
and "cpu_cost_vs_ucb_n" from the process's CPU time, which other jobs on a shared
machine disturb less.
"""

from __future__ import annotations

import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402

import jaxbandit as jb  # noqa: E402
from benchmarks._common import best_time, best_wall_and_cpu, emit, int_list, machine, numpy_noise, random_instance  # noqa: E402
from benchmarks._common import long_simulation_programs  # noqa: E402
from jaxbandit import environment, rng  # noqa: E402
from tests import reference  # noqa: E402

REFERENCE = "ucb_n"  # the policy every other policy's cost is compared with


def time_policy(name: str, inst: jb.Instance, runs: int, rounds: int) -> tuple[float, float]:
    """Wall and CPU seconds for ``rounds`` rounds of ``runs`` runs in the steady state of
    a long run.

    The run has a horizon of 10**7 (results on the default ~100-point grid); the first
    chunk compiles and covers the densely recorded start, then one chunk of ``rounds``
    rounds is timed, three times in a row, and the best of each clock is kept.
    """
    policy = jb.policies.make(name)
    sim = jb.SimulationRun(policy, inst, 10**7, runs, seed=0, chunk_size=rounds)
    sim.advance(max_chunks=1)  # compiles
    return best_wall_and_cpu(lambda: sim.advance(max_chunks=1), repeat=3)


def time_sampling(inst: jb.Instance, runs: int, rounds: int) -> float:
    """Bare observation sampling: the environment step alone, round-robin arms."""
    env = environment.make_params(inst.mu, inst.sigma)
    keys = rng.run_keys(rng.stream_key(0, rng.NOISE_STREAM), 0, jnp.arange(runs))
    num_arms = inst.num_arms

    @jax.jit
    def run(keys):
        def body(total, t):
            arm = t % num_arms
            values = jax.vmap(environment.observe, (0, None, None, None))(keys, t, arm, env)
            return total + values, None

        total, _ = jax.lax.scan(body, jnp.zeros((runs, num_arms)), jnp.arange(rounds, dtype=jnp.int32))
        return total

    return best_time(lambda: jax.block_until_ready(run(keys)), repeat=3, warm_up=True)


def time_numpy(inst: jb.Instance, runs: int, rounds: int) -> float:
    """Seconds for ``rounds`` rounds of UCB-N in NumPy (``reference.ucb_n``, the noise
    drawn round by round), best of two after a short run that warms the caches."""

    def run(horizon):
        reference.ucb_n(inst.mu, inst.sigma, horizon, runs, numpy_noise(0, runs, inst.num_arms))

    run(50)
    return best_time(lambda: run(rounds), repeat=2)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=" ".join(__doc__.split("\n\n")[0].split()))
    parser.add_argument("--policies", default="ucb_n,ucb,ts_n,ts,greedy,eps_greedy")
    parser.add_argument("--arms", default="10,50")
    parser.add_argument("--runs", default="1000,10000")
    parser.add_argument("--rounds", type=int, default=2048, help="rounds timed per case")
    parser.add_argument("--numpy-rounds", type=int, default=300)
    parser.add_argument("--quick", action="store_true", help="defaults K=10, runs=1000, 1024 rounds (options given win)")
    args = parser.parse_args(argv)
    if args.quick:  # other defaults; what the command line gives still wins
        parser.set_defaults(arms="10", runs="1000", rounds=1024)
        args = parser.parse_args(argv)
    # Every option is checked before anything runs: an empty list would time nothing, a
    # zero count divides by zero in the ratios.
    arm_counts = int_list(parser, "--arms", args.arms, 2)
    run_counts = int_list(parser, "--runs", args.runs, 1)
    if not arm_counts:
        parser.error("--arms: give at least one arm count")
    if not run_counts:
        parser.error("--runs: give at least one run count")
    for option, rounds in (("--rounds", args.rounds), ("--numpy-rounds", args.numpy_rounds)):
        if rounds < 1:
            parser.error(f"{option}: must be >= 1, got {rounds}")
    policies = [name.strip() for name in args.policies.split(",") if name.strip()]
    if not policies:
        parser.error(f"--policies: give at least one policy name, got {args.policies!r}")
    for name in policies:
        try:
            jb.policies.resolve(name)
        except ValueError as err:
            parser.error(f"--policies: {err}")
    if REFERENCE not in policies:
        policies.insert(0, REFERENCE)
    info = machine()
    for num_arms in arm_counts:
        inst = random_instance(0, num_arms)
        for runs in run_counts:
            config = {"num_arms": num_arms, "runs": runs, "rounds": args.rounds}
            numpy_rate = runs * args.numpy_rounds / time_numpy(inst, runs, args.numpy_rounds)
            sampling_rates = [runs * args.rounds / time_sampling(inst, runs, args.rounds)]
            policy_times = {name: time_policy(name, inst, runs, args.rounds) for name in policies}
            reference_wall, reference_cpu = policy_times[REFERENCE]
            # The machine is shared: time the sampling again after the policies and keep
            # the faster figure, so a quiet spell cannot flatter the policies' ratios.
            sampling_rates.append(runs * args.rounds / time_sampling(inst, runs, args.rounds))
            sampling_rate = max(sampling_rates)
            emit(
                {
                    "case": "numpy_ucb_n",
                    **config,
                    "numpy_rounds": args.numpy_rounds,
                    "run_rounds_per_s": numpy_rate,
                    "machine": info,
                }
            )
            emit(
                {
                    "case": "bare_sampling",
                    **config,
                    "run_rounds_per_s": sampling_rate,
                    "run_rounds_per_s_each": sampling_rates,
                    "ratio_vs_numpy": sampling_rate / numpy_rate,
                    "machine": info,
                }
            )
            for name, (wall, cpu) in policy_times.items():
                rate = runs * args.rounds / wall
                emit(
                    {
                        "case": name,
                        **config,
                        "run_rounds_per_s": rate,
                        "ratio_vs_numpy": rate / numpy_rate,
                        "ratio_vs_sampling": rate / sampling_rate,
                        "cost_vs_ucb_n": wall / reference_wall,
                        "cpu_cost_vs_ucb_n": cpu / reference_cpu,
                        "machine": info,
                    }
                )
    return 0


if __name__ == "__main__":
    long_simulation_programs()
    raise SystemExit(main())
