"""Run a simulation from the host: validated input, chunks, devices, checkpoints.

:func:`simulate` is the one-call front end; :class:`SimulationRun` advances a
simulation chunk by chunk so that sweeps can checkpoint and resume it.  With several
JAX devices (or processes, under ``jax.distributed``) the runs axis is sharded over all
of them; results are identical to one device because each run's noise depends only
on its own index.

With several processes every process runs this same host code on the same inputs:
each computes the full (small) initial arrays, keeps its own devices' slices of them
(:func:`_global`), and gathers results with ``process_allgather``.
"""

from __future__ import annotations

import hashlib
import json
import time
from typing import Any, Callable, Optional

import jax
import jax.numpy as jnp
import numpy as np

from jaxbandit import rng
from jaxbandit.base import OWN_ARM, Policy, options_record
from jaxbandit.engine import (
    DEFAULT_CHUNK_SIZE,
    MAX_ROUNDS,
    EngineCarry,
    cached_simulation,
    make_context,
    policy_code,
    policy_key,
)
from jaxbandit.fingerprint import computation_key, stable_digest
from jaxbandit.instances import Instance
from jaxbandit.monitors import Monitor
from jaxbandit.policy_check import PolicyError, check_monitor, check_policy, check_policy_fields
from jaxbandit.result import Result, check_times, geometric_times

__all__ = ["InvalidArmError", "NaNStateError", "SimulationRun", "simulate"]


class InvalidArmError(ValueError):
    """A policy chose an arm outside ``[0, num_arms)`` during a simulation."""


class NaNStateError(ValueError):
    """A policy's state held a NaN during a simulation (looked for after rounds 1, 2, 4,
    ..., 128, every 256th after, every recording time and the last round)."""


def _check_positive_int(name: str, value, maximum: Optional[int] = None) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value <= 0:
        raise ValueError(f"{name} must be a positive integer, got {value!r}.")
    if maximum is not None and value > maximum:
        raise ValueError(f"{name} must be at most {maximum}, got {value!r}.")
    return int(value)


def _check_devices(devices) -> list:
    """``devices`` as a non-empty list of JAX devices (None: every visible device)."""
    if devices is None:
        return list(jax.devices())
    if isinstance(devices, (jax.Device, str)):
        raise ValueError(f"devices must be a non-empty sequence of JAX devices, got {devices!r}.")
    try:
        devices = list(devices)
    except TypeError as err:
        raise ValueError(f"devices must be a non-empty sequence of JAX devices, got {devices!r}.") from err
    if not devices or not all(isinstance(d, jax.Device) for d in devices):
        raise ValueError(f"devices must be a non-empty sequence of JAX devices, got {devices!r}.")
    if len(set(devices)) != len(devices):
        raise ValueError(f"devices must be distinct (the runs are split over them), got {devices!r}.")
    return devices


def _check_dtype(dtype) -> Any:
    try:
        if dtype is None:  # numpy reads None as float64
            raise TypeError
        dtype = jnp.dtype(dtype)
    except TypeError as err:
        raise ValueError(f"dtype must be float32 or float64, got {dtype!r}.") from err
    if dtype not in (jnp.float32, jnp.float64):
        raise ValueError(f"dtype must be float32 or float64, got {dtype!r}.")
    if dtype == jnp.float64 and not jax.config.jax_enable_x64:
        raise ValueError(
            "dtype='float64' needs 64-bit JAX: set JAX_ENABLE_X64=1 or call "
            "jax.config.update('jax_enable_x64', True) before simulating."
        )
    return dtype


def _global(value, sharding) -> jax.Array:
    """``value``, computed identically in every process, as one array over ``sharding``.

    Each process supplies the slices its own devices hold, so no data crosses
    processes (``jax.device_put`` would compare the value across processes first).
    """
    host = np.asarray(value)
    return jax.make_array_from_callback(host.shape, sharding, lambda index: host[index])


