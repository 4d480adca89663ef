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
of its own and of its bases of the user's (``__init__``, properties and a method
``super()`` reaches included) and the attributes those name; the names are
those that any code the walk meets spells (a helper reading ``module.ARM`` of a
module another function passes it). Whatever is reached by several paths, or holds
itself, is described once. Numbers, strings, arrays (by dtype, weak type, shape and
bytes; an object array by its objects), slices and containers of them (sets, ranges, dicts
in their order, and a container class of the user's own with its methods and its own
attributes) compare by value (floats by their bits: ``-0.0`` is not ``0.0``; a
subclass of a number or string with its class); a built-in method by its object
(``table.get``); functions recursively (code with its flags and exception table; the globals of a
Python or installed package's function are not followed); an object by its class
(without its constructors: a count of instances they keep is no part of it), its
``__call__`` if the class defines one, and its attributes (``__dict__`` and
``__slots__``), so a bound method's ``self`` or a captured configuration object
changed in place gets a new key; anything else (a module or class of Python or of a
package, an object of theirs without attributes of its own) by identity, which can
only make two keys differ, never make different computations share one. A policy's
name is not part of it.

What it cannot see is state outside those: an attribute read by a name the code does
not spell (``getattr(settings, name)``), a global that an installed package's function
reads, or what a C object holds. Keep hyper-parameters in ``params``, in a closure, or
on an object's own attributes, and they are seen. A ``functools.cached_property``'s
value counts once computed (its first use then gives another key); an object of a
package's C type without attributes (``operator.itemgetter(0)``, a numpy ``Generator``)
counts by identity, so on disk only by its type. The other side of the same rule:
state that the policy's code reaches and changes as it runs (a counter of traces, a
cache) gives another key after each change, so another compile.

A key holds objects compared by identity, which mean nothing in another process;
:func:`stable_digest` names those by their qualified names instead, so that a record
written by one process (a checkpoint, a sweep directory) can be checked by another.
"""

from __future__ import annotations

import collections
import decimal
import dis
import fractions
import functools
import hashlib
import importlib.util
import json
import os
import sys
import sysconfig
import types
from typing import Any

import jax
import numpy as np

__all__ = ["array_digest", "computation_key", "json_digest", "numpy_arrays", "source_digest", "stable_digest"]

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
    """A hashable description of ``objects`` (functions, NamedTuples of them, values);
    a ValueError for a structure nested deeper than the walk's recursion can follow."""
    try:
        return tuple(_describe_whole(obj) for obj in objects)
    except RecursionError:
        raise ValueError(
            "cannot fingerprint the policy: what its functions reach is nested deeper than Python's recursion "
            f"limit ({sys.getrecursionlimit()}) lets the fingerprint follow (a long chain of objects?); keep its "
            "settings in a flatter structure, or raise the limit with sys.setrecursionlimit."
        ) from None


def _describe_whole(obj) -> Any:
    """``obj`` described with every attribute name that any code it reaches spells."""
    return _whole_walk(obj)[0]


def _whole_walk(obj) -> tuple:
    """``(description, walk)`` of ``obj``: walked again with the names the last walk
    found until they stop growing (a helper that reads ``settings.ARM`` of a module
    another function passes it)."""
    spelled: frozenset = frozenset()
    while True:
        walk = _Walk(spelled)
        described = _describe(obj, walk)
        if walk.spelled <= spelled:
            return described, walk
        spelled = spelled | walk.spelled


def numpy_arrays(*objects) -> list:
    """The numpy arrays that ``objects`` reach, as :func:`computation_key` finds them."""
    return [array for obj in objects for array in _whole_walk(obj)[1].arrays]


def stable_digest(key: tuple) -> str:
    """A hex digest of a :func:`computation_key` that every process computes alike.

    Objects the key compares by identity count by their qualified name (or their
    type's), so two keys that differ only in which such object they hold share a
    digest; code, closures, defaults and values all count.  Bytecode is Python's own,
    so another Python version gives another digest.
    """
    return hashlib.sha256(repr(_portable(key)).encode()).hexdigest()[:32]


def _sources_digest() -> str:
    """The digest :func:`source_digest` returns, read from the files."""
    import jaxlib

    root = os.path.dirname(os.path.abspath(__file__))
    digest = hashlib.sha256(f"jax {jax.__version__} jaxlib {jaxlib.__version__}".encode())
    for folder, subfolders, names in os.walk(root):
        subfolders.sort()  # os.walk descends in this order
        for name in sorted(names):
            path = os.path.join(folder, name)
            if name.endswith(".py") and os.path.isfile(path):  # not an editor's dangling lock link
                digest.update(os.path.relpath(path, root).replace(os.sep, "/").encode() + b"\0")
                with open(path, "rb") as handle:
                    digest.update(handle.read())
    return digest.hexdigest()[:16]


