"""Configuration dataclasses for the neural language models and their training.

Each model is rebuilt from its config alone (``build_model(kind, config_dict)``), so
a checkpoint stores the config as a plain dict next to the weights.  Validation
happens in ``validate()`` -- called by the models' constructors -- and raises
:class:`~corpora.errors.InputError` with a fix, never an ``assert``.

This module does not import torch.
"""
from __future__ import annotations

import typing
from dataclasses import asdict, dataclass, fields, replace
from typing import Optional

from corpora.errors import InputError

CELLS = ("rnn_tanh", "rnn_relu", "lstm", "gru")
IMPLS = ("fused", "scratch")
MODEL_NAMES = CELLS + ("transformer",)
POSITIONALS = ("sinusoidal", "learned", "relative")  # the Transformer LM's (the translator has the first two)


def check_positive(name: str, value: object, option: str) -> None:
    if not isinstance(value, int) or isinstance(value, bool) or value < 1:
        raise InputError(f"{name} must be a positive integer, got {value!r}", fix=f"pass {option} 1 or more")


def check_probability(name: str, value: object, option: str) -> None:
    if not isinstance(value, (int, float)) or not 0.0 <= float(value) < 1.0:
        raise InputError(f"{name} must be in [0, 1), got {value!r}", fix=f"pass {option} between 0 and 0.9")


def _check_recurrent(cfg) -> None:
    """The fields recurrent configs share: cell, implementation, sizes, depth, dropout."""
    if cfg.cell not in CELLS:
        raise InputError(f"unknown recurrent cell {cfg.cell!r}", fix=f"use one of {', '.join(CELLS)}")
    if cfg.impl not in IMPLS:
        raise InputError(f"unknown implementation {cfg.impl!r}", fix=f"use one of {', '.join(IMPLS)}")
    check_positive("emb_size", cfg.emb_size, "--emb-size")
    check_positive("hidden_size", cfg.hidden_size, "--hidden-size")
    check_positive("n_layers", cfg.n_layers, "--layers")
    check_probability("dropout", cfg.dropout, "--dropout")


def check_transformer(cfg, length: str, length_option: str, positionals: tuple = ("sinusoidal", "learned")) -> None:
    """The fields the Transformer configs share (the LM's and the translator's): sizes, the longest input
    (the field ``length``, set by ``length_option``), dropout, heads dividing the width, positions (one of
    ``positionals``), attention."""
    check_positive("d_model", cfg.d_model, "--d-model")
    check_positive("n_layers", cfg.n_layers, "--layers")
    check_positive("n_heads", cfg.n_heads, "--heads")
    check_positive("d_ff", cfg.d_ff, "--d-ff")
    check_positive(length, getattr(cfg, length), length_option)
    check_probability("dropout", cfg.dropout, "--dropout")
    if cfg.d_model % cfg.n_heads:
        raise InputError(
            f"--heads {cfg.n_heads} does not divide --d-model {cfg.d_model}: "
            "each head gets d_model / n_heads dims",
            fix=f"choose heads among the divisors of {cfg.d_model}, e.g. {_divisor_hint(cfg.d_model)}",
        )
    if cfg.positional not in positionals:
        raise InputError(f"unknown positional encoding {cfg.positional!r}",
                         fix=f"use {', '.join(positionals[:-1])} or {positionals[-1]}")
    if cfg.attention not in ("sdpa", "scratch"):
        raise InputError(f"unknown attention implementation {cfg.attention!r}", fix="use sdpa or scratch")


def _divisor_hint(n: int) -> str:
    return ", ".join(str(d) for d in range(1, min(n, 16) + 1) if n % d == 0)


