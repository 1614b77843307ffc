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
# The n-gram smoothers' colours: warm and grey hues only, none of another family's colour (neural blue,
# interpolated green, ∞-gram purple) and not black (kept for the floor): one family, one hue range.
SMOOTHER_COLOURS = ("#D55E00", "#E69F00", "#882255", "#999999", "#8C510A", "#CC6677", "#661100", "#DDAA33")
# The page a figure is read on: an 820 px window leaves about 760 px for the figure (margins, scroll bar);
# a wider figure is shrunk to it, its fonts with it.  A legend must still read at MIN_LEGEND_PX, a tick
# label at MIN_TICK_PX (on-page pixels).
PAGE_PX = 760
MIN_LEGEND_PX = 9.0
MIN_TICK_PX = 8.0
# What the last figures drew, read from the matplotlib objects just before they were saved: title ->
# facts (see figure_facts).  The tests check colours, labels, legend and tick sizes from it.
DRAWN: dict = {}
matplotlib.rcParams["axes.prop_cycle"] = matplotlib.cycler(color=list(OKABE_ITO))


def page_scale(fig) -> float:
    """How much the page shrinks this figure in an 820 px window (1 when it fits)."""
    return min(1.0, PAGE_PX / (fig.get_size_inches()[0] * DPI))


def min_points(fig, px: float) -> float:
    """The font size in points that reads ``px`` pixels on the page once the figure is shrunk to it."""
    return px * 72.0 / DPI / page_scale(fig)


def _plain(x, pos=None) -> str:
    return f"{x:g}" if x < 1e5 else f"{x:.0e}"


def _labelled(axis, lo: float, hi: float) -> list:
    """The tick labels of ``axis`` a reader sees: non-empty, inside the limits (the canvas is drawn)."""
    out = []
    for t in axis.get_majorticklabels() + axis.get_minorticklabels():
        x = t.get_position()[0 if axis.axis_name == "x" else 1]
        if t.get_visible() and t.get_text().strip() and lo * (1 - 1e-9) <= x <= hi * (1 + 1e-9):
            out.append(t.get_text())
    return out


def readable_log_axes(fig) -> None:
    """A log axis spanning less than a decade or two labels one tick (10^2) at best: give it plain labels
    at 1, 2, 5 x 10^k (or at every k x 10^k), so every log axis has at least two labelled ticks."""
    from matplotlib.ticker import FuncFormatter, LogLocator, NullFormatter

    fig.canvas.draw()
    for ax in fig.axes:
        for axis, lim in ((ax.xaxis, ax.get_xlim()), (ax.yaxis, ax.get_ylim())):
            if axis.get_scale() != "log":
                continue
            lo, hi = sorted(lim)
            if len(_labelled(axis, lo, hi)) >= 2:
                continue
            for subs in ((1.0, 2.0, 5.0), tuple(float(k) for k in range(1, 10))):
                axis.set_major_locator(LogLocator(base=10, subs=subs))
                axis.set_major_formatter(FuncFormatter(_plain))
                axis.set_minor_formatter(NullFormatter())
                fig.canvas.draw()
                if len(_labelled(axis, lo, hi)) >= 2:
                    break
            ax.set_xlim(lim) if axis is ax.xaxis else ax.set_ylim(lim)


def readable_fonts(fig) -> None:
    """Legends and tick labels at least MIN_LEGEND_PX / MIN_TICK_PX on the page."""
    legend_pt, tick_pt = min_points(fig, MIN_LEGEND_PX), min_points(fig, MIN_TICK_PX)
    legends = [ax.get_legend() for ax in fig.axes if ax.get_legend() is not None] + list(fig.legends)
    for leg in legends:
        for t in leg.get_texts():
            if t.get_fontsize() < legend_pt:
                t.set_fontsize(round(legend_pt, 1))
    for ax in fig.axes:
        for t in ax.get_xticklabels(which="both") + ax.get_yticklabels(which="both"):
            if t.get_fontsize() < tick_pt:
                t.set_fontsize(round(tick_pt, 1))
        for axis in (ax.xaxis, ax.yaxis):
            for which in ("major", "minor"):
                size = axis.get_tick_params(which=which).get("labelsize")
                if isinstance(size, (int, float)) and size < tick_pt:
                    axis.set_tick_params(which=which, labelsize=round(tick_pt, 1))


