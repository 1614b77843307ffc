"""SRILM's static mixture, compute-best-mix, entropy pruning and -limit-vocab, against files SRILM 1.7.3
wrote (``tests/data/srilm/tools/README.md``: the commands, on texts of the toy language).

Each ``--compat srilm`` result is compared with SRILM's file n-gram by n-gram: the same n-grams, and every
probability and back-off weight printed the same (SRILM prints 7 significant digits of a float; we redo its
float arithmetic, so the values are the same floats).  The default conventions are checked where they
differ from SRILM's, with the numbers worked out by hand from the same files.  None of this needs SRILM;
the last test runs the real SRILM on the real corpora when ``NGRAMLM_SRILM_BIN`` names its binaries.
"""
from __future__ import annotations

import gzip
import math
import os
import re
import subprocess
from pathlib import Path

import numpy as np
import pytest

from corpora.vocab import UNK_ID
from ngramlm import NgramLM
from ngramlm.io.arpa import write_arpa
from ngramlm.loading import load_any
from ngramlm.tools.mix import (best_mix_srilm, mix_tables, mix_tables_pairwise, own_token_log10, read_ppl_stream,
                               srilm_em_start, union_vocabulary)
from ngramlm.tools.pruning import (close_keep, context_parents, history_suffixes, ngram_words, pruning_ratios,
                                   prune_entropy)
from ngramlm.tools.vocab_filter import limit_vocabulary, read_word_list

DATA = Path(__file__).parent / "data" / "srilm" / "tools"
THRESHOLDS = ("1e-5", "6.197e-6")


# ----------------------------------------------------------------------------- helpers
def arpa_entries(path) -> dict:
    """{words: (log10 p, log10 back-off)} of an ARPA file, read by a parser of its own (not ours), so a
    comparison does not trust the reader under test.  -99 (SRILM's log 0) reads as -inf."""
    opener = gzip.open if str(path).endswith(".gz") else open
    out, order = {}, 0
    with opener(path, "rt", encoding="utf-8") as fh:
        for line in fh:
            line = line.rstrip("\n")
            m = re.fullmatch(r"\\(\d)-grams:", line)
            if m:
                order = int(m.group(1))
                continue
            if not order or not line or line.startswith("\\"):
                continue
            f = line.split("\t")
            lp = float(f[0])
            bo = float(f[2]) if len(f) > 2 else 0.0
            out[tuple(f[1].split(" "))] = (-math.inf if lp <= -99 else lp, -math.inf if bo <= -99 else bo)
    return out


def entries_of(tables_or_model, tmp_path, name="ours.arpa") -> dict:
    """What our ARPA writer writes for a model, read back by :func:`arpa_entries`."""
    model = tables_or_model
    if not hasattr(model, "order_"):
        model = NgramLM.from_tables(model, order=model.order, smoothing=None)
    write_arpa(model, tmp_path / name)
    return arpa_entries(tmp_path / name)


def counts_per_order(entries: dict) -> list:
    n = max(map(len, entries))
    return [sum(1 for g in entries if len(g) == k) for k in range(1, n + 1)]


def assert_same_model(ours: dict, srilm: dict) -> None:
    """The same n-grams (counts per order first, for a readable failure) and every value printed alike."""
    assert counts_per_order(ours) == counts_per_order(srilm)
    assert set(ours) == set(srilm)
    worst = max(abs(a - b) for g in srilm for a, b in zip(ours[g], srilm[g]) if a != b) if ours != srilm else 0.0
    assert ours == srilm, f"values differ, by up to {worst:g} in log10"


def srilm_ppl(name: str) -> float:
    """SRILM's ``ppl=`` for ``name`` in test-ppl.txt."""
    text = (DATA / "test-ppl.txt").read_text()
    block = text.split(f"== {name}\n", 1)[1].split("==", 1)[0]
    return float(re.search(r" ppl= ([0-9.e+]+)", block).group(1))


def srilm_lambdas(name: str) -> list:
    """compute-best-mix's ``best lambda (...)``, as printed."""
    line = (DATA / name).read_text().splitlines()[0]
    return re.search(r"best lambda \(([^)]*)\)", line).group(1).split()


def ppl_of(model, sentences) -> float:
    """Perplexity over every word and </s> (SRILM's ppl with -unk: an unknown word is scored as <unk>)."""
    enc, _ = model.encode(sentences)
    return model.perplexity_report(enc, oov=np.zeros(len(enc.ids), dtype=bool)).ppl


