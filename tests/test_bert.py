"""BERT (neural.bert.model, `ngramlm bert`): the masking rule, NSP pairs, shapes, PLL, checkpoints, pretraining, CLI."""
from __future__ import annotations

import json

import numpy as np
import pytest

torch = pytest.importorskip("torch")
torch.set_num_threads(1)  # tiny models: one thread is fastest, and the machine is shared

from click.testing import CliRunner  # noqa: E402

from corpora import load_corpus  # noqa: E402
from corpora.errors import InputError  # noqa: E402
from corpora.vocab import PAD_ID  # noqa: E402
from neural.bert.model import (IGNORE, BertLM, PretrainConfig, build_bert, encode_sentences, mask_tokens, pack_pairs,
                               pseudo_log_likelihoods, score_heads, sentence_embeddings, sentence_pairs, special_ids,
                               truncate_pair)
from neural.training.bert import pretrain  # noqa: E402
from reports.commands.bert import bert_group  # noqa: E402

V = 1000  # toolkit ids: 0-3 specials, 4..999 words; [CLS] 1000, [SEP] 1001, [MASK] 1002
CLS, SEP, MASK = special_ids(V)


@pytest.fixture(scope="module")
def toy():
    c = load_corpus("toy")
    vocab = c.new_vocab().fit(c.sentences("train"))
    return c, vocab, {s: encode_sentences(vocab, c.sentences(s)) for s in ("train", "valid", "test")}


def _rows(n_rows=400, T=40, seed=0):
    """Pair-shaped rows: [CLS] words [SEP] words [SEP] <pad>..., random lengths."""
    rng = np.random.default_rng(seed)
    ids = torch.full((n_rows, T), PAD_ID, dtype=torch.long)
    for r in range(n_rows):
        m, n = rng.integers(1, 15), rng.integers(1, 15)
        row = [CLS, *rng.integers(3, V, m), SEP, *rng.integers(3, V, n), SEP]
        ids[r, :len(row)] = torch.tensor(row)
    return ids


# ---------------------------------------------------------------------------- the masking rule
def test_masking_rule_80_10_10_on_a_seeded_run():
    ids = _rows(1500)
    inputs, labels = mask_tokens(ids, vocab_size=V, generator=torch.Generator().manual_seed(7))
    words = (ids >= 3) & (ids < V)
    selected = labels != IGNORE
    # Only word positions are ever selected, changed or labelled; specials and padding never move.
    assert not (selected & ~words).any()
    assert torch.equal(inputs[~selected], ids[~selected])
    assert torch.equal(labels[selected], ids[selected])
    # 15 % of each row's words, rounded, at least one.
    per_row = selected.sum(1).float()
    expect = torch.clamp(torch.round(0.15 * words.sum(1).float()), min=1)
    assert torch.equal(per_row, expect)
    share = selected.sum().item() / words.sum().item()
    assert abs(share - 0.15) < 0.03
    n = selected.sum().item()
    masked = (inputs[selected] == MASK).sum().item() / n
    unchanged = (inputs[selected] == ids[selected]).sum().item() / n
    random = 1 - masked - unchanged
    # About 3,400 selected positions: a binomial share's standard error is under 0.7 %, so 3 % is > 4 sigma.
    assert n > 3000
    assert abs(masked - 0.8) < 0.03 and abs(random - 0.1) < 0.03 and abs(unchanged - 0.1) < 0.03
    # Random replacements are words, never a special.
    rand = selected & (inputs != MASK) & (inputs != ids)
    assert ((inputs[rand] >= 3) & (inputs[rand] < V)).all()


def test_masking_is_a_pure_function_of_the_generator():
    ids = _rows(50)
    a = mask_tokens(ids, vocab_size=V, generator=torch.Generator().manual_seed(3))
    b = mask_tokens(ids, vocab_size=V, generator=torch.Generator().manual_seed(3))
    c = mask_tokens(ids, vocab_size=V, generator=torch.Generator().manual_seed(4))
    assert torch.equal(a[0], b[0]) and torch.equal(a[1], b[1])
    assert not torch.equal(a[1], c[1])


# ---------------------------------------------------------------------------- NSP pairs
def test_sentence_pairs_are_half_true_next():
    pairs = sentence_pairs(2001, np.random.default_rng(0))
    assert len(pairs) == 2000
    true = [p for p in pairs if p[2] == 1]
    assert abs(len(true) / len(pairs) - 0.5) < 0.04
    assert all(j == i + 1 for i, j, _ in true)
    assert all(j not in (i, i + 1) and 0 <= j < 2001 for i, j, y in pairs if y == 0)


