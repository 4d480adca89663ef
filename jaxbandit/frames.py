"""Results as pandas DataFrames and xarray Datasets, labelled as the package knows them.

Views of :class:`~jaxbandit.io.CellResult` lists (what :func:`jaxbandit.load` gives)
and of :class:`~jaxbandit.result.Result`.  Long frames: one row per cell and run
(:func:`cells_frame`), or per cell, run and recording time (``curves=True``); datasets
with dimensions ``(cell, run, time)``.  Values keep the dtype they are stored in: a
counter that only some cells report is a pandas nullable integer in a frame (``<NA>``
elsewhere), and a float64 variable with NaN elsewhere in a dataset, whose ``attrs``
say the stored dtype.  NaN stands only where no value exists.

pandas and xarray are optional (``pip install "jaxbandit[analysis]"``); they are
imported when a view is made.
"""

from __future__ import annotations

import importlib
import math
from types import SimpleNamespace

import numpy as np

from jaxbandit._numbers import ArgumentError, boolean, describe
from jaxbandit.base import option_params

__all__ = [
    "LABEL_FIELDS", "as_cell", "as_cells", "cells_dataset", "cells_frame", "check_bounds", "column_names",
    "is_sweep_results", "require", "result_dataset", "result_frame", "shown",
]  # fmt: skip

LABEL_FIELDS = ("instance", "noise", "policy", "label", "policy_name")  # what tells a cell apart
# what tells apart cells of one label in several sweeps (a frame of two sweeps' cells)
SOURCE_FIELDS = ("seed", "noise_stream", "precision", "directory")
# the views' own names (a frame's columns, a dataset's dimensions and variables): a
# hyper-parameter, counter or report of one of these names is prefixed
RESERVED = (*LABEL_FIELDS, "horizon", *SOURCE_FIELDS, "cell", "run", "time", "arm", "regret", "final_regret", "counts",
            "regret_over_log_T", "lower_bound", "lower_bound_log_T", "lower_bound_log_t", "lower_bound_kind")  # fmt: skip


def require(module: str):
    """``import module``, or an ImportError saying how to install it."""
    try:
        return importlib.import_module(module)
    except ImportError as err:
        raise ImportError(
            f"this view of results needs {module}, which is not installed: pip install \"jaxbandit[analysis]\" "
            f"(or pip install {module})."
        ) from err


# -- what the views take -------------------------------------------------------------


def _is_cell(value) -> bool:
    """Whether ``value`` is shaped as a cell (a :class:`~jaxbandit.io.CellResult`, which
    this module, on the core side, knows by its attributes)."""
    return all(hasattr(value, name) for name in ("instance", "label", "times", "regret"))


def is_sweep_results(value) -> bool:
    """Whether ``value`` is shaped as a :class:`~jaxbandit.io.SweepResults` (known by its
    attributes, as a cell is: io imports this module)."""
    return all(hasattr(value, name) for name in ("cells", "directory", "summary"))


def shown(value) -> str:
    """``value`` as an error shows it (:func:`~jaxbandit._numbers.describe`), or its type
    where that would be long (a result and its arrays)."""
    text = describe(value)
    return text if len(text) <= 80 else f"a {type(value).__name__}"


def as_cells(name: str, value) -> list:
    """``value``, a non-empty sequence of :class:`~jaxbandit.io.CellResult`
    (``results.cells``, ``results.select(...)``), as a list; an :class:`ArgumentError`
    naming ``name`` for anything else, saying what to give instead of a sweep or of one
    cell."""
    if is_sweep_results(value):
        got = f"the SweepResults of {value.directory}: give results.cells, or results.select(...) for some of them"
    elif _is_cell(value):
        got = f"one cell ({value.label} on {value.instance!r}): give a list of it, [cell]"
    elif isinstance(value, (str, bytes, dict)) or not hasattr(value, "__iter__"):
        got = f"{shown(value)} (a sweep's cells are results.cells)"
    else:
        cells = list(value)
        if not cells:
            raise ArgumentError(f"{name} must hold at least one cell (a jaxbandit.io.CellResult), got none.", argument=name)
        other = next((i for i, cell in enumerate(cells) if not _is_cell(cell)), None)
        if other is None:
            return cells
        got = f"{name}[{other}] = {shown(cells[other])} (a sweep's cells are results.cells)"
    raise ArgumentError(f"{name} must be a list of jaxbandit.io.CellResult, got {got}.", argument=name)


