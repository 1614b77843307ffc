"""Where corpora live on disk.

The data directory is resolved, first match wins, from

1. an explicit argument (the CLI's ``--data-dir``),
2. the environment variable ``NGRAMLM_DATA_DIR``,
3. a per-user cache directory: ``$XDG_CACHE_HOME/ngramlm/corpora`` (``~/.cache/...``).

A corpus ``NAME`` lives in ``<data_dir>/NAME/``, with the file names of its registry
entry -- the same layout as ``../shared/corpora`` in this repository's CI.
"""
from __future__ import annotations

import os
from pathlib import Path
from typing import Optional

ENV_VAR = "NGRAMLM_DATA_DIR"


def default_cache_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "ngramlm" / "corpora"


def resolve_data_dir(data_dir: Optional[os.PathLike | str] = None) -> Path:
    if data_dir:
        return Path(data_dir).expanduser()
    env = os.environ.get(ENV_VAR)
    if env:
        return Path(env).expanduser()
    return default_cache_dir()


def describe_source(data_dir: Optional[os.PathLike | str] = None) -> str:
    """Say where the data directory came from (for error messages and `corpora list`)."""
    if data_dir:
        return f"{data_dir} (from --data-dir)"
    if os.environ.get(ENV_VAR):
        return f"{os.environ[ENV_VAR]} (from ${ENV_VAR})"
    return f"{default_cache_dir()} (default cache directory)"
