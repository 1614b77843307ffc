"""CLI commands for corpora, vocabularies, tokenization and corpus statistics.

``cli.py`` imports these lazily:

* ``ngramlm corpora list | info NAME | download NAME``
* ``ngramlm vocab build CORPUS_OR_FILE -o vocab.json`` and ``ngramlm vocab stats CORPUS_OR_FILE``
* ``ngramlm tokenize [FILES...]``
* ``ngramlm stats [CORPUS]``

Every user error is raised as :class:`~corpora.errors.InputError`; ``cli.main``
prints it on one line and exits with status 2.
"""
from __future__ import annotations

import sys
from collections import Counter
from pathlib import Path
from typing import Iterable, Optional

import click

from .errors import InputError
from .options import data_dir_option, json_option, tokenizer_options, tokenizer_spec
from .textio import check_writable
from .tokenize import TokenizerSpec

_MIN_COUNT_TABLE = (1, 2, 3, 5)
_MAX_SIZE_TABLE = (100, 1000, 10000)
_COVERAGE_K = (100, 1000, 10000)


# ---------------------------------------------------------------------------- shared options
# --data-dir and the tokenizer options are spelled once for every command (corpora.options).


def _parse_int(value: Optional[str], option: str, *, minimum: int = 1) -> Optional[int]:
    if value is None:
        return None
    try:
        number = int(str(value).replace("_", "").replace(",", ""))
    except ValueError:
        raise InputError(f"{option} must be an integer >= {minimum}, got {value!r}",
                         fix=f"use e.g. {option} {max(minimum, 2)}") from None
    if number < minimum:
        raise InputError(f"{option} must be an integer >= {minimum}, got {number}",
                         fix=f"use {option} {minimum} or more")
    return number


def _is_registered(source: str) -> bool:
    from .registry import REGISTRY

    return source in REGISTRY


def _base_tokenizer(source: str) -> TokenizerSpec:
    from .registry import get_spec

    return get_spec(source).tokenizer if _is_registered(source) else TokenizerSpec()


def _load(source: str, *, data_dir: Optional[str], tokenizer: Optional[TokenizerSpec],
          splits: Iterable[str] = ("train", "valid", "test")):
    """load_corpus with the toy generator's absence turned into a clear error."""
    from .corpus import load_corpus

    try:
        return load_corpus(source, data_dir=data_dir, tokenizer=tokenizer, splits=tuple(splits))
    except ImportError:
        import importlib.util

        if _is_registered(source) and importlib.util.find_spec("corpora.toy") is None:
            raise InputError(f"the generated corpus {source!r} is not available in this installation "
                             "(corpora/toy.py is missing)", fix="give another corpus, e.g. `ngramlm stats ptb`") from None
        raise


def _pct(x: float) -> str:
    return f"{100.0 * x:.2f}%"


def _table(rows: list, header: list, *, indent: str = "  ", left: tuple = (0,)) -> str:
    """Plain-text table: columns in ``left`` left-aligned, the rest (numbers) right-aligned."""
    cells = [header] + [[str(c) for c in r] for r in rows]
    widths = [max(len(r[i]) for r in cells) for i in range(len(header))]
    lines = []
    for r in cells:
        parts = [c.ljust(w) if i in left else c.rjust(w) for i, (c, w) in enumerate(zip(r, widths))]
        lines.append(indent + "  ".join(parts).rstrip())
    return "\n".join(lines)


# ---------------------------------------------------------------------------- corpora
@click.group("corpora")
def corpora_group() -> None:
    """List, inspect and download named corpora."""


@corpora_group.command("list")
@data_dir_option
def corpora_list(data_dir: Optional[str]) -> None:
    """List the known corpora and whether each is in the data directory."""
    from .datadir import describe_source
    from .download import download_status
    from .registry import REGISTRY

    click.echo(f"data directory: {describe_source(data_dir)}")
    rows = [[spec.name, download_status(spec, data_dir),
             (f"[parallel {spec.parallel.direction}] " if spec.parallel else "") + spec.description]
            for spec in REGISTRY.values()]
    click.echo(_table(rows, ["name", "downloaded", "description"], indent="", left=(0, 1, 2)))


def _file_counts(path: Path) -> tuple:
    """(lines, whitespace tokens) of a local file, counted on its bytes."""
    raw = path.read_bytes()
    lines = raw.count(b"\n") + (1 if raw and not raw.endswith(b"\n") else 0)
    return lines, len(raw.split())


