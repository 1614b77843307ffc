"""Memory-mapped native models: load_native(mmap=True) maps the .npy members in place.

Runs on the embedded toy corpus.  A mapped model must score exactly like an eager one,
load without reading its arrays, and refuse (with an InputError, never a crash) what
cannot be mapped: compressed, pickled or Fortran-ordered members, other dtypes, a
truncated file.  The default (mmap=None) maps only files of MMAP_THRESHOLD_BYTES or more.
"""
from __future__ import annotations

import tracemalloc
import zipfile
from pathlib import Path

import numpy as np
import pytest

from corpora import load_corpus, prepare
from corpora.errors import InputError
from corpora.toy import ToyConfig
from ngramlm import NgramLM
from ngramlm.io import native as io_native
from ngramlm.loading import load_native
from ngramlm.loading import load_any

SMOOTHERS = ["mkn", "addk"]


@pytest.fixture(scope="module")
def ds():
    return prepare(load_corpus("toy", toy_config=ToyConfig(n_train_tokens=40_000, n_valid_tokens=2000,
                                                           n_test_tokens=2000)))


@pytest.fixture(scope="module")
def saved(ds, tmp_path_factory):
    """smoothing -> path of a saved order-4 model (written once per module, never modified)."""
    root = tmp_path_factory.mktemp("mmap_models")
    out = {}
    for smoothing in SMOOTHERS:
        lm = NgramLM(order=4, smoothing=smoothing).fit(ds["train"], vocab=ds.vocab)
        out[smoothing] = root / f"{smoothing}.npz"
        lm.save(out[smoothing])
    return out


def _value_arrays(lm) -> list:
    return lm.log10_prob_ if lm.kind_ == "backoff" else lm.counts_


def _assert_same_scores(a, b, text) -> None:
    sa, sb = a.token_scores(text), b.token_scores(text)
    assert np.array_equal(sa.log10_prob, sb.log10_prob)
    assert np.array_equal(sa.ngram_length, sb.ngram_length)
    assert np.array_equal(sa.oov, sb.oov)


def _rewrite(src: Path, dst: Path, *, compressed: bool = False, **changes) -> Path:
    """A copy of the model in ``src`` with some members replaced, written with np.savez(_compressed)."""
    with np.load(src, allow_pickle=False) as z:
        arrays = {name: z[name] for name in z.files}
    arrays.update(changes)
    (np.savez_compressed if compressed else np.savez)(dst, **arrays)
    return dst


# ---------------------------------------------------------------------------- same model, mapped
@pytest.mark.parametrize("smoothing", SMOOTHERS)
def test_mapped_model_scores_exactly_like_the_eager_one(ds, saved, smoothing):
    eager = load_native(saved[smoothing], mmap=False)
    mapped = load_native(saved[smoothing], mmap=True)
    assert not isinstance(eager.keys_[1], np.memmap)
    for arrays in (mapped.keys_, _value_arrays(mapped)):
        assert all(isinstance(a, np.memmap) for a in arrays)
        assert not any(a.flags.writeable for a in arrays)  # mode 'r': a model cannot scribble on its file
    assert mapped.keys_[1].dtype == np.int64 and _value_arrays(mapped)[1].dtype == np.float64
    if smoothing == "mkn":
        assert isinstance(mapped.log10_prob_[1], np.memmap)
    for k in range(mapped.order_):
        assert np.array_equal(mapped.keys_[k], eager.keys_[k])
    assert mapped.n_ngrams_ == eager.n_ngrams_ and mapped.vocab_.to_dict() == eager.vocab_.to_dict()
    _assert_same_scores(mapped, eager, ds["test"])
    # load_any passes the choice through.
    assert isinstance(load_any(saved[smoothing], mmap=True).keys_[1], np.memmap)
    assert not isinstance(load_any(saved[smoothing], mmap=False).keys_[1], np.memmap)


