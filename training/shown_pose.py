"""The pose the runtime shows, in torch, so that a loss can reach what the evaluation measures.

The networks predict each joint's position and its rotation (forward and up axes) separately,
and the dog is drawn from the rotations alone: forward kinematics from the hips
(runtime/pose.py), the hips where runtime/pose.next_local_pose keeps them (the
predicted position averaged with the previous one advanced by the predicted velocity). So the
evaluation's skating (evaluation/controller_metrics.py on tools/closed_loop.record's shown
positions) is a function of the predicted axes, not of the predicted paw positions the
contact term of training/finetune_losses.py measures; where the two disagree, that term can fall
while the shown paws go on sliding.

Here both are rebuilt in torch: the hips by next_local_pose's formula, the other joints by
forward kinematics of the axes as the runtime turns them into rotations (joint_axes;
the axes are root-frame orientations, so each joint sits at its parent plus its parent's
rotation applied to its offset). tests/test_shown_pose.py checks both against the runtime's
own functions.
"""

from __future__ import annotations

import functools

import numpy as np
import torch
from canis.runtime.features import FPS, INPUT, JOINT_COUNT, OUTPUT
from canis.runtime.pose import JOINT_POSITION_BLEND
from canis.runtime.skeleton import Skeleton, shipped_dog_skeleton_path
from canis.training.finetune_losses import _field, _frames, rotate_xz, yaw_step_rad

HIPS = 0


def joint_axes(forward: torch.Tensor, up: torch.Tensor) -> torch.Tensor:
    """(..., 3, 3) rotation matrices, columns (x, y, z), from predicted axes as the runtime
    turns them into rotations (z the forward normalised, y the up made orthogonal to it):
    leg_motion_loss's frames (rows forward, up, forward x up) as columns, x = y x z."""
    forward, up, side = _frames(forward, up).unbind(-2)
    return torch.stack([-side, up, forward], dim=-1)


@functools.lru_cache(maxsize=1)
def skeleton_tensors() -> tuple[np.ndarray, torch.Tensor]:
    """(parents (J,), bone offsets (J, 3) in metres) of the shipped dog, for chain_positions."""
    skeleton = Skeleton.from_json(shipped_dog_skeleton_path())
    return skeleton.parents, torch.as_tensor(skeleton.offsets_m, dtype=torch.float32)


def chain_positions(
    hips_m: torch.Tensor,
    axes: torch.Tensor,
    parents: np.ndarray,
    offsets_m: torch.Tensor,
    slot: dict[int, int] | None = None,
) -> torch.Tensor:
    """(N, J, 3) root-frame joint positions by forward kinematics from `hips_m` (N, 3): each
    joint at its parent plus the parent's rotation (`axes` (N, R, 3, 3), columns x, y, z, in
    the root frame) applied to its offset; `slot` maps a joint to its row of `axes` where not
    every joint has one (the RTN's end sites carry no rotation)."""
    offsets_m = offsets_m.to(axes.dtype)
    positions = [hips_m]
    for joint in range(1, len(parents)):  # the skeleton lists each parent before its children
        parent = int(parents[joint])
        rotation = axes[:, parent if slot is None else slot[parent]]
        positions.append(positions[parent] + rotation @ offsets_m[joint])
    return torch.stack(positions, dim=1)


def kept_positions_m(x_raw: torch.Tensor, y_raw: torch.Tensor, joints) -> torch.Tensor:
    """(B, len(joints), 3) `joints`' positions in y's root frame as next_local_pose keeps them:
    x's seen from the new root (the predicted step and turn) and advanced by the predicted
    velocities, averaged with the predicted positions."""
    dt_s = 1.0 / FPS
    rows = list(joints)
    previous = _field(INPUT, x_raw, "joints", "position", rows)
    predicted = _field(OUTPUT, y_raw, "joints", "position", rows)
    velocity = _field(OUTPUT, y_raw, "joints", "velocity", rows)
    step_m = _field(OUTPUT, y_raw, "root_update", "velocity", [0])[:, 0] * dt_s
    moved_xz = rotate_xz(previous[..., [0, 2]] - step_m[:, None], -yaw_step_rad(y_raw))
    moved = torch.stack([moved_xz[..., 0], previous[..., 1], moved_xz[..., 1]], dim=-1)
    advanced = moved + velocity * dt_s
    return predicted + (advanced - predicted) * JOINT_POSITION_BLEND


def shown_hips_m(x_raw: torch.Tensor, y_raw: torch.Tensor) -> torch.Tensor:
    """(B, 3) the hips' position in y's root frame as next_local_pose keeps it."""
    return kept_positions_m(x_raw, y_raw, [HIPS])[:, 0]


def fed_back_input(
    x_raw: torch.Tensor, y_raw: torch.Tensor, x_next_raw: torch.Tensor
) -> torch.Tensor:
    """x_next_raw (B, 480) with its pose replaced by the one the runtime keeps after
    predicting y_raw from x_raw (finetune_stretches.next_input in torch, with its gradient):
    the kept positions, and y's axes and velocities as they are."""
    every = range(JOINT_COUNT)
    fed = x_next_raw.clone()
    values = {
        "position": kept_positions_m(x_raw, y_raw, every),
        **{f: _field(OUTPUT, y_raw, "joints", f, every) for f in ("forward", "up", "velocity")},
    }
    for name, value in values.items():
        fed[:, INPUT.indices("joints", name)] = value.reshape(len(fed), -1).to(fed.dtype)
    return fed


def shown_positions_m(layout, values: torch.Tensor, hips_m: torch.Tensor) -> torch.Tensor:
    """(B, J, 3) every joint's position in the root frame, drawn from the axes of `values` (x
    or y rows of `layout`) by forward kinematics from `hips_m` (B, 3)."""
    parents, offsets_m = skeleton_tensors()
    every = range(len(parents))
    axes = joint_axes(
        _field(layout, values, "joints", "forward", every),
        _field(layout, values, "joints", "up", every),
    )
    return chain_positions(hips_m, axes, parents, offsets_m)


def shown_step_m(
    x_raw: torch.Tensor, y_raw: torch.Tensor, joints
) -> tuple[torch.Tensor, torch.Tensor]:
    """`joints`' shown positions before (x's pose, its own root frame) and after the step (y's
    pose, in y's root frame): (B, len(joints), 3) each."""
    rows = list(joints)
    before_hips = _field(INPUT, x_raw, "joints", "position", [HIPS])[:, 0]
    before = shown_positions_m(INPUT, x_raw, before_hips)[:, rows]
    after = shown_positions_m(OUTPUT, y_raw, shown_hips_m(x_raw, y_raw))[:, rows]
    return before, after
