"""Counting on a Dask cluster: the text cut into line-aligned shards, each counted on a worker.

    ngramlm train --dask tcp://SCHEDULER:8786 --order 5 -o lm.arpa big1.txt big2.txt
    ngramlm train --dask local:2 ...            # a local cluster of 2 worker processes

Two rounds of tasks, both mapped over the shards: word counts (summed on the client into the
vocabulary, unless one is given), then n-gram counts (each worker counts its shard in memory and
returns its sorted tables).  The client adds every shard's tables as a run and merges them exactly
as the local memory-bounded path merges its blocks (``ngramlm.builder.streaming.RunMerger``), so the
model is the one a single process builds.  Tasks are pure functions of their shard: when a worker
dies mid-job, Dask runs its tasks again elsewhere and the result is the same.

Workers need this package installed and the input paths readable at the same paths (shared
storage); tasks and results travel with Dask's own serialisation.
"""
from __future__ import annotations

import os
import time
from typing import Callable, Optional

from corpora.errors import InputError

from ..counts import NgramCounts
from .streaming import RunMerger, TempFolder, encode_block, line_blocks

CONNECT_TIMEOUT_S = 5
_TASK_DELAY_S = 0.0  # fault-injection tests slow each task down so a worker can be killed mid-job


def connect(address: str, *, timeout: float = CONNECT_TIMEOUT_S, memory_limit=None):
    """A ``distributed.Client`` for ``tcp://HOST:PORT`` (a running scheduler) or ``local:N`` (N worker
    processes here, each with ``memory_limit`` bytes: Dask spills past 60 % of it and restarts a worker
    past 95 %).  An unreachable scheduler is an error within ``timeout`` seconds, not a hang."""
    try:
        from distributed import Client, LocalCluster
    except ImportError:
        raise InputError("--dask needs the distributed package", fix='pip install "ngramlm[dask]"') from None
    if address.startswith("local:"):
        try:
            n = int(address[6:])
        except ValueError:
            n = 0
        if n < 1:
            raise InputError(f"bad local cluster {address!r}", fix="write local:N with N >= 1 workers, e.g. local:2")
        cluster = LocalCluster(n_workers=n, threads_per_worker=1, processes=True, dashboard_address=None,
                               memory_limit=memory_limit if memory_limit else "auto")
        return Client(cluster)
    try:
        return Client(address, timeout=f"{timeout}s")
    except (OSError, TimeoutError, ValueError) as exc:
        raise InputError(f"cannot reach the Dask scheduler at {address} within {timeout:g} s ({exc})",
                         fix="start one with `dask scheduler` and workers with `dask worker ADDRESS`, "
                             "or check the address (tcp://HOST:8786)") from None


def close(client) -> None:
    """Close a client and, for ``local:N``, the cluster it started."""
    cluster = getattr(client, "cluster", None)
    client.close()
    if cluster is not None:
        cluster.close()


def _value(obj):
    return obj


def shared_value(client, obj):
    """A future holding ``obj`` for many tasks.  Made by a task, not ``client.scatter``: scattered data has
    no lineage, so a worker that died holding it would take it along, and every task that needs it."""
    return client.submit(_value, obj, pure=False)


def shards_of(paths: list, *, shard_bytes: int) -> list:
    """Line-aligned byte ranges ``(path, start, end, first line)`` of about ``shard_bytes`` each
    (a gzip file is one shard: it cannot be entered in the middle)."""
    out = []
    for p in paths:
        p = os.fspath(p)
        size = os.path.getsize(p)
        with open(p, "rb") as fh:
            if fh.read(2) == b"\x1f\x8b":
                out.append((p, 0, None, 1))
                continue
            start, line = 0, 1
            while start < size:
                end = min(size, start + shard_bytes)
                if end < size:
                    fh.seek(end)
                    rest = fh.readline()  # the shard ends after the line it cut into
                    end += len(rest)
                fh.seek(start)
                # The next shard's first line number: newlines counted in 16 MB pieces.
                n_nl, pos = 0, start
                while pos < end:
                    piece = fh.read(min(16 << 20, end - pos))
                    n_nl += piece.count(b"\n")
                    pos += len(piece)
                out.append((p, start, end, line))
                start, line = end, line + n_nl
    return out


def _shard_word_counts(shard, spec, keep_empty: bool, line_filter: Optional[str], delay: float):
    from collections import Counter

    from corpora.tokenize import make_tokenizer

    from .streaming import word_counts

    time.sleep(delay)
    filt = None
    if line_filter:
        from corpora.corpus import LINE_FILTERS

        filt = LINE_FILTERS[line_filter]
    wc, n_sent, n_words = word_counts([shard], make_tokenizer(spec), keep_empty=keep_empty, line_filter=filt)
    return Counter(wc), n_sent, n_words