@corpora_group.command("info")
@click.argument("name")
@data_dir_option
def corpora_info(name: str, data_dir: Optional[str]) -> None:
    """Sources, checksums, splits, conventions and local status of corpus NAME."""
    from .datadir import describe_source
    from .download import verify_corpus
    from .registry import get_spec

    spec = get_spec(name)
    echo = click.echo
    echo(f"{spec.name}: {spec.description}")
    if spec.homepage:
        echo(f"  homepage: {spec.homepage}")
    if spec.license:
        echo(f"  license: {spec.license}")
    par = spec.parallel
    if par is not None:
        conv = [f"parallel: one sentence pair per line, {par.src_lang} (column {par.src_column + 1}) -> "
                f"{par.tgt_lang} (column {par.tgt_column + 1}), tab-separated",
                f"tokenizer {spec.tokenizer.describe()}",
                f"one vocabulary per language, fitted on train, min_count {par.min_count}",
                "read with corpora.parallel.load_parallel (not as LM text)"]
    else:
        conv = ["one sentence per line" if spec.sentence_mode == "lines" else "running text (one sequence per split)",
                f"tokenizer {spec.tokenizer.describe()}"]
        conv.append(f"unknown-word token {spec.unk_token!r}" if spec.unk_token else "no unknown-word token of its own")
        conv.append("empty lines count as sentences" if spec.keep_empty_lines else "empty lines skipped")
    if spec.line_filter:
        conv.append(f"line filter {spec.line_filter}")
    echo(f"  conventions: {'; '.join(conv)}")
    if spec.generated:
        echo(f"  splits: {', '.join(spec.files)} (generated by {spec.homepage or 'corpora/toy.py'}; nothing to download)")
        return
    if par is not None:
        v, t = par.holdout
        echo(f"  splits: one file, {par.filename}: pairs shuffled with a seed (default 0), then train = first "
             f"{1 - v - t:.0%}, valid = next {v:.0%}, test = last {t:.0%}")
    elif spec.single_file:
        v, t = spec.holdout
        echo(f"  splits: one file, {spec.files['train']}: train = leading lines, valid = next {v:.0%}, "
             f"test = last {t:.0%} of the kept lines")
    else:
        echo("  splits: " + ", ".join(f"{s}={f}" for s, f in spec.files.items()))
    echo("  downloads:")
    for r in spec.downloads:
        size = f", {r.size:,} bytes" if r.size else ""
        echo(f"    {r.url}")
        if r.head_lines is not None:
            echo(f"      keep the first {r.head_lines:,} lines as {r.filename}")
        echo(f"      sha256 {r.sha256}{size}" + (" (of the kept lines)" if r.head_lines is not None else ""))
        if r.extract:
            for member, local in r.extract.items():
                echo(f"      extract {member} -> {local}")
    report = verify_corpus(spec.name, data_dir)
    echo(f"  data directory: {describe_source(data_dir)}")
    echo(f"  local folder: {report['folder']}")
    for f in report["files"]:
        if not f["present"]:
            state = "missing"
        elif f["check"] == "presence":
            state = "present (extracted from the archive; only the archive has a checksum)"
        elif f["ok"]:
            state = "sha256 ok"
        else:
            state = f"CHECKSUM MISMATCH (got {f['sha256']})"
        extra = ""
        if f["present"]:
            lines, toks = _file_counts(f["path"])
            extra = f"  {f['size']:,} bytes, {lines:,} lines, {toks:,} whitespace tokens"
        echo(f"    {f['filename']}: {state}{extra}")
    for p in report["stray"]:
        echo(f"    {p.name}: left-over partial download (safe to delete)")
    if not report["complete"]:
        echo(f"  status: incomplete; run `ngramlm corpora download {spec.name}`")
        return
    echo("  status: complete")
    if par is not None:
        _parallel_info_table(spec.name, data_dir)
        return
    corpus = _load(spec.name, data_dir=data_dir, tokenizer=None)
    rows = []
    for s, sents in corpus.splits.items():
        n_words = sum(len(x) for x in sents)
        rows.append([s, f"{len(sents):,}", f"{n_words:,}", f"{n_words + len(sents):,}"])
    echo(f"  tokenized with {corpus.tokenizer.describe()}:")
    echo(_table(rows, ["split", "sentences", "words", "words+</s>"], indent="    "))


