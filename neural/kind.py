"""Neural checkpoints as a :class:`corpora.modelkinds.ModelKind`, so the n-gram commands that take
either family (``ppl``, ``generate``, ``infini ppl --mix``) use them without importing ``neural``.

Importing this module registers nothing: the top layer (``cli.py``, which may import both families)
calls :func:`register` when the program starts, and a library user does the same.  Importing it does
not import torch; each operation does, when it runs.
"""
from __future__ import annotations

from corpora import modelkinds


def _sniff(path: str) -> bool:
    from .sniff import is_checkpoint  # a zip sniff, no torch

    return bool(is_checkpoint(path))


def _per_token_log10(path: str, sentences: list):
    from .scoring import token_log10

    return token_log10(path, sentences)


def _ppl_summary(path: str, text, split: str, data_dir) -> dict:
    import sys

    from .scoring import ppl_summary

    # `ngramlm ppl CHECKPOINT` says what it scores and shows its progress on stderr, as `neural ppl` does.
    return ppl_summary(path, text, split=split, data_dir=data_dir, log=lambda m: print(m, file=sys.stderr),
                       progress=True)


def _sample(path: str, prompt: str, max_len: int, num: int, temperature: float, seed) -> list:
    from .checkpoint import load_model
    from .generate import sample_lines

    model, vocab, _ = load_model(path)
    return sample_lines(model, vocab, prompt=prompt, max_len=max_len, num=num, temperature=temperature, seed=seed)


KIND = modelkinds.ModelKind("neural", _sniff, _per_token_log10, _ppl_summary, _sample)


def register() -> None:
    """Make :func:`corpora.modelkinds.kind_of` recognise neural checkpoints (idempotent)."""
    modelkinds.register(KIND)
