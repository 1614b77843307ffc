"""Plain vs cache vs dynamic evaluation of one model on one text, with the parameters tuned on another.

What ``ngramlm neural ppl --cache --dynamic-eval`` runs.  The methods, all scoring the
same tokens (every word and sentence end, full history):

* ``plain``: the model alone (:func:`neural.evaluation.token_log_probs_and_hidden`).
* ``unigram_cache``: the model mixed with a unigram cache of the last ``W`` tokens.
* ``neural_cache``: the model mixed with the continuous cache over its own states.
* ``dynamic``: dynamic evaluation (:mod:`neural.adaptation.dynamic`).
* ``dynamic_cache``: both -- the continuous cache over the *adapted* model's states.

Tuning (on the corpus's valid split, unless the parameters are given): theta and
lambda by grid search over one plain pass (:func:`neural.adaptation.cache.tune_mixture`); the
dynamic lr and decay by a coordinate search of full dynamic passes
(:func:`neural.adaptation.dynamic.tune_dynamic`); for ``dynamic_cache`` the dynamic setting is
kept and theta and lambda are tuned again on the best dynamic pass's states (coordinate
search, not a joint grid).  The scored text never influences its own parameters.
"""
from __future__ import annotations

import math
import time
from dataclasses import dataclass, field
from typing import Optional, Sequence

import numpy as np

from corpora.errors import InputError

from . import cache as cache_mod
from ..base import LanguageModel
from .dynamic import (DEFAULT_DECAYS, DEFAULT_EPS, DEFAULT_RMS_TOKENS, DEFAULT_SEGMENT_LEN, DynamicEvalConfig,
                      dynamic_token_log_probs, gradient_rms, tune_dynamic)
from ..evaluation import token_log_probs_and_hidden

METHODS = ("plain", "unigram_cache", "neural_cache", "dynamic", "dynamic_cache")
LABELS = {"plain": "plain", "unigram_cache": "unigram cache", "neural_cache": "neural cache",
          "dynamic": "dynamic eval", "dynamic_cache": "dynamic eval + neural cache"}


@dataclass
class AdaptOptions:
    """Which adaptations to run and their parameters (None = tuned on the tuning text)."""

    cache: bool = False
    window: int = cache_mod.DEFAULT_WINDOW
    theta: Optional[float] = None
    lam: Optional[float] = None
    dynamic: bool = False
    rule: str = "rms"
    lr: Optional[float] = None
    decay: Optional[float] = None
    segment_len: int = DEFAULT_SEGMENT_LEN
    eps: float = DEFAULT_EPS
    rms_tokens: Optional[int] = DEFAULT_RMS_TOKENS  # training tokens for the gradient RMS (rms rule)
    tune_tokens: Optional[int] = None  # use only this prefix of the tuning text
    thetas: Sequence[float] = cache_mod.DEFAULT_THETAS
    lambdas: Sequence[float] = cache_mod.DEFAULT_LAMBDAS
    lrs: Optional[Sequence[float]] = None  # None: DEFAULT_LRS[rule]
    decays: Sequence[float] = DEFAULT_DECAYS

    def validate(self, model: Optional[LanguageModel] = None) -> "AdaptOptions":
        cache_mod.check_window(self.window)
        if (self.theta is None) != (self.lam is None):
            raise InputError("--cache-theta and --cache-lambda go together",
                             fix="pass both, or neither to tune them on the valid split")
        if self.lam is not None:
            cache_mod.check_lambda(self.lam)
        if self.theta is not None and not math.isfinite(self.theta):
            raise InputError(f"--cache-theta must be a finite number, got {self.theta!r}", fix="pass e.g. 0.3")
        if self.dynamic:
            DynamicEvalConfig(lr=self.lr or 0.0, decay=self.decay or 0.0, rule=self.rule,
                              segment_len=self.segment_len, eps=self.eps).validate(model)
        return self

    @property
    def tunes_cache(self) -> bool:
        return self.cache and self.theta is None

    @property
    def tunes_dynamic(self) -> bool:
        return self.dynamic and self.lr is None

    @property
    def needs_tuning_text(self) -> bool:
        return self.tunes_cache or self.tunes_dynamic

    @property
    def needs_training_text(self) -> bool:
        return self.dynamic and self.rule == "rms"


@dataclass
class AdaptResult:
    """Per-method token log-probs (nats) of the scored text, with the parameters and times."""

    log_probs_nats: dict = field(default_factory=dict)  # method -> (N,) float64
    params: dict = field(default_factory=dict)  # method -> {parameter: value}
    seconds: dict = field(default_factory=dict)  # method -> wall seconds on the scored text
    tuning: dict = field(default_factory=dict)  # what was tuned, on how many tokens, in how long


