"""Training language models: the budgeted :class:`~neural.training.trainer.Trainer` (truncated BPTT,
clipping, checkpoints, resume) and the thread choice on shared cores
(:mod:`~neural.training.contention`).
"""
