"""``ngramlm train``: an n-gram model from text, in memory, streamed within a memory budget, out of
core or on a Dask cluster (lmplz habits: piped text, ``-o``, ``-S``, ``-T``).

The command parses and checks its options, fills a :class:`~ngramlm.builder.pipeline.BuildConfig`, runs
:func:`~ngramlm.builder.pipeline.build` once, writes the model and says what it made."""
from __future__ import annotations

import json
import os
import sys
import time

import click

from corpora.errors import InputError
from corpora.options import data_dir_option, json_option, tokenizer_options, tokenizer_spec
from corpora.textio import check_writable

from ..smoothing import SMOOTHERS, canonical_name, mergeable_smoothers, named_list

from .common import MODEL_SUFFIXES_ARPA, is_kenlm_binary_name, save_model


# ----------------------------------------------------------------------------- train
@click.command("train")
@click.argument("texts", nargs=-1, metavar="[TEXT]...")
@click.option("-o", "--output", "--out", "output", type=click.Path(dir_okay=False, allow_dash=True), required=True,
              help="Model file to write: native format, ARPA when the name ends in .arpa, a KenLM binary "
                   "(probing, as build_binary makes) when it ends in .binary or .klm; '-' writes ARPA to stdout.")
@click.option("--order", type=int, default=3, show_default=True, help="n-gram order (1 to 12).")
@click.option("-n", "order_n", type=int, default=None, hidden=True)
@click.option("--smoothing", "-s", default="mkn", show_default=True,
              help=f"{named_list(SMOOTHERS)}.")
@click.option("--k", "add_k", type=float, default=None, help="add-k: the pseudo-count k (default 1).")
@click.option("--discount", type=float, default=None, help="absolute discounting: a fixed discount.")
@click.option("--discount-fallback", is_flag=True,
              help="When count-of-counts are degenerate (tiny corpora), use fixed discounts 0.5/1/1.5 instead of failing.")
@click.option("--alpha", type=float, default=None, help="stupid backoff: the backoff factor (default 0.4).")
@click.option("--lambdas", default=None, help="jm: comma-separated weights for orders 1..n (else tuned).")
@click.option("--tune-on", default="valid", show_default=True,
              help="jm: held-out split (corpus) or file to tune the weights on.")
@click.option("--prune", "prune_spec", default=None,
              help="Count cut-offs per order, comma-separated (KenLM's --prune): n-grams seen at most that often "
                   "are dropped, e.g. 0,1,1.  Back-off weights are renormalised.")
@click.option("--prune-entropy", type=float, default=None,
              help="Entropy pruning (Stolcke): drop n-grams whose removal raises perplexity by less than this "
                   "relative amount, e.g. 1e-8.")
@click.option("--min-count", type=int, default=1, show_default=True,
              help="Vocabulary: words seen fewer times become <unk> before counting (a closed vocabulary: <unk> "
                   "is trained on them).")
@click.option("--unk-from-min-count", "unk_min_count", type=int, default=None, metavar="K",
              help="The same setting as --min-count K, by what it does: words seen fewer than K times in the "
                   "training text are <unk> before counting, so <unk> gets a probability estimated from them.")
@click.option("--limit-vocab", "--limit_vocab_file", "limit_vocab_path", type=click.Path(dir_okay=False),
              default=None, metavar="WORDS_FILE",
              help="lmplz's --limit_vocab_file: estimate on the full text, then keep only the n-grams whose words "
                   "are all in this list (one word a line; <s>, </s>, <unk> always kept), the removed words' "
                   "probability going to <unk>, back-off weights renormalised (as `ngramlm filter`).  The text is "
                   "not mapped to <unk>.  With --compat kenlm, lmplz's own way: those n-grams are pruned inside the "
                   "estimation, their mass going to the back-off weights, and lmplz's numbers come out.")
@click.option("--max-size", type=int, default=None, help="Vocabulary: keep at most this many words.")
@click.option("--vocab", "vocab_path", type=click.Path(dir_okay=False), default=None,
              help="Use this vocabulary file instead of fitting one on the training text.")
