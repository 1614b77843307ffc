"""``ngramlm compare`` and ``ngramlm report``."""
from __future__ import annotations

import time
from pathlib import Path

import json

import click

from corpora.options import TOKENIZER, data_dir_option, json_option, seed_option, threads_option
from click.core import ParameterSource

from corpora.errors import InputError
from ngramlm.smoothing import SMOOTHERS

from ..experiments.run import write_results
from ..experiments.settings import (DEFAULT_NEURAL, DEFAULT_SMOOTHERS, NEURAL_SIZES, CompareSettings,
                                    parse_fractions, parse_list, quick_settings)

# option name -> settings field, for the options that define what a run trains
_SETTING_OPTIONS = {
    "corpus": "corpus", "valid_file": "valid_file", "test_file": "test_file", "tokenizer": "tokenizer",
    "tokenizers": "tokenizers", "neural_tokenizers": "neural_tokenizers", "max_order": "max_order", "smoothers": "smoothers", "neural": "neural",
    "neural_minutes": "neural_minutes", "neural_epochs": "neural_epochs", "neural_size": "neural_size",
    "checkpoints": "checkpoints",
    "curve": "curve", "curve_minutes": "curve_minutes", "curve_smoother": "curve_smoother",
    "passage_tokens": "passage_tokens", "toy_train_tokens": "toy_train_tokens",
    "toy_eval_tokens": "toy_eval_tokens", "seed": "seed", "seq2seq_minutes": "seq2seq_minutes", "beams": "beams",
    "ladder": "ladder", "prune_curve": "prune_curve", "fusion": "fusion", "lm_path": "fusion_lm",
    "lm_weight": "fusion_weight",
}


def _parse_beams(text: str) -> tuple:
    try:
        return tuple(int(k) for k in parse_list(text))
    except ValueError:
        raise InputError(f"--beams {text!r} is not a list of integers", fix="use e.g. --beams 1,2,3,4,5") from None


def _echo_err(msg: str) -> None:
    click.echo(msg, err=True)


def _given(ctx: click.Context, name: str) -> bool:
    return ctx.get_parameter_source(name) == ParameterSource.COMMANDLINE


def _settings_from_options(ctx: click.Context, opts: dict, quick: bool) -> CompareSettings:
    values = {
        "corpus": opts["corpus"] or "toy",
        "valid_file": opts["valid_file"],
        "test_file": opts["test_file"],
        "tokenizer": opts["tokenizer"],
        "tokenizers": tuple(parse_list(opts["tokenizers"] or "")),
        "neural_tokenizers": (None if opts["neural_tokenizers"] is None else
                              () if opts["neural_tokenizers"].strip().lower() == "none" else
                              tuple(parse_list(opts["neural_tokenizers"]))),
        "max_order": opts["max_order"],
        "smoothers": parse_list(opts["smoothers"]),
        "neural": () if (opts["neural"] or "").strip().lower() == "none" else parse_list(opts["neural"]),
        "neural_minutes": opts["neural_minutes"],
        "neural_epochs": opts["neural_epochs"],
        "neural_size": opts["neural_size"],
        "checkpoints": tuple(str(Path(c).resolve()) for c in opts["checkpoints"]),
        "curve": parse_fractions(opts["curve"]),
        "curve_minutes": opts["curve_minutes"],
        "curve_smoother": opts["curve_smoother"],
        "passage_tokens": opts["passage_tokens"],
        "toy_train_tokens": opts["toy_train_tokens"],
        "toy_eval_tokens": opts["toy_eval_tokens"],
        "seed": opts["seed"],
        "threads": opts["threads"],
        "seq2seq_minutes": opts["seq2seq_minutes"],
        "beams": _parse_beams(opts["beams"]),
        "ladder": opts["ladder"],
        "prune_curve": opts["prune_curve"],
        "fusion": opts["fusion"],
        "fusion_lm": None if opts["lm_path"] is None else str(Path(opts["lm_path"]).resolve()),
        "fusion_weight": opts["lm_weight"],
    }
    if opts["neural"] is not None and opts["neural"].strip().lower() != "none" and not values["neural"]:
        raise InputError("--neural is empty", fix=f"pass e.g. --neural {','.join(DEFAULT_NEURAL)}, or --neural none")
    # An epoch budget replaces the default time budget; an explicit time budget is kept (and then refused).
    if values["neural_epochs"] is not None and not _given(ctx, "neural_minutes"):
        values["neural_minutes"] = None
    if quick:
        base = quick_settings().to_dict()
        for opt, field in _SETTING_OPTIONS.items():
            if not _given(ctx, opt) and field in base:
                if field.startswith("toy_") and values["corpus"] != "toy":
                    continue  # the quick toy splits do not apply to another corpus
                values[field] = tuple(base[field]) if isinstance(base[field], list) else base[field]
        if not _given(ctx, "threads"):
            values["threads"] = base["threads"]
        if _given(ctx, "neural_minutes") and not _given(ctx, "neural_epochs"):
            values["neural_epochs"] = None
    return CompareSettings(**values).validate()


