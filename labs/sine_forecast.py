"""k-step-ahead prediction of a noisy sine with an autoregressive model: errors accumulate.

The series x_t = sin(0.01·t) + ε_t, ε_t ~ N(0, 0.2²), t = 1..1000.  An autoregressive model
with the Markov assumption of order τ predicts x_t from (x_{t-τ}, …, x_{t-1}); here a small
MLP (τ = 4 → 10 tanh units → 1) fitted on the first 600 points by least squares (Adam).

- one-step-ahead: every prediction is made from *observed* values -- it tracks the curve;
- k-step-ahead: from the observations up to t-1, predict x_t, feed the prediction back in as
  if observed, and so on k times; each step inherits the previous steps' errors;
- free-running from t = 604 to the end: the extreme case, k up to ~400.

The error of the k-step-ahead predictions is measured against the clean sine on the
held-out points t > 600 for k = 1, 2, 4, 8, 16, 32, 64.
"""
from __future__ import annotations

import numpy as np

from ._common import pyplot, set_seed
from . import LABS
from .output import Figure, LabResult, Table, png_of

NAME = "sine-forecast"
SECTION = LABS[NAME].section
KS = (1, 2, 4, 8, 16, 32, 64)


def make_series(*, T: int, noise: float, rng: np.random.Generator):
    t = np.arange(1, T + 1, dtype=float)
    clean = np.sin(0.01 * t)
    return t, clean, clean + rng.normal(0, noise, T)


def fit_mlp(features: np.ndarray, labels: np.ndarray, *, epochs: int, seed: int):
    import torch
    from torch import nn

    set_seed(seed)
    net = nn.Sequential(nn.Linear(features.shape[1], 10), nn.Tanh(), nn.Linear(10, 1))
    X = torch.tensor(features, dtype=torch.float32)
    y = torch.tensor(labels, dtype=torch.float32)[:, None]
    opt = torch.optim.Adam(net.parameters(), lr=0.01)
    losses = []
    for _ in range(epochs):
        for idx in torch.randperm(len(X)).split(16):
            loss = ((net(X[idx]) - y[idx]) ** 2).mean()
            opt.zero_grad()
            loss.backward()
            opt.step()
        with torch.no_grad():
            losses.append(float(((net(X) - y) ** 2).mean()))
    return net, losses


def k_step(net, x: np.ndarray, *, tau: int, k: int, start: int) -> np.ndarray:
    """pred[t] for t = start.. : x_t predicted k steps ahead, i.e. from observations up to t-k only."""
    import torch

    T = len(x)
    firsts = np.arange(start - k + 1, T - k + 1)  # first predicted index of each chain; chain ends at t = first + k - 1
    window = np.stack([x[f - tau:f] for f in firsts])  # observed values before each chain
    with torch.no_grad():
        for _ in range(k):
            nxt = net(torch.tensor(window, dtype=torch.float32)).numpy()[:, 0]
            window = np.concatenate([window[:, 1:], nxt[:, None]], axis=1)
    return nxt  # the k-th prediction of each chain: x at firsts + k - 1 = start..T-1