@click.option("--split", default="train", show_default=True, help="Split of a named corpus to train on.")
@click.option("--memory", "-S", "memory", default=None, metavar="SIZE",
              help="Memory budget for counting (lmplz's -S): 1G, 500M, 30%.  The text is streamed and counted in "
                   "blocks that fit, spilled to --temp-dir as sorted runs and merged; the model is the same.")
@click.option("--temp-dir", "-T", "temp_dir", type=click.Path(file_okay=False), default=None,
              help="Folder for the sorted runs of --memory/--dask builds (lmplz's -T) [default: the system's].")
@click.option("--dask", "dask_address", default=None, metavar="ADDRESS",
              help="Count on a Dask cluster: tcp://SCHEDULER:8786, or local:N for N local worker processes.")
@click.option("--estimation", type=click.Choice(["auto", "memory", "disk"]), default=None,
              help="Streaming build: where mkn/kn estimation runs.  auto (default): out of core, in chunks through "
                   "--temp-dir, when the merged counts would not fit --memory; disk: always; memory: never.")
@click.option("--weights", "weights_spec", default=None, metavar="W1,W2,...",
              help="Count merging: each TEXT is counted and discounted on its own, and its statistics weighted "
                   "(1,4: the second text's counts four times the first's, each text keeping its own discounts; "
                   "relative; 0 leaves a text out).  Adapts a general model to a small in-domain text "
                   "(docs/asr.md).")
@click.option("--tune-weights", "tune_dev", default=None, metavar="DEV",
              help="Count merging: choose the weights that minimise the perplexity of DEV (a file, or a corpus "
                   "name for its valid split); the first TEXT keeps weight 1.")
@click.option("--compat", type=click.Choice(["kenlm", "srilm"]), default=None,
              help="kenlm (mkn/kn): reproduce lmplz's conventions bit for bit (its uniform floor counts its own "
                   "<unk>; the last n-grams enter the discount statistics at raw count; float32 discounts; "
                   "docs/kenlm.md).  srilm: SRILM ngram-count's back-off models for katz (its default Good-Turing), "
                   "wb, absolute, kn, mkn, addk and laplace: its count cut-offs (--gtmin), back-off form unless "
                   "--interpolate, float32 values (docs/srilm.md).  Default: the textbook estimate.")
@click.option("--interpolate", "interpolate", is_flag=True, default=None,
              help="--compat srilm: SRILM's -interpolate (interpolated estimates; without it, the back-off form).")
@click.option("--gtmin", "gtmin_spec", default=None, metavar="C1,C2,...",
              help="--compat srilm: SRILM's -gtNmin per order, the last repeated: n-grams seen fewer times are not "
                   "stored, their mass going to the back-off weight [SRILM's default: 1,1,2 (2 from trigrams on); "
                   "1 keeps every n-gram].")
@click.option("--gtmax", "gtmax_spec", default=None, metavar="K1,K2,...",
              help="--compat srilm -s katz: SRILM's -gtNmax per order, the largest count Good-Turing discounts "
                   "[SRILM's default: 1,7].")
@data_dir_option
@json_option
@click.option("--model", "model_type", default="ngram", show_default=True,
              type=click.Choice(["ngram", "lstm", "gru", "rnn_tanh", "rnn_relu", "transformer"]),
              help="ngram here; neural models train with `ngramlm neural train --model ...`.")