@click.command("compare")
@click.argument("corpus", required=False)
@click.option("-o", "--output", "--out", "out", type=click.Path(file_okay=False), default=None,
              help="Folder for results.json, the report and the model cache [default: compare-out/CORPUS].")
@click.option("--valid", "valid_file", type=click.Path(exists=True, dir_okay=False), default=None,
              help="Validation text for a CORPUS that is a file (then all of that file trains) "
                   "[default: the file's last 5% of lines are held out].")
@click.option("--test", "test_file", type=click.Path(exists=True, dir_okay=False), default=None,
              help="Test text for a CORPUS that is a file [default: its last 5% of lines are held out].")
@click.option("--tokenizer", type=TOKENIZER, default=None,
              help="Tokenize the corpus this way instead of its own (e.g. char); every model shares it.")
@click.option("--tokenizers", default=None, metavar="LIST",
              help="Also compare these tokenizations of the text in bits per byte (the curve smoother at every "
                   "order; the V^n wall of each), e.g. word,bpe:8000,char (word: the corpus's own).")
@click.option("--neural-tokenizers", default=None, metavar="LIST",
              help="The tokenizations of --tokenizers the --neural models are also trained on [default: all of "
                   "them; 'none': n-grams only]: e.g. word,bpe:8000 leaves out a character model that one "
                   "budget cannot train for an epoch.")
@click.option("--max-order", type=int, default=5, show_default=True, help="N-gram orders 1..N.")
@click.option("--smoothers", default=",".join(DEFAULT_SMOOTHERS), show_default=True,
              help=f"Comma-separated smoothers ({', '.join(SMOOTHERS)}).")
@click.option("--neural", default=",".join(DEFAULT_NEURAL), show_default=True,
              help="Comma-separated neural models (lstm, gru, rnn_tanh, rnn_relu, transformer), or 'none'.")
@click.option("--neural-minutes", type=float, default=1.5, show_default=True,
              help="Wall-clock training budget per neural model, in minutes.")
@click.option("--neural-epochs", type=int, default=None, help="Train each neural model this many epochs instead.")
@click.option("--neural-size", type=click.Choice(NEURAL_SIZES), default="small", show_default=True,
              help="tiny / small presets, or the `neural train` defaults.")
@click.option("--checkpoint", "checkpoints", multiple=True, type=click.Path(dir_okay=False),
              help="A neural model trained elsewhere (`ngramlm neural train`, benchmarks/bench_neural.py) to score "
                   "instead of training that model here; its vocabulary must be this corpus's. Repeatable.")
@click.option("--curve", default="1%,3%,10%,30%,100%", show_default=True,
              help="Learning-curve training-set sizes (fractions or percentages of the training text); "
                   "'none': no learning curves.")
