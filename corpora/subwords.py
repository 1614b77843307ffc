"""Learned subword tokenizers: byte-pair encoding and the unigram language model.

Both are fitted on the training text only (the text pipeline fits them, see
:func:`corpora.corpus.fitted_tokenizer`) and then travel inside the vocabulary, every model
and every checkpoint as the :class:`~corpora.tokenize.TokenizerSpec`'s ``state`` -- the
library's own JSON of the trained tokenizer -- so scoring text later needs no training text.

The training and the encoding are Hugging Face ``tokenizers`` (Rust; its batch encoder on
the readers' path), an optional dependency: ``pip install -e ".[subwords]"``.  Pieces are
SentencePiece-style: a word-initial piece carries ``▁`` (the space before it), so no piece
holds a space and an n-gram model over pieces exports to ARPA like any other.  A character
never seen in training is the unknown piece ``<unk>`` (the vocabulary's unknown word).
"""
from __future__ import annotations

import json

from .errors import InputError
from .tokenize import Tokenizer, register

UNK = "<unk>"
SPACE = "▁"


def _library():
    try:
        import tokenizers
    except ImportError:
        raise InputError("learned subword tokenizers (bpe, unigram) need the Hugging Face tokenizers library",
                         fix="pip install -e '.[subwords]'  (or: pip install tokenizers==0.23.3)") from None
    return tokenizers


class _Learned(Tokenizer):
    learns = True
    default_size = 8000

    def _model(self, lib):
        raise NotImplementedError

    def _trainer(self, lib, size: int):
        raise NotImplementedError

    def learn(self, lines) -> object:
        lib = _library()
        tk = lib.Tokenizer(self._model(lib))
        tk.pre_tokenizer = lib.pre_tokenizers.Metaspace(replacement=SPACE, prepend_scheme="always")
        tk.decoder = lib.decoders.Metaspace(replacement=SPACE, prepend_scheme="always")
        tk.train_from_iterator((" ".join(line.split()) for line in lines),
                               trainer=self._trainer(lib, self.spec.size or self.default_size))
        return json.loads(tk.to_str())

    def load_state(self, state) -> None:
        lib = _library()
        self._tk = lib.Tokenizer.from_str(json.dumps(state))

    def split(self, text: str) -> list:
        # Runs of any whitespace become one space first: no piece may hold a tab or a newline.
        return self._tk.encode(" ".join(text.split()), add_special_tokens=False).tokens

    def split_many(self, texts: list) -> list:
        encoded = self._tk.encode_batch([" ".join(t.split()) for t in texts], add_special_tokens=False)
        return [e.tokens for e in encoded]

    def join(self, tokens: list) -> str:
        return self._tk.decoder.decode(list(tokens))

    def pieces(self) -> int:
        """The number of pieces it learned (at most its size)."""
        return self._tk.get_vocab_size()


@register
class BPETokenizer(_Learned):
    """Byte-pair encoding (Sennrich et al. 2016): merges of the most frequent adjacent pieces."""

    kind = "bpe"

    def _model(self, lib):
        return lib.models.BPE(unk_token=UNK)

    def _trainer(self, lib, size: int):
        return lib.trainers.BpeTrainer(vocab_size=size, special_tokens=[UNK], show_progress=False)


@register
class UnigramTokenizer(_Learned):
    """The unigram language model of SentencePiece (Kudo 2018): the pieces that best explain the text."""

    kind = "unigram"

    def _model(self, lib):
        return lib.models.Unigram()

    def _trainer(self, lib, size: int):
        return lib.trainers.UnigramTrainer(vocab_size=size, special_tokens=[UNK], unk_token=UNK,
                                           show_progress=False)
