"""The textbook's architecture figures -- a GRU cell, an LSTM cell, the encoder-decoder Transformer --
drawn from the toolkit's own modules.

The chapters draw these three from the original papers.  Here nothing in a figure is typed in by hand:
each function builds the real module with a small config, reads what it holds and what it does, and
draws that:

- the cells: ``neural.cells.GRULayer`` / ``LSTMLayer`` as layer 0 of an ``RNNLM(impl="scratch")``;
  every gate box lists the parameters ``named_parameters()`` gives (name and shape), grouped by the
  gate letters of ``neural.cells.FUSED_ORDER``, and its equation is written from those names; the
  shapes of X_t and the states come from one forward pass; the footnote is the fused
  ``nn.GRU``/``nn.LSTM`` layout ``neural.cells.scratch_layer_to_fused`` makes of the same weights;
- the Transformer: ``Seq2SeqTransformer`` built by ``build_model("seq2seq", ...)`` from a preset of
  ``SEQ2SEQ_TRANSFORMER_PRESETS``; its ``named_modules()`` give the stacks, layer counts and sub-module
  names, and one teacher-forced forward pass with hooks on every module gives the tensor shapes, the
  order of the calls (pre- or post-norm), which attention is self-, masked self- or cross-attention
  (from the lengths its queries and keys have and the mask it is given), the embedding scale and
  which stack is the encoder.

Each ``*_figure`` function returns ``(matplotlib figure, metadata)``; the metadata says what was drawn
(module and parameter names, shapes, counts, and every text placed on the figure under ``"texts"``),
so a test can hold it against the module: rename a parameter or add a layer and the figure changes.
:func:`textbook_figures` returns ``{name: (png bytes, metadata)}`` for ``ngramlm figures``.
"""
from __future__ import annotations

import math
import textwrap
from dataclasses import dataclass
from typing import Optional

import torch
from matplotlib.patches import Circle, FancyBboxPatch
from torch import nn

from corpora.errors import InputError

from .plots import png_bytes, plt

# Probe sizes: distinct numbers, so every dimension of a shape can be told from the others.
CELL_BATCH, CELL_STEPS = 4, 5  # n rows of a minibatch, T steps
PROBE_BATCH, PROBE_SRC, PROBE_TGT = 3, 11, 7  # B sentences, S source and T target tokens
# fra-eng's vocabularies (ids incl. specials, `load_parallel("fra-eng")`): English 728, French 1,013.
# Only the embedding and output shapes depend on them, and the figures must not need the corpus.
FRA_ENG_SRC_VOCAB, FRA_ENG_TGT_VOCAB = 728, 1013

# Fills: light tints of the report palette (reports.plots.OKABE_ITO), dark text stays readable on them.
FILL = {"sigmoid": "#D6EAF8", "tanh": "#FDEBD0", "attention": "#FAD7B5", "ffn": "#D6EAF8", "norm": "#F9F3B8",
        "embed": "#F5CBD6", "output": "#D5EDDA", "frame": "#F4F4F4"}
INK = "#222222"
WIRE = "#444444"


# ---------------------------------------------------------------------------- drawing
class _Canvas:
    """An axes measured in drawing units (``scale`` inches each) that records every text it places."""

    def __init__(self, width: float, height: float, scale: float) -> None:
        self.scale = scale
        self.fig, self.ax = plt.subplots(figsize=(width * scale, height * scale))
        self.fig.subplots_adjust(0, 0, 1, 1)
        self.ax.set_xlim(0, width)
        self.ax.set_ylim(0, height)
        self.ax.set_aspect("equal")
        self.ax.axis("off")
        self.texts: list = []

    def line_height(self, fontsize: float) -> float:
        return _line_height(fontsize, self.scale)

    def text(self, x: float, y: float, s: str, size: float = 10, **kw) -> None:
        self.ax.text(x, y, s, fontsize=size, color=kw.pop("color", INK), **kw)
        self.texts.append(s)

    def box(self, x: float, y: float, w: float, h: float, lines: list, fill: str, *, edge: str = INK,
            lw: float = 1.0) -> None:
        """A rounded box with ``lines`` = [(text, size, weight, family)] centred top to bottom."""
        self.ax.add_patch(FancyBboxPatch((x, y), w, h, boxstyle="round,pad=0,rounding_size=0.18", fc=fill,
                                         ec=edge, lw=lw, zorder=2))
        heights = [self.line_height(size) for _, size, _, _ in lines]
        top = y + h / 2 + sum(heights) / 2
        for (s, size, weight, family), lh in zip(lines, heights):
            self.text(x + w / 2, top - lh / 2, s, size=size, weight=weight, family=family, ha="center",
                      va="center", zorder=3)
            top -= lh

    def frame(self, x: float, y: float, w: float, h: float) -> None:
        self.ax.add_patch(FancyBboxPatch((x, y), w, h, boxstyle="round,pad=0,rounding_size=0.3", fc=FILL["frame"],
                                         ec="#888888", lw=1.2, zorder=1))

    def wire(self, *points: tuple, arrow: bool = True, color: str = WIRE, lw: float = 1.3) -> None:
        """A polyline through ``points``, with an arrowhead on its last segment."""
        xs, ys = zip(*points)
        if arrow and len(points) > 2:
            self.ax.plot(xs[:-1], ys[:-1], color=color, lw=lw, zorder=1.5, solid_capstyle="round")
        elif not arrow:
            self.ax.plot(xs, ys, color=color, lw=lw, zorder=1.5, solid_capstyle="round")
        if arrow:
            self.ax.annotate("", xy=points[-1], xytext=points[-2], zorder=1.6,
                             arrowprops=dict(arrowstyle="-|>", color=color, lw=lw, shrinkA=0, shrinkB=0,
                                             mutation_scale=14))

    def dot(self, x: float, y: float) -> None:
        self.ax.add_patch(Circle((x, y), 0.07, fc=WIRE, ec=WIRE, zorder=3))

    def op(self, x: float, y: float, symbol: str, r: float = 0.3, size: float = 12) -> None:
        """A pointwise operation: a circle with its symbol."""
        self.ax.add_patch(Circle((x, y), r, fc="white", ec=INK, lw=1.1, zorder=3))
        self.text(x, y, symbol, size=size, ha="center", va="center", zorder=4)


def _line_height(fontsize: float, scale: float) -> float:
    """One text line of ``fontsize`` points, in drawing units of ``scale`` inches."""
    return 1.45 * fontsize / (72 * scale)


