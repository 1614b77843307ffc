"""corpora.parallel: reading, splitting, tokenizing and encoding sentence pairs (fra-eng).

Tests on a small TSV in tmp_path run anywhere; the ones on the real fra-eng file skip
when the shared corpora (``$NGRAMLM_TEST_CORPORA``) do not hold it.
"""
from __future__ import annotations

import gzip
import re
from collections import Counter

import numpy as np
import pytest

from corpora import InputError, TokenizerSpec, load_corpus, make_tokenizer
from corpora.parallel import ParallelCorpus, ParallelInfo, load_parallel, parallel_names, read_pairs, split_pairs
from corpora.registry import REGISTRY
from corpora.vocab import BOS_ID, EOS_ID, PAD_ID, UNK_ID

FRA_ENG_SHA256 = "d952b56a181da5270b7bb4ded3f3bbe61e67a9b1de0e0fbc1d46438c71fb55a7"
ATTRIB = "CC-BY 2.0 (France) Attribution: tatoeba.org #1 (a) & #2 (b)"


@pytest.fixture(scope="module")
def fra_eng_root(shared_corpora):
    if not (shared_corpora / "fra-eng" / "fra-eng.tsv").is_file():
        pytest.skip(f"fra-eng/fra-eng.tsv not found in {shared_corpora} (set NGRAMLM_TEST_CORPORA)")
    return shared_corpora


@pytest.fixture(scope="module")
def fra_eng(fra_eng_root):
    return load_parallel("fra-eng", data_dir=fra_eng_root)


def _write_tsv(folder, lines, name="fra-eng.tsv"):
    d = folder / "fra-eng"
    d.mkdir(parents=True, exist_ok=True)
    p = d / name
    p.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    return p


def _small_lines(n=20):
    return [f"I saw {i} cats.\tJ'ai vu {i} chats\u202f!\t{ATTRIB}" for i in range(n)]


# ---------------------------------------------------------------------------- registry
def test_fra_eng_is_registered_as_parallel():
    spec = REGISTRY["fra-eng"]
    assert spec.parallel == ParallelInfo(filename="fra-eng.tsv", src_lang="en", tgt_lang="fr")
    assert spec.parallel.holdout == (0.1, 0.1) and spec.parallel.min_count == 2
    assert spec.tokenizer == TokenizerSpec(kind="punct", lower=True)
    assert spec.files == {"train": "fra-eng.tsv", "valid": "fra-eng.tsv", "test": "fra-eng.tsv"}
    (remote,) = spec.downloads
    assert remote.sha256 == FRA_ENG_SHA256 and remote.head_lines == 5000 and remote.filename == "fra-eng.tsv"
    assert remote.url.endswith("/b20755b1c81f2d82526ab967dbc8ec6465f22f14/data/eng-fra.txt")
    assert parallel_names() == ["fra-eng"]
    assert all(REGISTRY[n].parallel is None for n in REGISTRY if n != "fra-eng")


# ---------------------------------------------------------------------------- read_pairs
def test_read_pairs_keeps_two_columns_strips_and_skips_blank_lines(tmp_path):
    p = tmp_path / "p.tsv"
    p.write_text(f"Go.\tVa !\t{ATTRIB}\n\n  Hi. \tSalut.\r\n", encoding="utf-8")
    assert read_pairs(p) == [("Go.", "Va !"), ("Hi.", "Salut.")]
    assert read_pairs(p, src_column=1, tgt_column=0) == [("Va !", "Go."), ("Salut.", "Hi.")]
    gz = tmp_path / "p.tsv.gz"
    gz.write_bytes(gzip.compress(p.read_bytes()))
    assert read_pairs(gz) == read_pairs(p)


