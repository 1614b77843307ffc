"""The ``ngramlm`` command line.

Sub-commands live next to the code they drive (``corpora/commands.py``,
``ngramlm/commands/lm.py``, ``neural/commands/lm.py``, ``reports/commands/compare.py``) and are
imported only when invoked, so ``ngramlm ppl`` on an n-gram model never imports torch.
"""
from __future__ import annotations

import importlib
import re
import sys

import click

# command name -> "module:attribute"
_COMMANDS = {
    "corpora": ("corpora.commands:corpora_group", "List, inspect and download named corpora."),
    "vocab": ("corpora.commands:vocab_group", "Build a vocabulary and report its statistics."),
    "tokenize": ("corpora.commands:tokenize_cmd", "Tokenize text from stdin (or files) to stdout."),
    "stats": ("ngramlm.commands.stats:stats_cmd", "Corpus, vocabulary and n-gram sparsity statistics."),
    "train": ("ngramlm.commands.train:train_cmd", "Train an n-gram model (neural models: `ngramlm neural train`)."),
    "ppl": ("ngramlm.commands.lm:ppl_cmd", "Perplexity summary of a model on a text."),
    "score": ("ngramlm.commands.lm:score_cmd", "Per-sentence or per-token scores of a text."),
    "generate": ("ngramlm.commands.lm:generate_cmd", "Generate text from a model."),
    "export-arpa": ("ngramlm.commands.lm:export_arpa_cmd", "Write a model as an ARPA file."),
    "import-arpa": ("ngramlm.commands.lm:import_arpa_cmd", "Read an ARPA file into the native format."),
    "export-fst": ("ngramlm.commands.export_decoders:export_fst_cmd",
                   "Write a model as Kaldi's grammar FST G (OpenFst text, as arpa2fst)."),
    "export-nemo": ("ngramlm.commands.export_decoders:export_nemo_cmd",
                    "Write a subword model as NeMo's token-level ARPA (chr(id + 100))."),
    "build-binary": ("ngramlm.commands.binary:build_binary_cmd",
                     "Write a model as a KenLM binary file (probing or trie; -q -b -a as build_binary)."),
    "mix": ("ngramlm.commands.mix:mix_cmd", "Mix back-off models into one (static mixture, tuned by EM)."),
    "prune": ("ngramlm.commands.prune:prune_cmd", "Entropy-prune a model to a size, a file size or a threshold."),
    "filter": ("ngramlm.commands.filter:filter_cmd", "Limit a model to a lexicon (word list); other words become <unk>."),
    "infini": ("ngramlm.commands.infini:infini_group", "The ∞-gram: unbounded-order n-grams on a suffix array."),
    "neural": ("neural.commands.lm:neural_group", "Neural language models (RNN, LSTM, GRU, Transformer)."),
    "seq2seq": ("neural.commands.seq2seq:seq2seq_group", "Encoder-decoder translation with attention and beam search."),
    "bert": ("reports.commands.bert:bert_group", "BERT: masked-LM pretraining, pseudo-perplexity, embeddings."),
    "ladder": ("reports.commands.ladder:ladder_cmd", "A neural model + cache, dynamic evaluation, n-gram and ∞-gram, rung by rung."),
    "figures": ("reports.commands.figures:figures_cmd", "The textbook's GRU, LSTM and Transformer figures, drawn from the modules."),
    "compare": ("reports.commands.compare:compare_cmd", "Train count and neural models on one corpus and report."),
    "report": ("reports.commands.compare:report_cmd", "Re-render a comparison report from results.json."),
    "lab": ("labs.commands:lab_cmd", "The textbook's experiments as small labs with reports (no NAME: list them)."),
}


