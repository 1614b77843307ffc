"""The ∞-gram index in shards, as infini-gram shards its datastores: one suffix array per shard, and
every count a sum over the shards.

    ngramlm infini build big.txt -o big.infini --memory 1G          # local: shards that sort within 1 GB
    ngramlm infini build a.txt b.txt -o big.infini --dask tcp://SCHEDULER:8786 [--shard-size 256M]
    ngramlm infini count big.infini the company said                 # queries take a folder or a file

A sharded index is a folder: ``manifest.json`` (the shards in text order, their token and sentence
counts, a build id and the SHA-256 of the vocabulary), ``vocab.json`` (one vocabulary for all
shards) and ``shard-NNNNN-MMM.npz`` files, each an index file of :mod:`ngramlm.infini.index`
holding whole padded sentences (its metadata names the build, not the vocabulary).

**Why the sums are the single index's.**  The single index is the padded stream ``<s> w1 .. wm
</s> <s> ...`` of the whole text; the shards are consecutive pieces of that very stream, cut
between a ``</s>`` and the next ``<s>``.  An occurrence of a pattern lies inside one shard unless
it spells out a ``</s> <s>`` at a cut, so ``count = sum over shards`` plus the occurrences across
the cuts, which are found directly (:meth:`ShardedInfiniIndex._across_cuts`: a pattern without
``</s> <s>`` has none).  A history never holds ``</s>``, so the ∞-gram itself never crosses a
cut: at each position the longest h' over the union is the longest over the shards, cnt(h') and
cnt(h' w) are the sums over the shards where h' is that long, and h' has one continuation when
every such shard has the same single one.  Tested equal to the single index on counts,
``next_counts``, ``next_probs``, ``score`` (capped and not) and ``accuracy_by_n``.

**Bounded memory.**  A shard's suffix sort holds 10 bytes a token (uint16 tokens; 20 with uint32,
:func:`ngramlm.infini.index.sort_bytes_per_token`) besides the process's own ~100 MB, so a shard
holds at most :func:`tokens_within` ``(--memory)`` tokens; a text (or a Dask task's part of it)
with more is cut into several shards.  The tokenizing pass reads the text in blocks of at most
16 MB (about 150 MB resident), fewer under a small budget (:func:`tokenize_block_bytes`), so the
whole build, not only the sort, stays within ``--memory`` from about 128 MB up (measured).

**On Dask** (:func:`build_on_cluster`): the text is cut into line-aligned byte ranges
(:func:`ngramlm.builder.cluster.shards_of`); a first round of tasks counts the words of each range
(summed on the client into the one vocabulary, which is then scattered to the workers), a second
round tokenizes each range again and writes its shards into the output folder -- shared storage,
at the same path on every worker.  Tasks are pure functions of their range: a task rerun after a
worker died writes the same files.  The client writes ``manifest.json`` last, so a folder whose
build did not finish has no manifest (or an older one, whose shards then fail its build-id check).
"""
from __future__ import annotations

import hashlib
import json
import os
import uuid
from collections import Counter
from pathlib import Path
from typing import Callable, Iterable, Optional, Sequence

import numpy as np

from corpora.errors import InputError
from corpora.textio import OutputError, atomic_writer
from corpora.vocab import BOS_ID, EOS_ID, UNK_ID, EncodedText, Vocab

from ..counts import padded_stream
from . import sa_search
from .index import (FORMAT, FORMAT_VERSION, SORT_OVERHEAD, InfiniIndex, InfiniQueries, InfiniScores, flatten,
                    padded_tokens, read_index_file, release_freed_memory, sort_bytes_per_token, suffix_array,
                    token_dtype, tokenize_block_bytes, write_index_file)

MANIFEST = "manifest.json"
VOCAB_FILE = "vocab.json"
SHARDED_FORMAT = "ngramlm.infini.sharded"
SHARDED_VERSION = 1
SHARD_GLOB = "shard-*.npz"
MIN_SHARD_TOKENS = 1_000
# A block of ids read from the spool is a 64th of a shard: its buffers (about 8 bytes a token of the
# block) stay small next to the shard's 10 bytes a token (a 16th measured 10.5 bytes a token in all).
BLOCK_SHARE = 64
# A Dask worker process holds about 30 MB more than the command line's before any work (68 against
# 40 MB resident, measured): its tasks size their shards for that.
DASK_WORKER_OVERHEAD = SORT_OVERHEAD + (32 << 20)
REBUILD = "rebuild it with `ngramlm infini build TEXT -o FOLDER` (with --memory or --dask)"


