"""``ngramlm seq2seq train | translate | ppl``: the encoder-decoder on a parallel corpus.

``train --arch rnn`` (the default) trains the GRU translator of :mod:`neural.seq2seq.rnn`, ``--arch
transformer`` the encoder-decoder Transformer of :mod:`neural.seq2seq.transformer`; ``ppl`` and
``translate`` load either from its checkpoint.

The corpus (``fra-eng`` by default) is split with a seed and its vocabularies are fitted on
the training pairs (:func:`corpora.parallel.load_parallel`); a checkpoint records the corpus,
the split seed and the vocabulary settings, so ``ppl``/``translate`` with no text score the
same held-out pairs.
"""
from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path
from types import SimpleNamespace
from typing import Optional

import click

from corpora.errors import InputError
from corpora.options import data_dir_option, json_option, seed_option, threads_option
from corpora.textio import check_writable

from ..config import CELLS, SEQ2SEQ_PRESETS, SEQ2SEQ_TRAIN, resolve_seq2seq_config

_S2S = SEQ2SEQ_PRESETS["default"]
ARCHS = ("rnn", "transformer")
# The Transformer translator's defaults, for the help texts (the same numbers as neural.seq2seq.transformer's,
# which imports torch).
_S2T = SimpleNamespace(d_model=256, n_heads=4, dropout=0.3)
_S2T_TRAIN = SimpleNamespace(lr=5e-4)
_RNN_ONLY = {"cell": "--cell", "impl": "--impl", "emb_size": "--emb-size", "hidden_size": "--hidden-size",
             "attn_size": "--attn-size"}
_TRANSFORMER_ONLY = {"d_model": "--d-model", "heads": "--heads", "d_ff": "--d-ff"}


def _check_arch_options(arch: str, *, attention: bool, **given) -> None:
    """Options of the other architecture are refused, not silently ignored."""
    other = _RNN_ONLY if arch == "transformer" else _TRANSFORMER_ONLY
    wrong = [opt for name, opt in other.items() if given.get(name) is not None]
    if arch == "transformer" and not attention:
        wrong.append("--no-attention")
    if wrong:
        fix = ("drop them (the Transformer's options: --d-model, --heads, --d-ff, --layers, --dropout)"
               if arch == "transformer" else "pass --arch transformer, or drop them")
        raise click.UsageError(f"{', '.join(wrong)} do{'es' if len(wrong) == 1 else ''} not apply to --arch {arch}; "
                               f"{fix}")


def _echo_err(msg: str) -> None:
    click.echo(msg, err=True)


def _corpus(name: str, data_dir, split_seed: int, min_count: Optional[int], max_pairs: Optional[int]):
    from corpora.parallel import load_parallel

    return load_parallel(name, data_dir=data_dir, seed=split_seed, min_count=min_count, max_pairs=max_pairs)


def _data_info(corpus, split_seed, min_count, max_pairs) -> dict:
    from corpora.registry import REGISTRY

    # A registered corpus by name (found again in any data dir); a TSV by its absolute path.
    name = corpus.name if corpus.name in REGISTRY or not corpus.path else str(Path(corpus.path).resolve())
    return {"corpus": name, "split_seed": split_seed, "min_count": min_count, "max_pairs": max_pairs,
            "train_pairs": len(corpus.pairs["train"])}


def _recorded_corpus(path, ckpt: dict, data_dir):
    info = (ckpt.get("train") or {}).get("data") or {}
    if not info.get("corpus"):
        raise InputError("the checkpoint does not record its parallel corpus", path=path,
                         fix="train it with `ngramlm seq2seq train`")
    return _corpus(info["corpus"], data_dir, info.get("split_seed", 0), info.get("min_count"), info.get("max_pairs"))


def _check_vocabs(path, model, tgt_vocab, corpus) -> None:
    if model.src_vocab != corpus.src_vocab or tgt_vocab != corpus.tgt_vocab:
        raise InputError(f"the checkpoint's vocabularies differ from those of {corpus.name} with this split "
                         "(another corpus, split seed, --min-count or --max-pairs)", path=path,
                         fix="resume/score with the settings the run was trained with")


# ---------------------------------------------------------------------------- the group
@click.group(name="seq2seq", context_settings={"help_option_names": ["-h", "--help"]})
def seq2seq_group() -> None:
    """Encoder-decoder translation (bidirectional RNN encoder with Bahdanau attention, or a Transformer;
    beam search)."""


