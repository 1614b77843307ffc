"""The sharded ∞-gram (issue 35): one suffix array per shard, every count a sum over the shards, equal to
the single index over the whole text -- built here (memory-bounded) and on a real 2-worker Dask
LocalCluster; the suffix sort within its budget; clear errors for a broken folder."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time

import numpy as np
import pytest

from corpora import Vocab
from corpora.errors import InputError
from corpora.vocab import BOS_ID, EOS_ID, EncodedText
from ngramlm.infini.index import SORT_OVERHEAD, InfiniIndex, sort_bytes_per_token, suffix_array
from ngramlm.infini.sharded import (DASK_WORKER_OVERHEAD, MANIFEST, ShardedInfiniIndex, build_shard,
                                    build_sharded_from_encoded, build_sharded_from_files, open_index, shard_word_counts,
                                    tokens_within)

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def budget_for(tokens: int, overhead: int = SORT_OVERHEAD) -> int:
    """A --memory whose shards hold about ``tokens`` tokens (uint16 ids): small shards, many cuts."""
    return overhead + sort_bytes_per_token(2, tokens) * tokens


@pytest.fixture(scope="module")
def toy(tmp_path_factory):
    from corpora import load_corpus, prepare
    from corpora.toy import ToyConfig

    ds = prepare(load_corpus("toy", toy_config=ToyConfig(n_train_tokens=60_000, n_valid_tokens=3000,
                                                          n_test_tokens=3000)))
    folder = tmp_path_factory.mktemp("text")
    lines = [" ".join(s) for s in ds.corpus.sentences("train")]
    lines[10:10] = ["", ""]  # blank lines are sentences too (<s> </s>), as the single index counts them
    half = len(lines) // 2
    a, b = folder / "a.txt", folder / "b.txt"
    a.write_text("\n".join(lines[:half]) + "\n", encoding="utf-8")
    b.write_text("\n".join(lines[half:]) + "\n", encoding="utf-8")
    single = InfiniIndex.build_from_files([a, b], temp_dir=folder / "tmp")
    return ds, [a, b], single


def _patterns(single: InfiniIndex, cuts, n: int = 3000) -> list:
    """Random n-grams of the training stream (some perturbed, mostly absent), every short pattern
    across each cut between shards, and the sentence-boundary patterns."""
    stream = np.asarray(single.tokens, dtype=np.int64)
    rng = np.random.default_rng(0)
    pats = []
    for _ in range(n):
        L = int(rng.integers(1, 10))
        i = int(rng.integers(0, len(stream) - L))
        p = stream[i:i + L].tolist()
        if rng.random() < 0.2:
            p[int(rng.integers(0, L))] = int(rng.integers(0, len(single.vocab)))
        pats.append(p)
    for c in cuts:
        for a in (1, 2, 3, 6):
            for b in (1, 2, 3, 6):
                pats.append(stream[c - a:c + b].tolist())
    return pats + [[], [EOS_ID], [BOS_ID], [EOS_ID, BOS_ID], [EOS_ID, BOS_ID, EOS_ID], [BOS_ID, EOS_ID, BOS_ID, EOS_ID]]


def assert_same_as_single(sh: ShardedInfiniIndex, single: InfiniIndex, ds, *, min_shards: int = 3) -> None:
    assert len(sh.shards) >= min_shards
    assert sh.vocab.itos_ == single.vocab.itos_
    assert sh.n_tokens == single.n_tokens and sh.n_sentences == single.n_sentences
    # The shards are consecutive pieces of the single index's stream, cut between sentences.
    assert np.array_equal(np.concatenate([np.asarray(s.tokens) for s in sh.shards]), single.tokens)
    cuts = sh.offsets[1:-1]
    assert all(single.tokens[c - 1] == EOS_ID and single.tokens[c] == BOS_ID for c in cuts)
    pats = _patterns(single, cuts)
    assert np.array_equal(sh.count_ids(pats), single.count_ids(pats))
    across = [p for p in pats if len(p) > 1 and any(x == EOS_ID and y == BOS_ID for x, y in zip(p, p[1:]))]
    assert sum(sh.count_ids(across)) > sum(sum(s.count_ids(across)) for s in sh.shards)  # cuts were crossed
    stream = np.asarray(single.tokens, dtype=np.int64)
    for ctx in ([], [EOS_ID], [BOS_ID], [EOS_ID, BOS_ID], stream[cuts[0] - 3:cuts[0]].tolist(),
                stream[cuts[0] - 2:cuts[0] + 2].tolist(), stream[200:203].tolist()):
        assert np.array_equal(sh.next_counts(ctx), single.next_counts(ctx)), ctx
    words = [single.vocab.itos_[i] for i in stream[500:506]]
    assert sh.count(words) == single.count(words) and sh.count(["</s>", "<s>"]) == single.count(["</s>", "<s>"])
    for split in ("valid", "test"):
        enc = single.vocab.encode_sentences(ds.corpus.sentences(split))
        for max_n in (0, 1, 2, 3, 5):
            a, b = single.score(enc, max_n=max_n), sh.score(enc, max_n=max_n)
            for field in ("eff_n", "cnt_h", "cnt_hw", "sparse"):
                x, y = getattr(a, field), getattr(b, field)
                assert x.dtype == y.dtype and np.array_equal(x, y), (split, max_n, field)
            assert np.array_equal(a.log10_prob, b.log10_prob)
    enc = single.vocab.encode_sentences(ds.corpus.sentences("test"))
    assert sh.accuracy_by_n(enc, per_bucket=10_000) == single.accuracy_by_n(enc, per_bucket=10_000)
    for sent in ds.corpus.sentences("test")[:3]:
        for i in range(len(sent) + 1):
            assert np.array_equal(sh.next_probs(["<s>"] + sent[:i]), single.next_probs(["<s>"] + sent[:i]))


# ----------------------------------------------------------------------------- equal to the single index
def test_local_shards_within_a_budget_equal_the_single_index(toy, tmp_path):
    ds, files, single = toy
    msgs = []
    man = build_sharded_from_files(files, tmp_path / "idx", memory=budget_for(9000), temp_dir=tmp_path / "tmp",
                                   progress=msgs.append)
    assert len(man["shards"]) >= 7 and all(e["tokens"] <= 9000 for e in man["shards"])
    assert man["tokens"] == single.n_tokens and not any((tmp_path / "tmp").iterdir())
    sh = open_index(tmp_path / "idx")
    assert isinstance(sh, ShardedInfiniIndex) and isinstance(sh.shards[0].sa, np.memmap)
    assert_same_as_single(sh, single, ds, min_shards=7)
    assert open_index(tmp_path / "idx" / MANIFEST).n_tokens == single.n_tokens  # the manifest itself opens it


def test_the_sparse_flag_needs_every_shard_to_agree_on_the_one_continuation():
    # "a b" is followed by c in the first shard and by d in the second: each shard alone has one
    # continuation, the whole text has two.  "a c" is followed by e in both: one continuation.
    sents = [["a", "b", "c"], ["a", "c", "e"], ["a", "b", "d"], ["a", "c", "e"]]
    vocab = Vocab().fit(sents)
    whole = InfiniIndex.build(vocab.encode_sentences(sents), vocab)
    shards = [InfiniIndex.build(vocab.encode_sentences(part), vocab) for part in (sents[:2], sents[2:])]
    sh = ShardedInfiniIndex(shards, vocab)
    for test in (["a", "b", "e"], ["a", "c", "f"], ["a", "b", "c"], ["a", "c", "e"]):
        enc = vocab.encode_sentences([test])
        a, b = whole.score(enc), sh.score(enc)
        assert a.sparse.tolist() == b.sparse.tolist() and a.cnt_hw.tolist() == b.cnt_hw.tolist(), test
    assert sh.score(vocab.encode_sentences([["a", "b", "e"]])).sparse.tolist()[2] is False  # c | d
    assert sh.score(vocab.encode_sentences([["a", "c", "f"]])).sparse.tolist()[2] is True  # e | e
    assert sh.count(["e", "</s>", "<s>", "a", "b"]) == whole.count(["e", "</s>", "<s>", "a", "b"]) == 1  # the cut


def test_a_named_corpus_in_shards_equals_its_single_index(toy, tmp_path):
    ds, _, _ = toy
    single = InfiniIndex.build(ds["train"], ds.vocab)
    build_sharded_from_encoded(ds["train"], ds.vocab, tmp_path / "idx", memory=budget_for(12_000), source="toy")
    sh = open_index(tmp_path / "idx")
    assert sh.source == "toy"
    assert_same_as_single(sh, single, ds, min_shards=5)


def test_the_dask_tasks_run_here_write_the_same_shards(toy, tmp_path):
    """The two Dask tasks are plain functions: called in order here, their shards concatenate to the
    single index's stream (a range bigger than the budget becomes several shards)."""
    from collections import Counter

    from corpora.tokenize import TokenizerSpec
    from ngramlm.builder.cluster import shards_of
    from ngramlm.infini.sharded import prepare_folder, write_manifest

    ds, files, single = toy
    ranges = shards_of(files, shard_bytes=120_000)
    spec, memory = TokenizerSpec(), budget_for(15_000, DASK_WORKER_OVERHEAD)
    total: Counter = Counter()
    for r in ranges:
        total.update(shard_word_counts(r, spec, memory))
    vocab = Vocab(tokenizer=spec).fit_counts(total)
    assert vocab.itos_ == single.vocab.itos_
    out = prepare_folder(tmp_path / "idx")
    entries = [e for i, r in enumerate(ranges) for e in build_shard(r, i, vocab, spec, str(out), memory, "b1")]
    assert len(entries) > len(ranges)  # some range held more than one shard's worth
    write_manifest(out, vocab, entries, build="b1", source="test", memory=memory)
    assert_same_as_single(open_index(out), single, ds, min_shards=4)


