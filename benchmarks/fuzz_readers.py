"""Fuzz the readers of user files: ARPA, native ``.npz`` models, vocabulary JSON, tokenizers.

    python benchmarks/fuzz_readers.py --minutes 10                 # every target, time split evenly
    python benchmarks/fuzz_readers.py --minutes 2 --targets arpa,native --engine hypothesis

A reader may succeed or raise :class:`corpora.errors.InputError` (naming the file);
anything else is a crash.  A model that loads must also score, and a vocabulary
that loads must encode, so a reader cannot hide corruption until later.  The
native loader must never unpickle (pickle's loaders are replaced by tripwires).

Engines: ``atheris`` (coverage-guided libFuzzer for Python, ``pip install atheris``;
each target runs in its own process, seeded with valid files) or ``hypothesis``
(random and structured mutations of the same seeds, run in a loop until the time
is up).  ``auto`` uses atheris when it imports.  Crashing inputs are written under
``--out``; the run ends with a summary table (and ``summary.json`` there).
Results of the runs so far: docs/robustness.md.
"""
from __future__ import annotations

import argparse
import copy
import gzip
import io
import json
import os
import re
import subprocess
import sys
import tempfile
import time
import traceback
import unicodedata
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

TARGETS = ("arpa", "native", "native_struct", "vocab", "vocab_struct", "tokenize")
TINY = [["a", "b"], ["a"], ["b", "a"], ["c", "b", "a", "b"], ["a", "b"], ["b", "c"]]


# ----------------------------------------------------------------------------- seeds
def seeds() -> dict:
    """Valid inputs every target starts from: target -> list of bytes."""
    from corpora import TokenizerSpec, Vocab
    from ngramlm import NgramLM
    from ngramlm.io.arpa import write_arpa

    v = Vocab(tokenizer=TokenizerSpec(kind="regex", lower=True)).fit(TINY)
    out: dict = {t: [] for t in TARGETS}
    with tempfile.TemporaryDirectory() as tmp:
        for smoothing, order in (("wb", 3), ("mkn", 2), ("katz", 1)):
            kw = {"discount_fallback": (0.5, 1.0, 1.5)} if smoothing == "mkn" else {}
            if smoothing == "katz":
                kw = {"discount_fallback": True}
            lm = NgramLM(order=order, smoothing=smoothing, **kw).fit(v.encode_sentences(TINY), vocab=v)
            write_arpa(lm, Path(tmp) / "m.arpa")
            out["arpa"].append((Path(tmp) / "m.arpa").read_bytes())
        out["arpa"].append(gzip.compress(out["arpa"][0]))
        for smoothing, order in (("wb", 3), ("laplace", 2), ("stupid", 2)):
            NgramLM(order=order, smoothing=smoothing).fit(v.encode_sentences(TINY), vocab=v).save(Path(tmp) / "m.npz")
            out["native"].append((Path(tmp) / "m.npz").read_bytes())
    out["native_struct"] = [bytes(range(256)) * 2]  # choices, not a file: any bytes drive the mutations
    out["vocab"] = [(json.dumps(v.to_dict(), ensure_ascii=False) + "\n").encode("utf-8"),
                    (json.dumps(Vocab(min_count=2).fit(TINY).to_dict()) + "\n").encode("utf-8")]
    out["vocab_struct"] = [bytes(range(256)) * 2]
    out["tokenize"] = ["The cat's well-known 3.14 dogs, 1,000 café 漢字ﬁ\t\u3000x_y".encode("utf-8")]
    return out


