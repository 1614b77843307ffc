"""The package installs where no C compiler works, and a wheel built here carries the extension.

Before: with ``CC=/bin/false`` the README's install failed (exit 1, nothing installed), because
``cythonize()`` returned new Extension objects without the ``optional=True`` that setup.py gave.
These tests build from a copy of the source tree (setup.py, pyproject.toml, the packages) with the
compiler replaced by ``/bin/false``: the build must succeed without ``ngramlm/_fast/*.so``.  They
need Cython and setuptools in the test environment (the ``test`` extra installs them) and skip,
with that reason, where they are missing.
"""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tarfile
import zipfile
from pathlib import Path

import pytest

from ngramlm.accel import UNITS

REPO = Path(__file__).resolve().parent.parent
NO_CC = {"CC": "/bin/false", "CXX": "/bin/false", "LDSHARED": "/bin/false"}
# What the builds here start from: without NGRAMLM_NO_EXT, which would leave the extension out on purpose
# (the second pass of the tests sets it) where these tests build it or find it missing for want of a compiler.
ENV = {k: v for k, v in os.environ.items() if k != "NGRAMLM_NO_EXT" and k not in NO_CC}


def _source_copy(dst: Path) -> Path:
    """The files a build reads: setup.py, pyproject.toml, MANIFEST.in, README.md and the packages."""
    dst.mkdir(parents=True, exist_ok=True)
    for name in ("setup.py", "pyproject.toml", "MANIFEST.in", "README.md", "cli.py"):
        shutil.copy2(REPO / name, dst / name)
    import tomllib  # the packages pyproject.toml installs: a package added there is copied too

    listed = tomllib.loads((REPO / "pyproject.toml").read_text("utf-8"))["tool"]["setuptools"]["packages"]["find"]
    for pkg in sorted({p.rstrip("*").split(".")[0] for p in listed["include"]}):
        shutil.copytree(REPO / pkg, dst / pkg, ignore=shutil.ignore_patterns(
            "__pycache__", "*.so", "*.pyd", "*.c", "*.egg-info"))
    return dst


def _compiler_works() -> bool:
    for cc in (os.environ.get("CC"), "cc", "gcc"):
        if cc and shutil.which(cc.split()[0]):
            try:
                if subprocess.run([*cc.split(), "--version"], capture_output=True, timeout=30).returncode == 0:
                    return True
            except OSError:
                pass
    return False


def _needs(*modules):
    import importlib.util

    missing = [m for m in modules if importlib.util.find_spec(m) is None]
    if "setuptools" in modules and "setuptools" not in missing:
        from importlib.metadata import version

        if int(version("setuptools").split(".")[0]) < 77:  # pyproject's license string (PEP 639)
            missing.append(f"setuptools>=77 (found {version('setuptools')})")
    return pytest.mark.skipif(bool(missing), reason=f"needs {', '.join(missing)} (pip install -e '.[test]')")


