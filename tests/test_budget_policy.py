"""The trainer's time-budget policy, decided on hand-made timings (no model, no clock of its own)."""
from __future__ import annotations

import math

import pytest

from neural.training import budget as budget_mod
from neural.training.budget import BudgetPolicy


class FakeMonitor:
    """Stands in for the contention monitor: ``others`` cores used by other processes."""

    def __init__(self, others=None) -> None:
        self.others = others
        self.samples = 0

    def sample(self):
        self.samples += 1
        return self.others

    def shared(self, threshold: float = 0.5) -> bool:
        return self.others is not None and self.others > threshold


def policy(*, minutes=1.0, reserve=1000, n_valid=2000, clock_start=100.0, t_start=105.0, step=7, log=None,
           monitor=None, checkpoint_minutes=10.0):
    """A 60 s budget that started at 100 s, a fit from 105 s at step 7, validation 2000 tokens at 200/s (10 s),
    scoring 1000 tokens at 100/s (10 s)."""
    p = BudgetPolicy(reserve_tokens=reserve, clock_start=clock_start, log=log or (lambda m: None))
    p.start(time_budget=minutes, checkpoint_minutes=checkpoint_minutes, t_start=t_start, step=step,
            n_valid_tokens=n_valid)
    p.probed(200.0, 100.0)
    p.watch(106.0, monitor=monitor or FakeMonitor())
    return p


def test_the_final_cost_is_validation_plus_scoring_plus_five_percent():
    assert policy().final_cost() == pytest.approx(1.05 * (10 + 10))
    assert policy(reserve=0).final_cost() == pytest.approx(1.05 * 10)
    unprobed = BudgetPolicy(reserve_tokens=1000)
    unprobed.start(time_budget=1.0, checkpoint_minutes=10, t_start=0.0, step=0, n_valid_tokens=2000)
    assert unprobed.final_cost() == 0.0  # no rates timed yet: nothing to reserve


def test_it_stops_when_the_next_batch_and_the_final_cost_would_overrun():
    p = policy()
    p.batch_done(2.0)
    # 36 s used + a 2 s batch + 21 s final cost = 59 s <= 60 s: one more batch.
    assert not p.over_budget(136.0, step=8)
    assert p.over_budget(137.5, step=8)  # 60.5 s
    assert not p.over_budget(1000.0, step=7)  # this fit has trained no batch yet: always one


def test_no_budget_never_stops_and_never_starts_the_average(monkeypatch):
    p = policy(minutes=None)
    p.batch_done(5.0)
    assert not p.over_budget(10**9, step=100)
    monkeypatch.setattr(budget_mod.time, "perf_counter", lambda: 10.0**9)
    assert not p.average_due(0.5)
    assert p.overshoot_note() is None


def test_a_slow_batch_is_remembered_and_decays():
    p = policy()
    p.batch_done(10.0)
    p.batch_done(1.0)
    assert p.batch_s == pytest.approx(9.0)  # max(1, 0.9 * 10)
    p.batch_done(1.0)
    assert p.batch_s == pytest.approx(8.1)


def test_slower_batches_scale_the_evaluation_still_to_come():
    p = policy()
    for s in (5.0, 1.0, 1.0):  # the first pays warm-up: the baseline is the median of batches 2..
        p.batch_done(s)
    assert p.base_batch_s == 1.0 and p.batch_slowdown() == pytest.approx(2.96)  # recent: 5 -> 3.8 -> 2.96
    p = policy()
    for s in (1.0, 1.0, 1.0, 4.0):
        p.batch_done(s)
    assert p.batch_slowdown() == pytest.approx(1.9)  # recent 0.7 * 1 + 0.3 * 4 over the baseline 1
    assert p.final_cost() == pytest.approx(1.05 * 1.9 * 20)


