"""``ngramlm infini build|count|ppl``: the ∞-gram on the command line (see ``ngramlm.infini.index``; a
folder output is a sharded index, ``ngramlm.infini.sharded``)."""
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


DEFAULT_SHARDED_MEMORY = "1G"


@infini_group.command("build")
@click.argument("texts", nargs=-1, required=True, metavar="TEXT...")
@click.option("-o", "--output", "--out", "output", required=True, type=click.Path(),
              help="NAME.npz: one index file (binary, so not '-').  Any other path: a folder holding a sharded "
                   "index (one suffix array per shard, every count a sum over the shards).")
@click.option("--split", default="train", show_default=True, help="Split of a named corpus.")
@click.option("--vocab", "vocab_path", type=click.Path(dir_okay=False), default=None,
              help="Encode with this vocabulary file (else one is fitted on TEXT, as `train` does).")
@click.option("--min-count", type=int, default=1, show_default=True)
@click.option("--temp-dir", "-T", "temp_dir", type=click.Path(file_okay=False), default=None,
              help="With --stream, --memory or --dask: where the spilled token ids go (on --dask, a path on the "
                   "workers).")
@click.option("--stream", is_flag=True,
              help="Files too big to hold as sentences: tokenize them once into a spilled id stream "
                   "(also chosen for several files, and for files into a folder or with --memory).")
@click.option("--memory", "-S", "memory", default=None, metavar="SIZE",
              help="Memory budget of the suffix sort (10 bytes a token): 1G, 500M, 30%.  A sharded index (-o "
                   f"FOLDER) is cut into shards that each sort within it [default: {DEFAULT_SHARDED_MEMORY}]; for "
                   "NAME.npz a text whose one suffix array would not fit is refused before the sort.")
@click.option("--dask", "dask_address", default=None, metavar="ADDRESS",
              help="Build the shards on a Dask cluster: tcp://SCHEDULER:8786, or local:N for N local worker "
                   "processes.  TEXT files and -o FOLDER must be at the same paths on every worker.")
@click.option("--shard-size", "shard_size", default=None, metavar="SIZE",
              help="With --dask: bytes of text a task indexes (line-aligned) [default: a quarter of --memory]; "
                   "a task whose text sorts over --memory writes several shards.")
