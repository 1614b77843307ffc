"""The ∞-gram: an n-gram model of unbounded order on a suffix array (Liu et al., 2024, "Infini-gram").

A fixed-order model backs off because most long n-grams were never seen (the V^n wall).  The
∞-gram turns the question around: at every position it uses the *longest* suffix h' of the
history that does occur in the training text, and estimates

    P∞(w | h) = cnt(h' w) / cnt(h')

with counts read off a suffix array of the training tokens.  ``|h'| + 1`` is the *effective n* of
the position.  P∞ is zero where h' was never followed by w, so on its own it is not a usable
language model; interpolated with a smoothed model (MKN) or a neural one it is.

The index is the padded training stream ``<s> w1 .. wm </s> <s> ...`` (tokens in the narrowest
unsigned dtype) and its suffix array (int32 below 2**31 tokens), built by ``pydivsufsort`` (the
``infini`` extra) on the big-endian bytes of the tokens (byte order = token order) -- 6 bytes a token for a vocabulary
below 65,536.  A history never contains ``</s>``, so no match crosses a sentence end.  Queries run
in C (``ngramlm._fast.tokens``): a binary search per pattern, and for a whole test stream the longest
match at every position, amortised (the effective n grows by at most one a token).  Without the
compiled extension the same searches run vectorised in numpy (``ngramlm.infini.sa_search``).

The suffix sort holds 10 bytes a token (uint16 tokens; 20 with uint32): the tokens, byte-swapped in
place to serve as the sorted bytes, and libdivsufsort's array over those bytes, which is then
compacted in place and shrunk (:func:`suffix_array`).  A text whose sort would not fit a budget is
indexed in shards (:mod:`ngramlm.infini.sharded`), whose counts sum to this index's.
"""
from __future__ import annotations

import ctypes
import json
import os
import sys
import zipfile
from dataclasses import dataclass
from pathlib import Path
from typing import Optional, Sequence

import numpy as np

from corpora.errors import InputError
from corpora.textio import atomic_writer
from corpora.vocab import BOS_ID, EOS_ID, UNK_ID, EncodedText, Vocab

from ..counts import padded_stream

FORMAT = "ngramlm.infini.index"
FORMAT_VERSION = 1
# Suffix-array entries filtered per step of the in-place compaction (4 MB of int32): its temporaries
# stay small next to the array.
_COMPACT_CHUNK = 1 << 20


def sort_bytes_per_token(width: int, n_tokens: int) -> int:
    """Peak bytes a token of :func:`suffix_array` over ``n_tokens`` tokens of ``width`` bytes: the
    tokens plus libdivsufsort's array over their ``width * n`` bytes (10 for uint16, 20 for uint32)."""
    return width + width * (4 if width * n_tokens < 2**31 else 8)


def token_dtype(vocab_size: int):
    """The narrowest unsigned dtype that holds every id of a vocabulary."""
    return np.uint16 if vocab_size <= np.iinfo(np.uint16).max + 1 else np.uint32


def suffix_array(tokens: np.ndarray) -> np.ndarray:
    """The suffix array of ``tokens`` (uint16/uint32), int32 below 2**31 tokens, else int64.

    libdivsufsort sorts bytes; the tokens' big-endian bytes sort as the tokens do, and the suffixes
    at offsets that are not a multiple of the width are dropped.  To keep the peak at
    :func:`sort_bytes_per_token`, the tokens are byte-swapped *in place* to serve as those bytes
    (and swapped back), the sort writes into an array this function owns, and the dropping is done
    in place in chunks before the array is shrunk -- the plain way (a big-endian copy, then
    ``sa[sa % w == 0] // w``) peaked at 22 bytes a token."""
    try:
        import pydivsufsort
    except ImportError:  # an optional part: building an index needs it, loading one does not
        raise InputError("building an ∞-gram index needs pydivsufsort (its suffix arrays), which is not "
                         "installed", fix="pip install 'ngramlm[infini]'") from None
    width = tokens.dtype.itemsize
    n = len(tokens)
    if n == 0:
        return np.zeros(0, dtype=np.int32)
    release_freed_memory()  # what the steps before left in the heap, before the largest array
    in_place = tokens.flags.c_contiguous and tokens.flags.writeable and tokens.flags.owndata
    swap = sys.byteorder == "little"
    if in_place:
        raw_tokens = tokens
    else:  # a view or a mapped file: sort a copy, never the caller's array
        raw_tokens = np.array(tokens, copy=True, order="C")
    if swap:
        raw_tokens.byteswap(inplace=True)
    try:
        sa = _divsufsort(raw_tokens.view(np.uint8), pydivsufsort)
    finally:
        if swap and in_place:
            tokens.byteswap(inplace=True)
    del raw_tokens
    if width > 1:
        kept = 0  # entries kept so far; always <= the read position, so writing in place is safe
        for a in range(0, len(sa), _COMPACT_CHUNK):
            chunk = sa[a:a + _COMPACT_CHUNK]
            keep = chunk[chunk % width == 0] // width  # a copy: the write below may overlap the chunk
            sa[kept:kept + len(keep)] = keep
            kept += len(keep)
        assert kept == n
        del chunk, keep  # no view may outlive the shrink below
        want = np.int32 if n < 2**31 else np.int64
        if sa.dtype == want and sa.flags.owndata:
            sa.resize(n, refcheck=False)  # realloc: the tail goes back to the system
        else:
            sa = sa[:n].astype(want)
    return sa


