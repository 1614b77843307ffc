"""``ngramlm train``: an n-gram model from text, in memory, streamed within a memory budget, out of
core or on a Dask cluster (lmplz habits: piped text, ``-o``, ``-S``, ``-T``)."""
from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import click

from corpora.errors import InputError
from corpora.options import data_dir_option, json_option
from corpora.textio import check_writable
from corpora.sources import plain_text_file

from ..smoothing import SMOOTHERS, named_list

from .common import (MODEL_SUFFIXES_ARPA, _spec_from_options, _tokenizer_options, load_sentences,
                     save_model)


# ----------------------------------------------------------------------------- train
@click.command("train")
@click.argument("texts", nargs=-1, metavar="[TEXT]...")
@click.option("-o", "--output", "--out", "output", type=click.Path(dir_okay=False, allow_dash=True), required=True,
              help="Model file to write: native format, or ARPA when the name ends in .arpa; '-' writes ARPA "
                   "to stdout.")
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
@click.option("--compat", type=click.Choice(["kenlm"]), default=None,
              help="mkn/kn: reproduce lmplz's conventions bit for bit (its uniform floor counts its own <unk>; the "
                   "last n-grams enter the discount statistics at raw count; float32 discounts).  Default: the "
                   "textbook estimate (docs/kenlm.md).")
@data_dir_option
@json_option
@click.option("--model", "model_type", default="ngram", show_default=True,
              type=click.Choice(["ngram", "lstm", "gru", "rnn_tanh", "rnn_relu", "transformer"]),
              help="ngram here; neural models train with `ngramlm neural train --model ...`.")
