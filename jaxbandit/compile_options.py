"""XLA's compiler options for the programs whose compile time outweighs their run time.

XLA's CPU compiler spends most of an LP program's compile time on its hundreds of small
kernels, each through the fusion emitters and LLVM's optimisation.  With the elemental
emitters at LLVM -O1 (``CPU_OPTIONS``) such programs compile in much less time, to the
same bits (``tests/test_lower_bound.py``, ``scripts/record_results.py --compare``), for
some float32 speed at large K (``benchmarks/README.md``).  They serve the programs that
run once or solve LPs only: a simulation's initial state (:mod:`jaxbandit.engine`) and
the host's lower-bound programs (:mod:`jaxbandit.bound`).  A simulation's chunk step
runs slower under them (its kernels outside the LP most), so it keeps XLA's defaults
unless the simulation is short (:func:`compiles_quickly`): then its compile, not its
run, is most of its time.  The bits are the same either way (``tests/test_engine.py``,
``tests/test_lp_explore.py``).  An accelerator's compiler keeps its defaults everywhere.
"""

from __future__ import annotations

import functools
from typing import Callable

import jax

__all__ = ["CPU_OPTIONS", "Program", "QUICK_WORK", "compiles_quickly"]

CPU_OPTIONS = {"xla_cpu_use_fusion_emitters": False, "xla_backend_optimization_level": 1}

# The most work (cells x runs x horizon x arms) of a simulation whose chunk step compiles
# with CPU_OPTIONS.  Up to it the compile they save is about the run they lose, or more:
# the limit sits where the policies whose trade is closest come out about even
# (benchmarks/README.md's rows give the trade by policy and K).
QUICK_WORK = 2**24


def compiles_quickly(cells: int, runs: int, horizon: int, num_arms: int) -> bool:
    """Whether a simulation compiles its chunk step with ``CPU_OPTIONS`` (on a CPU): the
    rule of :data:`QUICK_WORK`."""
    return cells * runs * horizon * num_arms <= QUICK_WORK


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

    def lower(self, *args):
        """``jax.jit(...).lower``: the program compiled for the default backend."""
        return self.jitted(jax.default_backend()).lower(*args)

    def cache_size(self) -> int:
        """How many programs (shapes, dtypes) were compiled, on every backend."""
        return sum(jitted._cache_size() for jitted in self._jitted.values())
