"""Independent programs at once on a CPU's cores, from Python threads.

XLA runs the small operations of one program (a vmapped batch of LPs, a round of an LP
policy) mostly on one core of a CPU, while programs called from several Python threads
run at once.  JAX's x64 switch may be one thread's own setting (``jax.enable_x64``):
each thread here takes its caller's, so that no piece computes in another precision.
"""

from __future__ import annotations

import concurrent.futures
import os
from typing import Callable, Sequence

import jax

__all__ = ["cpu_threads", "map_on_threads"]


def cpu_threads() -> int:
    """How many programs run at once: on a CPU one per core this process may use; on an
    accelerator one (it queues its programs anyway)."""
    if jax.default_backend() != "cpu":
        return 1
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


def map_on_threads(function: Callable, items: Sequence, threads: int) -> list:
    """``[function(item) for item in items]``, on up to ``threads`` threads at once, each
    under the caller's x64 setting.  Call once alone first what still has to compile:
    threads would each compile it."""
    x64 = jax.config.jax_enable_x64

    def call(item):
        with jax.enable_x64(x64):
            return function(item)

    threads = min(threads, len(items))
    if threads <= 1:
        return [function(item) for item in items]
    with concurrent.futures.ThreadPoolExecutor(threads) as pool:
        return list(pool.map(call, items))
