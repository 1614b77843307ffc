"""Translating and scoring with a translator: :class:`~neural.seq2seq.rnn.Seq2Seq` (GRU) or
:class:`~neural.seq2seq.transformer.Seq2SeqTransformer`, through the calls both provide
(``encode``, ``step``, ``select_state``, ``Memory.select``, ``teacher_forced``).

- :func:`greedy_translate`: the most probable next token, repeatedly, for a batch of sources;
- :func:`sample_translate`: a draw from the model's distribution at a softmax temperature, for a batch;
- :func:`beam_translate`: beam search (the LM's :func:`~neural.generate.beam_core`), complete
  hypotheses ranked by ``log P(y | x) / |y|**alpha`` where ``|y|`` counts ``</s>``; ``alpha = 0``
  is the raw log-probability (favours short outputs), ``alpha = 1`` the mean per token;
- shallow fusion: greedy and beam search take ``lm`` (a target-side language model) and ``lm_weight``
  ``w``, and rank by ``log P(y | x) + w log P_LM(y)``, token by token.  ``lm`` is any object with
  ``start(batch) -> states``, ``advance(states, tokens) -> states`` (tokens: the translator's target
  ids) and ``log_probs(states) -> (B, V)`` natural-log over the translator's target vocabulary; states
  index by rows (``states[rows]``).  ``fusion.target`` makes one of any n-gram model file (this package
  never imports it: ``corpora.modelkinds.fusion_lm`` hands it over);
- :func:`score_pairs`: the conditional log-probability of reference targets (teacher forcing),
  every target word and ``</s>`` predicted -- the tokens the n-gram and LSTM LMs predict;
- :func:`corpus_bleu`: sacrebleu's corpus BLEU over the toolkit's tokens, and its signature;
- :func:`bleu_table` and :func:`conditional_ppl`: a split of a parallel corpus evaluated (what
  ``seq2seq train``/``ppl`` print and the parallel comparison reports).
"""
from __future__ import annotations

import math
import time
from typing import Optional, Sequence

import numpy as np
import torch

from corpora.vocab import BOS_ID, EOS_ID, PAD_ID, UNK_ID

from ..evaluation import EvalResult
from ..generate import Hypothesis, beam_core, check_beam
from .pairs import PairBatches, source_batch
from .rnn import Seq2Seq


def _fused(logp: torch.Tensor, lm, lm_states, lm_weight: float) -> torch.Tensor:
    """``log P(y_t | ...) + w log P_LM(y_t | ...)`` for every target id (the translator's own without an LM)."""
    if lm is None or lm_weight == 0:  # 0 x log 0 would be NaN where the LM never predicts a token (<s>)
        return logp
    return logp + lm_weight * lm.log_probs(lm_states).to(logp.dtype)


def check_fusion(lm, lm_weight: float) -> None:
    from corpora.errors import InputError

    if lm is not None and not lm_weight >= 0:
        raise InputError(f"the LM weight must be >= 0, got {lm_weight}", fix="e.g. --lm-weight 0.2")


@torch.no_grad()
def greedy_translate(model: Seq2Seq, sources: Sequence, *, max_len: int = 30, batch_size: int = 256,
                     need_weights: bool = False, lm=None, lm_weight: float = 0.0) -> list:
    """Target ids per source (ending with ``</s>`` when the model stopped before ``max_len``).

    With ``need_weights`` each item is ``(ids, weights)``, ``weights`` (len(ids), S) the attention
    over the source tokens (its ``</s>`` included) at every output step.  ``lm``/``lm_weight``: shallow
    fusion (the module docstring)."""
    check_fusion(lm, lm_weight)
    model.eval()
    out: list = []
    for a in range(0, len(sources), batch_size):
        chunk = sources[a:a + batch_size]
        src, src_len = source_batch(chunk)
        memory, state = model.encode(src, src_len)
        B = len(chunk)
        y = torch.full((B,), BOS_ID, dtype=torch.long)
        done = torch.zeros(B, dtype=torch.bool)
        ids, weights = [], []
        lm_states = lm.start(B) if lm is not None else None
        for t in range(max_len):
            logp, state, w = model.step(memory, y, state)
            if lm is not None and t > 0:
                lm_states = lm.advance(lm_states, y)
            y = _fused(logp, lm, lm_states, lm_weight).argmax(dim=-1)
            ids.append(y)
            if need_weights and w is not None:
                weights.append(w)
            done |= y == EOS_ID
            if bool(done.all()):
                break
        ids_t = torch.stack(ids, dim=1)  # (B, T)
        for b in range(B):
            row = ids_t[b].tolist()
            n = row.index(EOS_ID) + 1 if EOS_ID in row else len(row)
            if need_weights:
                w_b = (torch.stack(weights, dim=1)[b, :n, :int(src_len[b])].numpy() if weights
                       else np.zeros((n, int(src_len[b]))))
                out.append((row[:n], w_b))
            else:
                out.append(row[:n])
    return out


