# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True, initializedcheck=False
"""Compiled hot paths of the n-gram query side (optional: ``ngramlm._accel`` falls back to numpy/Python).

Three jobs, each a loop that numpy cannot vectorise well and Python runs one object at a time:

* ARPA sections parsed straight from the file's bytes (no str per line or per word): words to ids
  through an open-addressing table over the unigram spellings, numbers through ``strtod``.
  Anything unusual returns None and the careful Python parser reports the exact line.
* ARPA sections written from the tables, one line at a time into a buffer handed to a file in
  chunks; an n-gram's words come from walking its context rows up the trie.
* ``Tables``: per order an open-addressing hash from packed key (context row * V + word) to row,
  used by the vectorised scorer (``find_many``) and by the kenlm-style incremental state API
  (``base_score``), where a Python-level loop would cost microseconds per call.
"""
from libc.stdlib cimport malloc, realloc, free, strtod, strtof
from libc.string cimport memcpy, memcmp, memmove, memset
from libc.stdint cimport int64_t, uint64_t, int32_t, uint32_t, uint16_t, uint8_t, int8_t
from libc.math cimport isfinite, fabs, floor, log10, nextafterf, copysign
from libc.stdio cimport snprintf
from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_GET_SIZE, PyBytes_FromStringAndSize
from cpython.dict cimport PyDict_GetItem
from cpython.long cimport PyLong_AsLongLong
from cpython.ref cimport PyObject
from cpython.unicode cimport PyUnicode_AsUTF8AndSize


class _LazyNumpy:
    """numpy, imported where this module first uses it: the state API over a KenLM binary
    (``ngramlm.kenlm``) never does, so a decoder that only scores pays neither numpy's import time
    nor its memory (about 23 MB), as with the kenlm module."""

    def __getattr__(self, name):
        import numpy
        globals()["np"] = numpy  # later lookups find numpy itself
        return getattr(numpy, name)


np = _LazyNumpy()

cdef extern from *:
    """
    #include <stdlib.h>
    #if defined(__linux__)
    #include <sys/mman.h>
    #endif
    /* Big tables on 2 MiB pages where the kernel gives them (transparent huge pages in "madvise"
       mode, as KenLM asks for its own): a random lookup then rarely misses the TLB.  Elsewhere, or
       for small tables, plain malloc.  Freed with free() either way. */
    static void* ngramlm_big_alloc(size_t n) {
    #if defined(__linux__) && defined(MADV_HUGEPAGE)
        if (n >= ((size_t)4 << 20)) {
            void* p = NULL;
            size_t huge = (size_t)2 << 20;
            size_t rounded = (n + huge - 1) / huge * huge;
            if (posix_memalign(&p, huge, rounded) == 0) {
                madvise(p, rounded, MADV_HUGEPAGE);
                return p;
            }
            return NULL;
        }
    #endif
        return malloc(n);
    }
    """
    void* ngramlm_big_alloc(size_t n) nogil

cdef enum:
    MAX_ORDER = 12
    SMALL_RUN = 256  # a sentence of up to this many tokens is scored from buffers on the stack
    PROBE_AHEAD = 16  # positions whose probing buckets are prefetched before they are searched
cdef uint64_t FIB = 0x9E3779B97F4A7C15ULL


# ----------------------------------------------------------------------------- word spellings -> ids
cdef inline uint64_t _fnv(const char* s, Py_ssize_t n) noexcept nogil:
    cdef uint64_t h = 1469598103934665603ULL
    cdef Py_ssize_t i
    for i in range(n):
        h ^= <uint8_t>s[i]
        h *= 1099511628211ULL
    return h


cdef class WordTable:
    """Byte spans of a buffer (the unigram words) -> ids, by open addressing on an FNV-1a hash."""

    cdef const char* buf
    cdef object owner
    cdef int64_t* starts
    cdef int32_t* lens
    cdef int64_t* ids
    cdef int64_t* slots  # index into starts/lens/ids, -1 empty
    cdef uint64_t mask
    cdef Py_ssize_t n
    cdef public Py_ssize_t duplicate

    def __cinit__(self):
        self.starts = NULL
        self.lens = NULL
        self.ids = NULL
        self.slots = NULL

    def __dealloc__(self):
        free(self.starts); free(self.lens); free(self.ids); free(self.slots)

    def __init__(self, bytes buf, const int64_t[:] starts, const int32_t[:] lens, const int64_t[:] ids):
        """Returns normally; ``duplicate`` is the first index whose spelling repeats (or -1)."""
        cdef Py_ssize_t n = starts.shape[0], i
        cdef uint64_t size = 16, h, s
        while size < <uint64_t>(2 * n):
            size <<= 1
        self.owner = buf
        self.buf = PyBytes_AS_STRING(buf)
        self.n = n
        self.mask = size - 1
        self.starts = <int64_t*>malloc(max(n, 1) * sizeof(int64_t))
        self.lens = <int32_t*>malloc(max(n, 1) * sizeof(int32_t))
        self.ids = <int64_t*>malloc(max(n, 1) * sizeof(int64_t))
        self.slots = <int64_t*>malloc(size * sizeof(int64_t))
        if not (self.starts and self.lens and self.ids and self.slots):
            raise MemoryError()
        for i in range(<Py_ssize_t>size):
            self.slots[i] = -1
        self.duplicate = -1
        for i in range(n):
            self.starts[i] = starts[i]
            self.lens[i] = lens[i]
            self.ids[i] = ids[i]
            if self._find(self.buf + starts[i], lens[i]) >= 0:
                if self.duplicate < 0:
                    self.duplicate = i
                continue
            h = _fnv(self.buf + starts[i], lens[i]) & self.mask
            while self.slots[h] >= 0:
                h = (h + 1) & self.mask
            self.slots[h] = i

    cdef inline int64_t _find(self, const char* s, Py_ssize_t n) noexcept nogil:
        cdef uint64_t h = _fnv(s, n) & self.mask
        cdef int64_t j
        while True:
            j = self.slots[h]
            if j < 0:
                return -1
            if self.lens[j] == n and memcmp(self.buf + self.starts[j], s, n) == 0:
                return self.ids[j]
            h = (h + 1) & self.mask


# ----------------------------------------------------------------------------- ARPA parsing
cdef inline bint _is_sep(char c) noexcept nogil:
    return c == b' ' or c == b'\t'


cdef double POW10[23]
POW10[0] = 1.0
for _i in range(1, 23):
    POW10[_i] = POW10[_i - 1] * 10.0  # exact: every power of ten up to 1e22 is a double


cdef inline bint _digit(char c) noexcept nogil:
    return c >= b'0' and c <= b'9'


