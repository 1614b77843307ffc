"""The ``ngramlm`` command line.

Sub-commands live next to the code they drive (``corpora/commands.py``,
``ngramlm/commands.py``, ``neural/commands.py``, ``reports/commands.py``) and are
imported only when invoked, so ``ngramlm ppl`` on an n-gram model never imports torch.
"""
from __future__ import annotations

import importlib
import sys

import click

# command name -> "module:attribute"
_COMMANDS = {
    "corpora": ("corpora.commands:corpora_group", "List, inspect and download named corpora."),
    "vocab": ("corpora.commands:vocab_group", "Build a vocabulary and report its statistics."),
    "tokenize": ("corpora.commands:tokenize_cmd", "Tokenize text from stdin (or files) to stdout."),
    "stats": ("corpora.commands:stats_cmd", "Corpus, vocabulary and n-gram sparsity statistics."),
    "train": ("ngramlm.commands:train_cmd", "Train an n-gram model (or, with --model, a neural one)."),
    "ppl": ("ngramlm.commands:ppl_cmd", "Perplexity summary of a model on a text."),
    "score": ("ngramlm.commands:score_cmd", "Per-sentence or per-token scores of a text."),
    "generate": ("ngramlm.commands:generate_cmd", "Generate text from a model."),
    "export-arpa": ("ngramlm.commands:export_arpa_cmd", "Write a model as an ARPA file."),
    "import-arpa": ("ngramlm.commands:import_arpa_cmd", "Read an ARPA file into the native format."),
    "infini": ("ngramlm.infini_commands:infini_group", "The ∞-gram: unbounded-order n-grams on a suffix array."),
    "neural": ("neural.commands:neural_group", "Neural language models (RNN, LSTM, GRU, Transformer)."),
    "seq2seq": ("neural.seq2seq_commands:seq2seq_group", "Encoder-decoder translation with attention and beam search."),
    "compare": ("reports.commands:compare_cmd", "Train count and neural models on one corpus and report."),
    "report": ("reports.commands:report_cmd", "Re-render a comparison report from results.json."),
}


class LazyGroup(click.Group):
    """A click group whose sub-commands are imported on first use."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(_COMMANDS)

    def get_command(self, ctx: click.Context, name: str):
        entry = _COMMANDS.get(name)
        if entry is None:
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
        return getattr(module, attr)

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        # Short help without importing every module (keeps `--help` fast and torch-free).
        rows = [(name, _COMMANDS[name][1]) for name in self.list_commands(ctx)]
        with formatter.section("Commands"):
            formatter.write_dl(rows)


@click.group(cls=LazyGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="ngramlm")
def cli() -> None:
    """Count-based n-gram and neural language models, compared on the same tokenized corpora."""


def _terminate(signum, frame):  # SIGTERM: unwind like Ctrl-C, so temp files are removed and we exit 130
    raise KeyboardInterrupt


def main(argv: list[str] | None = None) -> None:
    import signal
    import threading

    previous = None
    if threading.current_thread() is threading.main_thread():
        previous = signal.signal(signal.SIGTERM, _terminate)
    try:
        _main(argv)
    finally:
        if previous is not None:
            signal.signal(signal.SIGTERM, previous)


def _main(argv: list[str] | None) -> None:
    from corpora.errors import ToolkitError

    try:
        cli.main(args=argv, prog_name="ngramlm", standalone_mode=False)
    except click.exceptions.Abort:
        click.echo("Aborted.", err=True)
        sys.exit(130)
    except click.ClickException as exc:
        exc.show()
        sys.exit(exc.exit_code)
    except ToolkitError as exc:
        click.echo(f"Error: {exc}", err=True)
        sys.exit(2)
    except KeyboardInterrupt:
        click.echo("Interrupted.", err=True)
        sys.exit(130)
    except BrokenPipeError:
        sys.exit(0)
    except OSError as exc:
        # A safety net: an I/O failure no command turned into a located error still gets one
        # line with the path and a fix, never a traceback.
        where = f"{exc.filename}: " if exc.filename else ""
        click.echo(f"Error: {where}{exc.strerror or exc} (fix: check the path, its permissions and the free "
                   "disk space)", err=True)
        sys.exit(1)


if __name__ == "__main__":
    main()
