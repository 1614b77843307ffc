"""Neural language models on the toolkit's shared data layer: RNN/LSTM/GRU and a Transformer.

    >>> from corpora import load_corpus, prepare                                  # doctest: +SKIP
    >>> from neural import RNNConfig, TrainConfig, Trainer, build_model, evaluate  # doctest: +SKIP
    >>> ds = prepare(load_corpus("ptb", data_dir="../shared/corpora"))            # doctest: +SKIP
    >>> model = build_model("rnn", RNNConfig(vocab_size=len(ds.vocab), cell="lstm"), seed=1)
    >>> Trainer(model, ds.vocab, ds["train"].ids, ds["valid"].ids, TrainConfig(epochs=1), out="lstm.pt").fit()
    >>> evaluate(model, ds["test"].ids).ppl

Every model answers ``model(x, targets=None, state=None) -> (logits, loss, state)``
(see :mod:`neural.base`).  Perplexities count the same predicted tokens as the
n-gram models: every word and sentence end, normalised over ``vocab.n_types``.

``import neural`` does not import torch; :func:`is_checkpoint` is torch-free, the
rest is loaded on first use.
"""
from __future__ import annotations

from corpora.lazy import lazy_exports

from .sniff import is_checkpoint

_LAZY = {
    "RNNConfig": "config", "TransformerConfig": "config", "TrainConfig": "config",
    "LanguageModel": "base", "RNNLM": "rnn", "TransformerLM": "transformer", "build_model": "models",
    "Trainer": "training.trainer", "TrainResult": "training.trainer", "TrainingDiverged": "training.trainer",
    "evaluate": "evaluate", "EvalResult": "evaluate", "token_log_probs": "evaluate",
    "save_checkpoint": "checkpoint", "load_checkpoint": "checkpoint", "load_model": "checkpoint",
    "greedy": "generate", "beam_search": "generate", "sample": "generate",
    "ppl_summary": "commands.lm",
}

__all__ = ["is_checkpoint", *_LAZY]


__getattr__, __dir__ = lazy_exports(__name__, _LAZY, globals())
