"""Throughput and accuracy of the batched lower-bound LP solve, against a linprog loop
and a highspy loop.

Prints one JSON line per case:
* ``solve``: LPs/s of ``jit(vmap(solve_lower_bound))`` at K x batch x dtype, the
  ``scipy.optimize.linprog(method="highs")`` loop in the same process (on up to
  ``--reference-size`` of the instances, as LPs/s), the speed-up, and accuracy beside
  it: the fraction with status OPTIMAL and the max relative objective error against
  HiGHS (on the same sample); and a plain ``highspy`` loop over the same sample (the
  HiGHS library called directly, one fresh model per LP, without scipy's wrapping),
  its LPs/s, the speed-up against it, and its largest relative difference from the
  ``linprog`` objectives.
* ``solve_chunked_<n>``: the same through ``lax.map(solve_lower_bound, batch_size=n)`` (vmap in chunks
  of n, so fewer lanes wait for the slowest LP of the batch).
* ``lower_bound``: the same batch through the host API, ``jaxbandit.bound.lower_bound`` of
  the batch instance (float64 instances, the solve in ``dtype``), which runs it in pieces
  sized to the LP (``bound._largest_lanes``, reported as ``lanes``), for batches of at
  least ``--large``.
* ``warm_check``: the cost of the verified warm-start check (``check_warm_start`` with
  the previous optimal basis, at means perturbed by 1e-3) against a full solve; and of
  the re-use without a check (``reuse_warm_start``, the warm start anchored where its
  check passed at the unperturbed means) at the same means and at means perturbed by
  1e-5 (consecutive rounds late in a run move less than that), with the fraction of
  lanes each path answers.  Each is timed two ways:

  - *per call* (``full_over_check`` ...): one jitted call per batch from Python.  At
    small batches this is mostly the call's fixed cost (dispatch, launching the
    executable), the same for all three.
  - *in a loop* (``loop_full_over_check`` ...): ``--loop-lps`` LPs as successive
    batches (new perturbed means each iteration) inside one compiled ``fori_loop``,
    nothing hoisted out of it (see ``_loop``), as the simulation engine calls them
    inside its ``scan``.  This is the cost a simulation pays.

Instances: ``jaxbandit.instances.random`` (general asymmetric sigma with inf entries).
Timing: ``timeit.repeat(..., number=1, repeat=N)`` minimum, after a warm-up call.  The
HiGHS reference is ``tests/reference.py``'s, one ``linprog`` call per LP.

Usage: ``python benchmarks/lp.py [--arms 5 10 20 50] [--batches 1 100 10000]``;
``--approximate-division`` emulates a GPU's float32 division on the CPU.
"""

import argparse
import os
import sys
import timeit

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402

from benchmarks._common import best_time, emit, machine  # noqa: E402
from jaxbandit import bound, bound_lp, instances  # noqa: E402
from tests import reference  # noqa: E402


def make_instances(num_arms, batch, seed=0):
    return instances.random(seed, num_arms, num_instances=batch)


def make_batch(num_arms, batch, seed=0):
    inst = make_instances(num_arms, batch, seed)
    return inst.mu, inst.precision


def highs_values(mu, precision):
    """HiGHS objective of each instance (NaN where it fails), one ``linprog`` each."""
    values = []
    for m, w in zip(mu, precision):
        gaps, b, _ = reference.lower_bound_problem(m)
        result = reference.solve_highs(gaps, b, w)
        values.append(result.fun if result.status == 0 else np.nan)
    return np.array(values)


def _silent_highs():
    """A ``highspy.Highs`` without output: its start-up banner goes to the process's
    stdout (past ``sys.stdout``), which carries this script's JSON, so file descriptor 1
    points to /dev/null while it is made."""
    import highspy

    sys.stdout.flush()
    saved = os.dup(1)
    try:
        with open(os.devnull, "w") as null:
            os.dup2(null.fileno(), 1)
            solver = highspy.Highs()
    finally:
        os.dup2(saved, 1)
        os.close(saved)
    solver.setOptionValue("output_flag", False)
    return solver


