"""KenLM's binary model files (``build_binary`` output), read without KenLM.

A binary file is a fixed header, the vocabulary's lookup structure, the n-gram search structure
and, at the end, the vocabulary's strings (NUL-separated, in word-index order).  Two search
structures exist, each with variants; the header's model type says which:

* ``probing`` (type 0; 1 with rest costs): one linear-probing hash table per order, keyed by a
  64-bit hash of the n-gram's word ids.  The n-grams themselves are not stored -- only their
  hashes -- so a probing file can be *queried* (:class:`ProbingTables`) but not turned back into
  an ARPA file.
* ``trie`` (type 2; +1 quantised with ``-q/-b``; +2 with array-compressed pointers ``-a``): the
  n-grams in a bit-packed trie whose paths run from the *last* word of an n-gram back to its first
  (the order KenLM looks a context up in).  Every n-gram is there, so :func:`read_trie_tables`
  decodes the whole file into the toolkit's :class:`~ngramlm.tables.NgramTables`, and everything
  that takes a model (``ppl``, ``score``, the kenlm-API ``Model``, ``export-arpa``) works on it.

Numbers are what the file stores: float32 log10 values (or the centres of the quantisation bins),
widened to float64.  The layout was learnt from KenLM's sources (``lm/binary_format.cc``,
``lm/search_trie.cc``, ``lm/trie.cc``, ``lm/quantize.cc``, ``lm/bhiksha.cc``,
``lm/search_hashed.hh``, ``util/bit_packing.hh``); this module is an independent reader of that
format.  Only little-endian files (x86, ARM) are read, as KenLM itself only reads files written on a
machine of the same byte order.
"""
from __future__ import annotations

import mmap
import os
import struct
from dataclasses import dataclass, field
from typing import Optional

import numpy as np

from corpora.errors import InputError
from corpora.vocab import BOS_ID, EOS_ID, UNK_ID

# The first 88 bytes of a complete file (KenLM's "Sanity" block): the magic string padded to 8
# bytes, then test values that catch a file written with another float format or word size.
MAGIC = b"mmap lm http://kheafield.com/code format version 5\n\0"
MAGIC_PREFIX = b"mmap lm http://kheafield.com/code format version"
INCOMPLETE = b"mmap lm http://kheafield.com/code incomplete\n"
_SANITY = struct.Struct("<56s3f3IQ")
SANITY = _SANITY.pack(MAGIC + b"\0" * (56 - len(MAGIC)), 0.0, 1.0, -0.5, 1, 0xFFFFFFFF, 0, 1)
# FixedWidthParameters: order (uchar, padded), probing_multiplier (float), model type (enum),
# has_vocabulary (bool, padded), search_version (uint); then one uint64 count per order.
_FIXED = struct.Struct("<B3xfI?3xI")

MODEL_NAMES = {0: "probing", 1: "probing with rest costs", 2: "trie", 3: "trie with quantization",
               4: "trie with array-compressed pointers",
               5: "trie with quantization and array-compressed pointers"}
TRIE_TYPES = (2, 3, 4, 5)
PROBING_TYPES = (0, 1)
QUANT_VERSION = 2
ARRAY_VERSION = 0
PROBING_VOCAB_VERSION = 0


def align8(n: int) -> int:
    return (n + 7) // 8 * 8


def required_bits(max_value: int) -> int:
    """Bits to store integers 0..max_value (0 for 0), as KenLM sizes its bit fields."""
    return int(max_value).bit_length()


def header_size(order: int) -> int:
    return align8(_SANITY.size + _FIXED.size + 8 * order)


@dataclass
class Header:
    order: int
    probing_multiplier: float
    model_type: int
    has_vocabulary: bool
    search_version: int
    counts: list
    path: str = ""

    @property
    def size(self) -> int:
        return header_size(self.order)

    @property
    def kind(self) -> str:
        return "trie" if self.model_type in TRIE_TYPES else "probing"

    @property
    def name(self) -> str:
        return MODEL_NAMES.get(self.model_type, f"type {self.model_type}")


def looks_like_kenlm_binary(path: os.PathLike | str) -> bool:
    """True when the file starts like a KenLM binary (complete, unfinished or another version)."""
    try:
        with open(path, "rb") as fh:
            head = fh.read(len(MAGIC_PREFIX))
    except OSError:
        return False
    return head.startswith(b"mmap lm http://kheafield.com/code ")


