"""The encoder-decoder Transformer translator: causal and padding masks, the key/value cache against
teacher forcing, attention maps, shared decoding (greedy = beam 1, brute force, sampling), checkpoints,
a copy task learnt, exposure bias on fra-eng, the CLI and `compare` on a TSV of pairs."""
from __future__ import annotations

import itertools
import json
import math
import os
import random
from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("sacrebleu")

from corpora.errors import InputError  # noqa: E402
from corpora.vocab import BOS_ID, EOS_ID, Vocab  # noqa: E402
from neural.checkpoint import load_model, save_checkpoint  # noqa: E402
from neural.config import Seq2SeqConfig, TrainConfig  # noqa: E402
from neural.models import build_model, model_name  # noqa: E402
from neural.seq2seq.pairs import pair_batch  # noqa: E402
from neural.seq2seq.rnn import Seq2Seq  # noqa: E402
from neural.training.seq2seq import Seq2SeqTrainer  # noqa: E402
from neural.seq2seq.transformer import (SEQ2SEQ_TRANSFORMER_PRESETS, SEQ2SEQ_TRANSFORMER_TRAIN, Seq2SeqTransformer,
                                        Seq2SeqTransformerConfig, TranslatorConfig,
                                        resolve_seq2seq_transformer_config)
from neural.seq2seq.translate import (attention_for, attention_maps_for, beam_translate, corpus_bleu,
                                      greedy_translate, ids_to_text, sample_translate, score_pairs)
from conftest import check_attention_rows, sequence_log_prob, write_reversal_pairs  # noqa: E402

FRA_ENG = Path(os.environ.get("NGRAMLM_TEST_CORPORA", "../shared/corpora"))


def config(**kw) -> Seq2SeqTransformerConfig:
    base = dict(vocab_size=9, src_vocab_size=11, d_model=16, n_heads=2, n_layers=2, d_ff=32, dropout=0.0)
    return Seq2SeqTransformerConfig(**{**base, **kw})


def model(seed: int = 0, **kw) -> Seq2SeqTransformer:
    torch.manual_seed(seed)
    return Seq2SeqTransformer(config(**kw)).eval()


VARIANTS = [dict(), dict(attention="scratch"), dict(norm="post"), dict(positional="learned", max_len=16)]


def test_config_round_trip_presets_and_refusals():
    cfg = config(norm="post")
    assert Seq2SeqTransformerConfig.from_dict(cfg.to_dict()) == cfg
    # A checkpoint's "seq2seq" config is a GRU translator's unless it says arch = transformer.
    assert TranslatorConfig.from_dict(cfg.to_dict()) == cfg
    gru = Seq2SeqConfig(vocab_size=9, src_vocab_size=11)
    assert TranslatorConfig.from_dict(gru.to_dict()) == gru
    assert isinstance(build_model("seq2seq", gru.to_dict()), Seq2Seq)
    assert isinstance(build_model("seq2seq", cfg.to_dict()), Seq2SeqTransformer)
    for size, preset in SEQ2SEQ_TRANSFORMER_PRESETS.items():
        m, t = resolve_seq2seq_transformer_config(vocab_size=20, src_vocab_size=30, size=size)
        m.validate()
        t.validate()
        assert (m.d_model, m.n_heads, m.vocab_size, m.src_vocab_size) == (preset.d_model, preset.n_heads, 20, 30)
    m, t = resolve_seq2seq_transformer_config(vocab_size=20, src_vocab_size=30, model={"d_model": 64, "n_heads": None},
                                              train={"lr": None, "epochs": 3})
    assert (m.d_model, m.d_ff, m.n_heads, t.lr, t.epochs) == (64, 128, 4, SEQ2SEQ_TRANSFORMER_TRAIN.lr, 3)
    # The CLI's help texts quote the default preset without importing torch: they must agree.
    from neural.commands import seq2seq as cmd

    default = SEQ2SEQ_TRANSFORMER_PRESETS["default"]
    assert (cmd._S2T.d_model, cmd._S2T.n_heads, cmd._S2T.dropout) == (default.d_model, default.n_heads, default.dropout)
    assert cmd._S2T_TRAIN.lr == SEQ2SEQ_TRANSFORMER_TRAIN.lr
    for bad, match in [(dict(n_heads=3), "--heads 3 does not divide"), (dict(positional="rope"), "positional"),
                       (dict(norm="sandwich"), "pre or post"), (dict(n_layers=0), "--layers"),
                       (dict(dropout=1.0), "--dropout"), (dict(arch="rnn"), "arch")]:
        with pytest.raises(InputError, match=match) as e:
            Seq2SeqTransformer(config(**bad))
        assert e.value.fix


