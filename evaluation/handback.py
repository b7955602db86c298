"""The hand-back from a transition to the motion network, and the postures asked while
moving or getting up (the dog driven through the runtime, as a game drives it; no mocap
needed): `canis evaluate transitions --handback-only` measures them alone."""

from __future__ import annotations

from pathlib import Path

import numpy as np
from canis.runtime.transition import TransitionModel


def handback_and_postures(model: TransitionModel, motion_model_path: Path) -> dict:
    """The hand-back table and the postures asked while moving (no mocap needed: `canis
    evaluate transitions --handback-only` rewrites only their section)."""
    return {
        "handback": handback_report(model, motion_model_path),
        "postures": postures_report(model, motion_model_path),
        "getting_up": getting_up_report(model, motion_model_path),
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
# Both ways are asked this many frames past GAIT_SECONDS too: 0-21, a canter stride (about
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
    where it happened. Each way is asked at each of REQUEST_PHASES_FRAMES into the gait
    (standing: once) and the worst of them is kept: where in the stride the key comes moves the
    transition's fastest frame by a quarter or more, or from none to a pop."""
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
                phases = REQUEST_PHASES_FRAMES if speed > 0 else REQUEST_PHASES_FRAMES[:1]
                for way in ("at_once", "stopped_first"):
                    runs = [_posture_run(setup, speed, target, way, p) for p in phases]
                    row |= max(runs, key=lambda r: r[f"{way}_cm_per_frame"])
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
    row[f"{way}_phase_frames"] = phase_frames
    if way == "at_once":
        started = [c.transition_to(target, POSTURE_FRAMES)]
    else:
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
        "no frame of a posture asked in the demo may move a joint 1.25x further than the larger.",
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
            "after it; after: the posture held by the motion network). Each way is asked "
            f"at each of {', '.join(map(str, p['request_phases_frames']))} frames past the 3 s "
            "(a canter stride; from standing once), and the worst of them is given, with its "
            "frame (phase): where in the stride the key comes moves the fastest frame by a "
            "quarter or more. *Held*: the root's speed (m/s) "
            f"{p['after_seconds']} s after that run's hand-back, the posture asked to stay still.",
            "",
            "| ground | from | to | gait | at once | where | phase | stop frames | stopping | "
            "stopping first | where | phase | held |",
            "|---|---|---|---|---|---|---|---|---|---|---|---|---|",
        ]
        for r in p["runs"]:
            lines.append(
                f"| {r['ground']} | {r['start']} | {r['target']} | {r['gait_cm_per_frame']:.2f} "
                f"| {r['at_once_cm_per_frame']:.2f} | {r['at_once_where']} "
                f"| {r['at_once_phase_frames']} | {r['stop_frames']} "
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
