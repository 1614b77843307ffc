"""The Dask build estimates and writes on the workers, and its model is the local build's, bit for bit.

The partition logic (:mod:`ngramlm.builder.partition`) is tested on its own first (no Dask); then the
whole build on a real ``LocalCluster`` (worker processes), then on a scheduler and workers started as
separate processes over TCP on 127.0.0.1, each with its own memory limit, with a worker killed mid-job.
"""
from __future__ import annotations

import hashlib
import json
import os
import signal
import socket
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from corpora.errors import InputError
from ngramlm import NgramCounts, NgramLM
from ngramlm.builder import partition as pt

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def toy_text(tmp_path_factory):
    from corpora.testing import toy_training_lines

    lines = toy_training_lines()
    path = tmp_path_factory.mktemp("cluster") / "train.txt"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path, lines


def _encoded(lines):
    from corpora.tokenize import TokenizerSpec, make_tokenizer
    from corpora.vocab import Vocab

    vocab = Vocab(tokenizer=TokenizerSpec())
    return vocab, vocab.fit_encode_lines(lines, make_tokenizer(TokenizerSpec()), keep_empty=True)


def _sha(path) -> str:
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


# ----------------------------------------------------------------------------- partitions, no Dask
def test_parts_split_and_merged_are_the_counts_of_the_whole_text(toy_text):
    """Two halves counted apart, cut into parts and merged part by part: every part is the slice of the
    whole text's counts with its first words, rows and counts equal."""
    _, lines = toy_text
    vocab, enc = _encoded(lines)
    V, half = len(vocab), len(lines) // 2
    whole = NgramCounts.from_encoded(enc, order=4, vocab_size=V)
    halves = [NgramCounts.from_encoded(vocab.encode_sentences([x.split() for x in chunk]), order=4, vocab_size=V)
              for chunk in (lines[:half], lines[half:])]
    bounds = pt.bounds_for(whole.tables[0].count.astype(float), 5)
    assert bounds[0] == 0 and bounds[-1] == V and np.all(np.diff(bounds) > 0) and len(bounds) == 6
    merged = [pt.merge_parts([a, b]) for a, b in zip(*(pt.split_counts(h, bounds) for h in halves))]
    for k in range(2, 5):
        grams = whole.ngrams(k)
        start = 0
        for p, part in enumerate(merged):
            rows = part.size(k)
            got = grams[start:start + rows]
            assert np.all((got[:, 0] >= part.lo) & (got[:, 0] < part.hi))  # first words in the part's range
            assert np.array_equal(part.counts[k - 1], whole.tables[k - 1].count[start:start + rows])
            start += rows
        assert start == len(grams)  # the parts, in order, are the whole table


def test_suffix_rounds_find_every_suffix_and_count_left_extensions(toy_text):
    """The request rounds give each row's suffix (as the whole table's suffix index) and the order below's
    continuation counts (Kneser-Ney's left extensions)."""
    from ngramlm.smoothing import adjusted_counts

    _, lines = toy_text
    vocab, enc = _encoded(lines)
    V = len(vocab)
    whole = NgramCounts.from_encoded(enc, order=4, vocab_size=V)
    bounds = pt.bounds_for(whole.tables[0].count.astype(float), 4)
    parts = pt.split_counts(whole, bounds)
    P = len(parts)
    offsets = {k: np.cumsum([0] + [p.size(k) for p in parts]) for k in range(1, 5)}
    offsets[1] = bounds
    adj_whole = adjusted_counts(whole)
    sfx = [pt.order2_suffixes(p, bounds) for p in parts]
    for k in range(3, 5):
        reqs = [pt.suffix_requests(p, k, s, P) for p, s in zip(parts, sfx)]
        res = [pt.resolve_suffixes(parts[q], k, [reqs[p][q] for p in range(P)]) for q in range(P)]
        sfx = [pt.place_answers(parts[p], k, sfx[p], [res[q][0][p] for q in range(P)]) for p in range(P)]
        got = np.concatenate([offsets[k - 1][s.to] + s.row for s in sfx])
        assert np.array_equal(got, whole.suffix_index(k))
        adj = np.concatenate([pt.adjusted_counts(parts[q], k - 1, res[q][1]) for q in range(P)])
        assert np.array_equal(adj, adj_whole[k - 2])