@seq2seq_group.command("train")
@click.argument("corpus", required=False)
@click.option("--arch", type=click.Choice(ARCHS), default="rnn", show_default=True,
              help="rnn: bidirectional RNN encoder and RNN decoder; transformer: the encoder-decoder Transformer.")
@click.option("--size", type=click.Choice(list(SEQ2SEQ_PRESETS)), default="default", show_default=True,
              help="Preset sizes (tiny, small: quick runs); the options below override them.")
@click.option("--attention/--no-attention", default=True, show_default=True,
              help="--arch rnn: additive (Bahdanau) attention, or the plain encoder-decoder (one context vector).")
@click.option("--cell", type=click.Choice(CELLS), default=None, help=f"--arch rnn  [default: {_S2S.cell}]")
@click.option("--impl", type=click.Choice(["fused", "scratch"]), default=None,
              help="--arch rnn: fused: PyTorch's RNN kernels; scratch: the textbook equations  [default: fused].")
@click.option("--emb-size", type=int, default=None, help=f"--arch rnn  [default: {_S2S.emb_size}]")
@click.option("--hidden-size", type=int, default=None,
              help=f"--arch rnn: state width (the encoder's per direction)  [default: {_S2S.hidden_size}].")
@click.option("--attn-size", type=int, default=None,
              help=f"--arch rnn: additive attention width  [default: {_S2S.attn_size}].")
@click.option("--d-model", type=int, default=None,
              help=f"--arch transformer: embedding and residual width  [default: {_S2T.d_model}].")
@click.option("--heads", type=int, default=None,
              help=f"--arch transformer: attention heads, dividing --d-model  [default: {_S2T.n_heads}].")
@click.option("--d-ff", type=int, default=None,
              help="--arch transformer: feed-forward width  [default: 2 x --d-model].")
@click.option("--layers", type=int, default=None,
              help=f"Encoder layers (and as many decoder layers)  [default: {_S2S.n_layers}].")
@click.option("--dropout", type=float, default=None,
              help=f"Dropout rate  [default: {_S2S.dropout} (rnn), {_S2T.dropout} (transformer)].")
@click.option("--epochs", type=click.IntRange(min=1), default=SEQ2SEQ_TRAIN.epochs, show_default=True, help="Maximum epochs.")
@click.option("--time-budget", type=float, default=None,
              help="Wall-clock minutes for the whole command: loading, training, validation and the test pass.")
@click.option("--batch-size", type=int, default=SEQ2SEQ_TRAIN.batch_size, show_default=True, help="Pairs per batch.")
@click.option("--lr", type=float, default=None,
              help=f"Adam learning rate  [default: {SEQ2SEQ_TRAIN.lr:g} (rnn), {_S2T_TRAIN.lr:g} (transformer)].")
@click.option("--clip", type=float, default=SEQ2SEQ_TRAIN.clip, show_default=True, help="Max gradient norm (0 = off).")
@click.option("--patience", type=int, default=SEQ2SEQ_TRAIN.patience, show_default=True,
              help="Early stop after this many epochs without improvement (0 = never).")
@click.option("--min-count", type=int, default=None, help="Vocabulary threshold [default: the corpus's, 2 for fra-eng].")
@click.option("--max-pairs", type=int, default=None, help="Use only this many pairs (after shuffling).")
@click.option("--split-seed", type=int, default=0, show_default=True, help="Seed of the train/valid/test shuffle.")
@data_dir_option
@seed_option()
@threads_option()
@click.option("-o", "--output", "--out", "out", type=click.Path(dir_okay=False), default=None,
              help="Checkpoint file [default: runs/CORPUS-seq2seq[-attn|-transformer].pt].")
