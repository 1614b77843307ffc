"""Training language models: the budgeted :class:`~neural.training.trainer.Trainer` (truncated BPTT,
clipping, checkpoints, resume), its time-budget policy (:mod:`~neural.training.budget`) and the
thread choice on shared cores (:mod:`~neural.training.contention`).
"""
