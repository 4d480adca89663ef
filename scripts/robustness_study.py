"""Beyond Gaussian noise: the paper's algorithms and the baselines when the samples are
Bernoulli, uniform, Rademacher or Student's t, against the bound of the family where
one is known (Gaussian, Bernoulli) and the Gaussian LP at sigma (a reference) where not.

    python scripts/robustness_study.py --report docs/robustness_study.md --figures docs/figures
                                                                # T = 10^5, 100 runs: what README and docs/ show
    python scripts/robustness_study.py --horizon 10000 --runs 20 --out quick_robustness

The report and its figure go to ``OUT/robustness_study.md`` and ``OUT/figures`` unless
``--report`` and ``--figures`` say otherwise.

One sweep per noise family (resumable: run the same command again after an
interruption), each the built-in instances (K = 5) and the K = 20 feedback graph of the
paper study x ``ucb_n``, ``ts_n``, ``ossb`` and ``lp_explore`` (alpha 0.25 and 4.5), on
common random numbers.  Every family runs the same instances: means mapped to
``0.05 + 0.9 mu`` (inside (0, 1), as Bernoulli means must be; a best mean of 1 would
make every other arm's divergence infinite and the bound 0), and every finite sigma set
to 1/2, the sub-Gaussian scale of a [0, 1] sample and so the tightest one a Bernoulli
policy may assume; the other families draw their noise at that scale.  The policies
assume the Gaussian model at sigma (``lp_explore`` and ``ossb`` its LP), so the study
measures what that assumption costs.  It writes a report with the table
(``--report``) and a figure (``--figures``); ``--report-only`` redraws them.
"""

from __future__ import annotations

import argparse
import math
import os
import sys
import warnings

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import numpy as np  # noqa: E402

import jaxbandit as jb  # noqa: E402
from jaxbandit import stopping  # noqa: E402
from scripts.paper_study import check_sizes, finished_or_run, output_directories  # noqa: E402  (one way to run or load a study's sweeps)

FAMILIES = ("gaussian", "bernoulli", "uniform", "rademacher", "student_t(df=3)")
POLICIES = [{"name": "ucb_n"}, {"name": "ts_n"}, {"name": "ossb"}, {"name": "lp_explore", "alpha": [0.25, 4.5]}]
SIGMA = 0.5


def graph20() -> jb.Instance:
    """The K = 20 feedback graph of the paper study (scripts/paper_study.py)."""
    rng = np.random.default_rng(2022)
    mu = np.append(1.0, rng.uniform(0.0, 0.8, 19))
    return jb.instances.graph(mu, rng.uniform(size=(20, 20)) < 0.15, 1.0)


def study_instances() -> dict:
    """``{name: (mu, sigma)}``: the built-in instances and graph20, means mapped into
    (0, 1) and every finite sigma set to :data:`SIGMA`."""
    instances = dict(jb.instances.default_instances(), graph20=graph20())
    return {name: (0.05 + 0.9 * inst.mu, np.where(np.isfinite(inst.sigma), SIGMA, np.inf)) for name, inst in instances.items()}


def sweep_configs(horizon: int, runs: int, seed: int) -> dict:
    """``{family label: config dict}``, one sweep per family."""
    def entry(name, mu, sigma, family):
        sigma = [["inf" if math.isinf(v) else v for v in row] for row in sigma.tolist()]
        return {"type": "explicit", "name": name, "mu": mu.tolist(), "sigma": sigma, "noise": family}

    configs = {}
    for family in FAMILIES:
        instances = [entry(name, mu, sigma, family) for name, (mu, sigma) in study_instances().items()]
        configs[family] = {
            "name": f"robustness_{family}", "seed": seed, "runs": runs, "horizon": horizon, "times": 60,
            "chunk_size": 4096, "checkpoint": {"every_seconds": 300.0}, "instances": instances, "policies": POLICIES,
        }  # fmt: skip
    return configs


def _slug(family: str) -> str:
    return family.replace("(", "_").replace(")", "").replace("=", "")


def run_or_load(parser: argparse.ArgumentParser, configs: dict, out: str, report_only: bool) -> dict:
    """``{family: SweepResults}``: each sweep run (or resumed), or loaded (``--report-only``:
    a usage error if one is missing, or holds a sweep of other arguments), as the paper
    study does."""
    by_directory = {_slug(family): config for family, config in configs.items()}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", jb.policies.lp_explore.TheoryWarning)  # alpha = 0.25 on purpose
        found = finished_or_run(parser, "--report-only", by_directory, out, report_only)
    return {family: found[_slug(family)] for family in configs}


def label(cell) -> str:
    return f"lp_explore(alpha={cell.params['alpha']:g})" if cell.policy_name == "lp_explore" else cell.policy


def reference(instance) -> tuple:
    """``(value, kind)``: the family's bound, or the Gaussian LP at sigma where none is known."""
    known = instance.noise.name in jb.bound.BOUND_FAMILIES
    bound = jb.lower_bound(instance, reference=None if known else "gaussian")
    return float(bound.value), bound.kind


def rows(results: dict) -> list:
    """Regret / log T at the horizon per family, instance and policy, with the reference."""
    table = []
    for family, sweep in results.items():
        refs = {name: reference(inst) for name, inst in sweep.instances.items()}
        for cell in sweep.cells:
            final = cell.regret[:, -1] / math.log(cell.horizon)
            value, kind = refs[cell.instance]
            mean, error = float(final.mean()), float(final.std(ddof=1) / math.sqrt(final.size))
            table.append({"family": family, "instance": cell.instance, "policy": label(cell), "horizon": cell.horizon,
                          "runs": cell.runs, "regret_over_log_T": mean, "standard_error": error,
                          "reference": value, "reference_kind": kind,
                          "ratio": mean / value if value > 0 else math.nan})  # fmt: skip
    return table


