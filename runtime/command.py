"""What each dog is asked to do, per step: speed tracking (a cruise control on the asked
speed) and the smoothing of the command the trajectory is built from.

Both read and write the dogs' state (runtime/dog_state.py) in place; the controller calls
them in its "input" stage.
"""

from __future__ import annotations

import numpy as np
from canis.runtime.dog_state import DogState
from canis.runtime.features import ACTIONS, FPS
from canis.runtime.root import norm_xz
from canis.runtime.smoothing import damp, damp_angle_rad
from canis.runtime.speed_calibration import SpeedCalibration
from canis.runtime.trajectory import (
    ACTION_HALF_LIFE_S,
    FACING_HALF_LIFE_S,
    VELOCITY_HALF_LIFE_S,
    ControlState,
)

DT_S = 1.0 / FPS
# Speed tracking (track_speed): the gain moves by RATE x relative speed error per second,
# within RANGE; the measured speed is smoothed over a few strides.
SPEED_TRACKING_RATE = 0.4
SPEED_TRACKING_GAIN_RANGE = (0.5, 1.6)
SPEED_TRACKING_MEASURE_HALF_LIFE_S = 0.4
SPEED_TRACKING_MIN_MPS = 0.2
# With a speed calibration (interactive use, e.g. the demo): the feed-forward from the
# network's own speed curve, times the integral gain, times (1 + P x relative error) so an
# overshoot is answered at once; the product stays within RESPONSIVE_RANGE. The measured
# speed is smoothed less, so the dog is within 10% of the asked speed (over 2 s) about 3 s
# after a change (MANN-8 at 0.6-3.3 m/s; tests/test_speed_calibration.py).
SPEED_TRACKING_PROPORTIONAL = 2.0
SPEED_TRACKING_RESPONSIVE_HALF_LIFE_S = 0.25
SPEED_TRACKING_RESPONSIVE_RANGE = (0.25, 2.5)
# Built once (np.eye per frame costs more than the math it feeds).
ACTION_ONE_HOT = np.eye(len(ACTIONS))
MOVE = ACTIONS.index("move")


def track_speed(
    s: DogState, control: ControlState, calibration: SpeedCalibration | None
) -> ControlState:
    """Speed tracking: the network's speed for a given asked speed is monotonic but not the
    identity at walking and pacing speeds, so a slow integral correction scales the asked
    velocity until the measured speed matches it (a cruise control; off with
    Controller(speed_tracking=False)). Updates s.measured_speed_mps and s.speed_gain; returns
    the control with the scaled velocity."""
    asked = norm_xz(control.velocity_mps)
    moving = (asked > SPEED_TRACKING_MIN_MPS) & (control.action == MOVE)
    half_life_s = (
        SPEED_TRACKING_MEASURE_HALF_LIFE_S
        if calibration is None
        else SPEED_TRACKING_RESPONSIVE_HALF_LIFE_S
    )
    speed = norm_xz(s.root_velocity_xz_mps)
    s.measured_speed_mps = damp(s.measured_speed_mps, speed, DT_S, half_life_s)
    error = (asked - s.measured_speed_mps) / np.maximum(asked, 1e-9)
    s.speed_gain = np.where(
        moving,
        np.clip(s.speed_gain + SPEED_TRACKING_RATE * error * DT_S, *SPEED_TRACKING_GAIN_RANGE),
        damp(s.speed_gain, 1.0, DT_S, SPEED_TRACKING_MEASURE_HALF_LIFE_S),
    )  # relax back when not moving
    scale = s.speed_gain
    if calibration is not None:
        feed_forward = calibration.command_for(asked) / np.maximum(asked, 1e-9)
        proportional = np.where(moving, 1.0 + SPEED_TRACKING_PROPORTIONAL * error, 1.0)
        scale = feed_forward * np.clip(scale * proportional, *SPEED_TRACKING_RESPONSIVE_RANGE)
    return ControlState(
        control.velocity_mps * scale[:, None],
        control.facing_yaw_rad,
        control.action,
        control.future_xz_m,
    )


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
