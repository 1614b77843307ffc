"""How the reports print numbers, budgets and units (shared by the report's head and its sections)."""
from __future__ import annotations

import math
from typing import Optional


def fmt_fixed(x: float, digits: int = 3, sign: bool = False) -> str:
    """``x`` with ``digits`` decimals (``sign``: always with a sign), never as negative zero:
    -0.0, and any negative value that rounds to zero (-0.00004 at 3 digits), print as 0.000."""
    text = f"{x:+.{digits}f}" if sign else f"{x:.{digits}f}"
    if text[0] == "-" and float(text) == 0.0:
        text = ("+" if sign else "") + text[1:]
    return text


def fmt_ppl(score: Optional[dict]) -> str:
    if not score:
        return "–"
    if score.get("ppl") is None:
        return "∞"
    return fmt_fixed(score["ppl"], 2)


def fmt_num(x, digits: int = 3) -> str:
    if x is None:
        return "–"
    if isinstance(x, int):
        return f"{x:,}"
    return fmt_fixed(x, digits)


def fmt_size(n: Optional[int]) -> str:
    if n is None:
        return "–"
    for unit, div in (("G", 1e9), ("M", 1e6), ("k", 1e3)):
        if n >= div:
            return f"{n / div:.2f}{unit}"
    return str(n)


def fmt_seconds(s: Optional[float], unit: Optional[str] = None) -> str:
    """Seconds as "12.3 s" or "2.1 min"; ``unit`` ("s" or "min") fixes the unit, so that a column of
    times reads in one unit (:func:`time_unit`); such a column in minutes keeps two decimals below ten
    minutes (0.25 min, 2.17 min), so its rows still differ."""
    if s is None:
        return "–"
    if unit is None:
        return f"{fmt_fixed(s, 1)} s" if s < 120 else f"{fmt_fixed(s / 60, 1)} min"
    if unit == "s":
        return f"{fmt_fixed(s, 1)} s"
    return f"{fmt_fixed(s / 60, 2 if s < 600 else 1)} min"


def time_unit(seconds) -> str:
    """The one unit of a column of times: minutes when any reaches two minutes, else seconds."""
    return "min" if any(s is not None and s >= 120 for s in seconds) else "s"


def fmt_setting(value) -> str:
    """A setting as a reader writes it on the command line: lists comma-separated, no Python
    ``None``/``True``/``[]`` (an unset option reads "default" or "none")."""
    if value is None:
        return "default"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, (list, tuple)):
        return ", ".join(fmt_setting(v) for v in value) if value else "none"
    if isinstance(value, float):
        return f"{value:g}"
    if isinstance(value, dict):
        return ", ".join(f"{k} {fmt_setting(v)}" for k, v in value.items()) if value else "none"
    return str(value)


def fmt_share(x: float) -> str:
    """A share as a percentage: 41.2%, 0.37%, 2.1e-05%."""
    pct = 100.0 * x
    if pct == 0:
        return "0%"
    if pct >= 1:
        return f"{pct:.1f}%"
    if pct >= 0.01:
        return f"{pct:.2f}%"
    return f"{pct:.1e}%"


def fmt_power(log10: float) -> str:
    e = math.floor(log10)
    return f"{10 ** (log10 - e):.2f}e{e}"


def fmt_budget_spec(budget: Optional[dict]) -> Optional[str]:
    """``{"minutes": 0.6}`` -> "0.6 min"; ``{"epochs": 1}`` -> "1 epoch"; None when unknown."""
    if not budget:
        return None
    if budget.get("minutes") is not None:
        return f"{budget['minutes']:g} min"
    if budget.get("epochs") is not None:
        e = budget["epochs"]
        return f"{e:g} epoch{'' if e == 1 else 's'}"
    return None


