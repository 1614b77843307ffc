"""Which autocast precision this machine can actually use: probed once, with a reason.

bfloat16 autocast pays off on CPUs with native bf16 kernels (AVX512-BF16 or AMX); on
the others oneDNN either emulates it (slower than fp32) or cannot build the kernel at
all -- the fused LSTM dies with "could not create a primitive descriptor for the LSTM
forward propagation primitive".  So a request for bf16 is checked here before any
training: the oneDNN capability flag first, then a forward and backward pass of the
fused recurrent cells and a linear layer under autocast.  Where either fails the run
falls back to float32 and says so in one line; the answer is cached for the process.
"""
from __future__ import annotations

import functools
from dataclasses import dataclass


@dataclass(frozen=True)
class PrecisionChoice:
    bf16: bool  # autocast to bfloat16 in training
    reason: str  # one line for the log: why this precision was chosen


def native_bf16() -> bool:
    """True where oneDNN has native bfloat16 kernels (AVX512-BF16 / AMX)."""
    import torch

    try:
        return bool(torch.ops.mkldnn._is_mkldnn_bf16_supported())
    except (AttributeError, RuntimeError):
        return False


@functools.lru_cache(maxsize=None)
def _bf16_kernels_work() -> tuple:
    """(ok, error): run the kernels the models use, forward and backward, under bf16 autocast."""
    import torch

    try:
        with torch.random.fork_rng():  # leave the caller's RNG stream untouched
            torch.manual_seed(0)
            layers = [torch.nn.LSTM(8, 8, 2), torch.nn.GRU(8, 8), torch.nn.RNN(8, 8)]
            lin = torch.nn.Linear(8, 8)
            x = torch.randn(3, 2, 8)
            with torch.autocast("cpu", dtype=torch.bfloat16):
                total = lin(x).float().sum()
                for layer in layers:
                    total = total + layer(x)[0].float().sum()
            total.backward()
    except RuntimeError as exc:
        return False, str(exc).splitlines()[0][:160]
    return True, ""


def choose_precision(requested: bool | None) -> PrecisionChoice:
    """Resolve ``--bf16/--no-bf16`` (None: automatic) to what this machine runs well."""
    if requested is False:
        return PrecisionChoice(False, "float32 (bf16 not requested)")
    native = native_bf16()
    if not native:
        why = "this CPU has no native bf16 kernels (AVX512-BF16/AMX); emulated bf16 is slower than float32"
        if requested:
            return PrecisionChoice(False, f"bf16 requested but {why}: training in float32 instead")
        return PrecisionChoice(False, f"float32 ({why})")
    ok, err = _bf16_kernels_work()
    if not ok:
        return PrecisionChoice(False, f"bf16 {'requested' if requested else 'available'} but its kernels fail on "
                                      f"this machine ({err}): training in float32 instead")
    return PrecisionChoice(True, "bf16 autocast (native bf16 kernels on this CPU)")
