"""The n-gram model's full next-token distribution for a batch of histories, three ways, on one thread.

    python benchmarks/bench_fusion.py [--orders 3,5] [--batches 1,32,256] [--json FILE]

* **tensor**: ``fusion.tensor_lm(model).log_probs(states)`` -- [B, V] float32 ln p, the back-off
  recursion as gathers and scatters (the form a beam search calls); also the KenLM *probing* binary
  of the same model (``ProbingTensorLM``: a hash probe per (state, word)).
* **loop**: ``Scorer.next_probs(context)`` once per history -- what a decoder without the tensor form
  does (each call scores all V continuations of one context, vectorised inside).
* **neural**: one step of a neural model's own forward pass at the same batch, to the same [B, V] log
  probabilities (``log_softmax``): a 2-layer LSTM (650 units, PTB "medium") and a 4-layer Transformer
  over a 32-token context (no cache), untrained (the cost does not depend on the weights).

The model is the MKN n-gram of PTB train (``NGRAMLM_DATA_DIR`` or ``../shared/corpora``; V = 10,001),
the histories B random prefixes of PTB test sentences.  Every tensor row is checked against the
loop's distribution before it is timed.  Times are medians of ``--repeats`` calls; ``torch`` runs on
one thread (``torch.set_num_threads(1)``), as the loop does.  Where CUDA is available the tensor form
and the LSTM are timed there too.
"""
from __future__ import annotations

import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

import click
import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

DATA_DIR = os.environ.get("NGRAMLM_DATA_DIR", str(Path(__file__).resolve().parents[2] / "shared" / "corpora"))


def _time(fn, repeats: int, sync=None) -> float:
    """Median seconds of ``fn()`` over ``repeats`` calls, after one warm-up call."""
    fn()
    out = []
    for _ in range(repeats):
        if sync:
            sync()
        t = time.perf_counter()
        fn()
        if sync:
            sync()
        out.append(time.perf_counter() - t)
    return statistics.median(out)


def _histories(ds, B: int, order: int, seed: int) -> list:
    """B random prefixes of test sentences (each at least one word short of its sentence)."""
    rng = np.random.default_rng(seed)
    sents = [s for s in ds.corpus.sentences("test") if len(s) >= 2]
    out = []
    for i in rng.choice(len(sents), size=B, replace=B > len(sents)):
        s = sents[int(i)]
        out.append(list(s[: int(rng.integers(0, len(s)))]))
    return out


def _states(t, vocab, histories):
    """The tensor form's states of ``histories`` (each from <s>), advanced in lockstep."""
    import torch

    L = max(len(h) for h in histories)
    st = t.start(len(histories))
    ids = torch.tensor([[vocab[w] for w in h] + [0] * (L - len(h)) for h in histories], dtype=torch.long)
    lens = torch.tensor([len(h) for h in histories])
    for j in range(L):
        nxt = t.advance(st, ids[:, j].to(st.device))
        st = torch.where((lens > j).to(st.device).unsqueeze(1), nxt, st)
    return st


def _neural(V: int):
    from neural import build_model
    from neural.config import RNNConfig, TransformerConfig

    lstm = build_model("rnn", RNNConfig(vocab_size=V, emb_size=650, hidden_size=650, n_layers=2, dropout=0.0), seed=1)
    tf = build_model("transformer", TransformerConfig(vocab_size=V, d_model=256, n_layers=4, n_heads=4, d_ff=1024,
                                                      block_size=64, dropout=0.0), seed=1)
    return lstm.eval(), tf.eval()


