"""Count merging: one n-gram model from several texts, each text's counts scaled by a weight.

Adapting a model to a domain with little text of its own (Bacchiani & Roark 2003's count merging;
pocolm's data-source weights): the counts of a large general text and of a small in-domain text are
added with weights, ``c(g) = sum_k w_k c_k(g)``, and the merged counts are smoothed as usual.  Weight 1
for every text is plain concatenation; a whole weight ``w`` is the text repeated ``w`` times (tested: the
very same model); weights between are allowed, and the tuning searches them on in-domain dev text.

How each smoothing reads a weighted (fractional) count:

* ``mkn``/``kn``: the highest order and the n-grams starting with ``<s>`` take the weighted counts; the
  other lower orders keep their continuation counts (distinct left words), which weights do not change,
  as repeating a text would not.  A weighted count is bucketed as the whole count above it (0.3 as 1,
  1.5 as 2) for the count-of-counts and takes that bucket's discount, never more than the count itself.
* ``wb``, ``absolute``, ``add-k``, ``jm``, ``stupid``, ``mle``: their formulas take any positive count.
* ``katz`` (Good-Turing) needs whole counts and refuses weighted ones.

The relative weights are what matters for the highest order; the scale matters for the discounts, so the
first text's weight is fixed at 1 when weights are tuned (its counts are real counts).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Callable, Optional, Sequence

import numpy as np

from corpora.errors import InputError

from .counts import NgramCounts, OrderTable


def parse_weights(spec: str, n_texts: int) -> list:
    """``"1,0.5"`` -> [1.0, 0.5]: one positive finite weight per text."""
    try:
        w = [float(x) for x in str(spec).split(",")]
    except ValueError:
        raise InputError(f"--weights takes comma-separated numbers, got {spec!r}",
                         fix="e.g. --weights 1,4 (the first text once, the second four times)") from None
    return check_weights(w, n_texts)


def check_weights(weights: Sequence[float], n_texts: int) -> list:
    w = [float(x) for x in weights]
    if len(w) != n_texts:
        raise InputError(f"{len(w)} weights for {n_texts} texts", fix=f"give one weight per text ({n_texts})")
    bad = [x for x in w if not (math.isfinite(x) and x > 0)]
    if bad:
        raise InputError(f"weights must be positive finite numbers, got {bad[0]}",
                         fix="drop a text instead of giving it weight 0; e.g. --weights 1,0.5")
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
        """The merged counts ``sum_i w_i c_i``: whole numbers (int64) when every weight is whole, so that
        weights 1,1 give the counts of the concatenated texts bit for bit; float64 otherwise."""
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


@dataclass
class WeightSearch:
    """The result of :func:`tune_weights`: the weights, the dev perplexity they give, and every try."""

    weights: list
    dev_ppl: float
    trials: list  # (weights, dev ppl) in the order tried

    def to_dict(self) -> dict:
        return {"weights": self.weights, "dev_ppl": self.dev_ppl,
                "trials": [{"weights": w, "dev_ppl": p} for w, p in self.trials]}


def tune_weights(sources: SourceCounts, dev_perplexity: Callable[[NgramCounts], float], *,
                 log2_range: tuple = (-8.0, 10.0), tol: float = 0.02,
                 say: Optional[Callable[[str], None]] = None) -> WeightSearch:
    """The weights of texts 2..K (text 1 keeps weight 1) that minimise ``dev_perplexity(merged counts)``.

    Searched in log2 space within ``log2_range``: Brent's bounded method for two texts, Nelder-Mead from
    weight 1 each for more.  Every try re-smooths the merged counts (the counting is done once).
    """
    from scipy import optimize

    trials: list = []
    lo, hi = log2_range

    def objective(x) -> float:
        x = np.clip(np.atleast_1d(np.asarray(x, dtype=np.float64)), lo, hi)
        w = [1.0] + [float(2.0 ** v) for v in x]
        ppl = float(dev_perplexity(sources.weighted(w)))
        trials.append((w, ppl))
        if say is not None:
            say(f"weights {','.join(f'{v:.4g}' for v in w)}: dev ppl {ppl:.4f}")
        return math.log(ppl) if math.isfinite(ppl) and ppl > 0 else 1e300

    if sources.n_texts < 2:
        raise InputError("tuning weights needs two or more texts", fix="give the general and the in-domain text")
    if sources.n_texts == 2:
        optimize.minimize_scalar(objective, bounds=(lo, hi), method="bounded", options={"xatol": tol})
    else:
        optimize.minimize(objective, np.zeros(sources.n_texts - 1), method="Nelder-Mead",
                          options={"xatol": tol, "fatol": 1e-5})
    best_w, best_p = min(trials, key=lambda t: t[1])
    return WeightSearch(weights=best_w, dev_ppl=best_p, trials=trials)
