"""Recurrent layers written as the textbook equations, and weight conversion from PyTorch's fused ones.

Notation (row vectors, a minibatch ``X_t`` of shape (n, d), states of shape (n, h))::

    vanilla RNN   H_t = phi(X_t W_xh + H_{t-1} W_hh + b_h)                 phi = tanh or relu

    LSTM          I_t = sigma(X_t W_xi + H_{t-1} W_hi + b_i)               input gate
                  F_t = sigma(X_t W_xf + H_{t-1} W_hf + b_f)               forget gate
                  O_t = sigma(X_t W_xo + H_{t-1} W_ho + b_o)               output gate
                  C~_t = tanh(X_t W_xc + H_{t-1} W_hc + b_c)               candidate cell
                  C_t = F_t * C_{t-1} + I_t * C~_t                         additive cell update
                  H_t = O_t * tanh(C_t)

    GRU           Z_t = sigma(X_t W_xz + H_{t-1} W_hz + b_z)               update gate
                  R_t = sigma(X_t W_xr + H_{t-1} W_hr + b_r)               reset gate
                  H~_t = tanh(X_t W_xh + b_xh + R_t * (H_{t-1} W_hh + b_hh))   reset "after"
                  H_t = Z_t * H_{t-1} + (1 - Z_t) * H~_t

The textbook GRU applies the reset gate *before* the product,
``H~_t = tanh(X_t W_xh + (R_t * H_{t-1}) W_hh + b_h)``; cuDNN and PyTorch's ``nn.GRU``
apply it *after* (as above).  The two are different functions of the weights, so
the default here is "after" -- the one the fused kernel computes -- and
``gru_reset="before"`` gives the textbook variant (scratch only).

The input part ``X_t W_x*`` of every step is computed for all time steps in one
matrix product before the loop; only the ``H_{t-1} W_h*`` part is sequential.

Weight layout of the fused modules (``nn.RNN``/``nn.LSTM``/``nn.GRU``): per layer
``weight_ih_l{k}`` (gates*h, d), ``weight_hh_l{k}`` (gates*h, h) and two biases,
gates stacked in the order LSTM (i, f, c~, o), GRU (r, z, h~).  The converters below
transpose and split those into the textbook matrices and back.
"""
from __future__ import annotations

import math
from typing import Optional

import torch
from torch import nn

# Names of the gate blocks, in the order the fused weights stack them.
FUSED_ORDER = {"rnn_tanh": ("h",), "rnn_relu": ("h",), "lstm": ("i", "f", "c", "o"), "gru": ("r", "z", "h")}


class _ScratchLayer(nn.Module):
    """One recurrent layer: parameters W_x<g> (d, h), W_h<g> (h, h), b_<g> (h,) per gate block g."""

    def __init__(self, cell: str, input_size: int, hidden_size: int) -> None:
        super().__init__()
        self.cell = cell
        self.hidden_size = hidden_size
        bound = 1.0 / math.sqrt(hidden_size)  # the same init distribution as the fused modules

        def param(*shape: int) -> nn.Parameter:
            return nn.Parameter(torch.empty(*shape).uniform_(-bound, bound))

        for g in FUSED_ORDER[cell]:
            setattr(self, f"W_x{g}", param(input_size, hidden_size))
            setattr(self, f"W_h{g}", param(hidden_size, hidden_size))
            setattr(self, f"b_{g}", param(hidden_size))
        if cell == "gru":
            # The candidate keeps a separate recurrent bias: it sits inside R_t * (...).
            self.b_hh = param(hidden_size)

    def _input_part(self) -> tuple:
        """The gate matrices side by side: (d, G*h), (h, G*h), (G*h,)."""
        order = FUSED_ORDER[self.cell]
        W_x = torch.cat([getattr(self, f"W_x{g}") for g in order], dim=1)
        W_h = torch.cat([getattr(self, f"W_h{g}") for g in order], dim=1)
        b = torch.cat([getattr(self, f"b_{g}") for g in order])
        return W_x, W_h, b


