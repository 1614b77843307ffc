"""``ngramlm.kenlm``: the kenlm module's API over KenLM binaries, searched in place without numpy.

The reference is the kenlm module (kenlm-ex, in the test extras) on the same file, number for
number -- sentence totals included, which both sum in float32.  Without it the files that
KenLM's own ``build_binary`` wrote (tests/data/kenlm_bin) are checked against their ARPA files and
against hand-computed values, so the module is tested on a fresh clone too.
"""
from __future__ import annotations

import os
import pickle
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import ngramlm.kenlm as lean
from corpora.errors import InputError
from ngramlm import accel
from ngramlm.kenlm.write import murmur_hash64a
from ngramlm.query import Model as ToolkitModel

pytestmark = pytest.mark.skipif(accel.fast is None, reason="ngramlm.kenlm searches binaries with the compiled "
                                "extension; without it every file loads as ngramlm.Model (tested there)")

DATA = Path(__file__).parent / "data" / "kenlm_bin"
ROOT = Path(__file__).resolve().parents[1]
BUILD_BINARY_FILES = ["toy3s.probing.bin", "toy3s.trie.bin", "toy3s.trie-q8-b8-a22.bin",
                      "toy3s-pruned.probing.bin", "toy3s-pruned.trie-q8-b8-a22.bin"]
# Lines a decoder meets: OOV words, a literal <unk> and <s>, KenLM's six space bytes, a non-ASCII
# space (no separator for KenLM), non-ASCII words, an empty line.
ODD_LINES = ["zzqx unknownword", "<unk> <unk>", "", "   ", "\tchex\x0bgiga\x0c\r\n", "a\u00a0b chex",
             "héllo wörld 紅樓夢", "<s> chex </s>"]


@pytest.fixture(scope="module")
def toy(kenlm_toy):
    """The KenLM-binary tests' toy 4-gram in every variant (conftest), with odd lines, and its words."""
    return {**kenlm_toy, "lines": kenlm_toy["lines"] + ODD_LINES, "words": kenlm_toy["lm"].vocab_.itos_[4:]}


def _all_files(toy) -> list:
    return [str(p) for p in toy["files"].values()] + [str(DATA / n) for n in BUILD_BINARY_FILES]


def _walk(model, state_cls, line: str) -> list:
    """The state API word by word, as a beam-search decoder calls it."""
    a, b = state_cls(), state_cls()
    model.BeginSentenceWrite(a)
    out = []
    for w in line.split() + ["</s>"]:
        r = model.BaseFullScore(a, w, b)
        out.append((model.BaseScore(a, w, b), r.log_prob, r.ngram_length, r.oov))
        a, b = b, a
    return out


def test_every_file_scores_as_the_kenlm_module_to_the_bit(toy):
    kenlm = pytest.importorskip("kenlm", reason="the kenlm module (pip install kenlm-ex) is the reference")
    for path in _all_files(toy):
        ours, ref = lean.Model(path), kenlm.Model(path)
        assert type(ours) is lean.Model and ours.order == ref.order
        for line in toy["lines"]:
            for bos in (True, False):
                for eos in (True, False):
                    assert ours.score(line, bos, eos) == ref.score(line, bos=bos, eos=eos), (path, line, bos, eos)
                    assert list(ours.full_scores(line, bos, eos)) == list(ref.full_scores(line, bos=bos, eos=eos))
            assert ours.perplexity(line) == ref.perplexity(line)
            assert ours.score(line.encode()) == ref.score(line.encode())
        for line in toy["lines"][:30] + ODD_LINES:
            assert _walk(ours, lean.State, line) == _walk(ref, kenlm.State, line), (path, line)
        for w in toy["words"][:200] + ["<unk>", "<s>", "</s>", "zzqx", "", "a\u00a0b"]:
            assert (w in ours) == (w in ref), (path, w)


@pytest.mark.parametrize("name", BUILD_BINARY_FILES)
def test_build_binarys_files_score_as_the_toolkits_model(name):
    """Without the kenlm module: per word the numbers of ngramlm.Model on the same file (the same
    float32 values), totals within float32 rounding, and the ARPA file's numbers where unquantised."""
    from corpora import load_corpus, prepare
    from corpora.toy import ToyConfig

    ds = prepare(load_corpus("toy", toy_config=ToyConfig(n_train_tokens=8000, n_valid_tokens=500,
                                                          n_test_tokens=1000)))
    lines = [" ".join(s) for s in ds.corpus.sentences("test")][:100] + ODD_LINES
    ours, full = lean.Model(DATA / name), ToolkitModel(DATA / name)
    arpa = ToolkitModel(DATA / ("toy3s-pruned.arpa.gz" if "pruned" in name else "toy3s.arpa.gz"))
    for line in lines:
        if line != "a\u00a0b chex":  # ngramlm.Model splits on every Unicode space, kenlm on ASCII ones
            got = list(ours.full_scores(line))
            assert got == list(full.full_scores(line)), line
            if "q8" not in name and "<s>" not in line:  # (p(<s>): the ARPA's -99 is -inf when read)
                want = list(arpa.full_scores(line))
                np.testing.assert_allclose([g[0] for g in got], [w[0] for w in want], atol=2e-6)
                assert [g[2] for g in got] == [w[2] for w in want]
            assert ours.score(line) == pytest.approx(sum(g[0] for g in got), abs=1e-4)
        assert _walk(ours, lean.State, line) == _walk(full, lean.State, line)


