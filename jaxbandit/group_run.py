"""One cell group of a sweep, simulated to its horizon: resumed from its checkpoint,
checkpointed at chunk boundaries (every N chunks and/or M seconds), its results
written atomically when it finishes (see :mod:`jaxbandit.io` for the files).

Every decision depends on chunk counts or, in a single process only, on this
process's clock; with several processes all of them call the same functions and
process 0 alone writes.
"""

from __future__ import annotations

import contextlib
import dataclasses
import datetime
import hashlib
import logging
import platform
import time
from pathlib import Path

import jax
import numpy as np

from jaxbandit import distributed, files, io, stopping
from jaxbandit.config.records import cell_label
from jaxbandit.runner import InvalidArmError, NaNStateError, SimulationRun

__all__ = ["checkpoint_cadence", "describe_devices", "package_versions", "run_group"]

logger = logging.getLogger("jaxbandit.sweep")

# With several processes every process must checkpoint at the same chunk (gathering
# the state is a collective) and their clocks differ: a cadence in seconds becomes
# one in chunks.
_MULTIPROCESS_CHECKPOINT_CHUNKS = 100


def package_versions() -> dict:
    import jaxlib

    import jaxbandit

    return {
        "jaxbandit": getattr(jaxbandit, "__version__", "unknown"),
        "jax": jax.__version__,
        "jaxlib": jaxlib.__version__,
        "numpy": np.__version__,
        "python": platform.python_version(),
    }


def describe_devices() -> dict:
    devices = jax.devices()
    return {
        "backend": jax.default_backend(),
        "device_kind": devices[0].device_kind,
        "device_count": len(devices),
        "process_count": jax.process_count(),
        "host": platform.node(),
    }


def checkpoint_cadence(cfg) -> tuple:
    """``(every_chunks, every_seconds)``; in chunks alone with several processes."""
    every_chunks, every_seconds = cfg.checkpoint_every_chunks, cfg.checkpoint_every_seconds
    if distributed.is_multiprocess() and every_seconds is not None:
        every_chunks, every_seconds = every_chunks or _MULTIPROCESS_CHECKPOINT_CHUNKS, None
    return every_chunks, every_seconds


def _now() -> str:
    return datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")




@dataclasses.dataclass
class _History:
    """Policy counters at chunk boundaries: ``times`` ``(D,)`` rounds, and per counter
    ``D`` arrays ``(C,)`` of means over the runs (e.g. lp_explore's case mix)."""

    times: list = dataclasses.field(default_factory=list)
    values: dict = dataclasses.field(default_factory=dict)

    @classmethod
    def from_checkpoint(cls, saved: dict) -> "_History":
        prefix = "sweep/history/"
        values = {k[len(prefix):]: list(v.T) for k, v in saved.items() if k.startswith(prefix)}
        return cls(saved["sweep/diagnostic_times"].tolist(), values)

    def record(self, sim: SimulationRun) -> None:
        self.times.append(sim.rounds_done)
        for name, value in sim.diagnostics().items():  # {name: (C, runs)}
            self.values.setdefault(name, []).append(value.astype(np.float64).mean(axis=1))

    def stacked(self, name: str, num_cells: int) -> np.ndarray:
        """``(C, D)`` float64 history of counter ``name``."""
        values = self.values.get(name, [])
        if not values:
            return np.zeros((num_cells, 0), np.float64)
        return np.stack(values, axis=1).astype(np.float64)

    def checkpoint_arrays(self, num_cells: int) -> dict:
        arrays = {"sweep/diagnostic_times": np.asarray(self.times, dtype=np.int64)}
        arrays.update({f"sweep/history/{name}": self.stacked(name, num_cells) for name in self.values})
        return arrays


def _new_simulation(cfg, group) -> SimulationRun:
    """The group's :class:`SimulationRun`, from the plan (checked when it was resolved)."""
    return SimulationRun.from_inputs(cfg.run_inputs(group))


def _read_checkpoint(path: Path) -> tuple:
    """``(digest, arrays)`` of a checkpoint file; ``("none", None)`` if there is none,
    and ``(digest, None)`` with a warning if it cannot be read (a damaged copy): the
    group then starts over rather than every rerun failing on it."""
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return "none", None
    digest = hashlib.sha256(data).hexdigest()[:16]
    try:
        return digest, files.read_npz(path, data)
    except (ValueError, OSError) as error:
        reason = error.__cause__ or error  # read_npz's message names the file again
        logger.warning("ignoring the checkpoint %s, which cannot be read (%s): its group starts over", path, reason)
        return digest, None


def _resume(sim: SimulationRun, group, path: Path) -> _History:
    """Restore ``sim`` from the group's checkpoint if there is a usable one.

    Every process reads the file process 0 wrote and checks that they all read the
    same one, so that they resume from the same round.  A checkpoint of another
    configuration, or one that :meth:`SimulationRun.restore` refuses (another
    simulation, or an engine state of another jaxbandit version), is ignored with a
    warning: the group starts over and, its results depending only on the seed, ends
    the same.
    """
    digest, saved = _read_checkpoint(path)
    distributed.agree(f"the checkpoint of group {group.id} (is {path.parent.parent} shared by every process?)", digest)
    if saved is None:
        return _History()
    if str(saved.get("sweep/fingerprint")) != group.fingerprint:
        logger.warning("group %s: ignoring a checkpoint of a different configuration", group.id)
        return _History()
    try:
        sim.restore({k: v for k, v in saved.items() if not k.startswith("sweep/")})
    except (ValueError, KeyError) as error:
        logger.warning("group %s: ignoring a checkpoint it cannot resume: %s", group.id, error)
        return _History()
    logger.info("group %s: resuming from round %d of %d", group.id, sim.rounds_done, group.horizon)
    return _History.from_checkpoint(saved)


