"""``report.md`` and ``report.html`` from ``results.json`` (nothing else is read).

The HTML report is one self-contained file: figures are embedded as base64 PNG, the
attention data as inline JSON, the script and styles inline; it needs no network.
The Markdown report links the same figures, written to ``DIR/plots/*.png``.
"""
from __future__ import annotations

import base64
import json
import math
from pathlib import Path
from typing import Optional

import jinja2
import markupsafe

from corpora.textio import atomic_write_bytes, atomic_write_text

from . import plots
from .templates import HTML_TEMPLATE, MD_TEMPLATE

PLOT_TITLES = {
    "vwall": "The V^n wall",
    "perplexity_by_order": "Perplexity against order",
    "count_spectrum": "Count of counts",
    "learning_curves": "Learning curves",
    "interpolation": "Interpolation weight",
    "effective_n": "n → ∞: effective n",
    "attention": "Transformer attention (static)",
}


# ---------------------------------------------------------------------------- formatting
def fmt_fixed(x: float, digits: int = 3, sign: bool = False) -> str:
    """``x`` with ``digits`` decimals (``sign``: always with a sign), never as negative zero:
    -0.0, and any negative value that rounds to zero (-0.00004 at 3 digits), print as 0.000."""
    text = f"{x:+.{digits}f}" if sign else f"{x:.{digits}f}"
    if text[0] == "-" and float(text) == 0.0:
        text = ("+" if sign else "") + text[1:]
    return text


def fmt_ppl(score: Optional[dict]) -> str:
    if not score:
        return "–"
    if score.get("ppl") is None:
        return "∞"
    return fmt_fixed(score["ppl"], 2)


def fmt_num(x, digits: int = 3) -> str:
    if x is None:
        return "–"
    if isinstance(x, int):
        return f"{x:,}"
    return fmt_fixed(x, digits)


def fmt_size(n: Optional[int]) -> str:
    if n is None:
        return "–"
    for unit, div in (("G", 1e9), ("M", 1e6), ("k", 1e3)):
        if n >= div:
            return f"{n / div:.2f}{unit}"
    return str(n)


def fmt_seconds(s: Optional[float]) -> str:
    if s is None:
        return "–"
    return f"{fmt_fixed(s, 1)} s" if s < 120 else f"{fmt_fixed(s / 60, 1)} min"


def fmt_share(x: float) -> str:
    """A share as a percentage: 41.2%, 0.37%, 2.1e-05%."""
    pct = 100.0 * x
    if pct == 0:
        return "0%"
    if pct >= 1:
        return f"{pct:.1f}%"
    if pct >= 0.01:
        return f"{pct:.2f}%"
    return f"{pct:.1e}%"


def fmt_power(log10: float) -> str:
    e = math.floor(log10)
    return f"{10 ** (log10 - e):.2f}e{e}"


def fmt_budget_spec(budget: Optional[dict]) -> Optional[str]:
    """``{"minutes": 0.6}`` -> "0.6 min"; ``{"epochs": 1}`` -> "1 epoch"; None when unknown."""
    if not budget:
        return None
    if budget.get("minutes") is not None:
        return f"{budget['minutes']:g} min"
    if budget.get("epochs") is not None:
        e = budget["epochs"]
        return f"{e:g} epoch{'' if e == 1 else 's'}"
    return None


def fmt_budget(r: dict) -> str:
    """A neural row's budget and what the model actually cost in this run (training and
    evaluation: ``wall_seconds``), e.g. "0.6 min / 0.63 min (+5 %)" or "1 epoch / 12.3 s".

    Rows written before ``budget`` / ``wall_seconds`` existed fall back to the budget in
    their settings and show "–" for what is unknown; a cached row cost nothing but the
    cache read ("cached"); a model trained elsewhere was only scored here.
    """
    budget = r.get("budget") or (r.get("settings") or {}).get("budget")
    spec = fmt_budget_spec(budget)
    wall = r.get("wall_seconds")
    if wall is None:
        actual = "cached" if r.get("cached") is True else None
        if spec is None and actual is None:
            return "–"
        return f"{spec or '–'} / {actual or '–'}"
    if r.get("stopped") == "adopted":  # trained outside this run: here it was only scored
        return f"{spec or '–'} / {fmt_seconds(wall)} (scoring only)"
    by_minutes = bool(budget) and budget.get("minutes") is not None
    seconds = r.get("budget_seconds")
    if seconds is None and by_minutes:
        seconds = 60.0 * budget["minutes"]
    if by_minutes:
        minutes = wall / 60.0
        actual = f"{fmt_fixed(minutes, 2 if minutes < 10 else 1)} min"
    else:
        actual = fmt_seconds(wall)
    if seconds:
        return f"{spec or '–'} / {actual} ({fmt_fixed(100.0 * (wall / seconds - 1.0), 0, sign=True)} %)"
    return f"{spec or '–'} / {actual}"


