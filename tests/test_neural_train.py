"""Trainer and checkpoints: round trip, refusal of foreign files, resume equivalence, divergence, stopping."""
from __future__ import annotations

import math
import os
import pickle
import random
import zipfile

import numpy as np
import pytest

torch = pytest.importorskip("torch")
torch.set_num_threads(1)  # tiny models: a second thread only adds synchronisation (and contention on shared CPUs)

from corpora import Vocab  # noqa: E402
from corpora.errors import InputError  # noqa: E402
from neural.sniff import is_checkpoint  # noqa: E402
from neural.checkpoint import best_path, load_checkpoint, load_model, save_checkpoint  # noqa: E402
from neural.config import RNNConfig, TrainConfig, TransformerConfig  # noqa: E402
from neural.models import build_model  # noqa: E402
from neural.training.trainer import Trainer, TrainingDiverged  # noqa: E402

WORDS = "the a cat dog sat ran on under mat log and then".split()


def make_vocab_and_data(seed=0, n_train=60, n_valid=8):
    rng = np.random.default_rng(seed)

    def sentences(n):
        return [[WORDS[i] for i in rng.integers(0, len(WORDS), rng.integers(2, 7))] for _ in range(n)]

    train, valid = sentences(n_train), sentences(n_valid)
    vocab = Vocab().fit(train)
    return vocab, vocab.encode_sentences(train).ids, vocab.encode_sentences(valid).ids


def rnn(vocab, cell="lstm", seed=0):
    cfg = RNNConfig(vocab_size=len(vocab), cell=cell, emb_size=8, hidden_size=8, n_layers=2, dropout=0.2)
    return build_model("rnn", cfg, seed=seed)


def cfg(**kw):
    base = dict(epochs=2, batch_size=4, bptt=5, lr=1.0, clip=0.5, patience=0, seed=7)
    base.update(kw)
    return TrainConfig(**base)


def params_equal(a, b):
    sa, sb = a.state_dict(), b.state_dict()
    return sa.keys() == sb.keys() and all(torch.equal(sa[k], sb[k]) for k in sa)


# ---------------------------------------------------------------------------- checkpoints
def test_checkpoint_round_trip_with_weights_only(tmp_path):
    vocab, tr, va = make_vocab_and_data()
    model = build_model("transformer", TransformerConfig(vocab_size=len(vocab), d_model=8, n_layers=1, n_heads=2,
                                                         d_ff=16, block_size=8), seed=1)
    path = tmp_path / "t.pt"
    save_checkpoint(path, model, vocab)
    assert is_checkpoint(path)
    raw = torch.load(path, weights_only=True)  # plain containers only
    assert raw["format"] == "ngramlm.neural" and raw["model"]["kind"] == "transformer"
    assert isinstance(raw["vocab"], dict) and isinstance(raw["model"]["config"], dict)
    loaded, v2, _ = load_model(path)
    assert v2 == vocab and params_equal(model, loaded)
    x = torch.tensor([[2, 5, 6]])
    torch.testing.assert_close(model.eval()(x)[0], loaded(x)[0])
    assert not list(tmp_path.glob(".t.pt.*.tmp"))  # atomic write left no temp file


def test_rnn_checkpoint_loads_into_the_other_implementation(tmp_path):
    vocab, _, _ = make_vocab_and_data()
    model = rnn(vocab, "gru").eval()
    save_checkpoint(tmp_path / "g.pt", model, vocab)
    scratch, _, _ = load_model(tmp_path / "g.pt", impl="scratch")
    x = torch.tensor([[2, 5, 6, 7]])
    torch.testing.assert_close(model(x)[0][..., 2:], scratch(x)[0][..., 2:], atol=1e-5, rtol=1e-5)


class _Boom:
    def __reduce__(self):
        return (os.mkdir, ("/tmp/ngramlm-neural-should-not-exist",))


