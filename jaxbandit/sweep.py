"""Run a sweep configuration to a directory: resumable, checkpointed, nothing lost.

``run(config, out_dir)`` executes every cell group of a :class:`~jaxbandit.config.SweepConfig`
(instances x policies x hyper-parameters x horizons).  A group is one compiled program:
its instances are stacked into a batch and its numeric hyper-parameters are passed as
per-cell arrays to :class:`~jaxbandit.runner.SimulationRun`, so a grid costs one
compile, not one per value.

Nothing is lost: each group's results are written atomically when it finishes, and a
running group saves the engine state at chunk boundaries (every N chunks and/or M
seconds).  Running the same configuration on the same directory again skips finished
groups and continues a killed group from its last checkpoint; because the engine's
noise depends only on (seed, instance, run, round), the final results are bit-identical
to an uninterrupted run.  A different configuration in an existing directory is refused.
"""

from __future__ import annotations

import contextlib
import dataclasses
import datetime
import logging
import os
import platform
import sys
import time
from pathlib import Path
from typing import Callable, Optional, Union

import jax
import numpy as np

from jaxbandit import config as config_module
from jaxbandit import instances as instances_module
from jaxbandit import io
from jaxbandit import policies as policies_module
from jaxbandit.engine import policy_key
from jaxbandit.runner import SimulationRun

__all__ = ["run", "SweepMismatchError", "describe_devices", "package_versions"]

logger = logging.getLogger("jaxbandit.sweep")


class SweepMismatchError(ValueError):
    """The output directory holds results of a different configuration."""


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


def run(
    config: Union[str, os.PathLike, dict, config_module.SweepConfig],
    out_dir: Union[str, os.PathLike],
    *,
    progress: bool = True,
    after_chunk: Optional[Callable[[str, int], None]] = None,
) -> "io.SweepResults":
    """Run (or resume) a sweep and return its results.

    Args:
        config: a TOML path, a config dict, or a :class:`~jaxbandit.config.SweepConfig`.
        out_dir: the sweep directory (created if missing; resumed if it holds this sweep).
        progress: show a tqdm progress bar on stderr (cells done, rounds, run-rounds/s,
            ETA).  Progress is also logged on the ``jaxbandit.sweep`` logger.
        after_chunk: optional ``callback(group_id, rounds_done)`` called after every
            chunk (after any checkpoint); an exception it raises stops the sweep, which
            can then be resumed.

    Returns:
        :func:`jaxbandit.io.load` of ``out_dir``.

    Raises:
        ConfigError: invalid configuration.
        SweepMismatchError: ``out_dir`` holds a different sweep, or unrelated files.
    """
    cfg = config_module.load(config)
    out = Path(out_dir)
    groups = cfg.plan()
    writer = jax.process_index() == 0  # multi-host: one process writes
    if writer:
        _prepare_directory(cfg, groups, out, config)

    total_work = sum(len(g.cells) * cfg.runs * g.horizon for g in groups)
    total_cells = sum(len(g.cells) for g in groups)
    bar = _progress_bar(total_work, progress)
    cells_done = 0
    try:
        for number, group in enumerate(groups):
            meta_path = out / "groups" / f"{group.id}.json"
            if meta_path.is_file() and io.read_json(meta_path).get("fingerprint") == group.fingerprint:
                cells_done += len(group.cells)
                bar.set_description_str(f"cells {cells_done}/{total_cells}", refresh=False)
                bar.update(len(group.cells) * cfg.runs * group.horizon)
                logger.info("group %s (%s) already finished; skipped", group.id, group.policy_name)
                continue
            _run_group(cfg, group, out, bar, after_chunk, writer, f"cells {cells_done}/{total_cells}")
            cells_done += len(group.cells)
            bar.set_description_str(f"cells {cells_done}/{total_cells}", refresh=False)
            logger.info("group %d/%d finished (%d/%d cells)", number + 1, len(groups), cells_done, total_cells)
    finally:
        bar.close()
    results = io.load(out)
    if writer:
        io.write_summary_csv(results)
    return results


