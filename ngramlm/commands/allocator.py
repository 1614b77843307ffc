"""The allocator policy of the commands: glibc's malloc set to keep freed memory, where that was measured to pay.

By default glibc serves each block above an adaptive threshold with a fresh mmap and hands memory at
the heap's top back to the kernel, so every big numpy temporary is paged in anew: on the PTB
5-gram, ``build-binary trie`` took 87k page faults and 0.3-0.8 s of kernel time.  Freed memory kept
for reuse (a 32 MB mmap threshold, the most glibc allows; a 1 GB trim threshold; 256 MB of top pad)
cut its wall time from 1.10 to 0.86 s (medians of 6 alternated runs; build_binary 1.29 s) for about
17 % more peak RSS (docs/kenlm.md, "Writing").

That extra memory is why the setting is not program-wide: it lifted ``train --memory 1G`` on 15 M toy
tokens from 1.15 GB to 1.45 GB peak RSS, and a memory budget is a promise to the user.  So a command
asks for it (:func:`keep_freed_memory`) only where it was measured to pay and no budget is given:
``build-binary`` alone today.  It applies only in the ``ngramlm`` program (``cli.main`` as the entry
point calls :func:`allow`), never to a library caller or a test that runs a command in-process, and
never where the user set a ``MALLOC_*`` variable or ``NGRAMLM_MALLOC=default``, or runs another C
library.
"""
from __future__ import annotations

import os

# "allowed": this process is the ngramlm program; "applied": the setting is in force.
_state = {"allowed": False, "applied": False}


def allow() -> None:
    """Say that this process is the ``ngramlm`` program, whose commands may set the process's allocator
    (called by ``cli.main`` when it is the entry point, not for an in-process call)."""
    _state["allowed"] = True


def applied() -> bool:
    """Whether :func:`keep_freed_memory` set the allocator in this process."""
    return _state["applied"]


def keep_freed_memory() -> bool:
    """Set glibc's malloc to keep freed memory for reuse (see the module's text); True when it is in force.

    Call it only from a command where it was measured to pay, and never from one given a memory budget
    (``train --memory``): the memory it keeps is not counted in any budget.  Nothing is done outside
    the program, on another C library, or where the user chose: any ``MALLOC_*`` variable (glibc's
    own tunables) or ``NGRAMLM_MALLOC=default``."""
    if _state["applied"] or not _state["allowed"]:
        return _state["applied"]
    if os.environ.get("NGRAMLM_MALLOC") == "default" or any(k.startswith("MALLOC_") for k in os.environ):
        return False
    try:
        if not os.confstr("CS_GNU_LIBC_VERSION").startswith("glibc"):
            return False
        import ctypes

        mallopt = ctypes.CDLL(None).mallopt
    except (AttributeError, OSError, ValueError):  # not glibc, or no confstr (Windows)
        return False
    m_trim_threshold, m_top_pad, m_mmap_threshold = -1, -2, -3  # glibc's malloc.h
    mallopt(m_mmap_threshold, 32 << 20)
    mallopt(m_trim_threshold, 1 << 30)
    mallopt(m_top_pad, 256 << 20)
    _state["applied"] = True
    return True
