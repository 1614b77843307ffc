"""One self-contained checkpoint file per model: weights, config, vocabulary and training state.

Layout (plain containers only, written with ``torch.save``)::

    {"format": "ngramlm.neural", "version": 1,
     "model": {"kind": "rnn" | "transformer" | "seq2seq", "name": "lstm" | ..., "config": {...}},
     "state_dict": {name: tensor},
     "vocab": Vocab.to_dict(),                   # JSON-able; a translator's target vocabulary
     "src_vocab": Vocab.to_dict(),               # translators only: the source vocabulary
     "train": None | {"config": TrainConfig dict, "optimizer": ..., "schedule": {...},
                      "position": {"epoch": e, "batch": b}, "step": n, "best_val_ppl": x,
                      "history": [...], "rng": {"torch": ByteTensor}, "carry_state": tensors | None,
                      "data": {...}, "finished": bool}}

It is read back with ``torch.load(..., weights_only=True)``: no module is pickled and
no arbitrary object is ever unpickled.  Writes go to a temporary file in the same
folder which is then renamed over the target, so an interruption never leaves a
half-written checkpoint.
"""
from __future__ import annotations

import io
import os
import re
import zipfile
from pathlib import Path
from typing import Optional

import torch

from corpora.errors import InputError
from corpora.textio import atomic_write_bytes
from corpora.vocab import Vocab

from .base import LanguageModel
from .models import build_model, model_name
from .sniff import FORMAT, FORMAT_VERSION, ZIP_MAGIC, is_checkpoint


def checkpoint_bytes(model: LanguageModel, vocab: Vocab, train: Optional[dict] = None) -> bytes:
    """The serialized checkpoint of ``model`` (+ vocabulary, + training state if given)."""
    payload = {
        "format": FORMAT,  # first key: is_checkpoint() finds it near the start of data.pkl
        "version": FORMAT_VERSION,
        "model": {"kind": model.kind, "name": model_name(model), "config": model.config.to_dict()},
        "state_dict": model.state_dict(),  # tied matrices share storage and are stored once
        "vocab": vocab.to_dict(),  # a translator's target vocabulary
        "train": train,
        "torch_version": str(torch.__version__),
    }
    if model.kind == "seq2seq":
        if model.src_vocab is None:
            raise InputError("a translator needs its source vocabulary to be saved",
                             fix="set model.src_vocab before saving")
        payload["src_vocab"] = model.src_vocab.to_dict()
    buf = io.BytesIO()
    torch.save(payload, buf)
    return buf.getvalue()


def save_checkpoint(path: os.PathLike | str, model: LanguageModel, vocab: Vocab, train: Optional[dict] = None) -> None:
    """Write ``model`` (+ vocabulary, + training state if given) to ``path`` atomically."""
    atomic_write_bytes(path, checkpoint_bytes(model, vocab, train))


def _why_not_checkpoint(path: Path) -> str:
    with open(path, "rb") as fh:
        head = fh.read(64)
    if not head:
        return "the file is empty"
    if head[:1] == b"\x80" and head[1:2] in (b"\x02", b"\x03", b"\x04", b"\x05"):  # PROTO opcode
        return "it is a raw Python pickle; it is refused because unpickling can run arbitrary code"
    if head[:4] == ZIP_MAGIC:
        try:
            with zipfile.ZipFile(path) as zf:
                names = zf.namelist()
        except (OSError, zipfile.BadZipFile):
            return "it is a damaged zip file"
        if any(n.endswith(".npy") for n in names):
            return "it is an n-gram model (.npz arrays); score it with `ngramlm ppl`"
        return "it is a zip/torch file without the ngramlm.neural format tag (not written by `ngramlm neural train`)"
    if head[:3] == b"\x1f\x8b\x08" or _looks_like_text(head):
        return "it looks like text, JSON or an n-gram model (score those with `ngramlm ppl`)"
    return "unrecognised binary data"


def _looks_like_text(head: bytes) -> bool:
    # Judged on the whole head, not its first byte: random binary data starts with `{` or `\`
    # about once in a hundred files, and must still be called binary.
    try:
        text = head.decode("utf-8")
    except UnicodeDecodeError as exc:
        if exc.start < len(head) - 3:  # only a character cut at the 64-byte boundary is allowed
            return False
        text = head[:exc.start].decode("utf-8")
    return all(ch.isprintable() or ch in "\t\n\r\f\v" for ch in text)


def load_checkpoint(path: os.PathLike | str) -> dict:
    """Read and check a checkpoint; every failure is an :class:`InputError` naming the file."""
    p = Path(path)
    if not p.is_file():
        raise InputError("no such checkpoint file", path=p,
                         fix="check the path (written by `ngramlm neural train --out`)")
    if not is_checkpoint(p):
        raise InputError(f"not a neural checkpoint: {_why_not_checkpoint(p)}", path=p,
                         fix="pass a file written by `ngramlm neural train --out`")
    try:
        ckpt = torch.load(p, map_location="cpu", weights_only=True)
    except Exception as exc:  # noqa: BLE001 - any failure to read means a corrupt file
        if "weights only load failed" in str(exc).lower():
            # Not corrupt: it holds Python objects beyond tensors and plain values, which only unpickling
            # (running the file's code) could build.  torch's advice to turn the safety off is not repeated.
            glob = re.search(r"Unsupported global: GLOBAL ([\w.]+)", str(exc))
            raise InputError("the checkpoint holds Python objects besides weights"
                             + (f" ({glob.group(1)})" if glob else "") + ", and checkpoints are read without "
                             "running pickled code", path=p,
                             fix="use a checkpoint written by `ngramlm neural train` (tensors, numbers, strings); "
                                 "re-save a foreign one as a state_dict with plain values") from None
        lines = [ln.strip() for ln in str(exc).splitlines() if ln.strip()]
        detail = next((ln for ln in lines if "error" in ln.lower()), lines[0] if lines else type(exc).__name__)
        raise InputError(f"corrupt or truncated checkpoint ({detail[:240]})", path=p,
                         fix="use the last good checkpoint (the .best file), or retrain") from None
    if not isinstance(ckpt, dict) or ckpt.get("format") != FORMAT:
        raise InputError("not a neural checkpoint (format tag missing)", path=p,
                         fix="pass a file written by `ngramlm neural train`")
    if ckpt.get("version") != FORMAT_VERSION:
        raise InputError(f"checkpoint format version {ckpt.get('version')!r} is not supported "
                         f"(expected {FORMAT_VERSION})",
                         path=p, fix="use the toolkit version that wrote it")
    for key in ("model", "state_dict", "vocab"):
        if key not in ckpt:
            raise InputError(f"corrupt checkpoint: no {key!r} entry", path=p, fix="retrain or use another checkpoint")
    return ckpt


