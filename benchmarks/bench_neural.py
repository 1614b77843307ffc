"""Benchmarks of the neural LMs on CPU: throughput against a plain PyTorch baseline, and perplexity in a time budget.

Sub-commands (``python benchmarks/bench_neural.py COMMAND --help``):

``peak``        the CPU's matmul peak (fp32 and bf16) with a big square product.
``throughput``  training tokens/s of our Trainer against a plain PyTorch LSTM loop of the
                same shape (Embedding -> LSTM -> Linear, SGD, batch 20 x 35), for a
                fixed number of batches; the ratio; achieved FLOP/s as a share of peak.
``train``       trains each model on PTB with a time budget (default 60 min per model)
                and reports wall time, tokens/s, valid and test perplexity.
``char``        a character-level run on The Time Machine; bits per character on the held-out tail.
``budget``      ``neural train --time-budget`` with CPU-bound jobs started beside it: used vs budget.
``labs``        each lab quiet, then beside CPU-bound jobs with the shared-cores thread rule on and off.

Perplexities come from the toolkit's full-pass evaluator (full softmax over the
``n_types`` predicted types, every token of the split scored once).
"""
from __future__ import annotations

import json
import os
import sys
import time
from dataclasses import replace
from pathlib import Path

import click
import numpy as np
import torch
from torch import nn

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from corpora import TokenizerSpec, load_corpus, prepare  # noqa: E402
from neural.checkpoint import load_model  # noqa: E402
from neural.config import (MODEL_PRESETS, TRAIN_PRESETS, architecture, RNNConfig, TrainConfig, TransformerConfig,  # noqa: E402
                           parse_override, sized)
from neural.evaluation import evaluate  # noqa: E402
from neural.models import build_model  # noqa: E402
from neural.training.trainer import Trainer  # noqa: E402

DATA_DIR = os.environ.get("NGRAMLM_DATA_DIR", str(Path(__file__).resolve().parents[2] / "shared" / "corpora"))

# The models the `train` benchmark runs: neural.config's "default" presets (word_language_model's
# "2 x 200, tied, dropout 0.2" shape: 110.44 test ppl after 6 epochs there, for the GRU and the RNNs;
# the LSTM's own 2 x 300 / 0.35, which won the CPU hour; the 4 x 256 Transformer),
# trained with bf16 where this CPU has native kernels (the trainer probes and falls back to fp32),
# no early stop (the budget ends the run).  ~7,800 tokens/s with bf16 on 2 cores -> ~2 min per PTB epoch.
# A measured 2 x 400 / dropout 0.5 run was at 208 valid ppl after its first epoch (3.3 min): too slow.
def _rnn(cell: str, **train) -> tuple:
    return ("rnn", sized(MODEL_PRESETS["default"]["rnn"], 0, cell=cell, **architecture(cell).preset("default")).to_dict(),
            replace(TRAIN_PRESETS["rnn"], bf16=True, patience=0, **train).to_dict())


PRESETS = {
    "lstm": _rnn("lstm"),
    "gru": _rnn("gru"),
    # Vanilla RNNs diverge at lr 20 (measured: ppl > 10^6 after 150 batches); lr 2 learns.
    "rnn_tanh": _rnn("rnn_tanh", lr=2.0),
    "rnn_relu": _rnn("rnn_relu", lr=2.0),
    # AWD-LSTM's regularisers on a CPU budget (neural.regularize): 2 x 256 tied, locked dropout, embedding
    # dropout, DropConnect on the recurrent weights, AR/TAR, and weight averaging from 60 % of the budget.
    "lstm_reg": ("rnn", sized(MODEL_PRESETS["default"]["rnn"], 0, cell="lstm", emb_size=256, hidden_size=256,
                              locked_dropout=True, dropout=0.3, dropout_in=0.3, emb_dropout=0.05,
                              weight_drop=0.2).to_dict(),
                 replace(TRAIN_PRESETS["rnn"], bf16=True, patience=0, ar=2.0, tar=1.0, average="nt",
                         average_after=0.6).to_dict()),
    "transformer": ("transformer", MODEL_PRESETS["default"]["transformer"].to_dict(),
                    replace(TRAIN_PRESETS["transformer"], warmup_steps=200, bf16=True, patience=0).to_dict()),
}


