"""Section: perplexity against size -- the best back-off n-gram model entropy-pruned to 50 %, 10 % and
1 % of its n-grams (``ngramlm prune --size``), each with its test perplexity and the bytes of the
KenLM binary a decoder would load (``build-binary trie -q 8 -b 8 -a 22``, the format speech
recognisers ship).  The pruning is :mod:`ngramlm.tools.prune_size`'s."""
from __future__ import annotations

import time
from typing import Optional

from .. import plots
from ..formatting import fmt_fixed
from ..html_tables import Cell, Row, Table
from .base import Section, fragment

FRACTIONS = (1.0, 0.5, 0.1, 0.01)


def _model_for(run):
    """The best back-off row's smoother and order (the model a recogniser would prune), or None."""
    from ngramlm.smoothing import backoff_smoothers

    best = run.best("ngram")
    if best is None or best["model"] not in backoff_smoothers() or best["model"] == "stupid" or best["order"] < 2:
        rows = [r for r in run.results.get("ngram", []) if r.get("valid") and r["model"] in ("mkn", "kn")
                and r["order"] >= 2 and r["valid"]["ppl"] is not None]
        best = min(rows, key=lambda r: r["valid"]["ppl"]) if rows else None
    return best


def size_curve(model, data, fractions=FRACTIONS, log=lambda s: None) -> dict:
    """Prune ``model`` to each fraction of its n-grams (orders >= 2); score valid and test; size the
    KenLM trie binary of each.  Returns the section's results."""
    import numpy as np

    from ngramlm import NgramLM
    from ngramlm.kenlm.write import BinaryOptions, trie_bytes
    from ngramlm.tools.prune_size import prune_scores, prune_with, search_threshold

    t0 = time.perf_counter()
    scores = prune_scores(model)
    score_seconds = time.perf_counter() - t0
    total = int(sum(model.n_ngrams_[1:]))
    rows = []
    for frac in fractions:
        t = time.perf_counter()
        if frac >= 1.0:
            pruned, threshold = model, 0.0
        else:
            limit = int(frac * total)
            found = search_threshold(scores, lambda keep: sum(int(np.count_nonzero(m)) for m in keep[1:]) <= limit,
                                     what=f"{frac:.0%} of the n-grams")
            pruned = NgramLM.from_tables(prune_with(model, found.keep), order=model.order_,
                                         smoothing=model.smoothing)
            threshold = found.threshold
        seconds = time.perf_counter() - t
        binary = len(trie_bytes(pruned, BinaryOptions(prob_bits=8, backoff_bits=8, array_bits=22)))
        row = {"fraction": frac, "ngrams": int(sum(pruned.n_ngrams_[1:])), "unigrams": int(pruned.n_ngrams_[0]),
               "per_order": [int(c) for c in pruned.n_ngrams_], "threshold": threshold,
               "kenlm_trie_q8_bytes": binary, "prune_seconds": seconds}
        from ..experiments.ngram_part import split_scores

        for split in ("valid", "test"):
            row[split] = split_scores(pruned, data[split])[0]
        rows.append(row)
        log(f"  pruned to {frac:.0%}: {row['ngrams']:,} n-grams, test ppl {row['test']['ppl']:.2f}, "
            f"KenLM trie {binary / 1e6:.2f} MB")
    return {"smoother": model.smoothing, "order": model.order_, "score_seconds": score_seconds, "rows": rows}


