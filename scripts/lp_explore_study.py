"""Study: regret / log T of the paper's Algorithm 1 against T, for every instance family.

For each built-in instance (standard bandit, full information, star graph, revealing
arm, random general matrix; K = 5) it simulates ``lp_explore`` with a theory-compliant
``alpha`` (4.5) and smaller ones, plus ``ucb_n`` and ``ts_n``, on common random numbers,
and draws regret / log t with 95% bands, the LP lower bound ``sum c*_i Delta_i`` and the
leading term of the upper bound ``4 alpha sum c*_i Delta_i`` for each ``alpha``.

Usage:  python scripts/lp_explore_study.py [--horizon 1000000] [--runs 200]
        [--alphas 4.5,1,0.25] [--out study_output] [--block 25]

Runs are simulated in blocks of ``--block`` and each block is saved under ``OUT/parts`` as
it finishes, so an interrupted study picks up where it stopped. Writes ``regret_over_log_t.png`` (the README figure), ``summary.csv`` (final regret / log
T, mean and standard error, per instance and policy) and ``curves.npz``.
"""

from __future__ import annotations

import argparse
import csv
import os
import sys
import time
import warnings

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import numpy as np  # noqa: E402

import jaxbandit as jb  # noqa: E402


def plot(curves_path: str, alphas, runs: int, horizon: int, out: str) -> str:
    """Draw ``regret_over_log_t.png`` from ``curves.npz`` (a 2 x 3 grid of instances)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    data = np.load(curves_path)
    times, names, bound = data["times"], [str(n) for n in data["instances"]], data["lower_bound"]
    labels = [key for key in data.files if key not in ("times", "instances", "lower_bound")]
    fig, axes = plt.subplots(2, 3, figsize=(13.5, 7.5))
    axes = axes.ravel()
    mask = times >= 10
    for i, instance_name in enumerate(names):
        ax = axes[i]
        top = 0.0
        for label in labels:
            ratio = data[label][i][:, mask] / np.log(times[mask])
            mean = ratio.mean(axis=0)
            half = 1.96 * ratio.std(axis=0, ddof=1) / np.sqrt(ratio.shape[0])
            (line,) = ax.plot(times[mask], mean, label=label)
            ax.fill_between(times[mask], mean - half, mean + half, color=line.get_color(), alpha=0.2)
            top = max(top, float(mean.max()))
        ax.axhline(bound[i], color="black", linestyle="--", label="LP lower bound")
        for alpha in alphas:
            ax.axhline(4 * alpha * bound[i], color="gray", linestyle=":", linewidth=1)
        ax.set_xscale("log")
        ax.set_title(f"{instance_name} (bound {bound[i]:.3g})")
        ax.set_xlabel("round t")
        ax.set_ylabel("regret / log t")
        ax.set_ylim(0, 1.1 * max(top, 1.5 * bound[i], 1e-3))
    handles, legend_labels = axes[0].get_legend_handles_labels()
    axes[-1].axis("off")
    axes[-1].legend(handles, legend_labels, loc="center", fontsize=10)
    fig.suptitle(
        f"regret / log t, mean and 95% band over {runs} runs, T = {horizon:.0e}; dashed: LP "
        f"lower bound; dotted: 4 alpha x bound for alpha in {list(alphas)}",
        fontsize=10,
    )
    fig.tight_layout()
    path = os.path.join(out, "regret_over_log_t.png")
    fig.savefig(path, dpi=100)
    plt.close(fig)
    print(f"wrote {path}")
    return path


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--horizon", type=int, default=1_000_000)
    parser.add_argument("--runs", type=int, default=200)
    parser.add_argument("--alphas", default="4.5,1,0.25", help="lp_explore alphas")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", default="study_output")
    parser.add_argument("--block", type=int, default=25, help="runs per saved block")
    args = parser.parse_args(argv)
    if args.block < 1:
        parser.error(f"--block must be a positive number of runs, got {args.block}")
    jb.compile_cache.enable()  # as the jaxbandit command: a resumed run loads what it compiled
    os.makedirs(args.out, exist_ok=True)

    named = jb.instances.default_instances()
    names = list(named)
    batch = jb.instances.stack([named[n] for n in names])
    bound = jb.lower_bound(batch)
    alphas = [float(a) for a in args.alphas.split(",")]
    policies = [(f"lp_explore(alpha={a:g})", "lp_explore", {"alpha": a}) for a in alphas]
    policies += [("ucb_n", "ucb_n", {}), ("ts_n", "ts_n", {})]

    # Runs are simulated in blocks, each saved as it finishes: an interrupted study resumes
    # where it stopped, and the result is the same (run r depends only on the seed and r).
    parts = os.path.join(args.out, "parts")
    os.makedirs(parts, exist_ok=True)
    curves, times = {}, None
    for label, name, params in policies:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # alpha <= 4 is outside the theory: on purpose
            policy = jb.policies.make(name, **params)
        blocks = []
        for first_run in range(0, args.runs, args.block):
            runs = min(args.block, args.runs - first_run)
            path = os.path.join(parts, f"{label}_T{args.horizon}_seed{args.seed}_runs{first_run}-{first_run + runs}.npz")
            if not os.path.exists(path):
                start = time.perf_counter()
                result = jb.simulate(policy, batch, args.horizon, runs, seed=args.seed, first_run=first_run)
                np.savez(path + ".tmp.npz", times=result.times, regret=result.regret)
                os.replace(path + ".tmp.npz", path)
                print(f"{label} runs {first_run}..{first_run + runs - 1}: {time.perf_counter() - start:.1f} s", flush=True)
            with np.load(path) as block:
                times = block["times"]
                blocks.append(block["regret"])
        curves[label] = np.concatenate(blocks, axis=1)  # (instance, run, time)

    with open(os.path.join(args.out, "summary.csv"), "w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(["instance", "policy", "horizon", "runs", "regret_over_log_T_mean", "standard_error", "lower_bound"])
        for i, instance_name in enumerate(names):
            for label, regret in curves.items():
                final = regret[i, :, -1] / np.log(args.horizon)
                writer.writerow([
                    instance_name, label, args.horizon, args.runs,
                    f"{final.mean():.4f}", f"{final.std(ddof=1) / np.sqrt(args.runs):.4f}",
                    f"{bound.value[i]:.4f}",
                ])
    np.savez(
        os.path.join(args.out, "curves.npz"),
        times=times,
        instances=np.array(names),
        lower_bound=np.asarray(bound.value),
        **curves,
    )

    plot(os.path.join(args.out, "curves.npz"), alphas, args.runs, args.horizon, args.out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
