"""The count-based side of a comparison: the V^n wall, the count spectrum and the n-gram rows.

The training split is counted once at the highest order; a model of order k uses the
first k levels of those counts (the count trie is cumulative: level k only points
into level k-1), so every order and smoother shares one counting pass.
"""
from __future__ import annotations

import math
import time
from typing import Optional

import numpy as np

from corpora.errors import InputError
from corpora.vocab import BOS_ID, EncodedText
from ngramlm import NgramCounts, NgramLM
from corpora.accounting import report_from_log10
from ngramlm.smoothing import REGISTERED, SMOOTHER_INFO
from ngramlm.sparsity import flat_row, sparsity_table

LOG2_10 = math.log2(10.0)
# From the smoother registry: the retry of a degenerate fit, and the display names.
FALLBACK = {i.name: i.fallback for i in REGISTERED if i.fallback is not None}
NAMES = {i.name: i.label for i in REGISTERED}


def truncate_counts(counts: NgramCounts, k: int) -> NgramCounts:
    """The counts of orders 1..k, sharing arrays with ``counts`` (no copy)."""
    return counts if k == counts.order else NgramCounts(k, counts.vocab_size, counts.tables[:k])


# ---------------------------------------------------------------------------- the V^n wall
def vwall(counts: NgramCounts, vocab, train: EncodedText, test: EncodedText) -> list:
    """One row per order k: the V^n wall of :func:`ngramlm.sparsity.sparsity_table` (the numbers
    ``ngramlm stats`` prints), flat as ``test_unseen`` etc., plus MLE of order k on test."""
    rows = []
    for r in sparsity_table(train, {"test": test}, vocab=vocab, counts=counts):
        k = r["order"]
        lm = NgramLM(order=k, smoothing="mle").fit(train, vocab=vocab, counts=truncate_counts(counts, k))
        rep = lm.perplexity_report(test)
        row = flat_row(r, "test")
        row.update({
            "mle_zero_probs": rep.zero_probs,
            "mle_ppl": None if rep.zero_probs else rep.ppl,  # None: infinite
            "mle_ppl_nonzero_events": rep.ppl,
        })
        rows.append(row)
    return rows


def spectrum(counts: NgramCounts) -> dict:
    """Count-of-counts per order: ``{k: [[c, n_c], ...]}`` for every count c that occurs (c >= 1)."""
    out = {}
    for k in range(1, counts.order + 1):
        c = counts.tables[k - 1].count
        if k == 1:
            c = np.delete(c, BOS_ID)  # <s> is padding, not a word
        c = c[c > 0]
        if len(c) == 0:
            out[str(k)] = []
            continue
        values, n = np.unique(c, return_counts=True)
        out[str(k)] = [[int(a), int(b)] for a, b in zip(values, n)]
    return out


SPELLING_KINDS = ("char", "byte")  # tokenizers whose tokens spell the text: their n-grams read joined


def spelled_ngram(pieces: list, vocab) -> str:
    """An n-gram as the report shows it: a character or byte tokenization's pieces joined into the string
    they spell ("▁th"), any other tokenization's with spaces -- one-letter words stay apart ("$ N a",
    never "$Na")."""
    tok = getattr(vocab, "tokenizer", None)
    kind = getattr(tok, "kind", None) if tok is not None else None
    return ("" if kind in SPELLING_KINDS else " ").join(pieces)


def zipf(counts, vocab, top: int = 10) -> dict:
    """The textbook's first figures for one tokenization: the rank-frequency curve of its types (sampled
    on a log grid of ranks, for the plot) and its top-``top`` unigrams, bigrams and trigrams as counted
    for the models (``<s>``/``</s>`` included)."""
    out = {"ranks": [], "freqs": [], "top": {}}
    freqs = np.sort(counts.tables[0].count[counts.tables[0].count > 0].astype(np.int64))[::-1]
    if len(freqs):
        ranks = np.unique(np.round(np.geomspace(1, len(freqs), num=min(len(freqs), 200))).astype(np.int64))
        out["ranks"] = ranks.tolist()
        out["freqs"] = freqs[ranks - 1].tolist()
    for n in range(1, min(3, counts.order) + 1):
        c = counts.tables[n - 1].count
        idx = np.argsort(-c, kind="stable")[:top]
        grams = counts.ngrams(n)[idx]
        shown = []
        for g, i in zip(grams, idx):
            if c[i] > 0:
                pieces = vocab.decode(g.tolist())
                shown.append([spelled_ngram(pieces, vocab), int(c[i])])
        out["top"][str(n)] = shown
    return out