# ----------------------------------------------------------------------------- the command line
def test_cli_builds_a_folder_and_count_and_ppl_read_it(toy, tmp_path, run_cli):
    ds, files, single = toy
    mem = f"{budget_for(10_000)}b"
    code, out, err = run_cli("infini", "build", *files, "-o", tmp_path / "idx", "--memory", mem, "--json")
    assert code == 0, err
    info = json.loads(out)
    assert info["tokens"] == single.n_tokens and info["shards"] >= 6 and 6.0 <= info["bytes_per_token"] < 6.5
    code, out, err = run_cli("infini", "build", *files, "-o", tmp_path / "one.npz", "--json")
    assert code == 0, err
    test = tmp_path / "test.txt"
    test.write_text("\n".join(" ".join(s) for s in ds.corpus.sentences("test")) + "\n", encoding="utf-8")
    code, out_sh, err = run_cli("infini", "ppl", tmp_path / "idx", test, "--json")
    assert code == 0, err
    code, out_one, err = run_cli("infini", "ppl", tmp_path / "one.npz", test, "--json")
    assert code == 0, err
    a, b = json.loads(out_sh), json.loads(out_one)
    a.pop("index"), b.pop("index")
    assert a == b
    code, out, err = run_cli("infini", "count", tmp_path / "idx", input="the\n</s> <s>\n")
    assert code == 0, err
    expect = [int(single.count(["the"])), int(single.count(["</s>", "<s>"]))]
    assert [int(x.split("\t")[0]) for x in out.splitlines()] == expect


