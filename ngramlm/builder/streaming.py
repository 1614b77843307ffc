"""Counting text bigger than memory: blocks counted in RAM, spilled as sorted runs, merged order by order.

The plan is lmplz's, with this toolkit's trie layout:

1. **Vocabulary pass.**  The text is streamed once for its word counts (skipped with a given
   vocabulary).  Standard input is spooled to the temp folder on the way, for the second pass.
2. **Counting pass.**  The text is streamed again in blocks sized from the memory budget; each
   block is counted in memory by :meth:`NgramCounts.from_encoded` and its tables are written to
   the temp folder as *runs*: per order, the block's distinct n-grams sorted (a row is
   ``(context row in the block's order k-1, word, count)``).  Unigram counts are summed in place.
3. **Merge, order by order.**  A run's rows are turned into global keys ``(global context row) * V +
   word`` through the map from the block's order k-1 rows to the global ones (built by the merge
   of order k-1; the block's rows are in the same lexicographic order as the global ones, so the
   keys stay sorted).  A k-way merge in chunks that fit the budget sums the counts of equal keys,
   emits the global table of order k and, for each block, the map of its order-k rows.

   :meth:`RunMerger.merge` returns the tables in memory; :meth:`RunMerger.merge_to_disk` writes them
   to the temp folder as columns (:class:`DiskCounts`) for the out-of-core estimation
   (``ngramlm.builder.outofcore``).

The merged tables are exactly the tables that counting the whole text at once gives (tested), so
the model is the same either way; only where the memory goes differs.  Temp files live in one
folder ``ngramlm-build-PID-*`` under ``--temp-dir`` and are removed on success, failure and Ctrl-C
(a folder left by ``kill -9`` is removed by the next build, as its writer's pid is gone).
"""
from __future__ import annotations

import os
import sys
import re
import shutil
import tempfile
import time
from pathlib import Path
from typing import Callable, Iterable, Optional

import numpy as np

from corpora.errors import InputError
from corpora.textio import OutputError, pid_alive
from corpora.vocab import EncodedText

from ..accel import worker_threads
from ..counts import NgramCounts, OrderTable, unique_inverse
from .diskarrays import Column, ColumnWriter

TEMP_PREFIX = "ngramlm-build-"
# Peak bytes of NgramCounts.from_encoded per token of a block, by order (measured with
# tracemalloc on the toy corpus: about 60 + 30 * order; the tables themselves are in it).
# A block of text as Python token strings costs about 20 times its bytes (a str and a list slot a
# token): the tokenizing pass reads blocks of at most a twentieth of the budget.
TEXT_BLOCK_SHARE = 20
BYTES_PER_TOKEN_BASE = 60
BYTES_PER_TOKEN_PER_ORDER = 30
MIN_BLOCK_TOKENS = 10_000
FIXED_OVERHEAD = 64 << 20  # interpreter, numpy, vocabulary, buffers
DISK_MERGE_BYTES_PER_ROW = 140  # a round of RunMerger.merge_to_disk, per row taken from the runs


def parse_memory(spec: str, *, total: Optional[int] = None) -> int:
    """``1G``, ``500M``, ``64K``, ``1000000b`` or ``30%`` (of physical memory) -> bytes, like lmplz's -S."""
    m = re.fullmatch(r"\s*([0-9]*\.?[0-9]+)\s*([bBkKmMgGtT%])\s*", str(spec))
    if not m:
        raise InputError(f"cannot read the memory size {spec!r}",
                         fix="give a number with a unit: 1G, 500M, 64K, 1000000b, or a share like 30%")
    value, unit = float(m.group(1)), m.group(2).upper()
    if unit == "%":
        if total is None:
            total = os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
        return int(total * value / 100)
    return int(value * {"B": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40}[unit])


