"""Jinja2 templates of the comparison report (kept as strings: nothing to ship as package data).

Both templates receive the context of :func:`reports.render.build_context`.
"""

MD_TEMPLATE = r"""# Count vs neural language models on `{{ corpus.name }}`

{{ "{:,}".format(sizes.train.tokens) }} training tokens, {{ "{:,}".format(sizes.valid.tokens) }} validation and {{ "{:,}".format(sizes.test.tokens) }} test tokens ({{ units.tokens }}), one vocabulary of {{ "{:,}".format(corpus.n_types) }} predicted types and one tokenization (`{{ tokenizer }}`) for every model.
Run: {{ r.created }}, status **{{ status }}**, {{ timing.total }} in all ({{ timing.trained }} models trained, {{ timing.cached }} from the cache).
{% if truth %}

The toy corpus comes from a known probabilistic automaton: the **true perplexity of the test text is {{ truth.perplexity|fixed(2) }}** ({{ truth.bits_per_token|fixed(4) }} bits per token), a floor no model beats on average. "Above the floor" is the model's test bits per token minus the truth's (and the ratio of perplexities).
{% endif %}

## Results

| model | valid ppl | test ppl | test bits/token | above the floor | bits/char | bits/word | size | training | | budget / actual | notes |
|---|---:|---:|---:|---:|---:|---:|---:|---:|---|---:|---|
{% for m in summary %}
| {{ m.label }} | {{ m.valid }} | {{ m.test }} | {{ m.bpt }} | {{ m.floor }} | {{ m.bpc }} | {{ m.bpw }} | {{ m.size }} {{ m.size_unit }} | {{ m.train }} | {{ m.cached }} | {{ m.budget }} | {{ m.note }} |
{% endfor %}

N-gram models are shown at their best order on validation; every order is in section 2.
{% if has_neural %}"Budget / actual": each neural model's training budget, and what the model cost in this run (training and evaluation, wall clock), with the overrun of a time budget in %.
{% endif %}
{% if neural_none %}Neural models were not run (`--neural none`).
{% endif %}
{% if problems %}

Not estimated:

{% for p in problems %}
- `{{ p.id }}`: {{ p.error }}
{% endfor %}
{% endif %}


## 1. The V^n wall

| n | possible V^n | distinct in train | share of V^n | test n-grams unseen in train | MLE zero-probability test tokens | MLE test perplexity | MLE ppl over the other tokens |
|---:|---:|---:|---:|---:|---:|---:|---:|
{% for w in vwall %}
| {{ w.order }} | {{ w.possible }} | {{ w.distinct }} | {{ w.coverage }} | {{ w.unseen }} ({{ w.unseen_n }} of {{ w.tokens }}) | {{ w.zeros }} | {{ w.mle_ppl }} | {{ w.mle_nonzero }} |
{% endfor %}

V counts the predicted types ({{ units.types }}, `<unk>`, `</s>`). Distinct n-grams are counted as KenLM counts them, with each sentence padded by `<s>`, so at n = 1 the count can exceed V by one (`<s>` itself). The n-gram of a test token is the one ending at it, shortened at sentence starts (what an order-n model conditions on). Under maximum likelihood every unseen one has probability 0, so one such token makes the perplexity of the whole test text **infinite**; the last column leaves those tokens out and is not a perplexity of the text.
{% if plots.vwall %}

![{{ plots.vwall.title }}]({{ plots.vwall.file }})
{% endif %}

## 2. Perplexity against order (test)

| smoother |{% for o in orders %} n={{ o }} |{% endfor %}

|---|{% for o in orders %}---:|{% endfor %}

{% for g in grid %}
| {{ g.label }} |{% for c in g.cells %} {{ c.text }} |{% endfor %}

{% endfor %}
{% if plots.perplexity_by_order %}

![{{ plots.perplexity_by_order.title }}]({{ plots.perplexity_by_order.file }})
{% endif %}
{% if plots.count_spectrum %}

![{{ plots.count_spectrum.title }}]({{ plots.count_spectrum.file }})
{% endif %}

## 3. Learning curves (test perplexity against training-set size)
{% if curves %}

| model |{% for f in curve_fractions %} {{ f }} |{% endfor %}

|---|{% for f in curve_fractions %}---:|{% endfor %}

| training tokens |{% for t in curve_tokens %} {{ t }} |{% endfor %}

{% for c in curves %}
| {{ c.label }} |{% for x in c.cells %} {{ x }} |{% endfor %}

{% endfor %}

Training sets are prefixes of the training text (whole sentences), encoded with the full run's vocabulary. Every neural point trains under the same small budget: once a prefix is larger than what the model can read in that budget, more data cannot help, and the neural curve flattens (or turns up) where a count model's keeps falling.
{% if plots.learning_curves %}

![{{ plots.learning_curves.title }}]({{ plots.learning_curves.file }})
{% endif %}
{% else %}

No learning curves in this run.
{% endif %}

## 4. Interpolation: p = λ p_ngram + (1 − λ) p_neural
{% if interp %}

| n-gram | neural | λ (tuned on valid) | valid ppl: n-gram / neural / mixed | test ppl: n-gram / neural / mixed |
|---|---|---:|---:|---:|
{% for i in interp %}
| {{ i.ng }} | {{ i.nn }} | {{ i.lam }} | {{ i.ng_valid }} / {{ i.nn_valid }} / **{{ i.valid }}** | {{ i.ng_test }} / {{ i.nn_test }} / **{{ i.test }}** |
{% endfor %}
{% if plots.interpolation %}

![{{ plots.interpolation.title }}]({{ plots.interpolation.file }})
{% endif %}
{% else %}

No interpolation: it needs a neural model and an n-gram model without zero probabilities.
{% endif %}

## 5. Per-token surprisal on a test passage
{% if passage %}

Passage: {{ passage.rule }} (test sentences {{ passage.sentences[0] + 1 }}–{{ passage.sentences[1] }}). Bits = −log2 p of each token; report.html colours them.

| token |{% for t in passage.totals %} {{ t.label }} |{% endfor %}

|---|{% for t in passage.totals %}---:|{% endfor %}

{% for tok in passage.tokens %}
| `{{ tok.text }}` |{% for c in tok.cells %} {{ c.bits }} |{% endfor %}

{% endfor %}
| **total bits** |{% for t in passage.totals %} **{{ t.total_text }}** |{% endfor %}

{% endif %}

## 6. Transformer attention
{% if attention %}

{{ attention.label }}: {{ attention.n_layers }} layer(s) × {{ attention.n_heads }} heads on the passage above. The static figure shows the last layer's mean over heads; report.html has the interactive view (hover a token, change the softmax temperature).
{% if plots.attention %}

![{{ plots.attention.title }}]({{ plots.attention.file }})
{% endif %}
{% else %}

No Transformer in this run.
{% endif %}

## 7. n → ∞: the ∞-gram
{% if infini %}

The ∞-gram (Liu et al., 2024) drops the fixed n: at every test token it uses the longest history that occurs in the training text ({{ infini.tokens }} tokens indexed in a suffix array, {{ infini.bytes }} bytes a token). Mean effective n on test: **{{ infini.mean_n }}** (longest: {{ infini.max_n }}). Alone it gives zero probability to {{ infini.zero }} of test tokens (the history was seen, never followed by the word), so it is mixed: one weight where its estimate is sparse (one continuation seen: {{ infini.sparse }} of tokens, right {{ infini.sparse_correct }} of the time), one elsewhere, tuned on valid.

| mixture | λ sparse / dense | valid ppl: partner / mixed | test ppl: partner / mixed |
|---|---:|---:|---:|
{% for r in infini.rows %}
| {{ r.label }} | {{ r.lam_s }} / {{ r.lam_d }} | {{ r.partner_valid }} / **{{ r.valid }}** | {{ r.partner_test }} / **{{ r.test }}** |
{% endfor %}

Bits per test token by effective n (gain > 0: the ∞-gram helps its partner there):

| effective n | partner | tokens | share | bits: partner | bits: with ∞-gram | gain |
|---|---|---:|---:|---:|---:|---:|
{% for r in infini.by_n %}
| {{ r.n }} | {{ r.label }} | {{ r.tokens }} | {{ r.share }} | {{ r.partner }} | {{ r.mixture }} | {{ r.gain }} |
{% endfor %}

The ∞-gram's own next-token accuracy (is the word the most frequent continuation of h'?) by effective n:

| effective n | test tokens | sampled | accuracy |
|---|---:|---:|---:|
{% for r in infini.accuracy %}
| {{ r.n }} | {{ r.positions }} | {{ r.sampled }} | {{ r.accuracy }} |
{% endfor %}
{% if plots.effective_n %}

![{{ plots.effective_n.title }}]({{ plots.effective_n.file }})
{% endif %}
{% else %}

No ∞-gram: it needs the compiled extension (see `docs/kenlm.md`) and a model to mix it with.
{% endif %}

## Normalising across tokenizations

With log2P the total log2 probability a model gives the test text's N predicted tokens: bits per token = −log2P / N (perplexity = 2^bits per token), bits per character = −log2P / C and bits per word = −log2P / W, where C counts the characters of the detokenized test text with one newline per sentence (the character a sentence end stands for) and W its whitespace-separated words. Here C = {{ "{:,}".format(sizes.test.chars) }} and W = {{ "{:,}".format(sizes.test.words) }} for N = {{ "{:,}".format(sizes.test.tokens) }}. All models above share one tokenization, so the three columns rank them identically; bits per character or per word compare models that cut the same text differently.

## Settings

```
{% for k, v in s.items() %}
{{ k }} = {{ v }}
{% endfor %}
```
"""

