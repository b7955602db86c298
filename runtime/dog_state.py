"""The dogs' state: one object of numpy arrays with a leading axis N, one row per dog.

Everything a step carries to the next lives here. Other parts (the NaN rollback, the
hand-back, resets) never write the controller's fields one by one: they take rows
(`rows(idx)`, a copy), change that copy, and put it back (`put_rows(idx, rows)`), so adding a
field to the state is adding it here, and a row that does not fit is an error, not a skip.
The transition player's every frame of playback is the exception: it writes the fields a
transition frame sets in place, as Controller._apply does (copying every row cost a fifth
of its time).
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, fields, is_dataclass

import numpy as np
from canis.runtime.features import LocalPose
from canis.runtime.trajectory import GroundTrajectory


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
    # (runtime.ik.paw_speeds_mps). Paws in PAW_ORDER.
    paw_xz_m: np.ndarray  # (N, 4, 2) world
    paw_speed_mps: np.ndarray  # (N, 4)
    canter_speed: np.ndarray  # (N,) bool: fast enough to canter (readouts.canter_latch)

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
