"""A KenLM *trie* binary scored where it lies in its mapped file.

Decoding a trie into the toolkit's tables (:func:`ngramlm.kenlm.read.read_trie_tables`) takes
seconds and hundreds of MB for a PTB 5-gram; a decoder that loads a hub ``.bin`` only to score
wants neither.  :class:`TrieScorer` maps the file and answers queries with KenLM's own search over
the bit-packed entries (``ngramlm._fast.kenlm.TrieTables``): ``ngramlm ppl``/``score``, ``ngramlm.Model``'s
state API, the next-word distribution and generation.  What needs the n-grams listed -- export,
pruning, mixing, filtering, statistics -- loads the decoded model instead
(``load_any(path, ngrams=True)``, which those commands ask for).
"""
from __future__ import annotations

import numpy as np

from corpora.errors import InputError
from corpora.vocab import UNK_ID

from .read import trie_structure
from .format import BinaryFile, trie_query_layout
from .probing import KenlmBinaryScorer


class TrieScorer(KenlmBinaryScorer):
    """Scores with a KenLM trie binary (``path``, any of its four variants) through the mapped file."""

    def __init__(self, path) -> None:
        from .. import accel

        if accel.fast is None:
            raise RuntimeError("TrieScorer needs the compiled extension; read_trie_tables decodes the file instead")
        self.file = BinaryFile(path, populate=True)
        h = self.file.header
        L, words = trie_structure(self.file)
        info = {}
        if L.quant is not None:
            info["quantization_bits"] = {"prob": L.quant[0], "backoff": L.quant[1]}
        if L.array_bits is not None:
            info["pointer_compression_bits"] = L.array_bits
        listed = set(words)
        lacks = [t for t in ("<s>", "</s>") if t not in listed]
        if lacks:
            info["kenlm_lacks"] = lacks
        self._init_vocab(words, h, self.file.path, **info)
        buf = np.frombuffer(self.file.buf, dtype=np.uint8)
        try:
            self.fast = accel.fast.TrieTables(buf, self.file, h.order, L.unigram_offset, L.word_bits,
                                              trie_query_layout(L), np.ascontiguousarray(self.to_kenlm, dtype=np.int64),
                                              self.vocab_.stoi_, UNK_ID, h.counts[0])
        except ValueError as e:  # the file's structure does not hold together
            raise InputError(str(e), path=self.file.path, fix="the file is damaged: rebuild it with build_binary") from None

    @property
    def order_(self) -> int:
        return self.file.header.order

    def _refuse(self, what: str):
        raise InputError(f"{what} needs the n-grams listed, and this KenLM trie is being scored in place",
                         path=self.binary_path,
                         fix="load it with ngramlm.loading.load_any(path, ngrams=True), which decodes every n-gram")

    def compiled_tables(self):
        """The compiled state API over the mapped file (``ngramlm._fast.kenlm.TrieTables``)."""
        return self.fast

    def _score_padded(self, tokens: np.ndarray, pos: np.ndarray):
        return self.fast.score_padded(np.ascontiguousarray(tokens, dtype=np.int64),
                                      np.ascontiguousarray(pos, dtype=np.int64))