def _tune_cache(lp, hidden, ids, options: AdaptOptions) -> tuple:
    """((theta, lam) of the neural cache, lam of the unigram cache) tuned on one pass's log-probs and states."""
    sizes = cache_mod.cache_sizes(len(ids), window=options.window)
    rows = cache_mod.neural_cache_log_probs(hidden, ids, window=options.window, thetas=options.thetas)
    fit = cache_mod.tune_mixture(lp, rows, lambdas=options.lambdas, sizes=sizes)
    uni = cache_mod.unigram_cache_log_probs(ids, window=options.window)
    ufit = cache_mod.tune_mixture(lp, uni, lambdas=options.lambdas, sizes=sizes)
    return (float(options.thetas[fit.row]), fit.lam), ufit.lam


def _neural_cache(lp, hidden, ids, *, window: int, theta: float, lam: float) -> np.ndarray:
    sizes = cache_mod.cache_sizes(len(ids), window=window)
    row = cache_mod.neural_cache_log_probs(hidden, ids, window=window, thetas=[theta])[0]
    return cache_mod.mix_log_probs(lp, row, lam=lam, sizes=sizes)


def evaluate_adapted(model: LanguageModel, ids: np.ndarray, *, options: AdaptOptions,
                     tune_ids: Optional[np.ndarray] = None, train_ids: Optional[np.ndarray] = None,
                     plain: Optional[tuple] = None, plain_seconds: float = 0.0) -> AdaptResult:
    """Score ``ids`` with the methods ``options`` asks for (``plain`` always).

    ``tune_ids``: the tuning stream (valid split) when a parameter is to be tuned;
    ``train_ids``: the training stream for the gradient RMS of the ``rms`` rule;
    ``plain``: ``(log_probs_nats, hidden)`` of ``ids`` if already computed (in ``plain_seconds``).
    """
    options.validate(model)
    if options.needs_tuning_text and (tune_ids is None or len(tune_ids) == 0):
        raise InputError("no validation text to tune the cache / dynamic-evaluation parameters on",
                         fix="score a checkpoint whose corpus has a valid split, or pass --cache-theta and "
                             "--cache-lambda / --dyn-lr")
    if options.needs_training_text and (train_ids is None or len(train_ids) == 0):
        raise InputError("the rms rule of dynamic evaluation needs the training text (for the gradient RMS)",
                         fix="make the checkpoint's training corpus available (--data-dir), or pass --dyn-rule sgd")
    if tune_ids is not None and options.tune_tokens is not None:
        tune_ids = tune_ids[:options.tune_tokens]
    res = AdaptResult()
    t0 = time.perf_counter()
    lp, hidden = plain if plain is not None else token_log_probs_and_hidden(model, ids)
    res.log_probs_nats["plain"], res.params["plain"] = lp, {}
    res.seconds["plain"] = plain_seconds if plain is not None else time.perf_counter() - t0
    if tune_ids is not None and options.needs_tuning_text:
        res.tuning["tokens"] = int(len(tune_ids))
    w = options.window

    cache_params = uni_lam = None
    if options.cache:
        t0 = time.perf_counter()
        if options.tunes_cache:
            tune_lp, tune_hidden = token_log_probs_and_hidden(model, tune_ids)
            cache_params, uni_lam = _tune_cache(tune_lp, tune_hidden, tune_ids, options)
            res.tuning["cache_seconds"] = time.perf_counter() - t0
        else:
            cache_params, uni_lam = (float(options.theta), float(options.lam)), float(options.lam)
        t0 = time.perf_counter()
        sizes = cache_mod.cache_sizes(len(ids), window=w)
        uni = cache_mod.unigram_cache_log_probs(ids, window=w)
        res.log_probs_nats["unigram_cache"] = cache_mod.mix_log_probs(lp, uni, lam=uni_lam, sizes=sizes)
        res.params["unigram_cache"] = {"window": w, "lambda": uni_lam}
        res.seconds["unigram_cache"] = res.seconds["plain"] + time.perf_counter() - t0
        t0 = time.perf_counter()
        theta, lam = cache_params
        res.log_probs_nats["neural_cache"] = _neural_cache(lp, hidden, ids, window=w, theta=theta, lam=lam)
        res.params["neural_cache"] = {"window": w, "theta": theta, "lambda": lam}
        res.seconds["neural_cache"] = res.seconds["plain"] + time.perf_counter() - t0

    if options.dynamic:
        rms = None
        if options.rule == "rms":
            t0 = time.perf_counter()
            rms = gradient_rms(model, train_ids, segment_len=options.segment_len, max_tokens=options.rms_tokens)
            res.tuning["rms_seconds"] = time.perf_counter() - t0
            res.tuning["rms_tokens"] = int(min(len(train_ids), options.rms_tokens or len(train_ids)))
        both_params = cache_params
        if options.tunes_dynamic:
            t0 = time.perf_counter()
            fit = tune_dynamic(model, tune_ids, rule=options.rule, segment_len=options.segment_len,
                               lrs=options.lrs, rms=rms, eps=options.eps,
                               decays=options.decays if options.decay is None else (options.decay,))
            config = fit.config
            res.tuning["dynamic_seconds"] = time.perf_counter() - t0
            res.tuning["dynamic_grid"] = [{"lr": lr, "decay": d, "ppl": _ppl(t, len(tune_ids))}
                                          for lr, d, t in fit.grid]
        else:
            config = DynamicEvalConfig(lr=float(options.lr), decay=float(options.decay or 0.0), rule=options.rule,
                                       segment_len=options.segment_len, eps=options.eps)
        if options.cache and options.tunes_cache:
            # The cache over the adapted model's states: retune theta and lambda on the best valid pass.
            t0 = time.perf_counter()
            tune_lp, tune_hidden = dynamic_token_log_probs(model, tune_ids, config=config, rms=rms, need_hidden=True)
            both_params, _ = _tune_cache(tune_lp, tune_hidden, tune_ids, options)
            res.tuning["dynamic_cache_seconds"] = time.perf_counter() - t0
        t0 = time.perf_counter()
        dlp, dhidden = dynamic_token_log_probs(model, ids, config=config, rms=rms, need_hidden=options.cache)
        res.seconds["dynamic"] = time.perf_counter() - t0
        dyn_params = {"rule": config.rule, "lr": config.lr, "decay": config.decay,
                      "segment_len": config.segment_len, "eps": config.eps}
        res.log_probs_nats["dynamic"], res.params["dynamic"] = dlp, dyn_params
        if options.cache:
            t0 = time.perf_counter()
            theta, lam = both_params
            res.log_probs_nats["dynamic_cache"] = _neural_cache(dlp, dhidden, ids, window=w, theta=theta, lam=lam)
            res.params["dynamic_cache"] = {**dyn_params, "window": w, "theta": theta, "lambda": lam}
            res.seconds["dynamic_cache"] = res.seconds["dynamic"] + time.perf_counter() - t0
    return res


