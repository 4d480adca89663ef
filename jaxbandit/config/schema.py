"""The sweep configuration file, as a declarative schema (pydantic v2).

The schema says which keys exist, which are tables, arrays or numbers, and their
defaults; each leaf value of the run settings goes through the one rule of its kind
(:mod:`jaxbandit._numbers`).  What an instance constructor, a policy factory or a
monitor does with its arguments is theirs to check, by the same rules (the schema reads
``"inf"`` as inf where they take numbers), and :mod:`jaxbandit.config.plan` names the
key of any argument they refuse.  Every failure is a :class:`ConfigError` naming the file,
the key (its full path, e.g. ``policies[1].alpha``) and the value.
"""

from __future__ import annotations

import datetime
import difflib
import inspect
import itertools
import math
import typing
from typing import Annotated, Any, Dict, Optional, Union

import numpy as np
from pydantic import BaseModel, BeforeValidator, ConfigDict, Discriminator, Field, Tag, ValidationError, create_model

from jaxbandit import instances
from jaxbandit import noise as noise_module
from jaxbandit._numbers import ArgumentError, check_positive, describe, float_dtype, integer, number
from jaxbandit.engine import MAX_ROUNDS
from jaxbandit.result import DEFAULT_POINTS

__all__ = [
    "CONSTRUCTORS", "ConfigError", "INSTANCE_TYPES", "SweepFile", "check_label", "key_path", "split_labels", "unknown_key",
    "validate",
]  # fmt: skip

_INF_STRINGS = {"inf", "+inf", "infinity", "+infinity"}


class ConfigError(ValueError):
    """A sweep configuration is invalid.

    Attributes:
        source: the file (or ``"<dict>"``) the configuration came from.
        key: path of the offending key, e.g. ``"policies[1].alpha"`` (``""``: the whole file).
        reason: what is wrong with it.
    """

    def __init__(self, source: str, key: str, reason: str):
        self.source, self.key, self.reason = source, key, reason
        where = f"key '{key}'" if key else "top level"
        super().__init__(f"{source}: {where}: {reason}")


def key_path(*parts) -> str:
    """``("policies", 1, "alpha")`` as ``"policies[1].alpha"``."""
    path = ""
    for part in parts:
        path += f"[{part}]" if isinstance(part, int) else (f".{part}" if path else str(part))
    return path


# -- leaf rules -------------------------------------------------------------------


def _rule(check):
    """A pydantic validator from a rule ``check(name, value)``: the rule's own message,
    with the field's name."""
    return BeforeValidator(lambda value, info: check(info.field_name, value))


def _integer(minimum: int, maximum: Optional[int] = None, why: str = ""):
    return _rule(lambda name, value: integer(name, value, minimum, maximum, why))


def _precision(name: str, value) -> str:
    return float_dtype(name, value).name


def _grid_points(name: str, value) -> int:
    try:
        return integer(name, value, 2)
    except ArgumentError:
        raise ArgumentError(
            f"{name} must be a number of grid points (an integer >= 2) or an array of rounds, got {describe(value)}.",
            argument=name,
        ) from None


def _text(name: str, value) -> str:
    if not isinstance(value, str) or not value:
        raise ArgumentError(f"{name} must be a non-empty string, got {describe(value)}.", argument=name)
    try:
        value.encode("utf-8")  # the records and figures that name it are UTF-8
    except UnicodeEncodeError:
        raise ArgumentError(f"{name} must be text UTF-8 can hold, got {value!r} (a lone surrogate).", argument=name) from None
    return value


def split_labels(text: str) -> list:
    """The non-empty items of the command line's comma-separated lists of labels (and
    formats); a comma inside parentheses is a label's own
    (``"lp_explore(alpha=4.5, gamma=0.5),ts_n"`` is two labels)."""
    items, start = [], 0
    for i, (char, depth) in enumerate(zip(text + ",", _depths(text + ","))):
        if char == "," and depth <= 0:
            items.append(text[start:i].strip())
            start = i + 1
    return [item for item in items if item]


def _depths(text: str) -> list:
    """The depth of parentheses after each character of ``text``."""
    return list(itertools.accumulate({"(": 1, ")": -1}.get(char, 0) for char in text))


def check_label(name: str, value) -> str:
    """A policy label: text that :func:`split_labels` reads back as itself (no comma
    outside parentheses, no surrounding spaces), with balanced parentheses."""
    value = _text(name, value)
    depths = _depths(value) or [0]
    if split_labels(value) != [value] or min(depths) < 0 or depths[-1]:
        raise ArgumentError(
            f"{name} must have balanced parentheses, no comma outside them and no surrounding spaces (the "
            f"command line's lists of labels split there), got {value!r}.", argument=name
        )
    return value


