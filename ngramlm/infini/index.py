"""The ∞-gram: an n-gram model of unbounded order on a suffix array (Liu et al., 2024, "Infini-gram").

A fixed-order model backs off because most long n-grams were never seen (the V^n wall).  The
∞-gram turns the question around: at every position it uses the *longest* suffix h' of the
history that does occur in the training text, and estimates

    P∞(w | h) = cnt(h' w) / cnt(h')

with counts read off a suffix array of the training tokens.  ``|h'| + 1`` is the *effective n* of
the position.  P∞ is zero where h' was never followed by w, so on its own it is not a usable
language model; interpolated with a smoothed model (MKN) or a neural one it is.

The index is the padded training stream ``<s> w1 .. wm </s> <s> ...`` (tokens in the narrowest
unsigned dtype) and its suffix array (int32 below 2**31 tokens), built by ``pydivsufsort`` (the
``infini`` extra) on the big-endian bytes of the tokens (byte order = token order) -- 6 bytes a token for a vocabulary
below 65,536.  A history never contains ``</s>``, so no match crosses a sentence end.  Queries run
in C (``ngramlm._fast.tokens``): a binary search per pattern, and for a whole test stream the longest
match at every position, amortised (the effective n grows by at most one a token).  Without the
compiled extension the same searches run vectorised in numpy (``ngramlm.infini.sa_search``).
"""
from __future__ import annotations

import json
import os
import zipfile
from dataclasses import dataclass
from pathlib import Path
from typing import Optional, Sequence

import numpy as np

from corpora.errors import InputError
from corpora.textio import atomic_writer
from corpora.vocab import BOS_ID, EOS_ID, UNK_ID, EncodedText, Vocab

from ..counts import padded_stream

FORMAT = "ngramlm.infini.index"
FORMAT_VERSION = 1


def _fast():
    """The suffix-array searches: compiled where the extension is built, else their numpy twins
    (:mod:`ngramlm.infini.sa_search`: the same results, slower)."""
    from .. import accel

    if accel.fast is None:
        from . import sa_search

        return sa_search
    return accel.fast


@dataclass
class InfiniScores:
    """Per predicted token of a text: effective n, cnt(h'), cnt(h' w), and whether h' has one continuation."""

    eff_n: np.ndarray  # int: |h'| + 1
    cnt_h: np.ndarray
    cnt_hw: np.ndarray
    sparse: np.ndarray  # bool: a single distinct next token after h' in the training text

    @property
    def prob(self) -> np.ndarray:
        return self.cnt_hw / np.maximum(self.cnt_h, 1)

    @property
    def log10_prob(self) -> np.ndarray:
        with np.errstate(divide="ignore"):
            return np.log10(self.prob)


