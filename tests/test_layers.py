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
    for path in sorted((REPO / package).rglob("*.py")):  # subpackages too (reports/sections)
        wrong = _imports(path) - ALLOWED[package] - {package}
        if wrong:
            bad[str(path.relative_to(REPO / package))] = sorted(wrong)
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


def _module_graph(package: str) -> dict:
    """module -> the modules of the same package it imports (relative or absolute, at any depth)."""
    mods = {p.stem: p for p in (REPO / package).glob("*.py")}
    graph = {}
    for name, path in mods.items():
        deps = set()
        for node in ast.walk(ast.parse(path.read_text("utf-8"))):
            if isinstance(node, ast.ImportFrom):
                if node.level == 1:
                    deps |= {node.module.split(".")[0]} if node.module else {a.name for a in node.names}
                elif node.level == 0 and node.module and node.module.split(".")[0] == package:
                    parts = node.module.split(".")
                    deps |= {parts[1]} if len(parts) > 1 else {a.name for a in node.names}
            elif isinstance(node, ast.Import):
                deps |= {a.name.split(".")[1] for a in node.names
                         if a.name.split(".")[0] == package and "." in a.name}
        graph[name] = {d for d in deps if d in mods and d != name}
    return graph


def _cycles(graph: dict) -> list:
    """The strongly connected components with more than one module (Tarjan)."""
    index, low, stack, on, out, counter = {}, {}, [], set(), [], [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


@pytest.mark.parametrize("package", sorted(ALLOWED))
def test_no_import_circle_inside_a_package(package):
    # Before issue 23: model.py <-> arpa, io_native, pruning, tuning, build, outofcore, distributed.
    assert _cycles(_module_graph(package)) == []


def test_the_cycle_finder_finds_a_circle():
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


def test_readers_pruning_and_tuning_know_tables_not_the_estimator():
    graph = _module_graph("ngramlm")
    for module in ("arpa", "io_native", "pruning", "tuning", "build", "outofcore", "distributed", "scorer", "query"):
        assert "model" not in graph[module], f"ngramlm.{module} imports the estimator (ngramlm.model)"
    assert len((REPO / "ngramlm" / "model.py").read_text("utf-8").splitlines()) < 300


def test_the_registries_agree_with_what_reports_list():
    from neural.config import ARCHITECTURES, MODEL_NAMES
    from ngramlm.smoothing import SMOOTHER_INFO, SMOOTHERS, backoff_smoothers
    from reports.settings import NEURAL_MODELS

    assert set(NEURAL_MODELS) == set(ARCHITECTURES) == set(MODEL_NAMES)
    assert set(SMOOTHER_INFO) == set(SMOOTHERS)
    assert backoff_smoothers() == ("mkn", "kn", "absolute", "wb", "jm", "katz")
