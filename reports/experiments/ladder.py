"""The ladder: count ideas put back into a neural LM, one rung at a time, on the same tokens.

Starting from a trained checkpoint and its corpus, every rung scores the same test tokens with
the same vocabulary (words and sentence ends, full history), and every parameter is tuned on the
valid split only:

1. the count model alone (modified Kneser-Ney, order 5 by default, trained on the same train split
   with the neural model's vocabulary);
2. the neural model alone;
3. + neural cache (Grave et al. 2017; theta and lambda by grid on valid);
4. + dynamic evaluation (Krause et al. 2018; the cache then runs over the adapted model's states;
   lr and decay by a coordinate search on a valid prefix);
5. + the n-gram model, one global weight (EM on valid);
6. + per-context weights (the weight a function of how much of the history the n-gram model knows,
   :mod:`ngramlm.tools.context_mix`, EM per bucket on valid);
7. + the ∞-gram (three-way mixture, weights per context bucket; the bucket scheme -- the n-gram's
   context match, the ∞-gram's effective n, or both -- chosen on valid).

Side rows score each method alone (unigram cache, dynamic evaluation without the cache, the
global three-way mixture) so a rung's gain can be read against its parts.  Per rung: test
perplexity with its bootstrap 95 % interval (by sentence, the same draws for every rung), valid
perplexity, and the seconds the rung added.  Per step: the test tokens that gained most, and the
mean gain by kind of token (numbers, ``<unk>``, words repeated within the cache window, others).
"""
from __future__ import annotations

import math
import time
from dataclasses import asdict, dataclass
from typing import Callable, Optional

import numpy as np

from corpora.errors import InputError

LN2 = math.log(2.0)
LN10 = math.log(10.0)
REFERENCES = (  # published PTB test perplexities the ladder is read against
    ("KN-5 (Mikolov et al. 2011)", 141.2),
    ("Zaremba et al. 2014, large LSTM (a GPU-day)", 78.4),
    ("Grave et al. 2017, LSTM + neural cache", 72.1),
)


@dataclass
class LadderOptions:
    order: int = 5
    smoothing: str = "mkn"
    cache: bool = True
    window: int = 2000
    dynamic: bool = True
    rule: str = "rms"
    tune_tokens: Optional[int] = 10000  # valid prefix the dynamic-evaluation grid is searched on
    segment_len: int = 20  # dynamic evaluation: tokens scored before each update
    rms_tokens: Optional[int] = 100000  # training tokens for the rms rule's gradient RMS
    infini: bool = True
    top: int = 8  # tokens listed per step
    residual: Optional[str] = None  # a checkpoint of `neural train --ngram-residual`: a side row beside the mixtures


def _ppl(lp_nats: np.ndarray) -> float:
    return float(math.exp(-lp_nats.mean()))


def _ids_context(ids: np.ndarray, itos: list, t: int, width: int = 6) -> str:
    words = [itos[int(i)] for i in ids[max(0, t - width):t]]
    return " ".join("¶" if w == "</s>" else w for w in words)  # a sentence end (a "|" would split a table)


class _Clock:
    def __init__(self, log: Callable[[str], None]):
        self.log, self.seconds = log, {}

    def run(self, name: str, what: str, fn):
        self.log(f"ladder: {what} ...")
        t0 = time.perf_counter()
        out = fn()
        self.seconds[name] = self.seconds.get(name, 0.0) + time.perf_counter() - t0
        self.log(f"ladder: {what}: {self.seconds[name]:.1f} s")
        return out


