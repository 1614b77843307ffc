"""Section: n -> ∞ -- the ∞-gram indexed on the training text, alone and mixed with the best n-gram
model and each neural model; how long a history the text supports, and where the mixture helps
(the computing is :mod:`reports.experiments.infini_part`)."""
from __future__ import annotations

from .. import plots
from ..formatting import fmt_fixed, fmt_ppl, fmt_share
from .base import Section


def compute(run) -> None:
    from ..experiments.infini_part import infini_section

    partners = [r for r in [run.best("ngram")] + [r for r in run.results.get("neural", [])
                                                   if r.get("valid") and r["id"] in run.arrays] if r]
    got = infini_section(run.data, partners, run.arrays) if partners else None
    if got is None:
        run.results["infini"] = None
        return
    section, arrays = got
    run.arrays.update(arrays)
    run.results["infini"] = section
    run.log(f"  ∞-gram: mean effective n {section['mean_effective_n']:.2f} (max {section['max_effective_n']}), "
            f"zero probability at {100 * section['zero_share']:.1f}% of test tokens")
    for r in section["rows"]:
        run.log(f"  {r['id']}: valid {r['valid']['ppl']:.2f}, test {r['test']['ppl']:.2f} "
                f"(partner alone: test {r['partner_test']['ppl']:.2f})")


def context(results: dict) -> dict:
    sec = results.get("infini")
    if not sec:
        return {"infini": None}
    total = max(1, sum(sec["effective_n_hist"]))
    return {"infini": {
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
    }}


TITLE = 'n → ∞: the ∞-gram'
HTML_TITLE = 'n → ∞: the ∞-gram'

MD = r"""{% if infini %}

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

"""

HTML = r"""{% if infini %}
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

"""

SECTION = Section(name="infini", anchor="infini", title=TITLE, html_title=HTML_TITLE, md=MD, html=HTML,
                  compute=compute, context=context, plots={"effective_n": ("n → ∞: effective n", plots.effective_n)})
