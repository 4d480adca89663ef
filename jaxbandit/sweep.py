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

Beyond one process: ``run(..., shard="I/N")`` runs only shard ``I`` of the groups
(:mod:`jaxbandit.shards`), so independent jobs fill one directory; under
``jax.distributed`` (:mod:`jaxbandit.distributed`) every process calls ``run`` and
they act as one: the same decisions everywhere, process 0 alone writes.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import logging
import os
import sys
from pathlib import Path
from typing import Callable, Optional, Union

import numpy as np
from tqdm import tqdm

from jaxbandit import config as config_module
from jaxbandit import distributed, files, io, shards, stopping, summary
from jaxbandit._numbers import boolean, function, path
from jaxbandit.base import options_record
from jaxbandit.config.records import encode_numbers
from jaxbandit.fingerprint import json_digest
from jaxbandit.group_run import checkpoint_cadence, run_group

__all__ = ["run", "SweepMismatchError"]

logger = logging.getLogger("jaxbandit.sweep")


class SweepMismatchError(ValueError):
    """The output directory holds results of a different configuration."""


def run(
    config: Union[str, os.PathLike, dict, config_module.SweepConfig],
    out_dir: Union[str, os.PathLike],
    *,
    shard: Union[str, shards.Shard, tuple, None] = None,
    progress: bool = True,
    after_chunk: Optional[Callable[[str, int], None]] = None,
) -> "io.SweepResults":
    """Run (or resume) a sweep, or one shard of it, and return what the directory holds.

    Args:
        config: a TOML path, a config dict, or a :class:`~jaxbandit.config.SweepConfig`.
        out_dir: the sweep directory (created if missing; resumed if it holds this sweep).
        shard: ``"I/N"`` (0-based) or ``(I, N)``: run only shard ``I`` of ``N`` of the
            cell groups (see :mod:`jaxbandit.shards`); ``None`` runs them all.
        progress: show a tqdm progress bar on stderr (cells done, rounds, run-rounds/s,
            ETA).  Progress is also logged on the ``jaxbandit.sweep`` logger.
        after_chunk: optional ``callback(group_id, rounds_done)`` called after every
            chunk (after any checkpoint); an exception it raises stops the sweep, which
            can then be resumed.

    Returns:
        :func:`jaxbandit.io.load` of ``out_dir``: every finished group, this shard's
        and others'; ``results.missing`` lists the groups not finished yet.

    Raises:
        ConfigError: invalid configuration.
        ValueError: a bad ``shard``.
        SweepMismatchError: ``out_dir`` holds a different sweep, or unrelated files.
        DistributedMismatchError: the processes of a multi-process run disagree on
            the configuration or the shard (raised in every process).
        jaxbandit.stopping.Stopped: a SIGINT or SIGTERM stopped it at a safe point
            (a ``KeyboardInterrupt``; see :mod:`jaxbandit.stopping`).
    """
    with stopping.on_signals():
        out, groups, sharded = _run(config, out_dir, shard, progress, after_chunk)
    # every group of this run is written: a signal from here on stops at once (a stop
    # taken after the summary would say that computing was left to resume)
    distributed.barrier("jaxbandit: sweep results written")  # others read what process 0 wrote
    results = _load_and_summarize(out, sharded) if distributed.is_writer() else io.load(out)
    if results.missing:
        logger.warning("%d of %d groups not finished yet: %s", len(results.missing), len(groups),
                       "; ".join(results.describe_missing()))  # fmt: skip
    return results


def _run(config, out_dir, shard, progress: bool, after_chunk) -> tuple:
    """Run this process's groups: ``(out, the plan's groups, whether sharded)``."""
    out = path("out_dir", out_dir)
    progress = boolean("progress", progress)
    if after_chunk is not None:
        function("after_chunk", after_chunk, "(group_id, rounds_done) or None")
    cfg, shard = _agreed_setup(config, shard)
    groups = cfg.plan()
    # The writer's marker comes before the manifest is read or made: a run that stops
    # before its first result removes the manifest only while no other marker is there.
    marker = _marker(out) if distributed.is_writer() else None
    try:
        created = []
        distributed.run_on_process_zero(lambda: created.append(_prepare_directory(cfg, groups, out, config)), (SweepMismatchError,))
        mine = groups if shard is None else shards.select(groups, cfg.runs, shard)
        if shard is not None:
            logger.info("shard %s: groups %s of %d", shard, ", ".join(g.id for g in mine) or "none", len(groups))
        # A single unsharded run that stops before any result leaves no manifest behind:
        # the same directory then serves the corrected configuration (a shard or a process
        # of several cannot tell whether others are running under it, and nor can a run
        # that finds another's marker: it may be computing its first result).
        alone = created == [True] and shard is None and not distributed.is_multiprocess()
        _run_mine(cfg, out, mine, progress, after_chunk, marker if alone else None)
    finally:
        if marker is not None:
            marker.unlink(missing_ok=True)
    return out, groups, shard is not None


