"""Section: the V^n wall -- possible, observed and unseen test n-grams per order, and what MLE does
with them.  Computed by the run's counting stage (``results["vwall"]``)."""
from __future__ import annotations

from .. import plots
from ..formatting import fmt_fixed, fmt_power, fmt_share
from .base import Section


def context(results: dict) -> dict:
    z = results.get("zipf") or {}
    top = [{"n": n, "grams": ", ".join(f"{g} ({c:,})" for g, c in grams)} for n, grams in (z.get("top") or {}).items()]
    return {"zipf_top": top, "vwall": [{
        "order": r["order"], "possible": fmt_power(r["possible_log10"]), "distinct": f"{r['distinct_train']:,}",
        "coverage": fmt_share(r["coverage_of_possible"]),
        "unseen": f"{fmt_fixed(100 * r['test_unseen_share'], 1)}%", "unseen_n": f"{r['test_unseen']:,}",
        "tokens": f"{r['test_tokens']:,}", "zeros": f"{r['mle_zero_probs']:,}",
        "mle_ppl": "∞" if r["mle_ppl"] is None else fmt_fixed(r["mle_ppl"], 2),
        "mle_nonzero": "–" if r["mle_ppl_nonzero_events"] is None else fmt_fixed(r["mle_ppl_nonzero_events"], 2),
    } for r in results.get("vwall", [])]}


TITLE = 'The V^n wall'
HTML_TITLE = 'The V<sup>n</sup> wall'

MD = r"""
| n | possible V^n | distinct in train | share of V^n | test n-grams unseen in train | MLE zero-probability test tokens | MLE test perplexity | MLE ppl over the other tokens |
|---:|---:|---:|---:|---:|---:|---:|---:|
{% for w in vwall %}
| {{ w.order }} | {{ w.possible }} | {{ w.distinct }} | {{ w.coverage }} | {{ w.unseen }} ({{ w.unseen_n }} of {{ w.tokens }}) | {{ w.zeros }} | {{ w.mle_ppl }} | {{ w.mle_nonzero }} |
{% endfor %}

V counts the predicted types ({{ units.types }}, `<unk>`, `</s>`). Distinct n-grams are counted as KenLM counts them, with each sentence padded by `<s>`, so at n = 1 the count can exceed V by one (`<s>` itself). The n-gram of a test token is the one ending at it, shortened at sentence starts (what an order-n model conditions on). Under maximum likelihood every unseen one has probability 0, so one such token makes the perplexity of the whole test text **infinite**; the last column leaves those tokens out and is not a perplexity of the text.
{% if plots.vwall %}

![{{ plots.vwall.title }}]({{ plots.vwall.file }})
{% endif %}
{% if zipf_top %}

The most frequent n-grams in train (the sentence boundaries as the models count them), and Zipf's law: a type's count falls about as 1/rank, so a few types are most of the text and most types are rare.

| n | top 10 in train (count) |
|---:|---|
{% for t in zipf_top %}
| {{ t.n }} | {{ t.grams }} |
{% endfor %}
{% endif %}
{% if plots.zipf %}

![{{ plots.zipf.title }}]({{ plots.zipf.file }})
{% endif %}

"""

HTML = r"""<table id="vwall-table">
<tr><th>n</th><th>possible V<sup>n</sup></th><th>distinct in train</th><th>share of V<sup>n</sup></th><th>test n-grams unseen in train</th><th>MLE zero-probability test tokens</th><th>MLE test perplexity</th><th>MLE ppl over the other tokens</th></tr>
{% for w in vwall %}
<tr><td class="num">{{ w.order }}</td><td class="num">{{ w.possible }}</td><td class="num">{{ w.distinct }}</td><td class="num">{{ w.coverage }}</td><td class="num">{{ w.unseen }} <span class="note">({{ w.unseen_n }} of {{ w.tokens }})</span></td><td class="num">{{ w.zeros }}</td><td class="num"><b>{{ w.mle_ppl }}</b></td><td class="num">{{ w.mle_nonzero }}</td></tr>
{% endfor %}
</table>
<p class="note">V counts the predicted types ({{ units.types }}, &lt;unk&gt;, &lt;/s&gt;). Distinct n-grams are counted as KenLM counts them, with each sentence padded by &lt;s&gt;, so at n = 1 the count can exceed V by one (&lt;s&gt; itself). The n-gram of a test token is the one ending at it, shortened at sentence starts (what an order-n model conditions on). Under maximum likelihood every unseen one has probability 0, so a single such token makes the perplexity of the whole test text <b>infinite</b>; the last column leaves those tokens out and is not a perplexity of the text.</p>
{% if plots.vwall %}<figure><img id="plot-vwall" alt="{{ plots.vwall.title }}" src="data:image/png;base64,{{ plots.vwall.b64 }}"></figure>{% endif %}
{% if zipf_top %}<p class="note">The most frequent n-grams in train (the sentence boundaries as the models count them), and Zipf's law: a type's count falls about as 1/rank, so a few types are most of the text and most types are rare.</p>
<table id="zipf-top"><thead><tr><th>n</th><th>top 10 in train (count)</th></tr></thead><tbody>
{% for t in zipf_top %}<tr><td class="num">{{ t.n }}</td><td>{{ t.grams }}</td></tr>
{% endfor %}</tbody></table>{% endif %}
{% if plots.zipf %}<figure><img id="plot-zipf" alt="{{ plots.zipf.title }}" src="data:image/png;base64,{{ plots.zipf.b64 }}"></figure>{% endif %}

"""

def zipf_figure(results: dict):
    """The training text's types by rank against their counts (log-log), with the 1/rank line of Zipf's law
    through the most frequent type for reference."""
    z = results.get("zipf") or {}
    if not z.get("ranks"):
        return None
    import numpy as np

    fig, ax = plots.plt.subplots(figsize=plots.SIZE)
    ranks, freqs = np.asarray(z["ranks"], dtype=float), np.asarray(z["freqs"], dtype=float)
    ax.loglog(ranks, freqs, "o", markersize=3, color=plots.FAMILY_COLOURS["ngram"], label="types of the training text")
    ax.loglog(ranks, freqs[0] / ranks, "--", color="black", linewidth=1, label="count ∝ 1/rank (Zipf)")
    ax.set_xlabel("rank of the type (log scale)")
    ax.set_ylabel("count in train (log scale)")
    ax.set_title("Zipf's law: frequency against rank")
    ax.grid(alpha=0.3, which="both")
    ax.legend(fontsize=8)
    return plots._png(fig)


SECTION = Section(name="vwall", anchor="vwall", title=TITLE, html_title=HTML_TITLE, md=MD, html=HTML, context=context,
                  plots={"vwall": ("The V^n wall", plots.vwall), "zipf": ("Zipf's rank-frequency plot", zipf_figure)})

