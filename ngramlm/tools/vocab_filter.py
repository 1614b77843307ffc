"""Limiting a back-off model to a word list -- a recogniser's lexicon.

What ``ngramlm filter WORDS MODEL`` and ``ngramlm train --limit-vocab WORDS`` do (the n-grams KenLM's
``filter`` in single mode, SRILM's ``-limit-vocab`` and lmplz's ``--limit_vocab_file`` keep; the numbers
are ours, SRILM's are below):

* **Kept**: the n-grams all of whose words are in the list; ``<s>``, ``</s>`` and ``<unk>`` are
  always kept.  Nothing else changes in the n-gram set (no n-gram is added).  The vocabulary is the
  kept words, in the model's order (so keys stay sorted).
* **The removed words' probability goes to ``<unk>``** (the closed-vocabulary choice: a recogniser
  whose lexicon is the list hears every other word as ``<unk>``, so the model stays a distribution
  over lexicon + ``<unk>``, and ``<unk>`` gets the probability of the class it now stands for).
  Let ``R(h) = sum_{w removed} p(w|h)`` under the original model.  Then
  ``p'(<unk>) = p(<unk>) + R()`` for the unigram, and every kept ``h <unk>`` gets
  ``p'(<unk>|h) = p(<unk>|h) + R(h)``.  Every other kept probability is unchanged.
* **Back-off weights** are recomputed so each kept context sums to one over the kept vocabulary,
  ``b'(h) = (1 - sum_{w kept after h} p'(w|h)) / (1 - sum_{w kept after h} p'(w|h'))``, lower orders
  first (:func:`ngramlm.tools.pruning.renormalise_backoffs`).

Why this is the closed-vocabulary model wherever the n-grams can say so: where ``h <unk>`` is stored
(and, recursively, its suffixes' ``<unk>``), ``b'(h)`` comes out equal to ``b(h)``, so every kept word
keeps its original ``p(w|h)`` exactly and ``<unk>`` gets exactly ``p(<unk>|h) + R(h)``.  Where ``h
<unk>`` is not stored, ``R(h)`` joins the back-off mass of ``h`` and is shared, by the lower order,
among ``<unk>`` and the kept words ``h`` does not store.  A removed word in a *history* reads as
``<unk>``, whose n-grams were estimated from ``<unk>`` as the training text had it; training a
closed vocabulary (``train --unk-from-min-count``, ``--vocab``) maps the text itself instead.

**SRILM's** ``ngram -lm X -vocab WORDS -limit-vocab -write-lm`` (``compat="srilm"``, ``filter --compat
srilm``) keeps the same n-grams (``<s>``, ``</s>`` and ``<unk>`` always: its vocabulary object holds
them whatever the list says) and changes no number, back-off weights included -- it is meant to save
memory when a text is scored only over the list, and every in-list event keeps the full model's
probability; the model no longer sums to one (a removed word's probability is simply gone).  With
``-renorm`` too (``renorm=True``) it then recomputes every back-off weight (SRILM's ``recomputeBOWs``)
and hands the unigram mass the removed words leave to the listed words the model lacks, in equal
parts, or, when it lacks none, adds an equal part of it to every word's unigram probability --
``<unk>`` gets no more than any word.

``R(h)`` comes from the back-off structure, order by order (Stolcke's bookkeeping):
``R(h) = S(h) + b(h) (R(h') - L(h))``, with ``S(h)`` the stored probabilities of removed words after
``h``, ``L(h)`` their lower-order probabilities ``p(w|h')`` and ``h'`` the longest stored proper
suffix of ``h``.  Probabilities are linear here; tables hold log10.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional, Sequence

import numpy as np

from corpora.errors import InputError
from corpora.textio import read_text
from corpora.vocab import BOS_ID, N_SPECIALS, PAD_ID, UNK_ID, Vocab

from ..counts import lookup
from .pruning import ngram_words, renormalise_backoffs, score_rows
from ..scorer import Scorer
from ..smoothing import backoff_smoothers, named_list
from ..tables import NgramTables

CANONICAL_SPECIALS = ("<s>", "</s>", "<unk>")  # always kept, whatever a list says (lmplz and KenLM's filter do so too)
WORD_LIST_FIX = "give the recogniser's word list: a text file, one word a line"


# ----------------------------------------------------------------------------- the word list
def read_word_list(path: str) -> list:
    """The words of a lexicon file, one a line (blank lines and surrounding spaces ignored), in file order
    without repeats.  A line with several fields is refused: it is most likely a pronunciation lexicon,
    whose phones would otherwise be read as words."""
    p = Path(path)
    if not p.exists():
        raise InputError("no such word list", path=path, fix=WORD_LIST_FIX)
    if p.is_dir():
        raise InputError("is a directory, not a word list", path=path, fix=WORD_LIST_FIX)
    empty_fix = "put the recogniser's words in it, one a line (<s>, </s> and <unk> are kept anyway)"
    try:
        text = read_text(p)
    except InputError:
        if not p.read_bytes().strip():  # nothing but blanks: say so as a word list, with its fix
            raise InputError("the word list is empty", path=path, fix=empty_fix) from None
        raise
    words: dict = {}
    for number, line in enumerate(text.split("\n"), start=1):
        word = line.strip()
        if not word:
            continue
        if any(c.isspace() for c in word):
            raise InputError(f"the line holds more than one word: {word!r}", path=path, line=number,
                             fix="one word a line; from a pronunciation lexicon keep its first column, e.g. "
                                 "cut -d' ' -f1 lexicon.txt | sort -u > words.txt")
        words.setdefault(word, None)
    if not words:
        raise InputError("the word list is empty", path=path, fix=empty_fix)
    return list(words)


# ----------------------------------------------------------------------------- checks
def check_limitable(model, *, name: Optional[str] = None) -> None:
    """An :class:`InputError` naming the file when ``model`` is not a back-off distribution."""
    if model.kind_ != "backoff" or not model.is_distribution_:
        raise InputError(f"{model.smoother_name_} is not a back-off distribution, so it cannot be limited to a "
                         "word list with renormalised back-off weights", path=name,
                         fix=f"use a model smoothed with {named_list(backoff_smoothers())}")


def check_limitable_smoother(smoother) -> None:
    """An :class:`InputError` before any work when ``smoother`` makes no back-off distribution."""
    if smoother.name not in backoff_smoothers():
        raise InputError(f"--limit-vocab renormalises back-off weights, and {smoother.name} does not make a back-off "
                         "distribution", fix=f"train with --smoothing {named_list(backoff_smoothers())}")


@dataclass
class VocabLimit:
    """The limited model's tables and what the limiting did."""

    tables: NgramTables
    listed: int  # distinct words in the list, specials included
    kept_words: int  # words of the list that the model has (specials not counted)
    removed_words: int  # words of the model not in the list
    missing: list = field(default_factory=list)  # words of the list the model lacks
    ngrams_before: list = field(default_factory=list)
    ngrams_after: list = field(default_factory=list)
    unk_prob_before: float = 0.0  # unigram p(<unk>), linear
    unk_prob_after: float = 0.0  # unigram p(<unk>) + the removed words' unigram probability
    method: str = "closed"  # "lmplz": pruned inside the estimation, numbers left as estimated; "srilm":
    # SRILM's -limit-vocab, numbers left as they were; "srilm-renorm": then SRILM's -renorm

    def to_dict(self) -> dict:
        return {"listed": self.listed, "kept_words": self.kept_words, "removed_words": self.removed_words,
                "missing_words": len(self.missing), "ngrams_before": self.ngrams_before,
                "ngrams_after": self.ngrams_after, "unk_prob_before": self.unk_prob_before,
                "unk_prob_after": self.unk_prob_after, "method": self.method}


