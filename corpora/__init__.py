"""Corpora, tokenization and the shared vocabulary.

    >>> from corpora import load_corpus, prepare
    >>> ds = prepare(load_corpus("ptb", data_dir="../shared/corpora"))   # doctest: +SKIP
    >>> ds.vocab.n_types, ds["test"].n_tokens                            # doctest: +SKIP
    (10000, 82430)

This package never imports torch.
"""
from .corpus import Corpus, Dataset, load_corpus, load_text_corpus, prepare, read_sentences
from .datadir import resolve_data_dir
from .errors import InputError, NotFittedError, ToolkitError
from .registry import REGISTRY, CorpusSpec, get_spec
from .tokenize import TokenizerSpec, make_tokenizer
from .vocab import BOS_ID, EOS_ID, PAD_ID, UNK_ID, EncodedText, Vocab

__all__ = [
    "Corpus", "Dataset", "load_corpus", "load_text_corpus", "prepare", "read_sentences",
    "resolve_data_dir", "InputError", "NotFittedError", "ToolkitError", "REGISTRY", "CorpusSpec",
    "get_spec", "TokenizerSpec", "make_tokenizer", "BOS_ID", "EOS_ID", "PAD_ID", "UNK_ID",
    "EncodedText", "Vocab",
]
