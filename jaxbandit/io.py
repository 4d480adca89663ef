"""Sweep results on disk, loaded back to labelled arrays: :func:`load`.

Layout of a sweep directory (written by :func:`jaxbandit.sweep.run`, every file
atomically: :mod:`jaxbandit.files`)::

    DIR/sweep.json           the configuration, its fingerprint, the cell groups
    DIR/config.toml          the configuration file as first run (when run from a file)
    DIR/groups/gNNN.npz      results of one finished cell group (arrays)
    DIR/groups/gNNN.json     its metadata (written last: the group is finished)
    DIR/checkpoints/gNNN.npz engine state of a group in progress
    DIR/summary.csv          per-cell final-regret statistics (:mod:`jaxbandit.summary`)
    DIR/plots/               figures from ``jaxbandit plot DIR``

A directory may hold only some groups (shards still running, a killed sweep):
:func:`load` returns the finished ones and lists the others in ``missing``.
"""

from __future__ import annotations

import dataclasses
import logging
import os
from pathlib import Path

import numpy as np

from jaxbandit import frames, summary
from jaxbandit._numbers import ArgumentError, boolean, float_dtype, integer, path
from jaxbandit.config.records import cell_label, decode_array, decode_numbers, resolved_params
from jaxbandit.files import content_digest, npz_names, read_json, read_npz
from jaxbandit.fingerprint import instance_digest
from jaxbandit.instances import Instance
from jaxbandit.noise import resolve as resolve_noise
from jaxbandit.result import Result

logger = logging.getLogger("jaxbandit.io")

__all__ = [
    "FORMAT_VERSION", "MANIFEST", "CellResult", "SweepResults", "checkpoint_file", "group_arrays", "group_file",
    "group_finished", "load",
]  # fmt: skip

MANIFEST = "sweep.json"
FORMAT_VERSION = 4
GROUPS, CHECKPOINTS = "groups", "checkpoints"  # the directories of the layout above


def group_file(directory, group_id: str, suffix: str) -> Path:
    """``DIR/groups/<group_id><suffix>``: a finished group's arrays (``".npz"``) or metadata (``".json"``)."""
    return Path(directory) / GROUPS / f"{group_id}{suffix}"


def checkpoint_file(directory, group_id: str) -> Path:
    """``DIR/checkpoints/<group_id>.npz``: the engine state of a group in progress."""
    return Path(directory) / CHECKPOINTS / f"{group_id}.npz"


# The arrays of groups/<id>.npz: one for the group, one row per cell, and per counter
# (each named "<prefix>/<counter>"); a monitor's reports are "monitor/<name>".
_GROUP_WIDE = ("times", "diagnostic_times")
_PER_CELL = ("regret", "counts")
_PER_COUNTER = ("diagnostics", "diagnostic_history")


def group_arrays(times, diagnostic_times, regret, counts, diagnostics: dict, diagnostic_history: dict, monitor: dict):
    """What ``groups/<id>.npz`` holds for a group of ``C`` cells, as :func:`load` reads it:
    ``times`` ``(P,)``, ``diagnostic_times`` ``(D,)``, ``regret`` ``(C, runs, P)``,
    ``counts`` ``(C, runs, K)``, per counter ``diagnostics`` ``(C, runs)`` and
    ``diagnostic_history`` ``(C, D)``, per monitor report ``(C, runs, P)``."""
    arrays = dict(zip(_GROUP_WIDE + _PER_CELL, (times, diagnostic_times, regret, counts)))
    for name in diagnostics:
        for prefix, values in zip(_PER_COUNTER, (diagnostics, diagnostic_history)):
            arrays[f"{prefix}/{name}"] = values[name]
    arrays.update({f"monitor/{name}": value for name, value in monitor.items()})
    return arrays


def _require(entry, keys, path, what: str, kind: type = dict) -> None:
    """A ValueError naming ``path`` unless ``entry`` (``what`` in that file) is a
    ``kind`` holding every one of ``keys``."""
    if not isinstance(entry, kind):
        raise ValueError(f"{path}: {what} must be a JSON {kind.__name__}, got {type(entry).__name__}.")
    missing = [k for k in keys if k not in entry]
    if missing:
        raise ValueError(f"{path}: {what} lacks {', '.join(map(repr, missing))}.")


