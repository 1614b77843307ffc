"""``ngramlm ppl``/``score`` on an ARPA file read into compact tables (issue 35): the same numbers.

Before, ``ppl`` on the PTB 5-gram ARPA held the file's 94 MB of text and float64/int64 tables, 191 MB
at its peak where KenLM's ``query`` holds 53 MB.  Now a file in key order (this toolkit's) is read a
block of lines at a time into :class:`~ngramlm.scorer.CompactScorer` tables -- keys split into 32-bit
halves, probabilities packed into 4 bytes by the division that parsed them, back-offs as 2-byte places
in a book of the distinct values -- and scoring goes a batch of sentences at a time.  Every value and
lookup is the usual tables', so every printed number must be too: these tests compare the compact
path with the usual one bit for bit, through each form a column can take, and check that whatever
the compact reader does not take (other orders, CRLF, errors) reads as before, with the same errors.
"""
from __future__ import annotations

import gzip
import json
import random

import numpy as np
import pytest

from ngramlm import accel

compiled = pytest.mark.skipif(accel.fast is None or not hasattr(accel.fast, "parse_packed"),
                              reason="the compact reader needs the compiled extension")


# ----------------------------------------------------------------------------- helpers
def usual(path):
    """The model as every other command reads it (float64/int64 tables)."""
    from ngramlm.loading import load_any

    return load_any(path)


def compact(path):
    from ngramlm.loading import load_any

    return load_any(path, compact=True)


def bits(x: np.ndarray) -> np.ndarray:
    return np.ascontiguousarray(x, dtype=np.float64).view(np.int64)


def as_array(col) -> np.ndarray:
    return col.to_array() if hasattr(col, "to_array") else np.asarray(col)


def assert_same_scores(a, b, sentences) -> None:
    """Every per-token number and the report, to the bit."""
    enc_a, oov_a = a.encode(sentences)
    enc_b, oov_b = b.encode(sentences)
    assert np.array_equal(enc_a.ids, enc_b.ids) and np.array_equal(oov_a, oov_b)
    sa, sb = a.token_scores(enc_a, oov=oov_a), b.token_scores(enc_b, oov=oov_b)
    assert np.array_equal(bits(sa.log10_prob), bits(sb.log10_prob))
    assert np.array_equal(sa.ngram_length, sb.ngram_length) and np.array_equal(sa.oov, sb.oov)
    assert a.perplexity_report(enc_a, oov=oov_a).to_dict() == b.perplexity_report(enc_b, oov=oov_b).to_dict()


def assert_same_tables(a, b) -> None:
    assert a.vocab_.itos_ == b.vocab_.itos_ and a.order_ == b.order_
    for k in range(a.order_):
        assert np.array_equal(as_array(a.keys_[k]), b.keys_[k])
        assert np.array_equal(bits(as_array(a.log10_prob_[k])), bits(b.log10_prob_[k]))
        assert np.array_equal(bits(as_array(a.log10_backoff_[k])), bits(b.log10_backoff_[k]))


def sections(text: str) -> tuple:
    """(lines before \\1-grams:, {k: the section's lines}, order) of ARPA text."""
    lines = text.split("\n")
    head, secs, k = [], {}, None
    for line in lines:
        if line.endswith("-grams:") and line.startswith("\\"):
            k = int(line[1:line.index("-")])
            secs[k] = []
        elif line == "\\end\\":
            break
        elif k is None:
            head.append(line)
        elif line:
            secs[k].append(line)
    return head, secs, len(secs)


def join(head: list, secs: dict) -> str:
    out = list(head)
    for k in sorted(secs):
        out += [f"\\{k}-grams:", *secs[k], ""]
    return "\n".join(out + ["\\end\\", ""])


@pytest.fixture(scope="module")
def toy(toy_dataset, tmp_path_factory):
    """A 4-gram MKN model of the toy language written as ARPA, and the test split (which has OOVs)."""
    from ngramlm import NgramLM
    from ngramlm.io.arpa import write_arpa

    lm = NgramLM(order=4, smoothing="mkn").fit(toy_dataset["train"], vocab=toy_dataset.vocab)
    path = tmp_path_factory.mktemp("pplmem") / "toy4.arpa"
    write_arpa(lm, path)
    sents = toy_dataset.corpus.sentences("test")
    return {"path": path, "text": path.read_text("utf-8"), "sents": sents + [["zzqx", "unheard"], []]}


