"""Long neural scoring says what it does (issue 38): a line naming the text, its tokens and the torch
threads, a progress bar of the tokens scored, and the thread rule's switches on shared cores."""
from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from corpora.vocab import Vocab  # noqa: E402
from neural.evaluation import evaluate, token_log_probs, token_log_probs_and_hidden  # noqa: E402
from neural.models import build_model  # noqa: E402


def _model(V: int):
    return build_model("rnn", {"vocab_size": V, "cell": "gru", "emb_size": 8, "hidden_size": 8, "n_layers": 1,
                               "dropout": 0.0}, seed=0)


def test_every_evaluation_loop_reports_each_chunk_and_the_counts_add_up():
    rng = np.random.default_rng(0)
    ids = rng.integers(2, 30, size=1000).astype(np.int32)
    model = _model(30)
    for fn, kw in ((token_log_probs, {}), (token_log_probs_and_hidden, {}), (evaluate, {"batch_size": 3}),
                   (evaluate, {})):
        seen = []
        fn(model, ids, chunk_len=64, on_chunk=seen.append, **kw)
        assert sum(seen) == len(ids), fn.__name__
        assert len(seen) >= 1000 // 64 // max(1, kw.get("batch_size", 1)), fn.__name__


def test_neural_ppl_says_what_it_scores(tmp_path, run_cli):
    text = tmp_path / "t.txt"
    words = [f"w{i}" for i in range(20)]
    rng = np.random.default_rng(1)
    text.write_text("\n".join(" ".join(rng.choice(words, size=8)) for _ in range(200)) + "\n")
    out = tmp_path / "m.pt"
    code, _, err = run_cli("neural", "train", str(text), "--model", "gru", "--hidden-size", "8", "--layers", "1",
                           "--dry-run", "-o", out, "--no-progress")
    assert code == 0, err
    for cmd in (("neural", "ppl", out, str(text)), ("ppl", out, str(text))):
        code, stdout, err = run_cli(*cmd)
        assert code == 0, err
        n = 200 * 9  # 8 words and </s> a line
        assert f"scoring {text}: {n:,} tokens with the gru model" in err, (cmd, err)
        assert "torch thread" in err
