"""Reading user text safely: gzip, BOM, CRLF, and precise errors for bad bytes.

Text is always decoded as UTF-8 (a leading BOM is dropped, CRLF and lone CR become
LF).  Anything else -- an empty file, binary data, a pickle, invalid UTF-8 -- is
rejected with an :class:`~corpora.errors.InputError` that names the file, the line
and byte offset, and what to do.
"""
from __future__ import annotations

import contextlib
import errno
import gzip
import os
import sys
import re
import zlib
from pathlib import Path
from typing import Optional, Iterator

from .errors import InputError, ToolkitError

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


TEMP_SUFFIX = ".tmp"


class OutputError(ToolkitError):
    """A file could not be written: names the path, the cause and the fix (one line)."""

    def __init__(self, message: str, *, path: os.PathLike | str, fix: str) -> None:
        self.path, self.message, self.fix = str(path), message, fix
        super().__init__(f"{path}: {message} (fix: {fix})")


def _fix_for(exc: OSError, folder: Path) -> str:
    """The sentence that tells the user what to do about a failed write into ``folder``."""
    if exc.errno in (errno.ENOSPC, errno.EDQUOT):
        return f"free space on the disk holding {folder}, or write somewhere else"
    if exc.errno in (errno.EACCES, errno.EPERM, errno.EROFS):
        return f"choose a writable location, or make {folder} writable"
    if exc.errno == errno.EISDIR:
        return "give a file name, not a directory"
    if exc.errno in (errno.EEXIST, errno.ENOTDIR):
        return "a part of the path is a file, not a folder: choose another path"
    if exc.errno == errno.ENOENT:
        return "check the path: a part of it is not a directory"
    return "check the path and the disk"


def output_error(exc: OSError, path: os.PathLike | str, what: str = "cannot write",
                 folder: Optional[Path] = None) -> OutputError:
    """Turn an ``OSError`` raised while writing ``path`` (into ``folder``, default its parent) into a
    one-line :class:`OutputError`."""
    p = Path(path)
    reason = exc.strerror or str(exc)
    return OutputError(f"{what}: {reason}", path=p, fix=_fix_for(exc, folder or p.parent))


def current_umask() -> int:
    # os.umask can only be read by setting it; set it straight back.
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def pid_alive(pid: int) -> bool:
    if pid == os.getpid():
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _is_stale_temp(name: str, prefix: str = ".") -> bool:
    """``.NAME.PID.RANDOM.tmp`` whose writer PID is gone.  Another live process's temp file is a
    write in progress, not a left-over."""
    if not (name.startswith(prefix) and name.startswith(".") and name.endswith(TEMP_SUFFIX)):
        return False
    parts = name[len(prefix):-len(TEMP_SUFFIX)].split(".")
    if prefix == ".":  # any target name: the pid is the second-to-last dotted part
        pid_part = parts[-2] if len(parts) >= 3 else ""
    else:
        pid_part = parts[0] if parts else ""
    return not (pid_part.isdigit() and pid_alive(int(pid_part)))


def stale_temp_files(path: os.PathLike | str) -> list:
    """Temp files of earlier writes of ``path`` whose writer is gone (killed with -9, power loss)."""
    p = Path(path)
    if not p.parent.is_dir():
        return []
    prefix = f".{p.name}."
    return sorted(q for q in p.parent.iterdir() if _is_stale_temp(q.name, prefix))


def sweep_stale_temp_files(folder: os.PathLike | str) -> int:
    """Remove every stale atomic-write temp file under ``folder`` (``--force`` on a run folder)."""
    root = Path(folder)
    if not root.is_dir():
        return 0
    return _unlink_all(q for q in root.rglob(f".*{TEMP_SUFFIX}") if q.is_file() and _is_stale_temp(q.name))


def remove_stale_temp_files(path: os.PathLike | str) -> int:
    return _unlink_all(stale_temp_files(path))


def _unlink_all(paths) -> int:
    """Remove what can be removed (another process may be removing the same left-overs)."""
    n = 0
    for q in paths:
        try:
            q.unlink()
            n += 1
        except OSError:
            pass
    return n


