# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True, initializedcheck=False
"""Compiled KenLM binaries (optional: ``ngramlm.accel`` falls back to numpy/Python).

* ``ProbingTables`` and ``TrieTables``: the state API (``ngramlm._fast.state``) and a whole-text
  scorer over a KenLM probing or trie binary as it lies in its mapped file, KenLM's own searches.
* What writing them loops over: ``probing_insert`` (KenLM's linear-probing insert), ``or_bits`` (a
  trie order's bit fields), ``quant_encode`` (KenLM's quantiser), ``murmur_hash64a`` (the hash KenLM
  keys its vocabulary with).
"""
from libc.stdlib cimport malloc, free
from libc.string cimport memcpy, memmove
from libc.stdint cimport int64_t, uint64_t, uint32_t, uint8_t, int8_t
from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_GET_SIZE

from .common cimport ABI_VERSION, MAX_ORDER, _murmur64a, _hv_find
from .state cimport State, _StateModel

include "lazy_numpy.pxi"

ABI = ABI_VERSION
__all__ = ["ProbingTables", "TrieTables", "probing_insert", "or_bits", "quant_encode", "murmur_hash64a"]


# ----------------------------------------------------------------------------- memory reads issued ahead
cdef extern from *:
    """
    #if defined(__GNUC__) || defined(__clang__)
    #define ngramlm_prefetch(p) __builtin_prefetch((const void*)(p))
    #else
    #define ngramlm_prefetch(p) ((void)0)
    #endif
    """
    void _prefetch "ngramlm_prefetch"(const void* p) nogil


# ----------------------------------------------------------------------------- KenLM's vocabulary: words by their hash
def murmur_hash64a(bytes data):
    """MurmurHash64A (seed 0) of ``data``: the compiled twin of ``ngramlm.kenlm.write.murmur_hash64a``."""
    return _murmur64a(PyBytes_AS_STRING(data), PyBytes_GET_SIZE(data))


# ----------------------------------------------------------------------------- KenLM probing tables
def probing_insert(uint64_t[:] table_keys, const uint64_t[:] keys):
    """Insert ``keys`` in order into a linear-probing table (key 0 = empty bucket; bucket = key mod
    size, then the next one, wrapping), as KenLM's ProbingHashTable does.  Returns each key's
    bucket; -1 for a key already present (KenLM would keep the first)."""
    cdef Py_ssize_t nb = table_keys.shape[0], i, n = keys.shape[0]
    cdef uint64_t b, got, key
    out_a = np.empty(n, dtype=np.int64)
    cdef int64_t[:] out = out_a
    with nogil:
        for i in range(n):
            key = keys[i]
            b = key % <uint64_t>nb
            while True:
                got = table_keys[b]
                if got == 0:
                    table_keys[b] = key
                    out[i] = <int64_t>b
                    break
                if got == key:
                    out[i] = -1
                    break
                b += 1
                if b == <uint64_t>nb:
                    b = 0
    return out_a


# ----------------------------------------------------------------------------- bit fields of a KenLM trie
def or_bits(uint64_t[:] words, uint64_t first, uint64_t stride, const uint64_t[:] values, int length):
    """OR ``values[i]`` (its low ``length`` bits) into the little-endian bit array ``words`` at bit
    ``first + i * stride``: one field of every entry of a trie order (KenLM's WriteInt57)."""
    cdef Py_ssize_t i, n = values.shape[0], nw = words.shape[0]
    cdef uint64_t bit, q, sft, v
    cdef uint64_t mask = 0xFFFFFFFFFFFFFFFFULL if length >= 64 else ((1ULL << length) - 1)
    if length <= 0 or n == 0:
        return
    if (first + <uint64_t>(n - 1) * stride + <uint64_t>length + 63) // 64 >= <uint64_t>nw:
        raise ValueError("bit fields past the end of the array")
    with nogil:
        for i in range(n):
            bit = first + <uint64_t>i * stride
            q = bit >> 6
            sft = bit & 63
            v = values[i] & mask
            words[q] |= v << sft
            if sft != 0 and sft + <uint64_t>length > 64:
                words[q + 1] |= v >> (64 - sft)


