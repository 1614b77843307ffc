"""An n-gram model behind torchaudio's ``CTCDecoderLM`` interface, without torchaudio.

torchaudio's CTC beam-search decoder (``torchaudio.models.decoder.ctc_decoder``, flashlight's) takes a
custom language model as an object with three methods:

* ``start(start_with_nothing)`` -> the state before the first token;
* ``score(state, usr_token_idx)`` -> (the state after the token, its score);
* ``finish(state)`` -> (the state after ``</s>``, the score of ending there).

:class:`CTCDecoderNgramLM` gives them for any back-off model the toolkit reads, through its kenlm-API
state (:class:`ngramlm.Model`: KenLM's algorithm, in C with the compiled extension).  Scores are log10,
as torchaudio's own KenLM language model returns them, so an ``lm_weight`` tuned with a KenLM file
carries over.  ``usr_token_idx`` indexes ``words``: the decoder's word list with a lexicon, its token
list without one (a subword model over the acoustic model's pieces).

States are canonical: the histories the model cannot tell apart (the same n-gram state, KenLM's
minimised one) get the *same* state object, so the decoder, which merges hypotheses whose states
compare equal, recombines them as it does for its KenLM model.  torchaudio itself is not needed;
:func:`as_torchaudio` wraps the adapter in a subclass of torchaudio's ``CTCDecoderLM`` where it is
installed (its decoder wants its own state type).
"""
from __future__ import annotations

import os
from typing import Sequence, Union

from corpora.errors import InputError
from ngramlm.query import Model, State


class NgramLMState:
    """A decoder's language-model state: one object per n-gram state (``state``, the kenlm-API one), so
    identity is equality and a decoder that merges hypotheses with the same state object recombines
    exactly the histories the model cannot tell apart."""

    __slots__ = ("state",)

    def __init__(self, state: State) -> None:
        self.state = state

    def __repr__(self) -> str:
        return f"NgramLMState({self.state!r})"


class CTCDecoderNgramLM:
    """torchaudio's ``CTCDecoderLM`` methods over a back-off model (``model``: a model file or a
    loaded model; ``words``: the string of each index the decoder passes)."""

    def __init__(self, model: Union[str, os.PathLike, object], words: Sequence[str]) -> None:
        if isinstance(model, Model):
            self.model = model
        elif isinstance(model, (str, os.PathLike)):
            self.model = Model(model)
        else:
            self.model = Model(lm=model)
        self.words = list(words)
        if not self.words:
            raise InputError("the decoder's word list is empty", fix="pass the tokens (or lexicon words) it indexes")
        known = sum(w in self.model for w in self.words)
        if known == 0:
            raise InputError(f"none of the decoder's {len(self.words)} words is in the model's vocabulary "
                             f"(e.g. {self.words[:3]})", fix="pass the list the decoder indexes, in the model's "
                             "spelling (for a subword model, its pieces)")
        self.eos = self.model.lm.vocab_.eos_token
        self._states: dict = {}

    def _canonical(self, state: State) -> NgramLMState:
        got = self._states.get(state)
        if got is None:
            got = self._states[state] = NgramLMState(state)
        return got

    def start(self, start_with_nothing: bool = False) -> NgramLMState:
        """The state at a sentence start (after ``<s>``), or with nothing before it (KenLM's null context)."""
        self._states.clear()  # a new utterance: the previous one's states are not reached again
        s = State()
        if start_with_nothing:
            self.model.NullContextWrite(s)
        else:
            self.model.BeginSentenceWrite(s)
        return self._canonical(s)

    def _step(self, state: NgramLMState, word: str) -> tuple:
        out = State()
        score = self.model.BaseScore(state.state, word, out)
        return self._canonical(out), score

    def score(self, state: NgramLMState, usr_token_idx: int) -> tuple:
        """(the state after word ``usr_token_idx``, log10 p(word | state))."""
        try:
            word = self.words[usr_token_idx]
        except IndexError:
            raise InputError(f"token index {usr_token_idx} is outside the {len(self.words)} words given",
                             fix="pass the full list the decoder indexes") from None
        return self._step(state, word)

    def finish(self, state: NgramLMState) -> tuple:
        """(the state after ``</s>``, log10 p(</s> | state))."""
        return self._step(state, self.eos)


def as_torchaudio(lm: CTCDecoderNgramLM):
    """``lm`` as a ``torchaudio.models.decoder.CTCDecoderLM`` (pass it as ``ctc_decoder(lm=...)``): the
    same scores, torchaudio's state objects, one per distinct n-gram state."""
    try:
        from torchaudio.models.decoder import CTCDecoderLM, CTCDecoderLMState
    except ImportError:
        raise InputError("torchaudio is not installed", fix="pip install torchaudio (the build matching torch), "
                         "or call the adapter's start/score/finish yourself") from None

    class TorchaudioNgramLM(CTCDecoderLM):
        def __init__(self) -> None:
            CTCDecoderLM.__init__(self)
            self.ours: dict = {}  # torchaudio's state -> ours
            self.theirs: dict = {}  # ours -> torchaudio's (one per n-gram state, so hypotheses merge)

        def _theirs(self, parent, key: int, ours: NgramLMState):
            t = self.theirs.get(ours)
            if t is None:
                t = parent.child(key) if parent is not None else CTCDecoderLMState()
                self.theirs[ours] = t
                self.ours[t] = ours
            return t

        def start(self, start_with_nothing: bool = False):
            self.ours.clear()
            self.theirs.clear()
            return self._theirs(None, 0, lm.start(start_with_nothing))

        def score(self, state, usr_token_idx: int):
            ours, s = lm.score(self.ours[state], usr_token_idx)
            return self._theirs(state, usr_token_idx, ours), s

        def finish(self, state):
            ours, s = lm.finish(self.ours[state])
            return self._theirs(state, -1, ours), s

    return TorchaudioNgramLM()