@pytest.mark.parametrize("variant", VARIANTS)
def test_changing_a_later_target_token_leaves_earlier_outputs_unchanged(variant):
    m = model(1, **variant)
    (src, src_len, tgt_in), _ = pair_batch([[4, 5, 6]], [[4, 5, 6, 7, 8]])
    changed = tgt_in.clone()
    changed[0, 3] = 8  # the 4th input token (what position 3 reads)
    with torch.no_grad():
        a, _, _ = m.teacher_forced(src, src_len, tgt_in)
        b, _, _ = m.teacher_forced(src, src_len, changed)
    assert torch.equal(a[0, :3], b[0, :3])  # positions before it: bit for bit the same
    assert not torch.allclose(a[0, 3:], b[0, 3:])  # from it on: different


@pytest.mark.parametrize("variant", VARIANTS)
def test_padding_the_source_changes_nothing(variant):
    m = model(2, **variant)
    srcs, tgts = [[4, 5, 6, 7, 8, 9, 10], [4], [10, 6]], [[4, 5], [6, 7, 8, 4, 5], [5]]
    together = score_pairs(m, srcs, tgts, per_token=True)
    alone = np.concatenate([score_pairs(m, [s], [t], per_token=True) for s, t in zip(srcs, tgts)])
    assert np.allclose(together, alone, atol=1e-5)
    assert len(together) == sum(len(t) + 1 for t in tgts)  # every word and </s>
    # Extra padding columns (a longer batch) change no real position's output either.
    (src, src_len, tgt_in), _ = pair_batch(srcs, tgts)
    wide = torch.cat([src, torch.zeros(3, 4, dtype=torch.long)], dim=1)
    with torch.no_grad():
        a, _, _ = m.teacher_forced(src, src_len, tgt_in)
        b, _, _ = m.teacher_forced(wide, src_len, tgt_in)
    assert torch.allclose(a, b, atol=1e-5)


@pytest.mark.parametrize("variant", VARIANTS)
def test_teacher_forcing_equals_cached_step_by_step_decoding(variant):
    m = model(3, **variant)
    srcs, tgts = [[4, 5, 6], [7, 8, 9, 10, 4]], [[7, 8, 4, 5], [6]]
    (s, s_len, tgt_in), y = pair_batch(srcs, tgts)
    with torch.no_grad():
        logits, _, w = m.teacher_forced(s, s_len, tgt_in, need_weights=True)
        forced = torch.log_softmax(logits, -1)
        memory, state = m.encode(s, s_len)
        for t in range(tgt_in.size(1)):
            logp, state, w_t = m.step(memory, tgt_in[:, t], state)
            assert state[0].shape == (2, 2, 2, t + 1, 8)  # (B, layers, heads, positions so far, d_head)
            for b in range(2):
                if y[b, t] != 0:  # a real target position
                    assert torch.allclose(logp[b], forced[b, t], atol=1e-5)
                    assert torch.allclose(w_t[b], w[b, t], atol=1e-5)
    assert float(forced[..., :2].exp().sum()) == 0.0  # <pad> and <s> are never predicted


