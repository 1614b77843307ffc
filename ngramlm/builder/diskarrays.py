"""1-d arrays in files, read and written in slices with plain ``pread``/``write`` calls.

The out-of-core build keeps its tables in the temp folder and touches them a chunk at a time.
Reads and writes go through the page cache, not through a mapping: the pages of a memory map
that a scan has touched count in the process's resident set until the kernel needs them back,
so a scan of a 1 GB memory-mapped column shows as 1 GB of RSS, whereas the same scan with reads
of 16 MB slices costs 16 MB.  Every ``OSError`` becomes the temp folder's one-line error.

Two windowed operations cover the random accesses of estimation with bounded memory:
:func:`gather` (``out[i] = table[index[i]]``) and :func:`count_occurrences`
(``np.bincount(index, minlength=size)``).  When the table (or the counts) fit the window they
are one pass; otherwise the table is taken a window at a time and the index is scanned once per
window (lmplz sorts instead; a window of half the budget makes this one to a few passes).
"""
from __future__ import annotations

import os
from pathlib import Path
from typing import Callable, Optional

import numpy as np


def _raise(folder, exc: OSError):
    if folder is not None:
        raise folder.error(exc) from None
    raise exc


class Column:
    """A 1-d array in a file: raw (``dtype`` given) or ``.npy`` (``dtype=None``), read in slices."""

    def __init__(self, path: os.PathLike | str, dtype=None, *, folder=None) -> None:
        self.path = Path(path)
        self.folder = folder
        try:
            fh = open(self.path, "rb")
            if dtype is None:
                version = np.lib.format.read_magic(fh)
                read_header = (np.lib.format.read_array_header_1_0 if version == (1, 0)
                               else np.lib.format.read_array_header_2_0)
                shape, _, dt = read_header(fh)  # (the order flag: a 1-d array is the same either way)
                if len(shape) != 1 or dt.hasobject:
                    raise ValueError(f"{self.path} is not a 1-d numeric array")
                self.dtype, self.offset, self.n = np.dtype(dt), fh.tell(), int(shape[0])
            else:
                self.dtype, self.offset = np.dtype(dtype), 0
                self.n = os.fstat(fh.fileno()).st_size // self.dtype.itemsize
        except OSError as exc:
            _raise(folder, exc)
        self.fd = fh.fileno()
        self._fh = fh

    def __len__(self) -> int:
        return self.n

    def read(self, a: int, b: int, out: Optional[np.ndarray] = None) -> np.ndarray:
        """Entries ``a:b`` (clipped to the array) as a new array."""
        a, b = max(0, int(a)), min(self.n, int(b))
        m = max(0, b - a)
        buf = np.empty(m, dtype=self.dtype) if out is None else out[:m]
        view = memoryview(buf).cast("B")
        done, pos = 0, self.offset + a * self.dtype.itemsize
        try:
            while done < len(view):
                got = os.preadv(self.fd, [view[done:]], pos + done)
                if got <= 0:
                    raise OSError(5, f"unexpected end of {self.path.name}")
                done += got
        except OSError as exc:
            _raise(self.folder, exc)
        return buf

    def read_all(self) -> np.ndarray:
        return self.read(0, self.n)

    def at(self, i: int):
        return self.read(i, i + 1)[0]

    def take_sorted(self, idx: np.ndarray) -> np.ndarray:
        """``self[idx]`` for ascending ``idx``: one read of the range they span."""
        if len(idx) == 0:
            return np.zeros(0, dtype=self.dtype)
        lo = int(idx[0])
        return self.read(lo, int(idx[-1]) + 1)[idx - lo]

    def searchsorted(self, value: int) -> int:
        """The first position whose entry is >= ``value`` (the column is sorted): a binary search by reads."""
        lo, hi = 0, self.n
        while hi - lo > 4096:
            mid = (lo + hi) // 2
            if self.at(mid) < value:
                lo = mid + 1
            else:
                hi = mid
        return lo + int(np.searchsorted(self.read(lo, hi), value))

    def chunks(self, size: int, a: int = 0, b: Optional[int] = None):
        """``(start, slice)`` over entries ``a:b`` in slices of ``size``."""
        b = self.n if b is None else b
        for s in range(a, b, max(1, size)):
            yield s, self.read(s, min(b, s + size))

    def close(self) -> None:
        try:
            self._fh.close()
        except OSError:
            pass

    def remove(self) -> None:
        self.close()
        try:
            self.path.unlink()
        except OSError:
            pass


