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
``reserve_tokens`` tokens the caller announces.  The trainer times one batch and an
evaluation probe, and stops when the next batch plus the final validation plus that
reserve would overrun the budget; then it validates and writes the checkpoint.
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
from ..evaluate import evaluate
from ..regularize import WeightAverage

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
        # Budget accounting: tokens the caller scores (full history) after training, and the
        # perf_counter() value the budget is measured from (None: the start of fit()).
        self.reserve_tokens = int(reserve_tokens)
        self.clock_start = clock_start
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
        self._eval_seconds = 0.0
        self._calibration = self._calib_slowdown = 1.0
        self._first_batches, self._base_batch_s, self._recent_batch_s = [], None, None
        self._monitor = None
        self.eval_threads = None  # threads for evaluation: chosen by the rate probe (None: as set)
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
            "carry_state": None if self.carry_state is None else tuple(s.detach().clone() for s in self.carry_state),
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

    # ------------------------------------------------------------------ the loop
    def validate(self) -> float:
        t0 = time.perf_counter()
        max_tokens = 2000 if self.cfg.max_batches is not None and self.cfg.max_batches <= 1 else None
        # Always float32: the validation perplexity is a reported number, not only a monitor.
        with eval_threads(self.eval_threads), self.average.swapped_in():
            result = evaluate(self.model, self.valid_ids, batch_size=self.cfg.eval_batch_size,
                              max_tokens=max_tokens)
        self._eval_seconds = time.perf_counter() - t0
        # The probe's estimate of this pass, at the machine's load now: later estimates are scaled
        # by the ratio (and by how much busier the machine gets after this).
        estimate = self.n_valid_tokens() / self._val_rate if math.isfinite(self._val_rate) else 0.0
        self._calib_slowdown = self._batch_slowdown()
        self._calibration = self._eval_seconds / (estimate * self._calib_slowdown) if estimate > 0 else 1.0
        return result.ppl

    # ------------------------------------------------------------------ the budget
    def _time_eval(self, n: int, threads: int) -> tuple:
        """(validation tokens/s, scoring tokens/s) on the first ``n`` validation tokens with ``threads``."""
        prefix = self.valid_ids[:n]
        was_training = self.model.training
        with eval_threads(threads):
            t0 = time.perf_counter()
            evaluate(self.model, prefix, batch_size=self.cfg.eval_batch_size)
            t1 = time.perf_counter()
            if self.reserve_tokens:
                evaluate(self.model, prefix, batch_size=1)
            t2 = time.perf_counter()
        self.model.train(was_training)
        return n / max(t1 - t0, 1e-6), (n / max(t2 - t1, 1e-6) if self.reserve_tokens else math.inf)

    def _probe_eval_rates(self) -> None:
        """Tokens/s of the validation pass and of the caller's full-history scoring, timed on a
        prefix of the validation text, so the budget can leave room for them before they happen:
        with the configured thread count and, where that is more than one, with one thread (what
        evaluation uses while other jobs share the cores, see :mod:`neural.training.contention`)."""
        model = self.model
        n = int(min(len(self.valid_ids), 4 * model.eval_chunk_len() * max(1, self.cfg.eval_batch_size), 4000))
        if n < 2:
            self._val_rate = self._score_rate = math.inf
            self._rates = {}
            return
        threads = torch.get_num_threads()
        self._rates = {t: self._time_eval(n, t) for t in ([threads, 1] if threads > 1 else [threads])}
        self._probe_threads, self._probe_n = threads, n
        self._val_rate, self._score_rate = self._rates[threads]
        self._fresh_t = None  # when the rates were last re-timed under sharing

    def _choose_eval_threads(self) -> None:
        """One thread for evaluation while other processes share the cores (measured), else the
        configured count; the rates the budget uses follow the choice."""
        if not getattr(self, "_rates", None) or len(self._rates) < 2:
            return
        shared = self._monitor.shared()
        want = 1 if shared else self._probe_threads
        if want != (self.eval_threads or self._probe_threads):
            self.log(f"note: other jobs use {self._monitor.others:.1f} cores: evaluating with {want} thread"
                     f"{'s' if want > 1 else ''}" if shared else
                     f"note: the cores are free again: evaluating with {want} threads")
        self.eval_threads = want
        if shared:
            # One thread keeps its speed on shared cores far better than two, but not entirely (it
            # gets its share of them): re-time it on a short prefix now and then (~1 % of the time).
            now = time.perf_counter()
            if self._fresh_t is None or now - self._fresh_t > 15.0:
                self._val_rate, self._score_rate = self._time_eval(max(2, min(self._probe_n, 800)), 1)
                self._fresh_t = time.perf_counter()
        else:
            self._val_rate, self._score_rate = self._rates[want]
            self._fresh_t = None

    def _batch_slowdown(self) -> float:
        """How much slower the recent batches run than those right after the probe (>= 1): the
        evaluation still to come is slowed by the same sharing of the cores."""
        base, recent = self._base_batch_s, self._recent_batch_s
        return max(1.0, recent / base) if base and recent else 1.0

    def _note_batch(self, seconds: float) -> None:
        """Batch times: the median of batches 2-6 of this fit is the baseline (the first pays
        warm-up); the recent time a decayed mean."""
        if len(self._first_batches) < 6:
            self._first_batches.append(seconds)
            if len(self._first_batches) >= 3:
                self._base_batch_s = float(np.median(self._first_batches[1:]))
        prev = self._recent_batch_s
        self._recent_batch_s = seconds if prev is None else 0.7 * prev + 0.3 * seconds

    def _final_cost(self) -> float:
        """Seconds the run still needs after the last batch: one validation pass and the caller's scoring.

        Once a real validation pass has run, its time replaces the probe's estimate, and the scoring
        estimate is scaled by the same ratio (the machine got busier or quieter since the probe).
        5 % is added: the estimate is a measurement on a shared CPU, and overshooting is the worse error."""
        # A real validation pass corrects the probe's bias (a prefix is not the whole text) by their
        # ratio; the batch slowdown since then says how much busier the machine has become.
        factor = self._calibration if self._eval_seconds else 1.0
        busy = self._batch_slowdown() / (self._calib_slowdown if self._eval_seconds else 1.0)
        if getattr(self, "_fresh_t", None) is not None:
            busy = 1.0  # the rates were just timed on the shared cores
        val = factor * self.n_valid_tokens() / self._val_rate
        return 1.05 * max(1.0, busy) * (val + factor * self.reserve_tokens / self._score_rate)

    def fit(self) -> TrainResult:
        cfg, model = self.cfg, self.model
        if not self._resumed and self.step == 0:
            torch.manual_seed(cfg.seed)  # dropout masks
        previous_handlers = self._install_signal_handlers()
        t_start = self._fit_t0 = time.perf_counter()
        budget_s = None if cfg.time_budget is None else cfg.time_budget * 60.0
        # The budget clock starts at the caller's clock_start (e.g. the command's start).
        clock0 = t_start if self.clock_start is None else self.clock_start
        self._val_rate = self._score_rate = math.inf
        if budget_s is not None:
            self._until_stopped(self._probe_eval_rates)  # stopped: the loop below stops before a batch
        from .contention import ContentionMonitor

        self._monitor = ContentionMonitor()
        self._first_batches, self._base_batch_s, self._recent_batch_s = [], None, None
        last_look = time.perf_counter()
        batch_s = 0.0  # the slowest recent batch (seconds), for "does one more batch fit?"

        step_at_start = self.step

        def over_budget(now: float) -> bool:
            # Every fit trains at least one batch, so there is a model to validate and score.
            return (budget_s is not None and self.step > step_at_start
                    and now - clock0 + batch_s + self._final_cost() > budget_s)

        if budget_s is not None and time.perf_counter() - clock0 + self._final_cost() > budget_s:
            self.log(f"note: the time budget ({budget_s:.0f} s) is less than loading plus the evaluation alone "
                     f"needs (about {time.perf_counter() - clock0 + self._final_cost():.0f} s): one batch is "
                     "trained and the run will overshoot")
        last_save = t_start
        stopped = None
        last_val = None
        tokens_at_start = self.tokens
        self.autocast = False
        if cfg.bf16:
            from ..precision import choose_precision

            choice = choose_precision(True)
            self.autocast = choice.bf16
            if not choice.bf16:
                self.log(choice.reason)
        per_epoch = self._batches_per_epoch()
        total_steps = per_epoch * cfg.epochs
        params = [p for p in model.parameters() if p.requires_grad]
        try:
            while self.position["epoch"] < cfg.epochs and stopped is None:
                epoch = self.position["epoch"]
                batches = self.epoch_batches(epoch)
                n = len(batches) if cfg.max_batches is None else min(len(batches), cfg.max_batches)
                carries = batches.carries_state
                state = self.carry_state if carries and self.position["batch"] > 0 else None
                model.train()
                bar = tqdm(total=n, initial=self.position["batch"], desc=f"epoch {epoch + 1}/{cfg.epochs}",
                           unit="batch", disable=not self.progress, dynamic_ncols=True, leave=False)
                window_loss, window_tokens, window_t0 = 0.0, 0, time.perf_counter()
                # The training loss since the last validation (dropout on, weights moving): the
                # history's train_ppl, the curve a report draws beside the validation one.
                since_loss, since_tokens = 0.0, 0
                trained_this_epoch = False
                for k in range(self.position["batch"], n):
                    if self._stop_requested:
                        stopped = "interrupted"
                        break
                    if over_budget(time.perf_counter()):
                        stopped = "time_budget"
                        break
                    t_batch = time.perf_counter()
                    x, y = batches[k]
                    lr = self._lr_now(total_steps)
                    for group in self.optimizer.param_groups:
                        group["lr"] = lr
                    with torch.autocast("cpu", dtype=torch.bfloat16, enabled=self.autocast):
                        _, loss, state = model(x, y, state if carries else None, need_logits=False)
                    loss_value = loss.item()
                    if not math.isfinite(loss_value):
                        raise self._diverged("loss", loss_value, epoch, k, lr)
                    if cfg.ar or cfg.tar:  # reported losses stay the plain cross-entropy
                        loss = loss + model.activation_penalty(ar=cfg.ar, tar=cfg.tar)
                    self.optimizer.zero_grad(set_to_none=True)
                    loss.backward()
                    if cfg.clip > 0:
                        norm = float(torch.nn.utils.clip_grad_norm_(params, cfg.clip))
                        if not math.isfinite(norm):
                            raise self._diverged("gradient norm", norm, epoch, k, lr)
                    self.optimizer.step()
                    if (cfg.average == "nt" and not self.average.active and budget_s is not None
                            and cfg.average_after is not None
                            and time.perf_counter() - clock0 > cfg.average_after * budget_s):
                        self.average.start()
                        self.log(f"{100 * cfg.average_after:g} % of the time budget used: averaging the weights "
                                 f"from step {self.step} on (NT-ASGD)")
                    self.average.update()
                    state = detach_state(state) if carries else None
                    self.step += 1
                    trained_this_epoch = True
                    n_tokens = int((y != PAD_ID).sum())  # padded targets (sentence batches) do not count
                    self.tokens += n_tokens
                    self.position["batch"] = k + 1
                    window_loss += loss_value * n_tokens
                    window_tokens += n_tokens
                    since_loss += loss_value * n_tokens
                    since_tokens += n_tokens
                    if self.progress and (k + 1) % 10 == 0:
                        dt = time.perf_counter() - window_t0
                        bar.set_postfix(ppl=f"{math.exp(min(50.0, window_loss / window_tokens)):.1f}",
                                        tok_s=f"{window_tokens / dt:.0f}", lr=f"{lr:.3g}", refresh=False)
                        bar.update(k + 1 - bar.n)
                        window_loss, window_tokens, window_t0 = 0.0, 0, time.perf_counter()
                    if self.on_batch_end is not None:
                        self.on_batch_end(self, k)
                    self.carry_state = state if carries else None
                    now = time.perf_counter()
                    if self._stop_requested:
                        stopped = "interrupted"
                        break
                    # The max of the last batch and a decayed memory of slower ones: one slow batch
                    # (a page fault, a busy core) should not be forgotten at once.
                    batch_s = max(now - t_batch, 0.9 * batch_s)
                    self._note_batch(now - t_batch)
                    if now - last_look > 5.0:  # who else uses the cores, every 5 s
                        self._monitor.sample()
                        self._until_stopped(self._choose_eval_threads)  # it may re-time evaluation
                        last_look = now
                    if self.out is not None and now - last_save > cfg.checkpoint_minutes * 60 and k + 1 < n:
                        self.save()
                        last_save = now
                bar.close()
                if stopped == "time_budget" and not trained_this_epoch:
                    break  # nothing trained since the last validation and checkpoint: do not repeat them
                epoch_done = self.position["batch"] >= n
                if stopped == "interrupted":  # no validation pass: a resumed run does it
                    if trained_this_epoch:
                        self.save()
                    break
                finished, val = self._until_stopped(self.validate)
                if not finished:  # Ctrl-C / SIGTERM during the validation: keep the batches, not the pass
                    stopped = "interrupted"
                    if trained_this_epoch:
                        self.save()
                    break
                last_val = val
                if not math.isfinite(val):
                    raise self._diverged("validation perplexity", val, epoch, self.position["batch"] - 1, self.lr)
                improved = val < self.best_val_ppl * (1.0 - cfg.plateau_threshold)
                if val < self.best_val_ppl:
                    self.best_val_ppl = val
                fraction = epoch + self.position["batch"] / n
                lr_used = self.optimizer.param_groups[0]["lr"]
                train_ppl = math.exp(min(50.0, since_loss / since_tokens)) if since_tokens else None
                self.history.append({"epoch": round(fraction, 4), "step": self.step, "val_ppl": val, "lr": lr_used,
                                     "seconds": self.elapsed(), "train_ppl": train_ppl})
                if epoch_done:
                    self._end_of_epoch_schedule(improved)
                    self.position = {"epoch": epoch + 1, "batch": 0}
                    self.carry_state = None
                is_best = val == self.best_val_ppl
                self.log(f"epoch {fraction:6.2f} | step {self.step:7d} | lr {lr_used:8.3g} | valid ppl {val:9.2f}"
                         f"{' *' if is_best else ''} | {self.elapsed():7.1f} s")
                self.save(best=is_best)
                last_save = time.perf_counter()
                if stopped is None and cfg.max_batches is not None and n < len(batches):
                    stopped = "max_batches"
                if stopped is None and epoch_done and cfg.patience and self.bad_epochs >= cfg.patience:
                    stopped = "early_stop"
                    self.log(f"early stop: {self.bad_epochs} epochs without a {100 * cfg.plateau_threshold:g}% "
                             "improvement of the validation perplexity")
        finally:
            for sig, handler in previous_handlers.items():
                signal.signal(sig, handler)
            self.seconds_done, self._fit_t0 = self.elapsed(), None
        if self._stop_requested:
            stopped = "interrupted"  # also when the signal came after the last batch (the last save is written)
        seconds = time.perf_counter() - t_start
        done = self.position["epoch"] + (self.position["batch"] / per_epoch if per_epoch else 0)
        return TrainResult(
            stopped=stopped or "finished", epochs_done=done, steps=self.step, tokens=self.tokens - tokens_at_start,
            seconds=seconds, best_val_ppl=self.best_val_ppl, last_val_ppl=last_val, history=list(self.history),
            checkpoint=None if self.out is None else str(self.out),
            best_checkpoint=(None if self.out is None or not math.isfinite(self.best_val_ppl)
                             else str(best_path(self.out))),
        )
