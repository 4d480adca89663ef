"""Instances from files named by a sweep configuration (``type = "file"``,
:mod:`jaxbandit.config.instance_file`): the same instance as the matrix written out,
the same results, errors naming the configuration, the key and the file, and a sweep
directory that refuses the same configuration over an edited file."""

import hashlib
import importlib.util
import json
import math
import warnings
from pathlib import Path

import numpy as np
import pytest

import jaxbandit as jb
from jaxbandit import config, sweep
from jaxbandit.config import ConfigError
from jaxbandit.policies.lp_explore import TheoryWarning

REPO = Path(__file__).resolve().parents[1]
INF = math.inf

MU = [1.0, 0.5, 0.25]
SIGMA = [[1.0, INF, 2.0], [INF, 0.5, INF], [1.0, 1.0, 1.0]]
TEXT_SIGMA = [[1.0, "inf", 2.0], ["inf", 0.5, "inf"], [1.0, 1.0, 1.0]]


def _write(directory: Path, suffix: str, mu=MU, sigma=SIGMA, **other) -> Path:
    path = directory / f"graph{suffix}"
    if suffix == ".npz":
        np.savez(path, mu=np.asarray(mu), sigma=np.asarray(sigma), **other)
    elif suffix == ".json":
        encoded = [["inf" if v == INF else v for v in row] for row in sigma]
        path.write_text(json.dumps({"mu": mu, "sigma": encoded, **other}))
    else:  # TOML's own inf, and the string
        rows = ", ".join("[" + ", ".join(("inf" if j else '"inf"') if v == INF else repr(v) for j, v in enumerate(row)) + "]"
                         for row in sigma)  # fmt: skip
        extra = "".join(f"{k} = {v!r}\n" for k, v in other.items())
        path.write_text(f"# an instance\nmu = {list(mu)}\nsigma = [{rows}]\n{extra}")
    return path


def _sweep(instance: dict) -> dict:
    return {"name": "files", "seed": 5, "runs": 4, "horizon": 50, "times": [10, 50], "chunk_size": 25,
            "instances": [{"name": "g", **instance}], "policies": [{"name": "ucb_n"}]}  # fmt: skip


def _toml(data: dict) -> str:
    """A configuration like :func:`_sweep`'s as TOML text."""
    (entry,) = data["instances"]
    lines = [f"{k} = {json.dumps(v)}" for k, v in data.items() if k not in ("instances", "policies")]
    lines += ["[[instances]]"] + [f"{k} = {json.dumps(v)}" for k, v in entry.items()]
    lines += ["[[policies]]", 'name = "ucb_n"']
    return "\n".join(lines) + "\n"


INLINE = _sweep({"mu": MU, "sigma": TEXT_SIGMA})
SUFFIXES = [".npz", ".json", ".toml"]


@pytest.mark.parametrize("suffix", SUFFIXES)
def test_a_file_is_the_instance_written_inline(tmp_path, monkeypatch, suffix):
    data = tmp_path / "data"
    data.mkdir()
    path = _write(data, suffix)
    inline = config.from_dict(INLINE).instances[0].instance
    # a configuration file reads it from its own directory, wherever it is run from
    cfg_path = data / "sweep.toml"
    cfg_path.write_text(_toml(_sweep({"type": "file", "path": path.name})))
    monkeypatch.chdir(tmp_path)
    from_file = config.load(cfg_path)
    assert from_file.instances[0].instance == inline
    assert from_file.instance_table()["g"]["file"] == {
        "path": path.name,
        "sha256": hashlib.sha256(path.read_bytes()).hexdigest(),
    }
    # a dict, from the current directory
    assert config.from_dict(_sweep({"type": "file", "path": f"data/{path.name}"})).instances[0].instance == inline
    noisy = config.from_dict(_sweep({"type": "file", "path": f"data/{path.name}", "noise": "uniform"}))
    assert noisy.instances[0].instance == jb.Instance(MU, SIGMA, noise="uniform")
    assert (
        config.from_dict(_sweep({"type": "file", "path": f"data/{path.name}"})).fingerprint()
        != config.from_dict(INLINE).fingerprint()
    )


@pytest.fixture(scope="module")
def inline_results(tmp_path_factory):
    return sweep.run(INLINE, tmp_path_factory.mktemp("inline") / "out", progress=False)


