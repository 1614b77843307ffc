"""Pages from results: the comparison report (:mod:`~reports.render.report`, its Jinja templates in
:mod:`~reports.render.templates`), the ladder's page and the parallel corpus's page.  They read
``results.json`` (and the sections' fragments) and never train or score a model.
"""
