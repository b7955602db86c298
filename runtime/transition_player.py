"""Plays RTN transitions inside the controller (Controller.transition_to).

A transition is generated whole when it is asked for (the target blend needs the predicted
target frame, the last one generated), then shown one frame per step: after the motion network
has stepped every character, the characters in a transition are given that frame's root, pose,
trajectory history, action and context frame. When it ends, the motion network continues from
exactly that state: the root-frame pose is the one it reads, the history holds the path just
walked, and the action weights have reached the target's action, so there is no pop.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from runtime.features import ACTIONS, FPS
from runtime.root import (
    from_root_xz,
    to_root_xz,
    wrap_angle_rad,
    yaw_direction_xz,
    yaw_from_direction,
)
from runtime.transition_frames import root_motion, split_frame


@dataclass
class ActiveTransition:
    rows: np.ndarray  # (n,) characters it drives
    frames: np.ndarray  # (n, P + 2, D) index 0: the last context frame
    root_xz_m: np.ndarray  # (n, P + 2, 2) world
    root_yaw_rad: np.ndarray  # (n, P + 2)
    start_actions: np.ndarray  # (n, A)
    target_action: int
    shown: int = 0  # transition frames applied so far

    @property
    def length(self) -> int:
        return self.frames.shape[1] - 1


def joint_velocities(parts_previous, parts_now, xz, yaw, k) -> np.ndarray:
    """Root-frame joint velocities (n, J, 3) of frame k from frames k - 1 and k: the previous
    positions moved into the new root frame, then differenced."""
    previous = parts_previous.positions_m.astype(np.float64)
    moved = previous.copy()
    world_xz = from_root_xz(previous[..., [0, 2]], xz[:, k - 1], yaw[:, k - 1])
    moved[..., [0, 2]] = to_root_xz(world_xz, xz[:, k], yaw[:, k])
    return (parts_now.positions_m - moved) * FPS


def apply_frame(controller, t: ActiveTransition) -> None:
    """Sets the rows' state to transition frame t.shown + 1."""
    k = t.shown + 1
    rows, parents = t.rows, controller.skeleton.parents
    parts = split_frame(t.frames[:, k].astype(np.float64), parents)
    previous = split_frame(t.frames[:, k - 1].astype(np.float64), parents)
    velocity_world = (t.root_xz_m[:, k] - t.root_xz_m[:, k - 1]) * FPS
    controller.root_xz_m[rows] = t.root_xz_m[:, k]
    controller.root_yaw_rad[rows] = t.root_yaw_rad[:, k]
    controller.root_velocity_xz_mps[rows] = velocity_world
    pose = controller.pose
    pose.positions_m[rows] = parts.positions_m
    pose.forwards[rows] = parts.forwards
    pose.ups[rows] = parts.ups
    pose.velocities_mps[rows] = joint_velocities(previous, parts, t.root_xz_m, t.root_yaw_rad, k)

    fraction = k / t.length
    target = np.eye(len(ACTIONS))[t.target_action]
    actions = t.start_actions + (target - t.start_actions) * fraction
    controller.action_weights[rows] = actions
    controller.commanded_actions[rows] = actions
    h = controller.history
    h.positions_xz_m[rows, -1] = t.root_xz_m[:, k]
    h.directions_xz[rows, -1] = yaw_direction_xz(t.root_yaw_rad[:, k])
    h.velocities_xz_mps[rows, -1] = velocity_world
    h.speeds_mps[rows, -1] = np.linalg.norm(velocity_world, axis=1)
    h.actions[rows, -1] = actions
    # The network's own future for these rows is from a motion they did not make: hand the
    # desired one back instead, so the next blend is the command alone.
    future, desired = controller.predicted_future, controller.desired_future
    if future is not None and desired is not None:
        for name in ("positions_xz_m", "directions_xz", "velocities_xz_mps"):
            getattr(future, name)[rows] = getattr(desired, name)[rows]
    # The context the next transition would read: this frame, its root motion recomputed
    # from the (blended) path.
    velocity_local, yaw_rate = root_motion(
        t.root_xz_m[:, k - 1 : k + 1], t.root_yaw_rad[:, k - 1 : k + 1]
    )
    frame = t.frames[:, k].copy()
    frame[:, 0:2], frame[:, 2] = velocity_local[:, -1], yaw_rate[:, -1]
    controller.frame_history[rows, -1] = frame
    t.shown = k


def stopping_point(controller, rows, seconds: float):
    """Where a character moving as now comes to rest if it slows evenly to a stop over
    `seconds`: half the distance and half the turn it would make at its current rates."""
    directions = controller.history.directions_xz[rows]
    turn_rate = (
        wrap_angle_rad(
            yaw_from_direction(directions[:, -1]) - yaw_from_direction(directions[:, -2])
        )
        * FPS
    )
    yaw = wrap_angle_rad(controller.root_yaw_rad[rows] + 0.5 * turn_rate * seconds)
    xz = controller.root_xz_m[rows] + 0.5 * controller.root_velocity_xz_mps[rows] * seconds
    return xz, yaw