class InfiniIndex:
    """A suffix array over an encoded training text, with the vocabulary that encoded it."""

    def __init__(self, tokens: np.ndarray, sa: np.ndarray, vocab: Vocab, *, n_sentences: int,
                 source: str = "") -> None:
        self.tokens, self.sa, self.vocab = tokens, sa, vocab
        self.n_sentences = int(n_sentences)
        self.source = source

    # ------------------------------------------------------------------ building and files
    @classmethod
    def build(cls, text: EncodedText, vocab: Vocab, *, source: str = "") -> "InfiniIndex":
        tokens, _ = padded_stream(text)
        dtype = np.uint16 if len(vocab) <= np.iinfo(np.uint16).max + 1 else np.uint32
        return cls._from_padded(tokens.astype(dtype), vocab, n_sentences=text.n_sentences, source=source)

    @classmethod
    def build_from_files(cls, paths: Sequence, *, tokenizer=None, min_count: int = 1, unk_token: str = "<unk>",
                         keep_empty: bool = True, temp_dir: Optional[os.PathLike | str] = None,
                         progress=None) -> "InfiniIndex":
        """Index text files (plain or gzip) without holding their sentences: the text is tokenized
        once into a spilled id stream (as ``train --memory`` does), and only the token array and the
        suffix array are ever in memory."""
        from corpora.tokenize import TokenizerSpec, make_tokenizer

        from ..builder.streaming import TempFolder, spool_ids, spool_stdin

        spec = tokenizer or TokenizerSpec()
        say = progress or (lambda msg: None)
        with TempFolder(temp_dir) as folder:
            sources = [spool_stdin(folder) if str(p) == "-" else os.fspath(p) for p in paths]
            say("tokenizing (ids spilled to the temp folder)")
            spool, words, freq = spool_ids(sources, make_tokenizer(spec), folder,
                                           plain=spec == TokenizerSpec(), keep_empty=keep_empty)
            if int(freq[1:].sum()) == 0:
                raise InputError("the text has no tokens", path=", ".join(map(str, paths)),
                                 fix="pass a non-empty text")
            vocab = Vocab(tokenizer=spec, min_count=min_count, unk_token=unk_token).fit_counts(
                dict(zip(words[1:], freq[1:].tolist())))
            remap = np.fromiter((vocab.stoi_.get(w, UNK_ID) for w in words), dtype=np.int64, count=len(words))
            remap[0] = EOS_ID
            raw = np.fromfile(spool, dtype=np.int32)
        dtype = np.uint16 if len(vocab) <= 65536 else np.uint32
        ids = remap.astype(dtype)[raw]
        del raw
        ends = np.flatnonzero(ids == EOS_ID)
        starts = np.concatenate([[0], ends[:-1] + 1])
        say(f"suffix array over {len(ids) + len(starts):,} tokens")
        return cls._from_padded(np.insert(ids, starts, np.asarray(BOS_ID, dtype=dtype)), vocab,
                                n_sentences=len(starts), source=", ".join(map(str, paths)))

    @classmethod
    def _from_padded(cls, tokens: np.ndarray, vocab: Vocab, *, n_sentences: int, source: str) -> "InfiniIndex":
        try:
            import pydivsufsort
        except ImportError:  # an optional part: building an index needs it, loading one does not
            raise InputError("building an ∞-gram index needs pydivsufsort (its suffix arrays), which is not "
                             "installed", fix="pip install 'ngramlm[infini]'") from None

        width = tokens.dtype.itemsize
        # Big-endian bytes sort like the token ids; suffixes at odd byte offsets are dropped.
        raw = np.ascontiguousarray(tokens.astype(tokens.dtype.newbyteorder(">"))).view(np.uint8).copy()
        sa = pydivsufsort.divsufsort(raw)
        del raw
        sa = sa[sa % width == 0] // width
        sa = sa.astype(np.int32 if len(tokens) < 2**31 else np.int64)
        return cls(tokens, sa, vocab, n_sentences=n_sentences, source=source)

    @property
    def nbytes(self) -> int:
        return self.tokens.nbytes + self.sa.nbytes

    def save(self, path: os.PathLike | str) -> None:
        """One uncompressed ``.npz`` (tokens, suffix array, JSON metadata), written atomically."""
        meta = {"format": FORMAT, "version": FORMAT_VERSION, "n_sentences": self.n_sentences, "source": self.source,
                "vocab": self.vocab.to_dict()}
        with atomic_writer(path) as fh:
            np.savez(fh, meta=np.frombuffer(json.dumps(meta, ensure_ascii=False).encode("utf-8"), dtype=np.uint8),
                     tokens=self.tokens, sa=self.sa)

    @classmethod
    def load(cls, path: os.PathLike | str, *, mmap: bool = True) -> "InfiniIndex":
        """Read an index; with ``mmap`` the token and suffix arrays are mapped (O(1), pages on demand)."""
        from ..io.native import map_member

        p = Path(path)
        if not p.is_file():
            raise InputError("no such index file" if not p.exists() else "not a file", path=p,
                             fix="build one with `ngramlm infini build TEXT -o INDEX.npz`")
        try:
            with zipfile.ZipFile(p) as zf:
                infos = {i.filename: i for i in zf.infolist()}
                if not {"meta.npy", "tokens.npy", "sa.npy"} <= set(infos):
                    raise ValueError("members meta, tokens and sa are missing")
                with zf.open("meta.npy") as fh:
                    meta = json.loads(np.lib.format.read_array(fh, allow_pickle=False).tobytes().decode("utf-8"))
                if meta.get("format") != FORMAT or meta.get("version") != FORMAT_VERSION:
                    raise ValueError(f"format {meta.get('format')!r} version {meta.get('version')!r}")
                if mmap:
                    size = p.stat().st_size
                    with open(p, "rb") as fh:
                        tokens = map_member(fh, infos["tokens.npy"], size)
                        sa = map_member(fh, infos["sa.npy"], size)
                else:
                    with zf.open("tokens.npy") as fh:
                        tokens = np.lib.format.read_array(fh, allow_pickle=False)
                    with zf.open("sa.npy") as fh:
                        sa = np.lib.format.read_array(fh, allow_pickle=False)
        except InputError:
            raise
        except Exception as exc:  # noqa: BLE001 -- any unreadable file is one clear error
            raise InputError(f"not a readable ∞-gram index ({type(exc).__name__}: {exc})", path=p,
                             fix="rebuild it with `ngramlm infini build`") from None
        if tokens.dtype not in (np.uint16, np.uint32) or sa.dtype not in (np.int32, np.int64) \
                or tokens.ndim != 1 or sa.shape != tokens.shape:
            raise InputError(f"corrupt ∞-gram index (tokens {tokens.dtype}{tokens.shape}, sa {sa.dtype}{sa.shape})",
                             path=p, fix="rebuild it with `ngramlm infini build`")
        vocab = Vocab.from_dict(meta.get("vocab"), path=str(p))
        return cls(tokens, sa, vocab, n_sentences=int(meta.get("n_sentences", 0)), source=meta.get("source", ""))

    # ------------------------------------------------------------------ counting
    def _ids(self, words: Sequence[str]) -> list:
        bos, eos = self.vocab.bos_token, self.vocab.eos_token
        out = []
        for w in words:
            out.append(BOS_ID if w == bos else EOS_ID if w == eos else self.vocab.stoi_.get(w, UNK_ID))
        return out

    def count(self, ngram: Sequence[str]) -> int:
        """How often ``ngram`` (words; ``<s>``/``</s>`` allowed) occurs in the training text.  A word the
        vocabulary does not have never occurs (words cut off by ``--min-count`` count as ``<unk>``)."""
        return int(self.count_words([ngram])[0])

    def count_words(self, ngrams: Sequence[Sequence[str]]) -> np.ndarray:
        known = set(self.vocab.stoi_) | {self.vocab.bos_token, self.vocab.eos_token}
        ids = [self._ids(g) for g in ngrams]
        out = self.count_ids(ids)
        out[[i for i, g in enumerate(ngrams) if any(w not in known for w in g)]] = 0
        return out

    def count_ids(self, ngrams: Sequence[Sequence[int]]) -> np.ndarray:
        """Occurrences of many id sequences at once (an empty one counts every token)."""
        lengths = np.fromiter(map(len, ngrams), dtype=np.int64, count=len(ngrams))
        offsets = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64)
        flat = np.fromiter((i for g in ngrams for i in g), dtype=np.int64, count=int(offsets[-1]))
        if not len(flat):
            flat = np.zeros(1, dtype=np.int64)
        return _fast().sa_count_many(self.tokens, self.sa, flat, offsets)

    def next_counts(self, context_ids: Sequence[int]) -> np.ndarray:
        """cnt(context w) for every id w (length V)."""
        lo, hi = _fast().sa_range(self.tokens, self.sa, np.asarray(context_ids, dtype=np.int64))
        L = len(context_ids)
        at = np.asarray(self.sa[lo:hi], dtype=np.int64) + L
        at = at[at < len(self.tokens)]
        return np.bincount(np.asarray(self.tokens[at], dtype=np.int64), minlength=len(self.vocab))

    # ------------------------------------------------------------------ the ∞-gram
    def longest_context(self, context_ids: Sequence[int]) -> int:
        """Length of the longest suffix of ``context_ids`` that occurs in the training text."""
        ids = list(context_ids)
        for L in range(len(ids), 0, -1):
            if self.count_ids([ids[len(ids) - L:]])[0] > 0:
                return L
        return 0

    def next_probs(self, context: Sequence[str]) -> np.ndarray:
        """P∞(. | context) over all ids (``context`` may start with ``<s>``); sums to 1 over predicted types."""
        ids = self._ids(context)
        if self.vocab.bos_token in context:
            ids = ids[len(ids) - 1 - ids[::-1].index(BOS_ID):]
        L = self.longest_context(ids)
        cnt = self.next_counts(ids[len(ids) - L:]).astype(np.float64)
        cnt[BOS_ID] = 0.0  # <s> follows only </s>, which no history holds; with h' empty, drop it
        return cnt / cnt.sum()

    def score(self, text: EncodedText, *, max_n: int = 0) -> InfiniScores:
        """The ∞-gram at every predicted token of ``text`` (encoded with this index's vocabulary).
        ``max_n`` > 0 caps the effective n (an n-gram-order sweep); 0 leaves it unbounded."""
        if max_n < 0:
            raise InputError(f"max_n must be >= 0 (0: unbounded), got {max_n}", fix="e.g. --max-n 5")
        tokens, pos = padded_stream(text)
        eff, ch, chw, one = _fast().sa_infini(self.tokens, self.sa, tokens.astype(np.int64), pos.astype(np.int64),
                                              max_n - 1 if max_n else -1)
        keep = pos > 0
        eff, ch, chw, one = eff[keep], ch[keep], chw[keep], one[keep]
        # With h' empty the rows are every indexed token, <s> included, which is never predicted.
        empty = eff == 0
        ch = np.where(empty, len(self.tokens) - self.n_sentences, ch)
        return InfiniScores(eff_n=eff.astype(np.int64) + 1, cnt_h=ch, cnt_hw=chw, sparse=one.astype(bool))


    def accuracy_by_n(self, text: EncodedText, scores: Optional[InfiniScores] = None, *, buckets: int = 10,
                      per_bucket: int = 5000, seed: int = 0, rows_per_bucket: int = 20_000_000) -> list:
        """Next-token accuracy of the ∞-gram by effective n: is the word the most frequent continuation of
        h' in the training text?  Estimated on up to ``per_bucket`` random positions per effective n
        (the last bucket is ``buckets`` and more); rows ``{"effective_n", "positions", "sampled",
        "accuracy"}``.  Each sampled position reads all cnt(h') continuations of its h': on a large
        index a short h' has millions, so a bucket stops once it has read ``rows_per_bucket`` rows
        (positions in random order, at least one; "sampled" says how many were used), and each
        distinct h' is read once."""
        s = scores if scores is not None else self.score(text)
        tokens, pos = padded_stream(text)
        t_pred = np.flatnonzero(pos > 0)
        eff = np.minimum(s.eff_n, buckets)
        rng = np.random.default_rng(seed)
        plan = []  # per bucket: (k, positions, the sampled positions used, their h')
        for k in range(1, buckets + 1):
            idx = np.flatnonzero(eff == k)
            if not len(idx):
                continue
            pick = rng.choice(idx, min(per_bucket, len(idx)), replace=False)
            used, read, seen = [], 0, set()
            for j in pick:
                if used and read >= rows_per_bucket:
                    break
                t = t_pred[j]
                L = int(s.eff_n[j]) - 1
                h = tuple(tokens[t - L:t].tolist())
                if h not in seen:
                    seen.add(h)
                    read += int(s.cnt_h[j])
                used.append((j, h))
            plan.append((k, len(idx), used))
        # The most frequent continuation of every distinct h', its rows found in one batch of searches.
        best = self._most_frequent_next(sorted({h for _, _, used in plan for _, h in used}))
        rows = []
        for k, n_positions, used in plan:
            right = sum(int(best[h] == tokens[t_pred[j]]) for j, h in used)
            rows.append({"effective_n": k, "positions": int(n_positions), "sampled": len(used),
                         "accuracy": right / len(used)})
        return rows

    def _most_frequent_next(self, contexts: list) -> dict:
        """For each context (a tuple of ids): the id that most often follows it in the training text
        (the smallest on ties, never ``<s>``; 0 where nothing follows), as ``argmax(next_counts)``.
        The rows of a context are sorted by their next token, so that token's longest run wins."""
        if not contexts:
            return {}
        lengths = np.fromiter(map(len, contexts), dtype=np.int64, count=len(contexts))
        offsets = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64)
        flat = np.fromiter((i for c in contexts for i in c), dtype=np.int64, count=int(offsets[-1]))
        sa_impl = _fast()
        if hasattr(sa_impl, "prefix_ranges"):  # numpy: all contexts searched together
            lo, hi, _ = sa_impl.prefix_ranges(self.tokens, self.sa, flat if len(flat) else np.zeros(1, np.int64),
                                              offsets[:-1], lengths)
        else:
            rng = [sa_impl.sa_range(self.tokens, self.sa, flat[a:b]) for a, b in zip(offsets[:-1], offsets[1:])]
            lo, hi = (np.array(x, dtype=np.int64) for x in zip(*rng))
        out = {}
        n = len(self.tokens)
        for c, a, b, L in zip(contexts, lo.tolist(), hi.tolist(), lengths.tolist()):
            at = np.asarray(self.sa[a:b], dtype=np.int64) + L
            nxt = np.asarray(self.tokens[at[at < n]], dtype=np.int64)
            nxt = nxt[nxt != BOS_ID]  # never a continuation of a history (nor predicted)
            if not len(nxt):
                out[c] = 0
                continue
            # Sorted already: the runs of equal ids are the counts (no sort, no length-V array).
            starts = np.concatenate([[0], np.flatnonzero(nxt[1:] != nxt[:-1]) + 1])
            runs = np.diff(np.append(starts, len(nxt)))
            out[c] = int(nxt[starts[int(np.argmax(runs))]])
        return out


