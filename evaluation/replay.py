"""`canis evaluate replay`: the held-out yardstick. Every clip the network never trained on is
replayed from a dog placed where the clip starts: each frame the network alone (speed tracking
off) is asked for the clip's speed, heading, facing and action, with the path the clip's root
takes over the next second as the path to follow (ControlState.future_xz_m). Its motion is then
measured on the frames each gait selects in that clip, beside the mocap's own on the same
frames: skating, the speed reached, leg stiffness, each paw's share of frames planted (the
labels' contact rule, applied to both), and the pose's distributions (head, neck and body
pitch, tail and paw heights: median and p10/p90). after_actions.py adds what a replay never
asks: the pose 1 s after a jump from a stand and after a stop.
"""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path

import numpy as np
from canis.evaluation.controller_metrics import motion_quality, summarise
from canis.runtime.features import ACTIONS, FUTURE_OFFSETS_FRAMES
from canis.runtime.readouts import GAITS, NO_GAIT
from canis.runtime.root import body_facing, yaw_from_direction
from canis.runtime.trajectory import ControlState
from canis.training.clips import clip_commands

# The dog starts standing still where the clip starts: its first second is not measured.
SETTLE_FRAMES = 60
MOVE = ACTIONS.index("move")
# A gait's frames are its straight ones; "turn" is any gait turning at least this fast;
# "moving" every frame of any gait, straight or turning: the pose's distributions over
# minutes rather than over a gait's few straight seconds in the held-out clips (their
# straight walk is about a second, of one dog sniffing or looking up: the head's pitch there
# says little).
STRAIGHT_MAX_YAW_RATE_DEGPS, TURN_MIN_YAW_RATE_DEGPS = 20.0, 45.0
SCENARIOS = (*GAITS, "turn", "moving")
POSE_MEASURES = {  # name: (unit, what)
    "head_pitch_deg": ("deg", "muzzle (Head to HeadSite) above horizontal"),
    "neck_pitch_deg": ("deg", "Neck to Head above horizontal"),
    "body_pitch_deg": ("deg", "Hips to Neck above horizontal"),
    "tail_height_m": ("m", "tail tip above the ground"),
    "paw_height_m": ("m", "paws above the ground, all four"),
}
PAWS = ("left front", "right front", "left hind", "right hind")


class ClipCommands:
    """control_at(frame) for tools/closed_loop.record: one clip's own commands
    (clip_commands), taken where the dog is. So a dog that has drifted off the clip's path is
    asked for the clip's motion from where it is, as a player would ask it, not pulled back.
    Along a path the runtime faces the trajectory along it (runtime/trajectory.along_path), so
    the facing counts only without one. Without `path` the path is left out (the trajectory
    is extrapolated from the speed, heading and facing, as from a stick); without `actions`
    every frame asks to move: what each part adds."""

    def __init__(self, clip, controller, path: bool = True, actions: bool = True):
        self.controller, self.path = controller, path
        self.yaw_rad = yaw_from_direction(clip.facing).astype(np.float64)[None]  # (1, F)
        self.root_xz_m = clip.root_positions_m[None, :, [0, 2]].astype(np.float64)  # (1, F, 2)
        self.speed_mps = clip.desired_speeds_mps[None].astype(np.float64)
        action = clip.labels.action_index if actions else np.full(clip.frame_count, MOVE)
        self.action = np.asarray(action)[None]

    def __call__(self, frame: int) -> ControlState:
        dog = self.controller
        return clip_commands(
            self.root_xz_m, self.yaw_rad, self.speed_mps, self.action, np.array([frame]),
            dog.root_xz_m[:1], dog.root_yaw_rad[:1], self.path,
        )  # fmt: skip


def measured_frames(clip) -> dict[str, np.ndarray]:
    """Each scenario's frames of the clip (SCENARIOS) after the settling second and before the
    last second (whose path ahead is cut short)."""
    labels = clip.labels
    inside = np.zeros(clip.frame_count, bool)
    inside[SETTLE_FRAMES : clip.frame_count - max(FUTURE_OFFSETS_FRAMES)] = True
    turning = np.abs(labels.yaw_rate_degps)
    frames = {
        gait: inside & (labels.gait_index == i) & (turning < STRAIGHT_MAX_YAW_RATE_DEGPS)
        for i, gait in enumerate(GAITS)
    }
    frames["turn"] = inside & (labels.gait_index != NO_GAIT) & (turning >= TURN_MIN_YAW_RATE_DEGPS)
    frames["moving"] = inside & (labels.gait_index != NO_GAIT)
    return frames


