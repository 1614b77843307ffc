"""Bootstrap intervals by sentence (reports/experiments/bootstrap.py) and for BLEU (neural.seq2seq.translate.bleu_interval):
hand-checkable cases and the normal-theory width on a synthetic text."""
from __future__ import annotations

import math

import numpy as np
import pytest

from reports.experiments import bootstrap


def _starts(lengths):
    return np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64)


def test_identical_sentences_give_a_point_interval():
    # 40 sentences of 3 tokens, each token log2 p = -2: every resample has 2 bits per token exactly.
    lp = np.full(120, -2.0)
    ci = bootstrap.intervals(lp, _starts([3] * 40), unit_bytes=np.full(40, 12))
    assert ci["bits_per_token"] == pytest.approx([2.0, 2.0]) and ci["ppl"] == pytest.approx([4.0, 4.0])
    assert ci["bits_per_byte"] == pytest.approx([0.5, 0.5])  # 6 bits over 12 bytes per sentence
    assert ci["unit"] == "sentence" and ci["units"] == 40 and ci["resamples"] == bootstrap.RESAMPLES


def test_unit_sums_are_the_sentence_totals():
    lp = np.arange(1.0, 8.0)  # sentences [1, 2], [3], [4, 5, 6, 7]
    assert bootstrap.unit_sums(lp, _starts([2, 1, 4])).tolist() == [3.0, 3.0, 22.0]


def test_the_interval_holds_the_estimate_and_has_the_normal_theory_width():
    rng = np.random.default_rng(0)
    n_sent, length = 2000, 10
    lp = -rng.gamma(4.0, 2.0, size=n_sent * length)  # iid token surprisals, mean 8 bits
    ci = bootstrap.intervals(lp, _starts([length] * n_sent))
    bits = -lp.mean()
    lo, hi = ci["bits_per_token"]
    assert lo < bits < hi
    per_sentence = -lp.reshape(n_sent, length).mean(axis=1)
    half = 1.96 * per_sentence.std() / math.sqrt(n_sent)  # the mean of sentence means (equal lengths)
    assert (hi - lo) / 2 == pytest.approx(half, rel=0.15)
    assert ci["ppl"] == pytest.approx([2 ** lo, 2 ** hi])


def test_the_same_draws_for_every_model_and_a_paired_share():
    rng = np.random.default_rng(1)
    starts = _starts([5] * 100)
    a = -rng.uniform(1, 3, size=500)
    b = a - 0.5  # model b is worse on every token: loses in every resample
    counts = bootstrap.resample_counts(100)
    assert bootstrap.paired_share(a, b, starts, counts) == 1.0
    assert bootstrap.intervals(a, starts, counts=counts) == bootstrap.intervals(a, starts)  # the fixed seed


def test_a_running_text_is_resampled_in_blocks_and_infinite_scores_get_none():
    lp = np.full(1000, -1.0)
    ci = bootstrap.intervals(lp, _starts([1000]), n_bytes=2000)  # one "sentence": blocks of 256 tokens
    assert ci["unit"].startswith("block") and ci["units"] == 4
    assert ci["bits_per_byte"] == pytest.approx([0.5, 0.5])
    assert bootstrap.intervals(np.array([-1.0, -np.inf]), _starts([2])) is None


def test_bleu_interval_holds_the_corpus_bleu():
    pytest.importorskip("sacrebleu")
    from neural.seq2seq.translate import bleu_interval, corpus_bleu

    refs = [f"the cat number {i} sat on the mat today" for i in range(60)]
    hyps = [r if i % 3 else r.replace("mat", "hat").replace("today", "") for i, r in enumerate(refs)]
    score, _ = corpus_bleu(hyps, refs)
    lo, hi = bleu_interval(hyps, refs)
    assert lo < score < hi and hi - lo > 1.0
    assert bleu_interval(refs, refs) == pytest.approx([100.0, 100.0])
