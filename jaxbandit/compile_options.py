"""XLA's compiler options for the programs whose compile time outweighs their run time.

XLA's CPU compiler spends most of an LP program's compile time on its hundreds of small
kernels, each through the fusion emitters and LLVM's optimisation.  With the elemental
emitters at LLVM -O1 (``CPU_OPTIONS``) such programs compile in much less time, to the
same bits (``tests/test_lower_bound.py``, ``scripts/record_results.py --compare``), for
some float32 speed at large K (``benchmarks/README.md``).  They serve the programs that
run once or solve LPs only: a simulation's initial state (:mod:`jaxbandit.engine`) and
the host's lower-bound programs (:mod:`jaxbandit.bound`).  A simulation's chunk step
runs slower under them (its kernels outside the LP most), so it keeps XLA's defaults
unless the simulation is short (:func:`chunk_mode`): then its compile, not its run, is
most of its time, and for the shortest LLVM's optimisation is skipped too
(``DRAFT_OPTIONS``: half the compile again, a few times the run).  The bits are the
same in every mode (``tests/test_engine.py``, ``tests/test_lp_explore.py``).  An
accelerator's compiler keeps its defaults everywhere.
"""

from __future__ import annotations

import functools
from typing import Callable, Optional

import jax

__all__ = ["CPU_OPTIONS", "DRAFT_OPTIONS", "DRAFT_WORK", "MODES", "Program", "QUICK_WORK", "chunk_mode"]

CPU_OPTIONS = {"xla_cpu_use_fusion_emitters": False, "xla_backend_optimization_level": 1}
DRAFT_OPTIONS = {"xla_cpu_use_fusion_emitters": False, "xla_backend_optimization_level": 0}
MODES = {"default": None, "quick": CPU_OPTIONS, "draft": DRAFT_OPTIONS}  # a chunk step's, by chunk_mode

# The most work (cells x runs x horizon x arms) of a simulation whose chunk step compiles
# with CPU_OPTIONS.  Up to it the compile they save is about the run they lose, or more:
# the limit sits where the policies whose trade is closest come out about even
# (benchmarks/README.md's rows give the trade by policy and K).
QUICK_WORK = 2**24
# Of those, the most work of a simulation whose chunk step compiles with DRAFT_OPTIONS,
# counted as cells x runs x horizon x arms**3: what unoptimised code loses grows about as
# an LP's tableau work (arms**3), and the LP policies break even at about ten times this
# limit at every K measured.  The other policies, whose programs are small, come out
# about even at it.
DRAFT_WORK = 2**25


def chunk_mode(cells: int, runs: int, horizon: int, num_arms: int) -> str:
    """The key of :data:`MODES` a simulation's chunk step compiles with (on a CPU): the
    rule of :data:`QUICK_WORK` and, within it, of :data:`DRAFT_WORK`."""
    run_rounds = cells * runs * horizon
    if run_rounds * num_arms > QUICK_WORK:
        return "default"
    return "quick" if run_rounds * num_arms**3 > DRAFT_WORK else "draft"


class Program:
    """``jax.jit(function, **jit_arguments)``, compiled with ``options`` (``CPU_OPTIONS``
    unless given) where the default backend is a CPU.  Options must be fixed when a
    function is jitted, and the backend is known only once JAX has started: one jitted
    function per backend, made at its first call."""

    def __init__(self, function: Callable, options: Optional[dict] = None, **jit_arguments):
        self._function = function
        self._options = CPU_OPTIONS if options is None else options
        self._jit_arguments = jit_arguments
        self._jitted: dict = {}
        functools.update_wrapper(self, function)

    def jitted(self, backend: str):
        """The jitted function that compiles for ``backend`` (a ``jax.default_backend()``)."""
        if backend not in self._jitted:
            options = self._options if backend == "cpu" else None
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
