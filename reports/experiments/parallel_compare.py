"""``ngramlm compare fra-eng``: how much does knowing the source lower the target's perplexity?

On a parallel corpus every model predicts the same thing -- each target sentence's words and its
``</s>``, over the target vocabulary fitted on the training pairs -- so their perplexities are
comparable:

1. n-gram models of the target side (orders 1..N x smoothers), knowing nothing of the source;
2. neural LMs of the target side (LSTM by default), knowing nothing of the source;
3. the encoder-decoder without attention (the source squeezed into one vector),
4. with additive attention, and
5. the encoder-decoder Transformer (when ``--neural`` lists ``transformer``, as it does by default):
   *conditional* perplexities, ``P(y | x)``.

Then BLEU of the translators on the test pairs (greedy, and beam k = 2..K with and without
length normalisation), example translations, and the attention matrices of test pairs for the
report's heatmaps (the GRU's source attention; the Transformer's cross-attention, encoder
self-attention and decoder self-attention).  Results are cached like the monolingual run's
(``DIR/cache``), so a re-run or ``--resume`` trains only what is missing.
"""
from __future__ import annotations

import math
import time
from pathlib import Path
from typing import Callable, Optional

import numpy as np

from .data import CompareData, cache_key
from ..formatting import describe_budget
from .run import RunBase

FORMAT = "ngramlm.compare.parallel"
FORMAT_VERSION = 1
SPLIT_SEED = 0  # the corpus's train/valid/test shuffle: fixed, so every run compares on the same pairs
ALPHA = 0.7  # length normalisation of the "normalised" beam rows: log P / T**0.7 (GNMT's 0.6-0.7)
N_ATTENTION = 6  # test pairs shown in the attention heatmap
N_EXAMPLES = 12  # test pairs shown with their translations
N_SELF_ATTENTION = 2  # test pairs whose Transformer self-attention (encoder and decoder) is shown too
GRU_TRANSLATORS = ("seq2seq", "seq2seq-attn")
TRANSLATORS = GRU_TRANSLATORS + ("seq2seq-transformer",)


def translators_of(settings) -> tuple:
    """The translators a run trains, by row id: the settings' ``translators`` where they have that field;
    else both GRU translators, and the Transformer one when the neural models include ``transformer``
    (``--neural`` names the architectures of both sides: ``--neural lstm`` trains only GRU translators)."""
    chosen = getattr(settings, "translators", None)
    if chosen is not None:
        return tuple(chosen)
    return GRU_TRANSLATORS + (("seq2seq-transformer",) if "transformer" in settings.neural else ())


def is_parallel(corpus: str) -> bool:
    """A registered parallel corpus, or a ``.tsv`` file of sentence pairs (the text pipeline's rule)."""
    from corpora.sources import source_kind

    return source_kind(corpus) == "parallel"


def target_side(par) -> CompareData:
    """The target sentences of every split as a monolingual dataset over the target vocabulary."""
    from corpora.corpus import Corpus, Dataset

    splits = {s: par.target_sentences(s) for s in ("train", "valid", "test")}
    corpus = Corpus(name=f"{par.name}:{par.tgt_lang}", tokenizer=par.tokenizer, splits=splits)
    encoded = {s: par.tgt_vocab.encode_sentences(sents) for s, sents in splits.items()}
    ds = Dataset(corpus=corpus, vocab=par.tgt_vocab, encoded=encoded)
    # The target text's UTF-8 bytes as read (each target line plus one byte for its sentence end, as
    # corpora.corpus.text_bytes counts a monolingual text): what bits per byte divide by.
    from corpora.corpus import line_bytes

    line = {s: line_bytes([t for _, t in par.raw[s]]) for s in splits}
    sizes = {s: {"sentences": enc.n_sentences, "tokens": enc.n_tokens, "bytes": int(line[s].sum())}
             for s, enc in encoded.items()}
    return CompareData(dataset=ds, name=corpus.name, fingerprint=par.fingerprint[:20], sizes=sizes, truth={},
                       sentence_bytes=line)


