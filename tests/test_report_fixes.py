"""The report defects a reader found (one family one colour, noise shown as a result, unflagged undertrained
models, display bugs, a misleading tokenizations ranking, time told wrong, docs that did not hold, the
fra-eng page): each checked on what the current code renders from the committed examples' results.json,
the figures measured from their matplotlib objects (reports.plots.DRAWN) and the pages in headless Chromium."""
from __future__ import annotations

import copy
import json
import os
import re
import shutil
import subprocess
from pathlib import Path
from types import SimpleNamespace

import pytest

from conftest import REPORT, needs

pytestmark = needs(*REPORT)

REPO = Path(__file__).resolve().parent.parent
EXAMPLES = REPO / "docs" / "examples"
CHROMIUM = "/usr/bin/chromium"


def _results(name: str) -> dict:
    return json.loads((EXAMPLES / name / "results.json").read_text("utf-8"))


@pytest.fixture(scope="module")
def toy() -> dict:
    return _results("toy")


@pytest.fixture(scope="module")
def ptb() -> dict:
    return _results("ptb-tokenizations")


def _facts(fn, results):
    """Draw one figure through ``fn`` (PNG bytes, as the report does) and return what it drew."""
    from reports import plots

    plots.DRAWN.clear()
    png = fn(results)
    assert png is not None
    assert len(plots.DRAWN) == 1
    return next(iter(plots.DRAWN.values()))


def _all_figures(results) -> dict:
    from reports import plots, sections

    plots.DRAWN.clear()
    for fn in sections.plot_functions().values():
        fn(results)
    return dict(plots.DRAWN)


def _flag_transformer(results: dict) -> dict:
    """The toy run with its Transformer stopped before one epoch: an undertrained model."""
    res = copy.deepcopy(results)
    for r in res["neural"]:
        if r["id"] == "transformer":
            r["epochs"] = 0.4
    return res


# ------------------------------------------------------------------------------------ 1. colours
def test_the_interpolation_figure_draws_mixtures_in_their_family_colour_with_display_labels(toy):
    from reports import plots

    f = _facts(plots.interpolation, toy)
    lines = [ln for ln in f["axes"][0]["lines"] if not ln["label"].startswith("_")]
    assert lines
    for ln in lines:
        assert ln["colour"] == plots.FAMILY_COLOURS["interpolated"].lower(), ln
        assert "mkn-2" not in ln["label"] and "lstm" not in ln["label"], ln["label"]
    assert any("MKN 2-gram + LSTM (small)" in ln["label"] for ln in lines)


def test_training_curves_keep_every_neural_model_in_the_neural_colour(toy):
    from reports import plots
    from reports.sections import training

    f = _facts(training.figure, toy)
    colours = {ln["colour"] for ln in f["axes"][0]["lines"] if not ln["label"].startswith("_")}
    assert colours == {plots.FAMILY_COLOURS["neural"].lower()}


def test_the_infini_panel_gives_each_partner_its_family_colour(toy):
    from reports import plots

    f = _facts(plots.effective_n, toy)
    right = f["axes"][1]
    by_label = {ln["label"]: ln["colour"] for ln in right["lines"] if not ln["label"].startswith("_")}
    ngram = [c for lab, c in by_label.items() if "Kneser-Ney" in lab]
    neural = [c for lab, c in by_label.items() if "LSTM" in lab or "Transformer" in lab]
    assert ngram and set(ngram) == {plots.FAMILY_COLOURS["ngram"].lower()}
    assert neural and set(neural) == {plots.FAMILY_COLOURS["neural"].lower()}


def test_no_smoother_line_takes_another_familys_colour(toy):
    from reports import plots

    f = _facts(plots.perplexity_by_order, toy)
    others = {plots.FAMILY_COLOURS[k].lower() for k in ("neural", "interpolated", "infini")}
    for ln in f["axes"][0]["lines"] + f["axes"][1]["lines"]:
        lab = ln["label"]
        if lab.startswith("∞-gram"):
            assert ln["colour"] == plots.FAMILY_COLOURS["infini"].lower(), lab
        elif lab.startswith("_") or "LSTM" in lab or "Transformer" in lab or "floor" in lab:
            continue
        else:
            assert ln["colour"] not in others, lab


# ------------------------------------------------------------------------------------ 2. noise
def test_best_or_tie():
    from reports.significance import best_or_tie

    v = best_or_tie([("a", 10.0, (9.0, 11.0)), ("b", 12.0, None), ("c", 10.5, None)])
    assert v.best is None and v.top == "a" and v.tied == ["c"]
    v = best_or_tie([("a", 10.0, (9.0, 11.0)), ("b", 12.0, None)])
    assert v.best == "a" and not v.tied
    v = best_or_tie([("a", 20.0, (18.0, 22.0)), ("b", 19.0, None)], higher_is_better=True)
    assert v.best is None and v.tied == ["b"]


