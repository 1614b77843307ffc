"""Shared test fixtures.

``shared_corpora``: the folder holding the real corpora (``ptb/``, ``timemachine/``,
``hongloumeng/``), laid out like a data directory.  It is ``$NGRAMLM_TEST_CORPORA``
when set, else ``<repo>/../shared/corpora``; tests that need it are skipped when it
is absent.

``run_cli``: runs ``cli.main`` in-process, as the ``ngramlm`` script does (so an
InputError is printed on one line and exits with status 2), and returns
``(exit_code, stdout, stderr)``.
"""
from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="session")
def shared_corpora() -> Path:
    root = Path(os.environ.get("NGRAMLM_TEST_CORPORA") or REPO_ROOT.parent / "shared" / "corpora").resolve()
    if not (root / "ptb").is_dir():
        pytest.skip(f"real corpora not found at {root} (set NGRAMLM_TEST_CORPORA)")
    return root


def invoke_cli(args, input=None):
    """Run ``cli.main(args)`` in-process; return ``(exit_code, stdout, stderr)``."""
    from click.testing import CliRunner

    import cli

    runner = CliRunner()
    with runner.isolation(input=input) as (out, err, _):
        try:
            cli.main([str(a) for a in args])
            code = 0
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
        sys.stdout.flush()
        sys.stderr.flush()
        return code, out.getvalue().decode("utf-8"), err.getvalue().decode("utf-8", "replace")


@pytest.fixture
def run_cli(monkeypatch):
    # Results must not depend on the caller's environment.
    monkeypatch.delenv("NGRAMLM_DATA_DIR", raising=False)
    monkeypatch.delenv("NGRAMLM_DOWNLOAD_MIRROR", raising=False)

    def run(*args, input=None):
        return invoke_cli(args, input=input)

    return run
