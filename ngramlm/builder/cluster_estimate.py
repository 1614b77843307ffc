"""The whole build on a Dask cluster: counting, estimation and writing by tasks on the workers.

    ngramlm train --dask tcp://SCHEDULER:8786 --order 5 --memory 2G -o /shared/lm.arpa /shared/text/*.txt

The client sends tasks and adds up small reductions; it never holds the n-grams.  What it holds is
vocabulary-sized (the vocabulary, unigram counts and probabilities, the partition bounds) or smaller
(each part's sizes, count-of-counts).  The n-grams live in the workers' memory as Dask futures
(spilled by Dask to the workers' disks past their memory limits) and in the shared folder the workers
write (``--temp-dir``, else the output's folder: it must be shared storage on a real cluster).

The plan (see :mod:`ngramlm.builder.partition` for why each step is local to a part):

1. **Word counts** per shard (text cut into line-aligned byte ranges), summed on the client: the
   vocabulary, and each word's weight for cutting the vocabulary into parts by first word.
2. **Counting**: each shard counted on a worker and cut into the parts; each part's pieces merged
   on a worker (Dask moves the pieces).
3. **Suffix rounds**, orders 3..n: each part asks the part holding its rows' suffixes for their rows;
   the answering part counts its rows' left extensions as it answers (Kneser-Ney's adjusted counts).
4. **Discounts** from the count-of-counts, summed over parts on the client (a tiny all-reduce).
5. **Estimation**, order by order: unigrams on the client (V entries), each higher order on its
   parts with the lower order's probabilities gathered from the parts that hold the suffixes; each
   part writes its log-probabilities and back-offs to the shared folder.
6. **Writing**: each part formats its ARPA sections (or its native columns); one task on a worker
   concatenates them, in order, into the output file -- atomically, as the local build writes.

Every task is a pure function of its inputs (writing files is idempotent), so when a worker dies Dask
recomputes what it held from the futures' lineage and the model is the same.  The smoothers are the
in-memory ones' per-order form (:class:`ngramlm.smoothing.OrderForm`): the model equals the local build's
bit for bit, whatever the number of workers and parts.
"""
from __future__ import annotations

import json
import math
import operator
import os
import shutil
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Optional

import numpy as np

from corpora.errors import InputError
from corpora.vocab import BOS_ID, PAD_ID, UNK_ID

from ..smoothing import ModifiedKneserNey, OrderForm, StupidBackoff, context_sums, unigram_mask, unigram_probs
from . import partition as pt
from .cluster import shards_of, shared_value
from ..infini.index import release_freed_memory

TASK_DELAY_S = 0.0  # fault-injection tests slow each estimation task down so a worker can be killed mid-job
# Working bytes per n-gram of a part on a worker while it is estimated (keys, counts, suffixes, adjusted
# counts, linear and log probabilities, numpy's temporaries): how finely the n-grams are cut into parts.
BYTES_PER_NGRAM_ON_WORKER = 120
MAX_PARTS = 64
# Dask pauses a worker past 80 % of its memory limit until its memory falls; a worker whose memory is
# the futures the build still needs never falls, and the build waits for ever (16 M tokens on one 512 MB
# worker: over 10 minutes, no end).  Every worker paused this long is a one-line error instead.
STALL_SECONDS = float(os.environ.get("NGRAMLM_DASK_STALL_S", "120"))
POLL_SECONDS = 2.0


class PauseWatch:
    """Is every worker paused (Dask's memory pause), and for how long?  :meth:`check` is called while the
    client waits; it raises the build's error once all workers have stayed paused ``stall`` seconds."""

    def __init__(self, client, *, stall: float, memory: int, clock: Callable[[], float] = time.monotonic) -> None:
        self.client, self.stall, self.memory, self.clock = client, stall, memory, clock
        self.since: Optional[float] = None

    def statuses(self) -> dict:
        workers = self.client.scheduler_info(n_workers=-1).get("workers", {})
        return {addr: (w.get("status"), w.get("memory_limit")) for addr, w in workers.items()}

    def check(self) -> None:
        st = self.statuses()
        if not st or any(status != "paused" for status, _ in st.values()):
            self.since = None
            return
        now = self.clock()
        self.since = now if self.since is None else self.since
        if now - self.since >= self.stall:
            limits = ", ".join(sorted({f"{m >> 20} MB" for _, m in st.values() if m})) or "none set"
            raise InputError(f"every Dask worker has been paused for {now - self.since:.0f} s: the build's parts do "
                             f"not fit the workers' memory (limit {limits} each, --memory "
                             f"{self.memory >> 20} MB a worker); Dask pauses a worker past 80 % of its limit",
                             fix="give the workers more memory (dask worker --memory-limit, or --memory with "
                                 "--dask local:N) or more workers; no model was written")


