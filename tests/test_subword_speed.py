"""The learned subword tokenizers encode word types, not tokens: each distinct word once through the
library, every line then built from that table (corpora/subwords.py).  That is only a speed-up if it
is exact: every line's pieces must be the library's own encoding of the line -- on tricky text
(punctuation, whitespace runs, CJK, emoji, ``▁`` in the text, the ``<unk>`` the library cuts out of
the raw text, words unseen in training), on random text, across batches, and on PTB train."""
from __future__ import annotations

import json
import random

import pytest

from conftest import needs
from corpora import subwords
from corpora.tokenize import TokenizerSpec, make_tokenizer, spec_from_text

pytestmark = needs("tokenizers")
KINDS = ("bpe", "unigram")

TRAIN = [
    "the market said company shares report investors trading stock prices , billion .",
    "analysts expect higher interest rates ; the dollar fell 3.5 % to 1,000 yen !",
    "n't it 's <unk> said mr. <unk> of new york-based <unk> corp .",
    "café naïve résumé : « déjà vu » — über straße",
    "东京 北京 中文 文字 的 是 了",
    "tab\tseparated   and   spaced   words",
]
TRICKY = [
    "",
    "   ",
    "\t \t",
    "the market said",
    "  the   market\tsaid  ",  # runs of spaces and tabs: one space each, as the library is fed
    "shares , billion . ; : ! ?",
    "(shares) [billion] {yen} \"quoted\" 'single' ... -- --- a-b",
    "zyxwv qqqq jjjj xylophone",  # words never seen in training, letters seen
    "Ωμέγα ж ф ש ع",  # characters never seen in training: the unknown piece (unigram: the raw text)
    "东京 中文字 的的的 北",
    "😀 emoji 😀😀 e\u0301 combining",
    "<unk>",
    "<unk> first",
    "last <unk>",
    "x <unk> y <unk> <unk> z",  # a space before <unk> is a piece of its own in the library
    "<unk><unk> x<unk>y <unk>x y<unk> <unk",
    "unk> <un k> <UNK>",
    "▁",
    "▁ ▁",
    "x ▁foo ▁▁bar baz▁ a▁b ▁",  # a word that starts with ▁ gets no ▁ prepended
    "▁foo x",
    "\u00a0no-break\u00a0space\u2003em\u2003space\x1cfile-sep",
    "the" * 40,
    "1,000 3.5 % $ 2019-01-02",
]
FRAGMENTS = ["the", "market", "s", "'s", "n't", ",", ".", "<unk>", "<", "unk", ">", "▁", "東京", "中", "é",
             "ж", "😀", "qq", "-", "1,000", "yen", "a", "ing", "mr.", "\u0301"]
SPACES = [" ", " ", " ", "  ", "\t", ""]  # "" glues fragments into one word


def library_pieces(tok, lines: list) -> list:
    """The library's own encoding of each line, one call per line (the reference)."""
    return [tok._tk.encode(" ".join(line.split()), add_special_tokens=False).tokens for line in lines]


def random_lines(seed: int, n: int) -> list:
    r = random.Random(seed)
    return ["".join(r.choice(FRAGMENTS) + r.choice(SPACES) for _ in range(r.randint(0, 12))) for _ in range(n)]


@pytest.fixture(scope="module")
def fitted():
    return {kind: make_tokenizer(spec_from_text(f"{kind}:150")).fit(TRAIN * 3).spec for kind in KINDS}


@pytest.mark.parametrize("kind", KINDS)
def test_the_word_table_gives_the_librarys_pieces_on_tricky_text(fitted, kind):
    tok = make_tokenizer(fitted[kind])
    assert tok._by_word  # the set-up learn() makes takes the word-table path
    ref = library_pieces(tok, TRICKY)
    assert tok.encode_lines(TRICKY) == ref
    assert [tok(line) for line in TRICKY] == ref  # the one-line path, now with full tables
    assert make_tokenizer(fitted[kind]).encode_lines(list(reversed(TRICKY))) == ref[::-1]
    # The cases the table must key by position: <unk> and ▁ after a space differ from first in a line.
    assert tok("x <unk>")[-2:] == ["▁", "<unk>"] and tok("<unk> x")[0] == "<unk>"
    assert all(" " not in p and p for line in ref for p in line)


@pytest.mark.parametrize("kind", KINDS)
def test_random_text_in_batches_matches_the_library(fitted, kind):
    tok = make_tokenizer(fitted[kind])
    lines = random_lines(7, 400)
    ref = library_pieces(tok, lines)
    # Small batches: a word first met as a line's first word is met later after a space, and back.
    got = [p for a in range(0, len(lines), 37) for p in tok.encode_lines(lines[a:a + 37])]
    assert got == ref
    assert tok.encode_lines(lines) == ref  # tables full


@pytest.mark.parametrize("kind", KINDS)
def test_the_tables_start_afresh_past_their_bound(fitted, kind, monkeypatch):
    monkeypatch.setattr(subwords, "MAX_WORDS", 10)
    tok = make_tokenizer(fitted[kind])
    lines = random_lines(8, 120)
    got = [p for a in range(0, len(lines), 10) for p in tok.encode_lines(lines[a:a + 10])]
    assert got == library_pieces(tok, lines)
    assert len(tok._tail) <= 10 + len({w for line in lines[-10:] for w in line.split()})  # it did start afresh


@pytest.mark.parametrize("kind", KINDS)
def test_a_state_set_up_otherwise_is_encoded_line_by_line(fitted, kind):
    # prepend_scheme "first": only a text's first segment gets a ▁, so a word's pieces depend on its line.
    state = json.loads(fitted[kind].state)
    state["pre_tokenizer"]["prepend_scheme"] = "first"
    tok = make_tokenizer(TokenizerSpec(kind=kind, size=150, state=json.dumps(state)))
    assert not tok._by_word
    lines = TRICKY + random_lines(9, 100)
    assert tok.encode_lines(lines) == library_pieces(tok, lines)


@pytest.fixture(scope="module")
def ptb(shared_corpora):
    from corpora.corpus import read_lines

    lines = read_lines(shared_corpora / "ptb" / "ptb.train.txt")
    # Fitted on the first 10,000 lines only: a quarter of the fitting time, and the rest of PTB train
    # brings words the tokenizer never saw.
    return lines, {kind: make_tokenizer(spec_from_text(f"{kind}:4000")).fit(lines[:10_000]).spec for kind in KINDS}


@pytest.mark.parametrize("kind", KINDS)
def test_ptb_train_encodes_exactly_as_the_library_does(ptb, kind):
    lines, specs = ptb
    tok = make_tokenizer(specs[kind])
    assert tok._by_word
    # The library's batch encoder as the reference here (its own line-by-line encoding is what the
    # tricky and random texts check; the two agree): one call, on every core, keeps this to seconds.
    ref = [e.tokens for e in tok._tk.encode_batch([" ".join(t.split()) for t in lines], add_special_tokens=False)]
    assert tok.encode_lines(lines) == ref
    assert sum(map(len, ref)) > 887_000  # every word at least one piece; <unk> after a space two
