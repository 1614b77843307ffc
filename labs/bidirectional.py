"""A bidirectional RNN used as a language model cheats; used as an encoder it is honest and better.

A BiRNN's output at position t concatenates h→_t (read x_1..x_t) and h←_t (read x_T..x_t).
Trained to predict x_{t+1} from that output, the backward half has already read x_{t+1}:
the "prediction" is a copy and the perplexity collapses towards 1 -- a number that says
nothing, because at generation time the future is not there to read.  The honest use is
a task where the whole input is given, e.g. filling in masked characters (a cloze, the
idea behind BERT's masked-LM): there both directions are legitimate evidence and the BiRNN
beats a left-to-right RNN of the same width.  The toolkit's translator uses a BiRNN as
its encoder for the same reason (the source sentence is known in full).
"""
from __future__ import annotations

from ._common import char_corpus, cross_entropy, evaluate_ppl, pyplot, random_batch, set_seed, smooth, tiny_lm
from . import LABS
from .output import Figure, LabResult, Table, png_of

NAME = "bidirectional"
SECTION = LABS[NAME].section


def train(model, batches, *, mask_id=None, mask_rate: float = 0.15, gen=None) -> list:
    """Adam on next-token prediction, or (``mask_id`` set) on recovering masked inputs."""
    import torch

    opt = torch.optim.Adam(model.parameters(), lr=0.01)
    losses = []
    for x, y in batches:
        if mask_id is None:
            logits, _ = model(x)
            loss = cross_entropy(logits, y)
        else:
            m = torch.rand(x.shape, generator=gen) < mask_rate
            logits, _ = model(x.masked_fill(m, mask_id))
            loss = cross_entropy(logits[m][None], x[m][None])
        opt.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        losses.append(float(loss.detach()))
    return losses


def cloze_accuracy(model, stream, *, mask_id: int, mask_rate: float, seed: int, n: int = 32, steps: int = 128) -> float:
    """Share of masked characters recovered (argmax), on ``n`` validation windows."""
    import torch

    gen = torch.Generator().manual_seed(seed)
    x, _ = random_batch(stream, batch_size=n, steps=steps, gen=gen)
    m = torch.rand(x.shape, generator=gen) < mask_rate
    model.eval()
    with torch.no_grad():
        logits, _ = model(x.masked_fill(m, mask_id))
    model.train()
    return float((logits.argmax(-1)[m] == x[m]).float().mean())


def run(*, seed: int = 0, quick: bool = False, data_dir=None, mask_rate: float = 0.15) -> LabResult:
    import torch

    plt = pyplot()
    steps = 60 if quick else 200
    hidden = 64 if quick else 128
    train_s, valid, vocab = char_corpus(data_dir=data_dir, n_train=40_000 if quick else None,
                                        n_valid=6_000 if quick else None)
    V = len(vocab)
    mask_id = V  # one extra input symbol: "masked"; the output layer still predicts the V symbols
    gen = torch.Generator().manual_seed(seed)
    batches = [random_batch(train_s, batch_size=32, steps=64, gen=gen) for _ in range(steps)]

    def model(bi: bool):
        set_seed(seed)
        m = tiny_lm(V + 1, cell="gru", hidden=hidden, bidirectional=bi)
        return m

    res, curves = {}, {}
    for bi in (False, True):
        key = "bidirectional" if bi else "causal"
        m = model(bi)
        curves[f"LM, {key}"] = train(m, batches)
        lm_ppl = evaluate_ppl(m, valid)
        c = model(bi)
        curves[f"cloze, {key}"] = train(c, batches, mask_id=mask_id, mask_rate=mask_rate,
                                        gen=torch.Generator().manual_seed(seed + 3))
        acc = cloze_accuracy(c, valid, mask_id=mask_id, mask_rate=mask_rate, seed=seed + 5)
        res[key] = {"lm_valid_ppl": lm_ppl, "cloze_accuracy": acc}
    fig, axes = plt.subplots(1, 2, figsize=(11, 4))
    for key, colour in (("causal", "#0072B2"), ("bidirectional", "#D55E00")):
        axes[0].plot(smooth(curves[f"LM, {key}"], 10), color=colour, label=key)
        axes[1].plot(smooth(curves[f"cloze, {key}"], 10), color=colour, label=key)
    axes[0].set_title("next-character prediction (the BiRNN reads the answer)")
    axes[1].set_title(f"cloze: recover {mask_rate:.0%} masked characters")
    for ax in axes:
        ax.set_xlabel("step")
        ax.set_ylabel("training loss (nats, moving average)")
        ax.legend()
    curves_png = png_of(fig)

    fig, axes = plt.subplots(1, 2, figsize=(9, 3.5))
    keys = ["causal", "bidirectional"]
    axes[0].bar(keys, [res[k]["lm_valid_ppl"] for k in keys], color=["#0072B2", "#D55E00"])
    axes[0].set_ylabel("valid perplexity as a next-char LM")
    axes[1].bar(keys, [res[k]["cloze_accuracy"] for k in keys], color=["#0072B2", "#D55E00"])
    axes[1].set_ylabel("cloze accuracy on masked characters")
    axes[1].set_ylim(0, 1)
    bars = png_of(fig)

    c, b = res["causal"], res["bidirectional"]
    return LabResult(
        name=NAME,
        title="Bidirectional RNN: cheating as an LM, honest as an encoder",
        section=SECTION,
        intro=(f"GRU (hidden {hidden}) vs BiGRU (hidden {hidden} per direction), {steps} Adam steps each on the same "
               f"batches of The Time Machine characters: once as next-character LMs, once recovering {mask_rate:.0%} "
               "masked input characters."),
        headline=[
            ("valid perplexity as a next-character LM, causal GRU", f"{c['lm_valid_ppl']:.3f}"),
            ("valid perplexity as a next-character LM, BiGRU (sees the answer)", f"{b['lm_valid_ppl']:.3f}"),
            ("cloze accuracy on masked characters, causal / bidirectional",
             f"{c['cloze_accuracy']:.3f} / {b['cloze_accuracy']:.3f}"),
        ],
        results={"seed": seed, "quick": quick, "steps": steps, "hidden": hidden, "mask_rate": mask_rate,
                 "models": res},
        tables=[Table("The two uses", ["model", "LM valid ppl", "cloze accuracy"],
                      [[k, f"{res[k]['lm_valid_ppl']:.3f}", f"{res[k]['cloze_accuracy']:.3f}"] for k in keys])],
        figures=[Figure("curves", "Training: the BiRNN LM's loss goes to ~0 by copying", curves_png),
                 Figure("bars", "Perplexity as an LM (lower is not better here) and cloze accuracy", bars)],
    )