class LazyGroup(click.Group):
    """A click group whose sub-commands are imported on first use."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(set(_COMMANDS) | set(self.commands))

    def get_command(self, ctx: click.Context, name: str):
        if name in self.commands:  # defined here (info)
            return self.commands[name]
        entry = _COMMANDS.get(name)
        if entry is None:
            import difflib

            close = difflib.get_close_matches(name, self.list_commands(ctx), n=1)
            if close:  # click's own "No such command" then follows with this hint
                ctx.fail(f"No such command '{name}'. Did you mean '{close[0]}'?")
            return None
        module_name, attr = entry[0].split(":")
        try:
            module = importlib.import_module(module_name)
        except ModuleNotFoundError as exc:
            if exc.name == "torch":
                raise click.ClickException(
                    f"`ngramlm {name}` needs PyTorch: pip install torch==2.13.0 (the CPU build; see README)"
                ) from None
            raise
        return _guarded(getattr(module, attr))

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        # Short help without importing every module (keeps `--help` fast and torch-free).
        rows = [(name, _COMMANDS[name][1] if name in _COMMANDS else self.commands[name].get_short_help_str())
                for name in self.list_commands(ctx)]
        with formatter.section("Commands"):
            formatter.write_dl(rows)


# SRILM and KenLM spell long flags with one dash (``-order 5``, ``-write-lm``).  click would read
# ``-order5`` as ``-o rder5`` and write a model file named ``rder5``; such a word is refused instead,
# with the spelling this toolkit uses.  Words that are not options of the command pass untouched.
_SINGLE_DASH = re.compile(r"^-([A-Za-z][A-Za-z_-]+)(=?)(.*)$")
_SRILM = {  # SRILM/KenLM flags whose name differs here -> what to write instead
    "lm": "the model file as the MODEL argument", "write-lm": "-o/--out FILE",
    "text": "give the text file as the TEXT argument", "ppl": "`ngramlm ppl MODEL TEXT`",
    "kndiscount": "--smoothing mkn", "interpolate": "--smoothing mkn (interpolated by default)",
    "unk": "nothing: <unk> is always modelled", "limit-vocab": "--limit-vocab FILE (train), or ngramlm filter VOCAB MODEL -o OUT", "vocab": "--vocab FILE",
    "prune": "--prune-entropy THRESHOLD", "arpa": "-o FILE.arpa",
}


def _check_single_dash(cmd: click.Command, args: list) -> None:
    options = {o[2:]: p for p in cmd.params for o in list(p.opts) + list(p.secondary_opts) if o.startswith("--")}
    for i, arg in enumerate(args):
        if arg == "--":
            return
        m = _SINGLE_DASH.match(arg)
        if not m:
            continue
        name, value = m.group(1), m.group(3)
        if name not in options:  # -order5 matches as name "order", value "5"
            if name in _SRILM:
                raise click.UsageError(f"'{arg}' is SRILM/KenLM's spelling; here write {_SRILM[name]}")
            continue
        takes_value = not getattr(options[name], "is_flag", False)
        if takes_value and not value and i + 1 < len(args) and not args[i + 1].startswith("-"):
            value = args[i + 1]  # -order 5
        hint = f"--{name} {value}" if takes_value and value else f"--{name}"
        shorts = {o for p in cmd.params for o in p.opts if len(o) == 2}
        reading = f", so it would read as -{arg[1]} {arg[2:]!r}" if f"-{arg[1]}" in shorts else ""
        raise click.UsageError(f"'{arg}' has one dash{reading}; did you mean {hint}? (long options take two dashes)")


def _guarded(cmd):
    """Wrap ``cmd`` (and a group's sub-commands) so single-dash long flags are refused first."""
    if getattr(cmd, "_ngramlm_guarded", False):
        return cmd
    parse = cmd.parse_args

    def parse_args(ctx, args):
        if not isinstance(cmd, click.Group):  # a group's words belong to its sub-command, checked there
            _check_single_dash(cmd, args)
        return parse(ctx, args)

    cmd.parse_args = parse_args
    cmd._ngramlm_guarded = True
    if isinstance(cmd, click.Group):
        for sub in cmd.commands.values():
            _guarded(sub)
    return cmd


def _version_line() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        v = version("ngramlm")
    except PackageNotFoundError:  # run from a source tree that was never installed
        v = "unknown (not installed)"
    from ngramlm import accel  # light: no numpy until a model is used

    return f"ngramlm {v}\nquery side: {accel.describe()}"


def _print_version(ctx: click.Context, param, value) -> None:
    if value and not ctx.resilient_parsing:
        click.echo(_version_line())
        ctx.exit()


@click.group(cls=LazyGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.option("--version", is_flag=True, expose_value=False, is_eager=True, callback=_print_version,
              help="Show the version and whether the compiled extension is in use, then exit.")
def cli() -> None:
    """Count-based n-gram and neural language models, compared on the same tokenized corpora."""


@cli.command("info")
def info_cmd() -> None:
    """Version, Python, the optional parts installed, and which implementation runs."""
    import importlib.util
    import platform

    click.echo(_version_line())
    click.echo(f"python {platform.python_version()} ({platform.system()} {platform.machine()})")
    for mod, extra in (("numpy", "core"), ("scipy", "core"), ("torch", "neural"), ("sacrebleu", "neural"),
                       ("matplotlib", "report"), ("jinja2", "report"), ("dask", "dask"), ("pydivsufsort", "infini")):
        found = importlib.util.find_spec(mod) is not None
        ver = ""
        if found:
            from importlib.metadata import PackageNotFoundError, version

            try:
                ver = version(mod)
            except PackageNotFoundError:
                ver = "?"
        click.echo(f"{mod:<11} {ver if found else f'not installed (pip install ngramlm[{extra}])'}")
    from corpora.datadir import describe_source

    click.echo(f"data dir    {describe_source(None)}")


_EXTRAS = {"torch": "neural", "sacrebleu": "neural", "matplotlib": "report", "jinja2": "report",
           "dask": "dask", "distributed": "dask"}  # module -> the pip extra that installs it


# SIGINT and SIGTERM while a command runs (see main): "fired" once the first one was raised,
# "program" when main() is the process's entry point (argv None), not an in-process call.
_signals = {"fired": False, "program": False}


def _on_signal(signum, frame):
    """The first SIGINT or SIGTERM unwinds the command like Ctrl-C (KeyboardInterrupt: it keeps what
    finished, says so in one line and exits 130).  Another one while it is stopping exits at once,
    status 130, without a traceback (in-process, it raises KeyboardInterrupt again)."""
    if _signals["fired"] and _signals["program"]:
        _exit_now(130, "interrupted again: exiting at once")
    _signals["fired"] = True
    raise KeyboardInterrupt


def _exit_now(code: int, message: str | None = None) -> None:
    """End the process with ``code`` after flushing the output, without the interpreter's teardown: once
    torch is loaded its garbage collection alone took 1-3 s after an interrupted `compare` (measured
    on a 2-core machine), which is not a prompt stop.

    From main (no ``message``) the command has already unwound: its temporary folders, Dask clusters
    and partial outputs were removed by its own ``with`` and ``finally`` blocks (the toolkit registers
    no exit functions).  What a normal exit would still do that matters is done here with public
    calls: the log handlers are flushed and closed, and the worker processes that ``multiprocessing``
    started (a DataLoader's workers, say) are stopped as its own exit stops them -- daemonic ones
    terminated, every one joined -- so none outlives the program.  From a signal handler (a
    second signal, with a ``message``) only the output is flushed: the user asked to stop at once."""
    import os

    if message:
        try:
            os.write(2, (message + "\n").encode("utf-8", "replace"))
        except OSError:
            pass
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except Exception:  # a closed pipe, or a write the signal interrupted
            pass
    if message is None:  # not from inside a signal handler: the normal exit's cleanups still run
        try:
            _stop_children_and_logs()
        except BaseException:  # a cleanup that fails must not turn the stop into a traceback
            pass
    os._exit(code)


def _stop_children_and_logs() -> None:
    """What the exit functions of ``logging`` and ``multiprocessing`` do at a normal exit, for the
    modules this process loaded (neither is imported just for this)."""
    logging = sys.modules.get("logging")
    if logging is not None:
        logging.shutdown()
    mp = sys.modules.get("multiprocessing")
    if mp is not None:
        children = mp.active_children()
        for p in children:
            if p.daemon:
                p.terminate()
        for p in children:
            p.join()


def main(argv: list[str] | None = None) -> None:
    import signal
    import threading

    if argv is None:  # run as the program: its commands may set the process's allocator where it pays
        from ngramlm.commands import allocator

        allocator.allow()
    previous = {}
    if threading.current_thread() is threading.main_thread():
        _signals.update(fired=False, program=argv is None)
        for sig in (signal.SIGINT, signal.SIGTERM):
            previous[sig] = signal.signal(sig, _on_signal)
    try:
        try:
            _main(argv)
        except KeyboardInterrupt:  # raised while the command's own handling of an interrupt ran
            _signals["fired"] = True  # first, before any call: a signal from here on exits at once
            raise SystemExit(130) from None
    except SystemExit as exc:
        _signals["fired"] = True
        if exc.code == 130 and _signals["program"] and previous:  # interrupted: stop now, not after the teardown
            _exit_now(130)
        raise
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def _register_model_kinds() -> None:
    """Let the n-gram commands that take either family (``ppl``, ``generate``, ``infini ppl --mix``)
    recognise neural checkpoints: this layer may import both families, ``ngramlm`` never imports
    ``neural`` (see corpora.modelkinds).  Torch-free: a checkpoint's operations import torch."""
    import fusion.target
    import neural.kind

    neural.kind.register()
    fusion.target.register()  # seq2seq's search opens a target-side n-gram model through it (torch-free here)
    from corpora.modelkinds import register_residual

    # neural train --ngram-residual, and the checkpoints it writes: fusion.residual imported when first met.
    register_residual(lambda: importlib.import_module("fusion.residual"))


def _main(argv: list[str] | None) -> None:
    from corpora.errors import ToolkitError
    from corpora.textio import OutputError

    _register_model_kinds()
    try:
        cli.main(args=argv, prog_name="ngramlm", standalone_mode=False)
    except click.exceptions.Abort:
        click.echo("Aborted.", err=True)
        sys.exit(130)
    except click.ClickException as exc:
        exc.show()
        sys.exit(exc.exit_code)
    except OutputError as exc:  # an output that cannot be written: an I/O failure, status 1
        click.echo(f"Error: {exc}", err=True)
        sys.exit(1)
    except ToolkitError as exc:  # bad input (a file, a line, an option): status 2
        click.echo(f"Error: {exc}", err=True)
        sys.exit(2)
    except KeyboardInterrupt:
        click.echo("Interrupted.", err=True)
        sys.exit(130)
    except BrokenPipeError:
        sys.exit(0)
    except ModuleNotFoundError as exc:  # an optional part that this install lacks
        extra = _EXTRAS.get((exc.name or "").split(".")[0])
        if extra is None:
            raise
        click.echo(f"Error: this command needs {exc.name}, which is not installed (fix: pip install "
                   f"'ngramlm[{extra}]'{'; torch: pip install torch==2.13.0, the CPU build' if exc.name == 'torch' else ''})",
                   err=True)
        sys.exit(2)
    except OSError as exc:
        # A safety net: an I/O failure no command turned into a located error still gets one
        # line with the path and a fix, never a traceback.
        where = f"{exc.filename}: " if exc.filename else ""
        click.echo(f"Error: {where}{exc.strerror or exc} (fix: check the path, its permissions and the free "
                   "disk space)", err=True)
        sys.exit(1)


if __name__ == "__main__":
    main()
