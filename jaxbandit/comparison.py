"""Paired comparisons of two policies on common random numbers.

Every cell of a sweep draws its observation noise from ``(seed, instance, run,
round)`` only, so two policies' run ``r`` on one instance saw the same noise: the
per-run difference of their final regret removes most of the noise that two
independent means carry.  :func:`compare` gives, per instance and horizon, the mean
difference ``a - b``, its standard error, a 95% interval (Student's t with
``runs - 1`` degrees of freedom) and the fraction of runs in which ``a`` had less
regret than ``b``.
"""

from __future__ import annotations

import dataclasses
import logging
import math
import os
from typing import Union

import numpy as np

from jaxbandit._numbers import ArgumentError, integer
from jaxbandit.io import as_results, check_criteria
from jaxbandit.result import standard_error

logger = logging.getLogger(__name__)

__all__ = ["PairedDifference", "compare", "format_table", "half_width_95", "t_quantile_975"]

_NORMAL_975 = 1.959963984540054
_SERIES_LIMIT = 100  # degrees of freedom up to which the exact series is summed


def t_quantile_975(df: int) -> float:
    """The 0.975 quantile of Student's t with ``df >= 1`` degrees of freedom (the
    half-width of a 95% interval, in standard errors).

    Exact for ``df <= 100`` (the closed form of the t distribution for integer ``df``,
    inverted by bisection); above, the Cornish-Fisher expansion around the normal
    quantile, whose relative error there is below ``1e-10``.
    """
    df = integer("df", df, 1)
    if df > _SERIES_LIMIT:
        z = _NORMAL_975
        terms = (
            (z**3 + z) / 4,
            (5 * z**5 + 16 * z**3 + 3 * z) / 96,
            (3 * z**7 + 19 * z**5 + 17 * z**3 - 15 * z) / 384,
            (79 * z**9 + 776 * z**7 + 1482 * z**5 - 1920 * z**3 - 945 * z) / 92160,
        )
        return z + sum(term / df ** (i + 1) for i, term in enumerate(terms))
    low, high = 0.0, 20.0  # the quantile is 12.7 at df = 1
    for _ in range(100):
        middle = (low + high) / 2
        low, high = (middle, high) if _central_probability(middle, df) < 0.95 else (low, middle)
    return (low + high) / 2


def half_width_95(stderr, runs: int):
    """The half-width of the 95% interval of a mean of ``runs`` runs whose standard error
    is ``stderr`` (a number or an array): Student's t with ``runs - 1`` degrees of
    freedom; NaN for one run."""
    runs = integer("runs", runs, 1)
    if runs < 2:
        return np.full_like(np.asarray(stderr, np.float64), np.nan)[()]
    return t_quantile_975(runs - 1) * stderr