def _tex(name: str) -> str:
    """A parameter name as mathtext: ``W_xz`` -> ``W_{xz}``, ``b_hh`` -> ``b_{hh}``."""
    base, _, sub = name.partition("_")
    return f"{base}_{{{sub}}}" if sub else base


def _shape(shape) -> str:
    return "(" + ", ".join(str(int(s)) for s in shape) + ("," if len(shape) == 1 else "") + ")"


# ---------------------------------------------------------------------------- the cells
@dataclass(frozen=True)
class GateRole:
    title: str  # what the chapters call it
    symbol: str  # mathtext of its output
    activation: str  # "sigmoid" | "tanh"


# What each gate letter of neural.cells.FUSED_ORDER is.  The letters and the parameters come from
# the module; only these words are ours.
GATE_ROLES = {
    "gru": {"r": GateRole("reset gate", "R_t", "sigmoid"), "z": GateRole("update gate", "Z_t", "sigmoid"),
            "h": GateRole("candidate state", r"\tilde{H}_t", "tanh")},
    "lstm": {"i": GateRole("input gate", "I_t", "sigmoid"), "f": GateRole("forget gate", "F_t", "sigmoid"),
             "c": GateRole("candidate cell", r"\tilde{C}_t", "tanh"), "o": GateRole("output gate", "O_t", "sigmoid")},
}
# Left to right, as the chapters read a cell: the GRU's reset gate feeds the candidate beside it.
GATE_LAYOUT = {"gru": ("z", "r", "h"), "lstm": ("f", "i", "c", "o")}


def cell_model(cell: str, *, input_size: int = 32, hidden_size: int = 64, n_layers: int = 1,
               gru_reset: str = "after", seed: int = 0):
    """An ``RNNLM`` with the scratch cells (``impl="scratch"``), small enough to draw: its layer 0
    is the cell of the figure.  ``input_size`` is the embedding width d, ``hidden_size`` h."""
    from neural.config import RNNConfig
    from neural.models import build_model

    if cell not in GATE_ROLES:
        raise InputError(f"no cell figure for {cell!r}", fix=f"use one of {', '.join(GATE_ROLES)}")
    cfg = RNNConfig(vocab_size=10, cell=cell, impl="scratch", emb_size=input_size, hidden_size=hidden_size,
                    n_layers=n_layers, dropout=0.0, tie_weights=False, gru_reset=gru_reset)
    return build_model("rnn", cfg, seed=seed).eval()


def _param_role(p: torch.Tensor, local: str, d: int, h: int) -> str:
    """``input`` (d, h), ``recurrent`` (h, h) or ``bias`` (h,): read off the shape, and off the name
    (``W_x*`` / ``W_h*``) only where d == h leaves the shape ambiguous."""
    if p.dim() == 1:
        return "bias"
    if p.shape[0] == d != h:
        return "input"
    if p.shape[0] == h != d:
        return "recurrent"
    return "input" if local.startswith("W_x") else "recurrent"


def describe_cell(model, *, batch: int = CELL_BATCH, steps: int = CELL_STEPS) -> dict:
    """What the cell figure draws of ``model`` (an RNNLM with scratch cells): layer 0's class, its
    parameters by gate (names and shapes from ``named_parameters()``), the wire shapes of one forward
    pass, and the fused layout of the same weights."""
    from neural.cells import FUSED_ORDER, ScratchRNN, scratch_layer_to_fused

    rnn = getattr(model, "rnn", None)
    if not isinstance(rnn, ScratchRNN):
        raise InputError("a cell figure reads the scratch cells of neural.cells",
                         fix="build the model with impl='scratch' (cell_model does)")
    cell, cfg = rnn.cell, model.config
    prefix = next(name for name, m in model.named_modules() if m is rnn.layers[0])
    layer = rnn.layers[0]
    d, h = cfg.emb_size, cfg.hidden_size
    order = FUSED_ORDER[cell]
    roles = GATE_ROLES.get(cell, {})
    if set(order) != set(roles):
        raise InputError(f"neural.cells.FUSED_ORDER[{cell!r}] = {order}, but the figure knows the gates "
                         f"{tuple(roles)}", fix="name the new gates in reports.textbook_figures.GATE_ROLES")
    gates = {g: [] for g in order}
    unplaced = []
    for local, p in layer.named_parameters():
        entry = {"name": f"{prefix}.{local}", "local": local, "shape": list(p.shape),
                 "role": _param_role(p, local, d, h)}
        # cells.py names every parameter after its gate block's letter: W_x<g>, W_h<g>, b_<g>
        # (and the GRU candidate's second bias b_hh).
        (gates[local[-1]] if local[-1] in gates else unplaced).append(entry)
    with torch.no_grad():
        X = torch.randn(batch, steps, d)
        state = tuple(s[0] for s in model.init_state(batch))
        outputs, final = layer(X, state)
    fused = scratch_layer_to_fused(cell, dict(layer.named_parameters()), 0)
    meta = {
        "figure": f"{cell}_cell", "cell": cell, "module": prefix,
        "class": f"{type(layer).__module__}.{type(layer).__qualname__}",
        "model": f"{type(model).__name__}(cell={cell!r}, impl='scratch')",
        "input_size": d, "hidden_size": h, "n_layers": cfg.n_layers, "batch": batch, "steps": steps,
        "gates": [{"key": g, "title": roles[g].title, "symbol": roles[g].symbol, "activation": roles[g].activation,
                   "parameters": gates[g]} for g in order],
        "unplaced": unplaced,
        "tensors": {"X_t": list(X[:, 0].shape), "state_in": [list(s.shape) for s in state],
                    "outputs": list(outputs.shape), "state_out": [list(s.shape) for s in final]},
        "fused": {name: list(t.shape) for name, t in fused.items()}, "fused_order": list(order),
    }
    if cell == "gru":
        meta["reset"] = layer.reset
    return meta


