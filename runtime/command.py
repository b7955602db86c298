"""What each dog is asked to do, per step: speed tracking (a cruise control on the asked
speed) and the smoothing of the command the trajectory is built from.

Both read and write the dogs' state (runtime/state.py) in place; the controller calls
them in its "input" stage.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
from canis.runtime.features import ACTION_ONE_HOT, ACTIONS, FPS
from canis.runtime.root import damp, damp_angle_rad, norm_xz
from canis.runtime.speed_calibration import SpeedCalibration
from canis.runtime.trajectory import (
    ACTION_HALF_LIFE_S,
    FACING_HALF_LIFE_S,
    VELOCITY_HALF_LIFE_S,
    ControlState,
)

if TYPE_CHECKING:  # the state imports this module's window length
    from canis.runtime.state import DogState

DT_S = 1.0 / FPS
# Speed tracking (track_speed) is a PI controller on the dog's speed, measured as the mean
# root speed over the last SPEED_TRACKING_WINDOW_FRAMES frames: long enough to span a stride
# at every gait (a walk's is about 0.6 s), so it does not fight the speed's natural rise and
# fall within a stride; no longer, since the window's lag (half of it) is the loop's delay.
# The error is that window's speed against the speed asked over the same window, relative to
# the asked speed. The asked velocity is scaled by the integral gain times (1 + P x error);
# the proportional part sees the error clipped to +-SPEED_TRACKING_ERROR_CLIP. Both act only
# while the window holds one asked speed (its mean within SPEED_TRACKING_STEADY of the speed
# asked now): while a dog gets going or changes speed, the window mixes the old speed and
# the new, and correcting on it wound the gain up into an overshoot of 10-13% two seconds
# later. Anti-windup besides: the integral moves only while the error is within
# SPEED_TRACKING_INTEGRATE_WITHIN, and the gain is clamped to its range. It is not frozen
# while the scale is at a limit: asked for 0.6 m/s, a dog's gain wound up to 1.2-1.5 while it
# walked slowly stayed there whenever the proportional part had the scale at its floor, and
# it ran up to 26.6% fast (the gain falls to ~1 when it is not frozen). Tuned with
# `canis evaluate speed` (tools/speed_tracking.py; docs/EVALUATION.md, "Speed tracking").
SPEED_TRACKING_WINDOW_FRAMES = 50  # the history's length (features.TRAJECTORY_OFFSETS_FRAMES)
SPEED_TRACKING_PROPORTIONAL = 2.0
SPEED_TRACKING_INTEGRAL_PER_S = 2.0  # gain change per second per relative error
SPEED_TRACKING_ERROR_CLIP = 0.5
SPEED_TRACKING_STEADY = 0.05
SPEED_TRACKING_INTEGRATE_WITHIN = 0.6
SPEED_TRACKING_GAIN_RANGE = (0.4, 2.0)
SPEED_TRACKING_SCALE_RANGE = (0.25, 2.5)
SPEED_TRACKING_RELAX_HALF_LIFE_S = 0.4  # the gain's way back to 1 when not moving
SPEED_TRACKING_MIN_MPS = 0.2
# With a speed calibration (interactive use, e.g. the demo): the feed-forward from the
# network's own speed curve, times the integral gain, times (1 + P x relative error) on the
# speed smoothed with a short half-life so an overshoot is answered at once; the product stays
# within RESPONSIVE_RANGE. The dog is within 10% of the asked speed (over 2 s) about 3 s after
# a change (MANN-8 at 0.6-3.3 m/s; tests/test_speed_calibration.py).
SPEED_TRACKING_RESPONSIVE_RATE = 0.4
SPEED_TRACKING_RESPONSIVE_PROPORTIONAL = 2.0
SPEED_TRACKING_RESPONSIVE_HALF_LIFE_S = 0.25
SPEED_TRACKING_RESPONSIVE_RANGE = (0.25, 2.5)
MOVE = ACTIONS.index("move")


def measured_speed_mps(s: DogState) -> np.ndarray:
    """(N,) each dog's mean root speed over the last SPEED_TRACKING_WINDOW_FRAMES frames (the
    path's length over its time, so a dog on a curve is not read slow)."""
    velocities = s.history.velocities_xz_mps[:, -SPEED_TRACKING_WINDOW_FRAMES:]
    # norm_xz and add.reduce, not linalg.norm and mean: a fifth of the cost, every step.
    return np.add.reduce(norm_xz(velocities), axis=1) / SPEED_TRACKING_WINDOW_FRAMES


def _clip(values: np.ndarray, bounds: tuple[float, float]) -> np.ndarray:
    """np.clip without its dispatch overhead (several microseconds a call on small arrays)."""
    return np.minimum(np.maximum(values, bounds[0]), bounds[1])


