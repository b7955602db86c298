"""The in-betweening metrics of Robust Motion In-betweening (REFERENCE.md section 4) and the
two baselines it compares against, on frames of the transition contract.

Every method's frames are turned into the pose a player would see: rotations from the frames'
forward/up axes, FK with the skeleton's fixed bone offsets at the frame's hips, all in the
target's root frame (the transition's "world": it centres the root's ground position, as L2P
asks).
"""

from __future__ import annotations

import numpy as np
from canis.runtime.kinematics import forward_kinematics, rotations_from_directions
from canis.runtime.root import from_root_xz, wrap_angle_rad, yaw_quaternion
from canis.runtime.rotations import quat_multiply, quat_slerp
from canis.runtime.skeleton import Skeleton
from canis.runtime.transition_frames import ROTATED_JOINTS, split_frame


def global_pose(skeleton: Skeleton, frames: np.ndarray, placements: np.ndarray):
    """Positions (M, J, 3) and global rotations (M, J, 4) in the target's root frame of frames
    (M, D) whose roots stand at placements (M, 4)."""
    parts = split_frame(frames.astype(np.float64), skeleton.parents)
    yaw = np.arctan2(placements[:, 2], placements[:, 3])
    local, world = rotations_from_directions(skeleton, parts.forwards, parts.ups, yaw)
    hips = parts.positions_m[:, 0].copy()
    hips[:, [0, 2]] = from_root_xz(hips[:, None, [0, 2]], placements[:, :2], yaw)[:, 0]
    positions, rotations = forward_kinematics(skeleton, local, hips)
    return positions.astype(np.float64), rotations.astype(np.float64)


def interpolation(skeleton, last_frame, last_placement, target_frame, length: int):
    """The INT baseline: the hips' position and the root's yaw linearly, every joint's
    root-relative rotation by slerp, from the last context frame to the target. Positions and
    rotations (B, P, J, ...) in the target's frame for the P in-between frames."""
    b = len(last_frame)
    zero_yaw = np.zeros(b)
    last = split_frame(last_frame.astype(np.float64), skeleton.parents)
    target = split_frame(target_frame.astype(np.float64), skeleton.parents)
    last_local, _ = rotations_from_directions(skeleton, last.forwards, last.ups, zero_yaw)
    target_local, _ = rotations_from_directions(skeleton, target.forwards, target.ups, zero_yaw)
    last_yaw = np.arctan2(last_placement[:, 2], last_placement[:, 3])
    last_hips = last.positions_m[:, 0].copy()
    last_hips[:, [0, 2]] = from_root_xz(
        last_hips[:, None, [0, 2]], last_placement[:, :2], last_yaw
    )[:, 0]
    target_hips = target.positions_m[:, 0]
    positions, rotations = [], []
    for k in range(1, length + 1):
        t = k / (length + 1)
        local = quat_slerp(last_local.astype(np.float64), target_local.astype(np.float64), t)
        yaw = wrap_angle_rad(last_yaw * (1 - t))  # the target's yaw is 0 in its own frame
        local[:, 0] = quat_multiply(yaw_quaternion(yaw), local[:, 0])
        p, r = forward_kinematics(skeleton, local, last_hips + (target_hips - last_hips) * t)
        positions.append(p)
        rotations.append(r)
    return np.stack(positions, 1).astype(np.float64), np.stack(rotations, 1).astype(np.float64)


def l2q(predicted_rotations, true_rotations) -> float:
    """Mean over samples and frames of the L2 norm of the global-quaternion error over the
    rotated joints, each quaternion taken in the truth's hemisphere (q and -q are one
    rotation)."""
    p = predicted_rotations[..., ROTATED_JOINTS, :]
    t = true_rotations[..., ROTATED_JOINTS, :]
    p = np.where(np.sum(p * t, axis=-1, keepdims=True) < 0, -p, p)
    return float(np.linalg.norm((p - t).reshape(*p.shape[:-2], -1), axis=-1).mean())


def l2p(predicted_positions, true_positions, std) -> float:
    """Mean over samples and frames of the L2 norm of the standardised global-position error
    (every joint's x, y, z divided by the training set's standard deviation; the
    mean cancels in a difference)."""
    error = (predicted_positions - true_positions) / std
    return float(np.linalg.norm(error.reshape(*error.shape[:-2], -1), axis=-1).mean())


def npss(predicted_rotations, true_rotations) -> float:
    """Normalized Power Spectrum Similarity over time (B, P, J, 4) of global quaternions:
    per feature, the power spectrum (of the FFT's real part, as RMI's reference code) is
    normalised to sum 1, and the L1 distance of the cumulative spectra is averaged with
    weights proportional to the truth's power in that feature."""
    t = true_rotations[..., ROTATED_JOINTS, :]
    p = predicted_rotations[..., ROTATED_JOINTS, :]
    p = np.where(np.sum(p * t, axis=-1, keepdims=True) < 0, -p, p)
    b, frames = t.shape[:2]
    t, p = t.reshape(b, frames, -1), p.reshape(b, frames, -1)
    true_power = np.real(np.fft.fft(t, axis=1)) ** 2
    predicted_power = np.real(np.fft.fft(p, axis=1)) ** 2
    true_total = true_power.sum(axis=1)
    predicted_total = predicted_power.sum(axis=1)
    true_cdf = np.cumsum(true_power / np.maximum(true_total[:, None], 1e-12), axis=1)
    predicted_cdf = np.cumsum(predicted_power / np.maximum(predicted_total[:, None], 1e-12), axis=1)
    emd = np.abs(predicted_cdf - true_cdf).sum(axis=1)
    weights = true_total / np.maximum(true_total.sum(axis=1, keepdims=True), 1e-12)
    return float(np.average(emd, weights=weights))
