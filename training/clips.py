"""One clip, from BVH motion to world-space kinematics, root, trajectory, labels, and its
training pairs (X, Y) built through the runtime's feature contract (runtime/features.py); where
the mocap is, and the keyframe library picked out of it.

The dog motion capture is CC BY-NC 4.0 and never committed: the project reads it from
$CANIS_MOCAP_DIR, or from ../shared/data/dog-mocap beside the checkout when present.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from canis.runtime.features import (
    ACTIONS,
    FPS,
    FUTURE_OFFSETS_FRAMES,
    TRAJECTORY_OFFSETS_FRAMES,
    Pose,
    Trajectory,
    build_input,
    build_output,
)
from canis.runtime.kinematics import forward_kinematics
from canis.runtime.poses import KEYFRAME_ACTIONS, Keyframe, keyframe_from_world_pose
from canis.runtime.root import body_facing, rotate_xz, yaw_from_direction, yaw_quaternion
from canis.runtime.rotations import (
    mirror_positions,
    mirror_quaternions,
    quat_angle_rad,
    quat_conjugate,
    quat_multiply,
)
from canis.runtime.skeleton import LATERAL_AXIS, Skeleton, not_dog_reason
from canis.runtime.trajectory import ControlState
from canis.training.bvh import BvhMotion, read_bvh, same_rate
from canis.training.labels import Labels, label_clip, rolling

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


# Where the mocap is (the module's docstring says why it is not in the repository).
REPO_ROOT = Path(__file__).resolve().parent.parent
MOCAP_ENV_VAR = "CANIS_MOCAP_DIR"
SHARED_MOCAP_DIR = REPO_ROOT.parent / "shared" / "data" / "dog-mocap"
DOWNLOAD_HINT = (
    "The dog motion capture comes with 'Mode-Adaptive Neural Networks for Quadruped Motion "
    "Control' (Zhang et al., SIGGRAPH 2018): get MotionCapture.zip from the AI4Animation "
    "repository (SIGGRAPH_2018 folder), unzip its .bvh files into a folder and set "
    f"{MOCAP_ENV_VAR} to it (licence CC BY-NC 4.0)."
)


def default_mocap_dir() -> Path | None:
    """The mocap folder to use by default, or None when none is available."""
    configured = os.environ.get(MOCAP_ENV_VAR)
    if configured:
        return Path(configured)
    return SHARED_MOCAP_DIR if SHARED_MOCAP_DIR.is_dir() else None


# Left/right mirroring of motion clips, which doubles the training data.
#
# The reflection M flips the skeleton's lateral axis (z for the dog). Every joint's local
# rotation becomes M R M taken from its mirror joint, and the root path is reflected, so each
# global transform becomes M G M of the mirror joint's. That equals the reflected pose exactly
# when the bone offsets are themselves left/right symmetric; the dog's are within 1.6 mm
# (RightArm carries a 1.5 mm lateral offset that LeftArm lacks).
#
# M G M reflects a joint's frame by negating its z axis. A frame is only a mirror image of
# itself that way when z is the joint's lateral axis. In the dog mocap it is not for the head
# (rolled 90 degrees about its bone relative to the neck) nor the shoulders: M G M gives them a
# frame turned 180 degrees about the bone from the captured one (the mean captured and mirrored
# local rotations were 167-179 degrees apart). The pose is the same, since the turn is about the
# bone, but the networks' features hold each joint's forward and up axes, so they saw two
# conventions for those joints, one in the captured clips and one in the mirrors. When unsure
# which clip they were in, they predicted the average of the two, an axis near zero length,
# which the decode turns into a head that spins. `mirror_corrections` finds, for each joint,
# the half turn about one of its own axes that keeps its bones where they are and makes the
# mirrored frames match the captured ones; the mirrored global frame is then M G M C.

# The candidate corrections: no turn, then half turns about the joint's x, y and z axes
# (w, x, y, z). As rotations each is its own inverse and M C M = C, so mirroring twice
# undoes itself.
HALF_TURNS = np.array(
    [[1.0, 0.0, 0.0, 0.0], [0.0, 1.0, 0.0, 0.0], [0.0, 0.0, 1.0, 0.0], [0.0, 0.0, 0.0, 1.0]]
)
# A half turn is taken only when it brings the mirrored frames this much closer to the
# captured ones; otherwise the plain reflection stays. In the dog mocap a symmetric joint's
# means differ by the motion's own asymmetry (up to about 20 degrees); the head's gain was
# 72 degrees in its least clear clip and 150-180 in the others.
MIN_GAIN_RAD = np.radians(45.0)
# A half turn about an axis keeps a child's bone only if the bone lies along that axis
# (within 3 mm: RightArm's offset is 1.5 mm off its shoulder's x axis).
BONE_KEPT_M = 3e-3


def mirror_motion(
    skeleton: Skeleton,
    root_positions: np.ndarray,
    local_rotations: np.ndarray,
    corrections: np.ndarray | None = None,
    axis: int = LATERAL_AXIS,
) -> tuple[np.ndarray, np.ndarray]:
    """Mirrored (root_positions (F, 3), local_rotations (F, J, 4)); any length unit.
    `corrections` (J, 4), from mirror_corrections: each joint's half turn (None: none)."""
    mirrored = mirror_quaternions(local_rotations[:, skeleton.mirror_index], axis)
    if corrections is not None:
        mirrored = _corrected(skeleton, mirrored, corrections)
    return mirror_positions(root_positions, axis), mirrored


