"""Neural reliability: one source of defaults, precision probing, typed --set, wall-clock budgets."""
from __future__ import annotations

import dataclasses
import time

import numpy as np
import pytest

torch = pytest.importorskip("torch", reason="the neural extra is not installed (pip install -e '.[neural]')")

from corpora import load_corpus, prepare  # noqa: E402
from corpora.errors import InputError  # noqa: E402
from neural import precision  # noqa: E402
from neural.config import (COMPARE_TRAIN_PRESETS, MODEL_PRESETS, architecture, TRAIN_PRESETS, RNNConfig, TrainConfig,  # noqa: E402
                           TransformerConfig, parse_override, sized)
from neural.models import build_model  # noqa: E402
from neural.training.trainer import Trainer  # noqa: E402


# ---------------------------------------------------------------------------- one source of defaults
def test_the_default_preset_is_what_the_dataclasses_and_the_cli_say(run_cli):
    tf, rnn = MODEL_PRESETS["default"]["transformer"], MODEL_PRESETS["default"]["rnn"]
    assert tf == TransformerConfig(vocab_size=0) and rnn == RNNConfig(vocab_size=0)
    assert (tf.positional, tf.dropout) == ("learned", 0.3)  # what docs/neural.md documents
    code, out, _ = run_cli("neural", "train", "--help")
    assert code == 0
    flat = " ".join(out.split())
    lstm = architecture("lstm").preset("default")
    assert lstm == {"emb_size": 300, "hidden_size": 300, "dropout": 0.35}  # what docs/ladder.md measured
    assert f"Dropout [default: 0.35 LSTM, {rnn.dropout} other RNNs, {tf.dropout} Transformer]" in flat
    assert f"RNN state width [default: 300 LSTM, {rnn.hidden_size} other RNNs]" in flat
    assert "--positional [sinusoidal|learned|relative]" in flat and "[default: learned]" in flat


def test_compare_builds_its_models_from_the_same_presets():
    from reports.experiments.neural_part import model_config, train_config

    assert model_config("transformer", "default", 50) == sized(MODEL_PRESETS["default"]["transformer"], 50).to_dict()
    assert model_config("gru", "small", 50) == sized(MODEL_PRESETS["small"]["rnn"], 50, cell="gru").to_dict()
    t = train_config("lstm", "small", {"minutes": 1.0}, 7, model_config("lstm", "small", 50))
    expected = dataclasses.replace(COMPARE_TRAIN_PRESETS["rnn"], epochs=1000, time_budget=1.0, seed=7, patience=3)
    assert t == expected.to_dict()
    # What compare changes for a wall-clock budget, and nothing else.
    diff = {k for k, v in COMPARE_TRAIN_PRESETS["transformer"].to_dict().items()
            if TRAIN_PRESETS["transformer"].to_dict()[k] != v}
    assert diff == {"schedule", "warmup_steps", "lr", "eval_batch_size", "checkpoint_minutes"}


# ---------------------------------------------------------------------------- --set
@pytest.mark.parametrize("text, expected", [
    ("bf16=False", ("bf16", False)), ("bf16=true", ("bf16", True)), ("lr=10", ("lr", 10.0)),
    ("hidden_size=300", ("hidden_size", 300)), ("time_budget=none", ("time_budget", None)),
    ("optimizer=adamw", ("optimizer", "adamw")),
])
def test_set_values_parse_as_the_fields_type(text, expected):
    key, value = parse_override(text, RNNConfig, TransformerConfig, TrainConfig)
    assert (key, value) == expected and type(value) is type(expected[1])


@pytest.mark.parametrize("text, match", [("bf16=maybe", "takes a bool"), ("hidden_size=3.5", "takes a int"),
                                         ("colour=red", "unknown key"), ("lr", "expected key=value")])
def test_bad_set_values_are_clear_errors(text, match):
    with pytest.raises(InputError, match=match):
        parse_override(text, RNNConfig, TransformerConfig, TrainConfig)