def test_a_missing_suffix_is_an_error_not_a_wrong_row():
    part = pt.Part(0, 3, 3, [None, np.array([0 * 3 + 1, 1 * 3 + 2])], [np.ones(3, dtype=np.int64), np.ones(2)])
    with pytest.raises(ValueError, match="not suffix-closed"):
        pt.resolve_suffixes(part, 3, [np.array([2 * 3 + 2])])


# ----------------------------------------------------------------------------- on a LocalCluster
distributed = pytest.importorskip("distributed", reason="the Dask tests need the distributed package")


@pytest.fixture(scope="module")
def cluster():
    from distributed import Client, LocalCluster

    c = LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None)
    client = Client(c)
    yield client
    client.close()
    c.close()


def _build(path, out, *, smoothing="mkn", order=4, dask=None, parts=None, estimation="auto", progress=None,
           compat=None, **params):
    from ngramlm.builder.pipeline import BuildConfig, build

    cfg = BuildConfig(order=order, smoothing=smoothing, smoother_params=params, files=True, memory="70M", compat=compat,
                      temp_dir=str(Path(out).parent / "tmp"), dask=dask, parts=parts, estimation=estimation,
                      output=str(out), arpa=str(out).endswith(".arpa"), kenlm_binary=str(out).endswith(".binary"))
    lm = NgramLM(**cfg.estimator_params())
    built = build([str(path)], cfg, progress, estimator=lm)
    if built.on_disk is None:  # the local build's in-memory model, written as `train` writes it
        from ngramlm.io.arpa import write_arpa
        from ngramlm.io.native import save_native

        from ngramlm.kenlm.write import BinaryOptions, write_binary

        if cfg.kenlm_binary:
            write_binary(lm, out, BinaryOptions(kind="probing"))
        else:
            (write_arpa if cfg.arpa else save_native)(lm, out)
    return built


def _native(path) -> dict:
    z = np.load(path)
    out = {k: z[k] for k in z.files}
    out["meta"] = json.loads(out["meta"].tobytes())
    return out


@pytest.mark.parametrize("smoothing,order,params", [("mkn", 5, {}), ("kn", 3, {}), ("wb", 4, {}),
                                                    ("absolute", 5, {}), ("absolute", 3, {"discount": 0.7}),
                                                    ("mkn", 2, {})])
def test_the_workers_build_the_local_model_byte_for_byte(toy_text, tmp_path, cluster, smoothing, order, params):
    path, _ = toy_text
    local = tmp_path / "local.arpa"
    _build(path, local, smoothing=smoothing, order=order, **params)
    for parts in (1, 3, 6):
        out = tmp_path / f"dask{parts}.arpa"
        msgs = []
        built = _build(path, out, smoothing=smoothing, order=order, dask=cluster, parts=parts,
                       progress=lambda m, stage=None, depth=0: msgs.append(m), **params)
        assert built.on_disk is not None and built.on_disk.parts == parts
        assert any("estimation on the workers" in m for m in msgs)
        assert _sha(out) == _sha(local), (smoothing, order, parts)


