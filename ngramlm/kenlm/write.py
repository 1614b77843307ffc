"""Write KenLM binary model files (what ``build_binary`` writes) from a back-off model.

The file is the one ``build_binary`` makes from the ARPA text this toolkit writes for the same
model (:func:`ngramlm.io.arpa.write_arpa`): every number goes through that text (``%.7g``) before it is
narrowed to float32, so a binary written here and one written by ``build_binary`` from the exported
ARPA hold the same values.  The format is read in :mod:`ngramlm.kenlm.read`, which documents it.

Trie files (``trie``, with ``-q``/``-b`` quantisation and ``-a`` pointer compression) are laid out
field by field as KenLM lays them out: the vocabulary sorted by the 64-bit MurmurHash of each word,
the n-grams in the reversed-word order of KenLM's trie, the quantisation bins trained on equal-size
buckets of the sorted values.  A model whose n-grams are not closed under taking suffixes (some
pruned models) would need KenLM's "blank" n-grams; that is refused with a message, not
approximated.
"""
from __future__ import annotations

import os
import struct
from dataclasses import dataclass
from typing import Optional

import numpy as np

from corpora.errors import InputError
from corpora.textio import atomic_writer
from corpora.vocab import BOS_ID, PAD_ID

from .format import SANITY, FIXED_PARAMS, header_size, trie_layout

_M = 0xC6A4A7935BD1E995
_MASK = (1 << 64) - 1


def murmur_hash64a(data: bytes, seed: int = 0) -> int:
    """MurmurHash64A (Austin Appleby's public-domain hash), which KenLM keys its vocabulary with."""
    n = len(data)
    h = (seed ^ (n * _M)) & _MASK
    end = n - n % 8
    for i in range(0, end, 8):
        k = int.from_bytes(data[i:i + 8], "little")
        k = (k * _M) & _MASK
        k ^= k >> 47
        k = (k * _M) & _MASK
        h ^= k
        h = (h * _M) & _MASK
    rest = n & 7
    if rest:
        h ^= int.from_bytes(data[end:], "little")
        h = (h * _M) & _MASK
    h ^= h >> 47
    h = (h * _M) & _MASK
    h ^= h >> 47
    return h


def _word_hash(data: bytes) -> int:
    """murmur_hash64a, compiled where the extension is (a PTB vocabulary: 1 ms against 13)."""
    from .. import accel

    return accel.fast.murmur_hash64a(data) if accel.fast is not None else murmur_hash64a(data)


@dataclass
class BinaryOptions:
    """``build_binary``'s options that shape the file."""
    kind: str = "trie"  # "trie" or "probing"
    prob_bits: Optional[int] = None  # -q: quantise probabilities (trie only)
    backoff_bits: Optional[int] = None  # -b: quantise back-off weights (defaults to -q)
    array_bits: Optional[int] = None  # -a: compress trie pointers, at most this many bits in the array
    probing_multiplier: float = 1.5  # -p
    include_vocab: bool = True  # -v turns it off (then the words cannot be matched back)
    allow_missing_markers: bool = False  # -s: a model without <s> or </s> (KenLM then reads them as <unk>)

    def check(self) -> None:
        if self.kind not in ("trie", "probing"):
            raise InputError(f"unknown KenLM data structure {self.kind!r}", fix="use trie or probing")
        if self.backoff_bits is not None and self.prob_bits is None:
            raise InputError("-b (back-off bits) needs -q (probability bits)", fix="add -q 8, say")
        for name, v in (("-q", self.prob_bits), ("-b", self.backoff_bits), ("-a", self.array_bits)):
            if v is not None and not (1 <= v <= 25 if name != "-a" else 0 <= v <= 255):
                raise InputError(f"{name} {v} is out of range", fix="-q/-b take 1..25 bits, -a 0..255")
        if self.kind == "probing" and (self.prob_bits is not None or self.array_bits is not None):
            raise InputError("quantisation (-q/-b) and pointer compression (-a) exist only in the trie",
                             fix="use `build-binary trie`")
        if self.kind == "probing" and not self.probing_multiplier > 1.0:
            raise InputError(f"-p {self.probing_multiplier}: the probing multiplier must be > 1.0", fix="use -p 1.5")

    @property
    def model_type(self) -> int:
        if self.kind == "probing":
            return 0
        return 2 + (1 if self.prob_bits is not None else 0) + (2 if self.array_bits is not None else 0)


def _through_arpa_text(x: np.ndarray) -> np.ndarray:
    """float32 of each value as the ARPA writer prints it ('%.7g'; -99 for -inf) and KenLM reads it."""
    from .. import accel

    x = np.ascontiguousarray(x, dtype=np.float64)
    if len(x) == 0:
        return np.zeros(0, dtype=np.float32)
    if accel.fast is not None:
        return accel.fast.through_text7(x)  # ~65 ns a value: less than finding the distinct ones costs
    if len(x) > 4096:
        # Formatting is the cost (~0.3 us a value); values repeat (a PTB 5-gram's 1.6 M back-offs have
        # 9,000 distinct values, its 2.3 M probabilities 1.5 M), so each distinct bit pattern (-0.0 is not
        # 0.0) is formatted once.
        u, inv = np.unique(x.view(np.int64), return_inverse=True)
        if len(u) < 0.8 * len(x):
            return _through_arpa_text_each(u.view(np.float64))[inv.reshape(-1)]
    return _through_arpa_text_each(x)


