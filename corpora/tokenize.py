"""Tokenizers: objects that cut a line of text into tokens, registered by name.

A tokenizer is described by a :class:`TokenizerSpec` (a small, JSON-serialisable, frozen
dataclass): its registered ``kind``, the text preparation (case, Unicode form) and -- for a
tokenizer that learns from the training text -- its learned ``state``.  The spec is saved with
every vocabulary and model, so text scored later is tokenized exactly as the training text was
(without the training text), and a mismatch is detected.

:func:`make_tokenizer` builds the :class:`Tokenizer` a spec describes: ``encode(line)`` (or a
call) gives the tokens, ``decode(tokens)`` the text for display; a tokenizer with
``learns = True`` is ``fit`` on the training lines first, and its ``spec`` then carries what it
learned.  A new tokenizer is one class with :func:`register`.

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
``byte``        every UTF-8 byte a token (256 symbols): printable ASCII as itself, a space
                as ``space_symbol``, any other byte as ``<0xNN>``; nothing is ever out of
                the vocabulary
``bpe``         learned subwords (:mod:`corpora.subwords`): byte-pair encoding with ``size``
                pieces, fitted on the training text (``--tokenizer bpe:8000``)
``unigram``     learned subwords: the unigram language model of SentencePiece
                (``--tokenizer unigram:8000``)

On the command line a kind may carry its size: ``bpe:8000`` (see :func:`parse_tokenizer`).
"""
from __future__ import annotations

import json
import re
import unicodedata
from dataclasses import asdict, dataclass, replace
from typing import Iterable, Optional

from .errors import InputError

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


# ---------------------------------------------------------------------------- the registry
TOKENIZERS: dict = {}  # kind -> Tokenizer subclass
# Kinds registered by a module imported on first use (so this module never imports it, and the learned
# kinds cost nothing until one is asked for): kind -> module.
PROVIDED = {"bpe": "corpora.subwords", "unigram": "corpora.subwords"}


def register(cls):
    """Class decorator: make ``cls`` (a :class:`Tokenizer` subclass with a ``kind``) available by name."""
    if not isinstance(getattr(cls, "kind", None), str) or not cls.kind:
        raise TypeError(f"{cls.__name__} needs a class attribute kind (its registered name)")
    TOKENIZERS[cls.kind] = cls
    return cls


def kinds() -> tuple:
    return tuple(TOKENIZERS) + tuple(k for k in PROVIDED if k not in TOKENIZERS)


def known(kind) -> bool:
    return isinstance(kind, str) and (kind in TOKENIZERS or kind in PROVIDED)


def tokenizer_class(kind: str) -> type:
    """The registered class of ``kind``, importing its provider module on first use."""
    if kind not in TOKENIZERS and kind in PROVIDED:
        import importlib

        importlib.import_module(PROVIDED[kind])
    return TOKENIZERS[kind]


