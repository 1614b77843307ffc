"""Fine-tuning BERT on a sentence-pair task built from a corpus, against the pretrained model and a scratch one.

A task is built from one split's consecutive sentences (the lines, empty ones dropped, as
pretraining reads them), seeded and *exactly* balanced: an anchor sentence ``i`` is drawn for
each example, half of the anchors get a positive pair and half a negative one.

* ``nsp`` -- "is B the sentence that follows A in the text?"  Positive ``(i, i+1)``; negative
  ``(i, j)`` with ``j`` any other sentence of the same split but ``i`` and ``i+1``.  Pretraining's
  next-sentence objective, read as a downstream task.
* ``order`` -- "are A and B in the text's order?"  Positive ``(i, i+1)``; negative
  ``(i+1, i)``, the same two sentences swapped (ALBERT's sentence-order prediction, Lan et al.
  2020).  Pretraining never asked this: a random B differs in topic, a swapped one does not.

Three models answer the test examples (``ngramlm bert finetune``):

* **zero-shot** -- the pretrained NSP head (dense + tanh + 2-way layer on ``[CLS]``): label 1
  when it says "B follows A".  No training.
* **fine-tuned** -- the pretrained encoder plus a fresh :class:`ClassifierHead` on ``[CLS]``,
  every weight trained on the task's training examples (:func:`finetune`).
* **scratch** -- the same architecture from random weights, trained on the same batches in the
  same order, with the same head initialisation, steps and learning rate: it differs from the
  fine-tuned model only in the encoder's starting weights, so the gap is what pretraining gave.

:func:`finetune` keeps the weights of the best validation accuracy (checked every
``eval_every`` steps and at the end) and writes them to the checkpoint atomically each time
they improve: the toolkit's BERT checkpoint (``kind`` bert, so ``bert pppl``/``embed`` read its
encoder) whose ``train`` entry holds ``classifier`` -- the head's config and weights -- and the
:class:`FinetuneConfig`.  It is read back with ``torch.load(weights_only=True)``
(:func:`load_classifier`).  Ctrl-C stops after the current batch, keeping the best weights.
"""
from __future__ import annotations

import copy
import math
import time
from dataclasses import dataclass, field, replace
from typing import Callable, Optional, Sequence

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from corpora.errors import InputError

from ..config import ConfigBase, check_positive, check_probability
from ..transformer import init_weights
from .model import BertLM, pack_pairs

TASKS = {
    "nsp": "is B the sentence that follows A? Negatives: another sentence of the same split",
    "order": "are A and B in text order? Negatives: the same two consecutive sentences swapped",
}
N_CLASSES = 2  # every task here is a yes/no question: label 1 = yes


# ---------------------------------------------------------------------------- the task
def pair_examples(n_sentences: int, task: str, rng: np.random.Generator, *,
                  max_examples: Optional[int] = None) -> np.ndarray:
    """``(n, 3)`` int64 rows ``(a, b, label)`` over sentences ``0 .. n_sentences-1``, exactly balanced.

    Anchors are the sentences that have a successor, in a random order; the first half of them
    (``n // 2``) give positives ``(i, i+1, 1)`` and the second half negatives (``nsp``:
    ``(i, j, 0)`` with ``j`` uniform over the other sentences but ``i + 1``; ``order``:
    ``(i+1, i, 0)``).  ``n`` is the number of anchors rounded down to even, or ``max_examples``
    (rounded down to even) if fewer.  The rows are returned in a random order.

    >>> rows = pair_examples(7, "order", np.random.default_rng(0))
    >>> len(rows), int(rows[:, 2].sum())              # 6 anchors: 3 positives, 3 negatives
    (6, 3)
    >>> all(b == a + 1 if y else a == b + 1 for a, b, y in rows.tolist())
    True
    """
    if task not in TASKS:
        raise InputError(f"unknown fine-tuning task {task!r}", fix=f"use --task {' or '.join(TASKS)}")
    if n_sentences < 3:
        raise InputError(f"{n_sentences} sentences are too few for sentence-pair examples",
                         fix="give a text with at least 3 non-empty lines in every split")
    anchors = rng.permutation(n_sentences - 1)
    n = len(anchors) if max_examples is None else min(len(anchors), max_examples)
    n -= n % 2
    if n == 0:
        raise InputError("0 examples asked for", fix="ask for at least 2 examples")
    anchors = anchors[:n]
    half = n // 2
    pos, neg = anchors[:half], anchors[half:]
    rows = np.empty((n, 3), dtype=np.int64)
    rows[:half] = np.stack([pos, pos + 1, np.ones(half, np.int64)], axis=1)
    if task == "nsp":
        j = rng.integers(0, n_sentences - 2, size=half)  # n - 2 choices: every sentence but i and i + 1
        j = j + np.where(j >= neg, 2, 0)
        rows[half:] = np.stack([neg, j, np.zeros(half, np.int64)], axis=1)
    else:
        rows[half:] = np.stack([neg + 1, neg, np.zeros(half, np.int64)], axis=1)
    return rows[rng.permutation(n)]


