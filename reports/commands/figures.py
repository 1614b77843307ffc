"""``ngramlm figures [--out DIR]``: the textbook's architecture figures, drawn from the toolkit's modules
(:mod:`reports.textbook_figures`)."""
from __future__ import annotations

import json
from pathlib import Path

import click

from corpora.options import threads_option
from corpora.textio import check_writable

SIZES = ("tiny", "small", "default")  # the Transformer translator's presets (SEQ2SEQ_TRANSFORMER_PRESETS)


@click.command("figures")
@click.option("-o", "--out", "out_dir", type=click.Path(file_okay=False), default="figures", show_default=True,
              help="Folder for gru_cell.png, lstm_cell.png, transformer.png and figures.json (what each drew).")
@click.option("--size", type=click.Choice(SIZES), default="default", show_default=True,
              help="The Transformer translator's preset, as `seq2seq train --arch transformer --size`.")
@click.option("--layers", type=click.IntRange(min=1), default=None,
              help="Encoder and decoder layers of the Transformer [the preset's].")
@click.option("--input-size", type=click.IntRange(min=1), default=32, show_default=True,
              help="The cells' input width d (layer 0's embedding width).")
@click.option("--hidden-size", type=click.IntRange(min=1), default=64, show_default=True,
              help="The cells' hidden width h.")
@threads_option(default=1)
def figures_cmd(out_dir, size, layers, input_size, hidden_size, threads):
    """Draw a GRU cell, an LSTM cell and the encoder-decoder Transformer from the toolkit's own modules:
    every name, shape and layer count on them is read from the modules (no corpus needed)."""
    import torch

    torch.set_num_threads(threads)
    from ..textbook_figures import textbook_figures

    out = Path(out_dir)
    names = ("gru_cell.png", "lstm_cell.png", "transformer.png", "figures.json")
    for name in names:  # before any drawing: an unwritable folder fails now, not after
        check_writable(out / name, what="figure")
    figures = textbook_figures(cell_sizes={"input_size": input_size, "hidden_size": hidden_size},
                               transformer={"size": size, "n_layers": layers})
    for name, (png, _) in figures.items():
        (out / f"{name}.png").write_bytes(png)
        click.echo(f"{out / (name + '.png')}  ({len(png) / 1024:.0f} KB)")
    # Keys sorted, so a regenerated file differs only where the modules did.
    meta = {name: m for name, (_, m) in figures.items()}
    (out / "figures.json").write_text(json.dumps(meta, indent=1, sort_keys=True) + "\n", encoding="utf-8")
    click.echo(f"{out / 'figures.json'}  (what each figure drew: module and parameter names, shapes, counts)")
