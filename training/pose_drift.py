"""Whether a network's fed-back pose stays a dog: each network is driven forward at a steady
speed (the runtime, speed tracking off) and, every second, the pose it will be given next
frame (the joint block of the runtime's x) is measured against the skeleton: the mean error
of its bone lengths and the mean length of its joint axes (forward and up, unit in the
mocap). A network that predicts each pose whole re-makes a dog every frame; one that adds a
change to the pose it is in (`canis train --pose-residual`) keeps whatever error its changes
leave, and the error grows (docs/EVALUATION.md, the generalisation study).

    python -m canis.training.pose_drift --models MANN8,RES=runs/res/mann8_res.onnx \
        [--speeds 0.56,2.57] [--seconds 20]
"""

from __future__ import annotations

import argparse

import numpy as np
from canis.runtime.features import FPS, INPUT, joint_fields
from canis.runtime.skeleton import Skeleton


def bone_length_error_m(skeleton: Skeleton, positions_m: np.ndarray) -> np.ndarray:
    """(...,) mean absolute difference between each bone's length in root-frame joint
    positions (..., J, 3) and the skeleton's."""
    parents = skeleton.parents[1:]
    lengths = np.linalg.norm(positions_m[..., 1:, :] - positions_m[..., parents, :], axis=-1)
    return np.abs(lengths - np.linalg.norm(skeleton.offsets_m[1:], axis=-1)).mean(axis=-1)


def drive(model_path, speed_mps: float, seconds: float, skeleton: Skeleton) -> list[dict]:
    """One row a second of a steady forward drive: bone length error (cm) and mean axis
    lengths of the pose fed back."""
    from canis.runtime.controller import Controller
    from canis.runtime.inference import MotionModel
    from canis.runtime.trajectory import ControlState

    controller = Controller(MotionModel(model_path), speed_tracking=False)
    control = ControlState.single((0.0, speed_mps), 0.0, "move")
    rows = []
    for frame in range(1, int(seconds * FPS) + 1):
        x = controller.step(control)
        if frame % FPS == 0:
            positions, forwards, ups, _ = joint_fields(np.atleast_2d(x), INPUT)
            rows.append(
                {
                    "seconds": frame / FPS,
                    "bone_error_cm": float(bone_length_error_m(skeleton, positions[0]) * 100),
                    "forward_length": float(np.linalg.norm(forwards[0], axis=-1).mean()),
                    "up_length": float(np.linalg.norm(ups[0], axis=-1).mean()),
                }
            )
    controller.close()
    return rows


def main(argv=None) -> int:
    from canis.runtime.skeleton import shipped_dog_skeleton_path
    from canis.tools.model_registry import model_paths, parse_models

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--models", default="MANN8", help="names or NAME=PATH, comma-separated")
    parser.add_argument("--speeds", default="0.56,2.57", help="m/s, comma-separated")
    parser.add_argument("--seconds", type=float, default=20.0)
    args = parser.parse_args(argv)
    skeleton = Skeleton.from_json(shipped_dog_skeleton_path())
    for name, path in model_paths(*parse_models(args.models)).items():
        for speed in (float(s) for s in args.speeds.split(",")):
            rows = drive(path, speed, args.seconds, skeleton)
            print(
                f"{name} at {speed:.2f} m/s, bone length error cm (forward, up axis length) "
                "each second: "
                + ", ".join(
                    f"{r['bone_error_cm']:.1f} ({r['forward_length']:.2f}, {r['up_length']:.2f})"
                    for r in rows
                ),
                flush=True,
            )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