# ----------------------------------------------------------------------------- choices
class Chooser:
    """Decisions drawn from fuzz bytes (atheris' FuzzedDataProvider or a hypothesis draw)."""

    def __init__(self, int_fn, bytes_fn, text_fn):
        self.int, self.bytes, self.text = int_fn, bytes_fn, text_fn

    def choice(self, seq):
        return seq[self.int(0, len(seq) - 1)]

    @classmethod
    def from_fdp(cls, fdp):
        return cls(lambda lo, hi: fdp.ConsumeIntInRange(lo, hi), lambda n: fdp.ConsumeBytes(n),
                   lambda n: fdp.ConsumeUnicodeNoSurrogates(n))

    @classmethod
    def from_hypothesis(cls, data):
        from hypothesis import strategies as st

        return cls(lambda lo, hi: data.draw(st.integers(lo, hi)), lambda n: data.draw(st.binary(max_size=n)),
                   lambda n: data.draw(st.text(max_size=n)))


JSON_LEAVES = [None, True, False, 0, -1, 1, 2, 10 ** 30, 1.5, float("inf"), float("nan"), -0.0, "", "x", "<unk>",
               [], {}, [1, 2], {"a": 1}, "char", "NFKC", 1e999]


def mutate_json(c: Chooser, obj):
    """Replace, delete or wrap the value at 1-3 random places of a JSON document."""
    obj = json.loads(json.dumps(obj))
    for _ in range(c.int(1, 3)):
        path = c.choice(list(json_paths(obj)))
        op = c.int(0, 3)
        # A fresh copy: a shared [] or {} mutated later would turn the document into a cycle.
        new = copy.deepcopy(c.choice(JSON_LEAVES)) if op < 2 else c.text(8)
        if not path:
            obj = new
            continue
        parent = obj
        for key in path[:-1]:
            parent = parent[key]
        if op == 3 and isinstance(parent, dict):
            del parent[path[-1]]
        elif op == 2:
            parent[path[-1]] = [parent[path[-1]]]
        else:
            parent[path[-1]] = new
    return obj


def mutate_bytes(c: Chooser, raw: bytes) -> bytes:
    b = bytearray(raw)
    for _ in range(c.int(1, 4)):
        op = c.int(0, 5)
        i = c.int(0, max(len(b) - 1, 0))
        if op == 0 and b:
            b[i] ^= 1 << c.int(0, 7)
        elif op == 1:
            b[i:i] = c.bytes(8)
        elif op == 2:
            del b[i:i + c.int(1, 16)]
        elif op == 3:
            del b[i:]
        elif op == 4:
            b[i:i] = b[i:i + c.int(1, 64)]
        elif b:
            b[i] = c.int(0, 255)
    return bytes(b)


# ----------------------------------------------------------------------------- checks
from corpora.testing import json_paths, pickle_tripwire  # noqa: E402


class Crash(Exception):
    """Raised by a check when an invariant fails (a crash in the report)."""


def _unpickled() -> None:
    raise Crash("the native loader unpickled something")


def no_pickle():
    return pickle_tripwire(on_use=_unpickled)


def _usable_model(lm) -> None:
    import numpy as np

    enc, oov = lm.encode([["a", "b", "c"], ["zzz", "a"], []])
    s = lm.token_scores(enc, oov=oov)
    if len(s) != enc.n_tokens or np.isnan(s.log10_prob).any():
        raise Crash("a loaded model scores NaN or the wrong number of tokens")
    # perplexity_report once overflowed (OverflowError) on very negative log10 probabilities:
    # found by this fuzzer, fixed in ngramlm/model.py.
    lm.perplexity_report(enc, oov=oov)
    lm.next_probs(["<s>", "a"])


def _usable_vocab(v) -> None:
    from corpora import Vocab

    n = len(v)
    if n < 4 or v.decode(range(n)) != v.itos_:
        raise Crash("a loaded vocabulary does not decode its own ids")
    v.encode(list(v.itos_) + ["zzz"])
    v.stats(), v.coverage(3)
    Vocab.from_dict(v.to_dict())


def _with_file(raw: bytes, name: str, fn):
    from corpora.errors import InputError

    with tempfile.TemporaryDirectory(dir=os.environ.get("FUZZ_TMP")) as tmp:
        path = Path(tmp) / name
        path.write_bytes(raw)
        try:
            return fn(path), None
        except InputError as exc:
            if str(path) not in str(exc):
                raise Crash(f"the InputError does not name the file: {exc}") from None
            return None, exc