def source_digest() -> str:
    """A digest of what computes a result besides its inputs and the policy's own code:
    every source file of jaxbandit (the environment, the estimator, the engine, the
    LP, ...) as it was when jaxbandit was imported, and the versions of jax and jaxlib
    (XLA).  Results recorded under another digest may differ, so a resumed sweep or a
    restored checkpoint checks it.  Not covered: the backend and XLA's flags."""
    return _SOURCE_DIGEST


def json_digest(value) -> str:
    """A short hex digest of a JSON-able value (keys sorted): for records on disk."""
    return hashlib.sha256(json.dumps(value, sort_keys=True, allow_nan=False).encode()).hexdigest()[:16]


def array_digest(value) -> str:
    """A short hex digest of a numeric array's shape and float64 values."""
    array = np.ascontiguousarray(np.asarray(value, dtype=np.float64))
    return hashlib.sha256(repr(array.shape).encode() + array.tobytes()).hexdigest()[:16]


def instance_digest(instance) -> str:
    """A short hex digest of an :class:`~jaxbandit.instances.Instance`'s values: its
    means, noise levels and noise family (what tells apart two instances of one label)."""
    return json_digest([array_digest(instance.mu), array_digest(instance.sigma), instance.noise.label])


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

    def __init__(self, spelled: frozenset = frozenset()):
        self.met: dict = {}  # (id, names) -> (object, order)
        self.known = spelled  # the names every module and class of the user's is read by
        self.spelled: set = set()  # the names the code met so far spells
        self.arrays: list = []  # the numpy arrays met (numpy_arrays)

    def once(self, obj, names: frozenset, describe) -> Any:
        key = (id(obj), names)
        if key in self.met:
            return ("met", self.met[key][1])
        self.met[key] = (obj, len(self.met))
        return describe()


def _describe(obj: Any, walk: _Walk, names: frozenset = frozenset()) -> Any:
    """``obj`` as a key; ``names``: the attribute names the code that reaches ``obj``
    spells, read from a module or class of the user's own (:func:`_with_attributes`)."""
    if type(obj) in _SCALARS:
        return _scalar(obj)
    if isinstance(obj, _SCALARS) and not isinstance(obj, np.generic):  # a subclass: its class too (its methods)
        base = next(kind for kind in _SCALARS if isinstance(obj, kind))
        return (_describe(type(obj), walk, names), _scalar(base(obj)))
    if isinstance(obj, jax.Array) and not isinstance(obj, jax.core.Tracer) and jax.dtypes.issubdtype(obj.dtype, jax.dtypes.prng_key):
        with jax.ensure_compile_time_eval():  # its data, not a tracer, when described while a function traces
            data = jax.random.key_data(obj)
        return ("keys", str(obj.dtype), _describe(data, walk))
    if isinstance(obj, (np.ndarray, np.generic)) or (isinstance(obj, jax.Array) and not isinstance(obj, jax.core.Tracer)):
        if isinstance(obj, np.ndarray):  # a subclass too (np.memmap): JAX keeps a copy of each
            walk.arrays.append(obj)
        array = np.asarray(obj)  # the dtype in full: narrow and structured dtypes share their .str ('<V1')
        if array.dtype.hasobject:  # its objects, not their addresses
            return ("object array", array.shape, _describe(array.ravel().tolist(), walk, names))
        # a weakly typed JAX array (a Python scalar's) promotes as the other operand's dtype
        kind = "weak array" if getattr(obj, "weak_type", False) else "array"
        return (kind, array.dtype.str, str(array.dtype), array.shape, array.tobytes())
    if type(obj) in (list, tuple) and all(type(x) is float for x in obj):  # many floats: their bits at once
        return (type(obj).__name__, "floats", np.asarray(obj, np.float64).tobytes())
    if type(obj) in (list, tuple) and all(type(x) in _SCALARS for x in obj):  # many numbers: one pass
        return (type(obj).__name__, tuple(map(_scalar, obj)))
    if isinstance(obj, (range, slice)):
        return (_Identity(type(obj)), *(_describe(part, walk) for part in (obj.start, obj.stop, obj.step)))
    if isinstance(obj, (bytearray, decimal.Decimal, fractions.Fraction, jax.tree_util.PyTreeDef)):
        return (_Identity(type(obj)), bytes(obj) if isinstance(obj, bytearray) else str(obj))
    if isinstance(obj, (types.BuiltinMethodType, types.MethodWrapperType)) and not isinstance(obj.__self__, (types.ModuleType, type(None))):
        return ("bound method", obj.__name__, _describe(obj.__self__, walk, names))  # dict.get: and its dict
    # a function reads by its own names only: one description, whatever reaches it
    met_as = frozenset() if isinstance(obj, types.FunctionType) else names
    return walk.once(obj, met_as, lambda: _describe_reference(obj, walk, names))


