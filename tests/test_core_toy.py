"""Core invariants on the embedded toy corpus: they run in any clone, no files needed.

The same properties as the real-data tests (test_ngram_smoothing, test_ngram_pruning,
test_ngram_ptb), checked on ``toy_dataset`` (conftest.py): every smoother's
p(.|h) sums to one at every order 1..5, seen and unseen histories; count cut-offs
and entropy pruning against brute force; Katz against an independent dict
implementation; ARPA and native round trips; the n-gram path never imports torch.
PTB/KenLM parity stays on the real data (test_ngram_ptb.py, skipped without it).
"""
from __future__ import annotations

import copy
import math
import subprocess
import sys
from functools import lru_cache
from pathlib import Path

import numpy as np
import pytest

from corpora import UNK_ID, Vocab
from corpora.errors import InputError
from ngramlm import NgramCounts, NgramLM
from ngramlm.io.arpa import write_arpa
from ngramlm.loading import read_arpa
from ngramlm.tools.pruning import apply_keep, entropy_scores, ngram_words, prune_entropy

REPO_ROOT = Path(__file__).resolve().parent.parent

# Words the toy language never emits (its words are lower/upper-case letters only),
# so a history made of them is unseen at every order.
UNSEEN = ["<never-1>", "<never-2>", "<never-3>", "<never-4>"]

DISTRIBUTIONS = ["mkn", "kn", "absolute", "wb", "jm", "katz", "addk", "laplace", "mle"]
BACKOFF_FORM = ["mkn", "kn", "absolute", "wb", "jm", "katz"]
ORDERS = [1, 2, 3, 4, 5]


def params(smoothing: str, order: int) -> dict:
    """Only the parameters a smoother uses (smoothers reject the others)."""
    if smoothing == "jm":
        return {"lambdas": [0.6] * order}
    if smoothing == "addk":
        return {"k": 0.05}
    return {}


_MODELS: dict = {}


def fitted(ds, smoothing: str, order: int) -> NgramLM:
    """Models are cached per module: several tests read the same fit (they never modify it)."""
    key = (id(ds), smoothing, order)
    if key not in _MODELS:
        _MODELS[key] = NgramLM(order=order, smoothing=smoothing, **params(smoothing, order)).fit(
            ds["train"], vocab=ds.vocab)
    return _MODELS[key]


def histories(ds, order: int, rng: np.random.Generator, n: int = 3) -> tuple[list, list]:
    """(seen, unseen) histories.  Seen ones come from training sentences (with and
    without <s>; without <s> only when at least order-1 words long, so the whole
    context was seen); unseen ones include all-new words and an empty history."""
    train = ds.corpus.sentences("train")
    seen, unseen = [], []
    for _ in range(n):
        s = train[rng.integers(len(train))]
        i = int(rng.integers(0, len(s) + 1))
        seen.append(["<s>"] + s[:i])
        if i >= order - 1:
            seen.append(s[max(0, i - (order - 1)):i])
    unseen.append(UNSEEN[: max(order - 1, 1)])
    unseen.append(["<s>"] + UNSEEN[:2])
    unseen.append([train[0][0]] + UNSEEN[:1])  # seen word, then an unseen one
    return seen, unseen


# ============================================================================ sums to one
@pytest.mark.parametrize("order", ORDERS)
@pytest.mark.parametrize("smoothing", DISTRIBUTIONS)
def test_every_smoother_sums_to_one_at_every_order(toy_dataset, smoothing, order):
    ds = toy_dataset
    for w in UNSEEN:
        assert w not in ds.vocab
    lm = fitted(ds, smoothing, order)
    assert lm.is_distribution_
    seen, unseen = histories(ds, order, np.random.default_rng(order))
    rng = np.random.default_rng(100 + order)
    for ctx in seen + unseen:
        p = lm.next_probs(ctx)
        assert p[0] == 0 and p[1] == 0, ctx  # <pad>, <s> are never predicted
        if smoothing == "mle" and ctx in unseen and order > 1:
            # MLE is undefined after a history it never saw: every word gets 0
            # (scored as -inf and counted in PerplexityReport.zero_probs).
            assert p.sum() == 0.0, ctx
            continue
        assert abs(p.sum() - 1.0) < 1e-9, (smoothing, order, ctx, p.sum())
        if smoothing != "mle":
            assert (p[2:] > 0).all(), ctx  # smoothing leaves no predicted type at zero
        # The vector agrees with single queries (a different code path: one padded row).
        for j in rng.choice(np.arange(2, len(p)), size=3, replace=False):
            assert lm.prob(ds.vocab.itos_[j], ctx) == pytest.approx(p[j], rel=1e-12, abs=1e-300)


