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

# Okabe & Ito's palette (2008): eight colours that readers with any common colour-vision deficiency tell
# apart.  Every figure cycles through it; the families keep one colour each across figures and the
# results table (n-gram vermillion, neural blue, interpolated green, ∞-gram reddish purple).
OKABE_ITO = ("#E69F00", "#56B4E9", "#009E73", "#F0E442", "#0072B2", "#D55E00", "#CC79A7", "#000000")
FAMILY_COLOURS = {"ngram": "#D55E00", "neural": "#0072B2", "interpolated": "#009E73", "infini": "#CC79A7"}
# Lines within one family differ by marker and dash as well as colour, so no colour has to carry them alone.
MARKERS = "osD^vP*Xph<>"
DASHES = ("-", "--", "-.", ":", (0, (5, 1, 1, 1)), (0, (1, 1)))
# The n-gram smoothers' colours: the palette less the neural blue and black (kept for the floor).
SMOOTHER_COLOURS = ("#D55E00", "#E69F00", "#009E73", "#56B4E9", "#CC79A7", "#F0E442", "#999999", "#882255")
matplotlib.rcParams["axes.prop_cycle"] = matplotlib.cycler(color=list(OKABE_ITO))


def png_bytes(fig) -> Optional[bytes]:
    """The figure as PNG bytes, and closed; None for None (a figure function with nothing to draw)."""
    if fig is None:
        return None
    buf = io.BytesIO()
    fig.tight_layout()
    # bbox "tight": a legend placed outside the axes (below or beside) is kept, never clipped.
    fig.savefig(buf, format="png", dpi=DPI, bbox_inches="tight", pad_inches=0.1)
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
    ax.semilogy(n, [max(1, r["train_ngram_tokens"]) for r in rows], ":", color="#999999", label="n-gram tokens in train")
    ax.semilogy(n, [max(1, r["mle_zero_probs"]) for r in rows], "^-", color="#D55E00",
                label="test tokens with MLE probability 0")
    ax.set_xlabel("order n")
    ax.set_ylabel("count (log scale)")
    ax.set_xticks(n)
    ax.set_title(f"The $V^n$ wall (V = {results['corpus']['n_types']:,})")
    ax2 = ax.twinx()
    ax2.plot(n, [100 * r["test_unseen_share"] for r in rows], "d--", color="#CC79A7",
             label=UNSEEN_LABEL)
    ax2.set_ylabel("% test n-grams unseen in train", color="#CC79A7")
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
    return png_bytes(vwall_figure(results))


def perplexity_by_order(results: dict) -> Optional[bytes]:
    return png_bytes(perplexity_by_order_figure(results))