def read_header(path: os.PathLike | str, buf=None) -> Header:
    p = os.fspath(path)
    if buf is None:
        with open(p, "rb") as fh:
            buf = fh.read(header_size(255))
    buf = bytes(buf[:header_size(255)])
    if buf.startswith(INCOMPLETE):
        raise InputError("this KenLM binary file did not finish building (build_binary stopped or failed)",
                         path=p, fix="rebuild it with build_binary, or build one with `ngramlm build-binary`")
    if not buf.startswith(MAGIC_PREFIX):
        raise InputError("not a KenLM binary file", path=p, fix="pass a file written by build_binary")
    if not buf.startswith(MAGIC):
        version = buf[len(MAGIC_PREFIX):len(MAGIC_PREFIX) + 8].split(b"\n")[0].strip().decode("ascii", "replace")
        raise InputError(f"KenLM binary format version {version}; this reader knows version 5 (KenLM since 2012)",
                         path=p, fix="rebuild the binary from its ARPA file with a current build_binary")
    if len(buf) < _SANITY.size + _FIXED.size or buf[:_SANITY.size] != SANITY:
        raise InputError("the KenLM binary's test values do not match a little-endian 64-bit build",
                         path=p, fix="rebuild the binary on a little-endian machine (x86, ARM)")
    order, mult, mtype, has_vocab, version = _FIXED.unpack_from(buf, _SANITY.size)
    if order < 1 or len(buf) < _SANITY.size + _FIXED.size + 8 * order:
        raise InputError(f"the KenLM binary's header is cut short (order {order})", path=p,
                         fix="the file is truncated: copy or rebuild it")
    counts = list(struct.unpack_from(f"<{order}Q", buf, _SANITY.size + _FIXED.size))
    if mtype not in MODEL_NAMES:
        raise InputError(f"unknown KenLM model type {mtype}", path=p, fix="rebuild the binary with build_binary")
    want_version = 1 if mtype in TRIE_TYPES else 0
    if version != want_version:
        raise InputError(f"KenLM {MODEL_NAMES[mtype]} search version {version}, expected {want_version}",
                         path=p, fix="rebuild the binary from its ARPA file with a current build_binary")
    if order < 2:
        raise InputError("a KenLM binary of order 1", path=p, fix="KenLM binaries are bigram models or higher")
    return Header(order=order, probing_multiplier=mult, model_type=mtype, has_vocabulary=bool(has_vocab),
                  search_version=version, counts=counts, path=p)


class _Bits:
    """Vectorised reads of KenLM's little-endian bit fields from a file mapped as uint64 words."""

    def __init__(self, buf) -> None:
        self.buf = buf
        n = len(buf) // 8
        self.words = np.frombuffer(buf, dtype="<u8", count=n)
        self.n = n

    def read(self, bit_addr: np.ndarray, length: int) -> np.ndarray:
        """The ``length``-bit (<= 57) integers starting at absolute bit addresses ``bit_addr``."""
        if length == 0:
            return np.zeros(len(bit_addr), dtype=np.uint64)
        a = np.asarray(bit_addr, dtype=np.uint64)
        q = (a >> np.uint64(6)).astype(np.int64)
        s = a & np.uint64(63)
        lo = self.words[q] >> s
        hi_q = np.minimum(q + 1, self.n - 1)
        hi = self.words[hi_q] << ((np.uint64(64) - s) & np.uint64(63))
        hi[s == 0] = 0
        return (lo | hi) & np.uint64((1 << length) - 1)

    def floats(self, byte_offset: int, count: int) -> np.ndarray:
        return np.frombuffer(self.buf, dtype="<f4", count=count, offset=byte_offset)


def _as_f32(bits: np.ndarray) -> np.ndarray:
    return bits.astype(np.uint32).view(np.float32)


def _nonpositive31(bits: np.ndarray) -> np.ndarray:
    """KenLM stores a log probability (<= 0) as its 31 low bits; the sign bit is implied."""
    return (bits.astype(np.uint32) | np.uint32(0x80000000)).view(np.float32)


def _chop_bits(max_offset: int, max_next: int, config_bits: int) -> int:
    """How many high bits of each next-pointer the array compression moves into its table (the
    choice that minimises table cost minus savings, first minimum; KenLM's rule)."""
    required = required_bits(max_next)
    best, lowest = 0, None
    for chop in range(0, min(required, config_bits) + 1):
        change = (max_next >> (required - chop)) * 64 - max_offset * chop
        if lowest is None or change < lowest:
            best, lowest = chop, change
    return best


