"""A KenLM *probing* binary as a query object.

A probing file stores each n-gram only as a 64-bit hash of its word ids (:mod:`ngramlm.kenlm_binary`),
so it cannot become :class:`~ngramlm.tables.NgramTables` -- there are no n-grams to list.  It can be
scored: :class:`ProbingScorer` is a :class:`~ngramlm.scorer.Scorer` whose per-position scoring
computes KenLM's keys (vectorised over the whole text) and probes the file's memory-mapped tables,
so ``ngramlm ppl``/``score`` and everything built on ``token_scores`` work on it.  What needs the
n-grams themselves -- ``export-arpa``, pruning, mixing, the next-word distribution -- asks for a
trie (or the ARPA file) instead, with a message that says so.
"""
from __future__ import annotations

import numpy as np

from corpora.errors import InputError
from corpora.vocab import BOS_ID, EOS_ID, UNK_ID

from .arpa import _vocab
from .kenlm_binary import ProbingSearch
from .scorer import Scorer
from .tables import NgramTables


class ProbingScorer(Scorer):
    """Scores with a KenLM probing binary (``path``), through its hash tables."""

    def __init__(self, path) -> None:
        self.search = ProbingSearch(path)
        h = self.search.header
        words = self.search.words
        vocab = _vocab(words, "<unk>", "<s>", "</s>")
        V = len(vocab)
        # Our ids -> KenLM's (ids our vocabulary has that KenLM lacks -- <pad> -- are its <unk>, 0).
        self.to_kenlm = np.zeros(V, dtype=np.int64)
        self.to_kenlm[[vocab.stoi_[w] for w in words]] = np.arange(len(words))
        # Tables in name only: the vocabulary and the counts; no keys to look anything up in.
        tables = NgramTables(vocab=vocab, kind="backoff", keys=[np.zeros(0, dtype=np.int64)] * h.order,
                             n_ngrams=list(h.counts), smoother_name="unknown",
                             smoother_params={"source": self.search.file.path},
                             info={"kenlm_binary": self.search.file.path, "kenlm_type": h.name},
                             log10_prob=None, log10_backoff=None)
        self._set_tables(tables)

    @property
    def order_(self) -> int:
        return self.search.order

    def _refuse(self, what: str):
        raise InputError(f"{what} needs the n-grams, and a KenLM probing binary stores only their hashes",
                         path=self.search.file.path,
                         fix="use the ARPA file it was built from, or a trie binary (build_binary trie)")

    def _find(self, k, queries):
        self._refuse("this query")

    def build_index(self) -> "ProbingScorer":
        return self  # the file's hash tables are the index

    def compiled_tables(self):
        """The compiled state API over the file's tables (``ngramlm._fast.ProbingTables``), or None."""
        from . import accel

        if accel.fast is None or not hasattr(accel.fast, "ProbingTables") or self.search.header.model_type != 0:
            return None
        s = self.search
        return accel.fast.ProbingTables(s.unigram, list(s.middles), s.longest, self.vocab_.stoi_,
                                        np.ascontiguousarray(self.to_kenlm, dtype=np.int64), UNK_ID)

    def _score_padded(self, tokens: np.ndarray, pos: np.ndarray):
        return self.search.score_padded(self.to_kenlm[tokens], pos)

    def next_probs(self, context=()):
        """p(w | context) for every id w (<s> and <pad> get 0), scored as V one-word continuations."""
        ctx = [self.vocab_[w] for w in context]
        if self.vocab_.bos_token in context:
            ctx = ctx[len(ctx) - ctx[::-1].index(BOS_ID):]
        ctx = ctx[-(self.order_ - 1):] if self.order_ > 1 else []
        V = len(self.vocab_)
        L = len(ctx)
        tokens = np.empty(V * (L + 1), dtype=np.int64)
        # Each row is [context..., w] at positions 0..L: the first token serves only as history
        # (as <s> does at position 0 of a sentence), and no row sees another's words.
        pos = np.tile(np.arange(L + 1), V)
        rows = tokens.reshape(V, L + 1)
        rows[:, :L] = ctx
        rows[:, L] = np.arange(V)
        lp, _ = self._score_padded(tokens, pos)
        p = 10.0 ** lp.reshape(V, L + 1)[:, L]
        p[[BOS_ID, 0]] = 0.0
        return p

    def distribution(self, context=()):
        p = self.next_probs(context)
        return {w: float(p[i]) for i, w in enumerate(self.vocab_.itos_) if p[i] > 0}

    def kenlm_ids(self, words) -> list:
        return [int(self.to_kenlm[self.vocab_.stoi_.get(w, UNK_ID)]) for w in words]

    @property
    def eos_kenlm(self) -> int:
        return int(self.to_kenlm[EOS_ID])
