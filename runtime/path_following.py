"""Path following: the control that keeps a dog on a polyline of [x, z] waypoints.

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

import numpy as np
from canis.runtime.arguments import ANY, checked, finite_number
from canis.runtime.root import wrap_angle_rad, yaw_from_direction
from canis.runtime.trajectory import FUTURE_TIMES_S

PATH_LOOKAHEAD_M = 0.8
MIN_SEGMENT_M = 1e-6  # waypoints closer than this are one point: a segment needs a direction


PATH_FIELDS = {"speed", "waypoints", "loop", "about"}
PATH_FORM = '{"speed": M/S, "waypoints": [[x, z], ...], "loop": false}'


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
