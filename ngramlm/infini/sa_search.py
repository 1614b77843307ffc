"""Suffix-array searches in numpy: the ∞-gram's queries where the compiled extension is absent.

Same functions, arguments and results as ``ngramlm._fast.tokens.sa_count_many`` / ``sa_range`` /
``sa_infini`` (tested equal on random and real indexes), so :mod:`ngramlm.infini.index` calls whichever
is present.  The C version answers one pattern at a time; here *all* patterns advance together,
one token of depth per step, each step a vectorised binary search over the rows that share the
pattern so far (the suffixes in such a block are sorted by their next token).  A step costs
about 2·log2(n) numpy passes over the patterns still alive, so a test stream costs
(longest match) × 2·log2(n) passes, and the work per pass shrinks as patterns stop matching.

The longest match at every test position (the effective n) comes from *matching statistics*:
``reach[s]``, the end of the longest prefix of the stream at ``s`` (within its sentence) that
occurs in the index.  Occurrence is closed under taking substrings, so ``reach`` never decreases
inside a sentence, and the longest occurring suffix of the history before ``t`` starts at the
first ``s`` of ``t``'s sentence whose reach is at least ``t`` -- one ``searchsorted``.
"""
from __future__ import annotations

import numpy as np


def _next_token(tok: np.ndarray, sa: np.ndarray, rows: np.ndarray, depth: np.ndarray) -> np.ndarray:
    """The token at ``depth`` in the suffix of SA row ``rows`` (-1 where that suffix ends first)."""
    at = np.asarray(sa[rows], dtype=np.int64) + depth
    inside = at < len(tok)
    out = np.full(len(rows), -1, dtype=np.int64)
    out[inside] = np.asarray(tok[at[inside]], dtype=np.int64)
    return out


def _bound(tok, sa, lo, hi, depth, target, *, upper: bool) -> np.ndarray:
    """Per query, the first row in [lo, hi) whose token at ``depth`` is >= target (> target with
    ``upper``); rows in a block that share the pattern up to ``depth`` are sorted by that token."""
    lo, hi = lo.copy(), hi.copy()
    live = np.flatnonzero(lo < hi)
    while len(live):
        a, b = lo[live], hi[live]
        mid = (a + b) >> 1
        key = _next_token(tok, sa, mid, depth[live])
        go_right = key <= target[live] if upper else key < target[live]
        lo[live] = np.where(go_right, mid + 1, a)
        hi[live] = np.where(go_right, b, mid)
        live = live[lo[live] < hi[live]]
    return lo


def _narrow(tok, sa, lo, hi, depth, target):
    """Narrow each block [lo, hi) to its rows whose token at ``depth`` equals ``target``."""
    first = _bound(tok, sa, lo, hi, depth, target, upper=False)
    last = _bound(tok, sa, first, hi, depth, target, upper=True)
    return first, last


def prefix_ranges(tok, sa, stream: np.ndarray, starts: np.ndarray, lengths: np.ndarray):
    """For patterns ``stream[starts[i] : starts[i] + lengths[i]]``: the SA rows [lo, hi) of each whole
    pattern (lo == hi where it does not occur) and ``matched``, the length of its longest prefix
    that does occur."""
    q = len(starts)
    lo = np.zeros(q, dtype=np.int64)
    hi = np.full(q, len(sa), dtype=np.int64)
    matched = np.zeros(q, dtype=np.int64)
    if len(tok) == 0:
        hi[:] = 0
        return lo, hi, matched
    stream = np.asarray(stream, dtype=np.int64)
    starts = np.asarray(starts, dtype=np.int64)
    lengths = np.asarray(lengths, dtype=np.int64)
    live = np.flatnonzero(lengths > 0)
    d = 0
    while len(live):
        depth = np.full(len(live), d, dtype=np.int64)
        a, b = _narrow(tok, sa, lo[live], hi[live], depth, stream[starts[live] + d])
        lo[live], hi[live] = a, b
        found = b > a
        matched[live[found]] = d + 1
        hi[live[~found]] = lo[live[~found]]  # an empty block: the pattern does not occur
        d += 1
        live = live[found & (lengths[live] > d)]
    return lo, hi, matched


def sa_count_many(tok, sa, flat, offsets) -> np.ndarray:
    """Occurrences of each pattern ``flat[offsets[i]:offsets[i+1]]`` in the indexed stream."""
    offsets = np.asarray(offsets, dtype=np.int64)
    if len(tok) == 0:
        return np.zeros(len(offsets) - 1, dtype=np.int64)
    lo, hi, _ = prefix_ranges(tok, sa, flat, offsets[:-1], np.diff(offsets))
    return hi - lo


def sa_range(tok, sa, pat) -> tuple:
    """(lo, hi): the suffix-array rows whose suffixes start with ``pat``."""
    pat = np.asarray(pat, dtype=np.int64)
    if not len(pat) or not len(tok):
        return 0, len(sa)
    lo, hi, _ = prefix_ranges(tok, sa, pat, np.zeros(1, dtype=np.int64), np.array([len(pat)]))
    return int(lo[0]), int(hi[0])


def sa_infini(tok, sa, test, pos, max_len: int):
    """The longest occurring suffix h' of every predicted position's history, with cnt(h') and
    cnt(h' w) and whether h' has a single distinct continuation; as ``_fast.tokens.sa_infini``."""
    test = np.asarray(test, dtype=np.int64)
    pos = np.asarray(pos, dtype=np.int64)
    T, n = len(test), len(tok)
    eff = np.zeros(T, dtype=np.int32)
    ch = np.zeros(T, dtype=np.int64)
    chw = np.zeros(T, dtype=np.int64)
    one = np.zeros(T, dtype=np.uint8)
    if n == 0 or T == 0:
        return eff, ch, chw, one
    # Sentences of the padded stream: <s> sits where pos == 0.
    idx = np.arange(T, dtype=np.int64)
    sent = np.cumsum(pos == 0) - 1
    sent_start = idx - pos
    sent_end = np.full(T, T, dtype=np.int64)  # one past the sentence's last token
    starts_at = np.flatnonzero(pos == 0)
    sent_end_of = np.append(starts_at[1:], T)
    sent_end = sent_end_of[np.maximum(sent, 0)]
    # Matching statistics: the longest prefix of test[s : sentence end] that occurs.
    _, _, m = prefix_ranges(tok, sa, test, idx, sent_end - idx)
    reach = idx + m
    key = sent * (T + 1) + reach  # non-decreasing: by sentence, then by reach within it
    pred = np.flatnonzero(pos > 0)
    t = pred
    first = np.searchsorted(key, sent[t] * (T + 1) + t, side="left")
    first = np.maximum(first, sent_start[t])
    L = t - first
    if max_len >= 0:
        L = np.minimum(L, max_len)
    s = t - L
    lo, hi, _ = prefix_ranges(tok, sa, test, s, L)
    lo2, hi2, _ = prefix_ranges(tok, sa, test, s, L + 1)
    eff[t] = L
    ch[t] = hi - lo
    chw[t] = hi2 - lo2
    has = hi > lo
    a_end = np.asarray(sa[np.where(has, lo, 0)], dtype=np.int64) + L
    b_end = np.asarray(sa[np.where(has, hi - 1, 0)], dtype=np.int64) + L
    ok = has & (a_end < n) & (b_end < n)
    same = np.zeros(len(t), dtype=bool)
    same[ok] = np.asarray(tok[a_end[ok]]) == np.asarray(tok[b_end[ok]])
    one[t] = same.astype(np.uint8)
    return eff, ch, chw, one
