"""How closely the dogs run at the speed they are asked for: for each asked
speed, on flat ground and on hills, the root's speed over successive 2 s windows after a 2 s
settle, and the worst ratio to the asked speed.

`canis evaluate speed` runs it (with --write-docs, into its section of docs/RESULTS.md). Every asked
speed is one dog of one Controller (a batch: the dogs do not interact), driven straight ahead
through the plain `ControlState` a game sends, with the controller's default speed tracking.
The speed is the horizontal distance between the root's positions at a window's two ends over
its length, as the demo's HUD shows it (canis.demo.status.shown_speed_mps).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
from canis.runtime.actions import Action
from canis.runtime.control import load_speed_calibration
from canis.runtime.controller import Controller
from canis.runtime.features import FPS
from canis.runtime.inference import MotionModel
from canis.runtime.terrain import procedural
from canis.runtime.trajectory import ControlState

ASKED_MPS = (0.5, 1.0, 1.1, 1.9, 3.3)  # issue 23's speeds
# Speeds between those, where the network changes gait (flat ground only: the root's path
# does not depend on the terrain).
BETWEEN_MPS = (0.6, 0.7, 0.8, 1.4, 2.5)
TERRAINS = ("flat", "hills")
SETTLE_S = 2.0
WINDOW_S = 2.0
DOG_SPACING_M = 4.0  # side by side, so each crosses other hills
# Each speed is run from several starts (the dog stands this long first), so the table is not
# one gait phase's luck.
START_DELAYS_S = (0.0, 0.3, 0.7)


@dataclass
class SpeedRun:
    terrain: str
    asked_mps: float
    # Per start (the dog stood for START_DELAYS_S[i] before it was asked to move): the
    # horizontal speed over successive WINDOW_S windows after SETTLE_S from the ask.
    window_mps: list[list[float]]
    # The same windows' straight-line 3D distance (the root at the ground's height) over time.
    window_3d_mps: list[list[float]]

    def worst_ratio(self, windows: list[list[float]]) -> float:
        """The window's speed over the asked one that is furthest from 1, over every start."""
        ratios = np.concatenate([np.array(w) / self.asked_mps for w in windows])
        return float(ratios[np.argmax(np.abs(ratios - 1.0))])


def window_speeds_mps(points_m: np.ndarray, start: int, settle_s: float, window_s: float):
    """(F, D) root positions, one per step from the first (before any step); the dog was
    asked to move at step `start`: the speed over each whole window after the settle."""
    settle, window = round(settle_s * FPS), round(window_s * FPS)
    ends = range(start + settle + window, len(points_m), window)
    return [float(np.linalg.norm(points_m[e] - points_m[e - window]) / window_s) for e in ends]


def measure(
    model_path: Path,
    terrain: str,
    asked_mps=ASKED_MPS,
    seconds: float = 14.0,
    calibrated: bool = False,
    start_delays_s=START_DELAYS_S,
) -> list[SpeedRun]:
    """One controller with a dog per asked speed and start delay, walking straight (+z) on
    `terrain` for `seconds` after its start, with Controller's default speed tracking (and
    the model card's speed curve if `calibrated`)."""
    cases = [(a, d) for a in asked_mps for d in start_delays_s]
    n = len(cases)
    controller = Controller(
        MotionModel(model_path),
        count=n,
        terrain=None if terrain == "flat" else procedural(terrain),
        speed_calibration=load_speed_calibration(model_path) if calibrated else None,
    )
    controller.reset(root_xz_m=np.stack([np.arange(n) * DOG_SPACING_M, np.zeros(n)], 1))
    speeds = np.array([a for a, _ in cases])
    starts = np.array([round(d * FPS) for _, d in cases])
    xz, world = [controller.root_xz_m.copy()], [controller.root_world_m()]
    for frame in range(round((seconds + max(start_delays_s)) * FPS)):
        going = frame >= starts
        velocity = np.stack([np.zeros(n), np.where(going, speeds, 0.0)], 1)
        action = np.where(going, int(Action.MOVE), int(Action.IDLE))
        controller.step(ControlState(velocity, np.zeros(n), action))
        xz.append(controller.root_xz_m.copy())
        world.append(controller.root_world_m())
    xz, world = np.array(xz), np.array(world)
    runs = []
    for a in asked_mps:
        dogs = [i for i, (speed, _) in enumerate(cases) if speed == a]
        flat = [window_speeds_mps(xz[:, i], starts[i], SETTLE_S, WINDOW_S) for i in dogs]
        solid = [window_speeds_mps(world[:, i], starts[i], SETTLE_S, WINDOW_S) for i in dogs]
        runs.append(SpeedRun(terrain, float(a), flat, solid))
    return runs


def table(runs: list[SpeedRun]) -> str:
    rows = [
        "| terrain | asked m/s | speed over successive 2 s windows (first start; flat: "
        "horizontal, else along the ground), m/s | worst horizontal ratio, all starts "
        "| worst ratio along the ground |",
        "|---|---:|---|---:|---:|",
    ]
    for run in runs:
        shown = run.window_mps if run.terrain == "flat" else run.window_3d_mps
        windows = ", ".join(f"{v:.2f}" for v in shown[0])
        rows.append(
            f"| {run.terrain} | {run.asked_mps:.1f} | {windows} "
            f"| {run.worst_ratio(run.window_mps):.3f} | {run.worst_ratio(run.window_3d_mps):.3f} |"
        )
    worst = max(runs, key=lambda r: abs(r.worst_ratio(r.window_mps) - 1.0))
    ratio = worst.worst_ratio(worst.window_mps)
    rows.append("")
    rows.append(
        f"Worst horizontal window: {ratio:.3f} of the asked speed "
        f"({worst.asked_mps:.1f} m/s on {worst.terrain}), {abs(ratio - 1.0) * 100:.1f}% off."
    )
    return "\n".join(rows)


def header(model_path: Path, seconds: float, command: str, machine: str) -> str:
    """The report's first line: how it was made, and why the hills' rows are along the ground."""
    return (
        f"`{command}` ({machine}; model {model_path.name}, {seconds:g} s a start). The motion "
        "network sees no terrain, so a dog's horizontal path on hills is the one it takes on "
        "flat ground (only the legs' IK and the root's height follow the ground): the "
        "horizontal ratios repeat, and the hills' rows show the speed along the ground."
    )


def report(model_path: Path, seconds: float, command: str, machine: str) -> str:
    """The tables for the default tracking and the model card's feed-forward, flat and hills."""
    parts = [header(model_path, seconds, command, machine), ""]
    for calibrated, asked, terrains, title in (
        (False, ASKED_MPS, TERRAINS, "Default speed tracking (`Controller(model)`)"),
        (
            True,
            ASKED_MPS,
            TERRAINS,
            "With the card's speed curve (`speed_calibration=load_speed_calibration(path)`)",
        ),
        (False, BETWEEN_MPS, ("flat",), "Default speed tracking, speeds in between"),
    ):
        runs = []
        for terrain in terrains:
            runs += measure(model_path, terrain, asked, seconds=seconds, calibrated=calibrated)
        parts += [f"**{title}**", "", table(runs), ""]
    return "\n".join(parts)
