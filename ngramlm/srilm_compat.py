"""``compat="srilm"``: the back-off models of SRILM's ``ngram-count``, value for value.

The toolkit's default smoothers are the textbook estimates (interpolated, every n-gram kept).  SRILM
estimates the same family with one algorithm for every discounting method, and its conventions give
other numbers (docs/srilm.md has the table).  This module is that algorithm, learned from SRILM 1.7.3's
``Ngram::estimate`` and ``Discount.cc`` and written here over the toolkit's count tables, vectorised
order by order:

* **Count cut-offs** (``gtmin``, SRILM's ``-gtNmin``; default 1 for unigrams and bigrams, 2 above, for
  every method): an n-gram seen fewer times is not stored, but its count stays in its context's total,
  so its mass goes to the back-off weight.
* **The discount** of each stored count ``c`` in context ``h`` (total ``T``, ``N`` distinct words,
  ``N2``/``N3`` of them seen at least twice/three times): ``p(w|h) = d(c) c / T``, plus, with
  ``interpolate`` (``-interpolate``), ``lower_weight(h) * p_BO(w|h')`` -- the lower order as the model
  so far scores it.  Good-Turing (``katz``), Witten-Bell, constant (``absolute``), original and modified
  Kneser-Ney (``kn``, ``mkn``, on continuation counts below the top order), add-k.
* **No mass left** in a context (stored probabilities summing to more than ``1 - 3e-6``) while it has
  not seen every word: interpolation is switched off for that context, and failing that its total is
  raised by one until some mass is left (Doug Paul's rule, which SRILM keeps).
* **Back-off weights** from what is stored: ``b(h) = (1 - sum p(w|h)) / (1 - sum p_BO(w|h'))``; the
  unigrams' left-over mass is shared by the words with no probability, or by all words when none.
* **Stored values are float32** (SRILM's ``LogP``), and so are the lower-order values interpolation reads.
* **Fix-ups**: every context of a stored n-gram, and its prefixes, is itself stored (with its backed-off
  probability), as SRILM writes them.

Where a discount cannot be estimated SRILM's Good-Turing warns and leaves that count undiscounted; its
Kneser-Ney refuses.  Here both warn and go on (Kneser-Ney with the fixed fall-back discounts), naming the
order and what was done: ``info["warnings"]``.
"""
from __future__ import annotations

from typing import Optional, Sequence

import numpy as np

from corpora.errors import InputError
from corpora.vocab import BOS_ID

from .counts import NgramCounts
from .smoothing import BackoffEstimate, Smoother, adjusted_counts, count_of_counts, good_turing_ratios, unigram_mask

PROB_EPSILON = 3e-6  # SRILM's Prob_Epsilon: mass below this counts as none
DEFAULT_GTMIN = (1, 1, 2)  # -gtNmin: orders 1, 2, then 2 for every higher order
DEFAULT_GTMAX = (1, 7)  # -gtNmax (Good-Turing only): unigrams 1, then 7
FALLBACK_DISCOUNTS = (0.5, 1.0, 1.5)  # Kneser-Ney's when its count-of-counts are degenerate (lmplz's)
# Our smoother names and SRILM's ngram-count options for the same method.
SRILM_OPTION = {"katz": "-gtNmin/-gtNmax (Good-Turing, the default)", "wb": "-wbdiscount",
                "absolute": "-cdiscount D", "kn": "-ukndiscount", "mkn": "-kndiscount", "addk": "-addsmooth K",
                "laplace": "-addsmooth 1"}


def per_order(values: Optional[Sequence], order: int, default: Sequence, name: str) -> list:
    """``values`` (one per order, the last repeated; None: ``default``) as one value for each order."""
    vals = list(default if values is None else values)
    if not vals or any(float(v) < 0 for v in vals):
        raise InputError(f"{name} takes counts >= 0, one per order, got {vals}", fix=f"e.g. --{name} 1,1,2")
    return [vals[min(k, len(vals) - 1)] for k in range(order)]


def f32(x):
    """SRILM stores every log probability and back-off weight as a float (``LogP``)."""
    return np.asarray(x, dtype=np.float32).astype(np.float64)


