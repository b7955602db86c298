"""`canis run`: a headless run of a model on a terrain, driven by a script of control events
or by a path to follow, with a JSON summary of how it went.

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

`characters` N > 1 steps N dogs, 1.5 m apart, on the same commands: the frame times are the
batch's; the motion figures are dog 0's. Script events and transitions appear in a trace as
instant markers; the trace, the CSV and the JSON carry the machine (canis.runtime.machine).
"""

from __future__ import annotations

import json
import math
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
from canis.runtime.actions import ACTION_NAMES, action_index, api_name
from canis.runtime.arguments import finite_number as _number
from canis.runtime.arguments import random_generator
from canis.runtime.control import follow_path, load_path, load_speed_calibration
from canis.runtime.controller import DT_S, Controller
from canis.runtime.features import ACTIONS
from canis.runtime.inference import MotionModel
from canis.runtime.loop import wait_for_next_tick
from canis.runtime.machine import describe_machine, model_used
from canis.runtime.poses import KEYFRAME_ACTIONS, load_keyframes
from canis.runtime.profiler import Profiler, check_output_path
from canis.runtime.root import rotate_xz, wrap_angle_rad, yaw_from_direction
from canis.runtime.terrain import load_terrain
from canis.runtime.trajectory import ControlState
from canis.runtime.transition import TransitionModel
from canis.runtime.transition_frames import MAX_TRANSITION_FRAMES, MIN_TRANSITION_FRAMES
from canis.tools.motion_metrics import foot_skating_cm

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
CHARACTER_SPACING_M = 1.5
REPORT = "canis run"  # what `canis compare` recognises a run's JSON by


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
        _number(transition["variation"], f"{where} transition 'variation'", low=0.0)
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


