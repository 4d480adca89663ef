"""The persistent compile cache: which directory, bad directories, the command line's
option, and a second process that loads what the first one compiled."""

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import jax
import pytest

from jaxbandit import cli, compile_cache
from tests.conftest import SESSION_CACHE

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture
def no_cache_settings(monkeypatch, tmp_path):
    """No environment variable, and a home cache under ``tmp_path``; afterwards the
    test session's cache (see conftest) is in use again."""
    monkeypatch.delenv(compile_cache.ENV_VAR, raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    jax.config.update("jax_compilation_cache_dir", None)
    yield tmp_path
    compile_cache.enable(os.environ[SESSION_CACHE])


def test_default_directory_precedence(no_cache_settings, monkeypatch):
    tmp_path = no_cache_settings
    assert compile_cache.default_directory() == tmp_path / "xdg" / "jaxbandit" / "xla"
    jax.config.update("jax_compilation_cache_dir", str(tmp_path / "jax"))  # reset by the fixture
    assert compile_cache.default_directory() == tmp_path / "jax"  # JAX's own setting
    monkeypatch.setenv(compile_cache.ENV_VAR, str(tmp_path / "mine"))
    assert compile_cache.default_directory() == tmp_path / "mine"  # before JAX's
    monkeypatch.setenv(compile_cache.ENV_VAR, " OFF ")
    assert compile_cache.default_directory() is None
    monkeypatch.setenv(compile_cache.ENV_VAR, "  ")  # blank: as if unset, never "."
    assert compile_cache.default_directory() == tmp_path / "jax"


def test_enable_then_off(no_cache_settings):
    tmp_path = no_cache_settings
    assert compile_cache.enable(tmp_path / "here") == tmp_path / "here"
    assert jax.config.jax_compilation_cache_dir == str(tmp_path / "here")
    assert compile_cache.enable("off") is None
    assert jax.config.jax_compilation_cache_dir is None
    assert not (tmp_path / "xdg").exists()  # "off" creates nothing


def test_a_url_goes_to_jax_as_written(no_cache_settings, monkeypatch):
    """A URL reaches JAX as written: never a local directory (pathlib reads
    gs://bucket/xla as gs:/bucket/xla under the working directory), and JAX's own URL
    setting is kept.  No program is compiled here, so nothing reads the bucket."""
    tmp_path = no_cache_settings
    monkeypatch.chdir(tmp_path)
    url = "gs://bucket/xla"
    assert compile_cache.enable(url) == url
    assert jax.config.jax_compilation_cache_dir == url
    monkeypatch.setenv(compile_cache.ENV_VAR, "s3://other/cache")
    assert compile_cache.enable() == "s3://other/cache"
    monkeypatch.delenv(compile_cache.ENV_VAR)
    jax.config.update("jax_compilation_cache_dir", url)  # the user's own JAX setting
    assert compile_cache.default_directory() == url
    assert compile_cache.enable() == url and jax.config.jax_compilation_cache_dir == url
    assert sorted(os.listdir(tmp_path)) == []  # no local "gs:" or "s3:" directory


def test_directories_that_cannot_be_used(no_cache_settings, monkeypatch, capsys):
    tmp_path = no_cache_settings
    blocker = tmp_path / "a_file"
    blocker.write_text("")
    with pytest.raises(ValueError, match=r"compile cache directory '.*a_file' cannot be used"):
        compile_cache.enable(blocker)
    # not paths: 3 and b"..." would make directories named "3" and "b'...'"; the others a
    # RuntimeError and an unnamed ValueError from pathlib and os
    for bad, message in ((3, "must be a path or 'off', got 3"), (b"/tmp/x", "must be a path or 'off', got b'/tmp/x'"),
                         ("~no_such_user_here/x", "'~no_such_user_here/x': Could not determine home directory"),
                         ("/tmp/a\0b", "holds a NUL byte")):  # fmt: skip
        with pytest.raises(ValueError, match=re.escape(message)):
            compile_cache.enable(bad)
    with pytest.raises(ValueError, match="must not be empty"):
        compile_cache.enable(" ")
    argv = ["run", str(tmp_path / "missing.toml"), "--out", str(tmp_path / "out"), "--compile-cache", str(blocker)]
    assert cli.main(argv) == cli.EXIT_USAGE
    assert "a_file' cannot be used" in capsys.readouterr().err
    monkeypatch.setenv(compile_cache.ENV_VAR, str(blocker / "below"))
    assert cli.main(["bound", "--mu", "1,0.5", "--sigma", "1,inf;inf,1"]) == cli.EXIT_USAGE
    assert "$JAXBANDIT_COMPILE_CACHE '" in capsys.readouterr().err
    # Nobody asked for the default directory: a read-only home only costs the cache.
    monkeypatch.delenv(compile_cache.ENV_VAR)
    monkeypatch.setenv("XDG_CACHE_HOME", str(blocker))
    with pytest.warns(UserWarning, match="no compile cache: .* '.*a_file/jaxbandit/xla' cannot be used"):
        assert compile_cache.enable() is None
    if os.geteuid() != 0:  # root may write anywhere
        read_only = tmp_path / "read_only"
        read_only.mkdir(mode=0o500)
        with pytest.raises(ValueError, match="read_only' cannot be used"):
            compile_cache.enable(read_only)


class _Enabled(Exception):
    """Raised by the stand-in for ``enable``: the command got that far."""


@pytest.mark.parametrize(
    "argv, expected",
    [
        (["run", "sweep.toml", "--out", "out", "--compile-cache", "here"], "here"),
        (["demo", "--compile-cache", "off"], "off"),
        (["plot", "out"], None),
        (["bound", "--mu", "1,0.5", "--sigma", "1,1;1,1"], None),
        (["check", "sweep.toml"], "not called"),
    ],
)
def test_each_command_enables_the_cache_first(monkeypatch, argv, expected):
    def enabled(directory=None):
        raise _Enabled(directory)

    monkeypatch.setattr(compile_cache, "enable", enabled)
    if expected == "not called":  # check compiles nothing: its config is missing
        assert cli.main(argv) == cli.EXIT_USAGE
        return
    with pytest.raises(_Enabled) as caught:
        cli.main(argv)
    assert caught.value.args == (expected,)


# Enables the cache (as the command line does), runs a small simulation and reports
# the cache's hits; min_compile_time 0 so that its programs are kept whatever their time.
_SCRIPT = """
import json, sys, jax
from jax import monitoring
import jaxbandit as jb
hits = []
monitoring.register_event_listener(lambda event, **kw: hits.append(event) if event.endswith("cache_hits") else None)
jax.config.update("jax_persistent_cache_min_compile_time_secs", 0)
jb.compile_cache.enable(sys.argv[1])
result = jb.simulate(jb.policies.make("ucb"), jb.instances.bandit([1.0, 0.5, 0.2]), 20, 2, seed=3)
print(json.dumps({"hits": len(hits), "regret": result.regret.tolist()}))
"""


def _cached_run(directory):
    env = dict(os.environ, PYTHONPATH=str(REPO))
    out = subprocess.run([sys.executable, "-c", _SCRIPT, str(directory)], env=env, cwd=REPO,
                         capture_output=True, text=True, check=True)  # fmt: skip
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_a_second_process_loads_the_compiled_programs(tmp_path):
    first = _cached_run(tmp_path / "cache")
    assert first["hits"] == 0 and any((tmp_path / "cache").iterdir())
    second = _cached_run(tmp_path / "cache")
    assert second["hits"] >= 1
    assert second["regret"] == first["regret"]  # the same results from the loaded programs
    assert first["regret"][0][-1] > 0
