"""The ∞-gram: an n-gram model of unbounded order on a suffix array (:mod:`ngramlm.infini.index`),
with numpy twins of the compiled suffix-array searches (:mod:`ngramlm.infini.sa_search`), and the
index in shards -- built within a memory budget or on a Dask cluster, every count a sum over the
shards (:mod:`ngramlm.infini.sharded`).
"""