def check_writable(path: os.PathLike | str, *, what: str = "output file", create_parents: bool = True,
                   stdout_ok: bool = False) -> Path:
    """Check *before* any work that ``path`` can be written; raise a one-line :class:`OutputError` if not.

    ``-`` means standard output only where the output is text (``stdout_ok``: an ARPA file, a
    vocabulary's JSON); a binary file or a folder named ``-`` is refused, never written to a
    terminal or to a file literally named ``-``.

    Creates missing parent folders (as the write would), refuses a directory, and proves the
    folder writable by creating and removing a temp file there -- permissions, read-only
    file systems and a full disk's inode table all show up now rather than after hours of work.
    Stale temp files of earlier killed writes of ``path`` are removed.
    """
    import tempfile

    if str(path) == "-":
        if stdout_ok:
            return Path("-")  # standard output
        raise OutputError(f"'-' (standard output) cannot take a {what}: it is binary, not text", path=path,
                          fix="give a file name")
    p = Path(path)
    if str(path) in ("", "."):
        raise OutputError(f"no {what} name given", path=path, fix="give a file name")
    if p.is_dir():
        raise OutputError(f"is a directory, not an {what}", path=p, fix="give a file name inside it")
    if p.exists() and not p.is_file():
        return p  # a device or pipe: written in place (see atomic_writer)
    probe_dir = p.parent
    if create_parents:
        missing = not p.parent.exists()
        try:
            p.parent.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise output_error(exc, p, "cannot create the folder") from None
        if missing:  # said, not silent: a mistyped folder shows up now, not as a model gone missing later
            print(f"note: created the folder {p.parent} for the {what}", file=sys.stderr)
    else:  # leave nothing behind: probe the nearest folder that exists
        while not probe_dir.exists() and probe_dir != probe_dir.parent:
            probe_dir = probe_dir.parent
        if not probe_dir.is_dir():
            raise OutputError(f"{probe_dir} is not a folder", path=p, fix="check the path")
    if p.exists() and not os.access(p, os.W_OK) and not os.access(p.parent, os.W_OK):
        raise OutputError("the file exists and is read-only", path=p, fix="choose another name, or make it writable")
    try:
        fd, tmp = tempfile.mkstemp(prefix=f".{p.name}.{os.getpid()}.", suffix=TEMP_SUFFIX, dir=probe_dir)
        os.close(fd)
        os.unlink(tmp)
    except OSError as exc:
        raise output_error(exc, p, folder=probe_dir) from None  # the folder that exists, not one to create
    remove_stale_temp_files(p)
    return p


def shown_path(path: os.PathLike | str) -> str:
    """A path as a report should print it: relative to the working folder when inside it, ``~/...``
    under the home folder, else as given -- so committed reports name no machine's folders."""
    p = str(path)
    if not os.path.isabs(p):
        return p
    for base, prefix in ((os.getcwd(), ""), (os.path.expanduser("~"), "~/")):
        try:
            rel = os.path.relpath(p, base)
        except ValueError:  # another drive (Windows)
            continue
        if not rel.startswith(".."):
            return prefix + rel
    return p


class FolderBusy(ToolkitError):
    """Another process is writing the same output folder."""


def _lock_fd(fd: int) -> bool:
    """Take an exclusive, non-blocking lock on an open file; False if another process holds it."""
    try:
        import fcntl
    except ImportError:  # Windows
        import msvcrt

        try:
            msvcrt.locking(fd, msvcrt.LK_NBLCK, 1)
            return True
        except OSError:
            return False
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        return True
    except OSError:
        return False


@contextlib.contextmanager
def folder_lock(folder: os.PathLike | str, *, what: str = "run"):
    """Hold an exclusive lock on output folder ``folder`` while a run writes it.

    The lock is a file *beside* the folder (``.NAME.lock``), so it can be taken before the
    folder is checked or created: two runs started at once into one folder cannot both pass the
    "empty folder" check.  The second is refused at once with the holder's pid (a lock dies
    with its process, so ``kill -9`` leaves nothing to clean).  The file is removed on release;
    a waiter that locked the removed file notices (another inode now at the path) and retries.
    """
    p = Path(folder)
    lock = p.parent / f".{p.name or 'out'}.lock"
    try:
        p.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise output_error(exc, p, "cannot create the folder") from None
    while True:
        try:
            fd = os.open(lock, os.O_RDWR | os.O_CREAT, 0o666 & ~current_umask())
        except OSError as exc:
            raise output_error(exc, lock, "cannot create the lock file") from None
        if not _lock_fd(fd):
            try:
                holder = os.read(fd, 32).decode("ascii", "replace").strip() or "?"
            finally:
                os.close(fd)
            raise FolderBusy(f"{p}: another {what} (pid {holder}) is writing this folder (fix: wait for it to "
                             "finish, or choose another --out)")
        try:
            same = os.fstat(fd).st_ino == os.stat(lock).st_ino
        except OSError:
            same = False
        if same:
            break
        os.close(fd)  # the holder removed the file after we opened it: lock the new one
    try:
        os.ftruncate(fd, 0)
        os.write(fd, f"{os.getpid()}\n".encode("ascii"))
        yield p
    finally:
        try:
            os.unlink(lock)
        except OSError:
            pass
        os.close(fd)