def as_cell(name: str, value):
    """``value``, one :class:`~jaxbandit.io.CellResult`, or an :class:`ArgumentError`
    naming ``name``."""
    if _is_cell(value):
        return value
    if isinstance(value, (list, tuple)):  # of cells, say: a repr would print their arrays
        got = f"a {type(value).__name__} of {len(value)}: give one of its entries"
    else:
        got = shown(value)
    raise ArgumentError(f"{name} must be one jaxbandit.io.CellResult, got {got}.", argument=name)


def check_bounds(name: str, bounds, cells) -> None:
    """An :class:`ArgumentError` naming ``name`` unless ``bounds`` is a dict ``{instance
    label: InstanceBound}`` (:func:`jaxbandit.summary.lower_bounds`) with the bound of
    each of ``cells``' instances: of its label and, where both know them, its values
    (two sweeps may give one label to other means)."""
    instances = [cell.instance for cell in cells]
    if not isinstance(bounds, dict):
        raise ArgumentError(
            f"{name} must be a dict {{instance label: InstanceBound}} (results.lower_bounds()), got {shown(bounds)}.",
            argument=name,
        )
    needed = list(dict.fromkeys(instances))
    missing = [label for label in needed if label not in bounds]
    if missing:
        raise ArgumentError(
            f"{name} has no bound of instance {', '.join(map(repr, missing))}; it has {', '.join(map(repr, bounds)) or 'none'} "
            "(results.lower_bounds() has each instance's).",
            argument=name,
        )
    for label in needed:  # an InstanceBound, known by its attributes as a cell is
        if not all(hasattr(bounds[label], a) for a in ("value", "kind", "times_log")):
            raise ArgumentError(
                f"{name}[{label!r}] must be an InstanceBound (results.lower_bounds()), got {shown(bounds[label])}.",
                argument=name,
            )
    for cell in cells:
        known = getattr(bounds[cell.instance], "instance_digest", ""), getattr(cell, "instance_digest", "")
        if all(known) and known[0] != known[1]:
            raise ArgumentError(
                f"{name}[{cell.instance!r}] is the bound of another instance than the one {cell.label} ran on in "
                f"{cell.directory} (other means or noise levels under the same label): give each sweep's cells "
                "with its own results.lower_bounds().",
                argument=name,
            )


def _checked(cells, bounds) -> list:
    """``cells`` as a list and ``bounds``, checked as the views take them."""
    cells = as_cells("cells", cells)
    if bounds is not None:
        check_bounds("bounds", bounds, cells)
    return cells


# -- columns ------------------------------------------------------------------------


def column_names(names, taken, prefix: str) -> dict:
    """``{name: column}`` for ``names`` beside the columns ``taken``: each its own name,
    or ``prefix + name`` where that is taken (a hyper-parameter called ``mean``)."""
    columns, taken = {}, set(taken)
    for name in names:
        column = name if name not in taken else f"{prefix}{name}"
        columns[name] = column
        taken.add(column)
    return columns


def _common_dtype(present: list) -> np.dtype:
    """The dtype of one column holding the arrays ``present``: numpy's promotion, except
    that integers stay exact (numpy promotes int64 beside uint64 to float64, which
    would merge two seeds above 2**53): uint64 where none is negative, else object."""
    if not present:
        return np.dtype(np.float64)
    dtype = np.result_type(*present)
    if dtype.kind == "f" and all(p.dtype.kind in "iu" for p in present):
        return np.dtype(np.uint64) if all(np.all(p >= 0) for p in present) else np.dtype(object)
    return dtype


def _combined(parts: list, sizes: list):
    """One column from per-cell ``parts`` (arrays of ``sizes`` rows, None where a cell
    has no such value), in the parts' dtype (:func:`_common_dtype`; float NaN
    throughout where no cell has a value)."""
    pd = require("pandas")
    present = [np.asarray(p) for p in parts if p is not None]
    dtype = _common_dtype(present)
    if len(present) == len(parts):
        return np.concatenate([np.broadcast_to(np.asarray(p, dtype), (n,)) for p, n in zip(parts, sizes)])
    values = np.concatenate([np.broadcast_to(np.asarray(p if p is not None else 0, dtype), (n,)) for p, n in zip(parts, sizes)])
    missing = np.concatenate([np.full(n, p is None) for p, n in zip(parts, sizes)])
    if dtype.kind == "f":
        return np.where(missing, np.nan, values)
    if dtype.kind in "iu":
        return pd.arrays.IntegerArray(values, missing)
    if dtype.kind == "b":
        return pd.arrays.BooleanArray(values, missing)
    return np.where(missing, None, values.astype(object))


