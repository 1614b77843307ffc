"""Minibatch schemes and the full-pass evaluator (token counts match the n-gram evaluator)."""
from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip("torch")
torch.set_num_threads(1)  # tiny models: a second thread only adds synchronisation (and contention on shared CPUs)

from corpora.errors import InputError  # noqa: E402
from corpora.vocab import EOS_ID, PAD_ID  # noqa: E402
from neural.config import RNNConfig, TransformerConfig  # noqa: E402
from neural.data import (RandomBatches, SequentialBatches, batchify, detach_state, eval_rows,  # noqa: E402
                         get_batch, with_start)
from neural.evaluation import evaluate, token_log_probs  # noqa: E402
from neural.models import build_model  # noqa: E402

SHARED = Path(__file__).resolve().parents[2] / "shared" / "corpora"


def test_with_start_prepends_the_sentence_end():
    s = with_start(np.array([5, 6, 2], dtype=np.int32))
    assert s.dtype == torch.long and s.tolist() == [EOS_ID, 5, 6, 2]


def test_batchify_makes_contiguous_rows_and_drops_the_remainder():
    rows = batchify(torch.arange(26), 4)
    assert rows.shape == (4, 6)
    assert rows[1].tolist() == [6, 7, 8, 9, 10, 11]
    with pytest.raises(InputError, match="too few"):
        batchify(torch.arange(5), 4)


def test_get_batch_targets_are_inputs_shifted_by_one():
    rows = batchify(torch.arange(40), 4)  # (4, 10)
    x, y = get_batch(rows, 0, 3)
    assert x.shape == y.shape == (4, 3)
    assert torch.equal(y, x + 1)
    x, y = get_batch(rows, 6, 5)  # only 3 inputs left (column 9 is the last target)
    assert x.shape == (4, 3) and torch.equal(y[:, -1], rows[:, 9])


def test_sequential_batches_cover_each_row_in_order():
    seq = SequentialBatches(torch.arange(41), batch_size=4, bptt=3)
    assert seq.carries_state
    xs = [x for x, _ in seq]
    assert len(xs) == len(seq) == 3  # 10 columns -> 9 predictions per row -> 3 batches of 3
    assert torch.equal(torch.cat(xs, 1), seq.rows[:, :9])


def test_detach_state_cuts_the_graph_but_keeps_values():
    w = torch.ones(3, requires_grad=True)
    state = (w * 2, (w * 3,))
    d = detach_state(state)
    assert not d[0].requires_grad and not d[1][0].requires_grad
    assert torch.equal(d[0], state[0])
    assert detach_state(None) is None


def test_random_batches_shapes_shift_and_repeatability():
    stream = torch.arange(1000)
    a = RandomBatches(stream, batch_size=8, bptt=10, seed=3, epoch=0)
    assert not a.carries_state
    x, y = a[0]
    assert x.shape == y.shape == (8, 10)
    assert torch.equal(y, x + 1) and torch.equal(x[:, 1:] - x[:, :-1], torch.ones(8, 9, dtype=torch.long))
    b = RandomBatches(stream, batch_size=8, bptt=10, seed=3, epoch=0)
    assert all(torch.equal(p[0], q[0]) for p, q in zip(a, b))
    c = RandomBatches(stream, batch_size=8, bptt=10, seed=3, epoch=1)
    assert not torch.equal(a[0][0], c[0][0])
    # one epoch: non-overlapping subsequences, all starting at the same offset modulo bptt
    starts = torch.cat([x[:, 0] for x, _ in a])
    assert len(set(starts.tolist())) == len(starts) == len(a) * 8
    assert len(set((starts % 10).tolist())) == 1
    with pytest.raises(InputError, match="batch-size"):
        RandomBatches(torch.arange(50), batch_size=8, bptt=10, seed=0, epoch=0)


@pytest.mark.parametrize("n_rows", [1, 3, 7, 50])
def test_eval_rows_predict_every_token_exactly_once(n_rows):
    ids = np.arange(10, 57, dtype=np.int32)  # 47 tokens
    x, y = eval_rows(ids, n_rows)
    targets = y[y != PAD_ID]
    assert targets.tolist() == ids.tolist()
    assert x[0, 0] == EOS_ID
    # each input is the token right before its target in the stream
    stream = with_start(ids)
    pos = {int(t): i for i, t in enumerate(stream)}
    for xi, yi in zip(x[y != PAD_ID].tolist(), targets.tolist()):
        assert pos[yi] - 1 == pos[xi]


def _tiny_rnn(V=20):
    return build_model("rnn", RNNConfig(vocab_size=V, cell="lstm", emb_size=8, hidden_size=8, n_layers=2), seed=0)


def test_evaluate_counts_and_chunking_does_not_change_the_result():
    ids = np.random.default_rng(0).integers(2, 20, 300).astype(np.int32)
    model = _tiny_rnn()
    a = evaluate(model, ids, chunk_len=7)
    b = evaluate(model, ids, chunk_len=1000)
    assert a.n_predicted == b.n_predicted == 300
    assert math.isclose(a.log_prob_nats, b.log_prob_nats, rel_tol=1e-5)
    assert math.isclose(a.ppl, math.exp(-a.log_prob_nats / 300))
    assert math.isclose(a.log10_prob * math.log(10), a.log_prob_nats) and a.log2_prob < a.log10_prob < 0
    per_token = token_log_probs(model, ids)
    assert len(per_token) == 300 and math.isclose(per_token.sum(), a.log_prob_nats, rel_tol=1e-5)
    c = evaluate(model, ids, batch_size=4)  # other context at row starts, same events
    assert c.n_predicted == 300


def test_transformer_sliding_window_scores_every_token_once():
    ids = np.random.default_rng(1).integers(2, 20, 101).astype(np.int32)
    model = build_model("transformer", TransformerConfig(vocab_size=20, d_model=16, n_layers=1, n_heads=2, d_ff=32,
                                                         block_size=16), seed=0)
    r = evaluate(model, ids)
    assert r.n_predicted == 101
    # the window is a stride of block_size // 4: context never exceeds the block, tokens are not rescored
    r2 = evaluate(model, ids, chunk_len=16)
    assert r2.n_predicted == 101 and math.isfinite(r2.log_prob_nats)
    with pytest.raises(InputError, match="context window"):
        evaluate(model, ids, chunk_len=17)


@pytest.mark.slow
@pytest.mark.skipif(not (SHARED / "ptb" / "ptb.test.txt").exists(), reason="PTB not available")
def test_evaluator_predicts_82430_tokens_on_ptb_test():
    from corpora import load_corpus, prepare

    ds = prepare(load_corpus("ptb", data_dir=SHARED))
    model = build_model("rnn", RNNConfig(vocab_size=len(ds.vocab), cell="gru", emb_size=4, hidden_size=4,
                                         n_layers=1), seed=0)
    r = evaluate(model, ds["test"].ids, batch_size=16)
    assert ds.vocab.n_types == 10_000
    assert r.n_predicted == len(ds["test"].ids) == 82_430
    assert 5_000 < r.ppl < 20_000  # untrained: close to uniform over the 10,000 types
