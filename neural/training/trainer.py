"""A model-agnostic training loop with checkpoints, resumption and early stopping.

:class:`Trainer` knows nothing about architectures: it calls
``model(x, y, state)`` and passes the returned state on when the batch scheme is
sequential.  Per step: forward, a finiteness check of the loss, backward, clipping
of the global gradient norm, optimizer step.  Per epoch: a full validation pass, the
learning-rate schedule, the checkpoint (and the best one), early stopping.

A run is repeatable from its seed, and resumable exactly: the checkpoint stores
the position inside the epoch, the carried recurrent state, the optimizer and
schedule state and the RNG state, and the batches of an epoch are a function of
(seed, epoch).  Training ``2`` epochs in one go or ``1 + 1`` with a resume gives the
same weights.

Stopping: Ctrl-C or SIGTERM (once) finishes the current batch, writes the checkpoint
and returns; a second Ctrl-C aborts at once.  An evaluation pass (the rate probe, a
validation) is not finished: the signal stops it at once, and the checkpoint written is
the one after the last batch (a resumed run does that validation).  ``time_budget`` is wall-clock time for
everything the model costs: it starts at ``clock_start`` (the caller's start, so data
loading counts) and covers training, the validation passes and the final scoring of
``reserve_tokens`` tokens the caller announces.  The trainer times the batches and an
evaluation probe; its :class:`~neural.training.budget.BudgetPolicy` stops the run when the
next batch plus the final validation plus that reserve would overrun the budget; then it
validates and writes the checkpoint.
A non-finite loss or gradient stops with :class:`TrainingDiverged` and leaves the
last good checkpoint untouched.
"""
from __future__ import annotations

import contextlib
import logging
import math
import os
import signal
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Optional

import numpy as np
import torch
from tqdm import tqdm

from corpora.errors import ToolkitError
from corpora.textio import OutputError, atomic_write_bytes
from corpora.vocab import PAD_ID, Vocab

from ..base import LanguageModel
from ..checkpoint import best_path, checkpoint_bytes, load_checkpoint, model_from_checkpoint, training_seconds
from ..config import TrainConfig
from ..data import detach_state, make_batches, with_start
from ..evaluation import evaluate
from ..regularize import WeightAverage
from .budget import BudgetPolicy

logger = logging.getLogger("neural.training.trainer")


@contextlib.contextmanager
def eval_threads(n: Optional[int]):
    """Run the block with ``n`` torch threads (None: unchanged), then restore the count."""
    before = torch.get_num_threads()
    if n is not None and n != before:
        torch.set_num_threads(n)
    try:
        yield
    finally:
        if torch.get_num_threads() != before:
            torch.set_num_threads(before)


class _StopNow(KeyboardInterrupt):
    """Raised by the signal handler inside an evaluation pass (caught in :meth:`Trainer.fit`)."""


class TrainingDiverged(ToolkitError):
    """The loss or the gradient became NaN/inf."""


@dataclass
class TrainResult:
    stopped: str  # finished | early_stop | time_budget | interrupted | max_batches
    epochs_done: float
    steps: int
    tokens: int
    seconds: float
    best_val_ppl: float
    last_val_ppl: Optional[float]
    history: list = field(default_factory=list)
    checkpoint: Optional[str] = None
    best_checkpoint: Optional[str] = None

    @property
    def tokens_per_second(self) -> float:
        return self.tokens / self.seconds if self.seconds > 0 else 0.0


def rescue_path(out: os.PathLike | str) -> Path:
    """Where a checkpoint goes when its own path cannot be written: ``runs/rescued/`` beside the
    working folder, else the system temp folder."""
    import tempfile

    name = Path(out).name or "model.pt"
    for folder in (Path("runs") / "rescued", Path(tempfile.gettempdir()) / "ngramlm-rescued"):
        try:
            folder.mkdir(parents=True, exist_ok=True)
            if os.access(folder, os.W_OK):
                return folder / name
        except OSError:
            continue
    return Path(tempfile.gettempdir()) / name


