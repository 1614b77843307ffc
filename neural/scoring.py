"""Scoring a checkpoint on a text: the perplexity summary of ``ngramlm neural ppl`` and ``ngramlm ppl
model.pt``, and the per-token log10 probabilities a mixture or a comparison needs.

The accounting is the n-gram models' (:mod:`corpora.accounting`): the same predicted tokens (every
word and ``</s>``), the same OOV rules, the same report, so the numbers of both families compare.
"""
from __future__ import annotations

import math
import os
import time
from pathlib import Path
from typing import Callable, Optional

import numpy as np

from corpora import load_corpus
from corpora.errors import InputError
from corpora.registry import REGISTRY

from .checkpoint import load_model


def token_log10(checkpoint_path: os.PathLike | str, sentences: list) -> np.ndarray:
    """log10 p of every word and ``</s>`` of ``sentences`` (token lists), in order, under a checkpoint."""
    from .evaluation import token_log_probs

    model, vocab, _ = load_model(checkpoint_path)
    return token_log_probs(model, vocab.encode_sentences(sentences).ids) / math.log(10)


def _score_sentences(checkpoint_path, text_path_or_corpus, split, data_dir, vocab, data_info):
    """(sentences, description, UTF-8 bytes): a registered corpus's split, a whole text file, or -- when no text is
    given -- the split of the corpus the checkpoint was trained on (a training *file*'s held-out tail)."""
    if text_path_or_corpus is None:
        name = data_info.get("corpus")
        if not name:
            raise InputError("no text given and the checkpoint does not record its corpus", path=checkpoint_path,
                             fix="pass a corpus name or a text file")
        if name not in REGISTRY and not Path(name).exists():
            raise InputError(f"the training corpus {name!r} is not available here", path=checkpoint_path,
                             fix="pass a corpus name or a text file")
        corpus = load_corpus(name, data_dir=data_dir, tokenizer=vocab.tokenizer,
                             valid=data_info.get("valid"), test=data_info.get("test"))
        return corpus.sentences(split), f"{name}:{split}", corpus.n_bytes.get(split)
    from corpora.sources import read_text_source

    src = read_text_source(str(text_path_or_corpus), split=split, data_dir=data_dir,
                           tokenizer=vocab.tokenizer)
    return src.sentences, src.description, src.n_bytes


def ppl_summary(checkpoint_path: os.PathLike | str, text_path_or_corpus: Optional[str] = None, *,
                split: str = "test", data_dir: Optional[str] = None, batch_size: int = 1,
                threads: Optional[int] = 2, adapt=None, log: Optional[Callable[[str], None]] = None,
                progress: bool = False) -> dict:
    """Perplexity of a checkpoint on a corpus split (by name), a whole text file, or ``"-"`` (stdin).

    ``text_path_or_corpus=None`` scores the ``split`` of the corpus the checkpoint was trained on.

    Returns a JSON-able dict: sentences, words, OOVs (words mapped to ``<unk>``),
    tokens predicted (words + sentence ends), total log-probability in nats, log10 and
    log2, perplexity and bits per token.

    ``adapt`` (a :class:`neural.adaptation.adaptive.AdaptOptions`) adds ``"adaptation"``: the
    perplexities with a unigram / neural cache and dynamic evaluation, their parameters
    (tuned on the valid split unless given) and times.  Without it the dict is unchanged.

    ``log`` gets one line when scoring starts (what, how many tokens, the threads) and the thread rule's
    switches (:class:`neural.training.contention.ThreadRule`: one torch thread while other processes use
    the cores); ``progress`` draws a bar of the tokens scored on stderr (where stderr is a terminal).
    """
    import torch

    from corpora.accounting import add_bytes, oov_flags, report_from_log10

    from .evaluation import evaluate, token_log_probs

    if threads:
        torch.set_num_threads(threads)
    model, vocab, ckpt = load_model(checkpoint_path)
    data_info = (ckpt.get("train") or {}).get("data") or {}
    sentences, described, n_bytes = _score_sentences(checkpoint_path, text_path_or_corpus, split, data_dir, vocab,
                                                     data_info)
    encoded = vocab.encode_sentences(sentences)
    oov = oov_flags(vocab, sentences)
    from .training.contention import ThreadRule

    rule = ThreadRule(threads or torch.get_num_threads(), log=log).start(0.2)
    if log is not None:
        log(f"scoring {described}: {encoded.n_tokens:,} tokens with the {ckpt['model']['name']} model, "
            f"{rule.threads} torch thread{'s' if rule.threads > 1 else ''}")
    from tqdm import tqdm

    bar = tqdm(total=int(encoded.n_tokens), unit="tok", desc="scoring", disable=None if progress else True,
               leave=False, dynamic_ncols=True)

    def on_chunk(n: int) -> None:
        bar.update(n)
        rule.tick()

    t0 = time.perf_counter()
    plain = plain_seconds = None
    if adapt is not None:
        from .evaluation import token_log_probs_and_hidden

        adapt.validate(model)  # a bad option fails before any scoring
        if batch_size != 1:
            raise InputError("--cache and --dynamic-eval score every token with its full history",
                             fix="drop --batch-size (or pass --batch-size 1)")

        # The same log-probs as token_log_probs, bit for bit, plus the states the cache needs.
        plain = token_log_probs_and_hidden(model, encoded.ids, on_chunk=on_chunk)
        plain_seconds = time.perf_counter() - t0
        log10 = plain[0] / math.log(10)
        d = report_from_log10(log10, oov, encoded.n_sentences).to_dict()
    elif batch_size == 1:
        # Per-token scores: the same accounting as an n-gram model (OOVs, ppl excluding OOVs, ppl1).
        log10 = token_log_probs(model, encoded.ids, on_chunk=on_chunk) / math.log(10)
        d = report_from_log10(log10, oov, encoded.n_sentences).to_dict()
    else:  # rows scored in parallel give a total only
        result = evaluate(model, encoded.ids, batch_size=batch_size, on_chunk=on_chunk)
        d = report_from_log10(np.full(result.n_predicted, result.log10_prob / max(1, result.n_predicted)),
                              np.zeros(result.n_predicted, dtype=bool), encoded.n_sentences).to_dict()
        d["oovs"] = int(oov.sum())
        d["ppl_excluding_oovs"] = None  # needs per-token scores: --batch-size 1
    bar.close()
    add_bytes(d, n_bytes)
    d.update({
        "model": str(checkpoint_path),
        "architecture": ckpt["model"]["name"],
        "describe": f"neural {ckpt['model']['name']}",
        "text": described,
        "n_types": vocab.n_types,
        "tokens_predicted": d["tokens"],  # the name earlier versions printed
        "log_prob_nats": d["log10_prob"] * math.log(10),
        "log2_prob": d["log10_prob"] / math.log10(2),
        "seconds": round(time.perf_counter() - t0, 2),
    })
    from corpora.accounting import oov_warning

    d["warning"] = oov_warning(vocab, d, sentences)
    if adapt is not None:
        d["adaptation"] = _adaptation(model, vocab, encoded, oov, plain, plain_seconds, adapt,
                                      checkpoint_path=checkpoint_path,
                                      text=text_path_or_corpus, scored=described, data_dir=data_dir,
                                      data_info=data_info)
    return d


