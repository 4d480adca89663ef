"""Figures of a sweep: regret curves, regret / log t vs the LP lower bound, final-regret
distributions, and the case mix of policies that report ``case_*`` counters.

Host-side only (matplotlib, no pyplot: figures are built with
:class:`matplotlib.figure.Figure`, so plotting never touches the user's backend).
The axes-level functions (:func:`regret_curves`, :func:`regret_over_log`,
:func:`final_distribution`, :func:`case_mix`) take :class:`~jaxbandit.io.CellResult`
lists so that paper figures can be composed freely; :func:`plot_sweep` writes the
standard set for a sweep directory.
"""

from __future__ import annotations

import logging
import re
import textwrap
from pathlib import Path
from typing import Optional, Sequence, Union

import numpy as np

from jaxbandit import comparison, frames, io, summary
from jaxbandit._numbers import ArgumentError, boolean, check_nonnegative, describe, path as as_path

__all__ = [
    "plot_sweep",
    "supported_formats",
    "regret_curves",
    "regret_over_log",
    "final_distribution",
    "case_mix",
    "paired_differences",
    "case_counters",
]

logger = logging.getLogger("jaxbandit.plotting")


def _palette(count: int) -> list:
    """``count`` distinct colors, in order."""
    from matplotlib import colormaps

    cmap = colormaps["tab10" if count <= 10 else "tab20"]
    return [cmap(i % cmap.N) for i in range(count)]


def _cells_and_colors(cells, colors) -> tuple:
    """``cells`` as a checked list (:func:`jaxbandit.frames.as_cells`), one color and one
    name (:func:`_names`) per cell.  ``colors``: by default each cell its own;
    ``{cell label: color}`` covering every label, where no two cells share one; or a
    list of one color per cell."""
    from matplotlib.colors import is_color_like

    cells = frames.as_cells("cells", cells)
    names = _names(cells, [c.resolved_label for c in cells])
    if colors is None or (isinstance(colors, dict) and not colors):
        return cells, _palette(len(cells)), names
    if isinstance(colors, dict):
        missing = sorted({c.label for c in cells} - set(colors))
        if missing:
            raise ArgumentError(f"colors must give a color for every cell label; missing {missing}.", argument="colors")
        labels = [c.label for c in cells]
        shared = [name for label, name in zip(labels, names) if labels.count(label) > 1]
        if shared:
            raise ArgumentError(
                f"colors gives one color per cell label, and cells share a label: {', '.join(shared)}; "
                "give a list of one color per cell, or leave colors out.", argument="colors",
            )  # fmt: skip
        chosen = [colors[label] for label in labels]
    elif isinstance(colors, (list, tuple, np.ndarray)) and len(colors) == len(cells):
        chosen = list(colors)  # an array: its rows, RGB(A) as a colormap gives them
    else:
        raise ArgumentError(
            f"colors must be a dict {{cell label: color}} or a list of {len(cells)} colors, one per cell, "
            f"got {describe(colors)}.", argument="colors",
        )  # fmt: skip
    wrong = next((color for color in chosen if not is_color_like(color)), None)
    if wrong is not None:
        raise ArgumentError(f"colors holds {describe(wrong)}, which is not a matplotlib color.", argument="colors")
    return cells, chosen, names


# what a figure adds to each label where the cells drawn differ in it, and how it says it
_APART = {
    "instance": str, "noise": "{} noise".format, "horizon": "T = {}".format,
    "runs": lambda n: f"{n} run{'s' if n != 1 else ''}", "seed": "seed {}".format, "precision": str,
    "directory": None,  # None: by _directory_names
}  # fmt: skip


def _names(items, labels: list) -> list:
    """``labels``, one per cell (or paired difference) of ``items``, each followed by
    what differs between the items, where something does (``ts_n (bandit)``,
    ``ts_n (graph_star)``); the labels alone where nothing does."""
    parts: list = [[] for _ in items]
    for key, say in _APART.items():
        values = [getattr(item, key, None) for item in items]
        if len(set(values)) < 2:
            continue
        shown = _directory_names(values) if say is None else [say(v) for v in values]
        for part, text in zip(parts, shown):
            part.append(text)
    return [f"{label} ({', '.join(part)})" if part else label for label, part in zip(labels, parts)]


