"""Sweep results on disk: atomic writes and :func:`load` back to labelled arrays.

Layout of a sweep directory (written by :func:`jaxbandit.sweep.run`)::

    DIR/sweep.json           the configuration, its fingerprint, the cell groups
    DIR/config.toml          the configuration file as given (when run from a file)
    DIR/groups/gNNN.npz      results of one finished cell group (arrays)
    DIR/groups/gNNN.json     its metadata (written last: the group is finished)
    DIR/checkpoints/gNNN.npz engine state of a group in progress
    DIR/summary.csv          per-cell final-regret statistics
    DIR/plots/               figures from ``jaxbandit plot DIR``

Every file is written to a temporary file in the same directory, flushed to disk and
moved into place with ``os.replace``, so a killed process leaves either the old file
or the new one, never a torn one.  The manifest is created with a hard link instead,
which fails if it exists: of several jobs starting on one directory, one creates it.

A directory may hold only some groups (shards still running, a killed sweep):
:func:`load` returns the finished ones and lists the others in ``missing``.
"""

from __future__ import annotations

import contextlib
import csv
import dataclasses
import io as _io
import json
import os
import tempfile
import zipfile
from pathlib import Path
from typing import Callable, Optional

import numpy as np

from jaxbandit.config.records import cell_label, decode_array
from jaxbandit.instances import Instance
from jaxbandit.result import standard_error

__all__ = [
    "CellResult",
    "SweepResults",
    "load",
    "atomic_write",
    "save_npz",
    "save_json",
    "save_text",
    "read_json",
    "create_exclusive_json",
    "visible_entries",
    "group_finished",
    "summary_rows",
    "write_summary_csv",
    "MANIFEST",
    "FORMAT_VERSION",
]

MANIFEST = "sweep.json"
FORMAT_VERSION = 2
SUMMARY_FIELDS = (
    "instance", "noise", "policy", "policy_name", "params", "horizon", "runs",
    "mean", "stderr", "median", "q05", "q95",
)


# -- atomic writes ------------------------------------------------------------------


def atomic_write(path, write_fn: Callable) -> Path:
    """Write ``path`` atomically: ``write_fn(binary_file)`` into a temp file, then rename."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as handle:
            write_fn(handle)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass
        raise
    return path


def save_npz(path, arrays: dict) -> Path:
    """Atomically save a dict of arrays as an (uncompressed) ``.npz``."""
    buffer = _io.BytesIO()
    np.savez(buffer, **{k: np.asarray(v) for k, v in arrays.items()})
    return atomic_write(path, lambda f: f.write(buffer.getvalue()))


def save_json(path, obj) -> Path:
    data = _json_bytes(obj)
    return atomic_write(path, lambda f: f.write(data))


def save_text(path, text: str) -> Path:
    return atomic_write(path, lambda f: f.write(text.encode("utf-8")))


def _json_bytes(obj) -> bytes:
    return (json.dumps(obj, indent=1, sort_keys=True, allow_nan=False) + "\n").encode("utf-8")


def create_exclusive_json(path, obj) -> bool:
    """Create ``path`` with ``obj`` as JSON unless it exists; True if this call created it.

    The complete file is written under a temporary name and hard-linked to ``path``:
    the link fails if ``path`` exists, so of several processes racing to create it
    exactly one does, and no reader sees a partial file.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    data = _json_bytes(obj)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        try:
            os.link(tmp, path)
        except FileExistsError:
            return False
        except OSError:
            # A filesystem without hard links: exclusive creation, then the content.
            try:
                with open(path, "xb") as handle:
                    handle.write(data)
            except FileExistsError:
                return False
        return True
    finally:
        os.unlink(tmp)


def visible_entries(directory) -> list:
    """Names in ``directory`` other than the temporary files of atomic writes
    (``[]`` if it does not exist)."""
    directory = Path(directory)
    if not directory.is_dir():
        return []
    return sorted(p.name for p in directory.iterdir() if not (p.name.startswith(".") and p.name.endswith(".tmp")))


def read_json(path):
    """The JSON content of ``path``; a ValueError naming the file if it is not JSON."""
    try:
        with open(path, encoding="utf-8") as handle:
            return json.load(handle)
    except ValueError as err:  # JSONDecodeError, UnicodeDecodeError
        raise ValueError(f"{path} is not a readable JSON file ({err}).") from err


def read_npz(path, content: Optional[bytes] = None) -> dict:
    """The arrays of ``path``; a ValueError naming the file if it is not a readable ``.npz``.

    ``content``: the file's bytes, where the caller has read them already (to digest
    them), so that the file is not read twice.
    """
    with _open_npz(path, content) as data:
        try:
            return {k: data[k] for k in data.files}
        except (ValueError, EOFError, zipfile.BadZipFile) as err:  # a damaged member
            raise ValueError(f"{path} is not a readable .npz file ({err}).") from err


