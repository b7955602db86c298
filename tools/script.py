"""Control scripts: what `canis run`, `canis demo --headless` and the demo's recordings (F5)
drive a dog with, read and checked whole before anything runs, and played back frame by frame.

Script: a JSON list of events, applied when the clock passes their time `t` (seconds); each
sets the fields it names and the others hold:
  {"t": 0.0, "move": [0, 1], "speed": 1.1, "turn": 0.0, "action": "move"}
`move` is a direction relative to where the dog is asked to face ([x, z]: +z ahead, +x to its
left; [0, 0] stands), `speed` in m/s, `turn` the turn rate of the asked facing in rad/s (left
positive), `facing` an absolute yaw in radians, `action` one of the six actions (idle, move,
jump, sit, beg, lie; "stand", the old name of beg, still loads, deprecated), and
`transition` hands the dog to the transition network: {"to": "sit", "frames": 45} goes to a
keyframe of the library (stand, sit, lie, beg) in that many frames (5-60), after which the
action is the keyframe's (with "variation": V, and "seed": S to replay a take, a sampled
transition: Controller.transition_to's arguments); `foot_lock` and `ik` (true/false) switch
the runtime's foot lock and terrain IK; `reset` (true) stands the dog at the origin again,
the script's state cleared. A recording from the demo (F5) is an object with the events
under "events" and how to replay them: {"model": "MANN-8" or a path, "terrain": "hills",
"start": {"xz_m": [x, z], "yaw_rad": y}, "speed_calibration": true, "seconds": 12.5,
"events": [...]}; canis run uses these unless told otherwise on its command line.
Path: {"speed": 1.1, "waypoints": [[x, z], ...], "loop": false}, followed with tau = 0.5 as in
the paper's path-following test.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
from canis.runtime.actions import ACTION_NAMES, action_index, api_name
from canis.runtime.arguments import finite_number as _number
from canis.runtime.arguments import random_generator
from canis.runtime.control import follow_path
from canis.runtime.controller import DT_S, Controller
from canis.runtime.features import ACTIONS
from canis.runtime.poses import KEYFRAME_ACTIONS, load_keyframes
from canis.runtime.root import rotate_xz, wrap_angle_rad
from canis.runtime.trajectory import ControlState
from canis.runtime.transition import MAX_VARIATION
from canis.runtime.transition_frames import MAX_TRANSITION_FRAMES, MIN_TRANSITION_FRAMES

EVENT_FIELDS = {
    "t",
    "move",
    "speed",
    "turn",
    "facing",
    "action",
    "transition",
    "foot_lock",
    "ik",
    "reset",
}
RECORDING_FIELDS = {"canis_recording", "model", "terrain", "start", "speed_calibration", "seconds"}
PATH_TAU = 0.5


@dataclass
class ScriptState:
    move: np.ndarray = field(default_factory=lambda: np.zeros(2))
    speed_mps: float = 0.0
    turn_radps: float = 0.0
    facing_rad: float = 0.0
    action: str = "idle"


def load_script(path: str | Path) -> list[dict]:
    """The events of a script (or of a demo recording)."""
    return read_script(path)[0]


def read_script(path: str | Path) -> tuple[list[dict], dict]:
    """(events, how to replay them): the second is {} for a plain list of events, else a
    recording's model, terrain, start, speed_calibration and seconds (those it names)."""
    path = Path(path)
    try:
        data = json.loads(path.read_bytes())  # UTF-8, -16 or -32, as JSON allows
    except (OSError, json.JSONDecodeError, UnicodeDecodeError) as error:
        raise ValueError(f"{path}: not a readable JSON script ({error})") from None
    except RecursionError:
        raise ValueError(f"{path}: not a script: JSON nested too deeply to read") from None
    header = {}
    if isinstance(data, dict) and "events" in data:
        header = {k: v for k, v in data.items() if k != "events"}
        _check_recording(header, path)
        data = data["events"]
    return _checked_events(data, path), header


