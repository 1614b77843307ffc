"""`compare` on a parallel corpus with the user's own target-side n-gram (--lm) and a fixed weight
(--lm-weight): the BLEU grid's fusion rows use them, and the page names the model (issue 37)."""
from __future__ import annotations

import json

import pytest

from conftest import write_reversal_pairs

pytest.importorskip("torch")
pytest.importorskip("sacrebleu")
pytest.importorskip("jinja2")


@pytest.mark.slow
def test_compare_fuses_the_given_model_with_the_given_weight(run_cli, tmp_path):
    tsv = write_reversal_pairs(tmp_path / "rev.tsv", n=400, seed=0)
    target = tmp_path / "target.txt"  # the target side of the pairs: a user's n-gram of the target language
    target.write_text("".join(line.split("\t")[1] + "\n" for line in tsv.read_text("utf-8").splitlines()), "utf-8")
    lm = tmp_path / "tgt3.arpa"
    code, _, err = run_cli("train", str(target), "--order", "3", "-o", lm)
    assert code == 0, err
    out = tmp_path / "cmp"
    code, _, err = run_cli("compare", str(tsv), "--quick", "--out", out, "--smoothers", "mkn", "--neural", "lstm",
                           "--beams", "1,2", "--lm", lm, "--lm-weight", "0.3")
    assert code == 0, err
    res = json.loads((out / "results.json").read_text("utf-8"))
    assert res["fusion"]["model"] == "tgt3.arpa" and res["fusion"]["weights"] == [0.3]
    assert res["settings"]["fusion_lm"].endswith("tgt3.arpa") and res["settings"]["fusion_weight"] == 0.3
    fused = [b for b in res["bleu"] if b.get("fusion")]
    assert {(b["model"], b["beam"]) for b in fused} == {(m, k) for m in ("seq2seq", "seq2seq-attn") for k in (1, 2)}
    assert all(b["lm_weight"] == 0.3 and set(b["valid_by_weight"]) == {"0.3"} for b in fused)
    md = (out / "report.md").read_text("utf-8")
    assert "tgt3.arpa (--lm)" in md and "given (--lm-weight)" in md and "| greedy + n-gram |" in md
    # a missing --lm is refused before anything trains
    code, _, err = run_cli("compare", str(tsv), "--quick", "--out", tmp_path / "x", "--lm", tmp_path / "none.arpa")
    assert code != 0 and "none.arpa" in err
