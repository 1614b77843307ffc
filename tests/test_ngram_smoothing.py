"""Smoothers: hand-computed values, sums to one, degenerate counts."""
import math

import numpy as np
import pytest

from corpora import Vocab
from corpora.errors import InputError
from ngramlm import NgramLM

# Toy corpus, padded:  <s> a b </s> | <s> a </s> | <s> b a </s>
TOY = [["a", "b"], ["a"], ["b", "a"]]


def fit(smoothing, order=2, sents=TOY, **kw):
    v = Vocab().fit(sents)
    return NgramLM(order=order, smoothing=smoothing, **kw).fit(v.encode_sentences(sents), vocab=v), v


# Predicted types: a, b, </s>, <unk>  -> |V| = 4.
def test_mle_hand_values():
    lm, _ = fit("mle")
    # c(<s> a) = 2, c(<s>) as a context = 3  ->  2/3
    assert lm.prob("a", ["<s>"]) == pytest.approx(2 / 3)
    # c(a b) = 1, c(a .) = c(a b) + c(a </s>) + c(a </s>) = 3 -> 1/3
    assert lm.prob("b", ["<s>", "a"]) == pytest.approx(1 / 3)
    assert lm.prob("a", ["<s>", "a"]) == 0.0


def test_laplace_and_lidstone_hand_values():
    lm, _ = fit("laplace")
    assert lm.prob("b", ["<s>", "a"]) == pytest.approx((1 + 1) / (3 + 4))
    assert lm.prob("a", ["<s>", "a"]) == pytest.approx((0 + 1) / (3 + 4))
    lm, _ = fit("addk", k=0.5)
    assert lm.prob("</s>", ["<s>", "a"]) == pytest.approx((2 + 0.5) / (3 + 0.5 * 4))


def test_witten_bell_hand_values():
    lm, _ = fit("wb")
    # unigrams: c(a)=3, c(b)=2, c(</s>)=3, N=8, T=3 types seen:  p(w) = (c + T/|V|) / (N + T)
    p_uni = {"a": (3 + 3 / 4) / 11, "b": (2 + 3 / 4) / 11, "</s>": (3 + 3 / 4) / 11}
    assert lm.prob("a") == pytest.approx(p_uni["a"])
    # context a: c(a b)=1, c(a </s>)=2 -> c(a)=3, N1+(a .)=2
    assert lm.prob("b", ["<s>", "a"]) == pytest.approx((1 + 2 * p_uni["b"]) / 5)
    assert lm.prob("a", ["<s>", "a"]) == pytest.approx((0 + 2 * p_uni["a"]) / 5)


def test_absolute_discounting_hand_values():
    lm, _ = fit("absolute", discount=0.5)
    p_a = (3 - 0.5) / 8 + (0.5 * 3 / 8) / 4
    assert lm.prob("a") == pytest.approx(p_a)
    p_b = (2 - 0.5) / 8 + (0.5 * 3 / 8) / 4
    # context a: 2 continuation types, total 3
    assert lm.prob("b", ["<s>", "a"]) == pytest.approx((1 - 0.5) / 3 + 0.5 * 2 / 3 * p_b)


