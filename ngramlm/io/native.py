"""The native model format: one ``.npz`` (uncompressed zip of ``.npy`` arrays) plus JSON.

Loading never unpickles (``allow_pickle=False``), checks a format tag and version,
and validates array shapes, so a foreign or corrupt file gives a clear error.
Large files are memory-mapped instead of read (see :func:`load_native`), so a model
bigger than RAM loads in constant time and scoring touches only the pages it needs.
Saving writes a temporary file and renames it, so an interrupted save leaves the
previous model intact.
"""
from __future__ import annotations

import contextlib
import json
import math
import os
import struct
import zipfile
import zlib
from pathlib import Path
from typing import Optional

import numpy as np

from corpora.errors import InputError
from corpora.textio import atomic_writer
from corpora.vocab import Vocab

from ..counts import MAX_ORDER
from ..smoothing import ESTIMATOR_PARAMS

FORMAT = "ngramlm.ngram"
FORMAT_VERSION = 1
ZIP_MAGIC = b"PK\x03\x04"
# load_native(mmap=None) maps files at least this big and reads smaller ones (which keeps the
# full content validation for the models most tests and users handle).
MMAP_THRESHOLD_BYTES = 64 * 1024 * 1024
# A zip local file header: signature, versions, flags, method, time, date, crc, sizes, then the
# lengths of the name and extra field that follow it -- which need not match the central
# directory's (np.savez writes a zip64 extra field only in the local header).
_LOCAL_HEADER = struct.Struct("<4s2B4HL2L2H")
# The estimator's parameters a native file records (NgramLM's keyword arguments, in its signature's
# order: the order of the file's JSON), so that loading gives back a model that refits as it was fitted.
# The smoother's own come from the smoother registry.
INIT_PARAMS = ("order", "smoothing", *(p.name for p in ESTIMATOR_PARAMS), "prune", "prune_entropy", "compat",
               "interpolate", "gtmin", "gtmax")


def save_native(model, path: os.PathLike | str) -> None:
    model._check_fitted()
    meta = native_meta(model, order=model.order_, kind=model.kind_, smoother_name=model.smoother_name_,
                       smoother_params=model.smoother_params_, n_types=model.n_types_, n_ngrams=model.n_ngrams_,
                       count_of_counts=model.count_of_counts_, is_distribution=model.is_distribution_,
                       missing_backoff=model.missing_backoff_, info=model.info_, vocab=model.vocab_)
    arrays = {}
    for k in range(1, model.order_ + 1):
        arrays[f"keys{k}"] = model.keys_[k - 1]
        if model.kind_ == "backoff":
            arrays[f"logp{k}"] = model.log10_prob_[k - 1]
            if k < model.order_:
                arrays[f"bo{k}"] = model.log10_backoff_[k - 1]
        else:
            arrays[f"count{k}"] = model.counts_[k - 1]
            arrays[f"ctx{k}"] = model.ctx_total_[k - 1]
    save_native_streamed(path, meta, arrays)


def native_meta(model, *, order: int, kind: str, smoother_name: str, smoother_params: dict, n_types: int,
                n_ngrams: list, count_of_counts: list, is_distribution: bool, missing_backoff: float, info: dict,
                vocab: Vocab) -> dict:
    """The metadata of a native file: the fitted model's fields as given, the init parameters of ``model``
    (an :class:`NgramLM`, fitted or not: the out-of-core build writes a model it never holds)."""
    return {
        "format": FORMAT,
        "version": FORMAT_VERSION,
        "order": order,
        "kind": kind,
        "smoother": smoother_name,
        "smoother_params": smoother_params,
        "n_types": n_types,
        "n_ngrams": n_ngrams,
        "count_of_counts": count_of_counts,
        "is_distribution": is_distribution,
        "missing_backoff": missing_backoff,
        "info": info,
        "init_params": {name: _jsonable(getattr(model, name)) for name in INIT_PARAMS},
        "vocab": vocab.to_dict(),
    }


def _jsonable(value):
    return list(value) if isinstance(value, tuple) else value


def _meta_array(meta: dict) -> np.ndarray:
    return np.frombuffer(json.dumps(meta, ensure_ascii=False).encode("utf-8"), dtype=np.uint8)


