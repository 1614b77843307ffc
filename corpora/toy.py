"""The built-in toy corpus: a seeded word-level language whose true entropy is known.

The language is produced by a *probabilistic deterministic finite automaton*
(PDFA): from every state, every word leads to at most one next state, so the state
after any prefix is a function of the words emitted so far and

    p(next word | whole history) = p(next word | state)

exactly.  That lets the toolkit print the *true* per-token entropy of generated
test text: a floor no model can beat on average.

What the automaton models (see ``docs/toy_language.md`` for the details):

* a Zipf-distributed vocabulary of pronounceable pseudo-words in word classes
  (determiners, pronouns, adjectives, nouns, transitive / intransitive verbs,
  adverbs, prepositions, conjunctions, relative markers);
* a small clause grammar over those classes (subject, verb, object, prepositional
  phrases, relative clauses, coordinated clauses);
* selectional preferences: adjectives and transitive verbs carry one of a few
  "flavours", and the next noun prefers nouns of the same flavour;
* a long-range dependency: ``<trigger> <from> Origin`` sets a latent origin, an
  arbitrarily long filler of ordinary clauses follows, and the sentence then says
  ``<cue> Language`` where the language word is (mostly) fixed by the origin --
  the toy version of "he comes from France ... speaks fluent French".  The filler
  is often longer than the context of any fixed-order n-gram model.

Sentences are independent; each starts in the start state and ends by predicting
``</s>``, which counts as a token (``len(words) + 1`` tokens per sentence, like the
rest of the toolkit).

    >>> lang = ToyLanguage(ToyConfig())
    >>> words, lp = lang.sample_sentence(np.random.default_rng(1))
    >>> abs(lang.sentence_log2prob(words) - lp) < 1e-9
    True
    >>> 4.0 < lang.entropy_rate_bits() < 9.0
    True
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Optional, Sequence, Union

import numpy as np

from .errors import InputError

__all__ = ["ToyConfig", "ToyLanguage", "ToyCorpus", "generate_corpus", "EOS", "RESERVED"]

EOS = "</s>"
RESERVED = frozenset({"<pad>", "<s>", "</s>", "<unk>"})

# Closed word classes: class -> number of word types (fixed, independent of vocab_size).
_CLOSED_SIZES = {
    "DET": 8,  # determiners
    "PRON": 6,  # pronouns (a whole subject)
    "PREP": 14,  # prepositions
    "CONJ": 4,  # clause coordinators
    "REL": 3,  # relative markers ("that", "which", ...)
    "TRIG": 3,  # the origin verbs ("comes", "hails", ...)
    "FROM": 1,  # the word after a trigger ("from")
    "CUE": 2,  # the words before the dependent language word ("speaks", ...)
}
# Open classes share what is left of vocab_size, in these proportions (ADV takes the rest).
_OPEN_SHARES = (("NOUN", 0.45), ("ADJ", 0.20), ("VT", 0.15), ("VI", 0.10))
_OPEN_LAST = "ADV"

# Spelling of the pseudo-words: syllables are (onset) vowel (coda); single letters dominate.
_ONSETS = ("b", "d", "f", "g", "k", "l", "m", "n", "p", "r", "s", "t", "v", "z", "h", "w", "j",
           "b", "d", "k", "l", "m", "n", "p", "r", "s", "t",
           "br", "tr", "st", "ch", "sh", "pl", "kr", "gr", "dr", "fl", "th")
_VOWELS = ("a", "e", "i", "o", "u", "a", "e", "i", "o", "a", "e", "o", "u", "ai", "ou", "y")
_CODAS = ("n", "r", "l", "s", "m", "t", "k", "nd", "st", "x")
_LANG_SUFFIXES = ("ish", "ese", "ic", "an", "i")

# Special state ids in the compiled tables.
_TERMINAL = -1


# ---------------------------------------------------------------------------- configuration
@dataclass(frozen=True)
class ToyConfig:
    """Parameters of the toy language and of the generated corpus.

    The defaults give the toolkit's default ``toy`` corpus.  Every field is checked
    on construction; bad values raise :class:`~corpora.errors.InputError`.
    """

    seed: int = 0
    """Seeds everything: the vocabulary (spellings, Zipf ranks, flavours) and the three splits."""
    n_train_tokens: int = 200_000
    """Predicted tokens (words + one ``</s>`` per sentence) in train; whole sentences,
    so the split ends with the first sentence that reaches this count."""
    n_valid_tokens: int = 20_000
    """Same for the validation split."""
    n_test_tokens: int = 20_000
    """Same for the test split."""
    vocab_size: int = 4000
    """Number of distinct word types the language can emit (``</s>`` not counted)."""
    zipf_exponent: float = 1.0
    """Exponent s of the within-class Zipf law: the r-th word of a class has weight r**-s."""
    n_origins: int = 40
    """Number of origins (and of their language words): the values of the long-range latent."""
    n_flavours: int = 8
    """Number of selectional-preference flavours of adjectives, transitive verbs and nouns."""
    flavour_boost: float = 8.0
    """A noun of the preferred flavour gets its Zipf weight multiplied by 1 + flavour_boost."""
    origin_prob: float = 0.25
    """Probability that a (non-filler) clause's verb is an origin trigger."""
    filler_continue: float = 0.5
    """Inside the filler, where a clause could end: probability of another clause instead of the cue."""
    dependent_fidelity: float = 0.9
    """Probability that the language word is the one of the origin; otherwise it is drawn
    from the Zipf law over all language words (which may again give the origin's own)."""

    def __post_init__(self) -> None:
        def bad(name: str, why: str, fix: str) -> InputError:
            return InputError(f"toy config: {name}={getattr(self, name)!r} {why}", fix=fix)

        for name in ("seed", "n_train_tokens", "n_valid_tokens", "n_test_tokens", "vocab_size",
                     "n_origins", "n_flavours"):
            v = getattr(self, name)
            if not isinstance(v, (int, np.integer)) or isinstance(v, bool):
                raise bad(name, "is not an integer", "give an integer")
        if self.seed < 0:
            raise bad("seed", "is negative", "use a seed >= 0")
        for name in ("n_train_tokens", "n_valid_tokens", "n_test_tokens"):
            if getattr(self, name) < 0:
                raise bad(name, "is negative", "use 0 (empty split) or more tokens")
        if self.n_origins < 2:
            raise bad("n_origins", "is below 2", "use at least 2 origins")
        if self.n_flavours < 1:
            raise bad("n_flavours", "is below 1", "use at least 1 flavour")
        if self.vocab_size < self.min_vocab_size():
            raise bad("vocab_size", f"is too small for {self.n_origins} origins and {self.n_flavours} flavours",
                      f"use vocab_size >= {self.min_vocab_size()}")
        for name, lo, hi, lo_open, hi_open in (
            ("zipf_exponent", 0.0, 4.0, False, False),
            ("flavour_boost", 0.0, 1e6, False, False),
            ("origin_prob", 0.0, 1.0, False, True),
            ("filler_continue", 0.0, 1.0, False, True),
            ("dependent_fidelity", 0.0, 1.0, False, False),
        ):
            v = getattr(self, name)
            ok = isinstance(v, (int, float, np.floating, np.integer)) and not isinstance(v, bool) and math.isfinite(v)
            ok = ok and (v > lo if lo_open else v >= lo) and (v < hi if hi_open else v <= hi)
            if not ok:
                rng = f"{'(' if lo_open else '['}{lo}, {hi}{')' if hi_open else ']'}"
                raise bad(name, f"is outside {rng}", f"choose {name} in {rng}")

    def min_vocab_size(self) -> int:
        """Smallest vocab_size these settings allow (every open class needs 2 words per flavour)."""
        closed = sum(_CLOSED_SIZES.values()) + 2 * self.n_origins
        return closed + 2 * self.n_flavours * 10