@_tokenizer_options
def train_cmd(texts, output, order, order_n, smoothing, add_k, discount, discount_fallback, alpha, lambdas, tune_on,
              prune_spec, prune_entropy, min_count, unk_min_count, limit_vocab_path, max_size, vocab_path, split,
              memory, temp_dir, dask_address, estimation, weights_spec, tune_dev, compat, data_dir, as_json,
              model_type, tokenizer, lower, normalize):
    """Train an n-gram model on TEXT: a file, '-' for stdin, or a corpus name (toy, ptb, ...).

    Without TEXT, text piped on stdin is read (as lmplz does); with nothing piped it is an error.
    Several files (plain or .gz) are one training text; they, --memory and --dask take the streaming
    build, which never holds the text whole."""
    text = texts[0] if len(texts) == 1 else None
    weighted = weights_spec is not None or tune_dev is not None
    if weighted:
        _check_weighted_options(texts, memory, temp_dir, dask_address, estimation, compat, smoothing)
        if weights_spec is not None and tune_dev is not None:
            raise click.UsageError("--weights gives the weights and --tune-weights searches them: give one")
        if weights_spec is not None:
            from ngramlm.builder.count_merge import parse_weights

            parse_weights(weights_spec, len(texts))  # a bad list fails now, before the texts are read
    streamed = (len(texts) > 1 and not weighted) or memory is not None or temp_dir is not None or dask_address is not None \
        or estimation == "disk"
    if output.isdigit():
        # lmplz habit: `-o 5` is the order there.  Here it would silently name the model "5".
        raise click.UsageError(f"-o/--output is the model file, and '{output}' looks like an n-gram order: "
                               f"did you mean --order {output}?  (e.g. ngramlm train corpus.txt --order {output} "
                               "-o lm.arpa)")
    if compat is not None and streamed:
        raise click.UsageError("--compat kenlm depends on the order words first appear in the text, which the "
                               "streaming build does not keep: train one text in memory (drop --memory, --temp-dir, "
                               "--dask, --estimation disk)")
    if as_json and output == "-":
        raise click.UsageError("--json and -o - would both write to stdout: write the model to a file")
    if order_n is not None:
        raise click.UsageError(f"-n means a count elsewhere in this CLI; give the order as --order {order_n}")
    if not texts:
        if sys.stdin is not None and not sys.stdin.isatty():
            text, texts = "-", ("-",)
        else:
            raise click.UsageError("no training text: give a file, '-' for stdin, or a corpus name "
                                   "(e.g. `ngramlm train toy -o lm.npz`), or pipe text in")
    if model_type != "ngram":
        raise click.UsageError(f"neural models train with: ngramlm neural train --model {model_type} {text} --out MODEL.pt")
    from corpora.vocab import Vocab
    from ngramlm.counts import NgramCounts, check_order
    from ngramlm.model import NgramLM

    check_order(order)
    if output != "-":
        check_writable(output, what="model file")  # before any work: a bad path fails now, not after training
    lam = None
    if lambdas:
        try:
            lam = [float(x) for x in lambdas.split(",")]
        except ValueError:
            raise click.BadParameter("use comma-separated numbers, e.g. 0.1,0.3,0.6", param_hint="--lambdas") from None
    prune = None
    if prune_spec:
        try:
            prune = [int(x) for x in prune_spec.split(",")]
        except ValueError:
            raise click.BadParameter("use comma-separated integers, e.g. 0,1,1", param_hint="--prune") from None
    from ngramlm.tools.pruning import check_prune_args

    check_prune_args(order, prune, prune_entropy)
    min_count = _closed_vocabulary_min_count(min_count, unk_min_count, vocab_path)
    limit_words = None
    if limit_vocab_path:
        from ngramlm.tools.vocab_filter import read_word_list

        if estimation == "disk":
            raise click.UsageError("--limit-vocab limits the estimated model in memory, and --estimation disk "
                                   "writes it without holding it: drop --estimation disk")
        limit_words = read_word_list(limit_vocab_path)  # a missing or empty list fails now, before any work
    t0 = time.perf_counter()

    def stage(i: int, what: str) -> None:  # KenLM-style "=== k/N stage ===" progress on stderr
        click.echo(f"=== {i}/4 {what} ({time.perf_counter() - t0:.2f} s) ===", err=True)

    lm = NgramLM(order=order, smoothing=smoothing, k=add_k, discount=discount,
                 discount_fallback=(0.5, 1.0, 1.5) if discount_fallback else None, alpha=alpha, lambdas=lam,
                 prune=prune, prune_entropy=prune_entropy, compat=compat)
    smoother = lm._make_smoother()  # validates the name before any work
    if limit_words is not None:
        from ngramlm.tools.vocab_filter import check_limitable_smoother

        check_limitable_smoother(smoother)
    spec = _spec_from_options(tokenizer, lower, normalize)
    if vocab_path:
        vocab = Vocab.load(vocab_path)
        if spec is not None and vocab.tokenizer is not None and spec != vocab.tokenizer:
            raise InputError(f"the vocabulary was built with tokenizer {vocab.tokenizer.describe()}, "
                             f"not {spec.describe()}", path=vocab_path, fix="drop the tokenizer options")
        spec = spec or vocab.tokenizer
    from corpora.registry import REGISTRY

    given_vocab = vocab if vocab_path else None
    if streamed:  # never holds the text whole: blocks within --memory, or shards on Dask workers
        enc = None
        # --limit-vocab limits the model in memory after estimation, so it is never estimated out of core.
        on_disk = None if limit_words is not None else _out_of_core_step(lm, smoother, estimation, dask_address,
                                                                           output, stage)
        res, where, used_spec = _streamed_counts(texts, split, data_dir, spec, given_vocab, order, memory,
                                                 temp_dir, dask_address, min_count, max_size, stage,
                                                 estimation=(estimation or "auto") if on_disk else "memory",
                                                 on_disk=on_disk)
        vocab, counts = res.vocab, res.counts
        n_sentences, n_words = res.sentences, res.words
    elif weighted:
        stage(1, f"reading and encoding {len(texts)} texts")
        sources, vocab, used_spec, where, n_sentences, n_words = _weighted_sources(
            texts, split, data_dir, spec, given_vocab, min_count, max_size)
        enc = None
    else:
        stage(1, "reading and encoding the training text")
        enc, vocab, used_spec, where = _in_memory_text(text, split, data_dir, spec, given_vocab, min_count, max_size)
        n_sentences, n_words = enc.n_sentences, enc.n_words
    click.echo(f"training {order}-gram {smoother.name} on {where}: {n_sentences} sentences, "
               f"{n_words} words, {vocab.n_types} types", err=True)
    if min_count > 1 and not vocab_path:
        click.echo(_closed_vocabulary_note(vocab, min_count), err=True)
    if limit_words is not None:
        from ngramlm.tools.vocab_filter import kept_ids

        kept_ids(vocab, limit_words, source=limit_vocab_path)  # no word in common: fail before counting
    if streamed and res.on_disk is not None:  # estimated and written out of core
        _report_out_of_core(res.on_disk, smoother, where, output, n_sentences, n_words, vocab, order, as_json,
                            time.perf_counter() - t0)
        return
    heldout = None
    if smoother.name == "jm" and lam is None:
        h_sents, _, _ = load_sentences(tune_on if text not in REGISTRY or Path(tune_on).exists() else text,
                                       split=tune_on if text in REGISTRY else "valid", data_dir=data_dir,
                                       tokenizer_spec=used_spec)
        heldout = vocab.encode_sentences(h_sents)
    merging = merged = None
    if weighted:
        stage(2, f"counting {order} orders of {len(texts)} texts")
        counts, merged, merging = _merged_counts(lm, smoother, sources, vocab, order, texts, weights_spec, tune_dev,
                                                 split, data_dir, used_spec)
        del sources
    elif not streamed:
        stage(2, f"counting {order} orders")
        counts = NgramCounts.from_encoded(enc, order=order, vocab_size=len(vocab))
    stage(3, f"smoothing ({smoother.name})" + (", pruning" if prune or prune_entropy else "")
          + (", limiting the vocabulary" if limit_words is not None else ""))
    # --compat kenlm prunes the unlisted words' n-grams inside the estimation, as lmplz does; otherwise
    # the estimated model is limited after (the closed-vocabulary renormalisation).
    in_estimation = limit_words is not None and compat is not None
    if merged is not None:
        lm.fit_counts(counts, vocab=vocab, smoother=merged)
    else:
        lm.fit(enc, vocab=vocab, counts=counts, heldout=heldout, limit_vocab=limit_words if in_estimation else None,
               limit_vocab_source=limit_vocab_path)
    del enc, counts  # the model keeps what it needs; free the counts before writing
    if merging is not None:
        lm.info_["count_merging"] = merging  # saved in .npz models (ARPA has no place for it)
    limited = None
    if in_estimation:
        limited = _report_limit(lm.vocab_limit_, limit_vocab_path)
    elif limit_words is not None:
        limited = _limit_vocabulary(lm, limit_words, limit_vocab_path)
    stage(4, f"writing {output}")
    save_model(lm, output)
    seconds = time.perf_counter() - t0
    click.echo(f"{lm!r} -> {output} ({seconds:.2f} s)", err=True)
    if lm.info_:
        click.echo(f"smoothing: {json.dumps(lm.info_)}", err=True)
    if as_json:
        click.echo(json.dumps({"model": output, "text": where, "order": lm.order_, "smoothing": lm.smoother_name_,
                               "sentences": n_sentences, "words": n_words, "n_types": lm.vocab_.n_types,
                               "ngrams": [int(n) for n in lm.n_ngrams_],
                               "seconds": seconds, "info": lm.info_,
                               **({"vocab_limit": limited.to_dict()} if limited is not None else {})},
                              indent=2, default=float))


