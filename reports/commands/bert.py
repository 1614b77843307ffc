"""``ngramlm bert pretrain | pppl | embed | finetune``: BERT's command line (the model is :mod:`neural.bert.model`,
fine-tuning :mod:`neural.bert.finetune`).

Also :func:`pppl_summary`, the plain function behind ``pppl``: pseudo-perplexity of a
checkpoint on the word tokens of a text, optionally beside the perplexities of causal
models (n-gram or neural) on the same words.
"""
from __future__ import annotations

import json
import math
import os
import time
from pathlib import Path
from typing import Optional, Sequence

import click
import numpy as np

from corpora.errors import InputError
from corpora.options import data_dir_option, json_option, seed_option, threads_option
from corpora.textio import check_writable

from neural.bert.finetune import TASKS, FinetuneConfig
from neural.bert.model import BERT_PRESETS, PPPL_CAVEAT, PretrainConfig


def _set_threads(threads: Optional[int]) -> None:
    import torch

    if threads:
        torch.set_num_threads(threads)


def _ruled(threads: Optional[int]):
    """The shared-cores thread rule for a scoring loop (one torch thread while other processes use the
    cores, measured at the start and every few seconds): call the returned function after each batch."""
    import torch

    from neural.training.contention import ThreadRule

    rule = ThreadRule(threads or torch.get_num_threads(), log=_echo_err).start(0.2)
    return lambda _n: rule.tick()


def _echo_err(msg: str) -> None:
    click.echo(msg, err=True)


def load_bert(path):
    """``(model, vocab, checkpoint)`` of a BERT checkpoint; any other file is an InputError naming it."""
    from neural.checkpoint import load_checkpoint, model_from_checkpoint

    try:
        ckpt = load_checkpoint(path)  # no file / not a checkpoint / corrupt: errors that name the file
    except InputError as exc:
        if exc.fix and "neural train" in exc.fix:  # point at the command that writes BERT checkpoints
            raise InputError(exc.message, path=path, fix="pass a checkpoint written by `ngramlm bert pretrain -o`") \
                from None
        raise
    kind = (ckpt.get("model") or {}).get("kind")
    if kind != "bert":
        raise InputError(f"the checkpoint holds a {(ckpt.get('model') or {}).get('name', kind)} model, not BERT",
                         path=path, fix="score causal models with `ngramlm ppl` / `ngramlm neural ppl`; "
                                        "pass a file written by `ngramlm bert pretrain`")
    model, vocab = model_from_checkpoint(ckpt, path=path)
    return model, vocab, ckpt


def _text_sentences(path, text: Optional[str], split: str, data_dir, vocab, ckpt) -> tuple:
    """(token lists, description): a corpus split, a text file, ``-``, or -- when ``text`` is None --
    the ``split`` of the corpus the checkpoint was pretrained on."""
    from corpora.sources import read_text_source

    if text is None:
        text = ((ckpt.get("train") or {}).get("data") or {}).get("corpus")
        if not text:
            raise InputError("no text given and the checkpoint does not record its corpus", path=path,
                             fix="pass a corpus name or a text file")
    src = read_text_source(str(text), split=split, data_dir=data_dir, tokenizer=vocab.tokenizer)
    return src.sentences, src.description


