"""The ``kenlm`` module's Python API for KenLM binary files, as light as kenlm itself.

A decoder written against ``import kenlm`` (pyctcdecode, torchaudio's CTC decoder, NeMo, Coqui)
runs unchanged with::

    import ngramlm.kenlm as kenlm

    m = kenlm.Model("lm.bin")           # a build_binary file: probing or trie, any -q/-b/-a variant
    m.score("the cat sat")              # log10 p of the sentence (with <s> and </s>)
    list(m.full_scores("the cat sat"))  # (log10 p, n-gram length, oov) per word and </s>
    m.perplexity("the cat sat"), m.order, "cat" in m
    s, t = kenlm.State(), kenlm.State()
    m.BeginSentenceWrite(s)
    m.BaseScore(s, "the", t)            # log10 p(the | <s>); t is the state after "the"

For a binary it reads what kenlm reads and nothing more: the header, the vocabulary's table of word
hashes and the search structure, all where they lie in the mapped file.  No word string is read,
nothing is decoded and neither numpy nor the estimators are imported, so loading costs what
mapping the file costs and memory is the file's pages.  Every number is kenlm's to the bit: the
per-word values, and the sentence totals (summed in float32, as kenlm sums them).  A sentence is
split as kenlm splits it, on ASCII whitespace of its UTF-8 bytes.

Any other model -- ARPA (plain or .gz), the toolkit's ``.npz``, a probing binary with rest costs,
or any model where the compiled extension is missing -- is read by :class:`ngramlm.Model`, the same
API over the toolkit's own tables (numpy and all), and the :class:`Model` here hands every call to
it.  Either way ``kenlm.Model(path)`` is an instance of :class:`Model`, as with the kenlm module.
"""
from __future__ import annotations

import math
import os

from corpora.errors import InputError, ModelFileError

from .. import accel
from .api import ARPALoadComplain, Config, FullScoreReturn, LoadMethod, State
from .format import BinaryFile, looks_like_kenlm_binary, probing_file_layout, trie_file_layout, trie_query_layout

__all__ = ["Model", "LanguageModel", "State", "FullScoreReturn", "Config", "LoadMethod", "ARPALoadComplain"]


def _reads_in_place(path) -> bool:
    """Whether this module scores ``path`` itself: a KenLM binary of a type the compiled extension
    searches in place (probing without rest costs, every trie variant)."""
    if accel.fast is None or not looks_like_kenlm_binary(path):
        return False
    from .format import read_header

    try:
        h = read_header(path)
    except ValueError:  # a damaged or foreign file: ngramlm.Model says what is wrong with it
        return False
    return h.model_type != 1


class Model:
    """kenlm.Model over a KenLM binary, searched where it lies (see the module's text); any other
    file is read by an :class:`ngramlm.Model`, whose methods this object's are."""

    # The toolkit's model where it reads the file (None where this class searches a binary in place).
    _toolkit = None

    def __init__(self, path, config: Config | None = None) -> None:
        try:
            self._open(path, config)
        except ModelFileError:
            raise
        except InputError as e:  # missing, unreadable or damaged: an OSError too, as kenlm raises
            raise ModelFileError.from_input_error(e) from None

    def _open(self, path, config: Config | None) -> None:
        config = config or Config()
        self.path = os.path.abspath(os.fspath(path))
        if not _reads_in_place(path):
            self._open_with_the_toolkit(path, config)
            return
        # Words are found by their hashes, as KenLM finds them: a file built without its vocabulary
        # strings (build_binary -v) reads as well as any.
        self._file = BinaryFile(self.path, populate=config.load_method != LoadMethod.LAZY, need_words=False)
        h = self._file.header
        self._order = h.order
        buf = self._file.buf
        if h.kind == "trie":
            L = trie_file_layout(self._file)
            # The sorted vocabulary: a uint64 count, then the hashes of every word but <unk>.
            file_vocab = (h.size + 8, int.from_bytes(buf[h.size:h.size + 8], "little"), False)
            if file_vocab[1] != h.counts[0] - 1:
                self._damaged(f"the vocabulary lists {file_vocab[1]} words for {h.counts[0]} unigrams",
                              "the file is damaged: rebuild it with build_binary")
            try:
                self._tables = accel.fast.TrieTables(buf, self._file, h.order, L.unigram_offset, L.word_bits,
                                                     trie_query_layout(L), None, None, 0, h.counts[0], file_vocab)
            except ValueError as e:  # the file's structure does not hold together
                self._damaged(str(e), "the file is damaged: rebuild it with build_binary")
        else:
            P = probing_file_layout(self._file)
            try:
                self._tables = accel.fast.ProbingTables(buf, self._file, P["unigram"][0], P["middles"], P["longest"],
                                                        None, None, 0, h.counts[0], (*P["vocab"], True))
            except ValueError as e:
                self._damaged(str(e), "the file is damaged: rebuild it with build_binary")
        self._bos = self._tables.sentence_ids[0]
        # The state API straight into C: bound methods as instance attributes, so a call costs no
        # Python frame (beam-search decoders make millions of them).
        self.BaseScore = self._tables.base_score
        self._sentence = self._tables.sentence_text

    def _open_with_the_toolkit(self, path, config: Config) -> None:
        from ..query import Model as ToolkitModel

        model = ToolkitModel(path, config)
        self._toolkit = model
        self._order = model.order
        # The toolkit model's bound methods as this object's attributes: a call goes straight to them
        # (to C where the extension is built), with no frame of this class in between.
        for name in ("BeginSentenceWrite", "NullContextWrite", "BaseScore", "BaseFullScore",
                     "score", "full_scores", "perplexity"):
            setattr(self, name, getattr(model, name))

    def _damaged(self, message: str, fix: str):
        raise InputError(message, path=self.path, fix=fix)

    # ------------------------------------------------------------------ kenlm.Model attributes
    @property
    def order(self) -> int:
        return self._order

    def __contains__(self, word) -> bool:
        if self._toolkit is not None:
            return word in self._toolkit
        return self._tables.word_id(word) != 0  # kenlm: in the model when its id is not <unk>'s

    def __repr__(self) -> str:
        return f"<Model from {os.path.basename(self.path)}>"

    def __reduce__(self):  # pickling a model reopens its file, as kenlm's does
        return (Model, (self.path,))

    # ------------------------------------------------------------------ the state API
    def BeginSentenceWrite(self, state) -> None:
        self._tables.begin_sentence(state, self._bos)

    def NullContextWrite(self, state) -> None:
        self._tables.null_context(state)

    def BaseFullScore(self, in_state, word, out_state) -> FullScoreReturn:
        lp, length, wid = self._tables.base_full_score(in_state, word, out_state)
        return FullScoreReturn(lp, length, wid == 0)

    # ------------------------------------------------------------------ sentences
    def score(self, sentence, bos: bool = True, eos: bool = True) -> float:
        """Total log10 probability of ``sentence`` (float32 sums, as kenlm's)."""
        return self._sentence(sentence, bos, eos, False)

    def full_scores(self, sentence, bos: bool = True, eos: bool = True):
        """``(log10 p, n-gram length, oov)`` for every word of ``sentence`` (and ``</s>`` with ``eos``)."""
        return iter(self._sentence(sentence, bos, eos, True))

    def perplexity(self, sentence) -> float:
        """10 ** (-score / (words + 1)): the sentence end counts, as in kenlm."""
        words = len((sentence.encode("utf-8") if isinstance(sentence, str) else sentence).split()) + 1  # kenlm's split
        return math.pow(10.0, -self.score(sentence) / words)


class LanguageModel(Model):
    """kenlm's old name of :class:`Model`."""