cdef inline const char* _digits(const char* q, const char* end, uint64_t* mant, int* digits, int* exp10,
                                bint frac, bint* any_digit) noexcept nogil:
    """Accumulate a run of decimal digits: up to 19 significant ones into ``mant``; ``exp10`` counts
    the places after the point (``frac``) and the integer digits past the 19th."""
    while q < end and _digit(q[0]):
        any_digit[0] = True
        if mant[0] or q[0] != b'0':
            if digits[0] < 19:
                mant[0] = mant[0] * 10 + <uint64_t>(q[0] - 48)
                if frac:
                    exp10[0] -= 1
            elif not frac:
                exp10[0] += 1
            digits[0] += 1
        elif frac:  # a leading zero after the point
            exp10[0] -= 1
        q += 1
    return q


cdef inline const char* _number(const char* p, const char* end, double* out) noexcept nogil:
    """Parse one decimal number ending at a separator or line end; NULL if it is not one.

    Clinger's fast path: with at most 15 significant digits and a power of ten within 1e+-22 both
    the digits and the power are exact doubles, so one multiply or divide is correctly rounded --
    the same double as Python's float() and strtod, about ten times faster.  Anything else goes to
    strtod.  Forms Python accepts but this does not (inf, nan, 1_000) return NULL, and the careful
    parser decides."""
    cdef const char* q = p
    cdef bint neg = False, any_digit = False, eneg = False
    cdef uint64_t mant = 0
    cdef int digits = 0, exp10 = 0, e = 0, edigits = 0
    cdef double v
    cdef char tmp[64]
    cdef char* stop
    if q < end and (q[0] == b'-' or q[0] == b'+'):
        neg = q[0] == b'-'
        q += 1
    q = _digits(q, end, &mant, &digits, &exp10, False, &any_digit)
    if q < end and q[0] == b'.':
        q = _digits(q + 1, end, &mant, &digits, &exp10, True, &any_digit)
    if not any_digit:
        return NULL
    if q < end and (q[0] == b'e' or q[0] == b'E'):
        q += 1
        if q < end and (q[0] == b'-' or q[0] == b'+'):
            eneg = q[0] == b'-'
            q += 1
        while q < end and _digit(q[0]):
            if e < 100000:
                e = e * 10 + (q[0] - 48)
            edigits += 1
            q += 1
        if not edigits:
            return NULL
        exp10 += -e if eneg else e
    if q < end and not _is_sep(q[0]) and q[0] != b'\n':
        return NULL
    if digits <= 15 and -22 <= exp10 <= 22:
        v = <double>mant
        if exp10 < 0:
            v = v / POW10[-exp10]
        else:
            v = v * POW10[exp10]
        out[0] = -v if neg else v
        return q
    if q - p >= 63:
        return NULL
    memcpy(tmp, p, q - p)  # strtod needs a terminator the buffer does not have
    tmp[q - p] = 0
    out[0] = strtod(tmp, &stop)
    if stop != tmp + (q - p) or not isfinite(out[0]):
        return NULL
    return q


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


def section_end(bytes buf, Py_ssize_t start):
    """Offset of the first line at or after ``start`` that begins with a backslash (or the end)."""
    cdef const char* b = PyBytes_AS_STRING(buf)
    cdef Py_ssize_t n = PyBytes_GET_SIZE(buf), i = start
    while i < n:
        if b[i] == b'\\':
            return i
        while i < n and b[i] != b'\n':
            i += 1
        i += 1
    return n


def parse_unigrams(bytes buf, Py_ssize_t start, Py_ssize_t end, Py_ssize_t expected, bint top):
    """The 1-gram section: (probs, backoffs, word starts, word lengths), or None if anything is unusual."""
    return _parse(buf, start, end, 1, expected, top, None, None, None, 0)


def parse_section(bytes buf, Py_ssize_t start, Py_ssize_t end, int k, Py_ssize_t expected, bint top,
                  WordTable words, list keys, list index, int64_t V):
    """A k-gram section: (probs, backoffs, packed keys), or None if anything is unusual (a field count,
    a number, a word that is not a unigram, a context that is not an n-gram): the careful parser then
    names the line.  A key is (row of the first k-1 words in order k-1) * V + last word id, the context
    row found by walking the orders below: through their hash (index[j-1], a KeyIndex of order j) where
    one is given, else by galloping through their sorted keys (keys[j-1]) -- fast only when the file
    lists n-grams in prefix order, as this toolkit writes them."""
    return _parse(buf, start, end, k, expected, top, words, keys, index, V)


cdef inline int64_t _seek(const int64_t* a, Py_ssize_t n, Py_ssize_t* cur, int64_t q) noexcept nogil:
    """Position of ``q`` in the sorted array ``a`` (-1 if absent), searched from the cursor.

    Files list n-grams in an order where successive lookups mostly move forward by a little
    (every file this toolkit writes; KenLM's are close): galloping from the last hit touches
    a few neighbouring entries instead of a random cache line.  A lookup behind the cursor
    falls back to a binary search of the whole array."""
    cdef Py_ssize_t lo = cur[0], hi, step = 1, mid
    if lo >= n or a[lo] > q:
        lo = 0
        hi = n
    else:
        while lo + step < n and a[lo + step] <= q:
            lo += step
            step <<= 1
        hi = lo + step if lo + step < n else n
    while hi - lo > 1:
        mid = (lo + hi) >> 1
        if a[mid] <= q:
            lo = mid
        else:
            hi = mid
    if lo < n and a[lo] == q:
        cur[0] = lo
        return lo
    return -1


