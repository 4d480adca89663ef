"""The one rule for each kind of argument value: integers, numbers, arrays of numbers,
float dtypes, and whether a value fits the simulation's dtype.

``float`` and numpy convert more than users mean as numbers: ``True`` becomes 1.0,
``"2"`` 2.0, and numpy's complex values lose their imaginary part.  Every rule here
refuses those (booleans, strings, complex values) instead, so that a mistaken argument
is an error naming it rather than a run on other numbers.  Likewise a finite number
that a float32 simulation would hold as ``inf`` (or a nonzero one it would hold as 0)
is refused (:func:`check_fits`, :func:`check_held`).

Every refusal is an :class:`ArgumentError` that names the argument, so that the
sweep configuration can name the key the value came from.
"""

from __future__ import annotations

import inspect
import math
import numbers
import os
from pathlib import Path

import numpy as np

__all__ = [
    "ArgumentError",
    "boolean",
    "check_fits",
    "check_held",
    "check_nonnegative",
    "check_positive",
    "check_unit_interval",
    "decimal_literal",
    "describe",
    "first_entry",
    "float_array",
    "float_dtype",
    "holds_non_numbers",
    "integer",
    "is_real",
    "not_a_number",
    "number",
    "path",
]

_NOT_NUMBERS = (bool, np.bool_, str, bytes, complex, np.complexfloating)
_TYPE_NAMES = {bool: "boolean", str: "string", float: "float", list: "array", dict: "table", tuple: "array"}


class ArgumentError(ValueError):
    """A bad value of one named argument (``argument``: its name, or None when the
    value as a whole is wrong).  A factory of your own may raise it to name the
    hyper-parameter it refuses; a sweep configuration then names that key."""

    def __init__(self, message: str, *, argument: str | None = None):
        super().__init__(message)
        self.argument = argument


def describe(value) -> str:
    """``value`` as error messages show it: with its kind where the kind is the
    mistake (``boolean True``, ``string '10'``, ``float 1.5``), else its repr."""
    kind = _TYPE_NAMES.get(type(value))
    return f"{kind} {value!r}" if kind else repr(value)


def not_a_number(value) -> bool:
    """True for a scalar that ``float`` would take but is not meant as a number: a
    boolean, a string or a complex value (arrays: a dtype other than int or float)."""
    if isinstance(value, _NOT_NUMBERS):
        return True
    dtype = getattr(value, "dtype", None)
    return dtype is not None and np.dtype(dtype).kind not in "iuf"


def boolean(name: str, value) -> bool:
    """``value`` as a bool, or an :class:`ArgumentError` naming ``name``: only True or
    False (numpy's included), never a truthy string such as ``"no"``."""
    if not isinstance(value, (bool, np.bool_)):
        raise ArgumentError(f"{name} must be True or False, got {describe(value)}.", argument=name)
    return bool(value)


def function(name: str, value, signature: str):
    """``value`` if it is callable, or an :class:`ArgumentError` naming ``name`` and
    the ``signature`` it must have (``"(rounds_done, horizon)"``)."""
    if not callable(value):
        raise ArgumentError(f"{name} must be a function {signature}, got {describe(value)}.", argument=name)
    return value


def keyword_names(function) -> frozenset | None:
    """The keyword arguments ``function`` takes, or None where it takes any (``**``) or
    has no signature to read."""
    try:
        parameters = inspect.signature(function).parameters.values()
    except (TypeError, ValueError):
        return None
    if any(p.kind is p.VAR_KEYWORD for p in parameters):
        return None
    return frozenset(p.name for p in parameters)


def check_keywords(what: str, function, given) -> None:
    """An :class:`ArgumentError` naming the first of ``given`` (names) that ``function``
    (the factory of ``what``, e.g. ``"policy 'ucb_n'"``) does not take."""
    accepted = keyword_names(function)
    unknown = [] if accepted is None else sorted(set(given) - accepted)
    if unknown:
        raise ArgumentError(
            f"{what} got unknown parameter(s) {unknown}; it accepts {sorted(accepted) or 'none'}.", argument=unknown[0]
        )


