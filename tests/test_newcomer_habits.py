"""What a newcomer meets first (issue 38's list): a mistyped split or command, a compressed output name,
a help text with a stray escape.  Each gives the one line a user can act on."""
from __future__ import annotations

import gzip

import pytest


@pytest.mark.parametrize("command", [["train", "toy", "-o", "{tmp}/m.npz"], ["ppl", "{model}", "toy"],
                                     ["score", "{model}", "toy"]])
@pytest.mark.parametrize("split", ["foo", "Test"])
def test_an_unknown_split_is_one_line_that_lists_the_splits(run_cli, tmp_path, toy_model, command, split):
    args = [a.format(tmp=tmp_path, model=toy_model) for a in command]
    code, _, err = run_cli(*args, "--split", split)
    assert code == 2, err
    assert f"corpus 'toy' has no split '{split}' (fix: use one of train, valid, test)" in err
    assert "Traceback" not in err and "KeyError" not in err


def test_an_unknown_split_of_a_file_per_split_corpus(run_cli, tmp_path, shared_corpora):
    code, _, err = run_cli("train", "ptb", "--data-dir", shared_corpora, "--split", "foo", "-o", tmp_path / "m.npz")
    assert code == 2 and "corpus 'ptb' has no split 'foo' (fix: use one of train, valid, test)" in err


def test_a_mistyped_command_is_answered_with_the_closest_one(run_cli):
    code, _, err = run_cli("trian")
    assert code == 2 and "No such command 'trian'. Did you mean 'train'?" in err
    code, _, err = run_cli("zzzz")  # nothing close: click's own line, no suggestion
    assert code == 2 and "No such command 'zzzz'" in err and "Did you mean" not in err


@pytest.mark.parametrize("extra", [["--discount-fallback"], ["--estimation", "disk", "--discount-fallback"]])
def test_an_arpa_gz_output_is_gzip_and_reads_back_the_same(run_cli, tmp_path, extra):
    text = tmp_path / "t.txt"
    text.write_text("a b c\nb c d\na b d\nc a b\n")
    plain, packed = tmp_path / "m.arpa", tmp_path / "m.arpa.gz"
    for out in (plain, packed):
        code, _, err = run_cli("train", text, "--order", "2", *extra, "-o", out)
        assert code == 0, err
    assert packed.read_bytes()[:2] == b"\x1f\x8b"  # gzip, by its magic
    assert gzip.decompress(packed.read_bytes()) == plain.read_bytes()
    assert run_cli("ppl", packed, text)[1].replace(str(packed), "M") == run_cli("ppl", plain, text)[1].replace(
        str(plain), "M")


def test_compare_help_shows_a_plain_percent_sign(run_cli):
    code, out, _ = run_cli("compare", "--help")
    assert code == 0 and "1 % of its" in " ".join(out.split()) and "%%" not in out


@pytest.fixture
def toy_model(run_cli, tmp_path):
    path = tmp_path / "toy2.npz"
    assert run_cli("train", "toy", "--order", "2", "-o", path)[0] == 0
    return str(path)


def test_python_dash_m_runs_the_program(tmp_path):
    import subprocess
    import sys

    r = subprocess.run([sys.executable, "-m", "ngramlm", "--version"], capture_output=True, text=True, timeout=120,
                       cwd=tmp_path)
    assert r.returncode == 0 and r.stdout.startswith("ngramlm "), r.stderr


def test_the_top_help_offers_no_option_that_train_refuses(run_cli):
    code, out, _ = run_cli("--help")
    line = next(x for x in out.splitlines() if x.strip().startswith("train "))
    assert code == 0 and "--model" not in line and "ngramlm neural train" in line


@pytest.fixture(scope="module")
def toy_arpa(tmp_path_factory):
    from corpora import load_corpus, prepare
    from corpora.toy import ToyConfig
    from ngramlm import NgramLM
    from ngramlm.io.arpa import write_arpa

    ds = prepare(load_corpus("toy", toy_config=ToyConfig(n_train_tokens=20_000, n_valid_tokens=500,
                                                          n_test_tokens=500)))
    path = tmp_path_factory.mktemp("kenlm") / "toy3.arpa"
    write_arpa(NgramLM(order=3).fit(ds["train"], vocab=ds.vocab), path)
    return path


@pytest.mark.parametrize("sentence", ["<s> the </s>", "a <s> b", "<s>"])
def test_a_literal_sentence_marker_scores_as_kenlm_scores_it(toy_arpa, sentence):
    """'<s>' as a word gets the -99 an ARPA file gives it (kenlm: a finite total), not -inf."""
    import math

    import ngramlm
    import ngramlm.kenlm as ours

    for model in (ours.Model(toy_arpa), ngramlm.Model(toy_arpa)):
        total = model.score(sentence, bos=True, eos=True)
        steps = list(model.full_scores(sentence))
        assert math.isfinite(total) and -110 < min(lp for lp, _, _ in steps) <= -99.0  # -99 plus back-offs
        assert abs(total - sum(lp for lp, _, _ in steps)) < 1e-3
    kenlm = pytest.importorskip("kenlm", reason="the kenlm module (kenlm-ex) is the reference")
    assert abs(kenlm.Model(str(toy_arpa)).score(sentence, bos=True, eos=True) - total) < 1e-3


