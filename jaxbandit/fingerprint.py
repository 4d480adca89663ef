"""What a policy computes, as a hashable key: a compiled engine is reused only for it.

Two policies get the same key exactly when their functions have the same code and
every value those functions can read besides their arguments is the same: closure
cells, default arguments, attributes set on the function, and the module globals their
code names (followed into the functions they call). A module or class of the user's
own (not one of Python, of an installed package or of jaxbandit; ``__main__`` is the
user's), wherever the code reaches it (a global, a closure cell, a module imported
inside a function, an object's class), counts with the attributes of it that the code
names, and theirs in turn (``settings.ARM``, ``package.settings.ARM``, a class
attribute inherited from a base class of the user's own); a class with every method
(``__init__`` and properties included) and the attributes those name. Whatever is
reached by several paths, or holds itself, is described once. Numbers, strings,
arrays and containers of them (sets and ranges included) compare by value (floats by
their bits: ``-0.0`` is not ``0.0``); functions recursively; an object by its class,
its ``__call__`` if the class defines one, and its attributes (``__dict__`` and
``__slots__``), so a bound method's ``self`` or a captured configuration object
changed in place gets a new key; anything else (a module or class of Python or of a
package, an object of theirs without attributes of its own) by identity, which can
only make two keys differ, never make different computations share one. A policy's
name is not part of it.

What it cannot see is state outside those: an attribute read by a name the code does
not spell (``getattr(settings, name)``), a global that an installed package's function
reads, or what a C object holds. Keep hyper-parameters in ``params``, in a closure, or
on an object's own attributes, and they are seen. The other side of the same rule:
state that the policy's code reaches and changes as it runs (a counter of traces, a
cache) gives another key after each change, so another compile.

A key holds objects compared by identity, which mean nothing in another process;
:func:`stable_digest` names those by their qualified names instead, so that a record
written by one process (a checkpoint, a sweep directory) can be checked by another.
"""

from __future__ import annotations

import collections
import dis
import functools
import hashlib
import json
import os
import sys
import sysconfig
import types
from typing import Any

import jax
import numpy as np

__all__ = ["array_digest", "computation_key", "json_digest", "stable_digest"]

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
    return tuple(_describe(obj, _Walk()) for obj in objects)


def stable_digest(key: tuple) -> str:
    """A hex digest of a :func:`computation_key` that every process computes alike.

    Objects the key compares by identity count by their qualified name (or their
    type's), so two keys that differ only in which such object they hold share a
    digest; code, closures, defaults and values all count.  Bytecode is Python's own,
    so another Python version gives another digest.
    """
    return hashlib.sha256(repr(_portable(key)).encode()).hexdigest()[:32]


def json_digest(value) -> str:
    """A short hex digest of a JSON-able value (keys sorted): for records on disk."""
    return hashlib.sha256(json.dumps(value, sort_keys=True, allow_nan=False).encode()).hexdigest()[:16]


def array_digest(value) -> str:
    """A short hex digest of a numeric array's shape and float64 values."""
    array = np.ascontiguousarray(np.asarray(value, dtype=np.float64))
    return hashlib.sha256(repr(array.shape).encode() + array.tobytes()).hexdigest()[:16]


def _portable(node: Any) -> Any:
    if isinstance(node, _Identity):
        obj = node.obj
        named = obj if hasattr(obj, "__qualname__") else type(obj)
        return ("named", getattr(named, "__module__", None), named.__qualname__)
    if isinstance(node, tuple):
        return tuple(_portable(item) for item in node)
    return node


class _Walk:
    """The objects one description has met: each is described where the walk first
    meets it (with the names it is read by), and later meetings, cycles included, refer
    back to it by its order of meeting, so that shared and cyclic structures cost their
    size, not the number of paths through them.  Each object is kept alive meanwhile,
    so that its id cannot be reused by another."""

    def __init__(self):
        self.met: dict = {}  # (id, names) -> (object, order)

    def once(self, obj, names: frozenset, describe) -> Any:
        key = (id(obj), names)
        if key in self.met:
            return ("met", self.met[key][1])
        self.met[key] = (obj, len(self.met))
        return describe()


