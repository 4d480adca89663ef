"""A persistent cache of compiled programs, so that a new process does not recompile.

Compiling the engine is a fixed cost per process, large for the policies with LP
stages (``lp_explore``, ``ossb``) and small for the index policies.  JAX can keep
compiled executables on disk and load them in later processes: a resumed or repeated
sweep, or a second script on the same shapes, then pays only for tracing and
loading.  The ``jaxbandit`` command enables this by default; Python code opts in with
:func:`enable`.  Programs that compile in under a second (JAX's
``jax_persistent_cache_min_compile_time_secs``) are not kept.

Which directory, first match wins: the ``directory`` given to :func:`enable`
(``--compile-cache``), the ``JAXBANDIT_COMPILE_CACHE`` environment variable, a
directory the user gave JAX itself (``JAX_COMPILATION_CACHE_DIR``), else
``$XDG_CACHE_HOME/jaxbandit/xla`` (``~/.cache/jaxbandit/xla``).  ``off`` in the first
two turns the cache off.  A URL such as ``gs://bucket/cache`` goes to JAX as written
(JAX reads and writes it through ``etils.epath``; nothing is checked here).  Entries
are never evicted (JAX's size limit needs the ``filelock`` package): delete the
directory to clear it, or if JAX warns that it cannot read an entry (one cut short by
an interrupted write).  The cache is trusted code: keep it in a directory only you
can write to.
"""

from __future__ import annotations

import os
import re
import warnings
from pathlib import Path
from typing import Optional, Union

import jax
from jax.experimental.compilation_cache import compilation_cache

__all__ = ["ENV_VAR", "OFF", "default_directory", "enable"]

ENV_VAR = "JAXBANDIT_COMPILE_CACHE"
OFF = "off"
_URL = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*://")  # gs://..., s3://...: not a local path

Location = Union[Path, str]  # a local directory, or a URL kept as written


def _environment_value() -> Optional[str]:
    """``$JAXBANDIT_COMPILE_CACHE`` stripped, ``None`` if unset or blank."""
    value = os.environ.get(ENV_VAR, "").strip()
    return value or None


def _directory(text: str) -> Optional[Location]:
    """A directory as the user wrote it, made absolute (a URL as written); ``None``
    for ``off``.

    Raises:
        ValueError: ``~user`` names no user, or the text holds a NUL byte.
    """
    if text.lower() == OFF:
        return None
    if "\0" in text:
        raise ValueError(f"compile cache directory {text!r} holds a NUL byte.")
    if _URL.match(text):  # pathlib would make gs://b/c the local directory gs:/b/c
        return text
    try:
        return Path(text).expanduser().absolute()
    except RuntimeError as err:  # pathlib: "Could not determine home directory."
        raise ValueError(f"compile cache directory {text!r}: {err}") from err


def default_directory() -> Optional[Location]:
    """The directory :func:`enable` uses when given none (``None``: the cache is off).

    Raises:
        RuntimeError: no home directory can be found (and nothing else names one).
    """
    value = _environment_value()
    if value is not None:
        return _directory(value)
    if jax.config.jax_compilation_cache_dir:  # the user's own JAX setting
        own = jax.config.jax_compilation_cache_dir
        return own if _URL.match(own) else Path(own)
    base = os.environ.get("XDG_CACHE_HOME", "").strip() or Path.home() / ".cache"
    return (Path(base) / "jaxbandit" / "xla").absolute()


def _turn_off() -> None:
    compilation_cache.set_cache_dir(None)
    compilation_cache.reset_cache()


def enable(directory: Union[str, os.PathLike, None] = None) -> Optional[Location]:
    """Keep compiled programs in ``directory`` (default: :func:`default_directory`).

    Programs compiled after this call are saved there and loaded from there by later
    processes; those compiled before it are not saved.  ``"off"`` turns the cache off
    (a directory set earlier, or through JAX's own setting, included).

    Returns:
        The directory in use (a URL as a string), or ``None`` when the cache is off.

    Raises:
        ValueError: ``directory`` is empty, or the directory asked for (``directory``
            or the environment variable; a blank one counts as unset) cannot be created
            or written to.  The implicit default only warns and runs without a cache
            (e.g. a read-only home directory).
    """
    explicit = directory is not None or _environment_value() is not None
    if directory is not None:
        if not isinstance(directory, (str, os.PathLike)):  # str(3) or str(b"...") would be a directory name
            raise ValueError(f"compile cache directory must be a path or 'off', got {directory!r}.")
        text = os.fspath(directory).strip()
        if not text:
            raise ValueError("compile cache directory must not be empty (use 'off' to turn the cache off).")
        path = _directory(text)
        source = "compile cache directory"
    else:
        source = f"${ENV_VAR}" if explicit else "the default compile cache directory"
        try:
            path = default_directory()
        except RuntimeError as err:  # no home directory: nobody asked for one
            warnings.warn(f"no compile cache: {err}", stacklevel=2)
            path = None
    if path is None:
        _turn_off()
        return None
    if isinstance(path, str):  # a URL: JAX opens it when it first compiles
        compilation_cache.set_cache_dir(path)
        compilation_cache.reset_cache()
        return path
    try:
        path.mkdir(parents=True, exist_ok=True)
        if not os.access(path, os.W_OK | os.X_OK):
            raise PermissionError("not writable")
    except OSError as err:
        if not explicit:  # run without a cache rather than fail
            warnings.warn(f"no compile cache: {source} {str(path)!r} cannot be used ({err}).", stacklevel=2)
            _turn_off()
            return None
        raise ValueError(f"{source} {str(path)!r} cannot be used: {err}") from err
    compilation_cache.set_cache_dir(str(path))
    compilation_cache.reset_cache()
    return path