def _gate_equation(cell: str, gate: dict, meta: dict) -> str:
    """The gate's equation in mathtext, written from its parameters' names."""
    by = {"input": [], "recurrent": [], "bias": []}
    for p in gate["parameters"]:
        by[p["role"]].append(_tex(p["local"]))
    act = r"\sigma" if gate["activation"] == "sigmoid" else r"\tanh"
    Wx = "+".join(rf"X_t {w}" for w in by["input"])
    Wh = "+".join(rf"H_{{t-1}} {w}" for w in by["recurrent"])
    if cell == "gru" and gate["key"] == "h" and len(by["bias"]) == 2:
        # The candidate's two biases: the first registered sits outside the reset, the second inside.
        outer, inner = by["bias"]
        R = next(g["symbol"] for g in meta["gates"] if g["key"] == "r")
        if meta.get("reset") == "before":
            inside = rf"({R} \odot H_{{t-1}}) {by['recurrent'][0]} + {inner}"
        else:
            inside = rf"{R} \odot (H_{{t-1}} {by['recurrent'][0]} + {inner})"
        return rf"${gate['symbol']} = {act}({Wx} + {outer} + {inside})$"
    terms = [t for t in (Wx, Wh, "+".join(by["bias"])) if t]
    return rf"${gate['symbol']} = {act}(" + " + ".join(terms) + ")$"


def _paragraph(c: _Canvas, x: float, y: float, text: str, *, size: float = 10, chars: int = 110, **kw) -> float:
    """``text`` wrapped at ``chars`` characters, its first line centred at ``y``; -> the y of the next line."""
    for line in textwrap.wrap(text, chars, break_on_hyphens=False):
        c.text(x, y, line, size=size, va="center", **kw)
        y -= c.line_height(size)
    return y


# Vertical layout of a cell figure (drawing units, bottom up): the fused-layout note, the equations,
# the X_t and H_{t-1} buses, the gate boxes, then the pointwise operations and the state's highway.
_CELL = {"scale": 0.47, "equations": 3.4, "x_bus": 4.4, "h_bus": 5.2, "box_y": 6.0}


def _cell_canvas(meta: dict, width: float, top: float):
    """The canvas with the title and what the shapes are, above ``top`` (the figure's highest wire)."""
    height = top + 2.6
    c = _Canvas(width, height, scale=_CELL["scale"])
    name = {"gru": "GRU", "lstm": "LSTM"}[meta["cell"]]
    c.text(0.2, height - 0.45, f"{name} cell: {meta['class']}, layer {meta['module']} of {meta['model']}",
           size=13, weight="bold", va="center")
    n, d, h = meta["batch"], meta["input_size"], meta["hidden_size"]
    t = meta["tensors"]
    states = "$H_{t-1}$, $H_t$" + (", $C_{t-1}$, $C_t$" if meta["cell"] == "lstm" else "")
    c.text(0.2, height - 1.15, f"d = {d} inputs, h = {h} hidden units, n = {n} rows of a minibatch: $X_t$ is "
           f"(n, d) = {_shape(t['X_t'])}; {states} are (n, h) = {_shape(t['state_out'][0])}.", size=10.5,
           va="center")
    c.text(0.2, height - 1.75, "Every name and shape is read from the module: named_parameters() and one "
           "forward pass.", size=10, va="center", color="#444444")
    return c


def _boxes_top(meta: dict) -> float:
    """Where the gate boxes end: a title line and as many parameter lines as the largest gate has."""
    n_lines = max(len(g["parameters"]) for g in meta["gates"])
    return _CELL["box_y"] + _line_height(11, _CELL["scale"]) + n_lines * _line_height(10.5, _CELL["scale"]) + 0.55


def _gate_boxes(c: _Canvas, meta: dict, xs: dict, width: float) -> None:
    """One box per gate: what it is and its parameters (name, shape)."""
    gates = {g["key"]: g for g in meta["gates"]}
    for key, x in xs.items():
        g = gates[key]
        lines = [(f"{g['title']} (${g['symbol']}$)", 11, "bold", "sans-serif")]
        lines += [(f"{p['local']}  {_shape(p['shape'])}", 10.5, "normal", "monospace") for p in g["parameters"]]
        c.box(x, _CELL["box_y"], width, _boxes_top(meta) - _CELL["box_y"], lines, FILL[g["activation"]])


def _input_buses(c: _Canvas, xs: dict, width: float, h_entry: tuple) -> None:
    """H_{t-1} (entering at ``h_entry``, branched down to its bus) and X_t (its own bus) into every gate
    box from below."""
    ex, ey = h_entry
    h_bus, x_bus, box_y = _CELL["h_bus"], _CELL["x_bus"], _CELL["box_y"]
    taps = sorted(xs.values())
    c.dot(ex + 0.6, ey)
    c.wire((ex + 0.6, ey), (ex + 0.6, h_bus), (taps[-1] + 0.36 * width, h_bus), arrow=False)
    c.wire((0.2, x_bus), (taps[-1] + 0.64 * width, x_bus), arrow=False)
    c.text(0.2, x_bus + 0.35, "$X_t$", size=11, va="center")
    for x in taps:
        c.dot(x + 0.36 * width, h_bus)
        c.wire((x + 0.36 * width, h_bus), (x + 0.36 * width, box_y))
        c.dot(x + 0.64 * width, x_bus)
        c.wire((x + 0.64 * width, x_bus), (x + 0.64 * width, box_y))


def _equations(c: _Canvas, meta: dict, right_x: float, state_lines: list) -> None:
    """The gates' equations (written from the parameter names) on the left, the state update on the right."""
    y = _CELL["equations"]
    step = 1.55 * 11 / (72 * c.scale)
    gates = {g["key"]: g for g in meta["gates"]}
    for key in GATE_LAYOUT[meta["cell"]]:  # in the order the boxes stand
        c.text(0.3, y, _gate_equation(meta["cell"], gates[key], meta), size=11, va="center")
        y -= step
    y = _CELL["equations"]
    for line, size, color in state_lines:
        c.text(right_x, y, line, size=size, va="center", color=color)
        y -= step


def _fused_note(c: _Canvas, meta: dict) -> None:
    fused = ", ".join(f"{k} {_shape(v)}" for k, v in meta["fused"].items())
    module = {"gru": "nn.GRU", "lstm": "nn.LSTM"}[meta["cell"]]
    chars = int(c.ax.get_xlim()[1] * c.scale * 12.5)  # about 12.5 characters an inch at 10 points
    if meta.get("reset") == "before":
        note = (f"impl='fused' ({module}) has no equivalent of this cell: it applies the reset after the product "
                "(RNNLM.convert refuses).")
    else:
        note = (f"impl='fused' ({module}) holds the same numbers as {fused}: gate blocks stacked "
                f"{', '.join(meta['fused_order'])} (neural.cells.scratch_layer_to_fused).")
    y = _paragraph(c, 0.2, 1.05, note, size=10, chars=chars, color="#444444")
    if meta["unplaced"]:
        c.text(0.2, y, "parameters of no gate: " + ", ".join(
            f"{p['local']} {_shape(p['shape'])}" for p in meta["unplaced"]), size=10, va="center", color="#B00000")


