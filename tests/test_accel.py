"""The compiled extension (ngramlm._fast) and the numpy/Python paths give the same results.

Every test here compares the two on the same input: ARPA tables read, ARPA bytes written, and
every number and state of the kenlm-style state API.  Where the extension is not built, the
comparisons skip (with the reason) and the rest of the suite tests the fallback alone.
"""
from __future__ import annotations

import copy
import gzip
import os
import subprocess
import sys

import numpy as np
import pytest

from ngramlm import NgramLM, accel
from ngramlm.io.arpa import _read_arpa_careful, _read_arpa_fast, read_arpa_tables, write_arpa
from ngramlm.loading import read_arpa
from ngramlm.kenlm.api import PyState, State
from ngramlm.query import Model

needs_ext = pytest.mark.skipif(accel.fast is None, reason=f"compiled extension: {accel.describe()}")
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


@pytest.fixture(scope="module")
def toy(tmp_path_factory):
    from corpora import load_corpus, prepare
    from corpora.toy import ToyConfig

    ds = prepare(load_corpus("toy", toy_config=ToyConfig(n_train_tokens=40_000, n_valid_tokens=2000,
                                                          n_test_tokens=2000)))
    d = tmp_path_factory.mktemp("accel")
    models = {}
    for smoothing, order in (("mkn", 4), ("wb", 3), ("absolute", 2), ("mkn", 1)):
        lm = NgramLM(order=order, smoothing=smoothing).fit(ds["train"], vocab=ds.vocab)
        path = d / f"{smoothing}{order}.arpa"
        write_arpa(lm, path)
        models[f"{smoothing}{order}"] = (lm, path)
    sents = [" ".join(s) for s in ds.corpus.sentences("test")][:200] + ["zzqx the", "<unk> <unk>", ""]
    return models, sents


def _same_tables(a, b):
    assert a.vocab.itos_ == b.vocab.itos_ and a.n_ngrams == b.n_ngrams and a.order == b.order
    assert a.vocab.n_corpus_unk_ == b.vocab.n_corpus_unk_
    for x, y in zip(a.keys + a.log10_prob + a.log10_backoff, b.keys + b.log10_prob + b.log10_backoff):
        assert x.dtype == y.dtype and np.array_equal(x, y)


@needs_ext
@pytest.mark.parametrize("name", ["mkn4", "wb3", "absolute2", "mkn1"])
def test_compiled_reader_builds_the_careful_readers_tables(toy, name):
    _, path = toy[0][name]
    raw = path.read_bytes()
    fast = _read_arpa_fast(raw, path)
    assert fast is not None  # a file this toolkit wrote takes the compiled path
    _same_tables(fast, _read_arpa_careful(raw, path))


@needs_ext
@pytest.mark.parametrize("edit", ["crlf", "srilm_no_zero_backoff", "spaces", "blank_lines", "bom", "gzip"])
def test_unusual_layouts_read_the_same_either_way(toy, tmp_path, edit):
    """Layouts other tools write: the compiled reader either handles them or hands over; same tables."""
    lm, path = toy[0]["mkn4"]
    text = path.read_text(encoding="utf-8")
    if edit == "crlf":
        text = text.replace("\n", "\r\n")
    elif edit == "srilm_no_zero_backoff":  # SRILM omits a back-off of 0
        text = "\n".join(ln[:-2] if ln.endswith("\t0") else ln for ln in text.split("\n"))
    elif edit == "spaces":
        text = text.replace("\t", " ")
    elif edit == "blank_lines":
        text = text.replace("\n\\2-grams:\n", "\n\n\n\\2-grams:\n\n")
    elif edit == "bom":
        text = "\ufeff" + text
    out = tmp_path / "edited.arpa"
    if edit == "gzip":
        out = tmp_path / "edited.arpa.gz"
        out.write_bytes(gzip.compress(text.encode("utf-8")))
    else:
        out.write_bytes(text.encode("utf-8"))
    if edit == "srilm_no_zero_backoff":
        assert "\t0\n" not in text and text.count("\n") > 100  # the edit did something
    _same_tables(read_arpa_tables(out), _read_arpa_careful(out.read_bytes() if edit != "gzip" else
                                                           gzip.decompress(out.read_bytes()), out))
    base = read_arpa(path)
    enc, oov = base.encode([s.split() for s in toy[1]])
    got = read_arpa(out)
    assert np.allclose(got.token_scores(enc, oov=oov).log10_prob, base.token_scores(enc, oov=oov).log10_prob,
                       rtol=0, atol=0)


