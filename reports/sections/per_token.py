"""Section: a test passage scored token by token -- the best n-gram, the best neural model, their
mixture (and on the toy corpus the true language) -- in bits of surprisal."""
from __future__ import annotations

import math
from typing import Optional

from ..experiments import analysis
from ..formatting import fmt_fixed
from .base import Section, fragment


def compute(run) -> None:
    from ..experiments.data import toy_token_log2probs

    s, d = run.settings, run.data
    ng, nn = run.best("ngram"), run.best("neural")
    transformer = run.transformer()
    limit = s.passage_tokens
    if transformer is not None:  # the attention view shows the same passage: it must fit the context
        limit = min(limit, transformer["settings"]["model_config"]["block_size"] - 1)
    test = d["test"]
    gain = None
    if ng is not None and nn is not None:
        gain = run.arrays[nn["id"]]["test"] - run.arrays[ng["id"]]["test"]
    p = analysis.choose_passage(test.starts, limit, gain)
    a, b = p["start"], p["end"]
    labels = [d.vocab.itos_[int(i)] for i in test.ids[a:b]]
    rows = []
    for r in (ng, nn):
        if r is not None:
            rows.append({"id": r["id"], "label": r["label"], "family": r["family"],
                         "bits": [round(float(-x), 4) for x in run.arrays[r["id"]]["test"][a:b]]})
    for r in run.results.get("interpolation", []):
        if nn is not None and r["components"][1] == nn["id"]:
            rows.append({"id": r["id"], "label": r["label"], "family": "interpolated",
                         "bits": [round(float(-x), 4) for x in run.arrays[r["id"]]["test"][a:b]]})
    if d.toy_config is not None and b - a == int(test.starts[p["sentences"][1]] - test.starts[p["sentences"][0]]):
        sents = d.dataset.corpus.splits["test"][p["sentences"][0]:p["sentences"][1]]
        truth = [x for row in toy_token_log2probs(d.toy_config, sents) for x in row]
        rows.append({"id": "truth", "label": "true language (floor)", "family": "truth",
                     "bits": [round(-x, 4) if math.isfinite(x) else None for x in truth]})
    run.results["passage"] = {"tokens": labels, "start_token": a, "sentences": p["sentences"],
                              "rule": p["rule"], "rows": rows}


def surprisal_colour(bits: Optional[float]) -> str:
    """White (0 bits) to dark red (16 bits or more); grey where the surprisal is unknown."""
    if bits is None:
        return "#bbbbbb"
    x = min(max(bits, 0.0), 16.0) / 16.0
    return f"hsl(0, 85%, {round(100 - 62 * x)}%)"



def _passage(p: Optional[dict]) -> Optional[dict]:
    if not p:
        return None
    rows = p["rows"]
    tokens = []
    for i, tok in enumerate(p["tokens"]):
        cells = []
        for r in rows:
            b = r["bits"][i] if i < len(r["bits"]) else None
            cells.append({"bits": "–" if b is None else fmt_fixed(b, 1), "colour": surprisal_colour(b),
                          "title": f"{r['label']}: " + ("?" if b is None else f"{fmt_fixed(b, 2)} bits, p = {2 ** -b:.3g}")})
        tokens.append({"text": tok, "cells": cells})
    short = {"ngram": "n-gram", "neural": "neural", "interpolated": "mixed", "truth": "truth"}
    totals = [{"label": r["label"], "id": r["id"], "short": short.get(r["family"], r["family"]),
               "total": sum(b for b in r["bits"] if b is not None),
               "mean": sum(b for b in r["bits"] if b is not None) / max(1, len(r["bits"]))} for r in rows]
    for t in totals:
        t["total_text"] = fmt_fixed(t["total"], 1)
    return {"tokens": tokens, "rows": rows, "totals": totals, "rule": p["rule"], "sentences": p["sentences"]}




def context(results: dict) -> dict:
    """The passage; a mixture row whose weight on one part is ≈ 0 is named as that part alone."""
    from ..formatting import NEGLIGIBLE_WEIGHT, row_label

    passage = _passage(results.get("passage"))
    mixes = {r["id"]: r for r in results.get("interpolation") or []}
    for t in (passage or {}).get("totals", []):
        m = mixes.get(t["id"])
        if m is not None and min(m["lambda"], 1 - m["lambda"]) <= NEGLIGIBLE_WEIGHT:
            part = m["components"][1] if m["lambda"] <= NEGLIGIBLE_WEIGHT else m["components"][0]
            t["label"] += f" (λ ≈ {round(m['lambda']):d}: {row_label(results, part)} alone)"
    return {"passage": passage}


TITLE = 'Per-token surprisal on a test passage'
HTML_TITLE = 'Per-token surprisal on a test passage'


SECTION = Section(name="per_token", anchor="per-token", title=TITLE, html_title=HTML_TITLE,
                  md=fragment("per_token.md.j2"), html=fragment("per_token.html.j2"),
                  compute=compute, context=context)