def highspy_values(mu, precision):
    """HiGHS objective of each instance (NaN where it fails) from a plain ``highspy``
    loop: one model per LP, passed whole (``A = W^T`` column by column)."""
    import highspy

    solver = _silent_highs()
    values = []
    for m, w in zip(mu, precision):
        gaps, b, _ = reference.lower_bound_problem(m)
        k = len(gaps)
        lp = highspy.HighsLp()
        lp.num_col_, lp.num_row_ = k, k
        lp.col_cost_, lp.col_lower_, lp.col_upper_ = gaps, np.zeros(k), np.full(k, highspy.kHighsInf)
        lp.row_lower_, lp.row_upper_ = b, np.full(k, highspy.kHighsInf)
        # Column j of A = W^T is row j of W.
        lp.a_matrix_.format_ = highspy.MatrixFormat.kColwise
        lp.a_matrix_.start_ = np.arange(0, k * k + 1, k)
        lp.a_matrix_.index_ = np.tile(np.arange(k), k)
        lp.a_matrix_.value_ = np.ascontiguousarray(w, np.float64).reshape(-1)
        solver.passModel(lp)
        solver.run()
        optimal = solver.getModelStatus() == highspy.HighsModelStatus.kOptimal
        values.append(solver.getInfo().objective_function_value if optimal else np.nan)
    return np.array(values)


def run_solve_case(num_arms, batch, dtype, repeat, reference_size, chunk_size=None, host=False):
    mu, precision = make_batch(num_arms, batch)
    if host:
        instance = make_instances(num_arms, batch)
        seconds = best_time(lambda: bound.lower_bound(instance, dtype=dtype, throw=False), repeat, warm_up=True)
        out = bound.lower_bound(instance, dtype=dtype, throw=False)  # a LowerBound: status and value
    elif chunk_size is None:
        solve = jax.jit(jax.vmap(bound_lp.solve_lower_bound))
    else:
        solve = jax.jit(
            lambda m, w: jax.lax.map(lambda args: bound_lp.solve_lower_bound(*args), (m, w), batch_size=chunk_size)
        )
    if not host:
        with jax.enable_x64(dtype == "float64"):
            args = (jnp.asarray(mu, dtype), jnp.asarray(precision, dtype))
            seconds = best_time(lambda: jax.block_until_ready(solve(*args)), repeat, warm_up=True)
            out = jax.tree.map(np.asarray, solve(*args))
    sample = min(batch, reference_size)
    # HiGHS solves the LPs the solver was given: the data as rounded to dtype, so that
    # the error below is the solver's, not the rounding of its input
    as_given = [np.asarray(x[:sample], dtype).astype(np.float64) for x in (mu, precision)]
    highs_values(*(x[:1] for x in as_given))  # one-off costs out of the timing, as the
    highspy_values(*(x[:1] for x in as_given))  # JAX side's warm-up keeps its compile out
    start = timeit.default_timer()
    highs = highs_values(*as_given)
    highs_seconds = timeit.default_timer() - start
    start = timeit.default_timer()
    direct = highspy_values(*as_given)
    highspy_seconds = timeit.default_timer() - start
    agree = np.isfinite(direct) & np.isfinite(highs)
    optimal = out.status == 0
    solved = optimal[:sample] & np.isfinite(highs)
    error = np.abs(out.value[:sample][solved] - highs[solved]) / np.maximum(highs[solved], 1e-300)
    case = "lower_bound" if host else "solve" if chunk_size is None else f"solve_chunked_{chunk_size}"
    return {
        "case": case,
        "num_arms": num_arms,
        "batch": batch,
        "dtype": dtype,
        "lps_per_second": batch / seconds,
        "seconds": seconds,
        "linprog_lps_per_second": sample / highs_seconds,
        "speedup_vs_linprog": (batch / seconds) / (sample / highs_seconds),
        "highspy_lps_per_second": sample / highspy_seconds,
        "speedup_vs_highspy": (batch / seconds) / (sample / highspy_seconds),
        "highspy_fraction_optimal": float(np.isfinite(direct).mean()),
        "highspy_max_relative_difference_vs_linprog": float(
            np.max(np.abs(direct[agree] - highs[agree]) / np.maximum(highs[agree], 1e-300), initial=0.0)
        ),
        "fraction_optimal": float(optimal.mean()),
        "max_relative_error_vs_highs": float(error.max()) if error.size else None,
        "accuracy_sample": int(sample),
        "mean_pivots": None if host else float(out.num_iterations.mean()),
    } | ({"lanes": bound._lanes(batch, bound._largest_lanes(num_arms, dtype))} if host else {})


