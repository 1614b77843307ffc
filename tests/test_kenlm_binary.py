"""KenLM binary files: read (probing and the four trie variants) and written (``ngramlm build-binary``).

References: the ``kenlm`` module (kenlm-ex, in the test extras) loading the same file, and the
ARPA file the binary was made from.  Toy models here run anywhere; the files ``build_binary``
itself wrote are in tests/data (see its README), and PTB parity is in test_kenlm_binary_ptb.
"""
from __future__ import annotations

import json
import math
import struct

import numpy as np
import pytest

from corpora.errors import InputError
from ngramlm import Model, accel
from ngramlm.kenlm.read import read_trie_tables
from ngramlm.kenlm.format import MAGIC, BinaryFile, looks_like_kenlm_binary, read_header, required_bits
from ngramlm.kenlm.write import BinaryOptions, _encode, _make_bins, murmur_hash64a, write_binary
from ngramlm.loading import load_any

from conftest import KENLM_VARIANTS, kenlm_options

VARIANTS = {name: kenlm_options(name) for name in KENLM_VARIANTS}


@pytest.fixture(scope="module")
def toy(kenlm_toy):
    """A 4-gram MKN model of the toy language, its ARPA file, every binary variant, test lines (conftest)."""
    return kenlm_toy


def _scores(model, lines):
    out = []
    for line in lines:
        out.extend(model.full_scores(line))
    lp = np.array([x[0] for x in out])
    n = np.array([x[1] for x in out])
    oov = np.array([x[2] for x in out])
    return lp, n, oov


# ---------------------------------------------------------------------------------------- format

def test_murmur_hash64a_basics():
    # The empty string hashes to 0 with seed 0 (no block, no tail: h = 0 throughout).  That KenLM
    # agrees on real words is tested by the kenlm module finding every word of a trie written here.
    assert murmur_hash64a(b"") == 0
    h = murmur_hash64a(b"<unk>")
    assert h == murmur_hash64a(b"<unk>") and h != murmur_hash64a(b"<UNK>")
    # Every byte matters, and the tail bytes after the last 8-byte block too.
    assert len({murmur_hash64a(bytes([c]) * n) for c in range(3) for n in range(1, 17)}) == 48


def test_required_bits_is_kenlms():
    assert [required_bits(v) for v in (0, 1, 2, 3, 4, 255, 256)] == [0, 1, 2, 2, 3, 8, 9]


def test_header_is_read_and_checked(toy):
    for name, path in toy["files"].items():
        assert looks_like_kenlm_binary(path)
        h = read_header(path)
        assert h.order == 4 and h.has_vocabulary
        assert h.kind == ("probing" if name == "probing" else "trie")
        assert h.model_type == VARIANTS[name].model_type
        assert h.counts == [len(toy["lm"].vocab_) - 1] + [len(k) for k in toy["lm"].keys_[1:]]
    assert not looks_like_kenlm_binary(toy["arpa"])


# ---------------------------------------------------------------------------------------- reading

@pytest.mark.parametrize("name", ["trie", "trie-a22"])
def test_unquantised_trie_decodes_to_the_arpa_values(toy, name):
    """Every n-gram comes back with its ARPA probability and back-off as float32."""
    arpa = load_any(toy["arpa"])
    binary = read_trie_tables(toy["files"][name])
    assert binary.order == arpa.order_
    for k in range(1, arpa.order_ + 1):
        # The vocabularies are numbered differently (KenLM's trie sorts words by hash), so compare
        # each order's values as sorted lists: the same numbers, exactly, as float32.
        assert len(binary.keys[k - 1]) == len(arpa.keys_[k - 1])
        want = np.sort(np.asarray(arpa.log10_prob_[k - 1], dtype=np.float32))
        got = np.sort(np.asarray(binary.log10_prob[k - 1], dtype=np.float32))
        if k == 1:  # <s>: -99 in the file, -inf in both models' tables
            want, got = want[np.isfinite(want)], got[np.isfinite(got)]
        np.testing.assert_array_equal(got, want)
        if k < arpa.order_:
            np.testing.assert_array_equal(np.sort(np.asarray(binary.log10_backoff[k - 1], dtype=np.float32)),
                                          np.sort(np.asarray(arpa.log10_backoff_[k - 1], dtype=np.float32)))
    a = Model(toy["arpa"])
    b = Model(toy["files"][name])
    lp_a, n_a, o_a = _scores(a, toy["lines"])
    lp_b, n_b, o_b = _scores(b, toy["lines"])
    np.testing.assert_allclose(lp_b, lp_a, atol=2e-6)  # float32 storage of 7-digit values
    assert (n_a == n_b).all() and (o_a == o_b).all()


