"""n-gram CLI end to end, and its handling of bad input (file, line, fix; nothing half-written)."""
import os
import pickle

import pytest

from ngramlm import NgramLM

TEXT = "the cat sat on the mat\nthe dog sat on the log\na cat and a dog\nthe cat ran\n"


@pytest.fixture
def small(tmp_path):
    p = tmp_path / "train.txt"
    p.write_text(TEXT * 3)
    return p


def test_train_ppl_score_generate_on_a_file(run_cli, small, tmp_path):
    model = tmp_path / "m.npz"
    code, out, err = run_cli("train", small, "-o", model, "--order", "2", "--smoothing", "wb")
    assert code == 0, err
    code, out, err = run_cli("ppl", model, small)
    assert code == 0, err
    assert "12 sentences, 60 words, 0 OOVs" in out
    lm = NgramLM.load(model)
    enc, _ = lm.encode([line.split() for line in (TEXT * 3).splitlines()])
    assert f"ppl= {lm.perplexity_report(enc).ppl:.2f} " in out  # human output: 2 decimals (--json has all)
    code, out, _ = run_cli("score", model, small, "--per-token")
    assert code == 0 and out.splitlines()[0].startswith("the\t")
    code, out, _ = run_cli("generate", model, "--seed", "3", "-n", "2")
    code2, out2, _ = run_cli("generate", model, "--seed", "3", "-n", "2")
    assert code == 0 and out == out2 and out.strip()


def test_stdin_training_and_arpa_output(run_cli, tmp_path):
    arpa = tmp_path / "m.arpa"
    code, _, err = run_cli("train", "-", "-o", arpa, "--order", "3", "--smoothing", "katz", "--discount-fallback",
                           input=TEXT * 5)
    assert code == 0, err
    body = [ln for ln in arpa.read_text().splitlines() if ln.strip() and not ln.startswith("#")]
    assert body[0] == "\\data\\"  # after the '# ngramlm-meta' comment line
    code, out, err = run_cli("ppl", arpa, "-", input=TEXT)
    # `assert a, msg and b` only checks a (the rest is the failure message): check both.
    assert code == 0, err
    assert "Perplexity including OOVs" in out, out


def test_ppl_reports_oovs_like_kenlm(run_cli, small, tmp_path):
    model = tmp_path / "m.npz"
    run_cli("train", small, "-o", model, "--order", "2", "--smoothing", "kn", "--discount-fallback")
    code, out, _ = run_cli("ppl", model, "-", input="the zebra sat\n")
    assert code == 0
    assert "1 sentences, 3 words, 1 OOVs" in out


@pytest.mark.parametrize("content,needle", [
    (b"", "empty"),
    (b"caf\xe9 au lait\n", "byte offset 3"),
    (b"\x80\x04\x95pickle\x00data", "pickle"),
])
def test_bad_training_text(run_cli, tmp_path, content, needle):
    src = tmp_path / "bad.txt"
    src.write_bytes(content)
    out_model = tmp_path / "m.npz"
    code, out, err = run_cli("train", src, "-o", out_model)
    assert code == 2
    assert needle in err and str(src) in err
    assert not out_model.exists()


@pytest.mark.parametrize("args,needle", [
    (["--order", "0"], "order must be an integer from 1 to 12"),
    (["--order", "13"], "order must be an integer from 1 to 12"),
    (["--smoothing", "magic"], "unknown smoother"),
])
def test_bad_options(run_cli, small, tmp_path, args, needle):
    code, _, err = run_cli("train", small, "-o", tmp_path / "m.npz", *args)
    assert code == 2 and needle in err
    assert not (tmp_path / "m.npz").exists()


