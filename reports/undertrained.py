"""When a neural model's numbers are not a result: the one rule, for every section, figure and table.

A model that stopped before it read the training text once, or that is worse on valid than the unigram
model on the same tokens (it has not learned word frequencies yet), is *undertrained*: the reports flag
it wherever it appears (its row, the mixtures that include it, its attention maps), and the HTML
self-test fails on it.  A building block (floor 1 of ``reports``): sections, figures and pages all ask
here, so none of them imports a higher floor to find out.
"""
from __future__ import annotations

from typing import Optional

from .formatting import fmt_fixed


def undertrained_reason(row: dict, unigram_valid_ppl: Optional[float]) -> Optional[str]:
    """Why one neural row is not a result, or None: it stopped before one epoch, or its valid perplexity
    is above the unigram model's on the same tokens."""
    valid = (row.get("valid") or {}).get("ppl")
    if row.get("stopped") != "adopted" and row.get("epochs") is not None and row["epochs"] < 1:
        return f"stopped after {fmt_fixed(row['epochs'], 2)} epochs, before it read the training text once"
    if valid is not None and unigram_valid_ppl is not None and valid > unigram_valid_ppl:
        return (f"worse than the unigram model on valid ({fmt_fixed(valid, 2)} against "
                f"{fmt_fixed(unigram_valid_ppl, 2)}): it has not learned word frequencies yet")
    return None


def undertrained(results: dict) -> dict:
    """Neural row id -> why its numbers are not a result (:func:`undertrained_reason` against the best
    unigram model of the run)."""
    unigram = [r["valid"]["ppl"] for r in results.get("ngram", []) if r.get("order") == 1 and r.get("valid")
               and r["valid"].get("ppl") is not None and r.get("is_distribution")]
    best_unigram = min(unigram) if unigram else None
    out = {}
    for r in results.get("neural", []):
        why = undertrained_reason(r, best_unigram)
        if why:
            out[r["id"]] = why
    return out
