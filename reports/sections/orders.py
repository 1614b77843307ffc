"""Section: perplexity against order -- every smoother at every order, the ∞-gram as the last column,
and the count-of-counts spectrum.  Computed by the run's n-gram stage (``results["ngram"]``)."""
from __future__ import annotations

from typing import Optional

from .. import plots
from ..formatting import fmt_fixed, fmt_ppl
from ..html_tables import Cell, Row, Table
from .base import Section, fragment


def _grid_cell(r: Optional[dict]) -> dict:
    if r is None:
        return {"text": "–", "title": ""}
    if r.get("error"):
        return {"text": "n/a", "title": r["error"]}
    t = r["test"]
    if t["ppl"] is None:
        return {"text": "∞", "title": f"{t['zero_probs']:,} test tokens get probability 0; "
                                      f"over the others: {fmt_fixed(t['ppl_nonzero_events'], 2)}"}
    return {"text": fmt_fixed(t["ppl"], 2), "title": f"valid {fmt_ppl(r['valid'])}; {r['size']:,} n-gram entries"}


def _infini_cell(r: dict) -> dict:
    t = r["test"]
    if t.get("ppl") is None:
        return {"text": "∞", "title": f"{t['zero_probs']:,} test tokens get probability 0 "
                                      "(the longest matching history never saw the word)"}
    return {"text": fmt_fixed(t["ppl"], 2), "title": f"valid {fmt_ppl(r['valid'])}; {r.get('note') or ''}"}


def infini_rows(results: dict) -> list:
    """The ∞-gram alone and its mixtures (the rows of section "n -> ∞" that also join this grid)."""
    sec = results.get("infini") or {}
    return ([sec["alone"]] if sec.get("alone") else []) + sec.get("rows", [])


def context(results: dict) -> dict:
    ngram = results.get("ngram", [])
    inf_rows = infini_rows(results)
    orders = sorted({r["order"] for r in ngram})
    grid = []
    for model in dict.fromkeys(r["model"] for r in ngram):
        cells = {r["order"]: r for r in ngram if r["model"] == model}
        grid.append({"model": model, "label": next(iter(cells.values()))["label"].rsplit(" ", 1)[0],
                     "cells": [_grid_cell(cells.get(o)) for o in orders]})
    if inf_rows:
        # The ∞-gram is the last column of "perplexity against order": n unbounded.  Its rows have
        # only that cell; the fixed-order rows leave it empty.
        for g in grid:
            g["cells"].append({"text": "", "title": ""})
        for r in inf_rows:
            grid.append({"model": r["id"], "label": r["label"],
                         "cells": [{"text": "", "title": ""}] * len(orders) + [_infini_cell(r)]})
        orders = orders + ["∞"]
    table = Table("order-table", ["smoother"] + [f"n={o}" for o in orders], [
        Row([Cell(g["label"])] + [Cell(c["text"], cls="num", title=c["title"]) for c in g["cells"]]) for g in grid])
    return {"orders": orders, "grid": grid, "order_table": table}


TITLE = 'Perplexity against order (test)'
HTML_TITLE = 'Perplexity against order (test)'


SECTION = Section(name="orders", anchor="orders", title=TITLE, html_title=HTML_TITLE,
                  md=fragment("orders.md.j2"), html=fragment("orders.html.j2"),
                  context=context,
                  plots={"perplexity_by_order": ("Perplexity against order", plots.perplexity_by_order),
                         "count_spectrum": ("Count of counts", plots.count_spectrum)})