def _through_arpa_text_each(x: np.ndarray) -> np.ndarray:
    """Without the compiled extension: through Python's formatting ('%.7g' is correctly rounded, as
    C's) and numpy's parser."""
    from ..io.arpa import format_column

    text = " ".join(format_column(x).tolist())
    return np.fromstring(text, dtype=np.float64, sep=" ").astype(np.float32)


def _absent_markers(model, opts: "BinaryOptions") -> list:
    """Our ids of <s>/</s> when the model's ARPA file did not list them: refused unless -s, as
    build_binary does; with -s they are left out of the file, and KenLM reads them as <unk>."""
    info = getattr(model, "info_", None) or {}
    lacks = info.get("arpa_lacks") or [] if isinstance(info, dict) else []
    if lacks and not opts.allow_missing_markers:
        raise InputError(f"the model has no {' or '.join(lacks)} (its ARPA file does not list it); KenLM's "
                         "build_binary refuses such a model unless -s, and then scores it as <unk>",
                         fix="pass -s to write it as build_binary -s does, or add the sentence markers to the ARPA")
    stoi = model.vocab_.stoi_
    return [stoi[t] for t in lacks]


def model_ngrams(model, drop_ids=(), with_words: bool = True) -> dict:
    """Per order k: ``words`` (n, k) our ids in natural order, ``prob``, ``backoff`` (float32, through
    the ARPA text; a zero back-off is -0.0 unless the n-gram is a context of a longer one: KenLM's
    'extension' flag), as the ARPA file of ``model`` lists them.  ``with_words=False``: no ``words``
    above order 1 (a writer that works from the model's rows skips building them)."""
    model._check_fitted()
    if model.kind_ != "backoff" or not model.is_distribution_ or model.missing_backoff_ != 0.0:
        raise InputError(f"a {model.smoother_name_} model is not a back-off model KenLM can hold",
                         fix="write models smoothed with a back-off method (mkn, kn, wb, katz, ...)")
    V = len(model.vocab_)
    n = model.order_
    out = {}
    words_prev = None
    for k in range(1, n + 1):
        keys = np.asarray(model.keys_[k - 1])
        lp = np.array(model.log10_prob_[k - 1], dtype=np.float64)
        if k == 1:
            sel = np.flatnonzero((np.arange(V) != PAD_ID) & ~np.isin(np.arange(V), list(drop_ids)))
            lp[BOS_ID] = -99.0
            words_all = np.arange(V, dtype=np.int64)[:, None]
            words = words_all[sel]
        elif with_words:
            sel = np.arange(len(keys))
            words_all = np.column_stack([words_prev[keys // V], keys % V])
            words = words_all
        else:
            sel = np.arange(len(keys))
            words_all = words = None
        prob = np.minimum(_through_arpa_text(lp[sel]), np.float32(0.0))
        if k < n:
            bo = _through_arpa_text(np.asarray(model.log10_backoff_[k - 1], dtype=np.float64)[sel])
            ext = np.zeros(len(keys), dtype=bool)
            ext[np.asarray(model.keys_[k]) // V] = True
            ext = ext[sel]
            bo = np.where(bo == 0, np.where(ext, np.float32(0.0), np.float32(-0.0)), bo).astype(np.float32)
        else:
            bo, ext = None, None
        out[k] = {"words": words, "prob": prob, "backoff": bo, "extends": ext}
        if k == 1:
            out[1]["row_of_id"] = np.full(V, -1, dtype=np.int64)
            out[1]["row_of_id"][sel] = np.arange(len(sel))
        words_prev = words_all
    return out


class _BitWriter:
    """Little-endian bit fields into a zeroed region (KenLM's WriteInt57, vectorised)."""

    def __init__(self, n_bytes: int) -> None:
        self.n_bytes = n_bytes
        self.words = np.zeros(n_bytes // 8 + 2, dtype=np.uint64)

    def write(self, bit_addr: np.ndarray, values: np.ndarray, length: int) -> None:
        if length == 0 or len(bit_addr) == 0:
            return
        a = np.asarray(bit_addr, dtype=np.uint64)
        v = np.asarray(values, dtype=np.uint64) & np.uint64((1 << length) - 1)
        q = (a >> np.uint64(6)).astype(np.int64)
        s = a & np.uint64(63)
        np.bitwise_or.at(self.words, q, v << s)
        spill = np.flatnonzero((s != 0) & (s + np.uint64(length) > np.uint64(64)))
        if len(spill):
            np.bitwise_or.at(self.words, q[spill] + 1, v[spill] >> (np.uint64(64) - s[spill]))

    def write_strided(self, first: int, stride: int, values: np.ndarray, length: int) -> None:
        """``values[i]`` at bit ``first + i * stride``: one field of every entry of an order."""
        from .. import accel

        if accel.fast is not None:
            accel.fast.or_bits(self.words, first, stride, np.ascontiguousarray(values, dtype=np.uint64), length)
        else:
            self.write(np.arange(len(values), dtype=np.uint64) * np.uint64(stride) + np.uint64(first), values, length)

    def tobytes(self) -> bytes:
        return self.words.tobytes()[:self.n_bytes]


def _make_bins(values: np.ndarray, bins: int) -> np.ndarray:
    """Centres of ``bins`` equal-count buckets of the sorted values (an empty bucket repeats the
    previous centre, or -inf first): KenLM's quantiser training."""
    v = np.sort(np.asarray(values, dtype=np.float32))
    centres = np.empty(bins, dtype=np.float32)
    n = len(v)
    start = 0
    for i in range(bins):
        finish = (n * (i + 1)) // bins
        if finish == start:
            centres[i] = centres[i - 1] if i else -np.inf
        else:
            # A running double sum in file order, divided in double by the float count, then narrowed.
            centres[i] = np.float32(np.cumsum(v[start:finish], dtype=np.float64)[-1] / float(np.float32(finish - start)))
        start = finish
    return centres


def _encode(centres: np.ndarray, values: np.ndarray, reserved: int) -> np.ndarray:
    """Index of the nearest centre at or above ``reserved`` (ties to the upper one, as KenLM)."""
    from .. import accel

    values = np.asarray(values, dtype=np.float32)
    if accel.fast is not None:
        return accel.fast.quant_encode(np.ascontiguousarray(centres, dtype=np.float32),
                                       np.ascontiguousarray(values), reserved)
    tail = centres[reserved:]
    pos = np.searchsorted(tail, values, side="left")
    out = pos + reserved
    last = len(centres) - 1
    out = np.where(pos >= len(tail), last, out)
    mid = (pos > 0) & (pos < len(tail))
    above = tail[np.minimum(pos, len(tail) - 1)]
    below = tail[np.maximum(pos - 1, 0)]
    closer_below = (values - below) < (above - values)  # float32 arithmetic, as KenLM's floats
    out = np.where(mid & closer_below, out - 1, out)
    out = np.where(pos == 0, reserved, out)
    return out.astype(np.uint64)


def _encode_backoff(centres: np.ndarray, values: np.ndarray) -> np.ndarray:
    values = np.asarray(values, dtype=np.float32)
    out = _encode(centres, values, 2)
    zero = values == 0
    ext = values.view(np.uint32) != np.uint32(0x80000000)
    out[zero] = np.where(ext[zero], 1, 0).astype(np.uint64)
    return out


def _sorted_vocab(words: list) -> tuple:
    """KenLM's trie vocabulary: <unk> is 0, the rest numbered in the order of their hashes."""
    hashes = np.array([_word_hash(w.encode("utf-8")) for w in words], dtype=np.uint64)
    is_unk = np.array([w in ("<unk>", "<UNK>") for w in words])
    if is_unk.sum() != 1:
        raise InputError("KenLM needs exactly one <unk> in the vocabulary", fix="train with the default vocabulary")
    others = np.flatnonzero(~is_unk)
    order = others[np.argsort(hashes[others], kind="stable")]
    if len(order) > 1 and np.any(np.diff(hashes[order].astype(np.uint64)) == 0):
        raise InputError("two vocabulary words have the same 64-bit hash", fix="report this model; KenLM cannot hold it")
    kid = np.empty(len(words), dtype=np.int64)
    kid[np.flatnonzero(is_unk)] = 0
    kid[order] = np.arange(1, len(order) + 1)
    return kid, hashes[order]


def _write_header(out: bytearray, counts: list, multiplier: float, model_type: int, include_vocab: bool, *,
                  search_version: int) -> None:
    """The fixed header: the test values, the parameters, one uint64 count per order."""
    out[0:len(SANITY)] = SANITY
    out[len(SANITY):len(SANITY) + FIXED_PARAMS.size] = FIXED_PARAMS.pack(len(counts), multiplier, model_type, include_vocab,
                                                             search_version)
    struct.pack_into(f"<{len(counts)}Q", out, len(SANITY) + FIXED_PARAMS.size, *counts)


def _vocab_strings(words: list, kid: np.ndarray) -> bytes:
    """The words NUL-terminated in KenLM's id order (<unk>, id 0, first): the file's last part."""
    by_kid = [None] * len(words)
    for w, k_id in zip(words, kid.tolist()):
        by_kid[k_id] = w
    return b"".join(w.encode("utf-8") + b"\0" for w in by_kid)


def _rows(a: np.ndarray) -> np.ndarray:
    """Each row of an int64 matrix as one opaque value (for set operations on n-grams)."""
    a = np.ascontiguousarray(a, dtype=np.int64)
    return a.view(np.dtype((np.void, 8 * a.shape[1]))).ravel()


class _Order:
    """The n-grams of one order for the trie: natural-order word ids, values, and a row index."""

    def __init__(self, words: np.ndarray, prob: np.ndarray, backoff) -> None:
        self.words, self.prob, self.backoff = words, prob, backoff
        self.sort = None

    def find(self, rows: np.ndarray) -> np.ndarray:
        """Index of each n-gram (rows of word ids) among these, -1 where absent."""
        if self.sort is None:
            self.keys = _rows(self.words)
            self.sort = np.argsort(self.keys, kind="stable")
            self.sorted = self.keys[self.sort]
        q = _rows(rows)
        if len(self.sorted) == 0 or len(q) == 0:
            return np.full(len(q), -1, dtype=np.int64)
        pos = np.minimum(np.searchsorted(self.sorted, q), len(self.sorted) - 1)
        return np.where(self.sorted[pos] == q, self.sort[pos], -1)


def _positions(sorted_keys: np.ndarray, queries: np.ndarray) -> np.ndarray:
    """Index of each query among ``sorted_keys`` (distinct, >= 0), -1 where absent.  The compiled hash
    when there is one: millions of random queries cost a third of a binary search's time."""
    from .. import accel
    from ..counts import lookup

    if accel.fast is not None and len(sorted_keys):
        return accel.fast.KeyIndex(sorted_keys).find_many(np.ascontiguousarray(queries, dtype=np.int64))
    return lookup(sorted_keys, queries)


def _closed_suffix_rows(model):
    """The model's suffix rows (``NgramTables.suffix_rows``) when every n-gram's suffix is an n-gram
    (models as estimated: then no blanks are needed), else None."""
    tables = getattr(model, "tables_", None)
    if tables is None:
        return None
    suf = tables.suffix_rows(lambda k, q: _positions(tables.keys[k - 1], q))
    return suf if all(x is None or bool(np.all(x >= 0)) for x in suf) else None



def _rows_by_suffix(model, suf: list, row_of_id: np.ndarray):
    """For a model closed under suffixes, per order k = 2..n: (k, each row's first word, its suffix's
    row in the writer's order k-1 -- unigram rows by ``row_of_id``).  An n-gram is its suffix with
    one more word in front, which is how both of KenLM's structures chain it."""
    V = len(model.vocab_)
    first = np.arange(V, dtype=np.int64)  # unigram rows are word ids
    for k in range(2, model.order_ + 1):
        first = first[np.asarray(model.keys_[k - 1], dtype=np.int64) // V]
        yield k, first, (suf[k - 1] if k > 2 else row_of_id[suf[1]])


def _add_blanks(orders: dict, n: int) -> dict:
    """KenLM's "blank" n-grams: where an n-gram's suffix (its words but the first) is not in the model
    (SRILM-style or entropy pruning keeps "a b c" without "b c"), the trie still needs that suffix as
    the path to it.  build_binary inserts it with the probability the model gives it by backing off --
    the probability of its longest suffix that is an n-gram, plus the back-off weights of its contexts
    from that length on, summed in float32 in order of length -- and a zero back-off.  Contexts
    that a blank's back-off sum reads get the 'extension' flag, as build_binary's messages set it.
    Returns per order the blank n-grams' rows (``orders`` gains them)."""
    blanks = {}
    for k in range(n, 1, -1):
        need = orders[k].words[:, 1:]
        if k in blanks and len(blanks[k]):
            need = np.concatenate([need, blanks[k][:, 1:]])
        missing = orders[k - 1].find(need) < 0
        if k - 1 == 1 and np.any(missing):
            raise InputError("an n-gram uses a word that is not a unigram of the model", fix="the model is damaged")
        got = need[missing]
        if len(got):
            u = np.unique(_rows(got), return_index=True)[1]
            blanks[k - 1] = got[np.sort(u)]
    flag_real = {k: np.zeros(len(orders[k].prob), dtype=bool) for k in range(1, n)}
    flag_blank = {}
    for j in sorted(blanks):
        B = blanks[j]
        prob = np.full(len(B), np.nan, dtype=np.float32)
        based_on = np.zeros(len(B), dtype=np.int64)
        for m in range(j - 1, 0, -1):
            todo = np.flatnonzero(based_on == 0)
            if not len(todo):
                break
            at = orders[m].find(B[todo, j - m:])
            hit = at >= 0
            prob[todo[hit]] = orders[m].prob[at[hit]]
            based_on[todo[hit]] = m
        for L in range(1, j):
            use = np.flatnonzero(based_on <= L)
            if not len(use):
                continue
            ctx = B[use, j - 1 - L:j - 1]
            at = orders[L].find(ctx)
            hit = at >= 0
            prob[use[hit]] = (prob[use[hit]] + orders[L].backoff[at[hit]]).astype(np.float32)
            flag_real[L][at[hit]] = True
            if not np.all(hit):  # a context that is itself a blank: it gets the extension flag
                flag_blank.setdefault(L, []).append(ctx[~hit])
        orders[j].blank_prob = prob
    for k, f in flag_real.items():
        bo = orders[k].backoff
        orders[k].backoff = np.where(f & (bo == 0), np.float32(0.0), bo).astype(np.float32)
    for j, B in blanks.items():
        bo = np.full(len(B), np.float32(-0.0), dtype=np.float32)
        if j in flag_blank:
            want = _Order(np.concatenate(flag_blank[j]), None, None)
            bo[want.find(B) >= 0] = np.float32(0.0)
        o = orders[j]
        o.words = np.concatenate([o.words, B])
        o.prob = np.concatenate([o.prob, o.blank_prob]).astype(np.float32)
        o.backoff = np.concatenate([o.backoff, bo]).astype(np.float32)
        o.n_blank = len(B)
        o.sort = None
    return blanks


def _trie_order(trie: dict, k: int, raw: np.ndarray, perm: np.ndarray, row: np.ndarray) -> None:
    """Order k of the trie from its packed keys (KenLM's row of the stored prefix * c0 + the first
    word) sorted by ``perm``; the order below learns where each entry's children begin."""
    packed = raw[perm]
    if len(packed) > 1 and np.any(packed[1:] == packed[:-1]):
        raise InputError(f"duplicate {k}-grams", fix="the model is damaged")
    parent = row[perm]
    pk = trie[k - 1]
    # parent is sorted: each order-(k-1) entry's children start where the ones before it end.
    pk["children_begin"] = np.concatenate([[0], np.cumsum(np.bincount(parent, minlength=len(pk["packed"])))])
    trie[k] = {"perm": perm, "packed": packed}


def trie_bytes(model, opts: BinaryOptions) -> bytes:
    """The bytes of a KenLM trie binary of ``model`` (an NgramLM or any back-off query object).

    Its steps: the n-grams in KenLM's word ids (blanks added where a pruned model lacks a suffix), the
    header and the vocabulary's hashes, each order's entries in KenLM's order, the quantisation tables,
    the unigram records, each higher order's bit-packed entries, the vocabulary's strings."""
    opts.check()
    absent = _absent_markers(model, opts)
    # A model closed under suffixes (as estimated) is laid out from its own rows: an n-gram's path in
    # KenLM's trie is its suffix's path plus its first word, and the suffix's row is known.  Otherwise
    # (pruned: blanks to insert) from the n-grams' words.
    suf = _closed_suffix_rows(model)
    g = model_ngrams(model, drop_ids=absent, with_words=suf is None)
    n = model.order_
    itos = model.vocab_.itos_
    uni_ids = g[1]["words"][:, 0]
    words = [itos[i] for i in uni_ids]
    c0 = len(words)
    kid_of_uni, sorted_hashes = _sorted_vocab(words)
    ours_to_k = np.full(len(itos), -1, dtype=np.int64)
    ours_to_k[uni_ids] = kid_of_uni
    ours_to_k[absent] = 0  # KenLM's <unk>
    if suf is None:
        # Everything below is in KenLM's word ids; blanks fill the suffixes a pruned model lacks.
        orders = {k: _Order(ours_to_k[g[k]["words"]], g[k]["prob"], g[k]["backoff"]) for k in range(1, n + 1)}
        _add_blanks(orders, n)
        g = {k: {"words": orders[k].words, "prob": orders[k].prob, "backoff": orders[k].backoff} for k in orders}
    counts = [c0] + [len(g[k]["prob"]) for k in range(2, n + 1)]
    quant = None
    if opts.prob_bits is not None:
        quant = (opts.prob_bits, opts.backoff_bits if opts.backoff_bits is not None else opts.prob_bits)
    vocab_size = 8 + 8 * c0
    start = header_size(n) + vocab_size
    L = trie_layout(n, counts, start, quant=quant, array_bits=opts.array_bits)
    out = bytearray(L.end)
    # Header (written as the last step of KenLM's build; here all at once).
    _write_header(out, counts, 1.5, opts.model_type, opts.include_vocab, search_version=1)
    # Vocabulary: the count of hashes (all but <unk>), then the sorted hashes.
    vo = header_size(n)
    struct.pack_into("<Q", out, vo, c0 - 1)
    out[vo + 8:vo + 8 + 8 * (c0 - 1)] = sorted_hashes.astype("<u8").tobytes()
    if suf is not None:
        trie = _trie_entries_by_suffix(model, g, suf, ours_to_k, c0)
    else:
        trie = _trie_entries_by_words(g, n, c0, words, kid_of_uni)
    centres = None if quant is None else _write_quant_tables(out, L.quant_offset, g, n, quant)
    _write_unigrams(out, L.unigram_offset, g, n, c0, trie[1])
    for k in range(2, n + 1):
        _write_trie_order(out, L, k, k == n, g[k], trie[k], c0, quant, centres, opts.array_bits)
    if opts.include_vocab:
        out += _vocab_strings(words, kid_of_uni)
    return bytes(out)


def _trie_entries_by_suffix(model, g: dict, suf: list, ours_to_k: np.ndarray, c0: int) -> dict:
    """Each order's entries in KenLM's order (sorted by the reversed n-gram, last word first) for a model
    closed under suffixes: ``{k: {"perm", "packed", "children_begin"}}`` (see :func:`_trie_order`)."""
    trie = {}
    kw = ours_to_k[g[1]["words"]]
    perm = np.argsort(kw[:, 0], kind="stable")
    trie[1] = {"perm": perm, "packed": kw[perm, 0]}
    for k, first, suffix in _rows_by_suffix(model, suf, g[1]["row_of_id"]):
        rank = np.empty(len(perm), dtype=np.int64)  # each row of order k-1: its place in KenLM's order
        rank[perm] = np.arange(len(perm))
        # KenLM's row of the n-gram's last k-1 words is its suffix's; the key adds the first word.
        row = rank[suffix]
        raw = row * c0 + ours_to_k[first]
        perm = np.argsort(raw)  # distinct keys (checked in _trie_order): an unstable sort is 4x faster
        _trie_order(trie, k, raw, perm, row)
    return trie


def _trie_entries_by_words(g: dict, n: int, c0: int, words: list, kid_of_uni: np.ndarray) -> dict:
    """Each order's entries in KenLM's order from the n-grams' words (already KenLM's ids, blanks added):
    ``{k: {"perm", "packed", "children_begin"}}`` (see :func:`_trie_order`)."""
    trie = {}
    kw = g[1]["words"]
    perm = np.argsort(kw[:, 0], kind="stable")
    trie[1] = {"perm": perm, "packed": kw[perm, 0]}
    for k in range(2, n + 1):
        kw = g[k]["words"]
        stored = kw[:, ::-1]
        # Row of the stored prefix (the n-gram's last k-1 words) in order k-1, by the chain of
        # packed (row, word) keys, each order's sorted.
        row = stored[:, 0]
        for j in range(2, k):
            pos = _positions(trie[j]["packed"], row * c0 + stored[:, j - 1])
            bad = pos < 0
            if np.any(bad):
                i = int(np.flatnonzero(bad)[0])
                gram = " ".join(words[int(np.flatnonzero(kid_of_uni == w)[0])] for w in g[k]["words"][i])
                raise InputError(f"the {k}-gram {gram!r} has no {j}-gram suffix in the model; KenLM's trie would "
                                 "insert a 'blank' n-gram for it, which this writer does not",
                                 fix="write a model closed under suffixes (unpruned, or pruned with "
                                     "`ngramlm prune`), or run build_binary on the exported ARPA")
            row = pos
        raw = row * c0 + stored[:, -1]
        _trie_order(trie, k, raw, np.argsort(raw), row)
    return trie


def _write_quant_tables(out: bytearray, at: int, g: dict, n: int, quant: tuple) -> dict:
    """The quantiser's tables at byte ``at``: per middle order the probability and back-off bin centres,
    then the highest order's probability centres.  Returns ``{k: (prob centres, back-off centres)}``."""
    pb, bb = quant
    struct.pack_into("<3B", out, at, 2, pb, bb)
    at += 8
    centres = {}
    for k in range(2, n):
        probs = g[k]["prob"]
        bos = g[k]["backoff"]
        pc = _make_bins(probs, 1 << pb)
        bc = np.empty(1 << bb, dtype=np.float32)
        bc[0] = np.float32(-0.0)
        bc[1] = np.float32(0.0)
        bc[2:] = _make_bins(bos[bos != 0], (1 << bb) - 2)
        centres[k] = (pc, bc)
        out[at:at + (4 << pb)] = pc.astype("<f4").tobytes()
        at += 4 << pb
        out[at:at + (4 << bb)] = bc.astype("<f4").tobytes()
        at += 4 << bb
    lc = _make_bins(g[n]["prob"], 1 << pb)
    centres[n] = (lc, None)
    out[at:at + (4 << pb)] = lc.astype("<f4").tobytes()
    return centres


def _write_unigrams(out: bytearray, at: int, g: dict, n: int, c0: int, entries: dict) -> None:
    """The unigram records at byte ``at``: prob, back-off (extension flag), next pointer; c0 + 2 records."""
    uni = np.zeros(c0 + 2, dtype=np.dtype([("prob", "<f4"), ("backoff", "<f4"), ("next", "<u8")]))
    perm1 = entries["perm"]
    uni["prob"][:c0] = g[1]["prob"][perm1]
    uni["backoff"][:c0] = g[1]["backoff"][perm1] if n > 1 else np.float32(-0.0)
    uni["next"][:c0 + 1] = entries["children_begin"]
    out[at:at + uni.nbytes] = uni.tobytes()


def _write_trie_order(out: bytearray, L, k: int, top: bool, gk: dict, entries: dict, c0: int,
                      quant: Optional[tuple], centres: Optional[dict], array_bits: int) -> None:
    """Order ``k``'s entries bit-packed into their region of layout ``L``: the word, the probability and
    (below the top) the back-off, plain or quantised, and the pointer to the children (its high bits in
    the array table where ``array_bits`` asks for one)."""
    wb = L.word_bits
    m = L.longest if top else L.middles[k - 2]
    perm = entries["perm"]
    count = len(perm)
    region = ((1 + count) * m["total_bits"] + 7) // 8 + 8
    bw = _BitWriter(region)
    tb = m["total_bits"]  # entry i's fields start at bit i * tb
    bw.write_strided(0, tb, entries["packed"] % c0, wb)
    prob = gk["prob"][perm]
    if quant is None:
        bw.write_strided(wb, tb, prob.view(np.uint32).astype(np.uint64) & np.uint64(0x7FFFFFFF), 31)
        if not top:
            bw.write_strided(wb + 31, tb, gk["backoff"][perm].view(np.uint32).astype(np.uint64), 32)
    elif top:
        bw.write_strided(wb, tb, _encode(centres[k][0], prob, 0), quant[0])
    else:
        pc, bc = centres[k]
        bw.write_strided(wb, tb, _encode_backoff(bc, gk["backoff"][perm]), quant[1])
        bw.write_strided(wb + quant[1], tb, _encode(pc, prob, 0), quant[0])
    if not top:
        nxt = entries["children_begin"].astype(np.uint64)  # count + 1 values
        inline = m["inline_bits"]
        if "array_offset" in m:
            high = (nxt >> np.uint64(inline)).astype(np.int64)
            table = np.searchsorted(high, np.arange(m["array_count"]), side="left").astype(np.uint64)
            table[0] = 0
            out[m["header"]:m["header"] + 2] = bytes([0, array_bits])
            a = m["array_offset"]
            out[a:a + 8 * m["array_count"]] = table.astype("<u8").tobytes()
            bw.write_strided(tb - inline, tb, nxt & np.uint64((1 << inline) - 1), inline)
        else:
            bw.write_strided(tb - inline, tb, nxt, inline)
    out[m["base"]:m["base"] + region] = bw.tobytes()


def write_binary(model, path: os.PathLike | str, opts: Optional[BinaryOptions] = None) -> None:
    """Write ``model`` as a KenLM binary file at ``path`` (atomically: a temporary file, then rename)."""
    opts = opts or BinaryOptions()
    opts.check()
    if opts.kind == "trie":
        data = trie_bytes(model, opts)
    else:
        data = probing_bytes(model, opts)
    with atomic_writer(path) as fh:
        fh.write(data)


def binary_from_native(native_path: os.PathLike | str, path: os.PathLike | str,
                       opts: Optional[BinaryOptions] = None) -> int:
    """A native model file (mapped) written as a KenLM binary (probing unless ``opts`` say otherwise);
    returns the file's size.  The streamed builds use it for ``-o NAME.binary``: they write the native
    file, and the binary is laid out from the whole model in memory (as ``build_binary`` lays it out)."""
    from ..io.native import load_native_tables
    from ..scorer import Scorer

    write_binary(Scorer(load_native_tables(native_path, mmap=True)[0]), path, opts or BinaryOptions(kind="probing"))
    return os.path.getsize(path)


# ------------------------------------------------------------------------------------- probing

def _probing_insert(n_buckets: int, keys: np.ndarray) -> tuple:
    """(table keys, bucket of each key) after inserting ``keys`` in order by linear probing."""
    from .. import accel

    table = np.zeros(n_buckets, dtype=np.uint64)
    keys = np.ascontiguousarray(keys, dtype=np.uint64)
    if np.any(keys == 0):
        raise InputError("an n-gram hashes to 0, KenLM's empty-bucket marker", fix="report this model")
    if accel.fast is not None:
        at = accel.fast.probing_insert(table, keys)
    else:
        at = np.empty(len(keys), dtype=np.int64)
        tk = table  # a plain loop: the layout depends on the insertion order, so no vectorising
        for i, key in enumerate(keys.tolist()):
            b = key % n_buckets
            while True:
                got = int(tk[b])
                if got == 0:
                    tk[b] = key
                    at[i] = b
                    break
                if got == key:
                    at[i] = -1
                    break
                b = b + 1 if b + 1 < n_buckets else 0
    if np.any(at < 0):
        raise InputError("two n-grams have the same 64-bit probing key", fix="use the trie data structure")
    return table, at


def probing_bytes(model, opts: BinaryOptions) -> bytes:
    """The bytes of a KenLM probing binary of ``model``: hash tables filled in the order of the
    ARPA file this toolkit writes, so the layout is the one ``build_binary`` makes from it."""
    from .read import LONGEST_DTYPE, MIDDLE_DTYPES, UNIGRAM_DTYPES, combine_word_hash
    from .format import probing_buckets, probing_layout

    opts.check()
    absent = _absent_markers(model, opts)
    suf = _closed_suffix_rows(model)  # closed under suffixes: keys from the rows (see trie_bytes)
    g = model_ngrams(model, drop_ids=absent, with_words=suf is None)
    n = model.order_
    if n < 2:
        raise InputError("KenLM binaries are bigram models or higher", fix="train with --order 2 or more")
    itos = model.vocab_.itos_
    uni_ids = g[1]["words"][:, 0]
    words = [itos[i] for i in uni_ids]
    c0 = len(words)
    counts = [c0] + [len(g[k]["prob"]) for k in range(2, n + 1)]
    mult = float(np.float32(opts.probing_multiplier))
    parts = probing_layout(n, counts, mult, 0)
    hs = header_size(n)
    out = bytearray(hs + parts["end"])
    _write_header(out, counts, mult, 0, opts.include_vocab, search_version=0)
    # Vocabulary: ids in ARPA order (<unk> is 0 and not in the table), keyed by MurmurHash64A.
    is_unk = np.array([w in ("<unk>", "<UNK>") for w in words])
    if is_unk.sum() != 1:
        raise InputError("KenLM needs exactly one <unk> in the vocabulary", fix="train with the default vocabulary")
    kid = np.zeros(c0, dtype=np.int64)
    kid[~is_unk] = np.arange(1, c0)
    ours_to_k = np.zeros(len(itos), dtype=np.int64)
    ours_to_k[uni_ids] = kid
    vb = probing_buckets(c0, mult)
    hashes = np.array([_word_hash(w.encode("utf-8")) for w, u in zip(words, is_unk) if not u], dtype=np.uint64)
    vkeys, vat = _probing_insert(vb, hashes)
    ventries = np.zeros(vb, dtype=np.dtype([("key", "<u8"), ("value", "<u4")]))
    ventries["key"] = vkeys
    ventries["value"][vat] = np.arange(1, c0)
    struct.pack_into("<II", out, hs, 0, c0)
    out[hs + 8:hs + 8 + ventries.nbytes] = ventries.tobytes()
    # Blanks (as in the trie; see _add_blanks): a pruned model's missing suffixes go into the tables
    # after the real n-grams of their order, in the order build_binary meets them -- the order
    # _add_blanks lists them in.  The header keeps the ARPA's counts: blanks use the spare buckets.
    orders = {k: _Order(ours_to_k[g[k]["words"]] if k == 1 or suf is None else None, g[k]["prob"], g[k]["backoff"])
              for k in range(1, n + 1)}
    if suf is None:
        _add_blanks(orders, n)
    # Sign bits: set on every probability ("does not extend left") except where the n-gram is the
    # suffix of a longer one (real or blank); back-off weights carry the extension flag.
    SIGN = np.uint32(0x80000000)
    extends_left = {}
    for k in range(1, n):
        extends_left[k] = np.zeros(len(orders[k].prob), dtype=bool)
        if suf is not None:  # the model's rows, in the order model_ngrams lists them (unigrams: no <pad>)
            at = suf[k] if k > 1 else g[1]["row_of_id"][suf[1]]  # suf[k]: the (k+1)-grams' suffix rows
        else:
            at = orders[k].find(orders[k + 1].words[:, 1:])
        if np.any(at < 0):
            raise InputError(f"a {k + 1}-gram's suffix is missing after adding blanks", fix="report this model")
        extends_left[k][at] = True
    uni = np.zeros(c0 + 1, dtype=UNIGRAM_DTYPES[0])
    p1 = orders[1].prob.view(np.uint32) | SIGN
    p1 = np.where(extends_left[1], p1 & ~SIGN, p1).astype(np.uint32) if n > 1 else p1
    uni["prob"][orders[1].words[:, 0]] = p1.view(np.float32)
    uni["backoff"][orders[1].words[:, 0]] = orders[1].backoff
    off, _ = parts["unigram"]
    out[hs + off:hs + off + uni.nbytes] = uni.tobytes()
    key = orders[1].words[:, 0].astype(np.uint64)  # unigram rows' keys: their KenLM ids
    chain = _rows_by_suffix(model, suf, g[1]["row_of_id"]) if suf is not None else None
    for k in range(2, n + 1):
        top = k == n
        o, nb = parts["longest"] if top else parts["middles"][k - 2]
        if chain is not None:
            # An n-gram's key extends its suffix's key by its first word (KenLM hashes last word first).
            _, first, suffix = next(chain)
            key = combine_word_hash(key[suffix], ours_to_k[first])
        else:
            kw = orders[k].words
            key = kw[:, -1].astype(np.uint64)
            for j in range(k - 2, -1, -1):
                key = combine_word_hash(key, kw[:, j])
        if len(key) >= nb:
            raise InputError(f"the {k}-grams and their blanks do not fit the probing table ({len(key)} in {nb} buckets)",
                             fix="raise the probing multiplier (-p 2.0), or use the trie")
        tkeys, at = _probing_insert(nb, key)
        dt = LONGEST_DTYPE if top else MIDDLE_DTYPES[0]
        table = np.zeros(nb, dtype=dt)
        table["key"] = tkeys
        p = orders[k].prob.astype(np.float32).view(np.uint32) | SIGN
        if not top:
            p = np.where(extends_left[k], p & ~SIGN, p).astype(np.uint32)
            table["backoff"][at] = orders[k].backoff
        table["prob"][at] = p.view(np.float32)
        out[hs + o:hs + o + table.nbytes] = table.tobytes()
    if opts.include_vocab:
        out += _vocab_strings(words, kid)
    return bytes(out)