# ----------------------------------------------------------------------------- the discounts
class _Discount:
    """One order's discount: ``coeff(c, T, N)`` per stored count, ``lower_weight`` per context."""

    def __init__(self, min_count: float, interpolate: bool) -> None:
        self.min_count = float(min_count)
        self.interpolate = interpolate

    def nodiscount(self) -> bool:
        return False

    def coeff(self, c, T, N):  # pragma: no cover
        raise NotImplementedError

    def discount(self, c, T, N):
        """The coefficient ``d``; 0 for a count below the cut-off (the n-gram is not stored)."""
        if self.nodiscount():
            return np.ones_like(c)
        with np.errstate(divide="ignore", invalid="ignore"):  # rows of count 0 are not stored anyway
            return np.where(c < self.min_count, 0.0, self.coeff(c, T, N))

    def lower_weight(self, T, N1, N2, N3):
        return np.zeros_like(T)


class GoodTuring(_Discount):
    """Katz's Good-Turing coefficients for counts 1..gtmax (SRILM's GoodTuring)."""

    def __init__(self, min_count, interpolate, max_count: int) -> None:
        super().__init__(min_count, interpolate)
        self.max_count = int(max_count)
        self.coeffs = np.ones(self.max_count + 2)

    def estimate(self, c: np.ndarray, k: int, warnings: list) -> None:
        d, self.max_count, notes = good_turing_ratios(count_of_counts(c[c > 0], self.max_count + 1), self.max_count,
                                                      k, epsilon=PROB_EPSILON, upper=np.inf)
        self.coeffs[: len(d)] = d
        warnings.extend(notes)

    def nodiscount(self) -> bool:
        return self.min_count <= 1 and self.max_count <= 0

    def coeff(self, c, T, N):
        ci = np.minimum(c, self.max_count + 1).astype(np.int64)
        return np.where(c > self.max_count, 1.0, self.coeffs[np.minimum(ci, len(self.coeffs) - 1)])


class WittenBell(_Discount):
    def coeff(self, c, T, N):
        return T / (T + N)

    def lower_weight(self, T, N1, N2, N3):
        return N1 / (T + N1)


class ConstDiscount(_Discount):
    """Absolute discounting: a constant D in [0, 1] off every count (SRILM's -cdiscount)."""

    def __init__(self, min_count, interpolate, D: float) -> None:
        super().__init__(min_count, interpolate)
        self.D = min(max(float(D), 0.0), 1.0)

    def nodiscount(self) -> bool:
        return self.min_count <= 1 and self.D == 0.0

    def coeff(self, c, T, N):
        return (c - self.D) / c

    def lower_weight(self, T, N1, N2, N3):
        return self.D * N1 / T


class KneserNey(_Discount):
    """Original (one discount) and modified (three) Kneser-Ney on continuation counts."""

    def __init__(self, min_count, interpolate, n_discounts: int, fallback: Optional[Sequence[float]]) -> None:
        super().__init__(min_count, interpolate)
        self.n_discounts = n_discounts
        self.fallback = fallback
        self.D = np.zeros(4)

    def estimate(self, c: np.ndarray, k: int, warnings: list) -> None:
        nc = count_of_counts(c[c > 0], 4)
        name = "modified Kneser-Ney" if self.n_discounts == 3 else "Kneser-Ney"
        need = nc[1:5] if self.n_discounts == 3 else nc[1:3]
        ds = None
        if np.all(need > 0):
            if self.n_discounts == 3:
                y = nc[1] / (nc[1] + 2.0 * nc[2])
                ds = [1 - 2 * y * nc[2] / nc[1], 2 - 3 * y * nc[3] / nc[2], 3 - 4 * y * nc[4] / nc[3]]
                if min(ds) < 0:
                    why = f"discounts {np.round(ds, 4).tolist()} include a negative one"
                    ds = None
            else:
                ds = [nc[1] / (nc[1] + 2.0 * nc[2])]
        else:
            why = f"count-of-counts n1..n4 = {nc[1:5].tolist()} include a zero"
        if ds is None:
            fb = [float(x) for x in (self.fallback if self.fallback is not None else FALLBACK_DISCOUNTS)]
            ds = (fb + fb[-1:] * 3)[: self.n_discounts]
            warnings.append(f"{name} {k}-grams: {why}; used the fixed discounts {ds} at this order")
        self.D = np.array([0.0] + list(ds) + [ds[-1]] * (3 - len(ds)))
        self.discounts = [float(d) for d in ds]

    def coeff(self, c, T, N):
        return (c - self.D[np.minimum(c, 3).astype(np.int64)]) / c

    def lower_weight(self, T, N1, N2, N3):
        D = self.D
        if self.n_discounts == 1:
            return D[1] * N1 / T
        return (D[1] * (N1 - N2) + D[2] * (N2 - N3) + D[3] * N3) / T