@click.option("--resume", type=click.Path(dir_okay=False), default=None, help="Continue the run saved in this checkpoint.")
@click.option("--dry-run", is_flag=True, help="Train one batch, validate on a prefix, write the checkpoint, stop.")
@click.option("--progress/--no-progress", default=True, show_default=True, help="Progress bar on stderr.")
@json_option
def train_cmd(corpus, arch, size, attention, cell, impl, emb_size, hidden_size, attn_size, d_model, heads, d_ff,
              layers, dropout, epochs, time_budget, batch_size, lr, clip, patience, min_count, max_pairs, split_seed,
              data_dir, seed, threads, out, resume, dry_run, progress, as_json):
    """Train a translator on CORPUS (a registered parallel corpus) [default: fra-eng]."""
    t_command = time.perf_counter()
    _check_arch_options(arch, attention=attention, cell=cell, impl=impl, emb_size=emb_size, hidden_size=hidden_size,
                        attn_size=attn_size, d_model=d_model, heads=heads, d_ff=d_ff)
    import torch

    torch.set_num_threads(threads)
    from ..checkpoint import best_path, load_checkpoint, load_model
    from ..models import build_model, model_name
    from ..training.seq2seq import Seq2SeqTrainer

    if out is None and not resume:
        tail = "-transformer" if arch == "transformer" else "-attn" if attention else ""
        out = os.path.join("runs", f"{corpus or 'fra-eng'}-seq2seq{tail}.pt")
    if out is not None:
        check_writable(out, what="checkpoint")
        check_writable(best_path(out), what="checkpoint")
    if resume:
        ckpt = load_checkpoint(resume)
        data = (ckpt.get("train") or {}).get("data") or {}
        if ckpt["model"]["kind"] != "seq2seq":
            raise InputError(f"the checkpoint holds a {ckpt['model']['name']} language model, not a translator",
                             path=resume, fix="resume language models with `ngramlm neural train --resume`")
        corpus = corpus or data.get("corpus")
        split_seed, min_count, max_pairs = data.get("split_seed", 0), data.get("min_count"), data.get("max_pairs")
    par = _corpus(corpus or "fra-eng", data_dir, split_seed, min_count, max_pairs)
    train, valid = par.encode("train"), par.encode("valid")
    data_info = _data_info(par, split_seed, min_count, max_pairs)
    n_test = par.sizes()["test"]["tgt_tokens"] + par.sizes()["test"]["pairs"]
    budget_kw = dict(clock_start=t_command, reserve_tokens=0 if dry_run else n_test)
    if resume:
        overrides = {k: v for k, v in dict(epochs=epochs, time_budget=time_budget).items() if v is not None}
        if dry_run:
            overrides["max_batches"] = 1
        trainer = Seq2SeqTrainer.resume(resume, train, valid, vocab=par.tgt_vocab, overrides=overrides,
                                        out=out or resume, progress=progress, log=_echo_err, data_info=data_info,
                                        **budget_kw)
        _check_vocabs(resume, trainer.model, trainer.vocab, par)
        _echo_err(f"resuming {resume} at epoch {trainer.position['epoch'] + 1}, batch {trainer.position['batch']}")
    else:
        train_over = dict(epochs=1 if dry_run else epochs, batch_size=batch_size, lr=lr, clip=clip, patience=patience,
                          seed=seed, time_budget=time_budget, max_batches=1 if dry_run else None)
        if arch == "transformer":
            from ..seq2seq.transformer import resolve_seq2seq_transformer_config

            cfg, tcfg = resolve_seq2seq_transformer_config(
                vocab_size=len(par.tgt_vocab), src_vocab_size=len(par.src_vocab), size=size,
                model=dict(d_model=d_model, n_heads=heads, d_ff=d_ff, n_layers=layers, dropout=dropout),
                train=train_over)
        else:
            cfg, tcfg = resolve_seq2seq_config(
                vocab_size=len(par.tgt_vocab), src_vocab_size=len(par.src_vocab), size=size,
                model=dict(cell=cell, impl=impl, emb_size=emb_size, hidden_size=hidden_size, n_layers=layers,
                           dropout=dropout, attention=attention, attn_size=attn_size),
                train=train_over)
        tcfg.validate()
        model = build_model("seq2seq", cfg, seed=seed)
        model.src_vocab = par.src_vocab
        trainer = Seq2SeqTrainer(model, par.tgt_vocab, train, valid, tcfg, out=out, progress=progress,
                                 log=_echo_err, data_info=data_info, **budget_kw)
        sz = par.sizes()
        _echo_err(f"{model.describe()}\n{tcfg}\n{par.name}: {sz['train']['pairs']:,} training pairs, source "
                  f"{par.src_vocab.n_types:,} / target {par.tgt_vocab.n_types:,} types -> {out}")
    from .lm import fit_and_report

    result = fit_and_report(trainer, "ngramlm seq2seq train")
    best = best_path(trainer.out)
    model = load_model(best, translator=True)[0] if best.exists() else trainer.model
    summary = {"checkpoint": str(trainer.out), "best_checkpoint": result.best_checkpoint,
               "architecture": model_name(model), "corpus": par.name, "stopped": result.stopped,
               "epochs": result.epochs_done, "steps": result.steps, "train_seconds": result.seconds,
               "best_valid_ppl": result.best_val_ppl, "test": None, "bleu": None}
    if not dry_run:
        from ..seq2seq.translate import bleu_table, conditional_ppl

        summary["test"] = conditional_ppl(model, par, "test")
        summary["bleu"] = bleu_table(model, par, "test")[0]
        if not as_json:
            t, b = summary["test"], summary["bleu"]
            click.echo(f"test: {t['pairs']:,} pairs, {t['tokens']:,} target tokens predicted, conditional ppl "
                       f"{t['ppl']:.2f}; greedy BLEU {b['bleu']:.2f} ({b['signature']})")
    summary["wall_seconds"] = time.perf_counter() - t_command
    if as_json:
        click.echo(json.dumps(summary, indent=2, default=float))
    if trainer.write_failure:
        raise click.ClickException(trainer.write_failure)


