"""One build pipeline (ngramlm.builder.pipeline): ``ngramlm train`` and ``NgramLM.fit_files`` fill a
BuildConfig and call ``build`` once, so the same text gives the same model file through either, on every
route (in memory, streamed within a budget, estimated out of core), and the config refuses what it
cannot build."""
from __future__ import annotations

import random
import zipfile

import pytest

from corpora.errors import InputError
from ngramlm import NgramLM
from ngramlm.builder.pipeline import BuildConfig, build, route

SMALL = "70M"
_rng = random.Random(11)
# Zipfian words (rare ones too, so Kneser-Ney has its count-of-counts at every order), blank lines among them.
WORDS = [f"w{i}" for i in range(300)]
LINES = [" ".join(_rng.choices(WORDS, weights=[1 / (i + 1) for i in range(300)], k=_rng.randint(0, 9)))
         for _ in range(400)]


@pytest.fixture()
def text(tmp_path):
    path = tmp_path / "train.txt"
    path.write_text("\n".join(LINES) + "\n", encoding="utf-8")
    return path


def _members(path) -> dict:
    """A native file's members, byte for byte (the zip's timestamps aside)."""
    with zipfile.ZipFile(path) as zf:
        return {n: zf.read(n) for n in zf.namelist()}


def _train(run_cli, *args):
    code, out, err = run_cli("train", *args)
    assert code == 0, err
    return err


# ----------------------------------------------------------------------------- train == fit_files
@pytest.mark.parametrize("how", ["memory", "streamed", "disk"])
def test_train_and_fit_files_write_the_same_model(run_cli, text, tmp_path, how):
    cli = {"memory": [], "streamed": ["--memory", SMALL, "-T", tmp_path / "tmp"],
           "disk": ["--memory", SMALL, "-T", tmp_path / "tmp", "--estimation", "disk"]}[how]
    api = {"memory": {}, "streamed": {"memory": SMALL, "temp_dir": tmp_path / "tmp"},
           "disk": {"memory": SMALL, "temp_dir": tmp_path / "tmp", "estimation": "disk"}}[how]
    err = _train(run_cli, text, "--order", "3", *cli, "-o", tmp_path / "cli.npz")
    assert ("estimated out of core" in err) == (how == "disk")
    msgs = []
    lm = NgramLM(order=3).fit_files([text], progress=msgs.append, **api)
    assert any("estimating out of core" in m for m in msgs) == (how == "disk")
    assert not any(m.startswith(("training", "===", " ")) for m in msgs)  # only the steps' own messages
    lm.save(tmp_path / "api.npz")
    assert _members(tmp_path / "api.npz") == _members(tmp_path / "cli.npz")
    words = sum(len(x.split()) for x in LINES)
    assert lm.build_stats_ == {"sentences": len(LINES), "words": words}


def test_the_stages_of_each_route(text, tmp_path):
    def run(config, texts=(text,)):
        seen = []
        built = build(list(map(str, texts)), config, lambda m, stage=None, depth=0: seen.append((stage, depth, m)),
                      estimator=NgramLM(**config.estimator_params()))
        return built, [s for s, _, _ in seen if s is not None], seen

    built, stages, seen = run(BuildConfig(order=2))
    assert built.route == "memory" and stages == [1, 2, 3]
    assert (None, 0, f"training 2-gram mkn on {text}: 400 sentences, {built.words} words, "
                     f"{built.vocab.n_types} types") in seen
    assert built.estimator.order_ == 2 and built.on_disk is None and built.text == str(text)

    built, stages, seen = run(BuildConfig(order=2, memory=SMALL, temp_dir=str(tmp_path / "t")))
    assert built.route == "streamed" and stages == [1, 2, 3]
    assert any(d == 2 and "counting in blocks" in m for _, d, m in seen)

    # Out of core to a file the pipeline writes: stage 4 is its own, the estimator holds nothing.
    out = tmp_path / "ooc.arpa"
    built, stages, _ = run(BuildConfig(order=2, memory=SMALL, temp_dir=str(tmp_path / "t"), estimation="disk",
                                       output=str(out), arpa=True))
    assert stages == [1, 2, 3, 4] and built.on_disk is not None and not hasattr(built.estimator, "tables_")
    n1 = built.vocab.n_types + 1  # and <s>
    assert built.on_disk.n_ngrams[0] == n1 and f"\\data\\\nngram 1={n1}\n" in out.read_text()

    built, stages, seen = run(BuildConfig(order=2, weights=[1, 2]), texts=(text, text))
    assert built.route == "weighted" and stages == [1, 2, 3]
    assert built.count_merging == {"texts": [str(text)] * 2, "weights": [1.0, 2.0]}
    assert built.estimator.info_["count_merging"] == built.count_merging
    assert [m for _, d, m in seen if d == 1] == [f"{text}: 400 sentences, {built.words // 2} words"] * 2


