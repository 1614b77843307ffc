"""One perplexity accounting and one summary format for every model the toolkit scores.

n-gram models (native or ARPA) and neural checkpoints produce per-token log10
probabilities of the same events (every word and every ``</s>``, never ``<s>``); this
module turns them into the KenLM/SRILM summary -- sentences, words, OOVs, zero-probability
events, total log10 probability, perplexity with and without OOVs, SRILM's ppl1 -- and
prints it the same way for all of them (``ngramlm ppl``), or as JSON for machines.

Conventions (the same as KenLM's ``query`` and SRILM's ``ngram -ppl``): an OOV is a text
word that is not a vocabulary type (mapped to ``<unk>``); a literal ``<unk>`` in the text
counts as OOV unless the training text itself contained ``<unk>`` as a word (PTB does:
there ``<unk>`` is an ordinary type, as lmplz treats it).  Zero-probability events (an
MLE model's unseen n-grams) are counted and left out of the perplexity.
"""
from __future__ import annotations

import itertools
import math
from dataclasses import dataclass
from typing import Iterable, Optional, Sequence

import numpy as np

from .vocab import UNK_ID

LOG2_10 = math.log2(10.0)


@dataclass
class PerplexityReport:
    """What KenLM's ``query -v summary`` and SRILM's ``ngram -ppl`` report."""

    sentences: int
    words: int  # word tokens (sentence ends excluded)
    tokens: int  # predicted tokens = words + sentence ends
    oovs: int
    zero_probs: int  # events with probability 0 (MLE), left out of log10_prob and ppl
    log10_prob: float  # total over non-zero events, OOVs included
    ppl: float  # including OOVs (KenLM "Perplexity including OOVs")
    ppl_excluding_oovs: float
    ppl1: float  # SRILM's ppl1: sentence ends left out of the denominator

    @property
    def bits_per_token(self) -> float:
        return math.log2(self.ppl) if self.ppl > 0 and math.isfinite(self.ppl) else float("inf")

    def to_dict(self) -> dict:
        d = dict(self.__dict__)
        d["bits_per_token"] = self.bits_per_token
        return d


def oov_flags(vocab, sentences: Iterable[Sequence[str]]) -> np.ndarray:
    """One flag per predicted token (each word, then the sentence's ``</s>``): True for an OOV word."""
    stoi = vocab.stoi_
    unk_is_type = bool(vocab.n_corpus_unk_)  # <unk> was a word of the training text (PTB)
    unk = vocab.unk_token
    flags = []
    for s in sentences:
        flags.extend((t not in stoi) or (t == unk and not unk_is_type) for t in s)
        flags.append(False)
    return np.asarray(flags, dtype=bool)


def encode_with_oov(vocab, sentences: Sequence[Sequence[str]]) -> tuple:
    """``vocab.encode_sentences(sentences)`` and :func:`oov_flags` of the same sentences, the flags
    read off the ids (one pass over the words, not two): a word is OOV where it became ``<unk>``,
    unless it is ``<unk>`` itself and ``<unk>`` was a word of the training text (PTB)."""
    sentences = sentences if isinstance(sentences, list) else list(sentences)
    enc = vocab.encode_sentences(sentences)
    oov = enc.ids == UNK_ID
    if vocab.n_corpus_unk_ and oov.any():
        at = np.flatnonzero(oov)
        word = at - (np.searchsorted(enc.starts, at, side="right") - 1)  # less one </s> per earlier sentence
        flat = list(itertools.chain.from_iterable(sentences))
        unk = vocab.unk_token
        oov[at[np.fromiter((flat[i] == unk for i in word.tolist()), dtype=bool, count=len(at))]] = False
    return enc, oov


def _ppl(total_log10: float, n: int) -> float:
    """10 ** (-total / n), inf where it overflows (a probability below 1e-308 per token is not an error)."""
    if n <= 0:
        return float("inf")
    e = -total_log10 / n
    return float("inf") if e > 308 else 10.0 ** e


def report_from_log10(log10_probs: np.ndarray, oov: np.ndarray, n_sentences: int) -> PerplexityReport:
    """The summary of per-token log10 probabilities (``-inf`` = probability 0) and OOV flags."""
    lp = np.asarray(log10_probs, dtype=np.float64)
    oov = np.asarray(oov, dtype=bool)
    finite = np.isfinite(lp)
    zero = int(np.count_nonzero(~finite))
    total = float(lp[finite].sum())
    n_tok = len(lp)
    counted = n_tok - zero
    ppl = _ppl(total, counted)
    ex = finite & ~oov
    n_ex = int(np.count_nonzero(ex))
    ppl_ex = _ppl(float(lp[ex].sum()), n_ex)
    denom1 = counted - n_sentences
    ppl1 = _ppl(total, denom1)
    return PerplexityReport(sentences=n_sentences, words=n_tok - n_sentences, tokens=n_tok,
                            oovs=int(np.count_nonzero(oov)), zero_probs=zero, log10_prob=total, ppl=ppl,
                            ppl_excluding_oovs=ppl_ex, ppl1=ppl1)


