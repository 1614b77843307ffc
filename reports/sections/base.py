"""What one section of the comparison report is: its names, its Jinja fragments, what it computes
in a run and what it draws (see :mod:`reports.sections`)."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Optional


@dataclass(frozen=True)
class Section:
    name: str
    anchor: str  # the HTML id of its heading
    title: str  # Markdown heading (after the number)
    html_title: str
    md: str  # Jinja fragment after the heading
    html: str
    compute: Optional[Callable] = None  # compute(run): fills run.results[...]
    context: Optional[Callable[[dict], dict]] = None  # context(results) -> template variables
    plots: dict = field(default_factory=dict)  # name -> (title, fn(results) -> PNG bytes or None)