@data_dir_option
@json_option
@tokenizer_options
def build_cmd(texts, output, split, vocab_path, min_count, temp_dir, stream, memory, dask_address, shard_size,
              data_dir, as_json, tokenizer, lower, normalize):
    """Index TEXT (a file, '-' or a corpus name; or several files) for ∞-gram queries."""
    from pathlib import Path

    from corpora.registry import REGISTRY
    from corpora.vocab import Vocab

    from ..builder.streaming import parse_memory
    from ..infini.index import InfiniIndex, check_sort_fits, token_dtype

    # One suffix array in a .npz, or a folder of shards: the name says which (a folder is what a
    # budget-bounded or cluster build writes, since its shards are written one by one).
    sharded = str(output) != "-" and not str(output).endswith(".npz")
    if sharded:
        from ..infini.sharded import check_folder

        check_folder(output)
    else:
        check_writable(output, what="index file")
    if dask_address and not sharded:
        raise click.UsageError("--dask writes a sharded index, which is a folder: give -o FOLDER (a path not "
                               "ending in .npz)")
    if shard_size is not None and not dask_address:
        raise click.UsageError("--shard-size sets the text of one Dask task: use it with --dask (here the shards "
                               "are cut by --memory)")
    budget = parse_memory(memory) if memory is not None else (parse_memory(DEFAULT_SHARDED_MEMORY) if sharded
                                                              else None)
    t0 = time.perf_counter()
    spec = tokenizer_spec(tokenizer, lower, normalize)
    say = (lambda m: click.echo(f"    {m}", err=True))
    # Files under a budget (or into shards) stream, as --stream does: holding their sentences as Python
    # lists would cost far more than the sort.  With --vocab one text is read whole, as without a budget.
    files_path = stream or len(texts) > 1 or dask_address is not None or (
        (memory is not None or sharded) and not vocab_path and all(t == "-" or Path(t).is_file() for t in texts))
    if files_path:
        for t in texts:
            if t != "-" and not Path(t).is_file():
                raise click.UsageError(f"{t!r} is not a file: --stream, --dask (and several TEXTs) read files or '-'; "
                                       "build a named corpus without them")
        if vocab_path:
            raise click.UsageError("--vocab with --stream, several TEXTs or --dask is not supported: drop one")
        if dask_address:
            from ..builder.cluster import close, connect
            from ..infini.sharded import build_on_cluster

            shard_bytes = parse_memory(shard_size) if shard_size is not None else max(1 << 20, budget // 4)
            client = connect(dask_address)
            try:
                manifest = build_on_cluster(client, list(texts), output, memory=budget, shard_bytes=shard_bytes,
                                            tokenizer=spec, min_count=min_count, temp_dir=temp_dir, progress=say)
            finally:
                close(client)
            _report_sharded(manifest, output, ", ".join(texts), t0, as_json)
            return
        if sharded:
            from ..infini.sharded import build_sharded_from_files

            manifest = build_sharded_from_files(list(texts), output, memory=budget, tokenizer=spec,
                                                min_count=min_count, temp_dir=temp_dir, progress=say)
            _report_sharded(manifest, output, ", ".join(texts), t0, as_json)
            return
        index = InfiniIndex.build_from_files(list(texts), tokenizer=spec, min_count=min_count, temp_dir=temp_dir,
                                             progress=say, memory=budget)
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
    if sharded:
        from ..infini.sharded import build_sharded_from_encoded

        manifest = build_sharded_from_encoded(enc, vocab, output, memory=budget, source=where, progress=say)
        _report_sharded(manifest, output, where, t0, as_json)
        return
    if budget is not None:
        check_sort_fits(len(enc.ids) + enc.n_sentences, np.dtype(token_dtype(len(vocab))).itemsize, budget)
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


def _report_sharded(manifest: dict, output, where, t0, as_json) -> None:
    from pathlib import Path

    seconds = time.perf_counter() - t0
    n = manifest["tokens"]
    size = sum((Path(output) / e["file"]).stat().st_size for e in manifest["shards"])
    from corpora.vocab import Vocab

    types = Vocab.load(Path(output) / manifest["vocab"]).n_types
    info = {"index": str(output), "text": where, "tokens": n, "types": types, "shards": len(manifest["shards"]),
            "memory": manifest["memory"], "bytes_per_token": size / max(1, n), "build_seconds": seconds,
            "seconds": seconds}
    if "text_shards" in manifest:
        info["text_shards"] = manifest["text_shards"]
    if as_json:
        click.echo(json.dumps(info, indent=2))
    else:
        click.echo(f"indexed {n:,} tokens of {where} ({types:,} types) in {seconds:.2f} s as {info['shards']} "
                   f"shard(s), each sorted within {manifest['memory'] / 2**20:,.0f} MB, "
                   f"{info['bytes_per_token']:.1f} bytes a token -> {output}/")


@infini_group.command("count")
@click.argument("index_path", metavar="INDEX")
@click.argument("ngram", nargs=-1)
@json_option
def count_cmd(index_path, ngram, as_json):
    """Occurrences of NGRAM (words) in the indexed text; without NGRAM, one n-gram a line from stdin.
    INDEX is an index file or a sharded index's folder."""
    from ..infini.sharded import open_index

    index = open_index(index_path)
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
    """The ∞-gram on TEXT: effective n, zero-probability rate, and with --mix the mixture's perplexity.
    INDEX is an index file or a sharded index's folder."""
    from ..infini.index import mixture_log10, tune_lambdas
    from ..infini.sharded import open_index
    from corpora.accounting import format_report, oov_flags, report_from_log10

    index = open_index(index_path)
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


