"""A fitted n-gram model as plain data: what estimation, ARPA reading, the native loader and pruning return.

KenLM keeps estimation (``lmplz``) and querying (``query``, the ``kenlm`` module) apart, joined only by
the tables a file holds.  Here the same: every producer returns an :class:`NgramTables`, and both
query objects -- :class:`~ngramlm.model.NgramLM` (vectorised scoring, generation) and
:class:`~ngramlm.query.Model` (the kenlm API) -- are built from one.

The layout is a trie in sorted arrays.  Order 1 rows are the vocabulary ids; an order-k n-gram
(k >= 2) is the packed key ``(row of its first k-1 words in order k-1) * V + last word``, and the
keys of each order are sorted and unique, so a row number is the n-gram's rank.  Numbers are log10.
"""
from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Optional

import numpy as np

from corpora.vocab import Vocab


@dataclass
class NgramTables:
    vocab: Vocab
    kind: str  # "backoff" (ARPA form: log10 p + log10 back-off per n-gram) or "additive" (counts)
    keys: list  # per order k (index k-1): sorted int64 packed keys; order 1: arange(V)
    n_ngrams: list  # per order, as an ARPA \data\ section counts them (unigrams: types + <s>)
    smoother_name: str
    smoother_params: dict = field(default_factory=dict)
    info: dict = field(default_factory=dict)  # discounts, lambdas, pruning, source file ... for reports
    is_distribution: bool = True  # False for stupid backoff (scores, not probabilities)
    count_of_counts: list = field(default_factory=list)
    # back-off form
    log10_prob: Optional[list] = None  # per order: float64 per row (-inf: never predicted)
    log10_backoff: Optional[list] = None  # orders 1..n-1 per row; order n: empty
    missing_backoff: float = 0.0  # log10 weight of a context that is not stored (0 but for stupid backoff)
    # additive form (add-k / MLE over raw counts)
    counts: Optional[list] = None  # per order: count per row
    ctx_total: Optional[list] = None  # ctx_total[k-1][j]: total count of order-k n-grams with context row j
    add_k: Optional[float] = None

    @property
    def order(self) -> int:
        return len(self.keys)

    @property
    def V(self) -> int:
        return len(self.vocab)

    def replace(self, **changes) -> "NgramTables":
        """A copy with some fields replaced (the arrays themselves are shared, not copied)."""
        return replace(self, **changes)

    def subset(self, keep: list) -> "NgramTables":
        """These tables with only the rows ``keep`` (bool masks per order; ``None`` or an order's
        ``None``: all rows) and nothing renormalised: the caller keeps every context of a kept row.
        Keys are renumbered so they stay packed and sorted."""
        keys, lp = list(self.keys), list(self.log10_prob)
        lb = list(self.log10_backoff)
        new_index = None
        for k in range(1, self.order + 1):
            sel = keep[k - 1] if keep is not None else None
            if sel is None:
                sel = np.ones(len(keys[k - 1]), dtype=bool)
            sel = np.asarray(sel, dtype=bool)
            kk = keys[k - 1][sel]
            if k > 1 and new_index is not None:
                kk = new_index[kk // self.V] * self.V + kk % self.V
            keys[k - 1] = kk
            lp[k - 1] = lp[k - 1][sel]
            if k < self.order:
                lb[k - 1] = lb[k - 1][sel]
            new_index = np.cumsum(sel) - 1
        n_ngrams = [self.n_ngrams[0]] + [len(x) for x in keys[1:]]
        return self.replace(keys=keys, log10_prob=lp, log10_backoff=lb, n_ngrams=n_ngrams)

    def suffix_rows(self, find=None) -> list:
        """suf[k-1][r]: the row in order k-1 of order-k row r's suffix (its words but the first), -1 where
        that suffix is not an n-gram (a pruned model can keep "a b c" without "b c").  ``find(k, keys)``
        looks keys up (default: binary search)."""
        from .counts import lookup

        find = find or (lambda k, q: lookup(self.keys[k - 1], q))
        V = self.V
        out = [None, self.keys[1] % V if self.order > 1 else None]
        for k in range(3, self.order + 1):
            keys = self.keys[k - 1]
            ctx_suffix = out[k - 2][keys // V]
            q = np.where(ctx_suffix >= 0, ctx_suffix * V + keys % V, -1)
            out.append(find(k - 1, q))
        return out

    def is_suffix_closed(self, find=None) -> bool:
        closed = self.info.get("suffix_closed") if isinstance(self.info, dict) else None
        if closed is None:
            closed = all(s is None or bool(np.all(s >= 0)) for s in self.suffix_rows(find))
        return bool(closed)

    def extended_rows(self) -> list:
        """keep[k] (k = 1..n-1): order-k rows that some order-(k+1) n-gram extends, or whose back-off is
        not 1 -- the rows a minimal query state must remember (KenLM's state minimisation)."""
        V = self.V
        out = [None] * self.order
        for k in range(1, self.order):
            ext = np.zeros(len(self.keys[k - 1]), dtype=bool)
            ext[self.keys[k] // V] = True
            out[k] = ext | (self.log10_backoff[k - 1] != 0.0)
        return out