def run(
    model_path,
    seconds: float,
    script=None,
    path=None,
    terrain: str = "flat",
    trace=None,
    record=None,
    transition_model_path=None,
    foot_lock: bool = False,
    transition_worker: bool = False,
    export=None,
    characters: int = 1,
    threads: int = 1,
    device: str = "auto",
    csv=None,
    start_xz_m=None,
    start_yaw_rad: float | None = None,
    speed_calibration: bool = False,
    pace: bool = False,
) -> dict:
    """`transition_model_path` None: the shipped RTN, loaded only if the script has
    transition events. `trace`: a Chrome trace; `csv`: per-frame stage times; `threads` and
    `device` are the motion network's ONNX Runtime session's. `export`: a .glb or .bvh path
    for the displayed motion (tools/motion_export.py), checked before the run, written after.
    `start_xz_m`/`start_yaw_rad`: where a script's dog starts (default the origin, facing
    +z); `speed_calibration`: the speed tracking uses the model's own speed curve
    (runtime/control.py), as the demo does. `transition_worker`: the transition
    network's steps run on a thread of their own (Controller(transition_worker=True)).
    `pace`: each frame starts 1/60 s after the one before, as a game's (the time left after a
    step is slept, as a game draws or waits for vsync), instead of back to back; what a
    frame costs then includes nothing of the wait, and the transition worker can run in it."""
    if (script is None) == (path is None):
        raise ValueError("give exactly one of a script or a path")
    if not (isinstance(characters, int) and characters >= 1):
        raise ValueError(f"characters must be a whole number of at least 1, got {characters!r}")
    if not (isinstance(threads, int) and threads >= 1):
        raise ValueError(f"threads must be a whole number of at least 1, got {threads!r}")
    # Output paths are checked before the run, so a typo does not cost the run.
    for output, what in ((trace, "trace"), (csv, "CSV"), (record, "recording")):
        if output is not None:
            check_output_path(output, what)
    if export is not None:
        from canis.tools.motion_export import check_export_path

        check_export_path(export)
    model = MotionModel(model_path, device=device, threads=threads)
    events = load_script(script) if script else None
    transitions = None
    if transition_model_path is not None or (events and needs_transitions(events)):
        transitions = TransitionModel(transition_model_path, threads=threads)
    heightmap = load_terrain(terrain) if terrain != "flat" else None
    profiler = Profiler(keep_trace=trace is not None)
    profiler.process_name = f"canis run {Path(model_path).name}"
    driver = ScriptDriver(events) if script else PathDriver(load_path(path))
    controller = Controller(
        model,
        count=characters,
        tau=PATH_TAU if path else 0.5,
        terrain=heightmap,
        profiler=profiler,
        transition_model=transitions,
        foot_lock=foot_lock,
        speed_calibration=load_speed_calibration(model_path) if speed_calibration else None,
        transition_worker=transition_worker,
    )
    if script and (start_xz_m is not None or start_yaw_rad is not None):
        controller.reset(
            np.asarray(start_xz_m if start_xz_m is not None else (0.0, 0.0), float)[None],
            np.array([start_yaw_rad or 0.0]),
        )
    if path:  # start on the path, facing along it
        start, second = driver.points[0], driver.points[1]
        controller.reset(
            np.repeat(start[None], characters, axis=0),
            np.full(characters, yaw_from_direction(second - start)),
        )
    elif characters > 1:  # side by side
        offsets_x = CHARACTER_SPACING_M * np.arange(characters)
        controller.reset(np.stack([offsets_x, np.zeros(characters)], axis=1))
    paws = controller.skeleton.group("paws")
    frames = int(round(seconds / DT_S))
    paw_positions, contacts, speeds, roots, non_finite = [], [], [], [], 0
    recorded = {"positions": [], "rotations": []}
    next_frame_s = time.perf_counter()
    for frame in range(frames):
        if pace:  # the game's frame period: wait for the tick, then step
            next_frame_s = wait_for_next_tick(next_frame_s)
        # The frame opens before the script is read: a transition it starts is paid here.
        profiler.begin_frame()
        control = driver.control(frame * DT_S, controller)
        controller.step(control)
        profiler.end_frame()  # headless: nothing is drawn, so no render stage is timed
        positions, rotations = controller.display_pose()
        if not np.all(np.isfinite(positions)):
            non_finite += 1
        paw_positions.append(positions[0, paws].astype(np.float64))
        contacts.append(controller.contacts[0].copy())
        speeds.append(float(np.linalg.norm(controller.root_velocity_xz_mps[0])))
        roots.append(controller.root_position_m[0].copy())
        if record is not None or export is not None:
            recorded["positions"].append(positions[0])
            recorded["rotations"].append(rotations[0])
    controller.close()
    paw_positions, contacts = np.array(paw_positions), np.array(contacts)
    ground = (
        heightmap.sample(paw_positions[..., [0, 2]])[0]
        if heightmap is not None
        else np.zeros(paw_positions.shape[:2])
    )
    height = paw_positions[..., 1] - ground
    skating = foot_skating_cm(paw_positions[..., [0, 2]], height)
    depth = np.maximum(-height, 0.0)
    floating = np.maximum(height, 0.0)[contacts]
    used = model_used(model)
    summary = {
        "report": REPORT,
        "model": str(model_path),
        "kind": model.kind,
        "precision": used["precision"],
        "characters": characters,
        "threads": threads,
        "device": model.device,
        "terrain": terrain,
        "foot_lock": foot_lock,
        "transition_worker": transition_worker,
        "paced": pace,
        "seconds": seconds,
        "frames": frames,
        "machine": describe_machine(**used),
        "frame_time": profiler.summary(),
        "mean_speed_mps": float(np.mean(speeds)),
        "paw_penetration_cm": {"mean": float(depth.mean() * 100), "max": float(depth.max() * 100)},
        "paw_floating_in_contact_cm": {
            "mean": float(floating.mean() * 100) if floating.size else 0.0
        },
        "contact_share": float(contacts.mean()),
        # Per paw, DOG_LEG_GROUPS' order (front left, front right, back left, back right):
        # the foot lock holds only paws the runtime calls planted.
        "contact_share_by_paw": [float(share) for share in contacts.mean(axis=0)],
        "foot_skating_cm_per_frame": {
            "all_legs": float(skating.mean()),
            "back_legs": float(skating[:, 2:].mean()),
        },
        "non_finite_frames": non_finite,
        "non_finite_model_outputs": controller.non_finite_events,
    }
    if isinstance(driver, PathDriver):
        summary["path_deviation"] = {
            "position_cm": float(np.mean(driver.position_errors_m)) * 100,
            "angle_deg": float(np.mean(driver.angle_errors_deg)),
        }
    summary["frame_samples_ms"] = profiler.samples()
    if trace is not None:
        profiler.machine = summary["machine"]
        profiler.write_trace(trace)
    if export is not None:
        from canis.tools.motion_export import export_motion

        export_motion(
            export,
            controller.skeleton,
            np.array(recorded["positions"]),
            np.array(recorded["rotations"]),
            fps=1.0 / DT_S,
        )
        summary["export"] = str(export)
    if csv is not None:
        profiler.write_csv(csv)
    if record is not None:
        np.savez_compressed(
            record,
            positions=np.array(recorded["positions"], np.float32),
            rotations=np.array(recorded["rotations"], np.float32),
            roots=np.array(roots, np.float32),
            contacts=contacts,
            joint_names=np.array(controller.skeleton.joint_names),
        )
    return summary
