"""Cache language models on top of a neural LM: the continuous cache and the unigram cache.

Both interpolate the model with a distribution built from the text already scored::

    p(w | h_t) = (1 - lam) * p_model(w | h_t) + lam * p_cache(w)

**Neural (continuous) cache** (Grave, Joulin & Usunier 2017, "Improving neural language
models with a continuous cache").  Position ``t`` predicts ``y[t]`` from the model's
last-layer state ``h[t]``.  The cache at ``t`` holds the pairs ``(h[i], y[i])`` of the
previous ``W`` positions, ``t - W <= i < t`` -- each state with the token that followed it,
which has already been scored -- and::

    p_cache(w) = sum_{i in cache, y[i] = w} exp(theta * h[t].h[i]) / sum_{i in cache} exp(theta * h[t].h[i])

``(h[t], y[t])`` itself is never in the cache at ``t``: that would hand the model the
answer.  ``theta = 0`` weighs every cached position equally, which is the unigram cache
below.

**Unigram cache** (Kuhn & De Mori 1990), the count-based reference point::

    p_cache(w) = count of w among y[t-W .. t-1] / min(t, W)

``min(t, W)`` instead of the paper's ``W`` so that the first ``W`` positions (cache not
yet full) also get a distribution that sums to one; from position ``W`` on they agree.

At ``t = 0`` the cache is empty and both give the model's probability alone.  Every
probability here is a natural log (nats) of a *target* token's probability: perplexity
needs only that, and it makes the cache one batched matrix product per chunk of
positions rather than a loop over tokens.  :func:`cache_distribution` gives the whole
distribution at one position (to check that it sums to one).

Tuning ``theta`` and ``lam`` is cheap because the model is run once: its log-probs and
states are computed once (:func:`neural.evaluation.token_log_probs_and_hidden`), the dot
products once per chunk for all ``theta`` of a grid (:func:`neural_cache_log_probs`), and
each ``lam`` is one vectorised mixture (:func:`tune_mixture`).
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Optional, Sequence

import numpy as np
import torch

from corpora.errors import InputError

DEFAULT_WINDOW = 2000
# Grave et al. tune theta in about 0..0.5 for 1024-unit LSTMs; smaller models have smaller state
# dot products and want larger values (a 128-unit char LSTM on timemachine: theta 0.5 was the edge;
# a 2 x 256 PTB LSTM chose 2.0, the old grid's edge, so the grid now goes on to 4).
DEFAULT_THETAS = (0.0, 0.05, 0.1, 0.2, 0.3, 0.5, 0.7, 1.0, 1.5, 2.0, 2.5, 3.0, 4.0)
DEFAULT_LAMBDAS = tuple(round(0.05 * k, 2) for k in range(11))  # 0, 0.05, .., 0.5


def check_window(window: int) -> int:
    if isinstance(window, bool) or not isinstance(window, (int, np.integer)) or window < 1:
        raise InputError(f"the cache window must be a whole number of tokens >= 1, got {window!r}",
                         fix="pass e.g. --cache-window 2000")
    return int(window)


def check_lambda(lam: float) -> float:
    if not (isinstance(lam, (int, float)) and 0.0 <= lam <= 1.0):
        raise InputError(f"the cache weight lambda must be in [0, 1], got {lam!r}", fix="pass e.g. --cache-lambda 0.1")
    return float(lam)


def cache_sizes(n: int, *, window: int) -> np.ndarray:
    """How many positions the cache holds at each of ``n`` positions: ``min(t, W)`` (0 at ``t = 0``)."""
    return np.minimum(np.arange(n), check_window(window))


def _as_targets(targets) -> torch.Tensor:
    return torch.as_tensor(np.asarray(targets, dtype=np.int64))


def neural_cache_log_probs(hidden: torch.Tensor, targets, *, window: int = DEFAULT_WINDOW,
                           thetas: Sequence[float] = DEFAULT_THETAS, chunk_len: int = 512) -> np.ndarray:
    """``(len(thetas), N)`` float64: ln p_cache(targets[t]) in nats for every position and theta.

    ``hidden`` (N, d): the state that predicted ``targets[t]`` at row ``t``.  ``-inf`` where
    ``targets[t]`` does not occur among the cached targets, and at ``t = 0`` (empty cache;
    :func:`mix_log_probs` then uses the model alone).  Positions are processed ``chunk_len``
    at a time: one (chunk, chunk + W) matrix of dot products serves every theta.
    """
    window = check_window(window)
    y = _as_targets(targets)
    n = len(y)
    if hidden.dim() != 2 or hidden.size(0) != n:
        raise InputError(f"{tuple(hidden.shape)} hidden states for {n} targets",
                         fix="pass one (d,) state per target, as token_log_probs_and_hidden returns them")
    h = hidden.float()
    out = np.full((len(thetas), n), -np.inf)
    for a in range(0, n, chunk_len):
        b = min(n, a + chunk_len)
        k0 = max(0, a - window)  # the oldest position any t in [a, b) may look at
        pos_t = torch.arange(a, b)[:, None]
        pos_i = torch.arange(k0, b)[None, :]
        # Causal window: strictly before t (y[t] is what is being predicted), at most W back.
        cached = (pos_i < pos_t) & (pos_i >= pos_t - window)  # (C, K)
        same = cached & (y[k0:b][None, :] == y[a:b][:, None])  # cached positions followed by this target
        dots = (h[a:b] @ h[k0:b].T).double()  # (C, K), shared by every theta
        for j, theta in enumerate(thetas):
            s = theta * dots
            log_num = torch.logsumexp(s.masked_fill(~same, -math.inf), dim=1)
            log_den = torch.logsumexp(s.masked_fill(~cached, -math.inf), dim=1)
            lp = log_num - log_den
            # Empty cache (t = 0): -inf - -inf is nan; report -inf, the mixture ignores it there.
            out[j, a:b] = torch.where(torch.isnan(lp), torch.full_like(lp, -math.inf), lp).numpy()
    return out


def cache_distribution(hidden: torch.Tensor, targets, *, position: int, window: int, theta: float,
                       vocab_size: int) -> torch.Tensor:
    """The whole neural-cache distribution p_cache(.) at one position, (vocab_size,) float64.

    A direct, per-position transcription of the formula (softmax over the cached
    positions, mass scattered onto the tokens that followed them) -- independent of the
    vectorised :func:`neural_cache_log_probs`, which tests compare against it.  All zeros
    when the cache is empty (``position = 0``).
    """
    window = check_window(window)
    y = _as_targets(targets)
    lo = max(0, position - window)
    p = torch.zeros(vocab_size, dtype=torch.float64)
    if position == lo:
        return p
    scores = theta * (hidden[lo:position].double() @ hidden[position].double())
    return p.scatter_add_(0, y[lo:position], torch.softmax(scores, dim=0))


def unigram_cache_log_probs(targets, *, window: int = DEFAULT_WINDOW) -> np.ndarray:
    """(N,) float64: ln( count of targets[t] among targets[t-W .. t-1] / min(t, W) ) in nats.

    ``-inf`` where the token is not in the window, and at ``t = 0``.  Vectorised: with
    every occurrence keyed by (type, position) and sorted, the count in the window is the
    difference of two binary searches.
    """
    window = check_window(window)
    y = np.asarray(targets, dtype=np.int64)
    n = len(y)
    pos = np.arange(n, dtype=np.int64)
    span = n + window + 1  # keys of different types never interleave
    keys = np.sort(y * span + pos + window)  # + window: t - W >= -W stays non-negative
    base = y * span + window
    count = np.searchsorted(keys, base + pos) - np.searchsorted(keys, base + pos - window)
    size = np.minimum(pos, window)
    with np.errstate(divide="ignore", invalid="ignore"):
        out = np.log(count) - np.log(size)
    out[(count == 0) | (size == 0)] = -np.inf
    return out


def mix_log_probs(model_log_probs_nats: np.ndarray, cache_log_probs_nats: np.ndarray, *, lam: float,
                  sizes: np.ndarray) -> np.ndarray:
    """ln( (1 - lam) p_model + lam p_cache ) in nats, per position; the model alone where the cache is empty."""
    lam = check_lambda(lam)
    lp_model = np.asarray(model_log_probs_nats, dtype=np.float64)
    # In log space: a cache probability of 0 is -inf there, and lam = 0 (or 1) gives ln 0 = -inf
    # for that side, which logaddexp absorbs exactly (logaddexp(x, -inf) == x).
    log_keep = math.log1p(-lam) if lam < 1 else -math.inf
    log_lam = math.log(lam) if lam > 0 else -math.inf
    mixed = np.logaddexp(log_keep + lp_model, log_lam + np.asarray(cache_log_probs_nats, dtype=np.float64))
    return np.where(np.asarray(sizes) > 0, mixed, lp_model)


@dataclass
class MixtureFit:
    """The best (cache row, lambda) of a grid on a tuning text, by total ln p in nats."""

    row: int  # index of the best row of cache log-probs (e.g. into the theta grid)
    lam: float
    log_prob_nats: float
    n_tokens: int
    grid: list = field(default_factory=list)  # [(row, lam, log_prob_nats), ...] every point tried

    @property
    def ppl(self) -> float:
        return math.exp(-self.log_prob_nats / self.n_tokens)


def tune_mixture(model_log_probs_nats: np.ndarray, cache_log_probs_nats: np.ndarray, *,
                 lambdas: Sequence[float] = DEFAULT_LAMBDAS, sizes: np.ndarray) -> MixtureFit:
    """Grid search of ``(row, lam)`` maximising the total ln p of the mixture.

    ``cache_log_probs_nats``: (R, N), one row per candidate cache (the thetas of
    :func:`neural_cache_log_probs`) or (N,) for a single one (the unigram cache).  Ties go
    to the earlier grid point, so ``lam = 0`` wins when the cache does not help.
    """
    rows = np.atleast_2d(np.asarray(cache_log_probs_nats, dtype=np.float64))
    n = rows.shape[1]
    if n == 0:
        raise InputError("the tuning text is empty", fix="tune on a non-empty valid split, or pass the parameters")
    best: Optional[MixtureFit] = None
    grid = []
    for r, row in enumerate(rows):
        for lam in lambdas:
            total = float(mix_log_probs(model_log_probs_nats, row, lam=lam, sizes=sizes).sum())
            grid.append((r, float(lam), total))
            if best is None or total > best.log_prob_nats:
                best = MixtureFit(row=r, lam=float(lam), log_prob_nats=total, n_tokens=n)
    best.grid = grid
    return best