@dataclass
class TrieLayout:
    """Where each part of a trie file is, and how wide its fields are (for readers and writers)."""
    order: int
    counts: list
    quant: Optional[tuple]  # (prob_bits, backoff_bits) or None
    array_bits: Optional[int]  # configured pointer compression bits (-a) or None
    word_bits: int = 0
    quant_offset: int = 0
    unigram_offset: int = 0
    middles: list = field(default_factory=list)  # per order 2..n-1: dict of offsets and widths
    longest: dict = field(default_factory=dict)
    end: int = 0


def trie_layout(order: int, counts: list, start: int, *, quant: Optional[tuple], array_bits: Optional[int]) -> TrieLayout:
    """The byte layout of a trie search structure beginning at file offset ``start``."""
    L = TrieLayout(order=order, counts=list(counts), quant=quant, array_bits=array_bits)
    L.word_bits = required_bits(counts[0])
    L.quant_offset = start
    if quant is not None:
        pb, bb = quant
        qsize = (order - 2) * ((1 << bb) + (1 << pb)) * 4 + (1 << pb) * 4 + 8
        middle_qbits, longest_qbits = pb + bb, pb
    else:
        qsize, middle_qbits, longest_qbits = 0, 63, 31
    off = start + qsize
    L.unigram_offset = off
    off += (counts[0] + 2) * 16
    for k in range(2, order):
        entries, max_next = counts[k - 1], counts[k]
        m = {"order": k, "entries": entries, "max_next": max_next, "header": off}
        if array_bits is not None:
            chop = _chop_bits(entries + 1, max_next, array_bits)
            inline = required_bits(max_next) - chop
            n_array = (max_next >> inline) + 1
            m["array_offset"] = align8(off) + 8
            m["array_count"] = n_array
            off += 8 * (1 + n_array) + 7
        else:
            inline = required_bits(max_next)
        m["inline_bits"] = inline
        m["quant_bits"] = middle_qbits
        m["total_bits"] = L.word_bits + middle_qbits + inline
        m["base"] = off
        off += ((1 + entries) * m["total_bits"] + 7) // 8 + 8
        L.middles.append(m)
    total = L.word_bits + longest_qbits
    L.longest = {"order": order, "entries": counts[-1], "quant_bits": longest_qbits, "total_bits": total,
                 "base": off}
    off += ((1 + counts[-1]) * total + 7) // 8 + 8
    L.end = off
    return L


def _vocab_words(buf, offset: int, n_words: int, path: str) -> list:
    if offset > len(buf):
        raise InputError("the KenLM binary is shorter than its header says", path=path,
                         fix="the file is truncated: copy or rebuild it")
    raw = bytes(buf[offset:])
    parts = raw.split(b"\0")
    if len(parts) < n_words or parts[0] != b"<unk>":
        raise InputError(f"the KenLM binary's vocabulary strings are missing or cut short "
                         f"({len(parts) - 1} of {n_words})", path=path, fix="the file is truncated: copy or rebuild it")
    try:  # one decode of the words' bytes (a NUL never occurs inside a UTF-8 character)
        end = sum(map(len, parts[:n_words])) + n_words - 1
        return raw[:end].decode("utf-8").split("\0")
    except UnicodeDecodeError as e:
        raise InputError(f"a vocabulary word is not UTF-8 ({e})", path=path, fix="rebuild from a UTF-8 ARPA file") from None


class BinaryFile:
    """A KenLM binary file mapped read-only: its header, vocabulary words and raw bytes."""

    def __init__(self, path: os.PathLike | str, *, populate: bool = False) -> None:
        """``populate``: map every page now (Linux's MAP_POPULATE, as KenLM loads by default), one
        read-ahead instead of a page fault per first touch while scoring."""
        self.path = os.fspath(path)
        if not os.path.exists(self.path):
            raise InputError("no such model file", path=self.path, fix="check the path")
        with open(self.path, "rb") as fh:
            size = os.fstat(fh.fileno()).st_size
            if size < _SANITY.size + _FIXED.size:
                raise InputError("too short to be a KenLM binary file", path=self.path, fix="check the file")
            if populate and hasattr(mmap, "MAP_POPULATE"):
                self._mm = mmap.mmap(fh.fileno(), 0, flags=mmap.MAP_SHARED | mmap.MAP_POPULATE, prot=mmap.PROT_READ)
            else:
                self._mm = mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ)
        self.buf = memoryview(self._mm)
        self.header = read_header(self.path, self.buf[:header_size(255)])
        if not self.header.has_vocabulary:
            raise InputError("this KenLM binary was built without its vocabulary strings, so its word ids cannot "
                             "be matched to words", path=self.path,
                             fix="rebuild it with build_binary's default (vocabulary included)")
        self.bits = _Bits(self.buf)

    def close(self) -> None:
        self.bits = None
        try:
            self.buf.release()
            self._mm.close()
        except BufferError:
            # Arrays still view the map (an error raised halfway through decoding holds some): it is
            # unmapped when the last of them goes, and the error the caller sees is the real one.
            pass

    def __enter__(self) -> "BinaryFile":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


