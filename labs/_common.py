"""Helpers the recurrent labs share: matplotlib set-up, a small character-level corpus, a tiny LM
(embedding -> nn.RNN/GRU/LSTM, optionally deep or bidirectional -> linear) and its train/eval loops.

The labs use PyTorch's fused layers on purpose: they are the same equations as
:mod:`neural.cells` and an order of magnitude faster on CPU, which is what keeps each
lab at a few minutes.  Sizes are small (hidden 64-128, a few hundred steps); the labs
compare *settings* trained on equal budgets, not state-of-the-art numbers.
"""
from __future__ import annotations

import math
import time
from typing import Callable, Optional

import numpy as np

# Okabe-Ito, the colour-blind-safe palette of reports/plots.py (copied: importing reports.plots
# would change matplotlib's global style for every later figure).
OKABE_ITO = ("#E69F00", "#56B4E9", "#009E73", "#F0E442", "#0072B2", "#D55E00", "#CC79A7", "#000000")
CELL_COLOURS = {"rnn_tanh": "#D55E00", "gru": "#009E73", "lstm": "#0072B2"}


def pyplot():
    """matplotlib.pyplot on the Agg backend, its colour cycle set to Okabe-Ito."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    matplotlib.rcParams["axes.prop_cycle"] = matplotlib.cycler(color=list(OKABE_ITO))
    return plt


def char_corpus(*, n_train: Optional[int] = None, n_valid: Optional[int] = None, data_dir: Optional[str] = None):
    """The Time Machine at character level: (train ids, valid ids, vocab), ids as int64 tensors.

    The stream is ``</s>`` + ids (the toolkit's convention, :func:`neural.data.with_start`);
    the vocabulary (31 symbols, specials included) is fitted on train.
    """
    from corpora import load_corpus, prepare
    from corpora.tokenize import TokenizerSpec
    from neural.data import with_start

    ds = prepare(load_corpus("timemachine", data_dir=data_dir, tokenizer=TokenizerSpec(kind="char"),
                             splits=("train", "valid")))
    train, valid = ds["train"].ids, ds["valid"].ids
    if n_train is not None:
        train = train[:n_train]
    if n_valid is not None:
        valid = valid[:n_valid]
    return with_start(train), with_start(valid), ds.vocab


def set_seed(seed: int) -> None:
    import torch

    torch.manual_seed(seed)
    np.random.seed(seed % (2 ** 32))


def tiny_lm(vocab_size: int, *, cell: str = "gru", hidden: int = 128, emb: int = 32, layers: int = 1,
            bidirectional: bool = False):
    """Embedding -> recurrent layer(s) -> linear over the vocabulary; ``forward(x, state) -> (logits, state)``.

    A bidirectional model concatenates the forward state h→_t (read x_1..x_t) and the backward
    state h←_t (read x_t..x_T): used as a left-to-right LM it sees the token it must predict.
    """
    import torch
    from torch import nn

    class Model(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.cell = cell
            self.embedding = nn.Embedding(vocab_size, emb)
            kinds = {"rnn_tanh": nn.RNN, "gru": nn.GRU, "lstm": nn.LSTM}
            self.rnn = kinds[cell](emb, hidden, num_layers=layers, batch_first=True, bidirectional=bidirectional)
            self.out = nn.Linear(hidden * (2 if bidirectional else 1), vocab_size)

        def forward(self, x: torch.Tensor, state=None):
            h, state = self.rnn(self.embedding(x), state)  # h: (B, T, hidden·directions)
            return self.out(h), state

    return Model()


def detach(state):
    if state is None:
        return None
    if isinstance(state, tuple):
        return tuple(s.detach() for s in state)
    return state.detach()


def random_batch(stream, *, batch_size: int, steps: int, gen) -> tuple:
    """``batch_size`` random windows of ``steps`` inputs and their next-token targets."""
    import torch

    starts = torch.randint(0, len(stream) - steps - 1, (batch_size,), generator=gen)
    idx = starts[:, None] + torch.arange(steps)
    return stream[idx], stream[idx + 1]


def cross_entropy(logits, y):
    import torch.nn.functional as F

    return F.cross_entropy(logits.reshape(-1, logits.size(-1)), y.reshape(-1))


def train_steps(model, next_batch: Callable[[int], tuple], *, steps: int, lr: float = 0.01, clip: Optional[float] = 1.0,
                carry_state: bool = False, on_step: Optional[Callable] = None) -> dict:
    """Adam for ``steps`` batches; returns losses and wall time.  ``carry_state``: sequential
    batches, each batch starting from the previous batch's final state (detached = truncated BPTT)."""
    import torch

    opt = torch.optim.Adam(model.parameters(), lr=lr)
    model.train()
    losses, state = [], None
    t0 = time.perf_counter()
    for k in range(steps):
        x, y = next_batch(k)
        h = state[0] if isinstance(state, tuple) else state  # the LSTM's state is (h, c)
        if h is not None and h.size(1) != x.size(0):  # (layers, batch, hidden): a batch of another size
            state = None
        logits, new_state = model(x, state if carry_state else None)
        loss = cross_entropy(logits, y)
        opt.zero_grad()
        loss.backward()
        if clip is not None:
            torch.nn.utils.clip_grad_norm_(model.parameters(), clip)
        opt.step()
        if carry_state:
            state = detach(new_state)
        losses.append(float(loss.detach()))
        if on_step is not None:
            on_step(k, model)
    return {"losses": losses, "seconds": time.perf_counter() - t0}


def evaluate_ppl(model, stream, *, rows: int = 8) -> float:
    """Perplexity of ``stream[1:]`` read as ``rows`` contiguous pieces, each from a zero state."""
    import torch

    L = (len(stream) - 1) // rows
    x = stream[: rows * L].view(rows, L)
    y = stream[1: rows * L + 1].view(rows, L)
    model.eval()
    with torch.no_grad():
        logits, _ = model(x)
        loss = float(cross_entropy(logits, y))
    model.train()
    return math.exp(loss)


def smooth(values, k: int = 20) -> np.ndarray:
    """Trailing moving average (the first k-1 points average what there is)."""
    v = np.asarray(values, dtype=float)
    c = np.cumsum(np.insert(v, 0, 0.0))
    idx = np.arange(1, len(v) + 1)
    lo = np.maximum(0, idx - k)
    return (c[idx] - c[lo]) / (idx - lo)
