"""Loading corpora as tokenized sentences per split, and encoding them once.

:func:`load_corpus` turns a registry name (``ptb``, ``toy``, ...) or a text file
into a :class:`Corpus`: ``{split: [sentence, ...]}`` with each sentence a list of
token strings.  :func:`prepare` fits the shared :class:`~corpora.vocab.Vocab` on the
training split only and encodes every split into an
:class:`~corpora.vocab.EncodedText`; every model in the toolkit is trained and scored
on that result, so all perplexities count the same predicted tokens.
"""
from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Iterable, Optional, Sequence

import numpy as np

from .datadir import describe_source, resolve_data_dir
from .errors import InputError
from .registry import SPLITS, CorpusSpec, get_spec
from .textio import iter_lines
from .tokenize import TokenizerSpec, fit_tokenizer, make_tokenizer
from .vocab import EncodedText, Vocab


# How a text's splits are made -- one rule for every command:
#   corpus   a registered corpus: its own split files (or its documented hold-out of one file);
#   all      a plain file (or stdin) where a command needs one text: every line, nothing held out
#            (`train`, `ppl`, `score`, `vocab build`, `infini build`);
#   files    a plain file for train plus the --valid / --test files given;
#   holdout  a plain file where a command needs valid/test text and none was given (`neural train`,
#            `compare`, `stats`): its last lines are held out, contiguously and deterministically
#            (HOLDOUT shares), and the command says so.
SPLIT_POLICIES = ("corpus", "all", "files", "holdout")
HOLDOUT = (0.05, 0.05)  # (valid, test) shares of a plain file's lines under the holdout policy

_NON_LETTERS = re.compile(r"[^A-Za-z]+")

LINE_FILTERS: dict[str, Callable[[str], str]] = {
    # d2l's preprocessing of The Time Machine: letters only, lower case.
    "letters_lower": lambda line: _NON_LETTERS.sub(" ", line).strip().lower(),
}


@dataclass
class Corpus:
    """Tokenized sentences per split, plus where they came from."""

    name: str
    tokenizer: TokenizerSpec
    splits: dict  # split -> list[list[str]]
    unk_token: Optional[str] = None
    paths: dict = field(default_factory=dict)  # split -> source path (or "generated")
    truth: dict = field(default_factory=dict)  # split -> true entropy info (generated corpora only)
    # How the splits were made (see SPLIT_POLICIES); split_note says it in a sentence for a command's output.
    split_policy: str = "corpus"
    split_note: str = ""
    # split -> UTF-8 bytes of its text (see text_bytes): what bits per byte divide by, whatever the tokenizer.
    n_bytes: dict = field(default_factory=dict)
    # split -> the bytes of each line (line_bytes), for intervals that resample sentences.
    sentence_bytes: dict = field(default_factory=dict)

    def new_vocab(self, *, min_count: int = 1, max_size: Optional[int] = None) -> Vocab:
        """The (unfitted) vocabulary every command builds for this text: its tokenizer, and the
        corpus's own unknown-word token (PTB's ``<unk>``) or ``<unk>``."""
        return Vocab(min_count=min_count, max_size=max_size, unk_token=self.unk_token or "<unk>",
                     tokenizer=self.tokenizer)

    def sentences(self, split: str) -> list:
        if split not in self.splits:
            raise InputError(f"corpus {self.name!r} has no split {split!r}", fix=f"use one of {', '.join(self.splits)}")
        return self.splits[split]

    def n_words(self, split: str) -> int:
        return sum(len(s) for s in self.sentences(split))

    def __repr__(self) -> str:
        sizes = ", ".join(f"{k}={len(v)} sentences" for k, v in self.splits.items())
        return f"Corpus({self.name!r}, tokenizer={self.tokenizer.describe()}, {sizes})"


