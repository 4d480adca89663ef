"""What the argument checks take as a number, and whether it fits the simulation's dtype.

``float`` and numpy convert more than users mean as numbers: ``True`` becomes 1.0,
``"2"`` 2.0, and numpy's complex values lose their imaginary part.  Every check of a
numeric argument refuses those (booleans, strings, complex values) instead, so that a
mistaken argument is an error naming it rather than a run on other numbers.  Likewise
a finite number that a float32 simulation would hold as ``inf`` (or a nonzero one it
would hold as 0) is refused (:func:`check_fits`, :func:`check_held`).
"""

from __future__ import annotations

import numpy as np

_NOT_NUMBERS = (bool, np.bool_, str, bytes, complex, np.complexfloating)


def not_a_number(value) -> bool:
    """True for a scalar that ``float`` would take but is not meant as a number: a
    boolean, a string or a complex value (arrays: a dtype other than int or float)."""
    if isinstance(value, _NOT_NUMBERS):
        return True
    dtype = getattr(value, "dtype", None)
    return dtype is not None and np.dtype(dtype).kind not in "iuf"


def holds_non_numbers(value) -> bool:
    """True if ``value`` (a scalar, an array or nested lists) holds None or anything
    :func:`not_a_number` refuses.  Lists are looked at entry by entry: numpy would
    promote ``[1.0, True]`` to a float array silently."""
    if hasattr(value, "dtype"):
        return not_a_number(value)
    try:
        entries = np.array(value, dtype=object).ravel().tolist()
    except (TypeError, ValueError):  # ragged: the conversion to floats names the argument
        return False
    return any(entry is None or not_a_number(entry) for entry in entries)


def number(name: str, value, requirement: str = "") -> float:
    """``value`` as a float, or a ``ValueError`` naming ``name`` (and ``requirement``,
    e.g. ``"> 0"``) for anything that is not a number, by :func:`not_a_number`'s rule."""
    if not not_a_number(value):
        try:
            return float(value)
        except (TypeError, ValueError):
            pass
    raise ValueError(f"{name} must be a number{' ' + requirement if requirement else ''}, got {value!r}.")


def integer(name: str, value, minimum: int) -> int:
    """``value`` as an int: a Python or numpy integer (not a bool, not a float that
    happens to be whole) of at least ``minimum``, or a ``ValueError`` naming ``name``."""
    if not_a_number(value) or not isinstance(value, (int, np.integer)) or value < minimum:
        raise ValueError(f"{name} must be an integer >= {minimum}, got {value!r}.")
    return int(value)


def float_array(name: str, value, expected: str) -> np.ndarray:
    """``value`` as a new float64 array, or a ``ValueError`` naming ``name``, saying it
    must be ``expected`` and showing the value."""
    if not holds_non_numbers(value):
        try:
            return np.array(value, dtype=np.float64)
        except (TypeError, ValueError):
            pass
    raise ValueError(
        f"{name} must be {expected}, got {value!r}. Booleans, strings and complex values are not taken as numbers."
    )


def check_fits(name: str, value: np.ndarray, dtype, remedy: str = "dtype='float64'") -> None:
    """A finite ``value`` must stay finite in ``dtype`` (float32 overflows past 3.4e38);
    the error suggests ``remedy``, the caller's name for a wider dtype."""
    with np.errstate(over="ignore"):
        overflows = np.isfinite(value) & ~np.isfinite(value.astype(dtype))
    if overflows.any():
        raise ValueError(
            f"{name} = {float(value[overflows].flat[0])!r} overflows {np.dtype(dtype).name}; rescale it or use {remedy}."
        )


def check_held(name: str, value: np.ndarray, dtype, remedy: str = "dtype='float64'") -> None:
    """:func:`check_fits`, and no nonzero ``value`` that ``dtype`` holds as 0 (a
    hyper-parameter of 1e-46 runs as 0 in float32)."""
    check_fits(name, value, dtype, remedy)
    vanishing = (value != 0) & (value.astype(dtype) == 0)
    if vanishing.any():
        raise ValueError(
            f"{name} = {float(value[vanishing].flat[0])!r} is 0 in {np.dtype(dtype).name}; rescale it or use {remedy}."
        )
