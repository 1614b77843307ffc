"""The ladder's parts: per-context mixtures, the AWD regularisers, weight averaging, and the ladder itself."""
from __future__ import annotations

import json
import math

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from corpora import load_corpus, prepare  # noqa: E402
from corpora.vocab import EncodedText  # noqa: E402
from ngramlm.tools.context_mix import (fit_bucket_mix, global_mix, infini_context_buckets, mix_by_bucket,
                                       ngram_context_buckets)
from ngramlm.model import NgramLM  # noqa: E402
from neural.config import RNNConfig, TrainConfig  # noqa: E402
from neural.regularize import WeightAverage, activation_penalty, embedding_dropout, locked_dropout  # noqa: E402
from neural.rnn import RNNLM  # noqa: E402


# ---------------------------------------------------------------------------- context buckets
def test_ngram_context_bucket_is_the_previous_tokens_match_capped_and_one_at_sentence_start():
    lengths = np.array([2, 3, 5, 1, 4, 2, 3])
    starts = np.array([0, 4, 7])  # two sentences: tokens 0-3 and 4-6
    b = ngram_context_buckets(lengths, starts, order=4)
    # t=0 and t=4 start sentences (history <s>); else min(previous length, order - 1) and at least 1.
    assert b.tolist() == [1, 2, 3, 3, 1, 3, 2]


def test_ngram_context_bucket_depends_on_the_history_only():
    ds = prepare(load_corpus("toy"))
    lm = NgramLM(order=4, smoothing="mkn").fit(ds["train"], vocab=ds.vocab)
    text = ds["test"]
    n = 400
    sub = EncodedText(text.ids[:n].copy(), text.starts[text.starts <= n].copy())
    if sub.starts[-1] != n:
        sub = EncodedText(sub.ids, np.append(sub.starts, n))
    b = ngram_context_buckets(lm.token_scores(sub).ngram_length, sub.starts, order=4)
    changed = sub.ids.copy()
    t = 57
    changed[t] = 5 if changed[t] != 5 else 6  # another word at position t
    other = EncodedText(changed, sub.starts)
    b2 = ngram_context_buckets(lm.token_scores(other).ngram_length, other.starts, order=4)
    assert np.array_equal(b[:t + 1], b2[:t + 1])  # the bucket *at* t does not see the word at t


def test_infini_buckets_split_sparse_and_dense_and_cap_n():
    b = infini_context_buckets(np.array([1, 1, 3, 9]), np.array([False, True, False, True]), cap=6)
    assert b.tolist() == [0, 1, 4, 11]


# ---------------------------------------------------------------------------- EM per bucket
def test_bucket_em_recovers_the_hand_computed_weights():
    # Bucket 0: A alone predicts 3 of 4 tokens -> the likelihood is maximised at lambda_A = 3/4;
    # bucket 1: 1 of 4 -> 1/4.  (Posteriors are 0/1, so EM lands there exactly.)
    with np.errstate(divide="ignore"):
        a = np.log(np.array([0.5, 0.5, 0.5, 0.0, 0.5, 0.0, 0.0, 0.0]))
        b = np.log(np.array([0.0, 0.0, 0.0, 0.5, 0.0, 0.5, 0.5, 0.5]))
    buckets = np.array([0, 0, 0, 0, 1, 1, 1, 1])
    mix = fit_bucket_mix(np.vstack([a, b]), buckets, min_tokens=1)
    assert mix.weights[0] == pytest.approx([0.75, 0.25], abs=1e-6)
    assert mix.weights[1] == pytest.approx([0.25, 0.75], abs=1e-6)
    assert mix.global_weights == pytest.approx([0.5, 0.5], abs=1e-6)
    mixed = mix_by_bucket(np.vstack([a, b]), buckets, mix)
    assert np.exp(mixed[0]) == pytest.approx(0.75 * 0.5)
    assert np.exp(mixed[5]) == pytest.approx(0.75 * 0.5)


