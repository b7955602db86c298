"""The transition network's (RTN's) frame contract: what one frame of motion is to it, and
where the character stands relative to the transition's target.

A frame vector (N, FRAME_SIZE) holds, as the RTN paper's x_t does, the root's velocity and
the pose relative to the root:
- root_velocity: (x, z) m/s of the move from the previous frame, in the previous root's
  frame, and the yaw rate in rad/s (exactly the MANN output's root update);
- positions: every joint's position in the root frame (m);
- forwards, ups: the root-frame forward/up axes of the joints that have children (the end
  sites' rotations move nothing, so the network does not carry them).

A placement (N, 4) is the root relative to the target's root: (x, z) in metres in the
target's root frame, and the sine and cosine of the yaw from the target's root. The network
integrates it from the predicted root velocities (inside the exported graph, so training and
runtime share that code) and measures its offsets to the target from it.

The training windows (training/transition_data.py) and the runtime's character history
(runtime/controller.py) both build frames with `frame_vector`.

The target blend (target_blend, blend_frames) is the RTN paper's post-process that makes
a transition's last frame its target exactly.
"""

from __future__ import annotations

import functools
import hashlib
import json
from dataclasses import dataclass

import numpy as np
from canis.runtime.features import FPS, LocalPose
from canis.runtime.root import rotate_xz, to_root_xz, wrap_angle_rad
from canis.runtime.skeleton import DOG_JOINT_NAMES, Skeleton

CONTEXT_FRAMES = 10  # past frames the RTN reads before it generates
MIN_TRANSITION_FRAMES = 5
MAX_TRANSITION_FRAMES = 60
# The time-to-arrival embedding stops changing this many frames before the target (RMI:
# T_max + T_past - 5), so every context frame of a long transition looks equally "far".
TTA_CLAMP_FRAMES = MAX_TRANSITION_FRAMES + CONTEXT_FRAMES - 5
TTA_BASIS = 10000.0  # the embedding itself is computed in the exported graph (training/rtn.py)
JOINT_COUNT = len(DOG_JOINT_NAMES)


def rotated_joints(parents: np.ndarray) -> np.ndarray:
    """Indices of the joints that have children: the only rotations that move anything."""
    return np.array(sorted({int(p) for p in parents if p >= 0}))


def _dog_parents() -> np.ndarray:
    from canis.runtime.skeleton import shipped_dog_skeleton_path

    return Skeleton.from_json(shipped_dog_skeleton_path()).parents


ROTATED_JOINTS = rotated_joints(_dog_parents())
ROTATED_COUNT = len(ROTATED_JOINTS)
ROOT_VELOCITY = slice(0, 3)
POSITIONS = slice(3, 3 + 3 * JOINT_COUNT)
FORWARDS = slice(POSITIONS.stop, POSITIONS.stop + 3 * ROTATED_COUNT)
UPS = slice(FORWARDS.stop, FORWARDS.stop + 3 * ROTATED_COUNT)
FRAME_SIZE = UPS.stop
PLACEMENT_SIZE = 4
ARRIVED = np.array([0.0, 0.0, 0.0, 1.0])  # the target's own placement


def contract_description() -> dict:
    return {
        "frame": {
            "root_velocity": [ROOT_VELOCITY.start, ROOT_VELOCITY.stop],
            "positions": [POSITIONS.start, POSITIONS.stop],
            "forwards": [FORWARDS.start, FORWARDS.stop],
            "ups": [UPS.start, UPS.stop],
        },
        "joints": list(DOG_JOINT_NAMES),
        "rotated_joints": ROTATED_JOINTS.tolist(),
        "placement": ["x_m", "z_m", "sin_yaw", "cos_yaw"],
        "context_frames": CONTEXT_FRAMES,
        "transition_frames": [MIN_TRANSITION_FRAMES, MAX_TRANSITION_FRAMES],
        "tta_clamp_frames": TTA_CLAMP_FRAMES,
        "fps": FPS,
    }


