"""``ngramlm infini build|count|ppl``: the ∞-gram on the command line (see ``ngramlm.infini.index``)."""
from __future__ import annotations

import json
import os
import sys
import time

import click
import numpy as np

from corpora.errors import InputError
from corpora.options import data_dir_option, json_option, tokenizer_options, tokenizer_spec
from corpora.textio import check_writable

from .common import load_sentences, other_kind


@click.group("infini")
def infini_group():
    """The ∞-gram: n-grams of unbounded order on a suffix array (Liu et al., 2024)."""


@infini_group.command("build")
@click.argument("texts", nargs=-1, required=True, metavar="TEXT...")
@click.option("-o", "--output", "--out", "output", required=True, type=click.Path(dir_okay=False),
              help="Index file to write (.npz; binary, so not '-').")
@click.option("--split", default="train", show_default=True, help="Split of a named corpus.")
@click.option("--vocab", "vocab_path", type=click.Path(dir_okay=False), default=None,
              help="Encode with this vocabulary file (else one is fitted on TEXT, as `train` does).")
@click.option("--min-count", type=int, default=1, show_default=True)
@click.option("--temp-dir", "-T", "temp_dir", type=click.Path(file_okay=False), default=None,
              help="With --stream: where the spilled token ids go.")
@click.option("--stream", is_flag=True,
              help="Files too big to hold as sentences: tokenize them once into a spilled id stream "
                   "(also chosen for several files).")
@data_dir_option
@json_option
@tokenizer_options
def build_cmd(texts, output, split, vocab_path, min_count, temp_dir, stream, data_dir, as_json, tokenizer, lower,
              normalize):
    """Index TEXT (a file, '-' or a corpus name; or several files) for ∞-gram queries."""
    from corpora.registry import REGISTRY
    from corpora.vocab import Vocab

    from ..infini.index import InfiniIndex

    check_writable(output, what="index file")
    t0 = time.perf_counter()
    spec = tokenizer_spec(tokenizer, lower, normalize)
    if stream or len(texts) > 1:
        from pathlib import Path

        for t in texts:
            if t != "-" and not Path(t).is_file():
                raise click.UsageError(f"{t!r} is not a file: --stream (and several TEXTs) reads files or '-'; "
                                       "build a named corpus without --stream")
        if vocab_path:
            raise click.UsageError("--vocab and --stream together are not supported: drop one")
        index = InfiniIndex.build_from_files(list(texts), tokenizer=spec, min_count=min_count, temp_dir=temp_dir,
                                             progress=lambda m: click.echo(f"    {m}", err=True))
        seconds = time.perf_counter() - t0
        index.save(output)
        _report_build(index, output, ", ".join(texts), seconds, t0, as_json)
        return
    text = texts[0]
    sents, used_spec, where = load_sentences(text, split=split, data_dir=data_dir, tokenizer_spec=spec)
    if vocab_path:
        vocab = Vocab.load(vocab_path)
    else:
        unk = REGISTRY[text].unk_token if text in REGISTRY else None
        vocab = Vocab(min_count=min_count, unk_token=unk or "<unk>", tokenizer=used_spec).fit(sents)
    enc = vocab.encode_sentences(sents)
    del sents
    if enc.n_words == 0:
        raise InputError("the text has no tokens", path=where, fix="pass a non-empty text")
    t1 = time.perf_counter()
    index = InfiniIndex.build(enc, vocab, source=where)
    seconds = time.perf_counter() - t1
    index.save(output)
    _report_build(index, output, where, seconds, t0, as_json)


def _report_build(index, output, where, seconds, t0, as_json) -> None:
    vocab = index.vocab
    info = {"index": output, "text": where, "tokens": int(len(index.tokens)), "types": vocab.n_types,
            "bytes_per_token": index.nbytes / max(1, len(index.tokens)), "build_seconds": seconds,
            "seconds": time.perf_counter() - t0}
    if as_json:
        click.echo(json.dumps(info, indent=2))
    else:
        click.echo(f"indexed {info['tokens']:,} tokens of {where} ({vocab.n_types:,} types) in {seconds:.2f} s, "
                   f"{info['bytes_per_token']:.1f} bytes a token -> {output}")


@infini_group.command("count")
@click.argument("index_path", metavar="INDEX")
@click.argument("ngram", nargs=-1)
@json_option
def count_cmd(index_path, ngram, as_json):
    """Occurrences of NGRAM (words) in the indexed text; without NGRAM, one n-gram a line from stdin."""
    from ..infini.index import InfiniIndex

    index = InfiniIndex.load(index_path)
    queries = [list(ngram)] if ngram else [line.split() for line in sys.stdin if line.strip()]
    counts = index.count_words(queries)
    if as_json:
        click.echo(json.dumps([{"ngram": " ".join(q), "count": int(c)} for q, c in zip(queries, counts)], indent=2))
    else:
        for q, c in zip(queries, counts):
            click.echo(f"{int(c)}\t{' '.join(q)}")


