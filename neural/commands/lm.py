"""``ngramlm neural train | ppl | generate``: the command line of the neural models.

The plain functions behind ``ppl`` and ``generate`` are library code: :func:`neural.scoring.ppl_summary`
and :func:`neural.generate.sample_lines`.
"""
from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Optional

import click

from corpora import prepare
from corpora.errors import InputError
from corpora.tokenize import TokenizerSpec, spec_from_text

from corpora.options import TOKENIZER, data_dir_option, json_option, seed_option, threads_option
from corpora.textio import check_writable

from ..config import MODEL_NAMES, MODEL_PRESETS, TRAIN_PRESETS, architecture, resolve_lm_config


def _set_threads(threads: int) -> None:
    import torch

    torch.set_num_threads(threads)


def _echo_err(msg: str) -> None:
    click.echo(msg, err=True)


def fit_and_report(trainer, command: str):
    """``trainer.fit()`` under the shared-cores thread rule (one torch thread while other processes use the
    cores), then the one-line summary; an interrupted run says how to continue and exits 130."""
    import torch

    from ..training.contention import thread_rule

    with thread_rule(torch.get_num_threads(), log=_echo_err):
        result = trainer.fit()
    _echo_err(f"stopped: {result.stopped} after {result.epochs_done:.2f} epochs, {result.steps} steps, "
              f"{result.seconds:.1f} s, {result.tokens_per_second:,.0f} tokens/s; best valid ppl {result.best_val_ppl:.2f}")
    if result.stopped == "interrupted":
        _echo_err(f"interrupted; the checkpoint is {trainer.out}. Continue with: {command} --resume {trainer.out}")
        raise SystemExit(130)
    return result


# ---------------------------------------------------------------------------- the group
@click.group(name="neural", context_settings={"help_option_names": ["-h", "--help"]})
def neural_group() -> None:
    """Neural language models (RNN, LSTM, GRU, Transformer) on the shared vocabulary."""


def _load_dataset(corpus: str, data_dir, tokenizer, min_count: int, max_vocab: Optional[int], *,
                  valid: Optional[str] = None, test: Optional[str] = None):
    from corpora.sources import open_text

    tok = spec_from_text(tokenizer) if isinstance(tokenizer, str) else tokenizer  # "bpe:8000", a spec or None
    text = open_text(corpus, splits=("train", "valid", "test"), data_dir=data_dir, tokenizer=tok, valid=valid, test=test)
    if text.split_policy in ("holdout", "files"):
        _echo_err(text.split_note)  # a user's file: say which lines train and which are held out
    ds = prepare(text, min_count=min_count, max_size=max_vocab)
    for split in ("train", "valid"):
        if split not in ds.encoded or ds.encoded[split].n_tokens == 0:
            raise InputError(f"corpus {corpus!r} has no {split} text", fix="give a corpus with train and valid splits")
    return ds


_RNN, _TF = MODEL_PRESETS["default"]["rnn"], MODEL_PRESETS["default"]["transformer"]
_LSTM = architecture("lstm").preset("default")  # what the default LSTM has of its own (2 x 300, dropout 0.35)
_RNN_TRAIN, _TF_TRAIN = TRAIN_PRESETS["rnn"], TRAIN_PRESETS["transformer"]


def _both(field: str, fmt=str) -> str:
    """'[default: X RNN, Y Transformer]' from the presets (neural.config), so help never drifts from them."""
    a, b = getattr(_RNN_TRAIN, field), getattr(_TF_TRAIN, field)
    return f"[default: {fmt(a)} RNN, {fmt(b)} Transformer]"


@neural_group.command("train")
@click.argument("corpus", required=False)
@click.option("--model", "model_name", type=click.Choice(MODEL_NAMES), default=None,
              help="Architecture [default: lstm; with --resume: the checkpoint's].")
@click.option("--impl", type=click.Choice(["fused", "scratch"]), default="fused", show_default=True,
              help="fused: PyTorch kernels; scratch: the textbook equations (RNN cells; Transformer attention).")
