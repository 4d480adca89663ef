"""The ``jaxbandit`` command line, in process (shared compiles) and as a real process
killed with SIGKILL mid-cell and resumed."""

import json
import re
import signal
import subprocess
import sys
import time
import types
import warnings

import numpy as np
import pytest

from jaxbandit import cli, config, sweep
from jaxbandit.policies.lp_explore import TheoryWarning
from tests import sweep_fixtures as fx


@pytest.fixture(scope="module", autouse=True)
def _test_policy():
    with fx.registered():
        yield


@pytest.fixture(scope="module")
def config_path(tmp_path_factory):
    return fx.write_config_toml(tmp_path_factory.mktemp("cli") / "sweep.toml", fx.base_config())


def test_check_shows_the_cell_groups(config_path, capsys):
    assert cli.main(["check", str(config_path)]) == 0
    out = capsys.readouterr().out
    assert "valid. 2 instances, 2 policies, 8 cells in 2 compiled groups, 6 runs each." in out
    assert "g000: test_cases  K=5 T=1500 gaussian: 6 cells" in out


def test_jaxbandits_warnings_are_one_line(tmp_path, capsys, monkeypatch):
    """A hyper-parameter outside the theory: one line naming the warning, not the
    library's file and source line."""
    entry = {"name": "lp_explore", "alpha": [1.0, 4.5]}
    path = fx.write_config_toml(tmp_path / "low_alpha.toml", fx.base_config(policies=[entry]))
    with warnings.catch_warnings():
        warnings.simplefilter("default")  # Python's own, not the suite's "error"
        # shown as Python shows a warning outside pytest's recording: its text on stderr
        monkeypatch.setattr(warnings, "_showwarnmsg_impl", lambda msg: sys.stderr.write(warnings._formatwarnmsg(msg)))
        assert cli.main(["check", str(path)]) == 0
        monkeypatch.undo()
    err = capsys.readouterr().err
    assert "jaxbandit: TheoryWarning: lp_explore: alpha=1.0 <= 4 is outside the paper's regret guarantee" in err, err
    assert ".py:" not in err, err
    # a caller that records warnings gets them, as Python would give them
    with pytest.warns(TheoryWarning, match="alpha=1.0 <= 4"):
        assert cli.main(["check", str(path)]) == 0
    assert capsys.readouterr().err == ""
    assert warnings.formatwarning is warnings._formatwarning_orig  # the caller's, restored


def test_run_refuses_plot_options_without_plot(config_path, tmp_path, capsys):
    """They would be ignored: refused before anything runs or is written."""
    out = tmp_path / "unplotted"
    for option in (["--logx"], ["--distribution", "violin"], ["--distribution", "box"]):  # the default too
        assert cli.main(["run", str(config_path), "--out", str(out), *option]) == cli.EXIT_USAGE, option
        assert "--logx and --distribution shape the figures of --plot; give --plot too" in capsys.readouterr().err
    assert not out.exists()


