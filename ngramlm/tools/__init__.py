"""Tools over an estimated back-off model (what SRILM's ``ngram`` options and KenLM's ``lm/filter``
and ``lm/interpolate`` do): pruning (count cut-offs, entropy pruning, pruning to a size), static
and per-context mixtures, and limiting a model to a word list.  They read and return tables; none
imports the estimator.
"""
