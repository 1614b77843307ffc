"""Each reader-facing defect of the comparison report that issue 18 lists, one test each: every one of
these fails on the report as it was (empty header, unexplained stripes, an all-"–" column, a nine-line
note in a cell, "2.1 min" beside "115.3 s", Python's None in Settings, the self-test shown to readers,
a page wider than 820 px, no sorting, no CSV, no best mark, no intervals; plots with a grey neural
line, a linear interpolation axis, overlapping smoothers, one-colour partners without error bars, an
attention map without a colour scale).

They render the committed toy example's results.json (no training), changed where a case needs it.
"""
from __future__ import annotations

import copy
import csv
import json
import os
import re
import subprocess
from pathlib import Path

import pytest

from conftest import REPORT, needs

pytestmark = needs(*REPORT)

REPO = Path(__file__).resolve().parent.parent
TOY = REPO / "docs" / "examples" / "toy" / "results.json"
CHROMIUM = "/usr/bin/chromium"


@pytest.fixture(scope="module")
def toy() -> dict:
    return json.loads(TOY.read_text("utf-8"))


def _render(results: dict, out: Path) -> tuple[str, str]:
    from reports.render.report import render

    out.mkdir(parents=True, exist_ok=True)
    (out / "results.json").write_text(json.dumps(results), "utf-8")
    paths = render(out, results)
    return paths["md"].read_text("utf-8"), paths["html"].read_text("utf-8")


def _md_table(md: str, first_header: str) -> list:
    lines = md.splitlines()
    start = next(i for i, x in enumerate(lines) if x.startswith(f"| {first_header} |"))
    rows = []
    for x in lines[start:]:
        if not x.startswith("|"):
            break
        rows.append([c.strip() for c in x.strip().strip("|").split("|")])
    return [rows[0]] + rows[2:]  # without the alignment row


def _html_table(html: str, table_id: str) -> str:
    return html[html.index(f'<table id="{table_id}"'):].split("</table>")[0]


# ---------------------------------------------------------------------------- the results table
def test_every_column_of_the_results_table_has_a_header(toy, tmp_path):
    md, html = _render(toy, tmp_path / "r")
    header = _md_table(md, "model")[0]
    assert all(header), header  # the old table had an empty header over "trained"/"cached"
    ths = re.findall(r"<th[^>]*>(.*?)</th>", _html_table(html, "results-table"), flags=re.S)
    assert ths and all(re.sub(r"<[^>]+>", "", th).strip() for th in ths)


@pytest.mark.slow
def test_the_family_colours_have_a_legend(toy, tmp_path):
    _, html = _render(toy, tmp_path / "r")
    for fam, name in (("ngram", "n-gram"), ("neural", "neural"), ("interpolated", "interpolated"), ("infini", "∞-gram")):
        assert f'<span class="chip {fam}">{name}</span>' in html
        assert f'<tr class="{fam}"' in _html_table(html, "results-table")
    md, _ = _render(toy, tmp_path / "r2")
    assert [r[1] for r in _md_table(md, "model")[1:]].count("neural") == 2  # the family is a column in Markdown


@pytest.mark.slow
def test_above_the_floor_appears_only_where_there_is_a_floor(toy, tmp_path):
    md, html = _render(toy, tmp_path / "toy")
    assert "above the floor" in _md_table(md, "model")[0]
    ptb_like = copy.deepcopy(toy)
    ptb_like["corpus"]["truth"] = None
    for fam in ("ngram", "neural", "interpolation"):
        for r in ptb_like.get(fam) or []:
            r.pop("above_floor", None)
    md, html = _render(ptb_like, tmp_path / "ptb")
    assert "above the floor" not in _md_table(md, "model")[0]  # a column of "–" only, before
    assert "above the floor" not in _html_table(html, "results-table")


def test_a_long_note_is_a_footnote_not_a_nine_line_cell(toy, tmp_path):
    res = copy.deepcopy(toy)
    katz = next(r for r in res["ngram"] if r["model"] == "katz" and r["order"] == 2)
    katz["note"] = ("fallback discounts (Katz: no discount) used: " + "the count-of-counts are not monotone; " * 8).strip()
    md, html = _render(res, tmp_path / "r")
    row = next(r for r in _md_table(md, "model") if r[0] == "Katz 2-gram")
    n = int(row[-1].strip("[]").split("][")[0])  # the cell holds the notes' numbers only (this note's first)
    assert len(" | ".join(row)) < 200
    assert f"- [{n}] {katz['note']}" in md
    assert f'<li id="note-{n}">{katz["note"]}</li>' in html


