"""Attention pooling as kernel regression (Nadaraya 1964, Watson 1964).

Queries are test inputs x, keys are training inputs x_i, values are training targets y_i.
The prediction is Σ_i α(x, x_i) y_i with weights α = softmax over i of -((x - x_i)·w)²/2,
a Gaussian kernel of width 1/w:
- average pooling: every α = 1/n (w = 0), ignores the query altogether;
- fixed kernel: w = 1;
- learned width: w fitted by gradient descent (torch) on the leave-one-out squared error --
  each training point predicted from the others, because with itself included the best w
  is infinite (every point predicts itself exactly, which the narrow-kernel check shows).
"""
from __future__ import annotations

import numpy as np

from .output import Figure, LabResult, Table, png_of

NAME = "nadaraya-watson"


def target(x: np.ndarray) -> np.ndarray:
    """The noiseless function y = 2 sin x + x^0.8."""
    return 2 * np.sin(x) + x ** 0.8


def make_data(*, n_train: int, noise: float, rng: np.random.Generator):
    x_train = np.sort(rng.uniform(0, 5, n_train))
    y_train = target(x_train) + rng.normal(0, noise, n_train)
    x_test = np.arange(0, 5, 0.1)
    return x_train, y_train, x_test


def weights(x_query: np.ndarray, x_keys: np.ndarray, *, w: float) -> np.ndarray:
    """(n_query, n_keys) attention weights of a Gaussian kernel with inverse width w."""
    s = -0.5 * ((x_query[:, None] - x_keys[None, :]) * w) ** 2
    e = np.exp(s - s.max(axis=1, keepdims=True))  # shift: a narrow kernel underflows every exp otherwise
    return e / e.sum(axis=1, keepdims=True)


def learn_width(x_train: np.ndarray, y_train: np.ndarray, *, steps: int, lr: float, w0: float = 1.0):
    """Fit w by full-batch gradient descent on the leave-one-out MSE; return (w, loss curve)."""
    import torch

    x = torch.tensor(x_train)
    y = torch.tensor(y_train)
    log_w = torch.tensor(float(np.log(w0)), requires_grad=True)  # log: keeps w positive
    opt = torch.optim.Adam([log_w], lr=lr)
    self_mask = torch.eye(len(x), dtype=torch.bool)
    losses = []
    for _ in range(steps):
        scores = -0.5 * ((x[:, None] - x[None, :]) * log_w.exp()) ** 2
        alpha = torch.softmax(scores.masked_fill(self_mask, float("-inf")), dim=1)  # leave one out
        loss = ((alpha @ y - y) ** 2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(float(loss.detach()))
    return float(log_w.detach().exp()), losses


def run(*, seed: int = 0, n_train: int = 50, noise: float = 0.5, steps: int = 200) -> LabResult:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rng = np.random.default_rng(seed)
    x_train, y_train, x_test = make_data(n_train=n_train, noise=noise, rng=rng)
    y_clean = target(x_test)
    w_learned, losses = learn_width(x_train, y_train, steps=steps, lr=0.05)
    # Narrow: a width 1/100 of the closest pair of training inputs, so each training point's
    # weight on any other is below exp(-5000) -- zero in float64.
    min_gap = float(np.diff(x_train).min())
    w_narrow = 100.0 / min_gap

    def mse(a, b):
        return float(((a - b) ** 2).mean())

    preds = {
        "average pooling": np.full_like(x_test, y_train.mean()),
        "Nadaraya-Watson, w = 1": weights(x_test, x_train, w=1.0) @ y_train,
        f"Nadaraya-Watson, learned w = {w_learned:.2f}": weights(x_test, x_train, w=w_learned) @ y_train,
        "narrow kernel": weights(x_test, x_train, w=w_narrow) @ y_train,
    }
    test_mse = {k: mse(v, y_clean) for k, v in preds.items()}
    keys = list(preds)
    narrow_train_err = float(np.abs(weights(x_train, x_train, w=w_narrow) @ y_train - y_train).max())

    fig, ax = plt.subplots(figsize=(7, 4))
    ax.plot(x_test, y_clean, "k", lw=2, label="truth 2 sin x + x^0.8")
    ax.plot(x_train, y_train, "o", color="gray", ms=4, alpha=0.6, label="training points")
    for name in keys[:3]:
        ax.plot(x_test, preds[name], label=name)
    ax.set_xlabel("x")
    ax.set_ylabel("y")
    ax.legend(fontsize=8)
    fits = png_of(fig)

    fig, axes = plt.subplots(1, 2, figsize=(10, 4))
    for ax, (title, w) in zip(axes, [("w = 1", 1.0), (f"learned w = {w_learned:.2f}", w_learned)]):
        im = ax.imshow(weights(x_test, x_train, w=w), cmap="Reds", aspect="auto")
        ax.set_title(title)
        ax.set_xlabel("training input (sorted)")
        ax.set_ylabel("test input")
        fig.colorbar(im, ax=ax)
    heat = png_of(fig)

    fig, ax = plt.subplots(figsize=(6, 3))
    ax.plot(losses)
    ax.set_xlabel("step")
    ax.set_ylabel("leave-one-out MSE")
    loss_png = png_of(fig)

    return LabResult(
        name=NAME,
        title="Attention pooling as Nadaraya-Watson kernel regression",
        section="Attention mechanism: score, normalise (softmax), weighted sum (attention pooling)",
        intro=(f"{n_train} noisy training points of y = 2 sin x + x^0.8 + N(0, {noise}²) on [0, 5); "
               f"{len(x_test)} test inputs scored against the clean function.  The learned width "
               f"minimises the leave-one-out error ({steps} Adam steps on log w)."),
        headline=[
            ("test MSE, average pooling", f"{test_mse[keys[0]]:.4f}"),
            ("test MSE, Nadaraya-Watson w = 1", f"{test_mse[keys[1]]:.4f}"),
            (f"test MSE, learned w = {w_learned:.3f}", f"{test_mse[keys[2]]:.4f}"),
            (f"test MSE, narrow kernel w = {w_narrow:.3g} (overfits the noise)", f"{test_mse[keys[3]]:.4f}"),
            ("narrow kernel, max error on the training points (point included)", f"{narrow_train_err:.2e}"),
        ],
        results={"seed": seed, "n_train": n_train, "noise": noise, "steps": steps,
                 "w_learned": w_learned, "w_narrow": w_narrow, "loo_loss_first": losses[0], "loo_loss_last": losses[-1],
                 "test_mse": {"average": test_mse[keys[0]], "fixed": test_mse[keys[1]],
                              "learned": test_mse[keys[2]], "narrow": test_mse[keys[3]]},
                 "narrow_train_max_error": narrow_train_err},
        tables=[Table("Test MSE against the clean function", ["pooling", "test MSE"],
                      [[k, f"{v:.4f}"] for k, v in test_mse.items()])],
        figures=[Figure("fits", "Fits on the test inputs", fits),
                 Figure("weights", "Attention weights: test inputs × training inputs", heat),
                 Figure("loss", "Leave-one-out loss while learning w", loss_png)],
    )
