# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True, initializedcheck=False
"""Compiled passes over token streams (optional: ``ngramlm.accel`` falls back to numpy/Python).

* ``Spooler``: the tokenizing pass of a streamed build, whitespace tokens of UTF-8 text blocks to ids.
* ``sa_count_many``, ``sa_range``, ``sa_infini``: the ∞-gram's searches in a suffix array over the
  indexed token stream.
"""
from libc.stdlib cimport malloc, realloc, free
from libc.string cimport memcpy, memcmp, memset
from libc.stdint cimport int64_t, uint64_t, int32_t, uint32_t, uint16_t, uint8_t
from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_GET_SIZE

from .common cimport ABI_VERSION, FIB, _fnv

include "lazy_numpy.pxi"

ABI = ABI_VERSION
__all__ = ["Spooler", "sa_count_many", "sa_range", "sa_infini"]


# ----------------------------------------------------------------------------- training text -> ids
cdef inline bint _ascii_space(unsigned char c) noexcept nogil:
    # What str.split() splits on among single bytes: \t \n \v \f \r, the separators \x1c-\x1f, space.
    return c == 32 or (9 <= c <= 13) or (28 <= c <= 31)


cdef class Spooler:
    """The tokenizing pass of a streamed build in C: whitespace tokens of UTF-8 text blocks to
    provisional ids (first seen; id 0 = a line end), the same ids ``str.split()`` and a dict give.

    New words are appended to ``words`` (a list whose item 0 stands for the line end).  Only for
    blocks whose whitespace is all ASCII -- the caller checks, and tokenizes any other block in
    Python -- since a multi-byte space (U+00A0, U+3000, ...) is whitespace to ``str.split()``."""

    cdef char* arena
    cdef Py_ssize_t arena_len, arena_cap
    cdef int64_t* offs  # by id: the spelling's start in the arena
    cdef int32_t* lens
    cdef uint64_t* hashes
    cdef int32_t* slots  # open addressing: an id, or -1
    cdef uint64_t mask
    cdef Py_ssize_t n, cap
    cdef public list words

    def __cinit__(self, list words):
        self.arena = NULL; self.offs = NULL; self.lens = NULL; self.hashes = NULL; self.slots = NULL
        if len(words) != 1:
            raise ValueError("Spooler starts from the line-end entry alone")
        self.words = words
        self.n = len(words)  # ids below n are taken (0: the line end, never looked up)
        self.cap = 0
        self.arena_len = self.arena_cap = 0
        self._grow_ids(max(1024, 2 * self.n))
        self.mask = 0
        self._rehash(4096)

    def __dealloc__(self):
        free(self.arena); free(self.offs); free(self.lens); free(self.hashes); free(self.slots)

    cdef int _grow_ids(self, Py_ssize_t cap) except -1:
        cdef int64_t* o = <int64_t*>realloc(self.offs, cap * sizeof(int64_t))
        if o == NULL:
            raise MemoryError()
        self.offs = o
        cdef int32_t* l = <int32_t*>realloc(self.lens, cap * sizeof(int32_t))
        if l == NULL:
            raise MemoryError()
        self.lens = l
        cdef uint64_t* h = <uint64_t*>realloc(self.hashes, cap * sizeof(uint64_t))
        if h == NULL:
            raise MemoryError()
        self.hashes = h
        self.cap = cap
        return 0

    cdef int _rehash(self, uint64_t size) except -1:
        cdef int32_t* slots = <int32_t*>malloc(size * sizeof(int32_t))
        if slots == NULL:
            raise MemoryError()
        memset(slots, 0xFF, size * sizeof(int32_t))
        cdef uint64_t mask = size - 1, j
        cdef Py_ssize_t i
        for i in range(1, self.n):
            j = (self.hashes[i] >> 20) & mask  # the probe start of _id
            while slots[j] >= 0:
                j = (j + 1) & mask
            slots[j] = <int32_t>i
        free(self.slots)
        self.slots = slots
        self.mask = mask
        return 0

    cdef int32_t _id(self, const char* w, Py_ssize_t wl) except -1:
        cdef uint64_t h = _fnv(w, wl) * FIB
        cdef uint64_t j = (h >> 20) & self.mask
        cdef int32_t i
        while True:
            i = self.slots[j]
            if i < 0:
                break
            if self.hashes[i] == h and self.lens[i] == wl and memcmp(self.arena + self.offs[i], w, wl) == 0:
                return i
            j = (j + 1) & self.mask
        # a new word
        if self.n >= 0x7FFFFFFF:
            raise OverflowError("more than 2**31 distinct tokens")
        if self.n == self.cap:
            self._grow_ids(2 * self.cap)
        cdef Py_ssize_t need = self.arena_len + wl
        cdef char* a
        if need > self.arena_cap:
            a = <char*>realloc(self.arena, max(need, 2 * self.arena_cap, 1 << 16))
            if a == NULL:
                raise MemoryError()
            self.arena = a
            self.arena_cap = max(need, 2 * self.arena_cap, 1 << 16)
        memcpy(self.arena + self.arena_len, w, wl)
        i = <int32_t>self.n
        self.offs[i] = self.arena_len
        self.lens[i] = <int32_t>wl
        self.hashes[i] = h
        self.arena_len = need
        self.slots[j] = i
        self.n += 1
        self.words.append(w[:wl].decode("utf-8"))
        if <uint64_t>(2 * self.n) > self.mask:  # keep the load under one half
            self._rehash(2 * (self.mask + 1))
        return i

    def ids(self, bytes data, bint keep_empty):
        """int32 ids of ``data``'s tokens, a 0 after each line (a line without tokens only with
        ``keep_empty``), as ``" \\x00 ".join(lines).split()`` would number them."""
        cdef const unsigned char* p = <const unsigned char*>PyBytes_AS_STRING(data)
        cdef Py_ssize_t n = PyBytes_GET_SIZE(data), i = 0, j, m = 0
        out = np.empty(n + 1, dtype=np.int32)
        cdef int32_t[:] o = out
        cdef bint has = False
        cdef unsigned char c
        while i < n:
            c = p[i]
            if c == 10:
                if keep_empty or has:
                    o[m] = 0
                    m += 1
                has = False
                i += 1
            elif _ascii_space(c):
                i += 1
            else:
                j = i + 1
                while j < n and not _ascii_space(p[j]):
                    j += 1
                o[m] = self._id(<const char*>p + i, j - i)
                m += 1
                has = True
                i = j
        if n and p[n - 1] != 10 and (keep_empty or has):  # a last line without its newline
            o[m] = 0
            m += 1
        return out[:m].copy()


