"""`canis run`: a headless run of a model on a terrain, driven by a script of control events
or by a path to follow (tools/script.py reads and plays both), with a JSON summary of how it
went.

`characters` N > 1 steps N dogs, 1.5 m apart, on the same commands: the frame times are the
batch's; the motion figures are dog 0's. Script events and transitions appear in a trace as
instant markers; the trace, the CSV and the JSON carry the machine (canis.runtime.machine).
"""

from __future__ import annotations

import time
from pathlib import Path

import numpy as np
from canis.runtime.control import load_path, load_speed_calibration
from canis.runtime.controller import DT_S, Controller
from canis.runtime.inference import MotionModel
from canis.runtime.loop import wait_for_next_tick
from canis.runtime.machine import describe_machine, model_used
from canis.runtime.motion_metrics import foot_skating_cm
from canis.runtime.profiler import Profiler, check_output_path
from canis.runtime.root import yaw_from_direction
from canis.runtime.terrain import load_terrain
from canis.runtime.transition import TransitionModel
from canis.tools.script import PATH_TAU, PathDriver, ScriptDriver, load_script, needs_transitions

CHARACTER_SPACING_M = 1.5
REPORT = "canis run"  # what `canis compare` recognises a run's JSON by


class MotionTally:
    """The run's motion figures, taken frame by frame (dog 0's paws), so that a long run's
    memory stays flat: skating (the MANN paper's measure), paw penetration and floating, the
    paws' contact share, the mean speed, and the frames whose displayed pose is not finite."""

    def __init__(self, heightmap):
        self.heightmap = heightmap
        self.frames = self.non_finite = 0
        self.previous_paws_m = None
        self.skating_cm = np.zeros(4)  # sums per paw over the frames after the first
        self.depth_sum_m = self.depth_max_m = self.floating_sum_m = 0.0
        self.floating_count = 0
        self.contacts = np.zeros(4)
        self.speed_sum_mps = 0.0

    def add(self, positions_m, paws_m, contacts, speed_mps: float) -> None:
        self.frames += 1
        self.non_finite += int(not np.all(np.isfinite(positions_m)))
        ground = (
            self.heightmap.sample(paws_m[:, [0, 2]])[0]
            if self.heightmap is not None
            else np.zeros(len(paws_m))
        )
        height = paws_m[:, 1] - ground
        if self.previous_paws_m is not None:
            xz = np.stack([self.previous_paws_m[:, [0, 2]], paws_m[:, [0, 2]]])
            self.skating_cm += foot_skating_cm(xz, np.stack([height, height]))[0]
        self.previous_paws_m = paws_m
        depth = np.maximum(-height, 0.0)
        self.depth_sum_m += float(depth.sum())
        self.depth_max_m = max(self.depth_max_m, float(depth.max()))
        floating = np.maximum(height, 0.0)[contacts]
        self.floating_sum_m += float(floating.sum())
        self.floating_count += int(floating.size)
        self.contacts += contacts
        self.speed_sum_mps += speed_mps

    def summary(self) -> dict:
        steps = max(self.frames - 1, 1)
        return {
            "mean_speed_mps": self.speed_sum_mps / self.frames,
            "paw_penetration_cm": {
                "mean": self.depth_sum_m / (4 * self.frames) * 100,
                "max": self.depth_max_m * 100,
            },
            "paw_floating_in_contact_cm": {
                "mean": self.floating_sum_m / self.floating_count * 100
                if self.floating_count
                else 0.0
            },
            "contact_share": float(self.contacts.sum() / (4 * self.frames)),
            # Per paw, DOG_LEG_GROUPS' order (front left, front right, back left, back right):
            # the foot lock holds only paws the runtime calls planted.
            "contact_share_by_paw": [float(c / self.frames) for c in self.contacts],
            "foot_skating_cm_per_frame": {
                "all_legs": float(self.skating_cm.sum() / (4 * steps)),
                "back_legs": float(self.skating_cm[2:].sum() / (2 * steps)),
            },
            "non_finite_frames": self.non_finite,
        }


