"""Smoothers: turn :class:`~ngramlm.counts.NgramCounts` into probabilities.

Each smoother is a small class with explicit keyword parameters and one method,
``estimate(counts, n_types)``, returning :class:`BackoffEstimate`: for every stored
n-gram its log10 probability, and for every context its log10 backoff weight.  That
is the ARPA/KenLM *backoff form*, in which every smoother here except add-k/MLE can
be written exactly:

    log10 p(w | h) = log10 p*(h w)                          if h w is stored
                   = log10 b(h) + log10 p(w | h')            otherwise

(``h'`` drops the oldest word of ``h``).  Interpolated smoothers store the
*interpolated* probability of seen n-grams and ``b(h) = gamma(h)``, the weight of the
lower order (Chen & Goodman 1998; what KenLM's lmplz writes).  The unigram level is
interpolated with the uniform distribution over the ``n_types`` predicted types
(words, ``<unk>`` and ``</s>``; not ``<s>``), so no word gets probability zero.

Add-k and MLE are not backoff models; :class:`AdditiveSmoother` provides them and
the model scores them directly from counts.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Optional, Sequence

import numpy as np

from corpora.errors import InputError
from corpora.vocab import BOS_ID, PAD_ID

from .counts import NgramCounts


@dataclass
class BackoffEstimate:
    """A smoother's estimate in back-off form, what :meth:`Smoother.estimate` returns.

    Per order k (index k-1): log10 p of each stored k-gram, log10 backoff of each k-gram as a context,
    row for row with the counts' tables.  ``ngramlm.builder.estimate`` puts these arrays, with the keys
    and the vocabulary, into the fitted model's :class:`~ngramlm.tables.NgramTables`."""

    log10_prob: list
    log10_backoff: list  # orders 1..n-1; order n has none (empty array)
    # log10 weight applied when a context is not stored at all (0 for proper models;
    # stupid backoff applies its alpha even then).
    missing_backoff: float = 0.0
    is_distribution: bool = True
    info: dict = field(default_factory=dict)  # discounts, lambdas, ... for reports
    # Per order, the rows the model keeps (None: every row).  SRILM's count cut-offs store fewer n-grams
    # than were counted (ngramlm.srilm_compat).
    keep: Optional[list] = None


# ----------------------------------------------------------------------------- helpers
def unigram_mask(V: int) -> np.ndarray:
    """Unigram ids that are predicted types (everything but <pad> and <s>)."""
    m = np.ones(V, dtype=bool)
    m[PAD_ID] = False
    m[BOS_ID] = False
    return m


def _raw_counts(counts: NgramCounts) -> list:
    out = [t.count.astype(np.float64) for t in counts.tables]
    out[0] = out[0].copy()
    out[0][~unigram_mask(counts.vocab_size)] = 0.0
    return out


def _first_words(counts: NgramCounts) -> list:
    first = [counts.tables[0].word]
    for k in range(2, counts.order + 1):
        first.append(first[-1][counts.tables[k - 1].parent])
    return first


def adjusted_counts(counts: NgramCounts) -> list:
    """Kneser-Ney adjusted counts, exactly as KenLM's lmplz computes them.

    Highest order: raw counts.  Lower orders: the number of distinct words seen to
    the left (continuation count, N1+(. x)), except n-grams that start with ``<s>``,
    which nothing can precede, keep their raw counts.  The ``<s>`` unigram gets 0.  Rows of count 0
    (one text's counts on the union of several texts' n-grams: ``ngramlm.builder.count_merge``) extend nothing.
    """
    n = counts.order
    adj = [None] * n
    adj[n - 1] = counts.tables[n - 1].count.astype(np.float64)
    first = _first_words(counts)
    for k in range(n - 1, 0, -1):
        m_k = len(counts.tables[k - 1])
        suffix = counts.suffix_index(k + 1)
        seen = counts.tables[k].count > 0
        if not seen.all():
            suffix = suffix[seen]
        cont = np.bincount(suffix, minlength=m_k).astype(np.float64)
        starts_bos = first[k - 1] == BOS_ID
        cont[starts_bos] = counts.tables[k - 1].count[starts_bos]
        adj[k - 1] = cont
    adj[0] = adj[0].copy()
    adj[0][~unigram_mask(counts.vocab_size)] = 0.0
    return adj


def count_of_counts(c: np.ndarray, max_count: int = 4) -> np.ndarray:
    """n[j] = number of entries with count exactly j, for j = 0..max_count."""
    ci = c.astype(np.int64)
    return np.bincount(np.minimum(ci, max_count + 1), minlength=max_count + 2)[: max_count + 1]


def context_sums(parent: np.ndarray, values: np.ndarray, n_ctx: int) -> np.ndarray:
    return np.bincount(parent, weights=values, minlength=n_ctx)


def discount_vector(d: Sequence[float]) -> np.ndarray:
    """D[c] for adjusted counts c = 0, 1, 2, 3+ from an order's discounts (one or three)."""
    return np.array([0.0] + list(d) + [d[-1]] * (3 - len(d)))