@needs_ext
@pytest.mark.parametrize("bad, message", [
    ("\n-0.5\tzzz_not_a_unigram the\t-0.1\n", "not among the unigrams"),
    ("\n0x1p-3\tthe the\t-0.1\n", "bad number"),
    ("\nnan\tthe the\t-0.1\n", "finite"),
    ("\n-0.5\tthe the the the\t-0.1\n", "fields"),
])
def test_errors_found_on_the_compiled_path_still_name_their_line(toy, tmp_path, bad, message):
    """The compiled reader hands anything wrong to the careful one, which names the line."""
    from corpora.errors import InputError

    _, path = toy[0]["mkn4"]
    text = path.read_text(encoding="utf-8")
    head, rest = text.split("\\2-grams:\n", 1)
    first, rest = rest.split("\n", 1)
    edited = head + "\\2-grams:\n" + first + bad.rstrip("\n") + "\n" + rest
    # Keep the declared count right, so the error is the bad line itself.
    edited = edited.replace(f"ngram 2={text.split('ngram 2=')[1].split(chr(10))[0]}",
                            f"ngram 2={int(text.split('ngram 2=')[1].split(chr(10))[0]) + 1}")
    out = tmp_path / "bad.arpa"
    out.write_text(edited, encoding="utf-8")
    bad_line = edited.split("\n").index(bad.strip("\n")) + 1
    with pytest.raises(InputError) as e:
        read_arpa(out)
    assert message in str(e.value) and f":{bad_line}:" in str(e.value)


@needs_ext
@pytest.mark.parametrize("name", ["mkn4", "wb3", "absolute2", "mkn1"])
def test_compiled_writer_writes_the_column_writers_bytes(toy, tmp_path, monkeypatch, name):
    lm, path = toy[0][name]
    compiled = path.read_bytes()  # written with the extension (the fixture ran with it)
    monkeypatch.setattr(accel, "fast", None)
    write_arpa(lm, tmp_path / "columns.arpa")
    assert (tmp_path / "columns.arpa").read_bytes() == compiled


@needs_ext
def test_compiled_writer_formats_numbers_like_python(tmp_path, monkeypatch):
    """'%.7g' from C's snprintf and from Python agree on awkward values (and -inf is -99)."""
    enc, vocab = _tiny()
    lm = NgramLM(order=2, smoothing="wb").fit(enc, vocab=vocab)
    vals = np.array([-1e-10, -123456789.0, -0.1, -1 / 3, -5e-324, -0.0, -np.inf, -1.0000005, -99.0, -12345.675])
    lp = lm.log10_prob_[1].copy()
    assert len(lp) >= len(vals)
    lp[: len(vals)] = vals
    lm.log10_prob_ = [lm.log10_prob_[0], lp]
    write_arpa(lm, tmp_path / "c.arpa")
    monkeypatch.setattr(accel, "fast", None)
    write_arpa(lm, tmp_path / "p.arpa")
    assert (tmp_path / "c.arpa").read_bytes() == (tmp_path / "p.arpa").read_bytes()


def _tiny():
    from corpora import Vocab

    sents = [["a", "b", "c", "d"], ["b", "c", "a"], ["d", "d", "a", "b"], ["c"], ["a", "c", "e", "f", "b"]] * 2
    vocab = Vocab().fit(sents)
    return vocab.encode_sentences(sents), vocab


