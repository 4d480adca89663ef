"""What a policy computes, as a hashable key: a compiled engine is reused only for it.

Two policies get the same key exactly when their functions have the same code and
every value those functions can read besides their arguments is the same: closure
cells, default arguments, and the module globals their code names (followed into
the functions they call).  Numbers, strings, arrays and containers of them compare
by value (floats by their bits: ``-0.0`` is not ``0.0``); functions recursively; an
object by its class and its attributes (``__dict__`` and ``__slots__``), so a bound
method's ``self`` or a captured configuration object changed in place gets a new
key; anything else (a class, a module, an object without attributes of its own) by
identity, which can only make two keys differ, never make different computations
share one.  A policy's name is not part of it.

What it cannot see is state outside those: an attribute of a module or a class
rebound after the engine compiled, or what a C object holds.  Keep hyper-parameters
in ``params``, in a closure, or on an object's own attributes, and they are seen.

A key holds objects compared by identity, which mean nothing in another process;
:func:`stable_digest` names those by their qualified names instead, so that a record
written by one process (a checkpoint, a sweep directory) can be checked by another.
"""

from __future__ import annotations

import dis
import functools
import hashlib
import types
from typing import Any

import jax
import numpy as np

__all__ = ["computation_key", "stable_digest"]

_SCALARS = (type(None), bool, int, float, complex, str, bytes)


class _Identity:
    """Compares by identity and keeps the object alive (so its id is never reused)."""

    __slots__ = ("obj",)

    def __init__(self, obj):
        self.obj = obj

    def __eq__(self, other):
        return isinstance(other, _Identity) and other.obj is self.obj

    def __hash__(self):
        return id(self.obj)

    def __repr__(self):
        return f"<object {type(self.obj).__name__} at {id(self.obj):#x}>"


def computation_key(*objects) -> tuple:
    """A hashable description of ``objects`` (functions, NamedTuples of them, values)."""
    return tuple(_describe(obj, {}) for obj in objects)


def stable_digest(key: tuple) -> str:
    """A hex digest of a :func:`computation_key` that every process computes alike.

    Objects the key compares by identity count by their qualified name (or their
    type's), so two keys that differ only in which such object they hold share a
    digest; code, closures, defaults and values all count.  Bytecode is Python's own,
    so another Python version gives another digest.
    """
    return hashlib.sha256(repr(_portable(key)).encode()).hexdigest()[:32]


def _portable(node: Any) -> Any:
    if isinstance(node, _Identity):
        obj = node.obj
        named = obj if hasattr(obj, "__qualname__") else type(obj)
        return ("named", getattr(named, "__module__", None), named.__qualname__)
    if isinstance(node, tuple):
        return tuple(_portable(item) for item in node)
    return node


def _describe(obj: Any, active: dict) -> Any:
    if isinstance(obj, (float, complex)):
        return (type(obj).__name__, repr(obj) if isinstance(obj, complex) else obj.hex())  # -0.0 != 0.0
    if isinstance(obj, _SCALARS):
        return (type(obj).__name__, obj)
    if isinstance(obj, (np.ndarray, np.generic)) or (isinstance(obj, jax.Array) and not isinstance(obj, jax.core.Tracer)):
        array = np.asarray(obj)
        return ("array", array.dtype.str, array.shape, array.tobytes())
    if isinstance(obj, (tuple, list)):
        return (_Identity(type(obj)), tuple(_describe(x, active) for x in obj))
    if isinstance(obj, (dict, types.MappingProxyType)):
        items = sorted(((repr(k), _describe(v, active)) for k, v in obj.items()), key=lambda kv: kv[0])
        return ("mapping", tuple(items))
    if isinstance(obj, types.FunctionType):
        return _describe_function(obj, active)
    if isinstance(obj, functools.partial):
        return ("partial", _describe(obj.func, active), _describe(obj.args, active), _describe(obj.keywords, active))
    if isinstance(obj, types.MethodType):
        return ("method", _describe(obj.__func__, active), _describe(obj.__self__, active))
    if isinstance(obj, types.ModuleType):
        return ("module", obj.__name__)
    attributes = None if isinstance(obj, type) else _attributes(obj)
    if attributes:
        return _describe_object(obj, attributes, active)
    return _Identity(obj)


def _attributes(obj) -> dict | None:
    """An object's own attributes (``__dict__`` and filled ``__slots__``), or None."""
    attributes = dict(getattr(obj, "__dict__", None) or {})
    for cls in type(obj).__mro__:
        slots = cls.__dict__.get("__slots__", ())
        for name in (slots,) if isinstance(slots, str) else slots:
            if name not in ("__dict__", "__weakref__") and hasattr(obj, name):
                attributes[name] = getattr(obj, name)
    return attributes or None


def _describe_object(obj: Any, attributes: dict, active: dict) -> Any:
    if id(obj) in active:  # a cycle back to an object being described
        return ("recursive", active[id(obj)])
    active[id(obj)] = len(active)
    try:
        return ("object", _Identity(type(obj)), _describe(attributes, active))
    finally:
        del active[id(obj)]


def _describe_function(fn: types.FunctionType, active: dict) -> Any:
    if id(fn) in active:  # recursion (a function that names itself): its place in the walk
        return ("recursive", active[id(fn)])
    active[id(fn)] = len(active)
    try:
        code = fn.__code__
        closure = tuple(
            _describe(cell.cell_contents, active) if _filled(cell) else ("empty",) for cell in fn.__closure__ or ()
        )
        globals_used = tuple(
            (name, _describe(fn.__globals__[name], active))
            for name in sorted(_global_names(code))
            if name in fn.__globals__
        )
        return (
            "function",
            _describe_code(code),
            closure,
            _describe(fn.__defaults__, active),
            _describe(fn.__kwdefaults__, active),
            globals_used,
        )
    finally:
        del active[id(fn)]


def _filled(cell) -> bool:
    try:
        cell.cell_contents
    except ValueError:
        return False
    return True


@functools.lru_cache(maxsize=4096)
def _describe_code(code: types.CodeType) -> tuple:
    """Bytecode and constants (nested code objects recursively); immutable, so cached."""
    constants = tuple(_describe_code(c) if isinstance(c, types.CodeType) else (type(c).__name__, repr(c)) for c in code.co_consts)
    return (code.co_code, constants, code.co_names, code.co_varnames, code.co_argcount, code.co_kwonlyargcount)


@functools.lru_cache(maxsize=4096)
def _global_names(code: types.CodeType) -> frozenset:
    """Names the code (and the code it defines) loads as globals."""
    names = {ins.argval for ins in dis.get_instructions(code) if ins.opname in ("LOAD_GLOBAL", "LOAD_NAME")}
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            names |= _global_names(const)
    return frozenset(names)
