"""ARPA back-off files: the interchange format of KenLM, SRILM and friends.

Writing: every stored n-gram with its log10 probability and, below the highest
order, its log10 back-off weight; ``<s>`` gets probability -99 as in KenLM.
Reading: a strict parser that reports the line number of anything wrong (bad
header, wrong counts, bad numbers, wrong number of words, duplicates, truncation)
into :class:`~ngramlm.tables.NgramTables` that score exactly as the file says.
"""
from __future__ import annotations

import io
import json
import math
import os
import re
from typing import Optional

import numpy as np

from corpora.errors import InputError
from corpora.textio import atomic_writer_by_suffix, read_bytes
from corpora.vocab import BOS_ID, PAD_ID, UNK_ID, Vocab

from ..counts import MAX_ORDER, lookup
from ..smoothing import backoff_smoothers, named_list

LOG10_MISSING_UNK = -100.0  # KenLM's substitute when an ARPA file lacks <unk>
META_PREFIX = "# ngramlm-meta "


def arpa_meta(model) -> dict:
    v = model.vocab_
    meta = {"n_corpus_unk": int(v.n_corpus_unk_ or 0),
            "tokenizer": v.tokenizer.to_dict() if v.tokenizer is not None else None}
    name = getattr(model, "smoother_name_", None)
    if _known_smoother(name):  # so a reader can say what the model is
        meta["smoothing"] = name
    return meta


def _known_smoother(name) -> bool:
    from ..smoothing import SMOOTHERS

    return isinstance(name, str) and name in SMOOTHERS


UNRECORDED = "unknown"  # the smoother_name of an ARPA file that does not record its smoothing (KenLM's, SRILM's)


def _apply_meta(lines: list, stop: int, vocab, path) -> Optional[str]:
    """Read the ``# ngramlm-meta`` line (if any) among the first ``stop`` lines into ``vocab``;
    return the smoothing it records (None where there is none)."""
    for ln in range(stop):
        if lines[ln].startswith(META_PREFIX):
            try:
                meta = json.loads(lines[ln][len(META_PREFIX):])
                vocab.n_corpus_unk_ = int(meta.get("n_corpus_unk") or 0)
                if meta.get("tokenizer"):
                    from corpora.tokenize import TokenizerSpec

                    vocab.tokenizer = TokenizerSpec.from_dict(meta["tokenizer"])
            except (ValueError, TypeError, AttributeError, KeyError, InputError) as exc:
                raise InputError(f"unreadable ngramlm metadata line ({exc})", path=path, line=ln + 1,
                                 fix="delete the line (the model then counts a literal <unk> as an OOV)") from None
            return meta.get("smoothing") if _known_smoother(meta.get("smoothing")) else None
    return None


def looks_like_arpa(path: os.PathLike | str) -> bool:
    """True when the first non-blank line (of the gunzipped text) is ``\\data\\`` (a sniff: never raises).

    Comment lines before it are skipped whole, however long: ours carries the tokenizer, and a learned
    one (BPE merges) makes that line hundreds of kilobytes."""
    import gzip

    try:
        with open(path, "rb") as fh:
            gz = fh.read(2) == b"\x1f\x8b"
        with (gzip.open(path, "rb") if gz else open(path, "rb")) as fh:
            for i in range(64):
                line = fh.readline() if i else fh.readline().removeprefix(b"\xef\xbb\xbf")
                if not line:
                    return False
                if line.strip() and not line.startswith(b"#"):  # KenLM allows '#' comment lines before \data\
                    return line.strip() == b"\\data\\"
    except Exception:  # unreadable, or gzip data that is corrupt: not an ARPA file we can read
        return False
    return False


def _fmt(x: float) -> str:
    if not math.isfinite(x):
        return "-99"
    return f"{x:.7g}"


def format_column(x: np.ndarray) -> np.ndarray:
    """:func:`_fmt` over a column: '%.7g' (what f'{x:.7g}' gives), '-99' for -inf."""
    u, inv = np.unique(x, return_inverse=True)
    if len(u) < len(x) // 2:  # back-off weights repeat a lot (PTB 5-gram: ~1,000 distinct of 700k)
        return format_column(u)[inv.ravel()]
    out = np.empty(len(x), dtype=object)
    out[:] = list(map("%.7g".__mod__, x.tolist()))  # C-level map: ~4x np.char.mod's speed
    out[~np.isfinite(x)] = "-99"
    return out


