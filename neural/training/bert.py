"""BERT's pretraining loop and checkpoint writing (the model, masking, pairs and scoring: :mod:`neural.bert.model`).

Kept apart from :mod:`neural.bert.model` because it writes checkpoints: ``neural.checkpoint`` imports the
model registry, which imports ``neural.bert.model``; a module that both defines the model and writes its
checkpoint would close that circle.
"""
from __future__ import annotations

import math
import time
from dataclasses import dataclass, field
from typing import Callable, Optional, Sequence

import numpy as np
import torch

from corpora.errors import InputError

from ..bert.model import BertLM, HeadScores, PretrainConfig, mask_tokens, pack_pairs, score_heads, sentence_pairs
from ..checkpoint import save_checkpoint


@dataclass
class PretrainResult:
    stopped: str  # max_steps | time_budget | epochs | interrupted
    steps: int
    seconds: float
    pairs: int  # training pairs seen
    valid: Optional[HeadScores]
    history: list = field(default_factory=list)
    checkpoint: Optional[str] = None


def _optimizer(model: BertLM, cfg: PretrainConfig) -> torch.optim.Optimizer:
    # As neural.training.trainer.make_optimizer: decay only matrices, never biases, LayerNorm gains (or embeddings' 1-d params).
    params = [p for p in model.parameters() if p.requires_grad]
    return torch.optim.AdamW([{"params": [p for p in params if p.dim() >= 2], "weight_decay": cfg.weight_decay},
                              {"params": [p for p in params if p.dim() < 2], "weight_decay": 0.0}],
                             lr=cfg.lr, betas=(0.9, 0.999))


def _lr_at(cfg: PretrainConfig, step: int, progress: float) -> float:
    """Linear warm-up, then cosine decay by ``progress`` in [0, 1] (the larger of the step and time
    fractions): a time-budgeted run does not know its step count in advance, yet ends annealed."""
    if step < cfg.warmup_steps:
        return cfg.lr * (step + 1) / cfg.warmup_steps
    floor = cfg.lr * cfg.min_lr_ratio
    return floor + (cfg.lr - floor) * 0.5 * (1 + math.cos(math.pi * min(1.0, max(0.0, progress))))


def save_bert(path, model: BertLM, vocab, train: Optional[dict] = None) -> None:
    """Write the checkpoint atomically, in the toolkit's one format (neural.checkpoint)."""
    save_checkpoint(path, model, vocab, train)


