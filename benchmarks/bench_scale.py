"""Scale: the memory-bounded build against lmplz on toy corpora of 1 to 256 million tokens.

    python benchmarks/bench_scale.py --kenlm-bin ~/kenlm/build/bin --sizes 1,4,16 [--dask-sizes 16]
           [--memory 1G] [--estimation auto] [--in-memory] [--no-ppl] [--work /tmp/ngramlm-scale] [--json out.json]

Corpora (regenerated on demand, cached in --work): sentences of the toy language
``ToyLanguage(ToyConfig(seed=0, vocab_size=50000))`` sampled with ``numpy.random.default_rng(1)``
in batches of 4,096 until the size (words + sentence ends) is reached, one sentence a line (a
smaller size is a prefix of a larger one); the test text is 20,000 tokens sampled with seed 2.  Every run is its own process, one at a time, timed by wall
clock with its peak RSS (``ru_maxrss`` of the child):

* ``ngramlm train FILE --order 5 --discount-fallback --memory 1G -T WORK [--estimation E] -o out.arpa``
  (``--estimation auto``, the default, estimates out of core when the merged counts would not fit the
  budget);
* with --in-memory, the same text through the in-memory path (``ngramlm train FILE --order 5
  --discount-fallback -o mem.arpa``), and whether the two ARPA files are byte for byte the same;
* ``lmplz -o 5 -S 1G -T WORK --discount_fallback < FILE > out.arpa`` (KenLM built from source);
* with --dask-sizes, the same ngramlm build on a Dask cluster of N workers for each N of --dask-workers
  (default 2): a ``dask scheduler`` and N ``dask worker`` processes started here on 127.0.0.1 (real
  TCP, each worker ``--nthreads 1 --memory-limit`` the --memory budget), the client ``ngramlm train
  --dask tcp://...``: its wall and peak RSS, each worker's peak RSS and the bytes it sent (to other
  workers and the client: Dask's own transfer counter), and the ARPA file's sha256 against the local build's;
* ``ngramlm ppl`` of the native model on 20,000 test tokens (load + score), memory-mapped;
* with --kenlm-bin, the test text's perplexity under our ARPA file and under lmplz's (both read by
  ``ngramlm ppl``), and their relative difference: about 1e-6 for the default (the textbook's
  estimate), lmplz's own numbers with ``--compat kenlm`` (streamed, out of core or on Dask workers).
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import click

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))
from bench_kenlm_table import run_once  # noqa: E402

NGRAMLM = [sys.executable, "-m", "cli"]
VOCAB = 50_000


def _language():
    from corpora.toy import ToyConfig, ToyLanguage

    return ToyLanguage(ToyConfig(seed=0, vocab_size=VOCAB))


def _write_sentences(path: Path, n_tokens: int, seed: int) -> None:
    """Sentences of the one toy language, sampled with ``seed``, until ``n_tokens`` (words + </s>)."""
    import numpy as np

    lang = _language()
    rng = np.random.default_rng(seed)
    written = 0
    tmp = path.with_suffix(".part")
    with open(tmp, "w", encoding="utf-8") as fh:
        while written < n_tokens:
            batch, _ = lang.sample_sentences(rng, 4096)
            for s in batch:
                fh.write(" ".join(s) + "\n")
                written += len(s) + 1
                if written >= n_tokens:
                    break
    tmp.rename(path)


def make_corpus(work: Path, millions: float) -> Path:
    path = work / f"toy50k-{millions:g}M.txt"
    if not path.exists():
        _write_sentences(path, int(millions * 1_000_000), seed=1)  # a smaller size is a prefix of a larger
    return path


def test_text(work: Path) -> Path:
    path = work / "toy50k-test.txt"
    if not path.exists():
        _write_sentences(path, 20_000, seed=2)
    return path


@click.command()
@click.option("--kenlm-bin", type=click.Path(exists=True, file_okay=False), default=None,
              help="Folder with KenLM's lmplz (built from source); without it only ngramlm runs.")
@click.option("--sizes", default="1,4,16", show_default=True, help="Training sizes in millions of tokens.")
@click.option("--dask-sizes", default="", help="Sizes to build on a Dask cluster as well.")
@click.option("--dask-workers", default="2", show_default=True,
              help="Worker counts of the Dask builds: a scheduler and this many worker processes each time.")
@click.option("--no-local", "no_local", is_flag=True,
              help="Run the local build once (the reference sha256 of the Dask builds), not --repeat times.")
@click.option("--memory", default="1G", show_default=True)
@click.option("--order", type=int, default=5, show_default=True,
              help="Model order of every build (4 where order 5's temp files would not fit the disk).")
@click.option("--estimation", type=click.Choice(["auto", "memory", "disk"]), default="auto", show_default=True,
              help="ngramlm train --estimation: out-of-core estimation when the counts pass --memory (auto), "
                   "never (memory) or always (disk).")
@click.option("--in-memory", "in_memory", is_flag=True,
              help="Also train through the in-memory path (no --memory) and compare the ARPA files byte for byte.")
@click.option("--no-ppl", "no_ppl", is_flag=True, help="Skip the import-arpa + ppl runs.")
@click.option("--compat", type=click.Choice(["kenlm"]), default=None,
              help="ngramlm train --compat kenlm (lmplz's conventions) in every ngramlm build; with --kenlm-bin the "
                   "test perplexity of both ARPA files is compared.")
@click.option("--work", type=click.Path(file_okay=False), default="/tmp/ngramlm-scale", show_default=True)
@click.option("--repeat", type=int, default=1, show_default=True,
              help="Run each ngramlm and lmplz build this many times: the fastest wall time, the largest peak RSS "
                   "(lmplz's own time varies by 20 % from run to run here).")
@click.option("--discard", is_flag=True,
              help="Write both models to /dev/null (ours through NAME.arpa -> /dev/null, lmplz's stdout): for sizes "
                   "whose two ARPA files would not fit the disk beside the temp files; no sha256 then.")
@click.option("--json", "json_out", type=click.Path(dir_okay=False), default=None)
def main(kenlm_bin, sizes, dask_sizes, dask_workers, no_local, memory, order, estimation, in_memory, no_ppl, compat,
         work, repeat, discard, json_out):
    work = Path(work)
    work.mkdir(parents=True, exist_ok=True)
    tmp = work / "tmp"
    tmp.mkdir(exist_ok=True)
    dask_set = {float(x) for x in dask_sizes.split(",") if x}
    test = test_text(work)
    rows = []
    for m in [float(x) for x in sizes.split(",")]:
        corpus = make_corpus(work, m)
        n_tok = m * 1e6
        row = {"million_tokens": m, "file_mb": corpus.stat().st_size / 2**20}
        out = work / "ours.arpa"
        if discard:  # an ARPA name (the format) that is the null device (no disk)
            out = work / "null.arpa"
            out.unlink(missing_ok=True)
            out.symlink_to(os.devnull)
        flags = ["--compat", compat] if compat else []
        cmd = NGRAMLM + ["train", corpus, "--order", str(order), "--discount-fallback", "--memory", memory, "-T", tmp,
                         "--estimation", estimation, *flags, "-o", out]
        row["ngramlm_s"], row["ngramlm_mb"] = best_of(1 if no_local else repeat, cmd)
        row["sha256"] = None if discard else _sha256(out)
        if in_memory:
            mem_out = work / "mem.arpa"
            row["in_memory_s"], row["in_memory_mb"] = run_once(
                NGRAMLM + ["train", corpus, "--order", str(order), "--discount-fallback", *flags, "-o", mem_out])
            row["same_arpa"] = _same_bytes(out, mem_out)
            mem_out.unlink()
        if not no_ppl:
            native = work / "ours.npz"
            run_once(NGRAMLM + ["import-arpa", out, native])
            row["ppl_load_score_s"], row["ppl_mb"] = run_once(NGRAMLM + ["ppl", native, test])
        if kenlm_bin:
            row["lmplz_s"], row["lmplz_mb"] = best_of(
                repeat, [Path(kenlm_bin) / "lmplz", "-o", str(order), "-S", memory, "-T", tmp, "--discount_fallback"],
                stdin=corpus, stdout=os.devnull if discard else work / "kenlm.arpa")
            row["ratio"] = row["ngramlm_s"] / row["lmplz_s"]
            if not discard:  # the same test text scored by both files (through ngramlm ppl: the same reader)
                row["test_ppl"], row["lmplz_test_ppl"] = _ppl(out, test), _ppl(work / "kenlm.arpa", test)
                row["ppl_rel_diff"] = row["test_ppl"] / row["lmplz_test_ppl"] - 1.0
        if m in dask_set:
            row["dask"] = []
            for n in [int(x) for x in dask_workers.split(",") if x]:
                d = dask_build(cmd[:-1] + [work / "dask.arpa"], n, memory, work / "dask.arpa")
                d["same_as_local"] = d["sha256"] == row["sha256"]
                row["dask"].append(d)
                click.echo(json.dumps(d))
        row["us_per_token"] = row["ngramlm_s"] / n_tok * 1e6
        rows.append(row)
        click.echo(json.dumps(row))
        for f in ("ours.arpa", "kenlm.arpa", "dask.arpa"):
            (work / f).unlink(missing_ok=True)
    click.echo("\n| tokens | ngramlm --memory " + memory + " | in-memory path (same ARPA?) | lmplz -S " + memory +
               " | ratio | µs/token | dask (workers: wall / client RSS) | ppl (mmap load + score) |\n|---|---|---|---|---|---|---|---|")
    for r in rows:
        lm = f"{r['lmplz_s']:.1f} s / {r['lmplz_mb']:.0f} MB" if "lmplz_s" in r else "-"
        ratio = f"{r['ratio']:.2f}" if "ratio" in r else "-"
        dk = "; ".join(f"{d['workers']}: {d['wall_s']:.1f} s / client {d['client_mb']:.0f} MB"
                       for d in r.get("dask", [])) or "-"
        im = (f"{r['in_memory_s']:.1f} s / {r['in_memory_mb']:.0f} MB ({'same' if r['same_arpa'] else 'DIFFERENT'})"
              if "in_memory_s" in r else "-")
        ppl = f"{r['ppl_load_score_s']:.2f} s / {r['ppl_mb']:.0f} MB" if "ppl_mb" in r else "-"
        click.echo(f"| {r['million_tokens']:g} M | {r['ngramlm_s']:.1f} s / {r['ngramlm_mb']:.0f} MB | {im} | {lm} | "
                   f"{ratio} | {r['us_per_token']:.2f} | {dk} | {ppl} |")
    dask_rows = [(r["million_tokens"], d) for r in rows for d in r.get("dask", [])]
    if dask_rows:
        click.echo("\n| tokens | workers | wall | client peak RSS | workers' peak RSS | bytes sent by the workers "
                   "| sha256 (= local?) |\n|---|---|---|---|---|---|---|")
        for m, d in dask_rows:
            click.echo(f"| {m:g} M | {d['workers']} | {d['wall_s']:.1f} s | {d['client_mb']:.0f} MB | "
                       f"{', '.join(f'{x:.0f}' for x in d['worker_mb'])} MB | "
                       f"{d['bytes_between_workers'] / 2**20:.0f} MB"
                       f" | {d['sha256'][:12]} ({'same' if d['same_as_local'] else 'DIFFERENT'}) |")
    ppl_rows = [r for r in rows if "test_ppl" in r]
    if ppl_rows:
        click.echo(f"\n| tokens | test ppl, ours{' --compat ' + compat if compat else ''} | lmplz | relative |\n|---|---|---|---|")
        for r in ppl_rows:
            click.echo(f"| {r['million_tokens']:g} M | {r['test_ppl']:.7f} | {r['lmplz_test_ppl']:.7f} | "
                       f"{r['ppl_rel_diff']:+.1e} |")
    if json_out:
        Path(json_out).write_text(json.dumps({"memory": memory, "order": order, "estimation": estimation,
                                              "compat": compat,
                                              "repeat": repeat,
                                              "rows": rows}, indent=1))


def _ppl(model: Path, test: Path) -> float:
    """The test text's perplexity under an ARPA file (``ngramlm ppl --json``)."""
    out = subprocess.run(NGRAMLM + ["ppl", str(model), str(test), "--json"], capture_output=True, text=True,
                         check=True, cwd=ROOT)
    return float(json.loads(out.stdout)["ppl"])