# ---------------------------------------------------------------------------------------- trie

def _trie_config(bf: BinaryFile, start: int) -> tuple:
    h = bf.header
    quant = array_bits = None
    if h.model_type in (3, 5):
        version, pb, bb = bytes(bf.buf[start:start + 3])
        if version != QUANT_VERSION:
            raise InputError(f"quantisation version {version}, expected {QUANT_VERSION}", path=bf.path,
                             fix="rebuild the binary with a current build_binary")
        quant = (pb, bb)
    if h.model_type in (4, 5):
        array_bits = 0
        if h.order > 2:
            qsize = trie_layout(h.order, h.counts, start, quant=quant, array_bits=0).unigram_offset - start
            at = start + qsize + (h.counts[0] + 2) * 16
            version, array_bits = bytes(bf.buf[at:at + 2])
            if version != ARRAY_VERSION:
                raise InputError(f"pointer-compression version {version}, expected {ARRAY_VERSION}", path=bf.path,
                                 fix="rebuild the binary with a current build_binary")
    return quant, array_bits


def _read_next(bf: BinaryFile, m: dict, entry_bits: np.ndarray) -> np.ndarray:
    inline = bf.bits.read(np.uint64(m["base"] * 8) + entry_bits + np.uint64(m["total_bits"] - m["inline_bits"]),
                          m["inline_bits"])
    if "array_offset" not in m:
        return inline.astype(np.int64)
    table = np.frombuffer(bf.buf, dtype="<u8", count=m["array_count"], offset=m["array_offset"])
    idx = np.arange(len(entry_bits), dtype=np.uint64)
    high = np.searchsorted(table, idx, side="right").astype(np.int64) - 1
    return (high << m["inline_bits"]) | inline.astype(np.int64)


def decode_trie(bf: BinaryFile) -> dict:
    """The trie's content in KenLM's word ids: per order k, ``words`` (n, k) in natural order
    (first word first), ``prob`` and (below the top order) ``backoff`` as float32."""
    h = bf.header
    vocab_size = 8 + 8 * h.counts[0]
    start = h.size + vocab_size
    quant, array_bits = _trie_config(bf, start)
    L = trie_layout(h.order, h.counts, start, quant=quant, array_bits=array_bits)
    if L.end > len(bf.buf):
        raise InputError(f"the KenLM binary is {len(bf.buf):,} bytes but its {h.name} needs {L.end:,}",
                         path=bf.path, fix="the file is truncated: copy or rebuild it")
    if quant is not None:
        pb, bb = quant
        at = start + 8
        tables = []
        for _ in range(h.order - 2):
            pt = bf.bits.floats(at, 1 << pb)
            at += 4 << pb
            bt = bf.bits.floats(at, 1 << bb)
            at += 4 << bb
            tables.append((pt, bt))
        longest_table = bf.bits.floats(at, 1 << pb)
    c0 = h.counts[0]
    uni = np.frombuffer(bf.buf, dtype=np.dtype([("prob", "<f4"), ("backoff", "<f4"), ("next", "<u8")]),
                        count=c0 + 2, offset=L.unigram_offset)
    out = {1: {"words": np.arange(c0, dtype=np.int64)[:, None], "prob": uni["prob"][:c0].copy(),
               "backoff": uni["backoff"][:c0].copy()}}
    parent_next = uni["next"][:c0 + 1].astype(np.int64)
    path = out[1]["words"]  # stored order: last word first
    wb = L.word_bits
    for k in range(2, h.order + 1):
        top = k == h.order
        m = L.longest if top else L.middles[k - 2]
        n = m["entries"]
        if parent_next[-1] != n or (len(parent_next) > 1 and np.any(np.diff(parent_next) < 0)):
            raise InputError(f"the KenLM binary's order-{k} pointers are inconsistent", path=bf.path,
                             fix="the file is damaged: rebuild it with build_binary")
        j_bits = np.arange(n, dtype=np.uint64) * np.uint64(m["total_bits"])
        base_bits = np.uint64(m["base"] * 8)
        word = bf.bits.read(base_bits + j_bits, wb).astype(np.int64)
        vbits = base_bits + j_bits + np.uint64(wb)
        if quant is None:
            prob = _nonpositive31(bf.bits.read(vbits, 31))
            backoff = None if top else _as_f32(bf.bits.read(vbits + np.uint64(31), 32))
        elif top:
            prob = longest_table[bf.bits.read(vbits, quant[0]).astype(np.int64)]
            backoff = None
        else:
            pt, bt = tables[k - 2]
            backoff = bt[bf.bits.read(vbits, quant[1]).astype(np.int64)]
            prob = pt[bf.bits.read(vbits + np.uint64(quant[1]), quant[0]).astype(np.int64)]
        parent = np.searchsorted(parent_next, np.arange(n, dtype=np.int64), side="right") - 1
        path = np.column_stack([path[parent], word])
        out[k] = {"words": path[:, ::-1], "prob": np.asarray(prob, dtype=np.float32),
                  "backoff": None if top else np.asarray(backoff, dtype=np.float32)}
        if not top:
            parent_next = _read_next(bf, m, np.arange(n + 1, dtype=np.uint64) * np.uint64(m["total_bits"]))
    out["quant"] = quant
    out["array_bits"] = array_bits
    return out