@click.command()
@click.option("--orders", default="3,5", show_default=True, help="n-gram orders to time.")
@click.option("--batches", default="1,32,256", show_default=True, help="batch sizes B (states per call).")
@click.option("--repeats", type=int, default=5, show_default=True)
@click.option("--loop-repeats", type=int, default=1, show_default=True, help="repeats of the next_probs loop.")
@click.option("--json", "json_out", type=click.Path(dir_okay=False), default=None, help="Also write the rows here.")
def main(orders, batches, repeats, loop_repeats, json_out):
    import torch

    from corpora import load_corpus, prepare
    from fusion import tensor_lm
    from ngramlm import NgramLM
    from ngramlm.kenlm.write import BinaryOptions, write_binary

    torch.set_num_threads(1)
    ds = prepare(load_corpus("ptb", data_dir=DATA_DIR))
    V = len(ds.vocab)
    batches = [int(b) for b in batches.split(",")]
    lstm, tf = _neural(V)
    cuda = torch.cuda.is_available()
    rows = []
    for order in [int(o) for o in orders.split(",")]:
        lm = NgramLM(order=order, smoothing="mkn").fit(ds["train"], vocab=ds.vocab)
        t = tensor_lm(lm)
        tmp = tempfile.mkdtemp()
        write_binary(lm, os.path.join(tmp, "m.probing.bin"), BinaryOptions(kind="probing"))
        tp = tensor_lm(os.path.join(tmp, "m.probing.bin"))
        print(f"PTB {order}-gram MKN, V = {V}: tensor tables {t.nbytes / 2**20:.1f} MiB "
              f"(the model's arrays {sum(a.nbytes for c in (lm.keys_, lm.log10_prob_, lm.log10_backoff_) for a in c) / 2**20:.1f} MiB); "
              f"probing tables {tp.nbytes / 2**20:.1f} MiB", flush=True)
        for B in batches:
            hist = _histories(ds, B, order, seed=B)
            st = _states(t, ds.vocab, hist)
            sp = _states(tp, ds.vocab, hist)
            contexts = [["<s>"] + h for h in hist]
            # The same numbers first: every row against the scorer's own distribution.
            ref = np.stack([lm.next_probs(c) for c in contexts])
            got = torch.exp(t.log10_probs(st) * np.log(10.0)).numpy()
            assert np.abs(got - ref).max() < 1e-12, "tensor form differs from next_probs"
            got_p = torch.exp(tp.log_probs(sp).double()).numpy()
            assert np.abs(got_p - ref).max() < 1e-6, "probing tensor form differs from next_probs"
            row = {"order": order, "B": B, "V": V}
            row["tensor_s"] = _time(lambda: t.log_probs(st), repeats)
            row["tensor_probing_s"] = _time(lambda: tp.log_probs(sp), max(1, repeats // 2))
            row["loop_s"] = _time(lambda: [lm.next_probs(c) for c in contexts], loop_repeats)
            x1 = torch.tensor([[ds.vocab[h[-1]] if h else 1] for h in hist])
            x32 = torch.randint(4, V, (B, 32))
            with torch.no_grad():
                row["lstm_step_s"] = _time(lambda: torch.log_softmax(lstm(x1)[0][:, -1], -1), repeats)
                row["transformer_ctx32_s"] = _time(lambda: torch.log_softmax(tf(x32)[0][:, -1], -1), repeats)
            if cuda:
                tg, sg = t.to("cuda"), st.cuda()
                sync = torch.cuda.synchronize
                row["tensor_cuda_s"] = _time(lambda: tg.log_probs(sg), repeats, sync)
                lg, xg = lstm.cuda(), x1.cuda()
                with torch.no_grad():
                    row["lstm_step_cuda_s"] = _time(lambda: torch.log_softmax(lg(xg)[0][:, -1], -1), repeats, sync)
                lstm.cpu()
            rows.append(row)
            cells = "  ".join(f"{k} {v * 1e3:9.2f} ms" for k, v in row.items() if k.endswith("_s"))
            print(f"  B={B:4d}  {cells}", flush=True)
    print("\n| order | B | tensor log_probs | states/s | probing tensor | next_probs loop | loop / tensor "
          "| LSTM 2x650 step | Transformer 4x256, 32 ctx |" + (" tensor CUDA | LSTM CUDA |" if cuda else ""))
    print("|---|---|---|---|---|---|---|---|---|" + ("---|---|" if cuda else ""))
    for r in rows:
        extra = f" {r['tensor_cuda_s'] * 1e3:.2f} ms | {r['lstm_step_cuda_s'] * 1e3:.2f} ms |" if cuda else ""
        print(f"| {r['order']} | {r['B']} | {r['tensor_s'] * 1e3:.2f} ms | {r['B'] / r['tensor_s']:,.0f} | "
              f"{r['tensor_probing_s'] * 1e3:.1f} ms | {r['loop_s'] * 1e3:.1f} ms | {r['loop_s'] / r['tensor_s']:.0f}x | "
              f"{r['lstm_step_s'] * 1e3:.2f} ms | {r['transformer_ctx32_s'] * 1e3:.2f} ms |{extra}")
    if json_out:
        Path(json_out).write_text(json.dumps({"rows": rows, "threads": 1, "cuda": cuda}, indent=1) + "\n")


if __name__ == "__main__":
    main()