def save_native_streamed(path: os.PathLike | str, meta: dict, members: dict) -> None:
    """A native file whose arrays are written a chunk at a time: ``members`` maps a name to an array, or
    to ``(dtype, length, iterable of chunks)``.  The same zip as :func:`save_native` (stored ``.npy``
    members, zip64, in the order given), so it loads -- and memory-maps -- the same; written atomically."""
    with atomic_writer(path) as fh, _zip_into(fh) as zf:
        for name, value in {"meta": _meta_array(meta), **members}.items():
            with zf.open(name + ".npy", "w", force_zip64=True) as out:
                if isinstance(value, np.ndarray):
                    np.lib.format.write_array(out, value, allow_pickle=False)
                    continue
                dtype, length, chunks = value
                header = {"descr": np.lib.format.dtype_to_descr(np.dtype(dtype)), "fortran_order": False,
                          "shape": (int(length),)}
                np.lib.format.write_array_header_1_0(out, header)  # what write_array picks for a vector
                written = 0
                for c in chunks:
                    c = np.ascontiguousarray(c, dtype=dtype)
                    out.write(memoryview(c).cast("B"))
                    written += len(c)
                if written != length:
                    raise ValueError(f"member {name}: {written} entries written, {length} declared")


def write_npz(fh, arrays: dict) -> None:
    """``np.savez(fh, **arrays)``'s bytes, and a failed write (a full disk) reported once (see :func:`_zip_into`)."""
    with _zip_into(fh) as zf:
        for name, value in arrays.items():
            with zf.open(name + ".npy", "w", force_zip64=True) as out:
                np.lib.format.write_array(out, np.asanyarray(value), allow_pickle=False)


@contextlib.contextmanager
def _zip_into(fh):
    """A zip written into ``fh`` (np.savez's layout: stored members, zip64).  When a write fails (a full
    disk), the atomic writer drops the file and the error is reported once: the zip is let go without
    finishing it, so that it does not try again when it is collected (``ZipFile.__del__``'s
    'seek of closed file' after the error)."""
    zf = zipfile.ZipFile(fh, mode="w", compression=zipfile.ZIP_STORED, allowZip64=True)
    try:
        yield zf
    except BaseException:
        zf.fp = None  # ZipFile.close() (and __del__) then have nothing to do
        raise
    zf.close()


def is_native(path: os.PathLike | str) -> bool:
    """True when ``path`` is a zip holding ``meta.npy`` (a sniff: never raises)."""
    try:
        with open(path, "rb") as fh:
            if fh.read(4) != ZIP_MAGIC:
                return False
        with zipfile.ZipFile(path) as zf:
            return "meta.npy" in zf.namelist()
    except Exception:  # any bytes at all: a corrupt zip is simply "not native"
        return False


# What reading arbitrary bytes through zipfile and numpy's .npy parser can raise
# (bad zip structure, CRC, compression, npy header, truncation, encryption, sizes).
_READ_ERRORS = (ValueError, KeyError, TypeError, IndexError, OSError, EOFError, zipfile.BadZipFile, zlib.error,
                NotImplementedError, struct.error, OverflowError, MemoryError, RuntimeError, UnicodeDecodeError)


class _NotMappable(Exception):
    """A member that np.memmap cannot serve as is (compressed, object or Fortran-ordered data, a
    dtype other than what save_native writes): an error under mmap=True, a plain read under None."""


