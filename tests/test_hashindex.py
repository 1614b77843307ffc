"""The vectorized hash index agrees with binary search, packed or not."""
import numpy as np
import pytest

from ngramlm.counts import lookup
from ngramlm.hashindex import HashIndex


@pytest.mark.parametrize("high", [10**6, 10**10, 2**61])
def test_hash_index_matches_binary_search(high):
    rng = np.random.default_rng(0)
    keys = np.unique(rng.integers(0, high, 50_000, dtype=np.int64))
    h = HashIndex(keys)
    assert h.packed == (high < 2**40)
    q = np.concatenate([keys[rng.integers(0, len(keys), 20_000)], rng.integers(0, high, 20_000, dtype=np.int64),
                        np.array([-1, -5], dtype=np.int64)])
    assert np.array_equal(h.lookup(q), lookup(keys, q))


def test_empty_and_tiny():
    assert HashIndex(np.zeros(0, dtype=np.int64)).lookup(np.array([1, 2])).tolist() == [-1, -1]
    h = HashIndex(np.array([7], dtype=np.int64))
    assert h.lookup(np.array([7, 8, -1])).tolist() == [0, -1, -1]
