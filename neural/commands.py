"""``ngramlm neural train | ppl | generate``: the command line of the neural models.

Also the plain functions the top-level ``ngramlm ppl`` uses:
:func:`neural.sniff.is_checkpoint` and :func:`ppl_summary`.
"""
from __future__ import annotations

import json
import math
import os
import time
from pathlib import Path
from typing import Optional

import click

from corpora import load_corpus, prepare
from corpora.corpus import read_sentences
from corpora.datadir import ENV_VAR
from corpora.errors import InputError
from corpora.registry import REGISTRY
from corpora.tokenize import KINDS, TokenizerSpec

from .config import CELLS, MODEL_NAMES, RNNConfig, TrainConfig, TransformerConfig

# Defaults that differ between the two families (an option left unset takes these).
# Chosen from measured throughput on 2 CPU cores (see docs/neural.md and benchmarks/bench_neural.py).
FAMILY_DEFAULTS = {
    "rnn": dict(optimizer="sgd", lr=20.0, schedule="plateau", batch_scheme="sequential", bptt=35, batch_size=20,
                clip=0.25, dropout=0.2, epochs=40, weight_decay=0.0, layers=2, plateau_threshold=0.01),
    "transformer": dict(optimizer="adamw", lr=1e-3, schedule="cosine", batch_scheme="random", bptt=None,
                        batch_size=32, clip=1.0, dropout=0.3, epochs=15, weight_decay=0.1, layers=4,
                        plateau_threshold=0.0),
}
LR_BY_OPTIMIZER = {"sgd": 20.0, "adamw": 1e-3}


def _set_threads(threads: int) -> None:
    import torch

    torch.set_num_threads(threads)


def bf16_supported() -> bool:
    """True where oneDNN has native bfloat16 kernels (AVX512-BF16 / AMX); elsewhere bf16 is emulated and slower."""
    import torch

    try:
        return bool(torch.ops.mkldnn._is_mkldnn_bf16_supported())
    except (AttributeError, RuntimeError):
        return False


def _echo_err(msg: str) -> None:
    click.echo(msg, err=True)


# ---------------------------------------------------------------------------- ppl
def _score_sentences(checkpoint_path, text_path_or_corpus, split, data_dir, vocab, data_info):
    """(sentences, description): a registered corpus's split, a whole text file, or -- when no text is
    given -- the split of the corpus the checkpoint was trained on (a training *file*'s held-out tail)."""
    if text_path_or_corpus is None:
        name = data_info.get("corpus")
        if not name:
            raise InputError("no text given and the checkpoint does not record its corpus", path=checkpoint_path,
                             fix="pass a corpus name or a text file")
        if name not in REGISTRY and not Path(name).exists():
            raise InputError(f"the training corpus {name!r} is not available here", path=checkpoint_path,
                             fix="pass a corpus name or a text file")
        corpus = load_corpus(name, data_dir=data_dir, tokenizer=vocab.tokenizer)
        return corpus.sentences(split), f"{name} ({split})"
    name = str(text_path_or_corpus)
    if name == "-":  # standard input, one sentence per line
        import sys

        from corpora.tokenize import make_tokenizer

        tokenize = make_tokenizer(vocab.tokenizer or TokenizerSpec())
        return [tokenize(line) for line in sys.stdin.read().splitlines() if line.strip()], "<stdin>"
    if name in REGISTRY:
        corpus = load_corpus(name, data_dir=data_dir, tokenizer=vocab.tokenizer, splits=(split,))
        return corpus.sentences(split), f"{name} ({split})"
    spec = vocab.tokenizer or TokenizerSpec()
    return read_sentences(name, tokenizer=spec, sentence_mode="lines"), name


