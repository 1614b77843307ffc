"""Entropy pruning to a size: the Stolcke threshold that keeps at most N n-grams, or M bytes of file.

Pruning itself is :mod:`ngramlm.tools.pruning`'s: an n-gram of order >= 2 goes when the relative increase
in perplexity its removal causes, ``exp(D) - 1``, is below the threshold; an n-gram whose back-off node
a kept one needs stays (the context of a kept n-gram and, as SRILM keeps them, that context's suffixes);
back-off weights are renormalised.  Here:

* :func:`prune_scores` computes every n-gram's ``exp(D) - 1`` once (the expensive part), with the
  n-grams a ``--protect`` list keeps whatever their score;
* :func:`keep_masks` gives, for one threshold, what stays (the contexts of kept n-grams included),
  in one pass over the scores -- so a threshold costs milliseconds, not a pruning;
* :func:`search_threshold` bisects on log10 of the threshold for the smallest one whose model
  fits.  What stays shrinks as the threshold grows (a set kept at a threshold holds every set kept
  at a larger one), so "fits" flips once and bisection finds it; the model is as large as the
  limit allows, short of it only by the n-grams that tie at the threshold found.
* :class:`ByteModel` estimates the written file's bytes from what stays (per n-gram: the native
  format's 8-byte key, probability and back-off; an ARPA line's words and numbers), so the byte
  limit is searched the same way, then checked by writing.

Unigrams are never pruned (the vocabulary would lose words) and are not counted in a size.
"""
from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from typing import Callable, Optional, Sequence

import numpy as np

from corpora.errors import InputError

from .pruning import apply_keep, close_keep, context_parents, history_suffixes, ngram_words, pruning_ratios

LOG10_STEP_TOLERANCE = 1e-9  # bisection stops when the log10 threshold is bracketed this tightly
MAX_BISECTION_STEPS = 200
NATIVE_BYTES_PER_VALUE = 8  # int64 key, float64 log10 p, float64 log10 back-off


@dataclass
class PruneScores:
    """Per order k (index k-1; None for unigrams): the relative perplexity increase of removing each
    n-gram, whether it is protected, the row of its context in order k-1, and (k >= 3) the next back-off
    node under its history (:func:`~ngramlm.tools.pruning.history_suffixes`)."""

    order: int
    ratios: list
    protected: list
    parents: list
    suffixes: list = field(default_factory=list)
    protected_words: list = field(default_factory=list)  # the protected words the vocabulary has
    unknown_words: list = field(default_factory=list)  # the protected words it lacks

    @property
    def ngrams(self) -> list:
        """n-grams of each order >= 2 before pruning."""
        return [len(r) for r in self.ratios[1:]]


def prune_scores(model, *, protect_words: Sequence[str] = (), compat: Optional[str] = None) -> PruneScores:
    """Stolcke scores of every n-gram of ``model`` (a back-off Scorer), and the protected n-grams:
    those containing any of ``protect_words``.  ``compat="srilm"``: the scores in SRILM's float
    arithmetic (:func:`~ngramlm.tools.pruning.pruning_ratios`)."""
    if model.kind_ != "backoff" or not model.is_distribution_:
        raise InputError(f"entropy pruning needs a back-off distribution; {model.smoother_name_} is not one",
                         fix="prune a model smoothed with mkn, kn, wb, katz, absolute or jm")
    n = model.order_
    V = len(model.vocab_)
    ratios = pruning_ratios(model, compat=compat)
    stoi = model.vocab_.stoi_
    words = list(dict.fromkeys(w for w in protect_words if w))
    known = [w for w in words if w in stoi]
    protected_ids = np.zeros(V, dtype=bool)
    protected_ids[[stoi[w] for w in known]] = True
    protected = [None]
    for k in range(2, n + 1):
        if known:
            protected.append(protected_ids[ngram_words(model, k)].any(axis=1))
        else:
            protected.append(np.zeros(len(ratios[k - 1]), dtype=bool))
    return PruneScores(n, ratios, protected, context_parents(model), history_suffixes(model), known,
                       [w for w in words if w not in stoi])


def keep_masks(scores: PruneScores, threshold: float) -> list:
    """What stays at ``threshold`` (per order, None for unigrams): n-grams scoring at least the threshold,
    the protected ones, and those whose back-off node any of them needs -- what SRILM's ``-prune`` keeps.
    A threshold <= 0 keeps everything."""
    if threshold <= 0:
        return [None] + [np.ones(len(r), dtype=bool) for r in scores.ratios[1:]]
    keep = [None] + [(scores.ratios[k - 1] >= threshold) | scores.protected[k - 1]
                     for k in range(2, scores.order + 1)]
    return close_keep(keep, scores.parents, scores.suffixes)


def kept_counts(scores: PruneScores, threshold: float) -> list:
    """n-grams of each order >= 2 that stay at ``threshold``."""
    return [int(np.count_nonzero(m)) for m in keep_masks(scores, threshold)[1:]]


@dataclass
class Search:
    threshold: float  # 0.0: nothing needed pruning
    keep: list
    steps: int