def test_small_buckets_take_the_global_weights_and_per_context_is_never_worse_on_the_fitted_text():
    rng = np.random.default_rng(0)
    n = 3000
    buckets = rng.integers(0, 4, size=n)
    buckets[:5] = 4  # a bucket of 5 tokens: below min_tokens
    good_a = rng.random(n) < np.where(buckets % 2 == 0, 0.8, 0.2)
    a = np.log(np.where(good_a, 0.3, 0.01))
    b = np.log(np.where(good_a, 0.01, 0.3))
    comp = np.vstack([a, b])
    mix = fit_bucket_mix(comp, buckets, min_tokens=50)
    assert mix.tokens[4] == 0 and np.allclose(mix.weights[4], mix.global_weights)
    assert mix.weights[0][0] > 0.6 and mix.weights[1][0] < 0.4
    assert mix_by_bucket(comp, buckets, mix).sum() >= global_mix(comp, mix.global_weights).sum() - 1e-9


def test_a_per_context_mixture_of_two_models_sums_to_one_over_the_vocabulary():
    ds = prepare(load_corpus("toy"))
    vocab = ds.vocab
    lm = NgramLM(order=3, smoothing="mkn").fit(ds["train"], vocab=vocab)
    torch.manual_seed(0)
    net = RNNLM(RNNConfig(vocab_size=len(vocab), emb_size=16, hidden_size=16, n_layers=1)).eval()
    mix_weights = fit_bucket_mix(np.log(np.full((2, 600), 0.1)) + np.vstack([np.zeros(600), np.full(600, -0.5)]),
                                 np.arange(600) % 3, min_tokens=1)
    sentence = vocab.itos_[4:12]
    for cut in (0, 2, 5):
        context = ["<s>"] + sentence[:cut]
        p_ng = lm.next_probs(context)
        ids = torch.tensor([[vocab["</s>"]] + [vocab[w] for w in sentence[:cut]]])
        with torch.no_grad():
            logits, _, _ = net(ids)
        p_nn = torch.softmax(logits[0, -1].double(), dim=-1).numpy()
        # The bucket comes from the history alone: the match length of the previous token's n-gram.
        prev_len = 0 if cut == 0 else lm.token_scores(vocab.encode_sentences([sentence[:cut]])).ngram_length[cut - 1]
        bucket = 1 if cut == 0 else min(int(prev_len), 2)
        w = mix_weights.weights[bucket]
        p = w[0] * p_ng + w[1] * p_nn
        assert p.sum() == pytest.approx(1.0, abs=1e-9)
        assert p[0] == 0 and p[1] == 0  # <pad> and <s> are never predicted


# ---------------------------------------------------------------------------- regularisers
def _plain_to_regularised(base: RNNLM, reg: RNNLM) -> None:
    new = {}
    for k, v in base.state_dict().items():
        if k.startswith("rnn."):
            name = k[4:]
            new[f"rnn.layers.{name[-1]}.{name[:-1]}0"] = v
        else:
            new[k] = v
    reg.load_state_dict(new)


@pytest.mark.parametrize("cell", ["lstm", "gru", "rnn_tanh"])
def test_the_regularised_stack_in_eval_mode_equals_the_fused_multi_layer_module(cell):
    torch.manual_seed(0)
    kw = dict(vocab_size=40, cell=cell, emb_size=12, hidden_size=12, n_layers=2)
    base = RNNLM(RNNConfig(**kw)).eval()
    reg = RNNLM(RNNConfig(**kw, locked_dropout=True, weight_drop=0.5, emb_dropout=0.3, dropout_in=0.4)).eval()
    _plain_to_regularised(base, reg)
    x = torch.randint(2, 40, (3, 9))
    la, _, sa = base(x)
    lb, _, sb = reg(x)
    assert torch.equal(la[..., 2:], lb[..., 2:])
    assert all(torch.equal(p, q) for p, q in zip(sa, sb))


