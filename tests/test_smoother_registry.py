"""The smoother registry (ngramlm.smoothing.REGISTERED): one entry says everything about a smoother -- its
aliases, parameters and their options, whether count merging, the out-of-core estimation and lmplz's
compat form take it -- and every other table is read from it.  Aliases are resolved where a name comes
in, so an alias trains the very model of its smoother's name, through the API and ``ngramlm train``."""
from __future__ import annotations

import inspect
import random
import zipfile

import pytest

from corpora import Vocab
from ngramlm import NgramLM
from ngramlm.io.native import INIT_PARAMS
from ngramlm.smoothing import (ALIASES, ESTIMATOR_PARAMS, OPTIONS, REGISTERED, SMOOTHER_INFO, canonical_name,
                               compat_smoothers, make_smoother, mergeable_smoothers, out_of_core_smoothers,
                               smoother_params)

# Every alias, written out: renaming or dropping one fails here.
WANT_ALIASES = {"modified-kneser-ney": "mkn", "kneser-ney": "kn", "abs": "absolute", "witten-bell": "wb",
                "jelinek-mercer": "jm", "stupid-backoff": "stupid", "lidstone": "addk", "add-k": "addk",
                "add-one": "laplace"}
# What each smoother needs to train on a tiny text (degenerate count-of-counts, no held-out text).
NEEDS = {"mkn": {"discount_fallback": (0.5, 1.0, 1.5)}, "kn": {"discount_fallback": (0.5, 1.0, 1.5)},
         "absolute": {"discount_fallback": (0.5, 1.0, 1.5)}, "katz": {"discount_fallback": (0.5, 1.0, 1.5)},
         "jm": {"lambdas": [0.2, 0.8]}}
FLAGS = {"mkn": ["--discount-fallback"], "kn": ["--discount-fallback"], "absolute": ["--discount-fallback"],
         "katz": ["--discount-fallback"], "jm": ["--lambdas", "0.2,0.3,0.5"]}
_rng = random.Random(3)
SENTS = [[_rng.choice("abcdefg") for _ in range(_rng.randint(1, 8))] for _ in range(120)]


def test_the_aliases_are_the_registry_s():
    assert ALIASES == WANT_ALIASES
    names = [i.name for i in REGISTERED]
    assert not set(ALIASES) & set(names)  # an alias never shadows a name
    for alias, name in ALIASES.items():
        assert canonical_name(alias) == canonical_name(alias.upper()) == canonical_name(alias.title()) == name
    assert canonical_name("MKN") == "mkn"
    # What names no smoother is left for the estimator to refuse, with its own message.
    assert canonical_name("nope") == "nope" and canonical_name(None) is None and canonical_name("arpa") == "arpa"


def test_the_parameters_are_the_classes_keyword_arguments():
    # Explicit in the registry; they must be what each class takes (in its signature's order).
    for info in REGISTERED:
        if info.fixed:  # laplace and mle: add-k with k fixed
            assert info.params == () and smoother_params(info.name) == ()
            continue
        sig = inspect.signature(info.cls.__init__).parameters.values()
        takes = tuple(p.name for p in sig if p.kind is inspect.Parameter.KEYWORD_ONLY)
        assert smoother_params(info.name) == takes, info.name
    assert smoother_params("kneser-ney") == ("discount_fallback", "discounts")
    assert smoother_params("katz") == ("k_max", "discount_fallback")
    assert smoother_params("wb") == ()


def test_options_and_init_params_come_from_the_registry():
    assert OPTIONS == {"k": "--k", "discount": "--discount", "discount_fallback": "--discount-fallback",
                       "alpha": "--alpha", "lambdas": "--lambdas"}
    # A native file's init_params, in this order (the bytes of saved files depend on it).
    assert INIT_PARAMS == ("order", "smoothing", "k", "discount", "discount_fallback", "alpha", "lambdas", "prune",
                           "prune_entropy", "compat", "interpolate", "gtmin", "gtmax")
    assert list(inspect.signature(NgramLM.__init__).parameters)[1:] == list(INIT_PARAMS)
    # Every parameter with an option is one NgramLM takes; the others are the API's (make_smoother).
    with_option = {p.name for i in REGISTERED for p in i.params if p.option}
    assert with_option == {p.name for p in ESTIMATOR_PARAMS}
    assert {p.name for i in REGISTERED for p in i.params if not p.option} == {"discounts", "k_max"}


