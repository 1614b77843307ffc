"""Jinja2 templates of the comparison report (kept as strings: nothing to ship as package data).

The report is its head (title, the results table), the numbered sections of
:mod:`reports.sections` in their order, and its tail (units, settings, the HTML's script).
Both templates receive the context of :func:`reports.render.report.build_context`.
"""
from ..sections import SECTIONS

MD_HEAD = r"""{% macro b(m, col) %}{% if col in m.best %}**{{ m[col] }}**{% else %}{{ m[col] }}{% endif %}{% endmacro %}
# Count vs neural language models on `{{ corpus.name }}`

{{ "{:,}".format(sizes.train.tokens) }} training tokens, {{ "{:,}".format(sizes.valid.tokens) }} validation and {{ "{:,}".format(sizes.test.tokens) }} test tokens ({{ units.tokens }}), one vocabulary of {{ "{:,}".format(corpus.n_types) }} predicted types and one tokenization (`{{ tokenizer }}`) for every model.
Run: {{ r.created }}, status **{{ status }}**, {{ timing.total }} in all ({{ timing.trained }} models trained, {{ timing.cached }} from the cache).
{% if truth %}

The toy corpus comes from a known probabilistic automaton: the **true perplexity of the test text is {{ truth.perplexity|fixed(2) }}** ({{ truth.bits_per_token|fixed(4) }} bits per token), a floor no model beats on average. "Above the floor" is the model's test bits per token minus the truth's (and the ratio of perplexities).
{% endif %}

## Summary

{% for b in top.best %}
- Best {{ b.family }} model (on valid): **{{ b.label }}**, test perplexity {{ b.test }}{% if b.ci != "–" %} (95 % CI {{ b.ci }}){% endif %}, {{ b.bpb }} bits per byte.
{% endfor %}
{% if top.headline %}
- {{ top.headline }}
{% endif %}
{% if top.vn %}
- {{ top.vn }}
{% endif %}

## Results

Families: {% for f in families %}{{ f.name }}{% if not loop.last %}, {% endif %}{% endfor %}. The best value of each column is **bold**; the 95 % interval is a bootstrap over the test sentences (1,000 resamples, the same for every model).

| model | family | valid ppl | test ppl | test ppl 95 % CI | test bits/token |{% if has_floor %} above the floor |{% endif %} bits/byte{% if not has_bpc %} (= bits/char){% endif %} |{% if has_bpc %} bits/char |{% endif %}{% if has_bpw %} bits/word |{% endif %} size | training ({{ time_unit }}) | budget / actual | notes |
|---|---|---:|---:|---:|---:|{% if has_floor %}---:|{% endif %}---:|{% if has_bpc %}---:|{% endif %}{% if has_bpw %}---:|{% endif %}---:|---:|---:|---|
{% for m in summary %}
| {{ m.label }} | {{ m.family_name }} | {{ b(m, "valid") }} | {{ b(m, "test") }} | {{ m.ci }} | {{ b(m, "bpt") }} |{% if has_floor %} {{ m.floor }} |{% endif %} {{ b(m, "bpb") }} |{% if has_bpc %} {{ b(m, "bpc") }} |{% endif %}{% if has_bpw %} {{ b(m, "bpw") }} |{% endif %} {{ m.size }} {{ m.size_unit }} | {{ m.train }} | {{ m.budget }} | {% for n in m.refs %}[{{ n }}]{% endfor %} |
{% endfor %}
{% if footnotes %}

{% for f in footnotes %}
- [{{ f.n }}] {{ f.text }}
{% endfor %}
{% endif %}

N-gram models are shown at their best order on validation; every order is in section {{ sec.orders }}.
{% if has_neural %}"Budget / actual": each neural model's training budget, and what the model cost in this run (training and evaluation, wall clock), with the overrun of a time budget in %.
{% endif %}
{% if neural_none %}Neural models were not run (`--neural none`).
{% endif %}
{% if undertrained %}

**Warning: undertrained neural models** -- their numbers are not a result (give them a larger budget):

{% for u in undertrained %}
- {{ u.label }}: {{ u.why }}
{% endfor %}
{% endif %}
{% if problems %}

Not estimated:

{% for p in problems %}
- `{{ p.id }}`: {{ p.error }}
{% endfor %}
{% endif %}


"""

