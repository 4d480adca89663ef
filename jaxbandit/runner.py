"""Run a simulation from the host: chunks, checkpoints, results.

:func:`simulate` is the one-call front end; :class:`SimulationRun` is a simulation in
progress (its engine carry), advanced chunk by chunk so that sweeps can checkpoint and
resume it.  Its arguments are checked by :mod:`jaxbandit.run_inputs`, and its arrays
placed on the devices by :mod:`jaxbandit.placement`.  On a CPU an LP policy's runs
advance in groups, one per core (:func:`_run_groups`).
"""

from __future__ import annotations

import functools
import json
import time
from typing import Callable, Optional

import jax
import jax.numpy as jnp
import numpy as np

from jaxbandit import checkpoints, rng, stopping
from jaxbandit._numbers import function, integer
from jaxbandit.base import Policy, options_record
from jaxbandit.compile_options import compiles_quickly
from jaxbandit.engine import DEFAULT_CHUNK_SIZE, cached_simulation, changed_in_place, make_context, policy_code
from jaxbandit.fingerprint import array_digest, computation_key, source_digest, stable_digest
from jaxbandit.instances import Instance
from jaxbandit.monitors import Monitor
from jaxbandit.placement import Placement, joined_runs, split_runs, to_host
from jaxbandit.result import Result
from jaxbandit.run_inputs import RunInputs, check_inputs
from jaxbandit.threads import cpu_threads, map_on_threads

__all__ = ["InvalidArmError", "NaNStateError", "SimulationRun", "simulate"]


class _CellError(ValueError):
    """A failure of one cell's run (``cell``: its index), picklable with its cell, so
    that it crosses process boundaries (``multiprocessing``) whole."""

    def __init__(self, message: str, *, cell: int):
        super().__init__(message)
        self.cell = cell

    def __reduce__(self):
        return functools.partial(type(self), cell=self.cell), self.args


class InvalidArmError(_CellError):
    """A policy chose an arm outside ``[0, num_arms)`` during a simulation (``cell``:
    the index of the cell whose run did first)."""


class NaNStateError(_CellError):
    """A policy's state held a NaN during a simulation (looked for after rounds 1, 2, 4,
    ..., 128, every 256th after, every recording time and the last round; ``cell``: the
    index of the cell whose run held one first)."""


# The engine's recording buffer holds a multiple of this many times, the extra ones a
# round no simulation reaches (never recorded, dropped on the host): horizons whose
# default recording times differ in number then share one compiled engine.
_RECORDING_BLOCK = 32