def test_foreign_and_corrupt_files_are_refused_without_unpickling(tmp_path):
    evil = tmp_path / "evil.pt"
    evil.write_bytes(pickle.dumps({"format": "ngramlm.neural", "x": _Boom()}))
    zipped = tmp_path / "evil_zip.pt"
    torch.save({"format": "ngramlm.neural", "version": 1}, zipped)  # our tag, but written... fine to load
    noise = tmp_path / "noise.pt"
    # Seeded, so a run cannot draw the rare noise that starts like a pickle or gzip header.
    noise.write_bytes(random.Random(20261201).randbytes(4096))
    arpa = tmp_path / "model.arpa"
    arpa.write_text("\\data\\\nngram 1=3\n")
    foreign = tmp_path / "foreign.pt"
    torch.save({"weights": torch.zeros(2)}, foreign)
    npz = tmp_path / "model.npz"
    np.savez(npz, counts=np.zeros(3))
    for path, why in [(evil, "pickle"), (noise, "binary"), (arpa, "n-gram"), (foreign, "format tag"),
                      (npz, "n-gram model")]:
        assert not is_checkpoint(path)
        with pytest.raises(InputError, match=why):
            load_checkpoint(path)
    assert not os.path.exists("/tmp/ngramlm-neural-should-not-exist")
    with pytest.raises(InputError, match="corrupt checkpoint"):
        load_checkpoint(zipped)  # tagged but incomplete
    with pytest.raises(InputError, match="no such"):
        load_checkpoint(tmp_path / "missing.pt")


def test_binary_noise_is_called_binary_whatever_its_first_byte(tmp_path):
    # CI once drew noise starting with `{`, which the first-byte rule called text.
    from neural.checkpoint import _why_not_checkpoint
    rng = random.Random(7)
    path = tmp_path / "noise.pt"
    for first in [b"{", b"\\", b" ", b"\x80", b"\x1f\x8b"] + [bytes([b]) for b in range(0, 256, 17)]:
        path.write_bytes(first + rng.randbytes(200))
        assert _why_not_checkpoint(path) == "unrecognised binary data", first
    for text in ["\\data\\\nngram 1=3\n", '{"format": "x"}', "the cat sat\n", "红楼梦 " * 20]:
        path.write_bytes(text.encode("utf-8"))
        assert "looks like text" in _why_not_checkpoint(path), text


