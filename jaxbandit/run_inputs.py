"""A simulation's arguments, checked once, where they enter.

:func:`check_inputs` is the boundary of the Python API (:func:`jaxbandit.simulate`,
:class:`~jaxbandit.runner.SimulationRun`): it applies the one rule of each kind of value
and returns :class:`RunInputs`.  A sweep builds its :class:`RunInputs` from its plan
(:mod:`jaxbandit.config.plan`), whose values were checked where the configuration
entered, with the same rules; the runner itself checks nothing.
"""

from __future__ import annotations

import copy
import dataclasses
from typing import Optional

import jax
import numpy as np

from jaxbandit import rng
from jaxbandit._numbers import ArgumentError, check_held, float_array, float_dtype, integer
from jaxbandit.base import OWN_ARM, Context, Policy
from jaxbandit.engine import DEFAULT_CHUNK_SIZE, MAX_ROUNDS, drop_older_jax_copies, policy_key
from jaxbandit.fingerprint import computation_key
from jaxbandit.instances import Instance, check_instance, stack
from jaxbandit.monitors import Monitor
from jaxbandit.noise import check_drawn
from jaxbandit.policy_check import PolicyError, check_monitor, check_policy, check_policy_fields
from jaxbandit.representable import check_representable
from jaxbandit.result import check_times, geometric_times

__all__ = [
    "RunInputs",
    "cell_params",
    "check_contract",
    "check_devices",
    "check_feedback",
    "check_inputs",
    "check_param_columns",
    "check_param_values",
]


@dataclasses.dataclass(frozen=True)
class RunInputs:
    """What a :class:`~jaxbandit.runner.SimulationRun` starts from, every value checked.

    Attributes:
        policy: the policy;  instance: one instance, or a batch (one per cell).
        params: ``{name: value}`` every hyper-parameter of the policy as given: a
            number, or one value per cell (for records and results).
        cell_params: ``{name: (C,) float64}`` the same, one value per cell.
        horizon, runs, seed, first_run: integers;  times: ``(P,)`` int64 recording rounds.
        noise_index: ``(C,)`` int64 each cell's index in the noise stream.
        dtype: float32 or float64;  chunk_size, solve_batch: speed only.
        devices: the JAX devices the runs are split over;  monitor: a Monitor or None.
    """

    policy: Policy
    instance: Instance
    params: dict
    cell_params: dict
    horizon: int
    runs: int
    seed: int
    times: np.ndarray
    noise_index: np.ndarray
    dtype: np.dtype
    chunk_size: int
    solve_batch: Optional[int]
    first_run: int
    devices: tuple
    monitor: Optional[Monitor]

    @property
    def num_cells(self) -> int:
        return len(self.noise_index)


