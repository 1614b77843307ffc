"""Model files as tables: ARPA text (:mod:`~ngramlm.io.arpa`) and the native ``.npz`` format
(:mod:`~ngramlm.io.native`).  The readers return :class:`~ngramlm.tables.NgramTables` and the
writers take any back-off model; :mod:`ngramlm.loading` turns a file into a model, and KenLM's
binary format lives in :mod:`ngramlm.kenlm`.
"""