@pytest.mark.parametrize("name", list(VARIANTS))
def test_every_variant_scores_as_the_kenlm_module_does(toy, name):
    kenlm = pytest.importorskip("kenlm", reason="the kenlm module (pip install kenlm-ex) is the reference")
    path = str(toy["files"][name])
    ours, ref = Model(path), kenlm.Model(path)
    lp_a, n_a, o_a = _scores(ours, toy["lines"])
    lp_b, n_b, o_b = _scores(ref, toy["lines"])
    np.testing.assert_allclose(lp_a, lp_b, atol=1e-6)  # kenlm sums its float32 values in float32
    assert (n_a == n_b).all() and (o_a == o_b).all()
    # KenLM finds words by their MurmurHash64A: every word of the file's vocabulary is found.
    assert all(w in ref for w in ours.lm.vocab_.itos_[4:])
    # The state API, word by word.
    from ngramlm import State

    a_in, a_out, k_in, k_out = State(), State(), kenlm.State(), kenlm.State()
    for line in toy["lines"][:40]:
        ours.BeginSentenceWrite(a_in)
        ref.BeginSentenceWrite(k_in)
        for w in line.split() + ["</s>"]:
            x = ours.BaseScore(a_in, w, a_out)
            y = ref.BaseScore(k_in, w, k_out)
            assert x == pytest.approx(y, abs=1e-6), (line, w)
            a_in, a_out = a_out, a_in
            k_in, k_out = k_out, k_in


@pytest.mark.parametrize("name", list(VARIANTS))
def test_vectorised_scoring_equals_the_state_api(toy, name):
    """`ngramlm ppl` (token_scores over the whole text) and Model.full_scores agree per token."""
    lm = load_any(toy["files"][name])
    enc, oov = lm.encode([line.split() for line in toy["lines"]])
    s = lm.token_scores(enc, oov=oov)
    lp, n, _ = _scores(Model(toy["files"][name]), toy["lines"])
    np.testing.assert_allclose(s.log10_prob, lp, atol=1e-9)
    assert (s.ngram_length == n).all()


@pytest.mark.parametrize("name", ["probing", "trie-q8-b8-a22"])
def test_next_word_distribution_sums_to_one(toy, name):
    lm = load_any(toy["files"][name])
    words = toy["lines"][0].split()
    for ctx in ([], ["<s>"], ["<s>"] + words[:2], words[:3]):
        p = lm.next_probs(ctx)
        # float32 values, quantised ones too: the back-off weights renormalise what the file holds
        # only up to the bins' rounding.
        assert p.sum() == pytest.approx(1.0, abs=0.02 if "q" in name else 1e-4), ctx


def test_quantised_values_are_bin_centres(toy):
    binary = read_trie_tables(toy["files"]["trie-q5-b3-a255"])
    for k in range(2, binary.order + 1):
        assert len(np.unique(binary.log10_prob[k - 1])) <= 2 ** 5
        if k < binary.order:
            assert len(np.unique(binary.log10_backoff[k - 1])) <= 2 ** 3
    # Unigrams are never quantised.
    arpa = load_any(toy["arpa"])
    assert len(np.unique(binary.log10_prob[0])) > 2 ** 5
    assert np.isfinite(arpa.log10_prob_[0][3:]).sum() == np.isfinite(binary.log10_prob[0][3:]).sum()


def test_quantiser_bins_and_encoding_by_hand():
    # 8 values into 4 bins of 2: the centres are the pair means; each value encodes to its pair.
    v = np.array([-4, -3.5, -3, -2.5, -2, -1.5, -1, -0.5], dtype=np.float32)
    c = _make_bins(v, 4)
    assert c.tolist() == [-3.75, -2.75, -1.75, -0.75]
    assert _encode(c, v, 0).tolist() == [0, 0, 1, 1, 2, 2, 3, 3]
    # Below the first centre, above the last, and the midpoint (ties go up, as KenLM's `<`).
    assert _encode(c, np.array([-9, 0, -3.25], dtype=np.float32), 0).tolist() == [0, 3, 1]
    # More bins than values: the empty buckets repeat the centre before them (-inf first).
    c2 = _make_bins(np.array([-1.0], dtype=np.float32), 3)
    assert c2[0] == -np.inf and c2[1] == -np.inf and c2[2] == -1.0