def load_native_tables(path: os.PathLike | str, *, mmap: Optional[bool] = None) -> tuple:
    """Read a model written by :func:`save_native`: ``(NgramTables, init_params)``; any other file gives
    an :class:`InputError`.  (:func:`ngramlm.loading.load_native` makes the :class:`NgramLM`.)

    Never unpickles (``allow_pickle=False``).  With ``mmap=False`` everything is read
    and validated before the model is built -- metadata types, array names, dtypes,
    shapes, every trie key, NaN -- so a model that loads also scores; a corrupt file
    names itself and what is wrong.

    With ``mmap=True`` each array is a read-only ``np.memmap`` of its bytes inside the
    (uncompressed) zip, so loading takes constant time and memory whatever the model's
    size, and scoring pages in only what its binary searches touch.  The metadata,
    member names, dtypes (exactly int64 / float64, as saved, so nothing is copied),
    shapes and sizes are checked as above, but array *contents* only at their bounds
    (first and last key); the rest is trusted, as KenLM trusts its binary format -- use
    ``mmap=False`` for the full check of a file from elsewhere.  Compressed, object or
    Fortran-ordered members are refused.  ``mmap=None`` maps files of at least
    ``MMAP_THRESHOLD_BYTES`` (falling back to a read for a member that cannot be
    mapped) and reads smaller ones.  Replacing the file with :func:`save_native` (an
    atomic rename) is safe while it is mapped; truncating it in place is not.
    """
    p = Path(path)
    if not p.exists():
        raise InputError("no such model file", path=p, fix="check the path, or train one with `ngramlm train`")
    if p.is_dir():
        raise InputError("is a directory, not a model file", path=p, fix="pass a model written by `ngramlm train`")
    try:
        with open(p, "rb") as fh:
            head = fh.read(4)
    except OSError as exc:
        raise InputError(f"cannot read the model file ({exc.strerror or exc})", path=p,
                         fix="check the file's permissions") from None
    if head[:1] == b"\x80":
        raise InputError("this is a Python pickle, which is never loaded (it could run code)", path=p,
                         fix="load only models written by `ngramlm train`, or import an ARPA file")
    if head != ZIP_MAGIC:
        from .arpa import looks_like_arpa

        hint = "it looks like an ARPA file: use `ngramlm import-arpa` or pass it to `ngramlm ppl` directly" \
            if looks_like_arpa(p) else "pass a model written by `ngramlm train`"
        raise InputError("not an ngramlm model file", path=p, fix=hint)
    if mmap is None:
        try:
            big = p.stat().st_size >= MMAP_THRESHOLD_BYTES
        except OSError as exc:
            raise InputError(f"cannot read the model file ({exc.strerror or exc})", path=p,
                             fix="check the file's permissions") from None
        if not big:
            return _load(p, mapped=False)
        try:
            return _load(p, mapped=True)
        except _NotMappable:
            # Not a corrupt file, just not one that maps (say, re-zipped compressed): read it as before.
            return _load(p, mapped=False)
    try:
        return _load(p, mapped=bool(mmap))
    except _NotMappable as exc:
        raise InputError(f"cannot memory-map the model: {exc}", path=p,
                         fix="load it with mmap=False (reads it into memory), or re-save it with NgramLM.save, "
                             "which writes uncompressed int64/float64 arrays") from None


def _load(p: Path, *, mapped: bool):
    """``(tables, init_params)`` of ``p``, its arrays read (``mapped=False``) or memory-mapped; _NotMappable escapes."""
    try:
        if mapped:
            # One open file serves the zip directory, the .npy headers and every np.memmap (which
            # dups the descriptor), so all of them see the same file even if the path is replaced.
            with open(p, "rb") as fh, zipfile.ZipFile(fh) as zf:
                infos = {i.filename[:-4]: i for i in zf.infolist() if i.filename.endswith(".npy")}
                size = os.fstat(fh.fileno()).st_size

                def read(name: str) -> np.ndarray:
                    return map_member(fh, infos[name], size)

                meta, order, kind, arrays = _read_members(set(infos), read, p)
        else:
            with np.load(p, allow_pickle=False) as z:
                meta, order, kind, arrays = _read_members(set(z.files), lambda name: _npy(z, name), p)
    except (InputError, _NotMappable):
        raise
    except (*_READ_ERRORS, json.JSONDecodeError) as exc:
        raise InputError(f"corrupt or truncated model file ({type(exc).__name__}: {exc})", path=p,
                         fix="retrain or re-copy the model") from None
    try:
        return _build(meta, arrays, order, kind, p, mapped=mapped)
    except (InputError, _NotMappable):
        raise
    except (ValueError, KeyError, TypeError, IndexError, OverflowError) as exc:
        raise InputError(f"corrupt model file ({exc})", path=p, fix="retrain or re-copy the model") from None


