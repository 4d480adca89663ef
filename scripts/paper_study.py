"""The paper's claims, measured: Theorem 5.1 (no consistent policy beats the LP bound),
Theorem 6.1 (Algorithm 1 within ``4 alpha`` of it) and Lemma 4.2 (the weighted estimator
concentrates under adaptive sampling), up to T = 10^7.

    python scripts/paper_study.py                      # T = 10^7, 100 runs (hours on a CPU)
    python scripts/paper_study.py --horizon 100000 --runs 20 --out quick_study
    python scripts/paper_study.py --horizon 1000000 --parts --report docs/paper_study.md --figures docs/figures
                                                       # what README and docs/ show

The report and its figures go to ``OUT/paper_study.md`` and ``OUT/figures`` unless
``--report`` and ``--figures`` say otherwise.

Two sweeps (resumable: run the same command again after an interruption), each with
the estimator-deviation monitor (:mod:`jaxbandit.monitors`) on every cell:

* ``k5``: the five built-in instances (K = 5) x ``ucb_n``, ``ts_n``, ``ossb`` and
  ``lp_explore`` with alpha in {0.25, 1, 4.01, 4.5, 8};
* ``graph20``: a K = 20 feedback graph x ``ucb_n``, ``ts_n``, ``ossb`` and ``lp_explore``
  with alpha in {0.25, 1, 4.5}.

Then it writes the figures (``--figures``) and a report with the tables (``--report``):
regret / log t against the LP bound, the ratio to Theorem 6.1's leading term
``4 alpha x LP x log T`` at T = 10^5, 10^6, 10^7, how often some arm's estimate leaves
Lemma 4.2's interval against the lemma's bound, and ``lp_explore``'s case mix over time.
``--report-only`` redraws them from finished sweeps.  ``--longer DIR ...`` adds finished
sweeps of a part of the study run to a longer horizon (``jaxbandit run
scripts/configs/paper_study_1e7_*.toml``): their regret / log T in a table of their own
and as markers on the Theorem 5.1 figure, their ``lp_explore`` ratios at the times the
study's own sweeps do not reach, and their case mix between their last two recorded rounds.
``--parts`` runs (or resumes) every one of those configs into ``OUT/longer/<sweep name>``
after the study's own sweeps and adds them so: the study to T = 10^6 with the monitor,
and every cell of its Theorem 5.1 and 6.1 tables to T = 10^7, in one command.
"""

from __future__ import annotations

import argparse
import glob
import json
import math
import os
import sys
import time
import warnings

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import numpy as np  # noqa: E402

import jaxbandit as jb  # noqa: E402
from jaxbandit import monitors, plotting, stopping  # noqa: E402

THEOREM_51_ALPHAS = (4.5, 1.0, 0.25)
THEOREM_61_ALPHAS = (4.01, 4.5, 8.0)
MONITOR_ALPHAS = (1.0, 2.0, 4.5)
RATIO_TIMES = (10**5, 10**6, 10**7)
FIRST_RATIO_ROUND = 10  # regret / log t is drawn from here (log t is too small before)
BASELINES = ("ucb_n", "ts_n", "ossb")
PARTS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "configs", "paper_study_1e7_*.toml")


def graph20() -> jb.Instance:
    """A K = 20 feedback graph: each arm reveals itself and, with probability 0.15, each
    other arm (directed), all with unit noise; the best arm's mean is 1 and the others'
    are uniform in [0, 0.8] (gaps of at least 0.2, so the asymptotics show by 10^7)."""
    rng = np.random.default_rng(2022)
    mu = np.append(1.0, rng.uniform(0.0, 0.8, 19))
    adjacency = rng.uniform(size=(20, 20)) < 0.15
    return jb.instances.graph(mu, adjacency, 1.0)


def ratio_times(horizon: int) -> list:
    """The Theorem 6.1 checkpoints of a sweep to ``horizon``: those of ``RATIO_TIMES`` it
    reaches, and the horizon itself (a short study's only one)."""
    return sorted({t for t in RATIO_TIMES if t <= horizon} | {int(horizon)})


def recording_times(horizon: int) -> list:
    """~80 geometric rounds plus the Theorem 6.1 checkpoints."""
    grid = set(jb.geometric_times(horizon, 80).tolist()) | set(ratio_times(horizon))
    return sorted(int(t) for t in grid)