# ---------------------------------------------------------------------------- reading text
def read_sentences(
    path: os.PathLike | str,
    *,
    tokenizer: TokenizerSpec,
    sentence_mode: str = "lines",
    keep_empty_lines: bool = False,
    line_filter: Optional[str] = None,
    line_range: Optional[tuple] = None,
) -> list:
    """Tokenize a text file (plain or ``.gz``) into sentences.

    ``sentence_mode="lines"``: each line is a sentence (empty lines are skipped unless
    ``keep_empty_lines``).  ``"text"``: the whole file is one running sequence.
    ``line_range=(start, stop)`` keeps only those (0-based, over kept lines).
    """
    if sentence_mode not in ("lines", "text"):
        raise InputError(f"unknown sentence mode {sentence_mode!r}", fix="use 'lines' or 'text'")
    lines = read_lines(path, line_filter=line_filter, keep_empty_lines=keep_empty_lines)
    if line_range is not None:
        lines = lines[line_range[0]:line_range[1]]
    return tokenize_lines(lines, tokenizer, sentence_mode=sentence_mode)


def read_lines(path: os.PathLike | str, *, line_filter: Optional[str] = None, keep_empty_lines: bool = True) -> list:
    """The lines of a text file (plain or ``.gz``) as the readers see them: filtered, blank ones kept
    (a blank line is one empty sentence, as KenLM counts it) unless ``keep_empty_lines`` is False."""
    clean = LINE_FILTERS[line_filter] if line_filter else None
    out = []
    for _, line in iter_lines(path):
        if clean is not None:
            line = clean(line)
        if keep_empty_lines or line.strip():
            out.append(line)
    return out


def text_bytes(lines: Sequence[str]) -> int:
    """The bytes of a text for bits per byte: each line's UTF-8 bytes as the pipeline reads it (after a
    corpus's line filter, without its line end), plus one byte per line -- the newline a sentence end
    stands for.  Counted from the text, never from tokens, so every tokenization divides by the same."""
    return sum(len(line.encode("utf-8")) for line in lines) + len(lines)


def line_bytes(lines: Sequence[str]) -> np.ndarray:
    """The bytes of each line as :func:`text_bytes` counts them (its UTF-8 bytes plus the newline), so
    ``line_bytes(lines).sum() == text_bytes(lines)``."""
    return np.fromiter((len(line.encode("utf-8")) + 1 for line in lines), dtype=np.int64, count=len(lines))


def tokenize_lines(lines: Sequence[str], tokenizer: TokenizerSpec, *, sentence_mode: str = "lines") -> list:
    tok = make_tokenizer(tokenizer)
    if sentence_mode == "text":
        joined = tok("\n".join(lines)) if tokenizer.kind != "char" else tok(" ".join(lines))
        return [joined] if joined else []
    return tok.encode_lines(lines)


def fitted_tokenizer(spec: TokenizerSpec, train_lines: Sequence[str]) -> TokenizerSpec:
    """``spec`` ready to tokenize: a learning tokenizer (subwords) is fitted on the training lines here,
    once, and its spec then carries what it learned (saved with the vocabulary and every model)."""
    return spec if spec.fitted else fit_tokenizer(spec, train_lines)


def holdout_ranges(n_lines: int, holdout: Sequence[float]) -> dict:
    """Contiguous line ranges: train first, then valid, then test (the tail)."""
    valid_share, test_share = holdout
    n_test = max(1, int(round(n_lines * test_share)))
    n_valid = max(1, int(round(n_lines * valid_share)))
    if n_test + n_valid >= n_lines:
        raise InputError(
            f"only {n_lines} lines: too few to hold out valid and test text",
            fix="use a longer text or give separate --valid/--test files",
        )
    n_train = n_lines - n_valid - n_test
    return {"train": (0, n_train), "valid": (n_train, n_train + n_valid), "test": (n_train + n_valid, n_lines)}


def missing_corpus_error(spec: CorpusSpec, path: Path, data_dir: Optional[os.PathLike | str]) -> InputError:
    return InputError(
        f"corpus {spec.name!r} is not in the data directory {describe_source(data_dir)}: {path} is missing",
        path=path,
        fix=f"run `ngramlm corpora download {spec.name}` or point --data-dir / $NGRAMLM_DATA_DIR at a folder holding {spec.name}/",
    )


