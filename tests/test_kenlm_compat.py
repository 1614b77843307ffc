"""`--compat kenlm`: lmplz's conventions, derived from the text (hand cases here; PTB in test_ngram_ptb)."""
from __future__ import annotations

import numpy as np
import pytest

from corpora import Vocab
from corpora.errors import InputError
from ngramlm import NgramLM
from ngramlm.counts import NgramCounts
from ngramlm.kenlm_compat import float32_discounts, lmplz_adjustments, lmplz_vocab_ids


def _fit(sents, order=2):
    vocab = Vocab().fit(sents)
    enc = vocab.encode_sentences(sents)
    counts = NgramCounts.from_encoded(enc, order=order, vocab_size=len(vocab))
    return vocab, enc, counts


def test_lmplz_numbers_words_by_first_appearance():
    sents = [["b", "a", "b"], ["c", "a"]]
    vocab, enc, _ = _fit(sents)
    kid = lmplz_vocab_ids(enc.ids, len(vocab))
    # <s> 1, </s> 2, then b, a (first sentence), c (second): 3, 4, 5, whatever our own ids are.
    assert [kid[vocab[w]] for w in ("<s>", "</s>", "b", "a", "c")] == [1, 2, 3, 4, 5]


def test_the_last_ngram_in_suffix_order_is_found():
    # Full bigrams (padded): <s> x, x y, y </s>, <s> z, z x, x </s>.  lmplz ids: x 3, y 4, z 5; the
    # last bigram in suffix order ends in the largest id: "<s> z".  Its unigram suffix "z" is the one
    # recorded at its raw count.
    sents = [["x", "y"], ["z", "x"]]
    vocab, enc, counts = _fit(sents)
    adj = lmplz_adjustments(enc, counts)
    assert adj["extra_types"] == 0  # no <unk> in the text
    assert adj["raw_count_rows"][0] == vocab["z"]
    # With a 3-gram the last full n-gram is "<s> <s> z" (suffix order compares the last word first,
    # and z has the largest id); its bigram suffix "<s> z" begins with <s>, which lmplz keeps at its
    # raw count anyway, so only the unigram moves.
    vocab3, enc3, counts3 = _fit(sents, order=3)
    adj3 = lmplz_adjustments(enc3, counts3)
    assert adj3["raw_count_rows"][0] == vocab3["z"] and adj3["raw_count_rows"][1] is None


def test_a_text_with_its_own_unk_adds_lmplzs_to_the_floor():
    sents = [["a", "<unk>", "b"], ["b", "a"]]
    vocab, enc, counts = _fit(sents)
    assert lmplz_adjustments(enc, counts)["extra_types"] == 1
    lm = NgramLM(order=2, smoothing="mkn", compat="kenlm", discount_fallback=(0.5, 1.0, 1.5)).fit(enc, vocab=vocab)
    assert lm.info_["compat"]["kenlm"]["uniform_types"] == vocab.n_types + 1
    # The floor's share of the missing type is gone: the unigrams sum to 1 - gamma_1 / (types + 1).
    p = 10 ** lm.log10_prob_[0][np.isfinite(lm.log10_prob_[0])]
    assert p.sum() < 1.0


def test_float32_discounts_follow_lmplzs_arithmetic():
    nc = np.array([0, 5000, 2000, 1000, 600])
    d32 = float32_discounts(nc, 3)
    y = 5000 / (5000 + 2 * 2000)
    d64 = [j - (j + 1) * y * nc[j + 1] / nc[j] for j in (1, 2, 3)]
    assert d32 == pytest.approx(d64, rel=1e-6) and d32 != d64
    assert all(np.float32(d) == d for d in d32)  # float32 values, widened


def test_compat_is_refused_where_it_cannot_apply():
    sents = [["a", "b"], ["b", "a", "c"]] * 5
    vocab, enc, counts = _fit(sents)
    with pytest.raises(InputError, match="lmplz's Kneser-Ney"):
        NgramLM(order=2, smoothing="wb", compat="kenlm").fit(enc, vocab=vocab)
    with pytest.raises(InputError, match="needs the training text"):
        NgramLM(order=2, smoothing="mkn", compat="kenlm").fit_counts(counts, vocab=vocab)
    with pytest.raises(InputError, match="unknown compat"):
        NgramLM(order=2, smoothing="mkn", compat="ibm").fit(enc, vocab=vocab)


def test_compat_survives_save_and_load(tmp_path):
    from ngramlm.loading import load_any

    sents = [["a", "b", "a"], ["b", "a", "c"], ["c", "c", "a", "b"]] * 4
    vocab, enc, _ = _fit(sents)
    lm = NgramLM(order=2, smoothing="mkn", compat="kenlm", discount_fallback=(0.5, 1.0, 1.5)).fit(enc, vocab=vocab)
    lm.save(tmp_path / "m.npz")
    back = load_any(tmp_path / "m.npz")
    assert back.compat == "kenlm"


# ----------------------------------------------------------------------------- from the counts, for streamed builds
def _last_padded_by_text(enc, kid, n):
    """The oracle: every token's n-gram padded with <s>, the largest in lmplz's suffix order (last word's id
    first), read straight off the text as lmplz streams it."""
    from corpora.vocab import BOS_ID

    ids, starts = np.asarray(enc.ids), np.asarray(enc.starts)
    best = None
    for s, e in zip(starts[:-1], starts[1:]):
        sent = [BOS_ID] * (n - 1) + ids[s:e].tolist()
        for i in range(n - 1, len(sent)):
            gram = sent[i - n + 1:i + 1]
            key = tuple(int(kid[w]) for w in reversed(gram))
            if best is None or key > best[0]:
                best = (key, gram)
    return best[1]