# ---------------------------------------------------------------------------- vocabulary
def _pseudo_words(rng: np.random.Generator, n: int, lo: int, hi: int) -> list:
    """``n`` random pronounceable words of ``lo``..``hi`` syllables (duplicates possible)."""
    n_syl = rng.integers(lo, hi + 1, size=n)
    onset = rng.integers(len(_ONSETS), size=(n, hi))
    vowel = rng.integers(len(_VOWELS), size=(n, hi))
    coda = rng.integers(len(_CODAS), size=(n, hi))
    u_onset = rng.random((n, hi))
    u_coda = rng.random((n, hi))
    out = []
    for i in range(n):
        last = int(n_syl[i]) - 1
        parts = []
        for k in range(last + 1):
            if k == 0 or u_onset[i, k] < 0.9 or len(_VOWELS[vowel[i, k - 1]]) > 1:
                parts.append(_ONSETS[onset[i, k]])
            parts.append(_VOWELS[vowel[i, k]])
            if u_coda[i, k] < (0.45 if k == last else 0.12):
                parts.append(_CODAS[coda[i, k]])
        out.append("".join(parts))
    return out


def _class_sizes(cfg: ToyConfig) -> dict:
    sizes = dict(_CLOSED_SIZES)
    sizes["ORIGIN"] = cfg.n_origins
    sizes["DEP"] = cfg.n_origins
    n_open = cfg.vocab_size - sum(sizes.values())
    used = 0
    for name, share in _OPEN_SHARES:
        sizes[name] = int(round(n_open * share))
        used += sizes[name]
    sizes[_OPEN_LAST] = n_open - used
    return sizes