@data_dir_option
@click.option("--valid", "valid_file", type=click.Path(dir_okay=False), default=None,
              help="Validation text for a CORPUS that is a file (then all of that file trains) "
                   "[default: the file's last 5% of lines are held out].")
@click.option("--test", "test_file", type=click.Path(dir_okay=False), default=None,
              help="Test text for a CORPUS that is a file [default: its last 5% of lines are held out].")
@click.option("--tokenizer", type=TOKENIZER, default=None,
              help="Override the corpus's tokenizer (e.g. char, bpe:8000: learned on the training text).")
@click.option("--min-count", type=int, default=1, show_default=True, help="Vocabulary: minimum training count.")
@click.option("--max-vocab", type=int, default=None, help="Vocabulary: keep at most this many word types.")
@click.option("--emb-size", type=int, default=None, help="RNN embedding width [default: --hidden-size].")
@click.option("--hidden-size", type=int, default=None,
              help=f"RNN state width [default: {_LSTM.get('hidden_size', _RNN.hidden_size)} LSTM, {_RNN.hidden_size} "
                   "other RNNs].")
@click.option("--layers", type=int, default=None,
              help=f"Layers [default: {_RNN.n_layers} for RNNs, {_TF.n_layers} for the Transformer].")
@click.option("--dropout", type=float, default=None,
              help=f"Dropout [default: {_LSTM.get('dropout', _RNN.dropout)} LSTM, {_RNN.dropout} other RNNs, "
                   f"{_TF.dropout} Transformer].")
@click.option("--tie/--no-tie", default=True, show_default=True, help="Tie input and output embeddings.")
@click.option("--locked-dropout/--no-locked-dropout", default=None,
              help="RNN: one dropout mask per sequence, shared across time steps (variational dropout).")
@click.option("--dropout-in", type=float, default=None, help="RNN: dropout on the embeddings [default: --dropout].")
@click.option("--emb-dropout", type=float, default=None, help="RNN: drop whole word types from the embeddings per batch.")
@click.option("--weight-drop", type=float, default=None,
              help="RNN: DropConnect on the hidden-to-hidden matrices (fused kernels kept).")
@click.option("--ar", type=float, default=None, help="RNN: activation regularisation weight (AWD-LSTM uses 2).")
@click.option("--tar", type=float, default=None, help="RNN: temporal activation regularisation weight (AWD-LSTM: 1).")
@click.option("--average", type=click.Choice(["none", "nt"]), default=None,
              help="nt: average the weights from the first validation without improvement (NT-ASGD).")
@click.option("--average-after", type=float, default=None,
              help="With --time-budget and --average nt: start averaging at this fraction of the budget at the latest.")
@click.option("--d-model", type=int, default=_TF.d_model, show_default=True, help="Transformer width.")
@click.option("--heads", type=int, default=_TF.n_heads, show_default=True,
              help="Transformer attention heads (divide --d-model).")
@click.option("--d-ff", type=int, default=None, help="Transformer feed-forward width [default: 4 x --d-model].")
@click.option("--block-size", type=int, default=_TF.block_size, show_default=True, help="Transformer context window.")
@click.option("--positional", type=click.Choice(["sinusoidal", "learned", "relative"]), default=_TF.positional,
              show_default=True, help="Transformer positions: added to the embeddings (sinusoidal, learned), or a "
                                      "learned bias per head and distance in the attention scores (relative, T5's).")
@click.option("--epochs", type=click.IntRange(min=1), default=None, help="Maximum epochs " + _both("epochs") + ".")
@click.option("--time-budget", type=float, default=None,
              help="Wall-clock minutes for the whole command: loading, training, validation and the test pass.")
@click.option("--batch-size", type=int, default=None, help="Rows per batch " + _both("batch_size") + ".")
@click.option("--bptt", type=int, default=None, help=f"Tokens per row per batch [default: {_RNN_TRAIN.bptt} RNN, "
                                                      "--block-size Transformer].")
@click.option("--batch-scheme", type=click.Choice(["sequential", "random"]), default=None,
              help="sequential: carry state across batches (truncated BPTT); random: random offsets, fresh state "
                   + _both("batch_scheme") + ".")
