"""A model's n-grams cut by first word: the partitions the Dask build counts, estimates and writes.

A :class:`Part` holds the n-grams of every order whose *first word* lies in ``[lo, hi)``.  In the
model's sorted order (lexicographic in word ids, which is the order of ``parent * V + word`` keys) a
part's rows are one contiguous range of every order, and the parts in turn are the whole table: the
global row of a part's row is its local row plus the sizes of the parts before it (offsets the client
adds up from each part's sizes).  A part is closed under taking prefixes: an n-gram's context (all its
words but the last) starts with the same word.  So everything an interpolated smoother does within a
context -- the sums over its rows, ``gamma``, the back-off weight -- is local to one part.

What crosses parts is the *suffix* (all words but the first), which starts with the second word:

* Kneser-Ney's adjusted count of an order-k row is the number of order-(k+1) rows whose suffix it
  is (its left extensions);
* interpolation needs ``p_{k-1}`` of each row's suffix.

Both travel the same way, a round of requests per order (:func:`suffix_requests`, answered by
:func:`resolve_suffixes` on the part that holds the suffixes, which counts the left extensions as it
answers; then :func:`gather_lower` for the probabilities).  A suffix is found by one binary search: the
suffix of ``w1..wk`` is ``(suffix of w1..w_{k-1}) + wk``, and the requester already knows, as a row of
the answering part, the suffix of its n-gram's context (the round of the order below).

The functions here are plain numpy on one part (the tasks of ``ngramlm.builder.cluster_estimate`` call
them on the workers); the per-order formulas are the smoother's own (:class:`ngramlm.smoothing.OrderForm`),
so the estimate equals the in-memory one bit for bit.
"""
from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

import numpy as np

from corpora.vocab import BOS_ID

from ..counts import NgramCounts, unique_inverse
from ..smoothing import context_sums, count_of_counts, interpolate_rows, log_backoff


@dataclass
class Part:
    """The n-grams whose first word is in ``[lo, hi)``, orders 1..n.

    ``keys[k-1]`` (k >= 2): ``parent * V + word``, sorted, where ``parent`` is the row of the order
    below *in this part* (order 1's row of word w is ``w - lo``); ``keys[0]`` is None.  ``counts[k-1]``:
    raw counts (int64), order 1 for the words ``lo..hi-1``."""

    lo: int
    hi: int
    V: int
    keys: list
    counts: list

    @property
    def order(self) -> int:
        return len(self.counts)

    def __sizeof__(self) -> int:
        # What Dask's sizeof (sys.getsizeof) sees: the arrays' bytes, so that a worker spills parts to its
        # disk past its memory target instead of holding on until its nanny restarts it.
        return object.__sizeof__(self) + sum(a.nbytes for a in self.keys + self.counts if a is not None)

    def size(self, k: int) -> int:
        return self.hi - self.lo if k == 1 else len(self.keys[k - 1])

    def sizes(self) -> list:
        return [self.size(k) for k in range(1, self.order + 1)]

    def parent(self, k: int) -> np.ndarray:
        return self.keys[k - 1] // self.V

    def word(self, k: int) -> np.ndarray:
        return self.keys[k - 1] % self.V

    def bos_rows(self, k: int) -> tuple:
        """The rows ``[a, b)`` of order k that start with ``<s>`` (contiguous; empty unless <s> is here)."""
        if not self.lo <= BOS_ID < self.hi:
            return 0, 0
        a, b = BOS_ID - self.lo, BOS_ID - self.lo + 1
        for j in range(2, k + 1):
            a, b = (int(np.searchsorted(self.keys[j - 1], x * self.V)) for x in (a, b))
        return a, b


def bounds_for(weights: np.ndarray, parts: int) -> np.ndarray:
    """Word-id bounds ``b_0 = 0 < b_1 < ... < b_P = V`` cutting ``weights`` (each word's token count, about
    how many n-grams start with it) into at most ``parts`` ranges of about equal weight."""
    V = len(weights)
    cum = np.cumsum(np.asarray(weights, dtype=np.float64))
    total = cum[-1] if V else 0.0
    if parts <= 1 or total <= 0:
        return np.array([0, V], dtype=np.int64)
    cuts = np.searchsorted(cum, total * np.arange(1, parts) / parts, side="right")
    b = np.unique(np.concatenate([[0], np.clip(cuts, 1, V - 1), [V]]))
    return b.astype(np.int64)


def part_of(bounds: np.ndarray, words: np.ndarray) -> np.ndarray:
    """The part each word id falls in."""
    return (np.searchsorted(bounds, words, side="right") - 1).astype(np.int32)


