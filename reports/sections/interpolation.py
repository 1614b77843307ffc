"""Section: linear interpolation of the best n-gram model with each neural model, the weight tuned on
valid: ``p = lam p_ngram + (1 - lam) p_neural``."""
from __future__ import annotations

from markupsafe import Markup

from .. import plots
from ..experiments import analysis
from ..formatting import NEGLIGIBLE_WEIGHT, fmt_fixed, fmt_ppl, row_label
from ..html_tables import Cell, Row, Table
from .base import Section, fragment


def compute(run) -> None:
    run.results["interpolation"] = []
    ng = run.best("ngram")
    if ng is None:
        return
    for nn in run.results["neural"]:
        if nn["id"] not in run.arrays:
            continue
        row = analysis.interpolate(ng, nn, run.arrays[ng["id"]], run.arrays[nn["id"]], run.data.sizes)
        run.arrays[row["id"]] = {split: analysis.mixture_log2p(row["lambda"], run.arrays[ng["id"]][split],
                                                                run.arrays[nn["id"]][split])
                                 for split in ("valid", "test")}
        run.results["interpolation"].append(row)
        run.log(f"  {row['id']}: lambda {row['lambda']:.3f}, valid {row['valid']['ppl']:.2f}, "
                f"test {row['test']['ppl']:.2f}")


def _component(results: dict, rid: str, split: str) -> str:
    for family in ("ngram", "neural"):
        for r in results.get(family, []):
            if r["id"] == rid:
                return fmt_ppl(r.get(split))
    return "–"


INTERP_HEADER = ["n-gram", "neural", "λ (tuned on valid)", "valid ppl: n-gram / neural / mixed",
                 "test ppl: n-gram / neural / mixed"]


def context(results: dict) -> dict:
    rows = _rows(results)

    def mixed(a, b, c, alone):
        if alone:  # the mixture is one of its parts: nothing to bold
            return Cell(f"{a} / {b} / {c}", cls="num")
        return Cell(f"{a} / {b} / {c}", Markup("{} / {} / <b>{}</b>").format(a, b, c), cls="num")

    table = Table("interp-table", INTERP_HEADER, [Row([
        Cell(i["ng"]), Cell(i["nn"] + (f" ⚠ {i['flag']}" if i["flag"] else ""),
                            Markup('{} <span class="note">⚠ {}</span>').format(i["nn"], i["flag"]) if i["flag"] else None),
        Cell(i["lam"] + (f" (= {i['alone']} alone)" if i["alone"] else ""), cls="num"),
        mixed(i["ng_valid"], i["nn_valid"], i["valid"], i["alone"]),
        mixed(i["ng_test"], i["nn_test"], i["test"], i["alone"])],
        attrs={"data-undertrained": "1"} if i["flag"] else {}) for i in rows], cls="sortable")
    return {"interp": rows, "interp_table": table}


def _alone(results: dict, r: dict):
    """The part a mixture reduces to when the other's weight is negligible (λ ≈ 0 or ≈ 1), else None."""
    if r["lambda"] <= NEGLIGIBLE_WEIGHT:
        return row_label(results, r["components"][1])
    if r["lambda"] >= 1 - NEGLIGIBLE_WEIGHT:
        return row_label(results, r["components"][0])
    return None


def _rows(results: dict) -> list:
    from ..undertrained import undertrained

    flagged = undertrained(results)
    return [{
        "label": r["label"], "lam": fmt_fixed(r["lambda"], 3), "alone": _alone(results, r),
        "flag": flagged.get(r["components"][1]) and f"undertrained: {flagged[r['components'][1]]}",
        "ng": row_label(results, r["components"][0]), "nn": row_label(results, r["components"][1]),
        "valid": fmt_ppl(r["valid"]), "test": fmt_ppl(r["test"]),
        "ng_valid": _component(results, r["components"][0], "valid"),
        "nn_valid": _component(results, r["components"][1], "valid"),
        "ng_test": _component(results, r["components"][0], "test"),
        "nn_test": _component(results, r["components"][1], "test"),
    } for r in results.get("interpolation", [])]


TITLE = 'Interpolation: p = λ p_ngram + (1 − λ) p_neural'
HTML_TITLE = 'Interpolation: p = λ p<sub>ngram</sub> + (1 − λ) p<sub>neural</sub>'


SECTION = Section(name="interpolation", anchor="interpolation", title=TITLE, html_title=HTML_TITLE,
                  md=fragment("interpolation.md.j2"), html=fragment("interpolation.html.j2"),
                  compute=compute, context=context,
                  plots={"interpolation": ("Interpolation weight", plots.interpolation)})
