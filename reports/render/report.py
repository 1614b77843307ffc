"""``report.md`` and ``report.html`` from ``results.json`` (nothing else is read).

The report is its head (title, the results table), the numbered sections of :mod:`reports.sections` in
their order, and its tail (units, settings, the HTML's script): the package files
``templates/head.md.j2``, ``tail.md.j2``, ``head.html.j2`` and ``tail.html.j2`` around the sections'
fragments.  The HTML report is one self-contained file: figures are embedded as base64 PNG, the
attention data as inline JSON, the script and styles inline; it needs no network.
The Markdown report links the same figures, written to ``DIR/plots/*.png``.
"""
from __future__ import annotations

import base64
import json
from importlib import resources
from pathlib import Path
from typing import Optional

import jinja2
import markupsafe
from markupsafe import Markup

from corpora.textio import atomic_write_bytes, atomic_write_text

from .. import plots, sections
from ..html_tables import SORT_JS, Cell, Row, Table, Tables
from ..undertrained import undertrained_reason


# The number formatting the templates and tests use (reports.formatting), under its old names here.
from ..formatting import (TOKEN_UNITS, describe_budget, fmt_budget, fmt_budget_spec, fmt_fixed, fmt_num, fmt_power,
                          fmt_ppl, fmt_seconds, fmt_setting, fmt_share, fmt_size, time_unit, token_units)


# ---------------------------------------------------------------------------- formatting
from ..undertrained import undertrained  # noqa: E402,F401 (the templates and tests use this name here)


SIZE_UNITS = {"n-gram entries": "n-grams", "parameters": "params", "n-gram entries + parameters": "n-grams + params",
              "indexed tokens": "tokens"}
FAMILY_NAMES = {"ngram": "n-gram", "neural": "neural", "interpolated": "interpolated", "infini": "∞-gram"}
# The columns where lower is better and the best value is marked (each row's raw value is "v_" + name).
BEST_COLUMNS = ("valid", "test", "bpt", "bpb", "bpc", "bpw")


def _row(r: dict, warning: Optional[str] = None, unit: str = "s") -> dict:
    t = r.get("test") or {}
    norm = r.get("test_normalised") or {}
    floor = r.get("above_floor")
    ci = r.get("test_ci") or {}
    if t and t.get("ppl") is None and t.get("zero_probs"):
        test = "∞"
    else:
        test = fmt_ppl(t)
    zero = (f"infinite perplexity: {t['zero_probs']:,} test tokens have probability 0"
            if t and t.get("ppl") is None and t.get("zero_probs") else None)
    warn = warning and (warning if warning.startswith("⚠") else f"⚠ undertrained: {warning}")
    notes = [x for x in (warn, r.get("error") and f"not estimated: {r['error']}",
                         zero, r.get("note"), r.get("aka")) if x]
    cached = "scored" if r.get("stopped") == "adopted" else {True: "from the cache", False: "trained in this run"}.get(
        r.get("cached"), "")
    out = {
        "id": r["id"], "label": r["label"], "family": r["family"], "family_name": FAMILY_NAMES.get(r["family"], r["family"]),
        "valid": fmt_ppl(r.get("valid")), "test": test,
        "ci": "–" if not ci.get("ppl") else f"{fmt_fixed(ci['ppl'][0], 2)}–{fmt_fixed(ci['ppl'][1], 2)}",
        "ci_bpb": "" if not ci.get("bits_per_byte") else
        f"{fmt_fixed(ci['bits_per_byte'][0], 3)}–{fmt_fixed(ci['bits_per_byte'][1], 3)}",
        "bpt": fmt_num(norm.get("bits_per_token")), "bpc": fmt_num(norm.get("bits_per_char")),
        "bpb": fmt_num(norm.get("bits_per_byte")),
        "bpw": fmt_num(norm.get("bits_per_word")),
        "v_valid": (r.get("valid") or {}).get("ppl"), "v_test": t.get("ppl"),
        "v_bpt": norm.get("bits_per_token"), "v_bpb": norm.get("bits_per_byte"),
        "v_bpc": norm.get("bits_per_char"), "v_bpw": norm.get("bits_per_word"),
        "v_size": r.get("size"), "v_train": r.get("train_seconds"),
        "ci_ppl": tuple(ci["ppl"]) if ci.get("ppl") else None, "alone": r.get("alone"),
        "floor": "–" if not floor else (f"{fmt_fixed(floor['extra_bits_per_token'], 3, sign=True)} bits "
                                        f"(×{fmt_fixed(floor['ppl_ratio'], 2)})"),
        "v_floor": floor["extra_bits_per_token"] if floor else None,
        "size": fmt_size(r.get("size")), "size_unit": SIZE_UNITS.get(r.get("size_unit", ""), r.get("size_unit", "")),
        "train": fmt_seconds(r.get("train_seconds"), unit), "cached": cached,
        "notes": notes, "note": "; ".join(notes),
        "undertrained": bool(warning),
        "budget": fmt_budget(r, unit) if r["family"] == "neural" else "",
        "best": set(),
    }
    for k in list(out):
        if k.startswith("v_"):
            out[k] = _clean(out[k])
    return out


