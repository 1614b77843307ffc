"""The embedded toy language: exact probabilities, exact entropy, Zipf, long-range dependency."""
from __future__ import annotations

import math
from collections import Counter, defaultdict

import numpy as np
import pytest

from corpora.errors import InputError
from corpora.toy import EOS, RESERVED, ToyConfig, ToyCorpus, ToyLanguage, generate_corpus

SMALL = ToyConfig(seed=3, n_train_tokens=20_000, n_valid_tokens=3_000, n_test_tokens=3_000)


@pytest.fixture(scope="module")
def corpus() -> ToyCorpus:
    return generate_corpus()


@pytest.fixture(scope="module")
def lang(corpus) -> ToyLanguage:
    return corpus.language


def _ratio_and_se(bits: np.ndarray, tokens: np.ndarray) -> tuple:
    """Bits per token over i.i.d. sentences, and its standard error (delta method)."""
    rate = bits.sum() / tokens.sum()
    resid = bits - rate * tokens
    se = resid.std(ddof=1) / math.sqrt(len(bits)) / tokens.mean()
    return rate, se


def _dep_events(lang: ToyLanguage, sentences) -> list:
    """(origin word, filler length, 4-word window before the language word, language word, prefix)."""
    origins = set(lang.classes["ORIGIN"])
    deps = set(lang.classes["DEP"])
    out = []
    for s in sentences:
        origin = None
        for i, w in enumerate(s):
            if w in origins:
                origin = (i, w)
            elif w in deps:
                window = tuple((["<s>"] * 4 + s)[i:i + 4])
                out.append((origin[1], i - origin[0] - 2, window, w, s[:i]))
    return out


def _plugin_conditional_entropy(pairs) -> float:
    by = defaultdict(Counter)
    for x, y in pairs:
        by[x][y] += 1
    n = len(pairs)
    h = 0.0
    for counts in by.values():
        m = sum(counts.values())
        h -= sum(c / n * math.log2(c / m) for c in counts.values())
    return h


# ---------------------------------------------------------------------------- corpus shape
def test_default_splits_sizes_and_truth_fields(corpus):
    cfg = corpus.config
    assert cfg == ToyConfig()
    targets = {"train": cfg.n_train_tokens, "valid": cfg.n_valid_tokens, "test": cfg.n_test_tokens}
    for split, target in targets.items():
        sents = corpus.splits[split]
        n = sum(len(s) + 1 for s in sents)
        truth = corpus.truth[split]
        assert truth["n_tokens"] == n
        assert truth["n_sentences"] == len(sents)
        # whole sentences: the split stops with the first sentence that reaches the target
        assert target <= n < target + len(sents[-1]) + 1
        assert n - (len(sents[-1]) + 1) < target
        assert truth["bits_per_token"] == pytest.approx(-truth["log2prob"] / n, rel=1e-12)
        assert truth["perplexity"] == pytest.approx(2.0 ** truth["bits_per_token"], rel=1e-12)
        assert truth["entropy_rate_bits"] == corpus.language.entropy_rate_bits()
    assert 150_000 <= corpus.truth["train"]["n_tokens"] <= 201_000


def test_same_seed_same_corpus_other_seed_other_corpus():
    a = generate_corpus(SMALL)
    b = generate_corpus(ToyConfig(seed=3, n_train_tokens=20_000, n_valid_tokens=3_000, n_test_tokens=3_000))
    assert a.splits == b.splits
    assert a.truth == b.truth
    assert a.language.words == b.language.words
    c = generate_corpus(ToyConfig(seed=4, n_train_tokens=20_000, n_valid_tokens=3_000, n_test_tokens=3_000))
    assert c.splits["train"] != a.splits["train"]
    assert c.splits["test"] != a.splits["test"]
    assert c.language.words != a.language.words
    # each split has its own stream: resizing train leaves valid and test untouched
    d = generate_corpus(ToyConfig(seed=3, n_train_tokens=5_000, n_valid_tokens=3_000, n_test_tokens=3_000))
    assert d.splits["valid"] == a.splits["valid"] and d.splits["test"] == a.splits["test"]
    assert d.splits["train"] == a.splits["train"][:len(d.splits["train"])]


def test_sample_sentence_reproducible_and_scored(lang):
    w1, lp1 = lang.sample_sentence(np.random.default_rng(11))
    w2, lp2 = lang.sample_sentence(np.random.default_rng(11))
    assert (w1, lp1) == (w2, lp2)
    assert lp1 == pytest.approx(lang.sentence_log2prob(w1), abs=1e-9)
    assert lp1 < 0


