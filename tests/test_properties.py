"""Property-based tests (hypothesis): tokenizers, Vocab JSON, the ARPA reader, the native loader.

The readers take files from users, so whatever the bytes, they either succeed or
raise :class:`~corpora.errors.InputError` naming the file -- never a KeyError,
TypeError, IndexError traceback -- and the native loader never unpickles.  A
model that loads must also score without crashing.  Each property's examples are
bounded, so the file runs in well under a minute; ``benchmarks/fuzz_readers.py``
runs the same targets for as long as you like (docs/robustness.md).
"""
from __future__ import annotations

import gzip
import io
import json
import os
import pickle
import re
import tempfile
import unicodedata
import zipfile
import zlib
from pathlib import Path

import numpy as np
import pytest

hypothesis = pytest.importorskip("hypothesis")
from hypothesis import HealthCheck, assume, event, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from corpora import Vocab  # noqa: E402
from corpora.errors import InputError, ToolkitError  # noqa: E402
from corpora.testing import json_paths, pickle_tripwire  # noqa: E402
from corpora.tokenize import (KINDS, NORMALIZATIONS, TokenizerSpec, char_tokenize, detokenize,  # noqa: E402
                              make_tokenizer)
from ngramlm import NgramLM  # noqa: E402
from ngramlm.io.arpa import looks_like_arpa, write_arpa  # noqa: E402
from ngramlm.loading import read_arpa  # noqa: E402
from ngramlm.io.native import is_native  # noqa: E402
from ngramlm.loading import load_native  # noqa: E402

# Derandomized by default: the test command (and CI) draws the same examples every run, so a
# red run is reproducible and never luck.  NGRAMLM_HYPOTHESIS_EXPLORE=1 draws fresh examples,
# for hunting; benchmarks/fuzz_readers.py hunts for longer.
_DERANDOMIZE = os.environ.get("NGRAMLM_HYPOTHESIS_EXPLORE", "") not in ("1", "true", "yes")
FAST = settings(max_examples=150, deadline=None, derandomize=_DERANDOMIZE,
                suppress_health_check=[HealthCheck.too_slow])
SLOW = settings(max_examples=60, deadline=None, derandomize=_DERANDOMIZE,
                suppress_health_check=[HealthCheck.too_slow])

# Text that exercises the tokenizers' edges: every Unicode category, plus a dense
# mix of spaces, Han, apostrophes, hyphens, digits with separators, underscores.
EDGY = "ab Zé 漢字\t\n\u3000\u00a0'-’.,0123456789_¹½\u0301ﬁİß "
TEXT = st.one_of(st.text(max_size=80), st.text(alphabet=EDGY, max_size=80))
# The rule-based kinds that keep every non-space character as it is (byte and the learned kinds are
# tested in tests/test_subwords.py).
TEXT_KINDS = ("whitespace", "regex", "char", "cjk", "punct")
SPECS = st.builds(TokenizerSpec, kind=st.sampled_from(TEXT_KINDS), lower=st.booleans(),
                  normalize=st.sampled_from(NORMALIZATIONS), space_symbol=st.sampled_from(["▁", "_", "·"]))
HAN = re.compile("[\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\U00020000-\U0002ebef]")


def prepared(text: str, spec: TokenizerSpec) -> str:
    if spec.normalize:
        text = unicodedata.normalize(spec.normalize, text)
    return text.lower() if spec.lower else text


