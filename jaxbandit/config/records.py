"""What a sweep records of its configuration: JSON that a later run is checked against.

A sweep directory keeps the configuration as written, the instances as they resolve,
each cell's policy as it resolves (its numeric ``params``, ``options`` and a digest of
its code) and the run settings with their defaults: the same configuration text whose
defaults, instances or policy code changed computes something else, and is refused.
JSON holds no ``inf``: arrays write it as the string ``"inf"``.
"""

from __future__ import annotations

import math

import numpy as np

from jaxbandit.base import Policy, option_params, options_record
from jaxbandit.engine import policy_code

__all__ = [
    "cell_label", "decode_array", "decode_numbers", "encode_array", "encode_numbers", "policy_record", "resolved_params",
]  # fmt: skip


def cell_label(policy: str, params: dict) -> str:
    """A cell's label in results and plots: the policy label plus the parameters the
    configuration gave it, e.g. ``"ucb_n(alpha=0.5)"``."""
    if not params:
        return policy
    return f"{policy}({', '.join(f'{k}={v}' for k, v in params.items())})"


def resolved_params(written: dict, numbers: dict, options: dict) -> dict:
    """A cell's hyper-parameters as its policy resolved them, defaults included, in the
    order results hold them: those ``written`` in the configuration, then by name its
    numeric ``params`` (as floats) and its static options
    (:func:`~jaxbandit.base.option_params` of ``Policy.options``)."""
    resolved = {**{name: float(value) for name, value in numbers.items()}, **option_params(options)}
    return {**written, **dict(sorted(resolved.items()))}


def encode_array(array) -> list:
    """Nested lists with ``inf`` written as ``"inf"`` (JSON and TOML cannot hold inf)."""
    return encode_numbers(np.asarray(array).tolist())


def encode_numbers(value):
    """``value`` (nested lists, tables, numbers) with every ``inf`` as ``"inf"``."""
    if isinstance(value, dict):
        return {k: encode_numbers(v) for k, v in value.items()}
    if isinstance(value, list):
        return [encode_numbers(v) for v in value]
    if isinstance(value, float) and math.isinf(value):
        return "inf" if value > 0 else "-inf"
    return value


def decode_numbers(values: dict) -> dict:
    """Inverse of :func:`encode_numbers` for a table of numbers: ``{name: float}``."""
    return {name: float(value) for name, value in values.items()}


def decode_array(value) -> np.ndarray:
    """Inverse of :func:`encode_array`: nested lists -> float64 array."""

    def decode(v):
        if isinstance(v, list):
            return [decode(x) for x in v]
        return float(v) if isinstance(v, str) else v

    return np.asarray(decode(value), dtype=np.float64)


def policy_record(policy: Policy) -> dict:
    """A built policy's ``params`` (numbers; non-finite ones as strings), ``options``
    (:func:`jaxbandit.base.options_record`) and ``code``
    (:func:`jaxbandit.engine.policy_code`)."""

    def number(value):
        value = np.asarray(value, dtype=np.float64)
        if value.ndim:
            return [number(v) for v in value]
        return float(value) if np.isfinite(value) else str(float(value))

    return {
        "params": {k: number(v) for k, v in policy.params.items()},
        "options": options_record(policy.options),
        "code": policy_code(policy),
    }
