"""ngramlm.Model against the kenlm module on the same ARPA file: same numbers, and how fast.

    python benchmarks/bench_kenlm_api.py [--arpa FILE] [--text FILE]

Without --arpa it builds the PTB MKN 5-gram (NGRAMLM_DATA_DIR or ../shared/corpora) and writes it
to a temp file.  Prints per-call microseconds of the BaseScore loop a beam-search decoder runs,
of score() per sentence, the load time, and ours / kenlm ratios (both run in this process).
"""
from __future__ import annotations

import os
import sys
import tempfile
import time
from pathlib import Path

import click

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

DATA_DIR = os.environ.get("NGRAMLM_DATA_DIR", str(Path(__file__).resolve().parents[2] / "shared" / "corpora"))


def _loop(model, state_cls, words) -> tuple:
    a, b = state_cls(), state_cls()
    t = time.perf_counter()
    model.BeginSentenceWrite(a)
    total = 0.0
    for w in words:
        total += model.BaseScore(a, w, b)
        a, b = b, a
    return (time.perf_counter() - t) / len(words) * 1e6, total


@click.command()
@click.option("--arpa", type=click.Path(exists=True, dir_okay=False), default=None)
@click.option("--text", type=click.Path(exists=True, dir_okay=False), default=None)
@click.option("--repeats", type=int, default=3, show_default=True)
def main(arpa, text, repeats):
    import kenlm

    from ngramlm import Model, NgramLM, State
    from ngramlm.io.arpa import write_arpa

    if arpa is None:
        from corpora import load_corpus, prepare

        ds = prepare(load_corpus("ptb", data_dir=DATA_DIR))
        arpa = os.path.join(tempfile.mkdtemp(), "ptb5.arpa")
        write_arpa(NgramLM(order=5, smoothing="mkn").fit(ds["train"], vocab=ds.vocab), arpa)
        text = text or str(Path(DATA_DIR) / "ptb" / "ptb.test.txt")
    lines = [ln.strip() for ln in open(text, encoding="utf-8")]
    words = " ".join(lines).split()
    t = time.perf_counter()
    ours = Model(arpa)
    load_ours = time.perf_counter() - t
    t = time.perf_counter()
    ref = kenlm.Model(arpa)
    load_ref = time.perf_counter() - t
    _loop(ours, State, words[:10])  # builds the state tables
    rows = []
    for name, model, st in (("ngramlm.Model", ours, State), ("kenlm.Model", ref, kenlm.State)):
        best = min(_loop(model, st, words)[0] for _ in range(repeats))
        t = time.perf_counter()
        for ln in lines:
            model.score(ln)
        per_sent = (time.perf_counter() - t) / len(lines) * 1e6
        rows.append((name, best, per_sent))
    click.echo(f"{arpa}: {len(words):,} words, {len(lines):,} sentences; load ngramlm {load_ours:.2f} s, "
               f"kenlm {load_ref:.2f} s (ARPA; kenlm's binary format loads faster)")
    click.echo(f"{'':<15} {'BaseScore us/call':>18} {'score() us/sentence':>20}")
    for name, b, s in rows:
        click.echo(f"{name:<15} {b:18.3f} {s:20.1f}")
    click.echo(f"ratio ours/kenlm: BaseScore {rows[0][1] / rows[1][1]:.2f}x, score() {rows[0][2] / rows[1][2]:.2f}x")


if __name__ == "__main__":
    main()
