"""The ∞-gram index against the ``infini-gram`` package (Liu et al.'s engine) on the same PTB tokens.

    pip install infini-gram==2.6.0        # the peer (not a dependency of this project)
    python benchmarks/bench_infini.py [--queries 10000]

Both index the padded PTB training stream: ours as ``<s> w1 .. wm </s>`` per sentence; the peer's
documents are ``w1 .. wm </s>`` each after its separator 65535, which plays our ``<s>`` -- so the two
streams are the same token for token, and a query maps by writing 65535 for ``<s>``.  Printed:
build time, bytes a token, count queries a second (10,000 random 1-5-grams of the test set, counts
checked equal), ∞-gram queries a second on test positions (suffix length and counts checked equal),
and ours on the whole test set.  Without the peer installed, ours alone.

    python benchmarks/bench_infini.py --scale 4,16 [--memory 128M,256M] [--dask local:2] [--work DIR]

``--scale``: the build's wall time and peak RSS (``ru_maxrss`` of the child, as bench_scale measures)
on bench_scale's toy corpora (50,000 types; sizes in millions of tokens): ``infini build FILE
--stream -o one.npz`` (one suffix array), then ``infini build FILE --memory M -o FOLDER`` for each
budget (sharded), and with ``--dask`` the last budget on a cluster (the peak is then the largest
process's: a worker's, or the client's, which hosts a local:N scheduler).  Each sharded index is checked equal
to the single one (every count of 10,000 random 1-8-grams and of the patterns across each cut,
and ``score`` on 20,000 test tokens, exactly); count and score speeds of both are printed.
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
@click.option("--scale", default="", help="Build sizes in millions of tokens (toy corpora): time, peak RSS, shards.")
@click.option("--memory", "budgets", default="128M,256M", show_default=True, help="With --scale: budgets to shard by.")
@click.option("--dask", "dask_address", default=None, help="With --scale: also build on this cluster (local:2).")
@click.option("--work", type=click.Path(file_okay=False), default="/tmp/ngramlm-scale", show_default=True)
@click.option("--json", "json_out", type=click.Path(dir_okay=False), default=None, help="With --scale: rows here.")
def main(queries, scale, budgets, dask_address, work, json_out):
    if scale:
        return scale_main([float(x) for x in scale.split(",")], budgets.split(","), dask_address, Path(work), queries,
                          json_out)
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


def scale_main(sizes: list, budgets: list, dask_address, work: Path, queries: int, json_out) -> None:
    import json

    sys.path.insert(0, str(ROOT / "benchmarks"))
    from bench_kenlm_table import run_once
    from bench_scale import make_corpus, test_text

    from corpora.vocab import Vocab
    from ngramlm.infini.sharded import open_index

    work.mkdir(parents=True, exist_ok=True)
    tmp = work / "tmp"
    tmp.mkdir(exist_ok=True)
    rows = []
    for m in sizes:
        corpus = make_corpus(work, m)
        one = work / f"infini-{m:g}M.npz"
        builds = [("one suffix array", ["--stream", "-o", one], one)]
        for b in budgets:
            folder = work / f"infini-{m:g}M-{b}"
            builds.append((f"--memory {b}", ["--memory", b, "-o", folder], folder))
        if dask_address:
            out = work / f"infini-{m:g}M-dask"
            builds.append((f"--dask {dask_address} --memory {budgets[-1]}",
                           ["--dask", dask_address, "--memory", budgets[-1], "-o", out], out))
        for name, args, out in builds:
            if out.is_dir():
                shutil.rmtree(out)
            wall, rss = run_once([sys.executable, "-m", "cli", "infini", "build", corpus, "-T", tmp, *args])
            row = {"millions": m, "build": name, "wall_s": round(wall, 2), "peak_rss_mb": round(rss)}
            idx = open_index(out)
            row["tokens"] = idx.n_tokens
            row["shards"] = len(getattr(idx, "shards", [idx]))
            rows.append(row)
            click.echo(json.dumps(row))
        single = open_index(one)
        test = Vocab.encode_sentences(single.vocab, [line.split() for line in test_text(work).read_text().splitlines()])
        rng = np.random.default_rng(0)
        stream = np.asarray(single.tokens, dtype=np.int64)
        grams = []
        for _ in range(queries):
            L = int(rng.integers(1, 9))
            i = int(rng.integers(0, len(stream) - L))
            grams.append(stream[i:i + L].tolist())
        for name, _, out in builds:
            idx = open_index(out)
            pats = list(grams)
            for c in getattr(idx, "offsets", np.zeros(2, np.int64))[1:-1]:
                pats += [stream[c - a:c + b].tolist() for a in (1, 2, 4) for b in (1, 2, 4)]
            t = time.perf_counter()
            got = idx.count_ids(pats)
            cps = len(pats) / (time.perf_counter() - t)
            t = time.perf_counter()
            s = idx.score(test)
            tps = len(s.eff_n) / (time.perf_counter() - t)
            ref = single.score(test)
            same = bool(np.array_equal(got, single.count_ids(pats)) and all(
                np.array_equal(getattr(s, f), getattr(ref, f)) for f in ("eff_n", "cnt_h", "cnt_hw", "sparse")))
            click.echo(f"{m:g}M {name}: count {cps:,.0f} queries/s, score {tps:,.0f} tokens/s; "
                       f"counts and score equal to the single index: {same}")
            for r in rows:
                if r["millions"] == m and r["build"] == name:
                    r.update(count_qps=round(cps), score_tps=round(tps), equal_to_single=same)
    if json_out:
        Path(json_out).write_text(json.dumps(rows, indent=2) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