def _divsufsort(raw: np.ndarray, pydivsufsort) -> np.ndarray:
    """libdivsufsort over ``raw`` into an array numpy owns (so it can be shrunk in place); through
    pydivsufsort's own call where its library handles are not where this version keeps them."""
    n = len(raw)
    try:
        from pydivsufsort.dll import libdivsufsort, libdivsufsort64
    except (ImportError, AttributeError, OSError):
        return pydivsufsort.divsufsort(raw)
    if n < 2**31:
        sa = np.empty(n, dtype=np.int32)
        rc = libdivsufsort.divsufsort(raw.ctypes.data_as(ctypes.c_void_p), sa.ctypes.data_as(ctypes.c_void_p),
                                      ctypes.c_int32(n))
    else:
        sa = np.empty(n, dtype=np.int64)
        rc = libdivsufsort64.divsufsort64(raw.ctypes.data_as(ctypes.c_void_p), sa.ctypes.data_as(ctypes.c_void_p),
                                          ctypes.c_int64(n))
    if rc:
        raise MemoryError(f"libdivsufsort failed ({rc}) on {n:,} bytes")
    return sa


def padded_tokens(text: EncodedText, dtype) -> np.ndarray:
    """``<s> w1 .. wm </s>`` per sentence in ``dtype`` (``padded_stream``'s tokens without its int64
    arrays, which would triple the memory of a build)."""
    ids = np.asarray(text.ids).astype(dtype)
    return np.insert(ids, np.asarray(text.starts[:-1], dtype=np.int64), np.asarray(BOS_ID, dtype=dtype))


def write_index_file(path: os.PathLike | str, tokens: np.ndarray, sa: np.ndarray, meta: dict) -> None:
    """One uncompressed ``.npz`` (JSON metadata, tokens, suffix array), written atomically."""
    from ..io.native import write_npz

    with atomic_writer(path) as fh:
        write_npz(fh, {"meta": np.frombuffer(json.dumps(meta, ensure_ascii=False).encode("utf-8"), dtype=np.uint8),
                       "tokens": tokens, "sa": sa})


