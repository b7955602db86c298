"""The next frame's root-frame pose from a prediction: the one definition, used by the runtime
(Controller._apply) and by closed-loop training (training/closed_loop_training.py), so the
network trains on the inputs the game will give it."""

from __future__ import annotations

from canis.runtime.features import LocalPose, Prediction
from canis.runtime.root import rotate_xz

# The released MANN runtime averages the predicted joint positions with the previous ones
# advanced by the predicted velocities, which removes jitter.
JOINT_POSITION_BLEND = 0.5


def next_local_pose(previous: LocalPose, p: Prediction, dt_s: float) -> LocalPose:
    """The pose the next input x carries: the previous positions seen from the new root,
    advanced by the predicted velocities and averaged with the predicted positions; the
    predicted rotations and velocities as they are."""
    step_local = p.root_velocity_mps * dt_s  # (N, 2) in the previous root's frame
    turn = p.root_yaw_velocity_radps * dt_s
    moved = previous.positions_m.copy()
    # (x, z) as the strided view ::2 of (x, y, z): the same values as indexing [0, 2], without
    # building an index array and a copy every frame.
    moved[..., ::2] = rotate_xz(moved[..., ::2] - step_local[:, None], -turn)
    advanced = moved + p.joint_velocities_mps * dt_s
    positions = p.joint_positions_m + (advanced - p.joint_positions_m) * JOINT_POSITION_BLEND
    return LocalPose(
        positions, p.joint_forwards.copy(), p.joint_ups.copy(), p.joint_velocities_mps.copy()
    )
