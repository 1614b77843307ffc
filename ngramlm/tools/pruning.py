"""Pruning a back-off model: count cut-offs and entropy-based pruning (Stolcke 1998).

Both work on the fitted back-off form (stored n-grams, log10 p, log10 backoff):

1. choose n-grams to drop (order >= 2 only; an n-gram that is the context of a kept
   higher-order n-gram is always kept, since its entry carries that context's
   back-off weight);
2. drop them, renumbering the trie;
3. recompute every context's back-off weight so each p(.|h) sums to one again:
   ``b(h) = (1 - sum_{w kept} p(w|h)) / (1 - sum_{w kept} p'(w|h'))`` where ``p'`` is
   the pruned lower-order model -- orders are finished from low to high, so ``p'``
   is always final when it is needed (SRILM's ``recomputeBOWs``, run once after all
   orders are pruned).

Entropy pruning keeps, besides the n-grams that score at least the threshold, every n-gram
SRILM's ``ngram -prune`` keeps because its back-off node is needed (:func:`close_keep`): SRILM
stores histories in a trie keyed by the most recent word first, so a kept ``x a b w`` needs the
nodes of ``x a b``, ``a b`` and ``b``, and an n-gram whose node survives is never pruned.  So
every contiguous part of a kept n-gram's history that ends where the history ends stays -- ``a b``
too, not only the context ``x a b`` -- and, through those, their own contexts.  This matters from
the 4-grams up (a 3-gram model's histories have no proper suffix but a unigram).

Entropy pruning removes an n-gram when the relative increase in perplexity it
causes, ``exp(D) - 1`` with ``D`` the relative entropy (nats) between the model
with and without it, is below a threshold.  ``D`` follows Stolcke's closed form:

    D = -P(h) [ p(w|h) (ln p'(w|h) - ln p(w|h)) + (1 - S_h) (ln b'(h) - ln b(h)) ]

with ``S_h`` the stored mass of ``h``, ``b'(h)`` its back-off weight once ``w`` is
gone, ``p'(w|h) = b'(h) p(w|h')`` and ``P(h)`` the model's chain probability of ``h``
(SRILM's convention: a leading ``<s>`` has the probability of ``</s>``).
Each n-gram is judged against the full model, as in Stolcke's paper and SRILM: SRILM prunes the
highest order first but recomputes no back-off weight until every order is done, and the scores of
order k read only the orders below k and the old ``b(h)``, so its scores are the full model's.  As
SRILM's ``computeBOW``, a numerator or denominator within ``PROB_EPSILON`` of zero counts as zero,
and a context whose back-off weight cannot be computed (numerator < 0, or no lower-order mass left
for a positive numerator) is left whole.
"""
from __future__ import annotations

import math
from typing import Optional, Sequence

import numpy as np

from corpora.errors import InputError
from corpora.vocab import BOS_ID, EOS_ID, PAD_ID

from ..scorer import Scorer

LN10 = math.log(10.0)
# SRILM's Prob_Epsilon: back-off masses (1 - stored probability) closer to zero than this are zero.
PROB_EPSILON = 3e-6


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
    """Stolcke's D (nats) for every stored n-gram of order >= 2 (index k-1; None for k=1); +inf for the
    n-grams of a context SRILM leaves whole (its back-off weight cannot be computed)."""
    out: list = [None]
    for k in range(2, model.order_ + 1):
        parent, n_ctx, p, p_low, S, L = _masses(model, k)
        bo = 10.0 ** model.log10_backoff_[k - 2]
        ctx_rows = ngram_words(model, k - 1)
        P_h = 10.0 ** _chain_log10(model, ctx_rows)
        # The back-off mass of each context, as SRILM's computeBOW rounds it.
        num = 1.0 - S
        den = 1.0 - L
        num[np.abs(num) < PROB_EPSILON] = 0.0
        den[np.abs(den) < PROB_EPSILON] = 0.0
        whole = (num < 0.0) | ((den <= 0.0) & (num > PROB_EPSILON))
        numg, deng, bog = num[parent], den[parent], bo[parent]
        with np.errstate(divide="ignore", invalid="ignore"):
            bo_new = (numg + p) / np.maximum(deng + p_low, 1e-300)
            term1 = p * (np.log(bo_new * p_low) - np.log(p))
            term2 = np.where(numg > 0, numg * (np.log(bo_new) - np.log(bog)), 0.0)
            D = -P_h[parent] * (term1 + term2)
        D = np.nan_to_num(D, nan=np.inf, posinf=np.inf)
        D[whole[parent]] = np.inf
        out.append(D)
    return out