def load_corpus(
    name: str,
    *,
    data_dir: Optional[os.PathLike | str] = None,
    tokenizer: Optional[TokenizerSpec] = None,
    splits: Iterable[str] = SPLITS,
    toy_config: Optional[object] = None,
    valid: Optional[os.PathLike | str] = None,
    test: Optional[os.PathLike | str] = None,
) -> Corpus:
    """Load a registered corpus (``ptb``, ``toy``, ...) or a text file by path (see :func:`load_text_corpus`
    for a file's split policy; ``valid`` / ``test`` are files for a plain file's other splits)."""
    splits = tuple(splits)
    if name not in _registry_names() and (os.sep in name or Path(name).suffix or Path(name).exists()):
        return load_text_corpus(name, tokenizer=tokenizer or TokenizerSpec(), splits=splits, valid=valid, test=test)
    spec = get_spec(name)
    if valid is not None or test is not None:
        raise InputError(f"corpus {spec.name!r} has its own valid and test splits",
                         fix="drop --valid/--test, or give the training text as a file")
    if spec.parallel is not None:
        # Its lines are sentence *pairs* (plus an attribution column): read as monolingual text
        # they would silently mix both languages.
        p = spec.parallel
        raise InputError(
            f"corpus {spec.name!r} is a parallel corpus ({p.direction} sentence pairs), not a monolingual text",
            fix=f"use `ngramlm seq2seq ...`, or corpora.parallel.load_parallel({spec.name!r}), whose "
                "target_sentences(split) give the target side as sentences",
        )
    tok_spec = tokenizer or spec.tokenizer
    known = ("train", "valid", "test") if spec.generated or spec.single_file else tuple(spec.files)
    for s in splits:  # a mistyped --split (`foo`, `Test`) is the user's to fix, not a KeyError
        if s not in known:
            raise InputError(f"corpus {spec.name!r} has no split {s!r}", fix=f"use one of {', '.join(known)}")
    if spec.generated:
        from . import toy

        gen = toy.generate_corpus(toy_config)
        sents = {s: gen.splits[s] for s in splits}
        return Corpus(name=spec.name, tokenizer=tok_spec, splits=sents, unk_token=spec.unk_token,
                      paths={s: "generated" for s in splits}, truth={s: gen.truth[s] for s in splits if s in gen.truth},
                      split_note=f"{spec.name}: generated train/valid/test",
                      n_bytes={s: text_bytes([" ".join(x) for x in v]) for s, v in sents.items()},
                      sentence_bytes={s: line_bytes([" ".join(x) for x in v]) for s, v in sents.items()})
    root = resolve_data_dir(data_dir) / spec.name
    keep_empty = spec.keep_empty_lines

    def lines_of(path: Path) -> list:
        if not path.exists():
            raise missing_corpus_error(spec, path, data_dir)
        return read_lines(path, line_filter=spec.line_filter, keep_empty_lines=keep_empty)

    raw: dict = {}
    paths: dict = {}
    # In the order asked (the first missing file is the one an error names); a learning tokenizer
    # also needs the train lines to fit on.
    needed = list(dict.fromkeys((() if tok_spec.fitted else ("train",)) + splits))
    if spec.single_file:
        path = root / spec.files["train"]
        all_lines = lines_of(path)
        ranges = holdout_ranges(len(all_lines), spec.holdout)
        for s in needed:
            a, b = ranges[s]
            raw[s] = all_lines[a:b]
            paths[s] = f"{path} lines {a + 1}-{b} of the kept lines"
        note = f"{spec.name}: one file, its last lines held out as valid/test (the corpus's documented split)"
    else:
        for s in needed:
            raw[s] = lines_of(root / spec.files[s])
            paths[s] = str(root / spec.files[s])
        note = f"{spec.name}: its own train/valid/test files"
    tok_spec = fitted_tokenizer(tok_spec, raw.get("train", ()))
    mode = spec.sentence_mode
    if spec.single_file and mode == "text":  # one running text per split, cut from the kept lines
        out = {s: [[t for sent in tokenize_lines(raw[s], tok_spec) for t in sent]] for s in splits}
    else:
        out = {s: tokenize_lines(raw[s], tok_spec, sentence_mode=mode) for s in splits}
    return Corpus(name=spec.name, tokenizer=tok_spec, splits=out, unk_token=spec.unk_token,
                  paths={s: paths[s] for s in splits}, split_policy="corpus", split_note=note,
                  n_bytes={s: text_bytes(raw[s]) for s in splits},
                  sentence_bytes={s: line_bytes(raw[s]) for s in splits})


