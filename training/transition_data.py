"""`canis dataset transitions`: dog BVH -> the RTN's frames, one row per mocap frame.

Every clip is used as captured and mirrored; its frames are built through the runtime's
transition contract (runtime/transition.py) from the same root and root-frame pose the
MANN dataset uses (training/clips.py). Windows (context + transition + target) are cut at
training time, so one file serves every transition length. Validation clips follow the MANN
dataset's seeded rule, so both models hold out the same clips.

The .npz (no pickled objects) holds frames (F, D) float32, root_xz_m (F, 2), root_yaw_rad (F,),
per-row clip index and action, clip names and row ranges, the validation flag per clip,
training-frame mean and standard deviation, and a JSON metadata string.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

import numpy as np
from canis.runtime.features import pose_to_root_frame
from canis.runtime.root import yaw_from_direction
from canis.runtime.transition_frames import (
    CONTEXT_FRAMES,
    MIN_TRANSITION_FRAMES,
    frame_vector,
    root_motion,
    transition_layout_hash,
)
from canis.training.clips import Clip, process_clip
from canis.training.dataset import (
    readable_motions,
    shown_classes,
    standardisation,
    validation_clips,
)
from canis.training.mirror import data_set_corrections, turned_joints

FORMAT = "canis-transitions-1"


def clip_frames(clip: Clip) -> np.ndarray:
    """(F, D) RTN frames of a processed clip."""
    frames = np.arange(clip.frame_count)
    pose = pose_to_root_frame(clip.root_positions_m, clip.root_rotations, clip.pose(frames))
    yaw = yaw_from_direction(clip.facing)
    velocity, yaw_rate = root_motion(clip.root_positions_m[:, [0, 2]], yaw)
    return frame_vector(velocity, yaw_rate, pose)


def build(bvh_dir: Path, seed: int = 0, progress: bool = True) -> dict[str, np.ndarray]:
    files = sorted(Path(bvh_dir).glob("*.bvh"))
    if not files:
        raise FileNotFoundError(f"no .bvh files in {bvh_dir}")
    start = time.perf_counter()
    parts = {"frames": [], "root_xz_m": [], "root_yaw_rad": [], "action": []}
    names, stems, ranges, skipped, resampled, row = [], [], [], [], [], 0
    shortest = CONTEXT_FRAMES + MIN_TRANSITION_FRAMES + 1
    motions = list(
        readable_motions(files, shortest, skipped, progress, "transition window", resampled)
    )
    mirror_turns = data_set_corrections([motion for _, motion in motions]) if motions else None
    shown: dict[str, set[str]] = {}
    for path, motion in motions:
        for mirrored in (False, True):
            clip = process_clip(motion, mirrored, mirror_turns)
            if not mirrored:  # the MANN dataset's rule: the same clips held out
                shown[path.stem] = shown_classes(clip.labels)
            frames = clip_frames(clip)
            if not np.all(np.isfinite(frames)):
                skipped.append({"clip": clip.name, "reason": "non-finite frames"})
                continue
            parts["frames"].append(frames)
            parts["root_xz_m"].append(clip.root_positions_m[:, [0, 2]].astype(np.float32))
            parts["root_yaw_rad"].append(yaw_from_direction(clip.facing).astype(np.float32))
            parts["action"].append(clip.labels.action_index.astype(np.int8))
            names.append(clip.name)
            stems.append(path.stem)
            ranges.append((row, row + len(frames)))
            row += len(frames)
    if not names:
        raise ValueError(f"no usable clips in {bvh_dir}; skipped: {skipped}")
    arrays = {k: np.concatenate(v) for k, v in parts.items()}
    held_out = validation_clips(sorted(set(stems)), seed, shown)
    arrays["clip_validation"] = np.array([s in held_out for s in stems])
    arrays["clip_ranges"] = np.array(ranges, dtype=np.int64)
    arrays["clip_names"] = np.array(names)
    training_rows = np.concatenate(
        [
            np.arange(a, b)
            for (a, b), v in zip(ranges, arrays["clip_validation"], strict=True)
            if not v
        ]
    )
    arrays["frame_mean"], arrays["frame_std"] = standardisation(arrays["frames"][training_rows])
    arrays["metadata"] = np.array(
        json.dumps(
            {
                "format": FORMAT,
                "layout_hash": transition_layout_hash(),
                "source": str(bvh_dir),
                "seed": seed,
                "validation_clips": sorted(held_out),
                "skipped": skipped,
                "resampled": resampled,
                "mirror_half_turns": turned_joints(motions[0][1].skeleton(), mirror_turns),
                "build_seconds": round(time.perf_counter() - start, 1),
                "built": datetime.now(UTC).isoformat(timespec="seconds"),
                "licence": "derived from the MANN dog mocap: CC BY-NC 4.0",
            }
        )
    )
    return arrays


def save(arrays: dict[str, np.ndarray], path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".partial")
    with open(tmp, "wb") as file:
        np.savez_compressed(file, **arrays)
    tmp.replace(path)


@dataclass
class TransitionData:
    path: Path
    arrays: dict[str, np.ndarray]
    metadata: dict

    def __getitem__(self, key: str) -> np.ndarray:
        return self.arrays[key]

    def clips(self, validation: bool) -> np.ndarray:
        """Indices of the training (False) or held-out (True) clips."""
        return np.flatnonzero(self.arrays["clip_validation"] == validation)

    def window_starts(self, clips: np.ndarray, transition_frames: int) -> np.ndarray:
        """Every first row of a window (context, transition, target) inside one of `clips`."""
        length = CONTEXT_FRAMES + transition_frames + 1
        starts = [
            np.arange(a, b - length + 1)
            for a, b in self.arrays["clip_ranges"][clips]
            if b - a >= length
        ]
        return np.concatenate(starts) if starts else np.zeros(0, dtype=np.int64)


def load(path: str | Path) -> TransitionData:
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(
            f"{path}: no transition data; build it with `canis dataset transitions`"
        )
    try:
        with np.load(path, allow_pickle=False) as npz:
            arrays = {key: npz[key] for key in npz.files}
        metadata = json.loads(str(arrays.pop("metadata")))
    except Exception as error:  # numpy/zipfile raise many types for a damaged file
        raise ValueError(f"{path}: not a readable transition dataset ({error})") from error
    if metadata.get("format") != FORMAT:
        raise ValueError(f"{path}: not a canis transition dataset")
    if metadata.get("layout_hash") != transition_layout_hash():
        raise ValueError(
            f"{path}: built for transition layout {metadata.get('layout_hash')}, but this "
            f"runtime uses {transition_layout_hash()}; rebuild it"
        )
    return TransitionData(path, arrays, metadata)
