"""corpora.tokenize, corpora.textio and corpora.corpus (loaders, holdout, prepare)."""
from __future__ import annotations

import gzip
import pickle
import re

import numpy as np
import pytest

from corpora import InputError, TokenizerSpec, Vocab, load_corpus, load_text_corpus, make_tokenizer, prepare
from corpora.corpus import holdout_ranges, read_sentences
from corpora.textio import atomic_write_text, decode_text, iter_lines, read_text
from corpora.tokenize import KINDS, char_tokenize, detokenize, punct_tokenize

HAN = re.compile(r"[\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\U00020000-\U0002ebef]")


# ---------------------------------------------------------------------------- tokenizers
def test_whitespace():
    assert make_tokenizer(TokenizerSpec(kind="whitespace"))("  a\tb \u3000 c\n") == ["a", "b", "c"]
    assert make_tokenizer(TokenizerSpec())(" no  <unk> here ") == ["no", "<unk>", "here"]


def test_regex_punctuation_words_numbers():
    regex = make_tokenizer(TokenizerSpec(kind="regex"))
    assert regex("Hello, world! It's well-known: 3.14 and 1,000 (ok)?") == [
        "Hello", ",", "world", "!", "It's", "well-known", ":", "3.14", "and", "1,000", "(", "ok", ")", "?"]
    assert regex("end. -- $5") == ["end", ".", "-", "-", "$", "5"]
    assert regex("snake_case") == ["snake", "_", "case"]
    assert regex("naïve café") == ["naïve", "café"]


def test_regex_lower_and_nfkc():
    tok = make_tokenizer(TokenizerSpec(kind="regex", lower=True, normalize="NFKC"))
    # full-width letters and digits, the "fi" ligature and a Roman numeral fold to ASCII
    assert tok("ＡＢＣ ﬁne ２０２４ Ⅻ.") == ["abc", "fine", "2024", "xii", "."]
    assert make_tokenizer(TokenizerSpec(kind="regex"))("ＡＢＣ") == ["ＡＢＣ"]  # no folding without NFKC
    assert make_tokenizer(TokenizerSpec(kind="whitespace", lower=True))("A B") == ["a", "b"]


def test_char_tokenizer_space_symbol():
    assert char_tokenize("  ab  c \t d ") == ["a", "b", "▁", "c", "▁", "d"]
    tok = make_tokenizer(TokenizerSpec(kind="char", space_symbol="_"))
    assert tok("a b") == ["a", "_", "b"]
    assert detokenize(["a", "▁", "b"], TokenizerSpec(kind="char")) == "a b"
    for bad in ("", "ab", " "):
        with pytest.raises(InputError, match="space_symbol"):
            TokenizerSpec(kind="char", space_symbol=bad)


def test_cjk_tokenizer():
    assert make_tokenizer(TokenizerSpec(kind="cjk"))("他说：“GPT-4很好，3.5也行。”") == [
        "他", "说", "：", "“", "GPT", "-", "4", "很", "好", "，", "3.5", "也", "行", "。", "”"]
    assert detokenize(["你", "好", "GPT", "。"], TokenizerSpec(kind="cjk")) == "你好GPT。"


def test_cjk_on_hongloumeng(shared_corpora):
    text = (shared_corpora / "hongloumeng" / "hongloumeng.txt").read_text(encoding="utf-8")
    lines = text.split("\n")
    tok = make_tokenizer(TokenizerSpec(kind="cjk"))
    heading = tok(lines[0])
    assert heading[:3] == ["第", "一", "回"]
    for line in lines[:50]:
        tokens = tok(line)
        han = [t for t in tokens if HAN.search(t)]
        assert all(len(t) == 1 for t in han)
        assert len(han) == len(HAN.findall(line))
        assert "".join(tokens) == "".join(line.split())  # nothing dropped but spaces


def test_punct_tokenizer_is_d2l_nmt_preprocessing():
    assert "punct" in KINDS
    assert punct_tokenize("Va !") == ["Va", "!"]
    assert punct_tokenize("Go.") == ["Go", "."]
    assert punct_tokenize("I'm OK.") == ["I'm", "OK", "."]  # apostrophes stay inside words
    assert punct_tokenize("Je suis tellement désolé\u202f!") == ["Je", "suis", "tellement", "désolé", "!"]
    assert punct_tokenize("Viens\u00a0!") == ["Viens", "!"]
    assert punct_tokenize("Oui, j’ai vu ça ?") == ["Oui", ",", "j’ai", "vu", "ça", "?"]
    # As d2l: a mark is split off only from the character before it, not from the one after.
    assert punct_tokenize("Wait...") == ["Wait", ".", ".", "."]
    assert punct_tokenize("3.5 a,b") == ["3", ".5", "a", ",b"]
    assert punct_tokenize(" \u202f ") == []
    tok = make_tokenizer(TokenizerSpec(kind="punct", lower=True))
    assert tok("Go.\tVa !") == ["go", ".", "va", "!"]
    assert tok("ÇA VA ?") == ["ça", "va", "?"]
    assert detokenize(["va", "!"], TokenizerSpec(kind="punct")) == "va !"
    spec = TokenizerSpec(kind="punct", lower=True)
    assert TokenizerSpec.from_dict(spec.to_dict()) == spec and spec.describe() == "punct+lower"


