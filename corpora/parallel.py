"""Parallel corpora: sentence pairs for sequence-to-sequence work.

A parallel corpus is a TSV file, one pair per line (``source<TAB>target[<TAB>...]``;
``fra-eng`` has a third column, the CC-BY attribution, which is kept on disk and not
loaded).  :func:`load_parallel` reads it, shuffles the pairs with
``numpy.random.default_rng(seed)`` (the file is sorted by length, so a contiguous tail
would be a test set of the longest sentences only), splits them into
train / valid / test, tokenizes both sides, and fits one vocabulary per language on
the *training* pairs only::

    >>> from corpora.parallel import load_parallel
    >>> pc = load_parallel("fra-eng", data_dir="../shared/corpora")     # doctest: +SKIP
    >>> pc.sizes()["test"]["pairs"], pc.pairs["train"][0]                # doctest: +SKIP
    (500, (['she', 'smiled', '.'], ['elle', 'rit', '.']))
    >>> src_ids, tgt_ids = pc.encode("train")                            # doctest: +SKIP

Ids are the toolkit's :class:`~corpora.vocab.Vocab` ids (0 ``<pad>``, 1 ``<s>``,
2 ``</s>``, 3 ``<unk>``, then words); :meth:`ParallelCorpus.encode` adds no specials, so
the model decides where ``<s>``/``</s>`` go.  This module never imports torch.
"""
from __future__ import annotations

import hashlib
import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Optional, Sequence

import numpy as np

from .corpus import missing_corpus_error
from .datadir import resolve_data_dir
from .errors import InputError
from .registry import REGISTRY, SPLITS, ParallelInfo, get_spec
from .textio import iter_lines
from .tokenize import TokenizerSpec, make_tokenizer
from .vocab import Vocab

__all__ = ["ParallelInfo", "ParallelCorpus", "load_parallel", "read_pairs", "split_pairs", "parallel_names"]

# A TSV given by path (not a registered name) is read with these defaults.
DEFAULT_TOKENIZER = TokenizerSpec(kind="punct", lower=True)
_FINGERPRINT_VERSION = 1


def parallel_names() -> list:
    """The registered parallel corpora."""
    return sorted(name for name, spec in REGISTRY.items() if spec.parallel is not None)


@dataclass
class ParallelCorpus:
    """Tokenized sentence pairs per split, with a source and a target vocabulary fitted on train."""

    name: str
    tokenizer: TokenizerSpec
    pairs: dict  # split -> [(src_tokens, tgt_tokens), ...]
    raw: dict  # split -> [(src_line, tgt_line), ...], untokenized, same order as ``pairs``
    src_vocab: Vocab  # fitted on the train sources only
    tgt_vocab: Vocab  # fitted on the train targets only
    seed: int
    src_lang: str = "src"
    tgt_lang: str = "tgt"
    path: str = ""  # the TSV the pairs were read from

    def _split(self, split: str) -> list:
        if split not in self.pairs:
            raise InputError(f"parallel corpus {self.name!r} has no split {split!r}",
                             fix=f"use one of {', '.join(self.pairs)}")
        return self.pairs[split]

    def encode(self, split: str) -> tuple:
        """``(src_ids, tgt_ids)``: one int32 array per sentence, no ``<s>``/``</s>`` added."""
        pairs = self._split(split)
        return ([self.src_vocab.encode(s) for s, _ in pairs], [self.tgt_vocab.encode(t) for _, t in pairs])

    def target_sentences(self, split: str) -> list:
        """The target side as token lists (for an n-gram or neural LM of the target language)."""
        return [t for _, t in self._split(split)]

    def sizes(self) -> dict:
        """``{split: {"pairs", "src_tokens", "tgt_tokens"}}`` (tokens without specials)."""
        return {split: {"pairs": len(pairs), "src_tokens": sum(len(s) for s, _ in pairs),
                        "tgt_tokens": sum(len(t) for _, t in pairs)}
                for split, pairs in self.pairs.items()}

    @property
    def fingerprint(self) -> str:
        """SHA-256 (hex) of everything a model's data depends on: the encoded splits, both
        vocabularies, the tokenizer and the seed.  Equal fingerprints, equal training data."""
        h = hashlib.sha256()
        header = {"format": "ngramlm.parallel", "version": _FINGERPRINT_VERSION, "seed": int(self.seed),
                  "tokenizer": self.tokenizer.to_dict(), "src_itos": self.src_vocab.itos_,
                  "tgt_itos": self.tgt_vocab.itos_, "splits": list(self.pairs)}
        h.update(json.dumps(header, ensure_ascii=False, sort_keys=True).encode("utf-8"))
        for split in self.pairs:
            src, tgt = self.encode(split)
            # Lengths first, so the boundaries between sentences are part of the hash.
            h.update(np.asarray([len(x) for x in src] + [len(y) for y in tgt], dtype="<i8").tobytes())
            for x, y in zip(src, tgt):
                h.update(x.astype("<i4").tobytes())
                h.update(y.astype("<i4").tobytes())
        return h.hexdigest()

    def __repr__(self) -> str:
        sizes = ", ".join(f"{k}={len(v)} pairs" for k, v in self.pairs.items())
        return (f"ParallelCorpus({self.name!r}, {self.src_lang}->{self.tgt_lang}, "
                f"tokenizer={self.tokenizer.describe()}, "
                f"{sizes}, src ids={len(self.src_vocab)}, tgt ids={len(self.tgt_vocab)}, seed={self.seed})")


