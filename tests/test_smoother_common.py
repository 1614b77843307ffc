"""Common checks every smoother must pass (in the spirit of scikit-learn's estimator checks).

One parametrized suite over ALL smoothers x orders, on the embedded toy corpus
(``toy_dataset``): fit returns self and leaves the constructor parameters alone;
log10 probabilities are finite (-inf only where documented: MLE on events it never
saw, and the never-seen ``<unk>`` under MLE and stupid backoff); distributions sum
to one; the vectorized scorer equals the single-query API; perplexity accounting;
native save/load; a refit is deterministic; an unfitted model says so.
"""
from __future__ import annotations

import math

import numpy as np
import pytest

from corpora import UNK_ID
from corpora.errors import NotFittedError
from ngramlm import SMOOTHERS, NgramLM

ALL_SMOOTHERS = sorted(SMOOTHERS)  # mkn kn absolute wb jm katz stupid addk laplace mle
ORDERS = [1, 2, 3, 5]


def params(smoothing: str, order: int) -> dict:
    """Only the parameters a smoother uses (unused ones are rejected)."""
    if smoothing == "jm":
        return {"lambdas": [0.7] * order}
    if smoothing == "addk":
        return {"k": 0.1}
    if smoothing == "stupid":
        return {"alpha": 0.4}
    return {}


_CACHE: dict = {}


def make(ds, smoothing, order) -> NgramLM:
    key = (smoothing, order)
    if key not in _CACHE:
        _CACHE[key] = NgramLM(order=order, smoothing=smoothing, **params(smoothing, order)).fit(
            ds["train"], vocab=ds.vocab)
    return _CACHE[key]


def test_the_suite_covers_every_registered_smoother():
    # A new smoother added to SMOOTHERS is picked up by every check below.
    assert set(ALL_SMOOTHERS) == {"mkn", "kn", "absolute", "wb", "jm", "katz", "stupid", "addk", "laplace", "mle"}


EACH = pytest.mark.parametrize("smoothing,order", [(s, o) for s in ALL_SMOOTHERS for o in ORDERS])


@EACH
def test_fit_returns_self_and_keeps_parameters(toy_dataset, smoothing, order):
    kw = params(smoothing, order)
    lm = NgramLM(order=order, smoothing=smoothing, **kw)
    before = dict(vars(lm))
    assert lm.fit(toy_dataset["train"], vocab=toy_dataset.vocab) is lm
    # Constructor parameters are not rewritten by fit (learned state ends in "_").
    assert {k: v for k, v in vars(lm).items() if not k.endswith("_") and not k.startswith("_")} == before
    assert lm.order_ == order and lm.vocab_ is toy_dataset.vocab
    assert lm.smoother_name_ == smoothing
    assert lm.is_distribution_ == (smoothing != "stupid")
    assert f"smoothing={smoothing!r}" in repr(lm)


@EACH
def test_unfitted_model_raises_not_fitted(smoothing, order):
    lm = NgramLM(order=order, smoothing=smoothing, **params(smoothing, order))
    with pytest.raises(NotFittedError, match="not fitted"):
        lm.log10_prob("a")
    with pytest.raises(NotFittedError):
        lm.next_probs([])


@EACH
def test_log10_probabilities_are_finite_except_where_documented(toy_dataset, smoothing, order):
    ds = toy_dataset
    lm = make(ds, smoothing, order)
    s = lm.token_scores(ds["test"])
    assert len(s) == ds["test"].n_tokens
    lp = s.log10_prob
    assert not np.isnan(lp).any() and (lp <= 0).all()
    bad = ~np.isfinite(lp)
    unk = ds["test"].ids == UNK_ID
    if smoothing == "mle":
        # MLE: -inf exactly for events never seen (no n-gram matched: length 0).
        assert np.array_equal(bad, s.ngram_length == 0)
        assert bad[unk].all()  # <unk> never occurs in the toy training text
    elif smoothing == "stupid":
        # Stupid backoff: only the never-seen <unk> has no relative frequency at all.
        assert np.array_equal(bad, unk)
    else:
        assert not bad.any()
    # Matched n-gram lengths: 1..order for back-off models (every id is a unigram);
    # additive models report 0 where the event's count is zero.
    assert (s.ngram_length <= order).all()
    if lm.kind_ == "backoff":
        assert (s.ngram_length >= 1).all()
    if order > 1:
        assert s.ngram_length.max() > 1  # longer n-grams do match on in-domain text


@EACH
def test_distributions_sum_to_one(toy_dataset, smoothing, order):
    ds = toy_dataset
    lm = make(ds, smoothing, order)
    train = ds.corpus.sentences("train")
    rng = np.random.default_rng(order)
    sums = []
    for _ in range(3):
        sent = train[rng.integers(len(train))]
        ctx = ["<s>"] + sent[: int(rng.integers(0, len(sent) + 1))]  # a seen history
        p = lm.next_probs(ctx)
        assert p[0] == 0 and p[1] == 0
        sums.append(p.sum())
        d = lm.distribution(ctx)
        assert set(d) == set(ds.vocab.itos_[2:]) and math.isclose(sum(d.values()), p.sum(), rel_tol=1e-12)
    if lm.is_distribution_:
        assert np.allclose(sums, 1.0, rtol=0, atol=1e-9)
    elif order > 1:
        assert not np.allclose(sums, 1.0, rtol=0, atol=1e-3)  # scores only, and says so


