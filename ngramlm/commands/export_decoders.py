"""``ngramlm export-fst`` and ``ngramlm export-nemo``: a model in the forms speech decoders load.

``export-fst`` writes the grammar FST ``G`` in OpenFst's text form, as Kaldi's ``arpa2fst`` (and k2's
``kaldilm``) build it (:mod:`ngramlm.tools.export_fst`); ``export-nemo`` writes a subword model as
NeMo's token-level ARPA, each piece the character of its acoustic-model id plus 100
(:mod:`ngramlm.tools.export_nemo`).  Both read any model the toolkit reads whose n-grams can be
listed, check every input before writing, and write atomically.
"""
from __future__ import annotations

import time

import click

from corpora.errors import InputError
from corpora.textio import atomic_writer, check_writable

from .common import load_model


@click.command("export-fst")
@click.argument("model_path", metavar="MODEL")
@click.argument("output", type=click.Path(dir_okay=False))
@click.option("--disambig-symbol", default="#0", show_default=True,
              help="The back-off arcs' input symbol ('' for <eps>, with <s> and </s> kept as labels: arpa2fst "
                   "without --disambig-symbol).")
@click.option("--read-symbol-table", "read_symbols", type=click.Path(dir_okay=False, exists=True), default=None,
              help="Use this symbol table (Kaldi's data/lang/words.txt); n-grams with a word it lacks are skipped.")
@click.option("--write-symbol-table", "write_symbols", type=click.Path(dir_okay=False), default=None,
              help="Write the symbol table made (or read) here, as words.txt.")
def export_fst_cmd(model_path, output, disambig_symbol, read_symbols, write_symbols):
    """Write MODEL as the grammar FST G (OpenFst text, as `arpa2fst --disambig-symbol=#0` writes it);
    compile it with `fstcompile --isymbols=words.txt --osymbols=words.txt G.txt G.fst`."""
    from ngramlm.tools.export_fst import grammar_fst, read_symbol_table

    t0 = time.perf_counter()
    symbols = read_symbol_table(read_symbols) if read_symbols else None
    check_writable(output, what="FST text file")
    if write_symbols:
        check_writable(write_symbols, what="symbol table")
    lm = load_model(model_path, ngrams=True)
    g = grammar_fst(lm.tables_, disambig=disambig_symbol or None, symbols=symbols)
    with atomic_writer(output) as fh:
        fh.write(g.text.encode("utf-8"))
    if write_symbols:
        with atomic_writer(write_symbols) as fh:
            fh.write(g.symbols_text().encode("utf-8"))
    note = f", {g.skipped} n-grams skipped (a word not in {read_symbols})" if g.skipped else ""
    click.echo(f"wrote {output}: {g.n_states} states, {g.n_arcs} arcs{note} "
               f"({time.perf_counter() - t0:.2f} s)", err=True)


@click.command("export-nemo")
@click.argument("model_path", metavar="MODEL")
@click.argument("output", type=click.Path(dir_okay=False))
@click.option("--tokens", "tokens_path", type=click.Path(dir_okay=False, exists=True), required=True,
              help="The acoustic model's token list, one piece a line in id order (its tokenizer's vocabulary; "
                   "a SentencePiece .vocab file works: the first column is read).")
@click.option("--offset", type=int, default=100, show_default=True, help="NeMo's token offset (TOKEN_OFFSET).")
def export_nemo_cmd(model_path, output, tokens_path, offset):
    """Write MODEL (an n-gram model over subword pieces) as NeMo's token-level ARPA: each piece as the
    character chr(its id in --tokens + OFFSET), what NeMo's train_kenlm.py writes."""
    from ngramlm.io.arpa import write_arpa
    from ngramlm.scorer import Scorer
    from ngramlm.tools.export_nemo import nemo_tables, read_token_list

    if offset < 0:
        raise InputError(f"--offset must be >= 0, got {offset}", fix="use NeMo's default, 100")
    tokens = read_token_list(tokens_path)
    check_writable(output, what="ARPA file")
    lm = load_model(model_path, ngrams=True)
    tables = nemo_tables(lm.tables_, tokens, offset=offset)
    write_arpa(Scorer(tables), output)
    click.echo(f"wrote {output}: {lm.order_}-gram over {lm.vocab_.n_types} pieces as characters "
               f"(id + {offset}) of {tokens_path}'s {len(tokens)} tokens", err=True)
