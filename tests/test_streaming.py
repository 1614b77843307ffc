"""The memory-bounded build (--memory/--temp-dir) and the Dask build give the in-memory model, exactly.

A budget of 70 MB leaves room for blocks of about 30,000 tokens of an order-5 model, so the toy
texts here are counted in several blocks, spilled as runs and merged in several rounds.
"""
from __future__ import annotations

import gzip
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
import pytest

from corpora.errors import InputError
from corpora.textio import OutputError
from ngramlm import NgramCounts, NgramLM
from ngramlm.builder.text_counts import BuildInput, build_counts
from ngramlm.loading import load_native
from ngramlm.builder.streaming import TEMP_PREFIX, block_tokens_for, parse_memory

ROOT = Path(__file__).resolve().parents[1]
SMALL = "70M"


@pytest.fixture(scope="module")
def toy_text(tmp_path_factory):
    """A 200k-token toy training text as a file, with a few blank lines (KenLM counts them)."""
    from corpora.testing import toy_training_lines

    lines = toy_training_lines()
    d = tmp_path_factory.mktemp("stream")
    path = d / "train.txt"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path, lines


def _same_counts(a: NgramCounts, b: NgramCounts) -> None:
    assert a.order == b.order and a.vocab_size == b.vocab_size
    for k, (x, y) in enumerate(zip(a.tables, b.tables), start=1):
        assert np.array_equal(x.parent, y.parent) and np.array_equal(x.word, y.word), k
        assert np.array_equal(x.count, y.count), k
        if k >= 2:  # the suffix rows the merge carries equal the ones counting computes
            assert np.array_equal(a.suffix_index(k), b.suffix_index(k)), k


def _same_model(a, b) -> None:
    assert a.vocab_.itos_ == b.vocab_.itos_ and a.n_ngrams_ == b.n_ngrams_
    for x, y in zip(a.keys_ + a.log10_prob_ + a.log10_backoff_, b.keys_ + b.log10_prob_ + b.log10_backoff_):
        assert np.array_equal(x, y)


def _in_memory(path: Path, order: int = 5, smoothing: str = "mkn") -> NgramLM:
    from corpora.tokenize import TokenizerSpec, make_tokenizer
    from corpora.vocab import Vocab

    lines = path.read_text(encoding="utf-8").split("\n")[:-1]
    vocab = Vocab(tokenizer=TokenizerSpec())
    enc = vocab.fit_encode_lines(lines, make_tokenizer(TokenizerSpec()), keep_empty=True)
    return NgramLM(order=order, smoothing=smoothing).fit(enc, vocab=vocab)


def test_memory_sizes_read_like_lmplz():
    assert parse_memory("1G") == 1 << 30 and parse_memory("500M") == 500 << 20 and parse_memory("64k") == 64 << 10
    assert parse_memory("1000b") == 1000 and parse_memory("1.5G") == int(1.5 * (1 << 30))
    assert parse_memory("30%", total=1000) == 300
    for bad in ("1", "G", "-1G", "1Q", ""):
        with pytest.raises(InputError, match="memory size"):
            parse_memory(bad)


def test_a_budget_too_small_for_one_block_says_the_minimum():
    with pytest.raises(InputError) as e:
        block_tokens_for(10 << 20, 5)
    assert "cannot hold one counting block" in str(e.value) and "--memory" in str(e.value)
    assert block_tokens_for(1 << 30, 5) > block_tokens_for(1 << 30, 3) / 2 > 0


def test_blocks_spilled_and_merged_count_exactly_like_the_whole_text(toy_text, tmp_path):
    path, _ = toy_text
    msgs = []
    res = build_counts(BuildInput([path]), order=5, memory=SMALL, temp_dir=tmp_path, progress=msgs.append)
    assert sum("counted block" in m for m in msgs) >= 5  # really several blocks
    ref = _in_memory(path)
    assert res.vocab.itos_ == ref.vocab_.itos_
    from corpora.tokenize import TokenizerSpec, make_tokenizer

    lines = path.read_text(encoding="utf-8").split("\n")[:-1]
    enc = ref.vocab_.encode_sentences([make_tokenizer(TokenizerSpec())(x) for x in lines])
    _same_counts(res.counts, NgramCounts.from_encoded(enc, order=5, vocab_size=len(ref.vocab_)))
    assert res.sentences == len(lines) and res.words == enc.n_words
    assert list(tmp_path.iterdir()) == []  # the temp folder is gone


