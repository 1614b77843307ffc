"""The command-line options every command shares, spelled and resolved in one place.

``--data-dir`` (env ``NGRAMLM_DATA_DIR``), the tokenizer options (``--tokenizer``,
``--lower/--no-lower``, ``--normalize``), ``--json``, ``--seed`` and ``--threads``
mean the same thing in the n-gram, neural, corpus and report commands; a command
takes them from here instead of declaring its own.
"""
from __future__ import annotations

import dataclasses
from typing import Optional

import click

from .datadir import ENV_VAR
from .errors import InputError
from .tokenize import TokenizerSpec, kinds, parse_tokenizer, spec_from_text, tokenizer_class

NORMALIZE_CHOICES = ("NFC", "NFKC", "NFD", "NFKD")


def data_dir_option(f):
    return click.option(
        "--data-dir", type=str, default=None, metavar="DIR",  # the env var is read by resolve_data_dir,
        # not by click, so `corpora list` can say where the folder came from
        help=f"Folder holding one sub-folder per corpus [env {ENV_VAR}; else ~/.cache/ngramlm/corpora].",
    )(f)


class TokenizerType(click.ParamType):
    """``--tokenizer KIND[:SIZE]``: a registered kind, a learned one with its size (``bpe:8000``)."""

    name = "tokenizer"

    def get_metavar(self, param, ctx=None) -> str:
        return "[" + "|".join(k + (":N" if tokenizer_class(k).learns else "") for k in kinds()) + "]"

    def convert(self, value, param, ctx):
        if value is None or isinstance(value, TokenizerSpec):
            return value
        try:
            kind, size = parse_tokenizer(value)
        except InputError as exc:
            self.fail(f"{exc.message} ({exc.fix})", param, ctx)
        return kind if size is None else f"{kind}:{size}"


TOKENIZER = TokenizerType()


def tokenizer_options(f=None, *, kind_help: str = "How to cut text into tokens (default: the corpus's own; "
                                                  "whitespace for files and stdin)."):
    """``--tokenizer KIND``, ``--lower/--no-lower``, ``--normalize FORM`` (all default None: "not given")."""
    def decorate(f):
        f = click.option("--normalize", type=click.Choice(NORMALIZE_CHOICES), default=None,
                         help="Unicode normalisation applied before tokenizing.")(f)
        f = click.option("--lower/--no-lower", default=None, help="Lower-case before tokenizing.")(f)
        f = click.option("--tokenizer", type=TOKENIZER, default=None, help=kind_help)(f)
        return f

    return decorate(f) if f is not None else decorate


def tokenizer_spec(kind: Optional[str], lower: Optional[bool], normalize: Optional[str],
                   base: Optional[TokenizerSpec] = None) -> Optional[TokenizerSpec]:
    """``base`` (or the whitespace default) with the options given applied; None when none was given
    (the caller then uses the corpus's or the model's own spec)."""
    if kind is None and lower is None and normalize is None:
        return None
    spec = base or TokenizerSpec()
    if kind is not None:
        spec = spec_from_text(kind, spec)  # "bpe:8000": the kind and its size; a learned state is refitted
    changes = {}
    if lower is not None:
        changes["lower"] = lower
    if normalize is not None:
        changes["normalize"] = normalize
    return dataclasses.replace(spec, **changes)


def json_option(f):
    return click.option("--json", "as_json", is_flag=True, help="Print the summary as JSON (for machines).")(f)


def seed_option(default: int = 1234, help: str = "Random seed."):
    return click.option("--seed", type=int, default=default, show_default=True, help=help)


def threads_option(default: int = 2, help: str = "torch.set_num_threads."):
    return click.option("--threads", type=click.IntRange(min=1), default=default, show_default=True, help=help)
