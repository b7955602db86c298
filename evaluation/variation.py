"""`canis evaluate variation`: how varied the RTN's sampled transitions are (RMI's scheduled
target noise, Controller.transition_to(variation=...)) and what they cost in L2P.

For each held-out window (evaluation/transitions.py's, at its lengths) the same request
is sampled SAMPLES times at each variation level, through the runtime's ONNX code with the
target blend, as the game plays it. Per level and length:
- L2P: the mean over the samples of each one's L2P against the mocap (variation 0: the
  deterministic transition, one sample);
- diversity: the mean pairwise joint distance (cm) between the samples of one request, over the
  transition's frames and joints (positions in the target's frame), averaged over requests;
- landing: the mean joint distance (cm) of the predicted target frame (before the blend, which
  makes the last frame the target exactly) from the target, i.e. whether the noise still lets
  the network arrive.
"""

from __future__ import annotations

import json
import time
from itertools import combinations
from pathlib import Path

import numpy as np
from canis.evaluation.doc_sections import replace_section
from canis.evaluation.transitions import BATCH, LENGTHS, position_std
from canis.runtime.skeleton import Skeleton, shipped_dog_skeleton_path
from canis.runtime.transition import TransitionModel
from canis.runtime.transition_frames import target_blend
from canis.training.train_rtn import windows
from canis.training.transition_data import global_pose, l2p
from canis.training.transition_data import load as load_transitions

LEVELS = (0.0, 0.5, 1.0)
SAMPLES = 4
STRIDE = 40


def sample_poses(model, skeleton, context, context_placements, target, length, variation, rng):
    """Positions (B, P, J, 3) of the P in-between frames of one sampled transition per window,
    blended as the game shows them, and the predicted target's joint distance (B,) in cm."""
    frames, placements = model.generate(context, context_placements, target, length, variation, rng)
    b = len(target)
    predicted, _ = global_pose(skeleton, frames[:, -1], placements[:, -1])
    wanted, _ = global_pose(skeleton, target, np.tile([0.0, 0.0, 0.0, 1.0], (b, 1)))
    landing_cm = np.linalg.norm(predicted - wanted, axis=-1).mean(axis=-1) * 100
    frames, placements = target_blend(frames, placements, target)
    positions, _ = global_pose(
        skeleton,
        frames[:, :length].reshape(b * length, -1),
        placements[:, :length].reshape(b * length, 4),
    )
    return positions.reshape(b, length, -1, 3), landing_cm


def evaluate_variation(
    model_path: Path | None,
    data_path: Path,
    levels=LEVELS,
    samples: int = SAMPLES,
    stride: int = STRIDE,
    seed: int = 0,
) -> dict:
    started = time.perf_counter()
    model = TransitionModel(model_path)
    data = load_transitions(data_path)
    skeleton = Skeleton.from_json(shipped_dog_skeleton_path())
    std = position_std(data, skeleton)
    clips = data.clips(validation=True)
    rng = np.random.default_rng(seed)
    results = {}
    windows_used = {}
    for variation in levels:
        draws = samples if variation > 0 else 1  # variation 0 is one transition
        row = {"l2p": {}, "diversity_cm": {}, "landing_cm": {}}
        for length in LENGTHS:
            starts = data.window_starts(clips, length)[::stride]
            windows_used[str(length)] = int(len(starts))
            sums = {"l2p": 0.0, "diversity_cm": 0.0, "landing_cm": 0.0}
            for first in range(0, len(starts), BATCH):
                chunk = starts[first : first + BATCH]
                weight = len(chunk) / len(starts)
                context, context_placements, target, (true_frames, true_placements) = windows(
                    data, chunk, length
                )
                b = len(chunk)
                truth, _ = global_pose(
                    skeleton,
                    true_frames[:, :length].numpy().reshape(b * length, -1),
                    true_placements[:, :length].numpy().reshape(b * length, 4),
                )
                truth = truth.reshape(b, length, -1, 3)
                poses = []
                for _ in range(draws):
                    positions, landing = sample_poses(
                        model,
                        skeleton,
                        context.numpy(),
                        context_placements.numpy(),
                        target.numpy(),
                        length,
                        variation,
                        rng,
                    )
                    poses.append(positions)
                    sums["l2p"] += weight * l2p(positions, truth, std) / draws
                    sums["landing_cm"] += weight * float(landing.mean()) / draws
                pairs = list(combinations(range(draws), 2))
                if pairs:
                    distance = np.mean(
                        [np.linalg.norm(poses[i] - poses[j], axis=-1).mean() for i, j in pairs]
                    )
                    sums["diversity_cm"] += weight * float(distance) * 100
            for key, value in sums.items():
                row[key][str(length)] = round(value, 4)
        results[f"{variation:g}"] = row
    return {
        "levels": results,
        "setup": {
            "model": str(model_path) if model_path else "assets/models/rtn_step.onnx (shipped)",
            "target_noise_sigma": model.metadata.get("canis.target_noise_sigma", "0"),
            "samples": samples,
            "window_stride_frames": stride,
            "windows": windows_used,
            "held_out_clips": [str(n) for n in data["clip_names"][clips]],
            "seed": seed,
            "seconds": round(time.perf_counter() - started, 1),
        },
    }


def markdown(results: dict, command: str, machine: str) -> str:
    setup = results["setup"]
    levels = results["levels"]
    lengths = list(next(iter(levels.values()))["l2p"])
    base = levels.get("0")
    lines = [
        "## Varied transitions (RMI's scheduled target noise)",
        "",
        f"Reproduce: `{command}` ({setup['seconds']} s on {machine}). Model: "
        f"`{setup['model']}` (trained with target noise sigma {setup['target_noise_sigma']}). "
        f"Each held-out window (a window every {setup['window_stride_frames']} frames; per "
        f"length: {setup['windows']}) is asked {setup['samples']} times at each variation "
        "(`Controller.transition_to(..., variation=v)`: the noise is v times the trained "
        "level; 0 is the deterministic transition, asked once), through the runtime's ONNX "
        "graphs with the target blend. L2P: the mean of the samples' L2P against the mocap "
        "(lower is better; in brackets, relative to variation 0). Diversity: the mean pairwise "
        "joint distance between the samples of one request over the transition's frames, in "
        "cm (higher is more varied). Landing: the mean joint distance of the predicted target "
        "frame (before the target blend) from the keyframe, in cm.",
        "",
        "| variation | "
        + " | ".join(f"L2P {n} f" for n in lengths)
        + " | "
        + " | ".join(f"diversity {n} f (cm)" for n in lengths)
        + " | "
        + " | ".join(f"landing {n} f (cm)" for n in lengths)
        + " |",
        "|---" * (1 + 3 * len(lengths)) + "|",
    ]
    for level, row in levels.items():
        cells = []
        for n in lengths:
            value = row["l2p"][n]
            relative = ""
            if base is not None and level != "0":
                relative = f" ({100 * (value - base['l2p'][n]) / base['l2p'][n]:+.1f}%)"
            cells.append(f"{value:.3f}{relative}")
        cells += [f"{row['diversity_cm'][n]:.2f}" for n in lengths]
        cells += [f"{row['landing_cm'][n]:.2f}" for n in lengths]
        lines.append(f"| {level} | " + " | ".join(cells) + " |")
    lines.append("")
    return "\n".join(lines)


def write(results: dict, json_path, doc, command: str, machine: str) -> None:
    if json_path is not None:
        json_path.parent.mkdir(parents=True, exist_ok=True)
        json_path.write_text(json.dumps(results, indent=1) + "\n")
    if doc is not None:
        replace_section(doc, "variation", markdown(results, command, machine))
