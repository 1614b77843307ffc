"""The encoder-decoder Transformer translator (Vaswani et al. 2017), on the translators' interface.

Like :class:`~neural.seq2seq.rnn.Seq2Seq` it is a conditional language model of the target,
``P(y | x) = prod_t P(y_t | y_<t, x)``, trained and scored on the same tokens (every target word
and ``</s>``), and it exposes the same calls, so the trainer, greedy/beam/sampled decoding, the
perplexity and BLEU code never ask which translator they hold:

- ``model((src, src_len, tgt_in), targets)`` -> ``(logits, loss, None)`` (teacher forcing);
- ``encode(src, src_len)`` -> ``(memory, state)``; ``step(memory, y_prev, state)`` -> ``(log-probs,
  state, cross-attention (B, S))``; ``memory.select(rows)`` and ``select_state(state, rows)`` for beams;
- ``teacher_forced(..., need_weights=True)`` -> the cross-attention heatmap, and
  :meth:`Seq2SeqTransformer.attention_maps` -> all three kinds, per layer and head.

Encoder layer (``n_layers`` of them)::

    x = x + SelfAttn(LN(x))            keys: the source's real tokens (padding masked, weight exactly 0)
    x = x + FFN(LN(x))

Decoder layer::

    y = y + MaskedSelfAttn(LN(y))      position t sees target positions <= t only (causal mask)
    y = y + CrossAttn(LN(y), E)        queries from the target, keys and values from the encoder output E
    y = y + FFN(LN(y))

That is the pre-norm arrangement (``norm="pre"``: the residual path stays an identity and trains
without warm-up at these sizes); ``norm="post"`` is the original paper's ``LN(x + Sublayer(x))``.
Each attention is multi-head scaled dot-product attention, ``softmax(Q K^T / sqrt(d_head)) V`` per
head, heads concatenated and projected.  Positions are added to the embeddings: sinusoidal (any
length) or learned (up to ``max_len``).  The target embedding is the output layer's weight
(``tie_weights``).

Decoding keeps a cache of every decoder layer's self-attention keys and values, so a step costs one
position, not the whole prefix: ``state = (K, V)``, each ``(B, n_layers, n_heads, t, d_head)``.  The
encoder output's cross-attention keys and values are computed once per sentence, in ``encode``.

The model's ``kind`` is ``"seq2seq"`` (a translator: checkpoints store both vocabularies and load
only as translators); its config's ``arch = "transformer"`` tells it from a GRU translator's
(:func:`build_translator`, :class:`TranslatorConfig`).
"""
from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import NamedTuple, Optional

import torch
import torch.nn.functional as F
from torch import nn

from corpora.errors import InputError

from ..base import LanguageModel
from ..config import SEQ2SEQ_TRAIN, Seq2SeqConfig, ConfigBase, check_transformer, check_positive
from .rnn import Seq2Seq, length_mask
from ..transformer import FeedForward, init_weights, scale_residual_outputs, scratch_attention, sinusoidal_table


# ---------------------------------------------------------------------------- config
@dataclass
class Seq2SeqTransformerConfig(ConfigBase):
    """An encoder-decoder Transformer translator (``n_layers`` encoder and ``n_layers`` decoder layers)."""

    vocab_size: int  # target ids incl. specials; the output predicts vocab_size - 2 types (as the LMs)
    src_vocab_size: int  # source ids incl. specials
    arch: str = "transformer"  # what tells this config from a GRU translator's (Seq2SeqConfig) in a checkpoint
    d_model: int = 256  # width of the residual stream (= embedding width) on both sides
    n_heads: int = 4  # must divide d_model
    n_layers: int = 2  # encoder layers, and as many decoder layers
    d_ff: int = 512  # hidden width of the feed-forward sublayer
    dropout: float = 0.3
    positional: str = "sinusoidal"  # sinusoidal (any length) | learned (sentences up to max_len tokens)
    max_len: int = 128  # learned positions: the longest source (with </s>) or target (with <s>)
    norm: str = "pre"  # pre: x + Sublayer(LN(x)); post: LN(x + Sublayer(x)) (the original paper)
    attention: str = "sdpa"  # sdpa: torch's fused kernel; scratch: explicit masked softmax (same numbers)
    tie_weights: bool = True  # the target embedding is the output layer's weight

    def validate(self) -> None:
        check_positive("vocab_size", self.vocab_size, "a target vocabulary with")
        check_positive("src_vocab_size", self.src_vocab_size, "a source vocabulary with")
        if self.arch != "transformer":
            raise InputError(f"a Transformer translator's arch must be 'transformer', got {self.arch!r}",
                             fix="build a GRU translator from a Seq2SeqConfig instead")
        check_transformer(self, "max_len", "max_len")
        if self.norm not in ("pre", "post"):
            raise InputError(f"unknown layer-norm placement {self.norm!r}", fix="use pre or post")