@click.option("--curve-minutes", type=float, default=None,
              help="Neural budget per learning-curve point [default: a quarter of --neural-minutes].")
@click.option("--curve-smoother", default="mkn", show_default=True, help="Smoother of the learning curves' 3- and 5-gram.")
@click.option("--passage-tokens", type=int, default=40, show_default=True,
              help="Longest test passage of the per-token and attention views.")
@click.option("--seq2seq-minutes", type=float, default=None,
              help="Parallel corpora (fra-eng): training minutes per translator [default: the neural budget].")
@click.option("--beams", default="1,2,3,4,5", show_default=True,
              help="Parallel corpora: beam sizes of the BLEU table, each with and without length normalisation.")
@click.option("--lm", "lm_path", type=click.Path(dir_okay=False, exists=True), default=None, metavar="MODEL",
              help="Parallel corpora: the target-side n-gram model fused in the BLEU grid (ARPA, .npz, KenLM binary) "
                   "[default: the run's n-gram of the best validation ppl].")
@click.option("--lm-weight", type=click.FloatRange(min=0), default=None, metavar="W",
              help="Parallel corpora: the fusion weight [default: tuned by greedy BLEU on valid among 0-0.5].")
@click.option("--fusion/--no-fusion", default=True, show_default=True,
              help="Parallel corpora: BLEU rows with shallow fusion of the target-side n-gram of the best validation "
                   "ppl (its weight tuned by greedy BLEU on valid).")
@click.option("--ladder", is_flag=True,
              help="Add the ladder for each neural model: + neural cache, + dynamic evaluation, + n-gram (global and "
                   "per-context weights), + the infini-gram, on the same test tokens (minutes per model on PTB).")
@click.option("--prune-curve/--no-prune-curve", default=True, show_default=True,
              help="Perplexity against size: the best back-off n-gram model entropy-pruned to 50, 10 and 1 % of its "
                   "n-grams, with the size of its KenLM trie binary (seconds on PTB).")
@click.option("--toy-train-tokens", type=int, default=None, help="Toy corpus: training tokens [default: 200,000].")
@click.option("--toy-eval-tokens", type=int, default=None, help="Toy corpus: validation and test tokens [default: 20,000].")
@click.option("--quick", is_flag=True,
              help="A run of seconds: small toy splits, orders 1-3, four smoothers, tiny neural models, 1 epoch "
                   "(options given explicitly still apply).")
@click.option("--force", is_flag=True, help="Re-run into an existing folder; unchanged models come from its cache.")
@click.option("--resume", is_flag=True, help="Continue the interrupted run in --out with its recorded settings.")
@data_dir_option
@seed_option(help="Seed of the neural models.")
@threads_option(default=1, help="torch.set_num_threads.  The compared models are small: one thread is about as fast, "
                                "and does not collapse when other jobs share the cores (two busy-waiting threads do).")
