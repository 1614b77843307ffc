"""Corpora, tokenization and the shared vocabulary.

    >>> from corpora import load_corpus, prepare
    >>> ds = prepare(load_corpus("ptb", data_dir="../shared/corpora"))   # doctest: +SKIP
    >>> ds.vocab.n_types, ds["test"].n_tokens                            # doctest: +SKIP
    (10000, 82430)

This package never imports torch.  Its names are imported when first used (PEP 562): a module that
needs only ``corpora.errors`` (the kenlm stand-in, :mod:`ngramlm.kenlm`) does not pay for numpy.
"""
from __future__ import annotations

import importlib

# public name -> the submodule that defines it
_EXPORTS = {
    "Corpus": "corpus", "Dataset": "corpus", "load_corpus": "corpus", "load_text_corpus": "corpus",
    "prepare": "corpus", "read_sentences": "corpus",
    "resolve_data_dir": "datadir",
    "InputError": "errors", "NotFittedError": "errors", "ToolkitError": "errors",
    "REGISTRY": "registry", "CorpusSpec": "registry", "get_spec": "registry",
    "TokenizerSpec": "tokenize", "make_tokenizer": "tokenize",
    "BOS_ID": "vocab", "EOS_ID": "vocab", "PAD_ID": "vocab", "UNK_ID": "vocab", "EncodedText": "vocab",
    "Vocab": "vocab",
}
__all__ = list(_EXPORTS)


def __getattr__(name: str):
    if name in _EXPORTS:
        value = getattr(importlib.import_module(f".{_EXPORTS[name]}", __name__), name)
        globals()[name] = value  # looked up once
        return value
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list:
    return sorted(set(globals()) | set(__all__))
