"""Compile the LP solver, the lower bound and the simulation engine for an NVIDIA GPU on
a machine without one (XLA's deviceless ahead-of-time compilation), to catch GPU
compiler failures that the CPU tests cannot see.

XLA's GPU compiler can fail on code that compiles on the CPU (for instance "Failed to
translate module to LLVM IR" on a fusion of ``lax.reduce_precision``).  This script
compiles every entry point, and the engine of every registered policy, at several K
and in both precisions, for the GPU described by a target configuration (default: an
H100, ``gpu_targets/h100.pbtxt``, as written by XLA's ``--xla_dump_to``).

Needs JAX's CUDA plugin (a few GB of CUDA wheels; a separate virtual environment is
best), but no GPU and no driver:
    python -m pip install "jax[cuda13]==$(python -c 'import jax; print(jax.__version__)')"
    JAX_PLATFORMS=cpu python scripts/check_gpu_compile.py [--arms 2 3 4 5 8] [--target FILE]

Prints one line per compiled function and exits 1 if any failed.  Compiling is all it
checks: whether the results are right on the GPU needs the GPU.
"""

from __future__ import annotations

import argparse
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402
from jax.experimental import topologies  # noqa: E402

import jaxbandit as jb  # noqa: E402
from jaxbandit import bound, bound_lp, compile_options, lp, runner  # noqa: E402

DEFAULT_TARGET = os.path.join(os.path.dirname(os.path.abspath(__file__)), "gpu_targets", "h100.pbtxt")


def gpu_device(target_file: str):
    """A compile-only device for the GPU that ``target_file`` describes."""
    with open(target_file) as handle:
        config = handle.read()
    return topologies.get_topology_desc("gpu", "cuda", target_config=config, topology="1x1x1").devices[0]


def compile_for(device, function, *args) -> None:
    """Compile ``function`` (jitted) for ``device`` at the shapes and dtypes of ``args``."""
    sharding = jax.sharding.SingleDeviceSharding(device)
    abstract = jax.tree.map(
        lambda a: jax.ShapeDtypeStruct(jnp.shape(a), jnp.result_type(a), sharding=sharding), args
    )
    function.trace(*abstract).lower(lowering_platforms=("cuda",)).compile()


def cases(num_arms: int, dtype):
    """(name, jitted function, example arguments) for every entry point at this K."""
    inst = jb.instances.bandit(np.linspace(1.0, 0.0, num_arms))
    mu = jnp.asarray(inst.mu, dtype)
    precision = jnp.asarray(np.where(np.isinf(inst.precision), 0, inst.precision), dtype)
    problem = bound_lp.lower_bound_problem(mu, precision)
    lp_args = (problem.cost, problem.A, problem.b)
    basis = lp.solve(*lp_args).basis
    factor = lp.factor_basis(problem.A, basis)
    warm = bound_lp.warm_start(precision, basis)
    lanes = lambda *a: tuple(jnp.stack([x] * bound._MIN_LANES) for x in a)  # noqa: E731
    one = lambda *a: tuple(x[None] for x in a)  # noqa: E731
    # jb.lower_bound's own compiled functions, at its smallest batch: the batched solve,
    # and the float64 rescue's check and retry (one program for every retry setting)
    yield "lower_bound batch", bound._batched_solve.jitted("gpu"), lanes(mu, precision)
    yield "lower_bound verify basis", bound._verify_basis.jitted("gpu"), lanes(mu, precision, basis)
    refactorizations, tolerance = bound._FLOAT64_RETRIES[0]
    settings = (jnp.int32(refactorizations), jnp.asarray(tolerance, dtype))
    yield "lower_bound retry", bound._solve_with.jitted("gpu"), lanes(mu, precision) + settings
    yield "lower_bound", jax.jit(bound_lp.solve_lower_bound), (mu, precision)
    yield "lp.solve", jax.jit(lp.solve), lp_args
    yield "lp.solve batch 1", jax.jit(jax.vmap(lp.solve)), one(*lp_args)
    yield "lp.check_basis", jax.jit(lp.check_basis), (*lp_args, basis)
    yield "lp.factor_basis", jax.jit(lp.factor_basis), (problem.A, basis)
    yield "lp.quick_check", jax.jit(lp.quick_check), (*lp_args, factor)
    factors = jax.tree.map(lambda x: x[None], factor)
    yield "lp.quick_check batch 1", jax.jit(jax.vmap(lp.quick_check)), (*one(*lp_args), factors)
    yield "check_warm_start", jax.jit(bound_lp.check_warm_start), (mu, precision, warm)
    yield "solve_lower_bound_warm", jax.jit(bound_lp.solve_lower_bound_warm), (mu, precision, warm)


