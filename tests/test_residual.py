"""A network trained on an n-gram model's residual (fusion.residual, neural train --ngram-residual)."""
from __future__ import annotations

import math

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from click.testing import CliRunner  # noqa: E402

from corpora import load_corpus, prepare  # noqa: E402
from corpora.vocab import EOS_ID  # noqa: E402
from fusion.residual import ResidualLM, cross_fit_folds, fold_spans, residual_lm  # noqa: E402
import fusion.residual  # noqa: E402
from corpora.errors import InputError  # noqa: E402
from corpora.modelkinds import register_residual  # noqa: E402
from neural.checkpoint import load_model  # noqa: E402
from neural.commands.lm import neural_group  # noqa: E402
from neural.evaluation import evaluate, token_log_probs  # noqa: E402
from neural.models import build_model, model_name  # noqa: E402
from ngramlm import NgramLM  # noqa: E402
from ngramlm.io.arpa import write_arpa  # noqa: E402


register_residual(lambda: fusion.residual)  # as the program does at start


@pytest.fixture(scope="module")
def toy():
    ds = prepare(load_corpus("toy"))  # the corpus `neural train toy` reads
    lm = NgramLM(order=3, smoothing="mkn").fit(ds["train"], vocab=ds.vocab)
    return ds, lm


def _net(ds, zero: bool = False):
    net = build_model("rnn", {"vocab_size": len(ds.vocab), "cell": "lstm", "emb_size": 16, "hidden_size": 16,
                              "n_layers": 1, "dropout": 0.0}, seed=0)
    if zero:  # logits 0 everywhere: the product is the n-gram model alone
        with torch.no_grad():
            net.decoder.weight.zero_()
            net.decoder.bias.zero_()
    return net


def test_a_silent_network_gives_the_ngram_models_probabilities(toy, tmp_path):
    ds, lm = toy
    path = tmp_path / "toy3.arpa"
    write_arpa(lm, path)
    model = residual_lm(_net(ds, zero=True), path, ds.vocab.itos_)
    test = ds["test"].ids[:3000]
    ours = token_log_probs(model, test)
    # The scorer's ln p of every token, sentence by sentence from <s> (the stream restarts after </s>).
    ends = np.flatnonzero(test == EOS_ID) + 1
    text = np.asarray(test[:ends[-1]])
    starts = np.concatenate([[0], ends]).astype(np.int64)
    from corpora.vocab import EncodedText

    ref = lm.token_scores(EncodedText(text, starts)).log10_prob * math.log(10)
    assert len(ref) == ends[-1]
    np.testing.assert_allclose(ours[:ends[-1]], ref, rtol=2e-6, atol=2e-5)
    # and the perplexity the evaluator reports is the n-gram model's
    r = evaluate(model, text)
    assert r.ppl == pytest.approx(math.exp(-ref.sum() / len(ref)), rel=1e-5)


def test_the_full_distribution_sums_to_one_and_weight_zero_is_the_network(toy):
    ds, lm = toy
    net = _net(ds)
    model = ResidualLM.from_ngram(net, lm, ds.vocab.itos_)
    x = torch.as_tensor(np.asarray(ds["valid"].ids[:40], dtype=np.int64)).view(2, 20)
    model.eval()
    with torch.no_grad():
        logits, _, _ = model(x)
        p = torch.softmax(logits, -1).sum(-1)
        np.testing.assert_allclose(p.numpy(), 1.0, atol=1e-5)
        model.config.ngram_weight = 0.0
        alone, _, _ = model(x)
        net_logits, _, _ = net.eval()(x)
    np.testing.assert_allclose(torch.log_softmax(alone, -1)[..., 2:].numpy(),
                               torch.log_softmax(net_logits, -1)[..., 2:].numpy(), atol=1e-5)


