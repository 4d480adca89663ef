"""Where a simulation's arrays live: one device, or the runs axis split over several.

With several JAX devices (or processes, under ``jax.distributed``) the runs axis is
sharded over all of them; results are identical to one device because each run's
noise depends only on its own index.  With several processes every process runs the
same host code on the same inputs: each computes the full (small) initial arrays,
keeps its own devices' slices of them, and gathers results with ``process_allgather``.
The chunk step runs on each device over its own runs (:func:`per_device`), so that no
round waits for another device.  On one device the runs may also advance in groups
(:func:`split_runs`, :func:`joined_runs`), each its own call of the chunk step.
"""

from __future__ import annotations

from typing import Sequence

import jax
import jax.numpy as jnp
import numpy as np

__all__ = ["Placement", "joined_runs", "per_device", "per_run", "split_runs", "to_host"]

_RUNS = jax.sharding.PartitionSpec(None, "runs")  # (C, R, ...) split along R
_WHOLE = jax.sharding.PartitionSpec()  # a copy on every device


def to_host(array) -> np.ndarray:
    """A (possibly sharded) device array as one numpy array; with several processes
    the shards of the other processes are gathered."""
    if jax.process_count() > 1:
        from jax.experimental import multihost_utils

        return np.asarray(multihost_utils.process_allgather(array, tiled=True))
    return np.asarray(array)


def _global(value, sharding) -> jax.Array:
    """``value``, computed identically in every process, as one array over ``sharding``.

    Each process supplies the slices its own devices hold, so no data crosses
    processes (``jax.device_put`` would compare the value across processes first).
    """
    host = np.asarray(value)
    return jax.make_array_from_callback(host.shape, sharding, lambda index: host[index])


class Placement:
    """The runs of a simulation over ``devices``: arrays ``(C, R, ...)`` split along R.

    The runs are padded to a multiple of the device count (``padded_runs``): padded runs
    are real runs with larger indices, simulated and then dropped, so they change
    nothing.
    """

    def __init__(self, devices: Sequence, runs: int):
        self.devices = tuple(devices)
        self.padded_runs = -(-runs // len(self.devices)) * len(self.devices)
        self.mesh = None  # the mesh: None on one device
        if len(self.devices) > 1:
            self.mesh = jax.sharding.Mesh(np.array(self.devices), ("runs",))
            self._sharding = jax.sharding.NamedSharding(self.mesh, _RUNS)
            self._replicated = jax.sharding.NamedSharding(self.mesh, _WHOLE)
        else:  # the one device named, which need not be JAX's default one
            self._sharding = self._replicated = jax.sharding.SingleDeviceSharding(self.devices[0])
        # Devices of other processes: every argument of the compiled chunk must be an
        # array over all of them (a local array would be compared across processes at
        # every call).
        self._multiprocess = any(d.process_index != jax.process_index() for d in self.devices)

    def shard(self, array):
        """``(C, R, ...)`` split over the devices along the runs axis."""
        return self._placed(array, self._sharding)

    def replicate(self, tree):
        """A copy of ``tree`` on every device."""
        return jax.tree_util.tree_map(lambda x: self._placed(x, self._replicated), tree)

    def shard_carry(self, carry):
        """An engine carry: per-run leaves (``ndim >= 2``) sharded, the rest a copy on
        every device, as the chunk step returns them (:func:`per_device`): a carry of
        other shardings would have its next chunk traced and compiled again."""
        return jax.tree_util.tree_map(lambda x: self._placed(x, self._sharding if per_run(x) else self._replicated), carry)

    def _placed(self, array, sharding) -> jax.Array:
        return _global(array, sharding) if self._multiprocess else jax.device_put(array, sharding)

    def computing(self):
        """A context in which what is computed from host values (a simulation's initial
        state) is computed on the first of the devices this process holds, not on JAX's
        default one."""
        local = [d for d in self.devices if d.process_index == jax.process_index()]
        return jax.default_device(local[0] if local else None)


def per_run(leaf) -> bool:
    """Whether an engine carry's leaf holds one value per run (``(C, R, ...)``), not one
    for the whole simulation (the round, the next recording time)."""
    return leaf.ndim >= 2


def per_device(run_chunk, mesh):
    """The engine's chunk step ``(carry, t0, horizon, times, noise_keys, policy_keys,
    env, ctx) -> carry`` run by each device of ``mesh`` on its own runs (``shard_map``).

    A run's rounds never read another run, but the partitioner cannot see that through
    a round's compaction (the runs needing an LP gathered into buffers): left to it,
    every round of an LP policy would gather and reduce across devices.  Each device
    compacts its own runs instead; a run's answer does not depend on its buffer."""

    def call(carry, t0, horizon, times, noise_keys, policy_keys, env, ctx):
        carry_specs = jax.tree_util.tree_map(lambda x: _RUNS if per_run(x) else _WHOLE, carry)
        in_specs = (carry_specs, _WHOLE, _WHOLE, _WHOLE, _RUNS, _RUNS, _WHOLE, _WHOLE)
        # The round and the recording index are computed alike on every device from
        # whole-simulation values, so they leave as one copy (not checked by shard_map).
        local = jax.shard_map(run_chunk, mesh=mesh, in_specs=in_specs, out_specs=carry_specs, check_vma=False)
        return local(carry, t0, horizon, times, noise_keys, policy_keys, env, ctx)

    return call


def joined_runs(groups: list):
    """Engine carries (or one field of them) of groups of runs as one: the per-run leaves
    joined along the runs axis, the others (the same in every group) taken once."""
    if len(groups) == 1:
        return groups[0]
    return jax.tree_util.tree_map(lambda *leaves: jnp.concatenate(leaves, axis=1) if per_run(leaves[0]) else leaves[0], *groups)


def split_runs(carry, groups: int) -> list:
    """An engine carry of all the runs as ``groups`` equal groups, each with its own
    buffers (the chunk step donates its carry)."""
    if groups == 1:
        return [carry]
    size = next(leaf.shape[1] for leaf in jax.tree_util.tree_leaves(carry) if per_run(leaf)) // groups
    return [
        jax.tree_util.tree_map(lambda x: x[:, g * size : (g + 1) * size] if per_run(x) else jnp.array(x, copy=True), carry)
        for g in range(groups)
    ]