def wait_watched(futures, watch: Optional[PauseWatch]) -> None:
    """``distributed.wait(futures)``, checking every POLL_SECONDS that the workers are not all stuck paused."""
    from distributed import wait

    while True:
        try:
            wait(futures, timeout=None if watch is None else POLL_SECONDS)
            return
        except TimeoutError:
            watch.check()


def gather_watched(client, futures, watch: Optional[PauseWatch]):
    """``client.gather(futures)`` after :func:`wait_watched`."""
    wait_watched(futures, watch)
    return client.gather(futures)


def supported_reason(smoother, order: int, *, prune: bool, limit_vocab: bool) -> Optional[str]:
    """Why this model is not estimated on the workers (counted there, estimated on the client), or None."""
    if not isinstance(smoother, (OrderForm, StupidBackoff)):
        return f"{smoother.name} is estimated on the client (the workers estimate mkn, kn, wb, absolute, stupid)"
    if order < 2:
        return "a unigram model is estimated on the client"
    if prune:
        return "pruning needs the model in memory"
    if limit_vocab:
        return "the vocabulary is limited on the model in memory"
    return None


@dataclass
class ClusterBuild:
    """What :func:`build` made: the model file, and the text's statistics."""

    vocab: object
    sentences: int
    words: int
    n_ngrams: list
    parts: int
    path: Path
    info: dict
    where: str = "on the Dask workers"


# ----------------------------------------------------------------------------- tasks (run on the workers)
def set_task_delay(seconds: float) -> float:
    """Slow every estimation task on this process down (fault-injection tests run it on the workers with
    ``client.run``, to kill a worker mid-job); returns the previous delay."""
    global TASK_DELAY_S
    old, TASK_DELAY_S = TASK_DELAY_S, float(seconds)
    return old


def _delay() -> None:
    if TASK_DELAY_S:
        time.sleep(TASK_DELAY_S)


def _count_parts(shard, vocab, order: int, spec, keep_empty: bool, line_filter, bounds, delay: float):
    """A shard counted and cut into parts: ``(parts or None, sentences, words)``."""
    from .cluster import shard_counts

    counts, n_sent, n_words = shard_counts(shard, vocab, order, spec, keep_empty, line_filter, delay)
    return (None if counts is None else pt.split_counts(counts, bounds)), n_sent, n_words


def _piece(counted, p: int):
    parts = counted[0]
    return None if parts is None else parts[p]


def _merge(pieces: list, lo: int, hi: int, V: int, order: int):
    pieces = [p for p in pieces if p is not None]
    if not pieces:  # no shard had text (cannot happen with a non-empty text, but stays well-defined)
        return pt.Part(lo, hi, V, [None] + [np.zeros(0, dtype=np.int64)] * (order - 1),
                       [np.zeros(hi - lo, dtype=np.int64)] + [np.zeros(0, dtype=np.int64)] * (order - 1))
    return pt.merge_parts(pieces)


def _sizes_and_unigrams(part):
    return part.sizes(), part.counts[0]


def _order2_words(part, V: int) -> np.ndarray:
    """How many order-2 rows end in each word (the unigrams' left extensions, summed over parts)."""
    return np.bincount(part.word(2), minlength=V).astype(np.int64)


def _requests(part, k: int, below, n_parts: int):
    _delay()
    return pt.suffix_requests(part, k, below, n_parts)


def _resolve(part, k: int, requests: list):
    _delay()
    return pt.resolve_suffixes(part, k, requests)


def _all_to_all(client, func, sources: list, n_targets: int) -> list:
    """``out[t][s]``: the future of ``func(*sources[s], t)``, the piece of source s for target t, for every
    pair, submitted as one graph (``client.map``): P^2 single submits cost the client a pickled message
    each, queued while the scheduler catches up (2 M tokens, 43 parts: the client's peak 149 MB against
    94 MB at 8 parts)."""
    S = len(sources)
    cols = list(zip(*[(*src, t) for t in range(n_targets) for src in sources]))
    flat = client.map(func, *cols, pure=False) if S and n_targets else []
    return [flat[t * S:(t + 1) * S] for t in range(n_targets)]


