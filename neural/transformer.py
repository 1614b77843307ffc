"""A decoder-only Transformer LM: token embedding + positions -> pre-norm blocks -> output layer.

Each block is ``x = x + Attn(LN(x))`` then ``x = x + FFN(LN(x))`` (pre-norm: the
residual path stays an identity, which trains without warm-up tricks at this size).
Attention is causal multi-head scaled dot-product attention::

    A = softmax(mask(Q K^T / sqrt(d_head)))      (B, H, T, T), future positions masked to -inf
    Y = A V

computed either from scratch (:func:`masked_softmax`) or by
``torch.nn.functional.scaled_dot_product_attention`` (``attention="sdpa"``, the
default: fused and cheaper in memory).  The two agree to float rounding.

Where a token stands (``config.positional``) is either added to its embedding --
``learned``, one trained vector per window position, or ``sinusoidal`` (Vaswani et
al., 2017) -- or, with ``relative``, told to the attention scores alone, as T5's
relative position bias (Raffel et al., 2020, "Exploring the Limits of Transfer
Learning with a Unified Text-to-Text Transformer", JMLR 21(140), section 2.1)::

    A = softmax(mask(Q K^T / sqrt(d_head) + B)),    B[h, i, j] = b[bucket(i - j), h]

one learned scalar per head and bucket of the distance ``i - j`` from query to key,
shared by the layers; no absolute position is added anywhere.  Distances below
``rel_buckets // 2`` have a bucket each, longer ones share log-spaced buckets, the
last of which holds all from about ``rel_max_distance`` (default: the block size) on
(:func:`relative_bucket`).  As B depends on ``i - j`` only, two tokens score each
other the same wherever they stand in the window, and a model runs on windows longer
than it was trained on (every longer distance falls in the trained last bucket).  For
``sdpa``, B and the causal mask travel as one additive float mask.

The state the model carries between calls is the tail of the text it has read, as
token ids: ``state = (ids,)`` with at most ``block_size - 1`` columns.  A call with
new tokens ``x`` attends over ``state + x`` cropped to ``block_size`` -- which is how
the evaluator slides a window over long text.  Positions, absolute or relative, are
counted inside that window, so ``i - j`` is the true distance of two tokens in the text.
"""
from __future__ import annotations

import math
from dataclasses import replace
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