cdef object _parse(bytes buf, Py_ssize_t start, Py_ssize_t end, int k, Py_ssize_t expected, bint top,
                   WordTable words, list sorted_keys, list index, int64_t V):
    cdef const char* b = PyBytes_AS_STRING(buf)
    cdef const char* p = b + start
    cdef const char* e = b + end
    cdef const char* w
    cdef const char* q
    cdef double prob, bo
    cdef Py_ssize_t row = 0
    cdef int j
    cdef int64_t wid
    probs_a = np.empty(expected, dtype=np.float64)
    bos_a = np.zeros(expected, dtype=np.float64)
    cdef double[:] probs = probs_a
    cdef double[:] bos = bos_a
    cdef int64_t[:] keys
    cdef int64_t[:] wstart
    cdef int32_t[:] wlen
    cdef int64_t ctx = 0
    cdef const char* ws[MAX_ORDER]
    cdef Py_ssize_t wl[MAX_ORDER]
    cdef const char* pws[MAX_ORDER]  # the previous line's words and their rows (see below)
    cdef Py_ssize_t pwl[MAX_ORDER]
    cdef int64_t prow[MAX_ORDER]
    cdef bint same
    for j in range(MAX_ORDER):
        pwl[j] = -1
    cdef const int64_t* sk[MAX_ORDER]
    cdef Py_ssize_t sn[MAX_ORDER]
    cdef Py_ssize_t cur[MAX_ORDER]
    cdef const int64_t[:] kv
    cdef const int64_t* hk[MAX_ORDER]
    cdef const uint32_t* hr[MAX_ORDER]
    cdef uint64_t hs[MAX_ORDER]
    cdef _KeyHash kh
    if words is None:
        wstart_a = np.empty(expected, dtype=np.int64)
        wlen_a = np.empty(expected, dtype=np.int32)
        wstart = wstart_a
        wlen = wlen_a
    else:
        keys_a = np.empty(expected, dtype=np.int64)
        keys = keys_a
        for j in range(2, k):
            kv = sorted_keys[j - 1]  # alive in the caller's list
            sn[j - 1] = kv.shape[0]
            sk[j - 1] = &kv[0] if kv.shape[0] else NULL
            cur[j - 1] = 0
            hk[j - 1] = NULL
            if index is not None and index[j - 1] is not None:
                kh = index[j - 1]
                hk[j - 1] = kh.keys
                hr[j - 1] = kh.rows
                hs[j - 1] = kh.size
    while p < e:
        if p[0] == b'\n':  # blank line
            p += 1
            continue
        if row >= expected:
            return None
        p = _number(p, e, &prob)
        if p == NULL or prob > 0:
            return None
        for j in range(k):
            if p >= e or not _is_sep(p[0]):
                return None
            while p < e and _is_sep(p[0]):
                p += 1
            w = p
            while p < e and not _is_sep(p[0]) and p[0] != b'\n':
                p += 1
            if p == w:
                return None
            ws[j] = w
            wl[j] = p - w
        if words is None:
            wstart[row] = ws[0] - b
            wlen[row] = <int32_t>wl[0]
        else:
            # Sorted files list n-grams sharing a prefix together: where this line's first j+1
            # words are the previous line's, byte for byte, their row is already known, so the
            # trie walk starts below the shared prefix.
            same = True
            for j in range(k - 1):
                if same and wl[j] == pwl[j] and memcmp(ws[j], pws[j], wl[j]) == 0:
                    continue
                same = False
                wid = words._find(ws[j], wl[j])
                if wid < 0:
                    return None
                if j == 0:
                    prow[0] = wid
                else:  # one step down the trie: the row of the first j+1 words in order j+1
                    if hk[j] != NULL:
                        prow[j] = _hfind(hk[j], hr[j], hs[j], prow[j - 1] * V + wid)
                    else:
                        prow[j] = _seek(sk[j], sn[j], &cur[j], prow[j - 1] * V + wid)
                    if prow[j] < 0:
                        return None
                pws[j] = ws[j]
                pwl[j] = wl[j]
            ctx = prow[k - 2]
            wid = words._find(ws[k - 1], wl[k - 1])
            if wid < 0:
                return None
            keys[row] = ctx * V + wid
        bo = 0.0
        if p < e and _is_sep(p[0]):
            while p < e and _is_sep(p[0]):
                p += 1
            if p < e and p[0] != b'\n':
                if top:
                    return None
                p = _number(p, e, &bo)
                if p == NULL:
                    return None
                while p < e and _is_sep(p[0]):
                    p += 1
        if p < e and p[0] != b'\n':
            return None
        p += 1
        probs[row] = prob
        bos[row] = bo
        row += 1
    if row != expected:
        return None
    if words is None:
        return probs_a, bos_a, wstart_a, wlen_a
    return probs_a, bos_a, keys_a


# ----------------------------------------------------------------------------- ARPA writing
cdef inline int _fmt(double x, char* out) noexcept nogil:
    if not isfinite(x):
        memcpy(out, b"-99", 3)
        return 3
    return snprintf(out, 32, b"%.7g", x)


cdef enum:
    FMT_SLOTS = 1 << 16


cdef struct _FmtSlot:
    uint64_t bits
    int n
    char text[28]


cdef inline int _fmt_cached(double x, char* out, _FmtSlot* cache) noexcept nogil:
    """``_fmt`` through a direct-mapped cache keyed by the double's bits: back-off weights repeat
    almost always, probabilities about half the time, and snprintf is most of the writer's time."""
    cdef uint64_t bits
    memcpy(&bits, &x, 8)
    cdef _FmtSlot* s = &cache[((bits * FIB) >> 48) & (FMT_SLOTS - 1)]
    if s.n > 0 and s.bits == bits:
        memcpy(out, s.text, s.n)
        return s.n
    cdef int n = _fmt(x, out)
    if n < 28:
        s.bits = bits
        s.n = n
        memcpy(s.text, out, n)
    return n


cdef class _Sink:
    """A growing byte buffer flushed to a Python file object in chunks."""

    cdef char* buf
    cdef Py_ssize_t n, cap
    cdef object fh

    def __cinit__(self, fh, Py_ssize_t cap):
        self.buf = <char*>malloc(cap)
        if self.buf == NULL:
            raise MemoryError()
        self.n = 0
        self.cap = cap
        self.fh = fh

    def __dealloc__(self):
        free(self.buf)

    cdef void flush(self):
        if self.n:
            self.fh.write(PyBytes_FromStringAndSize(self.buf, self.n))
            self.n = 0


def write_section(fh, int k, list keys, const double[:] lp, object bo, list words, int64_t V, int64_t skip):
    """Write the k-gram lines ``log10p<TAB>w1 .. wk[<TAB>backoff]`` for every row of order k to ``fh``.

    ``keys[j]`` are the packed keys of order j+1 (``keys[0]`` unused: a unigram row is its word id);
    ``words`` the UTF-8 spellings by id; ``skip`` a unigram id not to write (<pad>)."""
    cdef Py_ssize_t n = lp.shape[0], r, i
    cdef const double[:] bov
    cdef bint has_bo = bo is not None
    if has_bo:
        bov = bo
    cdef const int64_t* kp[MAX_ORDER]
    cdef const int64_t[:] kv
    cdef const int64_t* hk[MAX_ORDER]
    cdef const uint32_t* hr[MAX_ORDER]
    cdef uint64_t hs[MAX_ORDER]
    cdef _KeyHash kh
    for i in range(1, k):
        kv = keys[i]  # the arrays stay alive in ``keys``
        kp[i] = &kv[0] if kv.shape[0] else NULL
    # Word spellings as one buffer + offsets, so the loop touches no Python object.
    cdef Py_ssize_t nw = len(words)
    cdef bytes joined = b"".join(words)
    cdef const char* wb = PyBytes_AS_STRING(joined)
    off_a = np.zeros(nw + 1, dtype=np.int64)
    cdef int64_t[:] off = off_a
    for i in range(nw):
        off[i + 1] = off[i] + PyBytes_GET_SIZE(words[i])
    cdef _Sink sink = _Sink(fh, 1 << 20)
    cdef _FmtSlot* cache = <_FmtSlot*>malloc(FMT_SLOTS * sizeof(_FmtSlot))
    if cache == NULL:
        raise MemoryError()
    memset(cache, 0, FMT_SLOTS * sizeof(_FmtSlot))
    try:
        _write_rows(sink, cache, k, n, skip, kp, lp, bov if has_bo else lp, has_bo, off, wb, V)
    finally:
        free(cache)
    sink.flush()


