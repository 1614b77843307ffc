"""Building a model from its kind and config (the inverse of what a checkpoint stores)."""
from __future__ import annotations

from typing import Optional, Union

import torch

from corpora.errors import InputError

from .base import LanguageModel
from .bert.model import BertConfig, BertLM
from .config import RNNConfig, TransformerConfig, architecture
from .rnn import RNNLM
from .seq2seq.transformer import TranslatorConfig, build_translator
from .transformer import TransformerLM

# "seq2seq": a translator, the GRU encoder-decoder or the Transformer one (its config's arch tells them apart).
MODEL_CLASSES = {"rnn": (RNNLM, RNNConfig), "transformer": (TransformerLM, TransformerConfig),
                 "seq2seq": (build_translator, TranslatorConfig)}
MODEL_CLASSES["bert"] = (BertLM, BertConfig)  # a masked LM: scored by `ngramlm bert pppl`, not as a causal LM


def register_model_kind(kind: str, cls, cfg_cls) -> None:
    """A kind built outside this package (``fusion.residual``'s ``residual``): its class and config class."""
    MODEL_CLASSES[kind] = (cls, cfg_cls)


def build_model(kind: str, config: Union[dict, RNNConfig, TransformerConfig],
                seed: Optional[int] = None) -> LanguageModel:
    """``build_model("rnn", {...})`` -> a fresh model; ``seed`` makes the initial weights repeatable."""
    if kind not in MODEL_CLASSES:
        from corpora.modelkinds import load_model_kind

        load_model_kind(kind)  # a kind registered by the program, loaded on first use
    if kind not in MODEL_CLASSES:
        raise InputError(f"unknown model kind {kind!r}", fix=f"use one of {', '.join(MODEL_CLASSES)}")
    cls, cfg_cls = MODEL_CLASSES[kind]
    if isinstance(config, dict):
        config = cfg_cls.from_dict(config)
    if seed is not None:
        torch.manual_seed(seed)
    return cls(config)


def model_kind(name: str) -> str:
    """CLI model name (lstm, gru, rnn_tanh, rnn_relu, transformer) -> model kind."""
    return architecture(name).family


def model_name(model: LanguageModel) -> str:
    """The CLI name of a model: its cell for RNNs, "transformer", "seq2seq[-attn]-<cell>" or
    "seq2seq-transformer" for translators."""
    if model.kind == "seq2seq":
        if getattr(model.config, "arch", None) == "transformer":
            return "seq2seq-transformer"
        return f"seq2seq{'-attn' if model.config.attention else ''}-{model.config.cell}"
    if model.kind == "bert":
        return "bert"
    if model.kind == "residual":  # a network trained on an n-gram model's residual
        return f"{model_name(model.net)}+ngram"
    return model.config.cell if model.kind == "rnn" else "transformer"