def test_locked_dropout_uses_one_mask_for_all_time_steps():
    torch.manual_seed(1)
    y = locked_dropout(torch.ones(4, 7, 10), 0.5, training=True)
    assert torch.equal(y, y[:, :1].expand_as(y))  # the same units dropped at every step
    assert set(y.unique().tolist()) <= {0.0, 2.0}
    assert torch.equal(locked_dropout(torch.ones(2, 3, 4), 0.5, training=False), torch.ones(2, 3, 4))


def test_embedding_dropout_drops_whole_word_types():
    torch.manual_seed(2)
    emb = torch.nn.Embedding(50, 8)
    x = torch.tensor([[3, 3, 7, 3, 7, 9]])
    y = embedding_dropout(emb, x, 0.5, training=True)[0]
    for w in (3, 7, 9):
        rows = y[x[0] == w]
        assert torch.equal(rows, rows[:1].expand_as(rows))  # every occurrence alike: kept or dropped
        kept = torch.allclose(rows[0], emb.weight[w] * 2)
        assert kept or torch.equal(rows[0], torch.zeros(8))


def test_weight_drop_changes_training_outputs_and_gradients_reach_the_recurrent_weights():
    torch.manual_seed(3)
    m = RNNLM(RNNConfig(vocab_size=30, emb_size=8, hidden_size=8, n_layers=2, weight_drop=0.5, dropout=0.0)).train()
    x = torch.randint(2, 30, (2, 6))
    y = torch.randint(2, 30, (2, 6))
    _, l1, _ = m(x, y)
    _, l2, _ = m(x, y)
    assert l1.item() != l2.item()  # a new DropConnect mask per call
    (l1 + m.activation_penalty(ar=2.0, tar=1.0)).backward()
    assert m.rnn.layers[1].weight_hh_l0.grad.abs().sum() > 0


def test_activation_penalty_is_ar_times_mean_square_plus_tar_times_mean_square_step():
    d = torch.tensor([[[1.0, 2.0], [3.0, 4.0]]])
    raw = torch.tensor([[[0.0, 1.0], [2.0, 1.0]]])
    got = activation_penalty(d, raw, ar=2.0, tar=3.0)
    assert got.item() == pytest.approx(2.0 * (1 + 4 + 9 + 16) / 4 + 3.0 * (4 + 0) / 2)


def test_scratch_cells_refuse_weight_drop_with_a_fix():
    from corpora.errors import InputError

    with pytest.raises(InputError, match="fused"):
        RNNConfig(vocab_size=10, impl="scratch", weight_drop=0.2).validate()


def test_weight_average_is_the_mean_of_the_weights_after_each_step():
    m = torch.nn.Linear(2, 1, bias=False)
    avg = WeightAverage(m)
    seen = []
    with torch.no_grad():
        m.weight.fill_(1.0)
        avg.start()
        seen.append(1.0)
        for v in (3.0, 5.0, 10.0):
            m.weight.fill_(v)
            avg.update()
            seen.append(v)
    with avg.swapped_in():
        assert m.weight[0, 0].item() == pytest.approx(np.mean(seen))
    assert m.weight[0, 0].item() == 10.0  # the trained weights come back


def test_nt_averaging_writes_the_averaged_weights_to_the_best_checkpoint_and_resumes(tmp_path):
    from neural.checkpoint import load_model
    from neural.evaluation import evaluate
    from neural.training.trainer import Trainer

    ds = prepare(load_corpus("toy"))
    train = ds["train"].ids[:6000]
    valid = ds["valid"].ids[:1500]
    torch.manual_seed(0)
    m = RNNLM(RNNConfig(vocab_size=len(ds.vocab), emb_size=16, hidden_size=16, n_layers=1, locked_dropout=True,
                        weight_drop=0.2))
    # lr 0.5 and a threshold of 0.9: no epoch "improves" by 90 %, so NT triggers after epoch 1.
    cfg = TrainConfig(epochs=3, lr=0.5, batch_size=8, bptt=20, plateau_threshold=0.9, patience=0, average="nt",
                      ar=1.0, tar=1.0)
    out = tmp_path / "m.pt"
    tr = Trainer(m, ds.vocab, train, valid, cfg, out=out, progress=False, log=lambda s: None)
    res = tr.fit()
    assert tr.average.active and tr.average.count > 1
    best, _, _ = load_model(res.best_checkpoint)
    assert evaluate(best, valid).ppl == pytest.approx(res.best_val_ppl, rel=1e-9)
    with tr.average.swapped_in():
        assert all(torch.equal(a, b) for a, b in zip(best.state_dict().values(), m.state_dict().values()))
    again = Trainer.resume(out, train, valid, progress=False, log=lambda s: None)
    assert again.average.count == tr.average.count
    assert all(torch.equal(again.average.mean[k], v) for k, v in tr.average.mean.items())