def _load_translator(checkpoint):
    from ..checkpoint import load_model

    return load_model(checkpoint, translator=True)


@seq2seq_group.command("ppl")
@click.argument("checkpoint", type=click.Path(dir_okay=False))
@click.option("--split", type=click.Choice(["train", "valid", "test"]), default="test", show_default=True)
@data_dir_option
@threads_option()
@json_option
def ppl_cmd(checkpoint, split, data_dir, threads, as_json):
    """Conditional perplexity of CHECKPOINT on a split of the corpus it was trained on."""
    import torch

    from ..seq2seq.translate import conditional_ppl

    torch.set_num_threads(threads)
    model, vocab, ckpt = _load_translator(checkpoint)
    par = _recorded_corpus(checkpoint, ckpt, data_dir)
    _check_vocabs(checkpoint, model, vocab, par)
    d = {"model": str(checkpoint), "architecture": ckpt["model"]["name"], "text": f"{par.name}:{split}",
         "n_types": vocab.n_types, **conditional_ppl(model, par, split)}
    if as_json:
        click.echo(json.dumps(d, indent=2))
    else:
        click.echo(f"{d['text']}: {d['pairs']:,} pairs, {d['tokens']:,} target tokens predicted "
                   f"({d['target_oovs']:,} <unk>), ln P {d['log_prob_nats']:.2f}, log10 P {d['log10_prob']:.2f}; "
                   f"conditional ppl {d['ppl']:.3f}, {d['bits_per_token']:.4f} bits/token")


@seq2seq_group.command("translate")
@click.argument("checkpoint", type=click.Path(dir_okay=False))
@click.argument("text", required=False)
@click.option("--split", type=click.Choice(["train", "valid", "test"]), default=None,
              help="Translate this split of the training corpus (and score BLEU against its references).")
@click.option("--beam-size", type=int, default=1, show_default=True, help="1 = greedy decoding.")
@click.option("--alpha", type=float, default=0.0, show_default=True,
              help="Length normalisation of complete hypotheses: log P / T^alpha (0 = raw log-probability).")
@click.option("--max-len", type=int, default=30, show_default=True, help="Target tokens at most.")
@click.option("-n", "--nbest", type=int, default=1, show_default=True, help="Hypotheses per sentence (beam search).")
@click.option("--temperature", type=float, default=None,
              help="Sample each token from softmax(log P / T) instead of searching (1 = the model's distribution).")
@click.option("--lm", "lm_path", type=click.Path(dir_okay=False), default=None, metavar="MODEL",
              help="Shallow fusion: a target-side n-gram model (ARPA, .npz, KenLM binary) whose log-probability, "
                   "times --lm-weight, is added to the translator's at every step of the search.")
@click.option("--lm-weight", type=float, default=None, metavar="W",
              help="The weight of --lm (e.g. 0.2; tune it on the valid split: `seq2seq fusion`).")
