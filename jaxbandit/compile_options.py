"""XLA's compiler options for the programs whose compile time outweighs their run time.

XLA's CPU compiler spends most of an LP program's compile time on its hundreds of small
kernels, each through the fusion emitters and LLVM's optimisation.  With the elemental
emitters at LLVM -O1 (``CPU_OPTIONS``) such programs compile in much less time, to the
same bits (``tests/test_lower_bound.py``, ``scripts/record_results.py --compare``), for
some float32 speed at large K (``benchmarks/README.md``).  They serve the programs that
run once or solve LPs only: a simulation's initial state (:mod:`jaxbandit.engine`) and
the host's lower-bound programs (:mod:`jaxbandit.bound`).  A simulation's chunk step
keeps XLA's defaults: its kernels outside the LP run slower under these options, and a
simulation runs for longer than it compiles.  An accelerator's compiler keeps its
defaults everywhere.
"""

from __future__ import annotations

import functools
from typing import Callable

import jax

__all__ = ["CPU_OPTIONS", "Program"]

CPU_OPTIONS = {"xla_cpu_use_fusion_emitters": False, "xla_backend_optimization_level": 1}


class Program:
    """``jax.jit(function, **jit_arguments)``, compiled with ``CPU_OPTIONS`` where the
    default backend is a CPU.  Options must be fixed when a function is jitted, and the
    backend is known only once JAX has started: one jitted function per backend, made
    at its first call."""

    def __init__(self, function: Callable, **jit_arguments):
        self._function = function
        self._jit_arguments = jit_arguments
        self._jitted: dict = {}
        functools.update_wrapper(self, function)

    def jitted(self, backend: str):
        """The jitted function that compiles for ``backend`` (a ``jax.default_backend()``)."""
        if backend not in self._jitted:
            options = CPU_OPTIONS if backend == "cpu" else None
            self._jitted[backend] = jax.jit(self._function, compiler_options=options, **self._jit_arguments)
        return self._jitted[backend]

    def __call__(self, *args):
        return self.jitted(jax.default_backend())(*args)

    def cache_size(self) -> int:
        """How many programs (shapes, dtypes) were compiled, on every backend."""
        return sum(jitted._cache_size() for jitted in self._jitted.values())