from ..formatting import NEGLIGIBLE_WEIGHT, SHORT, component_label as _short  # noqa: E402,F401 (the names this module had)


def _mixture_labels(rows: list, by_id: dict) -> list:
    """Mixtures named by their parts ("MKN 3-gram + LSTM (small)"), their weights moved to a note: the
    long "0.81 x modified Kneser-Ney 3-gram + 0.19 x ..." made the table's first column ten lines tall."""
    out = []
    for r in rows:
        comps = r.get("components") or []
        if r.get("family") == "interpolated" and len(comps) == 2 and r.get("lambda") is not None:
            alone = mixture_alone(r, by_id)
            said = f"λ = {fmt_fixed(r['lambda'], 2)} on the n-gram model"
            if alone:
                said += f": this is {alone} alone (the mixture did not help)"
            r = {**r, "label": f"{_short(by_id.get(comps[0]))} + {_short(by_id.get(comps[1]))}", "alone": alone,
                 "note": "; ".join(x for x in (said, r.get("note")) if x)}
        elif r.get("family") == "infini" and len(comps) == 2:
            alone = mixture_alone(r, by_id)
            note = f"weights of 0.01 or less: this is {alone} alone, to within noise" if alone else None
            r = {**r, "label": f"∞-gram + {_short(by_id.get(comps[1]))}", "alone": alone,
                 "note": "; ".join(x for x in (note, r.get("note")) if x)}
        out.append(r)
    return out


def mixture_alone(r: dict, by_id: dict) -> Optional[str]:
    """The display name of the part a mixture reduces to, when the other part's weight is negligible
    (λ <= NEGLIGIBLE_WEIGHT, or 1 - λ): the mixture is then that model alone, and must be said to be."""
    comps = r.get("components") or []
    if len(comps) != 2:
        return None
    if r.get("family") == "interpolated" and r.get("lambda") is not None:
        if r["lambda"] <= NEGLIGIBLE_WEIGHT:
            return _short(by_id.get(comps[1]))
        if r["lambda"] >= 1 - NEGLIGIBLE_WEIGHT:
            return _short(by_id.get(comps[0]))
    lams = r.get("lambdas") or {}
    if r.get("family") == "infini" and lams and max(lams.values()) <= NEGLIGIBLE_WEIGHT:
        return _short(by_id.get(comps[1]))
    return None


def mixture_flags(rows: list, flagged: dict, by_id: dict) -> dict:
    """Mixture id -> its warning, for each mixture with an undertrained part: its numbers are no result either."""
    out = {}
    for r in rows:
        bad = [c for c in (r.get("components") or []) if c in flagged]
        if bad:
            out[r["id"]] = "⚠ includes an undertrained model: " + "; ".join(
                f"{_short(by_id.get(c))} ({flagged[c]})" for c in bad)
    return out


def _clean(v):
    """A raw number for a data-v attribute or a CSV cell: never -0.0 (x + 0.0 turns -0.0 into 0.0)."""
    return v + 0.0 if isinstance(v, float) else v


