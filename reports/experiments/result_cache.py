"""Per-model results cached in ``DIR/cache/``, keyed by a hash of settings + corpus.

For a key ``K``:

* ``K.json``: the finished result row (written last, atomically: its presence means done);
* ``K.npz``: per-token log2 probabilities on valid and test (for interpolation and the per-token view);
* ``K.pt`` / ``K.best.pt``: a neural model's training checkpoint and its best weights.

A neural checkpoint without its ``K.json`` is an interrupted training run; it is
continued, not restarted.
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Optional

import numpy as np

from corpora.textio import atomic_write_bytes, atomic_write_text

from ..jsonio import dumps


class Cache:
    def __init__(self, root: Path) -> None:
        self.root = Path(root)
        self.root.mkdir(parents=True, exist_ok=True)

    def _path(self, key: str, suffix: str) -> Path:
        return self.root / f"{key}{suffix}"

    def get(self, key: str) -> Optional[dict]:
        p = self._path(key, ".json")
        if not p.exists():
            return None
        try:
            row = json.loads(p.read_text("utf-8"))
        except (OSError, ValueError):
            return None  # unreadable: recompute
        if row.get("has_arrays") and not self._path(key, ".npz").exists():
            return None
        return row

    def put(self, key: str, row: dict, arrays: Optional[dict] = None) -> None:
        if arrays:
            import io

            buf = io.BytesIO()
            np.savez(buf, **{k: np.asarray(v, dtype=np.float64) for k, v in arrays.items()})
            atomic_write_bytes(self._path(key, ".npz"), buf.getvalue())
        row = dict(row, has_arrays=bool(arrays))
        atomic_write_text(self._path(key, ".json"), dumps(row))

    def arrays(self, key: str) -> dict:
        p = self._path(key, ".npz")
        if not p.exists():
            return {}
        with np.load(p) as z:
            return {k: z[k] for k in z.files}

    def checkpoint(self, key: str) -> Path:
        return self._path(key, ".pt")
