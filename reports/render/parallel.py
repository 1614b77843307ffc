"""report.md and report.html of a parallel-corpus comparison (``results.json`` with format
``ngramlm.compare.parallel``): the perplexity table on the target tokens, BLEU, examples, and
the attention heatmaps (the GRU's source attention; the Transformer's cross-attention, encoder and
decoder self-attention) with a softmax-temperature slider.  The templates are package files:
``reports/render/templates/parallel.md.j2`` and ``parallel.html.j2``."""
from __future__ import annotations

import base64
import math
from pathlib import Path

from markupsafe import Markup, escape

from corpora.textio import atomic_write_bytes, atomic_write_text

from ..html_tables import SORT_JS, Cell, Row, Table, Tables

from .report import jinja_env, make_readable, fmt_ppl, fmt_seconds, fmt_setting, fmt_size, time_unit


# Axis labels per kind of attention map: (columns, rows).
AXES = {"cross": ("source token (key)", "reference target token, teacher-forced (query)"),
        "encoder": ("source token (key)", "source token (query)"),
        "decoder": ("target token read (key)", "target token predicted (query)")}


def heatmap_title(att: dict, index: int) -> str:
    """A heatmap's caption; results written before the Transformer translator hold only the GRU's."""
    return f"{att.get('title', 'seq2seq + attention: source attention')}, test pair {att.get('pair', index)}"


def _heatmap_png(att: dict, title: str) -> bytes:
    from ..plots import png_bytes, plt

    w = [[0.0 if v is None else math.exp(v) for v in row] for row in att["log_weights"]]
    fig, ax = plt.subplots(figsize=(0.5 * len(att["source"]) + 2.2, 0.4 * len(att["target"]) + 1.6))
    image = ax.imshow(w, cmap="viridis", vmin=0.0, vmax=1.0)
    fig.colorbar(image, ax=ax, fraction=0.046, pad=0.04, label="attention weight (rows sum to 1)")
    ax.set_xticks(range(len(att["source"])))
    ax.set_yticks(range(len(att["target"])))
    ax.set_xticklabels(att["source"], rotation=60, fontsize=8)
    ax.set_yticklabels(att["target"], fontsize=8)
    xlabel, ylabel = AXES[att.get("kind", "cross")]
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.set_title(title, fontsize=9)
    return png_bytes(fig)


def _row(r: dict, unit: str = None) -> dict:
    test, valid = r.get("test") or {}, r.get("valid") or {}
    return {"label": r["label"], "side": r.get("side", ""), "conditional": bool(r.get("conditional")),
            "order": r.get("order"), "valid": fmt_ppl(valid) if valid else "-", "test": fmt_ppl(test) if test else "-",
            "test_ppl": test.get("ppl"),
            "bpb": "-" if r.get("test_bits_per_byte") is None else f"{r['test_bits_per_byte']:.4f}",
            "v_bpb": r.get("test_bits_per_byte"),
            "ci": "" if not (r.get("test_ci") or {}).get("ppl") else
            f"{r['test_ci']['ppl'][0]:.2f}–{r['test_ci']['ppl'][1]:.2f}",
            "size": f"{fmt_size(r.get('size'))} {r.get('size_unit') or ''}".strip(),
            "seconds": fmt_seconds(r.get("train_seconds"), unit), "v_seconds": r.get("train_seconds"),
            "error": r.get("error"),
            "epochs": r.get("epochs"), "stopped": r.get("stopped")}


