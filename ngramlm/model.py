"""The n-gram language model as an estimator: parameters, ``fit`` (counts -> smoother -> tables), save.

Querying is :class:`~ngramlm.scorer.Scorer`'s, which :class:`NgramLM` extends: once fitted, the model
scores, samples and answers single queries through its tables.  Readers (ARPA, native), pruning and
tuning work on :class:`~ngramlm.tables.NgramTables` and never import this module;
:mod:`ngramlm.loading` turns what they return into an :class:`NgramLM`.
Log probabilities are base 10 unless a name says otherwise (``log2``, ``nats``).
"""
from __future__ import annotations

import os
from typing import Optional, Sequence

import numpy as np

from corpora.accounting import PerplexityReport  # noqa: F401 (ngramlm.PerplexityReport: the package exports it from here)
from corpora.errors import InputError
from corpora.vocab import EncodedText, Vocab

from .counts import NgramCounts, check_order
from .builder.estimate import estimate_tables
from .scorer import Scorer, TokenScores  # noqa: F401 (ngramlm.TokenScores: the package exports it from here)
from .smoothing import SMOOTHER_INFO, Smoother, backoff_smoothers, canonical_name, make_smoother, named_list
from .tables import NgramTables


class NgramLM(Scorer):
    """An n-gram LM over a shared :class:`~corpora.vocab.Vocab`.

    >>> from corpora import Vocab
    >>> sents = [["a", "b"], ["a", "c", "b"], ["b", "a"]]
    >>> vocab = Vocab().fit(sents)
    >>> lm = NgramLM(order=2, smoothing="wb").fit(vocab.encode_sentences(sents), vocab=vocab)
    >>> round(sum(lm.distribution(["a"]).values()), 12)
    1.0
    """

    def __init__(
        self,
        *,
        order: int = 3,
        smoothing: str = "mkn",
        k: Optional[float] = None,
        discount: Optional[float] = None,
        discount_fallback: Optional[Sequence[float]] = None,
        alpha: Optional[float] = None,
        lambdas: Optional[Sequence[float]] = None,
        prune: Optional[Sequence[int]] = None,
        prune_entropy: Optional[float] = None,
        compat: Optional[str] = None,
        interpolate: Optional[bool] = None,
        gtmin: Optional[Sequence[int]] = None,
        gtmax: Optional[Sequence[int]] = None,
    ) -> None:
        self.order = order
        self.smoothing = canonical_name(smoothing)  # an alias is its smoother's name from here on
        self.k = k
        self.discount = discount
        self.discount_fallback = discount_fallback
        self.alpha = alpha
        self.lambdas = lambdas
        self.prune = prune  # count cut-offs per order (n-grams with count <= cut-off go)
        self.prune_entropy = prune_entropy  # Stolcke threshold on relative perplexity increase
        self.compat = compat  # "kenlm": lmplz's conventions bit for bit (ngramlm.kenlm_compat); "srilm": SRILM's
        # SRILM's ngram-count options (compat="srilm" only, ngramlm.srilm_compat): -interpolate, and per order
        # -gtNmin (count cut-offs of every method) and -gtNmax (Good-Turing's largest discounted count).
        self.interpolate = interpolate
        self.gtmin = gtmin
        self.gtmax = gtmax

    # ------------------------------------------------------------------ fitting
    def _make_smoother(self) -> Smoother:
        # Every option goes in, None meaning "not given"; make_smoother refuses one the
        # smoother does not take (discount for Witten-Bell, ...).  Checked here, at fit
        # time, not in __init__: loading a saved model rebuilds it from its init params.
        if self.smoothing is None or self.smoothing == "arpa":  # read from a file that does not say
            raise InputError(f"this {self.order}-gram model was read from a file that does not record its smoothing "
                             "(an ARPA file of KenLM or SRILM), so it cannot be re-estimated as it was",
                             fix=f"train a new one: NgramLM(order={self.order}, smoothing='mkn').fit(...) "
                                 f"(or `ngramlm train TEXT --order {self.order} --smoothing mkn`)")
        if self.compat not in (None, "kenlm", "srilm"):
            raise InputError(f"unknown compat {self.compat!r}", fix="use compat='kenlm' or 'srilm' (or none)")
        srilm_only = [o for o, v in (("interpolate", self.interpolate), ("gtmin", self.gtmin), ("gtmax", self.gtmax))
                      if v is not None]
        if self.compat == "srilm":
            from .srilm_compat import SrilmEstimator

            make_smoother(self.smoothing, k=self.k, discount=self.discount,  # the usual checks of the parameters
                          discount_fallback=self.discount_fallback, alpha=self.alpha, lambdas=self.lambdas)
            return SrilmEstimator(self.smoothing, interpolate=bool(self.interpolate), gtmin=self.gtmin,
                                  gtmax=self.gtmax, discount=self.discount, k=self.k,
                                  discount_fallback=self.discount_fallback)
        if srilm_only:
            raise InputError(f"{', '.join(srilm_only)} {'is' if len(srilm_only) == 1 else 'are'} SRILM's "
                             "ngram-count option(s), for compat='srilm'",
                             fix="add compat='srilm' (--compat srilm), or drop them")
        smoother = make_smoother(self.smoothing, k=self.k, discount=self.discount,
                                 discount_fallback=self.discount_fallback, alpha=self.alpha, lambdas=self.lambdas)
        if self.compat is not None:
            if not SMOOTHER_INFO[smoother.name].compat:
                raise InputError(f"compat='kenlm' reproduces lmplz's Kneser-Ney; {smoother.name} is not estimated "
                                 "by lmplz", fix="train with smoothing mkn (or kn), or drop the compat option")
        return smoother

    def fit(self, train: EncodedText, *, vocab: Vocab, counts: Optional[NgramCounts] = None,
            heldout: Optional[EncodedText] = None, limit_vocab: Optional[Sequence[str]] = None,
            limit_vocab_source: Optional[str] = None, first_seen: Optional[np.ndarray] = None) -> "NgramLM":
        """Count (unless ``counts`` are given) and smooth.  Returns ``self``.

        ``heldout`` text tunes the weights of Jelinek-Mercer when none were given.

        ``limit_vocab`` (a recogniser's word list) keeps only the n-grams whose words are listed
        (``<s>``, ``</s>``, ``<unk>`` always), estimated on the whole text.  With ``compat="kenlm"``
        as lmplz's ``--limit_vocab_file`` does it: the other n-grams are pruned inside the estimation,
        each context's pruned mass going to its back-off weight, and nothing else changes.  Otherwise
        as :func:`ngramlm.tools.vocab_filter.limit_vocabulary` does it: the removed words' probability goes
        to ``<unk>`` and the back-off weights are renormalised.  ``self.vocab_limit_`` says what was
        removed; ``limit_vocab_source`` (the list's file) is named in errors and recorded.

        ``first_seen`` (with ``counts`` and no ``train``, as a streamed build has them): the ids in the
        order they first appear in the text, which is all ``compat="kenlm"`` needs of it.
        """
        order = check_order(self.order)
        smoother = self._make_smoother()
        if counts is None:
            counts = NgramCounts.from_encoded(train, order=order, vocab_size=len(vocab))
        if smoother.name == "jm" and self.lambdas is None:
            if heldout is None:
                raise InputError("Jelinek-Mercer needs its weights, or held-out text to tune them on",
                                 fix="pass lambdas=[...] (--lambdas), or held-out text (--tune-on valid)")
            from .tuning import tune_jelinek_mercer

            smoother.lambdas = tune_jelinek_mercer(counts, vocab, heldout)
        if limit_vocab is not None:
            from .tools.vocab_filter import check_limitable_smoother, kept_ids

            check_limitable_smoother(smoother)
            keep, _ = kept_ids(vocab, limit_vocab, source=limit_vocab_source)
        if self.compat == "kenlm":
            self._apply_compat(smoother, train, counts, first_seen)
            if limit_vocab is not None:
                smoother.lmplz_["prune_words"] = ~keep
        self.fit_counts(counts, vocab=vocab, smoother=smoother)
        if limit_vocab is not None:
            from .tools.vocab_filter import limit_vocabulary

            # compat="srilm": SRILM's -limit-vocab (the n-grams outside the list dropped, no number changed).
            self.vocab_limit_ = limit_vocabulary(self, words=limit_vocab, source=limit_vocab_source,
                                                 lmplz=self.compat == "kenlm",
                                                 compat="srilm" if self.compat == "srilm" else None)
            self._set_tables(self.vocab_limit_.tables)
        return self

    def _apply_compat(self, smoother: Smoother, train: Optional[EncodedText], counts: NgramCounts,
                      first_seen: Optional[np.ndarray] = None) -> None:
        from .kenlm_compat import lmplz_adjustments

        smoother.lmplz_ = lmplz_adjustments(train, counts, first_seen=first_seen)

    def fit_counts(self, counts: NgramCounts, *, vocab: Vocab, smoother: Optional[Smoother] = None) -> "NgramLM":
        if smoother is None:
            smoother = self._make_smoother()
            if self.compat == "kenlm":
                self._apply_compat(smoother, None, counts)  # refuses: it needs the text
        self._set_tables(estimate_tables(counts, vocab=vocab, smoother=smoother))
        if self.prune is not None or self.prune_entropy is not None:
            self._prune(counts)
        return self

    def fit_files(self, paths: Sequence, *, vocab: Optional[Vocab] = None, tokenizer=None, memory=None,
                  temp_dir: Optional[os.PathLike | str] = None, client=None, keep_empty: bool = True,
                  min_count: int = 1, max_size: Optional[int] = None, unk_token: str = "<unk>",
                  heldout: Optional[EncodedText] = None, progress=None, estimation: str = "memory") -> "NgramLM":
        """Train on text files (plain or gzip; ``"-"`` is standard input) without holding them whole.

        The text is streamed twice (vocabulary, then counts); counts are made in blocks that fit
        ``memory`` (``"1G"``, ``"30%"`` or bytes; default half of RAM), spilled to ``temp_dir`` as
        sorted runs and merged.  ``client`` -- a ``distributed.Client`` or an address such as
        ``"tcp://host:8786"`` or ``"local:2"`` -- counts on Dask workers instead.  The model equals
        ``fit`` on the same text.  Returns ``self``; ``build_stats_`` has the sentence and word counts.

        ``estimation="auto"`` estimates mkn/kn out of core (``ngramlm.builder.outofcore``) when the merged
        counts would not fit ``memory``, ``"disk"`` always; the model is then read back from the
        native file it writes in the temp folder (its keys, probabilities and back-offs: about 24
        bytes an n-gram).  ``ngramlm train`` writes that file in place instead, and never holds it.

        The build is :func:`ngramlm.builder.pipeline.build`, the one ``ngramlm train`` runs; ``progress``
        gets the messages of its counting and estimation steps.
        """
        from .builder.pipeline import BuildConfig, build

        def detail(message, stage=None, depth=0):  # the counting and estimation steps' messages
            if progress is not None and depth == 2:
                progress(message)

        config = BuildConfig.for_estimator(self, files=True, tokenizer=tokenizer, keep_empty=keep_empty, vocab=vocab,
                                           min_count=min_count, max_size=max_size, unk_token=unk_token,
                                           heldout=heldout, memory=memory, temp_dir=temp_dir, dask=client,
                                           estimation=estimation)
        built = build(list(paths), config, detail, estimator=self)
        self.build_stats_ = {"sentences": built.sentences, "words": built.words}
        return self

    # ------------------------------------------------------------------ tables
    @classmethod
    def from_tables(cls, tables: NgramTables, **init_params) -> "NgramLM":
        """A fitted model over ``tables`` (from an ARPA file, the native loader, pruning ...)."""
        return cls(**init_params)._set_tables(tables)

    def _prune(self, counts: NgramCounts) -> None:
        from .tools.pruning import check_prune_args, prune_counts, prune_entropy

        check_prune_args(self.order_, self.prune, self.prune_entropy)
        if self.kind_ != "backoff" or not self.is_distribution_:
            raise InputError(f"pruning needs a back-off model; {self.smoother_name_} is not one",
                             fix=f"prune models smoothed with {named_list(backoff_smoothers())}")
        before = list(self.n_ngrams_)
        if self.prune is not None and any(self.prune):
            self._set_tables(prune_counts(self, [t.count for t in counts.tables], list(self.prune)))
        if self.prune_entropy:  # compat="srilm": SRILM's -prune, its float arithmetic included
            self._set_tables(prune_entropy(self, float(self.prune_entropy),
                                           compat="srilm" if self.compat == "srilm" else None))
        self.info_ = dict(self.info_, pruned={"cutoffs": None if self.prune is None else list(self.prune),
                                              "entropy_threshold": self.prune_entropy,
                                              "ngrams_before": before, "ngrams_after": list(self.n_ngrams_)})
        return self

    # ------------------------------------------------------------------ info
    def __repr__(self) -> str:
        if not hasattr(self, "tables_"):
            return f"NgramLM(order={self.order}, smoothing={self.smoothing!r}, unfitted)"
        sizes = "/".join(str(n) for n in self.n_ngrams_)
        return f"NgramLM(order={self.order_}, smoothing={self.smoother_name_!r}, ngrams={sizes}, types={self.n_types_})"

    def summary(self) -> dict:
        self._check_fitted()
        return {
            "order": self.order_,
            "smoothing": self.smoother_name_,
            "params": {k: v for k, v in self.smoother_params_.items()},
            "n_types": self.n_types_,
            "ngrams": self.n_ngrams_,
            "is_distribution": self.is_distribution_,
            "info": self.info_,
        }

    # ------------------------------------------------------------------ persistence (native: npz + JSON, no pickle)
    def save(self, path: os.PathLike | str) -> None:
        """Write the native format atomically (a crash leaves the old file intact)."""
        from .io.native import save_native

        save_native(self, path)

    @classmethod
    def load(cls, path: os.PathLike | str) -> "NgramLM":
        from .io.native import load_native_tables

        tables, init_params = load_native_tables(path)
        return cls.from_tables(tables, **init_params)