def _describe_reference(obj: Any, walk: _Walk, names: frozenset) -> Any:
    """:func:`_describe` of what can be shared, or hold itself: containers, code,
    modules, classes and objects."""
    if isinstance(obj, (tuple, list, collections.deque, set, frozenset, dict, types.MappingProxyType)):
        # a NamedTuple or dict subclass of the user's: its methods and its own attributes
        attributes = _attributes(obj)  # (a plain container has none)
        kind = (_describe(type(obj), walk, names), _describe(attributes, walk, names) if attributes else None)
        if isinstance(obj, (tuple, list, collections.deque)):
            return (kind, tuple(_describe(x, walk, names) for x in obj))
        if isinstance(obj, (set, frozenset)):  # in an order every process finds alike
            return (kind, tuple(_describe(x, walk, names) for x in sorted(obj, key=lambda x: _alone(x, walk, names))))
        factory = _describe(getattr(obj, "default_factory", None), walk, names)  # a defaultdict's
        return ("mapping", kind, factory, tuple((_describe(k, walk, names), _describe(v, walk, names)) for k, v in obj.items()))
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
    if attributes or call is not None or _own_namespaces(type(obj)) is not None:
        call = None if call is None else _describe(call, walk)
        cls = type(obj)  # as an object made already uses it: without what made it
        kind = walk.once(cls, names | _MADE, lambda: _with_attributes(_Identity(cls), cls, names, walk, made=True))
        return ("object", kind, call, _describe(attributes, walk, names))
    return _Identity(obj)


# how an object's class is met (not a name code can spell): its constructors left out, so
# that a class attribute they change (a count of instances) is no part of the key
_MADE = frozenset({"<made>"})
_CONSTRUCTORS = ("__init__", "__new__", "__init_subclass__", "__post_init__")


def _scalar(obj) -> tuple:
    """A number, string, bytes or None of a built-in type (floats by their bits: ``-0.0``
    is not ``0.0``)."""
    if isinstance(obj, (float, complex)):
        return (type(obj).__name__, repr(obj) if isinstance(obj, complex) else obj.hex())
    return (type(obj).__name__, obj)


def _alone(obj, walk: _Walk, names: frozenset) -> str:
    """``obj``'s description as if the walk met it first (no back-reference to what a
    set's other members hold), as text: the order of a set's members."""
    met = walk.met
    walk.met = dict(met)
    try:
        return repr(_portable(_describe(obj, walk, names)))
    finally:
        walk.met = met


def _names_of(fn) -> frozenset:
    """Every name the code of ``fn`` (a function, or None) spells."""
    return _names(fn.__code__)[1] if isinstance(fn, types.FunctionType) else frozenset()


def _attributes(obj) -> dict:
    """An object's own attributes (``__dict__`` and filled ``__slots__``), read past any
    ``__getattr__`` of its class.  The values a ``functools.cached_property`` keeps there
    count too, once computed: computed from the others, they may be stale (another
    attribute changed since), and a trace reads them as they are."""
    try:
        attributes = dict(object.__getattribute__(obj, "__dict__") or {})
    except (AttributeError, TypeError):
        attributes = {}
    for cls in type(obj).__mro__:
        slots = cls.__dict__.get("__slots__", ())
        for name in (slots,) if isinstance(slots, str) else slots:
            if name in ("__dict__", "__weakref__"):
                continue
            if name.startswith("__") and not name.endswith("__"):  # a private slot is kept under its mangled name
                name = f"_{cls.__name__.lstrip('_')}{name}"
            try:
                attributes[name] = object.__getattribute__(obj, name)
            except AttributeError:  # a slot not filled
                pass
    return attributes


def _describe_function(fn: types.FunctionType, walk: _Walk) -> Any:
    """A function's code, closure, defaults and attributes; for one of the user's own or
    of jaxbandit also the globals it reads and the modules it imports (those of Python
    and of installed packages change only with their versions)."""
    code = fn.__code__
    loaded, used, imported = _names(code)
    module = sys.modules.get(fn.__module__ or "")
    if module is None or _users_own(module) or module.__name__.partition(".")[0] == "jaxbandit":
        walk.spelled |= used
    else:
        loaded, imported = frozenset(), frozenset()
    used = used | walk.known
    closure = tuple(_describe(cell.cell_contents, walk, used) if _filled(cell) else ("empty",) for cell in fn.__closure__ or ())
    globals_used = tuple(
        (name, _describe(fn.__globals__[name], walk, used)) for name in sorted(loaded) if name in fn.__globals__
    )
    package = fn.__globals__.get("__package__") or ""
    modules = {}
    for name, level in sorted(imported):
        try:
            resolved = importlib.util.resolve_name("." * level + name, package) if level else name
        except (ImportError, ValueError):
            continue
        modules[resolved] = sys.modules.get(resolved)
    imports = tuple((name, _describe(found, walk, used)) for name, found in modules.items() if found is not None)
    return (
        "function",
        _describe_code(code),
        closure,
        *(_describe(value, walk, used) for value in (fn.__defaults__, fn.__kwdefaults__, fn.__dict__)),
        globals_used,
        imports,
    )