def _recording_times(times: np.ndarray) -> np.ndarray:
    """``times`` ``(P,)`` padded to a multiple of :data:`_RECORDING_BLOCK`, int32."""
    size = -(-len(times) // _RECORDING_BLOCK) * _RECORDING_BLOCK
    never = np.iinfo(np.int32).max
    return np.concatenate([np.asarray(times, np.int32), np.full(size - len(times), never, np.int32)])


# The fewest runs of a group that advances on a thread of its own (_run_groups).
_GROUP_RUNS = 16


def _in_its_mode(method):
    """``method`` under the 64-bit mode its simulation was set up in: JAX's switch may
    be a scope's own (``with jax.enable_x64(True):``), which a float64 run outlives."""

    @functools.wraps(method)
    def in_mode(self, *args, **kwargs):
        with jax.enable_x64(self._x64):
            return method(self, *args, **kwargs)

    return in_mode


def _run_groups(inputs: RunInputs, placement: Placement) -> int:
    """Into how many groups a simulation's runs are cut, each advanced by its own call
    of the chunk step, the calls at once on threads (:mod:`jaxbandit.threads`): on a CPU
    with one device, for a policy with a solver (whose rounds' small LP operations keep
    one core busy), one per core, each of at least :data:`_GROUP_RUNS` runs; otherwise
    one.  Each run's noise depends only on its own index, so results do not change."""
    if len(placement.devices) > 1 or inputs.policy.solver is None:
        return 1
    return max(1, min(cpu_threads(), inputs.runs // _GROUP_RUNS))


class SimulationRun:
    """A simulation in progress: advance it chunk by chunk, checkpoint it, resume it.

    A *cell* is one instance with one set of policy hyper-parameters: pass a batch
    ``instance`` (one per cell) and/or ``params`` with one value per cell (a
    hyper-parameter that ``params`` does not name keeps the policy's value; a grid on
    a single instance makes a cell per value, all on that instance's noise).
    ``noise_index`` gives each cell's index in the noise stream (cells that share an
    instance should share it, so that they see the same noise).  Other arguments are
    those of :func:`simulate` (:func:`~jaxbandit.run_inputs.check_inputs` checks them);
    :meth:`from_inputs` starts from arguments already checked.  It computes in the
    64-bit mode it was set up in (``jax_enable_x64``, set globally or in a ``with
    jax.enable_x64(True):`` scope), whatever the mode its methods are called in.

    Raises:
        ValueError: bad input (naming the argument and the value);
            :class:`~jaxbandit.policy_check.PolicyError` for a policy that breaks the
            contract of :mod:`jaxbandit.base`.
    """

    def __init__(self, policy: Policy, instance: Instance, horizon: int, runs: int, *args, **kwargs):
        self._start(check_inputs(policy, instance, horizon, runs, *args, **kwargs))

    @classmethod
    def from_inputs(cls, inputs: RunInputs) -> "SimulationRun":
        """A simulation of :class:`~jaxbandit.run_inputs.RunInputs` (checked already)."""
        run = cls.__new__(cls)
        run._start(inputs)
        return run

    def _start(self, inputs: RunInputs) -> None:
        self.inputs = inputs
        self._x64 = bool(jax.config.jax_enable_x64)  # a policy's float64 numpy values compute under it
        self.policy, self.instance, self.monitor = inputs.policy, inputs.instance, inputs.monitor
        self.horizon, self.runs, self.seed, self.times = inputs.horizon, inputs.runs, inputs.seed, inputs.times
        self.params, self.dtype, self.noise_index = inputs.params, inputs.dtype, inputs.noise_index
        self._placement = Placement(inputs.devices, inputs.runs)
        groups = _run_groups(inputs, self._placement)
        group_runs = -(-self._placement.padded_runs // groups)
        env, ctx = make_context(inputs.instance, inputs.cell_params, inputs.horizon, inputs.dtype)
        quick = compiles_quickly(inputs.num_cells, inputs.runs, inputs.horizon, inputs.instance.num_arms)
        self._engine_settings = (inputs.chunk_size, inputs.solve_batch, inputs.monitor, inputs.instance.noise, quick)
        self._sim = cached_simulation(inputs.policy, *self._engine_settings)
        self._codes = _codes(inputs.policy, inputs.monitor)  # what its engine computes, whatever changes later
        self._engine_checked = False
        cell_index = inputs.noise_index.astype(np.uint32)[:, None]
        streams = [rng.stream_key(inputs.seed, stream) for stream in (rng.NOISE_STREAM, rng.POLICY_STREAM)]
        self._keys = []  # (noise_keys, policy_keys) of each group of runs
        for group in range(groups):
            first = inputs.first_run + group * group_runs
            run_index = np.arange(first, first + group_runs, dtype=np.uint32)[None, :]
            self._keys.append(tuple(self._placement.shard(rng.run_keys(s, cell_index, run_index)) for s in streams))
        recording_times = _recording_times(inputs.times)
        self._times_device = self._placement.replicate(jnp.asarray(recording_times))
        # the initial state is computed in each process, from its own (local) context
        init = lambda: self._sim.init(ctx, group_runs, len(recording_times))  # noqa: E731
        self._env, self._ctx = self._placement.replicate(env), self._placement.replicate(ctx)
        with self._placement.computing():
            self._carries = [self._placement.shard_carry(init()) for _ in range(groups)]  # each group its own buffers
        self._stepped = False  # whether the chunk step was compiled yet
        self.wall_time = 0.0

    @property
    @_in_its_mode
    def carry(self):
        """The engine carry of all the runs (:class:`~jaxbandit.engine.EngineCarry`): its
        groups' joined along the runs axis."""
        return joined_runs(self._carries)

    @carry.setter
    @_in_its_mode
    def carry(self, carry) -> None:
        self._carries = split_runs(carry, len(self._carries))

    @_in_its_mode
    def _runs_of(self, name: str):
        """One field of :attr:`carry`, joined without the rest."""
        return joined_runs([getattr(carry, name) for carry in self._carries])

    @property
    def rounds_done(self) -> int:
        return int(self._carries[0].round)

    @property
    def done(self) -> bool:
        return self.rounds_done >= self.horizon

    def _chunk_arguments(self, group: int = 0) -> tuple:
        # numpy scalars: the same in every process, they need no placement
        carry = self._carries[group]
        return (
            carry, np.int32(carry.round), np.int32(self.horizon), self._times_device,
            *self._keys[group], self._env, self._ctx, self._placement.mesh,
        )  # fmt: skip

    def _engine(self):
        """The engine, built again from this run's policy if the one it was built from
        (an equal policy, through the cache) was changed in place since: a new trace of
        it would compile that change (:func:`~jaxbandit.engine.cached_simulation`).  A
        change to this run's own policy is refused when the engine traces it.  Checked
        at the first use only: a policy's key walks its code, which each of a sweep's
        chunks would pay again."""
        if self._engine_checked:  # its programs are traced at its first use
            return self._sim
        built_from = self._sim.built_from
        if (built_from[0] is not self.policy or built_from[1] is not self.monitor) and not self._sim.as_built():
            if _codes(self.policy, self.monitor) != self._codes:
                raise changed_in_place(self.policy)
            self._sim = cached_simulation(self.policy, *self._engine_settings)
        self._engine_checked = True
        return self._sim

    @_in_its_mode
    def compile(self) -> float:
        """Compile the chunk step now rather than in the first :meth:`advance`; returns
        the seconds it took (to time compilation and simulation apart).  Results do not
        change."""
        start = time.perf_counter()
        self._engine().run_chunk.lower(*self._chunk_arguments()).compile()
        self._stepped = True
        return time.perf_counter() - start

    @_in_its_mode
    def advance(self, max_chunks: Optional[int] = None, progress: Optional[Callable[[int, int], None]] = None) -> int:
        """Run up to ``max_chunks`` chunks (all remaining by default); returns rounds done.

        Raises:
            jaxbandit.stopping.Stopped: a SIGINT or SIGTERM asked to stop: after the
                chunk it came in (``advance()`` goes on from there).
            InvalidArmError: the policy chose an arm outside ``[0, num_arms)`` in the
                chunk just run (the simulation cannot continue).
            NaNStateError: the policy's state held a NaN at a round it is looked for
                (see :class:`NaNStateError`) in the chunk just run.
            Either again, before any round, once raised (or restored from such a run).
        """
        self._raise_for_failed_runs()
        if max_chunks is not None:
            max_chunks = integer("max_chunks", max_chunks, 1)
        _check_progress(progress)
        chunks, engine = 0, self._engine()
        with stopping.on_signals() as stops_here:
            while not self.done and (max_chunks is None or chunks < max_chunks):
                start = time.perf_counter()
                self._advance_groups(engine)
                jax.block_until_ready([carry.round for carry in self._carries])
                self.wall_time += time.perf_counter() - start
                chunks += 1
                self._raise_for_failed_runs()
                if progress is not None:
                    progress(self.rounds_done, self.horizon)
                if stops_here and not self.done:
                    stopping.check()
        return self.rounds_done

    def _advance_groups(self, engine) -> None:
        """One chunk of every group of runs, the groups at once on threads.  Each group's
        new carry is kept as its call returns: the chunk step donates the old one, so an
        interrupt (which the threads' calls outlast) must not lose it."""
        advanced = list(self._carries)

        def step(group: int) -> None:
            advanced[group] = engine.run_chunk(*self._chunk_arguments(group))

        groups = list(range(len(advanced)))
        try:
            if not self._stepped:  # the first call compiles the program, once
                step(groups.pop(0))
                self._stepped = True
            map_on_threads(step, groups, len(groups))
        finally:
            self._carries = advanced

    def _first_flagged(self, flagged_round) -> Optional[tuple[int, int, int, int]]:
        """``(cell, run, round, runs flagged)`` of the earliest nonzero entry of a
        ``(C, R)`` per-run round (0: not flagged) among the real runs, or None."""
        flagged_round = to_host(flagged_round)[:, : self.runs]
        if not flagged_round.any():
            return None
        rounds = np.where(flagged_round > 0, flagged_round, np.iinfo(np.int32).max)
        cell, run = np.unravel_index(np.argmin(rounds), rounds.shape)
        return int(cell), int(run), int(rounds[cell, run]), int((flagged_round > 0).sum())

    def _raise_for_failed_runs(self) -> None:
        """Raise for flagged runs: an invalid arm counts for none, so the results are wrong."""
        self._raise_for_invalid_arms()
        self._raise_for_nan_state()

    def _raise_for_invalid_arms(self) -> None:
        first = self._first_flagged(self._runs_of("invalid_round"))
        if first is None:
            return
        cell, run, round_number, count = first
        arm = int(to_host(self._runs_of("invalid_arm"))[cell, run])
        source = "select_fn" if self.policy.solver is None else "select_fn (or its Solver.finish_fn)"
        raise InvalidArmError(
            f"policy {self.policy.name!r}: {source} chose arm {arm} at round {round_number} "
            f"(run {run}, cell {cell}); arms are 0..{self.instance.num_arms - 1}. The simulation was stopped; "
            f"{count} run(s) made such a choice in rounds up to {self.rounds_done}.",
            cell=cell,
        )

    def _raise_for_nan_state(self) -> None:
        first = self._first_flagged(self._runs_of("nan_round"))
        if first is None:
            return
        cell, run, round_number, count = first
        raise NaNStateError(
            f"policy {self.policy.name!r}: its state held a NaN by round {round_number} (run {run}, "
            f"cell {cell}), written by one of its functions (init_fn, update_fn, consolidate_fn, or a "
            f"solver's fold_fn/finish_fn). The simulation was stopped; {count} run(s) had a NaN "
            f"in their state by round {self.rounds_done}.",
            cell=cell,
        )

    @_in_its_mode
    def diagnostics(self) -> dict:
        """The policy's per-run counters now: ``{name: (C, runs) numpy}``."""
        values = self._engine().diagnostics(self._runs_of("state"))
        return {k: to_host(v)[:, : self.runs] for k, v in values.items()}

    def monitor_record(self) -> dict:
        """The monitor's reports at the recording times reached: ``{name: (C, runs, P') numpy}``."""
        record, reached = self._runs_of("monitor_record"), int(np.searchsorted(self.times, self.rounds_done, "right"))
        if record is None:
            return {}
        return {k: to_host(v)[:, : self.runs, ..., :reached] for k, v in record.items()}

    def identity(self) -> dict:
        """What determines this simulation's results, as a JSON-able dict: scalars (and
        the noise family's label) as they are, arrays (instance, parameters, noise
        indices, times), the code of the policy and the monitor as the run was set up
        (:func:`~jaxbandit.engine.policy_code`) and jaxbandit's own
        (:func:`~jaxbandit.fingerprint.source_digest`) as digests.
        Chunk size, solve buffer and devices are left out: they never change results."""
        return {
            "policy": self.policy.name,
            "policy_code": self._codes["policy_code"],
            "options": self._codes["options"],
            "params": {k: array_digest(v) for k, v in sorted(self.params.items())},
            "instance": array_digest(self.instance.mu) + array_digest(self.instance.sigma),
            "noise": self.instance.noise.label,
            "noise_index": array_digest(self.noise_index),
            "seed": self.seed,
            "horizon": self.horizon,
            "times": array_digest(self.times),
            "runs": self.runs,
            "first_run": self.inputs.first_run,
            "dtype": self.dtype.name,
            "x64": self._x64,
            "monitor": None if self.monitor is None else self.monitor.name,
            "monitor_code": self._codes["monitor_code"],
            "code": source_digest(),
        }

    def checkpoint(self) -> dict:
        """The engine state as a flat dict of numpy arrays (exact; see :meth:`restore` and
        :mod:`jaxbandit.checkpoints`), with this simulation's :meth:`identity`."""
        leaves = [to_host(leaf) for leaf in jax.tree_util.tree_leaves(self.carry)]
        return checkpoints.encode(leaves, self.identity(), self.wall_time)

    @_in_its_mode
    def restore(self, arrays: dict) -> None:
        """Resume from :meth:`checkpoint` output of this same simulation (taken on any
        number of devices).

        Raises:
            ArgumentError: ``arrays`` is not a checkpoint, is of another simulation
                (naming what differs), or its engine state does not fit this one.
        """
        # the carry's shapes only: its groups are not joined on the device to read them
        leaves, treedef = jax.tree_util.tree_flatten(jax.eval_shape(joined_runs, self._carries))
        restored, wall_time = checkpoints.decode(arrays, self.identity(), leaves, self.runs)
        # numpy leaves placed where they go, not first copied to JAX's default device
        self.carry = self._placement.shard_carry(jax.tree_util.tree_unflatten(treedef, restored))
        self.wall_time = wall_time

    @_in_its_mode
    def result(self) -> Result:
        """The :class:`~jaxbandit.result.Result` (when :attr:`done`; flagged runs: as in advance)."""
        self._raise_for_failed_runs()
        if not self.done:
            raise RuntimeError(f"simulation not finished: {self.rounds_done} of {self.horizon} rounds done.")
        runs = self.runs
        diagnostics = self.diagnostics()
        regret = to_host(self._runs_of("regret")).astype(np.float64)[:, :runs, : len(self.times)]
        counts = to_host(self._runs_of("counts")).astype(np.int64)[:, :runs]
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
            dtype=self.dtype.name,
            wall_time=self.wall_time,
            monitor=monitor,
            noise=self.instance.noise.label,
            first_run=self.inputs.first_run,
        )


def _check_progress(progress) -> None:
    if progress is not None:
        function("progress", progress, "(rounds_done, horizon) or None")


def _codes(policy: Policy, monitor: Optional[Monitor]) -> dict:
    """The identity's record of what ``policy`` and ``monitor`` compute (their code as
    digests, the policy's static options)."""
    return {
        "policy_code": policy_code(policy),
        "options": json.dumps(options_record(policy.options), sort_keys=True),
        "monitor_code": None if monitor is None else stable_digest(computation_key(monitor)),
    }


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
            a sixteenth of the runs as a power of two, between 8 and 256, at most
            ``runs``); speed only, never results.
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
    _check_progress(progress)  # before anything compiles
    with stopping.on_signals() as stops_here:  # the setup traces and compiles too
        run = SimulationRun(
            policy, instance, horizon, runs, seed, times,
            dtype=dtype, chunk_size=chunk_size, solve_batch=solve_batch, first_run=first_run, devices=devices,
            monitor=monitor,
        )  # fmt: skip
        if stops_here:
            stopping.check()
    run.advance(progress=progress)
    return run.result()