def _shown(text: str) -> str:
    """A user's name as a figure shows it: a ``$`` is text, not the start of mathtext
    (which would fail on ``$\\badcmd$`` and italicise ``$5 vs $6``), and a leading
    ``_`` is kept in a legend (which hides such labels) by a zero-width space."""
    text = text.replace("$", r"\$")
    return "\u200b" + text if text.startswith("_") else text


def _wrapped(text: str, width: int = 30) -> str:
    """``text`` in lines of about ``width`` characters, broken at its spaces: a long
    label (a policy's resolved parameters) would squeeze the axes of a figure."""
    return "\n".join(textwrap.wrap(text, width, break_long_words=False, break_on_hyphens=False)) or text


def _directory_names(directories: list) -> list:
    """Sweep directories as a legend names them: by their last part, or whole where
    two of them share it."""
    short = {d: Path(d).name for d in directories if d is not None}
    clash = len(set(short.values())) < len(short)
    return [str(d) if d is None or clash else short[d] for d in directories]


def _mean_and_band(ax, cell, times, mean, err, color, name: str) -> None:
    """``mean`` against ``times`` with its 95% band, ``mean +- t err`` (Student's t with
    ``runs - 1`` degrees of freedom, as :func:`jaxbandit.compare`'s intervals), labelled
    ``name``; no band for one run."""
    ax.plot(times, mean, color=color, label=_shown(name))
    if cell.runs > 1:
        half = comparison.half_width_95(err, cell.runs)
        ax.fill_between(times, mean - half, mean + half, color=color, alpha=0.2, linewidth=0)


def regret_curves(ax, cells, *, logx: bool = True, colors: Union[dict, Sequence, None] = None) -> None:
    """Mean regret vs t with a 95% confidence band (Student's t), one line per cell,
    labelled with what tells the cells apart.  ``colors``: ``{cell label: color}`` or
    one color per cell (default: each cell its own)."""
    cells, colors, names = _cells_and_colors(cells, colors)
    for cell, color, name in zip(cells, colors, names):
        _mean_and_band(ax, cell, cell.times, cell.mean_regret(), cell.standard_error(), color, name)
    if logx:
        ax.set_xscale("log")
    ax.set_xlabel("round t")
    ax.set_ylabel("pseudo-regret")


def regret_over_log(
    ax, cells, *, bound: Optional[float] = None, colors: Union[dict, Sequence, None] = None,
    bound_label: str = "LP lower bound",
) -> None:
    """Mean ``regret(t) / log t`` (t >= 2) with 95% bands; ``bound``: the LP constant,
    drawn as ``bound_label``.

    The asymptotic lower bound on ``regret(T) / log T`` is ``sum_i c_i Delta_i``, the
    value of the paper's LP at the true means (for Gaussian or Bernoulli noise; for
    another family the Gaussian LP at its sigma is a reference, labelled so).
    """
    cells, colors, names = _cells_and_colors(cells, colors)
    bound = None if bound is None else check_nonnegative("bound", bound)
    for cell, color, name in zip(cells, colors, names):
        keep = cell.times >= 2
        log_t = np.log(cell.times[keep])
        mean, err = cell.mean_regret()[keep] / log_t, cell.standard_error()[keep] / log_t
        _mean_and_band(ax, cell, cell.times[keep], mean, err, color, name)
    if bound is not None:
        ax.axhline(bound, color="black", linestyle="--", linewidth=1.2, label=f"{bound_label} ({bound:.3g})")
    if any(np.any(cell.times >= 2) for cell in cells):
        ax.set_xscale("log")
    else:  # a horizon of 1: nothing to draw, and a log axis of nothing cannot be drawn
        ax.text(0.5, 0.5, "no recorded round t >= 2", transform=ax.transAxes, ha="center", va="center")
    ax.set_xlabel("round t")
    ax.set_ylabel("regret / log t")


