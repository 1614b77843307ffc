"""`ngramlm compare` / `ngramlm report`: real values from a quick run on the toy corpus.

One quick run (toy corpus with 20k training tokens, orders 1-3, tiny neural models,
one epoch) is shared by the module; the tests check its numbers against the n-gram
code computed independently, then re-run it to check the cache, the refusals and the
re-rendering.  The browser test opens report.html in headless Chromium when it is
installed (skipped otherwise) and keeps a screenshot in test-artifacts/.
"""
from __future__ import annotations

import json
import math
import os
import re
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest

# The report extra draws and templates; its quick run trains tiny neural models (the neural extra).
for _mod, _extra in (("matplotlib", "report"), ("jinja2", "report"), ("torch", "neural")):
    pytest.importorskip(_mod, reason=f"the {_extra} extra is not installed (pip install -e '.[{_extra}]')")

from corpora.vocab import UNK_ID  # noqa: E402
from ngramlm import NgramCounts, NgramLM  # noqa: E402
from reports.experiments.analysis import choose_passage, mixture_bits, normalise, tune_lambda  # noqa: E402
from reports import plots  # noqa: E402
from reports.experiments.data import load_data  # noqa: E402
from reports.render.report import build_context, fmt_budget, fmt_fixed  # noqa: E402
from reports.experiments.settings import CompareSettings, quick_settings  # noqa: E402

REPO = Path(__file__).resolve().parent.parent
ARTIFACTS = REPO / "test-artifacts"
CHROMIUM = "/usr/bin/chromium"


def cli(*args):
    """Run ``ngramlm ARGS`` in-process: ``(exit code, stdout, stderr)``."""
    from conftest import invoke_cli

    return invoke_cli(args)


@pytest.fixture(scope="module")
def quick_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("compare") / "quick"
    code, stdout, stderr = cli("compare", "--quick", "--out", out)
    assert code == 0, stderr
    results = json.loads((out / "results.json").read_text())
    return out, results, stdout, stderr


@pytest.fixture(scope="module")
def data():
    return load_data(quick_settings())


def rows(results, family):
    return {r["id"]: r for r in results[family]}


# ---------------------------------------------------------------------------- results.json
def test_results_fields(quick_run):
    out, res, stdout, _ = quick_run
    s = quick_settings()
    assert res["format"] == "ngramlm.compare" and res["status"] == "complete"
    assert res["settings"]["max_order"] == 3 and res["settings"]["neural_epochs"] == 1
    ng = rows(res, "ngram")
    assert set(ng) == {f"{sm}-{n}" for sm in s.smoothers for n in (1, 2, 3)}
    nn = rows(res, "neural")
    assert set(nn) == {"lstm", "transformer"}
    for r in list(ng.values()) + list(nn.values()):
        assert r["train_seconds"] >= 0 and r["size"] > 0 and r["cached"] is False
        assert r["valid"]["tokens"] == res["corpus"]["sizes"]["valid"]["tokens"]
        assert r["test"]["tokens"] == res["corpus"]["sizes"]["test"]["tokens"]
        assert r["settings"] and r["key"]
    assert nn["lstm"]["size_unit"] == "parameters" and ng["mkn-3"]["size_unit"] == "n-gram entries"
    # Every model predicts the same tokens: the n-gram and neural token counts agree.
    assert nn["lstm"]["test"]["tokens"] == ng["mkn-3"]["test"]["tokens"]
    # Toy: the floor is the true perplexity, and every proper model is above it.
    truth = res["corpus"]["truth"]["test"]
    assert 20 < truth["perplexity"] < 200
    for r in list(ng.values()) + list(nn.values()):
        if r["test"]["ppl"] is not None:
            assert r["above_floor"]["floor_ppl"] == truth["perplexity"]
            assert r["above_floor"]["extra_bits_per_token"] > 0
    for name in ("results.json", "report.md", "report.html", "run.json"):
        assert (out / name).exists()
    assert "true language (floor)" in stdout and "mkn-3" in stdout


def test_ngram_rows_match_a_direct_fit(quick_run, data):
    _, res, _, _ = quick_run
    ng = rows(res, "ngram")
    for sm, n in (("mkn", 3), ("wb", 2), ("kn", 1)):
        lm = NgramLM(order=n, smoothing=sm).fit(data["train"], vocab=data.vocab, heldout=data["valid"])
        for split in ("valid", "test"):
            assert ng[f"{sm}-{n}"][split]["ppl"] == pytest.approx(lm.perplexity_report(data[split]).ppl, rel=1e-9)
        assert ng[f"{sm}-{n}"]["size"] == sum(lm.n_ngrams_)


