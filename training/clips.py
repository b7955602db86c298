"""One clip, from BVH motion to world-space kinematics, root, trajectory, labels, and its
training pairs (X, Y) built through the runtime's feature contract (runtime/features.py)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
from canis.runtime.features import (
    FPS,
    FUTURE_OFFSETS_FRAMES,
    TRAJECTORY_OFFSETS_FRAMES,
    Pose,
    Trajectory,
    build_input,
    build_output,
)
from canis.runtime.kinematics import forward_kinematics
from canis.runtime.root import body_facing, rotate_xz, yaw_from_direction, yaw_quaternion
from canis.runtime.skeleton import Skeleton, not_dog_reason
from canis.runtime.trajectory import ControlState
from canis.training.bvh import BvhMotion, same_rate
from canis.training.labels import Labels, label_clip, rolling
from canis.training.mirror import mirror_clip

# Facing is averaged over this many frames either side: the across-body vectors wobble with
# every stride, and the trajectory should turn with the body, not with the gait.
FACING_SMOOTHING_HALF_WINDOW = 5
# The first frame with a full trajectory window behind it, and how many frames a training
# pair needs after its frame (the next frame and that frame's future window).
FIRST_FRAME = -TRAJECTORY_OFFSETS_FRAMES[0]
FRAMES_AFTER = 1 + FUTURE_OFFSETS_FRAMES[-1]
MIN_CLIP_FRAMES = FIRST_FRAME + FRAMES_AFTER + 1


@dataclass
class Clip:
    name: str
    mirrored: bool
    skeleton: Skeleton
    positions_m: np.ndarray  # (F, J, 3) global
    rotations: np.ndarray  # (F, J, 4) global
    velocities_mps: np.ndarray  # (F, J, 3) backward differences
    root_positions_m: np.ndarray  # (F, 3): hips over the ground, at ground height
    root_rotations: np.ndarray  # (F, 4) yaw
    facing: np.ndarray  # (F, 3) horizontal unit
    root_velocities_mps: np.ndarray  # (F, 3)
    desired_speeds_mps: np.ndarray  # (F,) mean speed over the next second
    labels: Labels

    @property
    def frame_count(self) -> int:
        return len(self.positions_m)

    def training_frames(self) -> np.ndarray:
        """Frames with a full trajectory window and a next frame with its own."""
        return np.arange(FIRST_FRAME, self.frame_count - FRAMES_AFTER)

    def trajectory(self, frames: np.ndarray, offsets=TRAJECTORY_OFFSETS_FRAMES) -> Trajectory:
        """World-space trajectory samples (N, S) around each of `frames`."""
        samples = np.asarray(frames)[:, None] + np.asarray(offsets)[None, :]
        return Trajectory(
            positions_m=self.root_positions_m[samples],
            directions=self.facing[samples],
            velocities_mps=self.root_velocities_mps[samples],
            speeds_mps=self.desired_speeds_mps[samples],
            actions=self.labels.actions[samples],
        )

    def pose(self, frames: np.ndarray) -> Pose:
        return Pose(self.positions_m[frames], self.rotations[frames], self.velocities_mps[frames])


def _backward_velocity(positions: np.ndarray) -> np.ndarray:
    velocity = np.empty_like(positions)
    velocity[1:] = (positions[1:] - positions[:-1]) * FPS
    velocity[0] = velocity[1] if len(positions) > 1 else 0.0
    return velocity


def _mean_speed_ahead(root_positions_m: np.ndarray, frames_ahead: int) -> np.ndarray:
    """Path length of the root over the next `frames_ahead` frames per second of it (m/s);
    near the clip's end, over what remains."""
    steps = np.linalg.norm(np.diff(root_positions_m[:, [0, 2]], axis=0), axis=1)
    travelled = np.concatenate([[0.0], np.cumsum(steps)])
    frames = np.arange(len(root_positions_m))
    ends = np.minimum(frames + frames_ahead, len(root_positions_m) - 1)
    spans = np.maximum(ends - frames, 1)
    return (travelled[ends] - travelled[frames]) * FPS / spans