def _loop(step):
    """``jit`` of a ``fori_loop`` applying ``step`` to ``means[r]`` for each ``r``.

    The warm start passes through an optimization barrier together with the loop
    index, so XLA can hoist nothing computed from it out of the loop (in a simulation
    it changes between rounds), and nothing is copied per iteration: carried as loop
    state instead, it would be copied every iteration, a cost the check and the re-use
    do not pay in a simulation.  ``precision`` stays loop-invariant, as an instance's
    is in a simulation.  The sum of the answers is returned so that none of the work
    is dead.
    """

    def run(means, precision, *warm):
        def body(r, total):
            changing, _ = jax.lax.optimization_barrier((warm, r))
            ok, c = step(means[r], precision, *changing)
            return total + jnp.sum(c) + jnp.sum(ok)

        return jax.lax.fori_loop(0, means.shape[0], body, jnp.zeros((), means.dtype))

    return jax.jit(run)


_full_step = jax.vmap(lambda m, w: (jnp.bool_(True), bound_lp.solve_lower_bound(m, w).c))
_check_step = jax.vmap(lambda m, w, warm: (lambda ok, s, _: (ok, s.c))(*bound_lp.check_warm_start(m, w, warm)))
_reuse_step = jax.vmap(lambda m, w, warm: (lambda ok, s: (ok, s.c))(*bound_lp.reuse_warm_start(m, w, warm)))
_full_loop = _loop(_full_step)
_check_loop = _loop(_check_step)
_reuse_loop = _loop(_reuse_step)