def sweep_configs(horizon: int, runs: int, seed: int) -> dict:
    """``{name: config dict}`` of the two sweeps."""
    common = {
        "seed": seed,
        "runs": runs,
        "horizon": horizon,
        "times": recording_times(horizon),
        "chunk_size": 4096,
        "checkpoint": {"every_seconds": 300.0},
        "monitor": {"name": "estimator_deviation", "alphas": list(MONITOR_ALPHAS)},
    }
    baselines = [{"name": name} for name in BASELINES]
    k5_alphas = sorted(set(THEOREM_51_ALPHAS) | set(THEOREM_61_ALPHAS))
    graph = graph20()
    return {
        "k5": dict(
            common,
            name="paper_study_k5",
            instances=[{"type": "default", "name": name} for name in jb.instances.default_instances()],
            policies=baselines + [{"name": "lp_explore", "alpha": k5_alphas}],
        ),
        "graph20": dict(
            common,
            name="paper_study_graph20",
            instances=[{
                "type": "explicit", "name": "graph20", "mu": graph.mu.tolist(),
                "sigma": [["inf" if math.isinf(v) else v for v in row] for row in graph.sigma.tolist()],
            }],  # fmt: skip
            policies=baselines + [{"name": "lp_explore", "alpha": sorted(THEOREM_51_ALPHAS)}],
        ),
    }


def run_sweeps(configs: dict, out: str) -> dict:
    """Run (or resume) every sweep; returns ``{name: SweepResults}``."""
    results = {}
    for name, config in configs.items():
        start = time.perf_counter()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", jb.policies.lp_explore.TheoryWarning)  # alpha <= 4 on purpose
            results[name] = jb.sweep.run(config, os.path.join(out, name))
        print(f"sweep {name}: done in {time.perf_counter() - start:.0f} s this session", flush=True)
    return results


def load_finished(parser: argparse.ArgumentParser, option: str, directory: str):
    """``jb.load(directory)``, or a usage error naming ``option`` and the directory."""
    try:
        return jb.load(directory)
    except (OSError, ValueError) as error:
        parser.error(f"{option}: cannot load a finished sweep from {directory!r}: {error}")


def finished_or_run(parser: argparse.ArgumentParser, option: str, configs: dict, out: str, report_only: bool) -> dict:
    """``{name: SweepResults}`` of ``configs`` in ``out``: loaded (``--report-only``; a
    usage error naming ``option`` if one is not there, or if it holds a sweep of another
    configuration, which the report would describe with these arguments) or run (or
    resumed)."""
    if not report_only:
        try:
            return run_sweeps(configs, out)
        except jb.sweep.SweepMismatchError as error:  # --out holds sweeps of other arguments
            parser.error(f"--out: {error}")
    loaded = {}
    for name, config in configs.items():
        directory = os.path.join(out, name)
        loaded[name] = load_finished(parser, option, directory)
        # the fingerprint the directory records: its configuration may name an instance
        # file by a path relative to a configuration file that is not here
        if loaded[name].fingerprint != jb.config.load(config).fingerprint():
            held = {key: loaded[name].config.get(key) for key in ("horizon", "runs", "seed")}
            parser.error(f"{option}: {directory!r} holds a sweep of another configuration ({held}); "
                         "give the arguments it was run with")  # fmt: skip
    return loaded


def check_sizes(parser: argparse.ArgumentParser, args, min_horizon: int = 2) -> None:
    """A usage error for ``--horizon`` below ``min_horizon``, ``--runs`` below 2 or a
    ``--seed`` the package's seed rule refuses: before anything is created or run."""
    if args.horizon < min_horizon or args.runs < 2:
        parser.error(f"--horizon must be >= {min_horizon} and --runs >= 2, got {args.horizon} and {args.runs}")
    try:
        jb.rng.seed_words(args.seed)
    except ValueError as error:
        parser.error(f"--seed: {error}")


def output_directories(parser: argparse.ArgumentParser, report: str, figures: str) -> None:
    """Make the directories of the report file ``report`` and of the ``figures``, or a
    usage error naming ``--report`` or ``--figures``: before any sweep runs, not after
    hours of them."""
    if os.path.isdir(report):
        parser.error(f"--report: {report!r} is a directory; give the report's file name")
    for option, path, directory in (("--report", report, os.path.dirname(os.path.abspath(report))), ("--figures", figures, figures)):
        try:
            os.makedirs(directory, exist_ok=True)
        except OSError as error:
            parser.error(f"{option}: cannot write {path!r} ({error.strerror}: {error.filename})")
        if not os.access(directory, os.W_OK):
            parser.error(f"{option}: cannot write {path!r} (no write permission in {directory!r})")