def _check_recording(header: dict, path: Path) -> None:
    unknown = set(header) - RECORDING_FIELDS
    if unknown:
        raise ValueError(
            f"{path}: unknown recording fields {sorted(unknown)}; known: {sorted(RECORDING_FIELDS)}"
        )
    for key in ("model", "terrain"):
        if key in header and not (isinstance(header[key], str) and header[key]):
            raise ValueError(f"{path}: recording '{key}' must be a non-empty string")
    if "start" in header:
        start = header["start"]
        if not (isinstance(start, dict) and set(start) == {"xz_m", "yaw_rad"}):
            raise ValueError(
                f'{path}: recording \'start\' must be {{"xz_m": [x, z], "yaw_rad": y}}'
            )
        xz = start["xz_m"]
        if not (isinstance(xz, list) and len(xz) == 2):
            raise ValueError(f"{path}: recording start 'xz_m' must be [x, z]")
        [_number(v, f"{path}: recording start 'xz_m'") for v in xz]
        _number(start["yaw_rad"], f"{path}: recording start 'yaw_rad'")
    if "speed_calibration" in header and not isinstance(header["speed_calibration"], bool):
        raise ValueError(f"{path}: recording 'speed_calibration' must be true or false")
    if "seconds" in header and not _number(header["seconds"], f"{path}: 'seconds'") >= 0:
        raise ValueError(f"{path}: recording 'seconds' must not be negative")


def _checked_events(events, path: Path) -> list[dict]:
    if not isinstance(events, list) or not events:
        raise ValueError(f"{path}: a script is a non-empty JSON list of events")
    checked, last_t = [], -math.inf
    for i, event in enumerate(events):
        where = f"{path}: event {i}"
        if not isinstance(event, dict) or "t" not in event:
            raise ValueError(f"{where} must be an object with a time 't'")
        unknown = set(event) - EVENT_FIELDS
        if unknown:
            raise ValueError(
                f"{where} has unknown fields {sorted(unknown)}; known: {sorted(EVENT_FIELDS)}"
            )
        t = _number(event["t"], f"{where} 't'")
        if t < last_t:
            raise ValueError(f"{where}: times must not go backwards ({t} after {last_t})")
        last_t = t
        if "move" in event:
            move = event["move"]
            if not (isinstance(move, list) and len(move) == 2):
                raise ValueError(f"{where} 'move' must be [x, z]")
            [_number(v, f"{where} 'move'") for v in move]
        for key in ("speed", "turn", "facing"):
            if key in event:
                _number(event[key], f"{where} '{key}'")
        if "speed" in event and event["speed"] < 0:
            raise ValueError(f"{where} 'speed' must not be negative")
        if "action" in event:
            # The API's names; "stand" (the begging pose, before it was called "beg") still
            # loads, with the runtime's DeprecationWarning, so old scripts and recordings play.
            try:
                event = event | {"action": ACTION_NAMES[action_index(event["action"])]}
            except ValueError:
                raise ValueError(
                    f"{where} has unknown action {event['action']!r}; actions: "
                    f"{', '.join(ACTION_NAMES)}"
                ) from None
        if "transition" in event:
            _check_transition(event["transition"], where)
        for key in ("foot_lock", "ik"):
            if key in event and not isinstance(event[key], bool):
                raise ValueError(f"{where} '{key}' must be true or false")
        if "reset" in event and event["reset"] is not True:
            raise ValueError(f"{where} 'reset' can only be true")
        checked.append(event)
    return checked


