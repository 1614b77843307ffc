"""The Transformer LM's relative positions (``positional="relative"``, T5's bucketed bias per head).

What must hold: the bias depends on the distance ``i - j`` only, so two tokens score each other the
same wherever they stand in the window; sdpa and the scratch attention compute the same function (and
gradients); the future stays hidden; the sliding-window evaluation and generation count distances
inside the window exactly as a fresh pass over that window does; the checkpoint rebuilds the model;
bad hyper-parameters are refused with the fix.
"""
from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch", reason="the neural extra is not installed (pip install -e '.[neural]')")
torch.set_num_threads(1)  # tiny models: a second thread only adds synchronisation

from click.testing import CliRunner  # noqa: E402

from corpora.errors import InputError  # noqa: E402
from corpora.vocab import Vocab  # noqa: E402
from neural.checkpoint import load_model, save_checkpoint  # noqa: E402
from neural.config import TransformerConfig  # noqa: E402
from neural.data import with_start  # noqa: E402
from neural.evaluation import evaluate, token_log_probs  # noqa: E402
from neural.generate import greedy  # noqa: E402
from neural.models import build_model  # noqa: E402
from neural.transformer import relative_bucket  # noqa: E402

V = 17  # ids: 0 <pad>, 1 <s>, 2 </s>, 3 <unk>, 4.. words
BLOCK = 12


def tiny(positional="relative", **kw):
    cfg = dict(vocab_size=V, d_model=16, n_layers=2, n_heads=4, d_ff=32, block_size=BLOCK, dropout=0.1,
               positional=positional)
    if positional == "relative":
        cfg.update(rel_buckets=8, rel_max_distance=16)  # 0..3 exact, then log-spaced: several distances per bucket
    cfg.update(kw)
    model = build_model("transformer", TransformerConfig(**cfg), seed=0).eval()
    if positional == "relative":
        with torch.no_grad():  # a bias as large as a trained one (the init is N(0, 0.02)), so that errors show
            model.rel_bias.table.weight.normal_(0.0, 1.0, generator=torch.Generator().manual_seed(1))
    return model


def ids(B=3, T=BLOCK, seed=1):
    return torch.randint(2, V, (B, T), generator=torch.Generator().manual_seed(seed))


def finite(t):
    return t[..., 2:]  # ids 0 and 1 are -inf by design


def use(model, attention):
    for block in model.blocks:
        block.attn.impl = attention
    return model


# ---------------------------------------------------------------------------- the bias
def test_buckets_are_t5s_and_the_bias_depends_on_the_distance_only():
    n = torch.arange(300)
    b = relative_bucket(n, 32, 128)
    assert torch.equal(b[:16], n[:16])  # short distances: one bucket each
    assert torch.all(b[1:] >= b[:-1]) and int(b[16]) == 16 and int(b[-1]) == 31
    assert b[16:].unique().numel() == 16 and torch.all(b[128:] == 31)  # log-spaced, then all share the last
    assert torch.all(relative_bucket(torch.tensor([-1, -50]), 32, 128) == 0)  # the future (masked anyway)
    bias = tiny().rel_bias
    B = bias(BLOCK)  # (H, L, L)
    assert B.shape == (4, BLOCK, BLOCK)
    for d in range(BLOCK):  # constant along every diagonal i - j = d
        diag = torch.diagonal(B, offset=-d, dim1=1, dim2=2)
        assert torch.equal(diag, diag[:, :1].expand_as(diag))
    # a window shifted by any offset sees the same bias
    torch.testing.assert_close(bias(5), B[:, 7:, 7:], rtol=0, atol=0)
    torch.testing.assert_close(bias(5), B[:, :5, :5], rtol=0, atol=0)


