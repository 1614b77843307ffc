"""``ngramlm lab [NAME] [-o DIR] [--seed N] [--quick] [--data-dir DIR]``: list the labs, or run one and write its report."""
from __future__ import annotations

import importlib
import inspect
import time
from pathlib import Path

import click

from corpora.options import data_dir_option

from . import LABS


@click.command("lab")
@click.argument("name", required=False)
@click.option("-o", "--out", "out_dir", type=click.Path(file_okay=False, path_type=Path), default=Path("labs-out"),
              show_default=True, help="Folder for the reports; each lab writes OUT/NAME/.")
@click.option("--seed", type=int, default=0, show_default=True, help="Random seed (the labs are deterministic given it).")
@data_dir_option
@click.option("--quick", is_flag=True, help="Smaller sizes: seconds instead of minutes (the numbers are noisier).")
def lab_cmd(name: str | None, out_dir: Path, seed: int, data_dir: str | None, quick: bool) -> None:
    """Run one of the textbook's experiments as a small lab; with no NAME, list them."""
    if name is None:
        width = max(map(len, LABS))
        for lab_name, info in LABS.items():
            click.echo(f"{lab_name:<{width}}  {info.section}")
            click.echo(f"{'':<{width}}  {info.summary}")
        return
    if name not in LABS:
        from corpora.errors import InputError

        raise InputError(f"unknown lab '{name}'", fix=f"choose one of: {', '.join(LABS)} (`ngramlm lab` lists them)")
    from .output import write_lab

    module = importlib.import_module(LABS[name].module)
    kwargs = {"seed": seed}
    if quick and "quick" in inspect.signature(module.run).parameters:  # the closed-form labs are quick already
        kwargs["quick"] = True
    if data_dir is not None and "data_dir" in inspect.signature(module.run).parameters:  # the labs reading a corpus
        kwargs["data_dir"] = data_dir
    from neural.training.contention import thread_rule

    t0 = time.perf_counter()
    # The shared-cores rule: one torch thread while other processes use the cores, re-measured as it trains.
    with thread_rule(log=lambda m: click.echo(m, err=True)):
        result = module.run(**kwargs)
    seconds = time.perf_counter() - t0
    folder = write_lab(result, out_dir=out_dir)
    click.echo(f"{result.title}  [{result.section}]")
    for what, value in result.headline:
        click.echo(f"  {what}: {value}")
    click.echo(f"ran in {seconds:.1f} s; wrote {folder}/report.html (and report.md, results.json, plots/)")