def decode_numbers(value):
    """``"inf"`` strings (any case, signed +) in nested lists as ``math.inf``."""
    if isinstance(value, list):
        return [decode_numbers(v) for v in value]
    if isinstance(value, str) and value.strip().lower() in _INF_STRINGS:
        return math.inf
    return value


def _grid(name, value) -> tuple:
    """A policy hyper-parameter: one value or a non-empty array of distinct scalars."""
    values = value if isinstance(value, list) else [value]
    if not values:
        raise ArgumentError("an empty grid; give at least one value")
    for v in values:
        if isinstance(v, (list, dict)):
            raise ArgumentError(f"grid values must be scalars, got {describe(v)}")
    # numbers by value (1 and 1.0 are one cell), anything else by its type and text
    same = [("number", float(v)) if isinstance(v, (int, float)) and not isinstance(v, bool) else (type(v), v) for v in values]
    if len(set(same)) != len(same):
        raise ArgumentError(f"grid has repeated values {values}")
    return tuple(values)


Integer = Annotated[int, _integer(1)]
# what an instance constructor takes: its own rules check the values ("inf" is inf)
Numbers = Annotated[Any, BeforeValidator(lambda value, info: decode_numbers(value))]
Text = Annotated[str, _rule(_text)]
Label = Annotated[str, _rule(check_label)]
Grid = Annotated[tuple, BeforeValidator(lambda value, info: _grid(info.field_name, value))]


def _one_or_many(one, item):
    """``one``, or a non-empty array of ``item`` (its entries named ``key[i]``)."""
    many = Annotated[list[item], Field(min_length=1)]
    return Annotated[
        Union[Annotated[many, Tag("~many")], Annotated[one, Tag("~one")]],
        Discriminator(lambda value: "~many" if isinstance(value, list) else "~one"),
    ]


# -- tables -------------------------------------------------------------------------


