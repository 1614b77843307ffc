# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True, initializedcheck=False
"""What the compiled units share: their ABI version, the order limit, and the small hashing helpers
that more than one of them runs in its hot loops.  Everything here is inline or a constant, so each
unit that cimports it compiles its own copy: no hot loop calls from one unit into another.

Each unit exports ``ABI = ABI_VERSION``; ``ngramlm.accel`` loads the units and refuses them unless
every one carries its ``FAST_ABI``: a unit left over from an older build runs nothing.
"""
from libc.string cimport memcpy
from libc.stdint cimport int64_t, uint64_t, uint32_t, uint8_t

cdef enum:
    # Raise together with ngramlm.accel.FAST_ABI whenever a unit's Python-visible names or arguments
    # change, or a declaration the units share (this file, state.pxd).
    ABI_VERSION = 3
    MAX_ORDER = 12

cdef extern from *:
    """
    #define NGRAMLM_FIB 0x9E3779B97F4A7C15ULL
    """
    const uint64_t FIB "NGRAMLM_FIB"  # Fibonacci hashing's multiplier: 2^64 / the golden ratio


# ----------------------------------------------------------------------------- spellings by hash (ARPA words, training text)
cdef inline uint64_t _fnv(const char* s, Py_ssize_t n) noexcept nogil:
    cdef uint64_t h = 1469598103934665603ULL
    cdef Py_ssize_t i
    for i in range(n):
        h ^= <uint8_t>s[i]
        h *= 1099511628211ULL
    return h


# ----------------------------------------------------------------------------- packed keys -> rows (hash tables, ARPA reading)
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


# ----------------------------------------------------------------------------- KenLM's vocabulary: words by their hash
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