def ppl_summary(checkpoint_path: os.PathLike | str, text_path_or_corpus: Optional[str] = None, *,
                split: str = "test", data_dir: Optional[str] = None, batch_size: int = 1,
                threads: Optional[int] = 2) -> dict:
    """Perplexity of a checkpoint on a corpus split (by name), a whole text file, or ``"-"`` (stdin).

    ``text_path_or_corpus=None`` scores the ``split`` of the corpus the checkpoint was trained on.

    Returns a JSON-able dict: sentences, words, OOVs (words mapped to ``<unk>``),
    tokens predicted (words + sentence ends), total log-probability in nats, log10 and
    log2, perplexity and bits per token.
    """
    from .checkpoint import load_model
    from .evaluate import evaluate

    if threads:
        _set_threads(threads)
    model, vocab, ckpt = load_model(checkpoint_path)
    data_info = (ckpt.get("train") or {}).get("data") or {}
    sentences, described = _score_sentences(checkpoint_path, text_path_or_corpus, split, data_dir, vocab, data_info)
    encoded = vocab.encode_sentences(sentences)
    n_oov, n_words = vocab.oov_count(sentences)
    t0 = time.perf_counter()
    result = evaluate(model, encoded.ids, batch_size=batch_size)
    return {
        "model": str(checkpoint_path),
        "architecture": ckpt["model"]["name"],
        "text": described,
        "sentences": encoded.n_sentences,
        "words": n_words,
        "oovs": n_oov,
        "tokens_predicted": result.n_predicted,
        "n_types": vocab.n_types,
        "log_prob_nats": result.log_prob_nats,
        "log10_prob": result.log10_prob,
        "log2_prob": result.log2_prob,
        "ppl": result.ppl,
        "bits_per_token": result.bits_per_token,
        "seconds": round(time.perf_counter() - t0, 2),
    }


def format_summary(s: dict) -> str:
    rows = [
        ("model", f"{s['model']} ({s['architecture']})"),
        ("text", s["text"]),
        ("sentences", f"{s['sentences']:,}"),
        ("words", f"{s['words']:,}"),
        ("OOVs (mapped to <unk>)", f"{s['oovs']:,} ({100 * s['oovs'] / max(1, s['words']):.2f}%)"),
        ("tokens predicted", f"{s['tokens_predicted']:,} (words + sentence ends, over {s['n_types']:,} types)"),
        ("log-prob (log10)", f"{s['log10_prob']:.2f}"),
        ("log-prob (nats)", f"{s['log_prob_nats']:.2f}"),
        ("bits per token", f"{s['bits_per_token']:.4f}"),
        ("perplexity", f"{s['ppl']:.2f}"),
    ]
    width = max(len(k) for k, _ in rows)
    return "\n".join(f"{k:<{width}}  {v}" for k, v in rows)


# ---------------------------------------------------------------------------- the group
@click.group(name="neural", context_settings={"help_option_names": ["-h", "--help"]})
def neural_group() -> None:
    """Neural language models (RNN, LSTM, GRU, Transformer) on the shared vocabulary."""


def _load_dataset(corpus: str, data_dir, tokenizer, min_count: int, max_vocab: Optional[int]):
    tok = TokenizerSpec(kind=tokenizer) if isinstance(tokenizer, str) else tokenizer  # a kind, a spec or None
    ds = prepare(load_corpus(corpus, data_dir=data_dir, tokenizer=tok), min_count=min_count, max_size=max_vocab)
    for split in ("train", "valid"):
        if split not in ds.encoded or ds.encoded[split].n_tokens == 0:
            raise InputError(f"corpus {corpus!r} has no {split} text", fix="give a corpus with train and valid splits")
    return ds


@neural_group.command("train")
@click.argument("corpus", required=False)
@click.option("--model", "model_name", type=click.Choice(MODEL_NAMES), default=None,
              help="Architecture [default: lstm; with --resume: the checkpoint's].")
@click.option("--impl", type=click.Choice(["fused", "scratch"]), default="fused", show_default=True,
              help="fused: PyTorch kernels; scratch: the textbook equations (RNN cells; Transformer attention).")
@click.option("--data-dir", envvar=ENV_VAR, type=click.Path(file_okay=False), default=None,
              help=f"Folder holding the corpora [env {ENV_VAR}].")