def _adaptation(model, vocab, encoded, oov, plain, plain_seconds, adapt, *, checkpoint_path, text, scored, data_dir,
                data_info) -> dict:
    """The ``"adaptation"`` entry of :func:`ppl_summary`: tuning and training text found, methods run."""
    from corpora.sources import source_kind

    from .adaptation.adaptive import evaluate_adapted, summarise

    tune_ids = train_ids = None
    tuned_on = note = None
    if adapt.needs_tuning_text:
        # A registered corpus is tuned on its own valid split; a file or stdin on the training corpus's.
        source = text if text is not None and source_kind(str(text)) == "corpus" else None
        try:
            sentences, tuned_on, _ = _score_sentences(checkpoint_path, source, "valid", data_dir, vocab, data_info)
        except InputError as exc:
            raise InputError(f"no valid split to tune the adaptation parameters on ({exc.message})",
                             path=checkpoint_path,
                             fix="pass --cache-theta and --cache-lambda (with --cache) and --dyn-lr (with "
                                 "--dynamic-eval), or make the training corpus available") from None
        tune_ids = vocab.encode_sentences(sentences).ids
        if tuned_on == scored:
            note = "the parameters were tuned on the text being scored, so these perplexities are optimistic"
    if adapt.needs_training_text:
        try:
            sentences, _, _ = _score_sentences(checkpoint_path, None, "train", data_dir, vocab, data_info)
        except InputError as exc:
            raise InputError(f"the rms rule needs the training text for its gradient RMS ({exc.message})",
                             path=checkpoint_path, fix="pass --dyn-rule sgd, or make the training corpus available") \
                from None
        train_ids = _prefix_ids(vocab, sentences, adapt.rms_tokens)
    result = evaluate_adapted(model, encoded.ids, options=adapt, tune_ids=tune_ids, train_ids=train_ids, plain=plain,
                              plain_seconds=plain_seconds)
    out = summarise(result, oov=oov, n_sentences=encoded.n_sentences)
    out["tuned_on"] = tuned_on
    out["note"] = note
    return out


def _prefix_ids(vocab, sentences, max_tokens: Optional[int]) -> np.ndarray:
    """The id stream of the first sentences holding ``max_tokens`` tokens (all of them for None)."""
    if max_tokens is None:
        return vocab.encode_sentences(sentences).ids
    kept, n = [], 0
    for s in sentences:
        if n >= max_tokens:
            break
        kept.append(s)
        n += len(s) + 1  # the words and the sentence end
    return vocab.encode_sentences(kept).ids[:max_tokens]

