"""The ∞-gram index against the ``infini-gram`` package (Liu et al.'s engine) on the same PTB tokens.

    pip install infini-gram==2.6.0        # the peer (not a dependency of this project)
    python benchmarks/bench_infini.py [--queries 10000]

Both index the padded PTB training stream: ours as ``<s> w1 .. wm </s>`` per sentence; the peer's
documents are ``w1 .. wm </s>`` each after its separator 65535, which plays our ``<s>`` -- so the two
streams are the same token for token, and a query maps by writing 65535 for ``<s>``.  Printed:
build time, bytes a token, count queries a second (10,000 random 1-5-grams of the test set, counts
checked equal), ∞-gram queries a second on test positions (suffix length and counts checked equal),
and ours on the whole test set.  Without the peer installed, ours alone.
"""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import click
import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
DATA_DIR = os.environ.get("NGRAMLM_DATA_DIR", str(ROOT.parent / "shared" / "corpora"))
SEP = 65535


def build_peer(docs: list, index_dir: Path) -> float:
    """The peer's raw files (tokenized.0, offset.0) written from our ids, then its own suffix-array build."""
    index_dir.mkdir(parents=True, exist_ok=True)
    offsets, pos = [], 0
    t = time.perf_counter()
    with open(index_dir / "tokenized.0", "wb") as fh:
        for d in docs:
            b = b"\xff\xff" + np.asarray(d, dtype="<u2").tobytes()
            offsets.append(pos)
            fh.write(b)
            pos += len(b)
    np.array(offsets, dtype=np.uint64).tofile(index_dir / "offset.0")
    empty = index_dir.parent / "empty"
    empty.mkdir(exist_ok=True)
    # Absolute paths (the indexer changes directory); a file limit this machine allows.
    subprocess.run([sys.executable, "-m", "infini_gram.indexing", "--data_dir", str(empty.resolve()),
                    "--save_dir", str(index_dir.resolve()), "--token_dtype", "u16", "--cpus", "2", "--mem", "4",
                    "--ulimit", "20000"], check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return time.perf_counter() - t


@click.command()
@click.option("--queries", type=int, default=10_000, show_default=True)
def main(queries):
    from corpora import load_corpus, prepare
    from corpora.vocab import BOS_ID
    from ngramlm.counts import padded_stream
    from ngramlm.infini.index import InfiniIndex

    ds = prepare(load_corpus("ptb", data_dir=DATA_DIR))
    t = time.perf_counter()
    idx = InfiniIndex.build(ds["train"], ds.vocab)
    ours_build = time.perf_counter() - t
    click.echo(f"ours: built in {ours_build:.2f} s, {idx.nbytes / len(idx.tokens):.1f} bytes a token "
               f"({len(idx.tokens):,} tokens)")
    rng = np.random.default_rng(0)
    toks, pos = padded_stream(ds["test"])
    grams = []
    for _ in range(queries):
        L = int(rng.integers(1, 6))
        i = int(rng.integers(0, len(toks) - L))
        grams.append(toks[i:i + L].tolist())
    t = time.perf_counter()
    ours_counts = idx.count_ids(grams)
    ours_cps = queries / (time.perf_counter() - t)
    t = time.perf_counter()
    s = idx.score(ds["test"])
    ours_tps = len(s.eff_n) / (time.perf_counter() - t)
    click.echo(f"ours: count {ours_cps:,.0f} queries/s (vectorized); ∞-gram scoring of the test set "
               f"{ours_tps:,.0f} tokens/s ({len(s.eff_n):,} tokens)")
    try:
        from infini_gram.engine import InfiniGramEngine
    except ImportError:
        click.echo("peer: infini-gram is not installed (pip install infini-gram==2.6.0); ours only")
        return
    work = Path(tempfile.mkdtemp(prefix="bench_infini_"))
    try:
        train, _ = padded_stream(ds["train"])
        starts = np.flatnonzero(train == BOS_ID)
        docs = np.split(train, starts[1:])
        docs = [d[1:] for d in docs]  # drop our <s>: the peer's separator stands before each document
        peer_build = build_peer(docs, work / "index")
        size = sum(f.stat().st_size for f in (work / "index").iterdir())
        click.echo(f"peer: built in {peer_build:.2f} s (files + its suffix-array builder), "
                   f"{size / len(idx.tokens):.1f} bytes a token")
        eng = InfiniGramEngine(index_dir=str(work / "index"), eos_token_id=BOS_ID, load_to_ram=True)

        def peer_ids(seq):
            return [SEP if x == BOS_ID else int(x) for x in seq]

        t = time.perf_counter()
        peer_counts = [eng.count(input_ids=peer_ids(g))["count"] for g in grams]
        peer_cps = queries / (time.perf_counter() - t)
        same = bool(np.array_equal(np.asarray(peer_counts), ours_counts))
        click.echo(f"peer: count {peer_cps:,.0f} queries/s; counts equal to ours: {same}; "
                   f"ours/peer speed {ours_cps / peer_cps:.1f}x")
        pred = np.flatnonzero(pos > 0)
        sel = rng.choice(len(pred), min(queries, len(pred)), replace=False)
        agree = 0
        t = time.perf_counter()
        for j in sel:
            tt = pred[j]
            r = eng.infgram_prob(prompt_ids=peer_ids(toks[tt - pos[tt]:tt]), cont_id=int(toks[tt]))
            if r["suffix_len"] == s.eff_n[j] - 1 and (r["suffix_len"] == 0 or (
                    r["prompt_cnt"] == s.cnt_h[j] and r["cont_cnt"] == s.cnt_hw[j])):
                agree += 1
        peer_ips = len(sel) / (time.perf_counter() - t)
        click.echo(f"peer: ∞-gram prob {peer_ips:,.0f} queries/s; suffix length and counts equal to ours at "
                   f"{agree:,}/{len(sel):,} positions; ours/peer speed {ours_tps / peer_ips:.0f}x")
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
