"""One text pipeline: every command reads a text the same way (issue 23).

A user trains an n-gram, builds a vocabulary, trains a neural LM and runs ``compare`` on one file:
all four must see the same sentences, tokens and types (a blank line is one empty sentence
everywhere), and score a test file with the same OOVs.  Before, ``vocab build`` fitted on a 90%
"train split" of the file, ``neural train`` and ``compare`` held out its tail and dropped blank lines
while ``train`` counted them.  Also: the split policy is explicit and said, and a tokenizer is an
object with state, saved with the vocabulary and reloaded without the training text.
"""
from __future__ import annotations

import json
import random
from collections import Counter

import pytest

from conftest import REPORT, needs
from corpora import Vocab
from corpora.corpus import HOLDOUT, load_text_corpus
from corpora.errors import InputError
from corpora.sources import open_text, source_kind
from corpora.tokenize import TOKENIZERS, Tokenizer, TokenizerSpec, make_tokenizer, register

WORDS = "the cat dog sat on a mat and ran to house red big small".split()
N_LINES, BLANK = 60, (17, 41)


@pytest.fixture()
def files(tmp_path):
    """f.txt: 60 lines, two of them blank; v.txt / t.txt: valid and test text (t.txt: 2 OOVs, one blank line)."""
    r = random.Random(7)
    lines = ["" if i in BLANK else " ".join(r.choice(WORDS) for _ in range(r.randint(3, 12))) for i in range(N_LINES)]
    f = tmp_path / "f.txt"
    f.write_text("\n".join(lines) + "\n")
    v = tmp_path / "v.txt"
    v.write_text("\n".join(" ".join(r.choice(WORDS) for _ in range(6)) for _ in range(8)) + "\n")
    t = tmp_path / "t.txt"
    t.write_text("the zebra sat on a mat\nunicorn ran to the house\n\nthe dog sat\n")
    words = sum(len(x.split()) for x in lines)
    types = len({w for x in lines for w in x.split()})
    return {"f": f, "v": v, "t": t, "words": words, "types": types}


def _ngram_facts(run_cli, files, tmp_path):
    code, out, err = run_cli("train", files["f"], "--order", "3", "--smoothing", "wb", "-o", tmp_path / "m.arpa",
                             "--json")
    assert code == 0, err
    info = json.loads(out)
    code, out, err = run_cli("vocab", "build", files["f"], "-o", tmp_path / "v.json")
    assert code == 0, err
    vocab = Vocab.load(tmp_path / "v.json")
    code, out, err = run_cli("ppl", tmp_path / "m.arpa", files["t"])
    assert code == 0, err
    return info, vocab, out


def test_train_and_vocab_build_read_every_line_of_a_file(run_cli, files, tmp_path):
    info, vocab, ppl_out = _ngram_facts(run_cli, files, tmp_path)
    # Every line, the two blank ones as empty sentences (one </s> each), nothing held out.
    assert (info["sentences"], info["words"], info["n_types"]) == (N_LINES, files["words"], files["types"] + 2)
    st = vocab.stats()
    assert st["train_tokens"] == files["words"] and vocab.n_types == files["types"] + 2  # + <unk> + </s>
    assert "4 sentences, 14 words, 2 OOVs" in ppl_out


@needs(*REPORT)
def test_the_same_file_gives_the_same_counts_in_every_command(run_cli, files, tmp_path):
    from neural.checkpoint import load_checkpoint

    info, vocab, ngram_ppl = _ngram_facts(run_cli, files, tmp_path)
    tokens = files["words"] + N_LINES  # every word and every sentence end is predicted
    ckpt = tmp_path / "lm.pt"
    code, out, err = run_cli("neural", "train", files["f"], "--valid", files["v"], "--test", files["t"],
                             "--dry-run", "--no-progress", "--hidden-size", "16", "--layers", "1", "-o", ckpt)
    assert code == 0, err
    assert f"all {N_LINES} lines for training" in err
    data = load_checkpoint(ckpt)["train"]["data"]
    assert data["train_tokens"] == tokens and data["split_policy"] == "files"
    assert f"{tokens} training tokens, {vocab.n_types} types" in err

    code, out, err = run_cli("compare", files["f"], "--valid", files["v"], "--test", files["t"], "--neural", "none",
                             "--max-order", "2", "--smoothers", "wb", "--curve", "100%", "-o", tmp_path / "cmp")
    assert code == 0, err
    corpus = json.loads((tmp_path / "cmp" / "results.json").read_text())["corpus"]
    assert corpus["sizes"]["train"] == {"sentences": N_LINES, "tokens": tokens, "words": files["words"],
                                        "chars": corpus["sizes"]["train"]["chars"],
                                        "bytes": len(files["f"].read_bytes())}
    assert corpus["n_types"] == info["n_types"] == vocab.n_types and corpus["split_policy"] == "files"
    assert corpus["sizes"]["test"]["tokens"] == 14 + 4

    # The test file through both families: the same sentences, words and OOVs.
    code, out, err = run_cli("ppl", ckpt, files["t"])
    assert code == 0, err
    assert "4 sentences, 14 words, 2 OOVs" in out and "4 sentences, 14 words, 2 OOVs" in ngram_ppl