@click.option("--optimizer", type=click.Choice(["sgd", "adamw"]), default=None, help=_both("optimizer"))
@click.option("--lr", type=float, default=None, help="Learning rate [default: 20 for sgd, 1e-3 for adamw].")
@click.option("--momentum", type=float, default=0.0, show_default=True, help="SGD momentum.")
@click.option("--weight-decay", type=float, default=None, help=_both("weight_decay", "{:g}".format))
@click.option("--clip", type=float, default=None, help="Max global gradient norm, 0 = off " + _both("clip", "{:g}".format) + ".")
@click.option("--schedule", type=click.Choice(["plateau", "cosine", "constant"]), default=None,
              help="plateau: lr x --lr-decay when valid ppl stalls; cosine: warmup + cosine " + _both("schedule") + ".")
@click.option("--lr-decay", type=float, default=_RNN_TRAIN.lr_decay, show_default=True,
              help="Plateau: lr factor when valid ppl stalls.")
@click.option("--plateau-threshold", type=float, default=None,
              help="Plateau: relative valid-ppl gain an epoch needs to count as progress "
                   + _both("plateau_threshold", "{:g}".format) + ".")
@click.option("--warmup", type=int, default=None,
              help=f"Cosine warmup steps [default: {_TF_TRAIN.warmup_steps} for cosine].")
@click.option("--patience", type=int, default=_RNN_TRAIN.patience, show_default=True,
              help="Early stop after this many epochs without improvement (0 = never).")
@click.option("--eval-batch-size", type=int, default=1, show_default=True, help="Rows in the validation pass (1 = exact full history).")
@click.option("--bf16/--no-bf16", default=None,
              help="bfloat16 autocast of the matmuls [default: on where the CPU has native bf16 (AVX512-BF16/AMX); "
                   "probed, falls back to float32 with a note where its kernels are missing].")
@seed_option()
@threads_option()
@click.option("-o", "--output", "--out", "out", type=click.Path(dir_okay=False), default=None,
              help="Checkpoint file [default: runs/CORPUS-MODEL.pt].")
@click.option("--resume", type=click.Path(dir_okay=False), default=None, help="Continue the run saved in this checkpoint.")
@click.option("--ngram-residual", "ngram_residual", type=click.Path(dir_okay=False), default=None, metavar="MODEL",
              help="Train on the residual of this n-gram model (ARPA, .npz, KenLM trie): the network's logits are "
                   "added to its log-probabilities (a product of experts); the checkpoint holds both.")
@click.option("--ngram-weight", type=click.FloatRange(min=0), default=1.0, show_default=True,
              help="With --ngram-residual: log p = log_softmax(network logits + W ln p_ngram).")
@click.option("--ngram-folds", type=click.IntRange(min=0), default=2, show_default=True,
              help="With --ngram-residual: score each group of training rows by an n-gram model (same order, "
                   "--ngram-fold-smoothing) trained on the rest of the text, as the test text is scored by one "
                   "that never saw it; 0 = the MODEL itself everywhere.")
@click.option("--ngram-fold-smoothing", type=click.Choice(["mkn", "kn", "wb", "absolute"]), default="mkn",
              show_default=True, help="The fold models' smoother.")
