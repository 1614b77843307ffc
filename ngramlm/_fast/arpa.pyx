# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True, initializedcheck=False
"""Compiled ARPA reading and writing (optional: ``ngramlm.accel`` falls back to numpy/Python).

* Sections parsed straight from the file's bytes (no str per line or per word): words to ids
  through an open-addressing table over the unigram spellings, numbers by Clinger's fast path or
  ``strtod``.  Anything unusual returns None and the careful Python parser reports the exact line.
* For ``ngramlm ppl``/``score`` (``parse_packed``): sections of a file in key order read a chunk of
  lines at a time into compact tables -- keys split into 32-bit halves, numbers packed into 4 bytes
  (or back-offs into 2-byte places in a ``PackedBook``) -- from which ``split_find`` and
  ``packed_take`` give exactly the rows and doubles of the usual tables.
* Sections written from the tables, one line at a time into a buffer handed to a file in chunks;
  an n-gram's words come from walking its context rows up the trie.
* ``through_text7``: the float32 a value becomes when printed as ARPA text and read back (what a
  KenLM binary made from that ARPA file holds).
"""
from libc.stdlib cimport malloc, free, strtod, strtof
from libc.string cimport memcpy, memcmp, memset
from libc.stdint cimport int64_t, uint64_t, int32_t, uint32_t, uint16_t, uint8_t
from libc.math cimport isfinite, fabs, floor, log10, nextafterf, copysign
from libc.stdio cimport snprintf
from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_GET_SIZE, PyBytes_FromStringAndSize

from .common cimport ABI_VERSION, MAX_ORDER, FIB, _fnv, _hfind
from .state cimport _KeyHash

include "lazy_numpy.pxi"

ABI = ABI_VERSION
__all__ = ["WordTable", "section_end", "parse_unigrams", "parse_section", "write_section", "through_text7",
           "PackedBook", "parse_packed", "split_find", "packed_take"]


# ----------------------------------------------------------------------------- word spellings -> ids
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


cdef double POW10[32]  # 23 .. 31: only so that no 5-bit exponent of _unpack reads past the end
POW10[0] = 1.0
for _i in range(1, 32):
    POW10[_i] = POW10[_i - 1] * 10.0  # exact: every power of ten up to 1e22 is a double


# Packed numbers (parse_packed, packed_take): a value the fast path below computes as M / 10^e (M < 2^26,
# 0 <= e <= 22) is held as sign << 31 | e << 26 | M, and unpacked by that same division -- the same
# double, in 4 bytes instead of 8.  e never exceeds 22, so PACK_NONE is no packed number.
cdef uint32_t PACK_NONE = 0xFFFFFFFFu
cdef uint64_t PACK_MANT = 1 << 26

cdef enum:
    BOOK_MAX = 1 << 16  # PackedBook: places fit a uint16
    BOOK_SLOTS = 1 << 17


cdef inline double _unpack(uint32_t c) noexcept nogil:
    cdef double v = <double>(c & 0x3FFFFFFu) / POW10[(c >> 26) & 31]
    return -v if c >> 31 else v


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


cdef inline const char* _number(const char* p, const char* end, double* out, uint32_t* code) noexcept nogil:
    """Parse one decimal number ending at a separator or line end; NULL if it is not one.

    Clinger's fast path: with at most 15 significant digits and a power of ten within 1e+-22 both
    the digits and the power are exact doubles, so one multiply or divide is correctly rounded --
    the same double as Python's float() and strtod, about ten times faster.  Anything else goes to
    strtod.  Forms Python accepts but this does not (inf, nan, 1_000) return NULL, and the careful
    parser decides.

    ``code`` (unless NULL) gets the number's packed form (see ``PACK_NONE``): where the fast path
    computed it as an integer of at most 26 bits over a power of ten up to 1e22, that integer, the
    power and the sign in 32 bits, which ``_unpack`` turns back into the same double by the same
    division; PACK_NONE otherwise."""
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
        if code != NULL:
            if exp10 <= 0 and mant < PACK_MANT:
                code[0] = (<uint32_t>neg << 31) | (<uint32_t>(-exp10) << 26) | <uint32_t>mant
            else:
                code[0] = PACK_NONE
        return q
    if code != NULL:
        code[0] = PACK_NONE
    if q - p >= 63:
        return NULL
    memcpy(tmp, p, q - p)  # strtod needs a terminator the buffer does not have
    tmp[q - p] = 0
    out[0] = strtod(tmp, &stop)
    if stop != tmp + (q - p) or not isfinite(out[0]):
        return NULL
    return q

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
        p = _number(p, e, &prob, NULL)
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
                p = _number(p, e, &bo, NULL)
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


