"""The state a dog starts from (Controller.__init__, reset and add), and the checks on where
it is asked to start."""

from __future__ import annotations

import numpy as np
from canis.runtime.arguments import per_dog
from canis.runtime.command import SPEED_TRACKING_WINDOW_FRAMES
from canis.runtime.dog_state import DisplayOffset, DogState
from canis.runtime.features import (
    ACTION_ONE_HOT,
    ACTIONS,
    FUTURE_OFFSETS_FRAMES,
    TRAJECTORY_OFFSETS_FRAMES,
    LocalPose,
)
from canis.runtime.poses import Keyframe, keyframe_pose
from canis.runtime.readouts import GAIT_WINDOW_FRAMES, PAW_ORDER
from canis.runtime.root import from_root_xz, yaw_direction_xz
from canis.runtime.skeleton import Skeleton
from canis.runtime.trajectory import GroundTrajectory
from canis.runtime.transition_frames import CONTEXT_FRAMES, frame_vector

HISTORY_FRAMES = -TRAJECTORY_OFFSETS_FRAMES[0] + 1  # the past samples and the current frame
# Where the trajectory's past samples sit in the history.
PAST_SAMPLES = np.array([o for o in TRAJECTORY_OFFSETS_FRAMES if o < 0]) + HISTORY_FRAMES - 1
# The same samples as a slice (they are evenly spaced): a view, where indexing with
# PAST_SAMPLES builds a copy every frame.
_PAST_STEP = int(PAST_SAMPLES[1] - PAST_SAMPLES[0])
PAST_SLICE = slice(int(PAST_SAMPLES[0]), int(PAST_SAMPLES[-1]) + 1, _PAST_STEP)
assert np.array_equal(np.arange(HISTORY_FRAMES)[PAST_SLICE], PAST_SAMPLES)


def still_state(
    skeleton: Skeleton,
    keyframes: dict[str, Keyframe],
    experts: int | None,
    n: int,
    root_xz_m,
    yaw_rad,
    start_pose: str,
    caller: str,
) -> DogState:
    """The state of `n` dogs standing still at `root_xz_m` (n, 2) facing `yaw_rad` (n,) in the
    keyframe `start_pose`; `experts` sizes the gating readout (None for a network without one).
    A bad argument is a ValueError naming it and `caller`."""
    root_xz_m = (
        np.zeros((n, 2)) if root_xz_m is None else per_dog(root_xz_m, (n, 2), "root_xz_m", caller)
    )
    yaw = np.zeros(n) if yaw_rad is None else per_dog(yaw_rad, (n,), "yaw_rad", caller)
    if start_pose not in keyframes:
        raise ValueError(
            f"{caller}: no start pose {start_pose!r}; the library has {', '.join(keyframes)}"
        )
    still = keyframe_pose(skeleton, keyframes[start_pose])  # in its root frame
    tile = lambda a: np.repeat(a, n, axis=0)  # noqa: E731
    pose = LocalPose(*(tile(a) for a in vars(still).values()))
    idle = np.repeat(ACTION_ONE_HOT[ACTIONS.index("idle")][None], n, axis=0)
    facing = yaw_direction_xz(yaw)

    def standing(frames: int) -> GroundTrajectory:
        """`frames` samples of a dog standing where it is."""
        return GroundTrajectory(
            positions_xz_m=np.repeat(root_xz_m[:, None], frames, axis=1),
            directions_xz=np.repeat(facing[:, None], frames, axis=1),
            velocities_xz_mps=np.zeros((n, frames, 2)),
            speeds_mps=np.zeros((n, frames)),
            actions=np.repeat(idle[:, None], frames, axis=1),
        )

    joints = lambda: np.zeros((n, skeleton.joint_count, 3))  # noqa: E731
    context = frame_vector(np.zeros((n, 2)), np.zeros(n), pose)
    return DogState(
        root_xz_m=root_xz_m,
        root_yaw_rad=yaw,
        root_velocity_xz_mps=np.zeros((n, 2)),
        pose=pose,
        action_weights=idle,
        commanded_velocity_mps=np.zeros((n, 2)),
        commanded_yaw_rad=yaw.copy(),
        commanded_actions=idle.copy(),
        speed_gain=np.ones(n),
        measured_speed_mps=np.zeros(n),
        asked_speed_history_mps=np.zeros((n, SPEED_TRACKING_WINDOW_FRAMES)),
        phase_rad=np.zeros(n),
        history=standing(HISTORY_FRAMES),
        # A standing dog's future, though the first step uses the desired one alone (the
        # controller's _has_prediction): the network has predicted nothing yet.
        predicted_future=standing(len(FUTURE_OFFSETS_FRAMES)),
        # The last CONTEXT_FRAMES frames as the transition network reads them.
        frame_history=np.repeat(context[:, None], CONTEXT_FRAMES, axis=1),
        display_offset=DisplayOffset(joints(), joints(), joints()),
        handback_pending=np.zeros(n, dtype=bool),
        expert_weights=np.zeros((n, experts), np.float32)
        if experts
        else None,  # as the network gives
        contact_history=np.ones((n, GAIT_WINDOW_FRAMES, len(PAW_ORDER)), dtype=bool),
        paw_xz_m=from_root_xz(pose.positions_m[:, skeleton.group("paws"), ::2], root_xz_m, yaw),
        paw_speed_mps=np.zeros((n, len(PAW_ORDER))),
        canter_speed=np.zeros(n, dtype=bool),
    )
