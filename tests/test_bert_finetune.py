"""BERT fine-tuning (neural.bert.finetune, `ngramlm bert finetune`): the tasks' examples, learning, checkpoints, errors.

No corpus is needed: the texts are written here or generated.  The models are tiny and one thread runs them.
"""
from __future__ import annotations

import json

import numpy as np
import pytest

torch = pytest.importorskip("torch")
torch.set_num_threads(1)  # tiny models: one thread is fastest, and the machine is shared

from click.testing import CliRunner  # noqa: E402

from corpora.errors import InputError  # noqa: E402
from corpora.tokenize import TokenizerSpec  # noqa: E402
from corpora.vocab import Vocab  # noqa: E402
from neural.bert.finetune import (FinetuneConfig, accuracy, build_task, classifier_for, finetune,  # noqa: E402
                                  load_classifier, pair_examples, predict, random_like, save_classifier)
from neural.bert.model import build_bert, encode_sentences  # noqa: E402
from reports.commands.bert import accuracy_intervals, bert_group  # noqa: E402

# A text whose every line is different, so a pair of lines says where it came from.
STORY = ["the cat sat down", "on the old mat", "it was warm there", "then it slept", "a dog came by",
         "and barked loud", "the cat woke up", "and ran away", "the dog sat down", "the end"]


def _vocab(sentences):
    return Vocab(tokenizer=TokenizerSpec()).fit(sentences)  # what a text file's corpus builds


def _story():
    lines = [s.split() for s in STORY]
    vocab = _vocab(lines)
    return vocab, encode_sentences(vocab, lines)


def _text(vocab_ids, vocab):
    return " ".join(vocab.decode(vocab_ids))


# ---------------------------------------------------------------------------- the tasks
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_nsp_examples_are_balanced_and_positives_are_true_successors(seed):
    vocab, sents = _story()
    task = build_task("nsp", sents, split="test", seed=seed)
    # 9 lines have a successor; rounded down to even: 8 examples, exactly 4 of each label.
    assert len(task) == 8 and int(task.labels.sum()) == 4
    anchors = [a for a, _, _ in task.examples]
    assert len(set(anchors)) == 8  # one example per anchor sentence
    for a, b, label in task.examples:
        first, second = _text(task.sentences[a], vocab), _text(task.sentences[b], vocab)
        i = STORY.index(first)
        if label == 1:
            assert second == STORY[i + 1]  # checked on the text itself, not on indices
        else:
            assert second != STORY[i + 1] and second != first  # from elsewhere in the same split
            assert second in STORY


def test_order_examples_swap_the_same_two_sentences():
    vocab, sents = _story()
    task = build_task("order", sents, split="train", seed=3)
    assert len(task) == 8 and int(task.labels.sum()) == 4
    for a, b, label in task.examples:
        first, second = _text(task.sentences[a], vocab), _text(task.sentences[b], vocab)
        if label == 1:
            assert STORY.index(second) == STORY.index(first) + 1
        else:
            assert STORY.index(first) == STORY.index(second) + 1  # B came just before A


def test_examples_are_seeded_balanced_at_scale_and_capped():
    rng = np.random.default_rng
    a, b = pair_examples(1001, "nsp", rng(5)), pair_examples(1001, "nsp", rng(5))
    assert np.array_equal(a, b) and not np.array_equal(a, pair_examples(1001, "nsp", rng(6)))
    assert len(a) == 1000 and a[:, 2].sum() == 500
    neg = a[a[:, 2] == 0]
    assert ((neg[:, 1] != neg[:, 0] + 1) & (neg[:, 1] != neg[:, 0]) & (neg[:, 1] >= 0) & (neg[:, 1] < 1001)).all()
    assert len(np.unique(neg[:, 1])) > 300  # drawn across the split, not from a few sentences
    capped = pair_examples(1001, "order", rng(5), max_examples=51)
    assert len(capped) == 50 and capped[:, 2].sum() == 25
    # The three splits draw independently: the same sentences in train and test give other examples.
    vocab, sents = _story()
    assert not np.array_equal(build_task("nsp", sents, split="train", seed=0).examples,
                              build_task("nsp", sents, split="test", seed=0).examples)


# ---------------------------------------------------------------------------- learning
def _alternating(n, seed):
    """Lines alternate between two word sets: a successor always switches set, a random line does half the
    time, so "B follows A" is learnable up to 0.75 (the other negatives look like successors)."""
    rng = np.random.default_rng(seed)
    return [[f"t{i % 2}w{rng.integers(3)}" for _ in range(rng.integers(1, 5))] for i in range(n)]