class AddSmooth(_Discount):
    """Add-delta within SRILM's back-off form: p = (c + delta) / (T + V delta) for seen words."""

    def __init__(self, min_count, interpolate, delta: float, n_types: int) -> None:
        super().__init__(min_count, interpolate)
        self.delta = max(float(delta), 0.0)
        self.n_types = n_types

    def nodiscount(self) -> bool:
        return self.min_count <= 1 and self.delta == 0.0

    def coeff(self, c, T, N):
        return (1.0 + self.delta / c) / (1.0 + self.n_types * self.delta / T)


# ----------------------------------------------------------------------------- the estimator
class SrilmEstimator(Smoother):
    """A smoother estimated as SRILM's ``ngram-count`` does (see the module docstring).

    ``method``: katz, wb, absolute, kn, mkn, addk or laplace; ``interpolate``: ``-interpolate``;
    ``gtmin``/``gtmax``: per order (the last value repeated), SRILM's defaults when None."""

    METHODS = ("katz", "wb", "absolute", "kn", "mkn", "addk", "laplace")

    def __init__(self, method: str, *, interpolate: bool = False, gtmin: Optional[Sequence] = None,
                 gtmax: Optional[Sequence] = None, discount: Optional[float] = None, k: Optional[float] = None,
                 discount_fallback: Optional[Sequence[float]] = None) -> None:
        if method not in self.METHODS:
            raise InputError(f"compat='srilm' estimates {', '.join(self.METHODS)}; {method} is not one of SRILM's "
                             "ngram-count discounting methods",
                             fix="choose one of those smoothers, or drop the compat option")
        if method == "absolute" and discount is None:
            raise InputError("SRILM's absolute discounting (-cdiscount D) takes its constant",
                             fix="pass --discount D (e.g. 0.7)")
        if method in ("katz", "wb") and discount_fallback not in (None, False):
            raise InputError(f"--discount-fallback does not apply to {method} with --compat srilm: SRILM's rule for "
                             "an out-of-range coefficient is used", fix="drop --discount-fallback")
        self.name = method
        self.interpolate = bool(interpolate)
        self.gtmin = None if gtmin is None else list(gtmin)
        self.gtmax = None if gtmax is None else list(gtmax)
        self.discount = discount
        self.k = k
        self.discount_fallback = discount_fallback

    def get_params(self) -> dict:
        return {k: v for k, v in super().get_params().items() if k != "name"}

    def _discounts(self, n: int, n_types: int) -> list:
        mins = per_order(self.gtmin, n, DEFAULT_GTMIN, "gtmin")
        maxs = per_order(self.gtmax, n, DEFAULT_GTMAX, "gtmax")
        m, it = self.name, self.interpolate
        out = []
        for j in range(n):
            if m == "katz":
                out.append(GoodTuring(mins[j], it, maxs[j]))
            elif m == "wb":
                out.append(WittenBell(mins[j], it))
            elif m == "absolute":
                out.append(ConstDiscount(mins[j], it, self.discount))
            elif m in ("kn", "mkn"):
                fb = None if self.discount_fallback in (None, False, True) else self.discount_fallback
                out.append(KneserNey(mins[j], it, 3 if m == "mkn" else 1, fb))
            else:
                out.append(AddSmooth(mins[j], it, 1.0 if m == "laplace" else (1.0 if self.k is None else self.k),
                                     n_types))
        return out

    def estimate(self, counts: NgramCounts, n_types: int) -> BackoffEstimate:
        n, V = counts.order, counts.vocab_size
        discounts = self._discounts(n, n_types)
        warnings: list = []
        if self.name in ("kn", "mkn"):
            rows = adjusted_counts(counts)  # continuation counts below the top order, as SRILM's prepareCounts
        else:
            rows = [t.count.astype(np.float64) for t in counts.tables]
            rows[0] = np.where(unigram_mask(V), rows[0], 0.0)
        for k, d in enumerate(discounts, start=1):
            if isinstance(d, (GoodTuring, KneserNey)):
                d.estimate(rows[k - 1], k, warnings)
        event = unigram_mask(V)
        lp, stored, bow, lowbo = [None] * n, [None] * n, [None] * n, [None] * n
        for k in range(1, n + 1):
            c = rows[k - 1]
            if k == 1:
                parent, n_ctx = np.zeros(V, dtype=np.int64), 1
                valid = event & (c > 0)
                low = np.full(V, f32(-np.log10(float(n_types))))
            else:
                parent, n_ctx = counts.tables[k - 1].parent.astype(np.int64), len(counts.tables[k - 2])
                valid = c > 0
                low = lowbo[k - 2][counts.suffix_index(k)]
            prob, keep = _order_probs(c, parent, n_ctx, valid, low, discounts[k - 1], n_types)
            with np.errstate(divide="ignore"):
                lpk = np.where(keep, f32(np.log10(np.where(keep, prob, 1.0))), -np.inf)
            if k == 1:
                lpk = _distribute(lpk, keep, event, n_types)
                lpk[BOS_ID] = -np.inf
                keep = np.ones(V, dtype=bool)
            else:
                lpk, bow[k - 2] = _backoff_weights(lpk, keep, parent, n_ctx, low, warnings, k)
            lp[k - 1], stored[k - 1] = lpk, keep
            if k == 1:
                lowbo[0] = lpk
            else:
                lowbo[k - 1] = np.where(keep, lpk, f32(bow[k - 2][parent] + lowbo[k - 2][counts.suffix_index(k)]))
            rows[k - 1] = None
        keep = _fixups(counts, stored)
        log10_prob = [np.where(stored[k], lp[k], lowbo[k]) for k in range(n)]
        log10_backoff = [bow[k] for k in range(n - 1)] + [np.zeros(0)]
        info = {"compat": "srilm", "interpolate": self.interpolate,
                "gtmin": per_order(self.gtmin, n, DEFAULT_GTMIN, "gtmin")}
        if self.name == "katz":
            info["good_turing_coefficients"] = [d.coeffs[1:d.max_count + 1].tolist() for d in discounts]
        if self.name in ("kn", "mkn"):
            info["discounts"] = [d.discounts for d in discounts]
        if warnings:
            info["warnings"] = warnings
        return BackoffEstimate(log10_prob, log10_backoff, info=info, keep=keep)


