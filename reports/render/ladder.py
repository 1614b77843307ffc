"""Writing the ladder (:mod:`reports.experiments.ladder`): ``ladder.json``, ``report.md``, a self-contained
``report.html`` (sortable tables, a CSV beside each) and ``plots/ladder.png``.

Every file is written atomically; only relative paths appear in the outputs.
"""
from __future__ import annotations

import base64
import html
import json
import math
from pathlib import Path
from typing import Optional

import numpy as np
from markupsafe import Markup

from corpora.textio import atomic_write_bytes, atomic_write_text

from ..formatting import rung_params, short_rung_label
from ..html_tables import FOLDER, SORT_JS, Cell, Row, Table


def _arch(name: str) -> str:
    from neural.config import ARCHITECTURES

    return ARCHITECTURES[name].label if name in ARCHITECTURES else name


def _fmt_s(s: Optional[float]) -> str:
    if s is None:
        return "–"
    return f"{s / 60:.1f} min" if s >= 120 else f"{s:.1f} s"


def _epochs(e) -> str:
    return "–" if e is None else f"{e:.2f}"


def _ci(ci) -> str:
    return f"{ci[0]:.2f}–{ci[1]:.2f}" if ci else "–"


def figure(results: dict) -> bytes:
    """Test perplexity per rung with its 95 % interval; the published anchors as dotted lines."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from ..plots import FAMILY_COLOURS, png_bytes

    rungs = [r for r in results["rows"] if r["rung"]]
    fig, ax = plt.subplots(figsize=(7.2, 3.8))
    x = np.arange(len(rungs))
    y = [r["test_ppl"] for r in rungs]
    lo = [r["test_ppl"] - (r["test_ppl_ci"] or [r["test_ppl"]] * 2)[0] for r in rungs]
    hi = [(r["test_ppl_ci"] or [r["test_ppl"]] * 2)[1] - r["test_ppl"] for r in rungs]
    colours = [FAMILY_COLOURS.get(r["family"], "#000000") for r in rungs]
    ax.bar(x, y, color=colours, alpha=0.85, width=0.65)
    ax.set_xlim(-0.6, len(rungs) - 0.4)
    ax.errorbar(x, y, yerr=[lo, hi], fmt="none", ecolor="black", capsize=3, linewidth=1)
    for xi, yi, up in zip(x, y, hi):  # the value above its interval's top, clear of the error bar
        ax.annotate(f"{yi:.1f}", (xi, yi + up), textcoords="offset points", xytext=(0, 3), ha="center", fontsize=8)
    refs = results.get("references") or []
    for k, ref in enumerate(refs):
        ax.axhline(ref["ppl"], color="#555555", linestyle=(0, (1, 2 + k)), linewidth=1)
        # Labels right of the bars (the reference lines cross them), spread so that close values stay legible.
        ax.annotate(f"{ref['label']}: {ref['ppl']:g}", (1.01, ref["ppl"]), xycoords=("axes fraction", "data"),
                    ha="left", va="center", fontsize=7, color="#333333")
    low = min([r["test_ppl_ci"][0] if r["test_ppl_ci"] else r["test_ppl"] for r in rungs] + [x["ppl"] for x in refs])
    ax.set_ylim(bottom=max(0.0, 0.85 * low))
    ax.set_xticks(x)
    ax.set_xticklabels([short_rung_label(r["label"]) for r in rungs], rotation=25, ha="right", fontsize=8)
    ax.set_ylabel(f"test perplexity ({results['corpus']})")
    ax.set_title("Each rung adds one idea; bars show the 95 % bootstrap interval", fontsize=9)
    ax.spines[["top", "right"]].set_visible(False)
    return png_bytes(fig)


def markdown(results: dict) -> str:
    r = results
    lines = [f"# The ladder: {_arch(r['architecture'])} on {r['corpus']}", "",
             f"Every rung scores the same {r['tokens']['test']:,} test tokens ({r['n_types']:,} types, sentence ends "
             f"included) with the same vocabulary; every parameter is tuned on the {r['tokens']['valid']:,} valid "
             "tokens. Intervals: 95 % bootstrap by test sentence (the same draws for every rung).", ""]
    tr = r.get("training") or {}
    if tr.get("seconds"):
        lines += [f"Neural model: {tr['seconds'] / 60:.1f} min of training, {tr.get('epochs')} epochs "
                  f"(`{Path(r['checkpoint'] or '').name}`). Adaptation and scoring of all rungs: "
                  f"{r['adaptation_seconds'] / 60:.1f} min.", ""]
    lines += ["| rung | test ppl | 95 % CI | valid ppl | bits/token | extra time | parameters |",
              "|---|---:|---:|---:|---:|---:|---|"]
    for row in r["rows"]:
        if not row["rung"]:
            continue
        lines.append(f"| {row['label']} | {row['test_ppl']:.2f} | {_ci(row['test_ppl_ci'])} | {row['valid_ppl']:.2f} | "
                     f"{row['test_bits_per_token']:.4f} | {_fmt_s(row['extra_seconds'])} | {rung_params(row['params'])} |")
    side = [row for row in r["rows"] if not row["rung"]]
    if side:
        lines += ["", "Each method on its own (not rungs):", "", "| method | test ppl | 95 % CI | valid ppl |",
                  "|---|---:|---:|---:|"]
        lines += [f"| {row['label']} | {row['test_ppl']:.2f} | {_ci(row['test_ppl_ci'])} | {row['valid_ppl']:.2f} |"
                  for row in side]
    if r.get("references"):
        lines += ["", "Published PTB test perplexities: " + "; ".join(f"{a['label']} {a['ppl']}" for a in r["references"])]
    lines += ["", "![test perplexity per rung](plots/ladder.png)", "", "## Where each step gains", ""]
    for st in r["steps"]:
        lines += [f"### {_label(r, st['from'])} → {_label(r, st['to'])}: {st['mean_bits_gained']:+.4f} bits per token", "",
                  "| kind of token | share of tokens | bits gained per token | share of the gain |", "|---|---:|---:|---:|"]
        for k in st["by_kind"]:
            if not k["tokens"]:
                continue
            lines.append(f"| {k['kind']} | {100 * k['share']:.1f} % | {k['bits_gained_per_token']:+.3f} | "
                         f"{_pct(k['share_of_total_gain'])} |")
        lines += ["", "Largest gains:", "", "| context | token | bits before | bits after |", "|---|---|---:|---:|"]
        lines += [f"| … {t['context']} | **{t['token']}** | {t['bits_before']:.2f} | {t['bits_after']:.2f} |"
                  for t in st["top_tokens"]]
        lines.append("")
    return "\n".join(lines) + "\n"


def _pct(x) -> str:
    return "–" if x is None or not math.isfinite(x) else f"{100 * x:.0f} %"


def _label(results: dict, rid: str) -> str:
    return next(row["label"] for row in results["rows"] if row["id"] == rid)


_STYLE = ("body{font-family:sans-serif;max-width:64em;margin:2em auto;padding:0 1em;color:#222}"
          "table{border-collapse:collapse;margin:.5em 0}td,th{border:1px solid #ccc;padding:.2em .6em}"
          "td.n{text-align:right;font-variant-numeric:tabular-nums}th{background:#f4f4f4;cursor:pointer}"
          "img{max-width:100%}.chip{display:inline-block;width:.8em;height:.8em;margin-right:.4em;border-radius:2px}"
          "p.csv{font-size:.8em;margin:0}code{background:#f4f4f4}")


def html_page(results: dict, png: bytes) -> tuple:
    """The page's HTML and its tables (each written to a CSV file beside it)."""
    from ..plots import FAMILY_COLOURS

    e = html.escape
    tables = []

    def table(t: Table) -> str:
        tables.append(t)
        return str(t.html())

    def n(text, markup=None, **attrs) -> Cell:  # a number's cell
        return Cell(text, markup, cls="n", **attrs)

    r = results
    out = ["<!doctype html>", '<html lang="en"><head><meta charset="utf-8">',
           f"<title>Ladder: {e(_arch(r['architecture']))} on {e(r['corpus'])}</title><style>{_STYLE}</style></head><body>",
           f"<h1>The ladder: {e(_arch(r['architecture']))} on {e(r['corpus'])}</h1>"]
    md = markdown(r).split("\n")
    out.append(f"<p>{e(md[2])}</p>")
    if (r.get("training") or {}).get("seconds"):
        out.append(f"<p>{e(md[4])}</p>")
    best = min(row["test_ppl"] for row in r["rows"])
    rungs = []
    for row in r["rows"]:
        if not row["rung"]:
            continue
        chip = f'<span class="chip" style="background:{FAMILY_COLOURS.get(row["family"], "#000")}"></span>'
        test = f"{row['test_ppl']:.2f}"
        rungs.append(Row([
            Cell(row["label"], Markup(chip + e(row["label"]))),
            n(f"{test} ★", Markup(f"<b>{test} ★</b>"), value=f"{row['test_ppl']:.4f}") if row["test_ppl"] == best
            else n(test, value=f"{row['test_ppl']:.4f}"),
            n(_ci(row["test_ppl_ci"])), n(f"{row['valid_ppl']:.2f}"), n(f"{row['test_bits_per_token']:.4f}"),
            n(_fmt_s(row["extra_seconds"]), value=row["extra_seconds"]), _text(rung_params(row["params"]))]))
    header = ["rung", "test ppl", "95 % CI", "valid ppl", "bits/token", "extra time", "parameters"]
    out.append(table(Table("ladder", header, rungs, layout="compact", bare_class=True)))
    side = [row for row in r["rows"] if not row["rung"]]
    if side:
        out.append("<p>Each method on its own (not rungs):</p>" + table(Table(
            "methods", ["method", "test ppl", "95 % CI", "valid ppl", "parameters"], [Row([
                _text(row["label"]), n(f"{row['test_ppl']:.2f}"), n(_ci(row["test_ppl_ci"])),
                n(f"{row['valid_ppl']:.2f}"), _text(rung_params(row["params"]))]) for row in side],
            layout="compact", bare_class=True)))
    if r.get("references"):
        out.append("<p>Published PTB test perplexities: " + "; ".join(
            f"{e(a['label'])} {a['ppl']}" for a in r["references"]) + "</p>")
    b64 = base64.b64encode(png).decode("ascii")
    out.append(f'<img alt="test perplexity per rung" src="data:image/png;base64,{b64}">')
    out.append("<h2>Where each step gains</h2>")
    for i, st in enumerate(r["steps"]):
        out.append(f"<h3>{e(_label(r, st['from']))} → {e(_label(r, st['to']))}: "
                   f"{st['mean_bits_gained']:+.4f} bits per token</h3>")
        out.append(table(Table(f"kinds-{i + 1}", ["kind of token", "share of tokens", "bits gained per token",
                                                   "share of the gain"], [Row([
            _text(k["kind"]), n(f"{100 * k['share']:.1f} %"), n(f"{k['bits_gained_per_token']:+.3f}"),
            n(_pct(k["share_of_total_gain"]))]) for k in st["by_kind"] if k["tokens"]],
            layout="compact", bare_class=True)))
        out.append(table(Table(f"tokens-{i + 1}", ["context", "token", "bits before", "bits after"], [Row([
            _text(f"… {t['context']}"), Cell(t["token"], Markup(f"<b>{e(t['token'])}</b>")),
            n(f"{t['bits_before']:.2f}"), n(f"{t['bits_after']:.2f}")]) for t in st["top_tokens"]],
            layout="compact", bare_class=True)))
    out.append(f"<script>{SORT_JS}</script></body></html>")
    return "\n".join(out) + "\n", tables