def quant_encode(const float[:] centres, const float[:] values, int reserved):
    """The bin of each value: the nearest of ``centres[reserved:]`` (sorted), ties to the upper one,
    distances in float32 (KenLM's quantiser); below the first centre its bin, above the last the
    last.  kenlm_write._encode in one pass."""
    cdef Py_ssize_t i, n = values.shape[0], nc = centres.shape[0], lo, hi, mid
    cdef Py_ssize_t m = nc - reserved
    cdef float v, below, above, d_below, d_above
    out_a = np.empty(n, dtype=np.uint64)
    cdef uint64_t[:] out = out_a
    if m <= 0:
        raise ValueError("no centres above the reserved ones")
    with nogil:
        for i in range(n):
            v = values[i]
            if v != v:  # NaN sorts last, as numpy's searchsorted puts it
                out[i] = nc - 1
                continue
            lo = 0
            hi = m
            while lo < hi:  # the first centre >= v
                mid = (lo + hi) >> 1
                if centres[reserved + mid] < v:
                    lo = mid + 1
                else:
                    hi = mid
            if lo >= m:
                out[i] = nc - 1
            elif lo == 0:
                out[i] = reserved
            else:
                below = centres[reserved + lo - 1]
                above = centres[reserved + lo]
                d_below = v - below
                d_above = above - v
                out[i] = reserved + lo - 1 if d_below < d_above else reserved + lo
    return out_a

# ----------------------------------------------------------------------------- KenLM probing binaries: the state API
cdef packed struct _PMid:
    uint64_t key
    float prob
    float backoff

cdef packed struct _PLong:
    uint64_t key
    float prob

cdef packed struct _PUni:
    float prob
    float backoff

ctypedef union _F32:
    float f
    uint32_t i

cdef inline uint64_t _kcombine(uint64_t current, uint64_t nxt) noexcept nogil:
    return (current * 8978948897894561157ULL) ^ ((1 + nxt) * 17894857484156487943ULL)

cdef inline bint _kext(float backoff) noexcept nogil:
    cdef _F32 u
    u.f = backoff
    return u.i != 0x80000000U  # -0.0 is KenLM's "nothing extends this n-gram"

cdef inline float _kprob(float stored, bint* extends) noexcept nogil:
    cdef _F32 u
    u.f = stored
    extends[0] = (u.i & 0x80000000U) == 0  # the sign bit is clear where a longer n-gram ends here
    u.i = u.i | 0x80000000U
    return u.f


cdef class _KenlmTables(_StateModel):
    """What the state APIs over KenLM's two binary structures share: KenLM's word ids by ours, the
    check of a state handed in, and the state a score leaves (KenLM's: the word, as many earlier
    words as can still matter, and their back-off weights)."""

    cdef const int64_t* to_k
    cdef int64_t* own_ids
    cdef int64_t V
    cdef list arrays

    def __dealloc__(self):
        free(self.own_ids)

    cdef int _set_vocab(self, const uint8_t[:] buf, to_kenlm, dict stoi, int64_t unk_id, int64_t n_unigrams,
                        file_vocab) except -1:
        """Either this toolkit's ids (``to_kenlm``: ours -> KenLM's, kept alive in ``arrays``;
        ``stoi``: the words' ids; ``unk_id``), or -- ``file_vocab`` = (byte offset, entries, probing)
        of the binary's own vocabulary table, with ``to_kenlm`` and ``stoi`` None -- KenLM's ids, the
        words looked up by their hashes (no word strings are read: kenlm's way)."""
        cdef const int64_t[:] tk
        cdef int64_t i
        if file_vocab is None:
            tk = to_kenlm
            self.to_k = &tk[0]
            self.V = to_kenlm.shape[0]
            self.stoi = stoi
            self.unk = unk_id
        else:
            off, entries, probing = file_vocab
            if to_kenlm is not None or stoi is not None:
                raise ValueError("give file_vocab or to_kenlm and stoi, not both")
            if off + (12 if probing else 8) * entries > buf.shape[0]:
                raise ValueError("the vocabulary table runs past the end of the file")
            self.own_ids = <int64_t*>malloc(max(n_unigrams, 1) * sizeof(int64_t))
            if self.own_ids == NULL:
                raise MemoryError()
            for i in range(n_unigrams):
                self.own_ids[i] = i
            self.to_k = self.own_ids
            self.V = n_unigrams
            self.stoi = None
            self.unk = 0
            self.hv = &buf[off]
            self.hv_n = entries
            self.hv_probing = probing
            self.hv_bos = _hv_find(self.hv, self.hv_n, probing, b"<s>", 3)
            self.hv_eos = _hv_find(self.hv, self.hv_n, probing, b"</s>", 4)
        self.n_words = self.V
        return 0

    @property
    def sentence_ids(self):
        """(<s>, </s>) ids where words are looked up in the file's own vocabulary (KenLM's ids;
        0 where the file lacks one, as KenLM reads it)."""
        return self.hv_bos, self.hv_eos

    cdef void _next_state(self, State s, int64_t w, State out, int keep, const float* nb) noexcept:
        cdef int i
        if keep > 1:
            memmove(&out.r[1], &s.r[0], (keep - 1) * sizeof(int64_t))
        if keep > 0:
            out.r[0] = w
        for i in range(keep):
            out.b[i] = nb[i]
        out.length = keep
        out.hist = keep
        out.bowner = <const void*>self

    cdef int _check(self, State s) except -1:
        cdef int i
        if s.length > self.n - 1:
            raise ValueError(f"this state (rows={s.rows}) does not belong to this order-{self.n} model")
        for i in range(s.length):
            if s.r[i] < 0 or s.r[i] >= self.V:
                raise ValueError(f"this state (rows={s.rows}) does not belong to this model; start from "
                                 "BeginSentenceWrite/NullContextWrite of this model")
        return 0


