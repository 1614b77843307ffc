"""The encoder-decoder: encoder vs nn.GRU(bidirectional), masked attention, beam search vs brute force,
teacher forcing, checkpoints and resume, and a synthetic reversal task learnt to BLEU 100."""
from __future__ import annotations

import itertools
import math
import random

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("sacrebleu")

from corpora.errors import InputError  # noqa: E402
from corpora.vocab import BOS_ID, EOS_ID, Vocab  # noqa: E402
from neural.cells import fused_layer_to_scratch  # noqa: E402
from neural.checkpoint import load_model, save_checkpoint  # noqa: E402
from neural.config import Seq2SeqConfig, TrainConfig  # noqa: E402
from neural.seq2seq.pairs import pair_batch  # noqa: E402
from neural.seq2seq.rnn import BiRNNEncoder, Seq2Seq, reverse_padded  # noqa: E402
from neural.training.seq2seq import Seq2SeqTrainer  # noqa: E402
from neural.seq2seq.translate import (attention_for, beam_translate, corpus_bleu, greedy_translate, ids_to_text,
                                      score_pairs)
from conftest import sequence_log_prob  # noqa: E402


def config(**kw) -> Seq2SeqConfig:
    base = dict(vocab_size=9, src_vocab_size=11, emb_size=6, hidden_size=5, n_layers=2, dropout=0.0, attn_size=4)
    return Seq2SeqConfig(**{**base, **kw})


def test_reverse_padded_keeps_padding_in_place_and_is_its_own_inverse():
    X = torch.tensor([[1, 2, 3, 0], [4, 5, 0, 0], [6, 7, 8, 9]])[..., None].float()
    L = torch.tensor([3, 2, 4])
    R = reverse_padded(X, L)
    assert R[..., 0].tolist() == [[3, 2, 1, 0], [5, 4, 0, 0], [9, 8, 7, 6]]
    assert torch.equal(reverse_padded(R, L), X)


@pytest.mark.parametrize("cell", ["gru", "lstm"])
@pytest.mark.parametrize("impl", ["fused", "scratch"])
def test_encoder_equals_torch_bidirectional_rnn_on_a_padded_batch(cell, impl):
    torch.manual_seed(0)
    cfg = config(cell=cell, impl=impl)
    enc = BiRNNEncoder(cfg).eval()
    ref_cls = torch.nn.GRU if cell == "gru" else torch.nn.LSTM
    ref = ref_cls(cfg.emb_size, cfg.hidden_size, num_layers=2, bidirectional=True, batch_first=True).eval()
    # Copy the reference's weights into our per-direction modules.
    sd = ref.state_dict()
    for k, directions in enumerate(enc.layers):
        for d, layer in enumerate(directions):
            suffix = "_reverse" if d else ""
            one = {f"{name}_l0": sd[f"{name}_l{k}{suffix}"] for name in ("weight_ih", "weight_hh", "bias_ih", "bias_hh")}
            layer.load_state_dict(one if impl == "fused" else fused_layer_to_scratch(cell, one, 0))
    src = torch.tensor([[4, 5, 6, 7, 2], [8, 9, 2, 0, 0], [10, 2, 0, 0, 0]])
    lengths = torch.tensor([5, 3, 2])
    with torch.no_grad():
        out, finals = enc(src, lengths)
        emb = enc.embedding(src)
        packed = torch.nn.utils.rnn.pack_padded_sequence(emb, lengths, batch_first=True, enforce_sorted=False)
        ref_out, ref_final = ref(packed)
        ref_out, _ = torch.nn.utils.rnn.pad_packed_sequence(ref_out, batch_first=True, total_length=5)
    mask = (torch.arange(5)[None] < lengths[:, None])[..., None]
    assert torch.allclose(out * mask, ref_out * mask, atol=1e-6)
    ref_parts = ref_final if isinstance(ref_final, tuple) else (ref_final,)
    for ours, theirs in zip(finals, ref_parts):  # theirs: (layers*2, B, h), index 2k + direction
        theirs = theirs.view(2, 2, 3, cfg.hidden_size)
        assert torch.allclose(ours, torch.cat([theirs[:, 0], theirs[:, 1]], dim=-1), atol=1e-6)


def test_padded_source_positions_get_exactly_zero_attention_and_padding_changes_nothing():
    torch.manual_seed(1)
    model = Seq2Seq(config(attention=True)).eval()
    srcs, tgts = [[4, 5, 6, 7, 8, 9], [4], [10, 6]], [[4, 5], [6, 7, 8], [5]]
    (src, src_len, tgt_in), y = pair_batch(srcs, tgts)
    with torch.no_grad():
        _, _, w = model.teacher_forced(src, src_len, tgt_in, need_weights=True)
    for b, n in enumerate(src_len.tolist()):
        assert torch.all(w[b, :, n:] == 0.0)  # exactly zero, not merely small
        assert torch.allclose(w[b, :, :n].sum(-1), torch.ones(w.size(1)), atol=1e-6)
    # Each pair scores the same alone as in the padded batch.
    together = score_pairs(model, srcs, tgts, per_token=True)
    alone = np.concatenate([score_pairs(model, [s], [t], per_token=True) for s, t in zip(srcs, tgts)])
    assert np.allclose(together, alone, atol=1e-5)
    assert len(together) == sum(len(t) + 1 for t in tgts)  # every word and </s>


