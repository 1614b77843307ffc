"""Querying a fitted n-gram model: the scorer over :class:`~ngramlm.tables.NgramTables`.

KenLM keeps estimation (``lmplz``) apart from querying (``query``, the ``kenlm`` module); so does this
package.  :class:`Scorer` needs nothing but tables -- from estimation, an ARPA file, the native loader
or pruning -- and gives every query: n-gram lookup (binary search, or a hash index when built),
per-token scores, log10 p(w | h), next-token distributions and sampling.  :class:`~ngramlm.model.NgramLM`
is the estimator that extends it; :class:`~ngramlm.query.Model` (the kenlm API) wraps one.

Scoring follows KenLM and SRILM: each sentence is ``<s> w1 .. wm </s>``; every word and the ``</s>``
are predicted, ``<s>`` never is; histories never cross sentences.  Log probabilities are base 10.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable, Optional, Sequence

import numpy as np

from corpora.accounting import PerplexityReport, encode_with_oov, report_from_log10
from corpora.errors import InputError, NotFittedError
from corpora.vocab import BOS_ID, EOS_ID, PAD_ID, UNK_ID, EncodedText

from .counts import lookup, padded_stream
from .tables import NgramTables

@dataclass
class TokenScores:
    """Per predicted token: log10 p, the length of the n-gram that matched, OOV flag."""

    log10_prob: np.ndarray  # float64; -inf for zero-probability events
    ngram_length: np.ndarray  # int8; 0 when nothing matched (MLE zero)
    oov: np.ndarray  # bool
    sentence_starts: np.ndarray  # int64 offsets into the arrays above, one per sentence + end

    def __len__(self) -> int:
        return len(self.log10_prob)


# Padded positions scored at a time: the per-order temporaries of the vectorised scoring (about 80
# bytes a position) stay a few MB however long the text.  Histories never cross sentences, so a text
# cut between sentences scores exactly as it does whole.
SCORE_BATCH = 1 << 15


def _batches(pos: np.ndarray, size: int) -> list:
    """(start, end) slices of a padded stream (``pos``: position in the sentence, 0 at each ``<s>``)
    of about ``size`` positions each, cut only where a sentence starts; one slice when it is short."""
    n = len(pos)
    if n <= size:
        return [(0, n)]
    starts = np.flatnonzero(pos == 0)
    out, a = [], 0
    while a < n:
        if n - a <= size:
            out.append((a, n))
            break
        i = int(np.searchsorted(starts, a + size, side="right")) - 1  # the last sentence start within reach
        b = int(starts[i]) if i >= 0 and starts[i] > a else None
        if b is None:  # one sentence longer than a batch: it goes whole
            j = int(np.searchsorted(starts, a, side="right"))
            b = int(starts[j]) if j < len(starts) else n
        out.append((a, b))
        a = b
    return out


def _linked(pos: np.ndarray) -> np.ndarray:
    """True where a padded position continues the previous one's history (same sentence)."""
    linked = np.zeros(len(pos), dtype=bool)
    linked[1:] = pos[1:] == pos[:-1] + 1
    return linked


class CompiledIndex:
    """The compiled extension's hash tables as the vectorised scorer's index."""

    def __init__(self, tables: NgramTables) -> None:
        from . import accel

        keep = tables.extended_rows() if tables.missing_backoff == 0.0 else [None] * tables.order
        self.tables = accel.fast.Tables(list(tables.keys), list(tables.log10_prob), list(tables.log10_backoff),
                                        float(tables.missing_backoff), tables.V, tables.vocab.stoi_, UNK_ID, keep)
        if hasattr(self.tables, "set_suffix_closed"):
            self.tables.set_suffix_closed(tables.is_suffix_closed(lambda k, q: self.find(k, q)))

    def find(self, k: int, queries: np.ndarray) -> np.ndarray:
        return self.tables.find_many(k, np.ascontiguousarray(queries, dtype=np.int64))


def _table_field(name: str, doc: str):
    """An attribute of the fitted model that lives in its tables (``lm.keys_`` is ``lm.tables_.keys``)."""

    def get(self):
        try:
            tables = self.__dict__["tables_"]
        except KeyError:
            raise AttributeError(f"{name}: the model is not fitted") from None
        return getattr(tables, name)

    def set_(self, value):
        self.tables_ = self.tables_.replace(**{name: value})
        self._index = None

    return property(get, set_, doc=doc)