def build_context(results: dict) -> dict:
    rows = results["rows"]
    ngram = [r for r in rows if r.get("family") == "ngram"]
    best_ngram = {}
    for r in ngram:  # the best order of each smoother by validation perplexity
        v = (r.get("valid") or {}).get("ppl")
        s = r["settings"]["smoother"] if "smoother" in r.get("settings", {}) else r["label"]
        if v is not None and (s not in best_ngram or v < best_ngram[s][0]):
            best_ngram[s] = (v, r)
    main = [r for _, r in sorted(best_ngram.values(), key=lambda vr: vr[0])]
    main += [r for r in rows if r.get("family") != "ngram"]
    unit = time_unit(r.get("train_seconds") for r in main)  # one unit for the whole column
    main = [_row(r, unit) for r in main]
    baseline = min((r["test_ppl"] for r in main if not r["conditional"] and r["test_ppl"]), default=None)
    for r in main:
        r["vs_best_lm"] = (None if baseline is None or not r["test_ppl"]
                           else f"{100 * (r['test_ppl'] / baseline - 1):+.0f} %")
    bleu = results.get("bleu") or []
    models = sorted({b["model"] for b in bleu})
    grid = []
    # Rows: each decoder (beam size, alpha) alone, then the same decoders with shallow fusion (the weight,
    # tuned per translator on valid, shown in the cell).
    keys = sorted({(bool(b.get("fusion")), b["beam"], b["alpha"]) for b in bleu})
    for fused, k, alpha in keys:
        cells = {b["model"]: b for b in bleu
                 if b["beam"] == k and b["alpha"] == alpha and bool(b.get("fusion")) == fused}
        name = "greedy" if k == 1 else f"beam {k}"
        # greedy search ranks no hypotheses: it has no length penalty α ("-")
        grid.append({"decoder": f"{name} + n-gram" if fused else name, "alpha": "-" if k == 1 else alpha,
                     "fusion": fused,
                     "cells": [(f"{cells[m]['bleu']:.2f}" + (f" (w {cells[m]['lm_weight']:g})" if fused else ""))
                               if m in cells else "-" for m in models],
                     "v": [cells[m]["bleu"] if m in cells else None for m in models],
                     "ci": [f"{cells[m]['ci'][0]:.2f}–{cells[m]['ci'][1]:.2f}" if m in cells and cells[m].get("ci")
                            else "" for m in models]})
    best_note = _mark_best(grid)
    c = results["corpus"]
    return {
        "corpus": c, "status": results.get("status"), "created": results.get("created"),
        "settings": results["settings"], "rows": main, "all_ngram": [_row(r) for r in ngram],
        "bleu_models": models, "model_labels": {r["id"]: r["label"] for r in results["rows"] if r.get("label")},
        "bleu_grid": grid, "best_note": best_note, "signature": bleu[0]["signature"] if bleu else None,
        # a fusion with the best n-gram names no model file: "model" absent, read as none by the templates
        "fusion": {"model": None, **results["fusion"]} if results.get("fusion") else None,
        "examples": results.get("examples") or [],
        "attention": [{**a, "caption": heatmap_title(a, i), "axes": AXES[a.get("kind", "cross")]}
                      for i, a in enumerate(results.get("attention") or [], 1)],
        "attention_kinds": sorted({a.get("kind", "cross") for a in results.get("attention") or []}),
        "timing": results.get("timing") or {}, "target_bytes": results.get("target_test_bytes"),
        "time_unit": unit, "run": _run_facts(results, rows), "settings_shown": _settings_shown(results),
    }


# The settings a reader of this page needs, in the order they read them (the rest are results.json's).
PARALLEL_SETTINGS = ("corpus", "neural_size", "neural", "neural_minutes", "neural_epochs", "seq2seq_minutes",
                     "max_order", "smoothers", "beams", "fusion", "seed", "threads")


def _settings_shown(results: dict) -> dict:
    s = results.get("settings") or {}
    return {k.replace("_", " "): fmt_setting(s[k]) for k in PARALLEL_SETTINGS if s.get(k) is not None}


def _run_facts(results: dict, rows: list) -> dict:
    """The run's time, in one unit: the run that wrote results.json (all of it, cached models included), and
    what the models cost to train when they were trained (a cached row's time is from its own run)."""
    t = results.get("timing") or {}
    trained = sum(r.get("train_seconds") or 0.0 for r in rows)
    unit = time_unit([t.get("total_seconds"), trained])
    s = results.get("settings") or {}
    return {"total": fmt_seconds(t.get("total_seconds"), unit), "trained": t.get("trained", 0),
            "cached": t.get("cached", 0), "training": fmt_seconds(trained, unit), "size": s.get("neural_size", "–")}


def _mark_best(grid: list) -> str:
    """Star the best BLEU only where it is one: the top cell's 95 % interval must lie above every other
    cell's value; else the cells inside it are a tie, said as one and starred none.  Returns the note."""
    from ..significance import best_or_tie

    for g in grid:
        g["best"] = [False] * len(g["v"])
    cells = [((j, i), v, tuple(float(x) for x in g["ci"][i].split("–")) if g["ci"][i] else None)
             for j, g in enumerate(grid) for i, v in enumerate(g["v"])]
    verdict = best_or_tie(cells, higher_is_better=True)
    if verdict.top is None:
        return ""
    top_g, top_i = grid[verdict.top[0]], verdict.top[1]
    top_v, tied = top_g["v"][top_i], verdict.tied
    if not tied:
        top_g["best"][top_i] = True
        return "★ marks the best BLEU: every other cell lies below its 95 % interval."
    return (f"No single best: {len(tied)} other cell{'s' if len(tied) > 1 else ''} lie inside the 95 % interval "
            f"of the highest ({top_v:.2f}, {top_g['decoder']}), a tie at this test size, so none is starred.")


_BPB_TITLE = Markup("the test log-probability over the UTF-8 bytes of the target sentences as read, "
                    "one per sentence end")