def gru_cell_figure(model=None, **sizes):
    """``(figure, metadata)`` of the GRU cell: ``model`` an RNNLM with scratch GRU cells (default:
    :func:`cell_model` ``("gru", **sizes)``)."""
    model = model if model is not None else cell_model("gru", **sizes)
    meta = describe_cell(model)
    if meta["cell"] != "gru":
        raise InputError(f"gru_cell_figure got a {meta['cell']} model", fix="pass an RNNLM with cell='gru'")
    width = 5.2
    xs = dict(zip(GATE_LAYOUT["gru"], (2.2, 8.4, 14.6)))
    W = xs["h"] + width + 2.2
    cx = {k: xs[k] + width / 2 for k in xs}
    top = _boxes_top(meta)
    ops, high = top + 1.3, top + 2.7  # the row of pointwise operations, the state's highway
    c = _cell_canvas(meta, W, high + 0.5)
    _gate_boxes(c, meta, xs, width)
    _input_buses(c, xs, width, h_entry=(0.2, high))
    # H_{t-1} -> (*) Z_t -> (+) -> H_t
    c.text(0.2, high + 0.38, "$H_{t-1}$", size=11, va="center")
    c.wire((0.2, high), (cx["z"] - 0.3, high))
    c.op(cx["z"], high, r"$\odot$")
    c.wire((cx["z"] + 0.3, high), (cx["h"] - 0.3, high))
    c.text((cx["z"] + cx["h"]) / 2, high + 0.38, r"$Z_t \odot H_{t-1}$", size=11, ha="center", va="center")
    c.op(cx["h"], high, "+")
    c.wire((cx["h"] + 0.3, high), (W - 0.2, high))
    c.text(W - 0.2, high + 0.38, "$H_t$", size=11, ha="right", va="center")
    # Z_t up to the highway and, as 1 - Z_t, to the candidate's product.
    c.wire((cx["z"], top), (cx["z"], high - 0.3))
    c.dot(cx["z"], ops)
    c.text(cx["z"] - 0.15, (top + ops) / 2, "$Z_t$", size=11, ha="right", va="center")
    c.wire((cx["z"], ops), (cx["r"] - 0.4, ops))
    c.op(cx["r"], ops, "1−", r=0.4, size=10.5)
    c.wire((cx["r"] + 0.4, ops), (cx["h"] - 0.3, ops))
    c.text((cx["r"] + cx["h"]) / 2, ops + 0.35, r"$1 - Z_t$", size=11, ha="center", va="center")
    c.op(cx["h"], ops, r"$\odot$")
    c.wire((cx["h"], top), (cx["h"], ops - 0.3))
    c.text(cx["h"] + 0.15, (top + ops) / 2, r"$\tilde{H}_t$", size=11, va="center")
    c.wire((cx["h"], ops + 0.3), (cx["h"], high - 0.3))
    # R_t into the candidate.
    y_r = _CELL["box_y"] + 0.6
    c.wire((xs["r"] + width, y_r), (xs["h"], y_r))
    c.text((xs["r"] + width + xs["h"]) / 2, y_r + 0.35, "$R_t$", size=11, ha="center", va="center")
    reset = {"after": "reset after the product: the fused kernel's GRU",
             "before": "reset before the product: the textbook's GRU"}[meta["reset"]]
    _equations(c, meta, xs["h"] - 1.0, [(r"$H_t = Z_t \odot H_{t-1} + (1 - Z_t) \odot \tilde{H}_t$", 11, INK),
                                        (f"gru_reset={meta['reset']!r}: {reset.split(': ')[1]}", 10, "#444444")])
    _fused_note(c, meta)
    meta["texts"] = c.texts
    return c.fig, meta


def lstm_cell_figure(model=None, **sizes):
    """``(figure, metadata)`` of the LSTM cell: ``model`` an RNNLM with scratch LSTM cells (default:
    :func:`cell_model` ``("lstm", **sizes)``)."""
    model = model if model is not None else cell_model("lstm", **sizes)
    meta = describe_cell(model)
    if meta["cell"] != "lstm":
        raise InputError(f"lstm_cell_figure got a {meta['cell']} model", fix="pass an RNNLM with cell='lstm'")
    width = 4.8
    xs = dict(zip(GATE_LAYOUT["lstm"], (2.2, 7.9, 13.6, 19.3)))
    W = xs["o"] + width + 0.9
    cx = {k: xs[k] + width / 2 for k in xs}
    top = _boxes_top(meta)
    ops, tanh_y, high = top + 1.3, top + 2.55, top + 3.8
    c = _cell_canvas(meta, W, high + 0.5)
    _gate_boxes(c, meta, xs, width)
    _input_buses(c, xs, width, h_entry=(0.2, ops))
    c.text(0.2, ops + 0.38, "$H_{t-1}$", size=11, va="center")
    c.wire((0.2, ops), (0.8, ops), arrow=False)
    # The cell's highway: C_{t-1} -> (*) F_t -> (+) I_t * C~_t -> C_t
    c.text(0.2, high + 0.38, "$C_{t-1}$", size=11, va="center")
    c.wire((0.2, high), (cx["f"] - 0.3, high))
    c.op(cx["f"], high, r"$\odot$")
    c.wire((cx["f"], top), (cx["f"], high - 0.3))
    c.text(cx["f"] - 0.15, (top + ops) / 2, "$F_t$", size=11, ha="right", va="center")
    c.wire((cx["f"] + 0.3, high), (cx["c"] - 0.3, high))
    c.op(cx["c"], high, "+")
    c.wire((cx["c"] + 0.3, high), (W - 0.2, high))
    c.text(W - 0.2, high + 0.38, "$C_t$", size=11, ha="right", va="center")
    c.wire((cx["i"], top), (cx["i"], ops), (cx["c"] - 0.3, ops))
    c.text(cx["i"] - 0.15, (top + ops) / 2, "$I_t$", size=11, ha="right", va="center")
    c.op(cx["c"], ops, r"$\odot$")
    c.wire((cx["c"], top), (cx["c"], ops - 0.3))
    c.text(cx["c"] + 0.15, (top + ops) / 2, r"$\tilde{C}_t$", size=11, va="center")
    c.wire((cx["c"], ops + 0.3), (cx["c"], high - 0.3))
    # H_t = O_t * tanh(C_t)
    c.dot(cx["o"], high)
    c.wire((cx["o"], high), (cx["o"], tanh_y + 0.42))
    c.op(cx["o"], tanh_y, "tanh", r=0.42, size=9.5)
    c.wire((cx["o"], tanh_y - 0.42), (cx["o"], ops + 0.3))
    c.op(cx["o"], ops, r"$\odot$")
    c.wire((cx["o"] - 1.3, top), (cx["o"] - 1.3, ops), (cx["o"] - 0.3, ops))
    c.text(cx["o"] - 1.45, (top + ops) / 2, "$O_t$", size=11, ha="right", va="center")
    c.wire((cx["o"] + 0.3, ops), (W - 0.2, ops))
    c.text(W - 0.2, ops + 0.38, "$H_t$", size=11, ha="right", va="center")
    _equations(c, meta, xs["c"] + 0.6, [(r"$C_t = F_t \odot C_{t-1} + I_t \odot \tilde{C}_t$", 11, INK),
                                        (r"$H_t = O_t \odot \tanh(C_t)$", 11, INK)])
    _fused_note(c, meta)
    meta["texts"] = c.texts
    return c.fig, meta


