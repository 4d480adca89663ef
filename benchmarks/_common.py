"""Helpers shared by the benchmark scripts: machine description, instances, the NumPy
baselines' noise, timing, option lists and output."""

from __future__ import annotations

import json
import os
import platform
import sys
import time
import timeit

import jax
import numpy as np

import jaxbandit as jb
from jaxbandit import compile_options


TIMING_SETTINGS = ("PJRT_NPROC", "XLA_FLAGS")


def long_simulation_programs() -> None:
    """Compile every simulation of this process, however short, as a long one (XLA's
    defaults): a benchmark times what the long simulations it stands for run, not the
    quick-compiling program a short simulation gets on a CPU
    (:mod:`jaxbandit.compile_options`).  Called by the scripts run as programs only, so
    that importing one changes nothing."""
    compile_options.QUICK_WORK = 0


def machine() -> dict:
    """What the numbers were measured on."""
    return {
        "platform": platform.platform(),
        "processor": platform.processor() or platform.machine(),
        "cpu_count": os.cpu_count(),
        "usable_cpus": len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count(),
        # the settings that change timings without changing results (XLA's CPU threads, flags)
        "settings": {name: os.environ[name] for name in TIMING_SETTINGS if name in os.environ},
        "python": sys.version.split()[0],
        "jax": jax.__version__,
        "backend": jax.default_backend(),
        "devices": [str(d) for d in jax.devices()],
    }


def random_instance(seed: int, num_arms: int) -> jb.Instance:
    """A general side-information instance (random, asymmetric, with inf entries)."""
    return jb.instances.random(seed, num_arms, inf_prob=0.3)


def numpy_noise(seed: int, runs: int, num_arms: int):
    """``noise(t)`` for the NumPy baselines of ``tests/reference.py``: each call draws
    the next round's ``(runs, num_arms)`` standard normals (inside the timed loop, as the
    engine draws its own)."""
    gen = np.random.default_rng(seed)
    return lambda t: gen.standard_normal((runs, num_arms))


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


def best_time(fn, repeat: int = 5, warm_up: bool = False) -> float:
    """Minimum wall time of ``fn()`` over ``repeat`` calls (``fn`` must block), after one
    untimed call (compilation, caches) if ``warm_up``."""
    if warm_up:
        fn()
    return min(timeit.repeat(fn, number=1, repeat=repeat))


def best_wall_and_cpu(fn, repeat: int = 1) -> tuple[float, float]:
    """Minimum wall time and minimum process CPU time of ``fn()`` over ``repeat`` calls.
    CPU time is less disturbed than wall time by other jobs on a shared machine."""
    wall, cpu = [], []
    for _ in range(repeat):
        wall_start, cpu_start = time.perf_counter(), time.process_time()
        fn()
        wall.append(time.perf_counter() - wall_start)
        cpu.append(time.process_time() - cpu_start)
    return min(wall), min(cpu)


def emit(record: dict) -> None:
    """Print one JSON line (and flush, so partial output survives interruption)."""
    print(json.dumps(record), flush=True)