def process_clip(
    motion: BvhMotion, mirrored: bool = False, mirror_turns: np.ndarray | None = None
) -> Clip:
    reason = not_dog_reason(motion.skeleton())
    if reason:
        raise ValueError(f"{motion.path}: {reason}")
    if not same_rate(motion.frame_time_s, FPS):  # velocities, windows: all counted in frames
        raise ValueError(
            f"{motion.path}: recorded at {motion.fps:.4g} fps, but the features are built at "
            f"{FPS} fps; resample it first (canis dataset build does)"
        )
    if mirrored:
        motion = mirror_clip(motion, mirror_turns)
    skeleton = motion.skeleton()
    positions, rotations = forward_kinematics(
        skeleton, motion.local_rotations, motion.root_positions_m()
    )
    positions = positions.astype(np.float64)
    rotations = rotations.astype(np.float64)
    facing = rolling(body_facing(positions, skeleton), FACING_SMOOTHING_HALF_WINDOW, np.mean)
    facing /= np.linalg.norm(facing, axis=1, keepdims=True)
    labels = label_clip(skeleton, positions, facing)
    root_positions = positions[:, skeleton.index("Hips")].copy()
    root_positions[:, 1] = labels.ground_m
    root_velocities = np.gradient(root_positions, axis=0) * FPS
    root_velocities[:, 1] = 0.0
    name = Path(motion.path).stem + ("_mirror" if mirrored else "")
    return Clip(
        name=name,
        mirrored=mirrored,
        skeleton=skeleton,
        positions_m=positions,
        rotations=rotations,
        velocities_mps=_backward_velocity(positions),
        root_positions_m=root_positions,
        root_rotations=yaw_quaternion(yaw_from_direction(facing)),
        facing=facing,
        root_velocities_mps=root_velocities,
        desired_speeds_mps=_mean_speed_ahead(root_positions, FPS),
        labels=labels,
    )


def clip_pairs(clip: Clip) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(X, Y, frames): the training pairs of a clip, frame f's input and frame f+1's output."""
    frames = clip.training_frames()
    x = build_input(
        clip.root_positions_m[frames],
        clip.root_rotations[frames],
        clip.trajectory(frames),
        clip.pose(frames),
    )
    following = frames + 1
    y = build_output(
        clip.root_positions_m[frames],
        clip.root_rotations[frames],
        clip.root_positions_m[following],
        clip.root_rotations[following],
        clip.trajectory(following, FUTURE_OFFSETS_FRAMES),
        clip.pose(following),
        dt_s=1.0 / FPS,
    )
    return x, y, frames


def clip_commands(
    root_xz_m: np.ndarray,
    yaw_rad: np.ndarray,
    desired_speed_mps: np.ndarray,
    action: np.ndarray,
    frame: np.ndarray,
    dog_xz_m: np.ndarray,
    dog_yaw_rad: np.ndarray,
    path,
) -> ControlState:
    """The commands of N dogs, each replaying its own clip's motion from where it is: the
    clips' root paths (N, F, 2) and yaws (N, F), desired speeds (N, F) and action indices
    (N, F) at `frame` (N,) (held at each clip's last frame), for dogs at `dog_xz_m` (N, 2)
    facing `dog_yaw_rad` (N,). The clip's root motion from its frame is turned by the
    difference between the dog's yaw and the clip's and laid from the dog's root: the path the
    root takes over the next second (ControlState.future_xz_m), its mean speed over that second
    toward where it ends, and the facing it has a second ahead. `path` (bool or (N,) bools):
    which dogs are given the path (NaN rows for the others, which then follow the speed,
    heading and facing, as from a stick)."""
    n = np.arange(len(frame))
    last = root_xz_m.shape[1] - 1
    f = np.minimum(frame, last)
    ahead = np.minimum(f[:, None] + np.array(FUTURE_OFFSETS_FRAMES), last)  # (N, 6)
    turn = dog_yaw_rad - yaw_rad[n, f]  # (N,) dog's yaw - clip's
    steps = rotate_xz(root_xz_m[n[:, None], ahead] - root_xz_m[n, f][:, None], turn)
    # The velocity a player's stick would give: the clip's mean speed over the next second
    # toward where its root is a second ahead (its per-frame root velocity sways with the
    # stride, which no stick does).
    chord = steps[:, -1]
    length = np.maximum(np.linalg.norm(chord, axis=1, keepdims=True), 1e-9)
    velocity = desired_speed_mps[n, f][:, None] * chord / length
    given = np.broadcast_to(np.asarray(path, bool), (len(n),))
    future = None
    if given.any():
        future = np.where(given[:, None, None], dog_xz_m[:, None] + steps, np.nan)
    return ControlState(velocity, yaw_rad[n, ahead[:, -1]] + turn, action[n, f], future)