def test_a_sentence_is_split_as_kenlm_splits_it():
    m = lean.Model(DATA / "toy3s.trie.bin")
    # KenLM's spaces are the six ASCII ones; a no-break space (U+00A0) is part of a word.
    assert len(list(m.full_scores("\tchex\x0bgiga\x0c\r\n"))) == 3
    assert [s[2] for s in m.full_scores("chex\u00a0giga")] == [True, False]
    assert m.score("  chex   giga ") == m.score("chex giga") == m.score(b"chex giga")
    assert m.perplexity("chex\u00a0giga") == 10 ** (-m.score("chex\u00a0giga") / 2)
    assert m.score("", bos=False, eos=False) == 0.0
    assert m.score("<unk>") == m.score("zzqx")  # a literal <unk> is the unknown word, as in KenLM
    assert "chex" in m and "zzqx" not in m and "<unk>" not in m and b"chex" in m
    with pytest.raises(TypeError, match="str"):
        m.score(3)
    with pytest.raises(TypeError, match="str"):
        m.BaseScore(lean.State(), 3, lean.State())


@pytest.mark.parametrize("kind", ["trie", "probing"])
def test_files_without_sentence_markers_read_as_kenlm_reads_them(kind):
    """build_binary -s: <s> and </s> are <unk> (hand-computed in test_kenlm_binary's NOMARKER_SCORES)."""
    m = lean.Model(DATA / f"nomarkers.{kind}.bin")
    assert [s[0] for s in m.full_scores("a b")] == pytest.approx([-0.5, -0.3, -0.4], abs=1e-6)
    assert [s[0] for s in m.full_scores("c a")] == pytest.approx([-0.9, -0.8, -1.2], abs=1e-6)


def test_the_compiled_murmur_hash_is_kenlms():
    rng = np.random.default_rng(0)
    cases = [b"", b"<s>", b"</s>", "紅樓夢".encode()] + [rng.bytes(n) for n in range(0, 40)]
    assert [accel.fast.murmur_hash64a(c) for c in cases] == [murmur_hash64a(c) for c in cases]


def test_loading_a_binary_imports_no_numpy():
    """What makes the module as light as kenlm: a decoder that scores never pays for numpy."""
    code = ("import sys; import ngramlm.kenlm as kenlm; m = kenlm.Model(sys.argv[1]); s = kenlm.State(); "
            "m.BeginSentenceWrite(s); m.BaseScore(s, 'chex', kenlm.State()); m.score('chex giga'); "
            "list(m.full_scores('chex')); print(sorted(k for k in sys.modules if k.split('.')[0] in "
            "('numpy', 'scipy', 'click', 'torch') or k.startswith('corpora.') and k not in "
            "('corpora.errors', 'corpora.lazy')))")
    for name in ("toy3s.probing.bin", "toy3s.trie-q8-b8-a22.bin"):
        out = subprocess.run([sys.executable, "-c", code, str(DATA / name)], capture_output=True, text=True,
                             cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)})
        assert out.returncode == 0, out.stderr
        assert out.stdout.strip() == "[]", out.stdout  # the packages' lazy __init__s import nothing heavy


def test_other_files_are_read_by_the_toolkits_model(toy, tmp_path):
    arpa = DATA / "toy3s.arpa.gz"
    m = lean.Model(arpa)
    assert type(m) is lean.Model and m.path == str(arpa) and repr(m) == "<Model from toy3s.arpa.gz>"
    assert m.score("chex giga") == pytest.approx(lean.Model(DATA / "toy3s.probing.bin").score("chex giga"), abs=1e-5)
    full = ToolkitModel(arpa)
    line = "chex giga zzqx chex"
    assert m.score(line) == full.score(line) and list(m.full_scores(line)) == list(full.full_scores(line))
    assert m.perplexity(line) == full.perplexity(line) and m.order == full.order == 3
    assert ("chex" in m, "zzqx" in m) == (True, False)
    assert _walk(m, lean.State, line) == _walk(full, lean.State, line)
    c = pickle.loads(pickle.dumps(m))  # reopens the file by its path, as for a binary
    assert type(c) is lean.Model and c.score(line) == m.score(line)
    with pytest.raises(InputError, match="no-such"):
        lean.Model(tmp_path / "no-such.bin")


