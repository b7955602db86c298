"""Where the controllers evaluation's foot skating comes from, paw by paw: a planted paw that
slides, or a swinging paw carried low (the measure counts any paw moving under 2.5 cm,
runtime/motion_metrics.py), with how high each paw lifts and how often it is under those 2.5 cm
at all (a paw that never comes down skates nothing: the one-step start's canters whose hind
paws hovered, docs/EVALUATION.md, the thirtieth session). The mocap's scenario frames and each
network driven as the evaluation drives it go through the same footfall detector
(labels.stride_contacts, the gait evaluation's), so the split is like for like.

    python -m canis.training.skating_breakdown [--models MANN8,PFNN or NAME=PATH ...]
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
from canis.runtime.motion_metrics import SKATING_HEIGHT_CM, foot_skating_cm
from canis.training.labels import PAW_NAMES, speeds_mps, stride_contacts

SCENARIOS = ("walk", "turn", "canter")
LIFT_PERCENTILE = 95  # a paw's lift: this percentile of its height over the frames


def paw_breakdown(
    paw_positions_m: np.ndarray, ground_m, body_speed_mps: np.ndarray, counted=None
) -> dict[str, np.ndarray]:
    """Sums over the counted steps of one stretch of F frames, per paw (4,): skating (cm) while
    the paw is down ("planted") and while it swings ("swinging"), the steps counted, and the
    paw's heights (cm) in the counted frames. `paw_positions_m` (F, 4, 3) in the world,
    `ground_m` scalar or (F,), `counted` (F,) bool keeps the steps whose both ends count."""
    ground = np.broadcast_to(np.asarray(ground_m, np.float64), (len(paw_positions_m),))
    heights = paw_positions_m[..., 1] - ground[:, None]
    horizontal = paw_positions_m * np.array([1.0, 0.0, 1.0])
    down = stride_contacts(heights, speeds_mps(horizontal), body_speed_mps)
    skating = foot_skating_cm(paw_positions_m[..., [0, 2]], heights)  # (F-1, 4)
    counted = np.ones(len(heights), bool) if counted is None else np.asarray(counted, bool)
    steps = counted[:-1] & counted[1:]
    # A step is the planted paw's when the paw is down at both of its ends.
    planted = down[:-1] & down[1:] & steps[:, None]
    return {
        "planted_cm": np.where(planted, skating, 0.0).sum(0),
        "swinging_cm": np.where(steps[:, None] & ~planted, skating, 0.0).sum(0),
        "steps": int(steps.sum()),
        "heights_cm": heights[counted] * 100.0,
    }


def summarise(parts: list[dict]) -> dict[str, np.ndarray]:
    """Per paw (4,): skating cm/frame in all, from planted and from swinging paws (they add up
    to all), the lift (LIFT_PERCENTILE of the height, cm) and the share of the counted frames
    the paw is under SKATING_HEIGHT_CM ("down")."""
    steps = max(sum(p["steps"] for p in parts), 1)
    planted = sum(p["planted_cm"] for p in parts) / steps
    swinging = sum(p["swinging_cm"] for p in parts) / steps
    heights = np.concatenate([p["heights_cm"] for p in parts])
    return {
        "all": planted + swinging,
        "planted": planted,
        "swinging": swinging,
        "lift_cm": np.percentile(heights, LIFT_PERCENTILE, axis=0),
        "down": (heights < SKATING_HEIGHT_CM).mean(0),
    }


def mocap_breakdown(clips, scenario_frames) -> dict[str, dict]:
    """summarise() of each scenario's frames of the mocap, heights above the labels' ground."""
    parts = {name: [] for name in SCENARIOS}
    for clip in clips:
        paws = clip.positions_m[:, clip.skeleton.group("paws")]
        for name, mask in scenario_frames(clip.labels).items():
            if name in parts and mask.sum() >= 2:
                parts[name].append(
                    paw_breakdown(paws, clip.labels.ground_m, clip.labels.root_speed_mps, mask)
                )
    return {name: summarise(p) for name, p in parts.items()}


def driven_breakdown(model_path: Path, skeleton, commands: dict) -> dict[str, dict]:
    """summarise() of each scenario driven as the controllers evaluation drives it, over its
    measured seconds, on flat ground."""
    from canis.evaluation import controllers as ec
    from canis.runtime.inference import MotionModel

    model = MotionModel(model_path, threads=1)
    out = {}
    for name in SCENARIOS:
        run = ec.drive(model, ec.scenario_steering(name, commands), ec.SETTLE_S + ec.MEASURE_S)
        settled = slice(ec._frames(ec.SETTLE_S), None)
        paws = run.positions_m[settled][:, skeleton.group("paws")]
        out[name] = summarise([paw_breakdown(paws, 0.0, run.speeds_mps[settled])])
    return out


def _line(label: str, s: dict) -> str:
    paws = ", ".join(
        f"{paw} {s['all'][i]:.3f} ({s['planted'][i]:.3f} planted + {s['swinging'][i]:.3f}"
        f" swinging; lifts {s['lift_cm'][i]:.1f} cm, down {s['down'][i]:.0%})"
        for i, paw in enumerate(PAW_NAMES)
    )
    front, hind = s["lift_cm"][:2].mean(), s["lift_cm"][2:].mean()
    return (
        f"{label}: mean {s['all'].mean():.3f} cm/frame (planted {s['planted'].mean():.3f} +"
        f" swinging {s['swinging'].mean():.3f}); lifts front {front:.1f} cm, hind {hind:.1f} cm;"
        f" {paws}"
    )


def main(argv=None) -> None:
    from canis.evaluation import controllers as ec
    from canis.evaluation.study_arguments import models_and_clips, study_parser

    parser = study_parser(__doc__)
    args = parser.parse_args(argv)
    paths, clips = models_and_clips(parser, args)
    commands = ec.ground_truth(clips)["commands"]
    for scenario, s in mocap_breakdown(clips, ec.scenario_frames).items():
        print(_line(f"mocap {scenario}", s))
    for name, path in paths.items():
        for scenario, s in driven_breakdown(path, clips[0].skeleton, commands).items():
            print(_line(f"{name} {scenario}", s))


if __name__ == "__main__":
    main()