def engine_case(num_arms: int, dtype, runs: int, policy_name: str):
    compile_options.QUICK_WORK = 0  # a GPU compiles XLA's defaults at every length
    inst = jb.instances.bandit(np.linspace(1.0, 0.0, num_arms))
    run = runner.SimulationRun(jb.policies.make(policy_name), inst, 10_000, runs, dtype=np.dtype(dtype).name)
    return f"engine {policy_name} runs={runs}", run._sim.run_chunk, run._chunk_arguments()


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=" ".join(__doc__.split("\n\n")[0].split()))
    parser.add_argument("--arms", type=int, nargs="+", default=[2, 3, 4, 5, 8])
    parser.add_argument("--target", default=DEFAULT_TARGET, help="an XLA GpuTargetConfigProto, text format")
    parser.add_argument("--engine-runs", type=int, nargs="+", default=[1, 100], help="runs of lp_explore's engine")
    parser.add_argument(
        "--policies", nargs="*", default=None, help="other policies whose engine to compile, at 100 runs (default: all)"
    )
    parser.add_argument("--only", default="", help="only the functions whose name contains this")
    args = parser.parse_args(argv)
    if any(k < 2 for k in args.arms) or any(r < 1 for r in args.engine_runs):
        parser.error(f"--arms must be >= 2 and --engine-runs >= 1, got {args.arms} and {args.engine_runs}")
    for name in args.policies or ():
        try:
            jb.policies.resolve(name)
        except ValueError as err:
            parser.error(f"--policies: {err}")
    if not os.path.isfile(args.target):
        parser.error(f"--target: no such file {args.target!r}")
    try:
        device = gpu_device(args.target)
    except NotImplementedError as error:  # "topology not implemented for cuda": no CUDA plugin
        parser.error(f"no GPU compiler here ({error}): install JAX's CUDA plugin, as this script's docstring says")
    failures = compiled = 0
    for dtype in (np.float32, np.float64):
        with jax.enable_x64(dtype == np.float64):
            for num_arms in args.arms:
                todo = list(cases(num_arms, dtype))
                todo += [engine_case(num_arms, dtype, runs, "lp_explore") for runs in args.engine_runs]
                others = [name for name in jb.policies.names() if name != "lp_explore"]
                chosen = others if args.policies is None else args.policies
                todo += [engine_case(num_arms, dtype, 100, name) for name in chosen]
                for name, function, example in (c for c in todo if args.only in c[0]):
                    compiled += 1
                    start = time.perf_counter()
                    try:
                        compile_for(device, function, *example)
                        verdict = "ok"
                    except Exception as error:  # noqa: BLE001 - report every failure
                        failures += 1
                        verdict = "FAILED: " + str(error).splitlines()[0][:160]
                    seconds = time.perf_counter() - start
                    print(f"{np.dtype(dtype).name} K={num_arms} {name}: {verdict} ({seconds:.1f} s)", flush=True)
    if not compiled:
        print(f"nothing compiled: no function's name contains --only {args.only!r}")
        return 1
    print(f"all {compiled} compiled" if not failures else f"{failures} of {compiled} failed")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
