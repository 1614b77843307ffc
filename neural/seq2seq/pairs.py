"""Sentence pairs as padded minibatches for the encoder-decoder.

A pair of id arrays ``(x_1..x_m, y_1..y_n)`` (no specials) becomes::

    src     x_1 .. x_m </s>          the encoder reads an end marker, so an empty source has length 1
    tgt_in  <s> y_1 .. y_n            teacher forcing: the target shifted right by <s>
    tgt_out y_1 .. y_n </s>           what is predicted: every word and the end, as the LMs predict

padded with ``<pad>`` (id 0) to the longest row of the batch; ``<pad>`` targets are ignored by
the loss, padded source positions are masked in attention and skipped by the encoder.
Batches of an epoch are a function of (seed, epoch), so a resumed run sees the same ones.
"""
from __future__ import annotations

from typing import Sequence

import numpy as np
import torch

from corpora.errors import InputError
from corpora.vocab import BOS_ID, EOS_ID, PAD_ID


def pad_rows(rows: Sequence, *, prefix: Sequence[int] = (), suffix: Sequence[int] = ()) -> torch.Tensor:
    """``prefix + row + suffix`` for every row, right-padded with ``<pad>``: (B, L) int64."""
    n = [len(r) + len(prefix) + len(suffix) for r in rows]
    out = torch.full((len(rows), max(n)), PAD_ID, dtype=torch.long)
    for i, r in enumerate(rows):
        out[i, :n[i]] = torch.as_tensor([*prefix, *np.asarray(r, dtype=np.int64).tolist(), *suffix])
    return out


def source_batch(src: Sequence) -> tuple:
    """Source id arrays -> (src (B, S), lengths (B,))."""
    x = pad_rows(src, suffix=(EOS_ID,))
    return x, torch.tensor([len(s) + 1 for s in src], dtype=torch.long)


def pair_batch(src: Sequence, tgt: Sequence) -> tuple:
    """-> (x, y): ``x = (src, src_len, tgt_in)``, ``y = tgt_out`` (see the module docstring)."""
    s, s_len = source_batch(src)
    return (s, s_len, pad_rows(tgt, prefix=(BOS_ID,))), pad_rows(tgt, suffix=(EOS_ID,))


class PairBatches:
    """The minibatches of one epoch: shuffled (seeded by seed and epoch), or in order for scoring."""

    carries_state = False

    def __init__(self, src: Sequence, tgt: Sequence, batch_size: int, *, seed: int = 0, epoch: int = 0,
                 shuffle: bool = True) -> None:
        if len(src) != len(tgt):
            raise InputError(f"{len(src)} source sentences but {len(tgt)} targets", fix="pass aligned pairs")
        if not len(src):
            raise InputError("no sentence pairs to batch", fix="pass at least one pair")
        self.src, self.tgt, self.batch_size = src, tgt, batch_size
        order = np.arange(len(src))
        if shuffle:
            order = np.random.default_rng([seed, epoch]).permutation(len(src))
        self.order = order

    def __len__(self) -> int:
        return -(-len(self.order) // self.batch_size)

    def __getitem__(self, k: int) -> tuple:
        idx = self.order[k * self.batch_size:(k + 1) * self.batch_size]
        return pair_batch([self.src[i] for i in idx], [self.tgt[i] for i in idx])
