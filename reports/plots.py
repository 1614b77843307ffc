"""The report's figures, drawn with matplotlib (Agg backend) from ``results.json`` alone.

Each function takes the results dict and returns PNG bytes, or None when the run
holds no data for that figure.  :func:`all_plots` returns ``{name: png}``.
"""
from __future__ import annotations

import io
import math

import numpy as np
from typing import Optional

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.transforms import blended_transform_factory  # noqa: E402

SIZE = (6.4, 3.6)
DPI = 100
FLOOR_STYLE = dict(color="black", linestyle="--", linewidth=1)


def _png(fig) -> bytes:
    buf = io.BytesIO()
    fig.tight_layout()
    fig.savefig(buf, format="png", dpi=DPI)
    plt.close(fig)
    return buf.getvalue()


def _floor(results: dict) -> Optional[float]:
    truth = (results.get("corpus") or {}).get("truth") or {}
    t = truth.get("test")
    return t["perplexity"] if t else None


UNSEEN_LABEL = "% test n-grams unseen in train (right axis)"


def vwall_figure(results: dict):
    """The V^n wall as a matplotlib figure (None without data): counts on a log axis, and the
    share of unseen test n-grams on a twin axis, all in one legend."""
    rows = results.get("vwall")
    if not rows:
        return None
    n = [r["order"] for r in rows]
    fig, ax = plt.subplots(figsize=SIZE)
    ax.semilogy(n, [10 ** r["possible_log10"] for r in rows], "o-", label="possible n-grams $V^n$")
    ax.semilogy(n, [max(1, r["distinct_train"]) for r in rows], "s-", label="distinct n-grams seen in train")
    ax.semilogy(n, [max(1, r["train_ngram_tokens"]) for r in rows], ":", color="grey", label="n-gram tokens in train")
    ax.semilogy(n, [max(1, r["mle_zero_probs"]) for r in rows], "^-", color="tab:red",
                label="test tokens with MLE probability 0")
    ax.set_xlabel("order n")
    ax.set_ylabel("count (log scale)")
    ax.set_xticks(n)
    ax.set_title(f"The $V^n$ wall (V = {results['corpus']['n_types']:,})")
    ax2 = ax.twinx()
    ax2.plot(n, [100 * r["test_unseen_share"] for r in rows], "d--", color="tab:purple", alpha=0.6,
             label=UNSEEN_LABEL)
    ax2.set_ylabel("% test n-grams unseen in train", color="tab:purple")
    ax2.set_ylim(0, 100)
    # One legend for both axes, drawn on the twin (it is on top, so no line of it crosses the legend).
    handles, labels = [], []
    for a in (ax, ax2):
        h, lab = a.get_legend_handles_labels()
        handles += h
        labels += lab
    ax2.legend(handles, labels, fontsize=7, loc="upper left", framealpha=0.9)
    return fig


def vwall(results: dict) -> Optional[bytes]:
    fig = vwall_figure(results)
    return None if fig is None else _png(fig)


def perplexity_by_order(results: dict) -> Optional[bytes]:
    fig = perplexity_by_order_figure(results)
    return None if fig is None else _png(fig)