class ColumnWriter:
    """Appends (or writes at positions) to a raw column file; :meth:`done` gives its :class:`Column`."""

    def __init__(self, folder, name: str, dtype, size: Optional[int] = None) -> None:
        self.folder = folder
        self.dtype = np.dtype(dtype)
        ext = self.dtype.str.lstrip("<>=|")
        self.path = folder.path / f"{name}.{ext}"
        i = 1
        while self.path.exists():  # never over a column still in use
            self.path = folder.path / f"{name}-{i}.{ext}"
            i += 1
        try:
            self._fh = open(self.path, "w+b")
            if size is not None:
                os.ftruncate(self._fh.fileno(), size * self.dtype.itemsize)
        except OSError as exc:
            raise folder.error(exc) from None
        self.n = 0

    def append(self, a: np.ndarray) -> None:
        a = np.ascontiguousarray(a, dtype=self.dtype)
        try:
            self._fh.write(memoryview(a).cast("B"))
        except OSError as exc:
            raise self.folder.error(exc) from None
        self.n += len(a)

    def write_at(self, a: np.ndarray, at: int) -> None:
        """Entries ``at:at+len(a)`` (a file made with ``size``)."""
        a = np.ascontiguousarray(a, dtype=self.dtype)
        view = memoryview(a).cast("B")
        done, pos = 0, at * self.dtype.itemsize
        try:
            while done < len(view):
                done += os.pwrite(self._fh.fileno(), view[done:], pos + done)
        except OSError as exc:
            raise self.folder.error(exc) from None

    def done(self) -> Column:
        try:
            self._fh.close()
        except OSError as exc:
            raise self.folder.error(exc) from None
        return Column(self.path, self.dtype, folder=self.folder)


def gather(table, index: Column, folder, name: str, *, window: int, chunk: int,
           transform: Optional[Callable[[np.ndarray], np.ndarray]] = None) -> Column:
    """The column ``table[index[i]]`` (``table``: a :class:`Column` or an array in memory).

    ``table`` is read ``window`` entries at a time (one pass over ``index`` per window), ``index``
    ``chunk`` entries at a time."""
    n = len(index)
    T = len(table)
    dtype = table.dtype
    if not isinstance(table, Column) or T <= window:
        tab = table if not isinstance(table, Column) else table.read_all()
        out = ColumnWriter(folder, name, dtype)
        for _, idx in index.chunks(chunk):
            out.append(tab[idx])
        return out.done()
    out = ColumnWriter(folder, name, dtype, size=n)
    col = None
    for w0 in range(0, T, window):
        tab = table.read(w0, w0 + window)
        w1 = w0 + len(tab)
        for a, idx in index.chunks(chunk):
            cur = np.empty(len(idx), dtype=dtype) if w0 == 0 else col.read(a, a + len(idx))
            sel = (idx >= w0) & (idx < w1)
            cur[sel] = tab[idx[sel] - w0]
            out.write_at(cur, a)
        if col is None:
            col = Column(out.path, dtype, folder=folder)
        del tab
    if col is not None:
        col.close()
    return out.done()


def count_occurrences(index: Column, size: int, folder, name: str, *, window: int, chunk: int) -> Column:
    """The int64 column ``np.bincount(index, minlength=size)``, ``window`` counts in memory at a time."""
    out = ColumnWriter(folder, name, np.int64)
    for w0 in range(0, max(size, 1), max(1, window)):
        w1 = min(size, w0 + window)
        acc = np.zeros(w1 - w0, dtype=np.int64)
        for _, idx in index.chunks(chunk):
            if w0 == 0 and w1 == size:
                acc += np.bincount(idx, minlength=size)[:size]
            else:
                sel = idx[(idx >= w0) & (idx < w1)]
                acc += np.bincount(sel - w0, minlength=w1 - w0)
        out.append(acc)
    return out.done()
