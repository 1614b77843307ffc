"""Count merging (`train A B --weights`, `--tune-weights`): weighted counts of several texts, smoothed."""
from __future__ import annotations

import json
import random

import pytest

from corpora import Vocab
from corpora.errors import InputError
from ngramlm import NgramLM
from ngramlm.builder.count_merge import MergedSmoother, align, check_weights, parse_weights, tune_weights
from ngramlm.counts import NgramCounts

# Two "domains" over one small vocabulary: the general text prefers a-b-c orders, the in-domain one
# the reverse; the dev and test texts are in-domain.
_rng = random.Random(7)
GENERAL = [[_rng.choice("abcde") for _ in range(_rng.randint(2, 7))] for _ in range(300)]
INDOMAIN = [list(reversed(s))[: _rng.randint(2, 5)] + ["f"] for s in GENERAL[:60]]
DEV = [list(reversed(s))[: _rng.randint(2, 5)] + ["f"] for s in GENERAL[100:140]]
FALLBACK = {"mkn": dict(discount_fallback=(0.5, 1.0, 1.5)), "kn": dict(discount_fallback=(0.5,)),
            "absolute": dict(discount_fallback=(0.5,)), "wb": {}}


def _counts(vocab, sents, order=3):
    return NgramCounts.from_encoded(vocab.encode_sentences(sents), order=order, vocab_size=len(vocab))


@pytest.fixture(scope="module")
def setup():
    vocab = Vocab().fit(GENERAL + INDOMAIN)
    return vocab, align([_counts(vocab, GENERAL), _counts(vocab, INDOMAIN)])


def _merged(vocab, src, weights, smoothing="mkn"):
    lm = NgramLM(order=3, smoothing=smoothing, **FALLBACK[smoothing])
    return lm.fit_counts(src.weighted(weights), vocab=vocab, smoother=MergedSmoother(lm._make_smoother(), src, weights))


CONTEXTS = ([], ["a"], ["<s>"], ["f"], ["<s>", "e"], ["c", "b"], ["d", "d"], ["e", "a"], ["f", "a"])


def _same_distributions(a: NgramLM, b: NgramLM, tol=1e-12) -> None:
    for ctx in CONTEXTS:
        pa, pb = a.distribution(ctx), b.distribution(ctx)
        assert pa.keys() == pb.keys()
        for w in pa:
            assert pa[w] == pytest.approx(pb[w], rel=tol, abs=1e-15), (ctx, w)


@pytest.mark.parametrize("smoothing", ["mkn", "kn", "wb", "absolute"])
def test_one_text_alone_is_the_ordinary_model(setup, smoothing):
    # Weight 0 for the other text: the first text's own model (the union's extra rows keep nothing).
    vocab, src = setup
    merged = _merged(vocab, src, [1, 0], smoothing)
    alone = NgramLM(order=3, smoothing=smoothing, **FALLBACK[smoothing]).fit(vocab.encode_sentences(GENERAL), vocab=vocab)
    _same_distributions(merged, alone)
    merged = _merged(vocab, src, [0, 2.5], smoothing)
    alone = NgramLM(order=3, smoothing=smoothing, **FALLBACK[smoothing]).fit(vocab.encode_sentences(INDOMAIN), vocab=vocab)
    _same_distributions(merged, alone)


@pytest.mark.parametrize("smoothing", ["mkn", "wb"])
def test_weights_act_relatively(setup, smoothing):
    vocab, src = setup
    _same_distributions(_merged(vocab, src, [1, 2], smoothing), _merged(vocab, src, [0.5, 1], smoothing), tol=1e-10)


@pytest.mark.parametrize("smoothing", ["mkn", "kn", "wb", "absolute"])
@pytest.mark.parametrize("weights", [[1, 0.37], [1, 1], [1, 40]])
def test_merged_models_are_distributions(setup, smoothing, weights):
    vocab, src = setup
    lm = _merged(vocab, src, weights, smoothing)
    for ctx in CONTEXTS:
        dist = lm.distribution(ctx)
        assert sum(dist.values()) == pytest.approx(1.0, abs=1e-9), (smoothing, ctx)
        assert all(p > 0 for p in dist.values())