def read_index_file(path: os.PathLike | str, *, mmap: bool = True) -> tuple:
    """``(meta, tokens, sa)`` of an index file (a whole index or one shard of a sharded one); with
    ``mmap`` the arrays are mapped (O(1), pages on demand).  Any unreadable file is an InputError."""
    from ..io.native import map_member

    p = Path(path)
    if p.is_dir() and (p / "manifest.json").is_file():
        raise InputError("a sharded ∞-gram index (a folder with manifest.json), not an index file", path=p,
                         fix="open it with ngramlm.infini.sharded.open_index (the `ngramlm infini` commands take "
                             "either)")
    if not p.is_file():
        raise InputError("no such index file" if not p.exists() else "not a file", path=p,
                         fix="build one with `ngramlm infini build TEXT -o INDEX.npz`")
    try:
        with zipfile.ZipFile(p) as zf:
            infos = {i.filename: i for i in zf.infolist()}
            if not {"meta.npy", "tokens.npy", "sa.npy"} <= set(infos):
                raise ValueError("members meta, tokens and sa are missing")
            with zf.open("meta.npy") as fh:
                meta = json.loads(np.lib.format.read_array(fh, allow_pickle=False).tobytes().decode("utf-8"))
            if not isinstance(meta, dict) or meta.get("format") != FORMAT or meta.get("version") != FORMAT_VERSION:
                raise ValueError(f"format {meta.get('format')!r} version {meta.get('version')!r}"
                                 if isinstance(meta, dict) else "no metadata")
            if mmap:
                size = p.stat().st_size
                with open(p, "rb") as fh:
                    tokens = map_member(fh, infos["tokens.npy"], size)
                    sa = map_member(fh, infos["sa.npy"], size)
            else:
                with zf.open("tokens.npy") as fh:
                    tokens = np.lib.format.read_array(fh, allow_pickle=False)
                with zf.open("sa.npy") as fh:
                    sa = np.lib.format.read_array(fh, allow_pickle=False)
    except InputError:
        raise
    except Exception as exc:  # noqa: BLE001 -- any unreadable file is one clear error
        raise InputError(f"not a readable ∞-gram index ({type(exc).__name__}: {exc})", path=p,
                         fix="rebuild it with `ngramlm infini build`") from None
    if tokens.dtype not in (np.uint16, np.uint32) or sa.dtype not in (np.int32, np.int64) \
            or tokens.ndim != 1 or sa.shape != tokens.shape:
        raise InputError(f"corrupt ∞-gram index (tokens {tokens.dtype}{tokens.shape}, sa {sa.dtype}{sa.shape})",
                         path=p, fix="rebuild it with `ngramlm infini build`")
    return meta, tokens, sa


def _fast():
    """The suffix-array searches: compiled where the extension is built, else their numpy twins
    (:mod:`ngramlm.infini.sa_search`: the same results, slower)."""
    from .. import accel

    if accel.fast is None:
        from . import sa_search

        return sa_search
    return accel.fast


@dataclass
class InfiniScores:
    """Per predicted token of a text: effective n, cnt(h'), cnt(h' w), and whether h' has one continuation."""

    eff_n: np.ndarray  # int: |h'| + 1
    cnt_h: np.ndarray
    cnt_hw: np.ndarray
    sparse: np.ndarray  # bool: a single distinct next token after h' in the training text

    @property
    def prob(self) -> np.ndarray:
        return self.cnt_hw / np.maximum(self.cnt_h, 1)

    @property
    def log10_prob(self) -> np.ndarray:
        with np.errstate(divide="ignore"):
            return np.log10(self.prob)