def mkn_alpha_gamma(a: np.ndarray, parent: np.ndarray, n_ctx: int, D: np.ndarray,
                    pruned: Optional[np.ndarray] = None) -> tuple:
    """Kneser-Ney's discounted share of each row and each context's lower-order weight.

    ``a``: adjusted counts of rows; ``parent``: each row's context in ``0..n_ctx-1``; ``D`` from
    :func:`discount_vector`.  ``alpha = (a - D(a)) / sum_h a`` for rows seen (0 otherwise) and
    ``gamma(h) = sum_h D(a) / sum_h a`` (0 for a context with no rows).  Each context's sums run
    over its rows in order, so rows passed in chunks that never split a context give the very
    same bits as all rows at once (the out-of-core estimation relies on it).

    ``pruned`` (bool per row): rows to be dropped from the model, as lmplz prunes inside its
    estimation (``--limit_vocab_file``, ``--prune``): they stay in the denominators and give their
    whole count, not just its discount, to the context's lower-order weight (lmplz's AddRight).
    """
    bucket = np.minimum(a, 3).astype(np.int64)
    denom = context_sums(parent, a, n_ctx)
    safe = np.where(denom > 0, denom, 1.0)
    alpha = np.where(a > 0, (a - D[bucket]) / safe[parent], 0.0)
    share = np.where(a > 0, D[bucket], 0.0)
    if pruned is not None:
        share = np.where(pruned, a, share)
    disc_mass = context_sums(parent, share, n_ctx)
    gamma = np.where(denom > 0, disc_mass / safe, 0.0)
    return alpha, gamma


def interpolate_orders(counts: NgramCounts, alphas: list, gammas: list, n_types: int) -> tuple[list, list]:
    """p_k(hw) = alpha_k(hw) + gamma_k(h) p_{k-1}(h'w); unigrams interpolate with uniform.

    ``alphas[k-1]`` is aligned with order k's entries, ``gammas[k-1]`` with the
    contexts of order k (entries of order k-1; a single value for unigrams).
    Returns (log10 probs, log10 backoffs).
    """
    n = counts.order
    probs = [unigram_probs(alphas[0], gammas[0], n_types, counts.vocab_size)]
    alphas[0] = None
    with np.errstate(divide="ignore"):
        for k in range(2, n + 1):
            t = counts.tables[k - 1]
            pk = interpolate_rows(alphas[k - 1], gammas[k - 1][t.parent], probs[k - 2][counts.suffix_index(k)])
            alphas[k - 1] = None  # pk reuses its buffer
            probs.append(pk)
            # Order k-1 is no longer needed as probabilities: take logs in place.
            np.log10(probs[k - 2], out=probs[k - 2])
        np.log10(probs[n - 1], out=probs[n - 1])
        # Contexts of order k+1 are order-k entries.
        log_bo = [log_backoff(gammas[k]) for k in range(1, n)]
    log_bo.append(np.zeros(0))
    return probs, log_bo


# The per-row formulas of interpolation, shared with the out-of-core estimation (ngramlm.builder.outofcore),
# which applies them to chunks of rows: one implementation, so the two paths cannot drift apart.
def unigram_probs(alpha1: np.ndarray, gamma1: float, n_types: int, V: int) -> np.ndarray:
    """p_1(w) = alpha_1(w) + gamma_1 / n_types for predicted types, 0 for <pad> and <s>."""
    return np.where(unigram_mask(V), alpha1 + gamma1 / n_types, 0.0)


def interpolate_rows(alpha: np.ndarray, gamma_of_context: np.ndarray, lower: np.ndarray) -> np.ndarray:
    """p_k(hw) = alpha_k(hw) + gamma_k(h) p_{k-1}(h'w), row by row (in ``alpha``'s buffer)."""
    alpha += gamma_of_context * lower
    return alpha


def log_backoff(gamma: np.ndarray) -> np.ndarray:
    """log10 back-off weights; entries that are not a context of anything keep backoff 1 (log 0)."""
    return np.where(gamma > 0, np.log10(np.where(gamma > 0, gamma, 1.0)), 0.0)


DEFAULT_FALLBACK = (0.5, 1.0, 1.5)  # lmplz's --discount_fallback


def note_warning(smoother, message: str) -> None:
    """A warning of the estimation (a degenerate order handled by a rule rather than refused): kept on the
    smoother, and put in the model's ``info["warnings"]``, which ``ngramlm train`` prints."""
    if not hasattr(smoother, "warnings_"):
        smoother.warnings_ = []
    smoother.warnings_.append(message)


def _with_warnings(smoother, info: dict) -> dict:
    if getattr(smoother, "warnings_", None):
        info = dict(info, warnings=list(smoother.warnings_))
    return info


