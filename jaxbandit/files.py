"""Files that a killed process never leaves torn: atomic writes, and reads that name
the file they fail on.

Every file is written to a temporary file in the same directory, flushed to disk and
moved into place with ``os.replace``, so a killed process leaves either the old file
or the new one, never a torn one.  :func:`create_exclusive_json` creates a file with a
hard link instead, which fails if it exists: of several jobs racing to create it, one
does.  A temporary file's name says which process made it, so that a later run removes
what a killed one left (:func:`running_marker`).
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import json
import os
import socket
import sys
import uuid
import zipfile
import zlib
from pathlib import Path

import numpy as np

from jaxbandit._numbers import decimal_literal

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - exercised on Python 3.10 only
    import tomli as tomllib

__all__ = [
    "atomic_write",
    "create_exclusive_json",
    "open_npz",
    "read_json",
    "read_npz",
    "save_json",
    "save_npz",
    "save_text",
    "visible_entries",
]

_NPY_MAGIC = b"\x93NUMPY"  # a single array's file
_NPZ_ERRORS = (ValueError, EOFError, zipfile.BadZipFile)  # numpy's, for a damaged archive or member


@contextlib.contextmanager
def _flushed_copy(path: Path, data: bytes):
    """The name of a temporary file beside ``path`` that holds ``data``, flushed to disk;
    removed at the end unless it was moved into place."""
    path.parent.mkdir(parents=True, exist_ok=True)
    # made as open() makes a file, with the umask's mode (mkstemp's 0600 would keep a
    # sweep's records from the group of a shared directory); the name is unique
    tmp = str(_temporary(path))
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_BINARY", 0), 0o666)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        yield tmp
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)


@contextlib.contextmanager
def _naming(path: Path):
    """An OSError of writing ``path`` names ``path``: a full disk's names no file, and
    a temporary file's name is not one the user knows."""
    try:
        yield
    except OSError as err:
        # the file named if none is, or the temporary one is; another (a parent that is
        # a file) is the culprit itself
        if err.errno is None or not (err.filename is None or Path(err.filename).name.startswith(f".{path.name}.")):
            raise
        raise OSError(err.errno, err.strerror, str(path)) from err


def atomic_write(path, data: bytes) -> Path:
    """Write ``data`` to ``path`` atomically: a temporary file, renamed."""
    path = Path(path)
    with _naming(path), _flushed_copy(path, data) as tmp:
        os.replace(tmp, path)
    return path


def save_npz(path, arrays: dict) -> str:
    """Atomically save a dict of arrays as an (uncompressed) ``.npz``; returns the
    :func:`content_digest` of the file written."""
    buffer = io.BytesIO()
    np.savez(buffer, **{k: np.asarray(v) for k, v in arrays.items()})
    atomic_write(path, buffer.getvalue())
    return content_digest(buffer.getvalue())


def content_digest(data: bytes) -> str:
    """The SHA-256 of a file's bytes, in hex: what ties a file to the record naming it."""
    return hashlib.sha256(data).hexdigest()


def save_json(path, obj) -> Path:
    return atomic_write(path, _json_bytes(obj))


def save_text(path, text: str) -> Path:
    return atomic_write(path, text.encode("utf-8"))


def _json_bytes(obj) -> bytes:
    return (json.dumps(obj, indent=1, sort_keys=True, allow_nan=False) + "\n").encode("utf-8")


def create_exclusive_json(path, obj) -> bool:
    """Create ``path`` with ``obj`` as JSON unless it exists; True if this call created it.

    The complete file is written under a temporary name and hard-linked to ``path``:
    the link fails if ``path`` exists, so of several processes racing to create it
    exactly one does, and no reader sees a partial file.
    """
    path = Path(path)
    data = _json_bytes(obj)
    with _naming(path), _flushed_copy(path, data) as tmp:
        try:
            os.link(tmp, path)
        except FileExistsError:
            return False
        except OSError:
            # A filesystem without hard links: exclusive creation, then the content.
            try:
                with open(path, "xb") as handle:
                    handle.write(data)
            except FileExistsError:
                return False
        return True