def load_text_corpus(
    train: os.PathLike | str,
    *,
    valid: Optional[os.PathLike | str] = None,
    test: Optional[os.PathLike | str] = None,
    tokenizer: TokenizerSpec = TokenizerSpec(),
    sentence_mode: str = "lines",
    unk_token: Optional[str] = None,
    holdout: Sequence[float] = HOLDOUT,
    splits: Iterable[str] = SPLITS,
) -> Corpus:
    """A user's own text, one line a sentence (a blank line is an empty sentence, as KenLM counts it).

    The split policy (``SPLIT_POLICIES``): asked for one split (``splits=("train",)``, or the split a
    command scores), the split is every line of ``train`` ("all"); asked for valid/test, they come from
    the ``valid`` / ``test`` files when given ("files", ``train`` then trains on all its lines), else
    the file's last lines are held out ("holdout": ``holdout`` shares, contiguous).  ``split_note``
    says which, for the command's output.
    """
    name = Path(train).name
    splits = tuple(splits)
    lines = read_lines(train)
    if len(splits) <= 1 or (valid is None and test is None and not (set(splits) - {"train"})):
        split = splits[0] if splits else "train"
        raw = {split: lines}
        paths = {split: str(train)}
        policy, note = "all", f"{train}: all {len(lines):,} lines"
    elif valid is not None or test is not None:
        raw = {"train": lines}
        paths = {"train": str(train)}
        for s, p in (("valid", valid), ("test", test)):
            if p is not None and s in splits:
                raw[s] = read_lines(p)
                paths[s] = str(p)
        given = " and ".join(f"--{s} {paths[s]}" for s in ("valid", "test") if s in paths)
        policy, note = "files", f"{train}: all {len(lines):,} lines for training; {given}"
    else:
        ranges = holdout_ranges(len(lines), holdout)
        raw = {s: lines[a:b] for s, (a, b) in ranges.items() if s in splits}
        paths = {s: f"{train} lines {a + 1}-{b}" for s, (a, b) in ranges.items() if s in splits}
        (ta, tb), (va, vb), (sa, sb) = ranges["train"], ranges["valid"], ranges["test"]
        policy = "holdout"
        note = (f"{train}: no --valid/--test files given, so its last lines are held out: training on lines "
                f"{ta + 1}-{tb}, valid {va + 1}-{vb}, test {sa + 1}-{sb} ({holdout[0]:.0%} + {holdout[1]:.0%}; "
                "give --valid FILE --test FILE to train on all of it)")
    spec = fitted_tokenizer(tokenizer, raw.get("train", lines))
    out = {s: tokenize_lines(v, spec, sentence_mode="lines") for s, v in raw.items()}
    if sentence_mode == "text":
        out = {s: [[t for sent in v for t in sent]] for s, v in out.items()}
    return Corpus(name=name, tokenizer=spec, splits=out, unk_token=unk_token, paths=paths,
                  split_policy=policy, split_note=note, n_bytes={s: text_bytes(v) for s, v in raw.items()},
                  sentence_bytes={s: line_bytes(v) for s, v in raw.items()})


def _registry_names() -> set:
    from .registry import REGISTRY

    return set(REGISTRY)


# ---------------------------------------------------------------------------- the shared layer
@dataclass
class Dataset:
    """A corpus with its vocabulary fitted on train and every split encoded."""

    corpus: Corpus
    vocab: Vocab
    encoded: dict  # split -> EncodedText

    def __getitem__(self, split: str) -> EncodedText:
        return self.encoded[split]


def prepare(
    corpus: Corpus,
    *,
    min_count: int = 1,
    max_size: Optional[int] = None,
    vocab: Optional[Vocab] = None,
) -> Dataset:
    """Fit the vocabulary on ``corpus``'s train split (unless given) and encode all splits."""
    if vocab is None:
        vocab = corpus.new_vocab(min_count=min_count, max_size=max_size).fit(corpus.sentences("train"))
    encoded = {s: vocab.encode_sentences(sents) for s, sents in corpus.splits.items()}
    return Dataset(corpus=corpus, vocab=vocab, encoded=encoded)