def test_what_each_smoother_can_do():
    assert mergeable_smoothers() == ("mkn", "kn", "absolute", "wb")
    assert out_of_core_smoothers() == ("mkn", "kn")
    assert compat_smoothers() == ("mkn", "kn")
    assert [n for n, i in SMOOTHER_INFO.items() if i.form == "additive"] == ["addk", "laplace", "mle"]


def test_the_out_of_core_and_merge_checks_read_the_registry():
    from ngramlm.builder import outofcore
    from ngramlm.builder.count_merge import MergedSmoother, align
    from ngramlm.counts import NgramCounts

    assert [s for s in SMOOTHER_INFO if outofcore.supports(make_smoother(s, **NEEDS.get(s, {})))] == ["mkn", "kn"]
    vocab = Vocab().fit(SENTS)
    src = align([NgramCounts.from_encoded(vocab.encode_sentences(SENTS), order=2, vocab_size=len(vocab))] * 2)
    for name in SMOOTHER_INFO:
        smoother = make_smoother(name, **NEEDS.get(name, {}))
        if name in mergeable_smoothers():
            assert MergedSmoother(smoother, src, [1, 1]).name == name
        else:
            with pytest.raises(ValueError, match=f"which {smoother.name} does not define"):
                MergedSmoother(smoother, src, [1, 1])


def _members(path) -> dict:
    """A native file's members, byte for byte (the zip's timestamps aside)."""
    with zipfile.ZipFile(path) as zf:
        return {n: zf.read(n) for n in zf.namelist()}


@pytest.mark.parametrize("alias", sorted(WANT_ALIASES))
def test_an_alias_gives_its_smoother_s_model_through_the_api(alias, tmp_path):
    name = WANT_ALIASES[alias]
    vocab = Vocab().fit(SENTS)
    enc = vocab.encode_sentences(SENTS)
    for spelling in (alias, alias.upper()):
        lm = NgramLM(order=2, smoothing=spelling, **NEEDS.get(name, {}))
        assert lm.smoothing == name  # resolved where it comes in: init_params, files and messages say `name`
        lm.fit(enc, vocab=vocab).save(tmp_path / "alias.npz")
        NgramLM(order=2, smoothing=name, **NEEDS.get(name, {})).fit(enc, vocab=vocab).save(tmp_path / "name.npz")
        assert _members(tmp_path / "alias.npz") == _members(tmp_path / "name.npz")
        assert NgramLM.load(tmp_path / "alias.npz").smoothing == name


@pytest.mark.parametrize("alias", sorted(WANT_ALIASES))
def test_an_alias_gives_its_smoother_s_model_through_train(alias, run_cli, tmp_path):
    name = WANT_ALIASES[alias]
    text = tmp_path / "t.txt"
    text.write_text("".join(" ".join(s) + "\n" for s in SENTS))
    for smoothing, out in ((alias, "alias.npz"), (name, "name.npz")):
        code, _, err = run_cli("train", text, "--order", "3", "--smoothing", smoothing, *FLAGS.get(name, []),
                               "-o", tmp_path / out)
        assert code == 0, err
    assert _members(tmp_path / "alias.npz") == _members(tmp_path / "name.npz")
    assert NgramLM.load(tmp_path / "alias.npz").smoother_name_ in (name, "laplace")  # add-k's k = 1 is laplace


def test_an_unknown_name_is_refused_when_fitted():
    lm = NgramLM(order=2, smoothing="kneser_ney")
    assert lm.smoothing == "kneser_ney"
    with pytest.raises(ValueError, match="unknown smoother 'kneser_ney'"):
        lm._make_smoother()
