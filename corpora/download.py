"""Fetching registered corpora, verified before they become visible.

:func:`download_corpus` streams every :class:`~corpora.registry.RemoteFile` of a
corpus into ``<data_dir>/NAME/``.  The bytes go to a temporary ``.part`` file in that
folder while their SHA-256 is computed; only when the whole body has arrived *and*
the checksum matches is the file renamed into place (``os.replace``, atomic on POSIX).
So a file under its final name is always a complete, verified copy: an interrupted
or corrupted download leaves nothing behind but an :class:`~corpora.errors.InputError`
saying what happened and what to do.  Zip archives are verified the same way, then
the registry's named members are extracted (each written atomically) and the archive
is deleted.  A file with ``head_lines`` (``fra-eng``: the first 5,000 lines of a larger
upstream file) keeps only that head: the checksum is of the kept bytes, and the rest
of the body is never read.

Mirrors
-------
``base_url`` (the CLI's ``--mirror``, or the environment variable
``NGRAMLM_DOWNLOAD_MIRROR``) replaces each file's canonical location by
``<mirror>/<NAME>/<filename>``, e.g. ``http://127.0.0.1:8000/ptb/ptb.train.txt``.
A mirror is simply a web server (or ``python -m http.server`` run in a folder laid
out like the data directory) holding the same bytes; checksums are still enforced.
The test suite uses this to download from a local server.
"""
from __future__ import annotations

import hashlib
import os
import tempfile
import time
import zipfile
from pathlib import Path
from typing import Optional

from .datadir import resolve_data_dir
from .errors import InputError
from .textio import current_umask
from .registry import CorpusSpec, RemoteFile, get_spec

MIRROR_ENV_VAR = "NGRAMLM_DOWNLOAD_MIRROR"
CHUNK_SIZE = 1 << 16
DEFAULT_TIMEOUT = (15.0, 60.0)  # (connect, read) seconds
PART_SUFFIX = ".part"
STALE_PART_SECONDS = 3600  # .part files untouched this long are left-overs of a killed run


# ---------------------------------------------------------------------------- helpers
def sha256_file(path: os.PathLike | str) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def resolve_mirror(base_url: Optional[str] = None) -> Optional[str]:
    """The mirror to use: the argument, else ``$NGRAMLM_DOWNLOAD_MIRROR``, else none."""
    mirror = base_url or os.environ.get(MIRROR_ENV_VAR) or None
    return mirror.rstrip("/") if mirror else None


def remote_url(name: str, remote: RemoteFile, base_url: Optional[str] = None) -> str:
    """Where ``remote`` is fetched from: its canonical URL, or ``<mirror>/<name>/<filename>``."""
    mirror = resolve_mirror(base_url)
    if mirror is None:
        return remote.url
    return f"{mirror}/{name}/{remote.filename}"


def _local_names(remote: RemoteFile) -> list:
    """The files a RemoteFile leaves in the corpus folder."""
    return list(remote.extract.values()) if remote.extract else [remote.filename]


def _check_local_name(name: str) -> None:
    # Registry file names are plain names: never let one escape the corpus folder.
    if not name or Path(name).name != name or name in (".", ".."):
        raise InputError(f"registry file name {name!r} is not a plain file name",
                         fix="fix the entry in corpora/registry.py")


def _temp_path(folder: Path, final_name: str) -> Path:
    fd, tmp = tempfile.mkstemp(prefix=f".{final_name}.", suffix=PART_SUFFIX, dir=folder)
    os.fchmod(fd, 0o666 & ~current_umask())  # an ordinary file's permissions, not mkstemp's 0600
    os.close(fd)
    return Path(tmp)


def _unlink_quietly(path: Optional[Path]) -> None:
    if path is None:
        return
    try:
        path.unlink()
    except FileNotFoundError:
        pass


def _stray_parts(folder: Path) -> list:
    if not folder.is_dir():
        return []
    return sorted(p for p in folder.iterdir() if p.name.startswith(".") and p.name.endswith(PART_SUFFIX))


def _remove_stale_parts(folder: Path) -> None:
    """Delete ``.part`` files a killed download left behind (not ones still being written)."""
    now = time.time()
    for p in _stray_parts(folder):
        try:
            if now - p.stat().st_mtime > STALE_PART_SECONDS:
                p.unlink()
        except FileNotFoundError:
            pass