class InfiniQueries:
    """The ∞-gram's queries in terms of a few primitives -- ``count_ids``, ``next_counts``,
    ``score`` and ``next_runs`` -- so that one index (:class:`InfiniIndex`) and a sharded one
    (:class:`ngramlm.infini.sharded.ShardedInfiniIndex`, whose counts are sums over its shards)
    answer every query the same way.  Subclasses set ``vocab``, ``n_sentences``, ``source`` and
    ``n_tokens``."""

    vocab: Vocab
    n_sentences: int
    source: str

    @property
    def n_tokens(self) -> int:
        raise NotImplementedError

    def count_ids(self, ngrams: Sequence[Sequence[int]]) -> np.ndarray:
        raise NotImplementedError

    def next_counts(self, context_ids: Sequence[int]) -> np.ndarray:
        raise NotImplementedError

    def score(self, text: EncodedText, *, max_n: int = 0) -> InfiniScores:
        raise NotImplementedError

    def next_runs(self, contexts: list) -> list:
        raise NotImplementedError

    # ------------------------------------------------------------------ counting
    def _ids(self, words: Sequence[str]) -> list:
        bos, eos = self.vocab.bos_token, self.vocab.eos_token
        out = []
        for w in words:
            out.append(BOS_ID if w == bos else EOS_ID if w == eos else self.vocab.stoi_.get(w, UNK_ID))
        return out

    def count(self, ngram: Sequence[str]) -> int:
        """How often ``ngram`` (words; ``<s>``/``</s>`` allowed) occurs in the training text.  A word the
        vocabulary does not have never occurs (words cut off by ``--min-count`` count as ``<unk>``)."""
        return int(self.count_words([ngram])[0])

    def count_words(self, ngrams: Sequence[Sequence[str]]) -> np.ndarray:
        known = set(self.vocab.stoi_) | {self.vocab.bos_token, self.vocab.eos_token}
        ids = [self._ids(g) for g in ngrams]
        out = self.count_ids(ids)
        out[[i for i, g in enumerate(ngrams) if any(w not in known for w in g)]] = 0
        return out

    # ------------------------------------------------------------------ the ∞-gram
    def longest_context(self, context_ids: Sequence[int]) -> int:
        """Length of the longest suffix of ``context_ids`` that occurs in the training text."""
        ids = list(context_ids)
        for L in range(len(ids), 0, -1):
            if self.count_ids([ids[len(ids) - L:]])[0] > 0:
                return L
        return 0

    def next_probs(self, context: Sequence[str]) -> np.ndarray:
        """P∞(. | context) over all ids (``context`` may start with ``<s>``); sums to 1 over predicted types."""
        ids = self._ids(context)
        if self.vocab.bos_token in context:
            ids = ids[len(ids) - 1 - ids[::-1].index(BOS_ID):]
        L = self.longest_context(ids)
        cnt = self.next_counts(ids[len(ids) - L:]).astype(np.float64)
        cnt[BOS_ID] = 0.0  # <s> follows only </s>, which no history holds; with h' empty, drop it
        return cnt / cnt.sum()

    def accuracy_by_n(self, text: EncodedText, scores: Optional[InfiniScores] = None, *, buckets: int = 10,
                      per_bucket: int = 5000, seed: int = 0, rows_per_bucket: int = 20_000_000) -> list:
        """Next-token accuracy of the ∞-gram by effective n: is the word the most frequent continuation of
        h' in the training text?  Estimated on up to ``per_bucket`` random positions per effective n
        (the last bucket is ``buckets`` and more); rows ``{"effective_n", "positions", "sampled",
        "accuracy"}``.  Each sampled position reads all cnt(h') continuations of its h': on a large
        index a short h' has millions, so a bucket stops once it has read ``rows_per_bucket`` rows
        (positions in random order, at least one; "sampled" says how many were used), and each
        distinct h' is read once."""
        s = scores if scores is not None else self.score(text)
        tokens, pos = padded_stream(text)
        t_pred = np.flatnonzero(pos > 0)
        eff = np.minimum(s.eff_n, buckets)
        rng = np.random.default_rng(seed)
        plan = []  # per bucket: (k, positions, the sampled positions used, their h')
        for k in range(1, buckets + 1):
            idx = np.flatnonzero(eff == k)
            if not len(idx):
                continue
            pick = rng.choice(idx, min(per_bucket, len(idx)), replace=False)
            used, read, seen = [], 0, set()
            for j in pick:
                if used and read >= rows_per_bucket:
                    break
                t = t_pred[j]
                L = int(s.eff_n[j]) - 1
                h = tuple(tokens[t - L:t].tolist())
                if h not in seen:
                    seen.add(h)
                    read += int(s.cnt_h[j])
                used.append((j, h))
            plan.append((k, len(idx), used))
        # The most frequent continuation of every distinct h', its rows found in one batch of searches.
        best = self._most_frequent_next(sorted({h for _, _, used in plan for _, h in used}))
        rows = []
        for k, n_positions, used in plan:
            right = sum(int(best[h] == tokens[t_pred[j]]) for j, h in used)
            rows.append({"effective_n": k, "positions": int(n_positions), "sampled": len(used),
                         "accuracy": right / len(used)})
        return rows

    def _most_frequent_next(self, contexts: list) -> dict:
        """For each context (a tuple of ids): the id that most often follows it in the training text
        (the smallest on ties, never ``<s>``; 0 where nothing follows), as ``argmax(next_counts)``."""
        out = {}
        for c, (ids, counts) in zip(contexts, self.next_runs(contexts)):
            out[c] = int(ids[int(np.argmax(counts))]) if len(ids) else 0
        return out


