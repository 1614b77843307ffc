"""Bootstrap confidence intervals by sentence (Efron's percentile bootstrap).

A test perplexity is one number from one sample of sentences; how much would it move on another
sample of the same kind?  Resample the test *sentences* with replacement (a sentence is the unit:
its tokens are not independent), recompute the corpus-level figure from the resampled sums, and
read the 2.5 % and 97.5 % quantiles over the resamples.

Every model of a run is resampled with the *same* draws (a fixed seed and the same number of
units), so two intervals are comparable -- and a difference between two models can be read from
the paired resamples (:func:`paired_share`).

The figures are ratios of sums (``sum log2 p / sum tokens``, ``sum log2 p / sum bytes``), so each
resample needs only the per-unit sums: one ``(resamples x units)`` count matrix times a vector.
"""
from __future__ import annotations

from functools import lru_cache
from typing import Optional

import numpy as np

RESAMPLES = 1000
LEVEL = 0.95
SEED = 20240601  # fixed: every model of every run gets the same resamples of the same test text
MIN_UNITS = 30  # fewer sentences than this (a text read as one running sequence): blocks of tokens instead
BLOCK_TOKENS = 256


def units(starts: np.ndarray, n_tokens: int) -> np.ndarray:
    """The unit boundaries to resample: the sentence starts, or blocks of ``BLOCK_TOKENS`` tokens when
    the text has fewer than ``MIN_UNITS`` sentences (one running text has one "sentence")."""
    starts = np.asarray(starts, dtype=np.int64)
    if len(starts) - 1 >= MIN_UNITS:
        return starts
    return np.unique(np.append(np.arange(0, n_tokens, BLOCK_TOKENS, dtype=np.int64), n_tokens))


def unit_sums(values: np.ndarray, bounds: np.ndarray) -> np.ndarray:
    """The sum of ``values`` within each unit ``bounds[i]:bounds[i+1]`` (every unit is non-empty: a
    sentence holds at least its end)."""
    values = np.asarray(values, dtype=np.float64)
    return np.add.reduceat(values, bounds[:-1]) if len(bounds) > 1 else np.zeros(0)


@lru_cache(maxsize=8)
def resample_counts(n_units: int, *, resamples: int = RESAMPLES, seed: int = SEED) -> np.ndarray:
    """``(resamples, n_units)``: how often each unit is drawn in each resample (n_units draws each).
    Drawn once per text size and reused by every model scored on it (read only)."""
    rng = np.random.default_rng(seed)
    return rng.multinomial(n_units, np.full(n_units, 1.0 / n_units), size=resamples).astype(np.float64)


def ratio_interval(num: np.ndarray, den: np.ndarray, counts: np.ndarray,
                   level: float = LEVEL) -> tuple[float, float]:
    """The percentile interval of ``sum(num) / sum(den)`` over the resamples ``counts``."""
    ratios = (counts @ num) / (counts @ den)
    lo, hi = np.quantile(ratios, [(1 - level) / 2, 1 - (1 - level) / 2])
    return float(lo), float(hi)


def intervals(log2p: np.ndarray, starts: np.ndarray, *, n_bytes: Optional[int] = None,
              unit_bytes: Optional[np.ndarray] = None, counts: Optional[np.ndarray] = None) -> Optional[dict]:
    """95 % intervals of a model's perplexity, bits per token and bits per byte on one text.

    ``log2p``: the model's log2 probability of every predicted token; ``starts``: the text's sentence
    starts (``EncodedText.starts``).  ``unit_bytes``: the UTF-8 bytes of each sentence (as
    ``corpora.corpus.text_bytes`` counts them); without it, a unit's bytes are its share of tokens
    times ``n_bytes``.  None when a token has probability 0 (the perplexity is infinite in every
    resample that draws it)."""
    log2p = np.asarray(log2p, dtype=np.float64)
    if len(log2p) == 0 or not np.all(np.isfinite(log2p)):
        return None
    bounds = units(starts, len(log2p))
    bits = -unit_sums(log2p, bounds)
    toks = np.diff(bounds).astype(np.float64)
    if counts is None or counts.shape[1] != len(toks):
        counts = resample_counts(len(toks))
    lo, hi = ratio_interval(bits, toks, counts)
    by_sentence = len(starts) - 1 >= MIN_UNITS
    out = {"bits_per_token": [lo, hi], "ppl": [2.0 ** lo, 2.0 ** hi], "units": int(len(toks)),
           "unit": "sentence" if by_sentence else f"block of {BLOCK_TOKENS} tokens",
           "resamples": int(counts.shape[0]), "level": LEVEL}
    if unit_bytes is not None and len(unit_bytes) == len(toks) and by_sentence:
        by = np.asarray(unit_bytes, dtype=np.float64)
    elif n_bytes:
        by = toks * (float(n_bytes) / toks.sum())
    else:
        by = None
    if by is not None:
        out["bits_per_byte"] = list(ratio_interval(bits, by, counts))
    return out


def paired_share(log2p_a: np.ndarray, log2p_b: np.ndarray, starts: np.ndarray,
                 counts: Optional[np.ndarray] = None) -> Optional[float]:
    """The share of resamples in which model A has the lower perplexity than model B (paired: the
    same sentences for both)."""
    a, b = np.asarray(log2p_a, dtype=np.float64), np.asarray(log2p_b, dtype=np.float64)
    if len(a) != len(b) or not (np.all(np.isfinite(a)) and np.all(np.isfinite(b))):
        return None
    bounds = units(starts, len(a))
    diff = unit_sums(a - b, bounds)
    if counts is None or counts.shape[1] != len(diff):
        counts = resample_counts(len(diff))
    return float(np.mean(counts @ diff > 0))


def test_intervals(data, log2p) -> Optional[dict]:
    """:func:`intervals` of a model's per-token ``log2p`` on the test split of ``data`` (a
    ``reports.experiments.data.CompareData``: its sentence starts, bytes and bytes per sentence); None without scores."""
    if log2p is None:
        return None
    return intervals(log2p, data["test"].starts, n_bytes=data.sizes["test"].get("bytes"),
                     unit_bytes=(data.sentence_bytes or {}).get("test"))

