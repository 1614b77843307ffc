"""`compare` is not silent while a neural model trains (issue 38): without --verbose it prints a line
every HEARTBEAT_SECONDS (step, tokens, seconds of the budget) and each validation's line."""
from __future__ import annotations

import pytest

pytest.importorskip("torch")


@pytest.mark.slow
def test_compare_says_how_a_neural_budget_goes(run_cli, tmp_path, monkeypatch):
    from reports.experiments import neural_part

    monkeypatch.setattr(neural_part, "HEARTBEAT_SECONDS", 0.0)  # every batch: the test's run is seconds
    out = tmp_path / "cmp"
    code, _, err = run_cli("compare", "--quick", "--out", out, "--neural", "lstm", "--curve", "none",
                           "--no-prune-curve")
    assert code == 0, err
    beats = [line for line in err.splitlines() if "[lstm] training: step" in line]
    assert beats, err
    assert " tokens, " in beats[-1]
    assert any("[lstm] epoch" in line and "valid ppl" in line for line in err.splitlines()), err
