"""Estimation's last step: counts and a smoother into the tables of a fitted model."""
from __future__ import annotations

import numpy as np

from corpora.errors import InputError
from corpora.vocab import BOS_ID, PAD_ID, Vocab

from ..counts import NgramCounts
from ..smoothing import AdditiveSmoother, BackoffEstimate, Smoother
from ..tables import NgramTables


def estimate_tables(counts: NgramCounts, *, vocab: Vocab, smoother: Smoother) -> NgramTables:
    """Smooth ``counts`` into the tables of a fitted model (estimation's output)."""
    if counts.vocab_size != len(vocab):
        raise InputError(f"counts are over {counts.vocab_size} ids but the vocabulary has {len(vocab)}",
                         fix="count with the same vocabulary")
    common = dict(
        vocab=vocab,
        keys=[counts.keys(k) for k in range(1, counts.order + 1)],
        # Unigrams as an ARPA file lists them: every type plus <s>.
        n_ngrams=[vocab.n_types + 1] + [len(counts.tables[k - 1]) for k in range(2, counts.order + 1)],
        smoother_name=smoother.name,
        smoother_params=smoother.get_params(),
        count_of_counts=[counts.count_of_counts(k).tolist() for k in range(1, counts.order + 1)],
    )
    if isinstance(smoother, AdditiveSmoother):
        cnt = [t.count.astype(np.float64) for t in counts.tables]
        cnt[0] = cnt[0].copy()
        cnt[0][[PAD_ID, BOS_ID]] = 0.0
        # ctx_total[k-1][j]: total count of order-k n-grams whose context is entry j of order k-1.
        totals = [np.array([cnt[0].sum()])]
        for k in range(2, counts.order + 1):
            totals.append(np.bincount(counts.tables[k - 1].parent, weights=cnt[k - 1],
                                      minlength=len(counts.tables[k - 2])))
        return NgramTables(kind="additive", counts=cnt, ctx_total=totals, add_k=float(smoother.k),
                           info={"k": float(smoother.k)}, **common)
    est: BackoffEstimate = smoother.estimate(counts, vocab.n_types)
    # float64 end to end, so every p(.|h) sums to 1 within 1e-9 (KenLM uses float32).
    tables = NgramTables(kind="backoff", log10_prob=[np.asarray(p, dtype=np.float64) for p in est.log10_prob],
                       log10_backoff=[np.asarray(b, dtype=np.float64) for b in est.log10_backoff],
                       missing_backoff=float(est.missing_backoff), is_distribution=est.is_distribution,
                       info=est.info, **common)
    return tables if est.keep is None else tables.subset(est.keep)

