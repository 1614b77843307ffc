"""Learned subword tokenizers on PTB train: encoding speed on one core, the library against the toolkit.

    NGRAMLM_DATA_DIR=../shared/corpora .venv/bin/python benchmarks/bench_tokenize.py [--kinds bpe:8000,unigram:8000]
           [--repeats 3] [--cpu N] [--json out.json]

Each kind is fitted on PTB train (``ptb.train.txt``, 887,521 words in 42,068 lines, read as the readers
read it), then PTB train is encoded two ways, each time by a freshly built tokenizer (so the toolkit's
word tables start empty, as on a real first pass over a corpus):

(a) ``library``: the library's plain batch encoder on each line's text, its pieces turned into Python
    strings -- ``[e.tokens for e in tk.encode_batch([" ".join(line.split()) ...])]``, the toolkit's path
    before it encoded word types;
(b) ``encode_lines``: the toolkit's :meth:`~corpora.tokenize.Tokenizer.encode_lines` (each distinct word
    encoded once, lines built from that table) -- its output is checked to be identical to (a).

Tokens are the pieces produced (per second, best of ``--repeats``), by wall clock and by this process's
CPU time -- the two differ when other work shares the machine.  "One core": the process is pinned to
one CPU (``os.sched_setaffinity``) and the library's thread pool is held to one thread
(``RAYON_NUM_THREADS=1``, ``TOKENIZERS_PARALLELISM=false``), both set before ``tokenizers`` is
imported; the output says which of these took effect.  A last line per kind gives (b) again on a
tokenizer that has already seen the text (its tables full), the steady state of a long run.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def one_core(cpu) -> list:
    """Hold this process to one core before the library starts its thread pool; returns what was done."""
    done = []
    for var, value in (("RAYON_NUM_THREADS", "1"), ("TOKENIZERS_PARALLELISM", "false")):
        if var in os.environ and os.environ[var] != value:
            done.append(f"{var}={os.environ[var]} (left as set by the caller)")
        else:
            os.environ[var] = value
            done.append(f"{var}={value}")
    if "tokenizers" in sys.modules:
        done.append("tokenizers was imported first: its thread pool may be larger")
    if hasattr(os, "sched_setaffinity"):
        allowed = sorted(os.sched_getaffinity(0))
        pin = allowed[0] if cpu is None else cpu
        os.sched_setaffinity(0, {pin})
        done.append(f"pinned to CPU {pin} (of {len(allowed)} allowed)")
    else:
        done.append("not pinned (no sched_setaffinity here)")
    return done


def timed(fn, repeats: int) -> tuple:
    """(best wall s, best CPU s, the last result) of ``fn()`` over ``repeats`` runs."""
    walls, cpus, out = [], [], None
    for _ in range(repeats):
        out = None  # the last run's lists are freed before the next run allocates its own
        w, c = time.perf_counter(), time.process_time()
        out = fn()
        walls.append(time.perf_counter() - w)
        cpus.append(time.process_time() - c)
    return min(walls), min(cpus), out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--kinds", default="bpe:8000,unigram:8000", help="learned tokenizers, comma-separated")
    ap.add_argument("--repeats", type=int, default=3, help="encodings to time per path (best is reported)")
    ap.add_argument("--cpu", type=int, default=None, help="the CPU to pin to (default: the first allowed)")
    ap.add_argument("--json", default=None, help="also write the rows here")
    args = ap.parse_args()
    setup = one_core(args.cpu)

    sys.path.insert(0, str(ROOT))
    from corpora.corpus import read_lines
    from corpora.tokenize import make_tokenizer, spec_from_text

    data = Path(os.environ.get("NGRAMLM_DATA_DIR", ROOT.parent / "shared" / "corpora"))
    train = data / "ptb" / "ptb.train.txt"
    if not train.exists():
        sys.exit(f"PTB train not found at {train} (set NGRAMLM_DATA_DIR)")
    lines = read_lines(train)
    words = sum(len(line.split()) for line in lines)
    print(f"one core: {'; '.join(setup)}")
    print(f"PTB train: {len(lines):,} lines, {words:,} words; best of {args.repeats}")

    rows = []
    for kind in args.kinds.split(","):
        t = time.perf_counter()
        spec = make_tokenizer(spec_from_text(kind)).fit(lines).spec
        fit_s = time.perf_counter() - t

        # Every timed run gets its own tokenizer, built outside the timer: the library's BPE keeps a cache
        # of the words it met, and the toolkit its word tables -- a first pass over the text has neither.
        fresh = [make_tokenizer(spec) for _ in range(args.repeats)]

        def library():
            tk = fresh.pop()._tk  # the library's own trained tokenizer, as the spec carries it
            encoded = tk.encode_batch([" ".join(line.split()) for line in lines], add_special_tokens=False)
            return [e.tokens for e in encoded]

        def toolkit():
            return fresh.pop().encode_lines(lines)

        lib_wall, lib_cpu, ref = timed(library, args.repeats)
        fresh = [make_tokenizer(spec) for _ in range(args.repeats)]
        ours_wall, ours_cpu, got = timed(toolkit, args.repeats)
        warm = make_tokenizer(spec)
        warm.encode_lines(lines)
        warm_wall, warm_cpu, again = timed(lambda: warm.encode_lines(lines), args.repeats)
        pieces = sum(map(len, ref))
        same = got == ref and again == ref
        del ref, got, again
        row = {"kind": kind, "pieces_learned": make_tokenizer(spec).pieces(), "fit_s": fit_s, "tokens": pieces,
               "words": words, "identical": same,
               "library_tok_s": pieces / lib_wall, "library_tok_cpu_s": pieces / lib_cpu,
               "encode_lines_tok_s": pieces / ours_wall, "encode_lines_tok_cpu_s": pieces / ours_cpu,
               "encode_lines_warm_tok_s": pieces / warm_wall, "encode_lines_warm_tok_cpu_s": pieces / warm_cpu,
               "ratio": lib_wall / ours_wall, "ratio_cpu": lib_cpu / ours_cpu}
        rows.append(row)
        print(f"{kind}: {row['pieces_learned']:,} pieces learned in {fit_s:.1f} s; PTB train is {pieces:,} tokens "
              f"({pieces / words:.3f} per word); encode_lines identical to the library: {'yes' if same else 'NO'}")
        print(f"  (a) library encode_batch + strings  {row['library_tok_s'] / 1e6:6.2f} M tokens/s wall "
              f"({lib_wall:.3f} s)  {row['library_tok_cpu_s'] / 1e6:6.2f} M/s CPU ({lib_cpu:.3f} s)")
        print(f"  (b) encode_lines                    {row['encode_lines_tok_s'] / 1e6:6.2f} M tokens/s wall "
              f"({ours_wall:.3f} s)  {row['encode_lines_tok_cpu_s'] / 1e6:6.2f} M/s CPU ({ours_cpu:.3f} s)")
        print(f"      ratio (b)/(a)                   {row['ratio']:6.2f}x wall  {row['ratio_cpu']:6.2f}x CPU")
        print(f"      encode_lines, tables full       {row['encode_lines_warm_tok_s'] / 1e6:6.2f} M tokens/s wall "
              f"({warm_wall:.3f} s)  {row['encode_lines_warm_tok_cpu_s'] / 1e6:6.2f} M/s CPU ({warm_cpu:.3f} s)")
        if not same:
            sys.exit("encode_lines differs from the library's encoding")
    if args.json:
        Path(args.json).write_text(json.dumps({"one_core": setup, "lines": len(lines), "rows": rows}, indent=2))


if __name__ == "__main__":
    main()
