"""A model file of either family scored on the same sentences, told apart by its content.

It lives here, above both families, because it needs both: ``ngramlm`` and ``neural`` never
import each other (an n-gram command reaches a checkpoint through :mod:`corpora.modelkinds`).
"""
from __future__ import annotations

import os

import numpy as np


def per_token_log10(model_path: os.PathLike | str, sentences: list) -> np.ndarray:
    """log10 p of every word and ``</s>`` of ``sentences`` (token lists), in order, under an n-gram model
    (native, ARPA or KenLM binary) or a neural checkpoint."""
    from neural.sniff import is_checkpoint  # torch-free: torch only for a checkpoint

    if is_checkpoint(model_path):
        from neural.scoring import token_log10 as checkpoint_log10

        return checkpoint_log10(model_path, sentences)
    from ngramlm.loading import token_log10

    return token_log10(model_path, sentences)