def check_arpa(raw: bytes) -> str:
    from ngramlm.io.arpa import looks_like_arpa
    from ngramlm.loading import read_arpa

    def go(path):
        if looks_like_arpa(path) not in (True, False):
            raise Crash("looks_like_arpa returned a non-bool")
        return read_arpa(path)

    lm, err = _with_file(raw, "m.arpa", go)
    if lm is not None:
        _usable_model(lm)
    return "ok" if err is None else "InputError"


def check_native(raw: bytes) -> str:
    from ngramlm.io.native import is_native
    from ngramlm.loading import load_native

    def go(path):
        if is_native(path) not in (True, False):
            raise Crash("is_native returned a non-bool")
        with no_pickle():
            return load_native(path)

    lm, err = _with_file(raw, "m.npz", go)
    if lm is not None:
        _usable_model(lm)
    return "ok" if err is None else "InputError"


ARRAY_MAKERS = ["int64", "int32", "uint8", "float64", "float32", "bool", "complex128", "<U3", "2d", "0d", "nan",
                "object", "huge"]


def native_struct(c: Chooser, native_seeds: list) -> bytes:
    """A valid zip whose arrays and metadata are corrupted (CRC checks cannot catch this)."""
    import numpy as np

    with np.load(io.BytesIO(c.choice(native_seeds)), allow_pickle=False) as z:
        arrays = {k: z[k] for k in z.files}
    for _ in range(c.int(1, 3)):
        names = sorted(arrays)
        op = c.int(0, 5)
        if op == 0 and len(names) > 1:
            a, b = c.choice(names), c.choice(names)
            arrays[a], arrays[b] = arrays[b], arrays[a]
        elif op == 1 and names:
            del arrays[c.choice(names)]
        elif op == 2 and names:
            kind, n = c.choice(ARRAY_MAKERS), c.int(0, 12)
            if kind == "2d":
                new = np.full((n, 2), -0.5)
            elif kind == "0d":
                new = np.float64(-1.0).reshape(())
            elif kind == "nan":
                new = np.array([np.nan, -np.inf, 0.5, 1e308])
            elif kind == "object":
                new = np.array([{"x": 1}, None], dtype=object)
            elif kind == "huge":
                new = np.array([2 ** 62, -5, 3], dtype=np.int64)
            else:
                new = np.arange(n).astype(kind)
            arrays[c.choice(names)] = new
        elif op == 3 and names:
            k = c.choice(names)
            if arrays[k].ndim:
                arrays[k] = arrays[k][::-1].copy()
        elif op == 4 and "meta" in arrays:
            try:
                meta = json.loads(bytes(arrays["meta"]).decode("utf-8"))
            except (ValueError, UnicodeDecodeError):
                continue
            arrays["meta"] = np.frombuffer(json.dumps(mutate_json(c, meta)).encode("utf-8"), dtype=np.uint8)
        elif op == 5:
            arrays["meta"] = np.frombuffer(c.bytes(40), dtype=np.uint8)
    buf = io.BytesIO()
    np.savez(buf, **arrays)
    return buf.getvalue()


def check_vocab(raw: bytes) -> str:
    from corpora import Vocab

    v, err = _with_file(raw, "vocab.json", Vocab.load)
    if v is not None:
        _usable_vocab(v)
    return "ok" if err is None else "InputError"


def vocab_struct(c: Chooser, vocab_seeds: list) -> bytes:
    doc = mutate_json(c, json.loads(c.choice(vocab_seeds)))
    return json.dumps(doc, ensure_ascii=False).encode("utf-8", "surrogatepass")


HAN = re.compile("[\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\U00020000-\U0002ebef]")