def _alive(X: torch.Tensor, lengths: Optional[torch.Tensor]) -> Optional[torch.Tensor]:
    """(n, T) bool, True at the steps inside each row's length; None when every step counts."""
    if lengths is None:
        return None
    return torch.arange(X.size(1), device=X.device)[None, :] < lengths.to(X.device)[:, None]


def _keep(alive: Optional[torch.Tensor], t: int, new: torch.Tensor, old: torch.Tensor) -> torch.Tensor:
    # Past a row's length its state is frozen, so the final state is the one at its last real
    # step -- what packed sequences give the fused modules -- whatever padding follows.
    return new if alive is None else torch.where(alive[:, t, None], new, old)


class RNNLayer(_ScratchLayer):
    """H_t = phi(X_t W_xh + H_{t-1} W_hh + b_h)."""

    def forward(self, X: torch.Tensor, state: tuple, lengths: Optional[torch.Tensor] = None) -> tuple:
        (H,) = state  # (n, h)
        phi = torch.tanh if self.cell == "rnn_tanh" else torch.relu
        XW = X @ self.W_xh + self.b_h  # (n, T, h): the input part of every step at once
        alive = _alive(X, lengths)
        outputs = []
        for t in range(X.size(1)):
            H = _keep(alive, t, phi(XW[:, t] + H @ self.W_hh), H)
            outputs.append(H)
        return torch.stack(outputs, dim=1), (H,)


class LSTMLayer(_ScratchLayer):
    """Gates I, F, O and candidate C~ from [X_t, H_{t-1}]; C_t = F*C_{t-1} + I*C~; H_t = O*tanh(C_t)."""

    def forward(self, X: torch.Tensor, state: tuple, lengths: Optional[torch.Tensor] = None) -> tuple:
        H, C = state  # (n, h) each
        W_x, W_h, b = self._input_part()  # gate blocks in the order i, f, c, o
        XW = X @ W_x + b  # (n, T, 4h)
        alive = _alive(X, lengths)
        outputs = []
        for t in range(X.size(1)):
            pre_i, pre_f, pre_c, pre_o = (XW[:, t] + H @ W_h).chunk(4, dim=-1)
            I, F, O = torch.sigmoid(pre_i), torch.sigmoid(pre_f), torch.sigmoid(pre_o)
            C_tilde = torch.tanh(pre_c)
            C_new = F * C + I * C_tilde
            H = _keep(alive, t, O * torch.tanh(C_new), H)
            C = _keep(alive, t, C_new, C)
            outputs.append(H)
        return torch.stack(outputs, dim=1), (H, C)


class GRULayer(_ScratchLayer):
    """Update gate Z, reset gate R, candidate H~; H_t = Z*H_{t-1} + (1-Z)*H~."""

    def __init__(self, cell: str, input_size: int, hidden_size: int, reset: str = "after") -> None:
        super().__init__(cell, input_size, hidden_size)
        self.reset = reset

    def forward(self, X: torch.Tensor, state: tuple, lengths: Optional[torch.Tensor] = None) -> tuple:
        (H,) = state
        h = self.hidden_size
        alive = _alive(X, lengths)
        W_x, _, b = self._input_part()  # blocks r, z, h
        W_hrz = torch.cat([self.W_hr, self.W_hz], dim=1)  # (h, 2h)
        XW = X @ W_x + b  # (n, T, 3h); the candidate's block carries b_h (the input-side bias)
        outputs = []
        for t in range(X.size(1)):
            x_r, x_z, x_h = XW[:, t].split(h, dim=-1)
            h_r, h_z = (H @ W_hrz).split(h, dim=-1)
            R = torch.sigmoid(x_r + h_r)
            Z = torch.sigmoid(x_z + h_z)
            if self.reset == "after":
                H_tilde = torch.tanh(x_h + R * (H @ self.W_hh + self.b_hh))
            else:  # textbook: reset the old state, then multiply
                H_tilde = torch.tanh(x_h + (R * H) @ self.W_hh + self.b_hh)
            H = _keep(alive, t, Z * H + (1 - Z) * H_tilde, H)
            outputs.append(H)
        return torch.stack(outputs, dim=1), (H,)