def _alias_markers(ids: np.ndarray, lacks: list) -> tuple:
    """The n-grams (rows of our word ids) with a twin for each place a missing sentence marker would
    be read as <unk>: ``<s>`` first, ``</s>`` last; and for every row the index of the row it copies."""
    src = np.arange(len(ids))
    for token, col, our_id in (("<s>", 0, BOS_ID), ("</s>", -1, EOS_ID)):
        if token in lacks:
            m = ids[:, col] == UNK_ID
            twin = ids[m].copy()
            twin[:, col] = our_id
            ids = np.concatenate([ids, twin])
            src = np.concatenate([src, src[m]])
    return ids, src


def trie_structure(bf: BinaryFile) -> tuple:
    """A trie file's layout (:class:`TrieLayout`, checked against the file's size) and its words in
    KenLM's id order; a probing file is refused with the reason."""
    h = bf.header
    if h.kind != "trie":
        raise InputError(f"a KenLM {h.name} binary keeps only hashes of its n-grams, not the n-grams",
                         path=bf.path, fix="only trie binaries convert back to n-grams; query a probing file "
                         "with `ngramlm ppl`/`score` or ngramlm.Model, or rebuild a trie from the ARPA")
    vocab_end = h.size + 8 + 8 * h.counts[0]
    n_sorted = int(np.frombuffer(bf.buf, dtype="<u8", count=1, offset=h.size)[0])
    quant, array_bits = _trie_config(bf, vocab_end)
    L = trie_layout(h.order, h.counts, vocab_end, quant=quant, array_bits=array_bits)
    if L.end > len(bf.buf):
        raise InputError(f"the KenLM binary is {len(bf.buf):,} bytes but its {h.name} needs {L.end:,}",
                         path=bf.path, fix="the file is truncated: copy or rebuild it")
    words_k = _vocab_words(bf.buf, L.end, n_sorted + 1, bf.path)
    if h.counts[0] != len(words_k):
        raise InputError(f"the header counts {h.counts[0]} unigrams but the file lists {len(words_k)} words",
                         path=bf.path, fix="the file is damaged: rebuild it with build_binary")
    return L, words_k


def trie_query_layout(L: TrieLayout) -> list:
    """Per order 2..n, what :class:`ngramlm._fast.TrieTables` needs to read entries in place: the
    byte offsets of the entries, of the pointer-compression table and of the quantisation centres,
    and the fields' widths."""
    out = []
    qat = L.quant_offset + 8  # the centres: per middle order prob then back-off, then the top order's
    for k in range(2, L.order + 1):
        m = L.longest if k == L.order else L.middles[k - 2]
        d = {"base": m["base"], "total_bits": m["total_bits"], "inline_bits": m.get("inline_bits", 0),
             "next_entries": L.counts[k] if k < L.order else 0,
             "array_offset": m.get("array_offset"), "array_count": m.get("array_count", 0), "ptab": None, "btab": None}
        if L.quant is not None:
            pb, bb = L.quant
            d.update(prob_bits=pb, back_bits=bb, ptab=qat)
            qat += 4 << pb
            if k < L.order:
                d["btab"] = qat
                qat += 4 << bb
        out.append(d)
    return out