@seed_option(help="Seed of --temperature sampling.")
@data_dir_option
@threads_option()
@json_option
def translate_cmd(checkpoint, text, split, beam_size, alpha, max_len, nbest, temperature, lm_path, lm_weight, seed,
                  data_dir, threads, as_json):
    """Translate TEXT (a file of source sentences, one per line; '-' or nothing: stdin) with CHECKPOINT."""
    import torch

    torch.set_num_threads(threads)
    from corpora.tokenize import make_tokenizer

    from ..generate import check_beam
    from ..seq2seq.translate import beam_translate, greedy_translate, ids_to_text, sample_translate

    check_beam(beam_size, max_len)
    if temperature is not None and beam_size != 1:
        raise InputError("--temperature samples one translation per sentence; it does not combine with --beam-size",
                         fix="drop one of them")
    if nbest < 1 or nbest > beam_size:
        raise InputError(f"--nbest {nbest} must be between 1 and --beam-size {beam_size}", fix="raise --beam-size")
    if (lm_path is None) != (lm_weight is None):
        raise InputError("--lm and --lm-weight go together", fix="give both (e.g. --lm fr3.arpa --lm-weight 0.2)")
    if lm_path is not None and temperature is not None:
        raise InputError("--lm fuses a language model into the search; --temperature samples", fix="drop one of them")
    model, vocab, ckpt = _load_translator(checkpoint)
    fused = {}
    if lm_path is not None:
        from corpora.modelkinds import fusion_lm

        fused = {"lm": fusion_lm(lm_path, vocab.itos_), "lm_weight": lm_weight}
        if fused["lm"].n_unmapped:
            _echo_err(f"note: {fused['lm'].n_unmapped:,} of the translator's {len(vocab):,} target ids are not in "
                      f"{lm_path}: they are scored as its <unk>")
    refs = None
    if split is not None:
        if text is not None:
            raise InputError("give TEXT or --split, not both", fix="drop one of them")
        par = _recorded_corpus(checkpoint, ckpt, data_dir)
        _check_vocabs(checkpoint, model, vocab, par)
        sources = par.encode(split)[0]
        lines = [line for line, _ in par.raw[split]]
        refs = [" ".join(t) for _, t in par.pairs[split]]
    else:
        from corpora.textio import decode_text, read_text

        if text in (None, "-"):
            stream = getattr(sys.stdin, "buffer", None)
            raw = stream.read() if stream is not None else sys.stdin.read().encode("utf-8")
            content = decode_text(raw, path="<stdin>")  # the same checks as a file: UTF-8, no NUL, not empty
        else:
            if not Path(text).is_file():
                raise InputError("no such file", path=text, fix="pass a text file of source sentences, or '-'")
            content = read_text(text)
        lines = content.split("\n")
        if lines and lines[-1] == "":
            lines.pop()
        spec = model.src_vocab.tokenizer
        tok = make_tokenizer(spec) if spec is not None else str.split
        sources = [model.src_vocab.encode(tok(line)) for line in lines]
    out_rows = []
    if temperature is not None:
        best = [[ids] for ids in sample_translate(model, sources, temperature=temperature, max_len=max_len, seed=seed)]
        scores = [[None] for _ in best]
    elif beam_size == 1:
        best = [[ids] for ids in greedy_translate(model, sources, max_len=max_len, **fused)]
        scores = [[None] for _ in best]
    else:
        best, scores = [], []
        for s in sources:
            hyps = beam_translate(model, s, beam_size=beam_size, max_len=max_len, alpha=alpha, **fused)[:nbest]
            best.append([h.ids for h in hyps])
            scores.append([h.score for h in hyps])
    for line, hyps, sc in zip(lines, best, scores):
        texts = [ids_to_text(vocab, h) for h in hyps]
        out_rows.append({"source": line, "translations": texts, "scores": sc})
        if not as_json:
            for t, s in zip(texts, sc):
                click.echo(t if s is None or nbest == 1 else f"{s:.4f}\t{t}")
    result = {"model": str(checkpoint), "beam_size": beam_size, "alpha": alpha, "temperature": temperature,
              "lm": lm_path, "lm_weight": lm_weight, "sentences": out_rows}
    if refs is not None:
        from ..seq2seq.translate import corpus_bleu

        bleu, sig = corpus_bleu([r["translations"][0] for r in out_rows], refs)
        result.update({"bleu": bleu, "signature": sig})
        _echo_err(f"BLEU {bleu:.2f} ({sig}) on {len(refs):,} {split} pairs")
    if as_json:
        click.echo(json.dumps(result, indent=2, ensure_ascii=False))