@dataclasses.dataclass(frozen=True, eq=False)  # arrays have no one truth value: == is identity
class CellResult:
    """Results of one cell: one instance, one policy with one parameter set, one horizon.

    Attributes:
        instance: instance label;  policy: policy label;  policy_name: registry name.
        params: the cell's hyper-parameters as written in the configuration.
        horizon: rounds simulated.
        times: ``(P,)`` rounds at which regret was recorded (last == horizon).
        regret: ``(runs, P)`` float64 pseudo-regret.
        counts: ``(runs, K)`` int64 pulls of each arm at the horizon.
        diagnostics: ``{name: (runs,)}`` per-run policy counters at the horizon.
        diagnostic_times: ``(D,)`` rounds (chunk boundaries) at which counters were recorded.
        diagnostic_history: ``{name: (D,)}`` mean over runs of each counter at those rounds.
        group: id of the cell group it was simulated in.
        monitor: ``{name: (runs, P)}`` the sweep's monitor's reports at ``times`` (empty
            without a ``[monitor]``).
        noise: the instance's noise family, as a label (``"bernoulli"``).
        resolved_params: the hyper-parameters as the policy resolved them, defaults
            included: the numeric ones as floats, its static options
            (``Policy.options``, e.g. ``case_c_rule``) as recorded.
        seed: the sweep's seed;  noise_stream: the instance's index among the sweep's
            instances.  Cells of one seed and stream ran on the same noise, run by run.
        precision: the sweep's floating-point precision, ``"float32"`` or ``"float64"``.
        directory: the sweep directory it was loaded from, absolute (None for a cell
            made otherwise): what tells apart cells of one label in two sweeps.
        instance_digest: the instance's values
            (:func:`~jaxbandit.fingerprint.instance_digest`; "" if unknown).
    """

    instance: str
    policy: str
    policy_name: str
    params: dict
    horizon: int
    # the arrays stay out of the repr: a notebook cell that shows results shows a line each
    times: np.ndarray = dataclasses.field(repr=False)
    regret: np.ndarray = dataclasses.field(repr=False)
    counts: np.ndarray = dataclasses.field(repr=False)
    diagnostics: dict = dataclasses.field(repr=False)
    diagnostic_times: np.ndarray = dataclasses.field(repr=False)
    diagnostic_history: dict = dataclasses.field(repr=False)
    group: str
    monitor: dict = dataclasses.field(default_factory=dict, repr=False)
    noise: str = "gaussian"
    resolved_params: dict = dataclasses.field(default_factory=dict)
    seed: int = 0
    noise_stream: int = 0
    precision: str = "float32"
    directory: Path | None = None
    instance_digest: str = ""

    @property
    def label(self) -> str:
        """``policy`` plus its parameters, e.g. ``"ucb_n(alpha=0.5)"``."""
        return cell_label(self.policy, self.params)

    @property
    def resolved_label(self) -> str:
        """``policy`` plus its parameters as resolved, defaults included, e.g.
        ``"lp_explore(alpha=4.5, gamma=0.5)"`` (what figures show)."""
        return cell_label(self.policy, {**self.params, **self.resolved_params})

    @property
    def runs(self) -> int:
        return int(self.regret.shape[0])

    first_run = 0  # a sweep's cells hold its runs 0 .. runs - 1

    def matches(self, selection) -> bool:
        """Whether ``selection`` picks this cell: a cell label (``"ucb_n(alpha=0.5)"``),
        its resolved label as figures show it (``"ucb_n(alpha=1.0)"`` for a default) or
        its policy label (a string), or attribute values (a dict, as
        :meth:`SweepResults.select` takes them; ``noise`` compared as a family, by its
        label: ``"student_t(df=3.0)"`` is ``"student_t(df=3)"``; ``precision`` as a
        dtype; ``directory`` as a path, resolved)."""
        if isinstance(selection, dict):
            held = lambda k, v: _AS_CELL_HOLDS[k](v) if k in _AS_CELL_HOLDS else v
            return all(getattr(self, k) == held(k, v) for k, v in selection.items())
        return selection in (self.label, self.resolved_label, self.policy)

    # a simulation's, on this cell's (runs, P) regret
    final_regret = Result.final_regret
    mean_regret = Result.mean_regret
    standard_error = Result.standard_error


