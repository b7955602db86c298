"""Left/right mirroring of motion clips, which doubles the training data.

The reflection M flips the skeleton's lateral axis (z for the dog). Every joint's local
rotation becomes M R M taken from its mirror joint, and the root path is reflected, so each
global transform becomes M G M of the mirror joint's. That equals the reflected pose exactly
when the bone offsets are themselves left/right symmetric; the dog's are within 1.6 mm
(RightArm carries a 1.5 mm lateral offset that LeftArm lacks).
"""

from __future__ import annotations

import numpy as np
from canis.runtime.rotations import mirror_positions, mirror_quaternions
from canis.runtime.skeleton import LATERAL_AXIS, Skeleton


def mirror_motion(
    skeleton: Skeleton,
    root_positions: np.ndarray,
    local_rotations: np.ndarray,
    axis: int = LATERAL_AXIS,
) -> tuple[np.ndarray, np.ndarray]:
    """Mirrored (root_positions (F, 3), local_rotations (F, J, 4)); any length unit."""
    mirrored_rotations = mirror_quaternions(local_rotations[:, skeleton.mirror_index], axis)
    return mirror_positions(root_positions, axis), mirrored_rotations


def mirror_clip(motion):
    """A BvhMotion (training.bvh) mirrored left/right."""
    roots, rotations = mirror_motion(
        motion.skeleton(), motion.root_positions_cm, motion.local_rotations
    )
    return motion.with_motion(roots, rotations)
