"""The tensor form of a KenLM *probing* binary, which stores its n-grams only as 64-bit hashes.

Nothing in such a file can be listed, so the back-off recursion of :mod:`fusion.tensor` (children of
a context) is not available; what is, is KenLM's own lookup: hash the candidate n-gram, probe the
order's linear-probing table.  Here that lookup runs for every (state, word) pair at once -- the
candidate word, then one earlier word per order, as KenLM extends a match to the left -- with the
hashes in int64 bit patterns (torch has no uint64 arithmetic; products wrap the same way, and the
bucket is the unsigned remainder, corrected from the signed one).  A candidate stops as soon as it
misses or its n-gram "extends left" to nothing (KenLM's flag), so the work falls fast with the order.

The state is the history's KenLM word ids, most recent first, ``-1`` past its start: ``[B,
order-1]`` int64, reordered by ``index_select`` as the other form's.  Sums are in float32, in
KenLM's order (the matched probability, then the context's back-off weights from that length up),
so every value is what the compiled probing scorer (and KenLM) gives, to the bit.  The tables stay
where the file is mapped on CPU; ``.to(device)`` copies the hash tables (keys, float32 values and
the flags) once.
"""
from __future__ import annotations

import math
from typing import Optional, Union

import torch

from corpora.vocab import BOS_ID, PAD_ID
from ngramlm.next_table import ProbingTable

from .base import TensorLM, as_tensor

_K1 = 8978948897894561157
_K2 = 17894857484156487943 - (1 << 64)  # the same 64 bits as a signed int64


def combine(current: torch.Tensor, word: torch.Tensor) -> torch.Tensor:
    """KenLM's hash of an n-gram extended by one earlier word (``lm/model.cc``'s CombineWordHash), in
    int64 bit patterns: multiplication and xor wrap modulo 2^64 as the uint64 ones do."""
    return (current * _K1) ^ ((word + 1) * _K2)


