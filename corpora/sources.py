"""One resolver for the commands' TEXT argument: a file, ``-`` for stdin, or a corpus name.

Every command that scores or trains on "a text" (``ngramlm train``, ``ppl``, ``score``,
``neural ppl``) reads it here, so a file, standard input and a named corpus go through
the same checks (UTF-8, no binary data, gzip by magic; errors name the source and the
line) and the same sentence rules: one sentence per line, and a blank line is a sentence
with no words, whose ``</s>`` is predicted -- as KenLM counts it.
"""
from __future__ import annotations

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


def _stdin_sentences(spec: TokenizerSpec) -> list:
    from .textio import decode_text
    from .tokenize import make_tokenizer

    stream = getattr(sys.stdin, "buffer", None)
    raw = stream.read() if stream is not None else sys.stdin.read().encode("utf-8")
    text = decode_text(raw, path=STDIN_NAME)  # the same checks as a file: UTF-8, no NUL bytes, not empty
    tok = make_tokenizer(spec)
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()  # the final newline ends the last line; it does not start another
    return [tok(line) for line in lines]  # a blank line is an empty sentence: one </s>, as KenLM scores it


def read_text_source(source: str, *, split: str = "test", data_dir: Optional[str] = None,
                     tokenizer: Optional[TokenizerSpec] = None) -> TextSource:
    """Sentences of ``source``: ``-`` (stdin), a registered corpus's ``split``, or a text file.

    ``tokenizer`` overrides the corpus's own spec (a file or stdin defaults to whitespace).
    A name that is neither a file nor a corpus is an :class:`InputError` listing the corpora.
    """
    from .registry import REGISTRY

    source = str(source)
    if source == STDIN:
        spec = tokenizer or TokenizerSpec()
        return TextSource(_stdin_sentences(spec), spec, STDIN_NAME)
    if source in REGISTRY:  # a corpus name wins over a file of the same name, as it always has
        from .corpus import load_corpus

        corpus = load_corpus(source, data_dir=data_dir, tokenizer=tokenizer, splits=(split,))
        return TextSource(corpus.sentences(split), corpus.tokenizer, f"{source}:{split}", corpus=source)
    path = Path(source)
    if not path.exists():
        raise InputError("no such file, and not a corpus name", path=path,
                         fix=f"pass a text file, '-' for stdin, or one of {', '.join(sorted(REGISTRY))}")
    from .corpus import read_sentences

    spec = tokenizer or TokenizerSpec()
    # A blank line is a sentence with no words (one </s> is predicted), as KenLM's query and
    # lmplz count it and as the named corpora with blank lines (WikiText) do.
    return TextSource(read_sentences(path, tokenizer=spec, keep_empty_lines=True), spec, str(path))
