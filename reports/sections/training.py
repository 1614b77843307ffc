"""Section: training curves -- each neural model's perplexity per epoch on its training batches and on
valid, from the history its trainer recorded (``row["history"]``).  Where the two part, the model
overfits; a valid curve still falling at the end says the budget stopped it, not convergence."""
from __future__ import annotations

from typing import Optional

from .. import plots
from ..formatting import fmt_fixed
from ..html_tables import Cell, Row, Table
from .base import Section, fragment


def _curves(results: dict) -> list:
    out = []
    for r in results.get("neural", []):
        hist = [h for h in (r.get("history") or []) if h.get("val_ppl") is not None]
        if hist:
            out.append({"id": r["id"], "label": r["label"], "history": hist})
    return out


def context(results: dict) -> dict:
    rows = []
    for c in _curves(results):
        h = c["history"]
        best = min(h, key=lambda x: x["val_ppl"])
        trains = [x.get("train_ppl") for x in h if x.get("train_ppl") is not None]
        falling = len(h) >= 2 and h[-1]["val_ppl"] < h[-2]["val_ppl"]
        rows.append({"label": c["label"], "epochs": fmt_fixed(h[-1]["epoch"], 2), "points": len(h),
                     "best_valid": fmt_fixed(best["val_ppl"], 2), "best_epoch": fmt_fixed(best["epoch"], 2),
                     "last_train": fmt_fixed(trains[-1], 2) if trains else "–",
                     "trend": "still falling at the end: more budget would help" if falling else
                     ("one validation only" if len(h) < 2 else "flat or rising at the end")})
    numbers = ("epochs", "points", "best_valid", "best_epoch", "last_train")
    table = Table("training-table", TRAINING_HEADER, [Row(
        [Cell(t["label"])] + [Cell(t[k], cls="num") for k in numbers] + [Cell(t["trend"])], cls="neural")
        for t in rows], layout="body")
    return {"training": rows, "training_table": table}


TRAINING_HEADER = ["model", "epochs", "validations", "best valid ppl", "at epoch", "last train ppl", "at the end"]


def figure(results: dict) -> Optional[bytes]:
    curves = _curves(results)
    if not curves:
        return None
    fig, ax = plots.plt.subplots(figsize=plots.SIZE)
    for i, c in enumerate(curves):
        colour = plots.FAMILY_COLOURS["neural"] if i == 0 else plots.OKABE_ITO[(i + 4) % len(plots.OKABE_ITO)]
        h = c["history"]
        ax.semilogy([x["epoch"] for x in h], [x["val_ppl"] for x in h], marker=plots.MARKERS[i % len(plots.MARKERS)],
                    color=colour, label=f"{c['label']}: valid")
        tr = [x for x in h if x.get("train_ppl") is not None]
        if tr:
            ax.semilogy([x["epoch"] for x in tr], [x["train_ppl"] for x in tr], linestyle="--",
                        marker=plots.MARKERS[i % len(plots.MARKERS)], markerfacecolor="white", color=colour,
                        label=f"{c['label']}: train (dropout on)")
    ax.set_xlabel("epoch")
    ax.set_ylabel("perplexity (log scale)")
    ax.set_title("Training curves: train and valid perplexity per epoch")
    ax.grid(alpha=0.3, which="both")
    ax.legend(fontsize=7)
    return plots.png_bytes(fig)


TITLE = "Training curves"
HTML_TITLE = "Training curves"


SECTION = Section(name="training", anchor="training", title=TITLE, html_title=HTML_TITLE,
                  md=fragment("training.md.j2"), html=fragment("training.html.j2"),
                  context=context, plots={"training": ("Training curves", figure)})