@torch.no_grad()
def sample_translate(model: Seq2Seq, sources: Sequence, *, temperature: float = 1.0, max_len: int = 30,
                     seed: Optional[int] = None, batch_size: int = 256) -> list:
    """Target ids per source, each token drawn from ``softmax(log P / temperature)`` (``<pad>`` and ``<s>``
    never); a draw ends at ``</s>`` or ``max_len``.  The same ``seed`` gives the same draws."""
    from corpora.errors import InputError

    if not temperature > 0:
        raise InputError(f"temperature must be > 0, got {temperature}", fix="use greedy decoding for temperature 0")
    model.eval()
    gen = torch.Generator().manual_seed(0 if seed is None else int(seed))
    out: list = []
    for a in range(0, len(sources), batch_size):
        chunk = sources[a:a + batch_size]
        src, src_len = source_batch(chunk)
        memory, state = model.encode(src, src_len)
        y = torch.full((len(chunk),), BOS_ID, dtype=torch.long)
        done = torch.zeros(len(chunk), dtype=torch.bool)
        ids = []
        for _ in range(max_len):
            logp, state, _ = model.step(memory, y, state)
            y = torch.multinomial(torch.softmax(logp / temperature, dim=-1), 1, generator=gen)[:, 0]
            ids.append(y)
            done |= y == EOS_ID
            if bool(done.all()):
                break
        for row in torch.stack(ids, dim=1).tolist():
            out.append(row[:row.index(EOS_ID) + 1] if EOS_ID in row else row)
    return out


@torch.no_grad()
def beam_translate(model: Seq2Seq, source: Sequence[int], *, beam_size: int = 5, max_len: int = 30,
                   alpha: float = 0.0, lm=None, lm_weight: float = 0.0) -> list:
    """Complete hypotheses for one source sentence, best first (see the module docstring); with ``lm``,
    their scores are the fused ones."""
    check_beam(beam_size, max_len)
    check_fusion(lm, lm_weight)
    model.eval()
    src, src_len = source_batch([source])
    memory, state = model.encode(src, src_len)
    logp, state, _ = model.step(memory, torch.tensor([BOS_ID]), state)
    lm_states = lm.start(1) if lm is not None else None

    def advance(rows: torch.Tensor, toks: torch.Tensor) -> torch.Tensor:
        nonlocal memory, state, lm_states
        memory = memory.select(rows)
        state = model.select_state(state, rows)
        nxt, state, _ = model.step(memory, toks, state)
        if lm is not None:
            lm_states = lm.advance(lm_states[rows], toks)
        return _fused(nxt, lm, lm_states, lm_weight)

    return beam_core(_fused(logp, lm, lm_states, lm_weight), advance, beam_size=beam_size, max_len=max_len,
                     alpha=alpha)


def best_translation(hyps: list) -> list:
    """The ids of the best hypothesis (``[]`` if there is none)."""
    return list(hyps[0].ids) if hyps else []