@dataclass
class PairTask:
    """One split's examples: ``examples`` rows ``(a, b, label)`` index ``sentences`` (id arrays)."""

    task: str
    split: str
    sentences: Sequence[np.ndarray]
    examples: np.ndarray

    @property
    def labels(self) -> np.ndarray:
        return self.examples[:, 2]

    def __len__(self) -> int:
        return len(self.examples)

    def describe(self) -> str:
        return f"{self.split} {len(self):,} examples ({int(self.labels.sum()):,} positive)"


def build_task(task: str, sentences: Sequence[np.ndarray], *, split: str, seed: int,
               max_examples: Optional[int] = None) -> PairTask:
    """The ``task``'s examples on one split's sentences (see :func:`pair_examples`); seeded per split, so
    the train, valid and test examples are drawn independently and reproducibly."""
    salt = {"train": 0, "valid": 1, "test": 2}.get(split, 3)
    rng = np.random.default_rng([seed, salt])
    return PairTask(task, split, sentences, pair_examples(len(sentences), task, rng, max_examples=max_examples))


# ---------------------------------------------------------------------------- the classifier
@dataclass
class HeadConfig(ConfigBase):
    """A classification head on the ``[CLS]`` vector: dense + tanh (BERT's pooler), dropout, linear."""

    d_model: int
    n_classes: int = N_CLASSES
    dropout: float = 0.1

    def validate(self) -> None:
        check_positive("d_model", self.d_model, "d_model")
        check_positive("n_classes", self.n_classes, "n_classes")
        check_probability("dropout", self.dropout, "--head-dropout")


class ClassifierHead(nn.Module):
    """``h[:, 0]`` (the ``[CLS]`` position of the encoder output) -> ``(B, n_classes)`` logits."""

    def __init__(self, config: HeadConfig) -> None:
        super().__init__()
        config.validate()
        self.config = config
        self.dense = nn.Linear(config.d_model, config.d_model)
        self.drop = nn.Dropout(config.dropout)
        self.out = nn.Linear(config.d_model, config.n_classes)
        self.apply(init_weights)

    def forward(self, h: torch.Tensor) -> torch.Tensor:
        return self.out(self.drop(torch.tanh(self.dense(h[:, 0]))))


class BertClassifier(nn.Module):
    """A BERT encoder (:class:`~neural.bert.model.BertLM`; its MLM and NSP heads are not used) + a head."""

    def __init__(self, bert: BertLM, head: ClassifierHead) -> None:
        super().__init__()
        if head.config.d_model != bert.config.d_model:
            raise InputError(f"a head of width {head.config.d_model} on an encoder of width {bert.config.d_model}",
                             fix="build the head with HeadConfig(d_model=bert.config.d_model)")
        self.bert, self.head = bert, head

    def forward(self, ids: torch.Tensor, segments: torch.Tensor) -> torch.Tensor:
        return self.head(self.bert.encode(ids, segments))  # (B, n_classes)

    def trained_parameters(self) -> list:
        """The weights a fine-tuning step changes: the encoder's and the head's (the MLM and NSP heads get no
        gradient, so they are left out of the optimizer and stay as pretrained)."""
        b = self.bert
        unused = {id(p) for m in (b.mlm_dense, b.mlm_ln, b.pooler, b.nsp) for p in m.parameters()}
        unused.add(id(b.mlm_bias))
        return [p for p in self.parameters() if p.requires_grad and id(p) not in unused]