@needs("torch")
def test_a_file_without_valid_and_test_holds_out_its_tail_and_says_so(run_cli, files, tmp_path):
    code, out, err = run_cli("neural", "train", files["f"], "--dry-run", "--no-progress", "--hidden-size", "16",
                             "--layers", "1", "-o", tmp_path / "lm.pt")
    assert code == 0, err
    assert "no --valid/--test files given" in err and "training on lines 1-54, valid 55-57, test 58-60" in err


def test_the_split_policy_of_a_plain_file(files):
    f = str(files["f"])
    whole = open_text(f)
    assert whole.split_policy == "all" and len(whole.sentences("train")) == N_LINES
    assert [len(whole.sentences("train")[i]) for i in BLANK] == [0, 0]  # blank lines are empty sentences
    held = open_text(f, splits=("train", "valid", "test"))
    assert held.split_policy == "holdout" and HOLDOUT == (0.05, 0.05)
    assert [len(held.sentences(s)) for s in ("train", "valid", "test")] == [54, 3, 3]
    assert held.sentences("train") + held.sentences("valid") + held.sentences("test") == whole.sentences("train")
    given = open_text(f, splits=("train", "valid", "test"), valid=str(files["v"]), test=str(files["t"]))
    assert given.split_policy == "files" and given.sentences("train") == whole.sentences("train")
    assert given.sentences("test") == [["the", "zebra", "sat", "on", "a", "mat"], ["unicorn", "ran", "to", "the", "house"],
                                       [], ["the", "dog", "sat"]]
    # A named corpus keeps its own splits, and refuses files for them.
    toy = open_text("toy", splits=("train",))
    assert toy.split_policy == "corpus"
    with pytest.raises(InputError, match="own valid and test"):
        open_text("toy", splits=("train", "valid"), valid=str(files["v"]))
    assert [source_kind(x) for x in ("-", "toy", f, "fra-eng", str(files["f"]) + ".missing")] == \
        ["stdin", "corpus", "file", "parallel", "missing"]


# ---------------------------------------------------------------------------- a tokenizer with state
class _FrequentWords(Tokenizer):
    """A tiny learning tokenizer: the 3 most frequent training words stay words, the rest are spelled
    out.  Enough to show the slot a subword tokenizer (BPE merges) fills."""

    kind = "test-frequent-words"
    learns = True

    def learn(self, lines):
        counts = Counter(w for line in lines for w in line.split())
        return {"words": sorted(w for w, _ in counts.most_common(3))}

    def load_state(self, state):
        self.words = set(state["words"])

    def split(self, text):
        return [t for w in text.split() for t in ([w] if w in self.words else list(w))]


@pytest.fixture()
def frequent_words():
    register(_FrequentWords)
    yield TokenizerSpec(kind=_FrequentWords.kind, lower=True)
    TOKENIZERS.pop(_FrequentWords.kind)


def test_a_learned_tokenizer_is_saved_with_the_vocabulary_and_reloads_without_the_text(files, tmp_path, frequent_words):
    with pytest.raises(InputError, match="not been fitted"):
        make_tokenizer(frequent_words)("the cat")
    corpus = load_text_corpus(files["f"], tokenizer=frequent_words, splits=("train",))
    spec = corpus.tokenizer
    assert spec.fitted and json.loads(spec.state)["words"] == sorted(
        w for w, _ in Counter(w for line in files["f"].read_text().split("\n") for w in line.split()).most_common(3))
    vocab = corpus.new_vocab().fit(corpus.sentences("train"))
    vocab.save(tmp_path / "v.json")
    loaded = Vocab.load(tmp_path / "v.json")
    assert loaded.tokenizer == spec  # the learned state is part of the spec, saved and compared
    kept = json.loads(spec.state)["words"]
    tok = make_tokenizer(loaded.tokenizer)
    line = f"{kept[0].upper()} zebra {kept[1]}"
    assert tok(line) == [kept[0], *"zebra", kept[1]] and tok.decode(tok(line)) == " ".join(tok(line))
    # Another fit (other text) is another tokenizer: a vocabulary does not silently accept it.
    other = make_tokenizer(frequent_words).fit(["zebra zebra zebra yak yak gnu"]).spec
    assert other != spec and make_tokenizer(other)("zebra cat") == ["zebra", *"cat"]
