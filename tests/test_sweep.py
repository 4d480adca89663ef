"""Sweeps: one compile per grid, resumption bit for bit, a stop on a signal, refusal of a
changed config, labelled results, and identical results on 4 (forced host) devices."""

import csv
import json
import shutil
import signal
import subprocess
import sys

import jax
import numpy as np
import pytest

import jaxbandit as jb
from jaxbandit import config, engine, files, io, policies, stopping, summary, sweep
from jaxbandit.config import plan as config_plan
from jaxbandit.runner import SimulationRun
from tests import sweep_fixtures as fx
from tests import user_policies


@pytest.fixture(scope="module", autouse=True)
def _test_policy():
    with fx.registered():
        yield


class Interrupted(Exception):
    pass


@pytest.fixture(scope="module")
def reference(tmp_path_factory):
    """The uninterrupted sweep every other run is compared with."""
    out = tmp_path_factory.mktemp("reference")
    results = sweep.run(fx.base_config(), out, progress=False)
    return out, results


def test_results_are_labelled_arrays(reference):
    out, results = reference
    assert results.complete and results.missing == ()
    assert len(results.cells) == 2 * 3 + 2
    labels = [(c.instance, c.label) for c in results.cells]
    assert labels[:3] == [("bandit", "cases(alpha=0.5)"), ("bandit", "cases(alpha=1.0)"), ("bandit", "cases(alpha=2.0)")]
    assert labels[6:] == [("bandit", "ts_n"), ("graph_star", "ts_n")]
    assert results.instance_labels == ["bandit", "graph_star"]
    assert results.instances["graph_star"] == jb.instances.default_instances()["graph_star"]
    cell = results.select(instance="graph_star", policy="cases", params={"alpha": 2.0})[0]
    assert cell.times[-1] == 1500 and cell.regret.shape == (6, len(cell.times))
    assert cell.regret.dtype == np.float64 and cell.counts.shape == (6, 5)
    np.testing.assert_array_equal(cell.counts.sum(axis=1), 1500)
    assert sorted(cell.diagnostics) == ["case_a", "case_b", "case_c"]
    # case counters over time: cumulative means at chunk boundaries, ending at T
    assert cell.diagnostic_times[-1] == 1500 and np.all(np.diff(cell.diagnostic_times) > 0)
    history = sum(cell.diagnostic_history[k] for k in ("case_a", "case_b", "case_c"))
    np.testing.assert_allclose(history, cell.diagnostic_times)
    # metadata of every group: config, seed, device, versions, wall time
    meta = results.groups[cell.group]
    assert meta["seed"] == 3 and meta["device"]["device_count"] >= 1 and meta["wall_time"] > 0
    assert meta["versions"]["jax"] == __import__("jax").__version__
    assert json.loads((out / "sweep.json").read_text())["config"]["runs"] == 6


def test_summary_csv(reference):
    out, results = reference
    lines = (out / "summary.csv").read_text().splitlines()
    assert lines[0] == (
        "instance,noise,policy,label,policy_name,alpha,horizon,runs,mean,stderr,median,q05,q95,"
        "regret_over_log_T,lower_bound,lower_bound_log_T,lower_bound_kind,"
        "mean_case_a,mean_case_b,mean_case_c,mean_initial_rounds"
    )
    assert len(lines) == 1 + len(results.cells)
    row = results.summary()[7]
    final = results.cells[7].final_regret
    assert row["instance"] == "graph_star" and row["policy"] == "ts_n"
    assert row["mean"] == pytest.approx(final.mean())
    assert row["stderr"] == pytest.approx(final.std(ddof=1) / np.sqrt(6))
    assert row["median"] == pytest.approx(np.median(final))
    assert row["q05"] == pytest.approx(np.quantile(final, 0.05))
    assert row["q95"] == pytest.approx(np.quantile(final, 0.95))
    assert row["mean_initial_rounds"] == pytest.approx(results.cells[7].diagnostics["initial_rounds"].mean())
    # the file holds the same numbers, exactly
    written = list(csv.DictReader(lines))[7]
    for name in ("mean", "stderr", "median", "q05", "q95", "regret_over_log_T", "lower_bound"):
        assert float(written[name]) == row[name], name
    assert (written["instance"], written["policy"], int(written["runs"])) == ("graph_star", "ts_n", 6)


