"""What a simulation returns, and the rounds at which it records regret."""

from __future__ import annotations

import dataclasses

import numpy as np

from jaxbandit import frames
from jaxbandit._numbers import ArgumentError, holds_non_numbers, integer

__all__ = ["Result", "check_times", "geometric_times", "standard_error"]


DEFAULT_POINTS = 100  # points of the default geometric grid of recording times
MAX_HORIZON = 2**62  # rounds an int64 grid holds with room to spare
MAX_POINTS = 2**30  # as many points as the longest simulation has rounds


def geometric_times(horizon: int, num_points: int = DEFAULT_POINTS) -> np.ndarray:
    """About ``num_points`` distinct rounds from 1 to ``horizon``, geometrically spaced.

    Args:
        horizon: the last round, an integer >= 1.
        num_points: an integer >= 2.

    Returns:
        ``(P,)`` int64, strictly increasing, ``P <= num_points``, last == ``horizon``.
    """
    horizon = integer("horizon", horizon, 1, MAX_HORIZON)
    num_points = integer("num_points", num_points, 2, MAX_POINTS, " (the grid is built in full)")
    grid = np.geomspace(1, horizon, num_points)
    times = np.unique(np.round(grid).astype(np.int64))
    times = times[(times >= 1) & (times <= horizon)]
    if times[-1] != horizon:
        times = np.append(times, horizon)
    return times


def check_times(times, horizon: int) -> np.ndarray:
    """``times`` as ``(P,)`` int64 rounds in ``[1, horizon]``, strictly increasing, with
    ``horizon`` appended if missing (the final regret is always recorded)."""
    horizon = integer("horizon", horizon, 1, MAX_HORIZON)
    if holds_non_numbers(times):  # numpy would read [True, 5] as rounds 1 and 5
        raise ArgumentError(f"times must be integers, got {times!r}.", argument="times")
    try:
        arr = np.asarray(times)
    except ValueError:  # ragged
        arr = np.empty((0, 0))
    if arr.ndim != 1 or arr.size == 0:
        raise ArgumentError(f"times must be a non-empty 1-D sequence of rounds, got shape {arr.shape}.", argument="times")
    if np.issubdtype(arr.dtype, np.integer):
        if arr.max() > horizon or arr.min() < 1:  # before the cast: a uint64 beyond int64 would wrap
            raise ArgumentError(f"times must lie in [1, horizon={horizon}], got {arr.tolist()}.", argument="times")
    elif not np.issubdtype(arr.dtype, np.floating) or not np.all(np.isfinite(arr)) or np.any(arr != np.round(arr)):
        raise ArgumentError(f"times must be integers, got {arr.tolist()}.", argument="times")
    elif arr.max() > horizon or arr.min() < 1:  # before the cast: 1e20 would wrap around in int64
        raise ArgumentError(f"times must lie in [1, horizon={horizon}], got {arr.tolist()}.", argument="times")
    arr = arr.astype(np.int64)  # signed: differences of unsigned times would wrap around
    if np.any(np.diff(arr) <= 0):
        raise ArgumentError(f"times must be strictly increasing, got {arr.tolist()}.", argument="times")
    if arr[0] < 1 or arr[-1] > horizon:
        raise ArgumentError(f"times must lie in [1, horizon={horizon}], got {arr.tolist()}.", argument="times")
    if arr[-1] != horizon:
        arr = np.append(arr, horizon)
    return arr.astype(np.int64)


def standard_error(regret: np.ndarray, axis: int = -2) -> np.ndarray:
    """Standard error of the mean of ``regret`` over its runs ``axis`` (NaN for one run)."""
    runs = regret.shape[axis]
    if runs < 2:
        return np.full(np.delete(regret.shape, axis), np.nan)
    return regret.std(axis=axis, ddof=1) / np.sqrt(runs)


@dataclasses.dataclass(frozen=True, eq=False)  # arrays have no one truth value: == is identity
class Result:
    """Outcome of :func:`jaxbandit.simulate`.

    Attributes:
        times: ``(P,)`` int, increasing, last == horizon: rounds at which regret was recorded.
        regret: ``(runs, P)`` pseudo-regret ``sum_j N_j(t) Delta_j`` (a leading cell
            axis for a batch of instances or per-cell parameters), computed in the
            simulation's dtype from the counts and the gaps of the means as it holds
            them (so to its rounding: the gap of 1.0 and 0.8 reads 0.1999999881 in
            float32), returned as float64.
        counts: ``(runs, K)`` int64 plays of each arm at the horizon (leading cell axis
            for a batch).
        diagnostics: the policy's per-run counters, each ``(runs,)`` (or ``(C, runs)``).
        policy: the policy's name;  params: its hyper-parameters;  options: static options.
        seed, horizon, runs, dtype: as simulated.  wall_time: seconds.
        first_run: the index of the first run (the runs are ``first_run ..
            first_run + runs - 1`` of the seed's stream; see :func:`jaxbandit.simulate`).
        monitor: a monitor's reports at ``times``, each ``(runs, P)`` (or ``(C, runs, P)``);
            empty without a monitor (see :mod:`jaxbandit.monitors`).
        noise: the instance's noise family, as its label (``"gaussian"``,
            ``"student_t(df=3)"``; see :mod:`jaxbandit.noise`).
    """

    # the arrays stay out of the repr: a notebook cell that shows a result shows a line
    times: np.ndarray = dataclasses.field(repr=False)
    regret: np.ndarray = dataclasses.field(repr=False)
    counts: np.ndarray = dataclasses.field(repr=False)
    diagnostics: dict = dataclasses.field(repr=False)
    policy: str
    params: dict
    options: dict
    seed: int
    horizon: int
    runs: int
    dtype: str
    wall_time: float
    monitor: dict = dataclasses.field(default_factory=dict, repr=False)
    noise: str = "gaussian"
    first_run: int = 0

    @property
    def final_regret(self) -> np.ndarray:
        """``(runs,)`` (or ``(C, runs)``) regret at the horizon."""
        return self.regret[..., -1]

    def mean_regret(self) -> np.ndarray:
        """``(P,)`` (or ``(C, P)``) mean over runs."""
        return self.regret.mean(axis=-2)

    def standard_error(self) -> np.ndarray:
        """``(P,)`` (or ``(C, P)``) standard error of the mean over runs (NaN for one run)."""
        return standard_error(self.regret)

    def to_pandas(self, curves: bool = False):
        """A long :class:`pandas.DataFrame`: one row per instance (of a batch) and run, or
        with ``curves`` per instance, run and recording time
        (:func:`jaxbandit.frames.result_frame`)."""
        return frames.result_frame(self, curves=curves)

    def to_xarray(self):
        """An :class:`xarray.Dataset` with dimensions ``(instance, run, time)``, or
        ``(run, time)`` for one instance (:func:`jaxbandit.frames.result_dataset`)."""
        return frames.result_dataset(self)