def _specials(vocab: Vocab) -> set:
    return set(CANONICAL_SPECIALS) | {vocab.bos_token, vocab.eos_token, vocab.unk_token, vocab.pad_token}


def kept_ids(vocab: Vocab, words: Sequence[str], *, source: Optional[str] = None) -> tuple:
    """(bool mask over the model's ids: kept, words of the list the model lacks).  Raises an
    :class:`InputError` naming ``source`` when no word of the list is a word of the model."""
    specials = _specials(vocab)
    listed = [w for w in words if w not in specials]
    keep = np.zeros(len(vocab), dtype=bool)
    keep[:N_SPECIALS] = True  # <pad> (a structural row, never written), <s>, </s>, <unk>
    stoi = vocab.stoi_
    ids = [stoi[w] for w in listed if w in stoi]
    keep[ids] = True
    missing = [w for w in listed if w not in stoi]
    if not ids:
        shown = ", ".join(repr(w) for w in listed[:3]) or "only <s>, </s>, <unk>"
        model_words = ", ".join(repr(w) for w in vocab.itos_[N_SPECIALS:N_SPECIALS + 3])
        folded = {w.lower() for w in vocab.itos_[N_SPECIALS:]}
        n_case = sum(1 for w in listed if w.lower() in folded)
        hint = f"; {n_case} of them match when case is ignored: the list's casing differs" if n_case else ""
        raise InputError(f"no word of the list is a word of the model ({len(listed)} words, e.g. {shown}; the "
                         f"model's are e.g. {model_words}){hint}", path=source,
                         fix="spell the words as the model's training text does (its tokenization and casing), "
                             "one a line")
    return keep, missing


