"""Section: the same text under several tokenizations (``compare CORPUS --tokenizers word,bpe:8000,char``).

For each tokenizer the corpus is read again through the text pipeline (a learned tokenizer fitted on
the training split), counted to the run's highest order, and given the V^n wall (possible, observed
and unseen test n-grams per n) and the curve smoother (MKN by default) at every order -- in **bits
per byte** of the test text, the one unit every tokenization shares (its UTF-8 bytes, counted once).
A small vocabulary (characters, bytes) pushes the wall to larger n; a large one (words) hits it at
n = 2 or 3.  The best order of each tokenizer is chosen on valid.
"""
from __future__ import annotations

from dataclasses import replace
from typing import Optional

from markupsafe import Markup

from .. import plots
from ..experiments import bootstrap
from ..undertrained import undertrained_reason
from ..formatting import describe_budget, fmt_fixed, fmt_share
from ..html_tables import Cell, Row, Table, bold
from .base import Section, fragment

WORD = "word"  # the corpus's own tokenizer (whitespace for PTB, cjk for hongloumeng ...)


def compute(run) -> None:
    s = run.settings
    if not s.tokenizers:
        run.results["tokenizations"] = None
        return
    from corpora.vocab import UNK_ID
    from ngramlm import NgramCounts

    from ..experiments.data import load_data
    from ..experiments.ngram_part import fit_ngram, split_scores, vwall, zipf

    rows = []
    neural_on = [tk for tk in s.tokenizers if s.neural_tokenizers is None or tk in s.neural_tokenizers]
    families = (f" and {', '.join(s.neural)} ({describe_budget(s.main_budget())} each) on "
                f"{', '.join(neural_on)}" if s.neural and neural_on else "")
    run.log(f"tokenizations: {', '.join(s.tokenizers)} ({s.curve_smoother}, orders 1..{s.max_order}{families}; "
            "bits per byte)")
    for tk in s.tokenizers:
        own = tk == WORD and s.tokenizer is None
        if own:  # the run's own text: its counts, V^n wall and grid rows are already computed
            data, counts = run.data, run.counts
            wall = {r["order"]: r for r in run.results["vwall"]}
            done = {r["order"]: r for r in run.results.get("ngram", []) if r["model"] == s.curve_smoother}
        else:
            data = load_data(replace(s, tokenizer=None if tk == WORD else tk), run.data_dir)
            counts = NgramCounts.from_encoded(data["train"], order=s.max_order, vocab_size=len(data.vocab))
            wall = {r["order"]: r for r in vwall(counts, data.vocab, data["train"], data["test"])}
            done = {}
        n_bytes = {split: data.sizes[split]["bytes"] for split in ("valid", "test")}
        orders, test_arrays = [], {}
        for k in range(1, s.max_order + 1):
            if k in done:
                error = done[k].get("error")
                scores = {split: done[k].get(split) for split in ("valid", "test")}
                if done[k]["id"] in run.arrays:
                    test_arrays[k] = run.arrays[done[k]["id"]]["test"]
            else:
                lm, _, error = fit_ngram(s.curve_smoother, k, counts, data["train"], data.vocab, data["valid"])
                scores = {}
                for split in ("valid", "test"):
                    scores[split], log2p = split_scores(lm, data[split]) if lm is not None else (None, None)
                    if split == "test" and log2p is not None:
                        test_arrays[k] = log2p
            point = {"order": k, "error": error, "possible_log10": wall[k]["possible_log10"],
                     "distinct_train": wall[k]["distinct_train"], "test_unseen_share": wall[k]["test_unseen_share"]}
            for split in ("valid", "test"):
                score = scores[split]
                ok = score is not None and not score["zero_probs"]
                point[f"{split}_bits_per_byte"] = -score["log2prob"] / n_bytes[split] if ok else None
                point[f"{split}_ppl"] = score["ppl"] if ok else None
            orders.append(point)
        scored = [p for p in orders if p["valid_bits_per_byte"] is not None]
        best = min(scored, key=lambda p: p["valid_bits_per_byte"]) if scored else None
        tok = data.vocab.tokenizer
        ci = bootstrap.test_intervals(data, test_arrays.get(best["order"])) if best else None
        row = {"tokenizer": tk, "describe": tok.describe() if tok else tk, "n_types": data.vocab.n_types,
               "test_tokens": data.sizes["test"]["tokens"], "test_bytes": n_bytes["test"],
               "test_unk": int((data["test"].ids == UNK_ID).sum()),
               "train_tokens": data.sizes["train"]["tokens"], "orders": orders,
               "best_order": best["order"] if best else None,
               "best_test_bits_per_byte": best["test_bits_per_byte"] if best else None,
               "best_ci": ci, "unigram_valid_ppl": orders[0]["valid_ppl"] if orders else None,
               "zipf": zipf(counts, data.vocab), "neural": _neural(run, tk, own, data, orders)}
        rows.append(row)
        bpb = "-" if best is None else f"{best['test_bits_per_byte']:.4f}"
        run.log(f"  {tk:<12} V={row['n_types']:,} test tokens {row['test_tokens']:,}; best n={row['best_order']}: "
                f"{bpb} bits/byte")
        for nr in row["neural"]:
            v = "-" if nr["test_bits_per_byte"] is None else f"{nr['test_bits_per_byte']:.4f}"
            run.log(f"  {tk:<12} {nr['label']}: {v} bits/byte")
    run.results["tokenizations"] = {"smoother": s.curve_smoother, "rows": rows}


