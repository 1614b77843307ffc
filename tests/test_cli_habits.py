"""Command-line habits from KenLM and friends that must never surprise (issue: KenLM ecosystem)."""
from __future__ import annotations

import json

import pytest

from conftest import REPORT, needs

TEXT = "the cat sat on the mat\nthe dog sat on the log\na cat and a dog\n"


def test_a_numeric_output_is_refused_with_the_order_hint(run_cli, tmp_path):
    code, out, err = run_cli("train", "toy", "-o", "5")
    assert code == 2 and "did you mean --order 5?" in err
    assert not (tmp_path / "5").exists()


def test_minus_n_is_not_an_order_in_train(run_cli, tmp_path):
    code, _, err = run_cli("train", "toy", "-n", "3", "-o", tmp_path / "m.npz")
    assert code == 2 and "--order 3" in err and not (tmp_path / "m.npz").exists()


def test_train_without_text_reads_piped_stdin_never_the_toy_corpus(run_cli, tmp_path):
    model = tmp_path / "m.arpa"
    code, _, err = run_cli("train", "--order", "2", "--discount-fallback", "-o", model, input=TEXT * 3)
    assert code == 0, err
    assert "on stdin" in err or "<stdin>" in err
    from ngramlm.loading import read_arpa

    lm = read_arpa(model)
    assert lm.vocab_.n_words < 20  # the piped text's words, not the toy corpus's thousands
    code, _, err = run_cli("train", "-o", tmp_path / "e.npz", input="")
    assert code == 2 and "<stdin>" in err and "empty" in err


def test_dash_output_is_stdout_for_arpa_vocab_and_export(run_cli, tmp_path):
    code, out, err = run_cli("train", "toy", "--order", "2", "-o", "-")
    assert code == 0, err
    assert out.startswith("# ngramlm-meta ")  # the accounting metadata, a comment line KenLM accepts
    assert out.split("\n", 1)[1].lstrip().startswith("\\data\\") and out.rstrip().endswith("\\end\\")
    assert not (tmp_path / "-").exists()
    arpa = tmp_path / "from-stdout.arpa"
    arpa.write_text(out)
    from ngramlm.loading import read_arpa

    assert read_arpa(arpa).order_ == 2
    native = tmp_path / "m.npz"
    assert run_cli("train", "toy", "--order", "2", "-o", native)[0] == 0
    code, out2, _ = run_cli("export-arpa", native, "-")
    assert code == 0 and out2 == out  # the same model, the same ARPA text
    code, out3, _ = run_cli("vocab", "build", "toy", "-o", "-")
    assert code == 0
    from corpora.vocab import Vocab

    assert Vocab.from_dict(json.loads(out3)).n_types == 3968


def test_generate_spells_counts_like_neural_generate(run_cli, tmp_path):
    model = tmp_path / "m.npz"
    assert run_cli("train", "toy", "--order", "2", "-o", model)[0] == 0
    code, out, _ = run_cli("generate", model, "-n", "3", "--max-len", "5", "--seed", "4")
    assert code == 0 and len(out.strip().splitlines()) == 3
    assert all(len(line.split()) <= 5 for line in out.strip().splitlines())
    code, _, err = run_cli("generate", model, "--sentences", "3")  # an earlier version's spelling: gone
    assert code == 2 and "No such option" in err


def test_json_summaries(run_cli, tmp_path):
    model = tmp_path / "m.npz"
    code, out, _ = run_cli("train", "toy", "--order", "2", "-o", model, "--json")
    t = json.loads(out)
    assert code == 0 and t["order"] == 2 and t["ngrams"][1] > 0 and t["sentences"] == 15247
    code, out, _ = run_cli("ppl", model, "toy", "--json")
    p = json.loads(out)
    assert p["tokens"] == p["words"] + p["sentences"] == 20003
    code, out, _ = run_cli("stats", "toy", "--order", "2", "--json")
    st = json.loads(out)
    assert st["splits"]["test"]["tokens"] == 20003 and st["sparsity"][1]["order"] == 2
    assert run_cli("train", "toy", "-o", "-", "--json")[0] == 2  # both would write to stdout