cdef class ProbingTables(_KenlmTables):
    """The state API over a KenLM probing binary's mapped tables (``ngramlm.kenlm.read.ProbingSearch``),
    KenLM's own search: the key of an n-gram is a hash chain from its last word back, each table is
    probed linearly, and the search stops where an n-gram does not extend to the left.  States hold
    this toolkit's word ids, most recent first (as in ``Tables``), so sentences start the same way."""

    cdef const _PUni* uni
    cdef const _PMid* mid[MAX_ORDER]
    cdef uint64_t msize[MAX_ORDER]
    cdef const _PLong* longest
    cdef uint64_t lsize

    def __init__(self, const uint8_t[:] buf, owner, uint64_t unigram_offset, list middles, tuple longest, to_kenlm,
                 dict stoi, int64_t unk_id, int64_t n_unigrams, file_vocab=None):
        """``buf``: the whole file (``owner`` keeps its map alive); the unigram records at
        ``unigram_offset``; per middle order its table's (byte offset, buckets), and the top
        order's; the vocabulary as ``_KenlmTables._set_vocab`` takes it."""
        cdef int i
        cdef uint64_t off, nb
        self.n = len(middles) + 2
        if self.n > MAX_ORDER:
            raise ValueError(f"order {self.n} is above {MAX_ORDER}")
        self.arrays = [buf, owner, to_kenlm]
        if unigram_offset + (n_unigrams + 1) * sizeof(_PUni) > <uint64_t>buf.shape[0]:
            raise ValueError("the unigram records run past the end of the file")
        self.uni = <const _PUni*>&buf[unigram_offset]
        for i in range(len(middles)):
            off, nb = middles[i]
            if nb == 0 or off + nb * sizeof(_PMid) > <uint64_t>buf.shape[0]:
                raise ValueError(f"the order-{i + 2} table runs past the end of the file")
            self.mid[i + 2] = <const _PMid*>&buf[off]
            self.msize[i + 2] = nb
        off, nb = longest
        if nb == 0 or off + nb * sizeof(_PLong) > <uint64_t>buf.shape[0]:
            raise ValueError("the top order's table runs past the end of the file")
        self.longest = <const _PLong*>&buf[off]
        self.lsize = nb
        self._set_vocab(buf, to_kenlm, stoi, unk_id, n_unigrams, file_vocab)

    cdef inline const _PMid* _find_mid(self, int k, uint64_t key) noexcept nogil:
        cdef const _PMid* t = self.mid[k]
        cdef uint64_t nb = self.msize[k], b = key % nb
        while True:
            if t[b].key == key:
                return &t[b]
            if t[b].key == 0:
                return NULL
            b += 1
            if b == nb:
                b = 0

    cdef inline const _PLong* _find_long(self, uint64_t key) noexcept nogil:
        cdef const _PLong* t = self.longest
        cdef uint64_t nb = self.lsize, b = key % nb
        while True:
            if t[b].key == key:
                return &t[b]
            if t[b].key == 0:
                return NULL
            b += 1
            if b == nb:
                b = 0

    cdef void _ahead(self, const int64_t* tokens, const int64_t* pos, Py_ssize_t t) noexcept:
        """Prefetch every bucket the search at position ``t`` can probe: the keys depend on the words
        alone, not on what earlier searches found, so the searches find them arriving."""
        cdef int i, hist = 0, n = self.n
        cdef uint64_t node = <uint64_t>self.to_k[tokens[t]]
        _prefetch(&self.uni[node])
        if pos[t] != 0:
            while hist < n - 1 and t - hist - 1 >= 0 and pos[t - hist] == pos[t - hist - 1] + 1:
                hist += 1
        for i in range(hist):
            node = _kcombine(node, <uint64_t>self.to_k[tokens[t - 1 - i]])
            if i + 2 == n:
                _prefetch(&self.longest[node % self.lsize])
            else:
                _prefetch(&self.mid[i + 2][node % self.msize[i + 2]])

    cdef double _score(self, State s, int64_t w, State out, int* matched) noexcept:
        cdef int n = self.n, j = s.length, i, k, m = 1, keep, ncb = 0
        cdef float cb[MAX_ORDER]
        cdef float nb[MAX_ORDER]
        cdef uint64_t node, kw = <uint64_t>self.to_k[w]
        cdef const _PMid* e
        cdef const _PLong* el
        cdef bint extends
        cdef float lp
        if j > n - 1:
            j = n - 1
        # The back-off weights the context carries: in the state where this object wrote it (as
        # KenLM's state does), else looked up again.
        if j > 0 and s.bowner == <const void*>self:
            for i in range(j):
                cb[i] = <float>s.b[i]
            ncb = j
        elif j > 0:
            node = <uint64_t>self.to_k[s.r[0]]
            cb[0] = self.uni[node].backoff
            ncb = 1
            for i in range(1, j):
                node = _kcombine(node, <uint64_t>self.to_k[s.r[i]])
                e = self._find_mid(i + 1, node)
                if e == NULL:
                    break
                cb[ncb] = e.backoff
                ncb += 1
        lp = _kprob(self.uni[kw].prob, &extends)
        nb[0] = self.uni[kw].backoff
        keep = 1 if _kext(nb[0]) else 0
        node = kw
        for i in range(j):
            if not extends:
                break
            k = i + 2
            node = _kcombine(node, <uint64_t>self.to_k[s.r[i]])
            if k == n:
                el = self._find_long(node)
                if el != NULL:
                    lp = _kprob(el.prob, &extends)
                    m = n
                break
            e = self._find_mid(k, node)
            if e == NULL:
                break
            lp = _kprob(e.prob, &extends)
            m = k
            nb[k - 1] = e.backoff
            if _kext(e.backoff):
                keep = k
        for i in range(m - 1, ncb):
            lp += cb[i]
        self._next_state(s, w, out, keep, nb)
        matched[0] = m
        return lp



