"""The textbook's figures are drawn from the modules (reports/textbook_figures.py, `ngramlm figures`).

What each figure says it drew is held against the module itself: parameter names and shapes against
``named_parameters()``, sub-modules and layer counts against ``named_modules()``; a renamed or added
parameter, another layer count or another norm placement changes the figure.  The committed
docs/figures/figures.json must be what the modules give today (else: rerun the command).
"""
from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

from reports.plots import plt  # noqa: E402
from reports.textbook_figures import (  # noqa: E402
    cell_model, describe_cell, describe_translator, gru_cell_figure, lstm_cell_figure, transformer_figure,
    translator_model,
)

REPO = Path(__file__).resolve().parent.parent
FIGURES = REPO / "docs" / "figures"
CELL_FIGURES = {"gru": gru_cell_figure, "lstm": lstm_cell_figure}


@pytest.fixture(autouse=True)
def one_thread():
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


def drawn(figure, model) -> dict:
    fig, meta = figure(model)
    plt.close(fig)
    return meta


@pytest.fixture(scope="module")
def tiny_translator():
    return translator_model(size="tiny", src_vocab_size=20, vocab_size=30)


# ---------------------------------------------------------------------------- the cells
@pytest.mark.parametrize("cell", ["gru", "lstm"])
def test_every_parameter_of_the_cell_is_drawn_with_its_real_name_and_shape(cell):
    from neural.cells import FUSED_ORDER

    model = cell_model(cell, input_size=6, hidden_size=10)
    meta = drawn(CELL_FIGURES[cell], model)
    real = {n: list(p.shape) for n, p in model.named_parameters() if n.startswith("rnn.layers.0.")}
    shown = {p["name"]: p["shape"] for g in meta["gates"] for p in g["parameters"]}
    assert shown == real and not meta["unplaced"]
    assert [g["key"] for g in meta["gates"]] == list(FUSED_ORDER[cell])
    for g in meta["gates"]:
        for p in g["parameters"]:
            assert f"{p['local']}  {tuple(p['shape'])}" in meta["texts"]
            assert p["local"][-1] == g["key"]  # in the box of its gate
    # The equations are written from the same names: W_xz -> W_{xz}.
    equations = [t for t in meta["texts"] if t.startswith("$") and "=" in t]
    for name in real:
        local = name.rsplit(".", 1)[1]
        base, sub = local.split("_", 1)
        assert any(f"{base}_{{{sub}}}" in e for e in equations), local
    # Wire shapes from the forward pass: X_t (n, d), states (n, h); the fused layout of the same weights.
    assert meta["tensors"]["X_t"] == [4, 6] and meta["tensors"]["state_out"][0] == [4, 10]
    gates = len(FUSED_ORDER[cell])
    assert meta["fused"]["weight_ih_l0"] == [gates * 10, 6] and meta["fused"]["weight_hh_l0"] == [gates * 10, 10]


def test_a_renamed_or_added_parameter_changes_the_cell_figure():
    model = cell_model("gru", input_size=6, hidden_size=10)
    before = drawn(gru_cell_figure, model)
    layer = model.rnn.layers[0]
    layer.U_xz = torch.nn.Parameter(torch.zeros(6, 10))  # ends in the update gate's letter
    layer.scale = torch.nn.Parameter(torch.ones(10))  # no gate's letter
    after = drawn(gru_cell_figure, model)
    update = next(g for g in after["gates"] if g["key"] == "z")
    assert "rnn.layers.0.U_xz" in [p["name"] for p in update["parameters"]]
    assert "U_xz  (6, 10)" in after["texts"] and "U_xz  (6, 10)" not in before["texts"]
    assert [p["local"] for p in after["unplaced"]] == ["scale"]
    assert any("parameters of no gate: scale (10,)" in t for t in after["texts"])


