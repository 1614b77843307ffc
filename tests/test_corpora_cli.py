"""`ngramlm vocab`, `tokenize`, `stats` and `corpora` commands, run as the script runs them."""
from __future__ import annotations

import gzip
import json
import pickle
import re
from collections import Counter

import pytest

from corpora import Vocab, load_corpus, prepare

HAN = re.compile(r"[\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\U00020000-\U0002ebef]")


@pytest.fixture(scope="module")
def ptb_dataset(shared_corpora):
    return prepare(load_corpus("ptb", data_dir=shared_corpora))


def _row(out: str, first: str) -> list:
    """The cells of the first table row starting with ``first``."""
    for line in out.splitlines():
        cells = line.split()
        if cells and cells[0] == first:
            return cells
    raise AssertionError(f"no row {first!r} in:\n{out}")


def _one_line_error(code: int, err: str) -> str:
    assert code != 0
    assert err.startswith("Error: "), err
    assert err.count("\n") == 1, err
    return err


# ---------------------------------------------------------------------------- vocab build
def test_vocab_build_ptb(shared_corpora, tmp_path, run_cli, ptb_dataset):
    out_path = tmp_path / "vocab.json"
    code, out, err = run_cli("vocab", "build", "ptb", "-o", out_path, "--data-dir", shared_corpora)
    assert code == 0, err
    assert "Vocab(n_types=10000, words=9998 (+<unk>), min_count=1" in out
    assert "887,521 train tokens" in out
    loaded = Vocab.load(out_path)
    assert loaded.n_types == 10000
    assert loaded == ptb_dataset.vocab
    assert loaded.itos_ == ptb_dataset.vocab.itos_
    assert json.loads(out_path.read_text())["format"] == "ngramlm.vocab"
    assert [p.name for p in tmp_path.iterdir()] == ["vocab.json"]  # no temp file left


def test_vocab_build_cutoffs_and_tokenizer_options(tmp_path, run_cli):
    text = tmp_path / "t.txt"
    lines = ["The cat sat.", "the CAT ran!", "A dog sat.", "the cat sat again."] * 5
    text.write_text("\n".join(lines) + "\n")
    out_path = tmp_path / "v.json"
    code, out, err = run_cli("vocab", "build", text, "-o", out_path, "--tokenizer", "regex", "--lower",
                             "--min-count", "3", "--max-size", "3")
    assert code == 0, err
    v = Vocab.load(out_path)
    # Train = every line of the file (the "all" split policy: `vocab build` holds nothing out, as
    # `train` does not); regex + lower.
    corpus = load_corpus(str(text), tokenizer=v.tokenizer, splits=("train",))
    assert corpus.split_policy == "all" and sum(map(len, corpus.sentences("train"))) == 5 * (4 + 4 + 4 + 5)
    counts = Counter(t for s in corpus.sentences("train") for t in s)
    expected = [w for w, c in sorted(counts.items(), key=lambda wc: (-wc[1], wc[0])) if c >= 3][:3]
    assert v.itos_[4:] == expected
    assert v.tokenizer.kind == "regex" and v.tokenizer.lower is True
    assert "." in v and "The" not in v


