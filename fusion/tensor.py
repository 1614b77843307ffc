"""An n-gram back-off model as batched torch operations: the n-gram inside a decoder's search.

A trigram of the toy language (generated from a seed: no files needed); any model file works the same,
``tensor_lm("ptb3.arpa")``:

    >>> import torch
    >>> from corpora import load_corpus, prepare
    >>> from corpora.toy import ToyConfig
    >>> from ngramlm import NgramLM
    >>> from fusion import tensor_lm
    >>> ds = prepare(load_corpus("toy", toy_config=ToyConfig(n_train_tokens=20_000, n_valid_tokens=1_000,
    ...                                                        n_test_tokens=1_000, vocab_size=500)))
    >>> ngram = NgramLM(order=3, smoothing="mkn").fit(ds["train"], vocab=ds.vocab)
    >>> lm = tensor_lm(ngram)
    >>> states = lm.start(4)                     # [4, order-1] int64: four histories "<s>"
    >>> lp = lm.log_probs(states)                # [4, V] float32: ln p(. | h)
    >>> tuple(lp.shape), lp.dtype, round(float(lp[0].double().exp().sum()), 6)
    ((4, 501), torch.float32, 1.0)
    >>> states = lm.advance(states, lp.argmax(1))            # one token more on every history
    >>> states = states.index_select(0, torch.tensor([3, 0]))  # a beam search keeps two of them
    >>> w = ds.vocab.itos_[int(lp[0].argmax())]
    >>> bool(abs(float(lm.log_probs(states)[1, 9]) - ngram.log10_prob(ds.vocab.itos_[9], ["<s>", w]) * 2.302585093) < 1e-6)
    True

**The state.**  A history is an int64 row of ``order - 1`` entries: entry ``j - 1`` is the row, in
the order-``j`` table, of the history's last ``j`` tokens, ``-1`` where the model does not store
them, ``-2`` where the history (since ``<s>``) is shorter than ``j``.  That is all the back-off
recursion reads -- the back-off weight of every context length and where to find its children -- so
two equal rows have equal futures (a decoder can recombine on them) and a batch of states is one
``[B, order-1]`` tensor that ``index_select`` reorders.

**The full distribution** ``log_probs(states)`` is the back-off recursion, vectorised over the
batch: start from the unigram distribution plus the back-off weights of every context length, then,
order by order from low to high, overwrite the stored children of each state's context with their
own log probability plus the weights of the longer contexts.  Each order is one gather over the
children (CSR offsets from :mod:`ngramlm.next_table`) and one scatter, so a call costs
``B * V`` for the output plus the children of the contexts, never a lookup per word.  Every entry
is the scorer's value (:class:`~ngramlm.scorer.Scorer`): computed in float64 from the model's float64
tables and rounded once.

**Where the tables live.**  On CPU the tensors *are* the model's numpy arrays
(``torch.from_numpy``: no copy; a native model mapped from disk stays mapped), plus one int64
offset per context row.  ``.to(device)`` copies each array once to the device; ``dtype=
torch.float32`` halves the value columns (for devices without float64) at float32's accuracy.
:attr:`NgramTensorLM.nbytes` says how much a model holds.
"""
from __future__ import annotations

import math
from typing import Optional, Union

import torch

from corpora.vocab import BOS_ID, PAD_ID
from ngramlm.next_table import NextTable, ProbingTable, next_table

from .base import SHORT, UNSTORED, TensorLM, as_tensor, expand_ranges

