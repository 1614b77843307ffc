# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True, initializedcheck=False
"""The state unit's classes as the other units see them: ARPA reading walks a ``_KeyHash``'s arrays,
the KenLM binaries' tables extend ``_StateModel`` and write ``State``s.  Fields are reached directly
and C methods through the class's table, as within one module."""
from libc.stdint cimport int64_t, uint64_t, uint32_t, uint8_t, int8_t

from .common cimport MAX_ORDER


cdef class _KeyHash:
    cdef int64_t* keys
    cdef uint32_t* rows
    cdef uint64_t size

    cdef int build(self, const int64_t[:] keys) except -1


cdef class State:
    cdef int64_t r[MAX_ORDER]
    cdef int length
    cdef public int hist
    # The back-off weights of the rows, as KenLM's state keeps them, so the next word's score reads
    # them here instead of from a table (a cache miss each); valid only for the Tables that wrote them.
    cdef double b[MAX_ORDER]
    cdef const void* bowner


cdef class _StateModel:
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

    cdef double _score(self, State s, int64_t w, State out, int* matched) noexcept
    cdef int _check(self, State s) except -1
    cdef inline int64_t _wid(self, object word) except? -1
    cdef int64_t _hash_wid(self, object word) except? -1
    cdef int _check_ids(self, const int64_t[:] tokens) except -1
    cdef void _ahead(self, const int64_t* tokens, const int64_t* pos, Py_ssize_t t) noexcept
    cdef void _score_run(self, const int64_t* tokens, const int64_t* pos, Py_ssize_t T, double* lpv,
                         int8_t* mv) noexcept
