"""Deterministic full-pass evaluation: every token of a split predicted exactly once.

The predicted tokens are the ids of ``EncodedText.ids`` -- every word and every
sentence end, never ``<s>`` -- the same events the n-gram evaluator scores, so the
perplexities are comparable.  The model reads ``</s>`` first (see
:mod:`neural.data`) and then the text in chunks, carrying its state from chunk to
chunk: an RNN sees the whole history; a Transformer sees a sliding window (each
call attends over the previous ``block_size - chunk`` tokens plus the chunk), so
every token is scored once with as much context as the window holds.

Log-probabilities are reported with their base in the name: ``log_prob_nats``
(natural log, what the loss uses), ``log10_prob`` and ``log2_prob``.
"""
from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Callable, Optional

import numpy as np
import torch
import torch.nn.functional as F

from corpora.vocab import PAD_ID

from .base import LanguageModel
from .data import eval_rows


@dataclass
class EvalResult:
    n_predicted: int  # tokens scored (words + sentence ends)
    log_prob_nats: float  # sum of ln p over them (<= 0)

    @property
    def log10_prob(self) -> float:
        return self.log_prob_nats / math.log(10)

    @property
    def log2_prob(self) -> float:
        return self.log_prob_nats / math.log(2)

    @property
    def cross_entropy_nats(self) -> float:
        return -self.log_prob_nats / self.n_predicted

    @property
    def bits_per_token(self) -> float:
        return -self.log2_prob / self.n_predicted

    @property
    def ppl(self) -> float:
        return math.exp(self.cross_entropy_nats)

    def to_dict(self) -> dict:
        return {**asdict(self), "log10_prob": self.log10_prob, "log2_prob": self.log2_prob,
                "cross_entropy_nats": self.cross_entropy_nats, "bits_per_token": self.bits_per_token, "ppl": self.ppl}


def eval_chunks(model: LanguageModel, ids: np.ndarray, batch_size: int, chunk_len: Optional[int]):
    x, y = eval_rows(ids, batch_size)
    step = chunk_len or model.eval_chunk_len()
    for a in range(0, x.size(1), step):
        yield x[:, a:a + step], y[:, a:a + step]


@torch.no_grad()
def evaluate(model: LanguageModel, ids: np.ndarray, *, batch_size: int = 1, chunk_len: Optional[int] = None,
             bf16: bool = False, max_tokens: Optional[int] = None,
             on_chunk: Optional[Callable[[int], None]] = None) -> EvalResult:
    """Total log-probability of ``ids`` (an ``EncodedText.ids`` stream) under ``model``.

    ``batch_size`` > 1 cuts the text into that many contiguous rows scored in
    parallel (faster; each row's first token has only one token of context).
    ``max_tokens`` scores only a prefix (quick monitoring, e.g. ``--dry-run``).
    ``on_chunk(n)`` is called after each chunk with the tokens it scored (progress, the thread rule).
    """
    if max_tokens is not None:
        ids = ids[:max_tokens]
    was_training = model.training
    model.eval()
    total, count, state = 0.0, 0, None
    try:
        for xb, yb in eval_chunks(model, ids, batch_size, chunk_len):
            n = int((yb != PAD_ID).sum())
            with torch.autocast("cpu", dtype=torch.bfloat16, enabled=bf16):
                _, loss, state = model(xb, yb, state, need_logits=False)
            total -= float(loss) * n
            count += n
            if on_chunk is not None:
                on_chunk(n)
    finally:
        model.train(was_training)
    return EvalResult(n_predicted=count, log_prob_nats=total)


@torch.no_grad()
def token_log_probs(model: LanguageModel, ids: np.ndarray, *, chunk_len: Optional[int] = None,
                    on_chunk: Optional[Callable[[int], None]] = None) -> np.ndarray:
    """ln p of every token of ``ids`` given everything before it (one row, full history)."""
    was_training = model.training
    model.eval()
    out, state = [], None
    try:
        for xb, yb in eval_chunks(model, ids, 1, chunk_len):
            logits, _, state = model(xb, None, state)
            logp = F.log_softmax(logits.float(), dim=-1)
            # Copy the T scores out now: keeping the gathered view held on to ~10 MB per chunk
            # (measured: 20k PTB tokens took 1.1 GB instead of 0.3 GB).
            out.append(logp.gather(-1, yb[..., None])[0, :, 0].double().numpy().copy())
            if on_chunk is not None:
                on_chunk(yb.shape[1])
    finally:
        model.train(was_training)
    return np.concatenate(out) if out else np.zeros(0)


@torch.no_grad()
def token_log_probs_and_hidden(model: LanguageModel, ids: np.ndarray, *, chunk_len: Optional[int] = None,
                               on_chunk: Optional[Callable[[int], None]] = None) -> tuple:
    """``(ln p of every token in nats (N,) float64, last-layer states (N, d) float32)``, one row, full history.

    The log-probabilities are those of :func:`token_log_probs` bit for bit (the same
    chunks, the same operations); ``hidden[t]`` is the state that predicted ``ids[t]``,
    i.e. the model's summary of ``</s> ids[:t]`` -- what a continuous cache stores
    (:mod:`neural.adaptation.cache`).
    """
    from .hidden import recording_hidden

    was_training = model.training
    model.eval()
    out, states, state = [], [], None
    try:
        with recording_hidden(model) as recorded:
            for xb, yb in eval_chunks(model, ids, 1, chunk_len):
                logits, _, state = model(xb, None, state)
                logp = F.log_softmax(logits.float(), dim=-1)
                out.append(logp.gather(-1, yb[..., None])[0, :, 0].double().numpy().copy())
                states.append(recorded.pop()[0].float().clone())
                if on_chunk is not None:
                    on_chunk(yb.shape[1])
    finally:
        model.train(was_training)
    if not out:
        return np.zeros(0), torch.zeros(0, 0)
    return np.concatenate(out), torch.cat(states)