def _check_weighted_options(texts, memory, temp_dir, dask_address, estimation, compat, smoothing):
    """--weights/--tune-weights: several texts in memory, each a source of its own."""
    if len(texts) < 2:
        raise click.UsageError("--weights and --tune-weights merge the counts of several texts: give two or more "
                               "(e.g. ngramlm train general.txt indomain.txt --weights 1,4 -o lm.arpa)")
    if "-" in texts:
        raise click.UsageError("a weighted text must be a file or a corpus name, not '-' (stdin)")
    if memory is not None or temp_dir is not None or dask_address is not None or estimation == "disk":
        raise click.UsageError("count merging keeps each text's counts in memory: drop --memory, --temp-dir, --dask "
                               "and --estimation disk")
    if compat is not None:
        raise click.UsageError("--compat kenlm reproduces lmplz on one text, and lmplz has no weights: drop one")
    from ngramlm.builder.count_merge import MERGEABLE

    if smoothing not in MERGEABLE:
        raise click.UsageError(f"count merging weights each text's smoothed statistics, defined here for "
                               f"{', '.join(MERGEABLE)}, not {smoothing}: train with --smoothing mkn")


def _weighted_sources(texts, split, data_dir, spec, vocab, min_count, max_size):
    """Each text's sentences encoded with one vocabulary fitted on all of them (unless given)."""
    from corpora.registry import REGISTRY
    from corpora.vocab import Vocab

    loaded, used_spec = [], spec
    for t in texts:
        sents, t_spec, where = load_sentences(t, split=split, data_dir=data_dir, tokenizer_spec=used_spec)
        if not sents or not any(sents):
            raise InputError("the training text has no tokens", path=where, fix="pass a non-empty text")
        used_spec = used_spec or t_spec  # the first text's tokenizer is every text's
        loaded.append((sents, where))
    if vocab is None:
        unk = next((REGISTRY[t].unk_token for t in texts if t in REGISTRY), None)
        vocab = Vocab(min_count=min_count, max_size=max_size, unk_token=unk or "<unk>", tokenizer=used_spec)
        vocab.fit(s for sents, _ in loaded for s in sents)
    encoded = [(vocab.encode_sentences(sents), where) for sents, where in loaded]
    where = " + ".join(w for _, w in encoded)
    return (encoded, vocab, used_spec, where, sum(e.n_sentences for e, _ in encoded),
            sum(e.n_words for e, _ in encoded))