def make_optimizer(model: LanguageModel, cfg: TrainConfig) -> torch.optim.Optimizer:
    params = [p for p in model.parameters() if p.requires_grad]
    if cfg.optimizer == "sgd":
        return torch.optim.SGD(params, lr=cfg.lr, momentum=cfg.momentum, weight_decay=cfg.weight_decay)
    # Decay only matrices: biases and LayerNorm gains are left alone.
    decay = [p for p in params if p.dim() >= 2]
    rest = [p for p in params if p.dim() < 2]
    return torch.optim.AdamW([{"params": decay, "weight_decay": cfg.weight_decay},
                              {"params": rest, "weight_decay": 0.0}], lr=cfg.lr, betas=(0.9, 0.99))


class Trainer:
    """Train ``model`` on ``train_ids`` and validate on ``valid_ids`` (``EncodedText.ids`` arrays)."""

    translator = False  # what resume() accepts: a language model (a Seq2SeqTrainer: a translator)

    def __init__(self, model: LanguageModel, vocab: Vocab, train_ids: np.ndarray, valid_ids: np.ndarray,
                 config: TrainConfig, *, out: Optional[os.PathLike | str] = None, progress: bool = True,
                 log: Optional[Callable[[str], None]] = None, data_info: Optional[dict] = None,
                 on_batch_end: Optional[Callable[["Trainer", int], None]] = None,
                 reserve_tokens: int = 0, clock_start: Optional[float] = None) -> None:
        config.validate()
        self.model, self.vocab, self.cfg = model, vocab, config
        self._set_data(train_ids, valid_ids)
        self.out = None if out is None else Path(out)
        self.progress = progress
        self.log = log or logger.info
        self.data_info = data_info or {}
        self.on_batch_end = on_batch_end
        # The time budget's timings and decisions: tokens the caller scores (full history) after training,
        # and the perf_counter() value the budget is measured from (None: the start of fit()).
        self.budget = BudgetPolicy(reserve_tokens=reserve_tokens, clock_start=clock_start, log=self.log)
        self.autocast = False  # bf16 autocast actually used (resolved in fit(): probed once per machine)
        self.optimizer = make_optimizer(model, config)
        if (config.ar or config.tar) and not hasattr(model, "activation_penalty"):
            from corpora.errors import InputError

            raise InputError(f"--ar/--tar regularise a recurrent model's activations; {type(model).__name__} has none",
                             fix="drop --ar and --tar for this model")
        self.average = WeightAverage(model)  # NT-ASGD's running mean (cfg.average == "nt"), off until triggered
        # Mutable training state -- everything a checkpoint must hold to continue exactly.
        self.position = {"epoch": 0, "batch": 0}
        self.step = 0
        self.tokens = 0
        self.lr = config.lr  # the plateau schedule's current base rate
        self.bad_epochs = 0
        self.best_val_ppl = math.inf
        self.history: list = []
        self.carry_state = None
        self.last_good: Optional[str] = None  # epoch/position of the last checkpoint written
        self._resumed = False
        self._stop_requested = False
        self._abortable = False  # inside an evaluation pass that a signal stops at once (see _until_stopped)
        self.write_failure: Optional[str] = None  # set when --out could not be written (see save())
        # Training seconds of earlier fit() calls (a resumed run's), so the history and the
        # checkpoint count the whole run's time, also when it was interrupted inside an epoch.
        self.seconds_done = 0.0
        self._fit_t0: Optional[float] = None

    # ------------------------------------------------------------------ data (overridden for other data)
    def _set_data(self, train, valid) -> None:
        self.train_stream = with_start(train)
        self.valid_ids = valid

    def epoch_batches(self, epoch: int):
        """The minibatches of ``epoch``: ``len()``, ``[k] -> (x, y)`` and ``carries_state``."""
        return make_batches(self.cfg.batch_scheme, self.train_stream, self.cfg.batch_size, self.cfg.bptt,
                            seed=self.cfg.seed, epoch=epoch)

    def n_valid_tokens(self) -> int:
        return len(self.valid_ids)

    def elapsed(self) -> float:
        """Training seconds of the whole run so far (earlier fits included)."""
        running = 0.0 if self._fit_t0 is None else time.perf_counter() - self._fit_t0
        return self.seconds_done + running

    # ------------------------------------------------------------------ resuming
    @classmethod
    def resume(cls, path: os.PathLike | str, train_ids: np.ndarray, valid_ids: np.ndarray, *,
               vocab: Optional[Vocab] = None, expect_name: Optional[str] = None, overrides: Optional[dict] = None,
               out: Optional[os.PathLike | str] = None, **kwargs) -> "Trainer":
        """Continue the run saved in ``path``.  ``overrides`` may change e.g. ``epochs`` or ``time_budget``."""
        ckpt = load_checkpoint(path)
        if not ckpt.get("train"):
            from corpora.errors import InputError

            raise InputError("the checkpoint holds no training state (written for inference only)", path=path,
                             fix="start a new run instead of --resume")
        model, ckpt_vocab = model_from_checkpoint(ckpt, path=path, expect_name=expect_name, expect_vocab=vocab,
                                                  translator=cls.translator)
        state = ckpt["train"]
        cfg = TrainConfig.from_dict({**state["config"], **(overrides or {})})
        trainer = cls(model, ckpt_vocab, train_ids, valid_ids, cfg, out=out or path, **kwargs)
        trainer.optimizer.load_state_dict(state["optimizer"])
        trainer.position = dict(state["position"])
        trainer.step, trainer.tokens = int(state["step"]), int(state["tokens"])
        trainer.lr, trainer.bad_epochs = float(state["schedule"]["lr"]), int(state["schedule"]["bad_epochs"])
        trainer.best_val_ppl = float(state["best_val_ppl"])
        trainer.history = list(state["history"])
        trainer.seconds_done = training_seconds(state)
        trainer.carry_state = None if state.get("carry_state") is None else tuple(state["carry_state"])
        trainer.average.load(state.get("average"))
        trainer.data_info = dict(state.get("data") or trainer.data_info)
        torch.set_rng_state(state["rng"]["torch"])
        trainer._resumed = True
        trainer.last_good = f"{path} (epoch {trainer.position['epoch']}, batch {trainer.position['batch']})"
        return trainer

    # ------------------------------------------------------------------ checkpoints
    def training_state(self) -> dict:
        return {
            "config": self.cfg.to_dict(),
            "optimizer": self.optimizer.state_dict(),
            "schedule": {"lr": self.lr, "bad_epochs": self.bad_epochs},
            "position": dict(self.position),
            "step": self.step,
            "tokens": self.tokens,
            "best_val_ppl": self.best_val_ppl,
            "history": list(self.history),
            "seconds": self.elapsed(),  # unrounded: resumed runs add it to their own time
            "rng": {"torch": torch.get_rng_state()},
            "carry_state": _copied_state(self.carry_state),
            "data": dict(self.data_info),
            "average": self.average.state(),
        }

    def save(self, *, best: bool = False) -> None:
        if self.out is None:
            return
        data = checkpoint_bytes(self.model, self.vocab, self.training_state())
        best_data = data
        if best and self.average.active:  # the best checkpoint holds the averaged weights it was validated with
            with self.average.swapped_in():
                best_data = checkpoint_bytes(self.model, self.vocab, self.training_state())
        try:
            atomic_write_bytes(self.out, data)
            if best:
                atomic_write_bytes(best_path(self.out), best_data)
        except OutputError as exc:
            # The destination went bad during training (disk full, unmounted, permissions):
            # never lose the trained weights.  Save them in a rescue folder and go on there.
            rescue = rescue_path(self.out)
            atomic_write_bytes(rescue, data)
            atomic_write_bytes(best_path(rescue), data)
            self.write_failure = f"{exc}; the checkpoint was saved to {rescue} instead"
            self.log(f"error: {self.write_failure}")
            self.out = rescue
        self.last_good = f"{self.out} (epoch {self.position['epoch']}, batch {self.position['batch']})"

    # ------------------------------------------------------------------ schedule
    def _batches_per_epoch(self) -> int:
        b = self.epoch_batches(0)
        return len(b) if self.cfg.max_batches is None else min(len(b), self.cfg.max_batches)

    def _lr_now(self, total_steps: int) -> float:
        cfg = self.cfg
        if cfg.schedule != "cosine":
            return self.lr
        if self.step < cfg.warmup_steps:
            return cfg.lr * (self.step + 1) / cfg.warmup_steps
        progress = min(1.0, (self.step - cfg.warmup_steps) / max(1, total_steps - cfg.warmup_steps))
        floor = cfg.lr * cfg.min_lr_ratio
        return floor + (cfg.lr - floor) * 0.5 * (1 + math.cos(math.pi * progress))

    def _end_of_epoch_schedule(self, improved: bool) -> None:
        if improved:
            self.bad_epochs = 0
            return
        if self.cfg.average == "nt" and not self.average.active:
            # NT-ASGD's trigger: instead of the first decay, average the weights from here on.
            self.average.start()
            self.log(f"valid ppl did not improve: averaging the weights from step {self.step} on (NT-ASGD), "
                     f"lr stays {self.lr:g}")
            return
        self.bad_epochs += 1
        if self.cfg.schedule == "plateau":
            self.lr *= self.cfg.lr_decay

    # ------------------------------------------------------------------ stopping
    def request_stop(self) -> None:
        """Finish the current batch, write the checkpoint and return (what Ctrl-C does)."""
        self._stop_requested = True

    def _install_signal_handlers(self) -> dict:
        if threading.current_thread() is not threading.main_thread():
            return {}
        previous = {}

        def on_signal(signum, frame):
            if self._stop_requested and signum == signal.SIGINT:
                raise KeyboardInterrupt
            self._stop_requested = True
            if self._abortable:  # an evaluation pass: nothing in it to keep, stop it now
                self.log("stopping: the evaluation is dropped, writing the checkpoint (Ctrl-C again to abort at once)")
                raise _StopNow
            self.log("stopping after this batch and writing the checkpoint (Ctrl-C again to abort at once)")

        for sig in (signal.SIGINT, signal.SIGTERM):
            previous[sig] = signal.signal(sig, on_signal)
        return previous

    def _until_stopped(self, fn: Callable[[], object]) -> tuple:
        """``(True, fn())``, or ``(False, None)`` when a stop was requested before or during ``fn``: an
        evaluation pass (a validation, the rate probe) takes seconds to minutes and keeps nothing half-way,
        so Ctrl-C and SIGTERM stop it at once instead of after it (measured on PTB: a Ctrl-C during the
        final validation was otherwise lost, and `compare` went on for 70 s)."""
        try:
            self._abortable = True
            if self._stop_requested:
                return False, None
            return True, fn()
        except _StopNow:
            return False, None
        finally:
            self._abortable = False

    def _diverged(self, what: str, value: float, epoch: int, k: int, lr: float) -> TrainingDiverged:
        kept = (f"the last good checkpoint {self.last_good} is kept: resume from it with --resume"
                if self.last_good else "no checkpoint had been written yet")
        return TrainingDiverged(
            f"training diverged: the {what} is {value} at epoch {epoch + 1}, batch {k + 1} (step {self.step + 1}, "
            f"lr {lr:g}); {kept}. Try a lower --lr (now {self.cfg.lr:g}) or a tighter --clip (now {self.cfg.clip:g})."
        )

    # ------------------------------------------------------------------ the evaluation passes
    @property
    def eval_threads(self) -> Optional[int]:
        """Threads for evaluation, the budget's choice (None: as set); callers score with it after fit()."""
        return self.budget.eval_threads

    def validate(self) -> float:
        t0 = time.perf_counter()
        max_tokens = 2000 if self.cfg.max_batches is not None and self.cfg.max_batches <= 1 else None
        # Always float32: the validation perplexity is a reported number, not only a monitor.
        with eval_threads(self.eval_threads), self.average.swapped_in():
            result = evaluate(self.model, self.valid_ids, batch_size=self.cfg.eval_batch_size,
                              max_tokens=max_tokens)
        self.budget.validated(time.perf_counter() - t0)
        return result.ppl

    def _time_eval(self, n: int, threads: int) -> tuple:
        """(validation tokens/s, scoring tokens/s) on the first ``n`` validation tokens with ``threads``."""
        prefix = self.valid_ids[:n]
        was_training = self.model.training
        reserve = self.budget.reserve_tokens
        with eval_threads(threads):
            t0 = time.perf_counter()
            evaluate(self.model, prefix, batch_size=self.cfg.eval_batch_size)
            t1 = time.perf_counter()
            if reserve:
                evaluate(self.model, prefix, batch_size=1)
            t2 = time.perf_counter()
        self.model.train(was_training)
        return n / max(t1 - t0, 1e-6), (n / max(t2 - t1, 1e-6) if reserve else math.inf)

    def _probe_eval_rates(self) -> None:
        """Tokens/s of the validation pass and of the caller's full-history scoring, timed on a
        prefix of the validation text, so the budget can leave room for them before they happen:
        with the configured thread count and, where that is more than one, with one thread (what
        evaluation uses while other jobs share the cores, see :mod:`neural.training.contention`)."""
        model = self.model
        n = int(min(len(self.valid_ids), 4 * model.eval_chunk_len() * max(1, self.cfg.eval_batch_size), 4000))
        if n < 2:
            self.budget.probed(math.inf, math.inf)
            return
        threads = torch.get_num_threads()
        rates = {t: self._time_eval(n, t) for t in ([threads, 1] if threads > 1 else [threads])}
        self.budget.probed(*rates[threads], by_threads=rates, threads=threads, n=n)

    # ------------------------------------------------------------------ the loop
    def fit(self) -> TrainResult:
        """Train until the epochs are done or a stop rule fires (the time budget, ``max_batches``, early
        stopping, Ctrl-C/SIGTERM); validate and write the checkpoint after each epoch and at the stop."""
        cfg = self.cfg
        if not self._resumed and self.step == 0:
            torch.manual_seed(cfg.seed)  # dropout masks
        previous_handlers = self._install_signal_handlers()
        t_start = self._fit_t0 = time.perf_counter()
        self._start_budget(t_start)
        self._choose_precision()
        per_epoch = self._batches_per_epoch()
        run = _FitRun(per_epoch=per_epoch, total_steps=per_epoch * cfg.epochs, tokens_at_start=self.tokens,
                      params=[p for p in self.model.parameters() if p.requires_grad])
        try:
            while self.position["epoch"] < cfg.epochs and run.stopped is None:
                self._fit_epoch(run)
        finally:
            for sig, handler in previous_handlers.items():
                signal.signal(sig, handler)
            self.seconds_done, self._fit_t0 = self.elapsed(), None
        if self._stop_requested:
            run.stopped = "interrupted"  # also when the signal came after the last batch (the last save is written)
        return self._result(run, time.perf_counter() - t_start)

    def _start_budget(self, t_start: float) -> None:
        """The budget's clock and, under a time budget, the probe of the evaluation rates (a stop
        request stops the probe: the loop then stops before a batch)."""
        budget = self.budget
        budget.start(time_budget=self.cfg.time_budget, checkpoint_minutes=self.cfg.checkpoint_minutes,
                     t_start=t_start, step=self.step, n_valid_tokens=self.n_valid_tokens())
        if budget.budget_s is not None:
            self._until_stopped(self._probe_eval_rates)
        budget.watch(time.perf_counter())
        note = budget.overshoot_note()
        if note:
            self.log(note)

    def _choose_precision(self) -> None:
        """bf16 autocast where asked for and its kernels work on this machine (probed once per machine)."""
        self.autocast = False
        if self.cfg.bf16:
            from ..precision import choose_precision

            choice = choose_precision(True)
            self.autocast = choice.bf16
            if not choice.bf16:
                self.log(choice.reason)

    def _fit_epoch(self, run: "_FitRun") -> None:
        """The batches of the current epoch from the current position, then the validation, the history,
        the schedule and the checkpoint; sets ``run.stopped`` when a stop rule fires."""
        cfg = self.cfg
        epoch = self.position["epoch"]
        batches = self.epoch_batches(epoch)
        n = len(batches) if cfg.max_batches is None else min(len(batches), cfg.max_batches)
        since = self._train_batches(run, epoch, batches, n)
        if run.stopped == "time_budget" and not since.trained:
            return  # nothing trained since the last validation and checkpoint: do not repeat them
        if run.stopped == "interrupted":  # no validation pass: a resumed run does it
            if since.trained:
                self.save()
            return
        finished, val = self._until_stopped(self.validate)
        if not finished:  # Ctrl-C / SIGTERM during the validation: keep the batches, not the pass
            run.stopped = "interrupted"
            if since.trained:
                self.save()
            return
        run.last_val = val
        if not math.isfinite(val):
            raise self._diverged("validation perplexity", val, epoch, self.position["batch"] - 1, self.lr)
        epoch_done = self._validated(epoch, n, val, since)
        if run.stopped is None and cfg.max_batches is not None and n < len(batches):
            run.stopped = "max_batches"
        if run.stopped is None and epoch_done and cfg.patience and self.bad_epochs >= cfg.patience:
            run.stopped = "early_stop"
            self.log(f"early stop: {self.bad_epochs} epochs without a {100 * cfg.plateau_threshold:g}% "
                     "improvement of the validation perplexity")

    def _validated(self, epoch: int, n: int, val: float, since: "_LossSum") -> bool:
        """After a validation pass at the current position (``n`` batches in the epoch): the best
        perplexity, the history, the schedule at the end of an epoch, the log line and the checkpoint.
        Returns whether the epoch is done."""
        epoch_done = self.position["batch"] >= n
        improved = val < self.best_val_ppl * (1.0 - self.cfg.plateau_threshold)
        if val < self.best_val_ppl:
            self.best_val_ppl = val
        fraction = epoch + self.position["batch"] / n
        lr_used = self.optimizer.param_groups[0]["lr"]
        self.history.append({"epoch": round(fraction, 4), "step": self.step, "val_ppl": val, "lr": lr_used,
                             "seconds": self.elapsed(), "train_ppl": since.ppl()})
        if epoch_done:
            self._end_of_epoch_schedule(improved)
            self.position = {"epoch": epoch + 1, "batch": 0}
            self.carry_state = None
        is_best = val == self.best_val_ppl
        self.log(f"epoch {fraction:6.2f} | step {self.step:7d} | lr {lr_used:8.3g} | valid ppl {val:9.2f}"
                 f"{' *' if is_best else ''} | {self.elapsed():7.1f} s")
        self.save(best=is_best)
        self.budget.saved(time.perf_counter())
        return epoch_done

    def _train_batches(self, run: "_FitRun", epoch: int, batches, n: int) -> "_LossSum":
        """Train batches ``position["batch"]`` to ``n - 1`` of ``epoch`` unless a stop comes first (then
        ``run.stopped`` says which); returns the training loss over the batches trained (the history's
        train_ppl, the curve a report draws beside the validation one)."""
        budget = self.budget
        carries = batches.carries_state
        state = self.carry_state if carries and self.position["batch"] > 0 else None
        self.model.train()
        bar = tqdm(total=n, initial=self.position["batch"], desc=f"epoch {epoch + 1}/{self.cfg.epochs}",
                   unit="batch", disable=not self.progress, dynamic_ncols=True, leave=False)
        window, window_t0 = _LossSum(), time.perf_counter()  # the progress bar's
        since = _LossSum()
        for k in range(self.position["batch"], n):
            if self._stop_requested:
                run.stopped = "interrupted"
                break
            if budget.over_budget(time.perf_counter(), self.step):
                run.stopped = "time_budget"
                break
            t_batch = time.perf_counter()
            loss_value, n_tokens, lr, state = self._train_step(run, batches, k, state if carries else None, epoch)
            state = detach_state(state) if carries else None
            self.step += 1
            self.tokens += n_tokens
            self.position["batch"] = k + 1
            window.add(loss_value, n_tokens)
            since.add(loss_value, n_tokens)
            if self.progress and (k + 1) % 10 == 0:
                dt = time.perf_counter() - window_t0
                bar.set_postfix(ppl=f"{math.exp(min(50.0, window.loss / window.tokens)):.1f}",
                                tok_s=f"{window.tokens / dt:.0f}", lr=f"{lr:.3g}", refresh=False)
                bar.update(k + 1 - bar.n)
                window, window_t0 = _LossSum(), time.perf_counter()
            if self.on_batch_end is not None:
                self.on_batch_end(self, k)
            self.carry_state = state if carries else None
            now = time.perf_counter()
            if self._stop_requested:
                run.stopped = "interrupted"
                break
            budget.batch_done(now - t_batch)
            if budget.look_at_cores(now):  # who else uses the cores: the thread choice may re-time evaluation
                self._until_stopped(lambda: budget.choose_eval_threads(self._time_eval))
            if self.out is not None and k + 1 < n and budget.checkpoint_due(now):
                self.save()
                budget.saved(now)
        bar.close()
        return since

    def _train_step(self, run: "_FitRun", batches, k: int, state, epoch: int) -> tuple:
        """One optimizer step on batch ``k``: the learning rate, forward, the finiteness check, backward,
        clipping, the step, the weight average.  Returns (loss, target tokens, lr, the model's state)."""
        cfg, model = self.cfg, self.model
        x, y = batches[k]
        lr = self._lr_now(run.total_steps)
        for group in self.optimizer.param_groups:
            group["lr"] = lr
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=self.autocast):
            _, loss, state = model(x, y, state, need_logits=False)
        loss_value = loss.item()
        if not math.isfinite(loss_value):
            raise self._diverged("loss", loss_value, epoch, k, lr)
        if cfg.ar or cfg.tar:  # reported losses stay the plain cross-entropy
            loss = loss + model.activation_penalty(ar=cfg.ar, tar=cfg.tar)
        self.optimizer.zero_grad(set_to_none=True)
        loss.backward()
        if cfg.clip > 0:
            norm = float(torch.nn.utils.clip_grad_norm_(run.params, cfg.clip))
            if not math.isfinite(norm):
                raise self._diverged("gradient norm", norm, epoch, k, lr)
        self.optimizer.step()
        if cfg.average == "nt" and not self.average.active and self.budget.average_due(cfg.average_after):
            self.average.start()
            self.log(f"{100 * cfg.average_after:g} % of the time budget used: averaging the weights "
                     f"from step {self.step} on (NT-ASGD)")
        self.average.update()
        n_tokens = int((y != PAD_ID).sum())  # padded targets (sentence batches) do not count
        return loss_value, n_tokens, lr, state

    def _result(self, run: "_FitRun", seconds: float) -> TrainResult:
        done = self.position["epoch"] + (self.position["batch"] / run.per_epoch if run.per_epoch else 0)
        return TrainResult(
            stopped=run.stopped or "finished", epochs_done=done, steps=self.step,
            tokens=self.tokens - run.tokens_at_start, seconds=seconds, best_val_ppl=self.best_val_ppl,
            last_val_ppl=run.last_val, history=list(self.history),
            checkpoint=None if self.out is None else str(self.out),
            best_checkpoint=(None if self.out is None or not math.isfinite(self.best_val_ppl)
                             else str(best_path(self.out))),
        )


def _copied_state(state):
    """A carried state as the checkpoint keeps it: every tensor detached and copied, however nested (a
    residual model carries (network state, n-gram states, fold states), some of them None)."""
    if state is None:
        return None
    if isinstance(state, torch.Tensor):
        return state.detach().clone()
    return tuple(_copied_state(s) for s in state)


@dataclass
class _FitRun:
    """One fit()'s fixed numbers and its outcome so far."""

    per_epoch: int  # batches per epoch (max_batches applied)
    total_steps: int  # of the whole run: the cosine schedule's length
    tokens_at_start: int
    params: list  # the trained parameters (clipped together)
    stopped: Optional[str] = None
    last_val: Optional[float] = None


class _LossSum:
    """The token-weighted training loss over a span of batches."""

    __slots__ = ("loss", "tokens", "trained")

    def __init__(self) -> None:
        self.loss, self.tokens = 0.0, 0
        self.trained = False  # a batch was trained (its targets may all be padding)

    def add(self, loss_value: float, n_tokens: int) -> None:
        self.loss += loss_value * n_tokens
        self.tokens += n_tokens
        self.trained = True

    def ppl(self) -> Optional[float]:
        return math.exp(min(50.0, self.loss / self.tokens)) if self.tokens else None
