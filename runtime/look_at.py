"""Look-at: a dog's neck and head turned toward a world point, in the pose shown only.

Controller.look_at(target_xyz_m, weight, ids=... or characters=...) asks; the display stage
(runtime/pose.py show) turns the shown pose's neck and head before the IK and FK. The
network's pose (DogState.pose, the next frame's input) is never touched: the turn is made on
a copy, so the motion the network makes, and what it reads next, are the same with or
without look-at (tests/test_look_at.py compares the inputs bit for bit).

How the turn is made: the muzzle (Head -> HeadSite) is aimed at the target seen from the
Head joint as last shown, in the root frame (a pure yaw). The aim (yaw from the body's
facing, pitch from the horizontal) is clamped to LOOK_YAW_LIMIT_RAD and LOOK_PITCH_*_RAD; the
rotation taking the network's muzzle to it (a pitch about the horizontal axis across the
muzzle, then a yaw about the vertical) is shared between the Neck (LOOK_NECK_SHARE) and the
Head, each joint's subtree turned with it, so that the bones keep their lengths (FK draws
them from the skeleton's offsets). The IK then moves the body (on a slope it pitches it with
the ground): how far that turned the muzzle shown is measured after each frame (note_shown)
and the next turn aims short by as much.

The turn's weight and the aim each follow a critically damped spring (no overshoot, and no
jump in speed at the start as an exponential has): LOOK_OMEGA_PER_S reaches 90% of a change
in 0.32 s. The weight's speed is also capped so that the muzzle's tip moves at most
LOOK_MAX_SPEED_MPS beyond the network's own motion (1.8 cm a frame), which a turn of more than
about 80 degrees from where the network holds the head reaches: a turn of 120 degrees takes
about 0.5 s to come within 10 degrees (tests/test_look_at.py measures both). A new target is
turned to on the aim's spring alone; a dog that was not looking starts with the aim already
on its target and fades in.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from canis.runtime.arguments import per_dog
from canis.runtime.features import LocalPose
from canis.runtime.root import wrap_angle_rad, yaw_from_direction, yaw_quaternion
from canis.runtime.rotations import (
    quat_from_axis_angle,
    quat_from_forward_up,
    quat_multiply,
    quat_rotate,
)

# A dog turns its head about 70 degrees either way without turning its shoulders; the aim
# (the muzzle's direction) is held within this yaw of the body's facing.
LOOK_YAW_LIMIT_RAD = math.radians(70.0)
# The muzzle's pitch from the horizontal: down to the ground a stride ahead of the paws, up
# to a raised head. Chosen by eye on the shipped network's poses, not measured on the mocap
# (whose heads go further, down to sniffing and up to howling).
LOOK_PITCH_DOWN_RAD = math.radians(-45.0)
LOOK_PITCH_UP_RAD = math.radians(35.0)
# The Neck takes this share of the turn, the Head the rest (one joint turning alone looks
# like a broken neck).
LOOK_NECK_SHARE = 0.5
# The springs' angular frequency: x(t) = 1 - (1 + wt) e^(-wt) after a step of the goal.
LOOK_OMEGA_PER_S = 12.0
# The weight changes no faster than moves the muzzle's tip this fast beyond the network's
# motion (1.8 cm a frame at 60 Hz): a small turn fades in on the spring alone, a large one
# (the far side from where the network holds the head) at this speed. Letting go is slower:
# nothing waits on it, and a trotting dog's head, let go from a turn to the far side, moved
# 2.5 cm in a frame more than without at 1.1 m/s (1.9 cm at this).
LOOK_MAX_SPEED_MPS = 1.1
LOOK_MAX_RELEASE_SPEED_MPS = 0.75
# A spring this close to its goal (and this slow) is put on it, so a faded-out look ends.
_SETTLED = 1e-4


@dataclass
class LookAtRows:
    """Per dog (DogState.look_at): the target and the springs' state."""

    target_m: np.ndarray  # (N, 3) world point to look at
    goal: np.ndarray  # (N,) the weight asked for, in [0, 1]
    weight: np.ndarray  # (N,) the weight shown now (the spring's position)
    weight_rate: np.ndarray  # (N,) per second (the spring's velocity)
    aim_rad: np.ndarray  # (N, 2) the aim shown now: (yaw from the facing, pitch)
    aim_rate_radps: np.ndarray  # (N, 2)
    # (N, 2) the muzzle's direction as turned, before the IK, and how far the IK and the
    # display turned it from there in the last frame shown (note_shown): the next turn
    # aims that much short, so that the muzzle shown, on a slope too, is on the target.
    turned_rad: np.ndarray
    shown_offset_rad: np.ndarray

    @classmethod
    def zeros(cls, n: int) -> LookAtRows:
        shapes = ((3,), (), (), (), (2,), (2,), (2,), (2,))
        return cls(*(np.zeros((n, *shape)) for shape in shapes))