cdef int _write_rows(_Sink sink, _FmtSlot* cache, int k, Py_ssize_t n, int64_t skip, const int64_t** kp,
                     const double[:] lp, const double[:] bov, bint has_bo, int64_t[:] off, const char* wb,
                     int64_t V) except -1:
    cdef Py_ssize_t r
    cdef int64_t path[MAX_ORDER]
    cdef int64_t key, row
    cdef int j, m
    cdef char num[40]
    cdef Py_ssize_t need, wl
    # Formatting runs without the GIL: a writer thread (arpa._ThreadedWriter) can copy the previous
    # chunk into the file meanwhile.
    with nogil:
        for r in range(n):
            if k == 1 and r == skip:
                continue
            # The words of row r, last first: a row's key is (context row) * V + word.
            row = r
            for j in range(k - 1, 0, -1):
                key = kp[j][row]
                path[j] = key % V
                row = key // V
            path[0] = row
            need = 80
            for j in range(k):
                need += off[path[j] + 1] - off[path[j]] + 1
            if sink.n + need > sink.cap:
                with gil:
                    sink.flush()
                    if need > sink.cap:
                        free(sink.buf)
                        sink.buf = <char*>malloc(need)
                        if sink.buf == NULL:
                            raise MemoryError()
                        sink.cap = need
            m = _fmt_cached(lp[r], num, cache)
            memcpy(sink.buf + sink.n, num, m)
            sink.n += m
            for j in range(k):
                sink.buf[sink.n] = b'\t' if j == 0 else b' '
                sink.n += 1
                wl = off[path[j] + 1] - off[path[j]]
                memcpy(sink.buf + sink.n, wb + off[path[j]], wl)
                sink.n += wl
            if has_bo:
                sink.buf[sink.n] = b'\t'
                sink.n += 1
                m = _fmt_cached(bov[r], num, cache)
                memcpy(sink.buf + sink.n, num, m)
                sink.n += m
            sink.buf[sink.n] = b'\n'
            sink.n += 1
    return 0


# ----------------------------------------------------------------------------- hash tables + state API
cdef inline uint64_t _slot(int64_t key, uint64_t size) noexcept nogil:
    # Fibonacci hashing, then the top 32 bits scaled to [0, size): any table size, no modulo.
    return (((<uint64_t>key * FIB) >> 32) * size) >> 32


cdef inline int64_t _hfind(const int64_t* keys, const uint32_t* rows, uint64_t size, int64_t key) noexcept nogil:
    cdef uint64_t h = _slot(key, size)
    cdef int64_t x
    while True:
        x = keys[h]
        if x == key:
            return rows[h]
        if x < 0:
            return -1
        h += 1
        if h == size:
            h = 0


cdef class _KeyHash:
    """int64 key (>= 0) -> row, open addressing with linear probing at load <= 0.6 (12 bytes a slot)."""

    cdef int64_t* keys
    cdef uint32_t* rows
    cdef uint64_t size

    def __cinit__(self):
        self.keys = NULL
        self.rows = NULL
        self.size = 0

    def __init__(self, keys=None):
        if keys is not None:
            self.build(np.ascontiguousarray(keys, dtype=np.int64))

    def __dealloc__(self):
        free(self.keys)
        free(self.rows)

    def find_many(self, const int64_t[:] queries):
        """Row of each key, -1 where absent (negative queries miss)."""
        cdef Py_ssize_t i, n = queries.shape[0]
        out_a = np.empty(n, dtype=np.int64)
        cdef int64_t[:] out = out_a
        if self.size == 0:  # never built: nothing to find
            out_a[:] = -1
            return out_a
        with nogil:
            for i in range(n):
                out[i] = _hfind(self.keys, self.rows, self.size, queries[i]) if queries[i] >= 0 else -1
        return out_a

    @property
    def nbytes(self):
        return self.size * (sizeof(int64_t) + sizeof(uint32_t))

    cdef int build(self, const int64_t[:] keys) except -1:
        cdef Py_ssize_t n = keys.shape[0], i
        cdef uint64_t size, h
        if n >= 0xFFFFFFFF:
            raise OverflowError("more than 2**32 n-grams of one order")
        size = <uint64_t>(n / 0.6) + 16
        self.size = size
        self.keys = <int64_t*>malloc(size * sizeof(int64_t))
        self.rows = <uint32_t*>malloc(size * sizeof(uint32_t))
        if self.keys == NULL or self.rows == NULL:
            raise MemoryError()
        with nogil:
            memset(self.keys, 0xFF, size * sizeof(int64_t))  # every slot -1: empty
            for i in range(n):
                h = _slot(keys[i], size)
                while self.keys[h] >= 0:
                    h += 1
                    if h == size:
                        h = 0
                self.keys[h] = keys[i]
                self.rows[h] = <uint32_t>i
        return 0


KeyIndex = _KeyHash