def good_turing_ratios(nc: np.ndarray, K: int, k: int, *, epsilon: float = 0.0, upper: float = 1.0) -> tuple:
    """Katz's Good-Turing discount ratios ``d[j]`` of counts j = 1..K (``d[0] = 1``) from the count-of-counts
    ``nc[0..K+1]`` of order k, with SRILM's rule where the data give no usable ratio: no singletons, nothing
    discounted; no (K+1)-count n-grams, K lowered until there are; a ratio not above ``epsilon``, above
    ``upper`` (SRILM has none), or from ``r* > r``, that count left undiscounted.  Returns ``(d, the K used,
    warnings)``."""
    d = np.ones(K + 1)
    if K > 0 and nc[1] == 0:
        return d, 0, [f"Good-Turing {k}-grams: no {k}-gram seen once, so nothing is discounted at this order"]
    notes = []
    top = K
    while top > 0 and nc[top + 1] == 0:
        top -= 1
    if top < K:
        notes.append(f"Good-Turing {k}-grams: no {k}-gram seen {top + 2} times; only counts up to {top} are "
                     "discounted")
    if top == 0:
        return d, 0, notes
    common = (top + 1) * nc[top + 1] / nc[1]
    off = []
    for j in range(1, top + 1):
        if nc[j] == 0:
            off.append(f"{j} (no {k}-gram seen {j} times)")
            continue
        raw = (j + 1) * nc[j + 1] / (j * nc[j])
        ratio = (raw - common) / (1.0 - common) if common != 1.0 else np.nan
        if not (np.isfinite(ratio) and epsilon < ratio <= upper and raw <= 1.0):
            off.append(f"{j} ({'r*/r = %.4g > 1' % raw if raw > 1.0 else 'ratio %.4g' % ratio})")
            continue
        d[j] = ratio
    if off:
        notes.append(f"Good-Turing {k}-grams: the discount ratio of count {', '.join(off)} is out of range; those "
                     "counts are left undiscounted (SRILM's rule)")
    return d, top, notes


def _discount_error(name: str, k: int, detail: str) -> InputError:
    err = InputError(
        f"cannot estimate {name} discounts for {k}-grams: {detail}; is this small or artificial data?",
        fix="use more (or deduplicated) training text, a lower --order, or pass --discount-fallback "
            "to use fixed discounts (0.5, 1.0, 1.5) for the degenerate orders",
    )
    err.detail = f"{name} discounts for {k}-grams: {detail}"  # for the warning of a rule that goes on
    return err


# ----------------------------------------------------------------------------- smoothers
class Smoother:
    name = "base"
    is_distribution = True
    # The per-order form (see :class:`OrderForm`), for smoothers whose estimate is made of per-order steps
    # on rows grouped by context: what the Dask build applies to its partitions.  None: estimated whole only.
    row_counts: Optional[str] = None

    def get_params(self) -> dict:
        return {k: v for k, v in self.__dict__.items() if not k.endswith("_")}

    def estimate(self, counts: NgramCounts, n_types: int) -> BackoffEstimate:  # pragma: no cover
        raise NotImplementedError


class OrderForm:
    """An interpolated smoother as per-order steps, each on the rows of whole contexts.

    ``p_k(hw) = alpha_k(hw) + gamma_k(h) p_{k-1}(h'w)``, where ``alpha`` and ``gamma`` need only the row
    counts of one context's rows (:attr:`row_counts`: ``"adjusted"``, Kneser-Ney's continuation counts,
    or ``"raw"``) and one parameter per order, which :meth:`order_params` makes from each order's
    count-of-counts n_0..n_4 of its positive row counts.  The in-memory ``estimate`` runs the same
    methods on all rows at once; the Dask build (``ngramlm.builder.partition``) on partitions of rows that
    never split a context, so both give the same bits (each context's sums run over the same rows in
    the same order)."""

    row_counts = "raw"

    def order_params(self, ncs: list) -> list:
        return [None] * len(ncs)

    def alpha_gamma(self, c: np.ndarray, parent: np.ndarray, n_ctx: int, param) -> tuple:  # pragma: no cover
        raise NotImplementedError

    def _interpolated(self, counts: NgramCounts, rows: list, n_types: int) -> tuple:
        """``(log10 probs, log10 backoffs, params)`` of ``counts`` from its row counts ``rows`` (per order),
        every order at once."""
        params = self.order_params([count_of_counts(c[c > 0], 4) for c in rows])
        alphas, gammas = [], []
        for k in range(1, counts.order + 1):
            parent = np.zeros(len(rows[k - 1]), dtype=np.int64) if k == 1 else counts.tables[k - 1].parent
            n_ctx = 1 if k == 1 else len(counts.tables[k - 2])
            alpha, gamma = self.alpha_gamma(rows[k - 1], parent, n_ctx, params[k - 1])
            alphas.append(alpha)
            gammas.append(gamma)
            rows[k - 1] = None
        gammas[0] = gammas[0][0]
        lp, lb = interpolate_orders(counts, alphas, gammas, n_types)
        return lp, lb, params