def test_hand_computed_witten_bell_bigram():
    # Text 1: "a b" once; text 2: "a c" twice.  Weights 1 and 3.  Context "a": text 1 has c(a)=1, one type;
    # text 2 has c(a)=2, one type.  alpha(a b) = 1*1 / (1*(1+1) + 3*(2+1)) = 1/11, alpha(a c) = 3*2/11,
    # gamma(a) = (1*1 + 3*1)/11.
    t1, t2 = [["a", "b"]], [["a", "c"], ["a", "c"]]
    vocab = Vocab().fit(t1 + t2)
    src = align([_counts(vocab, t1, order=2), _counts(vocab, t2, order=2)])
    lm = NgramLM(order=2, smoothing="wb")
    lm.fit_counts(src.weighted([1, 3]), vocab=vocab, smoother=MergedSmoother(lm._make_smoother(), src, [1, 3]))
    uni = NgramLM(order=1, smoothing="wb")
    uni.fit_counts(align([_counts(vocab, t1, order=1), _counts(vocab, t2, order=1)]).weighted([1, 3]), vocab=vocab,
                   smoother=MergedSmoother(uni._make_smoother(), align([_counts(vocab, t1, order=1),
                                                                         _counts(vocab, t2, order=1)]), [1, 3]))
    for w, alpha in (("b", 1 / 11), ("c", 6 / 11), ("</s>", 0.0), ("a", 0.0)):
        assert lm.prob(w, ["a"]) == pytest.approx(alpha + 4 / 11 * uni.prob(w), rel=1e-12), w


def test_merging_is_not_repetition(setup):
    # Discounting each text by its own statistics: weights 1,1 are close to, but not, the concatenation
    # (pooled discounts); weights 1,3 are not the in-domain text three times (whose counts would all be
    # >= 3 and barely discounted).
    vocab, src = setup
    cat = NgramLM(order=3, **FALLBACK["mkn"]).fit(vocab.encode_sentences(GENERAL + INDOMAIN), vocab=vocab)
    merged = _merged(vocab, src, [1, 1])
    test = vocab.encode_sentences(DEV)
    assert merged.perplexity(test) == pytest.approx(cat.perplexity(test), rel=0.1)
    assert merged.perplexity(test) != cat.perplexity(test)


def test_katz_and_others_refuse(setup):
    vocab, src = setup
    for smoothing in ("katz", "add-k", "jm"):
        with pytest.raises(InputError, match="count merging"):
            MergedSmoother(NgramLM(order=3, smoothing=smoothing, lambdas=[0.2, 0.3, 0.5])._make_smoother()
                           if smoothing == "jm" else NgramLM(order=3, smoothing=smoothing)._make_smoother(),
                           src, [1, 1])


def test_weights_are_checked():
    assert parse_weights("1,0.25", 2) == [1.0, 0.25]
    assert parse_weights("1,0", 2) == [1.0, 0.0]  # the second text is left out
    for bad, n in (("1", 2), ("1,x", 2), ("0,0", 2), ("1,-2", 2), ("1,inf", 2)):
        with pytest.raises(InputError):
            parse_weights(bad, n)
    with pytest.raises(InputError, match="3 weights for 2 texts"):
        check_weights([1, 1, 1], 2)


def test_tuning_finds_weights_better_than_concatenation(setup):
    vocab, src = setup
    dev = vocab.encode_sentences(DEV)

    def dev_ppl(weights):
        return _merged(vocab, src, weights, "mkn").perplexity(dev)

    res = tune_weights(2, dev_ppl)
    assert res.weights[0] == 1.0 and res.weights[1] > 1.0  # the dev text is in-domain: its text counts more
    assert res.dev_ppl < dev_ppl([1, 1])
    assert res.dev_ppl == pytest.approx(dev_ppl(res.weights))  # the reported number is real
    assert res.dev_ppl == min(p for _, p in res.trials)
    # No weight on a coarse grid does better than the search (beyond the search's tolerance).
    assert all(res.dev_ppl <= dev_ppl([1, w]) * (1 + 1e-4) for w in (0.25, 1, 2, 4, 8, 16, 64, 256))


