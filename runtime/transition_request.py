"""What Controller.transition_to checks and works out before a transition starts: the target
keyframe as the transition network reads it, the action the dogs are handed back with, and
where each of them will stand."""

from __future__ import annotations

import numpy as np
from canis.runtime.actions import action_index
from canis.runtime.arguments import per_dog
from canis.runtime.features import ACTIONS, FPS
from canis.runtime.poses import KEYFRAME_ACTIONS, Keyframe, keyframe_pose
from canis.runtime.skeleton import Skeleton
from canis.runtime.state import DogState
from canis.runtime.transition_frames import frame_vector
from canis.runtime.transition_player import LEAD_FRAMES, stopping_point


def target_keyframe(
    keyframes: dict[str, Keyframe], target: str | Keyframe, action
) -> tuple[Keyframe, int]:
    """The keyframe `target` names (or is), checked, and the action index the dogs are handed
    back with: `action` (a name, an Action or an index; runtime/actions.py), by default the
    keyframe's own network label."""
    keyframe = keyframes.get(target) if isinstance(target, str) else target
    if keyframe is None:
        raise ValueError(
            f"transition_to: no keyframe {target!r}; the library has {', '.join(keyframes)}"
        )
    keyframe = keyframe.checked()
    if action is None:
        return keyframe, ACTIONS.index(KEYFRAME_ACTIONS.get(keyframe.name, "idle"))
    return keyframe, action_index(action)


# Target frames already made, by the keyframe's content (the library's are asked for again and
# again): its FK was a third of what asking for a transition cost. An entry holds its
# skeleton, so the skeleton's id is not reused while it is here.
_TARGET_FRAMES: dict[tuple, tuple[Skeleton, np.ndarray]] = {}
_TARGET_FRAMES_KEPT = 32


def target_frame(skeleton: Skeleton, keyframe: Keyframe, n: int) -> np.ndarray:
    """(n, FRAME_SIZE) the keyframe as the transition network's target frame, at rest."""
    rotations = np.asarray(keyframe.local_rotations)
    key = (id(skeleton), float(keyframe.hips_height_m), rotations.dtype.str, rotations.tobytes())
    made = _TARGET_FRAMES.get(key)
    if made is None or made[0] is not skeleton:
        pose = keyframe_pose(skeleton, keyframe)
        made = (skeleton, frame_vector(np.zeros((1, 2)), np.zeros(1), pose))
        if len(_TARGET_FRAMES) >= _TARGET_FRAMES_KEPT:
            _TARGET_FRAMES.clear()
        _TARGET_FRAMES[key] = made
    return np.repeat(made[1], n, axis=0)


def target_placement(
    s: DogState, rows: np.ndarray, frames: int, at_xz_m=None, yaw_rad=None
) -> tuple[np.ndarray, np.ndarray]:
    """Where the dogs `rows` stand when handed back, (n, 2) and (n,): `at_xz_m` / `yaw_rad`
    where given, by default where each would stop if it went on through the lead, then
    slowed evenly over the transition's `frames`."""
    n = len(rows)
    xz, yaw = stopping_point(s, rows, LEAD_FRAMES / FPS, (frames + 1) / FPS)
    if at_xz_m is not None:
        xz = per_dog(at_xz_m, (n, 2), "at_xz_m", "transition_to", broadcast=True)
    if yaw_rad is not None:
        yaw = per_dog(yaw_rad, (n,), "yaw_rad", "transition_to", broadcast=True)
    if not (np.all(np.isfinite(xz)) and np.all(np.isfinite(yaw))):
        raise ValueError("transition_to: the transition's target position or yaw is not finite")
    return xz, yaw