def load_texts(checkpoint, corpus: Optional[str], *, data_dir=None):
    """``(model, vocab, name, {split: EncodedText}, test bytes, test bytes per sentence)`` for a checkpoint
    and the corpus it was trained on (or ``corpus``: a registered name with train/valid/test)."""
    from corpora import load_corpus
    from corpora.corpus import text_bytes
    from neural.checkpoint import load_checkpoint, model_from_checkpoint

    ckpt = load_checkpoint(checkpoint)
    model, vocab = model_from_checkpoint(ckpt, path=checkpoint)
    info = (ckpt.get("train") or {}).get("data") or {}
    name = corpus or info.get("corpus")
    if not name:
        raise InputError("the checkpoint does not record its corpus", path=checkpoint,
                         fix="pass the corpus it was trained on, e.g. `ngramlm ladder CKPT ptb`")
    c = load_corpus(name, data_dir=data_dir, tokenizer=vocab.tokenizer, valid=info.get("valid"),
                    test=info.get("test"))
    texts = {}
    for split in ("train", "valid", "test"):
        sents = c.sentences(split)
        if not sents:
            raise InputError(f"the corpus {name!r} has no {split} split", path=checkpoint,
                             fix="the ladder needs train (the count models), valid (tuning) and test")
        texts[split] = vocab.encode_sentences(sents)
    sent_bytes = np.array([text_bytes([" ".join(s)]) for s in c.sentences("test")], dtype=np.int64)
    return model, vocab, name, texts, c.n_bytes.get("test"), sent_bytes


def run_ladder(checkpoint, corpus: Optional[str] = None, *, data_dir=None,
               options: Optional[LadderOptions] = None, log: Callable[[str], None] = print) -> dict:
    """Climb the ladder for ``checkpoint``; returns the JSON-able results (see the module docstring)."""
    model, vocab, name, texts, test_bytes, sent_bytes = load_texts(checkpoint, corpus, data_dir=data_dir)
    res = climb(model, vocab, texts, name=name, test_bytes=test_bytes, sentence_bytes=sent_bytes, options=options,
                log=log)
    res["checkpoint"] = str(checkpoint)
    res["training"] = _training_summary(checkpoint)
    return res


class _Climb:
    """What the steps of one climb share: the model, the texts, the options, the clock, and what each step
    leaves for the next (``lp``: row id -> {"valid", "test": ln p per token}; ``params``: row id -> its tuned
    parameters; the n-gram model's context buckets; the neural model's states; the best neural row)."""

    def __init__(self, model, vocab, texts: dict, opt: LadderOptions, name: str, log: Callable[[str], None]):
        self.model, self.vocab, self.texts, self.opt, self.name, self.log = model, vocab, texts, opt, name, log
        self.ids = {s: texts[s].ids for s in ("valid", "test")}
        self.clock = _Clock(log)
        self.lp: dict = {}
        self.params: dict = {}
        self.buckets: dict = {}
        self.states: dict = {}  # the neural model's hidden states per split (the cache reads them)
        self.best_neural = "neural"  # the neural row the mixtures take: the last adaptation that ran

    def cache_over(self, states: dict, base: dict) -> tuple:
        """The neural cache over ``states`` mixed with ``base``: (theta, lambda) tuned on valid, applied to both
        splits."""
        from neural.adaptation import cache as cache_mod

        ids, opt = self.ids, self.opt
        rows = cache_mod.neural_cache_log_probs(states["valid"], ids["valid"], window=opt.window)
        sizes = {s: cache_mod.cache_sizes(len(ids[s]), window=opt.window) for s in ids}
        fit = cache_mod.tune_mixture(base["valid"], rows, sizes=sizes["valid"])
        theta = float(cache_mod.DEFAULT_THETAS[fit.row])
        out = {"valid": cache_mod.mix_log_probs(base["valid"], rows[fit.row], lam=fit.lam, sizes=sizes["valid"])}
        row_t = cache_mod.neural_cache_log_probs(states["test"], ids["test"], window=opt.window, thetas=[theta])[0]
        out["test"] = cache_mod.mix_log_probs(base["test"], row_t, lam=fit.lam, sizes=sizes["test"])
        return out, {"window": opt.window, "theta": theta, "lambda": fit.lam}


# ---------------------------------------------------------------------------- the steps
# Each step fits (on train) or tunes (on valid) what it adds and scores both splits; it returns
# {row id: (ln p by split, parameters)} and may leave state for the steps after it.


