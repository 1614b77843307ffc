"""The ∞-gram on a suffix array: counts equal the n-gram counter's and a brute-force scan, the longest
matching history is the longest, and its mixtures are distributions."""
from __future__ import annotations

import json
import os

import numpy as np
import pytest

from corpora import Vocab
from corpora.errors import InputError
from corpora.vocab import BOS_ID, EOS_ID, EncodedText
from ngramlm import NgramCounts, NgramLM, accel
from ngramlm.counts import padded_stream
from ngramlm.infini.index import InfiniIndex, mixture_log10, tune_lambdas

# Every test here runs on whichever implementation is present (NGRAMLM_NO_EXT=1: the numpy searches);
# the last ones compare the two directly where the extension is built.
needs_ext = pytest.mark.skipif(accel.fast is None, reason=f"compares with the compiled extension: "
                                                          f"{accel.describe()}")


@pytest.fixture(scope="module")
def toy():
    from corpora import load_corpus, prepare
    from corpora.toy import ToyConfig

    ds = prepare(load_corpus("toy", toy_config=ToyConfig(n_train_tokens=60_000, n_valid_tokens=3000,
                                                          n_test_tokens=3000)))
    return ds, InfiniIndex.build(ds["train"], ds.vocab)


def _brute_count(stream: np.ndarray, pat) -> int:
    L = len(pat)
    if L == 0:
        return len(stream)
    win = np.lib.stride_tricks.sliding_window_view(stream, L)
    return int(np.all(win == np.asarray(pat), axis=1).sum())


def _check_counts_up_to_12(idx, train, V: int, per_order: int) -> None:
    """A random sample of every order's n-grams: the index counts them as the n-gram counter does."""
    counts = NgramCounts.from_encoded(train, order=12, vocab_size=V)
    rng = np.random.default_rng(0)
    for k in range(1, 13):
        grams, cnt = counts.ngrams(k), counts.tables[k - 1].count
        nz = np.flatnonzero(cnt)
        sel = rng.choice(nz, min(per_order, len(nz)), replace=False)
        assert np.array_equal(idx.count_ids([list(map(int, g)) for g in grams[sel]]), cnt[sel]), k


def test_counts_equal_the_ngram_counter_for_every_order_up_to_12(toy):
    ds, idx = toy
    _check_counts_up_to_12(idx, ds["train"], len(ds.vocab), 300)


def test_counts_equal_a_brute_force_scan_including_absent_and_boundary_patterns(toy):
    ds, idx = toy
    stream, _ = padded_stream(ds["train"])
    rng = np.random.default_rng(1)
    pats = []
    for _ in range(300):
        L = int(rng.integers(1, 7))
        i = int(rng.integers(0, len(stream) - L))
        p = stream[i:i + L].tolist()
        if rng.random() < 0.3:  # perturb: mostly absent patterns
            p[int(rng.integers(0, L))] = int(rng.integers(0, len(ds.vocab)))
        pats.append(p)
    pats += [[EOS_ID, BOS_ID], [BOS_ID], [EOS_ID], [BOS_ID, BOS_ID]]
    got = idx.count_ids(pats)
    assert [int(x) for x in got] == [_brute_count(stream, p) for p in pats]
    assert idx.count_ids([[]])[0] == len(stream)


def test_the_longest_matching_history_and_its_counts_equal_brute_force(toy):
    ds, idx = toy
    stream, _ = padded_stream(ds["train"])
    test = ds["test"]
    s = idx.score(test)
    toks, pos = padded_stream(test)
    t_pred = np.flatnonzero(pos > 0)
    rng = np.random.default_rng(2)
    for j in rng.choice(len(t_pred), 150, replace=False):
        t = t_pred[j]
        hist = toks[t - pos[t]:t].tolist()
        L = max(L for L in range(0, len(hist) + 1) if L == 0 or _brute_count(stream, hist[len(hist) - L:]) > 0)
        h = hist[len(hist) - L:]
        assert s.eff_n[j] == L + 1
        if L:
            assert s.cnt_h[j] == _brute_count(stream, h)
        assert s.cnt_hw[j] == _brute_count(stream, h + [int(toks[t])])
    # Effective n 1 (no suffix of the history occurs) only right after a word training never had.
    unseen = np.flatnonzero(s.eff_n == 1)
    prev = toks[t_pred[unseen] - 1]
    assert all(_brute_count(stream, [int(w)]) == 0 for w in prev)