@needs("torch")
def test_neural_and_ngram_ppl_print_the_same_summary(run_cli, tmp_path):
    ckpt = tmp_path / "n.pt"
    code, out, err = run_cli("neural", "train", "toy", "-o", ckpt, "--dry-run", "--hidden-size", "16",
                             "--no-progress", "--threads", "1", "--json")
    assert code == 0, err
    assert json.loads(out)["checkpoint"] == str(ckpt)
    model = tmp_path / "m.npz"
    assert run_cli("train", "toy", "--order", "2", "-o", model)[0] == 0
    outs = []
    for m in (model, ckpt):
        code, out, err = run_cli("ppl", m, "toy")
        assert code == 0, err
        outs.append([line.split(":")[0].split(" ")[0] for line in out.splitlines()])
    assert outs[0][:7] == outs[1][:7]  # the same lines, in the same order
    code, out, _ = run_cli("ppl", ckpt, "toy", "--json")
    d = json.loads(out)
    assert d["tokens"] == 20003 and d["oovs"] == 12 and d["ppl_excluding_oovs"] <= d["ppl"] * 1.5


@pytest.mark.parametrize("command", [
    pytest.param(["neural", "train", "toy", "--dry-run", "--hidden-size", "8", "--no-progress"], marks=needs("torch")),
    pytest.param(["compare", "--quick", "--neural", "none"], marks=needs(*REPORT))])
def test_minus_o_is_the_output_everywhere(run_cli, tmp_path, command):
    target = tmp_path / ("x.pt" if command[0] == "neural" else "run")
    code, _, err = run_cli(*command, "-o", target)
    assert code == 0, err
    assert target.exists()


def test_blank_lines_count_as_kenlm_counts_them_in_files_and_stdin(run_cli, tmp_path):
    """A blank line is an empty sentence: its </s> is predicted (KenLM's query and lmplz do this)."""
    text = "the cat sat\n\nthe dog sat\n\n\na cat\n"
    f = tmp_path / "t.txt"
    f.write_text(text)
    arpa = tmp_path / "m.arpa"
    code, _, err = run_cli("train", f, "--order", "2", "--smoothing", "kn", "--discount-fallback", "-o", arpa)
    assert code == 0, err
    by_file = json.loads(run_cli("ppl", arpa, f, "--json")[1])
    by_stdin = json.loads(run_cli("ppl", arpa, "-", "--json", input=text)[1])
    assert by_file["sentences"] == by_stdin["sentences"] == 6 and by_file["tokens"] == 8 + 6  # 8 words, 6 sentence ends
    assert by_file["log10_prob"] == pytest.approx(by_stdin["log10_prob"], abs=1e-12)
    kenlm = pytest.importorskip("kenlm", reason="the kenlm module (kenlm-ex wheel) is the reference here")
    ref = kenlm.Model(str(arpa))
    total = sum(ref.score(line, bos=True, eos=True) for line in text.splitlines())
    assert by_file["log10_prob"] == pytest.approx(total, abs=1e-5)
    # Training counted the blank lines too: p(</s> | <s>) is a seen bigram, as in lmplz's model.
    from ngramlm.loading import read_arpa

    lm = read_arpa(arpa)
    assert lm.log10_prob("</s>", ["<s>"]) == pytest.approx(ref.score("", bos=True, eos=True), abs=1e-5)


def _summary(run_cli, model, text, **kw):
    code, out, err = run_cli("ppl", model, text, "--json", **kw)
    assert code == 0, err
    return json.loads(out)


def test_native_arpa_and_reimport_give_one_accounting(run_cli, tmp_path):
    """A training text that uses <unk> as a word (as PTB does): a literal <unk> in the test text is
    then an ordinary type, not an OOV -- in the native file, its ARPA export and the re-import."""
    train = tmp_path / "train.txt"
    train.write_text("the <unk> sat on the mat\nthe dog sat on the <unk>\na cat and a dog\n" * 4)
    test = tmp_path / "test.txt"
    test.write_text("the <unk> sat\nthe zebra sat on the mat\n")
    native, arpa, again = tmp_path / "m.npz", tmp_path / "m.arpa", tmp_path / "again.npz"
    assert run_cli("train", train, "--order", "3", "--smoothing", "kn", "--discount-fallback", "-o", native)[0] == 0
    assert run_cli("export-arpa", native, arpa)[0] == 0
    assert run_cli("import-arpa", arpa, again)[0] == 0
    a, b, c = (_summary(run_cli, m, test) for m in (native, arpa, again))
    assert a["oovs"] == b["oovs"] == c["oovs"] == 1  # zebra; the literal <unk> is a word of this model
    for key in ("sentences", "words", "tokens", "zero_probs"):
        assert a[key] == b[key] == c[key]
    for key in ("ppl", "ppl_excluding_oovs", "ppl1"):
        assert a[key] == pytest.approx(b[key], rel=1e-6) and b[key] == pytest.approx(c[key], rel=1e-12)
    # A foreign ARPA file (no ngramlm metadata line) follows KenLM: a literal <unk> is an OOV.
    foreign = tmp_path / "foreign.arpa"
    foreign.write_text("\n".join(line for line in arpa.read_text().splitlines() if not line.startswith("#")) + "\n")
    assert _summary(run_cli, foreign, test)["oovs"] == 2