def _pick(pieces: list, t: int):
    """A source's piece for target t (its list holds one piece a target)."""
    return pieces[t]


def _gather_answered(lower_probs: np.ndarray, answers: list, p: int) -> np.ndarray:
    """The lower-order probabilities part p asked this part for (its answers to p's suffix requests)."""
    return pt.gather_lower(lower_probs, answers[p])


def _place(part, k: int, below, answers: list):
    return pt.place_answers(part, k, below, answers)


def _stats(part, smoother, adjusted: list) -> tuple:
    """Per order 2..n: the count-of-counts of the row counts (n_0..n_4) and of the raw counts (n_0..n_10)."""
    from .outofcore import count_of_counts_raw

    rows, raw = [], []
    for k in range(2, part.order + 1):
        c = pt.row_counts(part, k, smoother, adjusted[k - 1] if k < part.order else None)
        rows.append(pt.count_stats(c))
        raw.append(count_of_counts_raw(part.counts[k - 1]))
    return rows, raw


def _lower2(part, p1: np.ndarray) -> np.ndarray:
    return p1[part.word(2)]


def _order(part, k: int, smoother, adjusted, param, lower, highest: bool, folder: str, index: int):
    """Order k of a part estimated; its log10 probabilities and its contexts' back-offs saved to the shared
    folder.  Returns ``(linear probabilities or None, the order-(k-1) back-offs when k == 2)``."""
    _delay()
    d = Path(folder) / f"part{index}"
    if isinstance(smoother, StupidBackoff):
        lp = pt.stupid_pass(part, k)
        lin, bo = None, np.full(part.size(k - 1), math.log10(float(smoother.alpha)))
    else:
        c = pt.row_counts(part, k, smoother, adjusted)
        lin, lp, bo = pt.order_pass(part, k, smoother, c, param, lower, highest=highest)
    pt.save_column(d, f"logp{k}", lp)
    pt.save_column(d, f"bo{k - 1}", bo)
    return lin, (bo if k == 2 else None)


def _write_part(part, folder: str, index: int, offsets: list, arpa: bool, words_f) -> int:
    """A part's share of the output: its ARPA sections (orders 2..n) through the compiled formatter, or its
    keys in the whole model's numbering (the native file)."""
    _delay()
    d = Path(folder) / f"part{index}"
    n = part.order
    for k in range(2, n + 1):
        if not arpa:
            pt.save_column(d, f"keys{k}", pt.global_keys(part, k, offsets[k - 2]))
            continue
        from .. import accel

        lp = np.load(d / f"logp{k}.npy")
        bo = np.load(d / f"bo{k}.npy") if k < n else None
        path = d / f"section{k}.arpa"
        tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
        # The compiled formatter in this task's thread: the workers are the parallelism, and a pool of
        # formatting threads per part would leave a malloc arena of freed text per thread in the worker.
        with open(tmp, "wb") as fh:
            if part.size(k):
                accel.fast.write_section(fh, k, pt.formatter_keys(part, k), lp, bo, words_f, part.V, -1)
        os.replace(tmp, path)
    return index


def _assemble(path: str, folder: str, n_parts: int, order: int, arpa: bool, head: bytes, unigrams: tuple,
              sizes: list, meta: Optional[dict], words, written: list) -> str:
    """The output file from the parts' pieces, in order, written atomically (on a worker)."""
    from corpora.textio import atomic_writer_by_suffix

    _delay()
    d = Path(folder)
    lp1, bo1 = unigrams
    if not arpa:
        from ..io.native import save_native_streamed

        V = len(lp1)
        chunk = 1 << 20
        members: dict = {}
        for k in range(1, order + 1):
            if k == 1:
                members["keys1"] = np.arange(V, dtype=np.int64)
                members["logp1"] = lp1
                if order > 1:
                    members["bo1"] = bo1
                continue
            names = [f"keys{k}", f"logp{k}"] + ([f"bo{k}"] if k < order else [])
            for name in names:
                members[name] = _concat_columns([d / f"part{p}" / f"{name}.npy" for p in range(n_parts)], chunk)
        save_native_streamed(path, meta, members)
        return path
    from .. import accel

    with atomic_writer_by_suffix(path) as fh:
        fh.write(head)
        lp = lp1.copy()
        lp[BOS_ID] = -99.0  # <s> is never predicted: ARPA's convention
        fh.write(b"\n\\1-grams:\n")
        accel.fast.write_section(fh, 1, [None], lp, bo1 if order > 1 else None, words, len(lp1), PAD_ID)
        for k in range(2, order + 1):
            fh.write(f"\n\\{k}-grams:\n".encode())
            for p in range(n_parts):
                with open(d / f"part{p}" / f"section{k}.arpa", "rb") as part_fh:
                    shutil.copyfileobj(part_fh, fh, 1 << 20)
            if not sizes[k - 1]:  # an empty section still ends with its newline, as the local writer's
                fh.write(b"\n")
        fh.write(b"\n\\end\\\n")
    return path


