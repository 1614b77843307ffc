"""What a comparison run trains: one settings object, validated before anything is touched.

:class:`CompareSettings` is stored in ``run.json`` and ``results.json``, so a run can
be resumed with exactly its settings and a report re-rendered without them.  Every
check raises :class:`~corpora.errors.InputError` naming the option and the fix.

This module does not import torch.
"""
from __future__ import annotations

import math
from dataclasses import asdict, dataclass, fields
from pathlib import Path
from typing import Optional

from corpora.errors import InputError

# Every smoother whose perplexity means something (stupid backoff is not a distribution).
DEFAULT_SMOOTHERS = ("mle", "laplace", "wb", "jm", "katz", "absolute", "kn", "mkn")
NEURAL_MODELS = ("lstm", "gru", "rnn_tanh", "rnn_relu", "transformer")  # neural.config.ARCHITECTURES (torch-free
# there too, but the settings load without the neural package: tests/test_layers checks the two agree)
DEFAULT_NEURAL = ("lstm", "transformer")
NEURAL_SIZES = ("tiny", "small", "default")
DEFAULT_CURVE = (0.01, 0.03, 0.1, 0.3, 1.0)


@dataclass
class CompareSettings:
    """The models and analyses of one ``ngramlm compare`` run."""

    corpus: str = "toy"  # a registered corpus name or a text file
    valid_file: Optional[str] = None  # a text-file corpus: its valid / test files (else its tail is held out)
    test_file: Optional[str] = None
    tokenizer: Optional[str] = None  # a tokenizer kind replacing the corpus's own (e.g. "char"); None: the corpus's
    tokenizers: tuple = ()  # the tokenizations section: "word" (the corpus's own), "bpe:8000", "char" ...
    # the tokenizations the neural models are also trained on (None: all of tokenizers; (): none): a
    # character model of a large corpus can need far more than the run's budget for one epoch
    neural_tokenizers: Optional[tuple] = None
    max_order: int = 5  # n-gram orders 1..max_order
    smoothers: tuple = DEFAULT_SMOOTHERS
    neural: tuple = DEFAULT_NEURAL  # () for --neural none
    neural_minutes: Optional[float] = 1.5  # wall-clock training budget per neural model (0.6 left the toy Transformer under one epoch)
    neural_epochs: Optional[int] = None  # or: a fixed number of epochs (then neural_minutes is None)
    neural_size: str = "small"  # tiny | small | default (the `neural train` defaults)
    checkpoints: tuple = ()  # neural checkpoints trained elsewhere, scored instead of training that model
    curve: tuple = DEFAULT_CURVE  # learning-curve training-set fractions
    curve_minutes: Optional[float] = None  # neural budget per curve point [default: neural_minutes / 4]
    curve_smoother: str = "mkn"  # the count models of the learning curves: <smoother>-3 and <smoother>-5
    passage_tokens: int = 40  # longest passage of the per-token and attention views
    toy_train_tokens: Optional[int] = None  # toy corpus only: smaller splits for quick runs
    toy_eval_tokens: Optional[int] = None
    seed: int = 1234
    threads: int = 1  # torch.set_num_threads (see `ngramlm compare --help`)
    seq2seq_minutes: Optional[float] = None  # parallel corpora: budget per translator [default: the neural budget]
    beams: tuple = (1, 2, 3, 4, 5)  # parallel corpora: beam sizes of the BLEU table (1 = greedy)
    fusion: bool = True  # parallel corpora: BLEU with shallow fusion of the best target-side n-gram
    fusion_lm: Optional[str] = None  # ... or of this model file
    fusion_weight: Optional[float] = None  # ... with this weight [default: tuned by greedy BLEU on valid]
    ladder: bool = False  # the ladder section: cache, dynamic evaluation and count mixtures on each neural model
    prune_curve: bool = True  # the pruning section: the best back-off model pruned to 50/10/1 % of its n-grams

    # ------------------------------------------------------------------ derived
    @property
    def curve_orders(self) -> tuple:
        return tuple(sorted({min(3, self.max_order), min(5, self.max_order)}))

    def curve_budget(self) -> dict:
        """The neural budget of one learning-curve point: ``{"minutes": m}`` or ``{"epochs": e}``."""
        if self.neural_epochs is not None:
            return {"epochs": self.neural_epochs}
        minutes = self.curve_minutes if self.curve_minutes is not None else self.neural_minutes / 4.0
        return {"minutes": minutes}

    def main_budget(self) -> dict:
        if self.neural_epochs is not None:
            return {"epochs": self.neural_epochs}
        return {"minutes": self.neural_minutes}

    def seq2seq_budget(self) -> dict:
        """A translator's budget: ``--seq2seq-minutes`` when given, else the neural models' budget."""
        if self.seq2seq_minutes is not None:
            return {"minutes": self.seq2seq_minutes}
        return self.main_budget()

    # ------------------------------------------------------------------ checks
    def validate(self) -> "CompareSettings":
        from ngramlm.counts import MAX_ORDER
        from ngramlm.smoothing import make_smoother

        if not isinstance(self.max_order, int) or isinstance(self.max_order, bool) or not 1 <= self.max_order <= MAX_ORDER:
            raise InputError(f"--max-order must be an integer from 1 to {MAX_ORDER}, got {self.max_order!r}",
                             fix="use e.g. --max-order 5")
        from corpora.tokenize import parse_tokenizer

        if self.tokenizer is not None:
            parse_tokenizer(self.tokenizer)  # an unknown kind or a bad size: InputError naming the choices
            if self.corpus == "toy":
                raise InputError("--tokenizer does not apply to the toy corpus: it is generated as tokens",
                                 fix="drop --tokenizer, or compare on a text corpus such as timemachine")
        for tk in self.neural_tokenizers or ():
            if tk not in self.tokenizers:
                raise InputError(f"--neural-tokenizers names {tk!r}, which is not one of --tokenizers "
                                 f"({','.join(self.tokenizers) or 'none given'})",
                                 fix="list a subset of --tokenizers, e.g. --tokenizers word,bpe:8000,char "
                                     "--neural-tokenizers word,bpe:8000")
        for tk in self.tokenizers:
            if tk != "word":
                parse_tokenizer(tk)
            if self.corpus == "toy":
                raise InputError("--tokenizers does not apply to the toy corpus: it is generated as tokens",
                                 fix="compare tokenizations on a text corpus, e.g. `compare ptb --tokenizers word,bpe:8000,char`")
        if not self.smoothers:
            raise InputError("no smoothers given", fix=f"pass e.g. --smoothers {','.join(DEFAULT_SMOOTHERS)}")
        for s in self.smoothers:
            make_smoother(s)  # raises "unknown smoother" with the list of names
        make_smoother(self.curve_smoother)
        for m in self.neural:
            if m not in NEURAL_MODELS:
                raise InputError(f"unknown neural model {m!r}",
                                 fix=f"use a comma-separated list of {', '.join(NEURAL_MODELS)}, or 'none'")
        if len(set(self.neural)) != len(self.neural):
            raise InputError(f"a neural model is listed twice: {','.join(self.neural)}", fix="list each model once")
        if self.neural_size not in NEURAL_SIZES:
            raise InputError(f"unknown neural size {self.neural_size!r}", fix=f"use one of {', '.join(NEURAL_SIZES)}")
        for c in self.checkpoints:
            if not Path(c).is_file():
                raise InputError("no such checkpoint file", path=c,
                                 fix="pass the .pt file written by `ngramlm neural train` (or benchmarks/bench_neural.py)")
        if len(set(self.checkpoints)) != len(self.checkpoints):
            raise InputError("a --checkpoint is given twice", fix="give each checkpoint once")
        if self.neural_epochs is not None and self.neural_minutes is not None:
            raise InputError("--neural-minutes and --neural-epochs both given",
                             fix="give a time budget or an epoch budget, not both")
        if self.neural_epochs is None and self.neural_minutes is None:
            raise InputError("no neural budget", fix="pass --neural-minutes X or --neural-epochs E")
        if self.neural_epochs is not None and (not isinstance(self.neural_epochs, int) or self.neural_epochs < 1):
            raise InputError(f"--neural-epochs must be a positive integer, got {self.neural_epochs!r}",
                             fix="train at least 1 epoch, or pass --neural none")
        for name in ("neural_minutes", "curve_minutes", "seq2seq_minutes"):
            v = getattr(self, name)
            if v is not None and not (isinstance(v, (int, float)) and math.isfinite(v) and v > 0):
                option = "--" + name.replace("_", "-")
                raise InputError(f"{option} must be more than 0 minutes, got {v!r}",
                                 fix=f"give a positive budget such as {option} 0.5, or pass --neural none")
        if not self.beams or any(not isinstance(k, int) or isinstance(k, bool) or not 1 <= k <= 20 for k in self.beams):
            raise InputError(f"--beams must list beam sizes from 1 to 20, got {list(self.beams)!r}",
                             fix="use e.g. --beams 1,2,3,4,5")
        for f in self.curve:
            if not (isinstance(f, (int, float)) and 0 < f <= 1):
                raise InputError(f"learning-curve fraction {f!r} is not in (0, 1]", fix="use e.g. --curve 0.01,0.1,1")
        if not isinstance(self.passage_tokens, int) or self.passage_tokens < 4:
            raise InputError(f"--passage-tokens must be at least 4, got {self.passage_tokens!r}",
                             fix="use e.g. --passage-tokens 40")
        for name in ("toy_train_tokens", "toy_eval_tokens"):
            v = getattr(self, name)
            if v is not None:
                if self.corpus != "toy":
                    raise InputError(f"--{name.replace('_', '-')} applies to the toy corpus only",
                                     fix="drop it, or compare on the toy corpus")
                if not isinstance(v, int) or v < 100:
                    raise InputError(f"--{name.replace('_', '-')} must be at least 100 tokens, got {v!r}",
                                     fix="use e.g. 20000")
        if not isinstance(self.threads, int) or self.threads < 1:
            raise InputError(f"--threads must be a positive integer, got {self.threads!r}", fix="use e.g. --threads 2")
        return self

    # ------------------------------------------------------------------ (de)serialising
    def to_dict(self) -> dict:
        d = asdict(self)
        for k, v in d.items():
            if isinstance(v, tuple):
                d[k] = list(v)
        return d

    @classmethod
    def from_dict(cls, data: dict) -> "CompareSettings":
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(data) - known)
        if unknown:
            raise InputError(f"unknown compare settings: {', '.join(unknown)}",
                             fix="the run was written by another version of the toolkit; start a new --out")
        kw = {k: tuple(v) if isinstance(v, list) else v for k, v in data.items()}
        return cls(**kw)


