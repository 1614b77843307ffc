"""Training a translator with the LMs' trainer: same checkpoints, resume, budgets, stopping rules.

:class:`~neural.training.trainer.Trainer` only needs minibatches ``(x, y)`` and a validation perplexity;
here the minibatches are shuffled sentence pairs (:class:`~neural.seq2seq.pairs.PairBatches`, teacher
forcing with the target shifted by ``<s>``) and the validation perplexity is the conditional
one, ``exp(-ln P(targets | sources) / N)`` over every target word and ``</s>``.
"""
from __future__ import annotations

import math
import time

from ..seq2seq.pairs import PairBatches
from ..seq2seq.translate import score_pairs
from .trainer import Trainer


class Seq2SeqTrainer(Trainer):
    """``Seq2SeqTrainer(model, tgt_vocab, (train_src, train_tgt), (valid_src, valid_tgt), config, ...)``.

    ``model.src_vocab`` must be set: the checkpoint stores both vocabularies.  ``reserve_tokens``
    counts target tokens the caller scores after training (the test set)."""

    translator = True

    def _set_data(self, train, valid) -> None:
        self.train_pairs = (list(train[0]), list(train[1]))
        self.valid_pairs = (list(valid[0]), list(valid[1]))
        self._n_valid = sum(len(t) + 1 for t in self.valid_pairs[1])

    def epoch_batches(self, epoch: int) -> PairBatches:
        return PairBatches(*self.train_pairs, self.cfg.batch_size, seed=self.cfg.seed, epoch=epoch)

    def n_valid_tokens(self) -> int:
        return self._n_valid

    def _valid_subset(self, limit=None) -> tuple:
        src, tgt = self.valid_pairs
        return (src, tgt) if limit is None else (src[:limit], tgt[:limit])

    def validate(self) -> float:
        t0 = time.perf_counter()
        limit = 64 if self.cfg.max_batches is not None and self.cfg.max_batches <= 1 else None
        result = score_pairs(self.model, *self._valid_subset(limit), batch_size=self.cfg.eval_batch_size)
        self.budget.validated(time.perf_counter() - t0, calibrate=False)
        return result.ppl

    def _probe_eval_rates(self) -> None:
        src, tgt = self._valid_subset(min(len(self.valid_pairs[0]), 200))
        if not src:
            self.budget.probed(math.inf, math.inf)
            return
        n = sum(len(t) + 1 for t in tgt)
        t0 = time.perf_counter()
        score_pairs(self.model, src, tgt, batch_size=self.cfg.eval_batch_size)
        rate = n / max(time.perf_counter() - t0, 1e-6)
        self.budget.probed(rate, rate if self.budget.reserve_tokens else math.inf)
