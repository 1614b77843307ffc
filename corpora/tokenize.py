"""Tokenizers: pure functions from a line of text to a list of tokens.

A tokenizer is described by a :class:`TokenizerSpec` (a small, JSON-serialisable
dataclass).  The spec is saved with every vocabulary and model, so text scored
later is tokenized exactly as the training text was, and a mismatch is detected.

Kinds
-----
``whitespace``  split on runs of whitespace (PTB, WikiText, any pre-tokenized text)
``regex``       words, numbers and single punctuation marks as tokens
``char``        every character a token; spaces become ``space_symbol``
``cjk``         every Han (CJK ideograph) character a token, Latin words and numbers
                as words, punctuation as single tokens
``punct``       d2l's machine-translation preprocessing: no-break spaces (U+00A0,
                U+202F) become spaces, a space is inserted before each of ``, . ! ?``
                that directly follows a non-space character, then the text is split
                on whitespace ("Va !" -> ``Va !``, "I'm OK." -> ``I'm OK .``; apostrophes
                stay inside words)
"""
from __future__ import annotations

import re
import unicodedata
from dataclasses import asdict, dataclass
from typing import Callable, Optional

from .errors import InputError

KINDS = ("whitespace", "regex", "char", "cjk", "punct")
NORMALIZATIONS = (None, "NFC", "NFKC", "NFD", "NFKD")

# Words keep inner apostrophes and hyphens ("don't", "well-known"); numbers keep
# decimal points and thousands separators ("3.14", "1,000").
_WORD = r"[^\W\d_]+(?:['’\-][^\W\d_]+)*"
_NUMBER = r"\d+(?:[.,]\d+)*"
_REGEX_TOKEN = re.compile(rf"{_WORD}|{_NUMBER}|[^\w\s]|_", re.UNICODE)

# Han ideographs: CJK Unified Ideographs, Extension A, Compatibility Ideographs and
# the supplementary planes (Extensions B-F).
_HAN = "\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\U00020000-\U0002ebef"
_CJK_TOKEN = re.compile(
    rf"[{_HAN}]|(?:(?![{_HAN}])[^\W\d_])+(?:['’\-](?:(?![{_HAN}])[^\W\d_])+)*|{_NUMBER}|[^\w\s]|_",
    re.UNICODE,
)

# d2l's preprocess_nmt: French typography puts a (narrow) no-break space before "!" and "?".
_NO_BREAK_SPACES = str.maketrans({"\u00a0": " ", "\u202f": " "})
_GLUED_PUNCT = re.compile(r"(?<=\S)([,.!?])")


@dataclass(frozen=True)
class TokenizerSpec:
    """How text is cut into tokens.  Saved with vocabularies and models."""

    kind: str = "whitespace"
    lower: bool = False  # lower-case before tokenizing
    normalize: Optional[str] = None  # Unicode normalisation form, e.g. "NFKC"
    space_symbol: str = "▁"  # char level: the token that stands for a space

    def __post_init__(self) -> None:
        # Specs also come from JSON files (vocabularies, models): check types, not just values.
        if not isinstance(self.kind, str) or self.kind not in KINDS:
            raise InputError(
                f"unknown tokenizer {self.kind!r}", fix=f"choose one of {', '.join(KINDS)}"
            )
        if self.normalize is not None and (not isinstance(self.normalize, str) or self.normalize not in NORMALIZATIONS):
            raise InputError(
                f"unknown Unicode normalisation {self.normalize!r}", fix="choose one of NFC, NFKC, NFD, NFKD"
            )
        if not isinstance(self.lower, bool):
            raise InputError(f"tokenizer option lower must be true or false, got {self.lower!r}",
                             fix="use lower=True or lower=False")
        if not isinstance(self.space_symbol, str):
            raise InputError(f"space_symbol must be a string, got {self.space_symbol!r}", fix="use e.g. '▁' or '_'")
        if self.kind == "char" and (len(self.space_symbol) != 1 or self.space_symbol.isspace()):
            raise InputError(
                f"space_symbol must be one non-space character, got {self.space_symbol!r}",
                fix="use e.g. '▁' or '_'",
            )

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict) -> "TokenizerSpec":
        if not isinstance(data, dict):
            raise InputError(f"a tokenizer spec must be a JSON object, got {type(data).__name__}",
                             fix='give e.g. {"kind": "whitespace"}')
        known = {k: data[k] for k in ("kind", "lower", "normalize", "space_symbol") if k in data}
        return cls(**known)

    def describe(self) -> str:
        parts = [self.kind]
        if self.lower:
            parts.append("lower")
        if self.normalize:
            parts.append(self.normalize)
        return "+".join(parts)


def _prepare(text: str, spec: TokenizerSpec) -> str:
    if spec.normalize:
        text = unicodedata.normalize(spec.normalize, text)
    if spec.lower:
        text = text.lower()
    return text


def whitespace_tokenize(text: str) -> list[str]:
    return text.split()


def regex_tokenize(text: str) -> list[str]:
    return _REGEX_TOKEN.findall(text)


def char_tokenize(text: str, *, space_symbol: str = "▁") -> list[str]:
    """Characters as tokens; any run of whitespace becomes one ``space_symbol``.

    Leading and trailing whitespace is dropped, so a line's tokens start and end
    with a real character.
    """
    return [space_symbol if c == " " else c for c in " ".join(text.split())]


def cjk_tokenize(text: str) -> list[str]:
    return _CJK_TOKEN.findall(text)


def punct_tokenize(text: str) -> list[str]:
    """Split off ``, . ! ?`` from the word before them, then split on whitespace.

    >>> punct_tokenize("I'm OK.")
    ["I'm", 'OK', '.']
    >>> punct_tokenize("Wait...")
    ['Wait', '.', '.', '.']
    """
    return _GLUED_PUNCT.sub(r" \1", text.translate(_NO_BREAK_SPACES)).split()


def make_tokenizer(spec: TokenizerSpec) -> Callable[[str], list[str]]:
    """Return a function ``str -> list[str]`` implementing ``spec``."""
    if spec.kind == "whitespace":
        base: Callable[[str], list[str]] = whitespace_tokenize
    elif spec.kind == "regex":
        base = regex_tokenize
    elif spec.kind == "char":
        sym = spec.space_symbol

        def base(text: str) -> list[str]:
            return char_tokenize(text, space_symbol=sym)
    elif spec.kind == "punct":
        base = punct_tokenize
    else:
        base = cjk_tokenize

    if not spec.lower and not spec.normalize:
        return base

    def tokenize(text: str) -> list[str]:
        return base(_prepare(text, spec))

    return tokenize


def detokenize(tokens: list[str], spec: TokenizerSpec) -> str:
    """Best-effort inverse, for displaying generated text."""
    if spec.kind == "char":
        return "".join(" " if t == spec.space_symbol else t for t in tokens)
    if spec.kind == "cjk":
        out: list[str] = []
        for t in tokens:
            if out and out[-1][-1:].isascii() and out[-1][-1:].isalnum() and t[:1].isascii() and t[:1].isalnum():
                out.append(" ")
            out.append(t)
        return "".join(out)
    return " ".join(tokens)