# Sized for this 2-core CPU: tiny for tests, small for `compare` (its default size), default for
# `ngramlm seq2seq train --arch transformer`.  fra-eng has 4,000 training pairs: wide or deep models
# only overfit sooner, so the default stays at 2 + 2 layers of 256 (the textbook's fra-eng size).
SEQ2SEQ_TRANSFORMER_PRESETS = {
    "tiny": Seq2SeqTransformerConfig(vocab_size=0, src_vocab_size=0, d_model=32, n_heads=2, n_layers=1, d_ff=64,
                                     dropout=0.0),
    "small": Seq2SeqTransformerConfig(vocab_size=0, src_vocab_size=0, d_model=128, n_heads=4, n_layers=2, d_ff=256,
                                      dropout=0.2),
    "default": Seq2SeqTransformerConfig(vocab_size=0, src_vocab_size=0),
}
# The GRU translators' recipe (Adam, plateau decay, early stopping) at half their rate, as there is no
# warm-up.  Not tuned on fra-eng yet (docs/seq2seq.md): the plateau decay lowers it when an epoch does not help.
SEQ2SEQ_TRANSFORMER_TRAIN = replace(SEQ2SEQ_TRAIN, lr=5e-4)


def resolve_seq2seq_transformer_config(*, vocab_size: int, src_vocab_size: int, size: str = "default",
                                       model: Optional[dict] = None, train: Optional[dict] = None) -> tuple:
    """``(Seq2SeqTransformerConfig, TrainConfig)``: the ``size`` preset and the Transformer translators'
    recipe, then the overrides given (None is "not given"); ``d_ff`` defaults to 2 x ``d_model``."""
    m = {k: v for k, v in (model or {}).items() if v is not None}
    t = {k: v for k, v in (train or {}).items() if v is not None}
    if size not in SEQ2SEQ_TRANSFORMER_PRESETS:
        raise InputError(f"unknown size {size!r}", fix=f"use one of {', '.join(SEQ2SEQ_TRANSFORMER_PRESETS)}")
    if "d_model" in m:
        m.setdefault("d_ff", 2 * m["d_model"])
    mcfg = replace(SEQ2SEQ_TRANSFORMER_PRESETS[size], vocab_size=vocab_size, src_vocab_size=src_vocab_size, **m)
    return mcfg, replace(SEQ2SEQ_TRANSFORMER_TRAIN, **t)