def shard_counts(shard, vocab, order: int, spec, keep_empty: bool, line_filter: Optional[str], delay: float):
    """One shard counted on a worker: ``(NgramCounts or None for no sentence, sentences, words)``."""
    from corpora.tokenize import make_tokenizer

    time.sleep(delay)
    tokenize = make_tokenizer(spec)
    filt = None
    if line_filter:
        from corpora.corpus import LINE_FILTERS

        filt = LINE_FILTERS[line_filter]
    sents = []
    for _, lines in line_blocks(shard):
        if filt is not None:
            lines = [filt(x) for x in lines]
        sents.extend(tokenize(x) for x in lines)
    enc = encode_block(vocab, sents, keep_empty)
    del sents
    if enc.n_sentences == 0:
        return None, 0, 0
    return NgramCounts.from_encoded(enc, order=order, vocab_size=len(vocab)), enc.n_sentences, enc.n_words


def _shard_counts(shard, vocab, order: int, spec, keep_empty: bool, line_filter: Optional[str], delay: float):
    """One shard's count tables: the unigram counts and, per order >= 2, (parent, word, count, suffix)."""
    import numpy as np

    c, n_sent, n_words = shard_counts(shard, vocab, order, spec, keep_empty, line_filter, delay)
    if c is None:
        return None, 0, 0
    tables = [(t.parent.astype(np.int32), t.word.astype(np.int32), t.count.astype(np.int64),
               None if k == 1 else np.asarray(c.suffix_index(k), dtype=np.int32))
              for k, t in enumerate(c.tables, start=1)]
    return tables, n_sent, n_words


def count_on_cluster(client, sources: list, *, order: int, vocab, inp, spec, block_tokens: int, memory: int,
                     folder: TempFolder, progress: Callable[[str], None]):
    """The counting of :func:`ngramlm.builder.text_counts.build_counts` on ``client``'s workers:
    ``(counts, vocab, sentences, words)``, which the build wraps as its result."""
    from distributed import as_completed

    # A shard is counted in memory on its worker: about one local block's worth of text.
    shards = shards_of(sources, shard_bytes=max(1 << 16, block_tokens * 5))
    n_workers = len(client.scheduler_info().get("workers", {})) or 1
    progress(f"{len(shards)} shard(s) on {n_workers} Dask worker(s)")
    delay = _TASK_DELAY_S
    if vocab is None:
        vocab = word_count_pass(client, shards, vocab=None, inp=inp, spec=spec, progress=progress)[0]
    progress("counting pass (on the workers)")
    vocab_f = shared_value(client, vocab)
    futures = client.map(_shard_counts, shards, vocab=vocab_f, order=order, spec=spec, keep_empty=inp.keep_empty,
                         line_filter=inp.line_filter, delay=delay, pure=False)
    merger = RunMerger(order=order, vocab_size=len(vocab), folder=folder, memory=memory)
    n_sent = n_words = done = 0
    t0 = time.perf_counter()
    for fut in as_completed(futures):
        tables, s, w = fut.result()
        fut.release()
        n_sent += s
        n_words += w
        done += 1
        if tables is not None:
            merger.add(_counts_from_tables(tables, order, len(vocab)))
        progress(f"shard {done}/{len(shards)} counted ({n_words:,} words, {time.perf_counter() - t0:.1f} s)")
    if not merger.runs:
        raise InputError("the training text has no tokens", path=", ".join(map(str, sources)),
                         fix="pass a non-empty text")
    return merger.merge(progress), vocab, n_sent, n_words


def word_count_pass(client, shards: list, *, vocab, inp, spec, progress: Callable[[str], None]) -> tuple:
    """Word counts of every shard on the workers, summed here: ``(vocab, freq, sentences, words, first_seen)``,
    the vocabulary fitted on them unless given, ``freq[i]`` the count of id i (vocabulary-sized), and
    ``first_seen`` the ids in the order they first appear in the text (what ``--compat kenlm`` needs).

    The shards' counts are added in text order: a shard's counter lists its words as they first appear
    in it, so the sum lists them as they first appear in the text."""
    from collections import Counter

    import numpy as np

    from corpora.vocab import UNK_ID, Vocab

    progress("vocabulary pass (on the workers)")
    futures = client.map(_shard_word_counts, shards, spec=spec, keep_empty=inp.keep_empty,
                         line_filter=inp.line_filter, delay=_TASK_DELAY_S, pure=False)
    total: Counter = Counter()
    n_sent = n_words = 0
    for fut in futures:
        wc, s, w = fut.result()
        fut.release()
        total.update(wc)
        n_sent += s
        n_words += w
    del futures
    if not total:
        raise InputError("the training text has no tokens", path=", ".join(str(s[0]) for s in shards[:3]),
                         fix="pass a non-empty text")
    if vocab is None:
        vocab = Vocab(tokenizer=spec, **inp.vocab_params).fit_counts(total)
    first_seen = np.fromiter((vocab.stoi_.get(w, UNK_ID) for w in total), dtype=np.int64, count=len(total))
    freq = np.bincount(first_seen, weights=np.fromiter(total.values(), dtype=np.float64, count=len(total)),
                       minlength=len(vocab)).astype(np.int64)
    return vocab, freq, n_sent, n_words, first_seen


def _counts_from_tables(tables: list, order: int, V: int) -> NgramCounts:
    from ..counts import OrderTable

    return NgramCounts(order, V, [OrderTable(parent=p, word=w, count=c, suffix=s) for p, w, c, s in tables])
