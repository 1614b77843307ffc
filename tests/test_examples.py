"""The committed example reports (docs/examples/*): something to open without hours of training
(issue 18). Each is small, names no machine's folders, and is exactly what `ngramlm report` renders
from its results.json with this version of the toolkit; the HTML works in a browser."""
from __future__ import annotations

import filecmp
import json
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from conftest import REPORT, needs

REPO = Path(__file__).resolve().parent.parent
EXAMPLES = sorted(p for p in (REPO / "docs" / "examples").iterdir() if (p / "results.json").is_file())
CHROMIUM = "/usr/bin/chromium"


def _without_images(path: Path) -> str:
    return re.sub(r"data:image/png;base64,[A-Za-z0-9+/=]+", "data:image/png;base64,...", path.read_text("utf-8"))


def test_there_are_examples_for_words_tokenizations_and_translation():
    names = {p.name for p in EXAMPLES}
    assert {"toy", "ptb-tokenizations", "fra-eng"} <= names


@pytest.mark.parametrize("example", EXAMPLES, ids=lambda p: p.name)
def test_an_example_is_small_and_names_no_machine_folder(example):
    for f in example.rglob("*"):
        if f.is_file():
            assert f.stat().st_size < 1024 * 1024, f
            if f.suffix in (".json", ".md", ".html"):
                text = f.read_text("utf-8")
                for folder in ("/tmp/", "/work/", "/root/", "/home/"):
                    assert folder not in text, f"{f} names {folder}"
    res = json.loads((example / "results.json").read_text())
    assert res["status"] == "complete"


@needs(*REPORT)
@pytest.mark.parametrize("example", EXAMPLES, ids=lambda p: p.name)
def test_an_example_is_what_report_renders_from_its_results(example, tmp_path, run_cli):
    copy = tmp_path / example.name
    copy.mkdir()
    shutil.copy(example / "results.json", copy / "results.json")
    code, _, err = run_cli("report", copy)
    assert code == 0, err
    stale = f"is stale: re-render it with `ngramlm report docs/examples/{example.name}`"
    assert filecmp.cmp(copy / "report.md", example / "report.md", shallow=False), f"{example.name}/report.md {stale}"
    # The figures' PNG bytes depend on the matplotlib build; everything else must be the same.
    assert _without_images(copy / "report.html") == _without_images(example / "report.html"), \
        f"{example.name}/report.html {stale}"
    assert sorted(p.name for p in (copy / "plots").iterdir()) == sorted(p.name for p in (example / "plots").iterdir())
    # The CSV file beside each table: the same files, the same bytes.
    assert sorted(p.name for p in (copy / "tables").iterdir()) == sorted(p.name for p in (example / "tables").iterdir())
    for p in (example / "tables").iterdir():
        assert (copy / "tables" / p.name).read_bytes() == p.read_bytes(), f"{example.name}/tables/{p.name} {stale}"


# Clicks the header of every numeric column of every sortable table and checks the body rows come out in
# ascending order of their numbers (cells without a number last); counts the images that decoded.
SORT_CHECK = r"""<script>
window.addEventListener("load", function () {
  var out = {tables: 0, columns: 0, bad: [], images: 0, decoded: 0};
  var num = function (td) { var v = td.getAttribute("data-v"); var t = (v !== null && v !== "") ? v : td.textContent;
    var m = t.replace(/,/g, "").replace(/[★%\s]/g, " ").trim().match(/^[+-]?\d+(\.\d+)?(e[+-]?\d+)?/i); return m ? parseFloat(m[0]) : null; };
  document.querySelectorAll("table.sortable").forEach(function (t) {
    var head = t.tHead ? t.tHead.rows[0] : t.rows[0];
    var body = function () { return Array.from(t.rows).filter(function (r) { return r !== head && !r.classList.contains("fixed"); }); };
    if (body().length < 2) { return; }
    out.tables += 1;
    Array.from(head.cells).forEach(function (th, c) {
      if (!body().every(function (r) { return r.cells[c] && (num(r.cells[c]) !== null || /^[–-]?$/.test(r.cells[c].textContent.trim())); })) { return; }
      if (body().every(function (r) { return num(r.cells[c]) === null; })) { return; }
      th.click(); out.columns += 1;
      var xs = body().map(function (r) { return num(r.cells[c]); });
      var nums = xs.filter(function (x) { return x !== null; });
      var sorted = nums.every(function (x, i) { return i === 0 || nums[i - 1] <= x; });
      var lastNull = xs.indexOf(null) < 0 || xs.slice(xs.indexOf(null)).every(function (x) { return x === null; });
      if (!(sorted && lastNull)) { out.bad.push(t.id + ":" + th.textContent); }
    });
  });
  document.querySelectorAll("img").forEach(function (im) { out.images += 1; if (im.naturalWidth > 0) { out.decoded += 1; } });
  var pre = document.createElement("pre"); pre.id = "sortcheck"; pre.textContent = JSON.stringify(out);
  document.body.appendChild(pre);
});
</script>"""