class ParallelRun(RunBase):
    """One comparison on a parallel corpus, written into ``out``: the target side's LMs (the same n-gram
    grid and neural LMs as a monolingual run) against the translators."""

    FORMAT = FORMAT
    FORMAT_VERSION = FORMAT_VERSION
    KEEP_ARRAYS = True  # every row's per-token scores: the bootstrap intervals of its test perplexity

    def __init__(self, settings, out: Path, *, data_dir: Optional[str] = None,
                 log: Optional[Callable[[str], None]] = None, verbose: bool = False) -> None:
        super().__init__(settings, out, data_dir=data_dir, log=log, verbose=verbose)
        self.models: dict = {}  # translator row id -> loaded model

    @property
    def fingerprint(self) -> str:
        return self.par.fingerprint  # the pairs' (the target side's data is a view of them)

    def _log_row(self, row: dict) -> None:
        tag = "cached" if row["cached"] else f"{row['seconds_this_run']:.1f} s"
        test = (row.get("test") or {}).get("ppl")
        self.log(f"  {row['id']:<24} test ppl {'-' if test is None else f'{test:9.2f}'}  ({tag})"
                 + (f"  not estimated: {row['error']}" if row.get("error") else ""))

    # ------------------------------------------------------------------ RunBase
    def load(self) -> None:
        from corpora.parallel import load_parallel

        self.par = load_parallel(self.settings.corpus, data_dir=self.data_dir, seed=SPLIT_SEED)
        self.data = target_side(self.par)

    def header(self) -> dict:
        par = self.par
        return {"corpus": {"name": par.name, "src_lang": par.src_lang, "tgt_lang": par.tgt_lang, "sizes": par.sizes(),
                           "src_types": par.src_vocab.n_types, "tgt_types": par.tgt_vocab.n_types,
                           "split_seed": SPLIT_SEED, "tokenizer": par.tokenizer.to_dict(),
                           "fingerprint": par.fingerprint},
                "target_test_bytes": self.data.sizes["test"]["bytes"],
                "rows": [], "bleu": [], "attention": [], "examples": []}

    def intro(self) -> str:
        par, sizes = self.par, self.par.sizes()
        return (f"corpus {par.name} ({par.src_lang} -> {par.tgt_lang}): {sizes['train']['pairs']:,} training pairs, "
                f"{sizes['test']['pairs']:,} test pairs; target side {par.tgt_vocab.n_types:,} types, "
                f"{self.data['test'].n_tokens:,} test tokens predicted; results in {self.out}")

    def finish(self) -> None:
        """Each row's bootstrap 95 % interval on the test pairs (reports.experiments.bootstrap; the pair is the unit):
        the target LMs and the translators predict the same target tokens, in the same order."""
        from . import bootstrap

        test = self.data["test"]
        for r in self.results.get("rows", []):
            lp = (self.arrays.get(r["id"]) or {}).get("test")
            if lp is not None and len(lp) == test.n_tokens:
                r["test_ci"] = bootstrap.test_intervals(self.data, lp)
        n_bytes = self.data.sizes["test"].get("bytes")
        for r in self.results.get("rows", []):
            t = r.get("test") or {}
            log2p = t.get("log2prob", t.get("log2_prob"))
            if n_bytes and log2p is not None and t.get("ppl") is not None:
                r["test_bits_per_byte"] = -log2p / n_bytes  # the target side's bytes, one convention for all

    def stages(self) -> tuple:
        return (self._ngram_stage, self._lm_stage, self._translator_stage, self._bleu_stage, self._fusion_stage,
                self._examples_stage)

    # ------------------------------------------------------------------ stages
    def _ngram_stage(self) -> None:
        from ngramlm import NgramCounts

        s, d = self.settings, self.data
        counts = NgramCounts.from_encoded(d["train"], order=s.max_order, vocab_size=len(d.vocab))
        self.log(f"n-gram models of the target side: orders 1..{s.max_order} x {', '.join(s.smoothers)}")
        for row in self.ngram_rows(counts):
            row["side"] = "target LM"
            self.results["rows"].append(row)

    def _lm_stage(self) -> None:
        s = self.settings
        if not s.neural:
            return
        import torch

        torch.set_num_threads(s.threads)
        self.log(f"neural LMs of the target side ({s.neural_size}, {describe_budget(s.main_budget())} each): "
                 f"{', '.join(s.neural)}")
        for row in self.neural_rows(s.neural):
            row["side"] = "target LM"
            self.results["rows"].append(row)

    def _translator_stage(self) -> None:
        import torch

        s = self.settings
        torch.set_num_threads(s.threads)
        budget = s.seq2seq_budget()
        chosen = translators_of(s)
        self.log(f"translators ({s.neural_size}, {describe_budget(budget)} each): {', '.join(chosen)}")
        for rid in chosen:
            settings = translator_settings(s.neural_size, budget, s.seed, rid, self.par)
            row = self._cached_or("seq2seq", settings, lambda key, st=settings: translator_row(
                st, self.par, self.cache.checkpoint(key), log=self.log if self.verbose else None, warn=self.log))
            row["side"] = "translator"
            self.results["rows"].append(row)
            if not row.get("error"):
                from neural.checkpoint import best_path, load_model

                ckpt = self.cache.checkpoint(row["key"])
                self.models[row["id"]] = load_model(best_path(ckpt) if best_path(ckpt).exists() else ckpt,
                                                    translator=True)[0]

    def _bleu_stage(self) -> None:
        s = self.settings
        for rid, model in self.models.items():
            settings = {"row": rid, "beams": list(s.beams), "alpha": ALPHA, "row_key": _row_key(self.results, rid)}
            row = self._bleu_cached(rid, settings, model)
            self.results["bleu"].extend(row["bleu"])
        best = max(self.results["bleu"], key=lambda r: r["bleu"], default=None)
        if best:
            self.log(f"best BLEU {best['bleu']:.2f}: {best['model']} {best['decoder']} k={best['beam']} "
                     f"alpha={best['alpha']} ({best['signature']})")

    def _bleu_cached(self, rid: str, settings: dict, model) -> dict:
        from neural.seq2seq.translate import bleu_table

        key = cache_key("bleu", settings, self.par.fingerprint)
        row = self.cache.get(key)
        if row is None:
            t0 = time.perf_counter()
            rows = bleu_table(model, self.par, "test", beams=tuple(self.settings.beams), alphas=(0.0, ALPHA))
            for r in rows:
                r["model"] = rid
            row = {"id": f"bleu:{rid}", "bleu": rows, "seconds": time.perf_counter() - t0}
            self.cache.put(key, row)
        for r in row["bleu"]:
            self.log(f"  BLEU {rid:<16} {r['decoder']:<6} k={r['beam']} alpha={r['alpha']:<4} {r['bleu']:6.2f}")
        return row

    def _fusion_stage(self) -> None:
        """Shallow fusion (``neural.seq2seq.translate``): each translator with the target-side n-gram model of
        the best validation perplexity (or ``--lm``'s), its weight tuned by greedy BLEU on the valid pairs (0
        -- the translator alone -- among the choices; or ``--lm-weight``'s), then BLEU on the test pairs,
        greedy and at the widest beam."""
        s = self.settings
        if not s.fusion or not self.models:
            return
        from corpora.modelkinds import fusion_lm

        weights = FUSION_WEIGHTS if s.fusion_weight is None else (s.fusion_weight,)
        tuned = "greedy BLEU on valid" if s.fusion_weight is None else "given (--lm-weight)"
        widest = max(s.beams)
        if s.fusion_lm is not None:  # the user's model (e.g. trained on more target-language text)
            name = Path(s.fusion_lm).name
            described, lm_key = f"{name} (--lm)", ["file", s.fusion_lm, Path(s.fusion_lm).stat().st_size]
            lm = fusion_lm(s.fusion_lm, self.par.tgt_vocab.itos_)
            self.results["fusion"] = {"model": name}
        else:
            pick = fusion_ngram(self.results["rows"])
            if pick is None:
                return
            from ngramlm import NgramLM

            smoother, order = pick
            described, lm_key = f"the target-side {smoother} {order}-gram", [smoother, order]
            lm = fusion_lm(NgramLM(order=order, smoothing=smoother).fit(self.data["train"], vocab=self.data.vocab),
                           self.par.tgt_vocab.itos_)
            self.results["fusion"] = {"smoother": smoother, "order": order}
        self.log(f"shallow fusion: {described}, weight {'among ' if len(weights) > 1 else ''}"
                 f"{', '.join(f'{w:g}' for w in weights)}{' tuned by greedy BLEU on valid' if len(weights) > 1 else ''};"
                 f" greedy and beam {widest}")
        self.results["fusion"].update({"weights": list(weights), "tuned_by": tuned, "described": described})
        for rid, model in self.models.items():
            settings = {"row": rid, "row_key": _row_key(self.results, rid), "lm": lm_key,
                        "weights": list(weights), "beam": widest, "alpha": ALPHA}
            key = cache_key("fusion", settings, self.par.fingerprint)
            row = self.cache.get(key)
            if row is None:
                t0 = time.perf_counter()
                row = {"id": f"fusion:{rid}", "bleu": fused_bleu_rows(model, self.par, lm, widest, weights),
                       "seconds": 0.0}
                for r in row["bleu"]:
                    r["model"] = rid
                row["seconds"] = time.perf_counter() - t0
                self.cache.put(key, row)
            for r in row["bleu"]:
                self.log(f"  BLEU {rid:<16} {r['decoder']:<6} k={r['beam']} + n-gram w={r['lm_weight']:<4g} "
                         f"{r['bleu']:6.2f}")
            self.results["bleu"].extend(row["bleu"])

    def _examples_stage(self) -> None:
        from neural.seq2seq.translate import (attention_for, beam_translate, best_translation, greedy_translate,
                                              ids_to_text)

        par = self.par
        src, tgt = par.encode("test")
        raw = par.raw["test"]
        # The first test pairs with at least 4 target tokens: long enough for a picture of alignment.
        chosen = [i for i in range(len(src)) if len(tgt[i]) >= 4][:max(N_ATTENTION, N_EXAMPLES)]
        outputs = {}
        for rid, model in self.models.items():
            greedy = greedy_translate(model, [src[i] for i in chosen])
            beam = [best_translation(beam_translate(model, src[i], beam_size=max(self.settings.beams), alpha=ALPHA))
                    for i in chosen]
            outputs[rid] = ([ids_to_text(par.tgt_vocab, g) for g in greedy],
                            [ids_to_text(par.tgt_vocab, b) for b in beam])
        for j, i in enumerate(chosen[:N_EXAMPLES]):
            self.results["examples"].append({
                "source": raw[i][0], "reference": raw[i][1],
                "translations": {rid: {"greedy": g[j], "beam": b[j]} for rid, (g, b) in outputs.items()}})
        attn = self.models.get("seq2seq-attn")
        if attn is not None:
            for j, i in enumerate(chosen[:N_ATTENTION]):
                self.results["attention"].append(attention_entry(
                    attention_for(attn, src[i], tgt[i]), *self._tokens(src[i], tgt[i]), model="seq2seq-attn",
                    kind="cross", title="seq2seq + attention: source attention", pair=j + 1))
        tf = self.models.get("seq2seq-transformer")
        if tf is not None:
            self.results["attention"].extend(transformer_attention(tf, src, tgt, chosen, self._tokens))

    def _tokens(self, s, t) -> tuple:
        """(source tokens + </s>, target tokens + </s>) of a pair of id arrays."""
        par = self.par
        return ([par.src_vocab.lookup_token(int(x)) for x in s] + ["</s>"],
                [par.tgt_vocab.lookup_token(int(x)) for x in t] + ["</s>"])