def _fsync_replace(tmp: Path, final: Path) -> None:
    with open(tmp, "rb+") as fh:
        os.fsync(fh.fileno())
    os.replace(tmp, final)


# ---------------------------------------------------------------------------- one file
def _fetch(url: str, tmp: Path, *, expected_size: Optional[int], progress: bool, desc: str,
           timeout, dest_for_errors: Path, corpus: str, head_lines: Optional[int] = None) -> tuple:
    """Stream ``url`` into ``tmp``; return ``(sha256_hex, n_bytes, n_lines)``.  Raises InputError.

    With ``head_lines``, only the first that many lines (each with its ``\\n``) are written and
    hashed, and the connection is closed once they have arrived; ``n_lines`` counts the
    kept lines (None without ``head_lines``).
    """
    import requests
    from tqdm import tqdm

    retry = f"check the network (or the mirror) and run `ngramlm corpora download {corpus}` again; nothing was saved"
    h = hashlib.sha256()
    n = 0
    total = None
    lines = 0
    cut_short = False  # True once head_lines lines are kept and the rest of the body is dropped
    try:
        with requests.get(url, stream=True, timeout=timeout, headers={"Accept-Encoding": "identity"}) as resp:
            try:
                resp.raise_for_status()
            except requests.HTTPError:
                raise InputError(
                    f"download of {url} failed: HTTP {resp.status_code} {resp.reason or ''}".rstrip(),
                    path=dest_for_errors,
                    fix="check the URL or mirror (a mirror must serve <mirror>/<corpus>/<filename>)",
                ) from None
            length = resp.headers.get("Content-Length")
            encoded = resp.headers.get("Content-Encoding", "identity").lower() not in ("", "identity")
            if length is not None and length.isdigit() and not encoded:
                total = int(length)  # the whole body; with head_lines only a head of it is kept
            with open(tmp, "wb") as out, tqdm(
                total=expected_size if head_lines is not None or total is None else total, unit="B", unit_scale=True,
                unit_divisor=1024, desc=desc, disable=not progress, leave=False,
            ) as bar:
                for chunk in resp.iter_content(chunk_size=CHUNK_SIZE):
                    if not chunk:
                        continue
                    if head_lines is not None:
                        chunk, got = _head(chunk, head_lines - lines)
                        lines += got
                        cut_short = lines >= head_lines
                    out.write(chunk)
                    h.update(chunk)
                    n += len(chunk)
                    bar.update(len(chunk))
                    if cut_short:
                        break  # leaving the `with` closes the connection; the tail is not needed
    except InputError:
        raise
    except requests.Timeout as exc:
        raise InputError(f"download of {url} timed out after {n} bytes ({type(exc).__name__})",
                         path=dest_for_errors, fix=retry) from None
    except requests.ConnectionError as exc:
        what = "could not connect to" if n == 0 and total is None else "connection dropped while downloading"
        raise InputError(f"{what} {url} after {n} bytes ({_short(exc)})", path=dest_for_errors, fix=retry) from None
    except requests.RequestException as exc:
        # ChunkedEncodingError / ContentDecodingError: the body was cut off or garbled.
        raise InputError(
            f"download of {url} was interrupted after {n}"
            + (f" of {total}" if total is not None else "")
            + f" bytes ({_short(exc)})",
            path=dest_for_errors, fix=retry,
        ) from None
    except OSError as exc:
        raise InputError(f"cannot write the download to {tmp.parent} ({exc.strerror or exc})",
                         path=dest_for_errors, fix="free disk space or choose another --data-dir") from None
    if head_lines is not None and not cut_short and n and not _ends_line(tmp):
        lines += 1  # a last line without a final newline
    if total is not None and n != total and not cut_short:
        raise InputError(
            f"download of {url} is incomplete: got {n} of {total} bytes (the connection was closed early)",
            path=dest_for_errors, fix=retry,
        )
    return h.hexdigest(), n, (lines if head_lines is not None else None)