def final_distribution(ax, cells, *, kind: str = "box", colors: Union[dict, Sequence, None] = None) -> None:
    """Distribution of the regret at the horizon, one box (or violin) per cell, each
    tick saying what tells the cells apart (each cell's T, where they have several)."""
    if kind not in ("box", "violin"):
        raise ValueError(f"kind must be 'box' or 'violin', got {kind!r}.")
    cells, colors, names = _cells_and_colors(cells, colors)
    data = [c.final_regret for c in cells]
    positions = np.arange(1, len(cells) + 1)
    if kind == "violin" and all(d.size > 1 and np.ptp(d) > 0 for d in data):
        parts = ax.violinplot(data, positions=positions, showmedians=True)
        for body, color in zip(parts["bodies"], colors):
            body.set_facecolor(color)
        key = "body: distribution, lines: median and extremes"
    else:
        parts = ax.boxplot(data, positions=positions, patch_artist=True, showmeans=True)
        for box, color in zip(parts["boxes"], colors):
            box.set_facecolor(color)
            box.set_alpha(0.6)
        key = "box: quartiles, line: median, triangle: mean"
    ax.set_xticks(positions)
    ax.set_xticklabels([_wrapped(_shown(name)) for name in names], rotation=30, ha="right")
    at = f"T = {cells[0].horizon}" if len({c.horizon for c in cells}) == 1 else "each cell's horizon T"
    ax.set_ylabel(f"regret at {at}\n({key})")


def case_counters(cell) -> list:
    """Names of the ``case_*`` counters a cell recorded (e.g. lp_explore's case_a/b/c)."""
    return sorted(k for k in cell.diagnostic_history if k.startswith("case_"))


def case_mix(ax, cell) -> None:
    """Share of the rounds in each case between consecutive recordings (stacked, log t).

    The counters are cumulative per-run counts averaged over runs, recorded at chunk
    boundaries; their increments give the case mix of each interval, drawn over it
    (the first from round 1).
    """
    cell = frames.as_cell("cell", cell)
    names = case_counters(cell)
    if not names:
        raise ValueError(f"cell {cell.label!r} recorded no case_* counters (its policy reports none) to plot.")
    times = np.asarray(cell.diagnostic_times)
    cumulative = np.stack([np.asarray(cell.diagnostic_history[k]) for k in names])  # (cases, D)
    increments = np.diff(cumulative, axis=1, prepend=0.0)
    total = increments.sum(axis=0)
    shares = np.divide(increments, total, out=np.zeros_like(increments), where=total > 0)
    # A step's height holds back to the previous point: round 1 starts the first interval
    # (and gives a horizon recorded once a band at all).
    edges, heights = np.concatenate([[1], times]), np.concatenate([shares[:, :1], shares], axis=1)
    ax.stackplot(edges, heights, labels=[_shown(name) for name in names], step="pre", alpha=0.85)
    ax.set_xscale("log")
    ax.set_ylim(0, 1)
    ax.set_xlabel("round t")
    ax.set_ylabel("share of rounds")
    ax.set_title(_wrapped(_shown(cell.resolved_label), 40), fontsize="medium")


def paired_differences(ax, rows: list) -> None:
    """The mean paired difference of final regret with its 95% interval, one line per
    :class:`~jaxbandit.comparison.PairedDifference` (each against the same reference),
    labelled with the share of runs better and, where there are ties, tied."""
    if not rows:
        raise ValueError("rows must hold at least one paired difference (jaxbandit.compare), got none.")
    positions = np.arange(len(rows))
    means = np.array([r.mean for r in rows])
    half = np.array([[r.mean - r.low, r.high - r.mean] for r in rows]).T
    ax.errorbar(means, positions, xerr=None if np.isnan(half).all() else half, fmt="o", color="black", capsize=4)
    ax.axvline(0.0, color="grey", linestyle="--", linewidth=1)
    ax.set_yticks(positions)
    tied = lambda r: f", {r.ties:.0%} tied" if r.ties else ""
    names = _names(rows, [r.a_resolved for r in rows])  # rows of several instances or horizons say which
    shares = [f"({r.a_better:.0%} of runs better{tied(r)})" for r in rows]
    ax.set_yticklabels([f"{_wrapped(_shown(name))}\n{share}" for name, share in zip(names, shares)])
    ax.invert_yaxis()
    reference = _wrapped(f"final regret minus {_shown(rows[0].b_resolved)}'s, run by run", 60)
    ax.set_xlabel(f"{reference}\n(mean, 95% interval)")


