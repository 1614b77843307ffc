"""The vocabulary every model in the toolkit shares.

Ids are fixed for the special tokens and frequency-sorted for words::

    0 <pad>   padding for neural minibatches; never predicted
    1 <s>     sentence start; context only, never predicted
    2 </s>    sentence end; predicted once per sentence
    3 <unk>   the unknown word (a corpus's own unknown token, e.g. PTB's, *is* this one)
    4 ...     words, most frequent first; ties broken by code-point order

The *predicted types* are everything but ``<pad>`` and ``<s>``: ``</s>``, ``<unk>``
and the words.  Their number, :attr:`Vocab.n_types`, is the |V| of perplexity and of
the n-gram uniform floor.  On PTB it is 10,000 (9,999 words incl. ``<unk>`` plus
``</s>``).  The vocabulary is fitted on the training split only.
"""
from __future__ import annotations

import itertools
import json
import os
from collections import Counter
from typing import Iterable, Mapping, Optional, Sequence

import numpy as np

from .errors import InputError, NotFittedError
from .textio import atomic_write_text, read_text
from .tokenize import TokenizerSpec

FORMAT = "ngramlm.vocab"
FORMAT_VERSION = 1
PAD_ID, BOS_ID, EOS_ID, UNK_ID = 0, 1, 2, 3
N_SPECIALS = 4
ID_DTYPE = np.int32


def _json_int(value: object, name: str, minimum: int) -> int:
    """An integer field of a vocabulary file (JSON true/false and 1.5 are not integers)."""
    if not isinstance(value, int) or isinstance(value, bool) or value < minimum:
        raise ValueError(f"{name} must be an integer >= {minimum}, got {value!r}")
    return value


def _json_str(value: object, name: str) -> str:
    if not isinstance(value, str):
        raise TypeError(f"{name} must be a string, got {value!r}")
    return value