class ConfigBase:
    """Shared helpers: plain-dict round trip that rejects unknown keys."""

    def to_dict(self) -> dict:
        return asdict(self)  # type: ignore[call-overload]

    @classmethod
    def from_dict(cls, data: dict):
        known = {f.name for f in fields(cls)}  # type: ignore[arg-type]
        unknown = sorted(set(data) - known)
        if unknown:
            raise InputError(
                f"unknown {cls.__name__} keys: {', '.join(unknown)}",
                fix="the checkpoint was written by a newer version of the toolkit; upgrade it",
            )
        return cls(**data)


@dataclass
class RNNConfig(ConfigBase):
    """A recurrent LM: embedding -> stacked RNN/LSTM/GRU -> linear over the vocabulary."""

    vocab_size: int  # ids incl. specials (len(vocab)); the output predicts vocab_size - 2 types
    cell: str = "lstm"  # rnn_tanh | rnn_relu | lstm | gru
    impl: str = "fused"  # fused: nn.LSTM & co (oneDNN kernels); scratch: the textbook equations in Python
    emb_size: int = 200  # word embedding width
    hidden_size: int = 200  # recurrent state width per layer
    n_layers: int = 2
    dropout: float = 0.2  # on the embeddings, between layers and before the output layer
    tie_weights: bool = True  # share the embedding and output matrices (Press & Wolf 2017; Inan et al. 2017)
    gru_reset: str = "after"  # where the GRU reset gate acts; "before" (textbook) exists only in scratch
    # AWD-LSTM's regularisers (neural.regularize); all off by default, i.e. word_language_model's model.
    locked_dropout: bool = False  # one dropout mask per sequence, shared across time (variational dropout)
    dropout_in: Optional[float] = None  # dropout on the embeddings (None: `dropout`)
    emb_dropout: float = 0.0  # drop whole word types from the embedding matrix per batch
    weight_drop: float = 0.0  # DropConnect on the hidden-to-hidden matrices (fused impl only)

    @property
    def regularised(self) -> bool:
        """Whether the per-layer module stack of neural.regularize is needed."""
        return self.locked_dropout or self.weight_drop > 0

    def validate(self) -> None:
        check_positive("vocab_size", self.vocab_size, "a vocabulary with")
        _check_recurrent(self)
        if self.dropout_in is not None:
            check_probability("dropout_in", self.dropout_in, "--dropout-in")
        check_probability("emb_dropout", self.emb_dropout, "--emb-dropout")
        check_probability("weight_drop", self.weight_drop, "--weight-drop")
        if self.regularised and self.impl != "fused":
            raise InputError("locked dropout and weight drop are built on the fused kernels (--impl fused)",
                             fix="use --impl fused, or drop --locked-dropout/--weight-drop for the scratch cells")
        if self.tie_weights and self.emb_size != self.hidden_size:
            raise InputError(
                f"tied weights need emb_size == hidden_size (got {self.emb_size} and {self.hidden_size}): "
                "the output layer reuses the embedding matrix",
                fix="pass equal --emb-size and --hidden-size, or --no-tie",
            )
        if self.gru_reset not in ("after", "before"):
            raise InputError(f"gru_reset must be 'after' or 'before', got {self.gru_reset!r}", fix="use 'after'")
        if self.gru_reset == "before" and (self.cell != "gru" or self.impl != "scratch"):
            raise InputError(
                "gru_reset='before' (the textbook GRU) exists only for --model gru --impl scratch",
                fix="use --impl scratch, or the default gru_reset='after' which the fused GRU computes",
            )