def load(name: str):
    return load_any(DATA / name, ngrams=True).build_index()


@pytest.fixture(scope="module")
def texts() -> dict:
    from corpora.toy import generate_corpus

    c = generate_corpus()
    return {"dev": c.splits["valid"][:300], "test": c.splits["test"][:300]}


@pytest.fixture(scope="module")
def three():
    return [load(f"toy{x}.3.arpa.gz") for x in "ABC"]


# ----------------------------------------------------------------------------- mixing
def test_two_models_mix_to_srilms_model(three, texts, tmp_path):
    a, b, _ = three
    tables = mix_tables_pairwise([a, b], weights=[0.6, 0.4], union=union_vocabulary([a, b], lacking="zero"))
    ours = entries_of(tables, tmp_path)
    assert_same_model(ours, arpa_entries(DATA / "mixAB.arpa.gz"))
    union = set(arpa_entries(DATA / "toyA.3.arpa.gz")) | set(arpa_entries(DATA / "toyB.3.arpa.gz"))
    assert set(ours) == union and counts_per_order(ours) == [2804, 15494, 1219]  # the union of the n-grams
    assert ppl_of(load_any(tmp_path / "ours.arpa"), texts["test"]) == pytest.approx(srilm_ppl("mixAB"), rel=1e-6)


def test_three_models_mix_pairwise_as_srilm_does(run_cli, texts, tmp_path):
    out = tmp_path / "mix.arpa"
    code, stdout, err = run_cli("mix", *(DATA / f"toy{x}.3.arpa.gz" for x in "ABC"), "--lambda", "0.5,0.3,0.2",
                                "--compat", "srilm", "-o", out)
    assert code == 0, err
    assert "probability 0 from that model (SRILM's convention)" in err
    assert_same_model(arpa_entries(out), arpa_entries(DATA / "mixABC.arpa.gz"))
    assert ppl_of(load_any(out), texts["test"]) == pytest.approx(srilm_ppl("mixABC"), rel=1e-6)


def test_one_step_mixture_of_three_is_not_srilms(three, tmp_path):
    """Mixing the three at once (ours) differs from SRILM's A+B, then +C, where back-offs differ: same
    n-grams, other numbers."""
    union = union_vocabulary(three, lacking="zero")
    ours = entries_of(mix_tables(three, weights=[0.5, 0.3, 0.2], union=union, compat="srilm"), tmp_path)
    srilm = arpa_entries(DATA / "mixABC.arpa.gz")
    assert set(ours) == set(srilm)
    worst = max(abs(ours[g][0] - srilm[g][0]) for g in srilm if len(g) == 3)
    assert 1e-3 < worst < 0.5


def test_a_word_one_model_lacks(three, tmp_path):
    """SRILM: a word only B has keeps 0.4 p_B(w) in the mixture, and <unk> gets 0.6 p_A(<unk>) + 0.4
    p_B(<unk>).  Ours (the default): A gives the word a share of its <unk> probability instead, so the word
    gets more and <unk> less -- both distributions over the union."""
    a, b, _ = three
    ea, eb = arpa_entries(DATA / "toyA.3.arpa.gz"), arpa_entries(DATA / "toyB.3.arpa.gz")
    srilm = arpa_entries(DATA / "mixAB.arpa.gz")
    only_b = sorted(g for g in eb if len(g) == 1 and g not in ea)
    assert len(only_b) == 513
    w = only_b[0]
    assert srilm[w][0] == pytest.approx(math.log10(0.4 * 10 ** eb[w][0]), abs=1e-6)
    unk = ("<unk>",)
    assert srilm[unk][0] == pytest.approx(math.log10(0.6 * 10 ** ea[unk][0] + 0.4 * 10 ** eb[unk][0]), abs=1e-6)
    ours = entries_of(mix_tables([a, b], weights=[0.6, 0.4]), tmp_path)
    # By hand (tools/mix.py's docstring): model i gives a word it lacks p_i(<unk>) q(w) / Z_i, and <unk>
    # itself p_i(<unk>)^2 / Z_i, with Z_i = p_i(<unk>) + the other model's unigram mass of those words.
    pa, pb = ({g[0]: 10 ** v[0] for g, v in e.items() if len(g) == 1 and v[0] > -math.inf} for e in (ea, eb))
    z_a = pa["<unk>"] + sum(p for v, p in pb.items() if v not in pa)
    z_b = pb["<unk>"] + sum(p for v, p in pa.items() if v not in pb)
    assert ours[w][0] == pytest.approx(math.log10(0.6 * pa["<unk>"] * pb[w[0]] / z_a + 0.4 * pb[w[0]]), abs=1e-6)
    assert ours[unk][0] == pytest.approx(math.log10(0.6 * pa["<unk>"] ** 2 / z_a + 0.4 * pb["<unk>"] ** 2 / z_b),
                                         abs=1e-6)
    assert ours[w][0] > srilm[w][0] and ours[unk][0] < srilm[unk][0] - 1.0
    assert counts_per_order(ours) == counts_per_order(srilm)  # the same n-grams, other numbers


