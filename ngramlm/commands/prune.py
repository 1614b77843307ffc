"""``ngramlm prune``: entropy-prune an existing model (ARPA or native) to a size, a file size or a threshold.

The threshold search and byte estimate are :mod:`ngramlm.tools.prune_size`; pruning itself is
:mod:`ngramlm.tools.pruning` (Stolcke 1998, as SRILM's ``ngram -prune``).
"""
from __future__ import annotations

import json
import os
import shutil
import tempfile
import time
from pathlib import Path

import click

from corpora.errors import InputError
from corpora.options import data_dir_option, json_option
from corpora.textio import check_writable, read_text

MAX_BYTE_ATTEMPTS = 6  # writes tried for --max-bytes before giving up (one or two in practice)
BYTES_SLACK = 0.005  # --max-bytes: a file this much (relative) under the limit is close enough


def read_word_list(path: str) -> list:
    """Words of a ``--protect`` file, one a line (blank lines and surrounding spaces ignored)."""
    p = Path(path)
    if not p.exists():
        raise InputError("no such word list", path=path, fix="give a file of words, one a line")
    if p.is_dir():
        raise InputError("is a directory, not a word list", path=path, fix="give a file of words, one a line")
    words = [line.strip() for line in read_text(p).split("\n") if line.strip()]
    if not words:
        raise InputError("the word list is empty", path=path, fix="put the words to protect in it, one a line")
    bad = [w for w in words if any(c.isspace() for c in w)]
    if bad:
        raise InputError(f"a line holds more than one word: {bad[0]!r}", path=path,
                         fix="one word a line (an n-gram containing any of them is kept)")
    return words


def _pruned_model(model, tables, threshold: float, before: list, how: dict):
    from ..io.native import INIT_PARAMS
    from ..model import NgramLM

    params = {p: getattr(model, p, None) for p in INIT_PARAMS}
    if threshold > 0:
        params["prune_entropy"] = threshold
    pruned = NgramLM.from_tables(tables, **params)
    pruned.info_ = dict(pruned.info_, pruned={"entropy_threshold": threshold, "ngrams_before": before,
                                              "ngrams_after": [int(n) for n in pruned.n_ngrams_], **how})
    return pruned


