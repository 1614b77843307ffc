"""Learned subword tokenizers (bpe:N, unigram:N) and the byte tokenizer (issue 18): fitted on the
training text only, carried inside the vocabulary, every model and checkpoint, reloaded without the
training text; an n-gram over pieces exports to ARPA and scores the same in KenLM."""
from __future__ import annotations

import json
import math
import random
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import REPORT, needs
from corpora import Vocab
from corpora.corpus import load_text_corpus
from corpora.errors import InputError
from corpora.tokenize import TokenizerSpec, make_tokenizer, parse_tokenizer, spec_from_text

REPO = Path(__file__).resolve().parent.parent
SUBWORDS = needs("tokenizers")
WORDS = ("the market said company shares report investors trading stock prices billion million quarter "
         "analysts expects higher lower interest rates").split()


@pytest.fixture()
def text(tmp_path):
    r = random.Random(11)
    train = tmp_path / "train.txt"
    train.write_text("\n".join(" ".join(r.choice(WORDS) for _ in range(r.randint(4, 14))) for _ in range(400)) + "\n")
    test = tmp_path / "test.txt"
    test.write_text("the analysts said shares were higher\nstock prices fell sharply\n")
    return train, test


def test_parsing_kinds_and_sizes():
    assert parse_tokenizer("bpe:8000") == ("bpe", 8000) and parse_tokenizer("char") == ("char", None)
    assert spec_from_text("bpe").size == 8000 and spec_from_text("unigram:300").describe() == "unigram:300"
    with pytest.raises(InputError, match="unknown tokenizer"):
        parse_tokenizer("wordpiece:10")
    with pytest.raises(InputError, match="not an integer"):
        parse_tokenizer("bpe:lots")
    with pytest.raises(InputError, match="has no size"):
        TokenizerSpec(kind="char", size=10)


def test_the_byte_tokenizer_round_trips_any_text():
    tok = make_tokenizer(TokenizerSpec(kind="byte"))
    line = "naïve café 😀 tab\there"
    pieces = tok(line)
    assert len(pieces) == len(" ".join(line.split()).encode("utf-8")) and "<0xF0>" in pieces and "▁" in pieces
    assert tok.decode(pieces) == " ".join(line.split())
    assert all(" " not in p and p for p in pieces)


@SUBWORDS
@pytest.mark.parametrize("kind", ["bpe", "unigram"])
def test_a_learned_tokenizer_is_fitted_on_train_only_and_reloads_from_the_vocabulary(tmp_path, text, kind, run_cli):
    train, test = text
    code, out, err = run_cli("vocab", "build", train, "--tokenizer", f"{kind}:60", "-o", tmp_path / "v.json")
    assert code == 0, err
    vocab = Vocab.load(tmp_path / "v.json")
    spec = vocab.tokenizer
    assert spec.kind == kind and spec.size == 60 and spec.fitted
    state = json.loads(spec.state)
    assert state["model"]["type"].lower() == kind  # the library's own trained tokenizer, inside the vocabulary
    tok = make_tokenizer(spec)
    assert 20 < tok.pieces() <= 60
    # Fitted on the training split only: a holdout corpus of the same file learns from its first 90%.
    held = load_text_corpus(train, tokenizer=spec_from_text(f"{kind}:60"), splits=("train", "valid", "test"))
    assert held.tokenizer.state != spec.state
    # The pieces decode back to the line (every character was seen in training) and never hold a space.
    line = test.read_text().split("\n")[0]
    pieces = tok(line)
    assert tok.decode(pieces) == line and all(" " not in p for p in pieces) and pieces[0].startswith("▁")
    code, out, err = run_cli("tokenize", "--vocab", tmp_path / "v.json", test)
    assert code == 0, err
    assert out.split("\n")[0] == " ".join(pieces)


@SUBWORDS
def test_an_ngram_over_pieces_exports_to_arpa_and_kenlm_scores_it_the_same(tmp_path, text, run_cli):
    kenlm = pytest.importorskip("kenlm")
    from ngramlm import Model
    from ngramlm.loading import read_arpa

    train, test = text
    arpa = tmp_path / "bpe.arpa"
    code, _, err = run_cli("train", train, "--tokenizer", "bpe:80", "--order", "3", "--smoothing", "wb", "-o", arpa)
    assert code == 0, err
    code, out, err = run_cli("ppl", arpa, test, "--json")  # the tokenizer comes from the file: no training text
    assert code == 0, err
    d = json.loads(out)
    assert d["bytes"] == len(test.read_bytes()) and d["tokens"] > d["words"]
    lm = read_arpa(arpa)
    assert lm.vocab_.tokenizer.kind == "bpe" and lm.vocab_.tokenizer.fitted
    tok = make_tokenizer(lm.vocab_.tokenizer)
    ours, theirs = Model(str(arpa)), kenlm.Model(str(arpa))
    total = 0.0
    for line in test.read_text().strip().split("\n"):
        pieces = " ".join(tok(line))
        assert ours.score(pieces) == pytest.approx(theirs.score(pieces), abs=1e-4)
        total += ours.score(pieces)
    assert total == pytest.approx(d["log10_prob"], abs=1e-6)


@SUBWORDS
@needs("torch")
def test_a_checkpoint_carries_its_learned_tokenizer(tmp_path, text, run_cli):
    train, test = text
    ckpt = tmp_path / "lm.pt"
    code, _, err = run_cli("neural", "train", train, "--tokenizer", "bpe:70", "--dry-run", "--no-progress",
                           "--hidden-size", "16", "--layers", "1", "-o", ckpt)
    assert code == 0, err
    code, out, err = run_cli("neural", "ppl", ckpt, test, "--json")
    assert code == 0, err
    d = json.loads(out)
    assert d["bytes"] == len(test.read_bytes()) and d["tokens"] > d["words"] and math.isfinite(d["ppl"])


@pytest.mark.slow
@SUBWORDS
@needs(*REPORT)
def test_compare_on_pieces_divides_by_the_same_bytes(tmp_path, text, run_cli):
    train, _ = text
    sizes = {}
    for tk in ("bpe:80", "char"):
        out = tmp_path / tk.replace(":", "-")
        code, _, err = run_cli("compare", train, "--tokenizer", tk, "--neural", "none", "--max-order", "3",
                               "--smoothers", "wb", "--curve", "100%", "-o", out)
        assert code == 0, err
        res = json.loads((out / "results.json").read_text())
        sizes[tk] = res["corpus"]["sizes"]["test"]
        assert res["corpus"]["tokenizer"]["kind"] == tk.split(":")[0]
    assert sizes["bpe:80"]["bytes"] == sizes["char"]["bytes"]
    assert sizes["bpe:80"]["tokens"] < sizes["char"]["tokens"]


def test_without_the_library_a_learned_tokenizer_names_the_extra(tmp_path, text):
    train, _ = text
    code = ("import sys; sys.modules['tokenizers'] = None\n"
            "import cli; cli.main(['vocab', 'build', sys.argv[1], '--tokenizer', 'bpe:50', '-o', sys.argv[2]])")
    r = subprocess.run([sys.executable, "-c", code, str(train), str(tmp_path / "v.json")], cwd=REPO,
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 2, r.stderr  # bad input (here: a missing extra), as every InputError exits
    assert "pip install -e '.[subwords]'" in r.stderr and "Traceback" not in r.stderr
    assert not (tmp_path / "v.json").exists()
