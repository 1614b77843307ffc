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