@needs_ext
@pytest.mark.parametrize("name", ["mkn4", "wb3", "absolute2", "mkn1"])
def test_compiled_state_api_equals_the_python_one(toy, name):
    """Every BaseScore number, matched length and resulting state, compiled vs Python."""
    _, path = toy[0][name]
    fast, slow = Model(path), Model(path, index=False)
    assert fast._fast is not None and slow._fast is None
    for line in toy[1]:
        a, b = State(), State()
        c, d = PyState(), PyState()
        fast.BeginSentenceWrite(a)
        slow.BeginSentenceWrite(c)
        for w in line.split() + ["</s>"]:
            r1 = fast.BaseFullScore(a, w, b)
            r2 = slow.BaseFullScore(c, w, d)
            assert (r1.log_prob, r1.ngram_length, r1.oov) == (r2.log_prob, r2.ngram_length, r2.oov)
            assert b.rows == d.rows and b.hist == d.hist
            a, b, c, d = b, a, d, c
        for bos in (True, False):
            for eos in (True, False):
                assert list(fast.full_scores(line, bos=bos, eos=eos)) == list(slow.full_scores(line, bos=bos, eos=eos))
                assert fast.score(line, bos=bos, eos=eos) == slow.score(line, bos=bos, eos=eos)


@needs_ext
def test_compiled_states_hash_and_compare_by_value(toy):
    _, path = toy[0]["mkn4"]
    m = Model(path)
    s1, s2, o1, o2 = State(), State(), State(), State()
    m.BeginSentenceWrite(s1)
    m.BeginSentenceWrite(s2)
    assert s1 == s2 and hash(s1) == hash(s2) and s1 is not s2
    w = toy[1][0].split()[0]
    m.BaseScore(s1, w, o1)
    m.BaseScore(s2, w, o2)
    assert o1.rows and o1 == o2 and hash(o1) == hash(o2) and len({o1, o2}) == 1
    m.NullContextWrite(o2)
    assert o1 != o2 and o2 == State()
    c = copy.copy(o1)
    assert c == o1 and c is not o1 and copy.deepcopy(o1) == o1
    with pytest.raises(TypeError):  # the C path takes its own states only
        m.BaseScore(PyState(), "the", o1)


@needs_ext
def test_compiled_hash_index_scores_like_binary_search(toy):
    lm, _ = toy[0]["mkn4"]
    enc, oov = lm.encode([s.split() for s in toy[1]])
    plain = NgramLM.from_tables(lm.tables_).token_scores(enc, oov=oov)
    indexed = NgramLM.from_tables(lm.tables_).build_index()
    assert indexed.compiled_tables() is not None
    got = indexed.token_scores(enc, oov=oov)
    assert np.array_equal(got.log10_prob, plain.log10_prob) and np.array_equal(got.ngram_length, plain.ngram_length)


def test_the_fallback_is_used_and_said_when_the_extension_is_off():
    code = ("from ngramlm import accel, State; from ngramlm.kenlm.api import PyState; "
            "print(accel.fast is None, State is PyState); print(accel.describe())")
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True,
                         env=dict(os.environ, NGRAMLM_NO_EXT="1")).stdout.splitlines()
    assert out[0] == "True True"
    assert "fallback" in out[1] and "NGRAMLM_NO_EXT" in out[1]


def test_fallback_paths_give_the_same_scores(toy, tmp_path):
    """The whole read -> score -> write round trip in a process without the extension."""
    _, path = toy[0]["mkn4"]
    code = ("import sys, numpy as np; from ngramlm import Model; from ngramlm.io.arpa import write_arpa; "
            "m = Model(sys.argv[1]); print(repr(m.score('the cat sat on the mat'))); "
            "write_arpa(m.lm, sys.argv[2])")
    out = tmp_path / "fallback.arpa"
    got = subprocess.run([sys.executable, "-c", code, str(path), str(out)], cwd=ROOT, capture_output=True,
                         text=True, check=True, env=dict(os.environ, NGRAMLM_NO_EXT="1")).stdout.strip()
    assert float(got) == Model(path).score("the cat sat on the mat")
    assert out.read_bytes() == path.read_bytes()


