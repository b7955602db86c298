"""The contact term (issue 17 item 2): a paw that the labels say is planted in y's frame should
not move in the world. Its motion is measured through the predicted root update: the paw's
predicted position (in the new root's frame) is carried back into the previous root's frame by
the predicted turn and step, and compared with where it was in x.

Beside it, the pieces the other terms measure paws with: world_velocity_mps (points carried
back into the previous root's frame) and step_skating_cm (the evaluation's own foot-skating
measure, runtime/motion_metrics.py: any paw moving while under 2.5 cm)."""

from __future__ import annotations

import numpy as np
import torch
from canis.runtime.features import FPS, INPUT, OUTPUT, PAW_ROWS
from canis.runtime.motion_metrics import SKATING_HEIGHT_CM


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