@pytest.mark.parametrize("attention", [True, False])
def test_teacher_forcing_equals_step_by_step_decoding(attention):
    torch.manual_seed(2)
    model = Seq2Seq(config(attention=attention, cell="lstm")).eval()
    src, tgt = [4, 5, 6], [7, 8, 4]
    (s, s_len, tgt_in), y = pair_batch([src], [tgt])
    with torch.no_grad():
        logits, _, _ = model.teacher_forced(s, s_len, tgt_in)
        forced = torch.log_softmax(logits[0], -1)
        memory, state = model.encode(s, s_len)
        prev = BOS_ID
        for t, want in enumerate(tgt + [EOS_ID]):
            logp, state, _ = model.step(memory, torch.tensor([prev]), state)
            assert torch.allclose(logp[0], forced[t], atol=1e-5)
            prev = want
    assert float(forced[:, :2].exp().sum()) == 0.0  # <pad> and <s> are never predicted


@pytest.mark.parametrize("alpha", [0.0, 0.75, 1.0])
def test_beam_search_with_a_wide_beam_finds_the_brute_force_best(alpha):
    torch.manual_seed(3)
    model = Seq2Seq(config(vocab_size=6, attention=True)).eval()  # predicted: </s>, <unk>, 2 words
    src, max_len = [4, 5, 6], 3
    tokens = list(range(2, 6))
    candidates = []
    for n in range(1, max_len + 1):
        for seq in itertools.product(tokens, repeat=n):
            ends = seq[-1] == EOS_ID
            if EOS_ID in seq[:-1] or (not ends and n < max_len):
                continue  # </s> only last; without it, only a hypothesis cut at max_len is complete
            candidates.append(list(seq))
    with torch.no_grad():
        scored = [(sequence_log_prob(model, src, c), c) for c in candidates]
    best = max(scored, key=lambda lc: lc[0] / len(lc[1]) ** alpha)
    hyps = beam_translate(model, src, beam_size=len(tokens) ** max_len, max_len=max_len, alpha=alpha)
    assert hyps[0].ids == best[1]
    assert math.isclose(hyps[0].log_prob, best[0], abs_tol=1e-5)
    assert len(hyps) == len(candidates)  # the wide beam completes every hypothesis
    # Beam size 1 is greedy decoding.
    one = beam_translate(model, src, beam_size=1, max_len=max_len, alpha=alpha)[0].ids
    assert one == greedy_translate(model, [src], max_len=max_len)[0]


def test_length_normalisation_changes_the_winner_when_short_outputs_win_raw():
    torch.manual_seed(3)
    model = Seq2Seq(config(vocab_size=6, attention=True)).eval()
    src = [4, 5, 6]
    longer = []
    for seed in range(12):
        torch.manual_seed(seed)
        m = Seq2Seq(config(vocab_size=6, attention=True)).eval()
        raw = beam_translate(m, src, beam_size=8, max_len=4, alpha=0.0)[0].ids
        norm = beam_translate(m, src, beam_size=8, max_len=4, alpha=1.0)[0].ids
        assert len(norm) >= len(raw)  # the same complete set; dividing by length never prefers a shorter one
        longer.append(len(norm) > len(raw))
    assert any(longer)  # and on some random models it does pick a longer output
    with pytest.raises(InputError, match="beam size"):
        beam_translate(model, src, beam_size=0)


def _reversal_data(n, rng):
    letters = list("abcdefgh")
    pairs = []
    for _ in range(n):
        s = [rng.choice(letters) for _ in range(rng.randint(3, 7))]
        pairs.append((s, s[::-1]))
    return pairs


