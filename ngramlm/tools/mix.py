"""Mixing back-off models into one: SRILM's static ``ngram -mix-lm ... -lambda ... -write-lm``.

Given models M_1..M_K and weights λ_i (>= 0, summing to one):

* **Vocabulary.**  The mixture's vocabulary is the union of the models' words, matched by string
  (the special tokens ``<s>``, ``</s>``, ``<unk>`` by role).  A word that model i lacks is part of
  model i's ``<unk>``: it gets model i's ``<unk>`` probability times its share of that class,

      p~_i(w | h) = p_i(<unk> | h) * r_i(w),
      r_i(w) = q(w) / (p_i(<unk>) + sum_{v lacking in i} q(v))  for a word w that i lacks,
      r_i(<unk>) = p_i(<unk>) / (same denominator),

  with ``q(v)`` the unigram probability of ``v`` in the other models (their mean, over those that
  have it) and ``p_i(<unk>)`` model i's unigram ``<unk>`` probability.  So each model stays a
  distribution over the union (giving every lacking word the *whole* ``<unk>`` probability would
  make model i sum to ``1 + m_i p_i(<unk>|h)``; with PTB's literal ``<unk>`` at 5 % of the tokens,
  an even split over ~350 lacking words would instead cost ``<unk>`` itself a factor 350).  With one
  shared vocabulary nothing lacks and p~_i = p_i.  Histories map the same way (a word model i
  lacks is ``<unk>`` in model i's history).

  SRILM's ``ngram -mix-lm`` (``lacking="zero"``, ``mix --compat srilm``) reads every model into one
  vocabulary instead, where a word model i has no unigram for gets p~_i = 0 and a history through it
  backs off past it.  Each model is then a distribution over its own words, so the mixture too sums
  to one over the union -- but ``<unk>`` keeps all its probability, and a word only model j has is
  worth ``λ_j p_j`` alone.  Both are distributions; they differ on the lacking words and ``<unk>``.
* **n-grams.**  The mixture stores the union of the models' n-grams (order: the highest of them).
* **Linear** (the default): each stored probability is ``sum_i λ_i p~_i(w | h)``, every p~_i
  computed through model i's own back-off (so a model that does not store ``h w`` contributes
  ``b_i(h) p_i(w | h')``).
* **Log-linear**: ``p(w | h) = prod_i p~_i(w | h)^λ_i / Z(h)``, normalised over the whole vocabulary
  for every context.  A product of back-off models is itself a back-off model on the union of
  their n-grams -- for a word no model stores after ``h``, ``prod_i p~_i(w|h)^λ_i = B(h) prod_i
  p~_i(w|h')^λ_i`` with ``B(h) = prod_i b_i(h)^λ_i`` -- so ``Z(h)`` needs only the stored words:
  ``Z(h) = sum_{w stored} u(w|h) + B(h) (Z(h') - sum_{w stored} u(w|h'))``, computed from the lowest
  order up, and the static model is the exactly normalised product (when the models share a
  vocabulary; a word a model lacks follows back-off where that model stores ``h <unk>``).
* **Back-off weights** are then recomputed so every context sums to one, with the formula pruning
  uses (:func:`ngramlm.tools.pruning.renormalise_backoffs`), as SRILM's ``recomputeBOWs``.
* **Three or more models**: one step here; SRILM mixes them pairwise in order
  (:func:`mix_tables_pairwise`), which differs where the earlier mixture's renormalised back-offs
  enter.

A word of a context the mixture does not store gets ``b_mix(h) p_mix(w | h')``, where the dynamic
mixture (interpolating the models' probabilities token by token, :func:`dynamic_log10`) would give
``sum_i λ_i b_i(h) p_i(w | h')``: that is the static model's only approximation, and
``ngramlm mix --eval`` prints both perplexities.

:func:`best_mix` tunes the weights by EM on the per-token probabilities of a held-out text, as
SRILM's ``compute-best-mix``.  Every log here is base 10 unless a name says otherwise.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Optional, Sequence

import numpy as np

from corpora.errors import InputError
from corpora.vocab import BOS_ID, ID_DTYPE, N_SPECIALS, PAD_ID, UNK_ID, EncodedText, Vocab

from ..counts import lookup
from .pruning import F32, ngram_words, renormalise_backoffs, score_rows, srilm_prob, srilm_wordprob
from ..scorer import Scorer
from ..smoothing import backoff_smoothers, named_list
from ..tables import NgramTables

MIXTURE_NAME = "mixture"  # the smoother_name of a mixed model (an ARPA file does not record it)
WEIGHT_SUM_TOLERANCE = 1e-6
EM_TOLERANCE = 1e-6  # stop when no weight changes by more than this
EM_MAX_ITERATIONS = 100
# compute-best-mix's defaults (its "precision" and "lambda"): stop when no weight changes by more than
# 0.001, starting from 0.5 for the first model and the rest shared equally by the others.  The start
# matters at that precision: EM stops ~1e-3 short of the optimum, on the side it came from.
SRILM_EM_PRECISION = 1e-3
SRILM_EM_FIRST_WEIGHT = 0.5
SRILM_EM_MAX_ITERATIONS = 100_000  # compute-best-mix has no cap; this one only stops a runaway loop
# What model i gives a word of the union it lacks: "share" (ours, the default) a share of its <unk>
# probability; "zero" (SRILM's ngram -mix-lm) nothing -- each model is a distribution over its own words,
# so the mixture still sums to one over the union, but a word only one model has keeps only that
# model's weight of its probability, and a lacking word in a history backs off past it.
LACKING = ("share", "zero")


# ----------------------------------------------------------------------------- checks
def check_mixable(models: Sequence, *, names: Sequence[str]) -> None:
    """Raise an :class:`InputError` naming the file when the models cannot be mixed."""
    if len(models) < 2:
        raise InputError(f"mixing needs at least two models, got {len(models)}",
                         path=names[0] if names else None,
                         fix="give two or more model files: ngramlm mix A.arpa B.arpa -o MIX.arpa --lambda 0.5,0.5")
    for m, name in zip(models, names):
        if m.kind_ != "backoff" or not m.is_distribution_:
            raise InputError(f"{m.smoother_name_} is not a back-off distribution, so it cannot be mixed statically",
                             path=name, fix=f"mix models smoothed with {named_list(backoff_smoothers())}")
    specs = [(m.vocab_.tokenizer, name) for m, name in zip(models, names) if m.vocab_.tokenizer is not None]
    for spec, name in specs[1:]:
        if spec != specs[0][0]:
            raise InputError(f"this model's text was tokenized with {spec.describe()} but {specs[0][1]}'s with "
                             f"{specs[0][0].describe()}: the same words would be different tokens", path=name,
                             fix="mix models trained with the same tokenizer options")


def check_weights(weights: Sequence[float], *, n_models: int) -> list:
    """The weights as floats, or an :class:`InputError`: one per model, each >= 0, summing to one."""
    w = [float(x) for x in weights]
    example = ",".join([f"{1 / n_models:.3g}"] * n_models)
    if len(w) != n_models:
        raise InputError(f"{len(w)} weights for {n_models} models",
                         fix=f"give one weight per model, e.g. --lambda {example}")
    if not all(math.isfinite(x) and x >= 0 for x in w):
        raise InputError(f"weights must be numbers >= 0, got {w}", fix=f"e.g. --lambda {example}")
    total = sum(w)
    if abs(total - 1.0) > WEIGHT_SUM_TOLERANCE:
        hint = ",".join(f"{x / total:.6g}" for x in w) if total > 0 else example
        raise InputError(f"the weights sum to {total:.6g}, not 1", fix=f"scale them, e.g. --lambda {hint}")
    return w


# ----------------------------------------------------------------------------- the union vocabulary
@dataclass
class UnionVocab:
    """The mixture's vocabulary and, per model, how union ids map to the model's own ids."""

    vocab: Vocab
    id_maps: list  # per model: int64 array, union id -> model id (UNK_ID, or PAD_ID, for a word it lacks)
    log10_share: list  # per model: float array over union ids, log10 r_i (0 for the words the model has)
    lacking: list  # per model: the union words it lacks
    own_ids: list = None  # per model: union id -> model id, UNK_ID for a word it lacks (the model alone)
    lacking_rule: str = "share"  # one of LACKING: what id_maps and log10_share give a word a model lacks

    def model_ids(self, index: int, ids: np.ndarray) -> np.ndarray:
        return self.id_maps[index][ids]


def union_vocabulary(models: Sequence, *, lacking: str = "share") -> UnionVocab:
    """The union of the models' vocabularies (the first model's ids first) and, per model, what it gives a
    word it lacks (``lacking``, see :data:`LACKING`): a share of its ``<unk>`` probability (``"share"``,
    see the module's docstring) or nothing (``"zero"``, SRILM's)."""
    if lacking not in LACKING:
        raise InputError(f"unknown treatment of a word a model lacks: {lacking!r}",
                         fix=f"use one of {', '.join(LACKING)}")
    first = models[0].vocab_
    itos = list(first.itos_)
    stoi = dict(first.stoi_)
    for m in models[1:]:
        for w in m.vocab_.itos_[N_SPECIALS:]:
            if w not in stoi:
                stoi[w] = len(itos)
                itos.append(w)
    U = len(itos)
    id_maps = []
    # "zero": a word the model lacks is read as <pad>, a row no n-gram holds whose probability is 0, so
    # it is predicted with probability 0 and a history through it backs off past it -- what SRILM's
    # models, sharing one vocabulary, do with a word one of them has no unigram for.
    absent = UNK_ID if lacking == "share" else PAD_ID
    own_ids = []
    for m in models:
        ids = np.full(U, UNK_ID, dtype=np.int64)
        ids[:N_SPECIALS] = np.arange(N_SPECIALS)
        words = m.vocab_.itos_[N_SPECIALS:]
        ids[[stoi[w] for w in words]] = np.arange(N_SPECIALS, N_SPECIALS + len(words))
        own_ids.append(ids)
        id_maps.append(ids if absent == UNK_ID else np.where(ids == UNK_ID, absent, ids))
        id_maps[-1][UNK_ID] = UNK_ID
    known = [ids >= N_SPECIALS for ids in id_maps]  # <unk> is the class itself, never "known" as a word
    # Unigram probabilities on the union ids (0 where a model lacks the word).
    uni = [np.where(k, 10.0 ** np.asarray(m.log10_prob_[0], dtype=np.float64)[ids], 0.0)
           for m, ids, k in zip(models, id_maps, known)]
    shares, lacking_words = [], []
    for i, m in enumerate(models):
        lack = np.flatnonzero(~known[i])
        lack = lack[lack >= N_SPECIALS]
        share = np.zeros(U)
        if len(lack) and lacking == "share":
            others = [j for j in range(len(models)) if j != i]
            n_have = sum(known[j][lack].astype(np.float64) for j in others)
            q = sum(uni[j][lack] for j in others) / np.maximum(n_have, 1.0)
            p_unk = 10.0 ** float(m.log10_prob_[0][UNK_ID])
            denom = p_unk + float(q.sum())
            with np.errstate(divide="ignore"):
                share[lack] = np.log10(q / denom) if denom > 0 else -np.inf
                share[UNK_ID] = math.log10(p_unk / denom) if p_unk > 0 else -np.inf
        shares.append(share)
        lacking_words.append([itos[j] for j in lack])
    vocab = Vocab(min_count=first.min_count, unk_token=first.unk_token, bos_token=first.bos_token,
                  eos_token=first.eos_token, pad_token=first.pad_token,
                  tokenizer=next((m.vocab_.tokenizer for m in models if m.vocab_.tokenizer is not None), None))
    vocab.itos_, vocab.stoi_ = itos, stoi
    counts: dict = {}
    for m in models:
        for w, c in (getattr(m.vocab_, "counts_", None) or {}).items():
            counts[w] = counts.get(w, 0) + int(c)
    vocab.counts_ = counts
    vocab.n_train_tokens_ = sum(int(getattr(m.vocab_, "n_train_tokens_", 0) or 0) for m in models)
    vocab.n_train_unk_ = sum(int(getattr(m.vocab_, "n_train_unk_", 0) or 0) for m in models)
    # <unk> is a word of the text (PTB) when it was for any of the models: then it is not an OOV.
    vocab.n_corpus_unk_ = sum(int(m.vocab_.n_corpus_unk_ or 0) for m in models)
    return UnionVocab(vocab, id_maps, shares, lacking_words, own_ids, lacking)


# ----------------------------------------------------------------------------- component probabilities
def component_log10(model, rows: np.ndarray, *, union: UnionVocab, index: int) -> np.ndarray:
    """log10 p~_index(last word | the words before it) for rows of union ids, through the model's back-off."""
    return score_rows(model, union.model_ids(index, rows)) + union.log10_share[index][rows[:, -1]]