def test_one_time_unit_per_column(toy, tmp_path):
    res = copy.deepcopy(toy)
    res["neural"][0]["train_seconds"] = 130.0  # two minutes: the column turns to minutes, every row with it
    res["neural"][1]["train_seconds"] = 115.3
    md, _ = _render(res, tmp_path / "r")
    table = _md_table(md, "model")
    col = table[0].index("training (min)")
    cells = [r[col] for r in table[1:] if r[col] != "–"]
    assert cells and all(c.endswith(" min") for c in cells), cells  # was "2.2 min" beside "115.3 s"
    assert "2.17 min" in cells and "1.92 min" in cells


def test_settings_read_as_options_not_python_values(toy, tmp_path):
    md, html = _render(toy, tmp_path / "r")
    settings = md.split("## Settings")[1]
    for python in ("None", "[]", "['", "True", "False"):
        assert python not in settings, python
    assert "| neural | `lstm, transformer` |" in settings and "| tokenizers | `none` |" in settings
    assert "<td>valid file</td><td><code>default</code></td>" in html


def test_the_self_test_is_not_shown_to_readers(toy, tmp_path):
    _, html = _render(toy, tmp_path / "r")
    assert re.search(r'<p id="selftest"[^>]*\bhidden\b', html)
    assert "#selftest { display: none; }" in html


def test_best_values_are_marked_and_intervals_shown(toy, tmp_path):
    md, html = _render(toy, tmp_path / "r")
    table = _md_table(md, "model")
    col = table[0].index("test ppl")
    # a mixture that is one of its parts alone (weight ≈ 0, said in its note) is no candidate for the mark
    notes = {n.split("] ", 1)[0].lstrip("- ["): n for n in md.splitlines() if re.match(r"- \[\d+\] ", n)}
    alone = {r[0] for r in table[1:] if any("alone" in notes.get(k, "") for k in re.findall(r"\d+", r[-1]))}
    shown = [(float(r[col].strip("*")), r[col].startswith("**")) for r in table[1:]
             if r[col].strip("*")[0].isdigit() and r[0] not in alone]
    assert sum(b for _, b in shown) == 1 and min(shown)[1]  # exactly the lowest is bold (outside the others' CI)
    assert html.count("★") >= 4
    ci = table[0].index("test ppl 95 % CI")
    lstm = next(r for r in table if r[0] == "LSTM (small)")
    lo, hi = (float(x) for x in lstm[ci].split("–"))
    assert lo < float(lstm[col].strip("*")) < hi


def test_a_csv_beside_each_table(toy, tmp_path):
    _, html = _render(toy, tmp_path / "r")
    ids = re.findall(r'<table id="([^"]+)"', html)
    assert {"results-table", "vwall-table", "order-table", "settings-table"} <= set(ids)
    for tid in ids:
        path = tmp_path / "r" / "tables" / f"{tid}.csv"
        assert path.is_file(), tid
        assert f'<a href="tables/{tid}.csv" download>CSV</a>' in html
    rows = list(csv.reader((tmp_path / "r" / "tables" / "results-table.csv").open(encoding="utf-8")))
    header = rows[0]
    lstm = next(r for r in rows if r[0] == "LSTM (small)")
    # raw numbers (data-v), not "68.35 ★"
    test = json.loads(TOY.read_text())["neural"][0]["test"]["ppl"]
    assert float(lstm[header.index("test ppl 95 % CI")]) == pytest.approx(test)