def perplexity_by_order_figure(results: dict):
    rows = [r for r in results.get("ngram", []) if r.get("valid")]
    if not rows:
        return None
    fig, ax = plt.subplots(figsize=(9.0, 4.0))
    by = {}
    for r in rows:
        by.setdefault(r["model"], []).append(r)
    for model, rs in by.items():
        rs = sorted(rs, key=lambda r: r["order"])
        xs = [r["order"] for r in rs if r["test"]["ppl"] is not None]
        ys = [r["test"]["ppl"] for r in rs if r["test"]["ppl"] is not None]
        if xs:
            ax.semilogy(xs, ys, "o-", label=rs[0]["label"].rsplit(" ", 1)[0])
        inf = [r["order"] for r in rs if r["test"]["ppl"] is None]
        if inf:
            # Infinite perplexity: a cross at the top edge of the axes.
            top = blended_transform_factory(ax.transData, ax.transAxes)
            ax.plot(inf, [0.97] * len(inf), "x", color="tab:red", markersize=9, transform=top, clip_on=False,
                    label=f"{model}: infinite (test events with probability 0)")
    orders = sorted({r["order"] for r in rows})
    ticks, tick_labels = list(orders), [str(o) for o in orders]
    sec = results.get("infini") or {}
    if sec.get("alone") or sec.get("rows"):
        # n -> ∞: the ∞-gram one step right of the highest order, a point per mixture; alone it is
        # infinite (a cross at the top edge, as for MLE).
        x_inf = orders[-1] + 1
        ticks.append(x_inf)
        tick_labels.append("∞")
        ax.axvline(x_inf - 0.5, color="0.8", linewidth=0.8, linestyle=":")
        for r in sec.get("rows", []):
            if r.get("test") and r["test"].get("ppl") is not None:
                ax.semilogy([x_inf], [r["test"]["ppl"]], "*", markersize=11, label=r["label"])
        if sec.get("alone"):
            top = blended_transform_factory(ax.transData, ax.transAxes)
            ax.plot([x_inf], [0.97], "x", color="tab:red", markersize=9, transform=top, clip_on=False,
                    label="∞-gram alone: infinite (test events with probability 0)")
    greys = ("0.35", "0.55", "0.7", "0.45", "0.6")
    for i, r in enumerate(results.get("neural", [])):
        if r.get("test"):
            ax.axhline(r["test"]["ppl"], linestyle="-.", linewidth=1.2, color=greys[i % len(greys)],
                       label=r["label"])
    floor = _floor(results)
    if floor:
        ax.axhline(floor, label=f"true perplexity (floor) {floor:.1f}", **FLOOR_STYLE)
    ax.set_xlabel("order n")
    ax.set_ylabel("test perplexity (log scale)")
    ax.set_xticks(ticks)
    ax.set_xticklabels(tick_labels)
    ax.set_title("Perplexity against order, per smoother")
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.02, 1.0), borderaxespad=0.0)
    return fig


def count_spectrum(results: dict) -> Optional[bytes]:
    spec = results.get("spectrum")
    if not spec:
        return None
    fig, ax = plt.subplots(figsize=SIZE)
    for k, pairs in sorted(spec.items(), key=lambda kv: int(kv[0])):
        if pairs:
            ax.loglog([c for c, _ in pairs], [n for _, n in pairs], ".", markersize=3, label=f"{k}-grams")
    ax.set_xlabel("count c")
    ax.set_ylabel("$n_c$: distinct n-grams seen c times")
    ax.set_title("Count of counts (the Zipf tail): most n-grams are seen once")
    ax.legend(fontsize=8)
    return _png(fig)


def learning_curves(results: dict) -> Optional[bytes]:
    lc = results.get("learning_curves") or {}
    series = lc.get("series") or []
    if not series:
        return None
    fig, ax = plt.subplots(figsize=SIZE)
    rows = {r["id"]: r for r in results.get("neural", [])}
    for s in series:
        pts = [p for p in s["points"] if p.get("test") and p["test"]["ppl"] is not None]
        if pts:
            line, = ax.loglog([p["train_tokens"] for p in pts], [p["test"]["ppl"] for p in pts],
                              "o-" if s["family"] == "ngram" else "s-", label=s["label"])
            row, full = rows.get(s["id"]), pts[-1]
            if s["family"] == "neural" and row and (row.get("test") or {}).get("ppl") and full.get("key") != row.get("key"):
                # The results table's model (the main budget), where the curve's 100 % point is another run.
                ax.plot([row["train_tokens"]], [row["test"]["ppl"]], "*", markersize=13, color=line.get_color(),
                        label=f"{row['label']}: the results table's model")
    floor = _floor(results)
    if floor:
        ax.axhline(floor, label=f"true perplexity (floor) {floor:.1f}", **FLOOR_STYLE)
    ax.set_xlabel("training tokens (log scale)")
    ax.set_ylabel("test perplexity (log scale)")
    ax.set_title("Learning curves")
    ax.legend(fontsize=8)
    return _png(fig)