def component_token_log10(model, text: EncodedText, *, union: UnionVocab, index: int) -> np.ndarray:
    """log10 p~_index of every predicted token of ``text`` (encoded with the union vocabulary)."""
    ids = union.model_ids(index, np.asarray(text.ids, dtype=np.int64)).astype(ID_DTYPE)
    lp = model.token_scores(EncodedText(ids, text.starts), oov=np.zeros(len(ids), dtype=bool)).log10_prob
    return lp + union.log10_share[index][text.ids]


def own_token_log10(model, text: EncodedText, *, union: UnionVocab, index: int) -> np.ndarray:
    """log10 p of every predicted token of ``text`` (encoded with the union vocabulary) as the model alone
    scores it: a word it lacks is its ``<unk>``, with the whole of ``<unk>``'s probability.  These are the
    streams SRILM's ``compute-best-mix`` reads (``ngram -unk -debug 2 -ppl`` run on each model by itself)."""
    ids = union.own_ids[index][np.asarray(text.ids, dtype=np.int64)].astype(ID_DTYPE)
    return model.token_scores(EncodedText(ids, text.starts), oov=np.zeros(len(ids), dtype=bool)).log10_prob


def read_ppl_stream(path) -> np.ndarray:
    """The per-token log10 probabilities of an ``ngram -debug 2 -ppl`` output (SRILM), in text order:
    the number in brackets of each ``p( w | h ) = [..] p [ log10 p ]`` line, -inf where SRILM printed
    ``-inf`` (an OOV or a zero probability).  What compute-best-mix reads, for tuning on SRILM's own
    streams."""
    from corpora.textio import read_text

    values = []
    for number, line in enumerate(read_text(path).split("\n"), start=1):
        fields = line.split()
        if not fields or fields[0] != "p(":
            continue
        try:  # the log10 p is the last bracketed field: ... "[" x "]" (a count "*c" may follow)
            values.append(float(fields[len(fields) - 2 - fields[::-1].index("]")]))
        except (ValueError, IndexError):
            raise InputError(f"not a probability line of ngram -debug 2 -ppl: {line.strip()!r}", path=str(path),
                             line=number, fix="give the output of SRILM's ngram -debug 2 -ppl TEXT -lm MODEL") from None
    if not values:
        raise InputError("no 'p( w | h ) = ...' lines", path=str(path),
                         fix="run SRILM's ngram with -debug 2 (the per-word probabilities), not just -ppl")
    return np.asarray(values, dtype=np.float64)


