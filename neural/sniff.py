"""Is this file a neural checkpoint?  A cheap test that does not import torch.

``torch.save`` writes a zip archive whose ``<name>/data.pkl`` member holds the
pickled structure (the tensors are separate members).  Our checkpoints carry the
format tag :data:`FORMAT` as a string in that structure, so it appears verbatim in
``data.pkl``.  Nothing is unpickled here.
"""
from __future__ import annotations

import os
import zipfile

FORMAT = "ngramlm.neural"
FORMAT_VERSION = 1
ZIP_MAGIC = b"PK\x03\x04"


def is_checkpoint(path: os.PathLike | str) -> bool:
    """True if ``path`` looks like a checkpoint written by :mod:`neural` (zip + format tag)."""
    try:
        with open(path, "rb") as fh:
            if fh.read(4) != ZIP_MAGIC:
                return False
        with zipfile.ZipFile(path) as zf:
            names = [n for n in zf.namelist() if n.endswith("/data.pkl") or n == "data.pkl"]
            if len(names) != 1:
                return False
            with zf.open(names[0]) as member:
                head = member.read(1 << 16)  # the tag is written first, near the start
            return FORMAT.encode() in head
    except (OSError, zipfile.BadZipFile, ValueError):
        return False
