"""Section: the Transformer's attention on the test passage of the per-token section (interactive in
the HTML report, the last layer's mean in the static figure)."""
from __future__ import annotations

from typing import Optional

from .. import plots
from .base import Section


def compute(run) -> None:
    transformer, passage = run.transformer(), run.results.get("passage")
    if transformer is None or transformer["id"] not in run.checkpoints or not passage:
        return
    from ..experiments.neural_part import attention_view

    a = passage["start_token"]
    ids = run.data["test"].ids[a:a + len(passage["tokens"])]
    run.results["attention"] = {"model": transformer["id"], "label": transformer["label"],
                                **attention_view(run.checkpoints[transformer["id"]], ids, passage["tokens"])}


def _attention(att: Optional[dict]) -> Optional[dict]:
    """The attention view with its first position labelled ``<s>``: the model reads the passage
    after the sentence-start symbol (stored as ``</s>``, the id that also ends sentences)."""
    if not att:
        return att
    return {**att, "tokens": plots.attention_labels(att)}




def context(results: dict) -> dict:
    return {"attention": _attention(results.get("attention"))}


TITLE = 'Transformer attention'
HTML_TITLE = 'Transformer attention'

MD = r"""{% if attention %}

{{ attention.label }}: {{ attention.n_layers }} layer(s) × {{ attention.n_heads }} heads on the passage above. The static figure shows the last layer's mean over heads; report.html has the interactive view (hover a token, change the softmax temperature).
{% if plots.attention %}

![{{ plots.attention.title }}]({{ plots.attention.file }})
{% endif %}
{% else %}

No Transformer in this run.
{% endif %}

"""

HTML = r"""{% if attention %}
<p class="note">{{ attention.label }}, {{ attention.n_layers }} layer(s) × {{ attention.n_heads }} heads, reading the passage above after the start symbol &lt;s&gt;. Hover a token (or a heatmap row) to see where it attends; the slider divides the attention scores by a temperature before the softmax (re-normalised from the stored log-weights): below 1 sharpens, above 1 flattens.</p>
<div class="att-controls">
<label>layer <select id="att-layer"></select></label>
<label>head <select id="att-head"></select></label>
<label>softmax temperature <input type="range" id="att-temp" min="-2" max="2" step="0.05" value="0"> <span id="att-temp-val">1.00</span></label>
</div>
<div id="att-tokens"></div>
<div id="att-info"></div>
<p class="att-scale note">colour: attention weight <span class="scale-bar" style="background: linear-gradient(to right, rgba(33,102,172,0), rgba(33,102,172,1));"></span> 0 → 1 (each row sums to 1)</p>
<svg id="att-heatmap" xmlns="http://www.w3.org/2000/svg"></svg>
<script type="application/json" id="attention-data">{{ attention|tojson_safe }}</script>
{% else %}<p>No Transformer in this run.</p>{% endif %}

"""

SECTION = Section(name="attention", anchor="attention", title=TITLE, html_title=HTML_TITLE, md=MD, html=HTML,
                  compute=compute, context=context,
                  plots={"attention": ("Transformer attention (static)", plots.attention_static)})