def perplexity_by_order_figure(results: dict):
    """Test perplexity against n, one line per smoother (left: every smoother on a log axis; right: the
    competitive ones zoomed, orders >= 2, where they differ by a few percent and would overlap), the
    neural models as horizontal lines in the neural family's colour, the ∞-gram mixtures at n = ∞."""
    rows = [r for r in results.get("ngram", []) if r.get("valid")]
    if not rows:
        return None
    fig, (ax, zoom) = plt.subplots(1, 2, figsize=(10.0, 4.4), gridspec_kw={"width_ratios": [1.15, 1]})
    by = {}
    for r in rows:
        by.setdefault(r["model"], []).append(r)
    finite = {m: sorted((r for r in rs if r["test"]["ppl"] is not None), key=lambda r: r["order"])
              for m, rs in by.items()}
    styles = {}
    for i, (model, rs) in enumerate(by.items()):
        styles[model] = dict(color=SMOOTHER_COLOURS[i % len(SMOOTHER_COLOURS)], marker=MARKERS[i % len(MARKERS)],
                             linestyle=DASHES[i % len(DASHES)], markersize=5)
        xs = [r["order"] for r in finite[model]]
        ys = [r["test"]["ppl"] for r in finite[model]]
        if xs:
            ax.semilogy(xs, ys, label=rs[0]["label"].rsplit(" ", 1)[0], **styles[model])
        inf = [r["order"] for r in rs if r["test"]["ppl"] is None]
        if inf:
            # Infinite perplexity: a cross at the top edge of the axes.
            top = blended_transform_factory(ax.transData, ax.transAxes)
            ax.plot(inf, [0.97] * len(inf), "x", color=styles[model]["color"], markersize=9, transform=top,
                    clip_on=False, label=f"{rs[0]['label'].rsplit(' ', 1)[0]}: infinite (a test event has probability 0)")
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
        for j, r in enumerate(sec.get("rows", [])):
            if r.get("test") and r["test"].get("ppl") is not None:
                # stars at n = ∞, told apart by colour (the ∞-gram's, then the palette's)
                ax.semilogy([x_inf], [r["test"]["ppl"]], marker="*", linestyle="none",
                            color=(FAMILY_COLOURS["infini"], "#009E73", "#E69F00", "#56B4E9")[j % 4], markersize=11,
                            label=r["label"])
        if sec.get("alone"):
            top = blended_transform_factory(ax.transData, ax.transAxes)
            ax.plot([x_inf], [0.97], "x", color=FAMILY_COLOURS["infini"], markersize=9, transform=top, clip_on=False,
                    label="∞-gram alone: infinite (a test event has probability 0)")
    neural = [r for r in results.get("neural", []) if (r.get("test") or {}).get("ppl") is not None]
    floor = _floor(results)
    for target in (ax, zoom):
        for i, r in enumerate(neural):
            target.axhline(r["test"]["ppl"], linestyle=DASHES[(i + 1) % len(DASHES)], linewidth=1.4,
                           color=FAMILY_COLOURS["neural"], label=r["label"] if target is ax else None)
        if floor:
            target.axhline(floor, label=f"true perplexity (floor) {floor:.1f}" if target is ax else None, **FLOOR_STYLE)
    ax.set_xlabel("order n")
    ax.set_ylabel("test perplexity (log scale)")
    ax.set_xticks(ticks)
    ax.set_xticklabels(tick_labels)
    ax.set_title("Perplexity against order: every smoother")
    # The zoom: orders >= 2 of the smoothers whose best is within 40 % of the overall best, each line
    # nudged sideways a little so equal values (KN and MKN) stay visible side by side.
    best = {m: min(r["test"]["ppl"] for r in rs) for m, rs in finite.items() if rs}
    overall = min(best.values()) if best else None
    shown = [m for m in by if m in best and best[m] <= 1.4 * overall]
    lo, hi = math.inf, 0.0
    for i, m in enumerate(shown):
        pts = [r for r in finite[m] if r["order"] >= 2] or finite[m]
        dx = (i - (len(shown) - 1) / 2) * 0.04
        zoom.plot([r["order"] + dx for r in pts], [r["test"]["ppl"] for r in pts],
                  label=by[m][0]["label"].rsplit(" ", 1)[0], **styles[m])
        lo, hi = min(lo, *(r["test"]["ppl"] for r in pts)), max(hi, *(r["test"]["ppl"] for r in pts))
    if shown:
        extra = [r["test"]["ppl"] for r in neural] + ([floor] if floor else [])
        pad = 0.04 * (hi - lo if hi > lo else hi)
        zoom.set_ylim(min([lo] + [e for e in extra if e >= lo * 0.6]) - pad, hi + pad)
        zoom.set_xticks([o for o in orders if o >= 2] or orders)
        zoom.legend(fontsize=7, loc="best")
    zoom.set_xlabel("order n")
    zoom.set_ylabel("test perplexity")
    zoom.set_title("Zoom: the smoothers within 40 % of the best", fontsize=10)
    zoom.grid(alpha=0.3)
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(0.0, -0.16), ncol=3, borderaxespad=0.0)
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
    return png_bytes(fig)


def learning_curves(results: dict) -> Optional[bytes]:
    return png_bytes(learning_curves_figure(results))


def learning_curves_figure(results: dict):
    lc = results.get("learning_curves") or {}
    series = lc.get("series") or []
    if not series:
        return None
    fig, ax = plt.subplots(figsize=SIZE)
    rows = {r["id"]: r for r in results.get("neural", [])}
    seen: dict = {}
    for s in series:
        pts = [p for p in s["points"] if p.get("test") and p["test"]["ppl"] is not None]
        if pts:
            i = seen[s["family"]] = seen.get(s["family"], -1) + 1  # the family's colour; marker and dash differ
            line, = ax.loglog([p["train_tokens"] for p in pts], [p["test"]["ppl"] for p in pts],
                              color=FAMILY_COLOURS.get(s["family"]), marker=MARKERS[i + (0 if s["family"] == "ngram" else 1)],
                              linestyle=DASHES[i % len(DASHES)], label=s["label"])
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
    return fig


def interpolation(results: dict) -> Optional[bytes]:
    return png_bytes(interpolation_figure(results))


