"""The README's example policy (scripts/examples/kl_ucb.py) runs as documented: with
``jb.simulate``, and in a TOML sweep that names it by import path with a grid over its
parameter."""

import importlib.util
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np

import jaxbandit as jb
from jaxbandit import config

EXAMPLES = Path(__file__).resolve().parents[1] / "scripts" / "examples"


def _example_module():
    spec = importlib.util.spec_from_file_location("kl_ucb_example", EXAMPLES / "kl_ucb.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_example_policy_simulates_and_uses_side_observations():
    kl_ucb = _example_module().kl_ucb
    instance = jb.instances.default_instances()["revealing_arm"]
    with_c = jb.simulate(kl_ucb(c=3.0), instance, 3000, 20, seed=0)
    plain = jb.simulate(kl_ucb(c=0.0), instance, 3000, 20, seed=0)
    ucb_n = jb.simulate(jb.policies.make("ucb_n"), instance, 3000, 20, seed=0)
    # c = 0 is UCB-N's index (up to rounding and the order of the first rounds)
    np.testing.assert_allclose(plain.final_regret.mean(), ucb_n.final_regret.mean(), rtol=0.1)
    assert with_c.final_regret.mean() > plain.final_regret.mean()  # a larger exploration budget


def test_the_example_sweep_runs_from_its_toml_file(tmp_path):
    # The config and the policy module side by side, at test sizes: the module is
    # importable because the configuration file's directory is searched.
    shutil.copy(EXAMPLES / "kl_ucb.py", tmp_path / "kl_ucb.py")
    text = (EXAMPLES / "kl_ucb.toml").read_text()
    text = text.replace("runs = 100", "runs = 4").replace("horizon = 10000", "horizon = 500")
    (tmp_path / "kl_ucb.toml").write_text(text)
    cfg = config.load(tmp_path / "kl_ucb.toml")
    groups = cfg.plan()
    assert [g.policy_name for g in groups] == ["kl_ucb:kl_ucb", "ucb_n"]
    assert len(groups[0].cells) == 4  # two instances x two values of c: one program
    results = jb.sweep.run(cfg, tmp_path / "out", progress=False)
    labels = {(c.policy, c.params.get("c")) for c in results.cells}
    assert labels == {("KL-UCB", 0.0), ("KL-UCB", 3.0), ("ucb_n", None)}


def test_the_example_script_runs():
    out = subprocess.run(
        [sys.executable, str(EXAMPLES / "kl_ucb.py")], capture_output=True, text=True, timeout=600, check=True
    )
    assert out.stdout.count("regret") == 2