def test_kneser_ney_continuation_counts_hand_values():
    lm, _ = fit("kn", order=2, discount_fallback=None, sents=TOY + [["a", "b"], ["c", "b", "a", "b"]])
    # Recomputed independently below with plain dicts.
    sents = TOY + [["a", "b"], ["c", "b", "a", "b"]]
    big = {}
    for s in sents:
        p = ["<s>"] + s + ["</s>"]
        for i in range(len(p) - 1):
            big[(p[i], p[i + 1])] = big.get((p[i], p[i + 1]), 0) + 1
    cont = {}
    for (u, w) in big:
        cont[w] = cont.get(w, 0) + 1
    n1 = sum(1 for c in cont.values() if c == 1)
    n2 = sum(1 for c in cont.values() if c == 2)
    d1 = n1 / (n1 + 2 * n2)
    tot1 = sum(cont.values())
    types = 5  # a b c </s> <unk>
    p1 = {w: (cont.get(w, 0) - d1 if cont.get(w, 0) else 0) / tot1 + d1 * len(cont) / tot1 / types
          for w in ["a", "b", "c", "</s>", "<unk>"]}
    m1 = sum(1 for c in big.values() if c == 1)
    m2 = sum(1 for c in big.values() if c == 2)
    d2 = m1 / (m1 + 2 * m2)
    ctx = {u: sum(c for (x, _), c in big.items() if x == u) for (u, _) in big}
    nctx = {u: sum(1 for (x, _) in big if x == u) for (u, _) in big}
    for u in ["<s>", "a", "b"]:
        for w in ["a", "b", "</s>", "c"]:
            c = big.get((u, w), 0)
            want = max(c - d2, 0) / ctx[u] + d2 * nctx[u] / ctx[u] * p1[w]
            assert lm.prob(w, ["<s>", u] if u != "<s>" else ["<s>"]) == pytest.approx(want, rel=1e-6), (u, w)


def test_stupid_backoff_values_and_flag():
    lm, _ = fit("stupid", alpha=0.4)
    assert not lm.is_distribution_
    assert lm.prob("b", ["<s>", "a"]) == pytest.approx(1 / 3)
    # unseen bigram a a: 0.4 * c(a)/N = 0.4 * 3/8
    assert lm.prob("a", ["<s>", "a"]) == pytest.approx(0.4 * 3 / 8)


ALL_DISTRIBUTIONS = ["mkn", "kn", "absolute", "wb", "jm", "katz", "addk", "laplace"]


@pytest.fixture(scope="module")
def timemachine(shared_corpora):
    from corpora import load_corpus, prepare

    return prepare(load_corpus("timemachine", data_dir=shared_corpora))


@pytest.mark.parametrize("smoothing", ALL_DISTRIBUTIONS)
@pytest.mark.parametrize("order", [1, 2, 3, 5, 10])
def test_distributions_sum_to_one(timemachine, smoothing, order):
    ds = timemachine
    kw = {"lambdas": [0.6] * order} if smoothing == "jm" else {}
    if smoothing == "addk":
        kw["k"] = 0.05
    if smoothing in ("mkn", "kn", "absolute"):
        kw["discount_fallback"] = (0.5, 1.0, 1.5)  # high orders of a small book are degenerate
    if smoothing == "katz":
        kw["discount_fallback"] = True
    lm = NgramLM(order=order, smoothing=smoothing, **kw).fit(ds["train"], vocab=ds.vocab)
    rng = np.random.default_rng(order)
    train = ds.corpus.sentences("train")
    for _ in range(5):
        s = train[rng.integers(len(train))]
        i = int(rng.integers(0, len(s) + 1))
        for ctx in (["<s>"] + s[:i], s[:i], ["never", "seen", "words"]):
            p = lm.next_probs(ctx)
            assert abs(p.sum() - 1.0) < 1e-9, (smoothing, order, ctx)
            assert p[0] == 0 and p[1] == 0  # <pad>, <s> never predicted
            if smoothing != "mle":
                assert (p[2:] > 0).all()


def test_mle_reports_zero_probabilities(timemachine):
    lm = NgramLM(order=3, smoothing="mle").fit(timemachine["train"], vocab=timemachine.vocab)
    r = lm.perplexity_report(timemachine["test"])
    assert r.zero_probs > 0
    assert math.isfinite(r.ppl)
    assert lm.perplexity(timemachine["test"]) == math.inf
    # seen contexts still sum to 1
    assert lm.next_probs(["<s>", "the"]).sum() == pytest.approx(1.0)