@dataclasses.dataclass(frozen=True, eq=False)  # as CellResult
class SweepResults:
    """Everything :func:`load` finds in a sweep directory.

    Attributes:
        directory: the sweep directory.
        config: the configuration dict as given.
        fingerprint: hash of what determines the results.
        cells: finished cells, in configuration order.
        instances: ``{label: Instance}`` of the sweep.
        groups: ``{group id: metadata dict}`` of the finished groups (wall time, device,
            package versions, ...).
        missing: ids of the groups not finished yet (shards still running or not
            started, an interrupted sweep), in plan order.
        plan: ``{group id: manifest entry}`` of every group: policy, horizon, cells.
        in_progress: ids of the missing groups that have a checkpoint.
    """

    directory: Path
    config: dict
    fingerprint: str
    cells: tuple
    instances: dict
    groups: dict
    missing: tuple
    plan: dict = dataclasses.field(default_factory=dict)
    in_progress: tuple = ()
    # {label: (instance, bound)}: each instance's bound solved once; not copied by replace()
    _bounds: dict = dataclasses.field(default_factory=dict, init=False, compare=False, repr=False)

    def __repr__(self) -> str:
        missing = f", missing {', '.join(self.missing)}" if self.missing else ""
        cells = f"{len(self.cells)} cell{'' if len(self.cells) == 1 else 's'}"
        return f"SweepResults({str(self.directory)!r}: {cells}{missing})"

    @property
    def complete(self) -> bool:
        return not self.missing

    def describe_missing(self) -> list:
        """One line per missing group, e.g. ``"g002 (ucb_n on bandit, graph_star, T=10000,
        6 cells, in progress)"``."""
        lines = []
        for group_id in self.missing:
            entry = self.plan.get(group_id, {})
            state = "in progress" if group_id in self.in_progress else "not started"
            cells = entry.get("cells", ())
            instances = ", ".join(dict.fromkeys(str(cell.get("instance", "?")) for cell in cells)) or "?"
            lines.append(
                f"{group_id} ({entry.get('policy_name', '?')} on {instances}, T={entry.get('horizon', '?')}, "
                f"{len(cells)} cells, {state})"
            )
        return lines

    def select(self, **criteria) -> list:
        """Cells whose attributes equal ``criteria``, e.g. ``select(instance="bandit")``
        (a cell's hyper-parameters: ``params={"alpha": 0.5}``, all of them, or its
        ``label``, ``"ucb_n(alpha=0.5)"``; its sweep: ``directory="results/"``)."""
        check_criteria("select", criteria)
        return [c for c in self.cells if c.matches(criteria)]

    @property
    def instance_labels(self) -> list:
        return list(dict.fromkeys(c.instance for c in self.cells))

    @property
    def policy_labels(self) -> list:
        return list(dict.fromkeys(c.label for c in self.cells))

    @property
    def horizons(self) -> list:
        return sorted({c.horizon for c in self.cells})

    def lower_bounds(self) -> dict:
        """``{instance label: InstanceBound}``, solved once (:func:`jaxbandit.summary.lower_bounds`)."""
        stale = {k: inst for k, inst in self.instances.items() if self._bounds.get(k, (None,))[0] is not inst}
        if stale:
            self._bounds.update({k: (stale[k], bound) for k, bound in summary.lower_bounds(stale).items()})
        return {k: self._bounds[k][1] for k in self.instances}

    def summary(self) -> list:
        """One dict of final-regret statistics per cell, with the lower bound
        (:func:`jaxbandit.summary.summary_rows`)."""
        return summary.summary_rows(self.cells, self.lower_bounds())

    def to_pandas(self, curves: bool = False, *, bounds: bool = True, **criteria):
        """A long :class:`pandas.DataFrame` of the cells that :meth:`select` picks with
        ``criteria`` (all by default): one row per cell and run, or with ``curves`` per
        cell, run and recording time (:func:`jaxbandit.frames.cells_frame`); ``bounds``
        adds the lower-bound columns (:meth:`lower_bounds`)."""
        return frames.cells_frame(self._picked("to_pandas", criteria), curves=curves, bounds=self._bounds_if(bounds))

    def to_xarray(self, *, bounds: bool = True, **criteria):
        """An :class:`xarray.Dataset` with dimensions ``(cell, run, time)`` of the cells
        that :meth:`select` picks, which must share their recording times
        (:func:`jaxbandit.frames.cells_dataset`)."""
        return frames.cells_dataset(self._picked("to_xarray", criteria), bounds=self._bounds_if(bounds))

    def _picked(self, view: str, criteria: dict) -> list:
        """:meth:`select` of ``criteria``, or an :class:`ArgumentError` echoing them (as
        ``view`` took them) and the values the cells have where none matches."""
        cells = self.select(**criteria)
        if not cells:
            asked = ", ".join(f"{key}={value!r}" for key, value in criteria.items())
            have = "; ".join(f"{key} {', '.join(dict.fromkeys(repr(getattr(c, key)) for c in self.cells))}" for key in criteria)
            why = f"the cells have {have}" if self.cells else f"{self.directory} has no finished cell yet"
            raise ArgumentError(f"{view}({asked}) matches no cell; {why}.", argument=next(iter(criteria), None))
        return cells

    def _bounds_if(self, bounds) -> dict | None:
        """:meth:`lower_bounds` if the views' ``bounds`` flag (True or False) is set."""
        return self.lower_bounds() if boolean("bounds", bounds) else None