@click.option("--tokenizer", type=click.Choice(KINDS), default=None, help="Override the corpus's tokenizer (e.g. char).")
@click.option("--min-count", type=int, default=1, show_default=True, help="Vocabulary: minimum training count.")
@click.option("--max-vocab", type=int, default=None, help="Vocabulary: keep at most this many word types.")
@click.option("--emb-size", type=int, default=None, help="RNN embedding width [default: --hidden-size].")
@click.option("--hidden-size", type=int, default=200, show_default=True, help="RNN state width.")
@click.option("--layers", type=int, default=None, help="Layers [default: 2 for RNNs, 4 for the Transformer].")
@click.option("--dropout", type=float, default=None, help="Dropout [default: 0.2 RNN, 0.3 Transformer].")
@click.option("--tie/--no-tie", default=True, show_default=True, help="Tie input and output embeddings.")
@click.option("--d-model", type=int, default=256, show_default=True, help="Transformer width.")
@click.option("--heads", type=int, default=4, show_default=True, help="Transformer attention heads (divide --d-model).")
@click.option("--d-ff", type=int, default=None, help="Transformer feed-forward width [default: 4 x --d-model].")
@click.option("--block-size", type=int, default=128, show_default=True, help="Transformer context window.")
@click.option("--positional", type=click.Choice(["sinusoidal", "learned"]), default="learned", show_default=True)
@click.option("--epochs", type=int, default=None, help="Maximum epochs [default: 40 RNN, 15 Transformer].")
@click.option("--time-budget", type=float, default=None, help="Stop after this many minutes (validates and checkpoints).")
@click.option("--batch-size", type=int, default=None, help="Rows per batch [default: 20 RNN, 32 Transformer].")
@click.option("--bptt", type=int, default=None, help="Tokens per row per batch [default: 35 RNN, --block-size Transformer].")
@click.option("--batch-scheme", type=click.Choice(["sequential", "random"]), default=None,
              help="sequential: carry state across batches (truncated BPTT); random: random offsets, fresh state "
                   "[default: sequential RNN, random Transformer].")
@click.option("--optimizer", type=click.Choice(["sgd", "adamw"]), default=None, help="[default: sgd RNN, adamw Transformer]")
@click.option("--lr", type=float, default=None, help="Learning rate [default: 20 for sgd, 1e-3 for adamw].")
@click.option("--momentum", type=float, default=0.0, show_default=True, help="SGD momentum.")
@click.option("--weight-decay", type=float, default=None, help="[default: 0 RNN, 0.1 Transformer]")
@click.option("--clip", type=float, default=None, help="Max global gradient norm, 0 = off [default: 0.25 RNN, 1 Transformer].")
@click.option("--schedule", type=click.Choice(["plateau", "cosine", "constant"]), default=None,
              help="plateau: lr x --lr-decay when valid ppl stalls; cosine: warmup + cosine [default: plateau RNN, cosine Transformer].")
@click.option("--lr-decay", type=float, default=0.25, show_default=True, help="Plateau: lr factor when valid ppl stalls.")
@click.option("--plateau-threshold", type=float, default=None,
              help="Plateau: relative valid-ppl gain an epoch needs to count as progress [default: 0.01 RNN, 0 Transformer].")
@click.option("--warmup", type=int, default=None, help="Cosine warmup steps [default: 100 for cosine].")
@click.option("--patience", type=int, default=3, show_default=True, help="Early stop after this many epochs without improvement (0 = never).")
@click.option("--eval-batch-size", type=int, default=1, show_default=True, help="Rows in the validation pass (1 = exact full history).")
@click.option("--bf16/--no-bf16", default=None,
              help="bfloat16 autocast of the matmuls [default: on where the CPU has native bf16 (AVX512-BF16/AMX)].")
