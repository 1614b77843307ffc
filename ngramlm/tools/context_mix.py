"""Per-context linear mixtures: weights that depend on a bucket of the history (SRILM's ``-bayes`` idea).

One global weight mixes a count model and a neural model as ``p = λ p_a + (1 - λ) p_b`` at every
token.  But the count model is good exactly where it has seen the history -- a long n-gram
match -- and weak where it backs off to the unigram; the neural model's strength is spread more
evenly.  So the weights are made a function of a *bucket of the history* ``c(h)``::

    p(w | h) = sum_i λ_i[c(h)] p_i(w | h),    sum_i λ_i[c] = 1 for every bucket c

Because the bucket is computed from the history alone, every context's mixture is a convex
combination of distributions and sums to one over the vocabulary.  (A bucket taken from the
n-gram that matched *the predicted word* -- ``full_scores``' length at ``w`` -- would not: the
weights would then change with ``w``.)  The buckets used here:

* :func:`ngram_context_buckets`: how many words of the history the n-gram model knows, i.e.
  the length of the longest suffix of the history that is a context in the model.  That is the
  matched length of the *previous* token's n-gram (capped at order - 1), and 1 at a sentence's
  first token (the history ``<s>``).  No second lookup is needed: ``TokenScores.ngram_length``
  of the previous position gives it.
* the ∞-gram's effective n (``InfiniScores.eff_n``: one plus the longest suffix of the history
  seen in the training text), capped, and split by whether that suffix had a single continuation.

Weights per bucket are fitted by EM on held-out text (:func:`ngramlm.tools.mix.best_mix` within each
bucket); a bucket with fewer than ``min_tokens`` held-out tokens takes the global weights.
All per-token probabilities here are natural logs (nats).
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Optional

import numpy as np

from corpora.errors import InputError

from .mix import best_mix

MIN_BUCKET_TOKENS = 200  # fewer held-out tokens than this in a bucket: use the global weights there
LN10 = math.log(10.0)


def ngram_context_buckets(ngram_length: np.ndarray, sentence_starts: np.ndarray, *, order: int) -> np.ndarray:
    """Per predicted token: the number of history words the n-gram model matches (1 .. order - 1).

    ``ngram_length``: ``TokenScores.ngram_length`` of the same tokens; ``sentence_starts``: the
    text's sentence offsets (``EncodedText.starts``).  Token ``t``'s bucket depends only on tokens
    before ``t`` in its sentence.
    """
    lengths = np.asarray(ngram_length, dtype=np.int64)
    n = len(lengths)
    out = np.empty(n, dtype=np.int64)
    out[0:1] = 1
    out[1:] = np.clip(lengths[:-1], 1, max(1, order - 1))
    starts = np.asarray(sentence_starts, dtype=np.int64)
    out[starts[(starts >= 0) & (starts < n)]] = 1  # a sentence's first token: the history is <s>
    return out


def infini_context_buckets(eff_n: np.ndarray, sparse: np.ndarray, *, cap: int = 6) -> np.ndarray:
    """Per predicted token: ``min(eff_n, cap)``, doubled into "sparse" / "dense" (0-based bucket ids)."""
    e = np.minimum(np.asarray(eff_n, dtype=np.int64), cap)
    return 2 * (e - 1) + np.asarray(sparse, dtype=np.int64)


@dataclass
class BucketMix:
    """Weights per bucket: ``weights[b]`` sums to one over the components; ``tokens[b]`` held-out
    tokens behind it (0 for buckets that took the global weights)."""

    weights: np.ndarray  # (n_buckets, K)
    tokens: np.ndarray  # (n_buckets,)
    global_weights: np.ndarray  # (K,)

    def to_dict(self, names: Optional[list] = None) -> dict:
        names = names or [f"model {i}" for i in range(self.weights.shape[1])]
        return {"global": dict(zip(names, map(float, self.global_weights))),
                "buckets": [{"bucket": b, "tokens": int(t), "weights": dict(zip(names, map(float, w)))}
                            for b, (w, t) in enumerate(zip(self.weights, self.tokens))]}


def _check(component_lp: np.ndarray, buckets: np.ndarray) -> tuple:
    lp = np.asarray(component_lp, dtype=np.float64)
    b = np.asarray(buckets, dtype=np.int64)
    if lp.ndim != 2 or lp.shape[1] != len(b):
        raise InputError(f"the models scored {lp.shape[-1]} tokens but {len(b)} buckets were given",
                         fix="score every model on the same tokens of the same text")
    if len(b) and b.min() < 0:
        raise InputError("bucket ids must be >= 0", fix="map the contexts to 0, 1, 2, ...")
    return lp, b


def fit_bucket_mix(component_lp_nats: np.ndarray, buckets: np.ndarray, *, n_buckets: Optional[int] = None,
                   min_tokens: int = MIN_BUCKET_TOKENS) -> BucketMix:
    """EM weights per bucket on held-out text.  ``component_lp_nats``: (K, N) ln p of each model."""
    lp, b = _check(component_lp_nats, buckets)
    n_buckets = int(b.max()) + 1 if n_buckets is None else int(n_buckets)
    glob = np.asarray(best_mix(lp / LN10).weights)
    weights = np.tile(glob, (n_buckets, 1))
    tokens = np.zeros(n_buckets, dtype=np.int64)
    for k in range(n_buckets):
        sel = b == k
        if sel.sum() >= min_tokens:
            weights[k] = best_mix(lp[:, sel] / LN10, start=glob).weights
            tokens[k] = int(sel.sum())
    return BucketMix(weights, tokens, glob)


def mix_by_bucket(component_lp_nats: np.ndarray, buckets: np.ndarray, mix: BucketMix) -> np.ndarray:
    """ln of ``sum_i λ_i[bucket] p_i`` at every token (buckets beyond the fitted ones take the global weights)."""
    lp, b = _check(component_lp_nats, buckets)
    w = np.vstack([mix.weights, mix.global_weights[None, :]])
    rows = np.where(b < len(mix.weights), b, len(mix.weights))
    with np.errstate(divide="ignore"):
        logw = np.log(w[rows].T)  # (K, N)
    return np.logaddexp.reduce(lp + logw, axis=0)


def global_mix(component_lp_nats: np.ndarray, weights) -> np.ndarray:
    """ln of ``sum_i λ_i p_i`` with one weight per model at every token."""
    lp = np.asarray(component_lp_nats, dtype=np.float64)
    with np.errstate(divide="ignore"):
        logw = np.log(np.asarray(weights, dtype=np.float64))[:, None]
    return np.logaddexp.reduce(lp + logw, axis=0)
