"""BERT: a bidirectional Transformer encoder pretrained by masked-LM and next-sentence prediction.

Devlin et al. (2019).  The input of one example is a sentence pair::

    [CLS] a_1 .. a_m [SEP] b_1 .. b_n [SEP]          ids
      0    0  ..  0    0    1  ..  1    1            segments (A = 0, B = 1)
      0    1  ..  m   m+1  m+2 ..      m+n+2         positions

and each position's input vector is the sum of three embeddings, token + segment +
position (all learned).  The encoder is a stack of blocks with *unmasked* self-attention
(every position sees every other non-padding position, both left and right), so the
output at position t is a contextual representation of token t in its whole sentence.

Two heads are trained at once:

* **masked LM** (MLM): 15 % of the word positions are selected; of those 80 % are
  replaced by ``[MASK]``, 10 % by a random word and 10 % left unchanged, and the model
  predicts the original word at each selected position (:func:`mask_tokens`).  The
  output layer is tied to the token embedding (its rows for the words).
* **next-sentence prediction** (NSP): from the ``[CLS]`` vector, is B the sentence that
  followed A in the text (50 %) or a random one (50 %) (:func:`sentence_pairs`)?

Vocabulary.  The toolkit's :class:`~corpora.vocab.Vocab` is used unchanged: ids 0-3 are
``<pad> <s> </s> <unk>``, words follow.  BERT's three specials are appended *after* it::

    [CLS] = V,  [SEP] = V + 1,  [MASK] = V + 2          (V = len(vocab) = config.vocab_size)

so a checkpoint stores the same vocabulary file as the causal models, and the
embedding table has ``V + 3`` rows.  ``<s>`` and ``</s>`` never appear in BERT's input
(``[CLS]``/``[SEP]`` mark the boundaries).  The MLM predicts the *word* ids only --
``<unk>`` and the words, ``vocab.n_words`` of them -- never a special.

Scoring.  A masked LM gives no probability of a text, so it has no perplexity.
:func:`pseudo_log_likelihoods` computes Salazar et al.'s (2020) pseudo-log-likelihood
instead: each word is masked in turn and scored given all the others,
``PLL(W) = sum_t log p(w_t | W without w_t)``, and ``PPPL = exp(-PLL / N)`` over the
N words of the text.  It counts the same word tokens the causal models predict (incl.
``<unk>``) but not ``</s>``; it is *not* a perplexity (the factors are not a chain rule
and do not multiply to a distribution over texts), so it must not be ranked against
one -- see docs/bert.md.
"""
from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Callable, Optional, Sequence

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from corpora.errors import InputError
from corpora.vocab import PAD_ID, UNK_ID

from ..config import ConfigBase, check_positive, check_probability
from ..transformer import init_weights

# The predicted ids are <unk> and the words: ids 3 .. V-1 (never <pad>, <s>, </s> or BERT's specials).
FIRST_WORD = UNK_ID
N_BERT_SPECIALS = 3  # [CLS], [SEP], [MASK], appended after the toolkit vocabulary
IGNORE = -100  # label of a position the MLM does not predict (F.cross_entropy's default ignore_index)


def special_ids(vocab_size: int) -> tuple:
    """``(cls, sep, mask)`` ids for a toolkit vocabulary of ``vocab_size`` ids."""
    return vocab_size, vocab_size + 1, vocab_size + 2


