"""A query object with the ``kenlm`` module's Python API, over any back-off model the toolkit reads.

Code written against ``import kenlm`` runs unchanged with ``from ngramlm import Model, State``::

    m = Model("lm.arpa")                       # ARPA (plain or .gz) or the native .npz, by content
    m.score("the cat sat", bos=True, eos=True) # log10 p of the sentence
    list(m.full_scores("the cat sat"))         # (log10 p, n-gram length, oov) per word and </s>
    m.perplexity("the cat sat"), m.order, "cat" in m
    s, t = State(), State()                    # the incremental API beam-search decoders use
    m.BeginSentenceWrite(s)
    lp = m.BaseScore(s, "the", t)              # log10 p(the | <s>); t is the state after "the"

Every number is log10, as in KenLM.  The conventions are KenLM's: a sentence is split on
whitespace; ``oov`` is True for a word the vocabulary does not have *and* for a literal
``<unk>`` (KenLM maps both to its unknown word); ``perplexity`` counts the words plus
``</s>``.

How a state works: it holds, for each length ``L`` up to ``order - 1``, the row of the
history's last ``L`` words in the order-``L`` table, as far as those n-grams exist (a
longer history that is not an n-gram of the model can neither be extended nor carry a
back-off weight other than 1, so dropping it changes no score -- KenLM minimises its
states the same way), plus the history length (for models whose missing contexts carry
a weight).  Two states are equal exactly when every later score from them is equal, and
they hash accordingly, so they can key a decoder's recombination table.

Two implementations give the same numbers: with the compiled extension (``ngramlm.accel``)
``State`` is a C struct and ``BaseScore`` runs in C over the model's hash tables; without it,
``State`` is :class:`~ngramlm.kenlm.api.PyState` and the tables are Python dicts built on the first call.
``State`` is defined once, in :mod:`ngramlm.kenlm.api`, for this model and :mod:`ngramlm.kenlm` alike.
"""
from __future__ import annotations

import math
import os
from typing import Iterator, Optional

import numpy as np

from corpora.errors import InputError, ModelFileError
from corpora.vocab import BOS_ID, EOS_ID, UNK_ID

from .kenlm.api import FullScoreReturn, State
from .loading import load_any
from .scorer import Scorer
from .smoothing import backoff_smoothers, named_list