# ----------------------------------------------------------------------------- suffix-array queries (∞-gram)
ctypedef fused tok_t:
    uint16_t
    uint32_t

ctypedef fused sa_t:
    int32_t
    int64_t




cdef inline int _cmp_suffix(const tok_t* tok, Py_ssize_t n, Py_ssize_t s, const int64_t* pat, Py_ssize_t L,
                            Py_ssize_t d) noexcept nogil:
    """Compare the suffix at ``s`` with ``pat[0:L]`` from offset ``d`` on: -1 less, 0 a prefix match, 1 greater."""
    cdef Py_ssize_t j
    cdef int64_t a
    for j in range(d, L):
        if s + j >= n:
            return -1  # the suffix ends first: shorter sorts first
        a = tok[s + j]
        if a < pat[j]:
            return -1
        if a > pat[j]:
            return 1
    return 0


cdef inline void _range(const tok_t* tok, Py_ssize_t n, const sa_t* sa, const int64_t* pat, Py_ssize_t L,
                        Py_ssize_t d, Py_ssize_t* lo, Py_ssize_t* hi) noexcept nogil:
    """Narrow [lo, hi) -- suffixes that already share ``pat[0:d]`` -- to those starting with ``pat[0:L]``."""
    cdef Py_ssize_t a = lo[0], b = hi[0], m, first
    while a < b:  # first suffix >= pat
        m = (a + b) >> 1
        if _cmp_suffix(tok, n, sa[m], pat, L, d) < 0:
            a = m + 1
        else:
            b = m
    first = a
    b = hi[0]
    while a < b:  # first suffix > pat (as a prefix)
        m = (a + b) >> 1
        if _cmp_suffix(tok, n, sa[m], pat, L, d) <= 0:
            a = m + 1
        else:
            b = m
    lo[0] = first
    hi[0] = a


