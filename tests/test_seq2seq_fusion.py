"""Shallow fusion of a target-side n-gram model into the translators' search (neural.seq2seq.translate,
fusion.target): the fused beam search finds the brute-force best of log P(y | x) + w log P_LM(y), weight 0
is the translator alone, and the commands (`seq2seq target-text`, `fusion`, `translate --lm`) run end to end."""
from __future__ import annotations

import itertools
import json
import math

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("sacrebleu")

from corpora.vocab import EOS_ID, Vocab  # noqa: E402
from neural.config import Seq2SeqConfig  # noqa: E402
from neural.seq2seq.rnn import Seq2Seq  # noqa: E402
from neural.seq2seq.translate import beam_translate, greedy_translate  # noqa: E402
from conftest import sequence_log_prob  # noqa: E402

WORDS = ["x", "y"]  # the translator's target words: ids 4 and 5 after <pad> <s> </s> <unk>


@pytest.fixture(scope="module")
def parts():
    from fusion.target import TargetVocabLM
    from ngramlm import NgramLM

    torch.manual_seed(3)
    model = Seq2Seq(Seq2SeqConfig(vocab_size=6, src_vocab_size=11, emb_size=6, hidden_size=5, n_layers=2, dropout=0.0,
                                  attn_size=4, attention=True)).eval()
    target = Vocab().fit([WORDS])
    assert target.itos_[4:] == WORDS and len(target) == 6
    # An n-gram model of the target language that likes "y y" and knows no "x" (scored as its <unk>).
    sents = [["y", "y"], ["y"], ["y", "z"], ["z", "y", "y"]] * 3
    lm_vocab = Vocab().fit(sents)
    ngram = NgramLM(order=2, smoothing="wb").fit(lm_vocab.encode_sentences(sents), vocab=lm_vocab)
    return model, target, ngram, TargetVocabLM(ngram, target.itos_)


def test_target_vocab_lm_reads_the_models_probabilities_word_by_word(parts):
    _, target, ngram, lm = parts
    assert lm.n_unmapped == 1  # "x"
    states = lm.start(1)
    lp = lm.log_probs(states)[0]
    # The model's own p(w | <s>) for every target word; "x" gets <unk>'s, <s> and <pad> log 0.
    for tid, word in enumerate(target.itos_):
        want = ngram.prob("<unk>" if word == "x" else word, ["<s>"])
        got = math.exp(float(lp[tid]))
        assert got == pytest.approx(want, rel=1e-6, abs=1e-300), word  # the tensor form: float32 rounding at worst
    states = lm.advance(states, torch.tensor([5]))  # "y"
    assert math.exp(float(lm.log_probs(states)[0, 5])) == pytest.approx(ngram.prob("y", ["<s>", "y"]), rel=1e-6)


def _lm_log_prob(ngram, target, seq) -> float:
    words = ["<unk>" if target.itos_[t] == "x" else target.itos_[t] for t in seq]
    history, total = ["<s>"], 0.0
    for w in words:
        total += math.log(ngram.prob(w, history))
        history.append(w)
    return total


@pytest.mark.parametrize("weight", [0.0, 0.5, 2.0])
def test_fused_beam_search_finds_the_brute_force_best(parts, weight):
    model, target, ngram, lm = parts
    src, max_len = [4, 5, 6], 3
    tokens = list(range(2, 6))
    candidates = []
    for n in range(1, max_len + 1):
        for seq in itertools.product(tokens, repeat=n):
            if EOS_ID in seq[:-1] or (seq[-1] != EOS_ID and n < max_len):
                continue
            candidates.append(list(seq))
    with torch.no_grad():
        scored = [(sequence_log_prob(model, src, c) + weight * _lm_log_prob(ngram, target, c), c) for c in candidates]
    best = max(scored, key=lambda sc: sc[0])
    hyps = beam_translate(model, src, beam_size=len(tokens) ** max_len, max_len=max_len, lm=lm, lm_weight=weight)
    assert hyps[0].ids == best[1]
    assert math.isclose(hyps[0].log_prob, best[0], abs_tol=1e-5)
    # Beam 1 is greedy decoding, fused the same way.
    one = beam_translate(model, src, beam_size=1, max_len=max_len, lm=lm, lm_weight=weight)[0].ids
    assert one == greedy_translate(model, [src], max_len=max_len, lm=lm, lm_weight=weight)[0]