@click.option("--dry-run", is_flag=True, help="Train one batch, validate on a prefix, write the checkpoint, stop.")
@click.option("--progress/--no-progress", default=True, show_default=True, help="Progress bar on stderr.")
@json_option
def train_cmd(corpus, model_name, impl, data_dir, valid_file, test_file, tokenizer, min_count, max_vocab, emb_size, hidden_size, layers,
              dropout, tie, locked_dropout, dropout_in, emb_dropout, weight_drop, ar, tar, average, average_after, d_model, heads, d_ff, block_size, positional, epochs, time_budget, batch_size, bptt,
              batch_scheme, optimizer, lr, momentum, weight_decay, clip, schedule, lr_decay, plateau_threshold, warmup,
              patience,
              eval_batch_size, bf16, seed, threads, out, resume, ngram_residual, ngram_weight, ngram_folds,
              ngram_fold_smoothing, dry_run, progress, as_json):
    """Train a neural LM on CORPUS (a registered name such as ptb, or a text file).

    CORPUS defaults to the toy corpus, or with --resume to the corpus the run was trained on.
    """
    t_command = time.perf_counter()  # a --time-budget covers the whole command, loading included
    _set_threads(threads)
    from ..checkpoint import best_path, load_checkpoint
    from ..models import build_model, model_kind
    from ..models import model_name as model_name_of
    from ..precision import choose_precision
    from ..training.trainer import Trainer

    if resume and ngram_residual:
        raise InputError("--ngram-residual with --resume: the checkpoint already holds its n-gram model (if any)",
                         fix="drop --ngram-residual to resume, or start a new run with another --out")
    # Where the model goes is checked before anything is loaded or trained.
    if out is None and not resume:
        out = os.path.join("runs", f"{Path(corpus or 'toy').stem}-{model_name or 'lstm'}"
                                   f"{'+ngram' if ngram_residual else ''}.pt")
    if out is not None:
        check_writable(out, what="checkpoint")
        check_writable(best_path(out), what="checkpoint")
    if corpus is None:
        corpus = "toy"
        if resume:
            data = (load_checkpoint(resume).get("train") or {}).get("data") or {}
            corpus = data.get("corpus") or corpus
            if tokenizer is None and data.get("tokenizer"):
                tokenizer = TokenizerSpec.from_dict(data["tokenizer"])
            valid_file, test_file = valid_file or data.get("valid"), test_file or data.get("test")
    ds = _load_dataset(corpus, data_dir, tokenizer, min_count, max_vocab, valid=valid_file, test=test_file)
    data_info = {"corpus": corpus, "tokenizer": ds.vocab.tokenizer.to_dict() if ds.vocab.tokenizer else None,
                 "train_tokens": ds["train"].n_tokens, "split_policy": ds.corpus.split_policy}
    data_info.update({k: v for k, v in (("valid", valid_file), ("test", test_file)) if v is not None})
    has_test = "test" in ds.encoded and ds["test"].n_tokens > 0
    # The test pass after training is part of the budget: the trainer leaves time for it.
    budget_kw = dict(clock_start=t_command, reserve_tokens=ds["test"].n_tokens if has_test and not dry_run else 0)
    if resume:
        trainer = _resume_trainer(resume, ds, out, model_name, epochs, time_budget, bf16, dry_run, progress,
                                  data_info, budget_kw)
    else:
        model_name = model_name or "lstm"
        kind = model_kind(model_name)
        rnn_only = {"--locked-dropout": locked_dropout, "--dropout-in": dropout_in, "--emb-dropout": emb_dropout,
                    "--weight-drop": weight_drop, "--ar": ar, "--tar": tar}
        given = [k for k, v in rnn_only.items() if v is not None]
        if kind != "rnn" and given:
            raise InputError(f"{', '.join(given)}: only for recurrent models, and --model {model_name} is not one",
                             fix=f"drop {', '.join(given)}, or train --model lstm")
        precision = choose_precision(bf16)
        _echo_err(f"precision: {precision.reason}")
        # Preset, recipe and these options meet in one place (neural.config.resolve_lm_config).
        arch_options = dict(impl=impl, emb_size=emb_size, hidden_size=hidden_size, locked_dropout=locked_dropout,
                            dropout_in=dropout_in, emb_dropout=emb_dropout, weight_drop=weight_drop) \
            if kind == "rnn" else dict(
            d_model=d_model, n_heads=heads, d_ff=d_ff, block_size=block_size, positional=positional,
            attention="scratch" if impl == "scratch" else "sdpa")
        cfg, tcfg = resolve_lm_config(
            model_name, vocab_size=len(ds.vocab),
            model=dict(arch_options, n_layers=layers, dropout=dropout, tie_weights=tie),
            train=dict(epochs=1 if dry_run else epochs, batch_size=batch_size, bptt=bptt, batch_scheme=batch_scheme,
                       optimizer=optimizer, lr=lr, momentum=momentum, weight_decay=weight_decay, clip=clip,
                       schedule=schedule, lr_decay=lr_decay, plateau_threshold=plateau_threshold, warmup_steps=warmup,
                       patience=patience, seed=seed, time_budget=time_budget, eval_batch_size=eval_batch_size,
                       max_batches=1 if dry_run else None, bf16=precision.bf16, ar=ar, tar=tar, average=average,
                       average_after=average_after))
        tcfg.validate()
        model = build_model(kind, cfg, seed=seed)
        if ngram_residual is not None:
            from corpora.modelkinds import residual_lm

            model = residual_lm(model, ngram_residual, ds.vocab.itos_, folds=ngram_folds,
                                fold_smoothing=ngram_fold_smoothing, weight=ngram_weight)
            if model.config.unmapped:
                _echo_err(f"warning: {model.config.unmapped:,} of the {ds.vocab.n_types:,} types are not in "
                          f"{ngram_residual}: each is scored as its <unk>")
            _build_folds(model, ds, tcfg)
        trainer = Trainer(model, ds.vocab, ds["train"].ids, ds["valid"].ids, tcfg, out=out, progress=progress,
                          log=_echo_err, data_info=data_info, **budget_kw)
        _echo_err(f"{model.describe()}\n{tcfg}\ncorpus {corpus}: {ds['train'].n_tokens:,} training tokens, "
                  f"{ds.vocab.n_types:,} types -> {out}")
    result = fit_and_report(trainer, f"ngramlm neural train {corpus}")
    summary = {"checkpoint": str(trainer.out), "best_checkpoint": result.best_checkpoint,
               "architecture": model_name_of(trainer.model), "corpus": corpus, "stopped": result.stopped,
               "epochs": result.epochs_done, "steps": result.steps, "train_seconds": result.seconds,
               "tokens_per_second": result.tokens_per_second, "best_valid_ppl": result.best_val_ppl, "test": None}
    if has_test:
        summary["test"] = _score_test(trainer, ds["test"].ids, eval_batch_size, dry_run, as_json)
    used = time.perf_counter() - t_command
    summary.update({"budget_minutes": time_budget, "wall_seconds": used, "write_failure": trainer.write_failure})
    if time_budget is not None:
        _echo_err(f"time budget {time_budget:g} min, used {used / 60:.2f} min ({100 * (used / (60 * time_budget) - 1):+.0f} %)")
    if as_json:
        click.echo(json.dumps(summary, indent=2, default=float))
    if trainer.write_failure:
        # Training succeeded but its --out could not be written: say where the model is, exit non-zero.
        raise click.ClickException(trainer.write_failure)