@torch.no_grad()
def score_pairs(model: Seq2Seq, sources: Sequence, targets: Sequence, *, batch_size: int = 256,
                per_token: bool = False):
    """Teacher-forced ``ln P(target | source)``: an :class:`EvalResult`, or with ``per_token`` the
    natural-log probability of every predicted token (each target's words, then its ``</s>``) in order."""
    was_training = model.training
    model.eval()
    total, count, parts = 0.0, 0, []
    try:
        batches = PairBatches(sources, targets, batch_size, shuffle=False)
        for k in range(len(batches)):
            (src, src_len, tgt_in), y = batches[k]
            logits, _, _ = model.teacher_forced(src, src_len, tgt_in)
            logp = torch.log_softmax(logits.float(), dim=-1)
            real = y != PAD_ID
            tok = logp.gather(-1, y.clamp(min=0)[..., None]).squeeze(-1)  # (B, T)
            total += float(tok[real].double().sum())
            count += int(real.sum())
            if per_token:
                parts.extend(tok[b][real[b]].double().numpy() for b in range(y.size(0)))
    finally:
        model.train(was_training)
    if per_token:
        return np.concatenate(parts) if parts else np.zeros(0)
    return EvalResult(n_predicted=count, log_prob_nats=total)


def ids_to_text(vocab, ids: Sequence[int]) -> str:
    """Target ids (``</s>`` and anything after it dropped) -> space-joined tokens."""
    words = []
    for i in ids:
        if int(i) == EOS_ID:
            break
        words.append(vocab.lookup_token(int(i)))
    return " ".join(words)


def corpus_bleu(hypotheses: Sequence[str], references: Sequence[str], *, tokenize: str = "none") -> tuple:
    """``(BLEU, signature)``, one reference per sentence.  The default ``tokenize="none"`` scores the
    strings' own space-separated tokens -- the toolkit's tokenization, which already splits punctuation
    (sacrebleu's 13a would re-tokenize them, and warns that they look tokenized)."""
    from sacrebleu.metrics import BLEU

    metric = BLEU(tokenize=tokenize, force=True)
    result = metric.corpus_score(list(hypotheses), [list(references)])
    return float(result.score), str(metric.get_signature())


def bleu_interval(hypotheses: Sequence[str], references: Sequence[str], *, resamples: int = 1000,
                  seed: int = 20240601, level: float = 0.95, tokenize: str = "none") -> Optional[list]:
    """The percentile bootstrap interval of corpus BLEU over the sentences (Koehn 2004): resample the test
    pairs with replacement, recompute corpus BLEU from the resampled n-gram statistics.  The same seed and
    draws as the perplexity intervals of a comparison (reports.experiments.bootstrap)."""
    from sacrebleu.metrics import BLEU

    n = len(hypotheses)
    if n < 2:
        return None
    metric = BLEU(tokenize=tokenize, force=True)
    # Per sentence: hypothesis and reference lengths, matched and total n-grams for n = 1..4 -- what
    # corpus BLEU sums before its geometric mean and brevity penalty.
    stats = np.asarray(metric._extract_corpus_statistics(list(hypotheses), [list(references)]), dtype=np.int64)
    rng = np.random.default_rng(seed)
    counts = rng.multinomial(n, np.full(n, 1.0 / n), size=resamples)
    scores = [metric._compute_score_from_stats((c @ stats).tolist()).score for c in counts]
    lo, hi = np.quantile(scores, [(1 - level) / 2, 1 - (1 - level) / 2])
    return [float(lo), float(hi)]


# ---------------------------------------------------------------------------- a split, evaluated
def bleu_table(model: Seq2Seq, corpus, split: str, *, beams=(1,), alphas=(0.0,), max_len: int = 30, lm=None,
               lm_weights=(0.0,)) -> list:
    """BLEU rows ``{"decoder", "beam", "alpha", "lm_weight", "bleu", "signature", "ci"}`` on a split of a
    :class:`corpora.parallel.ParallelCorpus` (beam 1 = greedy; ``alphas`` apply to the beams above 1;
    ``lm_weights`` to shallow fusion with ``lm``, 0 being the translator alone)."""
    src, _ = corpus.encode(split)
    refs = [" ".join(t) for _, t in corpus.pairs[split]]
    rows = []
    for w in (lm_weights if lm is not None else (0.0,)):
        fused = {"lm": lm, "lm_weight": w} if lm is not None and w > 0 else {}
        for k in beams:
            for alpha in (alphas if k > 1 else (0.0,)):
                if k == 1:
                    ids = greedy_translate(model, src, max_len=max_len, **fused)
                else:
                    ids = [best_translation(beam_translate(model, s, beam_size=k, max_len=max_len, alpha=alpha,
                                                           **fused)) for s in src]
                hyps = [ids_to_text(corpus.tgt_vocab, h) for h in ids]
                score, sig = corpus_bleu(hyps, refs)
                rows.append({"decoder": "greedy" if k == 1 else "beam", "beam": k, "alpha": alpha,
                             "lm_weight": float(w) if fused else 0.0, "bleu": score, "signature": sig,
                             "ci": bleu_interval(hyps, refs)})
    return rows


