"""Shared test fixtures.

``shared_corpora``: the folder holding the real corpora (``ptb/``, ``timemachine/``,
``hongloumeng/``), laid out like a data directory.  It is ``$NGRAMLM_TEST_CORPORA``
when set, else ``<repo>/../shared/corpora``; tests that need it are skipped when it
is absent.

``toy_dataset``: the embedded ``toy`` corpus (generated, no files needed), at a
reduced size, with its vocabulary fitted on train and every split encoded.  The core
invariants (sums to one, pruning, Katz, round trips) run on it, so they run in any
clone, with or without the real corpora.

``run_cli``: runs ``cli.main`` in-process, as the ``ngramlm`` script does (so an
InputError is printed on one line and exits with status 2), and returns
``(exit_code, stdout, stderr)``.
"""
from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="session")
def shared_corpora() -> Path:
    root = Path(os.environ.get("NGRAMLM_TEST_CORPORA") or REPO_ROOT.parent / "shared" / "corpora").resolve()
    if not (root / "ptb").is_dir():
        pytest.skip(f"real corpora not found at {root} (set NGRAMLM_TEST_CORPORA)")
    return root


@pytest.fixture(scope="session")
def toy_dataset():
    from corpora import load_corpus, prepare
    from corpora.toy import ToyConfig

    # 60k training tokens over ~1500 types: generated in about half a second, and
    # its count-of-counts are regular enough for every smoother at orders 1..5
    # without --discount-fallback (smaller toys make Katz/MKN fall back).  The test
    # split has a few OOVs, so <unk> handling is exercised too.
    cfg = ToyConfig(n_train_tokens=60_000, n_valid_tokens=5_000, n_test_tokens=5_000, vocab_size=1500)
    return prepare(load_corpus("toy", toy_config=cfg))


# The KenLM binary variants the tests write: build_binary's options (type, -q, -b, -a) by name.
KENLM_VARIANTS = {"probing": ("probing", None, None, None), "trie": ("trie", None, None, None),
                  "trie-q8-b8": ("trie", 8, 8, None), "trie-a22": ("trie", None, None, 22),
                  "trie-q8-b8-a22": ("trie", 8, 8, 22), "trie-q5-b3-a255": ("trie", 5, 3, 255)}


def kenlm_options(name: str):
    from ngramlm.kenlm.write import BinaryOptions

    kind, q, b, a = KENLM_VARIANTS[name]
    return BinaryOptions(kind=kind, prob_bits=q, backoff_bits=b, array_bits=a)


@pytest.fixture(scope="session")
def kenlm_toy(tmp_path_factory):
    """A 4-gram MKN model of the toy language, its ARPA file, every KenLM binary variant this toolkit
    writes (KENLM_VARIANTS), test lines with OOV words: the KenLM-binary tests' model."""
    from corpora import load_corpus, prepare
    from corpora.toy import ToyConfig
    from ngramlm import NgramLM
    from ngramlm.io.arpa import write_arpa
    from ngramlm.kenlm.write import write_binary

    ds = prepare(load_corpus("toy", toy_config=ToyConfig(n_train_tokens=40_000, n_valid_tokens=2000,
                                                          n_test_tokens=3000)))
    lm = NgramLM(order=4, smoothing="mkn").fit(ds["train"], vocab=ds.vocab)
    d = tmp_path_factory.mktemp("kbin")
    arpa = d / "toy4.arpa"
    write_arpa(lm, arpa)
    files = {}
    for name in KENLM_VARIANTS:
        files[name] = d / f"toy4.{name}.bin"
        write_binary(lm, files[name], kenlm_options(name))
    lines = [" ".join(s) for s in ds.corpus.sentences("test")][:150]
    lines += ["zzqx unknownword " + lines[0], "<unk> <unk>", "", lines[1] + " zzqx " + lines[2]]
    return {"lm": lm, "arpa": arpa, "files": files, "lines": lines, "dir": d}


def needs(*modules: str):
    """Skip a test, saying which extra to install, where a module it needs is absent (a core-only
    install: ``pip install -e '.[test]'`` without the neural/report extras)."""
    import importlib.util

    extra = {"torch": "neural", "sacrebleu": "neural", "matplotlib": "report", "jinja2": "report"}
    missing = [m for m in modules if importlib.util.find_spec(m) is None]
    why = ", ".join(f"{m} (pip install -e '.[{extra.get(m, 'test')}]')" for m in missing)
    return pytest.mark.skipif(bool(missing), reason=f"needs {why}")


REPORT = ("matplotlib", "jinja2", "torch")  # compare: the report extra, and tiny neural models


def invoke_cli(args, input=None):
    """Run ``cli.main(args)`` in-process; return ``(exit_code, stdout, stderr)``."""
    from click.testing import CliRunner

    import cli

    runner = CliRunner()
    with runner.isolation(input=input) as (out, err, _):
        try:
            cli.main([str(a) for a in args])
            code = 0
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
        sys.stdout.flush()
        sys.stderr.flush()
        return code, out.getvalue().decode("utf-8"), err.getvalue().decode("utf-8", "replace")


@pytest.fixture
def run_cli(monkeypatch):
    # Results must not depend on the caller's environment.
    monkeypatch.delenv("NGRAMLM_DATA_DIR", raising=False)
    monkeypatch.delenv("NGRAMLM_DOWNLOAD_MIRROR", raising=False)

    def run(*args, input=None):
        return invoke_cli(args, input=input)

    return run


def sentence_contexts(sentences, n_sentences: int = 60) -> list:
    """Contexts to check that a model sums to one: every prefix of up to 3 words of the first sentences,
    with and without the sentence start."""
    out = []
    for s in sentences[:n_sentences]:
        for i in range(min(len(s), 3) + 1):
            out += [["<s>"] + s[:i], s[:i]]
    return out