def test_spec_validation_and_serialisation():
    with pytest.raises(InputError, match="unknown tokenizer 'wordpiece'"):
        TokenizerSpec(kind="wordpiece")
    with pytest.raises(InputError, match="normalisation"):
        TokenizerSpec(normalize="NFX")
    spec = TokenizerSpec(kind="cjk", lower=True, normalize="NFKC")
    assert TokenizerSpec.from_dict(spec.to_dict()) == spec
    assert TokenizerSpec.from_dict({"kind": "char", "extra": 1}) == TokenizerSpec(kind="char")
    assert spec.describe() == "cjk+lower+NFKC"


# ---------------------------------------------------------------------------- text I/O
PLAIN = "the cat sat\nthe dog ran\n\na cat\n"


def _variants(tmp_path) -> dict:
    data = PLAIN.encode("utf-8")
    crlf = data.replace(b"\n", b"\r\n")
    files = {
        "plain": data,
        "bom": b"\xef\xbb\xbf" + data,
        "crlf": crlf,
        "bom_crlf": b"\xef\xbb\xbf" + crlf,
        "cr": data.replace(b"\n", b"\r"),
        "no_final_newline": data.rstrip(b"\n"),
        "gz": gzip.compress(data),
        "gz_bom_crlf": gzip.compress(b"\xef\xbb\xbf" + crlf),
    }
    out = {}
    for name, raw in files.items():
        p = tmp_path / (name + (".txt.gz" if name.startswith("gz") else ".txt"))
        p.write_bytes(raw)
        out[name] = p
    # gzip is recognised by its magic bytes, not by the name
    p = tmp_path / "gz_named_txt.txt"
    p.write_bytes(gzip.compress(data))
    out["gz_named_txt"] = p
    return out


def test_bom_crlf_gz_read_like_plain_text(tmp_path):
    variants = _variants(tmp_path)
    expected = [(1, "the cat sat"), (2, "the dog ran"), (3, ""), (4, "a cat")]
    vocab = Vocab().fit(read_sentences(variants["plain"], tokenizer=TokenizerSpec()))
    ref = vocab.encode_sentences(read_sentences(variants["plain"], tokenizer=TokenizerSpec()))
    for name, path in variants.items():
        assert list(iter_lines(path)) == expected, name
        enc = vocab.encode_sentences(read_sentences(path, tokenizer=TokenizerSpec()))
        assert np.array_equal(enc.ids, ref.ids) and np.array_equal(enc.starts, ref.starts), name
        assert Vocab().fit(read_sentences(path, tokenizer=TokenizerSpec())) == vocab


def test_non_utf8_error_has_line_and_byte_offset(tmp_path):
    p = tmp_path / "latin1.txt"
    p.write_bytes("first line\nsecond caf\u00e9 line\n".encode("latin-1"))
    with pytest.raises(InputError) as info:
        read_text(p)
    msg = str(info.value)
    assert msg.startswith(f"{p}:2: not valid UTF-8 at byte offset 21 (bytes e9 20 6c 69)")
    assert "iconv" in msg
    assert info.value.line == 2 and info.value.path == str(p)


def test_empty_and_blank_files(tmp_path):
    for name, raw in [("empty.txt", b""), ("blank.txt", b" \n\n\t\r\n"), ("bom_only.txt", b"\xef\xbb\xbf"),
                      ("empty.gz", gzip.compress(b""))]:
        p = tmp_path / name
        p.write_bytes(raw)
        with pytest.raises(InputError, match="file is empty"):
            list(iter_lines(p))


def test_binary_and_pickle_files(tmp_path):
    pkl = tmp_path / "model.pkl"
    pkl.write_bytes(pickle.dumps({"weights": [0.5, 1.5]}))
    with pytest.raises(InputError, match=r"model.pkl:1: this looks like a pickle .*NUL byte at byte offset"):
        read_text(pkl)
    nul = tmp_path / "nul.txt"
    nul.write_bytes(b"line one\nline\x00two\n")
    with pytest.raises(InputError, match=r"nul.txt:2: binary data: NUL byte at byte offset 13"):
        read_text(nul)
    gz = tmp_path / "broken.gz"
    gz.write_bytes(gzip.compress(PLAIN.encode())[:20])
    with pytest.raises(InputError, match="gzip data is truncated or corrupt"):
        read_text(gz)
    with pytest.raises(InputError, match="is a directory"):
        read_text(tmp_path)
    with pytest.raises(InputError, match="no such file"):
        read_text(tmp_path / "missing.txt")