# What the predicted tokens are, per tokenizer kind: (the tokens of a split, the types of the
# vocabulary besides <unk> and </s>).  Plain text: the templates quote the symbols themselves.
TOKEN_UNITS = {
    "whitespace": ("words + sentence ends", "words"),
    "regex": ("words, numbers and punctuation marks + sentence ends", "words, numbers, punctuation marks"),
    "char": ("characters + sentence ends, a space being the token {space}", "characters, the space symbol {space}"),
    "cjk": ("Han characters, other words and punctuation marks + sentence ends",
            "Han characters, other words, punctuation marks"),
}


def token_units(tokenizer: Optional[dict]) -> dict:
    """How the report names the predicted tokens of a run tokenized by ``tokenizer`` (its spec):
    ``{"tokens": ..., "types": ...}``."""
    tok = tokenizer or {}
    tokens, types = TOKEN_UNITS.get(tok.get("kind") or "whitespace", TOKEN_UNITS["whitespace"])
    space = tok.get("space_symbol") or "▁"
    return {"tokens": tokens.format(space=space), "types": types.format(space=space)}


def _row(r: dict) -> dict:
    t = r.get("test") or {}
    norm = r.get("test_normalised") or {}
    floor = r.get("above_floor")
    if t and t.get("ppl") is None and t.get("zero_probs"):
        test = f"∞ ({t['zero_probs']:,} zero-prob. tokens)"
    else:
        test = fmt_ppl(t)
    return {
        "id": r["id"], "label": r["label"], "family": r["family"],
        "valid": fmt_ppl(r.get("valid")), "test": test,
        "bpt": fmt_num(norm.get("bits_per_token")), "bpc": fmt_num(norm.get("bits_per_char")),
        "bpw": fmt_num(norm.get("bits_per_word")),
        "floor": "–" if not floor else (f"{fmt_fixed(floor['extra_bits_per_token'], 3, sign=True)} bits "
                                        f"(×{fmt_fixed(floor['ppl_ratio'], 2)})"),
        "size": fmt_size(r.get("size")), "size_unit": r.get("size_unit", ""),
        "train": fmt_seconds(r.get("train_seconds")), "cached": ("scored" if r.get("stopped") == "adopted" else
                   {True: "cached", False: "trained"}.get(r.get("cached"), "")),
        "note": "; ".join(x for x in (r.get("error") and f"not estimated: {r['error']}", r.get("note")) if x),
        "budget": fmt_budget(r) if r["family"] == "neural" else "",
    }


def _best_per_smoother(rows: list) -> list:
    best = {}
    for r in rows:
        v = r.get("valid")
        key = r["model"]
        if v and v.get("ppl") is not None:
            if key not in best or best[key]["valid"]["ppl"] > v["ppl"]:
                best[key] = r
        elif key not in best:
            best.setdefault(key, None)
    out = []
    for key, r in best.items():
        if r is None:  # no order gave a finite perplexity (MLE): show the highest order anyway
            r = max((x for x in rows if x["model"] == key), key=lambda x: x["order"])
        out.append(r)
    return out


