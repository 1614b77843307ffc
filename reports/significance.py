"""When a report may call a value "best": the one rule every page applies (the comparison report's
tables and summary, the tokenizations ranking, the parallel corpus's BLEU grid).

A value is the best only where every other candidate lies outside its bootstrap 95 % interval (on the
far side: above it for perplexities and bits, below it for BLEU); the candidates inside it are a tie,
said as one, and none is starred.  A candidate without an interval ties only with an equal value.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Hashable, Optional, Sequence


@dataclass
class Verdict:
    """The outcome: ``best`` (the key to star, or None for a tie or no candidate), ``top`` (the key of
    the top value either way), ``tied`` (the other keys inside its interval)."""

    best: Optional[Hashable] = None
    top: Optional[Hashable] = None
    tied: list = field(default_factory=list)

    @property
    def is_tie(self) -> bool:
        return bool(self.tied)


def best_or_tie(candidates: Sequence[tuple], higher_is_better: bool = False) -> Verdict:
    """``candidates``: ``(key, value, interval)`` with ``interval`` a ``(low, high)`` pair or None; values
    that are None are left out.  Returns the :class:`Verdict`."""
    cands = [(k, v, ci) for k, v, ci in candidates if v is not None]
    if not cands:
        return Verdict()
    pick = max if higher_is_better else min
    top_key, top_v, top_ci = pick(cands, key=lambda c: c[1])
    if higher_is_better:
        bound = top_ci[0] if top_ci else top_v
        tied = [k for k, v, _ in cands if k != top_key and v >= bound]
    else:
        bound = top_ci[1] if top_ci else top_v
        tied = [k for k, v, _ in cands if k != top_key and v <= bound]
    return Verdict(best=None if tied else top_key, top=top_key, tied=tied)