def test_pair_packing_and_truncation():
    assert truncate_pair(10, 3, 8) == (5, 3) and truncate_pair(2, 3, 10) == (2, 3) and truncate_pair(6, 6, 8) == (4, 4)
    sents = [np.array([4, 5, 6]), np.array([7, 8]), np.arange(4, 40)]
    ids, seg, is_next = pack_pairs([(0, 1, 1), (2, 0, 0)], sents, vocab_size=V, max_len=16)
    assert ids[0, :8].tolist() == [CLS, 4, 5, 6, SEP, 7, 8, SEP] and (ids[0, 8:] == PAD_ID).all()
    assert seg[0, :8].tolist() == [0, 0, 0, 0, 0, 1, 1, 1]
    assert ids.shape == (2, 16) and ids[1, -1] == SEP  # 36 + 3 words cut to 13: 10 + 3
    assert ids[1].tolist() == [CLS, *range(4, 14), SEP, 4, 5, 6, SEP]
    assert is_next.tolist() == [1, 0]


# ---------------------------------------------------------------------------- model
def test_shapes_and_padding_do_not_leak():
    torch.manual_seed(0)
    m = build_bert(V, "tiny", seed=0).eval()
    sents = [np.array([4, 5, 6]), np.array([7, 8])]
    ids, seg, is_next = pack_pairs([(0, 1, 1)], sents, vocab_size=V, max_len=16)
    h = m.encode(ids, seg)
    assert h.shape == (1, 8, 32)
    assert m.mlm_log_probs(h).shape == (1, 8, V - 3)
    assert torch.allclose(m.mlm_log_probs(h).exp().sum(-1), torch.ones(1, 8), atol=1e-5)
    assert m.nsp_logits(h).shape == (1, 2)
    # Extra padding changes nothing at the real positions (the attention mask hides it).
    padded = torch.cat([ids, torch.zeros(1, 5, dtype=torch.long)], 1)
    h2 = m.encode(padded, torch.cat([seg, torch.zeros(1, 5, dtype=torch.long)], 1))
    assert torch.allclose(h2[:, :8], h, atol=1e-5)
    # Tied output layer: the MLM uses the word rows of the token embedding.
    assert m.tok_emb.weight.shape == (V + 3, 32)
    with pytest.raises(InputError, match="masked LM"):
        m(ids)  # the causal interface refuses: BERT has no left-to-right probabilities


