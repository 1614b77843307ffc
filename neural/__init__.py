"""Neural language models on the toolkit's shared data layer: RNN/LSTM/GRU and a Transformer.

A small LSTM over a sample of the embedded toy corpus (generated from a seed: no files needed):

    >>> from corpora import load_corpus, prepare
    >>> from corpora.toy import ToyConfig
    >>> from neural import RNNConfig, TrainConfig, Trainer, build_model, evaluate
    >>> cfg = ToyConfig(n_train_tokens=20_000, n_valid_tokens=1_000, n_test_tokens=1_000, vocab_size=500)
    >>> ds = prepare(load_corpus("toy", toy_config=cfg))
    >>> config = RNNConfig(vocab_size=len(ds.vocab), cell="lstm", emb_size=32, hidden_size=32, n_layers=1)
    >>> model = build_model("rnn", config, seed=1)

Every model answers ``model(x, targets=None, state=None) -> (logits, loss, state)``
(see :mod:`neural.base`): a logit per vocabulary id, ``-inf`` for ``<pad>`` and ``<s>``, which
are never predicted; no targets, no loss.

    >>> import torch
    >>> x = torch.as_tensor(ds["test"].ids[None, :10], dtype=torch.long)
    >>> logits, loss, state = model(x)
    >>> tuple(logits.shape), loss, logits[0, 0, :2].tolist()
    ((1, 10, 501), None, [-inf, -inf])

Perplexities count the same predicted tokens as the n-gram models: every word and sentence
end, normalised over ``vocab.n_types`` (499 here).  Untrained, the model is close to uniform:

    >>> untrained = evaluate(model, ds["test"].ids)
    >>> untrained.n_predicted, 450 < untrained.ppl < 550
    (1043, True)

One epoch of training takes seconds here (hours on PTB), so it is not run as an example:

    >>> Trainer(model, ds.vocab, ds["train"].ids, ds["valid"].ids, TrainConfig(epochs=1), progress=False).fit()
    ... # doctest: +SKIP
    >>> evaluate(model, ds["test"].ids).ppl < untrained.ppl  # doctest: +SKIP
    True

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
    "evaluate": "evaluation", "EvalResult": "evaluation", "token_log_probs": "evaluation",
    "save_checkpoint": "checkpoint", "load_checkpoint": "checkpoint", "load_model": "checkpoint",
    "greedy": "generate", "beam_search": "generate", "sample": "generate",
    "ppl_summary": "scoring",
}

__all__ = ["is_checkpoint", *_LAZY]


__getattr__, __dir__ = lazy_exports(__name__, _LAZY, globals())