# ============================================================================ tokenizers
@FAST
@given(spec=SPECS, text=TEXT)
def test_tokenizers_never_crash_and_keep_every_non_space_character(spec, text):
    tokens = make_tokenizer(spec)(text)
    assert isinstance(tokens, list) and all(isinstance(t, str) and t for t in tokens)
    assert not any(c.isspace() for t in tokens for c in t)
    src = prepared(text, spec)
    non_space = "".join(c for c in src if not c.isspace())
    if spec.kind == "char":
        # One token per character; each run of whitespace between words is one space symbol.
        assert all(len(t) == 1 for t in tokens)
        assert "".join(t for t in tokens) == spec.space_symbol.join(src.split())
    else:
        # Nothing is lost or invented: the tokens are the text without its whitespace.
        assert "".join(tokens) == non_space
    if spec.kind == "cjk":
        # Every Han ideograph is a token of its own.
        assert sum(1 for t in tokens if HAN.fullmatch(t)) == len(HAN.findall(src))
    # Detokenizing never crashes, and re-tokenizing its output is stable for the
    # whitespace and char tokenizers (they are exact inverses up to spacing).
    back = detokenize(tokens, spec)
    if spec.kind == "whitespace":
        assert back.split() == tokens
    if spec.kind == "char" and spec.space_symbol not in src:
        assert back == " ".join(src.split())


@FAST
@given(text=st.text(max_size=80), sym=st.sampled_from(["▁", "_", "·"]))
def test_char_tokenizer_round_trips_through_detokenize(text, sym):
    assume(sym not in text)
    spec = TokenizerSpec(kind="char", space_symbol=sym)
    assert detokenize(char_tokenize(text, space_symbol=sym), spec) == " ".join(text.split())


JSON_SCALARS = st.one_of(st.none(), st.booleans(), st.integers(-10**20, 10**20),
                         st.floats(allow_nan=True, allow_infinity=True), st.text(max_size=8))
JSON_VALUES = st.recursive(JSON_SCALARS, lambda inner: st.one_of(
    st.lists(inner, max_size=4), st.dictionaries(st.text(max_size=6), inner, max_size=4)), max_leaves=10)


@FAST
@given(data=st.dictionaries(st.sampled_from(["kind", "lower", "normalize", "space_symbol", "other"]),
                            st.one_of(JSON_VALUES, st.sampled_from(KINDS), st.sampled_from(["NFC", "NFKC"]))))
def test_tokenizer_spec_from_any_dict_is_valid_or_input_error(data):
    try:
        spec = TokenizerSpec.from_dict(data)
    except InputError:
        return
    assert spec.kind in KINDS and spec.normalize in NORMALIZATIONS and isinstance(spec.lower, bool)
    make_tokenizer(spec)("Some text, 漢字 and 3.14")
    assert TokenizerSpec.from_dict(spec.to_dict()) == spec


# ============================================================================ Vocab JSON
TOKENS = st.text(min_size=1, max_size=6).filter(lambda t: t not in ("<pad>", "<s>", "</s>"))
SENTENCES = st.lists(st.lists(st.one_of(TOKENS, st.sampled_from(["a", "b", "<unk>"])), max_size=6), max_size=8)


@FAST
@given(sents=SENTENCES, min_count=st.integers(1, 3), max_size=st.one_of(st.none(), st.integers(1, 6)),
       spec=st.one_of(st.none(), SPECS))
def test_vocab_dict_and_file_round_trips(sents, min_count, max_size, spec):
    v = Vocab(min_count=min_count, max_size=max_size, tokenizer=spec).fit(sents)
    d = v.to_dict()
    for again in (Vocab.from_dict(d), Vocab.from_dict(json.loads(json.dumps(d)))):
        assert again == v
        assert again.itos_ == v.itos_ and again.counts_ == v.counts_
        assert (again.n_train_tokens_, again.n_train_unk_, again.n_corpus_unk_) == (
            v.n_train_tokens_, v.n_train_unk_, v.n_corpus_unk_)
        assert again.stats() == v.stats() and again.coverage(2) == v.coverage(2)
        assert again.to_dict() == d
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "v.json"
        v.save(path)
        back = Vocab.load(path)
    assert back.to_dict() == d
    flat = [t for s in sents for t in s]
    assert back.encode(flat).tolist() == v.encode(flat).tolist()