def test_grid_cells_equal_separate_simulations(reference):
    """Each cell of a batched grid is the run a lone simulation with that instance,
    that alpha and that noise stream would give (params really are per cell)."""
    _, results = reference
    cell = results.select(instance="graph_star", params={"alpha": 2.0})[0]
    alone = SimulationRun(
        policies.make(fx.CASES_POLICY, alpha=2.0), jb.instances.stack([results.instances["graph_star"]]),
        1500, 6, 3, cell.times, noise_index=np.array([1]), chunk_size=128,
    )  # fmt: skip
    alone.advance()
    np.testing.assert_array_equal(alone.result().regret[0], cell.regret)
    # the grid values give different runs; the same instance shares noise across policies
    others = results.select(instance="graph_star", policy="cases")
    assert not np.array_equal(others[0].regret, others[2].regret)


def test_grid_compiles_once(tmp_path, monkeypatch):
    """A 3-value grid on 2 instances is ONE compiled program: select_fn traced once to
    compile (and twice, abstractly, by the policy check: a second trace is the same program)."""
    name = "test_cases_traced"
    monkeypatch.setitem(policies.REGISTRY, name, fx.cases_factory(name))
    cfg = fx.base_config(
        horizon=300, policies=[{"name": name, "alpha": [0.5, 1.0, 2.0]}], checkpoint={"every_chunks": 1}
    )
    assert len(config.load(cfg).plan()) == 1
    results = sweep.run(cfg, tmp_path / "a", progress=False)
    assert len(results.cells) == 6 and results.groups["g000"]["num_cells"] == 6
    assert fx.TRACES[name] == 3  # the contract check (abstract, twice) and the one compile
    # the compiled engine is reused by a new sweep of other values, and by resumption
    cfg["policies"][0]["alpha"] = [0.3, 0.7, 3.0]
    sweep.run(cfg, tmp_path / "b", progress=False)
    assert fx.TRACES[name] == 3


def test_interrupted_and_resumed_sweep_is_bit_identical(tmp_path, reference):
    ref_dir, _ = reference
    out = tmp_path / "sweep"
    cfg = fx.base_config()

    def stop_at(group, rounds):
        def hook(group_id, rounds_done):
            if group_id == group and rounds_done >= rounds:
                raise Interrupted(group_id)

        return hook

    # interrupted mid-cell in the first group, after checkpoints every 2 chunks
    with pytest.raises(Interrupted):
        sweep.run(cfg, out, progress=False, after_chunk=stop_at("g000", 5 * 128))
    assert (out / "checkpoints" / "g000.npz").is_file()
    assert not (out / "groups" / "g000.json").exists()
    saved = files.read_npz(out / "checkpoints" / "g000.npz")
    assert int(saved["sweep/diagnostic_times"][-1]) == 4 * 128  # the last saved chunk
    partial = io.load(out)
    assert partial.missing == ("g000", "g001") and not partial.cells

    # resumed (with another checkpoint cadence: not part of the fingerprint), then
    # interrupted again in the second group
    cfg["checkpoint"] = {"every_chunks": 3}
    with pytest.raises(Interrupted):
        sweep.run(cfg, out, progress=False, after_chunk=stop_at("g001", 8 * 128))
    assert not (out / "checkpoints" / "g000.npz").exists()
    first_group = (out / "groups" / "g000.json").stat().st_mtime_ns
    assert io.load(out).missing == ("g001",)

    resumed_from = []
    sweep.run(cfg, out, progress=False, after_chunk=lambda g, r: resumed_from.append((g, r)))
    assert resumed_from[0] == ("g001", 7 * 128)  # continued after the checkpoint at chunk 6
    assert (out / "groups" / "g000.json").stat().st_mtime_ns == first_group  # skipped
    fx.assert_identical(fx.result_arrays(out), fx.result_arrays(ref_dir))
    assert json.loads((out / "groups" / "g001.json").read_text())["resumed_from_round"] == 6 * 128
    assert (out / "summary.csv").read_text() == (ref_dir / "summary.csv").read_text()


