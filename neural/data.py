"""Turning an encoded id stream into minibatches: sequential partitioning and random sampling.

The stream a model reads is ``</s>`` followed by ``EncodedText.ids`` (see
:func:`with_start`).  ``</s>`` is the start symbol because it is what precedes every
other sentence in the stream: the model has learned what follows it, whereas ``<s>``
never occurs in the stream and its embedding would stay untrained.  Every id of
``EncodedText.ids`` is then a target exactly once -- the tokens the n-gram
evaluator predicts.

Sequential partitioning (state carried across batches = truncated BPTT)::

    stream  a b c d e f g h i j k l m n o p q r s t u v w x (y z dropped)
    batchify(stream, 4) -> 4 rows, each a contiguous piece:
        a b c d e f
        g h i j k l
        m n o p q r
        s t u v w x
    get_batch(rows, 0, bptt=2): x = columns 0-1, y = columns 1-2 (x shifted by one)
    get_batch(rows, 2, bptt=2): x = columns 2-3, y = columns 3-4 -- each row continues
    where it stopped, so the final state of one batch is the initial state of the next
    (detached: gradients stop at the batch boundary).

Random sampling: a random offset in [0, bptt), the stream cut into subsequences of
``bptt`` tokens from there, shuffled, and grouped ``batch_size`` at a time; state
starts from zero in every batch.  Both schemes see each (offset-trimmed) token once
per epoch.
"""
from __future__ import annotations

import math
from typing import Iterator

import numpy as np
import torch

from corpora.errors import InputError
from corpora.vocab import EOS_ID, PAD_ID

START_ID = EOS_ID  # the symbol fed before the first token of a text (see the module docstring)


def with_start(ids: np.ndarray) -> torch.Tensor:
    """``</s>`` + ids, as an int64 tensor: the stream whose next-token targets are exactly ``ids``."""
    out = torch.empty(len(ids) + 1, dtype=torch.long)
    out[0] = START_ID
    out[1:] = torch.as_tensor(np.asarray(ids, dtype=np.int64))
    return out


def batchify(stream: torch.Tensor, batch_size: int) -> torch.Tensor:
    """Cut ``stream`` into ``batch_size`` contiguous rows, (batch_size, L); the remainder is dropped."""
    L = len(stream) // batch_size
    if L < 2:
        raise InputError(
            f"{len(stream)} tokens are too few for {batch_size} rows of at least 2 tokens",
            fix="use a smaller --batch-size or a longer training text",
        )
    return stream[: L * batch_size].view(batch_size, L)


def get_batch(rows: torch.Tensor, i: int, bptt: int) -> tuple:
    """Inputs ``rows[:, i:i+T]`` and targets one step ahead, with T = min(bptt, what is left)."""
    T = min(bptt, rows.size(1) - 1 - i)
    return rows[:, i:i + T], rows[:, i + 1:i + 1 + T]


def detach_state(state):
    """Keep a state's values but cut its autograd history (``None`` stays ``None``)."""
    if state is None:
        return None
    if isinstance(state, torch.Tensor):
        return state.detach()
    return tuple(detach_state(s) for s in state)


class SequentialBatches:
    """Batches in stream order; ``carries_state``: the trainer passes each batch's final state on."""

    carries_state = True

    def __init__(self, stream: torch.Tensor, batch_size: int, bptt: int) -> None:
        self.rows = batchify(stream, batch_size)
        self.bptt = bptt

    def __len__(self) -> int:
        return math.ceil((self.rows.size(1) - 1) / self.bptt)

    def __getitem__(self, k: int) -> tuple:
        if not 0 <= k < len(self):
            raise IndexError(k)
        return get_batch(self.rows, k * self.bptt, self.bptt)

    def __iter__(self) -> Iterator[tuple]:
        return (self[k] for k in range(len(self)))


class RandomBatches:
    """Random subsequences of ``bptt`` tokens, ``batch_size`` per batch; repeatable from (seed, epoch)."""

    carries_state = False

    def __init__(self, stream: torch.Tensor, batch_size: int, bptt: int, *, seed: int, epoch: int) -> None:
        g = torch.Generator().manual_seed(seed * 1_000_003 + epoch)
        self.stream, self.batch_size, self.bptt = stream, batch_size, bptt
        offset = int(torch.randint(0, bptt, (1,), generator=g))
        n_seq = (len(stream) - 1 - offset) // bptt  # each needs bptt inputs plus one more target
        if n_seq < batch_size:
            raise InputError(
                f"{len(stream)} tokens give only {n_seq} subsequences of {bptt} tokens, "
                f"fewer than --batch-size {batch_size}",
                fix="use a smaller --batch-size or --bptt, or a longer training text",
            )
        self.starts = offset + bptt * torch.randperm(n_seq, generator=g)
        self.steps = torch.arange(bptt)

    def __len__(self) -> int:
        return len(self.starts) // self.batch_size  # the incomplete last group is left out

    def __getitem__(self, k: int) -> tuple:
        if not 0 <= k < len(self):
            raise IndexError(k)
        starts = self.starts[k * self.batch_size:(k + 1) * self.batch_size]
        idx = starts[:, None] + self.steps  # (B, T) positions in the stream
        return self.stream[idx], self.stream[idx + 1]

    def __iter__(self) -> Iterator[tuple]:
        return (self[k] for k in range(len(self)))


def make_batches(scheme: str, stream: torch.Tensor, batch_size: int, bptt: int, *, seed: int, epoch: int):
    if scheme == "sequential":
        return SequentialBatches(stream, batch_size, bptt)
    if scheme == "random":
        return RandomBatches(stream, batch_size, bptt, seed=seed, epoch=epoch)
    raise InputError(f"unknown batch scheme {scheme!r}", fix="use sequential or random")


def eval_rows(ids: np.ndarray, n_rows: int) -> tuple:
    """Inputs and targets (R, L) covering every id once; the last row is padded with ``<pad>`` targets.

    Row r predicts ``ids[r*L:(r+1)*L]``; its first input is the token just before
    (``</s>`` for row 0), so no target is skipped and none is counted twice.
    With ``n_rows=1`` the whole text is one row: every token sees its full history.
    """
    stream = with_start(ids)
    N = len(ids)
    if N == 0:
        raise InputError("the text to evaluate is empty", fix="pass a text with at least one sentence")
    L = math.ceil(N / max(1, n_rows))
    R = math.ceil(N / L)
    x = torch.full((R, L), PAD_ID, dtype=torch.long)
    y = torch.full((R, L), PAD_ID, dtype=torch.long)
    for r in range(R):
        a, b = r * L, min(N, (r + 1) * L)
        x[r, : b - a] = stream[a:b]
        y[r, : b - a] = stream[a + 1:b + 1]
    return x, y