def _vocab_bytes() -> bytes:
    v = Vocab(min_count=1, tokenizer=TokenizerSpec(kind="regex", lower=True)).fit(
        [["the", "cat", "sat"], ["the", "dog"], ["a", "cat", "<unk>"], ["rare"]])
    v = Vocab(min_count=2, tokenizer=v.tokenizer).fit([["the", "cat", "sat"], ["the", "dog"], ["a", "cat", "<unk>"]])
    return (json.dumps(v.to_dict(), ensure_ascii=False) + "\n").encode("utf-8")


VOCAB_BYTES = _vocab_bytes()


def _check_usable_vocab(v: Vocab) -> None:
    """A vocabulary that loaded must work: nothing may blow up later."""
    n = len(v)
    assert n >= 4 and v.decode(range(n)) == v.itos_
    v.encode(list(v.itos_) + ["zzz-unseen"])
    v.stats(), v.coverage(3), v.oov_count([["a", "b"]])
    Vocab.from_dict(v.to_dict())
    repr(v)


def mutate_bytes(data: st.DataObject, raw: bytes) -> bytes:
    """One to three random byte-level edits: flip, insert, delete, truncate, duplicate a chunk."""
    b = bytearray(raw)
    for _ in range(data.draw(st.integers(1, 3))):
        op = data.draw(st.sampled_from(["flip", "insert", "delete", "truncate", "dup", "set"]))
        i = data.draw(st.integers(0, max(len(b) - 1, 0)))
        if op == "flip" and b:
            b[i] ^= 1 << data.draw(st.integers(0, 7))
        elif op == "set" and b:
            b[i] = data.draw(st.integers(0, 255))
        elif op == "insert":
            b[i:i] = data.draw(st.binary(min_size=1, max_size=8))
        elif op == "delete":
            del b[i:i + data.draw(st.integers(1, 16))]
        elif op == "truncate":
            del b[i:]
        elif op == "dup":
            b[i:i] = b[i:i + data.draw(st.integers(1, 32))]
    return bytes(b)


@FAST
@given(data=st.data())
def test_corrupted_vocab_files_raise_input_error_naming_the_file(data):
    raw = mutate_bytes(data, VOCAB_BYTES)
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "vocab.json"
        path.write_bytes(raw)
        try:
            v = Vocab.load(path)
        except InputError as exc:
            assert str(path) in str(exc)
            return
    _check_usable_vocab(v)


def mutate_json(data: st.DataObject, obj):
    """Replace or delete the value at a random place in a JSON document (1-3 times)."""
    obj = json.loads(json.dumps(obj))
    for _ in range(data.draw(st.integers(1, 3))):
        paths = list(json_paths(obj))
        path = data.draw(st.sampled_from(paths))
        new = data.draw(JSON_VALUES)
        if not path:
            obj = new
            continue
        parent = obj
        for key in path[:-1]:
            parent = parent[key]
        if data.draw(st.booleans()) and isinstance(parent, dict):
            del parent[path[-1]]
        else:
            parent[path[-1]] = new
    return obj


@FAST
@given(data=st.data())
def test_structurally_corrupted_vocab_json_raises_input_error(data):
    doc = mutate_json(data, json.loads(VOCAB_BYTES))
    try:
        v = Vocab.from_dict(doc, path="v.json")
    except InputError as exc:
        assert "v.json" in str(exc)
        return
    _check_usable_vocab(v)


_GOOD_VOCAB = json.loads(VOCAB_BYTES)


@pytest.mark.parametrize("bad", [
    {**_GOOD_VOCAB, "cut_counts": [1, 2]},
    {**_GOOD_VOCAB, "params": {**_GOOD_VOCAB["params"], "min_count": 1e999}},
    {**_GOOD_VOCAB, "params": {**_GOOD_VOCAB["params"], "min_count": -3}},
    {**_GOOD_VOCAB, "params": [1]},
    {**_GOOD_VOCAB, "itos": ["<pad>", "<s>", "</s>", "<unk>", 5, 6]},
    {**_GOOD_VOCAB, "counts": [1.5] * len(_GOOD_VOCAB["itos"])},
    {**_GOOD_VOCAB, "n_train_tokens": float("nan")},
    {**_GOOD_VOCAB, "tokenizer": "regex"},
    {**_GOOD_VOCAB, "tokenizer": {"kind": "char", "space_symbol": 7}},
    {**_GOOD_VOCAB, "tokenizer": {"kind": "char", "lower": "no"}},
    [_GOOD_VOCAB],
], ids=lambda d: "doc")
def test_vocab_regressions_found_by_the_properties(bad):
    with pytest.raises(InputError, match="v.json"):
        Vocab.from_dict(bad, path="v.json")


