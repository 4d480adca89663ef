"""Helpers shared by the benchmark scripts: machine description, timing, option lists."""

from __future__ import annotations

import json
import os
import platform
import sys
import timeit

import jax
import numpy as np


def machine() -> dict:
    """What the numbers were measured on."""
    return {
        "platform": platform.platform(),
        "processor": platform.processor() or platform.machine(),
        "cpu_count": os.cpu_count(),
        "python": sys.version.split()[0],
        "jax": jax.__version__,
        "backend": jax.default_backend(),
        "devices": [str(d) for d in jax.devices()],
    }


def int_list(parser, option: str, text: str, smallest: int) -> list:
    """``"5,10"`` -> ``[5, 10]`` (empty items skipped); a parser error naming ``option``
    and the value for anything else or a value below ``smallest``."""
    try:
        values = [int(x) for x in text.split(",") if x.strip()]
    except ValueError:
        parser.error(f"{option}: expected comma-separated integers, got {text!r}")
    if any(v < smallest for v in values):
        parser.error(f"{option}: every value must be >= {smallest}, got {text!r}")
    return values


def best_time(fn, repeat: int = 5) -> float:
    """Minimum wall time of ``fn()`` over ``repeat`` calls (``fn`` must block)."""
    return min(timeit.repeat(fn, number=1, repeat=repeat))


def emit(record: dict) -> None:
    """Print one JSON line (and flush, so partial output survives interruption)."""
    print(json.dumps(record), flush=True)


def numpy_round(gen, mu, noise_sd, precision, arms, weights, sums, counts) -> None:
    """One round of the NumPy baselines, in place: draw the samples revealed by ``arms``
    (``(runs,)``) and add them to the weighted statistics (``(runs, K)`` arrays)."""
    z = gen.standard_normal(weights.shape)
    values = mu + noise_sd[arms] * z
    w = precision[arms]
    weights += w
    sums += w * values
    counts[np.arange(len(arms)), arms] += 1