def test_vwall_numbers(quick_run, data):
    _, res, _, _ = quick_run
    V = data.vocab.n_types
    train, test = data["train"], data["test"]
    for w in res["vwall"]:
        k = w["order"]
        counts = NgramCounts.from_encoded(train, order=k, vocab_size=len(data.vocab))
        assert w["possible"] == V ** k
        assert w["distinct_train"] == counts.n_distinct(k) - (k == 1)  # not the <s> unigram: never predicted
        mle = NgramLM(order=k, smoothing="mle").fit(train, vocab=data.vocab).perplexity_report(test)
        assert w["mle_zero_probs"] == mle.zero_probs > 0
        assert w["mle_ppl"] is None  # infinite, stated as such
        # Unseen test n-grams, counted by brute force with Python tuples: the same events MLE zeroes.
        seen = set()
        for j in range(1, k + 1):
            seen |= set(counts.to_dict_of_tuples(j))
        unseen = 0
        for a, b in zip(test.starts[:-1], test.starts[1:]):
            sent = [1] + [int(x) for x in test.ids[a:b]]  # <s> = 1
            for t in range(1, len(sent)):
                gram = tuple(sent[max(0, t - k + 1): t + 1])
                unseen += gram not in seen
        assert w["test_unseen"] == unseen == w["mle_zero_probs"]
        assert w["test_unseen_share"] == pytest.approx(unseen / test.n_tokens)
    # The MLE rows of the model table agree with the wall.
    ng = rows(res, "ngram")
    for w in res["vwall"]:
        assert ng[f"mle-{w['order']}"]["test"]["zero_probs"] == w["mle_zero_probs"]
        assert ng[f"mle-{w['order']}"]["test"]["ppl"] is None
    # Unigram zeros are exactly the test tokens mapped to <unk> (never seen in train).
    assert res["vwall"][0]["mle_zero_probs"] == int(np.count_nonzero(test.ids == UNK_ID))


def test_count_spectrum(quick_run, data):
    _, res, _, _ = quick_run
    counts = NgramCounts.from_encoded(data["train"], order=3, vocab_size=len(data.vocab))
    for k in (2, 3):
        spec = dict(map(tuple, res["spectrum"][str(k)]))
        assert spec[1] == int(counts.count_of_counts(k)[1])
        assert sum(c * n for c, n in spec.items()) == counts.total(k)


def test_interpolation(quick_run):
    _, res, _, _ = quick_run
    interp = res["interpolation"]
    assert len(interp) == 2
    comp = {**rows(res, "ngram"), **rows(res, "neural")}
    for r in interp:
        ng, nn = (comp[c] for c in r["components"])
        assert 0.0 <= r["lambda"] <= 1.0
        assert r["valid"]["ppl"] <= ng["valid"]["ppl"] + 1e-9
        assert r["valid"]["ppl"] <= nn["valid"]["ppl"] + 1e-9
        assert math.isfinite(r["test"]["ppl"])
        # The tuning curve runs from the neural model alone (lambda 0) to the n-gram model alone (lambda 1).
        assert r["curve"][0][1] == pytest.approx(nn["valid"]["ppl"], rel=1e-6)
        assert r["curve"][-1][1] == pytest.approx(ng["valid"]["ppl"], rel=1e-6)
        assert min(p for _, p in r["curve"]) >= r["valid"]["ppl"] - 1e-6


def test_tune_lambda_on_known_mixture():
    rng = np.random.default_rng(0)
    a = np.log2(rng.uniform(0.01, 0.5, 5000))
    b = np.log2(rng.uniform(0.01, 0.5, 5000))
    lam = tune_lambda(a, b)
    grid = min(np.linspace(0, 1, 1001), key=lambda x: mixture_bits(x, a, b))
    assert abs(lam - grid) < 2e-3
    assert tune_lambda(a, a - 5.0) == pytest.approx(1.0, abs=1e-3)  # b is 32 times worse everywhere


def test_learning_curves(quick_run):
    _, res, _, _ = quick_run
    lc = res["learning_curves"]
    assert lc["fractions"] == [0.1, 0.3, 1.0]
    ids = [s["id"] for s in lc["series"]]
    assert ids == ["mkn-3", "lstm"] or ids == ["mkn-3", "transformer"]
    for s in lc["series"]:
        tokens = [p["train_tokens"] for p in s["points"]]
        assert tokens == sorted(tokens) and tokens[-1] == res["corpus"]["sizes"]["train"]["tokens"]
    kn = lc["series"][0]["points"]
    assert kn[0]["test"]["ppl"] > kn[-1]["test"]["ppl"]  # more data helps
    assert kn[-1]["test"]["ppl"] == rows(res, "ngram")["mkn-3"]["test"]["ppl"]