def build_context(results: dict) -> dict:
    from corpora.textio import shown_path

    s = dict(results["settings"])
    if s.get("checkpoints"):  # as the reader's folders, not this machine's
        s["checkpoints"] = [shown_path(c) for c in s["checkpoints"]]
    corpus = results["corpus"]
    truth = (corpus.get("truth") or {}).get("test")
    ngram = results.get("ngram", [])
    neural = results.get("neural", [])
    interp = results.get("interpolation", [])
    sec_inf = results.get("infini") or {}
    inf_rows = ([sec_inf["alone"]] if sec_inf.get("alone") else []) + sec_inf.get("rows", [])
    summary = [_row(r) for r in _best_per_smoother(ngram)] + [_row(r) for r in neural] + [_row(r) for r in interp] \
        + [_row(r) for r in inf_rows]
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
    problems = [{"id": r["id"], "error": r["error"]} for r in ngram + neural if r.get("error")]
    vwall = [{
        "order": r["order"], "possible": fmt_power(r["possible_log10"]), "distinct": f"{r['distinct_train']:,}",
        "coverage": fmt_share(r["coverage_of_possible"]),
        "unseen": f"{fmt_fixed(100 * r['test_unseen_share'], 1)}%", "unseen_n": f"{r['test_unseen']:,}",
        "tokens": f"{r['test_tokens']:,}", "zeros": f"{r['mle_zero_probs']:,}",
        "mle_ppl": "∞" if r["mle_ppl"] is None else fmt_fixed(r["mle_ppl"], 2),
        "mle_nonzero": "–" if r["mle_ppl_nonzero_events"] is None else fmt_fixed(r["mle_ppl_nonzero_events"], 2),
    } for r in results.get("vwall", [])]
    lc = results.get("learning_curves") or {}
    curves = []
    for series in lc.get("series", []):
        curves.append({"label": series["label"], "family": series.get("family", ""), "cells": [
            ("–" if not p.get("test") else fmt_ppl(p["test"])) + ("" if not p.get("error") else " (n/a)")
            for p in series["points"]]})
        # A neural series: each point's budget and what it cost, when results.json records them.
        if series.get("family") == "neural" and any(
                k in p for p in series["points"] for k in ("budget", "wall_seconds")):
            curves.append({"label": "budget / actual", "family": "budget",
                           "cells": [fmt_budget(p) for p in series["points"]]})
    curve_tokens = []
    if lc.get("series"):
        curve_tokens = [f"{p['train_tokens']:,}" for p in lc["series"][0]["points"]]
    interp_rows = [{
        "label": r["label"], "lam": fmt_fixed(r["lambda"], 3), "ng": r["components"][0], "nn": r["components"][1],
        "valid": fmt_ppl(r["valid"]), "test": fmt_ppl(r["test"]),
        "ng_valid": _component(results, r["components"][0], "valid"),
        "nn_valid": _component(results, r["components"][1], "valid"),
        "ng_test": _component(results, r["components"][0], "test"),
        "nn_test": _component(results, r["components"][1], "test"),
    } for r in interp]
    timing = results.get("timing") or {}
    sec = results.get("infini")
    infini = None
    if sec:
        total = max(1, sum(sec["effective_n_hist"]))
        infini = {
            "mean_n": fmt_fixed(sec["mean_effective_n"], 2), "max_n": sec["max_effective_n"],
            "zero": fmt_share(sec["zero_share"]), "sparse": fmt_share(sec["sparse_share"]),
            "sparse_correct": "–" if sec["sparse_correct"] is None else fmt_share(sec["sparse_correct"]),
            "bytes": fmt_fixed(sec["index_bytes_per_token"], 1), "tokens": f"{sec['index_tokens']:,}",
            "rows": [{"label": r["label"], "lam_s": fmt_fixed(r["lambdas"]["sparse"], 2),
                      "lam_d": fmt_fixed(r["lambdas"]["dense"], 2), "partner_valid": fmt_ppl(r["partner_valid"]),
                      "partner_test": fmt_ppl(r["partner_test"]), "valid": fmt_ppl(r["valid"]),
                      "test": fmt_ppl(r["test"])} for r in sec["rows"]],
            "by_n": [{"n": sec["buckets"][r["effective_n"] - 1], "label": r["label"], "tokens": f"{r['tokens']:,}",
                      "share": fmt_share(r["tokens"] / total), "partner": fmt_fixed(r["bits_partner"], 2),
                      "mixture": fmt_fixed(r["bits_mixture"], 2),
                      "gain": fmt_fixed(r["bits_partner"] - r["bits_mixture"], 3, sign=True)} for r in sec["by_n"]],
            "accuracy": [{"n": sec["buckets"][r["effective_n"] - 1], "positions": f"{r['positions']:,}",
                          "sampled": f"{r['sampled']:,}", "accuracy": fmt_share(r["accuracy"])}
                         for r in sec.get("accuracy_by_n", [])],
        }
    return {
        "infini": infini,
        "problems": problems, "r": results, "s": s, "corpus": corpus, "truth": truth, "summary": summary, "orders": orders, "grid": grid,
        "vwall": vwall, "curves": curves, "curve_fractions": [f"{100 * f:g}%" for f in lc.get("fractions", [])],
        "curve_tokens": curve_tokens, "interp": interp_rows, "passage": _passage(results.get("passage")),
        "attention": _attention(results.get("attention")),
        "timing": {"total": fmt_seconds(timing.get("total_seconds")), "trained": timing.get("trained", 0),
                   "cached": timing.get("cached", 0)},
        "tokenizer": _tokenizer(results)["kind"], "units": token_units(_tokenizer(results)),
        "neural_none": not s.get("neural") and not s.get("checkpoints"),
        "has_neural": bool(neural),
        "status": results.get("status"),
        "sizes": corpus["sizes"],
    }