def fmt_budget(r: dict, unit: Optional[str] = None) -> str:
    """A neural row's budget and what the model actually cost in this run (training and
    evaluation: ``wall_seconds``), e.g. "0.6 min / 0.63 min (+5 %)" or "1 epoch / 12.3 s".

    Rows written before ``budget`` / ``wall_seconds`` existed fall back to the budget in
    their settings and show "–" for what is unknown; a cached row cost nothing but the
    cache read ("cached"); a model trained elsewhere was only scored here.
    """
    budget = r.get("budget") or (r.get("settings") or {}).get("budget")
    spec = fmt_budget_spec(budget)
    wall = r.get("wall_seconds")
    if wall is None:
        actual = "cached" if r.get("cached") is True else None
        if spec is None and actual is None:
            return "–"
        return f"{spec or '–'} / {actual or '–'}"
    if r.get("stopped") == "adopted":  # trained outside this run: here it was only scored
        return f"{spec or '–'} / {fmt_seconds(wall, unit)} (scoring only)"
    by_minutes = bool(budget) and budget.get("minutes") is not None
    seconds = r.get("budget_seconds")
    if seconds is None and by_minutes:
        seconds = 60.0 * budget["minutes"]
    if by_minutes:  # the budget's own unit, so budget and actual compare at a glance
        minutes = wall / 60.0
        actual = f"{fmt_fixed(minutes, 2 if minutes < 10 else 1)} min"
    else:
        actual = fmt_seconds(wall, unit)
    if seconds:
        return f"{spec or '–'} / {actual} ({fmt_fixed(100.0 * (wall / seconds - 1.0), 0, sign=True)} %)"
    return f"{spec or '–'} / {actual}"


# What the predicted tokens are, per tokenizer kind: (the tokens of a split, the types of the
# vocabulary besides <unk> and </s>).  Plain text: the templates quote the symbols themselves.
TOKEN_UNITS = {
    "whitespace": ("words + sentence ends", "words"),
    "regex": ("words, numbers and punctuation marks + sentence ends", "words, numbers, punctuation marks"),
    "char": ("characters + sentence ends, a space being the token {space}", "characters, the space symbol {space}"),
    "cjk": ("Han characters, other words and punctuation marks + sentence ends",
            "Han characters, other words, punctuation marks"),
}


def token_units(tokenizer: Optional[dict]) -> dict:
    """How the report names the predicted tokens of a run tokenized by ``tokenizer`` (its spec):
    ``{"tokens": ..., "types": ...}``."""
    tok = tokenizer or {}
    tokens, types = TOKEN_UNITS.get(tok.get("kind") or "whitespace", TOKEN_UNITS["whitespace"])
    space = tok.get("space_symbol") or "▁"
    return {"tokens": tokens.format(space=space), "types": types.format(space=space)}


SHORT = {"mle": "MLE", "laplace": "Laplace", "addk": "add-k", "wb": "Witten-Bell", "jm": "Jelinek-Mercer",
         "katz": "Katz", "absolute": "abs. discounting", "kn": "KN", "mkn": "MKN"}
# A mixture whose weight on one part is at most this is that other part alone, and is said to be so.
NEGLIGIBLE_WEIGHT = 0.01


def component_label(row: Optional[dict]) -> str:
    """A model's display name inside a mixture's label or a figure's legend: "MKN 3-gram" for an n-gram,
    its label otherwise ("LSTM (small)"); never an internal id."""
    if row is None:
        return "?"
    if row.get("family") == "ngram" and row.get("order"):
        return f"{SHORT.get(row['model'], row['model'])} {row['order']}-gram"
    return row["label"]


def row_label(results: dict, rid: str) -> str:
    """The display name of the n-gram or neural row ``rid`` of ``results`` (its id when absent)."""
    for family in ("ngram", "neural"):
        for r in results.get(family) or []:
            if r["id"] == rid:
                return component_label(r)
    return rid


def describe_budget(budget: dict) -> str:
    if "minutes" in budget:
        return f"{budget['minutes']:g} min"
    return f"{budget['epochs']} epoch{'s' if budget['epochs'] != 1 else ''}"


def rung_params(p: dict) -> str:
    """A ladder rung's tuned parameters in a few words (weights, buckets, theta, lambda ...)."""
    if not p:
        return ""
    if "weights" in p:
        return "weights " + ", ".join(f"{k} {v:.2f}" for k, v in p["weights"].items())
    if "buckets" in p and "global" in p:
        fitted = sum(1 for b in p["buckets"] if b["tokens"])
        return f"{fitted} context buckets ({p.get('scheme', '')}), EM on valid"
    keys = ("theta", "lambda", "rule", "lr", "decay", "window")
    return ", ".join(f"{k} {p[k]:g}" if isinstance(p[k], float) else f"{k} {p[k]}" for k in keys if k in p)


def short_rung_label(label: str) -> str:
    """A ladder rung's label shortened for a figure's tick."""
    return (label.replace(" (cache over the adapted states)", "").replace(", one global weight", ", global λ")
            .replace(" (three-way)", "").replace("per-context weights", "per-context λ"))
