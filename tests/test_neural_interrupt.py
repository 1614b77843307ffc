"""Ctrl-C in `ngramlm neural train` on shared cores (issue 38): with a CPU hog beside it, the run stops
within a few seconds, writes its checkpoint and says how to resume.  Before the thread rule a batch of
the default LSTM with two busy-waiting torch threads took 9.8 s at load 8.5, and so did the stop."""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytest.importorskip("torch")

REPO = Path(__file__).resolve().parent.parent
LIMIT = 5.0  # seconds from the signal to the end of the process, on a loaded 2-core machine


@pytest.mark.slow
def test_ctrl_c_in_neural_train_beside_a_cpu_hog_stops_within_seconds(tmp_path):
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    env.pop("NGRAMLM_THREAD_RULE", None)
    hog = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    try:
        out = tmp_path / "lstm.pt"
        run = subprocess.Popen([sys.executable, "-c", "import sys; sys.argv[0] = 'ngramlm'; from cli import main; main()",
                                "neural", "train", "toy", "--threads", "2", "--no-progress", "-o", str(out)],
                               cwd=tmp_path, env=env, stderr=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        # Wait until it trains (its config line is printed just before the first batch), then a little more.
        t0 = time.monotonic()
        lines = []
        while time.monotonic() - t0 < 120:
            line = run.stderr.readline()
            lines.append(line)
            if line.startswith("corpus toy:") or not line:
                break
        assert any(x.startswith("corpus toy:") for x in lines), "".join(lines)
        time.sleep(3.0)
        sent = time.monotonic()
        run.send_signal(signal.SIGINT)
        _, rest = run.communicate(timeout=60)
        elapsed = time.monotonic() - sent
    finally:
        hog.kill()
        hog.wait()
    assert elapsed < LIMIT, f"{elapsed:.1f} s to stop"
    assert "--resume" in rest and "Traceback" not in rest, rest
    assert out.exists()
    assert run.returncode == 130, run.returncode
