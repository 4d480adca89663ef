"""A validated configuration resolved once into the sweep's plan.

:func:`resolve` builds every instance, every cell's policy (its factory called once
per parameter set), the monitor, the cell groups (one compiled program each) and the
fingerprints, checking each value where it enters: an instance constructor, a policy
factory or a monitor that refuses an argument names it (an
:class:`~jaxbandit.ArgumentError`), and the error names its key.  The directory
check, the runner and the records read the :class:`SweepConfig` it returns.
"""

from __future__ import annotations

import dataclasses
import functools
import itertools
import json
import os
import warnings
from typing import Optional, Union

import jax
import numpy as np

from jaxbandit import instances as instances_module
from jaxbandit import monitors as monitors_module
from jaxbandit import policies as policies_module
from jaxbandit._numbers import ArgumentError, describe, is_real, keyword_names
from jaxbandit.base import Policy
from jaxbandit.config.instance_file import read as read_instance_file
from jaxbandit.config.policy_modules import directory_of, importable_beside, shadowed_module
from jaxbandit.config.records import cell_label, encode_array, encode_numbers, policy_record, resolved_params
from jaxbandit.config.schema import CONSTRUCTORS, ConfigError, SweepFile, check_label, key_path, unknown_key
from jaxbandit.engine import policy_key
from jaxbandit.fingerprint import computation_key, json_digest, source_digest, stable_digest
from jaxbandit.instances import Instance, check_unique_best
from jaxbandit.monitors import Monitor
from jaxbandit.noise import GAUSSIAN, check_drawn
from jaxbandit.policy_check import PolicyError
from jaxbandit.representable import check_representable
from jaxbandit.result import DEFAULT_POINTS, geometric_times
from jaxbandit.run_inputs import RunInputs, check_contract, check_feedback, check_param_columns, check_param_values

__all__ = ["Cell", "Group", "InstanceSpec", "PolicySpec", "SweepConfig", "resolve"]

_WIDER = 'precision = "float64"'  # the remedy for a value float32 cannot hold


@dataclasses.dataclass(frozen=True)
class InstanceSpec:
    """One resolved instance of the sweep (``index`` is its noise-stream index)."""

    label: str
    index: int
    instance: Instance
    file: Optional[dict] = None  # an instance file's path as given and digest


@dataclasses.dataclass(frozen=True)
class PolicySpec:
    """One ``[[policies]]`` entry: its grid of parameter sets and their policies."""

    label: str
    name: str
    grid: tuple  # of dicts: every combination of the entry's parameter values
    built: tuple = dataclasses.field(default=(), compare=False, repr=False)  # a Policy per grid point
    keys: tuple = dataclasses.field(default=(), compare=False, repr=False)  # engine.policy_key of each


@dataclasses.dataclass(frozen=True)
class Cell:
    """One (instance, policy, parameter set, horizon) of the sweep."""

    instance: str  # instance label
    instance_index: int
    policy: str  # policy label
    policy_name: str  # registry name
    params: dict  # the parameter set as written in the config (for labels)


@dataclasses.dataclass(frozen=True)
class Group:
    """Cells simulated together as ONE compiled program: one policy computation, one
    K, one horizon; the instances stacked into a batch and the numeric
    hyper-parameters passed as per-cell arrays (``params``: ``{name: (C,) float64}``)."""

    id: str
    policy_name: str
    static: dict  # non-traced constructor arguments (part of the compiled program)
    horizon: int
    num_arms: int
    cells: tuple  # of Cell
    fingerprint: str
    policy: Policy = dataclasses.field(compare=False, repr=False)
    params: dict = dataclasses.field(compare=False, repr=False)
    instance: Instance = dataclasses.field(compare=False, repr=False)