def flops_per_token(kind: str, cfg: dict, n_types: int) -> float:
    """Multiply-adds x 2 of one forward token; training counts 3x (forward + backward for inputs and weights)."""
    if kind == "rnn":
        gates = {"lstm": 4, "gru": 3}.get(cfg["cell"], 1)
        h, d, L = cfg["hidden_size"], cfg["emb_size"], cfg["n_layers"]
        rec = sum(2 * gates * h * ((d if k == 0 else h) + h) for k in range(L))
        return rec + 2 * h * n_types
    d, L, ff, T = cfg["d_model"], cfg["n_layers"], cfg["d_ff"], cfg["block_size"]
    per_layer = 2 * (3 * d * d + d * d + 2 * d * ff) + 2 * 2 * d * T / 2  # projections, FFN, attention (avg causal span)
    return L * per_layer + 2 * d * n_types


def _matmul_rate(n: int, dt, reps: int, *, limit_s: float = float("inf")) -> float:
    """FLOP/s of an n x n product in ``dt``; stops early once ``limit_s`` has passed (at least one rep)."""
    a, b = torch.randn(n, n, dtype=dt), torch.randn(n, n, dtype=dt)
    a @ b  # warm-up
    t0 = time.perf_counter()
    done = 0
    while done < reps:
        a @ b
        done += 1
        if time.perf_counter() - t0 > limit_s:
            break
    return 2 * n ** 3 * done / (time.perf_counter() - t0)


def measure_peak(threads: int, n: int = 2048, reps: int = 10, *, want_bf16: bool = True,
                 say=lambda msg: None) -> dict:
    """Matmul peak in fp32 and, where this CPU runs it natively, in bf16 (else bf16 is None).

    bf16 is probed before it is timed: the oneDNN capability flag, then one 256^3 product with a
    time limit.  Without native kernels a bf16 product is emulated (about 0.3 GFLOP/s on this
    kind of machine), and twelve 2048^3 products would take over ten minutes."""
    from neural.precision import native_bf16

    torch.set_num_threads(threads)
    out = {"fp32": _matmul_rate(n, torch.float32, reps), "bf16": None}
    say(f"fp32 peak: {out['fp32'] / 1e9:.1f} GFLOP/s ({n}^3, {threads} threads)")
    if not want_bf16:
        return out
    if not native_bf16():
        say("bf16: skipped -- this CPU has no native bf16 kernels (AVX512-BF16/AMX); emulated bf16 is slower "
            "than fp32, so every number here is fp32")
        return out
    probe = _matmul_rate(256, torch.bfloat16, 3, limit_s=2.0)
    if probe < 0.5 * _matmul_rate(256, torch.float32, 3, limit_s=2.0):
        say(f"bf16: skipped -- a 256^3 product runs at {probe / 1e9:.2f} GFLOP/s, under half the fp32 rate "
            "(emulated here)")
        return out
    out["bf16"] = _matmul_rate(n, torch.bfloat16, reps, limit_s=30.0)
    say(f"bf16 peak: {out['bf16'] / 1e9:.1f} GFLOP/s")
    return out


def _gflops(x) -> str:
    return "n/a (not native here)" if x is None else f"{x / 1e9:.1f} GFLOP/s"


def load_ptb():
    return prepare(load_corpus("ptb", data_dir=DATA_DIR))


# ---------------------------------------------------------------------------- plain PyTorch baseline
class PlainLSTMLM(nn.Module):
    """The classic design, written plainly: time-major tensors, dropout, tied weights, full softmax."""

    def __init__(self, n_ids: int, size: int, n_layers: int, dropout: float) -> None:
        super().__init__()
        self.emb = nn.Embedding(n_ids, size)
        self.lstm = nn.LSTM(size, size, n_layers, dropout=dropout)
        self.out = nn.Linear(size, n_ids)
        self.out.weight = self.emb.weight
        self.drop = nn.Dropout(dropout)

    def forward(self, x, hidden):
        h, hidden = self.lstm(self.drop(self.emb(x)), hidden)
        return self.out(self.drop(h)), hidden


