"""``ngramlm prune``: entropy pruning of an existing model to a size, a file size or a threshold (toy corpus)."""
from __future__ import annotations

import json

import numpy as np
import pytest

from ngramlm import NgramLM
from ngramlm.io.arpa import write_arpa
from ngramlm.loading import load_any
from ngramlm.tools.pruning import ngram_words, prune_entropy
from ngramlm.tools.prune_size import keep_masks, kept_counts, prune_scores
from conftest import sentence_contexts as _contexts


@pytest.fixture(scope="module")
def lm(toy_dataset):
    return NgramLM(order=3, smoothing="mkn").fit(toy_dataset["train"], vocab=toy_dataset.vocab)


@pytest.fixture(scope="module")
def files(tmp_path_factory, toy_dataset, lm):
    d = tmp_path_factory.mktemp("prune")
    write_arpa(lm, d / "lm.arpa")
    lm.save(d / "lm.npz")
    (d / "test.txt").write_text("\n".join(" ".join(s) for s in toy_dataset.corpus.sentences("test")) + "\n")
    return d


def _higher(model) -> int:
    return sum(int(n) for n in model.n_ngrams_[1:])


def _grams(model, k):
    it = model.vocab_.itos_
    return {tuple(it[i] for i in g) for g in ngram_words(model, k)}


@pytest.mark.parametrize("share", [0.5, 0.1, 0.01])
def test_size_is_reached_from_below_and_closely(run_cli, files, lm, tmp_path, share):
    n = int(_higher(lm) * share)
    out = tmp_path / "p.arpa"
    code, js, err = run_cli("prune", files / "lm.arpa", "-o", out, "--size", n, "--json")
    assert code == 0, err
    r = json.loads(js)
    pruned = load_any(out)
    got = _higher(pruned)
    assert got == r["higher_order_after"]
    assert got <= n
    assert got >= 0.97 * n  # the search is not lazy
    assert pruned.n_ngrams_[0] == lm.n_ngrams_[0]  # unigrams are always kept
    assert r["threshold"] > 0 and r["bisection_steps"] > 10


def test_pruned_model_stays_normalised(run_cli, files, toy_dataset, tmp_path):
    out = tmp_path / "p.npz"
    code, _, err = run_cli("prune", files / "lm.npz", "-o", out, "--size", 3000)
    assert code == 0, err
    pruned = load_any(out)
    contexts = _contexts(toy_dataset.corpus.sentences("test"))
    assert len(contexts) >= 200
    sums = np.array([pruned.next_probs(c).sum() for c in contexts])
    assert np.abs(sums - 1.0).max() < 1e-9


def test_protected_words_keep_all_their_ngrams(run_cli, files, lm, tmp_path):
    counts = np.asarray(lm.log10_prob_[0])  # pick words by unigram probability: a frequent one and rarer ones
    order = np.argsort(-counts)
    words = [lm.vocab_.itos_[i] for i in order[[10, 50, 200, 400]]]
    (tmp_path / "protect.txt").write_text("\n".join(words + ["not-a-word-of-the-model"]) + "\n\n")
    out = tmp_path / "p.arpa"
    code, stdout, err = run_cli("prune", files / "lm.arpa", "-o", out, "--size", int(_higher(lm) * 0.1),
                                "--protect", tmp_path / "protect.txt")
    assert code == 0, err
    assert "1 protected words are not in the model's vocabulary" in err
    assert "protected: 4 words" in stdout
    pruned = load_any(out)
    for k in (2, 3):
        full = {g for g in _grams(lm, k) if set(g) & set(words)}
        assert full and full <= _grams(pruned, k)
    assert _higher(pruned) <= int(_higher(lm) * 0.1)
    # without protection far fewer of them stay
    code, _, err = run_cli("prune", files / "lm.arpa", "-o", tmp_path / "q.arpa", "--size", int(_higher(lm) * 0.1))
    assert code == 0, err
    q = load_any(tmp_path / "q.arpa")

    def holding(model):
        return {g for g in _grams(model, 3) if set(g) & set(words)}

    assert len(holding(q)) < len(holding(lm))


def test_threshold_search_is_monotone(lm):
    scores = prune_scores(lm, protect_words=[lm.vocab_.itos_[20]])
    thresholds = np.logspace(-9, -2, 60)
    counts = [sum(kept_counts(scores, t)) for t in thresholds]
    assert all(b <= a for a, b in zip(counts, counts[1:]))
    assert counts[0] > counts[-1]
    # what stays at a larger threshold is a subset of what stays at a smaller one
    for a, b in zip(thresholds[::10], thresholds[5::10]):
        ka, kb = keep_masks(scores, a), keep_masks(scores, b)
        assert all(not (mb & ~ma).any() for ma, mb in zip(ka[1:], kb[1:]))


