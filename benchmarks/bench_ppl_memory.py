"""``ngramlm ppl`` on an ARPA file against KenLM's ``query`` on the same file and text (issue 35).

    python benchmarks/bench_ppl_memory.py --kenlm-bin DIR [--arpa FILE] [--text FILE] [--repeat N]
                                          [--root CHECKOUT] [--json FILE]

Each run is a fresh child process, ``query`` and ours alternated, after one unmeasured run of each
(so both read the files from the page cache): ``query ARPA < TEXT > /dev/null`` and
``python cli.py ppl ARPA TEXT``.  It prints, for each, the wall seconds (median of --repeat runs, and
every run) and the peak RSS (the child's own ``ru_maxrss``, from ``os.wait4``), then ours / query for
both.  The issue's goal: peak RSS at most 1.5x query's at no more than its wall time.

Without --arpa the PTB 5-gram (MKN) is trained into a temporary ARPA file by ``cli.py train`` (the
corpora: NGRAMLM_DATA_DIR, else ../shared/corpora); without --text the PTB test split is scored.
``--root`` runs ``cli.py`` of another checkout (e.g. one at the commit before a change) with this
Python, for a before/after comparison.  The load average is printed before and after: the runs are
only comparable on an otherwise idle machine.

This script imports nothing but the standard library and forks its children small: Linux counts the
parent's resident memory at the fork into a child's ``ru_maxrss``, so a parent holding more than the
children's peak would hide it (its own RSS is printed for that reason).
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DATA_DIR = Path(os.environ.get("NGRAMLM_DATA_DIR", str(ROOT.parent / "shared" / "corpora")))


def run_child(cmd: list, stdin_path: str | None = None, cwd: str | None = None) -> dict:
    """Run ``cmd`` to the end: its wall seconds, peak RSS (MB), exit status and the tail of its stderr."""
    stdin = open(stdin_path, "rb") if stdin_path else subprocess.DEVNULL
    with tempfile.TemporaryFile() as err:
        try:
            t0 = time.perf_counter()
            proc = subprocess.Popen(cmd, stdin=stdin, stdout=subprocess.DEVNULL, stderr=err, cwd=cwd)
            _, status, usage = os.wait4(proc.pid, 0)
            wall = time.perf_counter() - t0
            proc.returncode = os.waitstatus_to_exitcode(status)
        finally:
            if stdin_path:
                stdin.close()
        err.seek(0)
        tail = err.read()[-2000:].decode("utf-8", "replace")
    return {"wall_s": wall, "peak_rss_mb": usage.ru_maxrss / 1024, "rc": proc.returncode, "stderr": tail}


def self_rss_mb() -> float:
    with open("/proc/self/status") as fh:
        return next(int(line.split()[1]) for line in fh if line.startswith("VmRSS")) / 1024


def build_arpa(path: Path, root: Path) -> None:
    cmd = [sys.executable, str(root / "cli.py"), "train", "ptb", "--data-dir", str(DATA_DIR), "--order", "5",
           "-o", str(path)]
    print("building the PTB 5-gram:", " ".join(cmd), flush=True)
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)


def summary(runs: list) -> dict:
    walls = [r["wall_s"] for r in runs]
    rss = [r["peak_rss_mb"] for r in runs]
    return {"wall_median_s": statistics.median(walls), "walls_s": walls,
            "peak_rss_max_mb": max(rss), "peak_rss_median_mb": statistics.median(rss), "peak_rss_mb": rss}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--kenlm-bin", required=True, help="the folder holding KenLM's query (e.g. kenlm/build/bin)")
    ap.add_argument("--arpa", help="the ARPA file (default: the PTB 5-gram, trained here)")
    ap.add_argument("--text", help="the text to score (default: the PTB test split)")
    ap.add_argument("--repeat", type=int, default=3, help="measured runs of each (default 3)")
    ap.add_argument("--root", default=str(ROOT), help="the checkout whose cli.py runs (default: this one)")
    ap.add_argument("--json", help="also write the results to this JSON file")
    args = ap.parse_args(argv)

    query = Path(args.kenlm_bin) / "query"
    if not os.access(query, os.X_OK):
        ap.error(f"no KenLM query at {query}: build it (cmake .. && make query) and pass its folder")
    root = Path(args.root).resolve()
    text = args.text or str(DATA_DIR / "ptb" / "ptb.test.txt")
    if not Path(text).is_file():
        ap.error(f"no text at {text}: pass --text, or set NGRAMLM_DATA_DIR to the corpora")
    with tempfile.TemporaryDirectory() as tmp:
        arpa = args.arpa
        if arpa is None:
            arpa = str(Path(tmp) / "ptb5.arpa")
            build_arpa(Path(arpa), root)
        cmds = {"query": ([str(query), arpa], text),
                "ngramlm": ([sys.executable, str(root / "cli.py"), "ppl", arpa, text], None)}
        load_before = os.getloadavg()
        parent_rss = self_rss_mb()
        for name, (cmd, stdin) in cmds.items():  # warm-up: the files into the page cache
            r = run_child(cmd, stdin, cwd=str(root))
            if r["rc"] != 0:
                print(f"{name} failed (exit {r['rc']}):\n{r['stderr']}", file=sys.stderr)
                return 1
        runs = {name: [] for name in cmds}
        for i in range(args.repeat):
            order = list(cmds) if i % 2 == 0 else list(cmds)[::-1]  # alternated
            for name in order:
                cmd, stdin = cmds[name]
                r = run_child(cmd, stdin, cwd=str(root))
                if r["rc"] != 0:
                    print(f"{name} failed (exit {r['rc']}):\n{r['stderr']}", file=sys.stderr)
                    return 1
                runs[name].append(r)
        load_after = os.getloadavg()

    res = {name: summary(rs) for name, rs in runs.items()}
    q, o = res["query"], res["ngramlm"]
    ratios = {"wall": o["wall_median_s"] / q["wall_median_s"], "peak_rss": o["peak_rss_max_mb"] / q["peak_rss_max_mb"]}
    print(f"ARPA {arpa} ({os.path.getsize(arpa) / 2**20:.1f} MB), text {text}, {args.repeat} runs each, alternated")
    print(f"load average before {load_before[0]:.2f}, after {load_after[0]:.2f} (1 min); "
          f"{os.cpu_count()} CPUs; this script's own RSS {parent_rss:.1f} MB")
    print(f"{'':10s} {'wall median':>12s}  {'walls':24s} {'peak RSS (max)':>15s}")
    for name, s in res.items():
        walls = " ".join(f"{w:.2f}" for w in s["walls_s"])
        print(f"{name:10s} {s['wall_median_s']:10.2f} s  {walls:24s} {s['peak_rss_max_mb']:12.1f} MB")
    print(f"ngramlm / query: wall {ratios['wall']:.2f}x, peak RSS {ratios['peak_rss']:.2f}x "
          f"(goal: <= 1.0x and <= 1.5x)")
    if args.json:
        out = {"arpa": arpa, "text": text, "repeat": args.repeat, "root": str(root),
               "load_average": [load_before, load_after], "results": res, "ratios": ratios}
        Path(args.json).write_text(json.dumps(out, indent=2) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