MD_TAIL = r"""## Normalising across tokenizations

With log2P the total log2 probability a model gives the test text's N predicted tokens: bits per token = −log2P / N (perplexity = 2^bits per token), bits per byte = −log2P / B, bits per character = −log2P / C and bits per word = −log2P / W, where B counts the UTF-8 bytes of the test text as read (one byte, the newline, per sentence end; the same whatever the tokenizer), C the characters of the detokenized test text with one newline per sentence (the character a sentence end stands for) and W its whitespace-separated words. Here {% if sizes.test.bytes %}B = {{ "{:,}".format(sizes.test.bytes) }}, {% endif %}C = {{ "{:,}".format(sizes.test.chars) }} and W = {{ "{:,}".format(sizes.test.words) }} for N = {{ "{:,}".format(sizes.test.tokens) }}. All models above share one tokenization, so these columns rank them identically; bits per byte (or per character) compare models that cut the same text differently (section {{ sec.tokenizations }}).

## Settings

| setting | value |
|---|---|
{% for k, v in settings_shown.items() %}
| {{ k.replace("_", " ") }} | `{{ v }}` |
{% endfor %}
"""

HTML_HEAD = r"""{% macro num(m, col) %}<td class="num{% if col in m.best %} best{% endif %}" data-v="{{ m["v_" + col] if m["v_" + col] is not none else "" }}">{{ m[col] }}{% if col in m.best %} ★{% endif %}</td>{% endmacro %}
<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<title>ngramlm compare: {{ corpus.name }}</title>
<style>
body { font-family: system-ui, -apple-system, "Segoe UI", sans-serif; margin: 1.5em auto; max-width: 1100px; color: #222; padding: 0 1em; }
h1 { font-size: 1.5em; } h2 { font-size: 1.2em; margin-top: 2em; border-bottom: 1px solid #ddd; }
table { border-collapse: collapse; margin: 0.8em 0; font-size: 0.85em; }
th, td { border: 1px solid #ddd; padding: 3px 7px; } th { background: #f4f4f4; }
td.num { text-align: right; font-variant-numeric: tabular-nums; }
tr.budget td { color: #666; font-size: 0.9em; } .nw { white-space: nowrap; }
.note { color: #666; font-size: 0.85em; }
.floor { background: #fff7d6; padding: 0.5em 0.8em; border: 1px solid #eed27a; }
figure { margin: 0.8em 0; } figure img { max-width: 100%; border: 1px solid #eee; }
.tokens { display: flex; flex-wrap: wrap; gap: 3px; margin: 0.6em 0; }
.tok { display: inline-flex; flex-direction: column; border: 1px solid #ccc; font-size: 0.8em; min-width: 2.2em; }
.tok .w { padding: 2px 4px; font-family: monospace; background: #fafafa; text-align: center; }
.tok .b { padding: 1px 4px; text-align: center; font-size: 0.85em; }
.tok.rowlabels { border-color: #999; } .tok.rowlabels .b { background: #f4f4f4; font-style: italic; }
.legend span { display: inline-block; width: 2.2em; text-align: center; font-size: 0.75em; }
.att-controls { margin: 0.6em 0; } .att-controls label { margin-right: 1.2em; }
.att-tok { display: inline-block; padding: 2px 4px; margin: 2px 1px; border: 1px solid #ccc; font-family: monospace; cursor: pointer; font-size: 0.85em; }
.att-tok.focus { outline: 2px solid #d6604d; }
.att-tok.masked { color: #bbb; }
#att-info { font-size: 0.85em; min-height: 2.5em; }
#att-heatmap { display: block; margin-top: 0.5em; }
#att-heatmap rect.row-outline { fill: none; stroke: #d6604d; stroke-width: 2; pointer-events: none; }
#att-heatmap text.row-label { cursor: pointer; } #att-heatmap text.row-label.focus { font-weight: bold; fill: #b2182b; }
#selftest { display: none; }
.scale-bar { display: inline-block; width: 8em; height: 0.8em; border: 1px solid #ccc; vertical-align: middle; margin: 0 0.4em; }
.scroll { overflow-x: auto; max-width: 100%; }
td.best { font-weight: bold; } .ci { color: #666; font-size: 0.85em; font-weight: normal; }
.chip { display: inline-block; padding: 0 0.5em; margin-right: 0.4em; border-left: 4px solid; font-size: 0.85em; }
.chip.ngram, tr.ngram td:first-child { border-left: 4px solid #D55E00; } .chip.neural, tr.neural td:first-child { border-left: 4px solid #0072B2; }
.chip.interpolated, tr.interpolated td:first-child { border-left: 4px solid #009E73; } .chip.infini, tr.infini td:first-child { border-left: 4px solid #CC79A7; }
table.sortable th { cursor: pointer; } table.sortable th[aria-sort]::after { content: attr(data-arrow); font-size: 0.8em; }
.csv { font-size: 0.75em; margin: -0.5em 0 0.8em 0; }
.footnotes { margin-top: 0; }
</style>
</head>
<body>
<h1>Count vs neural language models on <code>{{ corpus.name }}</code></h1>
<p>{{ "{:,}".format(sizes.train.tokens) }} training tokens, {{ "{:,}".format(sizes.valid.tokens) }} validation and {{ "{:,}".format(sizes.test.tokens) }} test tokens ({{ units.tokens }}); one vocabulary of {{ "{:,}".format(corpus.n_types) }} predicted types and one tokenization (<code>{{ tokenizer }}</code>) for every model.
Run {{ r.created }}, status <b>{{ status }}</b>, {{ timing.total }} in all ({{ timing.trained }} models trained, {{ timing.cached }} from the cache).</p>
{% if truth %}
<p class="floor">The toy corpus comes from a known probabilistic automaton: the <b>true perplexity of the test text is {{ truth.perplexity|fixed(2) }}</b> ({{ truth.bits_per_token|fixed(4) }} bits per token), a floor no model beats on average. “Above the floor” is each model's test bits per token minus the truth's, and the ratio of perplexities.</p>
{% endif %}

<h2 id="summary">Summary</h2>
<ul id="summary-list">
{% for b in top.best %}<li>Best {{ b.family }} model (on valid): <b>{{ b.label }}</b>, test perplexity {{ b.test }}{% if b.ci != "–" %} (95 % CI {{ b.ci }}){% endif %}, {{ b.bpb }} bits per byte.</li>
{% endfor %}
{% if top.headline %}<li>{{ top.headline }}</li>{% endif %}
{% if top.vn %}<li>{{ top.vn }}</li>{% endif %}
</ul>

<h2 id="results">Results</h2>
<p class="legend-families">{% for f in families %}<span class="chip {{ f.family }}">{{ f.name }}</span>{% endfor %} <span class="note">the colour of each family, in the table's left edge and in every figure; <b>★</b> the best value of a column; click a column's header to sort; the 95 % interval is a bootstrap over the test sentences (1,000 resamples, the same for every model).</span></p>
<div class="scroll">
<table id="results-table" class="sortable">
<thead><tr><th>model</th><th>valid ppl</th><th title="test perplexity, and its 95 % bootstrap interval (by sentence) below">test ppl<br><span class="ci">95 % CI</span></th><th>test bits/token</th>{% if has_floor %}<th title="test bits per token minus the true language's, and the ratio of perplexities">above the floor</th>{% endif %}<th title="bits per UTF-8 byte of the test text: comparable across tokenizations">bits/byte{% if not has_bpc %}<br><span class="ci">= bits/char</span>{% endif %}</th>{% if has_bpc %}<th>bits/char</th>{% endif %}{% if has_bpw %}<th>bits/word</th>{% endif %}<th>size</th><th title="training wall time; a cached model cost nothing in this run">training ({{ time_unit }})</th><th title="the training budget, and what the model cost in this run: training and evaluation, wall clock">budget / actual</th><th>notes</th></tr></thead>
<tbody>
{% for m in summary %}
<tr class="{{ m.family }}"{% if m.undertrained %} data-undertrained="1"{% endif %}><td>{{ m.label }}</td>{{ num(m, "valid") }}<td class="num{% if "test" in m.best %} best{% endif %}" data-v="{{ m.v_test if m.v_test is not none else "" }}">{{ m.test }}{% if "test" in m.best %} ★{% endif %}{% if m.ci != "–" %}<br><span class="ci">{{ m.ci }}</span>{% endif %}</td>{{ num(m, "bpt") }}{% if has_floor %}<td class="num" data-v="{{ m.v_floor if m.v_floor is not none else "" }}">{{ m.floor }}</td>{% endif %}<td class="num{% if "bpb" in m.best %} best{% endif %}" data-v="{{ m.v_bpb if m.v_bpb is not none else "" }}"{% if m.ci_bpb %} title="95 % CI {{ m.ci_bpb }}"{% endif %}>{{ m.bpb }}{% if "bpb" in m.best %} ★{% endif %}</td>{% if has_bpc %}{{ num(m, "bpc") }}{% endif %}{% if has_bpw %}{{ num(m, "bpw") }}{% endif %}<td class="num" data-v="{{ m.v_size if m.v_size is not none else "" }}">{{ m.size }} <span class="note">{{ m.size_unit }}</span></td><td class="num" data-v="{{ m.v_train if m.v_train is not none else "" }}" title="{{ m.cached }}">{{ m.train }}</td><td class="num budget">{% for part in m.budget.split(" / ") %}{% if not loop.first %} {% endif %}<span class="nw">{{ part }}{% if not loop.last %} /{% endif %}</span>{% endfor %}</td><td class="note">{% for n in m.refs %}<a href="#note-{{ n }}">[{{ n }}]</a>{% endfor %}</td></tr>
{% endfor %}
</tbody>
</table>
</div>
{% if footnotes %}<ol class="note footnotes">{% for f in footnotes %}<li id="note-{{ f.n }}">{{ f.text }}</li>{% endfor %}</ol>{% endif %}
<p class="note">N-gram models at their best order on validation (every order is in section {{ sec.orders }}). {% if has_neural %}“Budget / actual”: each neural model's training budget, and what the model cost in this run (training and evaluation, wall clock), with the overrun of a time budget in %. {% endif %}{% if neural_none %}Neural models were not run (<code>--neural none</code>).{% endif %}</p>
{% if undertrained %}<p class="floor" id="undertrained"><b>Warning: undertrained neural models</b> &mdash; their numbers are not a result (give them a larger budget): {% for u in undertrained %}{{ u.label }}: {{ u.why }}{% if not loop.last %}; {% endif %}{% endfor %}.</p>{% endif %}
{% if problems %}<p class="note">Not estimated:</p><ul class="note" id="problems">{% for p in problems %}<li><code>{{ p.id }}</code>: {{ p.error }}</li>{% endfor %}</ul>{% endif %}

"""