def _write_within(model, scores, limit: int, output: str, *, arpa: bool, say=None, compat=None) -> tuple:
    """Prune to the largest model whose file at ``output`` has at most ``limit`` bytes: estimate, write,
    measure, and correct the estimate by what the write showed (aiming lower after a file too big,
    higher after one more than BYTES_SLACK short).  Returns (search, model, bytes, writes)."""
    from .common import save_model
    from ..tools.prune_size import ByteModel, prune_with, search_threshold

    out = Path(output)
    folder = Path(tempfile.mkdtemp(prefix=f".{out.name}.{os.getpid()}.prune-", dir=out.parent))
    try:
        trial = folder / out.name  # the output's name, so its suffix picks the same format
        kept = folder / ("kept-" + out.name)
        nothing = [None] + [m & False for m in scores.protected[1:]]  # the model cut to its unigrams
        save_model(_pruned_model(model, prune_with(model, nothing, compat=compat), 0.0, [], {}), str(trial))
        sizes = ByteModel(model, arpa=arpa, fixed_bytes=trial.stat().st_size)
        budget, best, written = limit, None, 0
        for attempt in range(1, MAX_BYTE_ATTEMPTS + 1):
            found = search_threshold(scores, lambda keep: sizes.estimate(keep) <= budget,
                                     what=f"a file of {limit} bytes", progress=say)
            if best is not None and found.threshold == best[0].threshold:
                break  # the correction moved nothing
            predicted = sizes.estimate(found.keep)
            pruned = _pruned_model(model, prune_with(model, found.keep, compat=compat), found.threshold,
                                   [int(n) for n in model.n_ngrams_],
                                   {"max_bytes": limit, "estimated_bytes": predicted})
            save_model(pruned, str(trial))
            written = trial.stat().st_size
            if say is not None:
                say(f"try {attempt}: wrote {written:,} bytes ({'within' if written <= limit else 'over'} {limit:,})")
            if written <= limit:
                if best is None or written > best[2]:
                    os.replace(trial, kept)
                    best = (found, pruned, written, attempt)
                if found.threshold == 0.0 or written >= limit * (1.0 - BYTES_SLACK):
                    break
            # The estimate was off by (written - predicted): aim that much the other way, with a margin.
            budget = limit - (written - predicted) - max(64, abs(written - limit) // 20)
        if best is None:
            raise InputError(f"no pruning found that writes at most {limit} bytes in {MAX_BYTE_ATTEMPTS} tries "
                             f"(the last wrote {written})", path=output, fix="allow a few more bytes")
        os.replace(kept, out)
        return best[0], best[1], best[2], attempt
    finally:
        shutil.rmtree(folder, ignore_errors=True)


@click.command("prune")
@click.argument("model_path", metavar="MODEL")
@click.option("-o", "--output", "--out", "output", type=click.Path(dir_okay=False), required=True,
              help="The pruned model: ARPA when the name ends in .arpa, .arpa.gz or .lm, else the native format.")
@click.option("--size", "max_ngrams", type=int, default=None, metavar="N",
              help="Keep at most N n-grams of orders >= 2 (unigrams are always kept and not counted).")
@click.option("--max-bytes", "max_bytes", default=None, metavar="M",
              help="Keep the written file within M bytes (500000, 64K, 50M, 1.5G; K = 1024).")
@click.option("--threshold", type=float, default=None, metavar="T",
              help="Prune at this threshold: n-grams whose removal raises perplexity by less than T (relative) "
                   "go, as SRILM's -prune T and `train --prune-entropy T`.")
@click.option("--protect", "protect_path", type=click.Path(dir_okay=False), default=None, metavar="WORDS_FILE",
              help="A file of words, one a line: no n-gram containing any of them is pruned.")
@click.option("--eval", "eval_text", default=None, metavar="TEXT",
              help="Print the perplexity before and after on this text (a file, '-', or a corpus name: its test "
                   "split).")
@click.option("--compat", type=click.Choice(["srilm"]), default=None,
              help="Score the n-grams in SRILM's own arithmetic (ngram -prune: single-precision log "
                   "probabilities), so the n-grams that score within ~1e-5 (relative) of the threshold go or "
                   "stay exactly as SRILM decides.  What is kept otherwise is SRILM's rule either way.")
@data_dir_option
@json_option
def prune_cmd(model_path, output, max_ngrams, max_bytes, threshold, protect_path, eval_text, compat, data_dir,
              as_json):
    """Entropy-prune MODEL (Stolcke 1998, back-off weights renormalised) to a size: the threshold is found
    by bisection (on its log) for the largest model within --size n-grams or --max-bytes of file.

    \b
    ngramlm prune lm.arpa -o small.arpa --size 1000000 --eval test.txt
    ngramlm prune lm.arpa -o small.npz --max-bytes 20M --protect names.txt
    ngramlm prune kn5.arpa -o p.arpa --threshold 1e-8 --compat srilm   # = ngram -order 5 -lm kn5.arpa -prune 1e-8
    """
    from .common import MODEL_SUFFIXES_ARPA, save_model
    from ..loading import load_any
    from .mix import read_encoded
    from ..tools.prune_size import keep_masks, parse_bytes, prune_scores, prune_with, search_threshold

    t0 = time.perf_counter()
    given = [x for x in (max_ngrams, max_bytes, threshold) if x is not None]
    if len(given) != 1:
        raise click.UsageError("say how much to prune with one of --size N, --max-bytes M or --threshold T")
    if max_ngrams is not None and max_ngrams < 0:
        raise InputError(f"--size must be >= 0, got {max_ngrams}", fix="e.g. --size 1000000 (n-grams of orders >= 2)")
    if threshold is not None and not threshold >= 0:
        raise InputError(f"--threshold must be >= 0, got {threshold}", fix="e.g. --threshold 1e-8")
    limit = parse_bytes(max_bytes) if max_bytes is not None else None
    check_writable(output, what="model file")  # a bad path fails now, before any work
    words = read_word_list(protect_path) if protect_path else []
    def say(message: str) -> None:  # progress on stderr: a search on a big model takes minutes
        click.echo(f"  {message} ({time.perf_counter() - t0:.1f} s)", err=True)

    say(f"reading {model_path}")
    model = load_any(model_path, ngrams=True)
    evl = read_encoded(eval_text, split="test", data_dir=data_dir, vocab=model.vocab_) if eval_text else None
    before = [int(n) for n in model.n_ngrams_]
    say(f"scoring the removal of {sum(before[1:]):,} n-grams (relative entropy)")
    scores = prune_scores(model, protect_words=words, compat=compat)
    if scores.unknown_words:
        shown = ", ".join(scores.unknown_words[:5]) + (" ..." if len(scores.unknown_words) > 5 else "")
        click.echo(f"note: {len(scores.unknown_words)} protected words are not in the model's vocabulary "
                   f"({shown}); they have no n-grams to keep", err=True)
    written = None
    attempts = 1
    if threshold is not None:
        keep = keep_masks(scores, threshold)
        search, how = None, {"threshold_given": threshold}
        pruned = _pruned_model(model, prune_with(model, keep, compat=compat), threshold, before, how)
        save_model(pruned, output)
        found_threshold, steps = threshold, 0
    elif max_ngrams is not None:
        search = search_threshold(scores, lambda keep: sum(int(m.sum()) for m in keep[1:]) <= max_ngrams,
                                  what=f"--size {max_ngrams}", progress=say)
        pruned = _pruned_model(model, prune_with(model, search.keep, compat=compat), search.threshold, before,
                               {"max_ngrams": max_ngrams})
        save_model(pruned, output)
        found_threshold, steps = search.threshold, search.steps
    else:
        search, pruned, written, attempts = _write_within(model, scores, limit, output,
                                                          arpa=str(output).endswith(MODEL_SUFFIXES_ARPA), say=say,
                                                          compat=compat)
        found_threshold, steps = search.threshold, search.steps
    if written is None:
        written = Path(output).stat().st_size
    after = [int(n) for n in pruned.n_ngrams_]
    seconds = time.perf_counter() - t0
    result = {"model": str(model_path), "output": str(output), "threshold": found_threshold,
              "bisection_steps": steps, "ngrams_before": before, "ngrams_after": after,
              "higher_order_before": sum(before[1:]), "higher_order_after": sum(after[1:]),
              "limit": {"size": max_ngrams, "max_bytes": limit, "threshold": threshold},
              "protected_words": len(scores.protected_words),
              "protected_ngrams": sum(int(p.sum()) for p in scores.protected[1:]), "bytes": written,
              "write_attempts": attempts, "seconds": seconds}
    if evl is not None:
        enc, oov, where = evl
        p0 = model.perplexity_report(enc, oov=oov).ppl
        p1 = pruned.perplexity_report(enc, oov=oov).ppl
        result["eval"] = {"text": where, "tokens": int(enc.n_tokens), "ppl_before": p0, "ppl_after": p1}
    if as_json:
        click.echo(json.dumps(result, indent=2))
        return
    _print_summary(result, model, max_ngrams, limit, threshold)


def _print_summary(r: dict, model, max_ngrams, limit, threshold) -> None:
    if threshold is not None:
        how = f"threshold {threshold:.4g} (given)"
    elif r["threshold"] == 0.0:
        how = "nothing pruned: the model is already within the limit"
    else:
        target = f"--size {max_ngrams}" if max_ngrams is not None else f"--max-bytes {limit}"
        how = (f"threshold {r['threshold']:.6g} found by bisection on log10 threshold ({r['bisection_steps']} steps) "
               f"for {target}")
    click.echo(f"pruned {r['model']} ({model.order_}-gram {model.smoother_name_}): {how}")
    if r["protected_words"]:
        click.echo(f"protected: {r['protected_words']} words, {r['protected_ngrams']} n-grams containing them, "
                   "all kept")
    click.echo(f"{'order':>6} {'before':>10} {'after':>10}")
    for k, (b, a) in enumerate(zip(r["ngrams_before"], r["ngrams_after"]), start=1):
        click.echo(f"{k:>6} {b:>10} {a:>10}" + ("  (unigrams are always kept)" if k == 1 else ""))
    click.echo(f"{'>= 2':>6} {r['higher_order_before']:>10} {r['higher_order_after']:>10}"
               + (f"  (at most {max_ngrams})" if max_ngrams is not None else ""))
    tries = f", {r['write_attempts']} writes" if limit is not None else ""
    within = f", limit {limit}" if limit is not None else ""
    click.echo(f"wrote {r['output']}: {r['bytes']} bytes{within}{tries} ({r['seconds']:.1f} s)")
    if "eval" in r:
        e = r["eval"]
        rel = 100.0 * (e["ppl_after"] / e["ppl_before"] - 1.0)
        click.echo(f"eval {e['text']}: ppl= {e['ppl_before']:.2f} before, ppl= {e['ppl_after']:.2f} after "
                   f"({rel:+.2f} %)")