# ---------------------------------------------------------------------------- vocab stats
def test_vocab_stats_ptb(shared_corpora, run_cli, ptb_dataset):
    code, out, err = run_cli("vocab", "stats", "ptb", "--data-dir", shared_corpora)
    assert code == 0, err
    v = ptb_dataset.vocab
    assert "n_types (predicted: words + <unk> + </s>): 10,000" in out
    assert "size (ids incl. <pad>, <s>): 10,002" in out
    # split sentences words OOV rate predicted unk-in-stream
    assert _row(out, "valid") == ["valid", "3,370", "70,390", "0", "0.00%", "73,760", "3,485"]
    assert _row(out, "test") == ["test", "3,761", "78,669", "0", "0.00%", "82,430", "4,794"]
    # The cut-off table agrees with Vocab itself.
    counts = Counter(t for s in ptb_dataset.corpus.sentences("train") for t in s)
    for m in (2, 3, 5):
        fitted = Vocab(min_count=m).fit_counts(counts)
        row = [r for r in out.splitlines() if r.split()[:2] == [str(m), "-"]][0].split()
        assert row[2] == f"{fitted.n_types:,}"
        assert row[3] == f"{100 * fitted.stats()['train_unk_rate']:.2f}%"
    row = [r for r in out.splitlines() if r.split()[:2] == ["1", "1,000"]][0].split()
    assert row[2] == "1,002"
    for k in (100, 1000, 10000):
        assert _row(out, f"{k:,}")[1] == f"{100 * v.coverage(k):.2f}%"


def test_vocab_stats_with_vocab_file(shared_corpora, tmp_path, run_cli):
    vpath = tmp_path / "small.json"
    code, _, err = run_cli("vocab", "build", "ptb", "-o", vpath, "--max-size", "1000", "--data-dir", shared_corpora)
    assert code == 0, err
    code, out, err = run_cli("vocab", "stats", "ptb", "--vocab", vpath, "--data-dir", shared_corpora)
    assert code == 0, err
    v = Vocab.load(vpath)
    corpus = load_corpus("ptb", data_dir=shared_corpora, splits=("test",))
    oov, n = v.oov_count(corpus.sentences("test"))
    assert n == 78669 and oov > 0
    assert _row(out, "test")[:5] == ["test", "3,761", "78,669", f"{oov:,}", f"{100 * oov / n:.2f}%"]
    assert f"loaded from {vpath}" in out
    code, _, err = run_cli("vocab", "stats", "ptb", "--vocab", vpath, "--min-count", "2", "--data-dir", shared_corpora)
    assert "cannot be combined" in _one_line_error(code, err)
    code, _, err = run_cli("vocab", "stats", "ptb", "--vocab", vpath, "--tokenizer", "char", "--data-dir", shared_corpora)
    assert "built with tokenizer whitespace" in _one_line_error(code, err)


# ---------------------------------------------------------------------------- tokenize
def test_tokenize_hongloumeng_gives_han_characters(shared_corpora, tmp_path, run_cli):
    src = shared_corpora / "hongloumeng" / "hongloumeng.txt"
    first = src.read_text(encoding="utf-8").split("\n")[:5]
    sample = tmp_path / "hlm.txt"
    sample.write_text("\n".join(first) + "\n", encoding="utf-8")
    code, out, err = run_cli("tokenize", "--tokenizer", "cjk", sample)
    assert code == 0, err
    got = out.split("\n")
    assert got[-1] == "" and len(got) - 1 == len(first)  # one output line per input line
    for line, toks in zip(first, got):
        tokens = toks.split(" ") if toks else []
        han_tokens = [t for t in tokens if HAN.search(t)]
        assert all(len(t) == 1 for t in han_tokens)
        assert len(han_tokens) == len(HAN.findall(line))
    assert got[0].split()[:3] == ["第", "一", "回"]
    # Same through stdin.
    code, out2, _ = run_cli("tokenize", "--tokenizer", "cjk", input=sample.read_bytes())
    assert code == 0 and out2 == out


def test_tokenize_stdin_formats(run_cli, tmp_path):
    code, out, _ = run_cli("tokenize", input="\ufeffa  b\r\n\r\n c \rd\n".encode("utf-8"))
    assert code == 0
    assert out == "a b\n\nc\nd\n"
    code, out, _ = run_cli("tokenize", "--tokenizer", "regex", "--lower", "--normalize", "NFKC",
                           input="Don't PANIC, ﬁne: ３.１４!\n".encode("utf-8"))
    assert out == "don't panic , fine : 3.14 !\n"
    code, out, _ = run_cli("tokenize", "--tokenizer", "char", input=b"ab  c\n")
    assert out == "a b \u2581 c\n"
    gz = tmp_path / "x.txt.gz"
    gz.write_bytes(gzip.compress("x y\nz\n".encode()))
    code, out, _ = run_cli("tokenize", gz)
    assert code == 0 and out == "x y\nz\n"
    code, out, _ = run_cli("tokenize", input=b"")
    assert code == 0 and out == ""