def _ngram_step(c: _Climb) -> dict:
    """The count model alone, fitted on train; its context buckets feed the per-context mixtures."""
    from ngramlm.model import NgramLM
    from ngramlm.tools.context_mix import ngram_context_buckets

    opt, texts = c.opt, c.texts
    params = {}

    def fit():
        try:
            return NgramLM(order=opt.order, smoothing=opt.smoothing).fit(texts["train"], vocab=c.vocab)
        except InputError as exc:
            # Characters: every unigram is frequent, so KN's count-of-counts give no discount there
            # -- the fixed fallback discounts, as `compare` uses (said in the log and the JSON).
            from .ngram_part import FALLBACK

            if opt.smoothing not in FALLBACK:
                raise
            c.log(f"ladder: {exc.message}; using the fallback discounts {FALLBACK[opt.smoothing]}")
            params["discount_fallback"] = list(FALLBACK[opt.smoothing])
            return NgramLM(order=opt.order, smoothing=opt.smoothing,
                           discount_fallback=FALLBACK[opt.smoothing]).fit(texts["train"], vocab=c.vocab)

    lm = c.clock.run("ngram", f"{opt.smoothing.upper()} {opt.order}-gram on {c.name} train", fit)
    scores = c.clock.run("ngram", "n-gram scoring", lambda: {s: lm.token_scores(texts[s]) for s in ("valid", "test")})
    lp = {s: scores[s].log10_prob * LN10 for s in scores}
    if not all(np.isfinite(v).all() for v in lp.values()):
        raise InputError(f"the {opt.smoothing} model gives some test token probability 0",
                         fix="use a smoothed model (mkn, kn, wb)")
    c.buckets = {s: ngram_context_buckets(scores[s].ngram_length, texts[s].starts, order=opt.order) for s in scores}
    return {"ngram": (lp, params)}


def _neural_step(c: _Climb) -> dict:
    """The neural model alone, full history; its states feed the cache."""
    from neural.evaluation import token_log_probs_and_hidden

    plain = c.clock.run("neural", "neural model, full history", lambda: {
        s: token_log_probs_and_hidden(c.model, c.ids[s]) for s in ("valid", "test")})
    lp = {s: plain[s][0] for s in plain}
    for s in ("valid", "test"):
        if len(lp[s]) != len(c.lp["ngram"][s]):
            raise RuntimeError("the n-gram and neural models scored different numbers of tokens")
    c.states = {s: plain[s][1] for s in plain}
    return {"neural": (lp, {})}


def _unigram_cache_step(c: _Climb) -> dict:
    """A side row: the neural model with a unigram cache (lambda tuned on valid)."""
    from neural.adaptation import cache as cache_mod

    def run():
        ids, opt, base = c.ids, c.opt, c.lp["neural"]
        sizes = {s: cache_mod.cache_sizes(len(ids[s]), window=opt.window) for s in ids}
        rows = {s: cache_mod.unigram_cache_log_probs(ids[s], window=opt.window) for s in ids}
        fit = cache_mod.tune_mixture(base["valid"], rows["valid"], sizes=sizes["valid"])
        return ({s: cache_mod.mix_log_probs(base[s], rows[s], lam=fit.lam, sizes=sizes[s]) for s in ids},
                {"window": opt.window, "lambda": fit.lam})

    return {"unigram_cache": c.clock.run("unigram_cache", "unigram cache", run)}


def _cache_step(c: _Climb) -> dict:
    """+ the neural cache over the model's own states (Grave et al. 2017)."""
    out = c.clock.run("cache", "neural cache (theta, lambda on valid)", lambda: c.cache_over(c.states, c.lp["neural"]))
    c.best_neural = "cache"
    return {"cache": out}