def _merged_counts(lm, smoother, sources, vocab, order, texts, weights_spec, tune_dev, split, data_dir, used_spec):
    """The union of the texts' counts, the merged smoother with the weights given or tuned on ``tune_dev``,
    and a record of them for the model's info."""
    from corpora.registry import REGISTRY
    from ngramlm.builder.count_merge import MergedSmoother, align, parse_weights, tune_weights
    from ngramlm.counts import NgramCounts

    src = align([NgramCounts.from_encoded(e, order=order, vocab_size=len(vocab)) for e, _ in sources])
    for e, where in sources:
        click.echo(f"  {where}: {e.n_sentences} sentences, {e.n_words} words", err=True)
    record = {"texts": [w for _, w in sources]}
    if tune_dev is None:
        weights = parse_weights(weights_spec, len(texts))
        record["weights"] = weights
        return src.weighted(weights), MergedSmoother(smoother, src, weights), record
    dev_split = "valid" if tune_dev in REGISTRY and not Path(tune_dev).exists() else split
    d_sents, _, d_where = load_sentences(tune_dev, split=dev_split, data_dir=data_dir, tokenizer_spec=used_spec)
    dev = vocab.encode_sentences(d_sents)
    if dev.n_words == 0:
        raise InputError("the dev text has no tokens", path=d_where, fix="pass in-domain held-out text")

    def dev_ppl(weights):
        from ngramlm.io.native import INIT_PARAMS
        from ngramlm.model import NgramLM

        trial = NgramLM(**{p: getattr(lm, p) for p in INIT_PARAMS})
        return trial.fit_counts(src.weighted(weights), vocab=vocab,
                                smoother=MergedSmoother(smoother, src, weights)).perplexity(dev)

    click.echo(f"tuning the weights on {d_where} ({dev.n_words} words)", err=True)
    res = tune_weights(len(texts), dev_ppl, say=lambda m: click.echo(f"  {m}", err=True))
    click.echo(f"weights {','.join(f'{w:.4g}' for w in res.weights)}: dev ppl {res.dev_ppl:.4f} "
               f"({len(res.trials)} tries)", err=True)
    if res.at_edge:
        click.echo("note: a weight is at the end of the search range (2^-10 .. 2^10): the dev text may be too "
                   "small or unlike every text but one; give --weights to set it", err=True)
    record.update(weights=res.weights, tuned_on=d_where, dev_ppl=res.dev_ppl, tries=len(res.trials))
    return src.weighted(res.weights), MergedSmoother(smoother, src, res.weights), record


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