def test_route():
    assert route(["a"], BuildConfig()) == "memory"
    assert route(["a", "b"], BuildConfig()) == "streamed"
    assert route(["a"], BuildConfig(memory="1G")) == "streamed"
    assert route(["a"], BuildConfig(files=True)) == "streamed"
    assert route(["a"], BuildConfig(estimation="disk")) == "streamed"
    assert route(["a", "b"], BuildConfig(tune_weights_on="dev")) == "weighted"


# ----------------------------------------------------------------------------- the alias bug
def test_weights_take_a_smoother_s_alias(run_cli, tmp_path):
    """`--weights` checked the name before its alias was resolved: `--smoothing kneser-ney` failed
    ("... not kneser-ney") while `--smoothing kn` worked."""
    a, b = tmp_path / "a.txt", tmp_path / "b.txt"
    a.write_text("\n".join(LINES[:200]) + "\n")
    b.write_text("\n".join(LINES[200:260]) + "\n")
    for smoothing in ("kneser-ney", "kn"):
        _train(run_cli, a, b, "--weights", "1,2", "--smoothing", smoothing, "--order", "3", "-o",
               tmp_path / f"{smoothing}.npz")
    assert _members(tmp_path / "kneser-ney.npz") == _members(tmp_path / "kn.npz")
    lm = NgramLM.load(tmp_path / "kn.npz")
    assert lm.smoother_name_ == "kn" and lm.info_["count_merging"]["weights"] == [1.0, 2.0]
    code, _, err = run_cli("train", a, b, "--weights", "1,2", "--smoothing", "jelinek-mercer", "-o", tmp_path / "j.npz")
    assert code == 2 and "not jm: train with --smoothing mkn" in err


# ----------------------------------------------------------------------------- what the config refuses
@pytest.mark.parametrize("options, error, message", [
    ({"estimation": "tape"}, InputError, "unknown estimation 'tape'"),
    ({"order": 0}, InputError, "n-gram order must be an integer"),
    ({"smoother_params": {"discout": 0.3}}, ValueError, "not discout"),
    ({"weights": [1, 2], "tune_weights_on": "dev"}, InputError, "give one of them"),
    ({"weights": [1, 2], "memory": "1G"}, InputError, "drop memory"),
    ({"tune_weights_on": "dev", "files": True}, InputError, "drop files"),
    ({"weights": [1, 2], "compat": "kenlm"}, InputError, "lmplz has no weights"),
    ({"compat": "srilm", "dask": "local:2"}, InputError, "drop dask"),
    ({"compat": "srilm", "memory": "1G"}, InputError, "drop memory"),
    ({"limit_vocab": ["a"], "estimation": "disk"}, InputError, "limits the estimated model in memory"),
    ({"prune": [1, 1]}, InputError, "unigrams cannot be pruned"),
])
def test_a_config_refuses_what_it_cannot_build(options, error, message):
    with pytest.raises(error, match=message):
        BuildConfig(**options)


def test_the_config_resolves_the_smoother_s_alias_and_makes_the_estimator():
    config = BuildConfig(order=2, smoothing="Witten-Bell")
    assert config.smoothing == "wb"
    assert config.estimator_params() == {"order": 2, "smoothing": "wb", "k": None, "discount": None,
                                         "discount_fallback": None, "alpha": None, "lambdas": None, "prune": None,
                                         "prune_entropy": None, "compat": None, "interpolate": None, "gtmin": None,
                                         "gtmax": None}
    lm = NgramLM(order=4, smoothing="kneser-ney", discount_fallback=(0.5,))
    config = BuildConfig.for_estimator(lm, memory="1G")
    assert (config.order, config.smoothing, config.memory) == (4, "kn", "1G")
    assert config.smoother_params == {"discount_fallback": (0.5,)}


def test_build_refuses_texts_and_estimators_that_do_not_fit(text, tmp_path):
    config = BuildConfig(order=2)
    with pytest.raises(ValueError, match="the estimator's order, smoothing differ"):
        build([str(text)], config, estimator=NgramLM(order=3, smoothing="wb"))
    with pytest.raises(InputError, match="no training text"):
        build([], config, estimator=NgramLM(order=2))
    with pytest.raises(InputError, match="2 weights for 3 texts"):
        build([str(text)] * 3, BuildConfig(order=2, weights=[1, 2]), estimator=NgramLM(order=2))
    with pytest.raises(InputError, match="several texts"):
        build([str(text)], BuildConfig(order=2, weights=[1]), estimator=NgramLM(order=2))
    with pytest.raises(InputError, match="no such file"):
        build([str(tmp_path / "nope.txt")], BuildConfig(order=2, files=True), estimator=NgramLM(order=2))
    wb = BuildConfig(order=2, smoothing="wb", files=True, estimation="disk", memory=SMALL, temp_dir=str(tmp_path))
    with pytest.raises(InputError, match="cannot estimate this model out of core: .* not wb"):
        build([str(text)], wb, estimator=NgramLM(**wb.estimator_params()))
    bad = BuildConfig(order=2, smoothing="nope")
    with pytest.raises(InputError, match="unknown smoother 'nope'"):  # before any text is read
        build([str(tmp_path / "nope.txt")], bad, estimator=NgramLM(**bad.estimator_params()))
