"""Adapting a trained language model at test time: the continuous and unigram caches
(:mod:`~neural.adaptation.cache`), dynamic evaluation (:mod:`~neural.adaptation.dynamic`) and the
adaptive evaluation that combines them (:mod:`~neural.adaptation.adaptive`).
"""
