"""The persistent compile cache: where it lives, bad directories, and a second process
that loads what the first one compiled."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from jaxbandit import cli, compile_cache

REPO = Path(__file__).resolve().parents[1]


def test_default_directory_follows_the_environment(monkeypatch, tmp_path):
    monkeypatch.setenv(compile_cache.ENV_VAR, str(tmp_path / "mine"))
    assert compile_cache.default_directory() == tmp_path / "mine"
    monkeypatch.setenv(compile_cache.ENV_VAR, " OFF ")
    assert compile_cache.default_directory() is None
    monkeypatch.delenv(compile_cache.ENV_VAR)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert compile_cache.default_directory() == tmp_path / "xdg" / "jaxbandit" / "xla"


def test_off_changes_nothing(monkeypatch):
    assert compile_cache.enable("off") is None
    monkeypatch.setenv(compile_cache.ENV_VAR, "off")
    assert compile_cache.enable() is None


def test_a_directory_that_cannot_be_used_is_a_clear_error(monkeypatch, tmp_path, capsys):
    blocker = tmp_path / "a_file"
    blocker.write_text("")
    with pytest.raises(ValueError, match=r"compile cache directory '.*a_file' cannot be used"):
        compile_cache.enable(blocker)
    argv = ["run", str(tmp_path / "missing.toml"), "--out", str(tmp_path / "out"), "--compile-cache", str(blocker)]
    assert cli.main(argv) == cli.EXIT_USAGE
    assert "a_file' cannot be used" in capsys.readouterr().err
    monkeypatch.setenv(compile_cache.ENV_VAR, str(blocker / "below"))
    assert cli.main(["bound", "--mu", "1,0.5", "--sigma", "1,inf;inf,1"]) == cli.EXIT_USAGE
    assert "$JAXBANDIT_COMPILE_CACHE '" in capsys.readouterr().err
    # Nobody asked for the default directory: a read-only home only costs the cache.
    monkeypatch.delenv(compile_cache.ENV_VAR)
    monkeypatch.setenv("XDG_CACHE_HOME", str(blocker))
    with pytest.warns(UserWarning, match="no compile cache: '.*a_file/jaxbandit/xla' cannot be used"):
        assert compile_cache.enable() is None


# Enables the cache (as the command line does), solves a lower bound and reports the
# cache's hits; min_compile_time 0 so that the small solve is cached too.
_SCRIPT = """
import json, sys, jax
from jax import monitoring
from jaxbandit import compile_cache, instances, lower_bound
hits = []
monitoring.register_event_listener(lambda event, **kw: hits.append(event) if event.endswith("cache_hits") else None)
jax.config.update("jax_persistent_cache_min_compile_time_secs", 0)
compile_cache.enable(sys.argv[1])
bound = lower_bound(instances.bandit([1.0, 0.5, 0.2]))
print(json.dumps({"hits": len(hits), "value": float(bound.value)}))
"""


def _cached_solve(directory):
    env = dict(os.environ, PYTHONPATH=str(REPO))
    out = subprocess.run([sys.executable, "-c", _SCRIPT, str(directory)], env=env, cwd=REPO,
                         capture_output=True, text=True, check=True)  # fmt: skip
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_a_second_process_loads_the_compiled_programs(tmp_path):
    first = _cached_solve(tmp_path / "cache")
    assert first["hits"] == 0 and any((tmp_path / "cache").iterdir())
    second = _cached_solve(tmp_path / "cache")
    assert second["hits"] >= 1
    assert second["value"] == first["value"] == pytest.approx(2 / 0.5 + 2 / 0.8)
