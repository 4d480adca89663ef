"""Per-cell statistics of a sweep beside the LP lower bound: ``summary.csv``.

A cell's row: its labels, its hyper-parameters as resolved (one column each, defaults
included), the final regret's mean, standard error, median and 5% / 95% quantiles,
``regret / log T``, and the instance's lower-bound constant ``c`` with ``c log T``, the
regret the asymptotic bound asks for at the cell's horizon.  For a noise family whose
bound is not known, the constant is the Gaussian LP at the instance's ``sigma``, and
``lower_bound_kind`` says it is a reference, not a bound.  Last, the mean over runs of
each diagnostic counter (``mean_lp_full_solves``; empty where a cell's policy has no
such counter).
"""

from __future__ import annotations

import csv
import dataclasses
import io
import logging
import math
import os
from pathlib import Path
from typing import Optional

import numpy as np

from jaxbandit import instances as instances_module
from jaxbandit._numbers import ArgumentError, path as as_path
from jaxbandit.bound import BOUND_FAMILIES, bound_kind, lower_bound
from jaxbandit.bound_lp import LowerBoundStatus
from jaxbandit.files import save_text
from jaxbandit.fingerprint import instance_digest
from jaxbandit.frames import LABEL_FIELDS, check_bounds, column_names, is_sweep_results, shown
from jaxbandit.result import standard_error

__all__ = ["InstanceBound", "STATISTICS", "lower_bounds", "summary_rows", "write_summary_csv"]

logger = logging.getLogger("jaxbandit.summary")

STATISTICS = (
    "horizon", "runs", "mean", "stderr", "median", "q05", "q95",
    "regret_over_log_T", "lower_bound", "lower_bound_log_T", "lower_bound_kind",
)  # fmt: skip


@dataclasses.dataclass(frozen=True)
class InstanceBound:
    """The lower-bound constant of one instance (:func:`jaxbandit.bound.lower_bound`).

    Attributes:
        value: ``sum_i c*_i Delta_i``, or None where the LP is not solved.
        kind: ``"bound"``, or ``"gaussian reference"`` for a noise family without a
            known bound (the Gaussian LP at the instance's ``sigma``).
        instance_digest: the instance's values
            (:func:`~jaxbandit.fingerprint.instance_digest`), so that a view refuses the
            bound for cells of another instance of the same label; "" if unknown.
    """

    value: Optional[float]
    kind: str
    instance_digest: str = dataclasses.field(default="", compare=False)

    def times_log(self, horizon: int) -> Optional[float]:
        """``value * log(horizon)``, or None."""
        return None if self.value is None else self.value * math.log(horizon)


def lower_bounds(instances: dict) -> dict:
    """``{label: InstanceBound}`` of ``{label: Instance}``: one batched solve per number
    of arms and noise family (one compiled program each)."""
    batches: dict = {}
    for label, inst in instances.items():
        batches.setdefault((inst.num_arms, inst.noise), []).append(label)
    bounds, digests = {}, {label: instance_digest(inst) for label, inst in instances.items()}
    for (_, family), labels in batches.items():
        reference = None if family.name in BOUND_FAMILIES else "gaussian"
        try:
            solved = lower_bound(instances_module.stack([instances[k] for k in labels]), throw=False, reference=reference)
        except ValueError as err:  # the statistics survive a bound that cannot be solved; say why
            logger.warning("the lower bound of instances %s is not solved: %s", labels, err)
            bounds.update({label: InstanceBound(None, bound_kind(family, reference), digests[label]) for label in labels})
            continue
        for label, value, status in zip(labels, solved.value, solved.status):
            if int(status) != LowerBoundStatus.OPTIMAL or not np.isfinite(value):
                logger.warning("the lower bound of instance %r is not solved (status %s)", label, LowerBoundStatus.NAMES[int(status)])
                bounds[label] = InstanceBound(None, solved.kind, digests[label])
            else:
                bounds[label] = InstanceBound(float(value), solved.kind, digests[label])
    return bounds


def summary_rows(cells, bounds: dict) -> list:
    """One dict per cell (see the module docstring); ``bounds``: :func:`lower_bounds`
    of the cells' instances, checked as the views check them
    (:func:`~jaxbandit.frames.check_bounds`: a bound of another instance under the same
    label is refused).  Hyper-parameters that a cell's policy does not have are None in
    its row."""
    check_bounds("bounds", bounds, cells)
    counters = list(dict.fromkeys(name for cell in cells for name in cell.diagnostics))
    names = list(dict.fromkeys(name for cell in cells for name in cell.resolved_params))
    # a hyper-parameter named as a counter's column (mean_x) is prefixed, not overwritten
    params = column_names(names, LABEL_FIELDS + STATISTICS + tuple(f"mean_{name}" for name in counters), "param_")
    rows = []
    for cell in cells:
        final, bound = cell.final_regret, bounds[cell.instance]
        log_horizon = math.log(cell.horizon)
        rows.append({
            **{field: getattr(cell, field) for field in LABEL_FIELDS},
            **{column: cell.resolved_params.get(name) for name, column in params.items()},
            "horizon": cell.horizon,
            "runs": final.size,
            "mean": float(final.mean()),
            "stderr": float(standard_error(final, axis=0)),
            "median": float(np.median(final)),
            "q05": float(np.quantile(final, 0.05)),
            "q95": float(np.quantile(final, 0.95)),
            "regret_over_log_T": float(final.mean()) / log_horizon if log_horizon > 0 else None,
            "lower_bound": bound.value,
            "lower_bound_log_T": bound.times_log(cell.horizon),
            "lower_bound_kind": bound.kind,
            **{f"mean_{name}": _mean(cell.diagnostics.get(name)) for name in counters},
        })  # fmt: skip
    return rows


def _mean(counter) -> Optional[float]:
    """The mean over runs of a ``(runs,)`` counter, or None for a cell without it."""
    return None if counter is None else float(np.mean(counter, dtype=np.float64))


def _field(value) -> str:
    """A summary value as a CSV field: floats exactly (``repr``), no value as ``""``."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return ""
    return repr(value) if isinstance(value, float) else value


def write_summary_csv(results, path: Optional[os.PathLike] = None) -> Path:
    """Write ``summary.csv`` of a :class:`~jaxbandit.io.SweepResults` to the file
    ``path`` (default: in the sweep's directory) atomically; an empty field where a row
    has no value (None, or NaN: the standard error of one run, the bound of an LP not
    solved)."""
    if not is_sweep_results(results):
        raise ArgumentError(
            f"results must be a SweepResults (jaxbandit.load(directory) gives one), got {shown(results)}.",
            argument="results",
        )
    path = as_path("path", path) if path is not None else results.directory / "summary.csv"
    if path.is_dir() or not path.parent.is_dir():
        where = "is a directory" if path.is_dir() else f"is in {str(path.parent)!r}, which is not an existing directory"
        raise ArgumentError(f"path {str(path)!r} {where}; summary.csv is written to a file.", argument="path")
    rows = results.summary()
    fields = list(dict.fromkeys(key for row in rows for key in row))
    buffer = io.StringIO()
    writer = csv.DictWriter(buffer, fieldnames=fields, lineterminator="\n")
    writer.writeheader()
    for row in rows:
        writer.writerow({k: _field(v) for k, v in row.items()})
    return save_text(path, buffer.getvalue())