def test_two_tokens_score_each_other_the_same_at_any_offset():
    """Layer 0's scores are q_i . k_j / sqrt(d) + B(i - j): for the same tokens at the same distance the
    log-weight differences (softmax-free) agree wherever they stand; learned positions move them.  (The
    weights come from the explicit scores; that sdpa computes the same function is the next test.)"""
    tail = [5, 9, 7, 11]

    def log_ratios(model, prefix):
        x = torch.tensor([prefix + tail])
        w = model.attention_weights(x)[0][0, :, -1].log()  # layer 0, query = last token (H, L)
        return w[:, -len(tail):] - w[:, -1:]  # key j against the query itself

    relative, learned = tiny(), tiny("learned")
    before = log_ratios(relative, [3, 4])
    torch.testing.assert_close(log_ratios(relative, [12, 13, 14, 15, 6, 8]), before, atol=1e-5, rtol=0)
    assert not torch.allclose(log_ratios(learned, [3, 4]), log_ratios(learned, [12, 13, 14, 15, 6, 8]), atol=1e-3)
    # and the bias is in them: moving the distance-1 entry moves them
    with torch.no_grad():
        relative.rel_bias.table.weight[1] += 1.0
    assert not torch.allclose(log_ratios(relative, [3, 4]), before, atol=1e-3)


