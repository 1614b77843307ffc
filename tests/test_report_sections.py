"""The report's sections are objects in one registry (issue 23): a new section is one module and one
registration -- computed in the run, written to results.json, numbered and rendered in both reports."""
from __future__ import annotations

import json

import pytest

from conftest import REPORT, needs

pytestmark = needs(*REPORT)


def test_the_built_in_sections_in_their_order():
    from reports import sections

    assert [s.name for s in sections.SECTIONS] == ["vwall", "orders", "curves", "interpolation", "per_token",
                                                   "attention", "infini"]
    assert sections.numbers()["orders"] == 2 and sections.numbers()["infini"] == 7
    assert set(sections.plot_functions()) == {"vwall", "perplexity_by_order", "count_spectrum", "learning_curves",
                                              "interpolation", "attention", "effective_n"}


def test_a_registered_section_is_computed_numbered_and_rendered(tmp_path, run_cli, monkeypatch):
    from reports import sections
    from reports.sections import Section

    def compute(run):
        test = run.data.dataset.corpus.sentences("test")
        words = [w for sent in test for w in sent]
        run.results["word_lengths"] = {"mean": sum(map(len, words)) / len(words), "words": len(words)}

    def context(results):
        wl = results.get("word_lengths") or {}
        return {"wl": {"mean": f"{wl.get('mean', 0):.3f}", "words": wl.get("words", 0)}}

    extra = Section(name="word_lengths", anchor="word-lengths", title="Word lengths", html_title="Word lengths",
                    md="Mean length {{ wl.mean }} over {{ wl.words }} test words.\n\n",
                    html="<p id=\"wl\">Mean length {{ wl.mean }} over {{ wl.words }} test words.</p>\n\n",
                    compute=compute, context=context)
    monkeypatch.setattr(sections, "SECTIONS", sections.SECTIONS[:2] + (extra,) + sections.SECTIONS[2:])
    out = tmp_path / "run"
    code, _, err = run_cli("compare", "--quick", "--neural", "none", "-o", out)
    assert code == 0, err
    results = json.loads((out / "results.json").read_text())
    wl = results["word_lengths"]
    assert wl["words"] == results["corpus"]["sizes"]["test"]["words"] and 1.0 < wl["mean"] < 20.0
    md = (out / "report.md").read_text()
    html = (out / "report.html").read_text()
    # Numbered third, and the sections after it move down one.
    assert f"## 3. Word lengths\nMean length {wl['mean']:.3f} over {wl['words']} test words." in md
    assert "## 4. Learning curves" in md and "## 8. n → ∞: the ∞-gram" in md
    assert '<h2 id="word-lengths">3. Word lengths</h2>' in html and f"Mean length {wl['mean']:.3f}" in html
    assert "every order is in section 2." in md


@pytest.mark.parametrize("name", ["vwall", "orders", "curves", "interpolation", "per_token", "attention", "infini"])
def test_each_section_renders_from_an_empty_results_file(name):
    """A section's context must not fail on a run that stopped before it (results.json keeps what ran)."""
    from reports import sections

    sec = next(s for s in sections.SECTIONS if s.name == name)
    ctx = sec.context({"settings": {}, "corpus": {"sizes": {}}})
    assert isinstance(ctx, dict) and ctx