def test_the_cell_figure_follows_the_config():
    small = drawn(gru_cell_figure, cell_model("gru", input_size=6, hidden_size=10))
    wide = drawn(gru_cell_figure, cell_model("gru", input_size=6, hidden_size=12, gru_reset="before"))
    assert "W_hz  (10, 10)" in small["texts"] and "W_hz  (12, 12)" in wide["texts"]
    assert "W_hz  (10, 10)" not in wide["texts"]
    candidate = [t for t in wide["texts"] if t.startswith(r"$\tilde{H}_t =")]
    assert candidate == [r"$\tilde{H}_t = \tanh(X_t W_{xh} + b_{h} + (R_t \odot H_{t-1}) W_{hh} + b_{hh})$"]
    with pytest.raises(Exception, match="scratch"):
        describe_cell(cell_model("gru").convert("fused"))


# ---------------------------------------------------------------------------- the Transformer
def test_the_transformer_figure_draws_the_real_modules(tiny_translator):
    model = tiny_translator
    meta = drawn(transformer_figure, model)
    modules = dict(model.named_modules())
    cfg = model.config
    assert set(meta["modules"]) <= set(modules)
    # Every module of the drawn layers (dropout aside) and every top-level one is on the figure.
    for name, m in modules.items():
        if isinstance(m, (torch.nn.Dropout, torch.nn.Identity)) or not name:
            continue
        if name.startswith(("enc_layers.0", "dec_layers.0")) or "." not in name:
            assert name in meta["modules"], name
    assert meta["not_drawn"] == []
    enc, dec = meta["encoder"], meta["decoder"]
    assert (enc["stack"], enc["n_layers"], enc["layer_class"]) == ("enc_layers", len(model.enc_layers), "EncoderLayer")
    assert (dec["stack"], dec["n_layers"], dec["layer_class"]) == ("dec_layers", len(model.dec_layers), "DecoderLayer")
    assert [(x["name"], x["role"]) for x in enc["sublayers"]] == [("self_attn", "self-attention"),
                                                                  ("ff", "feed-forward")]
    assert [(x["name"], x["role"], x.get("mask")) for x in dec["sublayers"]] == [
        ("self_attn", "masked self-attention", "causal"), ("cross_attn", "cross-attention", "padding"),
        ("ff", "feed-forward", None)]
    assert [x["norm"]["name"] for x in dec["sublayers"]] == ["ln_self", "ln_cross", "ln_ff"]
    assert {x["norm"]["placement"] for x in enc["sublayers"] + dec["sublayers"]} == {"pre"}
    # Shapes: the sub-modules' parameters, the probe's tensors.
    B, S, T = (meta["probe"][k] for k in "BST")
    d, H = cfg.d_model, cfg.n_heads
    cross = dec["sublayers"][1]
    assert cross["keys"] == [B, H, S, d // H] and dec["sublayers"][0]["keys"] == [B, H, T, d // H]
    assert cross["kv_precomputed"] and not dec["sublayers"][0]["kv_precomputed"]
    for x in enc["sublayers"] + dec["sublayers"]:
        for ch in x["children"]:
            real = {k: list(p.shape) for k, p in modules[ch["module"]].named_parameters(recurse=False)}
            assert ch["shapes"] == real and ch["out"] == real["weight"][0]
    ff = {ch["name"]: (ch["in"], ch["out"]) for ch in enc["sublayers"][1]["children"]}
    assert ff == {"up": (d, cfg.d_ff), "down": (cfg.d_ff, d)}
    assert enc["final_norm"]["name"] == "ln_enc" and dec["final_norm"]["name"] == "ln_dec"
    assert meta["output"] == {"name": "decoder", "in": d, "out": cfg.vocab_size, "tied_to": "embedding",
                              "logits": [B, T, cfg.vocab_size]}
    sides = {e["name"]: (e["side"], e["shape"]) for e in meta["embeddings"]}
    assert sides == {"src_embedding": ("encoder", [cfg.src_vocab_size, d]),
                     "embedding": ("decoder", [cfg.vocab_size, d])}
    assert all(math.isclose(e["scale"], math.sqrt(d), rel_tol=1e-4) for e in meta["embeddings"])
    assert meta["parameters"] == sum(p.numel() for p in model.parameters())
    assert f"{len(model.enc_layers)} × EncoderLayer" in meta["texts"]
    assert "dec_layers.0.cross_attn: 2 heads × 16" in meta["texts"]


def test_the_layer_count_and_norm_placement_change_the_transformer_figure():
    two = drawn(transformer_figure, translator_model(size="tiny", n_layers=2, src_vocab_size=20, vocab_size=30))
    three = drawn(transformer_figure, translator_model(size="tiny", n_layers=3, src_vocab_size=20, vocab_size=30,
                                                      norm="post", positional="learned"))
    assert two["encoder"]["n_layers"] == 2 and three["encoder"]["n_layers"] == 3
    assert "2 × EncoderLayer" in two["texts"] and "3 × DecoderLayer" in three["texts"]
    assert "2 × EncoderLayer" not in three["texts"] and "dec_layers.0 … dec_layers.2" in three["texts"]
    assert {x["norm"]["placement"] for x in three["decoder"]["sublayers"]} == {"post"}
    assert three["encoder"]["final_norm"]["class"] == "Identity"
    assert "LayerNorm ln_enc" in two["texts"] and "LayerNorm ln_enc" not in three["texts"]
    # Learned positions: their modules are drawn, and the embeddings are added unscaled.
    assert [(p["name"], p["side"]) for p in three["positions"]] == [("src_pos", "encoder"), ("tgt_pos", "decoder")]
    assert all(math.isclose(e["scale"], 1.0, rel_tol=1e-4) for e in three["embeddings"])
    assert any("src_pos" in t for t in three["texts"])


# ---------------------------------------------------------------------------- the command and the committed files
def test_figures_command_writes_the_three_pngs_and_their_metadata(run_cli, tmp_path):
    code, out, err = run_cli("figures", "--out", tmp_path, "--size", "tiny", "--layers", "2", "--input-size", "6",
                             "--hidden-size", "10")
    assert code == 0, err
    for name in ("gru_cell", "lstm_cell", "transformer"):
        data = (tmp_path / f"{name}.png").read_bytes()
        assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) < 300_000
    meta = json.loads((tmp_path / "figures.json").read_text("utf-8"))
    assert set(meta) == {"gru_cell", "lstm_cell", "transformer"}
    assert meta["transformer"]["encoder"]["n_layers"] == 2 and meta["gru_cell"]["hidden_size"] == 10


def _without(meta: dict, *keys: str) -> dict:
    return {k: v for k, v in meta.items() if k not in keys}


def test_the_committed_figures_are_what_the_modules_give_today():
    """docs/figures: small enough to commit, and drawn from today's modules (else: `ngramlm figures --out
    docs/figures`)."""
    for name in ("gru_cell", "lstm_cell", "transformer"):
        assert (FIGURES / f"{name}.png").stat().st_size < 300_000
    committed = json.loads((FIGURES / "figures.json").read_text("utf-8"))
    hint = "the modules changed since docs/figures was drawn: rerun `ngramlm figures --out docs/figures`"
    for cell in ("gru", "lstm"):
        today = json.loads(json.dumps(describe_cell(cell_model(cell))))
        assert _without(committed[f"{cell}_cell"], "texts") == today, hint
    today = json.loads(json.dumps(describe_translator(translator_model())))
    old = committed["transformer"]
    for key in ("encoder", "decoder", "output", "positions", "modules", "not_drawn", "config", "parameters"):
        assert old[key] == today[key], f"{key}: {hint}"
    assert [_without(e, "scale") for e in old["embeddings"]] == [_without(e, "scale") for e in today["embeddings"]]
