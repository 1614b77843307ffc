"""A network trained on an n-gram model's residual: a product of two experts.

The model's next-token distribution is

    p(w | h)  ∝  p_ngram(w | h) · exp(z_w(h)),   i.e.   log p = log_softmax(ln p_ngram(. | h) + z(h)),

where ``z`` are the logits of an ordinary network (LSTM, GRU, Transformer: any
:class:`neural.base.LanguageModel`) and ``p_ngram`` is a back-off model's full next-token distribution,
read for every position of a batch at once from its tensor form (:mod:`fusion.tensor`).  The n-gram
model is fixed; only the network learns, and what it learns is the correction the n-gram model needs
(Li et al., 2022, "Residual learning of neural text generation with n-gram language models").  Before
any training the network's logits are near zero, so the model starts at the n-gram model's
perplexity, not at the vocabulary's.

The n-gram model's tables are buffers of the module, so a checkpoint holds the whole model (the tables
in float32, their keys as int64): it is scored, resumed and sampled without the n-gram file.  Its state
is the pair ``(network state, n-gram states [B, order-1])``; the n-gram history restarts at ``<s>``
after every ``</s>`` the network reads, as the n-gram scorer starts each sentence, and a batch that
starts with no state (random minibatches) starts the n-gram history in the null context, as it
starts the network's.

Cross-fitting.  An n-gram model scored on its own training text is far surer of it than of new text
(it has seen every n-gram there), so a network trained against it learns to correct an over-sure expert
that does not exist at test time.  With ``folds = K`` the training rows (sequential batches: row ``r``
is one contiguous stretch of the text) fall in ``K`` groups, and each group is scored by an n-gram model
of the same order and smoother trained on the rest of the text (:func:`cross_fit_folds`); validation,
test and generation use the full model.  The fold models are rebuilt from the training text when a run
resumes, not stored.

This module stands above both families (``docs/architecture.md``): ``neural`` learns of the ``residual``
kind when :func:`register` is called (the ``ngramlm`` program calls it at start).
"""
from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from typing import Optional, Sequence

import numpy as np
import torch
import torch.nn.functional as F

from corpora.errors import InputError
from corpora.vocab import EOS_ID, PAD_ID, UNK_ID
from neural.base import FIRST_PREDICTED, N_UNPREDICTED, LanguageModel
from neural.config import ConfigBase

from .base import LN10, as_tensor
from .tensor import NgramTensorLM

# A word the n-gram model gives probability 0 (it cannot, for an interpolated model; a back-off model
# may give its <unk> none) would make the product 0 whatever the network says: such entries are raised
# to e^-69 (about 1e-30), so the network can still learn them.
LN_FLOOR = -69.0


@dataclass
class ResidualConfig(ConfigBase):
    """The network's kind and config, and what the n-gram buffers hold (their data is in the state dict)."""

    base_kind: str = "rnn"
    base: dict = field(default_factory=dict)
    vocab_size: int = 0  # the network's (and the model's) ids
    ngram_order: int = 1
    ngram_V: int = 0  # the n-gram model's ids (its tables are keyed by them)
    ngram_rows: list = field(default_factory=list)  # n-grams per order
    missing_backoff: float = 0.0
    ngram_source: str = ""  # the file it came from (a name only: the tables are in the checkpoint)
    ngram_sha256: str = ""  # of the tables, so two checkpoints can be told apart by their n-gram model
    unmapped: int = 0  # network words the n-gram model lacks (scored as its <unk>)
    ngram_weight: float = 1.0  # log p = log_softmax(z + ngram_weight * ln p_ngram)
    folds: int = 0  # cross-fitting: the training rows in this many groups, each scored by a model blind to it
    fold_smoothing: str = "mkn"  # the fold models' smoother (their order: ngram_order)

    def validate(self) -> None:
        if self.ngram_order < 1 or len(self.ngram_rows) != self.ngram_order:
            raise InputError(f"residual config: {len(self.ngram_rows)} n-gram orders listed for order "
                             f"{self.ngram_order}", fix="the checkpoint is corrupt; use another one")