def test_normalisation_formula(quick_run):
    r = normalise(-1000.0, {"tokens": 500, "chars": 2000, "words": 400})
    assert (r["bits_per_token"], r["bits_per_char"], r["bits_per_word"]) == (2.0, 0.5, 2.5)
    assert r["word_ppl"] == pytest.approx(2 ** 2.5)
    assert normalise(None, {"tokens": 1, "chars": 1, "words": 1})["bits_per_char"] is None
    _, res, _, _ = quick_run
    sizes = res["corpus"]["sizes"]["test"]
    assert sizes["words"] == sizes["tokens"] - res["corpus"]["sizes"]["test"]["sentences"]  # toy: words + </s>
    for r in res["ngram"] + res["neural"] + res["interpolation"]:
        n = r.get("test_normalised")
        if r["test"]["ppl"] is None:
            assert n["bits_per_char"] is None
            continue
        total_bits = -r["test"]["log2prob"]
        assert n["bits_per_token"] * sizes["tokens"] == pytest.approx(total_bits)
        assert n["bits_per_char"] * sizes["chars"] == pytest.approx(total_bits)
        assert n["bits_per_word"] * sizes["words"] == pytest.approx(total_bits)
        assert 2 ** n["bits_per_token"] == pytest.approx(r["test"]["ppl"])


def test_passage_and_attention(quick_run):
    _, res, _, _ = quick_run
    p = res["passage"]
    T = len(p["tokens"])
    assert 4 <= T <= 24
    families = [r["family"] for r in p["rows"]]
    assert families[:2] == ["ngram", "neural"] and "truth" in families
    for r in p["rows"]:
        assert len(r["bits"]) == T and all(b is None or b >= 0 for b in r["bits"])
    att = res["attention"]
    assert att["tokens"][0] in ("</s>", "<s>") and att["tokens"][1:] == p["tokens"][: len(att["tokens"]) - 1]
    L, H, n = att["n_layers"], att["n_heads"], len(att["tokens"])
    assert (L, H) == (1, 2)
    for layer in att["log_weights"]:
        for head in layer:
            for i, row in enumerate(head):
                assert all(v is None for v in row[i + 1:])
                assert sum(math.exp(v) for v in row[: i + 1]) == pytest.approx(1.0, abs=2e-3)
    assert len(att["log_weights"][0][0]) == n
    # The report labels the first position, the sentence start, <s> (the page and the static figure).
    first = att["tokens"][0]
    shown = build_context(res)["attention"]["tokens"]
    assert shown[0] == "<s>" and shown[1:] == att["tokens"][1:]
    assert plots.attention_labels(att)[0] == "<s>" and att["tokens"][0] == first  # results untouched


def test_choose_passage_prefers_the_largest_gain():
    starts = np.array([0, 5, 12, 20, 24])
    gain = np.zeros(24)
    gain[13] = 5.0  # inside sentence 2
    p = choose_passage(starts, 10, gain)
    assert p["start"] <= 13 < p["end"] and p["end"] - p["start"] <= 10
    first = choose_passage(starts, 10)
    assert (first["start"], first["end"]) == (0, 5)


# ---------------------------------------------------------------------------- cache, refusals, resume
@pytest.mark.slow
def test_second_run_trains_nothing(quick_run):
    out, res, _, _ = quick_run
    code, _, err = cli("compare", "--quick", "--out", out, "--force")
    assert code == 0, err
    again = json.loads((out / "results.json").read_text())
    assert again["timing"]["trained"] == 0
    assert again["timing"]["cached"] == res["timing"]["trained"] + res["timing"]["cached"]
    for family in ("ngram", "neural"):
        for r in again[family]:
            assert r["cached"] is True
            assert r["test"] == rows(res, family)[r["id"]]["test"]
    assert again["timing"]["total_seconds"] < res["timing"]["total_seconds"]
    assert "(cached)" in err


def test_existing_folder_is_refused(quick_run):
    out, _, _, _ = quick_run
    code, _, err = cli("compare", "--quick", "--out", out)
    assert code == 2
    assert "exists" in err and "--resume" in err and "--force" in err
    code, _, err = cli("compare", "--quick", "--out", out, "--force", "--resume")
    assert code == 2


@pytest.mark.slow
def test_resume_continues_and_keeps_settings(quick_run, tmp_path):
    src, _, _, _ = quick_run
    out = tmp_path / "run"
    shutil.copytree(src, out)
    res = json.loads((out / "results.json").read_text())
    lstm = rows(res, "neural")["lstm"]
    (out / "cache" / f"{lstm['key']}.json").unlink()  # as if the run died after the LSTM's checkpoint
    code, _, err = cli("compare", "--out", out, "--resume")
    assert code == 0, err
    again = json.loads((out / "results.json").read_text())
    assert again["settings"] == res["settings"]
    assert again["timing"]["trained"] == 1
    row = rows(again, "neural")["lstm"]
    assert row["cached"] is False and "continued" in row["note"]
    assert row["test"]["ppl"] == pytest.approx(lstm["test"]["ppl"], rel=1e-9)
    code, _, err = cli("compare", "--out", out, "--resume", "--max-order", "4")
    assert code == 2 and "max_order" in err and "--force" in err
    code, _, err = cli("compare", "--out", tmp_path / "nothing-here", "--resume")
    assert code == 2 and "nothing to resume" in err