def read_trie_tables(path: os.PathLike | str):
    """A KenLM trie binary (any of its four variants) as :class:`~ngramlm.tables.NgramTables`."""
    from .arpa import _tables, _vocab

    with BinaryFile(path) as bf:
        h = bf.header
        h_counts = list(h.counts)
        L, words_k = trie_structure(bf)
        quant, array_bits = L.quant, L.array_bits
        dec = decode_trie(bf)
    vocab = _vocab(words_k, "<unk>", "<s>", "</s>")
    V = len(vocab)
    remap = np.array([vocab.stoi_[w] for w in words_k], dtype=np.int64)
    lp1 = np.full(V, -np.inf)
    bo1 = np.zeros(V)
    lp1[remap] = dec[1]["prob"]
    bo1[remap] = dec[1]["backoff"].astype(np.float64) + 0.0  # -0.0 (KenLM's "no extension" flag) is 0
    # A file built with build_binary -s may lack <s> or </s>; KenLM then reads them as <unk> (its id 0).
    # Here they keep their own ids, so <unk>'s entries are copied to them: </s> where <unk> is the
    # predicted word, <s> where it opens the context (the only places the scorer puts them).
    lacks = [t for t in ("<s>", "</s>") if t not in set(words_k)]
    if "</s>" in lacks:
        lp1[EOS_ID], bo1[EOS_ID] = lp1[UNK_ID], bo1[UNK_ID]
    if "<s>" in lacks:
        bo1[BOS_ID] = bo1[UNK_ID]
    lp1[BOS_ID] = -np.inf
    keys_l, lp_l, bo_l = [np.arange(V, dtype=np.int64)], [lp1], [bo1]
    for k in range(2, h.order + 1):
        ids, src = _alias_markers(remap[dec[k]["words"]], lacks)
        row = ids[:, 0]
        for j in range(1, k - 1):
            want = row * V + ids[:, j]
            pos = np.searchsorted(keys_l[j], want)
            pos_c = np.minimum(pos, len(keys_l[j]) - 1)
            if len(keys_l[j]) == 0 or not np.all(keys_l[j][pos_c] == want):
                raise InputError(f"a {k}-gram's context is not among the {j + 1}-grams", path=os.fspath(path),
                                 fix="the file is damaged: rebuild it with build_binary")
            row = pos_c
        raw = row * V + ids[:, -1]
        perm = np.argsort(raw, kind="stable")
        keys_l.append(raw[perm])
        lp_l.append(dec[k]["prob"][src][perm].astype(np.float64))
        bo_l.append(dec[k]["backoff"][src][perm].astype(np.float64) + 0.0 if k < h.order else np.zeros(0))
    tables = _tables(vocab, keys_l, lp_l, bo_l, h_counts, os.fspath(path))
    tables.info = {"kenlm_binary": os.fspath(path), "kenlm_type": h.name,
                   **({"kenlm_lacks": lacks} if lacks else {}),
                   **({"quantization_bits": {"prob": quant[0], "backoff": quant[1]}} if quant else {}),
                   **({"pointer_compression_bits": array_bits} if array_bits is not None else {})}
    return tables


# ------------------------------------------------------------------------------------- probing

_K1 = np.uint64(8978948897894561157)
_K2 = np.uint64(17894857484156487943)


def combine_word_hash(current: np.ndarray, next_word: np.ndarray) -> np.ndarray:
    """KenLM's probing key of an n-gram extended by one more (earlier) word (uint64 arithmetic)."""
    with np.errstate(over="ignore"):
        return (np.asarray(current, dtype=np.uint64) * _K1) ^ ((np.asarray(next_word, dtype=np.uint64) + np.uint64(1)) * _K2)


def probing_buckets(entries: int, multiplier: float) -> int:
    """Buckets of one probing table: max(entries + 1, entries x multiplier), in float32 as KenLM computes."""
    return max(entries + 1, int(np.float32(multiplier) * np.float32(entries)))


_UNI = {0: np.dtype([("prob", "<f4"), ("backoff", "<f4")]),
        1: np.dtype([("prob", "<f4"), ("backoff", "<f4"), ("rest", "<f4")])}
_MID = {0: np.dtype([("key", "<u8"), ("prob", "<f4"), ("backoff", "<f4")]),
        1: np.dtype([("key", "<u8"), ("prob", "<f4"), ("backoff", "<f4"), ("rest", "<f4")])}