@tokenizer_options
def train_cmd(texts, output, order, order_n, smoothing, add_k, discount, discount_fallback, alpha, lambdas, tune_on,
              prune_spec, prune_entropy, min_count, unk_min_count, limit_vocab_path, max_size, vocab_path, split,
              memory, temp_dir, dask_address, estimation, weights_spec, tune_dev, compat, interpolate, gtmin_spec,
              gtmax_spec, data_dir, as_json, model_type, tokenizer, lower, normalize):
    """Train an n-gram model on TEXT: a file, '-' for stdin, or a corpus name (toy, ptb, ...).

    Without TEXT, text piped on stdin is read (as lmplz does); with nothing piped it is an error.
    Several files (plain or .gz) are one training text; they, --memory and --dask take the streaming
    build, which never holds the text whole."""
    from ngramlm.builder.pipeline import BuildConfig, build
    from ngramlm.counts import check_order
    from ngramlm.model import NgramLM

    smoothing = canonical_name(smoothing)  # an alias is its smoother's name before any check reads it
    texts, weights = _check_options(texts, output, order_n, as_json, model_type, smoothing, memory, temp_dir,
                                    dask_address, estimation, compat, weights_spec, tune_dev, prune_spec)
    check_order(order)
    if output != "-":
        check_writable(output, what="model file")  # before any work: a bad path fails now, not after training
    params = _smoother_params(add_k, discount, discount_fallback, alpha, lambdas)
    prune = _number_list(prune_spec, int, "--prune", "use comma-separated integers, e.g. 0,1,1")
    gtmin = _number_list(gtmin_spec, int, "--gtmin", "use comma-separated counts per order, e.g. 1,1,2")
    gtmax = _number_list(gtmax_spec, int, "--gtmax", "use comma-separated counts per order, e.g. 1,7")
    given = [o for o, v in (("--interpolate", interpolate), ("--gtmin", gtmin), ("--gtmax", gtmax)) if v is not None]
    if given and compat != "srilm":
        raise click.UsageError(f"{', '.join(given)}: SRILM's ngram-count option(s), for SRILM's estimation: add "
                               "--compat srilm")
    min_count = _closed_vocabulary_min_count(min_count, unk_min_count, vocab_path)
    limit_words = _limit_words(limit_vocab_path, estimation)
    vocab, spec = _given_vocabulary(vocab_path, tokenizer_spec(tokenizer, lower, normalize))
    config = BuildConfig(order=order, smoothing=smoothing, smoother_params=params, prune=prune,
                         prune_entropy=prune_entropy, compat=compat, interpolate=interpolate, gtmin=gtmin,
                         gtmax=gtmax, split=split, data_dir=data_dir, tokenizer=spec,
                         vocab=vocab, min_count=min_count, max_size=max_size, limit_vocab=limit_words,
                         limit_vocab_source=limit_vocab_path, tune_on=tune_on, memory=memory, temp_dir=temp_dir,
                         dask=dask_address, estimation=estimation or "auto", weights=weights, tune_weights_on=tune_dev,
                         output=output, arpa=_is_arpa(output), kenlm_binary=is_kenlm_binary_name(output))
    lm = NgramLM(**config.estimator_params())
    if estimation == "disk":
        _check_out_of_core(config, lm)
    t0 = time.perf_counter()
    report = _reporter(t0)
    built = build(texts, config, report, estimator=lm)
    if built.on_disk is not None:  # estimated and written out of core
        _report_out_of_core(built, output, order, as_json, time.perf_counter() - t0)
        return
    report(f"writing {output}", stage=4)
    save_model(lm, output)
    _report_model(built, output, as_json, time.perf_counter() - t0)


# ----------------------------------------------------------------------------- the options
def _check_options(texts, output, order_n, as_json, model_type, smoothing, memory, temp_dir, dask_address,
                   estimation, compat, weights_spec, tune_dev, prune_spec=None) -> tuple:
    """Options that contradict each other, or an lmplz habit that means something else here: a UsageError
    before any work.  Returns the texts (``("-",)`` for piped text) and the weights given."""
    weights = None
    if weights_spec is not None or tune_dev is not None:
        weights = _check_weighted_options(texts, memory, temp_dir, dask_address, estimation, compat, smoothing,
                                          weights_spec, tune_dev)
    streamed = (len(texts) > 1 and weights is None and tune_dev is None) or memory is not None \
        or temp_dir is not None or dask_address is not None or estimation == "disk"
    numbers = [t for t in texts if t.isdigit() and not os.path.exists(t)]
    if prune_spec is not None and numbers:
        # lmplz habit: `--prune 0 0 1` there; here the list is one argument, and the rest became texts.
        raise click.UsageError(f"--prune takes its thresholds as one comma-separated list: --prune "
                               f"{','.join([prune_spec] + numbers)} (lmplz's spelling '--prune {prune_spec} "
                               f"{' '.join(numbers)}' made {' '.join(numbers)} training texts)")
    if output.isdigit():
        # lmplz habit: `-o 5` is the order there.  Here it would silently name the model "5".
        raise click.UsageError(f"-o/--output is the model file, and '{output}' looks like an n-gram order: "
                               f"did you mean --order {output}?  (e.g. ngramlm train corpus.txt --order {output} "
                               "-o lm.arpa)")
    if compat == "srilm" and streamed:
        raise click.UsageError("--compat srilm estimates from the whole text's counts in memory: train one text in "
                               "memory (drop --memory, --temp-dir, --dask, --estimation disk)")
    if as_json and output == "-":
        raise click.UsageError("--json and -o - would both write to stdout: write the model to a file")
    if order_n is not None:
        raise click.UsageError(f"-n means a count elsewhere in this CLI; give the order as --order {order_n}")
    if not texts:
        if sys.stdin is None or sys.stdin.isatty():
            raise click.UsageError("no training text: give a file, '-' for stdin, or a corpus name "
                                   "(e.g. `ngramlm train toy -o lm.npz`), or pipe text in")
        texts = ("-",)
    if model_type != "ngram":
        text = texts[0] if len(texts) == 1 else None
        raise click.UsageError(f"neural models train with: ngramlm neural train --model {model_type} {text} "
                               "--out MODEL.pt")
    return texts, weights