def search_threshold(scores: PruneScores, fits: Callable[[list], bool], *, what: str,
                     progress: Optional[Callable[[str], None]] = None) -> Search:
    """The smallest threshold whose kept masks ``fits`` (a test that, once true, stays true for every
    larger threshold), by bisection on log10 of the threshold.  ``what`` names the limit in errors;
    ``progress`` gets a line a step (a search of a big model takes minutes)."""
    everything = keep_masks(scores, 0.0)
    if fits(everything):
        return Search(0.0, everything, 0)
    finite = np.concatenate([r[np.isfinite(r) & (r > 0)] for r in scores.ratios[1:]] + [np.zeros(0)])
    if not len(finite):
        lo = hi = 0.0
    else:
        lo, hi = math.log10(float(finite.min())) - 1.0, math.log10(float(finite.max())) + 1.0
    top = keep_masks(scores, 10.0 ** hi)
    if not fits(top):
        kept = sum(int(np.count_nonzero(m)) for m in top[1:])
        prot = sum(int(np.count_nonzero(p)) for p in scores.protected[1:])
        raise InputError(f"{what} cannot be reached: pruning everything it may still keeps {kept} n-grams of orders "
                         f">= 2 ({prot} protected, the rest their contexts or n-grams whose removal cannot be "
                         "scored)", fix="allow a larger size, or protect fewer words")
    low = keep_masks(scores, 10.0 ** lo)
    if fits(low):  # every n-gram that scores > 0 stays: only those that cost nothing go
        return Search(10.0 ** lo, low, 0)
    steps = 0
    best = top
    while hi - lo > LOG10_STEP_TOLERANCE and steps < MAX_BISECTION_STEPS:
        mid = 0.5 * (lo + hi)
        masks = keep_masks(scores, 10.0 ** mid)
        ok = fits(masks)
        if ok:
            hi, best = mid, masks
        else:
            lo = mid
        steps += 1
        if progress is not None:
            kept = sum(int(np.count_nonzero(m)) for m in masks[1:])
            progress(f"step {steps}: threshold {10.0 ** mid:.3g} keeps {kept:,} n-grams of orders >= 2 "
                     f"({'within' if ok else 'over'} {what})")
    return Search(10.0 ** hi, best, steps)


def prune_with(model, keep: list, *, compat: Optional[str] = None):
    """The tables of ``model`` with only ``keep`` (from :func:`keep_masks`), back-offs renormalised (as SRILM
    does, float for float, with ``compat="srilm"``)."""
    return apply_keep(model, keep, compat=compat)


# ----------------------------------------------------------------------------- sizes in bytes
def parse_bytes(spec: str) -> int:
    """``500000``, ``64K``, ``50M``, ``1.5G`` (powers of 1024, as ``--memory``) -> bytes."""
    m = re.fullmatch(r"\s*([0-9]*\.?[0-9]+)\s*([bBkKmMgG]?)\s*", str(spec))
    if not m:
        raise InputError(f"cannot read the size {spec!r}", fix="give bytes, or a number with a unit: 64K, 50M, 1.5G")
    value = float(m.group(1)) * {"": 1, "B": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30}[m.group(2).upper()]
    if value < 1:
        raise InputError(f"the size must be at least one byte, got {spec!r}", fix="e.g. --max-bytes 50M")
    return int(value)


class ByteModel:
    """Bytes of the written file as ``fixed + sum over kept n-grams of their cost``.

    ``fixed`` is measured: the size of the model pruned to its unigrams, written in the output's format.
    The cost of an n-gram is exact for the native format (its key, log10 p and, below the top order,
    back-off: 8 bytes each); for ARPA it is its line: the words' UTF-8 bytes and separators, its log10 p
    as written ('%.7g'), and its back-off: '0' where no kept n-gram extends it (its weight is then 1),
    else as wide as it is now (renormalising changes a back-off's digits, rarely their number).
    """

    def __init__(self, model, *, arpa: bool, fixed_bytes: int) -> None:
        n = model.order_
        V = len(model.vocab_)
        self.arpa = arpa
        self.fixed = int(fixed_bytes)
        self.costs = [None]  # per order >= 2: bytes of each n-gram's line (ARPA: without its back-off)
        self.extra_bo = [None] * n  # ARPA, orders < n: extra characters of a back-off other than '0'
        self.parents = [None] + [np.asarray(model.keys_[k - 1], dtype=np.int64) // V for k in range(2, n + 1)]
        if not arpa:
            for k in range(2, n + 1):
                per = NATIVE_BYTES_PER_VALUE * (3 if k < n else 2)
                self.costs.append(np.full(len(model.keys_[k - 1]), float(per)))
            return
        word_bytes = np.array([len(w.encode("utf-8")) for w in model.vocab_.itos_], dtype=np.float64)
        for k in range(1, n):
            self.extra_bo[k - 1] = _formatted_widths(np.asarray(model.log10_backoff_[k - 1], dtype=np.float64)) - 1
        for k in range(2, n + 1):
            grams = ngram_words(model, k)
            cost = word_bytes[grams].sum(axis=1) + (k - 1) + 2  # spaces, the tab after log10 p, the newline
            cost += _formatted_widths(np.asarray(model.log10_prob_[k - 1], dtype=np.float64))
            if k < n:
                cost += 2  # the tab and a back-off of '0'
            self.costs.append(cost)
            del grams

    def estimate(self, keep: list) -> int:
        total = self.fixed + sum(float(c[m].sum()) for c, m in zip(self.costs[1:], keep[1:]))
        if self.arpa:
            for k in range(1, len(keep)):  # contexts that keep an extension keep a back-off other than '0'
                extended = np.zeros(len(self.extra_bo[k - 1]), dtype=bool)
                extended[self.parents[k][keep[k]]] = True
                if k > 1:
                    extended &= keep[k - 1]
                total += float(self.extra_bo[k - 1][extended].sum())
        return int(round(total))


def _formatted_widths(x: np.ndarray) -> np.ndarray:
    """Characters of each value as the ARPA writer prints it ('%.7g', '-99' for -inf)."""
    u, inv = np.unique(x, return_inverse=True)
    # C-level map over the distinct values (as the writer formats them), no Python loop per value.
    widths = np.fromiter(map(len, map("%.7g".__mod__, u.tolist())), dtype=np.float64, count=len(u))
    widths[~np.isfinite(u)] = 3.0
    return widths[inv.ravel()]