def check_inputs(
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
) -> RunInputs:
    """The arguments of :class:`~jaxbandit.runner.SimulationRun`, checked.

    Raises:
        ValueError: bad input, naming the argument and the value;
            :class:`~jaxbandit.policy_check.PolicyError` for a policy (or monitor) that
            breaks the contract of :mod:`jaxbandit.base`.
    """
    if not isinstance(policy, Policy):
        raise ArgumentError(f"policy must be a jaxbandit.Policy (see jaxbandit.policies.make), got {policy!r}.", argument="policy")
    check_policy_fields(policy)
    check_instance("instance", instance)
    if monitor is not None and not isinstance(monitor, Monitor):
        raise ArgumentError(f"monitor must be a jaxbandit.monitors.Monitor or None, got {monitor!r}.", argument="monitor")
    horizon = integer("horizon", horizon, 1, MAX_ROUNDS)
    runs = integer("runs", runs, 1)
    chunk_size = integer("chunk_size", chunk_size, 1, MAX_ROUNDS)
    solve_batch = None if solve_batch is None else integer("solve_batch", solve_batch, 1)
    first_run = integer("first_run", first_run, 0)
    if first_run + runs > 2**32:
        raise ArgumentError(f"run indices must stay below 2**32, got first_run + runs = {first_run + runs}.", argument="runs")
    rng.seed_words(seed)  # the seed rule
    dtype = float_dtype("dtype", dtype)
    if dtype == np.float64 and not jax.config.jax_enable_x64:
        raise ArgumentError(
            "dtype='float64' needs 64-bit JAX: set JAX_ENABLE_X64=1, call "
            "jax.config.update('jax_enable_x64', True) before simulating, or simulate inside "
            "`with jax.enable_x64(True):` (as a sweep's float64 groups run).",
            argument="dtype",
        )
    times = geometric_times(horizon) if times is None else check_times(times, horizon)
    mu, sigma = np.atleast_2d(instance.mu), instance.sigma.reshape((-1,) + instance.sigma.shape[-2:])
    check_representable(mu, sigma, dtype)
    check_drawn(instance.noise)
    num_cells = mu.shape[0]
    if params is not None and not isinstance(params, dict):
        raise ArgumentError(f"params must be a dict of the policy's hyper-parameters, got {params!r}.", argument="params")
    unknown = sorted(set(params or {}) - set(policy.params))
    if unknown:  # a misspelt name would be recorded in the results but never read
        raise ArgumentError(
            f"params names {unknown}, which policy {policy.name!r} does not have; its hyper-parameters are "
            f"{sorted(policy.params) or 'none'}.",
            argument="params",
        )
    # the policy's values for the names params omits, copied: the records keep the values
    # the cells compute with, whatever the caller's arrays hold later
    merged = copy.deepcopy({**policy.params, **(params or {})})
    columns = cell_params(merged, num_cells if instance.is_batch else None)
    grid = max((len(column) for column in columns.values()), default=1)
    if not instance.is_batch and grid > 1:  # a grid on one instance: a cell per value, on its noise
        num_cells, instance = grid, stack([instance] * grid)
        noise_index = np.zeros(grid, np.int64) if noise_index is None else noise_index
    check_param_columns(columns, dtype)
    check_param_values(policy, columns, dtype)
    noise_index = _noise_index(noise_index, num_cells)
    check_feedback(policy, instance)
    unread = sorted(set(params or {}) - check_contract(policy, instance.num_arms, sorted(columns), dtype, monitor))
    if unread:  # every cell would run the value the policy's functions hold themselves
        raise ArgumentError(
            f"params gives {unread}, which no function of policy {policy.name!r} reads as ctx.params[name] (a value "
            "captured in a closure or attribute instead?): its cells would all compute the same thing.",
            argument="params",
        )
    return RunInputs(
        policy=policy, instance=instance, params=merged, cell_params=columns, horizon=horizon, runs=runs,
        seed=int(seed), times=times, noise_index=noise_index, dtype=dtype, chunk_size=chunk_size,
        solve_batch=solve_batch, first_run=first_run, devices=tuple(check_devices(devices)), monitor=monitor,
    )  # fmt: skip


def _noise_index(noise_index, num_cells: int) -> np.ndarray:
    """``(C,)`` int64 noise-stream indices (default: one per cell, in order)."""
    if noise_index is None:
        return np.arange(num_cells, dtype=np.int64)
    index = np.asarray(noise_index)
    integers = index.dtype != bool and np.issubdtype(index.dtype, np.integer)
    if index.shape != (num_cells,) or not integers or np.any(index < 0) or np.any(index >= 2**32):
        # a fraction, NaN or 2**32 would be cast onto another cell's noise stream
        raise ArgumentError(
            f"noise_index must hold one integer in [0, 2**32) per cell ({num_cells}), got {index.tolist()!r}.",
            argument="noise_index",
        )
    return index.astype(np.int64)


def check_devices(devices) -> list:
    """``devices`` as a non-empty list of distinct JAX devices (None: every visible device)."""
    if devices is None:
        return list(jax.devices())
    message = f"devices must be a non-empty sequence of JAX devices, got {devices!r}."
    if isinstance(devices, (jax.Device, str)):
        raise ArgumentError(message, argument="devices")
    try:
        devices = list(devices)
    except TypeError as err:
        raise ArgumentError(message, argument="devices") from err
    if not devices or not all(isinstance(d, jax.Device) for d in devices):
        raise ArgumentError(message, argument="devices")
    if len(set(devices)) != len(devices):
        raise ArgumentError(f"devices must be distinct (the runs are split over them), got {devices!r}.", argument="devices")
    return devices


def cell_params(params: dict, num_cells: Optional[int]) -> dict:
    """``{name: (C,) float64}``: each hyper-parameter (a number, or one value per cell)
    for every cell; ``num_cells`` None: as many as the values given per cell (1 if
    none is), a grid on one instance."""
    values = {name: float_array(f"parameter {name!r}", v, "a number or an array of numbers") for name, v in params.items()}
    if num_cells is None:  # at least one cell: an empty list of values is refused below
        num_cells = max((v.shape[0] for v in values.values() if v.ndim == 1), default=1) or 1
    columns = {}
    for name, value in values.items():
        if value.ndim > 1 or (value.ndim == 1 and value.shape[0] != num_cells):
            raise ArgumentError(
                f"parameter {name!r} must be a scalar or have one value per cell ({num_cells}), got shape {value.shape}.",
                argument=name,
            )
        columns[name] = np.array(np.broadcast_to(value, (num_cells,)), np.float64)
    return columns