def block_tokens_for(memory: int, order: int) -> int:
    """Tokens per counting block that fit ``memory`` (the merge gets the same budget afterwards)."""
    per_token = BYTES_PER_TOKEN_BASE + BYTES_PER_TOKEN_PER_ORDER * order
    n = (memory - FIXED_OVERHEAD) // per_token
    if n < MIN_BLOCK_TOKENS:
        need = (FIXED_OVERHEAD + MIN_BLOCK_TOKENS * per_token) >> 20
        raise InputError(f"a memory budget of {memory >> 20} MB cannot hold one counting block of an order-{order} "
                         f"model (at least {need + 1} MB)", fix=f"use --memory {need + 1}M or more")
    return int(n)


class TempFolder:
    """The build's temp folder: created under ``parent``, removed however the build ends."""

    def __init__(self, parent: Optional[os.PathLike | str] = None) -> None:
        self.parent = Path(parent) if parent is not None else Path(tempfile.gettempdir())
        self.path: Optional[Path] = None

    def __enter__(self) -> "TempFolder":
        sweep_stale_builds(self.parent)
        try:
            if not self.parent.exists():
                print(f"note: created the temp folder {self.parent}", file=sys.stderr)
            self.parent.mkdir(parents=True, exist_ok=True)
            self.path = Path(tempfile.mkdtemp(prefix=f"{TEMP_PREFIX}{os.getpid()}-", dir=self.parent))
        except OSError as exc:
            raise self.error(exc) from None
        return self

    def __exit__(self, *exc) -> None:
        if self.path is not None:
            shutil.rmtree(self.path, ignore_errors=True)
            self.path = None

    def error(self, exc: OSError) -> OutputError:
        return OutputError(f"cannot write the build's temporary files ({exc.strerror or exc})", path=self.parent,
                           fix="choose a writable folder with free space with --temp-dir")

    def save(self, name: str, array: np.ndarray) -> Path:
        p = self.path / f"{name}.npy"
        try:
            np.save(p, array)
        except OSError as exc:
            raise self.error(exc) from None
        return p

    def open_memmap(self, name: str, shape: tuple, dtype) -> np.ndarray:
        try:
            return np.lib.format.open_memmap(self.path / f"{name}.npy", mode="w+", dtype=dtype, shape=shape)
        except OSError as exc:
            raise self.error(exc) from None


def sweep_stale_builds(parent: Path) -> int:
    """Remove ``ngramlm-build-PID-*`` folders whose builder is gone (killed with -9)."""
    n = 0
    if not parent.is_dir():
        return 0
    for q in parent.glob(f"{TEMP_PREFIX}*"):
        pid = q.name[len(TEMP_PREFIX):].split("-", 1)[0]
        if q.is_dir() and pid.isdigit() and not pid_alive(int(pid)):
            shutil.rmtree(q, ignore_errors=True)
            n += 1
    return n


