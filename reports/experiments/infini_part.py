"""The comparison's "n → ∞" section: the ∞-gram on the run's own corpus and vocabulary.

The ∞-gram (``ngramlm.infini.index``) is indexed on the training split and scored on valid and test.
Alone it gives zero probability wherever the longest matching history was never followed by the
word, so its rows are mixtures: with the best n-gram model and with each neural model, weights
(one for sparse estimates, one for the rest) tuned on valid.  The section also shows how long a
history the training text supports (the effective n at every test token) and, per effective n,
where the mixture beats or loses to its partner.
"""
from __future__ import annotations

import math
from typing import Optional

import numpy as np

LOG10_2 = math.log10(2.0)
BUCKETS = 10  # effective n 1 .. 9, then "10+"


def _score(log2p: np.ndarray) -> dict:
    from .analysis import score_from_bits

    return score_from_bits(float(-log2p.mean()) if len(log2p) else float("nan"), len(log2p),
                           int(np.isneginf(log2p).sum()))


def infini_section(data, partners: list, arrays: dict) -> Optional[dict]:
    """``(section, {row id: {"valid": log2p, "test": log2p}})`` for the report (the ∞-gram's queries
    run in C, or in numpy without the compiled extension: the same numbers)."""
    from ngramlm.infini.index import InfiniIndex, mixture_log10, tune_lambdas

    import time

    t0 = time.perf_counter()
    idx = InfiniIndex.build(data["train"], data.vocab)
    build_seconds = time.perf_counter() - t0
    sc = {split: idx.score(data[split]) for split in ("valid", "test")}
    test = sc["test"]
    eff = np.minimum(test.eff_n, BUCKETS)
    rows, new_arrays, by_n = [], {}, []
    for p in partners:
        a = arrays[p["id"]]
        lam = tune_lambdas(sc["valid"], a["valid"] * LOG10_2)
        mixed = {split: mixture_log10(sc[split], a[split] * LOG10_2, lam) / LOG10_2 for split in ("valid", "test")}
        rid = f"infini+{p['id']}"
        rows.append({"id": rid, "family": "infini", "model": "infini", "label": f"∞-gram + {p['label']}",
                     "size": None, "train_seconds": None, "note": f"λ sparse {lam[0]:.2f}, dense {lam[1]:.2f}",
                     "components": ["infini", p["id"]], "lambdas": {"sparse": lam[0], "dense": lam[1]},
                     "partner_valid": p["valid"], "partner_test": p["test"],
                     "valid": _score(mixed["valid"]), "test": _score(mixed["test"]), "is_distribution": True})
        new_arrays[rid] = mixed
        for k in range(1, BUCKETS + 1):
            m = eff == k
            if not m.any():
                continue
            by_n.append({"partner": p["id"], "label": p["label"], "effective_n": k, "tokens": int(m.sum()),
                         "bits_partner": float(-a["test"][m].mean()), "bits_mixture": float(-mixed["test"][m].mean()),
                         # standard errors of those means (the figure's error bars)
                         "se_partner": float(a["test"][m].std() / np.sqrt(m.sum())),
                         "se_mixture": float(mixed["test"][m].std() / np.sqrt(m.sum()))})
    hist = np.bincount(eff, minlength=BUCKETS + 1)[1:]
    accuracy = idx.accuracy_by_n(data["test"], test, buckets=BUCKETS)
    alone = {"id": "infini", "family": "infini", "model": "infini", "label": "∞-gram (alone)",
             "size": int(len(idx.tokens)), "size_unit": "indexed tokens", "train_seconds": build_seconds,
             "is_distribution": False, "note": "zero wherever the longest matching history never saw the word",
             **{split: {"tokens": len(x.eff_n), "zero_probs": int((x.cnt_hw == 0).sum()), "ppl": None,
                        "log2prob": None} for split, x in sc.items()}}
    return {
        "alone": alone,
        "index_tokens": int(len(idx.tokens)), "index_bytes_per_token": idx.nbytes / max(1, len(idx.tokens)),
        "mean_effective_n": float(test.eff_n.mean()), "max_effective_n": int(test.eff_n.max()),
        "effective_n_hist": hist.tolist(), "buckets": [str(k) for k in range(1, BUCKETS)] + [f"{BUCKETS}+"],
        "zero_share": float((test.cnt_hw == 0).mean()), "sparse_share": float(test.sparse.mean()),
        "sparse_correct": float((test.cnt_hw[test.sparse] == test.cnt_h[test.sparse]).mean())
        if test.sparse.any() else None,
        "rows": rows, "by_n": by_n, "accuracy_by_n": accuracy,
    }, new_arrays
