"""``report.md`` and ``report.html`` from ``results.json`` (nothing else is read).

The HTML report is one self-contained file: figures are embedded as base64 PNG, the
attention data as inline JSON, the script and styles inline; it needs no network.
The Markdown report links the same figures, written to ``DIR/plots/*.png``.
"""
from __future__ import annotations

import base64
import json
from pathlib import Path
from typing import Optional

import jinja2
import markupsafe

from corpora.textio import atomic_write_bytes, atomic_write_text

from . import plots, sections
from .templates import assemble


# The number formatting the templates and tests use (reports.formatting), under its old names here.
from .formatting import (TOKEN_UNITS, describe_budget, fmt_budget, fmt_budget_spec, fmt_fixed, fmt_num,  # noqa: E402,F401
                         fmt_power, fmt_ppl, fmt_seconds, fmt_share, fmt_size, token_units)


# ---------------------------------------------------------------------------- formatting
def undertrained(results: dict) -> dict:
    """Neural row id -> why its numbers are not a result: it stopped before one epoch, or it is worse on
    valid than the unigram model (a model that learned less than word frequencies).  Shown in the table
    and a banner, and the HTML self-test fails on it."""
    unigram = [r["valid"]["ppl"] for r in results.get("ngram", []) if r.get("order") == 1 and r.get("valid")
               and r["valid"].get("ppl") is not None and r.get("is_distribution")]
    best_unigram = min(unigram) if unigram else None
    out = {}
    for r in results.get("neural", []):
        valid = (r.get("valid") or {}).get("ppl")
        if r.get("stopped") != "adopted" and r.get("epochs") is not None and r["epochs"] < 1:
            out[r["id"]] = f"stopped after {fmt_fixed(r['epochs'], 2)} epochs, before it read the training text once"
        elif valid is not None and best_unigram is not None and valid > best_unigram:
            out[r["id"]] = (f"worse than the unigram model on valid ({fmt_fixed(valid, 2)} against "
                            f"{fmt_fixed(best_unigram, 2)}): it has not learned word frequencies yet")
    return out


def _row(r: dict, warning: Optional[str] = None) -> dict:
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
        "bpb": fmt_num(norm.get("bits_per_byte")),
        "bpw": fmt_num(norm.get("bits_per_word")),
        "floor": "–" if not floor else (f"{fmt_fixed(floor['extra_bits_per_token'], 3, sign=True)} bits "
                                        f"(×{fmt_fixed(floor['ppl_ratio'], 2)})"),
        "size": fmt_size(r.get("size")), "size_unit": r.get("size_unit", ""),
        "train": fmt_seconds(r.get("train_seconds")), "cached": ("scored" if r.get("stopped") == "adopted" else
                   {True: "cached", False: "trained"}.get(r.get("cached"), "")),
        "note": "; ".join(x for x in (warning and f"⚠ undertrained: {warning}",
                                      r.get("error") and f"not estimated: {r['error']}", r.get("note")) if x),
        "undertrained": bool(warning),
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
    """The template variables: the head's (the results table, units, settings), then each section's."""
    from corpora.textio import shown_path

    from .sections.orders import infini_rows

    s = dict(results["settings"])
    if s.get("checkpoints"):  # as the reader's folders, not this machine's
        s["checkpoints"] = [shown_path(c) for c in s["checkpoints"]]
    corpus = results["corpus"]
    truth = (corpus.get("truth") or {}).get("test")
    ngram = results.get("ngram", [])
    neural = results.get("neural", [])
    interp = results.get("interpolation", [])
    flagged = undertrained(results)
    summary = [_row(r) for r in _best_per_smoother(ngram)] + [_row(r, flagged.get(r["id"])) for r in neural] \
        + [_row(r) for r in interp] + [_row(r) for r in infini_rows(results)]
    problems = [{"id": r["id"], "error": r["error"]} for r in ngram + neural if r.get("error")]
    timing = results.get("timing") or {}
    return {
        "problems": problems, "undertrained": [{"label": r["label"], "why": flagged[r["id"]]} for r in neural
                                               if r["id"] in flagged], "r": results, "s": s, "corpus": corpus, "truth": truth, "summary": summary,
        "timing": {"total": fmt_seconds(timing.get("total_seconds")), "trained": timing.get("trained", 0),
                   "cached": timing.get("cached", 0)},
        "tokenizer": _tokenizer(results)["kind"], "units": token_units(_tokenizer(results)),
        "neural_none": not s.get("neural") and not s.get("checkpoints"),
        "has_neural": bool(neural),
        "status": results.get("status"),
        # A results.json of an earlier version has no byte counts: its bits/byte read "–", B is not shown.
        "sizes": {split: {"bytes": None, **v} for split, v in corpus["sizes"].items()},
        **sections.context(results),
    }


def _tokenizer(results: dict) -> dict:
    """The run's tokenizer spec: the corpus's recorded spec, else the ``--tokenizer`` setting."""
    spec = dict((results.get("corpus") or {}).get("tokenizer") or {})
    if not spec.get("kind"):
        spec["kind"] = (results.get("settings") or {}).get("tokenizer") or "whitespace"
    return spec


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
    figures = plots.all_plots(results, sections.plot_functions())
    for name, png in figures.items():
        atomic_write_bytes(out / "plots" / f"{name}.png", png)
    ctx = build_context(results)
    titles = sections.plot_titles()
    ctx["plots"] = {name: {"title": titles[name], "file": f"plots/{name}.png",
                           "b64": base64.b64encode(png).decode("ascii")} for name, png in figures.items()}
    md_template, html_template = assemble(sections.SECTIONS)  # the sections registered now, in order
    md = _env(False).from_string(md_template).render(**ctx)
    html = _env(True).from_string(html_template).render(**ctx)
    atomic_write_text(out / "report.md", md)
    atomic_write_text(out / "report.html", html)
    _readable(out / "report.md", out / "report.html", *(out / "plots" / f"{n}.png" for n in figures))
    return {"md": out / "report.md", "html": out / "report.html", "plots": sorted(figures)}