@pytest.mark.skipif(not os.access(CHROMIUM, os.X_OK), reason=f"headless Chromium not installed at {CHROMIUM}")
@pytest.mark.parametrize("example", EXAMPLES, ids=lambda p: p.name)
def test_an_example_works_in_headless_chromium(example, tmp_path):
    page = tmp_path / "page"
    shutil.copytree(example, page)
    (page / "report.html").write_text((example / "report.html").read_text("utf-8").replace(
        "</body>", SORT_CHECK + "</body>"), "utf-8")
    dom = subprocess.run([CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
                          f"--user-data-dir={tmp_path / 'profile'}", "--virtual-time-budget=5000",
                          "--enable-logging=stderr", "--v=0", "--dump-dom",
                          (page / "report.html").resolve().as_uri()], capture_output=True, text=True, timeout=90)
    assert dom.returncode == 0, dom.stderr[-2000:]
    assert "Uncaught" not in dom.stderr and "CONSOLE" not in dom.stderr, dom.stderr[-2000:]  # no console errors
    html = dom.stdout
    check = json.loads(re.search(r'<pre id="sortcheck">(.*?)</pre>', html, flags=re.S).group(1))
    assert check["tables"] >= 2 and check["columns"] >= 4 and check["bad"] == [], check
    assert check["decoded"] == check["images"]  # every plot present and decoded
    if (json.loads((example / "results.json").read_text()).get("format") or "").endswith("parallel"):
        assert 'id="s2s-selftest" data-result="pass"' in html
        return
    n_figures = html.count("<figure>")
    assert n_figures >= 5 and check["images"] == n_figures and f"figures decoded {n_figures}/{n_figures}" in html
    assert 'id="selftest" data-result="pass"' in html, html[html.find('id="selftest"') - 20:][:600]


def test_the_translation_example_has_bits_per_byte_and_intervals_for_every_model():
    res = json.loads((REPO / "docs" / "examples" / "fra-eng" / "results.json").read_text())
    n_bytes = res["target_test_bytes"]
    assert n_bytes > res["corpus"]["sizes"]["test"]["tgt_tokens"]  # the French lines' bytes, not tokens
    finite = [r for r in res["rows"] if r["test"]["ppl"] is not None]  # MLE's higher orders are infinite
    assert len(finite) >= len(res["rows"]) - 4
    for r in finite:
        t = r["test"]
        log2p = t.get("log2prob", t.get("log2_prob"))
        assert r["test_bits_per_byte"] == pytest.approx(-log2p / n_bytes)
        lo, hi = r["test_ci"]["ppl"]
        assert lo < t["ppl"] < hi
    for b in res["bleu"]:
        assert b["ci"][0] < b["bleu"] < b["ci"][1]



# ---------------------------------------------------------------------------- examples as fresh as the code
# Subtrees that hold data rather than the code's fields: a corpus's own facts (the toy truth), the neural
# package's configurations, a budget's one kind (minutes or epochs).
_DATA_SUBTREES = (".corpus.toy_config", ".corpus.truth", ".settings.model_config", ".settings.train_config",
                  ".budget.")