def part_configs() -> dict:
    """``{TOML path: SweepConfig}`` of the study's parts run to T = 10^7 (:data:`PARTS`)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", jb.policies.lp_explore.TheoryWarning)  # alpha <= 4 on purpose
        return {path: jb.config.load(path) for path in sorted(glob.glob(PARTS))}


# -- what the figures and tables need --------------------------------------------------


def label(cell) -> str:
    if cell.policy_name == "lp_explore":
        return f"lp_explore(alpha={cell.params['alpha']:g})"
    return cell.policy


def cells_by(results) -> dict:
    """``{(instance, label): cell}`` of every finished cell."""
    return {(cell.instance, label(cell)): cell for cell in results.cells}


def bounds(results) -> dict:
    """``{instance: LP bound value}``."""
    return {name: float(jb.lower_bound(instance).value) for name, instance in results.instances.items()}


def simulation_hours(sweeps) -> float:
    """Hours of simulation the sweeps' finished groups took, all sessions together."""
    return sum(meta.get("wall_time", 0.0) for results in sweeps for meta in results.groups.values()) / 3600


def mean_and_error(values: np.ndarray) -> tuple:
    """Mean over runs (axis 0) and its standard error."""
    return values.mean(axis=0), values.std(axis=0, ddof=1) / np.sqrt(values.shape[0])


def theorem51_rows(all_results: dict, every_alpha: bool = False) -> list:
    """Regret / log T at the horizon against the LP bound, per instance and policy
    (``lp_explore`` at Theorem 5.1's alphas only, unless ``every_alpha``)."""
    rows = []
    for results in all_results.values():
        lp = bounds(results)
        for (instance, name), cell in sorted(cells_by(results).items()):
            if name.startswith("lp_explore") and cell.params["alpha"] not in THEOREM_51_ALPHAS and not every_alpha:
                continue
            mean, error = mean_and_error(cell.regret[:, -1] / math.log(cell.horizon))
            rows.append({"sweep": results.config.get("name"), "instance": instance, "policy": name,
                         "horizon": cell.horizon, "runs": cell.runs,
                         "regret_over_log_T": mean, "standard_error": error, "lp_bound": lp[instance],
                         "relative_to_bound": mean / lp[instance] - 1 if lp[instance] > 0 else math.nan})  # fmt: skip
    return rows


def theorem61_rows(all_results: dict, longer: tuple = ()) -> list:
    """``regret(T) / (4 alpha LP log T)`` of lp_explore, mean and standard error over runs;
    the ``longer`` sweeps add the (instance, alpha, T) the study's own sweeps lack."""
    rows, seen = [], set()
    for results in [*all_results.values(), *longer]:
        lp = bounds(results)
        for (instance, name), cell in sorted(cells_by(results).items()):
            if cell.policy_name != "lp_explore" or cell.params["alpha"] not in THEOREM_61_ALPHAS or lp[instance] <= 0:
                continue
            alpha = cell.params["alpha"]
            for t in ratio_times(int(cell.times[-1])):
                where = np.flatnonzero(cell.times == t)
                if where.size and (instance, alpha, t) not in seen:
                    seen.add((instance, alpha, t))
                    ratio = cell.regret[:, where[0]] / (4 * alpha * lp[instance] * math.log(t))
                    mean, error = mean_and_error(ratio)
                    rows.append({"instance": instance, "alpha": alpha, "t": t, "runs": cell.runs,
                                 "sweep": results.config.get("name"), "ratio": mean, "standard_error": error})  # fmt: skip
    return rows


