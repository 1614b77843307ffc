"""Section: training curves -- each neural model's perplexity per epoch on its training batches and on
valid, from the history its trainer recorded (``row["history"]``).  Where the two part, the model
overfits; a valid curve still falling at the end says the budget stopped it, not convergence."""
from __future__ import annotations

from typing import Optional

from .. import plots
from ..formatting import fmt_fixed
from .base import Section


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
    return {"training": rows}


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
    return plots._png(fig)


TITLE = "Training curves"
HTML_TITLE = "Training curves"

MD = r"""{% if training %}

Each neural model's perplexity at every validation: on valid, and on its own training batches since the previous one (dropout on, the weights still moving, so it reads higher than a clean pass would).

| model | epochs | validations | best valid ppl | at epoch | last train ppl | at the end |
|---|---:|---:|---:|---:|---:|---|
{% for t in training %}
| {{ t.label }} | {{ t.epochs }} | {{ t.points }} | {{ t.best_valid }} | {{ t.best_epoch }} | {{ t.last_train }} | {{ t.trend }} |
{% endfor %}
{% if plots.training %}

![{{ plots.training.title }}]({{ plots.training.file }})
{% endif %}
{% else %}

No neural model with a recorded history in this run.
{% endif %}

"""

HTML = r"""{% if training %}
<p class="note">Each neural model's perplexity at every validation: on valid, and on its own training batches since the previous one (dropout on, the weights still moving, so it reads higher than a clean pass would).</p>
<table id="training-table">
<thead><tr><th>model</th><th>epochs</th><th>validations</th><th>best valid ppl</th><th>at epoch</th><th>last train ppl</th><th>at the end</th></tr></thead>
<tbody>
{% for t in training %}<tr class="neural"><td>{{ t.label }}</td><td class="num">{{ t.epochs }}</td><td class="num">{{ t.points }}</td><td class="num">{{ t.best_valid }}</td><td class="num">{{ t.best_epoch }}</td><td class="num">{{ t.last_train }}</td><td>{{ t.trend }}</td></tr>
{% endfor %}
</tbody>
</table>
{% if plots.training %}<figure><img id="plot-training" alt="{{ plots.training.title }}" src="data:image/png;base64,{{ plots.training.b64 }}"></figure>{% endif %}
{% else %}<p class="note">No neural model with a recorded history in this run.</p>{% endif %}

"""

SECTION = Section(name="training", anchor="training", title=TITLE, html_title=HTML_TITLE, md=MD, html=HTML,
                  context=context, plots={"training": ("Training curves", figure)})