# ----------------------------------------------------------------------------- compact reading (ppl on an ARPA file)
# For a caller that only scores, an ARPA file in key order (this toolkit's) read a chunk of lines at a
# time into a compact form of the same tables: each order's sorted keys split into their low 32 bits
# (uint32) and the rows where each value of the high bits starts; numbers packed into 4 bytes where
# they fit exactly (``_number``), back-offs as places in a PackedBook, doubles where a number does not
# pack.  Every lookup and every value is the one the float64/int64 tables give.

cdef inline int64_t _split_seek(const int64_t* bnd, Py_ssize_t nb, const uint32_t* lo, Py_ssize_t* cur,
                                int64_t q) noexcept nogil:
    """Row of key ``q`` (>= 0) in split keys (-1 if absent): its high bits pick the rows
    [bnd[h], bnd[h+1]), searched for its low 32 bits -- galloping from the cursor where it lies in
    those rows (files in key order move forward by a little), else by bisection."""
    cdef int64_t h = q >> 32
    cdef uint32_t x = <uint32_t>q  # the low 32 bits
    cdef Py_ssize_t a, b, lo_i, hi_i, step = 1, mid
    if h + 1 >= nb:
        return -1
    a = bnd[h]
    b = bnd[h + 1]
    if a >= b:
        return -1
    lo_i = cur[0]
    if lo_i < a or lo_i >= b or lo[lo_i] > x:
        lo_i = a
        hi_i = b
    else:
        while lo_i + step < b and lo[lo_i + step] <= x:
            lo_i += step
            step <<= 1
        hi_i = lo_i + step if lo_i + step < b else b
    if lo[lo_i] > x:
        return -1
    while hi_i - lo_i > 1:
        mid = (lo_i + hi_i) >> 1
        if lo[mid] <= x:
            lo_i = mid
        else:
            hi_i = mid
    if lo[lo_i] == x:
        cur[0] = lo_i
        return lo_i
    return -1


cdef void* _ptr(object arr, Py_ssize_t itemsize, Py_ssize_t at_least) except? NULL:
    """The data of a contiguous numpy array of ``itemsize``-byte items, at least ``at_least`` of them
    (NULL for None or an empty one); ValueError for any other."""
    cdef const unsigned char[::1] mv
    if arr is None:
        return NULL
    if arr.dtype.itemsize != itemsize or arr.ndim != 1 or len(arr) < at_least:
        raise ValueError("parse_packed: an output array of the wrong type or size")
    mv = arr.view(np.uint8)
    if mv.shape[0] == 0:
        return NULL
    return <void*>&mv[0]


cdef class PackedBook:
    """The distinct packed numbers of a column as it is read (at most 65536, in order of first
    appearance), so that each row holds its number's place among them in 2 bytes: back-off weights
    repeat a lot (PTB 5-gram: a few thousand distinct among 700k)."""

    cdef int32_t* slot  # open addressing over the codes: place in ``codes``, -1 empty
    cdef uint32_t* codes
    cdef public Py_ssize_t size

    def __cinit__(self):
        cdef Py_ssize_t i
        self.slot = <int32_t*>malloc(BOOK_SLOTS * sizeof(int32_t))
        self.codes = <uint32_t*>malloc(BOOK_MAX * sizeof(uint32_t))
        if self.slot == NULL or self.codes == NULL:
            raise MemoryError()
        for i in range(BOOK_SLOTS):
            self.slot[i] = -1
        self.size = 0

    def __dealloc__(self):
        free(self.slot)
        free(self.codes)

    cdef inline int32_t add(self, uint32_t c) noexcept nogil:
        """The place of ``c`` (added where new); -1 when the book is full."""
        cdef uint64_t h = ((<uint64_t>c * FIB) >> 40) & (BOOK_SLOTS - 1)
        while self.slot[h] >= 0:
            if self.codes[self.slot[h]] == c:
                return self.slot[h]
            h = (h + 1) & (BOOK_SLOTS - 1)
        if self.size == BOOK_MAX:
            return -1
        self.slot[h] = <int32_t>self.size
        self.codes[self.size] = c
        self.size += 1
        return self.slot[h]

    def array(self):
        """The book's packed numbers (uint32), by place."""
        out_a = np.empty(self.size, dtype=np.uint32)
        cdef uint32_t[::1] out = out_a
        cdef Py_ssize_t i
        for i in range(self.size):
            out[i] = self.codes[i]
        return out_a


