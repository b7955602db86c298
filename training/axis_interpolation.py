"""Joint axes moved toward a target's along the rotation they stand for, in torch, for the
RTN's step (training/rtn.py, residual "rotations"), so inside its exported graph.

A joint's forward and up axes (runtime/transition.py) interpolated channel by channel
pass through zero when the two rotations are far apart: a forearm whose roll must turn by
half a circle has its up axis shrink, cross the forward and come back reversed, and the
rotation shown from such axes (Gram-Schmidt, forward first) flips in one frame (a 25 cm jump
of a paw, measured in docs/RESULTS.md). Here, where the two rotations are far apart, each
pair becomes a unit quaternion, the two are blended along the shorter arc (normalised linear
interpolation: never through zero, since the shorter arc keeps the two within 90 degrees in
quaternion space), and the blend goes back to unit axes; where they are close the channels'
blend is kept (interpolate_axes says why).

The conversions are those of runtime/rotations.py (quat_from_forward_up, quat_to_forward_up)
written again in torch because they run inside the network's graph (the axes' Gram-Schmidt is
training/shown_pose.py's joint_axes); tests/test_axis_interpolation.py holds them equal to the
runtime's.
"""

from __future__ import annotations

import math

import torch
from canis.training.shown_pose import joint_axes
from torch.nn.functional import normalize

# Shepperd's method's smallest divisor: the candidate chosen has 4q^2 >= 1; the others are
# clamped only so that their (unused) gradients stay finite.
_FLOOR = 1e-6


def _shepperd_matrix() -> torch.Tensor:
    """(10, 16): [1, m] @ it = Shepperd's four candidate rows (4 x 4, flattened) of a rotation
    matrix m flattened column by column (m[i][j] at 3 j + i). Candidate k is 4 q_k times the
    quaternion (w, x, y, z); each of its entries is linear in m, so one MatMul makes them all
    (the step runs once a frame, and ONNX Runtime's cost is per operator)."""

    def at(i: int, j: int) -> int:
        return 1 + 3 * j + i  # column 0 is the constant 1

    rows = [
        [(0, 1), (at(0, 0), 1), (at(1, 1), 1), (at(2, 2), 1)],  # 4 w^2 ...
        [(at(2, 1), 1), (at(1, 2), -1)],
        [(at(0, 2), 1), (at(2, 0), -1)],
        [(at(1, 0), 1), (at(0, 1), -1)],
        [(at(2, 1), 1), (at(1, 2), -1)],  # 4 x ...
        [(0, 1), (at(0, 0), 1), (at(1, 1), -1), (at(2, 2), -1)],
        [(at(0, 1), 1), (at(1, 0), 1)],
        [(at(0, 2), 1), (at(2, 0), 1)],
        [(at(0, 2), 1), (at(2, 0), -1)],  # 4 y ...
        [(at(0, 1), 1), (at(1, 0), 1)],
        [(0, 1), (at(0, 0), -1), (at(1, 1), 1), (at(2, 2), -1)],
        [(at(1, 2), 1), (at(2, 1), 1)],
        [(at(1, 0), 1), (at(0, 1), -1)],  # 4 z ...
        [(at(0, 2), 1), (at(2, 0), 1)],
        [(at(1, 2), 1), (at(2, 1), 1)],
        [(0, 1), (at(0, 0), -1), (at(1, 1), -1), (at(2, 2), 1)],
    ]
    matrix = torch.zeros(10, 16, dtype=torch.float64)
    for column, terms in enumerate(rows):
        for row, sign in terms:
            matrix[row, column] = sign
    return matrix


_SHEPPERD = _shepperd_matrix()
_DIAGONAL = [0, 5, 10, 15]  # candidate k's own entry: 4 q_k^2


def quaternions_from_axes(forward: torch.Tensor, up: torch.Tensor) -> torch.Tensor:
    """Unit quaternions (..., 4) (w, x, y, z), of either sign, of axis pairs (..., 3): local +z
    is `forward`, local +y as close to `up` as orthogonality allows (forward wins). Not unit
    length is fine."""
    columns = joint_axes(forward, up).transpose(-1, -2).flatten(-2)  # x, y, z: m by column
    matrix = torch.cat([torch.ones_like(columns[..., :1]), columns], dim=-1)
    candidates = (matrix @ _SHEPPERD.to(matrix.dtype)).unflatten(-1, (4, 4))
    diagonal = candidates.flatten(-2)[..., _DIAGONAL]
    pick = diagonal.argmax(dim=-1, keepdim=True)  # the largest: accurate near 180 degrees
    chosen = torch.gather(candidates, -2, pick[..., None].expand_as(candidates[..., :1, :]))
    chosen = chosen.squeeze(-2)
    # Either sign: interpolate_axes picks the one on the shorter arc.
    return chosen / (torch.gather(diagonal, -1, pick).clamp(min=_FLOOR).sqrt() * 2)