def test_tokenize_errors(run_cli, tmp_path):
    code, _, err = run_cli("tokenize", input=b"fine\ncaf\xe9\n")
    assert "<stdin>:2: not valid UTF-8 at byte offset 8" in _one_line_error(code, err)
    bad = tmp_path / "latin1.txt"
    bad.write_bytes(b"ok\ncaf\xe9\n")
    code, _, err = run_cli("tokenize", bad)
    assert f"{bad}:2: not valid UTF-8 at byte offset 6" in _one_line_error(code, err)
    code, _, err = run_cli("tokenize", tmp_path / "missing.txt")
    assert "missing.txt: no such file" in _one_line_error(code, err)


# ---------------------------------------------------------------------------- stats
def test_stats_ptb(shared_corpora, run_cli):
    code, out, err = run_cli("stats", "ptb", "--data-dir", shared_corpora)
    assert code == 0, err
    assert _row(out, "train") == ["train", "42,068", "887,521", "929,589", "0", "0.00%"]
    assert _row(out, "test") == ["test", "3,761", "78,669", "82,430", "0", "0.00%"]
    assert "n_types 10,000" in out
    # unigram row of the sparsity table: all 10,000 predicted types occur in train
    assert _row(out, "1")[:2] == ["1", "10,000"]
    assert _row(out, "3")[0] == "3"


def test_stats_default_is_toy(run_cli):
    import importlib.util

    code, out, err = run_cli("stats")
    if importlib.util.find_spec("corpora.toy") is None:
        assert "'toy'" in _one_line_error(code, err)
        return
    assert code == 0, err
    corpus = load_corpus("toy")
    assert corpus.name == "toy"
    for split in ("train", "valid", "test"):
        row = _row(out, split)
        assert row[1] == f"{len(corpus.splits[split]):,}"
        truth = corpus.truth.get(split) or {}
        if "perplexity" in truth:
            assert row[-1] == f"{truth['perplexity']:.4f}"
        if "n_tokens" in truth:
            assert row[3] == f"{truth['n_tokens']:,}"  # the truth counts the same predicted tokens
    assert "warning" not in out


# ---------------------------------------------------------------------------- errors
def _bad_inputs(tmp_path):
    empty = tmp_path / "empty.txt"
    empty.write_bytes(b"")
    blank = tmp_path / "blank.txt"
    blank.write_bytes(b"\n  \n\t\n")
    binary = tmp_path / "model.pkl"
    binary.write_bytes(pickle.dumps({"a": [1, 2, 3]}))
    latin = tmp_path / "latin1.txt"
    latin.write_bytes("line one\nna\u00efve caf\u00e9\n".encode("latin-1"))
    return {
        empty: "file is empty",
        blank: "file is empty",
        binary: "pickle",
        latin: "not valid UTF-8 at byte offset 11",
        tmp_path / "missing.txt": "no such file",
    }


def test_vocab_build_bad_input_files(tmp_path, run_cli):
    for path, reason in _bad_inputs(tmp_path).items():
        out_path = tmp_path / "out.json"
        code, _, err = run_cli("vocab", "build", path, "-o", out_path)
        err = _one_line_error(code, err)
        assert str(path) in err and reason in err, err
        assert not out_path.exists()
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")]  # no temp files