@dataclass
class TransformerConfig(ConfigBase):
    """A decoder-only Transformer LM with pre-norm blocks."""

    vocab_size: int
    d_model: int = 256  # width of the residual stream (= embedding width)
    n_layers: int = 4
    n_heads: int = 4  # must divide d_model
    d_ff: int = 1024  # hidden width of the feed-forward block
    block_size: int = 128  # longest context the model attends over (positions 0 .. block_size-1)
    dropout: float = 0.3
    positional: str = "learned"  # learned | sinusoidal | relative (a learned bias per head and distance bucket, T5's)
    attention: str = "sdpa"  # sdpa: torch's scaled_dot_product_attention; scratch: explicit masked softmax
    tie_weights: bool = True
    # positional="relative" only (neural.transformer.relative_bucket): distances below rel_buckets // 2 get a
    # bucket each, the rest log-spaced buckets, the last holding all from about rel_max_distance on -- T5's
    # values with the default window (32 / 128).  None: the block size (at least rel_buckets), so that the last
    # bucket is trained and holds every longer distance of a wider window; fixed when the model is built.
    rel_buckets: int = 32
    rel_max_distance: Optional[int] = None

    def validate(self) -> None:
        check_positive("vocab_size", self.vocab_size, "a vocabulary with")
        check_transformer(self, "block_size", "--block-size", positionals=POSITIONALS)
        if self.positional == "relative":
            given = [("rel_buckets", self.rel_buckets, TransformerConfig.rel_buckets)]
            if self.rel_max_distance is not None:
                given.append(("rel_max_distance", self.rel_max_distance, "None, the block size"))
            for name, value, default in given:
                if not isinstance(value, int) or isinstance(value, bool) or value < 2:
                    raise InputError(f"{name} must be an integer of 2 or more, got {value!r}",
                                     fix=f"set {name} (a TransformerConfig field) to 2 or more (default: {default})")
            if self.rel_max_distance is not None and self.rel_max_distance < self.rel_buckets:
                raise InputError(
                    f"rel_max_distance {self.rel_max_distance} is below rel_buckets {self.rel_buckets}: the "
                    "log-spaced buckets would cover fewer distances than there are buckets",
                    fix=f"set rel_max_distance to {self.rel_buckets} or more (or None: the block size), "
                        "or fewer rel_buckets")

    def to_dict(self) -> dict:
        # The relative-position fields are stored only where they are used: the config of a learned or
        # sinusoidal model (its checkpoint, a report's cache key) is the dict it was before they existed.
        d = super().to_dict()
        if self.positional != "relative":
            del d["rel_buckets"], d["rel_max_distance"]
        return d


@dataclass
class Seq2SeqConfig(ConfigBase):
    """An encoder-decoder translator: bidirectional RNN encoder, RNN decoder, optional additive attention."""

    vocab_size: int  # target ids incl. specials; the output predicts vocab_size - 2 types (as the LMs)
    src_vocab_size: int  # source ids incl. specials
    cell: str = "gru"  # gru | lstm | rnn_tanh | rnn_relu, for encoder and decoder
    impl: str = "fused"  # fused: nn.GRU & co per direction; scratch: the textbook equations (neural.cells)
    emb_size: int = 256
    hidden_size: int = 256  # per direction in the encoder; the decoder's state width
    n_layers: int = 2  # encoder and decoder depth
    dropout: float = 0.2
    attention: bool = True  # additive (Bahdanau) attention; False: the context is the encoder's final state
    attn_size: int = 256  # width of the additive attention's hidden layer

    def validate(self) -> None:
        check_positive("vocab_size", self.vocab_size, "a target vocabulary with")
        check_positive("src_vocab_size", self.src_vocab_size, "a source vocabulary with")
        _check_recurrent(self)
        check_positive("attn_size", self.attn_size, "--attn-size")
        if not isinstance(self.attention, bool):
            raise InputError(f"attention must be true or false, got {self.attention!r}", fix="use --attention/--no-attention")


