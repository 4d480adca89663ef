"""Sweeps beyond one process: one sweep as one program over several processes
(``jax.distributed``, CPU processes joined by gloo on this host), and independent
shards of a sweep filling one directory.

Every multi-process test starts real ``python -m jaxbandit.cli`` processes on a free
local port and compares every result array with a one-process run, bit for bit.
Child processes are killed when a test ends, however it ends.
"""

import functools
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time

import numpy as np
import pytest

import jaxbandit as jb
from jaxbandit import cli, distributed, files, io, plotting, shards, sweep
from tests import sweep_fixtures as fx

# Every sweep here has the same shapes (4 cells of ucb_n, 6 runs, 12 recording times,
# chunks of 128 rounds): each process compiles one engine.
CONFIG = {
    "name": "distributed",
    "seed": 5,
    "runs": 6,
    "horizon": [1500, 1000],
    "times": 12,
    "chunk_size": 128,
    "checkpoint": {"every_chunks": 4},
    "instances": [{"type": "default", "name": "bandit"}, {"type": "default", "name": "graph_star"}],
    "policies": [
        {"name": "ucb_n", "label": "a", "alpha": [0.5, 1.0]},
        {"name": "ucb_n", "label": "b", "alpha": [2.0, 3.0]},
    ],
}
# one group of 60 chunks: killed after its first checkpoint, it has far to go
LONG = dict(CONFIG, horizon=7680, policies=CONFIG["policies"][:1], checkpoint={"every_chunks": 5})
WAIT = 240  # seconds: generous bounds, the machine may be loaded


def config(**changes) -> dict:
    return json.loads(json.dumps(dict(CONFIG, **changes)))


@pytest.fixture(scope="module")
def reference(tmp_path_factory):
    """The one-process run every other run is compared with."""
    out = tmp_path_factory.mktemp("reference")
    sweep.run(config(), out, progress=False)
    return out


@pytest.fixture(scope="module")
def compile_cache(tmp_path_factory):
    """A compile cache shared by this module's processes only: a restarted process
    loads what the first ones compiled (most of their start-up time)."""
    return tmp_path_factory.mktemp("xla")