def _describe(obj: Any, walk: _Walk, names: frozenset = frozenset()) -> Any:
    """``obj`` as a key; ``names``: the attribute names the code that reaches ``obj``
    spells, read from a module or class of the user's own (:func:`_with_attributes`)."""
    if isinstance(obj, (float, complex)):
        return (type(obj).__name__, repr(obj) if isinstance(obj, complex) else obj.hex())  # -0.0 != 0.0
    if isinstance(obj, _SCALARS):
        return (type(obj).__name__, obj)
    if isinstance(obj, (np.ndarray, np.generic)) or (isinstance(obj, jax.Array) and not isinstance(obj, jax.core.Tracer)):
        array = np.asarray(obj)
        return ("array", array.dtype.str, array.shape, array.tobytes())
    if isinstance(obj, (range, bytearray)):
        return (_Identity(type(obj)), (obj.start, obj.stop, obj.step) if isinstance(obj, range) else bytes(obj))
    # a function reads by its own names only: one description, whatever reaches it
    met_as = frozenset() if isinstance(obj, types.FunctionType) else names
    return walk.once(obj, met_as, lambda: _describe_reference(obj, walk, names))


def _describe_reference(obj: Any, walk: _Walk, names: frozenset) -> Any:
    """:func:`_describe` of what can be shared, or hold itself: containers, code,
    modules, classes and objects."""
    if isinstance(obj, (tuple, list, collections.deque)):
        return (_Identity(type(obj)), tuple(_describe(x, walk, names) for x in obj))
    if isinstance(obj, (set, frozenset)):  # in an order every process finds alike
        items = sorted((_describe(x, walk, names) for x in obj), key=lambda item: repr(_portable(item)))
        return (_Identity(type(obj)), tuple(items))
    if isinstance(obj, (dict, types.MappingProxyType)):
        items = sorted(((repr(k), _describe(v, walk, names)) for k, v in obj.items()), key=lambda kv: kv[0])
        return ("mapping", tuple(items))
    if isinstance(obj, types.FunctionType):
        return _describe_function(obj, walk)
    if isinstance(obj, functools.partial):
        return ("partial", *(_describe(part, walk, names) for part in (obj.func, obj.args, obj.keywords)))
    if isinstance(obj, types.MethodType):
        names = names | _names_of(obj.__func__)  # self.X in the method
        return ("method", _describe(obj.__func__, walk), _describe(obj.__self__, walk, names))
    if isinstance(obj, (classmethod, staticmethod)):
        return (_Identity(type(obj)), _describe(obj.__func__, walk, names))
    if isinstance(obj, property):
        return ("property", *(_describe(f, walk, names) for f in (obj.fget, obj.fset, obj.fdel)))
    if isinstance(obj, types.ModuleType):
        return _with_attributes(("module", obj.__name__), obj, names, walk)
    if isinstance(obj, type):
        return _with_attributes(_Identity(obj), obj, names, walk)
    attributes = _attributes(obj)
    call = getattr(type(obj), "__call__", None)
    call = call if isinstance(call, types.FunctionType) else None  # a __call__ its class defines in Python
    if attributes or call is not None or _own_namespace(type(obj)) is not None:
        call = None if call is None else _describe(call, walk)
        return ("object", _describe(type(obj), walk, names), call, _describe(attributes, walk, names))
    return _Identity(obj)


def _names_of(fn) -> frozenset:
    """Every name the code of ``fn`` (a function, or None) spells."""
    return _names(fn.__code__)[1] if isinstance(fn, types.FunctionType) else frozenset()


def _attributes(obj) -> dict:
    """An object's own attributes (``__dict__`` and filled ``__slots__``)."""
    attributes = dict(getattr(obj, "__dict__", None) or {})
    for cls in type(obj).__mro__:
        slots = cls.__dict__.get("__slots__", ())
        for name in (slots,) if isinstance(slots, str) else slots:
            if name not in ("__dict__", "__weakref__") and hasattr(obj, name):
                attributes[name] = getattr(obj, name)
    return attributes


