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
