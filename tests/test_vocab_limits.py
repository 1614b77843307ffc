"""Limiting a model to a word list (``ngramlm filter``, ``train --limit-vocab``) and the closed vocabulary
of ``train --unk-from-min-count`` (toy corpus, MKN 3-grams)."""
from __future__ import annotations

import json
from collections import Counter

import numpy as np
import pytest

from corpora import Vocab
from ngramlm import NgramLM
from ngramlm.loading import load_any
from ngramlm.tools.pruning import ngram_words, score_rows
from ngramlm.tools.vocab_filter import limit_vocabulary, removed_mass

N_LISTED = 400  # the most frequent training words make the list


@pytest.fixture(scope="module")
def texts(tmp_path_factory, toy_dataset):
    d = tmp_path_factory.mktemp("vocab-limits")
    train = toy_dataset.corpus.sentences("train")
    (d / "train.txt").write_text("\n".join(" ".join(s) for s in train) + "\n")
    (d / "test.txt").write_text("\n".join(" ".join(s) for s in toy_dataset.corpus.sentences("test")) + "\n")
    counts = Counter(w for s in train for w in s)
    words = [w for w, _ in sorted(counts.items(), key=lambda wc: (-wc[1], wc[0]))[:N_LISTED]]
    # The specials may be listed or not (they are kept anyway); a word the model lacks is noted, not kept.
    (d / "words.txt").write_text("\n".join(words[:200] + ["<s>", "not-a-word-of-the-model", ""] + words[200:]) + "\n")
    return {"dir": d, "train": train, "words": words, "counts": counts}


@pytest.fixture(scope="module")
def closed_lm(texts):
    """A model whose training text has <unk> tokens (its singletons), so it stores n-grams ending in <unk>."""
    vocab = Vocab(min_count=2).fit(texts["train"])
    return NgramLM(order=3, smoothing="mkn").fit(vocab.encode_sentences(texts["train"]), vocab=vocab)


@pytest.fixture(scope="module")
def full_files(texts):
    from conftest import invoke_cli

    d = texts["dir"]
    for out in ("full.npz", "full.arpa"):
        code, _, err = invoke_cli(["train", d / "train.txt", "--order", 3, "-o", d / out])
        assert code == 0, err
    return d


def _grams(model, k):
    it = model.vocab_.itos_
    return {tuple(it[i] for i in g) for g in ngram_words(model, k)}


def _context_sums(model) -> np.ndarray:
    """sum_w p(w|h) over every predicted type, for the empty context and every stored context row."""
    V = len(model.vocab_)
    pred = np.arange(2, V)  # </s>, <unk> and the words (never <pad>, <s>)
    out = [float((10.0 ** np.asarray(model.log10_prob_[0])[pred]).sum())]
    for j in range(1, model.order_):
        ctx = ngram_words(model, j)
        ctx = ctx[(ctx[:, -1] != 2) & (ctx[:, -1] != 0)]  # </s> ends a sentence; <pad> is no word
        rows = np.column_stack([np.repeat(ctx, len(pred), axis=0), np.tile(pred, len(ctx))])
        out.extend((10.0 ** score_rows(model, rows)).reshape(len(ctx), len(pred)).sum(axis=1))
    return np.asarray(out)


def _probs(model, ctx: np.ndarray) -> np.ndarray:
    """p(w|h) for every id w (columns) after each context row h."""
    V = len(model.vocab_)
    rows = np.column_stack([np.repeat(ctx, V, axis=0), np.tile(np.arange(V), len(ctx))])
    return (10.0 ** score_rows(model, rows)).reshape(len(ctx), V)