def test_threshold_option_is_stolcke_pruning(run_cli, files, lm, tmp_path):
    """--threshold T keeps what `train --prune-entropy T` keeps."""
    out = tmp_path / "t.npz"
    code, stdout, err = run_cli("prune", files / "lm.npz", "-o", out, "--threshold", "1e-6", "--eval",
                                files / "test.txt")
    assert code == 0, err
    assert "ppl=" in stdout and "before" in stdout and "after" in stdout
    ours = load_any(out)
    ref = NgramLM.from_tables(prune_entropy(lm, 1e-6))
    assert ours.n_ngrams_ == ref.n_ngrams_
    for k in (2, 3):
        assert np.array_equal(ours.keys_[k - 1], ref.keys_[k - 1])
        assert np.allclose(ours.log10_backoff_[k - 2], ref.log10_backoff_[k - 2], atol=1e-12)


@pytest.mark.parametrize("name", ["p.arpa", "p.npz"])
def test_max_bytes_is_checked_by_writing(run_cli, files, lm, tmp_path, name):
    full = (files / ("lm.arpa" if name.endswith(".arpa") else "lm.npz")).stat().st_size
    limit = full // 3
    out = tmp_path / name
    code, js, err = run_cli("prune", files / "lm.arpa", "-o", out, "--max-bytes", str(limit), "--json")
    assert code == 0, err
    r = json.loads(js)
    size = out.stat().st_size
    assert size == r["bytes"] and size <= limit
    assert size >= 0.98 * limit
    assert [p.name for p in tmp_path.iterdir()] == [name]  # no temp files left
    assert abs(sum(load_any(out).next_probs(["<s>"])) - 1) < 1e-6  # ARPA keeps 7 significant digits


def test_nothing_to_prune_when_already_small_enough(run_cli, files, lm, tmp_path):
    code, stdout, err = run_cli("prune", files / "lm.arpa", "-o", tmp_path / "same.arpa", "--size", _higher(lm) + 5)
    assert code == 0, err
    assert "nothing pruned" in stdout
    assert load_any(tmp_path / "same.arpa").n_ngrams_ == lm.n_ngrams_


@pytest.mark.parametrize("args,needle", [
    (["lm.arpa"], "one of --size N, --max-bytes M or --threshold T"),
    (["lm.arpa", "--size", "10", "--threshold", "1e-7"], "one of --size N"),
    (["missing.arpa", "--size", "10"], "missing.arpa: no such model file"),
    (["lm.arpa", "--size", "-1"], "--size must be >= 0"),
    (["lm.arpa", "--threshold", "-1"], "--threshold must be >= 0"),
    (["lm.arpa", "--max-bytes", "lots"], "cannot read the size 'lots'"),
    (["lm.arpa", "--size", "10", "--protect", "missing-words.txt"], "missing-words.txt: no such word list"),
    (["lm.arpa", "--size", "10", "--protect", "empty.txt"], "empty.txt: file is empty"),
    (["lm.arpa", "--size", "10", "--eval", "missing.txt"], "missing.txt"),
    (["lm.arpa", "--size", "0", "--protect", "the.txt"], "cannot be reached"),
    (["lm.arpa", "--max-bytes", "100"], "cannot be reached"),
    (["addk.npz", "--size", "10"], "needs a back-off distribution"),
])
def test_cli_bad_input_says_what_and_writes_nothing(run_cli, files, tmp_path, monkeypatch, toy_dataset, lm, args,
                                                    needle):
    monkeypatch.chdir(files)
    (files / "empty.txt").write_text("\n \n")
    (files / "the.txt").write_text(lm.vocab_.itos_[4] + "\n")
    if not (files / "addk.npz").exists():
        NgramLM(order=2, smoothing="addk").fit(toy_dataset["train"], vocab=toy_dataset.vocab).save(files / "addk.npz")
    out = tmp_path / "out.arpa"
    code, _, err = run_cli("prune", *args, "-o", out)
    assert code != 0
    assert needle in err, err
    assert "Traceback" not in err
    if "Usage" not in err:
        assert "(fix: " in err
    assert not list(tmp_path.iterdir())


def test_the_size_search_says_each_step_while_it_works(run_cli, tmp_path):
    """A search on a big model takes minutes: each bisection step is a line on stderr."""
    from ngramlm import NgramLM
    from ngramlm.io.arpa import write_arpa
    from corpora import load_corpus, prepare

    ds = prepare(load_corpus("toy"))
    model = tmp_path / "lm.arpa"
    write_arpa(NgramLM(order=3).fit(ds["train"], vocab=ds.vocab), model)
    code, out, err = run_cli("prune", model, "-o", tmp_path / "small.arpa", "--size", "20000")
    assert code == 0, err
    steps = [line for line in err.splitlines() if line.strip().startswith("step ")]
    assert len(steps) >= 3 and "keeps" in steps[0] and "--size 20000" in steps[0]
    assert "scoring the removal of" in err