def critically_damped(x, v, goal, omega: float, dt_s: float):
    """A critically damped spring's position and velocity after `dt_s` toward `goal`: the
    exact solution, so any step length is stable."""
    decay = math.exp(-omega * dt_s)
    gap = x - goal
    kick = (v + omega * gap) * dt_s
    return goal + (gap + kick) * decay, (v - omega * kick) * decay


def _pitch_rad(v: np.ndarray) -> np.ndarray:
    return np.arctan2(v[..., 1], np.hypot(v[..., 0], v[..., 2]))


def _subtree(parents: np.ndarray, joint: int) -> np.ndarray:
    """(J,) bool the joint and every joint below it (parents precede children)."""
    inside = np.zeros(len(parents), dtype=bool)
    inside[joint] = True
    for j in range(joint + 1, len(parents)):
        inside[j] = inside[parents[j]]
    return inside


def _root_frame_angles(s, rows: np.ndarray, world: np.ndarray) -> np.ndarray:
    """(n, 2) world directions (n, 3) as (yaw from the root's facing, pitch): the root frame
    is a yaw, so the pitch is the world's."""
    yaw = wrap_angle_rad(yaw_from_direction(world) - s.root_yaw_rad[rows])
    return np.stack([yaw, _pitch_rad(world)], axis=1)


def wanted_aim(s, rows: np.ndarray, head: int) -> np.ndarray:
    """(n, 2) the clamped aim (yaw from the facing, pitch) at each dog's target, seen from its
    Head joint where it was last shown (on the terrain, the neck turned: one frame old)."""
    seen = s.look_at.target_m[rows] - s.display_positions[rows, head]
    yaw, pitch = _root_frame_angles(s, rows, seen).T
    yaw = np.clip(yaw, -LOOK_YAW_LIMIT_RAD, LOOK_YAW_LIMIT_RAD)
    pitch = np.clip(pitch, LOOK_PITCH_DOWN_RAD, LOOK_PITCH_UP_RAD)
    return np.stack([yaw, pitch], axis=1)


def note_shown(s, skeleton) -> None:
    """After the looking dogs are shown: how far the IK and the display turned each one's
    muzzle from where the look turned it (LookAtRows.shown_offset_rad), in place."""
    la = s.look_at
    rows = np.flatnonzero(la.weight > 0)
    if not len(rows):
        return
    shown = s.display_positions[rows].astype(np.float64)
    muzzle = shown[:, skeleton.index("HeadSite")] - shown[:, skeleton.index("Head")]
    offset = _root_frame_angles(s, rows, muzzle) - la.turned_rad[rows]
    offset[:, 0] = wrap_angle_rad(offset[:, 0])
    la.shown_offset_rad[rows] = offset


