"""Loading a damaged sweep directory: a ValueError naming the file and what is wrong,
and a rerun of the sweep that computes the damaged group anew."""

import json
import os
import shutil
import zipfile

import numpy as np
import pytest

from jaxbandit import cli, files, io, sweep

CONFIG = {
    "seed": 0,
    "runs": 2,
    "horizon": 50,
    "times": 5,
    "instances": [{"type": "bandit", "name": "b", "mu": [1.0, 0.5]}],
    "policies": [{"name": "ucb_n"}],
}


@pytest.fixture(scope="module")
def finished(tmp_path_factory):
    """A finished sweep directory (one group, g000); tests damage copies of it."""
    out = tmp_path_factory.mktemp("finished") / "s"
    sweep.run(CONFIG, out, progress=False)
    return out


@pytest.fixture
def out(finished, tmp_path):
    copy = tmp_path / "s"
    shutil.copytree(finished, copy)
    return copy


def fingerprint(out) -> str:
    return files.read_json(out / "sweep.json")["groups"][0]["fingerprint"]


def rewrite_npz(path, recorded: bool = True, **changes) -> None:
    """Rewrite a group's arrays with ``changes`` (``None`` drops an array), and unless
    not ``recorded`` the digest its ``.json`` records (a file written wrong, not swapped)."""
    arrays = {**files.read_npz(path), **changes}
    digest = files.save_npz(path, {k: v for k, v in arrays.items() if v is not None})
    if recorded:
        meta_path = path.with_suffix(".json")
        files.save_json(meta_path, {**files.read_json(meta_path), "data_digest": digest})


def test_a_sweeps_files_take_the_mode_of_the_umask(finished, tmp_path):
    """Written through a temporary file (mkstemp would make it 0600), each record ends
    with the mode ``open`` gives it under the umask of the moment, readable by the
    group of a shared directory."""
    mask = os.umask(0o022)
    os.umask(mask)
    written = [p for p in finished.rglob("*") if p.is_file() and p.suffix in (".json", ".npz", ".toml", ".csv")]
    assert {p.name for p in written} >= {"sweep.json", "summary.csv", "g000.json", "g000.npz"}
    assert {oct(p.stat().st_mode & 0o777) for p in written} == {oct(0o666 & ~mask)}
    try:
        os.umask(0o002)
        files.save_json(tmp_path / "record.json", {"a": 1})
    finally:
        os.umask(mask)
    assert oct((tmp_path / "record.json").stat().st_mode & 0o777) == oct(0o664)


def test_a_failed_write_names_the_file_meant(tmp_path, monkeypatch):
    """A full disk fails a write with no file name, and another failure names the
    temporary file: either names the record meant, the temporary file gone."""
    import errno

    def full(fd):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(files.os, "fsync", full)
    for write in (lambda p: files.save_npz(p, {"a": np.zeros(3)}), lambda p: files.create_exclusive_json(p, {"a": 1})):
        path = tmp_path / "groups" / "g001.npz"
        with pytest.raises(OSError, match=rf"No space left on device: '{path}'") as failed:
            write(path)
        assert failed.value.errno == errno.ENOSPC and os.listdir(path.parent) == []
    monkeypatch.undo()
    (tmp_path / "out").write_text("")  # a parent that is a file: named itself
    with pytest.raises(FileExistsError, match=rf"File exists: '{tmp_path / 'out'}'$"):
        files.save_json(tmp_path / "out" / "sweep.json", {"a": 1})


def test_a_run_removes_the_temporary_files_a_killed_process_left(tmp_path, monkeypatch):
    """A write cut short by ``kill -9`` leaves its temporary file (a checkpoint's: the
    whole engine state); the next run on the directory removes those of processes of
    this host that are gone, and keeps a live process's, another user's (which cannot
    be signalled), another host's and files it did not make."""
    import subprocess
    import sys

    gone = int(subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True).stdout)
    (tmp_path / "checkpoints").mkdir()
    live = files._temporary(tmp_path / "checkpoints" / "g001.npz")  # this process's
    left = live.with_name(files._temporary(tmp_path / "checkpoints" / "g000.npz").name.replace(f".{os.getpid()}-", f".{gone}-"))
    elsewhere = tmp_path / left.name.replace(files._host_tag(), "0" * 12)
    users = tmp_path / ".notes.1-2.3.tmp"
    others = 4_000_000  # beyond Linux's PIDs: signalled, it is another user's live process
    theirs = live.with_name(left.name.replace(f".{gone}-", f".{others}-"))
    kill = os.kill

    def kill_as_a_user(pid, signum):
        if pid == others:
            raise PermissionError(1, "Operation not permitted")
        return kill(pid, signum)

    monkeypatch.setattr(files.os, "kill", kill_as_a_user)
    for path in (live, left, elsewhere, users, theirs):
        path.write_bytes(b"x")
    files.running_marker(tmp_path).unlink()
    assert not left.exists() and live.exists() and elsewhere.exists() and users.exists() and theirs.exists()