def test_export_arpa_from_a_trie_round_trips(toy, tmp_path, run_cli):
    out = tmp_path / "back.arpa"
    code, so, se = run_cli("export-arpa", str(toy["files"]["trie"]), str(out))
    assert code == 0, se
    a, b = Model(toy["arpa"]), Model(out)
    lp_a, n_a, _ = _scores(a, toy["lines"])
    lp_b, n_b, _ = _scores(b, toy["lines"])
    np.testing.assert_allclose(lp_b, lp_a, atol=2e-6)
    assert (n_a == n_b).all()


def test_probing_refuses_export_with_the_reason(toy, tmp_path, run_cli):
    code, so, se = run_cli("export-arpa", str(toy["files"]["probing"]), str(tmp_path / "x.arpa"))
    assert code != 0
    assert "hashes" in se and "trie" in se and str(toy["files"]["probing"]) in se
    assert not (tmp_path / "x.arpa").exists()


# ---------------------------------------------------------------------------------------- errors

def test_pruned_models_get_blanks_and_still_score_the_same(toy, tmp_path):
    """An entropy-pruned model keeps n-grams whose suffixes are gone; the binary gets KenLM's blanks,
    and the kenlm module and ngramlm score it as the ARPA (every variant)."""
    from ngramlm import NgramLM
    from ngramlm.io.arpa import write_arpa
    from ngramlm.kenlm.format import read_header
    from ngramlm.tools.prune_size import prune_scores, prune_with, search_threshold

    lm = toy["lm"]
    total = sum(lm.n_ngrams_[1:])
    found = search_threshold(prune_scores(lm), lambda keep: sum(int(m.sum()) for m in keep[1:]) <= 0.1 * total,
                             what="10 %")
    pruned = NgramLM.from_tables(prune_with(lm, found.keep), order=4, smoothing="mkn")
    arpa = tmp_path / "pruned.arpa"
    write_arpa(pruned, arpa)
    a_lp, a_n, _ = _scores(Model(arpa), toy["lines"])
    for name, opts in VARIANTS.items():
        path = tmp_path / f"pruned.{name}.bin"
        write_binary(pruned, path, opts)
        if opts.kind == "trie":
            assert sum(read_header(path).counts) > sum(pruned.n_ngrams_)  # the blanks
        lp, _, _ = _scores(Model(path), toy["lines"])
        tol = 2e-6 if not opts.prob_bits else (0.5 if opts.prob_bits >= 8 else 1.5)  # quantisation error
        assert np.abs(lp - a_lp).max() < tol, name
        kenlm = pytest.importorskip("kenlm")
        ref = kenlm.Model(str(path))
        k_lp = np.array([x[0] for line in toy["lines"] for x in ref.full_scores(line)])
        np.testing.assert_allclose(lp, k_lp, atol=1e-6)


