"""The cost table of CNN vs RNN vs self-attention, and the measured O(T²) of attention.

Per layer, for a sequence of n tokens of width d (Vaswani et al. 2017, Table 1):

| layer | operations | sequential operations | maximum path length |
|---|---|---|---|
| convolution, kernel k | O(k·n·d²) | O(1) | O(n/k) (O(log_k n) dilated) |
| recurrent | O(n·d²) | O(n) | O(n) |
| self-attention | O(n²·d) | O(1) | O(1) |

Measured here:

- the maximum path length, by autograd: how many stacked layers (conv) or steps (RNN) it
  takes before output n depends on input 1 at all (a non-zero gradient);
- permutation equivariance: self-attention without positions gives permuted outputs for
  permuted inputs (max |f(Px) - P f(x)|), which is why it needs positional encodings;
- the time of one forward pass of each layer as n grows, and the bytes of the n×n
  attention-weight matrix that self-attention materialises; log-log slopes of time and
  memory against n (2 for attention's weights, 1 for the RNN's time).
"""
from __future__ import annotations

import math
import time

import numpy as np

from ._common import pyplot
from . import LABS
from .output import Figure, LabResult, Table, png_of

NAME = "attention-cost"
SECTION = LABS[NAME].section
COLOURS = {"self-attention": "#D55E00", "RNN (GRU)": "#0072B2", "CNN (kernel 3)": "#009E73"}


def attention(x, wq, wk, wv):
    """Single-head scaled dot-product self-attention; returns (output, weights (B, n, n))."""
    import torch

    q, k, v = x @ wq, x @ wk, x @ wv
    w = torch.softmax(q @ k.transpose(1, 2) / math.sqrt(q.size(-1)), dim=-1)
    return w @ v, w


def path_length(kind: str, n: int, *, d: int = 8, kernel: int = 3, seed: int = 0) -> int:
    """Layers (conv, attention) or steps (RNN) until output n depends on input 1: the smallest L
    with ∂y_n/∂x_1 ≠ 0."""
    import torch
    from torch import nn

    torch.manual_seed(seed)
    x = torch.randn(1, n, d, requires_grad=True)
    if kind == "rnn":
        cell = nn.GRUCell(d, d)
        h = torch.zeros(1, d)
        outs = []
        for t in range(n):
            h = cell(x[:, t], h)
            outs.append(h)
        # output n reached input 1 through n-1 recurrent steps (the sequential chain)
        (g,) = torch.autograd.grad(outs[-1].sum(), x)
        return n - 1 if float(g[0, 0].abs().sum()) > 0 else -1
    for L in range(1, n + 1):
        y = x
        for _ in range(L):
            if kind == "conv":
                conv = nn.Conv1d(d, d, kernel, padding=kernel - 1)
                y = torch.tanh(conv(y.transpose(1, 2))[..., : n].transpose(1, 2))  # causal: left padding only
            else:
                w = [torch.randn(d, d) / math.sqrt(d) for _ in range(3)]
                y, _ = attention(y, *w)
        (g,) = torch.autograd.grad(y[0, -1].sum(), x)
        if float(g[0, 0].abs().sum()) > 0:
            return L
    return -1


def timed(fn, repeats: int) -> float:
    """Best of ``repeats`` wall times (the minimum is least disturbed by other processes)."""
    best = float("inf")
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t0)
    return best


def slope(ns, ys) -> float:
    return float(np.polyfit(np.log(ns), np.log(ys), 1)[0])


def _figures(plt, ns, rows, paths, n_path) -> tuple:
    """The two figures as PNG bytes: time and memory against n (log-log), and the measured path lengths."""
    scaling, path = figure_objects(plt, ns, rows, paths, n_path)
    return png_of(scaling), png_of(path)


def _lengths_axis(ax, ns) -> None:
    """The measured lengths as the x ticks, and no minor labels: a log axis labels 2x10^2, 3x10^2 ... by
    itself, and they ran into each other."""
    from matplotlib.ticker import NullFormatter

    ax.set_xticks(list(ns))
    ax.set_xticklabels([f"{n:,}" for n in ns])
    ax.xaxis.set_minor_formatter(NullFormatter())


def figure_objects(plt, ns, rows, paths, n_path) -> tuple:
    """The two matplotlib figures (the tests measure their tick labels)."""
    fig, axes = plt.subplots(1, 2, figsize=(11, 4))
    for key, col, label in (("attention_s", COLOURS["self-attention"], "self-attention"),
                            ("rnn_s", COLOURS["RNN (GRU)"], "RNN (GRU)"),
                            ("conv_s", COLOURS["CNN (kernel 3)"], "CNN (kernel 3)")):
        axes[0].loglog(ns, [r[key] for r in rows], "o-", color=col, label=label)
    nsa = np.array(ns, dtype=float)
    ref = rows[-1]["attention_s"] * (nsa / nsa[-1]) ** 2
    axes[0].loglog(ns, ref, "k:", lw=0.8, label="∝ n²")
    _lengths_axis(axes[0], ns)
    axes[0].set_xlabel("sequence length n")
    axes[0].set_ylabel("seconds per forward (best of repeats)")
    axes[0].legend(fontsize=8)
    axes[1].loglog(ns, [r["attention_weight_bytes"] for r in rows], "o-", color=COLOURS["self-attention"],
                   label="attention weights (B·n² floats)")
    axes[1].loglog(ns, [r["activation_bytes"] for r in rows], "s-", color="#0072B2", label="the input itself (B·n·d)")
    _lengths_axis(axes[1], ns)
    axes[1].set_xlabel("sequence length n")
    axes[1].set_ylabel("bytes")
    axes[1].legend(fontsize=8)
    scaling = fig

    fig, ax = plt.subplots(figsize=(6, 3.5))
    names = ["CNN, kernel 3", "RNN", "self-attention"]
    vals = [paths["conv"], paths["rnn"], paths["attention"]]
    ax.bar(names, vals, color=[COLOURS["CNN (kernel 3)"], COLOURS["RNN (GRU)"], COLOURS["self-attention"]])
    ax.set_ylabel(f"layers / steps from input 1 to output {n_path}")
    return scaling, fig


