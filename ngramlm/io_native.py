"""The native model format: one ``.npz`` (uncompressed zip of ``.npy`` arrays) plus JSON.

Loading never unpickles (``allow_pickle=False``), checks a format tag and version,
and validates array shapes, so a foreign or corrupt file gives a clear error.
Saving writes a temporary file and renames it, so an interrupted save leaves the
previous model intact.
"""
from __future__ import annotations

import io
import json
import os
import zipfile
from pathlib import Path

import numpy as np

from corpora.errors import InputError
from corpora.textio import atomic_writer
from corpora.vocab import Vocab

FORMAT = "ngramlm.ngram"
FORMAT_VERSION = 1
ZIP_MAGIC = b"PK\x03\x04"


def save_native(model, path: os.PathLike | str) -> None:
    model._check_fitted()
    meta = {
        "format": FORMAT,
        "version": FORMAT_VERSION,
        "order": model.order_,
        "kind": model.kind_,
        "smoother": model.smoother_name_,
        "smoother_params": model.smoother_params_,
        "n_types": model.n_types_,
        "n_ngrams": model.n_ngrams_,
        "count_of_counts": model.count_of_counts_,
        "is_distribution": model.is_distribution_,
        "missing_backoff": model.missing_backoff_,
        "info": model.info_,
        "init_params": {"order": model.order, "smoothing": model.smoothing, "k": model.k, "discount": model.discount,
                        "discount_fallback": model.discount_fallback, "alpha": model.alpha, "lambdas": model.lambdas,
                        "prune": None if model.prune is None else list(model.prune),
                        "prune_entropy": model.prune_entropy},
        "vocab": model.vocab_.to_dict(),
    }
    arrays = {"meta": np.frombuffer(json.dumps(meta, ensure_ascii=False).encode("utf-8"), dtype=np.uint8)}
    for k in range(1, model.order_ + 1):
        arrays[f"keys{k}"] = model.keys_[k - 1]
        if model.kind_ == "backoff":
            arrays[f"logp{k}"] = model.log10_prob_[k - 1]
            if k < model.order_:
                arrays[f"bo{k}"] = model.log10_backoff_[k - 1]
        else:
            arrays[f"count{k}"] = model.counts_[k - 1]
            arrays[f"ctx{k}"] = model.ctx_total_[k - 1]
    _atomic_savez(path, arrays)


def _atomic_savez(path: os.PathLike | str, arrays: dict) -> None:
    """np.savez straight into the atomic temp file (no in-memory copy of the model)."""
    with atomic_writer(path) as fh:
        np.savez(fh, **arrays)


def is_native(path: os.PathLike | str) -> bool:
    try:
        with open(path, "rb") as fh:
            if fh.read(4) != ZIP_MAGIC:
                return False
        with zipfile.ZipFile(path) as zf:
            return "meta.npy" in zf.namelist()
    except (OSError, zipfile.BadZipFile):
        return False


def load_native(path: os.PathLike | str):
    from .model import NgramLM

    p = Path(path)
    if not p.exists():
        raise InputError("no such model file", path=p, fix="check the path, or train one with `ngramlm train`")
    with open(p, "rb") as fh:
        head = fh.read(4)
    if head[:1] == b"\x80":
        raise InputError("this is a Python pickle, which is never loaded (it could run code)", path=p,
                         fix="load only models written by `ngramlm train`, or import an ARPA file")
    if head != ZIP_MAGIC:
        from .arpa import looks_like_arpa

        hint = "it looks like an ARPA file: use `ngramlm import-arpa` or pass it to `ngramlm ppl` directly" \
            if looks_like_arpa(p) else "pass a model written by `ngramlm train`"
        raise InputError("not an ngramlm model file", path=p, fix=hint)
    try:
        with np.load(p, allow_pickle=False) as z:
            names = set(z.files)
            if "meta" not in names:
                raise InputError("not an ngramlm model (no metadata); it may be a neural checkpoint or another "
                                 "program's file", path=p, fix="pass a model written by `ngramlm train`")
            meta = json.loads(bytes(z["meta"]).decode("utf-8"))
            if meta.get("format") != FORMAT:
                raise InputError(f"not an ngramlm n-gram model (format {meta.get('format')!r})", path=p,
                                 fix="pass a model written by `ngramlm train`")
            if meta.get("version") != FORMAT_VERSION:
                raise InputError(f"model format version {meta.get('version')} is not supported", path=p,
                                 fix="retrain the model with this version of the toolkit")
            order = int(meta["order"])
            arrays = {name: z[name] for name in names if name != "meta"}
    except InputError:
        raise
    except (ValueError, KeyError, OSError, zipfile.BadZipFile, json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise InputError(f"corrupt or truncated model file ({exc})", path=p,
                         fix="retrain or re-copy the model") from None
    ip = meta.get("init_params", {})
    m = NgramLM(**{k: ip.get(k) for k in ("order", "smoothing", "k", "discount", "discount_fallback", "alpha", "lambdas",
                                             "prune", "prune_entropy")})
    try:
        m.vocab_ = Vocab.from_dict(meta["vocab"], path=str(p))
        m.order_ = order
        m.kind_ = meta["kind"]
        m.smoother_name_ = meta["smoother"]
        m.smoother_params_ = meta["smoother_params"]
        m.n_types_ = int(meta["n_types"])
        m.n_ngrams_ = list(meta["n_ngrams"])
        m.count_of_counts_ = meta.get("count_of_counts", [])
        m.is_distribution_ = bool(meta["is_distribution"])
        m.missing_backoff_ = float(meta["missing_backoff"])
        m.info_ = meta.get("info", {})
        m.keys_ = [arrays[f"keys{k}"].astype(np.int64, copy=False) for k in range(1, order + 1)]
        if m.kind_ == "backoff":
            m.log10_prob_ = [arrays[f"logp{k}"] for k in range(1, order + 1)]
            m.log10_backoff_ = [arrays[f"bo{k}"] for k in range(1, order)] + [np.zeros(0)]
            sizes_ok = all(len(m.log10_prob_[k]) == len(m.keys_[k]) for k in range(order)) and all(
                len(m.log10_backoff_[k]) == len(m.keys_[k]) for k in range(order - 1))
        else:
            m.add_k_ = float(m.smoother_params_.get("k", 0.0))
            m.counts_ = [arrays[f"count{k}"] for k in range(1, order + 1)]
            m.ctx_total_ = [arrays[f"ctx{k}"] for k in range(1, order + 1)]
            sizes_ok = all(len(m.counts_[k]) == len(m.keys_[k]) for k in range(order))
        if not sizes_ok or len(m.keys_[0]) != len(m.vocab_):
            raise ValueError("array sizes do not match")
    except (KeyError, ValueError, TypeError) as exc:
        raise InputError(f"corrupt model file ({exc})", path=p, fix="retrain or re-copy the model") from None
    return m
