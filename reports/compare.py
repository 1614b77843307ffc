"""``ngramlm compare``: train every model on one tokenization, cache each result, write the report.

A run, top to bottom:

1. load and encode the corpus once (one vocabulary for all models);
2. count the training split once at the highest order: the V^n wall and the count spectrum;
3. n-gram models, orders 1..N x smoothers;
4. neural models, each under its budget;
5. each section of :mod:`reports.sections` in the report's order: learning curves, interpolation of
   the best n-gram with each neural model, a test passage token by token, the Transformer's
   attention on it, the ∞-gram;
6. ``results.json``, then ``report.md`` and ``report.html`` rendered from it.

Every trained model is cached in ``DIR/cache`` under a hash of its settings and the
encoded corpus (:mod:`reports.experiments.result_cache`), so a re-run trains only what changed and an
interrupted run continues (``--resume``).
"""
from __future__ import annotations

import datetime as _dt
import json
import time
from pathlib import Path
from typing import Callable, Optional


from corpora.errors import InputError
from corpora.textio import atomic_write_text, check_writable, sweep_stale_temp_files

from .experiments import analysis, bootstrap
from .experiments.data import CompareData, load_data
from .formatting import describe_budget
from .experiments.run import RunBase
from .experiments.settings import CompareSettings

FORMAT = "ngramlm.compare"
FORMAT_VERSION = 1


class Run(RunBase):
    """One comparison run writing into ``out``; ``log`` receives one line per step.

    The model families (counts, the n-gram grid, the neural models) are its stages; then each section of
    :mod:`reports.sections` computes what it shows, in the report's order."""

    FORMAT = FORMAT
    FORMAT_VERSION = FORMAT_VERSION

    def __init__(self, settings: CompareSettings, out: Path, *, data_dir: Optional[str] = None,
                 data: Optional[CompareData] = None, log: Optional[Callable[[str], None]] = None,
                 verbose: bool = False, adopted: Optional[list] = None) -> None:
        super().__init__(settings, out, data_dir=data_dir, log=log, verbose=verbose)
        self.data = data
        self.checkpoints: dict = {}  # neural row id -> checkpoint path
        self.adopted = adopted  # inspect_checkpoints(settings, data), when the caller already checked them

    # ------------------------------------------------------------------ RunBase
    def load(self) -> None:
        if self.data is None:
            self.data = load_data(self.settings, self.data_dir)

    def header(self) -> dict:
        return {"corpus": self._corpus_info()}

    def intro(self) -> str:
        d = self.data
        return (f"corpus {d.name}: {d.sizes['train']['tokens']:,} training tokens, {d.vocab.n_types:,} types; "
                f"results in {self.out}")

    def stages(self) -> tuple:
        from .sections import SECTIONS

        def section_stage(sec):
            def stage():
                sec.compute(self)
            stage.stage_name = sec.name
            return stage

        return (self._count_stage, self._ngram_stage, self._neural_stage) + tuple(
            section_stage(sec) for sec in SECTIONS if sec.compute is not None)

    def finish(self) -> None:
        self._finish_rows()

    def best(self, family: str) -> Optional[dict]:
        """The row of ``family`` with the best validation perplexity (a distribution, scored token by token)."""
        rows = [r for r in self.results.get(family, []) if r.get("valid") and r["valid"]["ppl"] is not None
                and r.get("is_distribution") and r["id"] in self.arrays]
        return min(rows, key=lambda r: r["valid"]["ppl"]) if rows else None

    def transformer(self) -> Optional[dict]:
        """The Transformer's row, when one was trained and scored (the attention view reads it)."""
        return next((r for r in self.results.get("neural", []) if r["model"] == "transformer" and r.get("valid")),
                    None)

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

        from .experiments.ngram_part import spectrum, vwall, zipf

        d = self.data
        t0 = time.perf_counter()
        self.counts = NgramCounts.from_encoded(d["train"], order=self.settings.max_order, vocab_size=len(d.vocab))
        count_s = time.perf_counter() - t0
        self.results["vwall"] = vwall(self.counts, d.vocab, d["train"], d["test"])
        self.results["spectrum"] = spectrum(self.counts)
        self.results["zipf"] = zipf(self.counts, d.vocab)
        self.results["counting_seconds"] = count_s
        self.log(f"counted orders 1..{self.settings.max_order} in {count_s:.1f} s; the V^n wall:")
        for r in self.results["vwall"]:
            ppl = "inf" if r["mle_ppl"] is None else f"{r['mle_ppl']:.1f}"
            self.log(f"  n={r['order']}: V^n = 10^{r['possible_log10']:.1f}, {r['distinct_train']:,} seen, "
                     f"{100 * r['test_unseen_share']:.1f}% of test n-grams unseen, MLE: {r['mle_zero_probs']:,} "
                     f"zero-probability test tokens, perplexity {ppl}")

    def _ngram_stage(self) -> None:
        s = self.settings
        self.log(f"n-gram models: orders 1..{s.max_order} x {', '.join(s.smoothers)}")
        self.results["ngram"] = self.ngram_rows(self.counts)

    def _neural_stage(self) -> None:
        s, d = self.settings, self.data
        self.results["neural"] = []
        if not s.neural and not s.checkpoints:
            return
        import torch

        torch.set_num_threads(s.threads)
        from .experiments.neural_part import adopted_row

        adopted = self.adopted if self.adopted is not None else inspect_checkpoints(s, d)
        for info in adopted:
            self.log(f"neural model from a checkpoint: {info['settings']['adopted']}")
            row = self._cached_or("neural", info["settings"], lambda key, info=info: adopted_row(info, d))
            self.checkpoints[row["id"]] = Path(info["settings"]["adopted"])
            self.results["neural"].append(row)
        to_train = [n for n in s.neural if n not in {info["model"] for info in adopted}]
        if not to_train:
            return
        self.log(f"neural models ({s.neural_size}, {describe_budget(s.main_budget())} each): {', '.join(to_train)}")
        for row in self.neural_rows(to_train):
            self.checkpoints[row["id"]] = self.cache.checkpoint(row["key"])
            self.results["neural"].append(row)

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
                    r["test_ci"] = bootstrap.test_intervals(d, (self.arrays.get(r["id"]) or {}).get("test"))


def inspect_checkpoints(settings: CompareSettings, data: CompareData) -> list:
    """Check every ``--checkpoint`` against the corpus; one model name per checkpoint."""
    from .experiments.neural_part import inspect_checkpoint

    infos = [inspect_checkpoint(Path(c), data.vocab) for c in settings.checkpoints]
    seen: dict = {}
    for c, info in zip(settings.checkpoints, infos):
        if info["model"] in seen:
            raise InputError(f"two checkpoints hold a {info['model']} model ({seen[info['model']]} and {c})",
                             path=c, fix="pass one checkpoint per model")
        seen[info["model"]] = c
    return infos


# ---------------------------------------------------------------------------- results.json
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
