"""Tuning interpolation weights on held-out text (Jelinek-Mercer).

The objective is the held-out cross-entropy of

    p_k(w|h) = l_k ML_k(w|h) + (1 - l_k) p_{k-1}(w|h')   (contexts seen in training)
    p_0(w)   = 1 / |V|

minimised over ``l_1..l_n`` in (0, 1) with scipy's L-BFGS-B.  Everything the
objective needs (the maximum-likelihood estimate of every order at every held-out
token) is computed once, vectorized, so each evaluation is a few numpy operations.
"""
from __future__ import annotations

import numpy as np

from corpora.vocab import EncodedText, Vocab

from .counts import NgramCounts, padded_stream
from .builder.estimate import estimate_tables
from .scorer import Scorer
from .smoothing import make_smoother


def _ml_table(counts: NgramCounts, vocab: Vocab, heldout: EncodedText) -> tuple[np.ndarray, np.ndarray]:
    """(ml[k-1, t], seen[k-1, t]) for every held-out predicted token t and order k."""
    mle = Scorer(estimate_tables(counts, vocab=vocab, smoother=make_smoother("mle")))
    tokens, pos = padded_stream(heldout)
    gids = mle._gram_ids(tokens, pos)
    n = counts.order
    keep = pos > 0
    ml = np.zeros((n, int(keep.sum())))
    seen = np.zeros((n, int(keep.sum())), dtype=bool)
    for k in range(1, n + 1):
        g = gids[k - 1]
        c_hw = np.where(g >= 0, mle.counts_[k - 1][np.maximum(g, 0)], 0.0)
        if k == 1:
            c_h = np.full(len(tokens), mle.ctx_total_[0][0])
            avail = np.ones(len(tokens), dtype=bool)
        else:
            ctx = np.empty(len(tokens), dtype=np.int64)
            ctx[0] = -1
            ctx[1:] = gids[k - 2][:-1]
            avail = pos >= k - 1
            c_h = np.where((ctx >= 0) & avail, mle.ctx_total_[k - 1][np.maximum(ctx, 0)], 0.0)
        ok = c_h > 0
        ml[k - 1] = np.where(ok, c_hw / np.where(ok, c_h, 1.0), 0.0)[keep]
        seen[k - 1] = ok[keep]
    return ml, seen


def heldout_log_likelihood(lambdas, ml: np.ndarray, seen: np.ndarray, n_types: int) -> float:
    """Total natural-log likelihood of the held-out tokens under Jelinek-Mercer weights."""
    p = np.full(ml.shape[1], 1.0 / n_types)
    for k in range(ml.shape[0]):
        lam = lambdas[k]
        p = np.where(seen[k], lam * ml[k] + (1.0 - lam) * p, p)
    return float(np.log(p).sum())


def tune_jelinek_mercer(counts: NgramCounts, vocab: Vocab, heldout: EncodedText) -> list:
    """Per-order weights maximising held-out likelihood (scipy L-BFGS-B)."""
    from scipy.optimize import minimize

    ml, seen = _ml_table(counts, vocab, heldout)
    n = counts.order
    n_types = vocab.n_types

    def objective(x):
        return -heldout_log_likelihood(x, ml, seen, n_types) / ml.shape[1]

    res = minimize(objective, x0=np.full(n, 0.5), method="L-BFGS-B", bounds=[(1e-4, 1 - 1e-4)] * n)
    return [float(x) for x in res.x]