def _head(chunk: bytes, wanted: int) -> tuple:
    """``(kept, n_lines)``: ``chunk`` up to and including its ``wanted``-th newline (all of it
    if it has fewer), and the number of complete lines kept."""
    count = chunk.count(b"\n")
    if count < wanted:
        return chunk, count
    end = -1
    for _ in range(wanted):
        end = chunk.index(b"\n", end + 1)
    return chunk[:end + 1], wanted


def _ends_line(path: Path) -> bool:
    with open(path, "rb") as fh:
        fh.seek(-1, os.SEEK_END)
        return fh.read(1) == b"\n"


def _short(exc: BaseException) -> str:
    """A one-line reason from a (possibly nested) requests/urllib3 exception."""
    for _ in range(4):  # unwrap e.g. ChunkedEncodingError(ProtocolError("Connection broken: ...", ...))
        if exc.args and isinstance(exc.args[0], BaseException):
            exc = exc.args[0]
        else:
            break
    first = exc.args[0] if exc.args and isinstance(exc.args[0], str) else str(exc)
    text = first.splitlines()[0] if first else type(exc).__name__
    return text if len(text) <= 160 else text[:157] + "..."


def _extract_members(archive: Path, remote: RemoteFile, folder: Path, url: str) -> list:
    """Extract ``remote.extract``'s members of a verified zip, each atomically."""
    written = []
    try:
        zf = zipfile.ZipFile(archive)
    except zipfile.BadZipFile as exc:
        raise InputError(f"{url} passed its checksum but is not a readable zip archive ({exc})",
                         path=folder / remote.filename, fix="report this: the registry entry is wrong") from None
    with zf:
        names = set(zf.namelist())
        for member, local in remote.extract.items():
            if member not in names:
                raise InputError(f"archive {url} has no member {member!r}", path=folder / remote.filename,
                                 fix="fix the `extract` mapping of this entry in corpora/registry.py")
            tmp = _temp_path(folder, local)
            try:
                with zf.open(member) as src, open(tmp, "wb") as dst:
                    for block in iter(lambda: src.read(1 << 20), b""):
                        dst.write(block)
                _fsync_replace(tmp, folder / local)
            except BaseException:
                _unlink_quietly(tmp)
                raise
            written.append(folder / local)
    return written


def _download_one(name: str, remote: RemoteFile, folder: Path, *, force: bool, progress: bool,
                  base_url: Optional[str], timeout, log) -> str:
    """Fetch one RemoteFile into ``folder``.  Returns 'skipped' or 'downloaded'."""
    locals_ = _local_names(remote)
    for local in locals_ + [remote.filename]:
        _check_local_name(local)
    final = folder / remote.filename
    if not force:
        if remote.extract:
            # Extracted members cannot be checked (the checksum is the archive's): presence only.
            if all((folder / f).is_file() for f in locals_):
                log(f"  {', '.join(locals_)}: present, skipped (use --force to fetch again)")
                return "skipped"
        elif final.is_file():
            if sha256_file(final) == remote.sha256:
                log(f"  {remote.filename}: present, checksum ok, skipped")
                return "skipped"
            log(f"  {remote.filename}: present but its checksum differs, downloading again")
    url = remote_url(name, remote, base_url)
    tmp = _temp_path(folder, remote.filename)
    try:
        digest, n, n_lines = _fetch(url, tmp, expected_size=remote.size, progress=progress, desc=remote.filename,
                                    timeout=timeout, dest_for_errors=final, corpus=name, head_lines=remote.head_lines)
        if digest != remote.sha256:
            kept = ""
            if remote.head_lines is not None:
                kept = f", the first {n_lines:,} lines" if n_lines == remote.head_lines else \
                    f"; the file has only {n_lines:,} lines, {remote.head_lines:,} are kept"
            raise InputError(
                f"checksum mismatch for {url}: expected sha256 {remote.sha256}, got {digest} ({n} bytes"
                + (f", expected {remote.size}" if remote.size is not None and remote.size != n else "")
                + kept + "); nothing was saved",
                path=final,
                fix=f"retry `ngramlm corpora download {name} --force`; if it persists the server "
                    "(or mirror) serves different bytes: get the file elsewhere and check it with `ngramlm corpora info`",
            )
        if remote.extract:
            _extract_members(tmp, remote, folder, url)
            _unlink_quietly(tmp)  # the archive is not kept
        else:
            _fsync_replace(tmp, final)
    except BaseException:
        _unlink_quietly(tmp)
        raise
    head = f"first {n_lines:,} lines, " if remote.head_lines is not None else ""
    log(f"  {', '.join(locals_)}: downloaded from {url} ({head}{n:,} bytes, sha256 ok)")
    return "downloaded"