def run_warm_case(num_arms, batch, dtype, repeat, loop_lps):
    mu, precision = make_batch(num_arms, batch, seed=1)
    rng = np.random.default_rng(2)
    moved = mu + rng.normal(0, 1e-3, mu.shape)
    solve = jax.jit(jax.vmap(bound_lp.solve_lower_bound))
    nearby = mu + rng.normal(0, 1e-5, mu.shape)
    iterations = max(4, loop_lps // batch)
    moved_path = mu + rng.normal(0, 1e-3, (iterations,) + mu.shape)
    nearby_path = mu + rng.normal(0, 1e-5, (iterations,) + mu.shape)
    check = jax.jit(jax.vmap(bound_lp.check_warm_start))
    anchor = jax.jit(jax.vmap(bound_lp.anchor_warm_start))
    reuse = jax.jit(jax.vmap(bound_lp.reuse_warm_start))
    with jax.enable_x64(dtype == "float64"):
        args = (jnp.asarray(mu, dtype), jnp.asarray(precision, dtype))
        moved_args = (jnp.asarray(moved, dtype), args[1])
        nearby_args = (jnp.asarray(nearby, dtype), args[1])
        warm = jax.jit(jax.vmap(bound_lp.warm_start))(args[1], solve(*args).basis)
        _, _, sensitivity = check(*args, warm)
        anchored = anchor(warm, *args, sensitivity.values, sensitivity.cost_room)
        full = best_time(lambda: jax.block_until_ready(solve(*moved_args)), repeat, warm_up=True)
        checked = best_time(lambda: jax.block_until_ready(check(*moved_args, warm)), repeat, warm_up=True)
        reused = best_time(lambda: jax.block_until_ready(reuse(*moved_args, anchored)), repeat, warm_up=True)
        ok, _, _ = check(*moved_args, warm)
        reuse_ok, _ = reuse(*moved_args, anchored)
        nearby_ok, _ = reuse(*nearby_args, anchored)
        moved_path, nearby_path = (jnp.asarray(p, dtype) for p in (moved_path, nearby_path))
        loop_full = best_time(lambda: jax.block_until_ready(_full_loop(moved_path, args[1])), repeat, warm_up=True)
        loop_check = best_time(lambda: jax.block_until_ready(_check_loop(moved_path, args[1], warm)), repeat, warm_up=True)
        loop_reuse = best_time(lambda: jax.block_until_ready(_reuse_loop(nearby_path, args[1], anchored)), repeat, warm_up=True)
    return {
        "case": "warm_check",
        "num_arms": num_arms,
        "batch": batch,
        "dtype": dtype,
        "full_solve_seconds": full,
        "check_seconds": checked,
        "full_over_check": full / checked,
        "fraction_check_ok": float(np.asarray(ok).mean()),
        "reuse_seconds": reused,
        "full_over_reuse": full / reused,
        "fraction_reuse_ok_1e-3": float(np.asarray(reuse_ok).mean()),
        "fraction_reuse_ok_1e-5": float(np.asarray(nearby_ok).mean()),
        "loop_iterations": iterations,
        "loop_full_solve_seconds": loop_full / iterations,
        "loop_check_seconds": loop_check / iterations,
        "loop_reuse_seconds": loop_reuse / iterations,
        "loop_full_over_check": loop_full / loop_check,
        "loop_full_over_reuse": loop_full / loop_reuse,
    }


def main(argv=None):
    parser = argparse.ArgumentParser(description=" ".join(__doc__.split("\n\n")[0].split()))
    parser.add_argument("--arms", type=int, nargs="+", default=[5, 10, 20, 50])
    parser.add_argument("--batches", type=int, nargs="+", default=[1, 100, 10_000])
    parser.add_argument("--dtypes", nargs="+", choices=["float32", "float64"], default=["float32", "float64"])
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--reference-size", type=int, default=300)
    parser.add_argument("--no-warm", action="store_true")
    parser.add_argument("--no-solve", action="store_true", help="only the warm-start cases")
    parser.add_argument(
        "--chunked-only", action="store_true", help="batches >= 1000: skip the plain vmapped solve"
    )
    parser.add_argument(
        "--warm-batches", type=int, nargs="+", default=None, help="batches of the warm-start cases (default: --batches)"
    )
    parser.add_argument(
        "--loop-lps", type=int, default=20_000, help="LPs per timed loop of the warm-start cases (at least 4 batches)"
    )
    parser.add_argument(
        "--chunk", type=int, default=128, help="also time the solve vmapped in chunks of this size (lax.map) for batches >= 1000 (0: not)"
    )
    parser.add_argument(
        "--large", type=int, default=1000, help="the smallest batch of the host API case (lower_bound)"
    )
    parser.add_argument(
        "--approximate-division",
        action="store_true",
        help="CPU only: float32 division off by up to 2.5 ulp, as a GPU's (tests/approximate_division.py)",
    )
    args = parser.parse_args(argv)
    # Every count is checked before anything runs: a zero would divide by zero in the
    # speed-ups or take the best of no timings.
    for option, values, smallest in (
        ("--arms", args.arms, 2),
        ("--batches", args.batches, 1),
        ("--warm-batches", args.warm_batches or [], 1),
        ("--repeat", [args.repeat], 1),
        ("--reference-size", [args.reference_size], 1),
        ("--loop-lps", [args.loop_lps], 1),
        ("--chunk", [args.chunk], 0),
        ("--large", [args.large], 1),
    ):
        if min(values, default=smallest) < smallest:
            parser.error(f"{option}: must be >= {smallest}, got {min(values)}")
    info = machine()
    if args.approximate_division and jax.default_backend() != "cpu":
        parser.error("--approximate-division emulates a GPU's division on the CPU; on a GPU leave it out")
    if args.approximate_division:
        from tests.approximate_division import approximate_division

        info["float32_division"] = "approximate (emulated, up to 2.5 ulp)"
        with approximate_division():
            run_cases(args, info)
    else:
        run_cases(args, info)


def run_cases(args, info):
    for num_arms in args.arms if not args.no_solve else ():
        for batch in args.batches:
            for dtype in args.dtypes:
                if not (args.chunked_only and batch >= 1000):
                    record = run_solve_case(num_arms, batch, dtype, args.repeat, args.reference_size)
                    emit(record | {"machine": info})
                if batch >= 1000 and args.chunk:
                    record = run_solve_case(
                        num_arms, batch, dtype, args.repeat, args.reference_size, args.chunk
                    )
                    emit(record | {"machine": info})
                if batch >= args.large:
                    record = run_solve_case(num_arms, batch, dtype, args.repeat, args.reference_size, host=True)
                    emit(record | {"machine": info})
    if not args.no_warm:
        for num_arms in args.arms:
            for batch in args.warm_batches or args.batches:
                for dtype in args.dtypes:
                    record = run_warm_case(num_arms, batch, dtype, args.repeat, args.loop_lps)
                    emit(record | {"machine": info})


if __name__ == "__main__":
    main()