def _central_probability(t: float, df: int) -> float:
    """``P(|T| <= t)`` for Student's t with integer ``df`` (Abramowitz & Stegun 26.7.3-4)."""
    theta = math.atan(t / math.sqrt(df))
    c2, total, term = math.cos(theta) ** 2, 1.0, 1.0
    if df % 2:  # odd
        for k in range(1, (df - 1) // 2):
            term *= c2 * (2 * k) / (2 * k + 1)
            total += term
        series = math.sin(theta) * math.cos(theta) * total if df > 1 else 0.0
        return 2 / math.pi * (theta + series)
    for k in range(1, df // 2):
        term *= c2 * (2 * k - 1) / (2 * k)
        total += term
    return math.sin(theta) * total


@dataclasses.dataclass(frozen=True)
class PairedDifference:
    """``a - b`` of final regret on one instance at one horizon, run by run.

    Attributes:
        instance, horizon: where;  a, b: the two cells' labels;  runs: pairs of runs.
        mean: mean difference;  stderr: its standard error (NaN for one run).
        low, high: the 95% interval of the mean difference (NaN for one run).
        a_better: fraction of runs where ``a`` had less regret than ``b``.
        ties: fraction of runs where the two had the same regret.
        a_resolved, b_resolved: the two cells' labels as figures show them, their
            parameters as resolved (defaults included).
    """

    instance: str
    horizon: int
    a: str
    b: str
    runs: int
    mean: float
    stderr: float
    low: float
    high: float
    a_better: float
    ties: float
    a_resolved: str
    b_resolved: str


# what a selection's criteria may name to tell apart cells of one label in one place
_TELLING_APART = ("directory", "group", "seed", "noise_stream", "precision", "runs", "noise", "policy_name", "params")


def _as_criterion(value):
    """``value`` as a criterion would give it: a path as a string."""
    return os.fspath(value) if isinstance(value, os.PathLike) else value


def pick_one_per_place(cells: list, selection, name: str, unfinished: str = "") -> dict:
    """``{(instance, horizon): (cell, sweep)}`` of the ``(cell, sweep)`` pairs that
    ``selection`` picks, one per place (``unfinished``: what the message adds about
    groups not finished yet)."""
    if not isinstance(selection, (str, dict)) or not selection:
        raise ArgumentError(f"{name} must be a cell or policy label, or a dict of select() criteria, got {selection!r}.", argument=name)
    if isinstance(selection, dict):
        check_criteria(name, selection)
    picked: dict = {}
    for cell, sweep in cells:
        if cell.matches(selection):
            picked.setdefault((cell.instance, cell.horizon), []).append((cell, sweep))
    if not picked:
        labels = ", ".join(dict.fromkeys(cell.label for cell, _ in cells))
        raise ArgumentError(f"{name} = {selection!r} matches no cell; the cells are labelled {labels}{unfinished}.", argument=name)
    for (instance, horizon), found in picked.items():
        if len(found) > 1:
            labels = [cell.label for cell, _ in found]
            how = "name one of them"
            if len(set(labels)) < len(labels):  # labels alone cannot: say what else can
                values = {key: [_as_criterion(getattr(cell, key)) for cell, _ in found] for key in _TELLING_APART}
                differ = {key: v for key, v in values.items() if len({repr(x) for x in v}) > 1}
                told = "; ".join(f"{key} {seen}" for key, seen in differ.items())
                how = (
                    f"pick one by a dict of select() criteria, e.g. with one of what tells them apart: {told}" if told
                    else "nothing tells them apart (one sweep given twice?): give each sweep once"
                )
            raise ArgumentError(
                f"{name} = {selection!r} matches {len(found)} cells on instance {instance!r} at T = {horizon}: "
                f"{', '.join(labels)}; {how}.",
                argument=name,
            )
    return {place: found[0] for place, found in picked.items()}


def _unpaired(a, a_sweep, b, b_sweep) -> str:
    """Why cells ``a`` and ``b`` did not run on the same noise ("" if they did)."""
    for what, x, y in (("seed", a.seed, b.seed), ("noise stream (the instance's place in its sweep)", a.noise_stream, b.noise_stream),
                       ("run count", a.runs, b.runs), ("noise family", a.noise, b.noise),
                       ("precision", a.precision, b.precision)):  # fmt: skip
        if x != y:
            one, other = a.label, b.label
            if one == other:  # one label in two sweeps: name the sweeps
                one, other = f"{one} of {a_sweep.directory}", f"{other} of {b_sweep.directory}"
            return f"{one} ran with {what} {x}, {other} with {y}"
    x, y = a_sweep.instances[a.instance], b_sweep.instances[b.instance]
    if not (np.array_equal(x.mu, y.mu) and np.array_equal(x.sigma, y.sigma)):
        return f"instance {a.instance!r} has other means or noise levels in the two sweeps"
    return ""


def compare(results, a: Union[str, dict], b: Union[str, dict]) -> list:
    """The paired difference ``a - b`` of final regret, per instance and horizon.

    Args:
        results: a :class:`~jaxbandit.io.SweepResults` (:func:`jaxbandit.load`) or a
            sweep directory, or a list of them (``a`` and ``b`` may come from different
            sweeps).
        a, b: a cell label (``"ucb_n(alpha=0.5)"``), a policy label, or a dict of
            criteria as :meth:`~jaxbandit.io.SweepResults.select` takes them; each
            must pick at most one cell per instance and horizon (of one label in
            several sweeps, ``{"label": "ts_n", "directory": "results/"}`` picks one).

    Returns:
        A list of :class:`PairedDifference`, one per instance and horizon that both
        pick, in the order of ``a``'s cells.

    Raises:
        ValueError: a selection that matches nothing, or several cells in one place;
            no place in common; two cells that did not run on the same noise (another
            seed, run count, instance, noise family or precision).
    """
    sweeps = [as_results(item) for item in (results if isinstance(results, (list, tuple)) else [results])]
    if not sweeps:
        raise ArgumentError("results must hold at least one sweep, got an empty list.", argument="results")
    cells = [(cell, sweep) for sweep in sweeps for cell in sweep.cells]
    missing = "; ".join(f"{sweep.directory}: {', '.join(sweep.describe_missing())}" for sweep in sweeps if sweep.missing)
    if missing:  # shards still running, or an interrupted sweep: pair what is there, say what is not
        logger.warning("groups not finished yet, left out of the comparison: %s", missing)
    return paired(cells, a, b, f" (groups not finished yet: {missing})" if missing else "")


def paired(cells: list, a, b, unfinished: str = "") -> list:
    """:func:`compare` of the ``(cell, sweep)`` pairs ``cells`` (``unfinished``: what an
    error adds about groups not finished yet)."""
    first, second = (pick_one_per_place(cells, s, name, unfinished) for s, name in ((a, "a"), (b, "b")))
    places = [place for place in first if place in second]
    if not places:
        raise ArgumentError(f"a = {a!r} and b = {b!r} share no instance and horizon: nothing to pair{unfinished}.", argument="b")
    rows = []
    for place in places:
        (x, x_sweep), (y, y_sweep) = first[place], second[place]
        if x is y:
            raise ArgumentError(f"a = {a!r} and b = {b!r} pick the same cell {x.label} on {x.instance!r}: nothing to compare.", argument="b")
        reason = _unpaired(x, x_sweep, y, y_sweep)
        if reason:
            raise ArgumentError(
                f"cannot pair {x.label} and {y.label} on {x.instance!r} at T = {x.horizon}: {reason}, "
                "so they did not run on the same noise.",
                argument="b",
            )
        difference = np.asarray(x.final_regret, np.float64) - np.asarray(y.final_regret, np.float64)
        runs, mean = difference.size, float(difference.mean())
        stderr = float(standard_error(difference, axis=0))
        half = float(half_width_95(stderr, runs))
        rows.append(PairedDifference(
            instance=x.instance, horizon=x.horizon, a=x.label, b=y.label, runs=runs, mean=mean, stderr=stderr,
            low=mean - half, high=mean + half, a_better=float(np.mean(difference < 0)), ties=float(np.mean(difference == 0)),
            a_resolved=x.resolved_label, b_resolved=y.resolved_label,
        ))  # fmt: skip
    return rows


def format_table(rows: list) -> str:
    """The rows of :func:`compare` as a text table."""
    header = ("instance", "T", "a", "b", "runs", "mean a-b", "stderr", "95% interval", "a better", "ties")
    lines = [header] + [
        (r.instance, str(r.horizon), r.a, r.b, str(r.runs), f"{r.mean:.6g}", f"{r.stderr:.3g}",
         f"[{r.low:.6g}, {r.high:.6g}]", f"{r.a_better:.1%}", f"{r.ties:.1%}")
        for r in rows
    ]  # fmt: skip
    widths = [max(len(line[i]) for line in lines) for i in range(len(header))]
    return "\n".join("  ".join(v.ljust(w) for v, w in zip(line, widths)).rstrip() for line in lines)