def _marker(out: Path) -> Optional[Path]:
    """This run's :func:`files.running_marker` in ``out`` (made if it can be), or None
    where ``out`` cannot be a directory (:func:`_prepare_directory` says why)."""
    try:
        out.mkdir(parents=True, exist_ok=True)
        return files.running_marker(out)
    except OSError:
        return None


def _run_mine(cfg, out: Path, mine: list, progress: bool, after_chunk, alone_marker) -> None:
    """Run the groups ``mine``.  A run alone in ``out`` (``alone_marker``: its marker,
    else None) that stops before any result removes the manifest, and the folders left
    empty, while no other run uses ``out``."""
    finished = _finished(out, mine)
    bar = tqdm(
        total=sum(len(g.cells) * cfg.runs * g.horizon for g in mine), disable=not (progress and distributed.is_writer()),
        unit="run-rounds", unit_scale=True, dynamic_ncols=True, smoothing=0.05, file=sys.stderr,
    )  # fmt: skip
    try:
        _run_groups(cfg, out, mine, finished, bar, after_chunk)
        stopping.check()  # asked for after the last group's last safe point
    except BaseException:
        unused = not (files.visible_entries(out / io.GROUPS) or files.visible_entries(out / io.CHECKPOINTS))
        if alone_marker is not None and unused and files.remove_unless_others_running(out, alone_marker, ("config.toml", io.MANIFEST)):
            for name in (io.GROUPS, io.CHECKPOINTS):  # empty: a failed group's checkpoints are gone
                with contextlib.suppress(OSError):
                    (out / name).rmdir()
        raise
    finally:
        bar.close()


def _load_and_summarize(out: Path, sharded: bool) -> "io.SweepResults":
    """:func:`io.load` of ``out``, its ``summary.csv`` written.  Shards that finish
    together each write it, from their own load: a shard's write can land after
    another's of more groups, so a shard loads and writes again while groups finished
    during its turn (the last writer then loaded after every group it missed)."""
    while True:
        listed = _finished_listing(out)
        results = io.load(out)
        summary.write_summary_csv(results)
        if not sharded or _finished_listing(out) == listed:
            return results


def _finished_listing(out: Path) -> list:
    """The finished groups' metadata files (each written last, as its group finishes)."""
    return sorted(path.name for path in (out / io.GROUPS).glob("*.json"))


def _run_groups(cfg, out: Path, mine: list, finished: list, bar, after_chunk) -> None:
    """Run the groups of ``mine`` not ``finished``; a signal's stop request is taken
    after a chunk (see :func:`jaxbandit.group_run.run_group`) or before a group."""
    total_cells, cells_done = sum(len(g.cells) for g in mine), 0
    for number, (group, done) in enumerate(zip(mine, finished)):
        if done:
            bar.update(len(group.cells) * cfg.runs * group.horizon)
            logger.info("group %s (%s) already finished; skipped", group.id, group.policy_name)
            if distributed.is_writer():  # left by a run stopped between the results and its removal
                io.checkpoint_file(out, group.id).unlink(missing_ok=True)
        else:
            stopping.check()
            run_group(cfg, group, out, bar, after_chunk, f"cells {cells_done}/{total_cells}")
        cells_done += len(group.cells)
        bar.set_description_str(f"cells {cells_done}/{total_cells}", refresh=False)
        if not done:
            logger.info("group %d/%d finished (%d/%d cells)", number + 1, len(mine), cells_done, total_cells)


def _agreed_setup(config, shard) -> tuple:
    """The configuration and the shard, checked to be the same in every process.

    A process whose configuration fails to load still takes part in the comparison,
    so that no process waits for it in a collective.
    """
    try:
        cfg = config_module.load(config)
        shard = None if shard is None else shards.parse(shard)
        every_chunks, every_seconds = checkpoint_cadence(cfg)
        identity = json.dumps(
            {"config": cfg.fingerprint(), "policies": cfg.resolved_policies(), "settings": cfg.resolved_settings(),
             "shard": str(shard),
             "checkpoint_every_chunks": every_chunks, "checkpoint_every_seconds": every_seconds}, sort_keys=True,
        )  # fmt: skip
        failure = None
    except (config_module.ConfigError, ValueError) as error:
        identity, failure = f"invalid: {error}", error
    distributed.agree("the sweep configuration, the shard or the checkpoint cadence", identity)
    if failure is not None:
        raise failure
    return cfg, shard