class RunMerger:
    """Collects the count tables of blocks as runs and merges them into one :class:`NgramCounts`."""

    def __init__(self, *, order: int, vocab_size: int, folder: Optional[TempFolder], memory: int) -> None:
        self.order = order
        self.V = int(vocab_size)
        self.folder = folder  # None: runs stay in memory (small inputs, the Dask driver's small shards)
        self.memory = memory
        self.unigrams = np.zeros(self.V, dtype=np.int64)
        self.runs: list = []  # per block: [None, (parent, word, count) of order 2, ..., order n]

    def add(self, counts: NgramCounts) -> None:
        """Add one block's counts (a block's tables are sorted by key, as from_encoded builds them)."""
        self.unigrams += counts.tables[0].count
        b = len(self.runs)
        run = [None]
        for k in range(2, self.order + 1):
            t = counts.tables[k - 1]
            # The suffix (the row of the last k-1 words in order k-1) rides along: the smoothers
            # need it, and recomputing it after the merge would be a binary search per n-gram.
            arrays = (np.asarray(t.parent, dtype=np.int32), np.asarray(t.word, dtype=np.int32),
                      np.asarray(t.count, dtype=np.int64), np.asarray(counts.suffix_index(k), dtype=np.int32))
            if self.folder is not None:
                arrays = tuple(self.folder.save(f"run{b}-{k}-{name}", a) for name, a in zip("pwcs", arrays))
            run.append(arrays)
        self.runs.append(run)

    def _load(self, x):
        return np.load(x, mmap_mode="r") if isinstance(x, Path) else x

    def merge(self, progress: Optional[Callable[[str], None]] = None) -> NgramCounts:
        V, n = self.V, self.order
        i32 = np.int32
        tables = [OrderTable(parent=np.zeros(V, dtype=i32), word=np.arange(V, dtype=i32),
                             count=_narrow(self.unigrams))]
        # gmap[b]: global row of each of block b's rows in the previous order (unigrams: the id).
        gmaps = [None] * len(self.runs)
        for k in range(2, n + 1):
            if progress:
                progress(f"merging {len(self.runs)} run(s) of order {k}")
            keys, cnt, suffix, new_maps = self._merge_order(k, gmaps)
            tables.append(OrderTable(parent=(keys // V).astype(i32), word=(keys % V).astype(i32), count=_narrow(cnt),
                                     suffix=suffix))
            gmaps = new_maps
        return NgramCounts(n, V, tables)

    def _merge_order(self, k: int, gmaps: list):
        R = len(self.runs)
        runs = [[self._load(x) for x in self.runs[b][k - 1]] for b in range(R)]
        sizes = [len(r[0]) for r in runs]

        def gkeys(b: int, a: int, e: int) -> np.ndarray:
            p = np.asarray(runs[b][0][a:e], dtype=np.int64)
            ctx = p if gmaps[b] is None else np.asarray(gmaps[b][p], dtype=np.int64)
            return ctx * self.V + runs[b][1][a:e]

        def gsuffix(b: int, a: int, e: int) -> np.ndarray:
            sfx = np.asarray(runs[b][3][a:e], dtype=np.int64)
            return sfx if gmaps[b] is None else np.asarray(gmaps[b][sfx], dtype=np.int64)

        out_keys, out_cnt, out_sfx = [], [], []
        new_maps = []
        for b in range(R):
            if self.folder is not None:
                new_maps.append(self.folder.open_memmap(f"map{b}-{k}", (sizes[b],), np.int64))
            else:
                new_maps.append(np.empty(sizes[b], dtype=np.int64))
        for live, pos, take, uniq, summed, inv, first, emitted in self._kway(
                sizes, gkeys, lambda b, a, e: np.asarray(runs[b][2][a:e])):
            # An n-gram's global suffix row is the same from every block that has it: take the first.
            alls = np.concatenate([gsuffix(b, pos[b], pos[b] + take[b]) for b in live])
            out_keys.append(uniq)
            out_cnt.append(summed)
            out_sfx.append(alls[first].astype(np.int32))
            o = 0
            for b in live:
                t = take[b]
                new_maps[b][pos[b]:pos[b] + t] = emitted + inv[o:o + t]
                o += t
        for m in new_maps:
            if isinstance(m, np.memmap):
                m.flush()
        keys = np.concatenate(out_keys) if out_keys else np.zeros(0, dtype=np.int64)
        cnt = np.concatenate(out_cnt) if out_cnt else np.zeros(0, dtype=np.int64)
        sfx = np.concatenate(out_sfx) if out_sfx else np.zeros(0, dtype=np.int32)
        return keys, cnt, sfx, new_maps

    def _chunk_rows(self, bytes_per_row: int) -> int:
        """At most this many rows of each run per round of the merge."""
        return max(4096, int((self.memory - FIXED_OVERHEAD) // (bytes_per_row * max(len(self.runs), 1))))

    def _kway(self, sizes: list, gkeys, gcounts, bytes_per_row: int = 64):
        """The k-way merge of the sorted runs of one order, in rounds.

        ``gkeys(b, a, e)`` gives the global keys of rows ``a:e`` of run ``b`` (ascending),
        ``gcounts(b, a, e)`` their counts.  Yields per round ``(live runs, positions before the
        round, rows taken per run, unique keys, summed counts, inverse, first occurrence,
        global rows emitted before the round)``; the positions advance after each round.  A round
        takes at most ``budget / (bytes_per_row * runs)`` rows of each run: the in-memory merge's keys,
        counts, sorting and map writes cost about 64 bytes a row; the disk merge reads its parents'
        maps and suffix rows as well (about 140 bytes a row, measured)."""
        R = len(sizes)
        chunk = self._chunk_rows(bytes_per_row)
        pos = [0] * R
        emitted = 0
        while True:
            live = [b for b in range(R) if pos[b] < sizes[b]]
            if not live:
                break
            segs = {b: gkeys(b, pos[b], min(pos[b] + chunk, sizes[b])) for b in live}
            # Everything up to the smallest last key of a run that goes on past its chunk is
            # complete in this round: no run can still hold a key below it.
            full = [segs[b][-1] for b in live if pos[b] + chunk < sizes[b]]
            bound = min(full) if full else None
            take = {b: (len(s) if bound is None else int(np.searchsorted(s, bound, side="right")))
                    for b, s in segs.items()}
            allk = np.concatenate([segs[b][:take[b]] for b in live])
            del segs
            allc = np.concatenate([gcounts(b, pos[b], pos[b] + take[b]) for b in live])
            uniq, inv, _, first = unique_inverse(allk, return_first=True)
            del allk
            # Summed in float64, exact for counts below 2**53.
            summed = np.bincount(inv, weights=allc, minlength=len(uniq)).astype(np.int64)
            del allc
            yield live, list(pos), take, uniq, summed, inv, first, emitted
            for b in live:
                pos[b] += take[b]
            emitted += len(uniq)

    def upper_bound_ngrams(self) -> int:
        """At most this many distinct n-grams of orders 2..n after the merge (the runs' rows)."""
        total = 0
        for run in self.runs:
            for k in range(2, self.order + 1):
                x = run[k - 1][0]
                if isinstance(x, Path):
                    c = Column(x, folder=self.folder)
                    total += len(c)
                    c.close()
                else:
                    total += len(x)
        return total

    def merge_to_disk(self, progress: Optional[Callable[[str], None]] = None) -> "DiskCounts":
        """The merge with its output in the temp folder: per order the sorted global keys, counts and
        suffix rows as columns (:class:`DiskCounts`), never all in memory.

        The maps from each block's rows to the global ones go to one file per order (block ``b``'s
        rows from ``offset[b]``); the suffix rows, which point anywhere in the order below, are
        recorded as positions in that order's map file and looked up afterwards by a windowed
        :func:`~ngramlm.builder.diskarrays.gather`."""
        from .diskarrays import gather

        folder, V, n, R = self.folder, self.V, self.order, len(self.runs)
        keys_c, cnt_c, sfx_c = [None], [None], [None]
        prev_map = None  # Column: the previous order's maps, block after block
        prev_off = None
        avail = max(1 << 20, self.memory - FIXED_OVERHEAD)
        for k in range(2, n + 1):
            if progress:
                progress(f"merging {R} run(s) of order {k} to disk")
            runs = [[Column(x) if isinstance(x, Path) else x for x in self.runs[b][k - 1]] for b in range(R)]
            sizes = [len(r[0]) for r in runs]
            off = np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64)
            maps = ColumnWriter(folder, f"gmap{k}", np.int64, size=int(off[-1]))
            kw = ColumnWriter(folder, f"keys{k}", np.int64)
            cw = ColumnWriter(folder, f"count{k}", np.int64)
            sw = ColumnWriter(folder, f"suffix{k}" if k == 2 else f"suffixsrc{k}", np.int32 if k == 2 else np.int64)

            def rd(x, a, e):
                return x.read(a, e) if isinstance(x, Column) else np.asarray(x[a:e])

            def gkeys(b: int, a: int, e: int) -> np.ndarray:
                p = rd(runs[b][0], a, e).astype(np.int64)
                if prev_map is not None:
                    p = prev_map.take_sorted(p + prev_off[b])  # the block's parents ascend
                return p * V + rd(runs[b][1], a, e)

            for live, pos, take, uniq, summed, inv, first, emitted in self._kway(
                    sizes, gkeys, lambda b, a, e: rd(runs[b][2], a, e), bytes_per_row=DISK_MERGE_BYTES_PER_ROW):
                kw.append(uniq)
                cw.append(summed)
                sfx = np.concatenate([rd(runs[b][3], pos[b], pos[b] + take[b]).astype(np.int64)
                                      + (0 if prev_map is None else prev_off[b]) for b in live])
                sw.append(sfx[first])  # k = 2: the word itself; else a position in the map file
                o = 0
                for b in live:
                    t = take[b]
                    maps.write_at(emitted + inv[o:o + t], int(off[b]) + pos[b])
                    o += t
            keys_c.append(kw.done())
            cnt_c.append(cw.done())
            src = sw.done()
            if prev_map is None:
                sfx_c.append(src)
            else:
                # Half the budget for a window of the map, the rest for chunks of about 40 bytes a row.
                sfx_c.append(gather(prev_map, src, folder, f"suffix{k}", window=avail // 16, chunk=avail // 128))
                src.remove()
                prev_map.remove()
            prev_map, prev_off = maps.done(), off
            for r in runs:  # this order's runs are merged: their files go
                for x in r:
                    if isinstance(x, Column):
                        x.remove()
        if prev_map is not None:
            prev_map.remove()
        return DiskCounts(n, V, self.unigrams, keys_c, cnt_c, sfx_c)


class DiskCounts:
    """Merged counts in the temp folder: per order k >= 2 the sorted global keys (``parent * V + word``),
    the raw counts and the suffix rows as :class:`~ngramlm.builder.diskarrays.Column` s (index k-1), and the
    unigram counts in memory."""

    def __init__(self, order: int, V: int, unigrams: np.ndarray, keys: list, counts: list, suffix: list) -> None:
        self.order, self.V, self.unigrams = order, int(V), unigrams
        self.keys, self.counts, self.suffix = keys, counts, suffix

    def size(self, k: int) -> int:
        return self.V if k == 1 else len(self.keys[k - 1])

    def total(self) -> int:
        """The n-grams of orders 2..n."""
        return sum(self.size(k) for k in range(2, self.order + 1))

    def load(self) -> NgramCounts:
        """The counts in memory: exactly what :meth:`RunMerger.merge` returns."""
        i32, V = np.int32, self.V
        tables = [OrderTable(parent=np.zeros(V, dtype=i32), word=np.arange(V, dtype=i32), count=_narrow(self.unigrams))]
        for k in range(2, self.order + 1):
            keys = self.keys[k - 1].read_all()
            tables.append(OrderTable(parent=(keys // V).astype(i32), word=(keys % V).astype(i32),
                                     count=_narrow(self.counts[k - 1].read_all()),
                                     suffix=self.suffix[k - 1].read_all().astype(i32)))
        return NgramCounts(self.order, V, tables)

    @classmethod
    def from_counts(cls, counts: NgramCounts, folder: TempFolder) -> "DiskCounts":
        """Counts made in memory (a text of one block) written to the temp folder."""
        keys, cnt, sfx = [None], [None], [None]
        for k in range(2, counts.order + 1):
            for out, name, a, dt in ((keys, "keys", counts.keys(k), np.int64),
                                     (cnt, "count", counts.tables[k - 1].count, np.int64),
                                     (sfx, "suffix", counts.suffix_index(k), np.int32)):
                w = ColumnWriter(folder, f"{name}{k}", dt)
                w.append(a)
                out.append(w.done())
        return cls(counts.order, counts.vocab_size, counts.tables[0].count.astype(np.int64), keys, cnt, sfx)

    def close(self) -> None:
        for cols in (self.keys, self.counts, self.suffix):
            for c in cols:
                if c is not None:
                    c.close()


def _narrow(count: np.ndarray) -> np.ndarray:
    """int32 counts where they fit (as in-memory counting stores them), int64 otherwise."""
    return count.astype(np.int32) if len(count) == 0 or count.max() < 2**31 else count.astype(np.int64)


def count_blocks(blocks: Iterable[EncodedText], *, order: int, vocab_size: int, memory: int, folder: TempFolder,
                 progress: Optional[Callable[[str], None]] = None, stats: Optional[dict] = None) -> NgramCounts:
    """Count encoded blocks with their runs spilled to ``folder`` and merged (the memory-bounded path).

    A text that fits one block is counted directly, exactly as the in-memory path counts it."""
    merger, counts = count_runs(blocks, order=order, vocab_size=vocab_size, memory=memory, folder=folder,
                                progress=progress, stats=stats)
    return counts if merger is None else merger.merge(progress)


def count_runs(blocks: Iterable[EncodedText], *, order: int, vocab_size: int, memory: int, folder: TempFolder,
               progress: Optional[Callable[[str], None]] = None, stats: Optional[dict] = None) -> tuple:
    """Count encoded blocks into runs spilled to ``folder``: ``(RunMerger, None)`` to merge, or
    ``(None, counts)`` for a text of one block, counted directly as the in-memory path counts it."""
    it = iter(blocks)
    t0 = time.perf_counter()
    stats = stats if stats is not None else {}
    stats.setdefault("sentences", 0)
    stats.setdefault("words", 0)
    merger = None
    first = None
    i = 0
    with _ParallelCounter(order, vocab_size) as counter:
        for enc in it:
            stats["sentences"] += enc.n_sentences
            stats["words"] += enc.n_words
            if enc.n_sentences == 0:
                continue
            i += 1
            if first is None and merger is None:  # held back: a text of one block needs no runs
                first = enc
                continue
            if merger is None:
                merger = RunMerger(order=order, vocab_size=vocab_size, folder=folder, memory=memory)
                counter.count(first, merger.add)
                first = None
            counter.count(enc, merger.add)
            if progress:
                progress(f"counted block {i} ({stats['words']:,} words, {time.perf_counter() - t0:.1f} s)")
    if merger is None:
        if first is None:
            raise InputError("the training text has no tokens", fix="pass a non-empty text")
        return None, NgramCounts.from_encoded(first, order=order, vocab_size=vocab_size)
    return merger, None


def split_sentences(enc: EncodedText, parts: int) -> list:
    """``enc`` cut into up to ``parts`` pieces of whole sentences (about equal numbers of sentences)."""
    n = enc.n_sentences
    cuts = sorted({round(j * n / parts) for j in range(parts + 1)})
    out = []
    for a, b in zip(cuts[:-1], cuts[1:]):
        lo, hi = int(enc.starts[a]), int(enc.starts[b])
        out.append(EncodedText(enc.ids[lo:hi], enc.starts[a:b + 1] - lo))
    return out


class _ParallelCounter:
    """Counts each block as ``worker_threads()`` runs of whole sentences, one a thread (numpy's sorts
    and ufuncs run without the GIL), so both cores count while the memory of one block is in use; the
    runs are handed on in text order.  Counts are sums, so the merged counts are the same."""

    def __init__(self, order: int, vocab_size: int) -> None:
        self.order, self.V = order, vocab_size
        self.workers = worker_threads()
        self.pool = None
        if self.workers > 1:
            from concurrent.futures import ThreadPoolExecutor

            self.pool = ThreadPoolExecutor(max_workers=self.workers, thread_name_prefix="ngram-count")

    def _count(self, part: EncodedText) -> NgramCounts:
        return NgramCounts.from_encoded(part, order=self.order, vocab_size=self.V)

    def count(self, enc: EncodedText, sink: Callable[[NgramCounts], None]) -> None:
        if self.pool is None:
            sink(self._count(enc))
            return
        for future in [self.pool.submit(self._count, part) for part in split_sentences(enc, self.workers)]:
            sink(future.result())

    def __enter__(self) -> "_ParallelCounter":
        return self

    def __exit__(self, *exc) -> None:
        if self.pool is not None:
            self.pool.shutdown(wait=True, cancel_futures=True)


def encoded_blocks(sources: list, vocab, tokenize, *, block_tokens: int, keep_empty: bool = True,
                   line_filter: Optional[Callable[[str], str]] = None) -> Iterable[EncodedText]:
    """Encoded blocks of about ``block_tokens`` tokens from text sources (paths or shards)."""
    # Bytes per block: a generous 4 bytes a token keeps one decoded block well inside its share.
    for src in sources:
        for _, lines in line_blocks(src, block_bytes=max(1 << 16, block_tokens * 4)):
            if line_filter is not None:
                lines = [line_filter(x) for x in lines]
            yield encode_block(vocab, [tokenize(x) for x in lines], keep_empty)


def encode_block(vocab, sents: list, keep_empty: bool) -> EncodedText:
    """What ``vocab.encode_sentences`` gives, with the lookups as one C-level ``map`` per block."""
    from itertools import repeat

    from corpora.vocab import EOS_ID, ID_DTYPE, UNK_ID

    if not keep_empty:
        sents = [x for x in sents if x]
    toks: list = []
    for x in sents:
        toks.extend(x)
    lengths = np.fromiter(map(len, sents), dtype=np.int64, count=len(sents))
    words = np.fromiter(map(vocab.stoi_.get, toks, repeat(UNK_ID)), dtype=ID_DTYPE, count=len(toks))
    ends = np.cumsum(lengths + 1)
    ids = np.empty(len(toks) + len(sents), dtype=ID_DTYPE)
    is_eos = np.zeros(len(ids), dtype=bool)
    is_eos[ends - 1] = True
    ids[is_eos] = EOS_ID
    ids[~is_eos] = words
    return EncodedText(ids, np.concatenate([[0], ends]).astype(np.int64))


def word_counts(sources: list, tokenize, *, keep_empty: bool = True, line_filter=None) -> tuple:
    """(Counter of tokens, sentences, words) over text sources, streamed (the vocabulary pass)."""
    from collections import Counter

    counts: Counter = Counter()
    n_sent = n_words = 0
    for src in sources:
        for _, lines in line_blocks(src):
            if line_filter is not None:
                lines = [line_filter(x) for x in lines]
            toks: list = []
            for line in lines:
                t = tokenize(line)
                if t or keep_empty:
                    toks.extend(t)
                    n_sent += 1
            n_words += len(toks)
            counts.update(toks)  # one C-level count per block
    return counts, n_sent, n_words


def line_blocks(src, block_bytes: int = 16 << 20, raw: bool = False):
    """Line blocks of a source: a path, or a shard ``(path, start byte, end byte, first line)``."""
    from corpora.textio import iter_line_blocks

    if isinstance(src, tuple):
        path, start, end, first_line = src
        return iter_line_blocks(path, block_bytes=block_bytes, start=start, end=end, first_line=first_line, raw=raw)
    return iter_line_blocks(src, block_bytes=block_bytes, raw=raw)


def spool_stdin(folder: TempFolder, stream=None) -> Path:
    """Copy standard input to the temp folder (it is read twice: vocabulary, then counts)."""
    import sys

    stream = stream if stream is not None else sys.stdin.buffer
    p = folder.path / "stdin.txt"
    try:
        with open(p, "wb") as fh:
            shutil.copyfileobj(stream, fh, 16 << 20)
    except OSError as exc:
        raise folder.error(exc) from None
    return p




# ----------------------------------------------------------------------------- one tokenizing pass
_EOL = "\x00"  # stands for a line end in a block's token list (NUL bytes are refused in input text)


def _block_tokens(lines: list, tokenize, *, plain: bool, keep_empty: bool) -> list:
    """The tokens of a block of lines, each line followed by ``_EOL`` (empty lines only with keep_empty)."""
    if plain:  # whitespace tokens: one C-level split for the whole block
        toks = (" \x00 ".join(lines) + " \x00").split()
        if not keep_empty:  # an empty line is an _EOL right after another (or first)
            toks = [t for i, t in enumerate(toks) if t != _EOL or (i and toks[i - 1] != _EOL)]
        return toks
    toks: list = []
    for line in lines:
        t = tokenize(line)
        if t or keep_empty:
            toks.extend(t)
            toks.append(_EOL)
    return toks


def spool_ids(sources: list, tokenize, folder: TempFolder, *, plain: bool, keep_empty: bool = True,
              line_filter=None, block_bytes: int = 16 << 20) -> tuple:
    """Tokenize the text once: provisional ids (first seen; 0 = line end) spilled to ``folder``.

    Returns ``(path of the int32 id stream, words by provisional id, counts by provisional id)``:
    the vocabulary is fitted on the counts, and :func:`blocks_from_spool` renumbers the stream
    -- the text is not read or tokenized a second time."""
    from .. import accel

    prov: dict = {_EOL: 0}
    words: list = [_EOL]  # by provisional id
    freq = np.zeros(1024, dtype=np.int64)
    path = folder.path / "ids.i32"
    # Whitespace tokens in C where the extension is built: the block's bytes split and looked up
    # with no str per token (``Spooler``; the same ids as the split and dict below).
    spooler = accel.fast.Spooler(words) if (plain and accel.fast is not None and line_filter is None) else None
    try:
        with open(path, "wb") as out:
            for src in sources:
                for _, lines in line_blocks(src, block_bytes, raw=spooler is not None):
                    if spooler is not None:
                        ids = spooler.ids(lines, keep_empty)
                        del lines
                        freq = _add_freq(freq, ids, len(words))
                        ids.tofile(out)
                        continue
                    if line_filter is not None:
                        lines = [line_filter(x) for x in lines]
                    toks = _block_tokens(lines, tokenize, plain=plain, keep_empty=keep_empty)
                    new = list(set(toks).difference(prov))
                    for w in new:
                        prov[w] = len(prov)
                    ids = np.fromiter(map(prov.__getitem__, toks), dtype=np.int32, count=len(toks))
                    del toks, lines
                    # The new words are strings made while splitting this block, scattered among its
                    # tokens: kept as they are they would pin most of the block's memory for the rest of
                    # the build (measured: 16 MB blocks left 165 MB resident).  Copies made now pack
                    # together, and the block's memory goes back.
                    for w in new:
                        i = prov.pop(w)
                        w = w.encode("utf-8", "surrogatepass").decode("utf-8", "surrogatepass")
                        prov[w] = i
                        words.append(w)
                    del new
                    freq = _add_freq(freq, ids, len(prov))
                    ids.tofile(out)
    except OSError as exc:
        raise folder.error(exc) from None
    return path, words, freq[:len(words)]


def _add_freq(freq: np.ndarray, ids: np.ndarray, n_words: int) -> np.ndarray:
    """``freq`` (grown to ``n_words`` if needed) plus the occurrences of each id in ``ids``."""
    if n_words > len(freq):
        freq = np.concatenate([freq, np.zeros(max(n_words, 2 * len(freq)) - len(freq), dtype=np.int64)])
    freq[:n_words] += np.bincount(ids, minlength=n_words)
    return freq


def blocks_from_spool(path: Path, remap: np.ndarray, *, block_tokens: int) -> Iterable[EncodedText]:
    """Blocks of whole sentences from a spilled provisional id stream, renumbered with ``remap``."""
    from corpora.vocab import EOS_ID

    # Plain reads, not a memory map: the pages of a map that a scan touched would count in the
    # process's resident memory, 4 bytes a token of the whole text by the end of the pass.
    ids_all = Column(path, np.int32)
    try:
        yield from _spool_blocks(ids_all, remap, block_tokens, EOS_ID)
    finally:
        ids_all.close()


def _spool_blocks(ids_all: Column, remap: np.ndarray, block_tokens: int, EOS_ID: int):
    n = len(ids_all)
    a = 0
    while a < n:
        b = min(n, a + block_tokens)
        raw = ids_all.read(a, b)
        if b < n:  # end the block after its last sentence end
            ends = np.flatnonzero(raw == 0)
            if len(ends):
                b = a + int(ends[-1]) + 1
                raw = raw[:b - a]
            else:  # one sentence longer than a block: take it whole
                while b < n:
                    more = ids_all.read(b, b + block_tokens)
                    nxt = np.flatnonzero(more == 0)
                    if len(nxt):
                        more = more[:int(nxt[0]) + 1]
                    raw = np.concatenate([raw, more])
                    b += len(more)
                    if len(nxt):
                        break
        ends = np.flatnonzero(raw == 0) + 1
        ids = remap[raw]
        ids[ends - 1] = EOS_ID
        yield EncodedText(ids, np.concatenate([[0], ends]).astype(np.int64))
        a = b
