"""The kenlm module's small types, shared by its two stand-ins: :class:`ngramlm.Model` (any model,
through the toolkit's tables) and :mod:`ngramlm.kenlm` (KenLM binaries, searched in place).

Numpy-free, as ``import ngramlm.kenlm`` must be."""
from __future__ import annotations

from .. import accel


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


class PyState:
    """The Python language-model state, where the compiled extension is missing (``ngramlm.accel``):
    hashable, comparable, copyable, as kenlm.State is.

    It holds what the compiled ``State`` holds, in Python: ``rows[L-1]``, the row of the history's last
    ``L`` words in the order-``L`` table, as far as those n-grams exist, and ``hist``, the words of
    history the model can see (see :mod:`ngramlm.query`).  Only the Python scoring path reads it."""

    __slots__ = ("rows", "hist")

    def __init__(self) -> None:
        self.rows: tuple = ()  # rows[L-1]: row of the last L history words in the order-L table
        self.hist = 0  # words of history the model can see (at most order - 1)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, PyState) and self.rows == other.rows and self.hist == other.hist

    def __hash__(self) -> int:
        return hash((self.rows, self.hist))

    def __copy__(self) -> "PyState":
        s = PyState()
        s.rows, s.hist = self.rows, self.hist
        return s

    def __repr__(self) -> str:
        return f"State(rows={self.rows}, hist={self.hist})"


# kenlm.State, for both stand-ins: the compiled state where the extension is built (the C scoring paths
# take only it), the Python one otherwise.  One class per process, so a state from either Model is the
# same type and a decoder written against kenlm needs no second name.
State = accel.fast.State if accel.fast is not None else PyState
