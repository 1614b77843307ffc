"""Reading user text safely: gzip, BOM, CRLF, and precise errors for bad bytes.

Text is always decoded as UTF-8 (a leading BOM is dropped, CRLF and lone CR become
LF).  Anything else -- an empty file, binary data, a pickle, invalid UTF-8 -- is
rejected with an :class:`~corpora.errors.InputError` that names the file, the line
and byte offset, and what to do.
"""
from __future__ import annotations

import contextlib
import gzip
import os
import zlib
from pathlib import Path
from typing import Iterator

from .errors import InputError

GZIP_MAGIC = b"\x1f\x8b"
UTF8_BOM = b"\xef\xbb\xbf"


def read_bytes(path: os.PathLike | str) -> bytes:
    """Return the file's bytes, transparently gunzipping gzip data (by magic, not by name)."""
    p = Path(path)
    if p.is_dir():
        raise InputError("is a directory, not a text file", path=p, fix="pass a text file")
    try:
        raw = p.read_bytes()
    except FileNotFoundError:
        raise InputError("no such file", path=p, fix="check the path") from None
    except PermissionError:
        raise InputError("permission denied", path=p, fix="make the file readable") from None
    if raw[:2] == GZIP_MAGIC:
        try:
            raw = gzip.decompress(raw)
        except (OSError, EOFError, zlib.error) as exc:
            raise InputError(
                f"gzip data is truncated or corrupt ({exc})", path=p, fix="re-download or re-compress the file"
            ) from None
    return raw


def decode_text(raw: bytes, *, path: os.PathLike | str | None = None) -> str:
    """Decode UTF-8 bytes into text with LF line ends; raise a located error on bad input."""
    if raw.startswith(UTF8_BOM):
        raw = raw[len(UTF8_BOM):]
    if not raw.strip():
        raise InputError("file is empty (no text)", path=path, fix="pass a file that contains text")
    nul = raw.find(b"\x00")
    if nul >= 0:
        line = raw.count(b"\n", 0, nul) + 1
        hint = "this looks like a pickle or other binary file" if raw[:1] == b"\x80" else "binary data"
        raise InputError(
            f"{hint}: NUL byte at byte offset {nul}", path=path, line=line, fix="pass a UTF-8 text file"
        )
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = raw.count(b"\n", 0, exc.start) + 1
        bad = raw[exc.start:exc.start + 4].hex(" ")
        raise InputError(
            f"not valid UTF-8 at byte offset {exc.start} (bytes {bad})",
            path=path,
            line=line,
            fix="convert the file to UTF-8, e.g. `iconv -f latin1 -t utf-8`",
        ) from None
    if "\r" in text:
        text = text.replace("\r\n", "\n").replace("\r", "\n")
    return text


def read_text(path: os.PathLike | str) -> str:
    """Read a whole text file (``.gz`` or plain) as a string with LF line ends."""
    return decode_text(read_bytes(path), path=path)


def iter_lines(path: os.PathLike | str) -> Iterator[tuple[int, str]]:
    """Yield ``(line_number, line)`` pairs (1-based, without the newline)."""
    text = read_text(path)
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    for i, line in enumerate(lines, start=1):
        yield i, line


@contextlib.contextmanager
def atomic_writer(path: os.PathLike | str):
    """Yield a binary file handle whose content replaces ``path`` only on success.

    The bytes go to a temporary file in the same directory, are flushed and fsynced,
    then renamed over the target (atomic on POSIX): a crash or Ctrl-C at any point
    leaves either the old file or the new one, never half of one.
    """
    import tempfile

    p = Path(path)
    p.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{p.name}.", suffix=".tmp", dir=p.parent)
    try:
        with os.fdopen(fd, "wb") as fh:
            yield fh
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, p)
    except BaseException:
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass
        raise


def atomic_write_bytes(path: os.PathLike | str, data: bytes) -> None:
    """Write ``data`` to ``path`` atomically (see :func:`atomic_writer`)."""
    with atomic_writer(path) as fh:
        fh.write(data)


def atomic_write_text(path: os.PathLike | str, text: str) -> None:
    atomic_write_bytes(path, text.encode("utf-8"))