# ---------------------------------------------------------------------------- layers
class MultiHeadAttention(nn.Module):
    """Queries from one sequence, keys and values from another (or the same): ``n_heads`` heads of
    width ``d_model / n_heads``, concatenated and projected."""

    def __init__(self, cfg: Seq2SeqTransformerConfig) -> None:
        super().__init__()
        self.n_heads, self.impl, self.p_drop = cfg.n_heads, cfg.attention, cfg.dropout
        self.q = nn.Linear(cfg.d_model, cfg.d_model)
        self.kv = nn.Linear(cfg.d_model, 2 * cfg.d_model)
        self.proj = nn.Linear(cfg.d_model, cfg.d_model)
        self.attn_drop = nn.Dropout(cfg.dropout)

    def _heads(self, x: torch.Tensor) -> torch.Tensor:
        B, L, C = x.shape
        return x.view(B, L, self.n_heads, C // self.n_heads).transpose(1, 2)  # (B, H, L, d_head)

    def keys_values(self, x: torch.Tensor) -> tuple:
        """``x`` (B, L, d) -> (K, V), each (B, H, L, d_head)."""
        k, v = self.kv(x).chunk(2, dim=-1)
        return self._heads(k), self._heads(v)

    def forward(self, x: torch.Tensor, k: torch.Tensor, v: torch.Tensor, allowed: torch.Tensor,
                need_weights: bool = False) -> tuple:
        """Queries from ``x`` (B, T, d) over ``k``, ``v`` (B, H, S, d_head); ``allowed`` (bool, broadcast
        to (B, H, T, S)) is True where a query may look.  -> (output (B, T, d), weights (B, H, T, S) or None)."""
        q = self._heads(self.q(x))
        if self.impl == "sdpa" and not need_weights:
            y = F.scaled_dot_product_attention(q, k, v, attn_mask=allowed,
                                               dropout_p=self.p_drop if self.training else 0.0)
            weights = None
        else:
            y, weights = scratch_attention(q, k, v, self.attn_drop, allowed)
        B, H, T, dh = y.shape
        return self.proj(y.transpose(1, 2).reshape(B, T, H * dh)), weights


class _Sublayers(nn.Module):
    """Residual connections around sublayers, pre- or post-norm."""

    def __init__(self, cfg: Seq2SeqTransformerConfig) -> None:
        super().__init__()
        self.pre = cfg.norm == "pre"
        self.drop = nn.Dropout(cfg.dropout)

    def inp(self, x: torch.Tensor, ln: nn.LayerNorm) -> torch.Tensor:
        """What a sublayer reads: ``LN(x)`` (pre-norm) or ``x`` (post-norm)."""
        return ln(x) if self.pre else x

    def add(self, x: torch.Tensor, out: torch.Tensor, ln: nn.LayerNorm) -> torch.Tensor:
        """``x + out`` (pre-norm) or ``LN(x + out)`` (post-norm), ``out`` dropped out."""
        return x + self.drop(out) if self.pre else ln(x + self.drop(out))


class EncoderLayer(_Sublayers):
    def __init__(self, cfg: Seq2SeqTransformerConfig) -> None:
        super().__init__(cfg)
        self.ln_self, self.self_attn = nn.LayerNorm(cfg.d_model), MultiHeadAttention(cfg)
        self.ln_ff, self.ff = nn.LayerNorm(cfg.d_model), FeedForward(cfg, F.relu)

    def forward(self, x: torch.Tensor, allowed: torch.Tensor, need_weights: bool = False) -> tuple:
        h = self.inp(x, self.ln_self)
        a, w = self.self_attn(h, *self.self_attn.keys_values(h), allowed, need_weights)
        x = self.add(x, a, self.ln_self)
        return self.add(x, self.ff(self.inp(x, self.ln_ff)), self.ln_ff), w


class DecoderLayer(_Sublayers):
    def __init__(self, cfg: Seq2SeqTransformerConfig) -> None:
        super().__init__(cfg)
        self.ln_self, self.self_attn = nn.LayerNorm(cfg.d_model), MultiHeadAttention(cfg)
        self.ln_cross, self.cross_attn = nn.LayerNorm(cfg.d_model), MultiHeadAttention(cfg)
        self.ln_ff, self.ff = nn.LayerNorm(cfg.d_model), FeedForward(cfg, F.relu)

    def forward(self, y: torch.Tensor, past: tuple, memory_kv: tuple, src_allowed: torch.Tensor,
                need_weights: bool = False) -> tuple:
        """``y`` (B, T, d): the target positions ``t .. t+T-1`` after the ``t`` cached in ``past`` = (K, V)
        (B, H, t, d_head).  -> (output (B, T, d), new (K, V) with t + T positions, (self, cross) weights)."""
        h = self.inp(y, self.ln_self)
        k, v = self.self_attn.keys_values(h)
        k, v = torch.cat([past[0], k], dim=2), torch.cat([past[1], v], dim=2)
        T, L = y.size(1), k.size(2)
        causal = torch.ones(T, L, dtype=torch.bool, device=y.device).tril(diagonal=L - T)  # query i at L-T+i
        a, w_self = self.self_attn(h, k, v, causal, need_weights)
        y = self.add(y, a, self.ln_self)
        c, w_cross = self.cross_attn(self.inp(y, self.ln_cross), *memory_kv, src_allowed, need_weights)
        y = self.add(y, c, self.ln_cross)
        y = self.add(y, self.ff(self.inp(y, self.ln_ff)), self.ln_ff)
        return y, (k, v), (w_self, w_cross)


class Memory(NamedTuple):
    """What the decoder reads of an encoded batch (every field batch-first, so beams select rows)."""

    outputs: torch.Tensor  # (B, S, d) the encoder output E
    mask: torch.Tensor  # (B, S) real source tokens
    keys: torch.Tensor  # (B, n_layers, H, S, d_head) each decoder layer's cross-attention keys of E
    values: torch.Tensor  # (B, n_layers, H, S, d_head) and values

    def select(self, index: torch.Tensor) -> "Memory":
        """Rows ``index`` (beam search repeats and reorders sentences)."""
        return Memory(*(t.index_select(0, index) for t in self))


# ---------------------------------------------------------------------------- the model
class Seq2SeqTransformer(LanguageModel):
    kind = "seq2seq"  # a translator (see the module docstring)
    state_batch_dim = 0  # state = (K, V) caches, (B, n_layers, H, t, d_head)

    def __init__(self, config: Seq2SeqTransformerConfig) -> None:
        super().__init__()
        config.validate()
        self.config = config
        d = config.d_model
        self.src_embedding = nn.Embedding(config.src_vocab_size, d)
        self.embedding = nn.Embedding(config.vocab_size, d)  # the target's
        if config.positional == "learned":
            self.src_pos = nn.Embedding(config.max_len, d)
            self.tgt_pos = nn.Embedding(config.max_len, d)
        self.drop = nn.Dropout(config.dropout)
        self.enc_layers = nn.ModuleList(EncoderLayer(config) for _ in range(config.n_layers))
        self.dec_layers = nn.ModuleList(DecoderLayer(config) for _ in range(config.n_layers))
        pre = config.norm == "pre"  # pre-norm streams are normalised once at the end
        self.ln_enc = nn.LayerNorm(d) if pre else nn.Identity()
        self.ln_dec = nn.LayerNorm(d) if pre else nn.Identity()
        self.decoder = nn.Linear(d, config.vocab_size)  # the output layer (LanguageModel.output)
        self.apply(init_weights)
        scale_residual_outputs(self, 3 * config.n_layers)  # as TransformerLM, over 3 x n_layers branches
        if config.tie_weights:
            self.decoder.weight = self.embedding.weight
        self.src_vocab = None  # the source Vocab, attached by whoever builds or loads the model

    def _embed(self, ids: torch.Tensor, table: nn.Embedding, pos: Optional[nn.Embedding], start: int = 0):
        """Token embeddings + positions ``start .. start+L-1``, dropped out: (B, L, d)."""
        L, d = ids.size(1), self.config.d_model
        if self.config.positional == "learned":
            if start + L > self.config.max_len:
                raise InputError(f"a sentence of {start + L} tokens but learned positions cover {self.config.max_len}",
                                 fix="translate shorter sentences, or train with sinusoidal positions (the default)")
            return self.drop(table(ids) + pos.weight[start:start + L])
        # sqrt(d): the tied embeddings are small (std 0.02), the sinusoids of order 1.
        p = sinusoidal_table(start + L, d).to(ids.device)[start:]
        return self.drop(table(ids) * math.sqrt(d) + p)

    # ------------------------------------------------------------------ encoder side
    def _encode(self, src: torch.Tensor, src_len: torch.Tensor, need_weights: bool = False) -> tuple:
        mask = length_mask(src_len.to(src.device), src.size(1))  # (B, S)
        allowed = mask[:, None, None, :]  # every query (padded ones too) looks at the real tokens only
        x = self._embed(src, self.src_embedding, getattr(self, "src_pos", None))
        weights = []
        for layer in self.enc_layers:
            x, w = layer(x, allowed, need_weights)
            weights.append(w)
        x = self.ln_enc(x)
        kv = [layer.cross_attn.keys_values(x) for layer in self.dec_layers]
        memory = Memory(x, mask, torch.stack([k for k, _ in kv], dim=1), torch.stack([v for _, v in kv], dim=1))
        return memory, weights

    def empty_state(self, batch: int, device=None) -> tuple:
        """The decoder's state before its first step: empty key/value caches."""
        c = self.config
        shape = (batch, c.n_layers, c.n_heads, 0, c.d_model // c.n_heads)
        return torch.zeros(shape, device=device), torch.zeros(shape, device=device)

    def encode(self, src: torch.Tensor, src_len: torch.Tensor) -> tuple:
        """-> (Memory, the decoder's initial state)."""
        memory, _ = self._encode(src, src_len)
        return memory, self.empty_state(src.size(0), src.device)

    # ------------------------------------------------------------------ decoder side
    def _decode(self, memory: Memory, y_in: torch.Tensor, state: tuple, need_weights: bool = False) -> tuple:
        """Target positions after those cached in ``state`` -> (hidden (B, T, d), new state, per-layer
        self-attention weights, per-layer cross-attention weights)."""
        t0 = state[0].size(3)
        y = self._embed(y_in, self.embedding, getattr(self, "tgt_pos", None), start=t0)
        src_allowed = memory.mask[:, None, None, :]
        ks, vs, w_self, w_cross = [], [], [], []
        for j, layer in enumerate(self.dec_layers):
            y, (k, v), (ws, wc) = layer(y, (state[0][:, j], state[1][:, j]), (memory.keys[:, j], memory.values[:, j]),
                                        src_allowed, need_weights)
            ks.append(k)
            vs.append(v)
            w_self.append(ws)
            w_cross.append(wc)
        return self.ln_dec(y), (torch.stack(ks, dim=1), torch.stack(vs, dim=1)), w_self, w_cross

    def step(self, memory: Memory, y_prev: torch.Tensor, state: tuple) -> tuple:
        """One decoding step: ``y_prev`` (B,) -> (log-probs (B, V), new state, cross-attention (B, S): the
        last layer's, averaged over heads)."""
        h, state, _, w_cross = self._decode(memory, y_prev[:, None], state, need_weights=True)
        logits, _ = self.output(h, None)
        return torch.log_softmax(logits[:, 0].float(), dim=-1), state, w_cross[-1].mean(dim=1)[:, 0]

    def teacher_forced(self, src, src_len, tgt_in, targets=None, need_logits: bool = True,
                       need_weights: bool = False) -> tuple:
        """-> (logits (B, T, V), mean loss, and with ``need_weights`` the cross-attention (B, T, S) of the
        last layer averaged over the heads (else None))."""
        memory, _ = self._encode(src, src_len)
        h, _, _, w_cross = self._decode(memory, tgt_in, self.empty_state(src.size(0), src.device), need_weights)
        logits, loss = self.output(h, targets, need_logits)
        return logits, loss, (w_cross[-1].mean(dim=1) if need_weights else None)

    @torch.no_grad()
    def attention_maps(self, src: torch.Tensor, src_len: torch.Tensor, tgt_in: torch.Tensor) -> dict:
        """Teacher-forced attention weights of every layer and head, for heatmaps: ``{"encoder": [(B, H, S, S)],
        "decoder": [(B, H, T, T)], "cross": [(B, H, T, S)]}``, one tensor per layer, each row summing to 1."""
        memory, enc = self._encode(src, src_len, need_weights=True)
        _, _, dec, cross = self._decode(memory, tgt_in, self.empty_state(src.size(0), src.device), need_weights=True)
        return {"encoder": enc, "decoder": dec, "cross": cross}

    def forward(self, x: tuple, targets: Optional[torch.Tensor] = None, state=None, need_logits: bool = True):
        src, src_len, tgt_in = x
        logits, loss, _ = self.teacher_forced(src, src_len, tgt_in, targets, need_logits)
        return logits, loss, None


# ---------------------------------------------------------------------------- the kind "seq2seq"
class TranslatorConfig:
    """The config of a checkpoint's kind ``"seq2seq"``: a GRU translator's (:class:`Seq2SeqConfig`) or,
    with ``arch = "transformer"``, a Transformer translator's."""

    @staticmethod
    def from_dict(data: dict):
        if data.get("arch") == "transformer":
            return Seq2SeqTransformerConfig.from_dict(data)
        return Seq2SeqConfig.from_dict(data)


def build_translator(config) -> LanguageModel:
    """A translator from its config: :class:`Seq2SeqTransformer` or :class:`~neural.seq2seq.rnn.Seq2Seq`."""
    if isinstance(config, Seq2SeqTransformerConfig):
        return Seq2SeqTransformer(config)
    return Seq2Seq(config)