def _dynamic_step(c: _Climb) -> dict:
    """+ dynamic evaluation (Krause et al. 2018), lr and decay searched on a valid prefix; with the cache on,
    the cache then runs over the adapted model's states."""
    from neural.adaptation.dynamic import dynamic_token_log_probs, gradient_rms, tune_dynamic

    opt, ids, model = c.opt, c.ids, c.model

    def run():
        rms = None
        if opt.rule == "rms":
            rms = gradient_rms(model, c.texts["train"].ids, max_tokens=opt.rms_tokens)
        tune_ids = ids["valid"] if opt.tune_tokens is None else ids["valid"][:opt.tune_tokens]
        fit = tune_dynamic(model, tune_ids, rule=opt.rule, rms=rms, segment_len=opt.segment_len)
        cfg = fit.config
        out = {s: dynamic_token_log_probs(model, ids[s], config=cfg, rms=rms, need_hidden=opt.cache)
               for s in ("valid", "test")}
        # A diverging setting's perplexity overflows: None (standard JSON, and it lost anyway).
        grid = [{"lr": a, "decay": d, "valid_prefix_ppl": (math.exp(-t / len(tune_ids))
                                                           if math.isfinite(t) and -t / len(tune_ids) < 700 else None)}
                for a, d, t in fit.grid]
        return out, {"rule": cfg.rule, "lr": cfg.lr, "decay": cfg.decay, "segment_len": cfg.segment_len,
                     "tuned_on_tokens": int(len(tune_ids)), "grid": grid}

    dyn, params = c.clock.run("dynamic", "dynamic evaluation (tuning + valid + test passes)", run)
    out = {"dynamic": ({s: dyn[s][0] for s in dyn}, params)}
    c.best_neural = "dynamic"
    if opt.cache:
        lp, cp = c.clock.run("dynamic_cache", "neural cache over the adapted states",
                             lambda: c.cache_over({s: dyn[s][1] for s in dyn}, out["dynamic"][0]))
        out["dynamic_cache"] = (lp, {**{k: v for k, v in params.items() if k != "grid"}, **cp})
        c.best_neural = "dynamic_cache"
    return out


def _mix_step(c: _Climb) -> dict:
    """+ the n-gram model: one global weight (EM on valid), then weights per n-gram context bucket."""
    from ngramlm.tools.context_mix import fit_bucket_mix, global_mix, mix_by_bucket
    from ngramlm.tools.mix import best_mix

    ids, buckets = c.ids, c.buckets

    def run():
        comp = {s: np.vstack([c.lp["ngram"][s], c.lp[c.best_neural][s]]) for s in ids}
        fit = best_mix(comp["valid"] / LN10)
        glob = {s: global_mix(comp[s], fit.weights) for s in ids}
        bmix = fit_bucket_mix(comp["valid"], buckets["valid"], n_buckets=c.opt.order)
        ctx = {s: mix_by_bucket(comp[s], buckets[s], bmix) for s in ids}
        return {"mix_global": (glob, {"weights": {"ngram": fit.weights[0], "neural": fit.weights[1]}}),
                "mix_context": (ctx, {"scheme": "n-gram context match", **bmix.to_dict(["ngram", "neural"])})}

    return c.clock.run("mix_global", "n-gram + neural, global and per-context weights", run)


def _residual_step(c: _Climb) -> dict:
    """A side row: a network trained on an n-gram model's residual (``neural train --ngram-residual``), the
    product of experts beside the ladder's interpolation of separately trained models."""
    from neural.checkpoint import load_model
    from neural.evaluation import token_log_probs

    def run():
        model, vocab = load_model(c.opt.residual)[:2]
        if model.kind != "residual":
            raise InputError(f"{c.opt.residual} holds a {model.kind} model, not one trained on an n-gram's residual",
                             path=c.opt.residual, fix="train one with `ngramlm neural train --ngram-residual MODEL`")
        if vocab != c.vocab:
            raise InputError("the residual model has another vocabulary than the ladder's model", path=c.opt.residual,
                             fix="train both on the same corpus and tokenizer")
        lp = {s: token_log_probs(model, c.ids[s]) for s in ("valid", "test")}
        cfg = model.config
        return lp, {"checkpoint": str(c.opt.residual), "ngram": cfg.ngram_source, "ngram_order": cfg.ngram_order,
                    "ngram_weight": cfg.ngram_weight, "folds": cfg.folds}

    return {"residual": c.clock.run("residual", "residual-trained model, full history", run)}


