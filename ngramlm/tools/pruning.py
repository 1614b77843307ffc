"""Pruning a back-off model: count cut-offs and entropy-based pruning (Stolcke 1998).

Both work on the fitted back-off form (stored n-grams, log10 p, log10 backoff):

1. choose n-grams to drop (order >= 2 only; an n-gram that is the context of a kept
   higher-order n-gram is always kept, since its entry carries that context's
   back-off weight);
2. drop them, renumbering the trie;
3. recompute every context's back-off weight so each p(.|h) sums to one again:
   ``b(h) = (1 - sum_{w kept} p(w|h)) / (1 - sum_{w kept} p'(w|h'))`` where ``p'`` is
   the pruned lower-order model -- orders are finished from low to high, so ``p'``
   is always final when it is needed.

Entropy pruning removes an n-gram when the relative increase in perplexity it
causes, ``exp(D) - 1`` with ``D`` the relative entropy (nats) between the model
with and without it, is below a threshold.  ``D`` follows Stolcke's closed form:

    D = -P(h) [ p(w|h) (ln p'(w|h) - ln p(w|h)) + (1 - S_h) (ln b'(h) - ln b(h)) ]

with ``S_h`` the stored mass of ``h``, ``b'(h)`` its back-off weight once ``w`` is
gone, ``p'(w|h) = b'(h) p(w|h')`` and ``P(h)`` the model's chain probability of ``h``
(SRILM's convention: a leading ``<s>`` has the probability of ``</s>``).
Each n-gram is judged against the full model, as in Stolcke's paper and SRILM.
"""
from __future__ import annotations

import math
from typing import Optional, Sequence

import numpy as np

from corpora.errors import InputError
from corpora.vocab import BOS_ID, EOS_ID

from ..scorer import Scorer

LN10 = math.log(10.0)