def test_decode_text_and_atomic_write(tmp_path):
    assert decode_text(b"a\r\nb\rc") == "a\nb\nc"
    atomic_write_text(tmp_path / "d" / "out.txt", "héllo\n")
    assert (tmp_path / "d" / "out.txt").read_bytes() == "héllo\n".encode()
    assert [p.name for p in (tmp_path / "d").iterdir()] == ["out.txt"]


# ---------------------------------------------------------------------------- corpus loading
def test_holdout_ranges_are_contiguous_with_test_last():
    assert holdout_ranges(100, (0.05, 0.05)) == {"train": (0, 90), "valid": (90, 95), "test": (95, 100)}
    assert holdout_ranges(10, (0.05, 0.05)) == {"train": (0, 8), "valid": (8, 9), "test": (9, 10)}
    with pytest.raises(InputError, match="only 2 lines"):
        holdout_ranges(2, (0.05, 0.05))


def test_text_corpus_from_one_file(tmp_path):
    p = tmp_path / "mine.txt"
    p.write_text("".join(f"w{i} common\n" for i in range(40)))
    c = load_corpus(str(p))
    assert c.name == "mine.txt"
    assert [len(c.splits[s]) for s in ("train", "valid", "test")] == [36, 2, 2]
    assert c.splits["test"][-1] == ["w39", "common"]
    ds = prepare(c)
    assert "w39" not in ds.vocab and "common" in ds.vocab  # fitted on train only
    assert ds.vocab.oov_count(c.splits["test"]) == (2, 4)
    assert ds["test"].n_unk == 2
    text_mode = load_text_corpus(p, sentence_mode="text")
    assert len(text_mode.splits["train"]) == 1 and len(text_mode.splits["train"][0]) == 72


def test_text_corpus_from_split_files(tmp_path):
    paths = {}
    for s, body in [("train", "a b\nb c\n"), ("valid", "a\n"), ("test", "\ufeffc d\r\n")]:
        paths[s] = tmp_path / f"{s}.txt"
        paths[s].write_text(body, encoding="utf-8")
    c = load_text_corpus(paths["train"], valid=paths["valid"], test=paths["test"], unk_token="<unk>")
    assert c.splits == {"train": [["a", "b"], ["b", "c"]], "valid": [["a"]], "test": [["c", "d"]]}
    ds = prepare(c, min_count=2)
    assert ds.vocab.itos_[4:] == ["b"]
    assert ds["test"].ids.tolist() == [3, 3, 2]


def test_unknown_corpus_and_missing_data_dir(tmp_path):
    with pytest.raises(InputError, match="unknown corpus 'nope'"):
        load_corpus("nope")
    with pytest.raises(InputError) as info:
        load_corpus("ptb", data_dir=tmp_path)
    msg = str(info.value)
    assert str(tmp_path / "ptb" / "ptb.train.txt") in msg and "ngramlm corpora download ptb" in msg


def test_timemachine_loader_matches_d2l_cleaning(shared_corpora):
    path = shared_corpora / "timemachine" / "timemachine.txt"
    c = load_corpus("timemachine", data_dir=shared_corpora)
    # d2l: re.sub('[^A-Za-z]+', ' ', line).strip().lower(), then split into words
    d2l_lines = [re.sub("[^A-Za-z]+", " ", ln).strip().lower() for ln in path.read_text().split("\n")[:-1]]
    assert len(d2l_lines) == 3221
    assert sum(len(ln.split()) for ln in d2l_lines) == 32775
    assert sum(len(ln) for ln in d2l_lines) == 170580  # d2l's character count
    kept = [ln.split() for ln in d2l_lines if ln]
    got = c.splits["train"] + c.splits["valid"] + c.splits["test"]
    assert got == kept and len(kept) == 2848
    assert c.splits["train"][0] == ["the", "time", "machine", "by", "h", "g", "wells"]
    # holdout (0.05, 0.10) of the 2,848 kept lines, test last
    assert [len(c.splits[s]) for s in ("train", "valid", "test")] == [2421, 142, 285]
    assert all(t.isalpha() and t.islower() for s in got for t in s)
    ds = prepare(c)
    assert ds.vocab.n_types == 4201 and ds["test"].n_tokens == 3279 + 285


def test_hongloumeng_loader(shared_corpora):
    c = load_corpus("hongloumeng", data_dir=shared_corpora)
    assert c.tokenizer.kind == "cjk"
    assert [len(c.splits[s]) for s in ("train", "valid", "test")] == [2698, 150, 150]
    assert c.splits["train"][0][:3] == ["第", "一", "回"]
    ds = prepare(c)
    assert ds.vocab.n_types == 4392
    assert ds["train"].n_unk == 0


def test_loader_tokenizer_override(shared_corpora):
    c = load_corpus("timemachine", data_dir=shared_corpora, tokenizer=TokenizerSpec(kind="char"), splits=("test",))
    assert list(c.splits) == ["test"]
    assert set(c.splits["test"][0]) <= set("abcdefghijklmnopqrstuvwxyz▁")
