"""Regularisers that pay on a CPU budget for recurrent LMs (Merity, Keskar & Socher 2018, "AWD-LSTM").

* **Embedding dropout** (Gal & Ghahramani 2016): whole word types are dropped from the embedding
  matrix for a batch, so every occurrence of a dropped word in the batch gets a zero vector.
* **Locked (variational) dropout**: one mask per sequence, shared across time steps, on the
  inputs of every layer and on the output of the last one -- the same units are dropped at every
  step, which regularises the recurrence instead of adding fresh noise at each token.
* **DropConnect on the hidden-to-hidden weights** ("weight drop"): the recurrent matrix itself is
  dropped once per batch, which keeps the fused kernels (the recurrence inside nn.LSTM is never
  touched step by step: the dropped matrix is handed to the fused call).
* **Activation regularisation** (AR: L2 of the last layer's dropped outputs) and **temporal
  activation regularisation** (TAR: L2 of the change of the undropped outputs between steps).
* **Weight averaging** (the "NT" of NT-ASGD): once the validation perplexity stops improving,
  the trainer keeps the running mean of the weights after every step and validates and saves
  that mean (:class:`WeightAverage`).

All of them act in training only: in ``eval()`` mode :class:`RegularisedRNN` computes exactly
what a stack of plain fused layers with the same weights computes.
"""
from __future__ import annotations

from contextlib import contextmanager
from typing import Dict, Iterator, Optional

import torch
import torch.nn.functional as F
from torch import nn
from torch.func import functional_call


def locked_dropout(x: torch.Tensor, p: float, training: bool) -> torch.Tensor:
    """Dropout of ``x`` (B, T, D) with one mask per row, shared by all T steps."""
    if not training or p <= 0.0:
        return x
    mask = x.new_empty(x.size(0), 1, x.size(2)).bernoulli_(1.0 - p) / (1.0 - p)
    return x * mask


def embedding_dropout(embedding: nn.Embedding, x: torch.Tensor, p: float, training: bool) -> torch.Tensor:
    """Look up ``x`` in ``embedding`` with whole rows (word types) dropped with probability ``p``."""
    if not training or p <= 0.0:
        return embedding(x)
    weight = embedding.weight
    mask = weight.new_empty(weight.size(0), 1).bernoulli_(1.0 - p) / (1.0 - p)
    return F.embedding(x, weight * mask, embedding.padding_idx)


def _layer(cell: str, input_size: int, hidden_size: int) -> nn.Module:
    common = dict(input_size=input_size, hidden_size=hidden_size, num_layers=1, batch_first=True)
    if cell == "lstm":
        return nn.LSTM(**common)
    if cell == "gru":
        return nn.GRU(**common)
    return nn.RNN(nonlinearity=cell[4:], **common)


class RegularisedRNN(nn.Module):
    """A stack of single-layer fused RNN/LSTM/GRU modules with locked dropout between the layers and
    DropConnect on each layer's hidden-to-hidden matrix.

    Takes and returns the same states as a multi-layer ``nn.LSTM`` (``(H, C)``, each
    (n_layers, B, hidden)) or ``nn.GRU``/``nn.RNN`` (``H``), so the model around it does not
    change.  ``dropout_between`` is the locked dropout on the input of layers 2..n.
    """

    def __init__(self, cell: str, input_size: int, hidden_size: int, n_layers: int, *,
                 dropout_between: float, weight_drop: float) -> None:
        super().__init__()
        self.cell = cell
        self.layers = nn.ModuleList(_layer(cell, input_size if k == 0 else hidden_size, hidden_size)
                                    for k in range(n_layers))
        self.dropout_between = float(dropout_between)
        self.weight_drop = float(weight_drop)

    def _run_layer(self, layer: nn.Module, x: torch.Tensor, state):
        if not self.training or self.weight_drop <= 0.0:
            return layer(x, state)
        # One DropConnect mask for the whole batch; the fused kernel runs with the dropped matrix.
        dropped = F.dropout(layer.weight_hh_l0, p=self.weight_drop, training=True)
        return functional_call(layer, {"weight_hh_l0": dropped}, (x, state))

    def forward(self, x: torch.Tensor, state: tuple):
        lstm = self.cell == "lstm"
        finals = []
        for k, layer in enumerate(self.layers):
            if k > 0:
                x = locked_dropout(x, self.dropout_between, self.training)
            layer_state = (state[0][k:k + 1], state[1][k:k + 1]) if lstm else state[0][k:k + 1]
            x, final = self._run_layer(layer, x, layer_state)
            finals.append(final)
        if lstm:
            return x, (torch.cat([f[0] for f in finals]), torch.cat([f[1] for f in finals]))
        return x, (torch.cat(finals),)


def activation_penalty(dropped: torch.Tensor, raw: torch.Tensor, *, ar: float, tar: float) -> torch.Tensor:
    """AR: ``ar * mean(dropped^2)``; TAR: ``tar * mean((raw[t+1] - raw[t])^2)`` over (B, T, D) outputs."""
    total = dropped.new_zeros(())
    if ar > 0:
        total = total + ar * dropped.pow(2).mean()
    if tar > 0 and raw.size(1) > 1:
        total = total + tar * (raw[:, 1:] - raw[:, :-1]).pow(2).mean()
    return total


class WeightAverage:
    """The running mean of a model's parameters since :meth:`start` (Polyak averaging, as in NT-ASGD).

    ``update()`` after each optimizer step; ``swapped_in()`` puts the mean into the model for a
    validation pass or a checkpoint and restores the trained weights afterwards.
    """

    def __init__(self, model: nn.Module) -> None:
        self.model = model
        self.mean: Optional[Dict[str, torch.Tensor]] = None
        self.count = 0

    @property
    def active(self) -> bool:
        return self.mean is not None

    def _params(self) -> Dict[str, torch.nn.Parameter]:
        return dict(self.model.named_parameters())  # tied weights appear once

    def start(self) -> None:
        self.mean = {name: p.detach().clone() for name, p in self._params().items()}
        self.count = 1

    @torch.no_grad()
    def update(self) -> None:
        if self.mean is None:
            return
        self.count += 1
        for name, p in self._params().items():
            self.mean[name].add_(p.detach() - self.mean[name], alpha=1.0 / self.count)

    @contextmanager
    def swapped_in(self) -> Iterator[None]:
        if self.mean is None:
            yield
            return
        params = self._params()
        saved = {name: p.detach().clone() for name, p in params.items()}
        with torch.no_grad():
            for name, p in params.items():
                p.copy_(self.mean[name])
        try:
            yield
        finally:
            with torch.no_grad():
                for name, p in params.items():
                    p.copy_(saved[name])

    def state(self) -> Optional[dict]:
        if self.mean is None:
            return None
        return {"count": self.count, "mean": {k: v.clone() for k, v in self.mean.items()}}

    def load(self, state: Optional[dict]) -> None:
        if not state:
            self.mean, self.count = None, 0
            return
        self.count = int(state["count"])
        self.mean = {k: v.clone() for k, v in state["mean"].items()}