def _points_px(ax) -> np.ndarray:
    """Every drawn data point of ``ax`` (lines and error-bar markers) in display pixels."""
    pts = []
    for line in ax.get_lines():
        if not line.get_visible() or line.get_transform() is not ax.transData:
            continue
        xy = line.get_xydata()
        if len(xy):
            xy = xy[np.isfinite(xy).all(axis=1)]
            pts.append(line.get_transform().transform(xy))
    return np.concatenate(pts) if pts else np.zeros((0, 2))


def legend_overlaps(ax) -> int:
    """How many of ``ax``'s data points (and line segments' samples) lie under its legend, when it is inside."""
    leg = ax.get_legend()
    if leg is None:
        return 0
    box = leg.get_window_extent()
    lines = []
    # its own lines and a twin's (the V^n wall's right-hand axis shares the box)
    same = [a for a in ax.figure.axes if a.bbox.bounds == ax.bbox.bounds]
    for line in [ln for a in same for ln in a.get_lines()]:
        if not line.get_visible() or line.get_transform() is not line.axes.transData:
            continue
        xy = line.get_xydata()
        xy = xy[np.isfinite(xy).all(axis=1)] if len(xy) else xy
        if len(xy) == 0:
            continue
        px = line.get_transform().transform(xy)
        # sample each segment, so a line crossing the legend between two markers counts too
        for a, b in zip(px[:-1], px[1:]) if len(px) > 1 else [(px[0], px[0])]:
            lines.append(np.linspace(a, b, 25))
        lines.append(px)
    if not lines:
        return 0
    pts = np.concatenate(lines)
    inside = ((pts[:, 0] > box.x0) & (pts[:, 0] < box.x1) & (pts[:, 1] > box.y0) & (pts[:, 1] < box.y1))
    return int(inside.sum())


LEGEND_PLACES = ("upper right", "upper left", "lower left", "lower right", "center right", "center left",
                 "upper center", "lower center")


def legends_off_the_data(fig) -> None:
    """A legend inside its axes must not cover a curve: try each corner; where none is free, put it
    beside the axes (the saved figure's bounding box keeps it)."""
    fig.canvas.draw()
    for ax in fig.axes:
        leg = ax.get_legend()
        if leg is None or leg.get_bbox_to_anchor().bounds != ax.bbox.bounds or not legend_overlaps(ax):
            continue  # placed outside already, or clear
        size = leg.get_texts()[0].get_fontsize() if leg.get_texts() else 8
        handles, labels = list(leg.legend_handles), [t.get_text() for t in leg.get_texts()]
        for loc in LEGEND_PLACES:
            ax.legend(handles, labels, fontsize=size, loc=loc, framealpha=0.9)
            fig.canvas.draw()
            if not legend_overlaps(ax):
                break
        else:  # under the axes, clear of the x label (beside them it would cross a twin's right-hand axis)
            ax.legend(handles, labels, fontsize=size, loc="upper center", bbox_to_anchor=(0.5, -0.2), ncol=2,
                      borderaxespad=0.0)


def prepare(fig) -> None:
    """What every figure gets before it is saved: readable fonts, log axes with two labelled ticks or more,
    legends off the curves."""
    fig.tight_layout()
    readable_fonts(fig)
    readable_log_axes(fig)
    legends_off_the_data(fig)