def _summary(summary: list, results: dict) -> dict:
    """The report's first lines: the best model of each family (by valid perplexity, undertrained rows
    left out), the headline ratio (best neural against best n-gram on test) and the V^n sentence."""
    from ..significance import best_or_tie

    best = []
    for fam in FAMILY_NAMES:
        rows = [r for r in summary if r["family"] == fam and r["v_valid"] is not None and not r["undertrained"]]
        if rows:
            r = min(rows, key=lambda x: x["v_valid"])
            # The family's others whose test perplexity lies inside this one's 95 % interval: a tie on test.
            verdict = best_or_tie([(id(r), r["v_test"], r["ci_ppl"])] + [
                (id(x), x["v_test"], None) for x in rows if x is not r and not x["alone"]])
            tied = [x["label"] for x in rows if id(x) in verdict.tied and verdict.top == id(r)]
            caveat = ""
            if r["alone"]:
                caveat = (f"its weight on the other part is ≈ 0, so this is {r['alone']} alone: "
                          "mixing did not help")
            elif tied:
                caveat = f"tied on test with {', '.join(tied)} (inside its 95 % interval)"
            best.append({"family": FAMILY_NAMES[fam], "label": r["label"], "test": r["test"], "ci": r["ci"],
                         "bpb": r["bpb"], "v_test": r["v_test"], "ci_ppl": r["ci_ppl"], "caveat": caveat})
    by = {b["family"]: b for b in best}
    headline = None
    ng, nn = by.get("n-gram"), by.get("neural")
    if ng and nn and ng["v_test"] and nn["v_test"]:
        ratio = nn["v_test"] / ng["v_test"]
        word = "below" if ratio < 1 else "above"
        lo, hi = ng["ci_ppl"] or (ng["v_test"], ng["v_test"])
        if lo <= nn["v_test"] <= hi:
            headline = (f"{nn['label']} reaches test perplexity {nn['test']} against {ng['test']} for {ng['label']}: "
                        f"inside the n-gram model's 95 % interval ({ng['ci']}), a tie at this test size.")
        else:
            headline = (f"{nn['label']} reaches test perplexity {nn['test']} against {ng['test']} for {ng['label']}: "
                        f"{fmt_fixed(abs(1 - ratio) * 100, 1)} % {word} the best n-gram model (ratio "
                        f"{fmt_fixed(ratio, 3)}), outside its 95 % interval ({ng['ci']}).")
    wall = results.get("vwall") or []
    vn = None
    if wall:
        w = wall[-1]
        vn = (f"At n = {w['order']}, V^n = 10^{fmt_fixed(w['possible_log10'], 1)} {w['order']}-grams are possible; "
              f"the training text holds {w['distinct_train']:,} of them ({fmt_share(w['coverage_of_possible'])}), "
              f"and {fmt_share(w['test_unseen_share'])} of the test text's {w['order']}-grams never occur in it.")
    return {"best": best, "headline": headline, "vn": vn}


# The columns a star may mark: the test scores, which share one bootstrap interval per row (bits per token,
# byte, character and word are the test perplexity in other units: one ranking).  Valid perplexities
# have no interval, so no star.
TEST_COLUMNS = ("test", "bpt", "bpb", "bpc", "bpw")


def _mark_best(rows: list) -> str:
    """Star the lowest test value (``row["best"]`` holds the column names) only where it is a result: every
    other model's test perplexity lies above its 95 % interval; else the models inside it are a tie, said
    so and starred none (reports.significance).  Candidates are rows that are a result: not undertrained,
    and not a mixture that is one of its parts alone.  Returns the sentence that says which."""
    from ..significance import best_or_tie

    cands = [(i, r["v_test"], r["ci_ppl"]) for i, r in enumerate(rows) if not r["undertrained"] and not r["alone"]]
    verdict = best_or_tie(cands)
    if verdict.top is None:
        return ""
    top = rows[verdict.top]
    if verdict.best is not None:
        top["best"].update(c for c in TEST_COLUMNS if top[f"v_{c}"] is not None)
        return (f"★ marks the lowest test perplexity, {top['label']} ({top['test']}): every other model (a mixture "
                "that is one of its parts alone aside) lies above its 95 % interval.")
    tied = [rows[i] for i in verdict.tied]
    names = ", ".join(f"{r['label']} ({r['test']})" for r in tied)
    return (f"No single best on test: {names} {'lies' if len(tied) == 1 else 'lie'} inside the 95 % interval of "
            f"the lowest, {top['label']} ({top['test']}, {top['ci']}): a tie at this test size, so none is starred.")


def _footnotes(rows: list) -> list:
    """Each distinct note once, numbered; a row's cell shows its numbers (a long note -- Katz's fallback
    discounts -- would otherwise make its row nine lines tall)."""
    notes: list = []
    for r in rows:
        r["refs"] = []
        for n in r["notes"]:
            if n not in notes:
                notes.append(n)
            r["refs"].append(notes.index(n) + 1)
    return [{"n": i, "text": n} for i, n in enumerate(notes, start=1)]


