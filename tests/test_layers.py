"""The packages' layers: ``corpora`` at the bottom, ``ngramlm`` and ``neural`` two sibling families on
it that never import each other, ``reports`` and ``cli.py`` on top; inside each family its floors, the
command line on the top one.  Read from the source (every import statement, those inside functions
included, and every import by a string), so a lazy import cannot slip through.  Static and fast: the
same rules at run time (an n-gram model scored without ``neural``; a checkpoint recognised only once
the top layer registers its kind) are tests/test_model_kinds.py.

Before: ``ngramlm/commands/lm.py`` and ``infini_commands.py`` imported ``neural`` (to dispatch ``.pt``
files), ``neural/commands/lm.py`` imported ``ngramlm.summary``, ``corpora/commands.py`` imported
``ngramlm`` (the ``stats`` command's sparsity table).  Before issue 34: ``neural.kind``,
``reports.experiments.parallel_compare`` and ``reports.commands.bert`` imported command modules for
library functions, ``ngramlm/commands/stats.py`` took ``corpora/commands.py``'s privates, and
``corpora.modelkinds`` imported ``neural.kind`` by a string.
"""
from __future__ import annotations

import ast
import functools
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
TOP = {"corpora", "ngramlm", "neural", "reports", "fusion", "cli"}
# package -> the toolkit packages it may import
ALLOWED = {
    "corpora": set(),
    "ngramlm": {"corpora"},
    "neural": {"corpora"},
    "reports": {"corpora", "ngramlm", "neural"},
    # the n-gram model inside decoders: count models as torch tensors and decoder adapters, above both
    # families as reports is (docs/architecture.md); nothing but cli.py imports it
    "fusion": {"corpora", "ngramlm", "neural"},
}


@functools.lru_cache(maxsize=None)
def _nodes(path: Path) -> tuple:
    """Every AST node of ``path``, parsed once for all the tests (the source does not change under them)."""
    return tuple(ast.walk(ast.parse(path.read_text("utf-8"), filename=str(path))))