def test_capped_effective_n_is_a_fixed_order_mle_with_backoff_to_seen_contexts(toy):
    ds, idx = toy
    full = idx.score(ds["test"])
    for max_n in (1, 2, 3, 5):
        capped = idx.score(ds["test"], max_n=max_n)
        # every suffix of an occurring history occurs: the capped match is the full one, cut at max_n
        assert (capped.eff_n == np.minimum(full.eff_n, max_n)).all()
        same = full.eff_n <= max_n
        assert (capped.cnt_h[same] == full.cnt_h[same]).all() and (capped.cnt_hw[same] == full.cnt_hw[same]).all()


@pytest.mark.parametrize("context", [["<s>"], ["<s>", "the"], [], ["zzz_unknown", "and"]])
def test_next_probs_sum_to_one_and_agree_with_score(toy, context):
    ds, idx = toy
    words = [w for w in ds.vocab.itos_[4:50]]
    ctx = context if not context or context[0] == "<s>" else context
    ctx = [w if w in ("<s>",) or w in ds.vocab.stoi_ or w.startswith("zzz") else words[0] for w in ctx]
    p = idx.next_probs(ctx)
    assert p[BOS_ID] == 0 and abs(p.sum() - 1) < 1e-12


def test_score_probability_equals_next_probs_at_that_position(toy):
    ds, idx = toy
    sent = [w for w in ds.corpus.sentences("test")[0]]
    enc = ds.vocab.encode_sentences([sent])
    s = idx.score(enc)
    for i in range(len(sent) + 1):
        ctx = ["<s>"] + sent[:i]
        w = enc.ids[i]
        assert s.prob[i] == pytest.approx(idx.next_probs(ctx)[w], abs=1e-12)


def test_mixtures_with_mkn_are_distributions(toy):
    ds, idx = toy
    lm = NgramLM(order=3, smoothing="mkn").fit(ds["train"], vocab=ds.vocab)
    sent = ds.corpus.sentences("test")[1]
    for i in range(0, len(sent), 3):
        ctx = ["<s>"] + sent[:i]
        for lam in (0.0, 0.3, 0.9):
            p = lam * idx.next_probs(ctx) + (1 - lam) * lm.next_probs(ctx)
            assert abs(p.sum() - 1) < 1e-9
    # the per-token mixture equals the distribution's entry
    enc = ds.vocab.encode_sentences([sent])
    s = idx.score(enc)
    other = lm.token_scores(enc).log10_prob
    mixed = mixture_log10(s, other, (0.4, 0.2))
    lam = np.where(s.sparse, 0.4, 0.2)
    for i in range(len(sent) + 1):
        ctx = ["<s>"] + sent[:i]
        p = lam[i] * idx.next_probs(ctx) + (1 - lam[i]) * lm.next_probs(ctx)
        assert 10 ** mixed[i] == pytest.approx(p[enc.ids[i]], rel=1e-9)


def test_tuned_weights_maximise_held_out_likelihood(toy):
    ds, idx = toy
    lm = NgramLM(order=3, smoothing="mkn").fit(ds["train"], vocab=ds.vocab)
    s, other = idx.score(ds["valid"]), lm.token_scores(ds["valid"]).log10_prob
    lam = tune_lambdas(s, other)
    best = mixture_log10(s, other, lam).sum()
    for a in (0.0, 0.2, 0.5, 0.8):
        for b in (0.0, 0.2, 0.5, 0.8):
            assert mixture_log10(s, other, (a, b)).sum() <= best + 1e-9
    assert best >= other.sum() - 1e-9  # lambda = 0 is among the candidates


