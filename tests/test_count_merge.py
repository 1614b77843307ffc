"""Count merging (`train A B --weights`, `--tune-weights`): weighted counts of several texts, smoothed."""
from __future__ import annotations

import json
import random

import numpy as np
import pytest

from corpora import Vocab
from corpora.errors import InputError
from ngramlm import NgramLM
from ngramlm.count_merge import align, check_weights, parse_weights, tune_weights
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


def _tables_equal(a: NgramLM, b: NgramLM) -> None:
    for k in range(a.order_):
        np.testing.assert_array_equal(a.tables_.keys[k], b.tables_.keys[k])
        np.testing.assert_array_equal(a.tables_.log10_prob[k], b.tables_.log10_prob[k])
        np.testing.assert_array_equal(a.tables_.log10_backoff[k], b.tables_.log10_backoff[k])


@pytest.mark.parametrize("smoothing", ["mkn", "kn", "wb", "absolute"])
def test_whole_weights_are_the_texts_repeated(setup, smoothing):
    vocab, src = setup
    kw = FALLBACK[smoothing]
    merged = src.weighted([1, 3])
    assert merged.tables[2].count.dtype.kind == "i"  # whole weights keep whole counts
    a = NgramLM(order=3, smoothing=smoothing, **kw).fit_counts(merged, vocab=vocab)
    b = NgramLM(order=3, smoothing=smoothing, **kw).fit(vocab.encode_sentences(GENERAL + INDOMAIN * 3), vocab=vocab)
    _tables_equal(a, b)


def test_weights_one_each_are_the_concatenation(setup):
    vocab, src = setup
    a = NgramLM(order=3, **FALLBACK["mkn"]).fit_counts(src.weighted([1, 1]), vocab=vocab)
    b = NgramLM(order=3, **FALLBACK["mkn"]).fit(vocab.encode_sentences(GENERAL + INDOMAIN), vocab=vocab)
    _tables_equal(a, b)


@pytest.mark.parametrize("smoothing", ["mkn", "kn", "wb", "absolute"])
def test_fractional_weights_give_distributions(setup, smoothing):
    vocab, src = setup
    merged = src.weighted([1, 0.37])
    assert merged.tables[2].count.dtype.kind == "f"
    # A trigram seen only in the in-domain text once has the count 0.37.
    lm = NgramLM(order=3, smoothing=smoothing, **FALLBACK[smoothing]).fit_counts(merged, vocab=vocab)
    for ctx in ([], ["a"], ["<s>"], ["f"], ["<s>", "e"], ["c", "b"], ["d", "d"], ["e", "a"]):
        total = sum(lm.distribution(ctx).values())
        assert total == pytest.approx(1.0, abs=1e-9), (smoothing, ctx)
        assert all(p > 0 for w, p in lm.distribution(ctx).items() if w != "<s>")


def test_a_fractional_count_is_discounted_no_more_than_itself(setup):
    # mkn: a count of 0.37 falls in the bucket of count 1 and keeps max(0, 0.37 - D1) = 0 of its own mass.
    vocab, src = setup
    merged = src.weighted([1, 0.37])
    lm = NgramLM(order=3, **FALLBACK["mkn"]).fit_counts(merged, vocab=vocab)
    assert all(0.0 <= d <= 1.0 for d in lm.info_["discounts"][2][:1])
    assert np.all(np.isfinite(lm.tables_.log10_prob[2]))


def test_katz_refuses_weighted_counts(setup):
    vocab, src = setup
    with pytest.raises(InputError, match="whole counts"):
        NgramLM(order=3, smoothing="katz").fit_counts(src.weighted([1, 0.5]), vocab=vocab)


def test_weights_are_checked():
    assert parse_weights("1,0.25", 2) == [1.0, 0.25]
    for bad, n in (("1", 2), ("1,x", 2), ("1,0", 2), ("1,-2", 2), ("1,inf", 2)):
        with pytest.raises(InputError):
            parse_weights(bad, n)
    with pytest.raises(InputError, match="3 weights for 2 texts"):
        check_weights([1, 1, 1], 2)


def test_tuning_finds_weights_better_than_concatenation(setup):
    vocab, src = setup
    dev = vocab.encode_sentences(DEV)

    def dev_ppl(counts):
        return NgramLM(order=3, smoothing="wb").fit_counts(counts, vocab=vocab).perplexity(dev)

    res = tune_weights(src, dev_ppl)
    concat = dev_ppl(src.weighted([1, 1]))
    assert res.weights[0] == 1.0 and res.weights[1] > 1.0  # the dev text is in-domain: its text counts more
    assert res.dev_ppl < concat
    assert res.dev_ppl == pytest.approx(dev_ppl(src.weighted(res.weights)))  # the reported number is real
    assert res.dev_ppl == min(p for _, p in res.trials)
    # No whole-number weight between 1/4 and 64 does better than the search (Witten-Bell is smooth in w).
    assert all(res.dev_ppl <= dev_ppl(src.weighted([1, w])) + 1e-9 for w in (0.25, 1, 2, 4, 8, 16, 64))


def test_three_texts_tune(setup):
    vocab, _ = setup
    src = align([_counts(vocab, GENERAL[:150]), _counts(vocab, GENERAL[150:]), _counts(vocab, INDOMAIN)])
    dev = vocab.encode_sentences(DEV)
    res = tune_weights(src, lambda c: NgramLM(order=3, smoothing="wb").fit_counts(c, vocab=vocab).perplexity(dev))
    assert len(res.weights) == 3 and res.weights[2] > max(res.weights[:2])


# ----------------------------------------------------------------------------- CLI
def _write(path, sents):
    path.write_text("".join(" ".join(s) + "\n" for s in sents))
    return path


def test_cli_weights_equal_repetition(run_cli, tmp_path):
    g, d = _write(tmp_path / "general.txt", GENERAL), _write(tmp_path / "indomain.txt", INDOMAIN)
    rep = _write(tmp_path / "rep.txt", GENERAL + INDOMAIN * 2)
    code, _, err = run_cli("train", g, d, "--weights", "1,2", "--order", "3", "--discount-fallback",
                           "-o", tmp_path / "w.npz")
    assert code == 0, err
    assert "indomain.txt" in err and "60 sentences" in err
    code, _, err = run_cli("train", rep, "--order", "3", "--discount-fallback", "-o", tmp_path / "rep.npz")
    assert code == 0, err
    a, b = NgramLM.load(tmp_path / "w.npz"), NgramLM.load(tmp_path / "rep.npz")
    _tables_equal(a, b)
    assert a.info_["count_merging"]["weights"] == [1.0, 2.0]


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
    (("--weights", "1,0"), "positive"),
    (("--weights", "1,1", "--memory", "100M"), "drop --memory"),
    (("--weights", "1,1", "--compat", "kenlm"), "lmplz has no weights"),
    (("--weights", "1,1", "--tune-weights", "DEV"), "give one"),
    (("--weights", "1,0.5", "--smoothing", "katz"), "whole counts"),
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
