"""``ngramlm compare`` on a parallel corpus: every model scores the same target tokens; BLEU grid;
attention heatmap with the temperature slider; re-rendering with ``ngramlm report``."""
from __future__ import annotations

import json
import math
import os
import subprocess

import pytest

from conftest import check_attention_rows, write_reversal_pairs

pytest.importorskip("torch")
pytest.importorskip("sacrebleu")
pytest.importorskip("jinja2")

CHROMIUM = "/usr/bin/chromium"  # where CI installs it; without it the browser check is left out


@pytest.mark.slow
def test_compare_on_a_tsv_of_pairs_scores_every_model_on_the_same_target_tokens(run_cli, tmp_path):
    tsv = write_reversal_pairs(tmp_path / "rev.tsv", n=400, seed=0)
    out = tmp_path / "cmp"
    code, stdout, err = run_cli("compare", str(tsv), "--quick", "--out", out, "--smoothers", "mkn,wb",
                                "--neural", "lstm", "--beams", "1,3")
    assert code == 0, err
    res = json.loads((out / "results.json").read_text("utf-8"))
    assert res["format"] == "ngramlm.compare.parallel" and res["status"] == "complete"
    sizes = res["corpus"]["sizes"]
    assert sizes["train"]["pairs"] + sizes["valid"]["pairs"] + sizes["test"]["pairs"] == 400
    want = sizes["test"]["tgt_tokens"] + sizes["test"]["pairs"]  # every target word and </s>
    by_id = {r["id"]: r for r in res["rows"]}
    assert {"seq2seq", "seq2seq-attn", "lstm", "mkn-3", "wb-1"} <= set(by_id)
    for r in res["rows"]:
        assert r["test"]["tokens"] == want, r["id"]
        assert r["test"]["ppl"] > 1.0 and math.isfinite(r["test"]["ppl"])
    assert by_id["seq2seq-attn"]["conditional"] and "conditional" not in by_id["mkn-3"]
    # BLEU: greedy, then beam 3 with and without length normalisation, per translator.
    grid = {(b["model"], b["beam"], b["alpha"]) for b in res["bleu"] if not b.get("fusion")}
    assert grid == {(m, k, a) for m in ("seq2seq", "seq2seq-attn") for k, a in ((1, 0.0), (3, 0.0), (3, 0.7))}
    # Shallow fusion with the target-side n-gram of the best valid ppl: greedy and the widest beam, the
    # weight tuned per translator by greedy BLEU on valid (0 = the translator alone is among the choices).
    fused = [b for b in res["bleu"] if b.get("fusion")]
    assert {(b["model"], b["beam"], b["alpha"]) for b in fused} == {
        (m, k, a) for m in ("seq2seq", "seq2seq-attn") for k, a in ((1, 0.0), (3, 0.7))}
    best_ngram = min((r for r in res["rows"] if r.get("family") == "ngram" and r["settings"]["order"] >= 2),
                     key=lambda r: r["valid"]["ppl"])
    assert res["fusion"]["smoother"] == best_ngram["settings"]["smoother"]
    assert res["fusion"]["order"] == best_ngram["settings"]["order"]
    for b in fused:
        assert set(b["valid_by_weight"]) == {"0", "0.1", "0.2", "0.3", "0.5"}
        chosen = max(b["valid_by_weight"].items(), key=lambda kv: (kv[1], -float(kv[0])))  # ties: the smaller
        assert b["lm_weight"] == float(chosen[0])
        assert b["valid_bleu"] == max(b["valid_by_weight"].values())
        if b["lm_weight"] == 0.0:  # the translator alone: the plain row's BLEU
            alone = next(a for a in res["bleu"] if not a.get("fusion") and a["model"] == b["model"]
                         and a["beam"] == b["beam"] and a["alpha"] == b["alpha"])
            assert b["bleu"] == alone["bleu"]
    assert all("tok:none" in b["signature"] and 0.0 <= b["bleu"] <= 100.0 for b in res["bleu"])
    # Attention matrices: rows are the target tokens + </s>, columns the source tokens + </s>; each row sums to 1.
    check_attention_rows(res["attention"])
    md = (out / "report.md").read_text("utf-8")
    html = (out / "report.html").read_text("utf-8")
    assert "reads the source" in md and "| Seq2Seq + attention (tiny) | yes |" in md
    assert "| greedy + n-gram | - |" in md and "shallow fusion" in md  # greedy search has no α
    assert 'id="s2s-temp"' in html and html.count("<noscript>") == len(res["attention"])
    assert (out / "plots" / "attention_1.png").stat().st_size > 1000
    if os.access(CHROMIUM, os.X_OK):  # the heatmap is drawn by the page's script; its slider re-weights
        dom = subprocess.run([CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
                              f"--user-data-dir={tmp_path / 'profile'}", "--virtual-time-budget=5000", "--dump-dom",
                              (out / "report.html").resolve().as_uri()], capture_output=True, text=True, timeout=90)
        assert 'id="s2s-selftest" data-result="pass"' in dom.stdout
        want_cells = sum(len(a["source"]) * len(a["target"]) for a in res["attention"])
        assert dom.stdout.count('class="cell"') == want_cells
    # A second run takes everything from the cache; `report` re-renders from results.json.
    code, _, err = run_cli("compare", str(tsv), "--quick", "--out", out, "--smoothers", "mkn,wb", "--neural", "lstm",
                           "--beams", "1,3", "--force")
    assert code == 0 and json.loads((out / "results.json").read_text("utf-8"))["timing"]["trained"] == 0
    md = (out / "report.md").read_text("utf-8")
    (out / "report.md").unlink()
    code, stdout, _ = run_cli("report", out)
    assert code == 0 and (out / "report.md").read_text("utf-8") == md


def test_bad_beams_and_options_that_do_not_apply_are_refused(run_cli, tmp_path):
    tsv = write_reversal_pairs(tmp_path / "rev.tsv", n=50, seed=0)
    code, _, err = run_cli("compare", str(tsv), "--quick", "--out", tmp_path / "a", "--beams", "0,2")
    assert code == 2 and "--beams" in err
    code, _, err = run_cli("compare", str(tsv), "--quick", "--out", tmp_path / "b", "--tokenizer", "char")
    assert code == 2 and "parallel corpus" in err
