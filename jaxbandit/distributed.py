"""One sweep as one program over several processes (``jax.distributed``).

Every process runs the same command; JAX joins them into one runtime whose devices
span all processes, and :class:`~jaxbandit.runner.SimulationRun` shards the runs axis
over all of them.  What this module adds around ``jax.distributed.initialize``:

* CPU collectives over TCP (gloo), so that several CPU processes, on one host or
  several, form one program without MPI;
* a deadline for every process to join, with a clear message instead of a hang;
* checks that the processes agree (on their number, on the sweep configuration)
  before any work, raised as :class:`DistributedMismatchError` on every process;
* small collective helpers (agreement, broadcast from process 0, barrier) that are
  no-ops in a single process.

A process that dies mid-sweep closes its collective connections: the others' next
collective fails, or, if none comes, JAX's heartbeat ends them after
``heartbeat_timeout`` seconds.  Starting every process again resumes from the last
checkpoint.  Host-side only: nothing here enters a jitted function.
"""

from __future__ import annotations

import hashlib
import json
import os
import sys
import threading
import traceback
from typing import Callable, Optional, Sequence

import jax
import numpy as np
from jax.experimental import multihost_utils

from jaxbandit._numbers import integer

__all__ = [
    "DistributedMismatchError",
    "EXIT_FAILURE",
    "initialize",
    "is_initialized",
    "process_label",
    "is_multiprocess",
    "is_writer",
    "agree",
    "broadcast_text",
    "broadcast_array",
    "barrier",
    "run_on_process_zero",
    "exit_after_failure",
    "add_cli_options",
    "initialize_from_cli",
]

# Exit status of a process that gave up on the others (not all joined, or one died).
EXIT_FAILURE = 3
_TEXT_BYTES = 4096  # agreement values and messages travel as fixed-size byte arrays
_RESTART_HINT = "start every process again with the same command to resume from the last checkpoint"


class DistributedMismatchError(ValueError):
    """The processes of one run were started with different settings."""


def is_initialized() -> bool:
    """True once this process joined a multi-process run (:func:`initialize`)."""
    return jax.distributed.is_initialized()


def process_label() -> str:
    """``"[process I/N] "`` in a multi-process run, else ``""`` (for log lines)."""
    return f"[process {jax.process_index()}/{jax.process_count()}] " if is_initialized() else ""


def is_multiprocess() -> bool:
    """True in a run of several JAX processes."""
    return jax.process_count() > 1


def is_writer() -> bool:
    """True in the one process that writes results and checkpoints (process 0)."""
    return jax.process_index() == 0


def _check_coordinator(coordinator: str) -> str:
    host, _, port = coordinator.rpartition(":")
    if not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise ValueError(f"coordinator must be HOST:PORT (e.g. node0:12345), got {coordinator!r}.")
    return coordinator


def _check_counts(num_processes, process_id) -> None:
    integer("num_processes", num_processes, 1)
    integer("process_id", process_id, 0, num_processes - 1, " (0-based)")


def initialize(
    coordinator: Optional[str] = None,
    num_processes: Optional[int] = None,
    process_id: Optional[int] = None,
    *,
    heartbeat_timeout: Optional[int] = None,
    join_timeout: int = 300,
) -> None:
    """Join this process to a multi-process run; call it before any other JAX call.

    Give all of ``coordinator``, ``num_processes`` and ``process_id``, or none of
    them to let JAX find them in a cluster it recognizes (SLURM, Open MPI, TPU pods).

    Args:
        coordinator: ``HOST:PORT`` of process 0, where it serves the coordination.
        num_processes: number of processes, the same in every process.
        process_id: this process's index, 0-based.
        heartbeat_timeout: seconds without a heartbeat after which JAX declares a
            process dead and ends the others (default: JAX's).
        join_timeout: seconds to wait for every process to join; past it this
            process prints why and exits with :data:`EXIT_FAILURE` (JAX would abort).

    Raises:
        ValueError: a bad or incomplete argument (naming it and the value).
        DistributedMismatchError: the processes were told different numbers of
            processes (raised in every process).
    """
    explicit = (coordinator, num_processes, process_id)
    if any(v is not None for v in explicit) and any(v is None for v in explicit):
        raise ValueError(
            "coordinator, num_processes and process_id go together: give all three or none "
            f"(got coordinator={coordinator!r}, num_processes={num_processes!r}, process_id={process_id!r})."
        )
    if coordinator is not None:
        _check_coordinator(coordinator)
        _check_counts(num_processes, process_id)
    _check_timeouts(heartbeat_timeout, join_timeout)

    # CPU devices of different processes exchange data over TCP; without this option
    # a CPU-only run of several processes has no cross-process collectives.
    try:
        jax.config.update("jax_cpu_collectives_implementation", "gloo")
    except AttributeError:  # older JAX: the option had another name
        jax.config.update("jax_cpu_enable_gloo_collectives", True)
    options = {} if heartbeat_timeout is None else {"heartbeat_timeout_seconds": heartbeat_timeout}
    where = f"coordinator {coordinator}" if coordinator else "the coordinator the cluster names"
    who = f"process {process_id} of {num_processes}" if process_id is not None else "this process"
    # JAX aborts the process when its own deadline passes; ours comes first and says why.
    watchdog = threading.Timer(join_timeout, _not_joined, args=(who, where, join_timeout))
    watchdog.daemon = True
    watchdog.start()
    try:
        try:
            jax.distributed.initialize(
                coordinator_address=coordinator,
                num_processes=num_processes,
                process_id=process_id,
                initialization_timeout=join_timeout + 60,
                **options,
            )
        except ValueError as error:  # JAX's own, where it finds no cluster to read the settings from
            if coordinator is not None:
                raise
            raise ValueError(
                f"JAX found no cluster that names the processes ({error}); outside SLURM, Open MPI or a TPU pod, "
                "give coordinator, num_processes and process_id."
            ) from None
        _check_process_count(num_processes)
    finally:
        watchdog.cancel()