def _closed_vocabulary_note(vocab, min_count: int) -> str:
    """One line: how many training words --min-count made <unk>, which is then trained on them."""
    cut = [(w, c) for w, c in vocab.counts_.items() if c < min_count and w != vocab.unk_token]
    tokens = sum(c for _, c in cut)
    return (f"closed vocabulary: {len(cut)} word types seen fewer than {min_count} times ({tokens} tokens) are "
            f"{vocab.unk_token} before counting, so {vocab.unk_token} is estimated from them")


def _limit_vocabulary(lm, words, path):
    """Limit the trained ``lm`` to ``words`` in place (:mod:`ngramlm.tools.vocab_filter`); say what changed."""
    from ngramlm.tools.vocab_filter import limit_vocabulary

    res = limit_vocabulary(lm, words=words, source=path)
    lm._set_tables(res.tables)
    return _report_limit(res, path)


def _report_limit(res, path):
    sizes = ["/".join(str(n) for n in x) for x in (res.ngrams_before, res.ngrams_after)]
    how = ("pruned inside the estimation, as lmplz does (--compat kenlm)" if res.method == "lmplz"
           else f"p(<unk>) {res.unk_prob_before:.6g} -> {res.unk_prob_after:.6g}")
    click.echo(f"limit-vocab {path}: {res.kept_words} words kept, {res.removed_words} removed; n-grams "
               f"{sizes[0]} -> {sizes[1]}; {how}", err=True)
    if res.missing:
        click.echo(f"note: {len(res.missing)} words of {path} are not in the trained vocabulary (not in the "
                   f"text, or cut by --min-count), e.g. {', '.join(res.missing[:5])}: a recogniser would score them "
                   "as <unk>", err=True)
    return res


def _out_of_core_step(lm, smoother, estimation, dask_address, output, stage):
    """The ``on_disk`` step of the streaming build (estimate out of core, write ``output``), or None when
    this model is estimated in memory."""
    from ngramlm.builder import outofcore

    if estimation == "memory":
        return None
    why = outofcore.unsupported_reason(lm, smoother) or ("the Dask build estimates in memory" if dask_address else None)
    if why is not None:
        if estimation == "disk":
            raise click.UsageError(f"--estimation disk: {why}; use --estimation memory")
        return None

    def on_disk(dc, vocab, folder, mem):
        def progress(msg: str) -> None:
            click.echo(f"    {msg}", err=True)

        stage(2, "counted and merged into the temp folder")
        stage(3, f"smoothing ({smoother.name}) out of core")
        dm = outofcore.estimate(dc, smoother, vocab.n_types, folder, mem, progress=progress)
        stage(4, f"writing {output}")
        arpa = str(output) == "-" or str(output).endswith(MODEL_SUFFIXES_ARPA)
        outofcore.write_model(dm, lm, smoother, vocab, output, arpa=arpa, memory=mem, folder=folder)
        return dm

    return on_disk


def _report_out_of_core(dm, smoother, where, output, n_sentences, n_words, vocab, order, as_json, seconds):
    """The lines `train` prints after writing a model, for one it never held."""
    sizes = "/".join(str(n) for n in dm.n_ngrams)
    click.echo(f"NgramLM(order={order}, smoothing={smoother.name!r}, ngrams={sizes}, types={vocab.n_types}) -> "
               f"{output} ({seconds:.2f} s, estimated out of core)", err=True)
    click.echo(f"smoothing: {json.dumps(dm.info)}", err=True)
    if as_json:
        click.echo(json.dumps({"model": output, "text": where, "order": order, "smoothing": smoother.name,
                               "sentences": n_sentences, "words": n_words, "n_types": vocab.n_types,
                               "ngrams": [int(n) for n in dm.n_ngrams], "seconds": seconds, "info": dm.info,
                               "estimation": "disk"}, indent=2, default=float))