def make_layer(cell: str, input_size: int, hidden_size: int, gru_reset: str = "after") -> _ScratchLayer:
    if cell == "lstm":
        return LSTMLayer(cell, input_size, hidden_size)
    if cell == "gru":
        return GRULayer(cell, input_size, hidden_size, reset=gru_reset)
    return RNNLayer(cell, input_size, hidden_size)


class ScratchRNN(nn.Module):
    """A stack of scratch layers with dropout between layers, called like the fused module.

    ``forward(X (n, T, d), state)`` -> ``(outputs (n, T, h), state)`` where ``state`` is
    ``(H,)`` or, for the LSTM, ``(H, C)``, each of shape (n_layers, n, h) -- the fused
    modules' layout, so the two implementations are interchangeable.
    """

    def __init__(self, cell: str, input_size: int, hidden_size: int, n_layers: int, dropout: float,
                 gru_reset: str = "after") -> None:
        super().__init__()
        self.cell = cell
        self.layers = nn.ModuleList(
            make_layer(cell, input_size if k == 0 else hidden_size, hidden_size, gru_reset) for k in range(n_layers)
        )
        self.between = nn.Dropout(dropout)  # on every layer's output but the last, like the fused modules

    def forward(self, X: torch.Tensor, state: tuple) -> tuple:
        finals = []
        for k, layer in enumerate(self.layers):
            if k > 0:
                X = self.between(X)
            X, final = layer(X, tuple(s[k] for s in state))
            finals.append(final)
        return X, tuple(torch.stack(parts) for parts in zip(*finals))


# ---------------------------------------------------------------------------- fused <-> scratch
def fused_layer_to_scratch(cell: str, fused: dict, k: int) -> dict:
    """Textbook parameters of layer ``k`` from a fused module's state dict (keys without prefix)."""
    W_ih, W_hh = fused[f"weight_ih_l{k}"], fused[f"weight_hh_l{k}"]
    b_ih, b_hh = fused[f"bias_ih_l{k}"], fused[f"bias_hh_l{k}"]
    order = FUSED_ORDER[cell]
    h = W_hh.size(1)
    out = {}
    for j, g in enumerate(order):
        rows = slice(j * h, (j + 1) * h)
        out[f"W_x{g}"] = W_ih[rows].t().contiguous()
        out[f"W_h{g}"] = W_hh[rows].t().contiguous()
        if cell == "gru" and g == "h":
            out["b_h"] = b_ih[rows].clone()  # input-side bias, outside R_t * (...)
            out["b_hh"] = b_hh[rows].clone()  # recurrent bias, inside R_t * (...)
        else:
            out[f"b_{g}"] = b_ih[rows] + b_hh[rows]  # the two fused biases only ever appear summed
    return out


def scratch_layer_to_fused(cell: str, scratch: dict, k: int) -> dict:
    """Inverse of :func:`fused_layer_to_scratch` (the summed biases go to ``bias_ih``, ``bias_hh`` = 0)."""
    order = FUSED_ORDER[cell]
    W_ih = torch.cat([scratch[f"W_x{g}"].t() for g in order], dim=0)
    W_hh = torch.cat([scratch[f"W_h{g}"].t() for g in order], dim=0)
    b_ih = torch.cat([scratch[f"b_{g}"] for g in order])
    b_hh = torch.zeros_like(b_ih)
    if cell == "gru":
        h = W_hh.size(1)
        b_hh[2 * h:] = scratch["b_hh"]
    return {f"weight_ih_l{k}": W_ih.contiguous(), f"weight_hh_l{k}": W_hh.contiguous(),
            f"bias_ih_l{k}": b_ih, f"bias_hh_l{k}": b_hh}