# ----------------------------------------------------------------------------- compute-best-mix
@pytest.mark.parametrize("names", ["AB", "ABC"])
def test_best_mix_on_srilms_streams_prints_its_weights(names):
    streams = np.stack([read_ppl_stream(DATA / f"dev.toy{x}.ppl.gz") for x in names])
    fit = best_mix_srilm(streams)
    assert fit.converged and fit.tokens == 3883  # compute-best-mix's "3883 non-oov words"
    assert [f"{w:.6g}" for w in fit.weights] == srilm_lambdas(f"bestmix.{names}.txt")


def test_best_mix_on_our_streams_prints_srilms_weights(three, texts, run_cli, tmp_path):
    union = union_vocabulary(three, lacking="zero")
    enc = union.vocab.encode_sentences(texts["dev"])
    ours = np.stack([own_token_log10(m, enc, union=union, index=i) for i, m in enumerate(three)])
    srilm = np.stack([read_ppl_stream(DATA / f"dev.toy{x}.ppl.gz") for x in "ABC"])
    # SRILM prints each log10 p with 7 significant digits: half a unit of the last one apart at most.
    assert np.all(np.abs(ours - srilm) <= 5.01e-7 * np.maximum(np.abs(srilm), 1.0))
    assert srilm_em_start(3) == [0.5, 0.25, 0.25]
    dev = tmp_path / "dev.txt"
    dev.write_text("".join(" ".join(s) + "\n" for s in texts["dev"]))
    code, out, err = run_cli("mix", *(DATA / f"toy{x}.3.arpa.gz" for x in "ABC"), "--best-mix", dev,
                             "--compat", "srilm", "-o", tmp_path / "m.arpa")
    assert code == 0, err
    assert f"lambda {','.join(srilm_lambdas('bestmix.ABC.txt'))}\n" in out


# ----------------------------------------------------------------------------- pruning
@pytest.fixture(scope="module")
def kn5():
    return load("toy5.kn.arpa.gz")


@pytest.mark.parametrize("threshold", THRESHOLDS)
def test_prune_keeps_what_srilm_keeps(kn5, threshold, texts, tmp_path):
    ours = entries_of(prune_entropy(kn5, float(threshold), compat="srilm"), tmp_path)
    assert_same_model(ours, arpa_entries(DATA / f"toy5.prune{threshold}.arpa.gz"))
    pruned = load_any(tmp_path / "ours.arpa")
    assert ppl_of(pruned, texts["test"]) == pytest.approx(srilm_ppl(f"toy5.prune{threshold}"), rel=1e-6)


def test_prune_cli_is_srilms(run_cli, tmp_path):
    out = tmp_path / "p.arpa"
    code, stdout, err = run_cli("prune", DATA / "toy5.kn.arpa.gz", "--threshold", "1e-5", "--compat", "srilm",
                                "-o", out)
    assert code == 0, err
    srilm = arpa_entries(DATA / "toy5.prune1e-5.arpa.gz")
    assert counts_per_order(srilm) == [1247, 3513, 464, 34, 9]
    assert_same_model(arpa_entries(out), srilm)


def test_history_suffixes_are_kept(kn5):
    """SRILM keeps not only the context of a kept n-gram but every suffix of a kept history (its trie of
    histories needs their nodes): at 1e-5 that is 5 bigrams and 5 trigrams more than contexts alone keep."""
    ratios = pruning_ratios(kn5, compat="srilm")
    scored = [None] + [r >= 1e-5 for r in ratios[1:]]
    contexts_only = [None] + [m.copy() for m in scored[1:]]
    parents = context_parents(kn5)
    for k in range(kn5.order_, 2, -1):
        contexts_only[k - 2][parents[k - 1][contexts_only[k - 1]]] = True
    srilm = close_keep([None] + [m.copy() for m in scored[1:]], parents, history_suffixes(kn5))
    assert [int(m.sum()) for m in scored[1:]] == [3501, 454, 33, 9]
    assert [int(m.sum()) for m in contexts_only[1:]] == [3508, 459, 34, 9]
    assert [int(m.sum()) for m in srilm[1:]] == [3513, 464, 34, 9]
    # each extra one is a suffix of the history of a kept longer n-gram
    kept = {k: {tuple(g) for g in ngram_words(kn5, k)[srilm[k - 1]]} for k in range(2, kn5.order_ + 1)}
    for k in (2, 3):
        extra = {tuple(g) for g in ngram_words(kn5, k)[srilm[k - 1] & ~contexts_only[k - 1]]}
        inside = {h[j:j + k] for n in range(k + 2, kn5.order_ + 1) for h in kept[n] for j in range(1, n - k)}
        assert extra and extra <= inside