def test_default_maps_only_files_at_or_above_the_threshold(ds, saved, monkeypatch):
    p = saved["mkn"]
    assert io_native.MMAP_THRESHOLD_BYTES == 64 * 1024 * 1024
    assert not isinstance(load_native(p).keys_[1], np.memmap)  # a toy model is far below 64 MiB
    monkeypatch.setattr(io_native, "MMAP_THRESHOLD_BYTES", p.stat().st_size)  # exactly at the threshold
    lm = load_native(p)
    assert isinstance(lm.keys_[1], np.memmap)
    assert isinstance(load_any(p).keys_[1], np.memmap)
    assert isinstance(NgramLM.load(p).keys_[1], np.memmap)
    _assert_same_scores(lm, load_native(p, mmap=False), ds["test"])
    monkeypatch.setattr(io_native, "MMAP_THRESHOLD_BYTES", p.stat().st_size + 1)
    assert not isinstance(load_native(p).keys_[1], np.memmap)
    monkeypatch.setattr(io_native, "MMAP_THRESHOLD_BYTES", 1 << 62)
    assert not isinstance(load_any(p).keys_[1], np.memmap)


def test_replacing_a_mapped_file_by_saving_over_it_is_safe(ds, saved, tmp_path):
    # save is an atomic rename, so the mapping keeps the old file's bytes.
    p = _rewrite(saved["mkn"], tmp_path / "m.npz")
    mapped = load_native(p, mmap=True)
    before = mapped.token_scores(ds["test"]).log10_prob.copy()
    NgramLM(order=2, smoothing="mkn").fit(ds["train"], vocab=ds.vocab).save(p)
    assert np.array_equal(mapped.token_scores(ds["test"]).log10_prob, before)
    assert load_native(p, mmap=True).order_ == 2


# ---------------------------------------------------------------------------- what cannot be mapped
@pytest.mark.parametrize("smoothing", SMOOTHERS)
def test_a_compressed_file_is_refused_mapped_and_read_eagerly(ds, saved, smoothing, tmp_path, monkeypatch):
    p = _rewrite(saved[smoothing], tmp_path / "z.npz", compressed=True)
    with zipfile.ZipFile(p) as zf:
        assert all(i.compress_type == zipfile.ZIP_DEFLATED for i in zf.infolist())
    with pytest.raises(InputError, match="compressed") as exc:
        load_native(p, mmap=True)
    assert "z.npz" in str(exc.value) and "mmap=False" in str(exc.value)
    eager = load_native(p, mmap=False)
    _assert_same_scores(eager, load_native(saved[smoothing], mmap=False), ds["test"])
    # The default falls back to reading a big file that cannot be mapped (as before this option existed).
    monkeypatch.setattr(io_native, "MMAP_THRESHOLD_BYTES", 1)
    fallback = load_native(p)
    assert not isinstance(fallback.keys_[1], np.memmap)
    _assert_same_scores(fallback, eager, ds["test"])


def test_only_the_saved_dtypes_are_mapped(ds, saved, tmp_path, monkeypatch):
    with np.load(saved["mkn"]) as z:
        keys2, logp2 = z["keys2"], z["logp2"]
    for name, changes in [("i32", {"keys2": keys2.astype(np.int32)}), ("f32", {"logp2": logp2.astype(np.float32)}),
                          ("be", {"keys2": keys2.astype(">i8")})]:
        p = _rewrite(saved["mkn"], tmp_path / f"{name}.npz", **changes)
        with pytest.raises(InputError, match="holds"):
            load_native(p, mmap=True)  # mapping would mean converting a copy
        load_native(p, mmap=False)  # eager converts, as before
        monkeypatch.setattr(io_native, "MMAP_THRESHOLD_BYTES", 1)
        assert not isinstance(load_native(p).keys_[1], np.memmap)
        monkeypatch.undo()


def test_object_and_fortran_members_are_refused(saved, tmp_path):
    with np.load(saved["mkn"]) as z:
        logp1 = z["logp1"]
    # An object array is a pickle inside the .npy: refused before anything could unpickle it.
    p = _rewrite(saved["mkn"], tmp_path / "obj.npz", logp1=np.array(list(logp1), dtype=object))
    with pytest.raises(InputError, match="Python objects"):
        load_native(p, mmap=True)
    with pytest.raises(InputError):
        load_native(p, mmap=False)
    p = _rewrite(saved["mkn"], tmp_path / "fortran.npz", logp1=np.asfortranarray(np.tile(logp1, (2, 1)).T))
    with pytest.raises(InputError, match="Fortran"):
        load_native(p, mmap=True)
    with pytest.raises(InputError):
        load_native(p, mmap=False)