# ---------------------------------------------------------------------------- the Transformer
def translator_model(*, size: str = "default", n_layers: Optional[int] = None, norm: Optional[str] = None,
                     positional: Optional[str] = None, src_vocab_size: int = FRA_ENG_SRC_VOCAB,
                     vocab_size: int = FRA_ENG_TGT_VOCAB, seed: int = 0):
    """The encoder-decoder Transformer translator of preset ``size`` (``n_layers``, ``norm``,
    ``positional`` override it), as ``ngramlm seq2seq train --arch transformer`` builds it."""
    from neural.models import build_model
    from neural.seq2seq.transformer import resolve_seq2seq_transformer_config

    cfg, _ = resolve_seq2seq_transformer_config(
        vocab_size=vocab_size, src_vocab_size=src_vocab_size, size=size,
        model={"n_layers": n_layers, "norm": norm, "positional": positional})
    return build_model("seq2seq", cfg, seed=seed).eval()


class _Probe:
    """Forward hooks on every module: the order modules finish in, and what each was given and gave."""

    def __init__(self, model: nn.Module) -> None:
        self.calls: list = []  # module names in the order their forward returned
        self.seen: dict = {}  # name -> {"args": [shapes], "out": shape, "allowed": bool tensor or None}
        self._handles = [m.register_forward_hook(self._hook(name), with_kwargs=True)
                         for name, m in model.named_modules() if name]

    def _hook(self, name: str):
        def record(module, args, kwargs, output):
            self.calls.append(name)
            if name in self.seen:
                return
            out = output[0] if isinstance(output, tuple) else output
            tensors = [a for a in args if isinstance(a, torch.Tensor)]
            allowed = next((a for a in tensors if a.dtype == torch.bool), None)
            self.seen[name] = {"args": [list(a.shape) for a in tensors], "out": list(out.shape),
                               "allowed": allowed, "first_arg": tensors[0].detach().clone() if tensors else None,
                               "output": out.detach().clone()}
        return record

    def close(self) -> None:
        for h in self._handles:
            h.remove()


def _attention_role(seen: dict, S: int, T: int) -> tuple:
    """(role, mask) of an attention call, from what it was given: queries and keys of one sequence
    (self-attention) or target queries on source keys (cross-attention); the mask "causal" (the lower
    triangle), "padding" (a per-sentence mask with some keys off) or "none"."""
    q_len, k_len = seen["args"][0][1], seen["args"][1][2]
    allowed = seen["allowed"]
    if allowed is None or bool(allowed.all()):
        mask = "none"
    elif allowed.dim() == 2 and bool(torch.equal(allowed, torch.ones_like(allowed).tril(k_len - q_len))):
        mask = "causal"
    else:
        mask = "padding"
    if q_len == T and k_len == S:
        return "cross-attention", mask
    return ("masked self-attention" if mask == "causal" else "self-attention"), mask


def _first_call(probe: _Probe, name: str) -> int:
    return probe.calls.index(name) if name in probe.calls else -1


