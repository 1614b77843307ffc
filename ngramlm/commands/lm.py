"""CLI commands over an n-gram model file: ppl, score, generate, export-arpa, import-arpa.

Text arguments accept a file path (plain or .gz), ``-`` for stdin, or a registered
corpus name (``ptb``, ``toy``, ...; the split is chosen with ``--split``).
"""
from __future__ import annotations

import json

import click

from corpora.options import data_dir_option, json_option, seed_option, tokenizer_options, tokenizer_spec
from corpora.textio import check_writable
from corpora.accounting import format_report

from .common import check_tokenizer, load_model, other_kind


# ----------------------------------------------------------------------------- ppl / score
def _prepare_text(model_path, text, split, data_dir, tokenizer, lower, normalize):
    # Only scored: an ARPA file is read into the compact tables (same scores, half the memory, the
    # file's text never held whole).
    lm = load_model(model_path, compact=True)
    spec = tokenizer_spec(tokenizer, lower, normalize, base=None)
    check_tokenizer(lm, spec, model_path)
    spec = spec or lm.vocab_.tokenizer
    from corpora.sources import read_text_source

    src = read_text_source(text, split=split, data_dir=data_dir, tokenizer=spec)
    enc, oov = lm.encode(src.sentences)
    oov = _literal_unk_of_the_corpus(lm, model_path, src, enc, oov)
    return lm, src.sentences, enc, oov, src


def _literal_unk_of_the_corpus(lm, model_path, src, enc, oov):
    """A KenLM binary cannot record that its training text used ``<unk>`` as a word (an ARPA or native
    file of this toolkit does): for a named corpus whose text has its unknown-word token as a literal
    word (PTB), that token is then a word, not an OOV -- one accounting whatever the model's format."""
    import numpy as np

    from corpora.registry import REGISTRY
    from corpora.vocab import UNK_ID

    from ngramlm.kenlm.format import looks_like_kenlm_binary

    if src.corpus not in REGISTRY or lm.vocab_.n_corpus_unk_ or not oov.any():
        return oov
    if REGISTRY[src.corpus].unk_token != lm.vocab_.unk_token or not looks_like_kenlm_binary(model_path):
        return oov
    # The OOV flags of the corpus's own token: where the id is <unk> and the word is the token itself.
    words = [w for s in src.sentences for w in s + ["</s>"]]
    literal = (enc.ids == UNK_ID) & np.fromiter((w == lm.vocab_.unk_token for w in words), dtype=bool,
                                                count=len(words))
    lm.vocab_.n_corpus_unk_ = int(literal.sum())  # the report's note then says <unk> is a word of the corpus
    return oov & ~literal




@click.command("ppl")
@click.argument("model_path", metavar="MODEL")
@click.argument("text", default="-")
@click.option("--split", default="test", show_default=True, help="Split of a named corpus.")
@data_dir_option
@json_option
@tokenizer_options
def ppl_cmd(model_path, text, split, data_dir, as_json, tokenizer, lower, normalize):
    """Perplexity of MODEL (n-gram, ARPA or neural checkpoint) on TEXT (file, '-', or corpus name)."""
    kind = other_kind(model_path)
    if kind is not None:
        summary = kind.ppl_summary(model_path, text, split, data_dir)
        click.echo(json.dumps(summary, indent=2) if as_json else format_report(summary))
        return
    lm, sents, enc, oov, src = _prepare_text(model_path, text, split, data_dir, tokenizer, lower, normalize)
    from corpora.accounting import add_bytes

    from ..io.arpa import UNRECORDED

    n_bytes, description = src.n_bytes, src.description
    sample = sents[:200]  # for the OOV warning's look at the script
    del sents, src  # the text's words as strings: encoded, they are not needed while scoring
    r = lm.perplexity_report(enc, oov=oov)
    d = add_bytes(r.to_dict(), n_bytes)
    d.update({"model": str(model_path), "text": description, "order": lm.order_, "smoothing": lm.smoother_name_,
              "describe": f"{lm.order_}-gram {lm.smoother_name_}" if lm.smoother_name_ != UNRECORDED else
              f"{lm.order_}-gram, smoothing not recorded in the file"})
    from corpora.accounting import oov_warning

    d["warning"] = oov_warning(lm.vocab_, d, sample)
    if as_json:
        click.echo(json.dumps(d, indent=2))
        return
    click.echo(format_report(d))
    if r.zero_probs:
        click.echo(f"Note: {r.zero_probs} events have probability 0 under {lm.smoother_name_}; their perplexity "
                   "is infinite, so the figures above leave them out.")
    if not lm.is_distribution_:
        click.echo(f"Note: {lm.smoother_name_} scores are not a probability distribution; this is not a true perplexity.")