# ---------------------------------------------------------------------------- precision
def test_bf16_falls_back_to_fp32_where_its_kernels_fail(monkeypatch):
    monkeypatch.setattr(precision, "native_bf16", lambda: True)
    monkeypatch.setattr(precision, "_bf16_kernels_work", lambda: (False, "could not create a primitive descriptor"))
    choice = precision.choose_precision(True)
    assert not choice.bf16 and "primitive descriptor" in choice.reason and "float32" in choice.reason
    monkeypatch.setattr(precision, "native_bf16", lambda: False)
    assert not precision.choose_precision(None).bf16
    assert "no native bf16" in precision.choose_precision(True).reason
    assert precision.choose_precision(False) == precision.PrecisionChoice(False, "float32 (bf16 not requested)")


def _toy_data(n_train=3000, n_valid=600):
    ds = prepare(load_corpus("toy"))
    return ds.vocab, ds["train"].ids[:n_train], ds["valid"].ids[:n_valid], ds["test"].ids[:n_valid]


def test_a_bf16_request_trains_on_any_cpu():
    """The oneDNN LSTM kernel has no bf16 primitive on CPUs without AVX512-BF16: never crash there."""
    vocab, tr, va, _ = _toy_data()
    logs = []
    model = build_model("rnn", RNNConfig(vocab_size=len(vocab), emb_size=16, hidden_size=16, n_layers=1), seed=1)
    cfg = TrainConfig(epochs=1, batch_size=4, bptt=10, max_batches=3, bf16=True)
    r = Trainer(model, vocab, tr, va, cfg, progress=False, log=logs.append).fit()
    assert r.steps == 3 and np.isfinite(r.best_val_ppl)
    ok = precision.choose_precision(True)
    assert ok.bf16 == (not any("float32 instead" in m for m in logs))


# ---------------------------------------------------------------------------- budgets
def test_a_time_budget_covers_training_validation_and_the_final_scoring():
    from neural.evaluation import token_log_probs

    torch.set_num_threads(1)
    vocab, tr, va, te = _toy_data(n_train=200_000, n_valid=3000)
    model = build_model("rnn", RNNConfig(vocab_size=len(vocab), emb_size=64, hidden_size=64, n_layers=1), seed=1)
    budget_s = 4.0
    cfg = TrainConfig(epochs=1000, batch_size=8, bptt=20, time_budget=budget_s / 60, patience=0)
    t0 = time.perf_counter()
    trainer = Trainer(model, vocab, tr, va, cfg, progress=False, reserve_tokens=len(va) + len(te), clock_start=t0)
    r = trainer.fit()
    for ids in (va, te):  # what the caller announced with reserve_tokens
        token_log_probs(trainer.model, ids)
    wall = time.perf_counter() - t0
    assert r.stopped == "time_budget" and r.steps > 5
    batch = r.seconds / r.steps
    # The bound: within 10 % or one batch of the budget (plus scheduling noise on a shared CPU).
    assert wall <= budget_s * 1.10 + batch + 0.5, (wall, batch)
    assert wall >= budget_s * 0.5  # and the budget was used, not thrown away


def test_compare_says_up_front_when_a_budget_cannot_pay_for_the_scoring(monkeypatch):
    import reports.experiments.neural_part as part
    from reports.experiments.settings import CompareSettings

    cost = {"lstm": 10.0, "transformer": 100.0}  # seconds to score valid + test, as if measured
    monkeypatch.setattr(part, "scoring_seconds", lambda name, size, data, probe_tokens=2000: cost[name])
    s = CompareSettings(neural=("lstm", "transformer"), neural_minutes=1.0, curve=(0.1, 1.0)).validate()
    notes = part.budget_notes(s, data=None)
    # main budget 60 s: the Transformer (100 s) cannot hold it, the LSTM (10 s) can;
    # curve budget 15 s: the LSTM fits in 80 % of it? 10 s <= 12 s yes; the Transformer does not.
    assert len(notes) == 2
    assert "Transformer (small) needs about 100 s" in notes[0] and "--neural-minutes 1 allows" in notes[0]
    assert "--neural-minutes 2.1 or more" in notes[0]  # 100 s / 0.8 = 125 s -> 2.1 min
    assert "learning-curve rows" in notes[1] and "--curve-minutes 2.1" in notes[1]
    assert part.budget_notes(CompareSettings(neural_epochs=1, neural_minutes=None).validate(), data=None) == []