class ResidualLM(LanguageModel):
    """``net``'s logits added to a fixed n-gram model's natural-log probabilities, then normalised."""

    kind = "residual"

    def __init__(self, config: ResidualConfig) -> None:
        super().__init__()
        from neural.models import build_model

        config.validate()
        self.config = config
        self.net = build_model(config.base_kind, dict(config.base))
        if self.net.config.vocab_size != config.vocab_size:
            raise InputError(f"residual config: the network has {self.net.config.vocab_size} ids, the model "
                             f"{config.vocab_size}", fix="the checkpoint is corrupt; use another one")
        # Empty buffers of the right shapes: load_state_dict (or from_ngram) fills them.
        for k, n in enumerate(config.ngram_rows, start=1):
            self.register_buffer(f"keys{k}", torch.zeros(n, dtype=torch.long))
            self.register_buffer(f"lp{k}", torch.zeros(n, dtype=torch.float32))
            if k < config.ngram_order:
                self.register_buffer(f"bo{k}", torch.zeros(n, dtype=torch.float32))
                self.register_buffer(f"child{k}", torch.zeros(n + 1, dtype=torch.long))
        self.register_buffer("index", torch.zeros(config.vocab_size, dtype=torch.long))  # our id -> n-gram id
        self.fold_lms: list = []  # cross-fitting's models (set_folds), used in training mode only

    # ------------------------------------------------------------------ building
    @classmethod
    def from_ngram(cls, net: LanguageModel, ngram, words: Sequence[str], *, source: str = "") -> "ResidualLM":
        """A residual model over ``net`` (untrained or not) and ``ngram`` (a model file or loaded model the
        tensor form reads); ``words``: the string of each of ``net``'s ids."""
        from ngramlm.next_table import NextTable, next_table

        table = ngram if isinstance(ngram, NextTable) else next_table(ngram)
        if not isinstance(table, NextTable):
            raise InputError(f"{source or 'the n-gram model'}: a KenLM probing binary cannot be trained against",
                             fix="give its ARPA file (or build a trie binary: build_binary trie)")
        if not table.is_distribution:
            raise InputError(f"{source or 'the n-gram model'} is not a distribution (stupid backoff's scores do "
                             f"not sum to one)", fix="train the n-gram model with mkn, kn, wb or another smoother")
        stoi = table.vocab.stoi_
        index = np.array([stoi.get(w, UNK_ID) for w in words], dtype=np.int64)
        unmapped = sum(1 for w in words[FIRST_PREDICTED:] if w not in stoi)
        arrays = []
        for k in range(1, table.order + 1):
            arrays.append(np.ascontiguousarray(table.keys[k - 1], dtype=np.int64))
            arrays.append(np.asarray(table.log10_prob[k - 1], dtype=np.float32))
            if k < table.order:
                arrays.append(np.asarray(table.log10_backoff[k - 1], dtype=np.float32))
                arrays.append(np.ascontiguousarray(table.child_start[k - 1], dtype=np.int64))
        digest = hashlib.sha256()
        for a in arrays:
            digest.update(a.tobytes())
        config = ResidualConfig(
            base_kind=net.kind, base=net.config.to_dict(), vocab_size=len(words), ngram_order=table.order,
            ngram_V=table.V, ngram_rows=[len(k) for k in table.keys], missing_backoff=float(table.missing_backoff),
            ngram_source=source or table.source, ngram_sha256=digest.hexdigest(), unmapped=unmapped)
        model = cls(config)
        model.net.load_state_dict(net.state_dict())
        with torch.no_grad():
            model.index.copy_(torch.from_numpy(index))
            for k in range(1, table.order + 1):
                getattr(model, f"keys{k}").copy_(as_tensor(table.keys[k - 1], dtype=torch.long))
                getattr(model, f"lp{k}").copy_(as_tensor(table.log10_prob[k - 1], dtype=torch.float32))
                if k < table.order:
                    getattr(model, f"bo{k}").copy_(as_tensor(table.log10_backoff[k - 1], dtype=torch.float32))
                    getattr(model, f"child{k}").copy_(as_tensor(table.child_start[k - 1], dtype=torch.long))
        return model

    def set_folds(self, lms: list) -> None:
        """The fold models of cross-fitting (``len(lms) == config.folds``): group ``g`` of a training
        batch's rows is scored by ``lms[g]``."""
        if len(lms) != self.config.folds:
            raise InputError(f"{len(lms)} fold models for {self.config.folds} folds", fix="build them with cross_fit_folds")
        self.fold_lms = list(lms)

    def ngram(self) -> NgramTensorLM:
        """The n-gram model as batched tensor operations over the buffers (where they are now)."""
        n = self.config.ngram_order
        return NgramTensorLM.from_tensors(
            [getattr(self, f"keys{k}") for k in range(1, n + 1)], [getattr(self, f"lp{k}") for k in range(1, n + 1)],
            [getattr(self, f"bo{k}") for k in range(1, n)], [getattr(self, f"child{k}") for k in range(1, n)],
            V=self.config.ngram_V, missing_backoff=self.config.missing_backoff, source=self.config.ngram_source)

    # ------------------------------------------------------------------ the n-gram expert
    def ngram_states(self, x: torch.Tensor, start: Optional[torch.Tensor], lm: NgramTensorLM, *,
                     mapped: bool = True) -> tuple:
        """The n-gram state after each input token: ([B, T, order-1], the last one).  ``mapped``: ``lm``
        has the n-gram file's ids (``index``); a fold model has the network's."""
        B, T = x.shape
        s = lm.start(B, bos=False) if start is None else start
        sentence = lm.start(B, bos=True)
        ids = self.index[x] if mapped else x
        out = []
        for t in range(T):
            s = lm.advance(s, ids[:, t])
            s = torch.where((x[:, t] == EOS_ID).unsqueeze(1), sentence, s)  # a sentence ends: <s> next
            out.append(s)
        return torch.stack(out, 1), s

    def ngram_log_probs(self, states: torch.Tensor, lm: NgramTensorLM, *, mapped: bool = True) -> torch.Tensor:
        """ln p_ngram(w | state) for every network id ``w``: [N, vocab_size] float32 (floored, see LN_FLOOR)."""
        lp = lm.log10_probs(states)
        lp = (lp[:, self.index] if mapped else lp).float() * LN10
        return lp.clamp(min=LN_FLOOR)

    # ------------------------------------------------------------------ the LanguageModel interface
    def forward(self, x: torch.Tensor, targets: Optional[torch.Tensor] = None, state=None, need_logits: bool = True):
        net_state, ng_state, fold_state = (None, None, None) if state is None else state
        scores, _, net_state = self.net(x, None, net_state, need_logits=True)  # (B, T, V), -inf at 0 and 1
        lm = self.ngram()
        with torch.no_grad():
            states, ng_state = self.ngram_states(x, ng_state, lm)
            B, T = x.shape
            if self.training and self.config.folds:
                prior, fold_state = self._fold_prior(x, fold_state)
            else:
                prior, fold_state = self.ngram_log_probs(states.reshape(B * T, -1), lm).view(B, T, -1), None
        combined = scores[..., N_UNPREDICTED:].float() + self.config.ngram_weight * prior[..., N_UNPREDICTED:]
        loss = None
        if targets is not None:
            loss = F.cross_entropy(combined.reshape(-1, combined.size(-1)), targets.reshape(-1) - N_UNPREDICTED,
                                   ignore_index=PAD_ID - N_UNPREDICTED)
        logits = F.pad(combined, (N_UNPREDICTED, 0), value=float("-inf")) if need_logits else None
        return logits, loss, (net_state, ng_state, fold_state)

    def _fold_prior(self, x: torch.Tensor, start: Optional[torch.Tensor]) -> tuple:
        """Each row group's n-gram log-probabilities from the model that never saw it, and the groups'
        states after the batch (each group's rows in its own model's rows, carried as the full model's)."""
        K, (B, T) = self.config.folds, x.shape
        if len(self.fold_lms) != K:
            raise InputError(f"this residual model trains with {K}-fold cross-fitting, but its fold models "
                             f"are not built", fix="train or resume it with `ngramlm neural train` (which builds "
                             f"them), or call set_folds(cross_fit_folds(...))")
        if B % K:
            raise InputError(f"a training batch of {B} rows cannot be cut into {K} fold groups",
                             fix=f"use a --batch-size divisible by {K}")
        per = B // K
        parts, ends = [], []
        for g, fold in enumerate(self.fold_lms):
            rows = slice(g * per, (g + 1) * per)
            fs, last = self.ngram_states(x[rows], None if start is None else start[rows], fold, mapped=False)
            parts.append(self.ngram_log_probs(fs.reshape(per * T, -1), fold, mapped=False).view(per, T, -1))
            ends.append(last)
        return torch.cat(parts, 0), torch.cat(ends, 0)

    def select_state(self, state, index: torch.Tensor):
        if state is None:
            return None
        net_state, ng_state, fold_state = state
        return (self.net.select_state(net_state, index), ng_state.index_select(0, index),
                None if fold_state is None else fold_state.index_select(0, index))

    @staticmethod
    def detach_state(state):
        if state is None:
            return None
        net_state, ng_state, fold_state = state
        return (None if net_state is None else tuple(s.detach() for s in net_state)), ng_state, fold_state

    def activation_penalty(self, *, ar: float, tar: float) -> torch.Tensor:
        return self.net.activation_penalty(ar=ar, tar=tar)

    def eval_chunk_len(self) -> int:
        return min(self.net.eval_chunk_len(), 64)  # a chunk's n-gram distributions are [B*T, V]

    def n_parameters(self) -> int:
        return self.net.n_parameters()

    def describe(self) -> str:
        c = self.config
        return (f"{self.net.describe()} trained on the residual of an order-{c.ngram_order} n-gram model "
                f"({sum(c.ngram_rows):,} n-grams, {c.ngram_source or 'no source named'})")


