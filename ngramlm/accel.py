"""Which implementation runs the query side's hot loops: the compiled extension, or numpy/Python.

``ngramlm._fast`` (Cython, built by ``pip install``) is one compilation unit per structure: ARPA
reading and writing, the hash tables and the kenlm-style state API, KenLM binaries, token streams
(``UNITS``; ``ngramlm/_fast/__init__.py`` says which holds what).  This module loads them all and
checks once that they are one build: each unit carries the ABI version ``FAST_ABI``.  Then
:data:`fast` holds every unit's public names (``fast.Tables``, ``fast.TrieTables``, ``fast.Spooler``,
...), all of them, so a caller only asks whether ``fast`` is None.  Where the extension is missing or
refused -- no C compiler when the package was built, a unit that failed to compile or is left over
from an older build, or ``NGRAMLM_NO_EXT=1`` in the environment (to compare or to rule it out) --
every caller falls back to the numpy/Python path, which gives the same numbers, only slower.
``ngramlm info`` and :func:`describe` say which one runs and why.
"""
from __future__ import annotations

import os
from types import SimpleNamespace

# The units' interface version, which each one exports as ``ABI`` (ABI_VERSION in
# ngramlm/_fast/common.pxd): raised together with it whenever a unit's Python-visible names or
# arguments change, or a declaration the units share, so that a build of other sources is refused.
FAST_ABI = 3
UNITS = ("arpa", "state", "kenlm", "tokens")  # as setup.py builds them
_REBUILD = "rebuild it: pip install -e . (gcc, python3-dev)"


def _load():
    """(a namespace of every unit's public names, "") or (None, why the compiled extension is not used)."""
    if os.environ.get("NGRAMLM_NO_EXT", "") not in ("", "0"):
        return None, "disabled by NGRAMLM_NO_EXT"
    import importlib.util

    # Which units have a compiled file, checked before importing: a bare import of a missing one would
    # fail with Python's misleading "partially initialized module ... (most likely due to a circular
    # import)" where the package is still being imported.
    missing = [f"{__package__}._fast.{unit}" for unit in UNITS
               if importlib.util.find_spec(f"{__package__}._fast.{unit}") is None]
    if len(missing) == len(UNITS):  # none at all: no C compiler when the package was built
        return None, ("not built (no C compiler when ngramlm was installed); for the faster paths install a "
                      "wheel, or reinstall with a compiler: pip install -e . (gcc, python3-dev)")
    if missing:  # a unit that failed to compile: the others may depend on it
        return None, f"only partly built (no {', '.join(missing)}); {_REBUILD}"
    try:
        from ._fast import arpa, kenlm, state, tokens
    except (ImportError, ValueError) as exc:
        # Built for another Python, a broken build, or units whose shared classes differ in layout
        # (Cython's "size changed, may indicate binary incompatibility" is a ValueError).
        return None, f"present but not loadable ({exc}); {_REBUILD}"
    units = (arpa, state, kenlm, tokens)
    stale = [f"{m.__name__} has {getattr(m, 'ABI', None)}" for m in units if getattr(m, "ABI", None) != FAST_ABI]
    if stale:
        return None, f"present but stale (this code needs ABI {FAST_ABI}: {', '.join(stale)}); {_REBUILD}"
    return SimpleNamespace(**{name: getattr(m, name) for m in units for name in m.__all__}), ""


fast, reason = _load()


def describe() -> str:
    """One line: which implementation runs, and why not the compiled one where it does not."""
    if fast is not None:
        return "compiled extension ngramlm._fast"
    return f"numpy/Python fallback: the compiled extension is {reason}"


def worker_threads() -> int:
    """Threads for work that runs without the GIL (counting a block's parts, formatting ARPA slices):
    the cores this process may use (its affinity, not the machine's count), at most 4."""
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    return max(1, min(4, cores))
