"""What the corpus and n-gram command lines parse and print alike: an integer option value, a
percentage, a plain-text table, and a named corpus loaded with a clear error.

Library code, not a command: ``corpora/commands.py`` and ``ngramlm/commands/stats.py`` both use it,
and a command module is never imported by another package.
"""
from __future__ import annotations

from typing import Iterable, Optional

from .errors import InputError
from .tokenize import TokenizerSpec


def parse_int(value: Optional[str], option: str, *, minimum: int = 1) -> Optional[int]:
    """``value`` of ``option`` as an int (``_`` and ``,`` allowed as digit separators), or None for None;
    an InputError naming the option when it is not an integer of at least ``minimum``."""
    if value is None:
        return None
    try:
        number = int(str(value).replace("_", "").replace(",", ""))
    except ValueError:
        raise InputError(f"{option} must be an integer >= {minimum}, got {value!r}",
                         fix=f"use e.g. {option} {max(minimum, 2)}") from None
    if number < minimum:
        raise InputError(f"{option} must be an integer >= {minimum}, got {number}",
                         fix=f"use {option} {minimum} or more")
    return number


def percent(x: float) -> str:
    """``x`` (a share) as a percentage with two decimals: ``0.1234`` -> ``"12.34%"``."""
    return f"{100.0 * x:.2f}%"


def text_table(rows: list, header: list, *, indent: str = "  ", left: tuple = (0,)) -> str:
    """Plain-text table: columns in ``left`` left-aligned, the rest (numbers) right-aligned."""
    cells = [header] + [[str(c) for c in r] for r in rows]
    widths = [max(len(r[i]) for r in cells) for i in range(len(header))]
    lines = []
    for r in cells:
        parts = [c.ljust(w) if i in left else c.rjust(w) for i, (c, w) in enumerate(zip(r, widths))]
        lines.append(indent + "  ".join(parts).rstrip())
    return "\n".join(lines)


def load_named_corpus(source: str, *, data_dir: Optional[str], tokenizer: Optional[TokenizerSpec],
                      splits: Iterable[str] = ("train", "valid", "test")):
    """:func:`corpora.corpus.load_corpus`, with the toy generator's absence turned into a clear error."""
    from .corpus import load_corpus

    try:
        return load_corpus(source, data_dir=data_dir, tokenizer=tokenizer, splits=tuple(splits))
    except ImportError:
        import importlib.util

        from .registry import REGISTRY

        if source in REGISTRY and importlib.util.find_spec("corpora.toy") is None:
            raise InputError(f"the generated corpus {source!r} is not available in this installation "
                             "(corpora/toy.py is missing)", fix="give another corpus, e.g. `ngramlm stats ptb`") from None
        raise
