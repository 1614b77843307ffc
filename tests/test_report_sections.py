"""The report's sections are objects in one registry (issue 23): a new section is one module and one
registration -- computed in the run, written to results.json, numbered and rendered in both reports."""
from __future__ import annotations

import json
import random

import pytest

from conftest import REPORT, needs

pytestmark = needs(*REPORT)


def test_the_built_in_sections_in_their_order():
    from reports import sections

    assert [s.name for s in sections.SECTIONS] == ["vwall", "orders", "curves", "interpolation", "per_token",
                                                   "attention", "infini", "tokenizations", "training", "ladder",
                                                   "pruning"]
    assert sections.numbers()["orders"] == 2 and sections.numbers()["infini"] == 7
    assert set(sections.plot_functions()) == {"vwall", "perplexity_by_order", "count_spectrum", "learning_curves",
                                              "interpolation", "attention", "effective_n", "tokenizations",
                                              "zipf", "zipf_tokenizations", "training", "ladder", "pruning"}


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


@pytest.mark.parametrize("name", ["vwall", "orders", "curves", "interpolation", "per_token", "attention", "infini",
                                  "tokenizations", "pruning"])
def test_each_section_renders_from_an_empty_results_file(name):
    """A section's context must not fail on a run that stopped before it (results.json keeps what ran)."""
    from reports import sections

    sec = next(s for s in sections.SECTIONS if s.name == name)
    ctx = sec.context({"settings": {}, "corpus": {"sizes": {}}})
    assert isinstance(ctx, dict) and ctx


@pytest.mark.slow
def test_the_pruning_section_is_a_perplexity_against_size_curve(tmp_path, run_cli):
    """compare prunes the best back-off model to 50, 10 and 1 % of its n-grams: each at most that many,
    perplexity rising and the KenLM trie shrinking as it goes; --no-prune-curve leaves it out."""
    out = tmp_path / "run"
    code, _, err = run_cli("compare", "--quick", "--neural", "none", "-o", out)
    assert code == 0, err
    res = json.loads((out / "results.json").read_text())
    sec = res["pruning"]
    rows = sec["rows"]
    assert [r["fraction"] for r in rows] == [1.0, 0.5, 0.1, 0.01]
    full = rows[0]["ngrams"]
    best = min((r for r in res["ngram"] if r["model"] == sec["smoother"] and r["order"] == sec["order"]),
               key=lambda r: r["valid"]["ppl"])
    assert rows[0]["test"]["ppl"] == pytest.approx(best["test"]["ppl"], rel=1e-12)  # the unpruned model is the grid's
    for a, b in zip(rows, rows[1:]):
        assert b["ngrams"] <= b["fraction"] * full and b["ngrams"] < a["ngrams"]
        assert b["test"]["ppl"] > a["test"]["ppl"] and b["kenlm_trie_q8_bytes"] < a["kenlm_trie_q8_bytes"]
    md = (out / "report.md").read_text()
    assert "Perplexity against size: pruning" in md and "![Perplexity against size" in md
    assert (out / "plots" / "pruning.png").stat().st_size > 10_000
    out2 = tmp_path / "off"
    code, _, err = run_cli("compare", "--quick", "--neural", "none", "--no-prune-curve", "-o", out2)
    assert code == 0 and json.loads((out2 / "results.json").read_text())["pruning"] is None
    assert "Not run: it needs" in (out2 / "report.md").read_text()


def _market_text(path, *, seed: int, n_lines: int):
    """``n_lines`` seeded lines of 4 to 12 words from a 12-word vocabulary: a corpus every tokenization reads."""
    r = random.Random(seed)
    words = "the market said company shares report investors trading stock prices rose fell".split()
    lines = (" ".join(r.choice(words) for _ in range(r.randint(4, 12))) for _ in range(n_lines))
    path.write_text("\n".join(lines) + "\n")
    return path


