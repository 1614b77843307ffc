"""A package's public names imported when first used (PEP 562), so importing one light submodule
does not import every heavy one its package ``__init__`` names.

    __getattr__, __dir__ = lazy_exports(__name__, {"Vocab": "vocab", ...}, globals())
"""
from __future__ import annotations

import importlib


def lazy_exports(package: str, exports: dict, namespace: dict) -> tuple:
    """The module ``__getattr__`` and ``__dir__`` of ``package``: ``exports`` maps each public name
    to the submodule that defines it; a name, once imported, is put in ``namespace``."""

    def __getattr__(name: str):
        if name in exports:
            value = getattr(importlib.import_module(f".{exports[name]}", package), name)
            namespace[name] = value  # looked up once
            return value
        raise AttributeError(f"module {package!r} has no attribute {name!r}")

    def __dir__() -> list:
        return sorted(set(namespace) | set(exports))

    return __getattr__, __dir__
