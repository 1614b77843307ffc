"""A decoder-only Transformer LM: token embedding + positions -> pre-norm blocks -> output layer.

Each block is ``x = x + Attn(LN(x))`` then ``x = x + FFN(LN(x))`` (pre-norm: the
residual path stays an identity, which trains without warm-up tricks at this size).
Attention is causal multi-head scaled dot-product attention::

    A = softmax(mask(Q K^T / sqrt(d_head)))      (B, H, T, T), future positions masked to -inf
    Y = A V

computed either from scratch (:func:`masked_softmax`) or by
``torch.nn.functional.scaled_dot_product_attention`` (``attention="sdpa"``, the
default: fused and cheaper in memory).  The two agree to float rounding.

The state the model carries between calls is the tail of the text it has read, as
token ids: ``state = (ids,)`` with at most ``block_size - 1`` columns.  A call with
new tokens ``x`` attends over ``state + x`` cropped to ``block_size`` -- which is how
the evaluator slides a window over long text.
"""
from __future__ import annotations

import math
from typing import Callable, Optional

import torch
import torch.nn.functional as F
from torch import nn

from corpora.errors import InputError

from .base import LanguageModel, State
from .config import TransformerConfig


def causal_mask(T: int, device=None) -> torch.Tensor:
    """(T, T) bool, True where position i may attend to position j (j <= i)."""
    return torch.ones(T, T, dtype=torch.bool, device=device).tril()


def masked_softmax(scores: torch.Tensor, allowed: torch.Tensor) -> torch.Tensor:
    """Softmax over the last axis counting only ``allowed`` entries (the others get weight 0)."""
    scores = scores.masked_fill(~allowed, float("-inf"))
    scores = scores - scores.amax(dim=-1, keepdim=True)  # stable: the largest exponent is 0
    e = torch.exp(scores)
    return e / e.sum(dim=-1, keepdim=True)


def scratch_attention(q, k, v, dropout: Optional[nn.Dropout] = None, allowed: Optional[torch.Tensor] = None):
    """q (B, H, T, d_head), k, v (B, H, S, d_head) -> (output (B, H, T, d_head), weights (B, H, T, S)).

    ``allowed`` (bool, broadcast to (B, H, T, S)) is True where a query may look; None is the causal
    mask of a sequence attending over itself (S = T)."""
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.size(-1))  # (B, H, T, S)
    weights = masked_softmax(scores, causal_mask(q.size(-2), q.device) if allowed is None else allowed)
    attended = weights if dropout is None else dropout(weights)
    return attended @ v, weights


