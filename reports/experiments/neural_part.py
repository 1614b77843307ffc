"""The neural side of a comparison: model presets, budgeted training, per-token scores, attention.

Each model trains under a budget (wall-clock minutes or epochs) into a checkpoint in
the cache; its *best-validation* weights are then scored token by token on valid and
test with :func:`neural.evaluation.token_log_probs` -- the same predicted tokens as the
n-gram models.  Imports torch (only this module of ``reports`` does).
"""
from __future__ import annotations

import math
import time
from pathlib import Path
from typing import Callable, Optional

import numpy as np
import torch

from corpora.errors import InputError
from corpora.vocab import EOS_ID, EncodedText, Vocab
from neural.checkpoint import best_path, load_model, training_seconds
from neural.config import ARCHITECTURES, COMPARE_TRAIN_PRESETS, TrainConfig, architecture, resolve_lm_config
from neural.evaluation import token_log_probs
from neural.models import build_model
from neural.training.trainer import Trainer

LOG2_E = 1.0 / math.log(2.0)

# Architecture presets and training recipes: neural.config's MODEL_PRESETS ("default" is what
# `ngramlm neural train` builds) and COMPARE_TRAIN_PRESETS (why they differ from `neural train`'s
# recipes is said there).
LABELS = {name: arch.label for name, arch in ARCHITECTURES.items()}


# Seconds between the lines `compare` prints while a neural model trains (without --verbose).
HEARTBEAT_SECONDS = 30.0


def kind_of(name: str) -> str:
    return architecture(name).family


def _resolved(name: str, size: str, vocab_size: int, budget: Optional[dict] = None, seed: int = 0) -> tuple:
    """(model config, train config) of a compared model: the `compare` recipe under ``budget``."""
    epochs = (budget or {}).get("epochs")
    return resolve_lm_config(name, vocab_size=vocab_size, size=size, recipe="compare", model={"tie_weights": True},
                             train={"epochs": epochs or 1000, "time_budget": (budget or {}).get("minutes"),
                                    "seed": seed, "patience": 0 if epochs else 3})


def model_config(name: str, size: str, vocab_size: int) -> dict:
    return _resolved(name, size, vocab_size)[0].to_dict()


def train_config(name: str, size: str, budget: dict, seed: int, model_cfg: dict) -> dict:
    """The training recipe of a compared model (``model_cfg``: its model config, whose size it was built at)."""
    return _resolved(name, size, model_cfg["vocab_size"], budget, seed)[1].to_dict()


def neural_settings(name: str, size: str, budget: dict, seed: int, vocab_size: int, fraction: float = 1.0) -> dict:
    mcfg, tcfg = _resolved(name, size, vocab_size, budget, seed)
    return {"model": name, "size": size, "budget": budget, "train_fraction": fraction,
            "model_config": mcfg.to_dict(), "train_config": tcfg.to_dict()}


