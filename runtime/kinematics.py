"""Forward kinematics and CCD IK through the native core (runtime/_kinematics, built from
native/ by CMake). This wrapper allocates outputs and converts inputs only when they are not
already float32/int32 C-contiguous, so the runtime's preallocated state passes without copies.
Shapes are checked by the native binding, which names the offending argument.
"""

from __future__ import annotations

import numpy as np
from canis.runtime import _kinematics
from canis.runtime.rotations import quat_conjugate, quat_multiply, quat_normalize
from canis.runtime.skeleton import Skeleton


def _f32(a) -> np.ndarray:
    return np.ascontiguousarray(a, dtype=np.float32)


def forward_kinematics(
    skeleton: Skeleton, local_rotations: np.ndarray, root_positions_m: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """Global joint positions (N, J, 3) and rotations (N, J, 4) of N characters.

    local_rotations (N, J, 4) are (w, x, y, z) relative to each joint's parent (the root's is
    global); root_positions_m (N, 3) place joint 0. The root's own offset is not used.
    """
    local = _f32(local_rotations)
    roots = _f32(root_positions_m)
    positions = np.empty((*local.shape[:-1], 3), dtype=np.float32)
    rotations = np.empty_like(local)
    _kinematics.forward_kinematics(
        skeleton.parents, skeleton.offsets_m, local, roots, positions, rotations
    )
    return positions, rotations


def ccd_solve(
    skeleton: Skeleton,
    local_rotations: np.ndarray,
    root_positions_m: np.ndarray,
    chain: np.ndarray,
    targets_m: np.ndarray,
    joint_weights: np.ndarray | None = None,
    max_iterations: int = 16,
    tolerance_m: float = 1e-4,
) -> np.ndarray:
    """Moves each character's chain effector toward its target by cyclic coordinate descent.

    `local_rotations` (N, J, 4) float32 C-contiguous is updated in place (pass a copy to keep
    the original). `chain` lists joint indices from the first joint allowed to rotate to the
    effector, each an ancestor of the next. `joint_weights` (len(chain) - 1,) in [0, 1] scale
    each joint's correction per iteration (default 1). Returns the residual distances (N,) in
    metres. Only rotations change, so bone lengths are exactly those of the skeleton.
    """
    if not (
        isinstance(local_rotations, np.ndarray)
        and local_rotations.dtype == np.float32
        and local_rotations.flags.c_contiguous
    ):
        raise TypeError("local_rotations is updated in place: pass a float32 C-contiguous array")
    chain = np.ascontiguousarray(chain, dtype=np.int32)
    if joint_weights is None:
        joint_weights = np.ones(max(len(chain) - 1, 0), dtype=np.float32)
    residuals = np.empty(local_rotations.shape[0], dtype=np.float32)
    _kinematics.ccd_solve(
        skeleton.parents,
        skeleton.offsets_m,
        local_rotations,
        _f32(root_positions_m),
        chain,
        _f32(joint_weights),
        _f32(targets_m),
        int(max_iterations),
        float(tolerance_m),
        residuals,
    )
    return residuals


def rotations_from_directions(
    skeleton: Skeleton, forwards: np.ndarray, ups: np.ndarray, root_yaws_rad: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """Local (N, J, 4) and global rotations from root-frame forward/up axes (N, J, 3), as the
    networks encode them, for characters whose root frames are yaws (N,). Native: the numpy
    equivalent (runtime.rotations.quat_from_forward_up, then parent-relative) is what the
    tests compare it with."""
    forwards, ups = _f32(forwards), _f32(ups)
    local = np.empty((*forwards.shape[:-1], 4), dtype=np.float32)
    world = np.empty_like(local)
    _kinematics.rotations_from_directions(
        skeleton.parents, forwards, ups, _f32(root_yaws_rad), local, world
    )
    return local, world


def local_rotations(skeleton: Skeleton, world_rotations: np.ndarray) -> np.ndarray:
    """Parent-relative rotations (..., J, 4) float64 from world rotations (..., J, 4): forward
    kinematics' inverse for rotations (the root's stays its world rotation)."""
    world = np.asarray(world_rotations, dtype=np.float64)
    local = world.copy()
    parents = skeleton.parents[1:]
    local[..., 1:, :] = quat_multiply(quat_conjugate(world[..., parents, :]), world[..., 1:, :])
    return quat_normalize(local)
