"""What the controllers evaluation's steady scenarios never ask a network: to jump from each
gait, and to stop from it. Each is asked at several points of the stride, as
evaluation/transitions.py asks the postures, since where in the stride a request comes
moves the answer a lot (a shipped MANN-8's jump from 1.1 m/s rose 0.01-0.22 m over eight of
them).

- **Jump**: the hips' rise (m) when `jump` is asked for JUMP_HOLD_S, above their median height
  over the second before (evaluate_controllers.jump_height_m), the median over the phases. The
  mocap's: the same rise over each jump the labels find (as captured).
- **Stop**: the asked speed falls to zero over posture_requests.SLOW_DOWN_S and the action
  becomes idle, as when a game's player lets go (and as a posture asked while moving starts):
  the largest distance any shown joint moves in one frame over the STOP_WATCH_S after the
  request, against the gait's own largest over its last second, the worst over the phases, and
  which joint. A stop whose fastest frame outruns the gait it stops from is a pop: one
  candidate network flipped its left upper arm stopping from a trot (27.7 cm in a frame, the
  trot's own worst 11.4) where its predicted forward axis for that joint shrank to 0.11.

    python -m canis.evaluation.jumps_and_stops MODEL.onnx [MODEL.onnx ...]
"""

from __future__ import annotations

import numpy as np
from canis.evaluation.controllers import (
    JUMP_WATCH_S,
    _frames,
    drive,
    jump_height_m,
    jump_steering,
)
from canis.export.closed_loop import record
from canis.runtime.actions import action_index
from canis.runtime.controller import DT_S, Controller
from canis.runtime.root import yaw_direction_xz
from canis.runtime.trajectory import ControlState
from canis.runtime.transition_requests import slow_down_left
from canis.training.labels import ACTIONS, true_runs

JUMP_FROM_MPS = (0.0, 1.1, 1.9, 3.3)
STOP_FROM_MPS = (1.1, 1.9, 3.3)
ASK_AT_S = 3.0  # the gait before the request
# The request comes this many frames past ASK_AT_S: 0-21, a canter stride (about 24 frames at
# 3.3 m/s) in steps of 3.
PHASES_FRAMES = tuple(range(0, 24, 3))
STOP_WATCH_S = 2.0
GAIT_WATCH_S = 1.0
# A stop is a pop when its fastest frame outruns the gait's own by more than this: the first
# frames after the request are still the gait, and its last second need not hold its fastest
# stride (the shipped MANN-8's stops from 1.1 and 3.3 m/s reach 1.01x and 1.03x their gait's).
POP_OVER_GAIT = 1.25


def stopping_control(speed_mps: float, ask_frame: int):
    """control_at(frame) for a dog moving straight ahead (+z) at `speed_mps` until `ask_frame`,
    then asked for a speed falling to zero over SLOW_DOWN_S, then to idle."""
    move, idle = action_index("move"), action_index("idle")
    ahead = yaw_direction_xz(0.0)

    def control_at(frame: int) -> ControlState:
        speed = speed_mps * slow_down_left(max(frame - ask_frame, 0))
        action = move if speed > 0 else idle
        return ControlState((speed * ahead)[None], np.zeros(1), np.array([action]))

    return control_at


def largest_step(positions_m: np.ndarray) -> tuple[float, int, int]:
    """Of shown poses (F, J, 3): the largest distance (cm) any joint moves between consecutive
    frames, the frame it ends on (1..F-1) and the joint."""
    steps = np.linalg.norm(np.diff(positions_m, axis=0), axis=-1)
    frame, joint = np.unravel_index(int(steps.argmax()), steps.shape)
    return float(steps[frame, joint]) * 100, int(frame) + 1, int(joint)


def jump_rise_m(model, skeleton, speed_mps: float, phase_frames: int) -> float:
    at_s = ASK_AT_S + phase_frames * DT_S
    steering = jump_steering(speed_mps, at_s)
    run = drive(model, steering, at_s + JUMP_WATCH_S, speed_tracking=False)
    return jump_height_m(skeleton, run, at_s)


def stop(model, skeleton, speed_mps: float, phase_frames: int) -> dict:
    ask = _frames(ASK_AT_S) + phase_frames
    controller = Controller(model)  # as shipped: speed tracking on
    run = record(controller, stopping_control(speed_mps, ask), ask + _frames(STOP_WATCH_S))
    gait_cm, _, _ = largest_step(run.positions_m[ask - _frames(GAIT_WATCH_S) : ask])
    stop_cm, frame, joint = largest_step(run.positions_m[ask - 1 :])
    return {
        "stop_cm_per_frame": stop_cm,
        "gait_cm_per_frame": gait_cm,
        "joint": skeleton.joint_names[joint],
        "after_frames": frame,
        "phase_frames": phase_frames,
    }


def measure(model, skeleton) -> dict:
    """A motion model's jumps (median rise per speed) and stops (the worst phase per speed)."""
    jumps = {}
    for speed in JUMP_FROM_MPS:
        rises = [jump_rise_m(model, skeleton, speed, p) for p in PHASES_FRAMES]
        jumps[str(speed)] = float(np.median(rises))
    stops = {}
    for speed in STOP_FROM_MPS:
        runs = [stop(model, skeleton, speed, p) for p in PHASES_FRAMES]
        stops[str(speed)] = max(runs, key=lambda r: r["stop_cm_per_frame"])
    return {"jump_rise_m": jumps, "stops": stops}


def mocap_jump_rises_m(clips) -> list[float]:
    """Each labelled jump's hips rise (m above the ground under the dog) over their median in
    the second before it, in clips as captured (the mirrored copies would count each twice)."""
    jump, second = ACTIONS.index("jump"), _frames(1.0)
    rises = []
    for clip in clips:
        labels = clip.labels
        for start, end in true_runs(labels.action_index == jump):
            if start < second // 2:  # too little before it to tell the height it rose from
                continue
            before = labels.hips_height_m[max(start - second, 0) : start]
            rises.append(float(labels.hips_height_m[start:end].max() - np.median(before)))
    return rises


def pops(stops: dict) -> list[str]:
    """The stops whose fastest frame outruns the gait they stop from (by POP_OVER_GAIT)."""
    return [
        f"from {speed} m/s: {s['stop_cm_per_frame']:.1f} cm/frame ({s['joint']}), its gait's "
        f"own {s['gait_cm_per_frame']:.1f}"
        for speed, s in stops.items()
        if s["stop_cm_per_frame"] > POP_OVER_GAIT * s["gait_cm_per_frame"]
    ]


def main(argv=None) -> int:
    import argparse

    from canis.runtime.inference import MotionModel
    from canis.runtime.skeleton import Skeleton, shipped_dog_skeleton_path

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("models", nargs="+", help="motion models (.onnx)")
    args = parser.parse_args(argv)
    skeleton = Skeleton.from_json(shipped_dog_skeleton_path())
    for path in args.models:
        found = measure(MotionModel(path), skeleton)
        rises = " / ".join(f"{v:.3f}" for v in found["jump_rise_m"].values())
        print(f"{path}: jump rise from {' / '.join(found['jump_rise_m'])} m/s: {rises} m")
        for speed, s in found["stops"].items():
            print(
                f"  stop from {speed} m/s: {s['stop_cm_per_frame']:.1f} cm/frame ({s['joint']}, "
                f"phase {s['phase_frames']}, frame {s['after_frames']}), gait's own "
                f"{s['gait_cm_per_frame']:.1f}"
            )
        for line in pops(found["stops"]):
            print(f"  POP {line}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
