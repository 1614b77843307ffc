"""Counting: brute-force parity, merging of chunk counts, count-of-counts."""
from collections import Counter

import numpy as np
import pytest

from corpora import Vocab
from ngramlm.counts import NgramCounts, check_order
from corpora.errors import InputError

SENTS = [["a", "b", "a"], ["b", "a"], ["a", "c", "b", "a"], ["c"], ["a", "b", "a"]]


def brute(vocab, sents, k):
    ref = Counter()
    for s in sents:
        p = [1] + [vocab[t] for t in s] + [2]
        for i in range(len(p) - k + 1):
            ref[tuple(p[i:i + k])] += 1
    return dict(ref)


@pytest.fixture
def vocab():
    return Vocab().fit(SENTS)


@pytest.mark.parametrize("order", [1, 2, 3, 4, 6])
def test_counts_match_brute_force(vocab, order):
    c = NgramCounts.from_encoded(vocab.encode_sentences(SENTS), order=order, vocab_size=len(vocab))
    for k in range(1, order + 1):
        assert c.to_dict_of_tuples(k) == brute(vocab, SENTS, k)


def test_no_ngram_crosses_a_sentence_boundary(vocab):
    c = NgramCounts.from_encoded(vocab.encode_sentences(SENTS), order=3, vocab_size=len(vocab))
    for gram in c.to_dict_of_tuples(3):
        # </s> (id 2) can only be last, <s> (id 1) only first.
        assert 2 not in gram[:-1] and 1 not in gram[1:]


def test_chunk_counts_merge_exactly(vocab):
    full = NgramCounts.from_encoded(vocab.encode_sentences(SENTS), order=4, vocab_size=len(vocab))
    a = NgramCounts.from_encoded(vocab.encode_sentences(SENTS[:2]), order=4, vocab_size=len(vocab))
    b = NgramCounts.from_encoded(vocab.encode_sentences(SENTS[2:]), order=4, vocab_size=len(vocab))
    merged = a.merge(b)
    for k in range(1, 5):
        assert merged.to_dict_of_tuples(k) == full.to_dict_of_tuples(k)
        assert np.array_equal(merged.keys(k), full.keys(k))


def test_suffix_index_points_at_last_words(vocab):
    c = NgramCounts.from_encoded(vocab.encode_sentences(SENTS), order=4, vocab_size=len(vocab))
    for k in range(2, 5):
        assert np.array_equal(c.ngrams(k - 1)[c.suffix_index(k)], c.ngrams(k)[:, 1:])


def test_count_of_counts(vocab):
    c = NgramCounts.from_encoded(vocab.encode_sentences(SENTS), order=2, vocab_size=len(vocab))
    bigrams = brute(vocab, SENTS, 2)
    expected = Counter(bigrams.values())
    coc = c.count_of_counts(2, max_count=5)
    for j in range(1, 6):
        assert coc[j] == expected.get(j, 0)


@pytest.mark.parametrize("bad", [0, 13, -1, 2.5, "3", True])
def test_order_out_of_range(bad):
    with pytest.raises(InputError, match="order must be an integer from 1 to 12"):
        check_order(bad)
