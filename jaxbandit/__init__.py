"""jaxbandit: vectorized Monte Carlo simulation of Gaussian bandits with side observations."""

from jaxbandit import base, environment, estimator, instances, policies, rng
from jaxbandit.base import Context, Decision, Policy
from jaxbandit.instances import Instance
from jaxbandit.simulate import Result, SimulationRun, geometric_times, simulate

__version__ = "0.1.0"

__all__ = [
    "Context",
    "Decision",
    "Instance",
    "Policy",
    "Result",
    "SimulationRun",
    "base",
    "environment",
    "estimator",
    "geometric_times",
    "instances",
    "policies",
    "rng",
    "simulate",
]