def transition_layout_hash() -> str:
    text = json.dumps(contract_description(), sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def frame_vector(
    root_velocity_xz_mps: np.ndarray, root_yaw_rate_radps: np.ndarray, pose: LocalPose
) -> np.ndarray:
    """(N, FRAME_SIZE) float32 frames from the root's motion and a root-frame pose (N, J, 3)."""
    n = len(root_yaw_rate_radps)
    frames = np.empty((n, FRAME_SIZE), dtype=np.float32)
    frames[:, 0:2] = root_velocity_xz_mps
    frames[:, 2] = root_yaw_rate_radps
    frames[:, POSITIONS] = pose.positions_m.reshape(n, -1)
    frames[:, FORWARDS] = pose.forwards[:, ROTATED_JOINTS].reshape(n, -1)
    frames[:, UPS] = pose.ups[:, ROTATED_JOINTS].reshape(n, -1)
    return frames


@dataclass
class FrameParts:
    root_velocity_xz_mps: np.ndarray  # (N, 2)
    root_yaw_rate_radps: np.ndarray  # (N,)
    positions_m: np.ndarray  # (N, J, 3) root frame
    forwards: np.ndarray  # (N, J, 3): end sites take their parent's axes, as in FK
    ups: np.ndarray


@functools.lru_cache(maxsize=8)
def axis_sources(parents: tuple[int, ...]) -> np.ndarray:
    """(J,) for each joint, the index among the rotated joints whose axes it shows: its own,
    or for a joint without children (not carried) its nearest rotated ancestor's, as in FK."""
    rotated = rotated_joints(np.array(parents))
    slot = {int(joint): k for k, joint in enumerate(rotated)}
    sources = []
    for joint in range(len(parents)):
        while joint not in slot:
            joint = parents[joint]
        sources.append(slot[joint])
    return np.array(sources)


def split_frame(frames: np.ndarray, parents: np.ndarray) -> FrameParts:
    n = len(frames)
    # A gather rather than a loop over joints: the controller splits a frame every step of
    # a transition.
    sources = axis_sources(tuple(int(p) for p in parents))
    forwards = frames[:, FORWARDS].reshape(n, -1, 3)[:, sources]
    ups = frames[:, UPS].reshape(n, -1, 3)[:, sources]
    return FrameParts(
        frames[:, 0:2],
        frames[:, 2],
        frames[:, POSITIONS].reshape(n, JOINT_COUNT, 3),
        forwards,
        ups,
    )


def root_motion(root_xz_m: np.ndarray, root_yaw_rad: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per-frame root velocities (..., F, 2) in the previous root's frame and yaw rates
    (..., F) of root paths (..., F, 2) / (..., F); the first frame repeats the second's."""
    step = root_xz_m[..., 1:, :] - root_xz_m[..., :-1, :]
    heading = root_yaw_rad[..., :-1]
    velocity = rotate_xz(step.reshape(-1, 1, 2), -heading.reshape(-1)).reshape(step.shape) * FPS
    yaw_rate = wrap_angle_rad(root_yaw_rad[..., 1:] - heading) * FPS
    return (
        np.concatenate([velocity[..., :1, :], velocity], axis=-2),
        np.concatenate([yaw_rate[..., :1], yaw_rate], axis=-1),
    )


def placement(root_xz_m, root_yaw_rad, target_xz_m, target_yaw_rad) -> np.ndarray:
    """(N, 4) placements of roots (N, 2) / (N,) relative to target roots (N, 2) / (N,)."""
    xz = to_root_xz(root_xz_m[:, None], target_xz_m, target_yaw_rad)[:, 0]
    yaw = wrap_angle_rad(root_yaw_rad - target_yaw_rad)
    return np.concatenate([xz, np.sin(yaw)[:, None], np.cos(yaw)[:, None]], axis=1)


def placement_to_world(placements, target_xz_m, target_yaw_rad):
    """World root (x, z) (N, 2) and yaw (N,) of placements (N, 4) relative to targets."""
    xz = rotate_xz(placements[:, None, :2], target_yaw_rad)[:, 0] + target_xz_m
    yaw = wrap_angle_rad(target_yaw_rad + np.arctan2(placements[:, 2], placements[:, 3]))
    return xz, yaw


def blend_weights(indices, count: int, window) -> np.ndarray:
    """The RTN paper's target-blend weight (its eq. 16) of transition frames `indices`
    (1..count, the last being the target): 1 - (count - t) / window, from 0 before the
    blend window's `window` frames to 1 at the target."""
    return np.clip(1.0 - (count - np.asarray(indices)) / np.asarray(window), 0.0, 1.0)


def blend_frames(frames, placements, weights, predicted_target, predicted_placement, target):
    """frames (N, K, D) / placements (N, K, 4) with weights (N, K) of the error between the
    true target (N, D) and the predicted one (N, D), placement (N, 4), added: the blend of
    any frames of a transition once its last frame is known."""
    w = np.asarray(weights)[..., None]
    frame_error = np.asarray(target)[:, None, :] - np.asarray(predicted_target)[:, None, :]
    placement_error = ARRIVED[None, None, :] - np.asarray(predicted_placement)[:, None, :]
    blended = placements + w * placement_error
    yaw = np.arctan2(blended[..., 2], blended[..., 3])  # sine/cosine back on the unit circle
    blended[..., 2], blended[..., 3] = np.sin(yaw), np.cos(yaw)
    return frames + w * frame_error, blended


def target_blend(frames, placements, target_frame, window=None) -> tuple[np.ndarray, np.ndarray]:
    """The RTN's target blend: the error between the true target and the predicted one is
    added to the last `window` generated frames (default: all of them) with a weight rising
    linearly to 1 at the target, so the last frame is the target and the correction is
    spread over the window."""
    count = frames.shape[1]
    weights = blend_weights(np.arange(1, count + 1), count, window or count)[None, :]
    return blend_frames(frames, placements, weights, frames[:, -1], placements[:, -1], target_frame)
