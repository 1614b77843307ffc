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

:func:`lmplz_adjustments` derives (1) and (2) from the training text; the Kneser-Ney smoothers
apply them (and (3)) when given.  Nothing else changes: every n-gram, adjusted count and formula is
the default's.
"""
from __future__ import annotations

import numpy as np

from corpora.errors import InputError
from corpora.vocab import BOS_ID, EOS_ID, UNK_ID

from .counts import NgramCounts, lookup


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


def _padded_ngrams(ids: np.ndarray, starts: np.ndarray, n: int) -> np.ndarray:
    """Every token's n-gram (T, n) with its history padded by <s>, as lmplz's counter writes them."""
    T = len(ids)
    pos = np.arange(T) - np.repeat(starts[:-1], np.diff(starts))  # position within the sentence
    out = np.empty((T, n), dtype=np.int64)
    for j in range(n):
        back = n - 1 - j  # column j holds the token `back` steps before
        src = np.arange(T) - back
        out[:, j] = np.where(pos >= back, ids[np.maximum(src, 0)], BOS_ID)
    return out


def lmplz_adjustments(text, counts: NgramCounts) -> dict:
    """What ``--compat kenlm`` changes, for the Kneser-Ney smoothers: ``extra_types`` (1 when the
    text has its own <unk>) and ``raw_count_rows``: per order k < n, the row of the n-gram whose
    raw count lmplz's statistics record (or None)."""
    if text is None:
        raise InputError("--compat kenlm needs the training text in memory (it depends on the order words "
                         "first appear in)", fix="drop --memory/--dask (train in memory), or drop --compat")
    n = counts.order
    V = counts.vocab_size
    ids = np.asarray(text.ids, dtype=np.int64)
    kid = lmplz_vocab_ids(ids, V)
    extra = 1 if counts.tables[0].count[UNK_ID] > 0 else 0
    rows = [None] * n
    if n >= 2 and len(ids):
        grams = _padded_ngrams(ids, np.asarray(text.starts), n)
        kg = kid[grams]
        # The last n-gram in suffix order: compare the last word first (np.lexsort's last key is primary).
        last = grams[np.lexsort([kg[:, j] for j in range(n)])[-1]]
        for k in range(1, n):
            suffix = last[n - k:]
            if BOS_ID in suffix[1:]:
                break  # no such k-gram: the sentence starts inside it
            if suffix[0] == BOS_ID:
                continue  # lmplz keeps raw counts for n-grams that begin with <s> anyway
            row = np.array([suffix[0]], dtype=np.int64)
            for j in range(1, k):
                row = lookup(counts.keys(j + 1), row * V + suffix[j])
            rows[k - 1] = int(row[0]) if row[0] >= 0 else None
    return {"extra_types": extra, "raw_count_rows": rows}


def apply_to_count_of_counts(nc: np.ndarray, adjusted: np.ndarray, raw: np.ndarray, row) -> np.ndarray:
    """Move one n-gram from its adjusted count's bucket to its raw count's (buckets 0..4 only)."""
    if row is None:
        return nc
    nc = nc.copy()
    a, r = int(adjusted[row]), int(raw[row])
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