def test_a_sweep_resumed_on_a_recording_time_records_as_the_uninterrupted_one(tmp_path):
    """A checkpoint at round 512, itself a recording time: the resumed group records its
    counters at the times still to come only, as the uninterrupted group does."""
    cfg = fx.base_config(
        horizon=1000, times=[128, 512, 1000], checkpoint={"every_chunks": 4},
        instances=fx.BASE["instances"][:1], policies=[{"name": fx.CASES_POLICY, "label": "cases", "alpha": 1.0}],
    )  # fmt: skip
    sweep.run(cfg, tmp_path / "whole", progress=False)
    out = tmp_path / "resumed"

    def stop(group_id, rounds_done):
        if rounds_done >= 5 * 128:
            raise Interrupted(group_id)

    with pytest.raises(Interrupted):
        sweep.run(cfg, out, progress=False, after_chunk=stop)
    assert int(files.read_npz(out / "checkpoints" / "g000.npz")["sweep/diagnostic_times"][-1]) == 512
    sweep.run(cfg, out, progress=False)
    fx.assert_identical(fx.result_arrays(out), fx.result_arrays(tmp_path / "whole"))


def test_a_signal_stops_the_sweep_after_its_chunk_with_a_checkpoint(tmp_path, reference, default_signal_handlers, monkeypatch):
    """A SIGTERM (a scheduler's) during chunk 4 of the first group: the sweep runs chunk
    5, saves a checkpoint there (off its cadence of every 2 chunks) and raises
    ``Stopped``.  Resumed, a second signal (Ctrl-C twice) interrupts at once, with no
    checkpoint.  Resumed again, the sweep ends bit-identical to an uninterrupted one,
    and Python's own handlers are back after each run."""
    ref_dir, _ = reference
    out = tmp_path / "sweep"
    cfg = fx.base_config()

    def signals_at(rounds, *signums, seen):
        def hook(group_id, rounds_done):
            seen.append(rounds_done)
            if group_id == "g000" and rounds_done == rounds:
                for signum in signums:
                    signal.raise_signal(signum)

        return hook

    with pytest.raises(stopping.Stopped) as stopped:
        sweep.run(cfg, out, progress=False, after_chunk=signals_at(4 * 128, signal.SIGTERM, seen=[]))
    assert stopped.value.signum == signal.SIGTERM and not (out / "groups" / "g000.json").exists()
    assert signal.getsignal(signal.SIGTERM) == signal.SIG_DFL
    seen = []
    with pytest.raises(KeyboardInterrupt) as interrupted:
        sweep.run(cfg, out, progress=False, after_chunk=signals_at(6 * 128, signal.SIGINT, signal.SIGINT, seen=seen))
    assert not isinstance(interrupted.value, stopping.Stopped)
    assert seen == [6 * 128]  # resumed after the checkpoint of chunk 5
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler
    seen = []
    sweep.run(cfg, out, progress=False, after_chunk=lambda group_id, rounds_done: seen.append(rounds_done))
    assert seen[0] == 6 * 128  # the second run saved no checkpoint
    assert json.loads((out / "groups" / "g000.json").read_text())["resumed_from_round"] == 5 * 128
    fx.assert_identical(fx.result_arrays(out), fx.result_arrays(ref_dir))
    # asked for after the last group's last chunk: its results are written, then the
    # sweep stops before its summary; run again, it summarises without computing
    last_group = config.from_dict(cfg).plan()[-1]

    def at_the_end(group_id, rounds_done):
        if (group_id, rounds_done) == (last_group.id, last_group.horizon):
            signal.raise_signal(signal.SIGINT)

    with pytest.raises(stopping.Stopped):
        sweep.run(cfg, tmp_path / "last", progress=False, after_chunk=at_the_end)
    assert (tmp_path / "last" / "groups" / f"{last_group.id}.json").exists()
    assert not (tmp_path / "last" / "summary.csv").exists()
    seen = []
    assert sweep.run(cfg, tmp_path / "last", progress=False, after_chunk=lambda *chunk: seen.append(chunk)).complete
    assert seen == [] and (tmp_path / "last" / "summary.csv").exists()
    # during the summary (every group written) a signal stops at once, under Python's
    # own handlers: a stop taken after it would say that computing was left to resume
    monkeypatch.setattr(summary, "write_summary_csv", lambda results: signal.raise_signal(signal.SIGINT))
    with pytest.raises(KeyboardInterrupt) as interrupted:
        sweep.run(cfg, tmp_path / "last", progress=False)
    assert not isinstance(interrupted.value, stopping.Stopped)


