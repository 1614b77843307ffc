"""``--compat kenlm``: modified Kneser-Ney with lmplz's conventions, bit for bit.

The toolkit's default is the textbook estimate.  KenLM's ``lmplz`` differs from it in three small
ways, each read from its sources (``lm/builder/adjust_counts.cc``, ``corpus_count.cc``) and
reported upstream (kpu/kenlm#405, #427):

1. **Its uniform floor counts its own ``<unk>``.**  lmplz's vocabulary always has a ``<unk>`` of
   count 0 (id 0).  A corpus whose text has its own ``<unk>`` word (PTB) gives lmplz that word *and*
   its own: the unigram level interpolates with 1 / (types + 1).
2. **The last lower-order n-grams enter the discount statistics at their raw count.**  lmplz
   collects the count-of-counts of the adjusted counts while it streams the n-grams in suffix order
   (last word first, by its vocabulary ids, which number words by first appearance in the text).
   The n-grams still open when the stream ends -- the suffixes of the last full n-gram -- are
   recorded with their raw count instead of their adjusted one.  So the discounts depend on which
   word appears last in the training text.
3. **Its discounts are computed in float32.**

:func:`lmplz_adjustments` derives (1) and (2) from the count tables and the order the words first
appear in (read off the training text, or recorded block by block by a streamed build:
:class:`FirstSeen`); the last n-gram in suffix order is found in the count tables
(:func:`last_in_suffix_order`), so the out-of-core and Dask builds find it too, on columns on disk or
part by part.  The Kneser-Ney smoothers apply them (and (3)) when given.  Nothing else changes: every
n-gram, adjusted count and formula is the default's.
"""
from __future__ import annotations

from typing import Optional

import numpy as np

from corpora.errors import InputError
from corpora.vocab import BOS_ID, EOS_ID, UNK_ID

from .counts import NgramCounts


def lmplz_vocab_ids(ids: np.ndarray, V: int) -> np.ndarray:
    """lmplz's id of each of our ids: <unk> 0, <s> 1, </s> 2, then the words by first appearance in
    the text (our <unk>, where the text has it, is an ordinary word to lmplz); -1 for ids never seen."""
    kid = np.full(V, -1, dtype=np.int64)
    kid[BOS_ID] = 1
    kid[EOS_ID] = 2
    words, first = np.unique(ids, return_index=True)
    keep = words != EOS_ID
    words, first = words[keep], first[keep]
    order = words[np.argsort(first, kind="stable")]
    kid[order] = np.arange(3, 3 + len(order))
    return kid


class KeyTables:
    """A model's count tables as sorted keys per order (``parent * V + word``, order 1's row r the word
    ``lo + r``): the whole model (``lo = 0``), a part of it cut by first word (``lo``: its first word), or
    columns on disk.  ``keys[k-1]`` (k >= 2): an array, or anything with ``read(a, b)``, ``take_sorted``,
    ``searchsorted`` and ``len`` (a :class:`~ngramlm.builder.diskarrays.Column`)."""

    def __init__(self, keys: list, V: int, lo: int = 0, n1: Optional[int] = None, chunk: int = 1 << 22) -> None:
        self.keys, self.V, self.lo, self.chunk = keys, int(V), int(lo), chunk
        self.n1 = self.V - self.lo if n1 is None else int(n1)

    @classmethod
    def of_counts(cls, counts: NgramCounts) -> "KeyTables":
        return cls([None] + [counts.keys(k) for k in range(2, counts.order + 1)], counts.vocab_size)

    @property
    def order(self) -> int:
        return len(self.keys)

    def size(self, k: int) -> int:
        return self.n1 if k == 1 else len(self.keys[k - 1])

    def read(self, k: int, a: int, b: int) -> np.ndarray:
        col = self.keys[k - 1]
        return np.asarray(col[a:b] if isinstance(col, np.ndarray) else col.read(a, b), dtype=np.int64)

    def take(self, k: int, rows: np.ndarray) -> np.ndarray:
        col = self.keys[k - 1]
        return np.asarray(col[rows] if isinstance(col, np.ndarray) else col.take_sorted(rows), dtype=np.int64)

    def searchsorted(self, k: int, value: int) -> int:
        col = self.keys[k - 1]
        return int(np.searchsorted(col, value)) if isinstance(col, np.ndarray) else int(col.searchsorted(value))

    def row_of(self, gram) -> Optional[int]:
        """The row of the n-gram ``gram`` (word ids) in its order, or None (absent, or not in this part)."""
        row = int(gram[0]) - self.lo
        if not 0 <= row < self.n1:
            return None
        for j, w in enumerate(gram[1:], start=2):
            key = row * self.V + int(w)
            i = self.searchsorted(j, key)
            if i >= self.size(j) or int(self.read(j, i, i + 1)[0]) != key:
                return None
            row = i
        return row

    def bos_rows(self, k: int) -> tuple:
        """The rows ``[a, b)`` of order k that start with ``<s>`` (contiguous in sorted order)."""
        if not 0 <= BOS_ID - self.lo < self.n1:
            return 0, 0
        a, b = BOS_ID - self.lo, BOS_ID - self.lo + 1
        for j in range(2, k + 1):
            a, b = self.searchsorted(j, a * self.V), self.searchsorted(j, b * self.V)
        return a, b


