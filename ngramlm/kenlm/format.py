"""KenLM's binary file format: the header, the byte layout of the two search structures, the mapped file.

What reading a binary needs before any n-gram is touched, without numpy, so that the kenlm-module
stand-in (:mod:`ngramlm.kenlm`) loads a binary as lightly as the kenlm module does.  Decoding the
n-grams (:mod:`ngramlm.kenlm.read`) and writing files (:mod:`ngramlm.kenlm.write`) build on it.
The layout was learnt from KenLM's sources (``lm/binary_format.cc``, ``lm/search_trie.cc``,
``lm/trie.cc``, ``lm/quantize.cc``, ``lm/bhiksha.cc``, ``lm/search_hashed.hh``,
``lm/vocab.cc``); this is an independent reader of that format.
"""
from __future__ import annotations

import mmap
import os
import struct

from corpora.errors import InputError

# Record sizes of a probing file's tables, by model type (0 plain, 1 with rest costs): a unigram is
# (prob, backoff[, rest]) float32; a middle order's entry (key uint64, prob, backoff[, rest]); the
# top order's (key, prob).  A probing vocabulary bucket is (key uint64, id uint32), packed.
UNIGRAM_BYTES = {0: 8, 1: 12}
MIDDLE_BYTES = {0: 16, 1: 20}
LONGEST_BYTES = 12
VOCAB_BUCKET_BYTES = 12


def _f32(x: float) -> float:
    """``x`` rounded to float32 (and widened back)."""
    return struct.unpack("<f", struct.pack("<f", x))[0]


# The first 88 bytes of a complete file (KenLM's "Sanity" block): the magic string padded to 8
# bytes, then test values that catch a file written with another float format or word size.
MAGIC = b"mmap lm http://kheafield.com/code format version 5\n\0"
MAGIC_PREFIX = b"mmap lm http://kheafield.com/code format version"
INCOMPLETE = b"mmap lm http://kheafield.com/code incomplete\n"
_SANITY = struct.Struct("<56s3f3IQ")
SANITY = _SANITY.pack(MAGIC + b"\0" * (56 - len(MAGIC)), 0.0, 1.0, -0.5, 1, 0xFFFFFFFF, 0, 1)
# FixedWidthParameters: order (uchar, padded), probing_multiplier (float), model type (enum),
# has_vocabulary (bool, padded), search_version (uint); then one uint64 count per order.
FIXED_PARAMS = struct.Struct("<B3xfI?3xI")

MODEL_NAMES = {0: "probing", 1: "probing with rest costs", 2: "trie", 3: "trie with quantization",
               4: "trie with array-compressed pointers",
               5: "trie with quantization and array-compressed pointers"}
TRIE_TYPES = (2, 3, 4, 5)
QUANT_VERSION = 2
ARRAY_VERSION = 0
PROBING_VOCAB_VERSION = 0


def align8(n: int) -> int:
    return (n + 7) // 8 * 8


def required_bits(max_value: int) -> int:
    """Bits to store integers 0..max_value (0 for 0), as KenLM sizes its bit fields."""
    return int(max_value).bit_length()


def header_size(order: int) -> int:
    return align8(_SANITY.size + FIXED_PARAMS.size + 8 * order)


class Header:
    """The fixed header's parameters.  (Plain classes here, not dataclasses: importing dataclasses
    would double the import time of ``ngramlm.kenlm``.)"""

    def __init__(self, *, order: int, probing_multiplier: float, model_type: int, has_vocabulary: bool,
                 search_version: int, counts: list, path: str = "") -> None:
        self.order, self.probing_multiplier, self.model_type = order, probing_multiplier, model_type
        self.has_vocabulary, self.search_version, self.counts, self.path = has_vocabulary, search_version, counts, path

    def __repr__(self) -> str:
        return (f"Header(order={self.order}, model_type={self.model_type} ({self.name}), counts={self.counts}, "
                f"path={self.path!r})")

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
    if len(buf) < _SANITY.size + FIXED_PARAMS.size or buf[:_SANITY.size] != SANITY:
        raise InputError("the KenLM binary's test values do not match a little-endian 64-bit build",
                         path=p, fix="rebuild the binary on a little-endian machine (x86, ARM)")
    order, mult, mtype, has_vocab, version = FIXED_PARAMS.unpack_from(buf, _SANITY.size)
    if order < 1 or len(buf) < _SANITY.size + FIXED_PARAMS.size + 8 * order:
        raise InputError(f"the KenLM binary's header is cut short (order {order})", path=p,
                         fix="the file is truncated: copy or rebuild it")
    counts = list(struct.unpack_from(f"<{order}Q", buf, _SANITY.size + FIXED_PARAMS.size))
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


class TrieLayout:
    """Where each part of a trie file is, and how wide its fields are (for readers and writers)."""

    def __init__(self, *, order: int, counts: list, quant: tuple | None, array_bits: int | None) -> None:
        self.order, self.counts = order, counts
        self.quant = quant  # (prob_bits, backoff_bits) or None
        self.array_bits = array_bits  # configured pointer compression bits (-a) or None
        self.word_bits = self.quant_offset = self.unigram_offset = self.end = 0
        self.middles: list = []  # per order 2..n-1: dict of offsets and widths
        self.longest: dict = {}


def trie_layout(order: int, counts: list, start: int, *, quant: tuple | None, array_bits: int | None) -> TrieLayout:
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