@dataclass
class TrainConfig(ConfigBase):
    """How a model is trained.  Stored in the checkpoint so a resumed run continues identically."""

    epochs: int = 10
    batch_size: int = 20  # rows per minibatch
    bptt: int = 35  # tokens per row per minibatch (truncated-BPTT length / Transformer training length)
    batch_scheme: str = "sequential"  # sequential: carry state across batches; random: random offsets, fresh state
    optimizer: str = "sgd"  # sgd | adamw
    lr: float = 20.0
    momentum: float = 0.0  # SGD only
    weight_decay: float = 0.0
    clip: float = 0.25  # max global gradient norm (0 = no clipping)
    schedule: str = "plateau"  # plateau: lr *= decay when valid ppl does not improve; cosine: warmup + cosine; constant
    lr_decay: float = 0.25  # plateau factor
    plateau_threshold: float = 0.0  # an epoch "improves" only if valid ppl < best * (1 - threshold)
    warmup_steps: int = 0  # cosine: linear warmup steps
    min_lr_ratio: float = 0.1  # cosine: final lr = lr * min_lr_ratio
    patience: int = 3  # early stopping: epochs without improvement of the validation ppl (0 = never stop early)
    seed: int = 1234
    time_budget: Optional[float] = None  # minutes; stop (evaluate + checkpoint) when exceeded
    eval_batch_size: int = 1  # rows in the evaluation pass (1 = every token sees its whole history)
    max_batches: Optional[int] = None  # stop an epoch after this many batches (--dry-run uses 1)
    bf16: bool = False  # bfloat16 autocast for matmuls (CPU: needs AVX512-BF16/AMX to pay off)
    checkpoint_minutes: float = 10.0  # also write the checkpoint mid-epoch this often (kill -9 safety)
    ar: float = 0.0  # activation regularisation: ar * mean(h^2) of the last layer's dropped outputs (RNNs)
    tar: float = 0.0  # temporal AR: tar * mean((h[t+1] - h[t])^2) of its undropped outputs (RNNs)
    average: str = "none"  # "nt": at the first validation without improvement, start averaging the weights (NT-ASGD)
    # With a time budget, start averaging at this fraction of it at the latest: a budget run may end
    # before the validation perplexity stalls, and the average is what anneals it (None: only NT's trigger).
    average_after: Optional[float] = None

    def validate(self) -> None:
        check_positive("epochs", self.epochs, "--epochs")
        check_positive("batch_size", self.batch_size, "--batch-size")
        check_positive("bptt", self.bptt, "--bptt")
        check_positive("eval_batch_size", self.eval_batch_size, "--eval-batch-size")
        if self.batch_scheme not in ("sequential", "random"):
            raise InputError(f"unknown batch scheme {self.batch_scheme!r}", fix="use sequential or random")
        if self.optimizer not in ("sgd", "adamw"):
            raise InputError(f"unknown optimizer {self.optimizer!r}", fix="use sgd or adamw")
        if self.average not in ("none", "nt"):
            raise InputError(f"unknown weight averaging {self.average!r}", fix="use none or nt")
        if self.average_after is not None and not 0.0 <= self.average_after < 1.0:
            raise InputError(f"--average-after must be a fraction of the time budget in [0, 1), got {self.average_after}",
                             fix="use e.g. 0.6")
        for name in ("ar", "tar"):
            if not getattr(self, name) >= 0:
                raise InputError(f"--{name} must be >= 0, got {getattr(self, name)}", fix=f"use e.g. --{name} 2")
        if self.schedule not in ("plateau", "cosine", "constant"):
            raise InputError(f"unknown lr schedule {self.schedule!r}", fix="use plateau, cosine or constant")
        if not self.lr > 0:
            raise InputError(f"the learning rate must be > 0, got {self.lr!r}",
                             fix="pass --lr, e.g. 20 for SGD, 1e-3 for AdamW")
        if not 0.0 < self.lr_decay <= 1.0:
            raise InputError(f"--lr-decay must be in (0, 1], got {self.lr_decay}", fix="use e.g. 0.25")
        if not 0.0 <= self.plateau_threshold < 1.0:
            raise InputError(f"plateau threshold must be in [0, 1), got {self.plateau_threshold}", fix="use e.g. 0.01")
        if self.clip < 0:
            raise InputError(f"--clip must be >= 0, got {self.clip}", fix="use 0 to disable clipping")
        if self.time_budget is not None and not self.time_budget > 0:
            raise InputError(f"--time-budget must be > 0 minutes, got {self.time_budget}", fix="omit it for no limit")
        if self.max_batches is not None:
            check_positive("max_batches", self.max_batches, "--max-batches")