@pytest.mark.parametrize("seed", range(6))
def test_the_last_ngram_found_in_the_counts_is_the_one_lmplz_streams_last(seed):
    """lmplz records the suffixes of its last n-gram at raw counts; the streamed builds find that n-gram in
    the count tables (highest order, plus the lower orders' rows that start a sentence).  On random texts
    of every order, reading the key tables a row at a time or at once, with the words' first-appearance
    order given block by block, it is the n-gram read off the text."""
    from ngramlm.kenlm_compat import FirstSeen, KeyTables, last_in_suffix_order, lmplz_vocab_ids

    rng = np.random.default_rng(seed)
    for _ in range(25):
        n = int(rng.integers(1, 6))
        W = int(rng.integers(2, 9))
        sents = [[f"w{rng.integers(0, W)}" for _ in range(rng.integers(0, 6))] for _ in range(rng.integers(1, 9))]
        vocab, enc, counts = _fit(sents, order=n)
        if n < 2 or not len(enc.ids):
            continue
        kid = lmplz_vocab_ids(np.asarray(enc.ids), len(vocab))
        want = _last_padded_by_text(enc, kid, n)
        for chunk in (1, 3, 1 << 20):
            tables = KeyTables.of_counts(counts)
            tables.chunk = chunk
            key, got = last_in_suffix_order(tables, kid)
            assert got == want and key == tuple(int(kid[w]) for w in reversed(want)), (sents, n, chunk)
        seen = FirstSeen()
        for block in np.array_split(np.asarray(enc.ids), 3):
            seen.add(block)
        by_blocks = lmplz_adjustments(None, counts, first_seen=seen.order)
        assert by_blocks == lmplz_adjustments(enc, counts)


@pytest.fixture(scope="module")
def unk_text(tmp_path_factory):
    """The toy text with <unk> words of its own (lmplz adds its own <unk> to the floor's types) and a new
    words on its last line (the last n-gram in lmplz's suffix order ends in the newest word, "word")."""
    from corpora.testing import toy_training_lines

    lines = toy_training_lines()
    for i in range(3, len(lines), 997):
        lines[i] = lines[i] + " <unk>"
    lines.append("brandnew word")
    path = tmp_path_factory.mktemp("kenlm_compat") / "train.txt"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


@pytest.mark.parametrize("estimation", ["memory", "disk"])
def test_a_streamed_compat_build_is_the_in_memory_one_bit_for_bit(unk_text, tmp_path, estimation):
    """train --memory --compat kenlm: the text counted in blocks (in memory or out of core) gives the
    in-memory compat model's ARPA file byte for byte, and it differs from the default's."""
    from ngramlm.io.arpa import write_arpa

    from corpora.tokenize import TokenizerSpec, make_tokenizer

    lines = unk_text.read_text("utf-8").split("\n")[:-1]
    vocab = Vocab(tokenizer=TokenizerSpec())  # as the streamed build reads the file: blank lines are sentences
    enc = vocab.fit_encode_lines(lines, make_tokenizer(TokenizerSpec()), keep_empty=True)
    ref = NgramLM(order=4, smoothing="mkn", compat="kenlm").fit(enc, vocab=vocab)
    rows = ref.info_["compat"]["kenlm"]["raw_count_rows"]
    assert ref.info_["compat"]["kenlm"]["uniform_types"] == vocab.n_types + 1 and rows[0] == vocab["word"]
    write_arpa(ref, tmp_path / "ref.arpa")
    write_arpa(NgramLM(order=4, smoothing="mkn").fit(enc, vocab=vocab), tmp_path / "default.arpa")
    msgs = []
    lm = NgramLM(order=4, smoothing="mkn", compat="kenlm").fit_files(
        [unk_text], memory="70M", temp_dir=tmp_path, estimation=estimation, progress=msgs.append)
    assert sum("counted block" in m for m in msgs) >= 3  # several blocks
    assert lm.info_["compat"] == ref.info_["compat"] and lm.info_["discounts"] == ref.info_["discounts"]
    write_arpa(lm, tmp_path / "streamed.arpa")
    ref_bytes = (tmp_path / "ref.arpa").read_bytes()
    assert (tmp_path / "streamed.arpa").read_bytes() == ref_bytes
    assert (tmp_path / "default.arpa").read_bytes() != ref_bytes


def test_train_memory_compat_kenlm_from_the_cli(run_cli, unk_text, tmp_path):
    code, _, err = run_cli("train", unk_text, "--order", 3, "--compat", "kenlm", "-o", tmp_path / "mem.arpa")
    assert code == 0, err
    code, _, err = run_cli("train", unk_text, "--order", 3, "--compat", "kenlm", "--memory", "70M",
                           "--estimation", "disk", "-o", tmp_path / "disk.arpa")
    assert code == 0, err
    assert (tmp_path / "disk.arpa").read_bytes() == (tmp_path / "mem.arpa").read_bytes()
    code, _, err = run_cli("train", unk_text, "--compat", "srilm", "--memory", "70M", "-o", tmp_path / "s.arpa")
    assert code == 2 and "--compat srilm estimates from the whole text's counts in memory" in err
