"""The long-range dependency the chapter opens with, pointed out in the toy language.

"He comes from France ... and speaks fluent [French]": a fixed window (the Markov
assumption, an n-gram's n-1 words) cannot carry "France" across an arbitrarily long
filler.  The toy language (docs/toy_language.md) has exactly this construction -- an
origin word, a filler of ordinary clauses that does not depend on it, a cue word, then
the origin's language word (90 % of the time) -- and, unlike real text, its true
distribution is known.  The lab scores every language word of the toy test split:

- under the true language (which remembers the origin: about 0.1 bit when the language
  word is the expected one);
- under a "forgetful" version of the truth that knows the grammar but not the origin
  (exactly -log2 of the word's Zipf weight: the best any model without the origin can do);
- under modified Kneser-Ney 3- and 5-grams trained on the toy train split,

and breaks the cost down by the distance between the origin word and the language word:
the 5-gram pays the forgetful price as soon as the origin is more than 4 words back.
"""
from __future__ import annotations

import math

import numpy as np

from ._common import pyplot
from . import LABS
from .output import Figure, LabResult, Table, png_of

NAME = "long-range"
SECTION = LABS[NAME].section
BUCKETS = ((2, 2), (3, 4), (5, 8), (9, 16), (17, 10 ** 9))


def bucket_label(lo: int, hi: int) -> str:
    return f"{lo}" if lo == hi else (f"{lo}+" if hi > 10 ** 6 else f"{lo}-{hi}")


def find_pairs(sentences: list, lang) -> list:
    """(sentence index, token index of the language word, distance from its origin word)."""
    out = []
    for s, sent in enumerate(sentences):
        origin_at = None
        for i, w in enumerate(sent):
            c = lang.word_class.get(w)
            if c == "ORIGIN":
                origin_at = i
            elif c == "DEP" and i > 0 and lang.word_class.get(sent[i - 1]) == "CUE" and origin_at is not None:
                out.append((s, i, i - origin_at))
                origin_at = None
    return out


def _figures(plt, orders, series, by_bucket) -> tuple:
    """The two figures as PNG bytes: mean bits at the language word by distance (bars), and the histogram of the
    bits for the truth and the highest order."""
    big = max(orders)
    colours = {"true language": "#000000", "truth without the origin": "#999999",
               f"MKN {min(orders)}-gram": "#E69F00", f"MKN {big}-gram": "#D55E00"}
    fig, ax = plt.subplots(figsize=(7, 4))
    xs = np.arange(len(BUCKETS))
    width = 0.8 / len(series)
    for j, (k, _) in enumerate(series.items()):
        ax.bar(xs + (j - (len(series) - 1) / 2) * width, [r[k] for r in by_bucket], width,
               color=colours.get(k, None), label=k)
    ax.set_xticks(xs)
    ax.set_xticklabels([f"{r['distance']}\n(n={r['n']})" for r in by_bucket])
    ax.set_xlabel("words from the origin word to the language word")
    ax.set_ylabel("mean bits at the language word")
    top = max(r[k] for r in by_bucket for k in series if not math.isnan(r[k]))
    ax.set_ylim(0, top * 1.35)  # room for the legend above the bars
    ax.legend(fontsize=8, ncol=2, loc="upper center")
    bars = png_of(fig)

    fig, ax = plt.subplots(figsize=(7, 4))
    bins = np.linspace(0, max(max(v) for v in series.values()) + 0.5, 40)
    for k in ("true language", f"MKN {big}-gram"):
        ax.hist(series[k], bins=bins, alpha=0.6, color=colours[k], label=k)
    ax.set_xlabel("bits at the language word")
    ax.set_ylabel("occurrences")
    ax.legend()
    hist = png_of(fig)

    return bars, hist