@contextlib.contextmanager
def _open_npz(path, content: Optional[bytes] = None):
    """``np.load(path)`` of an ``.npz`` (its arrays are read on access), or of its bytes
    ``content`` if given; a ValueError naming the file if it is something else, such as
    a truncated copy."""
    # The file is opened here: np.load leaves its own handle open when it fails.
    with open(path, "rb") if content is None else _io.BytesIO(content) as handle:
        try:
            data = np.load(handle, allow_pickle=False)
        except (ValueError, EOFError, zipfile.BadZipFile) as err:
            raise ValueError(f"{path} is not a readable .npz file ({err}).") from err
        if not isinstance(data, np.lib.npyio.NpzFile):
            raise ValueError(f"{path} is not a readable .npz file (it holds a single array).")
        with data:
            yield data


def _require(entry, keys, path, what: str, kind: type = dict) -> None:
    """A ValueError naming ``path`` unless ``entry`` (``what`` in that file) is a
    ``kind`` holding every one of ``keys``."""
    if not isinstance(entry, kind):
        raise ValueError(f"{path}: {what} must be a JSON {kind.__name__}, got {type(entry).__name__}.")
    missing = [k for k in keys if k not in entry]
    if missing:
        raise ValueError(f"{path}: {what} lacks {', '.join(map(repr, missing))}.")


# -- loading ------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
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
    """

    instance: str
    policy: str
    policy_name: str
    params: dict
    horizon: int
    times: np.ndarray
    regret: np.ndarray
    counts: np.ndarray
    diagnostics: dict
    diagnostic_times: np.ndarray
    diagnostic_history: dict
    group: str
    monitor: dict = dataclasses.field(default_factory=dict)
    noise: str = "gaussian"

    @property
    def label(self) -> str:
        """``policy`` plus its parameters, e.g. ``"ucb_n(alpha=0.5)"``."""
        return cell_label(self.policy, self.params)

    @property
    def runs(self) -> int:
        return int(self.regret.shape[0])

    @property
    def final_regret(self) -> np.ndarray:
        """``(runs,)`` regret at the horizon."""
        return self.regret[:, -1]

    def mean_regret(self) -> np.ndarray:
        """``(P,)`` mean regret over runs."""
        return self.regret.mean(axis=0)

    def standard_error(self) -> np.ndarray:
        """``(P,)`` standard error of the mean (NaN with a single run)."""
        return standard_error(self.regret, axis=0)


@dataclasses.dataclass(frozen=True)
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

    @property
    def complete(self) -> bool:
        return not self.missing

    def describe_missing(self) -> list:
        """One line per missing group, e.g. ``"g002 (ucb_n, T=10000, 6 cells, in progress)"``."""
        lines = []
        for group_id in self.missing:
            entry = self.plan.get(group_id, {})
            state = "in progress" if group_id in self.in_progress else "not started"
            lines.append(
                f"{group_id} ({entry.get('policy_name', '?')}, T={entry.get('horizon', '?')}, "
                f"{len(entry.get('cells', ()))} cells, {state})"
            )
        return lines

    def select(self, **criteria) -> list:
        """Cells whose attributes equal ``criteria``, e.g. ``select(instance="bandit")``."""
        return [c for c in self.cells if all(getattr(c, k) == v for k, v in criteria.items())]

    @property
    def instance_labels(self) -> list:
        return list(dict.fromkeys(c.instance for c in self.cells))

    @property
    def policy_labels(self) -> list:
        return list(dict.fromkeys(c.label for c in self.cells))

    @property
    def horizons(self) -> list:
        return sorted({c.horizon for c in self.cells})

    def summary(self) -> list:
        """Per-cell final-regret statistics (see :func:`summary_rows`)."""
        return summary_rows(self.cells)


def _finished_metadata(directory: Path, group_id: str, fingerprint: str) -> Optional[dict]:
    """The metadata of a finished group: its ``.json`` of this ``fingerprint`` and
    its ``.npz`` both present; None otherwise.  A ValueError if the ``.json`` is
    unreadable."""
    meta_path = directory / "groups" / f"{group_id}.json"
    if not meta_path.is_file() or not (directory / "groups" / f"{group_id}.npz").is_file():
        return None
    meta = read_json(meta_path)
    _require(meta, (), meta_path, "the group metadata")
    return meta if meta.get("fingerprint") == fingerprint else None


def _group_array_names(meta: dict) -> list:
    """The arrays a group's ``.npz`` must hold (``monitor/*`` ones are optional)."""
    names = ["times", "regret", "counts", "diagnostic_times"]
    for k in meta.get("diagnostics", []):
        names += [f"diagnostics/{k}", f"diagnostic_history/{k}"]
    return names


def _check_group_arrays(path: Path, names, meta: dict) -> None:
    missing = [k for k in _group_array_names(meta) if k not in names]
    if missing:
        raise ValueError(
            f"{path} lacks {', '.join(map(repr, missing))}; running the sweep again computes the group anew."
        )


