"""Bits per byte: every model's total bits over the UTF-8 bytes of the text, counted once from the
text (one byte per sentence end, its newline), so tokenizations of one text compare (issue 18)."""
from __future__ import annotations

import json
import math
import random

import pytest

from conftest import REPORT, needs
from corpora.corpus import text_bytes
from corpora.sources import open_text


def test_text_bytes_is_the_files_bytes_with_one_newline_a_sentence(tmp_path):
    f = tmp_path / "t.txt"
    f.write_text("the cat\n\nzebra 😀 é\n", encoding="utf-8")
    assert text_bytes(["the cat", "", "zebra 😀 é"]) == len(f.read_bytes()) == 7 + 1 + 0 + 1 + 13 + 1
    for kind in ("whitespace", "char", "regex"):  # the tokenizer does not change it
        from corpora.tokenize import TokenizerSpec

        corpus = open_text(str(f), tokenizer=TokenizerSpec(kind=kind))
        assert corpus.n_bytes == {"train": len(f.read_bytes())}


def test_ppl_reports_bits_per_byte_the_same_way_for_two_tokenizations(tmp_path, run_cli):
    r = random.Random(3)
    words = "the cat dog sat on a mat and ran to house".split()
    train = tmp_path / "train.txt"
    train.write_text("\n".join(" ".join(r.choice(words) for _ in range(r.randint(3, 9))) for _ in range(300)) + "\n")
    test = tmp_path / "test.txt"
    test.write_text("the dog sat on a mat\nthe cat ran to the house\n")
    n_bytes = len(test.read_bytes())
    got = {}
    for kind in ("whitespace", "char"):
        model = tmp_path / f"{kind}.arpa"
        assert run_cli("train", train, "--order", "3", "--smoothing", "wb", "--tokenizer", kind, "-o", model)[0] == 0
        code, out, err = run_cli("ppl", model, test, "--json")
        assert code == 0, err
        d = json.loads(out)
        assert d["bytes"] == n_bytes
        assert d["bits_per_byte"] == pytest.approx(-d["log10_prob"] * math.log2(10) / n_bytes, rel=1e-12)
        assert d["bits_per_byte"] == pytest.approx(d["bits_per_token"] * d["tokens"] / n_bytes, rel=1e-9)
        got[kind] = d
    # Per token the two are incomparable (a word vs a character); per byte they are the same unit.
    assert got["char"]["tokens"] > 3 * got["whitespace"]["tokens"]
    assert 0.2 < got["char"]["bits_per_byte"] < 4 and 0.2 < got["whitespace"]["bits_per_byte"] < 4
    code, out, _ = run_cli("ppl", tmp_path / "whitespace.arpa", test)
    assert f"Bits per byte:\t{got['whitespace']['bits_per_byte']:.4f}  ({n_bytes} UTF-8 bytes" in out


@needs(*REPORT)
def test_compare_on_chinese_text_without_spaces_completes(tmp_path, run_cli):
    """`compare hongloumeng` crashed: a line without spaces is one "word", its word perplexity
    2 ** bits_per_word overflowed (OverflowError in reports/experiments/analysis.py)."""
    r = random.Random(5)
    han = [chr(c) for c in range(0x4E00, 0x4E00 + 300)]
    lines = ["".join(r.choice(han) for _ in range(r.randint(150, 250))) + "。" for _ in range(120)]
    f = tmp_path / "zh.txt"
    f.write_text("\n".join(lines) + "\n", encoding="utf-8")
    out = tmp_path / "run"
    code, _, err = run_cli("compare", f, "--tokenizer", "cjk", "--neural", "none", "--max-order", "2",
                           "--smoothers", "wb", "--curve", "100%", "-o", out)
    assert code == 0, err
    res = json.loads((out / "results.json").read_text())
    test = res["corpus"]["sizes"]["test"]
    assert test["bytes"] == text_bytes(lines[-6:]) and test["words"] == 6  # 5% of 120 lines held out as test
    row = next(x for x in res["ngram"] if x["id"] == "wb-2")
    norm = row["test_normalised"]
    assert norm["word_ppl"] is None and norm["bits_per_word"] > 1000
    assert norm["bits_per_byte"] == pytest.approx(norm["bits_per_token"] * test["tokens"] / test["bytes"])
    assert "| bits/byte |" in (out / "report.md").read_text()