def _text(text: str) -> Cell:
    """A cell of plain text escaped as the rest of this page is (html.escape: ' as &#x27;)."""
    return Cell(text, Markup(html.escape(text)))


def write_ladder(results: dict, out_dir) -> Path:
    """Write the four outputs under ``out_dir``; return the HTML's path."""
    out = Path(out_dir)
    (out / "plots").mkdir(parents=True, exist_ok=True)
    png = figure(results)
    atomic_write_bytes(out / "plots" / "ladder.png", png)
    data = {k: v for k, v in results.items() if k != "per_token_log2"}
    # No absolute paths in shared outputs: a checkpoint or a corpus file is named by its file name.
    data["checkpoint"] = Path(data["checkpoint"]).name if data.get("checkpoint") else None
    if "/" in data["corpus"] or "\\" in data["corpus"]:
        data["corpus"] = Path(data["corpus"]).name
    atomic_write_text(out / "ladder.json", json.dumps(data, indent=2, ensure_ascii=False) + "\n")
    atomic_write_text(out / "report.md", markdown(data))
    page, tables = html_page(data, png)
    for t in {t.id: t for t in tables}.values():
        atomic_write_text(out / FOLDER / f"{t.id}.csv", t.csv())
    atomic_write_text(out / "report.html", page)
    return out / "report.html"
