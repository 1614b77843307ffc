"""The sections of the comparison report, in the order they are computed and shown (and numbered).

A section is one object: what it computes in a run (``compute(run)``, writing its part of
``results.json``; None where a model-family stage of the run already does), the template variables
it adds (``context(results)``), its figures (``plots``: name -> (title, function of the results))
and its Markdown and HTML fragments (``templates/<name>.md.j2`` and ``<name>.html.j2``, package files).
A new section is one module here, its two fragment files and one line in :data:`SECTIONS`.  A table of
the HTML report is a :class:`reports.html_tables.Table` in the section's context, written by
``{{ table(t) }}`` in its fragment: the table's HTML and its CSV file come from the same rows.
"""
from __future__ import annotations

from .base import Section  # noqa: F401 (re-exported: the section type)

from . import attention, curves, infini, interpolation, ladder, orders, per_token, pruning, tokenizations, training, vwall  # noqa: E402,E501

SECTIONS = (vwall.SECTION, orders.SECTION, curves.SECTION, interpolation.SECTION, per_token.SECTION,
            attention.SECTION, infini.SECTION, tokenizations.SECTION, training.SECTION, ladder.SECTION,
            pruning.SECTION)


def numbers() -> dict:
    """Section name -> its number in the report."""
    return {s.name: i for i, s in enumerate(SECTIONS, start=1)}


# The functions below read SECTIONS when called, so a section registered later (a plug-in, a test)
# is computed, numbered and rendered like the built-in ones.


def plot_functions() -> dict:
    return {name: fn for s in SECTIONS for name, (_, fn) in s.plots.items()}


def plot_titles() -> dict:
    return {name: title for s in SECTIONS for name, (title, _) in s.plots.items()}


def context(results: dict) -> dict:
    out = {"sec": numbers()}
    for s in SECTIONS:
        if s.context is not None:
            out.update(s.context(results))
    return out
