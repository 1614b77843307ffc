"""The V^n wall (ngramlm.sparsity): hand values, stats == compare, and NgramCounts on PTB."""
from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest

from corpora import Vocab, load_corpus, prepare
from corpora.vocab import BOS_ID
from ngramlm import NgramCounts
from ngramlm.sparsity import flat_row, sparsity_table

# Train, padded as the models see it:        Test:
#   <s> a b </s>                               <s> a b a </s>
#   <s> a </s>                                 <s> c </s>      (c is not in train: <unk>)
#   <s> b a b </s>
TRAIN = [["a", "b"], ["a"], ["b", "a", "b"]]
TEST = [["a", "b", "a"], ["c"]]


def toy_table(max_order=3):
    v = Vocab().fit(TRAIN)  # predicted types a, b, </s>, <unk>: V = 4
    return sparsity_table(v.encode_sentences(TRAIN), {"test": v.encode_sentences(TEST)}, vocab=v,
                          max_order=max_order), v


def test_hand_computed_toy():
    rows, v = toy_table()
    assert v.n_types == 4
    # Observed n-grams = distinct train n-grams ending in a predicted token (never <s> itself):
    #   n=1: a (3), b (3), </s> (3)                                    -> 3 types, none once, 9 tokens
    #   n=2: <s> a (2), a b (2), b </s> (2), a </s>, <s> b, b a (1 each) -> 6 types, 3 once, 9 tokens
    #   n=3: a b </s> (2), <s> a b, <s> a </s>, <s> b a, b a b (1 each)  -> 5 types, 4 once, 6 tokens
    # (the old `stats` padding also counted <s> <s> a and <s> <s> b: 7 trigram types; the old
    # compare counted the <s> unigram: 4 unigram types.)
    assert [r["possible"] for r in rows] == [4, 16, 64]
    assert [r["distinct_train"] for r in rows] == [3, 6, 5]
    assert [r["train_ngram_tokens"] for r in rows] == [9, 9, 6]
    assert [r["singleton_share"] for r in rows] == [0.0, 0.5, 0.8]
    assert [r["coverage_of_possible"] for r in rows] == [3 / 4, 6 / 16, 5 / 64]
    # Test, 6 predicted tokens; the event of each, cut at <s>, and whether train has it:
    #            a        b          a         </s>        <unk>        </s>
    #   n=1:     a +      b +        a +       </s> +      <unk> -      </s> +       -> 1 unseen
    #   n=2:     <s> a +  a b +      b a +     a </s> +    <s> <unk> -  <unk> </s> - -> 2 unseen
    #   n=3:     <s> a +  <s> a b +  a b a -   b a </s> -  <s> <unk> -  <s> <unk> </s> - -> 4 unseen
    # Full-length n-grams only (position >= n-1): n=3 keeps the last four columns but the
    # first <unk> (position 1): <s> a b +, a b a -, b a </s> -, <s> <unk> </s> -  -> 3 of 4 unseen.
    test = [r["splits"]["test"] for r in rows]
    assert [t["tokens"] for t in test] == [6, 6, 6]
    assert [t["unseen"] for t in test] == [1, 2, 4]
    assert [t["unseen_share"] for t in test] == [1 / 6, 2 / 6, 4 / 6]
    assert [t["full_length"] for t in test] == [6, 6, 4]
    assert [t["full_length_unseen"] for t in test] == [1, 2, 3]
    assert flat_row(rows[2], "test")["test_full_length_unseen"] == 3


def test_given_counts_and_orders_above_them():
    v = Vocab().fit(TRAIN)
    train = v.encode_sentences(TRAIN)
    counts = NgramCounts.from_encoded(train, order=4, vocab_size=len(v))
    # Counts to a higher order give the same rows for the lower ones (compare counts once).
    rows = sparsity_table(train, {"test": v.encode_sentences(TEST)}, vocab=v, counts=counts, max_order=3)
    assert rows == toy_table()[0]
    with pytest.raises(ValueError, match="order 4, not 5"):
        sparsity_table(train, {}, vocab=v, counts=counts, max_order=5)
    # An empty split has no tokens, hence nothing unseen.
    empty = sparsity_table(train, {"none": v.encode_sentences([])}, vocab=v, max_order=2)
    assert empty[1]["splits"]["none"] == {"tokens": 0, "unseen": 0, "unseen_share": 0.0, "full_length": 0,
                                          "full_length_unseen": 0}


def _stats_rows(out: str) -> dict:
    """The sparsity table `ngramlm stats` prints: ``{n: cells}``."""
    lines = out.splitlines()
    head = next(i for i, line in enumerate(lines) if line.split()[:3] == ["n", "train", "types"])
    rows = {}
    for line in lines[head + 1:]:
        cells = line.split()
        if not cells or not cells[0].isdigit():
            break
        rows[int(cells[0])] = cells
    return rows