def _mix_log10(model_path: str, sents: list) -> np.ndarray:
    """log10 p of every word and </s> of ``sents`` under the --mix model: an n-gram model, or a file of a
    family registered with corpora.modelkinds (a neural checkpoint, registered by the program)."""
    kind = other_kind(model_path)
    if kind is not None:
        return kind.per_token_log10(model_path, sents)
    from ..loading import token_log10

    return token_log10(model_path, sents)


@infini_group.command("ppl")
@click.argument("index_path", metavar="INDEX")
@click.argument("text", required=False)
@click.option("--split", default="test", show_default=True, help="Split of a named corpus.")
@click.option("--mix", "mix_path", default=None, type=click.Path(exists=True, dir_okay=False),
              help="Interpolate with this model (n-gram .npz/.arpa or neural .pt), weights tuned on --tune-on.")
@click.option("--tune-on", default="valid", show_default=True, help="Held-out split (corpus) or file for the weights.")
@click.option("--max-n", type=click.IntRange(min=0), default=0, help="Cap the effective n (0: unbounded).")
@data_dir_option
@json_option
def ppl_cmd(index_path, text, split, mix_path, tune_on, max_n, data_dir, as_json):
    """The ∞-gram on TEXT: effective n, zero-probability rate, and with --mix the mixture's perplexity."""
    from ..infini.index import InfiniIndex, mixture_log10, tune_lambdas
    from corpora.accounting import format_report, oov_flags, report_from_log10

    index = InfiniIndex.load(index_path)
    text = text or (index.source.split(":")[0] if ":" in index.source else None)
    if text is None:
        raise click.UsageError("give the TEXT to score (a file, '-' or a corpus name)")
    spec = index.vocab.tokenizer
    sents, _, where = load_sentences(text, split=split, data_dir=data_dir, tokenizer_spec=spec)
    enc = index.vocab.encode_sentences(sents)
    s = index.score(enc, max_n=max_n)
    n = len(s.eff_n)
    zero = s.cnt_hw == 0
    out = {"index": index_path, "text": where, "tokens": n, "mean_effective_n": float(s.eff_n.mean()),
           "effective_n_counts": np.bincount(s.eff_n).tolist(), "zero_probability_share": float(zero.mean()),
           "sparse_share": float(s.sparse.mean()),
           "accuracy_where_sparse": float((s.cnt_hw[s.sparse] == s.cnt_h[s.sparse]).mean()) if s.sparse.any() else None,
           "accuracy_by_effective_n": index.accuracy_by_n(enc, s)}
    if mix_path:
        if text not in _registry() and tune_on in ("valid", "test", "train") and not os.path.exists(tune_on):
            raise click.UsageError(f"--tune-on {tune_on} is a split of a named corpus; for the file {text} give a "
                                   "held-out file: --tune-on valid.txt")
        h_sents, _, _ = load_sentences(tune_on if text not in _registry() or tune_on not in ("valid", "test", "train")
                                       else text, split=tune_on, data_dir=data_dir, tokenizer_spec=spec)
        hs = index.score(index.vocab.encode_sentences(h_sents), max_n=max_n)
        lam = tune_lambdas(hs, _mix_log10(mix_path, h_sents))
        other = _mix_log10(mix_path, sents)
        mixed = mixture_log10(s, other, lam)
        oov = oov_flags(index.vocab, sents)
        rep_other = report_from_log10(other, oov, enc.n_sentences)
        rep = report_from_log10(mixed, oov, enc.n_sentences)
        out.update({"mix": mix_path, "lambdas": {"sparse": lam[0], "dense": lam[1]}, "mixture": rep.to_dict(),
                    "other": rep_other.to_dict(),
                    "by_effective_n": _by_n(s.eff_n, mixed, other)})
    if as_json:
        click.echo(json.dumps(out, indent=2, default=float))
        return
    click.echo(f"∞-gram {index_path} on {where}: {n:,} tokens, mean effective n {out['mean_effective_n']:.2f}")
    click.echo(f"zero probability (h' never followed by w) at {out['zero_probability_share']:.1%} of tokens: "
               "alone the ∞-gram has infinite perplexity; interpolate it (--mix)")
    if mix_path:
        click.echo(f"mixed with {mix_path}: lambda sparse {lam[0]:.2f}, dense {lam[1]:.2f} (tuned on {tune_on})")
        click.echo(f"  {mix_path} alone: ppl {out['other']['ppl']:.2f}")
        click.echo(format_report(dict(rep.to_dict(), model=f"∞-gram + {mix_path}", text=where,
                                      describe="∞-gram interpolated")))


def _registry():
    from corpora.registry import REGISTRY

    return REGISTRY


def _by_n(eff_n: np.ndarray, mixed: np.ndarray, other: np.ndarray) -> list:
    """Per effective n: tokens, and the mixture's and the other model's perplexity on them."""
    rows = []
    for k in np.unique(np.minimum(eff_n, 10)):
        m = np.minimum(eff_n, 10) == k
        rows.append({"effective_n": int(k) if k < 10 else "10+", "tokens": int(m.sum()),
                     "ppl_mixture": float(10 ** (-mixed[m].mean())), "ppl_other": float(10 ** (-other[m].mean()))})
    return rows