def _prepare_directory(cfg, groups, out: Path, config) -> None:
    manifest_path = out / io.MANIFEST
    fingerprint = cfg.fingerprint()
    if manifest_path.is_file():
        manifest = io.read_json(manifest_path)
        if manifest.get("fingerprint") != fingerprint:
            old, new = manifest.get("config", {}), cfg.raw
            changed = sorted(k for k in set(old) | set(new) if k != "checkpoint" and old.get(k) != new.get(k))
            detail = f" (changed keys: {', '.join(changed)})" if changed else " (the resolved instances or registered policies differ)"
            raise SweepMismatchError(
                f"{out} holds results of a different sweep configuration{detail}. Refusing to mix "
                f"them: use another output directory, or delete {out} to start over."
            )
        return
    if out.exists() and any(out.iterdir()):
        raise SweepMismatchError(f"{out} exists, is not empty and is not a sweep directory ({io.MANIFEST} not found).")
    if isinstance(config, (str, os.PathLike)):
        io.save_text(out / "config.toml", Path(config).read_text(encoding="utf-8"))
    io.save_json(
        manifest_path,
        {
            "format": io.FORMAT_VERSION,
            "fingerprint": fingerprint,
            "name": cfg.name,
            "source": cfg.source,
            "config": cfg.raw,
            "instances": cfg.instance_table(),
            "groups": [
                {
                    "id": g.id,
                    "fingerprint": g.fingerprint,
                    "policy_name": g.policy_name,
                    "static": g.static,
                    "horizon": g.horizon,
                    "num_arms": g.num_arms,
                    "cells": [dataclasses.asdict(c) for c in g.cells],
                }
                for g in groups
            ],
            "created": _now(),
            "versions": package_versions(),
        },
    )


def _now() -> str:
    return datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")


class _NoBar:
    def update(self, n):
        pass

    def set_description_str(self, *args, **kwargs):
        pass

    def set_postfix_str(self, *args, **kwargs):
        pass

    def close(self):
        pass


def _progress_bar(total: int, enabled: bool):
    if not enabled:
        return _NoBar()
    from tqdm import tqdm

    return tqdm(total=total, unit="run-rounds", unit_scale=True, dynamic_ncols=True, smoothing=0.05, file=sys.stderr)


def _resumed(sim, saved: dict, group_id: str) -> bool:
    """Restore ``sim`` from a checkpoint of its own configuration; False, with a warning,
    if the engine state has another layout (a checkpoint from another jaxbandit
    version): the group then starts over and, its results depending only on the seed,
    ends the same."""
    try:
        sim.restore({k: v for k, v in saved.items() if not k.startswith("sweep/")})
    except (ValueError, KeyError) as error:
        logger.warning("group %s: ignoring a checkpoint this version cannot resume (%r)", group_id, error)
        return False
    return True


def _current_diagnostics(sim: SimulationRun) -> dict:
    """``{name: (C, runs)}`` policy counters now (between chunks)."""
    return sim.diagnostics()