def _read_members(names: set, read, p: Path) -> tuple:
    """(meta, order, kind, arrays) from the members ``names`` (without .npy), ``read(name)`` giving each."""
    if "meta" not in names:
        from corpora.modelkinds import kind_of

        kind = kind_of(p)  # a registered family (the program registers the neural one) says what it is
        if kind is not None:
            raise InputError(f"a {kind.name} checkpoint, not an n-gram model (ARPA, native .npz, KenLM binary)",
                             path=p, fix="for a neural model use `ngramlm ppl MODEL TEXT` or `ngramlm generate`; "
                                         "the n-gram tools need a model from `ngramlm train`")
        raise InputError("not an ngramlm model (no metadata); it may be a neural checkpoint or another "
                         "program's file", path=p, fix="pass a model written by `ngramlm train`")
    raw_meta = read("meta")
    if raw_meta.dtype != np.uint8 or raw_meta.ndim != 1:
        raise ValueError(f"the metadata is a {raw_meta.dtype} array of shape {raw_meta.shape}, not bytes")
    meta = json.loads(raw_meta.tobytes().decode("utf-8"))
    if not isinstance(meta, dict):
        raise ValueError(f"the metadata is a JSON {type(meta).__name__}, not an object")
    if meta.get("format") != FORMAT:
        raise InputError(f"not an ngramlm n-gram model (format {meta.get('format')!r})", path=p,
                         fix="pass a model written by `ngramlm train`")
    if meta.get("version") != FORMAT_VERSION:
        raise InputError(f"model format version {meta.get('version')!r} is not supported", path=p,
                         fix="retrain the model with this version of the toolkit")
    order = meta.get("order")
    if not isinstance(order, int) or isinstance(order, bool) or not 1 <= order <= MAX_ORDER:
        raise ValueError(f"order {order!r} is not an integer from 1 to {MAX_ORDER}")
    kind = meta.get("kind")
    if kind not in ("backoff", "additive"):
        raise ValueError(f"unknown model kind {kind!r}")
    arrays = {}
    for name in _array_names(kind, order):
        if name not in names:
            raise ValueError(f"array {name!r} is missing")
        arrays[name] = read(name)
    return meta, order, kind, arrays


def map_member(fh, info: zipfile.ZipInfo, file_size: int) -> np.ndarray:
    """Member ``info`` of the zip open as ``fh``, as a read-only np.memmap of its bytes in the file.

    Reads only the member's local header and .npy header (never the data), so the cost does not
    grow with the array.  ValueError for a malformed member, _NotMappable for one that would need
    decompressing, unpickling or reordering.
    """
    name = info.filename
    if info.compress_type != zipfile.ZIP_STORED:
        raise _NotMappable(f"member {name!r} is compressed (zip method {info.compress_type}); only stored "
                           "(uncompressed) members can be mapped")
    if info.flag_bits & 0x1:
        raise _NotMappable(f"member {name!r} is encrypted")
    # The central directory's header_offset points at the local header; its name and extra-field
    # lengths locate the data (the central directory's own extra field can be a different size).
    fh.seek(info.header_offset)
    head = fh.read(_LOCAL_HEADER.size)
    if len(head) != _LOCAL_HEADER.size:
        raise ValueError(f"member {name!r}: its local header is truncated")
    fields = _LOCAL_HEADER.unpack(head)
    if fields[0] != ZIP_MAGIC:
        raise ValueError(f"member {name!r}: no local header at offset {info.header_offset}")
    n_name, n_extra = fields[10], fields[11]
    local_name = fh.read(n_name).decode("utf-8" if info.flag_bits & 0x800 else "cp437")
    if local_name != info.orig_filename:
        raise ValueError(f"member {name!r}: its local header names {local_name!r}")
    data_start = info.header_offset + _LOCAL_HEADER.size + n_name + n_extra
    fh.seek(data_start)
    try:
        version = np.lib.format.read_magic(fh)
    except ValueError:
        raise ValueError(f"member {name!r} is not a numpy array (no .npy header)") from None
    if version == (1, 0):
        shape, fortran_order, dtype = np.lib.format.read_array_header_1_0(fh)
    elif version == (2, 0):
        shape, fortran_order, dtype = np.lib.format.read_array_header_2_0(fh)
    else:
        raise ValueError(f"member {name!r}: .npy format version {version} is not supported")
    header_len = fh.tell() - data_start
    if dtype.hasobject:
        # Object arrays are pickles: never loaded, mapped or not.
        raise _NotMappable(f"member {name!r} holds Python objects ({dtype}), which are never unpickled")
    if fortran_order and len(shape) > 1:
        raise _NotMappable(f"member {name!r} is a Fortran-ordered {len(shape)}-d array")
    n_bytes = dtype.itemsize * math.prod(shape)
    if header_len + n_bytes != info.file_size:
        raise ValueError(f"member {name!r} is {info.file_size} bytes but its header describes "
                         f"{header_len + n_bytes}")
    if data_start + info.file_size > file_size:
        raise ValueError(f"member {name!r} ends at byte {data_start + info.file_size}, past the end of the "
                         f"{file_size}-byte file (truncated)")
    if n_bytes == 0:
        # mmap cannot map zero bytes (and there is nothing to map).
        return np.empty(shape, dtype=dtype)
    return np.memmap(fh, dtype=dtype, mode="r", offset=data_start + header_len, shape=shape)