@pytest.mark.parametrize("text", ["1" * 5000, "[" * 100_000 + "]" * 100_000])
def test_vocab_file_with_unreadable_json_is_an_input_error(text, tmp_path):
    # json.loads raises ValueError (more than 4300 digits) or RecursionError (deep
    # nesting) for these, not JSONDecodeError: both used to escape as tracebacks.
    path = tmp_path / "v.json"
    path.write_text(text)
    with pytest.raises(InputError, match="not an ngramlm vocabulary file") as e:
        Vocab.load(path)
    assert e.value.path == str(path)


# ============================================================================ ARPA reader
TINY = [["a", "b"], ["a"], ["b", "a"], ["c", "b", "a", "b"], ["a", "b"], ["b", "c"]]
SENTS_TO_SCORE = [["a", "b", "c"], ["zzz", "a"], []]


def _tiny_model(smoothing="wb", order=3) -> NgramLM:
    v = Vocab().fit(TINY)
    return NgramLM(order=order, smoothing=smoothing).fit(v.encode_sentences(TINY), vocab=v)


def _arpa_bytes() -> bytes:
    with tempfile.TemporaryDirectory() as tmp:
        write_arpa(_tiny_model(), Path(tmp) / "m.arpa")
        return (Path(tmp) / "m.arpa").read_bytes()


ARPA_BYTES = _arpa_bytes()
ARPA_FIELDS = ["nan", "inf", "-inf", "1e400", "-1e400", "-0", "", "x", "1_0", "0x1p-3", "+1", "١", "-99",
               "ngram 1=3", "ngram 2=-1", "\\data\\", "\\end\\", "\\1-grams:", "\\3-grams:", "<s>", "<pad>", "a a a"]


def mutate_lines(data: st.DataObject, raw: bytes) -> bytes:
    """Line-level edits of a text file: delete, duplicate, swap, replace a field, insert garbage."""
    lines = raw.decode("utf-8").split("\n")
    for _ in range(data.draw(st.integers(1, 3))):
        op = data.draw(st.sampled_from(["delete", "dup", "swap", "field", "garbage", "tabs"]))
        i = data.draw(st.integers(0, len(lines) - 1))
        if op == "delete" and len(lines) > 1:
            del lines[i]
        elif op == "dup":
            lines.insert(i, lines[i])
        elif op == "swap":
            j = data.draw(st.integers(0, len(lines) - 1))
            lines[i], lines[j] = lines[j], lines[i]
        elif op == "field":
            parts = re.split(r"([\t =])", lines[i])
            k = data.draw(st.integers(0, len(parts) - 1))
            parts[k] = data.draw(st.one_of(st.sampled_from(ARPA_FIELDS), st.text(max_size=6)))
            lines[i] = "".join(parts)
        elif op == "garbage":
            lines.insert(i, data.draw(st.one_of(st.text(max_size=20), st.sampled_from(ARPA_FIELDS))))
        elif op == "tabs":
            lines[i] = lines[i].replace("\t", data.draw(st.sampled_from([" ", "  ", "\t\t", "\u3000", ""])))
    return "\n".join(lines).encode("utf-8", "surrogatepass")