def classifier_for(bert: BertLM, *, head_dropout: float = 0.1, seed: Optional[int] = None) -> BertClassifier:
    """``bert`` plus a fresh head (its initial weights drawn from ``seed``, so two classifiers built with one
    seed start from the same head whatever their encoders)."""
    if seed is not None:
        torch.manual_seed(seed)
    return BertClassifier(bert, ClassifierHead(HeadConfig(d_model=bert.config.d_model, dropout=head_dropout)))


def random_like(bert: BertLM, seed: int) -> BertLM:
    """An encoder of ``bert``'s exact architecture with fresh random weights (the no-pretraining baseline)."""
    torch.manual_seed(seed)
    return BertLM(replace(bert.config))


# ---------------------------------------------------------------------------- predictions
def _batches(task: PairTask, rows: np.ndarray, batch_size: int, vocab_size: int, max_len: int):
    for a in range(0, len(rows), batch_size):
        chunk = [tuple(int(x) for x in r) for r in rows[a:a + batch_size]]
        yield pack_pairs(chunk, task.sentences, vocab_size=vocab_size, max_len=max_len)


@torch.no_grad()
def predict(model, task: PairTask, *, batch_size: int = 128) -> np.ndarray:
    """Predicted labels (0/1) of every example of ``task``, in order.

    ``model`` is a :class:`BertClassifier`, or a pretrained :class:`BertLM` whose NSP head answers
    zero-shot (label 1: "B follows A").  Examples are packed in length order (less padding); the
    answers come back in the task's order.
    """
    bert = model.bert if isinstance(model, BertClassifier) else model
    if not isinstance(bert, BertLM):
        raise InputError(f"cannot predict with a {type(model).__name__}", fix="pass a BertClassifier or a BertLM")
    was_training = model.training
    model.eval()
    ex = task.examples
    lengths = np.array([len(task.sentences[a]) + len(task.sentences[b]) for a, b, _ in ex])
    order = np.argsort(lengths, kind="stable")
    out = np.empty(len(ex), dtype=np.int64)
    done = 0
    for ids, seg, _ in _batches(task, ex[order], batch_size, bert.config.vocab_size, bert.config.max_len):
        if isinstance(model, BertClassifier):
            logits = model(ids, seg)
        else:
            logits = bert.nsp_logits(bert.encode(ids, seg))
        out[order[done:done + len(ids)]] = logits.argmax(-1).numpy()
        done += len(ids)
    model.train(was_training)
    return out


def accuracy(model, task: PairTask, **kw) -> float:
    return float(np.mean(predict(model, task, **kw) == task.labels))


# ---------------------------------------------------------------------------- fine-tuning
@dataclass
class FinetuneConfig(ConfigBase):
    """How a classifier is fine-tuned (stored in the checkpoint's ``train`` entry)."""

    task: str = "nsp"
    batch_size: int = 32  # examples per step
    # AdamW peak rate.  BERT-base takes 2e-5..5e-5; these encoders are 100-1000 times smaller.  On PTB the tiny
    # preset learnt NSP with 2e-3 over 3 epochs and stayed at chance with 5e-4 over 1 (docs/bert.md).
    lr: float = 2e-3
    warmup: float = 0.1  # share of the steps with a linear warm-up; then linear decay to 0, as BERT fine-tunes
    weight_decay: float = 0.01
    clip: float = 1.0  # max global gradient norm (0 = off)
    epochs: int = 3  # passes over the training examples
    max_steps: Optional[int] = None  # fewer steps than the epochs give
    train_examples: Optional[int] = None  # use only this many training examples (balanced); None: all
    eval_every: int = 500  # steps between validations (the best weights are kept)
    head_dropout: float = 0.1
    seed: int = 1234  # examples, batch order, the head's initial weights, dropout

    def validate(self) -> None:
        if self.task not in TASKS:
            raise InputError(f"unknown fine-tuning task {self.task!r}", fix=f"use --task {' or '.join(TASKS)}")
        check_positive("batch_size", self.batch_size, "--batch-size")
        check_positive("epochs", self.epochs, "--epochs")
        check_positive("eval_every", self.eval_every, "--eval-every")
        check_probability("head_dropout", self.head_dropout, "--head-dropout")
        if not self.lr > 0:
            raise InputError(f"the learning rate must be > 0, got {self.lr}", fix="use e.g. --lr 2e-3")
        if not 0.0 <= self.warmup < 1.0:
            raise InputError(f"the warm-up share must be in [0, 1), got {self.warmup}", fix="use e.g. --warmup 0.1")
        if self.max_steps is not None:
            check_positive("max_steps", self.max_steps, "--max-steps")
        if self.train_examples is not None:
            check_positive("train_examples", self.train_examples, "--train-examples")
            if self.train_examples < 2:
                raise InputError("a balanced task needs at least 2 training examples", fix="pass --train-examples 2+")

    def total_steps(self, n_examples: int) -> int:
        steps = self.epochs * math.ceil(n_examples / self.batch_size)
        return steps if self.max_steps is None else min(steps, self.max_steps)