def _check_weighted_options(texts, memory, temp_dir, dask_address, estimation, compat, smoothing, weights_spec,
                            tune_dev):
    """--weights/--tune-weights: several texts in memory, each a source of its own.  Returns the weights
    given (a bad list fails now, before the texts are read), or None for --tune-weights."""
    if len(texts) < 2:
        raise click.UsageError("--weights and --tune-weights merge the counts of several texts: give two or more "
                               "(e.g. ngramlm train general.txt indomain.txt --weights 1,4 -o lm.arpa)")
    if "-" in texts:
        raise click.UsageError("a weighted text must be a file or a corpus name, not '-' (stdin)")
    if memory is not None or temp_dir is not None or dask_address is not None or estimation == "disk":
        raise click.UsageError("count merging keeps each text's counts in memory: drop --memory, --temp-dir, --dask "
                               "and --estimation disk")
    if compat is not None:
        tool = "lmplz" if compat == "kenlm" else "ngram-count"
        raise click.UsageError(f"--compat {compat} reproduces {tool} on one text, and {tool} has no weights: drop one")
    if smoothing not in mergeable_smoothers():
        raise click.UsageError(f"count merging weights each text's smoothed statistics, defined here for "
                               f"{', '.join(mergeable_smoothers())}, not {smoothing}: train with --smoothing mkn")
    if weights_spec is not None and tune_dev is not None:
        raise click.UsageError("--weights gives the weights and --tune-weights searches them: give one")
    if weights_spec is None:
        return None
    from ngramlm.builder.count_merge import parse_weights

    return parse_weights(weights_spec, len(texts))


def _smoother_params(add_k, discount, discount_fallback, alpha, lambdas) -> dict:
    """The smoother's options given (make_smoother refuses those the smoother does not take)."""
    given = {"k": add_k, "discount": discount, "discount_fallback": (0.5, 1.0, 1.5) if discount_fallback else None,
             "alpha": alpha,
             "lambdas": _number_list(lambdas, float, "--lambdas", "use comma-separated numbers, e.g. 0.1,0.3,0.6")}
    return {p: v for p, v in given.items() if v is not None}


def _number_list(spec, kind, option: str, hint: str):
    """``"0,1,1"`` -> [0, 1, 1] (None when not given)."""
    if not spec:
        return None
    try:
        return [kind(x) for x in spec.split(",")]
    except ValueError:
        raise click.BadParameter(hint, param_hint=option) from None


def _closed_vocabulary_min_count(min_count: int, unk_min_count, vocab_path) -> int:
    """The vocabulary's min count: --min-count, or --unk-from-min-count, its other spelling (not both,
    unless they agree; not with --vocab, which fixes the vocabulary)."""
    if unk_min_count is None:
        return min_count
    if unk_min_count < 1:
        raise click.BadParameter(f"must be >= 1, got {unk_min_count} (1 keeps every word of the text)",
                                 param_hint="--unk-from-min-count")
    source = click.get_current_context().get_parameter_source("min_count")
    if source is not None and source.name != "DEFAULT" and min_count != unk_min_count:
        raise click.UsageError(f"--min-count {min_count} and --unk-from-min-count {unk_min_count} are the same "
                               "setting: give one")
    if vocab_path:
        raise click.UsageError("--vocab fixes the vocabulary, so --unk-from-min-count has no words to cut: "
                               "drop one of them")
    return unk_min_count