def test_mle_seen_history_is_relative_frequency(toy_dataset):
    """MLE p(w | <s>) is c(<s> w) / c(<s> .) = c(<s> w) / #sentences, counted by hand."""
    ds = toy_dataset
    lm = fitted(ds, "mle", 2)
    train = ds.corpus.sentences("train")
    first = {}
    for s in train:
        w = s[0] if s else "</s>"
        first[w] = first.get(w, 0) + 1
    for w, c in list(first.items())[:20]:
        assert lm.prob(w, ["<s>"]) == pytest.approx(c / len(train), rel=1e-12)


@pytest.mark.parametrize("order", [2, 3, 5])
def test_stupid_backoff_is_not_a_distribution_but_scores_are_finite(toy_dataset, order):
    ds = toy_dataset
    lm = NgramLM(order=order, smoothing="stupid").fit(ds["train"], vocab=ds.vocab)
    assert not lm.is_distribution_
    seen, unseen = histories(ds, order, np.random.default_rng(7))
    sums = [lm.next_probs(ctx).sum() for ctx in seen + unseen]
    # Not normalised: some history's scores add up to clearly more or less than 1.
    assert max(abs(s - 1.0) for s in sums) > 0.01
    # After an unseen history of order-1 new words every level backs off:
    # score = alpha^(order-1) * c(w) / N, so the scores add up to alpha^(order-1).
    assert lm.next_probs(UNSEEN[:order - 1]).sum() == pytest.approx(0.4 ** (order - 1), rel=1e-12)
    # Every word seen in training, and </s>, gets a finite score after any history.
    for ctx in seen + unseen:
        p = lm.next_probs(ctx)
        assert (p[4:] > 0).all() and p[2] > 0
    # <unk> never occurs in the toy training text: like MLE, stupid backoff gives it 0.
    assert lm.next_probs(["<s>"])[UNK_ID] == 0.0
    s = lm.token_scores(ds["test"])
    assert np.isfinite(s.log10_prob[~s.oov]).all()


# ============================================================================ pruning
def _counts(ds, order):
    return NgramCounts.from_encoded(ds["train"], order=order, vocab_size=len(ds.vocab))


def _gram_table(lm, k):
    """{gram ids: (log10 p, log10 backoff or None)} of the stored k-grams."""
    bo = lm.log10_backoff_[k - 1] if k < lm.order_ else None
    return {tuple(int(x) for x in g): (lm.log10_prob_[k - 1][j], None if bo is None else bo[j])
            for j, g in enumerate(ngram_words(lm, k))}


@pytest.mark.parametrize("smoothing", ["mkn", "wb", "katz", "kn", "absolute", "jm"])
def test_count_cutoffs_keep_exactly_the_brute_force_set(toy_dataset, smoothing):
    ds = toy_dataset
    order, cut = 4, [0, 1, 1, 2]
    full = fitted(ds, smoothing, order)
    lm = NgramLM(order=order, smoothing=smoothing, prune=cut, **params(smoothing, order)).fit(
        ds["train"], vocab=ds.vocab)
    counts = _counts(ds, order)
    kept = {k: {tuple(int(x) for x in g) for g in ngram_words(lm, k)} for k in range(2, order + 1)}
    # Brute force, top order down: an n-gram stays if its count beats the cut-off,
    # or if it is the context of a kept longer n-gram (its entry holds that back-off).
    want = {}
    for k in range(order, 1, -1):
        c = counts.to_dict_of_tuples(k)
        want[k] = {g for g, n in c.items() if n > cut[k - 1]}
        if k < order:
            want[k] |= {g[:k] for g in want[k + 1]}
        assert kept[k] == want[k], (smoothing, k)
    assert lm.n_ngrams_[3] < full.n_ngrams_[3] and lm.n_ngrams_[0] == full.n_ngrams_[0]
    assert lm.info_["pruned"]["ngrams_before"] == full.n_ngrams_
    # Pruning only drops entries: a kept n-gram keeps its probability...
    for k in range(2, order + 1):
        a, b = _gram_table(full, k), _gram_table(lm, k)
        assert all(b[g][0] == a[g][0] for g in b)
    # ...and the back-off weights are recomputed so every p(.|h) sums to one again.
    seen, unseen = histories(ds, order, np.random.default_rng(11), n=4)
    for ctx in seen + unseen:
        assert abs(lm.next_probs(ctx).sum() - 1.0) < 1e-9, ctx
    r = lm.perplexity_report(ds["test"])
    assert r.zero_probs == 0 and math.isfinite(r.ppl)