def test_finetuning_learns_a_learnable_task_well_above_chance():
    texts = {"train": _alternating(600, 0), "valid": _alternating(200, 1), "test": _alternating(200, 2)}
    vocab = _vocab(texts["train"])
    tasks = {s: build_task("nsp", encode_sentences(vocab, t), split=s, seed=0) for s, t in texts.items()}
    ex = tasks["test"].examples
    ceiling = float(np.mean((ex[:, 0] % 2 != ex[:, 1] % 2) == ex[:, 2]))  # the best any model can do
    assert 0.7 < ceiling < 0.8
    # Two layers: the answer is an XOR of A's and B's word sets, which the one-layer preset learns unreliably.
    model = classifier_for(build_bert(len(vocab), "tiny", seed=0, max_len=16, n_layers=2), seed=0, head_dropout=0.0)
    cfg = FinetuneConfig(lr=2e-3, batch_size=64, max_steps=150, epochs=100, eval_every=50, head_dropout=0.0,
                         warmup=0.05, seed=0)
    r = finetune(model, tasks["train"], tasks["valid"], cfg, log=lambda s: None)
    assert r.stopped == "steps" and r.steps == 150 and [h["step"] for h in r.history] == [50, 100, 150]
    acc = accuracy(model, tasks["test"])
    # Chance is 0.5 and 198 test examples give it a standard error of 0.036.  This seed reaches 0.73; seeds
    # 4-11 reached 0.62-0.72 when the test was written, so the bound holds for any of them.
    assert acc > 0.6, acc
    assert r.best_valid_accuracy == max(h["valid_accuracy"] for h in r.history)
    assert accuracy(model, tasks["valid"]) == pytest.approx(r.best_valid_accuracy)  # the best weights were kept


def test_the_scratch_baseline_shares_architecture_and_head_but_not_the_encoder():
    bert = build_bert(50, "tiny", seed=0)
    scratch = random_like(bert, seed=9)
    assert scratch.config == bert.config and not torch.equal(scratch.tok_emb.weight, bert.tok_emb.weight)
    a, b = classifier_for(bert, seed=4), classifier_for(scratch, seed=4)
    assert all(torch.equal(x, y) for x, y in zip(a.head.state_dict().values(), b.head.state_dict().values()))
    # The optimizer never holds the unused pretraining heads (they would only be decayed).
    names = {id(p): n for n, p in a.named_parameters()}
    trained = {names[id(p)] for p in a.trained_parameters()}
    assert "bert.tok_emb.weight" in trained and "head.out.weight" in trained
    assert not any(n.startswith(("bert.nsp", "bert.pooler", "bert.mlm")) for n in trained)


def test_zero_shot_reads_the_nsp_head():
    vocab, sents = _story()
    bert = build_bert(len(vocab), "tiny", seed=1).eval()
    task = build_task("nsp", sents, split="test", seed=0)
    got = predict(bert, task, batch_size=3)  # batches in length order; answers in the task's order
    from neural.bert.model import pack_pairs

    ids, seg, _ = pack_pairs([tuple(r) for r in task.examples.tolist()], sents, vocab_size=len(vocab), max_len=64)
    with torch.no_grad():
        want = bert.nsp_logits(bert.encode(ids, seg)).argmax(-1).numpy()
    assert np.array_equal(got, want)


def test_ctrl_c_stops_cleanly_with_the_best_weights_saved(tmp_path):
    vocab, sents = _story()
    train, valid = (build_task("nsp", sents, split=s, seed=0) for s in ("train", "valid"))
    model = classifier_for(build_bert(len(vocab), "tiny", seed=0), seed=0)
    calls = []

    def log(msg):  # the second validation's line is where the user presses Ctrl-C
        calls.append(msg)
        if len(calls) == 2:
            raise KeyboardInterrupt

    out = tmp_path / "c.pt"
    r = finetune(model, train, valid, FinetuneConfig(max_steps=50, epochs=100, eval_every=2, batch_size=4), out=out,
                 vocab=vocab, log=log)
    assert r.stopped == "interrupted" and r.steps == 4 and r.best_step == 2  # the interrupted validation is not used
    _, _, cfg, ckpt = load_classifier(out)
    assert ckpt["train"]["stopped"] == "interrupted" and cfg.max_steps == 50


# ---------------------------------------------------------------------------- checkpoints
def test_checkpoint_round_trip(tmp_path):
    vocab, sents = _story()
    task = build_task("nsp", sents, split="test", seed=0)
    model = classifier_for(build_bert(len(vocab), "tiny", seed=3), seed=3).eval()
    with torch.no_grad():  # a head that is not at its initial values
        for p in model.head.parameters():
            p.add_(0.1 * torch.randn_like(p))
    cfg = FinetuneConfig(task="nsp", lr=2e-4, train_examples=6)
    path = tmp_path / "tuned.pt"
    save_classifier(path, model, vocab, {"finetune": cfg.to_dict(), "data": {"corpus": "story"}})
    m2, vocab2, cfg2, ckpt = load_classifier(path)
    assert cfg2 == cfg and vocab2.itos_ == vocab.itos_ and ckpt["model"]["kind"] == "bert"
    from neural.bert.model import pack_pairs

    ids, seg, _ = pack_pairs([tuple(r) for r in task.examples.tolist()], sents, vocab_size=len(vocab), max_len=64)
    with torch.no_grad():
        assert torch.equal(model(ids, seg), m2(ids, seg))
    # The encoder is a BERT checkpoint as any other: the pretraining tools read it.
    from neural.checkpoint import load_model

    bert, _, _ = load_model(path)
    assert torch.equal(bert.tok_emb.weight, model.bert.tok_emb.weight)