class ModifiedKneserNey(OrderForm, Smoother):
    """Interpolated modified Kneser-Ney (Chen & Goodman 1998), three discounts per order.

    Matches KenLM ``lmplz`` (``--discount_fallback`` aside): adjusted counts from
    :func:`adjusted_counts`, discounts ``D_j = j - (j+1) Y n_{j+1}/n_j`` with
    ``Y = n_1/(n_1 + 2 n_2)`` from each order's count-of-counts.
    """

    name = "mkn"
    n_discounts = 3
    row_counts = "adjusted"

    def __init__(self, *, discount_fallback: Optional[Sequence[float]] = None,
                 discounts: Optional[Sequence[Sequence[float]]] = None) -> None:
        self.discount_fallback = discount_fallback
        self.discounts = discounts  # explicit per-order discounts (list of [D1, D2, D3+])

    def compute_discounts(self, adj: list, counts: Optional[NgramCounts] = None) -> list:
        ncs = [None if self.discounts is not None else count_of_counts(a[a > 0], 4) for a in adj]
        lmplz = getattr(self, "lmplz_", None)
        if lmplz is not None and self.discounts is None:
            # --compat kenlm: lmplz records the suffixes of its last n-gram at their raw counts.
            from .kenlm_compat import apply_to_count_of_counts

            for k, row in enumerate(lmplz["raw_count_rows"][: len(adj) - 1], start=1):
                ncs[k - 1] = apply_to_count_of_counts(ncs[k - 1], adj[k - 1], counts.tables[k - 1].count, row)
        return self.discounts_from_counts_of_counts(ncs)

    def order_params(self, ncs: list) -> list:
        return self.discounts_from_counts_of_counts(ncs)

    def alpha_gamma(self, c: np.ndarray, parent: np.ndarray, n_ctx: int, param) -> tuple:
        return mkn_alpha_gamma(c, parent, n_ctx, discount_vector(param))

    def discounts_from_counts_of_counts(self, ncs: list) -> list:
        """Per order, the discounts from the count-of-counts n_0..n_4 of its positive adjusted counts
        (``ncs[k-1]``; unused, may be None, with explicit ``discounts``).

        An order whose count-of-counts give no discounts (a zero among n1..n4, as characters' unigrams
        have) takes ``discount_fallback``, or else lmplz's fixed 0.5, 1, 1.5 with a warning in
        ``warnings_`` (lmplz and SRILM stop there); only ``--compat kenlm`` stops, as lmplz does."""
        out = []
        for k, nc in enumerate(ncs, start=1):
            if self.discounts is not None:
                d = [float(x) for x in self.discounts[k - 1]]
                out.append((d + d[-1:] * 3)[: self.n_discounts])
                continue
            try:
                out.append(self._discounts_from(nc, k))
            except InputError as e:
                if self.discount_fallback is None and getattr(self, "lmplz_", None) is not None:
                    raise
                fb = [float(x) for x in (self.discount_fallback or DEFAULT_FALLBACK)]
                out.append((fb + fb[-1:] * 3)[: self.n_discounts])
                if self.discount_fallback is None:
                    note_warning(self, f"cannot estimate {e.detail}; used the fixed discounts {out[-1]} for the "
                                       f"{k}-grams")
        return out

    def _discounts_from(self, nc: np.ndarray, k: int) -> list:
        for j in range(1, 4 if self.n_discounts == 3 else 2):
            if nc[j] == 0:
                raise _discount_error(
                    "Kneser-Ney", k,
                    f"no {k}-grams with adjusted count {j} (count-of-counts n1..n4 = {nc[1:5].tolist()})")
        if getattr(self, "lmplz_", None) is not None:
            from .kenlm_compat import float32_discounts

            ds = float32_discounts(nc, self.n_discounts)  # lmplz's arithmetic
            if self.n_discounts == 1:
                return ds
        else:
            y = nc[1] / (nc[1] + 2.0 * nc[2])
            if self.n_discounts == 1:
                return [y]
            ds = [j - (j + 1) * y * nc[j + 1] / nc[j] for j in (1, 2, 3)]
        for j, d in enumerate(ds, start=1):
            if not 0.0 <= d <= j:
                raise _discount_error("Kneser-Ney", k, f"discount D{j} = {d:.4f} is outside [0, {j}]")
        return ds

    def estimate(self, counts: NgramCounts, n_types: int) -> BackoffEstimate:
        adj = adjusted_counts(counts)
        discounts = self.compute_discounts(adj, counts)
        lmplz = getattr(self, "lmplz_", None)
        if lmplz is not None:
            n_types += lmplz["extra_types"]  # lmplz's uniform floor also counts its own <unk>
            if lmplz.get("prune_words") is not None:
                # ... and only the types left after pruning (it divides by the pruned unigram count).
                n_types -= int(lmplz["prune_words"].sum())
        alphas, gammas = [], []
        # lmplz's --limit_vocab_file (with --compat kenlm): the rows holding a word outside the list
        # are pruned inside the estimation; the model drops them afterwards (NgramLM.fit).
        prune_words = lmplz.get("prune_words") if lmplz is not None else None
        pruned = None
        for k in range(1, counts.order + 1):
            a = adj[k - 1]
            t = counts.tables[k - 1]
            if k == 1:
                parent = np.zeros(len(a), dtype=np.int64)
                n_ctx = 1
            else:
                parent = t.parent
                n_ctx = len(counts.tables[k - 2])
            if prune_words is not None:
                pruned = prune_words[t.word] if k == 1 else pruned[t.parent] | prune_words[t.word]
            alpha, gamma = mkn_alpha_gamma(a, parent, n_ctx, discount_vector(discounts[k - 1]), pruned)
            alphas.append(alpha)
            gammas.append(gamma)
            adj[k - 1] = None
        gammas[0] = gammas[0][0]
        lp, lb = interpolate_orders(counts, alphas, gammas, n_types)
        info = _with_warnings(self, {"discounts": [list(map(float, d)) for d in discounts]})
        if lmplz is not None:
            info["compat"] = {"kenlm": {"uniform_types": n_types,
                                        "raw_count_rows": lmplz["raw_count_rows"]}}
            if prune_words is not None:
                info["compat"]["kenlm"]["limit_vocab_pruned_words"] = int(prune_words.sum())
        return BackoffEstimate(lp, lb, info=info)