# ----------------------------------------------------------------------------- filter
def test_filter_keeps_exactly_the_ngrams_over_the_list(run_cli, texts, full_files, tmp_path):
    out = tmp_path / "f.arpa"
    code, js, err = run_cli("filter", full_files / "words.txt", full_files / "full.arpa", "-o", out, "--json")
    assert code == 0, err
    assert "1 words of" in err and "not-a-word-of-the-model" in err  # the word the model lacks is noted
    r = json.loads(js)
    full, lim = load_any(full_files / "full.arpa"), load_any(out)
    allowed = set(texts["words"]) | {"<s>", "</s>", "<unk>"}
    assert set(lim.vocab_.itos_[1:]) == allowed  # <pad> is an id, never a word of the file
    for k in (1, 2, 3):
        want = {g for g in _grams(full, k) if set(g) <= allowed}
        if k == 1:
            want.discard(("<pad>",))
        got = _grams(lim, k) - ({("<pad>",)} if k == 1 else set())
        assert got == want, k
    assert r["ngrams_after"] == [int(n) for n in lim.n_ngrams_] and r["kept_words"] == N_LISTED
    text = out.read_text()
    for special in ("<s>", "</s>", "<unk>"):  # always kept, as unigrams and inside n-grams
        assert f"\t{special}\t" in text or f"\t{special}\n" in text
    assert any(g[0] == "<s>" for g in _grams(lim, 3)) and any(g[-1] == "</s>" for g in _grams(lim, 3))


@pytest.mark.slow
def test_every_kept_context_sums_to_one(closed_lm, texts):
    lim = NgramLM.from_tables(limit_vocabulary(closed_lm, words=texts["words"]).tables, order=3, smoothing="mkn")
    sums = _context_sums(lim)
    assert len(sums) > 5000
    assert np.abs(sums - 1.0).max() < 1e-9


def test_every_kept_context_of_the_written_file_sums_to_one(run_cli, full_files, tmp_path):
    out = tmp_path / "f.npz"
    code, _, err = run_cli("filter", full_files / "words.txt", full_files / "full.npz", "-o", out)
    assert code == 0, err
    sums = _context_sums(load_any(out))
    assert len(sums) > 5000
    assert np.abs(sums - 1.0).max() < 1e-9


def test_words_outside_the_list_score_as_unk(closed_lm, texts):
    lim = NgramLM.from_tables(limit_vocabulary(closed_lm, words=texts["words"]).tables, order=3, smoothing="mkn")
    listed = set(texts["words"])
    sents = texts["train"][:300]
    as_unk = [[w if w in listed else "<unk>" for w in s] for s in sents]
    assert sum(w == "<unk>" for s in as_unk for w in s) > 200
    enc, oov = lim.encode(sents)
    a = lim.token_scores(enc, oov=oov).log10_prob
    enc_u, _ = lim.encode(as_unk)
    b = lim.token_scores(enc_u).log10_prob
    assert np.array_equal(a, b)
    words = np.concatenate([np.asarray(s + ["</s>"]) for s in sents])
    assert np.array_equal(oov, ~np.isin(words, sorted(listed | {"</s>"})))  # an outside word is an OOV


def test_removed_words_probability_goes_to_unk(closed_lm, texts):
    """p'(<unk>|h) is the original model's probability of <unk> or any removed word after h, and every kept
    word keeps its probability, wherever h <unk> is stored (down its suffixes): the closed-vocabulary model."""
    res = limit_vocabulary(closed_lm, words=texts["words"])
    lim = NgramLM.from_tables(res.tables, order=3, smoothing="mkn")
    V = len(closed_lm.vocab_)
    kept = np.isin(np.asarray(closed_lm.vocab_.itos_), sorted(set(texts["words"]))) | (np.arange(V) < 4)
    removed = ~kept
    new_id = np.cumsum(kept) - 1
    R = removed_mass(closed_lm, removed)
    # R against a brute-force sum over the removed words, at the empty context and every context kind.
    p1 = 10.0 ** np.asarray(closed_lm.log10_prob_[0])
    assert abs(R[0][0] - p1[removed].sum()) < 1e-12
    for j in (1, 2):
        ctx = ngram_words(closed_lm, j)[:400]
        assert np.abs(_probs(closed_lm, ctx)[:, removed].sum(axis=1) - R[j][:400]).max() < 1e-12
    # The unigram: kept words as they were, <unk> with the removed words' probability.
    q1 = 10.0 ** np.asarray(lim.log10_prob_[0])
    assert np.abs(q1[new_id[kept][4:]] - p1[kept][4:]).max() < 1e-15
    assert abs(q1[3] - (p1[3] + p1[removed].sum())) < 1e-15
    exact = 0
    for j in (1, 2):
        ctx = ngram_words(closed_lm, j)
        ctx = ctx[kept[ctx].all(axis=1) & (ctx[:, -1] > 3)]
        unk_rows = [np.column_stack([ctx[:, s:], np.full(len(ctx), 3)]) for s in range(j)]
        ok = np.all([_stored(closed_lm, r) for r in unk_rows], axis=0)
        if not ok.any():
            continue
        exact += int(ok.sum())
        p, q = _probs(closed_lm, ctx[ok]), _probs(lim, new_id[ctx[ok]])
        want = p[:, kept].copy()
        want[:, 3] += p[:, removed].sum(axis=1)
        assert np.abs(q[:, 2:] - want[:, 2:]).max() < 1e-12
    assert exact >= 20