def _neural(run, tk: str, own: bool, data, orders: list) -> list:
    """Each neural family of the run on this tokenization: its bits per byte and interval.  On the run's
    own tokenization these are the results table's models; on another one each trains under the same
    budget (cached like every model, under that text's fingerprint)."""
    s = run.settings
    out = []
    if s.neural_tokenizers is not None and tk not in s.neural_tokenizers:
        return out  # --neural-tokenizers leaves this one to the n-gram models
    for name in s.neural:
        if own:
            row = next((r for r in run.results.get("neural", []) if r["model"] == name), None)
        else:
            from ..experiments.neural_part import neural_row, neural_settings

            ns = neural_settings(name, s.neural_size, s.main_budget(), s.seed, len(data.vocab))
            rid = f"{tk}/{name}"
            row = run._cached_or("neural", ns, lambda key, n=name, ns=ns, rid=rid: neural_row(
                n, ns, data, run.cache.checkpoint(key), log=run.log if run.verbose else None, warn=run.log,
                row_id=rid), fingerprint=data.fingerprint)
        if row is None:
            continue
        test, valid = row.get("test") or {}, row.get("valid") or {}
        ok = test.get("ppl") is not None
        arrays = run.arrays.get(row["id"]) or {}
        # the results table's rule, against this tokenization's unigram (the curve smoother at n = 1)
        flag = undertrained_reason(row, orders[0]["valid_ppl"] if orders else None)
        out.append({"model": name, "label": row["label"], "id": row["id"],
                    "test_ppl": test.get("ppl"), "valid_ppl": valid.get("ppl"),
                    "test_bits_per_byte": -test["log2prob"] / data.sizes["test"]["bytes"] if ok else None,
                    "ci": bootstrap.test_intervals(data, arrays.get("test")), "epochs": row.get("epochs"),
                    "train_seconds": row.get("train_seconds"), "history": row.get("history"),
                    "undertrained": flag, "error": row.get("error")})
    return out