def _check_usable_model(lm: NgramLM) -> None:
    """A model that loaded must score and answer queries without crashing, and its two query paths agree."""
    enc, oov = lm.encode(SENTS_TO_SCORE)
    s = lm.token_scores(enc, oov=oov)
    assert len(s) == enc.n_tokens and not np.isnan(s.log10_prob).any()
    lm.perplexity_report(enc, oov=oov)
    p = lm.next_probs(["<s>", "a"])
    assert p.shape == (len(lm.vocab_),) and not np.isnan(p).any() and (p >= 0).all()
    with np.errstate(divide="ignore"):  # a corrupted file may give a word probability 0: log10 is -inf
        assert np.isclose(lm.log10_prob("b", ["<s>", "a"]), np.log10(p[lm.vocab_["b"]]))


def arpa_sniff_expected(text: bytes) -> bool:
    """What :func:`looks_like_arpa` must answer for a file of these (gunzipped) bytes, from its contract:
    whether the first line, among the first 64, that is neither blank nor a '#' comment is ``\\data\\``
    (a UTF-8 byte-order mark before it is allowed)."""
    lines = text.removeprefix(b"\xef\xbb\xbf").split(b"\n")[:64]
    first = next((line.strip() for line in lines if line.strip() and not line.startswith(b"#")), None)
    return first == b"\\data\\"


def test_the_arpa_sniff_oracle_on_known_headers():
    # The oracle the properties below hold the sniff to, on headers whose answer is known.
    assert arpa_sniff_expected(ARPA_BYTES) and arpa_sniff_expected(b"\xef\xbb\xbf\n# c\n  \\data\\\r\nngram 1=1")
    assert not arpa_sniff_expected(b"hello\n\\data\\\n") and not arpa_sniff_expected(b"")
    assert not arpa_sniff_expected(b"#\n" * 64 + b"\\data\\\n")  # the sniff looks no further than 64 lines


def _read_mutated_arpa(raw: bytes, gz: bool) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / ("m.arpa.gz" if gz else "m.arpa")
        path.write_bytes(gzip.compress(raw) if gz else raw)
        sniff = looks_like_arpa(path)
        assert sniff == arpa_sniff_expected(raw), raw[:200]
        event(f"sniff: {sniff}")
        try:
            lm = read_arpa(path)
        except InputError as exc:
            assert str(path) in str(exc)
            event(f"InputError: {exc.message[:30]}")  # --hypothesis-show-statistics
            return
    event("read")
    _check_usable_model(lm)


@FAST
@given(data=st.data(), gz=st.booleans())
def test_arpa_reader_on_byte_corruption(data, gz):
    _read_mutated_arpa(mutate_bytes(data, ARPA_BYTES), gz)


@FAST
@given(data=st.data())
def test_arpa_reader_on_line_corruption(data):
    _read_mutated_arpa(mutate_lines(data, ARPA_BYTES), gz=False)


@FAST
@given(data=st.data())
def test_corrupted_gzip_arpa_raises_input_error(data):
    raw = mutate_bytes(data, gzip.compress(ARPA_BYTES))
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "m.arpa.gz"
        path.write_bytes(raw)
        sniff = looks_like_arpa(path)
        if raw[:2] == b"\x1f\x8b":
            try:
                text = gzip.decompress(raw)
            except (OSError, EOFError, zlib.error):
                # The sniff reads only the first lines (they may still inflate); the reader needs it all.
                with pytest.raises(InputError, match="gzip data is truncated or corrupt") as e:
                    read_arpa(path)
                assert e.value.path == str(path)
                event("corrupt gzip")
                return
        else:  # the magic number itself was hit: the file is read as plain bytes
            text = raw
        event(f"gunzipped: {text == ARPA_BYTES}")
        assert sniff == arpa_sniff_expected(text)
        try:
            lm = read_arpa(path)
        except InputError as exc:
            assert str(path) in str(exc)
            assert text != ARPA_BYTES  # a header byte hit, the data intact: the file must read
            return
    _check_usable_model(lm)