@pytest.mark.parametrize("suffix", SUFFIXES)
def test_a_file_instance_sweeps_to_the_inline_results_bit_for_bit(tmp_path, inline_results, suffix):
    path = _write(tmp_path, suffix)
    results = sweep.run(_sweep({"type": "file", "path": str(path)}), tmp_path / "out", progress=False)
    assert results.instances == inline_results.instances  # jb.load reads the instance table
    for ours, theirs in zip(results.cells, inline_results.cells, strict=True):
        np.testing.assert_array_equal(ours.regret, theirs.regret)
        np.testing.assert_array_equal(ours.counts, theirs.counts)


def test_an_edited_file_is_refused_as_the_same_configuration_computed_otherwise(tmp_path):
    path = _write(tmp_path, ".json")
    cfg_path = tmp_path / "sweep.toml"
    cfg_path.write_text(_toml(_sweep({"type": "file", "path": "graph.json"})))
    out = tmp_path / "out"
    first = sweep.run(cfg_path, out, progress=False)
    assert (
        sweep.run(cfg_path, out, progress=False).cells[0].regret.tolist() == first.cells[0].regret.tolist()
    )  # resumed
    manifest = json.loads((out / "sweep.json").read_text())
    assert manifest["instances"]["g"]["file"]["sha256"] == hashlib.sha256(path.read_bytes()).hexdigest()
    for edit in (
        lambda: _write(tmp_path, ".json", mu=[1.0, 0.5, 0.125]),
        lambda: path.write_text(path.read_text() + "\n"),
    ):
        edit()  # other values, or other bytes only: the digest is of the bytes
        with pytest.raises(
            sweep.SweepMismatchError,
            match=r"same configuration computed otherwise: instance 'g' is read from graph.json, whose contents changed",
        ):
            sweep.run(cfg_path, out, progress=False)


@pytest.mark.parametrize(
    "write, reason",
    [
        (lambda d: _write(d, ".npz", extra=np.zeros(2)), "graph.npz: unknown key 'extra'; an instance file holds only mu and sigma"),
        (lambda d: _write(d, ".json", noise="bernoulli"), "graph.json: unknown key 'noise'"),
        (lambda d: _write(d, ".toml", name="g"), "graph.toml: unknown key 'name'"),
        (lambda d: (d / "graph.json").write_text('{"mu": [1, 0]}'), "graph.json: no 'sigma'; an instance file holds mu and sigma"),
        (lambda d: np.savez(d / "graph.npz", sigma=np.eye(2)), "graph.npz: no 'mu'"),
        (lambda d: (d / "graph.csv").write_text("1,0"), "graph.csv: unknown suffix '.csv'; an instance file is .npz, .json, .toml"),
        (lambda d: None, r"graph.json: cannot read .*graph.json: No such file or directory"),
        (lambda d: (d / "graph.json").mkdir(), r"graph.json: cannot read .*graph.json: Is a directory"),
        (lambda d: (d / "graph.npz").write_text("mu"), r"graph.npz is not a readable .npz file \("),
        (lambda d: np.savez(d / "graph.npz", mu=np.array([1, None]), sigma=np.eye(2)), r"graph.npz is not a readable .npz file \("),
        (lambda d: (d / "graph.json").write_text("{mu"), r"graph.json: invalid JSON"),
        (lambda d: (d / "graph.json").write_text("[1, 2]"), r"graph.json: must hold an object with keys mu and sigma, got list"),
        (lambda d: (d / "graph.toml").write_text("mu = ["), r"graph.toml: invalid TOML"),
        # a literal beyond float64 (not 0 or inf: another instance), a JSON key given twice (not the last kept)
        (lambda d: (d / "graph.toml").write_text("mu = [1.0, 0.5]\nsigma = [[1e-400, 1.0], [1.0, 1.0]]"), r"graph.toml: invalid TOML: the number 1e-400 is beyond float64's range \(it would be read as 0.0\)"),
        (lambda d: (d / "graph.json").write_text('{"mu": [1, 0.5], "sigma": [[1, 1e400], [1, 1]]}'), r"graph.json: invalid JSON: the number 1e400 is beyond float64's range \(it would be read as inf\)"),
        (lambda d: (d / "graph.json").write_text('{"mu": [1, 0.5], "sigma": [[1, 1], [1, 1]], "mu": [2, 1]}'), r"graph.json: invalid JSON: the key 'mu' is given twice"),
        (lambda d: (d / "graph.toml").write_bytes(b"mu = '\xff'"), r"graph.toml: not UTF-8 text"),
        (lambda d: _write(d, ".npz", sigma=np.eye(2)), r"graph.npz: sigma must have shape \(3, 3\) to match mu of shape \(3,\), got shape \(2, 2\)"),
        (lambda d: _write(d, ".json", mu=[1.0, True, 0.5]), r"graph.json: mu must be a numeric array, got \[1.0, True, 0.5\]"),
        (lambda d: _write(d, ".toml", sigma=[[1.0, INF, INF]] * 3), r"graph.toml: arm 1 is observed by no row of sigma"),
        (lambda d: _write(d, ".json", mu=[1.0, 1.0, 0.5]), r"graph.json: mu has a tie for the best mean"),
        (lambda d: _write(d, ".npz", mu=[1.0, 1.0 + 1e-12, 0.5]), r"graph.npz: instance mu: arm 0 .* float32"),
    ],
)  # fmt: skip
def test_bad_instance_files_name_the_configuration_the_key_and_the_file(tmp_path, write, reason):
    write(tmp_path)
    name = next((p.name for p in tmp_path.iterdir()), "graph.json")
    cfg_path = tmp_path / "sweep.toml"
    cfg_path.write_text(_toml(_sweep({"type": "file", "path": name})))
    with pytest.raises(ConfigError, match=reason) as excinfo:
        config.load(cfg_path)
    assert excinfo.value.source == str(cfg_path) and excinfo.value.key == "instances[0].path"
    assert str(excinfo.value).startswith(f"{cfg_path}: key 'instances[0].path': ")


