"""Learned subword tokenizers: byte-pair encoding and the unigram language model.

Both are fitted on the training text only (the text pipeline fits them, see
:func:`corpora.corpus.fitted_tokenizer`) and then travel inside the vocabulary, every model
and every checkpoint as the :class:`~corpora.tokenize.TokenizerSpec`'s ``state`` -- the
library's own JSON of the trained tokenizer -- so scoring text later needs no training text.

The training and the encoding are Hugging Face ``tokenizers`` (Rust; its batch encoder on
the readers' path), an optional dependency: ``pip install -e ".[subwords]"``.  Pieces are
SentencePiece-style: a word-initial piece carries ``▁`` (the space before it), so no piece
holds a space and an n-gram model over pieces exports to ARPA like any other.  A character
never seen in training is the unknown piece ``<unk>`` under BPE; the unigram model passes it through
as its own piece, which the vocabulary (fitted on the training pieces) then reads as ``<unk>`` -- the
same id either way.

Encoding goes word by word: a line's pieces are its words' pieces (see :func:`_pieces_follow_words`),
so each distinct word is encoded by the library once and every later use is a table look-up -- exactly
the library's encoding of the whole line, at a cost per word type instead of per token.
"""
from __future__ import annotations

import gc
import json
from contextlib import contextmanager
from itertools import chain

from .errors import InputError
from .tokenize import Tokenizer, register

UNK = "<unk>"
SPACE = "▁"
# Words whose pieces are kept before the tables start afresh: bounds the memory of a long run over text
# with an open vocabulary (numbers, names) at a few hundred MB.
MAX_WORDS = 1 << 20


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
        self._by_word = _pieces_follow_words(state)
        self._forget()

    def _forget(self) -> None:
        self._tail: dict = {}  # word -> its pieces after a space: the library's encoding of " " + word
        self._head: dict = {}  # word -> its pieces as a line's first word, or None where they are its _tail
        self._pool: dict = {}  # piece -> one str object for it, shared by every word (and line) that holds it

    def split(self, text: str) -> list:
        return self.split_many([text])[0]

    def split_many(self, texts: list) -> list:
        with _no_cyclic_gc():
            return self._split_many(texts)

    def _split_many(self, texts: list) -> list:
        # Runs of any whitespace become one space first: no piece may hold a tab or a newline.
        if not self._by_word:
            encoded = self._tk.encode_batch([" ".join(t.split()) for t in texts], add_special_tokens=False)
            return [e.tokens for e in encoded]
        lines = [t.split() for t in texts]
        self._learn_words(lines)
        tail, head = self._tail, self._head
        pieces_of = tail.__getitem__
        out = []
        for words in lines:
            pieces = list(chain.from_iterable(map(pieces_of, words)))  # C-level: no Python step per token
            if words and head[words[0]] is not None:
                pieces[:len(tail[words[0]])] = head[words[0]]
            out.append(pieces)
        return out

    def _learn_words(self, lines: list) -> None:
        """Encode (one library batch) the words of ``lines`` not met before, after a space and as the first
        word of a line."""
        if len(self._tail) > MAX_WORDS:
            self._forget()
        tail, head, pool = self._tail, self._head, self._pool
        new_tail = list(set(chain.from_iterable(lines)).difference(tail))
        new_head = list({words[0] for words in lines if words}.difference(head))
        if not new_tail and not new_head:
            return
        encoded = self._tk.encode_batch([" " + w for w in new_tail] + new_head, add_special_tokens=False)
        # One str per distinct piece: the lines' lists then share them (memory), and the vocabulary's dict
        # look-ups of a piece find it by identity.
        pieces = [tuple([pool.setdefault(p, p) for p in e.tokens]) for e in encoded]
        tail.update(zip(new_tail, pieces))
        for w, p in zip(new_head, pieces[len(new_tail):]):
            head[w] = None if p == tail[w] else p

    def join(self, tokens: list) -> str:
        return self._tk.decoder.decode(list(tokens))

    def pieces(self) -> int:
        """The number of pieces it learned (at most its size)."""
        return self._tk.get_vocab_size()


@contextmanager
def _no_cyclic_gc():
    """Hold Python's cycle collector off while a batch is encoded.  The batch makes two lists per line and
    no reference cycles, yet every few hundred new lists set the collector off, and its older generations
    walk every list alive -- the batch's own million pieces included: about half the time of a PTB-sized
    batch.  Collection resumes (if it was on) when the batch is done."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def _pieces_follow_words(state: dict) -> bool:
    """Whether a line's pieces are its words' pieces under this learned tokenizer: the library's encoding of
    ``w1 w2 ... wn`` is that of ``w1``, then of `` w2``, ..., then of `` wn``.

    It is when, as :meth:`_Learned.learn` sets it up, nothing normalizes the text and the Metaspace
    pre-tokenizer (every space made ``▁``, ``▁`` prepended to every text segment that lacks one) cuts the
    text before every ``▁``: no piece then reaches past a space.  The added (special) tokens such as
    ``<unk>`` are cut out of the raw text before that, and match inside a word only (they hold no space and
    absorb none), but they make a space next to them a segment edge: ``x <unk>`` is ``▁x ▁ <unk>``, a lone
    ``▁`` the first word never has; and a word that starts with ``▁`` gets no prepended one.  Hence two
    encodings per word -- after a space (`` w``) and first in the line (``w``) -- which, with a
    deterministic model (no BPE dropout), give the library's pieces exactly.  Any other set-up (a state
    from elsewhere) is encoded line by line by the library.  tests/test_subword_speed.py checks the
    identity on tricky, random and PTB text.
    """
    pre = state.get("pre_tokenizer") or {}
    model = state.get("model") or {}
    added = state.get("added_tokens") or []
    return (state.get("normalizer") is None and state.get("post_processor") is None
            and pre.get("type") == "Metaspace" and pre.get("replacement") == SPACE
            and pre.get("prepend_scheme") == "always" and pre.get("split", True) is True
            and model.get("type") in ("BPE", "Unigram") and not model.get("dropout")
            and all(t.get("content") and t["content"].split() == [t["content"]]
                    and not (t.get("lstrip") or t.get("rstrip") or t.get("single_word")) for t in added))


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