def test_a_mixture_at_lambda_zero_is_said_to_be_the_model_alone_and_gets_no_star(toy):
    from reports.render.report import build_context

    ctx = build_context(toy)
    rows = {m["label"]: m for m in ctx["summary"]}
    assert not rows["∞-gram + LSTM (small)"]["best"]  # 67.70 against the LSTM's 67.71 (λ ≈ 0): noise
    assert "alone" in rows["∞-gram + LSTM (small)"]["note"]
    assert "alone" in rows["MKN 2-gram + LSTM (small)"]["note"]
    interp = next(b for b in ctx["top"]["best"] if b["family"] == "interpolated")
    assert "alone" in interp["caveat"]
    assert ctx["best_note"].startswith(("★ marks the lowest test perplexity, LSTM (small)", "No single best"))


def test_a_difference_inside_the_interval_is_a_tie_not_a_star(toy):
    from reports.render.report import build_context

    res = copy.deepcopy(toy)
    lstm = next(r for r in res["neural"] if r["id"] == "lstm")
    tr = next(r for r in res["neural"] if r["id"] == "transformer")
    tr["test"] = dict(lstm["test"], ppl=lstm["test"]["ppl"] * 1.001)
    ctx = build_context(res)
    assert not any(m["best"] for m in ctx["summary"])
    assert ctx["best_note"].startswith("No single best") and "Transformer (small)" in ctx["best_note"]


def test_the_two_valid_perplexities_of_a_neural_model_are_explained(toy):
    from reports.sections import training

    ctx = training.context(toy)
    lstm = next(t for t in ctx["training"] if t["label"].startswith("LSTM"))
    row = next(r for r in toy["neural"] if r["id"] == "lstm")
    assert lstm["full_valid"] == f"{row['valid']['ppl']:.2f}"
    if lstm["full_valid"] != lstm["best_valid"]:
        assert lstm in ctx["training_differ"] and "full history" in ctx["valid_passes"]


def test_the_bleu_grid_keeps_its_rule_through_the_shared_helper():
    from reports.render.parallel import _mark_best

    grid = [{"decoder": "greedy", "alpha": "-", "v": [15.0, 14.9], "ci": ["13.0–17.0", "12.9–16.9"]}]
    assert "No single best" in _mark_best(grid) and grid[0]["best"] == [False, False]
    grid = [{"decoder": "greedy", "alpha": "-", "v": [15.0, 10.0], "ci": ["14.0–16.0", "9.0–11.0"]}]
    assert "★" in _mark_best(grid) and grid[0]["best"] == [True, False]


# ------------------------------------------------------------------------------------ 3. undertrained
def test_an_undertrained_models_heatmap_and_mixtures_carry_the_flag(toy):
    from reports import plots
    from reports.render.report import build_context
    from reports.sections import attention, interpolation

    res = _flag_transformer(toy)
    f = _facts(plots.attention_static, res)
    assert "undertrained" in f["axes"][0]["title"]
    assert attention.context(res)["attention_flag"]
    ctx = build_context(res)
    mixed = [m for m in ctx["summary"] if "Transformer" in m["label"] and m["family"] != "neural"]
    assert mixed and all(m["undertrained"] and "undertrained" in m["note"] for m in mixed)
    rows = interpolation.context(res)["interp"]
    assert any(r["flag"] for r in rows if "Transformer" in r["nn"])
    f = _facts(plots.interpolation, res)
    assert any("undertrained" in ln["label"] for ln in f["axes"][0]["lines"] if "Transformer" in ln["label"])


# ------------------------------------------------------------------------------------ 4. display
def test_ngrams_of_words_keep_their_spaces():
    from reports.experiments.ngram_part import spelled_ngram

    words = SimpleNamespace(tokenizer=SimpleNamespace(kind="whitespace"))
    chars = SimpleNamespace(tokenizer=SimpleNamespace(kind="char"))
    assert spelled_ngram(["$", "N"], words) == "$ N"
    assert spelled_ngram(["$", "N", "a"], words) == "$ N a"
    assert spelled_ngram(["$", "N"], SimpleNamespace(tokenizer=None)) == "$ N"
    assert spelled_ngram(["▁", "t", "h"], chars) == "▁th"


def test_the_ptb_example_shows_word_ngrams_with_spaces(ptb):
    """results.json, report.md, report.html and the CSV: "$ N", never "$N"."""
    word = next(r for r in ptb["tokenizations"]["rows"] if r["tokenizer"] == "word")
    for n, grams in word["zipf"]["top"].items():
        for g, _ in grams:
            assert len(g.split(" ")) == int(n), g
    for n, grams in ptb["zipf"]["top"].items():
        for g, _ in grams:
            assert len(g.split(" ")) == int(n), g
    for f in ("report.md", "report.html", "tables/tokenizations-top.csv"):
        text = (EXAMPLES / "ptb-tokenizations" / f).read_text("utf-8")
        assert "$N" not in text, f