def neural_row(name: str, settings: dict, data, checkpoint: Path, train: Optional[EncodedText] = None,
               log: Optional[Callable[[str], None]] = None, row_id: Optional[str] = None,
               warn: Optional[Callable[[str], None]] = None) -> tuple[dict, dict]:
    """Train (or continue training) one neural model and score it: ``(row, per-token log2 arrays)``.

    A minutes budget covers everything the model costs in this run: training, the validation
    passes and the final full-history scoring of valid and test (the trainer leaves room for
    it).  The row records ``budget_seconds`` and ``wall_seconds`` so the report shows both.
    ``warn`` gets the trainer's notes (budget too small, bf16 fallback) even when ``log`` is None.
    Raises KeyboardInterrupt when the training was interrupted (its checkpoint is kept).
    """
    train = data["train"] if train is None else train
    fraction = settings["train_fraction"]
    row = {
        "id": row_id or name,
        "family": "neural",
        "model": name,
        "label": f"{LABELS.get(name, name)} ({settings['size']})",
        "order": None,
        "settings": settings,
        "train_tokens": train.n_tokens,
        "train_seconds": None,
        "size": None,
        "size_unit": "parameters",
        "note": None,
        "error": None,
        "valid": None,
        "test": None,
        "is_distribution": True,
    }
    kind = kind_of(name)
    tcfg = TrainConfig.from_dict(settings["train_config"])
    def quiet(msg: str) -> None:
        if log is not None:
            log(msg)
        elif warn is not None and msg.startswith(("note:", "error:", "bf16", "epoch")):  # epoch: a validation
            warn(f"  [{row['id']}] {msg}")

    beat = {"last": time.perf_counter()}

    def heartbeat(tr, k: int) -> None:
        """A line every HEARTBEAT_SECONDS while a model trains, so a budget of minutes is not silence."""
        now = time.perf_counter()
        if log is None and warn is not None and now - beat["last"] >= HEARTBEAT_SECONDS:
            beat["last"] = now
            budget_s = "" if tcfg.time_budget is None else f" of {60 * tcfg.time_budget:.0f}"
            warn(f"  [{row['id']}] training: step {tr.step:,}, {tr.tokens:,} tokens, {tr.elapsed():.0f}{budget_s} s")

    budget = settings.get("budget") or {}
    row["budget"] = budget
    row["budget_seconds"] = 60.0 * budget["minutes"] if budget.get("minutes") else None
    # The final scoring reads valid and test with full history: the budget must leave time for it.
    budget_kw = dict(reserve_tokens=data["valid"].n_tokens + data["test"].n_tokens)
    data_info = {"corpus": data.name, "train_tokens": train.n_tokens}
    t0 = time.perf_counter()
    try:
        if checkpoint.exists():
            # An interrupted run of exactly these settings: continue it with what is left of the budget.
            done = _seconds_done(checkpoint)
            overrides = {}
            if tcfg.time_budget is not None:
                overrides["time_budget"] = max(0.05, tcfg.time_budget - done / 60.0)
            trainer = Trainer.resume(checkpoint, train.ids, data["valid"].ids, vocab=data.vocab, overrides=overrides,
                                     progress=False, log=quiet, data_info=data_info, clock_start=t0,
                                     on_batch_end=heartbeat, **budget_kw)
            row["note"] = f"continued an interrupted run ({done:.0f} s done before)"
        else:
            model = build_model(kind, settings["model_config"], seed=tcfg.seed)
            trainer = Trainer(model, data.vocab, train.ids, data["valid"].ids, tcfg, out=checkpoint, progress=False,
                              log=quiet, data_info=data_info, clock_start=t0, on_batch_end=heartbeat, **budget_kw)
            done = 0.0
        from neural.training.contention import thread_rule

        with thread_rule():  # --threads > 1: one torch thread while other processes use the cores
            result = trainer.fit()
    except InputError as exc:  # e.g. too few tokens for one batch
        row["error"] = str(exc)
        return row, {}
    if result.stopped == "interrupted":
        raise KeyboardInterrupt
    row["train_seconds"] = done + result.seconds
    row["stopped"] = result.stopped
    row["epochs"] = round(result.epochs_done, 3)
    row["steps"] = result.steps
    row["history"] = result.history
    best = best_path(checkpoint)
    model = load_model(best)[0] if best.exists() else trainer.model
    row["size"] = int(model.n_parameters())
    from neural.training.trainer import eval_threads

    with eval_threads(trainer.eval_threads):  # the thread count the trainer's last probe found faster
        arrays = _score(model, data, row)
    row["eval_seconds"] = time.perf_counter() - t0 - result.seconds
    # Wall time of everything this model cost: earlier (interrupted) runs' training plus this run.
    row["wall_seconds"] = done + time.perf_counter() - t0
    return row, arrays