def pretrain(model: BertLM, vocab, train_sents: Sequence[np.ndarray], valid_sents: Sequence[np.ndarray],
             cfg: PretrainConfig, *, out=None, log: Callable[[str], None] = print,
             data_info: Optional[dict] = None) -> PretrainResult:
    """MLM + NSP pretraining on id arrays of consecutive sentences (see :func:`encode_sentences`).

    Stops at ``cfg.max_steps``, after ``cfg.minutes`` of wall-clock time (the next batch and
    the final validation must still fit), after ``cfg.epochs`` passes, or at Ctrl-C; validates
    every ``cfg.eval_every`` steps and at the end, writing the checkpoint (atomically) each time.
    """
    cfg.validate()
    torch.manual_seed(cfg.seed)  # dropout masks
    rng = np.random.default_rng(cfg.seed)
    gen = torch.Generator().manual_seed(cfg.seed)
    opt = _optimizer(model, cfg)
    params = [p for p in model.parameters() if p.requires_grad]
    V, L = model.config.vocab_size, model.config.max_len
    budget = None if cfg.minutes is None else 60.0 * cfg.minutes
    t0 = time.perf_counter()
    step, seen, history, stopped, valid = 0, 0, [], None, None
    batch_s = eval_s = 0.0
    win_loss = win_mlm = win_nsp = win_n = 0.0

    def validate_and_save() -> HeadScores:
        nonlocal eval_s
        t = time.perf_counter()
        v = score_heads(model, valid_sents, n_pairs=cfg.valid_pairs, seed=cfg.seed, mask_prob=cfg.mask_prob)
        eval_s = time.perf_counter() - t
        elapsed = time.perf_counter() - t0
        history.append({"step": step, "seconds": round(elapsed, 2), **v.to_dict()})
        log(f"step {step:6d} | {elapsed:7.1f} s | valid MLM loss {v.mlm_loss:.3f} acc {v.mlm_accuracy:.3f} | "
            f"NSP acc {v.nsp_accuracy:.3f}")
        if out is not None:
            save_bert(out, model, vocab, {"config": cfg.to_dict(), "step": step, "seconds": elapsed,
                                          "history": list(history), "data": dict(data_info or {}),
                                          "stopped": stopped})
        return v

    model.train()
    try:
        for epoch in range(cfg.epochs):
            pairs = sentence_pairs(len(train_sents), rng)
            order = rng.permutation(len(pairs))
            for a in range(0, len(order), cfg.batch_size):
                now = time.perf_counter() - t0
                if cfg.max_steps is not None and step >= cfg.max_steps:
                    stopped = "max_steps"
                elif budget is not None and step > 0 and now + batch_s + eval_s > budget:
                    stopped = "time_budget"
                if stopped:
                    break
                t_batch = time.perf_counter()
                batch = [pairs[k] for k in order[a:a + cfg.batch_size]]
                ids, seg, is_next = pack_pairs(batch, train_sents, vocab_size=V, max_len=L)
                inputs, labels = mask_tokens(ids, vocab_size=V, generator=gen, mask_prob=cfg.mask_prob)
                progress = max(step / cfg.max_steps if cfg.max_steps else 0.0, now / budget if budget else 0.0)
                for group in opt.param_groups:
                    group["lr"] = _lr_at(cfg, step, progress)
                r = model.losses(inputs, seg, labels, is_next)
                loss = r["mlm_loss"] + r["nsp_loss"]  # the paper's objective: the plain sum
                loss_value = float(loss.detach())
                if not math.isfinite(loss_value):
                    raise InputError(f"the pretraining loss became {loss_value} at step {step}",
                                     fix="lower --lr or raise the warm-up")
                opt.zero_grad(set_to_none=True)
                loss.backward()
                if cfg.clip > 0:
                    torch.nn.utils.clip_grad_norm_(params, cfg.clip)
                opt.step()
                step, seen = step + 1, seen + len(batch)
                win_loss += float(r["mlm_loss"].detach())
                win_mlm += r["mlm_correct"] / max(1, r["mlm_count"])
                win_nsp += r["nsp_correct"] / r["nsp_count"]
                win_n += 1
                batch_s = max(time.perf_counter() - t_batch, 0.9 * batch_s)
                if step % cfg.eval_every == 0:
                    log(f"step {step:6d} | train MLM loss {win_loss / win_n:.3f} acc {win_mlm / win_n:.3f} | "
                        f"NSP acc {win_nsp / win_n:.3f} | lr {opt.param_groups[0]['lr']:.3g}")
                    win_loss = win_mlm = win_nsp = win_n = 0.0
                    valid = validate_and_save()
                    model.train()
            if stopped:
                break
        stopped = stopped or "epochs"
    except KeyboardInterrupt:
        stopped = "interrupted"  # keep what was trained: validate and save below
    model.eval()
    if not history or history[-1]["step"] != step:
        valid = validate_and_save()
    elif out is not None:  # the last validation is current: rewrite only to record why it stopped
        save_bert(out, model, vocab, {"config": cfg.to_dict(), "step": step, "seconds": time.perf_counter() - t0,
                                      "history": list(history), "data": dict(data_info or {}), "stopped": stopped})
    return PretrainResult(stopped=stopped, steps=step, seconds=time.perf_counter() - t0, pairs=seen, valid=valid,
                          history=history, checkpoint=None if out is None else str(out))
