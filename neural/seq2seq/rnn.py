"""The encoder-decoder translator: a bidirectional RNN encoder, an RNN decoder, additive attention.

A translation model is a *conditional* language model of the target sentence::

    P(y | x) = prod_t P(y_t | y_<t, x),      y_1 .. y_T, then </s>

so it is trained and scored like every other model here: cross-entropy over the target's
predicted types (words, ``<unk>``, ``</s>``), perplexity over every target word and ``</s>``.

Encoder (bidirectional, ``n_layers`` deep).  Each layer runs one RNN left to right over its
input and another over the input reversed *within each sentence's length* (padding stays at
the end), and concatenates the two outputs: ``h_j = [h_j(fwd); h_j(bwd)]`` of width 2h.  Both
directions are the same code on differently ordered input, so the fused and the textbook
(scratch) implementations behave alike.  Final states are taken at each sentence's last real
token (packed sequences for the fused modules, frozen states for scratch).

Decoder, teacher forcing: the input at step t is ``y_{t-1}`` (``<s>`` at t = 1) and a context
vector ``c_t``; the output layer reads ``[s_t; c_t]``.  The decoder's initial state is
``tanh(W_b [h_fwd_final; h_bwd_final])`` per layer.

- plain: ``c_t = c`` for every t, the top layer's final encoder state (the textbook's
  encoder-decoder: one fixed vector carries the whole source);
- attention (Bahdanau et al. 2015): ``c_t = sum_j a_tj h_j`` with
  ``a_t = masked_softmax(w_v^T tanh(W_q s_{t-1} + W_k h_j))`` over the source positions; the
  query is the decoder's top-layer state before step t, padded positions get weight exactly 0.

Calls follow :mod:`neural.base`: ``model(x, targets)`` with ``x = (src, src_len, tgt_in)``
returns ``(logits, loss, None)``.  Generation uses :meth:`Seq2Seq.encode` and
:meth:`Seq2Seq.step` (see :mod:`neural.seq2seq.translate`).
"""
from __future__ import annotations

from typing import NamedTuple, Optional

import torch
from torch import nn
from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence

from ..base import LanguageModel
from ..cells import ScratchRNN, make_layer
from ..config import Seq2SeqConfig
from ..transformer import masked_softmax


def _fused(cell: str, input_size: int, hidden_size: int, n_layers: int = 1, dropout: float = 0.0) -> nn.Module:
    common = dict(input_size=input_size, hidden_size=hidden_size, num_layers=n_layers,
                  dropout=dropout if n_layers > 1 else 0.0, batch_first=True)
    if cell == "lstm":
        return nn.LSTM(**common)
    if cell == "gru":
        return nn.GRU(**common)
    return nn.RNN(nonlinearity=cell[4:], **common)