def _brute_force_D(lm, k, j, ds):
    """P(h) * KL(p(.|h) || p'(.|h)) in nats when only entry j of order k is dropped."""
    g = ngram_words(lm, k)[j]
    hist = [ds.vocab.itos_[int(x)] for x in g[:-1]]
    p_before = lm.next_probs(hist)
    other = copy.deepcopy(lm)
    keep = [None] + [np.ones(len(other.keys_[i - 1]), dtype=bool) for i in range(2, lm.order_ + 1)]
    keep[k - 1][j] = False
    other = NgramLM.from_tables(apply_keep(other, keep))
    p_after = other.next_probs(hist)
    m = p_before > 0
    kl = float(np.sum(p_before[m] * (np.log(p_before[m]) - np.log(p_after[m]))))
    # P(h) by the chain rule; a leading <s> has the probability of </s> (SRILM).
    logP = 0.0
    for i, w in enumerate(hist):
        if w == "<s>":
            logP += lm.log10_prob("</s>")
        else:
            logP += lm.log10_prob(w, hist[:i])
    return 10.0 ** logP * kl


@pytest.mark.parametrize("smoothing,order", [("wb", 2), ("mkn", 3), ("katz", 3)])
def test_entropy_pruning_formula_matches_brute_force_kl(toy_dataset, smoothing, order):
    """Stolcke's closed form against removing one highest-order n-gram for real.
    (For lower orders the closed form, like SRILM's, ignores the effect on longer
    contexts that back off through the n-gram, so only the top order is exact.)"""
    ds = toy_dataset
    lm = fitted(ds, smoothing, order)
    D = entropy_scores(lm)[order - 1]
    rng = np.random.default_rng(order)
    grams = ngram_words(lm, order)
    picks = list(rng.choice(len(grams), size=4, replace=False))
    picks.append(int(np.flatnonzero(grams[:, 0] == 1)[0]))  # one whose history starts with <s>
    for j in picks:
        assert D[j] == pytest.approx(_brute_force_D(lm, order, int(j), ds), rel=1e-6, abs=1e-15)


def test_entropy_pruning_keeps_exactly_what_the_threshold_says(toy_dataset):
    ds = toy_dataset
    full = fitted(ds, "mkn", 3)
    D = entropy_scores(full)
    lm = copy.deepcopy(full)
    thr = 1e-6
    lm = NgramLM.from_tables(prune_entropy(lm, thr))
    keep3 = {tuple(int(x) for x in g) for g, d in zip(ngram_words(full, 3), D[2]) if math.expm1(d) >= thr}
    keep2 = {tuple(int(x) for x in g) for g, d in zip(ngram_words(full, 2), D[1]) if math.expm1(d) >= thr}
    keep2 |= {g[:2] for g in keep3}
    assert {tuple(int(x) for x in g) for g in ngram_words(lm, 3)} == keep3
    assert {tuple(int(x) for x in g) for g in ngram_words(lm, 2)} == keep2
    assert 0 < len(keep3) < full.n_ngrams_[2]