@pytest.mark.slow
def test_checkpoint_trained_elsewhere_is_scored_not_retrained(quick_run, tmp_path):
    """`--checkpoint` scores a model trained outside the run: the quick run's own LSTM
    (its training checkpoint, whose best weights sit beside it) must give the same
    perplexities, and the Transformer is still trained because no checkpoint holds one."""
    src, res, _, _ = quick_run
    lstm = rows(res, "neural")["lstm"]
    ckpt = tmp_path / "elsewhere" / "lstm.pt"
    ckpt.parent.mkdir()
    shutil.copy(src / "cache" / f"{lstm['key']}.pt", ckpt)
    shutil.copy(src / "cache" / f"{lstm['key']}.best.pt", ckpt.with_name("lstm.best.pt"))
    out = tmp_path / "adopt"
    code, _, err = cli("compare", "--quick", "--out", out, "--checkpoint", ckpt)
    assert code == 0, err
    again = json.loads((out / "results.json").read_text())
    nn = rows(again, "neural")
    assert set(nn) == {"lstm", "transformer"}
    row = nn["lstm"]
    assert row["stopped"] == "adopted" and row["settings"]["scored"].endswith("lstm.best.pt")
    for split in ("valid", "test"):
        assert row[split]["ppl"] == pytest.approx(lstm[split]["ppl"], rel=1e-12)
        assert row[split]["tokens"] == lstm[split]["tokens"]
    assert row["size"] == lstm["size"] and row["epochs"] == pytest.approx(lstm["epochs"])
    # The checkpoint's recorded training time against the run's own clock: on a sub-second quick run a busy
    # machine's scheduling alone moves them apart by a few tenths of a second (seen in CI: 0.68 vs 0.91 s).
    assert row["train_seconds"] == pytest.approx(lstm["train_seconds"], rel=0.05, abs=0.5)
    assert nn["transformer"]["stopped"] != "adopted"
    assert any(r["components"][1] == "lstm" for r in again["interpolation"])
    md = (out / "report.md").read_text()
    assert "LSTM (lstm.pt)" in md and "trained outside this run" in md
    line = next(x for x in md.splitlines() if x.startswith("| LSTM (lstm.pt)"))
    assert "(scoring only)" in line and "trained in this run" not in line
    # --neural none with a checkpoint: the neural side holds just that model.
    out2 = tmp_path / "only"
    code, _, err = cli("compare", "--quick", "--neural", "none", "--out", out2, "--checkpoint", ckpt)
    assert code == 0, err
    only = json.loads((out2 / "results.json").read_text())
    assert [r["id"] for r in only["neural"]] == ["lstm"] and only["neural"][0]["cached"] is False
    assert "Neural models were not run" not in (out2 / "report.md").read_text()


def test_checkpoint_of_another_corpus_or_twice_the_same_model_is_refused(quick_run, tmp_path):
    src, res, _, _ = quick_run
    ckpt = src / "cache" / f"{rows(res, 'neural')['lstm']['key']}.pt"
    text = tmp_path / "other.txt"
    text.write_text("a b c\nb c a\n" * 50)
    out = tmp_path / "out"
    code, _, err = cli("compare", text, "--out", out, "--checkpoint", ckpt, "--neural", "none")
    assert code == 2 and "vocabulary" in err and "not this corpus's" in err and str(ckpt) in err
    assert not out.exists()
    copy = tmp_path / "copy.pt"
    shutil.copy(ckpt, copy)
    code, _, err = cli("compare", "--quick", "--out", out, "--checkpoint", ckpt, "--checkpoint", copy)
    assert code == 2 and "two checkpoints hold a lstm model" in err
    assert not out.exists()
    code, _, err = cli("compare", "--quick", "--out", out, "--checkpoint", tmp_path / "missing.pt")
    assert code == 2 and "no such checkpoint file" in err and "missing.pt" in err
    bad = tmp_path / "bad.pt"
    bad.write_bytes(b"not a checkpoint")
    code, _, err = cli("compare", "--quick", "--out", out, "--checkpoint", bad)
    assert code == 2 and "bad.pt" in err
    assert not out.exists()


@pytest.mark.parametrize("args, message", [
    (["no-such-corpus"], "unknown corpus"),
    (["--smoothers", "mkn,foo"], "unknown smoother"),
    (["--neural", "lstm,cnn"], "unknown neural model"),
    (["--neural-minutes", "0"], "more than 0 minutes"),
    (["--neural-epochs", "0"], "positive integer"),
    (["--neural-minutes", "1", "--neural-epochs", "2"], "both given"),
    (["--max-order", "0"], "--max-order"),
    (["--curve", "0.5,2"], "not in (0, 1]"),
])
def test_bad_input_is_refused_before_anything_is_written(tmp_path, args, message):
    out = tmp_path / "out"
    code, _, err = cli("compare", *args, "--out", out)
    assert code == 2, err
    assert message in err
    assert not out.exists()