# ----------------------------------------------------------------------------- SRILM's arithmetic
# SRILM keeps every log10 probability and back-off weight as a C float (its LogP), sums back-off
# weights and history probabilities in float, and takes the differences inside Stolcke's formula in
# float; the masses (1 - sums of probabilities) are doubles.  Two terms of that formula nearly cancel,
# so its relative perplexity change carries an error of ~1e-5 relative -- enough to flip the n-grams
# that score within that much of the threshold (1 in ~2 million on a PTB 5-gram at 1e-8).  The
# functions below redo the computation with the same types, step by step, to keep what SRILM keeps.
F32 = np.float32


def srilm_prob(x) -> np.ndarray:
    """SRILM's LogPtoProb: exp(x ln 10) in double (0 for -inf)."""
    return np.exp(np.asarray(x, dtype=np.float64) * LN10)


def srilm_wordprob(model, rows: np.ndarray, p32: list, bo32: list) -> np.ndarray:
    """log10 p(last word | the words before it) of each row, as SRILM's wordProbBO computes it in float:
    walk the history from its most recent word back, remember the deepest stored probability, and add
    the back-off weights of the history nodes past it, summed in float from the shortest.  (SRILM's walk
    ends at the first missing node; its trie cannot hold a longer history without the shorter ones,
    where tables that are not suffix-closed can -- a history missing here counts as a node of weight
    one, as SRILM's trie holds it.)"""
    m, L = rows.shape
    V = len(model.vocab_)
    w = rows[:, -1].astype(np.int64)
    lp = p32[0][w].copy()
    bow = np.zeros(m, dtype=F32)
    for j in range(1, L):
        node = _rows_by_words(model, rows[:, L - 1 - j:L - 1])
        idx = np.flatnonzero(node >= 0)
        node = node[idx]
        bow[idx] = bow[idx] + bo32[j - 1][node]
        g = model._find(j + 1, node * V + w[idx])
        hit = g >= 0
        lp[idx[hit]] = p32[j][g[hit]]
        bow[idx[hit]] = 0.0
    return lp + bow


def _context_log10_f32(model, p32: list, bo32: list) -> list:
    """``cp[j-1]``: SRILM's contextProb of every order-j row (j < n) taken as a history, in float: the sum,
    oldest word first, of each word's wordProbBO given the words before it (a leading ``<s>`` counted
    as ``</s>``, whose probability it has as a history)."""
    V = len(model.vocab_)
    first = p32[0].copy()
    first[BOS_ID] = p32[0][EOS_ID]
    out = [first]
    for j in range(2, model.order_):
        grams = ngram_words(model, j)
        parent = np.asarray(model.keys_[j - 1], dtype=np.int64) // V
        out.append(out[-1][parent] + srilm_wordprob(model, grams, p32, bo32))
    return out


def srilm_ratios(model) -> list:
    """The relative perplexity change of removing each stored n-gram of order >= 2 (index k-1; None for
    k=1) as SRILM's ``pruneProbs`` computes it, float for float (see above); +inf where SRILM leaves the
    context whole.  Compare with :func:`entropy_scores` (double precision throughout): ``expm1(D)``."""
    V = len(model.vocab_)
    n = model.order_
    p32 = [np.asarray(x, dtype=F32) for x in model.log10_prob_]
    bo32 = [np.asarray(x, dtype=F32) for x in model.log10_backoff_]
    cp = _context_log10_f32(model, p32, bo32)
    out: list = [None]
    for k in range(2, n + 1):
        parent = np.asarray(model.keys_[k - 1], dtype=np.int64) // V
        n_ctx = len(model.keys_[k - 2])
        grams = ngram_words(model, k)
        p = p32[k - 1]
        bp = srilm_wordprob(model, grams[:, 1:], p32, bo32)  # p(w | h'), the lower-order estimate
        num = 1.0 - np.bincount(parent, weights=srilm_prob(p), minlength=n_ctx)
        den = 1.0 - np.bincount(parent, weights=srilm_prob(bp), minlength=n_ctx)
        num[np.abs(num) < PROB_EPSILON] = 0.0
        den[np.abs(den) < PROB_EPSILON] = 0.0
        whole = (num < 0.0) | ((den <= 0.0) & (num > PROB_EPSILON))
        numg = num[parent]
        with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
            new_bow = (np.log10(numg + srilm_prob(p)) - np.log10(den[parent] + srilm_prob(bp))).astype(F32)
            delta_lp = (bp + new_bow) - p  # float
            delta_bow = (new_bow - bo32[k - 2][parent]).astype(np.float64)  # float, then double
            delta_h = -srilm_prob(cp[k - 2][parent]) * (srilm_prob(p) * delta_lp.astype(np.float64)
                                                          + numg * delta_bow)
            ratio = np.exp(delta_h * LN10) - 1.0
        ratio = np.where(np.isnan(ratio), np.inf, ratio)
        ratio[whole[parent]] = np.inf
        out.append(ratio)
    return out