def _order_probs(c, parent, n_ctx, valid, low, disc: _Discount, n_types: int) -> tuple:
    """One order's probabilities ``d c / T`` (+ the interpolated lower order), and which rows are stored,
    with the no-mass-left rule applied context by context."""
    cv = np.where(valid, c, 0.0)
    T = np.bincount(parent, weights=cv, minlength=n_ctx)
    N1 = np.bincount(parent, weights=valid.astype(np.float64), minlength=n_ctx)
    N2 = np.bincount(parent, weights=(valid & (c >= 2)).astype(np.float64), minlength=n_ctx)
    N3 = np.bincount(parent, weights=(valid & (c >= 3)).astype(np.float64), minlength=n_ctx)
    low_p = 10.0 ** low
    interp = np.full(n_ctx, disc.interpolate)
    Tc = T.copy()

    def probs(rows):
        p_ = parent[rows]
        Tr = np.where(Tc[p_] > 0, Tc[p_], 1.0)
        d = disc.discount(c[rows], Tr, N1[p_])
        pr = d * c[rows] / Tr
        if disc.interpolate:
            with np.errstate(divide="ignore", invalid="ignore"):
                lw = disc.lower_weight(Tr, N1[p_], N2[p_], N3[p_])
            pr = pr + np.where(interp[p_], lw * low_p[rows], 0.0)
        return pr, valid[rows] & (d != 0)

    rows = np.arange(len(c))
    prob, keep = probs(rows)
    if disc.nodiscount():
        return prob, keep
    total = np.bincount(parent, weights=np.where(keep, prob, 0.0), minlength=n_ctx)
    todo = (T > 0) & (N1 < n_types) & (total > 1.0 - PROB_EPSILON)
    while todo.any():
        # Interpolation first gives way, then the total grows by one, until some mass is left.
        switch = todo & interp
        Tc[todo & ~interp] += 1
        interp[switch] = False
        sel = np.flatnonzero(todo[parent])
        prob[sel], keep[sel] = probs(sel)
        total = np.bincount(parent[sel], weights=np.where(keep[sel], prob[sel], 0.0), minlength=n_ctx)
        todo = todo & (total > 1.0 - PROB_EPSILON)
    return prob, keep