def attention_entry(w: np.ndarray, keys: list, queries: list, *, model: str, kind: str, title: str,
                    pair: int) -> dict:
    """One heatmap of the report: ``w`` (len(queries), len(keys)), rows summing to 1, stored as ln w
    (softmax(ln w / T) is the attention at softmax temperature T; a weight of exactly 0 is None)."""
    with np.errstate(divide="ignore"):
        logw = np.log(w)
    return {"model": model, "kind": kind, "title": title, "pair": pair, "source": keys, "target": queries,
            "log_weights": [[None if not math.isfinite(x) else round(float(x), 5) for x in r] for r in logw]}


def transformer_attention(model, src: list, tgt: list, chosen: list, tokens) -> list:
    """The Transformer translator's heatmaps: the last layer's cross-attention for ``N_ATTENTION`` test pairs,
    then encoder and decoder self-attention for the first ``N_SELF_ATTENTION``, each averaged over the heads."""
    from neural.seq2seq.translate import attention_maps_for

    n_layers, n_heads = model.config.n_layers, model.config.n_heads
    where = f"layer {n_layers} of {n_layers}, mean of {n_heads} heads"
    cross, selfs = [], []
    for j, i in enumerate(chosen[:N_ATTENTION]):
        maps = attention_maps_for(model, src[i], tgt[i])
        s_tok, t_tok = tokens(src[i], tgt[i])
        cross.append(attention_entry(maps["cross"][-1].mean(axis=0), s_tok, t_tok, model="seq2seq-transformer",
                                     kind="cross", title=f"Transformer: cross-attention ({where})", pair=j + 1))
        if j < N_SELF_ATTENTION:
            selfs.append(attention_entry(maps["encoder"][-1].mean(axis=0), s_tok, s_tok, model="seq2seq-transformer",
                                         kind="encoder", title=f"Transformer: encoder self-attention ({where})",
                                         pair=j + 1))
            # Rows: the token predicted at each position; columns: the tokens read (<s>, then the target's).
            selfs.append(attention_entry(maps["decoder"][-1].mean(axis=0), ["<s>"] + t_tok[:-1], t_tok,
                                         model="seq2seq-transformer", kind="decoder",
                                         title=f"Transformer: decoder self-attention, causal ({where})", pair=j + 1))
    return cross + selfs


