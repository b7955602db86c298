"""Keyframe poses of the dog (stand, sit, lie, beg), taken from the mocap by
`canis keyframes export` and shipped in assets/poses/dog_keyframes.json.

A keyframe is a pose in its root frame: the hips straight above the root (at hips_height_m
above the ground) and the body facing +z. The runtime starts characters from them and the
transition model uses them as targets.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from canis.runtime.assets import asset_path
from canis.runtime.features import LocalPose
from canis.runtime.kinematics import FLAT_GROUND, FullBodyIk, forward_kinematics
from canis.runtime.root import body_facing, yaw_from_direction, yaw_quaternion
from canis.runtime.rotations import (
    quat_conjugate,
    quat_multiply,
    quat_normalize,
    quat_to_forward_up,
)
from canis.runtime.skeleton import DOG_JOINT_NAMES, Skeleton

# Keyframe name -> the action it is chosen from (training/clips.py) and that holds it.
KEYFRAME_ACTIONS = {"stand": "idle", "sit": "sit", "lie": "lie", "beg": "stand"}


@dataclass(frozen=True)
class Keyframe:
    name: str
    local_rotations: np.ndarray  # (J, 4); the root's is relative to the root frame
    hips_height_m: float
    source: str  # clip and frame it was taken from

    def checked(self) -> Keyframe:
        """Itself, or ValueError naming what makes it unusable as a pose."""
        rotations = np.asarray(self.local_rotations)
        if rotations.shape != (len(DOG_JOINT_NAMES), 4):
            raise ValueError(
                f"keyframe {self.name!r}: rotations of shape {rotations.shape}, but the dog has "
                f"{len(DOG_JOINT_NAMES)} joints (expected ({len(DOG_JOINT_NAMES)}, 4))"
            )
        if not np.all(np.isfinite(rotations)) or not np.isfinite(self.hips_height_m):
            raise ValueError(f"keyframe {self.name!r}: holds non-finite values")
        if np.any(np.linalg.norm(rotations, axis=1) < 1e-6):
            raise ValueError(f"keyframe {self.name!r}: holds zero-length quaternions")
        return self


def keyframe_from_world_pose(
    name: str,
    skeleton: Skeleton,
    rotations: np.ndarray,
    root_rotation: np.ndarray | None = None,
    hips_height_m: float | None = None,
    source: str = "recorded",
    positions_m: np.ndarray | None = None,
) -> Keyframe:
    """A keyframe from one world-space pose: global joint rotations (J, 4), e.g. a frame of
    `canis run --record` or Controller.display_pose(). The root rotation (a yaw) defaults to
    the body's facing and the hips height to the hips' y, both from positions_m (J, 3)."""
    rotations = np.asarray(rotations, dtype=np.float64)
    if root_rotation is None or hips_height_m is None:
        if positions_m is None:
            raise ValueError("give positions_m, or both root_rotation and hips_height_m")
        positions_m = np.asarray(positions_m, dtype=np.float64)
    if root_rotation is None:
        root_rotation = yaw_quaternion(yaw_from_direction(body_facing(positions_m, skeleton)))
    if hips_height_m is None:
        hips_height_m = float(positions_m[0, 1])
    local = rotations.copy()
    local[1:] = quat_multiply(quat_conjugate(rotations[skeleton.parents[1:]]), rotations[1:])
    local[0] = quat_multiply(quat_conjugate(root_rotation), rotations[0])  # root-relative hips
    return Keyframe(name, quat_normalize(local), float(hips_height_m), source).checked()


def keyframe_pose(skeleton: Skeleton, keyframe: Keyframe) -> LocalPose:
    """The keyframe as a still root-frame pose (1, J, 3) arrays."""
    positions, rotations = forward_kinematics(
        skeleton,
        quat_normalize(np.asarray(keyframe.local_rotations, dtype=np.float64))[None],
        np.array([[0.0, keyframe.hips_height_m, 0.0]]),
    )
    forwards, ups = quat_to_forward_up(rotations.astype(np.float64))
    zeros = np.zeros_like(forwards)
    return LocalPose(positions.astype(np.float64), forwards, ups, zeros)


def keyframe_shown_m(skeleton: Skeleton, keyframe: Keyframe) -> np.ndarray:
    """The keyframe's joint positions (J, 3) in its root frame as the runtime shows it on flat
    ground, through the full-body IK: it keeps every joint above the ground, where the sit's
    and the beg's tails are 4.3-4.4 cm under it."""
    local = np.asarray(keyframe.local_rotations, dtype=np.float32)[None]
    hips = np.array([[0.0, keyframe.hips_height_m, 0.0]])
    facing = np.array([[0.0, 0.0, 1.0]])  # the keyframe faces +z
    local, hips, _ = FullBodyIk(skeleton, 1).solve(
        local, hips, np.zeros(1), facing, FLAT_GROUND, 0.0
    )
    return forward_kinematics(skeleton, local, hips)[0][0]


def shipped_keyframes_path() -> Path:
    return asset_path("poses/dog_keyframes.json")


def save_keyframes(keyframes: list[Keyframe], path: Path) -> None:
    data = {
        "joint_names": list(DOG_JOINT_NAMES),
        "keyframes": [
            {
                "name": k.name,
                "source": k.source,
                "hips_height_m": round(float(k.hips_height_m), 5),
                "local_rotations": np.round(k.local_rotations.astype(np.float64), 6).tolist(),
            }
            for k in keyframes
        ],
    }
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data, indent=1) + "\n")


def load_keyframes(path: str | Path | None = None) -> dict[str, Keyframe]:
    path = Path(path) if path else shipped_keyframes_path()
    try:
        data = json.loads(path.read_text())
        if tuple(data["joint_names"]) != DOG_JOINT_NAMES:
            raise ValueError("joint names differ from the dog skeleton's")
        keyframes = {}
        for k in data["keyframes"]:
            rotations = np.array(k["local_rotations"], dtype=np.float64)
            if rotations.shape != (len(DOG_JOINT_NAMES), 4) or not np.all(np.isfinite(rotations)):
                raise ValueError(
                    f"keyframe {k['name']!r} has no valid {len(DOG_JOINT_NAMES)}x4 rotations"
                )
            keyframes[k["name"]] = Keyframe(
                k["name"], quat_normalize(rotations), float(k["hips_height_m"]), k["source"]
            )
        return keyframes
    except (OSError, json.JSONDecodeError, KeyError, TypeError, ValueError) as error:
        raise ValueError(f"{path}: not a valid keyframe file: {error}") from error