def test_jelinek_mercer_tuning_beats_fixed_weights(timemachine):
    ds = timemachine
    tuned = NgramLM(order=3, smoothing="jm").fit(ds["train"], vocab=ds.vocab, heldout=ds["valid"])
    fixed = NgramLM(order=3, smoothing="jm", lambdas=[0.5, 0.5, 0.5]).fit(ds["train"], vocab=ds.vocab)
    assert tuned.perplexity_report(ds["valid"]).ppl < fixed.perplexity_report(ds["valid"]).ppl
    assert all(0 < x < 1 for x in tuned.info_["lambdas"])


def test_jelinek_mercer_without_weights_or_heldout_is_an_error(timemachine):
    with pytest.raises(InputError, match="held-out"):
        NgramLM(order=2, smoothing="jm").fit(timemachine["train"], vocab=timemachine.vocab)


def test_degenerate_count_of_counts_warns_goes_on_and_kenlm_compat_still_refuses():
    """A zero among n1..n4 takes the fixed discounts with a warning naming the order (SRILM and lmplz
    stop there); --compat kenlm reproduces lmplz, so it stops, with the --discount-fallback hint."""
    sents = [["x", "y", "z"]] * 3
    v = Vocab().fit(sents)
    lm = NgramLM(order=3, smoothing="mkn").fit(v.encode_sentences(sents), vocab=v)
    warnings = lm.info_["warnings"]
    assert any("1-grams" in w and "[0.5, 1.0, 1.5]" in w for w in warnings)
    assert lm.info_["discounts"][0] == [0.5, 1.0, 1.5]
    assert lm.next_probs(["<s>", "x"]).sum() == pytest.approx(1.0)
    given = NgramLM(order=3, smoothing="mkn", discount_fallback=(0.5, 1.0, 1.5)).fit(v.encode_sentences(sents), vocab=v)
    assert np.allclose(given.next_probs(["<s>", "x"]), lm.next_probs(["<s>", "x"]))
    assert "warnings" not in given.info_  # asked for: nothing to warn about
    with pytest.raises(InputError) as e:
        NgramLM(order=3, smoothing="mkn", compat="kenlm").fit(v.encode_sentences(sents), vocab=v)
    msg = str(e.value)
    assert "adjusted count" in msg and "--discount-fallback" in msg


def test_katz_takes_srilm_rule_for_out_of_range_ratios():
    """Hand-made count-of-counts: counts 1..3 of a unigram table where n2 > n1/2... SRILM leaves a count whose
    Good-Turing ratio is out of range undiscounted, and so does katz, with a warning (no failure)."""
    # Unigram counts: three words seen once, three seen twice, one seen 3 times:
    # r*/r for r = 1 is 2 n2 / n1 = 2 > 1: out of range, so count 1 stays undiscounted.
    sents = [["a", "b", "c", "d", "e", "f", "g"], ["d", "e", "f", "g"], ["g"]]
    v = Vocab().fit(sents)
    lm = NgramLM(order=1, smoothing="katz").fit(v.encode_sentences(sents), vocab=v)
    assert any("1-grams" in w and "count 1" in w for w in lm.info_["warnings"])
    assert lm.info_["good_turing_ratios"][0][0] == 1.0
    assert sum(lm.distribution([]).values()) == pytest.approx(1.0)


def test_unknown_smoother():
    with pytest.raises(InputError, match="unknown smoother"):
        fit("good-turing-ish")


def test_jelinek_mercer_hand_values():
    lm, _ = fit("jm", lambdas=[0.8, 0.5])
    # unigram ML: c(a)=3, c(b)=2, c(</s>)=3 of N=8; uniform over |V|=4
    p_a = 0.8 * 3 / 8 + 0.2 / 4
    p_b = 0.8 * 2 / 8 + 0.2 / 4
    assert lm.prob("a") == pytest.approx(p_a)
    # context a: c(a b)=1, c(a .)=3
    assert lm.prob("b", ["<s>", "a"]) == pytest.approx(0.5 * 1 / 3 + 0.5 * p_b)
    assert lm.prob("a", ["<s>", "a"]) == pytest.approx(0.5 * 0 + 0.5 * p_a)