def context(results: dict) -> dict:
    sec = results.get("tokenizations")
    if not sec:
        return {"tokenizations": None}
    from ..significance import best_or_tie

    rows = sec["rows"]
    n_max = max((len(r["orders"]) for r in rows), default=0)
    # The best tokenization for the n-gram model only where the others lie outside its 95 % interval.
    verdict = best_or_tie([(r["tokenizer"], r["best_test_bits_per_byte"], ((r.get("best_ci") or {}).get("bits_per_byte")))
                           for r in rows])
    best_tok = verdict.best
    capped = capped_orders(rows)
    table = []
    for r in sorted(rows, key=lambda r: (r["best_test_bits_per_byte"] is None, r["best_test_bits_per_byte"] or 0)):
        cells = []
        for p in r["orders"]:
            v = p["test_bits_per_byte"]
            cells.append({"text": "n/a" if p["error"] else ("∞" if v is None else fmt_fixed(v, 4)),
                          "best": p["order"] == r["best_order"], "title": p["error"] or
                          ("" if p["test_ppl"] is None else f"test ppl {fmt_fixed(p['test_ppl'], 2)} per token")})
        table.append({
            "tokenizer": r["describe"], "V": f"{r['n_types']:,}", "tokens": f"{r['test_tokens']:,}",
            "bytes_per_token": fmt_fixed(r["test_bytes"] / r["test_tokens"], 2) if r["test_tokens"] else "–",
            "unk": fmt_share(r.get("test_unk", 0) / r["test_tokens"]) if r["test_tokens"] else "–",
            "cells": cells, "best_order": r["best_order"] or "–",
            "best": "–" if r["best_test_bits_per_byte"] is None else fmt_fixed(r["best_test_bits_per_byte"], 4),
            "is_best": best_tok is not None and r["tokenizer"] == best_tok,
            "capped": r["tokenizer"] in capped,
        })
    walls = [{"tokenizer": r["describe"], "cells": [
        f"{fmt_share(p['test_unseen_share'])} of 10^{fmt_fixed(p['possible_log10'], 1)}" for p in r["orders"]]}
        for r in rows]
    ranking = []
    for r in rows:
        if r["best_test_bits_per_byte"] is not None:
            bound = " (largest order tried, still improving: a bound)" if r["tokenizer"] in capped else ""
            ranking.append({"tokenizer": r["describe"], "name": f"{sec['smoother'].upper()} {r['best_order']}-gram",
                            "model": f"{sec['smoother'].upper()} {r['best_order']}-gram{bound}",
                            "family": "ngram", "bpb": r["best_test_bits_per_byte"], "ci": r.get("best_ci"),
                            "ppl": next((p["test_ppl"] for p in r["orders"] if p["order"] == r["best_order"]), None),
                            "flag": None})
        for nr in r.get("neural") or []:
            ranking.append({"tokenizer": r["describe"], "model": nr["label"], "name": nr["label"], "family": "neural",
                            "bpb": nr["test_bits_per_byte"], "ci": nr.get("ci"), "ppl": nr["test_ppl"],
                            "flag": nr.get("undertrained") or nr.get("error")})
    ranking.sort(key=lambda x: (x["bpb"] is None, bool(x["flag"]), x["bpb"] or 0))
    rank_verdict = best_or_tie([(i, x["bpb"], (x["ci"] or {}).get("bits_per_byte")) for i, x in enumerate(ranking)
                                if not x["flag"]])
    top = ranking[rank_verdict.best]["bpb"] if rank_verdict.best is not None else None
    ranking_note = ""
    if rank_verdict.top is not None and rank_verdict.best is None:
        t = ranking[rank_verdict.top]
        ranking_note = (f"No single best: {', '.join(ranking[i]['name'] + ' on ' + ranking[i]['tokenizer'] for i in rank_verdict.tied)} "
                        f"lies inside the 95 % interval of {t['name']} on {t['tokenizer']}: a tie, so none is starred.")
    for i, x in enumerate(ranking, start=1):
        ci = (x["ci"] or {}).get("bits_per_byte")
        x.update(rank=i, v_bpb=x["bpb"], bpb_text="–" if x["bpb"] is None else fmt_fixed(x["bpb"], 4),
                 ci_text="–" if not ci else f"{fmt_fixed(ci[0], 4)}–{fmt_fixed(ci[1], 4)}",
                 ppl_text="–" if x["ppl"] is None else fmt_fixed(x["ppl"], 2),
                 is_best=top is not None and x["bpb"] == top and not x["flag"])
    tops = [{"tokenizer": r["describe"], "top": {n: ", ".join(f"{g} ({c:,})" for g, c in grams)
                                                 for n, grams in (r.get("zipf") or {}).get("top", {}).items()}}
            for r in rows if r.get("zipf")]
    orders = list(range(1, n_max + 1))
    capped_notes = [f"{r['describe']}: its best order on valid, n = {r['best_order']}, is the largest tried, and test bits "
                    f"per byte were still falling ({' → '.join(fmt_fixed(p['test_bits_per_byte'], 3) for p in r['orders'][-3:] if p['test_bits_per_byte'] is not None)} "
                    f"over the last orders): its rank is a bound, not its place (a larger --max-order may move it up)"
                    for r in rows if r["tokenizer"] in capped]
    return {"tokenizations": {"smoother": sec["smoother"], "orders": orders, "table": table,
                              "capped_notes": capped_notes, "ranking_note": ranking_note,
                              "walls": walls, "bytes": f"{rows[0]['test_bytes']:,}" if rows else "–",
                              "ranking": ranking, "tops": tops, **_tables(orders, table, walls, ranking, tops)}}