# ----------------------------------------------------------------------------- the compact form
@compiled
def test_this_toolkits_arpa_reads_into_the_compact_form_with_the_same_tables(toy):
    from ngramlm.scorer import BookColumn, CompactScorer, PackedColumn, SplitKeys

    c, u = compact(toy["path"]), usual(toy["path"])
    assert isinstance(c, CompactScorer)
    assert all(isinstance(c.keys_[k], SplitKeys) for k in range(1, 4))
    assert all(isinstance(c.log10_prob_[k], PackedColumn) for k in range(1, 4))
    assert all(isinstance(c.log10_backoff_[k], BookColumn) for k in range(1, 3))
    assert_same_tables(c, u)
    held = sum(a.nbytes for t in (u.keys_, u.log10_prob_, u.log10_backoff_) for a in t)
    assert c.nbytes < 0.55 * held  # about 9 bytes an n-gram where the usual tables take 24


@compiled
def test_compact_scores_are_the_usual_ones_to_the_bit(toy):
    c, u = compact(toy["path"]), usual(toy["path"])
    assert_same_scores(c, u, toy["sents"])
    # single queries and the next-word distribution go through the same lookups
    ctx = toy["sents"][0][:3]
    assert c.log10_prob(toy["sents"][0][3], ctx) == u.log10_prob(toy["sents"][0][3], ctx)
    V = len(u.vocab_)
    ids = [1] + [u.vocab_[w] for w in ctx]  # <s> ctx, then every word: the rows next_probs scores
    tokens = np.concatenate([np.repeat(np.asarray(ids)[None, :], V, axis=0), np.arange(V)[:, None]], axis=1).ravel()
    pos = np.tile(np.arange(len(ids) + 1), V)
    assert np.array_equal(bits(c._score_padded(tokens, pos)[0]), bits(u._score_padded(tokens, pos)[0]))
    # next_probs raises 10 to them with numpy, whose last bit depends on the arrays' alignment in memory
    np.testing.assert_allclose(c.next_probs(["<s>"] + ctx), u.next_probs(["<s>"] + ctx), rtol=1e-15, atol=0)


@compiled
def test_ppl_and_score_print_what_they_printed_before(toy, run_cli, monkeypatch, tmp_path):
    """The command's whole output, text and JSON, on the compact path and on the usual one."""
    import ngramlm.loading

    text = tmp_path / "test.txt"
    text.write_text("\n".join(" ".join(s) for s in toy["sents"]) + "\n", encoding="utf-8")
    commands = [("ppl", toy["path"], text), ("ppl", toy["path"], text, "--json"),
                ("score", toy["path"], text), ("score", toy["path"], text, "--per-token")]
    now = [run_cli(*c) for c in commands]
    monkeypatch.setattr(ngramlm.loading, "read_arpa_compact", lambda *a, **k: None)  # the usual reader
    before = [run_cli(*c) for c in commands]
    assert [r[0] for r in now] == [0, 0, 0, 0]
    assert now == before
    assert json.loads(now[1][1])["tokens"] == sum(len(s) + 1 for s in toy["sents"])


@compiled
def test_columns_change_form_where_a_number_does_not_pack(toy, tmp_path):
    """A number with more than 15 significant digits takes strtod, not the packing division: its
    column is float64 from there on (the rows before converted).  The probability of a 3-gram half way
    through, the back-off of a 2-gram while the back-offs are in the book."""
    head, secs, order = sections(toy["text"])

    def long_number(line: str, field: int) -> str:
        f = line.split("\t")
        f[field] = f"{float(f[field]):.17g}"
        assert len(f[field].lstrip("-").replace(".", "").lstrip("0")) > 15 or "e" in f[field]
        return "\t".join(f)

    i3, i2 = len(secs[3]) // 2, len(secs[2]) // 3
    secs[3][i3] = long_number(secs[3][i3], 0)
    secs[2][i2] = long_number(secs[2][i2], 2)
    path = tmp_path / "long.arpa"
    path.write_text(join(head, secs), encoding="utf-8")
    c, u = compact(path), usual(path)
    assert type(c.log10_prob_[2]) is np.ndarray and type(c.log10_backoff_[1]) is np.ndarray
    assert type(c.log10_prob_[1]).__name__ == "PackedColumn"
    assert_same_tables(c, u)
    assert_same_scores(c, u, toy["sents"])


