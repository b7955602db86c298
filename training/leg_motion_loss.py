"""The leg-motion term (issue 17, leg stiffness): how far each leg joint turns per predicted step,
on average over a stretch of the network's own frames, against how far its clip's turned over
the same frames.

Every shipped network moves its legs less than the mocap (walk 1.52 against 2.95 deg/frame),
and the walk's excess skating is the same deficit: swings of too little amplitude carried low
(docs/EVALUATION.md). The MSE rewards that: where the phase of a swing is uncertain, the mean
of the possible poses is a leg that hardly moves. This term compares each stretch's mean turn
per joint, so it asks for as much leg motion as the clip's and not for it at the clip's
moment (the mocap's turns are heavy-tailed besides: a mean of 2 deg/frame, an RMS of 3.9).
Per stretch, not over the batch: a mean over the batch's rows let legs that stir while
standing pay for legs that swing too little while walking (docs/EVALUATION.md, the eighth
session). It is measured on the network run without dropout (closed_loop_training.
leg_motion_stretch): under dropout the predicted steps jitter by several degrees a frame.

The angle is the whole rotation of the joint's frame (forward, up and their cross product)
between x's frame and y's, seen from x's root (y's axes turned back by the predicted yaw step,
as contact_loss carries the paws): for orthonormal frames A and B the sum of |b_i - a_i|^2 over
the three axes is 8 sin^2(theta / 2). Root frame, not parent-relative as the evaluation's
stiffness (training/controller_metrics.py), since the leg is what is seen to swing;
tests/test_leg_motion_loss.py checks it against the evaluation's angular update of the same
root-frame rotations.
"""

from __future__ import annotations

import torch
from canis.runtime.features import FPS, INPUT, OUTPUT
from canis.runtime.skeleton import DOG_GROUPS, DOG_JOINT_NAMES, DOG_LEG_GROUPS
from canis.training.contact_loss import _field, rotate_xz

# The rotating leg joints' rows in the contract (end sites carry no rotation of their own).
LEG_ROWS = tuple(
    DOG_JOINT_NAMES.index(name)
    for group in DOG_LEG_GROUPS
    for name in DOG_GROUPS[group]
    if not name.endswith("Site")
)


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


def leg_turn_deg(x_raw: torch.Tensor, y_raw: torch.Tensor) -> torch.Tensor:
    """(B, L) the angle in degrees each leg joint's frame turns from x's frame to y's, in the
    root frame (LEG_ROWS order)."""
    turn_rad = _field(OUTPUT, y_raw, "root_update", "yaw_velocity", [0])[:, 0, 0] / FPS
    before = _frames(
        _field(INPUT, x_raw, "joints", "forward", LEG_ROWS),
        _field(INPUT, x_raw, "joints", "up", LEG_ROWS),
    )
    after = _frames(
        _turned_back(_field(OUTPUT, y_raw, "joints", "forward", LEG_ROWS), turn_rad),
        _turned_back(_field(OUTPUT, y_raw, "joints", "up", LEG_ROWS), turn_rad),
    )
    chord_sq = (after - before).square().sum((-1, -2))  # 8 sin^2(theta / 2)
    # The floor keeps the gradient of the square root finite for a joint that does not turn.
    half_sine = (chord_sq / 8.0).clamp(min=1e-12, max=1.0).sqrt()
    return torch.rad2deg(2.0 * torch.asin(half_sine))


def leg_motion_loss(predicted_deg: torch.Tensor, mocap_deg: torch.Tensor) -> torch.Tensor:
    """Mean over stretches and leg joints of the squared difference (deg/frame)^2 between the
    predicted and the mocap's mean turn over the stretch's frames; each (F, B, L) of
    leg_turn_deg over F frames of B stretches."""
    return (predicted_deg.mean(0) - mocap_deg.detach().mean(0)).square().mean()
