"""Helpers the property tests and the reader fuzzer (benchmarks/fuzz_readers.py) share: a tripwire for
the rule that no model is ever loaded with pickle, and the places of a JSON document to mutate."""
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