@dataclasses.dataclass(frozen=True)
class SweepConfig:
    """A configuration resolved into its plan (see :mod:`jaxbandit.config`)."""

    source: str
    raw: dict  # the configuration as given, JSON-able ("inf" strings)
    name: str
    seed: int
    runs: int
    horizons: tuple
    precision: str
    times: Union[int, tuple]  # number of geometric points, or explicit rounds
    chunk_size: int
    solve_batch: Optional[int]
    checkpoint_every_chunks: Optional[int]
    checkpoint_every_seconds: Optional[float]
    instances: tuple  # of InstanceSpec
    policies: tuple  # of PolicySpec
    monitor: Optional[Monitor]
    groups: tuple = dataclasses.field(repr=False)
    config_fingerprint: str = ""

    def times_for(self, horizon: int) -> np.ndarray:
        """``(P,)`` int64 rounds at which regret is recorded for ``horizon``."""
        if isinstance(self.times, int):
            return geometric_times(horizon, self.times)
        explicit = np.asarray([t for t in self.times if t <= horizon], dtype=np.int64)
        if explicit.size == 0 or explicit[-1] != horizon:
            explicit = np.append(explicit, horizon)
        return explicit

    def plan(self) -> list:
        """Cell groups in execution order (deterministic for a given configuration)."""
        return list(self.groups)

    def fingerprint(self) -> str:
        """Hash of what the configuration determines: the text as written (not the
        checkpoint cadence), the resolved instances and the policies' names."""
        return self.config_fingerprint

    def resolved_policies(self) -> list:
        """Per ``[[policies]]`` entry and parameter set, the built policy's ``params``,
        ``options`` and a digest of its code (:func:`~jaxbandit.config.records.policy_record`):
        a factory default that changed, or an edited policy function, computes
        something else from the same text."""
        return self._policy_records

    def resolved_settings(self) -> dict:
        """The run settings as they resolve, defaults included: seed, runs, precision,
        each horizon's recording times, the monitor (its name and code digest) and the
        code that computes every result (:func:`~jaxbandit.fingerprint.source_digest`)."""
        return self._settings_record

    @functools.cached_property
    def _policy_records(self) -> list:  # the code digests are computed once
        return [
            {"label": spec.label, "name": spec.name, "grid": [policy_record(p) for p in spec.built]}
            for spec in self.policies
        ]

    @functools.cached_property
    def _settings_record(self) -> dict:
        monitor = self.monitor
        return {
            "seed": self.seed,
            "runs": self.runs,
            "precision": self.precision,
            "times": {str(h): self.times_for(h).tolist() for h in self.horizons},
            "monitor": None if monitor is None else {"name": monitor.name, "code": stable_digest(computation_key(monitor))},
            "code": source_digest(),
            # the mode the groups run under (a float64 group always enables it), under
            # which a policy's float64 numpy constants compute
            "x64": self.precision == "float64" or bool(jax.config.jax_enable_x64),
        }

    def instance_table(self) -> dict:
        """``{label: {"index", "mu", "sigma", "noise"}}`` with ``inf`` as the string ``"inf"``."""
        return {s.label: {"index": s.index, **_instance_record(s)} for s in self.instances}

    def run_inputs(self, group: Group) -> RunInputs:
        """What :meth:`~jaxbandit.runner.SimulationRun.from_inputs` runs for ``group``
        (every value checked when the configuration was resolved)."""
        return RunInputs(
            policy=group.policy, instance=group.instance, params=dict(group.params), cell_params=group.params,
            horizon=group.horizon, runs=self.runs, seed=self.seed, times=self.times_for(group.horizon),
            noise_index=np.asarray([c.instance_index for c in group.cells], np.int64), dtype=np.dtype(self.precision),
            chunk_size=self.chunk_size, solve_batch=self.solve_batch, first_run=0, devices=tuple(jax.devices()),
            monitor=self.monitor,
        )  # fmt: skip


