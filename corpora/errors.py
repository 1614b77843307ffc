"""Errors that tell the user what went wrong, where, and how to fix it.

Every error raised on bad *user input* (a file, a corpus name, an option) is an
:class:`InputError`.  It carries the file and line when known, and a ``fix``
sentence; ``str(err)`` renders all of it on one line so the CLI can print it as is.
"""
from __future__ import annotations

import os
from typing import Optional


class ToolkitError(Exception):
    """Base class of all errors this toolkit raises on purpose."""


class InputError(ToolkitError, ValueError):
    """Bad user input: names the file (and line), the cause, and the fix."""

    def __init__(
        self,
        message: str,
        *,
        path: Optional[os.PathLike | str] = None,
        line: Optional[int] = None,
        fix: Optional[str] = None,
    ) -> None:
        self.message = message
        self.path = None if path is None else str(path)
        self.line = line
        self.fix = fix
        super().__init__(self._render())

    def _render(self) -> str:
        where = ""
        if self.path is not None:
            where = self.path if self.line is None else f"{self.path}:{self.line}"
            where += ": "
        text = where + self.message
        if self.fix:
            text += f" (fix: {self.fix})"
        return text


class NotFittedError(ToolkitError, RuntimeError):
    """A fitted-only method was called before ``fit``."""

    def __init__(self, obj: object) -> None:
        name = type(obj).__name__
        super().__init__(
            f"This {name} instance is not fitted yet. Call 'fit' with appropriate arguments before using it."
        )


class ModelFileError(InputError, OSError):
    """A model file that is missing or cannot be read, raised by the kenlm-compatible ``Model`` classes:
    still an :class:`InputError` (the file, the cause, the fix), and an ``OSError`` as kenlm's own
    ``Model`` raises, so ``except OSError`` code written for kenlm keeps working."""

    @classmethod
    def from_input_error(cls, e: InputError) -> "ModelFileError":
        return cls(e.message, path=e.path, line=e.line, fix=e.fix)