def test_three_texts_tune(setup):
    vocab, _ = setup
    src = align([_counts(vocab, GENERAL[:150]), _counts(vocab, GENERAL[150:]), _counts(vocab, INDOMAIN)])
    dev = vocab.encode_sentences(DEV)
    res = tune_weights(3, lambda w: _merged(vocab, src, w, "wb").perplexity(dev))
    assert len(res.weights) == 3 and res.weights[2] > max(res.weights[:2])


# ----------------------------------------------------------------------------- CLI
def _write(path, sents):
    path.write_text("".join(" ".join(s) + "\n" for s in sents))
    return path


def test_cli_weights(run_cli, tmp_path):
    g, d = _write(tmp_path / "general.txt", GENERAL), _write(tmp_path / "indomain.txt", INDOMAIN)
    code, _, err = run_cli("train", g, d, "--weights", "1,2", "--order", "3", "--discount-fallback",
                           "-o", tmp_path / "w.npz")
    assert code == 0, err
    assert "indomain.txt" in err and "60 sentences" in err
    vocab = Vocab().fit(GENERAL + INDOMAIN)
    want = _merged(vocab, align([_counts(vocab, GENERAL), _counts(vocab, INDOMAIN)]), [1, 2])
    got = NgramLM.load(tmp_path / "w.npz")
    _same_distributions(got, want)
    assert got.info_["count_merging"]["weights"] == [1.0, 2.0]
    assert got.smoother_name_ == "mkn"


def test_cli_tune_weights(run_cli, tmp_path):
    g, d = _write(tmp_path / "general.txt", GENERAL), _write(tmp_path / "indomain.txt", INDOMAIN)
    dev = _write(tmp_path / "dev.txt", DEV)
    code, out, err = run_cli("train", g, d, "--tune-weights", dev, "--order", "3", "--smoothing", "wb",
                             "-o", tmp_path / "t.npz", "--json")
    assert code == 0, err
    info = json.loads(out)["info"]["count_merging"]
    assert info["tuned_on"].endswith("dev.txt") and info["weights"][1] > 1
    code, out, err = run_cli("ppl", tmp_path / "t.npz", dev, "--json")
    assert code == 0, err
    assert json.loads(out)["ppl"] == pytest.approx(info["dev_ppl"], rel=1e-9)


@pytest.mark.parametrize("extra, message", [
    ((), "two or more"),
    (("--weights", "1,2,3"), "3 weights for 2 texts"),
    (("--weights", "0,0"), "not all 0"),
    (("--weights", "1,1", "--memory", "100M"), "drop --memory"),
    (("--weights", "1,1", "--compat", "kenlm"), "lmplz has no weights"),
    (("--weights", "1,1", "--tune-weights", "DEV"), "give one"),
    (("--weights", "1,0.5", "--smoothing", "katz"), "not katz"),
])
def test_cli_weighted_errors(run_cli, tmp_path, extra, message):
    g, d = _write(tmp_path / "general.txt", GENERAL), _write(tmp_path / "indomain.txt", INDOMAIN)
    dev = _write(tmp_path / "dev.txt", DEV)
    texts = (g,) if not extra else (g, d)
    extra = tuple(str(dev) if x == "DEV" else x for x in extra)
    if not extra:
        extra = ("--weights", "1")
    out_file = tmp_path / "m.npz"
    code, _, err = run_cli("train", *texts, *extra, "--order", "3", "--discount-fallback", "-o", out_file)
    assert code != 0 and message in err, err
    assert not out_file.exists()