def _num(x, digits: int = 2) -> str:
    """A number as SRILM/KenLM print it: no thousands separators (parsers split on spaces and read floats)."""
    if x is None:
        return "n/a"
    if not math.isfinite(x):
        return "inf" if x > 0 else "-inf"
    s = f"{x:.{digits}f}"
    return s[1:] if s.startswith("-") and float(s) == 0 else s  # never "-0.00"


def _unspaced_cjk(sentences) -> bool:
    """Whether most words of (the first 200 of) ``sentences`` are runs of 4+ characters with Chinese or
    Japanese script in them: text written without spaces, cut on whitespace into a line a word."""
    import itertools
    import re

    cjk = re.compile(r"[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff]")
    sample = [w for s in itertools.islice(sentences, 200) for w in s]
    long_cjk = sum(1 for w in sample if len(w) >= 4 and cjk.search(w))
    return bool(sample) and 2 * long_cjk > len(sample)


def oov_warning(vocab, d: dict, sentences=None):
    """A warning when more than half the words of a scored text are out of vocabulary, saying what
    ``<unk>`` stands for in this model (else None).  A text of unknown words can score a *low*
    perplexity -- on PTB every OOV is the frequent training word ``<unk>`` -- which is no result.
    With the text's ``sentences`` (token lists), Chinese or Japanese cut on spaces gets a hint."""
    words, oovs = int(d.get("words") or 0), int(d.get("oovs") or 0)
    if not words or 2 * oovs <= words:
        return None
    unk = vocab.unk_token
    if getattr(vocab, "n_corpus_unk_", 0):
        meaning = (f"the training text itself contains {unk} as a word ({vocab.n_corpus_unk_} times), so every "
                   f"OOV gets the probability learned for that word, and a low perplexity says nothing about this text")
    elif getattr(vocab, "n_train_unk_", 0):
        meaning = (f"{unk} stands for the {vocab.n_train_unk_} training tokens cut by min_count/max_size, "
                   "so every OOV is scored as one of those rare words")
    else:
        meaning = f"{unk} never occurred in training, so every OOV gets only the model's share for unseen words"
    hint = "Check that the text, its tokenizer and its casing match the model's training text."
    if sentences is not None and _unspaced_cjk(sentences):
        hint = ("The text looks like Chinese or Japanese written without spaces, so cutting it on whitespace made "
                "each line one word: use a model trained with --tokenizer char (or cjk), e.g. `ngramlm train "
                "hongloumeng --tokenizer char`, on text in the same script.")
    return (f"{oovs} of {words} words ({100.0 * oovs / words:.0f} %) are out of vocabulary and scored as {unk}: "
            f"{meaning}. {hint}")


def add_bytes(d: dict, n_bytes: Optional[int]) -> dict:
    """``d`` (a report dict) with the text's UTF-8 ``bytes`` and ``bits_per_byte``: the total bits of every
    predicted token over the bytes of the text (infinite, reported as None, when an event has probability 0),
    comparable across tokenizations of the same text."""
    if n_bytes:
        d["bytes"] = int(n_bytes)
        bits = -d["log10_prob"] * LOG2_10 if not d.get("zero_probs") else None
        d["bits_per_byte"] = None if bits is None else bits / n_bytes
    return d


def format_report(d: dict) -> str:
    """The human summary (rounded to sensible digits) of a report dict (``to_dict()`` plus
    ``model``, ``text`` and ``describe``: what the model is; ``warning`` when there is one).  The
    numbers are printed as SRILM's ``ngram -ppl`` and KenLM's ``query`` print them, so their
    parsers read this output."""
    lines = [
        f"model {d.get('model', '?')}" + (f" ({d['describe']})" if d.get("describe") else ""),
        f"file {d.get('text', '?')}: {d['sentences']} sentences, {d['words']} words, {d['oovs']} OOVs",
        f"{d['zero_probs']} zeroprobs, logprob= {_num(d['log10_prob'])} ppl= {_num(d['ppl'])} "
        f"ppl1= {_num(d['ppl1'])}",
        f"Perplexity including OOVs:\t{_num(d['ppl'])}",
        f"Perplexity excluding OOVs:\t{_num(d['ppl_excluding_oovs'])}",
        f"Tokens predicted:\t{d['tokens']}  (words + sentence ends; <s> is never predicted)",
        f"Bits per token:\t{_num(d['bits_per_token'], 4)}",
    ]
    if d.get("bytes"):
        lines.append(f"Bits per byte:\t{_num(d['bits_per_byte'], 4)}  ({d['bytes']} UTF-8 bytes, one per sentence end)")
    if d.get("warning"):
        lines.append(f"Warning: {d['warning']}")
    return "\n".join(lines)