def _not_joined(who: str, where: str, seconds: int) -> None:
    print(
        f"jaxbandit: error: {who} waited {seconds} s at {where} and not every process "
        "joined. Check that every process was started, with the same --coordinator and "
        "--num-processes, and that none failed (see their logs).",
        file=sys.stderr,
        flush=True,
    )
    os._exit(EXIT_FAILURE)


def _check_process_count(requested: Optional[int]) -> None:
    """Every process must have been told the number of processes that joined."""
    views = _allgather_text(json.dumps(requested))
    joined = jax.process_count()
    if any(json.loads(v) not in (None, joined) for v in views):
        listing = ", ".join(f"process {i}: {v}" for i, v in enumerate(views))
        raise DistributedMismatchError(
            f"the processes were started with different numbers of processes ({listing}; "
            f"{joined} joined). Give every process the same --num-processes."
        )


# -- collectives on host values ----------------------------------------------------


def _encode(text: str) -> np.ndarray:
    data = text.encode("utf-8")
    if len(data) > _TEXT_BYTES:
        head = data[: _TEXT_BYTES - 80].decode("utf-8", errors="ignore").encode("utf-8")  # whole characters
        data = head + b" ... (sha256 " + hashlib.sha256(data).hexdigest().encode() + b")"
    buffer = np.zeros(_TEXT_BYTES + 4, np.uint8)
    buffer[:4] = np.frombuffer(np.uint32(len(data)).tobytes(), np.uint8)
    buffer[4 : 4 + len(data)] = np.frombuffer(data, np.uint8)
    return buffer


def _decode(buffer: np.ndarray) -> str:
    length = int(np.frombuffer(buffer[:4].tobytes(), np.uint32)[0])
    return buffer[4 : 4 + length].tobytes().decode("utf-8")


def _allgather_text(text: str) -> list:
    """Every process's ``text``, in process order (one process: ``[text]``)."""
    if jax.process_count() == 1:
        return [text]
    gathered = np.asarray(multihost_utils.process_allgather(_encode(text)))
    return [_decode(row) for row in gathered]


def agree(what: str, value: str) -> None:
    """Check that every process has the same ``value`` (a collective: call it everywhere).

    Raises:
        DistributedMismatchError: in every process, listing each process's value.
    """
    values = _allgather_text(value)
    if any(v != values[0] for v in values):
        listing = "; ".join(f"process {i}: {v}" for i, v in enumerate(values))
        raise DistributedMismatchError(
            f"the processes disagree on {what} ({listing}). Start every process with the same "
            "command: the same configuration and options."
        )


def broadcast_text(text: str) -> str:
    """Process 0's ``text`` in every process (a collective: call it everywhere)."""
    if jax.process_count() == 1:
        return text
    return _decode(np.asarray(multihost_utils.broadcast_one_to_all(_encode(text))))


def broadcast_array(array: np.ndarray) -> np.ndarray:
    """Process 0's ``array`` in every process (same shape and dtype everywhere)."""
    if jax.process_count() == 1 or np.size(array) == 0:
        return np.asarray(array)
    return np.asarray(multihost_utils.broadcast_one_to_all(np.asarray(array)))


def barrier(name: str) -> None:
    """Wait until every process gets here (no-op in one process)."""
    if jax.process_count() > 1:
        multihost_utils.sync_global_devices(name)


