"""Comparison reports: count and neural models on the same tokens.

``ngramlm compare`` (:mod:`reports.commands.compare`) runs :class:`reports.compare.Run`:

* :mod:`reports.experiments.settings`   what a run trains (validated before anything is written);
* :mod:`reports.experiments.data`       the one encoded corpus, its fingerprint, training-set prefixes;
* :mod:`reports.experiments.ngram_part` the V^n wall, the count spectrum, n-gram rows (torch-free);
* :mod:`reports.experiments.neural_part` budgeted neural training, per-token scores, attention (torch);
* :mod:`reports.experiments.analysis`   interpolation, normalisation (bits per char / word), the floor, the passage;
* :mod:`reports.experiments.result_cache`      per-model results keyed by a hash of settings + corpus;
* :mod:`reports.plots`, :mod:`reports.render.report` (its templates: package files)  report.md and report.html.

``ngramlm report DIR`` re-renders the reports from ``DIR/results.json`` alone.
"""