def _stored(model, rows: np.ndarray) -> np.ndarray:
    from ngramlm.counts import lookup

    V = len(model.vocab_)
    row = rows[:, 0].astype(np.int64)
    for j in range(1, rows.shape[1]):
        row = lookup(model.keys_[j], np.where(row >= 0, row * V + rows[:, j], -1))
    return row >= 0


# ----------------------------------------------------------------------------- train --limit-vocab
def test_train_limit_vocab_equals_filter_of_the_unlimited_model(run_cli, full_files, tmp_path):
    d = full_files
    code, js, err = run_cli("train", d / "train.txt", "--order", 3, "-o", tmp_path / "lim.npz",
                            "--limit-vocab", d / "words.txt", "--json")
    assert code == 0, err
    assert json.loads(js)["vocab_limit"]["kept_words"] == N_LISTED
    code, _, err = run_cli("filter", d / "words.txt", d / "full.npz", "-o", tmp_path / "f.npz")
    assert code == 0, err
    a, b = load_any(tmp_path / "lim.npz"), load_any(tmp_path / "f.npz")
    assert a.vocab_.itos_ == b.vocab_.itos_
    for k in range(3):
        assert np.array_equal(a.keys_[k], b.keys_[k])
        assert np.array_equal(a.log10_prob_[k], b.log10_prob_[k])
        assert np.array_equal(a.log10_backoff_[k], b.log10_backoff_[k])
    # Written as ARPA, the two are the same bytes.
    code, _, err = run_cli("train", d / "train.txt", "--order", 3, "-o", tmp_path / "lim.arpa",
                           "--limit-vocab", d / "words.txt")
    assert code == 0, err
    code, _, err = run_cli("filter", d / "words.txt", d / "full.npz", "-o", tmp_path / "f.arpa")
    assert code == 0, err
    assert (tmp_path / "lim.arpa").read_bytes() == (tmp_path / "f.arpa").read_bytes()


def test_limit_vocab_does_not_map_the_training_text(run_cli, texts, full_files, tmp_path):
    """lmplz's --limit_vocab_file prunes the estimated model: the kept n-grams' probabilities are those of the
    model estimated on the full text (not of one trained on a text whose other words were made <unk>)."""
    code, _, err = run_cli("train", full_files / "train.txt", "--order", 3, "-o", tmp_path / "lim.npz",
                           "--limit-vocab", full_files / "words.txt")
    assert code == 0, err
    full, lim = load_any(full_files / "full.npz"), load_any(tmp_path / "lim.npz")
    it_f, it_l = full.vocab_.itos_, lim.vocab_.itos_
    fk = {tuple(it_f[i] for i in g): lp for g, lp in zip(ngram_words(full, 3), full.log10_prob_[2])}
    lk = {tuple(it_l[i] for i in g): lp for g, lp in zip(ngram_words(lim, 3), lim.log10_prob_[2])}
    same = [g for g in lk if g[-1] != "<unk>"]  # only probabilities of <unk> change
    assert len(same) > 1000
    assert all(fk[g] == lk[g] for g in same)


