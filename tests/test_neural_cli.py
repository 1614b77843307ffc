"""`ngramlm neural ...` through click's CliRunner: a --dry-run of every architecture, ppl, generate, errors."""
from __future__ import annotations

import json

import numpy as np
import pytest

pytest.importorskip("torch")

from click.testing import CliRunner  # noqa: E402

from corpora.errors import InputError  # noqa: E402
from neural.commands import neural_group, ppl_summary  # noqa: E402
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
    result = CliRunner().invoke(neural_group, [str(a) for a in args], catch_exceptions=True)
    return result


SMALL = ["--hidden-size", 8, "--layers", 1, "--d-model", 8, "--heads", 2, "--block-size", 16, "--batch-size", 4,
         "--no-progress"]


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
    summary = json.loads(r.output)
    assert summary["sentences"] == 10 and summary["ppl"] < len(WORDS) + 2
    r = run("ppl", out, corpus)
    assert "tokens predicted" in r.output and "perplexity" in r.output
    for strategy in ("greedy", "beam", "sample"):
        r = run("generate", out, "--prompt", "the cat", "--strategy", strategy, "--max-len", 5, "--seed", 1, "-n", 2)
        assert r.exit_code == 0, r.output + repr(r.exception)
        assert r.output.startswith("the cat") or r.output.startswith("[")
    r = run("train", corpus, "--resume", out, "--epochs", 3, *SMALL)
    assert r.exit_code == 0, r.output + repr(r.exception)
    assert "resuming" in r.output and "epoch 3" in r.output


def test_bad_inputs_are_clear_errors(corpus, tmp_path):
    r = run("train", corpus, "--model", "transformer", "--d-model", 10, "--heads", 4, "--dry-run",
            "--out", tmp_path / "x.pt", "--no-progress")
    assert isinstance(r.exception, InputError) and "does not divide" in str(r.exception)
    r = run("train", corpus, "--model", "lstm", "--emb-size", 8, "--hidden-size", 16, "--dry-run",
            "--out", tmp_path / "y.pt", "--no-progress")
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