def _to_host(array) -> np.ndarray:
    """A (possibly sharded) device array as one numpy array; with several processes
    the shards of the other processes are gathered."""
    if jax.process_count() > 1:
        from jax.experimental import multihost_utils

        return np.asarray(multihost_utils.process_allgather(array, tiled=True))
    return np.asarray(array)


# The engine's recording buffer holds a multiple of this many times, the extra ones a
# round no simulation reaches (never recorded, dropped on the host): horizons whose
# default recording times differ in number then share one compiled engine.
_RECORDING_BLOCK = 32


def _recording_times(times: np.ndarray) -> np.ndarray:
    """``times`` ``(P,)`` padded to a multiple of :data:`_RECORDING_BLOCK`, int32."""
    size = -(-len(times) // _RECORDING_BLOCK) * _RECORDING_BLOCK
    never = np.iinfo(np.int32).max
    return np.concatenate([np.asarray(times, np.int32), np.full(size - len(times), never, np.int32)])


_SCALAR_IDENTITY = ("policy", "options", "seed", "horizon", "runs", "first_run", "dtype", "monitor")


def _digest(value) -> str:
    """A short digest of a numeric array's shape and float64 values."""
    array = np.ascontiguousarray(np.asarray(value, dtype=np.float64))
    return hashlib.sha256(repr(array.shape).encode() + array.tobytes()).hexdigest()[:16]


def _fit_runs(saved: np.ndarray, padded_runs: int, runs: int) -> np.ndarray:
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


_CHECKED: set = set()  # (computations, shapes) whose policy (and monitor) passed their checks


def _check_policy_once(policy: Policy, ctx, monitor: Optional[Monitor]) -> None:
    """:func:`~jaxbandit.policy_check.check_policy` (and
    :func:`~jaxbandit.policy_check.check_monitor`) on one cell, once per computation and
    shapes."""
    one_cell = jax.tree_util.tree_map(lambda x: jax.ShapeDtypeStruct(x.shape[1:], x.dtype), ctx)
    shapes = jax.tree_util.tree_map(lambda s: (s.shape, str(s.dtype)), one_cell)
    monitor_key = None if monitor is None else computation_key(monitor)
    key = (policy_key(policy), monitor_key, jax.tree_util.tree_structure(shapes), tuple(jax.tree_util.tree_leaves(shapes)))
    if key not in _CHECKED:
        check_policy(policy, one_cell)
        if monitor is not None:
            check_monitor(monitor, policy, one_cell)
        _CHECKED.add(key)


def _check_feedback(policy: Policy, instance: Instance) -> None:
    """A policy that learns an arm only by playing it needs every arm to observe itself."""
    if policy.options.get("feedback") != OWN_ARM:
        return
    blind = np.argwhere(np.isinf(np.diagonal(instance.sigma, axis1=-2, axis2=-1)))
    if blind.size:
        arm = int(blind[0][-1])
        where = f"instance {int(blind[0][0])}: " if instance.is_batch else ""
        raise ValueError(
            f"{where}policy {policy.name!r} learns each arm only from its own plays, but arm {arm} reveals "
            f"nothing about itself (sigma[{arm}, {arm}] = inf), so it would be played forever; use a policy "
            "with side observations (e.g. ucb_n, ts_n, lp_explore)."
        )


def _check_params(params, policy: Policy) -> dict:
    """``params`` given for ``policy``: a dict naming only the policy's own
    hyper-parameters (a misspelt name would be recorded in the results but never read).
    Their values are checked once they are arrays (:func:`_check_param_values`)."""
    if not isinstance(params, dict):
        raise ValueError(f"params must be a dict of the policy's hyper-parameters, got {params!r}.")
    unknown = sorted(set(params) - set(policy.params))
    if unknown:
        raise ValueError(
            f"params names {unknown}, which policy {policy.name!r} does not have; its hyper-parameters are "
            f"{sorted(policy.params) or 'none'}."
        )
    return params


def _check_param_values(policy: Policy, params: dict, held: dict) -> None:
    """Every cell's hyper-parameters through the policy's own check
    (:attr:`~jaxbandit.base.Policy.check_params`), which names a value it cannot use:
    as given, then as the engine holds them (``held``: ``{name: (C,)}`` in the
    simulation's dtype), because float32 can round a valid value onto an invalid one
    (``gamma = 0.99999999`` onto 1.0)."""
    if policy.check_params is None or not params:
        return
    if not callable(policy.check_params):
        raise PolicyError(f"check_params must be a function or None, got {policy.check_params!r}.")
    num_cells = next(iter(held.values())).shape[0]
    columns = {name: np.broadcast_to(np.asarray(value, np.float64), (num_cells,)) for name, value in params.items()}
    for cell in range(num_cells):
        where = f" of cell {cell}" if num_cells > 1 else ""
        given = {name: float(column[cell]) for name, column in columns.items()}
        kept = {name: float(held[name][cell]) for name in given}
        rounded = [f"{name} = {given[name]!r} is {kept[name]!r} in {held[name].dtype}" for name in given if kept[name] != given[name]]
        checks = [(given, "")] + ([(kept, f" ({', '.join(rounded)}; use dtype='float64')")] if rounded else [])
        for values, note in checks:
            try:
                policy.check_params(values)
            except ValueError as err:
                raise ValueError(f"params{where} for policy {policy.name!r}: {str(err).rstrip('.')}{note}.") from None


class SimulationRun:
    """A simulation in progress: advance it chunk by chunk, checkpoint it, resume it.

    A *cell* is one instance with one set of policy hyper-parameters: pass a batch
    ``instance`` (one per cell) and/or ``params`` with one value per cell (a
    hyper-parameter that ``params`` does not name keeps the policy's value).
    ``noise_index`` gives each cell's index in the noise stream (cells that share an
    instance should share it, so that they see the same noise).  Other arguments are
    those of :func:`simulate`.

    Raises:
        ValueError: bad input (naming the argument and the value);
            :class:`~jaxbandit.policy_check.PolicyError` for a policy that breaks the
            contract of :mod:`jaxbandit.base`.
    """

    def __init__(
        self,
        policy: Policy,
        instance: Instance,
        horizon: int,
        runs: int,
        seed: int = 0,
        times=None,
        *,
        params: Optional[dict] = None,
        noise_index=None,
        dtype="float32",
        chunk_size: int = DEFAULT_CHUNK_SIZE,
        solve_batch: Optional[int] = None,
        first_run: int = 0,
        devices=None,
        monitor: Optional[Monitor] = None,
    ):
        if not isinstance(policy, Policy):
            raise ValueError(f"policy must be a jaxbandit.Policy (see jaxbandit.policies.make), got {policy!r}.")
        check_policy_fields(policy)
        if not isinstance(instance, Instance):
            raise ValueError(f"instance must be a jaxbandit.Instance, got {type(instance).__name__}.")
        self.policy = policy
        self.instance = instance
        self.horizon = _check_positive_int("horizon", horizon, MAX_ROUNDS)
        self.runs = _check_positive_int("runs", runs)
        self.chunk_size = _check_positive_int("chunk_size", chunk_size, MAX_ROUNDS)
        if solve_batch is not None:
            solve_batch = _check_positive_int("solve_batch", solve_batch)
        if isinstance(first_run, bool) or not isinstance(first_run, (int, np.integer)) or first_run < 0:
            raise ValueError(f"first_run must be a non-negative integer, got {first_run!r}.")
        first_run = int(first_run)  # a numpy integer would wrap around in the sum below
        if first_run + self.runs > 2**32:
            raise ValueError(f"run indices must stay below 2**32, got first_run + runs = {first_run + self.runs}.")
        rng.seed_words(seed)  # validates the seed
        self.seed = int(seed)
        self.dtype = _check_dtype(dtype)
        self.devices = _check_devices(devices)
        self.first_run = first_run
        self.times = geometric_times(self.horizon) if times is None else check_times(times, self.horizon)
        # params named here replace the policy's own values; the others keep them
        self.params = {**policy.params, **({} if params is None else _check_params(params, policy))}
        _check_feedback(policy, instance)
        self._env, self._ctx = make_context(instance, self.params, self.horizon, self.dtype)
        _check_param_values(policy, self.params, {k: np.asarray(v) for k, v in self._ctx.params.items()})
        self._ctx_local = self._ctx  # the initial state is computed in each process
        if monitor is not None and not isinstance(monitor, Monitor):
            raise ValueError(f"monitor must be a jaxbandit.monitors.Monitor or None, got {monitor!r}.")
        _check_policy_once(policy, self._ctx, monitor)
        self.monitor = monitor
        self._sim = cached_simulation(policy, self.chunk_size, solve_batch, monitor)
        num_cells = self._env.mu.shape[0]
        noise_index = np.arange(num_cells) if noise_index is None else np.asarray(noise_index)
        integers = noise_index.dtype != bool and np.issubdtype(noise_index.dtype, np.integer)
        if noise_index.shape != (num_cells,) or not integers or np.any(noise_index < 0) or np.any(noise_index >= 2**32):
            # a fraction, NaN or 2**32 would be cast onto another cell's noise stream
            raise ValueError(
                f"noise_index must hold one integer in [0, 2**32) per cell ({num_cells}), got {noise_index.tolist()!r}."
            )

        # Pad the runs to a multiple of the device count; padded runs are real runs with
        # larger indices, simulated and then dropped, so they change nothing.
        self._padded_runs = -(-self.runs // len(self.devices)) * len(self.devices)
        self._sharding = self._replicated = None
        if len(self.devices) > 1:
            mesh = jax.sharding.Mesh(np.array(self.devices), ("runs",))
            self._sharding = jax.sharding.NamedSharding(mesh, jax.sharding.PartitionSpec(None, "runs"))
            self._replicated = jax.sharding.NamedSharding(mesh, jax.sharding.PartitionSpec())
        # Devices of other processes: every argument of the compiled chunk must be an
        # array over all of them (a local array would be compared across processes
        # at every call).
        self._multiprocess = any(d.process_index != jax.process_index() for d in self.devices)
        self.noise_index = noise_index.astype(np.int64)
        cell_index = noise_index.astype(np.uint32)[:, None]
        run_index = np.arange(first_run, first_run + self._padded_runs, dtype=np.uint32)[None, :]
        self._noise_keys = self._shard(rng.run_keys(rng.stream_key(seed, rng.NOISE_STREAM), cell_index, run_index))
        self._policy_keys = self._shard(rng.run_keys(rng.stream_key(seed, rng.POLICY_STREAM), cell_index, run_index))
        recording_times = _recording_times(self.times)
        self._times_device = self._replicate(jnp.asarray(recording_times))
        self._env, self._ctx = self._replicate(self._env), self._replicate(self._ctx)
        self.carry = self._shard_carry(self._sim.init(self._ctx_local, self._padded_runs, len(recording_times)))
        self.wall_time = 0.0

    def _shard(self, array):
        """``(C, R, ...)`` split over the devices along the runs axis."""
        if self._sharding is None:
            return array
        return _global(array, self._sharding) if self._multiprocess else jax.device_put(array, self._sharding)

    def _replicate(self, tree):
        """A copy of ``tree`` on every device (only needed across processes)."""
        if not self._multiprocess:
            return tree
        return jax.tree_util.tree_map(lambda x: _global(x, self._replicated), tree)

    def _shard_carry(self, carry: EngineCarry) -> EngineCarry:
        if self._sharding is None:
            return carry
        return jax.tree_util.tree_map(lambda x: self._shard(x) if x.ndim >= 2 else self._replicate(x), carry)

    @property
    def rounds_done(self) -> int:
        return int(self.carry.round)

    @property
    def done(self) -> bool:
        return self.rounds_done >= self.horizon

    def _chunk_arguments(self) -> tuple:
        # numpy scalars: the same in every process, they need no placement
        return (
            self.carry, np.int32(self.rounds_done), np.int32(self.horizon), self._times_device,
            self._noise_keys, self._policy_keys, self._env, self._ctx,
        )  # fmt: skip

    def compile(self) -> float:
        """Compile the chunk step now rather than in the first :meth:`advance`; returns
        the seconds it took (to time compilation and simulation apart).  Results do not
        change."""
        start = time.perf_counter()
        self._sim.run_chunk.lower(*self._chunk_arguments()).compile()
        return time.perf_counter() - start

    def advance(self, max_chunks: Optional[int] = None, progress: Optional[Callable[[int, int], None]] = None) -> int:
        """Run up to ``max_chunks`` chunks (all remaining by default); returns rounds done.

        Raises:
            InvalidArmError: the policy chose an arm outside ``[0, num_arms)`` in the
                chunk just run (the simulation cannot continue).
            NaNStateError: the policy's state held a NaN at a round it is looked for
                (see :class:`NaNStateError`) in the chunk just run.
        """
        if max_chunks is not None:
            max_chunks = _check_positive_int("max_chunks", max_chunks)
        if progress is not None and not callable(progress):
            raise ValueError(f"progress must be a function (rounds_done, horizon) or None, got {progress!r}.")
        chunks = 0
        while not self.done and (max_chunks is None or chunks < max_chunks):
            start = time.perf_counter()
            self.carry = self._sim.run_chunk(*self._chunk_arguments())
            jax.block_until_ready(self.carry.round)
            self.wall_time += time.perf_counter() - start
            chunks += 1
            self._raise_for_invalid_arms()
            self._raise_for_nan_state()
            if progress is not None:
                progress(self.rounds_done, self.horizon)
        return self.rounds_done

    def _first_flagged(self, flagged_round) -> Optional[tuple[int, int, int, int]]:
        """``(cell, run, round, runs flagged)`` of the earliest nonzero entry of a
        ``(C, R)`` per-run round (0: not flagged) among the real runs, or None."""
        flagged_round = _to_host(flagged_round)[:, : self.runs]
        if not flagged_round.any():
            return None
        rounds = np.where(flagged_round > 0, flagged_round, np.iinfo(np.int32).max)
        cell, run = np.unravel_index(np.argmin(rounds), rounds.shape)
        return int(cell), int(run), int(rounds[cell, run]), int((flagged_round > 0).sum())

    def _raise_for_invalid_arms(self) -> None:
        first = self._first_flagged(self.carry.invalid_round)
        if first is None:
            return
        cell, run, round_number, count = first
        arm = int(_to_host(self.carry.invalid_arm)[cell, run])
        source = "select_fn" if self.policy.solver is None else "select_fn (or its Solver.finish_fn)"
        raise InvalidArmError(
            f"policy {self.policy.name!r}: {source} chose arm {arm} at round {round_number} "
            f"(run {run}, cell {cell}); arms are 0..{self.instance.num_arms - 1}. The simulation was stopped; "
            f"{count} run(s) made such a choice in rounds up to {self.rounds_done}."
        )

    def _raise_for_nan_state(self) -> None:
        first = self._first_flagged(self.carry.nan_round)
        if first is None:
            return
        cell, run, round_number, count = first
        raise NaNStateError(
            f"policy {self.policy.name!r}: its state held a NaN by round {round_number} (run {run}, "
            f"cell {cell}), written by one of its functions (update_fn, consolidate_fn, or a solver's "
            f"fold_fn/finish_fn). The simulation was stopped; {count} run(s) had a NaN "
            f"in their state by round {self.rounds_done}."
        )

    def diagnostics(self) -> dict:
        """The policy's per-run counters now: ``{name: (C, runs) numpy}``."""
        values = self._sim.diagnostics(self.carry.state)
        return {k: _to_host(v)[:, : self.runs] for k, v in values.items()}

    def monitor_record(self) -> dict:
        """The monitor's reports at the recording times so far: ``{name: (C, runs, P) numpy}``."""
        if self.carry.monitor_record is None:
            return {}
        return {k: _to_host(v)[:, : self.runs, ..., : len(self.times)] for k, v in self.carry.monitor_record.items()}

    def identity(self) -> dict:
        """What determines this simulation's results, as a JSON-able dict: scalars as
        they are, arrays (instance, parameters, noise indices, times) and the code of
        the policy and the monitor (:func:`~jaxbandit.engine.policy_code`) as digests.
        Chunk size, solve buffer and devices are left out: they never change results."""
        return {
            "policy": self.policy.name,
            "policy_code": policy_code(self.policy),
            "options": json.dumps(options_record(self.policy.options), sort_keys=True),
            "params": {k: _digest(v) for k, v in sorted(self.params.items())},
            "instance": _digest(self.instance.mu) + _digest(self.instance.sigma),
            "noise_index": _digest(self.noise_index),
            "seed": self.seed,
            "horizon": self.horizon,
            "times": _digest(self.times),
            "runs": self.runs,
            "first_run": self.first_run,
            "dtype": str(jnp.dtype(self.dtype)),
            "monitor": None if self.monitor is None else self.monitor.name,
            "monitor_code": None if self.monitor is None else stable_digest(computation_key(self.monitor)),
        }

    def checkpoint(self) -> dict:
        """The engine state as a flat dict of numpy arrays (exact; see :meth:`restore`),
        with this simulation's :meth:`identity` under ``"identity"``."""
        leaves = jax.tree_util.tree_leaves(self.carry)
        arrays = {f"leaf_{i:04d}": _to_host(leaf) for i, leaf in enumerate(leaves)}
        arrays["wall_time"] = np.asarray(self.wall_time)
        arrays["identity"] = np.asarray(json.dumps(self.identity(), sort_keys=True))
        return arrays

    def restore(self, arrays: dict) -> None:
        """Resume from :meth:`checkpoint` output of this same simulation (taken on any
        number of devices).

        Raises:
            ValueError: the checkpoint is of another simulation (naming what differs),
                has no identity (an earlier jaxbandit version wrote it), or its engine
                state does not fit this one.
        """
        if "identity" not in arrays:
            raise ValueError(
                "the checkpoint does not say which simulation it belongs to (an earlier jaxbandit "
                "version wrote it), so it cannot be checked against this one."
            )
        saved_identity, identity = json.loads(str(arrays["identity"])), self.identity()
        differ = [k for k in sorted(set(saved_identity) | set(identity)) if saved_identity.get(k) != identity.get(k)]
        if differ:
            details = [
                f"{k} {saved_identity.get(k)!r} (here {identity.get(k)!r})" if k in _SCALAR_IDENTITY else k
                for k in differ
            ]
            raise ValueError(f"the checkpoint is of another simulation: its {', '.join(details)} differ.")
        leaves, treedef = jax.tree_util.tree_flatten(self.carry)
        saved_leaves = sorted(k for k in arrays if k.startswith("leaf_"))
        if saved_leaves != [f"leaf_{i:04d}" for i in range(len(leaves))]:
            raise ValueError(
                f"the checkpoint holds {len(saved_leaves)} engine arrays, this simulation {len(leaves)} "
                "(a different engine state layout)."
            )
        if "wall_time" not in arrays:  # checked before anything is restored
            raise ValueError("the checkpoint has no 'wall_time' entry, which checkpoint() always writes.")
        restored = []
        for i, leaf in enumerate(leaves):
            saved = np.asarray(arrays[f"leaf_{i:04d}"])
            if saved.ndim >= 2 and saved.shape[1] != leaf.shape[1]:
                saved = _fit_runs(saved, leaf.shape[1], self.runs)
            if saved.shape != leaf.shape or saved.dtype != leaf.dtype:
                raise ValueError(f"checkpoint leaf {i} has shape {saved.shape} {saved.dtype}, expected {leaf.shape} {leaf.dtype}.")
            restored.append(jnp.asarray(saved))
        self.carry = self._shard_carry(jax.tree_util.tree_unflatten(treedef, restored))
        self.wall_time = float(arrays["wall_time"])

    def result(self) -> Result:
        """The :class:`~jaxbandit.result.Result` (call when :attr:`done`)."""
        if not self.done:
            raise RuntimeError(f"simulation not finished: {self.rounds_done} of {self.horizon} rounds done.")
        runs = self.runs
        diagnostics = self.diagnostics()
        regret = _to_host(self.carry.regret).astype(np.float64)[:, :runs, : len(self.times)]
        counts = _to_host(self.carry.counts).astype(np.int64)[:, :runs]
        monitor = self.monitor_record()
        if not self.instance.is_batch and all(np.ndim(v) == 0 for v in self.params.values()):
            regret, counts = regret[0], counts[0]
            diagnostics = {k: v[0] for k, v in diagnostics.items()}
            monitor = {k: v[0] for k, v in monitor.items()}
        return Result(
            times=self.times,
            regret=regret,
            counts=counts,
            diagnostics=diagnostics,
            policy=self.policy.name,
            params={k: np.asarray(v).tolist() for k, v in self.params.items()},
            options=dict(self.policy.options),
            seed=self.seed,
            horizon=self.horizon,
            runs=runs,
            dtype=str(jnp.dtype(self.dtype)),
            wall_time=self.wall_time,
            monitor=monitor,
        )


def simulate(
    policy: Policy,
    instance: Instance,
    horizon: int,
    runs: int,
    seed: int = 0,
    times=None,
    *,
    dtype="float32",
    chunk_size: int = DEFAULT_CHUNK_SIZE,
    solve_batch: Optional[int] = None,
    first_run: int = 0,
    devices=None,
    progress: Optional[Callable[[int, int], None]] = None,
    monitor: Optional[Monitor] = None,
) -> Result:
    """Simulate ``runs`` independent runs of ``policy`` on ``instance`` for ``horizon`` rounds.

    Args:
        policy: a :class:`~jaxbandit.base.Policy` (e.g. from :func:`jaxbandit.policies.make`).
        instance: an :class:`~jaxbandit.instances.Instance`, or a batch of them (every
            output then gets a leading instance axis).
        horizon: number of rounds T, 1 <= T <= ``engine.MAX_ROUNDS`` (2**30).
        runs: number of independent runs R >= 1.
        seed: integer seed; run ``r`` of instance ``i`` is the same whatever ``runs``,
            ``chunk_size``, ``solve_batch`` or the number of devices.
        times: rounds at which to record regret (default: ~100 geometric points);
            ``horizon`` is always included.
        dtype: ``"float32"`` (default) or ``"float64"`` (needs ``jax_enable_x64``).
        chunk_size: rounds per compiled chunk (memory and progress granularity only; at
            most ``engine.MAX_ROUNDS``).
        solve_batch: buffer size of a policy's ``"compact"`` solver stages (default
            ``min(runs, 256)``); speed only, never results.
        first_run: index of the first run (to simulate runs ``first_run ...`` separately).
        devices: JAX devices to shard the runs over (default: all visible devices).
        progress: optional ``callback(rounds_done, horizon)`` called after each chunk.
        monitor: optional :class:`~jaxbandit.monitors.Monitor` run every round; its
            reports at the recording times are in ``Result.monitor``.

    Returns:
        A :class:`~jaxbandit.result.Result`.

    Raises:
        ValueError: bad input; :class:`~jaxbandit.policy_check.PolicyError` for a policy
            that breaks the contract; :class:`InvalidArmError` for an arm outside
            ``[0, num_arms)`` chosen during the run; :class:`NaNStateError` for a NaN
            in the policy's state.
    """
    run = SimulationRun(
        policy, instance, horizon, runs, seed, times,
        dtype=dtype, chunk_size=chunk_size, solve_batch=solve_batch, first_run=first_run, devices=devices,
        monitor=monitor,
    )  # fmt: skip
    run.advance(progress=progress)
    return run.result()