def check_tokenize(c: Chooser) -> str:
    """Every tokenizer on arbitrary text: no crash, no lost or invented characters."""
    from corpora.tokenize import KINDS, NORMALIZATIONS, TokenizerSpec, detokenize, make_tokenizer

    spec = TokenizerSpec(kind=c.choice(KINDS), lower=bool(c.int(0, 1)), normalize=c.choice(NORMALIZATIONS),
                         space_symbol=c.choice(["▁", "_", "·"]))
    text = c.text(200)
    tokens = make_tokenizer(spec)(text)
    src = unicodedata.normalize(spec.normalize, text) if spec.normalize else text
    src = src.lower() if spec.lower else src
    if not all(isinstance(t, str) and t and not any(ch.isspace() for ch in t) for t in tokens):
        raise Crash(f"{spec.describe()}: empty token or whitespace inside a token: {tokens!r}")
    if spec.kind == "char":
        if "".join(tokens) != spec.space_symbol.join(src.split()):
            raise Crash(f"char tokens do not spell the text: {text!r}")
    elif "".join(tokens) != "".join(ch for ch in src if not ch.isspace()):
        raise Crash(f"{spec.describe()} lost or invented characters: {text!r} -> {tokens!r}")
    if spec.kind == "cjk" and sum(1 for t in tokens if HAN.fullmatch(t)) != len(HAN.findall(src)):
        raise Crash(f"cjk: a Han character is not its own token: {text!r}")
    detokenize(tokens, spec)
    return "ok"


# ----------------------------------------------------------------------------- one input
def run_one(target: str, c: Chooser, seed_bank: dict, raw_input: bytes | None = None) -> str:
    """Build the input for ``target`` from the choices and check it."""
    if target == "tokenize":
        return check_tokenize(c)
    if target == "native_struct":
        return check_native(native_struct(c, seed_bank["native"]))
    if target == "vocab_struct":
        return check_vocab(vocab_struct(c, seed_bank["vocab"]))
    raw = raw_input if raw_input is not None else mutate_bytes(c, c.choice(seed_bank[target]))
    return {"arpa": check_arpa, "native": check_native, "vocab": check_vocab}[target](raw)


# ----------------------------------------------------------------------------- engines
def run_hypothesis(target: str, seconds: float, out: Path) -> dict:
    from hypothesis import HealthCheck, given, settings
    from hypothesis import strategies as st

    bank = seeds()
    stats = {"target": target, "engine": "hypothesis", "examples": 0, "crashes": [], "outcomes": {}}

    @settings(max_examples=200, deadline=None, database=None, suppress_health_check=list(HealthCheck))
    @given(data=st.data())
    def prop(data):
        c = Chooser.from_hypothesis(data)
        outcome = run_one(target, c, bank)
        stats["examples"] += 1
        stats["outcomes"][outcome] = stats["outcomes"].get(outcome, 0) + 1

    t_end = time.monotonic() + seconds
    while time.monotonic() < t_end:
        try:
            prop()
        except Exception as exc:  # a crash: hypothesis has shrunk it and re-raised
            tb = traceback.format_exc()
            name = f"{target}-crash-{len(stats['crashes'])}.txt"
            (out / name).write_text(tb)
            stats["crashes"].append({"type": type(exc).__name__, "message": str(exc)[:200], "file": name})
            if len(stats["crashes"]) >= 5:
                break
    stats["seconds"] = seconds
    return stats


def atheris_worker(target: str, seconds: int, out: Path) -> None:
    """Runs inside its own process: libFuzzer drives ``target`` until the time is up."""
    import atheris

    with atheris.instrument_imports(include=["ngramlm", "corpora"]):
        import corpora.tokenize  # noqa: F401
        import corpora.vocab  # noqa: F401
        import ngramlm.io.arpa  # noqa: F401
        import ngramlm.io.native  # noqa: F401
    bank = seeds()
    corpus = Path(tempfile.mkdtemp(prefix=f"fuzz-{target}-"))
    for i, s in enumerate(bank[target]):
        (corpus / f"seed{i}").write_bytes(s)

    def one_input(data: bytes) -> None:
        if target in ("arpa", "native", "vocab"):
            run_one(target, None, bank, raw_input=data)
        else:
            run_one(target, Chooser.from_fdp(atheris.FuzzedDataProvider(data)), bank)

    atheris.Setup([sys.argv[0], f"-max_total_time={seconds}", f"-artifact_prefix={out}/{target}-",
                   "-print_final_stats=1", "-rss_limit_mb=3072", "-timeout=20", str(corpus)], one_input)
    atheris.Fuzz()