# ---------------------------------------------------------------------------- presets
# The one place the neural defaults live.  `ngramlm neural train` starts from the
# "default" size and the family's training recipe; `ngramlm compare` picks a size and a
# compare recipe; benchmarks/bench_neural.py starts from the same instances.  ``vocab_size``
# is 0 in a preset: it is set from the vocabulary when a model is built (``sized()``).

def sized(config, vocab_size: int, **changes):
    """A copy of a preset config with the vocabulary size (and other fields) filled in."""
    return replace(config, vocab_size=vocab_size, **changes)


MODEL_PRESETS = {
    "tiny": {"rnn": RNNConfig(vocab_size=0, emb_size=32, hidden_size=32, n_layers=1, dropout=0.0),
             "transformer": TransformerConfig(vocab_size=0, d_model=32, n_layers=1, n_heads=2, d_ff=64,
                                              block_size=32, dropout=0.0)},
    "small": {"rnn": RNNConfig(vocab_size=0, emb_size=128, hidden_size=128, n_layers=1, dropout=0.1),
              "transformer": TransformerConfig(vocab_size=0, d_model=128, n_layers=2, n_heads=4, d_ff=512,
                                               block_size=64, dropout=0.1)},
    # word_language_model's 2 x 200 tied RNN shape (the LSTM's own default is 2 x 300, see ARCHITECTURES);
    # a 4 x 256 pre-norm Transformer (docs/neural.md).
    "default": {"rnn": RNNConfig(vocab_size=0), "transformer": TransformerConfig(vocab_size=0)},
}

# Translators (`ngramlm seq2seq train`, `compare fra-eng`); src_vocab_size is set from the data too.
SEQ2SEQ_PRESETS = {
    "tiny": Seq2SeqConfig(vocab_size=0, src_vocab_size=0, emb_size=32, hidden_size=32, n_layers=1, dropout=0.0,
                          attn_size=32),
    "small": Seq2SeqConfig(vocab_size=0, src_vocab_size=0, emb_size=128, hidden_size=128, n_layers=1, dropout=0.3,
                           attn_size=128),
    # 2 x 256 GRU, dropout 0.4: on fra-eng's 4,000 training pairs 0.3 and 0.5 did worse on both models
    # (docs/seq2seq.md); early stopping ends a run in about 4 minutes here.
    "default": Seq2SeqConfig(vocab_size=0, src_vocab_size=0, dropout=0.4),
}
# Sentence pairs train with Adam on padded minibatches of whole sentences (no BPTT).
SEQ2SEQ_TRAIN = TrainConfig(epochs=60, batch_size=64, bptt=1, batch_scheme="random", optimizer="adamw", lr=1e-3,
                            weight_decay=0.0, clip=1.0, schedule="plateau", lr_decay=0.5, plateau_threshold=0.01,
                            patience=6, eval_batch_size=256)

# How each family trains by default (`ngramlm neural train`).  Chosen from measured
# throughput on 2 CPU cores (docs/neural.md).  A Transformer's bptt is its block size.
TRAIN_PRESETS = {
    "rnn": TrainConfig(epochs=40, batch_size=20, bptt=35, batch_scheme="sequential", optimizer="sgd", lr=20.0,
                       clip=0.25, schedule="plateau", plateau_threshold=0.01, weight_decay=0.0),
    "transformer": TrainConfig(epochs=15, batch_size=32, bptt=128, batch_scheme="random", optimizer="adamw", lr=1e-3,
                               clip=1.0, schedule="cosine", warmup_steps=100, weight_decay=0.1),
}
# The default learning rate of an optimizer chosen against the family's default.
LR_BY_OPTIMIZER = {"sgd": 20.0, "adamw": 1e-3}