def _make_vocabulary(cfg: ToyConfig, rng: np.random.Generator) -> dict:
    """Class -> list of unique pseudo-words, in Zipf-rank order (most frequent first)."""
    sizes = _class_sizes(cfg)
    taken: set = set()
    classes: dict = {}

    def fresh(n: int, lo: int, hi: int) -> list:
        got: list = []
        while len(got) < n:
            for w in _pseudo_words(rng, 2 * (n - len(got)) + 8, lo, hi):
                if w not in taken and len(got) < n:
                    taken.add(w)
                    got.append(w)
        return got

    syllables = {"DET": (1, 1), "PRON": (1, 1), "PREP": (1, 2), "CONJ": (1, 1), "REL": (1, 1),
                 "TRIG": (1, 2), "FROM": (1, 1), "CUE": (2, 2)}
    for name in _CLOSED_SIZES:
        classes[name] = fresh(sizes[name], *syllables[name])
    for name in [n for n, _ in _OPEN_SHARES] + [_OPEN_LAST]:
        classes[name] = fresh(sizes[name], 2, 3)
    # Origins are capitalised place names; each one's language word is derived from it.
    origins: list = []
    deps: list = []
    while len(origins) < cfg.n_origins:
        names = _pseudo_words(rng, 2 * cfg.n_origins, 2, 3)
        suffixes = rng.integers(len(_LANG_SUFFIXES), size=len(names))
        for w, k in zip(names, suffixes):
            o = w.capitalize()
            d = o + _LANG_SUFFIXES[k]
            if len(origins) < cfg.n_origins and o not in taken and d not in taken:
                taken.update((o, d))
                origins.append(o)
                deps.append(d)
    classes["ORIGIN"] = origins
    classes["DEP"] = deps
    assert len(taken) == cfg.vocab_size and not (taken & RESERVED)
    return classes