def path(name: str, value) -> Path:
    """``value`` as a :class:`~pathlib.Path`, or an :class:`ArgumentError` naming
    ``name``: a string or an ``os.PathLike`` only (``str(3)`` or ``str(None)`` would be
    a file name), and not empty (``Path("")`` is the working directory)."""
    if not isinstance(value, (str, os.PathLike)) or not os.fspath(value):
        raise ArgumentError(f"{name} must be a path (a non-empty string or os.PathLike), got {describe(value)}.", argument=name)
    return Path(value)


def is_real(entry) -> bool:
    """An int or float scalar (Python, numpy or JAX), not a boolean."""
    if isinstance(entry, (numbers.Real, np.generic)) or hasattr(entry, "dtype"):
        return not not_a_number(entry) and getattr(entry, "ndim", 0) == 0
    return False


def holds_non_numbers(value) -> bool:
    """True if ``value`` (a scalar, an array or nested lists) holds anything but real
    numbers: None, booleans, strings, complex values, tables.  Lists are looked at entry
    by entry: numpy would promote ``[1.0, True]`` to a float array silently."""
    if hasattr(value, "dtype"):
        return not_a_number(value)
    try:
        entries = np.array(value, dtype=object).ravel().tolist()
    except (TypeError, ValueError):  # ragged: the conversion to floats names the argument
        return False
    return not all(is_real(entry) for entry in entries)


def number(name: str, value, requirement: str = "") -> float:
    """``value`` as a float, or an :class:`ArgumentError` naming ``name`` (and
    ``requirement``, e.g. ``"> 0"``) for anything that is not a number (:func:`is_real`,
    the rule array entries follow too)."""
    if is_real(value):
        try:
            return float(value)
        except (TypeError, ValueError, OverflowError):  # 10**400 is an int, not a float
            pass
    raise ArgumentError(f"{name} must be a number{' ' + requirement if requirement else ''}, got {value!r}.", argument=name)


def check_positive(name: str, value) -> float:
    """``value`` as a float, or a ``ValueError`` naming ``name`` unless finite and > 0."""
    x = number(name, value, "> 0")
    if not math.isfinite(x) or x <= 0:
        raise ArgumentError(f"{name} must be a finite number > 0, got {x!r}.", argument=name)
    return x


def check_nonnegative(name: str, value) -> float:
    """``value`` as a float, or a ``ValueError`` naming ``name`` unless finite and >= 0."""
    x = number(name, value, ">= 0")
    if not math.isfinite(x) or x < 0:
        raise ArgumentError(f"{name} must be a finite number >= 0, got {x!r}.", argument=name)
    return x


def check_unit_interval(name: str, value) -> float:
    """``value`` as a float, or a ``ValueError`` naming ``name`` unless in (0, 1)."""
    x = number(name, value, "in (0, 1)")
    if not 0 < x < 1:
        raise ArgumentError(f"{name} must be in (0, 1), got {x!r}.", argument=name)
    return x


def decimal_literal(text: str) -> float:
    """A number literal of a text format (TOML, JSON, a command line) as a float, or a
    ``ValueError`` for one beyond float64's range, which ``float`` reads as another
    number: ``1e400`` as inf, ``1e-400`` as 0 (a noise level of "no information", or a
    noise-free one)."""
    value = float(text)
    mantissa = text.lower().partition("e")[0]
    if (math.isinf(value) and "inf" not in text.lower()) or (value == 0 and any(d in "123456789" for d in mantissa)):
        raise ValueError(f"the number {text} is beyond float64's range (it would be read as {value!r})")
    return value


def integer(name: str, value, minimum: int | None, maximum: int | None = None, why: str = "") -> int:
    """``value`` as an int in ``[minimum, maximum]`` (None: unbounded), or an
    :class:`ArgumentError` naming ``name`` (``why`` explains the maximum).

    A Python or numpy integer, or a float that is exactly one (``2e4``, as TOML and
    scientific notation write large rounds), or a 0-d array (numpy or JAX) of one, as
    :func:`number` takes them; never a boolean, a string or a fraction.
    """
    if hasattr(value, "dtype") and is_real(value):  # a numpy scalar or a 0-d array: its Python number
        value = value.item()
    whole = isinstance(value, int) or (isinstance(value, float) and math.isfinite(value) and value == math.floor(value))
    if not_a_number(value) or not whole or (minimum is not None and value < minimum):
        bound = "" if minimum is None else f" >= {minimum}"
        raise ArgumentError(f"{name} must be an integer{bound}, got {describe(value)}.", argument=name)
    value = int(value)
    if maximum is not None and value > maximum:
        raise ArgumentError(f"{name} must be at most {maximum}{why}, got {value}.", argument=name)
    return value