class KneserNey(ModifiedKneserNey):
    """Interpolated Kneser-Ney with one discount per order, D = n1 / (n1 + 2 n2)."""

    name = "kn"
    n_discounts = 1


class AbsoluteDiscounting(OrderForm, Smoother):
    """Interpolated absolute discounting on raw counts, D = n1/(n1 + 2 n2) per order unless given."""

    name = "absolute"

    def __init__(self, *, discount: Optional[float] = None,
                 discount_fallback: Optional[Sequence[float]] = None) -> None:
        self.discount = discount
        self.discount_fallback = discount_fallback

    def order_params(self, ncs: list) -> list:
        ds = []
        for k, nc in enumerate(ncs, start=1):
            if self.discount is not None:
                D = float(self.discount)
            elif nc[1] == 0 or nc[2] == 0:
                D = float(list(self.discount_fallback or DEFAULT_FALLBACK)[0])
                if self.discount_fallback is None:
                    note_warning(self, f"absolute discounting {k}-grams: count-of-counts n1={nc[1]}, n2={nc[2]} give "
                                       f"no discount: used the fixed discount {D}")
            else:
                D = nc[1] / (nc[1] + 2.0 * nc[2])
            ds.append(D)
        return ds

    def alpha_gamma(self, c: np.ndarray, parent: np.ndarray, n_ctx: int, param) -> tuple:
        D = param
        denom = context_sums(parent, c, n_ctx)
        safe = np.where(denom > 0, denom, 1.0)
        alpha = np.maximum(c - D, 0.0) / safe[parent]
        mass = context_sums(parent, np.minimum(c, D), n_ctx)
        return alpha, np.where(denom > 0, mass / safe, 0.0)

    def estimate(self, counts: NgramCounts, n_types: int) -> BackoffEstimate:
        lp, lb, ds = self._interpolated(counts, _raw_counts(counts), n_types)
        return BackoffEstimate(lp, lb, info=_with_warnings(self, {"discounts": ds}))


class WittenBell(OrderForm, Smoother):
    """Interpolated Witten-Bell: gamma(h) = N1+(h.) / (c(h) + N1+(h.))."""

    name = "wb"

    def alpha_gamma(self, c: np.ndarray, parent: np.ndarray, n_ctx: int, param) -> tuple:
        total = context_sums(parent, c, n_ctx)
        types = context_sums(parent, (c > 0).astype(np.float64), n_ctx)
        denom = total + types
        safe = np.where(denom > 0, denom, 1.0)
        return c / safe[parent], np.where(denom > 0, types / safe, 0.0)

    def estimate(self, counts: NgramCounts, n_types: int) -> BackoffEstimate:
        lp, lb, _ = self._interpolated(counts, _raw_counts(counts), n_types)
        return BackoffEstimate(lp, lb)


class JelinekMercer(Smoother):
    """Linear interpolation p_k = l_k ML_k + (1 - l_k) p_{k-1}, one weight per order.

    ``lambdas`` (orders 1..n) are given, or tuned on held-out text by
    :func:`ngramlm.tuning.tune_jelinek_mercer` (scipy L-BFGS-B on held-out
    cross-entropy).  Contexts never seen in training fall through to the lower order.
    """

    name = "jm"

    def __init__(self, *, lambdas: Optional[Sequence[float]] = None) -> None:
        self.lambdas = lambdas

    def estimate(self, counts: NgramCounts, n_types: int) -> BackoffEstimate:
        lambdas = self.lambdas
        if lambdas is None:
            lambdas = [0.5] * counts.order
        if len(lambdas) != counts.order or not all(0.0 <= float(x) <= 1.0 for x in lambdas):
            raise InputError(
                f"Jelinek-Mercer needs {counts.order} weights in [0, 1], got {list(lambdas)}",
                fix="pass one weight per order, or tune them on held-out text",
            )
        raw = _raw_counts(counts)
        alphas, gammas = [], []
        for k in range(1, counts.order + 1):
            lam = float(lambdas[k - 1])
            c = raw[k - 1]
            parent = np.zeros(len(c), dtype=np.int64) if k == 1 else counts.tables[k - 1].parent
            n_ctx = 1 if k == 1 else len(counts.tables[k - 2])
            total = context_sums(parent, c, n_ctx)
            seen = total > 0
            safe = np.where(seen, total, 1.0)
            alphas.append(lam * c / safe[parent])
            gammas.append(np.where(seen, 1.0 - lam, 0.0))
        gammas[0] = gammas[0][0]
        lp, lb = interpolate_orders(counts, alphas, gammas, n_types)
        return BackoffEstimate(lp, lb, info={"lambdas": [float(x) for x in lambdas]})