def capped_orders(rows: list) -> set:
    """The tokenizations whose best order (on valid) is the largest order tried: still improving there, so
    their bits per byte, and their rank, are a bound on what the counts would reach with a larger n."""
    out = set()
    for r in rows:
        valid = {p["order"]: p.get("valid_bits_per_byte") for p in r["orders"]}
        top = max(valid, default=None)
        if r.get("best_order") is None or r["best_order"] != top or valid.get(top - 1) is None:
            continue
        # still improving: the last order gained more than STILL_IMPROVING of the one before (a level curve
        # whose last step wins by 0.1 % is not cut short)
        if (valid[top - 1] - valid[top]) / valid[top - 1] > STILL_IMPROVING:
            out.add(r["tokenizer"])
    return out


STILL_IMPROVING = 0.005


RANKING_HEADER = ["rank", "tokenization", "model", "test bits/byte", "95 % CI", "test ppl per token"]
TOP_HEADER = ["tokenization", "top-10 unigrams in train", "top-10 bigrams", "top-10 trigrams"]


def _tables(orders: list, table: list, walls: list, ranking: list, tops: list) -> dict:
    """The section's four HTML tables (and their CSV files): the ranking, bits per byte against n, the
    unseen test n-grams against n, the most frequent n-grams."""
    def model(x) -> Cell:
        if not x["flag"]:
            return Cell(x["model"])
        return Cell(f"{x['model']} ⚠ {x['flag']}",
                    Markup('{} <span class="note">⚠ {}</span>').format(x["model"], x["flag"]))

    ranking_table = Table("tokenizations-ranking", RANKING_HEADER, [Row([
        Cell(x["rank"], cls="num"), Cell(x["tokenizer"]), model(x),
        Cell(x["bpb_text"] + (" ★" if x["is_best"] else ""), value="" if x["v_bpb"] is None else x["v_bpb"],
             cls="num best" if x["is_best"] else "num"),
        Cell(x["ci_text"], cls="num"), Cell(x["ppl_text"], cls="num")],
        cls=x["family"], attrs={"data-undertrained": "1"} if x["flag"] else {}) for x in ranking], layout="body")
    header = ["tokenizer", "V", "test tokens", "bytes/token",
              Cell("test <unk>", title=Markup("test tokens outside the vocabulary"))]
    bits_table = Table("tokenizations-table", header + [f"n={o}" for o in orders] + ["best n", "best bits/byte"], [Row(
        [Cell(t["tokenizer"])] + [Cell(t[k], cls="num") for k in ("V", "tokens", "bytes_per_token", "unk")]
        + [(bold if c["best"] else Cell)(c["text"], cls="num", title=c["title"]) for c in t["cells"]]
        + [Cell(t["best_order"], cls="num"),
           Cell(f"{t['best']} ★", Markup("<b>{}</b> ★").format(t["best"]), cls="num") if t["is_best"] else
           Cell(t["best"], cls="num")]) for t in table])
    wall_table = Table("tokenizations-wall", ["test n-grams unseen in train"] + [f"n={o}" for o in orders], [Row(
        [Cell(w["tokenizer"])] + [Cell(c, cls="num") for c in w["cells"]]) for w in walls])
    top_table = Table("tokenizations-top", TOP_HEADER, [Row(
        [Cell(t["tokenizer"])] + [Cell(t["top"].get(n, ""), cls="grams") for n in ("1", "2", "3")]) for t in tops],
        layout="body")
    return {"ranking_table": ranking_table, "bits_table": bits_table, "wall_table": wall_table, "top_table": top_table}


