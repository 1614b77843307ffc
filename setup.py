"""Only the optional compiled extension lives here; everything else is in pyproject.toml.

``ngramlm._fast`` (Cython) speeds up ARPA reading/writing and the kenlm-style state API.  It is
``optional``: where no C compiler is found the build goes on without it, and the toolkit uses its
numpy/Python paths (``ngramlm.accel.describe()`` says which one is in use).
"""
from setuptools import Extension, setup

try:
    from Cython.Build import cythonize
except ImportError:  # building from a tree without Cython: no extension, pure numpy/Python paths
    ext_modules = []
else:
    ext_modules = cythonize(
        [Extension("ngramlm._fast", ["ngramlm/_fast.pyx"], extra_compile_args=["-O2"], optional=True)],
        compiler_directives={"language_level": 3},
        quiet=True,
    )

setup(ext_modules=ext_modules)
