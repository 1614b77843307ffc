"""The packages' layers: ``corpora`` at the bottom, ``ngramlm`` and ``neural`` two sibling families on
it that never import each other, ``reports`` and ``cli.py`` on top.  Read from the source (every
import statement, those inside functions included), so a lazy import cannot slip through; and
checked at run time: loading an n-gram model and scoring with it never imports ``neural`` or torch.

Before: ``ngramlm/commands.py`` and ``infini_commands.py`` imported ``neural`` (to dispatch ``.pt``
files), ``neural/commands.py`` imported ``ngramlm.summary``, ``corpora/commands.py`` imported
``ngramlm`` (the ``stats`` command's sparsity table).
"""
from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
TOP = {"corpora", "ngramlm", "neural", "reports", "cli"}
# package -> the toolkit packages it may import
ALLOWED = {
    "corpora": set(),
    "ngramlm": {"corpora"},
    "neural": {"corpora"},
    "reports": {"corpora", "ngramlm", "neural"},
}


def _imports(path: Path) -> set:
    """Top-level toolkit names imported anywhere in ``path`` (absolute imports; relative ones stay inside)."""
    tree = ast.parse(path.read_text("utf-8"), filename=str(path))
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found |= {a.name.split(".")[0] for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            found.add(node.module.split(".")[0])
    return found & TOP


@pytest.mark.parametrize("package", sorted(ALLOWED))
def test_a_package_imports_only_the_layers_below_it(package):
    bad = {}
    for path in sorted((REPO / package).glob("*.py")):
        wrong = _imports(path) - ALLOWED[package] - {package}
        if wrong:
            bad[path.name] = sorted(wrong)
    assert not bad, f"{package} imports {bad}; allowed: {sorted(ALLOWED[package]) or 'nothing'}"


def test_scoring_an_ngram_model_never_imports_neural(tmp_path):
    code = (
        "import sys\nfrom corpora import load_corpus, prepare\nfrom corpora.toy import ToyConfig\n"
        "from ngramlm import NgramLM\nfrom ngramlm.commands import other_kind\n"
        "ds = prepare(load_corpus('toy', toy_config=ToyConfig(n_train_tokens=5000, n_valid_tokens=500, n_test_tokens=500)))\n"
        f"lm = NgramLM(order=2).fit(ds['train'], vocab=ds.vocab)\nlm.save({str(tmp_path / 'm.npz')!r})\n"
        f"assert other_kind({str(tmp_path / 'm.npz')!r}) is None\n"
        "lm.perplexity_report(ds['test'])\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] in ('neural', 'torch', 'reports')))\n"
    )
    r = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "[]"


def test_a_checkpoint_is_recognised_through_the_registry(tmp_path, run_cli):
    pytest.importorskip("torch")
    from corpora.modelkinds import kind_of
    from ngramlm.commands import other_kind

    ckpt = tmp_path / "lm.pt"
    assert run_cli("neural", "train", "toy", "--dry-run", "--no-progress", "--out", ckpt)[0] == 0
    assert kind_of(ckpt).name == "neural" and other_kind(str(ckpt)).name == "neural"
    model = tmp_path / "m.npz"
    assert run_cli("train", "toy", "--order", "1", "-o", model)[0] == 0
    assert other_kind(str(model)) is None and kind_of(tmp_path / "missing") is None
    code, out, err = run_cli("ppl", ckpt, "toy")
    assert code == 0 and "neural lstm" in out, err