def history_suffixes(model) -> list:
    """``suf[k-1]`` for k >= 3: ``(order, row)`` per order-k n-gram of its longest proper suffix stored at
    an order >= 2 (row -1 where none is) -- the next back-off node SRILM's trie needs under it.  In a
    suffix-closed model that is the (k-1)-gram without the first word."""
    out: list = [None, None]
    if model.order_ < 3:
        return out
    rows = model.tables_.suffix_rows(model._find)
    for k in range(3, model.order_ + 1):
        row = np.asarray(rows[k - 1], dtype=np.int64).copy()
        order = np.full(len(row), k - 1, dtype=np.int8)
        missing = np.flatnonzero(row < 0)
        if len(missing):  # not suffix-closed: look the shorter suffixes up by their words
            words = ngram_words(model, k)[missing]
            for j in range(k - 2, 1, -1):
                todo = row[missing] < 0
                if not todo.any():
                    break
                idx = missing[todo]
                found = _rows_by_words(model, words[todo][:, k - j:])
                row[idx] = found
                order[idx] = np.where(found >= 0, j, order[idx])
        out.append((order, row))
    return out


def _rows_by_words(model, ids: np.ndarray) -> np.ndarray:
    """Row of each n-gram (a row of ``ids``) in its order of ``model``, -1 when not stored."""
    V = len(model.vocab_)
    row = np.asarray(ids[:, 0], dtype=np.int64)
    for j in range(1, ids.shape[1]):
        row = model._find(j + 1, np.where(row >= 0, row * V + ids[:, j], -1))
    return row


def close_keep(keep: list, parents: list, suffixes: list) -> list:
    """``keep`` (bool per row of each order >= 2; None for unigrams) with every n-gram SRILM keeps
    because its back-off node is needed: the histories of kept n-grams, every suffix of a needed
    history, and so on down (the module's docstring).  One pass from the highest order down: a node of
    order k is complete before order k is finished.  ``parents[k-1]``: each order-k row's context row;
    ``suffixes``: :func:`history_suffixes`.  The masks are changed in place and returned."""
    n = len(keep)
    node = [None] + [np.zeros(len(keep[k - 1]), dtype=bool) for k in range(2, n)] + [None]
    for k in range(n, 1, -1):
        if k < n:
            keep[k - 1] |= node[k - 1]
        if k >= 3:
            node[k - 2][parents[k - 1][keep[k - 1]]] = True
            if k < n:
                order, row = suffixes[k - 1]
                need = node[k - 1] & (row >= 0)
                for j in np.unique(order[need]):
                    node[j - 1][row[need & (order == j)]] = True
    return keep


