"""Why scaled dot-product attention divides by √d, measured; and additive scoring beside it.

For q, k with i.i.d. N(0, 1) entries, q·k is a sum of d independent products, each with
mean 0 and variance E[q²]E[k²] = 1, so Var(q·k) = d and Var(q·k/√d) = 1.  Unscaled, the
scores' spread grows like √d and softmax over them approaches one-hot (entropy → 0), where
its gradients vanish.  Additive attention, a(q, k) = w_vᵀ tanh(W_q q + W_k k), needs no such
factor: with weights initialised at variance 1/d the pre-activations keep variance ~2 for
every d, and tanh bounds them anyway.
"""
from __future__ import annotations

import numpy as np

from .output import Figure, LabResult, Table, png_of

NAME = "attention-scaling"
DIMS = [4, 8, 16, 32, 64, 128, 256, 512, 1024]
HIDDEN = 64  # additive attention's hidden width


def dot_variances(*, d: int, n_pairs: int, rng: np.random.Generator) -> tuple[float, float]:
    """Sample variance of q·k and of q·k/√d over n_pairs independent Gaussian pairs."""
    scores = []
    for start in range(0, n_pairs, 2000):  # chunks keep memory small at d = 1024
        m = min(2000, n_pairs - start)
        q, k = rng.standard_normal((m, d)), rng.standard_normal((m, d))
        scores.append(np.einsum("nd,nd->n", q, k))
    s = np.concatenate(scores)
    return float(s.var()), float((s / np.sqrt(d)).var())


class Additive:
    """a(q, k) = w_vᵀ tanh(W_q q + W_k k), randomly initialised (variance 1/fan-in)."""

    def __init__(self, *, d: int, hidden: int, rng: np.random.Generator) -> None:
        self.w_q = rng.standard_normal((d, hidden)) / np.sqrt(d)
        self.w_k = rng.standard_normal((d, hidden)) / np.sqrt(d)
        self.w_v = rng.standard_normal(hidden) / np.sqrt(hidden)

    def scores(self, q: np.ndarray, k: np.ndarray) -> np.ndarray:
        """(n_q, d), (n_k, d) -> (n_q, n_k) scores."""
        pre = (q @ self.w_q)[:, None, :] + (k @ self.w_k)[None, :, :]
        return np.tanh(pre) @ self.w_v


def softmax(s: np.ndarray) -> np.ndarray:
    e = np.exp(s - s.max(axis=-1, keepdims=True))  # shift: exp of large scores would overflow
    return e / e.sum(axis=-1, keepdims=True)


def entropy(w: np.ndarray) -> np.ndarray:
    """Entropy (nats) of each row of attention weights; 0·log 0 counts as 0."""
    return -(w * np.log(np.where(w > 0, w, 1.0))).sum(axis=-1)


