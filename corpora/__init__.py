"""Corpora, tokenization and the shared vocabulary.

    >>> from corpora import load_corpus, prepare
    >>> ds = prepare(load_corpus("ptb", data_dir="../shared/corpora"))   # doctest: +SKIP
    >>> ds.vocab.n_types, ds["test"].n_tokens                            # doctest: +SKIP
    (10000, 82430)

This package never imports torch.  Its names are imported when first used (PEP 562): a module that
needs only ``corpora.errors`` (the kenlm stand-in, :mod:`ngramlm.kenlm`) does not pay for numpy.
"""
from __future__ import annotations

from .lazy import lazy_exports

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


__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS, globals())
