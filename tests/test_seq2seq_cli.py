"""``ngramlm seq2seq train | ppl | translate`` end to end on a small TSV of pairs (and fra-eng when present)."""
from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("sacrebleu")


SMALL = ["--emb-size", "16", "--hidden-size", "16", "--attn-size", "16", "--layers", "1", "--no-progress"]


def test_train_ppl_translate_and_resume(run_cli, pairs_tsv, tmp_path):
    out = tmp_path / "m.pt"
    code, stdout, err = run_cli("seq2seq", "train", str(pairs_tsv), *SMALL, "--epochs", "2", "-o", out, "--json")
    assert code == 0, err
    summary = json.loads(stdout)
    assert summary["architecture"] == "seq2seq-attn-gru" and summary["epochs"] == 2.0
    test = summary["test"]
    assert test["pairs"] == 30 and test["ppl"] > 1.0  # 10 % of 300 pairs
    assert "tok:none" in summary["bleu"]["signature"]
    # ppl on the recorded corpus and split gives the number the training run printed.
    code, stdout, err = run_cli("seq2seq", "ppl", out, "--json")
    assert code == 0, err
    best = json.loads(stdout)
    assert best["tokens"] == test["tokens"] and best["ppl"] == pytest.approx(test["ppl"], rel=1e-6)
    # translate: stdin, n-best with scores, and a split with BLEU.
    code, stdout, err = run_cli("seq2seq", "translate", out, "--beam-size", "3", "-n", "2", input="a b c .\nf e .\n")
    assert code == 0, err
    lines = stdout.splitlines()
    assert len(lines) == 4 and all("\t" in line for line in lines)
    code, stdout, err = run_cli("seq2seq", "translate", out, "--split", "test", "--json")
    assert code == 0, err
    res = json.loads(stdout)
    assert len(res["sentences"]) == 30 and 0.0 <= res["bleu"] <= 100.0
    # Resume continues the recorded run (same corpus and split) for one more epoch.
    code, stdout, err = run_cli("seq2seq", "train", "--resume", out, "--epochs", "3", "--no-progress", "--json")
    assert code == 0, err
    assert json.loads(stdout)["epochs"] == 3.0 and "resuming" in err


def test_bad_options_and_files(run_cli, pairs_tsv, tmp_path):
    code, _, err = run_cli("seq2seq", "train", str(pairs_tsv), *SMALL, "--layers", "0", "-o", tmp_path / "x.pt")
    assert code == 2 and "--layers" in err and not (tmp_path / "x.pt").exists()
    bad = tmp_path / "bad.tsv"
    bad.write_text("a b\tc d\nno tab here\n", encoding="utf-8")
    code, _, err = run_cli("seq2seq", "train", str(bad), *SMALL, "-o", tmp_path / "y.pt")
    assert code == 2 and "bad.tsv:2" in err
    code, _, err = run_cli("seq2seq", "ppl", tmp_path / "missing.pt")
    assert code == 2 and "missing.pt" in err


@pytest.mark.skipif(not (Path(os.environ.get("NGRAMLM_TEST_CORPORA", "../shared/corpora")) / "fra-eng"
                         / "fra-eng.tsv").exists(),
                    reason="real corpora not found: fra-eng (set NGRAMLM_TEST_CORPORA)")
def test_dry_run_on_fra_eng(run_cli, tmp_path):
    data = os.environ.get("NGRAMLM_TEST_CORPORA", "../shared/corpora")
    code, stdout, err = run_cli("seq2seq", "train", "fra-eng", "--data-dir", data, "--dry-run", *SMALL,
                                "-o", tmp_path / "f.pt", "--json")
    assert code == 0, err
    assert "4,000 training pairs" in err and json.loads(stdout)["steps"] == 1