def describe_translator(model, *, batch: int = PROBE_BATCH, src_len: int = PROBE_SRC,
                        tgt_len: int = PROBE_TGT) -> dict:
    """What the Transformer figure draws of ``model`` (a ``Seq2SeqTransformer``): read from
    ``named_modules()`` and one teacher-forced forward pass of ``batch`` sentences of ``src_len`` source
    and ``tgt_len`` target tokens, with a hook on every module."""
    from neural.transformer import sinusoidal_table

    B, S, T = batch, src_len, tgt_len
    if S == T:
        raise InputError("the probe needs different source and target lengths",
                         fix="pass src_len != tgt_len: the lengths tell self- from cross-attention")
    cfg = model.config
    modules = dict(model.named_modules())
    gen = torch.Generator().manual_seed(0)
    src = torch.randint(4, cfg.src_vocab_size, (B, S), generator=gen)
    lengths = torch.tensor([S - 2 * k for k in range(B)]).clamp(min=1)  # ragged: padding is masked
    tgt = torch.randint(4, cfg.vocab_size, (B, T), generator=gen)
    probe = _Probe(model)
    try:
        with torch.no_grad():
            logits, _, _ = model((src, lengths, tgt))
    finally:
        probe.close()
    seen = probe.seen

    def params(name: str) -> dict:
        return {k: list(p.shape) for k, p in modules[name].named_parameters(recurse=False)}

    # Stacks: the model's ModuleLists; the one whose layers attend from target to source is the decoder.
    stacks = {}
    for name, child in model.named_children():
        if not isinstance(child, nn.ModuleList) or len(child) == 0:
            continue
        layer0 = f"{name}.0"
        sublayers, pending_norm = [], None
        for local, sub in child[0].named_children():
            full = f"{layer0}.{local}"
            if isinstance(sub, nn.Dropout):
                continue
            if isinstance(sub, nn.LayerNorm):
                pending_norm = (local, full)
                continue
            entry = {"name": local, "module": full, "class": type(sub).__name__, "out": seen[full]["out"],
                     "children": [{"name": k, "module": f"{full}.{k}", "class": type(m).__name__,
                                   "in": getattr(m, "in_features", None), "out": getattr(m, "out_features", None),
                                   "shapes": params(f"{full}.{k}")}
                                  for k, m in sub.named_children() if not isinstance(m, nn.Dropout)]}
            if hasattr(sub, "n_heads"):
                entry["role"], entry["mask"] = _attention_role(seen[full], S, T)
                entry["heads"] = sub.n_heads
                entry["keys"] = seen[full]["args"][1]
                entry["d_head"] = entry["keys"][-1]
                kv = f"{full}.kv"
                entry["kv_reads"] = seen[kv]["args"][0] if kv in seen else None
                # Keys and values made before the layer's first sublayer ran: once per sentence (encode).
                inside = [i for i, n in enumerate(probe.calls) if n.startswith(f"{layer0}.") and not n.startswith(kv)]
                entry["kv_precomputed"] = kv in seen and _first_call(probe, kv) < min(inside)
            else:
                act = getattr(sub, "activation", None)
                entry["role"] = "feed-forward"
                entry["activation"] = getattr(act, "__name__", type(act).__name__) if act is not None else None
            if pending_norm is not None:
                ln_local, ln_full = pending_norm
                entry["norm"] = {"name": ln_local, "module": ln_full, "shape": params(ln_full)["weight"],
                                 # hooks fire as a forward returns: the norm finished first means it
                                 # normalised the sublayer's input (pre-norm), else its sum (post-norm).
                                 "placement": "pre" if _first_call(probe, ln_full) < _first_call(probe, full)
                                 else "post"}
                pending_norm = None
            sublayers.append(entry)
        last = f"{name}.{len(child) - 1}"
        after = probe.calls[_first_call(probe, last) + 1:]
        final = next((n for n in after if "." not in n and isinstance(modules[n], (nn.LayerNorm, nn.Identity))), None)
        stacks[name] = {
            "stack": name, "n_layers": len(child), "layer_class": type(child[0]).__name__,
            "layers": [f"{name}.{k}" for k in range(len(child))], "sublayers": sublayers,
            "final_norm": None if final is None else {"name": final, "class": type(modules[final]).__name__},
            "in": seen[layer0]["args"][0], "out": seen[last]["out"],
        }
    decoders = [s for s in stacks.values() if any(x.get("role") == "cross-attention" for x in s["sublayers"])]
    encoders = [s for s in stacks.values() if s not in decoders]
    if len(decoders) != 1 or len(encoders) != 1:
        raise InputError(f"expected one encoder and one decoder stack, found {sorted(stacks)}",
                         fix="a figure of another architecture needs its own drawing function")
    enc, dec = encoders[0], decoders[0]

    # Embeddings: their side from the length they embed; the scale from the stream they start.
    d = cfg.d_model
    # Learned positions are read as a weight slice, never called: the uncalled embeddings, by name.
    positions = [{"name": name, "shape": list(m.weight.shape), "side": "encoder" if "src" in name else "decoder"}
                 for name, m in modules.items() if isinstance(m, nn.Embedding) and name not in seen]
    embeddings = []
    for name, m in modules.items():
        if not isinstance(m, nn.Embedding) or name not in seen:
            continue
        side = "encoder" if seen[name]["out"][1] == S else "decoder"
        stream = seen[(enc if side == "encoder" else dec)["layers"][0]]["first_arg"]
        emb = seen[name]["output"]
        learned = [modules[p["name"]].weight for p in positions if p["side"] == side]
        pos = learned[0].detach()[:emb.size(1)] if learned else sinusoidal_table(emb.size(1), d)
        # The stream the first layer reads is scale * embedding + positions (dropout is off in eval):
        # the least-squares scale says what the model multiplies its embeddings by.
        scale = float(((stream - pos) * emb).sum() / (emb * emb).sum())
        embeddings.append({"name": name, "side": side, "shape": list(m.weight.shape), "ids": seen[name]["args"][0],
                           "out": seen[name]["out"], "scale": scale})
    # The output layer is read as a weight by LanguageModel.output (never called): the model's Linear
    # onto the target vocabulary.
    out_name = next(n for n, m in model.named_children() if isinstance(m, nn.Linear)
                    and m.out_features == cfg.vocab_size)
    out_mod = modules[out_name]
    tied = next((n for n, m in modules.items() if isinstance(m, nn.Embedding) and m.weight is out_mod.weight), None)
    n_params = sum(p.numel() for p in model.parameters())
    drawn = {e["name"] for e in embeddings} | {p["name"] for p in positions} | {out_name}
    for s in (enc, dec):
        drawn |= set(s["layers"]) | {s["stack"]}
        if s["final_norm"] and s["final_norm"]["class"] == "LayerNorm":  # an Identity draws nothing
            drawn.add(s["final_norm"]["name"])
        for x in s["sublayers"]:
            drawn.add(x["module"])
            drawn |= {ch["module"] for ch in x["children"]}
            if "norm" in x:
                drawn.add(x["norm"]["module"])
    return {
        "figure": "transformer", "class": f"{type(model).__module__}.{type(model).__qualname__}",
        "config": cfg.to_dict(), "parameters": n_params,
        "probe": {"B": B, "S": S, "T": T, "src_len": lengths.tolist()},
        "encoder": enc, "decoder": dec, "embeddings": embeddings, "positions": positions,
        "output": {"name": out_name, "in": out_mod.in_features, "out": out_mod.out_features, "tied_to": tied,
                   "logits": list(logits.shape)},
        "dropout": {"p": cfg.dropout, "modules": sorted({n.rsplit(".", 1)[-1] for n, m in modules.items()
                                                          if isinstance(m, nn.Dropout)})},
        "modules": sorted(drawn),
        # Everything else but dropout: layers 1.. of a stack are the "N x" of its frame.
        "not_drawn": sorted(n for n, m in modules.items() if n and n not in drawn
                            and not isinstance(m, (nn.Dropout, nn.Identity))
                            and not (n.split(".")[0] in stacks and len(n.split(".")) > 1 and n.split(".")[1] != "0")),
    }