@pytest.mark.parametrize("smoothing", ["mkn", "wb", "katz"])
def test_fit_files_gives_the_in_memory_model(toy_text, tmp_path, smoothing):
    path, _ = toy_text
    order = 3 if smoothing == "katz" else 5
    kw = {"discount_fallback": (0.5, 1.0, 1.5)} if smoothing == "katz" else {}
    lm = NgramLM(order=order, smoothing=smoothing, **kw).fit_files([path], memory=SMALL, temp_dir=tmp_path)
    from corpora.tokenize import TokenizerSpec, make_tokenizer
    from corpora.vocab import Vocab

    lines = path.read_text(encoding="utf-8").split("\n")[:-1]
    vocab = Vocab(tokenizer=TokenizerSpec())
    enc = vocab.fit_encode_lines(lines, make_tokenizer(TokenizerSpec()), keep_empty=True)
    _same_model(lm, NgramLM(order=order, smoothing=smoothing, **kw).fit(enc, vocab=vocab))


def test_cli_streaming_build_equals_in_memory_for_files_gzip_stdin_and_several_files(toy_text, tmp_path):
    path, lines = toy_text
    env = dict(os.environ)
    run = [sys.executable, "-m", "cli", "train", "--order", "4"]
    subprocess.run(run + [str(path), "-o", str(tmp_path / "mem.npz")], cwd=ROOT, check=True, capture_output=True)
    ref = load_native(tmp_path / "mem.npz")
    gz = tmp_path / "train.txt.gz"
    gz.write_bytes(gzip.compress(path.read_bytes()))
    half = len(lines) // 2
    a, b = tmp_path / "a.txt", tmp_path / "b.txt"
    a.write_text("\n".join(lines[:half]) + "\n", encoding="utf-8")
    b.write_text("\n".join(lines[half:]) + "\n", encoding="utf-8")
    cases = {"file": [str(path)], "gzip": [str(gz)], "two files": [str(a), str(b)], "stdin": ["-"]}
    for name, args in cases.items():
        out = tmp_path / f"{name.replace(' ', '_')}.npz"
        r = subprocess.run(run + args + ["-o", str(out), "--memory", SMALL, "-T", str(tmp_path / "tmp")], cwd=ROOT,
                           capture_output=True, text=True, env=env,
                           input=path.read_text(encoding="utf-8") if name == "stdin" else None)
        assert r.returncode == 0, (name, r.stderr)
        assert "counted block" in r.stderr, name
        _same_model(load_native(out), ref)
        assert not any((tmp_path / "tmp").iterdir()), name  # temp runs removed


def test_bad_text_late_in_the_file_names_its_line_and_leaves_nothing(toy_text, tmp_path):
    path, lines = toy_text
    bad = tmp_path / "bad.txt"
    bad.write_bytes(path.read_bytes() + b"fine words\nbad \xff byte\n")
    out = tmp_path / "m.npz"
    r = subprocess.run([sys.executable, "-m", "cli", "train", str(bad), "--order", "5", "-o", str(out),
                        "--memory", SMALL, "-T", str(tmp_path / "tmp")], cwd=ROOT, capture_output=True, text=True)
    assert r.returncode == 2
    assert f"{bad}:{len(lines) + 2}:" in r.stderr and "UTF-8" in r.stderr
    assert not out.exists() and not any((tmp_path / "tmp").iterdir())


def test_a_temp_dir_that_cannot_be_written_is_one_line_naming_it(toy_text, tmp_path):
    path, _ = toy_text
    blocker = tmp_path / "a-file"
    blocker.write_text("x")
    with pytest.raises(OutputError) as e:
        build_counts(BuildInput([path]), order=3, memory=SMALL, temp_dir=blocker / "sub")
    assert "--temp-dir" in str(e.value) and str(blocker) in str(e.value)


def test_a_full_disk_while_spilling_is_one_line_and_cleans_up(toy_text, tmp_path, monkeypatch):
    import errno

    path, _ = toy_text
    real_save = np.save
    calls = {"n": 0}

    def save(p, a, *args, **kw):
        calls["n"] += 1
        if calls["n"] > 6:
            raise OSError(errno.ENOSPC, "No space left on device")
        return real_save(p, a, *args, **kw)

    monkeypatch.setattr(np, "save", save)
    with pytest.raises(OutputError) as e:
        build_counts(BuildInput([path]), order=5, memory=SMALL, temp_dir=tmp_path)
    assert "No space left" in str(e.value) and "--temp-dir" in str(e.value)
    assert list(tmp_path.iterdir()) == []


