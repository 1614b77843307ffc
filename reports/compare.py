"""``ngramlm compare``: train every model on one tokenization, cache each result, write the report.

A run, top to bottom:

1. load and encode the corpus once (one vocabulary for all models);
2. count the training split once at the highest order: the V^n wall and the count spectrum;
3. n-gram models, orders 1..N x smoothers;
4. neural models, each under its budget;
5. learning curves (training-set prefixes) for two count models and the best neural model;
6. linear interpolation of the best n-gram model with each neural model (weight tuned on valid);
7. a test passage scored token by token, and the Transformer's attention on it;
8. ``results.json``, then ``report.md`` and ``report.html`` rendered from it.

Every trained model is cached in ``DIR/cache`` under a hash of its settings and the
encoded corpus (:mod:`reports.cache`), so a re-run trains only what changed and an
interrupted run continues (``--resume``).
"""
from __future__ import annotations

import datetime as _dt
import json
import math
import time
from pathlib import Path
from typing import Callable, Optional


from corpora.errors import InputError
from corpora.textio import atomic_write_text, check_writable, sweep_stale_temp_files

from . import analysis
from .cache import Cache
from .data import CompareData, cache_key, load_data, prefix, toy_token_log2probs
from .jsonio import dumps
from .settings import CompareSettings

FORMAT = "ngramlm.compare"
FORMAT_VERSION = 1


