"""Generation: beam search against brute force, greedy, sampling."""
from __future__ import annotations

import itertools

import pytest

torch = pytest.importorskip("torch")
torch.set_num_threads(1)  # tiny models: a second thread only adds synchronisation (and contention on shared CPUs)

from corpora import Vocab  # noqa: E402
from corpora.errors import InputError  # noqa: E402
from corpora.vocab import EOS_ID  # noqa: E402
from neural.config import RNNConfig, TransformerConfig  # noqa: E402
from neural.data import with_start  # noqa: E402
from neural.generate import beam_search, encode_prompt, greedy, render, sample  # noqa: E402
from neural.models import build_model  # noqa: E402

V = 7  # 4 specials + 3 words: 5 predicted types
TYPES = list(range(2, V))
PROMPT = [4, 5]


def models():
    rnn = build_model("rnn", RNNConfig(vocab_size=V, cell="lstm", emb_size=6, hidden_size=6, n_layers=2), seed=3)
    tr = build_model("transformer", TransformerConfig(vocab_size=V, d_model=8, n_layers=2, n_heads=2, d_ff=16,
                                                      block_size=8), seed=3)
    # Make the distributions peaky enough that rankings are not near-ties.
    with torch.no_grad():
        rnn.decoder.weight.mul_(30)
        tr.decoder.weight.mul_(30)
    return [rnn.eval(), tr.eval()]


@torch.no_grad()
def log_prob(model, prompt, seq):
    """ln P(seq | prompt) from one forward pass over the whole text (no incremental state)."""
    stream = with_start(prompt + seq[:-1])[None]
    logits, _, _ = model(stream)
    logp = torch.log_softmax(logits[0, len(prompt):].double(), -1)
    return float(sum(logp[i, t] for i, t in enumerate(seq)))


def brute_force(model, prompt, max_len, alpha):
    hyps = []
    for n in range(1, max_len + 1):
        for seq in itertools.product(TYPES, repeat=n):
            seq = list(seq)
            if EOS_ID in seq[:-1]:
                continue  # a hypothesis ends at its first </s>
            if seq[-1] != EOS_ID and n < max_len:
                continue  # incomplete
            lp = log_prob(model, prompt, seq)
            hyps.append((lp / n ** alpha, lp, seq))
    hyps.sort(key=lambda h: h[0], reverse=True)
    return hyps


@pytest.mark.parametrize("alpha", [0.0, 0.7, 1.0])
@pytest.mark.parametrize("which", [0, 1], ids=["lstm", "transformer"])
def test_exhaustive_beam_equals_brute_force(which, alpha):
    model = models()[which]
    expected = brute_force(model, PROMPT, max_len=3, alpha=alpha)
    got = beam_search(model, PROMPT, beam_size=100, max_len=3, alpha=alpha)
    assert len(got) == len(expected) == 1 + 4 + 4 * 4 * 5  # </s> | w </s> | w w any
    for h, (score, lp, seq) in zip(got[:10], expected[:10]):
        assert h.ids == seq
        assert h.score == pytest.approx(score, abs=1e-4)
        assert h.log_prob == pytest.approx(lp, abs=1e-4)


@pytest.mark.parametrize("which", [0, 1], ids=["lstm", "transformer"])
def test_narrow_beam_scores_are_true_sequence_log_probs(which):
    model = models()[which]
    for h in beam_search(model, PROMPT, beam_size=3, max_len=5, alpha=0.5):
        assert h.log_prob == pytest.approx(log_prob(model, PROMPT, h.ids), abs=1e-4)
        assert h.score == pytest.approx(h.log_prob / len(h) ** 0.5)
        assert EOS_ID not in h.ids[:-1]


@pytest.mark.parametrize("which", [0, 1], ids=["lstm", "transformer"])
def test_greedy_is_beam_of_one_and_top1_sampling(which):
    model = models()[which]
    g = greedy(model, PROMPT, max_len=6)
    assert beam_search(model, PROMPT, beam_size=1, max_len=6, alpha=0.0)[0].ids == g
    assert sample(model, PROMPT, max_len=6, top_k=1, seed=0) == g
    assert all(t >= 2 for t in g)


def test_sampling_is_repeatable_with_a_seed_and_never_emits_pad_or_bos():
    model = models()[0]
    a = sample(model, [], max_len=50, temperature=2.0, seed=11, stop_at_eos=False)
    b = sample(model, [], max_len=50, temperature=2.0, seed=11, stop_at_eos=False)
    assert a == b and len(a) == 50 and min(a) >= 2
    with pytest.raises(InputError, match="temperature"):
        sample(model, [], temperature=0)


def test_generation_runs_past_the_transformer_window():
    model = models()[1]
    out = greedy(model, [4, 5, 6] * 4, max_len=20, stop_at_eos=False)  # prompt + output > block_size 8
    assert len(out) == 20


def test_prompt_encoding_and_rendering():
    vocab = Vocab().fit([["a", "b", "c"]])
    ids = encode_prompt(vocab, "a zzz c")
    assert ids == [vocab["a"], 3, vocab["c"]]
    assert render(vocab, ids + [EOS_ID] + [vocab["b"]]) == "a <unk> c\nb"