# ---------------------------------------------------------------------------- command line and errors
def run(*args):
    return CliRunner().invoke(bert_group, [str(a) for a in args], catch_exceptions=True)


def _file_and_checkpoint(tmp_path):
    from neural.training.bert import save_bert

    text = tmp_path / "text.txt"
    text.write_text("\n".join(" ".join(line) for line in _alternating(200, 3)) + "\n")
    vocab = _vocab([line.split() for line in text.read_text().splitlines()])
    ckpt = tmp_path / "pre.pt"
    save_bert(ckpt, build_bert(len(vocab), "tiny", seed=0), vocab, {"data": {"corpus": str(text)}})
    return text, ckpt


def test_cli_finetune_prints_three_accuracies_with_intervals(tmp_path):
    text, ckpt = _file_and_checkpoint(tmp_path)
    out = tmp_path / "tuned.pt"
    r = run("finetune", ckpt, "--max-steps", 4, "--batch-size", 8, "--eval-every", 2, "--train-examples", 40,
            "--threads", 1, "-o", out, "--json")  # the corpus: the one the checkpoint records
    assert r.exit_code == 0, r.output + repr(r.exception)
    d = json.loads(r.stdout)
    assert [m["name"] for m in d["models"]] == ["zero-shot", "fine-tuned", "scratch"]
    assert d["examples"]["train"] == 40 and d["test_positive_share"] == 0.5 and d["stopped"] == "complete"
    for m in d["models"]:
        lo, hi = m["interval"]
        assert 0 <= lo <= m["accuracy"] <= hi <= 1
    assert [(x["a"], x["b"]) for x in d["differences"]] == [("fine-tuned", "scratch"), ("fine-tuned", "zero-shot")]
    assert d["models"][1]["steps"] == d["models"][2]["steps"] == 4  # the same budget
    model, _, cfg, _ = load_classifier(out)
    assert cfg.max_steps == 4 and cfg.train_examples == 40
    r = run("finetune", ckpt, text, "--task", "order", "--max-steps", 2, "--train-examples", 10, "--threads", 1,
            "-o", tmp_path / "o.pt")
    assert r.exit_code == 0, r.output + repr(r.exception)
    assert "(a) pretrained" in r.output and "95 % interval" in r.output and "fine-tuned - scratch" in r.output


def test_bad_input_is_one_clear_error(tmp_path):
    from neural.checkpoint import save_checkpoint
    from neural.models import build_model

    text, ckpt = _file_and_checkpoint(tmp_path)
    vocab = _vocab([["a", "b"]])
    lstm = tmp_path / "lstm.pt"
    save_checkpoint(lstm, build_model("rnn", {"vocab_size": len(vocab), "emb_size": 8, "hidden_size": 8,
                                              "n_layers": 1}), vocab)
    r = run("finetune", lstm, text, "-o", tmp_path / "x.pt")
    assert isinstance(r.exception, InputError) and "not BERT" in str(r.exception) and "lstm.pt" in str(r.exception)
    with pytest.raises(InputError, match="not a fine-tuned BERT"):
        load_classifier(lstm)
    with pytest.raises(InputError, match="without a classification head"):
        load_classifier(ckpt)
    tuned = tmp_path / "tuned.pt"
    save_classifier(tuned, classifier_for(build_bert(len(vocab), "tiny", seed=0), seed=0), vocab)
    r = run("finetune", tuned, text, "-o", tmp_path / "x.pt")
    assert isinstance(r.exception, InputError) and "already fine-tuned" in str(r.exception)
    junk = tmp_path / "junk.pt"
    junk.write_text("hello\n")
    r = run("finetune", junk, text, "-o", tmp_path / "x.pt")
    assert isinstance(r.exception, InputError) and "junk.pt" in str(r.exception) and "fix:" in str(r.exception)
    r = run("finetune", ckpt, text, "--task", "cloze")
    assert r.exit_code == 2 and "cloze" in r.output  # click names the choices
    with pytest.raises(InputError, match="unknown fine-tuning task"):
        FinetuneConfig(task="cloze").validate()
    short = tmp_path / "short.txt"
    short.write_text("a b\nb a\n")
    r = run("finetune", ckpt, short, "-o", tmp_path / "x.pt")
    assert isinstance(r.exception, InputError) and "too few" in str(r.exception)


def test_accuracy_intervals_are_percentile_bootstrap_over_examples():
    rng = np.random.default_rng(0)
    a = rng.random(2000) < 0.7
    b = rng.random(2000) < 0.5
    models, diffs = accuracy_intervals({"zero-shot": b, "fine-tuned": a, "scratch": b})
    lo, hi = models["fine-tuned"]["interval"]
    se = np.sqrt(0.7 * 0.3 / 2000)
    assert lo < a.mean() < hi and abs((hi - lo) - 2 * 1.96 * se) < 0.01
    d = diffs[0]
    assert d["a"] == "fine-tuned" and d["b"] == "scratch" and d["interval"][0] > 0.1