def test_a_real_validation_calibrates_the_probe():
    p = policy()
    p.validated(15.0)  # the probe said 10 s: everything evaluated costs 1.5x
    assert p.calibration == pytest.approx(1.5)
    assert p.final_cost() == pytest.approx(1.05 * (15 + 15))
    q = policy()
    q.validated(15.0, calibrate=False)  # a translator's pass: timed, not compared with the probe
    assert q.final_cost() == pytest.approx(1.05 * 20)


def test_the_thread_choice_follows_the_cores(monkeypatch):
    seen, retimed = [], []
    clock = [200.0]
    monkeypatch.setattr(budget_mod.time, "perf_counter", lambda: clock[0])
    mon = FakeMonitor(others=1.7)
    p = policy(log=seen.append, monitor=mon)
    p.probed(400.0, 200.0, by_threads={2: (400.0, 200.0), 1: (300.0, 150.0)}, threads=2, n=3000)

    def retime(n, threads):
        retimed.append((n, threads))
        return 100.0, 50.0

    assert not p.look_at_cores(111.0) and mon.samples == 0  # 5 s since the watch began: not yet
    assert p.look_at_cores(111.5) and mon.samples == 1
    p.choose_eval_threads(retime)
    assert p.eval_threads == 1 and seen == ["note: other jobs use 1.7 cores: evaluating with 1 thread"]
    assert retimed == [(800, 1)] and (p.val_rate, p.score_rate) == (100.0, 50.0)
    assert p.final_cost() == pytest.approx(1.05 * (2000 / 100 + 1000 / 50))  # just re-timed: no slowdown factor
    clock[0] = 210.0
    p.choose_eval_threads(retime)
    assert len(retimed) == 1 and len(seen) == 1  # re-timed at most every 15 s, said once
    clock[0] = 216.0
    p.choose_eval_threads(retime)
    assert len(retimed) == 2
    mon.others = 0.1
    p.choose_eval_threads(retime)
    assert p.eval_threads == 2 and seen[-1] == "note: the cores are free again: evaluating with 2 threads"
    assert (p.val_rate, p.score_rate) == (400.0, 200.0) and p.fresh_t is None


def test_one_thread_count_timed_means_no_choice():
    mon = FakeMonitor(others=3.0)
    p = policy(monitor=mon)
    p.probed(400.0, 200.0)
    p.choose_eval_threads(lambda n, t: pytest.fail("nothing to re-time"))
    assert p.eval_threads is None and p.val_rate == 400.0


def test_checkpoints_every_checkpoint_minutes():
    p = policy(checkpoint_minutes=0.5, t_start=105.0)
    assert not p.checkpoint_due(135.0) and p.checkpoint_due(135.5)
    p.saved(135.5)
    assert not p.checkpoint_due(160.0) and p.checkpoint_due(166.0)


def test_averaging_starts_at_its_fraction_of_the_budget(monkeypatch):
    p = policy()  # 60 s from 100 s
    monkeypatch.setattr(budget_mod.time, "perf_counter", lambda: 130.0)
    assert not p.average_due(0.5) and not p.average_due(None)
    monkeypatch.setattr(budget_mod.time, "perf_counter", lambda: 130.5)
    assert p.average_due(0.5)


def test_a_budget_smaller_than_the_evaluation_is_said(monkeypatch):
    p = policy(minutes=0.5)  # 30 s from 100 s; the evaluation alone needs 21 s
    monkeypatch.setattr(budget_mod.time, "perf_counter", lambda: 105.0)
    assert p.overshoot_note() is None  # 5 + 21 <= 30
    monkeypatch.setattr(budget_mod.time, "perf_counter", lambda: 110.0)
    note = p.overshoot_note()
    assert note == ("note: the time budget (30 s) is less than loading plus the evaluation alone needs "
                    "(about 31 s): one batch is trained and the run will overshoot")


def test_the_budget_clock_starts_at_the_fit_without_a_caller_start():
    p = BudgetPolicy()
    p.start(time_budget=1.0, checkpoint_minutes=10, t_start=50.0, step=0, n_valid_tokens=10)
    assert p.clock0 == 50.0 and p.last_save == 50.0 and math.isinf(p.val_rate)
