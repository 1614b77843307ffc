"""Small, runnable labs for the textbook's experiments (``ngramlm lab``).

Each lab is one module with a ``run(*, seed, quick=False) -> LabResult`` function (``quick``:
smaller sizes, seconds instead of minutes, for the tests and a first look; the three
closed-form labs take no ``quick``; the labs reading a corpus also take ``data_dir``);
:mod:`labs.output` writes its report.  The registry below is plain data so that
``ngramlm lab`` can list the labs without importing numpy, matplotlib or torch.
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
    "long-range": LabInfo(
        "labs.long_range",
        "2.2.1 Chain rule and the Markov assumption: the long-range dependency a fixed window cuts",
        "Toy language's origin ... language-word pair: true model vs MKN 3/5-gram, bits by distance.",
    ),
    "sine-forecast": LabInfo(
        "labs.sine_forecast",
        "Sequence models: autoregressive models, Markov assumption, k-step-ahead prediction",
        "Noisy sine with an AR(4) MLP: one-step vs k-step-ahead vs free-running; error grows with k.",
    ),
    "minibatch": LabInfo(
        "labs.minibatch",
        "Language models: random sampling vs sequential partitioning of long sequences",
        "The batches of 0..34 under both schemes, and the perplexity a GRU reaches with each.",
    ),
    "gradients": LabInfo(
        "labs.gradients",
        "2.2.2 RNNs: BPTT and vanishing/exploding gradients (exercise: 0.5^100); LSTM and GRU gates",
        "Gradient norms through 100 steps: exact 0.5^100 and 1.5^100, tanh RNN vs GRU vs LSTM.",
    ),
    "clipping": LabInfo(
        "labs.clipping",
        "RNNs: gradient explosion and gradient clipping",
        "Plain SGD on a tanh RNN with and without clipping: the update norm is capped at η·θ.",
    ),
    "bptt": LabInfo(
        "labs.bptt",
        "2.2.2 RNNs: backpropagation through time (full); truncated (Williams & Peng 1990) and randomised "
        "truncation (Tallec & Ollivier 2017) added by the toolkit",
        "Same GRU, three backward passes: gradient reach, cosine to the full gradient, perplexity.",
    ),
    "depth": LabInfo(
        "labs.depth",
        "Deep recurrent neural networks",
        "1, 2 and 3 stacked GRU layers on the same budget: parameters, time, perplexity.",
    ),
    "bidirectional": LabInfo(
        "labs.bidirectional",
        "Bidirectional RNNs: for encoding, not for next-token prediction",
        "A BiGRU used as an LM cheats (ppl ≈ 1); on a cloze (masked characters) it honestly beats a GRU.",
    ),
    "exposure-bias": LabInfo(
        "labs.exposure_bias",
        "Ch. 05 Seq2Seq: teacher forcing and exposure bias",
        "One char LM, teacher-forced vs free-running accuracy against the true continuation.",
    ),
    "attention-cost": LabInfo(
        "labs.attention_cost",
        "2.2.3 Attention and the Transformer: parallelism and the O(T²) cost; CNN vs RNN vs self-attention",
        "Ops, sequential ops, max path length (measured), and attention's time and memory as T grows.",
    ),
}