def test_fold_models_never_see_the_rows_they_score(toy):
    ds, _ = toy
    ids = np.asarray(ds["train"].ids)
    spans = fold_spans(ids, batch_size=20, folds=2)
    (a0, b0), (a1, b1) = spans
    assert a0 == 0 and b1 == len(ids) and b0 >= a1  # together they cover the text (overlapping at most one sentence)
    for a, b in spans:  # whole sentences
        assert a == 0 or ids[a - 1] == EOS_ID
        assert b == len(ids) or ids[b - 1] == EOS_ID
    # a row group's targets lie inside its span: rows 0-9 predict ids[0 : 10 L], rows 10-19 the rest
    L = (len(ids) + 1) // 20
    assert b0 >= 10 * L and a1 <= 10 * L - 1
    lms = cross_fit_folds(ids, ds.vocab, batch_size=20, folds=2, order=2)
    # The bigrams of the second span that never occur in the first are unknown to fold 1's model (trained
    # on the first span) and known to fold 0's (trained on the second).
    first, second = ids[:a1], ids[b0:]
    key = lambda s: set(zip(s[:-1].tolist(), s[1:].tolist()))  # noqa: E731
    only_second = sorted(key(second) - key(ids[:a1 + 1]) - {(EOS_ID, w) for w in range(len(ds.vocab))})[:50]
    assert only_second
    ctx = torch.tensor([c for c, _ in only_second])
    w = torch.tensor([t for _, t in only_second])
    assert (lms[1].find(2, ctx, w) < 0).all()
    assert (lms[0].find(2, ctx, w) >= 0).all()
    assert len(first) > 0


def test_training_uses_the_fold_models_and_evaluation_the_full_one(toy):
    ds, lm = toy
    model = ResidualLM.from_ngram(_net(ds, zero=True), lm, ds.vocab.itos_)
    model.config.folds = 2
    x = torch.as_tensor(np.asarray(ds["train"].ids[:400], dtype=np.int64)).view(20, 20)
    model.train()
    with pytest.raises(Exception, match="fold models"):
        model(x)
    model.set_folds(cross_fit_folds(ds["train"].ids, ds.vocab, batch_size=20, folds=2, order=3))
    with torch.no_grad():
        train_logits, _, state = model(x)
        model.eval()
        eval_logits, _, _ = model(x)
    assert state[2] is not None and state[2].shape == (20, 2)  # the fold states are carried
    # On its own training text the full model is surer than the models that never saw it.
    y = torch.as_tensor(np.asarray(ds["train"].ids[1:401], dtype=np.int64)).view(20, 20)
    gold = lambda lg: torch.log_softmax(lg, -1).gather(-1, y[..., None]).mean()  # noqa: E731
    assert gold(eval_logits) > gold(train_logits) + 0.1


def test_checkpoint_round_trip_and_generation(toy, tmp_path, monkeypatch):
    ds, lm = toy
    path = tmp_path / "toy2.arpa"
    write_arpa(NgramLM(order=2, smoothing="kn").fit(ds["train"], vocab=ds.vocab), path)
    monkeypatch.setenv("NGRAMLM_THREAD_RULE", "off")
    out = tmp_path / "r.pt"
    res = CliRunner().invoke(neural_group, ["train", "toy", "--ngram-residual", str(path), "--hidden-size", "16",
                                    "--layers", "1", "--dry-run", "-o", str(out), "--no-progress"])
    assert res.exit_code == 0, res.output
    assert "cross-fitting: 2 order-2 mkn models" in res.output
    model = load_model(out)[0]
    assert model.kind == "residual" and model_name(model) == "lstm+ngram"
    assert model.config.ngram_order == 2 and model.config.folds == 2 and sum(model.config.ngram_rows) > 0
    # the tables travel in the checkpoint: the file is no longer needed
    path.unlink()
    r = CliRunner().invoke(neural_group, ["ppl", str(out), "toy"])
    assert r.exit_code == 0, r.output
    for strategy in ("beam", "sample", "greedy"):
        g = CliRunner().invoke(neural_group, ["generate", str(out), "--prompt", ds.vocab.itos_[10],
                                      "--strategy", strategy, "--seed", "1", "--max-len", "6"])
        assert g.exit_code == 0, g.output
        assert g.output.strip()


def test_bad_combinations_are_refused(toy, tmp_path):
    ds, lm = toy
    path = tmp_path / "toy2.arpa"
    write_arpa(NgramLM(order=2, smoothing="kn").fit(ds["train"], vocab=ds.vocab), path)
    cases = [
        (["--resume", str(tmp_path / "x.pt")], "already holds its n-gram model"),
        (["--batch-scheme", "random"], "needs sequential batches"),
        (["--batch-size", "7"], "dividing --batch-size (7)"),
    ]
    for extra, message in cases:
        r = CliRunner().invoke(neural_group, ["train", "toy", "--ngram-residual", str(path), "--hidden-size", "8",
                                      "--layers", "1", "--dry-run", "-o", str(tmp_path / "y.pt"), "--no-progress",
                                      *extra])
        said = r.output + str(r.exception or "")  # an InputError: the program prints it as one line
        assert r.exit_code != 0 and message in said, (extra, said)
        assert r.exception is None or isinstance(r.exception, (InputError, SystemExit)), r.exception
    # stupid backoff's scores do not sum to one: not an expert of a product
    sb = NgramLM(order=2, smoothing="stupid").fit(ds["train"], vocab=ds.vocab)
    with pytest.raises(InputError, match="not a distribution"):
        ResidualLM.from_ngram(_net(ds), sb, ds.vocab.itos_)


