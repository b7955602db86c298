"""`canis evaluate transitions`: the exported RTN against interpolation and zero velocity on
the held-out clips, at the transition lengths RMI reports (5, 15, 30, 45 frames), by L2P, L2Q
and NPSS (training/transition_metrics.py). The RTN runs through the runtime's ONNX code with the
target blend on, as the game uses it. Windows start every WINDOW_STRIDE frames of every held-out
clip (as captured and mirrored).
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import numpy as np
from canis.runtime.skeleton import Skeleton, shipped_dog_skeleton_path
from canis.runtime.transition import TransitionModel
from canis.runtime.transition_frames import CONTEXT_FRAMES, target_blend
from canis.tools.doc_sections import replace_section
from canis.training.train_rtn import windows
from canis.training.transition_data import TransitionData
from canis.training.transition_data import load as load_transitions
from canis.training.transition_metrics import global_pose, interpolation, l2p, l2q, npss
from canis.training.upsample import error_report, upsample_frames

LENGTHS = (5, 15, 30, 45)
WINDOW_STRIDE = 20
UPSAMPLE_KEEP_EVERY = 60
BATCH = 256
STATISTICS_WINDOWS = 2048


def position_std(data: TransitionData, skeleton: Skeleton, seed: int = 0) -> np.ndarray:
    """Per joint-coordinate standard deviation (J, 3) of global positions in the target frame
    over training windows of every evaluated length (L2P's standardisation)."""
    rng = np.random.default_rng(seed)
    samples = []
    clips = data.clips(validation=False)
    for length in LENGTHS:
        starts = rng.choice(data.window_starts(clips, length), STATISTICS_WINDOWS // len(LENGTHS))
        _, _, _, (frames, placements) = windows(data, starts, length)
        positions, _ = global_pose(
            skeleton, frames.flatten(0, 1).numpy(), placements.flatten(0, 1).numpy()
        )
        samples.append(positions)
    return np.concatenate(samples).std(axis=0)


def _truth_and_methods(models: dict, data, skeleton, starts, length):
    """The truth and every method's poses; `models` maps result names to RTNs."""
    context, context_placements, target, (frames, placements) = windows(data, starts, length)
    context, context_placements = context.numpy(), context_placements.numpy()
    target, frames, placements = target.numpy(), frames.numpy(), placements.numpy()
    b = len(starts)

    def pose(f, p):  # (B, P, D), (B, P, 4) -> (B, P, J, 3), (B, P, J, 4)
        positions, rotations = global_pose(
            skeleton, f.reshape(b * length, -1), p.reshape(b * length, 4)
        )
        return positions.reshape(b, length, -1, 3), rotations.reshape(b, length, -1, 4)

    truth = pose(frames[:, :length], placements[:, :length])
    methods = {}
    for name, model in models.items():
        generated, placed = model.generate(context, context_placements, target, length)
        generated, placed = target_blend(generated, placed, target)
        methods[name] = pose(generated[:, :length], placed[:, :length])
    last, last_placement = context[:, -1], context_placements[:, -1]
    methods["interp"] = interpolation(skeleton, last, last_placement, target, length)
    methods["zerovel"] = pose(
        np.repeat(last[:, None], length, axis=1), np.repeat(last_placement[:, None], length, axis=1)
    )
    return truth, methods


def evaluate(
    model_path: Path | None,
    data_path: Path,
    stride=WINDOW_STRIDE,
    motion_model_path=None,
    others: dict[str, Path] | None = None,
) -> dict:
    """`motion_model_path`: a MANN whose hand-back is measured too (skipped when None);
    `others`: more RTNs by name (e.g. another residual) that join the tables."""
    started = time.perf_counter()
    model = TransitionModel(model_path)
    models = {"rtn": model} | {n: TransitionModel(p) for n, p in (others or {}).items()}
    data = load_transitions(data_path)
    skeleton = Skeleton.from_json(shipped_dog_skeleton_path())
    std = position_std(data, skeleton)
    clips = data.clips(validation=True)
    results: dict = {m: {"l2p": {}, "l2q": {}, "npss": {}} for m in [*models, "interp", "zerovel"]}
    windows_used = {}
    for length in LENGTHS:
        starts = data.window_starts(clips, length)[::stride]
        windows_used[str(length)] = int(len(starts))
        sums = {m: {"l2p": 0.0, "l2q": 0.0, "npss": 0.0} for m in results}
        for first in range(0, len(starts), BATCH):
            chunk = starts[first : first + BATCH]
            (true_positions, true_rotations), methods = _truth_and_methods(
                models, data, skeleton, chunk, length
            )
            for name, (positions, rotations) in methods.items():
                weight = len(chunk) / len(starts)
                sums[name]["l2p"] += weight * l2p(positions, true_positions, std)
                sums[name]["l2q"] += weight * l2q(rotations, true_rotations)
                sums[name]["npss"] += weight * npss(rotations, true_rotations)
        for name, metrics in sums.items():
            for metric, value in metrics.items():
                results[name][metric][str(length)] = round(value, 4)
    results["upsample"] = upsample_report(model, data, skeleton, clips, std)
    if motion_model_path is not None:
        results |= handback_and_postures(model, Path(motion_model_path))
    results["setup"] = {
        "model": str(model.step_path),
        "others": {n: str(m.step_path) for n, m in models.items() if n != "rtn"},
        "residuals": {n: m.metadata.get("canis.residual", "previous") for n, m in models.items()},
        "parameter_bytes": int(model.metadata.get("canis.parameter_bytes", 0)),
        "held_out_clips": [str(n) for n in data["clip_names"][clips]],
        "windows": windows_used,
        "window_stride_frames": stride,
        "context_frames": CONTEXT_FRAMES,
        "seconds": round(time.perf_counter() - started, 1),
    }
    return results


def handback_and_postures(model: TransitionModel, motion_model_path: Path) -> dict:
    """The hand-back table and the postures asked while moving (no mocap needed: `canis
    evaluate transitions --handback-only` rewrites only their section)."""
    return {
        "handback": handback_report(model, motion_model_path),
        "postures": postures_report(model, motion_model_path),
        "getting_up": getting_up_report(model, motion_model_path),
    }


def upsample_report(model, data, skeleton, clips, std, keep_every=UPSAMPLE_KEEP_EVERY) -> dict:
    """Temporal super-resolution of every held-out clip (`canis upsample`'s chaining): mean
    L2P and joint error over the regenerated frames, weighted by their count."""
    totals, count = {"l2p": 0.0, "joint_error_cm": 0.0}, 0
    for clip in clips:
        a, b = data["clip_ranges"][clip]
        frames, xz, yaw = data["frames"][a:b], data["root_xz_m"][a:b], data["root_yaw_rad"][a:b]
        xz, yaw = xz.astype(np.float64), yaw.astype(np.float64)
        result = upsample_frames(model, frames, xz, yaw, keep_every)
        n = int(result.generated.sum())
        if n:
            report = error_report(skeleton, frames, xz, yaw, result, std)
            for key in totals:
                totals[key] += report[key] * n
            count += n
    return {"keep_every": keep_every, "regenerated_frames": count} | {
        k: round(v / max(count, 1), 4) for k, v in totals.items()
    }


HANDBACK_STARTS = {
    "standing": 0.0,
    "walking 0.8 m/s": 0.8,
    "trotting 1.9 m/s": 1.9,
    "cantering 3.3 m/s": 3.3,
}
HANDBACK_FRAMES = 30
WATCH_FRAMES = 3


def posture_controller(motion, terrain, transition_model, calibration):
    """One dog set up as the demo drives it (foot lock, the model's speed curve), for the
    postures-asked-while-moving measurements."""
    from canis.runtime.controller import Controller

    return Controller(
        motion,
        terrain=terrain,
        transition_model=transition_model,
        foot_lock=True,
        speed_calibration=calibration,
    )


def _still_or_moving(speed_mps: float):
    """The control of a dog moving straight ahead (+z) at `speed_mps`, or standing."""
    from canis.runtime.actions import action_index
    from canis.runtime.trajectory import ControlState

    action = action_index("move" if speed_mps else "idle")
    return ControlState(np.array([[0.0, speed_mps]]), np.zeros(1), np.array([action]))


def _held(target: str, yaw_rad):
    """The control that holds keyframe `target`'s action facing `yaw_rad`, standing still."""
    from canis.runtime.features import ACTIONS
    from canis.runtime.poses import KEYFRAME_ACTIONS
    from canis.runtime.trajectory import ControlState

    action = ACTIONS.index(KEYFRAME_ACTIONS[target])
    return ControlState(np.zeros((1, 2)), np.asarray(yaw_rad), np.array([action]))


def joint_steps_cm(positions: list[np.ndarray]) -> np.ndarray:
    """(F - 1,) the largest distance any joint moves between consecutive shown poses (J, 3)."""
    return np.linalg.norm(np.diff(np.array(positions), axis=0), axis=-1).max(axis=1) * 100


def handback_report(model: TransitionModel, motion_model_path: Path) -> dict:
    """Does the motion network take over without a pop? From standing, walking, trotting and
    cantering, a 30-frame transition to each keyframe, then the keyframe's action: the largest
    per-frame joint displacement (cm, displayed pose, flat ground) over the last WATCH_FRAMES
    transition frames and over the first WATCH_FRAMES frames after the hand-back. Then, after
    transitions to stand, the dog is asked to walk at 1.0 m/s: its speed over the last second
    of three says whether locomotion resumes."""
    from canis.runtime.controller import Controller
    from canis.runtime.inference import MotionModel
    from canis.runtime.poses import KEYFRAME_ACTIONS

    motion = MotionModel(motion_model_path, device="cpu")
    rows = []
    for start, speed in HANDBACK_STARTS.items():
        for target in KEYFRAME_ACTIONS:
            c = Controller(motion, transition_model=model)
            for _ in range(120):
                c.step(_still_or_moving(speed))
            started = c.transition_to(target, HANDBACK_FRAMES)
            hold = _held(target, started.final_yaw_rad)
            positions = [c.display_pose()[0][0].copy()]
            for _ in range(started.frames + WATCH_FRAMES):  # the lead, playback, then after
                c.step(hold)
                positions.append(c.display_pose()[0][0].copy())
            moves = joint_steps_cm(positions)
            before = moves[started.frames - WATCH_FRAMES : started.frames]
            after = moves[started.frames :]
            row = {
                "start": start,
                "target": target,
                "transition_cm_per_frame": round(float(before.max()), 2),
                "after_cm_per_frame": round(float(after.max()), 2),
                "finite": bool(np.all(np.isfinite(positions))),
            }
            if target == "stand":
                speeds = []
                for _ in range(180):
                    c.step(_still_or_moving(1.0))
                    speeds.append(float(np.linalg.norm(c.root_velocity_xz_mps[0])))
                row["resumed_speed_mps"] = round(float(np.mean(speeds[-60:])), 2)
            rows.append(row)
    return {"transition_frames": HANDBACK_FRAMES, "watch_frames": WATCH_FRAMES, "runs": rows}


# Postures as the demo asks for them (demo/app.py: 45 frames, foot lock, the speed curve).
POSTURE_STARTS = {"standing": 0.0, "walking": 1.1, "trotting": 1.9, "cantering": 3.3}
POSTURE_FRAMES = 45
GAIT_SECONDS = 3  # the asked gait before the posture key, the last second measured
AFTER_SECONDS = 2  # watched after the hand-back
# Stopping first is asked this many frames past GAIT_SECONDS too: 0-21, a canter stride (about
# 24 frames at 3.3 m/s) in steps of 3, so the worst covers where in the stride a key comes.
REQUEST_PHASES_FRAMES = tuple(range(0, 24, 3))


def _phase_names(lead: int, frames: int, window: int, handed_back: int) -> list[str]:
    """The part of a transition each step after its request belongs to (step 1 first)."""
    names = ["lead"] * lead + ["RTN start"] * 3
    names += ["playback"] * (frames + 1 - window - 3) + ["target blend"] * window
    names += ["hand-back"] * WATCH_FRAMES
    return names[: handed_back + WATCH_FRAMES]


def postures_report(model: TransitionModel, motion_model_path: Path) -> dict:
    """Sit, lie, beg and stand asked from standing and from each gait, on flat ground and the
    demo's hills, in the demo's setup, two ways: at once (Controller.transition_to) and stopping
    first (runtime/transition_requests.py, what the demo and a game use). For each: the gait's own
    largest per-frame joint displacement (its last second), the largest while stopping, and the
    largest from the transition's request to AFTER_SECONDS after the hand-back, with the part
    where it happened. Stopping first is asked at each of REQUEST_PHASES_FRAMES into the gait
    (standing: once) and the worst of them is kept: where in the stride the key comes moves the
    transition's fastest frame by a quarter or more."""
    from canis.runtime.control import load_speed_calibration
    from canis.runtime.inference import MotionModel
    from canis.runtime.poses import KEYFRAME_ACTIONS
    from canis.runtime.terrain import load_terrain

    motion = MotionModel(motion_model_path, device="cpu")
    calibration = load_speed_calibration(motion_model_path)
    rows = []
    for ground in ("flat", "hills"):
        terrain = None if ground == "flat" else load_terrain(ground)
        setup = (motion, terrain, model, calibration)
        for start, speed in POSTURE_STARTS.items():
            for target in KEYFRAME_ACTIONS:
                row = {"ground": ground, "start": start, "target": target}
                row |= _posture_run(setup, speed, target, "at_once", 0)
                phases = REQUEST_PHASES_FRAMES if speed > 0 else REQUEST_PHASES_FRAMES[:1]
                runs = [_posture_run(setup, speed, target, "stopped_first", p) for p in phases]
                row |= max(runs, key=lambda r: r["stopped_first_cm_per_frame"])
                rows.append(row)
    return {
        "transition_frames": POSTURE_FRAMES,
        "after_seconds": AFTER_SECONDS,
        "request_phases_frames": list(REQUEST_PHASES_FRAMES),
        "runs": rows,
    }


def _posture_run(setup, speed: float, target: str, way: str, phase_frames: int) -> dict:
    """One posture asked `way` after GAIT_SECONDS and `phase_frames` frames of the gait at
    `speed`: postures_report's figures for it."""
    from canis.runtime.features import FPS
    from canis.runtime.transition_player import LEAD_FRAMES, blend_window
    from canis.runtime.transition_requests import PostureRequests

    c = posture_controller(*setup)
    positions, row = [], {}
    for _ in range(GAIT_SECONDS * FPS + phase_frames):
        c.step(_still_or_moving(speed))
        positions.append(c.display_pose()[0][0].copy())
    row["gait_cm_per_frame"] = round(float(joint_steps_cm(positions[-FPS:]).max()), 2)
    positions = positions[-1:]
    if way == "at_once":
        started = [c.transition_to(target, POSTURE_FRAMES)]
    else:
        row["stopped_first_phase_frames"] = phase_frames
        postures = PostureRequests(c)
        started = postures.request(target, POSTURE_FRAMES)
        while not started:
            started = postures.step(_still_or_moving(speed))
            positions.append(c.display_pose()[0][0].copy())
        stop_frames = len(positions) - 1
        row["stop_frames"] = stop_frames
        stopping = joint_steps_cm(positions) if stop_frames else np.zeros(1)
        row["stopping_cm_per_frame"] = round(float(stopping.max()), 2)
        positions = positions[-1:]
    hold = _held(target, started[0].final_yaw_rad)
    handed_back = started[0].frames
    for _ in range(handed_back + AFTER_SECONDS * FPS):
        c.step(hold)
        positions.append(c.display_pose()[0][0].copy())
    # AFTER_SECONDS after the hand-back, where tests/test_demo.py reads a held posture's speed.
    row[f"{way}_held_mps"] = round(float(np.linalg.norm(c.root_velocity_xz_mps[0])), 3)
    moves = joint_steps_cm(positions)
    phases = _phase_names(LEAD_FRAMES, POSTURE_FRAMES, blend_window(POSTURE_FRAMES), handed_back)
    worst = int(moves.argmax())
    row[f"{way}_cm_per_frame"] = round(float(moves.max()), 2)
    row[f"{way}_where"] = phases[worst] if worst < len(phases) else "after"
    row[f"{way}_after_frame"] = worst - handed_back + 1
    return row


# Getting up as the demo does it: a posture key from standing, the posture held until
# HELD_FRAMES after the key, then 1 (stand, through the transition network) and the motion
# network's idle watched for AFTER_SECONDS after the hand-back. A candidate of 2026-11-29 whipped
# its tail 16.8 cm in one frame 8 frames after the hand-back getting up from a beg (its own
# stops and postures held to 8.3), which no other table here saw.
STANDING_FRAMES = 60  # demo tests: R, then a second of standing before the key
HELD_FRAMES = 151  # the key's frame and 150 more, as tests/test_demo.py holds it
GETTING_UP_POSTURES = ("sit", "lie", "beg")


def getting_up_report(model: TransitionModel, motion_model_path: Path) -> dict:
    """Each posture asked from standing and held, then stand asked, in the demo's setup on flat
    ground and its hills: the largest per-frame joint displacement of the shown pose from the
    stand's request to AFTER_SECONDS after its hand-back, the part where it happened, its
    frame after the hand-back and the joint."""
    from canis.runtime.control import load_speed_calibration
    from canis.runtime.features import FPS
    from canis.runtime.inference import MotionModel
    from canis.runtime.terrain import load_terrain
    from canis.runtime.transition_player import LEAD_FRAMES, blend_window

    motion = MotionModel(motion_model_path, device="cpu")
    calibration = load_speed_calibration(motion_model_path)
    rows = []
    for ground in ("flat", "hills"):
        terrain = None if ground == "flat" else load_terrain(ground)
        for posture in GETTING_UP_POSTURES:
            c = posture_controller(motion, terrain, model, calibration)
            for _ in range(STANDING_FRAMES):
                c.step(_still_or_moving(0.0))
            down = c.transition_to(posture, POSTURE_FRAMES)
            hold = _held(posture, down.final_yaw_rad)
            for _ in range(HELD_FRAMES):
                c.step(hold)
            up = c.transition_to("stand", POSTURE_FRAMES)
            hold = _held("stand", up.final_yaw_rad)
            poses = [c.display_pose()[0][0].copy()]
            for _ in range(up.frames + AFTER_SECONDS * FPS):
                c.step(hold)
                poses.append(c.display_pose()[0][0].copy())
            moves = np.linalg.norm(np.diff(np.array(poses), axis=0), axis=-1)  # (F, J) m
            frame, joint = np.unravel_index(int(moves.argmax()), moves.shape)
            phases = _phase_names(
                LEAD_FRAMES, POSTURE_FRAMES, blend_window(POSTURE_FRAMES), up.frames
            )
            rows.append(
                {
                    "ground": ground,
                    "posture": posture,
                    "cm_per_frame": round(float(moves.max()) * 100, 2),
                    "where": phases[frame] if frame < len(phases) else "after",
                    "after_frame": int(frame) - up.frames + 1,
                    "joint": c.skeleton.joint_names[joint],
                }
            )
    return {
        "transition_frames": POSTURE_FRAMES,
        "held_frames": HELD_FRAMES,
        "after_seconds": AFTER_SECONDS,
        "runs": rows,
    }


def labels_for(name: str) -> str:
    return {"rtn": "RTN", "interp": "INT", "zerovel": "ZERO-V"}.get(name, name)


def markdown(results: dict, command: str) -> str:
    setup = results["setup"]
    lines = [
        "## Transitions (RTN)",
        "",
        f"Reproduce: `{command}` ({setup['seconds']} s on the machine that wrote it). Held-out "
        f"clips ({len(setup['held_out_clips'])}, as captured and mirrored): "
        f"{', '.join(setup['held_out_clips'])}; a window every {setup['window_stride_frames']} "
        f"frames (windows per length: {setup['windows']}). {setup['context_frames']} context "
        "frames at 60 fps; the RTN runs through the runtime's ONNX graphs with the target blend; "
        "INT is interpolation (hips lerp, yaw lerp, slerp of every root-relative rotation), "
        "ZERO-V holds the last context frame. Lower is better. RTN parameters: "
        f"{setup['parameter_bytes'] / 1e6:.1f} MB (float32). Residuals: "
        + ", ".join(f"{labels_for(n)} {r}" for n, r in setup["residuals"].items())
        + " (training/rtn.py).",
        "",
    ]
    names = ["rtn", *setup.get("others", {}), "interp", "zerovel"]
    labels = {n: labels_for(n) for n in names}
    for metric, title in (("l2p", "L2P"), ("l2q", "L2Q"), ("npss", "NPSS")):
        lengths = list(results["rtn"][metric])
        lines += [f"| {title} | " + " | ".join(f"{n} frames" for n in lengths) + " |"]
        lines += ["|---" * (len(lengths) + 1) + "|"]
        for name, label in labels.items():
            row = results[name][metric]
            lines += [f"| {label} | " + " | ".join(f"{row[n]:.3f}" for n in lengths) + " |"]
        lines += [""]
    gains = []
    for n in results["rtn"]["l2p"]:
        rtn, interp = results["rtn"]["l2p"][n], results["interp"]["l2p"][n]
        gains.append(f"{n} frames {100 * (interp - rtn) / interp:+.0f}%")
    lines += ["RTN's L2P relative to interpolation (positive: RTN lower): " + ", ".join(gains), ""]
    up = results["upsample"]
    lines += [
        f"Temporal super-resolution (`canis upsample CLIP --keep-every {up['keep_every']}`: 10 "
        "context frames and one kept frame per second, the rest regenerated by chained "
        f"transitions) over the held-out clips: L2P {up['l2p']:.3f}, mean joint error "
        f"{up['joint_error_cm']:.1f} cm over {up['regenerated_frames']} regenerated frames.",
        "",
    ]
    return "\n".join(lines)


def handback_worst(handback: dict) -> dict:
    """The hand-back table's worst row: the largest per-frame joint displacement after the
    hand-back (the limit the demo's posture test holds every posture frame to)."""
    return max(handback["runs"], key=lambda r: r["after_cm_per_frame"])


WORST_LINE = "Worst after the hand-back: {cm:.2f} cm/frame ({start} -> {target})."
GETTING_UP_LINE = (
    "Worst getting up: {cm_per_frame:.2f} cm/frame ({ground}, {posture} -> stand, {joint}, "
    "in the {where})."
)
STOPPED_FIRST_LINE = (
    "Worst stopping first: {cm:.2f} cm/frame ({ground}, {start} -> {target}, in the {where})."
)
HELD_LINE = "Fastest held: {mps:.3f} m/s ({ground}, {start} -> {target})."
# tests/test_demo.py's bar on a posture's root speed, held AFTER_SECONDS after the hand-back.
HELD_BAR_MPS = 0.1


def handback_markdown(results: dict, command: str) -> str:
    h = results["handback"]
    worst = handback_worst(h)
    lines = [
        "### Hand-back to the motion network",
        "",
        f"Reproduce: `{command}`. `Controller.transition_to(target, {h['transition_frames']})` "
        "with the shipped MANN-8 on flat ground, then the target's action: the largest per-frame "
        f"joint displacement of the displayed pose over the last {h['watch_frames']} transition "
        f"frames and the first {h['watch_frames']} frames after the hand-back (a pop shows as a "
        "jump in the second column); after transitions to stand the dog is asked to walk at 1.0 "
        "m/s and its speed over the third second is given.",
        "",
        "| from | to | transition cm/frame | after hand-back cm/frame | walks again at |",
        "|---|---|---|---|---|",
    ]
    for r in h["runs"]:
        resumed = f"{r['resumed_speed_mps']:.2f} m/s" if "resumed_speed_mps" in r else ""
        lines.append(
            f"| {r['start']} | {r['target']} | {r['transition_cm_per_frame']:.2f} | "
            f"{r['after_cm_per_frame']:.2f} | {resumed} |"
        )
    lines += [
        "",
        WORST_LINE.format(cm=worst["after_cm_per_frame"], **worst)
        + " tests/test_demo.py reads this line and the postures' worst stopping first (below): "
        "no frame of a posture asked in the demo may move a joint further than the larger.",
        "",
    ]
    if "postures" in results:
        p = results["postures"]
        lines += [
            "### Postures asked while moving",
            "",
            f"The demo's way (demo/app.py: {p['transition_frames']}-frame transitions, foot lock, "
            "the model's speed curve, the terrain IK on hills): 3 s of the gait asked straight "
            "ahead, then the posture, asked at once (`Controller.transition_to`) or stopping "
            "first (`runtime/transition_requests.py`: the motion network is asked for speed 0 "
            "until the root is slower than 0.15 m/s, what the demo does since this table). "
            "Figures: the largest per-frame joint displacement of the shown pose, in cm: the "
            "gait's own over its last second, while stopping, and from the transition's "
            f"request to {p['after_seconds']} s after its hand-back, with the part where it "
            "happened (lead: the motion network's last 5 frames; RTN start: its first 3; "
            "target blend: the frames blended toward the keyframe; hand-back: the first 3 "
            "after it; after: the posture held by the motion network). Stopping first is asked "
            f"at each of {', '.join(map(str, p['request_phases_frames']))} frames past the 3 s "
            "(a canter stride; from standing once), and the worst of them is given, with its "
            "frame (phase): where in the stride the key comes moves the fastest frame by a "
            "quarter or more. *Held*: the root's speed (m/s) "
            f"{p['after_seconds']} s after that run's hand-back, the posture asked to stay still.",
            "",
            "| ground | from | to | gait | at once | where | stop frames | stopping | "
            "stopping first | where | phase | held |",
            "|---|---|---|---|---|---|---|---|---|---|---|---|",
        ]
        for r in p["runs"]:
            lines.append(
                f"| {r['ground']} | {r['start']} | {r['target']} | {r['gait_cm_per_frame']:.2f} "
                f"| {r['at_once_cm_per_frame']:.2f} | {r['at_once_where']} | {r['stop_frames']} "
                f"| {r['stopping_cm_per_frame']:.2f} | {r['stopped_first_cm_per_frame']:.2f} "
                f"| {r['stopped_first_where']} | {r['stopped_first_phase_frames']} "
                f"| {r['stopped_first_held_mps']:.3f} |"
            )
        worst = max(p["runs"], key=lambda r: r["stopped_first_cm_per_frame"])
        line = STOPPED_FIRST_LINE.format(
            cm=worst["stopped_first_cm_per_frame"], where=worst["stopped_first_where"], **worst
        )
        held = max(p["runs"], key=lambda r: r["stopped_first_held_mps"])
        lines += [
            "",
            line + " tests/test_demo.py reads it with the hand-back's worst (above).",
            "",
            HELD_LINE.format(mps=held["stopped_first_held_mps"], **held)
            + f" tests/test_demo.py allows {HELD_BAR_MPS:g} m/s.",
            "",
        ]
    if "getting_up" in results:
        lines += getting_up_markdown(results["getting_up"])
    return "\n".join(lines)


def getting_up_markdown(g: dict) -> list[str]:
    lines = [
        "### Getting up",
        "",
        "The demo's way again: from standing, a posture key (1 s after R), the posture held "
        f"until {g['held_frames'] - 1} frames after the key, then 1 (stand, a "
        f"{g['transition_frames']}-frame transition) and the motion network's idle. Figures: "
        "the largest per-frame joint displacement of the shown pose from the stand's request "
        f"to {g['after_seconds']} s after its hand-back, the part where it happened (as above), "
        "its frame after the hand-back (negative: before it) and the joint.",
        "",
        "| ground | from | cm/frame | where | frame after hand-back | joint |",
        "|---|---|---|---|---|---|",
    ]
    for r in g["runs"]:
        lines.append(
            f"| {r['ground']} | {r['posture']} | {r['cm_per_frame']:.2f} | {r['where']} "
            f"| {r['after_frame']} | {r['joint']} |"
        )
    worst = max(g["runs"], key=lambda r: r["cm_per_frame"])
    lines += [
        "",
        GETTING_UP_LINE.format(**worst) + " tests/test_demo.py reads it with the two worsts above.",
        "",
    ]
    return lines


def write(results: dict, json_path: Path | None, doc: Path | None, command: str) -> None:
    """The JSON, and the transitions and hand-back sections of the evaluation document (each
    replaced in place between its markers, so other sections stay)."""
    if json_path is not None:
        json_path.parent.mkdir(parents=True, exist_ok=True)
        json_path.write_text(json.dumps(results, indent=1) + "\n")
    if doc is not None:
        if "rtn" in results:
            replace_section(doc, "transitions", markdown(results, command))
        if "handback" in results:
            replace_section(doc, "handback", handback_markdown(results, command))