def parse_packed(bytes buf, Py_ssize_t start, Py_ssize_t end, int k, bint top, WordTable words, list lower,
                 int64_t V, object lo_out, object bnd_out, object lp_codes, object lp_wide, object bo_index,
                 PackedBook bo_book, object bo_codes, object bo_wide, Py_ssize_t row, int64_t prev_key):
    """Lines [start, end) of the k-gram section (k >= 2), whole lines, into the compact columns from
    row ``row`` on.  ``lower[j - 1]`` is order j's split keys as (bnd, lo) (j = 2 .. k-1), which the
    context walk searches; ``lo_out``/``bnd_out`` receive this order's (bnd_out[h] is set for every
    high part up to the last key's); ``lp_codes`` (uint32) or ``lp_wide`` (float64) receive the
    probabilities, one of them None; the back-offs go to ``bo_index`` (uint16 places in ``bo_book``),
    ``bo_codes`` or ``bo_wide``, one of them given (none at the highest order).  ``prev_key`` is the
    key of the row before (-1 at the first).

    Returns (status, rows, pos, prev_key): status 0 when every line is read; 1 (2) when the line at
    ``pos`` has a probability (back-off) that does not pack -- the caller widens that column to
    float64 and goes on from ``pos``; 3 when the book is full -- the caller turns the back-offs into
    codes and goes on; -1 when anything is unusual (a field, a number, an unknown word
    or context, keys not in increasing order, more rows than ``lo_out`` holds): the caller then reads
    the file the usual way, whose careful parser names the line."""
    cdef const char* b = PyBytes_AS_STRING(buf)
    cdef const char* p = b + start
    cdef const char* e = b + end
    cdef const char* line
    cdef const char* w
    cdef double prob, bo
    cdef uint32_t code
    cdef int j
    cdef int64_t wid, ctx, key, h, last_h
    cdef Py_ssize_t expected = len(lo_out), nb_out = len(bnd_out)
    cdef uint32_t* lo_p = <uint32_t*>_ptr(lo_out, 4, 0)
    cdef int64_t* bnd_p = <int64_t*>_ptr(bnd_out, 8, 1)
    cdef uint32_t* lpc = <uint32_t*>_ptr(lp_codes, 4, expected)
    cdef double* lpw = <double*>_ptr(lp_wide, 8, expected)
    cdef uint16_t* boi = <uint16_t*>_ptr(bo_index, 2, expected)
    cdef uint32_t* boc = <uint32_t*>_ptr(bo_codes, 4, expected)
    cdef double* bow = <double*>_ptr(bo_wide, 8, expected)
    cdef int32_t place
    cdef bint has_bo = not top
    cdef const char* ws[MAX_ORDER]
    cdef Py_ssize_t wl[MAX_ORDER]
    cdef const char* pws[MAX_ORDER]
    cdef Py_ssize_t pwl[MAX_ORDER]
    cdef int64_t prow[MAX_ORDER]
    cdef const int64_t* sb[MAX_ORDER]
    cdef Py_ssize_t snb[MAX_ORDER]
    cdef const uint32_t* slo[MAX_ORDER]
    cdef Py_ssize_t cur[MAX_ORDER]
    cdef bint same
    cdef int status = 0
    if k < 2 or k > MAX_ORDER or bnd_p == NULL:
        return -1, row, start, prev_key
    if expected and (lo_p == NULL or (lpc == NULL) == (lpw == NULL)):
        return -1, row, start, prev_key
    if has_bo and (boi != NULL) + (boc != NULL) + (bow != NULL) != 1 and expected:
        return -1, row, start, prev_key
    if boi != NULL and bo_book is None:
        return -1, row, start, prev_key
    for j in range(MAX_ORDER):
        pwl[j] = -1
        cur[j] = 0
    for j in range(1, k - 1):  # order j + 1
        bnd_j, lo_j = lower[j]
        snb[j] = len(bnd_j)
        sb[j] = <const int64_t*>_ptr(bnd_j, 8, 1)
        slo[j] = <const uint32_t*>_ptr(lo_j, 4, bnd_j[len(bnd_j) - 1])
    last_h = -1 if prev_key < 0 else prev_key >> 32
    with nogil:
        while p < e:
            if p[0] == b'\n':  # blank line
                p += 1
                continue
            line = p
            if row >= expected:
                break
            p = _number(p, e, &prob, &code)
            if p == NULL or prob > 0:
                break
            if lpc != NULL and code == PACK_NONE:
                status = 1
                break
            if lpc != NULL:
                lpc[row] = code
            else:
                lpw[row] = prob
            for j in range(k):
                if p >= e or not _is_sep(p[0]):
                    break
                while p < e and _is_sep(p[0]):
                    p += 1
                w = p
                while p < e and not _is_sep(p[0]) and p[0] != b'\n':
                    p += 1
                if p == w:
                    break
                ws[j] = w
                wl[j] = p - w
            else:
                j = k
            if j < k:
                p = NULL
                break
            # As in _parse: a prefix shared with the previous line keeps its rows.
            same = True
            for j in range(k - 1):
                if same and wl[j] == pwl[j] and memcmp(ws[j], pws[j], wl[j]) == 0:
                    continue
                same = False
                wid = words._find(ws[j], wl[j])
                if wid < 0:
                    break
                if j == 0:
                    prow[0] = wid
                else:
                    prow[j] = _split_seek(sb[j], snb[j], slo[j], &cur[j], prow[j - 1] * V + wid)
                    if prow[j] < 0:
                        break
                pws[j] = ws[j]
                pwl[j] = wl[j]
            else:
                j = k
            if j < k:
                p = NULL
                break
            ctx = prow[k - 2]
            wid = words._find(ws[k - 1], wl[k - 1])
            if wid < 0:
                p = NULL
                break
            key = ctx * V + wid
            if key <= prev_key:  # not in key order (or a duplicate): the usual reader sorts
                p = NULL
                break
            h = key >> 32
            if h + 1 >= nb_out:
                p = NULL
                break
            while last_h < h:
                last_h += 1
                bnd_p[last_h] = row
            lo_p[row] = <uint32_t>key  # its low 32 bits
            bo = 0.0
            code = 0
            if p < e and _is_sep(p[0]):
                while p < e and _is_sep(p[0]):
                    p += 1
                if p < e and p[0] != b'\n':
                    if top:
                        p = NULL
                        break
                    p = _number(p, e, &bo, &code)
                    if p == NULL:
                        break
                    while p < e and _is_sep(p[0]):
                        p += 1
            if p < e and p[0] != b'\n':
                p = NULL
                break
            if has_bo:
                if (boc != NULL or boi != NULL) and code == PACK_NONE:
                    status = 2
                    break
                if boi != NULL:
                    place = bo_book.add(code)
                    if place < 0:
                        status = 3
                        break
                    boi[row] = <uint16_t>place
                elif boc != NULL:
                    boc[row] = code
                else:
                    bow[row] = bo
            p += 1
            prev_key = key
            row += 1
    if status > 0:  # widen a column, then go on from this line
        return status, row, line - b, prev_key
    if p == NULL or p < e:
        return -1, row, start, prev_key
    return 0, row, end, prev_key