def pppl_summary(checkpoint, text: Optional[str] = None, *, split: str = "test", data_dir=None,
                 max_sentences: Optional[int] = None, beside: Sequence[str] = (), threads: Optional[int] = 2) -> dict:
    """Pseudo-log-likelihood and pseudo-perplexity of a BERT checkpoint on a text (JSON-able dict).

    The tokens scored are the words of the sentences (OOVs as ``<unk>``), the same words the causal
    models predict; ``</s>`` is *not* counted (BERT never predicts it).  ``beside`` lists causal
    models (n-gram ``.npz``/ARPA or neural checkpoints) scored on the same sentences: each gets its
    usual perplexity (words + ``</s>``) and its perplexity over the words only, the same token set
    as the PPPL.  The ``caveat`` entry says why the numbers are not comparable as rivals.
    """
    from corpora.accounting import oov_flags

    from neural.bert.model import encode_sentences, pseudo_log_likelihoods

    _set_threads(threads)
    model, vocab, ckpt = load_bert(checkpoint)
    sentences, described = _text_sentences(checkpoint, text, split, data_dir, vocab, ckpt)
    if max_sentences is not None:
        sentences = sentences[:max_sentences]
    ids = encode_sentences(vocab, sentences, drop_empty=False)
    n_words = int(sum(len(s) for s in ids))
    if n_words == 0:
        raise InputError(f"{described} has no words to score", fix="pass a text with words")
    t0 = time.perf_counter()
    lp = np.concatenate(pseudo_log_likelihoods(model, ids, on_batch=_ruled(threads)))  # ln p, word by word
    seconds = time.perf_counter() - t0
    is_eos = np.concatenate([np.r_[np.zeros(len(s), bool), True] for s in sentences])
    oov = oov_flags(vocab, sentences)[~is_eos]
    pll = float(lp.sum())
    d = {
        "model": str(checkpoint), "architecture": "bert", "text": described, "sentences": len(sentences),
        "words": n_words, "oovs": int(oov.sum()), "eos_counted": False,
        "pll_nats": pll, "pll_log10": pll / math.log(10), "pppl": math.exp(-pll / n_words),
        "pppl_excluding_oovs": (math.exp(-float(lp[~oov].sum()) / int((~oov).sum())) if (~oov).any() else None),
        "bits_per_word": -pll / math.log(2) / n_words, "n_words_predicted": vocab.n_words,
        "seconds": round(seconds, 2), "caveat": PPPL_CAVEAT, "beside": [],
    }
    for other in beside:
        from ..scoring import per_token_log10  # either family, by file content

        log10 = np.asarray(per_token_log10(str(other), sentences), dtype=np.float64)
        if len(log10) != len(is_eos):
            raise InputError(f"the model scored {len(log10)} tokens, expected {len(is_eos)}", path=other,
                             fix="pass a model with the same tokenizer as the BERT checkpoint")
        words = log10[~is_eos]
        d["beside"].append({
            "model": str(other),
            "ppl": 10 ** (-float(log10.sum()) / len(log10)),  # its usual number: words + </s>
            "ppl_words_only": 10 ** (-float(words.sum()) / len(words)),  # the PPPL's token set
        })
    return d


def format_pppl(d: dict) -> str:
    lines = [f"bert {d['model']} on {d['text']}: {d['sentences']:,} sentences, {d['words']:,} words, "
             f"{d['oovs']:,} OOVs (scored as <unk>); </s> not counted",
             f"PLL = {d['pll_nats']:.2f} nats ({d['pll_log10']:.2f} log10), {d['bits_per_word']:.4f} bits/word",
             f"PPPL = {d['pppl']:.2f}" + (f" (excluding OOVs {d['pppl_excluding_oovs']:.2f})"
                                          if d["pppl_excluding_oovs"] is not None else "")]
    for b in d["beside"]:
        lines.append(f"beside: {b['model']}: ppl {b['ppl']:.2f} (words + </s>), {b['ppl_words_only']:.2f} over the "
                     "words only (the PPPL's tokens)")
    lines.append(f"note: {d['caveat']}")
    return "\n".join(lines)


# ---------------------------------------------------------------------------- fine-tuning
FINETUNED_MODELS = {
    "zero-shot": "(a) pretrained, its NSP head as the answer (no training)",
    "fine-tuned": "(b) pretrained encoder + fresh head, fine-tuned",
    "scratch": "(c) same architecture from random weights, same fine-tuning",
}


def accuracy_intervals(correct: dict) -> tuple:
    """``(per model, differences)``: each model's accuracy with a 95 % percentile-bootstrap interval, and the
    paired differences fine-tuned - scratch and fine-tuned - zero-shot, all from the same resamples of the
    test examples (reports.experiments.bootstrap: a fixed seed, 1,000 resamples)."""
    from reports.experiments.bootstrap import LEVEL, ratio_interval, resample_counts

    n = len(next(iter(correct.values())))
    counts = resample_counts(n)
    ones = np.ones(n)
    models = {name: {"accuracy": float(np.mean(c)),
                     "interval": list(ratio_interval(c.astype(np.float64), ones, counts))} for name, c in correct.items()}
    diffs = []
    for a, b in (("fine-tuned", "scratch"), ("fine-tuned", "zero-shot")):
        if a in correct and b in correct:
            d = correct[a].astype(np.float64) - correct[b].astype(np.float64)
            lo, hi = np.quantile(counts @ d / n, [(1 - LEVEL) / 2, 1 - (1 - LEVEL) / 2])
            diffs.append({"a": a, "b": b, "difference": float(d.mean()), "interval": [float(lo), float(hi)]})
    return models, diffs