_LONG = np.dtype([("key", "<u8"), ("prob", "<f4")])
_SIGN = np.uint32(0x80000000)


def probing_layout(order: int, counts: list, multiplier: float, model_type: int) -> dict:
    """Byte offsets of a probing file's parts, relative to the end of its header."""
    vocab_size = 8 + probing_buckets(counts[0], multiplier) * 12
    off = vocab_size
    parts = {"vocab": (0, vocab_size), "unigram": (off, counts[0] + 1)}
    off += (counts[0] + 1) * _UNI[model_type].itemsize
    middles = []
    for k in range(2, order):
        nb = probing_buckets(counts[k - 1], multiplier)
        middles.append((off, nb))
        off += nb * _MID[model_type].itemsize
    nb = probing_buckets(counts[-1], multiplier)
    parts["middles"] = middles
    parts["longest"] = (off, nb)
    off += nb * _LONG.itemsize
    parts["end"] = off
    return parts


def _probe(table: np.ndarray, keys: np.ndarray) -> np.ndarray:
    """Bucket of each key in a linear-probing table (key 0 marks an empty bucket), or -1."""
    nb = len(table)
    tkeys = table["key"]
    out = np.full(len(keys), -1, dtype=np.int64)
    b = (keys % np.uint64(nb)).astype(np.int64)
    todo = np.arange(len(keys))
    while len(todo):
        got = tkeys[b[todo]]
        want = keys[todo]
        hit = got == want
        out[todo[hit]] = b[todo[hit]]
        todo = todo[~hit & (got != 0)]
        b[todo] += 1
        b[todo[b[todo] == nb]] = 0
    return out