def test_a_script_stopped_by_a_signal_exits_with_a_line_and_the_shell_s_status(capsys):
    """What the study scripts' entry (``stopping.exit_after``) does with a sweep a signal
    stopped: 128 plus the signal and one line, as the jaxbandit command; else main's status."""

    def stopped():
        raise stopping.Stopped(signal.SIGTERM)

    with pytest.raises(SystemExit) as exit_:
        stopping.exit_after(stopped)
    assert exit_.value.code == 128 + signal.SIGTERM
    assert capsys.readouterr().err.endswith(": stopped by SIGTERM; run the same command again to resume.\n")
    with pytest.raises(SystemExit) as exit_:
        stopping.exit_after(lambda: 3)
    assert exit_.value.code == 3


def test_a_second_signal_stops_at_once_with_its_own_status(default_signal_handlers, capsys):
    """Two SIGTERMs (a scheduler's, repeated): interrupted at once, and the command's
    status is SIGTERM's (143), not Ctrl-C's."""
    with pytest.raises(KeyboardInterrupt) as interrupted, stopping.on_signals():
        signal.raise_signal(signal.SIGTERM)
        signal.raise_signal(signal.SIGTERM)
    assert not isinstance(interrupted.value, stopping.Stopped)
    assert stopping.interrupted(interrupted.value, "jaxbandit") == 128 + signal.SIGTERM
    assert capsys.readouterr().err.endswith("jaxbandit: interrupted; run the same command again to resume.\n")
    assert stopping.interrupted(KeyboardInterrupt(), "jaxbandit") == 128 + signal.SIGINT

    def twice():  # a study script's main (stopping.exit_after): its status too, not a traceback
        with stopping.on_signals():
            signal.raise_signal(signal.SIGTERM)
            signal.raise_signal(signal.SIGTERM)

    with pytest.raises(SystemExit) as exit_:
        stopping.exit_after(twice)
    assert exit_.value.code == 128 + signal.SIGTERM
    assert capsys.readouterr().err.endswith(": interrupted; run the same command again to resume.\n")


def test_a_group_whose_arrays_are_gone_is_run_again(tmp_path, reference):
    """A finished group's ``.npz`` deleted (its ``.json`` kept): the next run computes
    the group again instead of skipping it and reporting it missing forever."""
    ref_dir, _ = reference
    out = tmp_path / "sweep"
    shutil.copytree(ref_dir, out)
    (out / "groups" / "g001.npz").unlink()
    assert io.load(out).missing == ("g001",)
    first_group = (out / "groups" / "g000.json").stat().st_mtime_ns
    results = sweep.run(fx.base_config(), out, progress=False)
    assert results.complete
    assert (out / "groups" / "g000.json").stat().st_mtime_ns == first_group  # still skipped
    fx.assert_identical(fx.result_arrays(out), fx.result_arrays(ref_dir))


