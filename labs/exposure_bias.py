"""Exposure bias: the same model, teacher-forced vs free-running.

A language model (or a seq2seq decoder) is trained with teacher forcing: at every step its
input is the *true* previous token.  At generation time it runs free: its input is its own
previous output, so one mistake puts it in a state it never saw in training, and mistakes
compound.  The lab trains one GRU character LM on The Time Machine and, on validation
passages, compares per position j = 1..K after a true prefix:

- teacher-forced accuracy: argmax p(x_{j} | true x_{<j}) equals the true character;
- free-running accuracy: the j-th character of the greedy continuation of the prefix
  equals the true j-th character (the same model, fed its own outputs);
- and, once the free run has made its first mistake, how much worse its next predictions are.

Part of the gap is not the model's fault -- text is not deterministic, and a continuation
that differs from the true one can still be good -- but the decay with j, and the loss
measured on the true text *after* a self-made mistake, are the exposure-bias effect.
"""
from __future__ import annotations

import numpy as np

from ._common import char_corpus, evaluate_ppl, pyplot, random_batch, set_seed, tiny_lm, train_steps
from . import LABS
from .output import Figure, LabResult, Table, png_of

NAME = "exposure-bias"
SECTION = LABS[NAME].section


def free_run(model, prefix, K: int):
    """Greedy continuation of ``prefix`` (B, P) for K steps: (B, K) ids."""
    import torch

    with torch.no_grad():
        logits, state = model(prefix)
        nxt = logits[:, -1].argmax(-1)
        out = [nxt]
        for _ in range(K - 1):
            logits, state = model(nxt[:, None], state)
            nxt = logits[:, -1].argmax(-1)
            out.append(nxt)
    return torch.stack(out, 1)


def run(*, seed: int = 0, quick: bool = False, data_dir=None, prefix_len: int = 32, K: int = 40) -> LabResult:
    import torch

    plt = pyplot()
    steps = 80 if quick else 500
    hidden = 64 if quick else 192
    n_pass = 64 if quick else 256
    train, valid, vocab = char_corpus(data_dir=data_dir, n_train=40_000 if quick else None)
    set_seed(seed)
    m = tiny_lm(len(vocab), cell="gru", hidden=hidden)
    gen = torch.Generator().manual_seed(seed)
    train_steps(m, lambda k: random_batch(train, batch_size=32, steps=64, gen=gen), steps=steps, lr=0.01)
    ppl = evaluate_ppl(m, valid)
    m.eval()

    x, _ = random_batch(valid, batch_size=n_pass, steps=prefix_len + K, gen=torch.Generator().manual_seed(seed + 9))
    prefix, truth = x[:, :prefix_len], x[:, prefix_len:]
    with torch.no_grad():
        logits, _ = m(x[:, :-1])  # teacher forcing over the whole passage
        tf_pred = logits[:, prefix_len - 1:].argmax(-1)  # predictions of truth[:, j] from the true history
    fr_pred = free_run(m, prefix, K)
    tf_correct = (tf_pred == truth).float()
    fr_correct = (fr_pred == truth).float()
    tf_acc, fr_acc = tf_correct.mean(0).tolist(), fr_correct.mean(0).tolist()

    # After the first self-made mistake: teacher-forced accuracy on the true text (fine) vs what the
    # free run predicts next (fed its own wrong history).
    first_err = torch.argmax((fr_pred != truth).int(), dim=1)
    had_err = (fr_pred != truth).any(1)
    after = [(i, int(first_err[i])) for i in range(n_pass) if had_err[i] and int(first_err[i]) + 5 < K]
    fr_after = float(np.mean([fr_correct[i, j + 1:j + 6].mean().item() for i, j in after])) if after else float("nan")
    tf_after = float(np.mean([tf_correct[i, j + 1:j + 6].mean().item() for i, j in after])) if after else float("nan")

    itos = vocab.itos_

    def text(ids):
        return "".join(" " if itos[int(i)] == "▁" else itos[int(i)] for i in ids)

    examples = [[text(prefix[i]), text(truth[i]), text(fr_pred[i])] for i in range(4)]

    fig, ax = plt.subplots(figsize=(7, 4))
    js = np.arange(1, K + 1)
    ax.plot(js, tf_acc, "o-", ms=3, color="#0072B2", label="teacher-forced (true history)")
    ax.plot(js, fr_acc, "s-", ms=3, color="#D55E00", label="free-running (own history)")
    ax.set_xlabel("j: characters after the true prefix")
    ax.set_ylabel("accuracy against the true text")
    ax.set_ylim(0, 1)
    ax.legend()
    curve = png_of(fig)

    fig, ax = plt.subplots(figsize=(5, 3.5))
    ax.bar(["teacher-forced", "free-running"], [tf_after, fr_after], color=["#0072B2", "#D55E00"])
    ax.set_ylabel("accuracy, 5 characters after the first free-run mistake")
    ax.set_ylim(0, 1)
    after_png = png_of(fig)

    tf_mean, fr_mean = float(np.mean(tf_acc)), float(np.mean(fr_acc))
    return LabResult(
        name=NAME,
        title="Exposure bias: teacher forcing vs free-running decoding",
        section=SECTION,
        intro=(f"One GRU character LM (hidden {hidden}, {steps} Adam steps, teacher-forced, valid ppl {ppl:.2f}); "
               f"{n_pass} validation passages: a true prefix of {prefix_len} characters, then {K} characters "
               "predicted with the true history (teacher forcing) or with its own greedy outputs (free running)."),
        headline=[
            (f"accuracy over the {K} characters, teacher-forced", f"{tf_mean:.3f}"),
            (f"accuracy over the {K} characters, free-running", f"{fr_mean:.3f}"),
            ("at j = 1 / 10 / 40: teacher-forced", f"{tf_acc[0]:.3f} / {tf_acc[9]:.3f} / {tf_acc[K - 1]:.3f}"),
            ("at j = 1 / 10 / 40: free-running", f"{fr_acc[0]:.3f} / {fr_acc[9]:.3f} / {fr_acc[K - 1]:.3f}"),
            ("the 5 characters after the first free-run mistake: teacher-forced / free-running",
             f"{tf_after:.3f} / {fr_after:.3f}"),
        ],
        results={"seed": seed, "quick": quick, "steps": steps, "hidden": hidden, "prefix_len": prefix_len, "K": K,
                 "passages": n_pass, "valid_ppl": ppl, "teacher_forced_acc": tf_acc, "free_running_acc": fr_acc,
                 "teacher_forced_mean": tf_mean, "free_running_mean": fr_mean,
                 "after_first_error": {"teacher_forced": tf_after, "free_running": fr_after, "n": len(after)},
                 "examples": examples},
        tables=[Table("Examples (▁ shown as space)", ["prefix", "true continuation", "free-running continuation"],
                      examples)],
        figures=[Figure("accuracy", "Accuracy by position: the free run drifts away", curve),
                 Figure("after_error", "After the first self-made mistake", after_png)],
    )