def synthetic_arpa(n_words: int, n_bigrams: int, late_long_backoff: bool) -> tuple:
    """A 3-gram ARPA in key order whose 2-grams have ``n_bigrams`` distinct back-offs (more than the
    65,536 a book holds), and sentences over its words."""
    rng = random.Random(5)
    words = [f"w{i}" for i in range(n_words)]
    uni = ["-99\t<s>\t-0.5", "-1.5\t</s>", "-2\t<unk>"] + [f"-{2 + i / 1000:.4f}\tw{i}\t-0.25" for i in range(n_words)]
    # ids: <pad> 0, <s> 1, </s> 2, <unk> 3, w_i 4 + i; a 2-gram's key is id1 * V + id2
    firsts = ["<s>"] + words
    pairs = [(a, b) for a in firsts for b in ["</s>"] + words][:n_bigrams]
    bi = []
    for j, (a, b) in enumerate(pairs):
        bo = f"-{j / 1e6 + 0.001:.7f}"
        if late_long_backoff and j == n_bigrams - 10:
            bo = f"{-(j / 1e6 + 0.001):.17g}"
        bi.append(f"-{1 + rng.random():.6f}\t{a} {b}\t{bo}")
    tri = [f"-{0.5 + rng.random():.6f}\t{a} {b} w{t}" for (a, b) in pairs[::97] if b != "</s>" for t in (1, 7)]
    head = ["\\data\\", f"ngram 1={len(uni)}", f"ngram 2={len(bi)}", f"ngram 3={len(tri)}", ""]
    sents = [[rng.choice(words) for _ in range(rng.randint(1, 12))] for _ in range(400)]
    sents += [[b for (a, b) in pairs[i:i + 3] if b != "</s>"] for i in range(0, n_bigrams, 501)]
    return join(head, {1: uni, 2: bi, 3: tri}), sents


@compiled
@pytest.mark.parametrize("late_long_backoff", [False, True])
def test_more_distinct_backoffs_than_the_book_holds(tmp_path, late_long_backoff):
    from ngramlm.scorer import PackedColumn

    text, sents = synthetic_arpa(300, 70_000, late_long_backoff)
    path = tmp_path / "many.arpa"
    path.write_text(text, encoding="utf-8")
    c, u = compact(path), usual(path)
    assert type(c).__name__ == "CompactScorer"
    assert isinstance(c.log10_backoff_[1], np.ndarray if late_long_backoff else PackedColumn)
    assert_same_tables(c, u)
    assert_same_scores(c, u, sents)


# ----------------------------------------------------------------------------- left to the usual reader
@compiled
def test_files_the_compact_reader_does_not_take_read_as_before(toy, tmp_path):
    from ngramlm.io.arpa import read_arpa_compact
    from ngramlm.model import NgramLM

    head, secs, _ = sections(toy["text"])
    swapped = dict(secs)
    swapped[2] = [secs[2][1], secs[2][0]] + secs[2][2:]  # not in key order (as KenLM's and SRILM's files)
    files = {"unsorted.arpa": join(head, swapped).encode(), "crlf.arpa": toy["text"].replace("\n", "\r\n").encode()}
    for name, data in files.items():
        path = tmp_path / name
        path.write_bytes(data)
        assert read_arpa_compact(path) is None, name
        c = compact(path)
        assert isinstance(c, NgramLM), name
        assert_same_scores(c, usual(toy["path"]), toy["sents"])


@compiled
def test_kenlm_and_gzip_files(toy, tmp_path):
    from pathlib import Path

    from ngramlm.model import NgramLM

    kenlm_arpa = Path(__file__).parent / "data" / "toy3.kenlm.arpa.gz"  # lmplz lists n-grams by their last words
    c = compact(kenlm_arpa)
    assert isinstance(c, NgramLM)
    assert_same_scores(c, usual(kenlm_arpa), toy["sents"])
    gz = tmp_path / "toy4.arpa.gz"
    gz.write_bytes(gzip.compress(toy["text"].encode("utf-8")))
    c = compact(gz)
    assert type(c).__name__ == "CompactScorer"
    assert_same_scores(c, usual(toy["path"]), toy["sents"])