def test_intact_directory_loads(out):
    results = io.load(out)
    assert results.complete and len(results.cells) == 1
    assert io.group_finished(out, "g000", fingerprint(out))
    # shown in a notebook: a line each, the arrays left out
    assert repr(results) == f"SweepResults({str(out)!r}: 1 cell)"
    cell = repr(results.cells[0])
    assert cell.startswith("CellResult(instance=") and "\n" not in cell and "array" not in cell and "regret" not in cell


def test_truncated_group_arrays(out):
    path = out / "groups" / "g000.npz"
    path.write_bytes(path.read_bytes()[:100])
    with pytest.raises(ValueError, match=r"groups/g000\.npz is not a readable \.npz file"):
        io.load(out)
    assert not io.group_finished(out, "g000", fingerprint(out))


def test_empty_group_arrays(out):
    (out / "groups" / "g000.npz").write_bytes(b"")
    with pytest.raises(ValueError, match=r"groups/g000\.npz is not a readable \.npz file \(it is empty\)"):
        io.load(out)
    assert not io.group_finished(out, "g000", fingerprint(out))


def test_a_file_of_something_else_is_not_taken_for_a_pickle(out):
    """numpy's own error for bytes it cannot place would suggest loading a pickle."""
    (out / "groups" / "g000.npz").write_text("mu,sigma\n1,2\n")
    with pytest.raises(ValueError, match=r"g000\.npz is not a readable \.npz file \(it is not a zip archive of arrays: it starts with b'mu,sig'\)\.$"):
        io.load(out)


def test_group_arrays_lacking_an_array(out):
    rewrite_npz(out / "groups" / "g000.npz", regret=None)
    with pytest.raises(ValueError, match=r"groups/g000\.npz lacks 'regret'"):
        io.load(out)
    assert not io.group_finished(out, "g000", fingerprint(out))


def test_group_arrays_of_the_wrong_shape(out):
    path = out / "groups" / "g000.npz"
    rewrite_npz(path, counts=files.read_npz(path)["counts"][0])  # the cell axis dropped
    with pytest.raises(ValueError, match=r"groups/g000\.npz: 'counts' has shape \(2, 2\), not one row for each"):
        io.load(out)


def test_group_arrays_other_than_the_ones_recorded(out):
    """Another group's file, or another sweep's copy: its arrays may have every shape
    the group's would have, so it is told apart by the digest its ``.json`` records."""
    path = out / "groups" / "g000.npz"
    rewrite_npz(path, recorded=False, regret=files.read_npz(path)["regret"][:, ::-1])
    with pytest.raises(ValueError, match=r"groups/g000\.npz is not the file g000\.json records \(their digests differ\)"):
        io.load(out)
    assert not io.group_finished(out, "g000", fingerprint(out))


def test_a_group_of_another_computation_is_not_this_sweep_s(out):
    """A group's files whose metadata records another fingerprint (another sweep's pair,
    copied in whole, its digest intact): not finished here, so the sweep computes it."""
    meta_path = out / "groups" / "g000.json"
    files.save_json(meta_path, {**files.read_json(meta_path), "fingerprint": "0" * 64})
    assert not io.group_finished(out, "g000", fingerprint(out))
    assert io.load(out).missing == ("g000",) and not io.load(out).cells


def test_single_array_file_is_not_a_group(out):
    with open(out / "groups" / "g000.npz", "wb") as handle:
        np.save(handle, np.zeros(3))
    with pytest.raises(ValueError, match=r"g000\.npz is not a readable \.npz file \(it holds a single array\)"):
        files.read_npz(out / "groups" / "g000.npz")


def test_group_metadata_not_json(out):
    (out / "groups" / "g000.json").write_text("{not json")
    with pytest.raises(ValueError, match=r"groups/g000\.json is not a readable JSON file"):
        io.load(out)
    assert not io.group_finished(out, "g000", fingerprint(out))


