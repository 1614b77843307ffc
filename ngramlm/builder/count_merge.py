"""Count merging: one n-gram model from several texts, each text's statistics weighted.

Adapting a model to a domain with little text of its own (Bacchiani & Roark 2003's count merging, MAP
adaptation): a large general text and a small in-domain one are counted separately, and every n-gram's
estimate is a weighted sum of what each text says about it.  Scaling the raw counts and smoothing the sum
(repeating the in-domain text ``w`` times) does not work for Kneser-Ney: counts multiplied by 8 are all
in the "3 or more" bucket and keep nearly all their mass, so the model becomes a maximum-likelihood
model of the in-domain text (measured on PTB + The Time Machine: worse than either text alone).  Here
each text is *discounted by its own statistics* and only then weighted:

* ``mkn``/``kn``: text ``i`` has its own adjusted counts ``a_i`` (raw at the highest order and for n-grams
  starting with ``<s>``, distinct left words below) and its own discounts ``D_i`` per order (from its own
  count-of-counts); ``alpha(hw) = sum_i w_i (a_i(hw) - D_i(a_i(hw))) / sum_i w_i a_i(h.)`` and the back-off
  weight ``gamma(h)`` is the weighted discounted mass over the same denominator.
* ``wb``: ``alpha(hw) = sum_i w_i c_i(hw) / sum_i w_i (c_i(h) + T_i(h))``, ``gamma`` the weighted type counts.
* ``absolute``: each text's own ``D_i = n1/(n1 + 2 n2)``.

So every context's distribution sums to one; the weights act relatively (1,2 is 0.5,1); a text of weight 0
is not there (weights 1,0 give the first text's model); and with one text it is the ordinary model.  The
weights are tuned on in-domain dev text (`--tune-weights`), the first text keeping weight 1.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Callable, Optional, Sequence

import numpy as np

from corpora.errors import InputError

from ..counts import NgramCounts, OrderTable
from ..smoothing import (BackoffEstimate, Smoother, interpolate_orders, unigram_mask, adjusted_counts, count_of_counts,
                         discount_vector, mergeable_smoothers)


def parse_weights(spec: str, n_texts: int) -> list:
    """``"1,0.5"`` -> [1.0, 0.5]: one finite weight >= 0 per text, not all 0."""
    try:
        w = [float(x) for x in str(spec).split(",")]
    except ValueError:
        raise InputError(f"--weights takes comma-separated numbers, got {spec!r}",
                         fix="e.g. --weights 1,4 (the second text's counts weigh four times the first's)") from None
    return check_weights(w, n_texts)


def check_weights(weights: Sequence[float], n_texts: int) -> list:
    w = [float(x) for x in weights]
    if len(w) != n_texts:
        raise InputError(f"{len(w)} weights for {n_texts} texts", fix=f"give one weight per text ({n_texts})")
    bad = [x for x in w if not (math.isfinite(x) and x >= 0)]
    if bad or not any(w):
        raise InputError(f"weights must be finite numbers >= 0, not all 0, got {bad[0] if bad else w}",
                         fix="e.g. --weights 1,0.5 (the second text counts half as much as the first)")
    return w


@dataclass
class SourceCounts:
    """The counts of several texts on one structure: the union of their n-grams (``union``, with each
    order's suffix index computed once), and each text's counts aligned to its rows."""

    union: NgramCounts
    per_text: list = field(default_factory=list)  # per_text[i][k-1]: text i's counts of the union's order-k rows

    @property
    def n_texts(self) -> int:
        return len(self.per_text)

    def weighted(self, weights: Sequence[float]) -> NgramCounts:
        """The raw counts ``sum_i w_i c_i`` on the union's rows (whole numbers when every weight is whole):
        the structure the merged model is estimated on, and what count pruning and reports read.  The
        estimate itself weights each text's smoothed statistics (:class:`MergedSmoother`)."""
        w = check_weights(weights, self.n_texts)
        whole = all(float(x).is_integer() for x in w)
        tables = []
        for k, t in enumerate(self.union.tables, start=1):
            if whole:
                c = sum(int(wi) * src[k - 1] for wi, src in zip(w, self.per_text))
            else:
                c = sum(wi * src[k - 1].astype(np.float64) for wi, src in zip(w, self.per_text))
            tables.append(OrderTable(parent=t.parent, word=t.word, count=c, suffix=t.suffix))
        return NgramCounts(self.union.order, self.union.vocab_size, tables)


def align(sources: Sequence[NgramCounts]) -> SourceCounts:
    """Put the counts of several texts (same order, same vocabulary ids) on the union of their n-grams."""
    if not sources:
        raise ValueError("no counts to merge")
    order, V = sources[0].order, sources[0].vocab_size
    for s in sources[1:]:
        if s.order != order or s.vocab_size != V:
            raise ValueError("count merging needs counts of one order over one vocabulary")
    grams = [[s.ngrams(k) for s in sources] for k in range(1, order + 1)]
    # The union's rows: every text's n-grams (counts summed; only the structure is kept).
    union = NgramCounts.from_ngram_arrays([np.concatenate(g) for g in grams],
                                          [np.concatenate([s.tables[k - 1].count for s in sources])
                                           for k in range(1, order + 1)], vocab_size=V)
    for k in range(2, order + 1):  # computed once, shared by every weighted set of counts
        union.tables[k - 1].suffix = union.suffix_index(k)
    union_grams = [union.ngrams(k) for k in range(1, order + 1)]
    per_text = []
    for i, s in enumerate(sources):
        # The union's n-grams with count 0 plus text i's: the same set of rows as the union, in its order.
        gi = [np.concatenate([union_grams[k - 1], grams[k - 1][i]]) for k in range(1, order + 1)]
        ci = [np.concatenate([np.zeros(len(union_grams[k - 1]), dtype=np.int64), s.tables[k - 1].count])
              for k in range(1, order + 1)]
        aligned = NgramCounts.from_ngram_arrays(gi, ci, vocab_size=V)
        per_text.append([t.count for t in aligned.tables])
    return SourceCounts(union=union, per_text=per_text)


class MergedSmoother(Smoother):
    """Smooth several texts' counts (``sources``) into one model, each text discounted by its own
    statistics and weighted (see the module docstring).  ``base``: the smoother of one text (mkn, kn, wb,
    absolute), whose options (explicit or fallback discounts) apply to every text."""

    def __init__(self, base: Smoother, sources: SourceCounts, weights: Sequence[float]) -> None:
        if base.name not in mergeable_smoothers():
            raise InputError(f"count merging weights each text's smoothed statistics, which {base.name} does not "
                             "define here",
                             fix=f"train weighted texts with --smoothing {', '.join(mergeable_smoothers())}")
        self.base = base
        self.sources = sources
        self.weights = check_weights(weights, sources.n_texts)
        self.name = base.name

    def get_params(self) -> dict:
        return self.base.get_params()

    def estimate(self, counts: NgramCounts, n_types: int) -> BackoffEstimate:
        union = self.sources.union
        n = union.order
        # A text of weight 0 is not there (its statistics are not even computed).
        stats = [_text_stats(self.base, union, raw, n) if w else {} for w, raw in
                 zip(self.weights, self.sources.per_text)]
        alphas, gammas = [], []
        for k in range(1, n + 1):
            parent = np.zeros(len(union.tables[0]), dtype=np.int64) if k == 1 else union.tables[k - 1].parent
            n_ctx = 1 if k == 1 else len(union.tables[k - 2])
            kept = sum(w * st["kept"][k - 1] for w, st in zip(self.weights, stats) if w)
            denom = sum(w * st["denom"][k - 1] for w, st in zip(self.weights, stats) if w)
            safe = np.where(denom > 0, denom, 1.0)
            alphas.append(kept / safe[parent])
            # The back-off mass is what the weighted denominators hold beyond the kept counts.
            mass = np.maximum(denom - np.bincount(parent, weights=kept, minlength=n_ctx), 0.0)
            # A context none of the weighted texts has seen (its rows come from a text of weight 0) backs
            # off whole, as it would if it were not stored.
            gammas.append(np.where(denom > 0, mass / safe, 1.0))
        gammas[0] = float(gammas[0][0])
        lp, lb = interpolate_orders(union, alphas, gammas, n_types)
        info = {"count_merging": {"weights": self.weights}}
        if any("discounts" in st for st in stats):
            info["discounts_per_text"] = [st.get("discounts") for st in stats]  # None: weight 0
        return BackoffEstimate(lp, lb, info=info)


def _text_stats(base: Smoother, union: NgramCounts, raw: list, n: int) -> dict:
    """One text's smoothed statistics on the union's rows: per order, what each row keeps
    (``kept``, its discounted count) and each context's denominator (``denom``)."""
    V = union.vocab_size
    counts = raw
    raw = [r.astype(np.float64) for r in raw]
    raw[0] = raw[0].copy()
    raw[0][~unigram_mask(V)] = 0.0
    parents = [np.zeros(len(raw[0]), dtype=np.int64)] + [union.tables[k - 1].parent for k in range(2, n + 1)]
    n_ctx = [1] + [len(union.tables[k - 2]) for k in range(2, n + 1)]
    out = {"kept": [], "denom": []}
    if base.name in ("mkn", "kn"):
        text = NgramCounts(n, V, [OrderTable(parent=t.parent, word=t.word, count=c, suffix=t.suffix)
                                  for t, c in zip(union.tables, counts)])
        adj = adjusted_counts(text)  # continuation counts within this text only (rows of count 0 drop out)
        discounts = base.discounts_from_counts_of_counts([count_of_counts(a[a > 0], 4) for a in adj])
        out["discounts"] = [list(map(float, d)) for d in discounts]
        for k in range(1, n + 1):
            a = adj[k - 1]
            D = discount_vector(discounts[k - 1])
            out["kept"].append(np.where(a > 0, a - D[np.minimum(a, 3).astype(np.int64)], 0.0))
            out["denom"].append(np.bincount(parents[k - 1], weights=a, minlength=n_ctx[k - 1]))
    elif base.name == "wb":
        for k in range(1, n + 1):
            c = raw[k - 1]
            types = np.bincount(parents[k - 1], weights=(c > 0).astype(np.float64), minlength=n_ctx[k - 1])
            out["kept"].append(c)
            out["denom"].append(np.bincount(parents[k - 1], weights=c, minlength=n_ctx[k - 1]) + types)
    else:  # absolute discounting, each text's own D per order
        ds = []
        for k in range(1, n + 1):
            c = raw[k - 1]
            D = _absolute_discount(base, c, k)
            ds.append(D)
            out["kept"].append(np.maximum(c - D, 0.0))
            out["denom"].append(np.bincount(parents[k - 1], weights=c, minlength=n_ctx[k - 1]))
        out["discounts"] = ds
    return out


def _absolute_discount(base: Smoother, c: np.ndarray, k: int) -> float:
    if base.discount is not None:
        return float(base.discount)
    nc = count_of_counts(c[c > 0], 2)
    if nc[1] == 0 or nc[2] == 0:
        if base.discount_fallback is None:
            raise InputError(f"cannot estimate the absolute discount of one text's {k}-grams (count-of-counts "
                             f"n1={nc[1]}, n2={nc[2]})", fix="pass --discount-fallback, or a fixed --discount")
        return float(list(base.discount_fallback)[0])
    return nc[1] / (nc[1] + 2.0 * nc[2])


@dataclass
class WeightSearch:
    """The result of :func:`tune_weights`: the weights, the dev perplexity they give, and every try."""

    weights: list
    dev_ppl: float
    trials: list  # (weights, dev ppl) in the order tried
    at_edge: bool = False  # a weight ended at the end of the search range (the optimum may lie beyond)

    def to_dict(self) -> dict:
        return {"weights": self.weights, "dev_ppl": self.dev_ppl,
                "trials": [{"weights": w, "dev_ppl": p} for w, p in self.trials]}


def tune_weights(n_texts: int, dev_perplexity: Callable[[list], float], *,
                 log2_range: tuple = (-10.0, 10.0), tol: float = 0.02,
                 say: Optional[Callable[[str], None]] = None) -> WeightSearch:
    """The weights of texts 2..K (text 1 keeps weight 1) that minimise ``dev_perplexity(weights)``.

    Searched in log2 space within ``log2_range``: Brent's bounded method for two texts, Nelder-Mead from
    weight 1 each for more.  Every try re-smooths the merged counts (the counting is done once).
    """
    from scipy import optimize

    trials: list = []
    lo, hi = log2_range

    def objective(x) -> float:
        x = np.clip(np.atleast_1d(np.asarray(x, dtype=np.float64)), lo, hi)
        w = [1.0] + [float(2.0 ** v) for v in x]
        ppl = float(dev_perplexity(w))
        trials.append((w, ppl))
        if say is not None:
            say(f"weights {','.join(f'{v:.4g}' for v in w)}: dev ppl {ppl:.4f}")
        return math.log(ppl) if math.isfinite(ppl) and ppl > 0 else 1e300

    if n_texts < 2:
        raise InputError("tuning weights needs two or more texts", fix="give the general and the in-domain text")
    if n_texts == 2:
        optimize.minimize_scalar(objective, bounds=(lo, hi), method="bounded", options={"xatol": tol})
    else:
        optimize.minimize(objective, np.zeros(n_texts - 1), method="Nelder-Mead", options={"xatol": tol, "fatol": 1e-5})
    best_w, best_p = min(trials, key=lambda t: t[1])
    edge = any(min(abs(math.log2(w) - lo), abs(math.log2(w) - hi)) < 0.1 for w in best_w[1:])
    return WeightSearch(weights=best_w, dev_ppl=best_p, trials=trials, at_edge=edge)