class Katz(Smoother):
    """Good-Turing discounting with Katz backoff (Katz 1987).

    Counts ``c <= k_max`` are discounted to ``d_c c`` with the Katz-normalised
    Good-Turing ratio; larger counts are trusted.  The left-over mass of each context
    goes to the lower order through ``alpha(h) = (1 - sum_seen p(w|h)) /
    (1 - sum_seen p(w|h'))``.  At the unigram level the left-over mass is spread
    uniformly over all types.  A context whose continuations all have counts above
    ``k_max`` would keep all its mass; it is given one pseudo-count of mass for the
    unseen, so no event gets probability zero.
    """

    name = "katz"

    def __init__(self, *, k_max: int = 5, discount_fallback: bool = False) -> None:
        self.k_max = k_max
        self.discount_fallback = discount_fallback

    def _ratios(self, c: np.ndarray, k: int) -> np.ndarray:
        """d[j] for counts j = 0..k_max (1 = not discounted), by :func:`good_turing_ratios` (SRILM's rule where
        a ratio is unusable, each with a warning).  ``discount_fallback`` instead leaves the whole order
        undiscounted where any is unusable, silently (the earlier habit)."""
        d, _, notes = good_turing_ratios(count_of_counts(c[c > 0], self.k_max + 1), self.k_max, k)
        if self.discount_fallback and notes:
            return np.ones(self.k_max + 1)
        for note in notes:
            note_warning(self, note)
        return d

    def estimate(self, counts: NgramCounts, n_types: int) -> BackoffEstimate:
        raw = _raw_counts(counts)
        n = counts.order
        V = counts.vocab_size
        probs, log_bo, ratios = [], [], []
        # Unigrams.
        c1 = raw[0]
        d = self._ratios(c1, 1)
        ratios.append(d[1:].tolist())
        disc = np.where(c1 <= self.k_max, d[np.minimum(c1, self.k_max).astype(np.int64)], 1.0) * c1
        total = c1.sum()
        mask = unigram_mask(V)
        p1 = disc / total
        if 1.0 - p1.sum() <= 1e-12:
            # Nothing was discounted (the fallback's ratios of 1, or every count above k_max): as at
            # the higher orders, one pseudo-count of mass is reserved for the unseen types, so no
            # type -- <unk> in particular -- is left at probability zero.
            p1 = disc / (total + 1.0)
        p1 = np.where(mask, p1 + (1.0 - p1.sum()) / n_types, 0.0)
        probs.append(p1)
        for k in range(2, n + 1):
            t = counts.tables[k - 1]
            c = raw[k - 1]
            d = self._ratios(c, k)
            ratios.append(d[1:].tolist())
            disc = np.where(c <= self.k_max, d[np.minimum(c, self.k_max).astype(np.int64)], 1.0) * c
            n_ctx = len(counts.tables[k - 2])
            ctx_total = context_sums(t.parent, c, n_ctx)
            safe = np.where(ctx_total > 0, ctx_total, 1.0)
            pk = disc / safe[t.parent]
            seen_mass = context_sums(t.parent, pk, n_ctx)
            # Contexts whose continuations all have counts above k_max keep all their
            # mass and could never back off (probability 0 for every unseen word).
            # Reserve one pseudo-count for the unseen, as if seen once more.
            full = (ctx_total > 0) & (seen_mass > 1.0 - 1e-9)
            if full.any():
                scale = np.where(full, ctx_total / (ctx_total + 1.0), 1.0)
                pk = pk * scale[t.parent]
                seen_mass = seen_mass * scale
            lower_mass = context_sums(t.parent, probs[k - 2][counts.suffix_index(k)], n_ctx)
            with np.errstate(divide="ignore", invalid="ignore"):
                alpha = np.where(ctx_total > 0, (1.0 - seen_mass) / np.maximum(1.0 - lower_mass, 1e-300), 1.0)
            # A context whose seen words exhaust the lower order too gets no backoff mass.
            alpha = np.where((ctx_total > 0) & (1.0 - lower_mass <= 1e-12), 0.0, alpha)
            with np.errstate(divide="ignore"):
                log_bo.append(np.where(ctx_total > 0, np.log10(np.maximum(alpha, 0.0)), 0.0))
            probs.append(pk)
        log_bo.append(np.zeros(0))
        with np.errstate(divide="ignore"):
            lp = [np.log10(p) for p in probs]
        return BackoffEstimate(lp, log_bo, info=_with_warnings(self, {"good_turing_ratios": ratios}))


class StupidBackoff(Smoother):
    """Stupid backoff (Brants et al. 2007): relative frequency, else alpha x lower order.

    Scores only: the values do not sum to one, so perplexities are not comparable.
    """

    name = "stupid"
    is_distribution = False

    def __init__(self, *, alpha: float = 0.4) -> None:
        self.alpha = alpha

    def estimate(self, counts: NgramCounts, n_types: int) -> BackoffEstimate:
        if not 0.0 < float(self.alpha) <= 1.0:
            raise InputError(f"stupid backoff alpha must be in (0, 1], got {self.alpha}", fix="use e.g. --alpha 0.4")
        raw = _raw_counts(counts)
        probs = []
        for k in range(1, counts.order + 1):
            c = raw[k - 1]
            parent = np.zeros(len(c), dtype=np.int64) if k == 1 else counts.tables[k - 1].parent
            n_ctx = 1 if k == 1 else len(counts.tables[k - 2])
            total = context_sums(parent, c, n_ctx)
            probs.append(c / np.where(total > 0, total, 1.0)[parent])
        la = math.log10(float(self.alpha))
        with np.errstate(divide="ignore"):
            lp = [np.log10(p) for p in probs]
        lb = [np.full(len(counts.tables[k - 1]), la) for k in range(1, counts.order)] + [np.zeros(0)]
        return BackoffEstimate(lp, lb, missing_backoff=la, is_distribution=False, info={"alpha": float(self.alpha)})


