"""Analyses over finished models: interpolation, normalisation, the floor, the per-token passage.

Everything here works on per-token log2 probabilities (``log2p``), one value per
predicted token of a split, in the order of ``EncodedText.ids``.  Torch-free.

Normalising across tokenizations
--------------------------------
Perplexities over different token sets cannot be compared, but the total
information a model assigns to a text can: with ``log2P`` the summed log2
probability of the text's ``N`` predicted tokens,

    bits per token     = -log2P / N                 (perplexity = 2 ** bits per token)
    bits per character = -log2P / C                 C = characters of the text, one newline per sentence
    bits per word      = -log2P / W                 W = whitespace-separated words of the text
    word perplexity    = 2 ** (bits per word)

so a character model and a word model of the same text meet in bits per character
(or per word).  ``C`` and ``W`` are measured on the detokenized sentences (see
:func:`reports.experiments.data.text_sizes`): the newline is the character a sentence end
stands for, and sentence ends are not words.
"""
from __future__ import annotations

import math
from typing import Optional

import numpy as np

from ..formatting import fmt_fixed


# ---------------------------------------------------------------------------- normalisation
def normalise(log2prob: Optional[float], sizes: dict) -> dict:
    """Bits per token / character / word of a split whose total log2 probability is ``log2prob``.

    ``sizes``: ``{"tokens": N, "chars": C, "words": W}``.  ``log2prob=None`` (a model
    giving some event probability 0) gives infinite rates, reported as ``None``.

    >>> r = normalise(-200.0, {"tokens": 100, "chars": 400, "words": 80, "bytes": 500})
    >>> r["bits_per_token"], r["bits_per_char"], r["bits_per_word"], r["word_ppl"], r["bits_per_byte"]
    (2.0, 0.5, 2.5, 5.656854249492381, 0.4)

    A text without spaces (Chinese) is one "word" a line: its word perplexity would overflow a float
    and means nothing, so it is None (bits per word stay, as a number).

    >>> normalise(-200000.0, {"tokens": 100, "chars": 400, "words": 10})["word_ppl"] is None
    True
    """
    out = {"bits_per_token": None, "bits_per_char": None, "bits_per_word": None, "word_ppl": None,
           "bits_per_byte": None}
    if log2prob is None:
        return out
    bits = -float(log2prob)
    if sizes.get("tokens"):
        out["bits_per_token"] = bits / sizes["tokens"]
    if sizes.get("chars"):
        out["bits_per_char"] = bits / sizes["chars"]
    if sizes.get("words"):
        out["bits_per_word"] = bits / sizes["words"]
        # 2 ** 1024 overflows a float: a "word" of a whole line (a text without spaces) has no perplexity.
        out["word_ppl"] = 2.0 ** out["bits_per_word"] if out["bits_per_word"] < 1000 else None
    if sizes.get("bytes"):
        out["bits_per_byte"] = bits / sizes["bytes"]
    return out


def above_floor(score: Optional[dict], truth: Optional[dict]) -> Optional[dict]:
    """Distance of a model's test score above the true entropy of the same text (toy corpus)."""
    if not score or not truth or score.get("ppl") is None:
        return None
    floor_bits = truth["bits_per_token"]
    bits = score["bits_per_token"]
    return {"floor_ppl": truth["perplexity"], "floor_bits_per_token": floor_bits,
            "extra_bits_per_token": bits - floor_bits, "ppl_ratio": score["ppl"] / truth["perplexity"]}


# ---------------------------------------------------------------------------- interpolation
def mixture_bits(lam: float, a: np.ndarray, b: np.ndarray) -> float:
    """Mean -log2(lam * 2**a + (1 - lam) * 2**b): bits per token of the linear mixture."""
    with np.errstate(divide="ignore"):
        la = math.log2(lam) if lam > 0 else -math.inf
        lb = math.log2(1.0 - lam) if lam < 1 else -math.inf
    return float(-np.mean(np.logaddexp2(la + a, lb + b)))


def tune_lambda(a: np.ndarray, b: np.ndarray) -> float:
    """The weight of ``a`` in [0, 1] that minimises the mixture's bits per token.

    The objective is convex in lambda (minus the log of a function linear in lambda),
    so a bounded scalar search finds the minimum; the end points are checked too, so
    the result is never worse than either model alone.
    """
    from scipy.optimize import minimize_scalar

    res = minimize_scalar(lambda x: mixture_bits(x, a, b), bounds=(0.0, 1.0), method="bounded",
                          options={"xatol": 1e-5})
    candidates = [0.0, 1.0, float(np.clip(res.x, 0.0, 1.0))]
    return min(candidates, key=lambda x: mixture_bits(x, a, b))


