"""What one section of the comparison report is: its names, its Jinja fragments, what it computes
in a run and what it draws (see :mod:`reports.sections`).

The built-in sections' fragments are package files, ``reports/sections/templates/<name>.md.j2`` and
``<name>.html.j2`` (shipped in the wheel as package data); a section registered by a plug-in or a test
may give its fragments as strings.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from importlib import resources
from typing import Callable, Optional


@dataclass(frozen=True)
class Section:
    """One numbered section of the comparison report."""

    name: str
    anchor: str  # the HTML id of its heading
    title: str  # Markdown heading (after the number)
    html_title: str
    md: str  # Jinja fragment after the heading
    html: str
    compute: Optional[Callable] = None  # compute(run): fills run.results[...]
    context: Optional[Callable[[dict], dict]] = None  # context(results) -> template variables
    plots: dict = field(default_factory=dict)  # name -> (title, fn(results) -> PNG bytes or None)


def fragment(name: str) -> str:
    """The text of the fragment file ``reports/sections/templates/<name>`` (a Jinja source, as written)."""
    return resources.files(__package__).joinpath("templates", name).read_text(encoding="utf-8")
