"""Deep vs shallow recurrent networks: 1, 2 and 3 stacked GRU layers on the same budget.

In a deep RNN layer l reads the hidden states of layer l-1 at the same time step,
h_t^(l) = f^(l)(h_t^(l-1), h_{t-1}^(l)), and only the top layer feeds the output.  Every
layer adds the parameters of one more recurrent layer and one more sequential pass per
time step.  The lab trains three GRU character LMs of equal width for the same number
of Adam steps on the same batches and reports parameters, time and validation perplexity.
"""
from __future__ import annotations

import numpy as np

from ._common import char_corpus, evaluate_ppl, pyplot, random_batch, set_seed, smooth, tiny_lm, train_steps
from . import LABS
from .output import Figure, LabResult, Table, png_of

NAME = "depth"
SECTION = LABS[NAME].section
DEPTHS = (1, 2, 3)
COLOURS = ("#E69F00", "#0072B2", "#009E73")


def run(*, seed: int = 0, quick: bool = False, data_dir=None) -> LabResult:
    import torch

    plt = pyplot()
    steps = 60 if quick else 200
    hidden = 64 if quick else 128
    train, valid, vocab = char_corpus(data_dir=data_dir, n_train=40_000 if quick else None,
                                      n_valid=6_000 if quick else None)
    gen = torch.Generator().manual_seed(seed)
    batches = [random_batch(train, batch_size=32, steps=64, gen=gen) for _ in range(steps)]
    runs = {}
    for depth in DEPTHS:
        set_seed(seed)
        m = tiny_lm(len(vocab), cell="gru", hidden=hidden, layers=depth)
        fit = train_steps(m, lambda k: batches[k], steps=steps, lr=0.01)
        runs[depth] = {"params": int(sum(p.numel() for p in m.parameters())), "seconds": fit["seconds"],
                       "losses": fit["losses"], "train_loss_end": float(np.mean(fit["losses"][-20:])),
                       "valid_ppl": evaluate_ppl(m, valid)}

    fig, ax = plt.subplots(figsize=(6, 4))
    for depth, colour in zip(DEPTHS, COLOURS):
        ax.plot(smooth(runs[depth]["losses"], 10), color=colour, label=f"{depth} layer{'s' if depth > 1 else ''}")
    ax.set_xlabel("step")
    ax.set_ylabel("training loss (nats, moving average)")
    ax.legend()
    curves = png_of(fig)

    fig, ax = plt.subplots(figsize=(6, 4))
    ax.plot([runs[d]["seconds"] for d in DEPTHS], [runs[d]["valid_ppl"] for d in DEPTHS], "o-", color="#0072B2")
    for d in DEPTHS:
        ax.annotate(f"{d} layer{'s' if d > 1 else ''}, {runs[d]['params'] / 1000:.0f}k params",
                    (runs[d]["seconds"], runs[d]["valid_ppl"]), fontsize=8, xytext=(4, 4), textcoords="offset points")
    ax.set_xlabel("training seconds")
    ax.set_ylabel("valid perplexity per character")
    cost = png_of(fig)

    best = min(DEPTHS, key=lambda d: runs[d]["valid_ppl"])
    return LabResult(
        name=NAME,
        title="Deep vs shallow RNNs",
        section=SECTION,
        intro=(f"GRU character LMs with hidden width {hidden} and 1-3 layers, {steps} Adam steps on the same batches "
               "of 32×64 characters of The Time Machine."),
        headline=[
            ("valid perplexity, 1 / 2 / 3 layers", " / ".join(f"{runs[d]['valid_ppl']:.3f}" for d in DEPTHS)),
            ("parameters, 1 / 2 / 3 layers", " / ".join(f"{runs[d]['params']:,}" for d in DEPTHS)),
            ("training seconds, 1 / 2 / 3 layers", " / ".join(f"{runs[d]['seconds']:.1f}" for d in DEPTHS)),
            ("best on this budget", f"{best} layer{'s' if best > 1 else ''}"),
        ],
        results={"seed": seed, "quick": quick, "steps": steps, "hidden": hidden,
                 "runs": {str(d): r for d, r in runs.items()}, "best_depth": best},
        tables=[Table("Equal steps, equal width", ["layers", "parameters", "seconds", "final train loss", "valid ppl"],
                      [[str(d), f"{runs[d]['params']:,}", f"{runs[d]['seconds']:.1f}", f"{runs[d]['train_loss_end']:.3f}",
                        f"{runs[d]['valid_ppl']:.3f}"] for d in DEPTHS])],
        figures=[Figure("curves", "Training loss by depth", curves),
                 Figure("cost", "Validation perplexity against training time", cost)],
    )
