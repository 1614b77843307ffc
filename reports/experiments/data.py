"""The one dataset every compared model sees, its fingerprint, subsets and text sizes.

All models share one :class:`~corpora.vocab.Vocab` (fitted on the full training
split) and one tokenization, so every perplexity counts the same predicted tokens.
Learning-curve subsets are *prefixes* of the training split (whole sentences) encoded
with that same vocabulary.
"""
from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from typing import Optional

import numpy as np

from corpora import prepare
from corpora.sources import open_text
from corpora.errors import InputError
from corpora.tokenize import TokenizerSpec, make_tokenizer, spec_from_text
from corpora.vocab import EncodedText

from .settings import CompareSettings

SPLITS = ("train", "valid", "test")


@dataclass
class CompareData:
    dataset: object  # corpora.Dataset
    name: str
    fingerprint: str  # hash of the vocabulary and every split's ids: part of every cache key
    sizes: dict  # split -> {sentences, tokens, words, chars}
    truth: dict  # split -> true entropy info (toy only), else {}
    toy_config: Optional[object] = None
    split_policy: str = "corpus"  # how train/valid/test were made (corpora.corpus.SPLIT_POLICIES)
    split_note: str = ""
    sentence_bytes: dict = None  # split -> bytes of each sentence (for intervals by sentence), when known

    @property
    def vocab(self):
        return self.dataset.vocab

    def __getitem__(self, split: str) -> EncodedText:
        return self.dataset.encoded[split]


def load_data(settings: CompareSettings, data_dir: Optional[str] = None) -> CompareData:
    """Load and encode the corpus of ``settings`` (raises InputError for unknown names or missing splits)."""
    toy_config = None
    if settings.corpus == "toy" and (settings.toy_train_tokens or settings.toy_eval_tokens):
        from corpora.toy import ToyConfig

        ev = settings.toy_eval_tokens
        toy_config = ToyConfig(
            n_train_tokens=settings.toy_train_tokens or ToyConfig.n_train_tokens,
            n_valid_tokens=ev or ToyConfig.n_valid_tokens, n_test_tokens=ev or ToyConfig.n_test_tokens)
    tokenizer = None
    if settings.tokenizer is not None:  # the corpus's own spec (lower-casing, normalisation) with another kind
        from corpora.registry import REGISTRY

        base = REGISTRY[settings.corpus].tokenizer if settings.corpus in REGISTRY else None
        tokenizer = spec_from_text(settings.tokenizer, base)  # "bpe:8000": learned on the training split
    corpus = open_text(settings.corpus, splits=SPLITS, data_dir=data_dir, toy_config=toy_config, tokenizer=tokenizer,
                       valid=settings.valid_file, test=settings.test_file)
    for split in SPLITS:
        if split not in corpus.splits or not corpus.splits[split]:
            raise InputError(f"corpus {settings.corpus!r} has no {split} text",
                             fix="compare on a corpus with train, valid and test splits")
    ds = prepare(corpus)
    spec = corpus.tokenizer or TokenizerSpec()
    sizes = {s: dict(text_sizes(corpus.splits[s], ds.encoded[s], spec), bytes=corpus.n_bytes.get(s)) for s in SPLITS}
    if settings.corpus == "toy" and toy_config is None:
        from corpora.toy import ToyConfig

        toy_config = ToyConfig()
    return CompareData(dataset=ds, name=settings.corpus, fingerprint=fingerprint(ds), sizes=sizes,
                       truth=dict(corpus.truth or {}), toy_config=toy_config, split_policy=corpus.split_policy,
                       split_note=corpus.split_note,
                       sentence_bytes={s: b for s, b in corpus.sentence_bytes.items()
                                       if len(b) == ds.encoded[s].n_sentences})


def text_sizes(sentences: list, encoded: EncodedText, spec: TokenizerSpec) -> dict:
    """Sentences, predicted tokens, words and characters of a split.

    Characters: each sentence detokenized (as the tokenizer would print it) plus one
    newline, the character a sentence end stands for.  Words: whitespace-separated
    words of the detokenized sentences (sentence ends are not words).
    """
    chars = 0
    words = 0
    tok = make_tokenizer(spec)  # once: a learned tokenizer loads its pieces when it is built
    for sent in sentences:
        text = tok.decode(list(sent))
        chars += len(text) + 1
        words += len(text.split())
    return {"sentences": encoded.n_sentences, "tokens": encoded.n_tokens, "words": words, "chars": chars}


def fingerprint(ds) -> str:
    h = hashlib.sha256()
    h.update(json.dumps(ds.vocab.to_dict(), sort_keys=True).encode("utf-8"))
    for split in SPLITS:
        enc = ds.encoded[split]
        h.update(split.encode())
        h.update(np.ascontiguousarray(enc.ids, dtype=np.int64).tobytes())
        h.update(np.ascontiguousarray(enc.starts, dtype=np.int64).tobytes())
    return h.hexdigest()[:20]


def prefix(enc: EncodedText, fraction: float) -> EncodedText:
    """The first whole sentences of ``enc`` holding at least ``fraction`` of its tokens (at least one)."""
    if fraction >= 1.0:
        return enc
    want = fraction * enc.n_tokens
    ends = enc.starts[1:]
    m = int(np.searchsorted(ends, want, side="left")) + 1
    m = max(1, min(m, enc.n_sentences))
    return EncodedText(enc.ids[: enc.starts[m]], enc.starts[: m + 1].copy())


def cache_key(kind: str, settings: dict, data_fingerprint: str) -> str:
    """Stable hash of what determines a result: the model's settings and the data."""
    payload = json.dumps({"kind": kind, "settings": settings, "data": data_fingerprint, "v": CACHE_VERSION},
                         sort_keys=True, default=str)
    return hashlib.sha256(payload.encode("utf-8")).hexdigest()[:20]


CACHE_VERSION = 1


def toy_token_log2probs(toy_config, sentences: list) -> list:
    """Exact log2 p of every token (words and ``</s>``) of toy sentences under the true language."""
    import math

    from corpora.toy import EOS, ToyLanguage

    lang = ToyLanguage(toy_config)
    out = []
    for sent in sentences:
        row = []
        for i, w in enumerate(list(sent) + [EOS]):
            p = lang.next_word_distribution(sent[:i]).get(w, 0.0)
            row.append(math.log2(p) if p > 0 else float("-inf"))
        out.append(row)
    return out