@pytest.mark.slow
def test_reversal_task_is_learnt_with_anti_diagonal_attention_and_bleu_100(tmp_path):
    torch.manual_seed(0)
    rng = random.Random(0)
    train, valid, test = _reversal_data(3000, rng), _reversal_data(100, rng), _reversal_data(100, rng)
    sv = Vocab().fit([s for s, _ in train])
    tv = Vocab().fit([t for _, t in train])

    def enc(pairs):
        return [sv.encode(s) for s, _ in pairs], [tv.encode(t) for _, t in pairs]

    model = Seq2Seq(Seq2SeqConfig(vocab_size=len(tv), src_vocab_size=len(sv), emb_size=32, hidden_size=64,
                                  n_layers=1, dropout=0.0, attn_size=32))
    model.src_vocab = sv
    cfg = TrainConfig(epochs=8, batch_size=32, bptt=1, optimizer="adamw", lr=3e-3, clip=1.0, schedule="constant",
                      patience=0, eval_batch_size=256)
    result = Seq2SeqTrainer(model, tv, enc(train), enc(valid), cfg, out=tmp_path / "rev.pt", progress=False).fit()
    assert result.best_val_ppl < 1.05
    src, tgt = enc(test)
    hyps = [ids_to_text(tv, h) for h in greedy_translate(model, src, max_len=12)]
    bleu, signature = corpus_bleu(hyps, [" ".join(t) for _, t in test])
    assert bleu == pytest.approx(100.0) and "version:2.6.0" in signature
    beam = [ids_to_text(tv, beam_translate(model, s, beam_size=3, max_len=12, alpha=0.7)[0].ids) for s in src[:20]]
    assert beam == [" ".join(t) for _, t in test[:20]]
    # Output step t (reading y_{t-1}) attends most to source position n-1-t: the anti-diagonal.
    hits = total = 0
    for s, t in zip(src[:30], tgt[:30]):
        w = attention_for(model, s, t)
        n = len(s)
        assert w.shape == (len(t) + 1, n + 1)
        hits += sum(int(np.argmax(w[i])) == n - 1 - i for i in range(n))
        total += n
    assert hits / total > 0.9
    # The checkpoint holds both vocabularies and the same model.
    loaded, vocab, _ = load_model(tmp_path / "rev.pt", translator=True)
    assert vocab == tv and loaded.src_vocab == sv
    assert np.allclose(score_pairs(loaded, src, tgt, per_token=True), score_pairs(model, src, tgt, per_token=True))


def test_resumed_training_equals_one_run(tmp_path):
    rng = random.Random(5)
    pairs = _reversal_data(300, rng)
    sv = Vocab().fit([s for s, _ in pairs])
    tv = Vocab().fit([t for _, t in pairs])
    data = ([sv.encode(s) for s, _ in pairs], [tv.encode(t) for _, t in pairs])
    valid = (data[0][:40], data[1][:40])
    cfg = Seq2SeqConfig(vocab_size=len(tv), src_vocab_size=len(sv), emb_size=8, hidden_size=8, n_layers=2,
                        dropout=0.2, attn_size=8)

    def fresh():
        torch.manual_seed(7)
        m = Seq2Seq(cfg)
        m.src_vocab = sv
        return m

    tc = TrainConfig(epochs=2, batch_size=16, bptt=1, optimizer="adamw", lr=3e-3, schedule="constant", patience=0,
                     eval_batch_size=64)
    one = fresh()
    Seq2SeqTrainer(one, tv, data, valid, tc, out=tmp_path / "a.pt", progress=False).fit()
    two = fresh()
    Seq2SeqTrainer(two, tv, data, valid, TrainConfig.from_dict({**tc.to_dict(), "epochs": 1}),
                   out=tmp_path / "b.pt", progress=False).fit()
    resumed = Seq2SeqTrainer.resume(tmp_path / "b.pt", data, valid, vocab=tv, overrides={"epochs": 2},
                                    progress=False)
    assert resumed.model.src_vocab == sv
    resumed.fit()
    for (name, a), (_, b) in zip(one.state_dict().items(), resumed.model.state_dict().items()):
        assert torch.allclose(a, b, atol=1e-6), name


def test_checkpoint_without_source_vocabulary_is_refused(tmp_path):
    model = Seq2Seq(config())
    tv = Vocab().fit([["w%d" % i for i in range(5)]])
    with pytest.raises(InputError, match="source vocabulary"):
        save_checkpoint(tmp_path / "m.pt", model, tv)


def test_a_translator_is_never_scored_as_a_language_model_nor_the_reverse(tmp_path, run_cli):
    from neural.models import build_model
    from neural.config import RNNConfig

    tv = Vocab().fit([["w%d" % i for i in range(5)]])
    model = Seq2Seq(config())
    model.src_vocab = Vocab().fit([["s%d" % i for i in range(7)]])
    save_checkpoint(tmp_path / "t.pt", model, tv)
    lm = build_model("rnn", RNNConfig(vocab_size=len(tv), emb_size=4, hidden_size=4, n_layers=1), seed=0)
    save_checkpoint(tmp_path / "lm.pt", lm, tv)
    with pytest.raises(InputError, match="translator"):
        load_model(tmp_path / "t.pt")
    with pytest.raises(InputError, match="not a translator"):
        load_model(tmp_path / "lm.pt", translator=True)
    text = tmp_path / "x.txt"
    text.write_text("w1 w2\n", encoding="utf-8")
    code, _, err = run_cli("ppl", tmp_path / "t.pt", text)
    assert code == 2 and "seq2seq ppl" in err
    code, _, err = run_cli("seq2seq", "translate", tmp_path / "lm.pt", text)
    assert code == 2 and "not a translator" in err
    code, out, err = run_cli("seq2seq", "translate", tmp_path / "t.pt", text, "--beam-size", "2", "-n", "3")
    assert code == 2 and "--nbest" in err