def _distribute(lp1, keep, event, n_types: int):
    """The unigrams' left-over mass: to the words with no probability, or to every word when none."""
    p = np.where(keep, 10.0 ** lp1, 0.0)
    mass = 1.0 - p.sum()
    if mass < PROB_EPSILON:  # none left (SRILM zeroes a mass below 3e-6, and a negative one)
        mass = 0.0
    zero = event & ~(keep & (lp1 > -np.inf))
    out = lp1.copy()
    with np.errstate(divide="ignore"):
        if zero.any():
            out[zero] = f32(np.log10(mass / zero.sum()))
        else:
            out[event] = f32(np.log10(10.0 ** lp1[event] + mass / n_types))
    return out


def _backoff_weights(lpk, keep, parent, n_ctx, low, warnings: list, k: int) -> tuple:
    """Each context's back-off weight from its stored probabilities (SRILM's computeBOW), and the
    probabilities of the contexts whose lower order has no mass left, scaled to sum to one."""
    num = 1.0 - np.bincount(parent, weights=np.where(keep, 10.0 ** lpk, 0.0), minlength=n_ctx)
    den = 1.0 - np.bincount(parent, weights=np.where(keep, 10.0 ** low, 0.0), minlength=n_ctx)
    has = np.bincount(parent, weights=keep.astype(np.float64), minlength=n_ctx) > 0
    num = np.where(np.abs(num) < PROB_EPSILON, 0.0, num)
    den = np.where(np.abs(den) < PROB_EPSILON, 0.0, den)
    scale = has & (den < PROB_EPSILON) & (num > PROB_EPSILON)
    if scale.any():
        with np.errstate(divide="ignore"):
            shift = -np.log10(1.0 - num)
        lpk = np.where(keep & scale[parent], f32(lpk + shift[parent]), lpk)
        num = np.where(scale, 0.0, num)
        den = np.where(scale, 0.0, den)
    bad = has & ((num < 0) | ((den <= 0) & (num > PROB_EPSILON)))
    if bad.any():
        warnings.append(f"{k}-grams: {int(bad.sum())} contexts have no back-off mass that can be normalised; their "
                        "back-off weight is 0 (log10 -inf), as SRILM writes it")
    with np.errstate(divide="ignore", invalid="ignore"):
        b = f32(np.log10(num) - np.log10(den))
    b = np.where((num < PROB_EPSILON) & (den < PROB_EPSILON), 0.0, b)
    b = np.where(bad, -np.inf, b)
    return lpk, np.where(has, b, 0.0)


def _fixups(counts: NgramCounts, stored: list) -> list:
    """The rows the model keeps: the stored ones, plus every context of a stored n-gram (and those
    contexts' suffixes, which the context trie holds as its path), each with its prefixes."""
    n = counts.order
    node = [None] * n
    for j in range(n - 1, 0, -1):  # order-j rows that are a context in the trie
        m = np.zeros(len(counts.tables[j - 1]), dtype=bool)
        m[counts.tables[j].parent[stored[j]]] = True
        if j + 1 <= n - 1:
            m[counts.suffix_index(j + 1)[node[j]]] = True
        node[j - 1] = m
    keep = [s.copy() for s in stored]
    carry = None
    for j in range(n - 1, 1, -1):
        want = node[j - 1].copy()
        if carry is not None:
            want |= carry
        add = want & ~stored[j - 1]
        keep[j - 1] |= add
        carry = np.zeros(len(counts.tables[j - 2]), dtype=bool)
        carry[counts.tables[j - 1].parent[add]] = True
    return keep
