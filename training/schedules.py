"""The training schedules, torch-free so that `canis train --help` describes them from the
same numbers the training uses."""

from __future__ import annotations

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
