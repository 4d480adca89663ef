"""The study scripts in ``scripts/`` refuse bad options before any simulation, and
``record_results`` writes and reads the file it names.  Each script's ``main`` is called
in this process; the recording itself (minutes) is replaced by a small one."""

import importlib.util
from pathlib import Path

import numpy as np
import pytest

SCRIPTS = Path(__file__).resolve().parents[1] / "scripts"


def _script(name):
    spec = importlib.util.spec_from_file_location(f"{name}_script", SCRIPTS / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _refused(main, argv, capsys) -> str:
    with pytest.raises(SystemExit) as exited:
        main(argv)
    assert exited.value.code == 2
    return capsys.readouterr().err


@pytest.mark.parametrize(
    "args, messages",
    [
        (["--policies", "ucb_n", "nonexistent"], ["--policies: unknown policy name 'nonexistent'", "known policies: "]),
        (["--policies"], ["--policies: give at least one policy name"]),
        (["--instances"], ["--instances: give at least one instance name"]),
        (["--seed", "-1"], ["--seed: seed must be an integer >= 0, got -1"]),
    ],
)
def test_compare_baselines_refuses_bad_names_before_running(args, messages, tmp_path, capsys):
    out = tmp_path / "out"
    err = _refused(_script("compare_baselines").main, ["--out", str(out), "--horizon", "10", "--runs", "2", *args], capsys)
    for message in messages:
        assert message in err
    assert not out.exists()


@pytest.fixture
def record_results(monkeypatch):
    """The script, recording one small array instead of every policy's results."""
    module = _script("record_results")
    monkeypatch.setattr(module, "record", lambda: {"case/regret": np.arange(3.0)})
    return module


def test_record_results_writes_and_names_the_npz_file(record_results, tmp_path, capsys):
    assert record_results.main(["--out", str(tmp_path / "rec")]) == 0
    written = tmp_path / "rec.npz"
    assert capsys.readouterr().out == f"1 arrays written to {written}\n"
    assert record_results.main(["--compare", str(written)]) == 0
    assert capsys.readouterr().out == "1 arrays compared, 0 differ\n"
    # a recording that differs is reported, with a non-zero exit
    np.savez(written, **{"case/regret": np.array([0.0, 1.0, 2.5])})
    assert record_results.main(["--compare", str(written)]) != 0
    assert "1 arrays compared, 1 differ" in capsys.readouterr().out


def test_record_results_checks_its_files_before_recording(record_results, monkeypatch, tmp_path, capsys):
    def record():
        raise AssertionError("recorded before the options were checked")

    monkeypatch.setattr(record_results, "record", record)
    missing = str(tmp_path / "missing.npz")
    err = _refused(record_results.main, ["--compare", missing], capsys)
    assert f"--compare: cannot read {missing!r} (No such file or directory)" in err
    text = tmp_path / "results.csv"
    text.write_text("policy,regret\n")
    err = _refused(record_results.main, ["--compare", str(text)], capsys)
    assert "is not a recording of this script: " in err and "(it is not a zip archive of arrays" in err and "pickle" not in err
    nowhere = str(tmp_path / "no_such_directory" / "rec.npz")
    err = _refused(record_results.main, ["--out", nowhere], capsys)
    assert f"--out: expected a file name in an existing directory, got {nowhere!r}" in err


def test_the_robustness_study_resolves_its_sweeps_and_refuses_bad_options(tmp_path, capsys):
    """Every family's sweep is a valid configuration on the same instances (Bernoulli's
    rules included), resolved without simulating anything."""
    import warnings

    import jaxbandit as jb

    study = _script("robustness_study")
    configs = study.sweep_configs(100, 2, 0)
    assert list(configs) == list(study.FAMILIES)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", jb.policies.lp_explore.TheoryWarning)  # alpha = 0.25 on purpose
        resolved = {family: jb.config.load(raw) for family, raw in configs.items()}
    for family, cfg in resolved.items():
        assert {s.instance.noise.label for s in cfg.instances} == {family}
        assert [s.label for s in cfg.instances] == [s.label for s in resolved["gaussian"].instances]
    err = _refused(study.main, ["--horizon", "1", "--out", str(tmp_path / "out")], capsys)
    assert "--horizon must be >= 2 and --runs >= 2, got 1 and 100" in err and not (tmp_path / "out").exists()
    err = _refused(study.main, ["--seed", "-3", "--out", str(tmp_path / "out")], capsys)
    assert "--seed: seed must be an integer >= 0, got -3" in err and not (tmp_path / "out").exists()
    # the paper study draws regret / log t from round 10: a shorter horizon has nothing to draw
    err = _refused(_script("paper_study").main, ["--horizon", "9", "--out", str(tmp_path / "out")], capsys)
    assert "--horizon must be >= 10 and --runs >= 2, got 9 and 100" in err and not (tmp_path / "out").exists()
    # a report that cannot be written, refused before any sweep (not after hours of them)
    (tmp_path / "a_file").write_text("")
    args = ["--horizon", "10", "--runs", "2", "--out", str(tmp_path / "out")]
    err = _refused(study.main, [*args, "--report", str(tmp_path / "a_file" / "report.md")], capsys)
    assert "--report: cannot write" in err and not (tmp_path / "out").exists()
    err = _refused(study.main, [*args, "--report", str(tmp_path)], capsys)
    assert f"--report: {str(tmp_path)!r} is a directory; give the report's file name" in err
    err = _refused(study.main, [*args, "--figures", str(tmp_path / "a_file" / "figures")], capsys)
    assert "--figures: cannot write" in err and not list((tmp_path / "out").rglob("sweep.json"))  # no sweep ran
    # --report-only: sweeps that are not there, or of other arguments, named as the paper study does
    err = _refused(study.main, [*args, "--report-only", "--report", str(tmp_path / "report.md")], capsys)
    assert "--report-only: cannot load a finished sweep from" in err and "sweep.json not found" in err


def test_compare_baselines_names_an_out_it_cannot_create(tmp_path, capsys):
    (tmp_path / "a_file").write_text("")
    out = tmp_path / "a_file" / "sub"
    err = _refused(_script("compare_baselines").main, ["--out", str(out), "--horizon", "10", "--runs", "2"], capsys)
    assert f"--out: cannot create {str(out)!r}" in err


def test_check_gpu_compile_refuses_bad_options_before_compiling(tmp_path, capsys):
    main = _script("check_gpu_compile").main
    for argv, message in (
        (["--arms", "1"], "--arms must be >= 2 and --engine-runs >= 1, got [1] and [1, 100]"),
        (["--engine-runs", "0"], "--arms must be >= 2 and --engine-runs >= 1, got [2, 3, 4, 5, 8] and [0]"),
        (["--policies", "nope"], "--policies: unknown policy name 'nope'"),
        (["--target", str(tmp_path / "none.pbtxt")], f"--target: no such file {str(tmp_path / 'none.pbtxt')!r}"),
    ):
        assert message in _refused(main, argv, capsys), argv


def test_a_study_s_out_holding_other_sweeps_is_a_usage_error(tmp_path, capsys):
    """A study run again with other arguments into the same --out: refused naming
    --out, before anything is computed (a SweepMismatchError traceback before)."""
    import argparse

    study = _script("paper_study")
    tiny = {"seed": 0, "runs": 2, "horizon": 10, "instances": [{"type": "bandit", "mu": [1.0, 0.5]}], "policies": [{"name": "ucb_n"}]}
    study.jb.sweep.run(tiny, tmp_path / "out" / "k5", progress=False)
    parser = argparse.ArgumentParser(prog="paper_study.py")
    with pytest.raises(SystemExit):
        study.finished_or_run(parser, "--report-only", {"k5": {**tiny, "runs": 3}}, str(tmp_path / "out"), False)
    err = capsys.readouterr().err
    assert "--out: " in err and "different sweep configuration (changed keys: runs)" in err


def test_a_short_paper_study_takes_theorem_6_1_at_its_horizon():
    """Below T = 10^5 the study's only Theorem 6.1 checkpoint is its horizon (an empty
    table before); longer ones keep 10^5, 10^6, 10^7 as reached, and a column is named
    by its round."""
    study = _script("paper_study")
    assert study.ratio_times(20_000) == [20_000]
    assert study.ratio_times(10**6) == [10**5, 10**6]
    assert study.ratio_times(3 * 10**6) == [10**5, 10**6, 3 * 10**6]
    assert set(study.ratio_times(20_000)) <= set(study.recording_times(20_000))
    assert [study._horizon_label(t) for t in (20_000, 10**5)] == ["T = 20,000", "T = 10^5"]
