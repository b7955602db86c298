"""`canis evaluate transitions`: the exported RTN against interpolation and zero velocity on
the held-out clips, at the transition lengths RMI reports (5, 15, 30, 45 frames), by L2P, L2Q
and NPSS (training/transition_data.py). The RTN runs through the runtime's ONNX code with the
target blend on, as the game uses it. Windows start every WINDOW_STRIDE frames of every held-out
clip (as captured and mirrored).
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import numpy as np
from canis.evaluation.doc_sections import replace_section
from canis.evaluation.handback import handback_and_postures, handback_markdown
from canis.runtime.skeleton import Skeleton, shipped_dog_skeleton_path
from canis.runtime.transition import TransitionModel
from canis.runtime.transition_frames import CONTEXT_FRAMES, target_blend
from canis.training.train_rtn import windows
from canis.training.transition_data import (
    TransitionData,
    check_held_out,
    error_report,
    global_pose,
    interpolation,
    l2p,
    l2q,
    npss,
    upsample_frames,
)
from canis.training.transition_data import load as load_transitions

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
    for each in models.values():
        check_held_out(data, each.metadata, each.step_path)
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