@seq2seq_group.command("target-text")
@click.argument("checkpoint", type=click.Path(dir_okay=False))
@click.option("--split", type=click.Choice(["train", "valid", "test"]), default="train", show_default=True)
@data_dir_option
def target_text_cmd(checkpoint, split, data_dir):
    """Print the target side of a split of CHECKPOINT's corpus, tokenized as the translator reads it (one
    sentence a line, tokens joined by spaces): the text to train a target-side n-gram model on for
    `seq2seq fusion` (`ngramlm train fr.txt --order 4 -o fr4.arpa`)."""
    from ..checkpoint import load_checkpoint

    ckpt = load_checkpoint(checkpoint)
    par = _recorded_corpus(checkpoint, ckpt, data_dir)
    click.echo("\n".join(" ".join(tokens) for tokens in par.target_sentences(split)))


@seq2seq_group.command("fusion")
@click.argument("checkpoint", type=click.Path(dir_okay=False))
@click.option("--lm", "lm_path", type=click.Path(dir_okay=False), required=True, metavar="MODEL",
              help="A target-side n-gram model (ARPA, .npz, KenLM binary), e.g. trained on `seq2seq target-text`.")
@click.option("--weights", default="0,0.1,0.2,0.3,0.5", show_default=True, metavar="W1,W2,...",
              help="The LM weights to try on the valid split (0: the translator alone).")
@click.option("--beam-size", type=int, default=1, show_default=True, help="1 = greedy decoding.")
@click.option("--alpha", type=float, default=0.0, show_default=True, help="Length normalisation (beam search).")
@click.option("--max-len", type=int, default=30, show_default=True)
@data_dir_option
@threads_option()
@json_option
def fusion_cmd(checkpoint, lm_path, weights, beam_size, alpha, max_len, data_dir, threads, as_json):
    """Shallow fusion of CHECKPOINT with a target-side n-gram model: the weight tuned by BLEU on the valid
    split, then test BLEU (95 % bootstrap interval) without and with it."""
    import torch

    torch.set_num_threads(threads)
    from corpora.modelkinds import fusion_lm

    from ..generate import check_beam
    from ..seq2seq.translate import tuned_fusion

    check_beam(beam_size, max_len)
    try:
        ws = [float(x) for x in weights.split(",")]
    except ValueError:
        raise click.BadParameter("use comma-separated numbers, e.g. 0,0.1,0.2", param_hint="--weights") from None
    if not ws or any(not w >= 0 for w in ws):
        raise click.BadParameter("the weights must be >= 0, e.g. 0,0.1,0.2", param_hint="--weights")
    model, vocab, ckpt = _load_translator(checkpoint)
    par = _recorded_corpus(checkpoint, ckpt, data_dir)
    _check_vocabs(checkpoint, model, vocab, par)
    lm = fusion_lm(lm_path, vocab.itos_)
    t0 = time.perf_counter()
    _echo_err(f"tuning the LM weight on {len(par.pairs['valid']):,} valid pairs over {ws} "
              f"({'greedy' if beam_size == 1 else f'beam {beam_size}'})")
    r = tuned_fusion(model, par, lm, weights=ws, beam=beam_size, alpha=alpha, max_len=max_len)
    r.update({"model": str(checkpoint), "lm": lm_path, "unmapped_target_ids": lm.n_unmapped,
              "seconds": round(time.perf_counter() - t0, 1)})
    if as_json:
        click.echo(json.dumps(r, indent=2, default=float))
        return
    for row in r["valid"]:
        click.echo(f"valid  w={row['lm_weight']:<4g} BLEU {row['bleu']:.2f}")

    def line(row):
        ci = row.get("ci")
        return f"BLEU {row['bleu']:.2f}" + (f" (95 % CI {ci[0]:.2f}-{ci[1]:.2f})" if ci else "")

    click.echo(f"test   translator alone: {line(r['test_alone'])}")
    click.echo(f"test   fused, w={r['weight']:g}: {line(r['test_fused'])}   [{r['test_fused']['signature']}]")