def group_finished(directory, group_id: str, fingerprint: str) -> bool:
    """True if the sweep in ``directory`` holds finished results of the group
    ``group_id`` with ``fingerprint`` (what :func:`load` returns as finished).

    A group whose files are damaged (unreadable, arrays missing) is not finished,
    so that running the sweep again computes it anew.
    """
    directory = Path(directory)
    try:
        meta = _finished_metadata(directory, group_id, fingerprint)
        if meta is None:
            return False
        path = directory / "groups" / f"{group_id}.npz"
        with _open_npz(path) as data:  # reads the list of arrays only
            _check_group_arrays(path, data.files, meta)
    except ValueError:
        return False
    return True


def _check_manifest(manifest, path: Path) -> None:
    """A ValueError naming ``path`` if the manifest lacks what :func:`load` reads."""
    _require(manifest, ("config", "fingerprint", "instances", "groups"), path, "the manifest")
    _require(manifest["instances"], (), path, "'instances'")
    for label, entry in manifest["instances"].items():
        _require(entry, ("mu", "sigma"), path, f"instance {label!r}")
    _require(manifest["groups"], (), path, "'groups'", kind=list)
    for i, group in enumerate(manifest["groups"]):
        _require(group, ("id", "fingerprint", "horizon", "cells"), path, f"groups[{i}]")
        _require(group["cells"], (), path, f"groups[{i}].cells", kind=list)
        for c, cell in enumerate(group["cells"]):
            _require(cell, ("instance", "policy", "policy_name", "params"), path, f"groups[{i}].cells[{c}]")


def load(directory) -> SweepResults:
    """Load a sweep directory written by :func:`jaxbandit.sweep.run` (finished groups).

    A directory whose groups are not all finished (shards of it still running) loads
    too: ``results.missing`` lists the others, ``results.describe_missing()`` says
    what they are.

    Returns:
        A :class:`SweepResults`; ``results.cells[i].regret`` is ``(runs, P)``.
    """
    directory = Path(directory)
    manifest_path = directory / MANIFEST
    if not manifest_path.is_file():
        raise FileNotFoundError(f"{directory} is not a sweep directory: {MANIFEST} not found.")
    manifest = read_json(manifest_path)
    _check_manifest(manifest, manifest_path)
    instances = {
        label: Instance(decode_array(entry["mu"]), decode_array(entry["sigma"]), noise=entry.get("noise", "gaussian"))
        for label, entry in manifest["instances"].items()
    }
    cells, groups, missing = [], {}, []
    for group in manifest["groups"]:
        meta = _finished_metadata(directory, group["id"], group["fingerprint"])
        if meta is None:
            missing.append(group["id"])
            continue
        data_path = directory / "groups" / f"{group['id']}.npz"
        groups[group["id"]] = meta
        arrays = read_npz(data_path)
        _check_group_arrays(data_path, arrays, meta)
        for name, array in arrays.items():
            if name not in ("times", "diagnostic_times") and array.shape[:1] != (len(group["cells"]),):
                raise ValueError(
                    f"{data_path}: {name!r} has shape {array.shape}, not one row for each of the "
                    f"group's {len(group['cells'])} cells."
                )
        diag_names = meta.get("diagnostics", [])
        monitor_names = [k[len("monitor/"):] for k in arrays if k.startswith("monitor/")]
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
        in_progress=tuple(g for g in missing if (directory / "checkpoints" / f"{g}.npz").is_file()),
    )


# -- summary ------------------------------------------------------------------------


def summary_rows(cells) -> list:
    """Per cell: mean, standard error, median and 5% / 95% quantiles of final regret."""
    rows = []
    for cell in cells:
        final = cell.final_regret
        stderr = float(standard_error(final, axis=0))
        rows.append(
            dict(
                instance=cell.instance,
                noise=cell.noise,
                policy=cell.policy,
                policy_name=cell.policy_name,
                params=json.dumps(cell.params, sort_keys=True),
                horizon=cell.horizon,
                runs=final.size,
                mean=float(final.mean()),
                stderr=stderr,
                median=float(np.median(final)),
                q05=float(np.quantile(final, 0.05)),
                q95=float(np.quantile(final, 0.95)),
            )
        )
    return rows


def write_summary_csv(results: SweepResults, path: Optional[os.PathLike] = None) -> Path:
    """Write ``summary.csv`` (default: in the sweep directory) atomically."""
    path = Path(path) if path is not None else results.directory / "summary.csv"
    buffer = _io.StringIO()
    writer = csv.DictWriter(buffer, fieldnames=SUMMARY_FIELDS, lineterminator="\n")
    writer.writeheader()
    for row in results.summary():
        writer.writerow({k: (repr(v) if isinstance(v, float) else v) for k, v in row.items()})
    return save_text(path, buffer.getvalue())