cdef class State:
    """A language-model state (the kenlm.State counterpart): hashable, comparable, copyable.

    ``rows[L-1]`` is the row of the history's last L words in the order-L table (as far as those
    n-grams exist); ``hist`` the number of history words the model can see."""

    cdef int64_t r[MAX_ORDER]
    cdef int length
    cdef public int hist
    # The back-off weights of the rows, as KenLM's state keeps them, so the next word's score reads
    # them here instead of from a table (a cache miss each); valid only for the Tables that wrote them.
    cdef double b[MAX_ORDER]
    cdef const void* bowner

    def __cinit__(self):
        self.length = 0
        self.hist = 0
        self.bowner = NULL

    @property
    def rows(self):
        return tuple([self.r[i] for i in range(self.length)])

    @rows.setter
    def rows(self, value):
        value = tuple(value)
        if len(value) > MAX_ORDER:
            raise ValueError(f"a state holds at most {MAX_ORDER} rows")
        for i, v in enumerate(value):
            self.r[i] = v
        self.length = len(value)
        self.bowner = NULL

    def __eq__(self, other):
        if not isinstance(other, State):
            return NotImplemented
        cdef State o = <State>other
        if o.length != self.length or o.hist != self.hist:
            return False
        return memcmp(self.r, o.r, self.length * sizeof(int64_t)) == 0

    def __ne__(self, other):
        eq = self.__eq__(other)
        return eq if eq is NotImplemented else not eq

    def __hash__(self):
        cdef uint64_t h = 1469598103934665603ULL ^ <uint64_t>self.hist
        cdef int i
        for i in range(self.length):
            h = (h ^ <uint64_t>self.r[i]) * FIB
        return <Py_ssize_t>(h >> 1)

    def __copy__(self):
        cdef State s = State.__new__(State)
        s.length = self.length
        s.hist = self.hist
        memcpy(s.r, self.r, self.length * sizeof(int64_t))
        memcpy(s.b, self.b, self.length * sizeof(double))
        s.bowner = self.bowner
        return s

    def __reduce__(self):  # copy.deepcopy and friends; never used to load models
        return (_make_state, (self.rows, self.hist))

    def __repr__(self):
        return f"State(rows={self.rows}, hist={self.hist})"


def _make_state(rows, hist):
    cdef State s = State()
    s.rows = rows
    s.hist = hist
    return s


cdef inline const char* _utf8(object text, Py_ssize_t* n, str what) except NULL:
    """The UTF-8 bytes of a str (cached in the object by Python) or of bytes, as kenlm takes both."""
    if isinstance(text, str):
        return PyUnicode_AsUTF8AndSize(text, n)
    if isinstance(text, bytes):
        n[0] = PyBytes_GET_SIZE(text)
        return PyBytes_AS_STRING(text)
    raise TypeError(f"a {what} is a str (or UTF-8 bytes), not {type(text).__name__}")


cdef class _StateModel:
    """The kenlm-style state API over compiled tables: what ``Tables`` (this toolkit's hashes) and
    ``ProbingTables`` (a KenLM probing binary) share.  A subclass sets ``n``, ``stoi``, ``unk`` and
    ``n_words`` (ids ``0 .. n_words-1`` are words) and gives ``_score`` and ``_check``."""

    cdef int n
    cdef dict stoi
    cdef int64_t unk
    cdef int64_t n_words
    # Or, where ``stoi`` is None, words are looked up as KenLM looks them up in a binary's own
    # vocabulary table (``hv``, ``hv_n`` entries): by the MurmurHash64A of their UTF-8 bytes, in a
    # sorted array (trie files) or a probing hash table.  Ids are then KenLM's: 0 is <unk>.
    cdef const uint8_t* hv
    cdef uint64_t hv_n
    cdef bint hv_probing
    cdef int64_t hv_bos, hv_eos

    cdef double _score(self, State s, int64_t w, State out, int* matched) noexcept:
        return 0.0

    cdef int _check(self, State s) except -1:
        return 0

    cdef inline int64_t _wid(self, object word) except? -1:
        # The dict lookup without a Python-level call of dict.get: the state API's hottest line.
        cdef PyObject* v
        if self.stoi is None:
            return self._hash_wid(word)
        v = PyDict_GetItem(self.stoi, word)
        if v == NULL:
            return self.unk
        return PyLong_AsLongLong(<object>v)

    cdef int64_t _hash_wid(self, object word) except? -1:
        cdef Py_ssize_t n
        cdef const char* p
        if self.hv == NULL:
            raise ValueError("this model has no vocabulary to look words up in")
        p = _utf8(word, &n, "word")
        return _hv_find(self.hv, self.hv_n, self.hv_probing, p, n)

    def sentence_text(self, sentence, bint bos, bint eos, bint full):
        """The kenlm module's ``score`` (or with ``full`` its ``full_scores`` list) of one sentence,
        over a binary's own vocabulary: the sentence's UTF-8 bytes are split on KenLM's spaces
        (space, \\t \\n \\v \\f \\r), each word looked up by its hash and the whole run scored in C
        (a trie's searches side by side), and the total summed in float32 in the sentence's order,
        as kenlm sums it, so the numbers are kenlm's to the bit."""
        cdef const char* p
        cdef Py_ssize_t n, i = 0, j, T = 0, t, cap
        cdef float total = 0.0
        cdef int64_t small_ids[SMALL_RUN]
        cdef int64_t small_pos[SMALL_RUN]
        cdef double small_lp[SMALL_RUN]
        cdef int8_t small_m[SMALL_RUN]
        cdef int64_t* ids = small_ids
        cdef int64_t* pos = small_pos
        cdef double* lp = small_lp
        cdef int8_t* mm = small_m
        cdef void* heap = NULL
        cdef list out
        if self.stoi is not None or self.hv == NULL:
            raise ValueError("sentence_text needs the binary's own vocabulary (use sentence() with words)")
        p = _utf8(sentence, &n, "sentence")
        cap = n // 2 + 3  # words are separated, so at most (n + 1) / 2 of them, plus <s> and </s>
        if cap > SMALL_RUN:
            heap = malloc(cap * (2 * sizeof(int64_t) + sizeof(double) + sizeof(int8_t)))
            if heap == NULL:
                raise MemoryError()
            ids = <int64_t*>heap
            pos = ids + cap
            lp = <double*>(pos + cap)
            mm = <int8_t*>(lp + cap)
        try:
            if bos:
                ids[0] = self.hv_bos
                pos[0] = 0
                T = 1
            while True:
                while i < n and _kenlm_space(<unsigned char>p[i]):
                    i += 1
                if i >= n:
                    break
                j = i + 1
                while j < n and not _kenlm_space(<unsigned char>p[j]):
                    j += 1
                ids[T] = _hv_find(self.hv, self.hv_n, self.hv_probing, p + i, j - i)
                pos[T] = T if bos else T + 1
                T += 1
                i = j
            if eos:
                ids[T] = self.hv_eos
                pos[T] = T if bos else T + 1
                T += 1
            if T > 0:
                self._score_run(ids, pos, T, lp, mm)
            t = 1 if bos else 0
            if not full:
                while t < T:
                    total += <float>lp[t]
                    t += 1
                return total
            out = []
            while t < T:
                out.append((lp[t], mm[t], ids[t] == 0 and not (eos and t == T - 1)))
                t += 1
            return out
        finally:
            free(heap)

    def begin_sentence(self, State state, int64_t bos_id):
        state.bowner = NULL
        if self.n > 1:
            state.r[0] = bos_id
            state.length = 1
            state.hist = 1
        else:
            state.length = 0
            state.hist = 0

    def null_context(self, State state):
        state.bowner = NULL
        state.length = 0
        state.hist = 0

    def word_id(self, word):
        return self._wid(word)

    def base_score(self, State in_state, word, State out_state):
        cdef int m
        self._check(in_state)
        return self._score(in_state, self._wid(word), out_state, &m)

    def base_full_score(self, State in_state, word, State out_state):
        """(log10 p, matched n-gram length, word id)."""
        cdef int m
        self._check(in_state)
        cdef int64_t wid = self._wid(word)
        cdef double lp = self._score(in_state, wid, out_state, &m)
        return lp, m, wid

    def score_ids(self, State in_state, int64_t wid, State out_state):
        cdef int m
        self._check(in_state)
        if wid < 0 or wid >= self.n_words:
            raise ValueError(f"word id {wid} is outside this model's vocabulary")
        cdef double lp = self._score(in_state, wid, out_state, &m)
        return lp, m

    cdef int _check_ids(self, const int64_t[:] tokens) except -1:
        cdef Py_ssize_t t
        cdef int64_t w
        for t in range(tokens.shape[0]):
            w = tokens[t]
            if w < 0 or w >= self.n_words:
                raise ValueError(f"token id {w} at position {t} is outside this model's vocabulary")
        return 0

    def score_padded(self, const int64_t[:] tokens, const int64_t[:] pos):
        """log10 p and matched length at every position of a padded stream of this toolkit's ids
        (``pos`` 0 at each ``<s>``; a position continues the one before only where ``pos`` goes up
        by one): the state API's numbers, position by position, without a Python call per token."""
        cdef Py_ssize_t T = tokens.shape[0]
        if pos.shape[0] != T:
            raise ValueError(f"{T} tokens but {pos.shape[0]} positions")
        out_lp = np.empty(T, dtype=np.float64)
        out_m = np.empty(T, dtype=np.int8)
        cdef double[:] lpv = out_lp
        cdef int8_t[:] mv = out_m
        self._check_ids(tokens)
        if T > 0:
            self._score_run(&tokens[0], &pos[0], T, &lpv[0], &mv[0])
        return out_lp, out_m

    cdef void _ahead(self, const int64_t* tokens, const int64_t* pos, Py_ssize_t t) noexcept:
        """Called PROBE_AHEAD positions before position ``t`` is scored: a table may prefetch what its
        search there will read."""
        pass

    cdef void _score_run(self, const int64_t* tokens, const int64_t* pos, Py_ssize_t T, double* lpv,
                         int8_t* mv) noexcept:
        """score_padded's work over plain arrays (checked ids): one state after another."""
        cdef Py_ssize_t t
        cdef State a = State.__new__(State)
        cdef State b = State.__new__(State)
        cdef State x
        cdef int m
        cdef int64_t w
        for t in range(min(T, PROBE_AHEAD)):
            self._ahead(tokens, pos, t)
        for t in range(T):
            if t + PROBE_AHEAD < T:
                self._ahead(tokens, pos, t + PROBE_AHEAD)
            w = tokens[t]
            if pos[t] == 0:
                # A sentence's first token (<s>) is history only: BeginSentenceWrite with that word.
                a.bowner = NULL
                a.r[0] = w
                a.length = 1 if self.n > 1 else 0
                a.hist = a.length
                lpv[t] = 0.0
                mv[t] = 1
                continue
            if t == 0 or pos[t] != pos[t - 1] + 1:
                a.length = 0  # nothing in view before this token
                a.hist = 0
                a.bowner = NULL
            lpv[t] = self._score(a, w, b, &m)
            mv[t] = <int8_t>m
            x = a
            a = b
            b = x

    def sentence(self, list words, bint bos, bint eos, int64_t bos_id, int64_t eos_id, bint full):
        """A whole sentence: its total log10 p, or with ``full`` a list of (log10 p, length, oov)."""
        cdef State a = State.__new__(State)
        cdef State b = State.__new__(State)
        cdef State t
        cdef double total = 0.0, lp
        cdef int m
        cdef int64_t wid
        cdef list out = [] if full else None
        if bos and self.n > 1:
            a.r[0] = bos_id
            a.length = 1
            a.hist = 1
        for w in words:
            wid = self._wid(w)
            lp = self._score(a, wid, b, &m)
            total += lp
            if full:
                out.append((lp, m, wid == self.unk))
            t = a
            a = b
            b = t
        if eos:
            lp = self._score(a, eos_id, b, &m)
            total += lp
            if full:
                out.append((lp, m, False))
        return out if full else total


