"""jaxbandit: vectorized Monte Carlo simulation of Gaussian bandits with side observations."""

from jaxbandit import (
    base,
    bound,
    bound_lp,
    compaction,
    compile_cache,
    config,
    distributed,
    engine,
    environment,
    estimator,
    fingerprint,
    instances,
    io,
    lp,
    monitors,
    policies,
    policy_check,
    result,
    rng,
    runner,
    shards,
    sweep,
)
from jaxbandit.base import Context, Decision, Policy, Solver, Stage, play
from jaxbandit.bound import LowerBound, lower_bound
from jaxbandit.config import ConfigError
from jaxbandit.instances import Instance
from jaxbandit.io import load
from jaxbandit.policy_check import PolicyError
from jaxbandit.result import Result, geometric_times
from jaxbandit.runner import InvalidArmError, NaNStateError, SimulationRun, simulate

__version__ = "0.1.0"

__all__ = [
    "ConfigError",
    "Context",
    "Decision",
    "Instance",
    "InvalidArmError",
    "NaNStateError",
    "LowerBound",
    "Policy",
    "PolicyError",
    "Result",
    "SimulationRun",
    "Solver",
    "Stage",
    "base",
    "bound",
    "bound_lp",
    "compaction",
    "compile_cache",
    "config",
    "distributed",
    "engine",
    "environment",
    "estimator",
    "fingerprint",
    "geometric_times",
    "instances",
    "io",
    "load",
    "lower_bound",
    "lp",
    "monitors",
    "play",
    "policies",
    "policy_check",
    "result",
    "rng",
    "runner",
    "shards",
    "simulate",
    "sweep",
]