def test_read_pairs_bad_inputs_name_file_and_line(tmp_path):
    p = tmp_path / "bad.tsv"
    p.write_text("Go.\tVa !\nHi.\tSalut !\nno tab on this line\nOK.\tD'accord.\n", encoding="utf-8")
    with pytest.raises(InputError) as info:
        read_pairs(p)
    assert info.value.path == str(p) and info.value.line == 3
    assert f"{p}:3: 1 tab-separated column, expected at least 2" in str(info.value)
    assert "fix:" in str(info.value)

    p.write_text("Go.\t\tattribution\n", encoding="utf-8")
    with pytest.raises(InputError, match=r"bad.tsv:1: the target sentence \(column 2\) is empty"):
        read_pairs(p)
    p.write_text("", encoding="utf-8")
    with pytest.raises(InputError, match="bad.tsv: file is empty"):
        read_pairs(p)
    p.write_bytes(b"Go.\tVa !\nCaf\xe9.\tCaf\xe9.\n")  # latin-1, not UTF-8
    with pytest.raises(InputError) as info:
        read_pairs(p)
    assert info.value.line == 2 and "not valid UTF-8" in str(info.value)
    with pytest.raises(InputError, match="no such file"):
        read_pairs(tmp_path / "missing.tsv")
    with pytest.raises(InputError, match="two different columns"):
        read_pairs(p, src_column=1, tgt_column=1)


# ---------------------------------------------------------------------------- split_pairs
def test_split_pairs_is_a_seeded_partition():
    items = list(range(1000))
    a = split_pairs(items, seed=0)
    assert [len(a[s]) for s in ("train", "valid", "test")] == [800, 100, 100]
    assert sorted(a["train"] + a["valid"] + a["test"]) == items  # every item in exactly one split
    assert a == split_pairs(items, seed=0)
    b = split_pairs(items, seed=1)
    assert set(a["test"]) != set(b["test"])
    # The permutation is numpy's default_rng(seed).permutation, cut train | valid | test.
    perm = np.random.default_rng(0).permutation(1000).tolist()
    assert a["train"] == perm[:800] and a["valid"] == perm[800:900] and a["test"] == perm[900:]
    assert a["test"] != items[-100:]


def test_split_pairs_small_and_bad_arguments():
    assert [len(v) for v in split_pairs(list(range(3))).values()] == [1, 1, 1]  # a positive share keeps >= 1
    assert [len(v) for v in split_pairs(list(range(10)), holdout=(0, 0.2)).values()] == [8, 0, 2]
    with pytest.raises(InputError, match="only 2 sentence pairs"):
        split_pairs([1, 2])
    for bad in ((0.5, 0.5), (-0.1, 0.1), (0.1,), "ab"):
        with pytest.raises(InputError, match="holdout"):
            split_pairs(list(range(10)), holdout=bad)
    for bad in (-1, 1.5, True, "0"):
        with pytest.raises(InputError, match="seed"):
            split_pairs(list(range(10)), seed=bad)


# ---------------------------------------------------------------------------- load_parallel on a small TSV
def test_load_small_tsv_tokenizes_and_splits(tmp_path):
    _write_tsv(tmp_path, _small_lines(20))
    pc = load_parallel("fra-eng", data_dir=tmp_path)
    assert isinstance(pc, ParallelCorpus)
    assert (pc.name, pc.src_lang, pc.tgt_lang, pc.seed) == ("fra-eng", "en", "fr", 0)
    assert pc.tokenizer == TokenizerSpec(kind="punct", lower=True)
    assert {s: d["pairs"] for s, d in pc.sizes().items()} == {"train": 16, "valid": 2, "test": 2}
    # raw is the seeded split of the file's pairs; pairs are raw, tokenized.
    assert pc.raw == split_pairs(read_pairs(tmp_path / "fra-eng" / "fra-eng.tsv"), seed=0)
    src, tgt = pc.raw["test"][0]
    i = int(src.split()[2])
    assert pc.pairs["test"][0] == (["i", "saw", str(i), "cats", "."], ["j'ai", "vu", str(i), "chats", "!"])
    assert pc.target_sentences("test") == [t for _, t in pc.pairs["test"]]
    assert pc.sizes()["train"] == {"pairs": 16, "src_tokens": 80, "tgt_tokens": 80}
    assert pc.src_vocab.tokenizer == pc.tokenizer and pc.tgt_vocab.tokenizer == pc.tokenizer
    assert "fra-eng" in repr(pc) and "en->fr" in repr(pc) and "train=16 pairs" in repr(pc)