def test_the_tokenizations_section_compares_in_bits_per_byte(tmp_path, run_cli):
    pytest.importorskip("tokenizers")
    f = _market_text(tmp_path / "t.txt", seed=2, n_lines=400)
    out = tmp_path / "run"
    code, _, err = run_cli("compare", f, "--neural", "none", "--max-order", "3", "--smoothers", "wb,mkn",
                           "--curve-smoother", "wb", "--curve", "100%", "--tokenizers", "word,char,bpe:40", "-o", out)
    assert code == 0, err
    res = json.loads((out / "results.json").read_text())
    rows = {x["tokenizer"]: x for x in res["tokenizations"]["rows"]}
    assert list(rows) == ["word", "char", "bpe:40"]
    assert len({x["test_bytes"] for x in rows.values()}) == 1 == len({res["corpus"]["sizes"]["test"]["bytes"]})
    assert rows["char"]["n_types"] < rows["bpe:40"]["n_types"] and rows["char"]["test_tokens"] > rows["word"]["test_tokens"]
    # The word row is the main grid's smoother on the same data: the same bits per byte at every order.
    for p in rows["word"]["orders"]:
        grid = next(x for x in res["ngram"] if x["id"] == f"wb-{p['order']}")
        assert p["test_bits_per_byte"] == pytest.approx(grid["test_normalised"]["bits_per_byte"], rel=1e-12)
    best = rows["char"]
    valid = [p["valid_bits_per_byte"] for p in best["orders"]]
    assert best["best_order"] == 1 + valid.index(min(valid))
    md = (out / "report.md").read_text()
    assert "## 8. Tokenizations: bits per byte against n" in md and "![Bits per byte and the V^n wall" in md
    assert (out / "plots" / "tokenizations.png").stat().st_size > 10_000
    html = (out / "report.html").read_text()
    assert 'id="tokenizations-table"' in html and 'id="plot-tokenizations"' in html


def test_every_neural_family_on_the_chosen_tokenizations_ranked_by_bits_per_byte(tmp_path, run_cli):
    """--neural trains on each tokenization of --neural-tokenizers (the corpus's own: the table's model), and
    the ranking table orders every family on every tokenization by bits per byte with an interval."""
    import math

    pytest.importorskip("torch")
    f = _market_text(tmp_path / "t.txt", seed=3, n_lines=300)
    out = tmp_path / "run"
    code, _, err = run_cli("compare", f, "--neural", "lstm", "--neural-size", "tiny", "--neural-epochs", "1",
                           "--max-order", "2", "--smoothers", "mkn", "--curve", "none", "--tokenizers", "word,char",
                           "--neural-tokenizers", "char", "-o", out)
    assert code == 0, err
    res = json.loads((out / "results.json").read_text())
    assert res["learning_curves"] is None  # --curve none
    rows = {x["tokenizer"]: x for x in res["tokenizations"]["rows"]}
    assert rows["word"]["neural"] == [] and [n["model"] for n in rows["char"]["neural"]] == ["lstm"]
    char_lstm = rows["char"]["neural"][0]
    assert char_lstm["id"] == "char/lstm" and char_lstm["epochs"] >= 1
    lo, hi = char_lstm["ci"]["bits_per_byte"]
    assert lo < char_lstm["test_bits_per_byte"] < hi
    # bits per byte = test tokens x bits per token / the text's bytes (the same bytes as every tokenization)
    bits = rows["char"]["test_tokens"] * math.log2(char_lstm["test_ppl"])
    assert char_lstm["test_bits_per_byte"] == pytest.approx(bits / res["corpus"]["sizes"]["test"]["bytes"])
    md = (out / "report.md").read_text()
    ranking = md.split("ranked by test bits per byte")[1].split("\n\n")[1]
    values = [float(line.split("|")[4].strip(" *")) for line in ranking.splitlines()[2:]]
    assert len(values) == 3 and values == sorted(values)  # MKN on word and char, the LSTM on char
    assert "| char | LSTM (tiny) |" in ranking
    code, _, err = run_cli("compare", f, "--tokenizers", "word", "--neural-tokenizers", "char", "-o", tmp_path / "x")
    assert code == 2 and "not one of --tokenizers" in err and not (tmp_path / "x").exists()


def test_tokenizers_are_checked_before_anything_runs(tmp_path, run_cli):
    code, _, err = run_cli("compare", "timemachine", "--tokenizers", "word,wordpiece:10", "-o", tmp_path / "x")
    assert code == 2 and "unknown tokenizer 'wordpiece:10'" in err and not (tmp_path / "x").exists()
    code, _, err = run_cli("compare", "--tokenizers", "char", "-o", tmp_path / "y")
    assert code == 2 and "does not apply to the toy corpus" in err