def split_find(const int64_t[::1] bnd, const uint32_t[::1] lo, const int64_t[::1] queries):
    """Row of each query in split keys (-1 if absent or negative): the scorer's lookup."""
    cdef Py_ssize_t i, n = queries.shape[0], nb = bnd.shape[0], cur = 0
    out_a = np.empty(n, dtype=np.int64)
    cdef int64_t[::1] out = out_a
    if lo.shape[0] == 0 or nb < 2:
        out_a.fill(-1)
        return out_a
    with nogil:
        for i in range(n):
            out[i] = -1 if queries[i] < 0 else _split_seek(&bnd[0], nb, &lo[0], &cur, queries[i])
    return out_a


def packed_take(const uint32_t[::1] codes, object rows=None):
    """The doubles of packed numbers: ``codes[rows]`` (rows >= 0), or all of them."""
    cdef Py_ssize_t i, n
    cdef const int64_t[::1] r
    cdef bint every = rows is None
    if every:
        n = codes.shape[0]
    else:
        r = rows
        n = r.shape[0]
    out_a = np.empty(n, dtype=np.float64)
    cdef double[::1] out = out_a
    with nogil:
        if every:
            for i in range(n):
                out[i] = _unpack(codes[i])
        else:
            for i in range(n):
                out[i] = _unpack(codes[r[i]])
    return out_a


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
    # Formatting runs without the GIL: a writer thread (arpa.ThreadedWriter) can copy the previous
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