# ----------------------------------------------------------------------------- KenLM trie binaries: queries on the mapped file
# A trie file is scored where it lies: no n-gram is decoded, so loading costs what mapping the file
# costs and memory is the pages a text touches (KenLM's own way).  An n-gram's path runs from its
# last word back to its first: a word's unigram record holds the range of its order-2 children
# (the words that precede it), each child the range of its order-3 children, and so on.  Every
# order above 1 is a bit-packed array of (word, [back-off], prob, next pointer) entries, children
# of one parent sorted by word id.

cdef struct _TOrder:
    const uint8_t* base       # the order's first entry
    uint64_t total_bits       # bits per entry
    int word_bits
    uint64_t word_mask
    int prob_at               # bit offset of the probability in an entry
    int prob_bits             # 31 unquantised (the sign bit is implied), else the quantiser's
    uint64_t prob_mask
    int back_at
    int back_bits             # 32 unquantised, 0 at the top order
    uint64_t back_mask
    int next_at               # bit offset of the inline part of the next pointer
    int inline_bits
    uint64_t inline_mask
    const uint64_t* arr       # pointer compression: first entry of each high-bits value (NULL: none)
    uint64_t arr_n
    const float* ptab         # quantisation centres (NULL: unquantised)
    const float* btab
    int64_t n_words           # the vocabulary's size: every word id is below it
    uint64_t next_entries     # entries of the next order: no child pointer may pass it

cdef enum:
    GROUP = 32  # trie searches run side by side in TrieTables.score_padded

