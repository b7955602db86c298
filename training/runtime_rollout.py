"""The mocap's state at a training frame, as the runtime holds it (Controller.place): where the
placed-stillness term (training/placed_stillness.py) places the dogs that start from a mocap
standing frame. No second implementation of the contract: the runtime builds every input.

The mocap's state at a frame is read from the dataset's rows alone: the root's world path is
the clip's root updates (y) integrated as the runtime integrates the network's
(pose.advance_root), and the history's samples are each frame's own current sample.
tests/test_runtime_rollout.py checks that a placed dog's first x is the mocap's.
"""

from __future__ import annotations

import dataclasses

import numpy as np
from canis.runtime.features import (
    CURRENT_SAMPLE,
    FPS,
    FUTURE_OFFSETS_FRAMES,
    INPUT,
    OUTPUT,
    LocalPose,
)
from canis.runtime.root import from_root_xz, rotate_xz, wrap_angle_rad
from canis.runtime.trajectory import HISTORY_FRAMES, GroundTrajectory

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