@pytest.mark.parametrize("norm", ["pre", "post"])
def test_pll_equals_a_hand_loop_over_positions(norm):
    m = build_bert(V, "tiny", seed=1, norm=norm, max_len=8).eval()
    with torch.no_grad():  # nonzero biases and a non-trivial LN so the check is not vacuous
        for p in m.parameters():
            p.add_(0.05 * torch.randn_like(p))
    sents = [np.array([5, 9, 4, 300, 7]), np.array([11]), np.array([], dtype=np.int64),
             np.arange(20, 31)]  # the last is longer than max_len - 2 = 6: scored through windows
    got = pseudo_log_likelihoods(m, sents, max_rows=7)
    assert [len(g) for g in got] == [5, 1, 0, 11]
    for s, lp in zip(sents, got):
        for t in range(len(s)):
            w = min(len(s), 6)
            a = min(max(t - w // 2, 0), len(s) - w)
            window = s[a:a + w].copy()
            window[t - a] = MASK
            row = torch.tensor([[CLS, *window.tolist(), SEP]])
            with torch.no_grad():
                ref = torch.log_softmax(m.mlm_scores(m.encode(row))[0, t - a + 1], -1)[s[t] - 3].item()
            assert lp[t] == pytest.approx(ref, abs=1e-5)


def test_checkpoint_round_trip_gives_identical_outputs(tmp_path, toy):
    from neural.training.bert import save_bert
    from neural.checkpoint import load_model
    from neural.models import model_name

    _, vocab, splits = toy
    m = build_bert(len(vocab), "tiny", seed=2).eval()
    path = tmp_path / "b.pt"
    save_bert(path, m, vocab)
    m2, vocab2, ckpt = load_model(path)
    assert isinstance(m2, BertLM) and ckpt["model"]["kind"] == "bert" and model_name(m2) == "bert"
    assert vocab2.itos_ == vocab.itos_
    ids, seg, _ = pack_pairs([(0, 1, 1), (2, 5, 0)], splits["valid"], vocab_size=len(vocab), max_len=64)
    with torch.no_grad():
        assert torch.equal(m.encode(ids, seg), m2.encode(ids, seg))
    a = pseudo_log_likelihoods(m, splits["valid"][:5])
    b = pseudo_log_likelihoods(m2, splits["valid"][:5])
    assert all(np.array_equal(x, y) for x, y in zip(a, b))


def test_embeddings(toy):
    _, vocab, splits = toy
    m = build_bert(len(vocab), "tiny", seed=0, max_len=8)
    sents = splits["valid"][:4] + [np.arange(4, 20)]  # one longer than a window
    e = sentence_embeddings(m, sents)
    n = sum(map(len, sents))
    assert e["tokens"].shape == (n, 32) and e["cls"].shape == (5, 32) and e["mean"].shape == (5, 32)
    assert e["offsets"].tolist() == np.concatenate([[0], np.cumsum([len(s) for s in sents])]).tolist()
    first = m.encode(torch.tensor([[len(vocab), *sents[0].tolist(), len(vocab) + 1]]))[0, 1:-1].detach().numpy()
    assert np.allclose(e["tokens"][:len(sents[0])], first, atol=1e-6)


def test_scoring_loops_report_every_word_once_to_their_batch_hook(toy):
    _, vocab, splits = toy
    m = build_bert(len(vocab), "tiny", seed=0, max_len=8)
    sents = splits["valid"][:9] + [np.arange(4, 20), np.array([], dtype=np.int64)]
    seen = []
    pseudo_log_likelihoods(m, sents, max_rows=7, on_batch=seen.append)
    assert len(seen) > 2 and sum(seen) == sum(map(len, sents))  # several batches, every word once
    seen.clear()
    sentence_embeddings(m, sents, batch_size=3, on_batch=seen.append)
    assert len(seen) > 2 and sum(seen) == sum(map(len, sents))


def test_pppl_and_embed_follow_the_thread_rule(tmp_path, toy, monkeypatch):
    """bert pppl / embed with more than one thread re-measure the shared cores after each batch, as
    neural ppl does (one torch thread while other processes use the cores)."""
    from neural.training import contention
    from neural.training.bert import save_bert

    _, vocab, _ = toy
    ckpt = tmp_path / "b.pt"
    save_bert(ckpt, build_bert(len(vocab), "tiny", seed=0), vocab)
    ticks = []
    real_tick = contention.ThreadRule.tick
    monkeypatch.setattr(contention.ThreadRule, "tick", lambda self: ticks.append(self.configured) or real_tick(self))
    r = run("pppl", ckpt, "toy", "--max-sentences", 150, "--threads", 2, "--json")  # > 512 words: batches
    assert r.exit_code == 0, r.output + repr(r.exception)
    assert len(ticks) >= 2 and set(ticks) == {2}
    ticks.clear()
    text = tmp_path / "t.txt"
    text.write_text("tram thano\nzzz voust\n")
    r = run("embed", ckpt, text, "-o", tmp_path / "e.npz", "--threads", 2)
    assert r.exit_code == 0, r.output + repr(r.exception)
    assert ticks and set(ticks) == {2}


# ---------------------------------------------------------------------------- pretraining
def test_pretraining_a_tiny_model_lowers_the_mlm_loss(toy):
    _, vocab, splits = toy
    m = build_bert(len(vocab), "tiny", seed=0)
    cfg = PretrainConfig(max_steps=60, eval_every=30, warmup_steps=10, valid_pairs=200, lr=5e-3)
    before = score_heads(m, splits["valid"], n_pairs=200, seed=cfg.seed)  # the pairs and masks pretrain validates on
    r = pretrain(m, vocab, splits["train"], splits["valid"], cfg, log=lambda s: None)
    assert r.stopped == "max_steps" and r.steps == 60 and [h["step"] for h in r.history] == [30, 60]
    assert r.valid.mlm_loss < before.mlm_loss - 1.0  # from about ln(3967) = 8.3 nats


# ---------------------------------------------------------------------------- command line
def run(*args, **kw):
    return CliRunner().invoke(bert_group, [str(a) for a in args], catch_exceptions=True, **kw)


def test_cli_pretrain_pppl_embed(tmp_path):
    out = tmp_path / "toy-bert.pt"
    r = run("pretrain", "toy", "--size", "tiny", "--max-steps", 20, "--eval-every", 10, "--warmup", 5,
            "--threads", 1, "-o", out, "--json")
    assert r.exit_code == 0, r.output + repr(r.exception)
    summary = json.loads(r.stdout)
    assert summary["stopped"] == "max_steps" and summary["steps"] == 20
    assert 0 <= summary["test"]["mlm_accuracy"] <= 1 and 0 <= summary["test"]["nsp_accuracy"] <= 1
    r = run("pppl", out, "--max-sentences", 10, "--threads", 1, "--json")  # default: the checkpoint's corpus, test
    assert r.exit_code == 0, r.output + repr(r.exception)
    d = json.loads(r.stdout)
    test = load_corpus("toy").sentences("test")[:10]
    assert d["text"] == "toy:test" and d["sentences"] == 10 and d["words"] == sum(map(len, test))
    assert d["eos_counted"] is False and "not a perplexity" in d["caveat"]
    assert 1 < d["pppl"] < 3970 and d["pppl"] == pytest.approx(np.exp(-d["pll_nats"] / d["words"]))
    r = run("pppl", out, "toy", "--max-sentences", 3, "--threads", 1)
    assert r.exit_code == 0 and "PPPL =" in r.output and "not a perplexity" in r.output
    text = tmp_path / "t.txt"
    text.write_text("tram thano\n\nzzz voust\n")
    r = run("embed", out, text, "-o", tmp_path / "e.npz", "--threads", 1)
    assert r.exit_code == 0, r.output + repr(r.exception)
    z = np.load(tmp_path / "e.npz")  # allow_pickle=False: every array is plain
    assert z["tokens"].shape == (4, 32) and z["offsets"].tolist() == [0, 2, 2, 4]
    assert z["words"].tolist() == ["tram", "thano", "zzz", "voust"]


def test_pppl_beside_a_causal_model(tmp_path):
    from ngramlm.commands.train import train_cmd

    out = tmp_path / "b.pt"
    assert run("pretrain", "toy", "--size", "tiny", "--max-steps", 2, "--eval-every", 2, "--threads", 1,
               "-o", out).exit_code == 0
    ng = tmp_path / "toy.npz"
    r = CliRunner().invoke(train_cmd, ["toy", "-o", str(ng)])
    assert r.exit_code == 0, r.output + repr(r.exception)
    r = run("pppl", out, "toy", "--max-sentences", 20, "--beside", ng, "--threads", 1, "--json")
    assert r.exit_code == 0, r.output + repr(r.exception)
    b = json.loads(r.stdout)["beside"][0]
    assert b["ppl_words_only"] > 1 and b["ppl"] > 1 and b["ppl"] != b["ppl_words_only"]


def test_bad_checkpoints_are_clear_errors(tmp_path):
    r = run("pppl", tmp_path / "missing.pt", "toy")
    assert isinstance(r.exception, InputError) and "no such checkpoint file" in str(r.exception)
    assert "missing.pt" in str(r.exception) and "fix:" in str(r.exception)
    junk = tmp_path / "junk.pt"
    junk.write_text("hello\n")
    r = run("embed", junk, junk, "-o", tmp_path / "e.npz")
    assert isinstance(r.exception, InputError) and "junk.pt" in str(r.exception)
    assert "not a neural checkpoint" in str(r.exception) and "bert pretrain" in str(r.exception)
    r = run("embed", junk, junk, "-o", tmp_path / "e.txt")
    assert isinstance(r.exception, InputError) and ".npz" in str(r.exception)


def test_a_causal_checkpoint_is_refused_and_bert_is_refused_by_causal_scoring(tmp_path, toy):
    from neural.training.bert import save_bert
    from neural.checkpoint import save_checkpoint
    from neural.models import build_model
    from neural.scoring import ppl_summary

    _, vocab, _ = toy
    lstm = tmp_path / "lstm.pt"
    save_checkpoint(lstm, build_model("rnn", {"vocab_size": len(vocab), "emb_size": 8, "hidden_size": 8,
                                              "n_layers": 1}), vocab)
    r = run("pppl", lstm, "toy")
    assert isinstance(r.exception, InputError) and "not BERT" in str(r.exception) and "lstm.pt" in str(r.exception)
    bert = tmp_path / "bert.pt"
    save_bert(bert, build_bert(len(vocab), "tiny", seed=0), vocab)
    with pytest.raises(InputError, match="bert pppl"):
        ppl_summary(bert, "toy", threads=None)


def test_config_validation_and_round_trip():
    from neural.bert.model import BERT_PRESETS, BertConfig

    cfg = BertConfig(vocab_size=50, d_model=30, n_heads=4)
    with pytest.raises(InputError, match="does not divide"):
        cfg.validate()
    with pytest.raises(InputError, match="--norm"):
        BertConfig(vocab_size=50, norm="middle").validate()
    small = BertConfig.from_dict({**BERT_PRESETS["small"].to_dict(), "vocab_size": 50})
    assert small.to_dict()["d_model"] == 128 and small.vocab_size == 50
    with pytest.raises(InputError, match="unknown BertConfig keys"):
        BertConfig.from_dict({"vocab_size": 50, "cell": "lstm"})
    with pytest.raises(InputError, match="unknown BERT size"):
        build_bert(50, "huge")