def _describe_function(fn: types.FunctionType, walk: _Walk) -> Any:
    code = fn.__code__
    loaded, used, imported = _names(code)
    closure = tuple(_describe(cell.cell_contents, walk, used) if _filled(cell) else ("empty",) for cell in fn.__closure__ or ())
    globals_used = tuple(
        (name, _describe(fn.__globals__[name], walk, used)) for name in sorted(loaded) if name in fn.__globals__
    )
    package = fn.__globals__.get("__package__") or ""
    modules = {name: sys.modules.get(name) or sys.modules.get(f"{package}.{name}") for name in imported}
    imports = tuple((name, _describe(module, walk, used)) for name, module in sorted(modules.items()) if module is not None)
    return (
        "function",
        _describe_code(code),
        closure,
        *(_describe(value, walk, used) for value in (fn.__defaults__, fn.__kwdefaults__, fn.__dict__)),
        globals_used,
        imports,
    )


def _with_attributes(described: Any, value, names: frozenset, walk: _Walk) -> Any:
    """A module or class (``described`` as itself), and for one of the user's own the
    attributes of it that ``names`` spells (a class's own or inherited from a class of
    the user's own), each described with ``names`` in turn (``package.settings.ARM``).
    A class counts with every method too (Python calls ``__init__`` or ``__getitem__``
    unnamed), and is read by every name its methods spell (``self.ARM`` in a method that
    another calls)."""
    namespace = _own_namespace(value)
    if namespace is None:
        return described
    methods = {}
    if isinstance(value, type):
        methods = {name: found for name, found in namespace.items() if _functions_of(found)}
        names = names.union(*(_names_of(f) for found in methods.values() for f in _functions_of(found)))
    read = sorted(set(methods) | (names & set(namespace)))
    return ("with attributes", described, tuple((name, _describe(namespace[name], walk, names)) for name in read))


def _functions_of(value) -> list:
    """The Python functions of a class attribute: a method, or those inside a class or
    static method or a property ([] for anything else)."""
    if isinstance(value, (classmethod, staticmethod)):
        value = value.__func__
    parts = (value.fget, value.fset, value.fdel) if isinstance(value, property) else (value,)
    return [part for part in parts if isinstance(part, types.FunctionType)]


def _own_namespace(value) -> dict | None:
    """The attributes of a module or class of the user's own (a class's own and those
    it inherits from classes of the user's own, its own overriding), else None."""
    if isinstance(value, types.ModuleType):
        return vars(value) if _users_own(value) else None
    if not _users_own(sys.modules.get(getattr(value, "__module__", None) or "")):
        return None
    owned = [cls for cls in reversed(value.__mro__) if _users_own(sys.modules.get(cls.__module__ or ""))]
    return {k: v for cls in owned for k, v in vars(cls).items()}


_INSTALLED = tuple(
    os.path.join(os.path.abspath(path), "")
    for path in {sysconfig.get_paths().get(kind) for kind in ("stdlib", "platstdlib", "purelib", "platlib")}
    if path
)


@functools.lru_cache(maxsize=1024)
def _installed_file(file: str) -> bool:
    return os.path.abspath(file).startswith(_INSTALLED)


def _users_own(module: types.ModuleType | None) -> bool:
    """Whether ``module`` is the user's own, not Python's (built in, frozen, or of its
    library), an installed package's or jaxbandit's (they change only with versions,
    which every result records).  A module not found (None) and one without a file
    that Python did not build in (``__main__`` of ``python -c`` or a notebook) count as
    the user's own: following them can only make keys differ."""
    if module is None:
        return True
    name = module.__name__
    if name.partition(".")[0] == "jaxbandit" or name in sys.builtin_module_names:
        return False
    file = getattr(module, "__file__", None)
    if file is None:
        return getattr(getattr(module, "__spec__", None), "origin", None) not in ("built-in", "frozen")
    return not _installed_file(file)


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
def _names(code: types.CodeType) -> tuple:
    """``(loaded, used, imported)``: the names the code (and the code it defines) loads
    as globals, every name it uses (globals and attributes), and the modules it
    imports."""
    instructions = list(dis.get_instructions(code))
    loaded = {ins.argval for ins in instructions if ins.opname in ("LOAD_GLOBAL", "LOAD_NAME")}
    imported = {ins.argval for ins in instructions if ins.opname == "IMPORT_NAME"}
    used = set(code.co_names)
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            inner_loaded, inner_used, inner_imported = _names(const)
            loaded |= inner_loaded
            used |= inner_used
            imported |= inner_imported
    return frozenset(loaded), frozenset(used), frozenset(imported)