def finetune_summary(checkpoint, corpus: Optional[str] = None, *, cfg=None, data_dir=None, out=None,
                     threads: Optional[int] = 2, log=_echo_err) -> dict:
    """Fine-tune a pretrained BERT on a sentence-pair task of ``corpus`` and compare it, on the task's test
    examples, with the pretrained NSP head used zero-shot and with the same architecture fine-tuned from
    random weights at the same budget (JSON-able dict; see neural.bert.finetune)."""
    from corpora.sources import open_text

    from neural.bert.finetune import build_task, classifier_for, finetune, predict, random_like
    from neural.bert.model import encode_sentences

    cfg = cfg or FinetuneConfig()
    cfg.validate()
    _set_threads(threads)
    bert, vocab, ckpt = load_bert(checkpoint)
    if (ckpt.get("train") or {}).get("classifier") is not None:
        raise InputError("the checkpoint is already fine-tuned (it carries a classification head)", path=checkpoint,
                         fix="pass the pretrained checkpoint, written by `ngramlm bert pretrain`")
    if corpus is None:
        corpus = ((ckpt.get("train") or {}).get("data") or {}).get("corpus")
        if not corpus:
            raise InputError("no corpus given and the checkpoint does not record its corpus", path=checkpoint,
                             fix="pass a corpus name or a text file")
    text = open_text(str(corpus), splits=("train", "valid", "test"), data_dir=data_dir, tokenizer=vocab.tokenizer)
    if text.split_policy == "holdout":
        log(text.split_note)
    sents = {s: encode_sentences(vocab, text.sentences(s)) for s in ("train", "valid", "test")}
    tasks = {s: build_task(cfg.task, sents[s], split=s, seed=cfg.seed,
                           max_examples=cfg.train_examples if s == "train" else None) for s in sents}
    total = cfg.total_steps(len(tasks["train"]))
    log(f"task {cfg.task} on {corpus} -- {TASKS[cfg.task]}\n" + ", ".join(t.describe() for t in tasks.values())
        + f"; {total:,} steps of {cfg.batch_size}")
    info = {"data": {"corpus": str(corpus), "tokenizer": vocab.tokenizer.to_dict() if vocab.tokenizer else None},
            "pretrained": str(checkpoint)}
    test = tasks["test"]
    rows, correct = {}, {}

    def ruled_predict(model):  # the thread rule outside the training loops too (its own, measured at the start)
        import torch

        from neural.training.contention import thread_rule

        with thread_rule(torch.get_num_threads()):
            return predict(model, test) == test.labels

    t = time.perf_counter()
    correct["zero-shot"] = ruled_predict(bert)
    rows["zero-shot"] = {"train_seconds": 0.0, "test_seconds": round(time.perf_counter() - t, 2)}
    stopped = None
    runs = (("fine-tuned", lambda: bert, out), ("scratch", lambda: random_like(bert, cfg.seed), None))
    for name, encoder, path in runs:
        log(f"{name}: {FINETUNED_MODELS[name]}")
        model = classifier_for(encoder(), head_dropout=cfg.head_dropout, seed=cfg.seed)
        r = finetune(model, tasks["train"], tasks["valid"], cfg, out=path, vocab=vocab, log=log,
                     info={**info, "init": "pretrained" if name == "fine-tuned" else "random"})
        t = time.perf_counter()
        correct[name] = ruled_predict(model)
        rows[name] = {"train_seconds": round(r.seconds, 2), "test_seconds": round(time.perf_counter() - t, 2),
                      "steps": r.steps, "best_step": r.best_step, "best_valid_accuracy": r.best_valid_accuracy,
                      "stopped": r.stopped}
        if r.stopped == "interrupted":
            stopped = "interrupted"  # what finished is reported; the rest is not run
            break
    models, diffs = accuracy_intervals(correct)
    return {
        "checkpoint": str(checkpoint), "corpus": str(corpus), "task": cfg.task, "question": TASKS[cfg.task],
        "config": cfg.to_dict(), "encoder": bert.describe(),
        "examples": {s: len(tk) for s, tk in tasks.items()}, "test_positive_share": float(test.labels.mean()),
        "models": [{"name": k, "description": FINETUNED_MODELS[k], **models[k], **rows[k]} for k in correct],
        "differences": diffs, "bootstrap": {"unit": "test example", "resamples": 1000, "level": 0.95},
        "output": None if out is None else str(out), "stopped": stopped or "complete",
    }


