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


def test_there_are_examples_for_words_and_tokenizations():
    names = {p.name for p in EXAMPLES}
    assert {"toy", "ptb-tokenizations"} <= names


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


@pytest.mark.skipif(not os.access(CHROMIUM, os.X_OK), reason=f"headless Chromium not installed at {CHROMIUM}")
@pytest.mark.parametrize("example", EXAMPLES, ids=lambda p: p.name)
def test_an_example_works_in_headless_chromium(example, tmp_path):
    dom = subprocess.run([CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
                          f"--user-data-dir={tmp_path / 'profile'}", "--virtual-time-budget=5000", "--dump-dom",
                          (example / "report.html").resolve().as_uri()], capture_output=True, text=True, timeout=90)
    assert dom.returncode == 0, dom.stderr[-2000:]
    html = dom.stdout
    n_figures = html.count("<figure>")
    assert n_figures >= 5 and f"figures decoded {n_figures}/{n_figures}" in html
    assert 'id="selftest" data-result="pass"' in html, html[html.find('id="selftest"') - 20:][:600]
