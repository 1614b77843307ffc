"""The training loops: the budgeted :class:`~neural.training.trainer.Trainer` (truncated BPTT,
clipping, checkpoints, resume), its time-budget policy (:mod:`~neural.training.budget`), the thread
choice on shared cores (:mod:`~neural.training.contention`), the translators' loop on it
(:mod:`~neural.training.seq2seq`) and BERT's pretraining (:mod:`~neural.training.bert`).
"""
