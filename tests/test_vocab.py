"""corpora.vocab: ids, cut-offs, statistics, persistence; PTB's published numbers."""
from __future__ import annotations

import doctest
import json
import random

import numpy as np
import pytest

import corpora.vocab as vocab_module
from corpora import BOS_ID, EOS_ID, PAD_ID, UNK_ID, InputError, NotFittedError, TokenizerSpec, Vocab
from corpora import load_corpus, prepare

SENTS = [["the", "cat", "sat"], ["the", "dog", "sat"], ["a", "cat", "ran"], ["the", "end"]]


def test_doctests_pass():
    assert doctest.testmod(vocab_module).failed == 0


def test_special_ids_are_fixed():
    assert (PAD_ID, BOS_ID, EOS_ID, UNK_ID) == (0, 1, 2, 3)
    v = Vocab(unk_token="<UNK>").fit(SENTS)
    assert v.itos_[:4] == ["<pad>", "<s>", "</s>", "<UNK>"]
    assert (v["<pad>"], v["<s>"], v["</s>"], v["<UNK>"]) == (0, 1, 2, 3)
    assert v["never-seen"] == UNK_ID
    assert v.pad_id == 0 and v.bos_id == 1 and v.eos_id == 2 and v.unk_id == 3


def test_frequency_sort_with_code_point_tie_break():
    v = Vocab().fit([["b", "a", "c", "a", "b", "B", "é", "z", "z"]])
    # a, b, z twice; then B, c, é once -- ties in code-point order ("B" < "c" < "é").
    assert v.itos_[4:] == ["a", "b", "z", "B", "c", "é"]
    assert v.n_types == 6 + 2 and len(v) == 10 and v.n_words == 7


def test_fit_is_independent_of_sentence_order():
    sents = [list(s) for s in SENTS * 3]
    a = Vocab().fit(sents)
    random.Random(0).shuffle(sents)
    b = Vocab().fit(reversed(sents))
    assert a.itos_ == b.itos_ and a == b


def test_min_count_then_max_size():
    v = Vocab(min_count=2).fit(SENTS)
    assert v.itos_[4:] == ["the", "cat", "sat"]
    assert v.n_train_unk_ == 4  # dog, a, ran, end
    v = Vocab(min_count=2, max_size=2).fit(SENTS)
    assert v.itos_[4:] == ["the", "cat"]  # "cat" beats "sat" (both 2) by code point
    assert v.stats()["train_tokens_mapped_to_unk"] == 6
    assert v.stats()["train_unk_rate"] == pytest.approx(6 / 11)
    assert v.encode(["sat", "the"]).tolist() == [UNK_ID, 4]


@pytest.mark.parametrize("kw", [dict(min_count=0), dict(min_count=True), dict(min_count=1.5), dict(min_count="2"),
                                dict(max_size=0), dict(max_size=-1), dict(max_size=2.0),
                                dict(unk_token="<s>")])
def test_bad_parameters(kw):
    with pytest.raises(InputError):
        Vocab(**kw).fit(SENTS)


def test_reserved_tokens_in_text_are_rejected():
    with pytest.raises(InputError, match="reserved token '</s>' 2 times"):
        Vocab().fit([["a", "</s>", "</s>"]])


def test_not_fitted():
    v = Vocab()
    with pytest.raises(NotFittedError):
        len(v)
    with pytest.raises(NotFittedError):
        v.encode(["a"])
    assert "unfitted" in repr(v)


def test_encode_decode_round_trip():
    v = Vocab().fit(SENTS)
    toks = ["the", "cat", "ran", "zebra"]
    ids = v.encode(toks)
    assert ids.dtype == np.int32
    assert v.decode(ids) == ["the", "cat", "ran", "<unk>"]
    assert v.inverse_transform(v.transform(["the"])) == ["the"]
    assert v.lookup_token(2) == "</s>"
    assert v.decode(v.encode([])) == []


def test_encode_sentences_stream():
    v = Vocab().fit(SENTS)
    enc = v.encode_sentences([["the", "cat"], [], ["zebra"]])
    assert enc.ids.tolist() == [v["the"], v["cat"], EOS_ID, EOS_ID, UNK_ID, EOS_ID]
    assert enc.starts.tolist() == [0, 3, 4, 6]
    assert (enc.n_sentences, enc.n_tokens, enc.n_words, enc.n_unk, len(enc)) == (3, 6, 3, 1, 6)
    assert enc.sentence(2).tolist() == [UNK_ID, EOS_ID]