def sa_count_many(const tok_t[:] tok, const sa_t[:] sa, const int64_t[:] flat, const int64_t[:] offsets):
    """Occurrences of each pattern ``flat[offsets[i]:offsets[i+1]]`` in the indexed stream."""
    cdef Py_ssize_t q, nq = offsets.shape[0] - 1, lo, hi, n = tok.shape[0]
    out_a = np.empty(nq, dtype=np.int64)
    cdef int64_t[:] out = out_a
    if n == 0:
        out_a[:] = 0
        return out_a
    with nogil:
        for q in range(nq):
            lo = 0
            hi = sa.shape[0]
            _range(&tok[0], n, &sa[0], &flat[offsets[q]] if offsets[q + 1] > offsets[q] else &flat[0],
                   offsets[q + 1] - offsets[q], 0, &lo, &hi)
            out[q] = hi - lo
    return out_a


def sa_range(const tok_t[:] tok, const sa_t[:] sa, const int64_t[:] pat):
    """(lo, hi): the suffix-array rows whose suffixes start with ``pat``."""
    cdef Py_ssize_t lo = 0, hi = sa.shape[0]
    if pat.shape[0] and tok.shape[0]:
        _range(&tok[0], tok.shape[0], &sa[0], &pat[0], pat.shape[0], 0, &lo, &hi)
    return lo, hi


def sa_infini(const tok_t[:] tok, const sa_t[:] sa, const int64_t[:] test, const int64_t[:] pos,
              Py_ssize_t max_len):
    """For every test position t with pos[t] > 0 (a predicted token; pos is the position in the padded
    sentence, <s> at 0): the longest suffix h' of the history test[t-pos[t]:t] (at most ``max_len``
    tokens; negative = unbounded) that occurs in the index, and the counts cnt(h') and cnt(h' w).

    Returns (eff_len, cnt_h, cnt_hw, one_next) as arrays over all positions (zeros where pos == 0);
    ``one_next`` says the index has a single distinct continuation of h' (a "sparse" estimate).
    With h' empty, cnt_h is the number of indexed tokens (the caller discounts the <s> it holds)."""
    cdef Py_ssize_t T = test.shape[0], n = tok.shape[0], nsa = sa.shape[0], t, L, prevL = 0, lo, hi, lo2, hi2
    cdef Py_ssize_t plo = 0, phi = 0  # the previous position's rows of h' w
    cdef bint have = False
    eff_a = np.zeros(T, dtype=np.int32)
    ch_a = np.zeros(T, dtype=np.int64)
    chw_a = np.zeros(T, dtype=np.int64)
    one_a = np.zeros(T, dtype=np.uint8)
    cdef int32_t[:] eff = eff_a
    cdef int64_t[:] ch = ch_a
    cdef int64_t[:] chw = chw_a
    cdef uint8_t[:] one = one_a
    if n == 0 or T == 0:
        return eff_a, ch_a, chw_a, one_a
    cdef const tok_t* tp = &tok[0]
    cdef const sa_t* sp = &sa[0]
    cdef const int64_t* xp = &test[0]
    with nogil:
        for t in range(T):
            if pos[t] <= 0:
                prevL = 0
                have = False
                continue
            L = prevL + 1
            if L > pos[t]:
                L = pos[t]
            if max_len >= 0 and L > max_len:
                L = max_len
            if have and L == prevL + 1 and phi > plo:
                # The history's suffix of length prevL + 1 is the previous position's h' w, whose rows
                # that position found: no search (the common case, as the effective n grows).
                lo = plo
                hi = phi
            else:
                if have and phi <= plo and L > prevL:
                    L = prevL  # the previous h' w never occurs: nor does any history that ends with it
                while True:
                    lo = 0
                    hi = nsa
                    if L > 0:
                        _range(tp, n, sp, xp + (t - L), L, 0, &lo, &hi)
                    if hi > lo or L == 0:
                        break
                    L -= 1
            # Within h''s rows the suffixes are sorted by their next token: w's rows are a sub-range.
            lo2 = lo
            hi2 = hi
            _range(tp, n, sp, xp + (t - L), L + 1, L, &lo2, &hi2)
            eff[t] = <int32_t>L
            ch[t] = hi - lo
            chw[t] = hi2 - lo2
            one[t] = 1 if (hi > lo and sp[lo] + L < n and sp[hi - 1] + L < n
                           and tp[sp[lo] + L] == tp[sp[hi - 1] + L]) else 0
            prevL = L
            plo = lo2
            phi = hi2
            have = True
    return eff_a, ch_a, chw_a, one_a
