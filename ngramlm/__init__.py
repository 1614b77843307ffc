"""Count-based n-gram language models: exact (KenLM-compatible), vectorized, torch-free.

    >>> from corpora import load_corpus, prepare
    >>> from ngramlm import NgramLM
    >>> ds = prepare(load_corpus("ptb", data_dir="../shared/corpora"))          # doctest: +SKIP
    >>> lm = NgramLM(order=5, smoothing="mkn").fit(ds["train"], vocab=ds.vocab)  # doctest: +SKIP
    >>> round(lm.perplexity_report(ds["test"]).ppl, 2)                          # doctest: +SKIP
    141.19

The names below are imported when first used (PEP 562), so that ``import ngramlm.kenlm`` -- the
kenlm module's stand-in for KenLM binaries -- loads neither numpy nor the estimators.
"""
from __future__ import annotations

from corpora.lazy import lazy_exports

# public name -> the submodule that defines it
_EXPORTS = {
    "MAX_ORDER": "counts", "NgramCounts": "counts",
    "NgramLM": "model", "PerplexityReport": "model", "TokenScores": "model",
    "Model": "query", "State": "query", "FullScoreReturn": "query",
    "SMOOTHERS": "smoothing", "make_smoother": "smoothing",
}
__all__ = list(_EXPORTS)


__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS, globals())
