"""What every comparison run shares, monolingual (:class:`reports.compare.Run`) or parallel
(:class:`reports.experiments.parallel_compare.ParallelRun`): the settings and output folder, the model cache, one
cached row per trained model, the n-gram grid and the neural LMs over one encoded text, and the stages
run in order with ``results.json`` written whatever happens.

A run subclass says how its data loads (:meth:`RunBase.load`), what ``results.json`` starts with
(:meth:`RunBase.header`) and which stages it runs (:meth:`RunBase.stages`).
"""
from __future__ import annotations

import datetime as _dt
import time
from pathlib import Path
from typing import Callable, Optional

from corpora.textio import atomic_write_text

from .result_cache import Cache
from .data import cache_key
from ..jsonio import dumps


class RunBase:
    FORMAT = ""
    FORMAT_VERSION = 1
    KEEP_ARRAYS = True  # keep every row's per-token log2 probabilities for the analyses after training

    def __init__(self, settings, out: Path, *, data_dir: Optional[str] = None,
                 log: Optional[Callable[[str], None]] = None, verbose: bool = False) -> None:
        self.settings = settings
        self.out = Path(out)
        self.data_dir = data_dir
        self.data = None  # a reports.experiments.data.CompareData: the encoded text every model is scored on
        self.log = log or (lambda msg: None)
        self.verbose = verbose
        self.cache: Optional[Cache] = None
        self.results: dict = {}
        self.arrays: dict = {}  # row id -> {"valid": log2p, "test": log2p}
        self.counters = {"trained": 0, "cached": 0}
        # When the command started (time.perf_counter()), when it did more before execute() (reading the
        # corpus, checking checkpoints): the run's total counts from there, not from execute().
        self.started: Optional[float] = None

    # ------------------------------------------------------------------ what a run says
    def load(self) -> None:
        """Load and encode the data (``self.data``; a parallel run also its pairs)."""
        raise NotImplementedError

    def header(self) -> dict:
        """The run-specific part of ``results.json``'s head (``corpus`` and the sections' empty lists)."""
        raise NotImplementedError

    def intro(self) -> str:
        raise NotImplementedError

    def stages(self) -> tuple:
        raise NotImplementedError

    def finish(self) -> None:
        """Called once the stages ended (or failed), before ``results.json`` is written; not after an
        interrupt, which writes what finished at once (a resumed run computes it)."""

    @property
    def fingerprint(self) -> str:
        return self.data.fingerprint

    # ------------------------------------------------------------------ the run
    def execute(self) -> dict:
        t_start = self.started if self.started is not None else time.perf_counter()
        self.load()
        self.counters["stages"] = {"load": time.perf_counter() - t_start}
        self.cache = Cache(self.out / "cache")
        self.results = {"format": self.FORMAT, "version": self.FORMAT_VERSION, "status": "running",
                        "created": _dt.datetime.now().isoformat(timespec="seconds"),
                        "settings": self.settings.to_dict(), **self.header()}
        self.log(self.intro())
        run_stages(self.results, self.stages(), out=self.out, t_start=t_start, counters=self.counters,
                   finish=self.finish)
        return self.results

    # ------------------------------------------------------------------ one cached row per model
    def _cached_or(self, kind: str, settings: dict, compute: Callable[[str], tuple], keep_arrays: bool = True,
                   fingerprint: Optional[str] = None) -> dict:
        """The row of the model ``settings`` describe: from the cache, else ``compute(key)`` (then cached).
        ``fingerprint``: the text it is trained and scored on, when not the run's own (another tokenization)."""
        key = cache_key(kind, settings, fingerprint or self.fingerprint)
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
        if arrays and keep_arrays and self.KEEP_ARRAYS:
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

    # ------------------------------------------------------------------ the model families on self.data
    def ngram_rows(self, counts) -> list:
        """Orders 1..max_order x the smoothers, each a cached row, from ``counts`` of the training text."""
        from .ngram_part import ngram_row, ngram_settings

        s, d = self.settings, self.data
        return [self._cached_or("ngram", ngram_settings(smoother, order),
                                lambda key, sm=smoother, o=order: ngram_row(sm, o, counts, d))
                for smoother in s.smoothers for order in range(1, s.max_order + 1)]

    def neural_rows(self, names) -> list:
        """The neural LMs ``names`` trained under the run's main budget (or from the cache)."""
        from .neural_part import neural_row, neural_settings

        s, d = self.settings, self.data
        out = []
        for name in names:
            ns = neural_settings(name, s.neural_size, s.main_budget(), s.seed, len(d.vocab))
            out.append(self._cached_or("neural", ns, lambda key, n=name, ns=ns: neural_row(
                n, ns, d, self.cache.checkpoint(key), log=self.log if self.verbose else None, warn=self.log)))
        return out


def run_stages(res: dict, stages, *, out: Path, t_start: float, counters: dict,
               finish: Optional[Callable[[], None]] = None) -> None:
    """Run ``stages`` in order; whatever happens, record the status and timing and write results.json
    (an interrupted or failed run keeps what finished, and says so).

    An interrupt (Ctrl-C, SIGTERM: KeyboardInterrupt) must stop the run within a second or two, whenever
    it comes: ``finish`` (its derived figures, e.g. the bootstrap intervals of every row, took 1.5 s and
    more) runs after the stages, not in the cleanup, so an interrupt skips it or stops it; and
    results.json is written with further signals held off, so a second Ctrl-C cannot leave it unwritten."""
    held, finishing = None, False
    try:
        spent = counters.setdefault("stages", {})
        for stage in stages:
            t0 = time.perf_counter()
            stage()
            name = stage_name(stage)
            spent[name] = spent.get(name, 0.0) + time.perf_counter() - t0
        finishing = True
        if finish is not None:
            t0 = time.perf_counter()
            finish()
            spent["intervals"] = time.perf_counter() - t0
        res["status"] = "complete"
    except KeyboardInterrupt:
        res["status"] = "interrupted"
        held = _hold_signals()  # a second Ctrl-C from here on is ignored until results.json is written
        raise
    except BaseException:
        res["status"] = "failed"
        raise
    finally:
        try:
            res["timing"] = {"total_seconds": time.perf_counter() - t_start, **counters}
            if res["status"] == "failed" and not finishing and finish is not None:
                finish()  # a stage failed: the rows that finished still get their figures
            write_results(out, res)
        finally:
            _release_signals(held)


def stage_name(stage) -> str:
    """A stage's name in ``timing.stages``: its ``stage_name`` attribute, else the function's name without
    its leading underscore and ``_stage`` ("_ngram_stage" -> "ngram")."""
    name = getattr(stage, "stage_name", None) or getattr(stage, "__name__", "stage")
    return name.strip("_").removesuffix("_stage") or "stage"


def _ignore_signal(signum, frame) -> None:
    pass


def _hold_signals() -> Optional[dict]:
    """Ignore SIGINT and SIGTERM (in the main thread; else None): the previous handlers, to restore."""
    import signal
    import threading

    if threading.current_thread() is not threading.main_thread():
        return None
    return {sig: signal.signal(sig, _ignore_signal) for sig in (signal.SIGINT, signal.SIGTERM)}


def _release_signals(held: Optional[dict]) -> None:
    if held:
        import signal

        for sig, handler in held.items():
            signal.signal(sig, handler)


def write_results(out: Path, results: dict) -> None:
    atomic_write_text(Path(out) / "results.json", dumps(results))