def _finished(out: Path, groups) -> list:
    """Which ``groups`` are finished on disk, as process 0 sees it (every process
    must skip the same ones).  The test is :func:`jaxbandit.io.load`'s: a group whose
    arrays are gone is run again rather than skipped and reported missing forever."""
    seen = np.zeros(len(groups), dtype=np.bool_)
    if distributed.is_writer():
        for i, group in enumerate(groups):
            seen[i] = io.group_finished(out, group.id, group.fingerprint)
    return [bool(v) for v in distributed.broadcast_array(seen)]


# -- the sweep directory ------------------------------------------------------------


def _prepare_directory(cfg, groups, out: Path, config) -> bool:
    """Create the manifest (True), or check that the directory holds this sweep (False).

    Several jobs (shards of a job array) may start at the same moment on an empty
    directory: the manifest is created atomically and depends only on the
    configuration, so one job creates it and the others find the same one.
    """
    manifest_path = out / io.MANIFEST
    # out itself, or where it is made (a link to nothing is there, and no directory)
    existing = next(p for p in (out, *out.absolute().parents) if os.path.lexists(p))
    if not existing.is_dir():
        what = f"a link to {os.readlink(existing)}, which does not exist" if not existing.exists() else "not a directory"
        where = f"exists and is {what}" if existing == out else f"cannot be made: {existing} is {what}"
        raise SweepMismatchError(f"{out} {where}; a sweep writes a directory.")
    if not manifest_path.is_file():
        # Files other than a racing job's temporaries and the empty folders a run leaves
        # until it has removed its manifest, with no manifest (re-checked: a racing job
        # creates the manifest before anything else), are not a sweep.
        if _entries_beside_a_sweep(out) and not manifest_path.is_file():
            raise SweepMismatchError(
                f"{out} exists, is not empty and is not a sweep directory ({io.MANIFEST} not found)."
            )
        if files.create_exclusive_json(manifest_path, _manifest(cfg, groups)):
            _save_config_text(out, config)
            return True
    manifest = files.read_json(manifest_path)
    if not isinstance(manifest, dict):  # not a manifest of any version
        raise SweepMismatchError(
            f"{manifest_path} is damaged: a sweep manifest is a JSON dict, got {type(manifest).__name__}. "
            f"Use another output directory, or delete {out} to start over."
        )
    problem = _mismatch(cfg, manifest, out, groups)
    if problem is not None:
        raise SweepMismatchError(
            f"{problem}. Refusing to mix them: use another output directory, or delete {out} to start over."
        )
    if not (out / "config.toml").is_file():  # its creator may have been stopped before writing it
        _save_config_text(out, config)
    return False


def _entries_beside_a_sweep(out: Path) -> list:
    """``out``'s visible entries but an empty results or checkpoints folder."""
    empty = {name for name in (io.GROUPS, io.CHECKPOINTS) if (out / name).is_dir() and not any((out / name).iterdir())}
    return [name for name in files.visible_entries(out) if name not in empty]


# Settings that change how a sweep runs, never what it records (chunk_size does: the
# diagnostics' history is taken at chunk boundaries)
_RESULT_FREE = ("solve_batch",)


def _mismatch(cfg, manifest, out: Path, groups) -> Optional[str]:
    """Why the directory's manifest is not this configuration's, or None.  The code
    that computes the results counts only while some group is left to compute: a
    finished sweep is read back under any code."""
    if reason := io.other_version(manifest):
        return f"{out} was {reason}"
    if manifest.get("fingerprint") != cfg.fingerprint():
        old, new = manifest.get("config", {}), cfg.raw
        # as the fingerprint reads them (json_digest): 2 and 2.0 are other text (a label says alpha=2.0)
        changed = sorted(k for k in set(old) | set(new) if k != "checkpoint" and json_digest(old.get(k)) != json_digest(new.get(k)))
        edited = None if changed else _edited_file(cfg, manifest)
        if edited is not None:
            return f"{out} holds results of the same configuration computed otherwise: {edited}"
        detail = f" (changed keys: {', '.join(changed)})" if changed else " (the resolved instances or registered policies differ)"
        if changed and set(changed) <= set(_RESULT_FREE):
            was = ", ".join(f"{k} = {old[k]!r}" if k in old else f"{k} left out" for k in changed)
            detail = (
                f" (changed keys: {', '.join(changed)}; such settings change no results, but a directory keeps those "
                f"it was started with: resume with {was})"
            )
        return f"{out} holds results of a different sweep configuration{detail}"
    recorded = manifest.get("resolved_settings") or {}
    code_differs = any(recorded.get(k) != cfg.resolved_settings()[k] for k in _COMPUTING)
    unfinished = code_differs and any(not io.group_finished(out, g.id, g.fingerprint) for g in groups)  # reads them
    detail = _resolved_difference(cfg, manifest, compare_code=unfinished)
    return None if detail is None else f"{out} holds results of the same configuration computed otherwise: {detail}"


