"""The arithmetic training runs in, and its optimiser, chosen by what the machine has
(issue 17 item 6; docs/RESULTS.md "Training speed on the CPU" measures both).

Precision: "fp32", or "bf16" autocast (matmuls in bfloat16, weights, optimiser state and
losses in fp32). bf16 changes results beyond float noise, so a checkpoint records the precision
it was trained in and a resume must use the same. "auto" picks bf16 only where the hardware
computes it natively: a CPU with AVX512-BF16 or AMX-BF16 (e.g. Intel Sapphire Rapids) or a
CUDA GPU that supports it. Elsewhere (e.g. AMD Zen 1-3, AVX2 only) torch emulates bf16 and is
slower than fp32, so auto is fp32 there.

The optimiser is torch's fused Adam/AdamW kernel where the device has one (CPU and CUDA): the
same update as the per-parameter loop, to float rounding, in one pass over the weights.
"""

from __future__ import annotations

import contextlib

import torch

PRECISIONS = ("auto", "bf16", "fp32")


def native_bf16(device: torch.device) -> bool:
    """Whether `device` computes bfloat16 matmuls in hardware (not emulated)."""
    if device.type == "cuda":
        return torch.cuda.is_bf16_supported(including_emulation=False)
    if device.type != "cpu":
        return False
    return bool(torch.cpu._is_avx512_bf16_supported() or torch.cpu._is_amx_tile_supported())


def resolve_precision(precision: str, device: torch.device) -> str:
    """ "auto" -> "bf16" where the device has native bf16, else "fp32"; others unchanged."""
    if precision not in PRECISIONS:
        raise ValueError(f"--precision {precision!r}: choose one of {', '.join(PRECISIONS)}")
    if precision == "auto":
        return "bf16" if native_bf16(device) else "fp32"
    return precision


def precision_for_run(precision: str, device: torch.device, resumed: dict | None) -> str:
    """The precision a run trains in: "bf16" or "fp32" as given; "auto" continues a resumed
    run's (`resumed`: its checkpoint's identity; absent precision means fp32), so a run
    started on another machine resumes unchanged, else picks by the hardware."""
    if precision == "auto" and resumed is not None:
        return resumed.get("precision", "fp32")
    return resolve_precision(precision, device)


def autocast(precision: str, device: torch.device):
    """The context a training forward pass runs in ("fp32": none)."""
    if precision == "bf16":
        return torch.autocast(device.type, dtype=torch.bfloat16)
    return contextlib.nullcontext()


def fused_optimiser(device: torch.device) -> bool | None:
    """The `fused` argument of torch.optim.Adam/AdamW: True where the device has the fused
    kernel, None (torch's default) elsewhere."""
    return True if device.type in ("cpu", "cuda") else None