def test_pickle_and_foreign_files_are_never_loaded(run_cli, tmp_path, small):
    evil = tmp_path / "model.pkl"
    evil.write_bytes(pickle.dumps({"x": 1}))
    code, _, err = run_cli("ppl", evil, small)
    assert code == 2 and "pickle" in err and str(evil) in err
    junk = tmp_path / "junk.bin"
    junk.write_bytes(b"JUNK" + bytes(range(60)))  # not 0x80 first: that byte says "pickle"
    code, _, err = run_cli("ppl", junk, small)
    assert code == 2 and "not an ngramlm model" in err


ARPA_OK = """\\data\\
ngram 1=4
ngram 2=2

\\1-grams:
-1.0\t<unk>\t0
-99\t<s>\t-0.3
-0.5\t</s>
-0.4\ta\t-0.2

\\2-grams:
-0.3\t<s> a
-0.2\ta </s>

\\end\\
"""


@pytest.mark.parametrize("mutate,needle,line", [
    (lambda t: t.replace("ngram 2=2", "ngram 2=3"), "declares 3 2-grams", None),
    (lambda t: t.replace("-0.2\ta </s>", "-0.2x\ta </s>"), "bad number", 13),
    (lambda t: t.replace("-0.2\ta </s>\n", "-0.2\ta </s>\n-0.25\ta </s>\n").replace("ngram 2=2", "ngram 2=3"),
     "duplicate 2-gram", 14),
    (lambda t: t[: t.index("\\end\\")], "missing \\end\\", None),
    (lambda t: t.replace("-0.3\t<s> a", "-0.3\t<s> a b c"), "fields", 12),
])
def test_bad_arpa_files(run_cli, tmp_path, small, mutate, needle, line):
    good = tmp_path / "good.arpa"
    good.write_text(ARPA_OK)
    code, out, err = run_cli("ppl", good, "-", input="a\n")
    assert code == 0, err
    bad = tmp_path / "bad.arpa"
    bad.write_text(mutate(ARPA_OK))
    code, _, err = run_cli("ppl", bad, "-", input="a\n")
    assert code == 2 and needle in err, err
    if line is not None:
        assert f"{bad}:{line}:" in err


def test_arpa_hand_scoring():
    from ngramlm.loading import read_arpa
    import tempfile, pathlib

    d = pathlib.Path(tempfile.mkdtemp())
    (d / "m.arpa").write_text(ARPA_OK)
    lm = read_arpa(d / "m.arpa")
    # p(a | <s>) stored; p(</s> | a) stored; p(a | a) = bo(a) + p(a) = -0.2 + -0.4
    assert lm.log10_prob("a", ["<s>"]) == pytest.approx(-0.3)
    assert lm.log10_prob("</s>", ["<s>", "a"]) == pytest.approx(-0.2)
    assert lm.log10_prob("a", ["<s>", "a"]) == pytest.approx(-0.6)


def test_tokenizer_mismatch_is_refused(run_cli, small, tmp_path):
    model = tmp_path / "m.npz"
    run_cli("train", small, "-o", model, "--order", "2", "--smoothing", "wb")
    code, _, err = run_cli("ppl", model, small, "--tokenizer", "char")
    assert code == 2 and "tokenizer" in err and str(model) in err


def test_interrupted_save_keeps_previous_model(small, tmp_path, monkeypatch):
    from corpora import Vocab

    sents = [line.split() for line in TEXT.splitlines()]
    v = Vocab().fit(sents)
    lm = NgramLM(order=2, smoothing="wb").fit(v.encode_sentences(sents), vocab=v)
    path = tmp_path / "m.npz"
    lm.save(path)
    before = path.read_bytes()

    def boom(*a, **k):
        raise KeyboardInterrupt

    monkeypatch.setattr(os, "replace", boom)
    with pytest.raises(KeyboardInterrupt):
        NgramLM(order=1, smoothing="wb").fit(v.encode_sentences(sents), vocab=v).save(path)
    monkeypatch.undo()
    assert path.read_bytes() == before
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".m.npz")] == []
    assert NgramLM.load(path).order_ == 2
