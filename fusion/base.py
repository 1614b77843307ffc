"""What both tensor forms share (:mod:`fusion.tensor`, :mod:`fusion.probing`): the state conventions,
the natural-log outputs, reordering, the vocabulary, and numpy arrays handed to torch without a copy."""
from __future__ import annotations

import math
import warnings
from typing import Optional, Sequence

import numpy as np
import torch

from corpora.errors import InputError
from corpora.vocab import UNK_ID

LN10 = math.log(10.0)
SHORT = -2  # a state entry whose context reaches back past <s>
UNSTORED = -1  # a context the model does not store


def as_tensor(a: np.ndarray, device=None, dtype=None) -> torch.Tensor:
    """A numpy array as a tensor: shared, not copied, on CPU in its own dtype (a read-only array, e.g.
    one mapped from a model file, is never written: the warning torch gives for one is noise here)."""
    a = np.ascontiguousarray(a)
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="The given NumPy array is not writable")
        t = torch.from_numpy(a)
    if dtype is not None or device is not None:
        t = t.to(device=device, dtype=dtype)
    return t


def expand_ranges(start: torch.Tensor, count: torch.Tensor) -> tuple:
    """For ranges ``[start[i], start[i] + count[i])``: every position in them and the range it came
    from (``i``), concatenated -- the CSR children of many contexts at once, without a Python loop."""
    owner = torch.repeat_interleave(torch.arange(len(count), device=count.device), count)
    first = torch.cumsum(count, 0) - count  # where each range begins in the output
    pos = torch.arange(len(owner), device=count.device) - first[owner] + start[owner]
    return pos, owner


class TensorLM:
    """What both tensor forms share: the vocabulary, the states' shape, the natural-log output."""

    order: int
    V: int
    device: torch.device

    def start(self, batch: int = 1, *, bos: bool = True) -> torch.Tensor:
        """``batch`` states at a sentence start (after ``<s>``), or with ``bos=False`` in the null
        context (no sentence start in view, as KenLM's ``NullContextWrite``)."""
        raise NotImplementedError

    def advance(self, states: torch.Tensor, tokens: torch.Tensor) -> torch.Tensor:
        """The states after one more token each: ``states`` [B, order-1], ``tokens`` [B] (our ids)."""
        raise NotImplementedError

    def log10_probs(self, states: torch.Tensor) -> torch.Tensor:
        """log10 p(. | state) over the whole vocabulary: [B, V], in the tables' dtype."""
        raise NotImplementedError

    def token_log10_probs(self, states: torch.Tensor, tokens: torch.Tensor) -> torch.Tensor:
        """log10 p(token | state) for one token per state: [B] (no [B, V] distribution is built)."""
        raise NotImplementedError

    def log_probs(self, states: torch.Tensor) -> torch.Tensor:
        """ln p(. | state) over the whole vocabulary, [B, V] float32 (``-inf`` for ``<pad>`` and ``<s>``,
        which are never predicted) -- the base of ``log_softmax``, so it adds to a neural model's."""
        return self._ln(self.log10_probs(states))

    def token_log_probs(self, states: torch.Tensor, tokens: torch.Tensor) -> torch.Tensor:
        """ln p(token | state), [B] float32."""
        return self._ln(self.token_log10_probs(states, tokens))

    def _ln(self, log10: torch.Tensor) -> torch.Tensor:
        # The product in float64, rounded once: the scorer's ln value to float32 (a device without
        # float64, Apple's MPS, multiplies in float32: within an ulp).
        if log10.dtype != torch.float64 and log10.device.type != "mps":
            log10 = log10.to(torch.float64)
        return (log10 * LN10).to(torch.float32)

    @staticmethod
    def reorder(states: torch.Tensor, index: torch.Tensor) -> torch.Tensor:
        """The states of the hypotheses a beam search keeps (``index`` into the batch)."""
        return states.index_select(0, index)

    def ids(self, words: Sequence[str]) -> torch.Tensor:
        """Our ids of ``words`` (``<unk>``'s where the model lacks one), on the tables' device: a decoder
        whose vocabulary differs takes ``log_probs(s).index_select(1, lm.ids(its_words))``."""
        stoi = self.vocab.stoi_
        return torch.as_tensor([stoi.get(w, UNK_ID) for w in words], dtype=torch.long, device=self.device)

    def _check(self, states: torch.Tensor, tokens: Optional[torch.Tensor] = None) -> None:
        if states.dim() != 2 or states.shape[1] != self.order - 1:
            raise InputError(f"states must be [batch, {self.order - 1}] (order {self.order}), got "
                             f"{tuple(states.shape)}", fix="make them with start(batch) and advance()")
        if tokens is not None and tokens.shape != states.shape[:1]:
            raise InputError(f"one token per state: tokens are {tuple(tokens.shape)}, states {tuple(states.shape)}",
                             fix="pass tokens of shape [batch]")