def test_every_file_opens_as_an_instance_of_the_module_s_model(toy, tmp_path):
    """As with the kenlm module, ``isinstance(kenlm.Model(path), kenlm.Model)`` holds for every file it
    opens: binaries searched in place, ARPA (plain or .gz) and the toolkit's .npz, read by ngramlm.Model.
    Before, ``Model.__new__`` returned an ngramlm.Model for the last three, which is not one.  The
    state API stays a direct call into C either way (no Python frame per word)."""
    npz = tmp_path / "toy4.npz"
    toy["lm"].save(npz)
    files = _all_files(toy) + [str(toy["arpa"]), str(DATA / "toy3s.arpa.gz"), str(npz)]
    for path in files:
        m = lean.Model(path)
        assert isinstance(m, lean.Model), path
        assert type(m.BaseScore.__self__).__module__.startswith("ngramlm._fast"), (path, m.BaseScore)  # the C tables' own
    assert isinstance(lean.LanguageModel(npz), lean.Model)
    line = toy["lines"][0]
    a, b = lean.Model(npz), lean.Model(toy["files"]["probing"])
    assert a.score(line) == pytest.approx(b.score(line), abs=1e-4)
    wa, wb = _walk(a, lean.State, line), _walk(b, lean.State, line)
    assert [r[2:] for r in wa] == [r[2:] for r in wb] and len(wa) == len(line.split()) + 1
    assert [r[0] for r in wa] == pytest.approx([r[0] for r in wb], abs=1e-5)