def context_parents(model) -> list:
    """``parents[k-1]``: the context row (in order k-1) of every order-k n-gram, for k >= 2."""
    V = len(model.vocab_)
    return [None] + [np.asarray(model.keys_[k - 1], dtype=np.int64) // V for k in range(2, model.order_ + 1)]


def apply_keep(model, keep: list, *, compat: Optional[str] = None):
    """The tables of ``model`` without the n-grams not in ``keep`` (bool masks per order), back-offs
    renormalised.  ``model`` itself is left as it was.  ``compat="srilm"``: the back-offs as SRILM's
    ``recomputeBOWs`` computes them (:func:`_srilm_backoffs`)."""
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
    if compat == "srilm":
        _srilm_backoffs(model)
        model.n_ngrams_ = [model.n_ngrams_[0]] + [len(x) for x in model.keys_[1:]]
        return model.tables_
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


def _srilm_backoffs(model) -> None:
    """Every back-off weight of ``model`` (a scratch Scorer, changed in place), lowest order first, as
    SRILM's ``computeBOW``: the masses in double from the float probabilities, the lower-order ones by
    its float ``wordProbBO``, each rounded to zero within PROB_EPSILON; a context whose lower order has
    no mass left for a positive numerator has its probabilities scaled to sum to one (back-off weight
    one); one whose weight cannot be computed gets weight 0 (log -inf, SRILM's "improper model"); the
    weight stored as a float."""
    V = len(model.vocab_)
    n = model.order_
    model.log10_prob_[0] = _srilm_unigrams(model.log10_prob_[0])
    for k in range(2, n + 1):
        p32 = [np.asarray(x, dtype=F32) for x in model.log10_prob_[:k]]
        bo32 = [np.asarray(x, dtype=F32) for x in model.log10_backoff_[:k - 1]]
        parent = np.asarray(model.keys_[k - 1], dtype=np.int64) // V
        n_ctx = len(model.keys_[k - 2])
        low = srilm_wordprob(model, ngram_words(model, k)[:, 1:], p32, bo32)
        num = 1.0 - np.bincount(parent, weights=srilm_prob(p32[k - 1]), minlength=n_ctx)
        den = 1.0 - np.bincount(parent, weights=srilm_prob(low), minlength=n_ctx)
        num[np.abs(num) < PROB_EPSILON] = 0.0
        den[np.abs(den) < PROB_EPSILON] = 0.0
        scale = (den < PROB_EPSILON) & (num > PROB_EPSILON)
        lp = p32[k - 1].copy()
        if scale.any():
            rows = scale[parent]
            lp[rows] = lp[rows] + (-np.log10(1.0 - num[parent[rows]])).astype(F32)
            num[scale] = den[scale] = 0.0
        model.log10_prob_[k - 1] = lp.astype(np.float64)
        improper = (num < 0.0) | ((den <= 0.0) & (num > PROB_EPSILON))
        with np.errstate(divide="ignore", invalid="ignore"):
            bo = (np.log10(num) - np.log10(den)).astype(F32).astype(np.float64)
        bo[(num < PROB_EPSILON) & (den < PROB_EPSILON)] = 0.0
        bo[improper] = -np.inf
        model.log10_backoff_[k - 2] = bo


def _srilm_unigrams(log10_prob) -> np.ndarray:
    """The unigram probabilities after SRILM's ``recomputeBOWs`` (its order-0 step, ``distributeProb``):
    the mass the unigrams leave (rounded to 0 below PROB_EPSILON) goes in equal parts to the words of
    probability 0, or, when there are none, is added to every word's probability (each one rewritten,
    in float, even when the mass is 0).  ``<pad>`` and ``<s>`` (never predicted) take no part."""
    lp = np.asarray(log10_prob, dtype=F32).astype(np.float64)
    words = np.ones(len(lp), dtype=bool)
    words[[PAD_ID, BOS_ID]] = False
    mass = 1.0 - float(srilm_prob(lp[words]).sum())
    if mass < -PROB_EPSILON:
        return lp  # SRILM's "improper model": its computeBOW fails and nothing is distributed
    mass = 0.0 if mass < PROB_EPSILON else mass
    zero = words & ~np.isfinite(lp)
    with np.errstate(divide="ignore"):
        if zero.any():
            lp[zero] = math.log10(mass / int(zero.sum())) if mass > 0 else -np.inf
        else:
            lp[words] = np.log10(srilm_prob(lp[words]) + mass / int(words.sum()))
    return lp.astype(F32).astype(np.float64)


def renormalise_backoffs(model, *, compat: Optional[str] = None):
    """The tables of ``model`` with every back-off weight recomputed from its stored probabilities (the
    formula above), so each context sums to one; nothing is dropped.  Models built by changing stored
    probabilities (a static mixture, :mod:`ngramlm.tools.mix`) are finished with this.  ``compat="srilm"``:
    as SRILM's ``recomputeBOWs`` (:func:`_srilm_backoffs`)."""
    keep = [None] + [np.ones(len(model.keys_[k - 1]), dtype=bool) for k in range(2, model.order_ + 1)]
    return apply_keep(model, keep, compat=compat)


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


def pruning_ratios(model, *, compat: Optional[str] = None) -> list:
    """The relative perplexity increase of removing each n-gram of order >= 2 (index k-1; None for k=1):
    ``expm1(D)`` in double precision, or with ``compat="srilm"`` SRILM's own float arithmetic
    (:func:`srilm_ratios`), which flips the few n-grams within ~1e-5 (relative) of a threshold."""
    if compat == "srilm":
        return srilm_ratios(model)
    if compat is not None:
        raise InputError(f"unknown pruning convention {compat!r}", fix="use compat=None (ours) or 'srilm'")
    D = entropy_scores(model)
    with np.errstate(over="ignore"):
        return [None] + [np.expm1(D[k - 1]) for k in range(2, model.order_ + 1)]


def prune_entropy(model, threshold: float, *, compat: Optional[str] = None):
    """Stolcke pruning as SRILM's ``-prune threshold``: the tables without the n-grams whose removal raises
    perplexity by less than ``threshold`` (relative), but for those whose back-off node a kept n-gram
    needs (:func:`close_keep`).  ``compat="srilm"``: the scores in SRILM's float arithmetic
    (:func:`pruning_ratios`), so the very same n-grams go."""
    if threshold <= 0:
        return model.tables_
    ratios = pruning_ratios(model, compat=compat)
    keep = [None] + [ratios[k - 1] >= threshold for k in range(2, model.order_ + 1)]
    keep = close_keep(keep, context_parents(model), history_suffixes(model))
    return apply_keep(model, keep, compat=compat)
