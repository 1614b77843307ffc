"""Which implementation runs the query side's hot loops: the compiled extension, or numpy/Python.

``ngramlm._fast`` (Cython, built by ``pip install``) reads and writes ARPA sections from bytes
and runs the kenlm-style state API in C.  Where it is missing -- no C compiler when the package
was built, or ``NGRAMLM_NO_EXT=1`` in the environment (to compare or to rule it out) -- every
caller falls back to the numpy/Python path, which gives the same numbers, only slower.
``ngramlm info`` and :func:`describe` say which one runs and why.
"""
from __future__ import annotations

import os

fast = None
reason = ""
if os.environ.get("NGRAMLM_NO_EXT", "") not in ("", "0"):
    reason = "disabled by NGRAMLM_NO_EXT"
else:
    import importlib.util

    if importlib.util.find_spec(f"{__package__}._fast") is None:
        # No compiled file at all (no C compiler when the package was built).  Checked first: a bare
        # import would fail with Python's misleading "partially initialized module ... (most likely
        # due to a circular import)", as the package is still being imported.
        reason = ("not built (no C compiler when ngramlm was installed); for the faster paths install a "
                  "wheel, or reinstall with a compiler: pip install -e . (gcc, python3-dev)")
    else:
        try:
            from . import _fast as fast  # noqa: F811
        except ImportError as exc:  # built for another Python, or a broken build
            reason = f"present but not loadable ({exc}); rebuild it: pip install -e . (gcc, python3-dev)"


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
