"""Full vs truncated vs randomised truncated backpropagation through time.

One GRU character LM unrolled step by step over windows of T characters; the forward pass is
the same in all three schemes, only the backward pass differs:

- full BPTT: the gradient flows back through all T steps;
- truncated (every k steps): the state passed on is detached every k steps, so a loss sees
  at most k steps of history in its gradient (the forward state still carries everything);
- randomised truncation (Tallec & Ollivier 2017): at each step the link to the previous
  state is kept with probability π = 1 - 1/k and its gradient then scaled by 1/π, or cut.
  Its expectation is the full gradient (unbiased), at the price of variance.

Measured: the gradient each scheme gives on the same batches (cosine to the full gradient;
the randomised average over many draws converges to it), how far back a loss's gradient
reaches, and the validation perplexity after the same number of Adam steps.
"""
from __future__ import annotations

import time

import numpy as np

from ._common import char_corpus, evaluate_ppl, pyplot, random_batch, set_seed, smooth
from . import LABS
from .output import Figure, LabResult, Table, png_of

NAME = "bptt"
SECTION = LABS[NAME].section
SCHEMES = ("full", "truncated", "randomised")
COLOURS = {"full": "#0072B2", "truncated": "#D55E00", "randomised": "#009E73"}


def step_lm(vocab_size: int, *, hidden: int, emb: int = 32):
    """Embedding -> GRU cell run one step at a time (so the backward links can be cut) -> linear."""
    import torch
    from torch import nn

    class StepLM(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.embedding = nn.Embedding(vocab_size, emb)
            self.cell = nn.GRUCell(emb, hidden)
            self.out = nn.Linear(hidden, vocab_size)
            self.hidden = hidden

        def forward(self, x, *, scheme: str = "full", k: int = 8, gen=None, inputs=None):
            """Logits (B, T, V); ``inputs``: embeddings to use instead of the lookup (for input gradients)."""
            e = self.embedding(x) if inputs is None else inputs
            B, T = x.shape
            h = e.new_zeros(B, self.hidden)
            outs = []
            keep = 1.0 - 1.0 / k
            for t in range(T):
                if t > 0 and scheme == "truncated" and t % k == 0:
                    h = h.detach()
                elif t > 0 and scheme == "randomised":
                    if float(torch.rand((), generator=gen)) < keep:
                        h = h.detach() + (h - h.detach()) / keep  # same value, gradient × 1/π
                    else:
                        h = h.detach()
                h = self.cell(e[:, t], h)
                outs.append(h)
            return self.out(torch.stack(outs, 1))

    return StepLM()


def loss_of(model, x, y, **kw):
    import torch.nn.functional as F

    logits = model(x, **kw)
    return F.cross_entropy(logits.reshape(-1, logits.size(-1)), y.reshape(-1))


def flat_grad(model, x, y, **kw):
    import torch

    model.zero_grad()
    loss_of(model, x, y, **kw).backward()
    return torch.cat([p.grad.reshape(-1) for p in model.parameters()]).clone()


def reach(model, x, y, **kw) -> list:
    """‖∂loss_T/∂e_t‖ of the last position's loss, relative to t = T."""
    import torch.nn.functional as F

    e = model.embedding(x).detach().requires_grad_(True)
    logits = model(x, inputs=e, **kw)
    F.cross_entropy(logits[:, -1], y[:, -1]).backward()
    n = e.grad.double().norm(dim=-1).mean(0)
    return (n / n[-1]).tolist()


class _Eval:
    """Adapter so :func:`labs._common.evaluate_ppl` can call the step model."""

    def __init__(self, m):
        self.m = m

    def __call__(self, x, state=None):
        return self.m(x), None

    def eval(self):
        self.m.eval()

    def train(self):
        self.m.train()


def _figures(plt, runs, reaches, cosines, T, draws) -> tuple:
    """The two figures as PNG bytes: the training curves with each scheme's gradient reach, and the cosines to
    the full-BPTT gradient."""
    fig, axes = plt.subplots(1, 2, figsize=(11, 4))
    for s in SCHEMES:
        axes[0].plot(smooth(runs[s]["losses"], 10), color=COLOURS[s], label=f"{s}")
        prof = np.maximum(np.array(reaches[s][::-1]), 1e-12)
        axes[1].semilogy(np.arange(T), prof, color=COLOURS[s], label=s)
    axes[0].set_xlabel("step")
    axes[0].set_ylabel("training loss (nats, moving average)")
    axes[1].set_xlabel("k: characters back from the last input")
    axes[1].set_ylabel("‖∂loss_T/∂e_{T-k}‖ (relative; 1e-12 = cut)")
    axes[0].legend()
    axes[1].legend()
    curves = png_of(fig)

    fig, ax = plt.subplots(figsize=(6, 3.5))
    labels = ["truncated", "randomised, one draw", f"randomised, mean of {draws}"]
    vals = [cosines["truncated"], cosines["randomised_single"], cosines["randomised_mean"]]
    ax.bar(labels, vals, color=[COLOURS["truncated"], COLOURS["randomised"], "#56B4E9"])
    ax.set_ylim(0, 1.05)
    ax.set_ylabel("cosine to the full-BPTT gradient")
    bars = png_of(fig)

    return curves, bars


def run(*, seed: int = 0, quick: bool = False, data_dir=None, k: int = 8) -> LabResult:
    import torch

    plt = pyplot()
    T, B = 48, 32
    steps = 60 if quick else 250
    hidden = 64 if quick else 128
    train, valid, vocab = char_corpus(data_dir=data_dir, n_train=40_000 if quick else None,
                                      n_valid=6_000 if quick else 20_000)
    gen = torch.Generator().manual_seed(seed)
    batches = [random_batch(train, batch_size=B, steps=T, gen=gen) for _ in range(steps)]

    runs = {}
    for scheme in SCHEMES:
        set_seed(seed)
        m = step_lm(len(vocab), hidden=hidden)
        opt = torch.optim.Adam(m.parameters(), lr=0.01)
        rgen = torch.Generator().manual_seed(seed + 7)
        losses = []
        t0 = time.perf_counter()
        for x, y in batches:
            loss = loss_of(m, x, y, scheme=scheme, k=k, gen=rgen)
            opt.zero_grad()
            loss.backward()
            torch.nn.utils.clip_grad_norm_(m.parameters(), 1.0)
            opt.step()
            losses.append(float(loss.detach()))
        secs = time.perf_counter() - t0
        runs[scheme] = {"losses": losses, "seconds": secs, "valid_ppl": evaluate_ppl(_Eval(m), valid, rows=16)}
        if scheme == "full":
            trained = m

    # Gradients of the trained full-BPTT model on fresh batches: bias and variance of each scheme.
    probe = [random_batch(valid, batch_size=B, steps=T, gen=torch.Generator().manual_seed(seed + 100 + i))
             for i in range(3 if quick else 6)]
    draws = 8 if quick else 32
    cos = {"truncated": [], "randomised_single": [], "randomised_mean": []}
    rgen = torch.Generator().manual_seed(seed + 11)
    for x, y in probe:
        g_full = flat_grad(trained, x, y)
        g_tr = flat_grad(trained, x, y, scheme="truncated", k=k)
        singles = [flat_grad(trained, x, y, scheme="randomised", k=k, gen=rgen) for _ in range(draws)]
        c = torch.nn.functional.cosine_similarity
        cos["truncated"].append(float(c(g_tr, g_full, dim=0)))
        cos["randomised_single"].append(float(np.mean([float(c(g, g_full, dim=0)) for g in singles])))
        cos["randomised_mean"].append(float(c(torch.stack(singles).mean(0), g_full, dim=0)))
    cosines = {key: float(np.mean(v)) for key, v in cos.items()}
    x, y = probe[0]
    reaches = {"full": reach(trained, x, y),
               "truncated": reach(trained, x, y, scheme="truncated", k=k),
               "randomised": reach(trained, x, y, scheme="randomised", k=k, gen=torch.Generator().manual_seed(seed))}
    # truncation cuts at multiples of k: the last loss (position T-1) reaches back to the last cut
    last_cut = ((T - 1) // k) * k
    beyond = float(max(reaches["truncated"][:last_cut])) if last_cut > 0 else 0.0

    curves, bars = _figures(plt, runs, reaches, cosines, T, draws)

    return LabResult(
        name=NAME,
        title="Full, truncated and randomised truncated BPTT",
        section=SECTION,
        intro=(f"GRU character LM (hidden {hidden}) on The Time Machine, windows of T = {T} characters, batch {B}, "
               f"{steps} Adam steps per scheme on the same batches; truncation every k = {k} steps, randomised "
               f"truncation keeps each link with π = {1 - 1 / k:.3f} and scales it by 1/π."),
        headline=[
            ("valid perplexity: full / truncated / randomised",
             " / ".join(f"{runs[s]['valid_ppl']:.2f}" for s in SCHEMES)),
            ("training seconds: full / truncated / randomised",
             " / ".join(f"{runs[s]['seconds']:.1f}" for s in SCHEMES)),
            ("cosine to the full gradient: truncated / randomised (one draw) / randomised (mean of "
             f"{draws})", f"{cosines['truncated']:.3f} / {cosines['randomised_single']:.3f} / "
                          f"{cosines['randomised_mean']:.3f}"),
            (f"truncated: largest input gradient beyond the last cut ({T - 1 - last_cut} steps back)", f"{beyond:.1g}"),
        ],
        results={"seed": seed, "quick": quick, "T": T, "batch": B, "k": k, "steps": steps, "hidden": hidden,
                 "runs": runs, "cosine_to_full": cosines, "reach": reaches, "truncated_beyond_cut": beyond,
                 "draws": draws},
        tables=[Table("Training on equal budgets", ["scheme", "valid ppl", "final loss (mean of last 20)", "seconds"],
                      [[s, f"{runs[s]['valid_ppl']:.3f}", f"{float(np.mean(runs[s]['losses'][-20:])):.3f}",
                        f"{runs[s]['seconds']:.1f}"] for s in SCHEMES])],
        figures=[Figure("curves", "Training loss, and how far back the last loss's gradient reaches", curves),
                 Figure("cosine", "Bias and variance: each scheme's gradient against full BPTT", bars)],
    )
