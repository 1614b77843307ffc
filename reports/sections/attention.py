"""Section: the Transformer's attention on the test passage of the per-token section (interactive in
the HTML report, the last layer's mean in the static figure)."""
from __future__ import annotations

from typing import Optional

from .. import plots
from .base import Section, fragment


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
    """The view, and why its model is undertrained when it is (its near-uniform heatmap is then no finding)."""
    from ..undertrained import undertrained

    att = results.get("attention")
    return {"attention": _attention(att),
            "attention_flag": undertrained(results).get(att.get("model")) if att else None}


TITLE = 'Transformer attention'
HTML_TITLE = 'Transformer attention'


SECTION = Section(name="attention", anchor="attention", title=TITLE, html_title=HTML_TITLE,
                  md=fragment("attention.md.j2"), html=fragment("attention.html.j2"),
                  compute=compute, context=context,
                  plots={"attention": ("Transformer attention (static)", plots.attention_static)})