# ---------------------------------------------------------------------------- model rows
def ngram_settings(smoother: str, order: int, fraction: float = 1.0) -> dict:
    return {"smoother": smoother, "order": order, "train_fraction": fraction}


def split_scores(lm: NgramLM, text: EncodedText) -> tuple[dict, np.ndarray]:
    s = lm.token_scores(text)
    rep = report_from_log10(s.log10_prob, s.oov, text.n_sentences)  # the same scores, not a second pass
    log2p = s.log10_prob * LOG2_10
    finite = np.isfinite(log2p)
    score = {
        "tokens": rep.tokens,
        "zero_probs": rep.zero_probs,
        "oovs": rep.oovs,
        "log2prob": float(log2p[finite].sum()),
        "ppl": None if rep.zero_probs else rep.ppl,  # None: infinite (some event has probability 0)
        "ppl_nonzero_events": rep.ppl,
        "bits_per_token": None if rep.zero_probs else math.log2(rep.ppl),
    }
    return score, log2p


def fit_ngram(smoother: str, order: int, counts: NgramCounts, train: EncodedText, vocab,
              heldout: EncodedText) -> tuple[Optional[NgramLM], Optional[str], Optional[str]]:
    """``(model, note, error)``: a model, or why it could not be estimated on this text."""
    if counts.n_distinct(order) == 0:
        return None, None, (f"the training text has no {order}-grams: every sentence is shorter than "
                            f"{order - 1} words plus its end, too small for this order")
    ck = truncate_counts(counts, order)
    kw = {"k": 0.01} if smoother == "addk" else {}
    try:
        return NgramLM(order=order, smoothing=smoother, **kw).fit(train, vocab=vocab, counts=ck, heldout=heldout), None, None
    except InputError as exc:
        if smoother not in FALLBACK:
            return None, None, str(exc)
        first = exc.message
    try:
        lm = NgramLM(order=order, smoothing=smoother, discount_fallback=FALLBACK[smoother], **kw)
        lm.fit(train, vocab=vocab, counts=ck, heldout=heldout)
    except InputError as exc:
        return None, None, str(exc)
    fb = FALLBACK[smoother]
    return lm, f"fallback discounts {fb if fb is not True else '(Katz: no discount)'} used: {first}", None


def ngram_row(smoother: str, order: int, counts: NgramCounts, data, fraction: float = 1.0,
              train: Optional[EncodedText] = None) -> tuple[dict, dict]:
    """Train and score one n-gram model: ``(row, per-token log2 arrays)``."""
    train = data["train"] if train is None else train
    t0 = time.perf_counter()
    lm, note, error = fit_ngram(smoother, order, counts, train, data.vocab, data["valid"])
    seconds = time.perf_counter() - t0
    row = {
        "id": f"{smoother}-{order}" + ("" if fraction >= 1 else f"@{fraction:g}"),
        "family": "ngram",
        "model": smoother,
        "label": f"{NAMES.get(smoother, smoother)} {order}-gram",
        "order": order,
        "settings": ngram_settings(smoother, order, fraction),
        "train_tokens": train.n_tokens,
        "train_seconds": seconds,
        "size": None,
        "size_unit": "n-gram entries",
        "note": note,
        "aka": SMOOTHER_INFO[smoother].literature if smoother in SMOOTHER_INFO else None,
        "error": error,
        "valid": None,
        "test": None,
        "is_distribution": None,
    }
    if lm is None:
        return row, {}
    row["size"] = int(sum(lm.n_ngrams_))
    row["is_distribution"] = bool(lm.is_distribution_)
    arrays = {}
    for split in ("valid", "test"):
        row[split], arrays[split] = split_scores(lm, data[split])
    if not row["is_distribution"] or row["valid"]["zero_probs"] or row["test"]["zero_probs"]:
        arrays = {}  # only proper, zero-free models are interpolated and shown per token
    return row, arrays