FUSION_WEIGHTS = (0.0, 0.1, 0.2, 0.3, 0.5)


def fusion_ngram(rows: list) -> Optional[tuple]:
    """``(smoother, order)`` of the target-side n-gram row of the best validation perplexity, or None."""
    best = None
    for r in rows:
        v = (r.get("valid") or {}).get("ppl")
        st = r.get("settings") or {}
        if r.get("family") == "ngram" and v is not None and "smoother" in st and st.get("order", 0) >= 2:
            if best is None or v < best[0]:
                best = (v, st["smoother"], st["order"])
    return None if best is None else best[1:]


def fused_bleu_rows(model, par, lm, beam: int, weights=FUSION_WEIGHTS) -> list:
    """The weight among ``weights`` with the best greedy BLEU on valid (ties: the smaller), then the test
    BLEU of greedy and of beam ``beam`` (alpha ALPHA) with it: rows marked ``fusion`` with their ``lm_weight``."""
    from neural.seq2seq.translate import bleu_table

    valid = bleu_table(model, par, "valid", beams=(1,), lm=lm, lm_weights=tuple(weights))
    best = max(valid, key=lambda r: (r["bleu"], -r["lm_weight"]))
    w = best["lm_weight"]
    rows = bleu_table(model, par, "test", beams=(1,), lm=lm, lm_weights=(w,))
    if beam > 1:
        rows += bleu_table(model, par, "test", beams=(beam,), alphas=(ALPHA,), lm=lm, lm_weights=(w,))
    for r in rows:
        r.update(fusion=True, lm_weight=w, valid_bleu=best["bleu"],
                 valid_by_weight={f"{v['lm_weight']:g}": v["bleu"] for v in valid})
    return rows