class InfiniIndex(InfiniQueries):
    """A suffix array over an encoded training text, with the vocabulary that encoded it."""

    def __init__(self, tokens: np.ndarray, sa: np.ndarray, vocab: Vocab, *, n_sentences: int,
                 source: str = "") -> None:
        self.tokens, self.sa, self.vocab = tokens, sa, vocab
        self.n_sentences = int(n_sentences)
        self.source = source

    # ------------------------------------------------------------------ building and files
    @classmethod
    def build(cls, text: EncodedText, vocab: Vocab, *, source: str = "") -> "InfiniIndex":
        tokens = padded_tokens(text, token_dtype(len(vocab)))
        return cls(tokens, suffix_array(tokens), vocab, n_sentences=text.n_sentences, source=source)

    @classmethod
    def build_from_files(cls, paths: Sequence, *, tokenizer=None, min_count: int = 1, unk_token: str = "<unk>",
                         keep_empty: bool = True, temp_dir: Optional[os.PathLike | str] = None,
                         progress=None, memory: Optional[int] = None) -> "InfiniIndex":
        """Index text files (plain or gzip) without holding their sentences: the text is tokenized
        once into a spilled id stream (as ``train --memory`` does), and only the token array and the
        suffix array are ever in memory.  With ``memory`` (bytes), an index whose suffix sort would
        not fit is refused before the sort, naming the sharded build that does fit."""
        from corpora.tokenize import TokenizerSpec, make_tokenizer

        from ..builder.streaming import TempFolder, spool_ids, spool_stdin

        spec = tokenizer or TokenizerSpec()
        say = progress or (lambda msg: None)
        with TempFolder(temp_dir) as folder:
            sources = [spool_stdin(folder) if str(p) == "-" else os.fspath(p) for p in paths]
            say("tokenizing (ids spilled to the temp folder)")
            spool, words, freq = spool_ids(sources, make_tokenizer(spec), folder, plain=spec == TokenizerSpec(),
                                           keep_empty=keep_empty, block_bytes=tokenize_block_bytes(memory))
            if int(freq[1:].sum()) == 0:
                raise InputError("the text has no tokens", path=", ".join(map(str, paths)),
                                 fix="pass a non-empty text")
            vocab = Vocab(tokenizer=spec, min_count=min_count, unk_token=unk_token).fit_counts(
                dict(zip(words[1:], freq[1:].tolist())))
            dtype = token_dtype(len(vocab))
            n_padded = int(freq.sum()) + int(freq[0])  # ids (words and line ends) and a <s> a line
            if memory is not None:
                check_sort_fits(n_padded, np.dtype(dtype).itemsize, memory)
            remap = np.fromiter((vocab.stoi_.get(w, UNK_ID) for w in words), dtype=dtype, count=len(words))
            remap[0] = EOS_ID
            release_freed_memory()  # the tokenizing pass's freed blocks, before the arrays of the sort
            ids = read_remapped(spool, remap)
        starts = np.concatenate([[0], np.flatnonzero(ids == EOS_ID)[:-1] + 1])
        say(f"suffix array over {len(ids) + len(starts):,} tokens")
        tokens = np.insert(ids, starts, np.asarray(BOS_ID, dtype=dtype))
        del ids
        return cls(tokens, suffix_array(tokens), vocab, n_sentences=len(starts), source=", ".join(map(str, paths)))

    @property
    def n_tokens(self) -> int:
        return len(self.tokens)

    @property
    def nbytes(self) -> int:
        return self.tokens.nbytes + self.sa.nbytes

    def save(self, path: os.PathLike | str) -> None:
        """One uncompressed ``.npz`` (tokens, suffix array, JSON metadata), written atomically."""
        write_index_file(path, self.tokens, self.sa, {
            "format": FORMAT, "version": FORMAT_VERSION, "n_sentences": self.n_sentences, "source": self.source,
            "vocab": self.vocab.to_dict()})

    @classmethod
    def load(cls, path: os.PathLike | str, *, mmap: bool = True) -> "InfiniIndex":
        """Read an index; with ``mmap`` the token and suffix arrays are mapped (O(1), pages on demand)."""
        p = Path(path)
        meta, tokens, sa = read_index_file(p, mmap=mmap)
        if meta.get("shard_of"):
            raise InputError("one shard of a sharded ∞-gram index, not a whole index", path=p,
                             fix=f"open its folder {p.parent} (ngramlm.infini.sharded.open_index, or the "
                                 "`ngramlm infini` commands)")
        vocab = Vocab.from_dict(meta.get("vocab"), path=str(p))
        return cls(tokens, sa, vocab, n_sentences=int(meta.get("n_sentences", 0)), source=meta.get("source", ""))

    # ------------------------------------------------------------------ counting
    def count_ids(self, ngrams: Sequence[Sequence[int]]) -> np.ndarray:
        """Occurrences of many id sequences at once (an empty one counts every token)."""
        return self.count_flat(*flatten(ngrams))

    def count_flat(self, flat: np.ndarray, offsets: np.ndarray) -> np.ndarray:
        """Occurrences of each pattern ``flat[offsets[i]:offsets[i + 1]]`` (:func:`flatten`'s form)."""
        return _fast().sa_count_many(self.tokens, self.sa, flat if len(flat) else np.zeros(1, np.int64), offsets)

    def next_counts(self, context_ids: Sequence[int]) -> np.ndarray:
        """cnt(context w) for every id w (length V)."""
        lo, hi = _fast().sa_range(self.tokens, self.sa, np.asarray(context_ids, dtype=np.int64))
        L = len(context_ids)
        at = np.asarray(self.sa[lo:hi], dtype=np.int64) + L
        at = at[at < len(self.tokens)]
        return np.bincount(np.asarray(self.tokens[at], dtype=np.int64), minlength=len(self.vocab))

    # ------------------------------------------------------------------ the ∞-gram
    def search_stream(self, tokens: np.ndarray, pos: np.ndarray, max_len: int) -> tuple:
        """The raw searches of :meth:`score` at every position of a padded stream (``<s>`` included):
        ``(|h'|, cnt(h'), cnt(h' w), h' has one continuation)``; ``max_len`` -1 is unbounded.  With h'
        empty cnt(h') is every indexed token."""
        return _fast().sa_infini(self.tokens, self.sa, tokens.astype(np.int64), pos.astype(np.int64), max_len)

    def score(self, text: EncodedText, *, max_n: int = 0) -> InfiniScores:
        """The ∞-gram at every predicted token of ``text`` (encoded with this index's vocabulary).
        ``max_n`` > 0 caps the effective n (an n-gram-order sweep); 0 leaves it unbounded."""
        if max_n < 0:
            raise InputError(f"max_n must be >= 0 (0: unbounded), got {max_n}", fix="e.g. --max-n 5")
        tokens, pos = padded_stream(text)
        eff, ch, chw, one = self.search_stream(tokens, pos, max_n - 1 if max_n else -1)
        keep = pos > 0
        eff, ch, chw, one = eff[keep], ch[keep], chw[keep], one[keep]
        # With h' empty the rows are every indexed token, <s> included, which is never predicted.
        empty = eff == 0
        ch = np.where(empty, len(self.tokens) - self.n_sentences, ch)
        return InfiniScores(eff_n=eff.astype(np.int64) + 1, cnt_h=ch, cnt_hw=chw, sparse=one.astype(bool))

    def ranges(self, stream: np.ndarray, starts: np.ndarray, lengths: np.ndarray) -> tuple:
        """``(lo, hi)``: the suffix-array rows of each pattern ``stream[starts[i]:starts[i] + lengths[i]]``
        (lo == hi where it does not occur)."""
        stream = np.asarray(stream, dtype=np.int64)
        sa_impl = _fast()
        if hasattr(sa_impl, "prefix_ranges"):  # numpy: all patterns searched together
            lo, hi, _ = sa_impl.prefix_ranges(self.tokens, self.sa, stream if len(stream) else np.zeros(1, np.int64),
                                              np.asarray(starts, dtype=np.int64), np.asarray(lengths, dtype=np.int64))
            return lo, hi
        rng = [sa_impl.sa_range(self.tokens, self.sa, stream[a:a + L]) for a, L in zip(starts, lengths)]
        if not rng:
            return np.zeros(0, np.int64), np.zeros(0, np.int64)
        lo, hi = (np.array(x, dtype=np.int64) for x in zip(*rng))
        return lo, hi

    def next_runs(self, contexts: list) -> list:
        """Per context (a tuple of ids): ``(ids, counts)`` of the tokens that follow it in the training
        text, ids ascending, ``<s>`` left out.  The rows of a context are sorted by their next token,
        so the counts are the lengths of its runs (no sort, no length-V array)."""
        if not contexts:
            return []
        lengths = np.fromiter(map(len, contexts), dtype=np.int64, count=len(contexts))
        offsets = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64)
        flat = np.fromiter((i for c in contexts for i in c), dtype=np.int64, count=int(offsets[-1]))
        lo, hi = self.ranges(flat, offsets[:-1], lengths)
        out = []
        n = len(self.tokens)
        for a, b, L in zip(lo.tolist(), hi.tolist(), lengths.tolist()):
            at = np.asarray(self.sa[a:b], dtype=np.int64) + L
            nxt = np.asarray(self.tokens[at[at < n]], dtype=np.int64)
            nxt = nxt[nxt != BOS_ID]  # never a continuation of a history (nor predicted)
            if not len(nxt):
                out.append((np.zeros(0, np.int64), np.zeros(0, np.int64)))
                continue
            starts = np.concatenate([[0], np.flatnonzero(nxt[1:] != nxt[:-1]) + 1])
            out.append((nxt[starts], np.diff(np.append(starts, len(nxt)))))
        return out


