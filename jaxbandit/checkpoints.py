"""A simulation's checkpoint: its engine state as a flat dict of numpy arrays, with the
identity of the simulation it belongs to, and the checks that it fits another one.

``{"leaf_0000": ..., "leaf_0001": ..., "wall_time": (), "identity": JSON text}``: the
leaves of the engine's carry in ``jax.tree_util`` order, each ``(C, R, ...)``, cells by
runs; taken on any number of devices (the runs padded to a multiple of the device
count, :func:`fit_runs`).
"""

from __future__ import annotations

import json
from collections.abc import Mapping

import numpy as np

from jaxbandit._numbers import ArgumentError

__all__ = ["encode", "decode", "fit_runs"]

# identity entries shown with their values when they differ (the others are digests)
_SCALAR_IDENTITY = ("policy", "options", "noise", "seed", "horizon", "runs", "first_run", "dtype", "x64", "monitor", "code")


def encode(leaves: list, identity: dict, wall_time: float) -> dict:
    """The checkpoint of a carry's host ``leaves`` (numpy), its simulation's ``identity``
    (JSON-able) and the seconds simulated so far."""
    arrays = {f"leaf_{i:04d}": leaf for i, leaf in enumerate(leaves)}
    arrays["wall_time"] = np.asarray(wall_time)
    arrays["identity"] = np.asarray(json.dumps(identity, sort_keys=True))
    return arrays


def _differences(saved: dict, here: dict) -> list:
    """The identity entries that differ, a dict's by its keys (``params['alpha']``);
    those of :data:`_SCALAR_IDENTITY` with the saved value and this one's."""
    differ = []
    for k in sorted(set(saved) | set(here)):
        mine, theirs = saved.get(k), here.get(k)
        if mine == theirs:
            continue
        if isinstance(mine, dict) and isinstance(theirs, dict):
            differ += [f"{k}[{name!r}]" for name in sorted(set(mine) | set(theirs)) if mine.get(name) != theirs.get(name)]
        else:
            differ.append(f"{k} {mine!r} (here {theirs!r})" if k in _SCALAR_IDENTITY else k)
    return differ


def decode(arrays, identity: dict, leaves: list, runs: int) -> tuple[list, float]:
    """The saved leaves of ``arrays`` (a checkpoint), fitted to the carry whose leaves
    (their shapes and dtypes) are ``leaves``, and its seconds simulated.

    Args:
        arrays: what :func:`encode` returned (or a saved copy: ``np.load`` of an ``.npz``).
        identity: the identity of the simulation it is restored into.
        leaves: the carry's leaves, each ``(C, R, ...)``.
        runs: the simulation's runs (the rest of ``R`` pads them).

    Raises:
        ArgumentError: ``arrays`` is not a checkpoint, is of another simulation (naming
            what differs), or its engine state does not fit this one.
    """
    if not isinstance(arrays, Mapping):  # a dict, or np.load's NpzFile
        raise ArgumentError(
            f"restore takes what checkpoint() returned (a dict of arrays), got {type(arrays).__name__}.", argument="arrays"
        )
    if "identity" not in arrays:
        raise ArgumentError(
            "the checkpoint does not say which simulation it belongs to (it has no 'identity' entry), "
            "so it cannot be checked against this one.",
            argument="arrays",
        )
    try:
        saved_identity = json.loads(str(arrays["identity"]))
    except json.JSONDecodeError:
        saved_identity = None
    if not isinstance(saved_identity, dict):
        raise ArgumentError("the checkpoint's 'identity' entry is not the JSON record checkpoint() writes.", argument="arrays")
    saved_identity.setdefault("noise", "gaussian")  # checkpoints that name no family are Gaussian ones
    differ = _differences(saved_identity, identity)
    if differ:
        raise ArgumentError(f"the checkpoint is of another simulation; they differ in {', '.join(differ)}.", argument="arrays")
    saved_names = sorted(k for k in arrays if k.startswith("leaf_"))
    if saved_names != [f"leaf_{i:04d}" for i in range(len(leaves))]:
        raise ArgumentError(
            f"the checkpoint holds {len(saved_names)} engine arrays, this simulation {len(leaves)} "
            "(a different engine state layout).",
            argument="arrays",
        )
    if "wall_time" not in arrays:  # checked before anything is restored
        raise ArgumentError("the checkpoint has no 'wall_time' entry, which checkpoint() always writes.", argument="arrays")
    wall_time = np.asarray(arrays["wall_time"])
    if wall_time.shape != () or not np.issubdtype(wall_time.dtype, np.floating):
        raise ArgumentError(f"the checkpoint's 'wall_time' is not one number of seconds: {wall_time!r}.", argument="arrays")
    restored = []
    for i, leaf in enumerate(leaves):
        saved = np.asarray(arrays[f"leaf_{i:04d}"])
        fitted = fit_runs(saved, leaf.shape[1], runs) if saved.ndim >= 2 else saved
        if fitted.shape != leaf.shape or fitted.dtype != leaf.dtype:
            raise ArgumentError(
                f"checkpoint leaf {i} has shape {saved.shape} {saved.dtype}, expected {leaf.shape} {leaf.dtype} "
                f"(or another run padding of {runs} runs).",
                argument="arrays",
            )
        restored.append(fitted)
    return restored, float(wall_time)


def fit_runs(saved: np.ndarray, padded_runs: int, runs: int) -> np.ndarray:
    """A checkpoint leaf ``(C, R', ...)`` taken on another device count, as
    ``(C, padded_runs, ...)``.  Only the first ``runs`` runs are results: the rest pad
    the runs to a multiple of the device count, are simulated and dropped, so they are
    cut, or filled with copies of run 0 (no run's results depend on another's)."""
    if saved.shape[1] < runs:
        return saved  # not a padding difference: reported as a shape mismatch
    if saved.shape[1] >= padded_runs:
        return saved[:, :padded_runs]
    filler = np.repeat(saved[:, :1], padded_runs - saved.shape[1], axis=1)
    return np.concatenate([saved, filler], axis=1)
