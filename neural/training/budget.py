"""The time budget of a training run as one object: when to stop, which threads evaluate, when to checkpoint.

:class:`BudgetPolicy` holds the timings and makes the decisions; the trainer measures (it runs the
batches and the evaluation passes) and asks.  ``time_budget`` is wall-clock time for everything the
model costs: it starts at ``clock_start`` (the caller's start, so data loading counts) and covers
training, the validation passes and the caller's final scoring of ``reserve_tokens`` tokens.

The decisions, each a method:

- :meth:`~BudgetPolicy.over_budget`: stop before the next batch when that batch plus the final
  validation plus the reserved scoring would overrun the budget (every fit trains one batch at least);
- :meth:`~BudgetPolicy.final_cost`: the seconds still needed after the last batch, from the
  evaluation rates the trainer's probe timed, calibrated by the last real validation pass and scaled
  by how much slower the batches have become since (the machine got busier);
- :meth:`~BudgetPolicy.choose_eval_threads`: one thread for evaluation while other processes use the
  cores (:mod:`neural.training.contention`), else the probed count; the rates follow the choice;
- :meth:`~BudgetPolicy.checkpoint_due` and :meth:`~BudgetPolicy.average_due`: the mid-epoch
  checkpoint every ``checkpoint_minutes``, the start of weight averaging at ``average_after`` of the budget.

All times are ``time.perf_counter()`` values passed in by the caller, so the decisions can be checked on
hand-made timings.
"""
from __future__ import annotations

import math
import time
from typing import Callable, Optional

import numpy as np

from .contention import ContentionMonitor

LOOK_EVERY_S = 5.0  # how often to sample who else uses the cores
RETIME_EVERY_S = 15.0  # how often to re-time one-thread evaluation on shared cores (~1 % of the time)
MARGIN = 1.05  # the final cost is measured on a shared CPU, and overshooting is the worse error


