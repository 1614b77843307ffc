"""The documentation's examples run.

Every module of the toolkit's packages whose source holds a ``>>>`` example runs its docstrings'
examples with :mod:`doctest`; among them the package tutorials (``ngramlm``, ``corpora`` and
``neural``'s ``__init__``) on the embedded toy corpus, which needs no files.  A module must run
at least one example: one whose examples are all ``+SKIP`` (kept for what trains for more than
a second) shows numbers nothing checks, and fails here.
"""
from __future__ import annotations

import doctest
import importlib
import importlib.util
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("corpora", "ngramlm", "neural", "reports", "labs", "fusion")
TUTORIALS = ("corpora", "ngramlm", "neural")  # the packages' __init__ docstrings


def modules_with_examples() -> list:
    """Dotted names of the packages' modules whose source holds a ``>>>`` example."""
    names = []
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            if ">>> " in path.read_text("utf-8"):
                parts = path.relative_to(ROOT).with_suffix("").parts
                names.append(".".join(parts[:-1] if parts[-1] == "__init__" else parts))
    return names


MODULES = modules_with_examples()


def test_the_package_tutorials_are_among_the_modules_with_examples():
    assert set(TUTORIALS) <= set(MODULES)


@pytest.mark.parametrize("name", MODULES)
def test_the_examples_run(name):
    if name.split(".")[0] == "neural" and importlib.util.find_spec("torch") is None:
        pytest.skip("needs torch (pip install -e '.[neural]')")
    module = importlib.import_module(name)
    if name.split(".")[0] == "neural":
        import torch

        with torch.random.fork_rng(devices=[]):  # the examples seed torch: the tests after them see no change
            result = doctest.testmod(module, optionflags=doctest.ELLIPSIS)
    else:
        result = doctest.testmod(module, optionflags=doctest.ELLIPSIS)
    assert result.failed == 0, f"{result.failed} of {result.attempted} examples of {name} failed (printed above)"
    assert result.attempted > 0, f"{name}: every example is skipped (+SKIP), so none is checked"
