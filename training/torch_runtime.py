"""The runtime's frame math written again in torch, so that training can differentiate through
what the runtime does: the pose it shows, the mocap's state as it holds it, and joint axes
interpolated along their rotations (the RTN's step). Tests hold each to the runtime's own
functions (tests/test_shown_pose.py, test_runtime_rollout.py, test_axis_interpolation.py).

The shown pose. The networks predict each joint's position and its rotation (forward and up
axes) separately, and the dog is drawn from the rotations alone: forward kinematics from the
hips (runtime/pose.py), the hips where runtime/pose.next_local_pose keeps them (the predicted
position averaged with the previous one advanced by the predicted velocity). So the
evaluation's skating is a function of the predicted axes, not of the predicted paw positions
the contact term of training/finetune_losses.py measures; where the two disagree, that term can
fall while the shown paws go on sliding. Here both are rebuilt: the hips by next_local_pose's
formula, the other joints by forward kinematics of the axes as the runtime turns them into
rotations (joint_axes; the axes are root-frame orientations, so each joint sits at its parent
plus its parent's rotation applied to its offset).

The mocap's state at a training frame, as the runtime holds it (Controller.place): where the
placed-stillness term (training/placed_stillness.py) places the dogs that start from a mocap
standing frame. It is read from the dataset's rows alone: the root's world path is the clip's
root updates (y) integrated as the runtime integrates the network's (pose.advance_root), and
the history's samples are each frame's own current sample.

Joint axes moved toward a target's along the rotation they stand for (training/rtn.py, residual
"rotations", so inside its exported graph). A joint's forward and up axes interpolated channel
by channel pass through zero when the two rotations are far apart: a forearm whose roll must
turn by half a circle has its up axis shrink, cross the forward and come back reversed, and the
rotation shown from such axes (Gram-Schmidt, forward first) flips in one frame. Where the two
rotations are far apart, each pair becomes a unit quaternion, the two are blended along the
shorter arc (normalised linear interpolation: never through zero, since the shorter arc keeps
the two within 90 degrees in quaternion space), and the blend goes back to unit axes; where
they are close the channels' blend is kept (interpolate_axes says why). The conversions are
those of runtime/rotations.py (quat_from_forward_up, quat_to_forward_up) written again in
torch because they run inside the network's graph.
"""

from __future__ import annotations

import dataclasses
import functools
import math

import numpy as np
import torch
from canis.runtime.features import (
    CURRENT_SAMPLE,
    FPS,
    FUTURE_OFFSETS_FRAMES,
    INPUT,
    JOINT_COUNT,
    OUTPUT,
    LocalPose,
)
from canis.runtime.pose import JOINT_POSITION_BLEND, ROTATION_TRUSTED_AT, ROTATION_TRUSTED_FROM
from canis.runtime.root import from_root_xz, rotate_xz, wrap_angle_rad
from canis.runtime.skeleton import Skeleton, shipped_dog_skeleton_path
from canis.runtime.trajectory import HISTORY_FRAMES, GroundTrajectory
from canis.training.finetune_losses import _field, _frames, yaw_step_rad
from canis.training.finetune_losses import rotate_xz as rotate_xz_torch
from torch.nn.functional import normalize

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


def _into_new_root(vectors: torch.Tensor, y_raw: torch.Tensor) -> torch.Tensor:
    """(B, K, 3) vectors in x's root frame turned about the vertical into y's (its predicted
    turn), as runtime/pose.next_local_pose turns the previous pose."""
    turned_xz = rotate_xz_torch(vectors[..., [0, 2]], -yaw_step_rad(y_raw))
    return torch.stack([turned_xz[..., 0], vectors[..., 1], turned_xz[..., 1]], dim=-1)


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
    step = torch.stack([step_m[:, 0], torch.zeros_like(step_m[:, 0]), step_m[:, 1]], dim=-1)
    moved = _into_new_root(previous - step[:, None], y_raw)
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
    the kept positions and axes (kept_axes), and y's velocities as they are."""
    every = range(JOINT_COUNT)
    fed = x_next_raw.clone()
    forward, up = kept_axes(x_raw, y_raw)
    values = {
        "position": kept_positions_m(x_raw, y_raw, every),
        "forward": forward,
        "up": up,
        "velocity": _field(OUTPUT, y_raw, "joints", "velocity", every),
    }
    for name, value in values.items():
        fed[:, INPUT.indices("joints", name)] = value.reshape(len(fed), -1).to(fed.dtype)
    return fed