def resolve(file: SweepFile, raw: dict, source: str) -> SweepConfig:
    """The plan of a validated configuration ``file`` (``raw``: the data it came from).

    Raises:
        ConfigError: naming ``source``, the key and the reason.
    """
    fail = _Failure(source)
    horizons = tuple(file.horizon) if isinstance(file.horizon, list) else (file.horizon,)
    if len(set(horizons)) != len(horizons):
        fail("horizon", f"has repeated values {list(horizons)}")
    times = _times(fail, file.times, horizons)
    every_chunks, every_seconds = file.checkpoint.every_chunks, file.checkpoint.every_seconds
    if every_chunks is None and every_seconds is None:
        every_seconds = 60.0  # every minute, unless every_chunks alone is given
    directory = directory_of(source)
    specs = _instances(fail, file.instances, file.precision, directory or os.getcwd())
    with importable_beside(directory):
        policies = _policies(fail, file.policies, file.precision, directory)
    monitor = _monitor(fail, file.monitor)
    record = encode_numbers(raw)
    fingerprint = json_digest({
        "raw": {k: v for k, v in record.items() if k != "checkpoint"},
        "instances": [_instance_record(s) for s in specs],
        "policies": [p.name for p in policies],
    })  # fmt: skip
    groups = _groups(fail, horizons, specs, policies, fingerprint, np.dtype(file.precision), monitor)
    return SweepConfig(
        source=source, raw=record, name=file.name, seed=file.seed, runs=file.runs, horizons=horizons,
        precision=file.precision, times=times, chunk_size=file.chunk_size, solve_batch=file.solve_batch,
        checkpoint_every_chunks=every_chunks, checkpoint_every_seconds=every_seconds, instances=tuple(specs),
        policies=tuple(policies), monitor=monitor, groups=tuple(groups), config_fingerprint=fingerprint,
    )  # fmt: skip


def _instance_record(spec: InstanceSpec) -> dict:
    """An instance as records hold it: its label, arrays and noise family."""
    inst = spec.instance
    record = {"label": spec.label, "mu": encode_array(inst.mu), "sigma": encode_array(inst.sigma)}
    if spec.file is not None:  # an edited file is another computation
        record["file"] = spec.file
    # a Gaussian instance is recorded as before noise families were (its fingerprint too)
    return record if inst.noise == GAUSSIAN else {**record, "noise": inst.noise.label}


class _Failure:
    """Raises :class:`ConfigError` for one source."""

    def __init__(self, source: str):
        self.source = source

    def __call__(self, key: str, reason: str):
        raise ConfigError(self.source, key, reason.rstrip("."))

    def argument(self, key: str, given, error: Exception, context: str = ""):
        """The error of a constructor, factory or monitor called with ``given``: at the
        argument it names, if it names one it was given (``context``: what the reason
        adds, e.g. which point of a grid)."""
        argument = getattr(error, "argument", None)
        self(key_path(key, argument) if argument in given else key, f"{str(error).rstrip('.')}{context}")


def _times(fail, times, horizons: tuple):
    """``times``: a number of grid points (an int) or the explicit rounds (a tuple)."""
    if isinstance(times, list):
        if any(b <= a for a, b in zip(times, times[1:])):
            fail("times", f"explicit rounds must be strictly increasing, got {times}")
        if times[-1] > max(horizons):
            fail("times", f"explicit rounds must be <= the horizon {max(horizons)}, got {times[-1]}")
        return tuple(times)
    # A grid records each round at most once: more points than rounds only cost memory.
    limit = max(max(horizons), DEFAULT_POINTS)
    if times > limit:
        fail("times", f"must be at most {limit} grid points (the longest horizon, or {DEFAULT_POINTS} if that is larger), got {times}")
    return times