def test_a_strong_lm_changes_the_output_and_weight_zero_changes_nothing(parts):
    model, target, ngram, lm = parts
    srcs = [[4, 5, 6], [7, 8], [9, 10, 4, 5]]
    alone = greedy_translate(model, srcs, max_len=4)
    assert greedy_translate(model, srcs, max_len=4, lm=lm, lm_weight=0.0) == alone
    strong = greedy_translate(model, srcs, max_len=4, lm=lm, lm_weight=50.0)
    # The LM's favourite continuation wins everywhere: y first (p(y | <s>) is its largest).
    assert all(h[0] == 5 for h in strong) and strong != alone


def test_fusion_commands_end_to_end(run_cli, pairs_tsv, tmp_path):
    small = ["--emb-size", "16", "--hidden-size", "16", "--attn-size", "16", "--layers", "1", "--no-progress"]
    ckpt = tmp_path / "t.pt"
    code, _, err = run_cli("seq2seq", "train", str(pairs_tsv), *small, "--epochs", "2", "-o", ckpt)
    assert code == 0, err
    code, text, err = run_cli("seq2seq", "target-text", ckpt)
    assert code == 0, err
    lines = text.splitlines()
    assert len(lines) == 240 and all(line.split() for line in lines)  # the train split's targets, tokenized
    (tmp_path / "tgt.txt").write_text(text)
    lm = tmp_path / "tgt.arpa"
    assert run_cli("train", str(tmp_path / "tgt.txt"), "--order", "3", "-o", lm)[0] == 0
    code, out, err = run_cli("seq2seq", "fusion", ckpt, "--lm", lm, "--weights", "0,0.3", "--json")
    assert code == 0, err
    r = json.loads(out)
    assert [row["lm_weight"] for row in r["valid"]] == [0.0, 0.3]
    assert r["weight"] in (0.0, 0.3) and r["test_alone"]["lm_weight"] == 0.0
    assert r["unmapped_target_ids"] == 0  # the LM was trained on the same target tokens
    code, out, err = run_cli("seq2seq", "translate", ckpt, "--split", "test", "--beam-size", "2", "--lm", lm,
                             "--lm-weight", "0.3", "--json")
    assert code == 0, err
    assert json.loads(out)["lm_weight"] == 0.3
    code, _, err = run_cli("seq2seq", "translate", ckpt, "--split", "test", "--lm", lm)
    assert code == 2 and "--lm-weight" in err


def test_neural_lm_generation_fused_with_an_ngram_model():
    """`neural generate --lm`: greedy follows argmax(log p + w log p_LM) token by token; weight 0 is the
    model alone; a heavy weight hands the choice to the n-gram model; seeded sampling repeats."""
    from fusion.target import TargetVocabLM
    from neural.config import RNNConfig
    from neural.generate import greedy, sample
    from neural.models import build_model
    from ngramlm import NgramLM

    sents = [["a", "b", "c"], ["b", "c"], ["c", "a", "b"], ["a", "c"]] * 4
    vocab = Vocab().fit(sents)
    rnn = build_model("rnn", RNNConfig(vocab_size=len(vocab), cell="lstm", emb_size=6, hidden_size=6, n_layers=1),
                      seed=3).eval()
    ngram = NgramLM(order=2, smoothing="wb").fit(vocab.encode_sentences(sents), vocab=vocab)
    lm = TargetVocabLM(ngram, vocab.itos_)
    prompt = [int(vocab.encode(["a"])[0])]
    assert greedy(rnn, prompt, 6, lm=lm, lm_weight=0.0) == greedy(rnn, prompt, 6)
    heavy = greedy(rnn, prompt, 6, lm=lm, lm_weight=100.0, stop_at_eos=False)
    history = ["<s>", "a"]
    for tok in heavy:  # each token is the n-gram model's own argmax after the same history
        probs = {w: ngram.prob(w, history) for w in vocab.itos_ if w not in ("<pad>", "<s>")}
        assert vocab.itos_[tok] == max(probs, key=probs.get)
        history = ["<s>"] if vocab.itos_[tok] == "</s>" else history + [vocab.itos_[tok]]
    one = sample(rnn, prompt, 8, seed=5, lm=lm, lm_weight=0.5)
    assert one == sample(rnn, prompt, 8, seed=5, lm=lm, lm_weight=0.5)


def test_neural_generate_lm_options_go_together(run_cli, tmp_path):
    code, _, err = run_cli("neural", "generate", str(tmp_path / "any.pt"), "--lm", str(tmp_path / "lm.arpa"))
    assert code == 2 and "--lm-weight" in err
    code, _, err = run_cli("neural", "generate", str(tmp_path / "any.pt"), "--strategy", "beam", "--lm",
                           str(tmp_path / "lm.arpa"), "--lm-weight", "0.3")
    assert code == 2 and "greedy and sampled" in err
