"""A pyctcdecode language model over subword pieces: an n-gram model of the acoustic model's BPE units.

pyctcdecode's decoder (``BeamSearchDecoderCTC``) builds words from the acoustic model's labels -- with
BPE labels, a piece starting with ``▁`` begins a word -- and asks its language model to score each
completed word (``score(state, word, is_last_word)``) and to penalise an unfinished one
(``score_partial_token``).  Its own ``LanguageModel`` is a *word* model (KenLM over words), which a
subword recogniser with an open vocabulary must restrict to a unigram list.  :func:`piece_language_model`
gives it a model over *pieces* instead (``ngramlm train TEXT --tokenizer bpe:N``): each word the decoder
completes is cut into pieces by the model's own tokenizer -- the one it was trained with, stored in
the model -- and scored piece by piece through the model's kenlm-API state; any word is scorable.

The numbers follow pyctcdecode's ``LanguageModel``: the word's log10 probability (its pieces' sum,
plus ``</s>`` for the last word when ``score_boundary``) is converted to natural log, times ``alpha``,
plus ``beta`` per word; ``unk_score_offset`` is added to a word with a piece the model does not know
(``<unk>``), and is the penalty of an unfinished word that already has one.
"""
from __future__ import annotations

import math
import os
from typing import Union

from corpora.errors import InputError
from corpora.tokenize import make_tokenizer
from corpora.vocab import UNK_ID
from ngramlm.query import Model, State

LOG10_TO_LN = math.log(10.0)  # pyctcdecode's LOG_BASE_CHANGE_FACTOR: 1 / log10(e)


def _abstract_lm():
    try:
        from pyctcdecode.language_model import AbstractLanguageModel
    except ImportError:
        raise InputError("pyctcdecode is not installed", fix="pip install pyctcdecode") from None
    return AbstractLanguageModel


def piece_language_model(model: Union[str, os.PathLike, object], *, alpha: float = 0.5, beta: float = 1.0,
                         unk_score_offset: float = -10.0, score_boundary: bool = True):
    """A pyctcdecode ``AbstractLanguageModel`` over ``model``'s pieces (a model file or a loaded model);
    pass it as ``BeamSearchDecoderCTC(Alphabet.build_alphabet(labels), language_model=lm)``.  The
    defaults are pyctcdecode's."""
    base = _abstract_lm()
    m = model if isinstance(model, Model) else (Model(model) if isinstance(model, (str, os.PathLike))
                                                else Model(lm=model))
    vocab = m.lm.vocab_
    tokenizer = make_tokenizer(vocab.tokenizer) if vocab.tokenizer is not None else None

    class PieceLanguageModel(base):
        def __init__(self) -> None:
            self.model = m
            self.alpha, self.beta = float(alpha), float(beta)
            self.unk_score_offset = float(unk_score_offset)
            self.score_boundary = bool(score_boundary)
            self._pieces: dict = {}  # word -> (its pieces, whether one is unknown)

        @property
        def order(self) -> int:
            return self.model.order

        def pieces(self, word: str) -> tuple:
            """The pieces the model's tokenizer cuts ``word`` into, and whether the model lacks one."""
            got = self._pieces.get(word)
            if got is None:
                ps = tuple(tokenizer.encode(word)) if tokenizer is not None and word else tuple(word.split())
                got = self._pieces[word] = (ps, any(vocab[p] == UNK_ID for p in ps))
            return got

        def get_start_state(self) -> State:
            s = State()
            if self.score_boundary:
                self.model.BeginSentenceWrite(s)
            else:
                self.model.NullContextWrite(s)
            return s

        def score_partial_token(self, partial_token: str) -> float:
            return self.unk_score_offset if partial_token and self.pieces(partial_token)[1] else 0.0

        def score(self, prev_state: State, word: str, is_last_word: bool = False) -> tuple:
            ps, unknown = self.pieces(word)
            state, lp = prev_state, 0.0
            for p in ps:
                out = State()
                lp += self.model.BaseScore(state, p, out)
                state = out
            if unknown:
                lp += self.unk_score_offset
            if is_last_word and self.score_boundary:
                lp += self.model.BaseScore(state, vocab.eos_token, State())
            return self.alpha * lp * LOG10_TO_LN + self.beta, state

    return PieceLanguageModel()
