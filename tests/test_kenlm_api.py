"""ngramlm.Model speaks the kenlm module's API: the same numbers as kenlm itself on the same ARPA file.

The reference is the ``kenlm`` Python module (the ``kenlm-ex`` wheel in the test extras), run in
this process on the file this toolkit wrote.  Toy corpus: runs anywhere; PTB: with the corpora.
"""
from __future__ import annotations

import copy
import math

import pytest

from ngramlm import Model, NgramLM, State

kenlm = pytest.importorskip("kenlm", reason="the kenlm module (pip install kenlm-ex) is the reference")


@pytest.fixture(scope="module")
def toy_arpa(tmp_path_factory):
    from corpora import load_corpus, prepare
    from corpora.toy import ToyConfig
    from ngramlm.io.arpa import write_arpa

    ds = prepare(load_corpus("toy", toy_config=ToyConfig(n_train_tokens=60_000, n_valid_tokens=3000,
                                                          n_test_tokens=3000)))
    lm = NgramLM(order=4, smoothing="mkn").fit(ds["train"], vocab=ds.vocab)
    path = tmp_path_factory.mktemp("api") / "toy4.arpa"
    write_arpa(lm, path)
    lines = [" ".join(s) for s in ds.corpus.sentences("test")][:300]
    # Words the model has never seen, a literal <unk>, and an empty line.
    lines += ["zzqx unknownword the", "<unk> <unk>", "", lines[0] + " zzqx " + lines[1]]
    return path, lines


def test_every_call_type_matches_kenlm(toy_arpa):
    path, lines = toy_arpa
    ours, ref = Model(path), kenlm.Model(str(path))
    assert ours.order == ref.order == 4
    for word in ("the", "zzqx", "<s>", "</s>", "<unk>"):
        assert (word in ours) == (word in ref), word
    for line in lines:
        for bos in (True, False):
            for eos in (True, False):
                a = list(ours.full_scores(line, bos=bos, eos=eos))
                b = list(ref.full_scores(line, bos=bos, eos=eos))
                assert len(a) == len(b)
                for (lp, n, oov), (lp2, n2, oov2) in zip(a, b):
                    assert lp == pytest.approx(lp2, abs=1e-6) and n == n2 and oov == oov2, (line, bos, eos)
                # kenlm adds a sentence's scores in float32: sums agree to float32 precision.
                assert ours.score(line, bos=bos, eos=eos) == pytest.approx(ref.score(line, bos=bos, eos=eos),
                                                                           rel=1e-6, abs=1e-6)
        n = len(line.split()) + 1
        assert ours.perplexity(line) == pytest.approx(10 ** (-ours.score(line) / n), rel=1e-12)
        # kenlm exponentiates its float32 sum: equal to float32 precision, amplified by ln 10 * |log10 p| / n.
        assert ours.perplexity(line) == pytest.approx(ref.perplexity(line), rel=1e-5)


def test_the_state_api_matches_kenlm_word_by_word(toy_arpa):
    path, lines = toy_arpa
    ours, ref = Model(path), kenlm.Model(str(path))
    words = " ".join(lines[:100]).split()
    a, b = State(), State()
    ka, kb = kenlm.State(), kenlm.State()
    ours.BeginSentenceWrite(a)
    ref.BeginSentenceWrite(ka)
    for w in words:
        full = ours.BaseFullScore(a, w, b)
        kfull = ref.BaseFullScore(ka, w, kb)
        assert full.log_prob == pytest.approx(kfull.log_prob, abs=1e-6)
        assert (full.ngram_length, full.oov) == (kfull.ngram_length, kfull.oov)
        a, b, ka, kb = b, a, kb, ka
    # NullContextWrite: no history at all.
    ours.NullContextWrite(a)
    ref.NullContextWrite(ka)
    assert ours.BaseScore(a, "the", b) == pytest.approx(ref.BaseScore(ka, "the", kb), abs=1e-6)