def test_unmutated_arpa_reads_back():
    # The properties above start from a valid file: make sure it is one.
    with tempfile.TemporaryDirectory() as tmp:
        (Path(tmp) / "m.arpa").write_bytes(ARPA_BYTES)
        lm = read_arpa(Path(tmp) / "m.arpa")
        orig = _tiny_model()
        enc, oov = lm.encode(SENTS_TO_SCORE)
        assert np.allclose(lm.token_scores(enc, oov=oov).log10_prob,
                           orig.token_scores(orig.encode(SENTS_TO_SCORE)[0]).log10_prob, atol=1e-6)


ONE_WORD = "\\data\\\nngram 1=2\n\n\\1-grams:\n-1\ta\n-1\t</s>\n\n\\end\\\n"


@pytest.mark.parametrize("text,needle,line", [
    # A unigram named <pad> used to load into a vocabulary with a duplicate token,
    # and the model, once saved natively, could not be loaded again.
    (ONE_WORD.replace("\ta\n", "\t<pad>\n"), "reserved", 5),
    # Order 13 used to load, then fail to save/load (the toolkit handles up to 12).
    ("\\data\\\n" + "".join(f"ngram {k}=0\n" for k in range(1, 14)), "above the highest order", 14),
])
def test_arpa_regressions_found_by_the_properties(text, needle, line, tmp_path):
    path = tmp_path / "m.arpa"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(InputError, match=needle) as e:
        read_arpa(path)
    assert e.value.path == str(path) and e.value.line == line


def test_perplexity_of_a_tiny_probability_is_inf_not_an_overflow(tmp_path):
    # Found by benchmarks/fuzz_readers.py: perplexity_report computed 10.0 ** (-total / n)
    # with Python floats and raised OverflowError.  log10 p(a) = -5897 is a valid (tiny) probability.
    path = tmp_path / "m.arpa"
    path.write_text("\\data\\\nngram 1=2\n\n\\1-grams:\n-5897.7\ta\n-0.5\t</s>\n\n\\end\\\n")
    lm = read_arpa(path)
    enc, oov = lm.encode([["a"]])
    assert lm.token_scores(enc, oov=oov).log10_prob.tolist() == [-5897.7, -0.5]
    assert lm.perplexity_report(enc, oov=oov).ppl == float("inf")


@pytest.mark.parametrize("prefix,newline", [("\ufeff", "\n"), ("", "\r\n"), ("\ufeff", "\r\n")])
def test_arpa_with_bom_or_crlf_reads_like_the_plain_file(prefix, newline, tmp_path):
    plain = tmp_path / "plain.arpa"
    plain.write_bytes(ARPA_BYTES)
    other = tmp_path / "other.arpa"
    other.write_bytes((prefix + ARPA_BYTES.decode("utf-8").replace("\n", newline)).encode("utf-8"))
    assert looks_like_arpa(other)
    a, b = read_arpa(plain), read_arpa(other)
    assert a.vocab_.itos_ == b.vocab_.itos_
    for x, y in zip(a.log10_prob_ + a.log10_backoff_, b.log10_prob_ + b.log10_backoff_):
        assert np.array_equal(x, y)


# ============================================================================ native loader
def _native_bytes(smoothing, order) -> bytes:
    with tempfile.TemporaryDirectory() as tmp:
        _tiny_model(smoothing, order).save(Path(tmp) / "m.npz")
        return (Path(tmp) / "m.npz").read_bytes()


NATIVE = {s: _native_bytes(s, o) for s, o in (("wb", 3), ("laplace", 2), ("stupid", 2))}


def _unpickled() -> None:
    raise AssertionError("the native loader unpickled something")


def no_pickle():
    """Pickle's loaders as tripwires: fail if anything called them, even if the loader caught the
    tripwire's exception and turned it into an InputError."""
    return pickle_tripwire(on_use=_unpickled)