@click.command("score")
@click.argument("model_path", metavar="MODEL")
@click.argument("text", default="-")
@click.option("--per-token", is_flag=True, help="One line per predicted token: token, log10 p, matched order, OOV.")
@click.option("--split", default="test", show_default=True)
@data_dir_option
@tokenizer_options
def score_cmd(model_path, text, per_token, split, data_dir, tokenizer, lower, normalize):
    """Per-sentence (log10 prob, then the sentence) or per-token scores of TEXT."""
    import numpy as np

    lm, sents, enc, oov, _ = _prepare_text(model_path, text, split, data_dir, tokenizer, lower, normalize)
    s = lm.token_scores(enc, oov=oov)
    out = []
    if per_token:
        i = 0
        for sent in sents:
            for tok in list(sent) + [lm.vocab_.eos_token]:
                out.append(f"{tok}\t{s.log10_prob[i]:.6f}\t{int(s.ngram_length[i])}\t{'OOV' if s.oov[i] else ''}".rstrip())
                i += 1
            out.append("")
    else:
        tot = np.add.reduceat(s.log10_prob, enc.starts[:-1])  # per-sentence sums (an MLE -inf stays -inf)
        for sent, lp in zip(sents, tot):
            out.append(f"{lp:.6f}\t{' '.join(sent)}")
    click.echo("\n".join(out))


# ----------------------------------------------------------------------------- generate / arpa
@click.command("generate")
@click.argument("model_path", metavar="MODEL")
@click.option("--max-len", type=int, default=30, show_default=True, help="Words to generate at most per sample.")
@click.option("-n", "--num", type=int, default=1, show_default=True, help="How many samples (sentences) to print.")
@click.option("--prompt", default="", help="Words to start from.")
@click.option("--temperature", type=float, default=1.0, show_default=True)
@seed_option(default=0, help="Seed of the sampler.")
# The spellings of earlier versions, kept working (`neural generate` uses --max-len and -n/--num).
def generate_cmd(model_path, max_len, num, prompt, temperature, seed):
    """Sample text from MODEL (n-gram, ARPA or neural checkpoint).  A checkpoint samples as
    `ngramlm neural generate --strategy sample` does (which also offers greedy and beam search)."""
    kind = other_kind(model_path)
    if kind is not None:
        for line in kind.sample(model_path, prompt, max_len, num, temperature, seed):
            click.echo(line)
        return
    import numpy as np

    from corpora.tokenize import detokenize, make_tokenizer, TokenizerSpec

    lm = load_model(model_path)
    spec = lm.vocab_.tokenizer or TokenizerSpec()
    ctx = make_tokenizer(spec)(prompt) if prompt else []
    rng = np.random.default_rng(seed)
    for _ in range(num):
        words = lm.generate(num_words=max_len, context=ctx, temperature=temperature, random_state=rng)
        click.echo(detokenize(ctx + words, spec))


def _one_output(positional, option):
    """OUTPUT as an argument or as -o/--out (every writing command takes -o/--out), not both."""
    if positional is not None and option is not None and positional != option:
        raise click.UsageError(f"two outputs given ({positional!r} and -o {option!r}): give one")
    if positional is None and option is None:
        raise click.UsageError("no output given: add OUTPUT (or -o/--out FILE)")
    return option if positional is None else positional


@click.command("export-arpa")
@click.argument("model_path", metavar="MODEL")
@click.argument("output", type=click.Path(dir_okay=False, allow_dash=True), required=False)
@click.option("-o", "--output", "--out", "output_opt", type=click.Path(dir_okay=False, allow_dash=True), default=None,
              help="The ARPA file (instead of the OUTPUT argument); '-' is stdout.")
def export_arpa_cmd(model_path, output, output_opt):
    """Write MODEL as an ARPA file (readable by KenLM and SRILM); OUTPUT '-' is stdout."""
    from ngramlm.io.arpa import write_arpa

    output = _one_output(output, output_opt)

    if output != "-":
        check_writable(output, what="ARPA file")
    write_arpa(load_model(model_path, ngrams=True), output)
    click.echo(f"wrote {'the ARPA text to stdout' if output == '-' else output}", err=True)


@click.command("import-arpa")
@click.argument("arpa_path", metavar="ARPA")
@click.argument("output", type=click.Path(dir_okay=False), required=False)
@click.option("-o", "--output", "--out", "output_opt", type=click.Path(dir_okay=False), default=None,
              help="The native model file (instead of the OUTPUT argument; binary, so not '-').")
def import_arpa_cmd(arpa_path, output, output_opt):
    """Read an ARPA file (e.g. from KenLM's lmplz) into the fast native format."""
    from ngramlm.loading import read_arpa

    output = _one_output(output, output_opt)

    check_writable(output, what="model file")
    lm = read_arpa(arpa_path)
    lm.save(output)
    click.echo(f"{lm!r} -> {output}", err=True)
