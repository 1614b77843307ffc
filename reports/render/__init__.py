"""Pages from results: the comparison report (:mod:`~reports.render.report`, its Jinja templates the
package files ``reports/render/templates/*.j2`` with the sections' fragments), the ladder's page and the
parallel corpus's page.  They read ``results.json`` (and the templates) and never train or score a model.
"""
