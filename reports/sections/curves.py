"""Section: learning curves -- test perplexity against the training-set size, for two count models
and the best neural model (each point a model trained on a prefix of the training text)."""
from __future__ import annotations

from .. import plots
from ..formatting import describe_budget, fmt_budget, fmt_budget_spec, fmt_ppl
from ..html_tables import Cell, Row, Table
from .base import Section, fragment


def compute(run) -> None:
    from ngramlm import NgramCounts

    from ..experiments.data import prefix
    from ..experiments.ngram_part import ngram_row, ngram_settings

    s, d = run.settings, run.data
    if not s.curve:  # --curve none
        run.results["learning_curves"] = None
        return
    fractions = sorted(set(s.curve))
    series = []
    run.log(f"learning curves at {', '.join(f'{100 * f:g}%' for f in fractions)} of the training text")
    subsets = {f: prefix(d["train"], f) for f in fractions}
    top = max(s.curve_orders)
    subset_counts = {1.0: run.counts}

    def counts_of(f):  # counted once per prefix, on first use (cached models need none)
        if f not in subset_counts:
            subset_counts[f] = NgramCounts.from_encoded(subsets[f], order=top, vocab_size=len(d.vocab))
        return subset_counts[f]

    for order in s.curve_orders:
        pts = []
        for f in fractions:
            sub = subsets[f]

            def compute_row(key, f=f, sub=sub, order=order):
                return ngram_row(s.curve_smoother, order, counts_of(f), d, fraction=f, train=sub)

            pts.append(_point(run._cached_or("ngram", ngram_settings(s.curve_smoother, order, f), compute_row,
                                             keep_arrays=False), f))
        series.append({"id": f"{s.curve_smoother}-{order}", "label": pts[-1]["label"], "family": "ngram",
                       "points": pts})
    best = run.best("neural")
    if best is not None:
        from ..experiments.neural_part import LABELS, neural_row, neural_settings

        pts = []
        budget = s.curve_budget()
        for f in fractions:
            ns = neural_settings(best["model"], s.neural_size, budget, s.seed, len(d.vocab), fraction=f)
            row = run._cached_or("neural", ns, lambda key, ns=ns, f=f: neural_row(
                best["model"], ns, d, run.cache.checkpoint(key), train=subsets[f],
                log=run.log if run.verbose else None, row_id=f"{best['model']}@{f:g}", warn=run.log),
                keep_arrays=False)
            pts.append(_point(row, f))
        label = f"{LABELS[best['model']]} ({s.neural_size}), {describe_budget(budget)} per point"
        series.append({"id": best["model"], "label": label, "family": "neural", "points": pts})
    run.results["learning_curves"] = {"fractions": fractions, "series": series}


def _point(row: dict, fraction: float) -> dict:
    keep = ("id", "label", "train_tokens", "train_seconds", "size", "valid", "test", "error", "note", "cached",
            "key", "stopped", "epochs", "steps", "budget", "budget_seconds", "wall_seconds")
    return {"fraction": fraction, **{k: row.get(k) for k in keep}}


