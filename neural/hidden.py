"""The last hidden layer of any language model, recorded while it scores text.

Every model hands its last layer's states to :meth:`neural.base.LanguageModel.output`
(the RNN its top layer's outputs, after a dropout that is the identity in eval mode;
the Transformer its final-LayerNorm states of the new positions).  Those are the
vectors the output layer turns into a distribution, and the ones a continuous cache
(:mod:`neural.adaptation.cache`) compares.  Recording them at that call -- rather than adding a
return value to every ``forward`` -- leaves the models and their callers untouched::

    with recording_hidden(model) as states:
        logits, _, state = model(x, None, state)
    h = states[-1]                       # (B, T, d), detached
"""
from __future__ import annotations

from contextlib import contextmanager
from typing import Iterator, List

import torch

from .base import LanguageModel


@contextmanager
def recording_hidden(model: LanguageModel) -> Iterator[List[torch.Tensor]]:
    """Within the block, every call of ``model`` appends its (B, T, d) last-layer states (detached) to the list."""
    captured: List[torch.Tensor] = []
    shadowed = model.__dict__.get("output")  # an instance-level override already in place (nested use)
    inner = model.output

    def output(h, targets, need_logits=True):
        captured.append(h.detach())
        return inner(h, targets, need_logits)

    # An instance attribute shadows the class's method for this model object only.
    object.__setattr__(model, "output", output)
    try:
        yield captured
    finally:
        if shadowed is None:
            object.__delattr__(model, "output")
        else:
            object.__setattr__(model, "output", shadowed)