@pytest.mark.slow
def test_char_and_word_runs_of_one_text_normalise_to_the_same_characters(tmp_path):
    """Across tokenizations, bits per character is the common currency: a char-level and a
    word-level run of one text count the same characters, and in the char run every
    character (a space symbol, or the newline a sentence end stands for) is one token."""
    import random

    rng = random.Random(7)
    words = ["time", "machine", "the", "traveller", "said", "a", "of", "and", "to", "was"]
    text = tmp_path / "book.txt"
    text.write_text("\n".join(" ".join(rng.choice(words) for _ in range(rng.randint(3, 9))) for _ in range(400)) + "\n")
    res = {}
    for tok in ("whitespace", "char"):
        out = tmp_path / tok
        code, _, err = cli("compare", text, "--tokenizer", tok, "--out", out, "--max-order", "3",
                           "--smoothers", "wb,mkn", "--neural", "none", "--curve", "0.5,1")
        assert code == 0, err
        res[tok] = json.loads((out / "results.json").read_text())
    w, c = res["whitespace"], res["char"]
    assert w["settings"]["tokenizer"] == "whitespace" and c["settings"]["tokenizer"] == "char"
    assert c["corpus"]["n_types"] < 30 < w["corpus"]["n_types"] + 20  # letters + space symbol vs. words
    for split in ("valid", "test"):
        assert c["corpus"]["sizes"][split]["chars"] == w["corpus"]["sizes"][split]["chars"]
        assert c["corpus"]["sizes"][split]["words"] == w["corpus"]["sizes"][split]["words"]
        assert c["corpus"]["sizes"][split]["tokens"] == c["corpus"]["sizes"][split]["chars"]
    # The report names the tokens of each run: characters for the char run, words for the word run.
    for tok, unit in (("char", "characters + sentence ends, a space being the token ▁"),
                      ("whitespace", "words + sentence ends")):
        md = (tmp_path / tok / "report.md").read_text()
        html = (tmp_path / tok / "report.html").read_text()
        assert f"test tokens ({unit})" in md and f"test tokens ({unit})" in html
    assert "words + sentence ends" not in (tmp_path / "char" / "report.md").read_text()
    assert "V counts the predicted types (characters, the space symbol ▁, `<unk>`" in (
        tmp_path / "char" / "report.md").read_text()
    assert "V counts the predicted types (words, `<unk>`" in (tmp_path / "whitespace" / "report.md").read_text()
    row = rows(c, "ngram")["mkn-3"]
    norm = row["test_normalised"]
    assert norm["bits_per_char"] == pytest.approx(norm["bits_per_token"], rel=1e-12)
    wrow = rows(w, "ngram")["mkn-3"]
    chars = w["corpus"]["sizes"]["test"]["chars"]
    assert wrow["test_normalised"]["bits_per_char"] == pytest.approx(-wrow["test"]["log2prob"] / chars, rel=1e-12)
    code, _, err = cli("compare", "--tokenizer", "char", "--out", tmp_path / "toy")
    assert code == 2 and "toy corpus" in err


def test_corpus_too_small_for_an_order_is_reported_per_row(tmp_path):
    text = tmp_path / "tiny.txt"
    words = ["alpha", "beta", "gamma", "delta", "epsilon"]
    # One word per sentence: "<s> w </s>" holds trigrams at most.
    text.write_text("\n".join(words[(i * i) % 5] for i in range(300)) + "\n")
    out = tmp_path / "out"
    code, _, err = cli("compare", text, "--out", out, "--max-order", "4", "--smoothers", "mle,wb,mkn",
                       "--neural", "none", "--curve", "0.5,1")
    assert code == 0, err
    res = json.loads((out / "results.json").read_text())
    ng = rows(res, "ngram")
    assert "no 4-grams" in ng["mkn-4"]["error"] and ng["mkn-4"]["test"] is None
    assert ng["wb-3"]["error"] is None and ng["wb-3"]["test"]["ppl"] > 0
    assert res["neural"] == [] and res["interpolation"] == [] and "attention" not in res
    md = (out / "report.md").read_text()
    assert "Not estimated:" in md and "- `mkn-4`: the training text has no 4-grams" in md


def test_report_rerenders_from_results_json(quick_run, tmp_path):
    src, _, _, _ = quick_run
    out = tmp_path / "copy"
    out.mkdir()
    shutil.copy(src / "results.json", out / "results.json")
    code, stdout, err = cli("report", out)
    assert code == 0, err
    html = (out / "report.html").read_text()
    md = (out / "report.md").read_text()
    assert html == (src / "report.html").read_text()
    assert "## 1. The V^n wall" in md and "![The V^n wall](plots/vwall.png)" in md
    assert (out / "plots" / "vwall.png").read_bytes()[:4] == b"\x89PNG"
    code, _, err = cli("report", tmp_path / "empty")
    assert code == 2 and "results.json" in err