def _sha256(path: Path) -> str:
    import hashlib

    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def _worker_stats(dask_worker) -> tuple:
    """(peak RSS MB, bytes sent to other workers) of a worker process, run on it by ``client.run``."""
    import resource

    return (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
            int(getattr(dask_worker, "transfer_outgoing_bytes_total", 0)))


def dask_build(cmd: list, n_workers: int, memory: str, out: Path) -> dict:
    """``cmd`` (an ``ngramlm train`` without --dask) as the client of a fresh cluster: a ``dask scheduler``
    and ``n_workers`` ``dask worker`` processes on 127.0.0.1, each with ``memory`` as its limit."""
    import socket
    import time

    from distributed import Client

    from ngramlm.builder.streaming import parse_memory

    with socket.socket() as sk:
        sk.bind(("127.0.0.1", 0))
        port = sk.getsockname()[1]
    addr = f"tcp://127.0.0.1:{port}"
    dask_bin = str(Path(sys.executable).with_name("dask"))
    quiet = dict(stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, cwd=ROOT)
    procs = [subprocess.Popen([dask_bin, "scheduler", "--host", "127.0.0.1", "--port", str(port), "--no-dashboard"],
                              **quiet)]
    try:
        procs += [subprocess.Popen([dask_bin, "worker", addr, "--nthreads", "1", "--no-dashboard",
                                    "--host", "127.0.0.1", "--memory-limit", str(parse_memory(memory))], **quiet)
                  for _ in range(n_workers)]
        with Client(addr, timeout="30s") as c:
            c.wait_for_workers(n_workers, timeout=120)
        time.sleep(1.0)
        wall, client_mb = run_once(cmd + ["--dask", addr])
        with Client(addr, timeout="30s") as c:
            stats = list(c.run(_worker_stats).values())
        return {"workers": n_workers, "wall_s": wall, "client_mb": client_mb, "worker_mb": [s[0] for s in stats],
                "bytes_between_workers": sum(s[1] for s in stats), "sha256": _sha256(out)}
    finally:
        for p in procs:
            p.kill()
            p.wait()


def best_of(repeat: int, cmd: list, **kw) -> tuple:
    """(fastest wall seconds, largest peak RSS MB) of ``repeat`` runs, each its own process."""
    runs = [run_once(cmd, **kw) for _ in range(max(1, repeat))]
    return min(s for s, _ in runs), max(mb for _, mb in runs)


def _same_bytes(a: Path, b: Path) -> bool:
    """Whether two files hold the same bytes (compared a megabyte at a time)."""
    if a.stat().st_size != b.stat().st_size:
        return False
    with open(a, "rb") as fa, open(b, "rb") as fb:
        while True:
            x, y = fa.read(1 << 20), fb.read(1 << 20)
            if x != y:
                return False
            if not x:
                return True


if __name__ == "__main__":
    main()