def test_truncated_checkpoint_and_pickled_object_inside_zip_are_refused(tmp_path):
    vocab, _, _ = make_vocab_and_data()
    good = tmp_path / "good.pt"
    save_checkpoint(good, rnn(vocab), vocab)
    cut = tmp_path / "cut.pt"
    cut.write_bytes(good.read_bytes()[: len(good.read_bytes()) // 2])
    with pytest.raises(InputError):
        load_checkpoint(cut)
    sneaky = tmp_path / "sneaky.pt"
    torch.save({"format": "ngramlm.neural", "version": 1, "x": _Boom()}, sneaky)
    with pytest.raises(InputError, match="holds Python objects besides weights"):
        load_checkpoint(sneaky)
    assert not os.path.exists("/tmp/ngramlm-neural-should-not-exist")
    assert zipfile.is_zipfile(good)


def test_checkpoint_of_another_vocabulary_or_architecture_is_a_clear_error(tmp_path):
    vocab, tr, va = make_vocab_and_data()
    other, _, _ = make_vocab_and_data(seed=1, n_train=3)
    path = tmp_path / "m.pt"
    Trainer(rnn(vocab), vocab, tr, va, cfg(epochs=1), out=path, progress=False).fit()
    with pytest.raises(InputError, match="another vocabulary"):
        Trainer.resume(path, tr, va, vocab=other, progress=False)
    with pytest.raises(InputError, match="holds a lstm model, not gru"):
        Trainer.resume(path, tr, va, vocab=vocab, expect_name="gru", progress=False)


# ---------------------------------------------------------------------------- training
def test_seeded_runs_are_repeatable(tmp_path):
    vocab, tr, va = make_vocab_and_data()
    a, b = rnn(vocab), rnn(vocab)
    ra = Trainer(a, vocab, tr, va, cfg(), progress=False).fit()
    rb = Trainer(b, vocab, tr, va, cfg(), progress=False).fit()
    assert params_equal(a, b) and ra.best_val_ppl == rb.best_val_ppl


@pytest.mark.parametrize("scheme", ["sequential", "random"])
def test_two_epochs_equal_one_epoch_plus_resume(tmp_path, scheme):
    vocab, tr, va = make_vocab_and_data()
    straight = rnn(vocab)
    r1 = Trainer(straight, vocab, tr, va, cfg(batch_scheme=scheme, optimizer="adamw", lr=0.01),
                 out=tmp_path / "a.pt", progress=False).fit()
    first = rnn(vocab)
    Trainer(first, vocab, tr, va, cfg(epochs=1, batch_scheme=scheme, optimizer="adamw", lr=0.01),
            out=tmp_path / "b.pt", progress=False).fit()
    resumed = Trainer.resume(tmp_path / "b.pt", tr, va, vocab=vocab, overrides={"epochs": 2}, progress=False)
    r2 = resumed.fit()
    assert params_equal(straight, resumed.model)
    assert r1.history[-1]["val_ppl"] == r2.history[-1]["val_ppl"]
    assert len(r2.history) == 2


def test_interrupt_mid_epoch_then_resume_is_exact(tmp_path):
    vocab, tr, va = make_vocab_and_data()
    straight = rnn(vocab)
    Trainer(straight, vocab, tr, va, cfg(epochs=2), progress=False).fit()

    def stop_at_batch_3(trainer, k):
        if trainer.position["epoch"] == 1 and k == 2:
            trainer.request_stop()

    first = rnn(vocab)
    r = Trainer(first, vocab, tr, va, cfg(epochs=2), out=tmp_path / "i.pt", progress=False,
                on_batch_end=stop_at_batch_3).fit()
    assert r.stopped == "interrupted"
    ckpt = load_checkpoint(tmp_path / "i.pt")
    assert ckpt["train"]["position"] == {"epoch": 1, "batch": 3}
    assert ckpt["train"]["carry_state"] is not None  # the sequential scheme's state is kept
    before = ckpt["train"]["seconds"]
    assert 0 < before <= r.seconds + 1e-6 and ckpt["train"]["history"][-1]["seconds"] <= before
    resumed = Trainer.resume(tmp_path / "i.pt", tr, va, vocab=vocab, progress=False)
    r2 = resumed.fit()
    assert params_equal(straight, resumed.model)
    # Training time counts the whole run: the interrupted part, then this fit.
    final = load_checkpoint(tmp_path / "i.pt")["train"]
    assert final["seconds"] == pytest.approx(before + r2.seconds, abs=0.5)
    assert final["history"][-1]["seconds"] > before


def test_nan_loss_stops_and_keeps_the_last_good_checkpoint(tmp_path):
    vocab, tr, va = make_vocab_and_data()
    model = rnn(vocab)

    def poison(trainer, k):
        if trainer.position["epoch"] == 1 and k == 1:
            with torch.no_grad():
                trainer.model.embedding.weight[4:].fill_(float("nan"))

    path = tmp_path / "n.pt"
    with pytest.raises(TrainingDiverged, match=r"loss is nan at epoch 2.*last good checkpoint .*n\.pt \(epoch 1, batch 0\)"):
        Trainer(model, vocab, tr, va, cfg(epochs=3), out=path, progress=False, on_batch_end=poison).fit()
    good, _, ckpt = load_model(path)
    assert ckpt["train"]["position"]["epoch"] == 1
    assert all(torch.isfinite(p).all() for p in good.parameters())


def test_absurd_learning_rate_diverges_with_a_clear_message(tmp_path):
    vocab, tr, va = make_vocab_and_data()
    model = rnn(vocab, cell="rnn_relu")
    with pytest.raises(TrainingDiverged, match="lower --lr"):
        Trainer(model, vocab, tr, va, cfg(epochs=5, lr=1e30, clip=0.0), out=tmp_path / "x.pt", progress=False).fit()


def test_time_budget_stops_validates_and_checkpoints(tmp_path):
    vocab, tr, va = make_vocab_and_data(n_train=400)
    path = tmp_path / "tb.pt"
    r = Trainer(rnn(vocab), vocab, tr, va, cfg(epochs=1000, time_budget=0.01), out=path, progress=False).fit()
    assert r.stopped == "time_budget" and r.epochs_done < 1000
    assert math.isfinite(r.last_val_ppl) and path.exists() and best_path(path).exists()


def test_early_stopping_and_plateau_decay(tmp_path):
    vocab, tr, va = make_vocab_and_data()
    # lr so small nothing improves after the first epoch's validation... use a constant ppl via lr=tiny
    t = Trainer(rnn(vocab), vocab, tr, va, cfg(epochs=20, lr=1e-9, patience=2, lr_decay=0.5), progress=False)
    r = t.fit()
    assert r.stopped == "early_stop"
    assert t.lr < 1e-9  # decayed on plateau


def test_cosine_schedule_warms_up_and_decays():
    vocab, tr, va = make_vocab_and_data()
    t = Trainer(rnn(vocab), vocab, tr, va, cfg(schedule="cosine", lr=1.0, warmup_steps=4, min_lr_ratio=0.1),
                progress=False)
    lrs = []
    for step in range(40):
        t.step = step
        lrs.append(t._lr_now(total_steps=40))
    assert lrs[0] == pytest.approx(0.25) and lrs[3] == pytest.approx(1.0)
    assert lrs[-1] == pytest.approx(0.1, abs=0.01) and all(a >= b for a, b in zip(lrs[4:], lrs[5:]))


def test_training_reduces_validation_perplexity():
    vocab, tr, va = make_vocab_and_data(n_train=200)
    model = rnn(vocab)
    r = Trainer(model, vocab, tr, va, cfg(epochs=4, optimizer="adamw", lr=0.02), progress=False).fit()
    assert r.history[-1]["val_ppl"] < r.history[0]["val_ppl"] < len(WORDS) + 2


# ---------------------------------------------------------------------------- shared cores
def test_contention_monitor_sees_another_busy_process():
    import subprocess
    import sys
    import time

    from neural.training.contention import ContentionMonitor

    mon = ContentionMonitor()
    if mon._last is None:
        pytest.skip("no /proc/stat here: the monitor reports nothing and evaluation keeps its threads")
    hog = subprocess.Popen([sys.executable, "-c", "import time\nt = time.time()\nwhile time.time() - t < 3: pass"])
    try:
        time.sleep(0.3)
        mon.sample()  # start the interval once the hog runs
        time.sleep(1.5)
        others = mon.sample()
    finally:
        hog.kill()
        hog.wait()
    assert others is not None and others > 0.5 and mon.shared()


def test_evaluation_uses_one_thread_while_the_cores_are_shared(tmp_path, monkeypatch):
    """With other jobs on the cores, validation (and the caller's scoring) run with one thread -- two
    busy-waiting threads stall there (toy test scoring: 6 s alone, 41 s beside two CPU-bound jobs,
    7 s with one thread) -- and the budget is estimated at that thread count."""
    from neural.training import contention

    vocab, tr, va = make_vocab_and_data(n_train=600)
    def busy(self):
        self.others = 1.7  # cores used by other processes
        return self.others

    monkeypatch.setattr(contention.ContentionMonitor, "sample", busy)
    import neural.training.trainer as train_mod

    times = iter(range(0, 10**6, 3))  # each perf_counter() call is 3 s later: a look every batch
    real = train_mod.time.perf_counter
    monkeypatch.setattr(train_mod.time, "perf_counter", lambda: float(next(times)))
    seen = []
    torch.set_num_threads(2)
    try:
        t = Trainer(rnn(vocab), vocab, tr, va, cfg(epochs=1, time_budget=10**4), progress=False,
                    log=seen.append, reserve_tokens=len(va))
        r = t.fit()
        assert torch.get_num_threads() == 2  # restored after every evaluation
    finally:
        torch.set_num_threads(1)
        monkeypatch.setattr(train_mod.time, "perf_counter", real)
    assert r.stopped == "finished"
    assert t.eval_threads == 1
    assert any("evaluating with 1 thread" in m for m in seen), seen
    assert t.budget.rates[1] and t.budget.rates[2]  # both counts were timed by the first probe
