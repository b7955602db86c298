"""Small synthetic dog clips for tests that must run without the mocap: holds of the shipped
keyframes, slerped transitions between them, and gaits whose paws follow a scripted footfall
pattern (placed by the native CCD), so the true contacts are known."""

from __future__ import annotations

from pathlib import Path

import numpy as np
from canis.runtime.kinematics import ccd_solve, forward_kinematics
from canis.runtime.poses import load_keyframes
from canis.runtime.rotations import quat_slerp
from canis.runtime.skeleton import DOG_LEG_GROUPS, Skeleton, shipped_dog_skeleton_path
from canis.training.bvh import BvhMotion, write_bvh

FPS = 60
SKELETON = Skeleton.from_json(shipped_dog_skeleton_path())
KEYFRAMES = load_keyframes()
# Paws in DOG_GROUPS["paws"] order (LF, RF, LH, RH): cycle offsets and duty factor per gait.
GAIT_PATTERNS = {
    "walk": {"offsets": (0.25, 0.75, 0.0, 0.5), "duty": 0.65, "period_s": 0.7},
    "trot": {"offsets": (0.0, 0.5, 0.5, 0.0), "duty": 0.45, "period_s": 0.45},
    "pace": {"offsets": (0.0, 0.5, 0.0, 0.5), "duty": 0.45, "period_s": 0.45},
}
SWING_LIFT_M = 0.06
# Dogs carry their hips lower in gait than standing (about 45 vs 47 cm in the mocap); it also
# keeps the legs off full extension, where CCD converges slowly.
GAIT_HIPS_DROP_M = 0.03


def hold(pose: str, seconds: float) -> tuple[np.ndarray, np.ndarray]:
    """(root positions (F, 3) m, local rotations (F, J, 4)) of a still keyframe."""
    frames = int(round(seconds * FPS))
    key = KEYFRAMES[pose]
    roots = np.tile([0.0, key.hips_height_m, 0.0], (frames, 1))
    return roots, np.repeat(key.local_rotations[None], frames, axis=0)


def transition(start: str, end: str, seconds: float) -> tuple[np.ndarray, np.ndarray]:
    frames = int(round(seconds * FPS))
    a, b = KEYFRAMES[start], KEYFRAMES[end]
    t = np.linspace(0.0, 1.0, frames)
    eased = t * t * (3 - 2 * t)
    rotations = quat_slerp(
        np.repeat(a.local_rotations[None], frames, 0),
        np.repeat(b.local_rotations[None], frames, 0),
        eased[:, None],
    )
    heights = a.hips_height_m + (b.hips_height_m - a.hips_height_m) * eased
    roots = np.stack([np.zeros(frames), heights, np.zeros(frames)], axis=1)
    return roots, rotations


def gait(kind: str, speed_mps: float, seconds: float):
    """A straight-line gait along +z: (roots, rotations, true contacts (F, 4))."""
    pattern = GAIT_PATTERNS[kind]
    frames = int(round(seconds * FPS))
    stand = KEYFRAMES["stand"]
    t = np.arange(frames) / FPS
    hips_m = stand.hips_height_m - GAIT_HIPS_DROP_M
    roots = np.stack([np.zeros(frames), np.full(frames, hips_m), speed_mps * t], 1)
    rest, _ = forward_kinematics(
        SKELETON,
        stand.local_rotations[None].astype(np.float32),
        np.array([[0.0, stand.hips_height_m, 0.0]], np.float32),
    )
    paws = SKELETON.group("paws")
    nominal = rest[0, paws].astype(np.float64)  # where each paw sits under the standing dog
    period, duty = pattern["period_s"], pattern["duty"]
    targets = np.empty((frames, 4, 3))
    stance = np.empty((frames, 4), dtype=bool)
    for p in range(4):
        offset = pattern["offsets"][p]
        cycle = t / period + offset
        k, u = np.floor(cycle), cycle - np.floor(cycle)
        # Stance k is centred under where the hips are at its middle.
        foothold_k = nominal[p, 2] + speed_mps * (k + duty / 2 - offset) * period
        foothold_next = foothold_k + speed_mps * period
        swing = np.clip((u - duty) / (1 - duty), 0, 1)
        eased = swing * swing * (3 - 2 * swing)
        z = np.where(u < duty, foothold_k, foothold_k + (foothold_next - foothold_k) * eased)
        height = nominal[p, 1] + SWING_LIFT_M * np.sin(np.pi * swing)
        targets[:, p] = np.stack([np.full(frames, nominal[p, 0]), height, z], axis=1)
        stance[:, p] = u < duty
    rotations = np.repeat(stand.local_rotations[None], frames, axis=0).astype(np.float32)
    for p, leg in enumerate(DOG_LEG_GROUPS):
        residual = ccd_solve(
            SKELETON,
            rotations,
            roots,
            SKELETON.group(leg),
            targets[:, p],
            max_iterations=200,
            tolerance_m=5e-4,
        )
        assert residual.max() < 0.005, f"{kind}: {leg} missed its footfall by {residual.max()} m"
    return roots, rotations.astype(np.float64), stance


def concatenate(*parts) -> tuple[np.ndarray, np.ndarray]:
    return (np.concatenate([p[0] for p in parts]), np.concatenate([p[1] for p in parts]))


def to_motion(roots_m: np.ndarray, rotations: np.ndarray, name: str) -> BvhMotion:
    orders = tuple("" if n.endswith("Site") else "ZXY" for n in SKELETON.joint_names)
    return BvhMotion(
        path=name,
        joint_names=SKELETON.joint_names,
        parents=SKELETON.parents,
        offsets_cm=SKELETON.offsets_m.astype(np.float64) * 100,
        rotation_orders=orders,
        frame_time_s=1.0 / FPS,
        root_positions_cm=roots_m * 100,
        local_rotations=rotations,
    )


def write_clip(folder: Path, name: str, roots_m: np.ndarray, rotations: np.ndarray) -> Path:
    path = folder / f"{name}.bvh"
    write_bvh(path, to_motion(roots_m, rotations, str(path)))
    return path


def standard_clips(folder: Path) -> dict[str, Path]:
    """A dog that stands, one that walks, one that trots and one that sits down."""
    folder.mkdir(parents=True, exist_ok=True)
    return {
        "stand": write_clip(folder, "stand", *hold("stand", 3.0)),
        "walk": write_clip(folder, "walk", *gait("walk", 0.6, 4.0)[:2]),
        "trot": write_clip(folder, "trot", *gait("trot", 1.6, 3.0)[:2]),
        "sit": write_clip(
            folder,
            "sit",
            *concatenate(hold("stand", 1.5), transition("stand", "sit", 1.0), hold("sit", 2.5)),
        ),
    }