def _tokenizer(results: dict) -> dict:
    """The run's tokenizer spec: the corpus's recorded spec, else the ``--tokenizer`` setting."""
    spec = dict((results.get("corpus") or {}).get("tokenizer") or {})
    if not spec.get("kind"):
        spec["kind"] = (results.get("settings") or {}).get("tokenizer") or "whitespace"
    return spec


def _attention(att: Optional[dict]) -> Optional[dict]:
    """The attention view with its first position labelled ``<s>``: the model reads the passage
    after the sentence-start symbol (stored as ``</s>``, the id that also ends sentences)."""
    if not att:
        return att
    return {**att, "tokens": plots.attention_labels(att)}


def _component(results: dict, rid: str, split: str) -> str:
    for family in ("ngram", "neural"):
        for r in results.get(family, []):
            if r["id"] == rid:
                return fmt_ppl(r.get(split))
    return "–"


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


# ---------------------------------------------------------------------------- writing
def _readable(*paths: Path) -> None:
    """Atomic writes create private (0600) files; reports are meant to be shared: apply the umask."""
    import os

    mask = os.umask(0)
    os.umask(mask)
    for p in paths:
        os.chmod(p, 0o666 & ~mask)


def _env(autoescape: bool) -> jinja2.Environment:
    env = jinja2.Environment(autoescape=autoescape, trim_blocks=True, lstrip_blocks=True,
                             undefined=jinja2.StrictUndefined)
    # JSON inside <script>: escape <, > and & so no "</script>" or "<!--" can end or change the block.
    env.filters["tojson_safe"] = lambda obj: markupsafe.Markup(
        json.dumps(obj).replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026"))
    env.filters["fixed"] = fmt_fixed  # {{ x|fixed(2) }}: never "-0.00"
    return env


def render(out: Path, results: dict) -> dict:
    """Write ``plots/*.png``, ``report.md`` and ``report.html`` into ``out``; returns their paths."""
    out = Path(out)
    figures = plots.all_plots(results)
    for name, png in figures.items():
        atomic_write_bytes(out / "plots" / f"{name}.png", png)
    ctx = build_context(results)
    ctx["plots"] = {name: {"title": PLOT_TITLES[name], "file": f"plots/{name}.png",
                           "b64": base64.b64encode(png).decode("ascii")} for name, png in figures.items()}
    md = _env(False).from_string(MD_TEMPLATE).render(**ctx)
    html = _env(True).from_string(HTML_TEMPLATE).render(**ctx)
    atomic_write_text(out / "report.md", md)
    atomic_write_text(out / "report.html", html)
    _readable(out / "report.md", out / "report.html", *(out / "plots" / f"{n}.png" for n in figures))
    return {"md": out / "report.md", "html": out / "report.html", "plots": sorted(figures)}