def test_a_missing_or_damaged_model_file_is_an_oserror_as_in_kenlm(tmp_path):
    import ngramlm
    import ngramlm.kenlm as ours
    from corpora.errors import InputError

    bad = tmp_path / "bad.arpa"
    bad.write_bytes(b"not a model\x00\x01")
    for path in (tmp_path / "missing.arpa", bad):
        for cls in (ours.Model, ngramlm.Model):
            with pytest.raises(OSError) as e:
                cls(path)
            assert isinstance(e.value, InputError) and str(path) in str(e.value) and "fix:" in str(e.value)


def test_lmplz_prune_spelling_is_answered_with_the_comma_list(run_cli, tmp_path):
    code, _, err = run_cli("train", "toy", "--order", "3", "--prune", "0", "0", "1", "-o", tmp_path / "m.arpa")
    assert code == 2 and "--prune 0,0,1" in err and "no such file" not in err
    assert not (tmp_path / "m.arpa").exists()


def test_ppl_counts_ptbs_literal_unk_alike_for_every_model_format(run_cli, tmp_path, shared_corpora):
    """PTB's <unk> is a word of the corpus: the ARPA, native and KenLM binary files of one model report the
    same OOVs (0) and perplexity, though a binary cannot record that its training text had <unk>."""
    import json

    arpa = tmp_path / "ptb2.arpa"
    code, _, err = run_cli("train", "ptb", "--data-dir", shared_corpora, "--order", "2", "-o", arpa)
    assert code == 0, err
    reports = []
    for kind in ("probing", "trie"):
        code, _, err = run_cli("build-binary", kind, arpa, tmp_path / f"ptb2.{kind}")
        assert code == 0, err
    for model in (arpa, tmp_path / "ptb2.probing", tmp_path / "ptb2.trie"):
        code, out, err = run_cli("ppl", model, "ptb", "--data-dir", shared_corpora, "--json")
        assert code == 0, err
        reports.append(json.loads(out))
    assert {r["oovs"] for r in reports} == {0}
    assert len({round(r["ppl"], 4) for r in reports}) == 1


@pytest.mark.skipif(not __import__("os").path.exists("/dev/full"), reason="needs /dev/full (Linux) for a full disk")
def test_a_full_disk_on_a_native_write_is_one_error_and_no_zip_noise(tmp_path):
    """/dev/full fails every write with ENOSPC: the error is reported once, with no 'Exception ignored in
    ZipFile.__del__' after it."""
    import subprocess
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parents[1]
    r = subprocess.run([sys.executable, str(root / "cli.py"), "train", "toy", "--order", "2", "-o", "/dev/full"],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode != 0
    assert "No space left on device" in r.stderr and "fix:" in r.stderr
    assert "Exception ignored" not in r.stderr and "Traceback" not in r.stderr


def test_a_checkpoint_with_pickled_objects_is_refused_as_such_not_called_corrupt(run_cli, tmp_path):
    """torch's weights-only load refuses any pickled object: the message says what is in the file and does
    not repeat torch's advice to turn that safety off."""
    import argparse

    torch = pytest.importorskip("torch")
    from neural.checkpoint import FORMAT, FORMAT_VERSION

    path = tmp_path / "foreign.pt"
    torch.save({"format": FORMAT, "version": FORMAT_VERSION, "args": argparse.Namespace(lr=1.0)}, path)
    code, _, err = run_cli("neural", "ppl", path, "toy")
    assert code == 2 and "holds Python objects besides weights (argparse.Namespace)" in err
    assert "corrupt" not in err and "weights_only=False" not in err and "fix:" in err


def test_unspaced_chinese_gets_a_tokenizer_hint_not_just_an_oov_count(run_cli, tmp_path, toy_model):
    text = tmp_path / "zh.txt"
    text.write_text("他说今天天气很好\n我们去公园散步吧\n", encoding="utf-8")
    code, out, err = run_cli("ppl", toy_model, text)
    assert code == 0, err
    assert "2 of 2 words (100 %) are out of vocabulary" in out + err and "--tokenizer char" in out + err
    english = tmp_path / "en.txt"
    english.write_text("zzq qqz\nxxv vvx\n", encoding="utf-8")
    code, out, err = run_cli("ppl", toy_model, english)
    assert "are out of vocabulary" in out + err and "--tokenizer char" not in out + err


def test_mix_best_mix_says_what_it_is_doing(run_cli, tmp_path, toy_arpa):
    code, _, err = run_cli("mix", toy_arpa, toy_arpa, "-o", tmp_path / "mix.arpa", "--best-mix", "toy")
    assert code == 0, err
    for step in ("reading", "scoring toy:valid", "EM on the weights", "mixing every n-gram", "writing"):
        assert step in err, step


def test_an_output_in_a_missing_folder_says_it_created_the_folder(run_cli, tmp_path):
    """`-o dir/x` made the folder silently: a mistyped folder then looked like a model gone missing."""
    out = tmp_path / "new" / "sub" / "toy2.arpa"
    code, _, err = run_cli("train", "toy", "--order", "2", "-o", out)
    assert code == 0, err
    assert out.exists()
    assert f"note: created the folder {out.parent} for the model file" in err
    code, _, err = run_cli("train", "toy", "--order", "2", "-o", out)  # the folder exists now: nothing said
    assert code == 0 and "created the folder" not in err


def test_a_missing_temp_folder_is_said_when_it_is_created(tmp_path):
    from ngramlm.builder.streaming import TempFolder

    import contextlib
    import io

    parent = tmp_path / "scratch" / "tmp"
    buf = io.StringIO()
    with contextlib.redirect_stderr(buf), TempFolder(parent) as t:
        assert t.path.parent == parent
    assert f"note: created the temp folder {parent}" in buf.getvalue()