# ----------------------------------------------------------------------------- counting
def split_counts(counts: NgramCounts, bounds: np.ndarray) -> list:
    """One text's counts (a shard's) cut into the parts ``bounds`` gives: rows of every order are
    contiguous by first word, so each part is a slice of each order, its parents rebased."""
    V, n = counts.vocab_size, counts.order
    first = [np.arange(V, dtype=np.int64)]
    for k in range(2, n + 1):
        first.append(first[-1][counts.tables[k - 1].parent])
    out = []
    for p in range(len(bounds) - 1):
        lo, hi = int(bounds[p]), int(bounds[p + 1])
        keys, cnts = [None], [counts.tables[0].count[lo:hi].astype(np.int64)]
        below = lo  # the first row of the order below in this part
        for k in range(2, n + 1):
            s, e = (int(x) for x in np.searchsorted(first[k - 1], [lo, hi]))
            t = counts.tables[k - 1]
            keys.append((t.parent[s:e].astype(np.int64) - below) * V + t.word[s:e])
            cnts.append(t.count[s:e].astype(np.int64))
            below = s
        out.append(Part(lo, hi, V, keys, cnts))
    return out


def merge_parts(pieces: list) -> Part:
    """The sum of several texts' pieces of one part (the same ``lo, hi``): equal n-grams' counts added,
    rows sorted -- what counting the texts together gives for these first words."""
    pieces = [p for p in pieces if p is not None]
    lo, hi, V, n = pieces[0].lo, pieces[0].hi, pieces[0].V, pieces[0].order
    cnt1 = np.zeros(hi - lo, dtype=np.int64)
    for p in pieces:
        cnt1 += p.counts[0]
    keys, cnts = [None], [cnt1]
    maps = [None] * len(pieces)  # each piece's rows of the order below -> merged rows
    for k in range(2, n + 1):
        parts_k = []
        for i, p in enumerate(pieces):
            kk = p.keys[k - 1]
            if k > 2:  # order 1's rows are the same in every piece (w - lo)
                kk = maps[i][kk // V] * V + kk % V
            parts_k.append(kk)
        allk = np.concatenate(parts_k) if parts_k else np.zeros(0, dtype=np.int64)
        uniq, inv, _ = unique_inverse(allk)
        del allk
        c = np.concatenate([p.counts[k - 1] for p in pieces])
        # Counts are exact in float64 below 2^53.
        cnts.append(np.bincount(inv, weights=c, minlength=len(uniq)).astype(np.int64))
        keys.append(uniq)
        at = np.cumsum([0] + [len(x) for x in parts_k])
        maps = [inv[at[i]:at[i + 1]] for i in range(len(pieces))]
    return Part(lo, hi, V, keys, cnts)


# ----------------------------------------------------------------------------- suffixes
@dataclass
class Suffixes:
    """Where the suffixes of a part's order-k rows are: the part ``to`` and the row there (order k-1)."""

    to: np.ndarray  # int32 part of each row's suffix
    row: np.ndarray  # int64 row of the suffix in that part

    def __sizeof__(self) -> int:  # see Part.__sizeof__
        return object.__sizeof__(self) + self.to.nbytes + self.row.nbytes


def order2_suffixes(part: Part, bounds: np.ndarray) -> Suffixes:
    """Order 2: the suffix of ``w1 w2`` is the unigram ``w2``, whose part and row the bounds give."""
    w = part.word(2)
    to = part_of(bounds, w)
    return Suffixes(to, w - bounds[to])


def suffix_requests(part: Part, k: int, below: Suffixes, n_parts: int) -> list:
    """For order k >= 3, the keys to look up in each part: ``(row of the context's suffix) * V + word``,
    grouped by the part they go to (in row order within each group)."""
    parent = part.parent(k)
    to = below.to[parent]
    key = below.row[parent] * part.V + part.word(k)
    return [key[to == q] for q in range(n_parts)]


def resolve_suffixes(part: Part, k: int, requests: list) -> tuple:
    """Answer the order-k requests of every part (``requests[p]``) with rows of this part's order k-1,
    and count each row's left extensions: ``(answers per part, counts)``."""
    keys = part.keys[k - 2]
    answers = []
    cont = np.zeros(len(keys), dtype=np.int64)
    for req in requests:
        idx = np.searchsorted(keys, req)
        if len(idx) and (idx.max() >= len(keys) or not np.array_equal(keys[idx], req)):
            raise ValueError(f"an order-{k} n-gram's suffix is missing from order {k - 1}: counts are not "
                             "suffix-closed")
        cont += np.bincount(idx, minlength=len(keys))
        answers.append(idx)
    return answers, cont


def place_answers(part: Part, k: int, below: Suffixes, answers: list) -> Suffixes:
    """Order k's :class:`Suffixes` from the answers to :func:`suffix_requests` (``answers[q]``)."""
    to = below.to[part.parent(k)]
    row = np.empty(len(to), dtype=np.int64)
    for q, a in enumerate(answers):
        row[to == q] = a
    return Suffixes(to, row)


def adjusted_counts(part: Part, k: int, continuation: np.ndarray) -> np.ndarray:
    """Kneser-Ney's adjusted counts of order k (1 < k < n): the left extensions, but n-grams that start
    with ``<s>`` keep their raw counts (as :func:`ngramlm.smoothing.adjusted_counts`)."""
    a = continuation.astype(np.float64)
    s, e = part.bos_rows(k)
    a[s:e] = part.counts[k - 1][s:e]
    return a


def row_counts(part: Part, k: int, smoother, adjusted: Optional[np.ndarray]) -> np.ndarray:
    """The counts order k's formulas take: adjusted below the highest order for Kneser-Ney, else raw."""
    if smoother.row_counts == "adjusted" and adjusted is not None:
        return adjusted
    return part.counts[k - 1].astype(np.float64)


def count_stats(c: np.ndarray) -> np.ndarray:
    """Count-of-counts n_0..n_4 of the positive entries (summed over parts into the discounts' input)."""
    return count_of_counts(c[c > 0], 4).astype(np.int64)


# ----------------------------------------------------------------------------- estimation
def gather_lower(lower_probs: np.ndarray, rows: np.ndarray) -> np.ndarray:
    """The probabilities a part asked for (its suffixes' rows in the part holding ``lower_probs``)."""
    return lower_probs[rows]


def place_lower(sfx: Suffixes, pieces: list) -> np.ndarray:
    """Each row's lower-order probability from the pieces :func:`gather_lower` sent (``pieces[q]``)."""
    out = np.empty(len(sfx.to), dtype=np.float64)
    for q, v in enumerate(pieces):
        out[sfx.to == q] = v
    return out


def order_pass(part: Part, k: int, smoother, c: np.ndarray, param, lower: np.ndarray, *, highest: bool) -> tuple:
    """Order k's ``(linear probabilities (None at the highest order), log10 probabilities, log10 back-offs
    of the order-(k-1) rows)`` from its row counts ``c`` and its suffixes' ``p_{k-1}``: the smoother's own
    formulas on the part's rows (whole contexts)."""
    parent = part.parent(k)
    alpha, gamma = smoother.alpha_gamma(c, parent, part.size(k - 1), param)
    p = interpolate_rows(alpha, gamma[parent], lower)
    lin = None if highest else p.copy()
    with np.errstate(divide="ignore"):
        np.log10(p, out=p)
    return lin, p, log_backoff(gamma)


def stupid_pass(part: Part, k: int) -> np.ndarray:
    """Stupid backoff's log10 relative frequencies of order k (no interpolation: nothing crosses parts)."""
    c = part.counts[k - 1].astype(np.float64)
    parent = part.parent(k)
    total = context_sums(parent, c, part.size(k - 1))
    with np.errstate(divide="ignore"):
        return np.log10(c / np.where(total > 0, total, 1.0)[parent])


# ----------------------------------------------------------------------------- files
def save_column(folder: Path, name: str, values: np.ndarray) -> None:
    """A column of a part as ``.npy`` in the shared folder, written atomically (a task run twice, after
    a worker died, writes the same bytes again)."""
    path = Path(folder) / f"{name}.npy"
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    with open(tmp, "wb") as fh:
        np.lib.format.write_array(fh, np.ascontiguousarray(values), allow_pickle=False)
    os.replace(tmp, path)


def column_chunks(path: Path, chunk: int):
    """``(dtype, length, chunks)`` of a saved column read in pieces of ``chunk`` entries (plain reads,
    not a mapping: mapped pages would count in the resident set)."""
    fh = open(path, "rb")
    version = np.lib.format.read_magic(fh)
    read_header = np.lib.format.read_array_header_1_0 if version == (1, 0) else np.lib.format.read_array_header_2_0
    shape, _, dtype = read_header(fh)
    n = int(shape[0])

    def chunks():
        with fh:
            left = n
            while left:
                m = min(chunk, left)
                a = np.empty(m, dtype=dtype)
                fh.readinto(memoryview(a).cast("B"))
                left -= m
                yield a

    return dtype, n, chunks()


def global_keys(part: Part, k: int, offset_below: int) -> np.ndarray:
    """Order k's keys in the whole model: the parents shifted by the rows of the parts before."""
    return (part.parent(k) + offset_below) * part.V + part.word(k)


def formatter_keys(part: Part, k: int) -> list:
    """The keys of orders 2..k as the ARPA formatter takes them (parents index the order below's rows
    in this part; order 2's parents are word ids)."""
    out = [None] + [part.keys[j - 1] for j in range(2, k + 1)]
    if k >= 2 and part.lo:
        out[1] = out[1] + part.lo * part.V
    return out