def test_truncated_and_unfinished_files_give_clear_errors(toy, tmp_path):
    data = toy["files"]["trie-q8-b8-a22"].read_bytes()
    cut = tmp_path / "cut.bin"
    cut.write_bytes(data[: len(data) // 2])
    with pytest.raises(InputError, match="truncated") as e:
        Model(cut)
    assert str(cut) in str(e.value)
    unfinished = tmp_path / "unfinished.bin"
    unfinished.write_bytes(b"mmap lm http://kheafield.com/code incomplete\n" + data[100:])
    with pytest.raises(InputError, match="did not finish building"):
        load_any(unfinished)
    old = tmp_path / "v4.bin"
    old.write_bytes(data.replace(MAGIC, MAGIC.replace(b"version 5", b"version 4"), 1))
    with pytest.raises(InputError, match="version 4"):
        load_any(old)
    bad = tmp_path / "bad.bin"
    bad.write_bytes(data[:56] + struct.pack("<f", 1.5) + data[60:])
    with pytest.raises(InputError, match="test values"):
        load_any(bad)


def test_build_binary_cli_options_and_errors(toy, tmp_path, run_cli):
    out = tmp_path / "m.bin"
    code, so, se = run_cli("build-binary", "trie", "-q", "8", "-a", "22", str(toy["arpa"]), str(out), "--json")
    assert code == 0, se
    assert read_header(out).model_type == 5
    assert (out.read_bytes() == toy["files"]["trie-q8-b8-a22"].read_bytes())  # -b defaults to -q
    code, so, se = run_cli("build-binary", str(toy["arpa"]), str(tmp_path / "p.bin"))
    assert code == 0 and read_header(tmp_path / "p.bin").kind == "probing"  # build_binary's default
    for args, msg in ((["trie", "-b", "4"], "needs -q"), (["probing", "-q", "8"], "only in the trie"),
                      (["probing", "-p", "1.0"], "must be > 1.0"), (["quux"], "takes [probing|trie]")):
        code, so, se = run_cli("build-binary", *args, str(toy["arpa"]), str(tmp_path / "e.bin"))
        assert code != 0 and msg in se, (args, se)
        assert not (tmp_path / "e.bin").exists()


def test_a_trie_converts_to_probing(toy, tmp_path, run_cli):
    p = tmp_path / "from-trie.probing.bin"
    code, so, se = run_cli("build-binary", "probing", str(toy["files"]["trie"]), str(p))
    assert code == 0, se
    assert p.read_bytes() != b""
    a, b = Model(toy["files"]["trie"]), Model(p)
    assert _scores(a, toy["lines"])[0] == pytest.approx(_scores(b, toy["lines"])[0], abs=1e-6)


def test_ppl_on_a_binary_matches_the_arpa(toy, run_cli):
    text = toy["dir"] / "test.txt"
    text.write_text("\n".join(toy["lines"][:150]) + "\n")
    got = {}
    for name in ("arpa", "probing", "trie"):
        path = toy["arpa"] if name == "arpa" else toy["files"][name]
        code, so, se = run_cli("ppl", str(path), str(text), "--json")
        assert code == 0, se
        got[name] = json.loads(so)["ppl"]
    assert got["probing"] == pytest.approx(got["arpa"], rel=1e-5)
    assert got["trie"] == pytest.approx(got["arpa"], rel=1e-5)
    assert math.isfinite(got["arpa"])


needs_ext = pytest.mark.skipif(not __import__("ngramlm.accel", fromlist=["fast"]).fast,
                               reason="the compiled extension is disabled: tries are decoded instead")


@needs_ext
@pytest.mark.parametrize("name", [n for n in VARIANTS if n != "probing"])
def test_a_trie_is_scored_in_place_as_its_decoded_tables_score(toy, name):
    """load_any maps a trie and searches it where it lies (TrieScorer); with ngrams=True it decodes
    every n-gram.  Both give the same numbers per token, and the same next-word distribution, with
    and without <s> in view."""
    from ngramlm.kenlm.trie import TrieScorer

    path = toy["files"][name]
    fast, full = load_any(path), load_any(path, ngrams=True)
    assert isinstance(fast, TrieScorer) and not isinstance(full, TrieScorer)
    assert len(full.keys_[1]) == full.n_ngrams_[1] > 0
    sents = [line.split() for line in toy["lines"]]
    a, b = _token_scores(fast, sents), _token_scores(full, sents)
    np.testing.assert_allclose(a.log10_prob, b.log10_prob, atol=1e-6)  # float32 sums against float64
    assert (a.ngram_length == b.ngram_length).all()
    words = sents[0]
    for ctx in ([], ["<s>"], ["<s>"] + words[:2], words[:3], words[:6]):
        np.testing.assert_allclose(fast.next_probs(ctx), full.next_probs(ctx), rtol=1e-5, atol=1e-12)
        assert fast.log10_prob(words[3], ctx) == pytest.approx(full.log10_prob(words[3], ctx), abs=1e-6)


def _token_scores(lm, sents):
    enc, oov = lm.encode(sents)
    return lm.token_scores(enc, oov=oov)


@needs_ext
def test_loading_a_trie_decodes_nothing(toy, tmp_path):
    """Scoring a trie allocates no tables: loading costs the vocabulary (its words, dict and id map:
    ~160 bytes a word on PTB's 10,000), not the n-grams (the decoded tables: 250 MB for PTB's 5-gram)."""
    import tracemalloc

    path = toy["files"]["trie"]
    tracemalloc.start()
    lm = load_any(path)
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    decoded = load_any(path, ngrams=True)
    table_bytes = sum(a.nbytes for a in decoded.keys_) + sum(a.nbytes for a in decoded.log10_prob_)
    assert peak < 400 * len(lm.vocab_) + 50_000 < table_bytes, (peak, len(lm.vocab_), table_bytes)
    assert lm.info_["kenlm_type"] == "trie"


@needs_ext
def test_a_trie_scored_in_place_refuses_to_list_its_ngrams_with_the_fix(toy):
    lm = load_any(toy["files"]["trie-q8-b8-a22"])
    with pytest.raises(InputError, match="ngrams=True"):
        lm._find(2, np.array([5], dtype=np.int64))
    assert lm.info_["quantization_bits"] == {"prob": 8, "backoff": 8}
    assert lm.info_["pointer_compression_bits"] == 22


@needs_ext
@pytest.mark.parametrize("name", ["trie", "trie-q8-b8-a22"])
def test_a_damaged_trie_never_crashes_the_search(toy, tmp_path, name):
    """The search reads child pointers from the file: random bytes over the deeper orders, and child
    ranges that run past the next order's array, give wrong numbers and no crash (a child process,
    where a crash would show as a signal; ranges past an array are emptied as they are read -- a
    pointer's bit width lets it overshoot by up to the array's size, past the end of a big file);
    damaged unigram pointers are refused at load with the file's name."""
    import subprocess
    import sys

    from ngramlm.kenlm.read import trie_structure

    src = toy["files"][name]
    with BinaryFile(src) as bf:
        L, _ = trie_structure(bf)
    data = bytearray(src.read_bytes())
    rng = np.random.default_rng(3)
    for m in L.middles + [L.longest]:  # every order's entries (their headers and tables stay)
        size = ((1 + m["entries"]) * m["total_bits"] + 7) // 8
        data[m["base"]:m["base"] + size] = rng.integers(0, 256, size, dtype=np.uint8).tobytes()
    m = L.middles[-1]  # and the last middle order's child ranges wide, running past the end of the file
    top = (1 << m["inline_bits"]) - 1
    for i in range(m["entries"] + 1):
        at = m["base"] * 8 + i * m["total_bits"] + m["total_bits"] - m["inline_bits"]
        word = int.from_bytes(data[at // 8:at // 8 + 8], "little")
        mask = ((1 << m["inline_bits"]) - 1) << (at % 8)
        value = min(top, i * top // max(1, m["entries"] // 4))
        data[at // 8:at // 8 + 8] = ((word & ~mask) | (value << (at % 8))).to_bytes(8, "little")
    bad = tmp_path / "damaged.bin"
    bad.write_bytes(bytes(data))
    text = tmp_path / "text.txt"
    text.write_text("\n".join(toy["lines"][:60]) + "\n")
    code = ("import sys; from ngramlm.loading import load_any; from ngramlm import Model; "
            "lm = load_any(sys.argv[1]); sents = [l.split() for l in open(sys.argv[2])]; "
            "enc, oov = lm.encode(sents); lm.token_scores(enc, oov=oov); m = Model(sys.argv[1]); "
            "[m.score(' '.join(s)) for s in sents]; print('scored')")
    r = subprocess.run([sys.executable, "-c", code, str(bad), str(text)], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0 and "scored" in r.stdout, (r.returncode, r.stderr[-500:])
    data = bytearray(src.read_bytes())
    struct.pack_into("<Q", data, L.unigram_offset + 16 * 5 + 8, 2 ** 40)  # the 6th unigram's first child
    bad.write_bytes(bytes(data))
    with pytest.raises(InputError, match="unigram pointers are inconsistent"):
        load_any(bad)


def test_a_damaged_trie_fails_export_with_one_line(toy, tmp_path, run_cli):
    """Decoding stops at the first inconsistent pointer: the error names the file, the output is not
    written, and no second error from unmapping the file hides the first."""
    from ngramlm.kenlm.read import trie_structure

    src = toy["files"]["trie"]
    with BinaryFile(src) as bf:
        L, _ = trie_structure(bf)
    data = bytearray(src.read_bytes())
    struct.pack_into("<Q", data, L.unigram_offset + 16 * 5 + 8, 2 ** 40)
    bad = tmp_path / "damaged.bin"
    bad.write_bytes(bytes(data))
    code, _, err = run_cli("export-arpa", bad, "-o", tmp_path / "out.arpa")
    assert code == 2 and "pointers are inconsistent" in err and "Traceback" not in err, err
    assert not (tmp_path / "out.arpa").exists()


@needs_ext
def test_values_through_the_arpa_text_by_arithmetic_equal_the_text():
    """through_text7 computes strtof(printf('%.7g', x)) by arithmetic where that is provably exact and
    formats the rest: bit for bit the text's float on log probabilities, back-offs, 7-digit decimals
    and their neighbours, exact binary ties, powers of ten and their neighbours, and the specials."""
    from ngramlm import accel

    rng = np.random.default_rng(11)
    d = np.round(-rng.random(100_000) * 5, 6)
    p10 = 10.0 ** np.arange(-20, 21)
    k = rng.integers(1, 2 ** 20, 50_000)
    x = np.concatenate([-rng.random(100_000) * 8, -10 ** rng.uniform(-9, 2, 50_000), rng.normal(0, 1, 50_000),
                        d, np.nextafter(d, 0), np.nextafter(d, -10), -k / 2.0 ** rng.integers(1, 30, 50_000),
                        p10, -p10, np.nextafter(p10, 0), np.nextafter(p10, 1e30),
                        [0.0, -0.0, 0.5, -0.25, -99.0, np.inf, -np.inf, 1e22, 3.4e38, 3.5e38, 9999999.5, 1e-45]])
    fast, text = accel.fast.through_text7(x), accel.fast.through_text7(x, False)
    np.testing.assert_array_equal(fast.view(np.uint32), text.view(np.uint32))
    assert fast[-7] == np.inf and fast[-6] == -99.0  # -inf is ARPA's -99


@needs_ext
def test_quantiser_encoding_in_c_equals_numpys(monkeypatch):
    """quant_encode (one pass in C) and the numpy path of _encode pick the same bin for every value:
    between centres, exactly halfway (ties go up), below the first, above the last, at -0.0 and NaN."""
    from ngramlm import accel

    rng = np.random.default_rng(5)
    probs = np.sort(rng.normal(-2, 1, 256).astype(np.float32))  # probability bins: all sorted
    backs = probs.copy()
    backs[:2] = (-0.0, 0.0)  # back-off bins: KenLM's two flags first, the sorted centres after
    halfway = ((probs[3:-1] + probs[4:]) / 2).astype(np.float32)
    values = np.concatenate([rng.normal(-2, 1.5, 200_000).astype(np.float32), halfway, probs,
                             np.array([-50, 50, -0.0, np.nan], dtype=np.float32)])
    for centres, reserved in ((probs, 0), (backs, 2)):
        fast = _encode(centres, values, reserved)
        monkeypatch.setattr(accel, "fast", None)
        slow = _encode(centres, values, reserved)
        monkeypatch.undo()
        np.testing.assert_array_equal(fast, slow)


def test_binary_file_keeps_file_mapped_not_read(toy):
    with BinaryFile(toy["files"]["probing"]) as bf:
        assert isinstance(bf.buf, memoryview) and bf.header.kind == "probing"


# ---------------------------------------------------------------------------------------- PTB

@pytest.mark.slow
@pytest.mark.parametrize("name", ["probing", "trie-q8-b8-a22"])
def test_ptb_5gram_binaries_score_as_kenlm(shared_corpora, tmp_path, name):
    """The PTB MKN 5-gram written as a KenLM binary: the kenlm module and ngramlm agree per token on
    PTB test, and the unquantised probing file gives the ARPA's perplexity."""
    kenlm = pytest.importorskip("kenlm", reason="the kenlm module (pip install kenlm-ex) is the reference")
    from corpora import load_corpus, prepare
    from ngramlm import NgramLM

    ds = prepare(load_corpus("ptb", data_dir=shared_corpora))
    lm = NgramLM(order=5, smoothing="mkn").fit(ds["train"], vocab=ds.vocab)
    path = tmp_path / f"ptb5.{name}.bin"
    write_binary(lm, path, VARIANTS[name])
    test = [" ".join(s) for s in ds.corpus.sentences("test")]
    ours, ref = Model(path), kenlm.Model(str(path))
    lp_a, n_a, o_a = _scores(ours, test[:400])
    lp_b, n_b, o_b = _scores(ref, test[:400])
    np.testing.assert_allclose(lp_a, lp_b, atol=2e-6)
    assert (n_a == n_b).all() and (o_a == o_b).all()
    if accel.fast is not None:  # ngramlm.kenlm: kenlm's sentence totals to the bit, on every test sentence
        import ngramlm.kenlm

        light = ngramlm.kenlm.Model(path)
        assert [light.score(s) for s in test] == [ref.score(s) for s in test]
    binary = load_any(path)
    enc, oov = binary.encode([s.split() for s in test])
    ppl_bin = binary.perplexity_report(enc, oov=oov).ppl
    enc_a, oov_a = lm.encode([s.split() for s in test])
    ppl_arpa = lm.perplexity_report(enc_a, oov=oov_a).ppl
    assert ppl_bin == pytest.approx(ppl_arpa, rel=1e-5 if name == "probing" else 0.02)


# ---------------------------------------------------------------------------------------- KenLM's own files

KENLM_FILES = {"toy3s.probing.bin": BinaryOptions(kind="probing"), "toy3s.trie.bin": BinaryOptions(),
               "toy3s.trie-q8-b8-a22.bin": BinaryOptions(prob_bits=8, backoff_bits=8, array_bits=22),
               # Entropy-pruned to 10 %: 42 bigrams are missing under kept trigrams, so both of
               # build_binary's structures insert "blank" n-grams.
               "toy3s-pruned.probing.bin": BinaryOptions(kind="probing"),
               "toy3s-pruned.trie-q8-b8-a22.bin": BinaryOptions(prob_bits=8, backoff_bits=8, array_bits=22)}


def _arpa_of(name: str) -> str:
    return "toy3s-pruned.arpa.gz" if name.startswith("toy3s-pruned") else "toy3s.arpa.gz"


@pytest.fixture(scope="module")
def kenlm_dir():
    from pathlib import Path

    return Path(__file__).parent / "data" / "kenlm_bin"


@pytest.mark.parametrize("name", list(KENLM_FILES))
def test_build_binary_writes_the_bytes_kenlm_writes(kenlm_dir, tmp_path, name):
    """build_binary's file (tests/data/kenlm_bin) and ours from the same ARPA are byte for byte equal."""
    ours = tmp_path / name
    write_binary(load_any(kenlm_dir / _arpa_of(name)), ours, KENLM_FILES[name])
    want = (kenlm_dir / name).read_bytes()
    got = ours.read_bytes()
    assert len(got) == len(want)
    if got != want:
        first = next(i for i, (a, b) in enumerate(zip(got, want)) if a != b)
        pytest.fail(f"{name}: first differing byte at offset {first}")


@pytest.mark.parametrize("name", list(KENLM_FILES))
def test_kenlms_files_read_as_their_arpa(kenlm_dir, name):
    """Files build_binary wrote score as the ARPA they came from (quantised: within the bins' error),
    and with the same matched lengths."""
    from corpora import load_corpus, prepare
    from corpora.toy import ToyConfig

    ds = prepare(load_corpus("toy", toy_config=ToyConfig(n_train_tokens=8000, n_valid_tokens=500,
                                                          n_test_tokens=1000)))
    lines = [" ".join(s) for s in ds.corpus.sentences("test")][:100] + ["zzqx " + "a b", ""]
    lp_a, n_a, o_a = _scores(Model(kenlm_dir / _arpa_of(name)), lines)
    lp_b, n_b, o_b = _scores(Model(kenlm_dir / name), lines)
    assert (o_a == o_b).all()
    if "pruned" not in name:
        assert (n_a == n_b).all()  # (a blank n-gram is matched where the ARPA backs off: same probability)
    if "q8" in name:
        # 256 equal-count bins: a value in a wide tail bin moves by up to a few tenths; the total barely.
        assert np.abs(lp_a - lp_b).max() < 0.5 and abs(lp_a.sum() - lp_b.sum()) < 0.01 * abs(lp_a.sum())
    else:
        np.testing.assert_allclose(lp_b, lp_a, atol=2e-6)


# ---------------------------------------------------------------------------------------- a real decoder

def test_pyctcdecode_decodes_the_same_with_our_binary_as_with_the_arpa(toy):
    """pyctcdecode (a real kenlm client) loads the binaries this toolkit writes and, with the same
    language model in ARPA form, finds the same transcripts with the same scores."""
    pyctcdecode = pytest.importorskip("pyctcdecode", reason="pyctcdecode (in the test extras) is the client")
    pytest.importorskip("kenlm", reason="pyctcdecode loads language models with the kenlm module")
    rng = np.random.default_rng(0)
    chars = sorted({c for line in toy["lines"][:150] for c in line if c != " "})
    labels = [""] + [" "] + chars  # "" is the CTC blank
    frames = []
    for line in toy["lines"][:3]:
        for c in line[:60]:
            row = rng.normal(0, 1.0, len(labels))
            row[labels.index(c)] += 3.0  # the right character is likely, not certain
            frames += [row, rng.normal(0, 1.0, len(labels)) + np.eye(len(labels))[0] * 3.0]
    logits = np.array(frames, dtype=np.float32)
    logits = logits - np.log(np.exp(logits).sum(1, keepdims=True))
    results = {}
    # The word list a hub model ships beside its binary (pyctcdecode reads it from an ARPA itself).
    unigrams = [w for w in toy["lm"].vocab_.itos_ if not w.startswith("<")]
    for name in ("arpa", "probing", "trie-q8-b8-a22"):
        path = toy["arpa"] if name == "arpa" else toy["files"][name]
        dec = pyctcdecode.build_ctcdecoder(labels, kenlm_model_path=str(path), unigrams=unigrams, alpha=0.5,
                                           beta=1.0)
        beams = dec.decode_beams(logits, beam_width=20)
        results[name] = [(b[0], round(float(b[-1]), 3)) for b in beams[:5]]
    assert results["probing"] == results["arpa"]  # unquantised: the same numbers
    assert results["trie-q8-b8-a22"][0][0] == results["arpa"][0][0]  # quantised: the same best transcript
    assert results["arpa"][0][0].startswith("chex giga")  # the noisy frames' first words


# ---------------------------------------------------------------------------------------- -s: no <s> or </s>

# nomarkers.arpa lists neither <s> nor </s>; build_binary -s wrote nomarkers.{trie,probing}.bin from it.
# KenLM then reads both markers as <unk>: p(</s> | b) is p(<unk> | b) = -0.4 (the bigram "b <unk>"), and
# p(</s> | a) = p(<unk>) + b(a) = -1.0 - 0.2; the first word's context is <unk> (back-off 0).
NOMARKER_SCORES = {"a b": [-0.5, -0.3, -0.4], "c a": [-0.9, -0.5 - 0.3, -1.0 - 0.2], "b": [-0.6, -0.4],
                   "<unk> b c a": [-1.0, -0.6, -0.9 - 0.1, -0.5 - 0.3, -1.2]}


def test_a_model_without_sentence_markers_needs_dash_s(kenlm_dir, tmp_path):
    model = load_any(kenlm_dir / "nomarkers.arpa")
    with pytest.raises(InputError, match="pass -s"):
        write_binary(model, tmp_path / "x.bin", BinaryOptions(kind="trie"))
    assert not (tmp_path / "x.bin").exists()
    for kind in ("trie", "probing"):
        ours = tmp_path / f"{kind}.bin"
        write_binary(model, ours, BinaryOptions(kind=kind, allow_missing_markers=True))
        assert ours.read_bytes() == (kenlm_dir / f"nomarkers.{kind}.bin").read_bytes(), kind


@pytest.mark.parametrize("kind", ["trie", "probing"])
def test_files_without_sentence_markers_score_as_kenlm_reads_them(kenlm_dir, kind):
    m = Model(str(kenlm_dir / f"nomarkers.{kind}.bin"))
    for sentence, want in NOMARKER_SCORES.items():
        got = [s[0] for s in m.full_scores(sentence)]
        assert got == pytest.approx(want, abs=1e-6), (kind, sentence)
        assert m.score(sentence) == pytest.approx(sum(want), abs=1e-5)


def test_cli_build_binary_dash_s(run_cli, kenlm_dir, tmp_path):
    out = tmp_path / "m.bin"
    code, _, err = run_cli("build-binary", "trie", kenlm_dir / "nomarkers.arpa", out)
    assert code == 2 and "pass -s" in err and not out.exists()
    code, _, err = run_cli("build-binary", "-s", "trie", kenlm_dir / "nomarkers.arpa", out)
    assert code == 0, err
    assert out.read_bytes() == (kenlm_dir / "nomarkers.trie.bin").read_bytes()


def test_train_writes_a_kenlm_binary_by_its_name(tmp_path, run_cli):
    """`train -o NAME.binary` (or .klm) writes what decoders load with kenlm.Model: a probing binary, byte
    for byte `build-binary` of the same model's ARPA file, in memory and out of core (where a note says the
    binary's step is past --memory); kenlm scores it as ngramlm scores the ARPA file."""
    from corpora.testing import toy_training_lines

    lines = toy_training_lines(40_000)
    text = tmp_path / "train.txt"
    text.write_text("\n".join(lines) + "\n", encoding="utf-8")
    code, _, err = run_cli("train", text, "--order", 4, "-o", tmp_path / "m.arpa")
    assert code == 0, err
    code, _, err = run_cli("build-binary", tmp_path / "m.arpa", tmp_path / "ref.binary")
    assert code == 0, err
    ref = (tmp_path / "ref.binary").read_bytes()
    for name, extra in (("m.binary", ()), ("m.klm", ()), ("disk.binary", ("--memory", "70M", "--estimation", "disk"))):
        code, _, err = run_cli("train", text, "--order", 4, *extra, "-o", tmp_path / name)
        assert code == 0, err
        assert (tmp_path / name).read_bytes() == ref, name
        assert ("note: the KenLM binary is laid out from the whole model in memory" in err) == bool(extra)
    assert read_header(tmp_path / "m.binary").kind == "probing"
    kenlm = pytest.importorskip("kenlm", reason="the kenlm module (pip install kenlm-ex) is the reference")
    theirs, ours = kenlm.Model(str(tmp_path / "m.klm")), Model(str(tmp_path / "m.arpa"))
    for line in lines[100:140]:
        assert theirs.score(line) == pytest.approx(ours.score(line), abs=1e-4)
