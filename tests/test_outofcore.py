"""Out-of-core estimation (ngramlm.builder.outofcore): the model written from counts on disk is the in-memory model.

A budget of 70 MB counts the 200k-token toy text in about 7 blocks of 30,000 tokens; the merged
counts (about 500k n-grams) would need ~35 MB in memory, far past the 6 MB the budget leaves, so
``estimation="auto"`` estimates them on disk.  The lower-level tests cut the windows and chunks much
smaller still, so every windowed pass and every chunk boundary is exercised.  Equality is exact:
every key, probability and back-off bit for bit, and the ARPA bytes.
"""
from __future__ import annotations

import errno
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from corpora.errors import InputError
from corpora.textio import OutputError
from corpora.vocab import EncodedText
from ngramlm import NgramCounts, NgramLM, accel
from ngramlm.builder import outofcore
from ngramlm.io.arpa import write_arpa
from ngramlm.builder.text_counts import BuildInput, build_counts
from ngramlm.builder.diskarrays import ColumnWriter, count_occurrences, gather
from ngramlm.loading import load_native
from ngramlm.builder.streaming import DiskCounts, RunMerger, TempFolder

ROOT = Path(__file__).resolve().parents[1]
SMALL = "70M"


@pytest.fixture(scope="module")
def toy_text(tmp_path_factory):
    """A 200k-token toy training text as a file, with blank lines (KenLM counts them)."""
    from corpora.testing import toy_training_lines

    lines = toy_training_lines()
    path = tmp_path_factory.mktemp("ooc") / "train.txt"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


@pytest.fixture(scope="module")
def encoded(toy_text):
    from corpora.tokenize import TokenizerSpec, make_tokenizer
    from corpora.vocab import Vocab

    lines = toy_text.read_text(encoding="utf-8").split("\n")[:-1]
    vocab = Vocab(tokenizer=TokenizerSpec())
    enc = vocab.fit_encode_lines(lines, make_tokenizer(TokenizerSpec()), keep_empty=True)
    return enc, vocab


def _same_model(a, b) -> None:
    assert a.vocab_.itos_ == b.vocab_.itos_
    assert a.n_ngrams_ == b.n_ngrams_ and a.order_ == b.order_
    assert a.info_ == b.info_ and a.count_of_counts_ == b.count_of_counts_
    assert a.smoother_name_ == b.smoother_name_ and a.smoother_params_ == b.smoother_params_
    for name in ("keys_", "log10_prob_", "log10_backoff_"):
        for k, (x, y) in enumerate(zip(getattr(a, name), getattr(b, name)), start=1):
            assert np.asarray(x).dtype == np.asarray(y).dtype, (name, k)
            assert np.array_equal(x, y), (name, k)  # bit for bit (-inf where p = 0 included)


def _empty(folder: Path) -> bool:
    return not folder.exists() or not any(folder.iterdir())


# ----------------------------------------------------------------------------- the disk arrays
def test_windowed_gather_and_count_equal_numpy(tmp_path):
    rng = np.random.default_rng(0)
    with TempFolder(tmp_path) as f:
        table = rng.random(10_007)
        idx = rng.integers(0, len(table), 50_001)
        w = ColumnWriter(f, "t", np.float64)
        w.append(table)
        tcol = w.done()
        w = ColumnWriter(f, "i", np.int64)
        w.append(idx[:20_000])
        w.append(idx[20_000:])
        icol = w.done()
        assert len(icol) == len(idx) and np.array_equal(icol.read(123, 4567), idx[123:4567])
        for window, chunk in ((1 << 20, 1 << 20), (1000, 777), (3, 50_001)):
            assert np.array_equal(gather(tcol, icol, f, "g", window=window, chunk=chunk).read_all(), table[idx])
            assert np.array_equal(count_occurrences(icol, len(table), f, "c", window=window, chunk=chunk).read_all(),
                                  np.bincount(idx, minlength=len(table)))
        keys = np.sort(rng.choice(1 << 40, 20_000, replace=False))
        w = ColumnWriter(f, "k", np.int64)
        w.append(keys)
        kcol = w.done()
        for q in (0, int(keys[0]), int(keys[7777]), int(keys[7777]) + 1, int(keys[-1]) + 5):
            assert kcol.searchsorted(q) == np.searchsorted(keys, q)
    assert list(tmp_path.iterdir()) == []


