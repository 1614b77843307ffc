"""What the n-gram commands share: reading a text or a model, checking their tokenizers agree, writing a
model by its suffix, and recognising a file of another model family.  The tokenizer options are
:mod:`corpora.options`' (``tokenizer_options``, ``tokenizer_spec``), shared with every command."""
from __future__ import annotations

from typing import Optional

from corpora.errors import InputError

MODEL_SUFFIXES_ARPA = (".arpa", ".arpa.gz", ".lm")
# A KenLM binary, probing as build_binary makes by default (decoders load it with kenlm.Model).
MODEL_SUFFIXES_KENLM = (".binary", ".klm")


def is_kenlm_binary_name(output) -> bool:
    return str(output).endswith(MODEL_SUFFIXES_KENLM)


def load_sentences(source: str, *, split: str, data_dir: Optional[str], tokenizer_spec) -> tuple[list, object, str]:
    """Sentences of ``source`` (corpus name, file or '-') and the tokenizer used (see corpora.sources)."""
    from corpora.sources import read_text_source

    src = read_text_source(source, split=split, data_dir=data_dir, tokenizer=tokenizer_spec)
    return src.sentences, src.tokenizer, src.description


def load_model(path: str, *, ngrams: bool = False, compact: bool = False):
    """A native model, an ARPA file (plain or gzip) or a KenLM binary, recognised by content; never a
    pickle.  ``ngrams=True``: the caller needs the n-grams listed (a probing binary is refused);
    ``compact=True``: the caller only scores (an ARPA file may come back as compact tables)."""
    from ngramlm.loading import load_any

    kind = other_kind(path)
    if kind is not None:  # a neural checkpoint given to an n-gram command: say which and what to run
        import click

        ctx = click.get_current_context(silent=True)
        command = f"`{ctx.command_path}`" if ctx is not None else "this command"
        raise InputError(f"a {kind.name} checkpoint, and {command} reads n-gram models (ARPA, native .npz, KenLM "
                         "binary)", path=path,
                         fix="for a neural model use `ngramlm ppl MODEL TEXT` (perplexity) or `ngramlm generate`; "
                             "ARPA and the n-gram tools need a model from `ngramlm train`")
    return load_any(path, ngrams=ngrams, compact=compact)


def check_tokenizer(model, text_spec, model_path) -> None:
    """An InputError when the text is tokenized otherwise than the model's vocabulary was built."""
    mspec = model.vocab_.tokenizer
    if mspec is not None and text_spec is not None and mspec != text_spec:
        raise InputError(
            f"the model's vocabulary was built with tokenizer {mspec.describe()} but the text is tokenized with "
            f"{text_spec.describe()}", path=model_path,
            fix="drop the tokenizer options (the model's own are used) or retrain with matching options")


def other_kind(path: str):
    """The registered model family of ``path`` when it is not an n-gram model (a neural checkpoint),
    else None; see :mod:`corpora.modelkinds` (this package never imports ``neural``)."""
    from corpora.modelkinds import kind_of

    from ngramlm.io.native import is_native

    try:
        with open(path, "rb") as fh:
            head = fh.read(4)
    except OSError:
        return None
    if head != b"PK\x03\x04" or is_native(path):  # ARPA text, gzip, or our own .npz
        return None
    return kind_of(path)


def save_model(lm, output: str) -> None:
    if str(output) == "-" or str(output).endswith(MODEL_SUFFIXES_ARPA):  # '-': ARPA text on stdout
        from ngramlm.io.arpa import write_arpa

        write_arpa(lm, output)
    elif is_kenlm_binary_name(output):
        from ngramlm.kenlm.write import BinaryOptions, write_binary

        write_binary(lm, output, BinaryOptions(kind="probing"))
    else:
        lm.save(output)