def run(*, seed: int = 0, quick: bool = False, d: int = 64, batch: int = 4) -> LabResult:
    import torch
    from torch import nn

    plt = pyplot()
    torch.manual_seed(seed)
    ns = [64, 128, 256, 512] if quick else [128, 256, 512, 1024, 2048, 4096]
    repeats = 2 if quick else 3
    wq, wk, wv = (torch.randn(d, d) / math.sqrt(d) for _ in range(3))
    gru = nn.GRU(d, d, batch_first=True)
    conv = nn.Conv1d(d, d, 3, padding=1)
    rows = []
    with torch.no_grad():
        for n in ns:
            x = torch.randn(batch, n, d)
            _, w = attention(x, wq, wk, wv)
            rows.append({
                "n": n,
                "attention_s": timed(lambda: attention(x, wq, wk, wv), repeats),
                "rnn_s": timed(lambda: gru(x), repeats),
                "conv_s": timed(lambda: conv(x.transpose(1, 2)), repeats),
                "attention_weight_bytes": int(w.element_size() * w.nelement()),
                "activation_bytes": int(x.element_size() * x.nelement()),
            })
    nsa = np.array(ns, dtype=float)
    tail = slice(len(ns) // 2, None)  # slopes over the larger half: fixed overheads dominate small n
    slopes = {"attention_time": slope(nsa[tail], [r["attention_s"] for r in rows][tail]),
              "rnn_time": slope(nsa[tail], [r["rnn_s"] for r in rows][tail]),
              "conv_time": slope(nsa[tail], [r["conv_s"] for r in rows][tail]),
              "attention_memory": slope(nsa, [r["attention_weight_bytes"] for r in rows])}
    x = torch.randn(1, 50, d)
    perm = torch.randperm(50)
    with torch.no_grad():
        equivariance_error = float((attention(x[:, perm], wq, wk, wv)[0] - attention(x, wq, wk, wv)[0][:, perm])
                                   .abs().max())
    n_path = 16 if quick else 32
    paths = {"conv": path_length("conv", n_path, seed=seed), "rnn": path_length("rnn", n_path, seed=seed),
             "attention": path_length("attention", n_path, seed=seed)}

    scaling, path_png = _figures(plt, ns, rows, paths, n_path)

    big = rows[-1]
    n_ex, k_ex = big["n"], 3
    theory = [
        ["convolution (kernel k)", "O(k·n·d²)", "O(1)", "O(n/k)", f"{k_ex * n_ex * d * d:.3g}",
         f"{paths['conv']} layers (n = {n_path})"],
        ["recurrent", "O(n·d²)", "O(n)", "O(n)", f"{n_ex * d * d:.3g}", f"{paths['rnn']} steps (n = {n_path})"],
        ["self-attention", "O(n²·d)", "O(1)", "O(1)", f"{n_ex * n_ex * d:.3g}",
         f"{paths['attention']} layer (n = {n_path})"],
    ]
    return LabResult(
        name=NAME,
        title="CNN vs RNN vs self-attention: the cost table, measured",
        section=SECTION,
        intro=(f"Width d = {d}, batch {batch}, n = {ns[0]}…{ns[-1]}; single-head attention, one GRU layer, one "
               "kernel-3 convolution, forward passes timed on CPU (best of repeats; the absolute times depend on the "
               "machine and its load, the slopes much less)."),
        headline=[
            (f"attention weights at n = {ns[-1]}", f"{big['attention_weight_bytes'] / 2 ** 20:.1f} MiB "
                                                    f"(input: {big['activation_bytes'] / 2 ** 20:.1f} MiB)"),
            ("log-log slope against n: attention memory / attention time / RNN time / CNN time",
             f"{slopes['attention_memory']:.2f} / {slopes['attention_time']:.2f} / {slopes['rnn_time']:.2f} / "
             f"{slopes['conv_time']:.2f}"),
            (f"seconds at n = {ns[-1]}: attention / RNN / CNN",
             f"{big['attention_s']:.4f} / {big['rnn_s']:.4f} / {big['conv_s']:.4f}"),
            (f"maximum path length measured at n = {n_path}: CNN (k = 3) / RNN / self-attention",
             f"{paths['conv']} / {paths['rnn']} / {paths['attention']}"),
            ("self-attention without positions, permuted input: max |f(Px) − P·f(x)|", f"{equivariance_error:.1e}"),
        ],
        results={"seed": seed, "quick": quick, "d": d, "batch": batch, "by_n": rows, "slopes": slopes,
                 "path_n": n_path, "path_length": paths, "permutation_equivariance_error": equivariance_error},
        tables=[Table(f"Per layer (Vaswani et al. 2017, Table 1), evaluated at n = {n_ex}, d = {d}, k = {k_ex}",
                      ["layer", "operations", "sequential ops", "max path length", "operations at n, d, k",
                       "path length, measured"], theory),
                Table("Measured by n", ["n", "attention s", "RNN s", "CNN s", "attention weights (bytes)"],
                      [[str(r["n"]), f"{r['attention_s']:.5f}", f"{r['rnn_s']:.5f}", f"{r['conv_s']:.5f}",
                        f"{r['attention_weight_bytes']:,}"] for r in rows])],
        figures=[Figure("scaling", "Time and memory against sequence length", scaling),
                 Figure("path_length", "Maximum path length, measured by autograd", path_png)],
    )