def test_vocab_specials_ids_and_train_only_fit(tmp_path):
    # Put a word that occurs 4 times (above min_count) only in the test pairs: it must be <unk>.
    n = 20
    test_idx = set(split_pairs(list(range(n)), seed=0)["test"])
    lines = []
    for i in range(n):
        if i in test_idx:
            lines.append("Zebra zebra!\tZèbre zèbre\u202f!")
        else:
            lines.append("The cat.\tLe chat.")
    _write_tsv(tmp_path, lines)
    pc = load_parallel("fra-eng", data_dir=tmp_path)
    assert [src for src, _ in pc.raw["test"]] == ["Zebra zebra!"] * 2
    for v in (pc.src_vocab, pc.tgt_vocab):
        assert v.itos_[:4] == ["<pad>", "<s>", "</s>", "<unk>"]
        assert (v["<pad>"], v["<s>"], v["</s>"], v["<unk>"]) == (PAD_ID, BOS_ID, EOS_ID, UNK_ID) == (0, 1, 2, 3)
    # Train: 16 pairs "the cat ." (ties in count go in code-point order).
    assert pc.src_vocab.itos_[4:] == [".", "cat", "the"]
    assert pc.tgt_vocab.itos_[4:] == [".", "chat", "le"]
    assert "zebra" not in pc.src_vocab and "zèbre" not in pc.tgt_vocab and "!" not in pc.src_vocab
    src_ids, tgt_ids = pc.encode("test")
    assert [x.tolist() for x in src_ids] == [[UNK_ID, UNK_ID, UNK_ID]] * 2
    assert [y.tolist() for y in tgt_ids] == [[UNK_ID, UNK_ID, UNK_ID]] * 2
    # min_count counts train occurrences only (16 each): "zebra", 4 times in test, never counts.
    assert load_parallel("fra-eng", data_dir=tmp_path, min_count=16).src_vocab.itos_[4:] == [".", "cat", "the"]
    assert load_parallel("fra-eng", data_dir=tmp_path, min_count=17).src_vocab.itos_[4:] == []


def test_encode_shapes_and_dtype(tmp_path):
    _write_tsv(tmp_path, _small_lines(30))
    pc = load_parallel("fra-eng", data_dir=tmp_path)
    for split in ("train", "valid", "test"):
        src, tgt = pc.encode(split)
        assert len(src) == len(tgt) == len(pc.pairs[split])
        for x, y, (s, t) in zip(src, tgt, pc.pairs[split]):
            assert isinstance(x, np.ndarray) and x.dtype == np.int32 and y.dtype == np.int32
            assert x.shape == (len(s),) and y.shape == (len(t),)
            assert x.min() >= UNK_ID and y.min() >= UNK_ID  # no <pad>, <s>, </s> added
            assert pc.src_vocab.decode(x) == [w if w in pc.src_vocab else "<unk>" for w in s]
    with pytest.raises(InputError, match="no split 'dev'"):
        pc.encode("dev")


def test_seed_max_pairs_and_fingerprint(tmp_path):
    _write_tsv(tmp_path, _small_lines(50))
    a = load_parallel("fra-eng", data_dir=tmp_path, seed=0)
    assert a.fingerprint == load_parallel("fra-eng", data_dir=tmp_path, seed=0).fingerprint
    assert re.fullmatch("[0-9a-f]{64}", a.fingerprint)  # a SHA-256 in hex
    b = load_parallel("fra-eng", data_dir=tmp_path, seed=1)
    assert b.raw["test"] != a.raw["test"] and b.fingerprint != a.fingerprint
    assert load_parallel("fra-eng", data_dir=tmp_path, min_count=1).fingerprint != a.fingerprint
    whitespace = load_parallel("fra-eng", data_dir=tmp_path, tokenizer=TokenizerSpec())
    assert whitespace.pairs["train"][0][0][-1].endswith(".") and whitespace.fingerprint != a.fingerprint
    # max_pairs: the first N of the same shuffle, then split.
    c = load_parallel("fra-eng", data_dir=tmp_path, max_pairs=20)
    shuffled = [read_pairs(tmp_path / "fra-eng" / "fra-eng.tsv")[i] for i in np.random.default_rng(0).permutation(50)]
    assert c.raw["train"] + c.raw["valid"] + c.raw["test"] == shuffled[:20]
    assert {s: d["pairs"] for s, d in c.sizes().items()} == {"train": 16, "valid": 2, "test": 2}
    assert load_parallel("fra-eng", data_dir=tmp_path, max_pairs=10_000).raw == a.raw
    for bad in (0, -3, 2.5, True):
        with pytest.raises(InputError, match="max_pairs"):
            load_parallel("fra-eng", data_dir=tmp_path, max_pairs=bad)
    with pytest.raises(InputError, match="min_count"):
        load_parallel("fra-eng", data_dir=tmp_path, min_count=0)
    with pytest.raises(InputError, match="only 2 sentence pairs"):
        load_parallel("fra-eng", data_dir=tmp_path, max_pairs=2)


