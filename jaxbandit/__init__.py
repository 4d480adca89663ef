"""jaxbandit: vectorized Monte Carlo simulation of Gaussian bandits with side observations."""

from jaxbandit import base, compile_cache, config, environment, estimator, instances, io, lp, policies, rng, sweep
from jaxbandit.base import Context, Decision, Policy
from jaxbandit.config import ConfigError
from jaxbandit.instances import Instance
from jaxbandit.io import load
from jaxbandit.lower_bound import LowerBound, lower_bound
from jaxbandit.simulate import Result, SimulationRun, geometric_times, simulate

__version__ = "0.1.0"

__all__ = [
    "ConfigError",
    "Context",
    "Decision",
    "Instance",
    "LowerBound",
    "Policy",
    "Result",
    "SimulationRun",
    "base",
    "compile_cache",
    "environment",
    "estimator",
    "geometric_times",
    "instances",
    "io",
    "load",
    "lower_bound",
    "lp",
    "config",
    "sweep",
    "policies",
    "rng",
    "simulate",
]
