"""Pruning: count cut-offs and Stolcke entropy pruning keep a normalised model."""
import math

import numpy as np
import pytest

from ngramlm import NgramLM, NgramCounts
from ngramlm.tools.pruning import apply_keep, entropy_scores, ngram_words


@pytest.fixture(scope="module")
def tm(shared_corpora):
    from corpora import load_corpus, prepare

    return prepare(load_corpus("timemachine", data_dir=shared_corpora))


def _contexts(ds, rng, n=6):
    train = ds.corpus.sentences("train")
    out = []
    for _ in range(n):
        s = train[rng.integers(len(train))]
        i = int(rng.integers(0, len(s) + 1))
        out += [["<s>"] + s[:i], s[:i]]
    return out


@pytest.mark.parametrize("smoothing", ["mkn", "wb", "katz"])
def test_count_cutoffs_drop_rare_ngrams_and_stay_normalised(tm, smoothing):
    kw = {"discount_fallback": True} if smoothing == "katz" else {}
    full = NgramLM(order=3, smoothing=smoothing, **kw).fit(tm["train"], vocab=tm.vocab)
    lm = NgramLM(order=3, smoothing=smoothing, prune=[0, 1, 1], **kw).fit(tm["train"], vocab=tm.vocab)
    counts = NgramCounts.from_encoded(tm["train"], order=3, vocab_size=len(tm.vocab))
    # every kept trigram was seen at least twice; every bigram seen twice survives
    kept3 = {tuple(g) for g in ngram_words(lm, 3)}
    c3 = counts.to_dict_of_tuples(3)
    assert kept3 and all(c3[g] >= 2 for g in kept3)
    assert kept3 == {g for g, c in c3.items() if c >= 2}
    kept2 = {tuple(g) for g in ngram_words(lm, 2)}
    c2 = counts.to_dict_of_tuples(2)
    assert {g for g, c in c2.items() if c >= 2} <= kept2
    # contexts of kept trigrams are kept even when rare
    assert {g[:2] for g in kept3} <= kept2
    assert lm.n_ngrams_[2] < full.n_ngrams_[2]
    for ctx in _contexts(tm, np.random.default_rng(1)):
        assert abs(lm.next_probs(ctx).sum() - 1.0) < 1e-9
    assert lm.perplexity_report(tm["test"]).ppl > 0


def test_entropy_pruning_formula_matches_brute_force_kl(tm):
    lm = NgramLM(order=2, smoothing="wb").fit(tm["train"], vocab=tm.vocab)
    D = entropy_scores(lm)[1]
    grams = ngram_words(lm, 2)
    rng = np.random.default_rng(0)
    V = len(tm.vocab)
    for j in rng.choice(len(grams), size=3, replace=False):
        h, w = int(grams[j, 0]), int(grams[j, 1])
        hist = ["<s>"] if h == 1 else [tm.vocab.itos_[h]]
        p_before = lm.next_probs(hist)
        other = NgramLM(order=2, smoothing="wb").fit(tm["train"], vocab=tm.vocab)
        keep = [None, np.ones(len(grams), dtype=bool)]
        keep[1][j] = False
        other = NgramLM.from_tables(apply_keep(other, keep))
        p_after = other.next_probs(hist)
        mask = p_before > 0
        kl = float(np.sum(p_before[mask] * (np.log(p_before[mask]) - np.log(p_after[mask]))))
        P_h = lm.prob("</s>") if h == 1 else lm.prob(tm.vocab.itos_[h])  # SRILM: P(<s>) = p(</s>)
        assert D[j] == pytest.approx(P_h * kl, rel=1e-6, abs=1e-15)