def test_data_dir_from_environment_and_tsv_by_path(tmp_path, monkeypatch):
    p = _write_tsv(tmp_path, _small_lines(10))
    monkeypatch.setenv("NGRAMLM_DATA_DIR", str(tmp_path))
    pc = load_parallel()  # "fra-eng" from $NGRAMLM_DATA_DIR
    assert pc.path == str(p) and sum(d["pairs"] for d in pc.sizes().values()) == 10
    by_path = load_parallel(str(p))
    assert by_path.name == "fra-eng.tsv" and (by_path.src_lang, by_path.tgt_lang) == ("src", "tgt")
    assert by_path.raw == pc.raw and by_path.tokenizer == TokenizerSpec(kind="punct", lower=True)


def test_missing_unknown_and_non_parallel_corpora(tmp_path, monkeypatch):
    monkeypatch.delenv("NGRAMLM_DATA_DIR", raising=False)
    with pytest.raises(InputError) as info:
        load_parallel("fra-eng", data_dir=tmp_path)
    msg = str(info.value)
    assert "corpus 'fra-eng' is not in the data directory" in msg
    assert str(tmp_path / "fra-eng" / "fra-eng.tsv") in msg
    assert "ngramlm corpora download fra-eng" in msg and "NGRAMLM_DATA_DIR" in msg
    with pytest.raises(InputError, match="unknown corpus 'nope'"):
        load_parallel("nope", data_dir=tmp_path)
    with pytest.raises(InputError, match="'ptb' is not a parallel corpus.*load_corpus"):
        load_parallel("ptb", data_dir=tmp_path)
    _write_tsv(tmp_path, [""])  # an empty TSV where the corpus should be
    with pytest.raises(InputError, match="fra-eng.tsv: file is empty"):
        load_parallel("fra-eng", data_dir=tmp_path)


def test_the_lm_loader_refuses_a_parallel_corpus(tmp_path, run_cli):
    with pytest.raises(InputError) as info:
        load_corpus("fra-eng", data_dir=tmp_path)
    msg = str(info.value)
    assert "'fra-eng' is a parallel corpus (en->fr sentence pairs)" in msg
    assert "ngramlm seq2seq" in msg and "load_parallel('fra-eng')" in msg
    _write_tsv(tmp_path, _small_lines(10))
    for args in (("stats", "fra-eng"), ("vocab", "stats", "fra-eng"), ("train", "fra-eng", "-o", tmp_path / "m.arpa")):
        code, _, err = run_cli(*args, "--data-dir", tmp_path)
        last = err.strip().splitlines()[-1]  # `train` prints its stage lines first
        assert code == 2 and last.startswith("Error: ") and "is a parallel corpus" in last, (args, err)


# ---------------------------------------------------------------------------- the real fra-eng
def test_fra_eng_first_lines_tokenize_as_d2l(fra_eng_root):
    pairs = read_pairs(fra_eng_root / "fra-eng" / "fra-eng.tsv")
    assert len(pairs) == 5000
    assert pairs[:2] == [("Go.", "Va !"), ("Go.", "Marche.")]
    assert pairs[5] == ("Run!", "Cours\u202f!")  # French "!" after a narrow no-break space
    tok = make_tokenizer(REGISTRY["fra-eng"].tokenizer)
    assert (tok(pairs[0][0]), tok(pairs[0][1])) == (["go", "."], ["va", "!"])
    assert tok(pairs[5][1]) == ["cours", "!"]
    assert tok(pairs[4997][1]) == ["je", "suis", "tellement", "désolé", "!"]