def tuned_fusion(model: Seq2Seq, corpus, lm, *, weights=(0.0, 0.1, 0.2, 0.3, 0.5), beam: int = 1,
                 alpha: float = 0.0, max_len: int = 30, tune_split: str = "valid", test_split: str = "test") -> dict:
    """Shallow fusion with ``lm`` as it is used: the weight with the best BLEU on ``tune_split`` (0 among
    them: the translator alone), then ``test_split``'s BLEU (with its bootstrap interval) without and with
    it.  ``{"weight", "valid": rows, "test_alone", "test_fused"}``."""
    valid = bleu_table(model, corpus, tune_split, beams=(beam,), alphas=(alpha,), max_len=max_len, lm=lm,
                       lm_weights=weights)
    best = max(valid, key=lambda r: (r["bleu"], -r["lm_weight"]))  # ties: the smaller weight
    alone = bleu_table(model, corpus, test_split, beams=(beam,), alphas=(alpha,), max_len=max_len)[0]
    fused = (alone if best["lm_weight"] == 0 else
             bleu_table(model, corpus, test_split, beams=(beam,), alphas=(alpha,), max_len=max_len, lm=lm,
                        lm_weights=(best["lm_weight"],))[0])
    return {"weight": best["lm_weight"], "valid": valid, "test_alone": alone, "test_fused": fused}


def conditional_ppl(model: Seq2Seq, corpus, split: str) -> dict:
    """The translator's perplexity of the split's targets given their sources (every word and </s>)."""
    src, tgt = corpus.encode(split)
    t0 = time.perf_counter()
    r = score_pairs(model, src, tgt)
    unk = sum(int((t == UNK_ID).sum()) for t in tgt)  # target words outside the vocabulary
    return {"pairs": len(src), "tokens": r.n_predicted, "target_oovs": unk, "log_prob_nats": r.log_prob_nats,
            "log10_prob": r.log10_prob, "log2_prob": r.log_prob_nats / math.log(2), "ppl": r.ppl,
            "bits_per_token": r.bits_per_token, "seconds": round(time.perf_counter() - t0, 2)}


def attention_for(model: Seq2Seq, source: Sequence[int], target: Sequence[int]) -> Optional[np.ndarray]:
    """Teacher-forced attention weights (len(target) + 1, len(source) + 1) for a reference pair:
    rows the predicted target tokens (+ ``</s>``), columns the source tokens (+ ``</s>``); None for a
    translator without attention.  A Transformer's is its last decoder layer's cross-attention, averaged
    over the heads (every layer and head: :func:`attention_maps_for`)."""
    from .pairs import pair_batch

    (src, src_len, tgt_in), _ = pair_batch([source], [target])
    model.eval()
    with torch.no_grad():
        _, _, w = model.teacher_forced(src, src_len, tgt_in, need_logits=False, need_weights=True)
    return None if w is None else w[0].numpy()


def attention_maps_for(model, source: Sequence[int], target: Sequence[int]) -> dict:
    """A Transformer translator's teacher-forced attention for a reference pair, every layer and head:
    ``{"encoder": (layers, heads, S, S), "decoder": (layers, heads, T, T), "cross": (layers, heads, T, S)}``
    with ``S = len(source) + 1`` (its ``</s>``) and ``T = len(target) + 1``: the rows of "decoder" and
    "cross" are the predicted tokens (the target's words, then ``</s>``), the columns of "decoder" the
    tokens read (``<s>``, then the target's words)."""
    from .pairs import pair_batch

    (src, src_len, tgt_in), _ = pair_batch([source], [target])
    model.eval()
    maps = model.attention_maps(src, src_len, tgt_in)
    return {k: torch.stack([w[0] for w in ws]).numpy() for k, ws in maps.items()}


__all__ = ["greedy_translate", "sample_translate", "beam_translate", "best_translation", "score_pairs",
           "ids_to_text", "corpus_bleu", "bleu_interval", "attention_for", "attention_maps_for", "Hypothesis"]