class AdditiveSmoother(Smoother):
    """Add-k (Lidstone; k = 1 is Laplace) and, with k = 0, maximum likelihood.

    ``p(w | h) = (c(h w) + k) / (c(h) + k |V|)`` at the highest order whose context
    fits (shorter histories at sentence starts use the matching lower order).  Not a
    backoff model: it is scored straight from counts by :class:`~ngramlm.model.NgramLM`.
    """

    def __init__(self, *, k: float = 1.0) -> None:
        self.k = k

    @property
    def name(self) -> str:  # type: ignore[override]
        return "mle" if float(self.k) == 0.0 else ("laplace" if float(self.k) == 1.0 else "addk")


@dataclass(frozen=True)
class SmootherParam:
    """A keyword parameter of a smoother class, and the ``ngramlm train`` option that sets it (None: the
    parameter is the API's only, and :class:`~ngramlm.model.NgramLM` does not take it)."""

    name: str
    option: Optional[str] = None


K = SmootherParam("k", "--k")
DISCOUNT = SmootherParam("discount", "--discount")
DISCOUNT_FALLBACK = SmootherParam("discount_fallback", "--discount-fallback")
ALPHA = SmootherParam("alpha", "--alpha")
LAMBDAS = SmootherParam("lambdas", "--lambdas")
# The smoother parameters NgramLM takes, in the order of its signature (and of a native file's init_params).
ESTIMATOR_PARAMS = (K, DISCOUNT, DISCOUNT_FALLBACK, ALPHA, LAMBDAS)


@dataclass(frozen=True)
class SmootherInfo:
    """Everything the toolkit knows about a smoother: adding one is its class plus one entry in
    :data:`REGISTERED` (the CLI, the native and ARPA files, the builds, the report's names and the error
    messages read this table, and nothing else says which smoother can do what)."""

    name: str  # the registered name (--smoothing, the files' "smoothing")
    cls: type
    label: str  # the report's display name
    aliases: tuple = ()  # other names accepted for it (any case), resolved where a name comes in
    params: tuple = ()  # its SmootherParams: the class's keyword parameters, in its signature's order
    form: str = "backoff"  # "backoff" (ARPA form: log10 p + back-off per n-gram) or "additive" (from counts)
    probability: bool = True  # False: scores, not probabilities (stupid backoff)
    fixed: dict = field(default_factory=dict)  # parameters fixed by the name (mle: k = 0)
    fallback: object = None  # the discount_fallback `compare` retries with on degenerate counts
    merges: bool = False  # count merging (ngramlm.builder.count_merge) weights its statistics
    out_of_core: bool = False  # the out-of-core estimation (ngramlm.builder.outofcore) implements it
    compat: bool = False  # has lmplz's form (compat="kenlm", ngramlm.kenlm_compat)
    literature: str = ""  # how KenLM and SRILM spell it, so a reader can find a report's row in papers (docs/srilm.md)


_KN = (DISCOUNT_FALLBACK, SmootherParam("discounts"))
REGISTERED = (
    SmootherInfo("mkn", ModifiedKneserNey, "modified Kneser-Ney", aliases=("modified-kneser-ney",), params=_KN,
                 fallback=(0.5, 1.0, 1.5), merges=True, out_of_core=True, compat=True,
                 literature="modified Kneser-Ney: KenLM's lmplz; SRILM's ngram-count -kndiscount -interpolate with "
                            "no cut-offs (-gtNmin 1) within 1e-5 relative (--compat srilm: SRILM's to 1e-6)"),
    SmootherInfo("kn", KneserNey, "Kneser-Ney", aliases=("kneser-ney",), params=_KN, fallback=(0.5, 1.0, 1.5),
                 merges=True, out_of_core=True, compat=True,
                 literature="Kneser-Ney, one discount per order: SRILM's ngram-count -ukndiscount -interpolate with "
                            "no cut-offs (--compat srilm: SRILM's exactly)"),
    SmootherInfo("absolute", AbsoluteDiscounting, "absolute discounting", aliases=("abs",),
                 params=(DISCOUNT, DISCOUNT_FALLBACK), fallback=(0.5, 1.0, 1.5), merges=True,
                 literature="absolute discounting (Ney et al. 1994): SRILM's ngram-count -cdiscount D -interpolate, "
                            "here with D = n1/(n1+2 n2) per order unless given"),
    SmootherInfo("wb", WittenBell, "Witten-Bell", aliases=("witten-bell",), merges=True,
                 literature="Witten-Bell: SRILM's ngram-count -wbdiscount -interpolate, with no cut-offs"),
    SmootherInfo("jm", JelinekMercer, "Jelinek-Mercer", aliases=("jelinek-mercer",), params=(LAMBDAS,),
                 literature="Jelinek-Mercer (deleted interpolation), one weight per order tuned on held-out text; "
                            "neither KenLM nor SRILM's ngram-count estimates it"),
    SmootherInfo("katz", Katz, "Katz", params=(SmootherParam("k_max"), DISCOUNT_FALLBACK), fallback=True,
                 literature="Katz back-off with Good-Turing discounts: SRILM's ngram-count default, but here counts "
                            "1..5 discounted at every order and no cut-offs (--compat srilm: SRILM's -gt1max 1, "
                            "-gtNmax 7, -gt3min 2)"),
    SmootherInfo("stupid", StupidBackoff, "stupid backoff", aliases=("stupid-backoff",), params=(ALPHA,),
                 probability=False,
                 literature="stupid backoff (Brants et al. 2007): scores, not probabilities; not in KenLM or SRILM"),
    SmootherInfo("addk", AdditiveSmoother, "add-k", aliases=("lidstone", "add-k"), params=(K,), form="additive",
                 literature="add-k (Lidstone) at the highest order; SRILM's -addsmooth K is add-k inside its back-off "
                            "form (--compat srilm)"),
    SmootherInfo("laplace", AdditiveSmoother, "Laplace (add-1)", aliases=("add-one",), form="additive",
                 fixed={"k": 1.0}, literature="Laplace (add-one) at the highest order; SRILM's -addsmooth 1 is add-one "
                                              "inside its back-off form (--compat srilm)"),
    SmootherInfo("mle", AdditiveSmoother, "MLE", form="additive", fixed={"k": 0.0},
                 literature="maximum likelihood at the highest order: unseen events get probability 0"),
)
SMOOTHER_INFO = {i.name: i for i in REGISTERED}
SMOOTHERS = {i.name: i.cls for i in REGISTERED}  # name -> class
ALIASES = {a: i.name for i in REGISTERED for a in i.aliases}  # alias -> registered name
# The command-line option of each NgramLM parameter, for error messages.
OPTIONS = {p.name: p.option for p in ESTIMATOR_PARAMS}


