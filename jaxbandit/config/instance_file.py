"""An instance kept in a file that several sweep configurations share.

A configuration's entry ``type = "file", path = "graph.npz"`` names it, by a path
relative to the configuration file's directory (for a dict: the current directory).
The file holds ``mu`` and ``sigma`` and nothing else: ``.npz`` arrays, or ``.json`` and
``.toml`` numbers with ``"inf"`` (or TOML's own ``inf``) for no information.  Their
values are an explicit instance's (:func:`jaxbandit.instances.explicit`: a standard
bandit's where ``sigma`` is one number); ``jaxbandit bound --file`` reads the same.
The sweep directory records the path as given and the SHA-256 digest of the file's
bytes, so the same configuration over an edited file computes something else.
"""

from __future__ import annotations

import dataclasses
import hashlib
import os

from jaxbandit.config.schema import decode_numbers
from jaxbandit.files import parse_json, parse_toml, read_npz
from jaxbandit.instances import Instance, explicit

__all__ = ["KEYS", "SUFFIXES", "InstanceFile", "read"]

SUFFIXES = (".npz", ".json", ".toml")
KEYS = ("mu", "sigma")


@dataclasses.dataclass(frozen=True)
class InstanceFile:
    """What an instance file holds (``mu`` and ``sigma`` as read, unchecked), and what
    a sweep records of it (:meth:`record`)."""

    path: str  # as the configuration gives it
    sha256: str  # of the file's bytes
    mu: object
    sigma: object

    def record(self) -> dict:
        return {"path": self.path, "sha256": self.sha256}

    def instance(self, noise="gaussian") -> Instance:
        """The instance the file holds (:func:`build`).

        Raises:
            ValueError: naming the file and the value it refuses.
        """
        try:
            return explicit(self.mu, self.sigma, noise=noise)
        except ValueError as err:
            raise ValueError(f"{self.path}: {err}") from None


def read(path: str, directory: str) -> InstanceFile:
    """The instance file at ``path`` (relative paths from ``directory``).

    Raises:
        ValueError: naming the file and what is wrong with it.
    """
    suffix = os.path.splitext(path)[1].lower()
    if suffix not in SUFFIXES:
        raise ValueError(f"{path}: unknown suffix {suffix or '(none)'!r}; an instance file is {', '.join(SUFFIXES)}")
    full = os.path.join(directory, os.path.expanduser(path))
    try:
        with open(full, "rb") as handle:
            content = handle.read()
    except OSError as err:
        raise ValueError(f"{path}: cannot read {full}: {err.strerror}") from None
    data = _parse(path, suffix, content)
    missing = [key for key in KEYS if key not in data]
    other = [key for key in data if key not in KEYS]
    if other:
        raise ValueError(f"{path}: unknown key {other[0]!r}; an instance file holds only {' and '.join(KEYS)}")
    if missing:
        raise ValueError(f"{path}: no {missing[0]!r}; an instance file holds {' and '.join(KEYS)}")
    return InstanceFile(path, hashlib.sha256(content).hexdigest(), data["mu"], data["sigma"])


def _parse(path: str, suffix: str, content: bytes) -> dict:
    """The file's keys and values (``"inf"`` strings as inf)."""
    if suffix == ".npz":
        return read_npz(path, content)
    try:
        text = content.decode("utf-8")
    except UnicodeDecodeError as err:
        raise ValueError(f"{path}: not UTF-8 text ({err.reason} at byte {err.start})") from None
    try:
        data = parse_json(text) if suffix == ".json" else parse_toml(text)
    except ValueError as err:  # a decoding error, a literal beyond float64, a repeated key
        raise ValueError(f"{path}: invalid {suffix[1:].upper()}: {err}") from None
    if not isinstance(data, dict):
        raise ValueError(f"{path}: must hold an object with keys {' and '.join(KEYS)}, got {type(data).__name__}")
    return {key: decode_numbers(value) for key, value in data.items()}
