"""Comparison reports: count and neural models on the same tokens.

``ngramlm compare`` (:mod:`reports.commands`) runs :class:`reports.compare.Run`:

* :mod:`reports.settings`   what a run trains (validated before anything is written);
* :mod:`reports.data`       the one encoded corpus, its fingerprint, training-set prefixes;
* :mod:`reports.ngram_part` the V^n wall, the count spectrum, n-gram rows (torch-free);
* :mod:`reports.neural_part` budgeted neural training, per-token scores, attention (torch);
* :mod:`reports.analysis`   interpolation, normalisation (bits per char / word), the floor, the passage;
* :mod:`reports.cache`      per-model results keyed by a hash of settings + corpus;
* :mod:`reports.plots`, :mod:`reports.render`, :mod:`reports.templates`  report.md and report.html.

``ngramlm report DIR`` re-renders the reports from ``DIR/results.json`` alone.
"""