def _angle_rad(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """The angle between directions given as (yaw, pitch) pairs (n, 2)."""
    cos = np.sin(a[:, 1]) * np.sin(b[:, 1]) + np.cos(a[:, 1]) * np.cos(b[:, 1]) * np.cos(
        a[:, 0] - b[:, 0]
    )
    return np.arccos(np.clip(cos, -1.0, 1.0))


def tip_reach_m(skeleton) -> float:
    """How far the muzzle's tip moves per radian of the whole turn: the Neck's share of it
    swings Head and HeadSite, the Head's the HeadSite."""
    head_m, muzzle_m = np.linalg.norm(
        skeleton.offsets_m[skeleton.indices(["Head", "HeadSite"])], axis=1
    )
    return float(LOOK_NECK_SHARE * (head_m + muzzle_m) + (1 - LOOK_NECK_SHARE) * muzzle_m)


def advance(
    la: LookAtRows,
    rows: np.ndarray,
    wanted: np.ndarray,
    muzzle: np.ndarray,
    reach_m: float,
    dt_s: float,
) -> None:
    """The springs of the dogs `rows` moved on by `dt_s`, in place: the aim toward `wanted`
    (a dog not looking yet starts on it), the weight toward the goal no faster than
    LOOK_MAX_SPEED_MPS (LOOK_MAX_RELEASE_SPEED_MPS down) at the tip for the turn from the
    network's `muzzle` (yaw, pitch) to the aim (`reach_m`: tip_reach_m)."""
    weight, rate = la.weight[rows], la.weight_rate[rows]
    still = (weight == 0) & (rate == 0)
    aim = np.where(still[:, None], wanted, la.aim_rad[rows])
    aim_rate = np.where(still[:, None], 0.0, la.aim_rate_radps[rows])
    aim, aim_rate = critically_damped(aim, aim_rate, wanted, LOOK_OMEGA_PER_S, dt_s)
    goal = la.goal[rows]
    moved, rate = critically_damped(weight, rate, goal, LOOK_OMEGA_PER_S, dt_s)
    speed = np.where(goal < weight, LOOK_MAX_RELEASE_SPEED_MPS, LOOK_MAX_SPEED_MPS)
    cap = speed / np.maximum(reach_m * _angle_rad(muzzle, aim), 1e-9)  # weight per second
    weight = weight + np.clip(moved - weight, -cap * dt_s, cap * dt_s)
    rate = np.clip(rate, -cap, cap)
    settled = (np.abs(weight - goal) < _SETTLED) & (np.abs(rate) < _SETTLED * LOOK_OMEGA_PER_S)
    la.weight[rows] = np.where(settled, goal, np.clip(weight, 0.0, 1.0))
    la.weight_rate[rows] = np.where(settled, 0.0, rate)
    la.aim_rad[rows], la.aim_rate_radps[rows] = aim, aim_rate


def turned_pose(s, skeleton, dt_s: float) -> LocalPose | None:
    """The pose to show: `s.pose` (never changed) with the looking dogs' necks and heads
    turned, after moving the springs on by `dt_s` (0: a redraw, nothing moves); None when no
    dog looks, the pose then shown as it is."""
    la = s.look_at
    active = (la.goal > 0) | (la.weight > 0) | (la.weight_rate != 0)
    if not active.any():
        return None
    rows = np.flatnonzero(active)
    pose = s.pose
    neck, head = skeleton.index("Neck"), skeleton.index("Head")
    forwards, ups = pose.forwards[rows], pose.ups[rows]
    q_head = quat_from_forward_up(forwards[:, head], ups[:, head])
    muzzle = quat_rotate(q_head, skeleton.offsets_m[skeleton.index("HeadSite")].astype(float))
    heading, pitch = yaw_from_direction(muzzle), _pitch_rad(muzzle)
    starting = la.weight[rows] == 0
    la.shown_offset_rad[rows[starting]] = 0.0  # measured again once shown
    if dt_s > 0:
        wanted = wanted_aim(s, rows, head)
        advance(la, rows, wanted, np.stack([heading, pitch], 1), tip_reach_m(skeleton), dt_s)
    weight = la.weight[rows]
    aim = la.aim_rad[rows] - la.shown_offset_rad[rows]
    turn_yaw = weight * wrap_angle_rad(aim[:, 0] - heading)
    turn_pitch = weight * (aim[:, 1] - pitch)
    la.turned_rad[rows] = np.stack([heading + turn_yaw, pitch + turn_pitch], axis=1)
    # Pitching about (-cos, 0, sin) of the muzzle's heading lifts it toward +y.
    across = np.stack([-np.cos(heading), np.zeros_like(heading), np.sin(heading)], axis=1)

    def turn(share: float) -> np.ndarray:
        lift = quat_from_axis_angle(across, share * turn_pitch)
        return quat_multiply(yaw_quaternion(share * turn_yaw), lift)[:, None]

    head_part = _subtree(skeleton.parents, head)
    neck_part = _subtree(skeleton.parents, neck) & ~head_part
    out_forwards, out_ups = pose.forwards.copy(), pose.ups.copy()
    for part, q in ((neck_part, turn(LOOK_NECK_SHARE)), (head_part, turn(1.0))):
        out_forwards[rows[:, None], np.flatnonzero(part)] = quat_rotate(q, forwards[:, part])
        out_ups[rows[:, None], np.flatnonzero(part)] = quat_rotate(q, ups[:, part])
    return LocalPose(pose.positions_m, out_forwards, out_ups, pose.velocities_mps)


class LookAt:
    """Controller.look_at (module docstring), on its `state`."""

    def look_at(self, target_xyz_m=None, weight=1.0, characters=None, ids=None) -> None:
        """Turns the neck and head of `characters` (rows or a mask) or `ids` (default every
        dog) toward the world point `target_xyz_m` ((3,) for all, or (n, 3)), with `weight`
        in [0, 1] (a number or (n,)); the turn fades in and out smoothly (0.32 s to 90%,
        up to 0.5 s for a large turn).
        `target_xyz_m` None, or weight 0, fades the look out. The network's motion is the
        same either way: only the pose shown turns."""
        rows = self._rows_named(characters, ids, "look_at")
        n = len(rows)
        goal = per_dog(weight, (n,), "weight", "look_at", broadcast=True)
        if np.any((goal < 0) | (goal > 1)):
            raise ValueError(f"look_at: weight must be within [0, 1], got {weight!r}")
        la = self.state.look_at
        if target_xyz_m is None:
            la.goal[rows] = 0.0
            return
        la.target_m[rows] = per_dog(target_xyz_m, (n, 3), "target_xyz_m", "look_at", broadcast=True)
        la.goal[rows] = goal
