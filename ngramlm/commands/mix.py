"""``ngramlm mix``: one back-off model from several (SRILM's ``ngram -mix-lm ... -write-lm``).

The maths is :mod:`ngramlm.tools.mix`; this module reads the files and texts, checks everything before
any work is written, and prints the weights and perplexities.
"""
from __future__ import annotations

import json
import time

import click

from corpora.errors import InputError
from corpora.options import data_dir_option, json_option
from corpora.textio import check_writable


def parse_weights(spec: str) -> list:
    try:
        return [float(x) for x in spec.split(",")]
    except ValueError:
        raise click.BadParameter(f"{spec!r} is not comma-separated numbers; e.g. --lambda 0.7,0.3",
                                 param_hint="--lambda") from None


def read_encoded(source: str, *, split: str, data_dir, vocab):
    """``source`` (a file, '-' or a corpus name's ``split``) encoded with ``vocab``, its OOV flags and name."""
    from corpora.accounting import encode_with_oov
    from corpora.sources import read_text_source

    src = read_text_source(source, split=split, data_dir=data_dir, tokenizer=vocab.tokenizer)
    if not src.sentences:
        raise InputError("the text has no sentences", path=src.description, fix="pass a non-empty text")
    return (*encode_with_oov(vocab, src.sentences), src.description)


@click.command("mix")
@click.argument("models", nargs=-1, metavar="MODEL MODEL [MODEL...]")
@click.option("-o", "--output", "--out", "output", type=click.Path(dir_okay=False), required=True,
              help="The mixed model: ARPA when the name ends in .arpa, .arpa.gz or .lm, else the native format.")
@click.option("--lambda", "lambdas", default=None, metavar="L1,L2,...",
              help="The weights, one per model in the order given, each >= 0, summing to 1.")
@click.option("--best-mix", "dev_text", default=None, metavar="DEV_TEXT",
              help="Tune the weights by EM on this held-out text (a file, '-', or a corpus name: its valid "
                   "split), as SRILM's compute-best-mix; prints them and the dev perplexity.")
@click.option("--log-linear", is_flag=True,
              help="Mix log-linearly: p(w|h) proportional to prod_i p_i(w|h)^lambda_i, normalised over the "
                   "vocabulary for every context (exactly, through the back-off structure).  Needs --lambda.")
@click.option("--eval", "eval_text", default=None, metavar="TEXT",
              help="Also score this text (a file, '-', or a corpus name: its test split) and print the static "
                   "mixture's perplexity, the dynamic interpolation's and each model's.")
@click.option("--compat", type=click.Choice(["srilm"]), default=None,
              help="SRILM's conventions (ngram -mix-lm ... -write-lm, compute-best-mix): a word a model lacks "
                   "gets probability 0 from it, not a share of its <unk>; three or more models are mixed "
                   "pairwise in order; --best-mix scores the text with each model alone (a word it lacks is "
                   "its <unk>) and runs EM from 0.5,... to a precision of 0.001.")
