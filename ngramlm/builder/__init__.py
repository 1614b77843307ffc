"""Building a model from text: the pipeline that runs one build (``pipeline``: a ``BuildConfig`` and
``build``), counting files within a memory budget, streaming, out-of-core estimation, the Dask
cluster, count merging, and the estimation step that turns counts and a smoother into tables.

The counterpart of KenLM's ``lm/builder/``.  Nothing here imports the estimator
(:class:`ngramlm.model.NgramLM`) or a command module: the estimator and ``ngramlm train`` drive it,
passing the estimator in.
"""
