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

from .datadir import describe_source, resolve_data_dir
from .errors import InputError
from .registry import SPLITS, CorpusSpec, get_spec
from .textio import iter_lines
from .tokenize import TokenizerSpec, make_tokenizer
from .vocab import EncodedText, Vocab

Sentence = list  # list[str]

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
    tok = make_tokenizer(tokenizer)
    clean = LINE_FILTERS[line_filter] if line_filter else None
    lines = []
    for _, line in iter_lines(path):
        if clean is not None:
            line = clean(line)
        if not keep_empty_lines and not line.strip():
            continue
        lines.append(line)
    if line_range is not None:
        lines = lines[line_range[0]:line_range[1]]
    if sentence_mode == "text":
        joined = tok("\n".join(lines)) if tokenizer.kind != "char" else tok(" ".join(lines))
        return [joined] if joined else []
    return [tok(line) for line in lines]


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


def _missing_corpus_error(spec: CorpusSpec, path: Path, data_dir: Optional[os.PathLike | str]) -> InputError:
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
) -> Corpus:
    """Load a registered corpus (``ptb``, ``toy``, ...) or a text file by path."""
    splits = tuple(splits)
    if name not in _registry_names() and (os.sep in name or Path(name).suffix or Path(name).exists()):
        return load_text_corpus(name, tokenizer=tokenizer or TokenizerSpec())
    spec = get_spec(name)
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
    if spec.generated:
        from . import toy

        gen = toy.generate_corpus(toy_config)
        sents = {s: gen.splits[s] for s in splits}
        return Corpus(name=spec.name, tokenizer=tok_spec, splits=sents, unk_token=spec.unk_token,
                      paths={s: "generated" for s in splits}, truth={s: gen.truth[s] for s in splits if s in gen.truth})
    root = resolve_data_dir(data_dir) / spec.name
    out: dict = {}
    paths: dict = {}
    if spec.single_file:
        path = root / spec.files["train"]
        if not path.exists():
            raise _missing_corpus_error(spec, path, data_dir)
        all_sents = read_sentences(path, tokenizer=tok_spec, sentence_mode="lines",
                                   keep_empty_lines=spec.keep_empty_lines, line_filter=spec.line_filter)
        ranges = holdout_ranges(len(all_sents), spec.holdout)
        for s in splits:
            a, b = ranges[s]
            part = all_sents[a:b]
            if spec.sentence_mode == "text":
                part = [[t for sent in part for t in sent]]
            out[s] = part
            paths[s] = f"{path} lines {a + 1}-{b} of the kept lines"
    else:
        for s in splits:
            path = root / spec.files[s]
            if not path.exists():
                raise _missing_corpus_error(spec, path, data_dir)
            out[s] = read_sentences(path, tokenizer=tok_spec, sentence_mode=spec.sentence_mode,
                                    keep_empty_lines=spec.keep_empty_lines, line_filter=spec.line_filter)
            paths[s] = str(path)
    return Corpus(name=spec.name, tokenizer=tok_spec, splits=out, unk_token=spec.unk_token, paths=paths)


def load_text_corpus(
    train: os.PathLike | str,
    *,
    valid: Optional[os.PathLike | str] = None,
    test: Optional[os.PathLike | str] = None,
    tokenizer: TokenizerSpec = TokenizerSpec(),
    sentence_mode: str = "lines",
    unk_token: Optional[str] = None,
    holdout: Sequence[float] = (0.05, 0.05),
) -> Corpus:
    """A user's own text: separate split files, or one file whose tail is held out."""
    name = Path(train).name
    if valid is None and test is None:
        sents = read_sentences(train, tokenizer=tokenizer, sentence_mode="lines")
        ranges = holdout_ranges(len(sents), holdout)
        out = {s: sents[a:b] for s, (a, b) in ranges.items()}
        if sentence_mode == "text":
            out = {s: [[t for sent in v for t in sent]] for s, v in out.items()}
        paths = {s: f"{train} lines {a + 1}-{b}" for s, (a, b) in ranges.items()}
    else:
        out = {}
        paths = {}
        for s, p in (("train", train), ("valid", valid), ("test", test)):
            if p is not None:
                out[s] = read_sentences(p, tokenizer=tokenizer, sentence_mode=sentence_mode)
                paths[s] = str(p)
    return Corpus(name=name, tokenizer=tokenizer, splits=out, unk_token=unk_token, paths=paths)


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
        vocab = Vocab(
            min_count=min_count,
            max_size=max_size,
            unk_token=corpus.unk_token or "<unk>",
            tokenizer=corpus.tokenizer,
        ).fit(corpus.sentences("train"))
    encoded = {s: vocab.encode_sentences(sents) for s, sents in corpus.splits.items()}
    return Dataset(corpus=corpus, vocab=vocab, encoded=encoded)