class NgramTensorLM(TensorLM):
    """A back-off model whose n-grams are listed (ARPA, native, KenLM trie, mixtures, pruned models) as
    torch tensors: see the module's docstring.  Build it with :func:`tensor_lm` or from a
    :class:`~ngramlm.next_table.NextTable`."""

    def __init__(self, table: NextTable, *, device: Union[str, torch.device, None] = None,
                 dtype: Optional[torch.dtype] = None) -> None:
        dtype = dtype or (torch.float32 if table.float32_sums else torch.float64)
        self.table = table
        self.vocab = table.vocab
        put = lambda a, dt=None: as_tensor(a, device, dt)  # noqa: E731
        self._set_tensors([put(k) for k in table.keys], [put(p, dtype) for p in table.log10_prob],
                          [put(b, dtype) for b in table.log10_backoff], [put(s) for s in table.child_start],
                          V=table.V, missing_backoff=table.missing_backoff, source=table.source, dtype=dtype,
                          device=device)

    @classmethod
    def from_tensors(cls, keys: list, log10_prob: list, log10_backoff: list, child_start: list, *, V: int,
                     missing_backoff: float, source: str = "") -> "NgramTensorLM":
        """The tensor form over tables that are already tensors (a residual model's buffers,
        :mod:`fusion.residual`): shared, not copied; no vocabulary strings (``ids`` is unavailable)."""
        self = cls.__new__(cls)
        self.table, self.vocab = None, None
        self._set_tensors(list(keys), list(log10_prob), list(log10_backoff), list(child_start), V=V,
                          missing_backoff=missing_backoff, source=source, dtype=log10_prob[0].dtype,
                          device=log10_prob[0].device)
        return self

    def _set_tensors(self, keys, lp, bo, child_start, *, V, missing_backoff, source, dtype, device) -> None:
        self.order = len(keys)
        self.V = int(V)
        self.dtype = dtype
        self.device = torch.device(device or "cpu")
        self.missing_backoff = float(missing_backoff)
        self.source = source
        self.keys, self.lp, self.bo, self.child_start = keys, lp, bo, child_start
        never = torch.zeros(self.V, dtype=torch.bool)
        never[[PAD_ID, BOS_ID]] = True  # never predicted: -inf whatever the tables hold for them
        self.never = never.to(self.device)

    def to(self, device: Union[str, torch.device], dtype: Optional[torch.dtype] = None) -> "NgramTensorLM":
        """The same model with its tables on ``device`` (each array copied there once)."""
        return NgramTensorLM(self.table, device=device, dtype=dtype or self.dtype)

    @property
    def nbytes(self) -> int:
        """Bytes held by the tensors (on CPU in float64 they are the model's own arrays, shared)."""
        return sum(t.numel() * t.element_size() for col in (self.keys, self.lp, self.bo, self.child_start)
                   for t in col)

    # ------------------------------------------------------------------ states
    def start(self, batch: int = 1, *, bos: bool = True) -> torch.Tensor:
        s = torch.full((batch, self.order - 1), SHORT if bos else UNSTORED, dtype=torch.long, device=self.device)
        if bos and self.order > 1:
            s[:, 0] = BOS_ID  # the unigram row of a word is its id
        return s

    def find(self, k: int, context: torch.Tensor, tokens: torch.Tensor) -> torch.Tensor:
        """Row in order ``k`` of each (context row of order k-1, token), or -1: a binary search over the
        sorted keys, as the scorer's lookup."""
        keys = self.keys[k - 1]
        if not len(keys):  # an order a pruned model emptied
            return torch.full_like(context, UNSTORED)
        q = context * self.V + tokens
        at = torch.searchsorted(keys, q)
        hit = (at < len(keys)) & (keys[at.clamp(max=len(keys) - 1)] == q) & (context >= 0)
        return torch.where(hit, at, torch.full_like(at, UNSTORED))

    def advance(self, states: torch.Tensor, tokens: torch.Tensor) -> torch.Tensor:
        self._check(states, tokens)
        tokens = tokens.to(device=self.device, dtype=torch.long)
        new = torch.empty_like(states)
        if self.order == 1:
            return new
        new[:, 0] = tokens
        for j in range(2, self.order):
            prev = states[:, j - 2]
            # A context the model lacks (or that reaches past <s>) has no longer extension either.
            new[:, j - 1] = torch.where(prev >= 0, self.find(j, prev, tokens), prev)
        return new

    # ------------------------------------------------------------------ distributions
    def _context_weights(self, states: torch.Tensor) -> list:
        """w[j-1]: the back-off weight of the history's context of length j (j = 1 .. order-1), [B] each:
        the stored weight, the missing-context weight where it is not stored, 0 past <s>."""
        B = states.shape[0]
        w = []
        for j in range(1, self.order):
            c = states[:, j - 1]
            bo = self.bo[j - 1]
            b = bo[c.clamp(min=0)] if len(bo) else torch.zeros(B, dtype=self.dtype, device=self.device)
            missing = torch.where(c == UNSTORED, b.new_tensor(self.missing_backoff), b.new_zeros(()))
            w.append(torch.where(c >= 0, b, missing))
        return w

    def log10_probs(self, states: torch.Tensor) -> torch.Tensor:
        self._check(states)
        B, V = states.shape[0], self.V
        w = self._context_weights(states)
        # A word matched at order k pays the weights of the contexts of length k .. order-1, added one
        # at a time from the shortest, as the scorer adds them (so the sums round as the scorer's do).
        out = self.lp[0].unsqueeze(0).expand(B, V)
        for j in range(1, self.order):
            out = out + w[j - 1].unsqueeze(1)
        out = out.contiguous()
        flat = out.view(-1)
        for k in range(2, self.order + 1):
            ctx = states[:, k - 2]
            who = torch.nonzero(ctx >= 0).squeeze(1)
            if not len(who):
                continue
            offs = self.child_start[k - 2]
            first, last = offs[ctx[who]], offs[ctx[who] + 1]
            rows, owner = expand_ranges(first, last - first)
            b = who[owner]
            vals = self.lp[k - 1][rows]
            for j in range(k, self.order):
                vals = vals + w[j - 1][b]
            flat[b * V + self.keys[k - 1][rows] % V] = vals
        out[:, self.never] = -math.inf
        return out

    def token_log10_probs(self, states: torch.Tensor, tokens: torch.Tensor) -> torch.Tensor:
        self._check(states, tokens)
        tokens = tokens.to(device=self.device, dtype=torch.long)
        w = self._context_weights(states)
        lp = self.lp[0][tokens]
        matched = torch.ones_like(tokens)
        for k in range(2, self.order + 1):
            at = self.find(k, states[:, k - 2], tokens)
            hit = at >= 0
            lp = torch.where(hit, self.lp[k - 1][at.clamp(min=0)], lp)
            matched = torch.where(hit, torch.full_like(matched, k), matched)
        for j in range(1, self.order):
            lp = lp + torch.where(matched <= j, w[j - 1], w[j - 1].new_zeros(()))
        return lp.masked_fill(self.never[tokens], -math.inf)


def tensor_lm(model, *, device: Union[str, torch.device, None] = None, dtype: Optional[torch.dtype] = None,
              mmap: Optional[bool] = None) -> TensorLM:
    """The tensor form of ``model``: a model file (ARPA, native ``.npz``, KenLM trie or probing binary,
    a mixture or a pruned model) or a loaded model (``NgramLM``, any ``Scorer``, ``ngramlm.Model``), or
    the tables of :func:`ngramlm.next_table.next_table`.

    ``dtype`` is the value columns' (and the sums'): by default float64 for the toolkit's own tables
    and float32 for a KenLM binary, whose file holds float32 and whose scorer sums in float32 (as
    KenLM does) -- so either way every value is its scorer's."""
    table = model if isinstance(model, (NextTable, ProbingTable)) else next_table(model, mmap=mmap)
    if isinstance(table, ProbingTable):
        from .probing import ProbingTensorLM

        return ProbingTensorLM(table, device=device)
    if dtype is None:
        dtype = torch.float32 if table.float32_sums else torch.float64
    return NgramTensorLM(table, device=device, dtype=dtype)
