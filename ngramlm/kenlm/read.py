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
machine of the same byte order.  The format itself -- the header, where each part of a file lies,
the mapped file -- is :mod:`ngramlm.kenlm.format`; this module decodes what lies there.
"""
from __future__ import annotations

import os

import numpy as np

from corpora.errors import InputError
from corpora.vocab import BOS_ID, EOS_ID, UNK_ID

from .format import BinaryFile, probing_file_layout, trie_file_layout


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


# ---------------------------------------------------------------------------------------- trie

def _read_next(bf: BinaryFile, bits: _Bits, m: dict, entry_bits: np.ndarray) -> np.ndarray:
    inline = bits.read(np.uint64(m["base"] * 8) + entry_bits + np.uint64(m["total_bits"] - m["inline_bits"]),
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
    L = trie_file_layout(bf)
    quant, array_bits = L.quant, L.array_bits
    start = L.quant_offset
    bits = _Bits(bf.buf)
    if quant is not None:
        pb, bb = quant
        at = start + 8
        tables = []
        for _ in range(h.order - 2):
            pt = bits.floats(at, 1 << pb)
            at += 4 << pb
            bt = bits.floats(at, 1 << bb)
            at += 4 << bb
            tables.append((pt, bt))
        longest_table = bits.floats(at, 1 << pb)
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
        word = bits.read(base_bits + j_bits, wb).astype(np.int64)
        vbits = base_bits + j_bits + np.uint64(wb)
        if quant is None:
            prob = _nonpositive31(bits.read(vbits, 31))
            backoff = None if top else _as_f32(bits.read(vbits + np.uint64(31), 32))
        elif top:
            prob = longest_table[bits.read(vbits, quant[0]).astype(np.int64)]
            backoff = None
        else:
            pt, bt = tables[k - 2]
            backoff = bt[bits.read(vbits, quant[1]).astype(np.int64)]
            prob = pt[bits.read(vbits + np.uint64(quant[1]), quant[0]).astype(np.int64)]
        parent = np.searchsorted(parent_next, np.arange(n, dtype=np.int64), side="right") - 1
        path = np.column_stack([path[parent], word])
        out[k] = {"words": path[:, ::-1], "prob": np.asarray(prob, dtype=np.float32),
                  "backoff": None if top else np.asarray(backoff, dtype=np.float32)}
        if not top:
            parent_next = _read_next(bf, bits, m, np.arange(n + 1, dtype=np.uint64) * np.uint64(m["total_bits"]))
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
    n_sorted = int(np.frombuffer(bf.buf, dtype="<u8", count=1, offset=h.size)[0])
    L = trie_file_layout(bf)
    words_k = _vocab_words(bf.buf, L.end, n_sorted + 1, bf.path)
    if h.counts[0] != len(words_k):
        raise InputError(f"the header counts {h.counts[0]} unigrams but the file lists {len(words_k)} words",
                         path=bf.path, fix="the file is damaged: rebuild it with build_binary")
    return L, words_k


def read_trie_tables(path: os.PathLike | str):
    """A KenLM trie binary (any of its four variants) as :class:`~ngramlm.tables.NgramTables`."""
    from ..io.arpa import arpa_tables, arpa_vocab

    with BinaryFile(path) as bf:
        h = bf.header
        h_counts = list(h.counts)
        L, words_k = trie_structure(bf)
        quant, array_bits = L.quant, L.array_bits
        dec = decode_trie(bf)
    vocab = arpa_vocab(words_k, "<unk>", "<s>", "</s>")
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
    tables = arpa_tables(vocab, keys_l, lp_l, bo_l, h_counts, os.fspath(path))
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


UNIGRAM_DTYPES = {0: np.dtype([("prob", "<f4"), ("backoff", "<f4")]),
        1: np.dtype([("prob", "<f4"), ("backoff", "<f4"), ("rest", "<f4")])}
MIDDLE_DTYPES = {0: np.dtype([("key", "<u8"), ("prob", "<f4"), ("backoff", "<f4")]),
        1: np.dtype([("key", "<u8"), ("prob", "<f4"), ("backoff", "<f4"), ("rest", "<f4")])}
LONGEST_DTYPE = np.dtype([("key", "<u8"), ("prob", "<f4")])
_SIGN = np.uint32(0x80000000)


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
        buf = self.file.buf
        self.offsets = P = probing_file_layout(self.file)  # absolute, as _fast.kenlm.ProbingTables takes them
        off, n = P["unigram"]
        self.unigram = np.frombuffer(buf, dtype=UNIGRAM_DTYPES[h.model_type], count=n, offset=off)
        self.middles = [np.frombuffer(buf, dtype=MIDDLE_DTYPES[h.model_type], count=nb, offset=o) for o, nb in P["middles"]]
        o, nb = P["longest"]
        self.longest = np.frombuffer(buf, dtype=LONGEST_DTYPE, count=nb, offset=o)
        self.words = _vocab_words(buf, P["end"], P["vocab_bound"], self.file.path)

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
        # KenLM's arithmetic: float32 values summed in float32, the match's log10 p first, then each
        # context's back-off from the shortest up (as the compiled search does; float64 sums differed
        # from it by up to 4e-7).
        lp = prob.astype(np.float32)
        matched = np.ones(T, dtype=np.int8)
        ctx_found = [None, found]  # per length: the n-gram ending here exists (and every shorter one)
        ctx_bo = [None, backoff.astype(np.float32)]
        key = kid.copy()
        alive = extends.copy()
        for k in range(2, n + 1):
            prev = np.zeros(T, dtype=np.uint64)
            prev[k - 1:] = kid[:T - k + 1]
            key = combine_word_hash(key, prev)
            cand = np.flatnonzero(alive & (pos >= k - 1))
            f = np.zeros(T, dtype=bool)
            bo = np.zeros(T, dtype=np.float32)
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
        return lp.astype(np.float64), matched

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
        lp = np.float32(lp)  # KenLM sums its float32 values in float32, the shortest context's back-off first
        for i in range(m - 1, len(cb)):
            lp = np.float32(lp + np.float32(cb[i]))
        return float(lp), m, ((word,) + tuple(context[:keep - 1]))[:keep]


_MASK64 = (1 << 64) - 1


def _combine1(current: int, next_word: int) -> int:
    return ((current * 8978948897894561157) ^ ((1 + next_word) * 17894857484156487943)) & _MASK64


def _has_extension(backoff) -> bool:
    return int(np.float32(backoff).view(np.uint32)) != 0x80000000
