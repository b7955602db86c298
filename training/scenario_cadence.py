"""What the controllers evaluation's leg stiffness compares: how the mocap's scenario frames
come (runs of consecutive frames, and how long), and how fast the legs swing in them (cycles a
second of a leg joint's angle) against the networks driven steadily in the same scenario.

Leg stiffness (controller_metrics.py) is a mean angle per frame, so it is the angle a leg
travels in a cycle times its cadence: a network that swings as far at half the cadence scores
half. This tells the two apart.

    python -m canis.training.scenario_cadence [--models MANN8,PFNN or NAME=PATH ...]
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
from canis.runtime.features import FPS
from canis.runtime.kinematics import local_rotations
from canis.runtime.rotations import quat_angle_rad
from canis.training.controller_metrics import angular_update_deg
from canis.training.labels import true_runs

JOINTS = ("LeftForeArm", "LeftLeg")  # the front elbow and hind knee: the largest gaps
MIN_RUN_FRAMES = 30  # half a second: shorter runs hold too little of a cycle to count
LONG_RUN_FRAMES = 60
HYSTERESIS_DEG = 5.0  # a cycle must swing this far each side of its median


def cycles_per_s(angle_deg: np.ndarray, fps: float = FPS) -> float:
    """Swing cycles a second of an angle series: upward crossings of its median, each counted
    once the angle has gone HYSTERESIS_DEG below it and then as far above (noise does not
    count as a cycle). A series can miss a crossing at either end, so a half-second run reads
    0 or 2 cycles a second; averaged over the mocap's many runs, that comes out as their mean
    cadence."""
    centred = np.asarray(angle_deg, np.float64) - np.median(angle_deg)
    cycles, armed = 0, False
    for value in centred:
        if value < -HYSTERESIS_DEG:
            armed = True
        elif value > HYSTERESIS_DEG and armed:
            cycles, armed = cycles + 1, False
    return cycles / (len(centred) / fps)


def update_deg(skeleton, world_rotations: np.ndarray, joint: int) -> float:
    """The joint's mean angular update a frame: its share of the leg stiffness."""
    local = local_rotations(skeleton, world_rotations)[:, joint]
    return float(angular_update_deg(local).mean())


def joint_angles_deg(skeleton, world_rotations: np.ndarray, joint: int) -> np.ndarray:
    """(F,) angle of a joint's local rotation from its median over the frames."""
    local = local_rotations(skeleton, world_rotations)[:, joint]
    local = local * np.where(local[:, :1] < 0, -1.0, 1.0)  # one hemisphere
    middle = np.median(local, axis=0)
    return np.degrees(quat_angle_rad(local, (middle / np.linalg.norm(middle))[None]))


def mocap_summary(clips, scenario_frames) -> dict:
    """Per scenario: the runs its frames come in and the joints' cycles a second in the runs
    of at least MIN_RUN_FRAMES (weighted by their frames)."""
    out = {}
    skeleton = clips[0].skeleton
    joints = skeleton.indices(JOINTS)
    for name in ("walk", "canter", "turn"):
        lengths, rates, updates, weights = [], [], [], []
        for clip in clips:
            for start, end in true_runs(scenario_frames(clip.labels)[name]):
                lengths.append(end - start)
                if end - start >= MIN_RUN_FRAMES:
                    rotations = clip.rotations[start:end]
                    angles = [joint_angles_deg(skeleton, rotations, j) for j in joints]
                    rates.append([cycles_per_s(a) for a in angles])
                    updates.append([update_deg(skeleton, rotations, j) for j in joints])
                    weights.append(end - start)
        lengths = np.array(lengths)
        out[name] = {
            "runs": len(lengths),
            "frames": int(lengths.sum()),
            "median_run_frames": float(np.median(lengths)),
            "longest_run_frames": int(lengths.max()),
            "share_in_runs_of_1_s": float(
                lengths[lengths >= LONG_RUN_FRAMES].sum() / lengths.sum()
            ),
            "cycles_per_s": dict(zip(JOINTS, np.average(rates, 0, weights).tolist(), strict=True)),
            "update_deg": dict(zip(JOINTS, np.average(updates, 0, weights).tolist(), strict=True)),
        }
    return out


def driven_cycles(model_path: Path, skeleton, commands: dict) -> dict:
    """Each scenario driven as the controllers evaluation drives it: the joints' cycles a
    second over the measured seconds."""
    from canis.runtime.inference import MotionModel
    from canis.training import evaluate_controllers as ec

    model = MotionModel(model_path, threads=1)
    joints = skeleton.indices(JOINTS)
    out = {}
    for name in ("walk", "canter", "turn"):
        run = ec.drive(model, ec.scenario_steering(name, commands), ec.SETTLE_S + ec.MEASURE_S)
        settled = slice(ec._frames(ec.SETTLE_S), None)
        angles = [joint_angles_deg(skeleton, run.rotations[settled], j) for j in joints]
        out[name] = {
            "cycles_per_s": dict(zip(JOINTS, [cycles_per_s(a) for a in angles], strict=True)),
            "update_deg": dict(
                zip(
                    JOINTS,
                    [update_deg(skeleton, run.rotations[settled], j) for j in joints],
                    strict=True,
                )
            ),
        }
    return out


def main(argv=None) -> None:
    from canis.training import evaluate_controllers as ec
    from canis.training.study_arguments import models_and_clips, study_parser

    parser = study_parser(__doc__)
    args = parser.parse_args(argv)
    paths, clips = models_and_clips(parser, args)
    commands = ec.ground_truth(clips)["commands"]
    for name, s in mocap_summary(clips, ec.scenario_frames).items():
        print(
            f"mocap {name}: {s['frames']} frames in {s['runs']} runs (median"
            f" {s['median_run_frames']:.0f} frames, longest {s['longest_run_frames']};"
            f" {s['share_in_runs_of_1_s']:.0%} in runs of 1 s or more); in its runs of"
            f" {MIN_RUN_FRAMES}+ frames: {_legs(s)}"
        )
    for name, path in paths.items():
        for scenario, s in driven_cycles(path, clips[0].skeleton, commands).items():
            print(f"{name} {scenario} at {commands[scenario]}: {_legs(s)}")


def _legs(s: dict, fps: float = FPS) -> str:
    """Each joint's cycles a second, its update a frame, and the angle it travels a cycle
    (update x fps / cycles: stiffness = travel a cycle x cadence / fps)."""
    parts = []
    for j in JOINTS:
        cycles, update = s["cycles_per_s"][j], s["update_deg"][j]
        travel = f"{update * fps / cycles:.0f}" if cycles > 0 else "-"
        parts.append(f"{j} {cycles:.2f} cycles/s, {update:.2f} deg/frame, {travel} deg/cycle")
    return "; ".join(parts)


if __name__ == "__main__":
    main()
