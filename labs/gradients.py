"""Vanishing and exploding gradients through time: tanh RNN vs GRU vs LSTM.

BPTT multiplies one Jacobian per step: ∂h_T/∂h_0 = Π_t ∂h_t/∂h_{t-1}.  Three measurements:

1. the textbook's exercise, exactly: a linear RNN h_t = W h_{t-1} + x_t with W = 0.5·I or 1.5·I;
   autograd gives ‖∂h_100/∂h_0‖ / ‖∂h_100/∂h_100‖ = 0.5^100 ≈ 7.9e-31 and 1.5^100 ≈ 4.1e17;
2. a tanh RNN whose W_hh is γ × a random orthogonal matrix: tanh' ≤ 1 shrinks every step, so
   γ = 1 and even γ = 1.5 still vanish; at γ = 3 the gradient 100 steps back still explodes;
3. three character LMs (tanh RNN, GRU, LSTM; same width) at initialisation and after a few hundred
   Adam steps on The Time Machine: how much the loss at the last of 100 characters depends on the
   input k steps earlier, ‖∂loss_T/∂e_{T-k}‖ / ‖∂loss_T/∂e_T‖ (e: the input embeddings).  At
   initialisation all three forget; trained, the gated cells keep a usable gradient far longer,
   because their state update is additive (c_t = f ⊙ c_{t-1} + ..., h_t = z ⊙ h_{t-1} + ...).
"""
from __future__ import annotations

import numpy as np

from ._common import (CELL_COLOURS, char_corpus, cross_entropy, evaluate_ppl, pyplot, random_batch, set_seed, tiny_lm,
                      train_steps)
from . import LABS
from .output import Figure, LabResult, Table, png_of

NAME = "gradients"
SECTION = LABS[NAME].section
CELLS = ("rnn_tanh", "gru", "lstm")


def linear_rnn_ratio(gain: float, *, T: int = 100, n: int = 8) -> float:
    """‖∂h_T/∂h_0‖ / ‖∂h_T/∂h_T‖ for h_t = gain·h_{t-1} + x_t, by autograd in float64."""
    import torch

    W = gain * torch.eye(n, dtype=torch.float64)
    h0 = torch.ones(n, dtype=torch.float64, requires_grad=True)
    h = h0
    for _ in range(T):
        h = W @ h + 0.1  # the input x_t does not affect the Jacobian
    u = torch.ones(n, dtype=torch.float64) / n ** 0.5
    (g,) = torch.autograd.grad(h @ u, h0)
    return float(g.norm() / u.norm())


def tanh_gain_profile(gain: float, *, T: int = 100, hidden: int = 64, batch: int = 16, seed: int = 0) -> list:
    """Relative ‖∂(u·h_T)/∂h_t‖ for t = 0..T, tanh RNN with W_hh = gain × random orthogonal."""
    import torch

    g = torch.Generator().manual_seed(seed)
    q, _ = torch.linalg.qr(torch.randn(hidden, hidden, generator=g, dtype=torch.float64))
    W = gain * q
    Wx = torch.randn(8, hidden, generator=g, dtype=torch.float64) / 8 ** 0.5
    x = torch.randn(batch, T, 8, generator=g, dtype=torch.float64)
    hs = [torch.zeros(batch, hidden, dtype=torch.float64, requires_grad=True)]
    for t in range(T):
        hs.append(torch.tanh(hs[-1] @ W + x[:, t] @ Wx))
        hs[-1].retain_grad()
    u = torch.randn(hidden, generator=g, dtype=torch.float64)
    (hs[-1] @ u).sum().backward()
    norms = torch.stack([h.grad.norm(dim=-1).mean() for h in hs])
    return (norms / norms[-1]).tolist()


def input_gradient_profile(model, stream, *, T: int, batch: int = 16, seed: int = 1) -> list:
    """‖∂loss_T/∂e_t‖ relative to t = T (the last input), averaged over ``batch`` windows."""
    import torch

    x, y = random_batch(stream, batch_size=batch, steps=T, gen=torch.Generator().manual_seed(seed))
    e = model.embedding(x).detach().requires_grad_(True)
    h, _ = model.rnn(e)
    cross_entropy(model.out(h[:, -1:]), y[:, -1:]).backward()
    n = e.grad.double().norm(dim=-1).mean(0)
    return (n / n[-1]).tolist()