# ----------------------------------------------------------------------------- the sharded index
class ShardedInfiniIndex(InfiniQueries):
    """Shards of one padded stream (consecutive, cut between sentences) and their one vocabulary.
    Every query of :class:`InfiniIndex`, answered as the single index over the whole text answers it."""

    def __init__(self, shards: Sequence[InfiniIndex], vocab: Vocab, *, source: str = "",
                 folder: Optional[Path] = None) -> None:
        if not shards:
            raise InputError("a sharded index needs at least one shard", path=folder, fix=REBUILD)
        self.shards = list(shards)
        self.vocab = vocab
        self.source = source
        self.folder = folder
        self.n_sentences = sum(s.n_sentences for s in self.shards)
        # Where each shard starts in the whole stream; the cuts are offsets[1:-1].
        self.offsets = np.concatenate([[0], np.cumsum([s.n_tokens for s in self.shards])]).astype(np.int64)

    @classmethod
    def load(cls, path: os.PathLike | str, *, mmap: bool = True) -> "ShardedInfiniIndex":
        """Open the folder (or its manifest.json); each shard is mapped as :meth:`InfiniIndex.load` maps it."""
        folder, manifest = read_manifest(path)
        vpath = folder / manifest["vocab"]
        if not vpath.is_file():
            raise InputError(f"the vocabulary file that {MANIFEST} names is missing", path=vpath,
                             fix=f"copy the whole folder (its {MANIFEST}, {VOCAB_FILE} and every shard), or {REBUILD}")
        raw = vpath.read_bytes()
        if hashlib.sha256(raw).hexdigest() != manifest["vocab_sha256"]:
            raise InputError(f"the vocabulary is not the one {MANIFEST} was built with (changed since)", path=vpath,
                             fix=REBUILD)
        try:
            vocab = Vocab.from_dict(json.loads(raw.decode("utf-8")), path=str(vpath))
        except (ValueError, UnicodeDecodeError) as exc:
            raise InputError(f"not a readable vocabulary ({exc})", path=vpath, fix=REBUILD) from None
        shards = []
        entries = manifest["shards"]
        for i, entry in enumerate(entries):
            spath = folder / entry["file"]
            if not spath.is_file():
                raise InputError(f"shard {i + 1} of {len(entries)} is missing (named by {MANIFEST})", path=spath,
                                 fix=f"copy the whole folder (every {SHARD_GLOB} with its {MANIFEST}), or {REBUILD}")
            meta, tokens, sa = read_index_file(spath, mmap=mmap)
            of = meta.get("shard_of") or {}
            if of.get("build") != manifest["build"]:
                raise InputError(f"this shard is not of the build {MANIFEST} describes (a file of another build)",
                                 path=spath, fix=REBUILD)
            if len(tokens) != entry["tokens"] or int(meta.get("n_sentences", -1)) != entry["sentences"]:
                raise InputError(f"the shard holds {len(tokens):,} tokens, {meta.get('n_sentences')} sentences; "
                                 f"{MANIFEST} says {entry['tokens']:,} and {entry['sentences']:,}", path=spath,
                                 fix=REBUILD)
            shards.append(InfiniIndex(tokens, sa, vocab, n_sentences=entry["sentences"], source=str(spath)))
        return cls(shards, vocab, source=manifest.get("source", ""), folder=folder)

    @property
    def n_tokens(self) -> int:
        return int(self.offsets[-1])

    @property
    def nbytes(self) -> int:
        return sum(s.nbytes for s in self.shards)

    # ------------------------------------------------------------------ counting
    def count_ids(self, ngrams: Sequence[Sequence[int]]) -> np.ndarray:
        """Occurrences of many id sequences: the shards' counts summed, plus those across a cut."""
        flat, offsets = flatten(ngrams)
        out = np.zeros(len(ngrams), dtype=np.int64)
        for s in self.shards:
            out += s.count_flat(flat, offsets)
        if len(self.shards) > 1:
            which, _ = self._across_cuts(flat, offsets, with_next=False)
            out += np.bincount(which, minlength=len(ngrams))
        return out

    def next_counts(self, context_ids: Sequence[int]) -> np.ndarray:
        """cnt(context w) for every id w: the shards' counts summed, plus the continuations across a cut."""
        out = np.zeros(len(self.vocab), dtype=np.int64)
        for s in self.shards:
            out += s.next_counts(context_ids)
        if len(self.shards) > 1:
            flat, offsets = flatten([list(context_ids)])
            _, nxt = self._across_cuts(flat, offsets, with_next=True)
            out += np.bincount(nxt, minlength=len(self.vocab))[:len(out)]
        return out

    def _across_cuts(self, flat: np.ndarray, offsets: np.ndarray, *, with_next: bool) -> tuple:
        """The occurrences of patterns ``flat[offsets[i]:offsets[i + 1]]`` in the whole stream that cross
        a cut between shards -- with ``with_next``, also those whose next token lies past a cut.
        Returns ``(pattern of each occurrence, the token after it or -1)``.

        The stream holds ``</s> <s>`` at every cut, so such an occurrence has one of the pattern's
        ``</s>`` right before a cut (and ``<s>`` after it, or the pattern's end with ``with_next``):
        the candidate starts are few -- none for a pattern without ``</s>`` -- and are read directly."""
        none = (np.zeros(0, np.int64), np.zeros(0, np.int64))
        cuts = self.offsets[1:-1]
        if not len(flat) or not len(cuts):
            return none
        lengths = np.diff(offsets)
        owner = np.repeat(np.arange(len(lengths)), lengths)
        rel = np.arange(len(flat)) - offsets[owner]
        nxt = np.append(flat[1:], -1)
        last = rel == lengths[owner] - 1
        nxt[last] = BOS_ID if with_next else -1  # past a pattern's end: the cut's <s>
        at = np.flatnonzero((flat == EOS_ID) & (nxt == BOS_ID))
        if not len(at):
            return none
        # Every (</s> of a pattern, cut) pair: the pattern would start there.
        pat = np.repeat(owner[at], len(cuts))
        start = (cuts[None, :] - (rel[at] + 1)[:, None]).ravel()
        span = lengths[pat] + (1 if with_next else 0)
        ok = (start >= 0) & (start + span <= self.n_tokens)
        pat, start = pat[ok], start[ok]
        key = np.unique(pat * (self.n_tokens + 1) + start)  # one occurrence may put two </s> at cuts
        pat, start = key // (self.n_tokens + 1), key % (self.n_tokens + 1)
        match = np.ones(len(pat), dtype=bool)
        for d in range(int(lengths[pat].max()) if len(pat) else 0):
            inside = d < lengths[pat]
            idx = np.flatnonzero(inside & match)
            match[idx] = self._tokens_at(start[idx] + d) == flat[offsets[pat[idx]] + d]
        pat, start = pat[match], start[match]
        if not with_next:
            return pat, np.full(len(pat), -1, dtype=np.int64)
        return pat, self._tokens_at(start + lengths[pat])

    def _tokens_at(self, positions: np.ndarray) -> np.ndarray:
        """Tokens at positions of the whole stream, read from the shards that hold them."""
        out = np.empty(len(positions), dtype=np.int64)
        k = np.searchsorted(self.offsets, positions, side="right") - 1
        for j in np.unique(k).tolist():
            sel = k == j
            out[sel] = np.asarray(self.shards[j].tokens[positions[sel] - self.offsets[j]], dtype=np.int64)
        return out

    # ------------------------------------------------------------------ the ∞-gram
    def score(self, text: EncodedText, *, max_n: int = 0) -> InfiniScores:
        """The ∞-gram at every predicted token of ``text``: the longest h' over all shards, its counts
        summed over the shards where it is that long (see the module's docstring)."""
        if max_n < 0:
            raise InputError(f"max_n must be >= 0 (0: unbounded), got {max_n}", fix="e.g. --max-n 5")
        tokens, pos = padded_stream(text)
        cap = max_n - 1 if max_n else -1
        T = len(tokens)
        L = np.full(T, -1, dtype=np.int64)
        ch = np.zeros(T, dtype=np.int64)
        chw = np.zeros(T, dtype=np.int64)
        n_with = np.zeros(T, dtype=np.int64)  # shards where h' (at its longest) occurs
        all_one = np.ones(T, dtype=bool)  # ... and each has a single continuation
        for s in self.shards:
            e, c, cw, one = s.search_stream(tokens, pos, cap)
            e = e.astype(np.int64)
            longer, same = e > L, e == L
            L = np.where(longer, e, L)
            ch = np.where(longer, c, np.where(same, ch + c, ch))
            chw = np.where(longer, cw, np.where(same, chw + cw, chw))
            occurs = c > 0
            n_with = np.where(longer, occurs.astype(np.int64), np.where(same, n_with + occurs, n_with))
            all_one = np.where(longer, one.astype(bool) | ~occurs,
                               np.where(same, all_one & (one.astype(bool) | ~occurs), all_one))
        # One continuation over the union: every shard's single continuation is w (chw = ch), or, where
        # none is w, all shards share the same other one -- read off each shard's first row of h'.
        sparse = all_one & (n_with >= 1) & ((n_with == 1) | (chw == ch))
        look = np.flatnonzero(all_one & (n_with >= 2) & (chw == 0) & (pos > 0))
        if len(look):
            sparse[look] = self._same_single_continuation(tokens, look, L[look])
        keep = pos > 0
        L, ch, chw, sparse = L[keep], ch[keep], chw[keep], sparse[keep]
        # With h' empty the rows are every indexed token, <s> included, which is never predicted.
        ch = np.where(L == 0, self.n_tokens - self.n_sentences, ch)
        return InfiniScores(eff_n=L + 1, cnt_h=ch, cnt_hw=chw, sparse=sparse)

    def _same_single_continuation(self, tokens: np.ndarray, at: np.ndarray, L: np.ndarray) -> np.ndarray:
        """Whether h' = ``tokens[at - L : at]`` is followed by one same token in every shard holding it
        (each shard holding it has a single continuation already)."""
        stream = tokens.astype(np.int64)
        first = np.full(len(at), -1, dtype=np.int64)
        same = np.ones(len(at), dtype=bool)
        for s in self.shards:
            # All patterns searched together (numpy): there may be many, and the C search takes one at a time.
            lo, hi, _ = sa_search.prefix_ranges(s.tokens, s.sa, stream, at - L, L)
            has = hi > lo
            nxt = np.full(len(at), -1, dtype=np.int64)
            if has.any():
                rows = np.asarray(s.sa[lo[has]], dtype=np.int64) + L[has]
                nxt[has] = np.asarray(s.tokens[rows], dtype=np.int64)
            same &= ~has | (first < 0) | (first == nxt)
            first = np.where(has & (first < 0), nxt, first)
        return same

    def next_runs(self, contexts: list) -> list:
        """Per context: ``(ids, counts)`` of its continuations, summed over the shards (histories hold
        no ``</s>``, so none crosses a cut)."""
        per_shard = [s.next_runs(contexts) for s in self.shards]
        out = []
        for j in range(len(contexts)):
            ids = np.concatenate([r[j][0] for r in per_shard])
            counts = np.concatenate([r[j][1] for r in per_shard])
            if not len(ids):
                out.append((ids, counts))
                continue
            uniq, inv = np.unique(ids, return_inverse=True)
            out.append((uniq, np.bincount(inv, weights=counts).astype(np.int64)))
        return out