@pytest.fixture
def launched(compile_cache):
    """Start processes through ``launch(args_per_process)``; all are killed at the end."""
    processes = []

    def launch(arguments, environments=None):
        # nothing of a cluster these tests might run in: each test says what it starts
        env = {k: v for k, v in os.environ.items() if not k.startswith(("SLURM_", "OMPI_", "PMI_", "JAX_COORDINATOR"))}
        env.update(JAX_PLATFORMS="cpu", JAXBANDIT_COMPILE_CACHE=str(compile_cache))
        env["JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS"] = "0"  # the many small programs too
        env.pop("XLA_FLAGS", None)  # one CPU device per process
        env["PYTHONPATH"] = os.pathsep.join([str(fx.REPO), env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
        environments = environments or [{}] * len(arguments)
        pipes = {"stdout": subprocess.PIPE, "stderr": subprocess.PIPE, "text": True}
        command = [sys.executable, "-m", "jaxbandit"]  # the package run as the command (__main__)
        started = [
            subprocess.Popen(command + args, env=dict(env, **extra), cwd=fx.REPO, **pipes)
            for args, extra in zip(arguments, environments)
        ]
        processes.extend(started)
        return started

    yield launch
    for process in processes:
        if process.poll() is None:
            process.kill()
        process.communicate()


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def slurm_environments(count: int) -> list:
    """The variables SLURM sets for ``count`` tasks on this host, with a job id whose
    coordinator port (JAX derives it from the id, in 61440..65535) is free now."""
    for job_id in np.random.default_rng().permutation(4096):
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", 61440 + int(job_id)))
            except OSError:
                continue
        common = {"SLURM_JOB_ID": str(job_id), "SLURM_STEP_NODELIST": "localhost", "SLURM_NTASKS": str(count)}
        return [dict(common, SLURM_PROCID=str(i), SLURM_LOCALID=str(i)) for i in range(count)]
    raise RuntimeError("no free port in 61440..65535")


def process_flags(count: int, port: int, counts=None, join_timeout: int = 120) -> list:
    """The coordinator options of each of ``count`` processes (``counts``: the number
    of processes each one is told, to make them disagree)."""
    counts = counts or [count] * count
    return [
        ["--coordinator", f"127.0.0.1:{port}", "--num-processes", str(counts[i]), "--process-id", str(i),
         "--heartbeat-timeout", "10", "--join-timeout", str(join_timeout)]
        for i in range(count)
    ]  # fmt: skip


def finish(processes, timeout=WAIT) -> list:
    """``(returncode, stdout, stderr)`` of each process, waiting at most ``timeout`` s."""
    deadline = time.monotonic() + timeout
    outputs = [p.communicate(timeout=max(1.0, deadline - time.monotonic())) for p in processes]
    return [(p.returncode, *output) for p, output in zip(processes, outputs)]


def run_args(path, out) -> list:
    return ["run", str(path), "--out", str(out), "--quiet"]


# -- one sweep, several processes -----------------------------------------------------


def test_two_processes_give_the_one_process_results(tmp_path, reference, launched):
    """Started as SLURM starts them (its variables, read by JAX through --distributed);
    the other tests give the coordinator options explicitly."""
    path = fx.write_config_toml(tmp_path / "sweep.toml", config())
    out = tmp_path / "out"
    options = ["--distributed", "--heartbeat-timeout", "10", "--join-timeout", "120"]
    processes = launched([run_args(path, out) + options] * 2, slurm_environments(2))
    (rc0, stdout0, stderr0), (rc1, stdout1, stderr1) = finish(processes)
    assert rc0 == 0 and rc1 == 0, stderr0[-3000:] + stderr1[-3000:]
    fx.assert_identical(fx.result_arrays(out), fx.result_arrays(reference))
    meta = json.loads((out / "groups" / "g000.json").read_text())
    assert meta["device"]["process_count"] == 2 and meta["device"]["device_count"] == 2
    # process 0 reports and writes; both log, labelled
    assert "sweep finished" in stdout0 and "sweep finished" not in stdout1
    assert "[process 1/2] jaxbandit.sweep: group g003: done" in stderr1
    assert (out / "summary.csv").read_text() == (reference / "summary.csv").read_text()
    assert not list(out.rglob("*.tmp")) and not list((out / "checkpoints").iterdir())


def test_a_killed_process_stops_the_others_and_a_restart_resumes(tmp_path, launched):
    path = fx.write_config_toml(tmp_path / "long.toml", LONG)
    out = tmp_path / "out"
    arguments = [run_args(path, out) + flags for flags in process_flags(2, free_port())]
    processes = launched(arguments)
    checkpoint = out / "checkpoints" / "g000.npz"
    deadline = time.monotonic() + WAIT
    while not checkpoint.exists() and processes[0].poll() is None and time.monotonic() < deadline:
        time.sleep(0.01)
    processes[1].send_signal(signal.SIGKILL)
    killed_at = time.monotonic()
    (rc0, _, stderr0), (rc1, _, _) = finish(processes, timeout=90)
    stopped_after = time.monotonic() - killed_at
    if (out / "groups" / "g000.json").exists():
        pytest.skip("the sweep finished before the kill; nothing interrupted")
    assert rc1 == -signal.SIGKILL
    # the survivor stops on its own, with an error, in bounded time (not a hang)
    assert rc0 not in (0, None) and stopped_after < 90, stderr0[-3000:]
    assert "jaxbandit: error: process 0 of 2 stopped" in stderr0 or "another task died" in stderr0, stderr0[-3000:]
    assert checkpoint.exists()

    resumed = finish(launched(arguments))
    assert [rc for rc, _, _ in resumed] == [0, 0], resumed[0][2][-3000:] + resumed[1][2][-3000:]
    assert "group g000: resuming from round" in resumed[1][2]  # every process restored it
    meta = json.loads((out / "groups" / "g000.json").read_text())
    assert 0 < meta["resumed_from_round"] < 7680
    sweep.run(LONG, tmp_path / "reference", progress=False)
    fx.assert_identical(fx.result_arrays(out), fx.result_arrays(tmp_path / "reference"))


def test_processes_that_disagree_are_refused(tmp_path, launched):
    """Different configurations, or different process counts, stop every process
    with an error instead of a wrong result or a hang; all three cases at once."""
    same = fx.write_config_toml(tmp_path / "a.toml", config())
    other = fx.write_config_toml(tmp_path / "b.toml", config(runs=7))
    configs = launched(
        [run_args(p, tmp_path / "configs") + flags
         for p, flags in zip([same, other], process_flags(2, free_port()))]
    )  # fmt: skip
    told_more = launched([run_args(same, tmp_path / "more") + f for f in process_flags(2, free_port(), [2, 3])])
    short = launched([run_args(same, tmp_path / "short") + f for f in process_flags(2, free_port(), [3, 2], 5)])
    no_cluster = launched([run_args(same, tmp_path / "alone") + ["--distributed"]])  # nothing names the processes

    for rc, _, stderr in finish(configs):
        assert rc == cli.EXIT_USAGE, stderr[-3000:]
        assert "the processes disagree on the sweep configuration" in stderr
    for rc, _, stderr in finish(told_more):
        assert rc == cli.EXIT_USAGE, stderr[-3000:]
        assert "started with different numbers of processes (process 0: 2, process 1: 3; 2 joined)" in stderr
    for rc, _, stderr in finish(short):  # process 0 waits for a third process
        assert rc == distributed.EXIT_FAILURE, stderr[-3000:]
        assert "waited 5 s at coordinator 127.0.0.1:" in stderr and "not every process joined" in stderr, stderr[-3000:]
    [(rc, _, stderr)] = finish(no_cluster)
    assert rc == cli.EXIT_USAGE and "JAX found no cluster that names the processes (" in stderr, stderr[-3000:]
    assert "give --coordinator, --num-processes and --process-id" in stderr
    assert not (tmp_path / "configs").exists() and not (tmp_path / "more").exists() and not (tmp_path / "alone").exists()


def test_long_texts_that_differ_past_the_buffer_stay_different():
    """What processes compare travels in a fixed-size buffer: a longer text is cut and
    ends with the digest of the whole, so two that differ only past the cut still differ."""
    for letter in ("x", "\u20ac"):  # the euro sign: three bytes, cut inside one by a byte count
        one, other = letter * 5000 + "a", letter * 5000 + "b"
        sent = [distributed._decode(distributed._encode(text)) for text in (one, other)]
        assert sent[0] != sent[1] and all(len(text.encode()) <= distributed._TEXT_BYTES for text in sent)
        assert sent[0].startswith(letter * 1000) and sent[0].endswith(")")
    assert distributed._decode(distributed._encode("short")) == "short"


@pytest.mark.parametrize(
    "options, message",
    [
        (["--coordinator", "127.0.0.1:1234"], "--coordinator needs --num-processes and --process-id too"),
        (["--coordinator", "nohost", "--num-processes", "2", "--process-id", "0"], "got 'nohost'"),
        (["--coordinator", "h:1", "--num-processes", "2", "--process-id", "2"], "--process-id must be at most 1 (0-based), got 2"),
        (["--coordinator", "h:1", "--num-processes", "0", "--process-id", "0"], "--num-processes must be an integer >= 1, got 0"),
        (["--distributed", "--process-id", "0"], "drop --process-id or --distributed"),
        # without a distributed option too (checked, though unused)
        (["--join-timeout", "0"], "--join-timeout must be an integer >= 1, got 0"),
        (["--heartbeat-timeout", "-5"], "--heartbeat-timeout must be an integer >= 1, got -5"),
    ],
)
def test_bad_process_options_are_refused(tmp_path, capsys, options, message):
    assert cli.main(["run", "any.toml", "--out", str(tmp_path / "out"), *options]) == cli.EXIT_USAGE
    assert message in capsys.readouterr().err


# -- independent shards -----------------------------------------------------------------


def test_three_shards_fill_one_directory_with_the_unsharded_results(tmp_path, reference, capsys, caplog, monkeypatch):
    out = tmp_path / "out"
    first = sweep.run(config(), out, shard="0/3", progress=False)
    assert first.missing == ("g001", "g002", "g003") and [c.group for c in first.cells] == ["g000"] * 4
    assert first.describe_missing()[0] == "g001 (ucb_n on bandit, graph_star, T=1500, 4 cells, not started)"
    caplog.clear()
    with caplog.at_level("WARNING"):
        paths = plotting.plot_sweep(out, formats=["png"], bound=False)
    assert any(p.stem.startswith("paired_") for p in paths)
    assert "3 of 4 groups not finished yet, left out of the figures and summary.csv: g001 (ucb_n" in caplog.text
    assert len(caplog.records) == 1, caplog.text  # said once, not again by each paired difference
    assert len((out / "summary.csv").read_text().splitlines()) == 1 + 4

    path = fx.write_config_toml(tmp_path / "sweep.toml", config())
    assert cli.main(["run", str(path), "--out", str(out), "--shard", "2/3"]) == 0  # no --quiet: it sets up logging for good
    printed = capsys.readouterr().out
    assert "shard 2/3 finished" in printed and "not finished yet (1 of 4 groups): g001 (ucb_n on bandit, graph_star, T=1500" in printed
    assert io.load(out).missing == ("g001",)

    last = sweep.run(config(), out, shard=shards.Shard(1, 3), progress=False)
    assert last.complete
    fx.assert_identical(fx.result_arrays(out), fx.result_arrays(reference))
    assert (out / "summary.csv").read_text() == (reference / "summary.csv").read_text()
    assert (out / "sweep.json").read_text() == (reference / "sweep.json").read_text()
    # shards finishing together: a shard's summary of the one group it loaded lands after
    # the last shard's complete one, as a group finished during its turn: written again
    # (the listings before and after each turn, and the first turn's load, as they were)
    listings = iter([["g000.json"], ["g000.json", "g001.json"], ["every group"], ["every group"]])
    loads = iter([first])
    monkeypatch.setattr(sweep, "_finished_listing", lambda out: next(listings))
    monkeypatch.setattr(io, "load", functools.partial(lambda load, out: next(loads, None) or load(out), io.load))
    again = sweep._load_and_summarize(out, sharded=True)
    assert again.complete and (out / "summary.csv").read_text() == (reference / "summary.csv").read_text()
    assert next(listings, "none left") == "none left"  # two turns


def test_the_split_is_balanced_and_deterministic():
    from jaxbandit import config as config_module

    groups = config_module.load(config()).plan()
    # the two T=1500 groups cost most: one shard each; the two T=1000 ones share the third
    assert [[g.id for g in shards.select(groups, 6, shards.Shard(i, 3))] for i in range(3)] == [
        ["g000"], ["g001"], ["g002", "g003"]
    ]
    assert shards.assign([5, 4, 3, 3, 2, 1], 2) == [[0, 3, 5], [1, 2, 4]]  # loads 9 and 9
    assert shards.assign([1, 1], 4) == [[0], [1], [], []]
    for count in (1, 2, 3, 5):
        parts = shards.assign([3, 1, 4, 1, 5, 9, 2, 6], count)
        assert sorted(i for part in parts for i in part) == list(range(8))
    # more shards than groups: one group each, and no list per empty shard (a list for
    # each of 10**20 shards cannot be built)
    assert [[g.id for g in shards.select(groups, 6, shards.Shard(i, 10**20))] for i in range(5)] == [
        ["g000"], ["g001"], ["g002"], ["g003"], []
    ]
    assert [g.id for g in shards.select(groups, 6, shards.Shard(10**20 - 1, 10**20))] == []


@pytest.mark.parametrize("spec", ["3/2", "2/2", "0/0", "a/b", "-1/2", "1/-2", "1", "1/2/3", ""])
def test_bad_shard_specs_name_the_value(spec):
    with pytest.raises(jb.ArgumentError, match="0-based") as error:
        shards.parse(spec)
    assert error.value.argument == "shard"
    # the value closes the message, quoted unless it parsed as I/N
    assert str(error.value).endswith((f", got {spec!r}.", f", got {spec}.")), str(error.value)


def test_a_shard_pair_is_two_integers():
    """A whole float is an integer (the one integer rule), stored as one; a dict, whose
    keys a pair would unpack, and digits of other scripts are refused."""
    assert shards.parse((0, 2.0)) == shards.Shard(0, 2) and isinstance(shards.parse((0, 2.0)).count, int)
    assert shards.parse(np.array([1, 2])) == shards.parse(range(1, 3)) == shards.Shard(1, 2)
    for spec in ({0: 1, 2: 3}, {0, 2}, "\u0660/\u0662", "\uff10/\uff12", (0, 2.5)):
        with pytest.raises(ValueError):
            shards.parse(spec)


def test_bad_shard_on_the_command_line(tmp_path, capsys):
    with pytest.raises(SystemExit) as exit_:
        cli.main(["run", "any.toml", "--out", str(tmp_path / "out"), "--shard", "3/2"])
    assert exit_.value.code == cli.EXIT_USAGE
    assert "argument --shard: shard must be I/N with 0 <= I < N" in capsys.readouterr().err
    assert "got 3/2" in str(pytest.raises(ValueError, shards.parse, "3/2").value)
    # a value that starts with "-" is the option's, not taken for another option
    with pytest.raises(SystemExit) as exit_:
        cli.main(["run", "any.toml", "--out", str(tmp_path / "out"), "--shard", "-1/2"])
    assert exit_.value.code == cli.EXIT_USAGE
    assert "argument --shard: shard must be I/N with integers 0 <= I < N (0-based, as SLURM_ARRAY_TASK_ID" in capsys.readouterr().err


def test_a_shard_of_another_configuration_is_refused(tmp_path, reference):
    with pytest.raises(sweep.SweepMismatchError, match=r"different sweep configuration \(changed keys: runs\)"):
        sweep.run(config(runs=7), reference, shard="1/3", progress=False)


def test_shards_starting_together_create_one_manifest(tmp_path):
    """Jobs of a job array racing on an empty directory: one creates the manifest,
    the others find the same one; a job of another configuration is refused."""
    from jaxbandit import config as config_module

    cfg = config_module.load(config())
    groups = cfg.plan()
    other = config_module.load(config(seed=6))
    start = threading.Barrier(9)
    outcomes = {}

    def job(number, which):
        start.wait()
        try:
            sweep._prepare_directory(which, which.plan() if which is other else groups, tmp_path / "out", config())
            outcomes[number] = "ok"
        except sweep.SweepMismatchError as error:
            outcomes[number] = str(error)

    threads = [threading.Thread(target=job, args=(n, other if n == 8 else cfg)) for n in range(9)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    manifest = json.loads((tmp_path / "out" / "sweep.json").read_text())
    if manifest["fingerprint"] == cfg.fingerprint():
        assert [outcomes[n] for n in range(8)] == ["ok"] * 8
        assert "different sweep configuration (changed keys: seed)" in outcomes[8]
    else:  # the other configuration won the race: every other job is refused
        assert outcomes[8] == "ok" and all("changed keys: seed" in outcomes[n] for n in range(8))
    assert files.visible_entries(tmp_path / "out") == ["sweep.json"]

    created = [files.create_exclusive_json(tmp_path / "x.json", {"n": n}) for n in range(3)]
    assert created == [True, False, False] and json.loads((tmp_path / "x.json").read_text()) == {"n": 0}