class Model:
    """The kenlm.Model API over a back-off model: an ARPA or native file, :class:`NgramTables`
    (``tables=``), or a fitted :class:`NgramLM` (``lm=``).  ``self.lm`` is a
    :class:`~ngramlm.scorer.Scorer` of its own over the model's tables: the hash index it builds is
    never put on the caller's object."""

    def __init__(self, path: Optional[os.PathLike | str] = None, config=None, *, lm=None, tables=None,
                 index: bool = True) -> None:
        if sum(x is not None for x in (path, lm, tables)) != 1:
            raise InputError("give one of a model path, tables= or lm=", fix="Model('lm.arpa')")
        self.path = None if path is None else os.fspath(path)
        if lm is not None:
            lm._check_fitted()
            tables = lm.tables_
        try:
            self.lm = Scorer(tables) if tables is not None else load_any(path)
        except ModelFileError:
            raise
        except InputError as e:  # missing, unreadable or damaged: an OSError too, as kenlm raises
            raise ModelFileError.from_input_error(e) from None
        if self.lm.kind_ != "backoff":
            raise InputError(f"a {self.lm.smoother_name_} model is not a back-off model, which the kenlm API scores",
                             path=self.path, fix=f"use a model smoothed with {named_list(backoff_smoothers())}")
        probs = getattr(self.lm, "log10_prob_", None)  # None: a KenLM binary searched in place
        lp1 = probs[0] if probs is not None and getattr(self.lm, "search", None) is None else None
        if isinstance(lp1, np.ndarray) and BOS_ID < len(lp1) and np.isneginf(lp1[BOS_ID]):
            # <s> as a word scores what an ARPA file (and so kenlm) gives it, -99, not -inf: kenlm code
            # that passes "<s> ..." with bos=True gets kenlm's finite total.  The scorer's own tables
            # (ppl, score) keep the model's -inf; this is one more unigram column, nothing else.
            lp1 = lp1.copy()
            lp1[BOS_ID] = -99.0
            t = self.lm.tables_
            self.lm = Scorer(t.replace(log10_prob=[lp1] + list(t.log10_prob[1:])))
        self.tables = self.lm.tables_
        self._stoi = self.lm.vocab_.stoi_
        self._tables = None  # the Python state API's dicts, built on its first call
        self._fast = None
        if index:  # the scorer's hash index, built now rather than behind a later call
            self.lm.build_index()
            self._fast = self.lm.compiled_tables()
        if getattr(self.lm, "search", None) is not None and self._fast is None:
            # A KenLM probing binary without the compiled path: the state API probes its hash tables
            # in Python (the state holds word ids, most recent first, as KenLM's does).
            self._score = self._probing_score
        if self._fast is not None:
            # The state API straight into C: bound methods as instance attributes, so a call
            # costs no Python frame (beam-search decoders make millions of them).
            self.BaseScore = self._fast.base_score
            self._score = self._fast.score_ids

    # ------------------------------------------------------------------ kenlm.Model attributes
    @property
    def order(self) -> int:
        return int(self.lm.order_)

    def __contains__(self, word: str) -> bool:
        # kenlm: a word is in the model when its index is not the unknown word's.
        return self._stoi.get(word, UNK_ID) != UNK_ID

    def __repr__(self) -> str:
        return f"<ngramlm.Model from {self.path or 'an NgramLM'}: order {self.order}>"

    # ------------------------------------------------------------------ tables
    def _build(self) -> None:
        lm = self.lm
        n = lm.order_
        V = len(lm.vocab_)
        # Per order: packed key (context row * V + word) -> row; unigram rows are word ids.
        gets = [None] + [dict(zip(lm.keys_[k].tolist(), range(len(lm.keys_[k])))).get for k in range(1, n)]
        probs = [p.tolist() for p in lm.log10_prob_]
        backs = [b.tolist() for b in lm.log10_backoff_]
        missing = float(lm.missing_backoff_)
        # KenLM's state minimisation: a context that no longer n-gram extends and whose back-off
        # weight is 1 (log10 0) scores exactly like its shorter suffix, so a state drops it and
        # the next call skips a lookup that could only miss.  (Not where a missing context
        # carries a weight, as in stupid backoff: there the history length matters.)
        keep = [None] * n
        if missing == 0.0:
            keep = [None] + [x.tolist() for x in self.tables.extended_rows()[1:]]
        self._tables = (V, n, gets, probs, backs, missing, keep)
        self._closed = self.tables.is_suffix_closed()

    # ------------------------------------------------------------------ the state API
    def BeginSentenceWrite(self, state: State) -> None:
        state.rows, state.hist = ((BOS_ID,), 1) if self.order > 1 else ((), 0)

    def NullContextWrite(self, state: State) -> None:
        state.rows, state.hist = (), 0

    def BaseScore(self, in_state: State, word: str, out_state: State) -> float:
        """log10 p(word | in_state); ``out_state`` becomes the state after ``word``."""
        return self._score(in_state, self._stoi.get(word, UNK_ID), out_state)[0]

    def BaseFullScore(self, in_state: State, word: str, out_state: State) -> FullScoreReturn:
        wid = self._stoi.get(word, UNK_ID)
        lp, length = self._score(in_state, wid, out_state)
        return FullScoreReturn(lp, length, wid == UNK_ID)

    def _score(self, state, w: int, out) -> tuple:
        """(log10 p, matched length) of word id ``w`` after ``state``; ``out`` becomes the next state."""
        if self._tables is None:
            self._build()
        V, n, gets, probs, backs, missing, keep = self._tables
        rows = state.rows
        j = len(rows)
        # new[L-1]: row of (last L-1 history words, w) in the order-L table; -1 where that is not an
        # n-gram.  A pruned model can keep "a b c" without "b c", so the search goes on past a miss,
        # and a state row may be -1 below rows that exist (the C path does the same).
        new = [w]
        m = 1
        for L in range(2, j + 2):
            r = gets[L - 1](rows[L - 2] * V + w) if rows[L - 2] >= 0 else None
            new.append(-1 if r is None else r)
            if r is not None:
                m = L
            elif self._closed:
                break
        lp = probs[m - 1][new[m - 1]]
        # Back-off weights of every context longer than the match's (log10: added).
        for i in range(m, state.hist + 1):
            lp += backs[i - 1][rows[i - 1]] if i <= j and rows[i - 1] >= 0 else missing
        del new[max(m, 1):]
        if len(new) >= n:
            del new[n - 1:]
        if missing == 0.0:
            while new and (new[-1] < 0 or not keep[len(new)][new[-1]]):
                new.pop()
            out.rows = tuple(new)
            out.hist = len(new)
        else:
            out.rows = tuple(new)
            out.hist = min(state.hist + 1, n - 1)
        return lp, m

    def _probing_score(self, state, w: int, out) -> tuple:
        to_k = self.lm.to_kenlm
        lp, m, words = self.lm.search.state_score(tuple(int(to_k[r]) for r in state.rows), int(to_k[w]))
        # Back from KenLM ids to ours: the state's words are ours (the first is w itself).
        out.rows = (w,) + tuple(state.rows[:len(words) - 1]) if words else ()
        out.hist = len(out.rows)
        return lp, m

    # ------------------------------------------------------------------ sentences
    def full_scores(self, sentence: str, bos: bool = True, eos: bool = True) -> Iterator[tuple]:
        """``(log10 p, n-gram length, oov)`` for every word of ``sentence`` (and ``</s>`` with ``eos``)."""
        if self._fast is not None:
            return iter(self._fast.sentence(sentence.split(), bos, eos, BOS_ID, EOS_ID, True))
        return self._full_scores(sentence, bos, eos)

    def _full_scores(self, sentence: str, bos: bool, eos: bool) -> Iterator[tuple]:
        s, t = State(), State()
        (self.BeginSentenceWrite if bos else self.NullContextWrite)(s)
        get = self._stoi.get
        ids = [get(word, UNK_ID) for word in sentence.split()]
        if eos:
            ids.append(EOS_ID)
        for wid in ids:
            lp, length = self._score(s, wid, t)
            yield lp, length, wid == UNK_ID
            s, t = t, s

    def score(self, sentence: str, bos: bool = True, eos: bool = True) -> float:
        """Total log10 probability of ``sentence``."""
        if self._fast is not None:
            return self._fast.sentence(sentence.split(), bos, eos, BOS_ID, EOS_ID, False)
        return float(sum(lp for lp, _, _ in self._full_scores(sentence, bos, eos)))

    def perplexity(self, sentence: str) -> float:
        """10 ** (-score / (words + 1)): the sentence end counts, as in kenlm."""
        n = len(sentence.split()) + 1
        return math.pow(10.0, -self.score(sentence) / n)

    def score_array(self, sentences) -> np.ndarray:
        """log10 of many sentences at once (vectorized; the same numbers as :meth:`score`)."""
        sents = [s.split() for s in sentences]
        enc = self.lm.vocab_.encode_sentences(sents)
        return self.lm.sentence_log10_probs(enc)