def kept_axes(x_raw: torch.Tensor, y_raw: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """(B, J, 3) forward and up axes as runtime/pose.trusted_rotations keeps them: y's where
    they form a frame, eased towards x's (seen from y's root) where they shrink."""
    every = range(JOINT_COUNT)
    forward, up = (_field(OUTPUT, y_raw, "joints", f, every) for f in ("forward", "up"))
    area = torch.linalg.vector_norm(torch.cross(forward, up, dim=-1), dim=-1)
    trust = (area - ROTATION_TRUSTED_FROM) / (ROTATION_TRUSTED_AT - ROTATION_TRUSTED_FROM)
    trust = trust.clamp(0.0, 1.0)[..., None]
    kept = []
    for name, predicted in (("forward", forward), ("up", up)):
        before = _into_new_root(_field(INPUT, x_raw, "joints", name, every), y_raw)
        kept.append(before + trust * (predicted - before))
    return kept[0], kept[1]


def shown_positions_m(
    layout, values: torch.Tensor, hips_m: torch.Tensor, axes_kept=None
) -> torch.Tensor:
    """(B, J, 3) every joint's position in the root frame, drawn from the axes of `values` (x
    or y rows of `layout`), or `axes_kept` (forward, up) where given, by forward kinematics
    from `hips_m` (B, 3)."""
    parents, offsets_m = skeleton_tensors()
    every = range(len(parents))
    forward_up = axes_kept or tuple(
        _field(layout, values, "joints", f, every) for f in ("forward", "up")
    )
    return chain_positions(hips_m, joint_axes(*forward_up), parents, offsets_m)


def shown_step_m(
    x_raw: torch.Tensor, y_raw: torch.Tensor, joints
) -> tuple[torch.Tensor, torch.Tensor]:
    """`joints`' shown positions before (x's pose, its own root frame) and after the step (y's
    pose, in y's root frame): (B, len(joints), 3) each."""
    rows = list(joints)
    before_hips = _field(INPUT, x_raw, "joints", "position", [HIPS])[:, 0]
    before = shown_positions_m(INPUT, x_raw, before_hips)[:, rows]
    after = shown_positions_m(OUTPUT, y_raw, shown_hips_m(x_raw, y_raw), kept_axes(x_raw, y_raw))[
        :, rows
    ]
    return before, after


# The mocap's state at a training frame, as the runtime holds it (the docstring's second part).
DT_S = 1.0 / FPS
# Each chain reaches this far back (the history, and one frame more for its first velocity)
# and past its last step (the commands' path ahead).
BACK_FRAMES = HISTORY_FRAMES
AHEAD_FRAMES = max(FUTURE_OFFSETS_FRAMES)


def predecessors(after: np.ndarray) -> np.ndarray:
    """For every row, the row of its clip's previous frame, or -1 (the inverse of `after`)."""
    before = np.full(len(after), -1)
    has = after >= 0
    before[after[has]] = np.flatnonzero(has)
    return before


def rollout_starts(after: np.ndarray, frames: int) -> np.ndarray:
    """Rows whose clip has BACK_FRAMES frames before them and frames + AHEAD_FRAMES after."""
    from canis.training.finetune_stretches import stretch_starts

    first = stretch_starts(after, chain_length(frames))
    return chains(after, first, BACK_FRAMES + 1)[:, -1]


def chain_length(frames: int) -> int:
    """The frames a MocapRun of `frames` steps spans, its start at column BACK_FRAMES."""
    return BACK_FRAMES + frames + AHEAD_FRAMES + 1


def chains(after: np.ndarray, first: np.ndarray, length: int) -> np.ndarray:
    """(N, length) rows: each `first` row and its clip's following frames."""
    rows = np.empty((len(first), length), dtype=np.int64)
    rows[:, 0] = first
    for k in range(1, length):
        rows[:, k] = after[rows[:, k - 1]]
    if (rows < 0).any():
        raise ValueError("a chain runs past its clip's last frame")
    return rows


@dataclasses.dataclass
class MocapRun:
    """N clips' frames around a start: rows (N, T) with the start at column BACK_FRAMES, and
    the root's world path through them (the root updates integrated from 0 at column 0)."""

    rows: np.ndarray  # (N, T) dataset rows
    root_xz_m: np.ndarray  # (N, T, 2)
    yaw_rad: np.ndarray  # (N, T)

    @classmethod
    def of(cls, y_raw: np.ndarray, after: np.ndarray, starts: np.ndarray, frames: int):
        before = predecessors(after)
        first = starts.copy()
        for _ in range(BACK_FRAMES):
            first = before[first]
        if (first < 0).any():
            raise ValueError(f"a start has fewer than {BACK_FRAMES} frames before it")
        rows = chains(after, first, chain_length(frames))
        velocity = OUTPUT.field(y_raw, "root_update", "velocity")[:, 0].astype(np.float64)
        yaw_velocity = OUTPUT.field(y_raw, "root_update", "yaw_velocity")[:, 0, 0]
        n, t = rows.shape
        root, yaw = np.zeros((n, t, 2)), np.zeros((n, t))
        for k in range(t - 1):  # the root update (tests/reference_frame.py), on the mocap's y
            step = rotate_xz(velocity[rows[:, k]][:, None] * DT_S, yaw[:, k])[:, 0]
            root[:, k + 1] = root[:, k] + step
            yaw[:, k + 1] = wrap_angle_rad(yaw[:, k] + yaw_velocity[rows[:, k]] * DT_S)
        return cls(rows, root, yaw)


def _current(x_raw: np.ndarray, field: str) -> np.ndarray:
    return INPUT.field(x_raw, "trajectory", field)[..., CURRENT_SAMPLE, :].astype(np.float64)


def mocap_state(template, run: MocapRun, x_raw: np.ndarray, phase_rad: np.ndarray | None):
    """The dogs' DogState at each run's start frame (`template`: a controller's state of the
    same dog count, for the fields the mocap does not give)."""
    from canis.training.finetune_stretches import local_pose_of

    b = BACK_FRAMES
    rows, root, yaw = run.rows, run.root_xz_m, run.yaw_rad
    now = rows[:, b]
    past = slice(b - HISTORY_FRAMES + 1, b + 1)
    x_past = x_raw[rows[:, past]]  # (N, HISTORY_FRAMES, 480): each frame's own current sample
    yaw_past = yaw[:, past]

    def to_world(vectors_xz):  # (N, H, 2) each in its own frame's root
        n, h = yaw_past.shape
        return rotate_xz(vectors_xz.reshape(n * h, 1, 2), yaw_past.reshape(-1)).reshape(n, h, 2)

    history = GroundTrajectory(
        root[:, past].copy(),
        to_world(_current(x_past, "direction")),
        to_world(_current(x_past, "velocity")),
        _current(x_past, "speed")[..., 0],
        _current(x_past, "action"),
    )
    x_now = x_raw[now]
    ahead = slice(CURRENT_SAMPLE + 1, None)
    future = {
        name: INPUT.field(x_now, "trajectory", name)[:, ahead].astype(np.float64)
        for name in ("position", "direction", "velocity")
    }
    count = len(now)
    predicted = GroundTrajectory(
        from_root_xz(future["position"], root[:, b], yaw[:, b]),
        rotate_xz(future["direction"], yaw[:, b]),
        rotate_xz(future["velocity"], yaw[:, b]),
        np.zeros((count, len(FUTURE_OFFSETS_FRAMES))),
        np.zeros((count, len(FUTURE_OFFSETS_FRAMES), history.actions.shape[-1])),
    )
    pose: LocalPose = local_pose_of(x_now)
    action = _current(x_now[:, None], "action")[:, 0]
    state = dataclasses.replace(
        template.copy(),
        root_xz_m=root[:, b].copy(),
        root_yaw_rad=yaw[:, b].copy(),
        root_velocity_xz_mps=(root[:, b] - root[:, b - 1]) / DT_S,
        pose=pose,
        action_weights=action.copy(),
        commanded_actions=action.copy(),
        history=history,
        predicted_future=predicted,
    )
    if phase_rad is not None:
        state.phase_rad = phase_rad[now].astype(np.float64)
    return state


# Joint axes moved along their rotation, for the RTN's step (the docstring's third part).
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