def test_compat_kenlm_on_the_workers_is_the_in_memory_lmplz_model(toy_text, tmp_path, cluster):
    """--dask --compat kenlm: the words numbered by first appearance (the shards' word counts added in
    text order), the last n-gram in lmplz's suffix order found part by part, its suffixes' raw counts in
    the discounts, lmplz's <unk> in the floor: the in-memory compat model's ARPA file, byte for byte, on
    1, 3 and 6 parts (and not the default model's); the native file records the same compat info."""
    from corpora.tokenize import TokenizerSpec, make_tokenizer
    from corpora.vocab import Vocab
    from ngramlm.io.arpa import write_arpa

    _, lines = toy_text
    lines = list(lines)
    for i in range(3, len(lines), 997):
        lines[i] += " <unk>"
    lines.append("brandnew word")
    path = tmp_path / "unk.txt"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    vocab = Vocab(tokenizer=TokenizerSpec())
    enc = vocab.fit_encode_lines(lines, make_tokenizer(TokenizerSpec()), keep_empty=True)
    ref = NgramLM(order=4, smoothing="mkn", compat="kenlm").fit(enc, vocab=vocab)
    write_arpa(ref, tmp_path / "ref.arpa")
    _build(path, tmp_path / "default.arpa", dask=cluster, parts=3)
    default = _sha(tmp_path / "default.arpa")
    for parts in (1, 3, 6):
        built = _build(path, tmp_path / f"dask{parts}.arpa", dask=cluster, parts=parts, compat="kenlm")
        assert built.on_disk.parts == parts
        assert _sha(tmp_path / f"dask{parts}.arpa") == _sha(tmp_path / "ref.arpa") != default, parts
    _build(path, tmp_path / "dask.npz", dask=cluster, parts=4, compat="kenlm")
    assert _native(tmp_path / "dask.npz")["meta"]["info"]["compat"] == ref.info_["compat"]
    with pytest.raises(InputError, match="compat='kenlm' with Dask is estimated on the workers"):
        _build(path, tmp_path / "client.arpa", dask=cluster, compat="kenlm", estimation="memory")


def test_a_kenlm_binary_is_laid_out_by_a_worker(toy_text, tmp_path, cluster):
    """-o NAME.binary on Dask: the workers write the native file to the shared folder and one task on a
    worker lays out the KenLM probing binary from it (the client gets its size back).  The file is the
    local build's byte for byte."""
    from ngramlm.kenlm.format import read_header

    path, _ = toy_text
    _build(path, tmp_path / "local.binary", order=5)
    msgs = []
    _build(path, tmp_path / "dask.binary", order=5, dask=cluster, parts=4,
           progress=lambda m, stage=None, depth=0: msgs.append(m))
    assert (tmp_path / "dask.binary").read_bytes() == (tmp_path / "local.binary").read_bytes()
    assert any("laying out the KenLM binary on a worker" in m for m in msgs)
    assert read_header(tmp_path / "dask.binary").kind == "probing"
    assert not list((tmp_path / "tmp").glob("ngramlm-build-*"))  # the shared folder (and its native file) removed


def test_native_files_and_stupid_backoff_are_the_local_ones(toy_text, tmp_path, cluster):
    path, _ = toy_text
    for smoothing in ("mkn", "stupid"):
        _build(path, tmp_path / "local.npz", smoothing=smoothing)
        _build(path, tmp_path / "dask.npz", smoothing=smoothing, dask=cluster, parts=4)
        a, b = _native(tmp_path / "local.npz"), _native(tmp_path / "dask.npz")
        assert sorted(a) == sorted(b) and a["meta"] == b["meta"]
        for name in a:
            if name != "meta":
                assert a[name].dtype == b[name].dtype and np.array_equal(a[name], b[name]), (smoothing, name)


def test_fit_files_reads_the_workers_model_back(toy_text, tmp_path, cluster):
    path, lines = toy_text
    vocab, enc = _encoded(lines)
    ref = NgramLM(order=4, smoothing="wb").fit(enc, vocab=vocab)
    lm = NgramLM(order=4, smoothing="wb").fit_files([path], memory="70M", temp_dir=tmp_path, client=cluster,
                                                   estimation="auto")
    assert lm.n_ngrams_ == ref.n_ngrams_ and lm.vocab_.itos_ == ref.vocab_.itos_
    for x, y in zip(lm.keys_ + lm.log10_prob_ + lm.log10_backoff_, ref.keys_ + ref.log10_prob_ + ref.log10_backoff_):
        assert np.array_equal(x, y)
    assert not list(tmp_path.glob("ngramlm-build-*"))  # the shared folder is removed


def test_smoothers_the_workers_do_not_estimate_are_counted_there_and_estimated_here(toy_text, tmp_path, cluster):
    path, _ = toy_text
    msgs = []
    built = _build(path, tmp_path / "k.arpa", smoothing="katz", order=3, dask=cluster,
                   progress=lambda m, stage=None, depth=0: msgs.append(m))
    assert built.on_disk is None and any("counting on the Dask workers; katz is estimated on the client" in m
                                         for m in msgs)
    _build(path, tmp_path / "local.arpa", smoothing="katz", order=3)
    assert _sha(tmp_path / "k.arpa") == _sha(tmp_path / "local.arpa")
    with pytest.raises(InputError, match="cannot estimate this model on the Dask workers: katz"):
        _build(path, tmp_path / "k.arpa", smoothing="katz", order=3, dask=cluster, estimation="disk")