def _resume_trainer(resume, ds, out, model_name, epochs, time_budget, bf16, dry_run, progress, data_info,
                    budget_kw):
    """A Trainer that goes on from the checkpoint ``resume``: the options given on this command line
    (epochs, time budget, bf16, a dry run's one batch) override the saved ones."""
    from ..training.trainer import Trainer

    check_writable(out or resume, what="checkpoint")
    overrides = {k: v for k, v in dict(epochs=epochs, time_budget=time_budget).items() if v is not None}
    if bf16 is not None:
        overrides["bf16"] = bf16
    if dry_run:
        overrides["max_batches"] = 1
    trainer = Trainer.resume(resume, ds["train"].ids, ds["valid"].ids, vocab=ds.vocab, expect_name=model_name,
                             overrides=overrides, out=out or resume, progress=progress, log=_echo_err,
                             data_info=data_info, **budget_kw)
    _build_folds(trainer.model, ds, trainer.cfg)
    _echo_err(f"resuming {resume} at epoch {trainer.position['epoch'] + 1}, batch {trainer.position['batch']} "
              f"(step {trainer.step}, best valid ppl {trainer.best_val_ppl:.2f})")
    return trainer


def _build_folds(model, ds, tcfg) -> None:
    """A residual model with cross-fitting gets its fold models, trained on the training text now."""
    if getattr(model, "kind", None) != "residual" or not model.config.folds:
        return
    from corpora.modelkinds import residual_module

    c = model.config
    if tcfg.batch_scheme != "sequential":
        raise InputError(f"--ngram-folds {c.folds} needs sequential batches (each row one stretch of the text)",
                         fix="use --batch-scheme sequential, or --ngram-folds 0")
    t0 = time.perf_counter()
    model.set_folds(residual_module().cross_fit_folds(ds["train"].ids, ds.vocab, batch_size=tcfg.batch_size,
                                                      folds=c.folds, order=c.ngram_order,
                                                      smoothing=c.fold_smoothing))
    _echo_err(f"cross-fitting: {c.folds} order-{c.ngram_order} {c.fold_smoothing} models, each trained without "
              f"the rows it scores ({time.perf_counter() - t0:.1f} s)")