@pytest.mark.slow
def test_ptb_counts_the_same_in_every_format(run_cli, shared_corpora, tmp_path, monkeypatch):
    monkeypatch.setenv("NGRAMLM_DATA_DIR", str(shared_corpora))
    native, arpa = tmp_path / "p.npz", tmp_path / "p.arpa"
    assert run_cli("train", "ptb", "--order", "3", "-o", native)[0] == 0
    assert run_cli("export-arpa", native, arpa)[0] == 0
    a, b = _summary(run_cli, native, "ptb"), _summary(run_cli, arpa, "ptb")
    assert a["oovs"] == b["oovs"] == 0 and a["tokens"] == b["tokens"] == 82430
    assert a["ppl_excluding_oovs"] == pytest.approx(b["ppl_excluding_oovs"], rel=1e-6)


def test_the_prompt_exit_flushes_closes_the_logs_and_stops_worker_processes(tmp_path):
    """cli._exit_now (an interrupted program's exit, without the interpreter's teardown) still does what a
    normal exit does that matters: the output is flushed, buffered log records are written, and a
    multiprocessing worker is stopped rather than left running after the program."""
    import os
    import subprocess
    import sys
    from pathlib import Path

    log = tmp_path / "run.log"
    code = ("import logging, logging.handlers, multiprocessing, sys, time\n"
            "import cli\n"
            "h = logging.handlers.MemoryHandler(100, target=logging.FileHandler(sys.argv[1]))\n"
            "logging.getLogger('t').addHandler(h)\n"
            "logging.getLogger('t').warning('a buffered record')\n"
            "p = multiprocessing.Process(target=time.sleep, args=(60,), daemon=True)\n"
            "p.start()\n"
            "sys.stdout.write(f'{p.pid} unflushed')\n"
            "cli._exit_now(130)\n")
    root = Path(__file__).resolve().parents[1]
    out = subprocess.run([sys.executable, "-c", code, str(log)], capture_output=True, text=True, cwd=root,
                         env={**os.environ, "PYTHONPATH": str(root)}, timeout=60)
    assert out.returncode == 130 and out.stderr == "", out.stderr
    pid, word = out.stdout.split()
    assert word == "unflushed" and log.read_text("utf-8") == "a buffered record\n"
    with pytest.raises(ProcessLookupError):  # terminated and reaped, not left sleeping for a minute
        os.kill(int(pid), 0)


def test_the_infini_gram_without_its_extra_is_one_line_naming_it(run_cli, tmp_path, monkeypatch):
    """pydivsufsort (the suffix arrays) is the ``infini`` extra: where it is not installed, building an
    index is refused in one line that names the extra, never a traceback; an index already built
    still loads and answers."""
    text = tmp_path / "t.txt"
    text.write_text(TEXT, encoding="utf-8")
    assert run_cli("infini", "build", text, "-o", tmp_path / "built.npz")[0] == 0
    monkeypatch.setitem(__import__("sys").modules, "pydivsufsort", None)  # `import pydivsufsort` now fails
    code, out, err = run_cli("infini", "build", text, "-o", tmp_path / "i.npz")
    assert code == 2 and out == "" and not (tmp_path / "i.npz").exists()
    assert err == ("Error: building an ∞-gram index needs pydivsufsort (its suffix arrays), which is not installed "
                   "(fix: pip install 'ngramlm[infini]')\n"), err
    code, out, err = run_cli("infini", "count", tmp_path / "built.npz", "sat", "on")  # in two of the lines
    assert code == 0 and out.split("\t")[0] == "2", err