# ---------------------------------------------------------------------------- reading and splitting
def _check_column(value: object, what: str) -> int:
    if not isinstance(value, (int, np.integer)) or isinstance(value, bool) or value < 0:
        raise InputError(f"{what} must be a column index >= 0, got {value!r}", fix="use 0 for the first column")
    return int(value)


def read_pairs(path: os.PathLike | str, *, src_column: int = 0, tgt_column: int = 1) -> list:
    """``[(src_line, tgt_line), ...]`` from a tab-separated file (plain or ``.gz``), in file order.

    Fields are stripped of surrounding whitespace; blank lines are skipped; further
    columns (an attribution) are ignored.  A line with too few columns or an empty
    source/target field, invalid UTF-8 and an empty file are :class:`InputError`\\ s
    naming the file and line.
    """
    src_column = _check_column(src_column, "src_column")
    tgt_column = _check_column(tgt_column, "tgt_column")
    if src_column == tgt_column:
        raise InputError(f"src_column and tgt_column are both {src_column}", fix="give two different columns")
    need = max(src_column, tgt_column) + 1
    pairs = []
    for number, line in iter_lines(path):  # UTF-8, gzip and empty-file checks, located
        if not line.strip():
            continue
        cols = line.split("\t")
        if len(cols) < need:
            raise InputError(
                f"{len(cols)} tab-separated column{'s' if len(cols) != 1 else ''}, expected at least {need} "
                f"(source in column {src_column + 1}, target in column {tgt_column + 1})",
                path=path, line=number, fix="separate the source and target sentences by a tab, or remove this line",
            )
        src, tgt = cols[src_column].strip(), cols[tgt_column].strip()
        for text, side, col in ((src, "source", src_column), (tgt, "target", tgt_column)):
            if not text:
                raise InputError(f"the {side} sentence (column {col + 1}) is empty", path=path, line=number,
                                 fix="give both sentences of the pair, or remove this line")
        pairs.append((src, tgt))
    if not pairs:
        raise InputError("no sentence pairs (only blank lines)", path=path, fix="pass a TSV of sentence pairs")
    return pairs


def _check_seed(seed: object) -> int:
    if not isinstance(seed, (int, np.integer)) or isinstance(seed, bool) or seed < 0:
        raise InputError(f"seed must be an integer >= 0, got {seed!r}", fix="use e.g. seed=0")
    return int(seed)


def _shuffled(pairs: Sequence, seed: int) -> list:
    perm = np.random.default_rng(_check_seed(seed)).permutation(len(pairs))
    return [pairs[i] for i in perm]


def _cut(pairs: list, holdout: Sequence[float]) -> dict:
    """Consecutive train / valid / test parts of already shuffled pairs."""
    try:
        valid_share, test_share = (float(x) for x in holdout)
    except (TypeError, ValueError):
        raise InputError(f"holdout must be two shares (valid, test), got {holdout!r}",
                         fix="use e.g. (0.1, 0.1)") from None
    if not (0 <= valid_share < 1 and 0 <= test_share < 1 and valid_share + test_share < 1):
        raise InputError(f"holdout shares must be in [0, 1) and sum to less than 1, got {tuple(holdout)!r}",
                         fix="use e.g. (0.1, 0.1)")
    n = len(pairs)
    # A positive share always holds out at least one pair, as corpus.holdout_ranges does for lines.
    n_valid = max(1, int(round(n * valid_share))) if valid_share > 0 else 0
    n_test = max(1, int(round(n * test_share))) if test_share > 0 else 0
    n_train = n - n_valid - n_test
    if n_train < 1:
        raise InputError(f"only {n} sentence pairs: too few to hold out {n_valid} valid and {n_test} test pairs",
                         fix="use more pairs (a larger max_pairs) or smaller holdout shares")
    return {"train": pairs[:n_train], "valid": pairs[n_train:n_train + n_valid], "test": pairs[n_train + n_valid:]}


