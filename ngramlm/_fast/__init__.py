"""The optional compiled extension, one unit per structure, built by setup.py and loaded (all of
them, their ABI checked once) by :mod:`ngramlm.accel`, which every caller goes through:

* ``arpa``: ARPA sections read from bytes and written from the tables; values through ARPA text.
* ``state``: the hash tables and the kenlm-style state API (``state.pxd`` declares what others use).
* ``kenlm``: KenLM probing and trie binaries: their state API, and the loops that write them.
* ``tokens``: the streamed build's tokenizer and the ∞-gram's suffix-array searches.

``common.pxd`` holds the inline helpers and the constants they share, ``ABI_VERSION`` among them.
This file imports nothing: the package imports where no unit was built.
"""