@EACH
def test_token_scores_equal_single_queries(toy_dataset, smoothing, order):
    ds = toy_dataset
    lm = make(ds, smoothing, order)
    sents = ds.corpus.sentences("test")[:4]
    s = lm.token_scores(ds.vocab.encode_sentences(sents))
    i = 0
    for sent in sents:
        hist = ["<s>"]
        for w in sent + ["</s>"]:
            one = lm.log10_prob(w, hist)
            assert one == pytest.approx(s.log10_prob[i], abs=1e-12) or one == s.log10_prob[i] == -math.inf
            hist.append(w)
            i += 1
    assert i == len(s)
    # Each sentence's total is the sum of its token scores (-inf if one token is -inf).
    tot = lm.sentence_log10_probs(ds.vocab.encode_sentences(sents))
    want = np.array([s.log10_prob[a:b].sum() for a, b in zip(s.sentence_starts[:-1], s.sentence_starts[1:])])
    assert len(tot) == len(sents)
    # (MLE's -inf tokens once turned every later sentence into NaN: -inf - -inf.)
    assert np.allclose(tot, want, rtol=1e-12, atol=1e-9) and np.array_equal(np.isinf(tot), np.isinf(want))


@EACH
def test_perplexity_report_accounting(toy_dataset, smoothing, order):
    ds = toy_dataset
    lm = make(ds, smoothing, order)
    text = ds["test"]
    r = lm.perplexity_report(text)
    s = lm.token_scores(text)
    assert r.tokens == r.words + r.sentences == text.n_tokens
    assert r.sentences == text.n_sentences == len(ds.corpus.sentences("test"))
    assert r.words == sum(len(x) for x in ds.corpus.sentences("test"))
    assert r.oovs == int(np.count_nonzero(text.ids == UNK_ID)) > 0
    finite = np.isfinite(s.log10_prob)
    assert r.zero_probs == int(np.count_nonzero(~finite))
    assert r.log10_prob == pytest.approx(float(s.log10_prob[finite].sum()), rel=1e-12)
    assert r.ppl == pytest.approx(10 ** (-r.log10_prob / (r.tokens - r.zero_probs)), rel=1e-12)
    assert r.ppl1 == pytest.approx(10 ** (-r.log10_prob / (r.tokens - r.zero_probs - r.sentences)), rel=1e-12)
    assert r.bits_per_token == pytest.approx(math.log2(r.ppl))
    if r.zero_probs == 0:
        assert lm.perplexity(text) == pytest.approx(r.ppl, rel=1e-12)
    else:
        assert lm.perplexity(text) == math.inf


@EACH
def test_native_save_load_round_trip(toy_dataset, smoothing, order, tmp_path):
    ds = toy_dataset
    lm = make(ds, smoothing, order)
    lm.save(tmp_path / "m.npz")
    back = NgramLM.load(tmp_path / "m.npz")
    assert back.summary() == lm.summary()
    assert back.vocab_ == lm.vocab_
    assert np.array_equal(back.token_scores(ds["test"]).log10_prob, lm.token_scores(ds["test"]).log10_prob)
    assert back.generate(num_words=15, random_state=3) == lm.generate(num_words=15, random_state=3)


@EACH
def test_refit_is_deterministic(toy_dataset, smoothing, order):
    ds = toy_dataset
    a = make(ds, smoothing, order)
    b = NgramLM(order=order, smoothing=smoothing, **params(smoothing, order)).fit(ds["train"], vocab=ds.vocab)
    tables = ("keys_", "log10_prob_", "log10_backoff_") if a.kind_ == "backoff" else ("keys_", "counts_", "ctx_total_")
    for name in tables:
        for x, y in zip(getattr(a, name), getattr(b, name)):
            assert np.array_equal(x, y), name
    assert a.summary() == b.summary()
    # Refitting the same object on other data replaces every fitted table (and the
    # hash index built by the earlier scoring calls): it scores as a fresh fit does.
    other = ds.vocab.encode_sentences(ds.corpus.sentences("train") + ds.corpus.sentences("valid"))
    b.token_scores(ds["test"])
    b.token_scores(ds["test"])  # the second call builds the hash index
    b.fit(other, vocab=ds.vocab)
    fresh = NgramLM(order=order, smoothing=smoothing, **params(smoothing, order)).fit(other, vocab=ds.vocab)
    assert b.n_ngrams_ == fresh.n_ngrams_
    assert order == 1 or sum(b.n_ngrams_[1:]) > sum(a.n_ngrams_[1:])
    assert np.array_equal(b.token_scores(ds["test"]).log10_prob, fresh.token_scores(ds["test"]).log10_prob)
