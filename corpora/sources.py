"""The one text pipeline: every command's TEXT argument -- a file, ``-`` for stdin, a corpus name --
resolved in one place (:func:`open_text`), with one split policy and one line policy.

Every command that trains or scores on text (``ngramlm train``, ``ppl``, ``score``, ``vocab build``,
``neural train``, ``neural ppl``, ``compare``, ``stats``, ``infini``) reads it here, so a file,
standard input and a named corpus go through the same checks (UTF-8, no binary data, gzip by
magic; errors name the source and the line) and the same sentence rules: one sentence per line,
and a blank line is a sentence with no words, whose ``</s>`` is predicted -- as KenLM counts it.
Which lines make which split is the policy of :mod:`corpora.corpus` (``SPLIT_POLICIES``): a plain
file given to a command that needs one text is all of it; a command that needs valid/test text takes
``--valid``/``--test`` files, or holds out the file's tail and says so.
"""
from __future__ import annotations

import os
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

from .errors import InputError
from .tokenize import TokenizerSpec

STDIN = "-"
STDIN_NAME = "<stdin>"


@dataclass
class TextSource:
    sentences: list  # lists of tokens
    tokenizer: TokenizerSpec  # the spec the text was cut with
    description: str  # "ptb:test", "<stdin>" or the file's path, for messages and summaries
    corpus: Optional[str] = None  # the registered corpus name, when the source is one
    n_bytes: Optional[int] = None  # UTF-8 bytes of the text (corpora.corpus.text_bytes), for bits per byte


def _stdin_sentences(spec: TokenizerSpec, counted: Optional[dict] = None) -> list:
    from .textio import decode_text
    from .tokenize import make_tokenizer

    stream = getattr(sys.stdin, "buffer", None)
    raw = stream.read() if stream is not None else sys.stdin.read().encode("utf-8")
    text = decode_text(raw, path=STDIN_NAME)  # the same checks as a file: UTF-8, no NUL bytes, not empty
    tok = make_tokenizer(spec)
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()  # the final newline ends the last line; it does not start another
    if counted is not None:
        from .corpus import text_bytes

        counted["bytes"] = text_bytes(lines)
    return [tok(line) for line in lines]  # a blank line is an empty sentence: one </s>, as KenLM scores it


def source_kind(source: str) -> str:
    """What a text argument names: ``"stdin"`` (``-``), ``"corpus"`` (a registered monolingual corpus),
    ``"parallel"`` (a registered parallel corpus, or a ``.tsv`` file of sentence pairs), ``"file"`` or
    ``"missing"``.  A corpus name wins over a file of the same name, as it always has."""
    from .registry import REGISTRY

    source = str(source)
    if source == STDIN:
        return "stdin"
    if source in REGISTRY:
        return "parallel" if REGISTRY[source].parallel is not None else "corpus"
    path = Path(source)
    if path.is_file():
        return "parallel" if path.suffix == ".tsv" else "file"
    return "file" if path.exists() else "missing"


def open_text(source: str, *, splits=("train",), data_dir: Optional[str] = None,
              tokenizer: Optional[TokenizerSpec] = None, valid: Optional[str] = None, test: Optional[str] = None,
              toy_config=None):
    """The one text pipeline: any text source as a :class:`~corpora.corpus.Corpus` of ``splits``.

    ``source`` is ``-`` (stdin), a registered corpus (its own splits), or a text file; for a file the
    split policy of :func:`~corpora.corpus.load_text_corpus` applies (one split asked: every line;
    valid/test asked: the ``valid``/``test`` files, else a held-out tail), and ``split_note`` says
    which.  One line policy everywhere: a line is a sentence, a blank line an empty sentence.
    A name that is neither a file nor a corpus is an :class:`InputError` listing the corpora.
    """
    from .corpus import Corpus, load_corpus
    from .registry import REGISTRY

    splits = tuple(splits)
    kind = source_kind(source)
    if kind == "stdin":
        if len(splits) != 1:
            raise InputError("standard input is one text; this command needs train, valid and test text",
                             path=STDIN_NAME, fix="give a file (its tail is held out) or --valid/--test files")
        spec = tokenizer or TokenizerSpec()
        counted: dict = {}
        sents = _stdin_sentences(spec, counted)
        return Corpus(name=STDIN_NAME, tokenizer=spec, splits={splits[0]: sents}, paths={splits[0]: STDIN_NAME},
                      split_policy="all", split_note=f"{STDIN_NAME}: every line", n_bytes={splits[0]: counted["bytes"]})
    if kind == "missing":
        names = ", ".join(sorted(REGISTRY))
        if os.sep in str(source) or Path(source).suffix:  # meant as a file
            raise InputError("no such file, and not a corpus name", path=source,
                             fix=f"pass a text file, '-' for stdin, or one of {names}")
        raise InputError(f"unknown corpus {source!r}, and no such file",
                         fix=f"use one of {names}, or pass the path of a text file ('-' for stdin)")
    return load_corpus(str(source), data_dir=data_dir, tokenizer=tokenizer, splits=splits, valid=valid, test=test,
                       toy_config=toy_config)


def read_text_source(source: str, *, split: str = "test", data_dir: Optional[str] = None,
                     tokenizer: Optional[TokenizerSpec] = None) -> TextSource:
    """Sentences of ``source``: ``-`` (stdin), a registered corpus's ``split``, or every line of a text file.

    ``tokenizer`` overrides the corpus's own spec (a file or stdin defaults to whitespace).
    """
    corpus = open_text(source, splits=(split,), data_dir=data_dir, tokenizer=tokenizer)
    kind = source_kind(source)
    description = {"stdin": STDIN_NAME, "corpus": f"{source}:{split}"}.get(kind, str(source))
    return TextSource(corpus.sentences(split), corpus.tokenizer, description,
                      corpus=str(source) if kind == "corpus" else None, n_bytes=corpus.n_bytes.get(split))


@dataclass
class PlainText:
    """A split that is one whole file read line by line: what the streamed and fast builds read."""

    path: Path
    tokenizer: TokenizerSpec  # the corpus's own spec (a command's options may override it)
    line_filter: Optional[str]
    keep_empty: bool  # the line policy: a blank line is an empty sentence (a corpus's spec may say otherwise)
    unk_token: Optional[str]  # the corpus's own unknown-word token (PTB's <unk>)
    description: str  # "ptb:train" or the file's path


def plain_text_file(source: str, *, split: str = "train", data_dir: Optional[str] = None) -> Optional[PlainText]:
    """``split`` of ``source`` as one plain file, when it is one: a user's file (all of it -- the "all"
    policy) or a registered corpus with a file per split and one sentence a line.  None otherwise
    (stdin, generated or single-file corpora), where :func:`open_text` is the way in."""
    from .datadir import resolve_data_dir
    from .registry import REGISTRY

    source = str(source)
    if source in REGISTRY:
        spec = REGISTRY[source]
        if spec.generated or spec.single_file or spec.parallel is not None or spec.sentence_mode != "lines" \
                or spec.keep_empty_lines:
            return None
        if split not in spec.files:  # the same message as a corpus read whole (Corpus.sentences)
            raise InputError(f"corpus {source!r} has no split {split!r}", fix=f"use one of {', '.join(spec.files)}")
        path = resolve_data_dir(data_dir) / spec.name / spec.files[split]
        if not path.exists():
            return None
        return PlainText(path, spec.tokenizer, spec.line_filter, False, spec.unk_token, f"{source}:{split}")
    if source == STDIN or not Path(source).is_file():
        return None
    return PlainText(Path(source), TokenizerSpec(), None, True, None, source)