# ---------------------------------------------------------------------------- config
@dataclass
class BertConfig(ConfigBase):
    """A BERT encoder.  ``vocab_size`` is ``len(vocab)``: the specials add 3 rows to the embedding table."""

    vocab_size: int
    d_model: int = 256  # hidden width (= embedding width; the MLM output layer is tied to the embedding)
    n_layers: int = 4
    n_heads: int = 4  # must divide d_model
    d_ff: int = 1024  # feed-forward hidden width
    max_len: int = 128  # longest input incl. [CLS] and the [SEP]s (learned positions 0 .. max_len-1)
    dropout: float = 0.1
    # post: LN(x + f(x)) as in the BERT paper; pre: x + f(LN(x)), the toolkit Transformer's choice,
    # which keeps the residual path an identity and trains without depending on the warm-up.
    norm: str = "pre"

    def validate(self) -> None:
        check_positive("vocab_size", self.vocab_size, "a vocabulary with")
        if self.vocab_size <= FIRST_WORD:
            raise InputError(f"a vocabulary of {self.vocab_size} ids has no words", fix="train on a non-empty corpus")
        # The sizes come from a preset (`--size`) or from Python, so the fixes name the config fields.
        check_positive("d_model", self.d_model, "d_model")
        check_positive("n_layers", self.n_layers, "n_layers")
        check_positive("n_heads", self.n_heads, "n_heads")
        check_positive("d_ff", self.d_ff, "d_ff")
        check_positive("max_len", self.max_len, "max_len")
        check_probability("dropout", self.dropout, "dropout")
        if self.max_len < 5:
            raise InputError(f"max_len {self.max_len} cannot hold [CLS] a [SEP] b [SEP]", fix="use max_len 16 or more")
        if self.d_model % self.n_heads:
            raise InputError(f"n_heads {self.n_heads} does not divide d_model {self.d_model}",
                             fix="choose a number of heads that divides d_model")
        if self.norm not in ("pre", "post"):
            raise InputError(f"unknown layer-norm placement {self.norm!r}", fix="use --norm pre or post")


# vocab_size is 0 in a preset: it is set from the vocabulary (dataclasses.replace).
BERT_PRESETS = {
    "tiny": BertConfig(vocab_size=0, d_model=32, n_layers=1, n_heads=2, d_ff=64, max_len=64, dropout=0.0),
    "small": BertConfig(vocab_size=0, d_model=128, n_layers=2, n_heads=4, d_ff=512, max_len=96, dropout=0.1),
    # BERT-mini's shape (4 x 256); PTB's longest test sentences (< 80 words) fit max_len 128 whole.
    "default": BertConfig(vocab_size=0),
}


@dataclass
class PretrainConfig(ConfigBase):
    """How BERT is pretrained (stored in the checkpoint's ``train`` entry)."""

    batch_size: int = 32  # sentence pairs per step
    lr: float = 1e-3  # AdamW peak rate (small encoders take more than BERT-base's 1e-4)
    warmup_steps: int = 200  # linear warm-up, then cosine decay to min_lr_ratio * lr
    min_lr_ratio: float = 0.1
    weight_decay: float = 0.01
    clip: float = 1.0  # max global gradient norm (0 = off)
    minutes: Optional[float] = None  # wall-clock budget of the training loop (None: max_steps / epochs only)
    max_steps: Optional[int] = None
    epochs: int = 1000  # passes over the training pairs (a budget or max_steps normally stops first)
    mask_prob: float = 0.15  # share of word positions the MLM predicts
    eval_every: int = 500  # steps between validations (and checkpoint writes)
    valid_pairs: int = 1000  # validation pairs (fixed pairs and masks: the numbers are comparable over time)
    seed: int = 1234

    def validate(self) -> None:
        check_positive("batch_size", self.batch_size, "--batch-size")
        check_positive("epochs", self.epochs, "epochs")
        check_positive("eval_every", self.eval_every, "--eval-every")
        check_positive("valid_pairs", self.valid_pairs, "valid_pairs")
        if self.warmup_steps < 0:
            raise InputError(f"warmup_steps must be >= 0, got {self.warmup_steps}", fix="use e.g. --warmup 200")
        if not self.lr > 0:
            raise InputError(f"the learning rate must be > 0, got {self.lr}", fix="use e.g. --lr 1e-3")
        if not 0.0 < self.mask_prob < 1.0:
            raise InputError(f"mask_prob must be in (0, 1), got {self.mask_prob}", fix="use 0.15")
        if self.minutes is not None and not self.minutes > 0:
            raise InputError(f"--minutes must be > 0, got {self.minutes}", fix="omit it for no time limit")
        if self.max_steps is not None:
            check_positive("max_steps", self.max_steps, "--max-steps")