def test_checkpoint_of_another_engine_layout_starts_the_group_over(tmp_path, reference, caplog):
    """A checkpoint of the same configuration whose engine state does not fit this
    version (here: a leaf missing), or a damaged one (cut short), is ignored with a
    warning, not a crash on every rerun, and the group runs from the start to the same
    results."""
    ref_dir, _ = reference
    out = tmp_path / "sweep"
    cfg = fx.base_config()

    def stop(group_id, rounds_done):
        if group_id == "g000" and rounds_done >= 5 * 128:
            raise Interrupted(group_id)

    with pytest.raises(Interrupted):
        sweep.run(cfg, out, progress=False, after_chunk=stop)
    damaged = tmp_path / "damaged"
    shutil.copytree(out, damaged)
    path = out / "checkpoints" / "g000.npz"
    saved = files.read_npz(path)
    leaves = sorted(k for k in saved if k.startswith("leaf_"))
    files.save_npz(path, {k: v for k, v in saved.items() if k != leaves[-1]})
    started = []
    with caplog.at_level("WARNING", logger="jaxbandit.sweep"):
        sweep.run(cfg, out, progress=False, after_chunk=lambda g, r: started.append((g, r)))
    assert "ignoring a checkpoint it cannot resume: the checkpoint holds" in caplog.text
    assert started[0] == ("g000", 128)  # from the start, not from the checkpoint
    assert json.loads((out / "groups" / "g000.json").read_text())["resumed_from_round"] == 0
    fx.assert_identical(fx.result_arrays(out), fx.result_arrays(ref_dir))

    cut = damaged / "checkpoints" / "g000.npz"
    cut.write_bytes(cut.read_bytes()[:-200])
    with caplog.at_level("WARNING", logger="jaxbandit.sweep"):
        sweep.run(cfg, damaged, progress=False)
    assert f"ignoring the checkpoint {cut}, which cannot be read" in caplog.text
    fx.assert_identical(fx.result_arrays(damaged), fx.result_arrays(ref_dir))


def test_changed_config_is_refused(tmp_path, reference, monkeypatch):
    ref_dir, _ = reference
    before = sorted(p.name for p in ref_dir.rglob("*"))
    with pytest.raises(sweep.SweepMismatchError, match=r"different sweep configuration \(changed keys: runs, seed\)"):
        sweep.run(fx.base_config(runs=7, seed=4), ref_dir, progress=False)
    # alpha = 2 for 2.0: equal numbers, other text (and labels): the key named
    policies = [{**fx.BASE["policies"][0], "alpha": [0.5, 1.0, 2]}, *fx.BASE["policies"][1:]]
    with pytest.raises(sweep.SweepMismatchError, match=r"different sweep configuration \(changed keys: policies\)"):
        sweep.run(fx.base_config(policies=policies), ref_dir, progress=False)
    # the same configuration under other code (an edited engine, another jax): refused
    # while a group is left to compute; a finished sweep reads back under any code
    unfinished = tmp_path / "unfinished"
    shutil.copytree(ref_dir, unfinished)
    for path in (unfinished / "groups").glob("g000.*"):
        path.unlink()
    with monkeypatch.context() as patch:
        patch.setattr(config_plan, "source_digest", lambda: "another")
        with pytest.raises(sweep.SweepMismatchError, match=r"computed otherwise: they differ in the code that computes the results \(another jaxbandit, jax or jaxlib version, or an edited jaxbandit source file\); the finished groups still load\. Refusing"):
            sweep.run(fx.base_config(), unfinished, progress=False)
        assert sweep.run(fx.base_config(), ref_dir, progress=False).complete
    # a setting that never changes results: the message says how to resume
    with pytest.raises(sweep.SweepMismatchError, match=r"\(changed keys: solve_batch; such settings change no results, .*: resume with solve_batch left out\)"):
        sweep.run(fx.base_config(solve_batch=4), ref_dir, progress=False)
    assert sorted(p.name for p in ref_dir.rglob("*")) == before
    (tmp_path / "notes.txt").write_text("unrelated")
    with pytest.raises(sweep.SweepMismatchError, match="not empty and is not a sweep directory"):
        sweep.run(fx.base_config(), tmp_path, progress=False)


