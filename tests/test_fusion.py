"""The tensor form of the n-gram models (``fusion``): every value the scorer's, batched, on any device.

Each check walks whole test texts token by token, all sentences of a batch in lockstep as a decoder
would (``start``, then ``log_probs``/``advance``), and compares with the model file's own scorer
(``token_scores``): the float64 log10 values to 1e-12 (the toolkit's tables) or bit for bit (KenLM
binaries, float32 sums as KenLM's), the float32 natural-log outputs bit for bit against the scorer's
value rounded to float32, and every full distribution summing to one.
"""
from __future__ import annotations

import math

import numpy as np
import pytest

from conftest import needs

pytestmark = needs("torch")

torch = pytest.importorskip("torch")

from corpora import load_corpus, prepare  # noqa: E402
from corpora.errors import InputError  # noqa: E402
from corpora.toy import ToyConfig  # noqa: E402
from ngramlm import NgramLM  # noqa: E402
from ngramlm.io.arpa import write_arpa  # noqa: E402
from ngramlm.loading import load_any  # noqa: E402
from ngramlm.scorer import Scorer  # noqa: E402


def walk(t, text, *, max_sentences=None, batch=128, full64=True):
    """Every predicted token of ``text`` (EncodedText) scored through the tensor form ``t``: the value of
    the float64 log10 distribution at the token (``full64``), the single-token query's, the float32
    ln output at the token, and the largest |sum - 1| of any distribution (the float64 ones, else the
    float32 ones).  Sentences go in batches of similar length, in lockstep as a decoder's beams."""
    starts = text.starts
    n_s = len(starts) - 1 if max_sentences is None else min(max_sentences, len(starts) - 1)
    lens = np.diff(starts)[:n_s]
    L = int(lens.max())
    ids = np.full((n_s, L), 2, dtype=np.int64)
    pos = np.arange(L)[None, :]
    mask = pos < lens[:, None]
    ids[mask] = text.ids[: int(starts[n_s])]
    full, single = np.zeros((n_s, L)), np.zeros((n_s, L))
    ln32 = np.zeros((n_s, L), dtype=np.float32)
    worst = 0.0
    by_len = np.argsort(lens, kind="stable")
    for a in range(0, n_s, batch):
        rows = by_len[a: a + batch]
        st = t.start(len(rows))
        for j in range(int(lens[rows].max())):
            tok = torch.as_tensor(ids[rows, j])
            live = lens[rows] > j
            lp = t.log_probs(st)
            assert lp.dtype == torch.float32 and lp.shape == (len(rows), t.V)
            ln32[rows, j] = lp.gather(1, tok[:, None]).squeeze(1).numpy()
            single[rows, j] = t.token_log10_probs(st, tok).double().numpy()
            if full64:
                lp10 = t.log10_probs(st)
                full[rows, j] = lp10.gather(1, tok[:, None]).squeeze(1).double().numpy()
                sums = torch.exp(lp10.double() * math.log(10.0)).sum(1).numpy()
            else:
                sums = torch.exp(lp.double()).sum(1).numpy()
            worst = max(worst, float(np.abs(sums[live] - 1).max()))
            st = t.advance(st, tok)
    if not full64:
        return single[mask], ln32[mask], worst
    return full[mask], single[mask], ln32[mask], worst


def reference(path_or_model, sentences, max_sentences=None):
    """The scorer's log10 of every predicted token (the file loaded as ``ngramlm ppl`` loads it)."""
    sc = load_any(path_or_model) if not isinstance(path_or_model, Scorer) else path_or_model
    sents = sentences if max_sentences is None else sentences[:max_sentences]
    enc, oov = sc.encode(sents)
    return enc, sc.token_scores(enc, oov=oov).log10_prob


def assert_within(got, ref, tol):
    """Equal where the scorer says probability 0 (-inf: an OOV under stupid backoff), within ``tol`` elsewhere."""
    np.testing.assert_array_equal(np.isneginf(got), np.isneginf(ref))
    fin = np.isfinite(ref)
    assert np.abs(got[fin] - ref[fin]).max() <= tol