def figure_facts(fig) -> dict:
    """What ``fig`` shows, read from its matplotlib objects: per axes its title, scales, lines (label,
    colour, data), labelled ticks, texts, legend (labels, font sizes, overlap with the data)."""
    from matplotlib.colors import to_hex

    fig.canvas.draw()
    out = {"width_px": float(fig.get_size_inches()[0] * DPI), "page_scale": page_scale(fig),
           "suptitle": fig._suptitle.get_text() if fig._suptitle else "", "axes": []}
    for ax in fig.axes:
        leg = ax.get_legend()
        # an error-bar plot's line carries no label itself: its container's
        owner = {}
        for c in ax.containers:
            first = c[0] if len(c) else None
            if first is not None and hasattr(first, "get_xydata") and not c.get_label().startswith("_"):
                owner[id(first)] = c.get_label()
        xlo, xhi = sorted(ax.get_xlim())
        ylo, yhi = sorted(ax.get_ylim())
        out["axes"].append({
            "title": ax.get_title(), "xscale": ax.get_xscale(), "yscale": ax.get_yscale(),
            "xlim": [xlo, xhi], "ylim": [ylo, yhi], "xlabel": ax.get_xlabel(), "ylabel": ax.get_ylabel(),
            "lines": [{"label": owner.get(id(line), line.get_label()), "colour": to_hex(line.get_color()),
                       "x": [float(v) for v in np.asarray(line.get_xdata(), dtype=float)],
                       "y": [float(v) for v in np.asarray(line.get_ydata(), dtype=float)],
                       "data": line.get_transform() is ax.transData}
                      for line in ax.get_lines() if not line.get_label().startswith("_child")],
            "xticks": _labelled(ax.xaxis, xlo, xhi), "yticks": _labelled(ax.yaxis, ylo, yhi),
            "tick_px": [t.get_fontsize() * DPI / 72.0 * page_scale(fig)
                        for t in ax.get_xticklabels() + ax.get_yticklabels() if t.get_text().strip()],
            "tick_boxes": [tuple(t.get_window_extent().bounds) for t in ax.get_xticklabels() if t.get_text().strip()],
            "ytick_boxes": [tuple(t.get_window_extent().bounds) for t in ax.get_yticklabels() if t.get_text().strip()],
            "texts": [t.get_text() for t in ax.texts],
            "legend": None if leg is None else {
                "labels": [t.get_text() for t in leg.get_texts()],
                "px": [t.get_fontsize() * DPI / 72.0 * page_scale(fig) for t in leg.get_texts()],
                "overlaps": legend_overlaps(ax)},
        })
    return out


def png_bytes(fig) -> Optional[bytes]:
    """The figure as PNG bytes, and closed; None for None (a figure function with nothing to draw).
    What it drew is kept in :data:`DRAWN` under its title."""
    if fig is None:
        return None
    buf = io.BytesIO()
    prepare(fig)
    titles = [fig._suptitle.get_text()] if fig._suptitle else []
    titles += [ax.get_title() for ax in fig.axes if ax.get_title()]
    DRAWN[titles[0] if titles else f"figure {len(DRAWN) + 1}"] = figure_facts(fig)
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
    # A count of 0 has no place on a log axis: it is left out, and its legend entry says where.
    for key, style, label in (("distinct_train", dict(fmt="s-"), "distinct n-grams seen in train"),
                              ("train_ngram_tokens", dict(fmt=":", color="#999999"), "n-gram tokens in train"),
                              ("mle_zero_probs", dict(fmt="^-", color="#D55E00"), "test tokens with MLE probability 0")):
        kept = [(r["order"], r[key]) for r in rows if r[key] > 0]
        zero = [r["order"] for r in rows if r[key] <= 0]
        if zero:
            label += f" (0 at n = {', '.join(map(str, zero))}: not drawn)"
        fmt = style.pop("fmt")
        if kept:
            ax.semilogy([k for k, _ in kept], [v for _, v in kept], fmt, label=label, **style)
        else:
            ax.plot([], [], fmt, label=label, **style)
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
    ax2.legend(handles, labels, fontsize=8, loc="upper left", framealpha=0.9)
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
                # the ∞-gram family's colour, one marker per partner
                ax.semilogy([x_inf], [r["test"]["ppl"]], marker=("*", "P", "X", "D", "p")[j % 5], linestyle="none",
                            color=FAMILY_COLOURS["infini"], markersize=11 if j == 0 else 8, label=r["label"])
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
        # no legend of its own: its lines are the left panel's, in the same styles (inside the axes, a
        # legend covered a curve, Witten-Bell's)
    zoom.set_xlabel("order n")
    zoom.set_ylabel("test perplexity")
    zoom.set_title("Zoom: the smoothers within 40 % of the best\n(same styles as on the left)", fontsize=10)
    zoom.grid(alpha=0.3)
    # One legend for both panels, under them (a figure legend: the panels keep their widths).
    fig.tight_layout()
    handles, labels = ax.get_legend_handles_labels()
    fig.legend(handles, labels, fontsize=8, loc="upper center", bbox_to_anchor=(0.5, 0.0), ncol=3)
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
            if s["family"] == "neural":
                for p, fewer in zip(pts, fewer_steps(pts)):
                    if p.get("steps") is not None:
                        ax.annotate(f"{p['steps']:,} steps" + (" ⚠" if fewer else ""),
                                    (p["train_tokens"], p["test"]["ppl"]), textcoords="offset points",
                                    xytext=(4, 6), fontsize=8, color="#B00020" if fewer else line.get_color())
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


