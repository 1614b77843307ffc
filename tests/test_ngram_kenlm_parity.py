"""Parity with KenLM on a committed lmplz-written ARPA file (tests/data/README.md)."""
from pathlib import Path

import numpy as np
import pytest

from corpora import Vocab
from corpora.toy import generate_corpus
from ngramlm import NgramLM
from ngramlm.loading import read_arpa
from ngramlm.tools.pruning import ngram_words

FIXTURE = Path(__file__).parent / "data" / "toy3.kenlm.arpa.gz"
LIMIT_FIXTURE = Path(__file__).parent / "data" / "toy3-limit.kenlm.arpa.gz"


@pytest.fixture(scope="module")
def toy():
    c = generate_corpus()
    return c.splits["train"][:1500], c.splits["test"][:300]


def _table(model, order):
    it = model.vocab_.itos_
    bo = model.log10_backoff_[order - 1] if order < model.order_ else None
    out = {}
    for j, g in enumerate(ngram_words(model, order)):
        words = tuple(it[i] for i in g)
        if words in (("<pad>",), ("<s>",)):
            continue
        out[words] = (model.log10_prob_[order - 1][j], 0.0 if bo is None else bo[j])
    return out


def test_our_mkn_equals_lmplz_entry_by_entry(toy):
    train, _ = toy
    vocab = Vocab().fit(train)
    ours = NgramLM(order=3, smoothing="mkn").fit(vocab.encode_sentences(train), vocab=vocab)
    kenlm_model = read_arpa(FIXTURE)
    for order in (1, 2, 3):
        a, b = _table(ours, order), _table(kenlm_model, order)
        assert set(a) == set(b), order
        dp = max(abs(a[g][0] - b[g][0]) for g in a)
        db = max(abs(a[g][1] - b[g][1]) for g in a)
        # lmplz prints 7 significant digits
        assert dp < 1e-6 and db < 1e-6, (order, dp, db)


def test_kenlm_written_arpa_scores_as_kenlm_scores_it(toy):
    kenlm = pytest.importorskip("kenlm")
    _, test = toy
    ours = read_arpa(FIXTURE)
    enc, oov = ours.encode(test)
    s = ours.token_scores(enc, oov=oov)
    model = kenlm.Model(str(FIXTURE))
    ref = [x for sent in test for x in model.full_scores(" ".join(sent))]
    assert np.allclose([r[0] for r in ref], s.log10_prob, atol=1e-6)
    assert [r[1] for r in ref] == s.ngram_length.tolist()
    assert [r[2] for r in ref] == s.oov.tolist()


def _half_the_words(train):
    """The word list of the --limit_vocab_file fixture: the more frequent half of the types."""
    from collections import Counter

    cnt = Counter(w for s in train for w in s)
    words = [w for w, _ in sorted(cnt.items(), key=lambda x: (-x[1], x[0]))]
    return words[: len(words) // 2]


def test_limit_vocab_with_compat_kenlm_equals_lmplz_entry_by_entry(toy):
    """lmplz --limit_vocab_file prunes inside its estimation (the pruned mass goes to the back-off
    weights, the uniform floor counts the kept types): with compat="kenlm" the same n-grams come out
    with the same numbers; the default limit (the closed-vocabulary renormalisation) keeps the same
    n-grams with other numbers."""
    train, _ = toy
    words = _half_the_words(train)
    vocab = Vocab().fit(train)
    ours = NgramLM(order=3, smoothing="mkn", compat="kenlm").fit(vocab.encode_sentences(train), vocab=vocab,
                                                                 limit_vocab=words)
    assert ours.vocab_limit_.removed_words == len(vocab.itos_) - 4 - len(words) > 1000
    kenlm_model = read_arpa(LIMIT_FIXTURE)
    closed = NgramLM(order=3, smoothing="mkn").fit(vocab.encode_sentences(train), vocab=vocab, limit_vocab=words)
    for order in (1, 2, 3):
        a, b, c = _table(ours, order), _table(kenlm_model, order), _table(closed, order)
        assert set(a) == set(b) == set(c), order
        dp = max(abs(a[g][0] - b[g][0]) for g in a)
        db = max(abs(a[g][1] - b[g][1]) for g in a)
        assert dp < 1e-6 and db < 1e-6, (order, dp, db)
        assert max(abs(c[g][0] - b[g][0]) for g in a) > 1e-3  # the renormalised limit is another model