def check_exact(t, ref_model, sentences, *, tol=1e-12, sums=1e-12, max_sentences=None):
    enc, ref = reference(ref_model, sentences, max_sentences)
    full, single, ln32, worst = walk(t, enc)
    assert len(full) == len(ref) > 100
    assert_within(full, ref, tol)
    assert_within(single, ref, tol)
    # The float32 output is the scorer's value in natural log, rounded once.
    np.testing.assert_array_equal(ln32, (ref * math.log(10.0)).astype(np.float32))
    if sums is not None:
        assert worst <= sums, worst
    return ref


@pytest.fixture(scope="module")
def toy():
    return prepare(load_corpus("toy", toy_config=ToyConfig(n_train_tokens=20_000, n_valid_tokens=1_000,
                                                             n_test_tokens=2_000, vocab_size=500)))


@pytest.fixture(scope="module")
def sentences(toy):
    return [list(s) for s in toy.corpus.sentences("test")]


@pytest.mark.parametrize("order", [1, 2, 3, 4])
def test_every_test_token_and_distribution_is_the_scorers(toy_dataset, order):
    from fusion import tensor_lm

    lm = NgramLM(order=order, smoothing="mkn").fit(toy_dataset["train"], vocab=toy_dataset.vocab)
    t = tensor_lm(lm)
    assert t.order == order and t.V == len(toy_dataset.vocab) and t.dtype == torch.float64
    ref = lm.token_scores(toy_dataset["test"]).log10_prob
    full, single, ln32, worst = walk(t, toy_dataset["test"])
    assert len(full) == len(ref) == 5006
    assert np.abs(full - ref).max() <= 1e-12 and np.abs(single - ref).max() <= 1e-12
    np.testing.assert_array_equal(ln32, (ref * math.log(10.0)).astype(np.float32))
    assert worst <= 1e-12
    # The scorer's next-token distribution, for a context from <s> and for the null context.
    ctx = ["<s>"] + [toy_dataset.vocab.itos_[i] for i in (20, 21, 22)]
    st = t.start(1)
    for w in ctx[1:]:
        st = t.advance(st, torch.tensor([toy_dataset.vocab[w]]))
    np.testing.assert_allclose(10 ** t.log10_probs(st)[0].numpy(), lm.next_probs(ctx), rtol=1e-12, atol=0)
    np.testing.assert_allclose(10 ** t.log10_probs(t.start(1, bos=False))[0].numpy(), lm.next_probs([]),
                               rtol=1e-12, atol=0)


