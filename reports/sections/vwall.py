"""Section: the V^n wall -- possible, observed and unseen test n-grams per order, and what MLE does
with them.  Computed by the run's counting stage (``results["vwall"]``)."""
from __future__ import annotations

from markupsafe import Markup

from .. import plots
from ..formatting import fmt_fixed, fmt_power, fmt_share
from ..html_tables import Cell, Row, Table, bold
from .base import Section, fragment

_N = Markup("V<sup>n</sup>")
VWALL_HEADER = [Cell("n"), Cell("possible Vn", Markup("possible ") + _N), Cell("distinct in train"),
                Cell("share of Vn", Markup("share of ") + _N), Cell("test n-grams unseen in train"),
                Cell("MLE zero-probability test tokens"), Cell("MLE test perplexity"),
                Cell("MLE ppl over the other tokens")]


def context(results: dict) -> dict:
    z = results.get("zipf") or {}
    top = [{"n": n, "grams": ", ".join(f"{g} ({c:,})" for g, c in grams)} for n, grams in (z.get("top") or {}).items()]
    out = _context(results, top)
    out["vwall_table"] = Table("vwall-table", VWALL_HEADER, [Row([
        Cell(w["order"], cls="num"), Cell(w["possible"], cls="num"), Cell(w["distinct"], cls="num"),
        Cell(w["coverage"], cls="num"),
        Cell(f"{w['unseen']} ({w['unseen_n']} of {w['tokens']})",
             Markup('{} <span class="note">({} of {})</span>').format(w["unseen"], w["unseen_n"], w["tokens"]), cls="num"),
        Cell(w["zeros"], cls="num"), bold(w["mle_ppl"], cls="num"), Cell(w["mle_nonzero"], cls="num")])
        for w in out["vwall"]])
    out["zipf_table"] = Table("zipf-top", ["n", "top 10 in train (count)"],
                              [Row([Cell(t["n"], cls="num"), Cell(t["grams"])]) for t in top], layout="compact")
    return out


def _context(results: dict, top: list) -> dict:
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
    return plots.png_bytes(fig)


SECTION = Section(name="vwall", anchor="vwall", title=TITLE, html_title=HTML_TITLE,
                  md=fragment("vwall.md.j2"), html=fragment("vwall.html.j2"),
                  context=context,
                  plots={"vwall": ("The V^n wall", plots.vwall), "zipf": ("Zipf's rank-frequency plot", zipf_figure)})

