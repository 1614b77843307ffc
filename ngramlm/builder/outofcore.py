"""Out-of-core estimation: modified Kneser-Ney from merged counts on disk to a model file, in chunks.

What ``ngramlm train --memory`` runs when the merged counts would not fit the budget (lmplz's
plan: every stage streams sorted files).  Input: :class:`~ngramlm.builder.streaming.DiskCounts`, the
merge's columns in the temp folder (per order the sorted keys ``parent * V + word``, raw counts,
suffix rows).  Output: the native ``.npz`` or an ARPA file, written straight from columns.  At no
point are all orders -- or one order's full set of working arrays -- in memory:

1. **Adjusted counts** of order k < n: the number of order-(k+1) n-grams whose suffix is each
   order-k row, a bincount over the suffix column, windowed over the order-k rows
   (:func:`~ngramlm.builder.diskarrays.count_occurrences`); rows that start with ``<s>`` -- a contiguous
   range in sorted order -- keep their raw counts.  Count-of-counts and the discounts follow
   (:meth:`ModifiedKneserNey.discounts_from_counts_of_counts`, as in memory).
2. **Lower-order probabilities** ``p_{k-1}(h'w)`` for every order-k row: a windowed gather of
   order k-1's (linear) probabilities by the suffix column.
3. **Probabilities and back-offs** of order k in chunks of rows that never split a context (a
   context has at most V rows, and rows are sorted by context): the very formulas of the in-memory
   smoother (:func:`~ngramlm.smoothing.mkn_alpha_gamma`, :func:`~ngramlm.smoothing.interpolate_rows`,
   :func:`~ngramlm.smoothing.log_backoff`) applied to each chunk, so every number equals the
   in-memory estimate bit for bit (each context's sums run over the same rows in the same order).
   The back-offs of the order-(k-1) contexts fall out of the same pass.
4. **Writing** with plain reads of the columns: the ``.npz`` member by member
   (:func:`~ngramlm.io.native.save_native_streamed`), or the ARPA sections in chunks through the
   compiled formatter, each chunk with the slices of the lower orders its n-grams' words come from
   (in sorted order those slices move forward only).

Memory: the budget less the fixed overhead is split between a window of a table (half) and the
working arrays of a chunk (about 250 bytes a row); intermediate columns are deleted as soon as the
next order no longer needs them, so the temp folder peaks at about 50 bytes an n-gram.
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Callable, Optional

import numpy as np

from corpora.errors import InputError
from corpora.vocab import BOS_ID, PAD_ID, UNK_ID

from .diskarrays import Column, ColumnWriter, count_occurrences, gather
from ..smoothing import (ModifiedKneserNey, unigram_mask, count_of_counts, discount_vector, interpolate_rows,
                         log_backoff, mkn_alpha_gamma, out_of_core_smoothers, unigram_probs)
from .streaming import FIXED_OVERHEAD, DiskCounts, TempFolder

# Working bytes per row of a chunk in the estimation pass (keys, parents, adjusted counts, buckets,
# alpha, lower-order probabilities, their products, logs and numpy's temporaries).
BYTES_PER_CHUNK_ROW = 250
# The in-memory estimation's peak per merged n-gram (counts, adjusted counts, alphas, gammas,
# probabilities, the model): above the budget, ``--estimation auto`` estimates on disk.
BYTES_PER_NGRAM_IN_MEMORY = 70

def supports(smoother) -> bool:
    """Whether the out-of-core estimation implements ``smoother`` (the registry's ``out_of_core`` ones: modified
    and plain Kneser-Ney, whose formulas it applies in chunks)."""
    return isinstance(smoother, ModifiedKneserNey) and smoother.name in out_of_core_smoothers()


def unsupported_reason(lm, smoother) -> Optional[str]:
    """Why model ``lm`` (an :class:`NgramLM`'s parameters) cannot be estimated out of core, or None."""
    if not supports(smoother):
        return f"the out-of-core estimation implements {' and '.join(out_of_core_smoothers())}, not {smoother.name}"
    if (lm.prune is not None and any(lm.prune)) or lm.prune_entropy:
        return "pruning needs the model in memory"
    if lm.order < 2:
        return "a unigram model is estimated in memory"
    return None


@dataclass
class DiskModel:
    """An estimated back-off model in the temp folder: per order k the keys (order 1: the ids), the
    log10 probabilities and (k < n) log10 back-offs as columns (index k-1)."""

    order: int
    V: int
    keys: list
    logp: list
    backoff: list
    n_ngrams: list
    count_of_counts: list
    info: dict = field(default_factory=dict)

    def size(self, k: int) -> int:
        return self.V if k == 1 else len(self.keys[k - 1])


@dataclass
class Sizes:
    """How the budget is cut: rows per chunk, entries of a table window."""

    chunk: int
    window: int

    @classmethod
    def for_budget(cls, memory: int, V: int) -> "Sizes":
        avail = max(1 << 20, memory - FIXED_OVERHEAD)
        # A chunk must hold a whole context: at most V rows (one per word).
        return cls(chunk=max(V + 1, avail // BYTES_PER_CHUNK_ROW), window=max(1, avail // 2 // 8))


def estimate(dc: DiskCounts, smoother: ModifiedKneserNey, n_types: int, folder: TempFolder, memory: int, *,
             sizes: Optional[Sizes] = None, progress: Optional[Callable[[str], None]] = None,
             first_seen: Optional[np.ndarray] = None) -> DiskModel:
    """Modified (or plain) Kneser-Ney from the counts on disk; equal to ``smoother.estimate`` of the same
    counts in memory.  ``dc``'s count and suffix columns are consumed (deleted once used).

    ``first_seen`` (the ids in the order they first appear in the text) asks for lmplz's conventions
    (``--compat kenlm``, :mod:`ngramlm.kenlm_compat`), as the in-memory estimate applies them."""
    if not supports(smoother):
        raise InputError(f"the out-of-core estimation implements {' and '.join(out_of_core_smoothers())}, "
                         f"not {smoother.name}",
                         fix="use --estimation memory (or a larger --memory) for this smoother")
    say = progress or (lambda msg: None)
    n, V = dc.order, dc.V
    sz = sizes or Sizes.for_budget(memory, V)
    if sz.chunk <= V:
        raise ValueError(f"a chunk of {sz.chunk} rows cannot hold a context of up to {V} rows")
    t0 = time.perf_counter()

    def tick(msg: str) -> None:
        say(f"{msg} ({time.perf_counter() - t0:.1f} s)")

    # Raw count-of-counts (the model's record, as NgramCounts.count_of_counts gives them).
    coc = [count_of_counts_raw(dc.unigrams)]
    for k in range(2, n + 1):
        acc = np.zeros(11, dtype=np.int64)
        for _, c in dc.counts[k - 1].chunks(sz.chunk):
            acc += count_of_counts_raw(c)
        coc.append(acc)

    # 1. Adjusted counts, orders n-1 .. 1 (order n: the raw counts), and their count-of-counts.
    bos = _bos_ranges(dc)
    adj: list = [None] * n  # order 1: an array; orders 2..n-1: float64 columns; order n: the count column
    ncs: list = [None] * n
    for k in range(n - 1, 0, -1):
        # Half a window: each chunk's bincount is as long as the window it adds into.
        cont = count_occurrences(dc.suffix[k], dc.size(k), folder, f"cont{k}", window=max(1, sz.window // 2),
                                 chunk=sz.chunk)
        a0, a1 = bos[k - 1]
        if k == 1:
            a = cont.read_all().astype(np.float64)
            a[a0:a1] = dc.unigrams[a0:a1]
            a[~unigram_mask(V)] = 0.0
            adj[0] = a
            ncs[0] = count_of_counts(a[a > 0], 4)
        else:
            out = ColumnWriter(folder, f"adj{k}", np.float64)
            nc = np.zeros(5, dtype=np.int64)
            for s, c in cont.chunks(sz.chunk):
                a = c.astype(np.float64)
                lo, hi = max(a0, s), min(a1, s + len(a))
                if lo < hi:  # rows that start with <s> keep their raw counts
                    a[lo - s:hi - s] = dc.counts[k - 1].read(lo, hi)
                nc += count_of_counts(a[a > 0], 4)
                out.append(a)
            adj[k - 1] = out.done()
            ncs[k - 1] = nc
        cont.remove()
    nc = np.zeros(5, dtype=np.int64)
    if n == 1:
        a = dc.unigrams.astype(np.float64)
        a[~unigram_mask(V)] = 0.0
        adj[0] = a
        ncs[0] = count_of_counts(a[a > 0], 4)
    else:
        for _, c in dc.counts[n - 1].chunks(sz.chunk):
            nc += count_of_counts(c[c > 0], 4)
        adj[n - 1] = dc.counts[n - 1]
        ncs[n - 1] = nc
    tick("adjusted counts")
    info = {}
    if first_seen is not None:
        n_types, info = _lmplz(dc, smoother, adj, ncs, n_types, first_seen, sz.chunk)
    discounts = smoother.discounts_from_counts_of_counts(ncs)

    # 2-3. Unigrams in memory (V entries), then each order in chunks.
    keys = [None] + [dc.keys[k - 1] for k in range(2, n + 1)]
    logp, backoff = [None] * n, [None] * n
    alpha1, gamma1 = mkn_alpha_gamma(adj[0], np.zeros(V, dtype=np.int64), 1, discount_vector(discounts[0]))
    prev = unigram_probs(alpha1, gamma1[0], n_types, V)  # linear p of the order below: an array or a column
    del alpha1
    with np.errstate(divide="ignore"):
        w = ColumnWriter(folder, "logp1", np.float64)
        w.append(np.log10(prev))
        logp[0] = w.done()
    for k in range(2, n + 1):
        lower = gather(prev, dc.suffix[k - 1], folder, f"lower{k}", window=sz.window, chunk=sz.chunk)
        dc.suffix[k - 1].remove()
        if isinstance(prev, Column):
            prev.remove()
        prev, logp[k - 1], backoff[k - 2] = _order_pass(
            k, n, V, keys[k - 1], adj[k - 1], lower, dc.size(k - 1), discount_vector(discounts[k - 1]), folder, sz)
        lower.remove()
        if k < n:
            adj[k - 1].remove()
        dc.counts[k - 1].remove()
        tick(f"estimated order {k}")
    if n == 1:
        backoff = [None]
    return DiskModel(order=n, V=V, keys=keys, logp=logp, backoff=backoff,
                     n_ngrams=[n_types + 1] + [dc.size(k) for k in range(2, n + 1)],
                     count_of_counts=[c.tolist() for c in coc],
                     info={"discounts": [list(map(float, d)) for d in discounts], **info})


def _lmplz(dc: DiskCounts, smoother, adj: list, ncs: list, n_types: int, first_seen: np.ndarray, chunk: int) -> tuple:
    """``--compat kenlm`` on disk: the suffixes of the last n-gram in lmplz's order moved to their raw
    counts in ``ncs`` (in place) and the uniform floor's extra type; ``(n_types, info)`` as the
    in-memory estimate records them."""
    from ..kenlm_compat import (KeyTables, apply_to_count_of_counts, last_in_suffix_order, lmplz_ids_from_first_seen,
                                suffix_rows)

    n, V = dc.order, dc.V
    tables = KeyTables([None] + [dc.keys[k - 1] for k in range(2, n + 1)], V, chunk=chunk)
    last = last_in_suffix_order(tables, lmplz_ids_from_first_seen(first_seen, V))
    rows = suffix_rows(tables, None if last is None else last[1])
    for k, row in enumerate(rows[: n - 1], start=1):
        ncs[k - 1] = apply_to_count_of_counts(ncs[k - 1], adj[k - 1], dc.unigrams if k == 1 else dc.counts[k - 1], row)
    smoother.lmplz_ = {"extra_types": int(dc.unigrams[UNK_ID] > 0), "raw_count_rows": rows}  # float32 discounts
    n_types += smoother.lmplz_["extra_types"]
    return n_types, {"compat": {"kenlm": {"uniform_types": n_types, "raw_count_rows": rows}}}


def count_of_counts_raw(c: np.ndarray, max_count: int = 10) -> np.ndarray:
    """``n[c]``, c = 0..max_count, as :meth:`NgramCounts.count_of_counts` (sums over chunks)."""
    return np.bincount(np.minimum(c, max_count + 1), minlength=max_count + 2)[: max_count + 1].astype(np.int64)


def _bos_ranges(dc: DiskCounts) -> list:
    """Per order, the rows ``[a, b)`` of the n-grams that start with ``<s>``: contiguous in sorted order
    (a row's first word is its context's first word)."""
    V = dc.V
    out = [(BOS_ID, BOS_ID + 1)]
    for k in range(2, dc.order + 1):
        a, b = out[-1]
        col = dc.keys[k - 1]
        out.append((col.searchsorted(a * V), col.searchsorted(b * V)))
    return out


def _order_pass(k: int, n: int, V: int, keys: Column, adj: Column, lower: Column, n_ctx: int, D: np.ndarray,
                folder: TempFolder, sz: Sizes) -> tuple:
    """Order k's probabilities (log10, and linear for order k+1 unless k = n) and the back-offs of
    its contexts (the order-(k-1) rows), in chunks of whole contexts."""
    m = len(keys)
    lin = ColumnWriter(folder, f"plin{k}", np.float64) if k < n else None
    lp = ColumnWriter(folder, f"logp{k}", np.float64)
    bo = ColumnWriter(folder, f"bo{k - 1}", np.float64)
    a = 0
    c0 = 0  # the first context (order-(k-1) row) whose back-off is not written yet
    with np.errstate(divide="ignore"):
        while a < m:
            kk = keys.read(a, a + sz.chunk)
            parent = kk // V
            del kk
            if a + len(parent) < m:
                # End the chunk before the last context it reaches, which may go on past it.
                last = parent[-1]
                e = int(np.searchsorted(parent, last))
                if e == 0:
                    raise ValueError(f"a context of order {k} has more than {len(parent)} rows")
                parent = parent[:e]
                c1 = int(last)
            else:
                e = len(parent)
                c1 = n_ctx
            rows = slice(a, a + e)
            ac = adj.read(rows.start, rows.stop).astype(np.float64, copy=False)
            alpha, gamma = mkn_alpha_gamma(ac, parent - c0, c1 - c0, D)
            del ac
            p = interpolate_rows(alpha, gamma[parent - c0], lower.read(rows.start, rows.stop))
            del parent
            if lin is not None:
                lin.append(p)
            np.log10(p, out=p)
            lp.append(p)
            bo.append(log_backoff(gamma))
            del p, gamma
            a += e
            c0 = c1
        if c0 < n_ctx:  # contexts after the last row's (none when the order is empty but for this)
            bo.append(np.zeros(n_ctx - c0))
    return (lin.done() if lin is not None else None), lp.done(), bo.done()


# ----------------------------------------------------------------------------- writing
def write_native(dm: DiskModel, lm, smoother, vocab, path, *, chunk: int) -> None:
    """The native ``.npz`` of the model, written member by member from the columns (atomically).
    ``lm``: the (unfitted) :class:`NgramLM` whose parameters the file records; ``smoother``: the one used."""
    from ..io.native import native_meta, save_native_streamed

    n, V = dm.order, dm.V
    meta = native_meta(lm, order=n, kind="backoff", smoother_name=smoother.name,
                       smoother_params=smoother.get_params(), n_types=vocab.n_types, n_ngrams=list(dm.n_ngrams),
                       count_of_counts=dm.count_of_counts, is_distribution=True, missing_backoff=0.0, info=dm.info,
                       vocab=vocab)
    members: dict = {}
    for k in range(1, n + 1):
        members[f"keys{k}"] = np.arange(V, dtype=np.int64) if k == 1 else _stream(dm.keys[k - 1], chunk)
        members[f"logp{k}"] = _stream(dm.logp[k - 1], chunk)
        if k < n:
            members[f"bo{k}"] = _stream(dm.backoff[k - 1], chunk)
    save_native_streamed(path, meta, members)


def _stream(col: Column, chunk: int):
    """(dtype, length, chunks) of a column, as :func:`save_native_streamed` takes a member."""
    return col.dtype, len(col), (c for _, c in col.chunks(chunk))


def write_model(dm: DiskModel, lm, smoother, vocab, path, *, arpa: bool, memory: int, folder: TempFolder,
                kenlm_binary: bool = False, progress: Optional[Callable] = None) -> None:
    """The model file: ARPA (``arpa``; ``-`` is standard output), a KenLM probing binary (``kenlm_binary``)
    or native, from the columns, atomically."""
    chunk = Sizes.for_budget(memory, dm.V).chunk
    if kenlm_binary:
        # KenLM's hash tables are laid out from the whole model: the native file in the temp folder, read
        # back whole.  This step, alone, is not bounded by the budget (as build_binary is not).
        from ..kenlm.write import binary_from_native

        tmp = folder.path / "model.npz"
        write_native(dm, lm, smoother, vocab, tmp, chunk=chunk)
        if progress is not None:
            progress("note: the KenLM binary is laid out from the whole model in memory (past --memory, as "
                     "build_binary is)")
        binary_from_native(tmp, path)
        return
    if not arpa:
        write_native(dm, lm, smoother, vocab, path, chunk=chunk)
        return
    from .. import accel

    if accel.fast is not None:
        write_arpa(dm, vocab, path, chunk=chunk, smoother_name=smoother.name)
        return
    # Without the compiled formatter: the native file in the temp folder, mapped, through the column writer
    # (which holds the text of an order in memory: the slow path is not the bounded one).
    from ..io.arpa import write_arpa as write_arpa_model
    from ..io.native import load_native_tables
    from ..scorer import Scorer

    tmp = folder.path / "model.npz"
    write_native(dm, lm, smoother, vocab, tmp, chunk=chunk)
    write_arpa_model(Scorer(load_native_tables(tmp, mmap=True)[0]), path)


def write_arpa(dm: DiskModel, vocab, path, *, chunk: int, smoother_name: str) -> None:
    """The ARPA file of the model (the bytes :func:`ngramlm.io.arpa.write_arpa` writes), section by section
    in chunks of rows through the compiled formatter, atomically."""
    import json
    from types import SimpleNamespace

    from corpora.textio import atomic_writer_by_suffix

    from ..io.arpa import META_PREFIX, ArpaFormatters, ThreadedWriter, arpa_meta

    n, V = dm.order, dm.V
    head = [META_PREFIX + json.dumps(arpa_meta(SimpleNamespace(vocab_=vocab, smoother_name_=smoother_name)), separators=(",", ":"),
                                     ensure_ascii=False), "", "\\data\\"]
    head += [f"ngram {k}={c}" for k, c in enumerate([V - 1] + [dm.size(k) for k in range(2, n + 1)], start=1)]
    words = [w.encode("utf-8") for w in vocab.itos_]
    with atomic_writer_by_suffix(path) as raw_fh, ThreadedWriter(raw_fh) as fh, ArpaFormatters(fh, words, V) as fmt:
        fmt.text(("\n".join(head) + "\n").encode("utf-8"))
        for k in range(1, n + 1):
            fmt.text(f"\n\\{k}-grams:\n".encode())
            m = dm.size(k)
            if k == 1:
                lp = dm.logp[0].read_all()
                lp[BOS_ID] = -99.0  # <s> is never predicted: ARPA's convention
                bo = dm.backoff[0].read_all() if n > 1 else None
                fmt.rows(1, [None], lp, bo, PAD_ID)
            for a in range(0, m if k > 1 else 0, chunk):
                e = min(m, a + chunk)
                local = _local_keys(dm, k, a, e)
                lp = dm.logp[k - 1].read(a, e)
                bo = dm.backoff[k - 1].read(a, e) if k < n else None
                fmt.rows(k, local, lp, bo, -1)
            if not m:  # the column writer ends an empty section with its own newline: the same bytes
                fmt.text(b"\n")
        fmt.text(b"\n\\end\\\n")


def _local_keys(dm: DiskModel, k: int, a: int, e: int) -> list:
    """Keys of orders 2..k for rows ``a:e`` of order k and the rows of the lower orders they descend
    from, each order's keys rebased so that its parents index the slice of the order below."""
    V = dm.V
    out = [None] * k
    lo, hi = a, e
    for j in range(k, 1, -1):
        kk = dm.keys[j - 1].read(lo, hi)
        if j > 2:
            plo, phi = int(kk[0] // V), int(kk[-1] // V) + 1
            kk -= plo * V
            lo, hi = plo, phi
        out[j - 1] = kk
    return out