def _best_per_smoother(rows: list) -> list:
    best = {}
    for r in rows:
        v = r.get("valid")
        key = r["model"]
        if v and v.get("ppl") is not None:
            if key not in best or best[key]["valid"]["ppl"] > v["ppl"]:
                best[key] = r
        elif key not in best:
            best.setdefault(key, None)
    out = []
    for key, r in best.items():
        if r is None:  # no order gave a finite perplexity (MLE): show the highest order anyway
            r = max((x for x in rows if x["model"] == key), key=lambda x: x["order"])
        out.append(r)
    return out


# Header titles are template text (markup as written, not escaped data).
_FLOOR_TITLE = Markup("test bits per token minus the true language's, and the ratio of perplexities")


def _results_table(ctx: dict) -> Table:
    """The results table: one row per model shown, the best value of each column marked ★; the floor, bits
    per character and per word only where the run has them."""
    def num(m, col, **attrs) -> Cell:
        best = col in m["best"]
        return Cell(m[col] + (" ★" if best else ""), value=_data_v(m[f"v_{col}"]),
                    cls="num best" if best else "num", **attrs)

    has_floor, has_bpc, has_bpw = ctx["has_floor"], ctx["has_bpc"], ctx["has_bpw"]
    header = [Cell("model"), Cell("valid ppl"),
              Cell("test ppl 95 % CI", Markup('test ppl<br><span class="ci">95 % CI</span>'),
                   title=Markup("test perplexity, and its 95 % bootstrap interval (by sentence) below")),
              Cell("test bits/token")]
    header += [Cell("above the floor", title=_FLOOR_TITLE)] if has_floor else []
    header += [Cell("bits/byte" if has_bpc else "bits/byte = bits/char",
                    None if has_bpc else Markup('bits/byte<br><span class="ci">= bits/char</span>'),
                    title=Markup("bits per UTF-8 byte of the test text: comparable across tokenizations"))]
    header += ([Cell("bits/char")] if has_bpc else []) + ([Cell("bits/word")] if has_bpw else [])
    header += [Cell("size"), Cell(f"training ({ctx['time_unit']})",
                                  title=Markup("training wall time; a cached model cost nothing in this run")),
               Cell("budget / actual", title=Markup("the training budget, and what the model cost in this run: "
                                                    "training and evaluation, wall clock")),
               Cell("notes")]
    rows = []
    for m in ctx["summary"]:
        test = num(m, "test")
        if m["ci"] != "–":
            test = Cell(f"{test.text} {m['ci']}", Markup('{}<br><span class="ci">{}</span>').format(test.text, m["ci"]),
                        value=test.value, cls=test.cls)
        cells = [Cell(m["label"]), num(m, "valid"), test, num(m, "bpt")]
        cells += [Cell(m["floor"], value=_data_v(m["v_floor"]), cls="num")] if has_floor else []
        cells += [num(m, "bpb", title=f"95 % CI {m['ci_bpb']}" if m["ci_bpb"] else None)]
        cells += ([num(m, "bpc")] if has_bpc else []) + ([num(m, "bpw")] if has_bpw else [])
        parts = m["budget"].split(" / ")
        budget = Markup(" ").join(Markup('<span class="nw">{}{}</span>').format(
            part, " /" if i < len(parts) - 1 else "") for i, part in enumerate(parts))
        cells += [Cell(f"{m['size']} {m['size_unit']}", Markup('{} <span class="note">{}</span>').format(
                      m["size"], m["size_unit"]), value=_data_v(m["v_size"]), cls="num"),
                  Cell(m["train"], value=_data_v(m["v_train"]), cls="num", title=m["cached"]),
                  Cell(" / ".join(parts), budget, cls="num budget"),
                  Cell("".join(f"[{n}]" for n in m["refs"]),
                       Markup("").join(Markup('<a href="#note-{}">[{}]</a>').format(n, n) for n in m["refs"]),
                       cls="note")]
        rows.append(Row(cells, cls=m["family"], attrs={"data-undertrained": "1"} if m["undertrained"] else {}))
    return Table("results-table", header, rows, cls="sortable", layout="body")


def _settings_table(settings_shown: dict) -> Table:
    rows = [Row([Cell(k.replace("_", " ")), Cell(v, Markup("<code>{}</code>").format(v))])
            for k, v in settings_shown.items()]
    return Table("settings-table", ["setting", "value"], rows, cls="sortable", layout="head")