# ---------------------------------------------------------------------------- public API
def download_corpus(
    name: str,
    *,
    data_dir: Optional[os.PathLike | str] = None,
    force: bool = False,
    progress: bool = True,
    base_url: Optional[str] = None,
    timeout=DEFAULT_TIMEOUT,
    log=None,
) -> Path:
    """Download and verify corpus ``name`` into ``<data_dir>/<name>/``; return that folder.

    Files already present with the right checksum are skipped unless ``force``.
    ``base_url`` (or ``$NGRAMLM_DOWNLOAD_MIRROR``) fetches ``<base_url>/<name>/<filename>``
    instead of the canonical URLs.  ``log`` receives one line per file (default: silent).
    """
    spec = get_spec(name)
    if spec.generated:
        raise InputError(f"corpus {name!r} is generated on the fly; there is nothing to download",
                         fix=f"use it directly, e.g. `ngramlm stats {name}`")
    if not spec.downloads:
        raise InputError(f"corpus {name!r} has no download source", fix="place its files in the data directory by hand")
    folder = resolve_data_dir(data_dir) / spec.name
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise InputError(f"cannot create the corpus folder ({exc.strerror or exc})", path=folder,
                         fix="choose a writable --data-dir or set $NGRAMLM_DATA_DIR") from None
    _remove_stale_parts(folder)
    say = log or (lambda line: None)
    for remote in spec.downloads:
        _download_one(spec.name, remote, folder, force=force, progress=progress, base_url=base_url,
                      timeout=timeout, log=say)
    return folder


def verify_corpus(name: str, data_dir: Optional[os.PathLike | str] = None) -> dict:
    """Check the local files of corpus ``name`` against the registry.

    Returns ``{"name", "folder", "complete", "files": [...], "stray": [...]}``; each
    file entry has ``filename``, ``path``, ``present``, ``size``, ``check``
    (``"sha256"``, or ``"presence"`` for members extracted from an archive, whose
    checksum is the archive's), ``expected_sha256``, ``sha256`` (None when not
    computed) and ``ok``.  ``complete`` is true when every file is present and
    every checkable one matches.
    """
    spec = get_spec(name)
    folder = resolve_data_dir(data_dir) / spec.name
    files = []
    for remote in spec.downloads:
        if remote.extract:
            for member, local in remote.extract.items():
                p = folder / local
                present = p.is_file()
                files.append({
                    "filename": local, "path": p, "present": present,
                    "size": p.stat().st_size if present else None, "check": "presence",
                    "expected_sha256": None, "sha256": None, "ok": present,
                    "source": f"{remote.filename}:{member}", "url": remote.url,
                })
        else:
            p = folder / remote.filename
            present = p.is_file()
            digest = sha256_file(p) if present else None
            files.append({
                "filename": remote.filename, "path": p, "present": present,
                "size": p.stat().st_size if present else None, "check": "sha256",
                "expected_sha256": remote.sha256, "sha256": digest, "ok": present and digest == remote.sha256,
                "source": remote.filename, "url": remote.url,
            })
    complete = (not spec.generated) and bool(files) and all(f["ok"] for f in files)
    if spec.generated:
        complete = True
    return {"name": spec.name, "folder": folder, "complete": complete, "files": files,
            "stray": _stray_parts(folder)}


def download_status(spec: CorpusSpec, data_dir: Optional[os.PathLike | str] = None) -> str:
    """One word for listings: built-in / yes / modified / partial / no."""
    if spec.generated:
        return "built-in"
    report = verify_corpus(spec.name, data_dir)
    if report["complete"]:
        return "yes"
    present = [f for f in report["files"] if f["present"]]
    if not present:
        return "no"
    if len(present) == len(report["files"]):
        return "modified"
    return "partial"