def supported_formats() -> list:
    """File formats the figures can be written in (matplotlib's, e.g. png, pdf, svg)."""
    from matplotlib.backend_bases import FigureCanvasBase

    return sorted(FigureCanvasBase.get_supported_filetypes())


def _slug(text: str) -> str:
    # cut so that a file name (stem, slug, horizon tag, format) stays within 255 bytes
    return (re.sub(r"[^A-Za-z0-9_.-]+", "_", text).strip("_") or "x")[:_SLUG_LENGTH]


_SLUG_LENGTH = 120


_FIGURES = ("regret", "regret_log", "final", "case_mix", "paired")  # file-name stems, per instance and horizon


def _unique_slugs(labels: Sequence[str], tags: Sequence[str] = ("",)) -> dict:
    """``{label: file-name part}`` such that no two figures share a file: not where
    :func:`_slug` maps two labels to one (``"a b"``, ``"a_b"``) or a case-insensitive
    filesystem would, nor where a stem and a label run together alike
    (``regret_`` + ``log_x`` is ``regret_log_`` + ``x``), nor with the horizon ``tags``
    appended.  A later label gets its index appended."""
    slugs, taken = {}, set()
    for index, label in enumerate(labels):
        slug = candidate = _slug(label)
        repeat = 1
        while True:
            names = {f"{stem}_{candidate}{tag}".lower() for stem in _FIGURES for tag in tags}
            if not names & taken:
                break
            candidate = f"{slug}_{index}" + (f"_{repeat}" if repeat > 1 else "")
            repeat += 1
        slugs[label] = candidate
        taken |= names
    return slugs


def _save(fig, stem: Path, formats) -> list:
    paths = []
    for fmt in formats:
        # not with_suffix: a stem with a dot ("regret_sigma0.5") would lose its end
        path = stem.parent / f"{stem.name}.{fmt}"
        fig.savefig(path, dpi=150)
        paths.append(path)
    return paths


