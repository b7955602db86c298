"""Look-at: a dog's neck and head turned toward a world point, in the pose shown only.

Controller.look_at(target_xyz_m, weight, ids=... or characters=...) asks; the display stage
(runtime/pose.py show) turns the shown pose's neck and head before the IK and FK. The
network's pose (DogState.pose, the next frame's input) is never touched: the turn is made on
a copy, so the motion the network makes, and what it reads next, are the same with or
without look-at (tests/test_look_at.py compares the inputs bit for bit).

How the turn is made: the muzzle (Head -> HeadSite) is aimed at the target seen from the
Head joint, in the root frame (a pure yaw on the ground plane: the target's height is taken
above the ground under the root, where the IK puts the dog). The aim (yaw from the body's
facing, pitch from the horizontal) is clamped to LOOK_YAW_LIMIT_RAD and LOOK_PITCH_*_RAD; the
rotation taking the network's muzzle to it (a pitch about the horizontal axis across the
muzzle, then a yaw about the vertical) is shared between the Neck (LOOK_NECK_SHARE) and the
Head, each joint's subtree turned with it, so that the bones keep their lengths (FK draws
them from the skeleton's offsets).

The turn's weight and the aim each follow a critically damped spring (no overshoot, and no
jump in speed at the start as an exponential has): LOOK_OMEGA_PER_S reaches 90% of a change
in 0.39 s, and moves no joint more than 2 cm in a frame beyond its own motion for a turn to
the yaw limit (measured in tests/test_look_at.py). A new target is turned to at the same
rate; a dog that was not looking starts with the aim already on its target and fades in.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from canis.runtime.arguments import per_dog
from canis.runtime.features import LocalPose
from canis.runtime.root import to_root_xz, wrap_angle_rad, yaw_from_direction, yaw_quaternion
from canis.runtime.rotations import (
    quat_from_axis_angle,
    quat_from_forward_up,
    quat_multiply,
    quat_rotate,
)

# A dog turns its head about 70 degrees either way without turning its shoulders; the aim
# (the muzzle's direction) is held within this yaw of the body's facing.
LOOK_YAW_LIMIT_RAD = math.radians(70.0)
# The muzzle's pitch from the horizontal: down to the ground ahead of the paws, up to a
# raised head (the mocap's own heads, over the clips, stay within about this range).
LOOK_PITCH_DOWN_RAD = math.radians(-45.0)
LOOK_PITCH_UP_RAD = math.radians(35.0)
# The Neck takes this share of the turn, the Head the rest (one joint turning alone looks
# like a broken neck).
LOOK_NECK_SHARE = 0.5
# The springs' angular frequency: x(t) = 1 - (1 + wt) e^(-wt) after a step of the goal.
LOOK_OMEGA_PER_S = 10.0
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

    @classmethod
    def zeros(cls, n: int) -> LookAtRows:
        return cls(*(np.zeros((n, *shape)) for shape in ((3,), (), (), (), (2,), (2,))))


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


def wanted_aim(s, rows: np.ndarray, skeleton, terrain) -> np.ndarray:
    """(n, 2) the clamped aim (yaw from the facing, pitch) at each dog's target from its Head
    joint, in the root frame."""
    la = s.look_at
    target = la.target_m[rows]
    xz = to_root_xz(target[:, None, ::2], s.root_xz_m[rows], s.root_yaw_rad[rows])[:, 0]
    ground = 0.0 if terrain is None else terrain.sample(s.root_xz_m[rows])[0]
    seen = np.stack([xz[:, 0], target[:, 1] - ground, xz[:, 1]], axis=1)
    seen -= s.pose.positions_m[rows, skeleton.index("Head")]
    yaw = np.clip(yaw_from_direction(seen), -LOOK_YAW_LIMIT_RAD, LOOK_YAW_LIMIT_RAD)
    pitch = np.clip(_pitch_rad(seen), LOOK_PITCH_DOWN_RAD, LOOK_PITCH_UP_RAD)
    return np.stack([yaw, pitch], axis=1)


def advance(la: LookAtRows, rows: np.ndarray, wanted: np.ndarray, dt_s: float) -> None:
    """The springs of the dogs `rows` moved on by `dt_s`, in place: the weight toward the
    goal, the aim toward `wanted` (a dog not looking yet starts on it)."""
    weight, rate = la.weight[rows], la.weight_rate[rows]
    still = (weight == 0) & (rate == 0)
    aim = np.where(still[:, None], wanted, la.aim_rad[rows])
    aim_rate = np.where(still[:, None], 0.0, la.aim_rate_radps[rows])
    aim, aim_rate = critically_damped(aim, aim_rate, wanted, LOOK_OMEGA_PER_S, dt_s)
    goal = la.goal[rows]
    weight, rate = critically_damped(weight, rate, goal, LOOK_OMEGA_PER_S, dt_s)
    settled = (np.abs(weight - goal) < _SETTLED) & (np.abs(rate) < _SETTLED * LOOK_OMEGA_PER_S)
    la.weight[rows] = np.where(settled, goal, np.clip(weight, 0.0, 1.0))
    la.weight_rate[rows] = np.where(settled, 0.0, rate)
    la.aim_rad[rows], la.aim_rate_radps[rows] = aim, aim_rate


def turned_pose(s, skeleton, terrain, dt_s: float) -> LocalPose | None:
    """The pose to show: `s.pose` (never changed) with the looking dogs' necks and heads
    turned, after moving the springs on by `dt_s` (0: a redraw, nothing moves); None when no
    dog looks, the pose then shown as it is."""
    la = s.look_at
    active = (la.goal > 0) | (la.weight > 0) | (la.weight_rate != 0)
    if not active.any():
        return None
    rows = np.flatnonzero(active)
    if dt_s > 0:
        advance(la, rows, wanted_aim(s, rows, skeleton, terrain), dt_s)
    pose = s.pose
    neck, head = skeleton.index("Neck"), skeleton.index("Head")
    forwards, ups = pose.forwards[rows], pose.ups[rows]
    q_head = quat_from_forward_up(forwards[:, head], ups[:, head])
    muzzle = quat_rotate(q_head, skeleton.offsets_m[skeleton.index("HeadSite")].astype(float))
    heading = yaw_from_direction(muzzle)
    weight = la.weight[rows]
    turn_yaw = weight * wrap_angle_rad(la.aim_rad[rows, 0] - heading)
    turn_pitch = weight * (la.aim_rad[rows, 1] - _pitch_rad(muzzle))
    # Pitching about (-cos, 0, sin) of the muzzle's heading lifts it toward +y.
    across = np.stack([-np.cos(heading), np.zeros_like(heading), np.sin(heading)], axis=1)

    def turn(share: float) -> np.ndarray:
        pitch = quat_from_axis_angle(across, share * turn_pitch)
        return quat_multiply(yaw_quaternion(share * turn_yaw), pitch)[:, None]

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
        in [0, 1] (a number or (n,)); the turn fades in and out smoothly (0.39 s to 90%).
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
