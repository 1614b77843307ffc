"""Adapting a general n-gram model to a small in-domain text: count merging against mixing.

    python benchmarks/bench_adaptation.py [--general ptb] [--indomain timemachine] [--order 3] [--out FILE.json]

The general text is PTB's train split (887 k words of 1989 newswire), the in-domain one The Time Machine's
(28 k words of a novel); the weights are tuned on the book's valid split and every model is scored on its
test split, all over one vocabulary (the union of the two training texts), so the perplexities compare.
Rows: each text alone; the two concatenated; count merging (`train --weights`) with the weights tuned on
dev (`--tune-weights`) for mkn and wb; and the linear mixture of the two separate models with EM weights on
dev (`ngramlm mix --best-mix`), static (one back-off model) and dynamic.
"""
from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

import click
import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from corpora.sources import read_text_source  # noqa: E402
from corpora.vocab import Vocab  # noqa: E402
from ngramlm import NgramLM  # noqa: E402
from ngramlm.builder.count_merge import MergedSmoother, align, tune_weights  # noqa: E402
from ngramlm.counts import NgramCounts  # noqa: E402
from ngramlm.tools.mix import best_mix, dynamic_log10, mix_tables  # noqa: E402
from ngramlm.scorer import Scorer  # noqa: E402

DATA_DIR = os.environ.get("NGRAMLM_DATA_DIR", str(ROOT.parent / "shared" / "corpora"))
FALLBACK = (0.5, 1.0, 1.5)  # the book adds ~2,000 types that make the unigram D3 of the union negative


def _sentences(name: str, split: str) -> list:
    return read_text_source(name, split=split, data_dir=DATA_DIR).sentences


def _ppl(lp: np.ndarray) -> float:
    return float(10.0 ** (-lp.sum() / len(lp)))


@click.command()
@click.option("--general", default="ptb", show_default=True)
@click.option("--indomain", default="timemachine", show_default=True)
@click.option("--order", type=int, default=3, show_default=True)
@click.option("--out", "out_path", type=click.Path(dir_okay=False), default=None, help="Also write JSON here.")
def main(general, indomain, order, out_path):
    t0 = time.perf_counter()
    g_train, d_train = _sentences(general, "train"), _sentences(indomain, "train")
    vocab = Vocab().fit(g_train + d_train)
    dev = vocab.encode_sentences(_sentences(indomain, "valid"))
    test = vocab.encode_sentences(_sentences(indomain, "test"))
    counts = [NgramCounts.from_encoded(vocab.encode_sentences(s), order=order, vocab_size=len(vocab))
              for s in (g_train, d_train)]
    src = align(counts)
    click.echo(f"{general} train {sum(map(len, g_train)):,} words + {indomain} train {sum(map(len, d_train)):,} "
               f"words; {vocab.n_types:,} types; dev {dev.n_words:,} / test {test.n_words:,} words "
               f"({time.perf_counter() - t0:.1f} s)", err=True)
    rows = []

    def row(name, lm_or_lp, seconds, **extra):
        if isinstance(lm_or_lp, np.ndarray):
            test_ppl = _ppl(lm_or_lp)
        else:
            test_ppl = lm_or_lp.perplexity(test)
        rows.append({"model": name, "test_ppl": round(test_ppl, 3), "seconds": round(seconds, 2), **extra})
        click.echo(f"  {name:<46} test ppl {test_ppl:9.3f}  ({seconds:.1f} s)", err=True)

    def fit(weights, smoothing="mkn"):
        lm = NgramLM(order=order, smoothing=smoothing, **({"discount_fallback": FALLBACK} if smoothing == "mkn" else {}))
        return lm.fit_counts(src.weighted(weights), vocab=vocab,
                             smoother=MergedSmoother(lm._make_smoother(), src, weights))

    alone = {}
    for i, name in enumerate((general, indomain)):
        t = time.perf_counter()
        lm = NgramLM(order=order, discount_fallback=FALLBACK).fit_counts(counts[i], vocab=vocab)
        alone[name] = lm
        row(f"{name} alone (mkn)", lm, time.perf_counter() - t)
    t = time.perf_counter()
    cat = NgramLM(order=order, discount_fallback=FALLBACK).fit_counts(src.weighted([1, 1]), vocab=vocab)
    row("concatenated (mkn)", cat, time.perf_counter() - t)
    t = time.perf_counter()
    row("count merging, weights 1,1 (mkn)", fit([1, 1]), time.perf_counter() - t)
    for smoothing in ("mkn", "wb"):
        t = time.perf_counter()
        res = tune_weights(2, lambda w, s=smoothing: fit(w, s).perplexity(dev))
        lm = fit(res.weights, smoothing)
        row(f"count merging, tuned ({smoothing})", lm, time.perf_counter() - t,
            weights=[round(x, 4) for x in res.weights], dev_ppl=round(res.dev_ppl, 3), tries=len(res.trials))
    t = time.perf_counter()
    models = [alone[general], alone[indomain]]
    dev_lp = np.stack([m.token_scores(dev).log10_prob for m in models])
    fit_mix = best_mix(dev_lp)
    test_lp = np.stack([m.token_scores(test).log10_prob for m in models])
    row("linear mixture, EM weights, dynamic", dynamic_log10(test_lp, fit_mix.weights), time.perf_counter() - t,
        weights=[round(x, 4) for x in fit_mix.weights])
    t = time.perf_counter()
    static = Scorer(mix_tables(models, weights=fit_mix.weights, names=[general, indomain]))
    row("linear mixture, EM weights, static (ngramlm mix)", static, time.perf_counter() - t,
        weights=[round(x, 4) for x in fit_mix.weights])
    out = {"general": general, "indomain": indomain, "order": order, "types": vocab.n_types,
           "dev_words": dev.n_words, "test_words": test.n_words, "rows": rows}
    click.echo(json.dumps(out, indent=2))
    if out_path:
        Path(out_path).write_text(json.dumps(out, indent=2) + "\n")


if __name__ == "__main__":
    main()
