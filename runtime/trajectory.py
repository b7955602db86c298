"""From what the player asks for to the trajectory the network sees.

The command (target velocity, facing and action) is smoothed exponentially (the controller
damps it with runtime/root.py), then the future
samples are extrapolated from the character's current motion toward the smoothed command with
an exponentially-weighted bias (near samples stay close to what the dog does now, far ones
reach what is asked), and finally blended with the trajectory the network itself predicted
last frame: T = tau T_desired + (1 - tau) T_predicted (the MANN paper's runtime control).
Everything here is world space on the ground plane: (x, z) pairs.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
from canis.runtime import _kinematics
from canis.runtime.actions import action_index, action_indices
from canis.runtime.arguments import per_dog
from canis.runtime.features import (
    ACTIONS,
    FPS,
    FUTURE_OFFSETS_FRAMES,
    INPUT,
    TRAJECTORY_OFFSETS_FRAMES,
)
from canis.runtime.root import norm_xz, wrap_angle_rad

if TYPE_CHECKING:  # the state holds GroundTrajectory
    from canis.runtime.state import DogState

FUTURE_TIMES_S = np.array(FUTURE_OFFSETS_FRAMES) / FPS
HORIZON_S = FUTURE_TIMES_S[-1]
# w(t) = 1 - (1 - t / horizon)^BIAS: 2 reaches the command early in the second, which keeps
# the dog responsive without a kink at the current frame.
TRAJECTORY_BIAS = 2.0
VELOCITY_HALF_LIFE_S = 0.15
FACING_HALF_LIFE_S = 0.15
ACTION_HALF_LIFE_S = 0.1
DEFAULT_TAU = 0.5
MAX_SPEED_MPS = 6.0  # a little above the fastest gallop in the data (5.5 m/s)
# Components no larger than this keep a speed (at most sqrt(2) times the larger component,
# 5.66 m/s) well under MAX_SPEED_MPS, whatever the rounding.
_SURELY_SLOW_MPS = 4.0


HISTORY_FRAMES = -TRAJECTORY_OFFSETS_FRAMES[0] + 1  # the past samples and the current frame
# Where the trajectory's past samples sit in the history.
PAST_SAMPLES = np.array([o for o in TRAJECTORY_OFFSETS_FRAMES if o < 0]) + HISTORY_FRAMES - 1
# The same samples as a slice (they are evenly spaced): a view, where indexing with
# PAST_SAMPLES builds a copy every frame.
_PAST_STEP = int(PAST_SAMPLES[1] - PAST_SAMPLES[0])
PAST_SLICE = slice(int(PAST_SAMPLES[0]), int(PAST_SAMPLES[-1]) + 1, _PAST_STEP)
assert np.array_equal(np.arange(HISTORY_FRAMES)[PAST_SLICE], PAST_SAMPLES)


@dataclass
class ControlState:
    """What N characters are asked to do, in world space."""

    velocity_mps: np.ndarray  # (N, 2) target ground velocity (x, z)
    facing_yaw_rad: np.ndarray  # (N,) target facing; yaw 0 faces +z
    action: np.ndarray  # (N,) index into ACTIONS
    # Optional (N, 6, 2) world positions the future samples should lie on (a path to follow,
    # as in the MANN paper's path test: see along_path); a row of NaN leaves that character
    # to the extrapolated trajectory.
    future_xz_m: np.ndarray | None = None

    @classmethod
    def single(
        cls, velocity_mps=(0.0, 0.0), facing_yaw_rad=0.0, action="idle", *, velocity_xz=None
    ) -> ControlState:
        """One dog's control: `velocity_mps` (x, z) in the world, `facing_yaw_rad`, an action.
        (`velocity_xz`, the old name, still works for one more release, with a warning.)"""
        if velocity_xz is not None:
            import warnings

            warnings.warn(
                "ControlState.single(velocity_xz=...) is now velocity_mps=...",
                DeprecationWarning,
                stacklevel=2,
            )
            velocity_mps = velocity_xz
        return cls(
            np.array([velocity_mps], dtype=np.float64),
            np.array([facing_yaw_rad], dtype=np.float64),
            np.array([action_index(action)]),
        )

    def validated(self, count: int) -> ControlState:
        """A copy safe to act on: shapes checked, speeds clamped; non-finite values refused
        (runtime/arguments.py: one-line errors naming the field and the number of dogs)."""
        usual = self._validated_usual(count)
        return usual if usual is not None else self._validated_checked(count)

    def _validated_usual(self, count: int) -> ControlState | None:
        """validated() of the usual per-frame control in a few calls (a fifth of the full
        checks' cost, every frame): float64 arrays of the right shapes, finite, integer
        actions in range, no velocity component above _SURELY_SLOW_MPS, no path. The same
        values as _validated_checked gives them; None for anything else, which the full checks
        then accept or refuse by name (a NaN fails the comparisons here, and goes there)."""
        v, yaw, action = self.velocity_mps, self.facing_yaw_rad, self.action
        if not (
            type(v) is np.ndarray
            and type(yaw) is np.ndarray
            and type(action) is np.ndarray
            and self.future_xz_m is None
            and v.dtype == np.float64
            and yaw.dtype == np.float64
            and action.dtype.kind in "iu"
            and v.shape == (count, 2)
            and yaw.shape == (count,)
            and action.shape == (count,)
        ):
            return None
        if not (
            np.abs(v).max() <= _SURELY_SLOW_MPS
            and math.isfinite(np.add.reduce(yaw))
            and action.min() >= 0
            and action.max() < len(ACTIONS)
        ):
            return None
        return ControlState(v.copy(), wrap_angle_rad(yaw), action.astype(np.int64), None)

    def _validated_checked(self, count: int) -> ControlState:
        """validated() with every check, for any input."""
        caller = "step"
        velocity = per_dog(self.velocity_mps, (count, 2), "ControlState.velocity_mps", caller)
        yaw = per_dog(self.facing_yaw_rad, (count,), "ControlState.facing_yaw_rad", caller)
        try:
            indices = action_indices(self.action)
        except ValueError as error:
            raise ValueError(f"{caller}: ControlState.action: {error}") from None
        action = per_dog(indices, (count,), "ControlState.action", caller, dtype=np.int64)
        if not np.all((action >= 0) & (action < len(ACTIONS))):
            raise ValueError(
                f"{caller}: ControlState.action must index {len(ACTIONS)} actions, "
                f"got {action.tolist()}"
            )
        # Scaled first so that no component exceeds the limit: squaring 1e154 m/s or more in the
        # norm overflows to inf, and the clamp below would then give 0 m/s instead of the limit.
        largest = np.abs(velocity).max(axis=1, keepdims=True)
        if largest.max() <= _SURELY_SLOW_MPS:
            # Both scalings below would be exactly 1 (no speed reaches the limit): a copy
            # gives the same values for fewer calls.
            velocity = velocity.copy()
        else:
            velocity = velocity / np.maximum(1.0, largest / MAX_SPEED_MPS)
            speed = norm_xz(velocity)[:, None]
            velocity = velocity * np.minimum(1.0, MAX_SPEED_MPS / np.maximum(speed, 1e-9))
        future = None
        if self.future_xz_m is not None:
            shape = (count, len(FUTURE_TIMES_S), 2)
            name = "ControlState.future_xz_m"
            future = per_dog(self.future_xz_m, shape, name, caller, finite=False)
            if np.isinf(future).any():  # NaN rows say "no path"; inf is no place
                raise ValueError(f"{caller}: {name} has an infinite value (NaN rows: no path)")
            finite = np.isfinite(future).reshape(count, -1)
            mixed = np.flatnonzero(~(finite.all(axis=1) | ~finite.any(axis=1)))
            if mixed.size:
                raise ValueError(
                    f"{caller}: {name} rows must be all finite or all NaN; dog(s) "
                    f"{mixed.tolist()} mix them"
                )
        return ControlState(velocity, wrap_angle_rad(yaw), action.astype(np.int64), future)


@dataclass
class GroundTrajectory:
    """Trajectory samples in world space on the ground plane: (N, S, ...)."""

    positions_xz_m: np.ndarray  # (N, S, 2)
    directions_xz: np.ndarray  # (N, S, 2) unit facing
    velocities_xz_mps: np.ndarray  # (N, S, 2)
    speeds_mps: np.ndarray  # (N, S) desired speed
    actions: np.ndarray  # (N, S, 6)


def bias_weights(times_s: np.ndarray, bias: float = TRAJECTORY_BIAS) -> np.ndarray:
    return 1.0 - (1.0 - np.clip(times_s / HORIZON_S, 0.0, 1.0)) ** bias


_STEP_S = FUTURE_TIMES_S[0]
# A path's facing is its tangent once a 10-frame step covers this much (0.6 m/s), the
# command's facing where it stands still, a blend between: on the mocap's own paths the
# tangent of slow steps alone raised the shipped network's one-step loss by 28%
# (training/runtime_input_gap.py, docs/RESULTS.md).
PATH_FACING_FULL_STEP_M = 0.1
_TANGENT_FULL_M = (
    PATH_FACING_FULL_STEP_M * np.array([2.0] * (len(FUTURE_TIMES_S) - 1) + [1.0])[None, :, None]
)
_MIDDLE_WEIGHTS = bias_weights(FUTURE_TIMES_S - 0.5 * _STEP_S)[None, :, None]
_SAMPLE_WEIGHTS = bias_weights(FUTURE_TIMES_S)[None, :]


def along_path(
    desired: GroundTrajectory, root_xz_m: np.ndarray, future_xz_m: np.ndarray
) -> GroundTrajectory:
    """The desired future moved onto given world positions (N, S, 2) where a row is finite:
    velocities from the spacing of consecutive samples (the first from the root), facings along
    the mean of the steps into and out of each sample where the path moves on, turning toward
    the command's facing where it barely does (PATH_FACING_FULL_STEP_M). Speeds and actions
    stay the command's."""
    points = np.concatenate([root_xz_m[:, None], future_xz_m], axis=1)
    steps = np.diff(points, axis=1)
    tangents = steps.copy()
    tangents[:, :-1] += steps[:, 1:]
    length = norm_xz(tangents)[..., None]
    along = tangents / np.maximum(length, 1e-9)
    # The tangent of a path that barely moves is the sway of its points, not a heading: a dog
    # slowing to a stop on a path (or a clip's root standing still) would be asked to face
    # every which way. Its weight grows with the steps' length (the two steps summed; the
    # last sample's tangent is its one step).
    weight = np.clip(length / _TANGENT_FULL_M, 0.0, 1.0)
    directions = weight * along + (1.0 - weight) * desired.directions_xz
    directions /= np.maximum(norm_xz(directions)[..., None], 1e-9)
    follows = np.all(np.isfinite(future_xz_m), axis=(1, 2))[:, None, None]
    return GroundTrajectory(
        np.where(follows, future_xz_m, desired.positions_xz_m),
        np.where(follows, directions, desired.directions_xz),
        np.where(follows, steps / _STEP_S, desired.velocities_xz_mps),
        desired.speeds_mps,
        desired.actions,
    )


# The per-frame trajectory math in the native core (native/src/root_motion.cpp): extrapolate,
# and the trajectory rows of x, each one native call; tests/reference_frame.py holds their
# numpy definition, tests/test_native_frame.py the two together.
_TRAJECTORY = INPUT.block("trajectory")
# Where each field sits in a trajectory row of x, in the native call's order.
_FIELD_OFFSETS = np.array(
    [
        _TRAJECTORY.field_slice(name).start
        for name in ("position", "direction", "velocity", "speed", "action")
    ],
    dtype=np.int32,
)
assert INPUT.block_slice("trajectory").start == 0, "the native call writes x's first rows"
assert _TRAJECTORY.rows == PAST_SAMPLES.size + 1 + len(FUTURE_TIMES_S)
_MIDDLE = np.ascontiguousarray(_MIDDLE_WEIGHTS.ravel())
_SAMPLE = np.ascontiguousarray(_SAMPLE_WEIGHTS.ravel())
# The native calls take any array as an input (the binding makes a contiguous float64 copy
# when it must, which numpy's views of y need) and refuse an output that it would have to
# copy, so that nothing is written into a temporary and lost.


def extrapolate(
    root_xz_m,
    root_velocity_xz_mps,
    root_yaw_rad,
    action_weights,
    commanded_velocity_xz_mps,
    commanded_yaw_rad,
    commanded_actions,
) -> GroundTrajectory:
    """trajectory.extrapolate, natively: the desired future samples (N, 6)."""
    n, samples, actions = len(root_yaw_rad), len(_SAMPLE), action_weights.shape[1]
    out = GroundTrajectory(
        np.empty((n, samples, 2)),
        np.empty((n, samples, 2)),
        np.empty((n, samples, 2)),
        np.empty((n, samples)),
        np.empty((n, samples, actions)),
    )
    _kinematics.extrapolate_trajectory(
        root_xz_m,
        root_velocity_xz_mps,
        root_yaw_rad,
        action_weights,
        commanded_velocity_xz_mps,
        commanded_yaw_rad,
        commanded_actions,
        _MIDDLE,
        _SAMPLE,
        _STEP_S,
        out.positions_xz_m,
        out.directions_xz,
        out.velocities_xz_mps,
        out.speeds_mps,
        out.actions,
    )
    return out


def write_trajectory_rows(
    state: DogState,
    desired: GroundTrajectory,
    predicted: GroundTrajectory | None,
    tau: float,
    x: np.ndarray,
) -> None:
    """The trajectory rows of x (N, 480), as tests/reference_frame.py's trajectory and
    features.write_input make them: the past from the history, now, and `desired` blended
    with `predicted` by tau, in the root frame."""
    if predicted is None or tau >= 1.0:  # the reference blend's "desired alone"
        predicted, tau = desired, 1.0
    _kinematics.trajectory_input(
        PAST_SAMPLES.size,
        PAST_SLICE.start,
        PAST_SLICE.step,
        *_history(state),
        state.root_xz_m,
        state.root_yaw_rad,
        state.root_velocity_xz_mps,
        state.action_weights,
        desired.positions_xz_m,
        desired.directions_xz,
        desired.velocities_xz_mps,
        desired.speeds_mps,
        desired.actions,
        predicted.positions_xz_m,
        predicted.directions_xz,
        predicted.velocities_xz_mps,
        float(tau),
        x,
        _FIELD_OFFSETS,
        _TRAJECTORY.width,
    )


# The history's fields in GroundTrajectory's order, which is the native calls' order.
_HISTORY_FIELDS = tuple(field.name for field in dataclasses.fields(GroundTrajectory))


def _history(state: DogState) -> tuple:
    return tuple(getattr(state.history, name) for name in _HISTORY_FIELDS)


def desired_future(
    s: DogState, path_future_xz_m: np.ndarray | None, extrapolate_with=extrapolate
) -> GroundTrajectory:
    """The desired future: extrapolated toward the command by `extrapolate_with` (the native
    extrapolate; tests/reference_frame.py passes its numpy definition), moved onto the path
    being followed, if any."""
    desired = extrapolate_with(
        s.root_xz_m,
        s.root_velocity_xz_mps,
        s.root_yaw_rad,
        s.action_weights,
        s.commanded_velocity_mps,
        s.commanded_yaw_rad,
        s.commanded_actions,
    )
    if path_future_xz_m is not None:
        desired = along_path(desired, s.root_xz_m, path_future_xz_m)
    return desired


def write_trajectory(
    s: DogState,
    path_future_xz_m: np.ndarray | None,
    predicted: GroundTrajectory | None,
    tau: float,
    x: np.ndarray,
) -> GroundTrajectory:
    """The trajectory stage: the desired future (returned), and x's trajectory rows from the
    history, now, and the desired future blended with `predicted` by tau."""
    desired = desired_future(s, path_future_xz_m)
    write_trajectory_rows(s, desired, predicted, tau, x)
    return desired