def _row_key(results: dict, rid: str) -> str:
    return next(r["key"] for r in results["rows"] if r["id"] == rid)


# ---------------------------------------------------------------------------- translators
def translator_settings(size: str, budget: dict, seed: int, model: str, par) -> dict:
    """What trains translator ``model`` (a row id of ``TRANSLATORS``): its configs, size and budget."""
    from neural.config import resolve_seq2seq_config

    epochs = budget.get("epochs")
    train = {"seed": seed, "time_budget": budget.get("minutes"), "epochs": epochs, "patience": 0 if epochs else None}
    sizes = dict(vocab_size=len(par.tgt_vocab), src_vocab_size=len(par.src_vocab), size=size)
    if model == "seq2seq-transformer":
        from neural.seq2seq.transformer import resolve_seq2seq_transformer_config

        mcfg, tcfg = resolve_seq2seq_transformer_config(**sizes, train=train)
    else:
        mcfg, tcfg = resolve_seq2seq_config(**sizes, model={"attention": model == "seq2seq-attn"}, train=train)
    return {"model": model, "size": size, "budget": budget, "model_config": mcfg.to_dict(),
            "train_config": tcfg.to_dict()}


def translator_label(settings: dict) -> str:
    if settings["model"] == "seq2seq-transformer":
        return f"Transformer encoder-decoder ({settings['size']})"
    return f"Seq2Seq{' + attention' if settings['model_config']['attention'] else ''} ({settings['size']})"