def _drop_suffixes(tables, fraction=0.5):
    """Tables that are not suffix-closed (what SRILM pruning can leave): half the top-but-one order's
    n-grams that extend nothing but end a top-order n-gram are removed, the top order's context rows
    renumbered.  The model no longer sums to one; it must still be scored as the scorer scores it."""
    n, V = tables.order, tables.V
    keys = tables.keys[n - 2]
    extends = np.zeros(len(keys), dtype=bool)
    extends[tables.keys[n - 1] // V] = True
    suffix = np.zeros(len(keys), dtype=bool)
    suf = tables.suffix_rows()[n - 1]
    suffix[suf[suf >= 0]] = True
    cand = np.flatnonzero(~extends & suffix)
    drop = np.random.default_rng(0).choice(cand, size=int(len(cand) * fraction), replace=False)
    keep = np.ones(len(keys), dtype=bool)
    keep[drop] = False
    shift = np.cumsum(~keep)
    ctx = tables.keys[n - 1] // V
    ks, lp, bo = list(tables.keys), list(tables.log10_prob), list(tables.log10_backoff)
    ks[n - 2], lp[n - 2], bo[n - 2] = keys[keep], lp[n - 2][keep], bo[n - 2][keep]
    ks[n - 1] = (ctx - shift[ctx]) * V + tables.keys[n - 1] % V
    out = tables.replace(keys=ks, log10_prob=lp, log10_backoff=bo, info={})
    assert not out.is_suffix_closed()
    return out


@pytest.fixture(scope="module")
def files(toy, tmp_path_factory, sentences):
    """One toy 4-gram in every form the toolkit reads, each with the scorer it is compared with."""
    from ngramlm.kenlm.write import BinaryOptions, write_binary
    from ngramlm.tools.pruning import prune_entropy

    from conftest import invoke_cli

    d = tmp_path_factory.mktemp("fusion")
    lm = NgramLM(order=4, smoothing="mkn").fit(toy["train"], vocab=toy.vocab)
    out = {"lm": lm}
    write_arpa(lm, d / "m.arpa")
    out["arpa"] = d / "m.arpa"
    lm.save(d / "m.npz")
    out["native"] = d / "m.npz"
    for name, opts in {"trie": BinaryOptions(kind="trie"), "trie-q8-b8-a22": BinaryOptions(kind="trie", prob_bits=8,
                                                                                        backoff_bits=8, array_bits=22),
                       "probing": BinaryOptions(kind="probing")}.items():
        write_binary(lm, d / f"m.{name}.bin", opts)
        out[name] = d / f"m.{name}.bin"
    wb = NgramLM(order=3, smoothing="wb").fit(toy["train"], vocab=toy.vocab)
    write_arpa(wb, d / "wb.arpa")
    code, _, err = invoke_cli(["mix", d / "m.arpa", d / "wb.arpa", "-o", d / "mix.arpa", "--lambda", "0.6,0.4"])
    assert code == 0, err
    out["mixture"] = d / "mix.arpa"
    write_arpa(Scorer(prune_entropy(lm, 2e-5)), d / "pruned.arpa")
    out["pruned"] = d / "pruned.arpa"
    out["not-suffix-closed"] = Scorer(_drop_suffixes(lm.tables_))
    out["katz"] = NgramLM(order=3, smoothing="katz", discount_fallback=True).fit(toy["train"], vocab=toy.vocab)
    out["stupid"] = NgramLM(order=3, smoothing="stupid").fit(toy["train"], vocab=toy.vocab)
    return out


# what each form sums to: 1 to float64's or float32's precision, or the numbers' as written
# (an ARPA file's 7 digits: 1e-6), a quantised trie, a model whose suffixes were dropped and stupid
# backoff are not distributions (nothing to check)
SUMS = {"arpa": 1e-6, "native": 1e-12, "trie": 2e-6, "trie-q8-b8-a22": None, "probing": 2e-6, "mixture": 1e-6,
        "pruned": 1e-6, "not-suffix-closed": None, "katz": 1e-12, "stupid": None}


@pytest.mark.parametrize("form", list(SUMS))
def test_every_form_the_toolkit_reads(files, sentences, form):
    from fusion import NgramTensorLM, ProbingTensorLM, tensor_lm

    src = files[form]
    t = tensor_lm(src)
    assert isinstance(t, ProbingTensorLM if form == "probing" else NgramTensorLM)
    # KenLM binaries hold float32 and are summed in float32, as KenLM (and their scorer) does -- except a
    # trie without the compiled extension, which the loader decodes into float64 tables (an NgramLM whose
    # scorer, and so its tensor form, sums in float64).
    from ngramlm import accel

    kenlm_sums = form.startswith("probing") or (form.startswith("trie") and accel.fast is not None)
    assert t.dtype == (torch.float32 if kenlm_sums else torch.float64)
    tol = 0.0 if kenlm_sums else 1e-12
    check_exact(t, src, sentences, tol=tol, sums=SUMS[form])


def test_states_reorder_as_a_beam_search_reorders_them(files, toy):
    from fusion import tensor_lm

    t = tensor_lm(files["lm"])
    words = torch.as_tensor(toy["test"].ids[:12])
    st = t.start(3)
    for w in words[:5]:
        st = t.advance(st, torch.stack([w, words[6], w]))
    # Hypotheses 0 and 2 saw the same tokens: the same state, so a decoder may recombine them.
    assert torch.equal(st[0], st[2]) and not torch.equal(st[0], st[1])
    keep = torch.tensor([1, 1, 0])
    moved = t.reorder(st, keep)
    assert torch.equal(moved, st.index_select(0, keep))
    assert torch.equal(t.log_probs(moved), t.log_probs(st)[keep])
    nxt = torch.tensor([5, 6, 7])
    assert torch.equal(t.advance(moved, nxt), torch.stack([t.advance(st[i: i + 1], nxt[j: j + 1])[0]
                                                           for j, i in enumerate(keep.tolist())]))


def test_a_decoder_vocabulary_maps_onto_the_model(files, toy):
    from fusion import tensor_lm

    t = tensor_lm(files["lm"])
    words = [toy.vocab.itos_[9], "not-a-word", "</s>"]
    cols = t.ids(words)
    assert cols.tolist() == [9, toy.vocab.unk_id, toy.vocab.eos_id]
    lp = t.log_probs(t.start(2))
    assert torch.equal(lp.index_select(1, cols)[:, 0], lp[:, 9])


def test_the_tables_are_the_models_own_arrays_on_cpu_and_copied_once_to_a_device(files):
    from fusion import tensor_lm

    lm = files["lm"]
    t = tensor_lm(lm)
    # float64 on CPU: the tensors share the model's numpy arrays (no copy) ...
    for k in range(lm.order_):
        assert t.lp[k].data_ptr() == lm.log10_prob_[k].__array_interface__["data"][0]
        assert t.keys[k].data_ptr() == lm.keys_[k].__array_interface__["data"][0]
    # ... and hold the tables plus one int64 offset per context row (and one more per order).
    tables = sum(a.nbytes for col in (lm.keys_, lm.log10_prob_, lm.log10_backoff_) for a in col)
    assert t.nbytes == tables + 8 * sum(len(k) + 1 for k in lm.keys_[:-1])
    # float32 values (devices without float64): within float32's precision of the float64 ones.
    t32 = t.to("cpu", dtype=torch.float32)
    assert t32.lp[0].dtype == torch.float32 and t32.nbytes < t.nbytes
    st = t.start(4)
    a, b = t.log10_probs(st), t32.log10_probs(st).double()
    fin = torch.isfinite(a)
    assert torch.equal(fin, torch.isfinite(b)) and (a[fin] - b[fin]).abs().max() < 1e-5


@pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device here")
def test_on_a_cuda_device_the_values_are_the_cpu_ones(files, toy):
    from fusion import tensor_lm

    for form in ("native", "probing"):
        cpu = tensor_lm(files[form])
        gpu = cpu.to("cuda")
        st = cpu.start(8)
        sg = gpu.start(8)
        for w in toy["test"].ids[:6]:
            tok = torch.full((8,), int(w))
            st, sg = cpu.advance(st, tok), gpu.advance(sg, tok.cuda())
            assert torch.equal(st, sg.cpu())
            assert torch.equal(cpu.log_probs(st), gpu.log_probs(sg).cpu())


def test_bad_input_says_what_to_do(toy):
    from fusion import tensor_lm

    addk = NgramLM(order=2, smoothing="addk").fit(toy["train"], vocab=toy.vocab)
    with pytest.raises(InputError, match="additive.*fix: use a model smoothed with"):
        tensor_lm(addk)
    t = tensor_lm(NgramLM(order=3, smoothing="mkn").fit(toy["train"], vocab=toy.vocab))
    with pytest.raises(InputError, match=r"states must be \[batch, 2\].*start\(batch\)"):
        t.log_probs(torch.zeros((2, 3), dtype=torch.long))
    with pytest.raises(InputError, match="one token per state"):
        t.advance(t.start(2), torch.tensor([1, 2, 3]))


@pytest.mark.slow
def test_ptb_every_test_token_and_every_distribution(shared_corpora):
    """The issue's check: a 3-gram on PTB train, every one of PTB test's 82,430 predicted tokens, the
    whole float32 distribution at each (float64 ones are checked on the toy language above)."""
    from fusion import tensor_lm

    ptb = prepare(load_corpus("ptb", data_dir=shared_corpora))
    lm = NgramLM(order=3, smoothing="mkn").fit(ptb["train"], vocab=ptb.vocab)
    ref = lm.token_scores(ptb["test"]).log10_prob
    single, ln32, worst = walk(tensor_lm(lm), ptb["test"], batch=256, full64=False)
    assert len(ln32) == len(ref) == 82_430
    assert np.abs(single - ref).max() <= 1e-12
    np.testing.assert_array_equal(ln32, (ref * math.log(10.0)).astype(np.float32))
    assert worst <= 1e-6  # measured 5.1e-8: float32 entries, summed in float64