# One slot of an order's hash: the packed key (context row * V + word, -1 empty), the n-gram's log10 p
# and back-off, its row, and whether a query state must remember that row (KenLM's state minimisation):
# a found n-gram costs one cache line, as in KenLM's probing entries, not four (key, row, p, keep).
cdef struct _Slot:
    int64_t key
    double prob
    double back
    uint32_t row
    uint32_t keep


cdef inline const _Slot* _sfind(const _Slot* t, uint64_t size, int64_t key) noexcept nogil:
    cdef uint64_t h = _slot(key, size)
    while True:
        if t[h].key == key:
            return &t[h]
        if t[h].key < 0:
            return NULL
        h += 1
        if h == size:
            h = 0


cdef class Tables(_StateModel):
    """The query tables of a back-off model in C arrays: per order from 2 a hash of slots that hold
    each n-gram's log10 probability and back-off; unigrams and the back-offs by row (for states made
    elsewhere) read the model's own arrays."""

    cdef int64_t V
    cdef double missing
    cdef _Slot* slots[MAX_ORDER]  # orders 2..n (index k-1); NULL for unigrams
    cdef uint64_t ssize[MAX_ORDER]
    cdef const double* probs1  # unigram log10 p by word id
    cdef const double* backs[MAX_ORDER]  # back-off by row, orders 1..n-1 (the model's arrays)
    cdef uint8_t* keep1  # unigram rows a state must remember (NULL: every row)
    cdef list arrays  # keeps the arrays behind the pointers alive
    cdef int64_t sizes[MAX_ORDER]  # rows per order
    cdef bint closed  # every n-gram's suffix is an n-gram: a miss at one order ends the search
    cdef bint minimise  # keep flags exist (a proper model): drop state rows nothing extends

    def __cinit__(self):
        cdef int k
        for k in range(MAX_ORDER):
            self.slots[k] = NULL
            self.ssize[k] = 0
            self.backs[k] = NULL
        self.keep1 = NULL
        self.probs1 = NULL

    def __dealloc__(self):
        cdef int k
        for k in range(MAX_ORDER):
            free(self.slots[k])
        free(self.keep1)

    def __init__(self, list keys, list log10_prob, list log10_backoff, double missing, int64_t V,
                 dict stoi, int64_t unk_id, list keep, bint suffix_closed=True):
        cdef int k
        cdef Py_ssize_t i, m
        cdef const double[:] pv
        cdef const double[:] bv
        cdef const int64_t[:] kv
        cdef const uint8_t[:] ev
        cdef _Slot* t
        cdef uint64_t size, h
        cdef bint has_keep, has_back
        self.n = len(keys)
        if not 1 <= self.n <= MAX_ORDER:
            raise ValueError(f"order {self.n} is outside 1..{MAX_ORDER}")
        self.V = V
        self.missing = missing
        self.stoi = stoi
        self.closed = suffix_closed
        self.unk = unk_id
        self.minimise = missing == 0.0 and keep is not None
        self.arrays = []
        for k in range(self.n):
            p = np.ascontiguousarray(log10_prob[k], dtype=np.float64)
            m = p.shape[0]
            self.sizes[k] = m
            pv = p
            b = np.ascontiguousarray(log10_backoff[k], dtype=np.float64) if k < len(log10_backoff) else None
            has_back = b is not None and b.shape[0] == m and m > 0
            if has_back:
                self.arrays.append(b)
                bv = b
                self.backs[k] = &bv[0]
            # keep[k+1] flags the order-(k+1) rows (k+1 = 1..n-1) a state must remember.
            e = None
            if self.minimise and k + 1 < self.n and k + 1 < len(keep) and keep[k + 1] is not None:
                e = np.ascontiguousarray(keep[k + 1], dtype=np.uint8)
            if k == 0:
                self.arrays.append(p)
                if m > 0:
                    self.probs1 = &pv[0]
                if e is not None and m > 0:
                    ev = e
                    self.keep1 = <uint8_t*>malloc(m)
                    if self.keep1 == NULL:
                        raise MemoryError()
                    memcpy(self.keep1, &ev[0], m)
                self.n_words = m
                continue
            kv = np.ascontiguousarray(keys[k], dtype=np.int64)
            if kv.shape[0] != m:
                raise ValueError(f"order {k + 1}: {kv.shape[0]} keys for {m} probabilities")
            if m >= 0xFFFFFFFF:
                raise OverflowError("more than 2**32 n-grams of one order")
            size = <uint64_t>(m / 0.6) + 16
            t = <_Slot*>ngramlm_big_alloc(size * sizeof(_Slot))
            if t == NULL:
                raise MemoryError()
            self.slots[k] = t
            self.ssize[k] = size
            has_keep = e is not None
            if has_keep:
                ev = e
            if has_back:
                bv = b
            with nogil:
                for h in range(size):
                    t[h].key = -1
                for i in range(m):
                    h = _slot(kv[i], size)
                    while t[h].key >= 0:
                        h += 1
                        if h == size:
                            h = 0
                    t[h].key = kv[i]
                    t[h].prob = pv[i]
                    t[h].back = bv[i] if has_back else 0.0
                    t[h].row = <uint32_t>i
                    t[h].keep = ev[i] if has_keep else 1

    def set_suffix_closed(self, bint closed):
        """Whether every n-gram's suffix is an n-gram (then a miss ends the search for longer ones)."""
        self.closed = closed

    def find_many(self, int k, const int64_t[:] queries):
        """Row of each packed key in the order-k table, -1 where absent (negative queries miss)."""
        cdef Py_ssize_t i, n = queries.shape[0]
        cdef const _Slot* e
        out_a = np.empty(n, dtype=np.int64)
        cdef int64_t[:] out = out_a
        if not 2 <= k <= self.n:
            raise ValueError(f"no hash for order {k}")
        with nogil:
            for i in range(n):
                e = _sfind(self.slots[k - 1], self.ssize[k - 1], queries[i]) if queries[i] >= 0 else NULL
                out[i] = -1 if e == NULL else e.row
        return out_a

    @property
    def nbytes(self):
        """Bytes of the compiled hash slots (the unigram and back-off arrays are the model's own)."""
        cdef int k
        return sum(self.ssize[k] * sizeof(_Slot) for k in range(self.n))

    cdef double _score(self, State s, int64_t w, State out, int* matched) noexcept:
        cdef int64_t new[MAX_ORDER]
        cdef double nb[MAX_ORDER]
        cdef uint32_t kept[MAX_ORDER]
        cdef int64_t V = self.V
        cdef int j = s.length, m = 1, L, nnew, i, hist
        cdef const _Slot* e
        cdef double lp = self.probs1[w]
        cdef bint own = s.bowner == <const void*>self
        new[0] = w
        nb[0] = self.backs[0][w] if self.backs[0] != NULL else 0.0
        kept[0] = 1 if self.keep1 == NULL else self.keep1[w]
        nnew = 1
        for L in range(2, j + 2):
            # The slot of (the last L-1 history words, w) in the order-L table.  A pruned model can keep
            # "a b c" without "b c": a state row is then -1 (not an n-gram) below rows that exist,
            # and the search goes on past a miss.  In a suffix-closed model nothing longer exists
            # after a miss, so it stops there (KenLM's search).
            e = _sfind(self.slots[L - 1], self.ssize[L - 1], s.r[L - 2] * V + w) if s.r[L - 2] >= 0 else NULL
            if e != NULL:
                new[L - 1] = e.row
                nb[L - 1] = e.back
                kept[L - 1] = e.keep
                lp = e.prob
                m = L
                nnew = L
            else:
                new[L - 1] = -1
                nb[L - 1] = 0.0
                kept[L - 1] = 0
                if self.closed:
                    break
        for i in range(m, s.hist + 1):
            # Back-off weights of the contexts longer than the match (1, log 0, where a context is
            # not an n-gram of a proper model; stupid backoff's constant beyond the stored rows):
            # from the state when these tables wrote it, else by row.
            if i <= j and s.r[i - 1] >= 0:
                lp += s.b[i - 1] if own else self.backs[i - 1][s.r[i - 1]]
            elif i > j or self.missing != 0.0:
                lp += self.missing
        if nnew > self.n - 1:
            nnew = self.n - 1
        if self.missing == 0.0:
            # KenLM's state minimisation (see ngramlm.query): drop rows nothing extends.
            while nnew > 0 and (new[nnew - 1] < 0 or not kept[nnew - 1]):
                nnew -= 1
            hist = nnew
        else:
            hist = s.hist + 1 if s.hist + 1 < self.n - 1 else self.n - 1
        memcpy(out.r, new, nnew * sizeof(int64_t))
        memcpy(out.b, nb, nnew * sizeof(double))
        out.bowner = <const void*>self
        out.length = nnew
        out.hist = hist
        matched[0] = m
        return lp

    cdef int _check(self, State s) except -1:
        """A state made by another model (or by hand) could point past these tables: refuse it."""
        cdef int i
        if s.length > self.n - 1 or s.hist > self.n - 1 or s.hist < 0:
            raise ValueError(f"this state (rows={s.rows}, hist={s.hist}) does not belong to this order-{self.n} "
                             "model; start from BeginSentenceWrite/NullContextWrite of this model")
        for i in range(s.length):
            if s.r[i] < -1 or s.r[i] >= self.sizes[i] or (i == 0 and s.r[i] < 0):
                raise ValueError(f"this state (rows={s.rows}) does not belong to this model; start from "
                                 "BeginSentenceWrite/NullContextWrite of this model")
        return 0


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


