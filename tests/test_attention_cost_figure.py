"""lab attention-cost: the log-log figure's tick labels do not run into each other (issue 38: the
minor labels of a log axis, 2x10^2, 3x10^2 ..., overlapped the measured lengths)."""
from __future__ import annotations

import pytest

pytest.importorskip("matplotlib")


def _overlaps(labels) -> list:
    boxes = [(t.get_text(), t.get_window_extent()) for t in labels if t.get_visible() and t.get_text()]
    return [(a, b) for i, (a, ba) in enumerate(boxes) for b, bb in boxes[i + 1:] if ba.overlaps(bb)]


def test_no_two_tick_labels_of_the_scaling_figure_overlap():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from labs.attention_cost import figure_objects

    ns = [128, 256, 512, 1024, 2048, 4096]
    rows = [{"attention_s": 1e-5 * n * n / 1e4, "rnn_s": 1e-4 * n / 100, "conv_s": 5e-5 * n / 100,
             "attention_weight_bytes": 4 * 4 * n * n, "activation_bytes": 4 * 4 * n * 64} for n in ns]
    scaling, path = figure_objects(plt, ns, rows, {"conv": 63, "rnn": 127, "attention": 1}, 128)
    scaling.canvas.draw()
    for ax in scaling.axes:
        labels = ax.get_xticklabels(minor=False) + ax.get_xticklabels(minor=True)
        assert not _overlaps(labels), _overlaps(labels)
        shown = [t.get_text() for t in ax.get_xticklabels() if t.get_text()]
        assert shown == [f"{n:,}" for n in ns]  # the measured lengths, nothing else
    plt.close("all")
