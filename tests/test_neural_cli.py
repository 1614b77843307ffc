"""`ngramlm neural ...` through click's CliRunner: a --dry-run of every architecture, ppl, generate, errors."""
from __future__ import annotations

import json

import numpy as np
import pytest

pytest.importorskip("torch").set_num_threads(1)  # tiny models: one thread is fastest

from click.testing import CliRunner  # noqa: E402

from corpora.errors import InputError  # noqa: E402
from neural.commands.lm import neural_group  # noqa: E402
from neural.scoring import ppl_summary  # noqa: E402
from neural.sniff import is_checkpoint  # noqa: E402

WORDS = "the a cat dog sat ran on under mat log and then big small red".split()


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    rng = np.random.default_rng(0)
    path = tmp_path_factory.mktemp("corpus") / "tiny.txt"
    lines = [" ".join(WORDS[i] for i in rng.integers(0, len(WORDS), rng.integers(3, 9))) for _ in range(200)]
    path.write_text("\n".join(lines) + "\n")
    return path


def run(*args):
    args = [str(a) for a in args]
    if args[0] in ("ppl", "generate"):
        args += ["--threads", "1"]
    return CliRunner().invoke(neural_group, args, catch_exceptions=True)


SMALL = ["--hidden-size", 8, "--layers", 1, "--d-model", 8, "--heads", 2, "--block-size", 16, "--batch-size", 4,
         "--no-progress", "--threads", 1]


@pytest.mark.parametrize("model,impl", [("lstm", "fused"), ("gru", "fused"), ("rnn_tanh", "fused"),
                                        ("rnn_relu", "fused"), ("transformer", "fused"), ("lstm", "scratch"),
                                        ("gru", "scratch"), ("transformer", "scratch")])
def test_dry_run_every_architecture(corpus, tmp_path, model, impl):
    out = tmp_path / f"{model}.pt"
    r = run("train", corpus, "--model", model, "--impl", impl, "--dry-run", "--out", out, *SMALL)
    assert r.exit_code == 0, r.output + repr(r.exception)
    assert "stopped: max_batches" in r.output and "test:" in r.output
    assert is_checkpoint(out)


def test_train_ppl_generate_and_resume(corpus, tmp_path):
    out = tmp_path / "m.pt"
    r = run("train", corpus, "--model", "lstm", "--epochs", 2, "--out", out, "--lr", 5, *SMALL)
    assert r.exit_code == 0, r.output + repr(r.exception)
    assert "best valid ppl" in r.output
    s = ppl_summary(out, str(corpus), threads=None)
    assert s["tokens_predicted"] == s["words"] + s["sentences"]
    assert s["sentences"] == 200  # a text file is scored whole
    r = run("ppl", out, "--json")  # default: the training corpus's test split
    assert r.exit_code == 0, r.output + repr(r.exception)
    summary = json.loads(r.stdout)
    assert summary["sentences"] == 10 and summary["ppl"] < len(WORDS) + 2
    r = run("ppl", out, corpus)
    # The same summary format as an n-gram model's `ngramlm ppl` (KenLM/SRILM style).
    assert "Tokens predicted:" in r.output and "Perplexity including OOVs:" in r.output and "ppl1=" in r.output
    r = CliRunner().invoke(neural_group, ["ppl", str(out), "-", "--json", "--threads", "1"], input="the cat sat\nzzz a\n")
    assert r.exit_code == 0, r.output + repr(r.exception)
    stdin_summary = json.loads(r.stdout)
    assert stdin_summary["sentences"] == 2 and stdin_summary["oovs"] == 1 and stdin_summary["tokens_predicted"] == 7
    for strategy in ("greedy", "beam", "sample"):
        r = run("generate", out, "--prompt", "the cat", "--strategy", strategy, "--max-len", 5, "--seed", 1, "-n", 2)
        assert r.exit_code == 0, r.output + repr(r.exception)
        assert r.output.startswith("the cat") or r.output.startswith("[")
    r = run("train", "--resume", out, "--epochs", 3, *SMALL)  # the corpus comes from the checkpoint
    assert r.exit_code == 0, r.output + repr(r.exception)
    assert "resuming" in r.output and "epoch 3" in r.output


def test_bad_inputs_are_clear_errors(corpus, tmp_path):
    r = run("train", corpus, "--model", "transformer", "--d-model", 10, "--heads", 4, "--dry-run",
            "--out", tmp_path / "x.pt", "--no-progress", "--threads", 1)
    assert isinstance(r.exception, InputError) and "does not divide" in str(r.exception)
    r = run("train", corpus, "--model", "lstm", "--emb-size", 8, "--hidden-size", 16, "--dry-run",
            "--out", tmp_path / "y.pt", "--no-progress", "--threads", 1)
    assert isinstance(r.exception, InputError) and "tied weights" in str(r.exception)
    junk = tmp_path / "junk.pt"
    junk.write_bytes(b"\x80\x04K\x01.")
    r = run("ppl", junk, corpus)
    assert isinstance(r.exception, InputError) and "pickle" in str(r.exception)
    # resuming on a different vocabulary
    out = tmp_path / "v.pt"
    assert run("train", corpus, "--dry-run", "--out", out, *SMALL).exit_code == 0
    other = tmp_path / "other.txt"
    other.write_text("\n".join("x y z w" for _ in range(100)) + "\n")
    r = run("train", other, "--resume", out, *SMALL)
    assert isinstance(r.exception, InputError) and "another vocabulary" in str(r.exception)
    r = run("train", corpus, "--resume", out, "--model", "gru", *SMALL)
    assert isinstance(r.exception, InputError) and "not gru" in str(r.exception)


def test_sigterm_stops_after_the_batch_and_leaves_a_resumable_checkpoint(corpus, tmp_path):
    import signal
    import subprocess
    import sys
    import time
    from pathlib import Path

    from neural.checkpoint import load_checkpoint

    out = tmp_path / "s.pt"
    repo = Path(__file__).resolve().parents[1]
    cmd = [sys.executable, "-c", "import sys; from cli import main; main(sys.argv[1:])", "neural", "train",
           str(corpus), "--epochs", "100000", "--patience", "0", "--out", str(out), *map(str, SMALL)]
    proc = subprocess.Popen(cmd, cwd=repo, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 60
        while not out.exists() and time.monotonic() < deadline and proc.poll() is None:
            time.sleep(0.1)
        assert out.exists(), proc.stderr.read() if proc.poll() is not None else "no checkpoint after 60 s"
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 130, err  # interrupted runs exit 130 (the shell's convention for a signal)
    assert "stopped: interrupted" in err and "--resume" in err
    ckpt = load_checkpoint(out)
    assert ckpt["train"]["position"]["epoch"] >= 1