def compute(run) -> None:
    if not getattr(run.settings, "prune_curve", True):
        run.results["pruning"] = None
        return
    best = _model_for(run)
    if best is None:
        run.results["pruning"] = None
        return
    from corpora.errors import InputError
    from ngramlm.counts import NgramCounts

    from ..experiments.data import cache_key
    from ..experiments.ngram_part import fit_ngram

    d = run.data
    key = cache_key("pruning", {"smoother": best["model"], "order": best["order"], "fractions": list(FRACTIONS)},
                    run.fingerprint)
    cached = run.cache.get(key)
    if cached is None:
        # The model as the grid fitted it (fallback discounts where the grid needed them).
        counts = NgramCounts.from_encoded(d["train"], order=best["order"], vocab_size=len(d.vocab))
        lm, _, error = fit_ngram(best["model"], best["order"], counts, d["train"], d.vocab, d["valid"])
        try:
            if lm is None:
                raise InputError(error or "the model could not be estimated")
            cached = size_curve(lm, d, log=run.log)
        except InputError as exc:  # a text too small to prune to 1 %: the section says so, the run goes on
            run.log(f"  pruning curve not computed: {exc.message}")
            run.results["pruning"] = None
            return
        run.cache.put(key, cached)
    cached["label"] = best["label"]
    run.results["pruning"] = cached


def context(results: dict) -> dict:
    sec = results.get("pruning")
    if not sec:
        return {"pruning": None}
    full = sec["rows"][0]
    rows = [{"share": f"{100 * r['fraction']:g} %", "ngrams": f"{r['ngrams']:,}",
             "test": fmt_fixed(r["test"]["ppl"], 2), "test_v": r["test"]["ppl"],
             "valid": fmt_fixed(r["valid"]["ppl"], 2),
             "rise": ("–" if r is full else f"{100 * (r['test']['ppl'] / full['test']['ppl'] - 1):+.1f} %"),
             "mb": f"{r['kenlm_trie_q8_bytes'] / 1e6:.2f}", "mb_v": r["kenlm_trie_q8_bytes"],
             "threshold": "–" if not r["threshold"] else f"{r['threshold']:.2e}"} for r in sec["rows"]]
    table = Table("pruning", PRUNING_HEADER, [Row([
        Cell(r["share"]), Cell(r["ngrams"], cls="num"), Cell(r["test"], value=r["test_v"], cls="num"),
        Cell(r["rise"], cls="num"), Cell(r["valid"], cls="num"), Cell(r["mb"], value=r["mb_v"], cls="num"),
        Cell(r["threshold"], cls="num")], cls="ngram") for r in rows], layout="body")
    return {"pruning": {"label": sec["label"], "rows": rows, "unigrams": f"{full['unigrams']:,}", "table": table}}


PRUNING_HEADER = ["n-grams kept", "n-grams (orders ≥ 2)", "test ppl", "vs full", "valid ppl", "KenLM trie (MB)",
                  "threshold"]


def figure(results: dict) -> Optional[bytes]:
    sec = results.get("pruning")
    if not sec:
        return None
    fig, ax = plots.plt.subplots(figsize=(6.4, 3.6))
    x = [r["ngrams"] for r in sec["rows"]]
    y = [r["test"]["ppl"] for r in sec["rows"]]
    ax.plot(x, y, marker="o", color=plots.FAMILY_COLOURS["ngram"])
    for r, xi, yi in zip(sec["rows"], x, y):
        mb = r["kenlm_trie_q8_bytes"] / 1e6
        ax.annotate(f"{100 * r['fraction']:g} % · {mb:.1f} MB" if mb >= 10 else f"{100 * r['fraction']:g} % · {mb:.2f} MB",
                    (xi, yi), textcoords="offset points", xytext=(5, 5), fontsize=7)
    ax.set_xscale("log")
    ax.margins(x=0.15, y=0.15)  # room for the labels
    ax.set_xlabel("n-grams of orders ≥ 2 (log scale)")
    ax.set_ylabel("test perplexity")
    ax.set_title(f"{sec['label']}: perplexity against size (entropy pruning)", fontsize=9)
    ax.grid(alpha=0.3)
    return plots.png_bytes(fig)


TITLE = "Perplexity against size: pruning"
HTML_TITLE = TITLE


SECTION = Section(name="pruning", anchor="pruning", title=TITLE, html_title=HTML_TITLE,
                  md=fragment("pruning.md.j2"), html=fragment("pruning.html.j2"),
                  compute=compute, context=context,
                  plots={"pruning": ("Perplexity against size: entropy pruning", figure)})
