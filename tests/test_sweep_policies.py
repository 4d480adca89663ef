"""Sweeps run each cell's own policy: variants that share a name, hyper-parameters
captured in closures, policies named by import path, and policies that misbehave."""

import re
import shutil
import sys

import numpy as np
import pytest

import jaxbandit as jb
from jaxbandit import config
from tests import sweep_fixtures as fx

HORIZON = 200


def _config(policies, **changes) -> dict:
    base = {
        "name": "policies",
        "runs": 3,
        "horizon": HORIZON,
        "times": 5,
        "chunk_size": 64,
        "instances": [{"type": "bandit", "name": "b3", "mu": [1.0, 0.5, 0.2]}],  # gaps 0, 0.5, 0.8
        "policies": policies,
    }
    base.update(changes)
    return base


def _final(results, label, **params) -> np.ndarray:
    cells = [c for c in results.cells if c.policy == label and all(c.params.get(k) == v for k, v in params.items())]
    assert len(cells) == 1, (label, params)
    return cells[0].regret[:, -1]


def test_every_cell_runs_its_own_policy(tmp_path):
    policies = [
        {"name": "ucb_n"},
        {"name": "tests.user_policies:ucb_n_worst_arm", "label": "variant"},
        {"name": "tests.user_policies:threshold", "eps": [0.9, 0.1]},
        {"name": "tests.user_policies:traced_threshold", "eps": [0.9, 0.1, 0.8]},
        {"name": "tests.user_policies:captured_and_traced", "eps": [0.9, 0.1]},
    ]
    cfg = config.load(_config(policies))
    groups = cfg.plan()
    # a closure-captured eps: one program per value, traced too or not; a traced eps only:
    # one for the grid
    assert [len(g.cells) for g in groups] == [1, 1, 1, 1, 3, 1, 1]
    results = jb.sweep.run(cfg, tmp_path / "out", progress=False)
    assert _final(results, "ucb_n").mean() < 60
    np.testing.assert_allclose(_final(results, "variant"), 0.8 * HORIZON, rtol=1e-6)
    np.testing.assert_allclose(_final(results, "tests.user_policies:threshold", eps=0.9), 0.5 * HORIZON, rtol=1e-6)
    np.testing.assert_array_equal(_final(results, "tests.user_policies:threshold", eps=0.1), 0.0)
    traced = "tests.user_policies:traced_threshold"
    np.testing.assert_allclose(_final(results, traced, eps=0.9), 0.5 * HORIZON, rtol=1e-6)
    np.testing.assert_array_equal(_final(results, traced, eps=0.1), 0.0)
    both = "tests.user_policies:captured_and_traced"
    np.testing.assert_allclose(_final(results, both, eps=0.9), 0.5 * HORIZON, rtol=1e-6)
    np.testing.assert_array_equal(_final(results, both, eps=0.1), 0.0)


@pytest.mark.parametrize(
    "name, message",
    [
        ("no_such_package.module:factory", "cannot import module 'no_such_package.module'"),
        ("tests.user_policies:missing", "has no attribute 'missing'"),
        ("tests.user_policies:BASE", "has no attribute 'BASE'"),
    ],
)
def test_bad_import_paths_are_named(name, message):
    with pytest.raises(config.ConfigError, match=rf"key 'policies\[0\].name': policy '{name}': .*{message}"):
        config.load(_config([{"name": name}]))