def test_stats_and_compare_give_the_same_numbers(run_cli):
    from reports.experiments.ngram_part import vwall

    order = 4
    code, out, err = run_cli("stats", "toy", "--order", str(order))
    assert code == 0, err
    stats = _stats_rows(out)
    ds = prepare(load_corpus("toy"))
    counts = NgramCounts.from_encoded(ds["train"], order=order, vocab_size=len(ds.vocab))
    wall = vwall(counts, ds.vocab, ds["train"], ds["test"])  # what `ngramlm compare` stores as results["vwall"]
    table = sparsity_table(ds["train"], {"valid": ds["valid"], "test": ds["test"]}, vocab=ds.vocab, max_order=order)
    assert sorted(stats) == [w["order"] for w in wall] == [1, 2, 3, 4]
    for w, r in zip(wall, table):
        cells = stats[w["order"]]  # n, train types, of V^n, seen once, valid unseen, test unseen
        assert cells[1] == f"{w['distinct_train']:,}"
        assert cells[5] == f"{100 * w['test_unseen_share']:.2f}%"
        assert cells[3] == f"{100 * r['singleton_share']:.2f}%"
        assert cells[4] == f"{100 * r['splits']['valid']['unseen_share']:.2f}%"
        # Every number compare keeps is the shared table's.
        flat = flat_row(r, "test")
        assert {k: w[k] for k in flat} == flat
    # The toy numbers, fixed: 3,967 of V = 3,968 types occur in train (<s> is not one of them).
    assert ds.vocab.n_types == 3968
    assert [w["distinct_train"] for w in wall] == [3967, 63246, 131973, 154327]
    assert [w["test_unseen"] for w in wall] == [12, 4411, 11708, 15517]
    assert all(w["test_tokens"] == 20003 for w in wall)
    # Unseen at order k is exactly where MLE of order k gives probability zero.
    assert [w["mle_zero_probs"] for w in wall] == [w["test_unseen"] for w in wall]


def test_stats_order_out_of_range_is_one_line(run_cli):
    code, out, err = run_cli("stats", "toy", "--order", "13")
    assert code == 2 and err.startswith("Error: n-gram order must be an integer from 1 to 12, got 13")


def test_torch_free():
    code = "import sys, ngramlm.sparsity; sys.exit('torch' in sys.modules)"
    assert subprocess.run([sys.executable, "-c", code]).returncode == 0


def _event_keys(enc, k: int, base: int, full_only: bool) -> np.ndarray:
    """Independent of NgramCounts: per predicted token the int64 key of its event at order k
    (cut at <s>, the length folded into the key), built from shifted id arrays."""
    ids = enc.ids.astype(np.int64)
    sent = np.repeat(np.arange(len(enc.starts) - 1), np.diff(enc.starts))
    pos = np.arange(len(ids)) - enc.starts[:-1][sent] + 1  # w1 at 1, <s> at 0
    key = ids.copy()
    length = np.ones(len(ids), dtype=np.int64)
    for j in range(1, k):
        back = pos - j  # the position of the j-th earlier token; 0 is <s>, < 0 is outside
        tok = np.where(back > 0, ids[np.maximum(np.arange(len(ids)) - j, 0)], BOS_ID)
        inside = back >= 0
        key = np.where(inside, key + tok * base ** j, key)
        length += inside
    key = key * (k + 1) + length
    return key[length == k] if full_only else key


def test_ptb_observed_counts_equal_ngram_counts(shared_corpora):
    ds = prepare(load_corpus("ptb", data_dir=shared_corpora))
    train, test, vocab = ds["train"], ds["test"], ds.vocab
    order = 5
    counts = NgramCounts.from_encoded(train, order=order, vocab_size=len(vocab))
    rows = sparsity_table(train, {"test": test}, vocab=vocab, max_order=order)
    for r in rows:
        k = r["order"]
        # Every distinct k-gram NgramCounts stores, less the <s> unigram (a context, never predicted).
        assert r["distinct_train"] == counts.n_distinct(k) - int(k == 1 and counts.tables[0].count[BOS_ID] > 0)
        assert r["train_ngram_tokens"] == (train.n_tokens if k == 1 else counts.total(k))
    assert [r["distinct_train"] for r in rows] == [10000, 264990, 586558, 717733, 737952]
    # Re-derived with plain int64 keys (V^3 fits): distinct types and unseen test events.
    base = len(vocab)
    for r in rows[:3]:
        k = r["order"]
        assert len(np.unique(_event_keys(train, k, base, full_only=True))) == r["distinct_train"]
        seen = np.unique(_event_keys(train, k, base, full_only=False))
        assert int(np.count_nonzero(~np.isin(_event_keys(test, k, base, full_only=False), seen))) == \
            r["splits"]["test"]["unseen"]
    assert [r["splits"]["test"]["unseen"] for r in rows] == [0, 15594, 45615, 62623, 68831]
