"""A persistent cache of compiled programs, so that a new process does not recompile.

Compiling the engine is a fixed cost per process: about 20 s for ``lp_explore`` at
K = 10 on a 2-core CPU (its LP stages), under a second for the index policies.  JAX
can keep compiled executables on disk and load them in later processes: a resumed or
repeated sweep, or a second script on the same shapes, then pays ~4 s of tracing and
loading instead.  The ``jaxbandit`` command enables this by default;
Python code opts in with :func:`enable` before it runs anything.

Where the cache lives: the ``JAXBANDIT_COMPILE_CACHE`` environment variable (a
directory, or ``off``), else ``$XDG_CACHE_HOME/jaxbandit/xla`` (``~/.cache/...``).  A
directory the user already gave JAX (``JAX_COMPILATION_CACHE_DIR``) is kept.  Entries
are a few MB at most (an ``lp_explore`` chunk program is about 1 MB) and are never
evicted (JAX's size limit needs the ``filelock`` package): delete the directory to
clear it.  The cache is trusted code: keep it in a directory only you can write to.
"""

from __future__ import annotations

import os
import warnings
from pathlib import Path
from typing import Optional, Union

import jax
from jax.experimental.compilation_cache import compilation_cache

__all__ = ["ENV_VAR", "OFF", "default_directory", "enable"]

ENV_VAR = "JAXBANDIT_COMPILE_CACHE"
OFF = "off"


def default_directory() -> Optional[Path]:
    """The cache directory the environment asks for, ``None`` if it is ``off``."""
    value = os.environ.get(ENV_VAR)
    if value is not None:
        return None if value.strip().lower() == OFF else Path(value).expanduser()
    base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(base) / "jaxbandit" / "xla"


def enable(directory: Union[str, os.PathLike, None] = None) -> Optional[Path]:
    """Keep compiled programs in ``directory`` (default :func:`default_directory`).

    Call it before the first computation: JAX decides once per process whether it uses
    a cache, so this also resets that decision.  ``directory="off"`` (or the
    environment's ``off``) leaves JAX as it is.

    Returns:
        The directory in use, or ``None`` when the cache is off.

    Raises:
        ValueError: the directory asked for (``directory`` or the environment) is not a
            directory and cannot be created.  The implicit default only warns and runs
            without a cache (e.g. a read-only home directory).
    """
    implicit = directory is None and ENV_VAR not in os.environ
    if directory is None:
        if jax.config.jax_compilation_cache_dir:  # the user's own JAX setting wins
            return Path(jax.config.jax_compilation_cache_dir)
        path, source = default_directory(), f"${ENV_VAR}"
    elif str(directory).strip().lower() == OFF:
        path = None
    else:
        path, source = Path(directory).expanduser(), "compile cache directory"
    if path is None:
        return None
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as err:
        if implicit:  # nobody asked for this directory: run without a cache
            warnings.warn(f"no compile cache: {str(path)!r} cannot be used ({err}).", stacklevel=2)
            return None
        raise ValueError(f"{source} {str(path)!r} cannot be used: {err}") from err
    compilation_cache.set_cache_dir(str(path))
    compilation_cache.reset_cache()
    return path