def test_entropy_pruning_trades_size_for_perplexity(toy_dataset):
    ds = toy_dataset
    full = fitted(ds, "mkn", 3)
    small = NgramLM(order=3, smoothing="mkn", prune_entropy=1e-6).fit(ds["train"], vocab=ds.vocab)
    tiny = NgramLM(order=3, smoothing="mkn", prune_entropy=1e-4).fit(ds["train"], vocab=ds.vocab)
    assert sum(tiny.n_ngrams_) < sum(small.n_ngrams_) < sum(full.n_ngrams_)
    assert small.info_["pruned"]["ngrams_before"] == full.n_ngrams_
    seen, unseen = histories(ds, 3, np.random.default_rng(2), n=4)
    for ctx in seen + unseen:
        assert abs(tiny.next_probs(ctx).sum() - 1.0) < 1e-9
    # Perplexity on the training text rises as n-grams go.
    r = [m.perplexity_report(ds["train"]).ppl for m in (full, small, tiny)]
    assert r[0] <= r[1] <= r[2]


@pytest.mark.parametrize("kw,needle", [
    ({"prune": [1, 1]}, "unigrams cannot be pruned"),
    ({"prune": [0, 2, 1]}, "must not decrease"),
    ({"prune_entropy": -1.0}, ">= 0"),
])
def test_bad_pruning_options(toy_dataset, kw, needle):
    with pytest.raises(InputError, match=needle):
        NgramLM(order=3, smoothing="wb", **kw).fit(toy_dataset["train"], vocab=toy_dataset.vocab)


def test_pruning_a_non_backoff_model_is_refused(toy_dataset):
    with pytest.raises(InputError, match="back-off model"):
        NgramLM(order=2, smoothing="laplace", prune=[0, 1]).fit(toy_dataset["train"], vocab=toy_dataset.vocab)


# ============================================================================ Katz
def katz_reference(sentences, order, types, k_max=5):
    """Katz back-off recomputed from plain dicts: ``p(w | h)`` as a function.

    Good-Turing ratios with Katz's normalisation per order, counts above k_max
    trusted; the left-over mass of a context goes to the lower order through
    ``alpha(h) = (1 - sum_seen p(w|h)) / (1 - sum_seen p(w|h'))``; the unigram
    left-over is spread uniformly over all predicted types.  A context whose seen
    words take all the mass is given one pseudo-count for the unseen (documented
    in Katz's docstring), so no event gets probability zero.
    """
    follow = [dict() for _ in range(order + 1)]  # follow[k][context of k-1 words] = {w: count}
    for s in sentences:
        p = ["<s>"] + s + ["</s>"]
        for i in range(1, len(p)):
            for k in range(1, min(order, i + 1) + 1):
                h = tuple(p[i - k + 1:i])
                d = follow[k].setdefault(h, {})
                d[p[i]] = d.get(p[i], 0) + 1

    def ratios(k):
        n = {}
        for d in follow[k].values():
            for c in d.values():
                n[c] = n.get(c, 0) + 1
        common = (k_max + 1) * n[k_max + 1] / n[1]
        out = {}
        for c in range(1, k_max + 1):
            raw = (c + 1) * n[c + 1] / n[c] / c
            r = (raw - common) / (1 - common)
            # SRILM's rule: a ratio outside (0, 1], or r* > r, leaves that count undiscounted.
            out[c] = r if 0 < r <= 1 and raw <= 1 else 1.0
        return out

    disc = {k: ratios(k) for k in range(1, order + 1)}
    uni = follow[1][()]
    N = sum(uni.values())
    pu = {w: disc[1].get(uni.get(w, 0), 1.0) * uni.get(w, 0) / N for w in types}
    if 1.0 - sum(pu.values()) <= 1e-12:  # nothing discounted: one pseudo-count for the unseen (the docstring's rule)
        pu = {w: disc[1].get(uni.get(w, 0), 1.0) * uni.get(w, 0) / (N + 1) for w in types}
    left = 1.0 - sum(pu.values())
    pu = {w: x + left / len(types) for w, x in pu.items()}

    @lru_cache(maxsize=None)
    def seen_and_alpha(h):
        k = len(h) + 1
        d = follow[k].get(h)
        if not d:
            return None, 1.0  # no continuations: back off with weight 1
        tot = sum(d.values())
        seen = {w: disc[k].get(c, 1.0) * c / tot for w, c in d.items()}
        if sum(seen.values()) > 1.0 - 1e-9:
            seen = {w: x * tot / (tot + 1.0) for w, x in seen.items()}
        lower = sum(prob(w, h[1:]) for w in seen)
        alpha = 0.0 if 1.0 - lower <= 1e-12 else (1.0 - sum(seen.values())) / (1.0 - lower)
        return seen, alpha

    def prob(w, h):
        h = tuple(h)
        if not h:
            return pu[w]
        seen, alpha = seen_and_alpha(h)
        if seen is not None and w in seen:
            return seen[w]
        return alpha * prob(w, h[1:])

    return prob, follow