def track_speed(
    s: DogState, control: ControlState, calibration: SpeedCalibration | None
) -> ControlState:
    """Speed tracking: the network's speed for a given asked speed is monotonic but not the
    identity (up to ~50% off at walking and pacing speeds), so a PI controller scales the
    asked velocity until the measured speed matches it (a cruise control; off with
    Controller(speed_tracking=False)). With `calibration` (the network's own speed curve) the
    asked speed is first mapped through it (a feed-forward) and a faster-reacting PI
    (responsive_scale) corrects the rest. Updates s.measured_speed_mps and s.speed_gain (the
    integral); returns the control with the scaled velocity."""
    asked = norm_xz(control.velocity_mps)
    moving = (asked > SPEED_TRACKING_MIN_MPS) & (control.action == MOVE)
    history = s.asked_speed_history_mps
    history[:, :-1] = history[:, 1:]
    history[:, -1] = np.where(moving, asked, 0.0)
    if calibration is None:
        scale = window_scale(s, asked, moving)
    else:
        scale = responsive_scale(s, asked, moving, calibration)
    return ControlState(
        control.velocity_mps * scale[:, None],
        control.facing_yaw_rad,
        control.action,
        control.future_xz_m,
    )


def window_scale(s: DogState, asked: np.ndarray, moving: np.ndarray) -> np.ndarray:
    """The PI on the window's speed (the constants above): (N,) the asked speed's scale."""
    s.measured_speed_mps = measured_speed_mps(s)
    reference = np.add.reduce(s.asked_speed_history_mps, axis=1) / SPEED_TRACKING_WINDOW_FRAMES
    error = (reference - s.measured_speed_mps) / np.maximum(asked, 1e-9)
    steady = moving & (np.abs(reference - asked) <= SPEED_TRACKING_STEADY * asked)
    clipped = _clip(error, (-SPEED_TRACKING_ERROR_CLIP, SPEED_TRACKING_ERROR_CLIP))
    wanted = s.speed_gain * np.where(steady, 1.0 + SPEED_TRACKING_PROPORTIONAL * clipped, 1.0)
    # Anti-windup: no integrating on a window of mixed speeds or on an error too large to be
    # the network's bias (a dog held back); the gain itself is clamped to its range.
    integrate = steady & (np.abs(error) < SPEED_TRACKING_INTEGRATE_WITHIN)
    _update_gain(s, moving, integrate, SPEED_TRACKING_INTEGRAL_PER_S * error)
    return _clip(wanted, SPEED_TRACKING_SCALE_RANGE)


def responsive_scale(
    s: DogState, asked: np.ndarray, moving: np.ndarray, calibration: SpeedCalibration
) -> np.ndarray:
    """With the network's speed curve (the demo's tracking, kept as tests/test_speed_calibration
    checks it): the feed-forward times the integral gain times (1 + P x relative error) on
    the speed smoothed with a short half-life, within SPEED_TRACKING_RESPONSIVE_RANGE."""
    speed = norm_xz(s.root_velocity_xz_mps)
    s.measured_speed_mps = damp(
        s.measured_speed_mps, speed, DT_S, SPEED_TRACKING_RESPONSIVE_HALF_LIFE_S
    )
    error = (asked - s.measured_speed_mps) / np.maximum(asked, 1e-9)
    scale = s.speed_gain
    _update_gain(s, moving, moving, SPEED_TRACKING_RESPONSIVE_RATE * error)
    feed_forward = calibration.command_for(asked) / np.maximum(asked, 1e-9)
    proportional = np.where(moving, 1.0 + SPEED_TRACKING_RESPONSIVE_PROPORTIONAL * error, 1.0)
    return feed_forward * _clip(scale * proportional, SPEED_TRACKING_RESPONSIVE_RANGE)


def _update_gain(s: DogState, moving, integrate, rate_per_s: np.ndarray) -> None:
    """The integral: moves by `rate_per_s` where `integrate`, holds where only `moving`, and
    relaxes back to 1 where not moving."""
    integrated = _clip(s.speed_gain + rate_per_s * DT_S, SPEED_TRACKING_GAIN_RANGE)
    held = np.where(
        moving, s.speed_gain, damp(s.speed_gain, 1.0, DT_S, SPEED_TRACKING_RELAX_HALF_LIFE_S)
    )
    s.speed_gain = np.where(integrate, integrated, held)


def smooth_command(
    s: DogState, control: ControlState, held: np.ndarray | None
) -> np.ndarray | None:
    """Eases s's commanded velocity, facing and action blend toward `control`. Dogs `held`
    (in a transition's lead) keep the command they had when it was asked for. Returns the
    path's future positions to follow (control.future_xz_m; NaN rows for held dogs)."""
    before = (s.commanded_velocity_mps, s.commanded_yaw_rad, s.commanded_actions)
    path_future_xz_m = control.future_xz_m
    s.commanded_velocity_mps = damp(
        s.commanded_velocity_mps, control.velocity_mps, DT_S, VELOCITY_HALF_LIFE_S
    )
    s.commanded_yaw_rad = damp_angle_rad(
        s.commanded_yaw_rad, control.facing_yaw_rad, DT_S, FACING_HALF_LIFE_S
    )
    target = ACTION_ONE_HOT[control.action]
    s.commanded_actions = damp(s.commanded_actions, target, DT_S, ACTION_HALF_LIFE_S)
    if held is not None and held.any():
        s.commanded_velocity_mps[held] = before[0][held]
        s.commanded_yaw_rad[held] = before[1][held]
        s.commanded_actions[held] = before[2][held]
        if path_future_xz_m is not None:
            path_future_xz_m = path_future_xz_m.copy()
            path_future_xz_m[held] = np.nan
    return path_future_xz_m
