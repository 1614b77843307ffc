"""Count-based n-gram language models: exact (KenLM-compatible), vectorized, torch-free.

A trigram model with modified Kneser-Ney smoothing, trained on a sample of the embedded toy
language (generated from a seed: no files needed) and scored on its test split:

    >>> from corpora import load_corpus, prepare
    >>> from corpora.toy import ToyConfig
    >>> from ngramlm import NgramLM
    >>> cfg = ToyConfig(n_train_tokens=60_000, n_valid_tokens=5_000, n_test_tokens=5_000, vocab_size=1500)
    >>> ds = prepare(load_corpus("toy", toy_config=cfg))
    >>> lm = NgramLM(order=3, smoothing="mkn").fit(ds["train"], vocab=ds.vocab)
    >>> report = lm.perplexity_report(ds["test"])
    >>> report.tokens, report.oovs, round(report.ppl, 2)
    (5006, 4, 87.14)

The toy language knows its own probabilities: no model can beat its perplexity on average.

    >>> round(ds.corpus.truth["test"]["perplexity"], 2)
    38.36

The distribution of the next word after a context (here the sentence start) sums to one, and
agrees with the probability of one word:

    >>> p = lm.next_probs(["<s>"])
    >>> round(float(p.sum()), 12), lm.vocab_.itos_[int(p.argmax())], round(float(p.max()), 4)
    (1.0, 'chex', 0.2082)
    >>> round(10 ** lm.log10_prob("chex", ["<s>"]), 4)
    0.2082

An ARPA file (what KenLM and SRILM read) holds the same model:

    >>> import os, tempfile
    >>> from ngramlm.io.arpa import write_arpa
    >>> from ngramlm.loading import read_arpa
    >>> with tempfile.TemporaryDirectory() as tmp:
    ...     write_arpa(lm, os.path.join(tmp, "toy3.arpa"))
    ...     back = read_arpa(os.path.join(tmp, "toy3.arpa"))
    >>> round(back.perplexity_report(ds["test"]).ppl, 2)
    87.14

On Penn Treebank (``ngramlm corpora download ptb``, then ``load_corpus("ptb")``) the same lines
at ``order=5`` give a test perplexity of 141.19, KenLM's number.

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