def format_finetune(d: dict) -> str:
    lines = [f"bert finetune {d['checkpoint']}: task {d['task']} on {d['corpus']} -- {d['question']}",
             f"examples: train {d['examples']['train']:,}, valid {d['examples']['valid']:,}, "
             f"test {d['examples']['test']:,} (half positive: chance is 0.5)",
             f"{'model':<60} {'test acc':>8}  {'95 % interval':<16} {'train s':>8}  kept step"]
    for m in d["models"]:
        lo, hi = m["interval"]
        kept = f"{m['best_step']:,} of {m['steps']:,}" if "steps" in m else "-"
        lines.append(f"{m['description']:<60} {m['accuracy']:8.4f}  [{lo:.4f}, {hi:.4f}] "
                     f"{m['train_seconds']:8.1f}  {kept}")
    for x in d["differences"]:
        lo, hi = x["interval"]
        lines.append(f"{x['a']} - {x['b']}: {x['difference']:+.4f} [{lo:+.4f}, {hi:+.4f}] (paired resamples)")
    if d["stopped"] == "interrupted":
        lines.append("interrupted: the models above are those that finished")
    if d["output"]:
        lines.append(f"fine-tuned checkpoint: {d['output']}")
    return "\n".join(lines)


# ---------------------------------------------------------------------------- the group
@click.group(name="bert", context_settings={"help_option_names": ["-h", "--help"]})
def bert_group() -> None:
    """BERT: a bidirectional encoder pretrained by masked LM + next-sentence prediction."""


_SIZES = ", ".join(f"{k} {c.n_layers}x{c.d_model}" for k, c in BERT_PRESETS.items())
_P = PretrainConfig(minutes=None)


@bert_group.command("pretrain")
@click.argument("corpus", required=False)
@click.option("--size", type=click.Choice(list(BERT_PRESETS)), default="default", show_default=True,
              help=f"Encoder size ({_SIZES}).")
@click.option("--minutes", type=float, default=None,
              help="Wall-clock minutes of the training loop (the final validation included; loading and the test "
                   "pass after it are not).")
@click.option("--max-steps", type=click.IntRange(min=1), default=None, help="Stop after this many steps.")
@click.option("--batch-size", type=click.IntRange(min=1), default=_P.batch_size, show_default=True,
              help="Sentence pairs per step.")
@click.option("--lr", type=float, default=_P.lr, show_default=True, help="AdamW peak learning rate.")
@click.option("--warmup", type=click.IntRange(min=0), default=_P.warmup_steps, show_default=True,
              help="Linear warm-up steps (then cosine decay over --max-steps / --minutes).")
@click.option("--eval-every", type=click.IntRange(min=1), default=_P.eval_every, show_default=True,
              help="Steps between validations and checkpoint writes.")
@click.option("--norm", type=click.Choice(["pre", "post"]), default=None,
              help="Layer-norm placement [default: the preset's, pre].")
@click.option("--min-count", type=click.IntRange(min=1), default=1, show_default=True,
              help="Vocabulary: minimum training count.")
@click.option("--max-vocab", type=click.IntRange(min=1), default=None, help="Vocabulary: at most this many words.")
@data_dir_option
@seed_option()
@threads_option()
@click.option("-o", "--output", "--out", "out", type=click.Path(dir_okay=False), default=None,
              help="Checkpoint file [default: runs/CORPUS-bert.pt].")