def pose_measures(skeleton, positions_m: np.ndarray, ground_m) -> dict[str, np.ndarray]:
    """POSE_MEASURES per frame (F,) of world positions (F, J, 3) over a ground height (F,)."""

    def pitch(a: str, b: str) -> np.ndarray:
        d = positions_m[:, skeleton.index(b)] - positions_m[:, skeleton.index(a)]
        return np.degrees(np.arctan2(d[:, 1], np.linalg.norm(d[:, [0, 2]], axis=1)))

    ground = np.broadcast_to(np.asarray(ground_m, np.float64), (len(positions_m),))
    paws = positions_m[:, skeleton.group("paws"), 1] - ground[:, None]
    return {
        "head_pitch_deg": pitch("Head", "HeadSite"),
        "neck_pitch_deg": pitch("Neck", "Head"),
        "body_pitch_deg": pitch("Hips", "Neck"),
        "tail_height_m": positions_m[:, skeleton.index("Tail1Site"), 1] - ground,
        "paw_height_m": paws.mean(axis=1),
    }


def run_labels(skeleton, run):
    """The labels' contacts and gaits on a replay's motion, by the rule the mocap's were found
    by (training/labels.py), so the paws' contact shares compare like for like."""
    from canis.training.clips import FACING_SMOOTHING_HALF_WINDOW
    from canis.training.labels import label_clip, rolling

    facing = rolling(body_facing(run.positions_m, skeleton), FACING_SMOOTHING_HALF_WINDOW, np.mean)
    facing /= np.linalg.norm(facing, axis=1, keepdims=True)
    return label_clip(skeleton, run.positions_m, facing)


def replay(model, clip, speed_tracking: bool = False, **command):
    """The network driven through one clip (tools/closed_loop.Recording), on flat ground;
    `command`: ClipCommands' path and actions."""
    from canis.export.closed_loop import record
    from canis.runtime.controller import Controller

    # The network alone, or with the runtime's corrections as shipped (the speed tracking
    # and the stand hold) where speed_tracking is asked.
    controller = Controller(model, speed_tracking=speed_tracking, stand_hold=speed_tracking)
    start_yaw = yaw_from_direction(clip.facing[[0]]).astype(np.float64)
    controller.reset(clip.root_positions_m[[0]][:, [0, 2]].astype(np.float64), start_yaw)
    return record(controller, ClipCommands(clip, controller, **command), clip.frame_count)


def held_out(clips, model_paths) -> list:
    """The clips none of `model_paths` trained on: the intersection of their datasets'
    validation clips (each ONNX file's canis.dataset metadata), so that networks trained on
    different splits are compared on motion that all of them never saw."""
    import json

    import onnx

    names = None
    for model_path in model_paths:
        props = onnx.load(str(model_path), load_external_data=False).metadata_props
        meta = {p.key: p.value for p in props}
        own = set(json.loads(meta.get("canis.dataset", "{}")).get("validation_clips", []))
        if not own:
            raise ValueError(f"{model_path}: names no held-out clips (no canis.dataset metadata)")
        names = own if names is None else names & own
    return [c for c in clips if Path(c.name).stem in names]