def flatten(ngrams: Sequence[Sequence[int]]) -> tuple:
    """``(flat, offsets)``: id sequences as one int64 array and where each starts (and the last ends)."""
    lengths = np.fromiter(map(len, ngrams), dtype=np.int64, count=len(ngrams))
    offsets = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64)
    flat = np.fromiter((i for g in ngrams for i in g), dtype=np.int64, count=int(offsets[-1]))
    return flat, offsets


def read_remapped(spool: os.PathLike | str, remap: np.ndarray, chunk: int = 1 << 22) -> np.ndarray:
    """The spilled int32 id stream renumbered through ``remap``, read in chunks: the narrow result
    is the only array of the text's size (reading it whole first held 4 bytes a token more)."""
    n = os.path.getsize(spool) // 4
    out = np.empty(n, dtype=remap.dtype)
    with open(spool, "rb") as fh:
        for a in range(0, n, chunk):
            raw = np.fromfile(fh, dtype=np.int32, count=min(chunk, n - a))
            out[a:a + len(raw)] = remap[raw]
    return out


def release_freed_memory() -> None:
    """Hand the heap's freed pages back to the system (glibc's ``malloc_trim``).  The tokenizing
    pass frees its blocks, but the allocator kept about 75 MB of them resident into the suffix
    sort (measured at 16 M tokens); elsewhere this does nothing."""
    try:
        ctypes.CDLL("libc.so.6").malloc_trim(0)
    except (OSError, AttributeError):
        pass