# attributes a selection may write otherwise than a cell holds them: the rule that writes a value as a cell does
_AS_CELL_HOLDS = {
    "noise": lambda v: resolve_noise(v).label, "precision": lambda v: float_dtype("precision", v).name,
    "directory": lambda v: path("directory", v).resolve(),
}  # fmt: skip
# the attributes of a cell that hold arrays: == on them is not a truth value
_ARRAY_ATTRIBUTES = ("times", "regret", "counts", "diagnostics", "diagnostic_times", "diagnostic_history", "monitor")


def check_criteria(name: str, criteria: dict) -> None:
    """An :class:`ArgumentError` naming a key of ``criteria`` (``name``'s) that no cell
    has, one that holds arrays, or a value that no cell's can equal: a cell's text
    attributes are strings, its counts integers (the one integer rule: ``horizon=2e4``
    is 20000), its noise a family (a name, a label or a
    :class:`~jaxbandit.noise.NoiseFamily`, compared by :meth:`CellResult.matches`), its
    precision float32 or float64, its directory a path (compared resolved)."""
    fields = {f.name: f.type for f in dataclasses.fields(CellResult)} | {"label": "str", "resolved_label": "str", "runs": "int"}
    unknown = sorted(set(criteria) - set(fields))
    if unknown:
        raise ArgumentError(
            f"{name} got {unknown}, which no cell has; a cell has {', '.join(fields)} "
            "(its hyper-parameters are params, or its label).", argument=unknown[0])
    for key, value in criteria.items():
        if key in _ARRAY_ATTRIBUTES:
            raise ArgumentError(f"{name}: a cell's {key} holds arrays; select cells by another attribute.", argument=key)
        if key in _AS_CELL_HOLDS:
            _AS_CELL_HOLDS[key](value)
        elif fields[key] == "int":
            integer(key, value, None)
        elif fields[key] in ("str", "dict") and not isinstance(value, str if fields[key] == "str" else dict):
            kind = "a string" if fields[key] == "str" else "a dict"
            raise ArgumentError(f"{name}: a cell's {key} is {kind}, so {key}={value!r} picks no cell.", argument=key)


