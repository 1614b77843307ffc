"""The arrays a batched next-token distribution needs, from any back-off model the toolkit reads.

A decoder that fuses an n-gram model with a neural one wants, for many histories at once, the whole
distribution ``p(. | h)`` over the vocabulary.  :meth:`~ngramlm.scorer.Scorer.next_probs` answers one
history by scoring ``V`` continuations; the arrays here let a caller compute it for a batch by the
back-off recursion itself, order by order, as plain gathers and scatters (``fusion.tensor`` does it in
torch).  This module is numpy only -- the count package never imports torch -- and hands out views of
the model's own arrays wherever it can, so the tensor form costs about the model's size.

Two forms, after what a model file stores:

* :class:`NextTable` -- any model whose n-grams can be listed (ARPA, native, a KenLM *trie* decoded,
  a static mixture, a pruned model).  The tables' layout already is a trie in sorted arrays: an
  order-``k+1`` key is ``context row * V + word``, and keys are sorted, so the children of context row
  ``r`` of order ``k`` are the contiguous rows ``child_start[k][r] : child_start[k][r + 1]`` of order
  ``k+1`` -- a CSR index computed here with one ``searchsorted`` per order.
* :class:`ProbingTable` -- a KenLM *probing* binary, which stores only 64-bit hashes of its n-grams,
  so nothing can be listed: its hash tables are handed over as flat columns (keys, log10 p with
  KenLM's "extends left" flag split off, log10 back-off), and the distribution is computed by probing
  them for every candidate word, as KenLM's own lookup does for one.

:func:`next_table` takes a model file or a loaded model and returns the right one.
"""
from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Optional, Union

import numpy as np

from corpora.errors import InputError
from corpora.vocab import Vocab

from .kenlm.probing import ProbingScorer
from .kenlm.trie import TrieScorer
from .loading import load_any
from .scorer import CompactScorer, Scorer
from .smoothing import backoff_smoothers, named_list
from .tables import NgramTables


@dataclass
class NextTable:
    """A back-off model as the arrays of its next-token recursion (numbers are log10, as in the tables).

    ``log10_prob[k-1]`` / ``log10_backoff[k-1]``: per row of order ``k`` (the model's own arrays);
    ``keys[k-1]``: the sorted packed keys of order ``k`` (``context row * V + word``);
    ``child_start[k-1]`` (``k = 1 .. order-1``): ``N_k + 1`` offsets, the children of order-``k`` row
    ``r`` being rows ``child_start[k-1][r] : child_start[k-1][r+1]`` of order ``k+1``.
    ``missing_backoff``: the log10 weight of a context the model does not store (0 for every
    distribution; stupid backoff's penalty otherwise)."""

    vocab: Vocab
    keys: list
    log10_prob: list
    log10_backoff: list
    child_start: list
    missing_backoff: float
    is_distribution: bool
    source: str
    float32_sums: bool = False  # a KenLM binary: float32 values, which its scorer (as KenLM) sums in float32

    @property
    def order(self) -> int:
        return len(self.keys)

    @property
    def V(self) -> int:
        return len(self.vocab)

    @property
    def nbytes(self) -> int:
        return sum(int(a.nbytes) for col in (self.keys, self.log10_prob, self.log10_backoff, self.child_start)
                   for a in col)


@dataclass
class ProbingTable:
    """A KenLM probing binary's hash tables as flat columns (views of the mapped file where the file's
    record layout allows, copies of the split columns otherwise).

    ``to_kenlm``: our word id -> KenLM's; ``unigram_log10_prob`` / ``unigram_backoff`` /
    ``unigram_extends``: per KenLM word id; per order ``k >= 2`` (index ``k-2``): ``keys`` (the 64-bit
    hashes as int64 bit patterns; 0 marks an empty bucket), ``log10_prob``, ``extends`` (KenLM keeps
    "some longer n-gram ends with this one" in the sign bit of the stored probability) and, below the
    top order, ``log10_backoff``."""

    vocab: Vocab
    order: int
    to_kenlm: np.ndarray
    unigram_log10_prob: np.ndarray
    unigram_backoff: np.ndarray
    unigram_extends: np.ndarray
    keys: list
    log10_prob: list
    extends: list
    log10_backoff: list
    source: str

    @property
    def V(self) -> int:
        return len(self.vocab)

    @property
    def nbytes(self) -> int:
        cols = [self.to_kenlm, self.unigram_log10_prob, self.unigram_backoff, self.unigram_extends,
                *self.keys, *self.log10_prob, *self.extends, *self.log10_backoff]
        return sum(int(a.nbytes) for a in cols)


