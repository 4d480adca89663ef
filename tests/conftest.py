"""Shared test configuration: strict numpy promotion rules, as in the model codebases,
and a compile cache of this test session only.

Both test workers and the command-line processes the tests start compile many of the
same programs (the lower-bound LP at small K, a sweep run in a subprocess and again in
process to compare): they share one persistent compile cache in a fresh temporary
directory, made when the session starts and removed when it ends, so that tests
neither write to the user's cache nor read what an earlier run left there.  A cache hit
is the same executable, so no result depends on it.
"""

import os
import shutil
import signal
import tempfile

import jax
import pytest

SESSION_CACHE = "JAXBANDIT_TEST_SESSION_CACHE"  # set by the first process, inherited by the rest
MIN_COMPILE_TIME = "JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS"  # read by JAX in subprocesses

os.environ.pop("JAX_COMPILATION_CACHE_DIR", None)  # a developer's own JAX cache is never used
jax.config.update("jax_numpy_rank_promotion", "raise")
jax.config.update("jax_numpy_dtype_promotion", "strict")


def use_session_cache() -> None:
    """Point JAX (this process) and the jaxbandit commands (subprocesses) at the
    session's compile cache; tests that change the cache call this to restore it."""
    from jaxbandit import compile_cache

    directory = os.environ[SESSION_CACHE]
    os.environ[compile_cache.ENV_VAR] = directory
    # Every program is kept, not only those over JAX's one-second default: the workers
    # and the commands the tests start compile many of the same small programs.
    os.environ[MIN_COMPILE_TIME] = "0"
    jax.config.update("jax_persistent_cache_min_compile_time_secs", 0)
    compile_cache.enable(directory)


def pytest_configure(config):
    if not hasattr(config, "workerinput") and SESSION_CACHE not in os.environ:
        # the controller (or a run without workers): the workers it starts inherit this
        os.environ[SESSION_CACHE] = tempfile.mkdtemp(prefix="jaxbandit-test-xla-")
        config._jaxbandit_session_cache = os.environ[SESSION_CACHE]
    use_session_cache()


def pytest_unconfigure(config):
    directory = getattr(config, "_jaxbandit_session_cache", None)
    if directory is not None:
        shutil.rmtree(directory, ignore_errors=True)
        os.environ.pop(SESSION_CACHE, None)


@pytest.fixture
def default_signal_handlers():
    """Python's own SIGINT and SIGTERM handlers during the test (a test runner may set
    others, which a sweep or a simulation leaves alone)."""
    saved = {signum: signal.getsignal(signum) for signum in (signal.SIGINT, signal.SIGTERM)}
    signal.signal(signal.SIGINT, signal.default_int_handler)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    yield
    for signum, handler in saved.items():
        signal.signal(signum, handler)
