"""Writes that never lose work, one-line errors instead of tracebacks, honest budgets and precision.

Everything here runs on the embedded toy corpus or on tiny generated texts: no real corpora.
"""
from __future__ import annotations

import errno
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from conftest import REPORT, needs

from corpora.textio import (OutputError, atomic_write_bytes, atomic_writer, check_writable, stale_temp_files,
                            sweep_stale_temp_files)

REPO = Path(__file__).resolve().parents[1]


def _dead_pid() -> int:
    """A pid no process has (so a temp file named with it is a left-over)."""
    pid = 4_000_000
    while True:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return pid
        except PermissionError:
            pass
        pid += 1


# ---------------------------------------------------------------------------- the atomic writer
def test_atomic_write_honours_the_umask(tmp_path):
    old = os.umask(0o027)
    try:
        atomic_write_bytes(tmp_path / "m.bin", b"x")
    finally:
        os.umask(old)
    assert (tmp_path / "m.bin").stat().st_mode & 0o777 == 0o640  # not mkstemp's 0600
    old = os.umask(0o022)
    try:
        atomic_write_bytes(tmp_path / "n.bin", b"x")
    finally:
        os.umask(old)
    assert (tmp_path / "n.bin").stat().st_mode & 0o777 == 0o644


def test_a_failed_write_keeps_the_old_file_and_leaves_no_temp(tmp_path, monkeypatch):
    target = tmp_path / "model.npz"
    atomic_write_bytes(target, b"old")

    def full_disk(fd):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(os, "fsync", full_disk)
    with pytest.raises(OutputError) as info:
        atomic_write_bytes(target, b"new and longer")
    msg = str(info.value)
    assert "\n" not in msg and str(target) in msg and "No space left" in msg and "free space" in msg
    assert target.read_bytes() == b"old"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["model.npz"]


def test_an_exception_inside_the_write_removes_the_temp(tmp_path):
    with pytest.raises(KeyboardInterrupt):
        with atomic_writer(tmp_path / "a.bin") as fh:
            fh.write(b"half")
            raise KeyboardInterrupt
    assert list(tmp_path.iterdir()) == []


def test_stale_temp_files_of_dead_writers_are_removed_by_the_next_write(tmp_path):
    target = tmp_path / "m.npz"
    stale = tmp_path / f".m.npz.{_dead_pid()}.abcd.tmp"
    live = tmp_path / f".m.npz.{os.getpid()}.efgh.tmp"  # a write in progress: must survive
    other = tmp_path / ".other.npz.1.x.tmp"
    for p in (stale, live, other):
        p.write_bytes(b"x")
    assert stale_temp_files(target) == [stale]
    atomic_write_bytes(target, b"y")
    assert not stale.exists() and live.exists() and other.exists()


def test_sweep_removes_stale_temps_in_a_run_folder(tmp_path):
    (tmp_path / "cache").mkdir()
    stale = tmp_path / "cache" / f".k.pt.{_dead_pid()}.zz.tmp"
    live = tmp_path / f".results.json.{os.getpid()}.zz.tmp"
    stale.write_bytes(b"x")
    live.write_bytes(b"x")
    assert sweep_stale_temp_files(tmp_path) == 1
    assert not stale.exists() and live.exists()