def child_offsets(keys_next: np.ndarray, n_rows: int, V: int) -> np.ndarray:
    """CSR offsets of the children of every row of an order into the next order's sorted keys: row ``r``'s
    children are the keys in ``[r * V, (r + 1) * V)``, found by one vectorised binary search."""
    bounds = np.arange(n_rows + 1, dtype=np.int64) * np.int64(V)
    return np.searchsorted(keys_next, bounds, side="left").astype(np.int64)


def from_tables(tables: NgramTables, source: str = "") -> NextTable:
    """The :class:`NextTable` of back-off tables (the arrays are the tables' own, plus the CSR offsets)."""
    if tables.kind != "backoff":
        raise InputError(f"a {tables.smoother_name} model is additive (counts, not back-off weights), and the "
                         "next-token tables follow the back-off recursion", path=source or None,
                         fix=f"use a model smoothed with {named_list(backoff_smoothers())}")
    V = tables.V
    keys = [np.asarray(k, dtype=np.int64) for k in tables.keys]
    lp = [np.asarray(p, dtype=np.float64) for p in tables.log10_prob]
    bo = [np.asarray(b, dtype=np.float64) for b in tables.log10_backoff]
    if len(bo) < len(keys):  # the top order has no back-off column in some producers
        bo += [np.zeros(0)] * (len(keys) - len(bo))
    starts = [child_offsets(keys[k], len(keys[k - 1]), V) for k in range(1, len(keys))]
    return NextTable(vocab=tables.vocab, keys=keys, log10_prob=lp, log10_backoff=bo, child_start=starts,
                     missing_backoff=float(tables.missing_backoff), is_distribution=bool(tables.is_distribution),
                     source=source)


def from_probing(scorer: ProbingScorer) -> ProbingTable:
    """The :class:`ProbingTable` of a probing binary scored in place."""
    s = scorer.search
    sign = np.uint32(0x80000000)

    def split(rec) -> tuple:
        bits = np.ascontiguousarray(rec["prob"]).view(np.uint32)
        # KenLM stores every probability with its sign bit cleared when the n-gram "extends left":
        # the true value is the one with the sign set (all log probabilities are <= 0).
        return (bits | sign).view(np.float32), (bits & sign) == 0

    up, ue = split(s.unigram)
    keys, probs, ext, bos = [], [], [], []
    for k in range(2, s.order + 1):
        t = s.table(k)
        p, e = split(t)
        keys.append(np.ascontiguousarray(t["key"]).view(np.int64))
        probs.append(p)
        ext.append(e & (k < s.order))
        bos.append(np.ascontiguousarray(t["backoff"]) if k < s.order else np.zeros(0, dtype=np.float32))
    return ProbingTable(vocab=scorer.vocab_, order=s.order, to_kenlm=np.asarray(scorer.to_kenlm, dtype=np.int64),
                        unigram_log10_prob=up, unigram_backoff=np.ascontiguousarray(s.unigram["backoff"]),
                        unigram_extends=ue, keys=keys, log10_prob=probs, extends=ext, log10_backoff=bos,
                        source=str(scorer.binary_path))


def _plain(col) -> np.ndarray:
    """A compact column (split keys, packed or book values) as the plain array it stands for."""
    return col.to_array() if hasattr(col, "to_array") else np.asarray(col)


def next_table(model: Union[str, os.PathLike, Scorer], *, mmap: Optional[bool] = None) -> Union[NextTable, ProbingTable]:
    """The next-token tables of ``model``: a model file (ARPA, native ``.npz``, KenLM trie or probing
    binary, a mixture or pruned model written by this toolkit) or a loaded model (``NgramLM``,
    ``Scorer``, ``ngramlm.Model``'s ``.lm``, a KenLM binary's scorer)."""
    source = ""
    if isinstance(model, (str, os.PathLike)):
        source = os.fspath(model)
        model = load_any(source, mmap=mmap)
    if isinstance(model, ProbingScorer):
        return from_probing(model)
    if isinstance(model, TrieScorer):
        # A trie scored in place has no arrays; decoding it lists every n-gram (KenLM's blanks included).
        from .kenlm.read import read_trie_tables

        table = from_tables(read_trie_tables(model.binary_path), source or model.binary_path)
        table.float32_sums = True
        return table
    lm = getattr(model, "lm", model)  # ngramlm.Model wraps a scorer
    if not isinstance(lm, Scorer):
        raise InputError(f"cannot make next-token tables of a {type(model).__name__}",
                         fix="pass a model file, an NgramLM or a Scorer")
    lm._check_fitted()
    tables = lm.tables_
    if isinstance(lm, CompactScorer):
        tables = tables.replace(keys=[_plain(k) for k in tables.keys],
                                log10_prob=[_plain(p) for p in tables.log10_prob],
                                log10_backoff=[_plain(b) for b in tables.log10_backoff])
    return from_tables(tables, source)