def ngram_words(model, k: int) -> np.ndarray:
    """The stored k-grams of ``model`` as an (m_k, k) array of ids (trie order)."""
    V = len(model.vocab_)
    grams = np.arange(V, dtype=np.int64)[:, None]
    for j in range(2, k + 1):
        keys = model.keys_[j - 1]
        grams = np.column_stack([grams[keys // V], keys % V])
    return grams


def score_rows(model, rows: np.ndarray) -> np.ndarray:
    """log10 p of the last word of each row given the words before it (rows without
    a leading <s> are scored as if their history were long)."""
    m, L = rows.shape
    if m == 0:
        return np.zeros(0)
    tokens = rows.ravel()
    start = np.where(rows[:, 0] == BOS_ID, 0, model.order_)
    pos = (start[:, None] + np.arange(L)[None, :]).ravel()
    lp, _ = model._score_padded(tokens, pos)
    return lp.reshape(m, L)[:, -1]


_score_rows = score_rows  # the name this module's code uses


def _chain_log10(model, rows: np.ndarray) -> np.ndarray:
    """log10 P(row) by the chain rule.

    A leading ``<s>`` is never predicted; as in SRILM, its marginal probability is
    taken to be the unigram p(</s>) (a sentence starts where the last one ended).
    """
    m, L = rows.shape
    tokens = rows.ravel()
    start = np.where(rows[:, 0] == BOS_ID, 0, model.order_)
    pos = (start[:, None] + np.arange(L)[None, :]).ravel()
    lp, _ = model._score_padded(tokens, pos)
    lp = lp.reshape(m, L)
    lp[:, 0] = np.where(rows[:, 0] == BOS_ID, model.log10_prob_[0][EOS_ID], lp[:, 0])
    return lp.sum(axis=1)


def _context_sums(parent: np.ndarray, values: np.ndarray, n: int) -> np.ndarray:
    return np.bincount(parent, weights=values, minlength=n)


def _masses(model, k: int):
    """For order k: parent index of each n-gram, number of contexts, p(w|h), p(w|h')
    under the current model, and per context the stored mass S_h and its lower-order
    mass L_h (both sums over the words stored after h)."""
    V = len(model.vocab_)
    parent = model.keys_[k - 1] // V
    n_ctx = len(model.keys_[k - 2])
    grams = ngram_words(model, k)
    p = 10.0 ** model.log10_prob_[k - 1]
    p_low = 10.0 ** _score_rows(model, grams[:, 1:])
    return parent, n_ctx, p, p_low, _context_sums(parent, p, n_ctx), _context_sums(parent, p_low, n_ctx)


def entropy_scores(model) -> list:
    """Stolcke's D (nats) for every stored n-gram of order >= 2 (index k-1; None for k=1)."""
    out: list = [None]
    for k in range(2, model.order_ + 1):
        parent, n_ctx, p, p_low, S, L = _masses(model, k)
        bo = 10.0 ** model.log10_backoff_[k - 2]
        ctx_rows = ngram_words(model, k - 1)
        P_h = 10.0 ** _chain_log10(model, ctx_rows)
        Sg, Lg, bog = S[parent], L[parent], bo[parent]
        with np.errstate(divide="ignore", invalid="ignore"):
            bo_new = (1.0 - Sg + p) / np.maximum(1.0 - Lg + p_low, 1e-300)
            term1 = p * (np.log(bo_new * p_low) - np.log(p))
            term2 = np.where(1.0 - Sg > 0, (1.0 - Sg) * (np.log(bo_new) - np.log(bog)), 0.0)
            D = -P_h[parent] * (term1 + term2)
        out.append(np.nan_to_num(D, nan=np.inf, posinf=np.inf))
    return out


def apply_keep(model, keep: list):
    """The tables of ``model`` without the n-grams not in ``keep`` (bool masks per order), back-offs
    renormalised.  ``model`` itself is left as it was."""
    t = model.tables_
    # A scratch scorer over fresh lists: the back-offs below are recomputed with the pruned
    # lower orders already in place, so the scorer must see the tables as they are being built.
    model = Scorer(t.replace(keys=list(t.keys), log10_prob=list(t.log10_prob),
                                          log10_backoff=list(t.log10_backoff), n_ngrams=list(t.n_ngrams)))
    V = len(model.vocab_)
    n = model.order_
    keep = [None] + [np.asarray(m, dtype=bool).copy() for m in keep[1:]]
    # Contexts of kept higher-order n-grams stay.
    for k in range(n, 2, -1):
        parents = model.keys_[k - 1][keep[k - 1]] // V
        keep[k - 2][parents] = True
    # Compact each order, renumbering parents.
    for k in range(2, n + 1):
        keys = model.keys_[k - 1]
        if k > 2:
            prev_keep = keep[k - 2]
            new_index = np.cumsum(prev_keep) - 1
            sel = keep[k - 1]
            parent = keys[sel] // V
            keys_new = new_index[parent] * V + keys[sel] % V
        else:
            sel = keep[k - 1]
            keys_new = keys[sel]
        model.keys_[k - 1] = keys_new
        model.log10_prob_[k - 1] = model.log10_prob_[k - 1][sel]
        if k < n:
            model.log10_backoff_[k - 1] = model.log10_backoff_[k - 1][sel]
    # Recompute back-off weights, low orders first.
    for k in range(2, n + 1):
        parent, n_ctx, _, _, S, L = _masses(model, k)
        num = 1.0 - S
        den = 1.0 - L
        has = np.bincount(parent, minlength=n_ctx) > 0
        with np.errstate(divide="ignore", invalid="ignore"):
            bo = np.where(has, np.maximum(num, 0.0) / np.where(den > 1e-15, den, np.nan), 1.0)
        bo = np.where(np.isfinite(bo), bo, 0.0)
        with np.errstate(divide="ignore"):
            model.log10_backoff_[k - 2] = np.where(has, np.log10(bo), 0.0)
    model.n_ngrams_ = [model.n_ngrams_[0]] + [len(x) for x in model.keys_[1:]]
    return model.tables_


def renormalise_backoffs(model):
    """The tables of ``model`` with every back-off weight recomputed from its stored probabilities (the
    formula above), so each context sums to one; nothing is dropped.  Models built by changing stored
    probabilities (a static mixture, :mod:`ngramlm.tools.mix`) are finished with this."""
    keep = [None] + [np.ones(len(model.keys_[k - 1]), dtype=bool) for k in range(2, model.order_ + 1)]
    return apply_keep(model, keep)


def check_prune_args(order: int, count_thresholds: Optional[Sequence[int]], entropy_threshold: Optional[float]) -> None:
    if count_thresholds is not None:
        t = list(count_thresholds)
        if any((not isinstance(x, (int, np.integer))) or x < 0 for x in t):
            raise InputError(f"count cut-offs must be integers >= 0, got {t}", fix="e.g. --prune 0,1,1")
        if t and t[0] != 0:
            raise InputError("unigrams cannot be pruned (the vocabulary would lose words)",
                             fix="start the cut-offs with 0, e.g. --prune 0,1,1; shrink the vocabulary with --min-count")
        if any(b < a for a, b in zip(t, t[1:])):
            raise InputError(f"count cut-offs must not decrease with the order, got {t}",
                             fix="e.g. --prune 0,1,2 rather than 0,2,1")
    if entropy_threshold is not None and not entropy_threshold >= 0:
        raise InputError(f"entropy pruning threshold must be >= 0, got {entropy_threshold}", fix="e.g. --prune-entropy 1e-8")


def prune_counts(model, raw_counts: list, thresholds: Sequence[int]):
    """Drop n-grams whose raw count is <= the threshold of their order (KenLM's --prune)."""
    t = list(thresholds) + [thresholds[-1]] * (model.order_ - len(thresholds))
    keep = [None] + [raw_counts[k - 1] > t[k - 1] for k in range(2, model.order_ + 1)]
    return apply_keep(model, keep)


def prune_entropy(model, threshold: float):
    """Stolcke pruning: the tables without the n-grams whose removal raises perplexity by less than
    ``threshold`` (relative)."""
    if threshold <= 0:
        return model.tables_
    D = entropy_scores(model)
    keep = [None] + [np.expm1(D[k - 1]) >= threshold for k in range(2, model.order_ + 1)]
    return apply_keep(model, keep)
