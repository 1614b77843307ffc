"""What every neural LM shares: the output layer over the predicted types and the call signature.

All models implement one interface, so training, evaluation and generation never ask
which architecture they hold::

    logits, loss, state = model(x, targets=None, state=None)

``x`` and ``targets`` are ``(B, T)`` id tensors, ``logits`` is ``(B, T, V)`` over all
``V = len(vocab)`` ids, ``loss`` the mean cross-entropy in nats over the targets that
are not ``<pad>``, and ``state`` whatever the model carries from one chunk of text to
the next (recurrent states for RNNs, the preceding token ids for the Transformer).
``state=None`` means "start of text".

The output distribution
-----------------------
``<pad>`` (id 0) and ``<s>`` (id 1) are never predicted.  The output layer computes
scores only for ids ``2 .. V-1`` -- ``</s>``, ``<unk>`` and the words, exactly
``vocab.n_types`` of them -- and the softmax normalises over those.  The returned
``logits`` put ``-inf`` at ids 0 and 1, so ``softmax(logits)`` gives them probability 0
and the rest sums to 1, the same event space as the n-gram models.
"""
from __future__ import annotations

from typing import Optional

import torch
import torch.nn.functional as F
from torch import nn

from corpora.vocab import PAD_ID

# <pad> = 0 and <s> = 1 come first; everything from id 2 on is a predicted type.
N_UNPREDICTED = 2
FIRST_PREDICTED = N_UNPREDICTED
# cross_entropy over the n_types columns sees target id - 2; a <pad> target becomes -2.
_IGNORE = PAD_ID - N_UNPREDICTED

State = Optional[tuple]  # a tuple of tensors, or None at the start of a text


class LanguageModel(nn.Module):
    """Base class: subclasses compute hidden vectors; this class turns them into a distribution."""

    kind: str = ""  # "rnn" or "transformer": the key under which build_model finds the class
    config: object

    # ------------------------------------------------------------------ output layer
    def output(self, h: torch.Tensor, targets: Optional[torch.Tensor], need_logits: bool = True):
        """``h`` (B, T, d) -> ``(logits (B, T, V) or None, mean loss or None)``."""
        weight = self.decoder.weight[FIRST_PREDICTED:]  # (n_types, d): a view, rows 0-1 unused
        bias = self.decoder.bias[FIRST_PREDICTED:]
        scores = F.linear(h, weight, bias).float()  # (B, T, n_types); float32 even under bf16 autocast
        loss = None
        if targets is not None:
            loss = F.cross_entropy(
                scores.reshape(-1, scores.size(-1)), targets.reshape(-1) - N_UNPREDICTED, ignore_index=_IGNORE
            )
        logits = F.pad(scores, (N_UNPREDICTED, 0), value=float("-inf")) if need_logits else None
        return logits, loss

    # ------------------------------------------------------------------ state helpers (overridden where needed)
    def select_state(self, state: State, index: torch.Tensor) -> State:
        """Keep the rows ``index`` of a batch's state (beam search reorders hypotheses with it)."""
        if state is None:
            return None
        dim = self.state_batch_dim
        return tuple(s.index_select(dim, index) for s in state)

    state_batch_dim: int = 0

    @staticmethod
    def detach_state(state: State) -> State:
        """Cut the autograd graph at a chunk boundary (truncated BPTT); values are kept."""
        if state is None:
            return None
        return tuple(s.detach() for s in state)

    def eval_chunk_len(self) -> int:
        """How many tokens the evaluator feeds per call."""
        return 256

    def n_parameters(self) -> int:
        return sum(p.numel() for p in {id(p): p for p in self.parameters()}.values())

    def describe(self) -> str:
        return f"{type(self).__name__}({self.config!r}, {self.n_parameters():,} parameters)"