# ---------------------------------------------------------------------------- the language
class ToyLanguage:
    """The automaton: vocabulary, compiled transition tables, exact probabilities.

    Attributes:
        config: the :class:`ToyConfig`.
        words: the vocabulary, ``vocab_size`` distinct pseudo-words (``</s>`` excluded).
        classes: word class -> its words, most probable first.
        word_class: word -> its class name.
        n_states: number of reachable automaton states.
    """

    def __init__(self, config: Optional[ToyConfig] = None):
        cfg = config if config is not None else ToyConfig()
        if not isinstance(cfg, ToyConfig):
            raise InputError(f"expected a ToyConfig, got {type(cfg).__name__}", fix="pass corpora.toy.ToyConfig(...)")
        self.config = cfg
        seeds = np.random.SeedSequence(cfg.seed).spawn(4)  # vocabulary, train, valid, test
        self._split_seeds = dict(zip(("train", "valid", "test"), seeds[1:]))
        vocab_rng = np.random.default_rng(seeds[0])
        self.classes = _make_vocabulary(cfg, vocab_rng)
        self.word_class = {w: c for c, ws in self.classes.items() for w in ws}
        self.words = [w for ws in self.classes.values() for w in ws]
        # internal word ids: 0 is </s>, words are 1..V
        self._id = {w: i + 1 for i, w in enumerate(self.words)}
        self._id[EOS] = 0
        self._str = np.array([EOS] + self.words, dtype=object)
        self._class_ids = {c: np.array([self._id[w] for w in ws], dtype=np.int64) for c, ws in self.classes.items()}
        self._zipf = {c: self._zipf_weights(len(ws)) for c, ws in self.classes.items()}
        F = cfg.n_flavours
        self._flavour = {}
        for c in ("NOUN", "ADJ", "VT"):
            n = len(self.classes[c])
            # round-robin over a random permutation: every flavour has words at all frequency levels
            self._flavour[c] = vocab_rng.permutation(n) % F
        self._share = {c: [float(self._zipf[c][self._flavour[c] == g].sum()) for g in range(F)]
                       for c in ("ADJ", "VT")}
        self._compile()

    # ------------------------------------------------------------------ building
    def _zipf_weights(self, n: int) -> np.ndarray:
        w = np.arange(1, n + 1, dtype=np.float64) ** -self.config.zipf_exponent
        return w / w.sum()

    def _dist(self, key: tuple) -> tuple:
        """Word ids and probabilities of one emission distribution."""
        kind = key[0]
        if kind == "END":
            return np.array([0]), np.array([1.0])
        if kind in ("ADJ", "VT"):
            mask = self._flavour[kind] == key[1]
            p = self._zipf[kind][mask]
            return self._class_ids[kind][mask], p / p.sum()
        if kind == "NOUN":
            p = self._zipf["NOUN"]
            if key[1] >= 0:
                p = p * (1.0 + self.config.flavour_boost * (self._flavour["NOUN"] == key[1]))
            return self._class_ids["NOUN"], p / p.sum()
        if kind == "ORIGIN":
            return self._class_ids["ORIGIN"][key[1]:key[1] + 1], np.array([1.0])
        if kind == "DEP":
            fid = self.config.dependent_fidelity
            p = (1.0 - fid) * self._zipf["DEP"]
            p[key[1]] += fid
            keep = p > 0
            return self._class_ids["DEP"][keep], p[keep] / p[keep].sum()
        return self._class_ids[kind], self._zipf[kind]

    def _arcs(self, state: tuple) -> list:
        """(distribution key, weight, next state) of one state; weights are normalised later.

        A state is (name, m, f): m is the latent origin (-1 outside a filler), f the
        flavour the next noun prefers (-1 for none).
        """
        name, m, f = state
        cfg = self.config
        F = range(cfg.n_flavours)

        def adj(w: float, to: str, share_of: str = "ADJ", mode: int = m) -> list:
            return [((share_of, g), w * self._share[share_of][g], (to, mode, g)) for g in F]

        def end(w: float) -> list:
            if m < 0:
                return [(("END",), w, None)]
            more = cfg.filler_continue
            return [(("CUE",), w * (1.0 - more), ("DEP", m, -1)), (("CONJ",), w * more, ("S", m, -1))]

        if name == "S":  # clause start: subject
            return [(("DET",), 0.55, ("NPS", m, -1)), (("PRON",), 0.15, ("V", m, -1)),
                    (("NOUN", -1), 0.20, ("V", m, -1))] + adj(0.10, "NPS_A")
        if name == "NPS":  # after the subject's determiner
            return [(("NOUN", -1), 0.65, ("V", m, -1))] + adj(0.35, "NPS_A")
        if name == "NPS_A":  # after a subject adjective of flavour f
            return [(("NOUN", f), 0.80, ("V", m, -1))] + adj(0.20, "NPS_A")
        if name == "V":  # the verb
            op = cfg.origin_prob if m < 0 else 0.0  # no nested origins inside a filler
            arcs = [(("VT", g), (1.0 - op) * 0.6 * self._share["VT"][g], ("O", m, g)) for g in F]
            arcs.append((("VI",), (1.0 - op) * 0.4, ("VI_AFTER", m, -1)))
            if op > 0:
                arcs.append((("TRIG",), op, ("FROM", -1, -1)))
            return arcs
        if name == "O":  # object after a transitive verb of flavour f
            return [(("DET",), 0.65, ("O_D", m, f)), (("NOUN", f), 0.20, ("AFTER_O", m, -1))] + adj(0.15, "O_A")
        if name == "O_D":
            return [(("NOUN", f), 0.70, ("AFTER_O", m, -1))] + adj(0.30, "O_A")
        if name == "O_A":
            return [(("NOUN", f), 0.85, ("AFTER_O", m, -1))] + adj(0.15, "O_A")
        if name == "AFTER_O":
            return [(("PREP",), 0.30, ("P", m, -1)), (("ADV",), 0.10, ("ADV_END", m, -1)),
                    (("CONJ",), 0.15, ("S", m, -1))] + end(0.45)
        if name == "VI_AFTER":
            return [(("ADV",), 0.35, ("ADV_END", m, -1)), (("PREP",), 0.35, ("P", m, -1)),
                    (("CONJ",), 0.10, ("S", m, -1))] + end(0.20)
        if name == "ADV_END":
            return [(("CONJ",), 0.20, ("S", m, -1))] + end(0.80)
        if name == "P":  # after a preposition
            return [(("DET",), 0.70, ("P_D", m, -1)), (("NOUN", -1), 0.20, ("AFTER_P", m, -1))] + adj(0.10, "P_A")
        if name == "P_D":
            return [(("NOUN", -1), 0.75, ("AFTER_P", m, -1))] + adj(0.25, "P_A")
        if name == "P_A":
            return [(("NOUN", f), 0.90, ("AFTER_P", m, -1))] + adj(0.10, "P_A")
        if name == "AFTER_P":
            return [(("PREP",), 0.15, ("P", m, -1)), (("REL",), 0.10, ("REL_V", m, -1)),
                    (("CONJ",), 0.10, ("S", m, -1))] + end(0.65)
        if name == "REL_V":  # after a relative marker: a verb phrase
            return ([(("VT", g), 0.6 * self._share["VT"][g], ("O", m, g)) for g in F]
                    + [(("VI",), 0.4, ("VI_AFTER", m, -1))])
        if name == "FROM":  # after an origin trigger
            return [(("FROM",), 1.0, ("ORIG", -1, -1))]
        if name == "ORIG":  # the origin word sets the latent
            z = self._zipf["ORIGIN"]
            return [(("ORIGIN", k), z[k], ("FILL", k, -1)) for k in range(cfg.n_origins)]
        if name == "FILL":  # right after the origin: start the filler (or say the cue at once)
            return [(("CONJ",), 0.45, ("S", m, -1)), (("REL",), 0.35, ("REL_V", m, -1)),
                    (("CUE",), 0.20, ("DEP", m, -1))]
        if name == "DEP":  # after the cue: the language word of origin m
            return [(("DEP", m), 1.0, ("AFTER_DEP", -1, -1))]
        if name == "AFTER_DEP":  # back to ordinary text
            return [(("PREP",), 0.30, ("P", -1, -1)), (("CONJ",), 0.10, ("S", -1, -1))] + end(0.60)
        raise AssertionError(f"unknown state {state!r}")

    def _compile(self) -> None:
        start = ("S", -1, -1)
        index = {start: 0}
        order = [start]
        dist_index: dict = {}
        dists: list = []
        state_arcs: list = []  # per state: list of (dist id, prob, next state id)
        i = 0
        while i < len(order):
            merged: dict = {}
            for key, w, nxt in self._arcs(order[i]):
                if w <= 0:
                    continue
                if key in merged:
                    assert merged[key][1] == nxt, (order[i], key)  # determinism: one class, one next state
                    merged[key][0] += w
                else:
                    merged[key] = [w, nxt]
            total = sum(w for w, _ in merged.values())
            arcs = []
            for key, (w, nxt) in merged.items():
                if key not in dist_index:
                    dist_index[key] = len(dists)
                    dists.append(self._dist(key))
                if nxt is None:
                    j = _TERMINAL
                else:
                    if nxt not in index:
                        index[nxt] = len(order)
                        order.append(nxt)
                    j = index[nxt]
                arcs.append((dist_index[key], w / total, j))
            state_arcs.append(arcs)
            i += 1
        self.n_states = len(order)
        self._state_names = order
        self._dists = dists
        # per-dist lookup word id -> probability; per-state dist id -> arc; word -> dists holding it
        self._dist_prob = [dict(zip(ids.tolist(), p.tolist())) for ids, p in dists]
        self._word_dists: dict = {}
        for d, (ids, _) in enumerate(dists):
            for wid in ids.tolist():
                self._word_dists.setdefault(wid, []).append(d)
        self._state_arcs = state_arcs
        self._arc_of = [{d: (p, j) for d, p, j in arcs} for arcs in state_arcs]
        checked: set = set()
        for arcs in state_arcs:  # disjoint word sets: the automaton is deterministic
            combo = tuple(sorted(d for d, _, _ in arcs))
            if combo not in checked:
                ids = np.concatenate([dists[d][0] for d in combo])
                assert len(np.unique(ids)) == len(ids), combo
                checked.add(combo)
        # flat tables for vectorised sampling: segment s of _arc_cdf holds s + cumulative probs
        n_arcs = np.array([len(a) for a in state_arcs])
        self._arc_end = np.cumsum(n_arcs)
        cdf, a_dist, a_next, a_logp = [], [], [], []
        for s, arcs in enumerate(state_arcs):
            c = np.cumsum([p for _, p, _ in arcs])
            c[-1] = 1.0
            cdf.append(s + c)
            a_dist += [d for d, _, _ in arcs]
            a_next += [j for _, _, j in arcs]
            a_logp += [math.log2(p) for _, p, _ in arcs]
        self._arc_cdf = np.concatenate(cdf)
        self._arc_dist = np.array(a_dist, dtype=np.int64)
        self._arc_next = np.array(a_next, dtype=np.int64)
        self._arc_logp = np.array(a_logp)
        d_cdf, d_word, d_logp, d_len = [], [], [], []
        self._dist_entropy = np.empty(len(dists))
        for d, (ids, p) in enumerate(dists):
            c = np.cumsum(p)
            c[-1] = 1.0
            d_cdf.append(d + c)
            d_word.append(ids)
            d_logp.append(np.log2(p))
            d_len.append(len(ids))
            self._dist_entropy[d] = float(-(p * np.log2(p)).sum())
        self._dist_cdf = np.concatenate(d_cdf)
        self._dist_word = np.concatenate(d_word)
        self._dist_logp = np.concatenate(d_logp)
        self._dist_end = np.cumsum(d_len)
        self._solve_visits()

    def _solve_visits(self) -> None:
        """Expected visits of each state per sentence, from the absorbing Markov chain."""
        from scipy.sparse import csr_matrix, identity
        from scipy.sparse.linalg import spsolve

        n = self.n_states
        rows, cols, vals = [], [], []
        H = np.zeros(n)
        for s, arcs in enumerate(self._state_arcs):
            for d, p, j in arcs:
                H[s] += -p * math.log2(p) + p * self._dist_entropy[d]
                if j != _TERMINAL:
                    rows.append(s)
                    cols.append(j)
                    vals.append(p)
        Q = csr_matrix((vals, (rows, cols)), shape=(n, n))
        e = np.zeros(n)
        e[0] = 1.0
        # v = e (I - Q)^-1, i.e. (I - Q)^T v = e
        visits = spsolve((identity(n, format="csr") - Q).T.tocsc(), e)
        self._visits = np.asarray(visits)
        self._sentence_entropy = float(self._visits @ H)
        self._sentence_tokens = float(self._visits.sum())

    # ------------------------------------------------------------------ exact probabilities
    def _walk(self, history: Sequence[str]) -> int:
        """State after ``history``, or -2 if the history is impossible; ``</s>`` ends it."""
        s = 0
        for w in history:
            if s == _TERMINAL:
                return -2
            wid = self._id.get(w)
            if wid is None:
                return -2
            for d in self._word_dists.get(wid, ()):
                arc = self._arc_of[s].get(d)
                if arc is not None:
                    s = arc[1]
                    break
            else:
                return -2
        return s

    def sentence_log2prob(self, words: Sequence[str]) -> float:
        """Exact log2 p(words + ``</s>``); ``-inf`` if the sentence is impossible."""
        s = 0
        total = 0.0
        for w in list(words) + [EOS]:
            if s == _TERMINAL:
                return -math.inf
            wid = self._id.get(w)
            if wid is None:
                return -math.inf
            for d in self._word_dists.get(wid, ()):
                arc = self._arc_of[s].get(d)
                if arc is not None:
                    total += math.log2(arc[0]) + math.log2(self._dist_prob[d][wid])
                    s = arc[1]
                    break
            else:
                return -math.inf
        return total

    def next_word_distribution(self, history: Sequence[str]) -> dict:
        """Exact p(next | history) over words and ``</s>`` (only those with p > 0); sums to 1.

        Raises InputError if the history itself is impossible (or already ended).
        """
        s = self._walk(history)
        if s < 0:
            raise InputError(
                "the toy language cannot produce this history" if s == -2 else "the history already ended with </s>",
                fix="pass a prefix of a sentence of the toy language (words only, no </s>)",
            )
        out: dict = {}
        for d, p, _ in self._state_arcs[s]:
            ids, q = self._dists[d]
            for wid, qq in zip(ids.tolist(), q.tolist()):
                out[self._str[wid]] = p * qq
        return out

    def state_of(self, history: Sequence[str]) -> tuple:
        """The automaton state (name, latent origin, flavour) after ``history``."""
        s = self._walk(history)
        if s < 0:
            raise InputError("the toy language cannot produce this history", fix="pass a valid prefix")
        return self._state_names[s]

    # ------------------------------------------------------------------ entropy
    def entropy_rate_bits(self) -> float:
        """Exact entropy rate in bits per predicted token (words and ``</s>``).

        Sentences are i.i.d., so the rate is E[-log2 p(sentence)] / E[tokens per
        sentence].  Both expectations are sums over states of (expected visits per
        sentence) x (the state's next-token entropy, or 1), the visits coming from
        the absorbing Markov chain over automaton states: v = e_start (I - Q)^-1.
        """
        return self._sentence_entropy / self._sentence_tokens

    def sentence_entropy_bits(self) -> float:
        """Exact E[-log2 p(sentence + </s>)]."""
        return self._sentence_entropy

    def expected_sentence_tokens(self) -> float:
        """Exact E[len(words) + 1]."""
        return self._sentence_tokens

    # ------------------------------------------------------------------ sampling
    def sample_sentence(self, rng: Union[np.random.Generator, int, None] = None) -> tuple:
        """One sentence (words, no ``</s>``) and its exact log2 probability including ``</s>``."""
        rng = rng if isinstance(rng, np.random.Generator) else np.random.default_rng(rng)
        s, total, out = 0, 0.0, []
        while s != _TERMINAL:
            a0 = self._arc_end[s - 1] if s > 0 else 0
            a = min(int(np.searchsorted(self._arc_cdf, s + rng.random(), side="right")), self._arc_end[s] - 1)
            a = max(a, a0)
            d = int(self._arc_dist[a])
            j0 = self._dist_end[d - 1] if d > 0 else 0
            j = min(int(np.searchsorted(self._dist_cdf, d + rng.random(), side="right")), self._dist_end[d] - 1)
            j = max(j, j0)
            total += float(self._arc_logp[a]) + float(self._dist_logp[j])
            wid = int(self._dist_word[j])
            if wid != 0:
                out.append(self._str[wid])
            s = int(self._arc_next[a])
        return out, total

    def sample_sentences(self, rng: np.random.Generator, n: int) -> tuple:
        """``n`` sentences at once (vectorised); returns (sentences, log2 probs incl. ``</s>``)."""
        state = np.zeros(n, dtype=np.int64)
        logp = np.zeros(n)
        alive = np.arange(n)
        steps = []
        arc_start = np.concatenate([[0], self._arc_end[:-1]])
        dist_start = np.concatenate([[0], self._dist_end[:-1]])
        while alive.size:
            s = state[alive]
            a = np.searchsorted(self._arc_cdf, s + rng.random(alive.size), side="right")
            a = np.clip(a, arc_start[s], self._arc_end[s] - 1)
            d = self._arc_dist[a]
            j = np.searchsorted(self._dist_cdf, d + rng.random(alive.size), side="right")
            j = np.clip(j, dist_start[d], self._dist_end[d] - 1)
            logp[alive] += self._arc_logp[a] + self._dist_logp[j]
            steps.append((alive, self._dist_word[j]))
            nxt = self._arc_next[a]
            state[alive] = nxt
            alive = alive[nxt != _TERMINAL]
        grid = np.zeros((n, len(steps)), dtype=np.int64)  # 0 (= </s>) pads the tail
        lengths = np.zeros(n, dtype=np.int64)
        for t, (idx, w) in enumerate(steps):
            grid[idx, t] = w
            lengths[idx] = t  # words before </s>
        words = self._str[grid]
        return [words[i, :lengths[i]].tolist() for i in range(n)], logp


