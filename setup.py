"""Only the optional compiled extension lives here; everything else is in pyproject.toml.

``ngramlm._fast`` (Cython) speeds up ARPA reading/writing, the kenlm-style state API, the
streamed tokenizing pass and the ∞-gram's suffix-array searches.  It is optional: where no C
compiler works (none installed, ``CC=/bin/false``, a slim container) the build goes on without it
and the toolkit uses its numpy/Python paths, with the same numbers (``ngramlm info`` says which).

``cythonize()`` returns *new* Extension objects and drops ``optional=True`` from the ones it was
given, so the flag is set again on what it returns; and a build_ext that fails for any other reason
than a compile error (e.g. no compiler executable at all) is caught too.
"""
import os
import sys

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext


class OptionalBuildExt(build_ext):
    """build_ext that warns and goes on, pure Python, when the extension cannot be built."""

    def run(self):
        try:
            super().run()
        except Exception as exc:  # noqa: BLE001 -- no compiler, or a broken one: install without it
            self._skip(exc)

    def build_extension(self, ext):
        try:
            super().build_extension(ext)
        except Exception as exc:  # noqa: BLE001
            self._skip(exc)

    @staticmethod
    def _skip(exc):
        sys.stderr.write(f"ngramlm: the compiled extension was not built ({exc}); installing the pure "
                         "numpy/Python paths (same results, slower; see docs/install.md)\n")


def extensions():
    if os.environ.get("NGRAMLM_NO_EXT", "") not in ("", "0"):
        return []  # an sdist/wheel without the extension, on purpose
    try:
        from Cython.Build import cythonize
    except ImportError:
        # No Cython: build from the shipped C file where the sdist carries one, else pure Python.
        if os.path.exists(os.path.join("ngramlm", "_fast.c")):
            return [Extension("ngramlm._fast", ["ngramlm/_fast.c"], extra_compile_args=_flags(), optional=True)]
        return []
    exts = cythonize([Extension("ngramlm._fast", ["ngramlm/_fast.pyx"], extra_compile_args=_flags())],
                     compiler_directives={"language_level": 3}, quiet=True)
    for ext in exts:
        ext.optional = True
    return exts


def _flags():
    return ["/O2"] if sys.platform == "win32" else ["-O2"]


setup(ext_modules=extensions(), cmdclass={"build_ext": OptionalBuildExt})