# `ngramlm compare` trains under a wall-clock budget, so it changes three things: the
# Transformer's rate is constant (a cosine schedule must know its length in advance;
# small models take 2e-3), validation between epochs scores 8 rows in parallel (cheap
# on small subsets; the reported numbers come from a separate full-history pass), and
# mid-epoch checkpoints come every 2 minutes.
COMPARE_TRAIN_PRESETS = {
    "rnn": replace(TRAIN_PRESETS["rnn"], eval_batch_size=8, checkpoint_minutes=2.0),
    "transformer": replace(TRAIN_PRESETS["transformer"], schedule="constant", warmup_steps=0, lr=2e-3,
                           eval_batch_size=8, checkpoint_minutes=2.0),
}


def _field_type(cls, name: str):
    hints = typing.get_type_hints(cls)
    t = hints[name]
    args = [a for a in typing.get_args(t) if a is not type(None)]
    return (args[0] if args else t), type(None) in typing.get_args(t)


def parse_override(text: str, *classes) -> tuple:
    """``"key=value"`` -> ``(key, value)`` with the value parsed as the config field's type.

    ``bf16=False`` is the bool False (not the string), ``lr=1e-3`` a float, ``time_budget=none``
    None where the field is optional.  An unknown key or a value that does not parse is an
    InputError naming the key, the type and the known keys.
    """
    key, sep, raw = text.partition("=")
    key, raw = key.strip(), raw.strip()
    owners = [c for c in classes if key in {f.name for f in fields(c)}]
    if not sep or not owners:
        known = sorted({f.name for c in classes for f in fields(c)} - {"vocab_size"})
        raise InputError(f"cannot use --set {text!r}: " + ("expected key=value" if not sep else f"unknown key {key!r}"),
                         fix=f"use one of: {', '.join(known)}")
    typ, optional = _field_type(owners[0], key)
    low = raw.lower()
    if optional and low in ("none", "null", ""):
        return key, None
    try:
        if typ is bool:
            if low in ("true", "1", "yes", "on"):
                return key, True
            if low in ("false", "0", "no", "off"):
                return key, False
            raise ValueError(raw)
        if typ is int:
            return key, int(raw)
        if typ is float:
            return key, float(raw)
        return key, raw
    except ValueError:
        raise InputError(f"--set {key}={raw}: {key} takes a {typ.__name__}", fix=(
            f"use e.g. --set {key}=true" if typ is bool else f"use e.g. --set {key}=2")) from None


# ---------------------------------------------------------------------------- architectures
@dataclass(frozen=True)
class Architecture:
    """A language-model architecture by its CLI name: the family that builds it (``build_model``'s
    kind: its config class and presets) and what the name fixes in the config.  Adding one is an entry
    in :data:`ARCHITECTURES` (and, for a new family, its config, presets and model class)."""

    name: str
    family: str  # "rnn" | "transformer"
    label: str  # the report's display name
    fixed: tuple = ()  # (field, value) pairs the name sets, e.g. (("cell", "lstm"),)
    # (size, ((field, value), ...)): what a size preset of this architecture has of its own (given
    # options still win).
    sized: tuple = ()

    def preset(self, size: str) -> dict:
        return dict(dict(self.sized).get(size, ()))


ARCHITECTURES = {a.name: a for a in (
    Architecture("rnn_tanh", "rnn", "RNN (tanh)", (("cell", "rnn_tanh"),)),
    Architecture("rnn_relu", "rnn", "RNN (ReLU)", (("cell", "rnn_relu"),)),
    # The "default" LSTM is 2 x 300 with dropout 0.35: on PTB in one CPU hour it reached test ppl 84.77
    # in 37 min (converged; valid 88.07) where word_language_model's 2 x 200 / 0.2 reached 89.37 in
    # 46 min and the AWD-LSTM preset 94.51 in 55 (docs/ladder.md).
    Architecture("lstm", "rnn", "LSTM", (("cell", "lstm"),),
                 sized=(("default", (("emb_size", 300), ("hidden_size", 300), ("dropout", 0.35))),)),
    Architecture("gru", "rnn", "GRU", (("cell", "gru"),)),
    Architecture("transformer", "transformer", "Transformer"),
)}
assert tuple(ARCHITECTURES) == MODEL_NAMES