def interpolation_figure(results: dict):
    rows = results.get("interpolation") or []
    if not rows:
        return None
    fig, ax = plt.subplots(figsize=SIZE)
    for r in rows:
        xs, ys = zip(*r["curve"])
        line, = ax.semilogy(xs, ys, "-", label=f"{r['components'][0]} + {r['components'][1]}")
        ax.plot([r["lambda"]], [r["valid"]["ppl"]], "o", color=line.get_color())
    ax.set_xlabel("weight of the n-gram model $\\lambda$")
    ax.set_ylabel("validation perplexity (log scale)")
    ax.grid(alpha=0.3, which="both")
    ax.set_title("$p = \\lambda\\, p_{ngram} + (1-\\lambda)\\, p_{neural}$, tuned on validation")
    ax.legend(fontsize=8)
    return fig


def effective_n(results: dict) -> Optional[bytes]:
    return png_bytes(effective_n_figure(results))


def effective_n_figure(results: dict):
    """Left: how the test tokens spread over the ∞-gram's effective n.  Right: bits per token at each
    effective n, each partner alone (dashed, hollow) and mixed with the ∞-gram (solid, filled), one
    colour per partner, with 95 % error bars (1.96 standard errors of the mean)."""
    sec = results.get("infini")
    if not sec:
        return None
    fig, (ax, ax2) = plt.subplots(1, 2, figsize=(11.0, 3.8))
    xs = np.arange(1, len(sec["effective_n_hist"]) + 1)
    total = max(1, sum(sec["effective_n_hist"]))
    ax.bar(xs, [100.0 * h / total for h in sec["effective_n_hist"]], color=FAMILY_COLOURS["infini"], alpha=0.8)
    ax.set_xticks(xs, sec["buckets"])
    ax.set_xlabel("effective n (longest history the training text holds + 1)")
    ax.set_ylabel("share of test tokens (%)")
    ax.set_title("Where the test tokens fall")
    partners = list(dict.fromkeys(r["partner"] for r in sec["by_n"]))
    for i, partner in enumerate(partners):
        pts = [r for r in sec["by_n"] if r["partner"] == partner]
        colour = OKABE_ITO[(i + 4) % len(OKABE_ITO)] if i < 7 else None
        dx = (i - (len(partners) - 1) / 2) * 0.08  # side by side, so the error bars do not hide each other
        k = np.array([r["effective_n"] for r in pts], dtype=float) + dx
        for key, style, label in (("partner", dict(linestyle="--", markerfacecolor="white"), pts[0]["label"]),
                                  ("mixture", dict(linestyle="-"), f"∞-gram + {pts[0]['label']}")):
            err = [1.96 * r[f"se_{key}"] for r in pts] if all(f"se_{key}" in r for r in pts) else None
            ax2.errorbar(k + (0.03 if key == "mixture" else -0.03), [r[f"bits_{key}"] for r in pts], yerr=err,
                         marker=MARKERS[i % len(MARKERS)], color=colour, capsize=2, markersize=5, linewidth=1.2,
                         label=label, **style)
    ax2.set_xticks(xs, sec["buckets"])
    ax2.set_xlabel("effective n")
    ax2.set_ylabel("test bits per token")
    ax2.set_title("Bits per token by effective n (95 % error bars)")
    ax2.grid(alpha=0.3)
    ax2.legend(fontsize=7, loc="best")
    fig.suptitle("n → ∞: how long a history the training text supports", fontsize=11)
    return fig


def attention_labels(att: dict) -> list:
    """The attention view's token labels, the first one ``<s>``: the Transformer reads the passage
    after the sentence-start symbol, whose id is the one ``</s>`` has (results.json may name it so)."""
    tokens = list(att.get("tokens") or [])
    return ["<s>"] + tokens[1:] if tokens else tokens


def attention_static(results: dict) -> Optional[bytes]:
    return png_bytes(attention_static_figure(results))


def attention_static_figure(results: dict):
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
    image = ax.imshow(mean, cmap="viridis", vmin=0.0)
    fig.colorbar(image, ax=ax, fraction=0.046, pad=0.04, label="attention weight (rows sum to 1)")
    ax.set_xticks(range(T))
    ax.set_yticks(range(T))
    ax.set_xticklabels(labels, rotation=90, fontsize=6)
    ax.set_yticklabels(labels, fontsize=6)
    ax.set_xlabel("attended-to position (key)")
    ax.set_ylabel("reading position (query): the reference text, teacher-forced")
    ax.set_title(f"{att['label']}: last layer, mean over heads")
    return fig


def all_plots(results: dict, functions: dict) -> dict:
    """``{name: PNG bytes}`` of the figures ``functions`` (name -> fn(results)) draw from these results
    (the report's sections say which figures they show: reports.sections.plot_functions)."""
    out = {}
    for name, fn in functions.items():
        png = fn(results)
        if png is not None:
            out[name] = png
    return out