def lemma42_rows(all_results: dict) -> list:
    """Per policy and monitor alpha: the fraction of rounds, in the interval of rounds
    ending at each recording time, in which some arm was outside its interval (pooled
    over instances and runs), the fraction of runs ever outside by then, and the
    lemma's bound for one round (times K)."""
    rows = []
    for results in all_results.values():
        pooled: dict = {}
        for cell in results.cells:
            pooled.setdefault(label(cell), []).append(cell)
        for name, cells in pooled.items():
            times = cells[0].times
            num_arms = cells[0].counts.shape[-1]
            for a in MONITOR_ALPHAS:
                counts = np.concatenate([c.monitor[f"outside_rounds_alpha{a:g}"] for c in cells])  # (runs, P)
                first = np.concatenate([c.monitor[f"first_outside_alpha{a:g}"] for c in cells])
                rounds = np.diff(np.concatenate([[0], times]))
                fraction = np.diff(np.concatenate([np.zeros((counts.shape[0], 1)), counts], axis=1), axis=1) / rounds
                rows.append({
                    "sweep": results.config.get("name"), "policy": name, "alpha": a, "num_arms": num_arms,
                    "times": times, "fraction_of_rounds": fraction.mean(axis=0),
                    "runs_ever_outside": (first > 0).mean(axis=0),
                    "bound": monitors.deviation_bound(np.maximum(times, 2), a, num_arms),
                })  # fmt: skip
    return rows


# -- figures --------------------------------------------------------------------------


def _pyplot():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def figure_theorem51(all_results: dict, path: str, longer: tuple = ()) -> None:
    """One panel per instance: each policy's regret / log t over the study's rounds
    (mean and 95% band), and as markers with 95% bars at the rounds recorded by the
    ``longer`` sweeps (their own runs) for the same instance and policy."""
    plt = _pyplot()
    panels = [(results, instance) for results in all_results.values() for instance in results.instances]
    longer_cells = {}
    for results in longer:
        for key, cell in cells_by(results).items():
            longer_cells.setdefault(key, []).append(cell)
    fig, axes = plt.subplots(2, 3, figsize=(15, 8.5))
    for ax, (results, instance) in zip(axes.ravel(), panels):
        lp = bounds(results)[instance]
        for (name_instance, name), cell in sorted(cells_by(results).items()):
            if name_instance != instance:
                continue
            if name.startswith("lp_explore") and cell.params["alpha"] not in THEOREM_51_ALPHAS:
                continue
            keep = cell.times >= FIRST_RATIO_ROUND
            ratio = cell.regret[:, keep] / np.log(cell.times[keep])
            mean, error = mean_and_error(ratio)
            (line,) = ax.plot(cell.times[keep], mean, label=name)
            half = jb.comparison.half_width_95(error, cell.runs)
            ax.fill_between(cell.times[keep], mean - half, mean + half, color=line.get_color(), alpha=0.2)
            for other in longer_cells.get((instance, name), []):
                mean, error = mean_and_error(other.regret / np.log(other.times))
                ax.errorbar(other.times, mean, yerr=jb.comparison.half_width_95(error, other.runs), fmt="o", markersize=3, color=line.get_color())
        ax.axhline(lp, color="black", linestyle="--", label="LP bound")
        ax.set_xscale("log")
        ax.set_yscale("symlog", linthresh=max(lp, 1.0))
        ax.set_title(f"{instance} (K = {results.instances[instance].num_arms}, bound {lp:.3g})")
        ax.set_xlabel("round t")
        ax.set_ylabel("regret / log t")
    axes.ravel()[0].legend(fontsize=8)
    title = "Theorem 5.1: regret / log t against the LP lower bound (mean, 95% band)"
    if longer:
        title += "; markers: longer sweeps' own runs"
    fig.suptitle(title)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def figure_theorem61(rows: list, path: str) -> None:
    plt = _pyplot()
    instances = sorted({r["instance"] for r in rows})
    fig, ax = plt.subplots(figsize=(8, 5))
    for k, instance in enumerate(instances):
        for m, alpha in enumerate(THEOREM_61_ALPHAS):
            mine = [r for r in rows if r["instance"] == instance and r["alpha"] == alpha]
            if not mine:
                continue
            ts = np.array([r["t"] for r in mine]) * (1 + 0.04 * (m - 1))
            ax.errorbar(ts, [r["ratio"] for r in mine], yerr=[jb.comparison.half_width_95(r["standard_error"], r["runs"]) for r in mine],
                        marker="os^"[m], color=f"C{k}", label=f"{instance}, alpha={alpha:g}", capsize=2)  # fmt: skip
    ax.axhline(1.0, color="black", linestyle="--")
    ax.set_xscale("log")
    # the alphas are drawn a few percent apart around each T, ticked at the T's themselves
    horizons = sorted({r["t"] for r in rows})
    ax.set_xticks(horizons, [f"{t:.0e}" if t >= 10**4 else str(t) for t in horizons])
    ax.minorticks_off()
    ax.set_xlabel("T (each alpha drawn a few percent apart around it)")
    ax.set_ylabel("regret(T) / (4 alpha LP log T)")
    ax.set_title("Theorem 6.1: lp_explore against its leading term (95% intervals)")
    if rows:
        ax.legend(fontsize=6, ncol=2)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def figure_lemma42(rows: list, path: str) -> None:
    plt = _pyplot()
    fig, axes = plt.subplots(2, len(MONITOR_ALPHAS), figsize=(15, 8))
    for j, a in enumerate(MONITOR_ALPHAS):
        for row in (r for r in rows if r["alpha"] == a and r["sweep"] == "paper_study_k5"):
            (line,) = axes[0, j].plot(row["times"], row["fraction_of_rounds"], label=row["policy"])
            axes[1, j].plot(row["times"], row["runs_ever_outside"], color=line.get_color(), label=row["policy"])
        bound_row = next(r for r in rows if r["alpha"] == a and r["sweep"] == "paper_study_k5")
        axes[0, j].plot(bound_row["times"], bound_row["bound"], "k--", label="Lemma 4.2 bound x K")
        for ax in axes[:, j]:
            ax.set_xscale("log")
            ax.set_yscale("log")
            ax.set_xlabel("round t")
        axes[0, j].set_title(f"alpha = {a:g}: fraction of rounds with some arm outside")
        axes[1, j].set_title(f"alpha = {a:g}: fraction of runs ever outside")
    axes[0, 0].legend(fontsize=7)
    fig.suptitle("Lemma 4.2 on the five K = 5 instances: |mu_hat - mu| > sqrt(2 alpha log t / zeta)")
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def figure_case_mix(all_results: dict, path: str, alpha: float = 4.5) -> None:
    plt = _pyplot()
    panels = [(results, instance) for results in all_results.values() for instance in results.instances]
    fig, axes = plt.subplots(2, 3, figsize=(15, 8))
    for ax, (results, instance) in zip(axes.ravel(), panels):
        cell = cells_by(results).get((instance, f"lp_explore(alpha={alpha:g})"))
        if cell is None or not cell.diagnostic_history:
            continue
        plotting.case_mix(ax, cell)  # the intervals between recordings, the first from round 1
        ax.set_title(f"{instance}: share of rounds, lp_explore alpha = {alpha:g}")
    axes.ravel()[0].legend(fontsize=8, loc="lower left")
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