def _score_test(trainer, test_ids, eval_batch_size, dry_run: bool, as_json: bool) -> dict:
    """The test split scored by the best checkpoint (the last weights where none was kept), with the
    thread count the trainer's last probe found faster; printed unless the summary goes out as JSON."""
    from ..checkpoint import best_path, load_model
    from ..evaluation import evaluate
    from ..training.trainer import eval_threads

    best = best_path(trainer.out)
    model = load_model(best)[0] if best.exists() else trainer.model
    with eval_threads(trainer.eval_threads):
        test = evaluate(model, test_ids, batch_size=eval_batch_size, max_tokens=2000 if dry_run else None)
    if not as_json:
        click.echo(f"test: {test.n_predicted:,} tokens predicted, log-prob {test.log10_prob:.2f} (log10), "
                   f"ppl {test.ppl:.2f}, {test.bits_per_token:.4f} bits/token")
    return {"tokens": test.n_predicted, "log10_prob": test.log10_prob, "ppl": test.ppl,
            "bits_per_token": test.bits_per_token}


@neural_group.command("ppl")
@click.argument("checkpoint", type=click.Path(dir_okay=False))
@click.argument("text_or_corpus", required=False)
@click.option("--split", default="test", show_default=True, help="Split of a registered corpus.")
@data_dir_option
@click.option("--batch-size", type=int, default=1, show_default=True, help="Rows scored in parallel (1 = full history).")
@click.option("--cache", is_flag=True,
              help="Also score with a unigram cache and a neural (continuous) cache over the model's states.")
@click.option("--cache-window", type=click.IntRange(min=1), default=2000, show_default=True,
              help="Cache: the last W positions.")
@click.option("--cache-theta", type=float, default=None,
              help="Neural cache: theta, the sharpness of exp(theta h_t.h_i) [default: tuned on the valid split].")
@click.option("--cache-lambda", type=float, default=None,
              help="Cache: the interpolation weight lambda "
                   "[default: tuned on the valid split; give with --cache-theta].")
@click.option("--dynamic-eval", is_flag=True,
              help="Also score with dynamic evaluation: one gradient step after each scored segment.")
@click.option("--dyn-rule", type=click.Choice(["rms", "sgd"]), default="rms", show_default=True,
              help="rms: steps divided by the gradient RMS measured on the training text; sgd: plain steps.")
@click.option("--dyn-lr", type=float, default=None,
              help="Dynamic evaluation: learning rate [default: tuned on the valid split].")
@click.option("--dyn-decay", type=float, default=None,
              help="Dynamic evaluation: pull toward the trained weights per step "
                   "[default: tuned with the lr; 0 with --dyn-lr].")
@click.option("--dyn-segment", type=click.IntRange(min=1), default=20, show_default=True,
              help="Dynamic evaluation: tokens per segment (one update per segment).")
@click.option("--tune-tokens", type=click.IntRange(min=1), default=None,
              help="Tune on this prefix of the valid split only [default: all of it].")