def test_a_table_writes_its_html_and_its_csv_from_the_same_cells():
    """One row list gives both: the CSV holds the raw number where a cell has one (not "112.28 ★"), else
    the text a reader sees (markup dropped, a line break a space); the HTML escapes the text."""
    from markupsafe import Markup

    from reports.html_tables import Cell, Row, Table

    t = Table("t", ["model", Cell("test ppl 95 % CI", Markup('test ppl<br><span class="ci">95 % CI</span>'))], [
        Row([Cell("a <b> & c"), Cell("112.28 ★ 100.1–120.2", Markup("112.28 ★<br>100.1–120.2"), value=112.2831,
                                       cls="num best")], cls="ngram"),
        Row([Cell("d"), Cell("∞", value="", cls="num")], attrs={"data-undertrained": "1"})], layout="body")
    assert t.csv() == "model,test ppl 95 % CI\na <b> & c,112.2831\nd,∞\n"
    assert str(t.html()) == (
        '<table id="t">\n<thead><tr><th>model</th><th>test ppl<br><span class="ci">95 % CI</span></th></tr></thead>\n'
        '<tbody>\n<tr class="ngram"><td>a &lt;b&gt; &amp; c</td><td class="num best" data-v="112.2831">112.28 ★<br>'
        '100.1–120.2</td></tr>\n<tr data-undertrained="1"><td>d</td><td class="num" data-v="">∞</td></tr>\n'
        '</tbody>\n</table>\n<p class="csv"><a href="tables/t.csv" download>CSV</a></p>')
    assert "csv" not in str(Table(None, ["x"], [Row([Cell("1")])]).html())  # no id: layout, no CSV


# ---------------------------------------------------------------------------- the figures
def _lines(ax):
    return [ln for ln in ax.get_lines() if ln.get_label() and not ln.get_label().startswith("_")]


def test_figures_use_a_colour_blind_palette_and_family_colours(toy):
    import matplotlib.colors as mc
    import matplotlib.pyplot as plt

    from reports import plots

    allowed = {mc.to_hex(c) for c in plots.OKABE_ITO + plots.SMOOTHER_COLOURS} | {"#000000"}
    for make in (plots.vwall_figure, plots.learning_curves_figure, plots.interpolation_figure):
        other = make(toy)
        try:
            for ax in other.axes:
                for ln in _lines(ax):
                    assert mc.to_hex(ln.get_color()) in allowed, (make.__name__, ln.get_label(), ln.get_color())
        finally:
            plt.close("all")
    fig = plots.perplexity_by_order_figure(toy)
    try:
        left = fig.axes[0]
        neural = [ln for ln in _lines(left) if ln.get_label() in {r["label"] for r in toy["neural"]}]
        assert len(neural) == 2
        # neural baselines in the neural family's blue (they were near-identical greys)
        assert {mc.to_hex(ln.get_color()) for ln in neural} == {plots.FAMILY_COLOURS["neural"].lower()}
        assert len({ln.get_linestyle() for ln in neural}) == 2
        for ax in fig.axes:
            for ln in _lines(ax):
                assert mc.to_hex(ln.get_color()) in allowed, (ln.get_label(), ln.get_color())
    finally:
        plt.close("all")


def test_perplexity_against_order_zooms_where_the_smoothers_overlap(toy):
    import matplotlib.pyplot as plt

    from reports import plots

    fig = plots.perplexity_by_order_figure(toy)
    try:
        assert len(fig.axes) == 2
        zoom = fig.axes[1]
        labels = {ln.get_label(): ln for ln in _lines(zoom)}
        assert {"Kneser-Ney", "modified Kneser-Ney"} <= set(labels) and "Laplace (add-1)" not in labels
        lo, hi = zoom.get_ylim()
        assert hi < 200 < 2400  # Laplace's 2,400 no longer sets the scale (the left panel keeps it)
        kn, mkn = labels["Kneser-Ney"], labels["modified Kneser-Ney"]
        assert list(kn.get_xdata()) != list(mkn.get_xdata())  # side by side: one cannot hide the other
        assert kn.get_marker() != mkn.get_marker() and kn.get_color() != mkn.get_color()
    finally:
        plt.close("all")


def test_the_interpolation_plot_has_a_log_axis(toy):
    import matplotlib.pyplot as plt

    from reports import plots

    fig = plots.interpolation_figure(toy)
    try:
        assert fig.axes[0].get_yscale() == "log"
    finally:
        plt.close("all")