def test_every_figure_reads_at_820_px(toy, ptb):
    """Legends >= 9 px and ticks >= 8 px on the page, two labelled ticks or more on every log axis,
    no legend over a curve."""
    from reports import plots

    for results in (toy, ptb):
        for title, f in _all_figures(results).items():
            for ax in f["axes"]:
                if ax["legend"]:
                    assert min(ax["legend"]["px"]) >= plots.MIN_LEGEND_PX - 0.05, (title, ax["legend"]["px"])
                    assert ax["legend"]["overlaps"] == 0, (title, ax["title"])
                assert not ax["tick_px"] or min(ax["tick_px"]) >= plots.MIN_TICK_PX - 0.05, (title, ax["title"])
                for scale, ticks in ((ax["xscale"], ax["xticks"]), (ax["yscale"], ax["yticks"])):
                    if scale == "log" and ax["lines"]:
                        assert len(ticks) >= 2, (title, ax["title"], ticks)


def test_a_zero_count_is_not_drawn_on_the_log_axis(toy):
    from reports import plots

    res = copy.deepcopy(toy)
    res["vwall"][0]["mle_zero_probs"] = 0
    f = _facts(plots.vwall, res)
    line = next(ln for ln in f["axes"][0]["lines"] if ln["label"].startswith("test tokens with MLE probability 0"))
    assert 1 not in line["x"] and "not drawn" in line["label"]
    assert all(y > 0 for y in line["y"])


def test_training_curve_end_values_lie_inside_their_axis_and_are_written(toy):
    from reports.sections import training

    f = _facts(training.figure, toy)
    ax = f["axes"][0]
    lo, hi = ax["ylim"]
    for ln in ax["lines"]:
        if ln["label"].startswith("_") or not ln["y"]:
            continue
        y = ln["y"][-1]
        assert lo * 1.05 < y < hi / 1.05, (ln["label"], y, lo, hi)
        assert f"{y:.1f}" in ax["texts"]


def test_attention_tick_labels_do_not_overlap(toy):
    from reports import plots

    f = _facts(plots.attention_static, toy)
    boxes = sorted(f["axes"][0]["ytick_boxes"], key=lambda b: b[1])
    for a, b in zip(boxes, boxes[1:]):
        assert a[1] + a[3] <= b[1] + 0.5, (a, b)


# ------------------------------------------------------------------------------------ 5. tokenizations
def test_a_tokenization_still_improving_at_the_largest_order_is_said_to_be_a_bound(ptb):
    from reports.sections import tokenizations

    ctx = tokenizations.context(ptb)["tokenizations"]
    assert any(c.startswith("char") for c in ctx["capped_notes"])
    char = next(x for x in ctx["ranking"] if x["tokenizer"] == "char")
    assert "a bound" in char["model"]
    # a level curve (the word model gains 0.1 % at its last order) is not flagged
    assert not any(c.startswith("whitespace") for c in ctx["capped_notes"])


# ------------------------------------------------------------------------------------ 6. time
def test_learning_curve_points_show_their_steps_and_flag_fewer(toy):
    from reports import plots
    from reports.sections import curves

    res = copy.deepcopy(toy)
    series = next(s for s in res["learning_curves"]["series"] if s["family"] == "neural")
    for p, steps in zip(series["points"], (300, 310, 305, 320, 150)):
        p["steps"] = steps
    assert plots.fewer_steps(series["points"]) == [False, False, False, False, True]
    ctx = curves.context(res)
    steps = next(c for c in ctx["curves"] if c["label"] == "steps trained")
    assert steps["cells"][-1] == "150 ⚠" and steps["cells"][0] == "300"
    assert any("fewer than the 30 % point's 320" in n for n in ctx["curve_notes"])
    f = _facts(plots.learning_curves, res)
    assert "150 steps ⚠" in f["axes"][0]["texts"]


def test_the_header_total_counts_every_stage(toy):
    from reports.render.report import build_context, fmt_stages

    timing = {"total_seconds": 320.7, "trained": 3, "cached": 0,
              "stages": {"load": 30.0, "ngram": 100.0, "neural": 150.0, "pruning": 20.0, "render": 20.7}}
    text = fmt_stages(timing)
    assert "pruning" in text and "the report" in text and "reading the corpus" in text
    res = dict(toy, timing=timing)
    assert build_context(res)["timing"]["total"] == "5.3 min"


