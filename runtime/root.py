"""The root transform: the hips projected onto the ground, turned to face where the body
faces. Every feature is expressed relative to it.

The root frame is a pure yaw about +y whose local +z is the facing direction (the forward
axis of runtime.rotations' forward/up encoding); its local +x is then the character's left.

Exponential smoothing (a damper): a value moves toward its target so that half of the gap
is left after each half-life, whatever the time step. The command smoothing, the speed
tracking, the IK's and the foot lock's blend weights and the hand-back's display offsets all
use it, each with its own half-life.
"""

from __future__ import annotations

import numpy as np
from canis.runtime.rotations import cross, quat_conjugate, quat_rotate
from canis.runtime.skeleton import Skeleton

UP = np.array([0.0, 1.0, 0.0])


def yaw_quaternion(yaw_rad: np.ndarray) -> np.ndarray:
    """Rotations about +y by yaw_rad (...,): local +z maps to (sin yaw, 0, cos yaw)."""
    half = 0.5 * np.asarray(yaw_rad)
    zeros = np.zeros_like(half)
    return np.stack([np.cos(half), zeros, np.sin(half), zeros], axis=-1)


def yaw_from_direction(direction: np.ndarray) -> np.ndarray:
    """The yaw (...,) of horizontal directions given as (..., 3) or as (x, z) pairs (..., 2)."""
    x = direction[..., 0]
    z = direction[..., -1]
    return np.arctan2(x, z)


def yaw_direction_xz(yaw_rad) -> np.ndarray:
    """Unit ground-plane (x, z) directions (..., 2) of yaws (...,): yaw_from_direction's inverse."""
    yaw_rad = np.asarray(yaw_rad)
    dtype = yaw_rad.dtype if yaw_rad.dtype.kind == "f" else np.float64
    out = np.empty((*yaw_rad.shape, 2), dtype)  # in place: np.stack's overhead dominates per frame
    np.sin(yaw_rad, out=out[..., 0])
    np.cos(yaw_rad, out=out[..., 1])
    return out


def norm_xz(vectors_xz: np.ndarray) -> np.ndarray:
    """Lengths (...,) of ground-plane vectors (..., 2): np.linalg.norm's own arithmetic
    (the square root of x*x + z*z, summed in that order), so bit-identical to it, without
    its per-call overhead, which is most of its cost on the runtime's per-frame arrays."""
    x, z = vectors_xz[..., 0], vectors_xz[..., 1]
    return np.sqrt(x * x + z * z)


def wrap_angle_rad(angle: np.ndarray) -> np.ndarray:
    return (np.asarray(angle) + np.pi) % (2.0 * np.pi) - np.pi


def body_facing(global_positions: np.ndarray, skeleton: Skeleton) -> np.ndarray:
    """Horizontal unit facing directions (..., 3) from joint positions (..., J, 3).

    Uses the left-to-right vectors across the shoulders and the hips rather than the spine:
    they stay horizontal when the dog sits up or begs, where the spine points at the sky.
    """
    across = (
        global_positions[..., skeleton.index("LeftShoulder"), :]
        - global_positions[..., skeleton.index("RightShoulder"), :]
        + global_positions[..., skeleton.index("LeftUpLeg"), :]
        - global_positions[..., skeleton.index("RightUpLeg"), :]
    )
    # Right-handed with y up: forward = left x up (facing +z, the left side is +x).
    forward = cross(across, UP.astype(across.dtype))
    forward[..., 1] = 0.0
    return forward / np.linalg.norm(forward, axis=-1, keepdims=True)


def to_root_frame(points: np.ndarray, root_position: np.ndarray, root_rotation: np.ndarray):
    """World points (..., K, 3) into root frames given per leading index (..., 3) / (..., 4)."""
    inverse = quat_conjugate(root_rotation)[..., None, :]
    return quat_rotate(inverse, points - root_position[..., None, :])


def vectors_to_root_frame(vectors: np.ndarray, root_rotation: np.ndarray) -> np.ndarray:
    """World directions or velocities (..., K, 3) into root frames (..., 4)."""
    return quat_rotate(quat_conjugate(root_rotation)[..., None, :], vectors)


def from_root_frame(points: np.ndarray, root_position: np.ndarray, root_rotation: np.ndarray):
    return quat_rotate(root_rotation[..., None, :], points) + root_position[..., None, :]


# The root frame is a pure yaw, so on the ground plane it is a 2-D rotation; the runtime's
# per-frame path uses these instead of quaternions (the same frames, far fewer operations).
def rotate_xz(vectors_xz: np.ndarray, yaw_rad: np.ndarray) -> np.ndarray:
    """Turns (N, K, 2) ground-plane (x, z) vectors by yaw (N,): what yaw_quaternion does.
    One batched matmul with the row-vector rotation [[c, -s], [s, c]]: x' = c x + s z,
    z' = c z - s x (three times faster than elementwise arithmetic for one dog)."""
    c, s = np.cos(yaw_rad), np.sin(yaw_rad)
    rotation = np.empty((len(c), 2, 2))
    rotation[:, 0, 0], rotation[:, 0, 1] = c, -s
    rotation[:, 1, 0], rotation[:, 1, 1] = s, c
    return vectors_xz @ rotation


def to_root_xz(points_xz, root_xz, yaw_rad) -> np.ndarray:
    return rotate_xz(points_xz - root_xz[:, None, :], -yaw_rad)


def from_root_xz(points_xz, root_xz, yaw_rad) -> np.ndarray:
    return rotate_xz(points_xz, yaw_rad) + root_xz[:, None, :]


def smoothing_factor(dt_s: float, half_life_s) -> float | np.ndarray:
    """How much of the gap to the target remains after dt_s (half_life_s may be an array)."""
    return 0.5 ** (dt_s / half_life_s)


def damp(value, target, dt_s: float, half_life_s):
    """`value` moved toward `target` for dt_s (arrays broadcast; nothing is modified)."""
    return target + (value - target) * smoothing_factor(dt_s, half_life_s)


def damp_angle_rad(value_rad, target_rad, dt_s: float, half_life_s):
    """damp for angles: the gap is taken the short way round, the result wrapped."""
    gap = wrap_angle_rad(value_rad - target_rad)
    return wrap_angle_rad(target_rad + gap * smoothing_factor(dt_s, half_life_s))