def _key_paths(obj, prefix: str = "", leaves=None, dicts=None) -> tuple:
    """Every key path of a results.json (lists merged as ``[]``; a dict keyed by data -- orders, ids --
    as ``*``), and the paths whose value is a dict somewhere."""
    leaves = set() if leaves is None else leaves
    dicts = set() if dicts is None else dicts
    if isinstance(obj, dict):
        dicts.add(prefix)
        data_keyed = bool(obj) and all(re.fullmatch(r"[\w.:@+()/-]*[0-9][\w.:@+()/-]*", k) for k in obj)
        for k, v in obj.items():
            path = f"{prefix}.{'*' if data_keyed else k}"
            leaves.add(path)
            _key_paths(v, path, leaves, dicts)
    elif isinstance(obj, list):
        for v in obj:
            _key_paths(v, prefix + "[]", leaves, dicts)
    return leaves, dicts


def missing_fields(current: dict, example: dict) -> list:
    """The fields ``current`` (a results.json the current code wrote) has and ``example`` lacks: a path
    counts where its parent is an object in the example (a section the example did not run, null or
    absent by its settings, is not asked for its fields), its data subtrees aside."""
    have, _ = _key_paths(current)
    got, objects = _key_paths(example)
    need = {p for p in have if p.rsplit(".", 1)[0] in objects and not any(s in p for s in _DATA_SUBTREES)}
    if "transformer" not in (example.get("settings") or {}).get("neural", []):
        need.discard(".attention")  # the attention view needs a Transformer
    return sorted(need - got)


def _headings(md: str) -> list:
    return re.findall(r"^## (?:\d+\. )?(.+)$", md, flags=re.M)


@pytest.fixture(scope="module")
def current_run(tmp_path_factory):
    """A quick toy run of the current code: the sections and fields it writes."""
    out = tmp_path_factory.mktemp("fresh") / "quick"
    proc = subprocess.run([str(REPO / ".venv" / "bin" / "ngramlm") if (REPO / ".venv").is_dir() else "ngramlm",
                           "compare", "--quick", "--threads", "1", "--out", str(out)],
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-2000:]
    return json.loads((out / "results.json").read_text()), (out / "report.md").read_text("utf-8")


@needs(*REPORT)
@pytest.mark.parametrize("example", [p for p in EXAMPLES if p.name != "fra-eng"], ids=lambda p: p.name)
def test_an_example_has_every_section_and_field_the_current_code_writes(example, current_run):
    results, md = current_run
    res = json.loads((example / "results.json").read_text())
    missing = missing_fields(results, res)
    assert not missing, f"{example.name}/results.json lacks {missing[:12]}: re-run it (docs/reports.md, its settings)"
    assert _headings((example / "report.md").read_text("utf-8")) == _headings(md)


def test_missing_fields_finds_what_an_older_run_did_not_write():
    new = {"timing": {"total_seconds": 1.0, "stages": {"load": 1.0}}, "ngram": [{"id": "a", "aka": "x"}],
           "learning_curves": {"series": [{"points": [{"steps": 3, "fraction": 1.0}]}]}, "attention": None,
           "settings": {"neural": ["lstm"]}}
    old = {"timing": {"total_seconds": 1.0}, "ngram": [{"id": "a"}],
           "learning_curves": {"series": [{"points": [{"fraction": 1.0}]}]}, "settings": {"neural": ["lstm"]}}
    assert missing_fields(new, old) == [".learning_curves.series[].points[].steps", ".ngram[].aka", ".timing.stages"]


PARALLEL_FIELDS = ("format", "version", "status", "created", "settings", "corpus", "target_test_bytes", "rows", "bleu",
                   "attention", "examples", "timing")


def test_the_translation_example_has_the_fields_its_page_reads():
    """The parallel run is too long for a test; its page's fields, and the settings the current code records."""
    res = json.loads((REPO / "docs" / "examples" / "fra-eng" / "results.json").read_text())
    assert set(PARALLEL_FIELDS) <= set(res)
    from reports.experiments.settings import CompareSettings

    assert set(CompareSettings(corpus="fra-eng").to_dict()) <= set(res["settings"]), \
        "fra-eng/results.json records fewer settings than the current code writes: re-run it"