@dataclass(frozen=True)
class TokenizerSpec:
    """How text is cut into tokens.  Saved with vocabularies and models."""

    kind: str = "whitespace"
    lower: bool = False  # lower-case before tokenizing
    normalize: Optional[str] = None  # Unicode normalisation form, e.g. "NFKC"
    space_symbol: str = "▁"  # char level: the token that stands for a space
    size: Optional[int] = None  # a learned tokenizer's vocabulary size (bpe:8000 -> 8000)
    # What a learning tokenizer learned from its training text (canonical JSON; None for the
    # rule-based kinds): part of the spec, so it is saved, compared and reloaded with it.
    state: Optional[str] = None

    def __post_init__(self) -> None:
        # Specs also come from JSON files (vocabularies, models): check types, not just values.
        if not known(self.kind):
            raise InputError(
                f"unknown tokenizer {self.kind!r}", fix=f"choose one of {', '.join(kinds())}"
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
        if self.size is not None and (not isinstance(self.size, int) or isinstance(self.size, bool) or self.size < 2):
            raise InputError(f"a tokenizer's size must be an integer >= 2, got {self.size!r}",
                             fix="use e.g. --tokenizer bpe:8000")
        if self.size is not None and not tokenizer_class(self.kind).learns:
            raise InputError(f"the {self.kind} tokenizer has no size (it learns nothing)",
                             fix=f"use --tokenizer {self.kind}, or a learned one such as bpe:8000")
        if self.state is not None and not isinstance(self.state, str):
            raise InputError(f"a tokenizer's learned state must be a JSON string, got {type(self.state).__name__}",
                             fix="rebuild the vocabulary")

    def to_dict(self) -> dict:
        d = asdict(self)
        if d["size"] is None:
            del d["size"]
        if d["state"] is None:
            del d["state"]  # the files of rule-based tokenizers stay as they always were
        else:
            d["state"] = json.loads(d["state"])
        return d

    @classmethod
    def from_dict(cls, data: dict) -> "TokenizerSpec":
        if not isinstance(data, dict):
            raise InputError(f"a tokenizer spec must be a JSON object, got {type(data).__name__}",
                             fix='give e.g. {"kind": "whitespace"}')
        known = {k: data[k] for k in ("kind", "lower", "normalize", "space_symbol", "size") if k in data}
        if data.get("state") is not None:
            known["state"] = canonical_state(data["state"])
        return cls(**known)

    def describe(self) -> str:
        parts = [self.kind if self.size is None else f"{self.kind}:{self.size}"]
        if self.lower:
            parts.append("lower")
        if self.normalize:
            parts.append(self.normalize)
        return "+".join(parts)

    @property
    def learns(self) -> bool:
        """A kind that must be fitted on training text before it tokenizes."""
        return tokenizer_class(self.kind).learns

    @property
    def fitted(self) -> bool:
        return not self.learns or self.state is not None


def canonical_state(state) -> str:
    """The state a tokenizer learned as canonical JSON (sorted keys), so equal states compare equal."""
    return json.dumps(state, sort_keys=True, ensure_ascii=False, separators=(",", ":"))


# ---------------------------------------------------------------------------- tokenizers
class Tokenizer:
    """Cuts a line into tokens.  Subclasses set ``kind`` and implement :meth:`split` (on prepared text);
    one that learns sets ``learns = True`` and implements :meth:`learn` and :meth:`load_state`."""

    kind: str = ""
    learns: bool = False
    default_size: Optional[int] = None  # a learning tokenizer's size when none is given

    def __init__(self, spec: TokenizerSpec) -> None:
        self.spec = spec
        if spec.state is not None:
            self.load_state(json.loads(spec.state))
        self._bind()

    def _bind(self) -> None:
        # The per-line call is on the hot path of every reader: a rule-based tokenizer with no case
        # or Unicode change calls its split directly.
        if self.learns and self.spec.state is None:
            self._run = self._unfitted
        elif not self.spec.lower and not self.spec.normalize:
            self._run = self.split
        else:
            self._run = lambda text: self.split(self.prepare(text))

    def _unfitted(self, text: str) -> list:
        raise InputError(f"the {self.kind} tokenizer has not been fitted on training text",
                         fix="fit it first (a vocabulary built on the training text carries it)")

    # -- what a subclass provides
    def split(self, text: str) -> list:
        raise NotImplementedError

    def learn(self, lines: Iterable[str]) -> object:
        """The state learned from prepared training lines (JSON-serialisable)."""
        raise TypeError(f"the {self.kind} tokenizer does not learn from text")

    def load_state(self, state) -> None:
        raise TypeError(f"the {self.kind} tokenizer has no learned state")

    def join(self, tokens: list) -> str:
        return " ".join(tokens)

    def split_many(self, texts: list) -> list:
        """:meth:`split` of many prepared lines (a library tokenizer overrides it with its batch encoder)."""
        return [self.split(t) for t in texts]

    # -- the public API
    def prepare(self, text: str) -> str:
        if self.spec.normalize:
            text = unicodedata.normalize(self.spec.normalize, text)
        if self.spec.lower:
            text = text.lower()
        return text

    def fit(self, lines: Iterable[str]) -> "Tokenizer":
        """Learn from the training lines (a rule-based tokenizer learns nothing); returns self, whose
        ``spec`` now carries the state."""
        if self.learns:
            state = self.learn(self.prepare(line) for line in lines)
            self.spec = replace(self.spec, state=canonical_state(state))
            self.load_state(json.loads(self.spec.state))
            self._bind()
        return self

    def encode(self, text: str) -> list:
        """The tokens of one line."""
        return self._run(text)

    def __call__(self, text: str) -> list:
        return self._run(text)

    def encode_lines(self, lines: list) -> list:
        """The tokens of every line (the readers' path: one batch call where the tokenizer has one)."""
        if self.learns and self.spec.state is None:
            self._unfitted("")  # raises: what it would learn is missing
        if self.spec.lower or self.spec.normalize:
            lines = [self.prepare(line) for line in lines]
        return self.split_many(list(lines))

    def decode(self, tokens: list) -> str:
        """Best-effort inverse, for displaying generated text."""
        return self.join(list(tokens))

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.spec.describe()}>"


@register
class WhitespaceTokenizer(Tokenizer):
    kind = "whitespace"

    def split(self, text: str) -> list:
        return text.split()


@register
class RegexTokenizer(Tokenizer):
    kind = "regex"

    def split(self, text: str) -> list:
        return _REGEX_TOKEN.findall(text)