def test_vocab_build_bad_options_and_sources(shared_corpora, tmp_path, run_cli):
    good = tmp_path / "good.txt"
    good.write_text("\n".join(f"w{i} w{i % 3}" for i in range(40)) + "\n")
    out_path = tmp_path / "out.json"
    cases = [
        (("--min-count", "0"), "--min-count must be an integer >= 1, got 0"),
        (("--min-count", "abc"), "--min-count must be an integer >= 1, got 'abc'"),
        (("--max-size", "0"), "--max-size must be an integer >= 1, got 0"),
        (("--max-size", "-5"), "--max-size must be an integer >= 1, got -5"),
    ]
    for extra, reason in cases:
        code, _, err = run_cli("vocab", "build", good, "-o", out_path, *extra)
        assert reason in _one_line_error(code, err)
        assert not out_path.exists()
    code, _, err = run_cli("vocab", "build", "no-such-corpus", "-o", out_path)
    assert "unknown corpus 'no-such-corpus'" in _one_line_error(code, err)
    empty_dir = tmp_path / "data"
    empty_dir.mkdir()
    code, _, err = run_cli("vocab", "build", "ptb", "-o", out_path, "--data-dir", empty_dir)
    err = _one_line_error(code, err)
    assert str(empty_dir / "ptb" / "ptb.train.txt") in err and "ngramlm corpora download ptb" in err
    code, _, err = run_cli("vocab", "build", good, "-o", tmp_path)
    assert "is a directory" in _one_line_error(code, err)
    code, _, err = run_cli("vocab", "build", good, "-o", good)
    assert "the output file is the input text" in _one_line_error(code, err)
    assert good.read_text().startswith("w0 w0")
    assert not out_path.exists()


def test_vocab_stats_bad_vocab_files(shared_corpora, tmp_path, run_cli, ptb_dataset):
    not_json = tmp_path / "a.json"
    not_json.write_text('{"format": "ngramlm.vocab",\n "itos": [}\n')
    foreign = tmp_path / "b.json"
    foreign.write_text(json.dumps({"hello": "world"}))
    corrupt = tmp_path / "c.json"
    data = ptb_dataset.vocab.to_dict()
    data["itos"] = data["itos"][:10]
    corrupt.write_text(json.dumps(data))
    for path, reason in [(not_json, f"{not_json}:2: not an ngramlm vocabulary file (invalid JSON"),
                         (foreign, "not an ngramlm vocabulary file (missing format tag)"),
                         (corrupt, "corrupt vocabulary file"),
                         (tmp_path / "nope.json", "no such file")]:
        code, _, err = run_cli("vocab", "stats", "ptb", "--vocab", path, "--data-dir", shared_corpora)
        err = _one_line_error(code, err)
        assert str(path) in err and reason in err, err


def test_corpora_info_and_unknown_names(shared_corpora, run_cli):
    code, out, err = run_cli("corpora", "info", "ptb", "--data-dir", shared_corpora)
    assert code == 0, err
    assert "fcea919f6cf83f35d4d00c6cbf08040d13d4155226340912e2fef9c9c4102cbf" in out
    assert "ptb.test.txt: sha256 ok  449,945 bytes, 3,761 lines, 78,669 whitespace tokens" in out
    assert _row(out, "test") == ["test", "3,761", "78,669", "82,430"]
    code, out, _ = run_cli("corpora", "info", "wikitext-2", "--data-dir", shared_corpora)
    assert code == 0
    assert "extract wikitext-2/wiki.train.tokens -> wiki.train.tokens" in out
    assert "status: incomplete" in out
    code, _, err = run_cli("corpora", "info", "nope")
    assert "unknown corpus 'nope'" in _one_line_error(code, err)
    code, _, err = run_cli("stats", "nope")
    assert "unknown corpus 'nope'" in _one_line_error(code, err)


def test_help_lists_commands(run_cli):
    code, out, _ = run_cli("vocab", "--help")
    assert code == 0 and "build" in out and "stats" in out
    code, out, _ = run_cli("corpora", "--help")
    assert code == 0 and all(c in out for c in ("list", "info", "download"))