def test_sdpa_and_scratch_attention_agree():
    a, b = model(4), model(4, attention="scratch")
    assert torch.equal(a.src_embedding.weight, b.src_embedding.weight)
    srcs, tgts = [[4, 5, 6, 7], [8]], [[4, 5], [6, 7, 8]]
    assert np.allclose(score_pairs(a, srcs, tgts, per_token=True), score_pairs(b, srcs, tgts, per_token=True),
                       atol=1e-5)


def test_attention_rows_sum_to_one_for_all_three_kinds_and_masked_entries_are_exactly_zero():
    m = model(5, n_heads=4)
    srcs, tgts = [[4, 5, 6, 7, 8], [9, 10]], [[4, 5, 6], [7]]
    (src, src_len, tgt_in), _ = pair_batch(srcs, tgts)
    maps = m.attention_maps(src, src_len, tgt_in)
    B, S, T = 2, src.size(1), tgt_in.size(1)
    assert [w.shape for w in maps["encoder"]] == [(B, 4, S, S)] * 2
    assert [w.shape for w in maps["decoder"]] == [(B, 4, T, T)] * 2
    assert [w.shape for w in maps["cross"]] == [(B, 4, T, S)] * 2
    for kind, ws in maps.items():
        for w in ws:
            assert torch.allclose(w.sum(-1), torch.ones(w.shape[:-1]), atol=1e-6), kind
    for w in maps["encoder"] + maps["cross"]:
        assert torch.all(w[1, ..., 3:] == 0.0)  # the second source has 3 real tokens (2 words and </s>)
    for w in maps["decoder"]:
        assert torch.all(w.triu(diagonal=1) == 0.0)  # no position looks ahead
    # One pair's maps as numpy, and the heatmap the report shows: the last layer's mean over the heads.
    one = attention_maps_for(m, srcs[0], tgts[0])
    assert one["cross"].shape == (2, 4, len(tgts[0]) + 1, len(srcs[0]) + 1)
    assert one["encoder"].shape == (2, 4, 6, 6) and one["decoder"].shape == (2, 4, 4, 4)
    assert np.allclose(attention_for(m, srcs[0], tgts[0]), one["cross"][-1].mean(axis=0), atol=1e-6)


@pytest.mark.parametrize("alpha", [0.0, 1.0])
def test_greedy_equals_beam_one_and_a_wide_beam_finds_the_brute_force_best(alpha):
    m = model(6, vocab_size=6)  # predicted: </s>, <unk>, 2 words
    src, max_len = [4, 5, 6], 3
    tokens = list(range(2, 6))
    candidates = [list(seq) for n in range(1, max_len + 1) for seq in itertools.product(tokens, repeat=n)
                  if EOS_ID not in seq[:-1] and (seq[-1] == EOS_ID or n == max_len)]
    with torch.no_grad():
        scored = [(sequence_log_prob(m, src, c), c) for c in candidates]
    best = max(scored, key=lambda lc: lc[0] / len(lc[1]) ** alpha)
    hyps = beam_translate(m, src, beam_size=len(tokens) ** max_len, max_len=max_len, alpha=alpha)
    assert hyps[0].ids == best[1] and math.isclose(hyps[0].log_prob, best[0], abs_tol=1e-5)
    assert len(hyps) == len(candidates)
    for seed in range(5):  # beam size 1 is greedy decoding, on several random models and sources
        mm = model(seed, vocab_size=12)
        sources = [[4, 5, 6], [7], [8, 9, 10, 4, 5]]
        greedy = greedy_translate(mm, sources, max_len=8)
        assert greedy == [beam_translate(mm, s, beam_size=1, max_len=8)[0].ids for s in sources]


def test_sampling_is_seeded_and_a_cold_temperature_is_greedy():
    m = model(7, vocab_size=12)
    sources = [[4, 5, 6], [7, 8], [9]]
    a = sample_translate(m, sources, temperature=1.0, seed=3, max_len=8)
    assert a == sample_translate(m, sources, temperature=1.0, seed=3, max_len=8)
    assert all(t != BOS_ID and t != 0 for row in a for t in row)
    assert sample_translate(m, sources, temperature=1e-4, seed=1, max_len=8) == greedy_translate(m, sources, max_len=8)
    with pytest.raises(InputError, match="temperature"):
        sample_translate(m, sources, temperature=0.0)


