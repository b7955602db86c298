"""The dogs' state: one object of numpy arrays with a leading axis N, one row per dog.

Everything a step carries to the next lives here, the IK's blend weight, the foot locks, the
pose shown and every dog's transition included (the IK, the foot lock and the transition
player work on their rows here, bound by Controller._set_state_object). Other parts (the NaN
rollback, the hand-back, resets) never write the controller's fields one by one: they take
rows (`rows(idx)`, a copy), change that copy, and put it back (`put_rows(idx, rows)`), so adding a
field to the state is adding it here, and a row that does not fit is an error, not a skip.
The transition player's every frame of playback is the exception: it writes the fields a
transition frame sets in place, as pose.advance_root does (copying every row cost a fifth
of its time).

Which dogs an argument names, and resizing the per-dog arrays when dogs come and go.

`characters` everywhere is indices or a boolean mask over the N dogs; a wrong one is a
one-line error naming the call, the argument and N rather than a numpy IndexError.

The state a dog starts from (Controller.__init__, reset and add), and the checks on where
it is asked to start.

Save and restore: a plain, picklable snapshot of every dog (Controller.get_state /
set_state). It holds numpy arrays and numbers only: the model, its sessions, the terrain and
the profiler are not part of it, so a snapshot pickles, deep-copies, and restores into a
controller built with the same model layout and dog count. Restoring it makes the next steps
match an unbroken run bit for bit (tests/test_api.py).

A snapshot carries a SHA-256 over its contents: a corrupted one is refused, naming what is
wrong, before anything in the controller changes.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, fields, is_dataclass

import numpy as np
from canis.runtime.arguments import per_dog, within_world
from canis.runtime.control import SPEED_TRACKING_WINDOW_FRAMES
from canis.runtime.features import (
    ACTION_ONE_HOT,
    ACTIONS,
    FUTURE_OFFSETS_FRAMES,
    LocalPose,
)
from canis.runtime.kinematics import FootLockRows, IkRows
from canis.runtime.look_at import LookAtRows
from canis.runtime.poses import Keyframe, keyframe_pose
from canis.runtime.readouts import GAIT_WINDOW_FRAMES, PAW_ORDER
from canis.runtime.root import from_root_xz, yaw_direction_xz
from canis.runtime.skeleton import Skeleton
from canis.runtime.trajectory import HISTORY_FRAMES, PAST_SAMPLES, PAST_SLICE, GroundTrajectory  # noqa: F401
from canis.runtime.transition import TransitionRows
from canis.runtime.transition_frames import CONTEXT_FRAMES, frame_vector

# DogState's fields of the pose shown, which the controller reads and writes by these names.
DISPLAY_ROWS = (
    "display_positions",
    "display_rotations",
    "previous_display_positions",
    "previous_display_rotations",
    "contacts",
)


@dataclass
class DisplayOffset:
    """What the display adds to the root-frame pose after a hand-back (decaying to zero):
    (N, J, 3) each; only the hips' position is used."""

    positions_m: np.ndarray
    forwards: np.ndarray
    ups: np.ndarray


@dataclass
class DogState:
    root_xz_m: np.ndarray  # (N, 2) world, on the ground plane
    root_yaw_rad: np.ndarray  # (N,)
    root_velocity_xz_mps: np.ndarray  # (N, 2) world
    pose: LocalPose  # (N, J, 3) each, in the root frame: what the network reads next
    action_weights: np.ndarray  # (N, A) the actions the dog is doing
    commanded_velocity_mps: np.ndarray  # (N, 2) the smoothed command, world
    commanded_yaw_rad: np.ndarray  # (N,)
    commanded_actions: np.ndarray  # (N, A)
    speed_gain: np.ndarray  # (N,) speed tracking's correction of the asked speed
    measured_speed_mps: np.ndarray  # (N,) speed tracking's measured speed (a window's mean)
    # (N, SPEED_TRACKING_WINDOW_FRAMES) the speed asked over the same window, newest last
    asked_speed_history_mps: np.ndarray
    phase_rad: np.ndarray  # (N,) PFNN's phase (unused by the other models)
    history: GroundTrajectory  # (N, HISTORY_FRAMES, ...) the path walked, world
    predicted_future: GroundTrajectory  # (N, 6, ...) the network's last future, world
    frame_history: np.ndarray  # (N, CONTEXT_FRAMES, FRAME_SIZE) float32, as the RTN reads
    display_offset: DisplayOffset  # hand-back offsets of the shown pose
    handback_pending: np.ndarray  # (N,) bool: handed back this frame, offsets to start
    expert_weights: np.ndarray | None  # (N, E) MANN's gating output; None for other models
    contact_history: np.ndarray  # (N, GAIT_WINDOW_FRAMES, 4) bool paw contacts, newest last
    # The shown paws (the network's flat-ground pose, before the IK) on the ground plane at
    # the last frame shown, and their speed there: what the contacts are told from
    # (tests/reference_frame.py paw_speeds_mps). Paws in PAW_ORDER.
    paw_xz_m: np.ndarray  # (N, 4, 2) world
    paw_speed_mps: np.ndarray  # (N, 4)
    canter_speed: np.ndarray  # (N,) bool: fast enough to canter (readouts.canter_latch)
    ik: IkRows  # the terrain IK's blend weight (runtime/kinematics.py FullBodyIk.rows)
    foot_lock: FootLockRows  # the foot locks (runtime/kinematics.py FootLock.rows)
    # The pose shown (runtime/pose.py show): world joints (N, J, 3) and (N, J, 4), the last
    # step's (display_pose(alpha) interpolates from them), and the paw contacts (N, 4) bool.
    display_positions: np.ndarray
    display_rotations: np.ndarray
    previous_display_positions: np.ndarray
    previous_display_rotations: np.ndarray
    contacts: np.ndarray
    # (N,) int64 each dog's id (runtime/dog_ids.py): given by the controller, increasing.
    dog_id: np.ndarray
    look_at: LookAtRows  # where each dog looks (runtime/look_at.py): the shown pose only
    # Every dog's transition (runtime/transition_player.py; None without a transition model).
    transitions: TransitionRows | None = None

    def rows(self, idx) -> DogState:
        """A copy of the rows `idx` (indices or a boolean mask) of every array."""
        return _map(lambda a: np.array(a[idx]), self)

    def put_rows(self, idx, other: DogState) -> None:
        """Writes `other` (as rows() gave it) into the rows `idx`, in place."""
        count = len(np.arange(len(self.root_yaw_rad))[idx])  # how many rows idx names
        _put(self, idx, count, other, "state")

    def copy(self) -> DogState:
        return _map(np.copy, self)


