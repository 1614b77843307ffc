"""Gradient clipping on and off: the same tanh-RNN character LM, the same batches, plain SGD.

Clipping rescales the whole gradient g when its norm passes θ: g ← min(1, θ/‖g‖)·g.  So
the SGD update Δθ = -η·g has norm at most η·θ, however steep the loss surface is at that
step; the direction is unchanged.  The lab records, per step, the gradient norm before
clipping, the norm of the update actually applied (measured as the change of the
parameters) and the loss, for clipping at θ and for no clipping.
"""
from __future__ import annotations

import math

import numpy as np

from ._common import char_corpus, cross_entropy, evaluate_ppl, pyplot, random_batch, set_seed, smooth, tiny_lm
from . import LABS
from .output import Figure, LabResult, Table, png_of

NAME = "clipping"
SECTION = LABS[NAME].section


def train_sgd(model, batches, *, lr: float, clip, steps: int) -> dict:
    """Plain SGD; per step the pre-clip gradient norm, the applied update's norm and the loss."""
    import torch

    params = [p for p in model.parameters()]
    grad_norms, update_norms, losses = [], [], []
    for k in range(steps):
        x, y = batches[k]
        logits, _ = model(x)
        loss = cross_entropy(logits, y)
        model.zero_grad()
        loss.backward()
        g = float(torch.sqrt(sum((p.grad.double() ** 2).sum() for p in params)))
        if clip is not None:
            torch.nn.utils.clip_grad_norm_(params, clip)
        before = [p.detach().clone() for p in params]
        with torch.no_grad():
            for p in params:
                p.add_(p.grad, alpha=-lr)
        upd = float(torch.sqrt(sum(((p.detach() - b).double() ** 2).sum() for p, b in zip(params, before))))
        grad_norms.append(g)
        update_norms.append(upd)
        losses.append(float(loss.detach()))
        if not math.isfinite(losses[-1]):
            break
    return {"grad_norms": grad_norms, "update_norms": update_norms, "losses": losses}


def run(*, seed: int = 0, quick: bool = False, data_dir=None, lr: float = 2.0, theta: float = 1.0) -> LabResult:
    import torch

    plt = pyplot()
    steps = 120 if quick else 500
    train, valid, vocab = char_corpus(data_dir=data_dir, n_train=40_000 if quick else None)
    gen = torch.Generator().manual_seed(seed)
    batches = [random_batch(train, batch_size=32, steps=64, gen=gen) for _ in range(steps)]
    runs = {}
    for label, clip in (("clipped", theta), ("unclipped", None)):
        set_seed(seed)
        m = tiny_lm(len(vocab), cell="rnn_tanh", hidden=128)
        r = train_sgd(m, batches, lr=lr, clip=clip, steps=steps)
        ppl = evaluate_ppl(m, valid) if all(map(math.isfinite, r["losses"])) else None  # None: diverged
        r.update(valid_ppl=ppl, max_update=max(r["update_norms"]), bound=lr * theta if clip else None,
                 steps_clipped=int(sum(g > theta for g in r["grad_norms"])) if clip else 0,
                 steps_done=len(r["losses"]))
        runs[label] = r

    c, u = runs["clipped"], runs["unclipped"]
    fig, axes = plt.subplots(1, 3, figsize=(14, 4))
    for label, colour in (("unclipped", "#D55E00"), ("clipped", "#0072B2")):
        r = runs[label]
        axes[0].semilogy(r["grad_norms"], color=colour, lw=0.8, label=label)
        axes[1].semilogy(r["update_norms"], color=colour, lw=0.8, label=label)
        axes[2].plot(smooth(r["losses"], 10), color=colour, label=label)
    axes[0].axhline(theta, color="k", ls="--", lw=0.8, label=f"θ = {theta}")
    axes[1].axhline(lr * theta, color="k", ls="--", lw=0.8, label=f"η·θ = {lr * theta}")
    axes[0].set_ylabel("‖g‖ before clipping")
    axes[1].set_ylabel("‖Δθ‖ applied")
    axes[2].set_ylabel("training loss (nats, moving average)")
    for ax in axes:
        ax.set_xlabel("step")
        ax.legend(fontsize=8)
    curves = png_of(fig)

    fig, ax = plt.subplots(figsize=(5, 4))
    g = np.array(c["grad_norms"])
    ax.loglog(g, c["update_norms"], ".", color="#0072B2", ms=3, label="clipped run: each step")
    xs = np.logspace(np.log10(g.min()), np.log10(g.max()), 50)
    ax.loglog(xs, lr * np.minimum(xs, theta), "k--", lw=0.8, label="η·min(‖g‖, θ)")
    ax.set_xlabel("‖g‖ before clipping")
    ax.set_ylabel("‖Δθ‖ applied")
    ax.legend(fontsize=8)
    scatter = png_of(fig)

    def fmt_ppl(x):
        return "diverged" if x is None or not math.isfinite(x) else f"{x:.2f}"

    results = {"seed": seed, "quick": quick, "lr": lr, "theta": theta, "steps": steps,
               "runs": runs}
    return LabResult(
        name=NAME,
        title="Gradient clipping on and off",
        section=SECTION,
        intro=(f"tanh-RNN character LM (hidden 128) on The Time Machine, plain SGD with η = {lr}, {steps} identical "
               f"batches of 32×64 characters; clipping of the global gradient norm at θ = {theta} vs none."),
        headline=[
            (f"largest update ‖Δθ‖, clipped (bound η·θ = {lr * theta:g})", f"{c['max_update']:.4f}"),
            ("largest update ‖Δθ‖, unclipped", f"{u['max_update']:.3g}"),
            ("largest gradient norm seen, clipped / unclipped run",
             f"{max(c['grad_norms']):.3g} / {max(u['grad_norms']):.3g}"),
            ("steps where clipping acted", f"{c['steps_clipped']} of {c['steps_done']}"),
            ("highest training loss, clipped / unclipped (nats; uniform over the characters: "
             f"{math.log(len(vocab)):.2f})", f"{max(c['losses']):.2f} / {max(u['losses']):.2f}"),
            ("valid perplexity per character, clipped / unclipped",
             f"{fmt_ppl(c['valid_ppl'])} / {fmt_ppl(u['valid_ppl'])}"),
        ],
        results=results,
        tables=[Table("The two runs", ["run", "max ‖g‖", "median ‖g‖", "max ‖Δθ‖", "final loss (last 20)",
                                       "valid ppl"],
                      [[k, f"{max(r['grad_norms']):.3g}", f"{float(np.median(r['grad_norms'])):.3g}",
                        f"{r['max_update']:.3g}", f"{float(np.mean(r['losses'][-20:])):.3f}", fmt_ppl(r["valid_ppl"])]
                       for k, r in runs.items()])],
        figures=[Figure("curves", "Gradient norm, applied update and loss, step by step", curves),
                 Figure("update_vs_gradient", "Clipping caps the step: ‖Δθ‖ = η·min(‖g‖, θ)", scatter)],
    )
