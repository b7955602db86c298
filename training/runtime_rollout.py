"""Closed-loop fine-tuning through the runtime itself: the trajectory fed back too.

training/closed_loop_training.py feeds the network's own pose back, but keeps the mocap's
trajectory block: in training the network always sees the path the dog really took and the
future it really went on to. In the game the past is the dog's own and the future a blend of
what the player asks with what the network predicted last frame (trajectory.write_trajectory), and
on the mocap's own commands MANN-8 skates 2.8x the mocap in the walk (docs/EVALUATION.md,
replay_quality). Here the rollout is the game's: a batch of dogs in one Controller (ONNX
Runtime running the network exported from the current weights), each placed in the mocap's
state at a training frame (Controller.place) and driven for `frames` steps by its clip's own
commands (clips.clip_commands: the path ahead, speed, facing and action; a share of
the dogs without the path, as from a stick: ClosedLoopConfig.rollout_path_share). Every x the
Controller builds is kept with the mocap's y for the same frame: the pairs the network then
trains on (DAgger's aggregation, the mocap as the expert; starting from the mocap's state is
acRNN's resynchronisation). No second implementation of the contract: the runtime builds
every input.

The mocap's state at a frame is read from the dataset's rows alone: the root's world path is
the clip's root updates (y) integrated as the runtime integrates the network's
(pose.advance_root), and the history's samples are each frame's own current sample.
tests/test_runtime_rollout.py checks that a placed dog's first x is the mocap's.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

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
from canis.training.clips import clip_commands

DT_S = 1.0 / FPS
# Each chain reaches this far back (the history, and one frame more for its first velocity)
# and past its last step (the commands' path ahead).
BACK_FRAMES = HISTORY_FRAMES
AHEAD_FRAMES = max(FUTURE_OFFSETS_FRAMES)
DOGS_PER_CONTROLLER = 512  # bounds the batch one Controller (and ONNX Runtime) holds at once


def predecessors(after: np.ndarray) -> np.ndarray:
    """For every row, the row of its clip's previous frame, or -1 (the inverse of `after`)."""
    before = np.full(len(after), -1)
    has = after >= 0
    before[after[has]] = np.flatnonzero(has)
    return before


def rollout_starts(after: np.ndarray, frames: int) -> np.ndarray:
    """Rows whose clip has BACK_FRAMES frames before them and frames + AHEAD_FRAMES after."""
    from canis.training.closed_loop_training import stretch_starts

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
    from canis.training.closed_loop_training import local_pose_of

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


def roll_out(
    model,
    run: MocapRun,
    x_raw: np.ndarray,
    action_index: np.ndarray,
    frames: int,
    with_path: np.ndarray,
    phase_rad: np.ndarray | None = None,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The runtime driven from each run's start for `frames` steps by its clip's commands
    (`with_path` (N,): which dogs are given the path). Returns x (N, frames, 480) as the
    Controller built it, the dataset row of each step's frame (N, frames): the mocap's y for
    it is the target, and PFNN's phase at each step (N, frames; zeros for other networks)."""
    from canis.runtime.controller import Controller

    count = len(run.rows)
    controller = Controller(model, count=count, speed_tracking=False)
    speed = _current(x_raw[run.rows], "speed")[..., 0]  # (N, T) each frame's desired speed
    action = action_index[run.rows]

    def command(k: int, dog_xz_m, dog_yaw_rad):
        return clip_commands(
            run.root_xz_m, run.yaw_rad, speed, action, np.full(count, BACK_FRAMES + k),
            dog_xz_m, dog_yaw_rad, with_path,
        )  # fmt: skip

    state = mocap_state(controller.state, run, x_raw, phase_rad)
    # The command as already eased in: the start's velocity and facing asked all along.
    first = command(0, state.root_xz_m, state.root_yaw_rad).validated(count)
    state.commanded_velocity_mps = first.velocity_mps
    state.commanded_yaw_rad = first.facing_yaw_rad
    controller.place(state)
    xs = np.empty((count, frames, INPUT.size), np.float32)
    phases = np.zeros((count, frames), np.float32)
    for k in range(frames):
        control = command(k, controller.root_xz_m, controller.root_yaw_rad)
        phases[:, k] = controller.state.phase_rad
        xs[:, k] = controller.step(control)
    controller.close()
    return xs, run.rows[:, BACK_FRAMES : BACK_FRAMES + frames], phases


def nearest_frames(
    xs: np.ndarray, run: MocapRun, x_raw: np.ndarray, x_std: np.ndarray, window: int
) -> np.ndarray:
    """For each rollout step, the row of its clip within `window` frames of the step's own
    whose pose is nearest the dog's (squared distance of x's joint block, standardised by
    `x_std`): the mocap's motion from where the dog's own pose is, rather than from where the
    clip is at that time, which a dog that has fallen out of step with its clip cannot
    follow. (N, frames) rows."""
    joints = INPUT.block_slice("joints")
    scale = 1.0 / np.asarray(x_std, np.float64)[joints]
    count, frames = xs.shape[:2]
    offsets = np.arange(-window, window + 1)
    chosen = np.empty((count, frames), dtype=np.int64)
    dogs = np.arange(count)
    for k in range(frames):
        candidates = run.rows[:, BACK_FRAMES + k + offsets]  # (N, 2W + 1)
        difference = (x_raw[candidates][..., joints] - xs[:, k, None, joints]) * scale
        best = np.einsum("nwj,nwj->nw", difference, difference).argmin(axis=1)
        chosen[:, k] = candidates[dogs, best]
    return chosen


def rollout_pairs(
    model_path: Path,
    x_raw: np.ndarray,
    y_raw: np.ndarray,
    after: np.ndarray,
    action_index: np.ndarray,
    phase_rad: np.ndarray | None,
    dogs: int,
    frames: int,
    path_share: float,
    generator: np.random.Generator,
    match_window: int = 0,
    x_std: np.ndarray | None = None,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """`dogs` rollouts of `frames` steps from random starts, through the exported network at
    `model_path`, `path_share` of them given the clip's path: x (dogs, frames, 480), target
    rows (dogs, frames), phases (dogs, frames). `match_window` > 0: each step's target is the
    nearest_frames row (poses compared under `x_std`), not the frame at the same time."""
    from canis.runtime.inference import MotionModel

    model = MotionModel(model_path, threads=1)
    starts = generator.choice(rollout_starts(after, frames), dogs)
    with_path = generator.random(dogs) < path_share
    parts = []
    for at in range(0, dogs, DOGS_PER_CONTROLLER):
        part = slice(at, at + DOGS_PER_CONTROLLER)
        run = MocapRun.of(y_raw, after, starts[part], frames)
        xs, rows, phases = roll_out(
            model, run, x_raw, action_index, frames, with_path[part], phase_rad
        )
        if match_window > 0:
            rows = nearest_frames(xs, run, x_raw, x_std, match_window)
        parts.append((xs, rows, phases))
    xs, rows, phases = (np.concatenate(p) for p in zip(*parts, strict=True))
    return xs, rows, phases
