"""Section: n -> ∞ -- the ∞-gram indexed on the training text, alone and mixed with the best n-gram
model and each neural model; how long a history the text supports, and where the mixture helps
(the computing is :mod:`reports.experiments.infini_part`)."""
from __future__ import annotations

from markupsafe import Markup

from .. import plots
from ..formatting import fmt_fixed, fmt_ppl, fmt_share
from ..html_tables import Cell, Row, Table
from .base import Section, fragment


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
    from ..formatting import NEGLIGIBLE_WEIGHT, row_label
    from ..undertrained import undertrained

    total = max(1, sum(sec["effective_n_hist"]))
    out = _context(sec, total)
    flagged = undertrained(results)
    for r, raw in zip(out["rows"], sec["rows"]):
        partner = (raw.get("components") or [None, None])[-1]
        r["alone"] = (row_label(results, partner) if partner and max(raw["lambdas"].values()) <= NEGLIGIBLE_WEIGHT
                      else None)
        r["flag"] = f"includes an undertrained model ({flagged[partner]})" if partner in flagged else None

    def mixed(a, b):
        return Cell(f"{a} / {b}", Markup("{} / <b>{}</b>").format(a, b), cls="num")

    def plain(a, b):
        return Cell(f"{a} / {b}", cls="num")

    out["table"] = Table("infini-table", INFINI_HEADER, [Row([
        Cell(r["label"] + (f" (≈ {r['alone']} alone)" if r["alone"] else "") + (f" ⚠ {r['flag']}" if r["flag"] else "")),
        Cell(f"{r['lam_s']} / {r['lam_d']}", cls="num"),
        (plain if r["alone"] else mixed)(r["partner_valid"], r["valid"]),
        (plain if r["alone"] else mixed)(r["partner_test"], r["test"])],
        attrs={"data-undertrained": "1"} if r["flag"] else {}) for r in out["rows"]], cls="sortable")
    # Which mixtures are their partner alone (both weights ≈ 0), said under the table.
    out["alone"] = [r for r in out["rows"] if r["alone"]]
    out["by_n_table"] = Table("infini-by-n", BY_N_HEADER, [Row(
        [Cell(r["n"]), Cell(r["label"])]
        + [Cell(r[k], cls="num") for k in ("tokens", "share", "partner", "mixture", "gain")]) for r in out["by_n"]])
    out["accuracy_table"] = Table("infini-accuracy", ACCURACY_HEADER, [Row(
        [Cell(r["n"])] + [Cell(r[k], cls="num") for k in ("positions", "sampled", "accuracy")])
        for r in out["accuracy"]])
    return {"infini": out}


INFINI_HEADER = ["mixture", "λ sparse / dense", "valid ppl: partner / mixed", "test ppl: partner / mixed"]
BY_N_HEADER = ["effective n", "partner", "tokens", "share", "bits: partner", "bits: with ∞-gram", "gain"]
ACCURACY_HEADER = ["effective n", "test tokens", "sampled", "∞-gram next-token accuracy"]


def _context(sec: dict, total: int) -> dict:
    return {
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


TITLE = 'n → ∞: the ∞-gram'
HTML_TITLE = 'n → ∞: the ∞-gram'


SECTION = Section(name="infini", anchor="infini", title=TITLE, html_title=HTML_TITLE,
                  md=fragment("infini.md.j2"), html=fragment("infini.html.j2"),
                  compute=compute, context=context, plots={"effective_n": ("n → ∞: effective n", plots.effective_n)})