def run(*, seed: int = 0, quick: bool = False, orders=(3, 5)) -> LabResult:
    from corpora import load_corpus, prepare
    from corpora.toy import ToyConfig, ToyLanguage
    from ngramlm import NgramLM

    plt = pyplot()
    corpus = load_corpus("toy")  # the default toy corpus (ToyConfig()); deterministic, the seed is not used
    lang = ToyLanguage(ToyConfig())
    ds = prepare(corpus)
    test_sents = corpus.splits["test"]
    if quick:
        test_sents = test_sents[:600]
    test = ds.vocab.encode_sentences(test_sents)
    starts = test.starts
    pairs = find_pairs(test_sents, lang)
    z = lang._zipf["DEP"]
    dep_rank = {w: j for j, w in enumerate(lang.classes["DEP"])}

    truth, forgetful = [], []
    for s, i, _ in pairs:
        sent = test_sents[s]
        p = lang.next_word_distribution(sent[:i]).get(sent[i], 0.0)
        truth.append(-math.log2(p))
        forgetful.append(-math.log2(z[dep_rank[sent[i]]]))
    models = {}
    for n in orders:
        lm = NgramLM(order=n, smoothing="mkn").fit(ds["train"], vocab=ds.vocab)
        sc = lm.token_scores(test)
        bits = -sc.log10_prob / math.log10(2)
        models[f"MKN {n}-gram"] = {"at_dep": [float(bits[starts[s] + i]) for s, i, _ in pairs],
                                   "all_tokens": float(bits.mean())}
    # the true language over the whole test text, for scale
    total_truth = 0.0
    n_tok = 0
    for sent in test_sents:
        total_truth -= lang.sentence_log2prob(sent)
        n_tok += len(sent) + 1
    dist = np.array([d for _, _, d in pairs])
    series = {"true language": truth, "truth without the origin": forgetful,
              **{k: v["at_dep"] for k, v in models.items()}}

    by_bucket = []
    for lo, hi in BUCKETS:
        sel = (dist >= lo) & (dist <= hi)
        row = {"distance": bucket_label(lo, hi), "n": int(sel.sum())}
        for k, v in series.items():
            row[k] = float(np.mean(np.array(v)[sel])) if sel.any() else float("nan")
        by_bucket.append(row)
    means = {k: float(np.mean(v)) for k, v in series.items()}
    medians = {k: float(np.median(v)) for k, v in series.items()}
    big = max(orders)
    far = dist > big - 1  # origin outside the n-gram's window
    far_mean = {k: float(np.mean(np.array(v)[far])) for k, v in series.items()}

    bars, hist = _figures(plt, orders, series, by_bucket)

    # One example sentence with a long filler.
    far_idx = [j for j, d in enumerate(dist) if d >= 8]
    ex = pairs[far_idx[0]] if far_idx else pairs[0]
    ex_sent = test_sents[ex[0]]
    example = " ".join(f"[{w}]" if j in (ex[1] - ex[2], ex[1]) else w for j, w in enumerate(ex_sent))

    headline = [
        ("language words in the test text", f"{len(pairs)} (origin > {big - 1} words back: {int(far.sum())})"),
        ("bits at the language word, median: truth / MKN " + " / MKN ".join(map(str, orders)),
         " / ".join(f"{medians[k]:.2f}" for k in ["true language"] + [f"MKN {n}-gram" for n in orders])),
        ("bits at the language word, mean: truth / truth without the origin / MKN "
         + " / MKN ".join(map(str, orders)),
         " / ".join(f"{means[k]:.2f}" for k in series)),
        (f"mean bits when the origin is > {big - 1} words back: truth / MKN {big}-gram",
         f"{far_mean['true language']:.2f} / {far_mean[f'MKN {big}-gram']:.2f}"),
        ("bits per token over the whole test text: truth / MKN " + " / MKN ".join(map(str, orders)),
         " / ".join([f"{total_truth / n_tok:.3f}"] + [f"{models[f'MKN {n}-gram']['all_tokens']:.3f}" for n in orders])),
    ]
    return LabResult(
        name=NAME,
        title="The long-range dependency: what a fixed window cannot see",
        section=SECTION,
        intro=("Default toy corpus; every test-split language word that follows a cue, scored by the true language, "
               "by the truth with the origin forgotten, and by MKN n-grams trained on the train split.  Example "
               f"(origin and language word in brackets): {example}"),
        headline=headline,
        results={"quick": quick, "n_pairs": len(pairs), "orders": list(orders), "mean_bits": means,
                 "median_bits": medians, "far_mean_bits": far_mean, "by_distance": by_bucket,
                 "bits_per_token": {"truth": total_truth / n_tok,
                                    **{k: v["all_tokens"] for k, v in models.items()}},
                 "example": example},
        tables=[Table("Mean bits at the language word by distance from the origin",
                      ["distance", "n"] + list(series),
                      [[r["distance"], str(r["n"])] + [f"{r[k]:.2f}" for k in series] for r in by_bucket])],
        figures=[Figure("by_distance", "The n-gram pays once the origin leaves its window", bars),
                 Figure("histogram", "Bits at the language word: truth vs the 5-gram", hist)],
    )
