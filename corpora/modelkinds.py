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


# A network trained on an n-gram model's residual (``neural train --ngram-residual``, ``fusion.residual``)
# is a model kind neural learns of from the package above both families.  The program registers a loader
# that imports that module on first use, so commands that never meet such a model never import torch for it.
_RESIDUAL: dict = {}


def register_residual(load_module: Callable[[], "object"]) -> None:
    """``load_module()`` -> the module with ``residual_lm(net, path, words)`` whose import registers the
    ``residual`` model kind with ``neural.models``.  ``cli.py`` registers ``fusion.residual``'s."""
    _RESIDUAL["load"] = load_module


def residual_lm(net, path, words, **options):
    """``net`` wrapped to learn the residual of the n-gram model in ``path`` (``words``: each id's string)."""
    return residual_module().residual_lm(net, path, words, **options)


def residual_module():
    """The registered module of residual models (``fusion.residual``): its cross-fitting helpers."""
    from .errors import InputError

    if "load" not in _RESIDUAL:
        raise InputError("residual models are not registered", fix="run the ngramlm program, or import fusion.residual")
    return _RESIDUAL["load"]()


def load_model_kind(kind: str) -> bool:
    """Make a registered model kind that lives above the families known to ``neural`` (True if one was)."""
    if kind == "residual" and "load" in _RESIDUAL:
        _RESIDUAL["load"]()
        return True
    return False
