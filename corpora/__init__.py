"""Corpora, tokenization and the shared vocabulary.

A corpus is sentences of words per split; the embedded ``toy`` corpus is generated from a seed
(no files), here at a reduced size:

    >>> from corpora import load_corpus, prepare
    >>> from corpora.toy import ToyConfig
    >>> cfg = ToyConfig(n_train_tokens=20_000, n_valid_tokens=2_000, n_test_tokens=2_000, vocab_size=500)
    >>> corpus = load_corpus("toy", toy_config=cfg)
    >>> corpus.sentences("train")[0]
    ['tram', 'chemykot']

:func:`prepare` fits the vocabulary on the training split and encodes every split.  A split
counts a token for every word and one for each sentence end (``</s>``); a test word never seen
in training is ``<unk>``:

    >>> ds = prepare(corpus)
    >>> test = ds["test"]
    >>> ds.vocab.n_types, test.n_sentences, test.n_words, test.n_tokens, test.n_unk
    (499, 161, 1849, 2010, 1)
    >>> ds.vocab.decode(test.sentence(0))
    ['chex', 'dehatra', 'sekrind', 'seen', 'theplydoust', '</s>']

The same for a named corpus on disk: ``prepare(load_corpus("ptb"))`` (after ``ngramlm corpora
download ptb``) has 10,000 types and 82,430 test tokens.  Text files are split into words by a
tokenizer:

    >>> from corpora import TokenizerSpec, make_tokenizer
    >>> make_tokenizer(TokenizerSpec(kind="regex", lower=True))("The cat, sat.")
    ['the', 'cat', ',', 'sat', '.']

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