def test_ctrl_c_mid_build_removes_the_temp_runs(toy_text, tmp_path, monkeypatch):
    import ngramlm.builder.streaming as streaming

    path, _ = toy_text
    real = NgramCounts.from_encoded.__func__
    seen = {"n": 0}

    def interrupted(cls, *a, **kw):
        seen["n"] += 1
        if seen["n"] == 3:
            raise KeyboardInterrupt
        return real(cls, *a, **kw)

    monkeypatch.setattr(streaming.NgramCounts, "from_encoded", classmethod(interrupted))
    with pytest.raises(KeyboardInterrupt):
        build_counts(BuildInput([path]), order=5, memory=SMALL, temp_dir=tmp_path)
    assert list(tmp_path.iterdir()) == []


def test_a_folder_left_by_kill_9_is_swept_by_the_next_build(toy_text, tmp_path):
    path, _ = toy_text
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True,
                          text=True).stdout.strip()
    stale = tmp_path / f"{TEMP_PREFIX}{dead}-abcd"
    stale.mkdir()
    (stale / "run0-2-p.npy").write_bytes(b"x" * 100)
    live = tmp_path / f"{TEMP_PREFIX}{os.getpid()}-live"  # another build in progress: kept
    live.mkdir()
    build_counts(BuildInput([path]), order=2, memory=SMALL, temp_dir=tmp_path)
    assert not stale.exists() and live.exists()


# ----------------------------------------------------------------------------- Dask
distributed = pytest.importorskip("distributed", reason="the Dask tests need the distributed package")


@pytest.fixture(scope="module")
def cluster():
    from distributed import Client, LocalCluster

    c = LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None)
    client = Client(c)
    yield client
    client.close()
    c.close()


def test_dask_build_on_two_workers_gives_the_same_model(toy_text, tmp_path, cluster):
    path, lines = toy_text
    half = len(lines) // 2
    a, b = tmp_path / "a.txt", tmp_path / "b.txt"
    a.write_text("\n".join(lines[:half]) + "\n", encoding="utf-8")
    b.write_text("\n".join(lines[half:]) + "\n", encoding="utf-8")
    msgs = []
    lm = NgramLM(order=5, smoothing="mkn").fit_files([a, b], memory=SMALL, temp_dir=tmp_path / "tmp", client=cluster,
                                                     progress=msgs.append)
    assert any("shard(s) on 2 Dask worker(s)" in m for m in msgs)
    assert int(msgs[0].split()[0]) >= 4  # several shards per file
    _same_model(lm, _in_memory(path))


def test_a_worker_killed_mid_job_is_retried_and_the_model_is_the_same(toy_text, tmp_path, cluster, monkeypatch):
    import ngramlm.builder.cluster as dist

    path, _ = toy_text
    monkeypatch.setattr(dist, "_TASK_DELAY_S", 0.4)  # each task sleeps first: time to kill a worker mid-job
    pids = list(cluster.run(os.getpid).values())
    killed = {}

    def kill_one():
        time.sleep(1.0)
        os.kill(pids[0], signal.SIGKILL)
        killed["pid"] = pids[0]

    t = threading.Thread(target=kill_one)
    t.start()
    lm = NgramLM(order=4, smoothing="mkn").fit_files([path], memory=SMALL, temp_dir=tmp_path, client=cluster)
    t.join()
    assert killed
    _same_model(lm, _in_memory(path, order=4))
    cluster.wait_for_workers(2, timeout=60)  # the nanny restarts it for the next test


def test_an_unreachable_scheduler_is_an_error_within_seconds():
    from ngramlm.builder.cluster import connect

    t = time.perf_counter()
    with pytest.raises(InputError) as e:
        connect("tcp://127.0.0.1:9", timeout=2)
    assert time.perf_counter() - t < 10
    assert "cannot reach the Dask scheduler" in str(e.value) and "dask scheduler" in str(e.value)
    with pytest.raises(InputError, match="local:N"):
        connect("local:zero")


def test_shards_cover_the_file_at_line_starts_with_their_line_numbers(toy_text):
    from ngramlm.builder.cluster import shards_of

    path, _ = toy_text
    raw = path.read_bytes()
    shards = shards_of([path], shard_bytes=50_000)
    assert len(shards) > 5 and shards[0][1] == 0 and shards[-1][2] == len(raw)
    for (_, s, e, line), (_, s2, _, _) in zip(shards, shards[1:] + [(None, len(raw), None, None)]):
        assert e == s2 and (s == 0 or raw[s - 1:s] == b"\n")
        assert line == raw.count(b"\n", 0, s) + 1