def check_param_columns(columns: dict, dtype, remedy: str = "dtype='float64'", label=lambda name: f"parameter {name!r}") -> None:
    """Hyper-parameters ``{name: (C,) float64}`` as ``dtype`` holds them: finite,
    nonzero where given so, distinct values distinct
    (:func:`~jaxbandit._numbers.check_held`), and not NaN.  ``remedy`` is the caller's
    name for a wider dtype, ``label(name)`` its name for a hyper-parameter."""
    for name, column in columns.items():
        check_held(label(name), column, dtype, remedy, argument=name)
        if np.isnan(column).any():
            raise ArgumentError(f"{label(name)} must not be NaN, got {column.tolist()!r}.", argument=name)


def check_param_values(policy: Policy, columns: dict, dtype, remedy: str = "dtype='float64'") -> None:
    """Every cell's hyper-parameters ``{name: (C,) float64}`` through the policy's own
    :attr:`~jaxbandit.base.Policy.check_params`, as given and as ``dtype`` holds them
    (float32 can round a valid value onto an invalid one, ``gamma = 0.99999999`` onto
    1.0).  ``remedy`` is the caller's name for a wider dtype."""
    if policy.check_params is None or not columns:
        return
    num_cells = len(next(iter(columns.values())))
    for cell in range(num_cells):
        where = f" of cell {cell}" if num_cells > 1 else ""
        given = {name: float(column[cell]) for name, column in columns.items()}
        kept = {name: float(np.asarray(value, dtype)) for name, value in given.items()}
        rounded = [f"{name} = {given[name]!r} is {kept[name]!r} in {np.dtype(dtype).name}" for name in given if kept[name] != given[name]]
        checks = [(given, "")] + ([(kept, f" ({', '.join(rounded)}; use {remedy})")] if rounded else [])
        for values, note in checks:
            try:
                policy.check_params(values)
            except ValueError as err:
                raise ArgumentError(
                    f"params{where} for policy {policy.name!r}: {str(err).rstrip('.')}{note}.",
                    argument=getattr(err, "argument", None),
                ) from None
            except Exception as err:  # a bug of check_params itself, not a refused value
                raise PolicyError(
                    f"policy {policy.name!r}: check_params({values}) failed ({type(err).__name__}: {err})."
                ) from err


def check_feedback(policy: Policy, instance: Instance) -> None:
    """A policy that learns an arm only by playing it needs every arm to observe itself."""
    if policy.options.get("feedback") != OWN_ARM:
        return
    blind = np.argwhere(np.isinf(np.diagonal(instance.sigma, axis1=-2, axis2=-1)))
    if blind.size:
        arm = int(blind[0][-1])
        where = f"instance {int(blind[0][0])}: " if instance.is_batch else ""
        raise ArgumentError(
            f"{where}policy {policy.name!r} learns each arm only from its own plays, but arm {arm} reveals "
            f"nothing about itself (sigma[{arm}, {arm}] = inf), so it would be played forever; use a policy "
            "that learns it from other arms' plays and explores beyond its estimates (e.g. ts_n, ucb_maxn, lp_explore, "
            "ossb; ucb_n and greedy, deterministic in the estimates, can also lock onto such an arm)."
        )


_CHECKED: dict = {}  # (computation, monitor, K, params, dtype) that passed the contract check: the params read


def check_contract(policy: Policy, num_arms: int, param_names, dtype, monitor: Optional[Monitor] = None) -> set:
    """:func:`~jaxbandit.policy_check.check_policy` (and
    :func:`~jaxbandit.policy_check.check_monitor`) on one cell's abstract context, once
    per computation and shapes; the names of ``ctx.params`` the policy reads."""
    drop_older_jax_copies(policy, monitor)  # before this first trace reads them
    dtype = np.dtype(dtype)
    key = (policy_key(policy), None if monitor is None else computation_key(monitor), num_arms, tuple(param_names), dtype.name)
    if key in _CHECKED:
        return _CHECKED[key]
    square = jax.ShapeDtypeStruct((num_arms, num_arms), dtype)
    one_cell = Context(
        sigma=square,
        precision=square,
        horizon=jax.ShapeDtypeStruct((), np.int32),
        true_mean=jax.ShapeDtypeStruct((num_arms,), dtype),
        params={name: jax.ShapeDtypeStruct((), dtype) for name in param_names},
    )
    read = check_policy(policy, one_cell)
    if monitor is not None:
        check_monitor(monitor, policy, one_cell)
    _CHECKED[key] = read
    return read