def _with_attributes(described: Any, value, names: frozenset, walk: _Walk, made: bool = False) -> Any:
    """A module or class (``described`` as itself), and for one of the user's own the
    attributes of it that ``names`` spells (a class's own or inherited from a class of
    the user's own), each described with ``names`` in turn (``package.settings.ARM``).
    A class counts with every method too (Python calls ``__init__`` or ``__getitem__``
    unnamed), and is read by every name its methods spell (``self.ARM`` in a method that
    another calls); ``made``: the class of an object made already, without its
    constructors (``__init__``)."""
    spaces = _own_namespaces(value)
    if spaces is None:
        return described
    names = names | walk.known
    methods = {}  # (class, name) -> attribute
    if isinstance(value, type):  # a base's method that super() reaches counts too
        methods = {(owner, k): v for owner, space in spaces for k, v in space.items()
                   if _functions_of(v) and not (made and k in _CONSTRUCTORS)}  # fmt: skip
        names = names.union(*(_names_of(f) for found in methods.values() for f in _functions_of(found)))
    read = tuple(
        (owner, name, _describe(space[name], walk, names))
        for owner, space in spaces
        for name in sorted((names & set(space)) | {k for (o, k) in methods if o == owner})
    )
    return ("with attributes", described, read)


def _functions_of(value) -> list:
    """The Python functions of a class attribute: a method, or those inside a class or
    static method or a property ([] for anything else)."""
    if isinstance(value, (classmethod, staticmethod)):
        value = value.__func__
    parts = (value.fget, value.fset, value.fdel) if isinstance(value, property) else (value,)
    return [part for part in parts if isinstance(part, types.FunctionType)]


def _own_namespaces(value) -> list | None:
    """``[(owner, attributes)]`` of a module or class of the user's own: the module's,
    or those of each class of the user's own in the class's MRO, bases first (an
    attribute a class overrides and ``super()`` still reaches counts too); else None."""
    if isinstance(value, types.ModuleType):
        return [("", vars(value))] if _users_own(value) else None
    if not _users_own(sys.modules.get(getattr(value, "__module__", None) or "")):
        return None
    owned = [cls for cls in reversed(value.__mro__) if _users_own(sys.modules.get(cls.__module__ or ""))]
    return [(f"{cls.__module__}.{cls.__qualname__}", vars(cls)) for cls in owned]


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
    constants = tuple(_describe_constant(c) for c in code.co_consts)
    shape = (code.co_argcount, code.co_posonlyargcount, code.co_kwonlyargcount, code.co_flags)
    return (code.co_code, getattr(code, "co_exceptiontable", b""), constants, code.co_names, code.co_varnames,
            code.co_freevars, code.co_cellvars, shape)  # fmt: skip


def _describe_constant(constant) -> Any:
    """A code constant: nested code by its description, a frozenset (``x in {...}``) by
    its members in an order every process finds alike, anything else by its repr."""
    if isinstance(constant, types.CodeType):
        return _describe_code(constant)
    if isinstance(constant, frozenset):
        return ("frozenset", tuple(sorted(repr(_describe_constant(c)) for c in constant)))
    return (type(constant).__name__, repr(constant))


@functools.lru_cache(maxsize=4096)
def _names(code: types.CodeType) -> tuple:
    """``(loaded, used, imported)``: the names the code (and the code it defines) loads
    as globals, every name it uses (globals and attributes), and the modules it imports
    (``(name, level)``, level > 0 for a relative import)."""
    instructions = list(dis.get_instructions(code))
    loaded = {ins.argval for ins in instructions if ins.opname in ("LOAD_GLOBAL", "LOAD_NAME")}
    # IMPORT_NAME follows LOAD_CONST level, LOAD_CONST fromlist: (name, level) pairs
    imported = {
        (ins.argval, instructions[i - 2].argval if i >= 2 and isinstance(instructions[i - 2].argval, int) else 0)
        for i, ins in enumerate(instructions)
        if ins.opname == "IMPORT_NAME"
    }
    used = set(code.co_names)
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            inner_loaded, inner_used, inner_imported = _names(const)
            loaded |= inner_loaded
            used |= inner_used
            imported |= inner_imported
    return frozenset(loaded), frozenset(used), frozenset(imported)


_SOURCE_DIGEST = _sources_digest()  # read at import: the code that runs, not later edits