def interpolation(results: dict) -> Optional[bytes]:
    rows = results.get("interpolation") or []
    if not rows:
        return None
    fig, ax = plt.subplots(figsize=SIZE)
    for r in rows:
        xs, ys = zip(*r["curve"])
        line, = ax.plot(xs, ys, "-", label=f"{r['components'][0]} + {r['components'][1]}")
        ax.plot([r["lambda"]], [r["valid"]["ppl"]], "o", color=line.get_color())
    ax.set_xlabel("weight of the n-gram model $\\lambda$")
    ax.set_ylabel("validation perplexity")
    ax.set_title("$p = \\lambda\\, p_{ngram} + (1-\\lambda)\\, p_{neural}$, tuned on validation")
    ax.legend(fontsize=8)
    return _png(fig)


def effective_n(results: dict) -> Optional[bytes]:
    sec = results.get("infini")
    if not sec:
        return None
    fig, ax = plt.subplots(figsize=SIZE)
    xs = np.arange(1, len(sec["effective_n_hist"]) + 1)
    total = max(1, sum(sec["effective_n_hist"]))
    ax.bar(xs, [100.0 * h / total for h in sec["effective_n_hist"]], color="#bbbbbb", label="test tokens (%)")
    ax.set_xticks(xs, sec["buckets"])
    ax.set_xlabel("effective n (longest history the training text holds + 1)")
    ax.set_ylabel("share of test tokens (%)")
    ax2 = ax.twinx()
    for partner in dict.fromkeys(r["partner"] for r in sec["by_n"]):
        pts = [r for r in sec["by_n"] if r["partner"] == partner]
        k = [r["effective_n"] for r in pts]
        line, = ax2.plot(k, [r["bits_partner"] for r in pts], "o--", label=f"{pts[0]['label']}")
        ax2.plot(k, [r["bits_mixture"] for r in pts], "o-", color=line.get_color(), label=f"∞-gram + {pts[0]['label']}")
    ax2.set_ylabel("bits per token")
    ax2.legend(fontsize=7, loc="best")
    ax.set_title("n → ∞: how long a history the training text supports")
    return _png(fig)


def attention_labels(att: dict) -> list:
    """The attention view's token labels, the first one ``<s>``: the Transformer reads the passage
    after the sentence-start symbol, whose id is the one ``</s>`` has (results.json may name it so)."""
    tokens = list(att.get("tokens") or [])
    return ["<s>"] + tokens[1:] if tokens else tokens


def attention_static(results: dict) -> Optional[bytes]:
    """Mean attention over the last layer's heads (the HTML report has the interactive view)."""
    att = results.get("attention")
    if not att or not att.get("log_weights"):
        return None
    heads = att["log_weights"][-1]
    T = len(att["tokens"])
    mean = [[0.0] * T for _ in range(T)]
    for h in heads:
        for i in range(T):
            for j in range(T):
                v = h[i][j]
                if v is not None:
                    mean[i][j] += math.exp(v) / len(heads)
    labels = attention_labels(att)
    fig, ax = plt.subplots(figsize=(6.4, 6.0))
    ax.imshow(mean, cmap="viridis")
    ax.set_xticks(range(T))
    ax.set_yticks(range(T))
    ax.set_xticklabels(labels, rotation=90, fontsize=6)
    ax.set_yticklabels(labels, fontsize=6)
    ax.set_xlabel("attended token")
    ax.set_ylabel("reading token")
    ax.set_title(f"{att['label']}: last layer, mean over heads")
    return _png(fig)


def all_plots(results: dict, functions: dict) -> dict:
    """``{name: PNG bytes}`` of the figures ``functions`` (name -> fn(results)) draw from these results
    (the report's sections say which figures they show: reports.sections.plot_functions)."""
    out = {}
    for name, fn in functions.items():
        png = fn(results)
        if png is not None:
            out[name] = png
    return out
