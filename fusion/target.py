"""An n-gram model as a translator's search sees it: over the translator's target vocabulary.

Shallow fusion (Gulcehre et al., 2015) adds ``w log P_LM(y_t | y_<t)`` to the translator's
``log P(y_t | y_<t, x)`` at every step of the search (``neural.seq2seq.translate``).  The translator's
target ids are not the n-gram model's: :class:`TargetVocabLM` maps each target word to the model's id
once (a word the model lacks to its ``<unk>``, which then gives every such word the model's whole
``<unk>`` probability: a score, as shallow fusion uses it, not a distribution over the target words),
and reads the model's full next-token distribution from its tensor form (:mod:`fusion.tensor`) for
every live hypothesis at once.  ``<s>`` and ``<pad>`` keep the model's log 0, so the search never picks
them.
"""
from __future__ import annotations

from typing import Sequence

# torch and the tensor form are imported when a model is opened: the program registers this module at
# start, and its commands that never fuse must not pay for torch.


class TargetVocabLM:
    """``lm`` (a model file or loaded model) over ``target_words`` (the string of each target id)."""

    def __init__(self, lm, target_words: Sequence[str], *, device="cpu") -> None:
        from .tensor import tensor_lm

        self.lm = tensor_lm(lm, device=device)
        self.index = self.lm.ids(list(target_words)).to(self.lm.device)  # target id -> the model's id
        self.n_unmapped = sum(1 for w in target_words if w not in self.lm.vocab.stoi_)  # scored as <unk>

    def start(self, batch: int = 1):
        return self.lm.start(batch)

    def advance(self, states, tokens):
        return self.lm.advance(states, self.index[tokens.to(self.index.device)])

    def log_probs(self, states):
        """Natural-log ``P_LM(target word | state)``: (B, number of target ids)."""
        return self.lm.log_probs(states)[:, self.index]


def open_target_lm(path, target_words: Sequence[str], *, device="cpu") -> TargetVocabLM:
    return TargetVocabLM(path, target_words, device=device)


def register() -> None:
    """Let ``seq2seq translate --lm`` and the comparisons open a model file for shallow fusion
    (``corpora.modelkinds.fusion_lm``); cheap: nothing heavy is imported until a model is opened."""
    from corpora.modelkinds import register_fusion

    register_fusion(open_target_lm)