def _data_v(v):
    """A raw number as a data-v attribute holds it: empty for None."""
    return "" if v is None else v


def build_context(results: dict) -> dict:
    """The template variables: the head's (the results table, units, settings), then each section's."""
    from corpora.textio import shown_path

    from ..sections.orders import infini_rows

    s = dict(results["settings"])
    if s.get("checkpoints"):  # as the reader's folders, not this machine's
        s["checkpoints"] = [shown_path(c) for c in s["checkpoints"]]
    corpus = results["corpus"]
    truth = (corpus.get("truth") or {}).get("test")
    ngram = results.get("ngram", [])
    neural = results.get("neural", [])
    interp = results.get("interpolation", [])
    flagged = undertrained(results)
    by_id = {r["id"]: r for r in ngram + neural}
    mixtures = interp + infini_rows(results)
    flagged_all = {**flagged, **mixture_flags(mixtures, flagged, by_id)}
    shown = _best_per_smoother(ngram) + neural + _mixture_labels(mixtures, by_id)
    unit = time_unit(r.get("train_seconds") for r in shown)
    summary = [_row(r, flagged_all.get(r["id"]), unit) for r in shown]
    best_note = _mark_best(summary)
    footnotes = _footnotes(summary)
    families = [{"family": f, "name": FAMILY_NAMES[f]} for f in FAMILY_NAMES if any(r["family"] == f for r in summary)]
    problems = [{"id": r["id"], "error": r["error"]} for r in ngram + neural if r.get("error")]
    timing = results.get("timing") or {}
    ctx = {
        "footnotes": footnotes, "families": families, "time_unit": unit, "top": _summary(summary, results),
        "best_note": best_note,
        "has_floor": truth is not None, "has_bpw": any(r["v_bpw"] is not None for r in summary),
        # Bits per character equal bits per byte on an ASCII text: one column then says both.
        "has_bpc": any(r["v_bpc"] is not None and (r["v_bpb"] is None or abs(r["v_bpc"] - r["v_bpb"]) > 1e-12)
                       for r in summary),
        "settings_shown": {k: fmt_setting(v) for k, v in s.items()},
        "problems": problems, "undertrained": [{"label": r["label"], "why": flagged[r["id"]]} for r in neural
                                               if r["id"] in flagged], "r": results, "s": s, "corpus": corpus, "truth": truth, "summary": summary,
        "timing": {"total": fmt_seconds(timing.get("total_seconds")), "trained": timing.get("trained", 0),
                   "cached": timing.get("cached", 0), "stages": fmt_stages(timing)},
        "tokenizer": _tokenizer(results)["kind"], "units": token_units(_tokenizer(results)),
        "neural_none": not s.get("neural") and not s.get("checkpoints"),
        "has_neural": bool(neural),
        "status": results.get("status"),
        # A results.json of an earlier version has no byte counts: its bits/byte read "–", B is not shown.
        "sizes": {split: {"bytes": None, **v} for split, v in corpus["sizes"].items()},
        **sections.context(results),
    }
    ctx["results_table"] = _results_table(ctx)
    ctx["settings_table"] = _settings_table(ctx["settings_shown"])
    return ctx


STAGE_NAMES = {"load": "reading the corpus", "count": "counting", "ngram": "n-gram models", "neural": "neural models",
               "curves": "learning curves", "per_token": "per-token surprisal", "infini": "∞-gram",
               "tokenizations": "tokenizations", "pruning": "pruning", "ladder": "ladder",
               "intervals": "bootstrap intervals", "render": "the report"}


def fmt_stages(timing: dict) -> str:
    """Where the total went, every stage in one unit ("reading the corpus 3.1 s, counting 0.4 s, ...");
    "" for a results.json written before stages were timed."""
    stages = timing.get("stages") or {}
    if not stages:
        return ""
    unit = time_unit(stages.values())
    shown = [(k, v) for k, v in stages.items() if v >= (3.0 if unit == "min" else 0.05)]  # not "0.0 s"
    rest = len(stages) - len(shown)
    text = ", ".join(f"{STAGE_NAMES.get(k, k)} {fmt_seconds(v, unit)}" for k, v in shown)
    return text + (f" and {rest} shorter stage{'s' if rest > 1 else ''}" if rest else "")


