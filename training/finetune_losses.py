"""The terms closed-loop fine-tuning puts on the stretches' steps (training/finetune_stretches.py),
as free functions of raw inputs and predictions (x, y), and the pieces of geometry the terms on
the runtime's dogs measure with.

The contact term: a paw that the labels say is planted in y's frame should
not move in the world. Its motion is measured through the predicted root update: the paw's
predicted position (in the new root's frame) is carried back into the previous root's frame by
the predicted turn and step, and compared with where it was in x.

Beside it, the pieces the other terms measure paws with: world_velocity_mps (points carried
back into the previous root's frame) and step_skating_cm (the evaluation's own foot-skating
measure, runtime/motion_metrics.py: any paw moving while under 2.5 cm).

leg_turn_deg: how far each leg joint turns per predicted step (the placed-stillness term
holds a standing dog's legs still by it).

The angle is the whole rotation of the joint's frame (forward, up and their cross product)
between x's frame and y's, seen from x's root (y's axes turned back by the predicted yaw step,
as contact_loss carries the paws): for orthonormal frames A and B the sum of |b_i - a_i|^2 over
the three axes is 8 sin^2(theta / 2). Root frame, not parent-relative as the evaluation's
stiffness (evaluation/controller_metrics.py), since the leg is what is seen to swing;
tests/test_leg_turn.py checks it against the evaluation's angular update of the same
root-frame rotations.
"""

from __future__ import annotations

import numpy as np
import torch
from canis.runtime.features import FPS, INPUT, OUTPUT, PAW_ROWS
from canis.runtime.motion_metrics import SKATING_HEIGHT_CM
from canis.runtime.skeleton import DOG_GROUPS, DOG_JOINT_NAMES, DOG_LEG_GROUPS


def _field(layout, values: torch.Tensor, block: str, field: str, rows) -> torch.Tensor:
    """(B, len(rows), size) of one field, by the contract's own indices."""
    index = layout.field(np.arange(layout.size), block, field)[list(rows)]  # (rows, size)
    return values[:, torch.as_tensor(index, device=values.device)]


def rotate_xz(vectors_xz: torch.Tensor, yaw_rad: torch.Tensor) -> torch.Tensor:
    """runtime.root.rotate_xz in torch, so the loss has gradients through the predicted turn
    (tests/test_finetune.py checks the two agree)."""
    c, s = torch.cos(yaw_rad)[:, None], torch.sin(yaw_rad)[:, None]
    x, z = vectors_xz[..., 0], vectors_xz[..., 1]
    return torch.stack([c * x + s * z, c * z - s * x], dim=-1)


def yaw_step_rad(y_raw: torch.Tensor) -> torch.Tensor:
    """(B,) the root's predicted turn over one frame, radians."""
    return _field(OUTPUT, y_raw, "root_update", "yaw_velocity", [0])[:, 0, 0] / FPS


def paw_world_velocity_mps(x_raw: torch.Tensor, y_raw: torch.Tensor) -> torch.Tensor:
    """(B, 4, 3) each paw's velocity between x's frame and y's, in the previous root's frame
    (a world-aligned frame up to a yaw: its length is the world speed), in m/s."""
    before = _field(INPUT, x_raw, "joints", "position", PAW_ROWS)
    after = _field(OUTPUT, y_raw, "joints", "position", PAW_ROWS)
    return world_velocity_mps(before, after, y_raw)


def world_velocity_mps(
    before_m: torch.Tensor, after_m: torch.Tensor, y_raw: torch.Tensor
) -> torch.Tensor:
    """(B, P, 3) the velocity of points at `before_m` in x's root frame and `after_m` in y's
    (B, P, 3), in x's root frame, in m/s: `after_m` carried back by the predicted turn and
    step."""
    dt_s = 1.0 / FPS
    root_velocity = _field(OUTPUT, y_raw, "root_update", "velocity", [0])[:, 0]
    after_xz = rotate_xz(after_m[..., [0, 2]], yaw_step_rad(y_raw)) + root_velocity[:, None] * dt_s
    moved_xz = after_xz - before_m[..., [0, 2]]
    moved_y = after_m[..., 1] - before_m[..., 1]
    return torch.cat([moved_xz[..., :1], moved_y[..., None], moved_xz[..., 1:]], -1) / dt_s


def contact_loss(x_raw: torch.Tensor, y_raw: torch.Tensor, planted: torch.Tensor) -> torch.Tensor:
    """Mean squared world speed (m/s)^2 of the predicted paw positions planted in y's frame
    (planted: (B, 4))."""
    velocity = paw_world_velocity_mps(x_raw, y_raw)
    speed_sq = velocity.square().sum(-1)
    weight = planted.to(speed_sq.dtype)
    return (speed_sq * weight).sum() / weight.sum().clamp(min=1.0)