# ---------------------------------------------------------------------------- the corpus
@dataclass
class ToyCorpus:
    """Generated splits and their exact entropy.

    ``truth[split]``: ``n_tokens`` (words + sentence ends), ``n_sentences``, ``log2prob``
    (exact total log2 probability of the split under the true language),
    ``bits_per_token`` (= -log2prob / n_tokens), ``perplexity`` (2 ** bits_per_token),
    ``entropy_rate_bits`` (the language's exact expected bits per token).
    """

    config: ToyConfig
    splits: dict  # split -> list of sentences (lists of words, no </s>)
    truth: dict = field(default_factory=dict)
    language: Optional[ToyLanguage] = field(default=None, repr=False, compare=False)


_CHUNK = 2048  # sentences sampled per vectorised batch; fixed, so a shorter split is a prefix of a longer one


def _generate_split(lang: ToyLanguage, rng: np.random.Generator, n_tokens: int) -> tuple:
    """Whole sentences until ``n_tokens`` predicted tokens are reached, and their log2 probs."""
    sents: list = []
    logps: list = []
    have = 0
    while have < n_tokens:
        batch, lp = lang.sample_sentences(rng, _CHUNK)
        toks = np.cumsum([len(s) + 1 for s in batch]) + have
        take = min(int(np.searchsorted(toks, n_tokens, side="left")) + 1, _CHUNK)
        sents += batch[:take]
        logps.append(lp[:take])
        have = int(toks[take - 1])
    logp = np.concatenate(logps) if logps else np.zeros(0)
    return sents, logp


