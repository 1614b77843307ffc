"""The n-gram model inside a decoder: where the count models (:mod:`ngramlm`) meet torch and the
speech recognisers' decoders.

* :func:`tensor_lm` / :class:`NgramTensorLM` / :class:`ProbingTensorLM` (:mod:`fusion.tensor`,
  :mod:`fusion.probing`): any back-off model the toolkit reads as batched torch operations -- a state
  is a small int64 tensor, ``advance(states, tokens)`` and ``log_probs(states) -> [B, V]`` run on any
  device, every value the scorer's.
* :class:`CTCDecoderNgramLM` (:mod:`fusion.ctc`): torchaudio's ``CTCDecoderLM`` interface (``start``,
  ``score``, ``finish``) over a model's state API, without torchaudio.
* :func:`piece_language_model` (:mod:`fusion.pyctc`): a pyctcdecode language model over subword pieces.

This package stands above both model families (``docs/architecture.md``): it imports ``ngramlm``
and torch, and neither family imports it.  Names are imported when first used, so the decoder
adapters load without torch.
"""
from __future__ import annotations

from corpora.lazy import lazy_exports

_EXPORTS = {
    "tensor_lm": "tensor", "NgramTensorLM": "tensor", "TensorLM": "base",
    "ProbingTensorLM": "probing",
    "CTCDecoderNgramLM": "ctc",
    "piece_language_model": "pyctc",
}
__all__ = list(_EXPORTS)

__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS, globals())