@json_option
def pretrain_cmd(corpus, size, minutes, max_steps, batch_size, lr, warmup, eval_every, norm, min_count, max_vocab,
                 data_dir, seed, threads, out, as_json):
    """Pretrain BERT (MLM + NSP) on CORPUS: a registered name such as ptb, or a text file [default: toy].

    Pairs are consecutive lines of the training split (50 % true next line, 50 % a random one).
    After training, the test split's MLM and NSP accuracies are printed; its pseudo-perplexity
    is `ngramlm bert pppl CKPT`.
    """
    from corpora.sources import open_text

    from neural.bert.model import build_bert, encode_sentences, score_heads
    from neural.training.bert import pretrain

    _set_threads(threads)
    corpus = corpus or "toy"
    out = out or os.path.join("runs", f"{Path(corpus).stem}-bert.pt")
    check_writable(out, what="checkpoint")  # before any work
    text = open_text(corpus, splits=("train", "valid", "test"), data_dir=data_dir)
    if text.split_policy == "holdout":
        _echo_err(text.split_note)
    vocab = text.new_vocab(min_count=min_count, max_size=max_vocab).fit(text.sentences("train"))
    splits = {s: encode_sentences(vocab, text.sentences(s)) for s in ("train", "valid", "test")}
    for s in ("train", "valid"):
        if len(splits[s]) < 3:
            raise InputError(f"corpus {corpus!r} has {len(splits[s])} non-empty {s} lines; pretraining needs "
                             "consecutive sentence pairs", fix="give a text with more lines")
    changes = {"norm": norm} if norm else {}
    model = build_bert(len(vocab), size, seed=seed, **changes)
    cfg = PretrainConfig(batch_size=batch_size, lr=lr, warmup_steps=warmup, minutes=minutes, max_steps=max_steps,
                         eval_every=eval_every, seed=seed)
    cfg.validate()
    _echo_err(f"{model.describe()}\n{cfg}\ncorpus {corpus}: {len(splits['train']):,} training sentences, "
              f"{sum(map(len, splits['train'])):,} words, {vocab.n_words:,} word types -> {out}")
    data_info = {"corpus": corpus, "tokenizer": vocab.tokenizer.to_dict() if vocab.tokenizer else None}
    import torch

    from neural.training.contention import thread_rule

    test = None
    # One torch thread while other processes use the cores, for the test pass after training too: on the toy
    # corpus beside two CPU hogs it took 7.6-8.6 s with two threads and 1.0-2.0 s with one (docs/bert.md).
    with thread_rule(torch.get_num_threads(), log=_echo_err):
        result = pretrain(model, vocab, splits["train"], splits["valid"], cfg, out=out, log=_echo_err,
                          data_info=data_info)
        _echo_err(f"stopped: {result.stopped} after {result.steps} steps, {result.pairs:,} pairs, "
                  f"{result.seconds:.1f} s")
        if len(splits["test"]) >= 3:
            test = score_heads(model, splits["test"], n_pairs=len(splits["test"]), seed=seed)
    summary = {"checkpoint": out, "corpus": corpus, "size": size, "stopped": result.stopped, "steps": result.steps,
               "seconds": result.seconds, "valid": result.valid.to_dict() if result.valid else None, "test": None}
    if test is not None:
        summary["test"] = test.to_dict()
        if not as_json:
            click.echo(f"test: MLM accuracy {test.mlm_accuracy:.4f} (loss {test.mlm_loss:.3f} nats, "
                       f"{test.mlm_count:,} masked words), NSP accuracy {test.nsp_accuracy:.4f} "
                       f"({test.nsp_count:,} pairs); PPPL: ngramlm bert pppl {out}")
    if as_json:
        click.echo(json.dumps(summary, indent=2))


@bert_group.command("pppl")
@click.argument("checkpoint", type=click.Path(dir_okay=False))
@click.argument("corpus", required=False)
@click.option("--split", default="test", show_default=True, help="Split of a registered corpus.")
@click.option("--max-sentences", type=click.IntRange(min=1), default=None, help="Score only the first N sentences.")
@click.option("--beside", "beside", multiple=True, type=click.Path(dir_okay=False),
              help="A causal model (n-gram or neural) to score on the same sentences, reported beside (repeatable).")
@data_dir_option
@threads_option()
@json_option
def pppl_cmd(checkpoint, corpus, split, max_sentences, beside, data_dir, threads, as_json):
    """Pseudo-perplexity of a BERT CHECKPOINT on CORPUS (a name, a text file or -) [default: its own corpus].

    Each word is masked in turn and scored given the rest (Salazar et al. 2020); PPPL =
    exp(-PLL / words).  It is not a perplexity: see the note printed with it.
    """
    d = pppl_summary(checkpoint, corpus, split=split, data_dir=data_dir, max_sentences=max_sentences,
                     beside=beside, threads=threads)
    click.echo(json.dumps(d, indent=2) if as_json else format_pppl(d))


@bert_group.command("embed")
@click.argument("checkpoint", type=click.Path(dir_okay=False))
@click.argument("text_file")
@click.option("-o", "--output", "--out", "out", type=click.Path(dir_okay=False), required=True,
              help="out.npz: tokens (N, d), offsets, cls and mean (S, d), words; out.npy: the (N, d) word vectors.")