def baseline_tokens_per_s(ids: np.ndarray, n_ids: int, size: int, n_layers: int, dropout: float, batches: int,
                          batch_size: int = 20, bptt: int = 35, lr: float = 20.0, clip: float = 0.25) -> float:
    torch.manual_seed(0)
    model = PlainLSTMLM(n_ids, size, n_layers, dropout).train()
    data = torch.as_tensor(ids[: (len(ids) // batch_size) * batch_size].astype(np.int64)).view(batch_size, -1).t()
    hidden = None
    opt = torch.optim.SGD(model.parameters(), lr=lr)
    loss_fn = nn.CrossEntropyLoss()
    t0, tokens = time.perf_counter(), 0
    for b in range(batches):
        i = b * bptt
        x, y = data[i:i + bptt], data[i + 1:i + 1 + bptt]
        if hidden is not None:
            hidden = tuple(h.detach() for h in hidden)
        logits, hidden = model(x, hidden)
        loss = loss_fn(logits.view(-1, n_ids), y.reshape(-1))
        opt.zero_grad()
        loss.backward()
        nn.utils.clip_grad_norm_(model.parameters(), clip)
        opt.step()
        tokens += y.numel()
    return tokens / (time.perf_counter() - t0)


def ours_tokens_per_s(ds, kind: str, model_cfg: dict, train_cfg: dict, batches: int) -> float:
    model = build_model(kind, {**model_cfg, "vocab_size": len(ds.vocab)}, seed=0)
    cfg = TrainConfig(**{**train_cfg, "epochs": 1, "max_batches": batches, "patience": 0})
    trainer = Trainer(model, ds.vocab, ds["train"].ids, ds["valid"].ids[:50], cfg, progress=False, log=lambda s: None)
    result = trainer.fit()
    return result.tokens_per_second


@click.group()
def cli() -> None:
    """Neural LM benchmarks (see the module docstring)."""


@cli.command()
@click.option("--threads", type=int, default=2, show_default=True)
def peak(threads):
    """Matmul peak of this CPU."""
    p = measure_peak(threads, say=click.echo)
    click.echo(f"peak matmul with {threads} threads: fp32 {_gflops(p['fp32'])}, bf16 {_gflops(p['bf16'])}")


@cli.command()
@click.option("--model", "names", multiple=True, default=("lstm",), show_default=True,
              type=click.Choice(list(PRESETS)), help="Presets to measure (repeatable).")
@click.option("--size", type=int, default=None, help="Override the RNN width (emb = hidden).")
@click.option("--batches", type=int, default=100, show_default=True)
@click.option("--repeats", type=int, default=3, show_default=True,
              help="Interleaved repetitions; the best of each is reported (shared CPUs are noisy).")
@click.option("--threads", type=int, default=2, show_default=True)
@click.option("--bf16/--no-bf16", default=True, show_default=True, help="Also measure our model under bf16 autocast.")
@click.option("--impl", type=click.Choice(["fused", "scratch"]), default="fused", show_default=True)
@click.option("--batch-size", type=int, default=None, help="Override the batch size of our run.")
@click.option("--baseline/--no-baseline", default=True, show_default=True)
def throughput(names, size, batches, repeats, threads, bf16, impl, batch_size, baseline):
    """Training tokens/s: ours vs the plain PyTorch loop, and FLOP/s vs peak."""
    torch.set_num_threads(threads)
    p = measure_peak(threads, want_bf16=bf16, say=click.echo)  # printed at once: the user sees it is running
    bf16 = bf16 and p["bf16"] is not None
    ds = load_ptb()
    best: dict = {}
    flops: dict = {}
    for _ in range(repeats):
        for name in names:
            kind, mcfg, tcfg = PRESETS[name]
            mcfg, tcfg = dict(mcfg), dict(tcfg)
            if size and kind == "rnn":
                mcfg.update(emb_size=size, hidden_size=size)
            if kind == "rnn":
                mcfg["impl"] = impl
            else:
                mcfg["attention"] = "scratch" if impl == "scratch" else "sdpa"
            if batch_size:
                tcfg["batch_size"] = batch_size
            fpt = 3 * flops_per_token(kind, mcfg, ds.vocab.n_types)
            runs = [(f"ours {name} fp32 ({impl})", lambda: ours_tokens_per_s(ds, kind, mcfg, {**tcfg, "bf16": False},
                                                                             batches), "fp32")]
            if bf16:
                runs.append((f"ours {name} bf16 ({impl})", lambda: ours_tokens_per_s(ds, kind, mcfg,
                                                                                    {**tcfg, "bf16": True}, batches),
                             "bf16"))
            if baseline and kind == "rnn" and mcfg["cell"] == "lstm":
                runs.append((f"plain PyTorch LSTM {mcfg['n_layers']}x{mcfg['hidden_size']} fp32",
                             lambda: baseline_tokens_per_s(ds["train"].ids, len(ds.vocab), mcfg["hidden_size"],
                                                           mcfg["n_layers"], mcfg["dropout"], batches), "fp32"))
            for label, fn, dt in runs:
                best[label] = max(best.get(label, 0.0), fn())
                click.echo(f"  {label}: {best[label]:,.0f} tokens/s so far", err=True)
                flops[label] = (fpt, p[dt])
    for label, tps in best.items():
        fpt, peak_ref = flops[label]
        click.echo(f"{label:<44} {tps:10,.0f} tokens/s  {fpt * tps / 1e9:7.1f} GFLOP/s  "
                   f"{100 * fpt * tps / peak_ref:5.1f}% of {'bf16' if 'bf16' in label else 'fp32'} peak")
    for label in best:
        if label.startswith("plain"):
            ours = [k for k in best if k.startswith("ours lstm")]
            for k in ours:
                click.echo(f"ratio {k} / plain: {best[k] / best[label]:.2f}")


def _estimate_epochs(ds, kind: str, mcfg: dict, tcfg: dict, minutes: float) -> tuple:
    """Epochs that fit the budget, from ~30 measured batches and a timed validation slice."""
    tps = ours_tokens_per_s(ds, kind, mcfg, tcfg, 30)
    model = build_model(kind, {**mcfg, "vocab_size": len(ds.vocab)}, seed=0)
    t0 = time.perf_counter()
    evaluate(model, ds["valid"].ids[:5000])
    eval_s = (time.perf_counter() - t0) * len(ds["valid"].ids) / 5000
    epoch_s = ds["train"].n_tokens / tps + eval_s
    return max(1, int(minutes * 60 / epoch_s)), tps, eval_s


def _run_one(ds, name: str, minutes: float, out_dir: Path, threads: int, epochs: int, overrides: dict) -> dict:
    kind, mcfg, tcfg = PRESETS[name]
    mcfg = {**mcfg, **{k: v for k, v in overrides.items() if k in mcfg}}
    tcfg = {**tcfg, **{k: v for k, v in overrides.items() if k not in mcfg}}
    torch.set_num_threads(threads)
    if not epochs and tcfg.get("schedule") != "cosine":
        # Step decay on plateau needs no epoch count: the time budget ends training.  (A
        # throughput probe taken while other jobs share the CPU once sized a run at 1 epoch.)
        epochs = 1000
    elif not epochs:
        epochs, tps, eval_s = _estimate_epochs(ds, kind, mcfg, tcfg, minutes)
        click.echo(f"  [{name}] probe: {tps:,.0f} tokens/s, validation ~{eval_s:.0f} s -> {epochs} epochs fit "
                   f"{minutes:g} min", err=True)
    model = build_model(kind, {**mcfg, "vocab_size": len(ds.vocab)}, seed=1234)
    cfg = TrainConfig(**{"patience": 0, **tcfg, "epochs": epochs, "time_budget": minutes})
    out = out_dir / f"ptb-{name}.pt"
    t0 = time.perf_counter()
    res = Trainer(model, ds.vocab, ds["train"].ids, ds["valid"].ids, cfg, out=out,
                  log=lambda s: click.echo(f"  [{name}] {s}", err=True)).fit()
    best, _, _ = load_model(res.best_checkpoint)
    test = evaluate(best, ds["test"].ids)
    return {"model": name, "wall_s": round(time.perf_counter() - t0, 1), "train_s": round(res.seconds, 1),
            "epochs": round(res.epochs_done, 2), "tokens_per_s": round(res.tokens_per_second),
            "best_valid_ppl": round(res.best_val_ppl, 2), "test_ppl": round(test.ppl, 2),
            "test_tokens": test.n_predicted, "history": res.history, "checkpoint": str(out)}


@cli.command()
@click.option("--model", "names", multiple=True, default=tuple(PRESETS), show_default=True,
              type=click.Choice(list(PRESETS)), help="Models to train (repeatable).")
@click.option("--minutes", type=float, default=60.0, show_default=True, help="Time budget per model.")
@click.option("--epochs", type=int, default=0, show_default=True,
              help="Epochs (0 = as many as fit the budget, estimated from a short throughput probe).")
@click.option("--threads", type=int, default=2, show_default=True)
@click.option("--out-dir", type=click.Path(file_okay=False), default="runs/bench", show_default=True)
@click.option("--set", "sets", multiple=True, help="Override a preset value, e.g. --set hidden_size=300 --set lr=10.")
@click.option("--json-out", type=click.Path(dir_okay=False), default=None, help="Also write the results as JSON.")
def train(names, minutes, epochs, threads, out_dir, sets, json_out):
    """Train on PTB within a time budget; report tokens/s, valid and test perplexity."""
    # Each value is parsed as its config field's type (bf16=False is a bool, lr=10 a float).
    overrides = dict(parse_override(s, RNNConfig, TransformerConfig, TrainConfig) for s in sets)
    ds = load_ptb()
    results = []
    for name in names:
        r = _run_one(ds, name, minutes, Path(out_dir), threads, epochs, overrides)
        results.append(r)
        click.echo(json.dumps(r))
    click.echo(f"\n{'model':<12} {'epochs':>7} {'tokens/s':>9} {'valid ppl':>10} {'test ppl':>9} {'wall s':>8}")
    for r in results:
        click.echo(f"{r['model']:<12} {r['epochs']:7.2f} {r['tokens_per_s']:9,} {r['best_valid_ppl']:10.2f} "
                   f"{r['test_ppl']:9.2f} {r['wall_s']:8.0f}")
    click.echo("references (PTB test ppl): KN5 141.2; Zaremba et al. 2x200 114.5; word_language_model 2x200 tied 6 ep 110.44")
    if json_out:
        Path(json_out).write_text(json.dumps(results, indent=2) + "\n")


@cli.command()
@click.option("--minutes", type=float, default=10.0, show_default=True)
@click.option("--hidden", type=int, default=256, show_default=True)
@click.option("--layers", type=int, default=2, show_default=True)
@click.option("--threads", type=int, default=2, show_default=True)
@click.option("--out-dir", type=click.Path(file_okay=False), default="runs/bench", show_default=True)
def char(minutes, hidden, layers, threads, out_dir):
    """Character-level LSTM on The Time Machine; bits per character on the held-out tail (test split)."""
    torch.set_num_threads(threads)
    ds = prepare(load_corpus("timemachine", data_dir=DATA_DIR, tokenizer=TokenizerSpec(kind="char")))
    cfg = RNNConfig(vocab_size=len(ds.vocab), cell="lstm", emb_size=64, hidden_size=hidden, n_layers=layers,
                    dropout=0.3, tie_weights=False)
    model = build_model("rnn", cfg, seed=1234)
    tcfg = TrainConfig(epochs=200, batch_size=32, bptt=100, optimizer="adamw", lr=2e-3, clip=1.0,
                       schedule="plateau", lr_decay=0.5, patience=0, time_budget=minutes)
    res = Trainer(model, ds.vocab, ds["train"].ids, ds["valid"].ids, tcfg, out=Path(out_dir) / "timemachine-char.pt",
                  log=lambda s: click.echo(f"  [char] {s}", err=True)).fit()
    best = load_model(res.best_checkpoint)[0]
    test = evaluate(best, ds["test"].ids)
    # Every predicted token is a character (spaces are a symbol) or a line end.
    click.echo(f"timemachine char LSTM {layers}x{hidden}: {res.epochs_done:.1f} epochs in {res.seconds:.0f} s, "
               f"{res.tokens_per_second:,.0f} chars/s; test {test.n_predicted:,} chars, "
               f"{test.bits_per_token:.3f} bits/char (ppl {test.ppl:.2f})")



@cli.command()
@click.option("--checkpoint", type=click.Path(dir_okay=False, exists=True), default=None,
              help="Climb from this checkpoint instead of training one.")
@click.option("--model", "name", type=click.Choice(list(PRESETS)), default="lstm", show_default=True,
              help="Preset to train when no --checkpoint is given (lstm: 2 x 300, dropout 0.35, the hour's "
                   "winner: test ppl 84.77, converged in 37 min; lstm_reg: 94.51 in 55 min).")
@click.option("--minutes", type=float, default=60.0, show_default=True, help="Training budget.")
@click.option("--corpus", default="ptb", show_default=True)
@click.option("--tune-tokens", type=int, default=10000, show_default=True,
              help="Valid prefix for the dynamic-evaluation grid (10,000 keeps adaptation and scoring inside "
                   "15 minutes on 2 cores).")
@click.option("--threads", type=int, default=2, show_default=True)
@click.option("--out-dir", type=click.Path(file_okay=False), default="runs/ladder", show_default=True)
def ladder(checkpoint, name, minutes, corpus, tune_tokens, threads, out_dir):
    """The ladder end to end: train (or load) a model, then n-gram -> model -> + cache -> + dynamic
    evaluation -> + n-gram (global, per-context) -> + infini-gram, on the same test tokens."""
    from reports.experiments.ladder import LadderOptions, run_ladder
    from reports.render.ladder import write_ladder

    torch.set_num_threads(threads)
    t0 = time.perf_counter()
    train_s = None
    if checkpoint is None:
        ds = load_ptb() if corpus == "ptb" else prepare(load_corpus(corpus, data_dir=DATA_DIR))
        r = _run_one(ds, name, minutes, Path(out_dir), threads, 0, {})
        checkpoint = str(Path(out_dir) / f"ptb-{name}.best.pt")
        train_s = r["train_s"]
        click.echo(json.dumps({k: v for k, v in r.items() if k != "history"}))
    res = run_ladder(checkpoint, corpus, data_dir=DATA_DIR, options=LadderOptions(tune_tokens=tune_tokens),
                     log=lambda s: click.echo(f"  {s}", err=True))
    page = write_ladder(res, Path(out_dir) / "report")
    click.echo(f"\n{'rung':<58} {'test ppl':>9} {'95 % CI':>15} {'extra s':>8}")
    for row in res["rows"]:
        ci = row["test_ppl_ci"]
        click.echo(f"{('' if row['rung'] else '  (alone) ') + row['label']:<58} {row['test_ppl']:9.2f} "
                   f"{f'{ci[0]:.2f}-{ci[1]:.2f}':>15} {row['extra_seconds']:8.1f}")
    rows = {row["id"]: row for row in res["rows"]}
    plain = rows["neural"]["test_ppl"]
    if "cache" in rows and "dynamic_cache" in rows:
        click.echo(f"cache: {100 * (1 - rows['cache']['test_ppl'] / plain):.1f} % below the model; dynamic evaluation: "
                   f"{100 * (1 - rows['dynamic_cache']['test_ppl'] / rows['cache']['test_ppl']):.1f} % below that")
    click.echo(f"training {'(given checkpoint)' if train_s is None else f'{train_s / 60:.1f} min'}; adaptation and "
               f"scoring {res['adaptation_seconds'] / 60:.1f} min; top rung {rows[res['top']]['test_ppl']:.2f}; "
               f"wall {(time.perf_counter() - t0) / 60:.1f} min; report {page}")


@cli.command()
@click.option("--minutes", type=float, default=2.0, show_default=True, help="The --time-budget of the run.")
@click.option("--hogs", type=int, default=2, show_default=True, help="CPU-bound processes beside it.")
@click.option("--delay", type=float, default=20.0, show_default=True, help="Seconds before the hogs start.")
@click.option("--corpus", default="toy", show_default=True)
def budget(minutes, hogs, delay, corpus):
    """`neural train --time-budget` on a machine other jobs share: used vs budget."""
    import subprocess
    import threading

    procs = []

    def start():
        for _ in range(hogs):
            procs.append(subprocess.Popen([sys.executable, "-c", "while True: pass"]))

    timer = threading.Timer(delay, start)
    timer.start()
    out = Path(os.environ.get("TMPDIR", "/tmp")) / f"bench-budget-{os.getpid()}.pt"
    t0 = time.perf_counter()
    try:
        r = subprocess.run([sys.executable, "-c", "import cli; cli.main()", "neural", "train", corpus, "--time-budget",
                            str(minutes), "--no-progress", "--out", str(out)], capture_output=True, text=True,
                           cwd=str(Path(__file__).resolve().parents[1]))
    finally:
        timer.cancel()
        for p in procs:
            p.kill()
        from neural.checkpoint import best_path

        for path in (out, best_path(out)):
            Path(path).unlink(missing_ok=True)
    wall = time.perf_counter() - t0
    for line in r.stderr.splitlines():
        if line.startswith(("note:", "stopped:", "time budget")):
            click.echo(line)
    click.echo(f"{hogs} hogs from {delay:g} s: budget {minutes:g} min, wall {wall / 60:.2f} min "
               f"({100 * (wall / (60 * minutes) - 1):+.0f} %), exit {r.returncode}")


@cli.command()
@click.argument("names", nargs=-1)
@click.option("--hogs", type=int, default=2, show_default=True, help="CPU-bound processes beside the loaded runs.")
@click.option("--without-rule/--no-without-rule", default=True, show_default=True,
              help="Also run each lab beside the hogs with the thread rule off (NGRAMLM_THREAD_RULE=off): torch's "
                   "default thread count, what the labs did before the rule.")
def labs(names, hogs, without_rule):
    """Each lab at its default size: quiet, then beside HOGS CPU-bound processes (the shared-cores thread
    rule on, and off); wall seconds and the ratio to the quiet run (the target: within 2x)."""
    import subprocess
    import tempfile

    from labs import LABS

    repo = Path(__file__).resolve().parents[1]

    def run_lab(name: str, n_hogs: int, rule: bool) -> float:
        procs = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(n_hogs)]
        env = dict(os.environ, **({} if rule else {"NGRAMLM_THREAD_RULE": "off"}))
        try:
            with tempfile.TemporaryDirectory() as out:
                t0 = time.perf_counter()
                r = subprocess.run([sys.executable, "-c", "import cli; cli.main()", "lab", name, "-o", out],
                                   capture_output=True, text=True, cwd=str(repo), env=env)
                wall = time.perf_counter() - t0
        finally:
            for p in procs:
                p.kill()
        if r.returncode:
            raise click.ClickException(f"lab {name}: {r.stderr[-500:]}")
        return wall

    click.echo(f"load average before: {os.getloadavg()[0]:.2f}")
    click.echo(f"| lab | quiet (s) | {hogs} hogs, rule on (s) | ratio |" + (" rule off (s) | ratio |" if without_rule else ""))
    for name in names or list(LABS):
        quiet = run_lab(name, 0, True)
        on = run_lab(name, hogs, True)
        row = f"| {name} | {quiet:.1f} | {on:.1f} | {on / quiet:.2f} |"
        if without_rule:
            off = run_lab(name, hogs, False)
            row += f" {off:.1f} | {off / quiet:.2f} |"
        click.echo(row)


if __name__ == "__main__":
    cli()