@compiled
def test_a_broken_file_is_the_same_error(toy, tmp_path):
    from corpora.errors import InputError

    head, secs, _ = sections(toy["text"])
    good = join(head, secs)
    dup = dict(secs)
    dup[2] = secs[2][:5] + [secs[2][4]] + secs[2][5:]
    unknown = dict(secs)
    prob, words = secs[3][7].split("\t")[:2]
    unknown[3] = secs[3][:7] + [f"{prob}\tnosuchword {words.split(' ', 1)[1]}"] + secs[3][8:]
    badnum = dict(secs)
    badnum[4] = secs[4][:3] + ["-0.5x\t" + secs[4][3].split("\t", 1)[1]] + secs[4][4:]
    broken = {"truncated": good[:len(good) // 2], "no-end": good.replace("\\end\\", ""),
              "duplicate": join(head, dup), "unknown-word": join(head, unknown), "bad-number": join(head, badnum),
              "count": good.replace(f"ngram 3={len(secs[3])}", f"ngram 3={len(secs[3]) + 1}")}
    for name, text in broken.items():
        path = tmp_path / f"{name}.arpa"
        path.write_text(text, encoding="utf-8")
        with pytest.raises(InputError) as was:
            usual(path)
        with pytest.raises(InputError) as now:
            compact(path)
        assert str(now.value) == str(was.value), name


# ----------------------------------------------------------------------------- scoring in batches
def test_scoring_in_batches_of_sentences_is_exact(toy_dataset, monkeypatch):
    import ngramlm.scorer as scorer
    from ngramlm import NgramLM

    lm = NgramLM(order=3, smoothing="mkn").fit(toy_dataset["train"], vocab=toy_dataset.vocab)
    sents = toy_dataset.corpus.sentences("test")[:300]
    long = [w for s in sents[:20] for w in s]  # one sentence longer than a batch
    sents = sents[:100] + [long] + sents[100:] + [[]]
    enc, oov = lm.encode(sents)
    whole = lm.token_scores(enc, oov=oov)
    monkeypatch.setattr(scorer, "SCORE_BATCH", 37)
    cut = lm.token_scores(enc, oov=oov)
    assert np.array_equal(bits(whole.log10_prob), bits(cut.log10_prob))
    assert np.array_equal(whole.ngram_length, cut.ngram_length) and np.array_equal(whole.oov, cut.oov)


def test_batches_cut_only_between_sentences():
    from ngramlm.counts import padded_stream
    from ngramlm.scorer import _batches

    from corpora.vocab import EncodedText

    rng = np.random.default_rng(1)
    lengths = rng.integers(1, 30, size=200)
    lengths[50] = 400  # longer than a batch
    starts = np.concatenate([[0], np.cumsum(lengths)])
    _, pos = padded_stream(EncodedText(ids=np.full(int(starts[-1]), 5, dtype=np.int64), starts=starts))
    for size in (1, 10, 64, 10_000):
        cuts = _batches(pos, size)
        assert cuts[0][0] == 0 and cuts[-1][1] == len(pos)
        assert all(b == c for (_, b), (c, _) in zip(cuts, cuts[1:]))
        assert all(pos[a] == 0 for a, _ in cuts)
        assert all(b - a <= size or np.count_nonzero(pos[a:b] == 0) == 1 for a, b in cuts)


# ----------------------------------------------------------------------------- the PTB 5-gram (real corpus)
@compiled
def test_ptb_5gram_ppl_prints_what_it_printed_before(shared_corpora, tmp_path, run_cli, monkeypatch):
    import ngramlm.loading

    arpa = tmp_path / "ptb5.arpa"
    code, _, err = run_cli("train", "ptb", "--data-dir", shared_corpora, "--order", "5", "-o", arpa)
    assert code == 0, err
    test = shared_corpora / "ptb" / "ptb.test.txt"
    commands = [("ppl", arpa, test), ("ppl", arpa, test, "--json"), ("ppl", arpa, "ptb", "--split", "valid",
                "--data-dir", shared_corpora, "--json")]
    now = [run_cli(*c) for c in commands]
    c = ngramlm.loading.load_any(arpa, compact=True)
    assert type(c).__name__ == "CompactScorer" and c.nbytes < 24 * 2**20  # the usual tables: 50 MB
    monkeypatch.setattr(ngramlm.loading, "read_arpa_compact", lambda *a, **k: None)
    before = [run_cli(*c) for c in commands]
    assert now == before
    assert json.loads(now[1][1])["tokens"] == 82_430