# ---------------------------------------------------------------------------- models trained elsewhere
def inspect_checkpoint(path: Path, vocab) -> dict:
    """Check that ``path`` is a neural checkpoint over exactly ``vocab`` (never unpickled) and
    say what it holds: ``{"model", "weights", "settings"}``.

    ``weights`` is the file that will be scored: the best-validation sibling
    (``X.best.pt``) when ``path`` is a training checkpoint that has one, else ``path``.
    ``settings`` (the cache key's input) names both files by content hash, so a
    retrained checkpoint at the same path is scored again.
    """
    from corpora.download import sha256_file
    from neural.checkpoint import load_checkpoint, model_from_checkpoint

    path = Path(path)
    ckpt = load_checkpoint(path)
    theirs = Vocab.from_dict(ckpt["vocab"], path=str(path))
    if theirs != vocab:
        raise InputError(f"the checkpoint's vocabulary ({theirs.n_types:,} types) is not this corpus's "
                         f"({vocab.n_types:,} types): its perplexities would not be comparable", path=path,
                         fix="pass a checkpoint trained on this corpus (`ngramlm neural train CORPUS`), or compare "
                             "on the corpus and tokenizer it was trained with")
    model_from_checkpoint(ckpt, path=path)  # the weights fit the config
    weights = best_path(path) if best_path(path).exists() and not path.stem.endswith(".best") else path
    name = ckpt["model"].get("name")
    if name not in LABELS:
        raise InputError(f"the checkpoint holds an unknown model {name!r}", path=path,
                         fix=f"pass a checkpoint of one of {', '.join(LABELS)}")
    train = ckpt.get("train") or {}
    # What the row reports of the training run, kept here so the (large) file is read once.
    summary = {k: train.get(k) for k in ("config", "history", "step", "data")}
    summary["seconds"] = training_seconds(train) if train else None
    return {"model": name, "weights": weights, "train": summary, "settings": {
        "model": name, "adopted": str(path), "scored": str(weights), "sha256": sha256_file(path),
        "scored_sha256": sha256_file(weights) if weights != path else None,
        "model_config": dict(ckpt["model"]["config"]), "train_config": train.get("config"),
    }}


def adopted_row(info: dict, data) -> tuple[dict, dict]:
    """Score a model trained outside this run (``inspect_checkpoint``'s ``info``): its row and
    per-token log2 arrays.  Training time, epochs and history come from the checkpoint."""
    settings, name, train = info["settings"], info["model"], info["train"]
    path, weights = Path(settings["adopted"]), Path(info["weights"])
    history = train.get("history") or []
    tcfg = train.get("config") or {}
    budget = ({"minutes": tcfg["time_budget"]} if tcfg.get("time_budget") else
              {"epochs": tcfg["epochs"]} if tcfg.get("epochs") else {})
    model = load_model(weights, expect_vocab=data.vocab)[0]
    from corpora.textio import shown_path

    t0 = time.perf_counter()
    row = {
        "id": name, "family": "neural", "model": name, "label": f"{LABELS[name]} ({path.name})", "order": None,
        "settings": {**settings, "budget": budget, "size": "checkpoint"},
        "train_tokens": (train.get("data") or {}).get("train_tokens") or data["train"].n_tokens,
        "train_seconds": train["seconds"],
        "size": int(model.n_parameters()), "size_unit": "parameters",
        "note": f"trained outside this run ({shown_path(path)}); scored with {'its best-validation weights' if weights != path else 'these weights'}",
        "error": None, "valid": None, "test": None, "is_distribution": True,
        "stopped": "adopted", "epochs": history[-1]["epoch"] if history else None,
        "steps": train.get("step"), "history": history,
    }
    arrays = _score(model, data, row)
    row["eval_seconds"] = time.perf_counter() - t0
    # Scored only: no budget applies in this run; its cost here is the scoring.
    row["budget_seconds"], row["wall_seconds"] = None, row["eval_seconds"]
    return row, arrays


def _score(model, data, row: dict) -> dict:
    """Fill ``row["valid"]`` / ``row["test"]`` from a full-history pass; return the log2 arrays."""
    arrays = {}
    for split in ("valid", "test"):
        lp = token_log_probs(model, data[split].ids) * LOG2_E
        arrays[split] = lp
        total = float(lp.sum())
        n = len(lp)
        row[split] = {"tokens": n, "zero_probs": 0, "oovs": None, "log2prob": total, "ppl": 2.0 ** (-total / n),
                      "ppl_nonzero_events": 2.0 ** (-total / n), "bits_per_token": -total / n}
    return arrays


def _seconds_done(checkpoint: Path) -> float:
    from neural.checkpoint import load_checkpoint

    return training_seconds(load_checkpoint(checkpoint).get("train"))