def _imports(path: Path) -> set:
    """Top-level toolkit names imported anywhere in ``path`` (absolute imports; relative ones stay inside)."""
    found = set()
    for node in _nodes(path):
        if isinstance(node, ast.Import):
            found |= {a.name.split(".")[0] for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            found.add(node.module.split(".")[0])
    return found & TOP


@pytest.mark.parametrize("package", sorted(ALLOWED))
def test_a_package_imports_only_the_layers_below_it(package):
    bad = {}
    for path in sorted((REPO / package).rglob("*.py")):  # subpackages too (reports/sections)
        # A package's __main__ (``python -m ngramlm``) is an entry point, as cli.py is: it runs the program.
        wrong = _imports(path) - ALLOWED[package] - {package} - ({"cli"} if path.name == "__main__.py" else set())
        if wrong:
            bad[str(path.relative_to(REPO / package))] = sorted(wrong)
    assert not bad, f"{package} imports {bad}; allowed: {sorted(ALLOWED[package]) or 'nothing'}"


def _modules(package: str) -> dict:
    """Dotted module name -> path, for every module of ``package`` (its sub-packages included)."""
    out = {}
    for path in sorted([*(REPO / package).rglob("*.py"), *(REPO / package).rglob("*.pyx")]):
        parts = list(path.relative_to(REPO).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        out[".".join(parts)] = path
    return out


def _imported(path: Path, module: str, known: set) -> set:
    """The toolkit modules that ``module`` (at ``path``) imports anywhere: absolute and relative, at
    any depth; ``from package import name`` counts the submodule where ``name`` is one."""
    is_pkg = path.name == "__init__.py"
    package = module if is_pkg else module.rpartition(".")[0]
    found = set()
    if path.suffix == ".pyx":  # compiled: it imports C headers, numpy and nothing of the toolkit
        return set()
    for node in _nodes(path):
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[: len(base) - (node.level - 1)]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            for a in node.names:
                found.add(f"{target}.{a.name}" if f"{target}.{a.name}" in known else target)
        elif isinstance(node, ast.Import):
            for a in node.names:
                name = a.name
                while name and name not in known:  # `import ngramlm.kenlm.format` names the module
                    name = name.rpartition(".")[0]
                if name:
                    found.add(name)
    return {m for m in found if m in known and m != module}


def _module_graph(package: str) -> dict:
    """module -> the modules of the same package it imports (relative or absolute, at any depth)."""
    mods = _modules(package)
    return {name: _imported(path, name, set(mods)) for name, path in mods.items()}


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


# The floors inside each family, low to high: a module imports only modules on its own floor or
# below (docs/architecture.md draws them).  A module is placed by the longest prefix listed.
FLOORS = {
    "ngramlm": [
        # 1 data and the numpy-free KenLM format: what every other floor reads
        {"ngramlm._fast", "ngramlm.accel", "ngramlm.counts", "ngramlm.tables", "ngramlm.hashindex", "ngramlm.kenlm.format",
         "ngramlm.kenlm.api"},
        # 2 smoothing and querying tables
        {"ngramlm.smoothing", "ngramlm.kenlm_compat", "ngramlm.srilm_compat", "ngramlm.scorer", "ngramlm.sparsity"},
        # 3 model files as tables
        {"ngramlm.io"},
        # 4 building, tools over tables, KenLM binaries, the infini-gram
        {"ngramlm.builder", "ngramlm.tools", "ngramlm.kenlm.read", "ngramlm.kenlm.write", "ngramlm.kenlm.probing",
         "ngramlm.kenlm.trie", "ngramlm.infini", "ngramlm.tuning"},
        # 5 the estimator
        {"ngramlm.model"},
        # 6 the faces: any file into a model, the kenlm module's APIs, the package; the next-token
        # tables of any model file (what fusion's tensor form wraps)
        {"ngramlm.loading", "ngramlm.query", "ngramlm.kenlm", "ngramlm", "ngramlm.next_table"},
        # 7 the command line
        {"ngramlm.commands"},
    ],
    "neural": [
        {"neural.sniff", "neural.config", "neural.precision", "neural.data", "neural.base", "neural.cells",
         "neural.regularize", "neural.seq2seq.pairs", "neural.training.contention"},
        {"neural.rnn", "neural.transformer", "neural.hidden", "neural.generate", "neural.evaluation", "neural.bert.model",
         "neural.seq2seq.rnn", "neural.seq2seq.transformer", "neural.adaptation.cache", "neural.seq2seq.translate"},
        {"neural.models", "neural.checkpoint", "neural.adaptation"},
        # 4 training, and scoring a checkpoint on a text (neural.scoring: the ppl summary)
        {"neural.training", "neural.scoring"},
        {"neural.kind", "neural", "neural.seq2seq", "neural.bert"},
        {"neural.commands"},
    ],
    "reports": [
        # 1 building blocks; reports.scoring: a model file of either family scored
        {"reports.formatting", "reports.jsonio", "reports.plots", "reports.html_tables", "reports.scoring",
         "reports.significance", "reports.undertrained", "reports.textbook_figures"},
        {"reports.experiments"},
        {"reports.sections"},
        {"reports.compare", "reports.render"},
        {"reports.commands", "reports"},
    ],
    "fusion": [
        # 1 what the tensor forms share; the decoder adapters (torch-free)
        {"fusion.base", "fusion.ctc", "fusion.pyctc"},
        # 2 the tensor forms: any model whose n-grams are listed, a KenLM probing binary
        {"fusion.tensor", "fusion.probing"},
        # 3 what a search holds: the tensor form over a translator's target vocabulary (shallow fusion)
        {"fusion.target"},
        {"fusion"},
    ],
}


def _floor(package: str, module: str) -> int:
    best, floor = -1, None
    for i, names in enumerate(FLOORS[package]):
        for name in names:
            if (module == name or module.startswith(name + ".")) and len(name) > best:
                best, floor = len(name), i + 1
    return floor


@pytest.mark.parametrize("package", sorted(FLOORS))
def test_every_module_stands_on_a_floor_and_imports_none_above_it(package):
    graph = _module_graph(package)
    assert not [m for m in graph if _floor(package, m) is None], "modules on no floor"
    up = sorted(f"{m} (floor {_floor(package, m)}) -> {d} (floor {_floor(package, d)})"
                for m, deps in graph.items() for d in deps if _floor(package, d) > _floor(package, m))
    assert up == [], "imports that go up a floor:\n" + "\n".join(up)


def test_the_floor_check_sees_an_import_that_goes_up(tmp_path, monkeypatch):
    # The check itself, on a made-up package whose bottom module imports its top one.
    pkg = tmp_path / "demo"
    (pkg / "sub").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "sub" / "__init__.py").write_text("")
    (pkg / "low.py").write_text("def f():\n    from .sub.high import g\n")
    (pkg / "sub" / "high.py").write_text("from ..low import f\n")
    monkeypatch.setattr(sys.modules[__name__], "REPO", tmp_path)
    graph = _module_graph("demo")
    assert graph["demo.low"] == {"demo.sub.high"} and graph["demo.sub.high"] == {"demo.low"}
    assert _cycles(graph) == [["demo.low", "demo.sub.high"]]


def _is_command_module(module: str) -> bool:
    parts = module.split(".")
    return module == "cli" or "commands" in parts or parts[-1] == "__main__"  # __main__: `python -m` entry


def test_no_library_module_imports_a_command_module():
    packages = ("corpora", "ngramlm", "neural", "reports", "labs", "fusion")
    known = {m for p in packages for m in _modules(p)}
    bad = []
    for package in packages:
        for module, path in _modules(package).items():
            if _is_command_module(module):
                continue
            bad += [f"{module} -> {d}" for d in _imported(path, module, known | {"cli"}) if _is_command_module(d)]
    assert bad == [], "library modules importing the command line: " + ", ".join(sorted(bad))


def _string_imports(root: Path, allowed: set) -> list:
    """``path:line`` of every ``import_module`` / ``__import__`` under ``root`` (the top-level modules and
    the toolkit's packages) that names a module outside the caller's own package, or names it by a
    variable; the files in ``allowed`` (relative paths) are not read."""
    bad = []
    for path in sorted(root.glob("*.py")) + sorted(p for t in ("corpora", "ngramlm", "neural", "reports", "labs", "fusion")
                                                   for p in (root / t).rglob("*.py")):
        rel = path.relative_to(root).as_posix()
        if rel in allowed or rel == "setup.py":
            continue
        for node in _nodes(path):
            if isinstance(node, ast.Call) and getattr(node.func, "attr", getattr(node.func, "id", "")) in (
                    "import_module", "__import__"):
                arg = node.args[0] if node.args else None
                if isinstance(arg, ast.Constant) and isinstance(arg.value, str) and (
                        arg.value.startswith(".") or arg.value.split(".")[0] == rel.split("/")[0]):
                    continue
                bad.append(f"{rel}:{node.lineno}")
    return bad


def test_no_private_name_is_imported_from_another_module():
    """A leading underscore means "this module's own": a name another module needs is public API of the
    module that owns it (``from X import _name`` across library modules was 37 places before)."""
    bad = []
    for package in ("corpora", "ngramlm", "neural", "reports", "labs", "fusion"):
        for module, path in _modules(package).items():
            if path.suffix != ".py":
                continue
            is_pkg = path.name == "__init__.py"
            base_pkg = module if is_pkg else module.rpartition(".")[0]
            for node in ast.walk(ast.parse(path.read_text("utf-8"))):
                if not isinstance(node, ast.ImportFrom) or node.module == "__future__":
                    continue
                if node.level:
                    base = base_pkg.split(".")
                    target = ".".join(base[: len(base) - (node.level - 1)] + ([node.module] if node.module else []))
                else:
                    target = node.module or ""
                if target.split(".")[0] not in ("corpora", "ngramlm", "neural", "reports", "labs", "fusion") or target == module:
                    continue
                bad += [f"{module}:{node.lineno} {target}.{a.name}" for a in node.names
                        if a.name.startswith("_") and not a.name.startswith("__")]
    assert bad == [], "private names imported across modules: " + ", ".join(bad)


def test_no_import_by_a_string_across_packages():
    """A module named in a string (importlib) is loaded only within its own package (PEP 562 laziness,
    labs and tokenizer providers by name) or by cli.py; a family is never reached from below by a string
    (model kinds are registered by the top layer: tests/test_model_kinds.py)."""
    from corpora.tokenize import PROVIDED
    from labs import LABS

    # By name, within their own package: the tokenizers that import an optional library, and the labs.
    assert all(m.startswith("corpora.") for m in PROVIDED.values())
    assert all(lab.module.startswith("labs.") for lab in LABS.values())
    bad = _string_imports(REPO, {"cli.py", "corpora/lazy.py", "corpora/tokenize.py", "labs/commands.py"})
    assert bad == [], "string imports: " + ", ".join(bad)


def test_the_string_import_check_sees_a_family_reached_from_below(tmp_path):
    # The check itself: corpora loading neural.kind by name, or by a list of names, is caught; a
    # relative name or one inside the caller's own package is not.
    (tmp_path / "corpora").mkdir()
    (tmp_path / "corpora" / "kinds.py").write_text(
        "import importlib\nPROVIDERS = ('neural.kind',)\n"
        "def load():\n    importlib.import_module('neural.kind')\n"
        "    for name in PROVIDERS:\n        importlib.import_module(name)\n"
        "    importlib.import_module('.lazy', __package__)\n    importlib.import_module('corpora.toy')\n")
    assert _string_imports(tmp_path, set()) == ["corpora/kinds.py:4", "corpora/kinds.py:6"]


def test_readers_pruning_and_tuning_know_tables_not_the_estimator():
    graph = _module_graph("ngramlm")
    below = [m for m in graph if m.startswith(("ngramlm.io.", "ngramlm.builder.", "ngramlm.tools.",
                                               "ngramlm.infini.", "ngramlm.kenlm."))]
    below += ["ngramlm.tuning", "ngramlm.scorer", "ngramlm.query"]
    assert len(below) > 20
    for module in below:
        assert "ngramlm.model" not in graph[module], f"{module} imports the estimator (ngramlm.model)"
    assert len((REPO / "ngramlm" / "model.py").read_text("utf-8").splitlines()) < 300


def test_the_registries_agree_with_what_reports_list():
    from neural.config import ARCHITECTURES, MODEL_NAMES
    from ngramlm.smoothing import SMOOTHER_INFO, SMOOTHERS, backoff_smoothers
    from reports.experiments.settings import NEURAL_MODELS

    assert set(NEURAL_MODELS) == set(ARCHITECTURES) == set(MODEL_NAMES)
    # The family the toolkit promises, written out: dropping or renaming a smoother fails here (the
    # two registries are built from one table, so comparing them with each other could not).
    assert set(SMOOTHER_INFO) == set(SMOOTHERS) == {"mkn", "kn", "absolute", "wb", "jm", "katz", "stupid", "addk",
                                                    "laplace", "mle"}
    assert backoff_smoothers() == ("mkn", "kn", "absolute", "wb", "jm", "katz")