HTML_TAIL = r"""<h2 id="normalisation">Normalising across tokenizations</h2>
<p>With log<sub>2</sub>P the total log<sub>2</sub> probability a model gives the N predicted tokens of the test text: bits per token = −log<sub>2</sub>P / N (perplexity = 2<sup>bits per token</sup>), bits per byte = −log<sub>2</sub>P / B (B: the UTF-8 bytes of the test text as read, one byte, the newline, per sentence end; the same whatever the tokenizer), bits per character = −log<sub>2</sub>P / C, bits per word = −log<sub>2</sub>P / W, where C counts the characters of the detokenized test text with one newline per sentence (the character a sentence end stands for) and W its whitespace-separated words. Here {% if sizes.test.bytes %}B = {{ "{:,}".format(sizes.test.bytes) }}, {% endif %}C = {{ "{:,}".format(sizes.test.chars) }}, W = {{ "{:,}".format(sizes.test.words) }}, N = {{ "{:,}".format(sizes.test.tokens) }}. All models above share one tokenization, so these columns rank them alike; bits per byte (or per character) compare models that cut the same text differently (section {{ sec.tokenizations }}).</p>

<h2 id="settings">Settings</h2>
<table id="settings-table" class="nosort">
<thead><tr><th>setting</th><th>value</th></tr></thead>
{% for k, v in settings_shown.items() %}<tr><td>{{ k.replace("_", " ") }}</td><td><code>{{ v }}</code></td></tr>
{% endfor %}
</table>
<p id="selftest" data-result="not-run" hidden>self-test not run</p>

<script>
{% raw %}
(function () {
  "use strict";
  var dataEl = document.getElementById("attention-data");
  var A = dataEl ? JSON.parse(dataEl.textContent) : null;
  var st = null;

  function rowWeights(layer, head, i, temp) {
    var T = A.tokens.length, out = new Array(T).fill(0);
    var heads = head < 0 ? Array.from({length: A.n_heads}, function (_, h) { return h; }) : [head];
    heads.forEach(function (h) {
      var logs = A.log_weights[layer][h][i], m = -Infinity, z = 0, e = new Array(T).fill(0), j;
      for (j = 0; j <= i; j++) { if (logs[j] !== null) { m = Math.max(m, logs[j] / temp); } }
      for (j = 0; j <= i; j++) { if (logs[j] !== null) { e[j] = Math.exp(logs[j] / temp - m); z += e[j]; } }
      for (j = 0; j <= i; j++) { out[j] += e[j] / z / heads.length; }
    });
    return out;
  }
  function entropy(w) { var h = 0; w.forEach(function (x) { if (x > 0) { h -= x * Math.log2(x); } }); return h; }
  function blue(w) { return "rgba(33, 102, 172, " + Math.min(1, w).toFixed(3) + ")"; }

  function renderTokens() {
    var w = rowWeights(st.layer, st.head, st.focus, st.temp);
    document.querySelectorAll("#att-tokens .att-tok").forEach(function (span) {
      var j = +span.dataset.i;
      span.dataset.w = w[j].toFixed(6);
      span.style.background = j <= st.focus ? blue(w[j]) : "transparent";
      span.style.color = w[j] > 0.5 ? "white" : "";
      span.classList.toggle("focus", j === st.focus);
      span.classList.toggle("masked", j > st.focus);
    });
    var top = w.map(function (x, j) { return [x, j]; }).filter(function (p) { return p[1] <= st.focus; })
      .sort(function (a, b) { return b[0] - a[0]; }).slice(0, 3);
    document.getElementById("att-info").textContent = "reading \u201c" + A.tokens[st.focus] + "\u201d (position " +
      st.focus + "): attends most to " + top.map(function (p) {
        return "\u201c" + A.tokens[p[1]] + "\u201d@" + p[1] + " " + p[0].toFixed(3); }).join(", ") +
      "; entropy " + entropy(w).toFixed(3) + " bits";
  }

  var geom = null;  // the heatmap's cell size and margins, for the row outline

  // Outline the focused row of the heatmap (one outline, moved on hover; the heatmap is not redrawn).
  function outlineRow() {
    var svg = document.getElementById("att-heatmap"), o = svg.querySelector("rect.row-outline");
    if (!o || !geom) { return; }
    var i = st.focus, c = geom.c;
    o.setAttribute("x", geom.left - 1); o.setAttribute("y", geom.top + c * i - 1);
    o.setAttribute("width", c * (i + 1) + 1); o.setAttribute("height", c + 1);
    o.dataset.i = i;
    svg.querySelectorAll("text.row-label").forEach(function (t) { t.classList.toggle("focus", +t.dataset.i === i); });
  }

  function renderHeatmap() {
    var T = A.tokens.length, svg = document.getElementById("att-heatmap"), ns = "http://www.w3.org/2000/svg";
    var c = Math.max(6, Math.min(22, Math.floor(620 / T))), left = 110, topM = 90;
    geom = {c: c, left: left, top: topM};
    svg.setAttribute("width", left + c * T + 10);
    svg.setAttribute("height", topM + c * T + 10);
    while (svg.firstChild) { svg.removeChild(svg.firstChild); }
    for (var i = 0; i < T; i++) {
      var w = rowWeights(st.layer, st.head, i, st.temp);
      var lab = document.createElementNS(ns, "text");
      lab.setAttribute("x", left - 4); lab.setAttribute("y", topM + c * i + c * 0.8);
      lab.setAttribute("text-anchor", "end"); lab.setAttribute("font-size", Math.min(11, c));
      lab.setAttribute("class", "row-label"); lab.dataset.i = i;
      lab.textContent = A.tokens[i];
      svg.appendChild(lab);
      for (var j = 0; j <= i; j++) {
        var r = document.createElementNS(ns, "rect");
        r.setAttribute("x", left + c * j); r.setAttribute("y", topM + c * i);
        r.setAttribute("width", c - 1); r.setAttribute("height", c - 1);
        r.setAttribute("fill", blue(w[j]));
        r.setAttribute("class", "cell");
        r.dataset.i = i; r.dataset.j = j;
        var tt = document.createElementNS(ns, "title");
        tt.textContent = A.tokens[i] + " \u2192 " + A.tokens[j] + ": " + w[j].toFixed(4);
        r.appendChild(tt);
        svg.appendChild(r);
      }
    }
    for (var k = 0; k < T; k++) {
      var t = document.createElementNS(ns, "text"), x = left + c * k + c * 0.7, y = topM - 4;
      t.setAttribute("x", x); t.setAttribute("y", y); t.setAttribute("font-size", Math.min(11, c));
      t.setAttribute("transform", "rotate(-60 " + x + " " + y + ")");
      t.textContent = A.tokens[k];
      svg.appendChild(t);
    }
    // Axis titles: rows are the passage read teacher-forced (the queries), columns the positions attended to.
    var xt = document.createElementNS(ns, "text");
    xt.setAttribute("x", left); xt.setAttribute("y", 12); xt.setAttribute("font-size", 11);
    xt.setAttribute("class", "axis-title"); xt.textContent = "attended-to position (key) \u2192";
    svg.appendChild(xt);
    var yt = document.createElementNS(ns, "text"), yx = 10, yy = topM + c * T / 2;
    yt.setAttribute("x", yx); yt.setAttribute("y", yy); yt.setAttribute("font-size", 11);
    yt.setAttribute("text-anchor", "middle"); yt.setAttribute("class", "axis-title");
    yt.setAttribute("transform", "rotate(-90 " + yx + " " + yy + ")");
    yt.textContent = "reading position (query), teacher-forced \u2192";
    svg.appendChild(yt);
    var outline = document.createElementNS(ns, "rect");
    outline.setAttribute("class", "row-outline");
    svg.appendChild(outline);
    outlineRow();
  }

  function render() { renderTokens(); renderHeatmap(); }

  function setup() {
    if (!A) { return; }
    st = {layer: A.n_layers - 1, head: -1, temp: 1, focus: A.tokens.length - 1};
    var layerSel = document.getElementById("att-layer"), headSel = document.getElementById("att-head");
    for (var l = 0; l < A.n_layers; l++) { layerSel.add(new Option(String(l + 1), String(l))); }
    layerSel.value = String(st.layer);
    headSel.add(new Option("mean of heads", "-1"));
    for (var h = 0; h < A.n_heads; h++) { headSel.add(new Option(String(h + 1), String(h))); }
    layerSel.addEventListener("change", function () { st.layer = +layerSel.value; render(); });
    headSel.addEventListener("change", function () { st.head = +headSel.value; render(); });
    var slider = document.getElementById("att-temp");
    slider.addEventListener("input", function () {
      st.temp = Math.pow(2, +slider.value);
      document.getElementById("att-temp-val").textContent = st.temp.toFixed(2);
      render();
    });
    var box = document.getElementById("att-tokens");
    A.tokens.forEach(function (tok, i) {
      var s = document.createElement("span");
      s.className = "att-tok"; s.dataset.i = i; s.textContent = tok;
      box.appendChild(s);
    });
    box.addEventListener("mouseover", function (ev) {
      var t = ev.target.closest(".att-tok");
      if (t) { st.focus = +t.dataset.i; render(); }
    });
    document.getElementById("att-heatmap").addEventListener("mouseover", function (ev) {
      var r = ev.target.closest("rect.cell, text.row-label");
      if (r && +r.dataset.i !== st.focus) { st.focus = +r.dataset.i; renderTokens(); outlineRow(); }
    });
    render();
  }

  // On load: check that every figure decoded and that the attention view answers a hover and the slider.
  function selftest() {
    var out = document.getElementById("selftest"), notes = [], ok = true;
    try {
      var imgs = Array.from(document.querySelectorAll("figure img"));
      var decoded = imgs.filter(function (im) { return im.complete && im.naturalWidth > 0; }).length;
      notes.push("figures decoded " + decoded + "/" + imgs.length);
      ok = ok && decoded === imgs.length;
      // A neural row whose numbers are not a result (stopped before an epoch, or worse than the unigram)
      // fails the self-test: a reader must not take it for a comparison.
      // (the results table's rows by their label; another table's, e.g. the tokenizations ranking, by table and model)
      var flagged = Array.from(document.querySelectorAll("table tr[data-undertrained]")).map(function (tr) {
        var id = tr.closest("table").id;
        return id === "results-table" ? tr.cells[0].textContent : id + ": " + tr.cells[2].textContent; });
      notes.push(flagged.length ? "undertrained neural rows: " + flagged.join(", ") : "no undertrained neural rows");
      ok = ok && flagged.length === 0;
      if (A) {
        var T = A.tokens.length, k = Math.max(1, Math.floor(T / 2));
        var spans = document.querySelectorAll("#att-tokens .att-tok");
        var headSel = document.getElementById("att-head"), slider = document.getElementById("att-temp");
        headSel.value = "0"; headSel.dispatchEvent(new Event("change"));
        spans[k].dispatchEvent(new MouseEvent("mouseover", {bubbles: true}));
        var focus = document.querySelector("#att-tokens .att-tok.focus");
        var readW = function () { return Array.from(spans).map(function (s) { return +s.dataset.w; }); };
        var w1 = readW(), sum = w1.reduce(function (a, b) { return a + b; }, 0);
        var future = w1.slice(k + 1).reduce(function (a, b) { return a + b; }, 0);
        var hoverOk = focus !== null && +focus.dataset.i === k && Math.abs(sum - 1) < 1e-4 && future === 0;
        notes.push("hover token " + k + (hoverOk ? " ok" : " FAILED") + " (row sums to " + sum.toFixed(4) + ")");
        var setT = function (v) { slider.value = String(v); slider.dispatchEvent(new Event("input", {bubbles: true})); };
        var h1 = entropy(w1);
        setT(-1); var h05 = entropy(readW()), max05 = Math.max.apply(null, readW());
        setT(1); var h2 = entropy(readW());
        var cells = document.querySelectorAll("#att-heatmap rect.cell").length;
        var sliderOk = h05 <= h1 + 1e-6 && h1 <= h2 + 1e-6 && h2 - h05 > 1e-9 && max05 >= Math.max.apply(null, w1) - 1e-9;
        notes.push("slider " + (sliderOk ? "ok" : "FAILED") + " (entropy T=0.5 " + h05.toFixed(3) + ", T=1 " +
          h1.toFixed(3) + ", T=2 " + h2.toFixed(3) + " bits)");
        notes.push("heatmap cells " + cells);
        // The mouse moves over heatmap row a, then row b: the outline (one) follows it, and so does
        // the token view.  The mouse is aimed at the middle of the row's first cell, and the event goes
        // to whatever element is there, as a real pointer's would.
        var svg = document.getElementById("att-heatmap"), sx = window.scrollX, sy = window.scrollY;
        var hoverRow = function (i) {
          var cell = svg.querySelector('rect.cell[data-i="' + i + '"][data-j="0"]');
          cell.scrollIntoView({block: "center"});
          var b = cell.getBoundingClientRect(), x = b.left + b.width / 2, y = b.top + b.height / 2;
          var hit = document.elementFromPoint(x, y);
          if (hit) { hit.dispatchEvent(new MouseEvent("mouseover", {bubbles: true, clientX: x, clientY: y})); }
          var outlines = svg.querySelectorAll("rect.row-outline"), labels = svg.querySelectorAll("text.row-label.focus");
          var tok = document.querySelector("#att-tokens .att-tok.focus");
          return hit === cell && outlines.length === 1 && +outlines[0].dataset.i === i &&
            Math.abs(+outlines[0].getAttribute("y") - (+cell.getAttribute("y"))) <= 1 &&
            svg.querySelectorAll("rect.cell[stroke]").length === 0 &&
            labels.length === 1 && +labels[0].dataset.i === i && tok !== null && +tok.dataset.i === i;
        };
        var ra = 1, rb = T - 2, rowA = hoverRow(ra), rowB = hoverRow(rb);
        window.scrollTo(sx, sy);
        notes.push("heatmap row hover " + ra + " then " + rb + (rowA && rowB ? " ok" : " FAILED") + " (outline follows)");
        // Position 0 is the sentence start: labelled <s>, in the token view and on both heatmap axes.
        var first = [spans[0].textContent, svg.querySelector('text.row-label[data-i="0"]').textContent];
        var startOk = first.every(function (x) { return x === "<s>"; });
        notes.push("start symbol " + (startOk ? "<s> ok" : "FAILED (" + first.join(", ") + ")"));
        ok = ok && hoverOk && sliderOk && cells === T * (T + 1) / 2 && rowA && rowB && startOk;
        setT(0); headSel.value = "-1"; headSel.dispatchEvent(new Event("change"));
        spans[T - 1].dispatchEvent(new MouseEvent("mouseover", {bubbles: true}));
      } else {
        notes.push("no attention view");
      }
    } catch (e) {
      ok = false; notes.push("error: " + e);
    }
    out.dataset.result = ok ? "pass" : "fail";
    out.textContent = "self-test: " + (ok ? "pass" : "fail") + " (" + notes.join("; ") + ")";
  }

  setup();
  if (document.readyState === "complete") { selftest(); } else { window.addEventListener("load", selftest); }
})();
{% endraw %}
</script>
<script>{{ table_js }}</script>
</body>
</html>
"""


def assemble(sections=SECTIONS) -> tuple:
    """``(Markdown template, HTML template)``: head, each section numbered in order, tail."""
    md = MD_HEAD + "".join(f"## {i}. {s.title}\n{s.md}" for i, s in enumerate(sections, start=1)) + MD_TAIL
    html = HTML_HEAD + "".join(f'<h2 id="{s.anchor}">{i}. {s.html_title}</h2>\n{s.html}'
                               for i, s in enumerate(sections, start=1)) + HTML_TAIL
    return md, html


MD_TEMPLATE, HTML_TEMPLATE = assemble()