class CausalSelfAttention(nn.Module):
    def __init__(self, cfg: TransformerConfig) -> None:
        super().__init__()
        self.n_heads = cfg.n_heads
        self.impl = cfg.attention
        self.qkv = nn.Linear(cfg.d_model, 3 * cfg.d_model)  # the three projections in one product
        self.proj = nn.Linear(cfg.d_model, cfg.d_model)
        self.attn_drop = nn.Dropout(cfg.dropout)
        self.p_drop = cfg.dropout

    def forward(self, x: torch.Tensor, need_weights: bool = False):
        B, T, C = x.shape
        q, k, v = self.qkv(x).split(C, dim=2)
        # (B, T, C) -> (B, H, T, d_head)
        q, k, v = (t.view(B, T, self.n_heads, C // self.n_heads).transpose(1, 2) for t in (q, k, v))
        if self.impl == "sdpa" and not need_weights:
            y = F.scaled_dot_product_attention(q, k, v, is_causal=True,
                                               dropout_p=self.p_drop if self.training else 0.0)
            weights = None
        else:
            y, weights = scratch_attention(q, k, v, self.attn_drop)
        y = y.transpose(1, 2).reshape(B, T, C)  # heads side by side again
        return self.proj(y), weights


class FeedForward(nn.Module):
    """The position-wise feed-forward sublayer ``down(activation(up(x)))``, ``d_model -> d_ff -> d_model``:
    GELU in the LM, ReLU in the translator (the original paper's)."""

    def __init__(self, cfg, activation: Callable[[torch.Tensor], torch.Tensor] = F.gelu) -> None:
        super().__init__()
        self.up = nn.Linear(cfg.d_model, cfg.d_ff)
        self.down = nn.Linear(cfg.d_ff, cfg.d_model)
        self.activation = activation

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.down(self.activation(self.up(x)))


class Block(nn.Module):
    def __init__(self, cfg: TransformerConfig) -> None:
        super().__init__()
        self.ln_attn = nn.LayerNorm(cfg.d_model)
        self.attn = CausalSelfAttention(cfg)
        self.ln_ff = nn.LayerNorm(cfg.d_model)
        self.ff = FeedForward(cfg)
        self.drop = nn.Dropout(cfg.dropout)

    def forward(self, x: torch.Tensor, need_weights: bool = False):
        a, weights = self.attn(self.ln_attn(x), need_weights)
        x = x + self.drop(a)
        x = x + self.drop(self.ff(self.ln_ff(x)))
        return x, weights


def init_weights(module: nn.Module) -> None:
    """The Transformers' initialisation (GPT-2's), for ``model.apply``: linear and embedding weights
    N(0, 0.02), linear biases 0."""
    if isinstance(module, (nn.Linear, nn.Embedding)):
        nn.init.normal_(module.weight, 0.0, 0.02)
    if isinstance(module, nn.Linear) and module.bias is not None:
        nn.init.zeros_(module.bias)


def scale_residual_outputs(model: nn.Module, n_branches: int) -> None:
    """Re-draw the weights that write into the residual stream (attention ``proj``, feed-forward ``down``)
    from N(0, 0.02 / sqrt(n_branches)), ``n_branches`` being how many residual branches the stream adds up,
    so that its variance does not grow with depth."""
    for name, p in model.named_parameters():
        if name.endswith(("attn.proj.weight", "ff.down.weight")):
            nn.init.normal_(p, 0.0, 0.02 / math.sqrt(n_branches))


def sinusoidal_table(n_positions: int, d: int) -> torch.Tensor:
    """P[pos, 2i] = sin(pos / 10000^(2i/d)), P[pos, 2i+1] = cos(same)."""
    pos = torch.arange(n_positions, dtype=torch.float32)[:, None]
    freq = torch.exp(-math.log(10000.0) * torch.arange(0, d, 2, dtype=torch.float32) / d)
    table = torch.zeros(n_positions, d)
    table[:, 0::2] = torch.sin(pos * freq)
    table[:, 1::2] = torch.cos(pos * freq)[:, : d // 2]
    return table


class TransformerLM(LanguageModel):
    kind = "transformer"
    state_batch_dim = 0  # state = (context ids (B, <= block_size - 1),)

    def __init__(self, config: TransformerConfig) -> None:
        super().__init__()
        config.validate()
        self.config = config
        d = config.d_model
        self.embedding = nn.Embedding(config.vocab_size, d)
        if config.positional == "learned":
            self.pos_embedding = nn.Embedding(config.block_size, d)
        else:
            self.register_buffer("pos_table", sinusoidal_table(config.block_size, d), persistent=False)
        self.drop = nn.Dropout(config.dropout)
        self.blocks = nn.ModuleList(Block(config) for _ in range(config.n_layers))
        self.ln_out = nn.LayerNorm(d)
        self.decoder = nn.Linear(d, config.vocab_size)
        self.apply(init_weights)
        scale_residual_outputs(self, 2 * config.n_layers)
        if config.tie_weights:
            self.decoder.weight = self.embedding.weight

    def _positions(self, T: int) -> torch.Tensor:
        if self.config.positional == "learned":
            return self.pos_embedding.weight[:T]
        return self.pos_table[:T]

    def _hidden(self, x: torch.Tensor, state: State, need_weights: bool = False):
        T = x.size(1)
        if T > self.config.block_size:
            raise InputError(
                f"{T} tokens in one call but the Transformer's context window is {self.config.block_size}",
                fix="feed the text in chunks of at most block_size tokens (the evaluator does this for you)",
            )
        full = x if state is None else torch.cat([state[0], x], dim=1)
        full = full[:, -self.config.block_size:]  # as much of the preceding text as fits
        scale = math.sqrt(self.config.d_model) if self.config.positional == "sinusoidal" else 1.0
        h = self.drop(self.embedding(full) * scale + self._positions(full.size(1)))  # (B, L, d)
        all_weights = []
        for block in self.blocks:
            h, w = block(h, need_weights)
            all_weights.append(w)
        h = self.ln_out(h[:, -T:])  # only the new positions are predicted
        new_state = (full[:, -(self.config.block_size - 1):],) if self.config.block_size > 1 else (full[:, :0],)
        return h, new_state, all_weights

    def forward(self, x: torch.Tensor, targets: Optional[torch.Tensor] = None, state: State = None,
                need_logits: bool = True):
        h, state, _ = self._hidden(x, state)
        logits, loss = self.output(h, targets, need_logits)
        return logits, loss, state

    @torch.no_grad()
    def attention_weights(self, x: torch.Tensor, state: State = None) -> list:
        """Per-layer attention weights, each (B, n_heads, L, L) over the attended window, for plotting."""
        _, _, weights = self._hidden(x, state, need_weights=True)
        return weights

    def eval_chunk_len(self) -> int:
        # Stride of the evaluation window: each token sees at least block_size - stride tokens of context.
        return max(1, self.config.block_size // 4)

    @staticmethod
    def detach_state(state: State) -> State:
        return state  # ids carry no graph