def _instances(fail, entries, precision: str, directory: str) -> list:
    """The instances of the ``[[instances]]`` entries (instance files read from ``directory``)."""
    specs, defaults = [], None
    for i, entry in enumerate(entries):
        key, file = f"instances[{i}]", None
        given = {k: getattr(entry, k) for k in entry.model_fields_set if k not in ("type", "name")}
        if entry.type == "default":
            defaults = instances_module.default_instances() if defaults is None else defaults
            if entry.name not in defaults:
                fail(f"{key}.name", f"unknown default instance {entry.name!r}; known: {', '.join(defaults)}")
            inst = defaults[entry.name]
            if entry.noise is not None:
                try:
                    inst = Instance(inst.mu, inst.sigma, noise=entry.noise)
                except ValueError as err:
                    fail(f"{key}.noise", str(err))
            built = [(entry.name, inst)]
        else:
            label = entry.name or f"{entry.type}_{i}"
            if entry.type == "file":
                inst, file = _read_instance(fail, f"{key}.path", entry, directory)
            else:
                try:
                    inst = CONSTRUCTORS[entry.type](**given)
                except (ValueError, TypeError) as err:
                    fail.argument(key, given, err)
                except MemoryError as err:  # num_arms = 1000000: a sigma of 7 TiB
                    fail(key, f"too large to build ({err})")
            built = [(f"{label}/{k}", inst[k]) for k in range(inst.num_instances)] if inst.is_batch else [(label, inst)]
        for label, inst in built:
            if any(s.label == label for s in specs):
                again = (
                    "; a default instance is named by its own name: to run it again (under another noise family, "
                    "say), write it as type = \"explicit\" with its mu and sigma and a name of its own"
                ) if entry.type == "default" else ""
                given_name = entry.type == "default" or entry.name is not None
                what = "" if given_name else " (its default name, from its type and place: give it a name)"
                fail(f"{key}.name" if given_name else key, f"duplicate instance name {label!r}{what}; names must be unique{again}")
            try:
                with warnings.catch_warnings(record=True) as caught:  # said again at its key
                    warnings.simplefilter("always")
                    check_representable(inst.mu[None], inst.sigma[None], precision, _WIDER)
                for warning in caught:
                    warnings.warn(f"{fail.source}: {key} ({label}): {warning.message}", warning.category, stacklevel=2)
                check_drawn(inst.noise)
                # a study of a tie has no lower bound, and the LP policies fall back every round
                check_unique_best(inst.mu)
            except ValueError as err:  # a file's values are named at its path
                reason = f"{label}: {err}" if len(built) > 1 else str(err)
                fail(key, reason) if file is None else fail(f"{key}.path", f"{entry.path}: {reason}")
            specs.append(InstanceSpec(label, len(specs), inst, file))
    return specs


def _read_instance(fail, key: str, entry, directory: str) -> tuple:
    """The instance in the file of ``entry`` (checked as an explicit one's) and the
    file's record; errors at ``key``, naming the file."""
    try:
        found = read_instance_file(entry.path, directory)
        inst = found.instance(GAUSSIAN if entry.noise is None else entry.noise)
    except ValueError as err:
        fail(key, str(err))
    return inst, found.record()


