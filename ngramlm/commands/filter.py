"""``ngramlm filter``: limit an existing model (ARPA or native) to a recogniser's word list.

The limiting is :mod:`ngramlm.tools.vocab_filter` (the n-grams over the list kept, the removed words'
probability given to ``<unk>``, back-off weights renormalised); this module reads the files, checks
everything before anything is written, and prints what changed.
"""
from __future__ import annotations

import json
import time
from pathlib import Path

import click

from corpora.errors import InputError
from corpora.options import data_dir_option, json_option
from corpora.textio import check_writable


def _eval_texts(source: str, *, data_dir, vocab):
    """Sentences of ``source`` (a file, '-' or a corpus name's test split) and their name; read before
    anything is written, so a bad text leaves no output behind."""
    from corpora.sources import read_text_source

    src = read_text_source(source, split="test", data_dir=data_dir, tokenizer=vocab.tokenizer)
    if not src.sentences:
        raise InputError("the text has no sentences", path=src.description, fix="pass a non-empty text")
    return src.sentences, src.description


def eval_limit(original, limited, sentences, where: str) -> dict:
    """Perplexities of ``original`` and ``limited`` on the sentences, OOV-aware.

    An OOV of the limited model is a word not in its vocabulary (the list's words the model has); it is
    scored as ``<unk>``, i.e. with the probability of the whole class of removed words.  The perplexity
    "excluding OOVs" leaves those tokens out (KenLM's and SRILM's convention), and the original model is
    scored on exactly the same tokens, so the two are comparable."""
    from corpora.accounting import report_from_log10

    enc0, oov0 = original.encode(sentences)
    enc1, oov1 = limited.encode(sentences)  # the same tokens; its vocabulary is a subset, so oov0 implies oov1
    full = original.token_scores(enc0, oov=oov0)
    lim = limited.perplexity_report(enc1, oov=oov1)
    same = report_from_log10(full.log10_prob, oov1, enc0.n_sentences)
    return {"text": where, "tokens": lim.tokens, "words": lim.words, "oovs_original": int(oov0.sum()),
            "oovs_limited": lim.oovs,
            "ppl_original": report_from_log10(full.log10_prob, oov0, enc0.n_sentences).ppl,
            "ppl_limited": lim.ppl,
            "ppl_limited_excluding_oovs": lim.ppl_excluding_oovs,
            "ppl_original_same_tokens": same.ppl_excluding_oovs}


@click.command("filter")
@click.argument("vocab_path", metavar="VOCAB_FILE")
@click.argument("model_path", metavar="MODEL")
@click.option("-o", "--output", "--out", "output", type=click.Path(dir_okay=False), required=True,
              help="The limited model: ARPA when the name ends in .arpa, .arpa.gz or .lm, else the native format.")
@click.option("--eval", "eval_text", default=None, metavar="TEXT",
              help="Also score this text (a file, '-', or a corpus name: its test split) with both models: "
                   "the words outside the list are OOVs of the limited model, scored as <unk>.")
@click.option("--compat", type=click.Choice(["srilm"]), default=None,
              help="SRILM's -limit-vocab instead: keep the same n-grams but change no number (the model then "
                   "sums to less than one; every listed word keeps the full model's probability).")
@click.option("--renorm", is_flag=True,
              help="With --compat srilm: also SRILM's -renorm (back-off weights recomputed; the unigram mass "
                   "the removed words leave goes to the listed words the model lacks, or to every word).")
