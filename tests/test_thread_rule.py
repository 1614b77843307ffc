"""The one rule for torch's threads on shared cores (neural/training/contention.py): the configured count
while the cores are free, one thread while other processes use more than half a core, followed by every
training loop through a hook before each optimizer step (the labs', BERT's, the translators', the LM
trainer's)."""
import subprocess
import sys
import time

import pytest

from conftest import needs

pytestmark = needs("torch")


class FakeMonitor:
    def __init__(self, readings):
        self.readings = list(readings)
        self.others = None

    def sample(self, min_interval=0.5):
        self.others = self.readings.pop(0)
        return self.others


def test_rule_switches_on_measured_contention_and_back():
    import torch

    from neural.training.contention import ThreadRule

    before = torch.get_num_threads()
    notes = []
    try:
        rule = ThreadRule(2, look_every=0.0, log=notes.append)
        rule.monitor = FakeMonitor([0.1, 1.7, 1.2, 0.2, None])
        assert rule.tick() == 2 and torch.get_num_threads() == 2  # free cores: the configured count
        assert rule.tick() == 1 and torch.get_num_threads() == 1  # 1.7 cores used by others
        assert rule.tick() == 1 and rule.changes == 1  # still shared: no change, no second note
        assert rule.tick() == 2 and torch.get_num_threads() == 2  # free again
        assert rule.tick() == 2  # nothing measurable: unchanged
        assert notes == ["note: other processes use 1.7 cores: 1 torch thread",
                         "note: the cores are free again: 2 torch threads"]
        one = ThreadRule(1, look_every=0.0)
        one.monitor = FakeMonitor([])  # never sampled: a single thread has nothing to give up
        assert one.tick() == 1
    finally:
        torch.set_num_threads(before)


def test_rule_waits_between_measurements():
    import torch

    from neural.training.contention import ThreadRule

    before = torch.get_num_threads()
    try:
        rule = ThreadRule(2, look_every=3600.0)
        rule.monitor = FakeMonitor([1.5])
        assert rule.tick() == 2 and rule.monitor.readings == [1.5]  # not yet time to look
    finally:
        torch.set_num_threads(before)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the rule reads /proc/stat")
def test_every_optimizer_step_follows_the_rule_beside_two_cpu_hogs():
    """Two busy processes beside a training loop: the rule measures them at the start and the loop's steps
    run with one thread; the count before the block is restored after it."""
    import torch

    from neural.training.contention import thread_rule

    hogs = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(2)]
    before = torch.get_num_threads()
    try:
        time.sleep(0.5)
        torch.set_num_threads(2)
        seen = []
        with thread_rule(2, look_every=0.2) as rule:
            model = torch.nn.Linear(64, 64)
            opt = torch.optim.SGD(model.parameters(), lr=0.1)
            t0 = time.monotonic()
            while time.monotonic() - t0 < 1.0:
                opt.zero_grad()
                model(torch.randn(32, 64)).sum().backward()
                opt.step()
                seen.append(torch.get_num_threads())
        assert rule.monitor.others is not None and rule.monitor.others > 0.5
        assert set(seen) == {1}
        assert torch.get_num_threads() == 2
    finally:
        for h in hogs:
            h.kill()
        torch.set_num_threads(before)
