"""Only the optional compiled extension lives here; everything else is in pyproject.toml.

``ngramlm._fast`` (Cython) speeds up ARPA reading/writing, the kenlm-style state API, KenLM binaries,
the streamed tokenizing pass and the ∞-gram's suffix-array searches, in one compilation unit per
structure (``UNITS``; ``ngramlm/_fast/__init__.py`` says which holds what).  It is optional: where no
C compiler works (none installed, ``CC=/bin/false``, a slim container) the build goes on without it
and the toolkit uses its numpy/Python paths, with the same numbers (``ngramlm info`` says which).
A unit that fails alone leaves a partial build, which ``ngramlm.accel`` refuses as a whole.

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


UNITS = ("arpa", "state", "kenlm", "tokens")  # ngramlm/_fast/<unit>.pyx; ngramlm.accel loads the same list


def extensions():
    if os.environ.get("NGRAMLM_NO_EXT", "") not in ("", "0"):
        return []  # an sdist/wheel without the extension, on purpose
    try:
        from Cython.Build import cythonize
    except ImportError:
        # No Cython: build from the shipped C files where the sdist carries them, else pure Python.
        c_files = [os.path.join("ngramlm", "_fast", f"{unit}.c") for unit in UNITS]
        if all(os.path.exists(c) for c in c_files):
            return [Extension(f"ngramlm._fast.{unit}", [c], extra_compile_args=_flags(), optional=True)
                    for unit, c in zip(UNITS, c_files)]
        return []
    exts = cythonize([Extension(f"ngramlm._fast.{unit}", [f"ngramlm/_fast/{unit}.pyx"], extra_compile_args=_flags())
                      for unit in UNITS], compiler_directives={"language_level": 3}, quiet=True)
    for ext in exts:
        ext.optional = True
    return exts


def _flags():
    return ["/O2"] if sys.platform == "win32" else ["-O2"]


setup(ext_modules=extensions(), cmdclass={"build_ext": OptionalBuildExt})