@data_dir_option
@json_option
def mix_cmd(models, output, lambdas, dev_text, log_linear, eval_text, compat, data_dir, as_json):
    """Mix back-off models into one (a static mixture): the union of their n-grams, each probability
    interpolated through every model's own back-off, back-off weights renormalised.

    The vocabularies are united by word; a word a model lacks gets that model's <unk> probability,
    shared among the words it lacks by their unigram probability in the other models (docs/asr.md);
    with --compat srilm it gets 0 from that model, as in SRILM (docs/srilm.md).

    \b
    ngramlm mix general.arpa indomain.arpa -o mix.arpa --best-mix dev.txt --eval test.txt
    ngramlm mix a.arpa b.arpa c.npz -o mix.npz --lambda 0.5,0.3,0.2
    ngramlm mix a.arpa b.arpa -o mix.arpa --lambda 0.5,0.5 --compat srilm   # = ngram -lm a -mix-lm b -lambda 0.5
    """
    import numpy as np

    from corpora.accounting import report_from_log10

    from .common import save_model
    from ..loading import load_any
    from ..tools.mix import (best_mix, best_mix_srilm, check_mixable, check_weights, component_token_log10,
                             dynamic_log10, mix_tables, mix_tables_pairwise, own_token_log10, union_vocabulary)
    from ..model import NgramLM

    t0 = time.perf_counter()
    if not models:
        raise click.UsageError("no models given: ngramlm mix A.arpa B.arpa -o MIX.arpa --lambda 0.5,0.5")
    if (lambdas is None) == (dev_text is None):
        raise click.UsageError("give the weights with --lambda L1,L2,... or have them tuned with --best-mix DEV_TEXT "
                               "(one of the two)")
    srilm = compat == "srilm"
    if srilm and log_linear:
        raise click.UsageError("--compat srilm reproduces ngram -mix-lm's linear static mixture; SRILM writes no "
                               "log-linear one (-loglinear-mix is dynamic): drop one of the two")
    if log_linear and dev_text is not None:
        raise click.UsageError("--best-mix tunes the weights of a linear mixture (EM); a log-linear one needs its "
                               "weights: give --lambda (e.g. the ones --best-mix found)")
    check_writable(output, what="model file")  # a bad path fails now, before any work
    weights = None
    if lambdas is not None:
        weights = check_weights(parse_weights(lambdas), n_models=len(models))
    def say(message: str) -> None:  # progress on stderr: a mixture of big models takes minutes
        click.echo(f"  {message} ({time.perf_counter() - t0:.1f} s)", err=True)

    lms = []
    for p in models:  # a missing or unreadable file: an error naming it
        say(f"reading {p}")
        lms.append(load_any(p, ngrams=True))
    names = list(models)
    check_mixable(lms, names=names)
    say("indexing the models' n-grams")
    for m in lms:
        m.build_index()  # hash lookups: every union n-gram is scored by every model
    union = union_vocabulary(lms, lacking="zero" if srilm else "share")
    vocab_note = _vocabulary_note(lms, names, union)
    # Read every text before anything is written, so a bad one leaves no output behind.
    dev = read_encoded(dev_text, split="valid", data_dir=data_dir, vocab=union.vocab) if dev_text else None
    evl = read_encoded(eval_text, split="test", data_dir=data_dir, vocab=union.vocab) if eval_text else None
    result: dict = {"models": names, "output": str(output), "mode": "log-linear" if log_linear else "linear",
                    "union_types": union.vocab.n_types, "lacking": [len(x) for x in union.lacking]}
    if vocab_note:
        click.echo(vocab_note, err=True)
    if dev is not None:
        enc, _, where = dev
        say(f"scoring {where} ({enc.n_words:,} words) with each model")
        # SRILM tunes on each model's own ppl stream (-debug 2), so a word a model lacks is its <unk> there,
        # although the static mixture then gives it 0 from that model.
        stream = own_token_log10 if srilm else component_token_log10
        comp = np.stack([stream(m, enc, union=union, index=i) for i, m in enumerate(lms)])
        say("EM on the weights" + (" (compute-best-mix's start and precision)" if srilm else ""))
        fit = best_mix_srilm(comp) if srilm else best_mix(comp)
        weights = fit.weights
        uniform = [1.0 / len(lms)] * len(lms)
        dev_ppl = float(10.0 ** (-fit.log10_prob / fit.tokens))
        uni_lp = dynamic_log10(comp, uniform)
        uni_ppl = float(10.0 ** (-uni_lp[np.isfinite(uni_lp)].mean()))
        result["best_mix"] = {"text": where, "tokens": fit.tokens, "iterations": fit.iterations,
                              "converged": fit.converged, "lambda": weights, "dev_ppl": dev_ppl,
                              "dev_ppl_uniform": uni_ppl}
        if not as_json:
            precision = "0.001, compute-best-mix's" if srilm else "1e-6"
            click.echo(f"best-mix: EM on {where} ({fit.tokens} tokens): "
                       + (f"converged after {fit.iterations} iterations (no weight moved by more than {precision})"
                          if fit.converged else f"stopped after {fit.iterations} iterations, not converged"))
            # compute-best-mix prints its weights with 6 significant digits; so does --compat srilm.
            click.echo(f"lambda {','.join((f'{w:.6g}' if srilm else f'{w:.6f}') for w in weights)}")
            click.echo(f"dev ppl= {dev_ppl:.2f} (dynamic mixture; uniform lambda: {uni_ppl:.2f})")
    result["lambda"] = weights
    say(f"mixing every n-gram of the {len(lms)} models (the union, each scored by every model)")
    if srilm:  # ngram's steps and arithmetic, also for two models (its lambda is 1 - w_2 / (w_1 + w_2))
        tables = mix_tables_pairwise(lms, weights=weights, union=union, names=names)
    else:
        tables = mix_tables(lms, weights=weights, union=union, log_linear=log_linear, names=names)
    mixed = NgramLM.from_tables(tables, order=tables.order, smoothing=None)
    say(f"writing {output}")
    save_model(mixed, output)
    seconds = time.perf_counter() - t0
    sizes = "/".join(str(n) for n in mixed.n_ngrams_)
    result.update({"order": mixed.order_, "ngrams": [int(n) for n in mixed.n_ngrams_], "seconds": seconds})
    if not as_json:
        click.echo(f"wrote {output}: {mixed.order_}-gram {result['mode']} mixture of {len(lms)} models, "
                   f"lambda {','.join(f'{w:.6g}' for w in weights)}, n-grams {sizes} ({seconds:.1f} s)")
    if evl is not None:
        enc, oov, where = evl
        static = mixed.perplexity_report(enc, oov=oov)
        comp = np.stack([component_token_log10(m, enc, union=union, index=i) for i, m in enumerate(lms)])
        # Each model alone: under SRILM's convention a word it lacks is its <unk> (as ngram -ppl scores
        # it by itself), not the 0 it gives that word inside the mixture.
        alone = np.stack([own_token_log10(m, enc, union=union, index=i) for i, m in enumerate(lms)]) if srilm \
            else comp
        ev = {"text": where, "tokens": static.tokens, "oovs": static.oovs, "static_ppl": static.ppl,
              "models_ppl": [report_from_log10(c, oov, enc.n_sentences).ppl for c in alone]}
        if not log_linear:
            ev["dynamic_ppl"] = report_from_log10(dynamic_log10(comp, weights), oov, enc.n_sentences).ppl
        result["eval"] = ev
        if not as_json:
            click.echo(f"eval {where}: {static.tokens} tokens, {static.oovs} OOVs")
            click.echo(f"  ppl= {static.ppl:10.2f}  static mixture ({output})")
            if log_linear:
                click.echo("  (log-linear: the static model is the per-context normalised product itself, so "
                           "there is no separate dynamic figure)")
            else:
                rel = 100.0 * (static.ppl / ev["dynamic_ppl"] - 1.0)
                click.echo(f"  ppl= {ev['dynamic_ppl']:10.2f}  dynamic interpolation (the static mixture is "
                           f"{rel:+.2f} % from it)")
            for name, p in zip(names, ev["models_ppl"]):
                over = "its own vocabulary: a word it lacks is its <unk>" if srilm else "over the mixture's vocabulary"
                click.echo(f"  ppl= {p:10.2f}  {name} alone ({over})")
    if as_json:
        click.echo(json.dumps(result, indent=2))


def _vocabulary_note(models, names, union) -> str:
    """One line on how the vocabularies were united, or '' when they are the same."""
    if not any(union.lacking):
        return ""
    parts = [f"{name} lacks {len(lack)}" for name, lack in zip(names, union.lacking) if lack]
    how = ("which get probability 0 from that model (SRILM's convention)" if union.lacking_rule == "zero" else
           "which get that model's <unk> probability, shared by their unigram probability in the other models")
    return (f"vocabularies differ: the mixture has the union, {union.vocab.n_types} types; {', '.join(parts)} "
            f"of its words, {how}")
