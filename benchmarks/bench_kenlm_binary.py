"""KenLM binary files: ngramlm against KenLM (``build_binary``, the ``kenlm`` module) on the same files.

    python benchmarks/bench_kenlm_binary.py [--arpa FILE] [--text FILE] [--kenlm-bin DIR] [--out FILE.json]

Without --arpa it builds the PTB MKN 5-gram (NGRAMLM_DATA_DIR or ../shared/corpora).  It prints:

* writing: ``build_binary`` (KenLM built from source; --kenlm-bin or PATH) and ``ngramlm
  build-binary`` on the same ARPA, wall seconds (medians of --repeat runs), and whether the two files
  are byte-identical;
* loading + scoring the test text in fresh processes (medians of --repeat), so peak RSS is the
  file's own: the kenlm module (``Model`` and its ``score`` per sentence); ``ngramlm.kenlm``, its
  stand-in, in the same loop; and the toolkit's whole-text path (``load_any`` + ``encode`` +
  ``token_scores``, what ``ngramlm ppl`` runs): wall and peak RSS, the largest per-token difference,
  and apart from load + score the import of each library;
* the ``BaseScore`` loop a beam-search decoder runs, microseconds per call, ours / kenlm (medians).

Without build_binary the binaries are written by ngramlm alone and the comparison rows say so.
"""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import click

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
DATA_DIR = os.environ.get("NGRAMLM_DATA_DIR", str(ROOT.parent / "shared" / "corpora"))

VARIANTS = [("probing", []), ("trie", []), ("trie", ["-q", "8", "-b", "8", "-a", "22"])]

_LOAD_SCORE = r"""
import json, sys, time
sys.path.insert(0, {root!r})
which, path, text = sys.argv[1:4]
lines = [l.strip() for l in open(text, encoding="utf-8")]


def rss(field):  # VmHWM, not ru_maxrss: Linux carries a forked parent's peak into ru_maxrss across exec
    return next(int(l.split()[1]) for l in open("/proc/self/status") if l.startswith(field)) / 1024


t0 = time.perf_counter()
if which == "kenlm":
    import kenlm
elif which == "ngramlm.kenlm":  # the stand-in: the same API, the same loop
    import ngramlm.kenlm as kenlm
else:
    from ngramlm.loading import load_any
t1 = time.perf_counter()
rss_import = rss("VmRSS")
if which in ("kenlm", "ngramlm.kenlm"):
    m = kenlm.Model(path)
    t2 = time.perf_counter()
    total = sum(m.score(l) for l in lines)
else:
    lm = load_any(path)
    t2 = time.perf_counter()
    enc, oov = lm.encode([l.split() for l in lines])
    total = float(lm.token_scores(enc, oov=oov).log10_prob.sum())
t3 = time.perf_counter()
print(json.dumps({{"import": t1 - t0, "load": t2 - t1, "score": t3 - t2, "total": total, "rss_mb": rss("VmHWM"),
                  "rss_import_mb": rss_import}}))
"""