def _lr_at(cfg: FinetuneConfig, step: int, total: int) -> float:
    warm = max(1, round(cfg.warmup * total)) if cfg.warmup > 0 else 0
    if step < warm:
        return cfg.lr * (step + 1) / warm
    return cfg.lr * max(0.0, (total - step) / max(1, total - warm))


@dataclass
class FinetuneResult:
    stopped: str  # steps | interrupted
    steps: int
    seconds: float  # the training loop, its validations included
    examples: int  # training examples seen (with repeats over epochs)
    best_step: int  # the step whose weights were kept (its validation was the best; the first wins a tie)
    best_valid_accuracy: float
    history: list = field(default_factory=list)
    checkpoint: Optional[str] = None


def finetune(model: BertClassifier, train: PairTask, valid: PairTask, cfg: FinetuneConfig, *, out=None, vocab=None,
             log: Callable[[str], None] = print, info: Optional[dict] = None) -> FinetuneResult:
    """Train every weight of ``model`` (encoder + head) by cross-entropy on ``train``'s examples.

    The batches are a fixed function of ``cfg.seed`` (the same for any encoder).  Validation
    accuracy on ``valid`` is measured every ``cfg.eval_every`` steps and at the end (not before
    training: an untrained head answers one class and would win ties at exactly 0.5); the best
    weights are kept, restored at the end, and written to ``out`` (atomically, with ``vocab`` and
    ``info``) whenever they improve.  Runs under the shared-cores thread rule; Ctrl-C
    stops after the current batch with the best weights restored (``stopped == "interrupted"``).
    """
    from ..training.contention import thread_rule

    cfg.validate()
    if train.task != cfg.task or valid.task != cfg.task:
        raise InputError(f"the examples are of task {train.task!r}/{valid.task!r}, the config's is {cfg.task!r}",
                         fix="build the examples with build_task(cfg.task, ...)")
    if out is not None and vocab is None:
        raise InputError("a checkpoint needs the vocabulary", fix="pass vocab=")
    torch.manual_seed(cfg.seed)  # dropout masks
    rng = np.random.default_rng([cfg.seed, 7])  # batch order only: the same batches for every encoder
    params = model.trained_parameters()
    opt = torch.optim.AdamW([{"params": [p for p in params if p.dim() >= 2], "weight_decay": cfg.weight_decay},
                             {"params": [p for p in params if p.dim() < 2], "weight_decay": 0.0}],
                            lr=cfg.lr, betas=(0.9, 0.999))
    V, L = model.bert.config.vocab_size, model.bert.config.max_len
    total = cfg.total_steps(len(train))
    t0 = time.perf_counter()
    step, seen, stopped = 0, 0, None
    history: list = []
    best = {"accuracy": -1.0, "step": 0, "state": None}

    def validate() -> None:
        acc = accuracy(model, valid)
        history.append({"step": step, "seconds": round(time.perf_counter() - t0, 2), "valid_accuracy": acc})
        log(f"step {step:6d} | {time.perf_counter() - t0:7.1f} s | valid accuracy {acc:.4f}")
        if acc > best["accuracy"]:
            best.update(accuracy=acc, step=step, state=copy.deepcopy(model.state_dict()))
            if out is not None:
                save_classifier(out, model, vocab, _train_entry(cfg, step, time.perf_counter() - t0, history, info,
                                                                stopped, acc))

    with thread_rule(torch.get_num_threads(), log=log):
        try:
            model.train()
            while step < total:
                order = rng.permutation(len(train))
                for a in range(0, len(order), cfg.batch_size):
                    if step >= total:
                        break
                    rows = [tuple(int(x) for x in r) for r in train.examples[order[a:a + cfg.batch_size]]]
                    ids, seg, labels = pack_pairs(rows, train.sentences, vocab_size=V, max_len=L)
                    for group in opt.param_groups:
                        group["lr"] = _lr_at(cfg, step, total)
                    loss = F.cross_entropy(model(ids, seg), labels)
                    value = float(loss.detach())
                    if not math.isfinite(value):
                        raise InputError(f"the fine-tuning loss became {value} at step {step}", fix="lower --lr")
                    opt.zero_grad(set_to_none=True)
                    loss.backward()
                    if cfg.clip > 0:
                        torch.nn.utils.clip_grad_norm_(params, cfg.clip)
                    opt.step()
                    step, seen = step + 1, seen + len(rows)
                    if step % cfg.eval_every == 0 or step == total:
                        validate()
                        model.train()
            stopped = "steps"
        except KeyboardInterrupt:
            stopped = "interrupted"
        if not history:  # stopped before the first validation: the weights as they are
            validate()
    model.eval()
    model.load_state_dict(best["state"])
    seconds = time.perf_counter() - t0
    if out is not None:  # record how it stopped (the weights are the best ones, already written)
        save_classifier(out, model, vocab, _train_entry(cfg, best["step"], seconds, history, info, stopped,
                                                        best["accuracy"]))
    return FinetuneResult(stopped=stopped, steps=step, seconds=seconds, examples=seen, best_step=best["step"],
                          best_valid_accuracy=best["accuracy"], history=history,
                          checkpoint=None if out is None else str(out))