class ProbingTensorLM(TensorLM):
    """A KenLM probing binary as torch tensors (see the module's docstring); built by
    :func:`fusion.tensor.tensor_lm` for a probing file."""

    def __init__(self, table: ProbingTable, *, device: Union[str, torch.device, None] = None,
                 dtype: torch.dtype = torch.float32) -> None:
        # dtype is accepted for the common factory; the file holds float32 and KenLM sums in float32.
        self.table = table
        self.vocab = table.vocab
        self.order = table.order
        self.V = table.V
        self.dtype = torch.float32
        self.device = torch.device(device or "cpu")
        self.source = table.source
        put = lambda a: as_tensor(a, self.device)  # noqa: E731
        self.to_kenlm = put(table.to_kenlm)
        self.uni_lp = put(table.unigram_log10_prob)
        self.uni_bo = put(table.unigram_backoff)
        self.uni_ext = put(table.unigram_extends)
        self.keys = [put(k) for k in table.keys]
        self.lp = [put(p) for p in table.log10_prob]
        self.ext = [put(e) for e in table.extends]
        self.bo = [put(b) for b in table.log10_backoff]
        # 2^64 mod buckets: turns the signed remainder of a hash with its top bit set into the unsigned one.
        self.wrap = [(1 << 64) % max(len(k), 1) for k in table.keys]
        never = torch.zeros(self.V, dtype=torch.bool)
        never[[PAD_ID, BOS_ID]] = True
        self.never = never.to(self.device)
        self.bos = int(table.to_kenlm[BOS_ID])

    def to(self, device: Union[str, torch.device], dtype: Optional[torch.dtype] = None) -> "ProbingTensorLM":
        return ProbingTensorLM(self.table, device=device)

    @property
    def nbytes(self) -> int:
        cols = [self.to_kenlm, self.uni_lp, self.uni_bo, self.uni_ext, *self.keys, *self.lp, *self.ext, *self.bo]
        return sum(t.numel() * t.element_size() for t in cols)

    # ------------------------------------------------------------------ states
    def start(self, batch: int = 1, *, bos: bool = True) -> torch.Tensor:
        s = torch.full((batch, self.order - 1), -1, dtype=torch.long, device=self.device)
        if bos and self.order > 1:
            s[:, 0] = self.bos
        return s

    def advance(self, states: torch.Tensor, tokens: torch.Tensor) -> torch.Tensor:
        self._check(states, tokens)
        kid = self.to_kenlm[tokens.to(device=self.device, dtype=torch.long)]
        return torch.cat([kid.unsqueeze(1), states[:, :-1]], dim=1)[:, : self.order - 1]

    # ------------------------------------------------------------------ KenLM's lookups
    def probe(self, k: int, keys: torch.Tensor) -> torch.Tensor:
        """Bucket of each hash in order ``k``'s table, or -1: KenLM's linear probing (from the ideal
        bucket, the first bucket holding the key or empty -- key 0 -- decides).  The buckets are read in
        windows that widen (2, 8, 32, ...), so a long run costs a few steps, not one per bucket."""
        table = self.keys[k - 2]
        nb = len(table)
        out = torch.full_like(keys, -1)
        if nb == 0 or not len(keys):
            return out
        b = torch.remainder(keys, nb) + torch.where(keys < 0, self.wrap[k - 2], 0)
        b = torch.where(b >= nb, b - nb, b)
        todo = torch.arange(len(keys), device=keys.device)
        width = 2
        while len(todo):
            span = torch.arange(width, device=keys.device)
            at = torch.remainder(b.unsqueeze(1) + span, nb)  # [m, width] buckets in probing order
            got = table[at]
            want = keys[todo].unsqueeze(1)
            stop = (got == want) | (got == 0)
            first = stop.to(torch.int8).argmax(1)  # the first deciding bucket (0 if none in the window)
            decided = stop.any(1)
            pick = at.gather(1, first.unsqueeze(1)).squeeze(1)
            hit = decided & (got.gather(1, first.unsqueeze(1)).squeeze(1) == keys[todo])
            out[todo[hit]] = pick[hit]
            todo, b = todo[~decided], torch.remainder(b[~decided] + width, nb)
            width = min(width * 4, nb)
        return out

    def _context_backoffs(self, states: torch.Tensor) -> tuple:
        """The back-off weight of each context length the history's n-grams chain to ([B, order-1]
        float32, 0 past the chain) and how many lengths chain ([B])."""
        B, n = states.shape[0], self.order
        cb = torch.zeros((B, max(n - 1, 0)), dtype=torch.float32, device=self.device)
        if n == 1:
            return cb, torch.zeros(B, dtype=torch.long, device=self.device)
        node = states[:, 0]
        ok = node >= 0
        cb[:, 0] = torch.where(ok, self.uni_bo[node.clamp(min=0)], cb[:, 0])
        depth = ok.long()
        for i in range(1, n - 1):
            nxt = states[:, i]
            node = combine(node, nxt)
            cand = torch.nonzero(ok & (nxt >= 0)).squeeze(1)
            at = self.probe(i + 1, node[cand])
            found = at >= 0
            now = torch.zeros_like(ok)
            now[cand[found]] = True
            cb[cand[found], i] = self.bo[i - 1][at[found]]
            ok = now
            depth += ok.long()
        return cb, depth

    def _search(self, states: torch.Tensor, words: torch.Tensor) -> torch.Tensor:
        """log10 p (float32, KenLM's sums) of candidate words ``words`` ([B, C], KenLM ids) after each state."""
        B, C = words.shape
        n = self.order
        cb, depth = self._context_backoffs(states)
        lp = self.uni_lp[words].clone()  # [B, C]
        matched = torch.ones((B, C), dtype=torch.long, device=self.device)
        flat_lp, flat_m = lp.view(-1), matched.view(-1)
        # The candidates still searched: flat index into [B, C] and the hash of their match so far.
        alive = self.uni_ext[words].view(-1)
        if n > 1:
            alive = alive & (states[:, 0] >= 0).repeat_interleave(C)
        sel = torch.nonzero(alive).squeeze(1)
        node = words.reshape(-1)[sel]
        for i in range(n - 1):
            if not len(sel):
                break
            k = i + 2
            b = sel // C
            node = combine(node, states[b, i])
            at = self.probe(k, node)
            found = at >= 0
            hit, at = sel[found], at[found]
            flat_lp[hit] = self.lp[k - 2][at]
            flat_m[hit] = k
            if k == n:
                break
            go = self.ext[k - 2][at]
            if i + 1 < n - 1:
                go = go & (states[hit // C, i + 1] >= 0)
            else:
                go = torch.zeros_like(go)
            sel, node = hit[go], node[found][go]
        # The back-off weights of the contexts at least as long as the match, added one at a time in
        # KenLM's order (float32 sums: adding a 0.0 changes nothing).
        for i in range(n - 1):
            use = (matched - 1 <= i) & (depth.unsqueeze(1) > i)
            lp = lp + torch.where(use, cb[:, i : i + 1], torch.zeros((), dtype=torch.float32, device=self.device))
        return lp

    # ------------------------------------------------------------------ distributions
    def log10_probs(self, states: torch.Tensor) -> torch.Tensor:
        self._check(states)
        words = self.to_kenlm.unsqueeze(0).expand(states.shape[0], self.V)
        out = self._search(states, words)
        out[:, self.never] = -math.inf
        return out

    def token_log10_probs(self, states: torch.Tensor, tokens: torch.Tensor) -> torch.Tensor:
        self._check(states, tokens)
        tokens = tokens.to(device=self.device, dtype=torch.long)
        out = self._search(states, self.to_kenlm[tokens].unsqueeze(1)).squeeze(1)
        return out.masked_fill(self.never[tokens], -math.inf)