def test_learned_positions_refuse_a_sentence_longer_than_they_cover():
    m = model(8, positional="learned", max_len=6)
    with pytest.raises(InputError, match="learned positions cover 6") as e:
        greedy_translate(m, [[4, 5, 6, 7, 8, 9, 10]])
    assert "sinusoidal" in e.value.fix
    assert len(greedy_translate(model(8), [[4] * 200], max_len=3)[0]) <= 3  # sinusoids: any length


def test_checkpoint_round_trip_gives_identical_outputs(tmp_path):
    m = model(9, vocab_size=12)
    m.src_vocab = Vocab().fit([["s%d" % i for i in range(7)]])
    tv = Vocab().fit([["w%d" % i for i in range(8)]])
    assert len(tv) == 12 and len(m.src_vocab) == 11
    save_checkpoint(tmp_path / "t.pt", m, tv)
    loaded, vocab, ckpt = load_model(tmp_path / "t.pt", translator=True)
    assert isinstance(loaded, Seq2SeqTransformer) and loaded.config == m.config
    assert ckpt["model"]["name"] == model_name(loaded) == "seq2seq-transformer"
    assert vocab == tv and loaded.src_vocab == m.src_vocab
    assert loaded.decoder.weight is loaded.embedding.weight  # still tied
    srcs, tgts = [[4, 5, 6], [7, 8, 9, 10]], [[4, 5], [6, 7, 8]]
    assert np.array_equal(score_pairs(loaded, srcs, tgts, per_token=True), score_pairs(m, srcs, tgts, per_token=True))
    assert greedy_translate(loaded, srcs) == greedy_translate(m, srcs)
    with pytest.raises(InputError, match="translator"):
        load_model(tmp_path / "t.pt")  # never scored as a language model


def _copy_data(n, rng):
    letters = list("abcdefghijklmnop")
    return [(s, list(s)) for s in ([rng.choice(letters) for _ in range(rng.randint(3, 8))] for _ in range(n))]


@pytest.mark.slow
def test_a_tiny_transformer_learns_to_copy_across_a_resumed_run(tmp_path):
    rng = random.Random(0)
    train, valid, test = _copy_data(2000, rng), _copy_data(100, rng), _copy_data(100, rng)
    sv, tv = Vocab().fit([s for s, _ in train]), Vocab().fit([t for _, t in train])

    def enc(pairs):
        return [sv.encode(s) for s, _ in pairs], [tv.encode(t) for _, t in pairs]

    torch.manual_seed(0)
    m = Seq2SeqTransformer(Seq2SeqTransformerConfig(vocab_size=len(tv), src_vocab_size=len(sv), d_model=32,
                                                    n_heads=2, n_layers=1, d_ff=64, dropout=0.0))
    m.src_vocab = sv
    cfg = TrainConfig(epochs=2, batch_size=32, bptt=1, optimizer="adamw", lr=3e-3, clip=1.0, schedule="constant",
                      patience=0, eval_batch_size=256)
    Seq2SeqTrainer(m, tv, enc(train), enc(valid), cfg, out=tmp_path / "copy.pt", progress=False).fit()
    trainer = Seq2SeqTrainer.resume(tmp_path / "copy.pt", enc(train), enc(valid), vocab=tv,
                                    overrides={"epochs": 7}, progress=False)
    assert isinstance(trainer.model, Seq2SeqTransformer) and trainer.model.src_vocab == sv
    result = trainer.fit()
    assert result.best_val_ppl < 1.1
    src, _ = enc(test)
    hyps = [ids_to_text(tv, h) for h in greedy_translate(trainer.model, src, max_len=12)]
    bleu, _ = corpus_bleu(hyps, [" ".join(t) for _, t in test])
    assert bleu > 95.0
    # Cross-attention of the copy: output step t (reading y_{t-1}) looks mostly at source position t.
    hits = total = 0
    for s, (_, t) in zip(src[:30], test[:30]):
        w = attention_for(trainer.model, s, tv.encode(t))
        hits += sum(int(np.argmax(w[i])) == i for i in range(len(s)))
        total += len(s)
    assert hits / total > 0.8