def open_index(path: os.PathLike | str, *, mmap: bool = True):
    """An index file (:class:`InfiniIndex`) or a sharded index's folder or manifest (:class:`ShardedInfiniIndex`)."""
    p = Path(path)
    if p.is_dir() or p.name == MANIFEST:
        return ShardedInfiniIndex.load(p, mmap=mmap)
    return InfiniIndex.load(p, mmap=mmap)


def read_manifest(path: os.PathLike | str) -> tuple:
    """``(folder, manifest)`` of a sharded index, checked field by field."""
    p = Path(path)
    folder = p.parent if p.name == MANIFEST and not p.is_dir() else p
    mpath = folder / MANIFEST
    if not folder.exists():
        raise InputError("no such index folder", path=folder,
                         fix="build one with `ngramlm infini build TEXT -o FOLDER`")
    if not folder.is_dir():
        raise InputError("not a folder", path=folder, fix="a sharded index is a folder; an index file ends in .npz")
    if not mpath.is_file():
        raise InputError(f"no {MANIFEST}: not a sharded ∞-gram index, or its build did not finish", path=folder,
                         fix=REBUILD)
    try:
        m = json.loads(mpath.read_text(encoding="utf-8"))
    except (OSError, ValueError, RecursionError) as exc:
        raise InputError(f"not a readable manifest ({type(exc).__name__}: {exc})", path=mpath, fix=REBUILD) from None
    problem = _manifest_problem(m)
    if problem:
        raise InputError(f"corrupt manifest ({problem})", path=mpath, fix=REBUILD)
    return folder, m