def _tokenizer(results: dict) -> dict:
    """The run's tokenizer spec: the corpus's recorded spec, else the ``--tokenizer`` setting."""
    spec = dict((results.get("corpus") or {}).get("tokenizer") or {})
    if not spec.get("kind"):
        spec["kind"] = (results.get("settings") or {}).get("tokenizer") or "whitespace"
    return spec


# ---------------------------------------------------------------------------- writing
def make_readable(*paths: Path) -> None:
    """Atomic writes create private (0600) files; reports are meant to be shared: apply the umask."""
    import os

    mask = os.umask(0)
    os.umask(mask)
    for p in paths:
        os.chmod(p, 0o666 & ~mask)


def _template(name: str) -> str:
    """The Jinja source of the package file ``reports/render/templates/<name>``."""
    return resources.files(__package__).joinpath("templates", name).read_text(encoding="utf-8")


def assemble(sections_=None) -> tuple:
    """``(Markdown template, HTML template)``: head, each section numbered in order, tail (the sections
    registered now by default)."""
    sections_ = sections.SECTIONS if sections_ is None else sections_
    md = _template("head.md.j2") + "".join(f"## {i}. {s.title}\n{s.md}" for i, s in enumerate(sections_, start=1)) \
        + _template("tail.md.j2")
    html = _template("head.html.j2") + "".join(f'<h2 id="{s.anchor}">{i}. {s.html_title}</h2>\n{s.html}'
                                               for i, s in enumerate(sections_, start=1)) + _template("tail.html.j2")
    return md, html


def jinja_env(autoescape: bool) -> jinja2.Environment:
    """The environment of every report template: the package's template files, blocks trimmed, an undefined
    name an error."""
    env = jinja2.Environment(loader=jinja2.PackageLoader("reports.render", "templates"), autoescape=autoescape,
                             trim_blocks=True, lstrip_blocks=True, undefined=jinja2.StrictUndefined)
    # JSON inside <script>: escape <, > and & so no "</script>" or "<!--" can end or change the block.
    env.filters["tojson_safe"] = lambda obj: markupsafe.Markup(
        json.dumps(obj).replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026"))
    env.filters["fixed"] = fmt_fixed  # {{ x|fixed(2) }}: never "-0.00"
    return env


def count_rendering(results: dict, started: Optional[float], t_render: float) -> None:
    """Add the report's own time to ``results["timing"]`` (``stages.render``, and the total counted from
    ``started``, the command's start), so the header's total is every stage's: loading, counting, models,
    sections, intervals and this rendering (its last few milliseconds, writing the files, excepted)."""
    import time

    timing = results.get("timing")
    if started is None or timing is None:
        return
    now = time.perf_counter()
    timing.setdefault("stages", {})["render"] = now - t_render
    timing["total_seconds"] = now - started


def render(out: Path, results: dict, started: Optional[float] = None) -> dict:
    """Write ``plots/*.png``, ``report.md`` and ``report.html`` into ``out``; returns their paths.
    ``started``: when the command began (time.perf_counter()), given by a run that has just computed
    ``results``: its total time then counts the rendering too (``ngramlm report`` leaves it as recorded)."""
    import time

    out = Path(out)
    t_render = time.perf_counter()
    figures = plots.all_plots(results, sections.plot_functions())
    count_rendering(results, started, t_render)
    for name, png in figures.items():
        atomic_write_bytes(out / "plots" / f"{name}.png", png)
    ctx = build_context(results)
    titles = sections.plot_titles()
    ctx["plots"] = {name: {"title": titles[name], "file": f"plots/{name}.png",
                           "b64": base64.b64encode(png).decode("ascii")} for name, png in figures.items()}
    for name in titles:  # a figure this results.json has no data for (an earlier version's file): absent
        ctx["plots"].setdefault(name, None)
    md_template, html_template = assemble()  # the sections registered now, in order
    ctx["table_js"] = SORT_JS
    md = jinja_env(False).from_string(md_template).render(**ctx)
    shown = Tables()
    html = jinja_env(True).from_string(html_template).render(**ctx, table=shown)
    csvs = shown.write_csvs(out)
    atomic_write_text(out / "report.md", md)
    atomic_write_text(out / "report.html", html)
    make_readable(out / "report.md", out / "report.html", *(out / "plots" / f"{n}.png" for n in figures), *csvs)
    return {"md": out / "report.md", "html": out / "report.html", "plots": sorted(figures),
            "tables": sorted(p.name for p in csvs)}