def _train_entry(cfg: FinetuneConfig, step: int, seconds: float, history: list, info: Optional[dict],
                 stopped: Optional[str], valid_accuracy: float) -> dict:
    info = dict(info or {})
    return {"finetune": cfg.to_dict(), "step": step, "seconds": seconds, "history": list(history),
            "valid_accuracy": valid_accuracy, "stopped": stopped, "data": info.pop("data", {}), **info}


# ---------------------------------------------------------------------------- checkpoints
def save_classifier(path, model: BertClassifier, vocab, train: Optional[dict] = None) -> None:
    """The encoder as the toolkit's BERT checkpoint (atomic write, :func:`neural.checkpoint.save_checkpoint`)
    with the head in ``train["classifier"]``: its :class:`HeadConfig` and weights (plain tensors)."""
    from ..checkpoint import save_checkpoint

    entry = dict(train or {})
    entry["classifier"] = {"config": model.head.config.to_dict(), "state_dict": model.head.state_dict()}
    save_checkpoint(path, model.bert, vocab, entry)


def load_classifier(path) -> tuple:
    """``(classifier, vocab, FinetuneConfig or None, checkpoint dict)`` of a file written by
    :func:`save_classifier` (``torch.load(weights_only=True)``); any other file is an InputError naming it."""
    from ..checkpoint import load_checkpoint, model_from_checkpoint

    ckpt = load_checkpoint(path)
    info = ckpt.get("model") or {}
    if info.get("kind") != "bert":
        raise InputError(f"the checkpoint holds a {info.get('name', info.get('kind'))} model, not a fine-tuned BERT",
                         path=path, fix="pass a file written by `ngramlm bert finetune -o`")
    head = (ckpt.get("train") or {}).get("classifier")
    if not isinstance(head, dict) or "config" not in head or "state_dict" not in head:
        raise InputError("the checkpoint is a pretrained BERT without a classification head", path=path,
                         fix="fine-tune it first: `ngramlm bert finetune CKPT -o tuned.pt`")
    bert, vocab = model_from_checkpoint(ckpt, path=path)
    try:
        model = BertClassifier(bert, ClassifierHead(HeadConfig.from_dict(dict(head["config"]))))
        model.head.load_state_dict(head["state_dict"])
    except (KeyError, TypeError, RuntimeError) as exc:
        raise InputError(f"the classification head does not fit its config ({str(exc).splitlines()[0][:200]})",
                         path=path, fix="the file is corrupt; fine-tune again") from None
    cfg = ckpt["train"].get("finetune")
    model.eval()
    return model, vocab, (FinetuneConfig.from_dict(dict(cfg)) if cfg else None), ckpt