def step_skating_cm(velocity_mps: torch.Tensor, after_m: torch.Tensor) -> torch.Tensor:
    """(B, P) the skating of points moving at `velocity_mps` (B, P, 3) that end at `after_m`
    (B, P, 3, root frame): the horizontal world speed in cm/frame, weighted by 2 - 2^(h/H)
    under H, with h the height above the ground under the root."""
    speed_cm = velocity_mps[..., [0, 2]].norm(dim=-1) * (100.0 / FPS)
    height_cm = after_m[..., 1] * 100.0
    weight = 2.0 - torch.pow(2.0, (height_cm / SKATING_HEIGHT_CM).clamp(0.0, 1.0))
    return torch.where(height_cm < SKATING_HEIGHT_CM, speed_cm * weight, 0.0)


def _rotating_rows(names) -> tuple[int, ...]:
    """The contract's rows of the named joints that rotate (end sites carry no rotation of
    their own), in the names' order."""
    return tuple(DOG_JOINT_NAMES.index(name) for name in names if not name.endswith("Site"))


HALF_TURN_MARGIN = 1e-6  # of sin^2(theta / 2): a turn reads at most 179.89 degrees

LEG_ROWS = _rotating_rows(name for group in DOG_LEG_GROUPS for name in DOG_GROUPS[group])
# Every rotating joint: what the stillness term watches (a standing dog's stirring was seen
# in its head and front legs).
ROTATING_ROWS = _rotating_rows(DOG_JOINT_NAMES)


def _frames(forward: torch.Tensor, up: torch.Tensor) -> torch.Tensor:
    """(..., 3, 3) orthonormal frames (forward, up, side) from predicted axes, which are near
    unit and near orthogonal but not exactly (Gram-Schmidt, forward kept)."""
    forward = torch.nn.functional.normalize(forward, dim=-1)
    up = torch.nn.functional.normalize(up - (up * forward).sum(-1, keepdim=True) * forward, dim=-1)
    return torch.stack([forward, up, torch.cross(forward, up, dim=-1)], dim=-2)


def _turned_back(axes: torch.Tensor, turn_rad: torch.Tensor) -> torch.Tensor:
    """(B, L, 3) direction vectors from y's root frame into x's (the predicted yaw step)."""
    xz = rotate_xz(axes[..., [0, 2]], turn_rad)
    return torch.stack([xz[..., 0], axes[..., 1], xz[..., 1]], dim=-1)


def leg_turn_deg(
    x_raw: torch.Tensor, y_raw: torch.Tensor, joints: tuple[int, ...] = LEG_ROWS
) -> torch.Tensor:
    """(B, J) the angle in degrees each of `joints`' frames (the leg joints unless told) turns
    from x's frame to y's, in the root frame (in `joints`' order)."""
    return axes_turn_deg(
        _field(INPUT, x_raw, "joints", "forward", joints),
        _field(INPUT, x_raw, "joints", "up", joints),
        _field(OUTPUT, y_raw, "joints", "forward", joints),
        _field(OUTPUT, y_raw, "joints", "up", joints),
        yaw_step_rad(y_raw),
    )


def axes_turn_deg(
    forward_before: torch.Tensor,
    up_before: torch.Tensor,
    forward_after: torch.Tensor,
    up_after: torch.Tensor,
    turn_rad: torch.Tensor,
) -> torch.Tensor:
    """(B, J) the angle in degrees between joint frames given by their axes (B, J, 3) before and
    after, each in its own root frame, the root having turned by turn_rad (B,) between them."""
    before = _frames(forward_before, up_before)
    after = _frames(_turned_back(forward_after, turn_rad), _turned_back(up_after, turn_rad))
    chord_sq = (after - before).square().sum((-1, -2))  # 8 sin^2(theta / 2)
    # The floor keeps the gradient of the square root finite for a joint that does not turn;
    # the ceiling under 1 that of the arcsine for one that turns half a circle, whose chord
    # can round past 8: at 1 the clamp's zero times the arcsine's infinite slope is NaN, and
    # one such joint made a fine-tune's weights NaN.
    half_sine_sq = (chord_sq / 8.0).clamp(min=1e-12, max=1.0 - HALF_TURN_MARGIN)
    return torch.rad2deg(2.0 * torch.asin(half_sine_sq.sqrt()))