# -- the report -----------------------------------------------------------------------


def _format(value: float, error: float) -> str:
    digits = 3 if abs(value) < 10 else 4
    return f"{value:.{digits}g} ± {error:.2g}"


def _horizon_label(t: int) -> str:
    """``T = 10^5`` for a power of ten, else ``T = 20,000``."""
    exponent = round(math.log10(t))
    return f"T = 10^{exponent}" if 10**exponent == t else f"T = {t:,}"


def _theorem51_line(r: dict, with_sweep: bool = False) -> str:
    percent = round(100 * r["relative_to_bound"]) if not math.isnan(r["relative_to_bound"]) else None
    versus = "" if percent is None else f"{percent:+d}%" if percent else "0%"
    below = " (below)" if r["lp_bound"] > 0 and r["regret_over_log_T"] + 2 * r["standard_error"] < r["lp_bound"] else ""
    first = f"| {r['sweep']} | 10^{math.log10(r['horizon']):g} | {r['runs']} " if with_sweep else ""
    return (first + f"| {r['instance']} | {r['lp_bound']:.4g} | {r['policy']} | "
            f"{_format(r['regret_over_log_T'], r['standard_error'])} | {versus}{below} |")  # fmt: skip


def _case_mix_lines(longer: dict) -> list:
    """Markdown table: share of each case in the last recorded interval of rounds of
    every lp_explore cell of the longer sweeps (mean over runs)."""
    lines = []
    for results in longer.values():
        for cell in results.cells:
            if cell.policy_name != "lp_explore" or len(cell.diagnostic_times) < 2:
                continue
            (start, end), history = cell.diagnostic_times[-2:], cell.diagnostic_history
            share = {k: (history[k][-1] - history[k][-2]) / (end - start) for k in ("case_a", "case_b", "case_c")}
            lines.append(f"| {results.config.get('name')} | {cell.instance} | {cell.params['alpha']:g} | {start} | {end} | "
                         f"{share['case_a']:.4%} | {share['case_b']:.4%} | {share['case_c']:.4%} | {history['case_c'][-1]:.0f} |")  # fmt: skip
    if not lines:
        return []
    header = [
        "In the longer sweeps, the share of rounds in each case between the last two recorded rounds "
        "(mean over runs), and the Case C rounds per run up to T:",
        "",
        "| sweep | instance | alpha | from round | to round | Case A | Case B | Case C | Case C rounds to T |",
        "|---|---|--:|--:|--:|--:|--:|--:|--:|",
    ]
    return header + lines + [""]