class Run:
    """One comparison run writing into ``out``; ``log`` receives one line per step."""

    def __init__(self, settings: CompareSettings, out: Path, *, data_dir: Optional[str] = None,
                 data: Optional[CompareData] = None, log: Optional[Callable[[str], None]] = None,
                 verbose: bool = False, adopted: Optional[list] = None) -> None:
        self.settings = settings
        self.out = Path(out)
        self.data_dir = data_dir
        self.data = data
        self.log = log or (lambda msg: None)
        self.verbose = verbose
        self.cache = None
        self.results: dict = {}
        self.arrays: dict = {}  # row id -> {"valid": log2p, "test": log2p}
        self.counters = {"trained": 0, "cached": 0}
        self.checkpoints: dict = {}  # neural row id -> checkpoint path
        self.adopted = adopted  # inspect_checkpoints(settings, data), when the caller already checked them

    # ------------------------------------------------------------------ helpers
    def _cached_or(self, kind: str, settings: dict, compute: Callable[[str], tuple], keep_arrays: bool = True) -> dict:
        key = cache_key(kind, settings, self.data.fingerprint)
        t0 = time.perf_counter()
        row = self.cache.get(key)
        if row is not None:
            row["cached"] = True
            self.counters["cached"] += 1
            arrays = self.cache.arrays(key)
        else:
            row, arrays = compute(key)
            row["cached"] = False
            self.counters["trained"] += 1
            self.cache.put(key, {k: v for k, v in row.items() if k != "cached"}, arrays)
        row["key"] = key
        row["seconds_this_run"] = time.perf_counter() - t0
        if arrays and keep_arrays:
            self.arrays[row["id"]] = arrays
        self._log_row(row)
        return row

    def _log_row(self, row: dict) -> None:
        def ppl(split):
            s = row.get(split)
            if not s:
                return "-"
            return "inf" if s["ppl"] is None else f"{s['ppl']:.2f}"

        tag = "cached" if row["cached"] else f"{row['seconds_this_run']:.1f} s"
        msg = f"  {row['id']:<22} valid {ppl('valid'):>9}  test {ppl('test'):>9}  ({tag})"
        if row.get("error"):
            msg += f"  not estimated: {row['error']}"
        self.log(msg)

    # ------------------------------------------------------------------ the run
    def execute(self) -> dict:
        s = self.settings
        t_start = time.perf_counter()
        if self.data is None:
            self.data = load_data(s, self.data_dir)
        data = self.data
        self.cache = Cache(self.out / "cache")
        self.results = res = {
            "format": FORMAT, "version": FORMAT_VERSION, "status": "running",
            "created": _dt.datetime.now().isoformat(timespec="seconds"),
            "settings": s.to_dict(),
            "corpus": self._corpus_info(),
        }
        self.log(f"corpus {data.name}: {data.sizes['train']['tokens']:,} training tokens, "
                 f"{data.vocab.n_types:,} types; results in {self.out}")
        stages = (self._count_stage, self._ngram_stage, self._neural_stage, self._curve_stage,
                  self._interpolation_stage, self._infini_stage, self._passage_stage)
        run_stages(res, stages, out=self.out, t_start=t_start, counters=self.counters, finish=self._finish_rows)
        return res

    def _corpus_info(self) -> dict:
        d = self.data
        tok = d.vocab.tokenizer
        info = {"name": d.name, "n_types": d.vocab.n_types, "tokenizer": tok.to_dict() if tok else None,
                "fingerprint": d.fingerprint, "sizes": d.sizes,
                "truth": {k: v for k, v in d.truth.items()} or None,
                "split_policy": d.split_policy, "split_note": d.split_note}
        if d.toy_config is not None:
            from dataclasses import asdict

            info["toy_config"] = asdict(d.toy_config)
        return info

    # ------------------------------------------------------------------ stages
    def _count_stage(self) -> None:
        from ngramlm import NgramCounts

        from .ngram_part import spectrum, vwall

        d = self.data
        t0 = time.perf_counter()
        self.counts = NgramCounts.from_encoded(d["train"], order=self.settings.max_order, vocab_size=len(d.vocab))
        count_s = time.perf_counter() - t0
        self.results["vwall"] = vwall(self.counts, d.vocab, d["train"], d["test"])
        self.results["spectrum"] = spectrum(self.counts)
        self.results["counting_seconds"] = count_s
        self.log(f"counted orders 1..{self.settings.max_order} in {count_s:.1f} s; the V^n wall:")
        for r in self.results["vwall"]:
            ppl = "inf" if r["mle_ppl"] is None else f"{r['mle_ppl']:.1f}"
            self.log(f"  n={r['order']}: V^n = 10^{r['possible_log10']:.1f}, {r['distinct_train']:,} seen, "
                     f"{100 * r['test_unseen_share']:.1f}% of test n-grams unseen, MLE: {r['mle_zero_probs']:,} "
                     f"zero-probability test tokens, perplexity {ppl}")

    def _ngram_stage(self) -> None:
        from .ngram_part import ngram_row, ngram_settings

        s, d = self.settings, self.data
        self.log(f"n-gram models: orders 1..{s.max_order} x {', '.join(s.smoothers)}")
        rows = []
        for smoother in s.smoothers:
            for order in range(1, s.max_order + 1):
                rows.append(self._cached_or(
                    "ngram", ngram_settings(smoother, order),
                    lambda key, sm=smoother, o=order: ngram_row(sm, o, self.counts, d)))
        self.results["ngram"] = rows

    def _neural_stage(self) -> None:
        s, d = self.settings, self.data
        self.results["neural"] = []
        if not s.neural and not s.checkpoints:
            return
        import torch

        torch.set_num_threads(s.threads)
        from .neural_part import adopted_row, neural_row, neural_settings

        adopted = self.adopted if self.adopted is not None else inspect_checkpoints(s, d)
        for info in adopted:
            self.log(f"neural model from a checkpoint: {info['settings']['adopted']}")
            row = self._cached_or("neural", info["settings"], lambda key, info=info: adopted_row(info, d))
            self.checkpoints[row["id"]] = Path(info["settings"]["adopted"])
            self.results["neural"].append(row)
        to_train = [n for n in s.neural if n not in {info["model"] for info in adopted}]
        if not to_train:
            return
        budget = s.main_budget()
        self.log(f"neural models ({s.neural_size}, {describe_budget(budget)} each): {', '.join(to_train)}")
        for name in to_train:
            ns = neural_settings(name, s.neural_size, budget, s.seed, len(d.vocab))
            row = self._cached_or("neural", ns, lambda key, n=name, ns=ns: neural_row(
                n, ns, d, self.cache.checkpoint(key), log=self.log if self.verbose else None, warn=self.log))
            self.checkpoints[row["id"]] = self.cache.checkpoint(row["key"])
            self.results["neural"].append(row)

    def _curve_stage(self) -> None:
        from ngramlm import NgramCounts

        from .ngram_part import ngram_row, ngram_settings

        s, d = self.settings, self.data
        fractions = sorted(set(s.curve))
        series = []
        self.log(f"learning curves at {', '.join(f'{100 * f:g}%' for f in fractions)} of the training text")
        subsets = {f: prefix(d["train"], f) for f in fractions}
        top = max(s.curve_orders)
        subset_counts = {1.0: self.counts}

        def counts_of(f):  # counted once per prefix, on first use (cached models need none)
            if f not in subset_counts:
                subset_counts[f] = NgramCounts.from_encoded(subsets[f], order=top, vocab_size=len(d.vocab))
            return subset_counts[f]

        for order in s.curve_orders:
            pts = []
            for f in fractions:
                sub = subsets[f]

                def compute(key, f=f, sub=sub, order=order):
                    return ngram_row(s.curve_smoother, order, counts_of(f), d, fraction=f, train=sub)

                pts.append(self._curve_point(self._cached_or("ngram", ngram_settings(s.curve_smoother, order, f),
                                                              compute, keep_arrays=False), f))
            series.append({"id": f"{s.curve_smoother}-{order}", "label": pts[-1]["label"], "family": "ngram",
                           "points": pts})
        best = self._best("neural")
        if best is not None:
            from .neural_part import LABELS, neural_row, neural_settings

            pts = []
            budget = s.curve_budget()
            for f in fractions:
                ns = neural_settings(best["model"], s.neural_size, budget, s.seed, len(d.vocab), fraction=f)
                row = self._cached_or("neural", ns, lambda key, ns=ns, f=f: neural_row(
                    best["model"], ns, d, self.cache.checkpoint(key), train=subsets[f],
                    log=self.log if self.verbose else None, row_id=f"{best['model']}@{f:g}", warn=self.log),
                    keep_arrays=False)
                pts.append(self._curve_point(row, f))
            label = f"{LABELS[best['model']]} ({s.neural_size}), {describe_budget(budget)} per point"
            series.append({"id": best["model"], "label": label, "family": "neural", "points": pts})
        self.results["learning_curves"] = {"fractions": fractions, "series": series}

    @staticmethod
    def _curve_point(row: dict, fraction: float) -> dict:
        keep = ("id", "label", "train_tokens", "train_seconds", "size", "valid", "test", "error", "note", "cached",
                "key", "stopped", "epochs", "budget", "budget_seconds", "wall_seconds")
        return {"fraction": fraction, **{k: row.get(k) for k in keep}}

    def _best(self, family: str) -> Optional[dict]:
        rows = [r for r in self.results.get(family, []) if r.get("valid") and r["valid"]["ppl"] is not None
                and r.get("is_distribution") and r["id"] in self.arrays]
        return min(rows, key=lambda r: r["valid"]["ppl"]) if rows else None

    def _interpolation_stage(self) -> None:
        self.results["interpolation"] = []
        ng = self._best("ngram")
        if ng is None:
            return
        for nn in self.results["neural"]:
            if nn["id"] not in self.arrays:
                continue
            row = analysis.interpolate(ng, nn, self.arrays[ng["id"]], self.arrays[nn["id"]], self.data.sizes)
            self.arrays[row["id"]] = {split: analysis.mixture_log2p(row["lambda"], self.arrays[ng["id"]][split],
                                                                     self.arrays[nn["id"]][split])
                                      for split in ("valid", "test")}
            self.results["interpolation"].append(row)
            self.log(f"  {row['id']}: lambda {row['lambda']:.3f}, valid {row['valid']['ppl']:.2f}, "
                     f"test {row['test']['ppl']:.2f}")

    def _infini_stage(self) -> None:
        """n → ∞: the ∞-gram indexed on train, mixed with the best n-gram model and each neural model."""
        from .infini_part import infini_section

        partners = [r for r in [self._best("ngram")] + [r for r in self.results.get("neural", [])
                                                         if r.get("valid") and r["id"] in self.arrays] if r]
        got = infini_section(self.data, partners, self.arrays) if partners else None
        if got is None:
            self.results["infini"] = None
            return
        section, arrays = got
        self.arrays.update(arrays)
        self.results["infini"] = section
        self.log(f"  ∞-gram: mean effective n {section['mean_effective_n']:.2f} (max {section['max_effective_n']}), "
                 f"zero probability at {100 * section['zero_share']:.1f}% of test tokens")
        for r in section["rows"]:
            self.log(f"  {r['id']}: valid {r['valid']['ppl']:.2f}, test {r['test']['ppl']:.2f} "
                     f"(partner alone: test {r['partner_test']['ppl']:.2f})")

    def _passage_stage(self) -> None:
        s, d = self.settings, self.data
        ng, nn = self._best("ngram"), self._best("neural")
        transformer = next((r for r in self.results["neural"] if r["model"] == "transformer" and r.get("valid")), None)
        limit = s.passage_tokens
        if transformer is not None:
            limit = min(limit, transformer["settings"]["model_config"]["block_size"] - 1)
        test = d["test"]
        gain = None
        if ng is not None and nn is not None:
            gain = self.arrays[nn["id"]]["test"] - self.arrays[ng["id"]]["test"]
        p = analysis.choose_passage(test.starts, limit, gain)
        a, b = p["start"], p["end"]
        ids = test.ids[a:b]
        labels = [d.vocab.itos_[int(i)] for i in ids]
        rows = []
        for r in (ng, nn):
            if r is not None:
                rows.append({"id": r["id"], "label": r["label"], "family": r["family"],
                             "bits": [round(float(-x), 4) for x in self.arrays[r["id"]]["test"][a:b]]})
        for r in self.results.get("interpolation", []):
            if nn is not None and r["components"][1] == nn["id"]:
                rows.append({"id": r["id"], "label": r["label"], "family": "interpolated",
                             "bits": [round(float(-x), 4) for x in self.arrays[r["id"]]["test"][a:b]]})
        if d.toy_config is not None and b - a == int(test.starts[p["sentences"][1]] - test.starts[p["sentences"][0]]):
            sents = d.dataset.corpus.splits["test"][p["sentences"][0]:p["sentences"][1]]
            truth = [x for row in toy_token_log2probs(d.toy_config, sents) for x in row]
            rows.append({"id": "truth", "label": "true language (floor)", "family": "truth",
                         "bits": [round(-x, 4) if math.isfinite(x) else None for x in truth]})
        self.results["passage"] = {"tokens": labels, "start_token": a, "sentences": p["sentences"],
                                   "rule": p["rule"], "rows": rows}
        if transformer is not None and transformer["id"] in self.checkpoints:
            from .neural_part import attention_view

            self.results["attention"] = {"model": transformer["id"], "label": transformer["label"],
                                         **attention_view(self.checkpoints[transformer["id"]], ids, labels)}

    def _finish_rows(self) -> None:
        """Normalised rates and the distance above the floor, for every row with a test score."""
        d = self.data
        truth = d.truth.get("test")
        groups = [self.results.get(f) or [] for f in ("ngram", "neural", "interpolation")]
        groups.append((self.results.get("infini") or {}).get("rows") or [])  # the ∞-gram's mixtures
        for rows in groups:
            for r in rows:
                t = r.get("test")
                if t:
                    r["test_normalised"] = analysis.normalise(t["log2prob"] if t["ppl"] is not None else None,
                                                              d.sizes["test"])
                    r["above_floor"] = analysis.above_floor(t, truth)


