"""Model files of the families beside the n-gram one: how a command recognises one and uses it.

``ngramlm`` and ``neural`` both stand on ``corpora`` and never import each other, yet
``ngramlm ppl``, ``score``, ``generate`` and ``infini ppl --mix`` take a model of either family.
Each family other than the caller's registers a :class:`ModelKind` here -- a cheap sniff (no
heavy import) and the few operations the shared commands need -- and a command asks
:func:`kind_of` what a file is.

Registration comes from above, never from here (this module imports no family): the program
(``cli.py``, the layer that may import both families) registers the neural kind when it starts.
A library user who wants the same does it once::

    import neural.kind
    neural.kind.register()   # torch-free; ngramlm's ppl / generate / infini then take checkpoints

and a third family adds itself with :func:`register`.  Until a kind is registered, its files are
simply not recognised.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Optional


@dataclass(frozen=True)
class ModelKind:
    """One model family's answer to the shared commands: what its files look like and what they can do."""

    name: str
    sniff: Callable[[str], bool]  # is this file one of ours? (reads a few bytes, never raises)
    # log10 p of every word and </s> of the sentences (lists of tokens), in order
    per_token_log10: Callable[[str, list], "object"]
    # the perplexity summary dict (corpora.accounting's) of a text: (path, text, split, data_dir)
    ppl_summary: Callable[..., dict]
    # sampled lines: (path, prompt, max_len, num, temperature, seed) -> list of str
    sample: Callable[..., list]


_KINDS: dict = {}


def register(kind: ModelKind) -> None:
    """Add ``kind`` (a second registration under the same name replaces the first)."""
    _KINDS[kind.name] = kind


def kinds() -> list:
    """The registered kinds, in registration order."""
    return list(_KINDS.values())


def kind_of(path) -> Optional[ModelKind]:
    """The registered kind whose sniff accepts ``path``, or None."""
    for kind in kinds():
        if kind.sniff(str(path)):
            return kind
    return None


# ----------------------------------------------------------------------------- language models inside a search
# A translator's beam search (neural) fuses a target-side n-gram model (ngramlm) token by token.  Neither
# family imports the other: the package above both (``fusion``) registers how to open a model file as the
# search wants it, and the search asks for it here.
_FUSION: dict = {}


def register_fusion(open_lm: Callable[..., "object"]) -> None:
    """``open_lm(path, target_words, device=...)`` -> an object with ``start``, ``advance`` and ``log_probs``
    over the target vocabulary (``target_words``: the string of each target id); see
    ``neural.seq2seq.translate``.  ``cli.py`` registers ``fusion.target``'s."""
    _FUSION["open"] = open_lm


def fusion_lm(path, target_words, device="cpu"):
    """A language model file opened for shallow fusion over ``target_words`` (registered by the program)."""
    from .errors import InputError

    if "open" not in _FUSION:
        raise InputError("no language model can be fused into the search: the fusion package is not registered",
                         fix="run the ngramlm program, or call fusion.target.register() first")
    return _FUSION["open"](path, target_words, device=device)