def _nbytes(obj) -> int:
    if isinstance(obj, np.ndarray):
        return obj.nbytes
    if isinstance(obj, (list, tuple)):
        return sum(_nbytes(x) for x in obj)
    if isinstance(obj, dict):
        return sum(_nbytes(x) for x in obj.values())
    return 0


def test_the_client_never_holds_the_ngrams(toy_text, tmp_path, cluster, monkeypatch):
    """Everything the client gathers from the workers while they build a model of ~500 k n-grams is
    vocabulary-sized (unigram counts, back-offs, count-of-counts per part), not n-gram-sized; and it
    stays the same when the text, and the model, grow."""
    path, lines = toy_text
    received = []
    real_gather = type(cluster).gather

    def spy(self, *args, **kwargs):
        out = real_gather(self, *args, **kwargs)
        received.append(_nbytes(out))
        return out

    monkeypatch.setattr(type(cluster), "gather", spy)
    totals, sizes = [], []
    for copies in (1, 2):
        text = tmp_path / f"x{copies}.txt"
        # The second text adds new n-grams: each line once as it is and once reversed.
        extra = [" ".join(reversed(x.split())) for x in lines] if copies == 2 else []
        text.write_text("\n".join(lines + extra) + "\n", encoding="utf-8")
        received.clear()
        built = _build(text, tmp_path / f"x{copies}.arpa", smoothing="wb", order=5, dask=cluster, parts=4)
        totals.append(sum(received))
        sizes.append(sum(built.on_disk.n_ngrams))
    V = len(built.on_disk.vocab)
    assert sizes[1] > 1.5 * sizes[0] > 600_000  # the model grew ...
    assert totals[1] == totals[0]  # ... and what the client received did not
    assert totals[0] <= 8 * V * (4 * 4 + 4), (totals, V)  # a few V-sized arrays per part
    assert totals[0] < sizes[0] * 24 / 20  # a twentieth of the model's keys, probabilities, back-offs


def test_all_to_all_pieces_go_as_one_graph_and_land_where_they_belong(cluster, monkeypatch):
    from ngramlm.builder.cluster_estimate import _all_to_all, _pick

    sources = [cluster.scatter([np.arange(3) + 10 * s + t for t in range(3)]) for s in range(4)]  # 4 sources, 3 targets
    calls = []
    real_map = type(cluster).map
    monkeypatch.setattr(type(cluster), "map", lambda self, *a, **k: calls.append(a[0]) or real_map(self, *a, **k))
    out = _all_to_all(cluster, _pick, [(f,) for f in sources], 3)
    assert calls == [_pick]  # one graph for the 12 pieces, not 12 submits
    got = cluster.gather(out)
    assert [[int(x[0]) for x in row] for row in got] == [[10 * s + t for s in range(4)] for t in range(3)]


def test_the_client_holds_futures_in_proportion_to_the_parts_not_their_square(toy_text, tmp_path, cluster):
    """With P parts a suffix round is P^2 pieces; the client holds a few futures a part and an order while
    the model is built (the pieces only while their consumers are submitted): its memory stays flat in P."""
    import re

    path, _ = toy_text
    held, parts = [], []

    def progress(message, stage=None, depth=0):
        held.append(len(cluster.futures))
        parts.extend(int(m) for m in re.findall(r"cut into (\d+) parts", message))

    order = 5
    _build(path, tmp_path / "dask.arpa", order=order, dask=cluster, parts=24, progress=progress)
    P = parts[0]
    assert P >= 20 and len(held) > 8
    # measured: at most 13 P (the parts, and per order their suffixes, answers, adjusted counts and
    # probabilities); the P^2 pieces of one suffix round alone would be 400 or more
    assert max(held) <= 3 * order * P < P * P, (held, P)