def architecture(name: str) -> Architecture:
    if name not in ARCHITECTURES:
        raise InputError(f"unknown model {name!r}", fix=f"use one of {', '.join(ARCHITECTURES)}")
    return ARCHITECTURES[name]


RECIPES = {"train": TRAIN_PRESETS, "compare": COMPARE_TRAIN_PRESETS}
COSINE_WARMUP = TRAIN_PRESETS["transformer"].warmup_steps  # a cosine schedule's warmup where none is given


def _given(overrides: Optional[dict]) -> dict:
    return {k: v for k, v in (overrides or {}).items() if v is not None}


def resolve_lm_config(name: str, *, vocab_size: int, size: str = "default", recipe: str = "train",
                      model: Optional[dict] = None, train: Optional[dict] = None) -> tuple:
    """``(model config, TrainConfig)`` of architecture ``name``: the ``size`` preset and the ``recipe``
    (``"train"``: `neural train`'s; ``"compare"``: `compare`'s), then the overrides given (a value of
    None is "not given").  The one place presets and overrides meet, with the defaults that follow
    from other choices:

    * RNN: ``emb_size`` defaults to ``hidden_size``; Transformer: ``d_ff`` to 4 x ``d_model``, and
      ``bptt`` to the block size (a Transformer's training window is its context);
    * ``lr``: the recipe's for its optimizer, else that optimizer's default (``LR_BY_OPTIMIZER``);
      the full-size Transformer in `compare` keeps `neural train`'s rate (2e-3 is unstable there);
    * ``warmup_steps``: the recipe's for its schedule, else ``COSINE_WARMUP`` for cosine, 0 otherwise.
    """
    arch = architecture(name)
    m, t = _given(model), _given(train)
    if arch.family == "rnn" and "hidden_size" in m:
        m.setdefault("emb_size", m["hidden_size"])
    if arch.family == "transformer" and "d_model" in m:
        m.setdefault("d_ff", 4 * m["d_model"])
    mcfg = sized(MODEL_PRESETS[size][arch.family], vocab_size, **dict(arch.fixed), **{**arch.preset(size), **m})
    base = RECIPES[recipe][arch.family]
    if arch.family == "transformer":
        t.setdefault("bptt", mcfg.block_size)
    optimizer = t.setdefault("optimizer", base.optimizer)
    if optimizer != base.optimizer:
        t.setdefault("lr", LR_BY_OPTIMIZER[optimizer])
    elif recipe == "compare" and arch.family == "transformer" and size == "default":
        t.setdefault("lr", TRAIN_PRESETS["transformer"].lr)
    schedule = t.setdefault("schedule", base.schedule)
    if schedule != base.schedule:
        t.setdefault("warmup_steps", COSINE_WARMUP if schedule == "cosine" else 0)
    return mcfg, replace(base, **t)


def resolve_seq2seq_config(*, vocab_size: int, src_vocab_size: int, size: str = "default",
                           model: Optional[dict] = None, train: Optional[dict] = None) -> tuple:
    """``(Seq2SeqConfig, TrainConfig)`` of a translator: the ``size`` preset and ``SEQ2SEQ_TRAIN``, then
    the overrides given (None is "not given")."""
    mcfg = sized(SEQ2SEQ_PRESETS[size], vocab_size, src_vocab_size=src_vocab_size, **_given(model))
    return mcfg, replace(SEQ2SEQ_TRAIN, **_given(train))