def _edited_file(cfg, manifest: dict) -> Optional[str]:
    """Which instance file has other contents than the manifest records, or None."""
    recorded = manifest.get("instances")
    for spec in cfg.instances:
        before = (recorded.get(spec.label) or {}).get("file") if isinstance(recorded, dict) else None
        if spec.file is not None and isinstance(before, dict) and before != spec.file:
            return (
                f"instance {spec.label!r} is read from {spec.file['path']}, whose contents changed (SHA-256 "
                f"{str(before.get('sha256'))[:12]}... when those results were computed, now {spec.file['sha256'][:12]}...)"
            )
    return None


# The settings of what computes the results, compared only while a group is left to compute
_COMPUTING = ("code", "x64")


def _resolved_difference(cfg, manifest: dict, compare_code: bool) -> Optional[str]:
    """What resolved otherwise than the manifest records, or None: a policy's
    parameters, options or code (a factory default that changed, an edited function,
    another jaxbandit or Python version), or a run setting resolved from a default."""
    recorded, resolved = manifest.get("resolved_policies"), cfg.resolved_policies()
    if recorded != resolved:
        for i, (old, new) in enumerate(zip(recorded or [], resolved)):
            for kwargs, before, now in zip(cfg.policies[i].grid, old.get("grid", []), new["grid"]):
                if before == now:
                    continue
                label = f"policies[{i}] ({new['name']}{f' with {kwargs}' if kwargs else ''})"
                if _without_code(before) == _without_code(now):
                    return f"the code of {label} changed (its functions were edited, or jaxbandit or Python is another version)"
                return f"{label} resolved to {_without_code(before)}, now to {_without_code(now)} (a factory default changed?)"
        return "the policies differ"
    recorded, resolved = manifest.get("resolved_settings") or {}, cfg.resolved_settings()
    changed = sorted(
        k for k in set(recorded) | set(resolved) if recorded.get(k) != resolved.get(k) and (compare_code or k not in _COMPUTING)
    )
    if changed:
        causes = {
            "monitor": "the monitor's code (an edited monitor, or another jaxbandit or Python version)",
            "code": (
                "the code that computes the results (another jaxbandit, jax or jaxlib version, or an edited jaxbandit "
                "source file)"
            ),
            "x64": (
                f"JAX's 64-bit mode (JAX_ENABLE_X64, {recorded.get('x64')} then, {resolved.get('x64')} now, under which "
                "a policy's float64 numpy values compute otherwise)"
            ),
        }
        named = [causes.get(k, f"{k}, resolved from a default that changed (another jaxbandit version?)") for k in changed]
        computing = "; the finished groups still load" if any(k in _COMPUTING for k in changed) else ""
        return "they differ in " + "; ".join(named) + computing
    return None


def _without_code(record: dict) -> dict:
    """One grid point of a resolved-policies record without its code digest."""
    return {key: value for key, value in record.items() if key != "code"}


def _save_config_text(out: Path, config) -> None:
    if isinstance(config, (str, os.PathLike)):
        files.save_text(out / "config.toml", Path(config).read_text(encoding="utf-8"))


def _manifest(cfg, groups) -> dict:
    """The manifest: a function of the configuration only (whichever job writes it)."""
    return {
        "format": io.FORMAT_VERSION,
        "fingerprint": cfg.fingerprint(),
        "name": cfg.name,
        "config": cfg.raw,
        "instances": cfg.instance_table(),
        "resolved_policies": cfg.resolved_policies(),
        "resolved_settings": cfg.resolved_settings(),
        "groups": [
            {
                "id": g.id,
                "fingerprint": g.fingerprint,
                "policy_name": g.policy_name,
                "static": g.static,
                "horizon": g.horizon,
                "num_arms": g.num_arms,
                "options": options_record(g.policy.options),  # one program: its cells' static options
                # each cell's numeric hyper-parameters as resolved, defaults included
                "cells": [
                    {**dataclasses.asdict(c), "resolved_params": encode_numbers({k: float(v[i]) for k, v in g.params.items()})}
                    for i, c in enumerate(g.cells)
                ],
            }
            for g in groups
        ],
    }