def test_a_worker_killed_mid_estimation_still_gives_the_same_model(toy_text, tmp_path, cluster):
    from ngramlm.builder import cluster_estimate

    path, _ = toy_text
    _build(path, tmp_path / "local.arpa", order=4)
    cluster.run(cluster_estimate.set_task_delay, 0.15)  # the estimation tasks slowed: time to kill one
    pids = list(cluster.run(os.getpid).values())
    killed = {}

    def progress(message, stage=None, depth=0):
        if "suffixes of order 3 located" in message and not killed:  # counting done, estimation under way
            os.kill(pids[0], signal.SIGKILL)
            killed["at"] = message

    try:
        _build(path, tmp_path / "dask.arpa", order=4, dask=cluster, parts=4, progress=progress)
    finally:
        cluster.run(cluster_estimate.set_task_delay, 0.0)
    assert killed
    assert _sha(tmp_path / "dask.arpa") == _sha(tmp_path / "local.arpa")
    cluster.wait_for_workers(2, timeout=60)  # the nanny restarts it for the next test


@pytest.mark.parametrize("limit", ["150MB", "180MB"])
def test_a_worker_over_its_memory_limit_gives_a_retry_or_one_line_error_never_a_wrong_model(toy_text, tmp_path, limit):
    """A worker whose limit its tasks pass is restarted by its nanny and the task retried: the build then
    either ends with the local model or, after Dask's retries, with one line naming the limits -- and no
    model file."""
    from distributed import Client, LocalCluster

    path, lines = toy_text
    big = tmp_path / "big.txt"
    big.write_text("\n".join(lines * 5) + "\n", encoding="utf-8")
    out = tmp_path / "oom.arpa"
    with LocalCluster(n_workers=1, threads_per_worker=1, memory_limit=limit, dashboard_address=None) as lc, \
            Client(lc) as client:
        try:
            _build(big, out, smoothing="wb", order=5, dask=client, parts=1)
        except InputError as e:
            msg = str(e)
            assert "died with its worker" in msg and f"worker memory limit {int(limit[:-2]) * 10**6 >> 20} MB" in msg
            assert "\n" not in msg and not out.exists()
            return
    _build(big, tmp_path / "local.arpa", smoothing="wb", order=5)
    assert _sha(out) == _sha(tmp_path / "local.arpa")


def test_every_worker_paused_too_long_is_a_one_line_error_not_a_build_that_never_ends(toy_text, tmp_path, cluster,
                                                                                    monkeypatch):
    """Dask pauses a worker past 80 % of its memory limit; when the memory is the futures the build still
    needs, it never resumes (16 M tokens on one 512 MB worker waited over 10 minutes).  The client watches
    the workers' status while it waits: all of them paused for STALL_SECONDS is one line naming the
    limits and --memory, and no model file."""
    from ngramlm.builder import cluster_estimate

    clock = {"t": 0.0}
    watch = cluster_estimate.PauseWatch(cluster, stall=30, memory=70 << 20, clock=lambda: clock["t"])
    # the real statuses: running, so nothing happens
    assert {st for st, _ in watch.statuses().values()} == {"running"}
    watch.check()
    assert watch.since is None
    # all paused: the clock starts; one worker running again resets it; 30 s all paused is the error
    monkeypatch.setattr(watch, "statuses", lambda: {"a": ("paused", 512 << 20), "b": ("paused", 512 << 20)})
    watch.check()
    clock["t"] = 20.0
    watch.check()
    monkeypatch.setattr(watch, "statuses", lambda: {"a": ("paused", 512 << 20), "b": ("running", 512 << 20)})
    watch.check()
    assert watch.since is None
    monkeypatch.setattr(watch, "statuses", lambda: {"a": ("paused", 512 << 20), "b": ("paused", 512 << 20)})
    watch.check()
    clock["t"] = 50.0
    with pytest.raises(InputError) as e:
        watch.check()
    msg = str(e.value)
    assert "paused for 30 s" in msg and "limit 512 MB each" in msg and "--memory 70 MB" in msg and "\n" not in msg
    # In a build: the waits check the watch; every worker "paused" with no patience left ends it, no file.
    path, _ = toy_text
    monkeypatch.setattr(cluster_estimate, "STALL_SECONDS", 0.0)
    monkeypatch.setattr(cluster_estimate, "POLL_SECONDS", 0.05)
    monkeypatch.setattr(cluster_estimate.PauseWatch, "statuses",
                        lambda self: {"w": ("paused", 256 << 20)})
    cluster.run(cluster_estimate.set_task_delay, 0.3)  # the tasks outlast a poll
    out = tmp_path / "stalled.arpa"
    try:
        with pytest.raises(InputError, match="every Dask worker has been paused"):
            _build(path, out, order=3, dask=cluster, parts=2)
    finally:
        cluster.run(cluster_estimate.set_task_delay, 0.0)
    assert not out.exists()