def context(results: dict) -> dict:
    lc = results.get("learning_curves") or {}
    curves = []
    for series in lc.get("series", []):
        curves.append({"label": series["label"], "family": series.get("family", ""), "cells": [
            ("–" if not p.get("test") else fmt_ppl(p["test"])) + ("" if not p.get("error") else " (n/a)")
            for p in series["points"]]})
        # A neural series: the steps each point trained (a point that trained fewer than a smaller fraction's
        # is flagged ⚠: a wall-clock budget on a loaded machine bought fewer), and its budget and cost.
        if series.get("family") == "neural" and any(p.get("steps") is not None for p in series["points"]):
            curves.append({"label": "steps trained", "family": "budget", "cells": [
                "–" if p.get("steps") is None else f"{p['steps']:,}" + (" ⚠" if fewer else "")
                for p, fewer in zip(series["points"], plots.fewer_steps(series["points"]))]})
        if series.get("family") == "neural" and any(
                k in p for p in series["points"] for k in ("budget", "wall_seconds")):
            curves.append({"label": "budget / actual", "family": "budget",
                           "cells": [fmt_budget(p) for p in series["points"]]})
    curve_tokens = []
    if lc.get("series"):
        curve_tokens = [f"{p['train_tokens']:,}" for p in lc["series"][0]["points"]]
    fractions = [f"{100 * f:g}%" for f in lc.get("fractions", [])]
    # One row per training-set size, one column per series (and per neural series its steps and budget):
    # a table that sorts by any column, each point's steps beside its perplexity.
    raw = [{"fraction": p["fraction"], "tokens": p.get("train_tokens")} for p in
           (lc["series"][0]["points"] if lc.get("series") else [])]
    header = [Cell("training set"), Cell("training tokens")] + [
        Cell(c["label"] if c["family"] != "budget" else f"{prev}: {c['label']}")
        for c, prev in zip(curves, _owners(curves))]
    table = Table("curve-table", header, [Row(
        [Cell(fractions[i], value=raw[i]["fraction"], cls="num"),
         Cell(curve_tokens[i] if i < len(curve_tokens) else "–", value=raw[i]["tokens"] or "", cls="num")]
        + [Cell(c["cells"][i], cls="num" if c["family"] != "budget" or c["label"] == "steps trained" else "num budget")
           for c in curves]) for i in range(len(raw))], cls="sortable")
    return {"curves": curves, "curve_fractions": fractions, "curve_tokens": curve_tokens,
            "curve_notes": full_point_notes(results) + fewer_steps_notes(results), "curve_table": table}


def _owners(curves: list) -> list:
    """The series label each row of ``curves`` belongs to (a steps or budget row: the neural series above it)."""
    out, last = [], ""
    for c in curves:
        if c["family"] != "budget":
            last = c["label"].split(" (")[0]
        out.append(last)
    return out


def fewer_steps_notes(results: dict) -> list:
    """A sentence per neural point that trained fewer steps than a point on a smaller fraction: its
    perplexity is a shorter training's, not what the larger training set is worth."""
    notes = []
    for series in (results.get("learning_curves") or {}).get("series", []):
        pts = series["points"]
        for i, (p, fewer) in enumerate(zip(pts, plots.fewer_steps(pts))):
            if fewer:
                most = max((q for q in pts[:i] if q.get("steps") is not None), key=lambda q: q["steps"])
                notes.append(f"⚠ The {series['label'].split(' (')[0]} point at {100 * p['fraction']:g} % trained "
                             f"{p['steps']:,} steps, fewer than the {100 * most['fraction']:g} % point's "
                             f"{most['steps']:,}: its wall-clock budget bought fewer steps (a loaded machine, or a "
                             "slower evaluation), so it understates what that much training text is worth.")
    return notes


def full_point_notes(results: dict) -> list:
    """For a neural series whose 100 % point is not the results table's model (it trained under the
    curve's per-point budget, the table's model under the main budget): say so, with both numbers, so
    the curve never silently contradicts the table."""
    notes = []
    lc = results.get("learning_curves") or {}
    rows = {r["id"]: r for r in results.get("neural", [])}
    for series in lc.get("series", []):
        full = next((p for p in series["points"] if p["fraction"] >= 1.0), None)
        row = rows.get(series["id"])
        if series.get("family") != "neural" or full is None or row is None or not row.get("test"):
            continue
        if full.get("key") == row.get("key"):
            continue  # the same model: the 100 % point is the table's row
        notes.append(f"The {series['label'].split(' (')[0]} point at 100 % is a separate run with the curve's "
                     f"per-point budget ({fmt_budget_spec(full.get('budget')) or 'see above'}): test ppl "
                     f"{fmt_ppl(full.get('test'))}. The results table's {row['label']} trained under the main "
                     f"budget ({fmt_budget_spec(row.get('budget')) or 'see the table'}): test ppl {fmt_ppl(row['test'])}"
                     " (the star in the figure).")
    return notes


TITLE = 'Learning curves (test perplexity against training-set size)'
HTML_TITLE = 'Learning curves'


SECTION = Section(name="curves", anchor="curves", title=TITLE, html_title=HTML_TITLE,
                  md=fragment("curves.md.j2"), html=fragment("curves.html.j2"),
                  compute=compute, context=context, plots={"learning_curves": ("Learning curves", plots.learning_curves)})