# ----------------------------------------------------------------------------- the removed mass
def _rows_of(model, ids: np.ndarray) -> np.ndarray:
    """Row of each n-gram (a row of ``ids``) in its order of ``model``, -1 when not stored."""
    V = len(model.vocab_)
    row = np.asarray(ids[:, 0], dtype=np.int64)
    for j in range(1, ids.shape[1]):
        row = lookup(model.keys_[j], np.where(row >= 0, row * V + ids[:, j], -1))
    return row


def removed_mass(model, removed: np.ndarray) -> list:
    """``R[j]``: for each row of order j of ``model`` taken as a context h, ``sum_{w removed} p(w|h)``
    (linear probability); ``R[0]`` is a one-element array, the unigram sum.  ``removed``: bool per id."""
    V = len(model.vocab_)
    p1 = 10.0 ** np.asarray(model.log10_prob_[0], dtype=np.float64)
    R = [np.array([float(p1[removed].sum())])]
    for j in range(1, model.order_):
        ctx = ngram_words(model, j)
        # R of the longest stored proper suffix h' (a context that is not stored backs off with weight
        # one and stores nothing, so its R is that of its own suffix).
        r_suffix = np.full(len(ctx), R[0][0])
        todo = np.ones(len(ctx), dtype=bool)
        for s in range(1, j):
            idx = np.flatnonzero(todo)
            rows = _rows_of(model, ctx[idx, s:])
            hit = rows >= 0
            r_suffix[idx[hit]] = R[j - s][rows[hit]]
            todo[idx[hit]] = False
        keys = np.asarray(model.keys_[j], dtype=np.int64)
        sel = np.flatnonzero(removed[keys % V])  # stored (j+1)-grams ending in a removed word
        parent = keys[sel] // V
        stored = 10.0 ** np.asarray(model.log10_prob_[j], dtype=np.float64)[sel]
        lower = 10.0 ** score_rows(model, np.column_stack([ctx[parent, 1:], keys[sel] % V]))
        S = np.bincount(parent, weights=stored, minlength=len(ctx))
        L = np.bincount(parent, weights=lower, minlength=len(ctx))
        b = 10.0 ** np.asarray(model.log10_backoff_[j - 1], dtype=np.float64)
        R.append(S + b * np.maximum(r_suffix - L, 0.0))  # R(h') >= L(h): L sums part of R(h')'s terms
    return R


# ----------------------------------------------------------------------------- limiting
def limited_vocab(vocab: Vocab, keep: np.ndarray, *, extra: Sequence[str] = ()) -> Vocab:
    """``vocab`` restricted to the kept ids (in their order), then the ``extra`` words; the removed words'
    training counts stay as counts of words cut from the vocabulary, so the accounting of ``<unk>``
    stays right."""
    v = Vocab(min_count=vocab.min_count, max_size=vocab.max_size, unk_token=vocab.unk_token,
              bos_token=vocab.bos_token, eos_token=vocab.eos_token, pad_token=vocab.pad_token,
              tokenizer=vocab.tokenizer)
    v.itos_ = [w for w, k in zip(vocab.itos_, keep) if k] + list(extra)
    v.stoi_ = {w: i for i, w in enumerate(v.itos_)}
    counts = dict(getattr(vocab, "counts_", None) or {})
    v.counts_ = counts
    v.n_train_tokens_ = int(getattr(vocab, "n_train_tokens_", 0) or 0)
    dropped = sum(int(counts.get(w, 0)) for w, k in zip(vocab.itos_, keep) if not k)
    v.n_train_unk_ = int(getattr(vocab, "n_train_unk_", 0) or 0) + dropped
    v.n_corpus_unk_ = int(getattr(vocab, "n_corpus_unk_", 0) or 0)
    return v