def test_entropy_pruning_trades_size_for_perplexity(tm):
    full = NgramLM(order=3, smoothing="mkn", discount_fallback=(0.5, 1, 1.5)).fit(tm["train"], vocab=tm.vocab)
    small = NgramLM(order=3, smoothing="mkn", discount_fallback=(0.5, 1, 1.5), prune_entropy=1e-6).fit(
        tm["train"], vocab=tm.vocab)
    tiny = NgramLM(order=3, smoothing="mkn", discount_fallback=(0.5, 1, 1.5), prune_entropy=1e-4).fit(
        tm["train"], vocab=tm.vocab)
    assert sum(tiny.n_ngrams_) < sum(small.n_ngrams_) < sum(full.n_ngrams_)
    assert small.info_["pruned"]["ngrams_before"] == full.n_ngrams_
    for ctx in _contexts(tm, np.random.default_rng(2)):
        assert abs(tiny.next_probs(ctx).sum() - 1.0) < 1e-9
    # perplexity on training text rises as n-grams go
    r = [m.perplexity_report(tm["train"]).ppl for m in (full, small, tiny)]
    assert r[0] <= r[1] <= r[2]


def test_pruned_model_round_trips_through_arpa(tm, tmp_path):
    from ngramlm.io.arpa import write_arpa
    from ngramlm.loading import read_arpa

    lm = NgramLM(order=3, smoothing="mkn", discount_fallback=(0.5, 1, 1.5), prune=[0, 1, 1]).fit(
        tm["train"], vocab=tm.vocab)
    write_arpa(lm, tmp_path / "p.arpa")
    back = read_arpa(tmp_path / "p.arpa")
    enc, oov = back.encode(tm.corpus.sentences("test"))
    assert back.perplexity_report(enc, oov=oov).ppl == pytest.approx(lm.perplexity_report(tm["test"]).ppl, rel=1e-6)


# Bad pruning options and pruning a non-back-off model: tests/test_core_toy.py (no corpus needed).


def test_cli_prune(run_cli, shared_corpora, tmp_path, monkeypatch):
    code, _, err = run_cli("train", "--data-dir", shared_corpora, "timemachine", "-o", tmp_path / "m.npz",
                           "--order", "3", "--smoothing", "wb", "--prune", "0,1,1")
    assert code == 0, err
    assert NgramLM.load(tmp_path / "m.npz").info_["pruned"]["cutoffs"] == [0, 1, 1]


def test_entropy_pruning_agrees_with_kaldingram(tm, tmp_path):
    """kaldingram (a Python port of SRILM's -prune) keeps the same trigrams; bigrams differ
    only in `<s> w`, whose context probability it takes as 10^-99 (ARPA's <s>) where we,
    like SRILM's own convention for longer contexts, use p(</s>)."""
    import subprocess
    import sys

    pytest.importorskip("kaldingram")
    from ngramlm.io.arpa import write_arpa
    from ngramlm.loading import read_arpa
    from ngramlm.tools.pruning import prune_entropy

    lm = NgramLM(order=3, smoothing="mkn", discount_fallback=(0.5, 1, 1.5)).fit(tm["train"], vocab=tm.vocab)
    write_arpa(lm, tmp_path / "full.arpa")
    subprocess.run([sys.executable, "-m", "kaldingram.cli", "prune", "--lm", str(tmp_path / "full.arpa"),
                    "--write-lm", str(tmp_path / "k.arpa"), "--threshold", "1e-6", "--verbose", "5"],
                   check=True, stderr=subprocess.DEVNULL, stdout=subprocess.DEVNULL)
    theirs = read_arpa(tmp_path / "k.arpa")
    ours = read_arpa(tmp_path / "full.arpa")
    ours = NgramLM.from_tables(prune_entropy(ours, 1e-6))

    def grams(model, k):
        it = model.vocab_.itos_
        return {tuple(it[i] for i in g) for g in ngram_words(model, k)}

    assert grams(ours, 3) == grams(theirs, 3)
    assert len(grams(ours, 3)) < lm.n_ngrams_[2]
    extra = grams(ours, 2) - grams(theirs, 2)
    assert not grams(theirs, 2) - grams(ours, 2)
    assert all(g[0] == "<s>" for g in extra)