def run(*, seed: int = 0, quick: bool = False, data_dir=None) -> LabResult:
    import torch

    plt = pyplot()
    T = 100
    steps = 80 if quick else 300
    hidden = 64 if quick else 128
    exact = {"0.5": linear_rnn_ratio(0.5, T=T), "1.5": linear_rnn_ratio(1.5, T=T)}
    gains = (0.5, 1.0, 1.5, 3.0)
    tanh_profiles = {str(gm): tanh_gain_profile(gm, T=T, seed=seed) for gm in gains}

    train, valid, vocab = char_corpus(data_dir=data_dir, n_train=40_000 if quick else None)
    cells = {}
    for cell in CELLS:
        set_seed(seed)
        m = tiny_lm(len(vocab), cell=cell, hidden=hidden)
        at_init = input_gradient_profile(m, valid, T=T, seed=seed + 1)
        gen = torch.Generator().manual_seed(seed)
        fit = train_steps(m, lambda k: random_batch(train, batch_size=32, steps=64, gen=gen), steps=steps, lr=0.01)
        trained = input_gradient_profile(m, valid, T=T, seed=seed + 1)
        cells[cell] = {"init": at_init, "trained": trained, "valid_ppl": evaluate_ppl(m, valid),
                       "train_seconds": fit["seconds"]}

    def back(profile, k):  # relative gradient k steps before the last input
        return profile[len(profile) - 1 - k]

    fig, ax = plt.subplots(figsize=(6, 4))
    ks = np.arange(T + 1)
    for gm, c in zip(gains, ("#0072B2", "#009E73", "#E69F00", "#D55E00")):
        ax.semilogy(ks, tanh_profiles[str(gm)][::-1], color=c, label=f"tanh RNN, W_hh = {gm} × orthogonal")
    ax.semilogy(ks, 0.5 ** ks, "k:", lw=1, label="0.5^k (linear, W = 0.5·I)")
    ax.set_ylim(1e-32, 1e3)
    ax.set_xlabel("k: steps back from h_T")
    ax.set_ylabel("‖∂(u·h_T)/∂h_{T-k}‖, relative")
    ax.legend(fontsize=8)
    gains_png = png_of(fig)

    fig, axes = plt.subplots(1, 2, figsize=(11, 4), sharey=True)
    for ax, when in zip(axes, ("init", "trained")):
        for cell in CELLS:
            prof = np.maximum(np.array(cells[cell][when][::-1]), 1e-40)
            ax.semilogy(np.arange(T), prof, color=CELL_COLOURS[cell], label=cell)
        ax.set_title("at initialisation" if when == "init" else f"after {steps} Adam steps")
        ax.set_xlabel("k: characters back from the last input")
        ax.legend()
    axes[0].set_ylabel("‖∂loss_T/∂e_{T-k}‖, relative")
    cells_png = png_of(fig)

    show = (10, 25, 50, 99)
    rows = [[cell, when] + [f"{back(cells[cell][when], k):.1e}" for k in show]
            for cell in CELLS for when in ("init", "trained")]
    trained50 = {c: back(cells[c]["trained"], 50) for c in CELLS}
    return LabResult(
        name=NAME,
        title="Vanishing and exploding gradients through time",
        section=SECTION,
        intro=(f"Exact linear case, tanh RNNs with chosen recurrent gains, and three character LMs "
               f"(hidden {hidden}, {steps} Adam steps of 32×64 characters on The Time Machine); "
               f"gradients measured by autograd over T = {T} steps."),
        headline=[
            ("linear RNN W = 0.5·I: ‖∂h_100/∂h_0‖ (0.5^100 = 7.89e-31)", f"{exact['0.5']:.3g}"),
            ("linear RNN W = 1.5·I: ‖∂h_100/∂h_0‖ (1.5^100 = 4.07e17)", f"{exact['1.5']:.3g}"),
            ("tanh RNN, W_hh = γ × orthogonal, gradient 100 steps back: γ = 1 / 1.5 / 3",
             " / ".join(f"{tanh_profiles[g][0]:.2g}" for g in ("1.0", "1.5", "3.0"))),
            ("trained LMs, gradient 50 characters back: tanh RNN / GRU / LSTM",
             " / ".join(f"{trained50[c]:.1e}" for c in CELLS)),
            ("valid perplexity per character: tanh RNN / GRU / LSTM",
             " / ".join(f"{cells[c]['valid_ppl']:.2f}" for c in CELLS)),
        ],
        results={"seed": seed, "quick": quick, "T": T, "steps": steps, "hidden": hidden,
                 "linear_exact": exact, "tanh_gain_profiles": tanh_profiles,
                 "cells": cells, "trained_back50": trained50,
                 "init_back50": {c: back(cells[c]["init"], 50) for c in CELLS}},
        tables=[Table("Relative input gradient k characters before the loss",
                      ["cell", "when"] + [f"k = {k}" for k in show], rows),
                Table("The exercise: W = γ·I, 100 steps", ["γ", "γ^100", "measured ‖∂h_100/∂h_0‖"],
                      [["0.5", f"{0.5 ** 100:.3g}", f"{exact['0.5']:.3g}"],
                       ["1.5", f"{1.5 ** 100:.3g}", f"{exact['1.5']:.3g}"]])],
        figures=[Figure("tanh_gains", "tanh RNN: the recurrent gain decides how fast gradients vanish", gains_png),
                 Figure("cells", "Gradient reaching back through 100 characters: tanh RNN vs GRU vs LSTM", cells_png)],
    )
