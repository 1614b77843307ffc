"""Model files into models: the readers return tables, this module makes the :class:`NgramLM`.

The ARPA reader (:mod:`ngramlm.io.arpa`) and the native loader (:mod:`ngramlm.io.native`) know only
:class:`~ngramlm.tables.NgramTables`; here a loaded model gets its identity -- its order, and the
smoothing the file records (never a made-up one: an ARPA of KenLM or SRILM reads as smoothing
``"unknown"``, which ``fit`` refuses to re-estimate).
"""
from __future__ import annotations

import os
from typing import TYPE_CHECKING, Optional

from corpora.errors import InputError

from .io.arpa import looks_like_arpa, read_arpa_compact, read_arpa_tables
from .kenlm.format import looks_like_kenlm_binary, read_header
from .scorer import CompactScorer

if TYPE_CHECKING:  # annotations only: the estimator is imported where a model is made
    from .model import NgramLM

# The estimator (and the smoothers it imports), the native loader and the trie decoder are imported
# where they are used: ``ngramlm ppl`` on an ARPA file (a CompactScorer) needs none of them.


def read_arpa(path: os.PathLike | str, *, compact: bool = False, **kwargs) -> NgramLM:
    """Parse an ARPA file (plain or gzip) into an :class:`NgramLM` (see :func:`ngramlm.io.arpa.read_arpa_tables`).

    ``compact=True`` is for callers that only score (``ngramlm ppl``, ``score``): a file in key order
    (this toolkit's) is read a block at a time into a :class:`~ngramlm.scorer.CompactScorer`, which
    gives the same scores from about half the memory, without ever holding the file's text; any
    other file is read as without it."""
    if compact:
        tables = read_arpa_compact(path, **kwargs)
        if tables is not None:
            return CompactScorer(tables)
    from .model import NgramLM
    from .smoothing import SMOOTHERS

    tables = read_arpa_tables(path, **kwargs)
    # smoothing=None: the file does not say (its tables' smoother_name is arpa.UNRECORDED).
    recorded = tables.smoother_name if tables.smoother_name in SMOOTHERS else None
    return NgramLM.from_tables(tables, order=tables.order, smoothing=recorded)


def load_native(path: os.PathLike | str, *, mmap: Optional[bool] = None) -> NgramLM:
    """A model written by ``NgramLM.save`` (see :func:`ngramlm.io.native.load_native_tables` for ``mmap``)."""
    from .io.native import load_native_tables
    from .model import NgramLM

    tables, init_params = load_native_tables(path, mmap=mmap)
    return NgramLM.from_tables(tables, **init_params)


def load_any(path: os.PathLike | str, *, mmap: Optional[bool] = None, ngrams: bool = False,
             compact: bool = False) -> NgramLM:
    """An :class:`NgramLM` from an ARPA file (plain or gzip), a native file or a KenLM binary, told apart
    by content (a KenLM *probing* binary gives a :class:`~ngramlm.kenlm.probing.ProbingScorer`).

    ``mmap`` applies to native files: None maps large ones, True / False always / never; an ARPA
    file is always parsed into memory.  ``ngrams=True`` is for callers that need the n-grams
    themselves (export, pruning, mixing, filtering): a probing binary is refused with the reason.
    ``compact=True`` is for callers that only score: an ARPA file may then come back as a
    :class:`~ngramlm.scorer.CompactScorer` (see :func:`read_arpa`).
    """
    p = os.fspath(path)
    if not os.path.exists(p):
        raise InputError("no such model file", path=p, fix="check the path")
    if os.path.isdir(p):
        raise InputError("is a directory, not a model file", path=p, fix="pass the .arpa or .npz file")
    if looks_like_kenlm_binary(p):
        if ngrams and read_header(p).kind == "probing":
            raise InputError("a KenLM probing binary stores only 64-bit hashes of its n-grams, so the n-grams "
                             "cannot be read back", path=p,
                             fix="use the ARPA file it was built from, or a trie binary (build_binary trie / "
                                 "`ngramlm build-binary trie`), which keeps them")
        return read_kenlm_binary(p, ngrams=ngrams)
    return read_arpa(p, compact=compact and not ngrams) if looks_like_arpa(p) else load_native(p, mmap=mmap)


def read_kenlm_binary(path: os.PathLike | str, *, ngrams: bool = False):
    """A KenLM binary (``build_binary`` output).  A trie is scored in place from the mapped file
    (:class:`~ngramlm.kenlm.trie.TrieScorer`, with the compiled extension), or with ``ngrams=True``
    (or without the extension) decoded into an :class:`NgramLM` whose n-grams can be listed; a
    probing file, which stores only hashes of its n-grams, becomes a
    :class:`~ngramlm.kenlm.probing.ProbingScorer` that scores but cannot list n-grams."""
    header = read_header(path)
    if header.kind == "trie":
        from . import accel

        if not ngrams and accel.fast is not None:
            from .kenlm.trie import TrieScorer

            return TrieScorer(path)
        from .kenlm.read import read_trie_tables
        from .model import NgramLM

        tables = read_trie_tables(path)
        return NgramLM.from_tables(tables, order=tables.order, smoothing=None)
    from .kenlm.probing import ProbingScorer

    return ProbingScorer(path)


def token_log10(path: os.PathLike | str, sentences: list):
    """log10 p of every word and ``</s>`` of ``sentences`` (token lists), in order, under the model file
    ``path`` (any file :func:`load_any` reads); OOVs scored as ``<unk>``."""
    lm = load_any(path)
    enc, oov = lm.encode(sentences)
    return lm.token_scores(enc, oov=oov).log10_prob
