"""Section: the ladder (``compare --ladder``) -- count ideas put back into each neural model, one rung at a
time, on the same test tokens: + neural cache, + dynamic evaluation, + the n-gram model (one global
weight, then weights per context), + the ∞-gram (the computing is :mod:`reports.experiments.ladder`)."""
from __future__ import annotations

from pathlib import Path
from typing import Optional

from .. import plots
from ..formatting import fmt_fixed
from .base import Section


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
        out.append({"label": lad["model_label"], "id": lad["model_id"], "rows": rows, "steps": steps,
                    "seconds": _fmt_s(lad["adaptation_seconds"])})
    return {"ladder": out}


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
    return plots._png(fig)


TITLE = "The ladder: count ideas inside neural models"
HTML_TITLE = TITLE

MD = r"""{% if ladder %}

Each rung adds one idea to the one before, on the same test tokens, every weight tuned on valid: a neural cache over the model's states (Grave et al. 2017), dynamic evaluation (Krause et al. 2018), the n-gram model with one global weight, then with weights that depend on how much of the history the n-gram model knows, then the ∞-gram.
{% for lad in ladder %}

**{{ lad.label }}** (adaptation and scoring {{ lad.seconds }})

| rung | test ppl | 95 % CI | valid ppl | bits/token | extra time | parameters |
|---|---:|---:|---:|---:|---:|---|
{% for r in lad.rows %}
| {% if not r.rung %}(alone) {% endif %}{{ r.label }} | {{ r.test }}{% if r.star %} ★{% endif %} | {{ r.ci }} | {{ r.valid }} | {{ r.bits }} | {{ r.extra }} | {{ r.params }} |
{% endfor %}
{% if loop.first %}
{% for st in lad.steps %}

*{{ st.title }}*: {{ st.mean }} bits per token; by kind of token: {% for k in st.kinds %}{{ k.kind }} {{ k.gain }}{% if not loop.last %}; {% endif %}{% endfor %}.
{% endfor %}
{% endif %}
{% endfor %}
{% if plots.ladder %}

![{{ plots.ladder.title }}]({{ plots.ladder.file }})
{% endif %}
{% else %}

Not run: `ngramlm compare CORPUS --ladder` climbs it for each neural model (`--checkpoint MODEL.pt` adopts a model trained elsewhere).
{% endif %}

"""

HTML = r"""{% if ladder %}
<p class="note">Each rung adds one idea to the one before, on the same test tokens, every weight tuned on valid: a neural cache over the model's states (Grave et al. 2017), dynamic evaluation (Krause et al. 2018), the n-gram model with one global weight, then with weights that depend on how much of the history the n-gram model knows, then the ∞-gram.</p>
{% for lad in ladder %}
<p><b>{{ lad.label }}</b> (adaptation and scoring {{ lad.seconds }})</p>
<table id="ladder-{{ loop.index }}">
<thead><tr><th>rung</th><th>test ppl</th><th>95 % CI</th><th>valid ppl</th><th>bits/token</th><th>extra time</th><th>parameters</th></tr></thead>
<tbody>
{% for r in lad.rows %}<tr class="{{ r.family }}"><td>{% if not r.rung %}(alone) {% endif %}{{ r.label }}</td><td class="num" data-v="{{ r.test_v }}">{% if r.star %}<b>{{ r.test }} ★</b>{% else %}{{ r.test }}{% endif %}</td><td class="num">{{ r.ci }}</td><td class="num">{{ r.valid }}</td><td class="num">{{ r.bits }}</td><td class="num" data-v="{{ r.extra_v }}">{{ r.extra }}</td><td>{{ r.params }}</td></tr>
{% endfor %}
</tbody>
</table>
{% if loop.first %}
{% for st in lad.steps %}
<details><summary>{{ st.title }}: {{ st.mean }} bits per token</summary>
<table id="ladder-gain-{{ loop.index }}"><thead><tr><th>kind of token</th><th>share</th><th>bits gained per token</th></tr></thead><tbody>
{% for k in st.kinds %}<tr><td>{{ k.kind }}</td><td class="num">{{ k.share }}</td><td class="num">{{ k.gain }}</td></tr>
{% endfor %}</tbody></table>
<table class="nosort"><thead><tr><th>context</th><th>token</th><th>bits before</th><th>bits after</th></tr></thead><tbody>
{% for t in st.tokens %}<tr><td>… {{ t.context }}</td><td><b>{{ t.token }}</b></td><td class="num">{{ "%.2f"|format(t.bits_before) }}</td><td class="num">{{ "%.2f"|format(t.bits_after) }}</td></tr>
{% endfor %}</tbody></table>
</details>
{% endfor %}
{% endif %}
{% endfor %}
{% if plots.ladder %}<figure><img id="plot-ladder" alt="{{ plots.ladder.title }}" src="data:image/png;base64,{{ plots.ladder.b64 }}"></figure>{% endif %}
{% else %}<p class="note">Not run: <code>ngramlm compare CORPUS --ladder</code> climbs it for each neural model (<code>--checkpoint MODEL.pt</code> adopts a model trained elsewhere).</p>{% endif %}

"""

SECTION = Section(name="ladder", anchor="ladder", title=TITLE, html_title=HTML_TITLE, md=MD, html=HTML,
                  compute=compute, context=context, plots={"ladder": ("The ladder: test perplexity per rung", figure)})