def test_spooled_blocks_end_at_sentence_ends_even_past_a_sentence_longer_than_a_block(tmp_path):
    from corpora.tokenize import TokenizerSpec, make_tokenizer
    from ngramlm.builder.streaming import TempFolder, blocks_from_spool, spool_ids

    lines = ["a b c", " ".join(f"w{i}" for i in range(2500)), "d e", "", "f"] * 3 + [" ".join(["x"] * 4000)]
    path = tmp_path / "t.txt"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    with TempFolder(tmp_path / "tmp") as f:
        spool, words, freq = spool_ids([path], make_tokenizer(TokenizerSpec()), f, plain=True, block_bytes=1 << 12)
        assert words[0] == "\x00" and sorted(words[1:]) == sorted({w for x in lines for w in x.split()})
        assert freq[words.index("x")] == 4000 and freq[0] == len(lines)  # line ends
        blocks = list(blocks_from_spool(spool, np.arange(len(words), dtype=np.int32), block_tokens=1000))
    got = []
    for enc in blocks:
        for i in range(enc.n_sentences):
            got.append(" ".join(words[j] for j in enc.ids[enc.starts[i]:enc.starts[i + 1] - 1]))
    assert got == lines
    assert len(blocks) > 5 and max(len(b.ids) for b in blocks) == 4001
    assert list((tmp_path / "tmp").iterdir()) == []


# ---------------------------------------------------------------------------- the compiled tokenizing pass
def _spooled_tokens(path: Path, tmp: Path, *, keep_empty: bool, compiled: bool, monkeypatch,
                    block_bytes: int) -> tuple:
    """(the spilled stream as words, {word: count}) from spool_ids, with or without the C spooler."""
    from ngramlm import accel
    from ngramlm.builder.streaming import TempFolder, spool_ids

    if not compiled:
        monkeypatch.setattr(accel, "fast", None)
    with TempFolder(tmp) as folder:
        spool, words, freq = spool_ids([path], str.split, folder, plain=True, keep_empty=keep_empty,
                                       block_bytes=block_bytes)
        ids = np.fromfile(spool, dtype=np.int32)
    monkeypatch.undo()
    stream = [words[i] for i in ids]
    return stream, {w: int(c) for w, c in zip(words, freq) if c}


@pytest.mark.skipif(__import__("ngramlm.accel", fromlist=["fast"]).fast is None,
                    reason="the compiled extension is not built")
@pytest.mark.parametrize("keep_empty", [True, False])
def test_the_compiled_tokenizing_pass_cuts_the_tokens_str_split_cuts(tmp_path, monkeypatch, keep_empty):
    rng = np.random.default_rng(7)
    # Every whitespace str.split() knows (ASCII and beyond), CR/CRLF line ends, blank and blank-looking
    # lines, non-ASCII words, and enough distinct words (5,000) to make the C table grow several times.
    spaces = [" ", "\t", "\x0b", "\x0c", "\x1c", "\x1d", "\x1e", "\x1f", "\x85", "\xa0", "\u1680", "\u2003",
              "\u2028", "\u2029", "\u202f", "\u205f", "\u3000", "  "]
    vocab = [f"w{i}" for i in range(5000)] + ["café", "红楼梦", "naïve", "ß", "日本語", "x\u200by"]  # U+200B: not a space
    lines = []
    for i in range(3000):
        kind = i % 50
        if kind == 0:
            lines.append("")
        elif kind == 1:
            lines.append(" \t\u3000 ")
        else:
            n = int(rng.integers(1, 12))
            words = [vocab[j] for j in rng.integers(0, len(vocab), n)]
            seps = [spaces[j] for j in rng.integers(0, len(spaces), n + 1)]
            lines.append(seps[0] + "".join(w + s for w, s in zip(words, seps[1:])))
    ends = ["\n", "\r\n", "\r"]
    text = "".join(line + ends[int(rng.integers(0, 3))] for line in lines) + "last line without newline"
    path = tmp_path / "mixed.txt"
    path.write_bytes(text.encode("utf-8"))
    for block_bytes in (1 << 12, 1 << 20):  # many blocks, one block
        got = _spooled_tokens(path, tmp_path, keep_empty=keep_empty, compiled=True, monkeypatch=monkeypatch,
                              block_bytes=block_bytes)
        want = _spooled_tokens(path, tmp_path, keep_empty=keep_empty, compiled=False, monkeypatch=monkeypatch,
                               block_bytes=block_bytes)
        assert got == want
    # and both are the tokens str.split() cuts, line by line (CR and CRLF as line ends)
    norm = text.replace("\r\n", "\n").replace("\r", "\n").split("\n")
    expect = []
    for line in norm:
        toks = line.split()
        if toks or keep_empty:
            expect += toks + ["\x00"]
    assert got[0] == expect