def _concat_columns(paths: list, chunk: int):
    """One member of the native file from the parts' columns, read in chunks."""
    heads = [pt.column_chunks(p, chunk) for p in paths]
    dtype = heads[0][0]
    total = sum(h[1] for h in heads)

    def chunks():
        for _, _, it in heads:
            yield from it

    return dtype, total, chunks()


# ----------------------------------------------------------------------------- the client
def n_parts_for(n_workers: int, tokens: int, order: int, memory: int, parts: Optional[int] = None) -> int:
    """How many parts: at least two per worker (for balance), more when a part's working set (at most
    ``order`` n-grams a token) would pass a tenth of a worker's budget (the rest holds the other parts,
    up to Dask's spill threshold)."""
    if parts is not None:
        return max(1, int(parts))
    need = math.ceil(order * tokens * BYTES_PER_NGRAM_ON_WORKER / max(1, memory // 10))
    return int(min(MAX_PARTS, max(2 * n_workers, need)))


def build(client, sources: list, **kw) -> ClusterBuild:
    """Count, estimate and write the model on ``client``'s workers into ``output`` (ARPA when ``arpa``,
    else native), the pieces in ``shared`` (a folder every worker can write).  ``model``: the unfitted
    :class:`~ngramlm.model.NgramLM` whose parameters the native file records.

    A task that keeps killing its worker (Dask retries it on another, then gives up: a worker past its
    memory limit is restarted by its nanny) is a one-line error naming the budget; no model is written."""
    from concurrent.futures import CancelledError

    from distributed import KilledWorker

    limits = sorted({w.get("memory_limit") or 0 for w in client.scheduler_info().get("workers", {}).values()})
    watch = PauseWatch(client, stall=STALL_SECONDS, memory=kw["memory"])
    try:
        return _build(client, sources, watch=watch, **kw)
    except CancelledError as exc:  # a result the cluster lost and could not recompute
        raise InputError(f"the Dask cluster lost a task's result ({exc})",
                         fix="check the workers' logs (a worker past its memory limit is restarted; "
                             "give the workers more memory, or more workers); then run the build again") from None
    except KilledWorker as exc:
        limit = ", ".join(f"{m >> 20} MB" for m in limits if m) or "none set"
        task = exc.task[0] if isinstance(exc.task, tuple) else exc.task
        raise InputError(f"a Dask task ({str(task).split('-')[0]}) died with its worker {exc.allowed_failures + 1} "
                         f"times: worker memory limit {limit}, --memory {kw['memory'] >> 20} MB a worker",
                         fix="give the workers more memory (dask worker --memory-limit) or more workers, or a "
                             "smaller --memory so the n-grams are cut into more, smaller parts") from None


def _build(client, sources: list, *, order: int, vocab, inp, spec, smoother, memory: int, block_tokens: int,
           shared: Path, output: Path, arpa: bool, model, progress: Callable[[str], None],
           parts: Optional[int] = None, watch: Optional[PauseWatch] = None) -> ClusterBuild:

    from .cluster import word_count_pass

    say = progress
    t0 = time.perf_counter()

    def tick(msg: str) -> None:
        release_freed_memory()
        say(f"{msg} ({time.perf_counter() - t0:.1f} s)")

    # A shard is counted in memory on its worker (about 140 bytes a token, and its tokens as strings first)
    # while the worker holds what it counted so far, up to Dask's spill threshold (60-70 % of its limit):
    # a shard's working set is kept to about a tenth of the worker's budget.
    shards = shards_of(sources, shard_bytes=max(1 << 16, min(block_tokens * 5, memory // 10 // 250 * 5)))
    n_workers = len(client.scheduler_info().get("workers", {})) or 1
    say(f"{len(shards)} shard(s) on {n_workers} Dask worker(s); estimation on the workers")
    vocab, freq, n_sent, n_words, first_seen = word_count_pass(client, shards, vocab=vocab, inp=inp, spec=spec,
                                                               progress=say)
    V = len(vocab)
    weights = freq.astype(np.float64)
    weights[BOS_ID] = n_sent  # every sentence's n-grams that start with <s>
    P = n_parts_for(n_workers, n_words + n_sent, order, memory, parts)
    bounds = pt.bounds_for(weights, P)
    P = len(bounds) - 1
    tick(f"vocabulary of {V} ids; the n-grams cut into {P} parts by first word")

    # 2. Counting: shards -> parts.
    vocab_f = shared_value(client, vocab)
    counted = client.map(_count_parts, shards, vocab=vocab_f, order=order, spec=spec, keep_empty=inp.keep_empty,
                         line_filter=inp.line_filter, bounds=bounds, delay=0.0, pure=False)
    parts_f = client.map(_merge, _all_to_all(client, _piece, [(c,) for c in counted], P),
                         [int(b) for b in bounds[:-1]], [int(b) for b in bounds[1:]], V=V, order=order, pure=False)
    stats = gather_watched(client, client.map(operator.itemgetter(1, 2), counted, pure=False), watch)
    n_sent = sum(s for s, _ in stats)
    n_words = sum(w for _, w in stats)
    if n_words + n_sent == 0:
        raise InputError("the training text has no tokens", path=", ".join(map(str, sources)),
                         fix="pass a non-empty text")
    sizes, raw1 = [], np.zeros(V, dtype=np.int64)
    for p, (sz, u) in enumerate(gather_watched(client, client.map(_sizes_and_unigrams, parts_f, pure=False), watch)):
        sizes.append(sz)
        raw1[bounds[p]:bounds[p + 1]] = u
    del counted  # the parts' lineage keeps what a lost worker's parts need
    n_ngrams_k = [int(sum(s[k - 1] for s in sizes)) for k in range(1, order + 1)]
    # Global row offsets: part p's rows of order k start after the rows of parts 0..p-1 (order 1: word ids).
    offsets = [np.concatenate([[0], np.cumsum([s[k - 1] for s in sizes])])[:-1] for k in range(1, order + 1)]
    tick(f"counted: {n_words:,} words, n-grams per order {'/'.join(map(str, n_ngrams_k[1:]))}")

    # 3. Suffix rounds: every row's suffix located; the left extensions counted on the way.
    # The pieces that cross parts (a part's requests cut per answering part, the answers cut back, the
    # lower-order probabilities sent back) are P^2 small tasks a round, submitted as one graph each
    # (_all_to_all) and held by the client only until their consumers are submitted: the scheduler keeps
    # them, and their lineage for a lost worker, until those have run.  The client's memory then stays
    # nearly flat in P (2 M tokens, two workers: 92 MB at 8 parts, 106 MB at 64; one submit a piece and
    # all of them held took it to 171 MB, in 55 s against 32 s).
    interpolated = not isinstance(smoother, StupidBackoff)
    suffixes: dict = {}
    adjusted: list = [[None] * P for _ in range(order)]
    answers: dict = {}  # answers[k][q]: part q's answers to every part's order-k requests (one array a part)
    cont1 = np.zeros(V, dtype=np.int64)
    if interpolated:
        for c in gather_watched(client, client.map(_order2_words, parts_f, V=V, pure=False), watch):
            cont1 += c
        suffixes[2] = [client.submit(pt.order2_suffixes, part, bounds, pure=False) for part in parts_f]
        for k in range(3, order + 1):
            # client.map maps its positional lists (keywords go to every task alike)
            ks = [k] * P
            req = client.map(_requests, parts_f, ks, suffixes[k - 1], [P] * P, pure=False)
            res = client.map(_resolve, parts_f, ks, _all_to_all(client, _pick, [(r,) for r in req], P), pure=False)
            del req
            answers[k] = client.map(operator.itemgetter(0), res, pure=False)
            if smoother.row_counts == "adjusted":
                adjusted[k - 2] = client.map(pt.adjusted_counts, parts_f, [k - 1] * P,
                                             client.map(operator.itemgetter(1), res, pure=False), pure=False)
            del res
            suffixes[k] = client.map(_place, parts_f, ks, suffixes[k - 1],
                                     _all_to_all(client, _pick, [(a,) for a in answers[k]], P), pure=False)
            wait_watched(suffixes[k], watch)
            tick(f"suffixes of order {k} located")

    # 4. Discounts from the count-of-counts, summed over parts.
    row_stats = gather_watched(client, [client.submit(_stats, parts_f[p], smoother, [a[p] for a in adjusted],
                                                      pure=False) for p in range(P)], watch)
    c1 = _unigram_row_counts(smoother, raw1, cont1, V)
    ncs = [pt.count_stats(c1)] + [sum(s[0][k - 2] for s in row_stats) for k in range(2, order + 1)]
    from .outofcore import count_of_counts_raw

    coc_raw = [count_of_counts_raw(raw1)] + [sum(s[1][k - 2] for s in row_stats) for k in range(2, order + 1)]
    floor_types = n_types = vocab.n_types
    if getattr(model, "compat", None) == "kenlm":
        floor_types = _lmplz(client, smoother, parts_f, adjusted, bounds, offsets, first_seen, c1, raw1, ncs, n_types,
                             watch)
        tick("lmplz's conventions: the last n-gram in its suffix order found")
    params = smoother.order_params(ncs) if interpolated else [None] * order

    # 5. Estimation: unigrams here, the rest on the parts, bottom up.
    folder = str(shared)
    if interpolated:
        alpha1, gamma1 = smoother.alpha_gamma(c1, np.zeros(V, dtype=np.int64), 1, params[0])
        p1 = unigram_probs(alpha1, gamma1[0], floor_types, V)
        del alpha1
    else:
        c = np.where(unigram_mask(V), raw1, 0).astype(np.float64)
        total = context_sums(np.zeros(V, dtype=np.int64), c, 1)  # the in-memory estimate's own sum
        p1 = c / np.where(total > 0, total, 1.0)[0]
    with np.errstate(divide="ignore"):
        lp1 = np.log10(p1)
    bo1 = np.zeros(V)
    lin = None
    for k in range(2, order + 1):
        if not interpolated:
            lower = [None] * P
        elif k == 2:
            p1_f = shared_value(client, p1)
            lower = [client.submit(_lower2, part, p1_f, pure=False) for part in parts_f]
        else:
            lower = client.map(pt.place_lower, suffixes[k],
                               _all_to_all(client, _gather_answered, list(zip(lin, answers[k])), P), pure=False)
        done = [client.submit(_order, parts_f[p], k, smoother, adjusted[k - 1][p], params[k - 1], lower[p], k == order,
                              folder, p, pure=False) for p in range(P)]
        if k == 2:
            for p, b in enumerate(gather_watched(client, [client.submit(operator.itemgetter(1), d, pure=False)
                                                          for d in done], watch)):
                bo1[bounds[p]:bounds[p + 1]] = b
        lin = [client.submit(operator.itemgetter(0), d, pure=False) for d in done]
        wait_watched(lin, watch)
        answers.pop(k, None)
        suffixes.pop(k - 1, None)
        adjusted[k - 1] = [None] * P
        tick(f"order {k} estimated")
    del lin, suffixes, answers, adjusted

    # 6. Writing: the parts' pieces, then the file.
    words = [w.encode("utf-8") for w in vocab.itos_]
    words_f = shared_value(client, words)
    glob_offsets = [int(bounds[p]) for p in range(P)]
    written = [client.submit(_write_part, parts_f[p], folder, p,
                             [glob_offsets[p]] + [int(offsets[j][p]) for j in range(1, order - 1)], arpa, words_f,
                             pure=False) for p in range(P)]
    wait_watched(written, watch)
    tick(f"the parts' {'ARPA sections' if arpa else 'columns'} written")
    head, meta = _head_and_meta(model, smoother, vocab, order, n_ngrams_k, coc_raw, params, arpa, floor_types)
    path = gather_watched(client, client.submit(_assemble, str(output), folder, P, order, arpa, head, (lp1, bo1),
                                                n_ngrams_k, meta, words_f, written, pure=False), watch)
    del parts_f, written
    tick(f"wrote {output}")
    return ClusterBuild(vocab=vocab, sentences=n_sent, words=n_words, n_ngrams=[n_types + 1] + n_ngrams_k[1:],
                        parts=P, path=Path(path), info=_info(smoother, params, floor_types))


def _last_in_part(part, kid: np.ndarray):
    from ..kenlm_compat import KeyTables, last_in_suffix_order

    return last_in_suffix_order(KeyTables(part.keys, part.V, part.lo, part.hi - part.lo), kid)


def _suffix_counts(part, gram: list, smoother, adjusted):
    """``(local row, row count, raw count)`` of the n-gram ``gram`` in this part (the part of its first
    word), or None when it is not there."""
    from ..kenlm_compat import KeyTables

    k = len(gram)
    row = KeyTables(part.keys, part.V, part.lo, part.hi - part.lo).row_of(gram)
    if row is None:
        return None
    return row, float(pt.row_counts(part, k, smoother, adjusted)[row]), int(part.counts[k - 1][row])


def _lmplz(client, smoother, parts_f: list, adjusted: list, bounds: np.ndarray, offsets: list, first_seen: np.ndarray,
           c1: np.ndarray, raw1: np.ndarray, ncs: list, n_types: int, watch) -> int:
    """``--compat kenlm`` on the parts (:mod:`ngramlm.kenlm_compat`): the last padded n-gram in lmplz's
    suffix order is the largest of each part's (a few ints a part), and its suffixes are moved to
    their raw counts in ``ncs`` (in place); ``smoother.lmplz_`` set as the in-memory estimate sets it.
    Returns the uniform floor's number of types."""
    from ..kenlm_compat import lmplz_ids_from_first_seen, move_to_raw, recorded_suffixes

    V = len(raw1)
    n = len(ncs)
    kid_f = shared_value(client, lmplz_ids_from_first_seen(first_seen, V))
    found = [c for c in gather_watched(client, client.map(_last_in_part, parts_f, kid=kid_f, pure=False), watch)
             if c is not None]
    last = max(found, key=lambda c: c[0])[1] if found else None

    rows = [None] * n
    for k, gram in enumerate(recorded_suffixes(last, n)[: n - 1], start=1):
        if gram is None:
            continue
        if k == 1:
            rows[0], a, r = gram[0], c1[gram[0]], raw1[gram[0]]
        else:
            p = int(pt.part_of(bounds, np.array([gram[0]]))[0])
            got = gather_watched(client, client.submit(_suffix_counts, parts_f[p], list(gram), smoother,
                                                       adjusted[k - 1][p], pure=False), watch)
            if got is None:
                continue
            rows[k - 1], a, r = int(offsets[k - 1][p]) + got[0], got[1], got[2]
        ncs[k - 1] = move_to_raw(ncs[k - 1], int(a), int(r))
    extra = int(raw1[UNK_ID] > 0)
    smoother.lmplz_ = {"extra_types": extra, "raw_count_rows": rows}
    return n_types + extra


def _unigram_row_counts(smoother, raw1: np.ndarray, cont1: np.ndarray, V: int) -> np.ndarray:
    """Order 1's row counts, as :func:`ngramlm.smoothing.adjusted_counts` (or the raw counts) make them."""
    if smoother.row_counts == "adjusted":
        a = cont1.astype(np.float64)
        a[BOS_ID] = raw1[BOS_ID]
    else:
        a = raw1.astype(np.float64)
    a[~unigram_mask(V)] = 0.0
    return a


def _head_and_meta(model, smoother, vocab, order: int, n_ngrams_k: list, coc_raw: list, params: list,
                   arpa: bool, floor_types: int) -> tuple:
    """The ARPA file's head (its first lines up to the counts) or the native file's metadata."""
    info = _info(smoother, params, floor_types)
    if arpa:
        from types import SimpleNamespace

        from ..io.arpa import META_PREFIX, arpa_meta

        head = [META_PREFIX + json.dumps(arpa_meta(SimpleNamespace(vocab_=vocab, smoother_name_=smoother.name)),
                                         separators=(",", ":"), ensure_ascii=False), "", "\\data\\"]
        head += [f"ngram {k}={c}" for k, c in enumerate([len(vocab) - 1] + n_ngrams_k[1:], start=1)]
        return ("\n".join(head) + "\n").encode("utf-8"), None
    from ..io.native import native_meta

    stupid = isinstance(smoother, StupidBackoff)
    meta = native_meta(model, order=order, kind="backoff", smoother_name=smoother.name,
                       smoother_params=smoother.get_params(), n_types=vocab.n_types,
                       n_ngrams=[vocab.n_types + 1] + n_ngrams_k[1:], count_of_counts=[c.tolist() for c in coc_raw],
                       is_distribution=not stupid,
                       missing_backoff=math.log10(float(smoother.alpha)) if stupid else 0.0, info=info, vocab=vocab)
    return b"", json.loads(json.dumps(meta))


def _info(smoother, params: list, floor_types: Optional[int] = None) -> dict:
    """What the in-memory estimate records in ``info`` for this smoother."""
    if isinstance(smoother, StupidBackoff):
        return {"alpha": float(smoother.alpha)}
    if isinstance(smoother, ModifiedKneserNey):
        info = {"discounts": [list(map(float, d)) for d in params]}
        lmplz = getattr(smoother, "lmplz_", None)
        if lmplz is not None:
            info["compat"] = {"kenlm": {"uniform_types": floor_types, "raw_count_rows": lmplz["raw_count_rows"]}}
        return info
    if smoother.name == "absolute":
        return {"discounts": [float(d) for d in params]}
    return {}


def build_files(inp, *, order: int, vocab, memory, temp_dir, client, output, arpa: bool, smoother, model,
                progress: Callable[[str], None], parts: Optional[int] = None, kenlm_binary: bool = False) -> tuple:
    """:func:`build` on text files (``-``: standard input, spooled to the shared folder first), connecting
    to ``client`` when it is an address: ``(ClusterBuild, tables or None)``.  Without ``output`` the model
    is written to the shared folder as a native file and read back (its tables are returned).
    ``kenlm_binary``: ``output`` is a KenLM probing binary, laid out by one task on a worker from the
    native file the workers wrote (the whole model in that worker's memory: where it fits)."""
    from corpora.tokenize import TokenizerSpec

    from .streaming import TempFolder, block_tokens_for, parse_memory, spool_stdin
    from .text_counts import DEFAULT_MEMORY

    if isinstance(smoother, StupidBackoff):
        if not 0.0 < float(smoother.alpha) <= 1.0:
            raise InputError(f"stupid backoff alpha must be in (0, 1], got {smoother.alpha}",
                             fix="use e.g. --alpha 0.4")
        if arpa:
            raise InputError("stupid backoff scores are not probabilities and back off even from unseen contexts; "
                             "an ARPA file would score them differently", fix="write a native model (.npz)")
    mem = parse_memory(memory if memory is not None else DEFAULT_MEMORY) if not isinstance(memory, int) else memory
    block = block_tokens_for(mem, order)
    spec = inp.tokenizer or TokenizerSpec()
    if isinstance(client, str):
        from .cluster import close, connect

        progress(f"connecting to the Dask scheduler {client}")
        client = connect(client, memory_limit=mem)
        try:
            return build_files(inp, order=order, vocab=vocab, memory=mem, temp_dir=temp_dir, client=client,
                               output=output, arpa=arpa, smoother=smoother, model=model, progress=progress,
                               parts=parts, kenlm_binary=kenlm_binary)
        finally:
            close(client)
    # The workers write here: shared storage on a real cluster (the output's folder unless --temp-dir).
    base = temp_dir if temp_dir is not None else (Path(output).resolve().parent if output not in (None, "-") else None)
    with TempFolder(base) as folder:
        sources = [spool_stdin(folder) if str(s) == "-" else os.path.abspath(os.fspath(s)) for s in inp.sources]
        if output == "-":
            raise InputError("the Dask build writes its model from the workers, not to standard output",
                             fix="give -o FILE on storage the workers share")
        from .. import accel

        # ARPA is formatted by the compiled formatter on the workers; without it, the native file is
        # written there and turned into ARPA here (the slow path, which holds the model).
        direct = output is not None and (not arpa or accel.fast is not None) and not kenlm_binary
        target = Path(output) if direct else folder.path / "model.npz"
        res = build(client, sources, order=order, vocab=vocab, inp=inp, spec=spec, smoother=smoother, memory=mem,
                    block_tokens=block, shared=folder.path, output=target.resolve(), arpa=arpa and direct,
                    model=model, progress=progress, parts=parts)
        tables = None
        if kenlm_binary and output is not None:
            from distributed import KilledWorker

            from ..kenlm.write import binary_from_native

            progress("laying out the KenLM binary on a worker (from the whole model)")
            try:
                size = client.submit(binary_from_native, str(target), str(Path(output).resolve()), pure=False).result()
            except KilledWorker:
                raise InputError("the KenLM binary is laid out from the whole model on one worker, and that "
                                 "worker died (past its memory limit)", path=str(output),
                                 fix="write ARPA (-o NAME.arpa) on the workers, then `ngramlm build-binary` on a "
                                     "machine with the memory") from None
            progress(f"wrote {output} ({size:,} bytes)")
        elif not direct:
            from ..io.native import load_native_tables

            tables = load_native_tables(target, mmap=output is not None)[0]
            if output is not None:
                from ..io.arpa import write_arpa
                from ..scorer import Scorer

                write_arpa(Scorer(tables), output)
                tables = None
            else:
                tables = tables.replace(vocab=res.vocab, smoother_params=smoother.get_params())
        res.path = Path(output) if output is not None else None
        return res, tables