class ProbingSearch:
    """A KenLM probing binary's tables, mapped read-only, and KenLM's lookups over them."""

    def __init__(self, path: os.PathLike | str) -> None:
        self.file = BinaryFile(path, populate=True)
        h = self.file.header
        if h.kind != "probing":
            raise InputError(f"not a probing binary ({h.name})", path=self.file.path, fix="read tries with read_trie_tables")
        self.header = h
        self.order = h.order
        buf, base = self.file.buf, h.size
        parts = probing_layout(h.order, h.counts, h.probing_multiplier, h.model_type)
        if base + parts["end"] > len(buf):
            raise InputError(f"the KenLM binary is {len(buf):,} bytes but its probing tables need {base + parts['end']:,}",
                             path=self.file.path, fix="the file is truncated: copy or rebuild it")
        version, bound = struct.unpack_from("<II", buf, base)
        if version != PROBING_VOCAB_VERSION:
            raise InputError(f"probing vocabulary version {version}, expected {PROBING_VOCAB_VERSION}",
                             path=self.file.path, fix="rebuild the binary with a current build_binary")
        off, n = parts["unigram"]
        self.unigram = np.frombuffer(buf, dtype=_UNI[h.model_type], count=n, offset=base + off)
        self.middles = [np.frombuffer(buf, dtype=_MID[h.model_type], count=nb, offset=base + o)
                        for o, nb in parts["middles"]]
        o, nb = parts["longest"]
        self.longest = np.frombuffer(buf, dtype=_LONG, count=nb, offset=base + o)
        self.words = _vocab_words(buf, base + parts["end"], bound, self.file.path)

    def table(self, k: int) -> np.ndarray:
        return self.longest if k == self.order else self.middles[k - 2]

    def lookup(self, k: int, keys: np.ndarray) -> tuple:
        """(found, log10 p, log10 back-off, extends left) of order-k n-grams by their keys."""
        if k == 1:
            w = keys.astype(np.int64)
            rec = self.unigram[w]
            bits = rec["prob"].view(np.uint32)
            return (np.ones(len(w), dtype=bool), (bits | _SIGN).view(np.float32), rec["backoff"],
                    (bits & _SIGN) == 0)
        t = self.table(k)
        at = _probe(t, keys)
        found = at >= 0
        rec = t[np.maximum(at, 0)]
        bits = rec["prob"].view(np.uint32)
        prob = (bits | _SIGN).view(np.float32)
        backoff = rec["backoff"] if k < self.order else np.zeros(len(keys), dtype=np.float32)
        extends = found & ((bits & _SIGN) == 0) & (k < self.order)
        return found, prob, backoff, extends

    def score_padded(self, kid: np.ndarray, pos: np.ndarray) -> tuple:
        """KenLM's log10 p and matched length at every padded position of a stream of KenLM word ids
        (``pos``: the position within its sentence, 0 at ``<s>``)."""
        n = self.order
        T = len(kid)
        kid = kid.astype(np.uint64)
        # A position sees back only as far as positions run on by one (rows of a batch of queries are
        # separate sentences even without <s>): the history available is the shorter of the two.
        brk = np.ones(T, dtype=bool)
        brk[1:] = pos[1:] != pos[:-1] + 1
        run_start = np.maximum.accumulate(np.where(brk, np.arange(T), 0))
        pos = np.minimum(pos, np.arange(T) - run_start)
        found, prob, backoff, extends = self.lookup(1, kid)
        lp = prob.astype(np.float64)
        matched = np.ones(T, dtype=np.int8)
        ctx_found = [None, found]  # per length: the n-gram ending here exists (and every shorter one)
        ctx_bo = [None, backoff.astype(np.float64)]
        key = kid.copy()
        alive = extends.copy()
        for k in range(2, n + 1):
            prev = np.zeros(T, dtype=np.uint64)
            prev[k - 1:] = kid[:T - k + 1]
            key = combine_word_hash(key, prev)
            cand = np.flatnonzero(alive & (pos >= k - 1))
            f = np.zeros(T, dtype=bool)
            bo = np.zeros(T)
            nxt = np.zeros(T, dtype=bool)
            if len(cand):
                fk, pk, bk, ek = self.lookup(k, key[cand])
                hit = cand[fk]
                f[hit] = True
                lp[hit] = pk[fk]
                matched[hit] = k
                bo[hit] = bk[fk]
                nxt[cand] = ek
            ctx_found.append(f)
            ctx_bo.append(bo)
            alive = nxt
        # Back-off weights of the contexts at least as long as the match (the n-grams ending at
        # t-1, as far as they chain); the context never reaches back past <s>.
        for L in range(1, n):
            t = np.flatnonzero((matched[1:] <= L) & (pos[1:] >= L) & ctx_found[L][:-1]) + 1
            lp[t] += ctx_bo[L][t - 1]
        return lp, matched

    # ---------------------------------------------------------------- one n-gram at a time
    def find1(self, k: int, key: int):
        """The record of the order-k n-gram with probing key ``key`` (a Python int), or None."""
        t = self.table(k)
        tkeys = t["key"]
        nb = len(t)
        b = key % nb
        while True:
            got = int(tkeys[b])
            if got == key:
                return t[b]
            if got == 0:
                return None
            b += 1
            if b == nb:
                b = 0

    def state_score(self, context: tuple, word: int) -> tuple:
        """KenLM's FullScore on KenLM ids: ``context`` most recent word first.  Returns (log10 p,
        matched length, the next state's words: ``word`` and as much context as can matter)."""
        n = self.order
        # The back-off weights the context carries (as KenLM's state does, recomputed here).
        cb = []
        if context:
            node = context[0]
            cb.append(float(self.unigram[node]["backoff"]))
            for i in range(1, min(len(context), n - 1)):
                node = _combine1(node, context[i])
                rec = self.find1(i + 1, node)
                if rec is None:
                    break
                cb.append(float(rec["backoff"]))
        rec = self.unigram[word]
        pbits = int(rec["prob"].view(np.uint32))
        lp = float(np.uint32(pbits | 0x80000000).view(np.float32))
        extends = not (pbits & 0x80000000)
        m = 1
        keep = 1 if _has_extension(rec["backoff"]) else 0
        node = word
        for i, c in enumerate(context[:n - 1]):
            if not extends:
                break
            k = i + 2
            node = _combine1(node, c)
            rec = self.find1(k, node)
            if rec is None:
                break
            pbits = int(rec["prob"].view(np.uint32))
            lp = float(np.uint32(pbits | 0x80000000).view(np.float32))
            m = k
            if k == n:
                break
            extends = not (pbits & 0x80000000)
            if _has_extension(rec["backoff"]):
                keep = k
        for i in range(m - 1, len(cb)):
            lp += cb[i]
        return lp, m, ((word,) + tuple(context[:keep - 1]))[:keep]


_MASK64 = (1 << 64) - 1


def _combine1(current: int, next_word: int) -> int:
    return ((current * 8978948897894561157) ^ ((1 + next_word) * 17894857484156487943)) & _MASK64


def _has_extension(backoff) -> bool:
    return int(np.float32(backoff).view(np.uint32)) != 0x80000000
