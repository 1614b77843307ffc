"""The recurrent language model: embedding -> stacked RNN / LSTM / GRU -> output layer.

    >>> from neural.config import RNNConfig
    >>> m = RNNLM(RNNConfig(vocab_size=12, cell="gru", emb_size=8, hidden_size=8, n_layers=2))
    >>> import torch; logits, loss, state = m(torch.tensor([[2, 5, 6]]), targets=torch.tensor([[5, 6, 2]]))
    >>> tuple(logits.shape), len(state), tuple(state[0].shape)
    ((1, 3, 12), 1, (2, 1, 8))

``impl="fused"`` runs PyTorch's ``nn.RNN``/``nn.LSTM``/``nn.GRU`` (oneDNN kernels on
CPU); ``impl="scratch"`` runs :mod:`neural.cells`, the textbook equations.  The two
give the same outputs for the same weights; :meth:`RNNLM.convert` copies weights
between them.
"""
from __future__ import annotations

from typing import Optional

import torch
import torch.nn.functional as F
from torch import nn

from .base import LanguageModel, State
from .cells import ScratchRNN, fused_layer_to_scratch, scratch_layer_to_fused
from .config import RNNConfig
from .regularize import RegularisedRNN, activation_penalty, embedding_dropout, locked_dropout


def _fused_module(cfg: RNNConfig) -> nn.Module:
    inter = cfg.dropout if cfg.n_layers > 1 else 0.0
    common = dict(input_size=cfg.emb_size, hidden_size=cfg.hidden_size, num_layers=cfg.n_layers,
                  dropout=inter, batch_first=True)
    if cfg.cell == "lstm":
        return nn.LSTM(**common)
    if cfg.cell == "gru":
        return nn.GRU(**common)
    return nn.RNN(nonlinearity=cfg.cell[4:], **common)  # rnn_tanh -> "tanh", rnn_relu -> "relu"


class RNNLM(LanguageModel):
    kind = "rnn"
    state_batch_dim = 1  # states are (n_layers, B, hidden)

    def __init__(self, config: RNNConfig) -> None:
        super().__init__()
        config.validate()
        self.config = config
        self.embedding = nn.Embedding(config.vocab_size, config.emb_size)
        self.drop = nn.Dropout(config.dropout)
        self._acts = None  # (dropped, raw) last-layer outputs of the last training forward (AR/TAR)
        if config.regularised:
            self.rnn = RegularisedRNN(config.cell, config.emb_size, config.hidden_size, config.n_layers,
                                      dropout_between=config.dropout, weight_drop=config.weight_drop)
        elif config.impl == "fused":
            self.rnn = _fused_module(config)
        else:
            self.rnn = ScratchRNN(config.cell, config.emb_size, config.hidden_size, config.n_layers,
                                  config.dropout, gru_reset=config.gru_reset)
        self.decoder = nn.Linear(config.hidden_size, config.vocab_size)
        # Small uniform init of the input and output matrices helps the early epochs of SGD.
        nn.init.uniform_(self.embedding.weight, -0.1, 0.1)
        nn.init.zeros_(self.decoder.bias)
        if config.tie_weights:
            self.decoder.weight = self.embedding.weight
        else:
            nn.init.uniform_(self.decoder.weight, -0.1, 0.1)

    def init_state(self, batch_size: int) -> tuple:
        """Zero state: ``(H,)`` or ``(H, C)`` for the LSTM, each (n_layers, batch, hidden)."""
        w = self.embedding.weight
        zeros = w.new_zeros(self.config.n_layers, batch_size, self.config.hidden_size)
        return (zeros, zeros.clone()) if self.config.cell == "lstm" else (zeros,)

    def forward(self, x: torch.Tensor, targets: Optional[torch.Tensor] = None, state: State = None,
                need_logits: bool = True):
        if state is None:
            state = self.init_state(x.size(0))
        cfg = self.config
        p_in = cfg.dropout if cfg.dropout_in is None else cfg.dropout_in
        emb = embedding_dropout(self.embedding, x, cfg.emb_dropout, self.training)  # (B, T, emb)
        emb = locked_dropout(emb, p_in, self.training) if cfg.locked_dropout else F.dropout(emb, p_in, self.training)
        if isinstance(self.rnn, (ScratchRNN, RegularisedRNN)):  # both take and return the state tuple
            h, state = self.rnn(emb, state)
        elif self.config.cell == "lstm":
            h, state = self.rnn(emb, state)  # nn.LSTM takes and returns the (h, c) pair
        else:
            h, final = self.rnn(emb, state[0])
            state = (final,)
        dropped = locked_dropout(h, cfg.dropout, self.training) if cfg.locked_dropout else self.drop(h)
        self._acts = (dropped, h) if self.training else None
        logits, loss = self.output(dropped, targets, need_logits)  # h: (B, T, hidden)
        return logits, loss, state

    def activation_penalty(self, *, ar: float, tar: float) -> torch.Tensor:
        """AR + TAR of the last training forward's top-layer outputs (added to the loss by the trainer)."""
        if self._acts is None:
            raise RuntimeError("activation_penalty needs a forward pass in training mode first")
        return activation_penalty(*self._acts, ar=ar, tar=tar)

    # ------------------------------------------------------------------ fused <-> scratch
    def convert(self, impl: str) -> "RNNLM":
        """A copy of this model with the other implementation and the same weights."""
        cfg = RNNConfig.from_dict({**self.config.to_dict(), "impl": impl})
        other = RNNLM(cfg)
        other.load_state_dict(convert_state_dict(self.state_dict(), self.config, impl))
        return other.train(self.training)


def convert_state_dict(sd: dict, config: RNNConfig, impl: str) -> dict:
    """Rewrite an RNNLM state dict saved with ``config.impl`` for ``impl``."""
    if impl == config.impl:
        return dict(sd)
    if config.regularised:
        from corpora.errors import InputError

        raise InputError("a model with locked dropout or weight drop has no scratch equivalent",
                         fix="keep --impl fused")
    if config.gru_reset == "before":
        from corpora.errors import InputError

        raise InputError("a textbook GRU (gru_reset='before') has no fused equivalent", fix="keep --impl scratch")
    out = {k: v for k, v in sd.items() if not k.startswith("rnn.")}
    for k in range(config.n_layers):
        if impl == "scratch":
            fused = {name[len("rnn."):]: v for name, v in sd.items() if name.startswith("rnn.")}
            out.update({f"rnn.layers.{k}.{n}": v for n, v in fused_layer_to_scratch(config.cell, fused, k).items()})
        else:
            prefix = f"rnn.layers.{k}."
            scratch = {name[len(prefix):]: v for name, v in sd.items() if name.startswith(prefix)}
            out.update({f"rnn.{n}": v for n, v in scratch_layer_to_fused(config.cell, scratch, k).items()})
    return out