def run_on_process_zero(fn: Callable[[], None], errors: Sequence[type]) -> None:
    """Call ``fn`` in process 0 only; an error of a type in ``errors`` is raised in
    every process (so that all stop together rather than wait for each other)."""
    failure = ""
    if is_writer():
        try:
            fn()
        except tuple(errors) as error:
            failure = json.dumps([list(errors).index(type(error)), str(error)])
    failure = broadcast_text(failure)
    if failure:
        index, message = json.loads(failure)
        raise errors[index](message)


def exit_after_failure(error: BaseException) -> None:
    """Report ``error`` and leave at once, skipping JAX's shutdown barrier.

    The barrier would wait for processes that may be dead or blocked in a collective
    with this one; leaving closes this process's connections, so theirs fail too.
    """
    traceback.print_exception(type(error), error, error.__traceback__, file=sys.stderr)
    print(
        f"jaxbandit: error: process {jax.process_index()} of {jax.process_count()} stopped: "
        f"{type(error).__name__}: {str(error).splitlines()[0] if str(error) else ''}\n"
        f"If another process of this run died or was killed, this is the consequence; "
        f"{_RESTART_HINT}.",
        file=sys.stderr,
        flush=True,
    )
    sys.stdout.flush()
    os._exit(EXIT_FAILURE)


# -- command line ------------------------------------------------------------------


def add_cli_options(parser) -> None:
    """The options of ``jaxbandit run`` that make it one program over several processes."""
    group = parser.add_argument_group(
        "several processes (one sweep as one program; see README, 'Several machines')"
    )
    group.add_argument("--coordinator", metavar="HOST:PORT", default=None,
                       help="address of process 0 (with --num-processes and --process-id)")
    group.add_argument("--num-processes", metavar="N", type=int, default=None, help="number of processes")
    group.add_argument("--process-id", metavar="I", type=int, default=None, help="this process, 0-based")
    group.add_argument("--distributed", action="store_true",
                       help="join a multi-process run whose settings JAX reads from the cluster (SLURM, Open MPI)")
    group.add_argument("--heartbeat-timeout", metavar="SECONDS", type=int, default=None,
                       help="declare a silent process dead after SECONDS (default: JAX's)")
    group.add_argument("--join-timeout", metavar="SECONDS", type=int, default=300,
                       help="give up if not every process joined within SECONDS (default 300)")  # fmt: skip


def _check_timeouts(heartbeat_timeout, join_timeout) -> None:
    """Both timeouts positive integers (seconds); ``heartbeat_timeout`` may be None."""
    integer("join_timeout", join_timeout, 1)
    if heartbeat_timeout is not None:
        integer("heartbeat_timeout", heartbeat_timeout, 1)


def initialize_from_cli(args) -> bool:
    """:func:`initialize` from :func:`add_cli_options` arguments; False if none was given.

    Raises:
        ValueError: bad or conflicting options (naming them and their values).
    """
    explicit = {"--coordinator": args.coordinator, "--num-processes": args.num_processes, "--process-id": args.process_id}
    given = [name for name, value in explicit.items() if value is not None]
    if args.distributed and given:
        raise ValueError(f"--distributed reads the settings from the cluster; drop {', '.join(given)} or --distributed.")
    if not args.distributed and not given:
        try:  # checked here too: a bad value is a mistake even where it is not used
            _check_timeouts(args.heartbeat_timeout, args.join_timeout)
        except ValueError as error:
            raise _naming_options(error) from None
        return False
    if given and len(given) < 3:
        missing = [name for name in explicit if name not in given]
        raise ValueError(f"{', '.join(given)} needs {' and '.join(missing)} too (all three or none).")
    try:
        initialize(
            args.coordinator, args.num_processes, args.process_id,
            heartbeat_timeout=args.heartbeat_timeout, join_timeout=args.join_timeout,
        )  # fmt: skip
    except ValueError as error:
        raise _naming_options(error) from None
    return True


def _naming_options(error: ValueError) -> ValueError:
    """``error`` naming the command-line options rather than :func:`initialize`'s arguments."""
    message = str(error)
    for name, option in (("coordinator", "--coordinator"), ("num_processes", "--num-processes"),
                         ("process_id", "--process-id"), ("heartbeat_timeout", "--heartbeat-timeout"),
                         ("join_timeout", "--join-timeout")):  # fmt: skip
        message = message.replace(f"{name} must", f"{option} must")
    message = message.replace("give coordinator, num_processes and process_id", "give --coordinator, --num-processes and --process-id")
    return type(error)(message)
