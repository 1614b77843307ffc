"""Vectorized n-gram counting.

Sentences are padded as KenLM and SRILM pad them: one ``<s>`` on the left, one
``</s>`` on the right, and n-grams never cross a sentence boundary.

Representation (a trie stored as flat numpy arrays, one level per order)
-------------------------------------------------------------------------
Order ``k`` holds its ``m_k`` distinct k-grams sorted lexicographically.  Entry ``j``
is described by

* ``parent[j]``: index of its first k-1 words in order ``k-1`` (its *context*),
* ``word[j]``: its last word,
* ``count[j]``: how often it occurs,

so ``key = parent * V + word`` is sorted and unique within the order and lookups
are one :func:`numpy.searchsorted` per order.  Order 1 has ``parent == 0``.
Counts over separate chunks of text merge exactly (:meth:`NgramCounts.merge`), so a
streaming or distributed counter can reuse this code.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable, Optional

import numpy as np

from corpora.errors import InputError
from corpora.vocab import BOS_ID, EOS_ID, EncodedText

MAX_ORDER = 12


def padded_stream(encoded: EncodedText) -> tuple[np.ndarray, np.ndarray]:
    """Insert ``<s>`` before every sentence.

    Returns ``(tokens, pos)``: the padded id stream and each token's position
    within its padded sentence (``<s>`` is at position 0).
    """
    ids = encoded.ids
    starts = encoded.starts
    n_sent = len(starts) - 1
    lengths = np.diff(starts)  # words + </s>
    total = len(ids) + n_sent
    tokens = np.empty(total, dtype=np.int64)
    # Where each sentence's <s> lands in the padded stream.
    bos_at = starts[:-1] + np.arange(n_sent)
    is_word = np.ones(total, dtype=bool)
    is_word[bos_at] = False
    tokens[bos_at] = BOS_ID
    tokens[is_word] = ids
    seg_len = lengths + 1
    pos = np.arange(total, dtype=np.int64) - np.repeat(bos_at, seg_len)
    return tokens, pos


def unique_inverse(keys: np.ndarray, return_first: bool = False):
    """``(unique_sorted, inverse, counts)`` of an int64 array, faster than np.unique.

    Sorting a plain int64 array (SIMD sort) beats an argsort; positions ride in the
    low bits of the packed value when they fit, so no argsort is needed.
    """
    n = len(keys)
    if n == 0:
        e = np.zeros(0, dtype=np.int64)
        return (keys, e, e, e) if return_first else (keys, e, e)
    pos_bits = max(1, int(n - 1).bit_length())
    kmax = int(keys.max())
    if kmax.bit_length() + pos_bits <= 62:
        packed = (keys << pos_bits) | np.arange(n, dtype=np.int64)
        packed.sort()
        order = packed & ((1 << pos_bits) - 1)
        sorted_keys = packed >> pos_bits
        del packed
    else:
        order = np.argsort(keys, kind="stable")
        sorted_keys = keys[order]
    flag = np.empty(n, dtype=bool)
    flag[0] = True
    np.not_equal(sorted_keys[1:], sorted_keys[:-1], out=flag[1:])
    uniq = sorted_keys[flag]
    ranks = np.cumsum(flag) - 1
    inverse = np.empty(n, dtype=np.int64)
    inverse[order] = ranks
    first = np.flatnonzero(flag)
    counts = np.diff(np.append(first, n))
    if return_first:
        return uniq, inverse, counts, order[first]
    return uniq, inverse, counts


@dataclass
class OrderTable:
    """The distinct k-grams of one order (see module docstring)."""

    parent: np.ndarray  # int32, index into order k-1 (0 for unigrams)
    word: np.ndarray  # int32
    count: np.ndarray  # int32 raw counts
    suffix: Optional[np.ndarray] = None  # index in order k-1 of the last k-1 words (k >= 2)

    def __len__(self) -> int:
        return len(self.word)


class NgramCounts:
    """Raw n-gram counts of orders ``1..order`` over a vocabulary of ``vocab_size`` ids.

    Build with :meth:`from_encoded`; merge chunk counts with :meth:`merge`.
    ``tables[k-1]`` is the :class:`OrderTable` of order k.
    """

    def __init__(self, order: int, vocab_size: int, tables: list) -> None:
        self.order = order
        self.vocab_size = vocab_size
        self.tables = tables

    # ------------------------------------------------------------------ counting
    @classmethod
    def from_encoded(cls, encoded: EncodedText, *, order: int, vocab_size: int,
                     return_positions: bool = False):
        check_order(order)
        tokens, pos = padded_stream(encoded)
        tokens = tokens.astype(np.int32)
        V = int(vocab_size)
        # Tables are int32 (indices and counts below 2^31): half the memory of int64.
        i32 = np.int32
        # Unigrams: every token (including <s>) is a unigram.
        cnt1 = np.bincount(tokens, minlength=V).astype(i32)
        tables = [OrderTable(parent=np.zeros(V, dtype=i32), word=np.arange(V, dtype=i32), count=cnt1)]
        n = len(tokens)
        # remaining[i]: how many tokens follow i in its padded sentence; a k-gram
        # starting at i fits when remaining[i] >= k - 1.
        bos_idx = np.flatnonzero(pos == 0)
        seg = np.diff(np.append(bos_idx, n))
        remaining = (np.repeat(seg - 1, seg) - pos).astype(i32)
        del pos, seg, bos_idx
        # ids_prev[i]: id (in order k-1) of the (k-1)-gram *starting* at token i,
        # for the positions valid at that order (-1 elsewhere).
        ids_prev = tokens
        positions = [ids_prev] if return_positions else None
        for k in range(2, order + 1):
            valid = np.flatnonzero(remaining[: n - k + 1] >= k - 1)
            keys = ids_prev[valid].astype(np.int64) * V + tokens[valid + k - 1]
            uniq, inv, counts, rep = unique_inverse(keys, return_first=True)
            del keys
            # The suffix of the k-gram starting at i is the (k-1)-gram starting at i+1.
            suffix = ids_prev[valid[rep] + 1].astype(i32)
            tables.append(OrderTable(parent=(uniq // V).astype(i32), word=(uniq % V).astype(i32),
                                     count=counts.astype(i32), suffix=suffix))
            del rep, counts
            ids_cur = np.full(n, -1, dtype=i32)
            ids_cur[valid] = inv
            del inv, valid
            ids_prev = ids_cur
            if return_positions:
                positions.append(ids_cur)
            if len(uniq) == 0:
                # Sentences too short for this order: higher orders are empty too.
                for _ in range(k + 1, order + 1):
                    tables.append(OrderTable(*(np.zeros(0, dtype=np.int64),) * 4))
                break
        out = cls(order, V, tables)
        if return_positions:
            return out, tokens, positions
        return out

    # ------------------------------------------------------------------ views
    def keys(self, k: int) -> np.ndarray:
        t = self.tables[k - 1]
        return t.parent.astype(np.int64) * self.vocab_size + t.word

    def ngrams(self, k: int) -> np.ndarray:
        """The k-grams of order k as an ``(m_k, k)`` array of word ids (lexicographic order)."""
        t = self.tables[k - 1]
        if k == 1:
            return t.word[:, None].copy()
        return np.column_stack([self.ngrams(k - 1)[t.parent], t.word])

    def suffix_index(self, k: int) -> np.ndarray:
        """For each k-gram (k >= 2), the index in order k-1 of its last k-1 words."""
        t = self.tables[k - 1]
        if t.suffix is not None:
            return t.suffix
        if k == 2:
            return t.word.copy()
        # suffix(parent) + word, looked up in order k-1.
        parent_suffix = self.suffix_index(k - 1)[t.parent].astype(np.int64)
        return lookup(self.keys(k - 1), parent_suffix * self.vocab_size + t.word)

    def count_of_counts(self, k: int, max_count: int = 10) -> np.ndarray:
        """``n[c]`` = number of distinct k-grams seen exactly ``c`` times, c = 0..max_count."""
        c = self.tables[k - 1].count
        if c.dtype.kind == "f":  # weighted counts (count merging): bucketed by the whole count above
            c = np.ceil(c).astype(np.int64)
        return np.bincount(np.minimum(c, max_count + 1), minlength=max_count + 2)[: max_count + 1]

    def n_distinct(self, k: int) -> int:
        t = self.tables[k - 1]
        return int(np.count_nonzero(t.count)) if k == 1 else len(t)

    def total(self, k: int) -> int:
        return int(self.tables[k - 1].count.sum())

    # ------------------------------------------------------------------ merging
    def to_dict_of_tuples(self, k: int) -> dict:
        """Small-data helper (tests): ``{tuple_of_ids: count}`` for order k."""
        grams = self.ngrams(k)
        cnt = self.tables[k - 1].count
        return {tuple(int(x) for x in g): int(c) for g, c in zip(grams, cnt) if c}

    def merge(self, other: "NgramCounts") -> "NgramCounts":
        """Exact sum of two count sets (e.g. from two chunks of a corpus)."""
        if other.order != self.order or other.vocab_size != self.vocab_size:
            raise ValueError("can only merge counts of the same order and vocabulary size")
        return NgramCounts.from_ngram_arrays(
            [np.concatenate([self.ngrams(k), other.ngrams(k)]) for k in range(1, self.order + 1)],
            [np.concatenate([self.tables[k - 1].count, other.tables[k - 1].count]) for k in range(1, self.order + 1)],
            vocab_size=self.vocab_size,
        )

    @classmethod
    def from_ngram_arrays(cls, grams: list, counts: list, *, vocab_size: int) -> "NgramCounts":
        """Build from explicit ``(m, k)`` id arrays per order (duplicates are summed)."""
        V = int(vocab_size)
        order = len(grams)
        tables = []
        for k in range(1, order + 1):
            g = np.asarray(grams[k - 1], dtype=np.int64).reshape(-1, k)
            c = np.asarray(counts[k - 1], dtype=np.int64)
            if k == 1:
                cnt = np.bincount(g[:, 0], weights=c, minlength=V).astype(np.int64)
                tables.append(OrderTable(np.zeros(V, dtype=np.int64), np.arange(V, dtype=np.int64), cnt))
                prev_grams = np.arange(V, dtype=np.int64)[:, None]
                continue
            parent = _rows_index(prev_grams, g[:, :-1])
            ok = parent < len(prev_grams)
            ok[ok] = np.all(prev_grams[parent[ok]] == g[ok, :-1], axis=1)
            if not np.all(ok):
                raise ValueError(f"order-{k} n-gram whose prefix is missing from order {k - 1}")
            keys = parent * V + g[:, -1]
            uniq, inv, _ = unique_inverse(keys)
            cnt = np.bincount(inv, weights=c, minlength=len(uniq)).astype(np.int64)
            tables.append(OrderTable(uniq // V, uniq % V, cnt))
            prev_grams = np.column_stack([prev_grams[uniq // V], uniq % V])
        return cls(order, V, tables)


def _rows_index(table: np.ndarray, rows: np.ndarray) -> np.ndarray:
    """Insertion index of each row of ``rows`` in the lexicographically sorted ``table``."""
    view_t = np.ascontiguousarray(table).view([("", table.dtype)] * table.shape[1]).ravel()
    view_r = np.ascontiguousarray(rows).view([("", rows.dtype)] * rows.shape[1]).ravel()
    return np.searchsorted(view_t, view_r)


def lookup(sorted_keys: np.ndarray, queries: np.ndarray) -> np.ndarray:
    """Index of each query in ``sorted_keys``, or -1 when absent (negative queries are absent)."""
    out = np.full(len(queries), -1, dtype=np.int64)
    if len(sorted_keys) == 0:
        return out
    # Search only the live queries: at higher orders most histories are already unknown.
    live = np.flatnonzero(queries >= 0)
    q = queries[live]
    idx = np.searchsorted(sorted_keys, q)
    np.minimum(idx, len(sorted_keys) - 1, out=idx)
    hit = sorted_keys[idx] == q
    out[live[hit]] = idx[hit]
    return out


def check_order(order: object) -> int:
    if not isinstance(order, (int, np.integer)) or isinstance(order, bool) or not 1 <= int(order) <= MAX_ORDER:
        raise InputError(
            f"n-gram order must be an integer from 1 to {MAX_ORDER}, got {order!r}",
            fix=f"use --order between 1 and {MAX_ORDER} (3 to 5 is typical)",
        )
    return int(order)