def _render_copy(results: dict, out: Path) -> tuple[str, str]:
    """``ngramlm report`` on a results.json holding ``results``: ``(report.md, report.html)``."""
    out.mkdir()
    (out / "results.json").write_text(json.dumps(results))
    code, _, err = cli("report", out)
    assert code == 0, err
    return (out / "report.md").read_text(), (out / "report.html").read_text()


def _md_row(md: str, label: str) -> list:
    line = next(x for x in md.splitlines() if x.startswith(f"| {label} |"))
    return [c.strip() for c in line.strip("|").split("|")]


def test_no_negative_zero_in_tables(quick_run, tmp_path):
    assert fmt_fixed(-0.0, 1) == "0.0" and fmt_fixed(-0.00004, 3) == "0.000" and fmt_fixed(-0.04, 1) == "0.0"
    assert fmt_fixed(-0.0, 3, sign=True) == "+0.000" and fmt_fixed(-0.2, 0, sign=True) == "+0"
    assert fmt_fixed(-0.06, 1) == "-0.1" and fmt_fixed(0.25, 2) == "0.25" and fmt_fixed(1.5, 0, sign=True) == "+2"
    _, res, _, _ = quick_run
    res = json.loads(json.dumps(res))
    # Surprisals of certain tokens (p = 1) are stored as -0.0; a row can sit exactly on the floor.
    for r in res["passage"]["rows"]:
        r["bits"][0] = -0.0
    truth = next(r for r in res["passage"]["rows"] if r["family"] == "truth")
    truth["bits"] = [-0.0 if b is not None else None for b in truth["bits"]]
    nn = res["neural"][0]
    nn["above_floor"]["extra_bits_per_token"] = -0.0
    nn["test_normalised"]["bits_per_token"] = -0.0
    res["interpolation"][0]["lambda"] = -0.0
    md, html = _render_copy(res, tmp_path / "r")
    for text in (md, html):
        assert not re.search(r"-0\.0+(?![0-9]*[1-9])", text), re.search(r".{60}-0\.0+.{20}", text).group(0)
    token_row = _md_row(md, f"`{res['passage']['tokens'][0]}`")
    assert token_row[1:] == ["0.0"] * len(res["passage"]["rows"])
    assert _md_row(md, "**total bits**")[-1] == "**0.0**"
    assert "+0.000 bits" in _md_row(md, nn["label"])[_md_row(md, "model").index("above the floor")]


@pytest.mark.slow
def test_budget_and_actual_cost_of_neural_rows(quick_run, tmp_path):
    """Each neural row shows its budget and what it cost in the run (training + evaluation);
    rows of results.json files written before those fields existed show what is known, "–" else."""
    assert fmt_budget({"budget": {"minutes": 0.6}, "budget_seconds": 36.0, "wall_seconds": 37.8}) == \
        "0.6 min / 0.63 min (+5 %)"
    assert fmt_budget({"budget": {"epochs": 1}, "budget_seconds": None, "wall_seconds": 12.34}) == "1 epoch / 12.3 s"
    assert fmt_budget({"budget": {"epochs": 3}, "budget_seconds": None, "wall_seconds": 250.0}) == "3 epochs / 4.2 min"
    assert fmt_budget({"budget": {"minutes": 20}, "budget_seconds": 1200.0, "wall_seconds": 1140.0}) == \
        "20 min / 19.0 min (-5 %)"
    assert fmt_budget({"budget": {"minutes": 0.6}, "budget_seconds": 36.0, "wall_seconds": None, "cached": True}) == \
        "0.6 min / cached"
    assert fmt_budget({"settings": {"budget": {"epochs": 2}}, "cached": False}) == "2 epochs / –"  # old file
    assert fmt_budget({"settings": {}}) == "–" and fmt_budget({}) == "–"
    assert fmt_budget({"budget": {"minutes": 45}, "wall_seconds": 31.2, "stopped": "adopted"}) == \
        "45 min / 31.2 s (scoring only)"
    _, res, _, _ = quick_run
    res = json.loads(json.dumps(res))
    lstm, tr = rows(res, "neural")["lstm"], rows(res, "neural")["transformer"]
    lstm.update(budget={"minutes": 0.6}, budget_seconds=36.0, wall_seconds=37.8)
    tr.update(budget={"epochs": 1}, budget_seconds=None, wall_seconds=12.34)
    neural_series = next(s for s in res["learning_curves"]["series"] if s["family"] == "neural")
    for i, pt in enumerate(neural_series["points"]):
        pt.update(budget={"minutes": 0.15}, budget_seconds=9.0, wall_seconds=9.9 + i)
    md, html = _render_copy(res, tmp_path / "new")
    header = _md_row(md, "model")
    col = header.index("budget / actual")
    assert _md_row(md, lstm["label"])[col] == "0.6 min / 0.63 min (+5 %)"
    assert _md_row(md, tr["label"])[col] == "1 epoch / 12.3 s"
    assert _md_row(md, "MLE 3-gram")[col] == ""  # count models have no budget
    assert ('<td class="num budget"><span class="nw">0.6 min /</span> '
            '<span class="nw">0.63 min (+5 %)</span></td>') in html
    assert '<span class="nw">1 epoch /</span> <span class="nw">12.3 s</span>' in html
    assert "budget / actual</th>" in html
    # The learning curve's neural points, under their series.
    cells = _md_row(md, "budget / actual")[1:]
    assert cells == ["0.15 min / 0.17 min (+10 %)", "0.15 min / 0.18 min (+21 %)", "0.15 min / 0.20 min (+32 %)"]
    # The HTML table has a row per training-set size: the budget is a column beside the neural series.
    assert re.search(r'<th>LSTM: budget / actual</th>', html)
    assert '<td class="num budget">0.15 min / 0.17 min (+10 %)</td>' in html
    # A cached row, and an old results.json: no budget / wall_seconds fields (nor, for the curve, a row).
    lstm.update(wall_seconds=None, cached=True)
    for key in ("budget", "budget_seconds", "wall_seconds"):
        tr.pop(key)
        for pt in neural_series["points"]:
            pt.pop(key)
    tr["settings"].pop("budget")
    md, html = _render_copy(res, tmp_path / "old")
    assert _md_row(md, lstm["label"])[col] == "0.6 min / cached"
    assert _md_row(md, tr["label"])[col] == "–"
    assert "| budget / actual |" not in md.split("## 3.")[1]


