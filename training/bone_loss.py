"""The bone term (issue 17, postures popping): a predicted pose whose joint positions agree with
its joint rotations.

The networks predict each joint's position and its rotation (forward and up axes) as separate
outputs, and nothing ties them together: the shown dog is drawn from the rotations (forward
kinematics from the hips, runtime/pose.py), while the transition network (RTN) reads the
positions and the axes both, as the mocap's frames always had them agree. The leg-motion
fine-tunes let them drift apart (docs/EVALUATION.md, the eleventh session: the shown joints sit
2.3 cm on average from the predicted positions in a trot, the shipped network's 1.4), and an
RTN started from such a pose generated a shoulder whose axes collapsed onto each other, whose
shown elbow then jumped 30 cm in one frame.

The term: for every bone, the squared distance (cm^2) between the predicted bone vector (child
position minus parent position, root frame) and the parent's predicted rotation applied to the
skeleton's offset of the child, averaged over the bones. The rotation is built from the axes as
the runtime builds it (forward normalised, up orthogonalised: native/src/directions.cpp); for
the mocap's own frames the term is 0 (tests/test_bone_loss.py).

With `positions_only` the rotations are held fixed (detached) and the term moves the positions
alone, since the dog is drawn from the rotations: at the weights that stop the pops (0.2-0.3)
the whole term cost the leg-motion fine-tunes their walk's and turn's skating gain. Measured
(docs/EVALUATION.md, the twelfth session): the positions alone cost it nearly as much.
"""

from __future__ import annotations

import functools

import numpy as np
import torch
from canis.runtime.features import OUTPUT
from canis.runtime.skeleton import Skeleton, shipped_dog_skeleton_path
from canis.training.contact_loss import _field
from canis.training.leg_motion_loss import _frames


@functools.lru_cache(maxsize=1)
def _bones() -> tuple[np.ndarray, np.ndarray, torch.Tensor]:
    """(children, parents, offsets (B, 3) in metres) of every bone of the shipped dog."""
    skeleton = Skeleton.from_json(shipped_dog_skeleton_path())
    children = np.flatnonzero(skeleton.parents >= 0)
    offsets = torch.as_tensor(skeleton.offsets_m[children], dtype=torch.float32)
    return children, skeleton.parents[children], offsets


def joint_axes(forward: torch.Tensor, up: torch.Tensor) -> torch.Tensor:
    """(..., 3, 3) rotation matrices, columns (x, y, z), from predicted axes as the runtime
    turns them into rotations (z the forward normalised, y the up made orthogonal to it):
    leg_motion_loss's frames (rows forward, up, forward x up) as columns, x = y x z."""
    forward, up, side = _frames(forward, up).unbind(-2)
    return torch.stack([-side, up, forward], dim=-1)


def bone_loss(y_raw: torch.Tensor, positions_only: bool = False) -> torch.Tensor:
    """Mean over the rows and bones of the squared distance, in cm^2, between each predicted
    bone vector and its parent's predicted rotation applied to the bone's offset; with
    `positions_only` no gradient reaches the rotations."""
    children, parents, offsets = _bones()
    every = range(OUTPUT.block("joints").rows)
    positions = _field(OUTPUT, y_raw, "joints", "position", every)
    axes = joint_axes(
        _field(OUTPUT, y_raw, "joints", "forward", every),
        _field(OUTPUT, y_raw, "joints", "up", every),
    )
    if positions_only:
        axes = axes.detach()
    bone = positions[:, children] - positions[:, parents]
    rotated = torch.einsum("nbij,bj->nbi", axes[:, parents], offsets.to(y_raw.dtype))
    return ((bone - rotated) * 100.0).square().sum(-1).mean()
