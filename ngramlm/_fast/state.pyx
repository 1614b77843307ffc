# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True, initializedcheck=False
"""Compiled hash tables and the kenlm-style state API (optional: ``ngramlm.accel`` falls back to numpy/Python).

* ``KeyIndex``: packed key (context row * V + word) -> row, the index that ARPA reading walks the
  trie through and KenLM writing looks keys up in.
* ``State`` and the state API (``_StateModel``), which the KenLM binaries' tables
  (``ngramlm._fast.kenlm``) extend: ``state.pxd`` declares their fields and C methods.
* ``Tables``: per order an open-addressing hash from packed key to the n-gram's log10 p and back-off,
  used by the vectorised scorer (``find_many``) and by the state API (``base_score``), where a
  Python-level loop would cost microseconds per call.
"""
from libc.stdlib cimport malloc, free
from libc.string cimport memcpy, memcmp, memset
from libc.stdint cimport int64_t, uint64_t, uint32_t, uint8_t, int8_t
from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_GET_SIZE
from cpython.dict cimport PyDict_GetItem
from cpython.long cimport PyLong_AsLongLong
from cpython.ref cimport PyObject
from cpython.unicode cimport PyUnicode_AsUTF8AndSize

from .common cimport ABI_VERSION, MAX_ORDER, FIB, _slot, _hfind, _kenlm_space, _hv_find

include "lazy_numpy.pxi"

ABI = ABI_VERSION
__all__ = ["KeyIndex", "State", "Tables"]

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
    SMALL_RUN = 256  # a sentence of up to this many tokens is scored from buffers on the stack
    PROBE_AHEAD = 16  # positions whose probing buckets are prefetched before they are searched


# ----------------------------------------------------------------------------- hash tables + state API
cdef class _KeyHash:
    """int64 key (>= 0) -> row, open addressing with linear probing at load <= 0.6 (12 bytes a slot)."""

    # Fields: in state.pxd (ARPA reading walks them).

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

    # Fields: in state.pxd (the KenLM tables write them).

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

    # Fields and C methods: in state.pxd (the KenLM tables extend this class).

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