def _parallel_info_table(name: str, data_dir: Optional[str]) -> None:
    from .parallel import load_parallel

    pc = load_parallel(name, data_dir=data_dir)
    sizes = pc.sizes()
    rows = [[s, f"{d['pairs']:,}", f"{d['src_tokens']:,}", f"{d['tgt_tokens']:,}"] for s, d in sizes.items()]
    click.echo(f"  tokenized with {pc.tokenizer.describe()}, seed {pc.seed}:")
    click.echo(_table(rows, ["split", "pairs", f"{pc.src_lang} tokens", f"{pc.tgt_lang} tokens"], indent="    "))
    click.echo(f"  vocabularies (train, min_count {pc.src_vocab.min_count}, ids incl. <pad> <s> </s> <unk>): "
               f"{pc.src_lang} {len(pc.src_vocab):,}, {pc.tgt_lang} {len(pc.tgt_vocab):,}")


@corpora_group.command("download")
@click.argument("name")
@click.option("--force", is_flag=True, help="Download again even if verified files are present.")
@click.option("--mirror", default=None, metavar="URL",
              help="Fetch <URL>/<NAME>/<filename> instead of the canonical URLs (also $NGRAMLM_DOWNLOAD_MIRROR).")
@click.option("--quiet", "-q", is_flag=True, help="No progress bars or per-file lines.")
@data_dir_option
def corpora_download(name: str, force: bool, mirror: Optional[str], quiet: bool, data_dir: Optional[str]) -> None:
    """Download corpus NAME into the data directory, verifying every checksum."""
    from .download import download_corpus, resolve_mirror
    from .registry import get_spec

    spec = get_spec(name)
    if spec.generated:
        click.echo(f"{spec.name} is generated on the fly: nothing to download")
        return
    chosen = resolve_mirror(mirror)
    if chosen is not None and not chosen.startswith(("http://", "https://")):
        raise InputError(f"mirror {chosen!r} is not an http(s) URL", fix="use e.g. --mirror http://host:8000")
    log = (lambda line: None) if quiet else click.echo
    progress = (not quiet) and sys.stderr.isatty()
    folder = download_corpus(spec.name, data_dir=data_dir, force=force, progress=progress, base_url=mirror, log=log)
    click.echo(f"{spec.name}: ready in {folder}")


# ---------------------------------------------------------------------------- vocab
@click.group("vocab")
def vocab_group() -> None:
    """Build a vocabulary and report its statistics."""


def _check_output(output: str, source: str) -> Path:
    out = Path(output)
    if out.is_dir():
        raise InputError("is a directory", path=out, fix="give a file name, e.g. -o vocab.json")
    src = Path(source)
    if src.exists() and src.resolve() == out.resolve():
        raise InputError("the output file is the input text", path=out, fix="write the vocabulary to another file")
    return out


@vocab_group.command("build")
@click.argument("source", metavar="CORPUS_OR_FILE")
@click.option("-o", "--output", "--out", "output", required=True, metavar="VOCAB.json",
              help="Where to write the vocabulary (JSON); '-' is stdout.")
@click.option("--min-count", default=None, metavar="N", help="Keep words seen at least N times in train (default 1).")
@click.option("--max-size", default=None, metavar="K", help="Keep at most the K most frequent words.")
@tokenizer_options
@data_dir_option
def vocab_build(source: str, output: str, min_count: Optional[str], max_size: Optional[str],
                tokenizer: Optional[str], lower: Optional[bool], normalize: Optional[str], data_dir: Optional[str]) -> None:
    """Fit a vocabulary on the training split of CORPUS_OR_FILE and write it as JSON.

    A text file is fitted on all its lines, as `ngramlm train` counts them (a blank line is an
    empty sentence); a named corpus on its train split.
    """
    mc = _parse_int(min_count, "--min-count") or 1
    ms = _parse_int(max_size, "--max-size")
    out = _check_output(output, source)
    if output != "-":
        check_writable(out, what="vocabulary file")  # before the corpus is read
    tok = tokenizer_spec(tokenizer, lower, normalize, _base_tokenizer(source))
    corpus = _load(source, data_dir=data_dir, tokenizer=tok, splits=("train",))
    vocab = corpus.new_vocab(min_count=mc, max_size=ms).fit(corpus.sentences("train"))
    vocab.save(out)  # atomic; '-' writes the JSON to stdout; a failure is a one-line OutputError
    to_stderr = output == "-"  # keep stdout pure JSON then
    click.echo(repr(vocab), err=to_stderr)
    st = vocab.stats()
    click.echo(f"wrote {out}: {len(vocab):,} ids; fitted on {st['train_tokens']:,} train tokens of "
               f"{corpus.name} ({st['train_tokens_mapped_to_unk']:,} mapped to {vocab.unk_token}, "
               f"{_pct(st['train_unk_rate'])})", err=to_stderr)