def test_the_infini_figure_separates_histogram_and_partners_with_error_bars(toy):
    import matplotlib.pyplot as plt

    from reports import plots

    res = copy.deepcopy(toy)
    for r in res["infini"]["by_n"]:  # results of this version carry the standard errors
        r.setdefault("se_partner", 0.05)
        r.setdefault("se_mixture", 0.05)
    fig = plots.effective_n_figure(res)
    try:
        hist, lines = fig.axes[0], fig.axes[1]
        assert len(fig.axes) == 2 and hist.patches and not _lines(hist)
        containers = lines.containers
        assert len(containers) == 2 * len({r["partner"] for r in res["infini"]["by_n"]})
        assert all(c.has_yerr for c in containers)
        styles = {}
        for c in containers:
            line = c.lines[0]
            styles.setdefault((line.get_color(), line.get_marker()), set()).add(line.get_linestyle())
        # a colour and marker per partner, the colour its family's (n-gram vermillion, neural blue)
        assert len(styles) == len({r["partner"] for r in res["infini"]["by_n"]})
        assert {colour for colour, _ in styles} <= {plots.FAMILY_COLOURS["ngram"], plots.FAMILY_COLOURS["neural"]}
        assert all(s == {"--", "-"} for s in styles.values())  # partner dashed, mixture solid
    finally:
        plt.close("all")


def test_the_attention_map_has_a_colour_scale_and_says_what_its_axes_are(toy):
    import matplotlib.pyplot as plt

    from reports import plots

    fig = plots.attention_static_figure(toy)
    try:
        assert len(fig.axes) == 2  # the map and its colour bar
        ax = fig.axes[0]
        assert "query" in ax.get_ylabel() and "teacher-forced" in ax.get_ylabel() and "key" in ax.get_xlabel()
        assert "predicted" not in ax.get_ylabel()
    finally:
        plt.close("all")


def test_training_curves_and_zipf_are_drawn(toy, tmp_path):
    md, html = _render(toy, tmp_path / "r")
    assert 'id="plot-training"' in html and 'id="plot-zipf"' in html
    assert "## 9. Training curves" in md and "| LSTM (small) |" in md.split("## 9. Training curves")[1]


# ---------------------------------------------------------------------------- in a browser
HARNESS = r"""<script>
window.addEventListener("load", function () {
  var out = {};
  var t = document.getElementById("results-table");
  var th = Array.from(t.tHead.rows[0].cells).find(function (c) { return /^test ppl/.test(c.textContent); });
  var col = Array.from(t.tHead.rows[0].cells).indexOf(th);
  var read = function () { return Array.from(t.tBodies[0].rows).map(function (r) {
    var v = r.cells[col].getAttribute("data-v"); return v === "" ? null : +v; }); };
  out.before = read();
  th.click(); out.asc = read(); out.arrow = th.getAttribute("aria-sort");
  th.click(); out.desc = read();
  out.width = document.documentElement.scrollWidth;
  out.csv = document.querySelectorAll("p.csv a").length;
  out.tables = document.querySelectorAll("table[id]").length;
  var pre = document.createElement("pre"); pre.id = "harness"; pre.textContent = JSON.stringify(out);
  document.body.appendChild(pre);
});
</script>"""


@pytest.mark.skipif(not os.access(CHROMIUM, os.X_OK), reason=f"headless Chromium not installed at {CHROMIUM}")
def test_in_a_browser_tables_sort_and_the_page_fits_820_px(toy, tmp_path):
    _, html = _render(toy, tmp_path / "r")
    page = tmp_path / "r" / "harness.html"
    page.write_text(html.replace("</body>", HARNESS + "</body>"), "utf-8")
    dom = subprocess.run([CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
                          f"--user-data-dir={tmp_path / 'profile'}", "--window-size=820,1000", "--hide-scrollbars",
                          "--virtual-time-budget=5000", "--enable-logging=stderr", "--v=0", "--dump-dom",
                          page.as_uri()], capture_output=True, text=True, timeout=90)
    assert dom.returncode == 0, dom.stderr[-2000:]
    assert "Uncaught" not in dom.stderr, dom.stderr[-2000:]  # no console errors
    out = json.loads(re.search(r'<pre id="harness">(.*?)</pre>', dom.stdout, flags=re.S).group(1))
    finite = lambda xs: [x for x in xs if x is not None]  # noqa: E731
    assert finite(out["asc"]) == sorted(finite(out["before"])) and out["arrow"] == "ascending"
    assert out["asc"][-1] is None  # "∞" (no number) sorts last
    assert finite(out["desc"]) == sorted(finite(out["before"]), reverse=True)
    assert out["width"] <= 820  # wide tables scroll inside their box; the page itself does not
    assert out["csv"] == out["tables"] > 5