def interpolate(ngram: dict, neural: dict, ngram_arrays: dict, neural_arrays: dict, sizes: dict) -> dict:
    """``p = lam * p_ngram + (1 - lam) * p_neural`` per token, lam tuned on valid, scored on test."""
    av, bv = ngram_arrays["valid"], neural_arrays["valid"]
    at, bt = ngram_arrays["test"], neural_arrays["test"]
    if len(av) != len(bv) or len(at) != len(bt):
        raise ValueError("the two models did not score the same tokens")
    lam = tune_lambda(av, bv)
    row = {
        "id": f"interp({ngram['id']}+{neural['id']})",
        "family": "interpolated",
        "model": "interpolation",
        "label": f"{lam:.2f} x {ngram['label']} + {1 - lam:.2f} x {neural['label']}",
        "order": None,
        "components": [ngram["id"], neural["id"]],
        "lambda": lam,
        "settings": {"ngram": ngram["id"], "neural": neural["id"], "tuned_on": "valid"},
        "train_seconds": (ngram["train_seconds"] or 0.0) + (neural["train_seconds"] or 0.0),
        "size": (ngram["size"] or 0) + (neural["size"] or 0),
        "size_unit": "n-gram entries + parameters",
        "note": None, "error": None, "is_distribution": True,
        "curve": [[float(x), 2.0 ** mixture_bits(float(x), av, bv)] for x in np.linspace(0.0, 1.0, 21)],
    }
    for split, (a, b) in (("valid", (av, bv)), ("test", (at, bt))):
        row[split] = score_from_bits(mixture_bits(lam, a, b), len(a))
    return row


def score_from_bits(bits: float, tokens: int, zero_probs: int = 0) -> dict:
    """A mixture's score entry (the shape every row's valid/test scores have) from its bits per token."""
    return {"tokens": tokens, "zero_probs": zero_probs, "log2prob": -bits * tokens, "ppl": 2.0 ** bits,
            "ppl_nonzero_events": 2.0 ** bits, "bits_per_token": bits}


def mixture_log2p(lam: float, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    with np.errstate(divide="ignore"):
        la = math.log2(lam) if lam > 0 else -math.inf
        lb = math.log2(1.0 - lam) if lam < 1 else -math.inf
    return np.logaddexp2(la + a, lb + b)


# ---------------------------------------------------------------------------- the passage
def choose_passage(starts: np.ndarray, max_tokens: int, gain: Optional[np.ndarray] = None,
                   max_sentences: int = 3000) -> dict:
    """A passage of whole consecutive test sentences, ``max_tokens // 2 .. max_tokens`` tokens long.

    With ``gain`` (per token, e.g. neural minus n-gram log2 p), the window where it sums
    highest -- where the models disagree most in the neural model's favour; otherwise
    the first window that fits.  Falls back to the first sentence cut to ``max_tokens``.
    """
    lengths = np.diff(starts)[:max_sentences]
    cum = np.concatenate([[0.0], np.cumsum(gain)]) if gain is not None else None
    best = None
    lo = max(1, max_tokens // 2)
    for i in range(len(lengths)):
        total = 0
        for j in range(i, len(lengths)):
            total += int(lengths[j])
            if total > max_tokens:
                break
            if total >= lo:
                a, b = int(starts[i]), int(starts[j + 1])
                score = 0.0 if cum is None else float(cum[b] - cum[a])
                if best is None or score > best["score"]:
                    best = {"start": a, "end": b, "sentences": [i, j + 1], "score": score}
                if cum is None:
                    break
        if best is not None and cum is None:
            break
    if best is None:
        a = int(starts[0])
        best = {"start": a, "end": a + min(max_tokens, int(lengths[0]) if len(lengths) else max_tokens),
                "sentences": [0, 1], "score": 0.0}
    best["rule"] = ("whole test sentences where the neural model gains most bits over the n-gram model"
                    if gain is not None else "the first whole test sentences that fit")
    return best


from ..undertrained import undertrained_reason  # noqa: E402,F401 (its old place: the rule lives on floor 1)