def test_a_text_over_the_budget_is_refused_for_one_file_and_sharded_for_a_folder(toy, tmp_path, run_cli):
    ds, files, single = toy
    mem = f"{budget_for(20_000)}b"
    code, out, err = run_cli("infini", "build", files[0], "-o", tmp_path / "one.npz", "--memory", mem)
    assert code == 2 and not (tmp_path / "one.npz").exists()
    assert "needs about" in err and "-o FOLDER" in err and "raise --memory" in err, err
    code, out, err = run_cli("infini", "build", files[0], "-o", tmp_path / "sh", "--memory", mem)
    assert code == 0 and "shard(s)" in out, err
    code, out, err = run_cli("infini", "build", files[0], "-o", tmp_path / "big.npz", "--memory", "1G")
    assert code == 0, err  # within the budget: one file, as before
    with pytest.raises(InputError, match="cannot hold the suffix sort"):
        tokens_within(50 << 20, 2)


def test_option_mistakes_are_one_line_each(toy, tmp_path, run_cli):
    _, files, _ = toy
    code, _, err = run_cli("infini", "build", files[0], "-o", tmp_path / "x.npz", "--dask", "local:1")
    assert code == 2 and "-o FOLDER" in err
    code, _, err = run_cli("infini", "build", files[0], "-o", tmp_path / "x", "--shard-size", "1M")
    assert code == 2 and "with --dask" in err
    (tmp_path / "busy").mkdir()
    (tmp_path / "busy" / "notes.txt").write_text("mine\n")
    code, _, err = run_cli("infini", "build", files[0], "-o", tmp_path / "busy")
    assert code == 2 and "not empty" in err and "new or empty folder" in err
    assert (tmp_path / "busy" / "notes.txt").exists()
    code, _, err = run_cli("infini", "build", *files, "-o", tmp_path / "x", "--vocab", tmp_path / "v.json")
    assert code == 2 and "--vocab" in err