def test_a_changed_factory_default_or_policy_code_is_refused(tmp_path, monkeypatch):
    """The same configuration text whose policy now resolves to another default, or
    whose functions were edited, is a different sweep; so is a directory an earlier
    version wrote (another format)."""
    name, out = "test_default", tmp_path / "sweep"
    cfg = fx.base_config(policies=[{"name": name}])
    monkeypatch.setitem(policies.REGISTRY, name, lambda alpha=1.0: fx.cases_policy(alpha))
    sweep.run(cfg, out, progress=False)
    sweep.run(cfg, out, progress=False)  # unchanged: accepted
    manifest = json.loads((out / "sweep.json").read_text())
    code = engine.policy_code(fx.cases_policy(1.0))
    assert manifest["resolved_policies"][0]["grid"] == [{"params": {"alpha": 1.0}, "options": {}, "code": code}]
    files.save_json(out / "sweep.json", {**manifest, "format": 3})  # the previous format: no group's data digest
    with pytest.raises(sweep.SweepMismatchError, match=r"written by another version of jaxbandit \(directory format 3, this version writes 4\)"):
        sweep.run(cfg, out, shard="1/2", progress=False)
    with pytest.raises(ValueError, match=r"sweep: written by another version of jaxbandit \(directory format 3, this version writes 4\)"):
        jb.load(out)  # what it reads may not be there: said so, not as a missing key
    # a manifest of no version at all (a damaged file) says so
    files.save_json(out / "sweep.json", [])
    with pytest.raises(sweep.SweepMismatchError, match=r"sweep\.json is damaged: a sweep manifest is a JSON dict, got list"):
        sweep.run(cfg, out, shard="1/2", progress=False)
    files.save_json(out / "sweep.json", manifest)
    # under JAX's other 64-bit mode: a finished sweep reads back; with a group left to compute, refused
    with jax.enable_x64(True):
        assert sweep.run(cfg, out, progress=False).complete
        finished = (out / "groups" / "g000.json").read_bytes()
        (out / "groups" / "g000.json").unlink()
        with pytest.raises(sweep.SweepMismatchError, match=r"they differ in JAX's 64-bit mode \(JAX_ENABLE_X64, False then, True now, under which .*\); the finished groups still load\. Refusing"):
            sweep.run(cfg, out, progress=False)
    (out / "groups" / "g000.json").write_bytes(finished)
    # a float64 sweep runs under the 64-bit mode whatever the global one: resumed under either
    wide, wide_out = fx.base_config(precision="float64", policies=[{"name": "ucb"}]), tmp_path / "wide"
    sweep.run(wide, wide_out, progress=False)
    computed = fx.result_arrays(wide_out)
    (wide_out / "groups" / "g000.json").unlink()
    with jax.enable_x64(True):
        assert sweep.run(wide, wide_out, progress=False).complete
    fx.assert_identical(fx.result_arrays(wide_out), computed)

    monkeypatch.setitem(policies.REGISTRY, name, lambda alpha=2.0: fx.cases_policy(alpha))
    with pytest.raises(sweep.SweepMismatchError, match=r"policies\[0\] \(test_default\) resolved to .*1\.0.*, now to .*2\.0"):
        sweep.run(cfg, out, shard="1/2", progress=False)
    edited = lambda alpha=1.0: fx.cases_policy(alpha)._replace(diagnostics_fn=lambda state: {})
    monkeypatch.setitem(policies.REGISTRY, name, edited)
    with pytest.raises(sweep.SweepMismatchError, match=r"the code of policies\[0\] \(test_default\) changed"):
        sweep.run(cfg, out, shard="1/2", progress=False)


