"""Dynamic evaluation (Krause, Kahembwe, Murray & Renals 2018, "Dynamic evaluation of neural sequence models").

The text is read in segments of ``segment_len`` tokens, in order, the state carried from
one segment to the next as in truncated BPTT.  Each segment is first *scored* with the
current weights, then the model takes one gradient step on that segment's mean
cross-entropy (nats), so later segments are predicted by a model adapted to the text
read so far.  Every token is predicted before the model is updated on it.

Two update rules, for every parameter tensor ``w`` (``w0``: the trained weights)::

    sgd:  w <- w - lr * g                     + decay * (w0 - w)
    rms:  w <- w - lr * g / (rms + eps)       + decay * (w0 - w)

``rms`` is the per-parameter root mean square of the gradients, estimated once on the
**training data** as in the paper (:func:`gradient_rms`: segments of the same length over
a prefix of the training stream, with the trained weights, no update).  The decay pulls
the weights back toward the trained ones.  The paper also scales the decay per parameter
by ``rms / mean(rms)`` (clipped at ``1 / decay``); this module uses the plain uniform decay
above.  ``eps`` = 2e-5 is the default of the paper's code; it also bounds the step of a
parameter whose gradients were zero on the training prefix (an embedding row of a word
that never occurred there).

Scoring and updating are separate passes of the model.  The score of a segment comes
from exactly the computation :func:`neural.evaluation.token_log_probs` runs (``no_grad``,
same chunks): PyTorch's inference kernels for the fused LSTM differ from its training
kernels by ~1e-8, so scoring in the gradient pass would make ``lr = 0`` differ from plain
evaluation in the last bits.  The gradient pass then reruns the segment from the same
carried state.  That costs one extra forward per segment, and makes "scored before
updated" hold by construction.

The model's weights are restored (bit for bit) when a pass ends, also on an error.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import List, Optional, Sequence

import numpy as np
import torch
import torch.nn.functional as F

from corpora.errors import InputError

from ..base import LanguageModel
from ..evaluation import eval_chunks
from ..hidden import recording_hidden

RULES = ("sgd", "rms")
DEFAULT_SEGMENT_LEN = 20
DEFAULT_EPS = 2e-5
DEFAULT_RMS_TOKENS = 20_000
# Tuning grids (coordinate search: the lr with decay 0, then the decay at that lr).
DEFAULT_LRS = {"sgd": (0.03, 0.1, 0.3, 1.0, 3.0), "rms": (1e-5, 3e-5, 1e-4, 3e-4, 1e-3, 3e-3)}
DEFAULT_DECAYS = (0.0, 0.001, 0.01)


@dataclass
class DynamicEvalConfig:
    """One dynamic-evaluation setting: the update rule, its step sizes, the segment length."""

    lr: float
    decay: float = 0.0
    rule: str = "rms"
    segment_len: int = DEFAULT_SEGMENT_LEN
    eps: float = DEFAULT_EPS

    def validate(self, model: Optional[LanguageModel] = None) -> "DynamicEvalConfig":
        if self.rule not in RULES:
            raise InputError(f"unknown dynamic-evaluation rule {self.rule!r}", fix=f"use one of {', '.join(RULES)}")
        if not (math.isfinite(self.lr) and self.lr >= 0):
            raise InputError(f"the dynamic-evaluation learning rate must be >= 0, got {self.lr!r}",
                             fix="pass e.g. --dyn-lr 1e-4 (rms) or 0.1 (sgd)")
        if not 0.0 <= self.decay <= 1.0:
            raise InputError(f"the dynamic-evaluation decay must be in [0, 1], got {self.decay!r}",
                             fix="pass e.g. --dyn-decay 0.01 (0 = no pull back to the trained weights)")
        if self.segment_len < 1:
            raise InputError(f"the segment length must be >= 1, got {self.segment_len}",
                             fix="pass e.g. --dyn-segment 20")
        if not self.eps > 0:
            raise InputError(f"eps must be > 0, got {self.eps!r}", fix="keep the default 2e-5")
        block = getattr(getattr(model, "config", None), "block_size", None)
        if model is not None and model.kind == "transformer" and self.segment_len > block:
            raise InputError(f"segments of {self.segment_len} tokens exceed the Transformer's context of {block}",
                             fix=f"pass --dyn-segment {block} or less")
        return self


def _parameters(model: LanguageModel) -> List[torch.nn.Parameter]:
    return list(model.parameters())  # each tensor once, tied matrices included once


def gradient_rms(model: LanguageModel, ids: np.ndarray, *, segment_len: int = DEFAULT_SEGMENT_LEN,
                 max_tokens: Optional[int] = DEFAULT_RMS_TOKENS) -> List[torch.Tensor]:
    """Per-parameter RMS of the gradient of a segment's mean loss (nats), over a prefix of ``ids``.

    ``ids``: the training stream (as in the paper).  The segments are read in order with
    the state carried, like the dynamic pass itself; the weights are not changed.
    Returns one tensor per ``model.parameters()`` entry.
    """
    if max_tokens is not None:
        ids = ids[:max_tokens]
    params = _parameters(model)
    sq = [torch.zeros_like(p) for p in params]
    was_training = model.training
    model.eval()  # no dropout: the gradients the dynamic pass will see
    n, state = 0, None
    try:
        for xb, yb in eval_chunks(model, ids, 1, segment_len):
            model.zero_grad(set_to_none=True)
            with torch.enable_grad():
                _, loss, state = model(xb, yb, state, need_logits=False)
                loss.backward()
            state = model.detach_state(state)
            for s, p in zip(sq, params):
                if p.grad is not None:
                    s.add_(p.grad.square())
            n += 1
    finally:
        model.zero_grad(set_to_none=True)
        model.train(was_training)
    if n == 0:
        raise InputError("no training text to estimate the gradient RMS on",
                         fix="score a checkpoint whose training corpus is available, or use --dyn-rule sgd")
    return [torch.sqrt(s / n) for s in sq]


def dynamic_token_log_probs(model: LanguageModel, ids: np.ndarray, *, config: DynamicEvalConfig,
                            rms: Optional[List[torch.Tensor]] = None, need_hidden: bool = False,
                            on_event=None) -> tuple:
    """``(ln p of every token in nats (N,), last-layer states (N, d) or None)`` under dynamic evaluation.

    With ``lr = 0`` and ``decay = 0`` the log-probs equal
    ``token_log_probs(model, ids, chunk_len=config.segment_len)`` bit for bit.  ``rms``
    (from :func:`gradient_rms`) is required by the ``rms`` rule.  ``on_event(kind, start,
    stop)`` -- ``kind`` "score" or "update", ``[start, stop)`` the token positions -- lets a
    test check the order of scoring and updating.
    """
    config.validate(model)
    params = _parameters(model)
    if config.rule == "rms":
        if rms is None or len(rms) != len(params):
            raise InputError("the rms rule needs the per-parameter gradient RMS of this model",
                             fix="pass rms=gradient_rms(model, train_ids, ...), or use rule='sgd'")
        denominators = [r + config.eps for r in rms]
    else:
        denominators = [None] * len(params)
    trained = [p.detach().clone() for p in params]
    was_training = model.training
    model.eval()  # no dropout while scoring or adapting
    out, states, state, start = [], [], None, 0
    try:
        for xb, yb in eval_chunks(model, ids, 1, config.segment_len):
            stop = start + yb.size(1)
            # 1. Score the segment with the weights as they are (adapted to the segments before it only).
            with torch.no_grad(), recording_hidden(model) as recorded:
                logits, _, next_state = model(xb, None, state)
                logp = F.log_softmax(logits.float(), dim=-1)
                out.append(logp.gather(-1, yb[..., None])[0, :, 0].double().numpy().copy())
            if need_hidden:
                states.append(recorded[-1][0].float().clone())
            if on_event is not None:
                on_event("score", start, stop)
            # 2. Then learn from it: one step on its mean loss, from the same carried state.
            model.zero_grad(set_to_none=True)
            with torch.enable_grad():
                _, loss, _ = model(xb, yb, state, need_logits=False)
                loss.backward()
            with torch.no_grad():
                for p, p0, denom in zip(params, trained, denominators):
                    step = torch.zeros_like(p) if p.grad is None else (p.grad if denom is None else p.grad / denom)
                    p.add_(config.decay * (p0 - p) - config.lr * step)
            if on_event is not None:
                on_event("update", start, stop)
            state, start = next_state, stop
    finally:
        with torch.no_grad():
            for p, p0 in zip(params, trained):
                p.copy_(p0)
        model.zero_grad(set_to_none=True)
        model.train(was_training)
    log_probs = np.concatenate(out) if out else np.zeros(0)
    hidden = (torch.cat(states) if states else torch.zeros(0, 0)) if need_hidden else None
    return log_probs, hidden


@dataclass
class DynamicFit:
    """The best dynamic-evaluation setting found on a tuning text, by total ln p in nats."""

    config: DynamicEvalConfig
    log_prob_nats: float
    n_tokens: int
    grid: list = field(default_factory=list)  # [(lr, decay, log_prob_nats), ...] every setting tried

    @property
    def ppl(self) -> float:
        return math.exp(-self.log_prob_nats / self.n_tokens)


def tune_dynamic(model: LanguageModel, ids: np.ndarray, *, rule: str = "rms",
                 segment_len: int = DEFAULT_SEGMENT_LEN, lrs: Optional[Sequence[float]] = None,
                 decays: Sequence[float] = DEFAULT_DECAYS, rms: Optional[List[torch.Tensor]] = None,
                 eps: float = DEFAULT_EPS) -> DynamicFit:
    """Coordinate search on ``ids`` (the valid split): the best lr at ``decays[0]``, then the best decay at that lr.

    One full dynamic pass per setting (``len(lrs) + len(decays) - 1`` passes); the model's
    weights are restored after each.
    """
    lrs = DEFAULT_LRS[rule] if lrs is None else tuple(lrs)
    decays = tuple(decays)
    if not lrs or not decays:
        raise InputError("an empty tuning grid", fix="give at least one lr and one decay")
    grid, tried = [], {}

    def total(lr: float, decay: float) -> float:
        if (lr, decay) not in tried:
            cfg = DynamicEvalConfig(lr=lr, decay=decay, rule=rule, segment_len=segment_len, eps=eps)
            lp, _ = dynamic_token_log_probs(model, ids, config=cfg, rms=rms)
            t = float(lp.sum())
            tried[(lr, decay)] = t if math.isfinite(t) else -math.inf  # a diverging lr loses, never wins by nan
            grid.append((lr, decay, tried[(lr, decay)]))
        return tried[(lr, decay)]

    # max() keeps the first of equal totals: the smaller lr / the smaller decay.
    best_lr = max(lrs, key=lambda lr: total(lr, decays[0]))
    best_decay = max(decays, key=lambda d: total(best_lr, d))
    best = DynamicEvalConfig(lr=best_lr, decay=best_decay, rule=rule, segment_len=segment_len, eps=eps)
    return DynamicFit(config=best, log_prob_nats=tried[(best_lr, best_decay)], n_tokens=len(ids), grid=grid)