class _Table(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class Checkpoint(_Table):
    """How often a running cell group saves its state (not part of the fingerprint)."""

    every_chunks: Optional[Integer] = None
    every_seconds: Optional[Annotated[float, _rule(check_positive)]] = None


class Monitor(_Table):
    """``name`` (a monitor of :mod:`jaxbandit.monitors`) and its arguments."""

    model_config = ConfigDict(extra="allow", frozen=True)
    name: Text


class PolicyEntry(_Table):
    """A registered policy or ``"package.module:factory"``, its label, and its
    hyper-parameters: one value each, or an array (a grid, Cartesian product)."""

    model_config = ConfigDict(extra="allow", frozen=True)
    name: Text
    label: Optional[Label] = None
    __pydantic_extra__: Dict[str, Grid] = Field(init=False)


def _noise(name, value) -> noise_module.NoiseFamily:
    """A noise family: its name (``"bernoulli"``), or a table ``{family = "student_t", df = 3}``."""
    if isinstance(value, dict):
        table = NoiseTable.model_validate(value)
        if table.df is not None and table.family != "student_t":
            raise ArgumentError(
                f"df goes with family \"student_t\" (its name alone), got family {table.family!r} with df = {table.df!r}",
                argument=name,
            )
        value = table.family if table.df is None else noise_module.student_t(table.df)
    return noise_module.resolve(value)


class NoiseTable(_Table):
    """``noise = { family = "student_t", df = 3 }``."""

    family: Text
    df: Optional[Annotated[float, _rule(number)]] = None


class _TableOf(typing.NamedTuple):
    """Metadata naming the table of a field its validator reads itself (pydantic ignores
    it): the table whose keys an unknown key's error lists."""

    table: type


Noise = Annotated[Any, BeforeValidator(lambda value, info: _noise(info.field_name, value)), _TableOf(NoiseTable)]


class Default(_Table):
    """One of :func:`jaxbandit.instances.default_instances`, chosen by ``name``, with
    its noise family (default Gaussian)."""

    type: str = "default"
    name: Text
    noise: Optional[Noise] = None


class File(_Table):
    """An instance read from a file (:mod:`jaxbandit.config.instance_file`): ``path``
    relative to the configuration file's directory, holding ``mu`` and ``sigma``."""

    type: str = "file"
    name: Optional[Text] = None
    path: Text
    noise: Optional[Noise] = None


def _constructor_table(kind: str, constructor, **annotations) -> type:
    """The table of an instance entry of ``type = kind``: the arguments ``constructor``
    takes, numbers unless ``annotations`` say otherwise, required where it has no
    default.  Only the keys given are passed on, so the defaults are the constructor's."""
    fields = {"type": (str, kind), "name": (Optional[Text], None)}
    for parameter in inspect.signature(constructor).parameters.values():
        annotation = annotations.get(parameter.name, Numbers)
        required = parameter.default is inspect.Parameter.empty
        fields[parameter.name] = (annotation, ...) if required else (Optional[annotation], None)
    return create_model(kind, __base__=_Table, **fields)


CONSTRUCTORS = {
    "bandit": instances.bandit,
    "full_information": instances.full_information,
    "graph": instances.graph,
    "revealing_arm": instances.revealing_arm,
    "random": instances.random,
    "explicit": instances.explicit,
}
# an adjacency is checked by graph's own rule (booleans or 0/1, K x K)
INSTANCE_TYPES = {kind: _constructor_table(kind, build, adjacency=Any, noise=Noise) for kind, build in CONSTRUCTORS.items()}
INSTANCE_TYPES["default"] = Default
INSTANCE_TYPES["file"] = File


def _instance_type(entry) -> Optional[str]:
    if not isinstance(entry, dict):
        return None
    kind = entry.get("type", "explicit" if "mu" in entry and "sigma" in entry else None)
    return f"~{kind}" if isinstance(kind, str) else None


InstanceEntry = Annotated[
    Union[tuple(Annotated[model, Tag(f"~{kind}")] for kind, model in INSTANCE_TYPES.items())],
    Discriminator(_instance_type),
]


class SweepFile(_Table):
    """A whole configuration: the run settings, the instances, the policies.

    ``times`` is a number of geometric grid points, or the explicit rounds (each horizon
    records those it reaches, and its last round); ``horizon`` one horizon or several
    (a sweep axis).  Relations between keys (the times against
    the horizons) are checked by :mod:`jaxbandit.config.plan`.
    """

    name: Text = "sweep"
    seed: Annotated[int, _integer(0, 2**64 - 1)] = 0
    runs: Annotated[int, _integer(1, 2**32, " (run indices are 32-bit)")]
    horizon: _one_or_many(Annotated[int, _integer(1, MAX_ROUNDS)], Annotated[int, _integer(1, MAX_ROUNDS)])
    precision: Annotated[str, _rule(_precision)] = "float32"
    times: _one_or_many(Annotated[int, _rule(_grid_points)], Integer) = DEFAULT_POINTS
    chunk_size: Annotated[int, _integer(1, MAX_ROUNDS)] = 1024
    solve_batch: Optional[Integer] = None
    checkpoint: Checkpoint = Checkpoint()
    instances: Annotated[list[InstanceEntry], Field(min_length=1)]
    policies: Annotated[list[PolicyEntry], Field(min_length=1)]
    monitor: Optional[Monitor] = None


# -- validation -----------------------------------------------------------------------


def plain(value, key: str = ""):
    """``value`` as TOML or JSON would hold it: numpy (or JAX) arrays and scalars as
    lists and numbers, tuples as lists, the precision's dtype as its name; a ValueError naming ``key`` for what a
    configuration cannot hold (dates, NaN, other objects)."""
    if isinstance(value, dict):
        return {k: plain(v, key_path(key, k) if key else k) for k, v in value.items()}
    if isinstance(value, noise_module.NoiseFamily):
        return value.label  # a family as a file writes it
    if key == "precision" and (isinstance(value, np.dtype) or (
        isinstance(value, type) and (issubclass(value, (np.generic, float, int)) or isinstance(getattr(value, "dtype", None), np.dtype))
    )):  # np.float64, np.dtype("float64"), jnp.float64, float: by name, as the Python API's dtype takes them
        return np.dtype(value).name
    if isinstance(value, np.ndarray) or (hasattr(value, "__array__") and hasattr(value, "shape")):  # numpy, JAX
        value = np.asarray(value).tolist()
    if isinstance(value, (list, tuple)):
        return [plain(v, f"{key}[{i}]") for i, v in enumerate(value)]
    if isinstance(value, np.generic):
        value = value.item()
    if isinstance(value, float) and math.isnan(value):
        raise ConfigError("", key, "NaN is not a value (for sigma's \"no information\", write \"inf\")")
    if isinstance(value, (datetime.date, datetime.time)) or not isinstance(value, (str, int, float, bool)):
        raise ConfigError("", key, f"unsupported value type {type(value).__name__} ({value!r})")
    return value


def validate(data, source: str) -> tuple[SweepFile, dict]:
    """``data`` (a parsed TOML file or a dict) as a :class:`SweepFile`, with ``data``
    as plain TOML values (:func:`plain`).

    Raises:
        ConfigError: naming ``source``, the key and the reason.
    """
    if not isinstance(data, dict):
        raise ConfigError(source, "", f"must be a table, got {describe(data)}")
    try:
        data = plain(data)
    except ConfigError as err:
        raise ConfigError(source, err.key, err.reason) from None
    try:
        return SweepFile.model_validate(data), data
    except ValidationError as err:
        raise _config_error(_reported(err.errors()), source) from None


def _location(error: dict) -> list:
    """An error's key path, without the union tags pydantic adds."""
    return [part for part in error["loc"] if not (isinstance(part, str) and part.startswith("~"))]


def _reported(errors: list) -> dict:
    """The error to report: pydantic's first, but an unknown key before a missing one
    (a misspelt key is both), unless TOML's header rule explains the missing one."""
    first = errors[0]
    if first["type"] == "missing" and not _written_after_a_header(_location(first), first.get("input")):
        return next((e for e in errors if e["type"] == "extra_forbidden"), first)
    return first


_PYTHON_NAMES = {"dtype": "precision"}  # the Python API's name of a key, written in a file


def unknown_key(name: str, allowed, detail: str = "") -> str:
    """The reason an unknown key ``name`` gives, with the ``allowed`` ones (and the
    closest of them, a likely misspelling)."""
    allowed = sorted(allowed)
    close = [_PYTHON_NAMES[name]] if _PYTHON_NAMES.get(name) in allowed else difflib.get_close_matches(name, allowed, n=1)
    meant = f"did you mean {close[0]!r}? " if close else ""
    return f"unknown key; {meant}allowed keys: {', '.join(allowed)}{detail}"


def _config_error(error: dict, source: str) -> ConfigError:
    """An error pydantic found, as a :class:`ConfigError`."""
    loc = _location(error)
    kind, value = error["type"], error.get("input")
    if kind == "value_error":
        reason = str(error["ctx"]["error"]).rstrip(".")
        name = loc[-1] if loc and isinstance(loc[-1], str) else None
        # the rules' messages start with the argument's name, which the key already says
        if name is not None and reason.startswith(f"{name} "):
            reason = reason[len(name) + 1 :]
    elif kind == "extra_forbidden":
        reason = unknown_key(str(loc[-1]) if loc else "", _model_at(error["loc"][:-1]).model_fields)
    elif kind == "missing":
        reason = "missing required key" + _written_after_a_header(loc, value)
    elif kind in ("union_tag_invalid", "union_tag_not_found"):
        loc, known = loc + ["type"], ", ".join(INSTANCE_TYPES)
        tag = value.get("type") if isinstance(value, dict) else None
        if not isinstance(value, dict):
            loc, reason = loc[:-1], f"must be a table, got {describe(value)}"
        elif tag is None:
            reason = f"missing; one of {known} (or give mu and sigma)"
        else:
            reason = f"unknown instance type {tag!r}; known types: {known}"
    elif kind in ("too_short", "list_type"):
        tables = f" of tables ([[{loc[-1]}]])" if loc and loc[-1] in ("instances", "policies") else ""
        reason = f"must be a non-empty array{tables}, got {describe(value)}"
    elif kind in ("model_type", "dict_type", "model_attributes_type"):
        reason = f"must be a table, got {describe(value)}"
    else:
        reason = f"{error['msg']}, got {describe(value)}"
    return ConfigError(source, key_path(*loc), reason)


def _written_after_a_header(loc: list, parent) -> str:
    """Where a key missing at ``loc`` is, if TOML read it into a table of ``parent``
    (the table that lacks it) because it was written after that table's header:
    ``[monitor]``, the last ``[[policies]]``, ``[instances.noise]``; else ``""``."""
    if not loc or not isinstance(parent, dict):
        return ""
    names = [part for part in loc[:-1] if isinstance(part, str)]  # the header's dotted name
    for key, table in parent.items():
        if isinstance(table, dict) and loc[-1] in table:
            found, header = key_path(*loc[:-1], key, loc[-1]), f"[{'.'.join([*names, key])}]"
        elif isinstance(table, list) and table and isinstance(table[-1], dict) and loc[-1] in table[-1]:
            found, header = key_path(*loc[:-1], key, len(table) - 1, loc[-1]), f"[[{'.'.join([*names, key])}]]"
        else:
            continue
        above = f"the {header} header" if names else "the first table header"
        return f"; found as {found}: in TOML a key after a {header} header belongs to that table, so write it above {above}"
    return ""


def _model_at(loc) -> type:
    """The table (model class) at pydantic's ``loc`` (tags included) under SweepFile."""
    model: Any = SweepFile
    for part in loc:
        if isinstance(part, str) and part.startswith("~"):
            model = INSTANCE_TYPES.get(part[1:], model)
        elif isinstance(part, str):
            model = _table_in(model.model_fields[part].annotation) or model
    return model


def _table_in(annotation) -> Optional[type]:
    """The first table class inside a type annotation (``Optional[Checkpoint]`` and the like)."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    if isinstance(annotation, _TableOf):
        return annotation.table
    for argument in typing.get_args(annotation):
        found = _table_in(argument)
        if found is not None:
            return found
    return None
