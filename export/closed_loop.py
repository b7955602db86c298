"""Drives a model headless in a closed loop and measures whether it holds up: the check the
shipped models' cards report (forward and turning at the paper's gait speeds), and the
recordings the controller evaluation measures (evaluation/controllers.py)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from canis.runtime.controller import DT_S, Controller
from canis.runtime.features import ACTIONS
from canis.runtime.inference import MotionModel
from canis.runtime.root import yaw_direction_xz
from canis.runtime.trajectory import ControlState

PAPER_SPEEDS_MPS = (0.5, 1.1, 1.9, 3.3)
TURN_RATE_RADPS = np.radians(30.0)
SETTLE_S = 3.0  # speed is measured after the dog has had time to reach it


@dataclass
class Recording:
    """One dog driven for F frames on flat ground (y = 0), as displayed."""

    positions_m: np.ndarray  # (F, J, 3) world
    rotations: np.ndarray  # (F, J, 4) world
    root_yaw_rad: np.ndarray  # (F,)
    speeds_mps: np.ndarray  # (F,) root speed over the ground
    expert_weights: np.ndarray | None  # (F, K) for MANN
    finite: bool


class Steering:
    """Forward along the facing at a speed, the facing turning at a rate (left positive);
    `action_at(t_s)` names the action at each time (default: move)."""

    def __init__(self, speed_mps: float, turn_rate_radps=0.0, action_at=None):
        self.speed_mps, self.turn_rate_radps = speed_mps, turn_rate_radps
        self.action_at = action_at or (lambda t_s: "move")
        self.facing_rad = 0.0

    def __call__(self, frame: int) -> ControlState:
        t_s = frame * DT_S
        rate = self.turn_rate_radps(t_s) if callable(self.turn_rate_radps) else self.turn_rate_radps
        self.facing_rad += rate * DT_S
        velocity = self.speed_mps * yaw_direction_xz(self.facing_rad)
        action = ACTIONS.index(self.action_at(t_s))
        return ControlState(velocity[None], np.array([self.facing_rad]), np.array([action]))


def record(controller: Controller, control_at: Callable[[int], ControlState], frames: int):
    """Steps one dog `frames` times with control_at(frame) and keeps what it showed."""
    keep = {k: [] for k in ("positions", "rotations", "yaw", "speed", "experts")}
    for frame in range(frames):
        controller.step(control_at(frame))
        positions, rotations = controller.display_pose()
        keep["positions"].append(positions[0].copy())
        keep["rotations"].append(rotations[0].copy())
        keep["yaw"].append(float(controller.root_yaw_rad[0]))
        keep["speed"].append(float(np.linalg.norm(controller.root_velocity_xz_mps[0])))
        if controller.expert_weights is not None:
            keep["experts"].append(controller.expert_weights[0].copy())
    positions = np.array(keep["positions"])
    return Recording(
        positions_m=positions,
        rotations=np.array(keep["rotations"]),
        root_yaw_rad=np.array(keep["yaw"]),
        speeds_mps=np.array(keep["speed"]),
        expert_weights=np.array(keep["experts"]) if keep["experts"] else None,
        finite=bool(np.all(np.isfinite(positions))),
    )


def drive(
    model: MotionModel,
    speed_mps: float,
    turn_rate_radps: float,
    seconds: float,
    speed_tracking: bool = True,
) -> dict:
    # speed_tracking False: the network alone, its standing drift not held either.
    controller = Controller(model, speed_tracking=speed_tracking, stand_hold=speed_tracking)
    frames = int(round(seconds / DT_S))
    run = record(controller, Steering(speed_mps, turn_rate_radps), frames)
    finite = run.finite
    settle_frames = int(min(SETTLE_S, seconds / 2) / DT_S)  # short runs measure their end
    mean_speed = float(run.speeds_mps[settle_frames:].mean()) if finite else float("nan")
    hips = controller.skeleton.index("Hips")
    return {
        "commanded_mps": speed_mps,
        "turn_rate_degps": float(np.degrees(turn_rate_radps)),
        "seconds": seconds,
        "finite": finite,
        # above the flat ground at y = 0
        "min_hips_height_m": float(run.positions_m[:, hips, 1].min()) if finite else float("nan"),
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
    # The file's name, not where it was measured: the report is copied beside the file it
    # describes (a run folder's into assets/models).
    return {"model": Path(model_path).name, "kind": model.kind, "runs": runs, "passed": passed}