@click.option("--verbose", is_flag=True, help="Also print the neural models' per-epoch log.")
@json_option
@click.pass_context
def compare_cmd(ctx, corpus, out, valid_file, test_file, tokenizer, tokenizers, neural_tokenizers, max_order, smoothers, neural, neural_minutes, neural_epochs, neural_size, checkpoints, curve,
                curve_minutes, curve_smoother, passage_tokens, seq2seq_minutes, beams, lm_path, lm_weight, fusion, ladder, prune_curve, toy_train_tokens, toy_eval_tokens, quick, force, resume,
                data_dir, seed, threads, verbose, as_json):
    """Train n-gram models (orders 1..N x smoothers) and neural models on one tokenization of CORPUS
    [default: toy], cache every result, and write results.json, report.md and report.html."""
    from ..compare import Run, prepare_out_dir, start_run
    from ..render.report import render

    t0 = time.perf_counter()
    opts = dict(ctx.params)
    if out is None:
        out = str(Path("compare-out") / Path(corpus or "toy").stem)
    if out == "-":
        raise InputError("'-' (standard output) cannot be a report folder", fix="give a folder with --out")
    out_path = Path(out)
    from corpora.textio import check_writable, folder_lock

    # An unwritable place fails here, naming the results file, before the lock beside the folder.
    check_writable(out_path / "results.json", what="results file", create_parents=False)

    # Held until the run ends: a second run into the same folder is refused instead of racing
    # past the "non-empty folder" check and mixing its files with this one's.
    with folder_lock(out_path, what="`ngramlm compare`"):
        if resume:
            settings = prepare_out_dir(out_path, force=force, resume=True)
            given = [o for o in _SETTING_OPTIONS if _given(ctx, o)]
            if given or quick:
                requested = _settings_from_options(ctx, opts, quick).to_dict()
                stored = settings.to_dict()
                fields = {_SETTING_OPTIONS[o] for o in given} | (set(quick_settings().to_dict()) if quick else set())
                changed = sorted(f for f in fields if f != "threads" and requested[f] != stored[f])
                if changed:
                    raise InputError(f"--resume continues the recorded run with its own settings; this would change "
                                     f"{', '.join(changed)}", path=out_path,
                                     fix="drop those options, or use --force to re-run with new settings")
            if _given(ctx, "threads"):
                settings.threads = threads
        else:
            settings = _settings_from_options(ctx, opts, quick)
            prepare_out_dir(out_path, force=force, resume=False)
        from ..experiments.parallel_compare import is_parallel

        if is_parallel(settings.corpus):
            _compare_parallel(settings, out_path, data_dir, verbose, as_json, t0)
            return
        # Load the corpus before creating the folder: an unknown name must not leave an empty run behind.
        from ..experiments.data import load_data

        data = load_data(settings, data_dir)
        if data.split_policy in ("holdout", "files"):
            _echo_err(data.split_note)  # a user's file: which lines train, which are held out
        adopted = None
        if settings.checkpoints:  # a wrong checkpoint is refused before anything is written
            from ..compare import inspect_checkpoints

            adopted = inspect_checkpoints(settings, data)
        if settings.neural or adopted:  # say now, not afterwards, when a budget cannot pay for the scoring
            from ..experiments.neural_part import budget_notes

            for note in budget_notes(settings, data, tuple(info["model"] for info in adopted or ())):
                _echo_err(note)
        start_run(out_path, settings)
        run = Run(settings, out_path, data=data, log=_echo_err, verbose=verbose, adopted=adopted)
        run.started = t0  # the run's total includes reading the corpus above, and rendering below
        try:
            results = run.execute()
        except KeyboardInterrupt:
            _echo_err(f"interrupted; what finished is cached. Continue with: ngramlm compare --out {out} --resume")
            raise SystemExit(130)
        try:
            paths = render(out_path, results, started=t0)
            write_results(out_path, results)  # its timing now counts the report's rendering too
        except KeyboardInterrupt:  # the run is complete and results.json written: only the report is missing
            _echo_err(f"interrupted while writing the report; {out_path / 'results.json'} is complete. "
                      f"Write the report with: ngramlm report {out}")
            raise SystemExit(130)
        click.echo(json.dumps(summary_json(results), indent=2) if as_json else summary_table(results))
        _echo_err(f"wrote {out_path / 'results.json'}, {paths['md']}, {paths['html']} "
                  f"in {time.perf_counter() - t0:.1f} s")


