"""Count-based n-gram language models: exact (KenLM-compatible), vectorized, torch-free.

    >>> from corpora import load_corpus, prepare
    >>> from ngramlm import NgramLM
    >>> ds = prepare(load_corpus("ptb", data_dir="../shared/corpora"))          # doctest: +SKIP
    >>> lm = NgramLM(order=5, smoothing="mkn").fit(ds["train"], vocab=ds.vocab)  # doctest: +SKIP
    >>> round(lm.perplexity_report(ds["test"]).ppl, 2)                          # doctest: +SKIP
    141.19
"""
from .counts import MAX_ORDER, NgramCounts
from .model import NgramLM, PerplexityReport, TokenScores
from .query import FullScoreReturn, Model, State
from .smoothing import SMOOTHERS, make_smoother

__all__ = ["MAX_ORDER", "NgramCounts", "NgramLM", "PerplexityReport", "TokenScores", "SMOOTHERS", "make_smoother",
           "Model", "State", "FullScoreReturn"]
