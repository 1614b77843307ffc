"""Neural models: fused vs scratch equality, attention implementations, causality, the output distribution."""
from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
torch.set_num_threads(1)  # tiny models: a second thread only adds synchronisation (and contention on shared CPUs)

from corpora.errors import InputError  # noqa: E402
from neural.config import CELLS, RNNConfig, TransformerConfig  # noqa: E402
from neural.models import build_model  # noqa: E402
from neural.rnn import RNNLM  # noqa: E402
from neural.transformer import TransformerLM, masked_softmax  # noqa: E402

V = 17  # ids: 0 <pad>, 1 <s>, 2 </s>, 3 <unk>, 4.. words -> 15 predicted types


def tiny_rnn(cell="lstm", impl="fused", layers=2, tie=False, **kw) -> RNNLM:
    cfg = RNNConfig(vocab_size=V, cell=cell, impl=impl, emb_size=6, hidden_size=6 if tie else 7, n_layers=layers,
                    dropout=0.3, tie_weights=tie, **kw)
    return build_model("rnn", cfg, seed=0).eval()


def tiny_transformer(**kw) -> TransformerLM:
    cfg = dict(vocab_size=V, d_model=16, n_layers=2, n_heads=4, d_ff=32, block_size=12, dropout=0.1)
    cfg.update(kw)
    return build_model("transformer", TransformerConfig(**cfg), seed=0).eval()


def finite(t):
    return t[..., 2:]  # ids 0 and 1 are -inf by design


def ids(B=3, T=9, seed=1):
    g = torch.Generator().manual_seed(seed)
    return torch.randint(2, V, (B, T), generator=g)