def test_a_reader_that_leaves_early_ends_the_command_quietly(config_path):
    """``jaxbandit check CFG | head -1``: the pipe closes before the command writes; it
    exits with 128 + SIGPIPE and no traceback."""
    proc = fx.cli_process(["check", str(config_path)], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    proc.stdout.close()  # before the child has imported anything, let alone printed
    with proc.stderr:
        stderr = proc.stderr.read().decode()
    assert proc.wait(timeout=120) == cli.EXIT_BROKEN_PIPE, stderr
    assert "Traceback" not in stderr and "BrokenPipeError" not in stderr, stderr


def test_bad_config_is_reported_with_file_and_key(tmp_path, capsys):
    path = fx.write_config_toml(tmp_path / "bad.toml", fx.base_config(runs=-1))
    assert cli.main(["run", str(path), "--out", str(tmp_path / "out")]) == cli.EXIT_USAGE
    err = capsys.readouterr().err
    assert f"jaxbandit: error: {path}: key 'runs': must be an integer >= 1, got -1" in err
    assert not (tmp_path / "out").exists()


def test_run_then_plot_then_refuse_a_changed_config(config_path, tmp_path, capsys):
    out = tmp_path / "out"
    assert cli.main(["run", str(config_path), "--out", str(out), "--quiet"]) == 0
    printed = capsys.readouterr()
    assert f"{out} holds 8 finished cells" in printed.out
    assert "group g001: ts_n, K=5, 2 cells x 6 runs, horizon 1500" in printed.err  # --quiet: log lines
    assert "run-rounds/s]" not in printed.err  # and no progress bar
    assert (out / "config.toml").read_text() == config_path.read_text()

    assert cli.main(["plot", str(out), "--format", "png", "--no-bound", "--distribution", "violin"]) == 0
    listed = capsys.readouterr().out.split()
    # per instance: regret, regret / log t, final, case mix and paired differences
    assert len(listed) == 1 + 10 and all((out / "plots").joinpath(p.split("/")[-1]).is_file() for p in listed[1:])

    changed = fx.write_config_toml(tmp_path / "changed.toml", fx.base_config(horizon=1600))
    assert cli.main(["run", str(changed), "--out", str(out)]) == cli.EXIT_USAGE
    assert "different sweep configuration (changed keys: horizon)" in capsys.readouterr().err


def test_errors_of_run_and_plot_are_messages_not_tracebacks(config_path, tmp_path, monkeypatch, capsys):
    """Bad input found by jaxbandit and unwritable paths end with ``jaxbandit: error:``
    and a non-zero status; nothing here compiles (shard 2/3 of two groups is empty)."""
    not_a_directory = tmp_path / "file"
    not_a_directory.write_text("x")
    assert cli.main(["run", str(config_path), "--out", str(not_a_directory)]) == cli.EXIT_USAGE
    assert f"jaxbandit: error: {not_a_directory} exists and is not a directory" in capsys.readouterr().err
    dangling = tmp_path / "link"
    dangling.symlink_to(tmp_path / "gone")  # a link to nothing is no directory either
    for target, where in ((dangling, "exists and is"), (dangling / "sub", f"cannot be made: {dangling} is")):
        assert cli.main(["run", str(config_path), "--out", str(target)]) == cli.EXIT_USAGE
        assert f"jaxbandit: error: {target} {where} a link to {tmp_path / 'gone'}, which does not exist" in capsys.readouterr().err
    out = tmp_path / "out"
    assert cli.main(["run", str(config_path), "--out", str(out), "--shard", "2/3", "--quiet"]) == 0
    capsys.readouterr()
    for argv, status, message in [
        (["plot", str(out)], cli.EXIT_ERROR, "has no finished cells to plot yet"),
        (["plot", str(out), "--format", "png,xyz"], cli.EXIT_USAGE, "--format must list formats among"),
        (["run", str(config_path), "--out", str(not_a_directory / "out")], cli.EXIT_USAGE, f"cannot be made: {not_a_directory} is not a directory"),
    ]:
        assert cli.main(argv) == status, argv
        err = capsys.readouterr().err
        assert err.startswith("jaxbandit: error: ") and message in err and "Traceback" not in err, (argv, err)

    def failing(*args, **kwargs):  # a ValueError not raised by jaxbandit keeps its traceback
        raise ValueError("not ours")

    monkeypatch.setattr("jaxbandit.plotting.plot_sweep", failing)
    with pytest.raises(ValueError, match="not ours"):
        cli.main(["plot", str(out)])


def test_demo_runs_end_to_end_and_says_where_the_plots_are(tmp_path, monkeypatch, capsys):
    small = fx.base_config(instances=fx.BASE["instances"][:1], policies=[{"name": "ts_n"}])
    small["instances"] = fx.BASE["instances"]
    monkeypatch.setattr(config, "demo_config", lambda: config.load(small))
    assert cli.main(["demo", "--out", str(tmp_path / "demo"), "--quiet"]) == 0
    out = capsys.readouterr().out
    assert f"plots (6 figures, PNG and PDF): {tmp_path / 'demo' / 'plots'}" in out
    assert len(list((tmp_path / "demo" / "plots").glob("*.pdf"))) == 6


@pytest.mark.parametrize(
    "options, expected",
    [
        ([], {"bound": True, "logx": False, "logy": False, "policies": None, "reference": None, "distribution": "box"}),
        (["--no-bound"], {"bound": False}),
        (["--logy"], {"logy": True, "logx": False}),
        (["--logx"], {"logx": True, "logy": False}),
        (["--policies", "a,b", "--reference", "b", "--distribution", "violin"], {"policies": ["a", "b"], "reference": "b", "distribution": "violin"}),
    ],
)
def test_plot_options_reach_the_figures(options, expected, monkeypatch):
    from jaxbandit import plotting

    drawn = []
    monkeypatch.setattr(plotting, "plot_sweep", lambda directory, out=None, **kwargs: drawn.append(kwargs) or [])
    assert cli.main(["plot", "a_sweep", "--format", "png", *options]) == 0
    assert {name: drawn[0][name] for name in expected} == expected


def test_the_demo_s_plot_options_reach_the_figures(tmp_path, monkeypatch, capsys):
    from jaxbandit import plotting

    drawn, finished = [], types.SimpleNamespace(cells=(), missing=(), plan={})
    monkeypatch.setattr(cli.sweep, "run", lambda *args, **kwargs: finished)
    monkeypatch.setattr(plotting, "plot_sweep", lambda results, **kwargs: drawn.append(kwargs) or [tmp_path / "plots" / "f.png"])
    assert cli.main(["demo", "--out", str(tmp_path), "--quiet", "--logx", "--distribution", "violin"]) == 0
    assert drawn == [{"distribution": "violin", "logx": True}]


def test_bound_passes_every_argument_to_bound_main(monkeypatch):
    calls = []
    monkeypatch.setattr(cli, "bound_main", lambda argv: calls.append(argv) or 0)
    assert cli.main(["bound", "--mu", "1,0.5", "--help"]) == 0
    assert calls == [["--mu", "1,0.5", "--help"]]


def test_bound_inline_file_and_errors(tmp_path, capsys):
    def bound(*argv):
        return cli.main(["bound", *argv])

    # K = 3 throughout: one compiled LP per precision serves every case (the float64
    # one is also test_lower_bound's single-instance program)
    assert bound("--mu", "1,0.5,0.75", "--sigma", "1,inf,inf;inf,1,inf;inf,inf,1", "--json") == 0
    printed = json.loads(capsys.readouterr().out)
    assert printed["status"] == 0 and printed["value"] == pytest.approx(12.0)  # 2 / 0.5 + 2 / 0.25
    # row = arm played: the best arm sees arm 1 (at 0.5), so only arm 2's 32 plays cost
    assert bound("--mu", "1,0.5,0.75", "--sigma", "1,0.5,inf;inf,1,inf;inf,inf,1", "--json") == 0
    assert json.loads(capsys.readouterr().out)["value"] == pytest.approx(8.0)  # 2 / 0.25**2 * 0.25
    # negative means after the option, as a user writes them (argparse alone takes them for an option)
    assert bound("--mu", "-1,-1.5,-1.25", "--sigma", "1", "--json") == 0
    assert json.loads(capsys.readouterr().out)["value"] == pytest.approx(12.0)
    path = tmp_path / "instance.json"
    sigma = [[1, "inf", "inf"], ["inf", 2, "inf"], ["inf", "inf", 1]]
    path.write_text(json.dumps({"mu": [1, 0.5, 0.75], "sigma": sigma}))
    assert bound("--file", str(path)) == 0
    assert "value: 24 " in capsys.readouterr().out  # sum of 2 sigma_i^2 / Delta_i = 2 * 4 / 0.5 + 2 / 0.25
    toml = tmp_path / "instance.toml"
    toml.write_text('mu = [1.0, 0.5, 0.75]\nsigma = [[1.0, "inf", "inf"], ["inf", 2.0, "inf"], ["inf", "inf", 1.0]]\n')
    assert bound("--file", str(toml), "--dtype", "float32") == 0
    assert "value: 24 " in capsys.readouterr().out
    npz = tmp_path / "instance.npz"
    np.savez(npz, mu=np.array([1.0, 0.5, 0.75]), sigma=np.diag([1.0, 2.0, 1.0]) + np.where(np.eye(3), 0, np.inf))
    assert bound("--file", str(npz)) == 0
    assert "value: 24 " in capsys.readouterr().out
    # a family without a bound: the Gaussian LP's value, told apart from a bound
    assert bound("--mu", "1,0.5,0.75", "--sigma", "1", "--noise", "uniform", "--gaussian-reference") == 0
    printed = capsys.readouterr().out
    assert "gaussian reference" in printed and "value: 12   (a yardstick, not a bound on the regret)" in printed
    assert "regret >~" not in printed
    capsys.readouterr()
    for argv in (
        ["--mu", "1,x", "--sigma", "1"],
        ["--mu", "1,1", "--sigma", "1"],  # tie
        ["--mu", "1,0.5", "--sigma", "1,inf;inf,inf"],  # arm 1 unobserved
        ["--mu", "1,0.5"],
        ["--file", str(tmp_path / "missing.json")],
        ["--bogus"],
    ):
        assert bound(*argv) == cli.EXIT_USAGE, argv
        assert capsys.readouterr().err, argv
    for name, text, message in (
        ("scalar.json", '{"mu": 1.0, "sigma": 1.0}', "scalar.json: mu must have shape (K,), got shape ()"),
        ("bool.toml", "mu = [1.0, 0.5]\nsigma = true\n", "bool.toml: sigma must be one number or a (K, K) matrix of numbers, got True"),
    ):
        (tmp_path / name).write_text(text)
        assert bound("--file", str(tmp_path / name)) == cli.EXIT_USAGE, name
        assert message in capsys.readouterr().err, name
    # each refused, naming the value or the file, rather than read as something else
    for argv, message in (
        (["--mu", "1,,0.5", "--sigma", "1"], "mu must be comma-separated numbers, got '1,,0.5'"),  # read as K = 2
        (["--mu", "1,nan", "--sigma", "1"], "mu must be finite, got non-finite entries [nan] in mu=[1.0, nan]"),
        (["--mu", "1,0.5", "--sigma", "nan"], "sigma must not contain NaN, got sigma[0, 0] = nan"),
        (["--mu", "1,0.5", "--sigma", "1,inf;;inf,1"], "(an empty row)"),
        (["--mu", "1,0.5", "--sigma", "1", "--noise", "uniform"], "(on the command line: --gaussian-reference)"),
        (["--mu", "1,0.5", "--sigma", "1_0"], "sigma must be comma-separated numbers, got '1_0'"),  # not 10
        (["--mu", "1,0.5", "--sigma", "1e400"], "sigma must be comma-separated numbers, got '1e400'"),  # not inf
        (["--mu", "1,0.5", "--sigma", "1e-400"], "sigma must be comma-separated numbers, got '1e-400'"),  # not 0
    ):
        assert bound(*argv) == cli.EXIT_USAGE, argv
        assert message in capsys.readouterr().err, argv
    for name, text, message in (
        ("extra.json", '{"mu": [1, 0.5], "sigma": 1, "dtype": "float32"}', "unknown key 'dtype'"),  # not ignored
        ("null.json", '{"mu": [1, 0.5], "sigma": null}', "null.json: sigma must be one number or a (K, K) matrix of numbers, got None"),  # not read as NaN
        ("broken.json", '{"mu": [1, 0.5], "sigma": 1', "broken.json: invalid JSON: Expecting ','"),
        ("broken.toml", "mu = [1.0, 0.5\n", "broken.toml: invalid TOML: "),
        ("tie.json", '{"mu": [1.0, 1.0], "sigma": 1}', "tie.json: mu has a tie for the best mean: arms [0, 1]"),
        ("text.npz", "not an archive", "text.npz is not a readable .npz file ("),
    ):
        (tmp_path / name).write_text(text)
        assert bound("--file", str(tmp_path / name)) == cli.EXIT_USAGE, name
        assert message in capsys.readouterr().err, name


def test_bound_json_is_strict_json_without_an_optimum(monkeypatch, capsys):
    """No optimum: value inf, which json.dumps would print as the non-JSON Infinity."""
    from jaxbandit.bound import LowerBound

    unsolved = LowerBound(
        c=np.zeros(2), value=np.float64(np.inf), status=np.int32(1), best_arm=np.int64(0), gaps=np.array([0.0, 0.5])
    )
    monkeypatch.setattr(cli, "lower_bound", lambda *args, **kwargs: unsolved)
    assert cli.main(["bound", "--mu", "1,0.5", "--sigma", "1", "--json"]) == 1
    printed = json.loads(capsys.readouterr().out, parse_constant=lambda name: pytest.fail(f"not JSON: {name}"))
    assert printed["value"] is None and printed["c"] == [0.0, 0.0] and printed["status"] == 1


@pytest.mark.slow
def test_kill_9_mid_cell_then_resume_is_bit_identical(tmp_path):
    """A real process killed with SIGKILL right after its first checkpoint; the same
    command then resumes from that chunk, is stopped by a SIGTERM after its next
    checkpoint (exit status 143, a checkpoint of its own), and run once more ends
    bit-identical to an in-process run."""
    cfg = fx.base_config(
        horizon=60000, chunk_size=1024, policies=[{"name": "ts_n"}], checkpoint={"every_chunks": 1}
    )  # fmt: skip
    path = fx.write_config_toml(tmp_path / "long.toml", cfg)
    out = tmp_path / "out"
    args = ["run", str(path), "--out", str(out), "--quiet"]
    proc = fx.cli_process(args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    checkpoint = out / "checkpoints" / "g000.npz"
    deadline = time.monotonic() + 300  # generous: the other test worker compiles meanwhile
    while not checkpoint.exists() and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.01)
    proc.send_signal(signal.SIGKILL)
    assert proc.wait(timeout=30) == -signal.SIGKILL
    if (out / "groups" / "g000.json").exists():
        pytest.skip("the cell finished before the kill; nothing interrupted")
    assert checkpoint.exists()

    killed_at = checkpoint.stat().st_mtime_ns
    log = tmp_path / "stopped.log"
    with open(log, "w") as stderr:
        stopped = fx.cli_process(args, stdout=subprocess.DEVNULL, stderr=stderr)
        while checkpoint.stat().st_mtime_ns == killed_at and stopped.poll() is None and time.monotonic() < deadline:
            time.sleep(0.01)
        stopped.send_signal(signal.SIGTERM)
        assert stopped.wait(timeout=60) == 128 + signal.SIGTERM, log.read_text()
    stopped_log = log.read_text()
    assert "stopping after the current chunk" in stopped_log and "stopped by SIGTERM" in stopped_log
    first_resume = int(re.search(r"resuming from round (\d+)", stopped_log).group(1))

    resumed = fx.cli_process(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    stdout, stderr = resumed.communicate(timeout=300)
    assert resumed.returncode == 0, stderr
    assert "group g000: resuming from round" in stderr
    meta = json.loads((out / "groups" / "g000.json").read_text())
    assert first_resume < meta["resumed_from_round"] < 60000  # from the stop's checkpoint

    sweep.run(cfg, tmp_path / "reference", progress=False)
    fx.assert_identical(fx.result_arrays(out), fx.result_arrays(tmp_path / "reference"))
