"""Section: linear interpolation of the best n-gram model with each neural model, the weight tuned on
valid: ``p = lam p_ngram + (1 - lam) p_neural``."""
from __future__ import annotations

from .. import plots
from ..experiments import analysis
from ..formatting import fmt_fixed, fmt_ppl
from .base import Section


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


def context(results: dict) -> dict:
    return {"interp": [{
        "label": r["label"], "lam": fmt_fixed(r["lambda"], 3), "ng": r["components"][0], "nn": r["components"][1],
        "valid": fmt_ppl(r["valid"]), "test": fmt_ppl(r["test"]),
        "ng_valid": _component(results, r["components"][0], "valid"),
        "nn_valid": _component(results, r["components"][1], "valid"),
        "ng_test": _component(results, r["components"][0], "test"),
        "nn_test": _component(results, r["components"][1], "test"),
    } for r in results.get("interpolation", [])]}


TITLE = 'Interpolation: p = λ p_ngram + (1 − λ) p_neural'
HTML_TITLE = 'Interpolation: p = λ p<sub>ngram</sub> + (1 − λ) p<sub>neural</sub>'

MD = r"""{% if interp %}

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

"""

HTML = r"""{% if interp %}
<table id="interp-table">
<tr><th>n-gram</th><th>neural</th><th>λ (tuned on valid)</th><th>valid ppl: n-gram / neural / mixed</th><th>test ppl: n-gram / neural / mixed</th></tr>
{% for i in interp %}
<tr><td>{{ i.ng }}</td><td>{{ i.nn }}</td><td class="num">{{ i.lam }}</td><td class="num">{{ i.ng_valid }} / {{ i.nn_valid }} / <b>{{ i.valid }}</b></td><td class="num">{{ i.ng_test }} / {{ i.nn_test }} / <b>{{ i.test }}</b></td></tr>
{% endfor %}
</table>
{% if plots.interpolation %}<figure><img id="plot-interpolation" alt="{{ plots.interpolation.title }}" src="data:image/png;base64,{{ plots.interpolation.b64 }}"></figure>{% endif %}
{% else %}<p>No interpolation: it needs a neural model and an n-gram model without zero probabilities.</p>{% endif %}

"""

SECTION = Section(name="interpolation", anchor="interpolation", title=TITLE, html_title=HTML_TITLE, md=MD, html=HTML,
                  compute=compute, context=context,
                  plots={"interpolation": ("Interpolation weight", plots.interpolation)})