def weighted_log10_sum(log10_probs: np.ndarray, weights: Sequence[float]) -> np.ndarray:
    """log10 sum_i w_i 10^lp_i over the first axis (models), stably; -inf where every term is 0."""
    lp = np.asarray(log10_probs, dtype=np.float64)
    w = np.asarray(weights, dtype=np.float64)
    use = w > 0  # a weight of 0 drops the model, even where its probability is 0 (0 * -inf)
    lp, w = lp[use], w[use]
    top = lp.max(axis=0)
    safe = np.where(np.isfinite(top), top, 0.0)
    with np.errstate(divide="ignore"):
        return np.where(np.isfinite(top), safe + np.log10((w[:, None] * 10.0 ** (lp - safe)).sum(axis=0)), -np.inf)


def dynamic_log10(component_lp: np.ndarray, weights: Sequence[float]) -> np.ndarray:
    """Per-token log10 of the dynamic (token-by-token) linear interpolation of the components."""
    return weighted_log10_sum(component_lp, weights)


# ----------------------------------------------------------------------------- EM (compute-best-mix)
@dataclass
class BestMix:
    weights: list
    iterations: int
    converged: bool  # the last change was below the tolerance (else the iteration cap stopped it)
    tokens: int  # tokens the weights were fitted on
    log10_prob: float  # total log10 probability of those tokens under the dynamic mixture


