"""A back-off model as a grammar FST in OpenFst's text form: Kaldi's ``G.fst``, as ``arpa2fst`` builds it.

Kaldi (``arpa2fst``, ``utils/format_lm.sh``), k2/icefall (``kaldilm``) and the WFST decoders take the
language model as a weighted acceptor G: one state per history the model stores, an arc per stored
n-gram (weight ``-ln p``), and from each history state a *back-off arc* to its longest stored suffix
carrying ``-ln`` of its back-off weight, on a disambiguation symbol (``#0``) so that G stays
deterministic when composed with the lexicon.  This module writes what ``arpa2fst
--disambig-symbol=#0`` (Kaldi's ``ArpaLmCompiler``, which kaldilm wraps) writes for the ARPA file
this toolkit writes of the same model, line for line -- the same states in the same numbering, the
same arcs, weights printed as OpenFst prints them -- computed from the tables with array operations:

* **states**, numbered as the compiler creates them while it reads the ARPA file in order: 0 the
  empty history (with no ``--disambig-symbol`` also 1, the one final state every ``</s>`` arc enters),
  then a state per n-gram of orders below the top that does not end in ``</s>`` (with no disambiguation
  symbol, the start state is made right after ``<s>``'s), then, for a top-order n-gram whose suffix is
  not stored (a pruned model), a state for that suffix, at its first use;
* **arcs**: an n-gram ``h w`` goes from state ``h`` to state ``h w`` (top order: to its suffix's state);
  ``<s>`` is never an arc's label with ``#0`` (its state is the start state), else it is the start
  state's one free arc; ``h </s>`` makes ``h`` final with its weight (with ``#0``), or is an arc to the
  final state; back-off arcs ``#0:<eps>`` (or ``<eps>:<eps>``) go to the longest stored suffix;
* **numbers**: each value as the ARPA file writes it (``%.7g``), read as float32 and multiplied by
  ``ln 10`` in double, rounded to float32, negated -- Kaldi's arithmetic -- and printed with 6
  significant digits; a weight of 0 is not printed;
* **order of lines**: the start state first, then the others by number; each state's arcs sorted by
  input label (``--ilabel-sort``, the default), its final weight after them.

With a symbol table read (``--read-symbol-table words.txt``) an n-gram with a word the table lacks is
skipped, as the compiler skips it; without one the table is made as the compiler makes it (``<eps>``
0, the disambiguation symbol, ``<s>``, ``</s>``, then the words in the ARPA file's order) and is
returned for writing as ``words.txt``.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Optional

import numpy as np

from corpora.errors import InputError
from corpora.vocab import BOS_ID, EOS_ID, PAD_ID

from ..counts import lookup
from ..io.arpa import format_column
from ..smoothing import backoff_smoothers, named_list
from ..tables import NgramTables

M_LN10 = 2.302585092994045684017991454684  # Kaldi's constant (math.log(10) is the same double)


@dataclass
class GrammarFst:
    """The FST's lines and the symbol table used (symbol -> id), with counts for a report."""

    text: str
    symbols: dict
    n_states: int
    n_arcs: int
    skipped: int  # n-grams skipped: a word missing from a symbol table read in, or <s>/</s> misplaced

    def symbols_text(self) -> str:
        """``words.txt``: one ``symbol<TAB>id`` a line, by id (OpenFst's SymbolTable::WriteText)."""
        return "".join(f"{s}\t{i}\n" for s, i in sorted(self.symbols.items(), key=lambda kv: kv[1]))


def read_symbol_table(path) -> dict:
    """A symbol table in OpenFst's text form (``symbol id`` a line, e.g. Kaldi's ``words.txt``)."""
    out = {}
    with open(path, encoding="utf-8") as fh:
        for ln, line in enumerate(fh, 1):
            parts = line.split()
            if not parts:
                continue
            if len(parts) != 2 or not parts[1].lstrip("-").isdigit():
                raise InputError(f"a symbol table line is 'symbol id', got {line.strip()!r}", path=path, line=ln,
                                 fix="pass Kaldi's words.txt (data/lang/words.txt) or one written by --write-symbol-table")
            out[parts[0]] = int(parts[1])
    return out