@threads_option()
def embed_cmd(checkpoint, text_file, out, threads):
    """Contextual embeddings of every word of TEXT_FILE (one sentence a line; - for stdin)."""
    import io

    from corpora.sources import read_text_source
    from corpora.textio import atomic_write_bytes

    from neural.bert.model import encode_sentences, sentence_embeddings

    _set_threads(threads)
    if not out.endswith((".npz", ".npy")):
        raise InputError("the output must end in .npz (all arrays) or .npy (the word vectors)", path=out,
                         fix="name it e.g. out.npz")
    check_writable(out, what="embeddings file")
    model, vocab, _ = load_bert(checkpoint)
    src = read_text_source(text_file, split="test", tokenizer=vocab.tokenizer)  # a file is read whole
    arrays = sentence_embeddings(model, encode_sentences(vocab, src.sentences, drop_empty=False),
                                 on_batch=_ruled(threads))
    arrays["words"] = np.array([w for s in src.sentences for w in s], dtype=str)  # fixed-width unicode, no pickle
    buf = io.BytesIO()
    if out.endswith(".npy"):
        np.save(buf, arrays["tokens"])
    else:
        np.savez(buf, **arrays)
    atomic_write_bytes(out, buf.getvalue())
    _echo_err(f"{len(src.sentences):,} sentences, {len(arrays['tokens']):,} words x {model.config.d_model} -> {out}")


_F = FinetuneConfig()


@bert_group.command("finetune")
@click.argument("checkpoint", type=click.Path(dir_okay=False))
@click.argument("corpus", required=False)
@click.option("--task", type=click.Choice(list(TASKS)), default=_F.task, show_default=True,
              help="nsp: is B the sentence after A (negatives from elsewhere in the split)? "
                   "order: are A and B in text order (negatives: the pair swapped)?")
@click.option("--epochs", type=click.IntRange(min=1), default=_F.epochs, show_default=True,
              help="Passes over the training examples.")
@click.option("--max-steps", type=click.IntRange(min=1), default=None, help="Stop after this many steps.")
@click.option("--train-examples", type=click.IntRange(min=2), default=None,
              help="Use only this many training examples (balanced) [default: one per training sentence].")
@click.option("--batch-size", type=click.IntRange(min=1), default=_F.batch_size, show_default=True,
              help="Examples per step.")
@click.option("--lr", type=float, default=_F.lr, show_default=True, help="AdamW peak learning rate.")
@click.option("--warmup", type=click.FloatRange(0, 1, max_open=True), default=_F.warmup, show_default=True,
              help="Share of the steps with a linear warm-up (then linear decay to 0).")
@click.option("--eval-every", type=click.IntRange(min=1), default=_F.eval_every, show_default=True,
              help="Steps between validations (the weights of the best valid accuracy are kept).")
@data_dir_option
@seed_option()
@threads_option()
@click.option("-o", "--output", "--out", "out", type=click.Path(dir_okay=False), default=None,
              help="The fine-tuned checkpoint (b) [default: runs/CHECKPOINT-TASK.pt].")
@json_option
def finetune_cmd(checkpoint, corpus, task, epochs, max_steps, train_examples, batch_size, lr, warmup, eval_every,
                 data_dir, seed, threads, out, as_json):
    """Fine-tune a pretrained BERT CHECKPOINT on a sentence-pair task of CORPUS [default: its own corpus].

    The task's examples come from each split's consecutive lines, exactly half positive. Three
    models answer the test examples: (a) the pretrained NSP head zero-shot, (b) the pretrained
    encoder with a fresh head on [CLS], fine-tuned, (c) the same architecture fine-tuned from
    random weights on the same batches. Accuracies come with 95 % bootstrap intervals over the
    test examples; (b) is written to -o.
    """
    cfg = FinetuneConfig(task=task, batch_size=batch_size, lr=lr, warmup=warmup, epochs=epochs, max_steps=max_steps,
                         train_examples=train_examples, eval_every=eval_every, seed=seed)
    cfg.validate()
    out = out or os.path.join("runs", f"{Path(checkpoint).stem}-{task}.pt")
    check_writable(out, what="checkpoint")  # before any work
    d = finetune_summary(checkpoint, corpus, cfg=cfg, data_dir=data_dir, out=out, threads=threads)
    click.echo(json.dumps(d, indent=2) if as_json else format_finetune(d))
    if d["stopped"] == "interrupted":
        raise SystemExit(130)