def _labels(cells) -> dict:
    """``{column: per-cell values}`` of the cells' labels and resolved hyper-parameters
    (None where a cell's policy has no such parameter)."""
    names = list(dict.fromkeys(name for cell in cells for name in cell.resolved_params))
    params = column_names(names, RESERVED, "param_")
    labels = {field: [getattr(cell, field) for cell in cells] for field in LABEL_FIELDS}
    labels["horizon"] = [cell.horizon for cell in cells]
    labels["seed"] = [cell.seed for cell in cells]
    labels["noise_stream"] = [cell.noise_stream for cell in cells]
    labels["precision"] = [cell.precision for cell in cells]
    labels["directory"] = [None if cell.directory is None else str(cell.directory) for cell in cells]
    labels.update({column: [cell.resolved_params.get(name) for cell in cells] for name, column in params.items()})
    return labels


def _categorical(values: list):
    pd = require("pandas")
    return pd.Categorical(values, categories=list(dict.fromkeys(values)))


def _label_column(values: list, sizes: list, text: bool):
    """A label repeated over each cell's rows: categorical text, or a typed column."""
    repeated = [v for v, n in zip(values, sizes) for _ in range(n)]
    if text and all(isinstance(v, str) for v in values):
        return _categorical(repeated)
    parts = [None if v is None else np.asarray(v) for v in values]
    if all(p is None for p in parts):  # a directory no cell has
        return np.full(sum(sizes), None, dtype=object)
    if any(p is not None and p.dtype.kind not in "iufb" for p in parts):  # text parameters
        return np.asarray(repeated, dtype=object)
    return _combined(parts, sizes)


def cells_frame(cells, curves: bool = False, bounds=None):
    """A long :class:`pandas.DataFrame` of ``cells``.

    Columns: ``instance, noise, policy, label, policy_name, horizon, seed,
    noise_stream, precision, directory`` (the sweep a cell came from and the instance's
    place in it, which with the seed picks its noise), one per resolved
    hyper-parameter (prefixed ``param_`` where its name is taken), ``run``, then
    ``final_regret``, ``regret_over_log_T``, the bound's ``lower_bound``,
    ``lower_bound_log_T`` and ``lower_bound_kind`` (with ``bounds``:
    ``{instance: InstanceBound}``), each diagnostic counter and each monitor report at
    the horizon (prefixed ``diagnostic_`` or ``monitor_`` where a column already has its
    name); with ``curves``, ``time``
    and ``regret``, the bound's columns with ``lower_bound_log_t`` (``lower_bound *
    log(time)``), and the monitor's reports instead of the per-run values.
    """
    curves = boolean("curves", curves)  # "no" would read as True
    return _frame(_checked(cells, bounds), curves, bounds)


def _run_numbers(cell) -> np.ndarray:
    """``(runs,)`` int64: the indices of a cell's runs in its seed's stream."""
    return cell.first_run + np.arange(cell.runs, dtype=np.int64)