# ---------------------------------------------------------------------------- attention
@torch.no_grad()
def attention_view(checkpoint: Path, ids: np.ndarray, labels: list) -> dict:
    """Per-layer, per-head attention of a Transformer reading ``</s>`` + ``ids``, as natural-log
    weights (``None`` where the causal mask hides a position), for the report's heatmap."""
    path = best_path(checkpoint) if best_path(checkpoint).exists() else checkpoint
    model = load_model(path)[0]
    block = model.config.block_size
    ids = np.asarray(ids[: block - 1], dtype=np.int64)
    x = torch.as_tensor(np.concatenate([[EOS_ID], ids]))[None, :]
    weights = model.attention_weights(x)  # list of (1, H, T, T)
    layers = []
    for w in weights:
        w = w[0].double()
        logw = torch.log(w.clamp_min(1e-30)).numpy()  # a weight that underflowed is shown as e^-69
        heads = []
        for h in range(logw.shape[0]):
            heads.append([[round(float(v), 4) if j <= i else None for j, v in enumerate(row)]
                          for i, row in enumerate(logw[h])])
        layers.append(heads)
    # The model reads the sentence-end id as its start symbol; the reader sees <s> there.
    return {"tokens": ["<s>"] + list(labels[: len(ids)]), "n_layers": len(layers),
            "n_heads": len(layers[0]) if layers else 0, "log_weights": layers,
            "note": "row i: where the model attends when reading token i (to predict token i+1); "
                    "the first token is the start symbol <s>"}


# ---------------------------------------------------------------------------- budgets, checked first
def scoring_seconds(name: str, size: str, data, probe_tokens: int = 2000) -> float:
    """Seconds this machine needs to evaluate an untrained ``name`` model of ``size`` as a budgeted
    row does after training: one validation pass (8 rows) and the full-history scoring of valid
    and test.  Timed on a prefix of the validation text and extrapolated (the cost is linear)."""
    model = build_model(kind_of(name), model_config(name, size, len(data.vocab)), seed=0)
    ids = data["valid"].ids[:probe_tokens]
    if len(ids) < 2:
        return 0.0
    from neural.evaluation import evaluate

    t0 = time.perf_counter()
    token_log_probs(model, ids)
    t1 = time.perf_counter()
    evaluate(model, ids, batch_size=COMPARE_TRAIN_PRESETS[kind_of(name)].eval_batch_size)
    t2 = time.perf_counter()
    n_valid, n_test = data["valid"].n_tokens, data["test"].n_tokens
    return ((t1 - t0) * (n_valid + n_test) + (t2 - t1) * n_valid) / len(ids)


def budget_notes(settings, data, adopted_models: tuple = ()) -> list:
    """Before anything is trained: one note per minutes budget that cannot even pay for the scoring.

    A budget covers everything a model costs in the run (training, validation, scoring of valid
    and test), and the trainer keeps it wherever the scoring leaves room to train.  Where the
    scoring alone takes longer, no budget can hold; the run goes on (one batch is trained) and
    the note says so up front, with the smallest budget that would hold, instead of surprising
    the user afterwards.  The report shows every row's budget against its actual cost.
    """
    if settings.neural_epochs is not None or not (settings.neural or adopted_models):
        return []
    torch.set_num_threads(settings.threads)
    trained = [n for n in settings.neural if n not in adopted_models]
    # The learning curve retrains the best neural model, which may be any of them.
    candidates = list(dict.fromkeys(trained + list(adopted_models)))
    cost = {name: scoring_seconds(name, settings.neural_size, data) for name in candidates}
    checks = [("--neural-minutes", trained, settings.main_budget()["minutes"], 1)]
    if settings.curve:
        checks.append(("--curve-minutes", candidates, settings.curve_budget()["minutes"], len(settings.curve)))
    notes = []
    for option, names, minutes, times in checks:
        for name in names:
            need = cost[name]
            if need > 0.8 * minutes * 60:  # 20 % of the budget is left for training at least a little
                holds = math.ceil(need / 0.8 / 60 * 10) / 10
                rows = ("its row will overshoot" if option == "--neural-minutes" else
                        f"if it is the best neural model, each of its {times} learning-curve rows will overshoot")
                notes.append(f"note: {LABELS.get(name, name)} ({settings.neural_size}) needs about {need:.0f} s on this "
                             f"machine just to score valid and test, more than {option} {minutes:g} allows; {rows} "
                             f"(pass {option} {holds:g} or more for a budget that holds, or a smaller --neural-size)")
    return notes
