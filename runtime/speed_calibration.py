"""A motion network's own speed for each asked speed, so the controller can ask for the speed
that makes the dog move at the one the player wants from the first stride (feed-forward)
instead of waiting seconds for the integral speed tracking to find it.

The curve is the model card's closed-loop measurement without speed tracking (the
"untracked" runs straight ahead in `<model>.closed_loop.json`, written beside the ONNX file by
`canis export`'s model card): asked speed -> mean speed over a minute of driving.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np


@dataclass(frozen=True)
class SpeedCalibration:
    asked_mps: np.ndarray  # (K,) increasing, starting at 0
    measured_mps: np.ndarray  # (K,) non-decreasing, the network's speed for each

    def command_for(self, wanted_mps: np.ndarray) -> np.ndarray:
        """The speed to ask the network for so that it moves at `wanted_mps`; beyond the
        measured range the last ratio holds."""
        wanted = np.asarray(wanted_mps, dtype=np.float64)
        command = np.interp(wanted, self.measured_mps, self.asked_mps)
        top_ratio = self.asked_mps[-1] / max(self.measured_mps[-1], 1e-9)
        return np.where(wanted > self.measured_mps[-1], wanted * top_ratio, command)


def calibration_path(model_path: str | Path) -> Path:
    return Path(model_path).with_suffix(".closed_loop.json")


def load_speed_calibration(model_path: str | Path) -> SpeedCalibration | None:
    """The curve from the model card beside `model_path`, or None when it has none (a model
    without a card is driven by the integral speed tracking alone)."""
    path = calibration_path(model_path)
    if not path.is_file():
        return None
    try:
        runs = json.loads(path.read_text())["runs"]
        points = sorted(
            (float(r["commanded_mps"]), float(r["untracked"]["mean_speed_mps"]))
            for r in runs
            if float(r["turn_rate_degps"]) == 0.0 and r["untracked"]["finite"]
        )
    except (OSError, ValueError, KeyError, TypeError) as error:
        raise ValueError(f"{path}: not a readable closed-loop report ({error})") from None
    if not points:
        return None
    asked = np.array([0.0] + [p[0] for p in points])
    # A network can be slower at a higher asked speed (a gait change); keep the curve
    # invertible by never letting it fall.
    measured = np.maximum.accumulate(np.array([0.0] + [p[1] for p in points]))
    return SpeedCalibration(asked, measured)