# ----------------------------------------------------------------------------- values as an ARPA file holds them
cdef inline bint _text7_fast(double v, float* out) noexcept nogil:
    """strtof(printf("%.7g", v)) by arithmetic where that is provably the same, else False (the caller
    formats).  The 7 digits: N = round(|v| * 10^s) with s = 6 - floor(log10|v|), one correctly rounded
    product (10^s is exact up to 1e22), so N is printf's unless |v| 10^s is within its error of a tie.
    The float: N / 10^s in double, one correctly rounded operation (N < 2^24 and 10^s exact), then
    narrowed; that is strtof's correctly rounded float unless the double lies within its own error of
    a midpoint between two floats."""
    cdef double a = fabs(v), y, frac, z, mid
    cdef int e, s
    cdef int64_t N
    cdef float f, nb
    if a == 0.0:
        out[0] = <float>v
        return True
    e = <int>floor(log10(a))  # off by one right at a power of ten: caught by the range check on y
    s = 6 - e
    if s < -22 or s > 22:
        return False
    y = a * POW10[s] if s >= 0 else a / POW10[-s]
    if y < 1000000.0001 or y > 9999999.4999:  # log10 was off by one, or the digits carry into an 8th
        return False
    frac = y - floor(y)
    if fabs(frac - 0.5) < 1e-7:  # within the product's error (< 2e-9) of a tie, with room to spare
        return False
    N = <int64_t>floor(y) + (1 if frac > 0.5 else 0)
    z = <double>N / POW10[s] if s >= 0 else <double>N * POW10[-s]
    f = <float>z
    if not isfinite(f):
        return False
    nb = nextafterf(f, 3.4e38 if z > <double>f else -3.4e38)
    mid = (<double>f + <double>nb) * 0.5  # exact: two floats' mean fits a double
    if fabs(z - mid) <= fabs(z) * 4.5e-16:  # within the division's error of the midpoint
        return False
    out[0] = <float>copysign(f, v)
    return True