@pytest.mark.parametrize("order", [2, 3])
def test_katz_matches_an_independent_dict_implementation(toy_dataset, order):
    ds = toy_dataset
    lm = fitted(ds, "katz", order)
    train = ds.corpus.sentences("train")
    types = [w for w in ds.vocab.itos_ if w not in ("<pad>", "<s>")]
    ref, follow = katz_reference(train, order, types)
    rng = np.random.default_rng(order)
    hists = [("<s>",)]
    for _ in range(8):
        s = ["<s>"] + train[rng.integers(len(train))] + ["</s>"]
        i = int(rng.integers(1, len(s) - 1))
        hists.append(tuple(s[max(0, i - order + 1):i]))
    hists.append(tuple(UNSEEN[:order - 1]))
    checked = 0
    for h in hists:
        # Words seen after h (the discounted branch) and random ones (mostly the back-off branch).
        after = sorted(follow[len(h) + 1].get(h, {}))[:15]
        for w in after + list(rng.choice(types, 15)) + ["</s>", "<unk>"]:
            assert lm.prob(w, list(h)) == pytest.approx(ref(w, h), rel=1e-9), (h, w)
            checked += 1
    assert checked >= 250


# ============================================================================ round trips
def _scores(lm, ds):
    sents = ds.corpus.sentences("test")
    enc, oov = lm.encode(sents)
    return lm.token_scores(enc, oov=oov).log10_prob


def _rounded_like_arpa(lm):
    """A copy of ``lm`` whose tables hold exactly what ARPA's 7 significant digits keep."""
    out = copy.deepcopy(lm)
    r = np.vectorize(lambda x: float(f"{x:.7g}") if math.isfinite(x) else x, otypes=[np.float64])
    out.log10_prob_ = [r(a) if len(a) else a for a in lm.log10_prob_]
    out.log10_backoff_ = [r(a) if len(a) else a for a in lm.log10_backoff_]
    out._index = None
    return out


@pytest.mark.parametrize("prune", [None, [0, 1, 1]])
@pytest.mark.parametrize("smoothing", BACKOFF_FORM)
def test_arpa_and_native_round_trips_score_identically(toy_dataset, smoothing, prune, tmp_path):
    ds = toy_dataset
    if prune is None:
        lm = fitted(ds, smoothing, 3)
    else:
        lm = NgramLM(order=3, smoothing=smoothing, prune=prune, **params(smoothing, 3)).fit(
            ds["train"], vocab=ds.vocab)
    ours = _scores(lm, ds)
    assert np.isfinite(ours).all()

    # Native: bit-identical tables, so bit-identical scores.
    lm.save(tmp_path / "m.npz")
    back = NgramLM.load(tmp_path / "m.npz")
    assert back.vocab_ == lm.vocab_ and back.n_ngrams_ == lm.n_ngrams_
    for a, b in zip(lm.keys_ + lm.log10_prob_ + lm.log10_backoff_, back.keys_ + back.log10_prob_ + back.log10_backoff_):
        assert np.array_equal(a, b)
    assert np.array_equal(_scores(back, ds), ours)

    # ARPA keeps 7 significant digits: the reader must reproduce exactly the model
    # those digits describe (1e-9), which is within 1e-5 of the original.
    write_arpa(lm, tmp_path / "m.arpa")
    arpa = read_arpa(tmp_path / "m.arpa")
    assert arpa.vocab_.itos_ == lm.vocab_.itos_ and arpa.n_ngrams_ == lm.n_ngrams_
    for a, b in zip(lm.keys_, arpa.keys_):
        assert np.array_equal(a, b)
    got = _scores(arpa, ds)
    assert np.allclose(got, _scores(_rounded_like_arpa(lm), ds), rtol=0, atol=1e-9)
    assert np.allclose(got, ours, rtol=0, atol=1e-5)
    # Writing what was read gives the same file again (a fixed point).
    write_arpa(arpa, tmp_path / "again.arpa")
    assert (tmp_path / "again.arpa").read_bytes() == (tmp_path / "m.arpa").read_bytes()
    # An ARPA model saved natively scores as the ARPA file does.
    arpa.save(tmp_path / "arpa.npz")
    assert np.array_equal(_scores(NgramLM.load(tmp_path / "arpa.npz"), ds), got)