def _check_native(raw: bytes, *, native: bool | None = None) -> None:
    """Load ``raw`` as a native model: an InputError naming the file, or a usable model.  The sniff must
    answer ``native`` where the caller knows the answer (None: unknown), False where the zip magic
    number is gone, and True for any file that loads."""
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "m.npz"
        path.write_bytes(raw)
        sniff = is_native(path)
        if native is not None:
            assert sniff == native
        if raw[:4] != b"PK\x03\x04":
            assert not sniff
        try:
            with no_pickle():
                lm = load_native(path)
        except InputError as exc:
            assert str(path) in str(exc)
            event(f"InputError: {exc.message[:30]}")
            return
    event("loaded")
    assert sniff, "a file the native loader reads must be recognised by the sniff (load_any dispatches on it)"
    _check_usable_model(lm)


@FAST
@given(data=st.data(), which=st.sampled_from(sorted(NATIVE)))
def test_native_loader_on_byte_corruption(data, which):
    _check_native(mutate_bytes(data, NATIVE[which]))


def _arrays(raw: bytes) -> dict:
    with np.load(io.BytesIO(raw), allow_pickle=False) as z:
        return {k: z[k] for k in z.files}


def _npz(arrays: dict) -> bytes:
    buf = io.BytesIO()
    np.savez(buf, **arrays)  # object arrays are pickled here: the loader must refuse them
    return buf.getvalue()


ARRAYS = st.one_of(
    st.builds(lambda n, dt: np.arange(n).astype(dt), st.integers(0, 12),
              st.sampled_from(["int64", "int32", "uint8", "float64", "float32", "bool", "complex128", "<U3"])),
    st.builds(lambda n: np.full((n, 2), -0.5), st.integers(0, 4)),
    st.just(np.float64(-1.0).reshape(())), st.just(np.array([np.nan, -np.inf, 0.5, 1e308])),
    st.just(np.array([{"x": 1}, None], dtype=object)), st.just(np.array([10 ** 12, -5, 3], dtype=np.int64)),
)


def mutate_native(data: st.DataObject, arrays: dict) -> dict:
    """Structural corruption inside a valid zip: swap, drop, replace arrays; rewrite the metadata."""
    arrays = dict(arrays)
    for _ in range(data.draw(st.integers(1, 3))):
        names = sorted(arrays)
        op = data.draw(st.sampled_from(["swap", "drop", "replace", "meta", "meta_raw", "reverse"]))
        if op == "swap" and len(names) > 1:
            a, b = data.draw(st.sampled_from(names)), data.draw(st.sampled_from(names))
            arrays[a], arrays[b] = arrays[b], arrays[a]
        elif op == "drop" and names:
            del arrays[data.draw(st.sampled_from(names))]
        elif op == "replace" and names:
            arrays[data.draw(st.sampled_from(names))] = data.draw(ARRAYS)
        elif op == "reverse" and names:
            k = data.draw(st.sampled_from(names))
            arrays[k] = arrays[k][::-1].copy() if arrays[k].ndim else arrays[k]
        elif op == "meta" and "meta" in arrays:
            try:
                meta = json.loads(bytes(arrays["meta"]).decode("utf-8"))
            except (ValueError, UnicodeDecodeError):
                continue
            meta = mutate_json(data, meta)
            arrays["meta"] = np.frombuffer(json.dumps(meta).encode("utf-8"), dtype=np.uint8)
        elif op == "meta_raw":
            arrays["meta"] = np.frombuffer(data.draw(st.binary(max_size=40)), dtype=np.uint8)
    return arrays


@SLOW
@given(data=st.data(), which=st.sampled_from(sorted(NATIVE)))
def test_native_loader_on_structural_corruption(data, which):
    arrays = mutate_native(data, _arrays(NATIVE[which]))
    _check_native(_npz(arrays), native="meta" in arrays)  # a valid zip: native exactly when it holds meta.npy


