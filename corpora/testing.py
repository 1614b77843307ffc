"""Helpers the tests and the reader fuzzer (benchmarks/fuzz_readers.py) share: a tripwire for the rule
that no model is ever loaded with pickle, the places of a JSON document to mutate, and the toy
training text the streaming tests write to files."""
from __future__ import annotations

import contextlib
import pickle
from typing import Callable
from unittest import mock


class PickleUsed(Exception):
    """Raised inside the guarded block when something calls pickle.load or pickle.loads."""


@contextlib.contextmanager
def pickle_tripwire(on_use: Callable[[], None]):
    """Replace pickle's loaders by tripwires for the block, then call ``on_use()`` if anything called
    them -- even if the caller caught the tripwire's exception (and, say, turned it into an InputError)."""
    calls = []

    def trip(*a, **k):
        calls.append(a)
        raise PickleUsed("pickle was used")

    with mock.patch.object(pickle, "load", trip), mock.patch.object(pickle, "loads", trip):
        try:
            yield
        finally:
            if calls:
                on_use()


def json_paths(obj, prefix=()):
    """Every place in a JSON document, as a tuple of keys and indexes (the root is ``()``)."""
    yield prefix
    if isinstance(obj, dict):
        for k, v in obj.items():
            yield from json_paths(v, prefix + (k,))
    elif isinstance(obj, list):
        for i, v in enumerate(obj):
            yield from json_paths(v, prefix + (i,))


def toy_training_lines(n_tokens: int = 200_000) -> list:
    """The toy corpus's training sentences as text lines, with three blank lines (KenLM counts each
    as a sentence of just ``</s>``): at lines 10-11 and 5000."""
    from .corpus import load_corpus
    from .toy import ToyConfig

    corpus = load_corpus("toy", toy_config=ToyConfig(n_train_tokens=n_tokens, n_valid_tokens=2000, n_test_tokens=2000))
    lines = [" ".join(s) for s in corpus.sentences("train")]
    lines[10:10] = ["", ""]
    lines.insert(5000, "")
    return lines