def _policies(fail, entries, precision: str, directory: Optional[str]) -> list:
    specs, cell_labels = [], {}  # a cell's label or resolved label -> (entry index, cell index)
    for i, entry in enumerate(entries):
        key = f"policies[{i}]"
        try:
            factory = policies_module.resolve(entry.name)
        except ValueError as err:
            # a module of the same name imported first explains a missing factory too
            fail(f"{key}.name", shadowed_module(entry.name, directory) or str(err))
        if other := shadowed_module(entry.name, directory):
            fail(f"{key}.name", other)
        label = entry.label or entry.name
        if entry.label is None:  # the name is the label: a registered name may be any text
            try:
                check_label("label", label)
            except ArgumentError as err:
                fail(f"{key}.name", f"{str(err).rstrip('.')} (the label its name gives: give the entry a label)")
        params = dict(entry.model_extra)
        _check_keys(fail, key, factory, params, f"parameters of policy {entry.name!r}", ("name", "label"))
        grid = tuple(dict(combo) for combo in itertools.product(*[[(p, v) for v in vs] for p, vs in params.items()]))
        built, keys = [], []  # each policy's key as it was built
        for kwargs in grid:
            try:
                built.append(policies_module.make(entry.name, **kwargs))
            except (ValueError, TypeError) as err:
                point = ", ".join(f"{name}={value!r}" for name, value in kwargs.items())
                fail.argument(key, kwargs, err, f" (the factory called with {point})" if len(grid) > 1 else "")
            keys.append(policy_key(built[-1]))
        _check_numeric(fail, key, built, grid, np.dtype(precision))
        if any(s.label == label for s in specs):
            fail(f"{key}.label", f"duplicate policy label {label!r}; give each entry a distinct label")
        # Results, selections and figures tell cells apart by their labels, as given and
        # as resolved (defaults included, as the figures' legends show them).
        for j, (kwargs, policy) in enumerate(zip(grid, built)):
            params = dict(sorted(kwargs.items()))  # as results store them
            resolved = resolved_params(params, policy.params, policy.options)  # as a loaded cell has them
            for cell in dict.fromkeys((cell_label(label, params), cell_label(label, resolved))):
                owner = cell_labels.setdefault(cell, (i, j))
                if owner[0] == i and owner[1] != j:
                    fail(key, f"two of its cells would both be labelled {cell!r}; give grid values that print apart")
                if owner[0] != i:
                    fail(f"{key}.label", f"a cell labelled {cell!r}, as one of policies[{owner[0]}] is; give the entry another label")
                if (other := next((k for k, s in enumerate(specs) if s.label == cell), None)) is not None:
                    fail(f"{key}.label", f"a cell labelled {cell!r}, the label of policies[{other}]; give the entry another label")
        # an entry's label selects all its cells: no other entry's cell may be called so
        if (owner := cell_labels.get(label)) is not None and owner[0] != i:
            fail(f"{key}.label", f"{label!r} labels a cell of policies[{owner[0]}] already; give the entry another label")
        specs.append(PolicySpec(label=label, name=entry.name, grid=grid, built=tuple(built), keys=tuple(keys)))
    # A factory that keeps its settings where a later call changes them (a module
    # global) would make cells labelled apart compute the same thing.
    for i, spec in enumerate(specs):
        for kwargs, policy, key in zip(spec.grid, spec.built, spec.keys):
            if policy_key(policy) != key:
                point = ", ".join(f"{name}={value!r}" for name, value in kwargs.items()) or "its parameters"
                fail(
                    f"policies[{i}]",
                    f"its policy at {point} computes otherwise once the later policies are built: its factory keeps "
                    "settings where a later call changes them (a module global, a shared object); give each policy "
                    "its own (a closure, an object made per call)",
                )
    return specs


def _check_keys(fail, key: str, function, given: dict, what: str, own: tuple, taken_apart=()) -> None:
    """Every key of ``given`` (an entry's keys beyond its ``own`` ones) must be a keyword
    argument of ``function`` (other than ``taken_apart``); one that takes ``**`` or
    has no signature names a wrong one itself."""
    if (takes := keyword_names(function)) is None:
        return
    accepted = takes - set(taken_apart)
    for name in given:
        if name not in accepted:
            fail(f"{key}.{name}", unknown_key(name, accepted | set(own), f" ({what} plus {' and '.join(own)})"))


def _check_numeric(fail, key: str, built: list, grid: tuple, dtype) -> None:
    """The hyper-parameters the policies keep in their (traced) ``params``: numbers,
    held by the precision, and through each policy's own check as it holds them."""
    numeric = sorted(set(grid[0]) & set(built[0].params))
    for name in numeric:
        for kwargs in grid:  # true and "4.5" are not numbers, even where a factory converts them
            value = kwargs[name]
            if not is_real(value):
                fail(f"{key}.{name}", f"must be a number (or an array of them), got {describe(value)}")
    columns = {name: np.asarray([p.params[name] for p in built], np.float64) for name in built[0].params}
    try:
        check_param_columns(columns, dtype, _WIDER, label=str)
        for j, policy in enumerate(built):
            check_param_values(policy, {name: column[j : j + 1] for name, column in columns.items()}, dtype, _WIDER)
    except (ArgumentError, PolicyError) as err:  # a value refused, or a check_params that fails itself
        fail.argument(key, set(numeric), err)