def test_corpus_unk_token_is_the_unk_type():
    v = Vocab().fit([["a", "<unk>", "b"], ["<unk>"]])
    assert "<unk>" not in v.itos_[4:]  # never a word of its own
    assert v.n_corpus_unk_ == 2 and v.n_train_unk_ == 2
    # Seen in training: the corpus's <unk> is a type, not OOV; unseen words are OOV.
    assert v.oov_count([["<unk>", "a", "zebra"]]) == (1, 3)
    # A vocabulary whose training text had no <unk>: a literal "<unk>" is OOV.
    w = Vocab().fit([["a", "b"]])
    assert w.oov_count([["<unk>", "a", "zebra"]]) == (2, 3)
    assert w.oov_rate([]) == 0.0


@pytest.mark.parametrize("corpus_unk", [True, False])
def test_scorer_encode_flags_oov_as_oov_flags_does(corpus_unk):
    """Scorer.encode derives the OOV flags from the ids; they equal oov_flags' token-by-token ones,
    for a literal <unk> too (a type where the training text had it, OOV where it did not)."""
    from corpora.accounting import oov_flags
    from ngramlm import NgramLM

    rng = random.Random(7)
    words = ["a", "b", "c", "d", "<unk>"] if corpus_unk else ["a", "b", "c", "d"]
    train = [[rng.choice(words) for _ in range(rng.randint(1, 6))] for _ in range(50)]
    v = Vocab().fit(train)
    lm = NgramLM(order=2, smoothing="wb").fit(v.encode_sentences(train), vocab=v)
    pool = ["a", "b", "zebra", "<unk>", "c", "yak"]
    test = [[rng.choice(pool) for _ in range(rng.randint(0, 7))] for _ in range(200)]
    enc, oov = lm.encode(iter(test))
    assert enc.ids.tolist() == [x for s in test for x in [lm.vocab_.stoi_.get(w, UNK_ID) for w in s] + [EOS_ID]]
    np.testing.assert_array_equal(oov, oov_flags(lm.vocab_, test))
    assert oov.sum() == sum(w in ("zebra", "yak") or (w == "<unk>" and not corpus_unk) for s in test for w in s)


def test_coverage_and_stats():
    v = Vocab().fit(SENTS)
    # 11 tokens: the 3, cat 2, sat 2, then 1 each
    assert v.coverage(1) == pytest.approx(3 / 11)
    assert v.coverage(3) == pytest.approx(7 / 11)
    assert v.coverage(100) == pytest.approx(1.0)
    st = v.stats()
    assert st == {"n_types": 9, "n_words": 8, "n_ids": 11, "train_tokens": 11, "train_types_seen": 7,
                  "train_tokens_mapped_to_unk": 0, "train_unk_rate": 0.0, "min_count": 1, "max_size": None}


def test_json_round_trip(tmp_path):
    tok = TokenizerSpec(kind="regex", lower=True, normalize="NFKC")
    v = Vocab(min_count=1, max_size=5, tokenizer=tok).fit(SENTS + [["<unk>", "the"]])
    path = tmp_path / "sub" / "v.json"
    v.save(path)
    assert [p.name for p in path.parent.iterdir()] == ["v.json"]  # atomic: no temp file left
    w = Vocab.load(path)
    assert w == v and w.itos_ == v.itos_ and w.tokenizer == tok
    assert (w.min_count, w.max_size, w.unk_token) == (1, 5, "<unk>")
    assert w.n_corpus_unk_ == 1 and w.n_train_unk_ == v.n_train_unk_
    assert w.stats()["n_types"] == v.stats()["n_types"]
    assert w.stats()["train_unk_rate"] == v.stats()["train_unk_rate"]
    assert w.encode(["the", "zebra"]).tolist() == v.encode(["the", "zebra"]).tolist()
    data = json.loads(path.read_text(encoding="utf-8"))
    assert data["format"] == "ngramlm.vocab" and data["version"] == 1
    assert data["counts"][:4] == [0, 0, 0, 1]
    assert repr(w) == repr(v)
    assert Vocab.load(path) != Vocab().fit(SENTS)


