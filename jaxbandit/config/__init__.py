"""Sweep configurations: TOML files (or dicts) describing a regret sweep.

A sweep is instances x policies x hyper-parameter grids x horizons x runs.  A
configuration is read in one pass: :mod:`~jaxbandit.config.schema` validates the file
(which keys, of which kinds), :mod:`~jaxbandit.config.plan` resolves it into the
sweep's plan (instances, each cell's policy built once, cell groups, fingerprints),
and :mod:`~jaxbandit.config.records` writes what a sweep directory records of it.
Every failure is a :class:`ConfigError` naming the file, the key and the reason,
before anything is compiled or written.

Schema (all keys not listed are errors)::

    name = "demo"             # optional label of the sweep
    seed = 0                  # integer >= 0
    runs = 200                # runs per cell, integer >= 1
    horizon = 10000           # integer in [1, 2**30] (2e4 is one), or a list of them (one sweep axis)
    precision = "float32"     # or "float64" (enables 64-bit JAX for the sweep)
    times = 100               # geometric grid of ~N points (N <= the longest horizon, or
                              #   100), or an explicit list of rounds
    chunk_size = 1024         # rounds per compiled chunk (checkpoint granularity)
    solve_batch = 256         # optional: LP solve buffer of policies with a solve step

    [checkpoint]              # how often a running cell group saves its state
    every_chunks = 100        # (does not change results, so not part of the fingerprint)
    every_seconds = 60.0

    [[instances]]
    type = "bandit"           # a constructor of jaxbandit.instances: bandit,
    name = "b5"               #   full_information, graph, revealing_arm, random;
    mu = [1.0, 0.8, 0.5]      #   "default" (name picks one of default_instances());
    sigma = 1.0               #   "explicit" (mu and sigma given; inf or "inf" allowed);
                              #   "file" (path = "graph.npz": mu and sigma in a .npz,
                              #   .json or .toml file, relative to this file's directory)

    [monitor]                 # optional: a per-round check of every cell's policy state
    name = "estimator_deviation"   # (jaxbandit.monitors), recorded at the recording times
    alphas = [1.0, 4.5]

    [[policies]]
    name = "ucb_n"            # a registered policy (jaxbandit.policies.names()), or an
                              #   import path "package.module:factory" of your own
    label = "UCB-N"           # optional display label
    alpha = [0.25, 1, 4.01]   # hyper-parameters; a list is a grid (Cartesian product)

An instance file is read as an explicit instance (:mod:`~jaxbandit.config.instance_file`);
a sweep directory records its path and the digest of its contents, so that the same
configuration over an edited file is refused.

Numeric hyper-parameters that a policy keeps in its ``params`` are traced by the engine,
so a grid of them on instances with the same number of arms is one compiled program;
cells whose policies compute different things (a hyper-parameter captured in a
closure, another factory) run as separate programs (:meth:`SweepConfig.plan`).
"""

from __future__ import annotations

import importlib.resources
import os
from typing import Union

from jaxbandit._numbers import ArgumentError, describe
from jaxbandit.config.plan import Cell, Group, InstanceSpec, PolicySpec, SweepConfig, resolve
from jaxbandit.config.schema import ConfigError, validate
from jaxbandit.files import parse_toml

__all__ = ["Cell", "ConfigError", "Group", "InstanceSpec", "PolicySpec", "SweepConfig", "demo_config", "from_dict", "load", "loads"]


def from_dict(data: dict, source: str = "<dict>") -> SweepConfig:
    """Validate a configuration dict (as parsed from TOML; numpy arrays allowed) and
    resolve it into its plan."""
    return resolve(*validate(data, source), source)


def loads(text: str, source: str = "<string>") -> SweepConfig:
    """Parse, validate and resolve TOML text."""
    try:
        data = parse_toml(text)
    except ValueError as err:  # a decoding error, or a literal beyond float64
        raise ConfigError(source, "", f"invalid TOML: {err}") from err
    return from_dict(data, source)


def load(config: Union[str, os.PathLike, dict, SweepConfig]) -> SweepConfig:
    """A resolved :class:`SweepConfig` from a TOML path, a dict or a SweepConfig."""
    if isinstance(config, SweepConfig):
        return config
    if isinstance(config, dict):
        return from_dict(config, "<dict>")
    if not isinstance(config, (str, os.PathLike)):
        raise ArgumentError(
            f"config must be a TOML file's path, a dict or a SweepConfig, got {describe(config)}.", argument="config"
        )
    path = os.fspath(config)
    try:
        with open(path, "rb") as handle:
            text = handle.read().decode("utf-8")
    except OSError as err:
        raise ConfigError(path, "", f"cannot read the file: {err.strerror}") from err
    except UnicodeDecodeError as err:
        raise ConfigError(path, "", f"not UTF-8 text ({err.reason} at byte {err.start})") from err
    return loads(text, path)


def demo_config() -> SweepConfig:
    """The demo sweep run by ``jaxbandit demo`` (the package's ``demo.toml``)."""
    text = importlib.resources.files("jaxbandit").joinpath("demo.toml").read_text(encoding="utf-8")
    return loads(text, "<demo>")