def _frame(cells: list, curves: bool, bounds):
    """:func:`cells_frame` of checked ``cells``."""
    pd = require("pandas")
    labels = _labels(cells)
    points = [len(cell.times) if curves else 1 for cell in cells]
    sizes = [cell.runs * p for cell, p in zip(cells, points)]
    text = (*LABEL_FIELDS, "precision", "directory")
    columns = {name: _label_column(values, sizes, name in text) for name, values in labels.items()}
    taken = set(columns) | set(RESERVED)
    columns["run"] = np.concatenate([np.repeat(_run_numbers(cell), p) for cell, p in zip(cells, points)])
    if curves:
        columns["time"] = np.concatenate([np.tile(np.asarray(cell.times, np.int64), cell.runs) for cell in cells])
        columns["regret"] = np.concatenate([np.asarray(cell.regret).ravel() for cell in cells])
        taken |= {name for cell in cells for name in cell.diagnostics}  # a report is named as in the run frame
        reported = [("monitor_", [cell.monitor for cell in cells], np.ravel)]
    else:
        columns["final_regret"] = np.concatenate([cell.final_regret for cell in cells])
        log_horizon = np.repeat([math.log(cell.horizon) for cell in cells], sizes)
        with np.errstate(divide="ignore", invalid="ignore"):  # a horizon of 1 has no log T
            columns["regret_over_log_T"] = np.where(log_horizon > 0, columns["final_regret"] / log_horizon, np.nan)
        # the counters, then each monitor report at the horizon (its last recording time)
        reported = [
            ("diagnostic_", [cell.diagnostics for cell in cells], np.asarray),
            ("monitor_", [cell.monitor for cell in cells], lambda report: np.asarray(report)[:, -1]),
        ]
    if bounds is not None:
        found = [bounds[cell.instance] for cell in cells]
        columns["lower_bound"] = _combined([b.value for b in found], sizes)
        columns["lower_bound_log_T"] = _combined([b.times_log(cell.horizon) for b, cell in zip(found, cells)], sizes)
        if curves:  # the bound's curve, at each row's time
            log_t = [np.tile(np.log(np.asarray(c.times, np.float64)), c.runs) for c in cells]
            curve = [None if b.value is None else b.value * x for b, x in zip(found, log_t)]
            columns["lower_bound_log_t"] = _combined(curve, sizes)
        columns["lower_bound_kind"] = _label_column([b.kind for b in found], sizes, True)
    for prefix, per_cell, reshape in reported:
        names = list(dict.fromkeys(name for values in per_cell for name in values))
        for name, column in column_names(names, taken, prefix).items():
            columns[column] = _combined([None if name not in v else reshape(v[name]) for v in per_cell], sizes)
            taken.add(column)
    return pd.DataFrame(columns)


# -- datasets -----------------------------------------------------------------------


def _stacked(parts: list, name: str) -> tuple:
    """``(array, attrs)`` of per-cell arrays (None where a cell lacks ``name``)."""
    present = [np.asarray(p) for p in parts if p is not None]
    dtype = _common_dtype(present)
    if len(present) == len(parts):
        return np.stack([np.asarray(p, dtype) for p in parts]), {}
    shape = present[0].shape
    filled = [np.full(shape, np.nan) if p is None else np.asarray(p, np.float64) for p in parts]
    return np.stack(filled), {"stored_dtype": dtype.name, "note": f"NaN where a cell does not report {name}"}


def _coordinate(values: list) -> np.ndarray:
    """Per-cell labels as one array: numbers (NaN where a cell has none), or text."""
    present = [v for v in values if v is not None]
    if all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in present):
        dtype = _common_dtype([np.asarray(v) for v in present]) if len(present) == len(values) else np.float64
        return np.asarray([np.nan if v is None else v for v in values], dtype)
    return np.asarray(values, dtype=object)


def cells_dataset(cells, bounds=None):
    """An :class:`xarray.Dataset` of ``cells``, which must share their recording times
    and run count.

    Dimensions ``cell``, ``run``, ``time`` (and ``arm``, where every cell has the same
    number of arms; else ``attrs["note"]`` says why ``counts`` is absent).  Variables:
    ``regret (cell, run, time)``, ``final_regret (cell, run)``, ``counts (cell, run,
    arm)``, each diagnostic ``(cell, run)`` and monitor report ``(cell, run, time)``
    (prefixed ``diagnostic_`` or ``monitor_`` where the name is taken, as in the frame);
    the labels, the sweep's seed, noise stream, precision and directory, the resolved
    hyper-parameters (prefixed ``param_`` where the name is one of the dataset's own,
    such as ``counts`` or ``arm``) and, with ``bounds``, ``lower_bound`` are
    coordinates along ``cell``.
    """
    return _dataset(_checked(cells, bounds), bounds)