def test_group_metadata_not_an_object(out):
    (out / "groups" / "g000.json").write_text("[1, 2]")
    with pytest.raises(ValueError, match=r"groups/g000\.json: the group metadata must be a JSON dict, got list"):
        io.load(out)
    assert not io.group_finished(out, "g000", fingerprint(out))


def test_missing_group_arrays_are_still_reported_missing(out):
    (out / "groups" / "g000.npz").unlink()
    assert io.load(out).missing == ("g000",)


def test_manifest_not_json(out):
    (out / "sweep.json").write_text("{not json")
    with pytest.raises(ValueError, match=r"sweep\.json is not a readable JSON file"):
        io.load(out)


@pytest.mark.parametrize(
    "damage, message",
    [
        (lambda m: m.pop("instances"), r"the manifest lacks 'instances'"),
        (lambda m: m["instances"]["b"].pop("sigma"), r"instance 'b' lacks 'sigma'"),
        (lambda m: m.update(groups={}), r"'groups' must be a JSON list, got dict"),
        (lambda m: m["groups"][0].pop("cells"), r"groups\[0\] lacks 'cells'"),
        (lambda m: m["groups"][0]["cells"][0].pop("policy"), r"groups\[0\]\.cells\[0\] lacks 'policy'"),
        (lambda m: m["instances"]["b"].update(noise="student_t(df=1)"), r"instance 'b': noise 'student_t\(df=1\)': df must be"),
    ],
)
def test_manifest_lacking_a_key_or_holding_a_bad_value(out, damage, message):
    manifest = json.loads((out / "sweep.json").read_text())
    damage(manifest)
    (out / "sweep.json").write_text(json.dumps(manifest))
    with pytest.raises(ValueError, match=r"sweep\.json: " + message):
        io.load(out)


def test_rerun_computes_a_damaged_group_anew(out, finished, caplog):
    path = out / "groups" / "g000.npz"
    path.write_bytes(path.read_bytes()[:100])
    results = sweep.run(CONFIG, out, progress=False)
    assert results.complete
    assert any(str(path) in r.getMessage() and r.levelname == "WARNING" for r in caplog.records)  # the user is told
    expected = files.read_npz(finished / "groups" / "g000.npz")
    actual = files.read_npz(path)
    assert sorted(actual) == sorted(expected)
    for name in expected:
        np.testing.assert_array_equal(actual[name], expected[name], err_msg=name)


def test_a_group_whose_array_fails_its_checksum_is_computed_anew(out, finished):
    """One flipped bit in an array's bytes (the archive itself intact): not finished, so
    that a rerun computes the group anew rather than skipping it for ever."""
    path = out / "groups" / "g000.npz"
    data = bytearray(path.read_bytes())
    with zipfile.ZipFile(path) as archive:
        info = archive.getinfo("regret.npy")
    offset = info.header_offset
    start = offset + 30 + int.from_bytes(data[offset + 26 : offset + 28], "little") + int.from_bytes(data[offset + 28 : offset + 30], "little")
    data[start + info.compress_size - 1] ^= 1  # the last byte of the member's data
    path.write_bytes(bytes(data))
    fingerprint = files.read_json(out / "groups" / "g000.json")["fingerprint"]
    assert not io.group_finished(out, "g000", fingerprint)
    assert sweep.run(CONFIG, out, progress=False).complete
    np.testing.assert_array_equal(files.read_npz(path)["regret"], files.read_npz(finished / "groups" / "g000.npz")["regret"])


def test_a_finished_group_s_stale_checkpoint_is_removed(out):
    """A run stopped after a group's results, before it removed the group's checkpoint:
    the next run skips the group and removes it."""
    stale = io.checkpoint_file(out, "g000")
    stale.parent.mkdir(exist_ok=True)
    stale.write_bytes(b"")
    assert sweep.run(CONFIG, out, progress=False).complete
    assert not stale.exists()


def test_cli_reports_a_damaged_directory(out, capsys):
    (out / "groups" / "g000.npz").write_bytes(b"")
    assert cli.main(["plot", str(out)]) != 0
    assert "g000.npz is not a readable .npz file" in capsys.readouterr().err


def test_results_of_a_family_no_longer_simulated_still_load(out):
    """Student's t at df = 2.2 is refused for new simulations (its draws miss 7% of the
    variance), not when results recorded with it are read back."""
    manifest = json.loads((out / "sweep.json").read_text())
    manifest["instances"]["b"]["noise"] = "student_t(df=2.2)"
    (out / "sweep.json").write_text(json.dumps(manifest))
    assert {c.noise for c in io.load(out).cells if c.instance == "b"} == {"student_t(df=2.2)"}