def _streamed_counts(texts, split, data_dir, spec, vocab, order, memory, temp_dir, dask_address, min_count, max_size,
                     stage, *, estimation="memory", on_disk=None):
    """The streaming build (``--memory``, ``--temp-dir``, ``--dask``, several files): BuildResult, label, spec."""
    from corpora.registry import REGISTRY
    from corpora.tokenize import TokenizerSpec
    from ngramlm.builder.text_counts import BuildInput, build_counts

    line_filter, keep_empty, unk = None, True, None
    if len(texts) == 1 and texts[0] in REGISTRY:
        plain = plain_text_file(texts[0], split=split, data_dir=data_dir)
        if plain is None:
            raise click.UsageError(f"corpus {texts[0]!r} is not one plain text file per split, which the streaming "
                                   "build reads; train it without --memory/--dask")
        sources, keep_empty, unk, line_filter = [plain.path], plain.keep_empty, plain.unk_token, plain.line_filter
        spec = spec or plain.tokenizer
        where = plain.description
    else:
        for t in texts:
            if t != "-" and not Path(t).is_file():
                raise InputError("no such file" if not Path(t).exists() else "not a file", path=t,
                                 fix="give text files (plain or .gz) or '-' for stdin; a named corpus alone")
        sources, where = list(texts), ", ".join(texts)
    spec = spec or TokenizerSpec()
    inp = BuildInput(sources, tokenizer=spec, keep_empty=keep_empty, line_filter=line_filter,
                     vocab_params={"min_count": min_count, "max_size": max_size, "unk_token": unk or "<unk>"})

    def progress(msg: str) -> None:
        click.echo(f"    {msg}", err=True)

    stage(1, "streaming build: vocabulary and counts" + (f" on the Dask cluster {dask_address}" if dask_address else ""))
    res = build_counts(inp, order=order, vocab=vocab or None, memory=memory, temp_dir=temp_dir,
                       client=dask_address or None, progress=progress, estimation=estimation, on_disk=on_disk)
    if res.on_disk is None:
        stage(2, "counted and merged")
    return res, where, spec


def _in_memory_text(text, split, data_dir, spec, vocab, min_count, max_size):
    """Today's path: the whole training text encoded in memory -> (encoded, vocab, spec, label)."""
    from corpora.registry import REGISTRY
    from corpora.vocab import Vocab

    unk = REGISTRY[text].unk_token if text in REGISTRY else None
    fast = plain_text_file(text, split=split, data_dir=data_dir) if not vocab else None
    if fast is not None and not (spec or fast.tokenizer).fitted:
        fast = None  # a tokenizer that learns is fitted by the pipeline on the training lines
    if fast is not None:
        # Fast path: count and encode straight from the lines (no list of sentences).
        from corpora.corpus import read_lines
        from corpora.tokenize import make_tokenizer

        used_spec = spec or fast.tokenizer
        lines = read_lines(fast.path, line_filter=fast.line_filter)
        vocab = Vocab(min_count=min_count, max_size=max_size, unk_token=unk or "<unk>", tokenizer=used_spec)
        # The line policy: a user's file keeps its blank lines as empty sentences, as lmplz does.
        enc = vocab.fit_encode_lines(lines, make_tokenizer(used_spec), keep_empty=fast.keep_empty)
        del lines
        where = fast.description
    else:
        sents, used_spec, where = load_sentences(text, split=split, data_dir=data_dir, tokenizer_spec=spec)
        if not vocab:
            vocab = Vocab(min_count=min_count, max_size=max_size, unk_token=unk or "<unk>", tokenizer=used_spec).fit(sents)
        enc = vocab.encode_sentences(sents)
        del sents
    if enc.n_sentences == 0 or enc.n_words == 0:
        raise InputError("the training text has no tokens", path=where, fix="pass a non-empty text")
    return enc, vocab, used_spec, where