# ----------------------------------------------------------------------------- estimation, chunk by chunk
def _merged_on_disk(enc, vocab, order, folder, n_blocks=6):
    """The counts of ``enc`` cut into blocks, spilled as runs and merged to disk in small rounds."""
    cuts = np.linspace(0, enc.n_sentences, n_blocks + 1).astype(int)
    merger = RunMerger(order=order, vocab_size=len(vocab), folder=folder, memory=70 << 20)
    for i in range(n_blocks):
        a, b = enc.starts[cuts[i]], enc.starts[cuts[i + 1]]
        block = EncodedText(enc.ids[a:b], enc.starts[cuts[i]:cuts[i + 1] + 1] - a)
        merger.add(NgramCounts.from_encoded(block, order=order, vocab_size=len(vocab)))
    return merger.merge_to_disk()


@pytest.mark.parametrize("order,smoothing", [(5, "mkn"), (3, "kn"), (2, "mkn")])
def test_estimation_in_small_windows_and_chunks_is_the_in_memory_model(encoded, tmp_path, monkeypatch, order,
                                                                       smoothing):
    enc, vocab = encoded
    lm = NgramLM(order=order, smoothing=smoothing)
    smoother = lm._make_smoother()
    ref = NgramLM(order=order, smoothing=smoothing).fit(enc, vocab=vocab)
    calls = {"chunks": 0}
    real = outofcore.mkn_alpha_gamma

    def counted(*a, **kw):
        calls["chunks"] += 1
        return real(*a, **kw)

    monkeypatch.setattr(outofcore, "mkn_alpha_gamma", counted)
    V = len(vocab)
    sizes = outofcore.Sizes(chunk=V + 1, window=5000)  # every order of 2+ spans several windows and chunks
    with TempFolder(tmp_path / "tmp") as folder:
        dc = _merged_on_disk(enc, vocab, order, folder)
        # The merge to disk made the counts that counting the whole text makes, suffix rows included.
        whole = NgramCounts.from_encoded(enc, order=order, vocab_size=V)
        loaded = dc.load()
        for k in range(2, order + 1):
            assert dc.size(k) > 2 * sizes.window
            x, y = loaded.tables[k - 1], whole.tables[k - 1]
            assert np.array_equal(x.parent, y.parent) and np.array_equal(x.word, y.word)
            assert np.array_equal(x.count, y.count) and np.array_equal(x.suffix, whole.suffix_index(k))
        dm = outofcore.estimate(dc, smoother, vocab.n_types, folder, 70 << 20, sizes=sizes)
        assert calls["chunks"] >= 1 + sum(dc.size(k) // V for k in range(2, order + 1))
        outofcore.write_native(dm, lm, smoother, vocab, tmp_path / "ooc.npz", chunk=999)
        if accel.fast is not None:
            outofcore.write_arpa(dm, vocab, tmp_path / "ooc.arpa", chunk=999, smoother_name=smoother.name)
        else:  # without the compiled formatter: through a mapped native file and the column writer
            outofcore.write_model(dm, lm, smoother, vocab, tmp_path / "ooc.arpa", arpa=True, memory=70 << 20,
                                  folder=folder)
    assert _empty(tmp_path / "tmp")
    for mmap in (False, True):
        _same_model(load_native(tmp_path / "ooc.npz", mmap=mmap), ref)
    write_arpa(ref, tmp_path / "ref.arpa")
    assert (tmp_path / "ooc.arpa").read_bytes() == (tmp_path / "ref.arpa").read_bytes()
    ref.save(tmp_path / "ref.npz")
    a, b = np.load(tmp_path / "ooc.npz"), np.load(tmp_path / "ref.npz")
    assert a.files == b.files and all(np.array_equal(a[m], b[m]) for m in a.files)  # metadata bytes too


def test_one_block_text_goes_to_disk_as_well(encoded, tmp_path):
    enc, vocab = encoded
    lm = NgramLM(order=4)
    with TempFolder(tmp_path) as folder:
        dc = DiskCounts.from_counts(NgramCounts.from_encoded(enc, order=4, vocab_size=len(vocab)), folder)
        dm = outofcore.estimate(dc, lm._make_smoother(), vocab.n_types, folder, 70 << 20)
        outofcore.write_native(dm, lm, lm._make_smoother(), vocab, folder.path / "m.npz", chunk=10_000)
        got = load_native(folder.path / "m.npz")
    _same_model(got, NgramLM(order=4).fit(enc, vocab=vocab))


# ----------------------------------------------------------------------------- the build and the CLI
@pytest.mark.parametrize("order,smoothing,extra", [(5, "mkn", {}), (4, "kn", {}),
                                                   (3, "mkn", {"discount_fallback": (0.5, 1.0, 1.5)})])
def test_fit_files_out_of_core_is_the_in_memory_model(toy_text, encoded, tmp_path, order, smoothing, extra):
    enc, vocab = encoded
    msgs = []
    lm = NgramLM(order=order, smoothing=smoothing, **extra).fit_files(
        [toy_text], memory=SMALL, temp_dir=tmp_path / "tmp", estimation="auto", progress=msgs.append)
    assert sum("counted block" in m for m in msgs) >= 4  # several runs ...
    assert any("estimating out of core" in m for m in msgs)  # ... too many n-grams for 70 MB: on disk
    assert any(f"estimated order {order}" in m for m in msgs)
    _same_model(lm, NgramLM(order=order, smoothing=smoothing, **extra).fit(enc, vocab=vocab))
    assert _empty(tmp_path / "tmp")
    assert lm.build_stats_ == {"sentences": enc.n_sentences, "words": enc.n_words}


def test_auto_keeps_counts_that_fit_in_memory(toy_text, tmp_path):
    msgs = []
    NgramLM(order=3).fit_files([toy_text], memory="2G", temp_dir=tmp_path, estimation="auto", progress=msgs.append)
    assert not any("out of core" in m for m in msgs)


def test_smoothers_without_an_out_of_core_estimation(toy_text, encoded, tmp_path):
    enc, vocab = encoded
    with pytest.raises(InputError, match="mkn and kn, not wb"):
        NgramLM(order=3, smoothing="wb").fit_files([toy_text], memory=SMALL, temp_dir=tmp_path, estimation="disk")
    lm = NgramLM(order=3, smoothing="wb").fit_files([toy_text], memory=SMALL, temp_dir=tmp_path, estimation="auto")
    _same_model(lm, NgramLM(order=3, smoothing="wb").fit(enc, vocab=vocab))  # auto: in memory, as before


def _cli(args, **kw):
    return subprocess.run([sys.executable, "-m", "cli", "train", *map(str, args)], cwd=ROOT, capture_output=True,
                          text=True, **kw)


def test_cli_writes_the_same_native_and_arpa_files(toy_text, tmp_path):
    tmp = tmp_path / "tmp"
    for suffix in ("npz", "arpa"):
        r = _cli([toy_text, "--order", "5", "-o", tmp_path / f"mem.{suffix}"])
        assert r.returncode == 0, r.stderr
        r = _cli([toy_text, "--order", "5", "--memory", SMALL, "-T", tmp, "-o", tmp_path / f"disk.{suffix}", "--json"])
        assert r.returncode == 0, r.stderr
        assert "smoothing (mkn) out of core" in r.stderr and "estimated out of core" in r.stderr
        assert '"estimation": "disk"' in r.stdout
        assert _empty(tmp)
    assert (tmp_path / "disk.arpa").read_bytes() == (tmp_path / "mem.arpa").read_bytes()
    a, b = np.load(tmp_path / "disk.npz"), np.load(tmp_path / "mem.npz")
    assert a.files == b.files and all(np.array_equal(a[m], b[m]) for m in a.files)
    # Standard output takes the ARPA text, as from the in-memory path.
    r = _cli([toy_text, "--order", "3", "--memory", SMALL, "-T", tmp, "--estimation", "disk", "-o", "-"])
    ref = _cli([toy_text, "--order", "3", "-o", "-"])
    assert r.returncode == 0 and r.stdout == ref.stdout and "out of core" in r.stderr


def test_cli_estimation_memory_and_unsupported_disk(toy_text, tmp_path):
    r = _cli([toy_text, "--order", "3", "--memory", SMALL, "-T", tmp_path, "--estimation", "memory",
              "-o", tmp_path / "m.npz"])
    assert r.returncode == 0 and "out of core" not in r.stderr
    r = _cli([toy_text, "--order", "3", "--smoothing", "wb", "--estimation", "disk", "-o", tmp_path / "w.npz"])
    assert r.returncode == 2 and "--estimation disk" in r.stderr and "not wb" in r.stderr
    r = _cli([toy_text, "--order", "3", "--prune", "0,1,1", "--estimation", "disk", "-o", tmp_path / "p.npz"])
    assert r.returncode == 2 and "pruning" in r.stderr
    assert not (tmp_path / "w.npz").exists() and not (tmp_path / "p.npz").exists()


def test_a_budget_too_small_says_the_minimum(toy_text, tmp_path):
    r = _cli([toy_text, "--order", "5", "--memory", "10M", "--estimation", "disk", "-T", tmp_path / "tmp",
              "-o", tmp_path / "m.npz"])
    assert r.returncode != 0 and "at least 67 MB" in r.stderr and "--memory 67M" in r.stderr
    assert len(r.stderr.strip().splitlines()) <= 2  # the error and its fix, no traceback
    assert not (tmp_path / "m.npz").exists() and _empty(tmp_path / "tmp")


# ----------------------------------------------------------------------------- failures leave nothing
def test_a_full_temp_dir_during_estimation_is_one_line_and_leaves_nothing(toy_text, tmp_path, monkeypatch):
    real = ColumnWriter.append

    class Full:
        def write(self, data):
            raise OSError(errno.ENOSPC, "No space left on device")

    def append(self, a):
        if self.path.name.startswith(("adj", "logp", "lower")):  # the estimation's columns, not the merge's
            self._fh = Full()
        return real(self, a)

    monkeypatch.setattr(ColumnWriter, "append", append)
    with pytest.raises(OutputError) as e:
        NgramLM(order=5).fit_files([toy_text], memory=SMALL, temp_dir=tmp_path / "tmp", estimation="disk")
    assert "No space left" in str(e.value) and "--temp-dir" in str(e.value) and "\n" not in e.value.message
    assert _empty(tmp_path / "tmp")


def test_ctrl_c_during_estimation_or_writing_removes_everything(toy_text, tmp_path, monkeypatch):
    lm = NgramLM(order=4)

    def interrupted(*a, **kw):
        raise KeyboardInterrupt

    out = tmp_path / "m.npz"

    def on_disk(dc, vocab, folder, mem):
        dm = outofcore.estimate(dc, lm._make_smoother(), vocab.n_types, folder, mem)
        outofcore.write_model(dm, lm, lm._make_smoother(), vocab, out, arpa=False, memory=mem, folder=folder)

    for where in ("_order_pass", "_stream"):
        with monkeypatch.context() as m:
            m.setattr(outofcore, where, interrupted)
            with pytest.raises(KeyboardInterrupt):
                build_counts(BuildInput([toy_text]), order=4, memory=SMALL, temp_dir=tmp_path / "tmp",
                             estimation="disk", on_disk=on_disk)
        assert _empty(tmp_path / "tmp") and not out.exists(), where
        assert [p.name for p in tmp_path.iterdir()] == ["tmp"]  # no half-written model or its temp file