HTML_TEMPLATE = r"""<!DOCTYPE html>
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
tr.neural td:first-child { border-left: 3px solid #2166ac; } tr.interpolated td:first-child { border-left: 3px solid #1b7837; }
tr.ngram td:first-child { border-left: 3px solid #b2182b; }
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
#selftest { font-size: 0.75em; color: #888; }
</style>
</head>
<body>
<h1>Count vs neural language models on <code>{{ corpus.name }}</code></h1>
<p>{{ "{:,}".format(sizes.train.tokens) }} training tokens, {{ "{:,}".format(sizes.valid.tokens) }} validation and {{ "{:,}".format(sizes.test.tokens) }} test tokens ({{ units.tokens }}); one vocabulary of {{ "{:,}".format(corpus.n_types) }} predicted types and one tokenization (<code>{{ tokenizer }}</code>) for every model.
Run {{ r.created }}, status <b>{{ status }}</b>, {{ timing.total }} in all ({{ timing.trained }} models trained, {{ timing.cached }} from the cache).</p>
{% if truth %}
<p class="floor">The toy corpus comes from a known probabilistic automaton: the <b>true perplexity of the test text is {{ truth.perplexity|fixed(2) }}</b> ({{ truth.bits_per_token|fixed(4) }} bits per token), a floor no model beats on average. “Above the floor” is each model's test bits per token minus the truth's, and the ratio of perplexities.</p>
{% endif %}

<h2 id="results">Results</h2>
<table id="results-table">
<tr><th>model</th><th>valid ppl</th><th>test ppl</th><th>test bits/token</th><th>above the floor</th><th>bits/char</th><th>bits/word</th><th>size</th><th>training</th><th></th><th title="the training budget, and what the model cost in this run: training and evaluation, wall clock">budget / actual</th><th>notes</th></tr>
{% for m in summary %}
<tr class="{{ m.family }}"><td>{{ m.label }}</td><td class="num">{{ m.valid }}</td><td class="num">{{ m.test }}</td><td class="num">{{ m.bpt }}</td><td class="num">{{ m.floor }}</td><td class="num">{{ m.bpc }}</td><td class="num">{{ m.bpw }}</td><td class="num">{{ m.size }} <span class="note">{{ m.size_unit }}</span></td><td class="num">{{ m.train }}</td><td>{{ m.cached }}</td><td class="num budget" title="{{ m.budget }}">{% for part in m.budget.split(" / ") %}{% if not loop.first %} {% endif %}<span class="nw">{{ part }}{% if not loop.last %} /{% endif %}</span>{% endfor %}</td><td class="note">{{ m.note }}</td></tr>
{% endfor %}
</table>
<p class="note">N-gram models at their best order on validation (every order is in section 2). {% if has_neural %}“Budget / actual”: each neural model's training budget, and what the model cost in this run (training and evaluation, wall clock), with the overrun of a time budget in %. {% endif %}{% if neural_none %}Neural models were not run (<code>--neural none</code>).{% endif %}</p>
{% if problems %}<p class="note">Not estimated:</p><ul class="note" id="problems">{% for p in problems %}<li><code>{{ p.id }}</code>: {{ p.error }}</li>{% endfor %}</ul>{% endif %}

<h2 id="vwall">1. The V<sup>n</sup> wall</h2>
<table id="vwall-table">
<tr><th>n</th><th>possible V<sup>n</sup></th><th>distinct in train</th><th>share of V<sup>n</sup></th><th>test n-grams unseen in train</th><th>MLE zero-probability test tokens</th><th>MLE test perplexity</th><th>MLE ppl over the other tokens</th></tr>
{% for w in vwall %}
<tr><td class="num">{{ w.order }}</td><td class="num">{{ w.possible }}</td><td class="num">{{ w.distinct }}</td><td class="num">{{ w.coverage }}</td><td class="num">{{ w.unseen }} <span class="note">({{ w.unseen_n }} of {{ w.tokens }})</span></td><td class="num">{{ w.zeros }}</td><td class="num"><b>{{ w.mle_ppl }}</b></td><td class="num">{{ w.mle_nonzero }}</td></tr>
{% endfor %}
</table>
<p class="note">V counts the predicted types ({{ units.types }}, &lt;unk&gt;, &lt;/s&gt;). Distinct n-grams are counted as KenLM counts them, with each sentence padded by &lt;s&gt;, so at n = 1 the count can exceed V by one (&lt;s&gt; itself). The n-gram of a test token is the one ending at it, shortened at sentence starts (what an order-n model conditions on). Under maximum likelihood every unseen one has probability 0, so a single such token makes the perplexity of the whole test text <b>infinite</b>; the last column leaves those tokens out and is not a perplexity of the text.</p>
{% if plots.vwall %}<figure><img id="plot-vwall" alt="{{ plots.vwall.title }}" src="data:image/png;base64,{{ plots.vwall.b64 }}"></figure>{% endif %}

<h2 id="orders">2. Perplexity against order (test)</h2>
<table id="order-table">
<tr><th>smoother</th>{% for o in orders %}<th>n={{ o }}</th>{% endfor %}</tr>
{% for g in grid %}
<tr><td>{{ g.label }}</td>{% for c in g.cells %}<td class="num" title="{{ c.title }}">{{ c.text }}</td>{% endfor %}</tr>
{% endfor %}
</table>
{% if plots.perplexity_by_order %}<figure><img id="plot-perplexity_by_order" alt="{{ plots.perplexity_by_order.title }}" src="data:image/png;base64,{{ plots.perplexity_by_order.b64 }}"></figure>{% endif %}
{% if plots.count_spectrum %}<figure><img id="plot-count_spectrum" alt="{{ plots.count_spectrum.title }}" src="data:image/png;base64,{{ plots.count_spectrum.b64 }}"></figure>{% endif %}

<h2 id="curves">3. Learning curves</h2>
{% if curves %}
<table id="curve-table">
<tr><th>model</th>{% for f in curve_fractions %}<th>{{ f }}</th>{% endfor %}</tr>
<tr><td class="note">training tokens</td>{% for t in curve_tokens %}<td class="num note">{{ t }}</td>{% endfor %}</tr>
{% for c in curves %}
<tr class="{{ c.family }}"><td>{{ c.label }}</td>{% for x in c.cells %}<td class="num">{{ x }}</td>{% endfor %}</tr>
{% endfor %}
</table>
<p class="note">Training sets are prefixes of the training text (whole sentences), encoded with the full run's vocabulary. Every neural point trains under the same small budget: once a prefix is larger than what the model can read in that budget, more data cannot help, and the neural curve flattens (or turns up) where a count model's keeps falling.</p>
{% if plots.learning_curves %}<figure><img id="plot-learning_curves" alt="{{ plots.learning_curves.title }}" src="data:image/png;base64,{{ plots.learning_curves.b64 }}"></figure>{% endif %}
{% else %}<p>No learning curves in this run.</p>{% endif %}

<h2 id="interpolation">4. Interpolation: p = λ p<sub>ngram</sub> + (1 − λ) p<sub>neural</sub></h2>
{% if interp %}
<table id="interp-table">
<tr><th>n-gram</th><th>neural</th><th>λ (tuned on valid)</th><th>valid ppl: n-gram / neural / mixed</th><th>test ppl: n-gram / neural / mixed</th></tr>
{% for i in interp %}
<tr><td>{{ i.ng }}</td><td>{{ i.nn }}</td><td class="num">{{ i.lam }}</td><td class="num">{{ i.ng_valid }} / {{ i.nn_valid }} / <b>{{ i.valid }}</b></td><td class="num">{{ i.ng_test }} / {{ i.nn_test }} / <b>{{ i.test }}</b></td></tr>
{% endfor %}
</table>
{% if plots.interpolation %}<figure><img id="plot-interpolation" alt="{{ plots.interpolation.title }}" src="data:image/png;base64,{{ plots.interpolation.b64 }}"></figure>{% endif %}
{% else %}<p>No interpolation: it needs a neural model and an n-gram model without zero probabilities.</p>{% endif %}

<h2 id="per-token">5. Per-token surprisal on a test passage</h2>
{% if passage %}
<p class="note">Passage: {{ passage.rule }} (test sentences {{ passage.sentences[0] + 1 }}–{{ passage.sentences[1] }}). Each box is a token; under it, one cell per model, coloured by its surprisal −log<sub>2</sub> p in bits (hover for p).
Rows, top to bottom: {% for t in passage.totals %}<b>{{ t.label }}</b> ({{ t.total_text }} bits in all){% if not loop.last %}, {% endif %}{% endfor %}.</p>
<p class="legend">{% for b in [0, 2, 4, 6, 8, 10, 12, 14, 16] %}<span style="background: hsl(0, 85%, {{ 100 - (62 * b / 16)|round|int }}%)">{{ b }}</span>{% endfor %} bits</p>
<div class="tokens" id="surprisal-view">
<div class="tok rowlabels"><span class="w">model</span>{% for t in passage.totals %}<span class="b" title="{{ t.label }}">{{ t.short }}</span>{% endfor %}</div>
{% for tok in passage.tokens %}
<div class="tok"><span class="w">{{ tok.text }}</span>{% for c in tok.cells %}<span class="b" style="background: {{ c.colour }}" title="{{ c.title }}">{{ c.bits }}</span>{% endfor %}</div>
{% endfor %}
</div>
{% else %}<p>No passage.</p>{% endif %}

<h2 id="attention">6. Transformer attention</h2>
{% if attention %}
<p class="note">{{ attention.label }}, {{ attention.n_layers }} layer(s) × {{ attention.n_heads }} heads, reading the passage above after the start symbol &lt;s&gt;. Hover a token (or a heatmap row) to see where it attends; the slider divides the attention scores by a temperature before the softmax (re-normalised from the stored log-weights): below 1 sharpens, above 1 flattens.</p>
<div class="att-controls">
<label>layer <select id="att-layer"></select></label>
<label>head <select id="att-head"></select></label>
<label>softmax temperature <input type="range" id="att-temp" min="-2" max="2" step="0.05" value="0"> <span id="att-temp-val">1.00</span></label>
</div>
<div id="att-tokens"></div>
<div id="att-info"></div>
<svg id="att-heatmap" xmlns="http://www.w3.org/2000/svg"></svg>
<script type="application/json" id="attention-data">{{ attention|tojson_safe }}</script>
{% else %}<p>No Transformer in this run.</p>{% endif %}

<h2 id="infini">7. n → ∞: the ∞-gram</h2>
{% if infini %}
<p>The ∞-gram (Liu et al., 2024) drops the fixed n: at every test token it uses the longest history that occurs in the training text ({{ infini.tokens }} tokens indexed in a suffix array, {{ infini.bytes }} bytes a token). Mean effective n on test: <b>{{ infini.mean_n }}</b> (longest: {{ infini.max_n }}). Alone it gives zero probability to {{ infini.zero }} of test tokens, so it is mixed: one weight where its estimate is sparse ({{ infini.sparse }} of tokens, right {{ infini.sparse_correct }} of the time), one elsewhere, tuned on valid.</p>
<table id="infini-table">
<tr><th>mixture</th><th>λ sparse / dense</th><th>valid ppl: partner / mixed</th><th>test ppl: partner / mixed</th></tr>
{% for r in infini.rows %}<tr><td>{{ r.label }}</td><td class="num">{{ r.lam_s }} / {{ r.lam_d }}</td><td class="num">{{ r.partner_valid }} / <b>{{ r.valid }}</b></td><td class="num">{{ r.partner_test }} / <b>{{ r.test }}</b></td></tr>
{% endfor %}</table>
<table id="infini-by-n">
<tr><th>effective n</th><th>partner</th><th>tokens</th><th>share</th><th>bits: partner</th><th>bits: with ∞-gram</th><th>gain</th></tr>
{% for r in infini.by_n %}<tr><td>{{ r.n }}</td><td>{{ r.label }}</td><td class="num">{{ r.tokens }}</td><td class="num">{{ r.share }}</td><td class="num">{{ r.partner }}</td><td class="num">{{ r.mixture }}</td><td class="num">{{ r.gain }}</td></tr>
{% endfor %}</table>
<table id="infini-accuracy">
<tr><th>effective n</th><th>test tokens</th><th>sampled</th><th>∞-gram next-token accuracy</th></tr>
{% for r in infini.accuracy %}<tr><td>{{ r.n }}</td><td class="num">{{ r.positions }}</td><td class="num">{{ r.sampled }}</td><td class="num">{{ r.accuracy }}</td></tr>
{% endfor %}</table>
{% if plots.effective_n %}<figure><img id="plot-effective_n" alt="{{ plots.effective_n.title }}" src="data:image/png;base64,{{ plots.effective_n.b64 }}"></figure>{% endif %}
{% else %}<p>No ∞-gram: it needs the compiled extension and a model to mix it with.</p>{% endif %}

<h2 id="normalisation">Normalising across tokenizations</h2>
<p>With log<sub>2</sub>P the total log<sub>2</sub> probability a model gives the N predicted tokens of the test text: bits per token = −log<sub>2</sub>P / N (perplexity = 2<sup>bits per token</sup>), bits per character = −log<sub>2</sub>P / C, bits per word = −log<sub>2</sub>P / W, where C counts the characters of the detokenized test text with one newline per sentence (the character a sentence end stands for) and W its whitespace-separated words. Here C = {{ "{:,}".format(sizes.test.chars) }}, W = {{ "{:,}".format(sizes.test.words) }}, N = {{ "{:,}".format(sizes.test.tokens) }}. All models above share one tokenization, so the three columns rank them alike; bits per character or per word compare models that cut the same text differently.</p>

<h2 id="settings">Settings</h2>
<table id="settings-table">
{% for k, v in s.items() %}<tr><td>{{ k }}</td><td><code>{{ v }}</code></td></tr>
{% endfor %}
</table>
<p id="selftest" data-result="not-run">self-test not run</p>

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
</body>
</html>
"""