cdef struct _TWalk:  # one position's search in flight
    Py_ssize_t t
    int hist           # context words in view
    int k              # the order being searched
    int m              # the longest n-gram found so far
    int keep           # how many words the state after this position keeps
    int probes
    bint done
    int64_t key, lo, hi, vlo, vhi, at
    float prob
    float nb[MAX_ORDER]

cdef packed struct _TUni:
    float prob
    float backoff
    uint64_t next

cdef inline uint64_t _rd(const uint8_t* base, uint64_t bit, uint64_t mask) noexcept nogil:
    # Fields are at most 57 bits wide, so one unaligned 8-byte read holds any of them (each array
    # of the file is followed by 8 bytes of padding for this read).
    cdef uint64_t v
    memcpy(&v, base + (bit >> 3), 8)
    return (v >> (bit & 7)) & mask

cdef inline void _trange(const _TOrder* o, uint64_t i, uint64_t* begin, uint64_t* end) noexcept nogil:
    """The children of entry i: [next(i), next(i + 1)) in the next order (the entry after i holds
    the end).  With pointer compression a pointer's high bits are how many table values are <= its
    entry's index, less one: one binary search for i, then a step or two for i + 1."""
    cdef uint64_t at = i * o.total_bits + <uint64_t>o.next_at
    cdef uint64_t vb = _rd(o.base, at, o.inline_mask)
    cdef uint64_t ve = _rd(o.base, at + o.total_bits, o.inline_mask)
    cdef uint64_t lo = 0, n = o.arr_n, half
    if o.arr == NULL:
        begin[0] = vb
        end[0] = ve
        _tclamp(begin, end, o.next_entries)
        return
    # Branch-free binary search (a conditional move per step: the table is small and cached, so a
    # mispredicted branch per step would cost more than the reads).
    while n > 1:
        half = n >> 1
        lo = lo + half if o.arr[lo + half] <= i else lo
        n -= half
    lo += 1 if o.arr[lo] <= i else 0
    begin[0] = ((lo - 1) << o.inline_bits) | vb
    while lo < o.arr_n and o.arr[lo] <= i + 1:
        lo += 1
    end[0] = ((lo - 1) << o.inline_bits) | ve
    _tclamp(begin, end, o.next_entries)


cdef inline void _tclamp(uint64_t* begin, uint64_t* end, uint64_t entries) noexcept nogil:
    # A damaged file's pointer must not send a search outside the array (KenLM would read there):
    # such a range is empty, and the file gives wrong numbers instead of a crash.
    if end[0] > entries or begin[0] > end[0]:
        begin[0] = 0
        end[0] = 0


cdef inline int64_t _tfind(const _TOrder* o, uint64_t begin, uint64_t end, uint64_t word) noexcept nogil:
    """The index of ``word`` among entries [begin, end) (sorted by word), or -1.  Word ids of a
    trie are positions in a hash-sorted vocabulary, so they are uniform: interpolation search finds
    one in about two probes where binary search takes ~log2(children).  The bounds start as the
    range's ends with the values -1 and the vocabulary's size, so no probe is spent on reading them."""
    cdef int64_t lo = <int64_t>begin - 1, hi = <int64_t>end, at
    cdef int64_t vlo = -1, vhi = o.n_words, w, key = <int64_t>word
    cdef int probes = 0
    # Invariant: the answer, if any, lies strictly between lo and hi, and vlo < key < vhi.
    while hi - lo > 1:
        if probes < 8:
            at = lo + 1 + <int64_t>((<double>(key - vlo - 1) / <double>(vhi - vlo - 1)) * <double>(hi - lo - 1))
            if at >= hi:
                at = hi - 1
            probes += 1
        else:  # a skewed range: bisect
            at = lo + ((hi - lo) >> 1)
        w = <int64_t>_rd(o.base, <uint64_t>at * o.total_bits, o.word_mask)
        if w == key:
            return at
        if w < key:
            lo, vlo = at, w
        else:
            hi, vhi = at, w
    return -1


cdef inline float _tprob(const _TOrder* o, uint64_t i) noexcept nogil:
    cdef uint64_t v = _rd(o.base, i * o.total_bits + <uint64_t>o.prob_at, o.prob_mask)
    cdef _F32 u
    if o.ptab != NULL:
        return o.ptab[v]
    u.i = <uint32_t>v | 0x80000000U
    return u.f

