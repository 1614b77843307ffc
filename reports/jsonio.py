"""JSON for results: no NaN/Infinity (not JSON), numpy scalars and arrays as plain numbers."""
from __future__ import annotations

import json
import math

import numpy as np


def finite_only(obj):
    """A copy with every non-finite float replaced by None.

    JSON has no infinity.  Wherever a perplexity is expected, None next to a nonzero
    ``zero_probs`` reads as "infinite".
    """
    if isinstance(obj, dict):
        return {k: finite_only(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [finite_only(v) for v in obj]
    if isinstance(obj, (float, np.floating)):
        return float(obj) if math.isfinite(obj) else None
    if isinstance(obj, np.ndarray):
        return finite_only(obj.tolist())
    return obj


def _default(o):
    if isinstance(o, np.integer):
        return int(o)
    if isinstance(o, np.bool_):
        return bool(o)
    raise TypeError(f"not JSON-serialisable: {type(o).__name__}")


def dumps(obj, indent: int = 1) -> str:
    return json.dumps(finite_only(obj), indent=indent, allow_nan=False, default=_default)