def write_arpa(model, path: os.PathLike | str) -> None:
    """Write ``model`` (a fitted back-off :class:`~ngramlm.scorer.Scorer`: an NgramLM or any query object
    over tables) as an ARPA file, atomically.  (:func:`ngramlm.loading.read_arpa` reads one back.)"""
    model._check_fitted()
    if model.kind_ != "backoff":
        raise InputError(f"{model.smoother_name_} is not a back-off model, so ARPA cannot represent it",
                         fix=f"export a model smoothed with {named_list(backoff_smoothers())}")
    if not model.is_distribution_:
        raise InputError("stupid backoff scores are not probabilities and back off even from unseen contexts; "
                         "an ARPA file would score them differently", fix="export a properly smoothed model")
    from .. import accel

    V = len(model.vocab_)
    n = model.order_
    # What ARPA has no field for but the accounting needs, on a '#' line before \data\ (KenLM
    # and this reader accept comment lines there; SRILM ignores any text there): whether the
    # training text used <unk> as a word (PTB), and the tokenizer.  Re-imported, the model
    # counts OOVs exactly as the native file does.
    head = [META_PREFIX + json.dumps(arpa_meta(model), separators=(",", ":"), ensure_ascii=False), "", "\\data\\"]
    head += [f"ngram {k}={c}" for k, c in enumerate(_arpa_counts(model), start=1)]
    if accel.fast is not None:
        _write_compiled(model, path, "\n".join(head) + "\n")
        return
    out = io.StringIO()
    out.write("\n".join(head) + "\n")
    # Whole columns at a time: the words of each n-gram through an object array of strings
    # (C-level concatenation), numbers through one '%.7g' pass; no Python loop per line.
    itos = np.array(model.vocab_.itos_, dtype=object)
    text_prev = None
    for k in range(1, n + 1):
        keys = model.keys_[k - 1]
        lp = np.array(model.log10_prob_[k - 1], dtype=np.float64)
        bo = model.log10_backoff_[k - 1] if k < n else None
        if k == 1:
            sel = np.flatnonzero(np.arange(V) != PAD_ID)
            lp[BOS_ID] = -99.0  # <s> is never predicted: ARPA's convention
            text_all = itos
            text = itos[sel]
        else:
            # An n-gram's text is its context's text (the row `parent` of the order below, already
            # built) plus its last word: one concatenation per n-gram whatever the order.
            text_all = text_prev[keys // V] + " " + itos[keys % V]
            sel = np.arange(len(keys))
            text = text_all
        line = format_column(lp[sel]) + "\t" + text
        if bo is not None:
            line = line + "\t" + format_column(np.asarray(bo, dtype=np.float64)[sel])
        out.write(f"\n\\{k}-grams:\n")
        out.write("\n".join(line.tolist()))
        out.write("\n")
        text_prev = text_all
    out.write("\n\\end\\\n")
    with atomic_writer_by_suffix(path) as fh:
        fh.write(out.getvalue().encode("utf-8"))


def _arpa_counts(model) -> list:
    """n-grams per section: every vocabulary entry but <pad> is a unigram line."""
    return [len(model.vocab_) - 1] + [len(k) for k in model.keys_[1:]]


class ThreadedWriter:
    """``write`` hands each chunk to a thread that writes it to ``fh``, so the compiled formatter
    (which releases the GIL) fills the next chunk while the kernel copies this one.  A write error
    is raised again in the caller, at its next write or at the end."""

    def __init__(self, fh, depth: int = 4) -> None:
        import queue
        import threading

        self.fh = fh
        self.q: "queue.Queue" = queue.Queue(maxsize=depth)
        self.error: Optional[BaseException] = None
        self.thread = threading.Thread(target=self._run, name="arpa-writer", daemon=True)
        self.thread.start()

    def _run(self) -> None:
        while True:
            chunk = self.q.get()
            if chunk is None:
                return
            if self.error is None:
                try:
                    self.fh.write(chunk)
                except BaseException as exc:  # noqa: BLE001 -- handed to the caller's thread
                    self.error = exc

    def write(self, chunk: bytes) -> None:
        if self.error is not None:
            raise self.error
        self.q.put(chunk)

    def __enter__(self) -> "ThreadedWriter":
        return self

    def __exit__(self, *exc) -> None:
        self.q.put(None)
        self.thread.join()
        if self.error is not None and exc[0] is None:
            raise self.error


def _write_compiled(model, path, head: str) -> None:
    """The same bytes as the column writer, formatted in C (``%.7g``, '-99' for -inf) on a pool of
    threads, slice by slice, while a writer thread copies the text to the file."""
    from corpora.textio import atomic_writer_by_suffix

    V = len(model.vocab_)
    n = model.order_
    words = [w.encode("utf-8") for w in model.vocab_.itos_]
    with atomic_writer_by_suffix(path) as raw_fh, ThreadedWriter(raw_fh) as fh, ArpaFormatters(fh, words, V) as fmt:
        fmt.text(head.encode("utf-8"))
        for k in range(1, n + 1):
            lp = np.ascontiguousarray(model.log10_prob_[k - 1], dtype=np.float64)
            if k == 1:
                lp = lp.copy()
                lp[BOS_ID] = -99.0  # <s> is never predicted: ARPA's convention
            bo = np.ascontiguousarray(model.log10_backoff_[k - 1], dtype=np.float64) if k < n else None
            fmt.text(f"\n\\{k}-grams:\n".encode())
            fmt.rows(k, list(model.keys_[:k]), lp, bo, PAD_ID if k == 1 else -1)
            if not len(lp):  # the column writer ends an empty section with its own newline: the same bytes
                fmt.text(b"\n")
        fmt.text(b"\n\\end\\\n")


class ArpaFormatters:
    """ARPA lines formatted by the compiled formatter on a pool of threads (it runs without the GIL),
    in slices of rows, and handed to ``fh`` in file order.  Memory stays bounded: at most
    ``2 * workers`` slices (of ``SLICE_ROWS`` rows, ~10 MB of text) are in flight.  One thread where
    the process may use one core (``accel.worker_threads``)."""

    SLICE_ROWS = 1 << 18

    def __init__(self, fh, words: list, V: int) -> None:
        import collections
        from concurrent.futures import ThreadPoolExecutor

        self.fh, self.words, self.V = fh, words, V
        from ..accel import worker_threads

        self.workers = worker_threads()
        self.pool = ThreadPoolExecutor(max_workers=self.workers, thread_name_prefix="arpa-format")
        self.pending: "collections.deque" = collections.deque()

    def _drain(self, keep: int) -> None:
        while len(self.pending) > keep:
            item = self.pending.popleft()
            for part in (item.result() if hasattr(item, "result") else item):
                self.fh.write(part)

    def text(self, data: bytes) -> None:
        self.pending.append([data])
        self._drain(2 * self.workers)

    def rows(self, k: int, keys: list, lp: np.ndarray, bo, skip: int) -> None:
        from types import SimpleNamespace

        from .. import accel

        def job(a: int, e: int) -> list:
            parts: list = []
            last = keys[:-1] + [keys[-1][a:e]] if k > 1 else keys
            accel.fast.write_section(SimpleNamespace(write=parts.append), k, last, lp[a:e],
                                     None if bo is None else bo[a:e], self.words, self.V, skip)
            return parts

        n = len(lp)
        step = n if k == 1 else self.SLICE_ROWS  # a unigram slice must see <pad>'s row to skip it
        for a in range(0, n, step):
            self.pending.append(self.pool.submit(job, a, min(n, a + step)))
            self._drain(2 * self.workers)

    def __enter__(self) -> "ArpaFormatters":
        return self

    def __exit__(self, *exc) -> None:
        try:
            if exc[0] is None:
                self._drain(0)
        finally:
            self.pool.shutdown(wait=True, cancel_futures=True)


def _parse_uniform(lines, idx, k, top):
    """The common case -- every line of the section has the same number of tab-separated
    fields (KenLM writes a back-off on every lower-order line) -- with one join and one split
    for the whole section instead of a list per line.  None when the section is not like that
    (a misaligned field then fails the number or word-count checks), and the caller goes on."""
    if not idx:
        return None
    width = lines[idx[0]].count("\t") + 1
    if width not in ((2,) if top else (2, 3)):
        return None
    fields = "\t".join([lines[j] for j in idx]).split("\t")
    if len(fields) != width * len(idx):
        return None
    try:
        probs = np.array(fields[0::width], dtype=np.float64)
        bos = np.array(fields[2::width], dtype=np.float64) if width == 3 else np.zeros(len(idx))
    except ValueError:
        return None
    flat = " ".join(fields[1::width]).split(" ")
    if len(flat) != k * len(idx) or not np.all(np.isfinite(probs)) or not np.all(np.isfinite(bos)) \
            or np.any(probs > 0) or "" in flat:
        return None
    return flat, probs, bos, np.asarray(idx) + 1


def _parse_section_fast(lines, a, b, k, top, expected):
    """Tab-separated sections (what KenLM and SRILM write), parsed with bulk numpy conversions.

    Returns None whenever anything is unusual; the careful parser then finds and
    reports the exact line.
    """
    idx = [j for j in range(a, b) if lines[j]]
    if expected is not None and len(idx) != expected:
        return None
    uniform = _parse_uniform(lines, idx, k, top)
    if uniform is not None:
        return uniform
    cols = [lines[j].split("\t") for j in idx]
    try:
        widths = set(map(len, cols))
        if not widths <= ({2} if top else {2, 3}):
            return None
        probs = np.array([c[0] for c in cols], dtype=np.float64)
        bos = np.array([c[2] if len(c) == 3 else "0" for c in cols], dtype=np.float64)
    except ValueError:
        return None
    flat = " ".join(c[1] for c in cols).split(" ")
    if len(flat) != k * len(cols) or not np.all(np.isfinite(probs)) or not np.all(np.isfinite(bos)) \
            or np.any(probs > 0) or "" in flat:
        return None
    return flat, probs, bos, np.asarray(idx) + 1


_FIELDS = re.compile(r"[ \t]+")


def _parse_section_slow(lines, a, b, k, top, err):
    flat, probs, bos, lns = [], [], [], []
    for i in range(a, b):
        # Fields are separated by spaces and tabs only (as KenLM and the compiled reader split them):
        # a word may hold any other character, a no-break space included.
        s = lines[i].strip(" \t")
        if not s:
            continue
        parts = _FIELDS.split(s)
        if len(parts) not in (k + 1, k + 2):
            raise err(f"expected log10 probability, {k} word(s) and an optional back-off, got {len(parts)} fields",
                      i + 1)
        try:
            p = float(parts[0])
            bo = float(parts[k + 1]) if len(parts) == k + 2 else 0.0
        except ValueError:
            raise err(f"bad number in {s[:60]!r}", i + 1) from None
        if not (math.isfinite(p) and math.isfinite(bo)) or p > 0:
            raise err(f"log10 probability must be a finite number <= 0, got {parts[0]!r}", i + 1)
        if top and len(parts) == k + 2:
            raise err(f"highest-order ({k}-gram) entries cannot have a back-off weight", i + 1)
        flat.extend(parts[1:k + 1])
        probs.append(p)
        bos.append(bo)
        lns.append(i + 1)
    return flat, np.array(probs, dtype=np.float64), np.array(bos, dtype=np.float64), np.array(lns)


def read_arpa_tables(path: os.PathLike | str, **kwargs):
    """Parse an ARPA file (plain or gzip) into :class:`~ngramlm.tables.NgramTables`.

    The compiled reader parses the sections straight from the bytes; anything it does not
    expect (CRLF line ends, odd spacing, an error of any kind) sends the file through the
    careful parser below, which names the line of the problem.
    """
    from .. import accel

    raw = read_bytes(path)
    if accel.fast is not None:
        tables = _read_arpa_fast(raw, path, **kwargs)
        if tables is not None:
            return tables
    return _read_arpa_careful(raw, path, **kwargs)


def _read_arpa_careful(raw: bytes, path, **kwargs):
    import gc

    # Parsing creates millions of short-lived strings and lists; the cyclic collector would
    # rescan them over and over (measured: 14.4 s -> 9.0 s for the PTB 5-gram without it).
    # None of them forms a cycle, so it is paused and restored whatever happens.
    was = gc.isenabled()
    gc.disable()
    try:
        return _parse_text(raw, path, **kwargs)
    finally:
        if was:
            gc.enable()


_CHUNK_BYTES = 1 << 20  # the careful parser decodes a section this much at a time (measured: 4 MB +40 MB peak, no faster)


class _Lines:
    """Line access to the file's bytes without a str per line of the whole file: the header is
    decoded line by line, each section in chunks of whole lines (``_CHUNK_BYTES``), so the strings
    of one chunk are alive at a time (a 94 MB PTB 5-gram: 1.38 GB -> a few hundred MB)."""

    def __init__(self, raw: bytes, path, err) -> None:
        self.raw, self.path, self.err = raw, path, err
        self.n = len(raw)
        self._ln_pos, self._ln = 0, 0  # line index of byte offset _ln_pos (counted incrementally)

    def line_index(self, pos: int) -> int:
        if pos < self._ln_pos:
            self._ln_pos, self._ln = 0, 0
        self._ln += self.raw.count(b"\n", self._ln_pos, pos)
        self._ln_pos = pos
        return self._ln

    def decode(self, a: int, b: int) -> str:
        try:
            return self.raw[a:b].decode("utf-8")
        except UnicodeDecodeError as exc:
            line = self.raw.count(b"\n", 0, a + exc.start) + 1
            raise InputError(f"not valid UTF-8 at byte offset {a + exc.start}", path=self.path, line=line,
                             fix="convert the ARPA file to UTF-8") from None

    def line_at(self, pos: int):
        """(text of the line starting at byte ``pos``, offset of the next line)."""
        e = self.raw.find(b"\n", pos)
        e = self.n if e < 0 else e
        return self.decode(pos, e), e + 1

    def chunks(self, a: int, b: int, *, split: bool = True):
        """(first line index, list of lines) for the lines in bytes [a, b), a few MB at a time
        (``split=False``: only decode them, to check the encoding)."""
        while a < b:
            e = min(b, a + _CHUNK_BYTES)
            if e < b:
                nl = self.raw.rfind(b"\n", a, e)
                e = (self.raw.find(b"\n", e, b) + 1 or b) if nl < 0 else nl + 1
            if not split:
                self.decode(a, e)
                yield None
                a = e
                continue
            first = self.line_index(a)
            text = self.decode(a, e)
            lines = text.split("\n")
            if lines and lines[-1] == "" and text.endswith("\n"):
                lines.pop()
            yield first, lines
            a = e


class _Cursor:
    """The careful parser's place in the file: the line starting at byte ``pos`` is line index ``i``
    (0-based; errors name ``i + 1``).  ``src`` reads the lines, ``err`` makes the errors."""

    def __init__(self, raw: bytes, path) -> None:
        self.raw, self.path = raw, path
        self.n = len(raw)
        self.nlines = raw.count(b"\n") + 1
        self.src = _Lines(raw, path, self.err)
        self.pos, self.i = 0, 0

    def err(self, msg: str, ln: int, fix: str = "regenerate the ARPA file (it may be truncated or hand-edited)"):
        return InputError(msg, path=self.path, line=ln, fix=fix)

    def advance(self, nxt: int) -> None:
        """On to the next line, which starts at byte ``nxt``."""
        self.pos, self.i = nxt, self.i + 1

    def next_nonblank(self):
        """(the next line that is not blank, the offset of the line after it), the cursor on it; None at
        the end of the file."""
        while self.pos <= self.n:
            line, nxt = self.src.line_at(self.pos)
            if line.strip():
                return line, nxt
            self.advance(nxt)
        return None


def _parse_text(raw: bytes, path, *, unk_token: str = "<unk>", bos_token: str = "<s>", eos_token: str = "</s>"):
    """The careful parser: Python strings, a chunk of lines at a time, every problem reported with its line.

    Its steps: the header (up to ``\\data\\``), the count lines, each order's section, the ``\\end\\``
    marker, the unigrams' checks, then each order's rows as sorted keys."""
    if raw.startswith(b"\xef\xbb\xbf"):  # a byte-order mark, as some editors write
        raw = raw[3:]
    if b"\r" in raw:  # CRLF (Windows) line ends
        raw = raw.replace(b"\r\n", b"\n")
    cur = _Cursor(raw, path)
    for _ in cur.src.chunks(0, len(raw), split=False):  # all of it is UTF-8 (the first error wins, as before)
        pass
    header, data_line = _careful_header(cur)
    declared = _careful_counts(cur)
    order = len(declared)
    vocab = uni_listed = None
    sections = []  # per order: (ids (rows, k) int32 or unigram words, probs, backoffs, line numbers, first unknown)
    for k in range(1, order + 1):
        sections.append(_careful_section(cur, k, k == order, declared[k - 1],
                                          None if vocab is None else vocab.stoi_))
        if k == 1:
            uni_listed = sections[0][0]
            vocab = arpa_vocab(uni_listed, unk_token, bos_token, eos_token)
    got = cur.next_nonblank()
    if got is None or got[0].strip() != "\\end\\":
        raise cur.err("missing \\end\\ marker (truncated file?)", min(cur.i + 1, cur.nlines))
    seen = _careful_unigram_lines(cur, sections[0])
    recorded = _apply_meta(header, data_line, vocab, path)
    V = len(vocab.itos_)
    keys_l, lp_l, bo_l = [], [], []
    for k in range(1, order + 1):
        if k == 1:
            words, probs, bos = sections[0][:3]
            keys, lp, bo = _unigram_rows(V, np.array([vocab.stoi_[w] for w in words], dtype=np.int64), probs, bos,
                                         unk_token in seen)
        else:
            keys, lp, bo = _careful_rows(cur.err, k, sections[k - 1], keys_l, vocab.itos_)
        sections[k - 1] = None  # free the parsed rows of this order
        keys_l.append(keys)
        lp_l.append(lp.astype(np.float64))
        bo_l.append(bo.astype(np.float64) if k < order else np.zeros(0))
    return arpa_tables(vocab, keys_l, lp_l, bo_l, declared, path, recorded, uni_words=uni_listed)


def _careful_header(cur: _Cursor) -> tuple:
    """The lines up to and including ``\\data\\`` (short: line by line), and the index of that line."""
    header: list = []
    while cur.pos <= cur.n:
        line, nxt = cur.src.line_at(cur.pos)
        header.append(line)
        if line.strip() == "\\data\\":
            data_line = cur.i
            cur.advance(nxt)
            return header, data_line
        cur.advance(nxt)
    raise InputError("not an ARPA file: no \\data\\ header", path=cur.path,
                     fix="pass an ARPA file, or a native model written by `ngramlm train`")


def _careful_counts(cur: _Cursor) -> list:
    """The ``ngram K=COUNT`` lines after ``\\data\\``: the declared count of each order."""
    declared: list = []
    while cur.pos <= cur.n:
        line, nxt = cur.src.line_at(cur.pos)
        if not line.strip().startswith("ngram "):
            break
        body = line.strip()[6:]
        try:
            k_s, c_s = body.split("=")
            k, c = int(k_s), int(c_s)
        except ValueError:
            raise cur.err(f"bad count line {line.strip()!r}", cur.i + 1) from None
        if k != len(declared) + 1 or c < 0:
            raise cur.err(f"counts must be listed for orders 1, 2, ... in turn; got {line.strip()!r}", cur.i + 1)
        if k > MAX_ORDER:
            raise cur.err(f"order {k} is above the highest order this toolkit handles ({MAX_ORDER})", cur.i + 1,
                          fix=f"use a model of order {MAX_ORDER} or less")
        declared.append(c)
        cur.advance(nxt)
    if not declared:
        raise cur.err("no 'ngram N=COUNT' lines after \\data\\", cur.i + 1)
    return declared


def _careful_section(cur: _Cursor, k: int, top: bool, declared: int, stoi: Optional[dict]) -> tuple:
    """The ``\\k-grams:`` section at the cursor, a chunk of lines at a time: (unigram words, or the word
    ids (rows, k) int32 with -1 for a word not among the unigrams (``stoi``); log10 probabilities;
    back-offs; line numbers; the first unknown n-gram as (text, line) or None).  The cursor ends on
    the line that ends the section."""
    raw, src, err, nlines = cur.raw, cur.src, cur.err, cur.nlines
    got = cur.next_nonblank()
    if got is None:
        raise err(f"file ends before the \\{k}-grams: section (truncated?)", nlines)
    line, nxt = got
    if line.strip() != f"\\{k}-grams:":
        raise err(f"expected \\{k}-grams: but found {line.strip()[:40]!r}", cur.i + 1)
    cur.advance(nxt)
    pos = cur.pos
    # The section ends at the first line that starts with a backslash.
    end = len(raw) + 1 if pos > len(raw) else (0 if raw.startswith(b"\\", pos) else raw.find(b"\n\\", pos))
    end = pos if end == 0 else (len(raw) + 1 if end < 0 else end + 1)
    parts, unknown = [], None
    for first, lines in src.chunks(pos, min(end, len(raw))):
        parsed = _parse_section_fast(lines, 0, len(lines), k, top, None)
        if parsed is None:  # unusual layout or an error: the careful parser says where
            parsed = _parse_section_slow(lines, 0, len(lines), k, top, lambda msg, ln: err(msg, ln + first))
        flat, probs, bos, lns = parsed
        lns = (np.asarray(lns, dtype=np.int64) + first).astype(np.int32 if nlines < 2**31 else np.int64)
        if k == 1:
            parts.append((flat, probs, bos, lns))
            continue
        get = stoi.get
        ids = np.array([get(w, -1) for w in flat], dtype=np.int32).reshape(-1, k)
        if unknown is None and (ids < 0).any():
            r = int(np.flatnonzero((ids < 0).any(axis=1))[0])
            unknown = (" ".join(flat[r * k:(r + 1) * k]), int(lns[r]))
        parts.append((ids, probs, bos, lns))
        del flat
    cur.i = src.line_index(end) if end <= len(raw) else nlines
    cur.pos = end
    if k == 1:
        data = [w for p in parts for w in p[0]]
    else:
        data = np.concatenate([p[0] for p in parts]) if parts else np.zeros((0, k), dtype=np.int32)
    probs = np.concatenate([p[1] for p in parts]) if parts else np.zeros(0)
    bos = np.concatenate([p[2] for p in parts]) if parts else np.zeros(0)
    lns = np.concatenate([p[3] for p in parts]) if parts else np.zeros(0, dtype=np.int64)
    if len(probs) != declared:
        raise err(f"\\data\\ declares {declared} {k}-grams but the section has {len(probs)}",
                  cur.i + 1 if end <= len(raw) else nlines)
    return data, probs, bos, lns, unknown


def _careful_unigram_lines(cur: _Cursor, unigrams: tuple) -> dict:
    """Each unigram listed once and none of them ``<pad>``; returns {word: its line}."""
    seen = {}
    for w, ln in zip(unigrams[0], unigrams[3]):
        if w in seen:
            raise cur.err(f"duplicate unigram {w!r} (first at line {seen[w]})", int(ln))
        if w == "<pad>":  # id 0 of every vocabulary here, never a word
            raise cur.err("the unigram '<pad>' is reserved by this toolkit for padding", int(ln),
                          fix="rename the word in the ARPA file (e.g. to <pad_>)")
        seen[w] = int(ln)
    return seen


def _careful_rows(err, k: int, section: tuple, keys_l: list, itos: list) -> tuple:
    """The ``k``-grams (k >= 2) as (sorted int64 keys, log10 probabilities, back-offs) in key order,
    each context found among the ``k - 1``-grams (``keys_l``: the lower orders' keys); an unknown word,
    a context not listed or a duplicate is an error naming its line."""
    data, probs, bos, lns, unknown = section
    V = len(itos)
    ids = data.astype(np.int64)

    def text(r: int) -> str:
        return " ".join(itos[j] for j in ids[r])

    if unknown is not None:
        raise err(f"{k}-gram {unknown[0]!r} uses a word that is not among the unigrams", unknown[1])
    # The context's index: walk the trie one word at a time (int64 keys).
    parent = ids[:, 0].copy()
    for j in range(1, k - 1):
        parent = lookup(keys_l[j], np.where(parent >= 0, parent * V + ids[:, j], -1))
    ok = parent >= 0
    if not ok.all():
        r = int(np.flatnonzero(~ok)[0])
        raise err(f"the context of {k}-gram {text(r)!r} is not listed among the {k - 1}-grams", int(lns[r]))
    raw_keys = parent * V + ids[:, -1]
    del ids
    perm = np.argsort(raw_keys, kind="stable")
    keys = raw_keys[perm]
    del raw_keys
    dup = np.flatnonzero(keys[1:] == keys[:-1])
    if len(dup):
        a, b = sorted((int(lns[perm[dup[0]]]), int(lns[perm[dup[0] + 1]])))
        ids = data.astype(np.int64)
        raise err(f"duplicate {k}-gram {text(int(perm[dup[0]]))!r} (first at line {a})", b)
    return keys, probs[perm], bos[perm]


def arpa_vocab(uni_words, unk_token: str, bos_token: str, eos_token: str) -> Vocab:
    """The vocabulary of an ARPA file: specials at their fixed ids, then the unigrams in file order."""
    itos = ["<pad>", bos_token, eos_token, unk_token] + [w for w in uni_words if w not in (bos_token, eos_token, unk_token)]
    vocab = Vocab(unk_token=unk_token, bos_token=bos_token, eos_token=eos_token)
    vocab.itos_ = itos
    vocab.stoi_ = {w: j for j, w in enumerate(itos)}
    vocab.counts_ = {}
    vocab.n_train_tokens_ = 0
    vocab.n_train_unk_ = 0
    vocab.n_corpus_unk_ = 0
    return vocab


def _unigram_rows(V: int, ids: np.ndarray, probs: np.ndarray, bos: np.ndarray, has_unk: bool):
    lp = np.full(V, -np.inf)
    bo = np.zeros(V)
    lp[ids] = probs
    bo[ids] = bos
    if not has_unk:
        lp[UNK_ID] = LOG10_MISSING_UNK
    lp[BOS_ID] = -np.inf  # never predicted (ARPA's -99)
    return np.arange(V, dtype=np.int64), lp, bo


def arpa_tables(vocab, keys_l, lp_l, bo_l, declared, path, recorded: Optional[str] = None, uni_words=None):
    from ..tables import NgramTables

    info = {"arpa": str(path)}
    if uni_words is not None:
        # A file without <s> or </s> (KenLM's build_binary refuses it unless -s): the writer needs to know.
        listed = set(uni_words)
        lacks = [t for t in (vocab.bos_token, vocab.eos_token) if t not in listed]
        if lacks:
            info["arpa_lacks"] = lacks
    return NgramTables(vocab=vocab, kind="backoff", keys=keys_l, n_ngrams=list(declared),
                       smoother_name=recorded or UNRECORDED,
                       smoother_params={"source": str(path)}, info=info, log10_prob=lp_l,
                       log10_backoff=bo_l, missing_backoff=0.0, is_distribution=True)


def _fast_layout(raw: bytes, fast):
    """The compiled reader's first step: (the header's lines before ``\\data\\``, the declared counts, each
    order's section as byte offsets (start, end)), or None when anything is unusual."""
    off = 3 if raw.startswith(b"\xef\xbb\xbf") else 0
    if b"\r" in raw:
        return None
    # The header (comments, the ngramlm-meta line, \data\, the counts) is short: lines as str.
    data = raw.find(b"\\data\\\n", off)
    if data < 0 or (data > off and raw[data - 1:data] != b"\n"):
        return None
    try:
        head = raw[off:data].decode("utf-8").split("\n") if data > off else []
    except UnicodeDecodeError:
        return None
    if any(h.strip() and not h.startswith("#") for h in head):
        return None
    pos = data + len(b"\\data\\\n")
    declared = []
    while True:
        nl = raw.find(b"\n", pos)
        if nl < 0:  # the file ends inside the header: the careful parser says where
            return None
        line = raw[pos:nl]
        if not line.startswith(b"ngram "):
            break
        try:
            k_s, c_s = line[6:].split(b"=")
            k, c = int(k_s), int(c_s)
        except ValueError:
            return None
        if k != len(declared) + 1 or c < 0 or k > MAX_ORDER:
            return None
        declared.append(c)
        pos = nl + 1
    order = len(declared)
    if not order:
        return None
    sections = []
    for k in range(1, order + 1):
        while raw.startswith(b"\n", pos):
            pos += 1
        header = f"\\{k}-grams:\n".encode()
        if not raw.startswith(header, pos):
            return None
        start = pos + len(header)
        end = fast.section_end(raw, start)
        sections.append((start, end))
        pos = end
    if raw[pos:].strip() != b"\\end\\":
        return None
    # A line takes at least 4 bytes ("0\ta\n"): a larger declared count is wrong, and the careful
    # parser says so -- without allocating arrays for it first.
    if any(c > (e - a) // 4 + 1 for c, (a, e) in zip(declared, sections)):
        return None
    return head, declared, sections


def _read_arpa_fast(raw: bytes, path, *, unk_token: str = "<unk>", bos_token: str = "<s>", eos_token: str = "</s>"):
    """The compiled reader: sections parsed from the bytes, no str per line or word.  None whenever
    anything is unusual -- the careful parser then reads the file and names the line."""
    from .. import accel

    fast = accel.fast
    layout = _fast_layout(raw, fast)
    if layout is None:
        return None
    head, declared, sections = layout
    order = len(declared)
    start, end = sections[0]
    got = fast.parse_unigrams(raw, start, end, declared[0], order == 1)
    if got is None:
        return None
    probs, bos, wstart, wlen = got
    try:
        uni_words = [raw[a:a + n].decode("utf-8") for a, n in zip(wstart.tolist(), wlen.tolist())]
    except UnicodeDecodeError:
        return None
    if "<pad>" in uni_words:
        return None
    vocab = arpa_vocab(uni_words, unk_token, bos_token, eos_token)
    stoi = vocab.stoi_
    V = len(vocab.itos_)
    uni_ids = np.fromiter((stoi[w] for w in uni_words), dtype=np.int64, count=len(uni_words))
    words = fast.WordTable(raw, wstart, wlen, uni_ids)
    if words.duplicate >= 0:
        return None
    keys, lp, bo = _unigram_rows(V, uni_ids, probs, bos, unk_token in uni_words)
    keys_l, lp_l, bo_l = [keys], [lp], [bo if order > 1 else np.zeros(0)]
    # Files in prefix order (this toolkit's) walk the trie by galloping through sorted keys; others
    # (KenLM lists n-grams by their last words) through hashes, built as each order is read.
    index = None
    for k in range(2, order + 1):
        start, end = sections[k - 1]
        got = fast.parse_section(raw, start, end, k, declared[k - 1], k == order, words, keys_l, index, V)
        if got is None:
            return None
        probs, bos, raw_keys = got
        in_order = len(raw_keys) < 2 or bool(np.all(raw_keys[1:] > raw_keys[:-1]))
        if k == 2 and order > 2 and not in_order:
            index = [None] * order
        if in_order:  # listed in key order (this toolkit's files): no sort, no copies
            keys = raw_keys
        else:
            perm = np.argsort(raw_keys)  # distinct keys (duplicates go to the careful parser): no need for stable
            keys = raw_keys[perm]
            if len(keys) > 1 and (keys[1:] == keys[:-1]).any():
                return None
            probs, bos = probs[perm], bos[perm]
            del perm
        del raw_keys
        keys_l.append(keys)
        lp_l.append(probs)
        bo_l.append(bos if k < order else np.zeros(0))
        del probs, bos
        if index is not None and k < order:
            index[k - 1] = fast.KeyIndex(keys)
    recorded = _apply_meta(head, len(head), vocab, path)  # last, as in the careful parser: errors in its order
    return arpa_tables(vocab, keys_l, lp_l, bo_l, declared, path, recorded, uni_words=uni_words)


# ----------------------------------------------------------------------------- compact reading (ppl, score)
_STREAM_BLOCK = 1 << 20  # the compact reader reads this much of the file at a time
_GZIP_RATIO = 1032  # deflate expands at most ~1032-fold: a bound on a gzip file's text


class _Unusual(Exception):
    """What the compact reader leaves to the usual one (which reports any error with its line)."""


class _BlockReader:
    """A file's bytes (gunzipped where they are gzip) a block of whole lines at a time: the text is
    never held whole.  Raises :class:`_Unusual` at a carriage return, as the compiled reader's layout
    check returns None on one."""

    def __init__(self, fh) -> None:
        self.fh, self.buf, self.pos, self.eof = fh, b"", 0, False

    def fill(self) -> bool:
        """Append a block to the unread bytes; False at the end of the file."""
        if self.eof:
            return False
        data = self.fh.read(_STREAM_BLOCK)
        if not data:
            self.eof = True
            return False
        if b"\r" in data:
            raise _Unusual
        self.buf = self.buf[self.pos:] + data
        self.pos = 0
        return True

    def line(self) -> Optional[bytes]:
        """The next line with its newline (the file's last may lack one); None at the end."""
        while True:
            nl = self.buf.find(b"\n", self.pos)
            if nl >= 0:
                line, self.pos = self.buf[self.pos:nl + 1], nl + 1
                return line
            if not self.fill():
                if self.pos < len(self.buf):
                    line, self.pos = self.buf[self.pos:], len(self.buf)
                    return line
                return None

    def section(self, fast):
        """(buf, start, end) spans of whole lines, up to the line that starts with a backslash (left
        unread: the next section's header or \\end\\)."""
        while True:
            end = fast.section_end(self.buf, self.pos)
            if end < len(self.buf):
                if end > self.pos:
                    yield self.buf, self.pos, end
                self.pos = end
                return
            last = self.buf.rfind(b"\n", self.pos) + 1
            if last > self.pos:
                yield self.buf, self.pos, last
                self.pos = last
            if not self.fill():
                raise _Unusual  # the file ends inside a section: no \end\

    def rest(self) -> bytes:
        while self.fill():
            pass
        return self.buf[self.pos:]


def read_arpa_compact(path: os.PathLike | str, **kwargs):
    """The ARPA file's :class:`~ngramlm.tables.NgramTables` in the compact form a scorer needs
    (:class:`~ngramlm.scorer.CompactScorer`), read a block of lines at a time; None where that does not
    apply -- no compiled extension, or a file the compiled reader would not take or that does not list
    its n-grams in key order (this toolkit's files do; KenLM's and SRILM's do not): the caller then
    reads it with :func:`read_arpa_tables`, which names the line of any error.

    For ``ngramlm ppl``/``score``: a file's text is never held whole (the usual reader holds it, 94 MB
    for the PTB 5-gram), each order's keys are held as :class:`~ngramlm.scorer.SplitKeys`, its
    probabilities as a :class:`~ngramlm.scorer.PackedColumn` and its back-offs as a
    :class:`~ngramlm.scorer.BookColumn` (each float64 where its numbers do not fit that form), so every
    lookup and every value -- hence every score -- is what the usual tables give: the PTB 5-gram's
    tables take 21 MB instead of 50."""
    from .. import accel

    fast = accel.fast
    if fast is None or not hasattr(fast, "parse_packed"):
        return None
    import gzip
    import zlib

    try:
        with open(os.fspath(path), "rb") as raw_fh:
            gz = raw_fh.read(2) == b"\x1f\x8b"
            size = os.fstat(raw_fh.fileno()).st_size
            raw_fh.seek(0)
            if gz:
                with gzip.GzipFile(fileobj=raw_fh, mode="rb") as fh:
                    return _read_compact(_BlockReader(fh), size * _GZIP_RATIO, path, fast, **kwargs)
            return _read_compact(_BlockReader(raw_fh), size, path, fast, **kwargs)
    except (_Unusual, OSError, EOFError, zlib.error, UnicodeDecodeError, MemoryError):
        # Unreadable, corrupt gzip data, not UTF-8, anything unusual: the usual reader says what is wrong.
        return None


def _read_compact(reader: _BlockReader, max_bytes: int, path, fast, *, unk_token: str = "<unk>",
                  bos_token: str = "<s>", eos_token: str = "</s>"):
    """The compact reader's steps, each check the one :func:`_fast_layout` and :func:`_read_arpa_fast`
    make (raising :class:`_Unusual` where they return None), so it takes what the compiled reader
    takes, less the files not in key order; ``max_bytes`` bounds the text (against absurd counts)."""
    # The header: comment or blank lines, then \data\ on a line of its own (as _fast_layout checks).
    head = []
    first = True
    while True:
        line = reader.line()
        if line is None:
            raise _Unusual
        if first and line.startswith(b"\xef\xbb\xbf"):
            line = line[3:]
        first = False
        if line == b"\\data\\\n":
            break
        if line.endswith(b"\\data\\\n"):
            raise _Unusual
        head.append(line)
    head_text = b"".join(head).decode("utf-8").split("\n") if head else []
    if any(h.strip() and not h.startswith("#") for h in head_text):
        raise _Unusual
    declared = []
    while True:
        line = reader.line()
        if line is None or not line.endswith(b"\n"):
            raise _Unusual
        if not line.startswith(b"ngram "):
            break
        try:
            k_s, c_s = line[6:-1].split(b"=")
            k, c = int(k_s), int(c_s)
        except ValueError:
            raise _Unusual from None
        if k != len(declared) + 1 or c < 0 or k > MAX_ORDER:
            raise _Unusual
        declared.append(c)
    order = len(declared)
    if not order or 4 * sum(declared) > max_bytes + 4 * order:  # a line takes at least 4 bytes ("0\ta\n")
        raise _Unusual
    while line == b"\n":
        line = reader.line()
    if line != b"\\1-grams:\n":
        raise _Unusual
    ubuf = b"".join([buf[a:b] for buf, a, b in reader.section(fast)])
    got = fast.parse_unigrams(ubuf, 0, len(ubuf), declared[0], order == 1)
    if got is None:
        raise _Unusual
    probs, bos, wstart, wlen = got
    uni_words = [ubuf[a:a + n].decode("utf-8") for a, n in zip(wstart.tolist(), wlen.tolist())]
    if "<pad>" in uni_words:
        raise _Unusual
    vocab = arpa_vocab(uni_words, unk_token, bos_token, eos_token)
    V = len(vocab.itos_)
    uni_ids = np.fromiter(map(vocab.stoi_.__getitem__, uni_words), dtype=np.int64, count=len(uni_words))
    words = fast.WordTable(ubuf, wstart, wlen, uni_ids)
    if words.duplicate >= 0:
        raise _Unusual
    keys, lp, bo = _unigram_rows(V, uni_ids, probs, bos, unk_token in uni_words)
    del probs, bos, wstart, wlen
    keys_l, lp_l, bo_l = [keys], [lp], [bo if order > 1 else np.zeros(0)]
    lower = [None]  # per order: its split keys as (bnd, lo), which the context walk searches
    for k in range(2, order + 1):
        if reader.line() != f"\\{k}-grams:\n".encode():
            raise _Unusual
        split, lp_col, bo_col = _compact_section(reader, fast, k, k == order, declared[k - 1],
                                                 declared[k - 2] if k > 2 else V, V, words, lower)
        lower.append((split.bnd, split.lo))
        keys_l.append(split)
        lp_l.append(lp_col)
        bo_l.append(np.zeros(0) if bo_col is None else bo_col)
        del lp_col, bo_col
    if reader.rest().strip() != b"\\end\\":
        raise _Unusual
    del lower, words
    recorded = _apply_meta(head_text, len(head_text), vocab, path)  # last, as the compiled reader does
    return arpa_tables(vocab, keys_l, lp_l, bo_l, declared, path, recorded, uni_words=uni_words)


def _compact_section(reader: _BlockReader, fast, k: int, top: bool, n: int, n_ctx: int, V: int, words, lower):
    """The k-gram section (k >= 2) as (split keys, probabilities, back-offs or None).  Probabilities are
    packed (uint32) until one does not pack, then float64; back-offs are places in a book of the
    distinct ones (uint16) until there are too many, then packed, then float64: each column changes
    form where that happens, the rows read so far converted, so the values are always the same."""
    from ..scorer import BookColumn, PackedColumn, SplitKeys

    lo = np.empty(n, dtype=np.uint32)
    bnd = np.zeros(((n_ctx * V - 1) >> 32) + 2 if n_ctx * V else 1, dtype=np.int64)  # a key is < n_ctx * V
    lp = [np.empty(n, dtype=np.uint32), None]  # packed, wide
    # back-offs: [places in the book, the book, packed, wide]
    bo = [None] * 4 if top else [np.empty(n, dtype=np.uint16), fast.PackedBook(), None, None]
    row, prev = 0, -1
    for buf, a, b in reader.section(fast):
        while True:
            status, row, pos, prev = fast.parse_packed(buf, a, b, k, top, words, lower, V, lo, bnd, *lp, *bo, row, prev)
            if status == 0:
                break
            if status < 0:
                raise _Unusual
            if status == 1:  # a probability that does not pack: float64 from here on
                wide = np.empty(n, dtype=np.float64)
                wide[:row] = fast.packed_take(lp[0][:row])
                lp = [None, wide]
            elif status == 2:  # a back-off that does not pack
                wide = np.empty(n, dtype=np.float64)
                wide[:row] = fast.packed_take(bo[1].array())[bo[0][:row]] if bo[0] is not None else \
                    fast.packed_take(bo[2][:row])
                bo = [None, None, None, wide]
            else:  # more distinct back-offs than the book holds
                codes = np.empty(n, dtype=np.uint32)
                codes[:row] = bo[1].array()[bo[0][:row]]
                bo = [None, None, codes, None]
            a = pos
    if row != n:
        raise _Unusual
    bnd[(prev >> 32) + 1 if prev >= 0 else 0:] = n
    lp_col = PackedColumn(lp[0]) if lp[0] is not None else lp[1]
    if top:
        bo_col = None
    elif bo[0] is not None:
        bo_col = BookColumn(fast.packed_take(bo[1].array()), bo[0])
    else:
        bo_col = PackedColumn(bo[2]) if bo[2] is not None else bo[3]
    return SplitKeys(bnd, lo), lp_col, bo_col