def _manifest_problem(m) -> Optional[str]:
    if not isinstance(m, dict):
        return "not a JSON object"
    if m.get("format") != SHARDED_FORMAT or m.get("version") != SHARDED_VERSION:
        return f"format {m.get('format')!r} version {m.get('version')!r}, expected {SHARDED_FORMAT!r} {SHARDED_VERSION}"
    for key, kind in (("build", str), ("vocab", str), ("vocab_sha256", str), ("shards", list)):
        if not isinstance(m.get(key), kind):
            return f"{key!r} is missing or not a {kind.__name__}"
    if not m["shards"]:
        return "no shards"
    names = [m["vocab"]]
    for i, e in enumerate(m["shards"]):
        if not isinstance(e, dict) or not isinstance(e.get("file"), str) \
                or not all(isinstance(e.get(k), int) and not isinstance(e.get(k), bool) and e[k] >= 0
                           for k in ("tokens", "sentences")):
            return f"shard entry {i + 1} needs a file name and token and sentence counts"
        names.append(e["file"])
    for name in names:  # plain names inside the folder, never a path out of it
        if not name or Path(name).name != name or name in (".", ".."):
            return f"{name!r} is not a file name inside the folder"
    return None


# ----------------------------------------------------------------------------- building shards
def tokens_within(memory: int, width: int, *, overhead: int = SORT_OVERHEAD) -> int:
    """The most tokens one shard may hold so that its suffix sort, in a process whose own memory is
    ``overhead``, fits ``memory`` bytes."""
    per = sort_bytes_per_token(width, 1)  # int32 entries: a shard is kept below 2**31 bytes of tokens
    n = min((memory - overhead) // per, (2**31 - 1) // width)
    if n < MIN_SHARD_TOKENS:
        need = (overhead + MIN_SHARD_TOKENS * per) >> 20
        raise InputError(f"a memory budget of {memory >> 20} MB cannot hold the suffix sort of one shard "
                         f"(at least {need + 1} MB)", fix=f"use --memory {need + 1}M or more")
    return int(n)


def vocab_bytes(vocab: Vocab) -> bytes:
    """The vocabulary file's bytes, as :meth:`Vocab.save` writes them (its SHA-256 ties the shards to it)."""
    return (json.dumps(vocab.to_dict(), ensure_ascii=False) + "\n").encode("utf-8")


def check_folder(out: os.PathLike | str) -> Path:
    """An InputError unless ``out`` can take a sharded index: new, an empty folder, or one holding an
    earlier sharded index (replaced).  Any other folder is refused -- its files are not this build's
    to overwrite.  Called before any work, and again by :func:`prepare_folder`."""
    p = Path(out)
    if p.exists() and not p.is_dir():
        raise InputError("exists and is a file, not a folder", path=p,
                         fix="a sharded index is a folder: give a new folder name (or -o NAME.npz for one index file)")
    if p.is_dir() and any(p.iterdir()) and not (p / MANIFEST).is_file():
        raise InputError(f"the folder is not empty and holds no sharded index (no {MANIFEST})", path=p,
                         fix="give a new or empty folder")
    return p


def prepare_folder(out: os.PathLike | str) -> Path:
    """The output folder (see :func:`check_folder`), created."""
    p = check_folder(out)
    try:
        p.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise OutputError(f"cannot create the index folder ({exc.strerror or exc})", path=p,
                          fix="choose a writable place") from None
    return p


def write_shards(blocks: Iterable[EncodedText], out: Path, *, prefix: str, dtype, shard_tokens: int, build: str,
                 source: str, progress: Callable[[str], None] = lambda m: None) -> list:
    """Index the sentences of ``blocks`` (in order) as shards of at most ``shard_tokens`` padded tokens,
    each written to ``out/{prefix}-MMM.npz``; returns their manifest entries.  Only one shard's
    tokens and suffix array are in memory at a time."""
    entries: list = []
    parts: list = []
    filled = sents = 0

    def flush():
        nonlocal filled, sents
        tokens = np.concatenate(parts)  # a fresh array: the sort may swap its bytes in place
        parts.clear()
        name = f"{prefix}-{len(entries):03d}.npz"
        progress(f"{name}: suffix array over {len(tokens):,} tokens")
        sa = suffix_array(tokens)
        write_index_file(out / name, tokens, sa, {
            "format": FORMAT, "version": FORMAT_VERSION, "n_sentences": sents, "source": source, "vocab": None,
            "shard_of": {"build": build, "file": name}})
        entries.append({"file": name, "tokens": int(len(tokens)), "sentences": int(sents), "text": source})
        del tokens, sa
        filled = sents = 0

    for block in blocks:
        padded = padded_tokens(block, dtype)
        n = block.n_sentences
        # Sentence j of the block starts at bounds[j] of its padded tokens.
        bounds = np.append(np.asarray(block.starts[:-1], dtype=np.int64) + np.arange(n), len(padded))
        a = 0
        while a < n:
            b = int(np.searchsorted(bounds, bounds[a] + shard_tokens - filled, side="right")) - 1
            if b <= a:  # not one more sentence fits this shard
                if filled == 0:
                    raise InputError(f"a sentence of {int(bounds[a + 1] - bounds[a]):,} tokens is longer than one "
                                     f"shard may hold ({shard_tokens:,} tokens within --memory)",
                                     fix="raise --memory, or break the line into sentences")
                flush()
                continue
            parts.append(padded[bounds[a]:bounds[b]])
            filled += int(bounds[b] - bounds[a])
            sents += b - a
            a = b
        del padded
    if filled:
        flush()
    return entries


def encoded_blocks(enc: EncodedText, block_tokens: int) -> Iterable[EncodedText]:
    """An encoded text in blocks of whole sentences, about ``block_tokens`` ids each."""
    starts = np.asarray(enc.starts, dtype=np.int64)
    j = 0
    while j < len(starts) - 1:
        k = max(j + 1, int(np.searchsorted(starts, starts[j] + block_tokens, side="right")) - 1)
        lo, hi = int(starts[j]), int(starts[k])
        yield EncodedText(enc.ids[lo:hi], starts[j:k + 1] - lo)
        j = k


def write_manifest(out: Path, vocab: Vocab, entries: list, *, build: str, source: str, memory: int,
                   extra: Optional[dict] = None) -> dict:
    """``vocab.json`` and then ``manifest.json`` (last: its presence says the build finished); the
    shard files of an earlier build that this one does not name are removed."""
    raw = vocab_bytes(vocab)
    with atomic_writer(out / VOCAB_FILE) as fh:
        fh.write(raw)
    manifest = {"format": SHARDED_FORMAT, "version": SHARDED_VERSION, "build": build, "source": source,
                "tokens": int(sum(e["tokens"] for e in entries)),
                "sentences": int(sum(e["sentences"] for e in entries)), "memory": int(memory),
                "vocab": VOCAB_FILE, "vocab_sha256": hashlib.sha256(raw).hexdigest(), "shards": entries,
                **(extra or {})}
    with atomic_writer(out / MANIFEST) as fh:
        fh.write((json.dumps(manifest, indent=1, ensure_ascii=False) + "\n").encode("utf-8"))
    named = {e["file"] for e in entries}
    for old in out.glob(SHARD_GLOB):
        if old.name not in named:
            old.unlink(missing_ok=True)
    return manifest


def _check_tokens(n_words: int, paths) -> None:
    if n_words == 0:
        raise InputError("the text has no tokens", path=", ".join(map(str, paths)), fix="pass a non-empty text")


def build_sharded_from_files(paths: Sequence, out: os.PathLike | str, *, memory: int, tokenizer=None,
                             min_count: int = 1, unk_token: str = "<unk>", keep_empty: bool = True,
                             temp_dir: Optional[os.PathLike | str] = None,
                             progress: Optional[Callable[[str], None]] = None) -> dict:
    """Files (plain or gzip, or '-') indexed here as shards that each sort within ``memory`` bytes:
    tokenized once into a spilled id stream (as :meth:`InfiniIndex.build_from_files`), which is then
    read back in blocks and cut into shards.  Returns the manifest."""
    from corpora.tokenize import TokenizerSpec, make_tokenizer

    from ..builder.streaming import TempFolder, blocks_from_spool, spool_ids, spool_stdin

    spec = tokenizer or TokenizerSpec()
    say = progress or (lambda msg: None)
    folder_out = prepare_folder(out)
    source = ", ".join(map(str, paths))
    with TempFolder(temp_dir) as folder:
        sources = [spool_stdin(folder) if str(p) == "-" else os.fspath(p) for p in paths]
        say("tokenizing (ids spilled to the temp folder)")
        spool, words, freq = spool_ids(sources, make_tokenizer(spec), folder, plain=spec == TokenizerSpec(),
                                       keep_empty=keep_empty, block_bytes=tokenize_block_bytes(memory))
        _check_tokens(int(freq[1:].sum()), paths)
        vocab = Vocab(tokenizer=spec, min_count=min_count, unk_token=unk_token).fit_counts(
            dict(zip(words[1:], freq[1:].tolist())))
        dtype = token_dtype(len(vocab))
        shard_tokens = tokens_within(memory, np.dtype(dtype).itemsize)
        remap = _remap(words, vocab, dtype)
        del words, freq
        release_freed_memory()
        build = uuid.uuid4().hex
        entries = write_shards(blocks_from_spool(spool, remap, block_tokens=max(1, shard_tokens // BLOCK_SHARE)),
                               folder_out, prefix="shard-00000", dtype=dtype, shard_tokens=shard_tokens, build=build,
                               source=source, progress=say)
    return write_manifest(folder_out, vocab, entries, build=build, source=source, memory=memory)


def build_sharded_from_encoded(enc: EncodedText, vocab: Vocab, out: os.PathLike | str, *, memory: int,
                               source: str = "", progress: Optional[Callable[[str], None]] = None) -> dict:
    """An encoded text (a named corpus, in memory) indexed as shards that each sort within ``memory``."""
    folder_out = prepare_folder(out)
    dtype = token_dtype(len(vocab))
    shard_tokens = tokens_within(memory, np.dtype(dtype).itemsize)
    build = uuid.uuid4().hex
    entries = write_shards(encoded_blocks(enc, max(1, shard_tokens // BLOCK_SHARE)), folder_out, prefix="shard-00000",
                           dtype=dtype, shard_tokens=shard_tokens, build=build, source=source,
                           progress=progress or (lambda m: None))
    return write_manifest(folder_out, vocab, entries, build=build, source=source, memory=memory)


def _remap(words: list, vocab: Vocab, dtype) -> np.ndarray:
    """Provisional spool ids (0: a line end) -> the vocabulary's ids, in the shards' dtype."""
    remap = np.fromiter((vocab.stoi_.get(w, UNK_ID) for w in words), dtype=dtype, count=len(words))
    remap[0] = EOS_ID
    return remap


# ----------------------------------------------------------------------------- on a Dask cluster
def shard_word_counts(shard, spec, memory: int, temp_dir: Optional[str] = None) -> dict:
    """A Dask task: the word counts of one byte range of the text (tokenized as the single build does)."""
    from corpora.tokenize import TokenizerSpec, make_tokenizer

    from ..builder.streaming import TempFolder, spool_ids

    with TempFolder(temp_dir) as folder:
        _, words, freq = spool_ids([shard], make_tokenizer(spec), folder, plain=spec == TokenizerSpec(),
                                   block_bytes=tokenize_block_bytes(memory))
    return dict(zip(words[1:], freq[1:].tolist()))


def build_shard(shard, number: int, vocab: Vocab, spec, out: str, memory: int, build: str,
                temp_dir: Optional[str] = None) -> list:
    """A Dask task: one byte range of the text tokenized again, encoded with the shared vocabulary and
    written as shards ``shard-{number}-MMM.npz`` of ``out`` (each sorting within ``memory``); returns
    their manifest entries.  The same range gives the same files, so a rerun task is harmless."""
    from corpora.tokenize import TokenizerSpec, make_tokenizer

    from ..builder.streaming import TempFolder, blocks_from_spool, spool_ids

    dtype = token_dtype(len(vocab))
    shard_tokens = tokens_within(memory, np.dtype(dtype).itemsize, overhead=DASK_WORKER_OVERHEAD)
    with TempFolder(temp_dir) as folder:
        spool, words, _ = spool_ids([shard], make_tokenizer(spec), folder, plain=spec == TokenizerSpec(),
                                    block_bytes=tokenize_block_bytes(memory))
        remap = _remap(words, vocab, dtype)
        del words
        release_freed_memory()
        path, start, end, _line = shard
        where = f"{path} bytes {start}-{'end' if end is None else end}"
        return write_shards(blocks_from_spool(spool, remap, block_tokens=max(1, shard_tokens // BLOCK_SHARE)),
                            Path(out), prefix=f"shard-{number:05d}", dtype=dtype, shard_tokens=shard_tokens,
                            build=build, source=where)


def build_on_cluster(client, paths: Sequence, out: os.PathLike | str, *, memory: int, shard_bytes: int,
                     tokenizer=None, min_count: int = 1, unk_token: str = "<unk>",
                     temp_dir: Optional[str] = None, progress: Optional[Callable[[str], None]] = None) -> dict:
    """The sharded build on ``client``'s workers (futures only): word counts per byte range, summed here
    into the vocabulary, scattered; then each range's shards written by a worker into ``out``, which
    every worker must reach at the same path.  Returns the manifest."""
    from distributed import as_completed

    from corpora.tokenize import TokenizerSpec

    from ..builder.cluster import shards_of

    spec = tokenizer or TokenizerSpec()
    say = progress or (lambda msg: None)
    for p in paths:
        if str(p) == "-" or not Path(p).is_file():
            raise InputError("a Dask build reads files that every worker can open", path=str(p),
                             fix="save standard input to a file on shared storage and pass that")
    folder_out = prepare_folder(out).resolve()
    ranges = shards_of([os.path.abspath(p) for p in paths], shard_bytes=shard_bytes)
    _check_tokens(len(ranges), paths)
    n_workers = len(client.scheduler_info().get("workers", {})) or 1
    say(f"{len(ranges)} text shard(s) on {n_workers} Dask worker(s)")
    say("vocabulary pass (on the workers)")
    futures = client.map(shard_word_counts, ranges, spec=spec, memory=memory, temp_dir=temp_dir, pure=False)
    total: Counter = Counter()
    for fut in as_completed(futures):
        total.update(fut.result())
        fut.release()
    _check_tokens(sum(total.values()), paths)
    vocab = Vocab(tokenizer=spec, min_count=min_count, unk_token=unk_token).fit_counts(total)
    del total, futures
    # A budget too small is refused here, once, not by every task.
    tokens_within(memory, np.dtype(token_dtype(len(vocab))).itemsize, overhead=DASK_WORKER_OVERHEAD)
    build = uuid.uuid4().hex
    say("suffix arrays (on the workers)")
    vocab_f = client.scatter(vocab, broadcast=True)
    futures = client.map(build_shard, ranges, list(range(len(ranges))), vocab=vocab_f, spec=spec,
                         out=str(folder_out), memory=memory, build=build, temp_dir=temp_dir, pure=False)
    number = {f.key: i for i, f in enumerate(futures)}
    results: list = [None] * len(futures)
    done = 0
    for fut in as_completed(futures):
        results[number[fut.key]] = fut.result()
        fut.release()
        done += 1
        say(f"text shard {done}/{len(ranges)} indexed")
    entries = [e for r in results for e in r]
    return write_manifest(folder_out, vocab, entries, build=build, source=", ".join(map(str, paths)), memory=memory,
                          extra={"text_shards": len(ranges), "shard_bytes": int(shard_bytes)})