def last_in_suffix_order(tables: KeyTables, kid: np.ndarray) -> Optional[tuple]:
    """The last of the text's padded n-grams in lmplz's suffix order (the last word's lmplz id first, then
    the word before ...), found in the count tables instead of the text: ``(sort key, word ids)``, both
    length n (a short n-gram at a sentence's start padded on the left with ``<s>``), or None when these
    tables hold none.

    The padded n-grams of a text are its highest order's n-grams and, at each sentence's start, its
    lower orders' n-grams that begin with ``<s>``; all are rows of the count tables.  Per order the
    candidates are narrowed a position at a time, last word first (a chunk of rows at a time for the last
    word), so only the few rows that end in the largest id are ever walked.  :func:`lmplz_adjustments`
    takes the maximum over a model's parts."""
    n, V = tables.order, tables.V
    best = None
    for k in range(n, 1, -1):
        a, b = (0, tables.size(k)) if k == n else tables.bos_rows(k)
        top, rows = -1, []
        for s in range(a, b, tables.chunk):
            ids = kid[tables.read(k, s, min(b, s + tables.chunk)) % V]
            m = int(ids.max())
            if m > top:
                top, rows = m, []
            if m == top:
                rows.append(s + np.flatnonzero(ids == m))
        if top < 0:
            continue
        rows = np.concatenate(rows)
        key, words = [], []
        for j in range(k, 0, -1):  # the last word first
            if j == 1:
                w = rows + tables.lo
            else:
                keys = tables.take(j, rows)
                w = keys % V
            ids = kid[w]
            keep = ids == ids.max()
            key.append(int(ids.max()))
            words.append(int(w[keep][0]))
            if j > 1:
                rows = np.unique(keys[keep] // V)
        pad = n - k
        cand = (tuple(key) + (int(kid[BOS_ID]),) * pad, [BOS_ID] * pad + words[::-1])
        if best is None or cand[0] > best[0]:
            best = cand
    return best


def lmplz_adjustments(text, counts: NgramCounts, *, first_seen: Optional[np.ndarray] = None) -> dict:
    """What ``--compat kenlm`` changes, for the Kneser-Ney smoothers: ``extra_types`` (1 when the
    text has its own <unk>) and ``raw_count_rows``: per order k < n, the row of the n-gram whose
    raw count lmplz's statistics record (or None).  ``first_seen`` (the ids in the order they first
    appear in the text, from :class:`FirstSeen`) stands in for ``text`` in a streamed build."""
    V = counts.vocab_size
    if first_seen is not None:
        kid = lmplz_ids_from_first_seen(first_seen, V)
    elif text is not None:
        kid = lmplz_vocab_ids(np.asarray(text.ids, dtype=np.int64), V)
    else:
        raise InputError("--compat kenlm needs the training text, or the order its words first appear in (lmplz "
                         "numbers words so)", fix="fit on the text, or on its files (fit_files, which records the "
                                                  "order as it counts), or drop --compat")
    tables = KeyTables.of_counts(counts)
    last = last_in_suffix_order(tables, kid)
    rows = suffix_rows(tables, None if last is None else last[1])
    return {"extra_types": 1 if counts.tables[0].count[UNK_ID] > 0 else 0, "raw_count_rows": rows}


def recorded_suffixes(last: Optional[list], n: int) -> list:
    """Per order k < n, the k-word suffix of ``last`` (the last padded n-gram in suffix order) whose raw
    count lmplz records, or None: no such suffix (it would cross a sentence start), or it begins with
    <s>, which keeps its raw count anyway."""
    out = [None] * n
    if last is None or n < 2:
        return out
    for k in range(1, n):
        suffix = [int(w) for w in last[n - k:]]
        if BOS_ID in suffix[1:]:
            break  # no such k-gram: the sentence starts inside it
        if suffix[0] != BOS_ID:
            out[k - 1] = suffix
    return out


def suffix_rows(tables: KeyTables, last: Optional[list]) -> list:
    """:func:`recorded_suffixes` as rows of ``tables`` (None where absent)."""
    return [None if g is None else tables.row_of(g) for g in recorded_suffixes(last, tables.order)]


def lmplz_ids_from_first_seen(first_seen: np.ndarray, V: int) -> np.ndarray:
    """:func:`lmplz_vocab_ids` from the ids in the order they first appear (repeats allowed: it numbers
    each id at its first place, as it numbers a text's)."""
    return lmplz_vocab_ids(np.asarray(first_seen, dtype=np.int64), V)


class FirstSeen:
    """The ids in the order they first appear in a text read a block at a time (a streamed build's
    blocks, in text order): :meth:`add` each block's ids, then ``order``."""

    def __init__(self) -> None:
        self.seen = np.zeros(0, dtype=bool)
        self.parts: list = []

    def add(self, ids: np.ndarray) -> None:
        words, first = np.unique(np.asarray(ids), return_index=True)
        if not len(words):
            return
        if words[-1] >= len(self.seen):
            self.seen = np.concatenate([self.seen, np.zeros(int(words[-1]) + 1 - len(self.seen), dtype=bool)])
        new = ~self.seen[words]
        if new.any():
            self.parts.append(words[new][np.argsort(first[new], kind="stable")].astype(np.int64))
            self.seen[words[new]] = True

    def tracked(self, blocks):
        """``blocks`` (encoded texts, in text order) passed on, each one's ids added on the way."""
        for block in blocks:
            self.add(block.ids)
            yield block

    @property
    def order(self) -> np.ndarray:
        return np.concatenate(self.parts) if self.parts else np.zeros(0, dtype=np.int64)


def apply_to_count_of_counts(nc: np.ndarray, adjusted, raw, row) -> np.ndarray:
    """Move one n-gram (``row``, or None: none) from its adjusted count's bucket to its raw count's
    (buckets 0..4 only); ``adjusted`` and ``raw`` index by row (arrays, or columns on disk)."""
    if row is None:
        return nc
    return move_to_raw(nc, _at(adjusted, row), _at(raw, row))


def _at(a, row: int) -> int:
    return int(a[row]) if isinstance(a, np.ndarray) else int(a.read(row, row + 1)[0])


def move_to_raw(nc: np.ndarray, a: int, r: int) -> np.ndarray:
    """The count-of-counts ``nc`` with one n-gram moved from bucket ``a`` (its adjusted count) to ``r``."""
    nc = nc.copy()
    if a < len(nc):
        nc[a] -= 1
    if r < len(nc):
        nc[r] += 1
    return nc


def float32_discounts(nc: np.ndarray, n_discounts: int) -> list:
    """Chen & Goodman's discounts as lmplz computes them: in float32, in its order of operations."""
    f = np.float32
    y = f(f(nc[1]) / f(float(nc[1]) + 2.0 * float(nc[2])))
    if n_discounts == 1:
        return [float(y)]
    return [float(f(f(j) - f(f(f(j + 1) * y) * f(nc[j + 1])) / f(nc[j]))) for j in (1, 2, 3)]