class Vocab:
    """Token <-> id mapping fitted on training sentences.

    >>> v = Vocab(min_count=2).fit([["a", "b", "a"], ["c", "a", "b"]])
    >>> v
    Vocab(n_types=4, words=2 (+<unk>), min_count=2, max_size=None, unk='<unk>', tokenizer=whitespace)
    >>> v.encode(["a", "c", "zzz"]).tolist()
    [4, 3, 3]
    >>> v.decode([4, 5, 2])
    ['a', 'b', '</s>']
    """

    def __init__(
        self,
        *,
        min_count: int = 1,
        max_size: Optional[int] = None,
        unk_token: str = "<unk>",
        bos_token: str = "<s>",
        eos_token: str = "</s>",
        pad_token: str = "<pad>",
        tokenizer: Optional[TokenizerSpec] = None,
    ) -> None:
        self.min_count = min_count
        self.max_size = max_size
        self.unk_token = unk_token
        self.bos_token = bos_token
        self.eos_token = eos_token
        self.pad_token = pad_token
        self.tokenizer = tokenizer

    # ------------------------------------------------------------------ fitting
    def _check_params(self) -> None:
        if not isinstance(self.min_count, (int, np.integer)) or isinstance(self.min_count, bool) or self.min_count < 1:
            raise InputError(f"min_count must be an integer >= 1, got {self.min_count!r}", fix="use --min-count 1 or more")
        if self.max_size is not None and (
            not isinstance(self.max_size, (int, np.integer)) or isinstance(self.max_size, bool) or self.max_size < 1
        ):
            raise InputError(
                f"max_size must be an integer >= 1 or None, got {self.max_size!r}", fix="use --max-size 1 or more, or omit it"
            )
        specials = [self.pad_token, self.bos_token, self.eos_token, self.unk_token]
        if len(set(specials)) != 4:
            raise InputError(f"special tokens must be distinct, got {specials}", fix="choose four different strings")

    def fit(self, sentences: Iterable[Sequence[str]]) -> "Vocab":
        """Count tokens of the *training* sentences and build the id mapping."""
        self._check_params()
        counts: Counter[str] = Counter()
        for sent in sentences:
            counts.update(sent)
        return self.fit_counts(counts)

    def fit_counts(self, counts: Mapping[str, int]) -> "Vocab":
        """Build the mapping from precomputed token counts (e.g. merged from chunks)."""
        self._check_params()
        for reserved in (self.pad_token, self.bos_token, self.eos_token):
            if counts.get(reserved):
                raise InputError(
                    f"the training text contains the reserved token {reserved!r} {counts[reserved]} times",
                    fix="sentence boundaries are added by the toolkit: remove these tokens from the text",
                )
        self.counts_ = {w: int(c) for w, c in counts.items()}
        n_unk_raw = self.counts_.get(self.unk_token, 0)
        words = [(w, c) for w, c in self.counts_.items() if w != self.unk_token and c >= self.min_count]
        # Deterministic order: frequency descending, then code-point order.
        words.sort(key=lambda wc: (-wc[1], wc[0]))
        if self.max_size is not None:
            words = words[: self.max_size]
        self.itos_ = [self.pad_token, self.bos_token, self.eos_token, self.unk_token] + [w for w, _ in words]
        self.stoi_ = {w: i for i, w in enumerate(self.itos_)}
        kept = sum(c for _, c in words)
        self.n_train_tokens_ = sum(self.counts_.values())
        # Training tokens that map to <unk>: the corpus's own <unk> plus cut-off words.
        self.n_train_unk_ = self.n_train_tokens_ - kept
        self.n_corpus_unk_ = n_unk_raw
        return self

    def _check_fitted(self) -> None:
        if not hasattr(self, "itos_"):
            raise NotFittedError(self)

    # ------------------------------------------------------------------ mapping
    pad_id, bos_id, eos_id, unk_id = PAD_ID, BOS_ID, EOS_ID, UNK_ID

    def __len__(self) -> int:
        """Number of ids, specials included (the size of an embedding table)."""
        self._check_fitted()
        return len(self.itos_)

    @property
    def n_types(self) -> int:
        """Number of predicted types: words, ``<unk>`` and ``</s>`` (not ``<s>``, ``<pad>``)."""
        return len(self) - 2

    @property
    def n_words(self) -> int:
        """Word types including ``<unk>`` (n_types minus the sentence end)."""
        return len(self) - 3

    def __contains__(self, token: str) -> bool:
        self._check_fitted()
        return token in self.stoi_

    def __getitem__(self, token: str) -> int:
        self._check_fitted()
        return self.stoi_.get(token, UNK_ID)

    def lookup_token(self, idx: int) -> str:
        self._check_fitted()
        return self.itos_[idx]

    def encode(self, tokens: Sequence[str]) -> np.ndarray:
        """Token strings -> int32 ids; unknown tokens map to ``<unk>``."""
        self._check_fitted()
        get = self.stoi_.get
        return np.fromiter((get(t, UNK_ID) for t in tokens), dtype=ID_DTYPE, count=len(tokens))

    def decode(self, ids: Iterable[int]) -> list[str]:
        self._check_fitted()
        itos = self.itos_
        return [itos[int(i)] for i in ids]

    # sklearn-style aliases
    transform = encode
    inverse_transform = decode

    def encode_sentences(self, sentences: Iterable[Sequence[str]]) -> "EncodedText":
        """Encode sentences into one flat id stream, each sentence followed by ``</s>``."""
        self._check_fitted()
        sentences = sentences if isinstance(sentences, list) else list(sentences)
        lengths = np.fromiter(map(len, sentences), dtype=np.int64, count=len(sentences))
        starts = np.zeros(len(sentences) + 1, dtype=np.int64)
        np.cumsum(lengths + 1, out=starts[1:])
        # Every word looked up by one C-level map (dict.get with <unk> as the default), the </s>
        # slots left free in between: no Python frame per token.
        flat = np.full(int(starts[-1]), EOS_ID, dtype=ID_DTYPE)
        n_words = int(lengths.sum())
        words = np.fromiter(map(self.stoi_.get, itertools.chain.from_iterable(sentences), itertools.repeat(UNK_ID)),
                            dtype=ID_DTYPE, count=n_words)
        word_slot = np.ones(len(flat), dtype=bool)
        word_slot[starts[1:] - 1] = False
        flat[word_slot] = words
        return EncodedText(flat, starts)

    def fit_encode_lines(self, lines: Sequence[str], tokenize, *, chunk_lines: int = 4096,
                         keep_empty: bool = False) -> "EncodedText":
        """Fit on lines of training text and encode them in one pass (the fast path).

        Equivalent to ``fit(sents).encode_sentences(sents)`` with ``sents`` the
        tokenized non-empty lines.  Lines are processed in chunks: each chunk's
        tokens get provisional ids (first-seen order) through C-level ``map`` over a
        dict, so only one chunk of token strings is alive at a time; the provisional
        ids are renumbered to the frequency-sorted vocabulary at the end.
        """
        self._check_params()
        prov: dict = {}  # token -> provisional id
        parts: list = []
        lengths: list = []
        for a in range(0, len(lines), chunk_lines):
            toks: list = []
            for line in lines[a:a + chunk_lines]:
                t = tokenize(line)
                if t or keep_empty:  # keep_empty: a blank line is a sentence of just </s> (KenLM's count)
                    toks.extend(t)
                    lengths.append(len(t))
            for w in set(toks).difference(prov):
                prov[w] = len(prov)
            parts.append(np.fromiter(map(prov.__getitem__, toks), dtype=np.int64, count=len(toks)))
            del toks
        flat = np.concatenate(parts) if parts else np.zeros(0, dtype=np.int64)
        del parts
        words = list(prov)
        freq = np.bincount(flat, minlength=len(words))
        self.fit_counts(dict(zip(words, freq.tolist())))
        # provisional id -> final id (cut-off words -> <unk>)
        stoi = self.stoi_
        remap = np.fromiter((stoi.get(w, UNK_ID) for w in words), dtype=ID_DTYPE, count=len(words))
        lengths_arr = np.asarray(lengths, dtype=np.int64)
        n_sent = len(lengths_arr)
        ids = np.empty(len(flat) + n_sent, dtype=ID_DTYPE)
        ends = np.cumsum(lengths_arr + 1)
        is_eos = np.zeros(len(ids), dtype=bool)
        is_eos[ends - 1] = True
        ids[is_eos] = EOS_ID
        ids[~is_eos] = remap[flat]
        return EncodedText(ids, np.concatenate([[0], ends]).astype(np.int64))

    # ------------------------------------------------------------------ statistics
    def oov_count(self, sentences: Iterable[Sequence[str]]) -> tuple[int, int]:
        """``(n_oov, n_tokens)`` over word tokens (sentence ends excluded).

        A token is OOV when it is not a vocabulary type.  A corpus's own unknown
        token (PTB's ``<unk>``) that occurred in training *is* a type -- it has
        counts like any word -- so it is not OOV; it is OOV only when the training
        text never contained it.
        """
        self._check_fitted()
        stoi = dict(self.stoi_)
        if not self.n_corpus_unk_:
            del stoi[self.unk_token]
        n = oov = 0
        for sent in sentences:
            n += len(sent)
            oov += sum(1 for t in sent if t not in stoi)
        return oov, n

    def oov_rate(self, sentences: Iterable[Sequence[str]]) -> float:
        oov, n = self.oov_count(sentences)
        return oov / n if n else 0.0

    def coverage(self, k: int) -> float:
        """Share of training word tokens covered by the ``k`` most frequent word types."""
        self._check_fitted()
        freqs = sorted((c for w, c in self.counts_.items() if w != self.unk_token), reverse=True)
        total = self.n_train_tokens_
        return sum(freqs[:k]) / total if total else 0.0

    def stats(self) -> dict:
        self._check_fitted()
        return {
            "n_types": self.n_types,
            "n_words": self.n_words,
            "n_ids": len(self),
            "train_tokens": self.n_train_tokens_,
            "train_types_seen": len(self.counts_),
            "train_tokens_mapped_to_unk": self.n_train_unk_,
            "train_unk_rate": self.n_train_unk_ / self.n_train_tokens_ if self.n_train_tokens_ else 0.0,
            "min_count": self.min_count,
            "max_size": self.max_size,
        }

    # ------------------------------------------------------------------ persistence
    def to_dict(self) -> dict:
        self._check_fitted()
        return {
            "format": FORMAT,
            "version": FORMAT_VERSION,
            "params": {
                "min_count": self.min_count,
                "max_size": self.max_size,
                "unk_token": self.unk_token,
                "bos_token": self.bos_token,
                "eos_token": self.eos_token,
                "pad_token": self.pad_token,
            },
            "tokenizer": None if self.tokenizer is None else self.tokenizer.to_dict(),
            "itos": self.itos_,
            "counts": [self.counts_.get(w, 0) for w in self.itos_],
            # Training counts of words cut by min_count/max_size, so coverage and
            # cut-off statistics survive a save/load round trip.
            "cut_counts": {w: c for w, c in self.counts_.items() if w not in self.stoi_},
            "n_train_tokens": self.n_train_tokens_,
            "n_train_unk": self.n_train_unk_,
            "n_corpus_unk": self.n_corpus_unk_,
        }

    @classmethod
    def from_dict(cls, data: object, *, path: Optional[str] = None) -> "Vocab":
        if not isinstance(data, dict) or data.get("format") != FORMAT:
            raise InputError(
                "not an ngramlm vocabulary file (missing format tag)", path=path,
                fix="build one with `ngramlm vocab build`",
            )
        if data.get("version") != FORMAT_VERSION:
            raise InputError(
                f"vocabulary format version {data.get('version')!r} is not supported (expected {FORMAT_VERSION})",
                path=path, fix="rebuild the vocabulary with this version of the toolkit",
            )
        try:
            params = data["params"]
            if not isinstance(params, dict):
                raise TypeError(f"params is {params!r}, not an object")
            tok = data.get("tokenizer")
            if tok is not None and not isinstance(tok, dict):
                raise TypeError(f"tokenizer is {tok!r}, not an object")
            max_size = params["max_size"]
            v = cls(
                min_count=_json_int(params["min_count"], "min_count", 1),
                max_size=None if max_size is None else _json_int(max_size, "max_size", 1),
                unk_token=_json_str(params["unk_token"], "unk_token"),
                bos_token=_json_str(params["bos_token"], "bos_token"),
                eos_token=_json_str(params["eos_token"], "eos_token"),
                pad_token=_json_str(params["pad_token"], "pad_token"),
                tokenizer=None if tok is None else TokenizerSpec.from_dict(tok),
            )
            v._check_params()
            itos, counts = data["itos"], data["counts"]
            if not isinstance(itos, list) or not isinstance(counts, list):
                raise TypeError("itos and counts must be lists")
            itos = [_json_str(w, "itos entry") for w in itos]
            counts = [_json_int(c, "count", 0) for c in counts]
            if len(itos) != len(counts) or len(itos) < N_SPECIALS:
                raise ValueError("itos and counts differ in length")
            if itos[:N_SPECIALS] != [v.pad_token, v.bos_token, v.eos_token, v.unk_token]:
                raise ValueError("special tokens are not at their fixed ids")
            if len(set(itos)) != len(itos):
                raise ValueError("duplicate tokens")
            cut = data.get("cut_counts") or {}
            if not isinstance(cut, dict):
                raise TypeError(f"cut_counts is {cut!r}, not an object")
            v.itos_ = itos
            v.stoi_ = {w: i for i, w in enumerate(itos)}
            v.counts_ = {w: c for w, c in zip(itos, counts) if c}
            v.counts_.update({w: _json_int(c, "cut count", 0) for w, c in cut.items()})
            v.n_train_tokens_ = _json_int(data["n_train_tokens"], "n_train_tokens", 0)
            v.n_train_unk_ = _json_int(data["n_train_unk"], "n_train_unk", 0)
            v.n_corpus_unk_ = _json_int(data.get("n_corpus_unk", 0), "n_corpus_unk", 0)
        except InputError as exc:  # a bad tokenizer spec or parameter: say which file holds it
            raise InputError(f"corrupt vocabulary file ({exc.message})", path=path,
                             fix=exc.fix or "rebuild it with `ngramlm vocab build`") from None
        except (KeyError, TypeError, ValueError) as exc:
            raise InputError(
                f"corrupt vocabulary file ({exc})", path=path, fix="rebuild it with `ngramlm vocab build`"
            ) from None
        return v

    def save(self, path: os.PathLike | str) -> None:
        atomic_write_text(path, json.dumps(self.to_dict(), ensure_ascii=False) + "\n")

    @classmethod
    def load(cls, path: os.PathLike | str) -> "Vocab":
        text = read_text(path)
        try:
            data = json.loads(text)
        except json.JSONDecodeError as exc:
            raise InputError(
                f"not an ngramlm vocabulary file (invalid JSON: {exc.msg})", path=path, line=exc.lineno,
                fix="build one with `ngramlm vocab build`",
            ) from None
        except (ValueError, RecursionError) as exc:  # a 5000-digit number, nesting thousands deep
            raise InputError(f"not an ngramlm vocabulary file (unreadable JSON: {exc})", path=path,
                             fix="build one with `ngramlm vocab build`") from None
        return cls.from_dict(data, path=str(path))

    def __eq__(self, other: object) -> bool:
        return (
            isinstance(other, Vocab)
            and hasattr(self, "itos_")
            and hasattr(other, "itos_")
            and self.itos_ == other.itos_
            and self.tokenizer == other.tokenizer
        )

    def __repr__(self) -> str:
        if not hasattr(self, "itos_"):
            return f"Vocab(unfitted, min_count={self.min_count}, max_size={self.max_size}, unk={self.unk_token!r})"
        tok = self.tokenizer.describe() if self.tokenizer else "whitespace"
        return (
            f"Vocab(n_types={self.n_types}, words={self.n_words - 1} (+{self.unk_token}), "
            f"min_count={self.min_count}, max_size={self.max_size}, unk={self.unk_token!r}, tokenizer={tok})"
        )


class EncodedText:
    """A tokenized, encoded split: one flat int32 id stream plus sentence offsets.

    ``ids[starts[i]:starts[i+1]]`` is sentence *i* followed by its ``</s>``.
    Every id in ``ids`` is a predicted token, so ``len(ids)`` is the number of
    predictions a model makes on this text (words plus sentence ends).
    """

    __slots__ = ("ids", "starts")

    def __init__(self, ids: np.ndarray, starts: np.ndarray) -> None:
        self.ids = ids
        self.starts = starts

    @property
    def n_sentences(self) -> int:
        return len(self.starts) - 1

    @property
    def n_tokens(self) -> int:
        """Predicted tokens: words plus one sentence end per sentence."""
        return int(len(self.ids))

    @property
    def n_words(self) -> int:
        return self.n_tokens - self.n_sentences

    @property
    def n_unk(self) -> int:
        return int(np.count_nonzero(self.ids == UNK_ID))

    def sentence(self, i: int) -> np.ndarray:
        return self.ids[self.starts[i]:self.starts[i + 1]]

    def __len__(self) -> int:
        return self.n_tokens

    def __repr__(self) -> str:
        return f"EncodedText(sentences={self.n_sentences}, tokens={self.n_tokens})"
