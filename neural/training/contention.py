"""Is another job using the cores?  Measured, so evaluation can choose its thread count.

torch's intra-op threads busy-wait for each other.  When another process takes a core, a
two-thread evaluation stalls at every synchronisation: scoring the toy test text took 41 s instead
of 6 s with two CPU-bound jobs beside it, while one thread took 7 s (measured on this 2-core
machine); training slowed far less (3.5x).  So the trainer evaluates with one thread while the
cores are shared, and budgets for that.

On Linux the monitor reads the machine's busy CPU time (``/proc/stat``) and this process's own
(``os.times``) at two moments: the difference is what other processes used, in cores.  Elsewhere it
reports nothing and the caller keeps its threads.
"""
from __future__ import annotations

import os
import time
from typing import Optional

_HZ = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") and "SC_CLK_TCK" in getattr(os, "sysconf_names", {}) else 100


def _machine_busy_seconds() -> Optional[float]:
    try:
        with open("/proc/stat", "rb") as fh:
            fields = fh.readline().split()
    except OSError:
        return None
    if not fields or fields[0] != b"cpu":
        return None
    vals = [int(x) for x in fields[1:9]]  # user nice system idle iowait irq softirq steal
    busy = sum(vals) - vals[3] - vals[4]
    return busy / _HZ


def _own_seconds() -> float:
    t = os.times()
    return t.user + t.system


class ContentionMonitor:
    """Cores used by *other* processes since the last ``sample()`` (None where it cannot be measured)."""

    def __init__(self) -> None:
        self._last = self._read()
        self.others: Optional[float] = None  # cores, over the last interval

    @staticmethod
    def _read():
        m = _machine_busy_seconds()
        return None if m is None else (time.monotonic(), m, _own_seconds())

    def sample(self) -> Optional[float]:
        now = self._read()
        if now is None or self._last is None:
            return None
        dt = now[0] - self._last[0]
        if dt < 0.5:  # too short to say anything
            return self.others
        self.others = max(0.0, ((now[1] - self._last[1]) - (now[2] - self._last[2])) / dt)
        self._last = now
        return self.others

    def shared(self, threshold: float = 0.5) -> bool:
        """True when other processes used more than ``threshold`` of a core in the last interval."""
        return self.others is not None and self.others > threshold