def test_a_given_vocabulary_and_standard_input_build_shards_too(toy, tmp_path, run_cli):
    ds, files, single = toy
    assert run_cli("vocab", "build", files[0], "-o", tmp_path / "v.json")[0] == 0
    mem = f"{budget_for(10_000)}b"
    code, out, err = run_cli("infini", "build", files[1], "-o", tmp_path / "v", "--vocab", tmp_path / "v.json",
                             "--memory", mem, "--json")
    assert code == 0 and json.loads(out)["shards"] >= 3, err
    vocab = Vocab.load(tmp_path / "v.json")
    sents = [line.split() for line in files[1].read_text(encoding="utf-8").splitlines()]
    ref = InfiniIndex.build(vocab.encode_sentences(sents), vocab)
    sh = open_index(tmp_path / "v")
    assert sh.vocab.itos_ == vocab.itos_
    assert np.array_equal(np.concatenate([np.asarray(s.tokens) for s in sh.shards]), ref.tokens)
    text = files[0].read_text(encoding="utf-8") + files[1].read_text(encoding="utf-8")
    code, out, err = run_cli("infini", "build", "-", "-o", tmp_path / "s", "--memory", mem, "--json", input=text)
    assert code == 0, err
    assert np.array_equal(np.concatenate([np.asarray(s.tokens) for s in open_index(tmp_path / "s").shards]),
                          single.tokens)


