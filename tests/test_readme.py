"""The README's commands work as written: every `ngramlm` line of its code blocks is either run here
(the ones that take under a minute) or listed with the reason it is not, and an expected output
quoted in a line's comment (in backticks) must appear in what the command prints.

Before: the README's `compare fra-eng` line took 12 minutes and gave BLEU 4.41 while the numbers
beside it needed other options; a comment promised "10,000 types, 0 OOVs" where the command prints
neither; nothing checked that the lines still ran.
"""
from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest

from conftest import REPORT, invoke_cli, needs

REPO = Path(__file__).resolve().parent.parent

# Lines not run here, each with the reason (and where they are tested instead).
NOT_RUN = {
    "corpora download": "needs the network (tests/test_download.py runs it against a local HTTP server)",
    "neural train --model lstm ptb": "trains for many minutes (tests/test_neural_cli.py trains toy models)",
    "ppl lstm.pt": "needs the LSTM of the line before",
    "compare ptb --neural lstm": "needs that LSTM, and retrains it for the learning curve",
    "compare timemachine": "several minutes at order 10 (tests/test_reports.py runs char-level compares)",
    "train big1.txt": "placeholder files of a user (tests/test_streaming.py streams real files)",
    "train corpus/*.txt --order 5 --dask": "needs a Dask scheduler (tests/test_cluster_estimation.py runs a "
                                           "LocalCluster and dask scheduler/worker processes)",
    "seq2seq train fra-eng": "minutes of training (tests/test_seq2seq_cli.py trains on a small TSV)",
    "seq2seq translate fra.pt": "needs the translator of the line before",
    "compare fra-eng": "5.6 minutes (tests/test_parallel_compare.py runs a quick one)",
    "neural train ptb --locked-dropout": "trains for many minutes (tests/test_ladder.py trains regularised toy models)",
    "ladder lstm.pt": "needs a trained PTB model (tests/test_ladder.py climbs a small one)",
    "bert pretrain ptb": "25 minutes of pretraining (tests/test_bert.py pretrains a tiny model on toy)",
    "bert pppl bert.pt": "needs the model of the line before (tests/test_bert.py scores a tiny one)",
}


def readme_commands() -> list:
    """(command, comment) for every `ngramlm ...` command in the README's bash blocks."""
    text = (REPO / "README.md").read_text("utf-8")
    out = []
    for block in re.findall(r"```bash\n(.*?)```", text, re.S):
        for line in block.splitlines():
            code, _, comment = line.partition("#")
            for part in code.split(";"):
                part = part.strip()
                if "|" in part:
                    part = part.split("|", 1)[1].strip()
                if part.startswith("ngramlm "):
                    out.append((part, comment.strip()))
    return out


def _not_run_reason(cmd: str):
    body = cmd[len("ngramlm "):]
    return next((why for key, why in NOT_RUN.items() if body.startswith(key)), None)


def test_every_readme_command_is_run_or_has_a_reason():
    cmds = readme_commands()
    assert len(cmds) >= 25
    used = {key for key in NOT_RUN if any(c[len("ngramlm "):].startswith(key) for c, _ in cmds)}
    assert used == set(NOT_RUN), f"stale NOT_RUN entries: {set(NOT_RUN) - used}"


@pytest.mark.slow
@needs(*REPORT)
def test_readme_commands_run_and_print_what_their_comments_say(shared_corpora, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("NGRAMLM_DATA_DIR", str(shared_corpora))
    monkeypatch.delenv("NGRAMLM_DOWNLOAD_MIRROR", raising=False)
    # The user's own files the README's lines name.
    train_lines = (shared_corpora / "ptb" / "ptb.train.txt").read_text("utf-8").splitlines()
    Path("corpus.txt").write_text("\n".join(train_lines[:3000]) + "\n", "utf-8")
    test_lines = (shared_corpora / "ptb" / "ptb.test.txt").read_text("utf-8").splitlines()
    Path("test.txt").write_text("\n".join(test_lines[:40]) + "\n", "utf-8")
    Path("text.txt").write_text("满纸荒唐言，一把辛酸泪。\n", "utf-8")
    assert invoke_cli(["train", "corpus.txt", "--order", "2", "-o", "kenlm.arpa"])[0] == 0
    ran = 0
    for cmd, comment in readme_commands():
        if _not_run_reason(cmd):
            continue
        words = shlex.split(cmd)[1:]
        stdin = None
        if "<" in words:
            at = words.index("<")
            stdin = Path(words[at + 1]).read_text("utf-8")
            words = words[:at] + words[at + 2:]
        code, out, err = invoke_cli(words, input=stdin)
        assert code == 0, f"{cmd}\n{err[-2000:]}"
        for expected in re.findall(r"`([^`]+)`", comment):
            assert expected in out + err, f"{cmd}: `{expected}` not in the output:\n{out[-3000:]}"
        ran += 1
    assert ran >= 15
    assert Path("ptb5.npz").is_file() and Path("ptb5.arpa").is_file() and Path("model.npz").is_file()
    assert Path("compare-out/ptb/report.html").is_file()