def _temporary(path: Path) -> Path:
    """A unique hidden name beside ``path``, naming this process (:func:`_left_by_the_dead`)."""
    return path.parent / f".{path.name}.{os.getpid()}-{_host_tag()}.{uuid.uuid4().hex}.tmp"


def _host_tag() -> str:
    """This host and PID namespace, in 12 hex digits."""
    here = _process()
    return hashlib.sha256(f"{here['host']}/{here['pid_namespace']}".encode()).hexdigest()[:12]


def _left_by_the_dead(path: Path) -> bool:
    """Whether ``path`` is a temporary file (:func:`_temporary`) of a process of this
    host and PID namespace that is gone."""
    parts = path.name.rsplit(".", 3)
    pid, _, host = parts[-3].partition("-") if len(parts) == 4 and parts[0] else ("", "", "")
    return host == _host_tag() and pid.isdigit() and _gone(int(pid))


def _gone(pid: int) -> bool:
    """Whether process ``pid`` of this PID namespace is gone (False where that cannot
    be told: no namespace known, or a process of another user)."""
    if _process()["pid_namespace"] is None:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    except OSError:
        return False
    return False


def _process() -> dict:
    """This process as a marker names it: host, PID namespace and PID."""
    try:
        namespace = os.stat("/proc/self/ns/pid").st_ino  # containers on one host differ here
    except OSError:
        namespace = None
    return {"host": socket.gethostname(), "pid_namespace": namespace, "pid": os.getpid()}


def running_marker(directory) -> Path:
    """A hidden file in ``directory`` that says a run uses it, until the run removes it,
    naming the process.  One a killed run left is removed by a later run on the same
    host that finds its process gone (:func:`others_running`); elsewhere it stays,
    which is the safe side."""
    marker = Path(directory) / f".running-{uuid.uuid4().hex}.tmp"
    marker.write_text(json.dumps(_process()))
    others_running(directory, marker)  # removes what killed runs left: their markers,
    for temporary in [*Path(directory).glob(".*.tmp"), *Path(directory).glob("*/.*.tmp")]:  # and writes
        if _left_by_the_dead(temporary):
            temporary.unlink(missing_ok=True)
    return marker


def _left_by_a_killed_run(marker: Path) -> bool:
    """Whether ``marker`` names a process of this host and PID namespace that is gone."""
    try:
        named, here = json.loads(marker.read_text()), _process()
        return all(named[k] == here[k] for k in ("host", "pid_namespace")) and _gone(int(named["pid"]))
    except (OSError, ValueError, TypeError, KeyError):  # another's, or unreadable
        return False


def others_running(directory, marker: Path) -> bool:
    """Whether another run's :func:`running_marker` is in ``directory`` (removing those
    that killed runs left)."""
    running = False
    for other in Path(directory).glob(".running-*.tmp"):
        if other == marker:
            continue
        if _left_by_a_killed_run(other):
            other.unlink(missing_ok=True)
        else:
            running = True
    return running


def remove_unless_others_running(directory, marker: Path, names) -> bool:
    """Remove the files ``names`` of ``directory`` unless another run's marker is there
    (:func:`others_running`); True if removed.  Each is first moved aside under a
    temporary name, in the order given: a run that writes its marker before it reads
    them is either seen here (and they are put back, unless it made its own meanwhile)
    or finds them gone."""
    directory = Path(directory)
    aside = {}
    for name in names:
        temporary = _temporary(directory / name)
        with contextlib.suppress(FileNotFoundError):
            os.replace(directory / name, temporary)
            aside[name] = temporary
    others = others_running(directory, marker)
    for name, temporary in aside.items():
        if others:
            _put_back(temporary, directory / name)
        temporary.unlink(missing_ok=True)
    return not others