def figure(table: list, path: str) -> None:
    """One panel per family: regret / log T over the reference, per instance and policy."""
    from matplotlib.figure import Figure

    instances = list(dict.fromkeys(r["instance"] for r in table))
    policies = list(dict.fromkeys(r["policy"] for r in table))
    fig = Figure(figsize=(12, 7.5), layout="constrained")
    axes = fig.subplots(2, 3, sharey=True).ravel()
    for ax, family in zip(axes, FAMILIES):
        for p, policy in enumerate(policies):
            picked = {r["instance"]: r for r in table if r["family"] == family and r["policy"] == policy}
            x = [i + (p - len(policies) / 2) * 0.12 for i, name in enumerate(instances) if name in picked]
            y = [picked[name]["ratio"] for name in instances if name in picked]
            ax.plot(x, y, "o", label=policy)
        ax.axhline(1.0, color="black", linestyle="--", linewidth=1)
        kinds = {r["reference_kind"] for r in table if r["family"] == family}
        ax.set_title(f"{family}: over the {' / '.join(sorted(kinds))}", fontsize="medium")
        ax.set_yscale("log")
        ax.set_xticks(range(len(instances)), instances, rotation=30, fontsize="small")
    axes[-1].axis("off")
    axes[0].legend(fontsize="small")
    axes[0].set_ylabel("regret / log T over the reference")
    axes[3].set_ylabel("regret / log T over the reference")
    fig.savefig(path, dpi=120)


def _ratio(row: dict) -> str:
    """`` (1.23x)``, or nothing where the reference is 0 (full information)."""
    return f" ({row['ratio']:.2f}x)" if math.isfinite(row["ratio"]) else ""


def report(table: list, path: str, figure_path: str, command: str, hours: float, device: str) -> None:
    horizon, runs = table[0]["horizon"], table[0]["runs"]
    lines = [
        "# Beyond Gaussian noise: a robustness study",
        "",
        f"`{command}` ({hours:.2f} hours of simulation on {device}). T = {horizon}, {runs} runs per cell on common",
        "random numbers; means mapped to 0.05 + 0.9 mu, every finite sigma 1/2 (see the script's",
        "docstring). Regret / log T at T, mean ± standard error, and its ratio to the reference:",
        "the family's lower bound (Gaussian, Bernoulli) or the Gaussian LP at sigma, a",
        "*reference, not a bound* (uniform, Rademacher, Student's t).",
        "",
        f"![regret / log T over the reference]({os.path.relpath(figure_path, os.path.dirname(path))})",
        "",
        "| family | instance | reference | kind | " + " | ".join(dict.fromkeys(r["policy"] for r in table)) + " |",
        "|---|---|--:|---|" + "--:|" * len(dict.fromkeys(r["policy"] for r in table)),
    ]
    policies = list(dict.fromkeys(r["policy"] for r in table))
    for family in FAMILIES:
        for instance in dict.fromkeys(r["instance"] for r in table if r["family"] == family):
            picked = {r["policy"]: r for r in table if r["family"] == family and r["instance"] == instance}
            first = next(iter(picked.values()))
            cells = [f"{picked[p]['regret_over_log_T']:.3g} ± {picked[p]['standard_error']:.2g}" + _ratio(picked[p])
                     if p in picked else "" for p in policies]  # fmt: skip
            lines.append(f"| {family} | {instance} | {first['reference']:.3g} | {first['reference_kind']} | " + " | ".join(cells) + " |")
    with open(path, "w", encoding="utf-8") as handle:
        handle.write("\n".join(lines) + "\n")


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=" ".join(__doc__.split("\n\n")[0].split()))
    parser.add_argument("--horizon", type=int, default=10**5)
    parser.add_argument("--runs", type=int, default=100)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", default="robustness_study", help="the sweeps' directory")
    parser.add_argument("--figures", help="the figure's directory (default OUT/figures)")
    parser.add_argument("--report", help="the report (default OUT/robustness_study.md)")
    parser.add_argument("--report-only", action="store_true", help="redraw from finished sweeps")
    args = parser.parse_args(argv)
    check_sizes(parser, args)
    args.figures = args.figures or os.path.join(args.out, "figures")
    args.report = args.report or os.path.join(args.out, "robustness_study.md")
    output_directories(parser, args.report, args.figures)
    jb.compile_cache.enable()
    results = run_or_load(parser, sweep_configs(args.horizon, args.runs, args.seed), args.out, args.report_only)
    table = rows(results)
    figure_path = os.path.join(args.figures, "robustness_study.png")
    figure(table, figure_path)
    command = "python scripts/robustness_study.py" + "".join(
        f" --{k} {v}" for k, v in (("horizon", args.horizon), ("runs", args.runs), ("seed", args.seed))
        if v != parser.get_default(k)
    )
    hours = sum(meta.get("wall_time", 0.0) for sweep in results.values() for meta in sweep.groups.values()) / 3600
    metas = [meta for sweep in results.values() for meta in sweep.groups.values()]
    kinds = {(m["device"]["device_kind"], m["device"]["backend"]) for m in metas if "device" in m}
    device = ", ".join(sorted(kind if kind == backend else f"{kind} ({backend})" for kind, backend in kinds))
    report(table, args.report, figure_path, command, hours, device)
    print(f"report: {args.report}; figure: {figure_path}")
    return 0


if __name__ == "__main__":
    stopping.exit_after(main)