# ----------------------------------------------------------------------------- mixtures
def tune_lambdas(scores: InfiniScores, other_log10: np.ndarray, *, grid: int = 101) -> tuple:
    """The mixture weights of the ∞-gram (one where its estimate is sparse, one where it is not, as the
    paper does) that maximise the likelihood of a held-out text; returns (lam_sparse, lam_dense)."""
    p_inf = scores.prob
    p_other = 10.0 ** other_log10
    lams = np.linspace(0.0, 0.99, grid)
    out = []
    for mask in (scores.sparse, ~scores.sparse):
        if not mask.any():
            out.append(0.0)
            continue
        a, b = p_inf[mask][None, :], p_other[mask][None, :]
        ll = np.log(lams[:, None] * a + (1 - lams[:, None]) * b).sum(axis=1)
        out.append(float(lams[int(np.argmax(ll))]))
    return tuple(out)


def mixture_log10(scores: InfiniScores, other_log10: np.ndarray, lambdas: tuple) -> np.ndarray:
    """log10 of the ∞-gram mixed with another model's per-token log10 probabilities."""
    lam = np.where(scores.sparse, lambdas[0], lambdas[1])
    with np.errstate(divide="ignore"):
        return np.log10(lam * scores.prob + (1 - lam) * 10.0 ** other_log10)
