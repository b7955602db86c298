"""Drives a model headless in a closed loop and measures whether it holds up: the check the
shipped models' cards report (forward and turning at the paper's gait speeds)."""

from __future__ import annotations

import numpy as np

from runtime.controller import DT_S, Controller
from runtime.features import ACTIONS
from runtime.inference import MotionModel
from runtime.root import yaw_direction_xz
from runtime.trajectory import ControlState

PAPER_SPEEDS_MPS = (0.5, 1.1, 1.9, 3.3)
TURN_RATE_RADPS = np.radians(30.0)
SETTLE_S = 3.0  # speed is measured after the dog has had time to reach it


def drive(
    model: MotionModel,
    speed_mps: float,
    turn_rate_radps: float,
    seconds: float,
    speed_tracking: bool = True,
) -> dict:
    controller = Controller(model, speed_tracking=speed_tracking)
    frames = int(round(seconds / DT_S))
    hips = controller.skeleton.index("Hips")
    speeds, hips_heights, finite = [], [], True
    facing = 0.0
    for _ in range(frames):
        facing += turn_rate_radps * DT_S
        velocity = speed_mps * yaw_direction_xz(facing)
        controller.step(
            ControlState(velocity[None], np.array([facing]), np.array([ACTIONS.index("move")]))
        )
        positions = controller.display_positions
        finite &= bool(np.all(np.isfinite(positions)))
        if not finite:
            break
        hips_heights.append(positions[0, hips, 1])  # above the flat ground at y = 0
        speeds.append(np.linalg.norm(controller.root_velocity_xz_mps[0]))
    settle_frames = int(min(SETTLE_S, seconds / 2) / DT_S)  # short runs measure their end
    settled = np.array(speeds[settle_frames:]) if finite else np.array([np.nan])
    mean_speed = float(settled.mean())
    return {
        "commanded_mps": speed_mps,
        "turn_rate_degps": float(np.degrees(turn_rate_radps)),
        "seconds": seconds,
        "finite": finite,
        "min_hips_height_m": float(np.min(hips_heights)) if finite else float("nan"),
        "mean_speed_mps": mean_speed,
        "speed_error": abs(mean_speed - speed_mps) / speed_mps,
    }


def closed_loop_report(model_path, seconds: float = 60.0, speeds=PAPER_SPEEDS_MPS) -> dict:
    """Each speed forward and turning, with the runtime's speed tracking (as shipped) and
    without it (the network's own speed for the asked one). Passing is judged as shipped."""
    model = MotionModel(model_path)
    runs = []
    for speed in speeds:
        for turn in (0.0, TURN_RATE_RADPS):
            run = drive(model, speed, turn, seconds)
            raw = drive(model, speed, turn, seconds, speed_tracking=False)
            run["untracked"] = {
                k: raw[k] for k in ("finite", "min_hips_height_m", "mean_speed_mps", "speed_error")
            }
            runs.append(run)
    passed = all(
        r["finite"] and r["min_hips_height_m"] > 0.0 and r["speed_error"] <= 0.2 for r in runs
    )
    return {"model": str(model_path), "kind": model.kind, "runs": runs, "passed": passed}