def translator_row(settings: dict, par, checkpoint: Path, *, log=None, warn=None) -> tuple:
    """Train (or continue) one translator under its budget and score its conditional perplexity."""
    from corpora.errors import InputError
    from neural.checkpoint import best_path, load_model, training_seconds, load_checkpoint
    from neural.config import TrainConfig
    from neural.models import build_model
    from neural.training.seq2seq import Seq2SeqTrainer
    from neural.seq2seq.translate import conditional_ppl

    row = {"id": settings["model"], "family": "seq2seq", "model": settings["model"],
           "label": translator_label(settings), "order": None,
           "settings": settings, "conditional": True, "train_pairs": par.sizes()["train"]["pairs"],
           "size_unit": "parameters", "budget": settings["budget"], "note": None, "error": None,
           "valid": None, "test": None, "is_distribution": True}
    tcfg = TrainConfig.from_dict(settings["train_config"])
    budget_s = 60.0 * settings["budget"]["minutes"] if settings["budget"].get("minutes") else None
    row["budget_seconds"] = budget_s

    def quiet(msg: str) -> None:
        if log is not None:
            log(msg)
        elif warn is not None and msg.startswith(("note:", "error:")):
            warn(f"  [{row['id']}] {msg}")

    n_eval = sum(par.sizes()[s]["tgt_tokens"] + par.sizes()[s]["pairs"] for s in ("valid", "test"))
    kw = dict(progress=False, log=quiet, reserve_tokens=n_eval, data_info={"corpus": par.name, "split_seed": 0})
    train, valid = par.encode("train"), par.encode("valid")
    t0 = time.perf_counter()
    try:
        if checkpoint.exists():  # an interrupted run of exactly these settings: continue it
            done = training_seconds(load_checkpoint(checkpoint).get("train"))
            over = {} if tcfg.time_budget is None else {"time_budget": max(0.05, tcfg.time_budget - done / 60.0)}
            trainer = Seq2SeqTrainer.resume(checkpoint, train, valid, vocab=par.tgt_vocab, overrides=over,
                                            clock_start=t0, **kw)
            row["note"] = f"continued an interrupted run ({done:.0f} s done before)"
        else:
            model = build_model("seq2seq", settings["model_config"], seed=tcfg.seed)
            model.src_vocab = par.src_vocab
            trainer = Seq2SeqTrainer(model, par.tgt_vocab, train, valid, tcfg, out=checkpoint, clock_start=t0, **kw)
            done = 0.0
        from neural.training.contention import thread_rule

        with thread_rule():  # --threads > 1: one torch thread while other processes use the cores
            result = trainer.fit()
    except InputError as exc:
        row["error"] = str(exc)
        return row, {}
    if result.stopped == "interrupted":
        raise KeyboardInterrupt
    best = best_path(checkpoint)
    model = load_model(best, translator=True)[0] if best.exists() else trainer.model
    row.update({"train_seconds": done + result.seconds, "stopped": result.stopped,
                "epochs": round(result.epochs_done, 3), "steps": result.steps, "history": result.history,
                "size": int(model.n_parameters())})
    arrays = {}
    from neural.seq2seq.translate import score_pairs

    for split in ("valid", "test"):
        row[split] = conditional_ppl(model, par, split)
        arrays[split] = score_pairs(model, *par.encode(split), per_token=True) / math.log(2)
    row["wall_seconds"] = done + time.perf_counter() - t0
    return row, arrays
