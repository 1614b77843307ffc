"""Registers neural checkpoints with :mod:`corpora.modelkinds`, so the n-gram commands that take
either family (``ppl``, ``generate``, ``infini ppl --mix``) use them without importing ``neural``.
Importing this module does not import torch; each operation does, when it runs."""
from __future__ import annotations

import math

from corpora.modelkinds import ModelKind, register


def _sniff(path: str) -> bool:
    from .sniff import is_checkpoint  # a zip sniff, no torch

    return bool(is_checkpoint(path))


def _per_token_log10(path: str, sentences: list):
    from .checkpoint import load_model
    from .evaluate import token_log_probs

    model, vocab, _ = load_model(path)
    return token_log_probs(model, vocab.encode_sentences(sentences).ids) / math.log(10)


def _ppl_summary(path: str, text, split: str, data_dir) -> dict:
    from .commands.lm import ppl_summary

    return ppl_summary(path, text, split=split, data_dir=data_dir)


def _sample(path: str, prompt: str, max_len: int, num: int, temperature: float, seed) -> list:
    from .commands.lm import sample_lines

    return sample_lines(path, prompt=prompt, max_len=max_len, num=num, temperature=temperature, seed=seed)


register(ModelKind("neural", _sniff, _per_token_log10, _ppl_summary, _sample))