def generate_corpus(config: Optional[ToyConfig] = None) -> ToyCorpus:
    """Generate the toy corpus (train / valid / test) for ``config`` (default: ``ToyConfig()``).

    Deterministic: the same config always gives the same corpus; each split has its
    own random stream (spawned from the seed), so changing one split's size leaves
    the others unchanged, and a shorter split is a prefix of a longer one.
    """
    cfg = config if config is not None else ToyConfig()
    lang = ToyLanguage(cfg)
    splits, truth = {}, {}
    rate = lang.entropy_rate_bits()
    for name, n_tok in (("train", cfg.n_train_tokens), ("valid", cfg.n_valid_tokens), ("test", cfg.n_test_tokens)):
        rng = np.random.default_rng(lang._split_seeds[name])
        sents, logp = _generate_split(lang, rng, n_tok)
        n = sum(len(s) + 1 for s in sents)
        total = math.fsum(logp.tolist())
        bpt = -total / n if n else float("nan")
        splits[name] = sents
        truth[name] = {"n_tokens": n, "n_sentences": len(sents), "log2prob": total, "bits_per_token": bpt,
                       "perplexity": 2.0 ** bpt if n else float("nan"), "entropy_rate_bits": rate}
    return ToyCorpus(config=cfg, splits=splits, truth=truth, language=lang)