def test_the_ladder_shows_a_residual_model_as_a_side_row(tmp_path):
    from neural.config import RNNConfig, TrainConfig
    from neural.rnn import RNNLM
    from neural.training.trainer import Trainer
    from reports.experiments.ladder import LadderOptions, run_ladder
    from reports.render.ladder import write_ladder

    lines = [" ".join(s) for s in load_corpus("toy").sentences("train")[:1500]]
    path = tmp_path / "small.txt"
    path.write_text("\n".join(lines) + "\n")
    ds = prepare(load_corpus(str(path)))
    ckpts = {}
    for name in ("plain", "residual"):
        torch.manual_seed(0)
        m = RNNLM(RNNConfig(vocab_size=len(ds.vocab), emb_size=16, hidden_size=16, n_layers=1))
        if name == "residual":
            m = ResidualLM.from_ngram(m, NgramLM(order=3, smoothing="mkn").fit(ds["train"], vocab=ds.vocab),
                                      ds.vocab.itos_)
            m.config.ngram_weight = 0.5
        ckpts[name] = tmp_path / f"{name}.pt"
        Trainer(m, ds.vocab, ds["train"].ids, ds["valid"].ids, TrainConfig(epochs=1, lr=5, patience=0),
                out=ckpts[name], progress=False, log=lambda s: None, data_info={"corpus": str(path)}).fit()
    opts = LadderOptions(order=3, window=200, tune_tokens=300, rms_tokens=2000, segment_len=7, infini=False,
                         dynamic=False, residual=str(ckpts["residual"]))
    res = run_ladder(ckpts["plain"], str(path), options=opts, log=lambda s: None)
    rows = {r["id"]: r for r in res["rows"]}
    assert "residual" in rows and "residual" not in res["ladder"] and not rows["residual"]["rung"]
    model = load_model(ckpts["residual"])[0]
    assert rows["residual"]["test_ppl"] == pytest.approx(evaluate(model, ds["test"].ids).ppl, rel=1e-5)
    assert rows["residual"]["params"]["ngram_weight"] == 0.5 and rows["residual"]["params"]["ngram_order"] == 3
    page = write_ladder(res, tmp_path / "out")
    html = (tmp_path / "out" / "report.html").read_text("utf-8")
    assert "residual" in html
    assert page
    # the ladder refuses a checkpoint that is not a residual model
    with pytest.raises(InputError, match="not one trained on an n-gram's residual"):
        run_ladder(ckpts["plain"], str(path), options=LadderOptions(
            order=3, cache=False, dynamic=False, infini=False, residual=str(ckpts["plain"])), log=lambda s: None)


def test_a_run_stopped_mid_epoch_saves_its_carried_state_and_resumes(toy, tmp_path):
    """The checkpoint keeps the residual model's nested state (network, n-gram, fold states); the run
    that crashed writing it (a tuple inside the tuple) trained for 10 minutes first."""
    from neural.config import TrainConfig
    from neural.training.trainer import Trainer

    ds, lm = toy
    model = ResidualLM.from_ngram(_net(ds), lm, ds.vocab.itos_)
    model.config.folds = 2
    model.set_folds(cross_fit_folds(ds["train"].ids, ds.vocab, batch_size=20, folds=2, order=3))
    out = tmp_path / "r.pt"
    stop_after = lambda tr, k: tr.request_stop() if k == 2 else None  # noqa: E731
    tr = Trainer(model, ds.vocab, ds["train"].ids, ds["valid"].ids[:500], TrainConfig(epochs=1, lr=5, patience=0),
                 out=out, progress=False, log=lambda s: None, on_batch_end=stop_after)
    res = tr.fit()
    assert res.stopped == "interrupted" and res.steps == 3
    ckpt = torch.load(out, weights_only=True)
    net_state, ng_state, fold_state = ckpt["train"]["carry_state"]
    assert len(net_state) == 2 and ng_state.shape == (20, 2) and fold_state.shape == (20, 2)
    again = Trainer.resume(out, ds["train"].ids, ds["valid"].ids[:500], vocab=ds.vocab, overrides={"max_batches": 4},
                           out=out, progress=False, log=lambda s: None)
    assert again.position["batch"] == 3 and again.carry_state[1].shape == (20, 2)
    again.model.set_folds(model.fold_lms)
    assert again.fit().steps == 4