@vocab_group.command("stats")
@click.argument("source", metavar="CORPUS_OR_FILE")
@click.option("--vocab", "vocab_path", default=None, metavar="VOCAB.json",
              help="Report on this vocabulary instead of fitting one on train.")
@click.option("--min-count", default=None, metavar="N", help="Fit with this min_count (default 1).")
@click.option("--max-size", default=None, metavar="K", help="Fit with this max_size (default none).")
@tokenizer_options
@data_dir_option
def vocab_stats(source: str, vocab_path: Optional[str], min_count: Optional[str], max_size: Optional[str],
                tokenizer: Optional[str], lower: Optional[bool], normalize: Optional[str], data_dir: Optional[str]) -> None:
    """Vocabulary size, cut-off effects, OOV rate per split and top-K coverage."""
    from .vocab import Vocab

    mc = _parse_int(min_count, "--min-count")
    ms = _parse_int(max_size, "--max-size")
    tok = tokenizer_spec(tokenizer, lower, normalize, _base_tokenizer(source))
    vocab = None
    if vocab_path is not None:
        if mc is not None or ms is not None:
            raise InputError("--min-count/--max-size cannot be combined with --vocab (the file fixes them)",
                             path=vocab_path, fix="drop one of them")
        vocab = Vocab.load(vocab_path)
        if tok is None:
            tok = vocab.tokenizer
        elif vocab.tokenizer is not None and vocab.tokenizer != tok:
            raise InputError(
                f"the vocabulary was built with tokenizer {vocab.tokenizer.describe()}, not {tok.describe()}",
                path=vocab_path, fix="drop the tokenizer options or rebuild the vocabulary",
            )
    # A file: all its lines, as `vocab build` fits them (a named corpus: every split, for the OOV table).
    corpus = _load(source, data_dir=data_dir, tokenizer=tok,
                   splits=("train", "valid", "test") if _is_registered(source) else ("train",))
    train = corpus.sentences("train")
    counts: Counter = Counter()
    for sent in train:
        counts.update(sent)
    unk = vocab.unk_token if vocab is not None else (corpus.unk_token or "<unk>")

    def fitted(m: int, k: Optional[int]) -> Vocab:
        return Vocab(min_count=m, max_size=k, unk_token=unk, tokenizer=corpus.tokenizer).fit_counts(counts)

    if vocab is None:
        vocab = fitted(mc or 1, ms)
        origin = f"fitted on the train split of {corpus.name}"
    else:
        origin = f"loaded from {vocab_path}"
    st = vocab.stats()
    echo = click.echo
    echo(f"{vocab!r}")
    echo(f"  {origin}; text tokenized with {corpus.tokenizer.describe()}")
    echo(f"  size (ids incl. <pad>, <s>): {len(vocab):,}")
    echo(f"  n_types (predicted: words + {vocab.unk_token} + </s>): {vocab.n_types:,}")
    echo(f"  word types incl. {vocab.unk_token}: {vocab.n_words:,}")
    echo(f"  train tokens: {st['train_tokens']:,} ({len(counts):,} distinct)")
    echo(f"  train tokens mapped to {vocab.unk_token}: {st['train_tokens_mapped_to_unk']:,} "
         f"({_pct(st['train_unk_rate'])}), of which the corpus's own {vocab.unk_token}: {vocab.n_corpus_unk_:,}")

    echo("\ncut-offs (fitted on train):")
    settings = [(m, None) for m in _MIN_COUNT_TABLE] + [(1, k) for k in _MAX_SIZE_TABLE]
    current = (vocab.min_count, vocab.max_size)
    if current not in settings:
        settings.append(current)
    rows = []
    for m, k in settings:
        s = fitted(m, k).stats()
        mark = "*" if (m, k) == current else ""
        rows.append([f"{m}{mark}", "-" if k is None else f"{k:,}", f"{s['n_types']:,}", _pct(s["train_unk_rate"])])
    echo(_table(rows, ["min_count", "max_size", "n_types", "train unk rate"]))

    echo("\nper split (OOV: word tokens not in the vocabulary; predicted tokens = words + </s>):")
    rows = []
    for split, sents in corpus.splits.items():
        oov, n = vocab.oov_count(sents)
        enc = vocab.encode_sentences(sents)
        rows.append([split, f"{enc.n_sentences:,}", f"{n:,}", f"{oov:,}", _pct(oov / n if n else 0.0),
                     f"{enc.n_tokens:,}", f"{enc.n_unk:,}"])
    echo(_table(rows, ["split", "sentences", "words", "OOV", "OOV rate", "predicted", f"{vocab.unk_token} in stream"]))

    echo("\ncoverage of train word tokens by the top-K word types:")
    rows = [[f"{k:,}", _pct(vocab.coverage(k))] for k in _COVERAGE_K]
    echo(_table(rows, ["K", "coverage"]))


