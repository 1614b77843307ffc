"""The kenlm module's small types, shared by its two stand-ins: :class:`ngramlm.Model` (any model,
through the toolkit's tables) and :mod:`ngramlm.kenlm` (KenLM binaries, searched in place)."""
from __future__ import annotations


class LoadMethod:
    """How a binary is brought into memory (kenlm's names): every page at load (the default, as
    kenlm's ``POPULATE_OR_READ``) or each page when first read (``LAZY``)."""
    LAZY = 0
    POPULATE_OR_LAZY = 1
    POPULATE_OR_READ = 2
    READ = 3
    PARALLEL_READ = 4


class ARPALoadComplain:
    """kenlm's names; ARPA files load through :class:`ngramlm.Model`, which always checks them."""
    ALL = 0
    EXPENSIVE = 1
    NONE = 2


class Config:
    """kenlm.Config: of its options only ``load_method`` changes what happens here."""

    def __init__(self) -> None:
        self.load_method = LoadMethod.POPULATE_OR_READ
        self.show_progress = True
        self.arpa_complain = ARPALoadComplain.ALL


class FullScoreReturn:
    """What ``BaseFullScore`` returns (kenlm.FullScoreReturn): ``log_prob``, ``ngram_length``, ``oov``."""

    __slots__ = ("log_prob", "ngram_length", "oov")

    def __init__(self, log_prob: float, ngram_length: int, oov: bool) -> None:
        self.log_prob, self.ngram_length, self.oov = log_prob, ngram_length, oov

    def __repr__(self) -> str:
        return f"FullScoreReturn(log_prob={self.log_prob}, ngram_length={self.ngram_length}, oov={self.oov})"