def _tables(ctx: dict) -> dict:
    """The page's three tables (HTML and CSV): perplexity on the target tokens, BLEU, the examples."""
    def with_ci(text, ci, **attrs) -> Cell:
        if not ci:
            return Cell(text, **attrs)
        return Cell(f"{text} {ci}", Markup('{}<br><span class="ci">{}</span>').format(text, ci), **attrs)

    ci_head = Markup('<br><span class="ci">95 % CI</span>')
    header = ["model", "reads the source", "valid ppl", Cell("test ppl 95 % CI", "test ppl" + ci_head),
              Cell("test bits/byte", title=_BPB_TITLE), "vs best target LM", "size", f"train time ({ctx['time_unit']})"]
    ppl = Table("ppl-table", header, [Row([
        Cell(r["label"]), Cell("yes" if r["conditional"] else "no"), Cell(r["valid"], cls="num"),
        with_ci(r["test"], r["ci"], value="" if r["test_ppl"] is None else r["test_ppl"], cls="num"),
        Cell(r["bpb"], value="" if r["v_bpb"] is None else r["v_bpb"], cls="num"),
        Cell(r["vs_best_lm"] or "-", cls="num"), Cell(r["size"], cls="num"),
        Cell(r["seconds"], value="" if r["v_seconds"] is None else r["v_seconds"], cls="num")])
        for r in ctx["rows"]], layout="compact")
    models = ctx["bleu_models"]
    label = lambda m: ctx["model_labels"].get(m, m)  # noqa: E731 -- the translators' display labels, not ids
    bleu = Table("bleu-table", ["decoder", "α"] + [Cell(f"{label(m)} 95 % CI", escape(label(m)) + ci_head)
                                                    for m in models], [Row(
        [Cell(g["decoder"]), Cell(g["alpha"], cls="num")] +
        [with_ci(c + (" ★" if g["best"][i] else ""), g["ci"][i], value="" if g["v"][i] is None else g["v"][i],
                 cls="num best" if g["best"][i] else "num") for i, c in enumerate(g["cells"])])
        for g in ctx["bleu_grid"]], layout="compact")

    def translation(e: dict, m: str) -> Cell:
        t = e["translations"].get(m)
        greedy, beam = (t["greedy"], t["beam"]) if t is not None else ("-", "")
        return Cell(f"{greedy} {beam}", Markup("{}<br>{}").format(greedy, beam))

    examples = Table("examples-table", ["source", "reference"] + [f"{label(m)} (greedy / beam)" for m in models], [Row(
        [Cell(e["source"]), Cell(e["reference"])] + [translation(e, m) for m in models]) for e in ctx["examples"]],
        layout="inline")
    settings = Table("settings-table", ["setting", "value"], [Row([Cell(k), Cell(v, Markup("<code>{}</code>").format(v))])
                                                              for k, v in ctx["settings_shown"].items()], layout="compact")
    return {"ppl_table": ppl, "bleu_table": bleu, "examples_table": examples, "settings_table": settings}


def render_parallel(out: Path, results: dict, started=None) -> dict:
    """Write ``plots/attention_*.png``, ``report.md`` and ``report.html``; returns their paths.
    ``started``: the command's start, when it has just computed ``results`` (the total then counts the
    rendering too)."""
    import time

    from .report import count_rendering

    out = Path(out)
    t_render = time.perf_counter()
    pngs = []
    for i, a in enumerate(results.get("attention") or [], start=1):
        png = _heatmap_png(a, heatmap_title(a, i))
        atomic_write_bytes(out / "plots" / f"attention_{i}.png", png)
        pngs.append(png)
    count_rendering(results, started, t_render)
    ctx = build_context(results)
    ctx["heat_b64"] = [base64.b64encode(p).decode("ascii") for p in pngs]
    ctx["table_js"] = SORT_JS
    md = jinja_env(False).get_template("parallel.md.j2").render(**ctx)
    shown = Tables()
    html = jinja_env(True).get_template("parallel.html.j2").render(**ctx, **_tables(ctx), table=shown)
    csvs = shown.write_csvs(out)
    atomic_write_text(out / "report.md", md)
    atomic_write_text(out / "report.html", html)
    plots = [out / "plots" / f"attention_{i}.png" for i in range(1, len(pngs) + 1)]
    make_readable(out / "report.md", out / "report.html", *plots, *csvs)
    return {"md": out / "report.md", "html": out / "report.html", "plots": [p.name for p in plots]}


def summary_table(results: dict) -> str:
    ctx = build_context(results)
    lines = [f"{'model':<36} {'source':>6} {'valid ppl':>10} {'test ppl':>10}"]
    for r in ctx["rows"]:
        lines.append(f"{r['label']:<36} {'yes' if r['conditional'] else 'no':>6} {r['valid']:>10} {r['test']:>10}")
    if ctx["bleu_grid"]:
        lines.append("")
        lines.append(f"{'BLEU':<16} {'alpha':>5} " + " ".join(f"{m:>14}" for m in ctx["bleu_models"]))
        for g in ctx["bleu_grid"]:
            lines.append(f"{g['decoder']:<16} {g['alpha']:>5} " + " ".join(f"{c:>14}" for c in g["cells"]))
        lines.append(f"signature: {ctx['signature']}")
    return "\n".join(lines)