def test_katz_matches_an_independent_dict_implementation(timemachine):
    """Katz backoff recomputed with plain dicts (Good-Turing ratios with Katz's normalisation)."""
    ds = timemachine
    lm = NgramLM(order=2, smoothing="katz").fit(ds["train"], vocab=ds.vocab)
    kmax = 5
    uni, big = {}, {}
    for s in ds.corpus.sentences("train"):
        p = ["<s>"] + s + ["</s>"]
        for w in p[1:]:
            uni[w] = uni.get(w, 0) + 1
        for x, y in zip(p, p[1:]):
            big[(x, y)] = big.get((x, y), 0) + 1

    def ratios(counts):
        n = {}
        for c in counts.values():
            n[c] = n.get(c, 0) + 1
        common = (kmax + 1) * n[kmax + 1] / n[1]
        return {c: ((c + 1) * n[c + 1] / n[c] / c - common) / (1 - common) for c in range(1, kmax + 1)}

    du, db = ratios(uni), ratios(big)
    N = sum(uni.values())
    types = [w for w in ds.vocab.itos_ if w not in ("<pad>", "<s>")]
    pu = {w: du.get(uni.get(w, 0), 1.0) * uni.get(w, 0) / N for w in types}
    left = 1 - sum(pu.values())
    pu = {w: p + left / len(types) for w, p in pu.items()}
    rng = np.random.default_rng(3)
    for h in ["<s>", "the", "time", "traveller"] + list(rng.choice(types[2:], 5)):
        ch = sum(c for (x, _), c in big.items() if x == h)
        if not ch:
            continue
        seen = {y: db.get(c, 1.0) * c / ch for (x, y), c in big.items() if x == h}
        alpha = (1 - sum(seen.values())) / (1 - sum(pu[y] for y in seen))
        hist = ["<s>"] if h == "<s>" else ["<s>", h]
        for w in list(seen)[:20] + list(rng.choice(types, 20)):
            want = seen[w] if w in seen else alpha * pu[w]
            assert lm.prob(w, hist) == pytest.approx(want, rel=1e-9), (h, w)


# ---------------------------------------------------------------------------- parameters
# The NgramLM options (and `ngramlm train` flags) each smoother takes; any other given
# option is an error rather than silently ignored.
TAKES = {
    "mkn": {"discount_fallback"}, "kn": {"discount_fallback"}, "absolute": {"discount", "discount_fallback"},
    "wb": set(), "jm": {"lambdas"}, "katz": {"discount_fallback"}, "stupid": {"alpha"}, "addk": {"k"},
    "laplace": set(), "mle": set(),
}
VALUES = {"k": 0.5, "discount": 0.3, "discount_fallback": (0.5, 1.0, 1.5), "alpha": 0.25, "lambdas": [0.3, 0.7]}
FLAGS = {"k": "--k", "discount": "--discount", "discount_fallback": "--discount-fallback", "alpha": "--alpha",
         "lambdas": "--lambdas"}
FOREIGN = [(s, p) for s in TAKES for p in VALUES if p not in TAKES[s]]
OWN = [(s, p) for s in TAKES for p in sorted(TAKES[s])]


def test_every_smoother_is_covered():
    from ngramlm import SMOOTHERS

    assert set(TAKES) == set(SMOOTHERS)
    assert len(FOREIGN) == 10 * 5 - len(OWN) == 42


@pytest.mark.parametrize("smoothing,param", FOREIGN)
def test_a_parameter_the_smoother_does_not_take_is_an_error(smoothing, param):
    lm = NgramLM(order=2, smoothing=smoothing, **{param: VALUES[param]})
    with pytest.raises(InputError) as e:
        lm._make_smoother()  # what `ngramlm train` calls to validate before any work
    err = e.value
    # The message names the smoother, the parameter and its flag; the fix says who takes it.
    assert f"smoother {smoothing!r} does not take {param} ({FLAGS[param]}), got {VALUES[param]!r}" in err.message
    takers = [s for s in TAKES if param in TAKES[s]]
    if smoothing in ("mle", "laplace") and param == "k":
        assert err.fix == (f"drop k (--k): {smoothing} is add-k with k fixed at {0 if smoothing == 'mle' else 1}; "
                           "for another k use addk")
    else:
        assert err.fix == f"drop {param} ({FLAGS[param]}), or use a smoother that takes it: {', '.join(takers)}"
    with pytest.raises(InputError, match=f"does not take {param}"):
        fit(smoothing, **{param: VALUES[param]})  # fit refuses it too