@pytest.mark.parametrize("which", sorted(NATIVE))
def test_native_regressions_found_by_the_properties(which, tmp_path):
    """Crashes the properties found (each was a traceback, now an InputError)."""
    arrays = _arrays(NATIVE[which])
    meta = json.loads(bytes(arrays["meta"]).decode("utf-8"))

    def with_meta(**changes):
        return {**arrays, "meta": np.frombuffer(json.dumps({**meta, **changes}).encode(), dtype=np.uint8)}

    cases = {
        "order 0": with_meta(order=0),
        "order -1": with_meta(order=-1),
        "meta is a list": {**arrays, "meta": np.frombuffer(b"[1, 2]", dtype=np.uint8)},
        "init_params a list": with_meta(init_params=[1]),
        "smoother_params a list": with_meta(smoother_params=[1]),
        "unknown kind": with_meta(kind="neural"),
        "n_types wrong": with_meta(n_types=3),
        "keys1 as strings": {**arrays, "keys1": np.array(["a"] * len(arrays["keys1"]))},
        "object array": {**arrays, "keys1": np.array([None] * len(arrays["keys1"]), dtype=object)},
        "2-d keys": {**arrays, "keys1": arrays["keys1"].reshape(-1, 1)},
        "reversed keys": {**arrays, "keys2": arrays["keys2"][::-1].copy()},
        "keys out of range": {**arrays, "keys2": arrays["keys2"] + 10 ** 9},
    }
    for name, a in cases.items():
        path = tmp_path / f"case{len(name)}.npz"
        path.write_bytes(_npz(a))
        with pytest.raises(InputError, match=re.escape(str(path))), no_pickle():
            load_native(path)


@pytest.mark.parametrize("member", ["meta.npy", "keys1.npy", "logp2.npy"])
def test_a_member_that_is_not_npy_data_is_an_input_error(member, tmp_path):
    """Found by benchmarks/fuzz_readers.py (atheris): numpy returns a member without the
    .npy magic as raw bytes, which the loader then used as an array (AttributeError)."""
    path = tmp_path / "m.npz"
    with zipfile.ZipFile(io.BytesIO(NATIVE["wb"])) as src, zipfile.ZipFile(path, "w") as dst:
        for info in src.infolist():
            dst.writestr(info.filename, b"not npy data" if info.filename == member else src.read(info))
    with pytest.raises(InputError, match="is not a numpy array"), no_pickle():
        load_native(path)


def test_a_pickle_is_refused_without_being_loaded(tmp_path):
    path = tmp_path / "m.npz"
    path.write_bytes(pickle.dumps({"evil": 1}))
    with pytest.raises(InputError, match="pickle"):
        load_native(path)


def test_loaders_raise_input_error_only():
    # InputError is the toolkit's error for bad input (and a ValueError, for callers
    # that catch that); the properties above accept nothing else.
    assert issubclass(InputError, ToolkitError) and issubclass(InputError, ValueError)


def _tables_or_error(fn, raw: bytes):
    try:
        return fn(raw, "m.arpa")
    except InputError as exc:
        return ("error", str(exc))


@FAST
@given(data=st.data(), lines=st.booleans())
def test_compiled_and_careful_arpa_readers_agree_on_corrupted_files(data, lines):
    """Differential: whatever the compiled reader accepts, the careful one reads to the same tables."""
    from ngramlm import accel
    from ngramlm.io.arpa import _read_arpa_careful, _read_arpa_fast

    if accel.fast is None:
        pytest.skip(f"compiled extension: {accel.describe()}")
    raw = mutate_lines(data, ARPA_BYTES) if lines else mutate_bytes(data, ARPA_BYTES)
    fast = _tables_or_error(_read_arpa_fast, raw)  # None: handed over to the careful reader
    if fast is None:
        return
    careful = _tables_or_error(_read_arpa_careful, raw)
    if isinstance(fast, tuple):  # an error found on the way (the metadata line): the careful one's
        assert fast == careful, (fast, careful)
        return
    assert not isinstance(careful, tuple), careful  # the compiled path accepted what the careful one refuses
    assert fast.vocab.itos_ == careful.vocab.itos_ and fast.n_ngrams == careful.n_ngrams
    for x, y in zip(fast.keys + fast.log10_prob + fast.log10_backoff,
                    careful.keys + careful.log10_prob + careful.log10_backoff):
        assert np.array_equal(x, y)