def _put_back(temporary: Path, path: Path) -> None:
    """``temporary``'s content at ``path``, unless ``path`` exists."""
    try:
        os.link(temporary, path)
    except FileExistsError:
        pass
    except OSError:  # a filesystem without hard links
        with contextlib.suppress(FileExistsError), open(path, "xb") as handle:
            handle.write(temporary.read_bytes())


def visible_entries(directory) -> list:
    """Names in ``directory`` other than the temporary files of atomic writes
    (``[]`` if it does not exist)."""
    directory = Path(directory)
    if not directory.is_dir():
        return []
    return sorted(p.name for p in directory.iterdir() if not (p.name.startswith(".") and p.name.endswith(".tmp")))


def parse_json(text: str):
    """JSON text as Python values, each number literal read by
    :func:`~jaxbandit._numbers.decimal_literal` and an object whose key repeats refused
    (``json`` keeps the last value silently): a ``ValueError`` says what is wrong."""
    return json.loads(text, parse_float=decimal_literal, object_pairs_hook=_unique_keys)


def parse_toml(text: str):
    """TOML text as Python values, each float literal read by
    :func:`~jaxbandit._numbers.decimal_literal`: a ``ValueError`` says what is wrong."""
    return tomllib.loads(text, parse_float=decimal_literal)


def _unique_keys(pairs: list) -> dict:
    keys = [key for key, _ in pairs]
    if repeated := next((key for key in keys if keys.count(key) > 1), None):
        raise ValueError(f"the key {repeated!r} is given twice")
    return dict(pairs)


def read_json(path):
    """The JSON content of ``path``; a ValueError naming the file if it is not JSON."""
    try:
        with open(path, encoding="utf-8") as handle:
            return json.load(handle)
    except ValueError as err:  # JSONDecodeError, UnicodeDecodeError
        raise ValueError(f"{path} is not a readable JSON file ({err}).") from err


def _not_npz(path, why) -> ValueError:
    return ValueError(f"{path} is not a readable .npz file ({why}).")


def npz_names(path, content: bytes | None = None) -> list:
    """The names of the arrays in the ``.npz`` at ``path`` (or of its bytes ``content``),
    every member's checksum verified first (a ValueError naming the file if one is
    damaged), without parsing the arrays."""
    with open_npz(path, content) as data:
        try:
            damaged = data.zip.testzip()
        except (*_NPZ_ERRORS, zlib.error) as err:
            raise _not_npz(path, err) from err
        if damaged is not None:
            raise _not_npz(path, f"member {damaged!r} fails its checksum")
        return list(data.files)


def read_npz(path, content: bytes | None = None) -> dict:
    """Every array of :func:`open_npz`, read now."""
    with open_npz(path, content) as data:
        try:
            return {k: data[k] for k in data.files}
        except _NPZ_ERRORS as err:  # a damaged member
            raise _not_npz(path, err) from err


@contextlib.contextmanager
def open_npz(path, content: bytes | None = None):
    """``np.load`` of the ``.npz`` at ``path`` (its arrays are read on access), or of its
    bytes ``content`` where the caller has read them already (to digest them); a
    ValueError naming the file if it is something else, such as a truncated copy."""
    # The file is opened here: np.load leaves its own handle open when it fails.
    with open(path, "rb") if content is None else io.BytesIO(content) as handle:
        start = handle.read(len(_NPY_MAGIC))
        handle.seek(0)
        if not start.startswith(b"PK") and start != _NPY_MAGIC:  # np.load would take it for a pickle
            raise _not_npz(path, f"it is not a zip archive of arrays: it starts with {start!r}" if start else "it is empty")
        try:
            data = np.load(handle, allow_pickle=False)
        except _NPZ_ERRORS as err:
            raise _not_npz(path, err) from err
        if not isinstance(data, np.lib.npyio.NpzFile):
            raise _not_npz(path, "it holds a single array")
        with data:
            yield data
