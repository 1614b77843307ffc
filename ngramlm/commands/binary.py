"""``ngramlm build-binary``: KenLM binary files from ARPA, native or KenLM trie models.

The options are ``build_binary``'s that shape the file (``-q -b -a -p -v``), spelled the same, so a
recipe written for KenLM's tool runs with this one::

    ngramlm build-binary trie -q 8 -b 8 -a 22 lm.arpa lm.bin
    ngramlm build-binary lm.npz lm.probing.bin            # probing, the default type, as in KenLM
"""
from __future__ import annotations

import json
import os
import time

import click

from corpora.errors import InputError
from corpora.options import json_option
from corpora.textio import check_writable

from . import allocator


@click.command("build-binary", context_settings={"help_option_names": ["-h", "--help"]})
@click.argument("args", nargs=-1, required=True, metavar="[probing|trie] MODEL OUTPUT")
@click.option("-q", "prob_bits", type=click.IntRange(1, 25), default=None,
              help="Quantise probabilities to this many bits (trie only).")
@click.option("-b", "backoff_bits", type=click.IntRange(1, 25), default=None,
              help="Quantise back-off weights to this many bits (needs -q; default: -q's).")
@click.option("-a", "array_bits", type=click.IntRange(0, 255), default=None,
              help="Compress trie pointers with an offset array of at most this many bits (KenLM's default 22 "
                   "when asked; 255 minimises memory).")
@click.option("-p", "probing_multiplier", type=float, default=1.5, show_default=True,
              help="Probing: hash table space multiplier (> 1.0).")
@click.option("-v", "no_vocab", is_flag=True,
              help="Leave out the vocabulary strings (KenLM's -v; such a file cannot be read back by word).")
@click.option("-s", "allow_missing_markers", is_flag=True,
              help="Allow a model without <s> or </s> (KenLM's -s): they are left out of the file, and KenLM "
                   "scores them as <unk>.  Without -s such a model is refused, as build_binary refuses it.")
@json_option
def build_binary_cmd(args, prob_bits, backoff_bits, array_bits, probing_multiplier, no_vocab, allow_missing_markers,
                     as_json):
    """Write MODEL (ARPA, native .npz, or a KenLM trie binary) as a KenLM binary OUTPUT of type
    probing (the default, as build_binary's) or trie.  KenLM's query, the kenlm module and
    `ngramlm ppl/score/Model` read it; a trie also converts back with `ngramlm export-arpa`.

    \b
    ngramlm build-binary trie -q 8 -b 8 -a 22 ptb5.arpa ptb5.trie.bin
    ngramlm build-binary probing ptb5.npz ptb5.probing.bin
    """
    from ..kenlm.write import BinaryOptions, write_binary
    from ..loading import load_any

    args = list(args)
    kind = "probing"
    if args and args[0] in ("probing", "trie"):
        kind = args.pop(0)
    if len(args) != 2:
        raise InputError(f"build-binary takes [probing|trie] MODEL OUTPUT; got {' '.join(args) or 'nothing'}",
                         fix="ngramlm build-binary trie lm.arpa lm.bin")
    model_path, output = args
    opts = BinaryOptions(kind=kind, prob_bits=prob_bits, backoff_bits=backoff_bits, array_bits=array_bits,
                         probing_multiplier=probing_multiplier, include_vocab=not no_vocab,
                         allow_missing_markers=allow_missing_markers)
    opts.check()
    check_writable(output, what="KenLM binary")
    # Big numpy temporaries made and dropped: kept freed memory cut this command's time by a fifth
    # (allocator's text); it promises no memory budget.
    allocator.keep_freed_memory()
    t0 = time.perf_counter()
    model = load_any(model_path, ngrams=True)
    t1 = time.perf_counter()
    write_binary(model, output, opts)
    t2 = time.perf_counter()
    result = {"model": str(model_path), "output": str(output), "type": kind, "model_type": opts.model_type,
              "order": model.order_, "ngrams": [int(c) for c in model.n_ngrams_],
              "bytes": os.path.getsize(output), "load_seconds": t1 - t0, "write_seconds": t2 - t1,
              "prob_bits": opts.prob_bits, "backoff_bits": opts.backoff_bits if opts.prob_bits is None or
              opts.backoff_bits is not None else opts.prob_bits, "array_bits": opts.array_bits}
    if as_json:
        click.echo(json.dumps(result, indent=2))
        return
    from ..kenlm.format import MODEL_NAMES

    click.echo(f"wrote {output}: KenLM {MODEL_NAMES[opts.model_type]}, {model.order_}-gram, "
               f"{result['bytes']:,} bytes (read {t1 - t0:.2f} s, wrote {t2 - t1:.2f} s)")