def test_double_precision_scores_differ_from_srilms_only_at_ties(kn5, tmp_path):
    """Without --compat srilm the scores are exact (double precision); SRILM's carry ~1e-5 of relative
    error from its float log probabilities.  At 6.197e-6 that flips four bigrams: SRILM keeps them, we
    prune them; every other n-gram and the whole model at 1e-5 are the same."""
    srilm = arpa_entries(DATA / "toy5.prune6.197e-6.arpa.gz")
    ours = entries_of(prune_entropy(kn5, 6.197e-6), tmp_path)
    missing = set(srilm) - set(ours)
    assert not set(ours) - set(srilm)
    assert sorted(missing) == [("<s>", "chyoubust"), ("<s>", "plegrus"), ("<s>", "zairoux"), ("<s>", "zeuki")]
    f32, f64 = pruning_ratios(kn5, compat="srilm")[1], pruning_ratios(kn5)[1]
    itos = kn5.vocab_.itos_
    rows = [i for i, g in enumerate(ngram_words(kn5, 2)) if (itos[g[0]], itos[g[1]]) in missing]
    assert all(f64[i] < 6.197e-6 <= f32[i] for i in rows)
    assert set(entries_of(prune_entropy(kn5, 1e-5), tmp_path, "b.arpa")) == set(
        arpa_entries(DATA / "toy5.prune1e-5.arpa.gz"))


# ----------------------------------------------------------------------------- -limit-vocab
@pytest.mark.parametrize("renorm", [False, True])
def test_limit_vocab_is_srilms(three, renorm, texts, tmp_path):
    words = read_word_list(DATA / "words.txt")
    res = limit_vocabulary(three[0], words=words, compat="srilm", renorm=renorm)
    name = "toyA.limit-renorm" if renorm else "toyA.limit"
    ours = entries_of(res.tables, tmp_path)
    assert_same_model(ours, arpa_entries(DATA / f"{name}.arpa.gz"))
    assert res.missing == ["zzqx", "qqqz"]
    pa = arpa_entries(DATA / "toyA.3.arpa.gz")
    if renorm:
        # The mass of the 1,144 removed words goes to the two listed words A lacks, half each.
        removed = sum(10 ** v[0] for g, v in pa.items() if len(g) == 1 and g not in ours)
        assert ours[("zzqx",)][0] == pytest.approx(math.log10(removed / 2), abs=1e-6)
        assert ours[("<unk>",)] == pa[("<unk>",)]
    else:
        # Nothing changes but what is dropped: every kept value is A's own.
        assert all(ours[g] == pa[g] for g in ours)
    assert ppl_of(load_any(tmp_path / "ours.arpa"), texts["test"]) == pytest.approx(srilm_ppl(name), rel=1e-6)


def test_filter_cli_srilm(run_cli, tmp_path):
    out = tmp_path / "lim.arpa"
    code, stdout, err = run_cli("filter", DATA / "words.txt", DATA / "toyA.3.arpa.gz", "--compat", "srilm", "-o", out)
    assert code == 0, err
    assert "SRILM's -limit-vocab: no number changed" in stdout
    assert_same_model(arpa_entries(out), arpa_entries(DATA / "toyA.limit.arpa.gz"))
    code, _, err = run_cli("filter", DATA / "words.txt", DATA / "toyA.3.arpa.gz", "--renorm", "-o", out)
    assert code != 0 and "--compat srilm" in err