def test_states_are_hashable_comparable_and_equal_when_they_score_alike(toy_arpa):
    path, lines = toy_arpa
    m = Model(path)
    s, t, u = State(), State(), State()
    m.BeginSentenceWrite(s)
    m.BeginSentenceWrite(t)
    assert s == t and hash(s) == hash(t) and len({s, t}) == 1
    m.BaseScore(s, "the", u)
    assert u != s
    c = copy.copy(u)
    assert c == u and c is not u
    # Two different histories that end in the same minimised context score every word alike.
    words = lines[0].split()
    x, y, tmp = State(), State(), State()
    m.NullContextWrite(x)
    m.BeginSentenceWrite(y)
    for w in ["zzqx"] + words[:1]:
        m.BaseScore(x, w, tmp)
        x, tmp = tmp, x
    for w in ["qqqq"] + words[:1]:
        m.BaseScore(y, w, tmp)
        y, tmp = tmp, y
    assert x == y  # an unknown word cuts the history in both (the toy has no <unk> n-grams)
    for w in words[1:6]:
        assert m.BaseScore(x, w, tmp) == m.BaseScore(y, w, tmp)


def test_model_from_native_and_arpa_agree(toy_arpa, tmp_path):
    from ngramlm.loading import read_arpa

    path, lines = toy_arpa
    native = tmp_path / "m.npz"
    read_arpa(path).save(native)
    a, b = Model(path), Model(native)
    for line in lines[:50]:
        assert a.score(line) == pytest.approx(b.score(line), abs=1e-9)
    import numpy as np

    assert np.allclose(a.score_array(lines[:50]), [a.score(x) for x in lines[:50]], atol=1e-6)


def test_additive_models_are_refused_clearly(tmp_path):
    from corpora import load_corpus, prepare
    from corpora.errors import InputError

    ds = prepare(load_corpus("toy"))
    lm = NgramLM(order=2, smoothing="laplace").fit(ds["train"], vocab=ds.vocab)
    with pytest.raises(InputError, match="not a back-off model"):
        Model(lm=lm)


@pytest.mark.slow
def test_ptb_5gram_matches_kenlm(shared_corpora, tmp_path):
    from corpora import load_corpus, prepare
    from ngramlm.io.arpa import write_arpa

    ds = prepare(load_corpus("ptb", data_dir=shared_corpora))
    lm = NgramLM(order=5, smoothing="mkn").fit(ds["train"], vocab=ds.vocab)
    path = tmp_path / "ptb5.arpa"
    write_arpa(lm, path)
    ours, ref = Model(lm=lm), kenlm.Model(str(path))
    test = [" ".join(s) for s in ds.corpus.sentences("test")]
    total = sum(ours.score(x) for x in test[:1000])
    assert total == pytest.approx(sum(ref.score(x) for x in test[:1000]), rel=1e-6)
    assert math.isclose(ours.perplexity(test[7]), ref.perplexity(test[7]), rel_tol=1e-5)


def test_a_pruned_model_keeps_an_ngram_without_its_suffix(tmp_path):
    """Entropy pruning can keep "a b c" and drop "b c".  Scoring "a b c" must use the trigram, word by
    word through the state API (compiled and Python paths) as in the vectorised scorer and kenlm."""
    from ngramlm.loading import load_any

    arpa = tmp_path / "holes.arpa"
    arpa.write_text("\\data\\\nngram 1=6\nngram 2=7\nngram 3=1\n\n\\1-grams:\n"
                    "-1.0\t<unk>\n-99\t<s>\t-0.3\n-0.7\t</s>\n-0.6\ta\t-0.2\n-0.5\tb\t-0.25\n-0.8\tc\n\n"
                    "\\2-grams:\n-0.2\t<s> a\t-0.1\n-0.3\ta b\t-0.15\n-0.4\tb </s>\n"
                    # (bigrams that take no part, so that kenlm's probing table has room for its blank)
                    "-0.9\tb a\n-0.9\ta a\n-0.9\tb b\n-0.9\tc a\n\n"
                    "\\3-grams:\n-0.05\ta b c\n\n\\end\\\n")
    # a | <s>: the bigram; b | <s> a: "a b" plus bo(<s> a); c | a b: the trigram, though "b c" is gone;
    # </s> | b c: the unigram (c has no back-off weight, "b c" is not an n-gram).
    want = [-0.2, -0.3 - 0.1, -0.05, -0.7]
    enc, oov = load_any(arpa).encode([["a", "b", "c"]])
    assert load_any(arpa).token_scores(enc, oov=oov).log10_prob == pytest.approx(want, abs=1e-12)
    for model in (Model(arpa), Model(arpa, index=False)):
        assert [x[0] for x in model.full_scores("a b c")] == pytest.approx(want, abs=1e-12)
        assert [x[1] for x in model.full_scores("a b c")] == [2, 2, 3, 1]
    ref = kenlm.Model(str(arpa))
    assert [x[0] for x in ref.full_scores("a b c")] == pytest.approx(want, abs=1e-6)