@pytest.mark.parametrize("smoothing", ["addk", "laplace", "mle", "stupid"])
def test_non_backoff_models_round_trip_natively_but_refuse_arpa(toy_dataset, smoothing, tmp_path):
    ds = toy_dataset
    lm = fitted(ds, smoothing, 3) if smoothing != "stupid" else NgramLM(order=3, smoothing="stupid").fit(
        ds["train"], vocab=ds.vocab)
    lm.save(tmp_path / "m.npz")
    assert np.array_equal(_scores(NgramLM.load(tmp_path / "m.npz"), ds), _scores(lm, ds))
    with pytest.raises(InputError):
        write_arpa(lm, tmp_path / "m.arpa")
    assert not (tmp_path / "m.arpa").exists()


# ============================================================================ no torch
def test_ngram_path_never_imports_torch(tmp_path):
    """Importing corpora/ngramlm and training + scoring an n-gram model on the toy
    corpus through the CLI must not import torch (the n-gram path is torch-free)."""
    code = (
        "import sys\n"
        "import corpora, ngramlm, ngramlm.io.arpa, ngramlm.io.native, ngramlm.tools.pruning, ngramlm.tuning\n"
        "import corpora.toy, corpora.tokenize, corpora.vocab\n"
        "assert 'torch' not in sys.modules, 'importing the packages imported torch'\n"
        "model = sys.argv[1]\n"
        "import cli\n"
        "for args in (['train', 'toy', '-o', model, '--order', '2'], ['ppl', model, 'toy'],\n"
        "             ['train', 'toy', '-o', model + '.arpa', '--order', '2', '--smoothing', 'wb'],\n"
        "             ['ppl', model + '.arpa', 'toy']):\n"
        "    try: cli.main(args)\n"
        "    except SystemExit as e: assert not e.code, (args, e.code)\n"
        "assert 'torch' not in sys.modules, 'torch was imported'\n"
        "print('no-torch-ok')\n"
    )
    out = subprocess.run([sys.executable, "-c", code, str(tmp_path / "m.npz")], capture_output=True, text=True,
                         cwd=REPO_ROOT, env={"PATH": "/usr/bin:/bin", "HOME": str(tmp_path)}, timeout=300)
    assert "no-torch-ok" in out.stdout, out.stderr[-3000:]
    assert out.stdout.count("Perplexity including OOVs") == 2, out.stdout


def test_katz_fallback_leaves_no_type_at_zero():
    """Katz's docstring promises no event gets probability zero, also with
    discount_fallback on data whose unigram Good-Turing ratios are degenerate (a
    small toy).  Undiscounted unigrams once left the never-seen <unk> at p = 0, so
    OOV test tokens scored -inf."""
    from corpora import load_corpus, prepare
    from corpora.toy import ToyConfig

    ds = prepare(load_corpus("toy", toy_config=ToyConfig(n_train_tokens=20_000, n_valid_tokens=100,
                                                         n_test_tokens=100, vocab_size=1000)))
    ruled = NgramLM(order=2, smoothing="katz").fit(ds["train"], vocab=ds.vocab)  # SRILM's rule, a warning
    assert any(w.startswith("Good-Turing 1-grams") for w in ruled.info_["warnings"])
    lm = NgramLM(order=2, smoothing="katz", discount_fallback=True).fit(ds["train"], vocab=ds.vocab)
    for model in (ruled, lm):
        for ctx in (["<s>"], UNSEEN[:1], []):
            p = model.next_probs(ctx)
            assert abs(p.sum() - 1.0) < 1e-9
            assert (p[2:] > 0).all() and p[UNK_ID] > 0