def test_train_limit_vocab_with_compat_kenlm_prunes_inside_the_estimation(run_cli, texts, full_files, tmp_path):
    """`train --compat kenlm --limit-vocab` is lmplz's --limit_vocab_file (its fixture parity is in
    test_ngram_kenlm_parity.py): the same n-grams as the closed limit; kept probabilities as estimated
    with the removed words' n-grams pruned inside the estimation; each context's pruned mass is in
    its back-off weight, so a context that stores every word it was followed by keeps back-off 1
    only where nothing was pruned; the unigram floor divides by the kept types."""
    d = full_files
    code, js, err = run_cli("train", d / "train.txt", "--order", 3, "-o", tmp_path / "lmplz.npz", "--compat", "kenlm",
                            "--limit-vocab", d / "words.txt", "--json")
    assert code == 0, err
    assert "pruned inside the estimation" in err
    info = json.loads(js)["info"]
    assert info["vocab_limit"]["method"] == "lmplz" and info["vocab_limit"]["kept_words"] == N_LISTED
    kept_types = N_LISTED + 2  # the words, </s> and <unk>
    assert info["compat"]["kenlm"]["uniform_types"] == kept_types
    code, _, err = run_cli("train", d / "train.txt", "--order", 3, "-o", tmp_path / "closed.npz",
                           "--limit-vocab", d / "words.txt")
    assert code == 0, err
    a, b = load_any(tmp_path / "lmplz.npz"), load_any(tmp_path / "closed.npz")
    for k in (1, 2, 3):
        assert _grams(a, k) == _grams(b, k)
    # The same model through the API.
    vocab = Vocab().fit(texts["train"])
    api = NgramLM(order=3, smoothing="mkn", compat="kenlm").fit(vocab.encode_sentences(texts["train"]), vocab=vocab,
                                                                limit_vocab=texts["words"])
    for k in range(3):
        np.testing.assert_allclose(api.log10_prob_[k], a.log10_prob_[k], rtol=0, atol=1e-12)
    # Back-off weights hold the pruned mass: lmplz's back-offs are at least the unpruned model's.
    full = NgramLM(order=3, smoothing="mkn", compat="kenlm").fit(vocab.encode_sentences(texts["train"]), vocab=vocab)
    it_f, it_a = full.vocab_.itos_, a.vocab_.itos_
    fb = {tuple(it_f[i] for i in g): x for g, x in zip(ngram_words(full, 2), full.log10_backoff_[1])}
    ab = {tuple(it_a[i] for i in g): x for g, x in zip(ngram_words(a, 2), a.log10_backoff_[1])}
    assert all(ab[g] >= fb[g] - 1e-12 for g in ab) and sum(ab[g] > fb[g] + 1e-6 for g in ab) > 100


# ----------------------------------------------------------------------------- --unk-from-min-count
def test_unk_from_min_count_trains_unk_on_the_singletons(run_cli, texts, full_files, tmp_path):
    d = full_files
    code, js, err = run_cli("train", d / "train.txt", "--order", 3, "-o", tmp_path / "u2.npz",
                            "--unk-from-min-count", 2, "--json")
    assert code == 0, err
    assert "closed vocabulary" in err
    u2, full = load_any(tmp_path / "u2.npz"), load_any(d / "full.npz")
    singletons = {w for w, c in texts["counts"].items() if c == 1}
    assert len(singletons) > 20
    assert not singletons & set(u2.vocab_.itos_)
    assert singletons <= set(full.vocab_.itos_)  # the default keeps every word (unchanged behaviour)
    assert full.vocab_.n_types == len(texts["counts"]) + 2
    # The same model as training on the text with its singletons written as <unk>: <unk> is estimated
    # from them like any word.
    mapped = d / "mapped.txt"
    mapped.write_text("\n".join(" ".join(w if w not in singletons else "<unk>" for w in s)
                                for s in texts["train"]) + "\n")
    code, _, err = run_cli("train", mapped, "--order", 3, "-o", tmp_path / "m.npz")
    assert code == 0, err
    m = load_any(tmp_path / "m.npz")
    assert m.vocab_.itos_ == u2.vocab_.itos_
    for k in range(3):
        assert np.array_equal(m.keys_[k], u2.keys_[k])
        assert np.allclose(m.log10_prob_[k], u2.log10_prob_[k], rtol=0, atol=1e-12)
    p_unk, p_unk_default = 10.0 ** u2.log10_prob_[0][3], 10.0 ** full.log10_prob_[0][3]
    assert p_unk > 10 * p_unk_default
    # --min-count 2 is the same setting.
    code, _, err = run_cli("train", d / "train.txt", "--order", 3, "-o", tmp_path / "mc2.npz", "--min-count", 2)
    assert code == 0, err
    assert np.array_equal(load_any(tmp_path / "mc2.npz").log10_prob_[2], u2.log10_prob_[2])