def scratch_attention(q, k, v, dropout: Optional[nn.Dropout] = None, allowed: Optional[torch.Tensor] = None,
                      bias: Optional[torch.Tensor] = None):
    """q (B, H, T, d_head), k, v (B, H, S, d_head) -> (output (B, H, T, d_head), weights (B, H, T, S)).

    ``allowed`` (bool, broadcast to (B, H, T, S)) is True where a query may look; None is the causal
    mask of a sequence attending over itself (S = T).  ``bias`` (float, broadcast to (B, H, T, S)) is
    added to the scores before the mask (a relative position bias)."""
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.size(-1))  # (B, H, T, S)
    if bias is not None:
        scores = scores + bias
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

    def forward(self, x: torch.Tensor, need_weights: bool = False, bias: Optional[torch.Tensor] = None):
        """``bias``: None, or (H, T, T) added to the scores: the relative position bias, already -inf
        above the diagonal (the causal mask)."""
        B, T, C = x.shape
        q, k, v = self.qkv(x).split(C, dim=2)
        # (B, T, C) -> (B, H, T, d_head)
        q, k, v = (t.view(B, T, self.n_heads, C // self.n_heads).transpose(1, 2) for t in (q, k, v))
        if self.impl == "sdpa" and not need_weights:
            p = self.p_drop if self.training else 0.0
            if bias is None:
                y = F.scaled_dot_product_attention(q, k, v, is_causal=True, dropout_p=p)
            else:  # is_causal excludes a mask: the bias carries the causal mask as -inf
                y = F.scaled_dot_product_attention(q, k, v, attn_mask=bias.to(q.dtype), dropout_p=p)
            weights = None
        else:
            y, weights = scratch_attention(q, k, v, self.attn_drop, bias=bias)
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

    def forward(self, x: torch.Tensor, need_weights: bool = False, bias: Optional[torch.Tensor] = None):
        a, weights = self.attn(self.ln_attn(x), need_weights, bias)
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


def relative_bucket(distance: torch.Tensor, n_buckets: int, max_distance: int) -> torch.Tensor:
    """T5's bucket of each query-to-key distance ``i - j`` (long tensor; the future, ``j > i``, counts as 0).

    With ``exact = n_buckets // 2``: distance n < exact is bucket n; longer ones are log-spaced,
    ``exact + floor(ln(n / exact) / ln(max_distance / exact) * (n_buckets - exact))``, capped at the last
    bucket, which thus holds every distance from a little below ``max_distance`` on.  With 32 / 128 (T5's,
    and the default window's): 0..15 one each, 16-18 -> 16, 19-20 -> 17, ..., 99-112 -> 30, 113 and beyond -> 31."""
    exact = n_buckets // 2
    n = distance.clamp(min=0)
    spread = torch.log(n.clamp(min=1).float() / exact) / math.log(max_distance / exact) * (n_buckets - exact)
    return torch.where(n < exact, n, (exact + spread.long()).clamp(max=n_buckets - 1))


class RelativePositionBias(nn.Module):
    """``B[h, i, j] = table[bucket(i - j), h]``: a learned scalar per head and distance bucket."""

    def __init__(self, n_heads: int, n_buckets: int, max_distance: int, n_positions: int) -> None:
        super().__init__()
        self.n_buckets, self.max_distance = n_buckets, max_distance
        self.table = nn.Embedding(n_buckets, n_heads)
        # The buckets of the longest window, computed once: a shorter window's are its top-left corner.
        self.register_buffer("buckets", self._buckets(n_positions), persistent=False)

    def _buckets(self, L: int, device=None) -> torch.Tensor:
        pos = torch.arange(L, device=device)
        return relative_bucket(pos[:, None] - pos[None, :], self.n_buckets, self.max_distance)  # (L, L)

    def forward(self, L: int) -> torch.Tensor:
        """The (H, L, L) bias of a window of ``L`` positions (queries and keys both the window)."""
        n = self.buckets.size(0)
        buckets = self.buckets[:L, :L] if L <= n else self._buckets(L, self.buckets.device)
        return self.table(buckets).permute(2, 0, 1)


class TransformerLM(LanguageModel):
    kind = "transformer"
    state_batch_dim = 0  # state = (context ids (B, <= block_size - 1),)

    def __init__(self, config: TransformerConfig) -> None:
        super().__init__()
        config.validate()
        if config.positional == "relative" and config.rel_max_distance is None:
            # Fixed now, so that the checkpoint keeps its buckets when a wider window is asked of it later.
            config = replace(config, rel_max_distance=max(config.block_size, config.rel_buckets))
        self.config = config
        d = config.d_model
        self.embedding = nn.Embedding(config.vocab_size, d)
        if config.positional == "learned":
            self.pos_embedding = nn.Embedding(config.block_size, d)
        elif config.positional == "relative":
            self.rel_bias = RelativePositionBias(config.n_heads, config.rel_buckets, config.rel_max_distance,
                                                 config.block_size)
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
        L = full.size(1)
        if self.config.positional == "relative":
            # (B, L, d) and (H, L, L); the bias carries the causal mask, built once for all layers
            h = self.drop(self.embedding(full))
            bias = self.rel_bias(L).masked_fill(~causal_mask(L, full.device), float("-inf"))
        else:
            scale = math.sqrt(self.config.d_model) if self.config.positional == "sinusoidal" else 1.0
            h, bias = self.drop(self.embedding(full) * scale + self._positions(L)), None
        all_weights = []
        for block in self.blocks:
            h, w = block(h, need_weights, bias)
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
