"""The controllers evaluation's skating and leg stiffness like for like: each network driven
with the mocap's own commands, measured on the same frames as the mocap.

`canis evaluate controllers` asks each network for a steady 20 s walk, canter or turn at the
median speed of the mocap's frames of that scenario, and compares it with those frames. But
the mocap's walk comes in short bouts (a median of 8 frames: training/scenario_cadence.py), a
dog starting, stopping and changing gait. Here every clip (as captured) is replayed instead,
from a dog placed where the clip starts: each frame the network is asked for the clip's
speed, heading, facing and action, with the path the clip's root takes over the next second
as the path to follow (ControlState.future_xz_m, as the path test gives its path). Its
skating and stiffness are then measured on the frames each scenario selects in that clip,
the mocap's on the same frames.

    python -m canis.evaluation.replay [--models MANN8,PFNN or NAME=PATH ...]
"""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path

import numpy as np
from canis.evaluation.controller_metrics import motion_quality, summarise
from canis.runtime.features import ACTIONS, FPS, FUTURE_OFFSETS_FRAMES
from canis.runtime.root import yaw_from_direction
from canis.runtime.trajectory import ControlState
from canis.training.clips import clip_commands

# The dog starts standing still where the clip starts: its first second is not measured.
SETTLE_FRAMES = 60
# Each scenario is measured again on its frames where the clip's speed changes by less than
# this: whether the skating comes from the starts and stops or from the gait itself.
STEADY_ACCELERATION_MPS2 = 0.5
MOVE = ACTIONS.index("move")


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
    """Each scenario's frames of the clip (evaluate_controllers.scenario_frames) after the
    settling second and before the last second (whose path ahead is cut short), and the same
    where the clip's speed is steady ("walk, steady speed", ...)."""
    from canis.evaluation.controllers import scenario_frames

    inside = np.zeros(clip.frame_count, bool)
    inside[SETTLE_FRAMES : clip.frame_count - max(FUTURE_OFFSETS_FRAMES)] = True
    acceleration = np.abs(np.gradient(clip.labels.root_speed_mps)) * FPS
    steady = acceleration < STEADY_ACCELERATION_MPS2
    frames = {}
    for name, mask in scenario_frames(clip.labels).items():
        frames[name] = mask & inside
        frames[f"{name}, steady speed"] = mask & inside & steady
    return frames


def replay(model, clip, speed_tracking: bool = False, **command):
    """The network driven through one clip (tools/closed_loop.Recording), on flat ground;
    `command`: ClipCommands' path and actions."""
    from canis.export.closed_loop import record
    from canis.runtime.controller import Controller

    controller = Controller(model, speed_tracking=speed_tracking)
    start_yaw = yaw_from_direction(clip.facing[[0]]).astype(np.float64)
    controller.reset(clip.root_positions_m[[0]][:, [0, 2]].astype(np.float64), start_yaw)
    return record(controller, ClipCommands(clip, controller, **command), clip.frame_count)


def replay_quality(
    models: dict[str, Path], clips, speed_tracking: bool = False, **command
) -> dict[str, dict[str, dict]]:
    """{"GT" and each model name: {scenario: controller_metrics.summarise() and the mean root
    speed}}, over the same frames of every clip."""
    from canis.runtime.inference import MotionModel

    skeleton = clips[0].skeleton
    parts = {name: defaultdict(list) for name in ["GT", *models]}
    speeds = {name: defaultdict(list) for name in ["GT", *models]}
    loaded = {name: MotionModel(path, threads=1) for name, path in models.items()}
    for clip in clips:
        frames = {s: m for s, m in measured_frames(clip).items() if m.sum() >= 2}
        if not frames:
            continue
        for scenario, mask in frames.items():
            parts["GT"][scenario].append(
                motion_quality(
                    skeleton, clip.positions_m, clip.rotations, clip.labels.ground_m, mask
                )
            )
            speeds["GT"][scenario].append(clip.labels.root_speed_mps[mask])
        for name, model in loaded.items():
            run = replay(model, clip, speed_tracking, **command)
            for scenario, mask in frames.items():
                parts[name][scenario].append(
                    motion_quality(skeleton, run.positions_m, run.rotations, 0.0, mask)
                )
                speeds[name][scenario].append(run.speeds_mps[mask])
    return {
        name: {
            s: summarise(skeleton, p)
            | {"mean_speed_mps": float(np.concatenate(speeds[name][s]).mean())}
            for s, p in per.items()
            if p
        }
        for name, per in parts.items()
    }


def main(argv=None) -> None:
    from canis.evaluation.study_arguments import models_and_clips, study_parser

    parser = study_parser(__doc__)
    parser.add_argument(
        "--speed-tracking",
        action="store_true",
        help="with the runtime's speed tracking (off by default: the network alone, fed the "
        "clip's commands as in training)",
    )
    parser.add_argument(
        "--without",
        default="",
        help="parts of the clip's command left out, comma-separated: path (the root's path "
        "ahead), action (every frame asks to move)",
    )
    args = parser.parse_args(argv)
    left_out = set(filter(None, args.without.split(",")))
    if left_out - {"path", "action"}:
        parser.error(
            f"--without: {', '.join(sorted(left_out - {'path', 'action'}))}: "
            "only path and action can be left out"
        )
    paths, clips = models_and_clips(parser, args)
    command = {"path": "path" not in left_out, "actions": "action" not in left_out}
    results = replay_quality(paths, clips, args.speed_tracking, **command)
    for name, per in results.items():
        for scenario, s in per.items():
            print(
                f"{name} {scenario}: skating {s['skating_cm']:.3f} cm/frame (back legs"
                f" {s['skating_back_cm']:.3f}), stiffness {s['stiffness_deg']:.2f} deg/frame"
                f" (back legs {s['stiffness_back_deg']:.2f}), mean speed {s['mean_speed_mps']:.2f}"
                f" m/s, paws under 2.5 cm {s['paws_down_share']:.0%}, {s['steps']} steps"
            )


if __name__ == "__main__":
    main()
