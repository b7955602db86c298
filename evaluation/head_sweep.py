"""How the network carries its head when asked to walk straight at a steady speed, beside how
the mocap's dogs carry theirs at that speed. The held-out clips' gaits are a few seconds each,
of one dog sniffing or looking up; a stick held at one speed for seconds is what a player does,
and a network whose head the data does not determine (the gaze is not commanded: at 0.3-0.8
m/s the mocap's dogs sniff with the head below -50 deg in about a fifth of the frames and look
up above +40 deg in about a seventh) settles on one extreme or the other there.

For each speed: the network alone (speed tracking off, flat ground) asked to walk straight,
its head pitch (evaluation/replay.py pose_measures) over the last seconds; the mocap's over
every frame of any gait within a band of that speed, in every clip (the data's distribution,
not a held-out measure)."""

from __future__ import annotations

import numpy as np
from canis.evaluation.replay import pose_measures
from canis.export.closed_loop import Steering, record
from canis.runtime.controller import DT_S, Controller
from canis.runtime.readouts import NO_GAIT

SPEEDS_MPS = (0.3, 0.5, 0.8, 1.1, 1.6, 2.2, 3.0)
BAND_MPS = 0.15  # the mocap's frames within this of a speed count for it
WALK_S, MEASURED_S = 8.0, 4.0  # asked for WALK_S; its last MEASURED_S measured


def mocap_head_pitch(clips, speeds_mps=SPEEDS_MPS) -> dict[float, list[float] | None]:
    """{speed: [p10, p50, p90] deg, or None where no moving frame is within the band}."""
    pitches, clip_speeds = [], []
    for clip in clips:
        labels = clip.labels
        moving = labels.gait_index != NO_GAIT
        head = pose_measures(clip.skeleton, clip.positions_m, labels.ground_m)["head_pitch_deg"]
        pitches.append(head[moving])
        clip_speeds.append(np.asarray(labels.root_speed_mps)[moving])
    pitch, speed = np.concatenate(pitches), np.concatenate(clip_speeds)
    out = {}
    for v in speeds_mps:
        near = np.abs(speed - v) <= BAND_MPS
        out[v] = (
            [float(np.percentile(pitch[near], q)) for q in (10, 50, 90)] if near.any() else None
        )
    return out


def network_head_pitch(model, skeleton, speeds_mps=SPEEDS_MPS) -> dict[float, float]:
    """{speed: the median head pitch, deg, over the last MEASURED_S of WALK_S straight}."""
    frames, measured = int(round(WALK_S / DT_S)), int(round(MEASURED_S / DT_S))
    out = {}
    for v in speeds_mps:
        run = record(Controller(model, speed_tracking=False), Steering(v), frames)
        head = pose_measures(skeleton, run.positions_m[-measured:], 0.0)["head_pitch_deg"]
        out[v] = float(np.median(head))
    return out


def head_sweep(models: dict, clips) -> dict:
    """{"mocap": mocap_head_pitch, name: network_head_pitch} for MotionModels by name."""
    skeleton = clips[0].skeleton
    result = {"mocap": mocap_head_pitch(clips)}
    for name, model in models.items():
        result[name] = network_head_pitch(model, skeleton)
    return result


def markdown(sweep: dict) -> str:
    names = [n for n in sweep if n != "mocap"]
    lines = [
        "",
        f"Head pitch walking straight at a steady speed (deg; the network alone, the median of "
        f"the last {MEASURED_S:g} s of {WALK_S:g} s asked; the mocap's p10 / median / p90 over "
        f"every moving frame of every clip within {BAND_MPS:g} m/s of it):",
        "",
        "| speed m/s | mocap | " + " | ".join(names) + " |",
        "|---:|---|" + "---:|" * len(names),
    ]
    for v, truth in sweep["mocap"].items():
        cell = "no frames" if truth is None else f"{truth[0]:.0f} / {truth[1]:.0f} / {truth[2]:.0f}"
        row = " | ".join(f"{sweep[n][v]:.0f}" for n in names)
        lines.append(f"| {v:g} | {cell} | {row} |")
    return "\n".join(lines) + "\n"