# ---------------------------------------------------------------------------- vocabulary
def test_vocabulary_size_uniqueness_and_reserved(corpus, lang):
    cfg = corpus.config
    assert len(lang.words) == cfg.vocab_size == 4000
    assert len(set(lang.words)) == len(lang.words)
    assert not set(lang.words) & RESERVED
    assert all(w and w.isalpha() for w in lang.words)
    seen = Counter(w for s in corpus.splits["train"] for w in s)
    # every emitted word is in the vocabulary; no reserved token is ever emitted
    for split in ("train", "valid", "test"):
        emitted = {w for s in corpus.splits[split] for w in s}
        assert emitted <= set(lang.words)
        assert not emitted & RESERVED
    # a Zipf tail leaves some types unseen in 200k tokens, but most are there
    assert 0.9 * cfg.vocab_size <= len(seen) <= cfg.vocab_size
    small = ToyLanguage(ToyConfig(vocab_size=1000))
    assert len(set(small.words)) == 1000


def test_zipf_like_rank_frequency(corpus):
    freq = np.array(sorted(Counter(w for s in corpus.splits["train"] for w in s).values(), reverse=True), float)
    ranks = np.arange(1, len(freq) + 1)
    slope_1000 = np.polyfit(np.log(ranks[:1000]), np.log(freq[:1000]), 1)[0]
    frequent = freq >= 5
    slope_freq = np.polyfit(np.log(ranks[frequent]), np.log(freq[frequent]), 1)[0]
    assert -1.3 <= slope_1000 <= -0.8, slope_1000
    assert -1.3 <= slope_freq <= -0.8, slope_freq


# ---------------------------------------------------------------------------- exact probabilities
def test_next_word_distribution_sums_to_one_and_matches_sentence_log2prob(lang):
    rng = np.random.default_rng(5)
    n_prefixes = 0
    for _ in range(40):
        words, lp = lang.sample_sentence(rng)
        chain = 0.0
        for i in range(len(words) + 1):
            dist = lang.next_word_distribution(words[:i])
            assert math.fsum(dist.values()) == pytest.approx(1.0, abs=1e-12)
            assert min(dist.values()) > 0
            nxt = words[i] if i < len(words) else EOS
            chain += math.log2(dist[nxt])
            n_prefixes += 1
        assert chain == pytest.approx(lang.sentence_log2prob(words), abs=1e-9)
        assert lp == pytest.approx(chain, abs=1e-9)
    assert n_prefixes > 300
    # the start state cannot end the sentence; a clause end can
    assert EOS not in lang.next_word_distribution([])


def test_impossible_input(lang):
    dep_word = lang.classes["DEP"][0]
    assert lang.sentence_log2prob([dep_word]) == -math.inf  # a language word cannot open a sentence
    assert lang.sentence_log2prob(["<unk>"]) == -math.inf
    assert lang.sentence_log2prob([]) == -math.inf  # the empty sentence is impossible
    with pytest.raises(InputError):
        lang.next_word_distribution([dep_word])
    words, _ = lang.sample_sentence(np.random.default_rng(2))
    with pytest.raises(InputError):
        lang.next_word_distribution(words + [EOS])


def test_truth_log2prob_equals_exact_scorer(corpus, lang):
    for split in ("valid", "test"):
        total = math.fsum(lang.sentence_log2prob(s) for s in corpus.splits[split])
        assert total == pytest.approx(corpus.truth[split]["log2prob"], rel=1e-10)


# ---------------------------------------------------------------------------- exact entropy
def test_entropy_rate_matches_monte_carlo(lang):
    sents, lp = lang.sample_sentences(np.random.default_rng(123), 20_000)
    tokens = np.array([len(s) + 1 for s in sents], float)
    rate, se = _ratio_and_se(-lp, tokens)
    assert se < 0.02  # the check is sharp enough to catch a real error
    assert abs(rate - lang.entropy_rate_bits()) < 4 * se, (rate, lang.entropy_rate_bits(), se)
    # the exact expected sentence length and entropy, too
    len_se = tokens.std(ddof=1) / math.sqrt(len(tokens))
    assert abs(tokens.mean() - lang.expected_sentence_tokens()) < 4 * len_se
    h_se = lp.std(ddof=1) / math.sqrt(len(lp))
    assert abs(-lp.mean() - lang.sentence_entropy_bits()) < 4 * h_se
    # and the default language's numbers, so a change to the grammar is noticed
    assert lang.entropy_rate_bits() == pytest.approx(5.797, abs=0.005)
    assert lang.expected_sentence_tokens() == pytest.approx(13.097, abs=0.005)