def fold_spans(train_ids: np.ndarray, batch_size: int, folds: int) -> list:
    """The stretch of ``train_ids`` each fold group of sequential batches predicts, ``[(a, b), ...]``,
    widened to whole sentences (a fold model must not see any of the group's sentences)."""
    L = (len(train_ids) + 1) // batch_size  # neural.data.batchify over </s> + ids
    per = batch_size // folds
    ends = np.flatnonzero(train_ids == EOS_ID) + 1  # where each sentence ends (exclusive)
    spans = []
    for g in range(folds):
        a, b = max(0, g * per * L - 1), min(len(train_ids), (g + 1) * per * L)
        i = np.searchsorted(ends, a, side="right")  # the sentence holding position a starts at ends[i-1]
        a = int(ends[i - 1]) if i > 0 else 0
        j = np.searchsorted(ends, b, side="left")
        b = int(ends[j]) if j < len(ends) else len(train_ids)
        spans.append((a, b))
    return spans


def cross_fit_folds(train_ids: np.ndarray, vocab, *, batch_size: int, folds: int, order: int,
                    smoothing: str = "mkn") -> list:
    """One n-gram model per fold group (:func:`fold_spans`), each trained on the text outside the group,
    over ``vocab`` (the network's ids), as tensor forms in float32."""
    from corpora.vocab import EncodedText
    from ngramlm import NgramLM

    from .tensor import tensor_lm

    if folds < 2 or batch_size % folds:
        raise InputError(f"{folds} folds over batches of {batch_size} rows",
                         fix=f"use --ngram-folds 0 or 2 and more, dividing --batch-size ({batch_size})")
    lms = []
    for a, b in fold_spans(train_ids, batch_size, folds):
        rest = np.concatenate([train_ids[:a], train_ids[b:]])
        starts = np.concatenate([[0], np.flatnonzero(rest == EOS_ID) + 1]).astype(np.int64)
        if starts[-1] != len(rest):  # a last sentence without its end (the text's own tail)
            starts = np.append(starts, len(rest))
        model = NgramLM(order=order, smoothing=smoothing).fit(EncodedText(rest, starts), vocab=vocab)
        lms.append(tensor_lm(model, dtype=torch.float32))
    return lms


def residual_lm(net: LanguageModel, path, words: Sequence[str], *, folds: int = 0,
                fold_smoothing: str = "mkn", weight: float = 1.0) -> ResidualLM:
    """``neural train --ngram-residual``: ``net`` over the n-gram model in ``path``."""
    import os

    model = ResidualLM.from_ngram(net, path, words, source=os.path.basename(str(path)))
    model.config.folds, model.config.fold_smoothing, model.config.ngram_weight = folds, fold_smoothing, weight
    return model


def register_kind() -> None:
    """Let ``neural`` build, load and name residual models (``neural.models.register_model_kind``)."""
    from neural.models import register_model_kind

    register_model_kind("residual", ResidualLM, ResidualConfig)


register_kind()  # importing this module is what makes the kind known (corpora.modelkinds loads it on demand)