_SCHEMES = {"ngram": "n-gram context match", "infini": "∞-gram effective n",
            "both": "n-gram match × ∞-gram effective n"}


def _infini_step(c: _Climb) -> dict:
    """+ the ∞-gram: three-way mixtures, global weights and weights per context bucket, the bucket scheme
    (the n-gram's context match, the ∞-gram's effective n, or both) chosen on valid."""
    from ngramlm.tools.context_mix import fit_bucket_mix, global_mix, infini_context_buckets, mix_by_bucket
    from ngramlm.tools.mix import best_mix

    ids, buckets = c.ids, c.buckets

    def run():
        from ngramlm.infini.index import InfiniIndex

        idx = InfiniIndex.build(c.texts["train"], c.vocab)
        sc = {s: idx.score(c.texts[s]) for s in ids}
        with np.errstate(divide="ignore"):
            inf_lp = {s: np.log(sc[s].prob) for s in ids}
        comp = {s: np.vstack([c.lp["ngram"][s], inf_lp[s], c.lp[c.best_neural][s]]) for s in ids}
        names = ["ngram", "infini", "neural"]
        fit = best_mix(comp["valid"] / LN10)
        glob3 = {s: global_mix(comp[s], fit.weights) for s in ids}
        ib = {s: infini_context_buckets(sc[s].eff_n, sc[s].sparse) for s in ids}
        schemes = {"ngram": buckets, "infini": ib,
                   "both": {s: buckets[s] * (int(ib["valid"].max()) + 2) + ib[s] for s in ids}}
        best = None
        for scheme, b in schemes.items():
            bm = fit_bucket_mix(comp["valid"], b["valid"])
            valid = mix_by_bucket(comp["valid"], b["valid"], bm)
            if best is None or valid.sum() > best[2]["valid"].sum():
                best = (scheme, bm, {"valid": valid, "test": mix_by_bucket(comp["test"], b["test"], bm)})
        scheme, bm, mixed = best
        return {"mix3_global": (glob3, {"weights": dict(zip(names, fit.weights))}),
                "mix3_context": (mixed, {"scheme": _SCHEMES[scheme], **bm.to_dict(names),
                                         "mean_effective_n_test": float(sc["test"].eff_n.mean())})}

    return c.clock.run("infini", "∞-gram index and three-way mixtures", run)


@dataclass(frozen=True)
class Step:
    """One step of the climb: the option that turns it on (None: always) and the function that fits or tunes
    its rows and scores them (see the steps above)."""

    needs: Optional[str]
    run: Callable[[_Climb], dict]


STEPS = (Step(None, _ngram_step), Step(None, _neural_step), Step("cache", _unigram_cache_step),
         Step("cache", _cache_step), Step("dynamic", _dynamic_step), Step(None, _mix_step),
         Step("infini", _infini_step), Step("residual", _residual_step))


@dataclass(frozen=True)
class Rung:
    """A row of the results: its id, its label (a function of the options and the model's architecture),
    whether it is a rung under the options (else a side row: a method on its own), and the clocks whose
    seconds it added."""

    id: str
    label: Callable[[LadderOptions, str], str]
    rung: Callable[[LadderOptions], bool]
    clocks: tuple


def _arch_label(arch: str) -> str:
    from neural.config import ARCHITECTURES

    return ARCHITECTURES[arch].label if arch in ARCHITECTURES else arch