def run_atheris(target: str, seconds: float, out: Path) -> dict:
    t0 = time.monotonic()
    proc = subprocess.run([sys.executable, __file__, "--worker", target, "--seconds", str(max(int(seconds), 1)),
                           "--out", str(out)], capture_output=True, text=True, timeout=seconds + 300)
    log = proc.stdout + proc.stderr
    (out / f"{target}-atheris.log").write_text(log[-200_000:])
    runs = re.findall(r"stat::number_of_executed_units:\s*(\d+)", log) or re.findall(r"Done (\d+) runs", log)
    stats = {"target": target, "engine": "atheris", "examples": int(runs[-1]) if runs else None,
             "seconds": round(time.monotonic() - t0, 1), "crashes": [], "exit": proc.returncode}
    cov = re.findall(r"cov: (\d+) ft: (\d+)", log)
    if cov:
        stats["coverage_edges"], stats["features"] = map(int, cov[-1])
    if proc.returncode != 0:
        m = re.search(r"=== Uncaught Python exception: ===\n(.*?)\n", log)
        files = sorted(p.name for p in out.glob(f"{target}-crash-*"))
        stats["crashes"].append({"type": m.group(1) if m else f"exit {proc.returncode}", "files": files,
                                 "log": f"{target}-atheris.log"})
    return stats


# ----------------------------------------------------------------------------- main
def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--minutes", type=float, default=10.0, help="total time, split evenly over the targets")
    ap.add_argument("--targets", default=",".join(TARGETS), help=f"comma-separated, from {', '.join(TARGETS)}")
    ap.add_argument("--engine", choices=["auto", "atheris", "hypothesis"], default="auto")
    ap.add_argument("--out", default=str(Path(tempfile.gettempdir()) / "ngramlm-fuzz"),
                    help="folder for crashing inputs, logs and summary.json (default: %(default)s)")
    ap.add_argument("--worker", help=argparse.SUPPRESS)
    ap.add_argument("--seconds", type=int, help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    out = out.resolve()
    if args.worker:
        atheris_worker(args.worker, args.seconds, out)
        return 0
    targets = [t for t in args.targets.split(",") if t]
    unknown = set(targets) - set(TARGETS)
    if unknown:
        ap.error(f"unknown targets {sorted(unknown)}; choose from {', '.join(TARGETS)}")
    engine = args.engine
    if engine == "auto":
        try:
            import atheris  # noqa: F401

            engine = "atheris"
        except ImportError:
            engine = "hypothesis"
    per = args.minutes * 60.0 / len(targets)
    results = []
    for t in targets:
        print(f"--- {t}: {engine}, {per:.0f} s", flush=True)
        r = run_atheris(t, per, out) if engine == "atheris" else run_hypothesis(t, per, out)
        print(json.dumps(r), flush=True)
        results.append(r)
    (out / "summary.json").write_text(json.dumps(results, indent=1))
    print(f"\n{'target':<14} {'engine':<10} {'seconds':>8} {'examples':>10}  crashes")
    for r in results:
        crashes = "; ".join(c["type"] for c in r["crashes"]) or "none"
        print(f"{r['target']:<14} {r['engine']:<10} {r['seconds']:>8.0f} {str(r['examples']):>10}  {crashes}")
    return 1 if any(r["crashes"] for r in results) else 0


if __name__ == "__main__":
    sys.exit(main())
