"""Counting text files into :class:`NgramCounts` within a memory budget, locally or on a Dask cluster.

This is what ``ngramlm train --memory/--temp-dir/--dask`` and :meth:`NgramLM.fit_files` run: the
vocabulary pass, then the counting pass in blocks (``ngramlm.builder.streaming``) or in shards on Dask
workers (``ngramlm.builder.cluster``), then the merge.  Estimation follows in memory on the merged
counts -- or, with ``estimation="auto"`` when they would not fit the budget (``"disk"``: always),
out of core on the merged columns in the temp folder (``ngramlm.builder.outofcore``), through the caller's
``on_disk`` step, which runs while the temp folder still exists.  Either way the counts -- and so
the model -- equal those of counting the text at once.
"""
from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Callable, Optional, Sequence

from corpora.errors import InputError
from corpora.vocab import Vocab

from ..counts import NgramCounts, check_order
import numpy as np

from corpora.vocab import ID_DTYPE, UNK_ID

from .streaming import (TEXT_BLOCK_SHARE, TempFolder, block_tokens_for, blocks_from_spool, count_blocks,
                        encoded_blocks, parse_memory, spool_ids, spool_stdin)

DEFAULT_MEMORY = "50%"


@dataclass
class BuildInput:
    """Text files (``-`` = standard input) and how to read them into sentences."""

    sources: Sequence
    tokenizer: Optional[object] = None  # corpora.tokenize.TokenizerSpec; None = whitespace
    keep_empty: bool = True  # a blank line is a sentence of just </s> (KenLM's count)
    line_filter: Optional[str] = None  # a name in corpora.corpus.LINE_FILTERS (named corpora)
    vocab_params: dict = field(default_factory=dict)  # min_count, max_size, unk_token


@dataclass
class BuildResult:
    counts: Optional[NgramCounts]  # None when the on_disk step ran instead
    vocab: Vocab
    sentences: int
    words: int
    on_disk: object = None  # what the on_disk step returned (counts were too big for the budget)


ESTIMATIONS = ("auto", "memory", "disk")