@needs_ext
def test_compiled_number_parsing_gives_pythons_doubles():
    """Clinger's fast path and the strtod fallback against float() on awkward spellings."""
    rng = np.random.default_rng(7)
    vals = -np.abs(np.concatenate([rng.standard_normal(300) * 10.0 ** rng.integers(-12, 6, 300),
                                   [0.0, 1e-22, 1e-23, 123456789012345678.0, 0.1, 1 / 3, 5e-324]]))
    spellings = []
    for i, v in enumerate(vals):
        fmt = ["%.7g", "%.17g", "%e", "%.3f", "%.15g", "%.20f"][i % 6]
        spellings.append(fmt % v)
    spellings += ["-0", "-.5", "-5.", "-0.000", "-1E-5", "-1e+2", "-00012.50", "-123456789012345678901234"]
    words = [f"w{i}" for i in range(len(spellings))]
    text = "\\data\\\nngram 1=%d\n\n\\1-grams:\n" % (len(words) + 2)
    text += "-1\t</s>\n-99\t<s>\n" + "".join(f"{s}\t{w}\n" for s, w in zip(spellings, words)) + "\n\\end\\\n"
    raw = text.encode()
    fast, careful = _read_arpa_fast(raw, "n.arpa"), _read_arpa_careful(raw, "n.arpa")
    assert fast is not None
    _same_tables(fast, careful)
    ids = [fast.vocab.stoi_[w] for w in words]
    assert [float(x) for x in fast.log10_prob[0][ids]] == [float(s) for s in spellings]


# ----------------------------------------------------------------------------- regressions found in review
@needs_ext
def test_a_state_of_another_model_is_refused_not_a_crash(toy):
    _, p4 = toy[0]["mkn4"]
    _, p3 = toy[0]["wb3"]
    m4, m3 = Model(p4), Model(p3)
    s, t = State(), State()
    found = False
    for line in toy[1]:  # a state holding three rows (a history the 4-gram model extends)
        m4.BeginSentenceWrite(s)
        for w in line.split():
            m4.BaseScore(s, w, t)
            s, t = t, s
            if len(s.rows) == 3:
                found = True
                break
        if found:
            break
    assert found
    with pytest.raises(ValueError, match="does not belong"):
        m3.BaseScore(s, "x", t)
    bad = State()
    bad.rows, bad.hist = (10**9,), 1
    with pytest.raises(ValueError, match="does not belong"):
        m4.BaseScore(bad, "x", t)


@needs_ext
def test_an_empty_key_index_finds_nothing():
    assert accel.fast.KeyIndex().find_many(np.array([5, -1], dtype=np.int64)).tolist() == [-1, -1]


@needs_ext
def test_words_with_other_whitespace_read_the_same_either_way(tmp_path):
    text = ("\\data\\\nngram 1=4\nngram 2=1\n\n\\1-grams:\n-1 </s> 0\n-99 <s> -0.5\n-0.5 a\u00a0b -0.25\n"
            "-0.7 c 0\n\n\\2-grams:\n-0.1 <s> a\u00a0b\n\n\\end\\\n")
    raw = text.encode()
    fast, careful = _read_arpa_fast(raw, "ws.arpa"), _read_arpa_careful(raw, "ws.arpa")
    assert fast is not None and "a\u00a0b" in fast.vocab.stoi_
    _same_tables(fast, careful)


def test_a_huge_declared_count_is_a_one_line_error(toy, tmp_path):
    from corpora.errors import InputError

    _, path = toy[0]["wb3"]
    text = path.read_text(encoding="utf-8")
    n1 = text.split("ngram 1=")[1].split("\n")[0]
    (tmp_path / "big.arpa").write_text(text.replace(f"ngram 1={n1}", "ngram 1=100000000000000"), encoding="utf-8")
    with pytest.raises(InputError, match="declares 100000000000000"):
        read_arpa(tmp_path / "big.arpa")


def test_empty_high_orders_write_the_same_bytes_either_way(tmp_path, monkeypatch):
    enc, vocab = _tiny()
    lm = NgramLM(order=12, smoothing="wb").fit(enc, vocab=vocab)
    assert lm.n_ngrams_[-1] == 0  # sentences of at most 5 words: orders 8 and up are empty
    write_arpa(lm, tmp_path / "c.arpa")
    monkeypatch.setattr(accel, "fast", None)
    write_arpa(lm, tmp_path / "p.arpa")
    assert (tmp_path / "c.arpa").read_bytes() == (tmp_path / "p.arpa").read_bytes()