@pytest.mark.slow
def test_a_learning_curve_never_contradicts_the_table_silently(tmp_path, run_cli):
    """The neural curve's 100 % point trains under the curve's per-point budget; when that is another
    run than the results table's model (a minutes budget: a quarter of it), the report says so with both
    numbers and the figure marks the table's model.  Before, PTB's LSTM read 192 on the curve and 89.4
    in the table with nothing to say why."""
    from reports.render.report import build_context, render

    out = tmp_path / "run"
    code, _, err = run_cli("compare", "--quick", "--neural", "lstm", "-o", out)
    assert code == 0, err
    res = json.loads((out / "results.json").read_text())
    series = next(s for s in res["learning_curves"]["series"] if s["family"] == "neural")
    full = series["points"][-1]
    row = next(r for r in res["neural"] if r["id"] == "lstm")
    assert full["key"] == row["key"] and build_context(res)["curve_notes"] == []  # one budget: the same model
    # As a minutes budget makes it: the 100 % point another run, with a worse perplexity.
    full.update(key="another-run", budget={"minutes": 0.15}, test=dict(row["test"], ppl=row["test"]["ppl"] * 2))
    row["budget"] = {"minutes": 0.6}
    notes = build_context(res)["curve_notes"]
    assert len(notes) == 1 and "separate run" in notes[0] and "0.15 min" in notes[0] and "0.6 min" in notes[0]
    assert f"{row['test']['ppl'] * 2:.2f}" in notes[0] and f"{row['test']['ppl']:.2f}" in notes[0]
    render(out, res)
    assert notes[0] in (out / "report.md").read_text() and 'class="note curve-note"' in (out / "report.html").read_text()


@pytest.mark.slow
def test_a_results_file_of_an_earlier_version_still_renders(tmp_path, run_cli):
    """`ngramlm report DIR` re-renders results.json files written before bytes were counted."""
    out = tmp_path / "old"
    code, _, err = run_cli("compare", "--quick", "--neural", "none", "-o", out)
    assert code == 0, err
    res = json.loads((out / "results.json").read_text())
    for split in res["corpus"]["sizes"].values():
        del split["bytes"]
    (out / "results.json").write_text(json.dumps(res))
    code, _, err = run_cli("report", out)
    assert code == 0, err
    md = (out / "report.md").read_text()
    assert "## 1. The V^n wall" in md and "Here C = " in md and "Here B = " not in md


@pytest.mark.slow
def test_an_undertrained_neural_row_is_flagged_not_reported_as_a_result(tmp_path, run_cli):
    """The README's main job once trained its Transformer for one batch on shared cores: test ppl 2,908
    against the unigram's 301, shown as a result, the self-test saying "pass"."""
    from reports.render.report import build_context, render, undertrained

    out = tmp_path / "run"
    code, _, err = run_cli("compare", "--quick", "--neural", "lstm", "-o", out)
    assert code == 0, err
    res = json.loads((out / "results.json").read_text())
    lstm = res["neural"][0]
    unigram = min(r["valid"]["ppl"] for r in res["ngram"] if r["order"] == 1 and r["valid"]["ppl"] is not None)
    assert lstm["valid"]["ppl"] < unigram and undertrained(res) == {}
    lstm.update(epochs=0.004, stopped="time budget")  # one batch of a budget that ran out
    why = undertrained(res)["lstm"]
    assert "stopped after 0.00 epochs" in why
    lstm.update(epochs=1.0, valid=dict(lstm["valid"], ppl=unigram * 9))
    assert "worse than the unigram model" in undertrained(res)["lstm"]
    ctx = build_context(res)
    row = next(m for m in ctx["summary"] if m["id"] == "lstm")
    assert row["undertrained"] and row["note"].startswith("⚠ undertrained")
    render(out, res)
    assert "**Warning: undertrained neural models**" in (out / "report.md").read_text()
    assert 'data-undertrained="1"' in (out / "report.html").read_text()
    # An adopted checkpoint (trained elsewhere) records no epochs of this run: never flagged for that.
    lstm.update(stopped="adopted", epochs=0.5, valid=dict(lstm["valid"], ppl=unigram / 2))
    assert undertrained(res) == {}
