"""``ngramlm mix``: static mixtures of back-off models (SRILM's -mix-lm ... -write-lm) on the toy corpus.

Two models from the two halves of the toy training text: one pair over one shared vocabulary, one
pair with each half's own vocabulary (so each model lacks words the other has).
"""
from __future__ import annotations

import json

import numpy as np
import pytest

from corpora import Vocab
from ngramlm import NgramLM
from ngramlm.io.arpa import write_arpa
from ngramlm.loading import read_arpa
from ngramlm.tools.mix import (best_mix, component_log10, component_token_log10, dynamic_log10, mix_tables,
                               union_vocabulary)
from conftest import sentence_contexts as _contexts


@pytest.fixture(scope="module")
def halves(toy_dataset):
    train = toy_dataset.corpus.sentences("train")
    return train[: len(train) // 2], train[len(train) // 2:]


@pytest.fixture(scope="module")
def shared(toy_dataset, halves):
    """Two 3-gram MKN models over the full training vocabulary."""
    v = toy_dataset.vocab
    return [NgramLM(order=3, smoothing="mkn").fit(v.encode_sentences(h), vocab=v) for h in halves]


@pytest.fixture(scope="module")
def own(halves):
    """Two 3-gram MKN models, each over its own half's vocabulary."""
    out = []
    for h in halves:
        v = Vocab().fit(h)
        out.append(NgramLM(order=3, smoothing="mkn").fit(v.encode_sentences(h), vocab=v))
    return out


def _encode(union, sentences):
    return union.vocab.encode_sentences(sentences)


@pytest.mark.parametrize("pair", ["shared", "own"])
@pytest.mark.parametrize("log_linear", [False, True])
def test_every_context_of_the_mixture_sums_to_one(request, toy_dataset, pair, log_linear):
    models = request.getfixturevalue(pair)
    mix = NgramLM.from_tables(mix_tables(models, weights=[0.4, 0.6], log_linear=log_linear))
    contexts = _contexts(toy_dataset.corpus.sentences("test"))
    assert len(contexts) >= 200
    sums = np.array([mix.next_probs(c).sum() for c in contexts])
    assert np.abs(sums - 1.0).max() < 1e-9
    # the union of the n-grams is stored
    assert mix.n_ngrams_[2] >= max(m.n_ngrams_[2] for m in models)


def test_weights_one_zero_give_model_one_exactly(toy_dataset, halves, shared):
    """λ = (1, 0): the mixture scores every token of the test text as model 1 does -- also when the other
    model is of another order (a bigram: the mixture is a 3-gram)."""
    bigram = NgramLM(order=2, smoothing="wb").fit(toy_dataset.vocab.encode_sentences(halves[1]),
                                                  vocab=toy_dataset.vocab)
    for other in (shared[1], bigram):
        mix = NgramLM.from_tables(mix_tables([shared[0], other], weights=[1.0, 0.0]))
        a = mix.token_scores(toy_dataset["test"]).log10_prob
        b = shared[0].token_scores(toy_dataset["test"]).log10_prob
        assert np.abs(a - b).max() < 1e-9
    mix = NgramLM.from_tables(mix_tables([shared[0], bigram], weights=[0.0, 1.0]))
    assert np.abs(mix.token_scores(toy_dataset["test"]).log10_prob
                  - bigram.token_scores(toy_dataset["test"]).log10_prob).max() < 1e-9


@pytest.mark.parametrize("pair", ["shared", "own"])
def test_static_mixture_is_within_one_percent_of_dynamic(request, toy_dataset, pair):
    models = request.getfixturevalue(pair)
    union = union_vocabulary(models)
    enc = _encode(union, toy_dataset.corpus.sentences("test"))
    comp = np.stack([component_token_log10(m, enc, union=union, index=i) for i, m in enumerate(models)])
    w = [0.5, 0.5]
    dyn = 10.0 ** -dynamic_log10(comp, w).mean()
    static = NgramLM.from_tables(mix_tables(models, weights=w, union=union)).perplexity(enc)
    assert abs(static / dyn - 1.0) < 0.01
    # and mixing helps: both mixtures beat either model alone
    assert max(static, dyn) < min(10.0 ** -c.mean() for c in comp)


def test_em_weights_match_a_grid_search_and_never_raise_dev_perplexity(toy_dataset, halves):
    # Unequal models (3-gram MKN on half the text, 2-gram Witten-Bell on the other) so the best
    # weights are far from uniform.
    v = toy_dataset.vocab
    models = [NgramLM(order=3, smoothing="mkn").fit(v.encode_sentences(halves[0]), vocab=v),
              NgramLM(order=1, smoothing="wb").fit(v.encode_sentences(halves[1]), vocab=v)]
    union = union_vocabulary(models)
    dev = _encode(union, toy_dataset.corpus.sentences("valid"))
    comp = np.stack([component_token_log10(m, dev, union=union, index=i) for i, m in enumerate(models)])
    fit = best_mix(comp)
    assert fit.converged and fit.iterations <= 100
    assert sum(fit.weights) == pytest.approx(1.0, abs=1e-12)

    def ppl(w):
        return 10.0 ** -dynamic_log10(comp, w).mean()

    assert ppl(fit.weights) <= ppl([0.5, 0.5])
    grid = np.round(np.arange(0, 1001) / 1000, 3)
    best = grid[int(np.argmin([ppl([g, 1 - g]) for g in grid]))]
    assert abs(fit.weights[0] - best) <= 1e-3
    assert abs(fit.weights[0] - 0.5) > 0.05  # the test would prove little at the uniform point


def test_log_linear_is_the_normalised_product(toy_dataset, shared):
    w = [0.3, 0.7]
    mix = NgramLM.from_tables(mix_tables(shared, weights=w, log_linear=True))
    for ctx in _contexts(toy_dataset.corpus.sentences("test"), n_sentences=25):
        p = [m.next_probs(ctx) for m in shared]
        with np.errstate(divide="ignore"):
            u = np.exp(w[0] * np.log(p[0]) + w[1] * np.log(p[1]))
        assert np.abs(mix.next_probs(ctx) - u / u.sum()).max() < 1e-12


def test_different_vocabularies_map_onto_the_union(own):
    """Documented rule: the union of the words; a word model i lacks gets p_i(<unk> | h) times its share of
    model i's <unk> class (its unigram probability in the other model, normalised with p_i(<unk>))."""
    union = union_vocabulary(own)
    words = [set(m.vocab_.itos_) for m in own]
    assert set(union.vocab.itos_) == words[0] | words[1]
    assert union.lacking[0] and union.lacking[1]
    assert set(union.lacking[0]) == words[1] - words[0]
    for i, m in enumerate(own):
        other = own[1 - i]
        share = 10.0 ** union.log10_share[i]
        lack_ids = [union.vocab[w] for w in union.lacking[i]]
        # the class <unk> + lacking words keeps exactly model i's <unk> probability
        assert share[lack_ids].sum() + share[3] == pytest.approx(1.0, abs=1e-12)
        q = np.array([other.prob(w) for w in union.lacking[i]])
        assert share[lack_ids] == pytest.approx(q / (m.prob("<unk>") + q.sum()), rel=1e-9)
        # a lacking word after a context: the model's <unk> probability there, times its share
        w = union.lacking[i][0]
        ctx = [m.vocab_.itos_[5]]
        rows = np.array([[union.vocab[ctx[0]], union.vocab[w]]])
        got = component_log10(m, rows, union=union, index=i)[0]
        assert got == pytest.approx(m.log10_prob("<unk>", ctx) + union.log10_share[i][union.vocab[w]], abs=1e-12)


# ----------------------------------------------------------------------------- the command
@pytest.fixture(scope="module")
def files(tmp_path_factory, toy_dataset, own, halves):
    d = tmp_path_factory.mktemp("mix")
    write_arpa(own[0], d / "a.arpa")
    write_arpa(own[1], d / "b.arpa")
    for split in ("valid", "test"):
        (d / f"{split}.txt").write_text("\n".join(" ".join(s) for s in toy_dataset.corpus.sentences(split)) + "\n")
    return d


def test_cli_best_mix_writes_an_arpa_that_scores_as_the_mixture(run_cli, files, tmp_path):
    out = tmp_path / "mix.arpa"
    code, stdout, err = run_cli("mix", files / "a.arpa", files / "b.arpa", "-o", out, "--best-mix",
                                files / "valid.txt", "--eval", files / "test.txt")
    assert code == 0, err
    assert "lambda " in stdout and "dev ppl=" in stdout and "static mixture" in stdout
    assert "dynamic interpolation" in stdout and "vocabularies differ" in err
    code, js, err = run_cli("mix", files / "a.arpa", files / "b.arpa", "-o", tmp_path / "mix2.npz", "--best-mix",
                            files / "valid.txt", "--eval", files / "test.txt", "--json")
    assert code == 0, err
    r = json.loads(js)
    lam = r["best_mix"]["lambda"]
    assert r["best_mix"]["dev_ppl"] <= r["best_mix"]["dev_ppl_uniform"]
    assert abs(r["eval"]["static_ppl"] / r["eval"]["dynamic_ppl"] - 1) < 0.01
    # the written ARPA scores as the mixture built in memory
    models = [read_arpa(files / "a.arpa"), read_arpa(files / "b.arpa")]
    mem = NgramLM.from_tables(mix_tables(models, weights=lam))
    back = read_arpa(out)
    sents = [line.split() for line in (files / "test.txt").read_text().splitlines()]
    a = back.token_scores(back.encode(sents)[0]).log10_prob
    b = mem.token_scores(mem.encode(sents)[0]).log10_prob
    assert back.vocab_.itos_ == mem.vocab_.itos_
    assert np.abs(a - b).max() < 1e-5  # ARPA keeps 7 significant digits
    assert back.perplexity(back.encode(sents)[0]) == pytest.approx(r["eval"]["static_ppl"], rel=1e-6)
    # and so does the native file, exactly
    from ngramlm.loading import load_any

    nat = load_any(tmp_path / "mix2.npz")
    assert np.abs(nat.token_scores(nat.encode(sents)[0]).log10_prob - b).max() < 1e-12


def test_cli_lambda_and_log_linear(run_cli, files, tmp_path):
    code, out, err = run_cli("mix", files / "a.arpa", files / "b.arpa", "-o", tmp_path / "m.arpa", "--lambda",
                             "0.25,0.75", "--log-linear", "--eval", files / "test.txt")
    assert code == 0, err
    assert "log-linear mixture" in out and "lambda 0.25,0.75" in out
    assert read_arpa(tmp_path / "m.arpa").order_ == 3


@pytest.mark.parametrize("args,needle", [
    (["a.arpa", "--lambda", "1"], "at least two models"),
    (["a.arpa", "b.arpa", "--lambda", "0.5,0.6"], "sum to 1.1"),
    (["a.arpa", "b.arpa", "--lambda", "0.5"], "1 weights for 2 models"),
    (["a.arpa", "b.arpa", "--lambda", "1.5,-0.5"], ">= 0"),
    (["a.arpa", "missing.arpa", "--lambda", "0.5,0.5"], "missing.arpa: no such model file"),
    (["a.arpa", "b.arpa", "--lambda", "0.5,0.5", "--eval", "missing.txt"], "missing.txt"),
    (["a.arpa", "b.arpa", "--best-mix", "missing.txt"], "missing.txt"),
    (["a.arpa", "addk.npz", "--lambda", "0.5,0.5"], "addk.npz: "),
    (["a.arpa", "b.arpa"], "--lambda"),
    (["a.arpa", "b.arpa", "--lambda", "0.5,0.5", "--best-mix", "valid.txt"], "one of the two"),
    (["a.arpa", "b.arpa", "--best-mix", "valid.txt", "--log-linear"], "log-linear"),
])
def test_cli_bad_input_says_what_and_writes_nothing(run_cli, files, tmp_path, monkeypatch, toy_dataset, args, needle):
    monkeypatch.chdir(files)
    if not (files / "addk.npz").exists():
        NgramLM(order=2, smoothing="addk").fit(toy_dataset["train"], vocab=toy_dataset.vocab).save(files / "addk.npz")
    out = tmp_path / "out.arpa"
    code, stdout, err = run_cli("mix", *args, "-o", out)
    assert code != 0
    assert needle in err, err
    assert "Traceback" not in err
    if code == 2 and "Usage" not in err:  # an InputError: the cause and the fix
        assert "(fix: " in err
    assert not out.exists() and not list(tmp_path.iterdir())
