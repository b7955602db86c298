"""The posture requests waiting for their dogs to stop (runtime/transition_requests.py
PostureRequests), kept by the controller by dog id (Controller.posture_waits), and their form
in a snapshot: a dict of arrays with a row per waiting request, in the order they wait (the
order they start in, which decides the order sampled transitions draw from the generator).

A target is kept as the keyframe's name when it was asked by name, else as the keyframe's
content (name, rotations, hips height, source), so a save made in one process restores in
another, where no Keyframe object of the first exists.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from canis.runtime.features import ACTIONS
from canis.runtime.poses import Keyframe
from canis.runtime.transition_frames import MAX_TRANSITION_FRAMES, MIN_TRANSITION_FRAMES

NO_ACTION = -1  # the keyframe's own action
NO_SEED = -1  # the controller's generator


@dataclass
class PostureWait:
    target: str | Keyframe
    frames: int
    action: int | None  # a label index (runtime/actions.py), None: the keyframe's own
    facing_yaw_rad: float
    speed_mps: float  # the dog's own when asked: the slow-down starts there
    variation: float = 0.0
    seed: int | None = None
    waited_frames: int = 0

    def group(self) -> tuple:
        """What requests started together share: the same target (by content, not object:
        a restored request's target is a new object), length, action, variation and seed."""
        target = self.target
        if not isinstance(target, str):
            rotations = np.asarray(target.local_rotations)
            target = (target.name, float(target.hips_height_m), rotations.tobytes())
        return (target, self.frames, self.action, self.variation, self.seed)


# name: (dtype, per-row shape after K, where J is the skeleton's joints)
FIELDS = {
    "dog_id": (np.int64, ()),
    "target_name": (np.str_, ()),
    "target_by_name": (np.bool_, ()),
    "target_rotations": (np.float64, ("J", 4)),
    "target_hips_height_m": (np.float64, ()),
    "target_source": (np.str_, ()),
    "frames": (np.int64, ()),
    "action": (np.int64, ()),
    "facing_yaw_rad": (np.float64, ()),
    "speed_mps": (np.float64, ()),
    "variation": (np.float64, ()),
    "seed": (np.int64, ()),
    "waited_frames": (np.int64, ()),
}


def to_arrays(waits: dict[int, PostureWait], joints: int) -> dict[str, np.ndarray]:
    """The waiting requests as arrays (module docstring); a seed a snapshot cannot hold (a
    Generator, or past int64) is a one-line ValueError."""
    rows = list(waits.items())
    for dog, w in rows:
        if w.seed is not None and not (isinstance(w.seed, (int, np.integer)) and w.seed < 2**63):
            raise ValueError(
                f"get_state: dog {dog}'s waiting posture request has seed {w.seed!r}, which a "
                "snapshot cannot hold (use a whole number below 2**63)"
            )
    by_name = [isinstance(w.target, str) for _, w in rows]
    keyframe = [None if named else w.target for named, (_, w) in zip(by_name, rows, strict=True)]
    rotations = np.zeros((len(rows), joints, 4))
    for k, key in enumerate(keyframe):
        if key is not None:
            rotations[k] = key.local_rotations
    column = {
        "dog_id": [dog for dog, _ in rows],
        "target_name": [
            w.target if named else w.target.name
            for named, (_, w) in zip(by_name, rows, strict=True)
        ],
        "target_by_name": by_name,
        "target_rotations": rotations,
        "target_hips_height_m": [0.0 if k is None else k.hips_height_m for k in keyframe],
        "target_source": ["" if k is None else k.source for k in keyframe],
        "frames": [w.frames for _, w in rows],
        "action": [NO_ACTION if w.action is None else w.action for _, w in rows],
        "facing_yaw_rad": [w.facing_yaw_rad for _, w in rows],
        "speed_mps": [w.speed_mps for _, w in rows],
        "variation": [w.variation for _, w in rows],
        "seed": [NO_SEED if w.seed is None else w.seed for _, w in rows],
        "waited_frames": [w.waited_frames for _, w in rows],
    }
    return {
        name: np.asarray(column[name], dtype=dtype).reshape(len(rows), *_shape(shape, joints))
        for name, (dtype, shape) in FIELDS.items()
    }


def _shape(shape: tuple, joints: int) -> tuple:
    return tuple(joints if d == "J" else d for d in shape)


def from_arrays(
    arrays, dog_ids: np.ndarray, keyframes: dict, joints: int
) -> dict[int, PostureWait]:
    """The waiting requests of a snapshot's arrays, every field checked (a one-line
    ValueError naming it) against the snapshot's dogs `dog_ids` and the controller's
    `keyframes`; nothing is trusted for the snapshot's digest."""
    if not isinstance(arrays, dict) or set(arrays) != set(FIELDS):
        raise ValueError(f"set_state: postures must hold exactly {', '.join(FIELDS)}")
    count = None
    for name, (dtype, shape) in FIELDS.items():
        value = arrays[name]
        if not isinstance(value, np.ndarray) or not np.issubdtype(value.dtype, dtype):
            raise ValueError(f"set_state: postures.{name} must be a {np.dtype(dtype).kind} array")
        count = len(value) if count is None else count
        if value.shape != (count, *_shape(shape, joints)):
            raise ValueError(
                f"set_state: postures.{name} has shape {value.shape}, not ({count}, ...)"
            )
        if value.dtype.kind == "f" and not np.all(np.isfinite(value)):
            raise ValueError(f"set_state: postures.{name} holds non-finite values")
    a = arrays
    _require(np.isin(a["dog_id"], dog_ids).all(), "dog_id", "names a dog not in the snapshot")
    _require(len(np.unique(a["dog_id"])) == count, "dog_id", "names a dog twice")
    frames_ok = (a["frames"] >= MIN_TRANSITION_FRAMES) & (a["frames"] <= MAX_TRANSITION_FRAMES)
    _require(frames_ok.all(), "frames", f"must be {MIN_TRANSITION_FRAMES}-{MAX_TRANSITION_FRAMES}")
    _require(
        ((a["action"] >= NO_ACTION) & (a["action"] < len(ACTIONS))).all(),
        "action",
        "is not an action index (or -1: the keyframe's own)",
    )
    _require(
        ((a["variation"] >= 0) & (a["variation"] <= 1)).all(), "variation", "must be in [0, 1]"
    )
    _require((a["seed"] >= NO_SEED).all(), "seed", "must be -1 (none) or >= 0")
    _require((a["waited_frames"] >= 0).all(), "waited_frames", "must be >= 0")
    unknown = set(a["target_name"][a["target_by_name"]].tolist()) - set(keyframes)
    _require(not unknown, "target_name", f"names no keyframe of the library: {sorted(unknown)}")
    waits = {}
    for k in range(count):
        name = str(a["target_name"][k])
        target = name
        if not a["target_by_name"][k]:
            height, source = float(a["target_hips_height_m"][k]), str(a["target_source"][k])
            target = Keyframe(name, a["target_rotations"][k].copy(), height, source)
            try:
                target.checked()
            except ValueError as error:
                raise ValueError(f"set_state: postures.target_rotations: {error}") from None
        action, seed = int(a["action"][k]), int(a["seed"][k])
        waits[int(a["dog_id"][k])] = PostureWait(
            target,
            int(a["frames"][k]),
            None if action == NO_ACTION else action,
            float(a["facing_yaw_rad"][k]),
            float(a["speed_mps"][k]),
            float(a["variation"][k]),
            None if seed == NO_SEED else seed,
            int(a["waited_frames"][k]),
        )
    return waits


def _require(ok: bool, name: str, problem: str) -> None:
    if not ok:
        raise ValueError(f"set_state: postures.{name} {problem}")