@_needs("Cython", "setuptools")
def test_build_ext_without_a_compiler_succeeds_without_the_extension(tmp_path):
    src = _source_copy(tmp_path)
    env = dict(ENV, **NO_CC)
    r = subprocess.run([sys.executable, "setup.py", "-q", "build_ext", "--inplace"], cwd=src, env=env,
                       capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stdout + r.stderr
    assert not list((src / "ngramlm" / "_fast").glob("*.so")) and not list((src / "ngramlm" / "_fast").glob("*.pyd"))
    assert "ngramlm: the compiled extension was not built" in r.stderr or "building" in r.stderr.lower(), r.stderr
    # The package built this way runs on its numpy/Python paths, and says so.
    # (An editable install of the repository maps `ngramlm` with a finder of its own: drop it, so the
    # copy is what gets imported.)
    code = ("import sys; sys.meta_path[:] = [f for f in sys.meta_path if 'editable' not in repr(f).lower()]; "
            "sys.path.insert(0, '.'); import os; from ngramlm import accel; "
            "assert os.path.abspath(accel.__file__).startswith(os.getcwd()), accel.__file__; print(accel.describe())")
    r = subprocess.run([sys.executable, "-c", code], cwd=src, capture_output=True, text=True, timeout=60,
                       env=ENV)
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith("numpy/Python fallback: the compiled extension is not built (no C compiler")
    assert "circular import" not in r.stdout


@pytest.mark.slow
@_needs("Cython", "setuptools")
def test_a_wheel_without_a_compiler_is_pure_and_one_with_it_carries_the_extension(tmp_path):
    src = _source_copy(tmp_path / "src")
    pure = tmp_path / "pure"
    env = dict(ENV, **NO_CC)
    cmd = [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q", "-w"]
    r = subprocess.run(cmd + [str(pure), str(src)], env=env, capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stdout + r.stderr
    (whl,) = pure.glob("ngramlm-*.whl")
    names = zipfile.ZipFile(whl).namelist()
    assert "ngramlm/infini/sa_search.py" in names and "ngramlm/infini/index.py" in names
    # The reports' Jinja templates are package data: a wheel without them renders no report.
    templates = sorted(str(p.relative_to(REPO).as_posix()) for p in (REPO / "reports").rglob("*.j2"))
    assert {"reports/render/templates/head.html.j2", "reports/sections/templates/orders.md.j2"} <= set(templates)
    assert [t for t in templates if t not in names] == []
    assert not [n for n in names if n.startswith("ngramlm/_fast") and n.endswith((".so", ".pyd"))]
    if not _compiler_works():
        pytest.skip("no working C compiler here to build the compiled wheel")
    built = tmp_path / "built"
    r = subprocess.run(cmd + [str(built), str(src)], capture_output=True, text=True, timeout=600,
                       env=ENV)
    assert r.returncode == 0, r.stdout + r.stderr
    (whl,) = built.glob("ngramlm-*.whl")
    # Every unit that ngramlm.accel loads, each one compiled module.
    built_units = sorted(n.split("/")[-1].split(".")[0] for n in zipfile.ZipFile(whl).namelist()
                         if n.startswith("ngramlm/_fast/") and n.endswith(".so"))
    assert built_units == sorted(UNITS), built_units


@pytest.mark.slow
@_needs("Cython", "setuptools")
def test_an_sdist_carries_every_unit_and_builds_them_where_cython_is_missing(tmp_path):
    """The sdist ships each unit's Cython source and generated C file; without Cython, setup.py
    builds every unit from the C files, and they load as one build."""
    src = _source_copy(tmp_path / "src")
    r = subprocess.run([sys.executable, "setup.py", "-q", "sdist", "-d", str(tmp_path / "dist")], cwd=src,
                       capture_output=True, text=True, timeout=600, env=ENV)
    assert r.returncode == 0, r.stdout + r.stderr
    (sdist,) = (tmp_path / "dist").glob("ngramlm-*.tar.gz")
    with tarfile.open(sdist) as tf:
        names = {n.split("/", 1)[-1] for n in tf.getnames()}
        tf.extractall(tmp_path / "x", **({"filter": "data"} if hasattr(tarfile, "data_filter") else {}))
    assert {f"ngramlm/_fast/{unit}.{ext}" for unit in UNITS for ext in ("pyx", "c")} <= names
    assert {"ngramlm/_fast/common.pxd", "ngramlm/_fast/state.pxd", "ngramlm/_fast/lazy_numpy.pxi"} <= names
    if not _compiler_works():
        pytest.skip("no working C compiler here to build the units from their C files")
    hidden = tmp_path / "no-cython" / "Cython"  # a Cython whose import fails, first on the path
    hidden.mkdir(parents=True)
    (hidden / "__init__.py").write_text("raise ImportError('Cython is hidden in this test')\n")
    (root,) = (tmp_path / "x").iterdir()
    r = subprocess.run([sys.executable, "setup.py", "-q", "build_ext", "--inplace"], cwd=root, capture_output=True,
                       text=True, timeout=600, env=dict(ENV, PYTHONPATH=str(hidden.parent)))
    assert r.returncode == 0, r.stdout + r.stderr
    assert sorted(p.name.split(".")[0] for p in (root / "ngramlm" / "_fast").glob("*.so")) == sorted(UNITS)
    code = ("import sys; sys.meta_path[:] = [f for f in sys.meta_path if 'editable' not in repr(f).lower()]; "
            "sys.path.insert(0, '.'); import os; from ngramlm import accel; print(os.path.abspath(accel.__file__)); "
            "print(accel.describe())")
    r = subprocess.run([sys.executable, "-c", code], cwd=root, capture_output=True, text=True, timeout=60, env=ENV)
    assert r.returncode == 0, r.stderr
    assert r.stdout.splitlines() == [str(root / "ngramlm" / "accel.py"), "compiled extension ngramlm._fast"]


def test_the_metadata_gives_ranges_and_ci_pins_the_versions_it_tests():
    """pyproject.toml's dependencies are ranges (no ``==``: an exact pin there would refuse every other
    release to every user); the exact versions CI tests are in .ci/constraints.txt, each inside the range
    the metadata gives, and .ci/run installs with them.  The ∞-gram's pydivsufsort is an extra."""
    import tomllib

    from packaging.requirements import Requirement

    project = tomllib.loads((REPO / "pyproject.toml").read_text("utf-8"))["project"]
    reqs = [Requirement(r) for r in project["dependencies"]]
    reqs += [Requirement(r) for extra in project["optional-dependencies"].values() for r in extra]
    assert not [str(r) for r in reqs if any(s.operator in ("==", "===") for s in r.specifier)]
    assert [str(r) for r in project["optional-dependencies"]["infini"]] == ["pydivsufsort>=0.0.20"]
    assert not [r for r in project["dependencies"] if r.startswith("pydivsufsort")]
    pins = {}
    for line in (REPO / ".ci" / "constraints.txt").read_text("utf-8").splitlines():
        line = line.split("#", 1)[0].strip()
        if line:
            r = Requirement(line)
            (spec,) = r.specifier
            assert spec.operator == "==", line
            pins[r.name.lower()] = spec.version
    assert {"torch", "sacrebleu", "tokenizers", "pydivsufsort", "dask", "distributed"} <= set(pins)
    for r in reqs:
        if r.name.lower() in pins:
            assert r.specifier.contains(pins[r.name.lower()]), (str(r), pins[r.name.lower()])
    ci = (REPO / ".ci" / "run").read_text("utf-8")
    assert "-c .ci/constraints.txt" in ci and "infini" in ci