def srilm_em_start(n_models: int) -> list:
    """compute-best-mix's starting weights: 0.5 for the first model, the other 0.5 shared equally."""
    rest = (1.0 - SRILM_EM_FIRST_WEIGHT) / (n_models - 1)
    return [SRILM_EM_FIRST_WEIGHT] + [rest] * (n_models - 1)


def best_mix_srilm(component_lp: np.ndarray) -> "BestMix":
    """:func:`best_mix` with compute-best-mix's defaults (start 0.5 + the rest shared, precision 0.001):
    the weights it prints, to its printed precision, from the same streams."""
    K = np.asarray(component_lp).shape[0]
    return best_mix(component_lp, tolerance=SRILM_EM_PRECISION, max_iterations=SRILM_EM_MAX_ITERATIONS,
                    start=srilm_em_start(K))


def best_mix(component_lp: np.ndarray, *, tolerance: float = EM_TOLERANCE,
             max_iterations: int = EM_MAX_ITERATIONS, start: Optional[Sequence[float]] = None) -> BestMix:
    """The weights maximising the held-out likelihood of the dynamic mixture, by EM (SRILM's
    compute-best-mix): ``λ_i <- mean_t λ_i p_it / sum_j λ_j p_jt`` until no weight moves by more than
    ``tolerance`` or ``max_iterations`` are done.  ``component_lp``: (models, tokens) log10 p.  The
    weights returned are the ones of the last update (as compute-best-mix prints them)."""
    lp = np.asarray(component_lp, dtype=np.float64)
    K = lp.shape[0]
    # A token no model can predict says nothing about the weights (and has probability 0 anyway).
    lp = lp[:, np.isfinite(lp).any(axis=0)]
    # The posteriors do not change when a token's probabilities are all scaled alike: scale each
    # token by its best model's, so no product underflows.
    p = 10.0 ** (lp - lp.max(axis=0))
    lam = np.full(K, 1.0 / K) if start is None else np.asarray(check_weights(start, n_models=K))
    converged, it = False, 0
    for it in range(1, max_iterations + 1):
        joint = lam[:, None] * p
        new = (joint / joint.sum(axis=0)).mean(axis=1)
        change = float(np.abs(new - lam).max())
        lam = new
        if change <= tolerance:
            converged = True
            break
    lam = lam / lam.sum()
    return BestMix([float(x) for x in lam], it, converged, lp.shape[1], float(weighted_log10_sum(lp, lam).sum()))