def _symbols(meta: dict) -> dict:
    """Each probe size by its symbol (B, S, T, d, H, d_head, d_ff, V), where the number is unambiguous."""
    cfg, p = meta["config"], meta["probe"]
    named = {"B": p["B"], "S": p["S"], "T": p["T"], "d": cfg["d_model"], "H": cfg["n_heads"],
             "d_h": cfg["d_model"] // cfg["n_heads"], "d_ff": cfg["d_ff"], "V": cfg["vocab_size"]}
    counts = {}
    for v in named.values():
        counts[v] = counts.get(v, 0) + 1
    return {v: k for k, v in named.items() if counts[v] == 1}


def _sym_shape(shape, symbols: dict) -> str:
    return "(" + ", ".join(symbols.get(int(s), str(int(s))) for s in shape) + ")"


def _both(shape, symbols: dict) -> str:
    return f"{_sym_shape(shape, symbols)} = {_shape(shape)}"


# Geometry of the Transformer figure, in drawing units (``_Canvas`` scale 0.5 in).
_SCALE = 0.5
_BW = 7.4  # width of a sublayer box
_NORM_H, _GAP, _ADD_R = 0.75, 0.38, 0.3
_PAD_BOTTOM, _PAD_TOP = 0.55, 1.1  # inside a stack's frame, below the first and above the last sublayer


def _sublayer_lines(x: dict, symbols: dict) -> list:
    """The text of a sublayer's box: what it is, its real name, its parts and the shapes it works on."""
    title = {"self-attention": "Multi-head self-attention",
             "masked self-attention": "Masked multi-head self-attention",
             "cross-attention": "Cross-attention (encoder-decoder)",
             "feed-forward": f"Position-wise feed-forward ({x.get('activation')})"}[x["role"]]
    parts = ", ".join(f"{ch['name']} {ch['in']}→{ch['out']}" for ch in x["children"] if ch["in"])
    if x["role"] == "feed-forward":
        lines = [f"{x['module']}", parts, f"out {_both(x['out'], symbols)}"]
    else:
        keys = f"K, V {_sym_shape(x['keys'], symbols)}" + (" of E" if x["role"] == "cross-attention" else "")
        keys += "" if x["mask"] == "none" else f", {x['mask']} mask"
        lines = [f"{x['module']}: {x['heads']} heads × {x['d_head']}", parts, keys]
    return [(title, 11, "bold", "sans-serif")] + [(s, 9.5, "normal", "monospace") for s in lines]


def _box_height(lines: list) -> float:
    return sum(1.45 * size / (72 * _SCALE) for _, size, _, _ in lines) + 0.45


def _unit_height(x: dict, symbols: dict) -> float:
    """A sublayer with its norm, residual sum and the wires between them (pre- and post-norm alike)."""
    return 4 * _GAP + _NORM_H + _box_height(_sublayer_lines(x, symbols)) + 2 * _ADD_R


def _stack_height(stack: dict, symbols: dict) -> float:
    return _PAD_BOTTOM + sum(_unit_height(x, symbols) for x in stack["sublayers"]) + _PAD_TOP


def _norm_box(c: _Canvas, xc: float, y: float, name: str, shape=None) -> None:
    text = f"LayerNorm {name}" + (f" {_shape(shape)}" if shape else "")
    c.box(xc - _BW / 2 + 1.2, y, _BW - 2.4, _NORM_H, [(text, 10, "normal", "sans-serif")], FILL["norm"])


def _draw_stack(c: _Canvas, stack: dict, xc: float, y0: float, symbols: dict, skip_side: int) -> dict:
    """Layer 0 of ``stack`` (its sublayers bottom to top) in a frame labelled with the layer count;
    ``skip_side`` -1 draws the residual paths on the left, +1 on the right.
    -> {sublayer name: its box's centre y, "top": the frame's top}."""
    height = _stack_height(stack, symbols)
    fx, fw = xc - _BW / 2 - 1.1, _BW + 2.2
    c.frame(fx, y0, fw, height)
    n = stack["n_layers"]
    layers = stack["layers"][0] if n == 1 else f"{stack['layers'][0]} … {stack['layers'][-1]}"
    c.text(fx + 0.25, y0 + height - 0.5, f"{n} × {stack['layer_class']}", size=12, weight="bold", va="center")
    c.text(fx + fw - 0.25, y0 + height - 0.5, layers, size=9.5, family="monospace", ha="right", va="center",
           color="#444444")
    centres = {}
    skip_x = xc + skip_side * (_BW / 2 + 0.55)
    y = y0 + _PAD_BOTTOM
    c.wire((xc, y0), (xc, y), arrow=False)
    for x in stack["sublayers"]:
        norm = x.get("norm")
        pre = norm is not None and norm["placement"] == "pre"
        branch = y
        c.dot(xc, branch)
        if pre:
            c.wire((xc, y), (xc, y + _GAP))
            _norm_box(c, xc, y + _GAP, norm["name"], norm["shape"])
            y += _GAP + _NORM_H
        lines = _sublayer_lines(x, symbols)
        h = _box_height(lines)
        fill = FILL["ffn"] if x["role"] == "feed-forward" else FILL["attention"]
        c.wire((xc, y), (xc, y + _GAP))
        c.box(xc - _BW / 2, y + _GAP, _BW, h, lines, fill)
        centres[x["name"]] = y + _GAP + h / 2
        y += _GAP + h
        c.wire((xc, y), (xc, y + _GAP))
        y += _GAP + _ADD_R
        c.op(xc, y, "+", r=_ADD_R, size=12)
        c.wire((xc, branch), (skip_x, branch), (skip_x, y), arrow=False)
        c.wire((skip_x, y), (xc + skip_side * _ADD_R, y))
        y += _ADD_R
        if norm is not None and not pre:  # post-norm: LN(x + sublayer(x))
            c.wire((xc, y), (xc, y + _GAP))
            _norm_box(c, xc, y + _GAP, norm["name"], norm["shape"])
            y += _GAP + _NORM_H
        c.wire((xc, y), (xc, y + _GAP), arrow=False)
        y += _GAP
    centres["top"] = y0 + height
    c.wire((xc, y), (xc, y0 + height), arrow=False)
    return centres


def _embedding_column(c: _Canvas, meta: dict, side: str, xc: float, top: float, symbols: dict) -> None:
    """Ids -> embedding (times its measured scale) + positions, up to ``top`` (the stack's frame)."""
    e = next(x for x in meta["embeddings"] if x["side"] == side)
    what = "source ids" if side == "encoder" else "target ids, shifted right"
    c.text(xc, 0.4, f"{what} {_both(e['ids'], symbols)}", size=10, ha="center", va="center")
    c.wire((xc, 0.75), (xc, 1.2))
    root = math.sqrt(meta["config"]["d_model"])
    scale = e["scale"]
    scaled = "" if abs(scale - 1) < 1e-3 else (
        f"× √d = {root:g}, " if abs(scale - root) < 1e-3 * root else f"× {scale:.4g}, ")
    c.box(xc - _BW / 2, 1.2, _BW, 1.4, [(f"Embedding {e['name']} {_shape(e['shape'])}", 10.5, "bold", "sans-serif"),
                                        (f"{scaled}out {_both(e['out'], symbols)}", 9.5, "normal", "monospace")],
          FILL["embed"])
    y = 3.4
    c.wire((xc, 2.6), (xc, y - _ADD_R))
    c.op(xc, y, "+", r=_ADD_R)
    pos = next((p for p in meta["positions"] if p["side"] == side), None)
    text = (f"learned positions\n{pos['name']} {_shape(pos['shape'])}" if pos
            else "sinusoidal positions\n(no parameters)")
    away = -1 if side == "encoder" else 1
    c.text(xc + away * 3.1, y, text, size=9.5, ha="center", va="center")
    c.wire((xc + away * 1.55, y), (xc + away * _ADD_R, y))
    c.wire((xc, y + _ADD_R), (xc, top), arrow=False)


def transformer_figure(model=None, **config):
    """``(figure, metadata)`` of the encoder-decoder Transformer: ``model`` a ``Seq2SeqTransformer``
    (default: :func:`translator_model` ``(**config)``)."""
    model = model if model is not None else translator_model(**config)
    meta = describe_translator(model)
    cfg = meta["config"]
    symbols = _symbols(meta)
    enc, dec = meta["encoder"], meta["decoder"]

    frame = _BW + 2.2  # a stack's frame: the boxes and the residual paths beside them
    W = 0.3 + frame + 2.6 + frame + 0.3
    sizes = (f"{enc['n_layers']} + {dec['n_layers']} layers, d_model {cfg['d_model']}, {cfg['n_heads']} heads, "
             f"d_ff {cfg['d_ff']}, {cfg['norm']}-norm, {cfg['positional']} positions, "
             f"{meta['parameters']:,} parameters")
    order = ["B", "S", "T", "d", "H", "d_h", "d_ff", "V"]
    legend = ", ".join(f"{k} = {v}" for v, k in sorted(symbols.items(), key=lambda kv: order.index(kv[1])))
    drops = ", ".join(meta["dropout"]["modules"])
    notes = ["Shapes of one teacher-forced pass of B sentences, S source and T target tokens (V target types):",
             f"{legend}.", f"Not drawn: the dropout modules ({drops}; p = {meta['dropout']['p']:g}), the identity in "
             "this eval-mode pass."]
    chars = int(W * _SCALE * 13)  # about 13 characters an inch at 9.5 points
    lines = [(f"Encoder-decoder Transformer: {meta['class']}", 14, "bold", INK), (sizes, 10.5, "normal", INK)]
    lines += [(line, 9.5, "normal", "#444444") for note in notes for line in textwrap.wrap(note, chars)]
    header = sum(1.15 * _line_height(size, _SCALE) for _, size, _, _ in lines) + 0.6
    base = 4.6  # the stacks' frames start here, above the embeddings and positions
    final_norm_h = (0.45 + _NORM_H) if (dec["final_norm"] or {}).get("class") == "LayerNorm" else 0.0
    H = base + _stack_height(dec, symbols) + final_norm_h + (0.45 + 1.4) + (0.45 + 0.8 + 0.3) + header
    c = _Canvas(W, H, scale=_SCALE)
    ex, dx = 0.3 + frame / 2, W - 0.3 - frame / 2
    y = H - 0.2
    for text, size, weight, color in lines:
        y -= 1.15 * _line_height(size, _SCALE) / 2
        c.text(0.3, y, text, size=size, weight=weight, color=color, va="center")
        y -= 1.15 * _line_height(size, _SCALE) / 2

    centres = {}
    for side, xc, stack in (("encoder", ex, enc), ("decoder", dx, dec)):
        _embedding_column(c, meta, side, xc, base, symbols)
        centres[side] = _draw_stack(c, stack, xc, base, symbols, skip_side=-1 if side == "encoder" else 1)

    def final_norm(stack: dict, xc: float, y: float) -> float:
        fn = stack["final_norm"]
        if fn and fn["class"] == "LayerNorm":
            c.wire((xc, y), (xc, y + 0.45))
            _norm_box(c, xc, y + 0.45, fn["name"])
            y += 0.45 + _NORM_H
        return y

    # The encoder output E, into every decoder layer's cross-attention (keys and values).
    y = final_norm(enc, ex, centres["encoder"]["top"])
    cross = next(x for x in dec["sublayers"] if x["role"] == "cross-attention")
    cy = centres["decoder"][cross["name"]]
    mid = (ex + _BW / 2 + 1.1 + dx - _BW / 2 - 1.1) / 2
    c.wire((ex, y), (ex, y + 0.6), (mid, y + 0.6), (mid, cy), (dx - _BW / 2, cy))
    c.text(ex - _BW / 2, y + 1.45, f"encoder output E {_both(enc['out'], symbols)}", size=10, va="center")
    when = ", once per sentence" if cross.get("kv_precomputed") else ""
    c.text(ex - _BW / 2, y + 1.0, f"→ keys and values of {dec['stack']}.*.{cross['name']}.kv{when}", size=9.5,
           va="center", color="#444444")

    # The output layer.
    y = final_norm(dec, dx, centres["decoder"]["top"])
    out = meta["output"]
    c.wire((dx, y), (dx, y + 0.45))
    tied = f"weight = {out['tied_to']}.weight (tied)" if out["tied_to"] else "its own weight (untied)"
    c.box(dx - _BW / 2, y + 0.45, _BW, 1.4, [(f"Linear {out['name']} {out['in']}→{out['out']}", 10.5, "bold",
                                              "sans-serif"), (tied, 9.5, "normal", "monospace")], FILL["output"])
    y += 0.45 + 1.4
    c.wire((dx, y), (dx, y + 0.45))
    c.text(dx, y + 0.8, rf"log-softmax: $\log P(y_t \mid y_{{<t}}, x)$, {_both(out['logits'], symbols)}", size=10.5,
           ha="center", va="center")
    meta["texts"] = c.texts
    return c.fig, meta


# ---------------------------------------------------------------------------- all of them
FIGURES = {"gru_cell": gru_cell_figure, "lstm_cell": lstm_cell_figure, "transformer": transformer_figure}


def textbook_figures(*, cell_sizes: Optional[dict] = None, transformer: Optional[dict] = None) -> dict:
    """``{name: (png bytes, metadata)}`` for gru_cell, lstm_cell and transformer."""
    out = {}
    for name, build in FIGURES.items():
        fig, meta = build(**((transformer or {}) if name == "transformer" else (cell_sizes or {})))
        out[name] = (png_bytes(fig), meta)
    return out
