"""jaxbandit: vectorized Monte Carlo simulation of Gaussian bandits with side observations.

The public API is what this module exports (``__all__``): the instances, the policies
and their contract, :func:`simulate`, the lower bound, sweeps, their results and
their paired comparison.  The
rest of the package (the engine, the LP solver, the records) is reachable as
submodules, for those who extend it.
"""

from jaxbandit import (
    comparison, compile_cache, config, distributed, estimator, frames, instances, monitors, noise, policies, rng,
    shards, summary, sweep,
)  # fmt: skip
from jaxbandit._numbers import ArgumentError
from jaxbandit.base import Context, Decision, Policy, Solver, Stage, play
from jaxbandit.bound import LowerBound, lower_bound
from jaxbandit.comparison import PairedDifference, compare
from jaxbandit.config import ConfigError
from jaxbandit.instances import Instance
from jaxbandit.io import load
from jaxbandit.policy_check import PolicyError
from jaxbandit.result import Result, geometric_times
from jaxbandit.runner import InvalidArmError, NaNStateError, SimulationRun, simulate
from jaxbandit.stopping import Stopped

__version__ = "0.1.0"

__all__ = [
    "ArgumentError",
    "ConfigError",
    "Context",
    "Decision",
    "Instance",
    "InvalidArmError",
    "LowerBound",
    "NaNStateError",
    "PairedDifference",
    "Policy",
    "PolicyError",
    "Result",
    "SimulationRun",
    "Solver",
    "Stage",
    "Stopped",
    "compare",
    "comparison",
    "compile_cache",
    "config",
    "distributed",
    "estimator",
    "frames",
    "geometric_times",
    "instances",
    "load",
    "lower_bound",
    "monitors",
    "noise",
    "play",
    "policies",
    "rng",
    "shards",
    "simulate",
    "summary",
    "sweep",
]