def through_text7(const double[:] x, bint arithmetic=True):
    """float32 of each value as an ARPA file prints it ('%.7g'; -99 for -inf) and KenLM parses it back
    (to float directly, correctly rounded): what a KenLM binary made from that ARPA file holds.
    Arithmetic where it is provably the same (_text7_fast), the text itself otherwise;
    ``arithmetic=False``: the text always (the reference the arithmetic is tested against)."""
    cdef Py_ssize_t i, n = x.shape[0]
    cdef char buf[40]
    cdef double v
    out_a = np.empty(n, dtype=np.float32)
    cdef float[:] out = out_a
    with nogil:
        for i in range(n):
            v = x[i]
            if not isfinite(v):
                out[i] = -99.0 if v < 0 else v
            elif not (arithmetic and _text7_fast(v, &out[i])):
                snprintf(buf, 40, "%.7g", v)
                out[i] = strtof(buf, NULL)
    return out_a


# ----------------------------------------------------------------------------- KenLM's vocabulary: words by their hash
cdef extern from *:
    """
    #if defined(__GNUC__) || defined(__clang__)
    #define ngramlm_prefetch(p) __builtin_prefetch((const void*)(p))
    #else
    #define ngramlm_prefetch(p) ((void)0)
    #endif
    """
    void _prefetch "ngramlm_prefetch"(const void* p) nogil

cdef inline uint64_t _murmur64a(const char* key, Py_ssize_t n) noexcept nogil:
    """MurmurHash64A with seed 0 (Austin Appleby's public-domain hash), which KenLM keys its
    vocabulary with; as ``ngramlm.kenlm.write.murmur_hash64a``.  Little-endian, as the files are."""
    cdef uint64_t m = 0xC6A4A7935BD1E995ULL
    cdef uint64_t h = <uint64_t>n * m
    cdef uint64_t k
    cdef Py_ssize_t i, blocks = n >> 3
    for i in range(blocks):
        memcpy(&k, key + 8 * i, 8)
        k *= m
        k ^= k >> 47
        k *= m
        h ^= k
        h *= m
    if n & 7:
        k = 0
        memcpy(&k, key + 8 * blocks, n & 7)
        h ^= k
        h *= m
    h ^= h >> 47
    h *= m
    h ^= h >> 47
    return h


def murmur_hash64a(bytes data):
    """MurmurHash64A (seed 0) of ``data``: the compiled twin of ``ngramlm.kenlm.write.murmur_hash64a``."""
    return _murmur64a(PyBytes_AS_STRING(data), PyBytes_GET_SIZE(data))


cdef inline bint _kenlm_space(unsigned char c) noexcept nogil:
    # KenLM's kSpaces (util/spaces.cc): space, \t \n \v \f \r -- bytes.split()'s set, not str.split()'s.
    return c == 32 or (9 <= c <= 13)


cdef inline int64_t _hv_find(const uint8_t* hv, uint64_t nb, bint probing, const char* p, Py_ssize_t n) noexcept nogil:
    """KenLM's id of the word ``p[:n]`` in a binary's vocabulary table, 0 (<unk>) where it is not
    there: a trie file's is the sorted array of the words' hashes (id = position + 1), a probing
    file's a linear-probing table of 12-byte (hash, id) buckets, empty where the hash is 0."""
    cdef uint64_t h = _murmur64a(p, n), key, b, lo = 0, hi = nb, mid
    cdef uint32_t v
    cdef const uint64_t* keys
    if nb == 0:
        return 0
    if probing:
        b = h % nb
        while True:
            memcpy(&key, hv + 12 * b, 8)
            if key == h:
                memcpy(&v, hv + 12 * b + 8, 4)
                return v
            if key == 0:
                return 0
            b += 1
            if b == nb:
                b = 0
    keys = <const uint64_t*>hv
    while lo < hi:
        mid = (lo + hi) >> 1
        if keys[mid] < h:
            lo = mid + 1
        else:
            hi = mid
    if lo < nb and keys[lo] == h:
        return <int64_t>lo + 1
    return 0


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