def test_a_module_or_factory_that_fails_is_named(tmp_path, monkeypatch):
    """Not a traceback: the entry, the error's type and its message."""
    (tmp_path / "broken_policies_module.py").write_text("x = 1 / 0\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    with pytest.raises(config.ConfigError, match=r"key 'policies\[0\].name': .*cannot import module 'broken_policies_module' \(ZeroDivisionError: division by zero\)"):
        config.load(_config([{"name": "broken_policies_module:factory"}]))
    with pytest.raises(config.ConfigError, match=r"key 'policies\[0\]': .*failed \(RuntimeError: the factory's own bug\)"):
        config.load(_config([{"name": "tests.user_policies:crashing_factory", "eps": 0.2}]))


def test_a_factory_s_error_names_the_grid_point_it_refused():
    with pytest.raises(config.ConfigError, match=r"key 'policies\[0\]': eps too big \(the factory called with eps=0.9\)"):
        config.load(_config([{"name": "tests.user_policies:bounded_eps", "eps": [0.1, 0.9]}]))
    with pytest.raises(config.ConfigError, match=r"key 'policies\[0\]': eps too big$"):  # one point: the key is the value
        config.load(_config([{"name": "tests.user_policies:bounded_eps", "eps": 0.9}]))


def test_a_factory_that_returns_no_policy_is_refused():
    with pytest.raises(config.ConfigError, match=r"policies\[0\].*the factory returned int, not a jaxbandit.Policy"):
        config.load(_config([{"name": "tests.user_policies:not_a_factory"}]))


def test_a_factory_s_policy_fields_are_checked_where_it_enters():
    """A ``check_params`` that is not a function, named at the entry before any of its
    hyper-parameters is checked through it."""
    with pytest.raises(config.ConfigError, match=r"policies\[0\].*Policy.check_params must be a function or None, got 1"):
        config.load(_config([{"name": "tests.user_policies:uncallable_check_params", "eps": 0.2}]))
    # one with a bug of its own: a configuration error naming the entry, as any other
    with pytest.raises(config.ConfigError, match=r"policies\[0\].*check_params\(\{'eps': 0.2\}\) failed \(KeyError: 'alpha'\)"):
        config.load(_config([{"name": "tests.user_policies:buggy_check_params", "eps": 0.2}]))


def test_a_sweep_stops_on_an_invalid_arm(tmp_path):
    """Named by the cell's label and instance, not its index in the group."""
    cfg = _config([{"name": "tests.user_policies:arm_out_of_range", "bad_round": [1000, 150]}])
    cell = re.escape("cell tests.user_policies:arm_out_of_range(bad_round=150) on instance 'b3'")
    with pytest.raises(jb.InvalidArmError, match=rf"group g001, {cell}: policy .* chose arm 3 at round 150 \(run 0, cell 0\)"):
        jb.sweep.run(cfg, tmp_path / "out", progress=False)


def test_a_module_beside_the_configuration_is_the_one_it_runs(tmp_path, monkeypatch):
    """Two configurations in two directories, each beside its own ``arm_module.py``:
    the second, loaded in the process that imported the first's module, is refused
    naming both files, never run with the first's policy under its own labels."""
    factory = "import jaxbandit as jb\ndef make():\n    return jb.policies.make('tests.user_policies:fixed_arm', arm={})\n"
    paths = []
    for name, arm in (("a", 0), ("b", 2)):
        (tmp_path / name).mkdir()
        (tmp_path / name / "arm_module.py").write_text(factory.format(arm))
        paths.append(fx.write_config_toml(tmp_path / name / "study.toml", _config([{"name": "arm_module:make"}])))
    monkeypatch.delitem(sys.modules, "arm_module", raising=False)  # and removed again on the way out
    before = list(sys.path)
    first = config.load(str(paths[0]))
    assert sys.path == before  # the directory is searched while the configuration loads only
    assert first.policies[0].built[0].name == "fixed_arm"
    assert sys.modules["arm_module"].__file__ == str(tmp_path / "a" / "arm_module.py")
    a_file, b_file = (re.escape(str(tmp_path / d / "arm_module.py")) for d in "ab")
    with pytest.raises(config.ConfigError, match=rf"key 'policies\[0\].name': module 'arm_module' is {a_file}, not the {b_file} beside"):
        config.load(str(paths[1]))
    assert sys.path == before  # a refused configuration too
    assert config.load(str(paths[0])).policies[0].built[0].name == "fixed_arm"  # its own module: still fine
    # a factory that only the module beside has: the shadowing is the reason given
    (tmp_path / "b" / "arm_module.py").write_text(factory.format(2).replace("def make", "def make_b"))
    fx.write_config_toml(paths[1], _config([{"name": "arm_module:make_b"}]))
    with pytest.raises(config.ConfigError, match=rf"key 'policies\[0\].name': module 'arm_module' is {a_file}, not the {b_file} beside"):
        config.load(str(paths[1]))
    fx.write_config_toml(paths[1], _config([{"name": "arm_module:make"}]))
    (tmp_path / "b" / "arm_module.py").write_text(factory.format(2))
    # the module imported before is gone with its directory: refused all the same
    shutil.rmtree(tmp_path / "a")
    with pytest.raises(config.ConfigError, match=rf"module 'arm_module' is {a_file}, not the {b_file} beside"):
        config.load(str(paths[1]))
    # a package beside a module of its name is what Python imports, and not refused
    monkeypatch.delitem(sys.modules, "arm_module")
    (tmp_path / "b" / "arm_module").mkdir()
    (tmp_path / "b" / "arm_module" / "__init__.py").write_text(factory.format(1))
    assert config.load(str(paths[1])).policies[0].built[0].name == "fixed_arm"
    assert sys.modules["arm_module"].__file__ == str(tmp_path / "b" / "arm_module" / "__init__.py")
