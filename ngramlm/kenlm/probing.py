"""A KenLM *probing* binary as a query object.

A probing file stores each n-gram only as a 64-bit hash of its word ids (:mod:`ngramlm.kenlm.read`),
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
from corpora.vocab import UNK_ID

from ..io.arpa import arpa_vocab
from .read import ProbingSearch
from ..scorer import Scorer
from ..tables import NgramTables


class KenlmBinaryScorer(Scorer):
    """What a KenLM binary scored in place shares: the vocabulary (KenLM's ids mapped to ours),
    tables in name only (no n-gram keys) and a refusal, with the reason, of whatever needs the
    n-grams listed."""

    def _init_vocab(self, words: list, header, path: str, **info) -> None:
        vocab = arpa_vocab(words, "<unk>", "<s>", "</s>")
        V = len(vocab)
        # Our ids -> KenLM's (ids our vocabulary has that KenLM lacks -- <pad>, or the sentence
        # markers of a file built with -s -- are its <unk>, 0, as KenLM reads them).
        self.to_kenlm = np.zeros(V, dtype=np.int64)
        self.to_kenlm[np.fromiter(map(vocab.stoi_.__getitem__, words), dtype=np.int64, count=len(words))] = \
            np.arange(len(words))
        self.binary_path = path
        tables = NgramTables(vocab=vocab, kind="backoff", keys=[np.zeros(0, dtype=np.int64)] * header.order,
                             n_ngrams=list(header.counts), smoother_name="unknown",
                             smoother_params={"source": path},
                             info={"kenlm_binary": path, "kenlm_type": header.name, **info},
                             log10_prob=None, log10_backoff=None)
        self._set_tables(tables)

    def _refuse(self, what: str):
        raise InputError(f"{what} needs the n-grams, and a KenLM probing binary stores only their hashes",
                         path=self.binary_path,
                         fix="use the ARPA file it was built from, or a trie binary (build_binary trie)")

    def _find(self, k, queries):
        self._refuse("this query")

    def build_index(self):
        return self  # the file's own search structure is the index


class ProbingScorer(KenlmBinaryScorer):
    """Scores with a KenLM probing binary (``path``), through its hash tables."""

    def __init__(self, path) -> None:
        self.search = ProbingSearch(path)
        self._init_vocab(self.search.words, self.search.header, self.search.file.path)

    @property
    def order_(self) -> int:
        return self.search.order

    def compiled_tables(self):
        """The compiled state API over the file's tables (``ngramlm._fast.kenlm.ProbingTables``), or None."""
        from .. import accel

        if accel.fast is None or self.search.header.model_type != 0:
            return None
        if getattr(self, "_compiled", None) is None:
            s = self.search
            o = s.offsets
            self._compiled = accel.fast.ProbingTables(
                np.frombuffer(s.file.buf, dtype=np.uint8), s.file, o["unigram"][0], o["middles"], o["longest"],
                np.ascontiguousarray(self.to_kenlm, dtype=np.int64), self.vocab_.stoi_, UNK_ID, s.header.counts[0])
        return self._compiled

    def _score_padded(self, tokens: np.ndarray, pos: np.ndarray):
        fast = self.compiled_tables()
        if fast is not None:  # KenLM's search, token by token in C: no pass per order over the text
            return fast.score_padded(np.ascontiguousarray(tokens, dtype=np.int64), np.ascontiguousarray(pos, dtype=np.int64))
        return self.search.score_padded(self.to_kenlm[tokens], pos)