@pytest.mark.parametrize("smoothing,param", OWN)
def test_a_parameter_the_smoother_takes_reaches_it(smoothing, param):
    lm, _ = fit(smoothing, **{param: VALUES[param]})
    assert lm.smoother_params_[param] == VALUES[param]


@pytest.mark.parametrize("smoothing", list(TAKES))
def test_none_means_not_given(smoothing):
    # The CLI passes every option, None when absent.
    kw = {p: None for p in VALUES}
    if smoothing in ("mkn", "kn", "katz", "absolute"):
        kw["discount_fallback"] = VALUES["discount_fallback"]  # the toy counts are degenerate
    if smoothing == "jm":
        kw["lambdas"] = VALUES["lambdas"]
    lm, _ = fit(smoothing, **kw)
    assert lm.smoother_name_ == ("laplace" if smoothing == "addk" else smoothing)  # add-k's k defaults to 1


def test_wb_with_discount_example_and_aliases():
    train, v = _toy_text()
    with pytest.raises(InputError) as e:
        NgramLM(order=3, smoothing="wb", discount=0.3).fit(train, vocab=v)
    assert str(e.value) == ("smoother 'wb' does not take discount (--discount), got 0.3; it takes no parameters "
                            "(fix: drop discount (--discount), or use a smoother that takes it: absolute)")
    from ngramlm import make_smoother

    with pytest.raises(InputError) as e:
        make_smoother("Kneser-Ney", alpha=0.4)
    assert e.value.message == ("smoother 'Kneser-Ney' (kn) does not take alpha (--alpha), got 0.4; "
                               "it takes discount_fallback (--discount-fallback), discounts")
    assert e.value.fix == "drop alpha (--alpha), or use a smoother that takes it: stupid"
    # The estimator resolves the alias where it comes in: from there on it is kn.
    with pytest.raises(InputError, match="^smoother 'kn' does not take alpha"):
        NgramLM(order=3, smoothing="Kneser-Ney", alpha=0.4)._make_smoother()


def test_make_smoother_refuses_unknown_parameters_and_keeps_class_ones():
    from ngramlm import make_smoother

    with pytest.raises(InputError) as e:
        make_smoother("absolute", discout=0.3)
    assert e.value.message == ("smoother 'absolute' does not take discout, got 0.3; "
                               "it takes discount (--discount), discount_fallback (--discount-fallback)")
    assert e.value.fix == "drop discout: no smoother takes it"
    assert make_smoother("katz", k_max=7).k_max == 7  # API-only parameters still reach their smoother
    assert make_smoother("mkn", discounts=[[0.5, 1.0, 1.5]]).discounts == [[0.5, 1.0, 1.5]]
    with pytest.raises(InputError, match="'kn' does not take k_max"):
        make_smoother("kn", k_max=7)


def test_cli_train_refuses_a_foreign_option_on_one_line(run_cli, tmp_path):
    code, out, err = run_cli("train", "toy", "-o", tmp_path / "x.npz", "--smoothing", "wb", "--discount", "0.3")
    assert code == 2
    assert err == ("Error: smoother 'wb' does not take discount (--discount), got 0.3; it takes no parameters "
                   "(fix: drop discount (--discount), or use a smoother that takes it: absolute)\n")
    assert not (tmp_path / "x.npz").exists()


def _toy_text():
    v = Vocab().fit(TOY)
    return v.encode_sentences(TOY), v