def _npy(z, name: str) -> np.ndarray:
    """Member ``name`` of an open npz; numpy hands back raw bytes for a member that is not .npy data."""
    a = z[name]
    if not isinstance(a, np.ndarray):
        raise ValueError(f"member {name!r} is not a numpy array")
    return a


def _array_names(kind: str, order: int) -> list:
    names = [f"keys{k}" for k in range(1, order + 1)]
    if kind == "backoff":
        return names + [f"logp{k}" for k in range(1, order + 1)] + [f"bo{k}" for k in range(1, order)]
    return names + [f"count{k}" for k in range(1, order + 1)] + [f"ctx{k}" for k in range(1, order + 1)]


def _vector(arrays: dict, name: str, size: Optional[int], *, integer: bool = False,
            mapped: bool = False) -> np.ndarray:
    """Array ``name`` as a 1-d int64 / float64 vector of ``size`` entries (None: any), or ValueError.

    ``mapped``: the array is a memmap, returned as is -- its dtype must already be int64 / float64
    (a conversion would read and copy it all), and its values are not scanned (trusted).
    """
    a = arrays[name]
    if a.ndim != 1:
        raise ValueError(f"array {name!r} has shape {a.shape}, expected a vector")
    if integer and a.dtype.kind not in "iu":
        raise ValueError(f"array {name!r} holds {a.dtype}, expected integers")
    if not integer and a.dtype.kind not in "fiu":
        raise ValueError(f"array {name!r} holds {a.dtype}, expected numbers")
    if size is not None and len(a) != size:
        raise ValueError(f"array {name!r} has {len(a)} entries, expected {size}")
    if mapped:
        want = np.dtype(np.int64 if integer else np.float64)
        if a.dtype != want:
            raise _NotMappable(f"array {name!r} holds {a.dtype}, not the {want} that NgramLM.save writes "
                               "(mapping it would mean converting a copy)")
        return a
    if integer:
        if a.dtype.kind == "u" and len(a) and a.max() > np.iinfo(np.int64).max:
            raise ValueError(f"array {name!r} holds values beyond int64")
        return a.astype(np.int64, copy=False)
    out = a.astype(np.float64, copy=False)
    if np.isnan(out).any() or np.isposinf(out).any():
        raise ValueError(f"array {name!r} holds NaN or +inf")
    return out


def _ids_at_ends(keys1: np.ndarray, V: int) -> bool:
    """The O(1) stand-in for keys1 == arange(V) (its length V is already checked)."""
    return V == 0 or (int(keys1[0]) == 0 and int(keys1[-1]) == V - 1)


def _get(meta: dict, key: str, types: tuple, what: str, default=...):
    """``meta[key]`` if it has one of ``types`` (JSON true/false is not a number here), else ValueError."""
    if key not in meta:
        if default is ...:
            raise ValueError(f"metadata field {key!r} is missing")
        return default
    v = meta[key]
    if not isinstance(v, types) or (isinstance(v, bool) and bool not in types):
        raise ValueError(f"metadata field {key!r} is {v!r}, expected {what}")
    return v