# ---------------------------------------------------------------------------- presets
def quick_settings(**overrides) -> CompareSettings:
    """A run of a few seconds: small toy splits, orders 1-3, tiny neural models, one epoch."""
    base = dict(corpus="toy", max_order=3, smoothers=("mle", "wb", "kn", "mkn"), neural=DEFAULT_NEURAL,
                neural_minutes=None, neural_epochs=1, neural_size="tiny", curve=(0.1, 0.3, 1.0),
                passage_tokens=24, toy_train_tokens=20_000, toy_eval_tokens=4_000, threads=1)
    base.update(overrides)
    return CompareSettings(**base)


def parse_list(text: Optional[str]) -> tuple:
    """``"a, b,c"`` -> ``("a", "b", "c")``."""
    if text is None:
        return ()
    return tuple(t.strip() for t in text.split(",") if t.strip())


def parse_fractions(text: str) -> tuple:
    """``1%,10%,100%`` or ``0.01,0.1,1`` -> fractions; ``none`` -> () (no learning curves)."""
    if text.strip().lower() == "none":
        return ()
    out = []
    for t in parse_list(text):
        try:
            v = float(t.rstrip("%")) / (100.0 if t.endswith("%") else 1.0)
        except ValueError:
            raise InputError(f"learning-curve fraction {t!r} is not a number", fix="use e.g. --curve 1%,10%,100%") from None
        out.append(v)
    return tuple(out)