class Scorer:
    """The query object over one model's tables.

    >>> from corpora import Vocab
    >>> from ngramlm.builder.estimate import estimate_tables
    >>> from ngramlm.counts import NgramCounts
    >>> from ngramlm.smoothing import make_smoother
    >>> sents = [["a", "b"], ["a", "c", "b"], ["b", "a"]]
    >>> vocab = Vocab().fit(sents)
    >>> counts = NgramCounts.from_encoded(vocab.encode_sentences(sents), order=2, vocab_size=len(vocab))
    >>> s = Scorer(estimate_tables(counts, vocab=vocab, smoother=make_smoother("wb")))
    >>> round(sum(s.distribution(["a"]).values()), 12)
    1.0
    """

    def __init__(self, tables: NgramTables) -> None:
        self._set_tables(tables)

    # ------------------------------------------------------------------ fitted state (views of tables_)
    vocab_ = _table_field("vocab", "the vocabulary")
    kind_ = _table_field("kind", '"backoff" or "additive"')
    keys_ = _table_field("keys", "per order: sorted packed n-gram keys")
    n_ngrams_ = _table_field("n_ngrams", "n-grams per order (ARPA counting)")
    smoother_name_ = _table_field("smoother_name", "the smoothing method")
    smoother_params_ = _table_field("smoother_params", "its parameters")
    info_ = _table_field("info", "discounts, lambdas, pruning ... for reports")
    is_distribution_ = _table_field("is_distribution", "False for stupid backoff")
    count_of_counts_ = _table_field("count_of_counts", "count-of-counts per order")
    log10_prob_ = _table_field("log10_prob", "per order: log10 p per row")
    log10_backoff_ = _table_field("log10_backoff", "per order: log10 back-off per row")
    missing_backoff_ = _table_field("missing_backoff", "log10 weight of an unstored context")
    counts_ = _table_field("counts", "additive models: counts per row")
    ctx_total_ = _table_field("ctx_total", "additive models: context totals")
    add_k_ = _table_field("add_k", "additive models: the pseudo-count")

    @property
    def order_(self) -> int:
        return self.tables_.order

    @property
    def n_types_(self) -> int:
        return len(self.tables_.vocab) - 2


    def _set_tables(self, tables: NgramTables):
        self.tables_ = tables
        self._index = None  # hash indexes of earlier tables are stale
        return self

    def _check_fitted(self) -> None:
        if not hasattr(self, "tables_"):
            raise NotFittedError(self)

    # ------------------------------------------------------------------ lookups
    def _gram_ids(self, tokens: np.ndarray, pos: np.ndarray) -> list:
        """gid[k-1][t]: index in order k of the k-gram *ending* at padded position t, or -1."""
        V = len(self.vocab_)
        gids = [tokens.astype(np.int64)]
        # A history continues only where positions are consecutive (rows of a batch
        # of queries are separate sentences even when they carry no <s>).
        linked = _linked(pos)
        for k in range(2, self.order_ + 1):
            prev = np.empty_like(gids[-1])
            prev[0] = -1
            prev[1:] = gids[-1][:-1]
            # prev >= 0 (with linked) implies the history is long enough for order k.
            q = np.where((prev >= 0) & linked, prev * V + gids[0], -1)
            gids.append(self._find(k, q))
        return gids

    def _find(self, k: int, queries: np.ndarray) -> np.ndarray:
        """Index of each key in order k (-1 if absent): hash index if built, else binary search."""
        index = getattr(self, "_index", None)
        if index is not None:
            return index.find(k, queries) if isinstance(index, CompiledIndex) else index[k - 1].lookup(queries)
        return lookup(self.keys_[k - 1], queries)

    def build_index(self) -> "Scorer":
        """Build hash indexes over the n-gram keys (~4x faster lookups than binary search).

        Built only when asked (``ngramlm.Model`` asks on load).  With the compiled extension the
        index is its C hash tables (which the kenlm state API shares); without it, numpy ones.
        """
        from . import accel

        if self.kind_ == "backoff" and accel.fast is not None:
            self._index = CompiledIndex(self.tables_)
        else:
            from .hashindex import HashIndex

            self._index = [None] + [HashIndex(keys) for keys in self.keys_[1:]]
        return self

    def compiled_tables(self):
        """The compiled query tables (``ngramlm._fast.state.Tables``), or None without the extension."""
        idx = self._index
        return idx.tables if isinstance(idx, CompiledIndex) else None

    def _score_padded(self, tokens: np.ndarray, pos: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """log10 p and matched length at every padded position (values at <s> are meaningless)."""
        gids = self._gram_ids(tokens, pos)
        n = self.order_
        if self.kind_ == "additive":
            return self._score_additive(tokens, pos, gids)
        T = len(tokens)
        # Longest match: every id is a unigram; higher orders overwrite where found.
        lp = self.log10_prob_[0][tokens]
        matched = np.ones(T, dtype=np.int8)
        for k in range(2, n + 1):
            g = gids[k - 1]
            hit = np.flatnonzero(g >= 0)
            lp[hit] = self.log10_prob_[k - 1][g[hit]]
            matched[hit] = k
        # Add the backoff weight of every context longer than the match: context
        # length j applies at t when j >= matched[t] and the history has j words.
        linked = _linked(pos)
        missing = self.missing_backoff_
        for j in range(1, n):
            t = np.flatnonzero((matched[1:] <= j) & (pos[1:] >= j) & linked[1:]) + 1
            if not len(t):
                continue
            ctx = gids[j - 1][t - 1]
            found = ctx >= 0
            if missing == 0.0:
                t = t[found]
                lp[t] += self.log10_backoff_[j - 1][ctx[found]]
            else:
                lp[t] += np.where(found, self.log10_backoff_[j - 1][np.maximum(ctx, 0)], missing)
        return lp, matched

    def _score_additive(self, tokens, pos, gids):
        n = self.order_
        kk = self.add_k_
        V = float(self.n_types_)
        L = np.minimum(pos, n - 1)  # context length used
        c_hw = np.zeros(len(tokens))
        c_h = np.zeros(len(tokens))
        matched = np.zeros(len(tokens), dtype=np.int8)
        for o in range(1, n + 1):
            sel = L == o - 1
            if not sel.any():
                continue
            g = gids[o - 1][sel]
            found = g >= 0
            vals = np.zeros(len(g))
            vals[found] = self.counts_[o - 1][g[found]]
            c_hw[sel] = vals
            if o == 1:
                c_h[sel] = self.ctx_total_[0][0]
            else:
                ctx = np.empty(len(tokens), dtype=np.int64)
                ctx[0] = -1
                ctx[1:] = gids[o - 2][:-1]
                ctx[~_linked(pos)] = -1
                cs = ctx[sel]
                tot = np.zeros(len(cs))
                ok = cs >= 0
                tot[ok] = self.ctx_total_[o - 1][cs[ok]]
                c_h[sel] = tot
            matched[sel] = np.where(vals > 0, o, 0)
        with np.errstate(divide="ignore", invalid="ignore"):
            if kk == 0.0:
                p = np.where(c_h > 0, c_hw / np.where(c_h > 0, c_h, 1.0), 0.0)
            else:
                p = (c_hw + kk) / (c_h + kk * V)
            lp = np.log10(p)
        return lp, matched

    # ------------------------------------------------------------------ public scoring API
    def token_scores(self, text: EncodedText, *, oov: Optional[np.ndarray] = None) -> TokenScores:
        """Score every predicted token of an encoded text (words and sentence ends)."""
        self._check_fitted()
        # Scoring never changes the model: the hash index is built by build_index() (ngramlm.Model
        # does it on load); without it lookups are binary searches, faster for a one-off text.
        tokens, pos = padded_stream(text)
        parts = [self._score_kept(tokens[a:b], pos[a:b]) for a, b in _batches(pos, SCORE_BATCH)]
        if len(parts) == 1:
            lp, matched = parts[0]
        else:
            lp = np.concatenate([p[0] for p in parts])
            matched = np.concatenate([p[1] for p in parts])
        del parts
        if oov is None:
            oov = text.ids == UNK_ID if not self.vocab_.n_corpus_unk_ else np.zeros(len(text.ids), dtype=bool)
        return TokenScores(lp, matched, oov, text.starts)

    def _score_kept(self, tokens: np.ndarray, pos: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """_score_padded with the <s> positions dropped."""
        lp, matched = self._score_padded(tokens, pos)
        keep = pos > 0
        return lp[keep], matched[keep]

    def perplexity_report(self, text: EncodedText, *, oov: Optional[np.ndarray] = None) -> PerplexityReport:
        s = self.token_scores(text, oov=oov)
        return report_from_log10(s.log10_prob, s.oov, text.n_sentences)

    def log10_score(self, text: EncodedText) -> float:
        """Total log10 probability of the text (-inf if any event has probability 0)."""
        return float(self.token_scores(text).log10_prob.sum())

    def perplexity(self, text: EncodedText) -> float:
        """Perplexity over all predicted tokens (inf if any has probability 0)."""
        s = self.token_scores(text)
        return float(10.0 ** (-s.log10_prob.sum() / len(s)))

    def sentence_log10_probs(self, text: EncodedText) -> np.ndarray:
        s = self.token_scores(text)
        # Per-sentence sums, not differences of one running sum: after a -inf token (an MLE
        # zero) every later difference would be -inf - -inf = NaN.  Each sentence has at least
        # its </s>, so no segment is empty.
        if len(s.log10_prob) == 0:
            return np.zeros(0)
        return np.add.reduceat(s.log10_prob, text.starts[:-1])

    def encode(self, sentences: Iterable[Sequence[str]]) -> tuple[EncodedText, np.ndarray]:
        """Encode token lists with the model's vocabulary; also return the OOV flags."""
        self._check_fitted()
        return encode_with_oov(self.vocab_, list(sentences))

    # ------------------------------------------------------------------ single queries
    def log10_prob(self, word: str, context: Sequence[str] = ()) -> float:
        """log10 p(word | context).  ``context`` may start with ``<s>``; only the last order-1 words count."""
        self._check_fitted()
        ctx = list(context)
        bos = self.vocab_.bos_token
        if bos in ctx:
            ctx = ctx[len(ctx) - ctx[::-1].index(bos):]
            padded = [BOS_ID] + [self.vocab_[w] for w in ctx]
        else:
            padded = [BOS_ID] * 0 + [self.vocab_[w] for w in ctx]
        ids = padded + [self.vocab_[word] if word != self.vocab_.eos_token else EOS_ID]
        tokens = np.asarray(ids, dtype=np.int64)
        if bos in context:
            pos = np.arange(len(ids), dtype=np.int64)
        else:
            # No sentence start in view: behave as if the history were long enough.
            pos = np.arange(len(ids), dtype=np.int64) + self.order_
        lp, _ = self._score_padded(tokens, pos)
        return float(lp[-1])

    def prob(self, word: str, context: Sequence[str] = ()) -> float:
        return 10.0 ** self.log10_prob(word, context)

    def distribution(self, context: Sequence[str] = ()) -> dict:
        """p(. | context) over every predicted type (words, <unk>, </s>)."""
        p = self.next_probs(context)
        return {self.vocab_.itos_[i]: float(p[i]) for i in range(len(p)) if i not in (PAD_ID, BOS_ID)}

    def next_probs(self, context: Sequence[str] = ()) -> np.ndarray:
        """Vector of p(w | context) over all ids (0 for <pad> and <s>)."""
        self._check_fitted()
        V = len(self.vocab_)
        ctx = list(context)
        bos = self.vocab_.bos_token
        saw_bos = bos in ctx
        if saw_bos:
            ctx = ctx[len(ctx) - ctx[::-1].index(bos):]
        ids = ([BOS_ID] if saw_bos else []) + [self.vocab_[w] for w in ctx]
        ids = ids[max(0, len(ids) - (self.order_ - 1)):]
        cand = np.arange(V, dtype=np.int64)
        tokens = np.concatenate([np.repeat(np.asarray(ids, dtype=np.int64)[None, :], V, axis=0), cand[:, None]], axis=1)
        L = tokens.shape[1]
        start = 0 if ids and ids[0] == BOS_ID else self.order_
        pos_row = np.arange(L, dtype=np.int64) + start
        # Score all V continuations at once: each row is a tiny sentence.
        flat = tokens.ravel()
        pos = np.tile(pos_row, V)
        lp, _ = self._score_padded(flat, pos)
        out = 10.0 ** lp.reshape(V, L)[:, -1]
        out[[PAD_ID, BOS_ID]] = 0.0
        return out

    # ------------------------------------------------------------------ generation
    def generate(self, *, num_words: int = 20, context: Sequence[str] = (), temperature: float = 1.0,
                 random_state: Optional[int | np.random.Generator] = None, stop_at_eos: bool = True) -> list:
        """Sample words from p(.|history) ** (1/temperature), renormalised."""
        if temperature <= 0:
            raise InputError(f"temperature must be > 0, got {temperature}", fix="use e.g. --temperature 1.0")
        rng = random_state if isinstance(random_state, np.random.Generator) else np.random.default_rng(random_state)
        hist = [self.vocab_.bos_token] + list(context)
        out: list = []
        for _ in range(num_words):
            p = self.next_probs(hist)
            if temperature != 1.0:
                with np.errstate(divide="ignore"):
                    logits = np.log(p) / temperature
                logits -= logits[np.isfinite(logits)].max()
                p = np.exp(logits)
            p = p / p.sum()
            w = int(rng.choice(len(p), p=p))
            tok = self.vocab_.itos_[w]
            if w == EOS_ID:
                if stop_at_eos:
                    break
                hist = [self.vocab_.bos_token]
                out.append(tok)
                continue
            out.append(tok)
            hist.append(tok)
        return out


# ----------------------------------------------------------------------------- compact tables (scoring an ARPA file)
class SplitKeys:
    """An order's sorted, unique int64 keys held in half the memory: their low 32 bits (``lo``, uint32)
    and, for each value ``h`` of the high bits, the first row whose key has it (``bnd[h]``; the last
    entry is the row count).  :meth:`find` answers what :func:`~ngramlm.counts.lookup` answers on the
    int64 keys, through the compiled extension."""

    __slots__ = ("bnd", "lo")

    def __init__(self, bnd: np.ndarray, lo: np.ndarray) -> None:
        self.bnd, self.lo = bnd, lo

    def __len__(self) -> int:
        return len(self.lo)

    @property
    def nbytes(self) -> int:
        return self.bnd.nbytes + self.lo.nbytes

    def find(self, queries: np.ndarray) -> np.ndarray:
        from . import accel

        return accel.fast.split_find(self.bnd, self.lo, np.ascontiguousarray(queries, dtype=np.int64))

    def to_array(self) -> np.ndarray:
        """The int64 keys themselves."""
        high = np.repeat(np.arange(len(self.bnd) - 1, dtype=np.int64), np.diff(self.bnd))
        return (high << 32) | self.lo.astype(np.int64)


class PackedColumn:
    """An order's log10 values, each in 4 bytes (``codes``, uint32: an integer of up to 26 bits, a power
    of ten and the sign, as the compiled ARPA reader parsed the number's text) and unpacked by the
    division that parsed it, so ``column[rows]`` is the float64 array the usual tables give, to the bit."""

    __slots__ = ("codes",)

    def __init__(self, codes: np.ndarray) -> None:
        self.codes = codes

    def __len__(self) -> int:
        return len(self.codes)

    @property
    def nbytes(self) -> int:
        return self.codes.nbytes

    def __getitem__(self, rows) -> np.ndarray:
        from . import accel

        rows = np.asarray(rows)
        if rows.dtype == bool:
            rows = np.flatnonzero(rows)
        return accel.fast.packed_take(self.codes, np.ascontiguousarray(rows, dtype=np.int64))

    def to_array(self) -> np.ndarray:
        from . import accel

        return accel.fast.packed_take(self.codes)


class BookColumn:
    """An order's log10 values as 2-byte places (``index``, uint16) in a book of the distinct values
    (``book``, float64): for back-off weights, which repeat a lot.  ``column[rows]`` is
    ``book[index[rows]]``, the float64 array the usual tables give."""

    __slots__ = ("book", "index")

    def __init__(self, book: np.ndarray, index: np.ndarray) -> None:
        self.book, self.index = book, index

    def __len__(self) -> int:
        return len(self.index)

    @property
    def nbytes(self) -> int:
        return self.book.nbytes + self.index.nbytes

    def __getitem__(self, rows) -> np.ndarray:
        return self.book[self.index[rows]]

    def to_array(self) -> np.ndarray:
        return self.book[self.index]


class CompactScorer(Scorer):
    """A scorer over compact tables (:class:`SplitKeys`, :class:`PackedColumn`, :class:`BookColumn`, from
    :func:`ngramlm.io.arpa.read_arpa_compact`): what ``ngramlm ppl`` and ``score`` hold for an ARPA file,
    under half the memory of the float64/int64 tables, with every lookup and value the same, so every
    score is.  It scores (``token_scores``, ``perplexity_report``, ``log10_prob``, ``next_probs``); what
    needs the tables as arrays (writing, pruning, the compiled index) takes the model from ``load_any``."""

    def _find(self, k: int, queries: np.ndarray) -> np.ndarray:
        keys = self.keys_[k - 1]
        return keys.find(queries) if isinstance(keys, SplitKeys) else lookup(keys, queries)

    def build_index(self) -> "CompactScorer":
        return self  # the split keys are searched as they are

    @property
    def nbytes(self) -> int:
        """Bytes held by the keys and values."""
        t = self.tables_
        return sum(int(getattr(a, "nbytes", 0)) for col in (t.keys, t.log10_prob, t.log10_backoff) for a in col)