@functools.cache
def _field_names(cls: type) -> tuple[str, ...] | None:
    """The dataclass fields of `cls`, None for an array (looked up once per type: a
    transition's every frame takes and puts rows, and dataclasses.fields costs more than the
    copies)."""
    return tuple(f.name for f in fields(cls)) if is_dataclass(cls) else None


def _map(fn, value):
    if value is None:
        return None
    names = _field_names(type(value))
    if names is not None:
        return type(value)(**{name: _map(fn, getattr(value, name)) for name in names})
    return fn(value)


def _put(target, idx, count: int, source, name: str) -> None:
    names = _field_names(type(target))
    if names is not None:
        for field in names:
            _put(getattr(target, field), idx, count, getattr(source, field), f"{name}.{field}")
        return
    if target is None or source is None:
        if target is not None or source is not None:
            raise ValueError(f"{name}: one of the states has it and the other does not")
        return
    rows = (count, *target.shape[1:])
    if rows != np.shape(source):
        raise ValueError(f"{name}: rows of shape {np.shape(source)} do not fit {rows}")
    target[idx] = source


def dog_rows(characters, count: int, caller: str, name: str = "characters") -> np.ndarray:
    """`characters` (indices, or a boolean mask of `count`) as sorted unique indices."""
    array = np.atleast_1d(np.asarray(characters))
    if array.dtype == bool:
        if array.shape != (count,):
            raise ValueError(
                f"{caller}: {name} as a mask must have shape ({count},) for {count} dog(s); "
                f"got {array.shape}"
            )
        return np.flatnonzero(array)
    if array.ndim != 1 or not (array.size == 0 or np.issubdtype(array.dtype, np.integer)):
        raise ValueError(
            f"{caller}: {name} must be dog indices or a boolean mask of {count}; got {characters!r}"
        )
    if np.any((array < 0) | (array >= count)):
        raise ValueError(
            f"{caller}: {name} {array.tolist()} names a dog that does not exist "
            f"(there are {count}, indices 0-{count - 1})"
        )
    if len(np.unique(array)) != len(array):
        raise ValueError(f"{caller}: {name} {array.tolist()} names a dog twice")
    return array.astype(np.int64)


def concat_states(a, b, added: int | None = None):
    """Two DogStates (or their parts) as one, `a`'s dogs first. An array sized lazily (the
    RTN's h and c, None until its first initialisation) that `b`'s `added` dogs lack yet is
    zeros for them."""
    if added is None and hasattr(b, "root_yaw_rad"):
        added = len(b.root_yaw_rad)
    if a is None:
        return None
    if is_dataclass(a):
        parts = {
            f.name: concat_states(getattr(a, f.name), getattr(b, f.name), added) for f in fields(a)
        }
        return type(a)(**parts)
    if b is None:
        b = np.zeros((added, *a.shape[1:]), a.dtype)
    return np.concatenate([a, b])


def transition_rows(player) -> tuple[str, ...]:
    """The transition player's per-dog arrays (TransitionRows), the RTN's recurrent state
    (None until its first initialisation) last."""
    return tuple(f.name for f in fields(TransitionRows))


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
        np.zeros((n, 2))
        if root_xz_m is None
        else within_world(per_dog(root_xz_m, (n, 2), "root_xz_m", caller), caller)
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
        ik=IkRows(np.ones(n)),
        foot_lock=FootLockRows.zeros(n, len(PAW_ORDER)),
        # Drawn by the controller before anything reads them.
        display_positions=np.zeros((n, skeleton.joint_count, 3), np.float32),
        display_rotations=np.zeros((n, skeleton.joint_count, 4), np.float32),
        previous_display_positions=np.zeros((n, skeleton.joint_count, 3), np.float32),
        previous_display_rotations=np.zeros((n, skeleton.joint_count, 4), np.float32),
        contacts=np.zeros((n, len(PAW_ORDER)), dtype=bool),
        dog_id=np.full(n, -1, dtype=np.int64),  # the controller gives the ids
        look_at=LookAtRows.zeros(n),
    )