def plot_sweep(
    results: Union[io.SweepResults, str, Path],
    out_dir: Union[str, Path, None] = None,
    *,
    logx: bool = False,
    logy: bool = False,
    distribution: str = "box",
    formats: Sequence[str] = ("png", "pdf"),
    bound: bool = True,
    policies: Optional[Sequence[str]] = None,
    reference: Optional[str] = None,
) -> list:
    """Write the standard figures of a sweep, per instance (and horizon).

    Figures: ``regret_<instance>`` (regret vs t, mean and 95% band),
    ``regret_log_<instance>`` (regret / log t with the LP lower bound when available),
    ``final_<instance>`` (final-regret box or violin plot per policy),
    ``paired_<instance>`` (each policy's paired difference of final regret against the
    ``reference``, :func:`jaxbandit.compare`) and, when a policy reports ``case_*``
    counters, ``case_mix_<instance>``; ``<instance>`` is the label with characters
    other than letters, digits, ``_.-`` replaced, and the instance's index appended
    where two labels would share a file, and ``_T<horizon>`` where the sweep has several
    horizons.  Figures of these names in ``formats`` that this call does not draw (an
    instance without cells drawn, no paired differences, no case counters) are removed,
    so that ``out_dir`` holds this call's figures only.  Also writes ``summary.csv``
    next to the results.  Groups not finished yet (shards still running) are left out
    with a warning that lists them.

    Args:
        results: a :class:`~jaxbandit.io.SweepResults` or a sweep directory.
        out_dir: where to write (default ``DIR/plots``).
        logx: log scale for the time axis of the regret curves (regret / log t
            always uses one).
        logy: log scale for the regret axis of the regret and regret / log t figures.
        distribution: ``"box"`` or ``"violin"``.
        formats: file formats (PNG and PDF by default).
        bound: draw the LP lower bound line where it is solved.
        policies: the cell labels or policy labels to draw (default: all).
        reference: the cell or policy label the paired differences are taken against
            (default: the first policy drawn).

    Returns:
        The paths written.
    """
    if distribution not in ("box", "violin"):
        raise ValueError(f"distribution must be 'box' or 'violin', got {distribution!r}.")
    if isinstance(formats, str) or not formats or any(f not in supported_formats() for f in formats):
        raise ValueError(f"formats must be a non-empty list of {', '.join(supported_formats())}, got {formats!r}.")
    if len(set(formats)) != len(formats):  # each figure would be written, and listed, twice
        raise ValueError(f"formats must name each format once, got {list(formats)!r}.")
    for name, flag in (("logx", logx), ("logy", logy), ("bound", bound)):
        boolean(name, flag)  # "no" would read as True
    results = io.as_results(results)
    missing = "; ".join(results.describe_missing())
    if not results.cells:
        raise ValueError(f"{results.directory} has no finished cells to plot yet (missing groups: {missing}).")
    if results.missing:
        # shards still running, or an interrupted sweep: plot what is there, say what is not
        logger.warning(
            "%s: %d of %d groups not finished yet, left out of the figures and summary.csv: %s",
            results.directory, len(results.missing), len(results.plan), missing,
        )  # fmt: skip
    drawn = _drawn(results, policies, reference)
    reference = reference if reference is not None else drawn[0].label
    out = as_path("out_dir", out_dir) if out_dir is not None else results.directory / "plots"
    if out.exists() and not out.is_dir():
        raise ValueError(f"out_dir {str(out)!r} exists and is not a directory; figures are written to a directory.")
    out.mkdir(parents=True, exist_ok=True)
    colors = dict(zip(results.policy_labels, _palette(len(results.policy_labels))))
    written = [summary.write_summary_csv(results)]
    bounds = results.lower_bounds()
    # file names from the sweep's plan, not from the cells finished so far: a figure
    # keeps its name as groups finish
    horizons = sorted({int(group["horizon"]) for group in results.plan.values()}) or results.horizons
    instance_labels = list(results.instances) or results.instance_labels
    tags = {horizon: f"_T{horizon}" if len(horizons) > 1 else "" for horizon in horizons}
    slugs = _unique_slugs(instance_labels, list(tags.values()))
    for horizon in horizons:
        for instance in instance_labels:
            cells = [c for c in drawn if c.instance == instance and c.horizon == horizon]
            if not cells:
                continue
            suffix = slugs[instance] + tags[horizon]
            found = bounds[instance]
            value = found.value if bound else None
            label = "LP lower bound" if found.kind == "bound" else "Gaussian reference (not a bound)"
            paired = _paired_rows(results, cells, reference)
            figures = _instance_figures(cells, value, label, out, suffix, logx, logy, distribution, formats, colors)
            written += figures + _paired_figure(paired, cells, out, suffix, formats)
    # a figure of an earlier call that this one did not draw would pass for a current one
    names = {f"{stem}_{slug}{tag}.{fmt}" for stem in _FIGURES for slug in slugs.values() for tag in tags.values() for fmt in formats}
    for stale in [out / name for name in names if out / name not in written and (out / name).is_file()]:
        stale.unlink()
    return written


def _drawn(results, policies, reference) -> list:
    """The cells ``policies`` names (cell or policy labels; all by default), checked,
    and ``reference`` checked to name one of them."""
    known = list(dict.fromkeys(name for c in results.cells for name in (c.label, c.resolved_label, c.policy)))
    if policies is not None:
        if isinstance(policies, str) or not policies:
            raise ArgumentError(f"policies must be a non-empty list of cell or policy labels, got {policies!r}.", argument="policies")
        unknown = [p for p in policies if p not in known]
        if unknown:
            # quoted: a label may hold a comma
            raise ArgumentError(
                f"policies names {unknown}, which no cell has; the labels are {', '.join(map(repr, known))}.", argument="policies"
            )
    drawn = [c for c in results.cells if policies is None or any(c.matches(p) for p in policies)]
    if reference is not None and not any(c.matches(reference) for c in drawn):
        shown = ", ".join(dict.fromkeys(c.resolved_label for c in drawn))
        hint = " (add it to the policies drawn)" if any(c.matches(reference) for c in results.cells) else ""
        raise ValueError(f"reference {reference!r} is not among the cells drawn{hint}; those are {shown}.")
    if reference is not None:  # and it picks one cell per instance and horizon
        comparison.pick_one_per_place([(c, results) for c in drawn], reference, "reference")
    return drawn