# ---------------------------------------------------------------------------- the model
class EncoderBlock(nn.Module):
    """Unmasked multi-head self-attention + feed-forward, each in a residual branch (pre- or post-norm)."""

    def __init__(self, cfg: BertConfig) -> None:
        super().__init__()
        self.n_heads, self.pre = cfg.n_heads, cfg.norm == "pre"
        self.qkv = nn.Linear(cfg.d_model, 3 * cfg.d_model)
        self.proj = nn.Linear(cfg.d_model, cfg.d_model)
        self.up = nn.Linear(cfg.d_model, cfg.d_ff)
        self.down = nn.Linear(cfg.d_ff, cfg.d_model)
        self.ln_attn = nn.LayerNorm(cfg.d_model)
        self.ln_ff = nn.LayerNorm(cfg.d_model)
        self.drop = nn.Dropout(cfg.dropout)
        self.p_drop = cfg.dropout

    def attend(self, x: torch.Tensor, allowed: torch.Tensor) -> torch.Tensor:
        B, T, C = x.shape
        q, k, v = self.qkv(x).split(C, dim=2)
        q, k, v = (t.view(B, T, self.n_heads, C // self.n_heads).transpose(1, 2) for t in (q, k, v))  # (B, H, T, dh)
        # allowed (B, 1, 1, T): keys that are not padding; no causal mask -- BERT reads both ways.
        y = F.scaled_dot_product_attention(q, k, v, attn_mask=allowed,
                                           dropout_p=self.p_drop if self.training else 0.0)
        return self.proj(y.transpose(1, 2).reshape(B, T, C))

    def feed_forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.down(F.gelu(self.up(x)))

    def forward(self, x: torch.Tensor, allowed: torch.Tensor) -> torch.Tensor:
        if self.pre:
            x = x + self.drop(self.attend(self.ln_attn(x), allowed))
            return x + self.drop(self.feed_forward(self.ln_ff(x)))
        x = self.ln_attn(x + self.drop(self.attend(x, allowed)))
        return self.ln_ff(x + self.drop(self.feed_forward(x)))


class BertLM(nn.Module):
    """The encoder plus its two pretraining heads.

    ``encode(ids, segments)`` -> ``(B, T, d)`` contextual vectors; ``mlm_log_probs(h)``
    -> log-probabilities over the ``vocab_size - 3`` word ids; ``nsp_logits(h)`` -> ``(B, 2)``
    (index 1 = "B follows A").  ``<pad>`` (id 0) positions are never attended to.
    """

    kind = "bert"

    def __init__(self, config: BertConfig) -> None:
        super().__init__()
        config.validate()
        self.config = config
        d, V = config.d_model, config.vocab_size
        self.cls_id, self.sep_id, self.mask_id = special_ids(V)
        self.tok_emb = nn.Embedding(V + N_BERT_SPECIALS, d)
        self.seg_emb = nn.Embedding(2, d)
        self.pos_emb = nn.Embedding(config.max_len, d)
        self.ln_emb = nn.LayerNorm(d)
        self.drop = nn.Dropout(config.dropout)
        self.blocks = nn.ModuleList(EncoderBlock(config) for _ in range(config.n_layers))
        # Pre-norm leaves the residual stream un-normalised: one final LayerNorm, as GPT-2 does.
        self.ln_out = nn.LayerNorm(d) if config.norm == "pre" else nn.Identity()
        # MLM head: a transform (dense + GELU + LN, as in BERT), then the tied embedding rows of the words.
        self.mlm_dense = nn.Linear(d, d)
        self.mlm_ln = nn.LayerNorm(d)
        self.mlm_bias = nn.Parameter(torch.zeros(V - FIRST_WORD))
        # NSP head on [CLS]: BERT's pooler (dense + tanh) and a 2-way classifier.
        self.pooler = nn.Linear(d, d)
        self.nsp = nn.Linear(d, 2)
        self.apply(init_weights)

    # ------------------------------------------------------------------ encoder
    def encode(self, ids: torch.Tensor, segments: Optional[torch.Tensor] = None) -> torch.Tensor:
        """``ids`` (B, T) (``<pad>`` = 0 for padding), ``segments`` (B, T) of 0/1 -> ``(B, T, d)``."""
        B, T = ids.shape
        if T > self.config.max_len:
            raise InputError(f"{T} tokens in one input but this BERT's max_len is {self.config.max_len}",
                             fix="truncate or window the input (truncate_pair, pseudo_log_likelihoods do)")
        if segments is None:
            segments = torch.zeros_like(ids)
        x = self.tok_emb(ids) + self.seg_emb(segments) + self.pos_emb.weight[:T]  # (B, T, d)
        h = self.drop(self.ln_emb(x))
        allowed = (ids != PAD_ID)[:, None, None, :]  # (B, 1, 1, T)
        for block in self.blocks:
            h = block(h, allowed)
        return self.ln_out(h)

    # The toolkit's causal interface (neural.base: ``model(x, targets, state)``, ``eval_chunk_len``):
    # BERT has no left-to-right probabilities, and reading its MLM output as if it had would give a
    # meaningless number, so `ngramlm ppl` / `neural ppl` / `generate` on a BERT checkpoint stop here.
    @staticmethod
    def _not_causal():
        raise InputError("BERT is a masked LM: it gives no left-to-right probabilities, so no perplexity",
                         fix="score it with `ngramlm bert pppl CKPT` (pseudo-perplexity), not `ppl`")

    def forward(self, x, targets=None, state=None, need_logits=True):
        self._not_causal()

    def eval_chunk_len(self) -> int:
        self._not_causal()

    # ------------------------------------------------------------------ heads
    def mlm_scores(self, h: torch.Tensor) -> torch.Tensor:
        """``h`` (..., d) -> unnormalised scores (..., vocab_size - 3) for word ids 3 .. V-1."""
        t = self.mlm_ln(F.gelu(self.mlm_dense(h)))
        weight = self.tok_emb.weight[FIRST_WORD:self.config.vocab_size]  # tied: the words' embedding rows
        return F.linear(t, weight, self.mlm_bias)

    def mlm_log_probs(self, h: torch.Tensor) -> torch.Tensor:
        return F.log_softmax(self.mlm_scores(h).float(), dim=-1)

    def nsp_logits(self, h: torch.Tensor) -> torch.Tensor:
        return self.nsp(torch.tanh(self.pooler(h[:, 0])))  # (B, 2) from the [CLS] position

    def losses(self, ids: torch.Tensor, segments: torch.Tensor, labels: torch.Tensor,
               is_next: Optional[torch.Tensor] = None) -> dict:
        """Mean MLM and NSP cross-entropies (nats) and the counts behind the accuracies.

        ``labels`` (B, T) holds the original word id at each selected position and ``IGNORE``
        elsewhere (as :func:`mask_tokens` returns); the output layer is applied only there.
        """
        h = self.encode(ids, segments)
        sel = labels != IGNORE
        scores = self.mlm_scores(h[sel]).float()  # (n_selected, n_words)
        target = labels[sel] - FIRST_WORD
        out = {"mlm_loss": F.cross_entropy(scores, target) if target.numel() else scores.sum() * 0.0,
               "mlm_correct": int((scores.argmax(-1) == target).sum()), "mlm_count": int(target.numel())}
        if is_next is not None:
            nsp = self.nsp_logits(h)
            out.update(nsp_loss=F.cross_entropy(nsp, is_next), nsp_correct=int((nsp.argmax(-1) == is_next).sum()),
                       nsp_count=int(is_next.numel()))
        return out

    # ------------------------------------------------------------------ what every neural model answers
    def n_parameters(self) -> int:
        return sum(p.numel() for p in self.parameters())

    def describe(self) -> str:
        return f"{type(self).__name__}({self.config!r}, {self.n_parameters():,} parameters)"


# ---------------------------------------------------------------------------- masking (80/10/10)
def mask_tokens(ids: torch.Tensor, *, vocab_size: int, generator: torch.Generator, mask_prob: float = 0.15,
                mask_share: float = 0.8, random_share: float = 0.1) -> tuple:
    """BERT's masking rule, a pure function of ``ids`` and ``generator``: ``(inputs, labels)``.

    Candidates are the word positions (ids ``3 .. vocab_size-1``: never ``<pad>``,
    ``[CLS]``, ``[SEP]``).  In each row ``max(1, round(mask_prob * n_candidates))`` of them
    are selected uniformly -- an exact share rather than a coin per position, so a short
    sentence still trains the MLM.  Of the selected positions ``mask_share`` become
    ``[MASK]``, ``random_share`` a uniformly random word and the rest stay unchanged: the
    unchanged and random ones make the model keep a useful representation of every input
    word, since at fine-tuning time there is no ``[MASK]``.  ``labels`` holds the original
    id at the selected positions and :data:`IGNORE` elsewhere.
    """
    cand = (ids >= FIRST_WORD) & (ids < vocab_size)  # (B, T)
    n_cand = cand.sum(dim=1)
    k = torch.where(n_cand > 0, torch.clamp(torch.round(mask_prob * n_cand.float()).long(), min=1), 0)
    # Rank the candidates of each row in a random order; non-candidates sort last (key 2 > any uniform).
    key = torch.rand(ids.shape, generator=generator).masked_fill(~cand, 2.0)
    rank = key.argsort(dim=1).argsort(dim=1)
    selected = cand & (rank < k[:, None])
    u = torch.rand(ids.shape, generator=generator)
    to_mask = selected & (u < mask_share)
    to_random = selected & (u >= mask_share) & (u < mask_share + random_share)
    random_words = torch.randint(FIRST_WORD, vocab_size, ids.shape, generator=generator, dtype=ids.dtype)
    inputs = torch.where(to_mask, torch.full_like(ids, special_ids(vocab_size)[2]), ids)
    inputs = torch.where(to_random, random_words, inputs)
    labels = torch.where(selected, ids, torch.full_like(ids, IGNORE))
    return inputs, labels


# ---------------------------------------------------------------------------- sentence pairs (NSP)
def sentence_pairs(n_sentences: int, rng: np.random.Generator, *, p_next: float = 0.5) -> list:
    """``[(i, j, is_next)]``: one pair per sentence ``i`` that has a successor.

    With probability ``p_next`` B is the next sentence (``j = i + 1``, ``is_next = 1``);
    otherwise a random other sentence (``j != i + 1`` and ``j != i``, ``is_next = 0``).
    Sentences are the consecutive lines of a split, so "next" means the following line.
    """
    if n_sentences < 3:
        raise InputError(f"{n_sentences} sentences are too few for next-sentence pairs",
                         fix="give a text with at least 3 non-empty lines per split")
    pairs = []
    for i in range(n_sentences - 1):
        if rng.random() < p_next:
            pairs.append((i, i + 1, 1))
        else:
            j = int(rng.integers(0, n_sentences - 2))  # n - 2 choices: every sentence but i and i + 1
            j += 2 if j >= i else 0
            pairs.append((i, j, 0))
    return pairs


def truncate_pair(n_a: int, n_b: int, budget: int) -> tuple:
    """Lengths ``(m, n)`` with ``m + n <= budget``, cutting the longer side first (as BERT does)."""
    while n_a + n_b > budget:
        if n_a > n_b:
            n_a -= 1
        else:
            n_b -= 1
    return n_a, n_b


def pack_pairs(pairs: Sequence, sentences: Sequence[np.ndarray], *, vocab_size: int, max_len: int) -> tuple:
    """``(ids, segments, is_next)`` tensors of ``[CLS] a [SEP] b [SEP]`` rows, right-padded with ``<pad>``."""
    cls, sep, _ = special_ids(vocab_size)
    rows, segs = [], []
    for i, j, _ in pairs:
        a, b = sentences[i], sentences[j]
        m, n = truncate_pair(len(a), len(b), max_len - 3)
        rows.append([cls, *a[:m].tolist(), sep, *b[:n].tolist(), sep])
        segs.append([0] * (m + 2) + [1] * (n + 1))
    T = max(len(r) for r in rows)
    ids = torch.full((len(rows), T), PAD_ID, dtype=torch.long)
    seg = torch.zeros((len(rows), T), dtype=torch.long)
    for r, (row, s) in enumerate(zip(rows, segs)):
        ids[r, :len(row)] = torch.tensor(row)
        seg[r, :len(s)] = torch.tensor(s)
    is_next = torch.tensor([p[2] for p in pairs], dtype=torch.long)
    return ids, seg, is_next


def encode_sentences(vocab, sentences: Sequence[Sequence[str]], *, drop_empty: bool = True) -> list:
    """Token lists -> int64 id arrays (unknown words -> ``<unk>``; no ``</s>``); empty ones dropped."""
    out = [vocab.encode(s).astype(np.int64) for s in sentences]
    return [a for a in out if len(a)] if drop_empty else out


# ---------------------------------------------------------------------------- evaluation of the heads
@dataclass
class HeadScores:
    mlm_loss: float  # mean cross-entropy (nats) over the masked positions
    mlm_accuracy: float  # share of masked positions whose argmax is the original word
    nsp_accuracy: float
    mlm_count: int
    nsp_count: int

    def to_dict(self) -> dict:
        return dict(self.__dict__)


@torch.no_grad()
def score_heads(model: BertLM, sentences: Sequence[np.ndarray], *, n_pairs: int = 1000, seed: int = 0,
                batch_size: int = 64, mask_prob: float = 0.15) -> HeadScores:
    """MLM loss/accuracy and NSP accuracy on fixed pairs and masks of ``sentences`` (same seed, same numbers)."""
    was_training = model.training
    model.eval()
    pairs = sentence_pairs(len(sentences), np.random.default_rng(seed))[:n_pairs]
    gen = torch.Generator().manual_seed(seed)
    loss_sum = correct = count = nsp_correct = nsp_count = 0
    for a in range(0, len(pairs), batch_size):
        ids, seg, is_next = pack_pairs(pairs[a:a + batch_size], sentences, vocab_size=model.config.vocab_size,
                                       max_len=model.config.max_len)
        inputs, labels = mask_tokens(ids, vocab_size=model.config.vocab_size, generator=gen, mask_prob=mask_prob)
        r = model.losses(inputs, seg, labels, is_next)
        loss_sum += float(r["mlm_loss"]) * r["mlm_count"]
        correct, count = correct + r["mlm_correct"], count + r["mlm_count"]
        nsp_correct, nsp_count = nsp_correct + r["nsp_correct"], nsp_count + r["nsp_count"]
    model.train(was_training)
    return HeadScores(mlm_loss=loss_sum / max(1, count), mlm_accuracy=correct / max(1, count),
                      nsp_accuracy=nsp_correct / max(1, nsp_count), mlm_count=count, nsp_count=nsp_count)


# ---------------------------------------------------------------------------- pretraining
# ---------------------------------------------------------------------------- pseudo-log-likelihood
def _pll_rows(ids: np.ndarray, window: int, cls: int, sep: int, mask: int) -> tuple:
    """The masked copies of one sentence: ``(rows (n, w + 2), target positions (n,))``, ``w = min(n, window)``.

    Copy ``t`` masks word ``t``.  A sentence longer than the window is read through a window of
    ``window`` words centred on ``t`` as far as the sentence allows, so every word is scored.
    """
    n = len(ids)
    w = min(n, window)
    starts = np.clip(np.arange(n) - w // 2, 0, n - w)
    rows = np.empty((n, w + 2), dtype=np.int64)
    rows[:, 0], rows[:, -1] = cls, sep
    for t, s in enumerate(starts):
        rows[t, 1:-1] = ids[s:s + w]
    pos = np.arange(n) - starts + 1
    rows[np.arange(n), pos] = mask
    return rows, pos


@torch.no_grad()
def pseudo_log_likelihoods(model: BertLM, sentences: Sequence[np.ndarray], *, max_rows: int = 512,
                           on_batch: Optional[Callable[[int], None]] = None) -> list:
    """``ln p(w_t | the sentence without w_t)`` for every word of every sentence (Salazar et al. 2020).

    All masked copies of a sentence go through the encoder in one batch (several short
    sentences share a batch up to ``max_rows`` rows; sentences are grouped by length so
    little is padded).  Each copy is ``[CLS] sentence [SEP]`` in segment A, as a single
    sentence is presented to BERT.  Returns one float64 array per sentence (empty for an
    empty sentence).  ``on_batch(n)`` is called after each batch with the words it scored (progress,
    the shared-cores thread rule).
    """
    was_training = model.training
    model.eval()
    cls, sep, mask = special_ids(model.config.vocab_size)
    window = model.config.max_len - 2
    out = [np.zeros(0) for _ in sentences]
    order = sorted((i for i, s in enumerate(sentences) if len(s)), key=lambda i: len(sentences[i]))
    k = 0
    while k < len(order):
        group, rows = [], 0
        while k < len(order) and (not group or rows + len(sentences[order[k]]) <= max_rows):
            group.append(order[k])
            rows += len(sentences[order[k]])
            k += 1
        built = [_pll_rows(np.asarray(sentences[i]), window, cls, sep, mask) for i in group]
        T = max(r.shape[1] for r, _ in built)
        ids = torch.full((rows, T), PAD_ID, dtype=torch.long)
        pos = torch.empty(rows, dtype=torch.long)
        targets = torch.empty(rows, dtype=torch.long)
        r0 = 0
        for i, (r, p) in zip(group, built):
            ids[r0:r0 + len(r), :r.shape[1]] = torch.from_numpy(r)
            pos[r0:r0 + len(r)] = torch.from_numpy(p)
            targets[r0:r0 + len(r)] = torch.as_tensor(np.asarray(sentences[i]), dtype=torch.long)
            r0 += len(r)
        h = model.encode(ids)[torch.arange(rows), pos]  # (rows, d): only the masked position of each copy
        lp = model.mlm_log_probs(h).gather(1, (targets - FIRST_WORD)[:, None])[:, 0].double().numpy()
        r0 = 0
        for i in group:
            out[i] = lp[r0:r0 + len(sentences[i])]
            r0 += len(sentences[i])
        if on_batch is not None:
            on_batch(rows)
    model.train(was_training)
    return out


PPPL_CAVEAT = ("PPPL is not a perplexity of the text: each word is scored given the words on both sides, and these "
               "conditionals do not multiply to a probability of the sentence, so a PPPL cannot be ranked against a "
               "causal model's perplexity -- it is reported beside them on the same word tokens, not as a rival. "
               "Sentence ends (</s>) are not counted; <unk> words are.")


# ---------------------------------------------------------------------------- contextual embeddings
@torch.no_grad()
def sentence_embeddings(model: BertLM, sentences: Sequence[np.ndarray], *, batch_size: int = 64,
                        on_batch: Optional[Callable[[int], None]] = None) -> dict:
    """The encoder's last-layer vectors of every word, as arrays for ``np.savez``.

    ``tokens (N, d)`` (the words of all sentences in order; ``offsets (S + 1,)`` says which rows
    belong to sentence s), ``cls (S, d)`` the ``[CLS]`` vectors and ``mean (S, d)`` the mean of
    each sentence's word vectors.  A sentence longer than ``max_len - 2`` words is encoded in
    consecutive windows, each framed by ``[CLS]``/``[SEP]`` (its ``cls`` row is the first window's).
    ``on_batch(n)`` is called after each batch with the words it encoded.
    """
    was_training = model.training
    model.eval()
    cls, sep, _ = special_ids(model.config.vocab_size)
    window = model.config.max_len - 2
    pieces = []  # (sentence index, window start, ids)
    for s, ids in enumerate(sentences):
        for a in range(0, max(1, len(ids)), window):
            pieces.append((s, a, np.asarray(ids[a:a + window], dtype=np.int64)))
    d = model.config.d_model
    lengths = np.array([len(x) for x in sentences], dtype=np.int64)
    offsets = np.concatenate([[0], np.cumsum(lengths)])
    tokens = np.zeros((int(offsets[-1]), d), dtype=np.float32)
    cls_vec = np.zeros((len(sentences), d), dtype=np.float32)
    for b in range(0, len(pieces), batch_size):
        chunk = pieces[b:b + batch_size]
        T = max(len(p[2]) for p in chunk) + 2
        ids = torch.full((len(chunk), T), PAD_ID, dtype=torch.long)
        for r, (_, _, x) in enumerate(chunk):
            ids[r, :len(x) + 2] = torch.as_tensor([cls, *x.tolist(), sep])
        h = model.encode(ids).float().numpy()
        for r, (s, a, x) in enumerate(chunk):
            tokens[offsets[s] + a: offsets[s] + a + len(x)] = h[r, 1:1 + len(x)]
            if a == 0:
                cls_vec[s] = h[r, 0]
        if on_batch is not None:
            on_batch(sum(len(x) for _, _, x in chunk))
    mean = np.stack([tokens[offsets[s]:offsets[s + 1]].mean(0) if lengths[s] else np.zeros(d, np.float32)
                     for s in range(len(sentences))]) if len(sentences) else np.zeros((0, d), np.float32)
    model.train(was_training)
    return {"tokens": tokens, "offsets": offsets, "cls": cls_vec, "mean": mean.astype(np.float32)}


def build_bert(vocab_size: int, size: str = "default", seed: Optional[int] = None, **changes) -> BertLM:
    """A fresh BERT of a preset ``size`` (tiny | small | default) for a vocabulary of ``vocab_size`` ids."""
    if size not in BERT_PRESETS:
        raise InputError(f"unknown BERT size {size!r}", fix=f"use one of {', '.join(BERT_PRESETS)}")
    if seed is not None:
        torch.manual_seed(seed)
    return BertLM(replace(BERT_PRESETS[size], vocab_size=vocab_size, **changes))