def _fresh(path: str, text: str, repeat: int) -> tuple:
    """Load + score in ``repeat`` fresh processes each for the kenlm module, its stand-in
    ``ngramlm.kenlm`` and the toolkit's whole-text path, alternated: per way the median of each time
    and the largest peak RSS."""
    runs = {"ngramlm.kenlm": [], "ngramlm": [], "kenlm": []}
    for _ in range(repeat):
        for which in runs:
            out = subprocess.run([sys.executable, "-c", _LOAD_SCORE.format(root=str(ROOT)), which, path, text],
                                 capture_output=True, text=True, check=True)
            runs[which].append(json.loads(out.stdout.strip().splitlines()[-1]))
    res = []
    for which in ("ngramlm.kenlm", "ngramlm", "kenlm"):
        rs = runs[which]
        med = {k: float(sorted(r[k] for r in rs)[len(rs) // 2]) for k in ("import", "load", "score")}
        res.append({**med, "total": rs[0]["total"], "rss_mb": max(r["rss_mb"] for r in rs),
                    "model_mb": max(r["rss_mb"] - r["rss_import_mb"] for r in rs)})
    return tuple(res)


def _median_walls(cmds: list, repeat: int) -> list:
    """Median wall-clock seconds of ``repeat`` runs of each command, the commands alternated run by run
    (this machine moves 20-30 % from one run to the next: a slow spell then hits every command)."""
    times = [[] for _ in cmds]
    for _ in range(repeat):
        for i, cmd in enumerate(cmds):
            t = time.perf_counter()
            subprocess.run(cmd, check=True, capture_output=True)
            times[i].append(time.perf_counter() - t)
    return [sorted(ts)[len(ts) // 2] for ts in times]


def _base_score_loop(model, state_cls, words) -> float:
    a, b = state_cls(), state_cls()
    model.BeginSentenceWrite(a)
    t = time.perf_counter()
    for w in words:
        model.BaseScore(a, w, b)
        a, b = b, a
    return (time.perf_counter() - t) / len(words) * 1e6


@click.command()
@click.option("--arpa", type=click.Path(exists=True, dir_okay=False), default=None)
@click.option("--text", type=click.Path(exists=True, dir_okay=False), default=None)
@click.option("--kenlm-bin", type=click.Path(file_okay=False), default=None,
              help="Folder with KenLM's build_binary (default: PATH).")
@click.option("--loop-words", type=int, default=200_000, show_default=True)
@click.option("--repeat", type=int, default=5, show_default=True,
              help="Runs per measurement of writing and of load + score, each a fresh process (medians reported).")
@click.option("--out", type=click.Path(dir_okay=False), default=None, help="Also write the numbers as JSON.")
def main(arpa, text, kenlm_bin, loop_words, repeat, out):
    import numpy as np

    import kenlm
    from ngramlm import Model, State

    tmp = Path(tempfile.mkdtemp(prefix="bench-kbin-"))
    if arpa is None:
        from corpora import load_corpus, prepare
        from ngramlm import NgramLM
        from ngramlm.io.arpa import write_arpa

        ds = prepare(load_corpus("ptb", data_dir=DATA_DIR))
        arpa = str(tmp / "ptb5.arpa")
        write_arpa(NgramLM(order=5, smoothing="mkn").fit(ds["train"], vocab=ds.vocab), arpa)
        text = text or str(Path(DATA_DIR) / "ptb" / "ptb.test.txt")
    bb = shutil.which("build_binary", path=kenlm_bin) if kenlm_bin else shutil.which("build_binary")
    results = {"arpa": os.path.basename(arpa), "build_binary": bool(bb), "rows": []}
    click.echo(f"ARPA {arpa}; text {text}; build_binary: {bb or 'not found (ngramlm-written files only)'}")
    words = " ".join(ln.strip() for ln in open(text, encoding="utf-8")).split()[:loop_words]
    lines = [ln.strip() for ln in open(text, encoding="utf-8")]
    for kind, flags in VARIANTS:
        name = kind + ("".join(flags).replace("-", "_") if flags else "")
        ours_path, ref_path = tmp / f"{name}.ours.bin", tmp / f"{name}.kenlm.bin"
        ours_cmd = [sys.executable, str(ROOT / "cli.py"), "build-binary", kind, *flags, arpa, str(ours_path)]
        walls = _median_walls([ours_cmd] + ([[bb, *flags, kind, arpa, str(ref_path)]] if bb else []), repeat)
        w_ours = walls[0]
        row = {"file": f"{kind} {' '.join(flags)}".strip(), "write_ours_s": w_ours,
               "bytes_ours": ours_path.stat().st_size}
        if bb:
            row["write_kenlm_s"] = walls[1]
            row["bytes_kenlm"] = ref_path.stat().st_size
            row["byte_identical"] = ours_path.read_bytes() == ref_path.read_bytes()
        else:
            ref_path = ours_path
        a, c, b = _fresh(str(ref_path), text, repeat)  # ngramlm.kenlm, ngramlm's whole text, kenlm
        row.update({"load_score_ours_s": a["load"] + a["score"], "load_score_kenlm_s": b["load"] + b["score"],
                    "import_ours_s": a["import"], "import_kenlm_s": b["import"],
                    "load_ours_s": a["load"], "load_kenlm_s": b["load"],
                    "score_ours_s": a["score"], "score_kenlm_s": b["score"],
                    "rss_ours_mb": a["rss_mb"], "rss_kenlm_mb": b["rss_mb"],
                    "model_rss_ours_mb": a["model_mb"], "model_rss_kenlm_mb": b["model_mb"],
                    "log10_total_ours": a["total"], "log10_total_kenlm": b["total"],
                    "whole_text": {"import_s": c["import"], "load_s": c["load"], "score_s": c["score"],
                                   "rss_mb": c["rss_mb"], "model_rss_mb": c["model_mb"], "log10_total": c["total"]}})
        import ngramlm.kenlm as light

        ours_m, light_m, ref_m = Model(str(ref_path)), light.Model(str(ref_path)), kenlm.Model(str(ref_path))
        diff = 0.0
        light_equal = True
        for ln in lines[:2000]:
            y = [s[0] for s in ref_m.full_scores(ln)]
            diff = max(diff, float(np.abs(np.array([s[0] for s in ours_m.full_scores(ln)]) - np.array(y)).max()))
            light_equal &= [s[0] for s in light_m.full_scores(ln)] == y and light_m.score(ln) == ref_m.score(ln)
        row["max_token_diff"] = diff
        row["light_equal_to_the_bit"] = light_equal
        loops = [(_base_score_loop(ours_m, State, words), _base_score_loop(light_m, light.State, words),
                  _base_score_loop(ref_m, kenlm.State, words))
                 for _ in range(repeat)]  # alternated, so a slow spell of the machine hits all
        row["base_score_us_ours"] = sorted(x[0] for x in loops)[repeat // 2]
        row["base_score_us_light"] = sorted(x[1] for x in loops)[repeat // 2]
        row["base_score_us_kenlm"] = sorted(x[2] for x in loops)[repeat // 2]
        results["rows"].append(row)
        click.echo(f"\n{row['file']}:")
        if bb:
            click.echo(f"  write   ours {w_ours:6.2f} s  build_binary {row['write_kenlm_s']:6.2f} s  "
                       f"ratio {w_ours / row['write_kenlm_s']:.2f}  byte-identical: {row['byte_identical']}"
                       f"  ({row['bytes_ours']:,} / {row['bytes_kenlm']:,} bytes)")
        else:
            click.echo(f"  write   ours {w_ours:6.2f} s  ({row['bytes_ours']:,} bytes)")
        click.echo(f"  load+score  ngramlm.kenlm {row['load_score_ours_s']:6.3f} s  kenlm {row['load_score_kenlm_s']:6.3f} s  "
                   f"ratio {row['load_score_ours_s'] / row['load_score_kenlm_s']:.2f}  (load {a['load']:.4f} / "
                   f"{b['load']:.4f} s, score {a['score']:.3f} / {b['score']:.3f} s; medians of {repeat})")
        click.echo(f"  peak RSS    ngramlm.kenlm {a['rss_mb']:6.1f} MB kenlm {b['rss_mb']:6.1f} MB ratio "
                   f"{a['rss_mb'] / b['rss_mb']:.2f}  (above the RSS after import: {a['model_mb']:.1f} / "
                   f"{b['model_mb']:.1f} MB)")
        click.echo(f"  import      ngramlm.kenlm {a['import']:6.3f} s  kenlm {b['import']:6.3f} s  (not in load+score)")
        click.echo(f"  whole text  ngramlm load_any + token_scores (ngramlm ppl's path): load+score "
                   f"{c['load'] + c['score']:6.3f} s ratio {(c['load'] + c['score']) / row['load_score_kenlm_s']:.2f}, "
                   f"peak RSS {c['rss_mb']:.1f} MB ratio {c['rss_mb'] / b['rss_mb']:.2f} (numpy and the toolkit: import "
                   f"{c['import']:.3f} s)")
        click.echo(f"  log10 total ngramlm.kenlm {a['total']:.4f} kenlm {b['total']:.4f}; every score and "
                   f"per-token value equal: {light_equal}; ngramlm.Model's largest per-token difference {diff:.2e}")
        click.echo(f"  BaseScore   ngramlm.Model {row['base_score_us_ours']:.3f} us  ngramlm.kenlm "
                   f"{row['base_score_us_light']:.3f} us  kenlm {row['base_score_us_kenlm']:.3f} us  ratios "
                   f"{row['base_score_us_ours'] / row['base_score_us_kenlm']:.2f} / "
                   f"{row['base_score_us_light'] / row['base_score_us_kenlm']:.2f}")
    if out:
        Path(out).write_text(json.dumps(results, indent=2))
    shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