def _build(meta: dict, arrays: dict, order: int, kind: str, p: Path, *, mapped: bool = False):
    """``(tables, init_params)`` from validated metadata and arrays.  ``mapped``: the arrays are memmaps whose
    contents are trusted, so only O(1) bound checks touch them (see load_native)."""
    from ..tables import NgramTables

    ip = _get(meta, "init_params", (dict,), "an object", {})
    vocab = Vocab.from_dict(meta.get("vocab"), path=str(p))
    V = len(vocab)
    smoother_params = _get(meta, "smoother_params", (dict,), "an object")
    n_types = _get(meta, "n_types", (int,), "an integer")
    if n_types != V - 2:
        raise ValueError(f"n_types is {n_types} but the vocabulary predicts {V - 2} types")
    n_ngrams = _get(meta, "n_ngrams", (list,), "a list")
    if len(n_ngrams) != order or not all(isinstance(x, int) and not isinstance(x, bool) and x >= 0 for x in n_ngrams):
        raise ValueError(f"n_ngrams {n_ngrams!r} is not {order} counts")
    mb = _get(meta, "missing_backoff", (int, float), "a number")
    if not (math.isfinite(mb) and mb <= 0):
        raise ValueError(f"missing_backoff {mb!r} is not a log10 weight <= 0")
    # The trie: unigram keys are the ids; order k's keys are parent * V + word, sorted,
    # unique, with parent an entry of order k-1 -- what every lookup relies on.
    # Mapped arrays get the same checks at their ends only: a full scan would read the whole file.
    keys = [_vector(arrays, "keys1", V, integer=True, mapped=mapped)]
    if not (_ids_at_ends(keys[0], V) if mapped else np.array_equal(keys[0], np.arange(V))):
        raise ValueError("array 'keys1' is not the vocabulary's ids 0..V-1")
    for k in range(2, order + 1):
        kk = _vector(arrays, f"keys{k}", None, integer=True, mapped=mapped)
        if len(kk) and (kk[0] < 0 or kk[-1] >= len(keys[-1]) * V or kk[-1] < kk[0]
                        or (not mapped and not np.all(kk[1:] > kk[:-1]))):
            raise ValueError(f"array 'keys{k}' is not a sorted list of {k}-gram keys of this vocabulary")
        keys.append(kk)
    sizes = [len(x) for x in keys]
    tables = dict(vocab=vocab, kind=kind, keys=keys, n_ngrams=list(n_ngrams),
                  smoother_name=_get(meta, "smoother", (str,), "a name"), smoother_params=smoother_params,
                  info=_get(meta, "info", (dict,), "an object", {}),
                  is_distribution=_get(meta, "is_distribution", (bool,), "true or false"),
                  count_of_counts=_get(meta, "count_of_counts", (list,), "a list", []), missing_backoff=float(mb))
    if kind == "backoff":
        tables["log10_prob"] = [_vector(arrays, f"logp{k}", sizes[k - 1], mapped=mapped)
                                for k in range(1, order + 1)]
        tables["log10_backoff"] = [_vector(arrays, f"bo{k}", sizes[k - 1], mapped=mapped)
                                   for k in range(1, order)] + [np.zeros(0)]
    else:
        add_k = smoother_params.get("k", 0.0)
        if not isinstance(add_k, (int, float)) or isinstance(add_k, bool) or not (math.isfinite(add_k) and add_k >= 0):
            raise ValueError(f"add-k pseudo-count {add_k!r} is not a number >= 0")
        tables["add_k"] = float(add_k)
        tables["counts"] = [_vector(arrays, f"count{k}", sizes[k - 1], mapped=mapped) for k in range(1, order + 1)]
        # ctx1 is the total count; ctx_k is indexed by the entries of order k-1.
        tables["ctx_total"] = [_vector(arrays, f"ctx{k}", 1 if k == 1 else sizes[k - 2], mapped=mapped)
                               for k in range(1, order + 1)]
        if not mapped and any((c < 0).any() for c in tables["counts"] + tables["ctx_total"]):
            raise ValueError("negative counts")
    return NgramTables(**tables), {k: ip.get(k) for k in INIT_PARAMS}