def test_round_trip_with_non_ascii(tmp_path):
    v = Vocab().fit([["红", "楼", "梦", "红"], ["naïve", "café"]])
    v.save(tmp_path / "v.json")
    assert Vocab.load(tmp_path / "v.json").itos_ == v.itos_
    assert "红" in (tmp_path / "v.json").read_text(encoding="utf-8")  # stored as UTF-8, not escaped


def _write(tmp_path, name, data) -> str:
    p = tmp_path / name
    p.write_bytes(data if isinstance(data, bytes) else data.encode("utf-8"))
    return str(p)


@pytest.fixture
def good_dict():
    return Vocab().fit(SENTS).to_dict()


@pytest.mark.parametrize("mutate, reason", [
    (lambda d: d.pop("format"), "missing format tag"),
    (lambda d: d.update(format="other.tool"), "missing format tag"),
    (lambda d: d.update(version=99), "version 99 is not supported"),
    (lambda d: d.pop("itos"), "corrupt vocabulary file ('itos')"),
    (lambda d: d.update(counts=d["counts"][:-1]), "itos and counts differ in length"),
    (lambda d: d.update(itos=d["itos"][1:] + ["x"]), "special tokens are not at their fixed ids"),
    (lambda d: d.update(itos=d["itos"][:-1] + [d["itos"][4]]), "duplicate tokens"),
    (lambda d: d.update(counts=["many"] * len(d["counts"])), "corrupt vocabulary file"),
    (lambda d: d["params"].pop("unk_token"), "corrupt vocabulary file"),
])
def test_corrupt_or_foreign_vocab_files(tmp_path, good_dict, mutate, reason):
    mutate(good_dict)
    path = _write(tmp_path, "v.json", json.dumps(good_dict))
    with pytest.raises(InputError) as info:
        Vocab.load(path)
    assert reason in str(info.value)
    assert str(info.value).startswith(path)


@pytest.mark.parametrize("data, reason", [
    ('{"format": "ngramlm.vocab",\n  "itos": [1,, 2]}', ":2: not an ngramlm vocabulary file (invalid JSON"),
    ("[1, 2, 3]", "missing format tag"),
    ("", "file is empty"),
    (b"\x80\x04\x95\x10\x00\x00\x00", "pickle"),
    (b'{"a": "caf\xe9"}', "not valid UTF-8 at byte offset 10"),
])
def test_unreadable_vocab_files(tmp_path, data, reason):
    path = _write(tmp_path, "v.json", data)
    with pytest.raises(InputError) as info:
        Vocab.load(path)
    assert reason in str(info.value) and path in str(info.value)


# ---------------------------------------------------------------------------- PTB, the reference numbers
@pytest.fixture(scope="module")
def ptb(shared_corpora):
    return prepare(load_corpus("ptb", data_dir=shared_corpora))


def test_ptb_vocabulary_and_streams(ptb):
    v = ptb.vocab
    assert v.n_types == 10000  # 9,999 words incl. <unk>, plus </s>
    assert v.n_words == 9999 and len(v) == 10002
    assert v.n_corpus_unk_ == 45020 == v.n_train_unk_
    for split in ("valid", "test"):
        assert v.oov_count(ptb.corpus.sentences(split))[0] == 0
    test = ptb["test"]
    assert test.n_tokens == 82430 == 78669 + 3761
    assert (test.n_words, test.n_sentences) == (78669, 3761)
    assert ptb["valid"].n_tokens == 73760 and ptb["train"].n_tokens == 929589
    assert v.itos_[4] == "the"


def test_ptb_vocab_json_round_trip(ptb, tmp_path):
    ptb.vocab.save(tmp_path / "ptb.json")
    w = Vocab.load(tmp_path / "ptb.json")
    assert w == ptb.vocab and w.n_types == 10000
    again = prepare(ptb.corpus, vocab=w)
    assert np.array_equal(again["test"].ids, ptb["test"].ids)


def test_json_round_trip_keeps_counts_of_cut_words(tmp_path):
    from corpora import Vocab

    v = Vocab(min_count=2).fit([["a", "a", "b", "c", "c", "c", "d"]])
    p = tmp_path / "v.json"
    v.save(p)
    back = Vocab.load(p)
    assert back.coverage(10) == v.coverage(10) == 1.0
    assert back.stats()["train_types_seen"] == v.stats()["train_types_seen"] == 4