def test_test_split_perplexity_consistent_with_entropy_rate(corpus, lang):
    sents = corpus.splits["test"]
    bits = -np.array([lang.sentence_log2prob(s) for s in sents])
    tokens = np.array([len(s) + 1 for s in sents], float)
    rate, se = _ratio_and_se(bits, tokens)
    truth = corpus.truth["test"]
    assert rate == pytest.approx(truth["bits_per_token"], rel=1e-10)
    assert abs(truth["bits_per_token"] - lang.entropy_rate_bits()) < 4 * se
    assert 45 < truth["perplexity"] < 70


# ---------------------------------------------------------------------------- long-range dependency
def test_long_range_dependency_beats_any_5gram_window(corpus, lang):
    train = _dep_events(lang, corpus.splits["train"])
    held = _dep_events(lang, corpus.splits["valid"] + corpus.splits["test"])
    assert len(train) > 3000 and len(held) > 500
    filler = np.array([e[1] for e in train])
    # the filler is often longer than 10 words; mostly the origin lies outside a 5-gram's 4-word window
    assert (filler > 10).mean() > 0.3
    assert (filler >= 3).mean() > 0.7
    # the latent is recoverable from the words: it is the automaton's state
    origin_index = {w: k for k, w in enumerate(lang.classes["ORIGIN"])}
    for origin, _, _, _, prefix in held[:50]:
        assert lang.state_of(prefix)[1] == origin_index[origin]
    # H(language word | latent origin) is small: exactly, and estimated from samples
    true_bits = np.array([-math.log2(lang.next_word_distribution(p)[d]) for _, _, _, d, p in held])
    assert true_bits.mean() < 1.3
    h_given_latent = _plugin_conditional_entropy([(e[0], e[3]) for e in train])
    assert h_given_latent < 1.0
    # A 4-word window only knows the origin when it is inside the window: given what a
    # window can say about the latent, the language word keeps > 3 bits of uncertainty.
    h_given_window_info = _plugin_conditional_entropy([(e[0] if e[1] < 3 else None, e[3]) for e in train])
    assert h_given_window_info > 3.0
    assert h_given_window_info > h_given_latent + 2.5
    # An actual 5-gram (interpolated Witten-Bell over windows of 0..4 words, told the word
    # class), trained on the train split, pays more than 3 bits per language word on held-out text.
    counts = [defaultdict(Counter) for _ in range(5)]
    for _, _, window, d, _ in train:
        for o in range(5):
            counts[o][window[4 - o:]][d] += 1
    n_dep = len(lang.classes["DEP"])

    def p5(window, d):
        p = 1.0 / n_dep
        for o in range(5):
            c = counts[o].get(window[4 - o:])
            if c:
                n, t = sum(c.values()), len(c)
                p = (c[d] + t * p) / (n + t)
        return p

    five_gram_bits = -np.mean([math.log2(p5(w, d)) for _, _, w, d, _ in held])
    assert five_gram_bits > 3.0
    assert five_gram_bits > true_bits.mean() + 2.5


# ---------------------------------------------------------------------------- configuration
@pytest.mark.parametrize("kwargs", [
    {"vocab_size": 50},
    {"n_train_tokens": -1},
    {"filler_continue": 1.0},
    {"dependent_fidelity": 1.5},
    {"n_origins": 1},
    {"seed": -3},
    {"vocab_size": 4000.0},
])
def test_bad_config_raises_input_error(kwargs):
    with pytest.raises(InputError):
        ToyConfig(**kwargs)


def test_config_knobs_take_effect():
    lang = ToyLanguage(ToyConfig(vocab_size=1500, n_origins=10, dependent_fidelity=1.0, filler_continue=0.2))
    assert len(lang.words) == 1500 and len(lang.classes["ORIGIN"]) == 10
    sents, lp = lang.sample_sentences(np.random.default_rng(0), 3000)
    events = _dep_events(lang, sents)
    origin_index = {w: k for k, w in enumerate(lang.classes["ORIGIN"])}
    # fidelity 1: the language word is a deterministic function of the origin
    assert all(lang.classes["DEP"][origin_index[o]] == d for o, _, _, d, _ in events)
    assert lp == pytest.approx([lang.sentence_log2prob(s) for s in sents[:200]] + list(lp[200:]), abs=1e-9)
    assert generate_corpus(ToyConfig(n_train_tokens=0, n_valid_tokens=10, n_test_tokens=10)).splits["train"] == []
