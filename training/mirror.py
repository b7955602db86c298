"""Left/right mirroring of motion clips, which doubles the training data.

The reflection M flips the skeleton's lateral axis (z for the dog). Every joint's local
rotation becomes M R M taken from its mirror joint, and the root path is reflected, so each
global transform becomes M G M of the mirror joint's. That equals the reflected pose exactly
when the bone offsets are themselves left/right symmetric; the dog's are within 1.6 mm
(RightArm carries a 1.5 mm lateral offset that LeftArm lacks).

M G M reflects a joint's frame by negating its z axis. A frame is only a mirror image of
itself that way when z is the joint's lateral axis. In the dog mocap it is not for the head
(rolled 90 degrees about its bone relative to the neck) nor the shoulders: M G M gives them a
frame turned 180 degrees about the bone from the captured one (the mean captured and mirrored
local rotations were 167-179 degrees apart). The pose is the same, since the turn is about the
bone, but the networks' features hold each joint's forward and up axes, so they saw two
conventions for those joints, one in the captured clips and one in the mirrors. When unsure
which clip they were in, they predicted the average of the two, an axis near zero length,
which the decode turns into a head that spins. `mirror_corrections` finds, for each joint,
the half turn about one of its own axes that keeps its bones where they are and makes the
mirrored frames match the captured ones; the mirrored global frame is then M G M C.
"""

from __future__ import annotations

import numpy as np
from canis.runtime.rotations import (
    mirror_positions,
    mirror_quaternions,
    quat_angle_rad,
    quat_conjugate,
    quat_multiply,
)
from canis.runtime.skeleton import LATERAL_AXIS, Skeleton

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