def test_a_changed_default_setting_is_refused(tmp_path, monkeypatch):
    """The same configuration text whose recording times now resolve otherwise (the
    default grid of another version) is a different sweep."""
    out = tmp_path / "sweep"
    cfg = fx.base_config(policies=[{"name": "ucb"}])
    del cfg["times"]
    sweep.run(cfg, out, progress=False)
    manifest = json.loads((out / "sweep.json").read_text())
    assert len(manifest["resolved_settings"]["times"]["1500"]) == len(config.load(cfg).times_for(1500))

    monkeypatch.setattr(config.plan, "geometric_times", lambda horizon, points: jb.geometric_times(horizon, 10))
    with pytest.raises(sweep.SweepMismatchError, match=r"same configuration computed otherwise: they differ in times, resolved from a default that changed"):
        sweep.run(cfg, out, shard="1/2", progress=False)


def test_progress_bar_reports_cells_and_rate(tmp_path, reference, capsys):
    ref_dir, _ = reference
    # an existing complete sweep: every group is skipped, the bar still accounts for it
    sweep.run(fx.base_config(), ref_dir, progress=True)
    err = capsys.readouterr().err
    assert "cells 8/8" in err and "72.0k/72.0k" in err and "run-rounds/s" in err


@pytest.mark.slow
def test_four_devices_give_identical_results(tmp_path, reference):
    """The runs axis sharded over 4 forced host devices (6 runs: padded) = 1 device."""
    ref_dir, _ = reference
    path = fx.write_config_toml(tmp_path / "c.toml", fx.base_config())
    proc = fx.cli_process(
        ["run", str(path), "--out", str(tmp_path / "out"), "--quiet"],
        env_extra={"XLA_FLAGS": "--xla_force_host_platform_device_count=4", "JAX_PLATFORMS": "cpu"},
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    stdout, stderr = proc.communicate(timeout=300)
    assert proc.returncode == 0, stderr
    meta = json.loads((tmp_path / "out" / "groups" / "g000.json").read_text())
    assert meta["device"]["device_count"] == 4
    fx.assert_identical(fx.result_arrays(tmp_path / "out"), fx.result_arrays(ref_dir))


def test_a_factory_is_called_once_per_parameter_set(tmp_path, monkeypatch):
    """The configuration is resolved once: a 3-cell grid calls its factory 3 times,
    from loading the configuration to the results on disk."""
    calls = []

    def counting(alpha: float = 1.0):
        calls.append(alpha)
        return fx.cases_policy(alpha)

    monkeypatch.setitem(policies.REGISTRY, "counting", counting)
    cfg = fx.base_config(policies=[{"name": "counting", "alpha": [0.5, 1.0, 2.0]}])
    results = sweep.run(cfg, tmp_path / "sweep", progress=False)
    assert len(results.cells) == 6 and results.complete
    assert calls == [0.5, 1.0, 2.0]


def test_a_run_that_failed_before_any_result_does_not_lock_its_directory(tmp_path, monkeypatch):
    """A sweep stopped by its policy before any group finished leaves nothing behind
    (the failing group's checkpoints, which could only replay the failure, included):
    the corrected configuration runs in the same directory."""
    name, out = "test_fixable", tmp_path / "sweep"
    cfg = fx.base_config(policies=[{"name": name}], checkpoint={"every_chunks": 1})
    monkeypatch.setitem(policies.REGISTRY, name, lambda: user_policies.arm_out_of_range(300))  # in the third chunk
    with pytest.raises(jb.InvalidArmError):
        sweep.run(cfg, out, progress=False)
    assert files.visible_entries(out) == []
    monkeypatch.setitem(policies.REGISTRY, name, lambda: user_policies.fixed_arm(0))
    assert sweep.run(cfg, out, progress=False).complete
    # not while another run uses the directory (it may be computing its first result)
    out = tmp_path / "shared"
    out.mkdir()
    files.running_marker(out)  # another run's, which has not written anything yet
    monkeypatch.setitem(policies.REGISTRY, name, lambda: user_policies.arm_out_of_range(3))
    with pytest.raises(jb.InvalidArmError):
        sweep.run(cfg, out, progress=False)
    assert (out / "sweep.json").is_file()
    # but a marker a killed run left (its process gone, on this host) is no other run
    out = tmp_path / "left_by_a_killed_run"
    out.mkdir()
    killed = "import os, sys; from jaxbandit import files; files.running_marker(sys.argv[1]); os._exit(9)"
    assert subprocess.run([sys.executable, "-c", killed, str(out)], check=False).returncode == 9
    assert len(list(out.glob(".running-*.tmp"))) == 1
    with pytest.raises(jb.InvalidArmError):
        sweep.run(cfg, out, progress=False)
    assert list(out.iterdir()) == []


def test_a_run_is_marked_before_it_reads_the_manifest_and_a_withdrawn_manifest_comes_back_for_another(tmp_path, monkeypatch):
    """Two runs on one directory, one failing before its first result as the other
    starts: the starting run's marker is written before it reads (or makes) the
    manifest, and the failing run moves the manifest aside before it looks for other
    markers, putting it back if it finds one (unless that run made its own meanwhile).
    Either the starting run is seen, or it finds no manifest and makes its own."""
    out = tmp_path / "sweep"
    real_prepare = sweep._prepare_directory

    def prepare(cfg, groups, directory, config):
        assert list(directory.glob(".running-*.tmp")), "no marker before the manifest is read"
        return real_prepare(cfg, groups, directory, config)

    monkeypatch.setattr(sweep, "_prepare_directory", prepare)
    cfg = fx.base_config(policies=[{"name": "ucb"}])
    sweep.run(cfg, out, progress=False)
    monkeypatch.undo()
    # the empty folders a run leaves until it has withdrawn its manifest are no obstacle
    (tmp_path / "left" / "checkpoints").mkdir(parents=True)
    (tmp_path / "left" / "groups").mkdir()
    assert sweep.run(cfg, tmp_path / "left", progress=False).complete
    manifest = (out / "sweep.json").read_bytes()
    mine = files.running_marker(out)
    # no other run: removed, nothing left aside
    assert files.remove_unless_others_running(out, mine, ("sweep.json", "config.toml"))
    assert not (out / "sweep.json").exists() and not (out / "config.toml").exists()
    assert [p.name for p in out.glob(".*.tmp")] == [mine.name]
    # another run's marker: put back as it was
    (out / "sweep.json").write_bytes(manifest)
    other = files.running_marker(out)  # this process: alive
    assert not files.remove_unless_others_running(out, mine, ("sweep.json", "config.toml"))
    assert (out / "sweep.json").read_bytes() == manifest and not (out / "config.toml").exists()
    assert sorted(p.name for p in out.glob(".*.tmp")) == sorted([mine.name, other.name])
    # another run that made its own manifest while this one's was aside keeps its own
    real_others = files.others_running

    def another_made_its_own(directory, marker):
        (out / "sweep.json").write_text("{}")
        return real_others(directory, marker)

    monkeypatch.setattr(files, "others_running", another_made_its_own)
    assert not files.remove_unless_others_running(out, mine, ("sweep.json",))
    assert (out / "sweep.json").read_text() == "{}"
    assert sorted(p.name for p in out.glob(".*.tmp")) == sorted([mine.name, other.name])


def test_a_sweep_records_each_instance_s_noise_family(tmp_path):
    """Two families of one K run as two programs; results, group records and the
    summary name each cell's family, and the loaded instances keep theirs."""
    instances = [{"type": "default", "name": "bandit"}, {"type": "default", "name": "graph_star", "noise": "bernoulli"}]
    results = sweep.run(fx.base_config(instances=instances, policies=[{"name": "ts_n"}]), tmp_path / "s", progress=False)
    assert {c.instance: c.noise for c in results.cells} == {"bandit": "gaussian", "graph_star": "bernoulli"}
    assert results.instances["graph_star"].noise == jb.noise.bernoulli()
    assert sorted(g["noise"] for g in results.groups.values()) == ["bernoulli", "gaussian"]
    assert {row["instance"]: row["noise"] for row in results.summary()} == {"bandit": "gaussian", "graph_star": "bernoulli"}