def test_damaged_files_give_the_path_and_the_fix(toy, tmp_path):
    src = toy["files"]["trie"].read_bytes()
    cut = tmp_path / "cut.bin"
    cut.write_bytes(src[: len(src) // 2])
    with pytest.raises(InputError, match="truncated") as e:
        lean.Model(cut)
    assert str(cut) in str(e.value)
    # Overwrite the unigram records' child pointers: refused at load, never read out of the map.
    from ngramlm.kenlm.format import BinaryFile, _trie_config, trie_layout

    with BinaryFile(toy["files"]["trie"]) as bf:
        h = bf.header
        start = h.size + 8 + 8 * h.counts[0]
        L = trie_layout(h.order, h.counts, start, quant=_trie_config(bf, start)[0], array_bits=None)
    bad = bytearray(src)
    bad[L.unigram_offset + 8 + 16 * 3:L.unigram_offset + 16 + 16 * 3] = (2 ** 40).to_bytes(8, "little")
    damaged = tmp_path / "damaged.bin"
    damaged.write_bytes(bytes(bad))
    with pytest.raises(InputError, match="unigram pointers are inconsistent"):
        lean.Model(damaged)


def test_config_pickling_and_states(toy):
    path = toy["files"]["trie-q8-b8-a22"]
    cfg = lean.Config()
    cfg.load_method = lean.LoadMethod.LAZY
    a, b = lean.Model(path), lean.Model(path, cfg)
    line = toy["lines"][0]
    assert a.score(line) == b.score(line)
    c = pickle.loads(pickle.dumps(a))  # reopens the file by its path, as kenlm's Model does
    assert c.score(line) == a.score(line) and c.path == a.path and repr(c) == f"<Model from {path.name}>"
    # States after the same history are equal and hash alike: a decoder's recombination key.
    s1, s2 = _states(a, line.split()), _states(a, ["zzqx"] + line.split())
    assert s1 == s2 and hash(s1) == hash(s2)
    assert lean.LanguageModel(path).score(line) == a.score(line)


def _states(model, words):
    a, b = lean.State(), lean.State()
    model.BeginSentenceWrite(a)
    for w in words:
        model.BaseScore(a, w, b)
        a, b = b, a
    return a


def test_pyctcdecode_runs_on_it_as_on_kenlm(toy, tmp_path):
    """A real kenlm client, with this module put in kenlm's place as a user would where kenlm does not
    install (``sys.modules["kenlm"] = ngramlm.kenlm`` before importing the client), finds the same
    beams with the same scores as with the kenlm module."""
    pyctcdecode = pytest.importorskip("pyctcdecode", reason="pyctcdecode (in the test extras) is the client")
    pytest.importorskip("kenlm", reason="the kenlm module is the reference")
    import json

    rng = np.random.default_rng(1)
    chars = sorted({c for line in toy["lines"][:120] for c in line if c != " "})
    labels = ["", " "] + chars
    frames = []
    for line in toy["lines"][:2]:
        for c in line[:50]:
            row = rng.normal(0, 1.0, len(labels))
            row[labels.index(c)] += 3.0
            frames += [row, rng.normal(0, 1.0, len(labels)) + np.eye(len(labels))[0] * 3.0]
    logits = np.array(frames, dtype=np.float32)
    logits = logits - np.log(np.exp(logits).sum(1, keepdims=True))
    np.save(tmp_path / "logits.npy", logits)
    (tmp_path / "setup.json").write_text(json.dumps({"labels": labels, "unigrams": list(toy["words"]),
                                                     "model": str(toy["files"]["probing"])}))
    code = ("import json, sys, numpy as np\n"
            "import ngramlm.kenlm\n"
            "sys.modules['kenlm'] = ngramlm.kenlm\n"
            "from pyctcdecode import build_ctcdecoder\n"
            "d = json.load(open(sys.argv[1] + '/setup.json'))\n"
            "dec = build_ctcdecoder(d['labels'], kenlm_model_path=d['model'], unigrams=d['unigrams'], alpha=0.5, beta=1.0)\n"
            "assert type(dec._language_model._kenlm_model).__module__ == 'ngramlm.kenlm'\n"
            "beams = dec.decode_beams(np.load(sys.argv[1] + '/logits.npy'), beam_width=16)[:5]\n"
            "print(json.dumps([(b[0], float(b[-1])) for b in beams]))\n")
    out = subprocess.run([sys.executable, "-c", code, str(tmp_path)], capture_output=True, text=True, cwd=ROOT,
                         env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert out.returncode == 0, out.stderr
    dec = pyctcdecode.build_ctcdecoder(labels, kenlm_model_path=str(toy["files"]["probing"]),
                                       unigrams=list(toy["words"]), alpha=0.5, beta=1.0)
    want = [(b[0], float(b[-1])) for b in dec.decode_beams(logits, beam_width=16)[:5]]
    assert [tuple(x) for x in json.loads(out.stdout)] == want


def test_without_the_extension_a_binary_loads_as_the_toolkits_model():
    """NGRAMLM_NO_EXT=1 (or no compiler at install): ngramlm.kenlm hands every file to ngramlm.Model,
    whose numbers are the same, and its State is that model's: one class, the same as ngramlm.State."""
    code = ("import sys; import ngramlm, ngramlm.kenlm as k; m = k.Model(sys.argv[1]); s, t = k.State(), k.State(); "
            "m.BeginSentenceWrite(s); print(type(m).__module__, type(s).__name__, m.score('chex giga'), "
            "m.BaseScore(s, 'chex', t), isinstance(s, k.State) and k.State is ngramlm.State)")
    out = subprocess.run([sys.executable, "-c", code, str(DATA / "toy3s.trie.bin")], capture_output=True, text=True,
                         cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT), "NGRAMLM_NO_EXT": "1"})
    assert out.returncode == 0, out.stderr
    module, state, total, first, one_class = out.stdout.split()
    assert one_class == "True"
    m = lean.Model(DATA / "toy3s.trie.bin")
    a, b = lean.State(), lean.State()
    m.BeginSentenceWrite(a)
    assert module == "ngramlm.kenlm" and state == "PyState"  # the module's Model, over ngramlm.Model's tables
    assert float(total) == pytest.approx(m.score("chex giga"), abs=1e-5)
    assert float(first) == pytest.approx(m.BaseScore(a, "chex", b), abs=1e-6)


def test_a_file_without_its_vocabulary_strings_reads_as_kenlm_reads_it(toy, tmp_path):
    """build_binary -v leaves the words' strings out; KenLM finds words by their hashes, and so does
    ngramlm.kenlm (ngramlm.Model, which reads the strings, refuses such a file with the reason)."""
    import importlib.util

    from ngramlm.kenlm.write import BinaryOptions, write_binary

    kenlm = importlib.import_module("kenlm") if importlib.util.find_spec("kenlm") else None
    for kind in ("probing", "trie"):
        path = tmp_path / f"novocab.{kind}.bin"
        write_binary(toy["lm"], path, BinaryOptions(kind=kind, include_vocab=False))
        bare, full = lean.Model(path), lean.Model(toy["files"][kind])
        if kenlm is not None:  # the reference, where installed
            ref = kenlm.Model(str(path))
            assert [bare.score(line) for line in toy["lines"]] == [ref.score(line) for line in toy["lines"]]
        assert os.path.getsize(path) < os.path.getsize(toy["files"][kind])
        for line in toy["lines"]:
            assert bare.score(line) == full.score(line) and list(bare.full_scores(line)) == list(full.full_scores(line))
        with pytest.raises(InputError, match="without its vocabulary strings"):
            ToolkitModel(path)
