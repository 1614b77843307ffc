"""Model files of the families beside the n-gram one: how a command recognises one and uses it.

``ngramlm`` and ``neural`` both stand on ``corpora`` and never import each other, yet
``ngramlm ppl``, ``score``, ``generate`` and ``infini ppl --mix`` take a model of either family.
Each family other than the caller's registers a :class:`ModelKind` here -- a cheap sniff (no
heavy import) and the few operations the shared commands need -- and a command asks
:func:`kind_of` what a file is.  The built-in families register on first use (``neural.kind``:
the names in :data:`PROVIDERS`, imported by name like plugins); a third family adds itself
with :func:`register`.
"""
from __future__ import annotations

import importlib
from dataclasses import dataclass
from typing import Callable, Optional

PROVIDERS = ("neural.kind",)  # modules that call register() when imported


@dataclass(frozen=True)
class ModelKind:
    name: str
    sniff: Callable[[str], bool]  # is this file one of ours? (reads a few bytes, never raises)
    # log10 p of every word and </s> of the sentences (lists of tokens), in order
    per_token_log10: Callable[[str, list], "object"]
    # the perplexity summary dict (corpora.accounting's) of a text: (path, text, split, data_dir)
    ppl_summary: Callable[..., dict]
    # sampled lines: (path, prompt, max_len, num, temperature, seed) -> list of str
    sample: Callable[..., list]


_KINDS: dict = {}
_loaded = False


def register(kind: ModelKind) -> None:
    _KINDS[kind.name] = kind


def kinds() -> list:
    global _loaded
    if not _loaded:
        _loaded = True
        for name in PROVIDERS:
            try:
                importlib.import_module(name)
            except ImportError:  # that family is not installed: its files are simply not recognised
                pass
    return list(_KINDS.values())


def kind_of(path) -> Optional[ModelKind]:
    """The registered kind whose sniff accepts ``path``, or None."""
    for kind in kinds():
        if kind.sniff(str(path)):
            return kind
    return None
