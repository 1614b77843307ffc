"""``ngramlm ladder CHECKPOINT [CORPUS]``: the ladder of :mod:`reports.experiments.ladder` as a command."""
from __future__ import annotations

import json
from pathlib import Path

import click

from corpora.options import data_dir_option, json_option, threads_option
from corpora.textio import check_writable


def _echo_err(msg: str) -> None:
    click.echo(msg, err=True)


@click.command("ladder")
@click.argument("checkpoint", type=click.Path(dir_okay=False))
@click.argument("corpus", required=False)
@data_dir_option
@click.option("-o", "--out", "out_dir", type=click.Path(file_okay=False), default="ladder-out", show_default=True,
              help="Folder for ladder.json, report.md, report.html and plots/.")
@click.option("--order", type=click.IntRange(min=2), default=5, show_default=True, help="Order of the count model.")
@click.option("--smoothing", type=click.Choice(["mkn", "kn", "wb"]), default="mkn", show_default=True)
@click.option("--cache/--no-cache", default=True, show_default=True, help="The neural cache rung.")
@click.option("--cache-window", type=click.IntRange(min=1), default=2000, show_default=True)
@click.option("--dynamic-eval/--no-dynamic-eval", default=True, show_default=True, help="The dynamic evaluation rung.")
@click.option("--dyn-rule", type=click.Choice(["rms", "sgd"]), default="rms", show_default=True)
@click.option("--tune-tokens", type=click.IntRange(min=1), default=10000, show_default=True,
              help="Valid prefix the dynamic-evaluation grid is searched on (the other weights use all of valid; "
                   "10,000 keeps PTB's adaptation and scoring near 7 minutes on 2 cores).")
@click.option("--dyn-segment", type=click.IntRange(min=1), default=20, show_default=True,
              help="Dynamic evaluation: tokens scored before each update (shorter adapts sooner, costs more).")
@click.option("--infini/--no-infini", default=True, show_default=True, help="The ∞-gram rung (three-way mixture).")
@click.option("--residual", type=click.Path(dir_okay=False, exists=True), default=None, metavar="CHECKPOINT",
              help="A side row: a model of `neural train --ngram-residual` (same corpus), scored on the same tokens.")
@threads_option()
@json_option
def ladder_cmd(checkpoint, corpus, data_dir, out_dir, order, smoothing, cache, cache_window, dynamic_eval, dyn_rule,
               tune_tokens, dyn_segment, infini, residual, threads, as_json):
    """Climb the ladder for CHECKPOINT on its corpus [or CORPUS]: n-gram, the model, + neural cache,
    + dynamic evaluation, + n-gram (global, then per-context weights), + ∞-gram -- all on the same test
    tokens, tuned on valid, with bootstrap intervals and the time each rung adds."""
    if threads:
        import torch

        torch.set_num_threads(threads)
    from ..experiments.ladder import LadderOptions, run_ladder
    from ..render.ladder import write_ladder

    check_writable(Path(out_dir) / "report.html", what="ladder report")
    opts = LadderOptions(order=order, smoothing=smoothing, cache=cache, window=cache_window, dynamic=dynamic_eval,
                         rule=dyn_rule, tune_tokens=tune_tokens, segment_len=dyn_segment, infini=infini,
                         residual=residual)
    results = run_ladder(checkpoint, corpus, data_dir=data_dir, options=opts, log=_echo_err)
    page = write_ladder(results, out_dir)
    if as_json:
        click.echo(json.dumps({k: v for k, v in results.items() if k != "per_token_log2"}, indent=2, default=float))
        return
    click.echo(f"{'rung':<58} {'test ppl':>9} {'95 % CI':>15} {'valid ppl':>9} {'extra':>8}")
    for row in results["rows"]:
        ci = row["test_ppl_ci"]
        click.echo(f"{('' if row['rung'] else '  (alone) ') + row['label']:<58} {row['test_ppl']:9.2f} "
                   f"{(f'{ci[0]:.2f}-{ci[1]:.2f}' if ci else '-'):>15} {row['valid_ppl']:9.2f} "
                   f"{row['extra_seconds']:7.1f}s")
    click.echo(f"adaptation and scoring: {results['adaptation_seconds'] / 60:.1f} min; wrote {page}")
