"""What the demo shows and logs about the dog: the speed over the last seconds (the number on
the HUD) and, with --status-file, one JSON line per simulated frame for scripts and the
end-to-end test (tests/test_demo_x11.py) to read what a player would see."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
from canis.runtime.features import FPS

# The dog's speed varies within each stride by +-50%: the HUD shows the mean over a few
# strides, the speed a player judges by eye.
SHOWN_SPEED_WINDOW_FRAMES = 2 * FPS


def shown_speed_mps(root_xz_m: np.ndarray) -> float:
    """Distance over the ground between the root's positions (F, 2), one per simulated frame,
    SHOWN_SPEED_WINDOW_FRAMES apart (fewer at the start), divided by the time between."""
    window = min(len(root_xz_m) - 1, SHOWN_SPEED_WINDOW_FRAMES)
    if window < 1:
        return 0.0
    return float(np.linalg.norm(root_xz_m[-1] - root_xz_m[-1 - window]) * FPS / window)


class StatusLog:
    """One JSON object per line, flushed per line so a reader sees each frame as it comes."""

    def __init__(self, path: Path):
        path.parent.mkdir(parents=True, exist_ok=True)
        self.file = path.open("w", buffering=1)

    def write(self, **fields) -> None:
        self.file.write(json.dumps(fields) + "\n")

    def close(self) -> None:
        self.file.close()