def run(*, seed: int = 0, n_pairs: int = 10000, n_queries: int = 200, n_keys: int = 64) -> LabResult:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rng = np.random.default_rng(seed)
    rows = []
    for d in DIMS:
        var_dot, var_scaled = dot_variances(d=d, n_pairs=n_pairs, rng=rng)
        q, k = rng.standard_normal((n_queries, d)), rng.standard_normal((n_keys, d))
        raw = q @ k.T
        additive = Additive(d=d, hidden=HIDDEN, rng=rng).scores(q, k)
        rows.append({
            "d": d, "var_dot": var_dot, "var_dot_over_d": var_dot / d, "var_scaled": var_scaled,
            "var_additive": float(additive.var()),
            "entropy_unscaled": float(entropy(softmax(raw)).mean()),
            "entropy_scaled": float(entropy(softmax(raw / np.sqrt(d))).mean()),
            "entropy_additive": float(entropy(softmax(additive)).mean()),
            "max_weight_unscaled": float(softmax(raw).max(axis=-1).mean()),
        })
    uniform = float(np.log(n_keys))

    ds = np.array(DIMS)
    fig, ax = plt.subplots(figsize=(6, 4))
    ax.loglog(ds, [r["var_dot"] for r in rows], "o-", label="Var(q·k)")
    ax.loglog(ds, ds, "k--", lw=0.8, label="d")
    ax.loglog(ds, [r["var_scaled"] for r in rows], "s-", label="Var(q·k/√d)")
    ax.loglog(ds, [r["var_additive"] for r in rows], "^-", label="Var(additive score)")
    ax.set_xlabel("d")
    ax.set_ylabel("variance of the scores")
    ax.legend()
    var_png = png_of(fig)

    fig, ax = plt.subplots(figsize=(6, 4))
    ax.semilogx(ds, [r["entropy_unscaled"] for r in rows], "o-", label="softmax(q·k)")
    ax.semilogx(ds, [r["entropy_scaled"] for r in rows], "s-", label="softmax(q·k/√d)")
    ax.semilogx(ds, [r["entropy_additive"] for r in rows], "^-", label="softmax(additive)")
    ax.axhline(uniform, color="k", ls="--", lw=0.8, label=f"uniform over {n_keys} keys")
    ax.set_xlabel("d")
    ax.set_ylabel("mean entropy of the weights (nats)")
    ax.legend()
    ent_png = png_of(fig)

    # Side by side: the weights each scoring gives the same 8 queries over 16 keys, at d = 256.
    d = 256
    q, k = rng.standard_normal((8, d)), rng.standard_normal((16, d))
    panels = [("unscaled q·k", softmax(q @ k.T)), ("scaled q·k/√d", softmax(q @ k.T / np.sqrt(d))),
              ("additive", softmax(Additive(d=d, hidden=HIDDEN, rng=rng).scores(q, k)))]
    fig, axes = plt.subplots(1, 3, figsize=(10, 3))
    for ax, (title, w) in zip(axes, panels):
        ax.imshow(w, cmap="Reds", vmin=0, vmax=1)
        ax.set_title(title)
        ax.set_xlabel("key")
        ax.set_ylabel("query")
    heat_png = png_of(fig)

    at = {r["d"]: r for r in rows}
    r256, r1024 = at[256], at[1024]
    return LabResult(
        name=NAME,
        title="Scaled dot-product vs additive attention: the √d argument",
        section="2.2.3 Attention and the Transformer: scaled dot-product attention (exercise: why divide by √d_k)",
        intro=(f"q, k have i.i.d. N(0,1) entries; variances over {n_pairs} pairs per d; entropies over "
               f"{n_queries} queries × {n_keys} keys.  Additive scoring uses a random hidden layer of {HIDDEN} units."),
        headline=[
            ("Var(q·k) / d at d = 256", f"{r256['var_dot_over_d']:.3f}"),
            ("Var(q·k/√d) at d = 256", f"{r256['var_scaled']:.3f}"),
            ("softmax entropy at d = 1024, unscaled / scaled / additive (nats)",
             f"{r1024['entropy_unscaled']:.3f} / {r1024['entropy_scaled']:.3f} / {r1024['entropy_additive']:.3f}"),
            ("mean largest weight, unscaled, d = 1024", f"{r1024['max_weight_unscaled']:.3f}"),
            (f"uniform entropy log {n_keys}", f"{uniform:.3f}"),
        ],
        results={"n_pairs": n_pairs, "n_queries": n_queries, "n_keys": n_keys, "hidden": HIDDEN,
                 "seed": seed, "uniform_entropy": uniform, "by_d": rows},
        tables=[Table("Score variance and softmax entropy by d",
                      ["d", "Var(q·k)", "Var(q·k)/d", "Var(q·k/√d)", "Var(additive)",
                       "H unscaled", "H scaled", "H additive"],
                      [[str(r["d"]), f"{r['var_dot']:.1f}", f"{r['var_dot_over_d']:.3f}", f"{r['var_scaled']:.3f}",
                        f"{r['var_additive']:.3f}", f"{r['entropy_unscaled']:.3f}", f"{r['entropy_scaled']:.3f}",
                        f"{r['entropy_additive']:.3f}"] for r in rows])],
        figures=[Figure("variance", "Score variance against d", var_png),
                 Figure("entropy", "Softmax entropy against d: unscaled saturates to one-hot", ent_png),
                 Figure("weights", "Attention weights at d = 256 (8 queries × 16 keys)", heat_png)],
    )
