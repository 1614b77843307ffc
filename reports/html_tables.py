"""What every table of an HTML report gets: sorting by a click on a column's header, and a CSV file
beside the report with the same rows (``tables/<id>.csv``), linked under the table.

The CSVs are read back from the rendered HTML, so they hold exactly the rows a reader sees; a cell
with a ``data-v`` attribute (the raw number behind "112.28 ★" or "1.52k") gives that value instead of
its text, so a spreadsheet gets numbers.
"""
from __future__ import annotations

import csv
import io
import re
from html.parser import HTMLParser
from pathlib import Path

import markupsafe

from corpora.textio import atomic_write_text

FOLDER = "tables"

# Sorting: a click on a header sorts the body rows by that column, a second click reverses.  Numbers
# sort as numbers (data-v first, else the text with its thousands separators, %, ★ and units
# dropped; ∞ is the largest); a cell with neither ("–") goes last either way.  Rows of a <thead> or
# with class "fixed" (the learning curves' token counts) stay where they are.
SORT_JS = markupsafe.Markup(r"""
(function () {
  "use strict";
  function key(td) {
    if (!td) { return null; }
    var v = td.getAttribute("data-v");
    var t = (v !== null && v !== "") ? v : td.textContent;
    t = t.replace(/,/g, "").replace(/[★%\s]/g, " ").trim();  // 1,234 is one number
    if (/^∞/.test(t)) { return Infinity; }
    var m = t.match(/^[+-]?\d+(\.\d+)?(e[+-]?\d+)?/i);
    if (m) { return parseFloat(m[0]); }
    return t === "" || t === "–" || t === "-" ? null : t.toLowerCase();
  }
  function headRow(table) {
    if (table.tHead) { return table.tHead.rows[0]; }
    var first = table.rows[0];  // a table written without <thead>: its first row, when all header cells
    return first && Array.from(first.cells).every(function (c) { return c.tagName === "TH"; }) ? first : null;
  }
  function sortBy(table, col, th) {
    var head = headRow(table), body = head.parentNode.tagName === "THEAD" ? table.tBodies[0] : head.parentNode;
    var all = Array.from(body.rows).filter(function (r) { return r !== head; });
    var rows = all.filter(function (r) { return !r.classList.contains("fixed"); });
    var fixed = all.filter(function (r) { return r.classList.contains("fixed"); });
    var dir = th.getAttribute("aria-sort") === "ascending" ? -1 : 1;
    rows.sort(function (a, b) {
      var x = key(a.cells[col]), y = key(b.cells[col]);
      if (x === null && y === null) { return 0; }
      if (x === null) { return 1; }
      if (y === null) { return -1; }
      if (typeof x === typeof y) { return x < y ? -dir : x > y ? dir : 0; }
      return typeof x === "number" ? -1 : 1;
    });
    Array.from(table.querySelectorAll("th[aria-sort]")).forEach(function (h) {
      h.removeAttribute("aria-sort"); h.removeAttribute("data-arrow"); });
    th.setAttribute("aria-sort", dir === 1 ? "ascending" : "descending");
    th.setAttribute("data-arrow", dir === 1 ? " ▲" : " ▼");
    fixed.concat(rows).forEach(function (r) { body.appendChild(r); });
  }
  // Every table with an id, but those whose rows belong together in their order (class "nosort").
  Array.from(document.querySelectorAll("table[id]:not(.nosort)")).forEach(function (table) {
    var head = headRow(table);
    if (!head || !table.tBodies.length) { return; }
    table.classList.add("sortable");
    Array.from(head.cells).forEach(function (th, col) {
      th.title = (th.title ? th.title + " — " : "") + "click to sort";
      th.addEventListener("click", function () { sortBy(table, col, th); });
    });
  });
})();
""")


class _Tables(HTMLParser):
    """The rows of every <table> of a page, in order: ``[(id or None, [[cell, ...], ...]), ...]``."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.tables: list = []
        self._cell = None
        self._row = None
        self._skip = 0  # inside <script>/<style>

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if tag in ("script", "style"):
            self._skip += 1
        elif tag == "table":
            self.tables.append((a.get("id"), []))
        elif tag == "tr" and self.tables:
            self._row = []
            self.tables[-1][1].append(self._row)
        elif tag in ("td", "th") and self._row is not None:
            self._cell = {"text": [], "v": a.get("data-v")}
        elif tag == "br" and self._cell is not None:
            self._cell["text"].append(" ")

    def handle_endtag(self, tag):
        if tag in ("script", "style"):
            self._skip -= 1
        elif tag in ("td", "th") and self._cell is not None:
            v = self._cell["v"]
            text = re.sub(r"\s+", " ", "".join(self._cell["text"])).replace("★", "").strip()
            self._row.append(v if v not in (None, "") else text)
            self._cell = None
        elif tag == "tr":
            self._row = None

    def handle_data(self, data):
        if self._cell is not None and not self._skip:
            self._cell["text"].append(data)


def table_csvs(html: str) -> dict:
    """``{table id: CSV text}`` for each table of ``html`` with an id (tables without one are layout)."""
    parser = _Tables()
    parser.feed(html)
    out = {}
    for tid, rows in parser.tables:
        if not tid or not rows:
            continue
        buf = io.StringIO()
        csv.writer(buf, lineterminator="\n").writerows(rows)
        out[tid] = buf.getvalue()
    return out


def add_csv_links(html: str, out: Path) -> tuple[str, list]:
    """Write ``out/tables/<id>.csv`` for every table of ``html`` with an id, and link each under its
    table; returns the new HTML and the files written."""
    csvs = table_csvs(html)
    written = []
    for tid, text in csvs.items():
        path = Path(out) / FOLDER / f"{tid}.csv"
        atomic_write_text(path, text)
        written.append(path)

    # After each table's end: the link (tables are not nested in these reports).
    pieces, pos = [], 0
    for m in re.finditer(r'<table\b[^>]*\bid="([^"]+)"', html):
        tid = m.group(1)
        end = html.find("</table>", m.end())
        if tid not in csvs or end < 0:
            continue
        end += len("</table>")
        pieces.append(html[pos:end])
        pieces.append(f'\n<p class="csv"><a href="{FOLDER}/{tid}.csv" download>CSV</a></p>')
        pos = end
    pieces.append(html[pos:])
    return "".join(pieces), written
