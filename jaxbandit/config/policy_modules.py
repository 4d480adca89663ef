"""A policy's module beside the configuration file that names it (``"module:factory"``):
the file's directory on the module search path while the policies resolve, and the
check that the module imported is that one."""

from __future__ import annotations

import contextlib
import os
import sys
from typing import Optional

__all__ = ["directory_of", "importable_beside", "shadowed_module"]


def directory_of(source: str) -> Optional[str]:
    """The directory of the configuration file ``source`` (None: not a file)."""
    return os.path.dirname(os.path.abspath(source)) if os.path.isfile(source) else None


@contextlib.contextmanager
def importable_beside(directory: Optional[str]):
    """``directory`` (a configuration file's) at the end of the module search path, so
    that a policy named ``"module:factory"`` may live next to the file that names it."""
    if directory is None or directory in sys.path:
        yield
        return
    sys.path.append(directory)
    try:
        yield
    finally:
        sys.path.remove(directory)


def shadowed_module(name: str, directory: Optional[str]) -> str:
    """Why the imported module of a policy named ``"module:factory"`` is not the module
    of that name in ``directory`` ("" where it is, or where ``directory`` holds none).
    A module of that name imported before (another configuration's, in one process), or
    found first on the search path, would run under this configuration's labels."""
    if ":" not in name or directory is None:
        return ""
    top = name.partition(":")[0].split(".")[0]
    # the order of Python's own search of a directory: a package before a module
    candidates = (os.path.join(directory, top, "__init__.py"), os.path.join(directory, f"{top}.py"))
    beside = next((path for path in candidates if os.path.isfile(path)), None)
    loaded = getattr(sys.modules.get(top), "__file__", None)
    if beside is None or (loaded is not None and _same_file(loaded, beside)):
        return ""
    return (
        f"module {top!r} is {loaded or 'a module without a file'}, not the {beside} beside the configuration "
        "(a module of that name was imported before, or is found first on the search path); one process holds "
        "one module of a name: rename one of them, or run the sweep in a new process"
    )


def _same_file(path: str, other: str) -> bool:
    """Whether two paths name one file (False if either is gone: a module imported from
    a directory deleted since)."""
    try:
        return os.path.samefile(path, other)
    except OSError:
        return False
