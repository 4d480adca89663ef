"""Every registered policy on every built-in instance family, on identical noise.

Writes to ``--out``:

* ``final_regret.csv``: one row per (instance, policy) with the regret at the horizon:
  mean, standard error, median, 5% / 95% quantiles over runs, the LP lower bound
  ``sum_i c*_i Delta_i log T`` for reference, and the wall time;
* ``regret_curves.png``: mean regret against ``t`` (log scale) with a 95% confidence band
  (Student's t, as the library's figures), one panel per instance, with the asymptotic lower
  bound ``sum_i c*_i Delta_i log t`` dashed.

Every policy runs with its registry defaults, except ``eps_greedy_lp``, whose published
form takes a lower bound ``d`` on the smallest gap: it gets ``d = Delta_min`` of the
instance (recorded in the ``params`` column).  All runs use the same seed, so the
policies see the same noise (common random numbers).

Example (about two minutes on 2 CPU cores)::

    python scripts/compare_baselines.py --horizon 10000 --runs 200 --out baselines_output

The full study is ``--horizon 100000 --runs 1000``.
"""

from __future__ import annotations

import argparse
import csv
import json
import math
import os
import pathlib
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # this checkout's jaxbandit

import numpy as np  # noqa: E402

import jaxbandit as jb  # noqa: E402
from jaxbandit import instances  # noqa: E402
from scripts.paper_study import check_sizes  # noqa: E402  (one rule for a study's sizes)


def lower_bound_value(inst: jb.Instance) -> float:
    """``sum_i c*_i Delta_i`` of the paper's LP, or NaN if it is not solved."""
    try:
        return float(jb.lower_bound(inst).value)
    except Exception as err:  # report and carry on: the bound is only a reference line
        print(f"  lower bound failed: {err}", file=sys.stderr)
        return math.nan


def policy_params(name: str, inst: jb.Instance) -> dict:
    if name == "eps_greedy_lp":
        gaps = inst.gaps[inst.gaps > 0]
        return {"d": float(gaps.min())}
    return {}


def summarise(final: np.ndarray) -> dict:
    runs = final.shape[0]
    return {
        "mean": float(final.mean()),
        "stderr": float(final.std(ddof=1) / math.sqrt(runs)) if runs > 1 else math.nan,
        "median": float(np.median(final)),
        "q05": float(np.quantile(final, 0.05)),
        "q95": float(np.quantile(final, 0.95)),
    }


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=" ".join(__doc__.split("\n\n")[0].split()))
    parser.add_argument("--horizon", type=int, default=100_000, help="rounds T (default 100000)")
    parser.add_argument("--runs", type=int, default=1000, help="runs per cell (default 1000)")
    parser.add_argument("--out", type=pathlib.Path, default=pathlib.Path("compare_baselines_out"))
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--policies", nargs="*", default=None, help="default: every registered policy")
    parser.add_argument("--instances", nargs="*", default=list(instances.default_instances()))
    parser.add_argument("--no-plot", action="store_true")
    args = parser.parse_args(argv)
    check_sizes(parser, args)
    # Every name is checked before anything runs: a study with no cell would have no
    # row to write.
    if args.policies == []:
        parser.error("--policies: give at least one policy name (leave the option out for every policy)")
    if not args.instances:
        parser.error("--instances: give at least one instance name")
    names = args.policies or jb.policies.names()
    for name in names:
        try:
            jb.policies.resolve(name)
        except ValueError as err:
            parser.error(f"--policies: {err}")
    available = instances.default_instances()
    unknown = sorted(set(args.instances) - set(available))
    if unknown:
        parser.error(f"unknown instance(s) {unknown}; known: {sorted(available)}")
    jb.compile_cache.enable()  # as the jaxbandit command: a resumed run loads what it compiled
    try:
        args.out.mkdir(parents=True, exist_ok=True)
    except OSError as error:
        parser.error(f"--out: cannot create {str(args.out)!r} ({error.strerror})")

    rows, curves = [], {}
    for inst_name in args.instances:
        inst = available[inst_name]
        bound = lower_bound_value(inst)
        print(f"{inst_name}: mu={np.round(inst.mu, 3).tolist()}  LP bound {bound:.3f} * log T", flush=True)
        for name in names:
            params = policy_params(name, inst)
            try:
                policy = jb.policies.make(name, **params)
                result = jb.simulate(policy, inst, args.horizon, args.runs, seed=args.seed)
            except Exception as err:  # one broken policy must not sink the study
                print(f"  {name:>14}: FAILED {type(err).__name__}: {err}", flush=True)
                continue
            stats = summarise(result.final_regret)
            rows.append({
                "instance": inst_name,
                "policy": name,
                "params": json.dumps({**result.params}, sort_keys=True),
                "horizon": args.horizon,
                "runs": args.runs,
                **stats,
                "lower_bound": bound * math.log(args.horizon),
                "wall_time_s": round(result.wall_time, 2),
            })
            curves[(inst_name, name)] = (result.times, result.mean_regret(), result.standard_error())
            print(
                f"  {name:>14}: {stats['mean']:9.1f} +- {stats['stderr']:6.1f}  "
                f"median {stats['median']:9.1f}  [{stats['q05']:.1f}, {stats['q95']:.1f}]  "
                f"{result.wall_time:6.1f}s",
                flush=True,
            )

    if not rows:
        print("every cell failed: no results to write", file=sys.stderr)
        return 1
    csv_path = args.out / "final_regret.csv"
    with open(csv_path, "w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    print(f"wrote {csv_path}")

    if not args.no_plot:
        plot(curves, args, names)
    return 0


def plot(curves: dict, args, names: list[str]) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    available = instances.default_instances()
    panels = len(args.instances)
    fig, axes = plt.subplots(1, panels, figsize=(3.6 * panels, 3.4), sharex=True, squeeze=False)
    colors = plt.get_cmap("tab20")(np.linspace(0, 1, max(len(names), 2)))
    for ax, inst_name in zip(axes[0], args.instances):
        for color, name in zip(colors, names):
            if (inst_name, name) not in curves:
                continue
            times, mean, stderr = curves[(inst_name, name)]
            ax.plot(times, mean, color=color, lw=1.2, label=name)
            half = jb.comparison.half_width_95(stderr, args.runs)
            ax.fill_between(times, mean - half, mean + half, color=color, alpha=0.2, lw=0)
        bound = lower_bound_value(available[inst_name])
        if np.isfinite(bound):
            t = np.geomspace(1, args.horizon, 200)
            ax.plot(t, bound * np.log(t), "k--", lw=1, label="LP lower bound")
        ax.set_xscale("log")
        ax.set_title(inst_name, fontsize=9)
        ax.set_xlabel("round t")
        ax.tick_params(labelsize=7)
    axes[0][0].set_ylabel("mean regret (95% band)")
    handles, labels = axes[0][0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="lower center", ncol=min(len(labels), 7), fontsize=7, frameon=False)
    fig.suptitle(f"T = {args.horizon}, {args.runs} runs per curve, seed {args.seed}", fontsize=9)
    fig.tight_layout(rect=(0, 0.1, 1, 0.95))
    path = args.out / "regret_curves.png"
    fig.savefig(path, dpi=110)
    print(f"wrote {path}")


if __name__ == "__main__":
    raise SystemExit(main())
