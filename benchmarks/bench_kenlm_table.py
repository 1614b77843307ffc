"""The KenLM-ecosystem table: ngramlm's command line against KenLM's binaries, same files, same run.

    python benchmarks/bench_kenlm_table.py --kenlm-bin ~/kenlm/build/bin [--repeats 3] [--json out.json]

KenLM is not a dependency: build ``lmplz``, ``query`` and ``build_binary`` from its source outside
this project (docs/kenlm.md says how) and pass their folder.  Every job runs as its own process,
one at a time, timed by wall clock, with its peak resident memory (``ru_maxrss`` of the child);
the best of ``--repeats`` runs is reported.  Jobs (PTB from NGRAMLM_DATA_DIR or ../shared/corpora):

1. ``ppl`` on the PTB MKN 5-gram ARPA file (load + score the 82,430 test tokens) vs ``query``;
2. writing that ARPA file (``export-arpa`` of the native model) vs lmplz's whole build;
3. importing a 5-gram ARPA of a WikiText-2-sized text (~2 M tokens: PTB's three splits, the
   Time Machine's words and Hong Lou Meng's characters, built by lmplz) vs ``build_binary``.
"""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import click

ROOT = Path(__file__).resolve().parents[1]
DATA_DIR = Path(os.environ.get("NGRAMLM_DATA_DIR", ROOT.parent / "shared" / "corpora"))
NGRAMLM = [sys.executable, "-m", "cli"]  # the console script without relying on PATH


def run_once(cmd: list, stdin=None, stdout=subprocess.DEVNULL) -> tuple:
    """(wall seconds, peak RSS MB) of one child process (RUSAGE_CHILDREN is read in a fresh helper
    process, so earlier children never inflate the number)."""
    helper = ("import resource, subprocess, sys, time, json\n"
              "cmd = json.loads(sys.argv[1]); fi = sys.argv[2] or None; fo = sys.argv[3] or None\n"
              "i = open(fi, 'rb') if fi else None; o = open(fo, 'wb') if fo else subprocess.DEVNULL\n"
              "t = time.perf_counter(); r = subprocess.run(cmd, stdin=i, stdout=o, stderr=subprocess.PIPE)\n"
              "dt = time.perf_counter() - t\n"
              "if r.returncode: sys.stderr.buffer.write(r.stderr); sys.exit(r.returncode)\n"
              "print(dt, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024)\n")
    out = subprocess.run([sys.executable, "-c", helper, json.dumps([str(c) for c in cmd]),
                          str(stdin or ""), str(stdout) if stdout is not subprocess.DEVNULL else ""],
                         capture_output=True, text=True, cwd=ROOT)
    if out.returncode:
        raise click.ClickException(f"{' '.join(map(str, cmd))} failed:\n{out.stderr[-2000:]}")
    wall, rss = out.stdout.split()
    return float(wall), float(rss)


def best(cmd: list, repeats: int, **kw) -> tuple:
    runs = [run_once(cmd, **kw) for _ in range(repeats)]
    return min(r[0] for r in runs), min(r[1] for r in runs), runs


@click.command()
@click.option("--kenlm-bin", type=click.Path(exists=True, file_okay=False), required=True,
              help="Folder with KenLM's lmplz, query and build_binary.")
@click.option("--repeats", type=int, default=3, show_default=True)
@click.option("--json", "json_out", type=click.Path(dir_okay=False), default=None, help="Also write the rows here.")
def main(kenlm_bin, repeats, json_out):
    from ngramlm import accel

    kb = Path(kenlm_bin)
    ptb = DATA_DIR / "ptb"
    work = Path(tempfile.mkdtemp(prefix="bench_kenlm_"))
    click.echo(f"query-side implementation: {accel.describe()}; work folder {work}")
    try:
        native, arpa = work / "ptb5.npz", work / "ptb5.arpa"
        subprocess.run(NGRAMLM + ["train", str(ptb / "ptb.train.txt"), "--order", "5", "-o", str(native)],
                       check=True, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        rows = []

        def row(job, ours, theirs, note=""):
            rows.append({"job": job, "ngramlm_s": ours[0], "ngramlm_mb": ours[1], "kenlm_s": theirs[0],
                         "kenlm_mb": theirs[1], "ratio": ours[0] / theirs[0], "note": note,
                         "runs_ngramlm": ours[2], "runs_kenlm": theirs[2]})
            click.echo(f"  {job}: ngramlm {ours[0]:.2f} s {ours[1]:.0f} MB | KenLM {theirs[0]:.2f} s "
                       f"{theirs[1]:.0f} MB | {ours[0] / theirs[0]:.2f}x")

        w = best(NGRAMLM + ["export-arpa", native, arpa], repeats)
        # PTB spells its unknown word <unk>, which lmplz refuses unless told to drop it.
        lm = best([kb / "lmplz", "-o", "5", "-S", "20%", "-T", work, "--skip_symbols"], repeats, stdin=ptb / "ptb.train.txt",
                  stdout=work / "kenlm5.arpa")
        row("write the PTB 5-gram ARPA (export-arpa vs all of lmplz)", w, lm)
        test = ptb / "ptb.test.txt"
        p = best(NGRAMLM + ["ppl", arpa, test], repeats)
        q = best([kb / "query", arpa], repeats, stdin=test)
        row("ppl on the ARPA file (load + score the test set) vs query", p, q)
        # The WikiText-2-sized text, built by lmplz: a foreign ARPA file, as users bring them.
        big_txt, big_arpa = work / "wt2size.txt", work / "wt2size.arpa"
        with open(big_txt, "w", encoding="utf-8") as fh:
            for split in ("train", "valid", "test"):
                fh.write((ptb / f"ptb.{split}.txt").read_text(encoding="utf-8"))
            fh.write((DATA_DIR / "timemachine" / "timemachine.txt").read_text(encoding="utf-8"))
            for line in (DATA_DIR / "hongloumeng" / "hongloumeng.txt").read_text(encoding="utf-8").splitlines():
                fh.write(" ".join(ch for ch in line if not ch.isspace()) + "\n")
        n_tokens = sum(len(ln.split()) for ln in open(big_txt, encoding="utf-8"))
        run_once([kb / "lmplz", "-o", "5", "-S", "20%", "-T", work, "--skip_symbols"], stdin=big_txt, stdout=big_arpa)
        i = best(NGRAMLM + ["import-arpa", big_arpa, work / "wt2size.npz"], repeats)
        b = best([kb / "build_binary", big_arpa, work / "wt2size.binary"], repeats)
        mb = big_arpa.stat().st_size / 2**20
        row(f"import a {n_tokens / 1e6:.1f} M-token 5-gram ARPA ({mb:.0f} MB) vs build_binary", i, b)
        click.echo("\n| job | ngramlm | KenLM | ratio |\n|---|---|---|---|")
        for r in rows:
            click.echo(f"| {r['job']} | {r['ngramlm_s']:.2f} s, {r['ngramlm_mb']:.0f} MB | {r['kenlm_s']:.2f} s, "
                       f"{r['kenlm_mb']:.0f} MB | {r['ratio']:.2f}x |")
        if json_out:
            Path(json_out).write_text(json.dumps({"implementation": accel.describe(), "repeats": repeats,
                                                  "rows": rows}, indent=1))
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