class BudgetPolicy:
    """The budget's timings and decisions for a :class:`~neural.training.trainer.Trainer`.

    ``reserve_tokens``: tokens the caller scores (full history) after training; ``clock_start``: the
    ``perf_counter()`` value the budget is measured from (None: the start of each fit); ``log``: where the
    thread-choice notes go.  The rates, the thread choice and the calibration by a validation pass last
    across fits (a trainer fit twice keeps them); :meth:`start` resets the rest for each fit."""

    def __init__(self, *, reserve_tokens: int = 0, clock_start: Optional[float] = None,
                 log: Callable[[str], None] = print) -> None:
        self.reserve_tokens = int(reserve_tokens)
        self.clock_start = clock_start
        self.log = log
        # Evaluation speeds (tokens/s) of the validation pass and of the caller's scoring.
        self.val_rate = self.score_rate = math.inf
        self.rates: dict = {}  # thread count -> (val_rate, score_rate), timed by the probe
        self.probe_threads: Optional[int] = None
        self.probe_n = 0  # validation tokens the probe timed
        self.fresh_t: Optional[float] = None  # when the rates were last re-timed on shared cores
        self.eval_threads: Optional[int] = None  # threads for evaluation (None: as set)
        # The last real validation pass, against the probe's estimate of it.
        self.eval_seconds = 0.0
        self.calibration = self.calib_slowdown = 1.0
        # Per fit (start() and watch()).
        self.budget_s: Optional[float] = None
        self.clock0 = 0.0
        self.step_at_start = 0
        self.n_valid_tokens = 0
        self.checkpoint_s = math.inf
        self.monitor: Optional[ContentionMonitor] = None
        self.first_batches: list = []
        self.base_batch_s: Optional[float] = None
        self.recent_batch_s: Optional[float] = None
        self.batch_s = 0.0  # the slowest recent batch, for "does one more batch fit?"
        self.last_look = self.last_save = 0.0

    # ------------------------------------------------------------------ a fit's start
    def start(self, *, time_budget: Optional[float], checkpoint_minutes: float, t_start: float, step: int,
              n_valid_tokens: int) -> None:
        """A fit starts at ``t_start`` at ``step``; ``time_budget`` in minutes (None: no limit).  The
        evaluation rates are unknown (infinite) until :meth:`probed`."""
        self.budget_s = None if time_budget is None else time_budget * 60.0
        self.clock0 = t_start if self.clock_start is None else self.clock_start
        self.checkpoint_s = checkpoint_minutes * 60
        self.last_save = t_start
        self.step_at_start = step
        self.n_valid_tokens = int(n_valid_tokens)
        self.val_rate = self.score_rate = math.inf

    def probed(self, val_rate: float, score_rate: float, *, by_threads: Optional[dict] = None,
               threads: Optional[int] = None, n: int = 0) -> None:
        """The probe's rates (tokens/s of the validation pass and of the caller's scoring; infinite: nothing
        to time).  ``by_threads``: ``{thread count: (val_rate, score_rate)}`` where more than one count was
        timed on ``n`` validation tokens, ``threads`` the configured count (what the rates given are for)."""
        self.val_rate, self.score_rate = val_rate, score_rate
        self.rates = dict(by_threads or {})
        if by_threads:
            self.probe_threads, self.probe_n = threads, n
            self.fresh_t = None

    def watch(self, now: float, monitor: Optional[ContentionMonitor] = None) -> None:
        """The batches start at ``now``: a fresh contention monitor and batch timings."""
        self.monitor = ContentionMonitor() if monitor is None else monitor
        self.first_batches, self.base_batch_s, self.recent_batch_s = [], None, None
        self.last_look = now
        self.batch_s = 0.0

    def overshoot_note(self) -> Optional[str]:
        """A note when the budget is less than what loading and the evaluation alone need (else None)."""
        if self.budget_s is None or time.perf_counter() - self.clock0 + self.final_cost() <= self.budget_s:
            return None
        need = time.perf_counter() - self.clock0 + self.final_cost()
        return (f"note: the time budget ({self.budget_s:.0f} s) is less than loading plus the evaluation alone "
                f"needs (about {need:.0f} s): one batch is trained and the run will overshoot")

    # ------------------------------------------------------------------ per batch
    def over_budget(self, now: float, step: int) -> bool:
        """Would the next batch, the final validation and the reserved scoring overrun the budget?
        Never before this fit's first batch, so there is a model to validate and score."""
        return (self.budget_s is not None and step > self.step_at_start
                and now - self.clock0 + self.batch_s + self.final_cost() > self.budget_s)

    def average_due(self, fraction: Optional[float]) -> bool:
        """Has ``fraction`` of the budget passed (weight averaging starts then)?  False without either."""
        return (self.budget_s is not None and fraction is not None
                and time.perf_counter() - self.clock0 > fraction * self.budget_s)

    def batch_done(self, seconds: float) -> None:
        """A batch took ``seconds``.  The batch time the budget reserves is the max of this one and a decayed
        memory of slower ones (a page fault, a busy core should not be forgotten at once); the median of
        batches 2-6 of this fit is the baseline of the slowdown (the first pays warm-up); the recent time a
        decayed mean."""
        self.batch_s = max(seconds, 0.9 * self.batch_s)
        if len(self.first_batches) < 6:
            self.first_batches.append(seconds)
            if len(self.first_batches) >= 3:
                self.base_batch_s = float(np.median(self.first_batches[1:]))
        prev = self.recent_batch_s
        self.recent_batch_s = seconds if prev is None else 0.7 * prev + 0.3 * seconds

    def batch_slowdown(self) -> float:
        """How much slower the recent batches run than those right after the probe (>= 1): the
        evaluation still to come is slowed by the same sharing of the cores."""
        base, recent = self.base_batch_s, self.recent_batch_s
        return max(1.0, recent / base) if base and recent else 1.0

    def look_at_cores(self, now: float) -> bool:
        """Every :data:`LOOK_EVERY_S` seconds, sample who else uses the cores; True when it did (then the
        caller asks :meth:`choose_eval_threads`)."""
        if now - self.last_look <= LOOK_EVERY_S:
            return False
        self.monitor.sample()
        self.last_look = now
        return True

    def choose_eval_threads(self, retime: Callable[[int, int], tuple]) -> None:
        """One thread for evaluation while other processes share the cores (measured), else the probed
        count; the rates the budget uses follow the choice.  ``retime(n, threads)`` times evaluation on
        ``n`` validation tokens and returns ``(validation tokens/s, scoring tokens/s)``."""
        if len(self.rates) < 2:
            return
        shared = self.monitor.shared()
        want = 1 if shared else self.probe_threads
        if want != (self.eval_threads or self.probe_threads):
            self.log(f"note: other jobs use {self.monitor.others:.1f} cores: evaluating with {want} thread"
                     f"{'s' if want > 1 else ''}" if shared else
                     f"note: the cores are free again: evaluating with {want} threads")
        self.eval_threads = want
        if shared:
            # One thread keeps its speed on shared cores far better than two, but not entirely (it
            # gets its share of them): re-time it on a short prefix now and then.
            now = time.perf_counter()
            if self.fresh_t is None or now - self.fresh_t > RETIME_EVERY_S:
                self.val_rate, self.score_rate = retime(max(2, min(self.probe_n, 800)), 1)
                self.fresh_t = time.perf_counter()
        else:
            self.val_rate, self.score_rate = self.rates[want]
            self.fresh_t = None

    def checkpoint_due(self, now: float) -> bool:
        """Is a mid-epoch checkpoint due (``checkpoint_minutes`` since the last one)?"""
        return now - self.last_save > self.checkpoint_s

    def saved(self, now: float) -> None:
        """A checkpoint was written at ``now``."""
        self.last_save = now

    # ------------------------------------------------------------------ the evaluation's cost
    def validated(self, seconds: float, *, calibrate: bool = True) -> None:
        """A real validation pass took ``seconds``.  With ``calibrate``, its ratio to the probe's estimate
        (at the machine's load now) scales later estimates, and the batch slowdown now is their baseline."""
        self.eval_seconds = seconds
        if not calibrate:
            return
        estimate = self.n_valid_tokens / self.val_rate if math.isfinite(self.val_rate) else 0.0
        self.calib_slowdown = self.batch_slowdown()
        self.calibration = seconds / (estimate * self.calib_slowdown) if estimate > 0 else 1.0

    def final_cost(self) -> float:
        """Seconds the run still needs after the last batch: one validation pass and the caller's scoring.

        Once a real validation pass has run, its time replaces the probe's estimate (a prefix is not the
        whole text), and the scoring estimate is scaled by the same ratio; the batch slowdown since then
        says how much busier the machine has become.  :data:`MARGIN` is added."""
        factor = self.calibration if self.eval_seconds else 1.0
        busy = self.batch_slowdown() / (self.calib_slowdown if self.eval_seconds else 1.0)
        if self.fresh_t is not None:
            busy = 1.0  # the rates were just timed on the shared cores
        val = factor * self.n_valid_tokens / self.val_rate
        return MARGIN * max(1.0, busy) * (val + factor * self.reserve_tokens / self.score_rate)