def _monitor(fail, entry) -> Optional[Monitor]:
    if entry is None:
        return None
    known = ", ".join(sorted(monitors_module.REGISTRY))
    if entry.name not in monitors_module.REGISTRY:
        fail("monitor.name", f"unknown monitor {entry.name!r}; known monitors: {known}")
    arguments = dict(entry.model_extra)
    _check_keys(fail, "monitor", monitors_module.REGISTRY[entry.name], arguments, f"arguments of monitor {entry.name!r}",
                ("name",), taken_apart=("estimator_fn",))  # fmt: skip
    try:
        return monitors_module.make(entry.name, **arguments)
    except (ValueError, TypeError) as err:
        fail.argument("monitor", arguments, err)


def _groups(fail, horizons, specs, policies, fingerprint: str, dtype, monitor) -> list:
    """The cell groups: per horizon, policy entry, computation and K, one group."""
    groups = []
    by_shape: dict = {}  # instances stacked into one program share K and their noise family
    for spec in specs:
        by_shape.setdefault((spec.instance.num_arms, spec.instance.noise), []).append(spec)
    for horizon in horizons:
        for entry_index, policy in enumerate(policies):
            for static, points in _split_by_computation(policy):
                for (num_arms, _), members in by_shape.items():
                    cells = [
                        Cell(spec.label, spec.index, policy.label, policy.name, dict(kwargs))
                        for spec in members for kwargs, _ in points
                    ]  # fmt: skip
                    built = [p for _ in members for _, p in points]
                    instance = instances_module.stack([spec.instance for spec in members for _ in points])
                    params = {k: np.asarray([p.params[k] for p in built], np.float64) for k in built[0].params}
                    _check_runs(fail, f"policies[{entry_index}]", built[0], members, dtype, monitor)
                    group_id = f"g{len(groups):03d}"
                    description = {
                        "config": fingerprint, "id": group_id, "policy": policy.name, "static": static,
                        "horizon": horizon, "cells": [dataclasses.asdict(c) for c in cells],
                    }  # fmt: skip
                    groups.append(Group(
                        id=group_id, policy_name=policy.name, static=static, horizon=horizon, num_arms=num_arms,
                        cells=tuple(cells), fingerprint=json_digest(description), policy=built[0], params=params,
                        instance=instance,
                    ))  # fmt: skip
    return groups


def _split_by_computation(policy: PolicySpec) -> list:
    """The grid of ``policy`` as ``(static, [(kwargs, built policy), ...])`` parts, each
    one program: arguments a policy keeps out of its traced ``params`` are static, and
    two parameter sets share a program only if their policies compute the same thing
    (:func:`jaxbandit.engine.policy_key`): a value captured in a closure splits them."""
    parts: dict = {}
    for kwargs, built, computation in zip(policy.grid, policy.built, policy.keys):
        static = {k: v for k, v in kwargs.items() if k not in built.params}
        key = (json.dumps(static, sort_keys=True), computation)
        parts.setdefault(key, (static, []))[1].append((kwargs, built))
    return list(parts.values())


def _check_runs(fail, key: str, policy: Policy, members: list, dtype, monitor) -> None:
    """The checks a group's run needs: the policy's feedback on each of its instances
    (``members``: InstanceSpecs), and the policy (and monitor) contract on their shapes."""
    for spec in members:
        try:
            check_feedback(policy, spec.instance)
        except ValueError as err:
            fail(key, f"on instance {spec.label!r}: {err}")
    try:
        check_contract(policy, members[0].instance.num_arms, sorted(policy.params), dtype, monitor)
    except PolicyError as err:
        fail(key, str(err))
