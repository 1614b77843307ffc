"""Generating text from any model: greedy, beam search, sampling.

Generation uses only the shared interface ``model(x, state=state)`` plus
``model.select_state`` (beam search reorders hypotheses), so it works for every
architecture.  The model first reads ``</s>`` + the prompt -- the same start symbol
as in training and evaluation -- then extends it one token at a time.  ``<pad>`` and
``<s>`` have probability 0 and are never produced.

Beam search keeps the ``beam_size`` best partial hypotheses by total log-probability;
a hypothesis is complete when it produces ``</s>`` or reaches ``max_len`` tokens.
Complete hypotheses are ranked by the length-normalised score
``score(y) = log P(y) / T**alpha`` (``alpha = 0``: raw log-probability, which favours
short outputs; ``alpha = 1``: mean log-probability per token).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Optional, Sequence

import torch
import torch.nn.functional as F

from corpora.errors import InputError
from corpora.tokenize import detokenize, make_tokenizer
from corpora.vocab import EOS_ID, Vocab

from .base import LanguageModel
from .data import with_start


@dataclass
class Hypothesis:
    ids: list  # generated ids (the prompt excluded); ends with </s> when the model chose to stop
    log_prob: float  # natural log of P(ids | prompt)
    score: float  # log_prob / len(ids) ** alpha

    def __len__(self) -> int:
        return len(self.ids)


@torch.no_grad()
def read_prompt(model: LanguageModel, prompt_ids: Sequence[int]):
    """Feed ``</s>`` + prompt; return (log-probs of the next token (1, V), state)."""
    model.eval()
    stream = with_start(list(prompt_ids))[None]  # (1, P + 1)
    step = model.eval_chunk_len()
    state, logits = None, None
    for a in range(0, stream.size(1), step):
        logits, _, state = model(stream[:, a:a + step], state=state)
    return F.log_softmax(logits[:, -1].float(), dim=-1), state


@torch.no_grad()
def greedy(model: LanguageModel, prompt_ids: Sequence[int] = (), max_len: int = 30, stop_at_eos: bool = True,
           lm=None, lm_weight: float = 0.0) -> list:
    """The most probable next token, repeatedly (fused with ``lm``: see :func:`_decode`)."""
    return _decode(model, prompt_ids, max_len, stop_at_eos, lambda logp: int(logp.argmax()), lm, lm_weight)


def _decode(model, prompt_ids, max_len: int, stop_at_eos: bool, pick, lm=None, lm_weight: float = 0.0) -> list:
    """Feed the prompt, then repeatedly append ``pick(next-token scores)``.

    With ``lm`` (an n-gram model over this model's vocabulary: ``corpora.modelkinds.fusion_lm``, the same
    protocol as the translators' shallow fusion) the scores are ``log p(w | h) + lm_weight log p_LM(w | h)``:
    greedy takes their maximum, sampling draws from their softmax (a product of experts), the n-gram
    model following the same tokens and starting again after each ``</s>``."""
    logp, state = read_prompt(model, prompt_ids)
    fuse = lm is not None and lm_weight != 0
    if fuse:
        lm_states = lm.start(1)
        for tok in prompt_ids:
            lm_states = lm.advance(lm_states, torch.tensor([int(tok)]))
    out = []
    for _ in range(max_len):
        scores = logp[0] + lm_weight * lm.log_probs(lm_states)[0].to(logp.dtype) if fuse else logp[0]
        tok = pick(scores)
        out.append(tok)
        if tok == EOS_ID and stop_at_eos:
            break
        if fuse:
            lm_states = lm.start(1) if tok == EOS_ID else lm.advance(lm_states, torch.tensor([tok]))
        logits, _, state = model(torch.tensor([[tok]]), state=state)
        logp = F.log_softmax(logits[:, -1].float(), dim=-1)
    return out


@torch.no_grad()
def sample(model: LanguageModel, prompt_ids: Sequence[int] = (), max_len: int = 30, temperature: float = 1.0,
           top_k: Optional[int] = None, seed: Optional[int] = None, stop_at_eos: bool = True, lm=None,
           lm_weight: float = 0.0) -> list:
    """Draw from softmax(logits / temperature), optionally restricted to the ``top_k`` most probable tokens."""
    if not temperature > 0:
        raise InputError(f"temperature must be > 0, got {temperature}", fix="use --strategy greedy for temperature 0")
    if top_k is not None and top_k < 1:
        raise InputError(f"top-k must be >= 1, got {top_k}", fix="omit --top-k to sample from all tokens")
    g = torch.Generator()
    g.manual_seed(torch.seed() if seed is None else seed)

    def pick(logp):
        scores = logp / temperature
        if top_k is not None and top_k < scores.numel():
            kth = torch.topk(scores, top_k).values[-1]
            scores = scores.masked_fill(scores < kth, float("-inf"))
        return int(torch.multinomial(torch.softmax(scores, dim=-1), 1, generator=g))

    return _decode(model, prompt_ids, max_len, stop_at_eos, pick, lm, lm_weight)


@torch.no_grad()
def beam_search(model: LanguageModel, prompt_ids: Sequence[int] = (), beam_size: int = 5, max_len: int = 30,
                alpha: float = 0.7) -> list:
    """Complete hypotheses, best first by ``log P / T**alpha``."""
    check_beam(beam_size, max_len)
    logp, state = read_prompt(model, prompt_ids)  # (1, V)

    def advance(rows: torch.Tensor, toks: torch.Tensor) -> torch.Tensor:
        nonlocal state
        state = model.select_state(state, rows)
        logits, _, state = model(toks[:, None], state=state)
        return F.log_softmax(logits[:, -1].float(), dim=-1)

    return beam_core(logp, advance, beam_size=beam_size, max_len=max_len, alpha=alpha)


def check_beam(beam_size: int, max_len: int) -> None:
    if beam_size < 1 or max_len < 1:
        raise InputError("beam size and max length must be >= 1", fix="pass --beam-size and --max-len of 1 or more")


def beam_core(logp: torch.Tensor, advance, *, beam_size: int, max_len: int, alpha: float) -> list:
    """Beam search over any model: ``logp`` (1, V) are the first token's log-probs, and
    ``advance(rows, toks)`` extends the live hypotheses ``rows`` by ``toks`` and returns the next
    log-probs (A, V).  The ``beam_size`` best extensions by total log-prob are kept each step; one
    ending in ``</s>`` (or reaching ``max_len``) is complete.  Complete hypotheses, best first by
    ``log P / T**alpha``."""
    seqs: list = [[]]
    totals = torch.zeros(1, dtype=torch.float64)
    finished: list = []
    for t in range(1, max_len + 1):
        cand = totals[:, None] + logp.double()  # (A, V) total log-prob of every one-token extension
        n_finite = int(torch.isfinite(cand).sum())
        top = torch.topk(cand.flatten(), min(beam_size, n_finite))
        rows = top.indices // cand.size(1)
        toks = top.indices % cand.size(1)
        keep_rows, keep_toks, keep_totals, new_seqs = [], [], [], []
        for r, tok, total in zip(rows.tolist(), toks.tolist(), top.values.tolist()):
            seq = seqs[r] + [tok]
            if tok == EOS_ID or t == max_len:
                finished.append(Hypothesis(seq, total, total / len(seq) ** alpha))
            else:
                keep_rows.append(r)
                keep_toks.append(tok)
                keep_totals.append(total)
                new_seqs.append(seq)
        if not new_seqs:
            break
        seqs, totals = new_seqs, torch.tensor(keep_totals, dtype=torch.float64)
        logp = advance(torch.tensor(keep_rows), torch.tensor(keep_toks))
    finished.sort(key=lambda h: h.score, reverse=True)
    return finished


# ---------------------------------------------------------------------------- text in, text out
def encode_prompt(vocab: Vocab, text: str) -> list:
    tokens = make_tokenizer(vocab.tokenizer)(text) if vocab.tokenizer is not None else text.split()
    return vocab.encode(tokens).tolist()


def render(vocab: Vocab, ids: Sequence[int]) -> str:
    """Ids -> display text; ``</s>`` ends a line."""
    lines, current = [], []
    for i in ids:
        if int(i) == EOS_ID:
            lines.append(current)
            current = []
        else:
            current.append(vocab.lookup_token(int(i)))
    lines.append(current)
    spec = vocab.tokenizer
    text = [detokenize(toks, spec) if spec is not None else " ".join(toks) for toks in lines]
    return "\n".join(text).rstrip("\n")


def sample_lines(model: LanguageModel, vocab: Vocab, *, prompt: str = "", max_len: int = 30, num: int = 1,
                 temperature: float = 1.0, seed: Optional[int] = None, top_k: Optional[int] = None,
                 stop_at_eos: bool = True, lm=None, lm_weight: float = 0.0) -> list:
    """``num`` samples from ``model`` as text lines (the prompt first), sample ``i`` seeded ``seed + i``
    (fused with ``lm``: see :func:`_decode`)."""
    prompt_ids = encode_prompt(vocab, prompt)
    head = (prompt + " ") if prompt and vocab.tokenizer is not None and vocab.tokenizer.kind != "char" else prompt
    lines = []
    for i in range(num):
        ids = sample(model, prompt_ids, max_len, temperature=temperature, top_k=top_k,
                     seed=None if seed is None else seed + i, stop_at_eos=stop_at_eos, lm=lm, lm_weight=lm_weight)
        lines.append(head + render(vocab, ids))
    return lines