@contextlib.contextmanager
def atomic_writer(path: os.PathLike | str):
    """Yield a binary file handle whose content replaces ``path`` only on success.

    The bytes go to a temporary file ``.NAME.PID.RANDOM.tmp`` in the same directory, are
    flushed and fsynced, then renamed over the target (atomic on POSIX): a crash or Ctrl-C
    at any point leaves either the old file or the new one, never half of one.  The temp
    file is removed on every exit path Python sees; one left by ``kill -9`` is recognised by
    its dead writer's pid and removed by the next write of the same path.  The file gets
    the permissions of an ordinary ``open()`` (0666 less the umask), not mkstemp's 0600.
    Any ``OSError`` (read-only folder, full disk, ...) becomes a one-line :class:`OutputError`.
    """
    import sys
    import tempfile

    if str(path) == "-":  # '-' is standard output wherever a single stream is written
        out = sys.stdout.buffer
        yield out
        out.flush()
        return
    p = Path(path)
    if p.is_dir():
        raise OutputError("is a directory, not a file", path=p, fix="give a file name inside it")
    if p.exists() and not p.is_file():
        # A device or a pipe (/dev/stdout, a FIFO): there is nothing to replace atomically,
        # and renaming over it would replace the device node itself.
        try:
            with open(p, "wb") as fh:
                yield fh
        except OSError as exc:
            raise output_error(exc, p) from None
        return
    try:
        p.parent.mkdir(parents=True, exist_ok=True)
        remove_stale_temp_files(p)
        fd, tmp = tempfile.mkstemp(prefix=f".{p.name}.{os.getpid()}.", suffix=TEMP_SUFFIX, dir=p.parent)
    except OSError as exc:
        raise output_error(exc, p) from None
    try:
        os.fchmod(fd, 0o666 & ~current_umask())
        with os.fdopen(fd, "wb") as fh:
            yield fh
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, p)
    except BaseException as exc:
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass
        if isinstance(exc, OSError) and not isinstance(exc, ToolkitError):
            raise output_error(exc, p) from None
        raise


@contextlib.contextmanager
def atomic_writer_by_suffix(path: os.PathLike | str):
    """:func:`atomic_writer`, gzip-compressed where ``path`` ends in ``.gz`` (as lmplz's users write
    ``-o lm.arpa.gz``; the readers gunzip by content).  The gzip header carries no time stamp, so the
    same model gives the same bytes."""
    import gzip

    if not str(path).endswith(".gz"):
        with atomic_writer(path) as fh:
            yield fh
        return
    with atomic_writer(path) as raw, gzip.GzipFile(fileobj=raw, mode="wb", compresslevel=6, mtime=0) as gz:
        yield gz


def atomic_write_bytes(path: os.PathLike | str, data: bytes) -> None:
    """Write ``data`` to ``path`` atomically (see :func:`atomic_writer`)."""
    with atomic_writer(path) as fh:
        fh.write(data)


def atomic_write_text(path: os.PathLike | str, text: str) -> None:
    atomic_write_bytes(path, text.encode("utf-8"))


def _open_stream(path: os.PathLike | str):
    """A binary stream of the file's bytes, gunzipped on the fly (by magic, not by name)."""
    p = Path(path)
    if p.is_dir():
        raise InputError("is a directory, not a text file", path=p, fix="pass a text file")
    try:
        fh = open(p, "rb")
    except FileNotFoundError:
        raise InputError("no such file", path=p, fix="check the path") from None
    except PermissionError:
        raise InputError("permission denied", path=p, fix="make the file readable") from None
    if fh.read(2) == GZIP_MAGIC:
        fh.close()
        return gzip.open(p, "rb")  # owns (and closes) its file
    fh.seek(0)
    return fh