@pytest.mark.parametrize("args, message", [
    (("--unk-from-min-count", 0), "must be >= 1"),
    (("--unk-from-min-count", 2, "--min-count", 3), "are the same setting"),
])
def test_unk_from_min_count_refuses_bad_settings(run_cli, full_files, tmp_path, args, message):
    code, _, err = run_cli("train", full_files / "train.txt", "-o", tmp_path / "x.npz", *args)
    assert code == 2 and message in err
    assert not (tmp_path / "x.npz").exists()


# ----------------------------------------------------------------------------- bad input
BAD_LISTS = {
    "missing.txt": (None, "no such word list"),
    "empty.txt": ("", "the word list is empty"),
    "blank.txt": ("\n  \n\n", "the word list is empty"),
    "none.txt": ("ZZZ\nQQQ\n", "no word of the list is a word of the model"),
    "lexicon.txt": ("hello HH AH L OW\n", "more than one word"),
}


@pytest.mark.parametrize("name", sorted(BAD_LISTS))
@pytest.mark.parametrize("how", ["filter", "train"])
def test_bad_word_lists_are_named_with_a_fix_and_write_nothing(run_cli, full_files, tmp_path, name, how):
    content, message = BAD_LISTS[name]
    path = tmp_path / name
    if content is not None:
        path.write_text(content)
    out = tmp_path / "out.arpa"
    if how == "filter":
        code, _, err = run_cli("filter", path, full_files / "full.npz", "-o", out)
    else:
        code, _, err = run_cli("train", full_files / "train.txt", "-o", out, "--limit-vocab", path)
    assert code == 2, err
    assert message in err and str(path) in err and "fix:" in err
    assert not out.exists() and list(tmp_path.iterdir()) == ([path] if content is not None else [])


def test_filter_refuses_what_it_cannot_limit(run_cli, full_files, tmp_path):
    out = tmp_path / "out.arpa"
    code, _, err = run_cli("filter", full_files / "words.txt", tmp_path / "nope.arpa", "-o", out)
    assert code == 2 and "nope.arpa" in err and "no such model file" in err
    code, _, err = run_cli("train", full_files / "train.txt", "-o", tmp_path / "add.npz", "--smoothing", "addk")
    assert code == 0, err
    code, _, err = run_cli("filter", full_files / "words.txt", tmp_path / "add.npz", "-o", out)
    assert code == 2 and "add.npz" in err and "not a back-off distribution" in err and "fix:" in err
    code, _, err = run_cli("train", full_files / "train.txt", "-o", out, "--smoothing", "addk",
                           "--limit-vocab", full_files / "words.txt")
    assert code == 2 and "--limit-vocab" in err and "fix:" in err
    code, _, err = run_cli("filter", full_files / "words.txt", full_files / "full.npz", "-o", out,
                           "--eval", tmp_path / "no-text.txt")
    assert code == 2 and "no-text.txt" in err
    assert not out.exists()


def test_filter_eval_counts_the_words_outside_the_list_as_oovs(run_cli, full_files, tmp_path):
    code, js, err = run_cli("filter", full_files / "words.txt", full_files / "full.npz", "-o", tmp_path / "f.npz",
                            "--eval", full_files / "test.txt", "--json")
    assert code == 0, err
    e = json.loads(js)["eval"]
    words = (full_files / "test.txt").read_text().split()
    listed = set((full_files / "words.txt").read_text().split())
    assert e["oovs_limited"] == sum(w not in listed for w in words)
    assert e["oovs_limited"] > e["oovs_original"]
    # The original model on the limited model's in-list tokens: comparable with the limited one.
    assert e["ppl_limited_excluding_oovs"] > 0 and e["ppl_original_same_tokens"] > 0