def summarise(result: AdaptResult, *, oov: np.ndarray, n_sentences: int) -> dict:
    """JSON-able per-method summary: ppl (with and without OOVs), ln p in nats, log2 p, bits/token, seconds."""
    from corpora.accounting import report_from_log10

    methods = {}
    for name in METHODS:
        if name not in result.log_probs_nats:
            continue
        lp = result.log_probs_nats[name]
        rep = report_from_log10(lp / math.log(10), oov, n_sentences)
        methods[name] = {"ppl": rep.ppl, "ppl_excluding_oovs": rep.ppl_excluding_oovs,
                         "log_prob_nats": rep.log10_prob * math.log(10), "log2_prob": rep.log10_prob / math.log10(2),
                         "bits_per_token": rep.bits_per_token, "zero_probs": rep.zero_probs,
                         "seconds": round(result.seconds[name], 2), **result.params[name]}
    return {"methods": methods, "tuning": result.tuning}


def format_adaptation(d: dict) -> str:
    """The human table of :func:`summarise`'s dict (plus ``tuned_on`` / ``note`` when present)."""
    tuning = d.get("tuning") or {}
    head = "Evaluation-time adaptation"
    if d.get("tuned_on"):
        parts = [f"tuned on {d['tuned_on']} ({tuning.get('tokens', 0):,} tokens"]
        secs = sum(v for k, v in tuning.items() if k.endswith("_seconds"))
        head += f", {parts[0]}, {secs:.1f} s)"
    lines = [head + ":", f"  {'method':<28} {'ppl':>10} {'bits/token':>10} {'seconds':>8}  parameters"]
    for name, m in d["methods"].items():
        params = " ".join(f"{k}={_fmt(v)}" for k, v in m.items()
                          if k in ("window", "theta", "lambda", "rule", "lr", "decay", "segment_len"))
        lines.append(f"  {LABELS[name]:<28} {m['ppl']:>10.3f} {m['bits_per_token']:>10.4f} {m['seconds']:>8.1f}"
                     f"  {params}")
    if d.get("note"):
        lines.append(f"Note: {d['note']}")
    return "\n".join(lines)


def _ppl(log_prob_nats: float, n: int) -> Optional[float]:
    """exp(-ln p / n), or None where a diverged setting gives no number (keeps the JSON standard)."""
    x = -log_prob_nats / n
    return math.exp(x) if math.isfinite(x) and x < 700 else None


def _fmt(v) -> str:
    return f"{v:g}" if isinstance(v, float) else str(v)