@threads_option()
@json_option
def ppl_cmd(checkpoint, text_or_corpus, split, data_dir, batch_size, cache, cache_window, cache_theta, cache_lambda,
            dynamic_eval, dyn_rule, dyn_lr, dyn_decay, dyn_segment, tune_tokens, threads, as_json):
    """Perplexity of CHECKPOINT on a corpus split or a text file [default: its training corpus].

    --cache and --dynamic-eval add a table comparing plain, cache, dynamic and both,
    with their parameters tuned on the corpus's valid split unless given.
    """
    from corpora.accounting import format_report

    adapt = None
    if cache or dynamic_eval:
        from ..adaptation.adaptive import AdaptOptions

        adapt = AdaptOptions(cache=cache, window=cache_window, theta=cache_theta, lam=cache_lambda,
                             dynamic=dynamic_eval, rule=dyn_rule, lr=dyn_lr, decay=dyn_decay,
                             segment_len=dyn_segment, tune_tokens=tune_tokens)
    elif any(v is not None for v in (cache_theta, cache_lambda, dyn_lr, dyn_decay)):
        raise InputError("--cache-theta/--cache-lambda/--dyn-lr/--dyn-decay have no effect on their own",
                         fix="add --cache and/or --dynamic-eval")
    from ..scoring import ppl_summary

    summary = ppl_summary(checkpoint, text_or_corpus, split=split, data_dir=data_dir, batch_size=batch_size,
                          threads=threads, adapt=adapt, log=_echo_err, progress=True)
    if as_json:
        click.echo(json.dumps(summary, indent=2))
    elif adapt is None:
        click.echo(format_report(summary))
    else:
        from ..adaptation.adaptive import format_adaptation

        click.echo(format_report(summary) + "\n\n" + format_adaptation(summary["adaptation"]))


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
@click.option("--seed", type=int, default=None, help="Seed for sampling [default: a random one].")
@click.option("--stop-at-eos/--no-stop-at-eos", default=True, show_default=True, help="End a sample at </s>.")
@click.option("--lm", "lm_path", type=click.Path(dir_okay=False), default=None, metavar="MODEL",
              help="Fuse an n-gram model (ARPA, .npz, KenLM binary) of the same vocabulary: greedy and sampled "
                   "tokens follow log p + W log p_LM (sampling: a product of the two, renormalised).")
@click.option("--lm-weight", type=float, default=None, metavar="W", help="The weight of --lm (e.g. 0.3).")
@threads_option()
def generate_cmd(checkpoint, prompt, strategy, max_len, beam_size, alpha, temperature, top_k, num, seed,
                 stop_at_eos, lm_path, lm_weight, threads):
    """Generate text from CHECKPOINT."""
    _set_threads(threads)
    from ..checkpoint import load_model
    from ..generate import beam_search, encode_prompt, greedy, render, sample_lines

    if (lm_path is None) != (lm_weight is None):
        raise InputError("--lm and --lm-weight go together", fix="give both (e.g. --lm ptb3.arpa --lm-weight 0.3)")
    if lm_path is not None and strategy == "beam":
        raise InputError("--lm fuses an n-gram model into greedy and sampled generation", fix="use --strategy sample "
                         "or greedy (translators: `seq2seq translate --beam-size K --lm`)")
    model, vocab, _ = load_model(checkpoint)
    fused = {}
    if lm_path is not None:
        from corpora.modelkinds import fusion_lm

        fused = {"lm": fusion_lm(lm_path, vocab.itos_), "lm_weight": lm_weight}
    prompt_ids = encode_prompt(vocab, prompt)
    head = (prompt + " ") if prompt and vocab.tokenizer is not None and vocab.tokenizer.kind != "char" else prompt
    if strategy == "greedy":
        click.echo(head + render(vocab, greedy(model, prompt_ids, max_len, stop_at_eos, **fused)))
    elif strategy == "beam":
        for h in beam_search(model, prompt_ids, beam_size=beam_size, max_len=max_len, alpha=alpha)[:num]:
            click.echo(f"[{h.score:8.3f} | ln p {h.log_prob:8.2f}] {head}{render(vocab, h.ids)}")
    else:
        for line in sample_lines(model, vocab, prompt=prompt, max_len=max_len, num=num, temperature=temperature,
                                 seed=seed, top_k=top_k, stop_at_eos=stop_at_eos, **fused):
            click.echo(line)