def _finished_group(directory: Path, group_id: str, fingerprint: str, num_cells: int | None = None):
    """``(metadata, arrays)`` of a finished group: its ``.json`` of this ``fingerprint``
    and its ``.npz`` both present, the ``.npz`` holding every array the metadata implies
    (``monitor/*`` ones are optional); None if it is not finished.  ``arrays``: only
    their names, or with ``num_cells`` a dict of them, each checked to hold one row per
    cell.  A ValueError naming the file that is damaged."""
    meta_path, data_path = (group_file(directory, group_id, suffix) for suffix in (".json", ".npz"))
    if not meta_path.is_file() or not data_path.is_file():
        return None
    meta = read_json(meta_path)
    _require(meta, ("data_digest",), meta_path, "the group metadata")
    if meta.get("fingerprint") != fingerprint:
        return None
    content = data_path.read_bytes()
    if num_cells is None:
        arrays = npz_names(data_path, content)  # checksums verified, arrays not parsed
    else:
        arrays = read_npz(data_path, content)
    if content_digest(content) != meta["data_digest"]:  # another group's file, or a copy of another sweep's
        raise ValueError(
            f"{data_path} is not the file {meta_path.name} records (their digests differ); running the sweep "
            "again computes the group anew."
        )
    required = [*_GROUP_WIDE, *_PER_CELL] + [f"{p}/{k}" for k in meta.get("diagnostics", []) for p in _PER_COUNTER]
    missing = [k for k in required if k not in arrays]
    if missing:
        raise ValueError(
            f"{data_path} lacks {', '.join(map(repr, missing))}; running the sweep again computes the group anew."
        )
    if num_cells is not None:
        for name, array in arrays.items():
            if name not in _GROUP_WIDE and array.shape[:1] != (num_cells,):
                raise ValueError(
                    f"{data_path}: {name!r} has shape {array.shape}, not one row for each of the "
                    f"group's {num_cells} cells."
                )
    return meta, arrays


def group_finished(directory, group_id: str, fingerprint: str) -> bool:
    """True if the sweep in ``directory`` holds finished results of the group
    ``group_id`` with ``fingerprint`` (what :func:`load` returns as finished).

    A group whose files are damaged (unreadable, a member failing its checksum,
    arrays missing) is not finished, with a warning naming the file, so that running
    the sweep again computes it anew.
    """
    try:
        return _finished_group(Path(directory), group_id, fingerprint) is not None
    except ValueError as damaged:
        logger.warning("%s", damaged)
        return False


def other_version(manifest) -> str | None:
    """Why ``manifest`` (as read) is not of this version's directory format, or None."""
    written = manifest.get("format", "unknown") if isinstance(manifest, dict) else "unknown"
    if written == FORMAT_VERSION:
        return None
    return f"written by another version of jaxbandit (directory format {written}, this version writes {FORMAT_VERSION})"


def _check_manifest(manifest, path: Path) -> None:
    """A ValueError naming ``path`` if the manifest is of another directory format or
    lacks what :func:`load` reads."""
    _require(manifest, (), path, "the manifest")
    if reason := other_version(manifest):
        raise ValueError(f"{path.parent}: {reason}.")
    _require(manifest, ("config", "fingerprint", "instances", "groups", "resolved_settings"), path, "the manifest")
    _require(manifest["resolved_settings"], ("seed", "precision"), path, "'resolved_settings'")
    _require(manifest["instances"], (), path, "'instances'")
    for label, entry in manifest["instances"].items():
        _require(entry, ("mu", "sigma"), path, f"instance {label!r}")
    _require(manifest["groups"], (), path, "'groups'", kind=list)
    for i, group in enumerate(manifest["groups"]):
        _require(group, ("id", "fingerprint", "horizon", "options", "cells"), path, f"groups[{i}]")
        _require(group["cells"], (), path, f"groups[{i}].cells", kind=list)
        for c, cell in enumerate(group["cells"]):
            _require(cell, ("instance", "policy", "policy_name", "params"), path, f"groups[{i}].cells[{c}]")
    unknown = sorted({c["instance"] for g in manifest["groups"] for c in g["cells"]} - set(manifest["instances"]))
    if unknown:
        raise ValueError(f"{path}: cells of instances {unknown} that its 'instances' table lacks.")


