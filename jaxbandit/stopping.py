"""A stop at a safe point, asked for by a signal: Ctrl-C or a scheduler's SIGTERM.

Python turns Ctrl-C into a ``KeyboardInterrupt`` wherever the main thread happens to be:
inside one of JAX's callbacks, which swallows it, or while XLA compiles a program on a
thread of its own, which the interpreter's exit then tears down under it (a crash).  A
SIGTERM ends the process at once.  While a sweep or a simulation runs,
:func:`on_signals` makes the first SIGINT or SIGTERM a request instead: the chunk in
flight finishes, a sweep saves its checkpoint, and :class:`Stopped` is raised, so
nothing computed is lost (a stopped ``SimulationRun`` goes on with ``advance()``).  A
second signal interrupts at once, as Python would.

The handlers are set only from the main thread, only over Python's own ones (a handler
the user set stays), and only in a run of one process: in a run of several, a stop
must be taken by all of them together, and there the default stays.
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import threading
from typing import Callable

import jax

__all__ = ["Stopped", "check", "exit_after", "interrupted", "on_signals", "requested"]

_SIGNALS = (signal.SIGINT, signal.SIGTERM)
_DEFAULTS = {signal.SIGINT: signal.default_int_handler, signal.SIGTERM: signal.SIG_DFL}
_received: list = []  # the signals received while on_signals is active


class Stopped(KeyboardInterrupt):
    """A sweep or a simulation stopped at a safe point on a signal's request; ``signum``
    is the signal."""

    def __init__(self, signum: int):
        super().__init__(f"stopped by {signal.Signals(signum).name}")
        self.signum = signum


class _AtOnce(KeyboardInterrupt):
    """A second signal's interrupt, at once (not at a safe point); ``signum``: the signal."""

    def __init__(self, signum: int):
        super().__init__()
        self.signum = signum


def _request(signum, frame) -> None:
    if _received:  # the second signal: at once
        raise _AtOnce(signum)
    _received.append(signum)
    again = "press Ctrl-C again to stop at once" if signum == signal.SIGINT else "a second signal stops it at once"
    # os.write, not print: the handler may run while the main thread is writing to stderr
    os.write(2, f"\njaxbandit: stopping after the current chunk ({again}).\n".encode())


@contextlib.contextmanager
def on_signals():
    """Within the block, SIGINT and SIGTERM ask for a stop (:func:`check`) where Python's
    own handlers are set, from the main thread, in a run of one process.  Yields whether
    this block set the handlers: an inner block (a sweep's simulation) leaves the stop
    to the outer one, which knows where to save.  A request the block did not take is
    taken as it ends (:class:`Stopped`), never dropped."""
    mine = []
    if jax.process_count() == 1 and threading.current_thread() is threading.main_thread():
        mine = [s for s in _SIGNALS if signal.getsignal(s) is _DEFAULTS[s]]
    if not mine:  # another block's handlers, the user's own, or none allowed here
        yield False
        return
    _received.clear()
    for signum in mine:
        signal.signal(signum, _request)
    try:
        yield True
    finally:
        for signum in mine:
            signal.signal(signum, _DEFAULTS[signum])
        pending = list(_received)
        _received.clear()
    if pending:  # asked for after the last safe point: the stop is taken as the block ends
        raise Stopped(pending[0])


def requested() -> bool:
    """Whether a signal asked the sweep to stop."""
    return bool(_received)


def check() -> None:
    """Raise :class:`Stopped` if a signal asked the sweep to stop."""
    if _received:
        raise Stopped(_received[0])


def exit_after(main: Callable[[], int]) -> None:
    """Exit with the status of a script's ``main``; a sweep it ran that a signal stopped
    (at a safe point, or at once on a second signal) exits as the ``jaxbandit`` command
    does: a line, and the shell's status (128 plus the signal), not a traceback."""
    try:
        status = main()
    except KeyboardInterrupt as stopped:
        status = interrupted(stopped, os.path.basename(sys.argv[0]))
    raise SystemExit(status)


def interrupted(error: KeyboardInterrupt, program: str) -> int:
    """The line a command that ``error`` stopped ends with (on stderr), and its exit
    status: the shell's for the signal, 128 plus its number."""
    how = str(error) if isinstance(error, Stopped) else "interrupted"
    print(f"{program}: {how}; run the same command again to resume.", file=sys.stderr)
    return 128 + getattr(error, "signum", signal.SIGINT)  # a plain KeyboardInterrupt: Python's SIGINT
