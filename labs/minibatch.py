"""Random sampling vs sequential partitioning of a long stream into minibatches, side by side.

Both schemes come from :mod:`neural.data` (the toolkit's own batching):

- random sampling: a random offset, the stream cut into subsequences of ``bptt`` tokens,
  shuffled; neighbouring rows of a batch are unrelated, and the next batch does not
  continue them, so every batch starts from a zero state;
- sequential partitioning: the stream cut into ``batch_size`` contiguous rows; batch k+1
  continues each row where batch k stopped, so the final state of one batch can be the
  initial state of the next (detached: truncated BPTT across batch boundaries).

The lab prints both schemes' batches of the numbers 0..34 (as the textbook does) and
trains the same GRU character LM with each for the same number of epochs.
"""
from __future__ import annotations

import numpy as np

from ._common import char_corpus, evaluate_ppl, pyplot, set_seed, smooth, tiny_lm, train_steps
from . import LABS
from .output import Figure, LabResult, Table, png_of

NAME = "minibatch"
SECTION = LABS[NAME].section


def show_batches(scheme: str, *, n: int = 35, batch_size: int = 2, bptt: int = 5, seed: int = 0) -> list:
    """The batches of ``0..n-1`` under ``scheme`` (epoch 0) as lists of (X rows, Y rows)."""
    import torch

    from neural.data import make_batches

    stream = torch.arange(n)
    out = []
    for x, y in make_batches(scheme, stream, batch_size, bptt, seed=seed, epoch=0):
        out.append((x.tolist(), y.tolist()))
    return out


def run(*, seed: int = 0, quick: bool = False, data_dir=None, epochs: int = 3) -> LabResult:
    from neural.data import make_batches

    plt = pyplot()
    batch_size, bptt = 32, 64
    hidden = 64 if quick else 128
    train, valid, vocab = char_corpus(data_dir=data_dir, n_train=40_000 if quick else None,
                                      n_valid=6_000 if quick else None)
    shown = {s: show_batches(s, seed=seed) for s in ("random", "sequential")}

    runs = {}
    for scheme in ("random", "sequential"):
        set_seed(seed)
        m = tiny_lm(len(vocab), cell="gru", hidden=hidden)
        batches = []
        for e in range(epochs):
            batches += list(make_batches(scheme, train, batch_size, bptt, seed=seed, epoch=e))
        fit = train_steps(m, lambda k: batches[k], steps=len(batches), lr=0.01,
                          carry_state=(scheme == "sequential"))
        runs[scheme] = {"steps": len(batches), "losses": fit["losses"], "seconds": fit["seconds"],
                        "valid_ppl": evaluate_ppl(m, valid),
                        "valid_ppl_one_row": evaluate_ppl(m, valid, rows=1)}

    fig, ax = plt.subplots(figsize=(6, 4))
    for scheme, colour in (("random", "#E69F00"), ("sequential", "#0072B2")):
        ax.plot(smooth(runs[scheme]["losses"], 10), color=colour, label=scheme)
    ax.set_xlabel("step")
    ax.set_ylabel("training loss (nats, moving average)")
    ax.legend()
    curves = png_of(fig)

    # A picture of where each scheme's rows come from in the stream (first 3 batches of 0..34).
    fig, axes = plt.subplots(1, 2, figsize=(11, 2.8), sharey=True)
    for ax, scheme in zip(axes, ("random", "sequential")):
        grid = np.full((2, 35), np.nan)
        for b, (xs, _) in enumerate(shown[scheme][:3]):
            for i, row in enumerate(xs):
                grid[i, row] = b
                ax.text(float(np.mean(row)), i, f"batch {b}", ha="center", va="center", fontsize=8,
                        color="white" if b < 2 else "black")
        ax.imshow(grid, cmap="viridis", aspect="auto", vmin=0, vmax=2)
        ax.set_title(f"{scheme}: the rows of batches 0, 1, 2")
        ax.set_yticks([0, 1])
        ax.set_yticklabels(["row 0", "row 1"])
        ax.set_xlabel("position in the stream 0..34")
    layout = png_of(fig)

    def fmt(rows):
        return "; ".join(" ".join(f"{t:2d}" for t in r) for r in rows)

    tables = [Table(f"{scheme} batches of 0..34 (batch size 2, bptt 5)", ["batch", "X", "Y"],
                    [[str(b), fmt(xs), fmt(ys)] for b, (xs, ys) in enumerate(shown[scheme])])
              for scheme in ("random", "sequential")]
    tables.append(Table("The same GRU trained with each scheme", ["scheme", "steps", "valid ppl (8 rows)",
                                                                  "valid ppl (1 row)", "seconds"],
                        [[s, str(r["steps"]), f"{r['valid_ppl']:.3f}", f"{r['valid_ppl_one_row']:.3f}",
                          f"{r['seconds']:.1f}"] for s, r in runs.items()]))
    r, s = runs["random"], runs["sequential"]
    return LabResult(
        name=NAME,
        title="Random sampling vs sequential partitioning",
        section=SECTION,
        intro=(f"neural.data.make_batches on the numbers 0..34, then a GRU character LM (hidden {hidden}) trained "
               f"{epochs} epochs of The Time Machine with each scheme (batch {batch_size}, bptt {bptt}, Adam); "
               "the validation text is read in 8 rows from a zero state, and in 1 row (full history)."),
        headline=[
            ("random batch 0, X", fmt(shown["random"][0][0])),
            ("sequential batches 0 and 1, X", fmt(shown["sequential"][0][0]) + "  |  " + fmt(shown["sequential"][1][0])),
            ("valid perplexity, random / sequential", f"{r['valid_ppl']:.3f} / {s['valid_ppl']:.3f}"),
            ("valid perplexity read in one row, random / sequential",
             f"{r['valid_ppl_one_row']:.3f} / {s['valid_ppl_one_row']:.3f}"),
        ],
        results={"seed": seed, "quick": quick, "epochs": epochs, "batch_size": batch_size, "bptt": bptt,
                 "hidden": hidden, "batches_shown": shown, "runs": runs},
        tables=tables,
        figures=[Figure("layout", "Where the rows of the first three batches come from", layout),
                 Figure("curves", "Training loss with each scheme", curves)],
    )