def reverse_padded(X: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
    """Reverse each row of ``X`` (B, S, ...) within its length; the padding stays where it is."""
    S = X.size(1)
    t = torch.arange(S, device=X.device)[None, :]
    L = lengths.to(X.device)[:, None]
    idx = torch.where(t < L, L - 1 - t, t)  # (B, S); an involution, so it also undoes itself
    return X.gather(1, idx.view(*idx.shape, *([1] * (X.dim() - 2))).expand_as(X))


def length_mask(lengths: torch.Tensor, S: int) -> torch.Tensor:
    """(B, S) bool: True at real tokens, False at padding."""
    return torch.arange(S, device=lengths.device)[None, :] < lengths[:, None]


class BiRNNEncoder(nn.Module):
    """Embedding -> ``n_layers`` bidirectional layers; every direction of every layer is one module."""

    def __init__(self, cfg: Seq2SeqConfig) -> None:
        super().__init__()
        self.cell, self.impl, self.hidden_size = cfg.cell, cfg.impl, cfg.hidden_size
        self.embedding = nn.Embedding(cfg.src_vocab_size, cfg.emb_size)
        self.drop = nn.Dropout(cfg.dropout)

        def direction(input_size: int) -> nn.Module:
            if cfg.impl == "fused":
                return _fused(cfg.cell, input_size, cfg.hidden_size)
            return make_layer(cfg.cell, input_size, cfg.hidden_size)

        self.layers = nn.ModuleList(
            nn.ModuleList([direction(cfg.emb_size if k == 0 else 2 * cfg.hidden_size) for _ in range(2)])
            for k in range(cfg.n_layers))

    def _run(self, layer: nn.Module, X: torch.Tensor, lengths: torch.Tensor) -> tuple:
        """One direction of one layer over ``X`` (B, S, d) -> (outputs (B, S, h), final state parts (B, h))."""
        B, S = X.shape[:2]
        zeros = X.new_zeros(B, self.hidden_size)
        init = (zeros, zeros.clone()) if self.cell == "lstm" else (zeros,)
        if self.impl == "scratch":
            return layer(X, init, lengths=lengths)
        packed = pack_padded_sequence(X, lengths.cpu(), batch_first=True, enforce_sorted=False)
        h0 = tuple(s[None] for s in init)
        out, final = layer(packed, h0 if self.cell == "lstm" else h0[0])
        out, _ = pad_packed_sequence(out, batch_first=True, total_length=S)
        final = final if isinstance(final, tuple) else (final,)
        return out, tuple(f[0] for f in final)

    def forward(self, src: torch.Tensor, lengths: torch.Tensor) -> tuple:
        """``src`` (B, S) ids, ``lengths`` (B,) -> (outputs (B, S, 2h), finals): ``finals`` holds one
        (n_layers, B, 2h) tensor per state part (H; H and C for the LSTM), ``[fwd; bwd]`` per layer."""
        X = self.drop(self.embedding(src))
        finals = []
        for k, (fwd, bwd) in enumerate(self.layers):
            if k > 0:
                X = self.drop(X)  # between layers, as the fused stacked modules do
            out_f, fin_f = self._run(fwd, X, lengths)
            out_b, fin_b = self._run(bwd, reverse_padded(X, lengths), lengths)
            X = torch.cat([out_f, reverse_padded(out_b, lengths)], dim=-1)
            finals.append(tuple(torch.cat([f, b], dim=-1) for f, b in zip(fin_f, fin_b)))
        return X, tuple(torch.stack(parts) for parts in zip(*finals))


class AdditiveAttention(nn.Module):
    """``score(q, k_j) = w_v^T tanh(W_q q + W_k k_j)``; weights = masked softmax over j."""

    def __init__(self, query_size: int, key_size: int, hidden_size: int) -> None:
        super().__init__()
        self.W_q = nn.Linear(query_size, hidden_size, bias=False)
        self.W_k = nn.Linear(key_size, hidden_size, bias=False)
        self.w_v = nn.Linear(hidden_size, 1, bias=False)

    def forward(self, query: torch.Tensor, keys_proj: torch.Tensor, values: torch.Tensor,
                mask: torch.Tensor) -> tuple:
        """``query`` (B, q), ``keys_proj = W_k(keys)`` (B, S, a) (computed once per sentence),
        ``values`` (B, S, v), ``mask`` (B, S) -> (context (B, v), weights (B, S))."""
        scores = self.w_v(torch.tanh(keys_proj + self.W_q(query)[:, None])).squeeze(-1)
        weights = masked_softmax(scores, mask)
        return torch.bmm(weights[:, None], values).squeeze(1), weights


class Memory(NamedTuple):
    """What the decoder reads of an encoded batch."""

    outputs: torch.Tensor  # (B, S, 2h) encoder states
    keys_proj: Optional[torch.Tensor]  # (B, S, a) = W_k(outputs), attention only
    mask: torch.Tensor  # (B, S) real source tokens
    context: torch.Tensor  # (B, 2h) the top layer's final [fwd; bwd] state (the plain decoder's context)

    def select(self, index: torch.Tensor) -> "Memory":
        """Rows ``index`` (beam search repeats and reorders sentences)."""
        return Memory(*(None if t is None else t.index_select(0, index) for t in self))


class Seq2Seq(LanguageModel):
    kind = "seq2seq"
    state_batch_dim = 1  # decoder states are (n_layers, B, h)

    def __init__(self, config: Seq2SeqConfig) -> None:
        super().__init__()
        config.validate()
        self.config = config
        h, ctx = config.hidden_size, 2 * config.hidden_size
        self.encoder = BiRNNEncoder(config)
        n_parts = 2 if config.cell == "lstm" else 1
        self.bridge = nn.ModuleList(nn.Linear(ctx, h) for _ in range(n_parts))
        self.embedding = nn.Embedding(config.vocab_size, config.emb_size)
        self.drop = nn.Dropout(config.dropout)
        if config.impl == "fused":
            self.rnn = _fused(config.cell, config.emb_size + ctx, h, config.n_layers, config.dropout)
        else:
            self.rnn = ScratchRNN(config.cell, config.emb_size + ctx, h, config.n_layers, config.dropout)
        self.attention = AdditiveAttention(h, ctx, config.attn_size) if config.attention else None
        self.decoder = nn.Linear(h + ctx, config.vocab_size)  # the output layer (LanguageModel.output)
        self.src_vocab = None  # the source Vocab, attached by whoever builds or loads the model

    # ------------------------------------------------------------------ encoder side
    def encode(self, src: torch.Tensor, src_len: torch.Tensor) -> tuple:
        """-> (Memory, the decoder's initial state)."""
        outputs, finals = self.encoder(src, src_len)
        init = []
        for j, (part, bridge) in enumerate(zip(finals, self.bridge)):
            z = bridge(part)  # (n_layers, B, h)
            init.append(torch.tanh(z) if j == 0 else z)  # H squashed like a state; the LSTM cell is not
        keys = None if self.attention is None else self.attention.W_k(outputs)
        memory = Memory(outputs, keys, length_mask(src_len, src.size(1)), finals[0][-1])
        return memory, tuple(init)

    # ------------------------------------------------------------------ decoder side
    def _rnn(self, X: torch.Tensor, state: tuple) -> tuple:
        if isinstance(self.rnn, ScratchRNN):
            return self.rnn(X, state)
        if self.config.cell == "lstm":
            return self.rnn(X, state)
        out, final = self.rnn(X, state[0])
        return out, (final,)

    def _context(self, memory: Memory, state: tuple) -> tuple:
        if self.attention is None:
            return memory.context, None
        return self.attention(state[0][-1], memory.keys_proj, memory.outputs, memory.mask)

    def step(self, memory: Memory, y_prev: torch.Tensor, state: tuple) -> tuple:
        """One decoding step: ``y_prev`` (B,) -> (log-probs (B, V), new state, attention (B, S) or None)."""
        c, weights = self._context(memory, state)
        x = torch.cat([self.drop(self.embedding(y_prev)), c], dim=-1)[:, None]
        h, state = self._rnn(x, state)
        logits, _ = self.output(self.drop(torch.cat([h[:, 0], c], dim=-1))[:, None], None)
        return torch.log_softmax(logits[:, 0].float(), dim=-1), state, weights

    def teacher_forced(self, src, src_len, tgt_in, targets=None, need_logits: bool = True,
                       need_weights: bool = False) -> tuple:
        """-> (logits (B, T, V), mean loss, attention weights (B, T, S) or None)."""
        memory, state = self.encode(src, src_len)
        emb = self.drop(self.embedding(tgt_in))  # (B, T, e)
        T = tgt_in.size(1)
        if self.attention is None:  # a fixed context: the whole target in one RNN call
            c = memory.context[:, None].expand(-1, T, -1)
            h, _ = self._rnn(torch.cat([emb, c], dim=-1), state)
            weights = None
        else:  # the query at step t is the state after step t-1: one step at a time
            hs, cs, ws = [], [], []
            for t in range(T):
                c_t, w_t = self._context(memory, state)
                h_t, state = self._rnn(torch.cat([emb[:, t], c_t], dim=-1)[:, None], state)
                hs.append(h_t[:, 0])
                cs.append(c_t)
                ws.append(w_t)
            h, c = torch.stack(hs, dim=1), torch.stack(cs, dim=1)
            weights = torch.stack(ws, dim=1) if need_weights else None
        logits, loss = self.output(self.drop(torch.cat([h, c], dim=-1)), targets, need_logits)
        return logits, loss, weights

    def forward(self, x: tuple, targets: Optional[torch.Tensor] = None, state=None, need_logits: bool = True):
        src, src_len, tgt_in = x
        logits, loss, _ = self.teacher_forced(src, src_len, tgt_in, targets, need_logits)
        return logits, loss, None
