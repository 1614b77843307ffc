"""Model files of either family in the shared commands, at run time (the static layering is
tests/test_layers.py).

``ngramlm`` never imports ``neural``; ``ngramlm ppl``, ``generate`` and ``infini ppl --mix`` take a
checkpoint through :mod:`corpora.modelkinds`, where the top layer (``cli.py``) registers the neural
kind when the program starts.  Before issue 34 ``corpora.modelkinds`` imported ``neural.kind`` by a
string, and ``neural.kind`` the neural command module: a checkpoint was recognised by the n-gram
package alone, through the ground floor and back up.
"""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent


def _python(code: str, *args) -> subprocess.CompletedProcess:
    """``code`` run in a fresh interpreter at the repository root (nothing registered, nothing imported)."""
    return subprocess.run([sys.executable, "-c", code, *map(str, args)], cwd=REPO, capture_output=True, text=True,
                          timeout=300)


def test_scoring_an_ngram_model_never_imports_neural(tmp_path):
    code = (
        "import sys\nfrom corpora import load_corpus, prepare\nfrom corpora.toy import ToyConfig\n"
        "from ngramlm import NgramLM\nfrom ngramlm.commands.common import other_kind\n"
        "ds = prepare(load_corpus('toy', toy_config=ToyConfig(n_train_tokens=5000, n_valid_tokens=500, n_test_tokens=500)))\n"
        f"lm = NgramLM(order=2).fit(ds['train'], vocab=ds.vocab)\nlm.save({str(tmp_path / 'm.npz')!r})\n"
        f"assert other_kind({str(tmp_path / 'm.npz')!r}) is None\n"
        "lm.perplexity_report(ds['test'])\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] in ('neural', 'torch', 'reports')))\n"
    )
    r = _python(code)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "[]"


@pytest.fixture(scope="module")
def texts(tmp_path_factory) -> dict:
    """Small text files cut from the toy corpus (train, valid, test): a few seconds of scoring each."""
    from corpora import load_corpus

    corpus, folder = load_corpus("toy"), tmp_path_factory.mktemp("texts")
    out = {}
    for split, n in (("train", 3000), ("valid", 60), ("test", 60)):
        out[split] = folder / f"{split}.txt"
        out[split].write_text("".join(" ".join(s) + "\n" for s in corpus.sentences(split)[:n]))
    return out


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory):
    """An untrained 1 x 8 LSTM checkpoint on the toy corpus's vocabulary (no training run needed)."""
    pytest.importorskip("torch")
    from corpora import load_corpus
    from neural.checkpoint import save_checkpoint
    from neural.models import build_model

    corpus = load_corpus("toy")
    vocab = corpus.new_vocab().fit(corpus.sentences("train"))
    path = tmp_path_factory.mktemp("kinds") / "lstm.pt"
    model = build_model("rnn", {"vocab_size": len(vocab), "emb_size": 8, "hidden_size": 8, "n_layers": 1}, seed=0)
    save_checkpoint(path, model, vocab)
    return path


def test_a_checkpoint_is_not_recognised_by_the_ngram_package_alone(checkpoint):
    # A fresh interpreter with the n-gram commands that take either family, and nothing registered:
    # the checkpoint is not recognised and neural is never imported (no string import is left).
    # Registered as the top layer does, it is -- still without torch.
    code = (
        "import sys\nimport ngramlm.commands.infini, ngramlm.commands.lm\n"
        "from corpora.modelkinds import kind_of, kinds\nfrom ngramlm.commands.common import other_kind\n"
        "path = sys.argv[1]\n"
        "alone = [kinds(), kind_of(path), other_kind(path), sorted(m for m in sys.modules if m.split('.')[0] == 'neural')]\n"
        "import neural.kind\nneural.kind.register()\n"
        "print(alone, kind_of(path).name, other_kind(path).name, 'torch' in sys.modules)\n"
    )
    r = _python(code, checkpoint)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "[[], None, None, []] neural neural False"


def test_the_program_registers_the_neural_kind_and_ngram_files_stay_ngram(checkpoint, tmp_path, run_cli):
    from corpora.modelkinds import kind_of
    from ngramlm.commands.common import other_kind

    model = tmp_path / "m.npz"
    assert run_cli("train", "toy", "--order", "1", "-o", model)[0] == 0  # cli.main: the kind is registered
    assert kind_of(checkpoint).name == "neural" and other_kind(str(checkpoint)).name == "neural"
    assert other_kind(str(model)) is None and kind_of(tmp_path / "missing") is None
    assert kind_of(model) is None  # a native .npz is a zip too, but no checkpoint