def _teacher_forced_text(m, vocab, src, tgt) -> list:
    """The argmax at every reference position (the model reads the reference prefix), ``</s>``'s position left out."""
    (s, s_len, tgt_in), y = pair_batch(src, tgt)
    with torch.no_grad():
        logits, _, _ = m.teacher_forced(s, s_len, tgt_in)
    pred, real = logits.argmax(-1), y != 0
    return [" ".join(vocab.lookup_token(int(i)) for i in pred[b][real[b]][:-1]) for b in range(len(src))]


@pytest.mark.slow
@pytest.mark.skipif(not (FRA_ENG / "fra-eng" / "fra-eng.tsv").exists(),
                    reason="real corpora not found: fra-eng (set NGRAMLM_TEST_CORPORA)")
def test_exposure_bias_on_fra_eng_teacher_forced_bleu_beats_free_running():
    """Trained on reference prefixes, the decoder does better reading them (teacher forcing) than reading its
    own output (free running): the gap is exposure bias.  About 25 s of training (tiny model, 8 epochs)."""
    from corpora.parallel import load_parallel

    torch.set_num_threads(1)
    par = load_parallel("fra-eng", data_dir=FRA_ENG, seed=0)
    mcfg, tcfg = resolve_seq2seq_transformer_config(vocab_size=len(par.tgt_vocab), src_vocab_size=len(par.src_vocab),
                                                    size="tiny", train=dict(epochs=8, lr=3e-3, patience=0, seed=1))
    torch.manual_seed(1)
    m = Seq2SeqTransformer(mcfg)
    m.src_vocab = par.src_vocab
    Seq2SeqTrainer(m, par.tgt_vocab, par.encode("train"), par.encode("valid"), tcfg, progress=False).fit()
    m.eval()
    src, tgt = par.encode("test")
    refs = [" ".join(t) for _, t in par.pairs["test"]]
    forced, _ = corpus_bleu(_teacher_forced_text(m, par.tgt_vocab, src, tgt), refs)
    free, _ = corpus_bleu([ids_to_text(par.tgt_vocab, h) for h in greedy_translate(m, src)], refs)
    assert forced > 1.3 * free > 0.0, (forced, free)


# ---------------------------------------------------------------------------- the CLI and compare
def test_cli_trains_scores_and_translates_with_the_transformer(run_cli, pairs_tsv, tmp_path):
    out = tmp_path / "t.pt"
    code, stdout, err = run_cli("seq2seq", "train", str(pairs_tsv), "--arch", "transformer", "--size", "tiny",
                                "--d-model", "16", "--epochs", "2", "--no-progress", "-o", out, "--json")
    assert code == 0, err
    summary = json.loads(stdout)
    assert summary["architecture"] == "seq2seq-transformer" and summary["epochs"] == 2.0
    assert "Seq2SeqTransformer" in err and "d_model=16" in err and "d_ff=32" in err
    assert summary["test"]["pairs"] == 30 and summary["test"]["ppl"] > 1.0
    code, stdout, err = run_cli("seq2seq", "ppl", out, "--json")
    assert code == 0, err
    scored = json.loads(stdout)
    assert scored["architecture"] == "seq2seq-transformer"
    assert scored["ppl"] == pytest.approx(summary["test"]["ppl"], rel=1e-6)
    code, stdout, err = run_cli("seq2seq", "translate", out, "--beam-size", "3", "-n", "2", input="a b c .\nf e .\n")
    assert code == 0 and len(stdout.splitlines()) == 4, err
    code, stdout, err = run_cli("seq2seq", "translate", out, "--temperature", "0.7", "--seed", "5", "--json",
                                input="a b c .\n")
    assert code == 0, err
    again = run_cli("seq2seq", "translate", out, "--temperature", "0.7", "--seed", "5", "--json", input="a b c .\n")[1]
    assert json.loads(stdout)["sentences"] == json.loads(again)["sentences"]
    code, stdout, err = run_cli("seq2seq", "translate", out, "--split", "test", "--json")
    assert code == 0 and 0.0 <= json.loads(stdout)["bleu"] <= 100.0, err
    code, stdout, err = run_cli("seq2seq", "train", "--resume", out, "--epochs", "3", "--no-progress", "--json")
    assert code == 0 and json.loads(stdout)["epochs"] == 3.0, err