# ------------------------------------------------------------------------------------ 7. sortable tables
@pytest.mark.parametrize("name", ["toy", "ptb-tokenizations"])
def test_every_table_of_an_example_sorts(name):
    html = (EXAMPLES / name / "report.html").read_text("utf-8")
    nosort = re.findall(r'<table id="([^"]+)" class="[^"]*nosort', html)
    assert set(nosort) <= {"ladder-tokens"}, nosort
    for tid in ("settings-table", "curve-table") if name == "toy" else ("settings-table",):
        assert re.search(rf'<table id="{tid}" class="sortable"', html), tid


# ------------------------------------------------------------------------------------ 8. fra-eng page
def test_the_parallel_page_states_settings_time_and_only_the_maps_it_has():
    from reports.render.parallel import _tables, build_context

    res = _results("fra-eng")
    ctx = build_context(res)
    assert all(g["alpha"] == "-" for g in ctx["bleu_grid"] if g["decoder"].startswith("greedy"))
    assert ctx["settings_shown"]["neural size"] == "small" and ctx["run"]["total"] != "–"
    units = {r["seconds"].split()[-1] for r in ctx["rows"] if r["seconds"] != "–"}
    assert len(units) == 1, units
    md = (EXAMPLES / "fra-eng" / "report.md").read_text("utf-8")
    html = (EXAMPLES / "fra-eng" / "report.html").read_text("utf-8")
    assert "Settings:" in md and "size preset" in md and 'id="settings-table"' in html
    kinds = {a.get("kind", "cross") for a in res.get("attention") or []}
    if kinds == {"cross"}:
        for text in (md, html):
            assert "Transformer" not in text.split("Attention")[-1].split("<script>")[0]
    assert _tables(ctx)["settings_table"].rows


# ------------------------------------------------------------------------------------ page measurements
MEASURE = r"""<script>
window.addEventListener("load", function () { setTimeout(function () {
  var out = {width: document.documentElement.scrollWidth, cells: [], labels: [], axes: 0, clipped: []};
  document.querySelectorAll("#s2s-heatmaps svg").forEach(function (svg) {
    var r = svg.querySelector("rect.cell"); if (r) { out.cells.push(+r.getAttribute("width")); }
    var box = svg.getBoundingClientRect();
    svg.querySelectorAll("text").forEach(function (t) {
      var b = t.getBoundingClientRect();
      if (b.left < box.left - 1 || b.right > box.right + 1 || b.top < box.top - 1 || b.bottom > box.bottom + 1) {
        out.clipped.push(t.textContent); }
      if (t.classList.contains("axis")) { out.axes += 1; }
      else { out.labels.push(parseFloat(getComputedStyle(t).fontSize)); } });
  });
  var pre = document.createElement("pre"); pre.id = "measure"; pre.textContent = JSON.stringify(out);
  document.body.appendChild(pre); }, 300); });
</script>"""


def _measure(example: Path, tmp_path: Path, width: int = 820) -> dict:
    page = tmp_path / "page"
    shutil.copytree(example, page)
    (page / "report.html").write_text((example / "report.html").read_text("utf-8").replace(
        "</body>", MEASURE + "</body>"), "utf-8")
    dom = subprocess.run([CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
                          f"--user-data-dir={tmp_path / 'profile'}", f"--window-size={width},3000",
                          "--virtual-time-budget=5000", "--dump-dom", (page / "report.html").resolve().as_uri()],
                         capture_output=True, text=True, timeout=120)
    assert dom.returncode == 0, dom.stderr[-2000:]
    return json.loads(re.search(r'<pre id="measure">(.*?)</pre>', dom.stdout, flags=re.S).group(1))


@pytest.mark.skipif(not os.access(CHROMIUM, os.X_OK), reason=f"headless Chromium not installed at {CHROMIUM}")
@pytest.mark.parametrize("name", ["toy", "ptb-tokenizations", "fra-eng"])
def test_an_example_page_fits_an_820_px_window(name, tmp_path):
    m = _measure(EXAMPLES / name, tmp_path)
    assert m["width"] <= 820, m["width"]
    if name == "fra-eng":  # readable heatmaps: cells of 36 px or more, 13 px labels, both axes titled
        assert m["cells"] and min(m["cells"]) >= 36, m["cells"]
        assert m["labels"] and min(m["labels"]) >= 13, m["labels"]
        assert m["axes"] == 2 * len(m["cells"])
        assert m["clipped"] == [], m["clipped"]  # no label or axis title runs out of its heatmap's box


def test_the_passages_mixture_at_lambda_zero_is_named_as_the_model_alone(toy):
    from reports.sections import per_token

    res = copy.deepcopy(toy)
    for m in res["interpolation"]:
        m["lambda"] = 0.0
    totals = per_token.context(res)["passage"]["totals"]
    mixed = [t for t in totals if t["id"] in {m["id"] for m in res["interpolation"]}]
    assert mixed and all("alone" in t["label"] for t in mixed)