def float_array(name: str, value, expected: str) -> np.ndarray:
    """``value`` as a new float64 array, or an :class:`ArgumentError` naming ``name``,
    saying it must be ``expected`` and showing the value."""
    if not holds_non_numbers(value):
        try:
            return np.array(value, dtype=np.float64)
        except (TypeError, ValueError, OverflowError):
            pass
    raise ArgumentError(
        f"{name} must be {expected}, got {value!r}. Booleans, strings and complex values are not taken as numbers.",
        argument=name,
    )


def float_dtype(name: str, value) -> np.dtype:
    """``value`` (``"float32"``, ``np.float64``, a dtype) as the native numpy dtype
    float32 or float64, or an :class:`ArgumentError` naming ``name``."""
    dtype = None
    names = ("float32", "float64")
    if isinstance(value, (type, np.dtype)) or (isinstance(value, str) and value in names):  # not None, not a number
        try:
            dtype = np.dtype(value)
        except (TypeError, ValueError, SyntaxError):  # numpy parses strings as dtype specs
            pass
    if dtype is None or dtype.name not in names:
        raise ArgumentError(f"{name} must be float32 or float64, got {value!r}.", argument=name)
    return np.dtype(dtype.name)  # native byte order, as JAX takes it


def first_entry(name: str, value: np.ndarray, flagged: np.ndarray, indexed: bool = False) -> str:
    """``"name = v"`` for the first entry ``v`` of ``value`` where ``flagged`` holds
    (``"name[i, j] = v"`` if ``indexed``), or ``""`` where none does: how an error
    about some entries of an array shows the one it refuses."""
    if not flagged.any():
        return ""
    where = np.argwhere(flagged)[0]
    return f"{name}{where.tolist() if indexed else ''} = {float(value[tuple(where)])!r}"


def check_fits(
    name: str,
    value: np.ndarray,
    dtype,
    remedy: str = "dtype='float64'",
    argument: str | None = None,
    indexed: bool = False,
    rescalable: bool = True,
) -> None:
    """A finite ``value`` must stay finite in ``dtype`` (float32 overflows past 3.4e38);
    the error suggests ``remedy``, the caller's name for a wider dtype (and rescaling,
    where the user chose the value's scale: ``rescalable``), and shows the entry's
    index if ``indexed``."""
    with np.errstate(over="ignore"):
        overflows = np.isfinite(value) & ~np.isfinite(value.astype(dtype))
    if entry := first_entry(name, value, overflows, indexed):
        advice = f"rescale it or use {remedy}" if rescalable else f"use {remedy}"
        raise ArgumentError(f"{entry} overflows {np.dtype(dtype).name}; {advice}.", argument=argument)


def check_held(name: str, value: np.ndarray, dtype, remedy: str = "dtype='float64'", argument: str | None = None) -> None:
    """:func:`check_fits`, no nonzero ``value`` that ``dtype`` holds as 0 (a
    hyper-parameter of 1e-46 runs as 0 in float32), and no two distinct values that
    ``dtype`` holds as one (two cells would run one value under two labels)."""
    check_fits(name, value, dtype, remedy, argument)
    if entry := first_entry(name, value, (value != 0) & (value.astype(dtype) == 0)):
        raise ArgumentError(f"{entry} is 0 in {np.dtype(dtype).name}; rescale it or use {remedy}.", argument=argument)
    distinct = np.unique(value)  # sorted, so values dtype rounds to one are neighbours
    merged = np.flatnonzero(np.diff(distinct.astype(dtype)) == 0)
    if merged.size:
        low, high = distinct[merged[0]], distinct[merged[0] + 1]
        raise ArgumentError(
            f"{name} values {float(low)!r} and {float(high)!r} are one value in {np.dtype(dtype).name}; use {remedy}.",
            argument=argument,
        )