def backoff_smoothers() -> tuple:
    """The smoothers whose models are back-off models of probabilities: what ARPA files, pruning and
    the kenlm API take."""
    return tuple(i.name for i in REGISTERED if i.form == "backoff" and i.probability)


def mergeable_smoothers() -> tuple:
    """The smoothers count merging (``--weights``) weights: each text discounted by its own statistics."""
    return tuple(i.name for i in REGISTERED if i.merges)


def out_of_core_smoothers() -> tuple:
    """The smoothers the out-of-core estimation implements."""
    return tuple(i.name for i in REGISTERED if i.out_of_core)


def compat_smoothers() -> tuple:
    """The smoothers with lmplz's form (``compat="kenlm"``)."""
    return tuple(i.name for i in REGISTERED if i.compat)


def named_list(names) -> str:
    """``"a, b or c"``: for messages that list what is accepted."""
    names = list(names)
    return names[0] if len(names) == 1 else f"{', '.join(names[:-1])} or {names[-1]}"


def canonical_name(name):
    """The registered name of smoother ``name`` (an alias, in any case), or ``name`` unchanged when it names
    no smoother (``None``, a file's ``"arpa"``, a typo: the estimator says what is wrong when it fits).
    Names are resolved once, where they come in (``NgramLM(smoothing=...)``, ``--smoothing``)."""
    if not isinstance(name, str):
        return name
    key = ALIASES.get(name.lower(), name.lower())
    return key if key in SMOOTHERS else name


def smoother_params(name: str) -> tuple:
    """The parameters smoother ``name`` takes (its keyword arguments).

    ``mle`` and ``laplace`` take none: they are add-k with k fixed at 0 and 1.
    """
    return tuple(p.name for p in SMOOTHER_INFO[_key(name)].params)


def _key(name: str) -> str:
    key = canonical_name(name)
    if key not in SMOOTHERS:
        raise InputError(f"unknown smoother {name!r}", fix=f"choose one of {', '.join(SMOOTHERS)}")
    return key


def make_smoother(name: str, **params) -> Smoother:
    """Build a smoother by name (``mkn``, ``kn``, ``absolute``, ``wb``, ``jm``, ``katz``,
    ``stupid``, ``addk``, ``laplace``, ``mle``).

    A parameter set to ``None`` counts as not given (``NgramLM`` and ``ngramlm train``
    pass every option, ``None`` when absent).  A given parameter the smoother does not
    take is an :class:`InputError`: silently ignoring, say, ``discount=0.3`` for
    Witten-Bell would train another model than the one asked for.
    """
    key = _key(name)
    given = {p: v for p, v in params.items() if v is not None}
    takes = smoother_params(key)
    for p, v in given.items():
        if p not in takes:
            raise _foreign_param(name, key, p, v)
    info = SMOOTHER_INFO[key]
    return info.cls(**(dict(info.fixed) if info.fixed else given))


def _foreign_param(name: str, key: str, param: str, value) -> InputError:
    def named(p: str) -> str:
        return f"{p} ({OPTIONS[p]})" if p in OPTIONS else p

    shown = repr(name) if name.lower() == key else f"{name!r} ({key})"
    takes = smoother_params(key)
    has = f"it takes {', '.join(map(named, takes))}" if takes else "it takes no parameters"
    takers = [s for s in SMOOTHERS if param in smoother_params(s)]
    if key in ("mle", "laplace") and param == "k":
        fix = f"drop {named(param)}: {key} is add-k with k fixed at {0 if key == 'mle' else 1}; for another k use addk"
    elif takers:
        fix = f"drop {named(param)}, or use a smoother that takes it: {', '.join(takers)}"
    else:
        fix = f"drop {param}: no smoother takes it"
    return InputError(f"smoother {shown} does not take {named(param)}, got {value!r}; {has}", fix=fix)