def _corrected(skeleton: Skeleton, mirrored: np.ndarray, corrections: np.ndarray) -> np.ndarray:
    """Local rotations (F, J, 4) whose global frames are turned by `corrections` (J, 4)."""
    parent_turns = np.tile(HALF_TURNS[0], (skeleton.joint_count, 1))
    parent_turns[1:] = corrections[skeleton.parents[1:]]
    return _turned(mirrored, parent_turns, corrections)


def _turned(local: np.ndarray, parent_turn: np.ndarray, turn: np.ndarray) -> np.ndarray:
    """C_parent^-1 R C: a local rotation once its own and its parent's frames are turned."""
    return quat_multiply(quat_conjugate(parent_turn), quat_multiply(local, turn))


def mirror_corrections(
    skeleton: Skeleton, local_rotations: np.ndarray, axis: int = LATERAL_AXIS
) -> np.ndarray:
    """(J, 4) the half turn each joint's mirrored frame needs (HALF_TURNS[0] for none) so
    that the mirrored clip's local rotations match the captured ones' (F, J, 4) on average.
    Parents first, since a parent's turn changes its children's local rotations. Only turns
    that keep every child bone in place are tried, so the mirrored pose is unchanged."""
    mirrored = mirror_quaternions(local_rotations[:, skeleton.mirror_index], axis)
    corrections = np.tile(HALF_TURNS[0], (skeleton.joint_count, 1))
    for j in range(1, skeleton.joint_count):
        children = np.flatnonzero(skeleton.parents == j)
        parent_turn = corrections[skeleton.parents[j]]
        captured_mean = _mean_rotation(local_rotations[:, j])
        angles = [
            quat_angle_rad(
                captured_mean, _mean_rotation(_turned(mirrored[:, j], parent_turn, turn))
            )
            if _keeps_bones(turn, skeleton.offsets_m[children])
            else np.inf
            for turn in HALF_TURNS
        ]
        best = int(np.argmin(angles))
        if angles[best] < angles[0] - MIN_GAIN_RAD:
            corrections[j] = HALF_TURNS[best]
    return corrections


def _keeps_bones(turn: np.ndarray, offsets: np.ndarray) -> bool:
    if turn[0] == 1.0:
        return True
    axis = int(np.argmax(np.abs(turn[1:])))
    across = np.delete(offsets, axis, axis=1)  # a half turn negates these components
    return bool(np.all(np.abs(across) < BONE_KEPT_M))


def _mean_rotation(q: np.ndarray) -> np.ndarray:
    """The chordal mean of quaternions (F, 4): the principal eigenvector of sum q q^T, which
    does not care about each quaternion's sign."""
    _, vectors = np.linalg.eigh(np.einsum("fi,fj->ij", q, q))
    return vectors[:, -1]


def mirror_clip(motion, corrections: np.ndarray | None = None):
    """A BvhMotion (training.bvh) mirrored left/right. `corrections` (J, 4): the half turns
    to use (a data set's, so that all its clips share one convention); by default those the
    clip itself asks for (mirror_corrections)."""
    skeleton = motion.skeleton()
    if corrections is None:
        corrections = mirror_corrections(skeleton, motion.local_rotations)
    roots, rotations = mirror_motion(
        skeleton, motion.root_positions_cm, motion.local_rotations, corrections
    )
    return motion.with_motion(roots, rotations)


def data_set_corrections(motions) -> np.ndarray:
    """The half turns (J, 4) that mirror_corrections finds over every frame of `motions`
    (BvhMotions of one skeleton): one convention for a whole data set."""
    rotations = np.concatenate([m.local_rotations for m in motions])
    return mirror_corrections(motions[0].skeleton(), rotations)


def turned_joints(skeleton: Skeleton, corrections: np.ndarray) -> dict[str, str]:
    """{joint name: axis} of the joints that `corrections` turn, for metadata and logs."""
    return {
        skeleton.joint_names[j]: "xyz"[int(np.argmax(np.abs(c[1:])))]
        for j, c in enumerate(corrections)
        if c[0] != 1.0
    }


# The keyframe library (runtime/poses.py) picked out of the labelled mocap: for each pose, the
# stillest frame among those labelled with its action, re-expressed in its root frame.

# Frames this close to a label change are skipped: the pose is still blending there.
MARGIN_FRAMES = 30


def pick_keyframes(bvh_files: list[Path]) -> list[Keyframe]:
    best: dict[str, tuple[float, Keyframe]] = {}
    for path in bvh_files:
        clip = process_clip(read_bvh(path))
        labels = clip.labels
        stillness = np.linalg.norm(clip.velocities_mps, axis=-1).sum(axis=1)
        for name, action in KEYFRAME_ACTIONS.items():
            inside = labels.action_index == ACTIONS.index(action)
            # Only frames deep inside a run of the label.
            window = np.ones(2 * MARGIN_FRAMES + 1)
            deep = np.convolve(inside.astype(float), window, mode="same") >= len(window)
            if not deep.any():
                continue
            frame = int(np.flatnonzero(deep)[np.argmin(stillness[deep])])
            if name in best and best[name][0] <= stillness[frame]:
                continue
            keyframe = keyframe_from_world_pose(
                name,
                clip.skeleton,
                clip.rotations[frame],
                clip.root_rotations[frame],
                float(labels.hips_height_m[frame]),
                f"{path.stem} frame {frame}",
            )
            best[name] = (float(stillness[frame]), keyframe)
    return [best[name][1] for name in KEYFRAME_ACTIONS if name in best]