def as_results(value) -> SweepResults:
    """``value`` as a :class:`SweepResults`: itself, or the sweep directory it names
    (:func:`load`); an :class:`ArgumentError` naming ``results`` for anything else."""
    if isinstance(value, SweepResults):
        return value
    if isinstance(value, (str, os.PathLike)):
        return load(value)
    raise ArgumentError(
        f"results must be a SweepResults (jaxbandit.load) or a sweep directory, got {value!r}.", argument="results"
    )


def load(directory) -> SweepResults:
    """Load a sweep directory written by :func:`jaxbandit.sweep.run` (finished groups).

    A directory whose groups are not all finished (shards of it still running) loads
    too: ``results.missing`` lists the others, ``results.describe_missing()`` says
    what they are.

    Returns:
        A :class:`SweepResults`; ``results.cells[i].regret`` is ``(runs, P)``.
    """
    directory = path("directory", directory)
    manifest_path = directory / MANIFEST
    if not manifest_path.is_file():
        raise FileNotFoundError(f"{directory} is not a sweep directory: {MANIFEST} not found.")
    manifest = read_json(manifest_path)
    _check_manifest(manifest, manifest_path)
    instances = {}
    for label, entry in manifest["instances"].items():
        try:
            instances[label] = Instance(
                decode_array(entry["mu"]), decode_array(entry["sigma"]), noise=entry.get("noise", "gaussian")
            )
        except ValueError as err:  # an edited or damaged manifest
            raise ValueError(f"{manifest_path}: instance {label!r}: {err}") from None
    settings = manifest["resolved_settings"]
    digests = {label: instance_digest(inst) for label, inst in instances.items()}
    cells, groups, missing = [], {}, []
    for group in manifest["groups"]:
        found = _finished_group(directory, group["id"], group["fingerprint"], len(group["cells"]))
        if found is None:
            missing.append(group["id"])
            continue
        meta, arrays = found
        groups[group["id"]] = meta
        diag_names = meta.get("diagnostics", [])
        monitor_names = [k.removeprefix("monitor/") for k in arrays if k.startswith("monitor/")]
        for c, cell in enumerate(group["cells"]):
            cells.append(
                CellResult(
                    instance=cell["instance"],
                    policy=cell["policy"],
                    policy_name=cell["policy_name"],
                    params=dict(cell["params"]),
                    horizon=int(group["horizon"]),
                    times=arrays["times"],
                    regret=arrays["regret"][c],
                    counts=arrays["counts"][c],
                    diagnostics={k: arrays[f"diagnostics/{k}"][c] for k in diag_names},
                    diagnostic_times=arrays["diagnostic_times"],
                    diagnostic_history={k: arrays[f"diagnostic_history/{k}"][c] for k in diag_names},
                    group=group["id"],
                    monitor={k: arrays[f"monitor/{k}"][c] for k in monitor_names},
                    noise=instances[cell["instance"]].noise.label,
                    resolved_params=resolved_params(
                        cell["params"], decode_numbers(cell.get("resolved_params", {})), group["options"]
                    ),
                    seed=int(settings["seed"]),
                    noise_stream=int(manifest["instances"][cell["instance"]].get("index", 0)),
                    precision=settings["precision"],
                    directory=directory.resolve(),
                    instance_digest=digests[cell["instance"]],
                )
            )
    return SweepResults(
        directory=directory,
        config=manifest["config"],
        fingerprint=manifest["fingerprint"],
        cells=tuple(cells),
        instances=instances,
        groups=groups,
        missing=tuple(missing),
        plan={group["id"]: group for group in manifest["groups"]},
        in_progress=tuple(g for g in missing if checkpoint_file(directory, g).is_file()),
    )