def test_kill_9_during_a_model_write_leaves_a_temp_the_next_write_removes(tmp_path):
    target = tmp_path / "big.npz"
    code = ("import sys, time; from corpora.textio import atomic_writer\n"
            "with atomic_writer(sys.argv[1]) as fh:\n"
            "    fh.write(b'x' * 1000); fh.flush(); print('writing', flush=True); time.sleep(60)\n")
    proc = subprocess.Popen([sys.executable, "-c", code, str(target)], cwd=REPO, stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout.readline().strip() == "writing"
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
    left = [p for p in tmp_path.iterdir()]
    assert len(left) == 1 and left[0].name.endswith(".tmp") and not target.exists()  # what kill -9 leaves
    atomic_write_bytes(target, b"done")
    assert [p.name for p in tmp_path.iterdir()] == ["big.npz"]


def test_check_writable_refuses_before_any_work(tmp_path):
    (tmp_path / "afile").write_text("x")
    with pytest.raises(OutputError, match="a part of the path is a file"):
        check_writable(tmp_path / "afile" / "m.npz")
    with pytest.raises(OutputError, match="is a directory"):
        check_writable(tmp_path)
    # create_parents=False probes without leaving a folder behind
    check_writable(tmp_path / "new" / "deeper" / "results.json", create_parents=False)
    assert not (tmp_path / "new").exists()


def test_devices_are_written_in_place_not_replaced(tmp_path):
    atomic_write_bytes("/dev/null", b"x")
    assert Path("/dev/null").is_char_device()


# ---------------------------------------------------------------------------- the command line
def _one_line_error(code, out, err, *needles):
    assert code != 0
    assert "Traceback" not in err and "Traceback" not in out
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith("Error:"), err
    for n in needles:
        assert n in lines[0], (n, err)


@needs(*REPORT)
def test_write_failures_are_one_line_errors(run_cli, tmp_path):
    blocker = tmp_path / "afile"
    blocker.write_text("x")
    model = tmp_path / "m.npz"
    assert run_cli("train", "toy", "-o", model, "--order", "2")[0] == 0
    _one_line_error(*run_cli("train", "toy", "-o", blocker / "m.npz", "--order", "2"), str(blocker / "m.npz"), "fix:")
    _one_line_error(*run_cli("export-arpa", model, blocker / "m.arpa"), "m.arpa", "fix:")
    _one_line_error(*run_cli("import-arpa", model, blocker / "m2.npz"), "m2.npz")
    _one_line_error(*run_cli("ppl", tmp_path, "toy"), "is a directory")
    _one_line_error(*run_cli("compare", "--quick", "--out", blocker / "run"), "results.json")


@needs("torch")
def test_neural_train_checks_its_output_before_training(run_cli, tmp_path):
    blocker = tmp_path / "afile"
    blocker.write_text("x")
    t0 = time.perf_counter()
    code, out, err = run_cli("neural", "train", "toy", "--out", blocker / "x.pt", "--epochs", "50")
    _one_line_error(code, out, err, "x.pt")
    assert time.perf_counter() - t0 < 20  # refused before the corpus was even loaded


@needs("torch")
def test_a_trained_model_whose_out_cannot_be_written_is_rescued(run_cli, tmp_path, monkeypatch):
    import neural.training.trainer as train_mod

    monkeypatch.chdir(tmp_path)
    out = tmp_path / "keep" / "m.pt"
    real = train_mod.atomic_write_bytes

    def failing(path, data):  # the destination's disk fills up during training
        if Path(path).parent == out.parent:
            raise OutputError("cannot write: No space left on device", path=path, fix="free space")
        return real(path, data)

    monkeypatch.setattr(train_mod, "atomic_write_bytes", failing)
    code, _, err = run_cli("neural", "train", "toy", "--out", out, "--dry-run", "--hidden-size", "16",
                           "--no-progress", "--threads", "1")
    assert code == 1, err
    rescued = tmp_path / "runs" / "rescued" / "m.pt"
    assert rescued.is_file() and str(rescued.relative_to(tmp_path)) in err.replace(str(tmp_path) + "/", "")
    from neural.checkpoint import load_model

    load_model(rescued)  # a complete, loadable checkpoint
    assert not out.exists()


def test_stdin_gets_the_same_text_checks_as_a_file(run_cli, tmp_path):
    model = tmp_path / "m.npz"
    assert run_cli("train", "toy", "-o", model, "--order", "2")[0] == 0
    _one_line_error(*run_cli("ppl", model, "-", input=b"a b\n\xff\xfe\n"), "<stdin>:2", "UTF-8")
    _one_line_error(*run_cli("ppl", model, "-", input=b""), "<stdin>", "empty")