class SteadySpeed:
    """The speed on the steady parts of a run (dog 0): the asked speed held unchanged for
    STEADY_AFTER_S and on, its paws' mean position's path over them (sampled every
    STEADY_SAMPLE_FRAMES, a stride or so, so that the paws' own stepping does not count) over
    the time, beside the asked speed."""

    def __init__(self):
        self.asked_mps, self.centres_xz_m = [], []

    def add(self, asked_mps: float, paws_m: np.ndarray) -> None:
        self.asked_mps.append(asked_mps)
        self.centres_xz_m.append(paws_m[:, [0, 2]].mean(axis=0))

    def summary(self) -> dict:
        asked, centres = np.array(self.asked_mps), np.array(self.centres_xz_m)
        parts, start = [], 0
        for end in [*np.flatnonzero(np.abs(np.diff(asked)) > 1e-9) + 1, len(asked)]:
            first = start + int(round(STEADY_AFTER_S / DT_S))
            samples = np.arange(first, end, STEADY_SAMPLE_FRAMES)
            if asked[start] > 0 and len(samples) >= 3:
                steps = np.linalg.norm(np.diff(centres[samples], axis=0), axis=1)
                measured = steps.sum() / ((samples[-1] - samples[0]) * DT_S)
                parts.append(
                    {
                        "from_s": first * DT_S,
                        "to_s": samples[-1] * DT_S,
                        "asked_mps": float(asked[start]),
                        "measured_mps": float(measured),
                        "error": float(measured / asked[start] - 1.0),
                    }
                )
            start = end
        worst = max((abs(p["error"]) for p in parts), default=None)
        return {"parts": parts, "worst_error": worst}


STEADY_AFTER_S = 3.0
STEADY_SAMPLE_FRAMES = 30


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
    rig=None,
    mapping=None,
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
    frame costs then includes nothing of the wait, and the transition worker can run in it.
    `rig`: a skinned glTF of a dog the motion is retargeted onto (runtime/retarget.py), with a
    `mapping` file or None; the motion figures and the export are then the rig's, on its
    paws and in its world, and the controller itself runs on flat ground in the network's."""
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
    loaded_rig = None
    if rig is not None:  # checked before the model loads: a bad rig costs nothing
        from canis.runtime.retarget import RigDogs
        from canis.runtime.rig import Rig

        if path is not None:
            raise ValueError("--rig drives a --script; a --path run is the built-in dog's")
        loaded_rig = Rig.load(rig, mapping=mapping)
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
        terrain=None if loaded_rig else heightmap,
        profiler=profiler,
        transition_model=transitions,
        foot_lock=foot_lock and not loaded_rig,
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
    shown = controller
    if loaded_rig is not None:  # after the resets: it starts from where they put the dogs
        shown = RigDogs(controller, loaded_rig, terrain=heightmap, foot_lock=foot_lock)
    skeleton = loaded_rig.skeleton if loaded_rig else controller.skeleton
    paws = skeleton.group("paws")
    frames = int(round(seconds / DT_S))
    steady = SteadySpeed()
    tally = MotionTally(heightmap)
    recorded = {"positions": [], "rotations": [], "roots": [], "contacts": []}
    keep = record is not None or export is not None
    next_frame_s = time.perf_counter()
    for frame in range(frames):
        if pace:  # the game's frame period: wait for the tick, then step
            next_frame_s = wait_for_next_tick(next_frame_s)
        # The frame opens before the script is read: a transition it starts is paid here.
        profiler.begin_frame()
        control = driver.control(frame * DT_S, controller)
        if shown is not controller:
            asked = control
            control = shown.control(control)
        controller.step(control)
        if shown is not controller:
            with profiler.stage("retarget"):
                shown.update()
        else:
            asked = control
        profiler.end_frame()  # headless: nothing is drawn, so no render stage is timed
        positions, rotations = shown.display_pose()
        paws_m = positions[0, paws].astype(np.float64)
        tally.add(
            positions,
            paws_m,
            shown.contacts[0],
            float(np.linalg.norm(shown.root_velocity_xz_mps[0])),
        )
        steady.add(float(np.linalg.norm(np.reshape(asked.velocity_mps, (-1, 2))[0])), paws_m)
        if keep:  # only a recording or an export keeps every frame
            recorded["positions"].append(positions[0])
            recorded["rotations"].append(rotations[0])
            root = controller.root_position_m[0].copy()
            if loaded_rig is not None:  # the rig's world: the network's scaled
                root[[0, 2]] *= shown.stride_scale
            recorded["roots"].append(root)
            recorded["contacts"].append(shown.contacts[0].copy())
    controller.close()
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
        **tally.summary(),
        "steady_speed": steady.summary(),
        "non_finite_model_outputs": controller.non_finite_events,
    }
    if loaded_rig is not None:
        summary["rig"] = {
            "path": str(rig),
            "joints": loaded_rig.skeleton.joint_count,
            "stride_scale": shown.stride_scale,
            "leg_lengths_m": loaded_rig.leg_lengths_m.tolist(),
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
            skeleton,
            np.array(recorded["positions"]),
            np.array(recorded["rotations"]),
            fps=1.0 / DT_S,
            rig=loaded_rig,
        )
        summary["export"] = str(export)
    if csv is not None:
        profiler.write_csv(csv)
    if record is not None:
        np.savez_compressed(
            record,
            positions=np.array(recorded["positions"], np.float32),
            rotations=np.array(recorded["rotations"], np.float32),
            roots=np.array(recorded["roots"], np.float32),
            contacts=np.array(recorded["contacts"]),
            joint_names=np.array(skeleton.joint_names),
        )
    return summary