def _compare_parallel(settings, out_path: Path, data_dir, verbose: bool, as_json: bool, t0: float) -> None:
    """``compare`` on a parallel corpus: target-side LMs against translators (reports.experiments.parallel_compare)."""
    from corpora.parallel import load_parallel

    from ..compare import start_run
    from ..experiments.parallel_compare import SPLIT_SEED, ParallelRun
    from ..render.parallel import render_parallel, summary_table as parallel_table

    if settings.tokenizer is not None or settings.checkpoints:
        raise InputError("--tokenizer and --checkpoint do not apply to a parallel corpus",
                         fix="drop them; the corpus's tokenizer and vocabularies are used")
    load_parallel(settings.corpus, data_dir=data_dir, seed=SPLIT_SEED)  # a missing corpus fails before the folder
    start_run(out_path, settings)
    try:
        prun = ParallelRun(settings, out_path, data_dir=data_dir, log=_echo_err, verbose=verbose)
        prun.started = t0
        results = prun.execute()
    except KeyboardInterrupt:
        _echo_err(f"interrupted; what finished is cached. Continue with: ngramlm compare --out {out_path} --resume")
        raise SystemExit(130)
    paths = render_parallel(out_path, results, started=t0)
    write_results(out_path, results)  # its timing now counts the report's rendering too
    if as_json:
        click.echo(json.dumps({"corpus": results["corpus"], "rows": [
            {k: r.get(k) for k in ("id", "label", "side", "valid", "test")} for r in results["rows"]],
            "bleu": results["bleu"]}, indent=2, default=float))
    else:
        click.echo(parallel_table(results))
    _echo_err(f"wrote {out_path / 'results.json'}, {paths['md']}, {paths['html']} "
              f"in {time.perf_counter() - t0:.1f} s")


@click.command("report")
@click.argument("directory", type=click.Path(file_okay=False))
def report_cmd(directory):
    """Re-render report.md and report.html in DIRECTORY from its results.json."""
    from ..compare import read_results
    from ..render.report import render

    results = read_results(Path(directory))
    if results.get("format") == "ngramlm.compare.parallel":
        from ..render.parallel import render_parallel

        paths = render_parallel(Path(directory), results)
    else:
        paths = render(Path(directory), results)
    click.echo(f"wrote {paths['md']} and {paths['html']} ({len(paths['plots'])} figures)")


def summary_json(results: dict) -> dict:
    """The summary table's numbers for machines (results.json has everything)."""
    rows = []
    for family in ("ngram", "neural", "interpolation"):
        for r in results.get(family, []):
            rows.append({"id": r["id"], "family": family, "label": r.get("label"),
                         "valid_ppl": (r.get("valid") or {}).get("ppl"), "test_ppl": (r.get("test") or {}).get("ppl"),
                         "test_bits_per_token": (r.get("test") or {}).get("bits_per_token"),
                         "budget_seconds": r.get("budget_seconds"), "wall_seconds": r.get("wall_seconds")})
    return {"status": results.get("status"), "corpus": (results.get("corpus") or {}).get("name"), "rows": rows}


def summary_table(results: dict) -> str:
    """Plain-text table of every model's perplexities (and the floor, on the toy corpus)."""
    truth = ((results.get("corpus") or {}).get("truth") or {}).get("test")
    lines = []
    head = f"{'model':<28} {'valid ppl':>10} {'test ppl':>10} {'bits/tok':>9}"
    if truth:
        head += f" {'above floor':>12}"
    lines.append(head)
    if truth:
        lines.append(f"{'true language (floor)':<28} {'':>10} {truth['perplexity']:>10.2f} {truth['bits_per_token']:>9.3f}")
    for family in ("ngram", "neural", "interpolation"):
        for r in results.get(family, []):
            def ppl(split):
                sc = r.get(split)
                if not sc:
                    return "n/a"
                return "inf" if sc["ppl"] is None else f"{sc['ppl']:.2f}"

            t = r.get("test") or {}
            bits = "" if t.get("bits_per_token") is None else f"{t['bits_per_token']:.3f}"
            line = f"{r['id']:<28} {ppl('valid'):>10} {ppl('test'):>10} {bits:>9}"
            if truth and r.get("above_floor"):
                line += f" {r['above_floor']['extra_bits_per_token']:>+11.3f}b"
            lines.append(line)
    return "\n".join(lines)