def evaluate_replay(models: dict[str, Path], clips) -> dict:
    """{"clips": names, "GT" and each model: {scenario: figures}} over the same frames of
    every clip, and "missing": the scenarios no clip has frames of."""
    from canis.runtime.inference import MotionModel

    skeleton = clips[0].skeleton
    names = ["GT", *models]
    parts = {n: defaultdict(list) for n in names}
    speeds = {n: defaultdict(list) for n in names}
    contacts = {n: defaultdict(list) for n in names}
    poses = {n: defaultdict(lambda: defaultdict(list)) for n in names}
    loaded = {name: MotionModel(path, threads=1) for name, path in models.items()}

    def add(name, scenario, mask, positions, rotations, ground, speed, planted):
        parts[name][scenario].append(motion_quality(skeleton, positions, rotations, ground, mask))
        speeds[name][scenario].append(speed[mask])
        contacts[name][scenario].append(planted[mask])
        for measure, values in pose_measures(skeleton, positions, ground).items():
            poses[name][scenario][measure].append(values[mask])

    for clip in clips:
        frames = {s: m for s, m in measured_frames(clip).items() if m.sum() >= 2}
        if not frames:
            continue
        labels = clip.labels
        for scenario, mask in frames.items():
            add("GT", scenario, mask, clip.positions_m, clip.rotations, labels.ground_m,
                labels.root_speed_mps, labels.contacts)  # fmt: skip
        for name, model in loaded.items():
            run = replay(model, clip)
            ran = run_labels(skeleton, run)
            for scenario, mask in frames.items():
                add(name, scenario, mask, run.positions_m, run.rotations, 0.0,
                    run.speeds_mps, ran.contacts)  # fmt: skip
    results = {"clips": sorted(Path(c.name).stem for c in clips), "models": list(models)}
    results["missing"] = [s for s in SCENARIOS if s not in parts["GT"]]
    for name in names:
        results[name] = {}
        for scenario, p in parts[name].items():
            pose = {
                m: [float(np.percentile(np.concatenate(v), q)) for q in (10, 50, 90)]
                for m, v in poses[name][scenario].items()
            }
            results[name][scenario] = summarise(skeleton, p) | {
                "mean_speed_mps": float(np.concatenate(speeds[name][scenario]).mean()),
                "contact_share": [
                    float(c) for c in np.concatenate(contacts[name][scenario]).mean(0)
                ],
                "pose_p10_p50_p90": pose,
            }
    for name in models:
        for scenario, row in results[name].items():
            truth = results["GT"][scenario]
            row["skating_vs_mocap"] = row["skating_cm"] / max(truth["skating_cm"], 1e-9)
            row["speed_reached"] = row["mean_speed_mps"] / max(truth["mean_speed_mps"], 1e-9)
    return results


def markdown(results: dict, command: str, machine: str) -> str:
    models = results["models"]
    scenarios = [s for s in SCENARIOS if s in results["GT"]]
    lines = [
        "## Replay of the held-out clips (the network alone, driven by each clip's commands)",
        "",
        f"Reproduce: `{command}` ({machine}). Clips: {', '.join(results['clips'])}. "
        "Gaits are the labels' straight frames of that gait; turn is any gait turning at "
        f"{TURN_MIN_YAW_RATE_DEGPS:g} deg/s or more; moving is every frame of any gait. The "
        "network runs without speed tracking "
        "on flat ground; GT is the mocap on the same frames.",
    ]
    if results["missing"]:
        lines += ["", f"No held-out frames of: {', '.join(results['missing'])}."]
    lines += [
        "",
        "| model | scenario | frames | skating cm/frame (x mocap) | speed m/s (reached) | "
        "leg stiffness deg/frame | paws planted " + " / ".join(PAWS) + " |",
        "|---|---|---:|---|---|---:|---|",
    ]
    for name in ["GT", *models]:
        for s in scenarios:
            row = results[name][s]
            ratio = f" ({row['skating_vs_mocap']:.2f}x)" if name != "GT" else ""
            reached = f" ({row['speed_reached']:.0%})" if name != "GT" else ""
            shares = " / ".join(f"{c:.0%}" for c in row["contact_share"])
            lines.append(
                f"| {name} | {s} | {row['steps']} | {row['skating_cm']:.3f}{ratio} | "
                f"{row['mean_speed_mps']:.2f}{reached} | {row['stiffness_deg']:.2f} | {shares} |"
            )
    lines += ["", "Pose, median [p10, p90]:", ""]
    measures = list(POSE_MEASURES)
    lines += [
        "| model | scenario | " + " | ".join(m.replace("_", " ") for m in measures) + " |",
        "|---|---|" + "---|" * len(measures),
    ]
    for name in ["GT", *models]:
        for s in scenarios:
            pose = results[name][s]["pose_p10_p50_p90"]
            cells = []
            for m in measures:
                low, mid, high = pose[m]
                digits = 0 if m.endswith("deg") else 3
                cells.append(f"{mid:.{digits}f} [{low:.{digits}f}, {high:.{digits}f}]")
            lines.append(f"| {name} | {s} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"