def test_the_threaded_writer_passes_write_errors_to_the_caller():
    import errno

    from ngramlm.io.arpa import ThreadedWriter

    class Full:
        def __init__(self):
            self.n, self.data = 0, []

        def write(self, b):
            self.n += 1
            if self.n > 2:
                raise OSError(errno.ENOSPC, "No space left on device")
            self.data.append(b)

    fh = Full()
    with pytest.raises(OSError, match="No space"):
        with ThreadedWriter(fh) as w:
            for i in range(50):
                w.write(b"x%d" % i)
    assert fh.data == [b"x0", b"x1"]  # in order, and nothing after the error
    ok = Full()
    with ThreadedWriter(ok) as w:
        w.write(b"a")
        w.write(b"b")
    assert ok.data == [b"a", b"b"]


@needs_ext
def test_a_full_disk_while_writing_arpa_leaves_no_file(toy, tmp_path, monkeypatch):
    import errno

    import ngramlm.io.arpa as arpa
    from corpora.textio import OutputError

    lm, _ = toy[0]["mkn4"]
    calls = {"n": 0}
    real = arpa.ThreadedWriter._run

    def failing_run(self):
        write = self.fh.write

        def limited(b):
            calls["n"] += 1
            if calls["n"] > 1:
                raise OSError(errno.ENOSPC, "No space left on device")
            return write(b)

        self.fh = type("F", (), {"write": staticmethod(limited)})()
        return real(self)

    monkeypatch.setattr(arpa.ThreadedWriter, "_run", failing_run)
    with pytest.raises(OutputError, match="No space"):
        write_arpa(lm, tmp_path / "m.arpa")
    assert list(tmp_path.iterdir()) == []


# The compiled extension is one package of units (ngramlm/_fast), loaded and checked once by accel.
# Every public name the single module had, by the unit that holds it now.
UNIT_NAMES = {
    "arpa": {"WordTable", "section_end", "parse_unigrams", "parse_section", "write_section", "through_text7",
             "PackedBook", "parse_packed", "split_find", "packed_take"},
    "state": {"KeyIndex", "State", "Tables"},
    "kenlm": {"ProbingTables", "TrieTables", "probing_insert", "or_bits", "quant_encode", "murmur_hash64a"},
    "tokens": {"Spooler", "sa_count_many", "sa_range", "sa_infini"},
}


def test_the_abi_version_is_the_same_in_the_units_and_in_accel():
    import re

    pxd = open(os.path.join(ROOT, "ngramlm", "_fast", "common.pxd"), encoding="utf-8").read()
    assert [int(v) for v in re.findall(r"^\s*ABI_VERSION = (\d+)", pxd, flags=re.M)] == [accel.FAST_ABI]
    assert set(accel.UNITS) == set(UNIT_NAMES)


@needs_ext
def test_every_unit_is_loaded_and_each_name_is_in_one_unit():
    import importlib

    for unit, names in UNIT_NAMES.items():
        module = importlib.import_module(f"ngramlm._fast.{unit}")
        assert module.ABI == accel.FAST_ABI and set(module.__all__) == names, unit
        assert all(getattr(accel.fast, name) is getattr(module, name) for name in names)
    assert set(vars(accel.fast)) == set().union(*UNIT_NAMES.values())
    assert sum(map(len, UNIT_NAMES.values())) == len(vars(accel.fast))  # no name in two units


@needs_ext
def test_a_partial_build_is_refused_as_a_whole(monkeypatch):
    # A unit that failed to compile (setup.py goes on without it): find_spec finds no file for it.
    monkeypatch.setitem(sys.modules, "ngramlm._fast.tokens", None)
    assert accel._load() == (None, "only partly built (no ngramlm._fast.tokens); rebuild it: pip install -e . "
                                   "(gcc, python3-dev)")


@needs_ext
def test_a_unit_from_another_build_is_refused(monkeypatch):
    from ngramlm._fast import kenlm

    monkeypatch.setattr(kenlm, "ABI", accel.FAST_ABI - 1)
    assert accel._load() == (None, f"present but stale (this code needs ABI {accel.FAST_ABI}: ngramlm._fast.kenlm "
                                   f"has {accel.FAST_ABI - 1}); rebuild it: pip install -e . (gcc, python3-dev)")
    monkeypatch.delattr(kenlm, "ABI")  # a unit older than the check
    assert "ngramlm._fast.kenlm has None" in accel._load()[1]
