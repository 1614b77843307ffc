"""Section: the ladder (``compare --ladder``) -- count ideas put back into each neural model, one rung at a
time, on the same test tokens: + neural cache, + dynamic evaluation, + the n-gram model (one global
weight, then weights per context), + the ∞-gram (the computing is :mod:`reports.experiments.ladder`)."""
from __future__ import annotations

from pathlib import Path
from typing import Optional

from markupsafe import Markup

from .. import plots
from ..formatting import fmt_fixed
from ..html_tables import Cell, Row, Table, bold
from .base import Section, fragment


def compute(run) -> None:
    if not getattr(run.settings, "ladder", False):
        run.results["ladder"] = None
        return
    from neural.checkpoint import best_path, load_model

    from ..experiments.data import cache_key
    from ..experiments.ladder import LadderOptions, climb

    d = run.data
    out = []
    for row in run.results.get("neural", []):
        ckpt = run.checkpoints.get(row["id"])
        if not row.get("valid") or ckpt is None or row.get("kind", "lm") == "translator":
            continue
        best = best_path(ckpt) if best_path(ckpt).exists() else Path(ckpt)
        opts = LadderOptions()
        key = cache_key("ladder", {"model": row.get("key") or str(best), "options": vars(opts)}, run.fingerprint)
        cached = run.cache.get(key)
        if cached is None:
            model, _, _ = load_model(best)
            res = climb(model, d.vocab, {s: d[s] for s in ("train", "valid", "test")}, name=d.name,
                        test_bytes=d.sizes["test"].get("bytes"),
                        sentence_bytes=(d.sentence_bytes or {}).get("test"), options=opts,
                        log=run.log if run.verbose else (lambda s: None))
            res.pop("per_token_log2", None)
            res["training"] = {"seconds": row.get("train_seconds")}
            run.cache.put(key, res)
            cached = res
        cached["model_id"], cached["model_label"] = row["id"], row["label"]
        out.append(cached)
        top = next(r for r in cached["rows"] if r["id"] == cached["top"])
        run.log(f"  ladder for {row['id']}: {cached['rows'][1]['test_ppl']:.2f} alone -> {top['test_ppl']:.2f} "
                f"at the top ({cached['adaptation_seconds']:.0f} s of adaptation and scoring)")
    run.results["ladder"] = out or None


def _fmt_s(s: Optional[float]) -> str:
    if s is None:
        return "–"
    return f"{s / 60:.1f} min" if s >= 120 else f"{s:.1f} s"


def context(results: dict) -> dict:
    ladders = results.get("ladder")
    if not ladders:
        return {"ladder": None}
    from ..formatting import rung_params

    out = []
    for lad in ladders:
        best = min(r["test_ppl"] for r in lad["rows"])
        rows = [{"label": r["label"], "family": r["family"], "rung": r["rung"],
                 "test": fmt_fixed(r["test_ppl"], 2), "test_v": r["test_ppl"], "star": r["test_ppl"] == best,
                 "ci": (f"{r['test_ppl_ci'][0]:.2f}–{r['test_ppl_ci'][1]:.2f}" if r["test_ppl_ci"] else "–"),
                 "valid": fmt_fixed(r["valid_ppl"], 2), "bits": fmt_fixed(r["test_bits_per_token"], 4),
                 "extra": _fmt_s(r["extra_seconds"]), "extra_v": r["extra_seconds"], "params": rung_params(r["params"])}
                for r in lad["rows"]]
        labels = {r["id"]: r["label"] for r in lad["rows"]}
        steps = [{"title": f"{labels[st['from']]} → {labels[st['to']]}", "mean": f"{st['mean_bits_gained']:+.4f}",
                  "kinds": [{"kind": k["kind"], "share": f"{100 * k['share']:.1f} %",
                             "gain": f"{k['bits_gained_per_token']:+.3f}"} for k in st["by_kind"] if k["tokens"]],
                  "tokens": st["top_tokens"][:5]} for st in lad["steps"]]
        for j, st in enumerate(steps, start=1):
            st["gain_table"] = Table(f"ladder-gain-{j}", ["kind of token", "share", "bits gained per token"], [
                Row([Cell(k["kind"]), Cell(k["share"], cls="num"), Cell(k["gain"], cls="num")]) for k in st["kinds"]],
                layout="compact")
            st["tokens_table"] = Table(None, ["context", "token", "bits before", "bits after"], [Row([
                Cell(f"… {t['context']}"), bold(t["token"]), Cell(f"{t['bits_before']:.2f}", cls="num"),
                Cell(f"{t['bits_after']:.2f}", cls="num")]) for t in st["tokens"]], cls="nosort", layout="compact")
        table = Table(f"ladder-{len(out) + 1}", LADDER_HEADER, [Row([
            Cell(("" if r["rung"] else "(alone) ") + r["label"]),
            Cell(f"{r['test']} ★", Markup("<b>{} ★</b>").format(r["test"]), value=r["test_v"], cls="num") if r["star"]
            else Cell(r["test"], value=r["test_v"], cls="num"),
            Cell(r["ci"], cls="num"), Cell(r["valid"], cls="num"), Cell(r["bits"], cls="num"),
            Cell(r["extra"], value=r["extra_v"], cls="num"), Cell(r["params"])], cls=r["family"]) for r in rows],
            layout="body")
        out.append({"label": lad["model_label"], "id": lad["model_id"], "rows": rows, "steps": steps,
                    "seconds": _fmt_s(lad["adaptation_seconds"]), "table": table})
    return {"ladder": out}


LADDER_HEADER = ["rung", "test ppl", "95 % CI", "valid ppl", "bits/token", "extra time", "parameters"]


def figure(results: dict) -> Optional[bytes]:
    ladders = results.get("ladder")
    if not ladders:
        return None
    fig, ax = plots.plt.subplots(figsize=(7.2, 3.8))
    names = None
    for i, lad in enumerate(ladders):
        rungs = [r for r in lad["rows"] if r["rung"]]
        names = names or [r["label"] for r in rungs]
        y = [r["test_ppl"] for r in rungs]
        lo = [r["test_ppl"] - (r["test_ppl_ci"] or [r["test_ppl"]] * 2)[0] for r in rungs]
        hi = [(r["test_ppl_ci"] or [r["test_ppl"]] * 2)[1] - r["test_ppl"] for r in rungs]
        colour = plots.FAMILY_COLOURS["neural"] if i == 0 else plots.OKABE_ITO[(i + 4) % len(plots.OKABE_ITO)]
        ax.errorbar(range(len(y)), y, yerr=[lo, hi], marker=plots.MARKERS[i % len(plots.MARKERS)], capsize=3,
                    color=colour, linestyle=plots.DASHES[i % len(plots.DASHES)], label=lad["model_label"])
    from ..formatting import short_rung_label

    ax.set_xticks(range(len(names)))
    ax.set_xticklabels([short_rung_label(n) for n in names], rotation=25, ha="right", fontsize=8)
    ax.set_ylabel("test perplexity")
    ax.set_title("The ladder: each rung adds one idea (95 % bootstrap intervals)", fontsize=9)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7)
    return plots.png_bytes(fig)


TITLE = "The ladder: count ideas inside neural models"
HTML_TITLE = TITLE


SECTION = Section(name="ladder", anchor="ladder", title=TITLE, html_title=HTML_TITLE,
                  md=fragment("ladder.md.j2"), html=fragment("ladder.html.j2"),
                  compute=compute, context=context, plots={"ladder": ("The ladder: test perplexity per rung", figure)})
