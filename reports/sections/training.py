"""Section: training curves -- each neural model's perplexity per epoch on its training batches and on
valid, from the history its trainer recorded (``row["history"]``).  Where the two part, the model
overfits; a valid curve still falling at the end says the budget stopped it, not convergence."""
from __future__ import annotations

import math
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
            out.append({"id": r["id"], "label": r["label"], "history": hist,
                        "full_valid": (r.get("valid") or {}).get("ppl")})
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
                     "full_valid": "–" if c["full_valid"] is None else fmt_fixed(c["full_valid"], 2),
                     "last_train": fmt_fixed(trains[-1], 2) if trains else "–",
                     "trend": "still falling at the end: more budget would help" if falling else
                     ("one validation only" if len(h) < 2 else "flat or rising at the end")})
    numbers = ("epochs", "points", "best_valid", "best_epoch", "full_valid", "last_train")
    table = Table("training-table", TRAINING_HEADER, [Row(
        [Cell(t["label"])] + [Cell(t[k], cls="num") for k in numbers] + [Cell(t["trend"])], cls="neural")
        for t in rows], cls="sortable", layout="body")
    differ = [t for t in rows if t["full_valid"] not in ("–", t["best_valid"])]
    return {"training": rows, "training_table": table, "training_differ": differ, "valid_passes": VALID_PASSES}


TRAINING_HEADER = ["model", "epochs", "validations", "best valid ppl (training pass)", "at epoch",
                   "valid ppl (full pass, results table)", "last train ppl", "at the end"]
# Why the two valid columns differ (COMPARE_TRAIN_PRESETS in neural/config.py).
VALID_PASSES = ("The two valid perplexities are two passes over the same text: during training, validation reads "
                "it as 8 rows in parallel, each row starting without the text before it (cheap, for choosing the "
                "best weights); the results table scores those best weights once more with every token's full "
                "history, which is the number every other section uses.")


def figure(results: dict) -> Optional[bytes]:
    return plots.png_bytes(training_figure(results))


def training_figure(results: dict):
    """Valid (solid, filled) and train (dotted, hollow) perplexity per epoch, every model in the neural
    family's colour (told apart by marker and dash), each curve's last value written at its end."""
    curves = _curves(results)
    if not curves:
        return None
    fig, ax = plots.plt.subplots(figsize=plots.SIZE)
    colour = plots.FAMILY_COLOURS["neural"]
    ends = []
    for i, c in enumerate(curves):
        marker = plots.MARKERS[i % len(plots.MARKERS)]
        h = c["history"]
        ax.semilogy([x["epoch"] for x in h], [x["val_ppl"] for x in h], marker=marker,
                    linestyle=plots.DASHES[(2 * i) % len(plots.DASHES)], color=colour, label=f"{c['label']}: valid")
        ends.append((h[-1]["epoch"], h[-1]["val_ppl"]))
        tr = [x for x in h if x.get("train_ppl") is not None]
        if tr:
            ax.semilogy([x["epoch"] for x in tr], [x["train_ppl"] for x in tr],
                        linestyle=plots.DASHES[(2 * i + 3) % len(plots.DASHES)], marker=marker,
                        markerfacecolor="white", color=colour, label=f"{c['label']}: train (dropout on)")
            ends.append((tr[-1]["epoch"], tr[-1]["train_ppl"]))
    # Room around the data, so no end value sits on the axes' edge, and each end value written beside it.
    ys = [y for _, y in ends] + [x["val_ppl"] for c in curves for x in c["history"]]
    ys += [x["train_ppl"] for c in curves for x in c["history"] if x.get("train_ppl") is not None]
    lo, hi = min(ys), max(ys)
    ax.set_ylim(lo / 1.15, hi * 1.15)
    xs = [x["epoch"] for c in curves for x in c["history"]]
    span = max(xs) - min(xs) or 1.0
    ax.set_xlim(min(xs) - 0.05 * span, max(xs) + 0.18 * span)
    # End values at one epoch and close in value are nudged apart, so their numbers do not overlap.
    ends.sort(key=lambda e: (round(e[0], 1), e[1]))
    for j, (x, y) in enumerate(ends):
        near = [e for e in ends if abs(e[0] - x) < 0.05 * span and abs(math.log(e[1] / y)) < 0.08]
        k = near.index((x, y)) - (len(near) - 1) / 2
        ax.annotate(f"{y:.1f}", (x, y), textcoords="offset points", xytext=(6, 9 * k), va="center", fontsize=8,
                    color=colour)
    ax.set_xlabel("epoch")
    ax.set_ylabel("perplexity (log scale)")
    ax.set_title("Training curves: train and valid perplexity per epoch")
    ax.grid(alpha=0.3, which="both")
    ax.legend(fontsize=8)
    return fig


TITLE = "Training curves"
HTML_TITLE = "Training curves"


SECTION = Section(name="training", anchor="training", title=TITLE, html_title=HTML_TITLE,
                  md=fragment("training.md.j2"), html=fragment("training.html.j2"),
                  context=context, plots={"training": ("Training curves", figure)})