# In the order of the ladder (the side rows in theirs).
RUNGS = (
    Rung("ngram", lambda o, a: f"{_smoother_label(o.smoothing)} {o.order}-gram", lambda o: True, ("ngram",)),
    Rung("neural", lambda o, a: f"{_arch_label(a)} alone", lambda o: True, ("neural",)),
    Rung("unigram_cache", lambda o, a: "+ unigram cache (instead of the neural cache)", lambda o: False,
         ("unigram_cache",)),
    Rung("cache", lambda o, a: "+ neural cache", lambda o: o.cache, ("cache",)),
    Rung("dynamic", lambda o, a: "+ dynamic evaluation (without the cache)", lambda o: not o.cache, ("dynamic",)),
    Rung("dynamic_cache", lambda o, a: "+ dynamic evaluation (cache over the adapted states)", lambda o: o.cache,
         ("dynamic", "dynamic_cache")),
    Rung("mix_global", lambda o, a: f"+ {o.order}-gram, one global weight", lambda o: True, ("mix_global",)),
    Rung("mix_context", lambda o, a: "+ per-context weights", lambda o: True, ()),
    Rung("mix3_global", lambda o, a: "+ ∞-gram, global weights (three-way)", lambda o: False, ("infini",)),
    Rung("mix3_context", lambda o, a: "+ ∞-gram, per-context weights (three-way)", lambda o: True, ("infini",)),
    Rung("residual", lambda o, a: "trained on an n-gram's residual (product of experts, its own checkpoint)",
         lambda o: False, ("residual",)),
)


def climb(model, vocab, texts: dict, *, name: str, test_bytes: Optional[int] = None,
          sentence_bytes: Optional[np.ndarray] = None, options: Optional[LadderOptions] = None,
          log: Callable[[str], None] = print) -> dict:
    """The ladder for a loaded ``model`` on ``texts`` (``{"train", "valid", "test": EncodedText}`` encoded
    with ``vocab``, the model's vocabulary); ``test_bytes`` (and the bytes of each test sentence) give bits
    per byte and its interval."""
    from neural.models import model_name

    from .bootstrap import intervals

    opt = options or LadderOptions()
    t_all = time.perf_counter()
    c = _Climb(model, vocab, texts, opt, name, log)
    for step in STEPS:
        if step.needs is None or getattr(opt, step.needs):
            for rid, (lp, params) in step.run(c).items():
                c.lp[rid] = lp
                if params:
                    c.params[rid] = params

    arch = model_name(model)
    shown = [r for r in RUNGS if r.id in c.lp]
    ladder = [r.id for r in shown if r.rung(opt)]
    rows = []
    for r in [r for r in shown if r.rung(opt)] + [r for r in shown if not r.rung(opt)]:
        lt = c.lp[r.id]["test"]
        ci = intervals(lt / LN2, texts["test"].starts, n_bytes=test_bytes, unit_bytes=sentence_bytes)
        extra = sum((c.clock.seconds.get(k, 0.0) for k in r.clocks), 0.0)
        rows.append({"id": r.id, "label": r.label(opt, arch), "rung": r.id in ladder,
                     "family": _family(r.id),
                     "valid_ppl": _ppl(c.lp[r.id]["valid"]), "test_ppl": _ppl(lt),
                     "test_bits_per_token": float(-lt.mean() / LN2),
                     "test_bits_per_byte": float(-lt.sum() / LN2 / test_bytes) if test_bytes else None,
                     "test_ppl_ci": ci["ppl"] if ci else None,
                     "test_bpb_ci": ci.get("bits_per_byte") if ci else None,
                     "extra_seconds": round(extra, 2), "params": c.params.get(r.id, {})})
    steps = _gains(ladder, c.lp, c.ids["test"], vocab, top=opt.top, window=opt.window)
    return {
        "checkpoint": None, "architecture": arch, "corpus": name, "options": asdict(opt),
        "tokens": {"valid": int(len(c.ids["valid"])), "test": int(len(c.ids["test"]))}, "test_bytes": test_bytes,
        "n_types": vocab.n_types, "training": None,
        "rows": rows, "ladder": ladder, "top": ladder[-1], "steps": steps,
        "seconds": {k: round(v, 2) for k, v in c.clock.seconds.items()},
        "adaptation_seconds": round(sum(v for k, v in c.clock.seconds.items()), 2),
        "wall_seconds": round(time.perf_counter() - t_all, 2),
        "references": [{"label": a, "ppl": b} for a, b in REFERENCES] if name == "ptb" else [],
        "per_token_log2": {rid: (c.lp[rid]["test"] / LN2) for rid in ladder},  # dropped by the JSON writer
    }