def test_the_program_registers_the_neural_kind_when_it_starts(checkpoint, tmp_path):
    # A fresh interpreter: importing cli registers nothing; running a command (here one that fails on a
    # missing file, so nothing is loaded) registers the neural kind, without importing torch.
    code = (
        "import sys\nimport cli\nfrom corpora.modelkinds import kind_of, kinds\n"
        "before = kinds()\n"
        "try:\n    cli.main(['ppl', sys.argv[2], 'toy'])\nexcept SystemExit as exc:\n    code = exc.code\n"
        "print(before, code, [k.name for k in kinds()], kind_of(sys.argv[1]).name, 'torch' in sys.modules)\n"
    )
    r = _python(code, checkpoint, tmp_path / "missing.pt")
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "[] 2 ['neural'] neural False"
    assert "missing.pt: no such model file" in r.stderr


def test_ngramlm_ppl_and_generate_on_a_checkpoint_print_what_the_neural_commands_print(checkpoint, texts, run_cli):
    # The shared commands (through cli.main, which registers the kind): the same lines as
    # `ngramlm neural ppl` / `neural generate --strategy sample`.
    code, out, err = run_cli("ppl", checkpoint, texts["test"])
    assert code == 0, err
    assert "neural lstm" in out and out == run_cli("neural", "ppl", checkpoint, texts["test"])[1]
    code, out, err = run_cli("generate", checkpoint, "-n", "2", "--max-len", "6", "--seed", "3", "--prompt", "the")
    assert code == 0, err
    lines = out.splitlines()
    assert len(lines) == 2 and all(line.startswith("the ") for line in lines)
    assert out == run_cli("neural", "generate", checkpoint, "--strategy", "sample", "-n", "2", "--max-len", "6",
                          "--seed", "3", "--prompt", "the")[1]


def test_both_families_score_the_same_tokens_through_every_route(checkpoint, texts, tmp_path, run_cli):
    """The checkpoint's log10 per token: by the registered kind (what `infini ppl --mix` uses), by
    reports' either-family scorer and by neural itself; and an n-gram model's by reports and ngramlm."""
    import numpy as np

    from corpora.modelkinds import kind_of
    from corpora.sources import read_text_source
    from neural.scoring import ppl_summary, token_log10 as checkpoint_log10
    from ngramlm.loading import token_log10
    from reports.scoring import per_token_log10

    model = tmp_path / "m.npz"
    assert run_cli("train", texts["train"], "--order", "2", "-o", model)[0] == 0
    sentences = read_text_source(str(texts["test"]), split="test", data_dir=None, tokenizer=None).sentences
    assert len(sentences) == 60
    n_tokens = sum(len(s) + 1 for s in sentences)  # every word and </s>
    direct = checkpoint_log10(checkpoint, sentences)
    assert direct.shape == (n_tokens,) and np.all(direct < 0)
    assert np.array_equal(kind_of(checkpoint).per_token_log10(str(checkpoint), sentences), direct)
    assert np.array_equal(per_token_log10(checkpoint, sentences), direct)
    ngram = token_log10(model, sentences)
    assert ngram.shape == (n_tokens,) and np.array_equal(per_token_log10(model, sentences), ngram)
    # the per-token scores add up to the summary's total (the same tokens, the same accounting)
    summary = ppl_summary(checkpoint, str(texts["test"]), threads=None)
    assert summary["tokens"] == n_tokens and summary["log10_prob"] == pytest.approx(float(direct.sum()), rel=1e-9)


def test_infini_mix_takes_a_checkpoint(checkpoint, texts, tmp_path, run_cli):
    index = tmp_path / "i.npz"
    assert run_cli("infini", "build", texts["train"], "-o", index)[0] == 0
    code, out, err = run_cli("infini", "ppl", index, texts["test"], "--mix", checkpoint, "--tune-on", texts["valid"],
                             "--json")
    assert code == 0, err
    d = json.loads(out)
    assert d["mix"] == str(checkpoint) and d["other"]["tokens"] == d["tokens"]
    assert d["mixture"]["ppl"] <= d["other"]["ppl"] + 1e-9


@pytest.mark.parametrize("command", [["score", "{ckpt}", "toy"], ["export-arpa", "{ckpt}", "{tmp}/x.arpa"],
                                     ["prune", "{ckpt}", "-o", "{tmp}/x.arpa", "--threshold", "1e-7"]])
def test_an_ngram_command_given_a_checkpoint_says_what_it_is_and_what_to_run(run_cli, checkpoint, tmp_path,
                                                                            command):
    args = [a.format(ckpt=checkpoint, tmp=tmp_path) for a in command]
    code, _, err = run_cli(*args)
    assert code == 2, err
    assert "a neural checkpoint" in err and "n-gram model" in err
    assert "ngramlm ppl MODEL TEXT" in err and not (tmp_path / "x.arpa").exists()