def limit_vocabulary(model, *, words: Sequence[str], source: Optional[str] = None, lmplz: bool = False,
                     compat: Optional[str] = None, renorm: bool = False) -> VocabLimit:
    """``model`` (a back-off :class:`~ngramlm.scorer.Scorer`) limited to ``words``: see the module's docstring.
    ``source`` names the list in errors.

    ``lmplz=True``: only drop the n-grams outside the list and keep every number as it is -- for a
    model estimated with those n-grams pruned inside the estimation (``NgramLM(compat="kenlm")
    .fit(..., limit_vocab=...)``, lmplz's ``--limit_vocab_file``), whose back-off weights already hold
    the pruned mass.

    ``compat="srilm"``: SRILM's ``ngram -limit-vocab`` -- the same n-grams kept, every number as it was
    (the module's docstring); with ``renorm=True`` also SRILM's ``-renorm`` (its back-off weights, and
    the leftover unigram mass to the listed words the model lacks, which join the vocabulary)."""
    check_limitable(model)
    if compat not in (None, "srilm"):
        raise InputError(f"unknown --limit-vocab convention {compat!r}", fix="use compat=None (ours) or 'srilm'")
    if renorm and compat != "srilm":
        raise InputError("renorm is SRILM's -renorm, which only follows its -limit-vocab",
                         fix="pass compat='srilm' with renorm=True (ours always renormalises)")
    if lmplz and compat is not None:
        raise InputError("lmplz=True and compat='srilm' are two conventions", fix="choose one")
    srilm = compat == "srilm"
    vocab = model.vocab_
    keep_word, missing = kept_ids(vocab, words, source=source)
    removed = ~keep_word
    R = None if (lmplz or srilm) else removed_mass(model, removed)
    V = len(vocab)
    new_id = np.cumsum(keep_word) - 1  # old id -> new id (where kept)
    V2 = int(keep_word.sum())
    # Order 1.
    lp1 = np.asarray(model.log10_prob_[0], dtype=np.float64)[keep_word].copy()
    unk_before = float(10.0 ** lp1[UNK_ID])
    unk_after = unk_before
    if R is not None:
        unk_after += float(R[0][0])
        with np.errstate(divide="ignore"):
            lp1[UNK_ID] = np.log10(unk_after)
    lp1[[PAD_ID, BOS_ID]] = -np.inf  # never predicted
    keys = [np.arange(V2, dtype=np.int64)]
    probs = [lp1]
    backoffs = []
    keep_prev = keep_word
    for k in range(2, model.order_ + 1):
        old = np.asarray(model.keys_[k - 1], dtype=np.int64)
        parent, last = old // V, old % V
        keep = keep_prev[parent] & keep_word[last]
        new_row = np.cumsum(keep_prev) - 1
        # Compaction keeps the order (rows and ids are renumbered monotonically), so keys stay sorted.
        keys.append(new_row[parent[keep]] * V2 + new_id[last[keep]])
        lp = np.asarray(model.log10_prob_[k - 1], dtype=np.float64)[keep].copy()
        if R is not None:
            unk = last[keep] == UNK_ID
            with np.errstate(divide="ignore"):
                lp[unk] = np.log10(10.0 ** lp[unk] + R[k - 1][parent[keep][unk]])
        probs.append(lp)
        backoffs.append(np.asarray(model.log10_backoff_[k - 2], dtype=np.float64)[keep_prev])
        keep_prev = keep
    backoffs.append(np.zeros(0))  # the top order has no back-off weights
    # SRILM's -renorm: the listed words the model lacks are words of its vocabulary without a
    # probability, the ones recomputeBOWs gives the unigram mass the removed words leave.
    extra = list(missing) if renorm else []
    if extra:
        V3 = V2 + len(extra)
        keys = [np.arange(V3, dtype=np.int64)] + [(k // V2) * V3 + k % V2 for k in keys[1:]]
        probs[0] = np.concatenate([probs[0], np.full(len(extra), -np.inf)])
        if model.order_ > 1:  # (a unigram model's only back-off list is the empty top order's)
            backoffs[0] = np.concatenate([backoffs[0], np.zeros(len(extra))])
    before = [int(n) for n in model.n_ngrams_]
    t = model.tables_
    tables = NgramTables(vocab=limited_vocab(vocab, keep_word, extra=extra), kind="backoff", keys=keys,
                         n_ngrams=[len(keys[0]) - 1] + [len(x) for x in keys[1:]], smoother_name=t.smoother_name,
                         smoother_params=dict(t.smoother_params), info=dict(t.info),
                         # (SRILM's plain -limit-vocab sums to less than one, but it is a back-off model
                         # of probabilities that an ARPA file holds, which is what this flag says.)
                         is_distribution=True, count_of_counts=list(t.count_of_counts),
                         log10_prob=probs, log10_backoff=backoffs, missing_backoff=0.0)
    if renorm:
        tables = renormalise_backoffs(Scorer(tables), compat="srilm")
        unk_after = float(10.0 ** tables.log10_prob[0][UNK_ID])
    elif not (lmplz or srilm):
        tables = renormalise_backoffs(Scorer(tables))
    after = [int(n) for n in tables.n_ngrams]
    method = "lmplz" if lmplz else ("srilm-renorm" if renorm else "srilm") if srilm else "closed"
    result = VocabLimit(tables=tables, listed=len(set(words)), kept_words=int(keep_word.sum()) - N_SPECIALS,
                        removed_words=int(removed.sum()), missing=missing, ngrams_before=before,
                        ngrams_after=after, unk_prob_before=unk_before, unk_prob_after=unk_after,
                        method=method)
    result.tables = tables.replace(info=dict(tables.info, vocab_limit=dict(result.to_dict(), source=source)))
    return result