# The characters beyond ASCII that str.split() splits on (NEL, NBSP, the Unicode spaces and separators).
UNICODE_SPACE = re.compile("[\x85\xa0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000]")


def iter_line_blocks(source, *, block_bytes: int = 16 << 20, start: int = 0, end: Optional[int] = None,
                     first_line: int = 1, name: Optional[str] = None, tee=None,
                     raw: bool = False) -> Iterator[tuple[int, list]]:
    """Stream a text as ``(number of the block's first line, [lines])``, never holding it whole.

    ``source`` is a path (plain or gzip) or a binary file object (stdin's buffer).  The same
    rules as :func:`decode_text` -- UTF-8, a leading BOM dropped, CRLF and CR as LF, NUL bytes
    and invalid UTF-8 refused with the line number -- applied block by block.  ``start``/``end``
    read a byte range of a plain file (a shard that begins at a line start; the line at ``end``
    belongs to the next shard); ``tee`` receives every raw byte read (to spool stdin for a second
    pass).  An empty text yields nothing; the caller decides whether that is an error.
    With ``raw``, a block comes as its checked UTF-8 bytes instead of a list of lines, for a tokenizer
    that splits bytes (``ngramlm._fast.tokens.Spooler``): line ends LF, and every whitespace character
    beyond ASCII that ``str.split()`` splits on turned into a space, so splitting the bytes on ASCII
    whitespace cuts the same tokens.
    """
    label = name or (str(source) if isinstance(source, (str, os.PathLike)) else "<stdin>")
    own = isinstance(source, (str, os.PathLike))
    fh = _open_stream(source) if own else source
    try:
        if start:
            fh.seek(start)
        remaining = None if end is None else end - start
        carry = b""
        line_no = first_line
        first = start == 0
        while True:
            want = block_bytes if remaining is None else min(block_bytes, remaining)
            chunk = fh.read(want) if want > 0 else b""
            if tee is not None and chunk:
                tee.write(chunk)
            if remaining is not None:
                remaining -= len(chunk)
            if not chunk:
                data, carry = carry, b""
                if not data:
                    return
            else:
                data = carry + chunk
                cut = data.rfind(b"\n")
                if cut < 0:
                    carry = data
                    continue
                data, carry = data[:cut + 1], data[cut + 1:]
            if first:
                if data.startswith(UTF8_BOM):
                    data = data[len(UTF8_BOM):]
                first = False
            nul = data.find(b"\x00")
            if nul >= 0:
                raise InputError("binary data: a NUL byte", path=label, line=line_no + data.count(b"\n", 0, nul), fix="pass a UTF-8 text file")
            try:
                text = data.decode("utf-8")
            except UnicodeDecodeError as exc:
                raise InputError(f"not valid UTF-8 (bytes {data[exc.start:exc.start + 4].hex(' ')})", path=label,
                                 line=line_no + data.count(b"\n", 0, exc.start),
                                 fix="convert the file to UTF-8, e.g. `iconv -f latin1 -t utf-8`") from None
            if raw:
                newlines = data.count(b"\n")
                if not text.isascii() and UNICODE_SPACE.search(text):
                    # str.split() splits on these too: as spaces, a byte splitter cuts the same tokens
                    data = UNICODE_SPACE.sub(" ", text).encode("utf-8")
                if b"\r" in data:
                    data = data.replace(b"\r\n", b"\n").replace(b"\r", b"\n")
                yield line_no, data
                line_no += newlines
                if not chunk:
                    return
                continue
            if "\r" in text:
                text = text.replace("\r\n", "\n").replace("\r", "\n")
            lines = text.split("\n")
            if lines and lines[-1] == "":
                lines.pop()
            yield line_no, lines
            line_no += data.count(b"\n")
            if not chunk:
                return
    except (OSError, EOFError, zlib.error) as exc:
        if isinstance(exc, InputError):
            raise
        raise InputError(f"cannot read the text ({exc})", path=label,
                         fix="check the file (a truncated .gz?) and that it is readable") from None
    finally:
        if own:
            fh.close()