def figure(results: dict) -> Optional[bytes]:
    """Bits per byte against n (left) and the unseen share of test n-grams against n (right), one line a
    tokenizer: where each tokenization meets the V^n wall."""
    sec = results.get("tokenizations")
    if not sec or not sec["rows"]:
        return None
    import matplotlib.pyplot as plt

    fig, (left, right) = plt.subplots(1, 2, figsize=(10, 3.8))
    markers = "osD^v<>ph*"
    for i, r in enumerate(sec["rows"]):
        pts = [p for p in r["orders"] if p["test_bits_per_byte"] is not None]
        style = dict(marker=markers[i % len(markers)], label=r["describe"])
        if pts:
            left.plot([p["order"] for p in pts], [p["test_bits_per_byte"] for p in pts], **style)
        right.plot([p["order"] for p in r["orders"]], [100 * p["test_unseen_share"] for p in r["orders"]], **style)
    left.set_xlabel("order n")
    left.set_ylabel("test bits per byte")
    left.set_title(f"{sec['smoother']} against n, per tokenization")
    right.set_xlabel("order n")
    right.set_ylabel("% of test n-grams unseen in train")
    right.set_title("The $V^n$ wall, per tokenization")
    n_max = max(len(r["orders"]) for r in sec["rows"])
    for ax in (left, right):
        ax.set_xticks(range(1, n_max + 1))  # orders are whole numbers
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
    return plots.png_bytes(fig)


def zipf_figure(results: dict) -> Optional[bytes]:
    """Zipf's rank-frequency plot, one line per tokenization: a few frequent types and a long tail for
    words, a short flat head for characters and bytes, subwords in between."""
    sec = results.get("tokenizations")
    rows = [r for r in (sec or {}).get("rows", []) if (r.get("zipf") or {}).get("ranks")]
    if not rows:
        return None
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=plots.SIZE)
    for i, r in enumerate(rows):
        ax.loglog(r["zipf"]["ranks"], r["zipf"]["freqs"], marker=plots.MARKERS[i % len(plots.MARKERS)], markersize=3,
                  linestyle=plots.DASHES[i % len(plots.DASHES)], label=f"{r['describe']} (V = {r['n_types']:,})")
    ax.set_xlabel("rank of the type (log scale)")
    ax.set_ylabel("count in train (log scale)")
    ax.set_title("Zipf: frequency against rank, per tokenization")
    ax.grid(alpha=0.3, which="both")
    ax.legend(fontsize=8)
    return plots.png_bytes(fig)


TITLE = "Tokenizations: bits per byte against n"
HTML_TITLE = "Tokenizations: bits per byte against n"


SECTION = Section(name="tokenizations", anchor="tokenizations", title=TITLE, html_title=HTML_TITLE,
                  md=fragment("tokenizations.md.j2"), html=fragment("tokenizations.html.j2"),
                  compute=compute, context=context,
                  plots={"tokenizations": ("Bits per byte and the V^n wall per tokenization", figure),
                         "zipf_tokenizations": ("Zipf's rank-frequency plot per tokenization", zipf_figure)})