# ---------------------------------------------------------------------------- tokenize
def _iter_stdin_lines(stream) -> Iterable[str]:
    """Lines of UTF-8 bytes from a binary stream, with located errors (like corpora.textio)."""
    offset = 0
    for number, raw in enumerate(stream, start=1):
        if number == 1 and raw.startswith(b"\xef\xbb\xbf"):
            offset += 3
            raw = raw[3:]
        nul = raw.find(b"\x00")
        if nul >= 0:
            raise InputError(f"binary data: NUL byte at byte offset {offset + nul}", path="<stdin>", line=number,
                             fix="pipe UTF-8 text")
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise InputError(
                f"not valid UTF-8 at byte offset {offset + exc.start} (bytes {raw[exc.start:exc.start + 4].hex(' ')})",
                path="<stdin>", line=number, fix="convert the text to UTF-8, e.g. `iconv -f latin1 -t utf-8`",
            ) from None
        offset += len(raw)
        if text.endswith("\n"):
            text = text[:-1]
        if "\r" in text:
            text = text.replace("\r\n", "\n").replace("\r", "\n")
            if text.endswith("\n"):  # a CRLF line end
                text = text[:-1]
            yield from text.split("\n")
        else:
            yield text


@click.command("tokenize")
@click.argument("files", nargs=-1, metavar="[FILES]...")
@tokenizer_options(kind_help="Tokenizer (default: whitespace; bpe:N / unigram:N learn from --vocab's training text, "
                             "else from the input itself).")
@click.option("--vocab", "vocab_path", default=None, metavar="VOCAB.json",
              help="Tokenize as this vocabulary was built: its tokenizer, learned pieces included.")
def tokenize_cmd(files: tuple, tokenizer: Optional[str], lower: Optional[bool], normalize: Optional[str],
                 vocab_path: Optional[str]) -> None:
    """Tokenize text from stdin (or FILES, plain or .gz): one line of space-separated tokens per input line.

    A learned tokenizer shows its pieces: `--vocab vocab.json` uses the one a vocabulary carries; `--tokenizer bpe:N` alone learns N pieces from the input first (said on stderr).
    """
    from .textio import iter_lines
    from .tokenize import fit_tokenizer, make_tokenizer

    if vocab_path is not None:
        if tokenizer is not None or lower is not None or normalize is not None:
            raise InputError("--vocab fixes the tokenizer; the tokenizer options cannot be combined with it",
                             path=vocab_path, fix="drop --tokenizer/--lower/--normalize, or drop --vocab")
        spec = _vocab_tokenizer(vocab_path)
    else:
        spec = tokenizer_spec(tokenizer, lower, normalize, TokenizerSpec()) or TokenizerSpec()
    sources = list(files) or ["-"]

    def lines_of(src):
        return _iter_stdin_lines(sys.stdin.buffer) if src == "-" else (line for _, line in iter_lines(src))

    held = None
    if not spec.fitted:  # learn the pieces from the input (stdin is read once, so it is held)
        held = {src: list(lines_of(src)) for src in sources}
        spec = fit_tokenizer(spec, (line for lines in held.values() for line in lines))
        click.echo(f"learned {spec.describe()} from the input ({sum(map(len, held.values())):,} lines); "
                   f"`ngramlm vocab build TEXT --tokenizer {spec.describe()}` keeps pieces for reuse", err=True)
    tok = make_tokenizer(spec)
    sys.stdout.flush()
    out = sys.stdout.buffer
    for src in sources:
        lines = held[src] if held is not None else lines_of(src)
        buf = []
        for line in lines:
            buf.append(line)
            if len(buf) >= 4096:
                out.write(("\n".join(" ".join(t) for t in tok.encode_lines(buf)) + "\n").encode("utf-8"))
                buf.clear()
        if buf:
            out.write(("\n".join(" ".join(t) for t in tok.encode_lines(buf)) + "\n").encode("utf-8"))


def _vocab_tokenizer(path: str) -> TokenizerSpec:
    """The tokenizer a vocabulary JSON records."""
    from .vocab import Vocab

    vocab = Vocab.load(path)
    if vocab.tokenizer is None:
        raise InputError("this vocabulary records no tokenizer", path=path, fix="rebuild it with `ngramlm vocab build`")
    return vocab.tokenizer