def test_vwall_figure_has_a_legend_entry_for_every_line(quick_run):
    import matplotlib.pyplot as plt

    _, res, _, _ = quick_run
    fig = plots.vwall_figure(res)
    try:
        legends = [a.get_legend() for a in fig.axes if a.get_legend() is not None]
        assert len(legends) == 1  # one legend for both axes
        texts = [t.get_text() for t in legends[0].get_texts()]
        assert plots.UNSEEN_LABEL in texts and "possible n-grams $V^n$" in texts
        lines = [ln for a in fig.axes for ln in a.get_lines() if not ln.get_label().startswith("_")]
        assert sorted(ln.get_label() for ln in lines) == sorted(texts)
    finally:
        plt.close(fig)


def test_html_is_self_contained(quick_run):
    out, res, _, _ = quick_run
    html = (out / "report.html").read_text()
    for needle in ('id="results-table"', 'id="vwall-table"', 'id="order-table"', 'id="curve-table"',
                   'id="interp-table"', 'id="surprisal-view"', 'id="attention-data"', 'id="infini-table"',
                   'id="infini-by-n"', 'id="plot-effective_n"'):
        assert needle in html
    # the V^n wall, Zipf, perplexity by order, count spectrum, learning curves, interpolation, the effective
    # n of the ∞-gram, training curves (the attention view is drawn by the page itself)
    assert html.count('src="data:image/png;base64,') == 9
    assert "http://" not in html.replace('xmlns="http://www.w3.org/2000/svg"', "").replace(
        '"http://www.w3.org/2000/svg"', "")
    assert "https://" not in html


def test_settings_validation():
    CompareSettings().validate()
    quick_settings().validate()
    assert CompareSettings(neural_epochs=3, neural_minutes=None).curve_budget() == {"epochs": 3}
    assert CompareSettings(neural_minutes=1.0).curve_budget() == {"minutes": 0.25}
    from corpora.errors import InputError

    with pytest.raises(InputError, match="toy corpus only"):
        CompareSettings(corpus="ptb", toy_train_tokens=1000).validate()
    with pytest.raises(InputError, match="listed twice"):
        CompareSettings(neural=("lstm", "lstm")).validate()


# ---------------------------------------------------------------------------- the browser
def _chromium_args(user_dir: Path) -> list:
    return [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
            "--disable-component-update", "--disable-sync", "--no-first-run", f"--user-data-dir={user_dir}",
            "--hide-scrollbars", "--disable-dev-shm-usage", "--virtual-time-budget=5000"]


@pytest.mark.skipif(not os.access(CHROMIUM, os.X_OK), reason=f"headless Chromium not installed at {CHROMIUM} "
                    "(apt-get install chromium); the report's script is then not exercised in a browser")