def _dataset(cells: list, bounds):
    """:func:`cells_dataset` of checked ``cells``."""
    xr = require("xarray")
    first = cells[0]
    same_runs = lambda c: (c.runs, c.first_run) == (first.runs, first.first_run)
    other = [c for c in cells if not np.array_equal(c.times, first.times) or not same_runs(c)]
    if other:
        names = ", ".join(f"{c.label} on {c.instance} (T={c.horizon})" for c in other)
        raise ArgumentError(
            f"a dataset needs cells that share their recording times and runs; {names} differ from "
            f"{first.label} on {first.instance} (T={first.horizon}): select cells of one horizon, e.g. "
            f"to_xarray(horizon={first.horizon}).",
            argument="horizon",
        )
    coords = {"time": np.asarray(first.times, np.int64), "run": _run_numbers(first)}
    labels = _labels(cells)
    if bounds is not None:
        labels["lower_bound"] = [bounds[c.instance].value for c in cells]
        labels["lower_bound_kind"] = [bounds[c.instance].kind for c in cells]
    coords.update({name: ("cell", _coordinate(values)) for name, values in labels.items()})
    data = {
        "regret": (("cell", "run", "time"), np.stack([c.regret for c in cells])),
        "final_regret": (("cell", "run"), np.stack([c.final_regret for c in cells])),
    }
    notes = {}
    if len({c.counts.shape for c in cells}) == 1:
        data["counts"] = (("cell", "run", "arm"), np.stack([c.counts for c in cells]))
    else:
        arms = sorted({c.counts.shape[-1] for c in cells})
        notes["note"] = f"no counts: the cells have {', '.join(map(str, arms))} arms (select cells of one instance size)"
    reported = (("diagnostics", "diagnostic_", ("cell", "run")), ("monitor", "monitor_", ("cell", "run", "time")))
    for kind, prefix, dims in reported:  # prefixed as the frame's columns are
        per_cell = [getattr(c, kind) for c in cells]
        names = list(dict.fromkeys(name for values in per_cell for name in values))
        for name, variable in column_names(names, set(data) | set(coords) | set(RESERVED), prefix).items():
            array, attrs = _stacked([v.get(name) for v in per_cell], name)
            data[variable] = (dims, array, attrs)
    return xr.Dataset(data, coords=coords, attrs=notes)


# -- one simulation -----------------------------------------------------------------


def _result_cells(result) -> list:
    """A :class:`~jaxbandit.result.Result` as one cell per instance of its batch (or per
    parameter set: a leading cell axis), labelled by its index."""
    batch = result.regret.ndim == 3
    count = result.regret.shape[0] if batch else 1
    cells = []
    for i in range(count):
        pick = (lambda a: np.asarray(a)[i]) if batch else np.asarray
        params = {k: (v[i] if isinstance(v, list) else v) for k, v in result.params.items()} | option_params(result.options)
        cells.append(SimpleNamespace(
            instance=i, noise=result.noise, policy=result.policy, label=result.policy, policy_name=result.policy,
            horizon=result.horizon, times=result.times, regret=pick(result.regret), counts=pick(result.counts),
            diagnostics={k: pick(v) for k, v in result.diagnostics.items()},
            monitor={k: pick(v) for k, v in result.monitor.items()},
            resolved_params=params, runs=result.runs, first_run=result.first_run, final_regret=pick(result.regret)[:, -1],
            seed=result.seed, noise_stream=None, precision=result.dtype, directory=None,
        ))  # fmt: skip
    return cells


_NOT_OF_A_RESULT = ["label", "policy_name", "noise_stream", "directory"]  # one policy, the batch's own streams


def result_frame(result, curves: bool = False):
    """:func:`cells_frame` of one :class:`~jaxbandit.result.Result`, without ``label``,
    ``policy_name`` (one policy), ``noise_stream`` and ``directory`` (none): ``instance`` is the cell's
    index in its batch (0 for a single instance; a grid of hyper-parameters on one
    instance has a cell per value, told apart by their columns), ``run`` the run's
    index in the seed's stream (from ``first_run``)."""
    return _frame(_result_cells(result), boolean("curves", curves), None).drop(columns=_NOT_OF_A_RESULT)


def result_dataset(result):
    """:func:`cells_dataset` of one :class:`~jaxbandit.result.Result`: dimensions
    ``(instance, run, time)`` for a batch of cells (instances, or a grid of
    hyper-parameters on one instance: see :func:`result_frame`), ``(run, time)`` for one."""
    dataset = _dataset(_result_cells(result), None).drop_vars(_NOT_OF_A_RESULT).swap_dims(cell="instance")
    return dataset if result.regret.ndim == 3 else dataset.isel(instance=0)