@data_dir_option
@json_option
def filter_cmd(vocab_path, model_path, output, eval_text, compat, renorm, data_dir, as_json):
    """Limit MODEL to the words of VOCAB_FILE (a recogniser's lexicon, one word a line): keep the n-grams
    all of whose words are listed (<s>, </s> and <unk> always), give the removed words' probability to
    <unk>, and renormalise the back-off weights so every context sums to one over the list plus <unk>.

    KenLM's `filter single` and SRILM's -limit-vocab keep the same n-grams but leave the numbers as they
    were, which is no longer a distribution; `ngramlm train --limit-vocab` does this after estimating
    (docs/asr.md).

    \b
    ngramlm filter words.txt lm.arpa -o lm.words.arpa --eval test.txt
    ngramlm filter words.txt lm.arpa -o lim.arpa --compat srilm   # = ngram -lm lm.arpa -vocab words.txt -limit-vocab
    """
    from .common import save_model
    from ..io.native import INIT_PARAMS
    from ..loading import load_any
    from ..model import NgramLM
    from ..tools.vocab_filter import check_limitable, limit_vocabulary, read_word_list

    t0 = time.perf_counter()
    if renorm and compat != "srilm":
        raise click.UsageError("--renorm is SRILM's -renorm after its -limit-vocab: add --compat srilm (without it "
                               "the back-off weights are always renormalised)")
    check_writable(output, what="model file")  # a bad path fails now, before any work
    words = read_word_list(vocab_path)
    model = load_any(model_path, ngrams=True)
    check_limitable(model, name=model_path)
    sentences, where = _eval_texts(eval_text, data_dir=data_dir, vocab=model.vocab_) if eval_text else (None, None)
    res = limit_vocabulary(model, words=words, source=vocab_path, compat=compat, renorm=renorm)
    if res.missing:
        shown = ", ".join(res.missing[:5]) + (" ..." if len(res.missing) > 5 else "")
        click.echo(f"note: {len(res.missing)} words of {vocab_path} are not in the model's vocabulary ({shown}); "
                   "they stay out of it (a recogniser would score them as <unk>)", err=True)
    params = {p: getattr(model, p, None) for p in INIT_PARAMS}
    limited = NgramLM.from_tables(res.tables, **params)
    save_model(limited, output)
    seconds = time.perf_counter() - t0
    result = {"model": str(model_path), "words_file": str(vocab_path), "output": str(output), **res.to_dict(),
              "bytes": Path(output).stat().st_size, "seconds": seconds}
    if sentences is not None:
        result["eval"] = eval_limit(model, limited, sentences, where)
    if as_json:
        click.echo(json.dumps(result, indent=2))
        return
    _print_summary(result, model)


LIMIT_NOTES = {
    "closed": "the removed words' unigram probability goes to <unk>; back-off weights renormalised",
    "srilm": "SRILM's -limit-vocab: no number changed, so the model sums to less than one",
    "srilm-renorm": "SRILM's -limit-vocab -renorm: back-off weights recomputed, the removed words' unigram mass "
                    "spread over the listed words the model lacks (or over every word)",
}


def _print_summary(r: dict, model) -> None:
    click.echo(f"limited {r['model']} ({model.order_}-gram {model.smoother_name_}) to {r['words_file']}: "
               f"{r['kept_words']} of its words kept, {r['removed_words']} removed (<s>, </s>, <unk> always kept)")
    click.echo(f"{'order':>6} {'before':>10} {'after':>10}")
    for k, (b, a) in enumerate(zip(r["ngrams_before"], r["ngrams_after"]), start=1):
        click.echo(f"{k:>6} {b:>10} {a:>10}")
    click.echo(f"p(<unk>) {r['unk_prob_before']:.6g} -> {r['unk_prob_after']:.6g} ({LIMIT_NOTES[r['method']]})")
    click.echo(f"wrote {r['output']}: {r['bytes']} bytes ({r['seconds']:.1f} s)")
    if "eval" in r:
        e = r["eval"]
        click.echo(f"eval {e['text']}: {e['tokens']} tokens, {e['oovs_limited']} OOVs of the limited model "
                   f"({e['oovs_original']} of the original), each scored as <unk>")
        click.echo(f"  ppl= {e['ppl_original']:10.2f}  original model, every token")
        click.echo(f"  ppl= {e['ppl_limited']:10.2f}  limited model, every token (an OOV gets <unk>'s probability)")
        click.echo(f"  ppl= {e['ppl_original_same_tokens']:10.2f}  original model, the limited model's OOVs left out")
        click.echo(f"  ppl= {e['ppl_limited_excluding_oovs']:10.2f}  limited model, the same tokens")