def model_from_checkpoint(ckpt: dict, *, path: Optional[os.PathLike | str] = None, impl: Optional[str] = None,
                          expect_name: Optional[str] = None, expect_vocab: Optional[Vocab] = None,
                          translator: bool = False):
    """``(model, vocab)`` from a loaded checkpoint, checked against what the caller expects.

    ``impl`` converts an RNN to the other implementation (fused <-> scratch), or for a
    Transformer selects the attention implementation (``sdpa`` / ``scratch``).
    """
    info = ckpt["model"]
    name = info.get("name")
    # A translator's probabilities are conditional on a source sentence: never score it as an LM.
    if info.get("kind") == "seq2seq" and not translator:
        raise InputError(f"the checkpoint holds a translator ({name}), not a language model", path=path,
                         fix="use `ngramlm seq2seq ppl` / `ngramlm seq2seq translate` for it")
    if translator and info.get("kind") != "seq2seq":
        raise InputError(f"the checkpoint holds a {name} language model, not a translator", path=path,
                         fix="use `ngramlm neural ppl` / `ngramlm ppl` for language models")
    if expect_name is not None and name != expect_name:
        raise InputError(f"the checkpoint holds a {name} model, not {expect_name}", path=path,
                         fix=f"pass --model {name}, or another --out/--resume file")
    vocab = Vocab.from_dict(ckpt["vocab"], path=None if path is None else str(path))
    if expect_vocab is not None and vocab != expect_vocab:
        def tok(v: Vocab) -> str:
            return v.tokenizer.describe() if v.tokenizer else "whitespace"

        raise InputError(
            f"the checkpoint was trained with another vocabulary ({vocab.n_types} types, {tok(vocab)}) "
            f"than this corpus ({expect_vocab.n_types} types, {tok(expect_vocab)})",
            path=path, fix="resume on the same corpus and tokenizer, or start a new run with another --out",
        )
    try:
        model = build_model(info["kind"], dict(info["config"]))
        model.load_state_dict(ckpt["state_dict"])
    except InputError:
        raise
    except (KeyError, TypeError, RuntimeError) as exc:
        raise InputError(f"checkpoint weights do not fit its model config ({str(exc).splitlines()[0][:200]})",
                         path=path, fix="the file is corrupt; use another checkpoint") from None
    if len(vocab) != model.config.vocab_size:
        raise InputError(f"checkpoint vocabulary has {len(vocab)} ids but the model {model.config.vocab_size}",
                         path=path, fix="the file is corrupt; use another checkpoint")
    if model.kind == "seq2seq":
        if "src_vocab" not in ckpt:
            raise InputError("corrupt checkpoint: a translator without its source vocabulary", path=path,
                             fix="retrain or use another checkpoint")
        model.src_vocab = Vocab.from_dict(ckpt["src_vocab"], path=None if path is None else str(path))
        if len(model.src_vocab) != model.config.src_vocab_size:
            raise InputError(f"checkpoint source vocabulary has {len(model.src_vocab)} ids but the model "
                             f"{model.config.src_vocab_size}", path=path, fix="the file is corrupt; use another checkpoint")
    if impl is not None:
        if model.kind == "rnn" and impl != model.config.impl:
            model = model.convert(impl)
        elif model.kind == "transformer":
            attention = "scratch" if impl == "scratch" else "sdpa"
            model.config.attention = attention
            for block in model.blocks:
                block.attn.impl = attention
    model.eval()
    return model, vocab


def load_model(path: os.PathLike | str, **kwargs):
    """``(model, vocab, checkpoint dict)`` from a file, in eval mode.  See :func:`model_from_checkpoint`."""
    ckpt = load_checkpoint(path)
    model, vocab = model_from_checkpoint(ckpt, path=path, **kwargs)
    return model, vocab, ckpt


def training_seconds(train: Optional[dict]) -> float:
    """Training seconds of the whole run recorded in a checkpoint's ``train`` entry.

    Checkpoints written before ``seconds`` was saved know only the time of their last
    validation (0 when interrupted inside the first epoch).
    """
    train = train or {}
    if "seconds" in train:
        return float(train["seconds"])
    history = train.get("history") or []
    return float(history[-1]["seconds"]) if history else 0.0


def best_path(path: os.PathLike | str) -> Path:
    """``run/lstm.pt`` -> ``run/lstm.best.pt``: where the best-validation weights are kept."""
    p = Path(path)
    return p.with_name(f"{p.stem}.best{p.suffix or '.pt'}")