def _paired_rows(results, cells, reference: str) -> list:
    """Each cell's paired difference against ``reference`` (which must pick one cell
    here); none where the reference is not among ``cells``."""
    if not any(c.matches(reference) for c in cells):
        return []
    rows, drawn = [], [(cell, results) for cell in cells]  # the reference as _drawn checked it
    for cell in cells:
        if cell.matches(reference):
            continue
        criteria = {"label": cell.label, "instance": cell.instance, "horizon": cell.horizon}
        rows += comparison.paired(drawn, criteria, reference)
    return rows


def _paired_figure(rows, cells, out, suffix, formats) -> list:
    from matplotlib.figure import Figure

    if not rows:
        return []
    fig = Figure(figsize=(7.2, 1.4 + 0.6 * len(rows)), layout="constrained")
    ax = fig.subplots()
    paired_differences(ax, rows)
    ax.set_title(f"{_title(cells)} on common noise", fontsize="medium")
    return _save(fig, out / f"paired_{suffix}", formats)


def _title(cells, break_: str = " ") -> str:
    """What the figures of one instance and horizon say of it: instance, noise family
    (unless Gaussian), horizon and runs (``break_`` between the first two and the rest)."""
    cell = cells[0]
    noise = "" if cell.noise == "gaussian" else f", {cell.noise} noise"
    return _shown(f"{cell.instance}{noise},{break_}T = {cell.horizon}, {cell.runs} run{'s' if cell.runs != 1 else ''}")


def _instance_figures(cells, bound_value, label, out, suffix, logx, logy, distribution, formats, colors) -> list:
    """The figures of one instance and horizon (see :func:`plot_sweep`); the paths written."""
    from matplotlib.figure import Figure

    title = _title(cells)
    written = []
    curves = {
        "regret": lambda ax: regret_curves(ax, cells, logx=logx, colors=colors),
        "regret_log": lambda ax: regret_over_log(ax, cells, bound=bound_value, colors=colors, bound_label=label),
    }
    for stem, draw in curves.items():
        fig = Figure(figsize=(6.4, 4.4), layout="constrained")
        ax = fig.subplots()
        draw(ax)
        if logy:
            ax.set_yscale("symlog", linthresh=1.0)  # regret starts at 0
            ax.set_ylim(bottom=0)  # and is never negative: no decades below 0
        ax.set_title(title, fontsize="medium")
        ax.legend(fontsize="small")
        written += _save(fig, out / f"{stem}_{suffix}", formats)

    fig = Figure(figsize=(max(4.0, 0.9 * len(cells) + 2), 4.4), layout="constrained")
    ax = fig.subplots()
    final_distribution(ax, cells, kind=distribution, colors=colors)
    ax.set_title(_title(cells, "\n"), fontsize="medium")  # two lines: a figure of few cells is narrow
    written += _save(fig, out / f"final_{suffix}", formats)

    with_cases = [c for c in cells if case_counters(c) and len(c.diagnostic_times)]
    if with_cases:
        columns = min(3, len(with_cases))
        rows = -(-len(with_cases) // columns)
        fig = Figure(figsize=(4.2 * columns, 3.4 * rows), layout="constrained")
        axes = np.atleast_1d(fig.subplots(rows, columns, squeeze=False)).ravel()
        for ax, cell in zip(axes, with_cases):
            case_mix(ax, cell)
        for ax in axes[len(with_cases):]:
            ax.set_visible(False)
        axes[0].legend(fontsize="small", loc="lower left")
        fig.suptitle(f"case mix: {title}", fontsize="medium")
        written += _save(fig, out / f"case_mix_{suffix}", formats)
    return written
