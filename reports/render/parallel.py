"""report.md and report.html of a parallel-corpus comparison (``results.json`` with format
``ngramlm.compare.parallel``): the perplexity table on the target tokens, BLEU, examples, and
the attention heatmaps (the GRU's source attention; the Transformer's cross-attention, encoder and
decoder self-attention) with a softmax-temperature slider."""
from __future__ import annotations

import base64
import math
from pathlib import Path

from corpora.textio import atomic_write_bytes, atomic_write_text

from .report import _env, _readable, fmt_ppl, fmt_seconds, fmt_size


# Axis labels per kind of attention map: (columns, rows).
AXES = {"cross": ("source token (key)", "reference target token, teacher-forced (query)"),
        "encoder": ("source token (key)", "source token (query)"),
        "decoder": ("target token read (key)", "target token predicted (query)")}


def heatmap_title(att: dict, index: int) -> str:
    """A heatmap's caption; results written before the Transformer translator hold only the GRU's."""
    return f"{att.get('title', 'seq2seq + attention: source attention')}, test pair {att.get('pair', index)}"


def _heatmap_png(att: dict, title: str) -> bytes:
    from ..plots import _png, plt

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
    return _png(fig)


def _row(r: dict) -> dict:
    test, valid = r.get("test") or {}, r.get("valid") or {}
    return {"label": r["label"], "side": r.get("side", ""), "conditional": bool(r.get("conditional")),
            "order": r.get("order"), "valid": fmt_ppl(valid) if valid else "-", "test": fmt_ppl(test) if test else "-",
            "test_ppl": test.get("ppl"),
            "bpb": "-" if r.get("test_bits_per_byte") is None else f"{r['test_bits_per_byte']:.4f}",
            "v_bpb": r.get("test_bits_per_byte"),
            "ci": "" if not (r.get("test_ci") or {}).get("ppl") else
            f"{r['test_ci']['ppl'][0]:.2f}–{r['test_ci']['ppl'][1]:.2f}",
            "size": f"{fmt_size(r.get('size'))} {r.get('size_unit') or ''}".strip(),
            "seconds": fmt_seconds(r.get("train_seconds")), "error": r.get("error"),
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
    main = [_row(r) for r in main]
    baseline = min((r["test_ppl"] for r in main if not r["conditional"] and r["test_ppl"]), default=None)
    for r in main:
        r["vs_best_lm"] = (None if baseline is None or not r["test_ppl"]
                           else f"{100 * (r['test_ppl'] / baseline - 1):+.0f} %")
    bleu = results.get("bleu") or []
    models = sorted({b["model"] for b in bleu})
    beams = sorted({b["beam"] for b in bleu})
    grid = []
    for k in beams:
        for alpha in sorted({b["alpha"] for b in bleu if b["beam"] == k}):
            cells = {b["model"]: b for b in bleu if b["beam"] == k and b["alpha"] == alpha}
            grid.append({"decoder": "greedy" if k == 1 else f"beam {k}", "alpha": alpha,
                         "cells": [f"{cells[m]['bleu']:.2f}" if m in cells else "-" for m in models],
                         "v": [cells[m]["bleu"] if m in cells else None for m in models],
                         "ci": [f"{cells[m]['ci'][0]:.2f}–{cells[m]['ci'][1]:.2f}" if m in cells and cells[m].get("ci")
                                else "" for m in models]})
    top = max((v for g in grid for v in g["v"] if v is not None), default=None)
    for g in grid:
        g["best"] = [v is not None and v == top for v in g["v"]]
    c = results["corpus"]
    return {
        "corpus": c, "status": results.get("status"), "created": results.get("created"),
        "settings": results["settings"], "rows": main, "all_ngram": [_row(r) for r in ngram],
        "bleu_models": models, "bleu_grid": grid, "signature": bleu[0]["signature"] if bleu else None,
        "examples": results.get("examples") or [],
        "attention": [{**a, "caption": heatmap_title(a, i)} for i, a in enumerate(results.get("attention") or [], 1)],
        "timing": results.get("timing") or {}, "target_bytes": results.get("target_test_bytes"),
    }


MD_TEMPLATE = """\
# Comparison on {{ corpus.name }} ({{ corpus.src_lang }} → {{ corpus.tgt_lang }})

{{ corpus.sizes.train.pairs }} training / {{ corpus.sizes.valid.pairs }} validation / {{ corpus.sizes.test.pairs }} test pairs (seeded shuffle, seed {{ corpus.split_seed }}); source {{ corpus.src_types }} types, target {{ corpus.tgt_types }} types (vocabularies fitted on the training pairs; `<unk>` counts as a type). Status: {{ status }}, created {{ created }}.

## Perplexity of the target sentences

Every model predicts the same {{ corpus.sizes.test.tgt_tokens + corpus.sizes.test.pairs }} test tokens: each target word and each `</s>`, over the same target vocabulary. Language models (n-grams, neural) see only the target side; the translators also read the source, so theirs is the *conditional* perplexity P(target | source). N-gram rows show the best order per smoother (by validation perplexity).

| model | reads the source | valid ppl | test ppl | test ppl 95 % CI | test bits/byte | vs best target LM | size | train time |
|---|---|---:|---:|---:|---:|---:|---:|---:|
{% for r in rows %}
| {{ r.label }} | {{ "yes" if r.conditional else "no" }} | {{ r.valid }} | {{ r.test }} | {{ r.ci or "-" }} | {{ r.bpb }} | {{ r.vs_best_lm or "-" }} | {{ r.size }} | {{ r.seconds }} |
{% endfor %}

Bits per byte divide the test log-probability by the UTF-8 bytes of the target ({{ corpus.tgt_lang }}) test sentences as read{% if target_bytes %} ({{ "{:,}".format(target_bytes) }} bytes, one per sentence end){% endif %}, so they compare with any tokenization of the same text.

The 95 % intervals are a bootstrap over the test pairs (1,000 resamples, the same for every model), as are BLEU's below (Koehn 2004).

## BLEU on the test pairs

Corpus BLEU (sacrebleu) of the translations against the one reference per pair, over the toolkit's tokens (lower-cased, punctuation split). Beam rows with α > 0 rank complete hypotheses by log P / T^α.{% if signature %} Signature: `{{ signature }}`.{% endif %}


| decoder | α |{% for m in bleu_models %} {{ m }} |{% endfor %}

|---|---:|{% for m in bleu_models %}---:|{% endfor %}

{% for g in bleu_grid %}
| {{ g.decoder }} | {{ g.alpha }} |{% for c in g.cells %} {% if g.best[loop.index0] %}**{{ c }}**{% else %}{{ c }}{% endif %}{% if g.ci[loop.index0] %} ({{ g.ci[loop.index0] }}){% endif %} |{% endfor %}

{% endfor %}

## Examples (test pairs)

{% for e in examples %}
- **{{ e.source }}** → reference: {{ e.reference }}
{% for m, t in e.translations.items() %}
  - {{ m }}: greedy «{{ t.greedy }}», beam «{{ t.beam }}»
{% endfor %}
{% endfor %}

{% if attention %}
## Attention

Source (cross-) attention: rows are the reference target tokens, teacher-forced (the query: what the decoder reads while predicting the next token); columns: the source tokens (the keys). The Transformer's encoder self-attention has source tokens on both axes; its decoder self-attention has the predicted target tokens as rows and the target tokens read (`<s>` first) as columns, zero above the diagonal (the causal mask). Colour: the attention weight, 0 to 1, each row summing to 1. report.html has the interactive view with a softmax-temperature slider.

{% for a in attention %}
![attention {{ loop.index }}: {{ a.caption }}](plots/attention_{{ loop.index }}.png)
{% endfor %}
{% endif %}
"""

HTML_TEMPLATE = """\
<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8">
<title>{{ corpus.name }}: target perplexity and translation</title>
<style>
body { font-family: system-ui, sans-serif; max-width: 70em; margin: 2em auto; padding: 0 1em; color: #222; }
table { border-collapse: collapse; margin: 1em 0; } td, th { border: 1px solid #ccc; padding: 0.25em 0.6em; }
td.num { text-align: right; font-variant-numeric: tabular-nums; } .note { color: #555; font-size: 0.92em; }
.heat text { font-size: 11px; } .heat rect.cell { stroke: #fff; stroke-width: 0.5; }
.ci { color: #666; font-size: 0.85em; } td.best { font-weight: bold; } th { cursor: pointer; } .csv { font-size: 0.75em; margin-top: -0.6em; }
</style></head><body>
<h1>{{ corpus.name }} ({{ corpus.src_lang }} → {{ corpus.tgt_lang }})</h1>
<p class="note">{{ corpus.sizes.train.pairs }} / {{ corpus.sizes.valid.pairs }} / {{ corpus.sizes.test.pairs }} train / valid / test pairs; target vocabulary {{ corpus.tgt_types }} types. Every model predicts the same test tokens (target words and <code>&lt;/s&gt;</code>).</p>
<h2>Perplexity of the target sentences</h2>
<table id="ppl-table"><thead><tr><th>model</th><th>reads the source</th><th>valid ppl</th><th>test ppl<br><span class="ci">95 % CI</span></th><th title="the test log-probability over the UTF-8 bytes of the target sentences as read, one per sentence end">test bits/byte</th><th>vs best target LM</th><th>size</th><th>train time</th></tr></thead><tbody>
{% for r in rows %}<tr><td>{{ r.label }}</td><td>{{ "yes" if r.conditional else "no" }}</td><td class="num">{{ r.valid }}</td><td class="num" data-v="{{ r.test_ppl if r.test_ppl is not none else "" }}">{{ r.test }}{% if r.ci %}<br><span class="ci">{{ r.ci }}</span>{% endif %}</td><td class="num" data-v="{{ r.v_bpb if r.v_bpb is not none else "" }}">{{ r.bpb }}</td><td class="num">{{ r.vs_best_lm or "-" }}</td><td class="num">{{ r.size }}</td><td class="num">{{ r.seconds }}</td></tr>
{% endfor %}</tbody></table>
<p class="note">The 95 % intervals are a bootstrap over the test pairs (1,000 resamples, the same for every model), as are BLEU's (Koehn 2004). Click a column's header to sort.</p>
<h2>BLEU on the test pairs</h2>
<p class="note">sacrebleu corpus BLEU over the toolkit's tokens{% if signature %}; signature <code>{{ signature }}</code>{% endif %}.</p>
<table id="bleu-table"><thead><tr><th>decoder</th><th>α</th>{% for m in bleu_models %}<th>{{ m }}<br><span class="ci">95 % CI</span></th>{% endfor %}</tr></thead><tbody>
{% for g in bleu_grid %}<tr><td>{{ g.decoder }}</td><td class="num">{{ g.alpha }}</td>{% for c in g.cells %}<td class="num{% if g.best[loop.index0] %} best{% endif %}" data-v="{{ g.v[loop.index0] if g.v[loop.index0] is not none else "" }}">{{ c }}{% if g.best[loop.index0] %} ★{% endif %}{% if g.ci[loop.index0] %}<br><span class="ci">{{ g.ci[loop.index0] }}</span>{% endif %}</td>{% endfor %}</tr>
{% endfor %}</tbody></table>
{% if attention %}
<h2>Attention</h2>
<p class="note">Source (cross-) attention: rows are the reference target tokens, teacher-forced (the query); columns: the source tokens (the keys). The Transformer's encoder self-attention has source tokens on both axes; its decoder self-attention has the predicted target tokens as rows and the tokens read (<code>&lt;s&gt;</code> first) as columns. Colour: the attention weight from 0 (white) to 1 (blue), each row summing to 1. The slider divides the attention scores by a temperature before the softmax (re-normalised from the stored log-weights): below 1 sharpens, above 1 flattens.</p>
<label>softmax temperature <input type="range" id="s2s-temp" min="-2" max="2" step="0.05" value="0"> <span id="s2s-temp-val">1.00</span></label>
<p class="note">colour: attention weight <span style="display:inline-block;width:8em;height:0.8em;border:1px solid #ccc;vertical-align:middle;background:linear-gradient(to right,#fff,#00f)"></span> 0 → 1 &nbsp; rows: queries &nbsp; columns: keys</p>
<div id="s2s-heatmaps"></div>
<p class="note" id="s2s-selftest" data-result="not run" hidden>self-test: needs JavaScript</p>
<script>
(function () {
  var ATT = {{ attention|tojson_safe }};
  var ns = "http://www.w3.org/2000/svg";
  function weights(a, T) {
    return a.log_weights.map(function (row) {
      var z = row.map(function (v) { return v === null ? -Infinity : v / T; });
      var m = Math.max.apply(null, z), e = z.map(function (v) { return Math.exp(v - m); });
      var s = e.reduce(function (x, y) { return x + y; }, 0);
      return e.map(function (v) { return v / s; });
    });
  }
  function draw(T) {
    var root = document.getElementById("s2s-heatmaps");
    root.innerHTML = "";
    ATT.forEach(function (a) {
      var w = weights(a, T), cell = 26, left = 90, top = 80;
      var caption = document.createElement("p");
      caption.className = "note"; caption.textContent = a.caption; root.appendChild(caption);
      var svg = document.createElementNS(ns, "svg");
      svg.setAttribute("class", "heat");
      svg.setAttribute("width", left + cell * a.source.length + 10);
      svg.setAttribute("height", top + cell * a.target.length + 10);
      a.source.forEach(function (t, j) {
        var tx = document.createElementNS(ns, "text");
        tx.setAttribute("transform", "translate(" + (left + j * cell + cell / 2) + "," + (top - 6) + ") rotate(-60)");
        tx.textContent = t; svg.appendChild(tx);
      });
      a.target.forEach(function (t, i) {
        var tx = document.createElementNS(ns, "text");
        tx.setAttribute("x", left - 6); tx.setAttribute("y", top + i * cell + cell * 0.65);
        tx.setAttribute("text-anchor", "end"); tx.textContent = t; svg.appendChild(tx);
        w[i].forEach(function (v, j) {
          var r = document.createElementNS(ns, "rect");
          r.setAttribute("class", "cell"); r.setAttribute("x", left + j * cell); r.setAttribute("y", top + i * cell);
          r.setAttribute("width", cell); r.setAttribute("height", cell);
          var g = Math.round(255 * (1 - v));
          r.setAttribute("fill", "rgb(" + g + "," + g + ",255)");
          var title = document.createElementNS(ns, "title");
          title.textContent = t + " ← " + a.source[j] + ": " + v.toFixed(3);
          r.appendChild(title); svg.appendChild(r);
        });
      });
      root.appendChild(svg);
    });
  }
  var slider = document.getElementById("s2s-temp");
  slider.addEventListener("input", function () {
    var T = Math.pow(2, +slider.value);
    document.getElementById("s2s-temp-val").textContent = T.toFixed(2);
    draw(T);
  });
  draw(1.0);
  // Self-test (read by the tests in a headless browser): a lower temperature gives sharper rows.
  function entropy(T) {
    var h = 0, n = 0;
    ATT.forEach(function (a) { weights(a, T).forEach(function (row) {
      row.forEach(function (v) { if (v > 0) { h -= v * Math.log(v); } }); n += 1; }); });
    return h / Math.max(1, n);
  }
  var e05 = entropy(0.5), e1 = entropy(1), e2 = entropy(2);
  var cells = document.querySelectorAll("#s2s-heatmaps rect.cell").length;
  var test = document.getElementById("s2s-selftest");
  test.setAttribute("data-result", e05 <= e1 + 1e-9 && e1 <= e2 + 1e-9 && e2 - e05 > 1e-6 && cells > 0 ? "pass" : "fail");
  test.textContent = "self-test: " + cells + " cells; mean row entropy at T=0.5, 1, 2: " +
    [e05, e1, e2].map(function (x) { return x.toFixed(3); }).join(", ");
})();
</script>
{% for a in attention %}<noscript><img alt="attention {{ loop.index }}" src="data:image/png;base64,{{ heat_b64[loop.index0] }}"></noscript>
{% endfor %}
{% endif %}
<h2>Examples</h2>
<table id="examples-table"><tr><th>source</th><th>reference</th>{% for m in bleu_models %}<th>{{ m }} (greedy / beam)</th>{% endfor %}</tr>
{% for e in examples %}<tr><td>{{ e.source }}</td><td>{{ e.reference }}</td>{% for m in bleu_models %}<td>{{ e.translations[m].greedy if m in e.translations else "-" }}<br>{{ e.translations[m].beam if m in e.translations else "" }}</td>{% endfor %}</tr>
{% endfor %}</table>
<script>{{ table_js }}</script>
</body></html>
"""


def render_parallel(out: Path, results: dict) -> dict:
    """Write ``plots/attention_*.png``, ``report.md`` and ``report.html``; returns their paths."""
    out = Path(out)
    ctx = build_context(results)
    pngs = []
    for i, a in enumerate(ctx["attention"], start=1):
        png = _heatmap_png(a, a["caption"])
        atomic_write_bytes(out / "plots" / f"attention_{i}.png", png)
        pngs.append(png)
    ctx["heat_b64"] = [base64.b64encode(p).decode("ascii") for p in pngs]
    from .. import html_tables as tables

    ctx["table_js"] = tables.SORT_JS
    md = _env(False).from_string(MD_TEMPLATE).render(**ctx)
    html = _env(True).from_string(HTML_TEMPLATE).render(**ctx)
    html, csvs = tables.add_csv_links(html, out)
    atomic_write_text(out / "report.md", md)
    atomic_write_text(out / "report.html", html)
    plots = [out / "plots" / f"attention_{i}.png" for i in range(1, len(pngs) + 1)]
    _readable(out / "report.md", out / "report.html", *plots, *csvs)
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