def report(all_results: dict, figures: str, path: str, command: str, longer: dict | None = None) -> None:
    """Figures, CSV-like tables and a Markdown report; ``longer``: ``{directory:
    SweepResults}`` of sweeps run to a longer horizon than the study's (the directories
    made by :func:`output_directories`)."""
    longer = longer or {}
    rows51, rows42 = theorem51_rows(all_results), lemma42_rows(all_results)
    rows61 = theorem61_rows(all_results, tuple(longer.values()))
    rows51_longer = theorem51_rows(longer, every_alpha=True)
    names = {k: os.path.join(figures, f"paper_study_{k}.png") for k in ("theorem51", "theorem61", "lemma42", "case_mix")}
    figure_theorem51(all_results, names["theorem51"], tuple(longer.values()))
    figure_theorem61(rows61, names["theorem61"])
    figure_lemma42(rows42, names["lemma42"])
    figure_case_mix(all_results, names["case_mix"])
    wall = simulation_hours(all_results.values())
    if longer:
        wall_text = f"{wall:.1f} h of simulation, and {simulation_hours(longer.values()):.1f} h in the longer sweeps,"
    else:
        wall_text = f"{wall:.1f} h of simulation"
    device = next(iter(next(iter(all_results.values())).groups.values()))["device"]
    rel = lambda p: os.path.relpath(p, os.path.dirname(os.path.abspath(path)))
    lines = [
        "# The paper's claims, measured",
        "",
        f"Produced by `{command}` ({wall_text} on {device['device_count']} "
        f"{device['backend']} device(s), {device['device_kind']}). Every number is a mean over runs "
        "with its standard error.",
        "",
        "## Theorem 5.1: regret / log T against the LP bound",
        "",
        f"![Theorem 5.1]({rel(names['theorem51'])})",
        "",
        "| instance | LP bound | policy | regret / log T | vs bound |",
        "|---|--:|---|--:|--:|",
    ]
    lines += [_theorem51_line(r) for r in rows51]
    lines += [
        "",
        "The bound is a liminf over consistent policies: a policy may sit below it at a "
        "finite T (marked \"below\" where the mean plus two standard errors is under it).",
        "",
    ]
    if rows51_longer:
        lines += [
            "### Longer runs",
            "",
            "Parts of the study run to a longer horizon: each sweep below was run with "
            "`jaxbandit run scripts/configs/paper_study_1e7_<part>.toml --out DIR` and given here with "
            "`--longer DIR`, or run and given by `--parts`.",
            "",
            "| sweep | T | runs | instance | LP bound | policy | regret / log T | vs bound |",
            "|---|--:|--:|---|--:|---|--:|--:|",
        ]
        lines += [_theorem51_line(r, with_sweep=True) for r in rows51_longer]
        lines.append("")
    columns61 = sorted({r["t"] for r in rows61})
    lines += [
        "## Theorem 6.1: lp_explore against its leading term 4 alpha x LP x log T",
        "",
        f"![Theorem 6.1]({rel(names['theorem61'])})",
        "",
        "| instance | alpha | " + " | ".join(_horizon_label(t) for t in columns61) + " |",
        "|---|--:|" + "--:|" * len(columns61),
    ]
    for instance in sorted({r["instance"] for r in rows61}):
        for alpha in THEOREM_61_ALPHAS:
            cells = {r["t"]: r for r in rows61 if r["instance"] == instance and r["alpha"] == alpha}
            if cells:
                values = [_format(cells[t]["ratio"], cells[t]["standard_error"]) if t in cells else "" for t in columns61]
                lines.append(f"| {instance} | {alpha:g} | " + " | ".join(values) + " |")
    if longer:
        lines += ["", "A ratio at a T beyond the study's horizon comes from a longer sweep (its own runs)."]
    lines += [
        "",
        "## Lemma 4.2: how often the weighted estimate leaves its interval",
        "",
        f"![Lemma 4.2]({rel(names['lemma42'])})",
        "",
        "Fraction of rounds (pooled over instances and runs) in which some arm was outside "
        "`mu_i ± sqrt(2 alpha log t / zeta_i)`, in the last interval of rounds before t, "
        "against the lemma's bound for one round times K:",
        "",
        "| sweep | policy | alpha | t | rounds outside | runs ever outside | bound x K |",
        "|---|---|--:|--:|--:|--:|--:|",
    ]
    for r in (r for r in rows42 if r["policy"] in ("ucb_n", "lp_explore(alpha=4.5)")):
        # each recording time once (10**3 or 10**5 may be the last one)
        shown = [int(np.flatnonzero(r["times"] >= t)[0]) for t in (10**3, 10**5, r["times"][-1]) if r["times"][-1] >= t]
        for i in dict.fromkeys(shown):
            lines.append(f"| {r['sweep']} | {r['policy']} | {r['alpha']:g} | {r['times'][i]} | "
                         f"{r['fraction_of_rounds'][i]:.2e} | {r['runs_ever_outside'][i]:.3f} | {r['bound'][i]:.2e} |")  # fmt: skip
    lines += ["", "## lp_explore's case mix over time", "", f"![case mix]({rel(names['case_mix'])})", ""]
    lines += _case_mix_lines(longer)
    with open(path, "w", encoding="utf-8") as handle:
        handle.write("\n".join(lines))
    with open(os.path.join(os.path.dirname(os.path.abspath(path)), "paper_study.json"), "w", encoding="utf-8") as handle:
        json.dump({"theorem51": rows51, "theorem51_longer": rows51_longer, "theorem61": rows61}, handle, indent=1, default=float)
    print(f"wrote {path} and the figures in {figures}")


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=" ".join(__doc__.split("\n\n")[0].split()))
    parser.add_argument("--horizon", type=int, default=10**7)
    parser.add_argument("--runs", type=int, default=100)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", default="paper_study", help="the sweeps' directory")
    parser.add_argument("--figures", help="the figures' directory (default OUT/figures)")
    parser.add_argument("--report", help="the report (default OUT/paper_study.md)")
    parser.add_argument("--report-only", action="store_true", help="redraw from finished sweeps")
    parser.add_argument("--longer", nargs="+", action="extend", default=[], metavar="DIR", help="finished sweeps to a longer horizon")
    parser.add_argument("--parts", action="store_true", help="also run the parts to T = 10^7 (scripts/configs/paper_study_1e7_*.toml) into OUT/longer and add them as --longer")
    args = parser.parse_args(argv)
    args.figures = args.figures or os.path.join(args.out, "figures")
    args.report = args.report or os.path.join(args.out, "paper_study.md")
    check_sizes(parser, args, FIRST_RATIO_ROUND)
    output_directories(parser, args.report, args.figures)
    longer = {}
    for directory in args.longer:
        longer[os.path.normpath(directory)] = load_finished(parser, "--longer", directory)
    parts = part_configs() if args.parts else {}
    for path, part in parts.items():  # their runs are the study's: same seed, same run count
        if (part.runs, part.seed) != (args.runs, args.seed):
            parser.error(
                f"--parts: {os.path.basename(path)} has {part.runs} runs and seed {part.seed}, "
                f"the study --runs {args.runs} and --seed {args.seed}; give the same"
            )
    jb.compile_cache.enable()
    configs = sweep_configs(args.horizon, args.runs, args.seed)
    results = finished_or_run(parser, "--report-only", configs, args.out, args.report_only)
    command = "python scripts/paper_study.py" + "".join(
        f" --{k} {v}" for k, v in (("horizon", args.horizon), ("runs", args.runs), ("seed", args.seed))
        if v != parser.get_default(k)
    )
    if longer:
        command += " --longer " + " ".join(longer)
    if args.parts:
        command += " --parts"
        parts_out = os.path.join(args.out, "longer")
        named = {part.name: part for part in parts.values()}
        for name, finished in finished_or_run(parser, "--parts", named, parts_out, args.report_only).items():
            longer[os.path.join(parts_out, name)] = finished
    report(results, args.figures, args.report, command, longer)
    return 0


if __name__ == "__main__":
    stopping.exit_after(main)
