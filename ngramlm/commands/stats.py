"""``ngramlm stats``: corpus, vocabulary and n-gram sparsity statistics.

It lives with the n-gram models, not in ``corpora``: the sparsity table (possible vs. observed
n-grams, unseen test n-grams per order) is the n-gram models' view of a corpus, and ``corpora``
stands below both model families.
"""
from __future__ import annotations

from typing import Optional

import click

from corpora.console import load_named_corpus, parse_int, percent, text_table
from corpora.options import data_dir_option, json_option


@click.command("stats")
@click.argument("corpus_name", metavar="[CORPUS]", default="toy", required=False)
@click.option("--min-count", default=None, metavar="N", help="Vocabulary min_count (default 1).")
@click.option("--max-size", default=None, metavar="K", help="Vocabulary max_size (default none).")
@click.option("--order", default="3", metavar="N", help="Highest n-gram order for the sparsity table (default 3).")
@data_dir_option
@json_option
def stats_cmd(corpus_name: str, min_count: Optional[str], max_size: Optional[str], order: str,
              data_dir: Optional[str], as_json: bool) -> None:
    """Corpus statistics per split, vocabulary and n-gram sparsity (default corpus: toy)."""
    from corpora.corpus import prepare

    mc = parse_int(min_count, "--min-count") or 1
    ms = parse_int(max_size, "--max-size")
    max_order = parse_int(order, "--order")
    corpus = load_named_corpus(corpus_name, data_dir=data_dir, tokenizer=None)
    ds = prepare(corpus, min_count=mc, max_size=ms)
    vocab = ds.vocab
    # --json: the same numbers for machines, and no table for people.
    echo = (lambda *a, **k: None) if as_json else click.echo
    summary: dict = {"corpus": corpus.name, "tokenizer": corpus.tokenizer.to_dict(), "splits": {}}
    echo(f"{corpus!r}")
    has_truth = any(isinstance(corpus.truth.get(s), dict) and "perplexity" in corpus.truth[s] for s in corpus.splits)
    header = ["split", "sentences", "words", "predicted", "OOV", "OOV rate"] + (["true ppl"] if has_truth else [])
    rows = []
    for split, sents in corpus.splits.items():
        enc = ds[split]
        oov, n = vocab.oov_count(sents)
        row = [split, f"{enc.n_sentences:,}", f"{enc.n_words:,}", f"{enc.n_tokens:,}", f"{oov:,}",
               percent(oov / n if n else 0.0)]
        summary["splits"][split] = {"sentences": enc.n_sentences, "words": enc.n_words, "tokens": enc.n_tokens,
                                    "oovs": oov, "oov_rate": oov / n if n else 0.0,
                                    "true_ppl": (corpus.truth.get(split) or {}).get("perplexity")
                                    if has_truth else None}
        if has_truth:
            t = corpus.truth.get(split) or {}
            row.append(f"{t['perplexity']:.4f}" if "perplexity" in t else "-")
        rows.append(row)
    echo("per split (predicted tokens = words + one </s> per sentence):")
    echo(text_table(rows, header))
    st = vocab.stats()
    summary["vocab"] = {"ids": len(vocab), "n_types": vocab.n_types, **st}
    echo(f"vocabulary: {vocab!r}")
    echo(f"  ids {len(vocab):,}; n_types {vocab.n_types:,}; train tokens {st['train_tokens']:,}, "
         f"{st['train_tokens_mapped_to_unk']:,} mapped to {vocab.unk_token} ({percent(st['train_unk_rate'])})")
    if has_truth:
        echo("true ppl: perplexity of the generating process on each split (per predicted token)")
        rate = next((t["entropy_rate_bits"] for t in corpus.truth.values()
                     if isinstance(t, dict) and "entropy_rate_bits" in t), None)
        if rate is not None:
            echo(f"  source entropy rate {rate:.4f} bits/token (perplexity {2.0 ** rate:.4f} in the limit)")
        for split, t in corpus.truth.items():
            n_true = t.get("n_tokens") if isinstance(t, dict) else None
            if split in ds.encoded and n_true is not None and n_true != ds[split].n_tokens:
                echo(f"  warning: the truth for {split} counts {n_true:,} tokens, the encoded split "
                     f"{ds[split].n_tokens:,}")
    if max_order and "train" in ds.encoded:
        # The same table as compare's V^n wall (ngramlm.sparsity): n-grams as the models see them.
        from ..sparsity import sparsity_table

        def of_possible(x: float) -> str:  # tiny at high orders: scientific below 0.01%
            return percent(x) if x >= 1e-4 else f"{100 * x:.1e}%"

        others = [s for s in ds.encoded if s != "train"]
        table = sparsity_table(ds["train"], {s: ds[s] for s in others}, vocab=vocab, max_order=max_order)
        summary["sparsity"] = table
        rows = []
        for r in table:
            rows.append([str(r["order"]), f"{r['distinct_train']:,}", of_possible(r["coverage_of_possible"]),
                         percent(r["singleton_share"])] + [percent(r["splits"][s]["unseen_share"]) for s in others])
        echo("n-gram sparsity (sentences as the models see them, <s> w1 .. wm </s>, n-grams never crossing one;\n"
             "  train types = distinct train n-grams ending in a predicted token, of V^n possible with "
             f"V = {vocab.n_types:,};\n"
             "  seen once = share of those types occurring once; unseen = share of predicted tokens whose n-gram,\n"
             "  shortened at the sentence start, never occurs in train):")
        echo(text_table(rows, ["n", "train types", "of V^n", "seen once"] + [f"{s} unseen" for s in others]))
    if as_json:
        import json

        click.echo(json.dumps(summary, indent=2, default=float))