def tokenize_block_bytes(memory: Optional[int]) -> int:
    """Bytes of text the tokenizing pass reads at a time: 16 MB (about 150 MB resident with the tokens
    and ids made from them, measured), less under a small budget so that the pass fits it too."""
    if memory is None:
        return 16 << 20
    return int(min(16 << 20, max(1 << 20, (memory - SORT_OVERHEAD) // 8)))


def check_sort_fits(n_tokens: int, width: int, memory: int) -> None:
    """An InputError before the sort when one suffix array over ``n_tokens`` would not fit ``memory``."""
    need = n_tokens * sort_bytes_per_token(width, n_tokens) + SORT_OVERHEAD
    if need > memory:
        raise InputError(f"one suffix array over {n_tokens:,} tokens needs about {need / 2**30:.2f} GB to sort, "
                         f"over --memory {memory / 2**30:.2f} GB",
                         fix="write a sharded index, each shard sorted within --memory: -o FOLDER (a path not "
                             f"ending in .npz); or raise --memory to {(need >> 30) + 1}G")


# What a build holds besides its arrays: interpreter, numpy, the vocabulary, buffers (measured:
# about 70 MB resident before the first array of a 4 M-token build).
SORT_OVERHEAD = 96 << 20


# ----------------------------------------------------------------------------- mixtures
def tune_lambdas(scores: InfiniScores, other_log10: np.ndarray, *, grid: int = 101) -> tuple:
    """The mixture weights of the ∞-gram (one where its estimate is sparse, one where it is not, as the
    paper does) that maximise the likelihood of a held-out text; returns (lam_sparse, lam_dense)."""
    p_inf = scores.prob
    p_other = 10.0 ** other_log10
    lams = np.linspace(0.0, 0.99, grid)
    out = []
    for mask in (scores.sparse, ~scores.sparse):
        if not mask.any():
            out.append(0.0)
            continue
        a, b = p_inf[mask][None, :], p_other[mask][None, :]
        ll = np.log(lams[:, None] * a + (1 - lams[:, None]) * b).sum(axis=1)
        out.append(float(lams[int(np.argmax(ll))]))
    return tuple(out)


def mixture_log10(scores: InfiniScores, other_log10: np.ndarray, lambdas: tuple) -> np.ndarray:
    """log10 of the ∞-gram mixed with another model's per-token log10 probabilities."""
    lam = np.where(scores.sparse, lambdas[0], lambdas[1])
    with np.errstate(divide="ignore"):
        return np.log10(lam * scores.prob + (1 - lam) * 10.0 ** other_log10)
