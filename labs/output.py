"""Writing one lab's results: DIR/NAME/{report.md, report.html, results.json, plots/*.png}.

Every file is written atomically (temp file + rename), so an interrupted lab leaves the
previous report or the new one, never half of one.  The HTML embeds its figures as base64
PNG so it can be mailed or opened offline; only relative paths (``plots/NAME.png``) appear
in the outputs, so a results folder can be moved or shared.
"""
from __future__ import annotations

import base64
import html
import io
import json
from dataclasses import dataclass, field
from pathlib import Path

from corpora.textio import atomic_write_bytes, atomic_write_text


@dataclass
class Table:
    caption: str
    header: list[str]
    rows: list[list[str]]


@dataclass
class Figure:
    name: str      # file stem under plots/
    caption: str
    png: bytes


@dataclass
class LabResult:
    name: str
    title: str
    section: str
    intro: str
    headline: list[tuple[str, str]]           # (what, measured value) -- printed and reported
    results: dict                              # the numbers, for results.json
    tables: list[Table] = field(default_factory=list)
    figures: list[Figure] = field(default_factory=list)


def png_of(fig) -> bytes:
    """Render a matplotlib figure to PNG bytes and close it (figures are not kept open)."""
    import matplotlib.pyplot as plt

    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=80, bbox_inches="tight")
    plt.close(fig)
    return buf.getvalue()


def _markdown(lab: LabResult) -> str:
    lines = [f"# {lab.title}", "", f"*Textbook: {lab.section}*", "", lab.intro, "", "## Headline numbers", ""]
    lines += [f"- {what}: **{value}**" for what, value in lab.headline]
    for t in lab.tables:
        lines += ["", f"## {t.caption}", "", "| " + " | ".join(t.header) + " |",
                  "|" + "---|" * len(t.header)]
        lines += ["| " + " | ".join(r) + " |" for r in t.rows]
    for f in lab.figures:
        lines += ["", f"## {f.caption}", "", f"![{f.caption}](plots/{f.name}.png)"]
    return "\n".join(lines) + "\n"


def _html(lab: LabResult) -> str:
    e = html.escape
    parts = [
        "<!doctype html>", '<html lang="en"><head><meta charset="utf-8">',
        f"<title>{e(lab.title)}</title>",
        "<style>body{font-family:sans-serif;max-width:60em;margin:2em auto;padding:0 1em}"
        "table{border-collapse:collapse}td,th{border:1px solid #ccc;padding:.2em .6em;text-align:right}"
        "img{max-width:100%}</style></head><body>",
        f"<h1>{e(lab.title)}</h1>", f"<p><em>Textbook: {e(lab.section)}</em></p>", f"<p>{e(lab.intro)}</p>",
        "<h2>Headline numbers</h2><ul>",
    ]
    parts += [f"<li>{e(what)}: <strong>{e(value)}</strong></li>" for what, value in lab.headline]
    parts.append("</ul>")
    for t in lab.tables:
        parts.append(f"<h2>{e(t.caption)}</h2><table><tr>" + "".join(f"<th>{e(h)}</th>" for h in t.header) + "</tr>")
        parts += ["<tr>" + "".join(f"<td>{e(c)}</td>" for c in r) + "</tr>" for r in t.rows]
        parts.append("</table>")
    for f in lab.figures:
        b64 = base64.b64encode(f.png).decode("ascii")
        parts.append(f'<h2>{e(f.caption)}</h2><img alt="{e(f.caption)}" src="data:image/png;base64,{b64}">')
    parts.append("</body></html>")
    return "\n".join(parts) + "\n"


def write_lab(lab: LabResult, *, out_dir: Path) -> Path:
    """Write the lab's four outputs under ``out_dir/lab.name``; return that folder."""
    folder = Path(out_dir) / lab.name
    (folder / "plots").mkdir(parents=True, exist_ok=True)
    for f in lab.figures:
        atomic_write_bytes(folder / "plots" / f"{f.name}.png", f.png)
    payload = {"lab": lab.name, "title": lab.title, "section": lab.section,
               "headline": {what: value for what, value in lab.headline},
               "results": lab.results, "plots": [f"plots/{f.name}.png" for f in lab.figures]}
    atomic_write_text(folder / "results.json", json.dumps(payload, indent=2, ensure_ascii=False) + "\n")
    atomic_write_text(folder / "report.md", _markdown(lab))
    atomic_write_text(folder / "report.html", _html(lab))  # last: its presence means the lab finished
    return folder