@pytest.mark.parametrize("cut", [1, 22, 100, 5000, "half"])
def test_a_truncated_file_gives_an_input_error(saved, tmp_path, cut):
    raw = saved["mkn"].read_bytes()
    p = tmp_path / "cut.npz"
    p.write_bytes(raw[:len(raw) // 2] if cut == "half" else raw[:-cut])
    for mmap in (True, False, None):
        with pytest.raises(InputError, match="corrupt|truncated") as exc:
            load_native(p, mmap=mmap)
        assert "cut.npz" in str(exc.value)


def test_a_member_cut_short_inside_an_intact_zip_gives_an_input_error(saved, tmp_path):
    """The central directory promises more bytes than the file holds: caught before np.memmap."""
    raw = bytearray(saved["mkn"].read_bytes())
    with zipfile.ZipFile(saved["mkn"]) as zf:
        info = zf.getinfo("keys4.npy")
    # Claim a larger array in keys4's .npy header (same header length), so its size no longer adds up.
    start = raw.index(b"{'descr'", info.header_offset)
    end = raw.index(b"}", start) + 1
    header = raw[start:end].decode("latin1")
    n = int(header.split("'shape': (")[1].split(",")[0])
    bigger = header.replace(f"({n},)", f"({n + 1},)")
    assert len(bigger) == len(header)  # n = 32078 here: same digits
    raw[start:end] = bigger.encode("latin1")
    p = tmp_path / "short.npz"
    p.write_bytes(bytes(raw))
    with pytest.raises(InputError, match="corrupt"):
        load_native(p, mmap=True)


def test_mapped_loading_checks_bounds_but_trusts_the_middle(ds, saved, tmp_path):
    with np.load(saved["mkn"]) as z:
        keys3, keys1 = z["keys3"], z["keys1"]
    # Bounds are checked under mmap: the last key beyond the trie, or keys1 not 0..V-1.
    bad_end = keys3.copy()
    bad_end[-1] = 10 ** 15
    bad_ids = keys1.copy()
    bad_ids[-1] += 1
    for name, changes in [("end", {"keys3": bad_end}), ("ids", {"keys1": bad_ids})]:
        p = _rewrite(saved["mkn"], tmp_path / f"{name}.npz", **changes)
        for mmap in (True, False):
            with pytest.raises(InputError, match="corrupt model file"):
                load_native(p, mmap=mmap)
    # The middle is not read (O(1) load): an unsorted key there only the full check (mmap=False) finds.
    mid = keys3.copy()
    i = len(mid) // 2
    mid[i], mid[i + 1] = mid[i + 1], mid[i]
    p = _rewrite(saved["mkn"], tmp_path / "mid.npz", keys3=mid)
    with pytest.raises(InputError, match="not a sorted list"):
        load_native(p, mmap=False)
    load_native(p, mmap=True)


def test_missing_and_misnamed_members_are_checked_as_before(saved, tmp_path):
    with np.load(saved["mkn"]) as z:
        arrays = {name: z[name] for name in z.files if name != "bo2"}
    np.savez(tmp_path / "missing.npz", **arrays)
    with pytest.raises(InputError, match="'bo2' is missing"):
        load_native(tmp_path / "missing.npz", mmap=True)
    np.savez(tmp_path / "nometa.npz", **{k: v for k, v in arrays.items() if k != "meta"})
    with pytest.raises(InputError, match="no metadata"):
        load_native(tmp_path / "nometa.npz", mmap=True)


# ---------------------------------------------------------------------------- O(1) load
def test_mapped_loading_does_not_read_the_arrays(tmp_path):
    ds = prepare(load_corpus("toy", toy_config=ToyConfig(n_train_tokens=300_000, n_valid_tokens=2000,
                                                         n_test_tokens=2000)))
    lm = NgramLM(order=5, smoothing="mkn").fit(ds["train"], vocab=ds.vocab)
    p = tmp_path / "big.npz"
    lm.save(p)
    total = sum(a.nbytes for a in lm.keys_ + lm.log10_prob_ + lm.log10_backoff_)
    assert total > 4_000_000
    del lm

    def peak(mmap: bool) -> int:
        tracemalloc.start()
        try:
            load_native(p, mmap=mmap)
            return tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()

    eager_peak, mapped_peak = peak(False), peak(True)
    assert eager_peak > total  # the eager load holds every array (the yardstick)
    assert mapped_peak < total / 10, (mapped_peak, total)
    mapped = load_native(p, mmap=True)
    _assert_same_scores(mapped, load_native(p, mmap=False), ds["test"])
