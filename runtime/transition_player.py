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
from canis.runtime.dog_state import DogState
from canis.runtime.features import ACTIONS, FPS, LocalPose
from canis.runtime.root import (
    from_root_xz,
    to_root_xz,
    wrap_angle_rad,
    yaw_direction_xz,
    yaw_from_direction,
)
from canis.runtime.transition_frames import root_motion, split_frame


@dataclass
class ActiveTransition:
    """A generated transition for `rows`, unpacked once into the controller's own state
    arrays (index 0: the last context frame; 1..P+1: the frames shown), so playing a frame
    back is copying."""

    rows: np.ndarray  # (n,) characters it drives
    root_xz_m: np.ndarray  # (n, P + 2, 2) world
    root_yaw_rad: np.ndarray  # (n, P + 2)
    root_velocity_xz_mps: np.ndarray  # (n, P + 2, 2) world
    positions_m: np.ndarray  # (n, P + 2, J, 3) root frame
    forwards: np.ndarray
    ups: np.ndarray
    velocities_mps: np.ndarray
    frames: np.ndarray  # (n, P + 2, D) with the root motion of the (blended) path
    actions: np.ndarray  # (n, P + 2, A) from the start's action weights to the target's
    shown: int = 0  # transition frames applied so far

    @property
    def length(self) -> int:
        return self.frames.shape[1] - 1

    @classmethod
    def unpack(cls, rows, frames, root_xz_m, root_yaw_rad, start_actions, target_action, parents):
        n, count = frames.shape[:2]
        parts = split_frame(frames.reshape(n * count, -1).astype(np.float64), parents)
        shape = (n, count, -1, 3)
        positions = parts.positions_m.reshape(shape)
        # Joint velocities of frame k: frame k - 1's positions moved into frame k's root
        # frame, then differenced (frame 0's are not shown).
        moved = positions[:, :-1].copy().reshape(n * (count - 1), -1, 3)
        xz, yaw = root_xz_m.reshape(-1, 2), root_yaw_rad.reshape(-1)
        first = np.arange(n * count).reshape(n, count)
        before, after = first[:, :-1].reshape(-1), first[:, 1:].reshape(-1)
        world = from_root_xz(moved[..., [0, 2]], xz[before], yaw[before])
        moved[..., [0, 2]] = to_root_xz(world, xz[after], yaw[after])
        velocities = np.zeros_like(positions)
        velocities[:, 1:] = (positions[:, 1:] - moved.reshape(n, count - 1, -1, 3)) * FPS
        root_velocity = np.zeros((n, count, 2))
        root_velocity[:, 1:] = np.diff(root_xz_m, axis=1) * FPS
        frames = frames.copy()
        local_velocity, yaw_rate = root_motion(root_xz_m, root_yaw_rad)
        frames[..., 0:2], frames[..., 2] = local_velocity, yaw_rate
        fraction = (np.arange(count) / (count - 1))[None, :, None]
        target = np.eye(len(ACTIONS))[target_action]
        actions = start_actions[:, None] + (target - start_actions[:, None]) * fraction
        return cls(
            rows,
            root_xz_m,
            root_yaw_rad,
            root_velocity,
            positions,
            parts.forwards.reshape(shape),
            parts.ups.reshape(shape),
            velocities,
            frames,
            actions,
        )


@dataclass
class TransitionStart:
    """What Controller.transition_to started: where each asked dog will stand when the
    transition hands it back (ask for that facing afterwards, so the dog stays put)."""

    characters: np.ndarray  # (n,) the dogs it drives
    final_xz_m: np.ndarray  # (n, 2) world
    final_yaw_rad: np.ndarray  # (n,)
    frames: int  # steps from the request until the dogs are handed back


def apply_frame(state: DogState, desired_future, t: ActiveTransition) -> None:
    """Sets the rows' state to transition frame t.shown + 1: their rows are taken from the
    state, changed, and put back."""
    k = t.shown + 1
    dogs = state.rows(t.rows)
    dogs.root_xz_m[:] = t.root_xz_m[:, k]
    dogs.root_yaw_rad[:] = t.root_yaw_rad[:, k]
    dogs.root_velocity_xz_mps[:] = t.root_velocity_xz_mps[:, k]
    dogs.pose = LocalPose(
        t.positions_m[:, k], t.forwards[:, k], t.ups[:, k], t.velocities_mps[:, k]
    )
    actions = t.actions[:, k]
    dogs.action_weights[:] = actions
    dogs.commanded_actions[:] = actions
    h = dogs.history
    h.positions_xz_m[:, -1] = t.root_xz_m[:, k]
    h.directions_xz[:, -1] = yaw_direction_xz(t.root_yaw_rad[:, k])
    h.velocities_xz_mps[:, -1] = t.root_velocity_xz_mps[:, k]
    h.speeds_mps[:, -1] = np.linalg.norm(t.root_velocity_xz_mps[:, k], axis=1)
    h.actions[:, -1] = actions
    # The network's own future for these rows is from a motion they did not make: hand the
    # desired one back instead, so the next blend is the command alone.
    if desired_future is not None:
        future = dogs.predicted_future
        for name in ("positions_xz_m", "directions_xz", "velocities_xz_mps"):
            getattr(future, name)[:] = getattr(desired_future, name)[t.rows]
    dogs.frame_history[:, -1] = t.frames[:, k]  # what the next transition reads
    state.put_rows(t.rows, dogs)
    t.shown = k


def stopping_point(state: DogState, rows, seconds: float):
    """Where a character moving as now comes to rest if it slows evenly to a stop over
    `seconds`: half the distance and half the turn it would make at its current rates."""
    directions = state.history.directions_xz[rows]
    turn_rate = (
        wrap_angle_rad(
            yaw_from_direction(directions[:, -1]) - yaw_from_direction(directions[:, -2])
        )
        * FPS
    )
    yaw = wrap_angle_rad(state.root_yaw_rad[rows] + 0.5 * turn_rate * seconds)
    xz = state.root_xz_m[rows] + 0.5 * state.root_velocity_xz_mps[rows] * seconds
    return xz, yaw