def test_default_filter_gives_removed_mass_to_unk(three):
    """Ours (the default) is a distribution over the list and <unk>: <unk> gets the removed words' unigram
    probability, where SRILM's -limit-vocab -renorm spreads it over the missing words."""
    words = read_word_list(DATA / "words.txt")
    res = limit_vocabulary(three[0], words=words)
    p = 10.0 ** np.asarray(res.tables.log10_prob[0])
    assert p[UNK_ID] == pytest.approx(res.unk_prob_after) and res.unk_prob_after > 100 * res.unk_prob_before
    assert p.sum() == pytest.approx(1.0, abs=1e-6)  # (SRILM's unigrams of A sum to 1 within 1e-7)


# ----------------------------------------------------------------------------- the real SRILM, real corpora
@pytest.mark.slow
def test_against_srilm_itself_on_ptb_and_time_machine(shared_corpora, run_cli, tmp_path):
    """The brief's own check, run when the SRILM binaries are at hand (``NGRAMLM_SRILM_BIN``): PTB and Time
    Machine 3-grams mixed, tuned and a PTB 5-gram pruned, by SRILM and by us, compared file to file."""
    srilm_bin = os.environ.get("NGRAMLM_SRILM_BIN")
    if not srilm_bin or not (Path(srilm_bin) / "ngram").exists():
        pytest.skip("set NGRAMLM_SRILM_BIN to the folder of SRILM's ngram, ngram-count and compute-best-mix")
    from corpora import load_corpus

    def srilm(tool, *args):
        return subprocess.run([str(Path(srilm_bin) / tool), *map(str, args)], check=True, capture_output=True,
                              text=True).stdout

    ptb = shared_corpora / "ptb"
    tm = load_corpus("timemachine", data_dir=shared_corpora)
    for split in ("train", "valid", "test"):
        (tmp_path / f"tm.{split}.txt").write_text("".join(" ".join(s) + "\n" for s in tm.sentences(split)))
    for name, text in (("ptb3", ptb / "ptb.train.txt"), ("tm3", tmp_path / "tm.train.txt")):
        srilm("ngram-count", "-order", 3, "-unk", "-kndiscount", "-interpolate", "-text", text,
              "-lm", tmp_path / f"{name}.arpa")
    a, b = tmp_path / "ptb3.arpa", tmp_path / "tm3.arpa"
    srilm("ngram", "-order", 3, "-unk", "-lm", a, "-mix-lm", b, "-lambda", 0.5, "-write-lm", tmp_path / "s.arpa")
    code, _, err = run_cli("mix", a, b, "--lambda", "0.5,0.5", "--compat", "srilm", "-o", tmp_path / "o.arpa")
    assert code == 0, err
    assert_same_model(arpa_entries(tmp_path / "o.arpa"), arpa_entries(tmp_path / "s.arpa"))
    for test in (ptb / "ptb.test.txt", tmp_path / "tm.test.txt"):
        out = srilm("ngram", "-order", 3, "-unk", "-lm", tmp_path / "s.arpa", "-ppl", test)
        sentences = [line.split() for line in test.read_text().splitlines()]
        ours = ppl_of(load_any(tmp_path / "o.arpa"), sentences)
        assert ours == pytest.approx(float(re.search(r" ppl= ([0-9.e+]+)", out).group(1)), rel=1e-6)
    dev = tmp_path / "tm.valid.txt"
    for m in (a, b):
        (tmp_path / f"{m.stem}.ppl").write_text(srilm("ngram", "-order", 3, "-unk", "-lm", m, "-debug", 2, "-ppl", dev))
    line = srilm("compute-best-mix", tmp_path / "ptb3.ppl", tmp_path / "tm3.ppl").splitlines()[0]
    code, out, err = run_cli("mix", a, b, "--best-mix", dev, "--compat", "srilm", "-o", tmp_path / "t.arpa")
    assert code == 0, err
    assert "lambda " + ",".join(re.search(r"best lambda \(([^)]*)\)", line).group(1).split()) + "\n" in out
    kn5 = tmp_path / "kn5.arpa"
    srilm("ngram-count", "-order", 5, "-unk", "-kndiscount", "-interpolate", "-gt3min", 1, "-gt4min", 1,
          "-gt5min", 1, "-text", ptb / "ptb.train.txt", "-lm", kn5)
    srilm("ngram", "-order", 5, "-unk", "-lm", kn5, "-prune", "1e-8", "-write-lm", tmp_path / "sp.arpa")
    code, _, err = run_cli("prune", kn5, "--threshold", "1e-8", "--compat", "srilm", "-o", tmp_path / "op.arpa")
    assert code == 0, err
    assert_same_model(arpa_entries(tmp_path / "op.arpa"), arpa_entries(tmp_path / "sp.arpa"))