cdef inline float _tback(const _TOrder* o, uint64_t i) noexcept nogil:
    cdef uint64_t v = _rd(o.base, i * o.total_bits + <uint64_t>o.back_at, o.back_mask)
    cdef _F32 u
    if o.btab != NULL:
        return o.btab[v]
    u.i = <uint32_t>v
    return u.f


cdef class TrieTables(_KenlmTables):
    """The state API and a whole-text scorer over a KenLM trie binary as it lies in its mapped file,
    KenLM's search: from the word's unigram down its children, one context word per order, and the
    context's back-off weights kept in the state.  Sums are float32, as KenLM's, so a score equals
    the kenlm module's to the bit.  States hold this toolkit's word ids, most recent first."""

    cdef const _TUni* uni
    cdef _TOrder ords[MAX_ORDER + 1]   # index k: order k (2..n)

    def __init__(self, const uint8_t[:] buf, owner, int order, uint64_t unigram_offset, int word_bits,
                 list orders, to_kenlm, dict stoi, int64_t unk_id, int64_t n_unigrams, file_vocab=None):
        """``buf``: the whole file; ``orders``: per order 2..n a dict of its layout (``base``,
        ``entries``, ``total_bits``, ``inline_bits``, ``quant_bits``, and where present ``array_offset``/
        ``array_count``, ``ptab``/``btab`` offsets of the quantisation centres); the vocabulary as
        ``_KenlmTables._set_vocab`` takes it."""
        cdef int k, pb, bb
        cdef _TOrder* o
        if not 2 <= order <= MAX_ORDER:
            raise ValueError(f"order {order} is outside 2..{MAX_ORDER}")
        if len(orders) != order - 1:
            raise ValueError(f"{len(orders)} order layouts for an order-{order} trie")
        cdef uint64_t i
        self.n = order
        self.arrays = [buf, owner, to_kenlm]
        if unigram_offset + (n_unigrams + 2) * sizeof(_TUni) > <uint64_t>buf.shape[0]:
            raise ValueError("the KenLM binary's unigram records run past the end of the file")
        self.uni = <const _TUni*>&buf[unigram_offset]
        # The search reads the unigrams' child pointers unchecked, so a damaged file is refused here
        # (the deeper orders' pointers are clamped to their arrays as they are read).
        if self.uni[0].next != 0 or self.uni[n_unigrams].next != <uint64_t>orders[0]["entries"]:
            raise ValueError("the KenLM binary's unigram pointers are inconsistent")
        for i in range(<uint64_t>n_unigrams):
            if self.uni[i].next > self.uni[i + 1].next:
                raise ValueError("the KenLM binary's unigram pointers are inconsistent")
        for k in range(2, order + 1):
            d = orders[k - 2]
            o = &self.ords[k]
            o.base = &buf[d["base"]]
            o.total_bits = d["total_bits"]
            o.word_bits = word_bits
            o.word_mask = (1ULL << word_bits) - 1
            o.n_words = n_unigrams
            quant = d.get("ptab") is not None
            top = k == order
            o.next_entries = 0 if top else d["next_entries"]
            if quant:
                pb, bb = d["prob_bits"], (0 if top else d["back_bits"])
                o.ptab = <const float*>&buf[d["ptab"]]
                o.btab = NULL if top else <const float*>&buf[d["btab"]]
                o.back_at, o.back_bits = word_bits, bb
                o.prob_at, o.prob_bits = word_bits + bb, pb
            else:
                o.ptab = NULL
                o.btab = NULL
                o.prob_at, o.prob_bits = word_bits, 31
                o.back_at, o.back_bits = word_bits + 31, (0 if top else 32)
            o.prob_mask = (1ULL << o.prob_bits) - 1
            o.back_mask = (1ULL << o.back_bits) - 1
            o.inline_bits = 0 if top else d["inline_bits"]
            o.inline_mask = (1ULL << o.inline_bits) - 1
            o.next_at = o.total_bits - o.inline_bits
            if not top and d.get("array_offset") is not None:
                o.arr = <const uint64_t*>&buf[d["array_offset"]]
                o.arr_n = d["array_count"]
            else:
                o.arr = NULL
                o.arr_n = 0
        self._set_vocab(buf, to_kenlm, stoi, unk_id, n_unigrams, file_vocab)

    cdef inline float _walk(self, uint64_t kw, const int64_t* ctx, int nctx, float* nb, int* keep,
                            int* matched) noexcept nogil:
        """log10 p of KenLM word ``kw`` after ``ctx`` (our ids, most recent first): the longest
        n-gram's value, without the context's back-offs.  ``nb``: the back-offs of the n-grams found
        (by length), the next state's; ``keep``: how many words the next state keeps."""
        cdef const _TUni* u = &self.uni[kw]
        cdef float prob = u.prob
        cdef uint64_t begin = u.next, end = self.uni[kw + 1].next
        cdef int i, k, n = self.n, m = 1
        cdef int64_t at
        cdef const _TOrder* o
        cdef float b
        nb[0] = u.backoff
        keep[0] = 1 if _kext(u.backoff) else 0
        for i in range(nctx):
            if begin >= end:  # no longer n-gram ends in this one
                break
            k = i + 2
            o = &self.ords[k]
            at = _tfind(o, begin, end, <uint64_t>self.to_k[ctx[i]])
            if at < 0:
                break
            prob = _tprob(o, <uint64_t>at)
            m = k
            if k == n:
                break
            b = _tback(o, <uint64_t>at)
            nb[k - 1] = b
            if _kext(b):
                keep[0] = k
            _trange(o, <uint64_t>at, &begin, &end)
        matched[0] = m
        return prob

    cdef int _context(self, const int64_t* ctx, int nctx, float* cb) noexcept nogil:
        """The back-offs of a state's n-grams (``ctx``, most recent first) read from the trie, for
        a state this object did not write; returns how many were found."""
        cdef uint64_t kw = <uint64_t>self.to_k[ctx[0]]
        cdef uint64_t begin = self.uni[kw].next, end = self.uni[kw + 1].next
        cdef int i
        cdef int64_t at
        cdef const _TOrder* o
        cb[0] = self.uni[kw].backoff
        for i in range(1, nctx):
            o = &self.ords[i + 1]
            at = _tfind(o, begin, end, <uint64_t>self.to_k[ctx[i]])
            if at < 0:
                return i
            cb[i] = _tback(o, <uint64_t>at)
            _trange(o, <uint64_t>at, &begin, &end)
        return nctx

    cdef double _score(self, State s, int64_t w, State out, int* matched) noexcept:
        cdef int j = s.length, i, keep, m, ncb
        cdef float cb[MAX_ORDER]
        cdef float nb[MAX_ORDER]
        cdef float lp
        if j > self.n - 1:
            j = self.n - 1
        if j > 0 and s.bowner == <const void*>self:
            for i in range(j):
                cb[i] = <float>s.b[i]
            ncb = j
        elif j > 0:
            ncb = self._context(s.r, j, cb)
        else:
            ncb = 0
        lp = self._walk(<uint64_t>self.to_k[w], s.r, ncb, nb, &keep, &m)
        for i in range(m - 1, ncb):
            lp += cb[i]
        self._next_state(s, w, out, keep, nb)
        matched[0] = m
        return lp


    cdef void _score_run(self, const int64_t* tokens, const int64_t* pos, Py_ssize_t T, double* lpv,
                         int8_t* mv) noexcept:
        """score_padded's work, KenLM's search over the trie for many positions at once.

        A search is a chain of dependent reads into a file far larger than the cache, so one word at
        a time waits on memory at every probe.  The context of every position is known in advance,
        though, so the searches of ``GROUP`` positions run side by side: each round issues one probe
        per search and prefetches it, and the next round reads what has arrived by then.  Each
        search goes as deep as the history allows instead of as deep as the previous state kept:
        what lies beyond the state's words cannot be found (no n-gram extends those contexts), and
        their back-offs are exactly 0, so the numbers are the state API's."""
        cdef Py_ssize_t t, g0, g1
        cdef _TWalk ws[GROUP]
        cdef _TWalk* wk
        cdef float prev_nb[MAX_ORDER]
        cdef int prev_keep = 0, i, j, active, run = 0, n = self.n
        cdef float lp
        g0 = 0
        while g0 < T:
            g1 = g0 + GROUP
            if g1 > T:
                g1 = T
            for t in range(g0, g1):
                _prefetch(&self.uni[self.to_k[tokens[t]]])
            # Start every search of the group: its word's unigram record, its history length.
            for t in range(g0, g1):
                wk = &ws[t - g0]
                if pos[t] == 0:
                    run = 0
                elif t > 0 and pos[t] == pos[t - 1] + 1:
                    run += 1
                else:
                    run = 0
                self._walk_start(wk, tokens, t, (0 if pos[t] == 0 else (run if run < n - 1 else n - 1)))
            # Rounds: each live search reads its last probe and issues (prefetches) the next.
            active = g1 - g0
            while active > 0:
                active = 0
                for j in range(g1 - g0):
                    if not ws[j].done:
                        self._walk_step(&ws[j], tokens)
                        if not ws[j].done:
                            active += 1
            # In order: add the back-offs of the state the previous position leaves.
            for t in range(g0, g1):
                wk = &ws[t - g0]
                if pos[t] == 0:  # <s>: history only (BeginSentenceWrite keeps it whatever it is)
                    lpv[t] = 0.0
                    mv[t] = 1
                    prev_nb[0] = wk.nb[0]
                    prev_keep = 1 if n > 1 else 0
                    continue
                if t == 0 or pos[t] != pos[t - 1] + 1:
                    prev_keep = 0
                lp = wk.prob
                for i in range(wk.m - 1, prev_keep):
                    lp += prev_nb[i]
                lpv[t] = lp
                mv[t] = <int8_t>wk.m
                for i in range(wk.keep):
                    prev_nb[i] = wk.nb[i]
                prev_keep = wk.keep
            g0 = g1

    cdef inline void _walk_start(self, _TWalk* wk, const int64_t* tokens, Py_ssize_t t, int hist) noexcept nogil:
        cdef uint64_t kw = <uint64_t>self.to_k[tokens[t]]
        cdef const _TUni* u = &self.uni[kw]
        wk.t = t
        wk.hist = hist
        wk.prob = u.prob
        wk.nb[0] = u.backoff
        wk.keep = 1 if _kext(u.backoff) else 0
        wk.m = 1
        wk.k = 1
        wk.at = -1
        wk.done = False
        self._walk_descend(wk, tokens, u.next, self.uni[kw + 1].next)

    cdef inline void _walk_descend(self, _TWalk* wk, const int64_t* tokens, uint64_t begin, uint64_t end) noexcept nogil:
        """Go down one order: set up the search of the next context word among [begin, end)."""
        cdef const _TOrder* o
        if wk.k >= wk.hist + 1 or begin >= end:
            wk.done = True
            return
        wk.k += 1
        o = &self.ords[wk.k]
        wk.key = self.to_k[tokens[wk.t - (wk.k - 1)]]
        wk.lo = <int64_t>begin - 1
        wk.hi = <int64_t>end
        wk.vlo = -1
        wk.vhi = o.n_words
        wk.probes = 0
        self._walk_issue(wk)

    cdef inline void _walk_issue(self, _TWalk* wk) noexcept nogil:
        """Choose the next probe (interpolation, as _tfind) and prefetch it; done if the range is empty."""
        cdef const _TOrder* o = &self.ords[wk.k]
        cdef int64_t at
        if wk.hi - wk.lo <= 1:
            wk.done = True
            return
        if wk.probes < 8:
            at = wk.lo + 1 + <int64_t>((<double>(wk.key - wk.vlo - 1) / <double>(wk.vhi - wk.vlo - 1)) *
                                       <double>(wk.hi - wk.lo - 1))
            if at >= wk.hi:
                at = wk.hi - 1
        else:
            at = wk.lo + ((wk.hi - wk.lo) >> 1)
        wk.probes += 1
        wk.at = at
        _prefetch(o.base + ((<uint64_t>at * o.total_bits) >> 3))

    cdef inline void _walk_step(self, _TWalk* wk, const int64_t* tokens) noexcept nogil:
        cdef const _TOrder* o = &self.ords[wk.k]
        cdef uint64_t at = <uint64_t>wk.at, begin, end
        cdef int64_t v = <int64_t>_rd(o.base, at * o.total_bits, o.word_mask)
        cdef float b
        if v < wk.key:
            wk.lo, wk.vlo = wk.at, v
            self._walk_issue(wk)
            return
        if v > wk.key:
            wk.hi, wk.vhi = wk.at, v
            self._walk_issue(wk)
            return
        # Found the context word at this order.
        wk.prob = _tprob(o, at)
        wk.m = wk.k
        if wk.k == self.n:
            wk.done = True
            return
        b = _tback(o, at)
        wk.nb[wk.k - 1] = b
        if _kext(b):
            wk.keep = wk.k
        _trange(o, at, &begin, &end)
        self._walk_descend(wk, tokens, begin, end)