@pytest.mark.parametrize("cell", CELLS)
@pytest.mark.parametrize("layers", [1, 3])
def test_fused_and_scratch_give_the_same_outputs(cell, layers):
    fused = tiny_rnn(cell, layers=layers)
    scratch = fused.convert("scratch").eval()
    x = ids()
    state0 = tuple(torch.randn_like(s) for s in fused.init_state(x.size(0)))
    a, _, sa = fused(x, state=state0)
    b, _, sb = scratch(x, state=state0)
    assert isinstance(scratch.rnn, torch.nn.Module) and type(scratch.rnn).__name__ == "ScratchRNN"
    torch.testing.assert_close(finite(a), finite(b), atol=1e-5, rtol=1e-5)
    for s1, s2 in zip(sa, sb):
        torch.testing.assert_close(s1, s2, atol=1e-5, rtol=1e-5)
    # and back again
    c, _, _ = scratch.convert("fused").eval()(x, state=state0)
    torch.testing.assert_close(finite(a), finite(c), atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("cell", CELLS)
def test_scratch_gradients_match_fused(cell):
    fused = tiny_rnn(cell, layers=2, tie=True)
    scratch = fused.convert("scratch").eval()
    x, y = ids(), ids(seed=2)
    _, la, _ = fused(x, y)
    _, lb, _ = scratch(x, y)
    la.backward()
    lb.backward()
    torch.testing.assert_close(la, lb, atol=1e-6, rtol=1e-5)
    torch.testing.assert_close(fused.embedding.weight.grad, scratch.embedding.weight.grad, atol=1e-5, rtol=1e-4)


def test_textbook_gru_is_a_different_function_and_scratch_only():
    after = tiny_rnn("gru", impl="scratch")
    before = build_model("rnn", {**after.config.to_dict(), "gru_reset": "before"})
    before.load_state_dict(after.state_dict())
    x = ids()
    assert not torch.allclose(finite(after.eval()(x)[0]), finite(before.eval()(x)[0]))
    with pytest.raises(InputError, match="scratch"):
        RNNConfig(vocab_size=V, cell="gru", impl="fused", gru_reset="before").validate()


def test_sdpa_and_scratch_attention_agree():
    model = tiny_transformer()
    x = ids(T=12)
    a, _, _ = model(x)
    for block in model.blocks:
        block.attn.impl = "scratch"
    b, _, _ = model(x)
    torch.testing.assert_close(finite(a), finite(b), atol=1e-5, rtol=1e-5)


def test_attention_weights_are_causal_distributions():
    model = tiny_transformer()
    weights = model.attention_weights(ids(B=2, T=7))
    assert len(weights) == 2
    for w in weights:
        assert w.shape == (2, 4, 7, 7)
        torch.testing.assert_close(w.sum(-1), torch.ones(2, 4, 7))
        assert torch.all(w.triu(1) == 0)


def test_masked_softmax_ignores_disallowed_entries():
    scores = torch.tensor([[1.0, 2.0, 50.0]])
    allowed = torch.tensor([[True, True, False]])
    torch.testing.assert_close(masked_softmax(scores, allowed), torch.softmax(torch.tensor([[1.0, 2.0, -1e9]]), -1))


@pytest.mark.parametrize("make", [lambda: tiny_rnn("lstm"), lambda: tiny_rnn("gru", impl="scratch"),
                                  lambda: tiny_transformer(), lambda: tiny_transformer(positional="learned")])
def test_changing_a_future_token_leaves_past_logits_unchanged(make):
    model = make()
    x = ids(B=2, T=10)
    x2 = x.clone()
    x2[:, 6] = (x2[:, 6] - 2 + 1) % (V - 2) + 2
    a, _, _ = model(x)
    b, _, _ = model(x2)
    torch.testing.assert_close(a[:, :6], b[:, :6])
    assert not torch.allclose(finite(a[:, 6:]), finite(b[:, 6:]))


@pytest.mark.parametrize("make", [lambda: tiny_rnn("rnn_tanh", tie=True), lambda: tiny_rnn("rnn_relu"),
                                  lambda: tiny_transformer(tie_weights=False)])
def test_distribution_over_exactly_the_predicted_types(make):
    model = make()
    logits, _, _ = model(ids())
    assert logits.shape == (3, 9, V)
    p = torch.softmax(logits, dim=-1)
    assert torch.all(p[..., 0] == 0) and torch.all(p[..., 1] == 0)  # <pad>, <s>
    torch.testing.assert_close(p[..., 2:].sum(-1), torch.ones(3, 9))
    assert torch.all(p[..., 2:] > 0)


def test_loss_is_the_mean_negative_log_prob_of_the_targets_and_ignores_pad():
    model = tiny_rnn()
    x, y = ids(), ids(seed=5)
    y[0, -3:] = 0  # <pad> targets are not counted
    logits, loss, _ = model(x, y)
    logp = torch.log_softmax(logits, -1)
    mask = y != 0
    expected = -logp.gather(-1, y[..., None])[..., 0][mask].mean()
    torch.testing.assert_close(loss, expected)


def test_transformer_state_is_the_context_window():
    model = tiny_transformer()
    x = ids(B=2, T=10)
    full, _, _ = model(x)
    first, _, state = model(x[:, :4])
    rest, _, _ = model(x[:, 4:], state=state)
    torch.testing.assert_close(torch.cat([first, rest], 1), full, atol=1e-5, rtol=1e-5)
    with pytest.raises(InputError, match="context window"):
        model(ids(T=13))


def test_rnn_state_carries_history():
    model = tiny_rnn("lstm")
    x = ids(B=2, T=10)
    full, _, _ = model(x)
    first, _, state = model(x[:, :3])
    rest, _, _ = model(x[:, 3:], state=state)
    torch.testing.assert_close(torch.cat([first, rest], 1), full, atol=1e-6, rtol=1e-5)


def test_bad_configurations_are_clear_errors():
    with pytest.raises(InputError, match="tied weights need emb_size == hidden_size"):
        RNNLM(RNNConfig(vocab_size=V, emb_size=8, hidden_size=10, tie_weights=True))
    with pytest.raises(InputError, match="does not divide"):
        TransformerLM(TransformerConfig(vocab_size=V, d_model=30, n_heads=4))
    with pytest.raises(InputError, match="unknown recurrent cell"):
        RNNConfig(vocab_size=V, cell="lstmx").validate()
    with pytest.raises(InputError, match="dropout"):
        RNNConfig(vocab_size=V, dropout=1.5).validate()
    with pytest.raises(InputError, match="unknown .* keys"):
        RNNConfig.from_dict({"vocab_size": V, "bogus": 1})


def test_tied_weights_share_one_matrix():
    model = tiny_rnn(tie=True)
    assert model.decoder.weight is model.embedding.weight
    t = tiny_transformer()
    assert t.decoder.weight is t.embedding.weight
