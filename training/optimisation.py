"""How training steps: the schedules, the arithmetic (precision) and the optimiser. Importing
it loads no torch (the functions that need torch import it), so that `canis train --help`
describes the schedules from the same numbers the training uses.

Schedules: the paper's, and the one that fits the 2-core development machine in a couple of
hours (batch 128 is about 4x faster per sample than 32 on a CPU; the learning rate is scaled
by the square root of the batch ratio). Both end where a warm-restart cycle ends.

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
import sys
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import torch


# The paper's schedule, and the one that fits the 2-core development machine in a couple of
# hours (batch 128 is about 4x faster per sample than 32 on a CPU; the learning rate is scaled
# by the square root of the batch ratio). Both end where a warm-restart cycle ends.
# The regularisation of every schedule (`canis train --dropout/--weight-decay` override them):
# the paper's keep probability 0.7 for each layer's input, and AdamW's decoupled decay.
DROPOUT = 0.3
WEIGHT_DECAY = 2.5e-3
SCHEDULES = {
    "paper": {"epochs": 150, "batch_size": 32, "lr": 1e-4, "restart_epochs": 10, "restart_mult": 2},
    "cpu": {"epochs": 75, "batch_size": 128, "lr": 2e-4, "restart_epochs": 5, "restart_mult": 2},
}


def cycle_ends(epochs: int, restart_epochs: int, restart_mult: int) -> list[int]:
    """Epochs after which a warm-restart cycle ends (the learning rate is at its lowest)."""
    ends, period, end = [], restart_epochs, restart_epochs
    while end <= epochs:
        ends.append(end)
        period *= restart_mult
        end += period
    return ends


def describe(name: str) -> str:
    s = SCHEDULES[name]
    ends = cycle_ends(s["epochs"], s["restart_epochs"], s["restart_mult"])
    restarts = "/".join(str(end) for end in ends if end < s["epochs"])
    return (
        f"{name}: {s['epochs']} epochs, batch {s['batch_size']}, lr {s['lr']:.0e}, "
        f"restarts {restarts}"
    )


PRECISIONS = ("auto", "bf16", "fp32")


def native_bf16(device: torch.device) -> bool:
    """Whether `device` computes bfloat16 matmuls in hardware (not emulated)."""
    import torch

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
    started on another machine resumes unchanged, else picks by the hardware. bf16 asked for
    on a device that only emulates it is kept (it is what the run's results depend on) and
    said, before the first step: unsaid, a run of an hour takes a day."""
    if precision == "auto" and resumed is not None:
        chosen = resumed.get("precision", "fp32")
    else:
        chosen = resolve_precision(precision, device)
    if chosen == "bf16" and not native_bf16(device):
        print(
            f"warning: precision bf16 on a {device.type} without native bfloat16 (no "
            "AVX512-BF16 or AMX): torch emulates it, 20-35x slower than fp32 on an AMD EPYC "
            'Zen 3; fp32 (precision = "fp32" in a copy of the recipe, or --precision fp32) '
            "trains fast here but gives other weights",
            file=sys.stderr,
            flush=True,
        )
    return chosen


def autocast(precision: str, device: torch.device):
    """The context a training forward pass runs in ("fp32": none)."""
    if precision == "bf16":
        import torch

        return torch.autocast(device.type, dtype=torch.bfloat16)
    return contextlib.nullcontext()


def fused_optimiser(device: torch.device) -> bool | None:
    """The `fused` argument of torch.optim.Adam/AdamW: True where the device has the fused
    kernel, None (torch's default) elsewhere."""
    return True if device.type in ("cpu", "cuda") else None
