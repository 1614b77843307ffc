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

    def sample(self, min_interval: float = 0.5) -> Optional[float]:
        now = self._read()
        if now is None or self._last is None:
            return None
        dt = now[0] - self._last[0]
        if dt < min_interval:  # too short to say anything
            return self.others
        self.others = max(0.0, ((now[1] - self._last[1]) - (now[2] - self._last[2])) / dt)
        self._last = now
        return self.others

    def shared(self, threshold: float = 0.5) -> bool:
        """True when other processes used more than ``threshold`` of a core in the last interval."""
        return self.others is not None and self.others > threshold


class ThreadRule:
    """The one rule for torch's threads on shared cores, for every loop that trains or evaluates.

    torch's intra-op threads busy-wait for each other, so a two-thread step stalls whenever another
    process holds a core: a small training step of a lab cost 0.387 s of CPU on a busy 2-core machine
    against 0.023 s with one thread.  The rule: the configured count while the cores are free, one
    thread while other processes use more than half a core, measured (:class:`ContentionMonitor`)
    when the rule starts and every ``look_every`` seconds after.  Call :meth:`tick` once a step from the
    thread that runs torch (the count is that thread's own setting).  Where the machine's load cannot
    be read (not Linux) the configured count stays."""

    def __init__(self, configured: Optional[int] = None, *, look_every: float = 5.0, log=None) -> None:
        import torch

        self._torch = torch
        self.configured = int(configured or torch.get_num_threads())
        self.look_every = float(look_every)
        self.log = log
        self.monitor = ContentionMonitor()
        self.threads = self.configured
        self._last = time.monotonic()
        self.changes = 0

    def start(self, probe_seconds: float = 0.5) -> "ThreadRule":
        """Measure who else uses the cores for ``probe_seconds`` (this process idle), then set the count."""
        if self.configured > 1:
            self.monitor = ContentionMonitor()
            time.sleep(probe_seconds)
            self._apply(self.monitor.sample(min_interval=0.1))
        self._last = time.monotonic()
        return self

    def tick(self) -> int:
        """Once a step: every ``look_every`` seconds re-measure and switch the count if the answer changed.
        Returns the thread count in force."""
        now = time.monotonic()
        if self.configured > 1 and now - self._last >= self.look_every:
            self._last = now
            self._apply(self.monitor.sample())
        return self.threads

    def _apply(self, others: Optional[float]) -> None:
        if others is None:
            return
        want = 1 if others > 0.5 else self.configured
        if want != self.threads:
            self._torch.set_num_threads(want)
            self.threads = want
            self.changes += 1
            if self.log is not None:
                self.log(f"note: other processes use {others:.1f} cores: {want} torch thread{'s' if want > 1 else ''}"
                         if want == 1 else f"note: the cores are free again: {want} torch threads")
        elif self._torch.get_num_threads() != want:
            self._torch.set_num_threads(want)


class thread_rule:
    """``with thread_rule(threads, log=...):`` -- :class:`ThreadRule` over a block: measured at the start,
    then re-measured as the block trains, through a global hook before every optimizer step (so every
    training loop follows it, the labs' own included, without code of its own).  The count in force
    before the block is restored after it."""

    def __init__(self, configured: Optional[int] = None, *, log=None, look_every: float = 5.0,
                 probe_seconds: float = 0.3) -> None:
        self.rule = ThreadRule(configured, look_every=look_every, log=log)
        self.probe_seconds = probe_seconds
        self._handle = None

    def __enter__(self) -> ThreadRule:
        import torch

        self._before = torch.get_num_threads()
        if torch.get_num_threads() != self.rule.configured:
            torch.set_num_threads(self.rule.configured)
        if os.environ.get("NGRAMLM_THREAD_RULE") == "off":  # benchmarks/bench_neural.py labs: the "without" runs
            return self.rule
        self.rule.start(self.probe_seconds)
        from torch.optim.optimizer import register_optimizer_step_pre_hook

        def before_step(*_) -> None:  # a step pre-hook must return None
            self.rule.tick()

        self._handle = register_optimizer_step_pre_hook(before_step)
        return self.rule

    def __exit__(self, *exc) -> None:
        import torch

        if self._handle is not None:
            self._handle.remove()
        torch.set_num_threads(self._before)
