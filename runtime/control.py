"""A motion network's own speed for each asked speed, so the controller can ask for the speed
that makes the dog move at the one the player wants from the first stride (feed-forward)
instead of waiting seconds for the integral speed tracking to find it.

The curve is the model card's closed-loop measurement without speed tracking (the
"untracked" runs straight ahead in `<model>.closed_loop.json`, written beside the ONNX file by
`canis export`'s model card): asked speed -> mean speed over a minute of driving.

What each dog is asked to do, per step: speed tracking (a cruise control on the asked
speed) and the smoothing of the command the trajectory is built from.

Both read and write the dogs' state (runtime/state.py) in place; the controller calls
them in its "input" stage.

Path following: the control that keeps a dog on a polyline of [x, z] waypoints.

The desired trajectory is the path itself (the MANN paper's path test): the future samples
lie where the dog would be on the path at the asked speed, and the asked velocity and facing
aim at a point PATH_LOOKAHEAD_M ahead along it. A path file is
{"speed": 1.1, "waypoints": [[x, z], ...], "loop": false}.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
from canis.runtime.arguments import ANY, checked, finite_number
from canis.runtime.features import ACTION_ONE_HOT, ACTIONS, FPS
from canis.runtime.root import damp, damp_angle_rad, norm_xz, wrap_angle_rad, yaw_from_direction
from canis.runtime.trajectory import (
    ACTION_HALF_LIFE_S,
    FACING_HALF_LIFE_S,
    FUTURE_TIMES_S,
    VELOCITY_HALF_LIFE_S,
    ControlState,
)


@dataclass(frozen=True)
class SpeedCalibration:
    asked_mps: np.ndarray  # (K,) increasing, starting at 0
    measured_mps: np.ndarray  # (K,) non-decreasing, the network's speed for each

    def command_for(self, wanted_mps: np.ndarray) -> np.ndarray:
        """The speed to ask the network for so that it moves at `wanted_mps`; beyond the
        measured range the last ratio holds."""
        wanted = np.asarray(wanted_mps, dtype=np.float64)
        command = np.interp(wanted, self.measured_mps, self.asked_mps)
        top_ratio = self.asked_mps[-1] / max(self.measured_mps[-1], 1e-9)
        return np.where(wanted > self.measured_mps[-1], wanted * top_ratio, command)


def calibration_path(model_path: str | Path) -> Path:
    return Path(model_path).with_suffix(".closed_loop.json")


def load_speed_calibration(model_path: str | Path) -> SpeedCalibration | None:
    """The curve from the model card beside `model_path`, or None when it has none (a model
    without a card is driven by the integral speed tracking alone)."""
    path = calibration_path(model_path)
    if not path.is_file():
        return None
    try:
        runs = json.loads(path.read_text())["runs"]
        points = sorted(
            (float(r["commanded_mps"]), float(r["untracked"]["mean_speed_mps"]))
            for r in runs
            if float(r["turn_rate_degps"]) == 0.0 and r["untracked"]["finite"]
        )
    except (OSError, ValueError, KeyError, TypeError) as error:
        raise ValueError(f"{path}: not a readable closed-loop report ({error})") from None
    if not points:
        return None
    asked = np.array([0.0] + [p[0] for p in points])
    # A network can be slower at a higher asked speed (a gait change); keep the curve
    # invertible by never letting it fall.
    measured = np.maximum.accumulate(np.array([0.0] + [p[1] for p in points]))
    return SpeedCalibration(asked, measured)


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
# it ran up to 26.6% fast (the gain falls to ~1 when it is not frozen). The gains are low
# enough for a network whose speed changes more than in proportion to the asked speed (the
# PFNN alone: 0.28 m/s asked 0.5, 1.05 asked 1.1): at P 2 and I 2 its loop surged between
# 0.5 and 2 m/s every 2 s asked 1.1 (a limit cycle), and MANN-8's rang for 10 s after a start
# at 0.5 m/s. No lower: at P 0.75 MANN-8 asked 2.57 m/s settled into a canter dragging its
# right front paw (0.41 cm/frame of skating against 0.06). Tuned with `canis evaluate speed`
# (evaluation/speed_tracking.py; docs/RESULTS.md, "Speed tracking") on both shipped networks.
SPEED_TRACKING_WINDOW_FRAMES = 50  # the history's length (features.TRAJECTORY_OFFSETS_FRAMES)
SPEED_TRACKING_PROPORTIONAL = 1.0
SPEED_TRACKING_INTEGRAL_PER_S = 1.0  # gain change per second per relative error
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


PATH_LOOKAHEAD_M = 0.8
MIN_SEGMENT_M = 1e-6  # waypoints closer than this are one point: a segment needs a direction


PATH_FIELDS = {"speed", "waypoints", "loop", "about"}
PATH_FORM = '{"speed": M/S, "waypoints": [[x, z], ...], "loop": false}'


MAX_WAYPOINT_M = 1e6  # a thousand kilometres: further is a typo, and squares overflow


def load_path(path: str | Path) -> dict:
    """A path file, checked: a waypoint repeated right after itself (a looped path written
    back to its start, say) is dropped, since a segment of zero length has no direction."""
    path = Path(path)
    try:
        spec = json.loads(path.read_bytes())
    except RecursionError:
        raise ValueError(f"{path}: not a path: JSON nested too deeply to read") from None
    except (OSError, json.JSONDecodeError, UnicodeDecodeError) as error:
        raise ValueError(f"{path}: not a readable JSON path ({error})") from None
    if not isinstance(spec, dict):
        raise ValueError(f"{path}: a path is a JSON object {PATH_FORM}")
    unknown = set(spec) - PATH_FIELDS
    if unknown:
        raise ValueError(f"{path}: unknown keys {sorted(unknown)}; known: {sorted(PATH_FIELDS)}")
    missing = [key for key in ("speed", "waypoints") if key not in spec]
    if missing:
        raise ValueError(f"{path}: missing {missing}; a path is {PATH_FORM}")
    speed = finite_number(spec["speed"], f"{path}: 'speed'")
    if not speed > 0:
        raise ValueError(f"{path}: 'speed' must be positive, got {speed}")
    if not isinstance(spec.get("loop", False), bool):
        raise ValueError(f"{path}: 'loop' must be true or false")
    try:
        waypoints = np.array(spec["waypoints"], dtype=float)
    except (TypeError, ValueError):
        waypoints = np.zeros(0)
    if waypoints.ndim != 2 or waypoints.shape[1] != 2:
        raise ValueError(f"{path}: 'waypoints' must be a list of [x, z] numbers")
    if not np.all(np.isfinite(waypoints)):
        bad = int(np.flatnonzero(~np.all(np.isfinite(waypoints), axis=1))[0])
        raise ValueError(f"{path}: waypoint {bad} is not finite: {spec['waypoints'][bad]}")
    far = np.abs(waypoints).max(axis=1) > MAX_WAYPOINT_M  # 1e308 overflowed at the first step
    if far.any():
        bad = int(np.flatnonzero(far)[0])
        raise ValueError(
            f"{path}: waypoint {bad} {spec['waypoints'][bad]} is more than {MAX_WAYPOINT_M:g} m "
            "from the origin"
        )
    loop = spec.get("loop", False)
    if loop:
        waypoints = np.vstack([waypoints, waypoints[:1]])
    gaps_m = np.linalg.norm(np.diff(waypoints, axis=0), axis=1)
    distinct = np.concatenate([[True], gaps_m >= MIN_SEGMENT_M])
    waypoints = waypoints[distinct]
    if len(waypoints) < 2:
        raise ValueError(f"{path}: 'waypoints' must hold at least two different [x, z] points")
    return {"waypoints": waypoints, "speed": speed, "loop": loop}


def closest_on_path(points: np.ndarray, xz: np.ndarray):
    """(distance along the path, distance from it, tangent) of the closest path point."""
    a, b = points[:-1], points[1:]
    ab = b - a
    _check_segments(points)
    t = np.clip(np.einsum("ij,ij->i", xz - a, ab) / np.einsum("ij,ij->i", ab, ab), 0, 1)
    nearest = a + ab * t[:, None]
    gaps = np.linalg.norm(nearest - xz, axis=1)
    i = int(np.argmin(gaps))
    lengths = np.linalg.norm(ab, axis=1)
    along = lengths[:i].sum() + t[i] * lengths[i]
    return along, float(gaps[i]), ab[i] / lengths[i]


def _check_segments(points: np.ndarray) -> None:
    """A segment of zero length has no direction to follow (and would divide by zero)."""
    empty = np.flatnonzero(np.linalg.norm(np.diff(points, axis=0), axis=1) < MIN_SEGMENT_M)
    if empty.size:
        i = int(empty[0])
        raise ValueError(
            f"path waypoints {i} and {i + 1} are the same point {points[i].tolist()}; "
            "drop one (load_path does)"
        )


def point_at(points: np.ndarray, along: float, loop: bool = False) -> np.ndarray:
    """The point `along` metres along the polyline: clamped to its end, or around again when
    it is a loop (its last point is its first)."""
    lengths = np.linalg.norm(np.diff(points, axis=0), axis=1)
    cumulative = np.concatenate([[0], np.cumsum(lengths)])
    along = along % cumulative[-1] if loop else min(along, cumulative[-1])
    i = min(int(np.searchsorted(cumulative, along, side="right")) - 1, len(lengths) - 1)
    return points[i] + (points[i + 1] - points[i]) * (along - cumulative[i]) / lengths[i]


@dataclass
class PathControl:
    """What keeps one dog on a polyline this frame, and how far off it is."""

    velocity_mps: np.ndarray  # (2,) toward the point PATH_LOOKAHEAD_M along
    facing_yaw_rad: float
    future_xz_m: np.ndarray  # (6, 2) the path where the trajectory samples should be
    gap_m: float  # distance of the root from the path
    angle_deg: float  # between the root's facing and the path's tangent


def follow_path(
    points: np.ndarray,
    speed_mps: float,
    root_xz_m: np.ndarray,
    root_yaw_rad: float,
    loop: bool = False,
) -> PathControl:
    """Control for one dog on a polyline. The desired future samples are the points of the
    path the dog would reach at `speed_mps` from the closest one (the MANN paper's path test:
    the desired trajectory is the path; ControlState.future_xz_m); the asked velocity and
    facing aim at the point PATH_LOOKAHEAD_M along. `points` (K >= 2, 2), `root_xz_m` (2,):
    a bad one is a one-line ValueError naming it."""
    points = checked(points, (ANY, 2), "points", "follow_path", expected=" (K >= 2 [x, z])")
    if len(points) < 2:
        raise ValueError(
            f"follow_path: points must hold at least 2 [x, z] points, got {len(points)}"
        )
    speed_mps = finite_number(speed_mps, "follow_path: speed_mps", low=0.0)
    root_xz_m = checked(root_xz_m, (2,), "root_xz_m", "follow_path", expected=" (one dog's [x, z])")
    root_yaw_rad = finite_number(root_yaw_rad, "follow_path: root_yaw_rad")
    along, gap, tangent = closest_on_path(points, root_xz_m)
    tangent_yaw = yaw_from_direction(tangent)
    angle = abs(math.degrees(wrap_angle_rad(root_yaw_rad - tangent_yaw)))
    heading = point_at(points, along + PATH_LOOKAHEAD_M, loop) - root_xz_m
    heading /= max(np.linalg.norm(heading), 1e-9)
    future = np.array([point_at(points, along + speed_mps * t, loop) for t in FUTURE_TIMES_S])
    return PathControl(speed_mps * heading, float(yaw_from_direction(heading)), future, gap, angle)


# The DogState fields command() writes, before the network runs: Controller.step puts them
# back if a later stage of the frame fails before the network's output is applied, so a
# failed step leaves every dog as it was (tests/test_api.py holds this list to command()).
COMMAND_FIELDS = (
    "commanded_velocity_mps",
    "commanded_yaw_rad",
    "commanded_actions",
    "measured_speed_mps",
    "asked_speed_history_mps",
)


def command(
    s: DogState,
    control: ControlState,
    count: int,
    held: np.ndarray | None,
    speed_tracking: bool,
    calibration: SpeedCalibration | None,
) -> np.ndarray | None:
    """The input stage: `control` checked for `count` dogs, its speed tracked (when
    `speed_tracking`), and smoothed into the dogs' command (`held` (N,): the dogs whose command
    stays as it was, a transition's lead). Returns the future positions of a path being
    followed (N, 6, 2), or None."""
    control = control.validated(count)
    if speed_tracking:
        control = track_speed(s, control, calibration)
    return smooth_command(s, control, held)