def test_a_sigma_of_one_number_is_a_standard_bandit_in_a_sweep_and_in_bound(tmp_path, capsys):
    """One rule for an instance written as data, wherever it is read: ``sigma`` one
    number is the standard bandit's matrix (as ``jb.instances.bandit`` builds it), in a
    sweep configuration's file entry or inline entry and in ``jaxbandit bound --file``;
    a batch of means is a sweep's batch of instances, and ``bound`` (one instance)
    refuses it naming the file."""
    from jaxbandit import cli

    (tmp_path / "b.json").write_text(json.dumps({"mu": [1.0, 0.5, 0.0], "sigma": 2.0}))
    cfg_path = tmp_path / "sweep.toml"
    cfg_path.write_text(_toml(_sweep({"type": "file", "path": "b.json"})))
    (spec,) = config.load(cfg_path).instances
    assert spec.instance == jb.instances.bandit([1.0, 0.5, 0.0], 2.0)
    (inline,) = config.from_dict(_sweep({"name": "inline", "mu": [1.0, 0.5, 0.0], "sigma": 2.0})).instances
    assert inline.instance == spec.instance
    assert cli.main(["bound", "--file", str(tmp_path / "b.json"), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["value"] == pytest.approx(2 * 4 / 0.5 + 2 * 4 / 1.0)
    (tmp_path / "two.json").write_text(json.dumps({"mu": [[1.0, 0.5], [0.5, 1.0]], "sigma": [[[1, "inf"], ["inf", 1]]] * 2}))
    assert cli.main(["bound", "--file", str(tmp_path / "two.json")]) == cli.EXIT_USAGE
    assert "two.json: bound takes one instance, got mu of shape (2, 2)" in capsys.readouterr().err


def test_a_file_entry_takes_only_its_keys():
    with pytest.raises(ConfigError, match="unknown key; allowed keys: name, noise, path, type") as excinfo:
        config.from_dict(_sweep({"type": "file", "path": "graph.npz", "mu": MU}))
    assert excinfo.value.key == "instances[0].mu"
    with pytest.raises(ConfigError, match="missing required key") as excinfo:
        config.from_dict(_sweep({"type": "file"}))
    assert excinfo.value.key == "instances[0].path"


# -- the paper study's shared graph --------------------------------------------------


def test_the_paper_study_configurations_share_the_graph20_file():
    spec = importlib.util.spec_from_file_location("paper_study_script", REPO / "scripts" / "paper_study.py")
    study = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(study)
    graph = study.graph20()
    paths = sorted((REPO / "scripts" / "configs").glob("paper_study_1e7_graph20*.toml"))
    assert len(paths) == 4
    for path in paths:
        with warnings.catch_warnings():  # alpha <= 4 on purpose
            warnings.simplefilter("ignore", TheoryWarning)
            (spec,) = config.load(path).instances
        assert spec.label == "graph20" and spec.file["path"] == "instances/graph20.toml"
        assert (
            spec.instance.mu.tobytes() == graph.mu.tobytes() and spec.instance.sigma.tobytes() == graph.sigma.tobytes()
        )