def _run_group(cfg, group, out: Path, bar, after_chunk, writer: bool, description: str) -> None:
    cell_policies = [policies_module.make(group.policy_name, **kw) for kw in group.cell_kwargs]
    if len({policy_key(p) for p in cell_policies}) != 1:
        # plan() puts cells in one group only if their policies compute the same thing.
        raise RuntimeError(f"group {group.id}: its cells' policies differ; the sweep plan is inconsistent.")
    traced = list(cell_policies[0].params)
    params = {k: np.asarray([p.params[k] for p in cell_policies], dtype=np.float64) for k in traced}
    instance = instances_module.stack([cfg.instances[c.instance_index].instance for c in group.cells])
    noise_index = np.asarray([c.instance_index for c in group.cells])
    times = cfg.times_for(group.horizon)
    num_cells = len(group.cells)
    checkpoint_path = out / "checkpoints" / f"{group.id}.npz"
    precision = contextlib.nullcontext() if cfg.precision == "float32" else jax.enable_x64(True)

    with precision:
        sim = SimulationRun(
            cell_policies[0], instance, group.horizon, cfg.runs, cfg.seed, times,
            params=params, noise_index=noise_index, dtype=cfg.precision,
            chunk_size=cfg.chunk_size, solve_batch=cfg.solve_batch,
        )  # fmt: skip
        diagnostic_times: list = []
        history: dict = {}
        resumed_from = 0
        if checkpoint_path.is_file():
            saved = io.read_npz(checkpoint_path)
            if str(saved.get("sweep/fingerprint")) != group.fingerprint:
                logger.warning("group %s: ignoring a checkpoint of a different configuration", group.id)
            elif _resumed(sim, saved, group.id):
                diagnostic_times = saved["sweep/diagnostic_times"].tolist()
                history = {
                    k[len("sweep/history/"):]: list(v.T) for k, v in saved.items() if k.startswith("sweep/history/")
                }
                resumed_from = sim.rounds_done
                logger.info("group %s: resuming from round %d of %d", group.id, resumed_from, group.horizon)
        logger.info(
            "group %s: %s, K=%d, %d cells x %d runs, horizon %d",
            group.id, group.policy_name, group.num_arms, num_cells, cfg.runs, group.horizon,
        )  # fmt: skip
        bar.set_description_str(description, refresh=False)
        bar.update(num_cells * cfg.runs * resumed_from)

        def record_diagnostics():
            now = _current_diagnostics(sim)
            diagnostic_times.append(sim.rounds_done)
            for name, value in now.items():
                history.setdefault(name, []).append(value.astype(np.float64).mean(axis=1))

        def save_checkpoint():
            arrays = dict(sim.checkpoint())
            arrays["sweep/fingerprint"] = np.asarray(group.fingerprint)
            arrays["sweep/diagnostic_times"] = np.asarray(diagnostic_times, dtype=np.int64)
            for name, values in history.items():
                arrays[f"sweep/history/{name}"] = _stack_history(values, num_cells)
            if writer:
                io.save_npz(checkpoint_path, arrays)

        every_chunks, every_seconds = cfg.checkpoint_every_chunks, cfg.checkpoint_every_seconds
        if jax.process_count() > 1 and every_seconds is not None:
            # Hosts must take the same checkpoint decisions (gathering the state is a
            # collective); their clocks differ, so count chunks instead of seconds.
            every_chunks, every_seconds = every_chunks or 100, None
        session_start = time.perf_counter()
        last_save, chunks_since_save = time.monotonic(), 0
        next_record = int(np.searchsorted(times, diagnostic_times[-1], side="right")) if diagnostic_times else 0
        while not sim.done:
            before = sim.rounds_done
            sim.advance(max_chunks=1)
            chunks_since_save += 1
            bar.update(num_cells * cfg.runs * (sim.rounds_done - before))
            bar.set_postfix_str(f"{group.id} {group.policy_name} t={sim.rounds_done}/{group.horizon}", refresh=False)
            # Counters at the chunk boundary past each time-grid point: the policy's
            # diagnostics over time (e.g. lp_explore's case mix) at little cost.
            if next_record < len(times) and sim.rounds_done >= times[next_record]:
                record_diagnostics()
                next_record = int(np.searchsorted(times, sim.rounds_done, side="right"))
            if not sim.done and (
                (every_chunks is not None and chunks_since_save >= every_chunks)
                or (every_seconds is not None and time.monotonic() - last_save >= every_seconds)
            ):
                save_checkpoint()
                last_save, chunks_since_save = time.monotonic(), 0
            if after_chunk is not None:
                after_chunk(group.id, sim.rounds_done)
        result = sim.result()

    arrays = {
        "times": result.times,
        "regret": result.regret,
        "counts": result.counts,
        "diagnostic_times": np.asarray(diagnostic_times, dtype=np.int64),
    }
    for name, value in result.diagnostics.items():
        arrays[f"diagnostics/{name}"] = value
        arrays[f"diagnostic_history/{name}"] = _stack_history(history.get(name, []), num_cells)
    session_time = time.perf_counter() - session_start
    work = num_cells * cfg.runs * (group.horizon - resumed_from)
    meta = {
        "id": group.id,
        "fingerprint": group.fingerprint,
        "config_fingerprint": cfg.fingerprint(),
        "policy_name": group.policy_name,
        "static": group.static,
        "params": {k: v.tolist() for k, v in params.items()},
        "horizon": group.horizon,
        "num_cells": num_cells,
        "runs": cfg.runs,
        "seed": cfg.seed,
        "precision": cfg.precision,
        "chunk_size": cfg.chunk_size,
        "diagnostics": sorted(result.diagnostics),
        "wall_time": sim.wall_time,  # engine time over all sessions (up to the checkpoint)
        "session_wall_time": session_time,
        "resumed_from_round": resumed_from,
        "run_rounds_per_second": work / session_time if session_time > 0 else None,
        "device": describe_devices(),
        "versions": package_versions(),
        "finished": _now(),
    }
    if writer:
        io.save_npz(out / "groups" / f"{group.id}.npz", arrays)
        io.save_json(out / "groups" / f"{group.id}.json", meta)  # last: marks the group done
        checkpoint_path.unlink(missing_ok=True)
    logger.info(
        "group %s: done in %.1f s (%.3g run-rounds/s)", group.id, session_time, meta["run_rounds_per_second"] or 0
    )


def _stack_history(values: list, num_cells: int) -> np.ndarray:
    """``(C, D)`` float64 from a list of ``D`` arrays of shape ``(C,)``."""
    if not values:
        return np.zeros((num_cells, 0), np.float64)
    return np.stack(values, axis=1).astype(np.float64)