def test_index_is_six_bytes_a_token_and_saves_memory_mappable(toy, tmp_path):
    ds, idx = toy
    assert idx.tokens.dtype == np.uint16 and idx.sa.dtype == np.int32
    assert idx.nbytes / len(idx.tokens) == 6.0
    idx.save(tmp_path / "i.npz")
    back = InfiniIndex.load(tmp_path / "i.npz")
    assert isinstance(back.sa, np.memmap) and np.array_equal(back.sa, idx.sa)
    assert back.vocab.itos_ == ds.vocab.itos_ and back.n_sentences == idx.n_sentences
    s1, s2 = idx.score(ds["test"]), back.score(ds["test"])
    assert np.array_equal(s1.cnt_hw, s2.cnt_hw) and np.array_equal(s1.eff_n, s2.eff_n)
    raw = (tmp_path / "i.npz").read_bytes()
    (tmp_path / "cut.npz").write_bytes(raw[: len(raw) // 2])
    with pytest.raises(InputError, match="rebuild"):
        InfiniIndex.load(tmp_path / "cut.npz")
    with pytest.raises(InputError, match="no such index"):
        InfiniIndex.load(tmp_path / "missing.npz")


def test_a_sentence_end_never_joins_two_sentences():
    sents = [["a", "b"], ["b", "c"], ["a", "b"]]
    vocab = Vocab().fit(sents)
    idx = InfiniIndex.build(vocab.encode_sentences(sents), vocab)
    assert idx.count(["b", "c"]) == 1 and idx.count(["a", "b"]) == 2
    assert idx.count(["b", "b"]) == 0  # "a b </s> <s> b c": no match across </s>
    assert idx.count(["b", "</s>", "<s>", "b"]) == 1  # only when the pattern spells the boundary out
    enc = vocab.encode_sentences([["c", "b"]])
    s = idx.score(enc)
    # c | <s>: "<s>" (3 times) never followed by c.  b | <s> c: "<s> c" unseen, "c" once, never
    # followed by b.  </s> | <s> c b: "c b" unseen, "b" 3 times, twice followed by </s>.
    assert s.eff_n.tolist() == [2, 2, 2]
    assert s.cnt_h.tolist() == [3, 1, 3] and s.cnt_hw.tolist() == [0, 0, 2]


def test_cli_build_count_and_ppl(run_cli, tmp_path):
    text = tmp_path / "t.txt"
    text.write_text("a b c\nb c d\na b c d\n\nc d a\n", encoding="utf-8")
    code, out, err = run_cli("infini", "build", text, "-o", tmp_path / "i.npz", "--json")
    assert code == 0, err
    info = json.loads(out)
    # 13 words, 5 sentences (the blank line is one, as KenLM counts it), each with <s> and </s>
    assert info["tokens"] == 13 + 5 + 5 and info["bytes_per_token"] == 6.0
    code, out, _ = run_cli("infini", "count", tmp_path / "i.npz", "b", "c")
    assert code == 0 and out.split("\t")[0] == "3"
    code, out, err = run_cli("infini", "ppl", tmp_path / "i.npz", text, "--json")
    assert code == 0, err
    d = json.loads(out)
    assert d["tokens"] == 18 and d["zero_probability_share"] == 0.0  # scored on its own training text
    code, _, err = run_cli("train", text, "--order", "2", "-s", "wb", "-o", tmp_path / "m.npz")
    assert code == 0, err
    code, out, err = run_cli("infini", "ppl", tmp_path / "i.npz", text, "--mix", tmp_path / "m.npz",
                             "--tune-on", text, "--json")
    assert code == 0, err
    d = json.loads(out)
    assert d["mixture"]["ppl"] <= d["other"]["ppl"] + 1e-9 and set(d["lambdas"]) == {"sparse", "dense"}


@pytest.mark.slow
def test_ptb_counts_equal_the_counter_up_to_order_12(shared_corpora):
    from corpora import load_corpus, prepare

    ds = prepare(load_corpus("ptb", data_dir=str(shared_corpora)))
    idx = InfiniIndex.build(ds["train"], ds.vocab)
    _check_counts_up_to_12(idx, ds["train"], len(ds.vocab), 2000)
    s = idx.score(ds["test"])
    assert len(s.eff_n) == 82430 and s.eff_n.min() >= 2  # PTB's vocabulary is closed: every word occurs


def test_streamed_build_from_files_equals_the_in_memory_build(toy, tmp_path):
    ds, idx = toy
    lines = [" ".join(s) for s in ds.corpus.sentences("train")]
    (tmp_path / "a.txt").write_text("\n".join(lines[:500]) + "\n", encoding="utf-8")
    (tmp_path / "b.txt").write_text("\n".join(lines[500:]) + "\n", encoding="utf-8")
    streamed = InfiniIndex.build_from_files([tmp_path / "a.txt", tmp_path / "b.txt"], temp_dir=tmp_path / "tmp")
    assert streamed.vocab.itos_[4:] == sorted(streamed.vocab.itos_[4:], key=lambda w: (-streamed.vocab.counts_[w], w))
    vocab = Vocab().fit([s.split() for s in lines])
    ref = InfiniIndex.build(vocab.encode_sentences([s.split() for s in lines]), vocab)
    assert streamed.vocab.itos_ == ref.vocab.itos_
    assert np.array_equal(streamed.tokens, ref.tokens) and np.array_equal(streamed.sa, ref.sa)
    assert streamed.n_sentences == ref.n_sentences and not any((tmp_path / "tmp").iterdir())


def test_accuracy_by_effective_n_is_the_argmax_of_the_continuation_counts(toy):
    ds, idx = toy
    stream, _ = padded_stream(ds["train"])
    te = ds["test"]
    sub = EncodedText(te.ids[: te.starts[40]], te.starts[:41])  # 40 test sentences, every position
    s = idx.score(sub)
    rows = idx.accuracy_by_n(sub, s, per_bucket=10_000)
    assert sum(r["positions"] for r in rows) == len(s.eff_n) and all(r["sampled"] == r["positions"] for r in rows)
    toks, pos = padded_stream(sub)
    right: dict = {}
    for j, t in enumerate(np.flatnonzero(pos > 0)):  # brute force: the most frequent continuation of h'
        L = int(s.eff_n[j]) - 1
        if L:
            win = np.lib.stride_tricks.sliding_window_view(stream[:-1], L)
            nxt = stream[L:][np.all(win == toks[t - L:t], axis=1)]
        else:
            nxt = stream
        c = np.bincount(nxt, minlength=len(ds.vocab))
        c[BOS_ID] = 0
        right.setdefault(min(int(s.eff_n[j]), 10), []).append(int(np.argmax(c) == toks[t]))
    assert {r["effective_n"]: r["accuracy"] for r in rows} == {k: sum(v) / len(v) for k, v in right.items()}


def test_mixtures_with_a_neural_model_are_distributions(toy):
    """∞-gram + neural: the neural model's next-token distribution (ids 0-1 impossible) mixed with P∞
    sums to one for every context, and the per-token mixture is that distribution's entry."""
    torch = pytest.importorskip("torch")
    from neural.config import RNNConfig
    from neural.data import with_start
    from neural.evaluation import token_log_probs
    from neural.models import build_model

    ds, idx = toy
    V = len(ds.vocab)
    model = build_model("rnn", RNNConfig(vocab_size=V, cell="lstm", emb_size=8, hidden_size=8, n_layers=1,
                                         dropout=0.0), seed=0).eval()
    sent = ds.corpus.sentences("test")[2]
    enc = ds.vocab.encode_sentences([sent])
    s = idx.score(enc)
    nn_log10 = token_log_probs(model, enc.ids) / np.log(10)
    lam = (0.35, 0.15)
    mixed = mixture_log10(s, nn_log10, lam)
    stream = with_start(enc.ids)  # the neural model reads a sentence start as the </s> before it
    with torch.no_grad():
        logits, _, _ = model(torch.as_tensor(np.asarray(stream[:-1]), dtype=torch.long)[None, :], None, None)
    p_nn = torch.softmax(logits[0].double(), dim=-1).numpy()
    for i in range(len(enc.ids)):
        ctx = ["<s>"] + sent[:i]
        lam_i = lam[0] if s.sparse[i] else lam[1]
        p = lam_i * idx.next_probs(ctx) + (1 - lam_i) * p_nn[i]
        assert abs(p.sum() - 1) < 1e-9 and p[0] == p[1] == 0
        assert 10 ** mixed[i] == pytest.approx(p[enc.ids[i]], rel=1e-6)


def test_review_regressions_max_n_empty_text_stdin_and_unknown_words(toy, tmp_path, run_cli):
    ds, idx = toy
    assert (idx.score(ds["test"], max_n=1).eff_n == 1).all()  # 1 means no history, not unbounded
    with pytest.raises(InputError, match="max_n"):
        idx.score(ds["test"], max_n=-1)
    (tmp_path / "blank.txt").write_text("\n\n\n", encoding="utf-8")
    with pytest.raises(InputError, match="no tokens"):
        InfiniIndex.build_from_files([tmp_path / "blank.txt"], temp_dir=tmp_path / "tmp")
    text = "the cat sat\nthe dog sat\nthe cat ran\nthe emu ran\n"
    code, _, err = run_cli("infini", "build", "--stream", "-", "-o", tmp_path / "s.npz", "--min-count", "2",
                           input=text)
    assert code == 0, err
    s = InfiniIndex.load(tmp_path / "s.npz")
    assert s.count(["the", "cat"]) == 2 and s.count(["the", "zebra"]) == 0
    assert s.count(["the", "<unk>"]) == 2  # dog and emu were cut off by --min-count: they count as <unk>
    code, out, _ = run_cli("infini", "count", tmp_path / "s.npz", "the", "zebra")
    assert code == 0 and out.split("\t")[0] == "0"
    code, _, err = run_cli("infini", "build", "--stream", "ptb", "-o", tmp_path / "x.npz")
    assert code == 2 and "not a file" in err


# ----------------------------------------------------------------------------- numpy = compiled
@needs_ext
@pytest.mark.parametrize("max_n", [0, 1, 2, 4])
def test_numpy_searches_equal_the_compiled_ones(toy, max_n):
    from ngramlm.infini import sa_search

    ds, idx = toy
    for split in ("valid", "test"):
        tokens, pos = padded_stream(ds[split])
        args = (idx.tokens, idx.sa, tokens.astype(np.int64), pos.astype(np.int64), max_n - 1 if max_n else -1)
        for a, b in zip(accel.fast.sa_infini(*args), sa_search.sa_infini(*args)):
            assert a.dtype == b.dtype and np.array_equal(a, b)
    rng = np.random.default_rng(7)
    stream = np.asarray(idx.tokens, dtype=np.int64)
    pats = [stream[i:i + n].tolist() for i, n in zip(rng.integers(0, len(stream) - 8, 3000), rng.integers(0, 8, 3000))]
    pats += [[int(rng.integers(0, len(ds.vocab)))] * 3 for _ in range(50)] + [[], [EOS_ID, BOS_ID], [10**6]]
    lengths = np.array([len(p) for p in pats])
    offsets = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64)
    flat = np.array([x for p in pats for x in p], dtype=np.int64)
    assert np.array_equal(accel.fast.sa_count_many(idx.tokens, idx.sa, flat, offsets),
                          sa_search.sa_count_many(idx.tokens, idx.sa, flat, offsets))
    for p in pats[:200] + pats[-3:]:
        q = np.asarray(p, dtype=np.int64)
        assert tuple(accel.fast.sa_range(idx.tokens, idx.sa, q)) == sa_search.sa_range(idx.tokens, idx.sa, q)


@needs_ext
def test_numpy_searches_on_tiny_and_repetitive_indexes():
    from ngramlm.infini import sa_search

    vocab = Vocab().fit([["a", "b"]])
    a, b = vocab.stoi_["a"], vocab.stoi_["b"]
    for sents in ([[a] * 30], [[a, b] * 7, [b], []], [[b]]):
        ids = np.concatenate([np.asarray(s + [EOS_ID], dtype=np.int32) for s in sents])
        starts = np.concatenate([[0], np.cumsum([len(s) + 1 for s in sents])]).astype(np.int64)
        text = EncodedText(ids=ids, starts=starts)
        idx = InfiniIndex.build(text, vocab)
        tokens, pos = padded_stream(text)
        for cap in (-1, 0, 2):
            args = (idx.tokens, idx.sa, tokens.astype(np.int64), pos.astype(np.int64), cap)
            for x, y in zip(accel.fast.sa_infini(*args), sa_search.sa_infini(*args)):
                assert np.array_equal(x, y), (sents, cap)


def test_the_infini_commands_run_without_the_extension(tmp_path):
    """`infini build/count/ppl` with the extension switched off: the numbers of the compiled path."""
    import subprocess
    import sys

    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    script = ("import json, sys; sys.path.insert(0, %r); from ngramlm import accel\n"
              "from corpora import load_corpus, prepare\nfrom corpora.toy import ToyConfig\n"
              "from ngramlm.infini.index import InfiniIndex\n"
              "ds = prepare(load_corpus('toy', toy_config=ToyConfig(n_train_tokens=20000, n_valid_tokens=1000, "
              "n_test_tokens=1000)))\nidx = InfiniIndex.build(ds['train'], ds.vocab)\ns = idx.score(ds['test'])\n"
              "print(json.dumps({'ext': accel.fast is not None, 'eff': s.eff_n.tolist(), 'ch': s.cnt_h.tolist(), "
              "'chw': s.cnt_hw.tolist(), 'sparse': s.sparse.tolist()}))\n") % root
    runs = {}
    for off in ("1", "0"):
        env = dict(os.environ, NGRAMLM_NO_EXT=off)
        out = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=300)
        assert out.returncode == 0, out.stderr
        runs[off] = json.loads(out.stdout)
    assert runs["1"]["ext"] is False
    if runs["0"]["ext"]:
        assert {k: v for k, v in runs["1"].items() if k != "ext"} == {k: v for k, v in runs["0"].items() if k != "ext"}
    assert max(runs["1"]["eff"]) > 2 and sum(runs["1"]["chw"]) > 0
