"""The tables of the HTML reports: each one a list of rows that both its HTML and its CSV file beside the
report (``tables/<id>.csv``, linked under the table) are written from, and the script that sorts a table
by a click on a column's header.

A cell holds what a reader sees as plain text, its markup when it has some (a bold value, a note under
it), and the raw number behind the text when there is one (``data-v``: "112.28 ★" or "1.52k" shown,
112.2831 sorted on and written to the CSV, so a spreadsheet gets numbers).
"""
from __future__ import annotations

import csv
import io
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional

import markupsafe
from markupsafe import Markup, escape

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


_NO_VALUE = object()  # a cell without a data-v attribute (None or "" write an empty one)


@dataclass(frozen=True)
class Cell:
    """One cell of a table: ``text`` as a reader sees it (plain), its ``html`` when it has markup (else the
    escaped text), the raw ``value`` behind it (``data-v``), its ``cls`` and ``title`` attributes."""

    text: str
    html: Optional[Markup] = None
    value: object = _NO_VALUE
    cls: Optional[str] = None
    title: Optional[str] = None

    def csv(self) -> str:
        """The CSV's cell: the raw value when there is one, else the text (whitespace collapsed, no ★)."""
        if self.value is not _NO_VALUE and str(self.value) != "":
            return str(self.value)
        return re.sub(r"\s+", " ", str(self.text)).replace("★", "").strip()

    def markup(self, tag: str, bare_class: bool = False) -> str:
        attrs = ""
        if self.cls is not None:
            attrs += f" class={escape(self.cls)}" if bare_class else f' class="{escape(self.cls)}"'
        if self.value is not _NO_VALUE:
            attrs += f' data-v="{escape(self.value)}"'
        if self.title is not None:
            attrs += f' title="{escape(self.title)}"'
        inner = self.html if self.html is not None else escape(self.text)
        return f"<{tag}{attrs}>{inner}</{tag}>"


def bold(text, **attrs) -> Cell:
    """A cell whose text is bold."""
    return Cell(str(text), Markup("<b>{}</b>").format(text), **attrs)


@dataclass
class Row:
    """A row of cells, with its ``<tr>`` attributes (``cls``; ``attrs``: more, e.g. a data flag)."""

    cells: list
    cls: Optional[str] = None
    attrs: dict = field(default_factory=dict)

    def markup(self, tag: str, bare_class: bool = False) -> str:
        attrs = "" if self.cls is None else f' class="{escape(self.cls)}"'
        attrs += "".join(f' {k}="{escape(v)}"' for k, v in self.attrs.items())
        return f"<tr{attrs}>" + "".join(c.markup(tag, bare_class) for c in self.cells) + "</tr>"


# Where each kind of table puts its newlines, <thead> and <tbody> (the reports' pages keep their bytes):
# the markup before the body rows (``{a}``: the table's attributes, ``{h}``: the header row) and after.
LAYOUTS = {
    "plain": ("<table{a}>\n{h}\n", "</table>"),
    "inline": ("<table{a}>{h}\n", "</table>"),
    "head": ("<table{a}>\n<thead>{h}</thead>\n", "</table>"),
    "body": ("<table{a}>\n<thead>{h}</thead>\n<tbody>\n", "</tbody>\n</table>"),
    "compact": ("<table{a}><thead>{h}</thead><tbody>\n", "</tbody></table>"),
}


@dataclass
class Table:
    """A table of a report: a header row and body rows, from which :meth:`html` writes its markup (and the
    link to its CSV file) and :meth:`csv` its CSV.  A table without an ``id`` is layout: no CSV."""

    id: Optional[str]
    header: list  # Cell or str per column
    rows: list  # Row per body row
    cls: Optional[str] = None
    layout: str = "plain"
    bare_class: bool = False  # class=n instead of class="n" in the cells (the ladder page's markup)

    def _header(self) -> Row:
        return Row([c if isinstance(c, Cell) else Cell(c) for c in self.header])

    def html(self) -> Markup:
        """The table's markup, each body row on its line, and the link to its CSV under it."""
        attrs = "" if self.id is None else f' id="{escape(self.id)}"'
        attrs += "" if self.cls is None else f' class="{escape(self.cls)}"'
        before, after = LAYOUTS[self.layout]
        out = before.format(a=attrs, h=self._header().markup("th")) + \
            "".join(r.markup("td", self.bare_class) + "\n" for r in self.rows) + after
        if self.id is not None:
            out += f'\n<p class="csv"><a href="{FOLDER}/{self.id}.csv" download>CSV</a></p>'
        return Markup(out)

    def csv(self) -> str:
        buf = io.StringIO()
        csv.writer(buf, lineterminator="\n").writerows(
            [[c.csv() for c in row.cells] for row in [self._header(), *self.rows]])
        return buf.getvalue()


class Tables:
    """The tables one page shows, in order: ``{{ table(t) }}`` in a template writes ``t`` and keeps it,
    :meth:`write_csvs` then writes their CSV files."""

    def __init__(self) -> None:
        self.shown: list = []

    def __call__(self, table: Table) -> Markup:
        self.shown.append(table)
        return table.html()

    def write_csvs(self, out: Path) -> list:
        """Write ``out/tables/<id>.csv`` for each table shown with an id; returns the files written."""
        by_id = {t.id: t for t in self.shown if t.id is not None}  # an id shown twice: its last table
        written = []
        for tid, table in by_id.items():
            path = Path(out) / FOLDER / f"{tid}.csv"
            atomic_write_text(path, table.csv())
            written.append(path)
        return written