@click.option("--seed", type=int, default=1234, show_default=True)
@click.option("--threads", type=int, default=2, show_default=True, help="torch.set_num_threads.")
@click.option("--out", type=click.Path(dir_okay=False), default=None, help="Checkpoint file [default: runs/CORPUS-MODEL.pt].")
@click.option("--resume", type=click.Path(dir_okay=False), default=None, help="Continue the run saved in this checkpoint.")
@click.option("--dry-run", is_flag=True, help="Train one batch, validate on a prefix, write the checkpoint, stop.")
@click.option("--progress/--no-progress", default=True, show_default=True, help="Progress bar on stderr.")
def train_cmd(corpus, model_name, impl, data_dir, tokenizer, min_count, max_vocab, emb_size, hidden_size, layers,
              dropout, tie, d_model, heads, d_ff, block_size, positional, epochs, time_budget, batch_size, bptt,
              batch_scheme, optimizer, lr, momentum, weight_decay, clip, schedule, lr_decay, plateau_threshold, warmup,
              patience,
              eval_batch_size, bf16, seed, threads, out, resume, dry_run, progress):
    """Train a neural LM on CORPUS (a registered name such as ptb, or a text file).

    CORPUS defaults to the toy corpus, or with --resume to the corpus the run was trained on.
    """
    _set_threads(threads)
    from .checkpoint import best_path, load_checkpoint, load_model
    from .evaluate import evaluate
    from .models import build_model, model_kind
    from .train import Trainer

    if corpus is None:
        corpus = "toy"
        if resume:
            data = (load_checkpoint(resume).get("train") or {}).get("data") or {}
            corpus = data.get("corpus") or corpus
            if tokenizer is None and data.get("tokenizer"):
                tokenizer = TokenizerSpec.from_dict(data["tokenizer"])
    ds = _load_dataset(corpus, data_dir, tokenizer, min_count, max_vocab)
    data_info = {"corpus": corpus, "tokenizer": ds.vocab.tokenizer.to_dict() if ds.vocab.tokenizer else None,
                 "train_tokens": ds["train"].n_tokens}
    if resume:
        overrides = {k: v for k, v in dict(epochs=epochs, time_budget=time_budget).items() if v is not None}
        if dry_run:
            overrides["max_batches"] = 1
        trainer = Trainer.resume(resume, ds["train"].ids, ds["valid"].ids, vocab=ds.vocab, expect_name=model_name,
                                 overrides=overrides, out=out or resume, progress=progress, log=_echo_err,
                                 data_info=data_info)
        _echo_err(f"resuming {resume} at epoch {trainer.position['epoch'] + 1}, batch {trainer.position['batch']} "
                  f"(step {trainer.step}, best valid ppl {trainer.best_val_ppl:.2f})")
    else:
        model_name = model_name or "lstm"
        kind = model_kind(model_name)
        fam = FAMILY_DEFAULTS[kind]
        optimizer = optimizer or fam["optimizer"]
        dropout = fam["dropout"] if dropout is None else dropout
        if kind == "rnn":
            cfg = RNNConfig(vocab_size=len(ds.vocab), cell=model_name, impl=impl, emb_size=emb_size or hidden_size,
                            hidden_size=hidden_size, n_layers=layers or fam["layers"], dropout=dropout, tie_weights=tie)
        else:
            cfg = TransformerConfig(vocab_size=len(ds.vocab), d_model=d_model, n_layers=layers or fam["layers"], n_heads=heads,
                                    d_ff=d_ff or 4 * d_model, block_size=block_size, dropout=dropout,
                                    positional=positional, attention="scratch" if impl == "scratch" else "sdpa",
                                    tie_weights=tie)
        resolved_schedule = schedule or fam["schedule"]
        tcfg = TrainConfig(
            epochs=1 if dry_run else (epochs or fam["epochs"]),
            batch_size=batch_size or fam["batch_size"],
            bptt=bptt or fam["bptt"] or block_size,
            batch_scheme=batch_scheme or fam["batch_scheme"],
            optimizer=optimizer,
            lr=lr if lr is not None else (fam["lr"] if optimizer == fam["optimizer"] else LR_BY_OPTIMIZER[optimizer]),
            momentum=momentum,
            weight_decay=fam["weight_decay"] if weight_decay is None else weight_decay,
            clip=fam["clip"] if clip is None else clip,
            schedule=resolved_schedule,
            lr_decay=lr_decay,
            plateau_threshold=fam["plateau_threshold"] if plateau_threshold is None else plateau_threshold,
            warmup_steps=(100 if resolved_schedule == "cosine" else 0) if warmup is None else warmup,
            patience=patience,
            seed=seed,
            time_budget=time_budget,
            eval_batch_size=eval_batch_size,
            max_batches=1 if dry_run else None,
            bf16=bf16_supported() if bf16 is None else bf16,
        )
        tcfg.validate()
        model = build_model(kind, cfg, seed=seed)
        out = out or os.path.join("runs", f"{Path(corpus).stem}-{model_name}.pt")
        trainer = Trainer(model, ds.vocab, ds["train"].ids, ds["valid"].ids, tcfg, out=out, progress=progress,
                          log=_echo_err, data_info=data_info)
        _echo_err(f"{model.describe()}\n{tcfg}\ncorpus {corpus}: {ds['train'].n_tokens:,} training tokens, "
                  f"{ds.vocab.n_types:,} types -> {out}")
    result = trainer.fit()
    _echo_err(f"stopped: {result.stopped} after {result.epochs_done:.2f} epochs, {result.steps} steps, "
              f"{result.seconds:.1f} s, {result.tokens_per_second:,.0f} tokens/s; best valid ppl {result.best_val_ppl:.2f}")
    if result.stopped == "interrupted":
        _echo_err(f"continue with: ngramlm neural train {corpus} --resume {trainer.out}")
        return
    if "test" in ds.encoded and ds["test"].n_tokens:
        best = best_path(trainer.out)
        model = load_model(best)[0] if best.exists() else trainer.model
        test = evaluate(model, ds["test"].ids, batch_size=eval_batch_size,
                        max_tokens=2000 if dry_run else None)
        click.echo(f"test: {test.n_predicted:,} tokens predicted, log-prob {test.log10_prob:.2f} (log10), "
                   f"ppl {test.ppl:.2f}, {test.bits_per_token:.4f} bits/token")