# ----------------------------------------------------------------------------- a broken folder
def test_a_broken_folder_is_an_error_naming_the_file_and_the_fix(toy, tmp_path, run_cli):
    _, files, _ = toy
    idx = tmp_path / "idx"
    man = build_sharded_from_files(files, idx, memory=budget_for(20_000), temp_dir=tmp_path)
    first, second = (idx / e["file"] for e in man["shards"][:2])

    def broken(**kw):
        with pytest.raises(InputError) as e:
            ShardedInfiniIndex.load(idx)
        return str(e.value)

    # A missing shard: named, with what to do.
    saved = first.read_bytes()
    first.unlink()
    msg = broken()
    assert str(first) in msg and "missing" in msg and "copy the whole folder" in msg and "rebuild" in msg
    code, _, err = run_cli("infini", "count", idx, "the")
    assert code == 2 and str(first) in err
    first.write_bytes(saved)
    # A shard of another build (left by an earlier build of the same folder).
    other = build_sharded_from_files(files, tmp_path / "other", memory=budget_for(20_000), temp_dir=tmp_path)
    shutil.copy(tmp_path / "other" / other["shards"][1]["file"], second)
    msg = broken()
    assert str(second) in msg and "another build" in msg and "rebuild" in msg
    # A manifest that is not JSON, or names a path outside the folder, or lost its shards.
    good = (idx / MANIFEST).read_text()
    (idx / MANIFEST).write_text(good[: len(good) // 2])
    msg = broken()
    assert str(idx / MANIFEST) in msg and "not a readable manifest" in msg and "rebuild" in msg
    for bad in ({"shards": []}, {"vocab": "../vocab.json"}, {"format": "x"}):
        (idx / MANIFEST).write_text(json.dumps(dict(json.loads(good), **bad)))
        msg = broken()
        assert str(idx / MANIFEST) in msg and "corrupt manifest" in msg, bad
    (idx / MANIFEST).unlink()
    msg = broken()
    assert "no manifest.json" in msg and str(idx) in msg
    # One shard file opened as if it were an index: the folder is named.
    with pytest.raises(InputError, match="one shard of a sharded"):
        InfiniIndex.load(first)
    with pytest.raises(InputError, match="sharded ∞-gram index"):
        InfiniIndex.load(tmp_path / "other")


def test_a_changed_vocabulary_or_truncated_shard_is_caught(toy, tmp_path):
    _, files, _ = toy
    idx = tmp_path / "idx"
    man = build_sharded_from_files(files, idx, memory=budget_for(30_000), temp_dir=tmp_path)
    vocab = idx / "vocab.json"
    raw = vocab.read_text()
    vocab.write_text(raw.replace('"min_count": 1', '"min_count": 2'))
    with pytest.raises(InputError, match="not the one manifest.json was built with"):
        ShardedInfiniIndex.load(idx)
    vocab.write_text(raw)
    shard = idx / man["shards"][0]["file"]
    data = shard.read_bytes()
    shard.write_bytes(data[: len(data) // 2])
    with pytest.raises(InputError, match="not a readable ∞-gram index") as e:
        ShardedInfiniIndex.load(idx)
    assert str(shard) in str(e.value)


# ----------------------------------------------------------------------------- the suffix sort
@pytest.mark.parametrize("dtype,V", [(np.uint16, 7), (np.uint16, 65536), (np.uint32, 70_000), (np.uint32, 3)])
def test_the_in_place_suffix_sort_equals_the_plain_one_and_leaves_the_tokens(dtype, V):
    import pydivsufsort

    rng = np.random.default_rng(V)
    tokens = rng.integers(0, V, 50_000).astype(dtype)
    tokens[1000:3000] = tokens[5000:7000]  # long repeats
    before = tokens.copy()
    sa = suffix_array(tokens)
    raw = tokens.astype(tokens.dtype.newbyteorder(">")).view(np.uint8)
    plain = pydivsufsort.divsufsort(raw)
    plain = plain[plain % tokens.itemsize == 0] // tokens.itemsize
    assert sa.dtype == np.int32 and np.array_equal(sa, plain) and np.array_equal(tokens, before)
    view = before[::1][10:]  # not owned: sorted as a copy, never swapped in place
    assert np.array_equal(suffix_array(view), suffix_array(before[10:].copy())) and np.array_equal(view, before[10:])


def test_a_sentence_longer_than_a_shard_is_refused_with_the_fix(tmp_path):
    vocab = Vocab().fit([["a", "b"]])
    ids = np.array([vocab.stoi_["a"]] * 12_000 + [EOS_ID], dtype=np.int32)
    enc = EncodedText(ids=ids, starts=np.array([0, len(ids)], dtype=np.int64))
    with pytest.raises(InputError, match="longer than one shard") as e:
        build_sharded_from_encoded(enc, vocab, tmp_path / "idx", memory=budget_for(10_500))
    assert "raise --memory" in str(e.value)


@pytest.mark.slow
def test_the_build_holds_its_memory_budget(tmp_path):
    """Peak RSS of `infini build --memory 128M` on 12 M tokens, where one suffix array peaks near 190 MB
    (10 bytes a token over the interpreter): the shards keep the whole build, the tokenizing pass
    included, within the budget."""
    rng = np.random.default_rng(0)
    vocab = np.array([f"w{i}" for i in range(5000)])
    line = np.array([" ".join(vocab[rng.integers(0, 5000, 18)]) for _ in range(20_000)])
    text = tmp_path / "t.txt"
    with open(text, "w", encoding="utf-8") as fh:
        for _ in range(30):  # 600,000 lines of 18 words, in random order (repeats within a line set)
            fh.write("\n".join(line[rng.permutation(len(line))]) + "\n")
    helper = ("import resource, subprocess, sys\n"
              "r = subprocess.run(sys.argv[1:], capture_output=True, text=True)\n"
              "print(r.returncode, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss, r.stderr[-300:])\n")
    out = subprocess.run([sys.executable, "-c", helper, sys.executable, "-m", "cli", "infini", "build", str(text),
                          "-o", str(tmp_path / "idx"), "--memory", "128M", "-T", str(tmp_path)],
                         capture_output=True, text=True, cwd=ROOT, timeout=600)
    code, peak_kb, _ = out.stdout.split(" ", 2)
    assert code == "0", out.stdout + out.stderr
    man = json.loads((tmp_path / "idx" / MANIFEST).read_text())
    assert man["tokens"] == 600_000 * 20 and len(man["shards"]) >= 3
    assert int(peak_kb) * 1024 < 128 << 20, f"peak {int(peak_kb) >> 10} MB over the 128 MB budget"


# ----------------------------------------------------------------------------- a real Dask cluster
distributed = pytest.importorskip("distributed", reason="the Dask build needs the distributed package")


def test_dask_local_cluster_builds_shards_equal_to_the_single_index(toy, tmp_path, run_cli):
    """`infini build --dask local:2`: a real LocalCluster(n_workers=2, processes=True,
    threads_per_worker=1) tokenizes the text ranges, the client sums the word counts into one
    vocabulary, the workers write the shards; the folder answers as the single index does."""
    ds, files, single = toy
    t = time.perf_counter()
    code, out, err = run_cli("infini", "build", *files, "-o", tmp_path / "idx", "--dask", "local:2",
                             "--memory", f"{budget_for(8000, DASK_WORKER_OVERHEAD)}b", "--shard-size", "60K", "--json")
    assert code == 0, err
    info = json.loads(out)
    assert "on 2 Dask worker(s)" in err and info["text_shards"] >= 4 and info["shards"] > info["text_shards"]
    assert time.perf_counter() - t < 60
    sh = open_index(tmp_path / "idx")
    assert_same_as_single(sh, single, ds, min_shards=6)
    code, out, err = run_cli("infini", "build", *files, "-o", tmp_path / "idx", "--dask", "local:2",
                             "--memory", "1G", "--json")  # rebuilt in place: the old shards are gone
    assert code == 0, err
    assert sorted(p.name for p in (tmp_path / "idx").glob("shard-*.npz")) == \
        [e["file"] for e in json.loads((tmp_path / "idx" / MANIFEST).read_text())["shards"]]
    assert_same_as_single(open_index(tmp_path / "idx"), single, ds, min_shards=1)