def test_the_cli_trains_on_workers_and_says_so(toy_text, tmp_path):
    path, _ = toy_text
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    local = tmp_path / "local.arpa"
    subprocess.run([sys.executable, str(ROOT / "cli.py"), "train", str(path), "--order", "3", "-o", str(local)],
                   check=True, capture_output=True, env=env, timeout=300)
    out = tmp_path / "dask.arpa"
    r = subprocess.run([sys.executable, str(ROOT / "cli.py"), "train", str(path), "--order", "3", "--dask", "local:2",
                        "--memory", "300M", "-o", str(out)], capture_output=True, text=True, env=env, timeout=300)
    assert r.returncode == 0, r.stderr
    assert "estimated on the Dask workers" in r.stderr
    assert _sha(out) == _sha(local)


# ----------------------------------------------------------------------------- separate processes over TCP
def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.slow
def test_a_real_scheduler_and_workers_over_tcp_with_a_worker_killed(toy_text, tmp_path):
    """`dask scheduler` and two `dask worker` processes (each its own memory limit, no nanny: a killed
    worker stays dead) on 127.0.0.1; `ngramlm train --dask tcp://...` gives the local model, also when one
    worker is killed with SIGKILL while the model is being estimated."""
    path, _ = toy_text
    dask_bin = Path(sys.executable).with_name("dask")
    if not dask_bin.exists():
        pytest.skip("the dask command is not installed beside this Python")
    port = _free_port()
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    addr = f"tcp://127.0.0.1:{port}"
    procs = [subprocess.Popen([str(dask_bin), "scheduler", "--host", "127.0.0.1", "--port", str(port),
                               "--no-dashboard"], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)]
    try:
        from distributed import Client

        for _ in range(3):
            procs.append(subprocess.Popen([str(dask_bin), "worker", addr, "--nthreads", "1", "--memory-limit", "1GB",
                                           "--no-nanny", "--no-dashboard", "--host", "127.0.0.1"], env=env,
                                          stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
        with Client(addr, timeout="30s") as c:
            c.wait_for_workers(3, timeout=60)
            assert {w["memory_limit"] for w in c.scheduler_info()["workers"].values()} == {10 ** 9}
            c.run(__import__("ngramlm.builder.cluster_estimate", fromlist=["x"]).set_task_delay, 0.1)
        local = tmp_path / "local.arpa"
        subprocess.run([sys.executable, str(ROOT / "cli.py"), "train", str(path), "--order", "4", "-o", str(local)],
                       check=True, capture_output=True, env=env, timeout=300)
        out = tmp_path / "dask.arpa"
        train = subprocess.Popen([sys.executable, str(ROOT / "cli.py"), "train", str(path), "--order", "4", "--dask",
                                  addr, "--memory", "200M", "-o", str(out)], env=env, stdout=subprocess.PIPE,
                                 stderr=subprocess.PIPE, text=True)
        seen = []
        for line in train.stderr:  # kill a worker once estimation is under way
            seen.append(line)
            if "suffixes of order 3 located" in line:
                os.kill(procs[1].pid, signal.SIGKILL)
        assert train.wait(timeout=300) == 0, "".join(seen)
        assert procs[1].poll() is not None  # it is dead, and stayed dead
        assert _sha(out) == _sha(local)
    finally:
        for p in procs:
            p.kill()
            p.wait()
