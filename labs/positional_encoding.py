"""Sinusoidal positional encodings (Vaswani et al., 2017) and their two key properties.

P[i, 2j] = sin(i·ω_j), P[i, 2j+1] = cos(i·ω_j), with ω_j = 1 / 10000^(2j/d).

1. For a fixed offset k, P[i+k] = M_k P[i], where M_k is block-diagonal with one 2×2
   rotation by angle k·ω_j per frequency (the sum formulas for sin and cos).  M_k does not
   depend on i, so "k positions later" is a linear map a layer can learn.
2. P[i]·P[j] = Σ_j cos((i-j)·ω_j): the dot product depends only on the offset i-j (and is
   even in it), so attention scores built from it can see relative distance.
"""
from __future__ import annotations

import numpy as np

from .output import Figure, LabResult, Table, png_of

NAME = "positional-encoding"
BASE = 10000.0


def frequencies(*, d: int) -> np.ndarray:
    """ω_j = 1 / 10000^(2j/d) for j = 0 .. d/2-1 (d even)."""
    return 1.0 / BASE ** (np.arange(0, d, 2) / d)


def encodings(*, n_positions: int, d: int) -> np.ndarray:
    """The (n_positions, d) matrix P; even columns sin, odd columns cos."""
    if d % 2:
        raise ValueError(f"d must be even (sin/cos pairs), got {d}")
    angles = np.arange(n_positions)[:, None] * frequencies(d=d)[None, :]
    p = np.empty((n_positions, d))
    p[:, 0::2] = np.sin(angles)
    p[:, 1::2] = np.cos(angles)
    return p


def rotation(*, k: int, d: int) -> np.ndarray:
    """M_k with P[i+k] = M_k @ P[i]: per pair (sin a, cos a), rotate by b = k·ω_j, because
    sin(a+b) = sin a cos b + cos a sin b and cos(a+b) = cos a cos b - sin a sin b."""
    m = np.zeros((d, d))
    for j, w in enumerate(frequencies(d=d)):
        c, s = np.cos(k * w), np.sin(k * w)
        m[2 * j:2 * j + 2, 2 * j:2 * j + 2] = [[c, s], [-s, c]]
    return m


def rotation_error(p: np.ndarray, *, k: int) -> float:
    """max |P[i+k] - M_k P[i]| over all i with i+k in range."""
    m = rotation(k=k, d=p.shape[1])
    return float(np.abs(p[k:] - p[:-k] @ m.T).max())


def offset_spread(p: np.ndarray, *, max_offset: int) -> tuple[np.ndarray, float]:
    """For each offset δ = 0..max_offset: the mean of P[i]·P[i+δ] over i, and the largest
    (max - min) over i of any δ -- zero if the dot product depends only on δ."""
    gram = p @ p.T
    n = len(p)
    means, spread = [], 0.0
    for delta in range(max_offset + 1):
        diag = np.diagonal(gram, offset=delta)[: n - max_offset]
        means.append(diag.mean())
        spread = max(spread, float(diag.max() - diag.min()))
    # P[i]·P[j] is also even in the offset: the gram matrix is symmetric by construction.
    return np.array(means), spread


def run(*, seed: int = 0, d: int = 64, n_positions: int = 200) -> LabResult:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    del seed  # deterministic: nothing random here
    p = encodings(n_positions=n_positions, d=d)
    offsets = [1, 5, 20, 100]
    errors = {k: rotation_error(p, k=k) for k in offsets}
    max_offset = 60
    means, spread = offset_spread(p, max_offset=max_offset)
    closed = np.array([np.cos(delta * frequencies(d=d)).sum() for delta in range(max_offset + 1)])
    closed_err = float(np.abs(means - closed).max())

    fig, ax = plt.subplots(figsize=(7, 3))
    for col in (4, 5, 6, 7):
        ax.plot(np.arange(n_positions), p[:, col], label=f"dim {col}")
    ax.set_xlabel("position i")
    ax.set_ylabel("P[i, dim]")
    ax.legend()
    curves = png_of(fig)

    fig, ax = plt.subplots(figsize=(7, 4))
    im = ax.imshow(p, aspect="auto", cmap="RdBu", vmin=-1, vmax=1)
    ax.set_xlabel("dimension")
    ax.set_ylabel("position")
    fig.colorbar(im, ax=ax)
    heat = png_of(fig)

    fig, ax = plt.subplots(figsize=(7, 3))
    ax.plot(range(max_offset + 1), means, "o", ms=3, label="measured mean of P[i]·P[i+δ]")
    ax.plot(range(max_offset + 1), closed, label="Σ cos(δ·ω_j)")
    ax.set_xlabel("offset δ")
    ax.set_ylabel("dot product")
    ax.legend()
    dots = png_of(fig)

    worst = max(errors.values())
    return LabResult(
        name=NAME,
        title="Sinusoidal positional encoding",
        section="2.2.3 Attention and the Transformer: multi-head attention and positional encoding",
        intro=(f"P is {n_positions} positions × d = {d} dimensions.  Low dimensions oscillate fast, high ones "
               "slowly (frequencies 1 … 1/10000), like the bits of a binary counter."),
        headline=[
            (f"max |P[i+k] - M_k·P[i]| over i, k in {offsets}", f"{worst:.2e}"),
            (f"max spread of P[i]·P[i+δ] over i, δ = 0..{max_offset}", f"{spread:.2e}"),
            ("max |mean P[i]·P[i+δ] - Σ_j cos(δ·ω_j)|", f"{closed_err:.2e}"),
        ],
        results={"d": d, "n_positions": n_positions,
                 "rotation_error": {str(k): v for k, v in errors.items()},
                 "rotation_error_max": worst, "dot_offset_spread": spread,
                 "dot_closed_form_error": closed_err,
                 "dot_by_offset": [round(float(x), 6) for x in means]},
        tables=[Table("Rotation identity P[i+k] = M_k P[i]", ["k", "max error"],
                      [[str(k), f"{v:.2e}"] for k, v in errors.items()])],
        figures=[Figure("curves", "Dimensions 4-7 against position", curves),
                 Figure("heatmap", "P: positions × dimensions", heat),
                 Figure("dot_by_offset", "P[i]·P[i+δ] depends only on δ", dots)],
    )