def test_fra_eng_splits(fra_eng_root, fra_eng):
    pc = fra_eng
    assert {s: d["pairs"] for s, d in pc.sizes().items()} == {"train": 4000, "valid": 500, "test": 500}
    pairs = read_pairs(fra_eng_root / "fra-eng" / "fra-eng.tsv")
    # Covering and disjoint: the splits are the file's pairs (as a multiset; a few pairs repeat in it).
    assert Counter(pc.raw["train"] + pc.raw["valid"] + pc.raw["test"]) == Counter(pairs)
    assert pc.raw == split_pairs(pairs, seed=0)
    # The pair at file line 1 is tokenized as d2l does, wherever the shuffle put it.
    where = [(s, i) for s in pc.raw for i, rp in enumerate(pc.raw[s]) if rp == ("Go.", "Va !")]
    assert len(where) == 1
    s, i = where[0]
    assert pc.pairs[s][i] == (["go", "."], ["va", "!"])
    # Shuffled: the file is sorted by English length, the test split is not its tail.
    assert pc.raw["test"] != pairs[-500:]
    test_lines = {rp for rp in pc.raw["test"]}
    assert len(test_lines & set(pairs[:1000])) > 50  # short sentences from the head are in test too
    mean_len = {s: np.mean([len(src) for src, _ in pc.pairs[s]]) for s in pc.pairs}
    assert abs(mean_len["test"] - mean_len["train"]) < 0.2
    other = load_parallel("fra-eng", data_dir=fra_eng_root, seed=1)
    assert other.raw["test"] != pc.raw["test"] and other.fingerprint != pc.fingerprint


def test_fra_eng_vocab_sizes_and_values(fra_eng_root, fra_eng):
    pc = fra_eng
    assert pc.sizes() == {"train": {"pairs": 4000, "src_tokens": 13798, "tgt_tokens": 15131},
                          "valid": {"pairs": 500, "src_tokens": 1737, "tgt_tokens": 1879},
                          "test": {"pairs": 500, "src_tokens": 1708, "tgt_tokens": 1894}}
    assert (len(pc.src_vocab), len(pc.tgt_vocab)) == (728, 1013)  # ids incl. the 4 specials, min_count 2
    assert pc.src_vocab.min_count == pc.tgt_vocab.min_count == 2
    assert pc.src_vocab.itos_[4:8] == [".", "i", "i'm", "?"]
    assert pc.tgt_vocab.itos_[4:8] == [".", "je", "!", "suis"]
    # Train-only: every test word not seen twice in the train sources is <unk>.
    train_counts = Counter(w for s, _ in pc.pairs["train"] for w in s)
    src_ids, _ = pc.encode("test")
    for ids, (s, _) in zip(src_ids, pc.pairs["test"]):
        assert ids.tolist() == [pc.src_vocab[w] if train_counts[w] >= 2 else UNK_ID for w in s]
    test_only = {w for s, _ in pc.pairs["test"] for w in s} - set(train_counts)
    assert test_only and all(pc.src_vocab[w] == UNK_ID for w in test_only)
    assert pc.fingerprint == load_parallel("fra-eng", data_dir=fra_eng_root).fingerprint  # stable across loads


def test_cli_list_and_info_show_the_parallel_corpus(fra_eng_root, run_cli):
    code, out, err = run_cli("corpora", "list", "--data-dir", fra_eng_root)
    assert code == 0, err
    row = next(line for line in out.splitlines() if line.startswith("fra-eng "))
    assert row.split()[1] == "yes" and "[parallel en->fr]" in row
    code, out, err = run_cli("corpora", "info", "fra-eng", "--data-dir", fra_eng_root)
    assert code == 0, err
    assert "en (column 1) -> fr (column 2)" in out and "tokenizer punct+lower" in out
    assert "keep the first 5,000 lines as fra-eng.tsv" in out and FRA_ENG_SHA256 in out
    assert "fra-eng.tsv: sha256 ok  562,864 bytes, 5,000 lines" in out
    assert "status: complete" in out
    rows = {line.split()[0]: line.split()[1:] for line in out.splitlines() if line.strip()}
    assert rows["train"] == ["4,000", "13,798", "15,131"] and rows["test"] == ["500", "1,708", "1,894"]
    assert "en 728, fr 1,013" in out