class BinaryFile:
    """A KenLM binary file mapped read-only: its header, vocabulary words and raw bytes."""

    def __init__(self, path: os.PathLike | str, *, populate: bool = False, need_words: bool = True) -> None:
        """``populate``: map every page now (Linux's MAP_POPULATE, as KenLM loads by default), one
        read-ahead instead of a page fault per first touch while scoring.  ``need_words``: refuse a
        file built without its vocabulary strings (``build_binary -v``); a reader that finds words
        by their hashes alone, as KenLM does, passes False."""
        self.path = os.fspath(path)
        if not os.path.exists(self.path):
            raise InputError("no such model file", path=self.path, fix="check the path")
        with open(self.path, "rb") as fh:
            size = os.fstat(fh.fileno()).st_size
            if size < _SANITY.size + FIXED_PARAMS.size:
                raise InputError("too short to be a KenLM binary file", path=self.path, fix="check the file")
            if populate and hasattr(mmap, "MAP_POPULATE"):
                self._mm = mmap.mmap(fh.fileno(), 0, flags=mmap.MAP_SHARED | mmap.MAP_POPULATE, prot=mmap.PROT_READ)
            else:
                self._mm = mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ)
        self.buf = memoryview(self._mm)
        self.header = read_header(self.path, self.buf[:header_size(255)])
        if need_words and not self.header.has_vocabulary:
            raise InputError("this KenLM binary was built without its vocabulary strings, so its word ids cannot "
                             "be matched to words", path=self.path,
                             fix="rebuild it with build_binary's default (vocabulary included)")

    def close(self) -> None:
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



def trie_query_layout(L: TrieLayout) -> list:
    """Per order 2..n, what :class:`ngramlm._fast.kenlm.TrieTables` needs to read entries in place: the
    byte offsets of the entries, of the pointer-compression table and of the quantisation centres,
    and the fields' widths."""
    out = []
    qat = L.quant_offset + 8  # the centres: per middle order prob then back-off, then the top order's
    for k in range(2, L.order + 1):
        m = L.longest if k == L.order else L.middles[k - 2]
        d = {"base": m["base"], "entries": m["entries"], "total_bits": m["total_bits"], "inline_bits": m.get("inline_bits", 0),
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



def probing_buckets(entries: int, multiplier: float) -> int:
    """Buckets of one probing table: max(entries + 1, entries x multiplier), in float32 as KenLM computes."""
    # float32 x float32 is exact in a double; rounding it to float32 is KenLM's float product.
    return max(entries + 1, int(_f32(_f32(multiplier) * _f32(entries))))



def probing_layout(order: int, counts: list, multiplier: float, model_type: int) -> dict:
    """Byte offsets of a probing file's parts, relative to the end of its header."""
    vocab_size = 8 + probing_buckets(counts[0], multiplier) * VOCAB_BUCKET_BYTES
    off = vocab_size
    parts = {"vocab": (0, vocab_size), "unigram": (off, counts[0] + 1)}
    off += (counts[0] + 1) * UNIGRAM_BYTES[model_type]
    middles = []
    for k in range(2, order):
        nb = probing_buckets(counts[k - 1], multiplier)
        middles.append((off, nb))
        off += nb * MIDDLE_BYTES[model_type]
    nb = probing_buckets(counts[-1], multiplier)
    parts["middles"] = middles
    parts["longest"] = (off, nb)
    off += nb * LONGEST_BYTES
    parts["end"] = off
    return parts


def trie_file_layout(bf: BinaryFile) -> TrieLayout:
    """A trie file's layout: its search structure after the sorted vocabulary (a uint64 count, then
    one hash a word), checked against the file's size."""
    h = bf.header
    start = h.size + 8 + 8 * h.counts[0]
    quant, array_bits = _trie_config(bf, start)
    L = trie_layout(h.order, h.counts, start, quant=quant, array_bits=array_bits)
    if L.end > len(bf.buf):
        raise InputError(f"the KenLM binary is {len(bf.buf):,} bytes but its {h.name} needs {L.end:,}",
                         path=bf.path, fix="the file is truncated: copy or rebuild it")
    return L


def probing_file_layout(bf: BinaryFile) -> dict:
    """A probing file's parts at absolute byte offsets, checked against the file's size and the
    vocabulary's version: ``vocab`` (offset, buckets) of its 12-byte (hash, id) buckets and
    ``vocab_bound`` (the number of words), ``unigram`` (offset, records), ``middles`` per order
    2..n-1 and ``longest`` (offset, buckets), ``end`` (where the vocabulary's strings start)."""
    h = bf.header
    base = h.size
    parts = probing_layout(h.order, h.counts, h.probing_multiplier, h.model_type)
    if base + parts["end"] > len(bf.buf):
        raise InputError(f"the KenLM binary is {len(bf.buf):,} bytes but its probing tables need "
                         f"{base + parts['end']:,}", path=bf.path, fix="the file is truncated: copy or rebuild it")
    version, bound = struct.unpack_from("<II", bf.buf, base)
    if version != PROBING_VOCAB_VERSION:
        raise InputError(f"probing vocabulary version {version}, expected {PROBING_VOCAB_VERSION}",
                         path=bf.path, fix="rebuild the binary with a current build_binary")
    return {"vocab": (base + 8, (parts["vocab"][1] - 8) // VOCAB_BUCKET_BYTES), "vocab_bound": bound,
            "unigram": (base + parts["unigram"][0], parts["unigram"][1]),
            "middles": [(base + o, nb) for o, nb in parts["middles"]],
            "longest": (base + parts["longest"][0], parts["longest"][1]), "end": base + parts["end"]}