def test_report_in_headless_chromium(quick_run, tmp_path):
    out, res, _, _ = quick_run
    url = (out / "report.html").resolve().as_uri()
    dom = subprocess.run(_chromium_args(tmp_path / "profile") + ["--dump-dom", url], capture_output=True,
                         text=True, timeout=90)
    assert dom.returncode == 0, dom.stderr[-2000:]
    html = dom.stdout
    # The quick run trains one epoch: its tiny Transformer is worse than the unigram model on valid, so
    # the report flags it and the self-test fails on that -- and on nothing else.
    flagged = [r["id"] for r in res["neural"] if r["valid"]["ppl"] > min(
        x["valid"]["ppl"] for x in res["ngram"] if x["order"] == 1 and x["valid"]["ppl"] is not None)]
    expected = "pass" if not flagged else "fail"
    assert f'id="selftest" data-result="{expected}"' in html, html[html.find('id="selftest"') - 20:][:400]
    if flagged:
        assert "undertrained neural rows: Transformer (tiny)" in html and flagged == ["transformer"]
        assert 'id="undertrained"' in html
    assert "figures decoded 9/9" in html
    T = len(res["attention"]["tokens"])
    # The self-test moved the mouse over heatmap row 1, then row T-2: the outline followed it.
    assert f"heatmap row hover 1 then {T - 2} ok" in html
    assert "start symbol &lt;s&gt; ok" in html  # position 0 reads <s>, in the token view and the heatmap
    assert html.count('class="row-outline"') == 1
    for table in ("results-table", "vwall-table", "order-table", "curve-table", "interp-table"):
        assert f'id="{table}"' in html
    assert html.count('class="cell"') == T * (T + 1) // 2  # the heatmap was drawn by the script
    assert html.count('class="att-tok') == T
    ARTIFACTS.mkdir(exist_ok=True)
    shot = ARTIFACTS / "compare-report.png"
    run = subprocess.run(_chromium_args(tmp_path / "profile2") + ["--window-size=1200,6000", f"--screenshot={shot}",
                                                                  url], capture_output=True, text=True, timeout=90)
    assert run.returncode == 0, run.stderr[-2000:]
    assert shot.read_bytes()[:4] == b"\x89PNG" and shot.stat().st_size > 50_000


def test_the_infini_section_mixes_with_every_partner_and_never_loses_on_valid(quick_run):
    out, res, _, _ = quick_run
    sec = res["infini"]
    assert sec is not None and sec["index_bytes_per_token"] <= 6.0
    assert sum(sec["effective_n_hist"]) == res["corpus"]["sizes"]["test"]["tokens"]
    partners = {r["components"][1] for r in sec["rows"]}
    assert len(partners) == len(sec["rows"]) >= 2  # the best n-gram model and the neural model(s)
    for r in sec["rows"]:
        # lambda = 0 (the partner alone) is among the tuned candidates: the mixture is never worse on valid
        assert r["valid"]["ppl"] <= r["partner_valid"]["ppl"] * (1 + 1e-9)
        assert 0 <= r["lambdas"]["sparse"] < 1 and 0 <= r["lambdas"]["dense"] < 1
    assert {b["partner"] for b in sec["by_n"]} == partners
    md = (out / "report.md").read_text()
    assert "## 7. n → ∞: the ∞-gram" in md and "∞-gram + " in md
    results_table = md.split("## Results")[1].split("## 1.")[0]  # the ∞-gram rows are in the main table too
    assert "| ∞-gram (alone) | ∞-gram | ∞ | ∞ |" in results_table and "test tokens have probability 0" in results_table and results_table.count("| ∞-gram + ") == len(sec["rows"])


def test_the_infini_gram_is_the_last_column_of_perplexity_against_order(quick_run):
    import matplotlib.pyplot as plt

    out, res, _, _ = quick_run
    sec = res["infini"]
    orders = sorted({r["order"] for r in res["ngram"]})
    md = (out / "report.md").read_text()
    table = md.split("## 2. Perplexity against order")[1].split("\n\n")[1]
    header = table.splitlines()[0]
    assert header.rstrip().endswith(f"n={orders[-1]} | n=∞ |")
    # fixed-order rows leave the ∞ cell empty; each ∞-gram row has only that cell: ∞ alone, the mixture's ppl
    alone = _md_row(table, "∞-gram (alone)")
    assert alone[1:-1] == [""] * len(orders) and alone[-1] == "∞"
    for r in sec["rows"]:
        cells = _md_row(table, r["label"])
        assert cells[1:-1] == [""] * len(orders) and cells[-1] == fmt_fixed(r["test"]["ppl"], 2)
    # the plot: an ∞ tick right of the highest order, a star per mixture at its test perplexity
    fig = plots.perplexity_by_order_figure(res)
    try:
        ax = fig.axes[0]
        assert [t.get_text() for t in ax.get_xticklabels()][-1] == "∞"
        # a point per mixture at n = ∞, in the ∞-gram's colour (one marker each: a star, then others)
        mixtures = {r["label"] for r in sec["rows"]}
        stars = {ln.get_label(): ln.get_ydata()[0] for ln in ax.get_lines() if ln.get_label() in mixtures}
        assert {ln.get_color() for ln in ax.get_lines() if ln.get_label() in mixtures} == {plots.FAMILY_COLOURS["infini"]}
        assert stars == pytest.approx({r["label"]: r["test"]["ppl"] for r in sec["rows"]})
    finally:
        plt.close("all")