def test_cli_refuses_options_of_the_other_architecture(run_cli, pairs_tsv, tmp_path):
    code, _, err = run_cli("seq2seq", "train", str(pairs_tsv), "--arch", "transformer", "--cell", "lstm",
                           "--no-attention", "-o", tmp_path / "a.pt")
    assert code == 2 and "--cell, --no-attention do not apply to --arch transformer" in err
    code, _, err = run_cli("seq2seq", "train", str(pairs_tsv), "--d-model", "64", "-o", tmp_path / "b.pt")
    assert code == 2 and "--d-model does not apply to --arch rnn" in err and "--arch transformer" in err
    code, _, err = run_cli("seq2seq", "train", str(pairs_tsv), "--arch", "transformer", "--d-model", "30",
                           "--heads", "4", "-o", tmp_path / "c.pt")
    assert code == 2 and "--heads 4 does not divide --d-model 30" in err and not (tmp_path / "c.pt").exists()


@pytest.mark.slow
def test_compare_trains_the_transformer_translator_when_neural_lists_transformer(run_cli, tmp_path):
    tsv = write_reversal_pairs(tmp_path / "rev.tsv", n=300, seed=0)
    out = tmp_path / "cmp"
    code, stdout, err = run_cli("compare", str(tsv), "--quick", "--out", out, "--smoothers", "mkn",
                                "--neural", "transformer", "--beams", "1,2")
    assert code == 0, err
    res = json.loads((out / "results.json").read_text("utf-8"))
    by_id = {r["id"]: r for r in res["rows"]}
    row = by_id["seq2seq-transformer"]
    assert row["label"] == "Transformer encoder-decoder (tiny)" and row["conditional"]
    assert row["test"]["tokens"] == by_id["seq2seq-attn"]["test"]["tokens"] == by_id["transformer"]["test"]["tokens"]
    assert {(b["beam"], b["alpha"]) for b in res["bleu"] if b["model"] == "seq2seq-transformer"} == \
        {(1, 0.0), (2, 0.0), (2, 0.7)}
    assert all("seq2seq-transformer" in e["translations"] for e in res["examples"])
    kinds = [(a["model"], a["kind"]) for a in res["attention"]]
    assert kinds.count(("seq2seq-attn", "cross")) == kinds.count(("seq2seq-transformer", "cross")) == 6
    assert kinds.count(("seq2seq-transformer", "encoder")) == kinds.count(("seq2seq-transformer", "decoder")) == 2
    check_attention_rows(res["attention"])
    md = (out / "report.md").read_text("utf-8")
    html = (out / "report.html").read_text("utf-8")
    assert "| Transformer encoder-decoder (tiny) | yes |" in md
    # the BLEU grid and the examples head the translator's column with its display label, not its id
    bleu_head = next(line for line in md.splitlines() if line.startswith("| decoder | α |"))
    assert "Transformer encoder-decoder (tiny)" in bleu_head and "seq2seq-transformer" not in bleu_head
    assert "  - Transformer encoder-decoder (tiny): greedy «" in md
    assert "Transformer: decoder self-attention, causal (layer 1 of 1, mean of 2 heads), test pair 1" in md
    assert html.count("<noscript>") == len(res["attention"]) and 'id="s2s-temp"' in html
    assert (out / "plots" / f"attention_{len(res['attention'])}.png").stat().st_size > 1000
