"""The per-frame trajectory and root math in the native core (native/src/root_motion.cpp;
the shown pose's is runtime/display.py's _shown_pose_native, native/src/display_pose.cpp).

runtime/trajectory.py's extrapolate and blend, Controller.trajectory's root-frame samples
written into x, and Controller._apply's root update, next pose, predicted future and history
push are each one native call here instead of a few dozen numpy calls on arrays of 2-80
values, whose cost per call (not their arithmetic) was most of that work.

This is the runtime's one path for that math. Its numpy definition is tests/reference_frame.py,
and tests/test_native_frame.py checks the two equal to float64 rounding (a sine, a cosine or a
matmul may round differently), frame by frame and over a closed loop. Nothing is defined again
here: the layout of x comes from runtime/features.py, the trajectory's weights from
runtime/trajectory.py, the pose blend from runtime/pose_update.py.
"""

from __future__ import annotations

import dataclasses

import numpy as np
from canis.runtime import _kinematics, pose_update
from canis.runtime.features import INPUT, LocalPose, Prediction
from canis.runtime.state import PAST_SAMPLES, PAST_SLICE, DogState
from canis.runtime.trajectory import (
    _MIDDLE_WEIGHTS,
    _SAMPLE_WEIGHTS,
    _STEP_S,
    FUTURE_TIMES_S,
    GroundTrajectory,
)

_TRAJECTORY = INPUT.block("trajectory")
# Where each field sits in a trajectory row of x, in the native call's order.
_FIELD_OFFSETS = np.array(
    [
        _TRAJECTORY.field_slice(name).start
        for name in ("position", "direction", "velocity", "speed", "action")
    ],
    dtype=np.int32,
)
assert INPUT.block_slice("trajectory").start == 0, "the native call writes x's first rows"
assert _TRAJECTORY.rows == PAST_SAMPLES.size + 1 + len(FUTURE_TIMES_S)
_MIDDLE = np.ascontiguousarray(_MIDDLE_WEIGHTS.ravel())
_SAMPLE = np.ascontiguousarray(_SAMPLE_WEIGHTS.ravel())
# The native calls take any array as an input (the binding makes a contiguous float64 copy
# when it must, which numpy's views of y need) and refuse an output that it would have to
# copy, so that nothing is written into a temporary and lost.


def extrapolate(
    root_xz_m,
    root_velocity_xz_mps,
    root_yaw_rad,
    action_weights,
    commanded_velocity_xz_mps,
    commanded_yaw_rad,
    commanded_actions,
) -> GroundTrajectory:
    """trajectory.extrapolate, natively: the desired future samples (N, 6)."""
    n, samples, actions = len(root_yaw_rad), len(_SAMPLE), action_weights.shape[1]
    out = GroundTrajectory(
        np.empty((n, samples, 2)),
        np.empty((n, samples, 2)),
        np.empty((n, samples, 2)),
        np.empty((n, samples)),
        np.empty((n, samples, actions)),
    )
    _kinematics.extrapolate_trajectory(
        root_xz_m,
        root_velocity_xz_mps,
        root_yaw_rad,
        action_weights,
        commanded_velocity_xz_mps,
        commanded_yaw_rad,
        commanded_actions,
        _MIDDLE,
        _SAMPLE,
        _STEP_S,
        out.positions_xz_m,
        out.directions_xz,
        out.velocities_xz_mps,
        out.speeds_mps,
        out.actions,
    )
    return out


def write_trajectory_rows(
    state: DogState,
    desired: GroundTrajectory,
    predicted: GroundTrajectory | None,
    tau: float,
    x: np.ndarray,
) -> None:
    """The trajectory rows of x (N, 480), as Controller.trajectory and features.write_input
    make them: the past from the history, now, and `desired` blended with `predicted` by tau,
    in the root frame."""
    if predicted is None or tau >= 1.0:  # trajectory.blend's "desired alone"
        predicted, tau = desired, 1.0
    _kinematics.trajectory_input(
        PAST_SAMPLES.size,
        PAST_SLICE.start,
        PAST_SLICE.step,
        *_history(state),
        state.root_xz_m,
        state.root_yaw_rad,
        state.root_velocity_xz_mps,
        state.action_weights,
        desired.positions_xz_m,
        desired.directions_xz,
        desired.velocities_xz_mps,
        desired.speeds_mps,
        desired.actions,
        predicted.positions_xz_m,
        predicted.directions_xz,
        predicted.velocities_xz_mps,
        float(tau),
        x,
        _FIELD_OFFSETS,
        _TRAJECTORY.width,
    )


# The history's fields in GroundTrajectory's order, which is the native calls' order.
_HISTORY_FIELDS = tuple(field.name for field in dataclasses.fields(GroundTrajectory))


def _make_history_contiguous(state: DogState) -> None:
    """The history's arrays as C-contiguous float64, for the native call to push in place:
    only needed when something gave the state other arrays (a game's own, say); they are the
    state's own from then on."""
    h = state.history
    for name in _HISTORY_FIELDS:
        setattr(h, name, np.ascontiguousarray(getattr(h, name), dtype=np.float64))


def _history(state: DogState) -> tuple:
    return tuple(getattr(state.history, name) for name in _HISTORY_FIELDS)


def advance_root(state: DogState, p: Prediction, speed_now_mps: np.ndarray, dt_s: float) -> None:
    """Controller._apply's root update, next pose (pose_update.next_local_pose), predicted
    future and history push, natively. The root, pose and predicted future are new arrays,
    as in the numpy code (a reader holding last frame's keeps it); the history is shifted in
    place, as there."""
    s = state
    n, joints, ahead = p.joint_positions_m.shape[0], p.joint_positions_m.shape[1], len(_SAMPLE)
    root_xz = np.array(s.root_xz_m, dtype=np.float64, order="C")
    yaw = np.array(s.root_yaw_rad, dtype=np.float64, order="C")
    velocity = np.empty((n, 2))
    positions = np.empty((n, joints, 3))
    future = [np.empty((n, ahead, 2)) for _ in range(3)]
    arguments = [
        dt_s,
        pose_update.JOINT_POSITION_BLEND,  # read at the call, as next_local_pose does
        p.root_velocity_mps,
        p.root_yaw_velocity_radps,
        p.joint_positions_m,
        p.joint_velocities_mps,
        p.future_positions_m,
        p.future_directions,
        p.future_velocities_mps,
        s.commanded_actions,
        speed_now_mps,
        s.pose.positions_m,
        root_xz,
        yaw,
        velocity,
        positions,
        *future,
    ]
    try:
        _kinematics.advance_root(*arguments, *_history(s))
    except TypeError:  # a history array it would have to copy (checked only then: cheaper)
        _make_history_contiguous(s)
        _kinematics.advance_root(*arguments, *_history(s))
    s.root_xz_m, s.root_yaw_rad, s.root_velocity_xz_mps = root_xz, yaw, velocity
    s.pose = LocalPose(
        positions, p.joint_forwards.copy(), p.joint_ups.copy(), p.joint_velocities_mps.copy()
    )
    s.predicted_future = GroundTrajectory(
        *future, np.zeros((n, ahead)), np.zeros((n, ahead, s.commanded_actions.shape[1]))
    )
    s.action_weights = s.commanded_actions.copy()