@register
class CharTokenizer(Tokenizer):
    kind = "char"

    def split(self, text: str) -> list:
        return char_tokenize(text, space_symbol=self.spec.space_symbol)

    def join(self, tokens: list) -> str:
        sym = self.spec.space_symbol
        return "".join(" " if t == sym else t for t in tokens)


@register
class CjkTokenizer(Tokenizer):
    kind = "cjk"

    def split(self, text: str) -> list:
        return _CJK_TOKEN.findall(text)

    def join(self, tokens: list) -> str:
        out: list = []
        for t in tokens:
            if out and out[-1][-1:].isascii() and out[-1][-1:].isalnum() and t[:1].isascii() and t[:1].isalnum():
                out.append(" ")
            out.append(t)
        return "".join(out)


@register
class PunctTokenizer(Tokenizer):
    kind = "punct"

    def split(self, text: str) -> list:
        return punct_tokenize(text)


@register
class ByteTokenizer(Tokenizer):
    """Every UTF-8 byte a token: a vocabulary of at most 256 symbols that never meets an unknown word."""

    kind = "byte"

    def __init__(self, spec: TokenizerSpec) -> None:
        sym = spec.space_symbol
        self._names = [sym if b == 0x20 else chr(b) if 0x21 <= b <= 0x7E else f"<0x{b:02X}>" for b in range(256)]
        self._bytes = {name: b for b, name in enumerate(self._names)}
        super().__init__(spec)

    def split(self, text: str) -> list:
        names = self._names
        return [names[b] for b in " ".join(text.split()).encode("utf-8")]

    def join(self, tokens: list) -> str:
        return bytes(self._bytes[t] for t in tokens if t in self._bytes).decode("utf-8", errors="replace")


def parse_tokenizer(text: str) -> tuple:
    """``"bpe:8000"`` -> ``("bpe", 8000)``; ``"char"`` -> ``("char", None)``; an unknown kind or a bad
    size is an :class:`InputError` naming the choices."""
    kind, _, size = str(text).partition(":")
    kind = kind.strip().lower()
    if not known(kind):
        raise InputError(f"unknown tokenizer {text!r}", fix=f"choose one of {', '.join(kinds())}"
                                                            " (learned ones take a size: bpe:8000)")
    if not size:
        return kind, None
    try:
        n = int(size)
    except ValueError:
        raise InputError(f"the size in {text!r} is not an integer", fix="use e.g. --tokenizer bpe:8000") from None
    if n < 2:  # checked here, with the option, not first when the tokenizer is fitted after a long run
        raise InputError(f"a tokenizer's size must be an integer >= 2, got {n}", fix="use e.g. --tokenizer bpe:8000")
    return kind, n


def spec_from_text(text: str, base: Optional["TokenizerSpec"] = None) -> "TokenizerSpec":
    """``base`` (or the default spec) with the kind and size of ``text`` (``"bpe:8000"``, ``"char"``)."""
    kind, size = parse_tokenizer(text)
    cls = tokenizer_class(kind)
    if size is None and cls.learns:
        size = cls.default_size
    return replace(base or TokenizerSpec(), kind=kind, size=size, state=None)


# ------------------------------------------------------------ the splitting rules CharTokenizer and PunctTokenizer call
def char_tokenize(text: str, *, space_symbol: str = "▁") -> list[str]:
    """Characters as tokens; any run of whitespace becomes one ``space_symbol``.

    Leading and trailing whitespace is dropped, so a line's tokens start and end
    with a real character.
    """
    return [space_symbol if c == " " else c for c in " ".join(text.split())]


def punct_tokenize(text: str) -> list[str]:
    """Split off ``, . ! ?`` from the word before them, then split on whitespace.

    >>> punct_tokenize("I'm OK.")
    ["I'm", 'OK', '.']
    >>> punct_tokenize("Wait...")
    ['Wait', '.', '.', '.']
    """
    return _GLUED_PUNCT.sub(r" \1", text.translate(_NO_BREAK_SPACES)).split()


def make_tokenizer(spec: TokenizerSpec) -> Tokenizer:
    """The :class:`Tokenizer` ``spec`` describes (callable: ``tok(line) -> tokens``)."""
    return tokenizer_class(spec.kind)(spec)


def fit_tokenizer(spec: TokenizerSpec, lines: Iterable[str]) -> TokenizerSpec:
    """``spec`` with what its tokenizer learns from ``lines`` (unchanged for a rule-based or fitted one)."""
    if spec.fitted:
        return spec
    return make_tokenizer(spec).fit(lines).spec


def detokenize(tokens: list[str], spec: TokenizerSpec) -> str:
    """Best-effort inverse, for displaying generated text."""
    return make_tokenizer(spec).decode(tokens)


KINDS = kinds()  # the built-in kinds (a registered one joins TOKENIZERS, which is what specs check)