def _limit_words(limit_vocab_path, estimation):
    """The --limit-vocab word list (a missing or empty list fails now, before any work), or None."""
    if not limit_vocab_path:
        return None
    from ngramlm.tools.vocab_filter import read_word_list

    if estimation == "disk":
        raise click.UsageError("--limit-vocab limits the estimated model in memory, and --estimation disk "
                               "writes it without holding it: drop --estimation disk")
    return read_word_list(limit_vocab_path)


def _given_vocabulary(vocab_path, spec) -> tuple:
    """The --vocab vocabulary (or None) and the tokenizer: the options', else the vocabulary's."""
    if not vocab_path:
        return None, spec
    from corpora.vocab import Vocab

    vocab = Vocab.load(vocab_path)
    if spec is not None and vocab.tokenizer is not None and spec != vocab.tokenizer:
        raise InputError(f"the vocabulary was built with tokenizer {vocab.tokenizer.describe()}, "
                         f"not {spec.describe()}", path=vocab_path, fix="drop the tokenizer options")
    return vocab, spec or vocab.tokenizer


def _is_arpa(output: str) -> bool:
    return str(output) == "-" or str(output).endswith(MODEL_SUFFIXES_ARPA)


def _check_out_of_core(config, lm) -> None:
    """--estimation disk for a model the out-of-core estimation cannot make: say so before any work."""
    from ngramlm.builder.pipeline import out_of_core_refusal

    why = out_of_core_refusal(config, lm)
    if why is not None:
        raise click.UsageError(f"--estimation disk: {why}; use --estimation memory")


# ----------------------------------------------------------------------------- what train says
def _reporter(t0: float):
    """The build's progress on stderr: KenLM-style "=== k/4 stage ===" lines, and its messages indented."""
    from ngramlm.builder.pipeline import STAGES

    def report(message: str, stage=None, depth: int = 0) -> None:
        if stage is not None:
            click.echo(f"=== {stage}/{STAGES} {message} ({time.perf_counter() - t0:.2f} s) ===", err=True)
        else:
            click.echo("  " * depth + message, err=True)

    return report


def _report_model(built, output: str, as_json: bool, seconds: float) -> None:
    """The lines `train` prints after writing a model it estimated in memory."""
    lm = built.estimator
    click.echo(f"{lm!r} -> {output} ({seconds:.2f} s)", err=True)
    for warning in (lm.info_ or {}).get("warnings", []):
        click.echo(f"warning: {warning}", err=True)
    if lm.info_:
        click.echo(f"smoothing: {json.dumps(lm.info_)}", err=True)
    if as_json:
        limited = built.vocab_limit
        click.echo(json.dumps({"model": output, "text": built.text, "order": lm.order_, "smoothing": lm.smoother_name_,
                               "sentences": built.sentences, "words": built.words, "n_types": lm.vocab_.n_types,
                               "ngrams": [int(n) for n in lm.n_ngrams_],
                               "seconds": seconds, "info": lm.info_,
                               **({"vocab_limit": limited.to_dict()} if limited is not None else {})},
                              indent=2, default=float))


def _report_out_of_core(built, output: str, order: int, as_json: bool, seconds: float) -> None:
    """The lines `train` prints after writing a model, for one it never held."""
    dm, n_types = built.on_disk, built.vocab.n_types
    sizes = "/".join(str(n) for n in dm.n_ngrams)
    click.echo(f"NgramLM(order={order}, smoothing={built.smoother!r}, ngrams={sizes}, types={n_types}) -> "
               f"{output} ({seconds:.2f} s, estimated {getattr(dm, 'where', 'out of core')})", err=True)
    click.echo(f"smoothing: {json.dumps(dm.info)}", err=True)
    if as_json:
        click.echo(json.dumps({"model": output, "text": built.text, "order": order, "smoothing": built.smoother,
                               "sentences": built.sentences, "words": built.words, "n_types": n_types,
                               "ngrams": [int(n) for n in dm.n_ngrams], "seconds": seconds, "info": dm.info,
                               "estimation": "dask" if hasattr(dm, "where") else "disk"}, indent=2, default=float))
