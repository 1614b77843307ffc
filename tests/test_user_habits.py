"""Habits a new user brings, each with the right answer or a one-line refusal (issue: installs anywhere).

Every test here failed on the behaviour before the fix it covers; the comment says what happened then.
"""
from __future__ import annotations

import importlib.util
import json
import re
from pathlib import Path

import pytest

from conftest import REPORT, needs

REPO = Path(__file__).resolve().parent.parent


@pytest.fixture
def toy_model(run_cli, tmp_path):
    model = tmp_path / "toy2.npz"
    code, _, err = run_cli("train", "toy", "--order", "2", "-o", model)
    assert code == 0, err
    return model


# ----------------------------------------------------------------------------- SRILM's one-dash flags
@pytest.mark.parametrize("args", [("-order5",), ("-order", "5"), ("-order=5",)])
def test_srilm_order_flag_is_refused_with_the_spelling(run_cli, tmp_path, monkeypatch, args):
    # Before: `-order5` read as `-o rder5`, exit 0 and a model file named "rder5".
    monkeypatch.chdir(tmp_path)
    code, _, err = run_cli("train", "toy", *args)
    assert code == 2, err
    assert "did you mean --order 5?" in err
    assert list(tmp_path.iterdir()) == []


def test_srilm_flag_after_the_corpus_and_in_a_sub_command(run_cli, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    code, _, err = run_cli("train", "toy", "-o", "m.npz", "-order", "3")
    assert code == 2 and "did you mean --order 3?" in err
    assert not (tmp_path / "m.npz").exists()
    code, _, err = run_cli("infini", "build", "toy", "-output", "x.npz")
    assert code == 2 and "did you mean --output x.npz?" in err
    code, _, err = run_cli("ppl", "m.npz", "-lm", "x")
    assert code == 2 and "SRILM" in err and "MODEL argument" in err


def test_ordinary_short_options_and_negative_numbers_still_work(run_cli, tmp_path, toy_model):
    code, out, err = run_cli("generate", toy_model, "-n", "2", "--max-len", "4", "--seed", "3")
    assert code == 0 and len(out.strip().splitlines()) == 2, err
    code, out, err = run_cli("train", "toy", "--order", "1", f"-o{tmp_path / 'attached.npz'}")
    assert code == 0 and (tmp_path / "attached.npz").is_file(), err


# ----------------------------------------------------------------------------- '-' as an output
@pytest.mark.parametrize("args", [
    ("infini", "build", "toy", "-o", "-"),
    ("import-arpa", "{arpa}", "-"),
    ("import-arpa", "{arpa}", "-o", "-"),
])
def test_dash_is_refused_for_binary_outputs(run_cli, tmp_path, monkeypatch, toy_model, args):
    # Before: binary .npz bytes were dumped to the terminal.
    arpa = tmp_path / "m.arpa"
    assert run_cli("export-arpa", toy_model, arpa)[0] == 0
    monkeypatch.chdir(tmp_path)
    code, out, err = run_cli(*[a.format(arpa=arpa) for a in args])
    assert code == 1, err
    assert "'-' (standard output) cannot take" in err and "give a file name" in err
    assert out == "" and not (tmp_path / "-").exists()


def test_dash_is_refused_for_a_checkpoint(run_cli, tmp_path, monkeypatch):
    # Before: the checkpoint went to stdout *and* to a file named "-.best.pt".
    pytest.importorskip("torch")
    monkeypatch.chdir(tmp_path)
    code, out, err = run_cli("neural", "train", "toy", "--out", "-", "--dry-run", "--no-progress")
    assert code == 1, err
    assert "cannot take a checkpoint" in err
    assert out == "" and sorted(p.name for p in tmp_path.iterdir()) == []


@needs(*REPORT)
def test_dash_is_refused_as_a_report_folder(run_cli, tmp_path, monkeypatch):
    # Before: a folder named "-".
    monkeypatch.chdir(tmp_path)
    code, _, err = run_cli("compare", "toy", "--quick", "--neural", "none", "--out", "-")
    assert code == 2 and "cannot be a report folder" in err
    assert list(tmp_path.iterdir()) == []


def test_out_and_o_on_every_writing_command(run_cli, tmp_path, toy_model):
    # Before: --out was refused by train, infini build and vocab build.
    assert run_cli("train", "toy", "--order", "1", "--out", tmp_path / "a.npz")[0] == 0
    assert run_cli("vocab", "build", "toy", "--out", tmp_path / "v.json")[0] == 0
    assert run_cli("infini", "build", "toy", "--out", tmp_path / "i.npz")[0] == 0
    assert run_cli("export-arpa", toy_model, "--out", tmp_path / "e.arpa")[0] == 0
    assert run_cli("import-arpa", tmp_path / "e.arpa", "-o", tmp_path / "b.npz")[0] == 0
    for name in ("a.npz", "v.json", "i.npz", "e.arpa", "b.npz"):
        assert (tmp_path / name).stat().st_size > 0, name
    code, _, err = run_cli("export-arpa", toy_model, tmp_path / "x.arpa", "-o", tmp_path / "y.arpa")
    assert code == 2 and "two outputs" in err


def test_an_unwritable_output_exits_1_as_documented(run_cli, tmp_path):
    # Before: status 2, where README and docs say 1 for I/O.
    blocker = tmp_path / "file"
    blocker.write_text("x")
    code, _, err = run_cli("train", "toy", "--order", "1", "-o", blocker / "m.npz")
    assert code == 1 and str(blocker) in err and "fix:" in err
    code, _, err = run_cli("train", "no-such-corpus", "-o", tmp_path / "m.npz")
    assert code == 2  # bad input stays 2


# ----------------------------------------------------------------------------- neural --epochs 0
def test_epochs_zero_is_refused(run_cli, tmp_path):
    # Before: `--epochs 0` trained the default 40 epochs.
    pytest.importorskip("torch")
    code, _, err = run_cli("neural", "train", "toy", "--epochs", "0", "--out", tmp_path / "m.pt")
    assert code == 2 and "--epochs" in err and "0 is not in the range x>=1" in err
    assert not (tmp_path / "m.pt").exists()
    code, _, err = run_cli("seq2seq", "train", "--epochs", "0", "--out", tmp_path / "s.pt")
    assert code == 2 and "--epochs" in err


# ----------------------------------------------------------------------------- the ppl summary
_SUMMARY = re.compile(r"^(\d+) zeroprobs, logprob= (-?\d+\.\d+) ppl= (\d+\.\d+) ppl1= (\d+\.\d+)$", re.M)


def test_ppl_summary_numbers_parse_like_srilm(run_cli, toy_model):
    # Before: "logprob= -19,313.68": thousands separators break every SRILM-style parser.
    code, out, err = run_cli("ppl", toy_model, "toy")
    assert code == 0, err
    m = _SUMMARY.search(out)
    assert m, out
    full = json.loads(run_cli("ppl", toy_model, "toy", "--json")[1])
    assert abs(float(m.group(2)) - full["log10_prob"]) < 0.006 and abs(full["log10_prob"]) > 1000
    assert abs(float(m.group(3)) - full["ppl"]) < 0.006
    assert re.search(r"^file toy:test: \d+ sentences, \d+ words, \d+ OOVs$", out, re.M), out
    assert not re.search(r"\d,\d", out)


def test_a_text_of_unknown_words_is_warned_about(run_cli, tmp_path, toy_model):
    # Before: a perplexity without a word of warning, although every word was OOV.
    text = tmp_path / "unknown.txt"
    text.write_text("zyzzyva quux blorp\nfrobnicate wibble\n")
    code, out, err = run_cli("ppl", toy_model, text)
    assert code == 0, err
    assert "Warning: 5 of 5 words (100 %) are out of vocabulary and scored as <unk>" in out
    assert "never occurred in training" in out
    d = json.loads(run_cli("ppl", toy_model, text, "--json")[1])
    assert d["oovs"] == 5 and "out of vocabulary" in d["warning"]
    known = tmp_path / "known.txt"
    known.write_text(" ".join(json.loads(run_cli("vocab", "build", "toy", "-o", "-")[1])["itos"][4:10]) + "\n")
    code, out, _ = run_cli("ppl", toy_model, known)
    assert code == 0 and "Warning" not in out


def test_ptb_unk_is_a_training_word_and_the_warning_says_so(run_cli, tmp_path, shared_corpora):
    model = tmp_path / "ptb2.npz"
    assert run_cli("train", "ptb", "--data-dir", shared_corpora, "--order", "2", "-o", model)[0] == 0
    text = tmp_path / "unknown.txt"
    text.write_text("zyzzyva quux blorp wibble\n" * 3)
    code, out, _ = run_cli("ppl", model, text)
    assert code == 0 and "Warning: 12 of 12 words (100 %)" in out
    assert "the training text itself contains <unk> as a word" in out


# ----------------------------------------------------------------------------- docs that were not true
def test_corpora_list_names_the_environment_variable(run_cli, tmp_path, monkeypatch):
    # Before: "(from --data-dir)" when the folder came from NGRAMLM_DATA_DIR.
    monkeypatch.setenv("NGRAMLM_DATA_DIR", str(tmp_path))
    code, out, _ = run_cli("corpora", "list")
    assert code == 0 and "(from $NGRAMLM_DATA_DIR)" in out and "--data-dir" not in out.split("\n")[0]
    code, out, _ = run_cli("corpora", "list", "--data-dir", tmp_path)
    assert code == 0 and "(from --data-dir)" in out
    assert "fra-eng" in out


def test_generate_samples_from_a_checkpoint(run_cli, tmp_path):
    # Before: `generate --help` said it takes checkpoints, and then it refused them.
    pytest.importorskip("torch")
    ckpt = tmp_path / "lm.pt"
    code, _, err = run_cli("neural", "train", "toy", "--dry-run", "--no-progress", "--out", ckpt)
    assert code == 0, err
    code, out, err = run_cli("generate", ckpt, "-n", "3", "--max-len", "6", "--seed", "2")
    assert code == 0, err
    lines = out.strip().splitlines()
    assert len(lines) == 3 and all(1 <= len(line.split()) <= 6 for line in lines)
    again = run_cli("generate", ckpt, "-n", "3", "--max-len", "6", "--seed", "2")[1]
    assert again == out  # seeded


# ----------------------------------------------------------------------------- one writer per folder
@needs(*REPORT)
def test_a_second_compare_into_a_locked_folder_is_refused(run_cli, tmp_path):
    # Before: two runs both passed the "non-empty folder" check and wrote one folder together.
    from corpora.textio import FolderBusy, folder_lock

    out = tmp_path / "run"
    with folder_lock(out, what="test holder"):
        code, _, err = run_cli("compare", "toy", "--quick", "--neural", "none", "--out", out)
        assert code == 2 and "is writing this folder" in err and "pid" in err
        assert not out.exists()
        with pytest.raises(FolderBusy):
            with folder_lock(out):
                pass
    assert not (tmp_path / ".run.lock").exists()  # released and removed
    with folder_lock(out):  # free again
        pass


def test_folder_lock_is_held_by_a_process_and_dies_with_it(tmp_path):
    import subprocess
    import sys
    import time

    from corpora.textio import FolderBusy, folder_lock

    code = ("import sys, time; sys.path.insert(0, %r); from corpora.textio import folder_lock\n"
            "with folder_lock(%r):\n    print('locked', flush=True); time.sleep(30)\n") % (str(REPO), str(tmp_path / "o"))
    proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout.readline().strip() == "locked"
        with pytest.raises(FolderBusy, match=f"pid {proc.pid}"):
            with folder_lock(tmp_path / "o"):
                pass
    finally:
        proc.kill()
        proc.wait()
    t0 = time.time()
    with folder_lock(tmp_path / "o"):  # the kill released it; the stale file is reused
        assert time.time() - t0 < 5


# ----------------------------------------------------------------------------- the benchmark's probe
def test_bench_neural_skips_emulated_bf16_at_once(monkeypatch):
    # Before: twelve 2048^3 bf16 products, emulated at ~0.3 GFLOP/s: over ten minutes of silence.
    pytest.importorskip("torch")
    spec = importlib.util.spec_from_file_location("bench_neural", REPO / "benchmarks" / "bench_neural.py")
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    import neural.precision

    monkeypatch.setattr(neural.precision, "native_bf16", lambda: False)
    said = []
    p = bench.measure_peak(1, n=256, reps=2, say=said.append)
    assert p["fp32"] > 0 and p["bf16"] is None
    assert any("bf16: skipped" in s and "no native bf16" in s for s in said)


def test_reports_name_paths_relative_to_the_reader(tmp_path, monkeypatch):
    # Before: a committed report named the absolute path of the checkout it ran in (.../runs/bench/ptb-lstm.pt).
    import os

    from corpora.textio import shown_path

    monkeypatch.chdir(tmp_path)
    assert shown_path(tmp_path / "runs" / "lstm.pt") == os.path.join("runs", "lstm.pt")
    assert shown_path("runs/lstm.pt") == "runs/lstm.pt"
    (tmp_path / "work").mkdir()
    monkeypatch.chdir(tmp_path / "work")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert shown_path(tmp_path / "home" / "m.pt") == "~/m.pt"
    assert shown_path("/elsewhere/m.pt") == "/elsewhere/m.pt"  # nothing to shorten it by