def _kaldi_weights(x: np.ndarray) -> np.ndarray:
    """``-ln`` weights as Kaldi computes them from the ARPA text this toolkit writes for ``x`` (log10)."""
    text = format_column(np.asarray(x, dtype=np.float64))  # '%.7g', '-99' for -inf: the file's digits
    f32 = text.astype(np.float32) if len(text) else np.zeros(0, dtype=np.float32)
    return -((f32.astype(np.float64) * M_LN10).astype(np.float32))


def _fmt_weights(w: np.ndarray) -> np.ndarray:
    """OpenFst's printing of float32 weights (``ostream << float``: 6 significant digits, as %g)."""
    u, inv = np.unique(w, return_inverse=True)
    s = np.array(["Infinity" if math.isinf(v) and v > 0 else "%g" % v for v in u.astype(np.float64).tolist()],
                 dtype=object)
    return s[inv.ravel()] if len(w) else np.zeros(0, dtype=object)


def grammar_fst(tables: NgramTables, *, disambig: Optional[str] = "#0", symbols: Optional[dict] = None,
                bos: str = "<s>", eos: str = "</s>") -> GrammarFst:
    """The grammar FST of back-off ``tables`` (see the module's docstring).  ``disambig``: the back-off
    arcs' input symbol (None: ``<eps>``, and ``<s>``/``</s>`` kept as labels, arpa2fst without
    ``--disambig-symbol``); ``symbols``: a symbol table to use (else one is made)."""
    if tables.kind != "backoff" or not tables.is_distribution:
        raise InputError(f"a {tables.smoother_name} model is not a back-off distribution, which a grammar FST encodes",
                         fix=f"export a model smoothed with {named_list(backoff_smoothers())}")
    V, n = tables.V, tables.order
    itos = tables.vocab.itos_
    if (itos[BOS_ID], itos[EOS_ID]) != (bos, eos):
        raise InputError(f"the model's sentence markers are {itos[BOS_ID]!r} and {itos[EOS_ID]!r}",
                         fix=f"pass bos={itos[BOS_ID]!r}, eos={itos[EOS_ID]!r}")
    # ---- symbols: ours -> the table's ids (-1: missing, so every n-gram with the word is skipped)
    if symbols is None:
        made = {"<eps>": 0}
        if disambig:
            made[disambig] = 1
        for w in [bos, eos] + [itos[i] for i in range(V) if i != PAD_ID]:
            made.setdefault(w, len(made))
        symbols = made
    else:
        for need in [bos, eos] + ([disambig] if disambig else []):
            if need not in symbols:
                raise InputError(f"the symbol table has no {need!r}", fix="use the lang directory's words.txt, "
                                 "which lists <s>, </s> and the disambiguation symbol #0")
    sub_eps = symbols[disambig] if disambig else 0
    sym = np.array([symbols.get(w, -1) for w in itos], dtype=np.int64)
    sym[PAD_ID] = -1
    # ---- the n-grams the compiler consumes, and their words
    keys = [np.asarray(k, dtype=np.int64) for k in tables.keys]
    last = [k % V for k in keys]
    last[0] = np.arange(V, dtype=np.int64)
    ctx = [None] + [k // V for k in keys[1:]]
    valid = [sym >= 0]
    for k in range(2, n + 1):
        c, w = ctx[k - 1], last[k - 1]
        # Skipped: a missing word, <s> after the first word, </s> before the last; and so, an
        # n-gram whose first words were skipped (the compiler finds no state for them).
        valid.append(valid[k - 2][c] & (last[k - 2][c] != EOS_ID) & (w != BOS_ID) & (sym[w] >= 0))
    skipped = int(sum(len(v) - int(v.sum()) for v in valid)) - 1  # <pad> is not in the ARPA file
    # ---- states of orders 1 .. n-1, numbered in file order
    is_state = [valid[k - 1] & (last[k - 1] != EOS_ID) for k in range(1, n)]
    first = 1 if disambig else 2  # 0: the empty history; 1: the final state (without a disambig symbol)
    state, nxt = [], first
    start_state = None
    for k in range(1, n):
        take = is_state[k - 1].astype(np.int64)
        if k == 1 and not disambig and take[BOS_ID]:
            take[BOS_ID] = 2  # the start state is made right after <s>'s own
        ids = nxt + np.cumsum(take) - take
        state.append(np.where(is_state[k - 1], ids, -1))
        nxt += int(take.sum())
    if n == 1 and valid[0][BOS_ID]:  # a unigram model: <s> leads to the empty history itself
        start_state = 0 if disambig else nxt
        nxt += 0 if disambig else 1
    elif n > 1 and is_state[0][BOS_ID]:
        start_state = int(state[0][BOS_ID]) + (0 if disambig else 1)
    bos_dest = 0 if n == 1 else (start_state or 0) - (0 if disambig else 1)
    # ---- the row of each suffix of an n-gram, for back-off targets and the top order's destinations
    words = [last[0][:, None]]
    for k in range(2, n + 1):
        words.append(np.concatenate([words[k - 2][ctx[k - 1]], last[k - 1][:, None]], axis=1))

    def row_of(w: np.ndarray) -> np.ndarray:
        """Row of each word sequence (columns) in its order's table, -1 where it is not stored."""
        r = w[:, 0].copy()
        for j in range(1, w.shape[1]):
            ok = r >= 0
            q = np.where(ok, r * V + w[:, j], -1)
            r = np.where(ok, lookup(keys[j], q), -1)
        return r

    def backoff_target(w: np.ndarray) -> np.ndarray:
        """State of the longest proper suffix of each sequence that has a state (else the empty history)."""
        out = np.zeros(len(w), dtype=np.int64)
        todo = np.ones(len(w), dtype=bool)
        for j in range(1, w.shape[1]):
            r = row_of(w[:, j:])
            o = w.shape[1] - j
            s = np.where(r >= 0, state[o - 1][np.maximum(r, 0)], -1)
            hit = todo & (s >= 0)
            out[hit] = s[hit]
            todo &= ~hit
        return out

    src_l, dst_l, lab_l, w_l = [], [], [], []
    finals = {}

    def arcs(src, dst, lab, w):
        src_l.append(np.asarray(src, dtype=np.int64))
        dst_l.append(np.asarray(dst, dtype=np.int64))
        lab_l.append(np.asarray(lab, dtype=np.int64))
        w_l.append(np.asarray(w, dtype=np.float32))

    # ---- back-off arcs of the n-gram states
    for k in range(1, n):
        rows = np.flatnonzero(is_state[k - 1])
        target = backoff_target(words[k - 1][rows]) if k > 1 else np.zeros(len(rows), dtype=np.int64)
        bw = _kaldi_weights(tables.log10_backoff[k - 1][rows])
        arcs(state[k - 1][rows], target, np.full(len(rows), sub_eps), bw)
    # ---- the top order's destinations: its suffix's state, made where the suffix has none
    top_dest = np.zeros(len(keys[n - 1]), dtype=np.int64)  # a unigram model: every arc to the empty history
    if n > 1:
        rows = np.flatnonzero(valid[n - 1] & (last[n - 1] != EOS_ID))
        tails = words[n - 1][rows, 1:]
        r = row_of(tails)
        s = np.where(r >= 0, state[n - 2][np.maximum(r, 0)], -1)
        top_dest = np.full(len(keys[n - 1]), -1, dtype=np.int64)
        top_dest[rows] = s
        new = rows[s < 0]
        if len(new):  # a pruned model: suffixes not stored get a state each, at first use
            uniq, first_at, inv = np.unique(tails[s < 0], axis=0, return_index=True, return_inverse=True)
            order = np.argsort(first_at, kind="stable")
            rank = np.empty(len(order), dtype=np.int64)
            rank[order] = np.arange(len(order))
            top_dest[new] = nxt + rank[inv.ravel()]
            made = uniq[order]
            # Their back-off arcs carry the top order's back-off weight, which ARPA has none of: weight 0.
            arcs(nxt + np.arange(len(made)), backoff_target(made), np.full(len(made), sub_eps),
                 np.zeros(len(made), dtype=np.float32))
            nxt += len(made)
    n_states = nxt
    # ---- n-gram arcs, </s> and <s>
    for k in range(1, n + 1):
        ok = valid[k - 1]
        w = last[k - 1]
        src = state[k - 2][ctx[k - 1]] if k > 1 else np.zeros(len(w), dtype=np.int64)
        weight = _kaldi_weights(tables.log10_prob[k - 1])
        plain = np.flatnonzero(ok & (w != EOS_ID) & (w != BOS_ID))
        dst = state[k - 1][plain] if k < n else top_dest[plain]
        arcs(src[plain], dst, sym[w[plain]], weight[plain])
        ends = np.flatnonzero(ok & (w == EOS_ID))
        if disambig:
            finals.update(zip(src[ends].tolist(), weight[ends].tolist()))
        else:
            arcs(src[ends], np.full(len(ends), 1), np.full(len(ends), sym[EOS_ID]), weight[ends])
    if not disambig:
        finals[1] = 0.0
        if start_state is not None:
            arcs([start_state], [bos_dest], [sym[BOS_ID]], [0.0])
    if start_state is None:
        raise InputError("the model has no <s> unigram, so the FST would have no start state",
                         fix="export a model with sentence starts (every model this toolkit trains has one)")
    src, dst = np.concatenate(src_l), np.concatenate(dst_l)
    lab, w = np.concatenate(lab_l), np.concatenate(w_l)
    olab = np.where(lab == sub_eps, 0, lab) if disambig else lab
    # ---- the text: the start state first, then by number; arcs by input label; the final weight last
    rank = np.where(np.arange(n_states) == start_state, -1, np.arange(n_states))
    order = np.lexsort((lab, rank[src]))
    src, dst, lab, olab, w = src[order], dst[order], lab[order], olab[order], w[order]
    ws = _fmt_weights(w)
    line = (src.astype(str).astype(object) + "\t" + dst.astype(str).astype(object) + "\t" + lab.astype(str).astype(object)
            + "\t" + olab.astype(str).astype(object))
    line = np.where(w != 0, line + "\t" + ws, line)
    # final lines (and a state with neither arcs nor a final weight, printed with weight Infinity)
    n_out = np.bincount(src, minlength=n_states)
    fin_states = sorted(set(finals) | set(np.flatnonzero(n_out == 0).tolist()), key=lambda s: rank[s])
    fin_w = np.array([finals.get(s, np.inf) for s in fin_states], dtype=np.float32)
    fin_line = np.array([str(s) for s in fin_states], dtype=object)
    if len(fin_states):
        fin_line = np.where(fin_w != 0, fin_line + "\t" + _fmt_weights(fin_w), fin_line)
    # Interleave: every state's arcs, then its final line.
    keys_all = np.concatenate([rank[src] * 2, rank[np.asarray(fin_states, dtype=np.int64)] * 2 + 1])
    lines = np.concatenate([line, fin_line])[np.argsort(keys_all, kind="stable")]
    text = "\n".join(lines.tolist()) + "\n"
    return GrammarFst(text=text, symbols=symbols, n_states=n_states, n_arcs=len(src), skipped=skipped)