def build_counts(inp: BuildInput, *, order: int, vocab: Optional[Vocab] = None, memory=None,
                 temp_dir: Optional[os.PathLike | str] = None, client=None,
                 progress: Optional[Callable[[str], None]] = None, estimation: str = "memory",
                 on_disk: Optional[Callable] = None, first_seen=None) -> BuildResult:
    """Stream ``inp`` into counts of orders 1..``order`` using at most about ``memory`` (``1G``, ``30%``,
    bytes) for counting, spilling sorted runs to ``temp_dir``; with ``client`` (a
    ``distributed.Client``, or an address: ``tcp://HOST:8786``, ``local:N``) the counting runs on
    its workers.

    ``estimation`` ``"auto"`` or ``"disk"`` with an ``on_disk(disk_counts, vocab, folder, memory)``
    step: when the merged counts would not fit ``memory`` for the in-memory estimation (``"disk"``:
    always), they are merged into the temp folder as :class:`~ngramlm.builder.streaming.DiskCounts` and
    ``on_disk`` runs on them there; its result is ``BuildResult.on_disk`` (``counts`` is None).
    The Dask build and ``"memory"`` always return the counts in memory.

    ``first_seen`` (a :class:`ngramlm.kenlm_compat.FirstSeen`) is given each block's ids as it is
    counted: the order words first appear in, which ``--compat kenlm`` needs (local counting only)."""
    if estimation not in ESTIMATIONS:
        raise InputError(f"unknown estimation {estimation!r}", fix=f"use one of {', '.join(ESTIMATIONS)}")
    from corpora.tokenize import TokenizerSpec, make_tokenizer

    check_order(order)
    mem = parse_memory(memory if memory is not None else DEFAULT_MEMORY) if not isinstance(memory, int) else memory
    block = block_tokens_for(mem, order)  # a budget too small for one block fails here, before any work
    spec = inp.tokenizer or TokenizerSpec()
    tokenize = make_tokenizer(spec)
    filt = None
    if inp.line_filter:
        from corpora.corpus import LINE_FILTERS

        filt = LINE_FILTERS[inp.line_filter]
    say = progress or (lambda msg: None)
    if isinstance(client, str):  # an address: connect here, and close what this call opened
        from .cluster import close, connect

        say(f"connecting to the Dask scheduler {client}")
        client = connect(client)
        try:
            return build_counts(inp, order=order, vocab=vocab, memory=mem, temp_dir=temp_dir, client=client,
                                progress=progress, estimation=estimation, on_disk=on_disk, first_seen=first_seen)
        finally:
            close(client)
    with TempFolder(temp_dir) as folder:
        sources = []
        for s in inp.sources:
            if str(s) == "-":
                say("reading standard input into the temp folder (it is read twice)")
                sources.append(spool_stdin(folder))
            else:
                sources.append(os.fspath(s))
        if client is not None:
            from .cluster import count_on_cluster

            if first_seen is not None:
                raise ValueError("first_seen is recorded by the local counting only")
            return BuildResult(*count_on_cluster(client, sources, order=order, vocab=vocab, inp=inp, spec=spec,
                                    block_tokens=block, memory=mem, folder=folder, progress=say))
        stats: dict = {}
        if vocab is None:
            # One tokenizing pass: provisional ids spilled, the vocabulary fitted on their counts,
            # then the spilled ids renumbered block by block (the text is not read again).
            say("tokenizing pass (ids spilled to the temp folder)")
            plain = spec == TokenizerSpec()  # whitespace, no case or Unicode changes: one split a block
            spool, words, freq = spool_ids(sources, tokenize, folder, plain=plain and filt is None,
                                           keep_empty=inp.keep_empty, line_filter=filt,
                                           block_bytes=max(1 << 20, min(16 << 20, mem // TEXT_BLOCK_SHARE)))
            if int(freq[1:].sum()) == 0:
                raise InputError("the training text has no tokens", path=", ".join(map(str, sources)),
                                 fix="pass a non-empty text")
            vocab = Vocab(tokenizer=spec, **inp.vocab_params).fit_counts(dict(zip(words[1:], freq[1:].tolist())))
            remap = np.fromiter((vocab.stoi_.get(w, UNK_ID) for w in words), dtype=ID_DTYPE, count=len(words))
            say(f"counting in blocks of {block:,} tokens (memory budget {mem >> 20} MB, temp folder {folder.path})")
            blocks = blocks_from_spool(spool, remap, block_tokens=block)
        else:
            say(f"counting in blocks of {block:,} tokens (memory budget {mem >> 20} MB, temp folder {folder.path})")
            blocks = encoded_blocks(sources, vocab, tokenize, block_tokens=block, keep_empty=inp.keep_empty,
                                    line_filter=filt)
        if first_seen is not None:
            blocks = first_seen.tracked(blocks)
        if on_disk is None or estimation == "memory":
            counts = count_blocks(blocks, order=order, vocab_size=len(vocab), memory=mem, folder=folder,
                                  progress=say, stats=stats)
            return BuildResult(counts, vocab, stats["sentences"], stats["words"])
        counts, disk = _counts_or_disk(blocks, order=order, V=len(vocab), mem=mem, folder=folder,
                                       estimation=estimation, say=say, stats=stats)
        if disk is None:
            return BuildResult(counts, vocab, stats["sentences"], stats["words"])
        say(f"{disk.total():,} n-grams of orders 2-{order} merged into the temp folder: estimating out of core")
        result = on_disk(disk, vocab, folder, mem)
        disk.close()
        return BuildResult(None, vocab, stats["sentences"], stats["words"], on_disk=result)


def _counts_or_disk(blocks, *, order: int, V: int, mem: int, folder: TempFolder, estimation: str, say,
                    stats: dict) -> tuple:
    """``(counts, None)`` in memory, or ``(None, DiskCounts)`` when they would not fit the in-memory
    estimation within ``mem`` (or ``estimation == "disk"``)."""
    from .outofcore import BYTES_PER_NGRAM_IN_MEMORY
    from .streaming import FIXED_OVERHEAD, DiskCounts, count_runs

    def fits(n_ngrams: int) -> bool:
        return estimation == "auto" and n_ngrams * BYTES_PER_NGRAM_IN_MEMORY <= mem - FIXED_OVERHEAD

    merger, counts = count_runs(blocks, order=order, vocab_size=V, memory=mem, folder=folder, progress=say,
                                stats=stats)
    if merger is None:  # one block
        if fits(sum(len(t) for t in counts.tables[1:])):
            return counts, None
        return None, DiskCounts.from_counts(counts, folder)
    if fits(merger.upper_bound_ngrams()):  # even with no n-gram shared between blocks
        return merger.merge(say), None
    disk = merger.merge_to_disk(say)
    if fits(disk.total()):
        counts = disk.load()
        disk.close()
        return counts, None
    return None, disk