# ---------------------------------------------------------------------------- the ladder
def test_the_ladder_end_to_end_on_a_small_corpus(tmp_path):
    from neural.training.trainer import Trainer
    from reports.experiments.ladder import LadderOptions, run_ladder
    from reports.render.ladder import write_ladder

    toy = load_corpus("toy")
    lines = [" ".join(s) for s in toy.sentences("train")[:1500]]
    path = tmp_path / "small.txt"
    path.write_text("\n".join(lines) + "\n")
    c = load_corpus(str(path))
    ds = prepare(c)
    torch.manual_seed(0)
    m = RNNLM(RNNConfig(vocab_size=len(ds.vocab), emb_size=16, hidden_size=16, n_layers=1))
    ckpt = tmp_path / "small.pt"
    Trainer(m, ds.vocab, ds["train"].ids, ds["valid"].ids, TrainConfig(epochs=1, lr=5, patience=0), out=ckpt,
            progress=False, log=lambda s: None, data_info={"corpus": str(path)}).fit()
    opts = LadderOptions(order=3, window=200, tune_tokens=300, rms_tokens=2000, segment_len=7)
    res = run_ladder(tmp_path / "small.best.pt", str(path), options=opts, log=lambda s: None)
    rows = {r["id"]: r for r in res["rows"]}
    assert rows["dynamic"]["params"]["segment_len"] == rows["dynamic_cache"]["params"]["segment_len"] == 7
    assert res["ladder"] == ["ngram", "neural", "cache", "dynamic_cache", "mix_global", "mix_context", "mix3_context"]
    n = res["tokens"]["test"]
    assert n == ds["test"].n_tokens
    for r in res["rows"]:
        assert r["test_ppl_ci"][0] <= r["test_ppl"] <= r["test_ppl_ci"][1]
        assert len(res["per_token_log2"].get(r["id"], np.zeros(n))) == n
    # Each rung is tuned on valid; on valid a rung that only adds a choice can not be worse.
    assert rows["mix_context"]["valid_ppl"] <= rows["mix_global"]["valid_ppl"] + 1e-9
    assert rows["mix_global"]["valid_ppl"] <= min(rows["ngram"]["valid_ppl"], rows["dynamic_cache"]["valid_ppl"]) + 1e-9
    assert rows["cache"]["valid_ppl"] <= rows["neural"]["valid_ppl"] + 1e-9
    # The neural rung is the plain evaluation of the checkpoint.
    from neural.checkpoint import load_model
    from neural.evaluation import evaluate

    model, vocab, _ = load_model(tmp_path / "small.best.pt")
    assert rows["neural"]["test_ppl"] == pytest.approx(evaluate(model, ds["test"].ids).ppl, rel=1e-6)  # float32 sums
    step = res["steps"][0]
    assert sum(k["tokens"] for k in step["by_kind"]) == n
    assert step["mean_bits_gained"] == pytest.approx(math.log2(rows["ngram"]["test_ppl"] / rows["neural"]["test_ppl"]))
    page = write_ladder(res, tmp_path / "out")
    data = json.loads((tmp_path / "out" / "ladder.json").read_text())
    assert str(tmp_path) not in (tmp_path / "out" / "ladder.json").read_text()
    assert data["rows"][0]["id"] == "ngram" and (tmp_path / "out" / "plots" / "ladder.png").stat().st_size > 1000
    html = page.read_text()
    assert 'id="ladder"' in html and "tables/ladder.csv" in html