# ----------------------------------------------------------------------------- the static mixture
def _union_keys(models: Sequence, union: UnionVocab) -> list:
    """Per order, the sorted packed keys of the union of the models' n-grams (over union ids)."""
    U = len(union.vocab)
    N = max(m.order_ for m in models)
    keys = [np.arange(U, dtype=np.int64)]
    # rows[i]: union row of each of model i's rows at the current order (order 1: its ids' union ids).
    rows = []
    for m, ids in zip(models, union.id_maps):
        to_union = np.empty(len(m.vocab_), dtype=np.int64)
        known = ids >= N_SPECIALS
        to_union[ids[known]] = np.flatnonzero(known)
        to_union[:N_SPECIALS] = np.arange(N_SPECIALS)
        rows.append(to_union)
    to_word = list(rows)  # model id -> union id
    for k in range(2, N + 1):
        parts, owners = [], []
        for i, m in enumerate(models):
            if m.order_ < k:
                continue
            V = len(m.vocab_)
            mk = np.asarray(m.keys_[k - 1], dtype=np.int64)
            parts.append(rows[i][mk // V] * U + to_word[i][mk % V])
            owners.append(i)
        allkeys = np.concatenate(parts)
        ukeys, inverse = np.unique(allkeys, return_inverse=True)
        keys.append(ukeys)
        bounds = np.cumsum([0] + [len(p) for p in parts])
        for j, i in enumerate(owners):
            rows[i] = inverse.ravel()[bounds[j]:bounds[j + 1]]
        del allkeys, parts
    return keys


def _find_rows(scorer, ids: np.ndarray) -> np.ndarray:
    """Row of each n-gram (a row of ``ids``) in its order of ``scorer``'s tables, -1 when not stored."""
    m, L = ids.shape
    if L > scorer.order_:
        return np.full(m, -1, dtype=np.int64)
    V = len(scorer.vocab_)
    row = np.asarray(ids[:, 0], dtype=np.int64)
    for j in range(1, L):
        row = lookup(scorer.keys_[j], np.where(row >= 0, row * V + ids[:, j], -1))
    return row


def _context_log10_backoff(model, ctx: np.ndarray) -> np.ndarray:
    """log10 b(h) of ``model`` for contexts (rows of model ids): 0 where it does not store h (or h is as
    long as its order, where it never backs off)."""
    L = ctx.shape[1]
    if L >= model.order_:
        return np.zeros(len(ctx))
    r = _find_rows(model, ctx)
    bo = np.asarray(model.log10_backoff_[L - 1], dtype=np.float64)
    return np.where(r >= 0, bo[np.maximum(r, 0)], 0.0)


def _log10_sum(lp: np.ndarray) -> float:
    top = float(np.max(lp))
    return top + math.log10(float(np.sum(10.0 ** (lp - top))))


def _linear_probs(models, union, weights, shape) -> list:
    out = []
    for k in range(1, shape.order_ + 1):
        rows = ngram_words(shape, k)
        lps = np.stack([component_log10(models[i], rows, union=union, index=i) if weights[i] > 0
                        else np.zeros(len(rows)) for i in range(len(models))])
        out.append(weighted_log10_sum(lps, weights))
        del rows, lps
    return out


def _srilm_linear_probs(models, union, weights, shape) -> list:
    """SRILM's mixProbs, float for float: each model's probability of every union n-gram as its float
    wordProbBO gives it (0 for a word it lacks), mixed in double, stored as a float."""
    tables = [([np.asarray(x, dtype=F32) for x in m.log10_prob_],
               [np.asarray(x, dtype=F32) for x in m.log10_backoff_]) for m in models]
    out = []
    for k in range(1, shape.order_ + 1):
        rows = ngram_words(shape, k)
        total = np.zeros(len(rows))
        for i, m in enumerate(models):
            if weights[i] > 0:
                lp = srilm_wordprob(m, union.model_ids(i, rows), *tables[i])
                total += weights[i] * srilm_prob(lp)
        with np.errstate(divide="ignore"):
            out.append(np.log10(total).astype(F32).astype(np.float64))
        del rows
    return out


def _log_linear_probs(models, union, weights, shape) -> list:
    active = [i for i, w in enumerate(weights) if w > 0]

    def u(rows):  # log10 of the unnormalised product prod_i p~_i^λ_i
        return sum(weights[i] * component_log10(models[i], rows, union=union, index=i) for i in active)

    U = len(union.vocab)
    u1 = u(np.arange(U, dtype=np.int64)[:, None])
    u1[[PAD_ID, BOS_ID]] = -np.inf  # never predicted
    log10_z0 = _log10_sum(u1[np.isfinite(u1)])
    out = [u1 - log10_z0]
    log10_z = [None]  # log10_z[j]: log10 Z(h) for each row h of order j (contexts of length j)
    for k in range(2, shape.order_ + 1):
        C = ngram_words(shape, k - 1)
        log10_b = sum(weights[i] * _context_log10_backoff(models[i], union.model_ids(i, C)) for i in active)
        # Z(h'): h without its first word; where the union does not store h', no model does, so no
        # model backs off there (b = 1) and Z(h') is the Z of the longest suffix stored.
        z_suffix = np.full(len(C), log10_z0)
        todo = np.ones(len(C), dtype=bool)
        for s in range(1, k - 1):
            idx = np.flatnonzero(todo)
            r = _find_rows(shape, C[idx, s:])
            hit = r >= 0
            z_suffix[idx[hit]] = log10_z[k - 1 - s][r[hit]]
            todo[idx[hit]] = False
        G = ngram_words(shape, k)
        parent = shape.keys_[k - 1] // U
        ug, ulow = u(G), u(G[:, 1:])
        S = np.bincount(parent, weights=10.0 ** ug, minlength=len(C))
        L = np.bincount(parent, weights=10.0 ** ulow, minlength=len(C))
        Z = S + 10.0 ** log10_b * np.maximum(10.0 ** z_suffix - L, 0.0)
        with np.errstate(divide="ignore"):
            log10_z.append(np.log10(Z))
        out.append(ug - log10_z[k - 1][parent])
        del C, G, parent
    return out


def mix_tables(models: Sequence, *, weights: Sequence[float], union: Optional[UnionVocab] = None,
               log_linear: bool = False, names: Optional[Sequence[str]] = None,
               compat: Optional[str] = None) -> NgramTables:
    """The static mixture of ``models`` (back-off :class:`~ngramlm.scorer.Scorer` objects) as tables.
    ``compat="srilm"``: SRILM's ``mixProbs`` for two models -- a word a model lacks gets 0 from it, and
    the arithmetic is SRILM's (float log probabilities; :func:`mix_tables_pairwise` for more models)."""
    names = list(names) if names is not None else [f"model {i + 1}" for i in range(len(models))]
    check_mixable(models, names=names)
    weights = check_weights(weights, n_models=len(models))
    srilm = compat == "srilm"
    if compat is not None and not srilm:
        raise InputError(f"unknown mixing convention {compat!r}", fix="use compat=None (ours) or 'srilm'")
    if srilm and log_linear:
        raise InputError("SRILM writes no static log-linear mixture (its -loglinear-mix is dynamic)",
                         fix="mix linearly with compat='srilm', or log-linearly without it")
    union = union or union_vocabulary(models, lacking="zero" if srilm else "share")
    if srilm and union.lacking_rule != "zero":
        raise InputError("SRILM's mixture gives 0 to a word a model lacks",
                         fix='unite the vocabularies with union_vocabulary(models, lacking="zero")')
    keys = _union_keys(models, union)
    U = len(union.vocab)
    N = len(keys)
    info = {"mixture": {"models": names, "lambda": weights, "mode": "log-linear" if log_linear else "linear",
                        "union_types": U - 2, "lacking": [len(x) for x in union.lacking],
                        "lacking_rule": union.lacking_rule}}
    shape = Scorer(NgramTables(vocab=union.vocab, kind="backoff", keys=keys,
                               n_ngrams=[U - 1] + [len(x) for x in keys[1:]], smoother_name=MIXTURE_NAME,
                               smoother_params={}, info=info, log10_prob=[None] * N,
                               log10_backoff=[np.zeros(len(x)) for x in keys[:-1]] + [np.zeros(0)]))
    how = _srilm_linear_probs if srilm else _log_linear_probs if log_linear else _linear_probs
    probs = how(models, union, weights, shape)
    probs[0][[PAD_ID, BOS_ID]] = -np.inf  # never predicted (ARPA writes <s> as -99)
    tables = shape.tables_.replace(log10_prob=probs)
    return renormalise_backoffs(Scorer(tables), compat=compat)


def mix_tables_pairwise(models: Sequence, *, weights: Sequence[float], union: Optional[UnionVocab] = None,
                        names: Optional[Sequence[str]] = None) -> NgramTables:
    """SRILM's static mixture of three or more models (``ngram -lm A -mix-lm B -mix-lm2 C ...``): A and B
    mixed with weights in proportion ``λ_A : λ_B``, back-offs renormalised, then that model mixed with C
    at ``λ_A + λ_B : λ_C``, and so on, every word a model lacks getting 0 from it.  Not the one-step
    mixture of :func:`mix_tables`: from the second step on, the earlier mixture contributes through its
    own renormalised back-off weights where the models' back-offs differ.  ``union`` only names the
    convention; each step unites the vocabularies again (the same words, in the same order)."""
    names = list(names) if names is not None else [f"model {i + 1}" for i in range(len(models))]
    check_mixable(models, names=names)
    weights = check_weights(weights, n_models=len(models))
    if union is not None and union.lacking_rule != "zero":
        raise InputError("the pairwise mixture is SRILM's, whose models give 0 to a word they lack",
                         fix='unite the vocabularies with union_vocabulary(models, lacking="zero")')
    current, total = models[0], weights[0]
    tables = None
    for i in range(1, len(models)):
        new_total = total + weights[i]
        # As ngram does it: the new model's share lambda = w_i / (w_1 + .. + w_i) (0 when w_i is, so
        # 0/0 = 0), the mixture so far keeping 1 - lambda.
        share = 0.0 if weights[i] == 0.0 else weights[i] / new_total
        pair = [1.0 - share, 1.0 - (1.0 - share)]
        pair_union = union_vocabulary([current, models[i]], lacking="zero")
        tables = mix_tables([current, models[i]], weights=pair, union=pair_union,
                            names=[" + ".join(names[:i]), names[i]], compat="srilm")
        current, total = Scorer(tables).build_index(), new_total
    return tables.replace(info=dict(tables.info, mixture=dict(tables.info["mixture"], models=names,
                                                              **{"lambda": weights, "pairwise": True})))