def run_stages(res: dict, stages, *, out: Path, t_start: float, counters: dict,
               finish: Optional[Callable[[], None]] = None) -> None:
    """Run ``stages`` in order; whatever happens, record the status and timing and write results.json
    (an interrupted or failed run keeps what finished, and says so)."""
    try:
        for stage in stages:
            stage()
        res["status"] = "complete"
    except KeyboardInterrupt:
        res["status"] = "interrupted"
        raise
    except BaseException:
        res["status"] = "failed"
        raise
    finally:
        res["timing"] = {"total_seconds": time.perf_counter() - t_start, **counters}
        if finish is not None:
            finish()
        write_results(out, res)


def inspect_checkpoints(settings: CompareSettings, data: CompareData) -> list:
    """Check every ``--checkpoint`` against the corpus; one model name per checkpoint."""
    from .neural_part import inspect_checkpoint

    infos = [inspect_checkpoint(Path(c), data.vocab) for c in settings.checkpoints]
    seen: dict = {}
    for c, info in zip(settings.checkpoints, infos):
        if info["model"] in seen:
            raise InputError(f"two checkpoints hold a {info['model']} model ({seen[info['model']]} and {c})",
                             path=c, fix="pass one checkpoint per model")
        seen[info["model"]] = c
    return infos