def _smoother_label(s: str) -> str:
    return {"mkn": "MKN", "kn": "KN", "wb": "Witten-Bell"}.get(s, s)


def _family(rid: str) -> str:
    if rid == "ngram":
        return "ngram"
    if rid.startswith("mix3"):
        return "infini"
    if rid.startswith("mix") or rid == "residual":
        return "interpolated"
    return "neural"


def _training_summary(checkpoint) -> dict:
    from neural.checkpoint import load_checkpoint, training_seconds

    train = load_checkpoint(checkpoint).get("train") or {}
    hist = train.get("history") or []
    return {"seconds": training_seconds(train) if train else None,
            "epochs": hist[-1]["epoch"] if hist else None,
            "config": {k: v for k, v in (train.get("config") or {}).items()
                       if k in ("lr", "batch_size", "bptt", "ar", "tar", "average", "average_after", "clip")}}


def token_kinds(ids: np.ndarray, vocab, *, window: int) -> dict:
    """Masks over the test tokens: numbers (PTB's ``N`` and digit strings), ``<unk>``, sentence ends,
    words repeated within the last ``window`` tokens, and the other words."""
    itos = vocab.itos_
    n = len(ids)
    words = np.array([itos[int(i)] for i in np.unique(ids)], dtype=object)
    uniq = np.unique(ids)
    is_num = np.isin(ids, uniq[[w == "N" or any(ch.isdigit() for ch in w) for w in words]])
    is_unk = np.isin(ids, uniq[[w == "<unk>" for w in words]])
    is_end = np.isin(ids, uniq[[w == "</s>" for w in words]])
    # Last occurrence before t of the same id: repeated when within the window.
    order = np.lexsort((np.arange(n), ids))
    prev = np.full(n, -1, dtype=np.int64)
    same = ids[order][1:] == ids[order][:-1]
    prev[order[1:][same]] = order[:-1][same]
    repeated = (prev >= 0) & (np.arange(n) - prev <= window)
    other = ~(is_num | is_unk | is_end)
    return {"numbers": is_num, "<unk>": is_unk, "sentence ends": is_end,
            "repeated words (within the cache window)": other & repeated,
            "first words (not in the window)": other & ~repeated}


def _gains(ladder: list, lp: dict, ids: np.ndarray, vocab, *, top: int, window: int) -> list:
    """For each step up the ladder: mean gain by kind of token and the tokens with the largest gains."""
    kinds = token_kinds(ids, vocab, window=window)
    itos = vocab.itos_
    out = []
    for prev, cur in zip(ladder[:-1], ladder[1:]):
        gain = (lp[cur]["test"] - lp[prev]["test"]) / LN2  # bits gained per token
        by_kind = [{"kind": k, "tokens": int(m.sum()), "share": float(m.mean()),
                    "bits_gained_per_token": float(gain[m].mean()) if m.any() else None,
                    "share_of_total_gain": float(gain[m].sum() / gain.sum()) if m.any() and gain.sum() else None}
                   for k, m in kinds.items()]
        best = np.argsort(-gain, kind="stable")[:top]
        tokens = [{"position": int(t), "context": _ids_context(ids, itos, int(t)), "token": itos[int(ids[t])],
                   "bits_before": float(-lp[prev]["test"][t] / LN2), "bits_after": float(-lp[cur]["test"][t] / LN2)}
                  for t in best]
        out.append({"from": prev, "to": cur, "mean_bits_gained": float(gain.mean()), "by_kind": by_kind,
                    "top_tokens": tokens})
    return out