def run(*, seed: int = 0, quick: bool = False, tau: int = 4, noise: float = 0.2, n_train: int = 600) -> LabResult:
    import torch

    plt = pyplot()
    T = 1000
    rng = np.random.default_rng(seed)
    t, clean, x = make_series(T=T, noise=noise, rng=rng)
    feats = np.stack([x[i - tau:i] for i in range(tau, T)])  # row i-tau predicts x[i]
    labels = x[tau:]
    net, losses = fit_mlp(feats[: n_train - tau], labels[: n_train - tau], epochs=5 if quick else 20, seed=seed)

    start = n_train  # held-out region: indices n_train..T-1 (t > 600)
    preds = {k: k_step(net, x, tau=tau, k=k, start=start) for k in KS}
    mse_clean = {k: float(np.mean((p - clean[start:]) ** 2)) for k, p in preds.items()}
    mse_obs = {k: float(np.mean((p - x[start:]) ** 2)) for k, p in preds.items()}
    # free-running from the end of training: feed predictions back until the end of the series
    free = list(x[n_train - tau:n_train])
    with torch.no_grad():
        for _ in range(n_train, T):
            free.append(float(net(torch.tensor(free[-tau:], dtype=torch.float32)[None])[0, 0]))
    free = np.array(free[tau:])
    free_mse = float(np.mean((free - clean[n_train:]) ** 2))
    lin = np.linalg.lstsq(np.c_[feats[: n_train - tau], np.ones(n_train - tau)], labels[: n_train - tau], rcond=None)[0]

    fig, axes = plt.subplots(2, 1, figsize=(9, 6), sharex=True)
    axes[0].plot(t, x, color="#999999", lw=0.6, label="observed x_t")
    one = k_step(net, x, tau=tau, k=1, start=tau)
    axes[0].plot(t[tau:], one, color="#0072B2", lw=1, label="1-step-ahead")
    axes[0].plot(t[n_train:], free, color="#D55E00", lw=1.5, label=f"free-running from t = {n_train}")
    axes[0].axvline(n_train, color="k", ls=":", lw=0.8)
    axes[0].legend(fontsize=8)
    axes[0].set_ylabel("x")
    for k, c in zip((1, 4, 16, 64), ("#0072B2", "#009E73", "#E69F00", "#D55E00")):
        axes[1].plot(t[start:], preds[k], color=c, lw=1, label=f"{k}-step-ahead")
    axes[1].plot(t[start:], clean[start:], "k--", lw=0.8, label="clean sin(0.01 t)")
    axes[1].set_xlabel("t")
    axes[1].set_ylabel("x")
    axes[1].legend(fontsize=8, ncol=3)
    series_png = png_of(fig)

    fig, ax = plt.subplots(figsize=(6, 4))
    ax.loglog(KS, [mse_clean[k] for k in KS], "o-", color="#D55E00", label="MSE against the clean sine")
    ax.loglog(KS, [mse_obs[k] for k in KS], "s-", color="#0072B2", label="MSE against the observations")
    ax.axhline(noise ** 2, color="k", ls=":", lw=0.8, label=f"noise variance {noise ** 2:.2f}")
    ax.set_xlabel("k (steps ahead)")
    ax.set_ylabel(f"MSE on t > {n_train}")
    ax.legend(fontsize=8)
    mse_png = png_of(fig)

    return LabResult(
        name=NAME,
        title="k-step-ahead prediction: errors accumulate",
        section=SECTION,
        intro=(f"x_t = sin(0.01 t) + N(0, {noise}²), t = 1..{T}; an MLP AR({tau}) model fitted on t ≤ {n_train}; "
               f"predictions scored on t > {n_train}.  (A linear AR({tau}) fit by least squares has weights "
               f"{', '.join(f'{w:.2f}' for w in lin[:-1])}: it averages the last {tau} values to denoise them.)"),
        headline=[
            ("MSE against the clean sine, k = 1 / 4 / 16 / 64",
             " / ".join(f"{mse_clean[k]:.4f}" for k in (1, 4, 16, 64))),
            (f"MSE of the free run t = {n_train + 1}..{T}", f"{free_mse:.4f}"),
            ("free-running prediction at t = 1000 (truth sin 10 = -0.544)", f"{free[-1]:.3f}"),
            ("training MSE (observations, noise variance 0.04)", f"{losses[-1]:.4f}"),
        ],
        results={"seed": seed, "quick": quick, "tau": tau, "noise": noise, "n_train": n_train,
                 "mse_clean": {str(k): v for k, v in mse_clean.items()},
                 "mse_observed": {str(k): v for k, v in mse_obs.items()},
                 "free_run_mse": free_mse, "free_run_last": float(free[-1]), "train_losses": losses,
                 "linear_ar_weights": [float(w) for w in lin]},
        tables=[Table(f"k-step-ahead error on t > {n_train}", ["k", "MSE vs clean", "MSE vs observed"],
                      [[str(k), f"{mse_clean[k]:.4f}", f"{mse_obs[k]:.4f}"] for k in KS])],
        figures=[Figure("series", "One-step-ahead, free-running and k-step-ahead predictions", series_png),
                 Figure("mse", "Error against the prediction horizon k", mse_png)],
    )