FEWER_STEPS_SLACK = 0.05


def fewer_steps(points: list) -> list:
    """For each learning-curve point: did it train fewer steps than a point on a smaller fraction?  Under a
    wall-clock budget a loaded machine buys fewer steps, so a larger training set can come out worse."""
    out, most = [], None
    for p in points:
        steps = p.get("steps")
        # more than FEWER_STEPS_SLACK fewer: a few steps either way is the clock's noise, not a finding
        out.append(steps is not None and most is not None and steps < (1 - FEWER_STEPS_SLACK) * most)
        if steps is not None:
            most = steps if most is None else max(most, steps)
    return out


def interpolation(results: dict) -> Optional[bytes]:
    return png_bytes(interpolation_figure(results))


def interpolation_figure(results: dict):
    rows = results.get("interpolation") or []
    if not rows:
        return None
    fig, ax = plt.subplots(figsize=SIZE)
    from .formatting import row_label

    flagged = undertrained_ids(results)
    for i, r in enumerate(rows):
        xs, ys = zip(*r["curve"])
        # The mixtures are the interpolated family: its colour, one marker and dash per neural partner;
        # named by their parts' display labels, never by their ids.
        label = f"{row_label(results, r['components'][0])} + {row_label(results, r['components'][1])}"
        label += f" (λ = {r['lambda']:.2f})"
        if r["components"][1] in flagged:
            label += " ⚠ undertrained"
        line, = ax.semilogy(xs, ys, linestyle=DASHES[i % len(DASHES)], color=FAMILY_COLOURS["interpolated"],
                            marker=MARKERS[i % len(MARKERS)], markevery=[int(np.argmin(np.abs(np.asarray(xs) - r["lambda"])))],
                            label=label)
    ax.set_xlabel("weight of the n-gram model $\\lambda$")
    ax.set_ylabel("validation perplexity (log scale)")
    ax.grid(alpha=0.3, which="both")
    ax.set_title("$p = \\lambda\\, p_{ngram} + (1-\\lambda)\\, p_{neural}$, tuned on validation")
    ax.legend(fontsize=8)
    return fig


def undertrained_ids(results: dict) -> dict:
    """Neural row id -> why it is undertrained (reports.undertrained, the one rule)."""
    from .undertrained import undertrained

    return undertrained(results)


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
    family = {r["id"]: fam for fam in ("ngram", "neural") for r in results.get(fam) or []}
    for i, partner in enumerate(partners):
        pts = [r for r in sec["by_n"] if r["partner"] == partner]
        # each partner in its family's colour (n-gram vermillion, neural blue), as everywhere else
        colour = FAMILY_COLOURS.get(family.get(partner, "ngram" if "-" in partner else "neural"))
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
    ax2.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.02, 1.0), borderaxespad=0.0)
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
    side = min(8.0, max(6.4, 0.2 * T + 1.6))  # about 0.2 in (14 px) a row: 8-point labels do not overlap
    fig, ax = plt.subplots(figsize=(side, side - 0.4))
    image = ax.imshow(mean, cmap="viridis", vmin=0.0)
    fig.colorbar(image, ax=ax, fraction=0.046, pad=0.04, label="attention weight (rows sum to 1)")
    ax.set_xticks(range(T))
    ax.set_yticks(range(T))
    ax.set_xticklabels(labels, rotation=90, fontsize=8)
    ax.set_yticklabels(labels, fontsize=8)
    ax.set_xlabel("attended-to position (key)")
    ax.set_ylabel("reading position (query): the reference text, teacher-forced")
    why = undertrained_ids(results).get(att.get("model"))
    ax.set_title(f"{att['label']}: last layer, mean over heads"
                 + (f"\n⚠ undertrained ({why}): near-uniform attention is no finding" if why else ""),
                 color="#B00020" if why else "black", fontsize=10)
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