def split_pairs(pairs: Sequence, *, holdout: Sequence[float] = (0.1, 0.1), seed: int = 0) -> dict:
    """``{"train", "valid", "test"}`` lists of ``pairs``: shuffled with
    ``numpy.random.default_rng(seed).permutation``, then cut into consecutive parts of
    shares ``1 - valid - test``, ``valid`` and ``test``.  Deterministic for a seed; every
    pair lands in exactly one split."""
    return _cut(_shuffled(pairs, seed), holdout)


# ---------------------------------------------------------------------------- the loader
def _resolve(name: str, data_dir) -> tuple:
    """(corpus name, ParallelInfo, TSV path, default tokenizer) for a registered name or a TSV path."""
    if name in REGISTRY:
        spec = get_spec(name)
        if spec.parallel is None:
            raise InputError(
                f"corpus {name!r} is not a parallel corpus (no sentence pairs)",
                fix=f"load it with corpora.load_corpus({name!r}); parallel corpora: {', '.join(parallel_names())}",
            )
        path = resolve_data_dir(data_dir) / spec.name / spec.parallel.filename
        if not path.exists():
            raise missing_corpus_error(spec, path, data_dir)
        return spec.name, spec.parallel, path, spec.tokenizer
    if os.sep in name or Path(name).suffix or Path(name).exists():
        path = Path(name)
        return path.name, ParallelInfo(filename=path.name, src_lang="src", tgt_lang="tgt"), path, DEFAULT_TOKENIZER
    get_spec(name)  # raises "unknown corpus", listing the known ones
    raise AssertionError("unreachable")


def load_parallel(
    name: str = "fra-eng",
    *,
    data_dir: Optional[os.PathLike | str] = None,
    seed: int = 0,
    tokenizer: Optional[TokenizerSpec] = None,
    min_count: Optional[int] = None,
    max_pairs: Optional[int] = None,
) -> ParallelCorpus:
    """Load a registered parallel corpus (``fra-eng``) or a TSV file by path.

    The pairs are shuffled with ``seed``; ``max_pairs`` keeps the first N of the shuffled
    pairs (for quick runs), which are then split by the corpus's holdout shares -- so a
    smaller ``max_pairs`` gives a different (smaller) test set.  ``tokenizer`` overrides
    the corpus's spec; ``min_count`` overrides its vocabulary threshold (2 for fra-eng).
    The data directory is ``data_dir``, else ``$NGRAMLM_DATA_DIR``, else the user cache.
    """
    name, info, path, default_tok = _resolve(str(name), data_dir)
    seed = _check_seed(seed)
    if max_pairs is not None and (not isinstance(max_pairs, (int, np.integer)) or isinstance(max_pairs, bool)
                                  or max_pairs < 1):
        raise InputError(f"max_pairs must be an integer >= 1 or None, got {max_pairs!r}", fix="use e.g. max_pairs=1000")
    tok_spec = tokenizer or default_tok
    pairs = read_pairs(path, src_column=info.src_column, tgt_column=info.tgt_column)
    shuffled = _shuffled(pairs, seed)
    if max_pairs is not None:
        shuffled = shuffled[:max_pairs]
    raw = _cut(shuffled, info.holdout)
    tok = make_tokenizer(tok_spec)
    tokenized = {split: [(tok(s), tok(t)) for s, t in raw[split]] for split in SPLITS}
    mc = info.min_count if min_count is None else min_count
    train = tokenized["train"]
    src_vocab = Vocab(min_count=mc, tokenizer=tok_spec).fit(s for s, _ in train)
    tgt_vocab = Vocab(min_count=mc, tokenizer=tok_spec).fit(t for _, t in train)
    return ParallelCorpus(name=name, tokenizer=tok_spec, pairs=tokenized, raw=raw, src_vocab=src_vocab,
                          tgt_vocab=tgt_vocab, seed=seed, src_lang=info.src_lang, tgt_lang=info.tgt_lang,
                          path=str(path))