def _axes_matrix() -> tuple[torch.Tensor, torch.Tensor]:
    """(16, 6) and (6,): the forward and up axes of a unit quaternion q are products q_i q_j
    (flattened at 4 i + j) @ the matrix + the constant, one MatMul as in _shepperd_matrix."""
    w, x, y, z = range(4)
    terms = [
        [(x, z, 2), (w, y, 2)],  # forward
        [(y, z, 2), (w, x, -2)],
        [(x, x, -2), (y, y, -2)],
        [(x, y, 2), (w, z, -2)],  # up
        [(x, x, -2), (z, z, -2)],
        [(y, z, 2), (w, x, 2)],
    ]
    matrix = torch.zeros(16, 6, dtype=torch.float64)
    for column, products in enumerate(terms):
        for i, j, factor in products:
            matrix[4 * i + j, column] = factor
    return matrix, torch.tensor([0.0, 0, 1, 0, 1, 0], dtype=torch.float64)


_AXES, _AXES_CONSTANT = _axes_matrix()


def axes_from_quaternions(q: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """The local +z (forward) and +y (up) axes (..., 3) of unit quaternions (..., 4)."""
    products = (q[..., :, None] * q[..., None, :]).flatten(-2)
    axes = products @ _AXES.to(q.dtype) + _AXES_CONSTANT.to(q.dtype)
    return axes[..., :3], axes[..., 3:]


def interpolate_axes(
    forward: torch.Tensor,
    up: torch.Tensor,
    target_forward: torch.Tensor,
    target_up: torch.Tensor,
    share: torch.Tensor,
    arc_joints: torch.Tensor | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Axes (..., 3) `share` of the way (broadcast against (...)) from (forward, up) to
    (target_forward, target_up): channel by channel where the two rotations are within
    ARC_FROM_DEG of each other, along the shorter arc between them (unit axes) where they are
    ARC_FULL_DEG or more apart, a blend of the two between.

    `arc_joints` (J,) 1 where a joint may take the arc, 0 where it keeps the channels' blend
    (None: every joint may).

    The channels' blend is kept where it is sound because it keeps what both ends share (the
    network learned its corrections on it, and its standardised loss weighs a channel by its
    deviation). Within 60 degrees it stays within 13% of unit length; it reaches zero only
    near half a turn, where the arc takes over.

    In the inputs' precision even under bf16 autocast (which would round the MatMuls to three
    digits: an error of 1e-2 where an axis channel's standard deviation is 3e-3)."""
    with torch.autocast(forward.device.type, enabled=False):
        return _interpolate_axes(forward, up, target_forward, target_up, share, arc_joints)


# Between these angles of the rotation from a joint's axes to the target's, the base moves
# from the channels' blend to the arc (as cosines of half the angle: a quaternion's dot).
ARC_FROM_DEG, ARC_FULL_DEG = 60.0, 120.0
_ARC_FROM_DOT = math.cos(math.radians(ARC_FROM_DEG) / 2)
_ARC_FULL_DOT = math.cos(math.radians(ARC_FULL_DEG) / 2)


def _interpolate_axes(forward, up, target_forward, target_up, share, arc_joints):
    share = share[..., None]
    # Both ends in one call: half the operators in the exported step.
    start, end = quaternions_from_axes(
        torch.stack([forward, target_forward]), torch.stack([up, target_up])
    ).unbind(0)
    dot = (start * end).sum(-1, keepdim=True)
    end = torch.where(dot < 0, -end, end)
    arc = axes_from_quaternions(normalize(start + (end - start) * share, dim=-1))
    arc_weight = ((_ARC_FROM_DOT - dot.abs()) / (_ARC_FROM_DOT - _ARC_FULL_DOT)).clamp(0, 1)
    if arc_joints is not None:
        arc_weight = arc_weight * arc_joints.to(arc_weight.dtype)[:, None]
    channels = (forward + (target_forward - forward) * share, up + (target_up - up) * share)
    return tuple(c + (a - c) * arc_weight for c, a in zip(channels, arc, strict=True))