def describe_budget(budget: dict) -> str:
    if "minutes" in budget:
        return f"{budget['minutes']:g} min"
    return f"{budget['epochs']} epoch{'s' if budget['epochs'] != 1 else ''}"


# ---------------------------------------------------------------------------- results.json
def write_results(out: Path, results: dict) -> None:
    atomic_write_text(Path(out) / "results.json", dumps(results))


def read_results(out: Path) -> dict:
    p = Path(out) / "results.json"
    if not p.exists():
        raise InputError("no results.json in this directory", path=out,
                         fix="run `ngramlm compare --out DIR` first, or pass the folder it wrote")
    try:
        data = json.loads(p.read_text("utf-8"))
    except ValueError as exc:
        raise InputError(f"results.json is not valid JSON ({exc})", path=p, fix="re-run `ngramlm compare`") from None
    if not isinstance(data, dict) or data.get("format") not in (FORMAT, "ngramlm.compare.parallel"):
        raise InputError("not a comparison results file", path=p, fix="pass the --out folder of `ngramlm compare`")
    return data


# ---------------------------------------------------------------------------- the output folder
def prepare_out_dir(out: Path, *, force: bool, resume: bool) -> Optional[CompareSettings]:
    """Check the output folder; with ``resume``, return the settings the run was started with."""
    out = Path(out)
    if force and resume:
        raise InputError("--force and --resume both given", fix="--resume continues a run; --force re-runs it")
    exists = out.exists() and (not out.is_dir() or any(out.iterdir()))
    if out.exists() and not out.is_dir():
        raise InputError("the output path is a file, not a folder", path=out, fix="choose another --out")
    if resume:
        check_writable(out / "results.json", what="results file", create_parents=False)
        sweep_stale_temp_files(out)
        run = out / "run.json"
        if not run.exists():
            raise InputError("nothing to resume: no run.json in this folder", path=out,
                             fix="start the run without --resume")
        return CompareSettings.from_dict(json.loads(run.read_text("utf-8"))["settings"]).validate()
    if exists and not force:
        raise InputError("the output folder exists and is not empty", path=out,
                         fix="pass --resume to continue that run, --force to re-run it (unchanged models come "
                             "from its cache), or choose another --out")
    # Before any model is trained: the folder must be writable (checked without creating it, so
    # an unknown corpus leaves no empty run folder behind).
    check_writable(out / "results.json", what="results file", create_parents=False)
    if force:
        sweep_stale_temp_files(out)  # temp files of an earlier run that was killed with -9
    return None


def start_run(out: Path, settings: CompareSettings) -> None:
    out.mkdir(parents=True, exist_ok=True)
    atomic_write_text(out / "run.json", json.dumps({"format": FORMAT, "settings": settings.to_dict(),
                                                    "started": _dt.datetime.now().isoformat(timespec="seconds")},
                                                   indent=1))