# ---------------------------------------------------------------------------- implementations, causality
def test_sdpa_and_scratch_agree_in_logits_and_gradients():
    model = tiny()
    x, y = ids(), ids(seed=2)
    out = {}
    for attention in ("sdpa", "scratch"):
        use(model, attention).zero_grad()
        logits, loss, state = model(x, y)
        loss.backward()
        out[attention] = (logits.detach(), model.rel_bias.table.weight.grad.clone(), model(ids(T=5, seed=3),
                                                                                        state=state)[0].detach())
    (la, ga, sa), (lb, gb, sb) = out["sdpa"], out["scratch"]
    torch.testing.assert_close(finite(la), finite(lb), atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(finite(sa), finite(sb), atol=1e-5, rtol=1e-5)  # a call with carried state
    assert float(ga.abs().sum()) > 0
    torch.testing.assert_close(ga, gb, atol=1e-6, rtol=1e-4)  # the bias is trained through sdpa's mask too


@pytest.mark.parametrize("attention", ["sdpa", "scratch"])
def test_changing_a_future_token_leaves_past_logits_unchanged(attention):
    model = use(tiny(), attention)
    x = ids(B=2, T=10)
    x2 = x.clone()
    x2[:, 6] = (x2[:, 6] - 2 + 1) % (V - 2) + 2
    a, b = model(x)[0], model(x2)[0]
    torch.testing.assert_close(a[:, :6], b[:, :6])
    assert not torch.allclose(finite(a[:, 6:]), finite(b[:, 6:]))


# ---------------------------------------------------------------------------- the sliding window, generation
@torch.no_grad()
def fresh_window_log_probs(model, text: np.ndarray, chunk: int) -> np.ndarray:
    """ln p of each token by a fresh pass over the window the chunked evaluator gives it: a chunk
    ending at input e attends over inputs[e - block_size : e], each token up to itself."""
    stream = with_start(text)
    out = []
    for a in range(0, len(text), chunk):
        e = min(a + chunk, len(text))
        s = max(0, e - BLOCK)
        for t in range(a, e):
            logits = model(stream[None, s:t + 1])[0][0, -1]
            out.append(float(torch.log_softmax(logits.double(), -1)[stream[t + 1]]))
    return np.array(out)


def test_chunked_evaluation_counts_distances_inside_the_window():
    model = tiny()
    short = np.random.default_rng(0).integers(2, V, BLOCK - 2)  # fits the window: every chunking is exact
    one = evaluate(model, short, chunk_len=len(short))
    for chunk in (1, 3):
        assert evaluate(model, short, chunk_len=chunk).log_prob_nats == pytest.approx(one.log_prob_nats, rel=1e-6)
    np.testing.assert_allclose(token_log_probs(model, short, chunk_len=3),
                               token_log_probs(model, short, chunk_len=len(short)), rtol=1e-5, atol=1e-6)
    # Longer than the window: the carried state gives every token the window a fresh pass would.
    text = np.random.default_rng(1).integers(2, V, 3 * BLOCK)
    for chunk in (1, 5):
        np.testing.assert_allclose(token_log_probs(model, text, chunk_len=chunk),
                                   fresh_window_log_probs(model, text, chunk), rtol=1e-5, atol=1e-5)


@torch.no_grad()
def test_greedy_generation_past_the_window_is_a_fresh_pass_per_token():
    model = tiny()
    with torch.no_grad():
        model.decoder.weight.mul_(30)  # peaky, so that the argmax is no near-tie
    prompt = [4, 5, 6] * 3
    out = greedy(model, prompt, max_len=15, stop_at_eos=False)  # prompt + output > block_size
    stream = with_start(prompt).tolist()
    expected = []
    for _ in range(15):
        logits = model(torch.tensor([stream[-BLOCK:]]))[0][0, -1]
        expected.append(int(logits.argmax()))
        stream.append(expected[-1])
    assert out == expected


# ---------------------------------------------------------------------------- checkpoints, the CLI
def test_checkpoint_round_trip(tmp_path):
    vocab = Vocab().fit([["w%d" % i for i in range(V - 4)]])
    assert len(vocab) == V
    model = tiny(attention="scratch")
    save_checkpoint(tmp_path / "r.pt", model, vocab)
    loaded, v2, raw = load_model(tmp_path / "r.pt")
    config = raw["model"]["config"]
    assert (config["positional"], config["rel_buckets"], config["rel_max_distance"]) == ("relative", 8, 16)
    assert loaded.config == model.config and v2 == vocab
    x = ids()
    torch.testing.assert_close(loaded(x)[0], model(x)[0])
    sdpa, _, _ = load_model(tmp_path / "r.pt", impl="fused")
    torch.testing.assert_close(finite(sdpa(x)[0]), finite(model(x)[0]), atol=1e-5, rtol=1e-5)
    # The same weights run on a wider window (length extrapolation); text that fits both windows scores the same.
    wide = build_model("transformer", {**config, "block_size": 2 * BLOCK}).eval()
    wide.load_state_dict(model.state_dict())
    torch.testing.assert_close(wide(x)[0], model(x)[0])
    assert wide(ids(T=2 * BLOCK))[0].shape == (3, 2 * BLOCK, V)
    # The default span (None) is the block size, fixed when the model is built: a checkpoint read back
    # with a wider window keeps its buckets.
    default = build_model("transformer", TransformerConfig(vocab_size=V, d_model=8, n_heads=2, n_layers=1,
                                                           block_size=64, positional="relative"))
    assert (default.config.rel_buckets, default.config.rel_max_distance) == (32, 64)
    save_checkpoint(tmp_path / "d.pt", default, vocab)
    assert load_model(tmp_path / "d.pt")[2]["model"]["config"]["rel_max_distance"] == 64
    # A learned or sinusoidal config is stored without the relative fields (old checkpoints, cache keys).
    learned = TransformerConfig(vocab_size=V)
    assert "rel_buckets" not in learned.to_dict() and TransformerConfig.from_dict(learned.to_dict()) == learned


def test_the_cli_offers_relative_positions():
    from neural.commands.lm import neural_group

    r = CliRunner().invoke(neural_group, ["train", "--help"])
    assert r.exit_code == 0 and "[sinusoidal|learned|relative]" in " ".join(r.output.split())


@pytest.mark.parametrize("bad, match, fix", [
    (dict(rel_buckets=1), "rel_buckets must be an integer of 2 or more",
     "set rel_buckets (a TransformerConfig field) to 2 or more (default: 32)"),
    (dict(rel_max_distance=0), "rel_max_distance must be", "set rel_max_distance (a TransformerConfig field) to 2"),
    (dict(rel_buckets=32, rel_max_distance=20), "below rel_buckets 32", "set rel_max_distance to 32 or more"),
    (dict(rel_buckets=None), "rel_buckets must be", "to 2 or more (default: 32)"),
    (dict(positional="rope"), "unknown positional encoding 'rope'", "use sinusoidal, learned or relative"),
])
def test_bad_hyper_parameters_are_refused_with_the_fix(bad, match, fix):
    with pytest.raises(InputError, match=match) as e:
        build_model("transformer", TransformerConfig(vocab_size=V, **{"positional": "relative", **bad}))
    assert fix in e.value.fix


def test_the_translator_refuses_relative_positions():
    from neural.seq2seq.transformer import Seq2SeqTransformerConfig

    with pytest.raises(InputError, match="positional") as e:
        Seq2SeqTransformerConfig(vocab_size=9, src_vocab_size=9, positional="relative").validate()
    assert e.value.fix == "use sinusoidal or learned"
