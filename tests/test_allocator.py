"""The allocator policy (``ngramlm.commands.allocator``): glibc's malloc keeps freed memory only in the
command where that was measured to pay (``build-binary``) and never where the user gave a memory budget.

Before: ``cli`` set it for every command of the program, so ``train --memory 1G`` on 15 M toy tokens
peaked at 1.45 GB instead of 1.15 GB -- the kept memory was not counted in the budget.
"""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from ngramlm.commands import allocator

ROOT = Path(__file__).resolve().parents[1]
GLIBC = hasattr(os, "confstr") and (os.confstr("CS_GNU_LIBC_VERSION") or "").startswith("glibc")
needs_glibc = pytest.mark.skipif(not GLIBC, reason="the malloc setting is glibc's")

# After the code under test: whether the setting applied, and the page faults of making a 20 MB array
# again after it was dropped (kept memory: its pages are reused; glibc's default: a fresh mmap).
PROBE = ("import resource, numpy as np\n"
         "from ngramlm.commands import allocator\n"
         "faults = lambda: resource.getrusage(resource.RUSAGE_SELF).ru_minflt\n"
         "a = np.ones(20 << 17); del a\n"
         "f = faults(); b = np.ones(20 << 17); print('@@', allocator.applied(), faults() - f)\n")
# The program as the `ngramlm` script runs it (main() without arguments), then the probe.
PROGRAM = "import sys\nsys.argv = ['ngramlm'] + sys.argv[1:]\nimport cli\ncli.main()\n" + PROBE


def _env(**extra) -> dict:
    env = {k: v for k, v in os.environ.items() if not k.startswith("MALLOC_") and k != "NGRAMLM_MALLOC"}
    return {**env, "PYTHONPATH": str(ROOT), **extra}


def _probe(code: str, *args, **env) -> tuple:
    out = subprocess.run([sys.executable, "-c", code, *map(str, args)], capture_output=True, text=True,
                         env=_env(**env), cwd=ROOT, timeout=300)
    assert out.returncode == 0, out.stderr
    applied, faults = out.stdout.strip().splitlines()[-1].split()[1:]
    return applied == "True", int(faults)


@needs_glibc
def test_kept_memory_reuses_a_dropped_arrays_pages():
    """The setting itself: a 20 MB array made again after it was dropped reuses the same pages instead of
    faulting in new ones; NGRAMLM_MALLOC=default opts out."""
    code = "from ngramlm.commands import allocator\nallocator.allow()\nallocator.keep_freed_memory()\n" + PROBE
    tuned, default = _probe(code), _probe(code, NGRAMLM_MALLOC="default")
    assert tuned[0] is True and default[0] is False
    # (By default glibc mmaps a fresh block, paged in anew: 5,120 faults of 4 KiB, fewer where the
    # kernel gives transparent huge pages, as numpy asks for arrays this big.)
    assert tuned[1] < (20 << 20) // 4096 // 10 and tuned[1] * 4 < default[1], (tuned, default)


@pytest.fixture(scope="module")
def arpa(tmp_path_factory):
    d = tmp_path_factory.mktemp("alloc")
    text = d / "text.txt"
    text.write_text("the cat sat on the mat\nthe dog sat on the log\na cat and a dog\n" * 300, "utf-8")
    model = d / "m.arpa"
    from conftest import invoke_cli

    code, _, err = invoke_cli(["train", str(text), "--order", "3", "--discount-fallback", "-o", str(model)])
    assert code == 0, err
    return {"text": text, "arpa": model, "dir": d}


@needs_glibc
def test_build_binary_keeps_freed_memory_in_the_program(arpa):
    applied, faults = _probe(PROGRAM, "build-binary", "trie", arpa["arpa"], arpa["dir"] / "m.bin")
    assert applied and faults < (20 << 20) // 4096 // 10, faults
    # The user's choices win: NGRAMLM_MALLOC=default, or any of glibc's own MALLOC_* tunables.
    assert _probe(PROGRAM, "build-binary", arpa["arpa"], arpa["dir"] / "d.bin", NGRAMLM_MALLOC="default")[0] is False
    assert _probe(PROGRAM, "build-binary", arpa["arpa"], arpa["dir"] / "e.bin", MALLOC_ARENA_MAX="2")[0] is False


@needs_glibc
@pytest.mark.parametrize("budget", [["--memory", "100M"], ["-S", "100M"], []])
def test_train_never_changes_the_allocator_a_budget_is_a_promise(arpa, budget):
    """``train --memory/-S`` promises a peak; memory kept by malloc would not be counted in it.  (Nor does
    train without a budget get the setting: it was never measured to pay there.)"""
    out = arpa["dir"] / f"t{len(budget)}.arpa"
    applied, _ = _probe(PROGRAM, "train", arpa["text"], "--order", "3", "--discount-fallback", *budget, "-o", out)
    assert applied is False and out.exists()


def test_a_command_run_in_process_leaves_the_callers_allocator_alone(run_cli, arpa):
    """A library caller or a test that runs ``build-binary`` through ``cli.main(argv)`` keeps its malloc."""
    assert run_cli("build-binary", arpa["arpa"], arpa["dir"] / "in.bin")[0] == 0
    assert (arpa["dir"] / "in.bin").exists() and allocator.applied() is False
