"""The V^n wall: possible vs observed n-grams per order, and the test n-grams never seen in train.

One function, :func:`sparsity_table`, serves ``ngramlm stats`` and ``ngramlm compare``,
so the two commands print the same numbers for the same data.  Torch-free.

Convention: the n-grams the models see
---------------------------------------
Every sentence is ``<s> w1 .. wm </s>`` (:func:`~ngramlm.counts.padded_stream`), an
n-gram never crosses a sentence, and ``<s>`` is never predicted.  The *event* at a
predicted token (``w1 .. wm`` and ``</s>``) for order k is the n-gram ending there,
cut at the sentence's ``<s>``: ``min(k, position + 1)`` tokens, ``<s>`` at position 0.
So ``w1`` is seen through ``<s> w1`` at every order k >= 2 -- never through a
multiply padded ``<s> <s> w1``, which no counter stores.  This is how
:class:`~ngramlm.counts.NgramCounts` (like KenLM and SRILM) counts, and what an MLE
model of order k conditions on, so a test token is "unseen at order k" exactly when
MLE of order k gives it probability zero.

* ``distinct_train`` (observed k-grams): the distinct full-length k-grams of the
  training text that end in a predicted token.  For k >= 2 that is every k-gram
  NgramCounts stores; for k = 1 it leaves out the ``<s>`` unigram, which NgramCounts
  and ARPA files keep as a context but which is no predicted type.  That keeps the
  count inside ``possible = V^k`` with ``V = vocab.n_types`` (words, ``<unk>``,
  ``</s>``): counting ``<s>`` made PTB's unigram row read 10,001 of 10,000 possible.
* ``unseen`` of a split: predicted tokens whose event (shortened at sentence starts,
  as above) does not occur in the training text.
* ``full_length``/``full_length_unseen``: the same, over tokens with a full k-1 word
  history only (shortened events are absent, so the wall is measured at full length).
"""
from __future__ import annotations

import math
from typing import Mapping, Optional

import numpy as np

from corpora.vocab import BOS_ID, PAD_ID, EncodedText

from .counts import NgramCounts, lookup, padded_stream


def longest_seen(counts: NgramCounts, text: EncodedText, max_order: Optional[int] = None
                 ) -> tuple[np.ndarray, np.ndarray]:
    """For every predicted token of ``text``: ``(pos, longest)``.

    ``pos`` is its position in the padded sentence (``<s>`` = 0, so ``w1`` = 1), and
    ``longest`` the length of the longest n-gram ending at it (at most ``max_order``,
    never crossing into the previous sentence) that occurs in the counted text; 0 when
    not even the token does.  The k-gram ending at a token occurs iff ``longest >= k``:
    a stored k-gram's prefix is stored (the count trie), and its suffixes occurred too.
    """
    n = counts.order if max_order is None else min(max_order, counts.order)
    tokens, pos = padded_stream(text)
    V = counts.vocab_size
    # gid[i]: index in order k of the k-gram ending at token i, -1 if unseen or if it
    # would reach past the sentence's <s>.  Order 1 is indexed by the id itself.
    gid = np.where(counts.tables[0].count[tokens] > 0, tokens, -1).astype(np.int64)
    longest = (gid >= 0).astype(np.int8)
    for k in range(2, n + 1):
        prev = np.empty_like(gid)
        prev[:1] = -1  # (an empty text has no first token)
        prev[1:] = gid[:-1]
        # pos >= k - 1: the k-gram fits after <s>, so token i-1 is in the same sentence.
        q = np.where((pos >= k - 1) & (prev >= 0), prev * V + tokens, -1)
        gid = lookup(counts.keys(k), q)
        hit = gid >= 0
        if not hit.any():
            break  # nothing longer can be seen either
        longest[hit] = k
    keep = pos > 0  # <s> is never predicted
    return pos[keep], longest[keep]


def _train_events(counts: NgramCounts, k: int) -> np.ndarray:
    """Counts of the distinct k-grams of the counted text that end in a predicted token."""
    c = counts.tables[k - 1].count
    if k == 1:
        c = c.copy()
        c[[PAD_ID, BOS_ID]] = 0  # <s> is a context, not an event; <pad> never occurs
    return c[c > 0]


def sparsity_table(train: EncodedText, splits: Mapping[str, EncodedText], *, vocab,
                   max_order: Optional[int] = None, counts: Optional[NgramCounts] = None) -> list:
    """One row per order k = 1..max_order (see the module docstring for what is counted).

    ``counts``: the training text already counted (to at least ``max_order``; compare
    counts once for everything), else ``train`` is counted here.  ``splits``: the texts
    whose tokens are checked against train, e.g. ``{"valid": ..., "test": ...}``.

    Row keys: ``order``, ``possible`` (V^k, exact int), ``possible_log10``,
    ``distinct_train``, ``train_ngram_tokens`` (predicted train tokens with a full k-gram),
    ``coverage_of_possible``, ``singleton_share`` (share of the distinct k-grams seen
    once), and ``splits``: ``{name: {tokens, unseen, unseen_share, full_length,
    full_length_unseen}}``.
    """
    V = vocab.n_types
    if counts is None:
        if max_order is None:
            raise ValueError("give max_order or counts")
        counts = NgramCounts.from_encoded(train, order=max_order, vocab_size=len(vocab))
    elif counts.vocab_size != len(vocab):
        raise ValueError(f"counts are over {counts.vocab_size} ids but the vocabulary has {len(vocab)}")
    n = counts.order if max_order is None else max_order
    if n > counts.order:
        raise ValueError(f"counts go to order {counts.order}, not {n}")
    seen = {name: longest_seen(counts, text, n) for name, text in splits.items()}
    rows = []
    for k in range(1, n + 1):
        c = _train_events(counts, k)
        distinct = int(len(c))
        row = {
            "order": k,
            "possible": V ** k,
            "possible_log10": k * math.log10(V),
            "distinct_train": distinct,
            "train_ngram_tokens": int(c.sum()),
            "coverage_of_possible": distinct / float(V) ** k,
            "singleton_share": float(np.count_nonzero(c == 1)) / distinct if distinct else 0.0,
            "splits": {},
        }
        for name, (pos, longest) in seen.items():
            length = np.minimum(pos, k - 1) + 1  # the event, cut at <s>
            unseen = int(np.count_nonzero(longest < length))
            full = pos >= k - 1
            tokens = int(len(pos))
            row["splits"][name] = {
                "tokens": tokens,
                "unseen": unseen,
                "unseen_share": unseen / tokens if tokens else 0.0,
                "full_length": int(np.count_nonzero(full)),
                "full_length_unseen": int(np.count_nonzero(full & (longest < k))),
            }
        rows.append(row)
    return rows


def flat_row(row: dict, split: str) -> dict:
    """A row with one split's numbers as ``{split}_{field}`` keys (``test_unseen``, ...): the
    flat layout of compare's results (``vwall`` rows)."""
    out = {key: value for key, value in row.items() if key != "splits"}
    for key, value in row["splits"][split].items():
        out[f"{split}_{key}"] = value
    return out