def _check_transition(transition, where: str) -> None:
    names = tuple(load_keyframes())
    if not (
        isinstance(transition, dict)
        and {"to", "frames"} <= set(transition) <= {"to", "frames", "variation", "seed"}
    ):
        raise ValueError(
            f'{where} \'transition\' must be {{"to": KEYFRAME, "frames": N}}, optionally with '
            '"variation": V and "seed": S'
        )
    if transition["to"] not in names:
        raise ValueError(
            f"{where} transitions to unknown keyframe {transition['to']!r}; "
            f"keyframes: {', '.join(names)}"
        )
    frames = transition["frames"]
    if not (isinstance(frames, int) and MIN_TRANSITION_FRAMES <= frames <= MAX_TRANSITION_FRAMES):
        raise ValueError(
            f"{where} transition 'frames' must be a whole number from {MIN_TRANSITION_FRAMES} "
            f"to {MAX_TRANSITION_FRAMES}, got {frames!r}"
        )
    if "variation" in transition:
        _number(transition["variation"], f"{where} transition 'variation'", 0.0, MAX_VARIATION)
    random_generator(transition.get("seed"), f"{where} transition 'seed'")


def needs_transitions(events: list[dict]) -> bool:
    return any("transition" in event for event in events)


class ScriptDriver:
    def __init__(self, events: list[dict]):
        self.events = events
        self.next = 0
        self.state = ScriptState()

    def control(self, t_s: float, controller: Controller) -> ControlState:
        s = self.state
        while self.next < len(self.events) and self.events[self.next]["t"] <= t_s + 1e-9:
            event = self.events[self.next]
            self.next += 1
            if controller is not None:  # None: reading a script without a controller
                controller.profiler.instant("script event", **event)
            if event.get("reset"):
                controller.reset()
                s = self.state = ScriptState()
            if "move" in event:
                s.move = np.array(event["move"], dtype=float)
            s.speed_mps = float(event.get("speed", s.speed_mps))
            s.turn_radps = float(event.get("turn", s.turn_radps))
            if "facing" in event:
                s.facing_rad = float(event["facing"])
            s.action = event.get("action", s.action)
            if "foot_lock" in event:
                controller.foot_lock.enabled = event["foot_lock"]
            if "ik" in event:
                controller.ik.enabled = event["ik"]
            if "transition" in event:
                asked = event["transition"]
                to = asked["to"]
                started = controller.transition_to(
                    to,
                    asked["frames"],
                    variation=asked.get("variation", 0.0),
                    seed=asked.get("seed"),
                )
                s.action = api_name(KEYFRAME_ACTIONS[to])
                s.move, s.speed_mps = np.zeros(2), 0.0
                s.facing_rad = float(started.final_yaw_rad[0])
        s.facing_rad = wrap_angle_rad(s.facing_rad + s.turn_radps * DT_S)
        norm = np.linalg.norm(s.move)
        local = s.move / norm if norm > 1e-9 else np.zeros(2)
        # local [x, z] (left, ahead) turned by the asked facing into world [x, z]
        velocity = s.speed_mps * rotate_xz(local[None, None], np.array([s.facing_rad]))[0, 0]
        return for_every_dog(
            ControlState(
                velocity[None], np.array([s.facing_rad]), np.array([action_index(s.action)])
            ),
            1 if controller is None else controller.count,
        )


class PathDriver:
    def __init__(self, spec: dict):
        self.points, self.speed = spec["waypoints"], spec["speed"]
        self.loop = spec["loop"]
        self.position_errors_m, self.angle_errors_deg = [], []

    def control(self, t_s: float, controller: Controller) -> ControlState:
        c = follow_path(
            self.points, self.speed, controller.root_xz_m[0], controller.root_yaw_rad[0], self.loop
        )
        self.position_errors_m.append(c.gap_m)
        self.angle_errors_deg.append(c.angle_deg)
        return for_every_dog(
            ControlState(
                c.velocity_mps[None],
                np.array([c.facing_yaw_rad]),
                np.array([ACTIONS.index("move")]),
                c.future_xz_m[None],
            ),
            controller.count,
        )


def for_every_dog(control: ControlState, count: int) -> ControlState:
    """One dog's control given to all `count` dogs."""
    if count == 1:
        return control
    repeat = lambda a: None if a is None else np.repeat(a, count, axis=0)  # noqa: E731
    return ControlState(*(repeat(a) for a in vars(control).values()))
