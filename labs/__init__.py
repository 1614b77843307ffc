"""Small, runnable labs for the textbook's experiments (``ngramlm lab``).

Each lab is one module with a ``run(*, seed) -> LabResult`` function; :mod:`labs.output`
writes its report.  The registry below is plain data so that ``ngramlm lab`` can list the
labs without importing numpy, matplotlib or torch.
"""
from __future__ import annotations

from typing import NamedTuple


class LabInfo(NamedTuple):
    module: str   # "labs.<module>", imported only when the lab runs
    section: str  # where the textbook treats the concept (chapter/section titles, in English)
    summary: str


LABS: dict[str, LabInfo] = {
    "positional-encoding": LabInfo(
        "labs.positional_encoding",
        "2.2.3 Attention and the Transformer: multi-head attention and positional encoding",
        "Sinusoidal positional encodings: P[i+k] is a rotation of P[i]; P[i]·P[j] depends only on i-j.",
    ),
    "attention-scaling": LabInfo(
        "labs.attention_scaling",
        "2.2.3 Attention and the Transformer: scaled dot-product attention (exercise: why divide by √d_k)",
        "Additive vs scaled dot-product scores; Var(q·k) = d, Var(q·k/√d) = 1; softmax saturation.",
    ),
    "nadaraya-watson": LabInfo(
        "labs.nadaraya_watson",
        "Attention mechanism: score, normalise (softmax), weighted sum (attention pooling)",
        "Attention pooling as kernel regression: average pooling vs Nadaraya-Watson, fixed and learned width.",
    ),
}