@neural_group.command("ppl")
@click.argument("checkpoint", type=click.Path(dir_okay=False))
@click.argument("text_or_corpus", required=False)
@click.option("--split", default="test", show_default=True, help="Split of a registered corpus.")
@click.option("--data-dir", envvar=ENV_VAR, type=click.Path(file_okay=False), default=None)
@click.option("--batch-size", type=int, default=1, show_default=True, help="Rows scored in parallel (1 = full history).")
@click.option("--threads", type=int, default=2, show_default=True)
@click.option("--json", "as_json", is_flag=True, help="Print the summary as JSON.")
def ppl_cmd(checkpoint, text_or_corpus, split, data_dir, batch_size, threads, as_json):
    """Perplexity of CHECKPOINT on a corpus split or a text file [default: its training corpus]."""
    summary = ppl_summary(checkpoint, text_or_corpus, split=split, data_dir=data_dir, batch_size=batch_size,
                          threads=threads)
    click.echo(json.dumps(summary, indent=2) if as_json else format_summary(summary))


@neural_group.command("generate")
@click.argument("checkpoint", type=click.Path(dir_okay=False))
@click.option("--prompt", default="", help="Text to continue (tokenized like the training text).")
@click.option("--strategy", type=click.Choice(["greedy", "beam", "sample"]), default="sample", show_default=True)
@click.option("--max-len", type=int, default=30, show_default=True, help="Tokens to generate at most.")
@click.option("--beam-size", type=int, default=5, show_default=True)
@click.option("--alpha", type=float, default=0.7, show_default=True, help="Beam length normalisation: score / T^alpha.")
@click.option("--temperature", type=float, default=1.0, show_default=True)
@click.option("--top-k", type=int, default=None, help="Sample among the k most probable tokens.")
@click.option("-n", "--num", type=int, default=1, show_default=True, help="Samples (or beam hypotheses) to print.")
@click.option("--seed", type=int, default=None, help="Seed for sampling.")
@click.option("--stop-at-eos/--no-stop-at-eos", default=True, show_default=True, help="End a sample at </s>.")
@click.option("--threads", type=int, default=2, show_default=True)
def generate_cmd(checkpoint, prompt, strategy, max_len, beam_size, alpha, temperature, top_k, num, seed,
                 stop_at_eos, threads):
    """Generate text from CHECKPOINT."""
    _set_threads(threads)
    from .checkpoint import load_model
    from .generate import beam_search, encode_prompt, greedy, render, sample

    model, vocab, _ = load_model(checkpoint)
    prompt_ids = encode_prompt(vocab, prompt)
    head = (prompt + " ") if prompt and vocab.tokenizer is not None and vocab.tokenizer.kind != "char" else prompt
    if strategy == "greedy":
        click.echo(head + render(vocab, greedy(model, prompt_ids, max_len, stop_at_eos)))
    elif strategy == "beam":
        for h in beam_search(model, prompt_ids, beam_size=beam_size, max_len=max_len, alpha=alpha)[:num]:
            click.echo(f"[{h.score:8.3f} | ln p {h.log_prob:8.2f}] {head}{render(vocab, h.ids)}")
    else:
        for i in range(num):
            ids = sample(model, prompt_ids, max_len, temperature=temperature, top_k=top_k,
                         seed=None if seed is None else seed + i, stop_at_eos=stop_at_eos)
            click.echo(head + render(vocab, ids))