def _save_checkpoint(sim: SimulationRun, group, history: _History, path: Path) -> None:
    arrays = dict(sim.checkpoint())  # a collective with several processes: all call it
    arrays["sweep/fingerprint"] = np.asarray(group.fingerprint)
    arrays.update(history.checkpoint_arrays(len(group.cells)))
    if distributed.is_writer():
        files.save_npz(path, arrays)


def _advance(sim: SimulationRun, cfg, group, history: _History, path: Path, bar, after_chunk) -> None:
    """Run the group to its horizon one chunk at a time, recording counters and
    saving checkpoints; every decision depends on chunk counts or, in a single
    process only, on this process's clock."""
    every_chunks, every_seconds = checkpoint_cadence(cfg)
    times = sim.times
    last_save, chunks_since_save = time.monotonic(), 0
    next_record = int(np.searchsorted(times, history.times[-1], side="right")) if history.times else 0
    while not sim.done:
        before = sim.rounds_done
        sim.advance(max_chunks=1)
        chunks_since_save += 1
        bar.update(len(group.cells) * cfg.runs * (sim.rounds_done - before))
        bar.set_postfix_str(f"{group.id} {group.policy_name} t={sim.rounds_done}/{group.horizon}", refresh=False)
        # Counters at the chunk boundary past each time-grid point: the policy's
        # diagnostics over time at little cost.
        if next_record < len(times) and sim.rounds_done >= times[next_record]:
            history.record(sim)
            next_record = int(np.searchsorted(times, sim.rounds_done, side="right"))
        stop = stopping.requested()
        if not sim.done and (
            stop
            or (every_chunks is not None and chunks_since_save >= every_chunks)
            or (every_seconds is not None and time.monotonic() - last_save >= every_seconds)
        ):
            _save_checkpoint(sim, group, history, path)
            last_save, chunks_since_save = time.monotonic(), 0
        if after_chunk is not None:
            after_chunk(group.id, sim.rounds_done)
        if stop and not sim.done:  # saved above; a finished group writes its results first
            stopping.check()


def _group_metadata(cfg, group, result, session_time: float, resumed_from: int) -> dict:
    """What ``groups/gNNN.json`` holds: the group, its configuration, where and how fast it ran."""
    work = len(group.cells) * cfg.runs * (group.horizon - resumed_from)
    return {
        "id": group.id,
        "fingerprint": group.fingerprint,
        "config_fingerprint": cfg.fingerprint(),
        "policy_name": group.policy_name,
        "static": group.static,
        "params": {k: v.tolist() for k, v in group.params.items()},
        "horizon": group.horizon,
        "num_cells": len(group.cells),
        "runs": cfg.runs,
        "seed": cfg.seed,
        "precision": cfg.precision,
        "noise": group.instance.noise.label,
        "chunk_size": cfg.chunk_size,
        "diagnostics": sorted(result.diagnostics),
        "wall_time": result.wall_time,  # engine time over all sessions (up to the checkpoint)
        "session_wall_time": session_time,
        "resumed_from_round": resumed_from,
        "run_rounds_per_second": work / session_time if session_time > 0 else None,
        "device": describe_devices(),
        "versions": package_versions(),
        "finished": _now(),
    }


def run_group(cfg, group, out: Path, bar, after_chunk, description: str) -> None:
    """Simulate one cell group (resuming its checkpoint) and write its results."""
    checkpoint_path = io.checkpoint_file(out, group.id)
    precision = contextlib.nullcontext() if cfg.precision == "float32" else jax.enable_x64(True)
    with precision:
        sim = _new_simulation(cfg, group)
        history = _resume(sim, group, checkpoint_path)
        resumed_from = sim.rounds_done
        logger.info(
            "group %s: %s, K=%d, %d cells x %d runs, horizon %d",
            group.id, group.policy_name, group.num_arms, len(group.cells), cfg.runs, group.horizon,
        )  # fmt: skip
        bar.set_description_str(description, refresh=False)
        bar.update(len(group.cells) * cfg.runs * resumed_from)
        session_start = time.perf_counter()
        try:
            _advance(sim, cfg, group, history, checkpoint_path, bar, after_chunk)
        except (InvalidArmError, NaNStateError) as err:  # the cell's index means little in a sweep: its name
            cell = group.cells[err.cell]
            where = f"group {group.id}, cell {cell_label(cell.policy, cell.params)} on instance {cell.instance!r}"
            if distributed.is_writer():  # it could only replay this failure (a corrected policy is other code)
                checkpoint_path.unlink(missing_ok=True)
            raise type(err)(f"{where}: {err}", cell=err.cell) from None
        result = sim.result()
    session_time = time.perf_counter() - session_start
    meta = _group_metadata(cfg, group, result, session_time, resumed_from)
    if distributed.is_writer():
        history_arrays = {name: history.stacked(name, len(group.cells)) for name in result.diagnostics}
        arrays = io.group_arrays(
            times=result.times, diagnostic_times=np.asarray(history.times, dtype=np.int64), regret=result.regret,
            counts=result.counts, diagnostics=result.diagnostics, diagnostic_history=history_arrays,
            monitor=result.monitor,
        )  # fmt: skip
        meta["data_digest"] = files.save_npz(io.group_file(out, group.id, ".npz"), arrays)
        files.save_json(io.group_file(out, group.id, ".json"), meta)  # last: marks the group done
        checkpoint_path.unlink(missing_ok=True)
    logger.info(
        "group %s: done in %.1f s (%.3g run-rounds/s)", group.id, session_time, meta["run_rounds_per_second"] or 0
    )
