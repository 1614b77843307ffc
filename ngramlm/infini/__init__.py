"""The ∞-gram: an n-gram model of unbounded order on a suffix array (:mod:`ngramlm.infini.index`),
with numpy twins of the compiled suffix-array searches (:mod:`ngramlm.infini.sa_search`).
"""
