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

``pairs_tsv``: a small TSV of sentence pairs (a reversal task) for the translators' CLI tests;
:func:`write_reversal_pairs` writes others like it.
"""
from __future__ import annotations

import math
import os
import random
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



def write_reversal_pairs(path: Path, *, n: int, seed: int, letters: str = "abcdefgh", max_words: int = 5,
                         attribution: bool = True) -> Path:
    """A TSV of ``n`` seeded pairs ``w_1 .. w_k .`` -> ``w_k .. w_1 !`` (2 to ``max_words`` words drawn from
    ``letters``): a task a small translator learns; ``attribution`` adds a third column, as fra-eng has."""
    rng = random.Random(seed)
    lines = []
    for _ in range(n):
        s = [rng.choice(letters) for _ in range(rng.randint(2, max_words))]
        lines.append(f"{' '.join(s)} .\t{' '.join(reversed(s))} !" + ("\tgenerated" if attribution else ""))
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


@pytest.fixture
def pairs_tsv(tmp_path) -> Path:
    """300 short pairs over 6 letters, two columns (splits: 240 / 30 / 30)."""
    return write_reversal_pairs(tmp_path / "pairs.tsv", n=300, seed=1, letters="abcdef", max_words=4,
                                attribution=False)


def sequence_log_prob(model, src, seq) -> float:
    """ln P(``seq`` | ``src``) under a translator, one decoding step per token from ``<s>``: what beam search
    ranks (the tests check it against brute force over every candidate)."""
    import torch

    from corpora.vocab import BOS_ID
    from neural.seq2seq.pairs import source_batch

    s, s_len = source_batch([src])
    memory, state = model.encode(s, s_len)
    prev, total = BOS_ID, 0.0
    for tok in seq:
        logp, state, _ = model.step(memory, torch.tensor([prev]), state)
        total += float(logp[0, tok])
        prev = tok
    return total


def check_attention_rows(attention: list) -> None:
    """The report's attention matrices (``results.json``): one row per target token and ``</s>``, one
    column per source token and ``</s>``, each row a distribution (the weights are stored as ln)."""
    assert attention
    for a in attention:
        assert len(a["log_weights"]) == len(a["target"]) and a["target"][-1] == "</s>"
        for row in a["log_weights"]:
            assert len(row) == len(a["source"])
            assert sum(math.exp(v) for v in row if v is not None) == pytest.approx(1.0, abs=1e-3)
