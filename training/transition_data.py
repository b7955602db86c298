"""The RTN's data: `canis dataset transitions` (dog BVH -> one row per mocap frame), the
in-betweening metrics, and `canis upsample`.

Every clip is used as captured and mirrored; its frames are built through the runtime's
transition contract (runtime/transition.py) from the same root and root-frame pose the
MANN dataset uses (training/clips.py). Windows (context + transition + target) are cut at
training time, so one file serves every transition length. Validation clips follow the MANN
dataset's seeded rule, so both models hold out the same clips. The .npz (no pickled objects)
holds frames (F, D) float32, root_xz_m (F, 2), root_yaw_rad (F,), per-row clip index and
action, clip names and row ranges, the validation flag per clip, training-frame mean and
standard deviation, and a JSON metadata string.

The metrics are those of Robust Motion In-betweening (REFERENCE.md section 4) and the two
baselines it compares against: every method's frames are turned into the pose a player would
see (rotations from the frames' forward/up axes, FK with the skeleton's fixed bone offsets at
the frame's hips, all in the target's root frame, which centres the root's ground position, as
L2P asks).

`canis upsample` is temporal super-resolution with the RTN (the RTN paper's application): it
keeps the first CONTEXT_FRAMES frames of a clip and one frame every `keep_every` frames after
them, and regenerates everything else with chained transitions: each reads the last
CONTEXT_FRAMES frames written so far (generated ones included) and ends on the next kept frame.
A tail too short for a transition (under MIN_TRANSITION_FRAMES) keeps its captured frames.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

import numpy as np
from canis.runtime.features import pose_to_root_frame
from canis.runtime.kinematics import forward_kinematics, rotations_from_directions
from canis.runtime.root import from_root_xz, wrap_angle_rad, yaw_from_direction, yaw_quaternion
from canis.runtime.rotations import quat_multiply, quat_slerp
from canis.runtime.skeleton import Skeleton, not_dog_reason
from canis.runtime.transition import TransitionModel
from canis.runtime.transition_frames import (
    CONTEXT_FRAMES,
    MAX_TRANSITION_FRAMES,
    MIN_TRANSITION_FRAMES,
    ROTATED_JOINTS,
    frame_vector,
    placement,
    placement_to_world,
    root_motion,
    split_frame,
    target_blend,
    transition_layout_hash,
)
from canis.training.bvh import BvhMotion, read_bvh, write_bvh
from canis.training.clips import Clip, data_set_corrections, process_clip, turned_joints
from canis.training.dataset import (
    readable_motions,
    shown_classes,
    standardisation,
    validation_clips,
)

FORMAT = "canis-transitions-1"


def clip_frames(clip: Clip) -> np.ndarray:
    """(F, D) RTN frames of a processed clip."""
    frames = np.arange(clip.frame_count)
    pose = pose_to_root_frame(clip.root_positions_m, clip.root_rotations, clip.pose(frames))
    yaw = yaw_from_direction(clip.facing)
    velocity, yaw_rate = root_motion(clip.root_positions_m[:, [0, 2]], yaw)
    return frame_vector(velocity, yaw_rate, pose)


def build(
    bvh_dir: Path, seed: int = 0, progress: bool = True, held_out: list[str] | None = None
) -> dict[str, np.ndarray]:
    """`held_out`: the clips (file stems) to hold out, e.g. the ones an exported RTN names
    (held_out_clips), instead of the MANN dataset's rule at `seed`."""
    files = sorted(Path(bvh_dir).glob("*.bvh"))
    if not files:
        raise FileNotFoundError(f"no .bvh files in {bvh_dir}")
    if held_out is not None:
        missing = sorted(set(held_out) - {f.stem for f in files})
        if missing:
            raise ValueError(f"held-out clips not in {bvh_dir}: {', '.join(missing)}")
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
    held_out = (
        set(held_out) if held_out is not None else validation_clips(sorted(set(stems)), seed, shown)
    )
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


def held_out_clips(metadata: dict[str, str], model: str | Path) -> list[str]:
    """The clips an exported RTN (its ONNX metadata) was never trained on."""
    clips = json.loads(metadata.get("canis.dataset", "{}")).get("validation_clips")
    if not clips:
        raise ValueError(
            f"{model}: names no held-out clips (no canis.dataset metadata); export it again "
            "with `canis export`"
        )
    return sorted(clips)


def check_held_out(data: TransitionData, metadata: dict[str, str], model: str | Path) -> None:
    """Refuses transition data that holds out other clips than the RTN's own: measured on
    them, the RTN would be scored on clips it trained on."""
    own = held_out_clips(metadata, model)
    theirs = sorted(data.metadata["validation_clips"])
    if own != theirs:
        raise ValueError(
            f"{data.path} holds out {', '.join(theirs)} but {model} was trained holding out "
            f"{', '.join(own)}; build its data with `canis dataset transitions --held-out-of "
            f"{model}`"
        )


# The in-betweening metrics (the docstring's second part).
def global_pose(skeleton: Skeleton, frames: np.ndarray, placements: np.ndarray):
    """Positions (M, J, 3) and global rotations (M, J, 4) in the target's root frame of frames
    (M, D) whose roots stand at placements (M, 4)."""
    parts = split_frame(frames.astype(np.float64), skeleton.parents)
    yaw = np.arctan2(placements[:, 2], placements[:, 3])
    local, world = rotations_from_directions(skeleton, parts.forwards, parts.ups, yaw)
    hips = parts.positions_m[:, 0].copy()
    hips[:, [0, 2]] = from_root_xz(hips[:, None, [0, 2]], placements[:, :2], yaw)[:, 0]
    positions, rotations = forward_kinematics(skeleton, local, hips)
    return positions.astype(np.float64), rotations.astype(np.float64)


def interpolation(skeleton, last_frame, last_placement, target_frame, length: int):
    """The INT baseline: the hips' position and the root's yaw linearly, every joint's
    root-relative rotation by slerp, from the last context frame to the target. Positions and
    rotations (B, P, J, ...) in the target's frame for the P in-between frames."""
    b = len(last_frame)
    zero_yaw = np.zeros(b)
    last = split_frame(last_frame.astype(np.float64), skeleton.parents)
    target = split_frame(target_frame.astype(np.float64), skeleton.parents)
    last_local, _ = rotations_from_directions(skeleton, last.forwards, last.ups, zero_yaw)
    target_local, _ = rotations_from_directions(skeleton, target.forwards, target.ups, zero_yaw)
    last_yaw = np.arctan2(last_placement[:, 2], last_placement[:, 3])
    last_hips = last.positions_m[:, 0].copy()
    last_hips[:, [0, 2]] = from_root_xz(
        last_hips[:, None, [0, 2]], last_placement[:, :2], last_yaw
    )[:, 0]
    target_hips = target.positions_m[:, 0]
    positions, rotations = [], []
    for k in range(1, length + 1):
        t = k / (length + 1)
        local = quat_slerp(last_local.astype(np.float64), target_local.astype(np.float64), t)
        yaw = wrap_angle_rad(last_yaw * (1 - t))  # the target's yaw is 0 in its own frame
        local[:, 0] = quat_multiply(yaw_quaternion(yaw), local[:, 0])
        p, r = forward_kinematics(skeleton, local, last_hips + (target_hips - last_hips) * t)
        positions.append(p)
        rotations.append(r)
    return np.stack(positions, 1).astype(np.float64), np.stack(rotations, 1).astype(np.float64)


def l2q(predicted_rotations, true_rotations) -> float:
    """Mean over samples and frames of the L2 norm of the global-quaternion error over the
    rotated joints, each quaternion taken in the truth's hemisphere (q and -q are one
    rotation)."""
    p = predicted_rotations[..., ROTATED_JOINTS, :]
    t = true_rotations[..., ROTATED_JOINTS, :]
    p = np.where(np.sum(p * t, axis=-1, keepdims=True) < 0, -p, p)
    return float(np.linalg.norm((p - t).reshape(*p.shape[:-2], -1), axis=-1).mean())


def l2p(predicted_positions, true_positions, std) -> float:
    """Mean over samples and frames of the L2 norm of the standardised global-position error
    (every joint's x, y, z divided by the training set's standard deviation; the
    mean cancels in a difference)."""
    error = (predicted_positions - true_positions) / std
    return float(np.linalg.norm(error.reshape(*error.shape[:-2], -1), axis=-1).mean())


def npss(predicted_rotations, true_rotations) -> float:
    """Normalized Power Spectrum Similarity over time (B, P, J, 4) of global quaternions:
    per feature, the power spectrum (of the FFT's real part, as RMI's reference code) is
    normalised to sum 1, and the L1 distance of the cumulative spectra is averaged with
    weights proportional to the truth's power in that feature."""
    t = true_rotations[..., ROTATED_JOINTS, :]
    p = predicted_rotations[..., ROTATED_JOINTS, :]
    p = np.where(np.sum(p * t, axis=-1, keepdims=True) < 0, -p, p)
    b, frames = t.shape[:2]
    t, p = t.reshape(b, frames, -1), p.reshape(b, frames, -1)
    true_power = np.real(np.fft.fft(t, axis=1)) ** 2
    predicted_power = np.real(np.fft.fft(p, axis=1)) ** 2
    true_total = true_power.sum(axis=1)
    predicted_total = predicted_power.sum(axis=1)
    true_cdf = np.cumsum(true_power / np.maximum(true_total[:, None], 1e-12), axis=1)
    predicted_cdf = np.cumsum(predicted_power / np.maximum(predicted_total[:, None], 1e-12), axis=1)
    emd = np.abs(predicted_cdf - true_cdf).sum(axis=1)
    weights = true_total / np.maximum(true_total.sum(axis=1, keepdims=True), 1e-12)
    return float(np.average(emd, weights=weights))


# `canis upsample` (the docstring's third part).
@dataclass
class Upsampled:
    frames: np.ndarray  # (F, D) kept and regenerated frames
    root_xz_m: np.ndarray  # (F, 2)
    root_yaw_rad: np.ndarray  # (F,)
    generated: np.ndarray  # (F,) bool: regenerated by the RTN
    target_of: np.ndarray  # (F,) the kept frame each regenerated frame leads to (else itself)


def keyframe_indices(frame_count: int, keep_every: int) -> list[int]:
    """The kept targets: every keep_every frames after the context, and the last frame when
    the tail is long enough for a transition."""
    if not MIN_TRANSITION_FRAMES + 1 <= keep_every <= MAX_TRANSITION_FRAMES + 1:
        raise ValueError(
            f"--keep-every {keep_every}: transitions must be {MIN_TRANSITION_FRAMES} to "
            f"{MAX_TRANSITION_FRAMES} frames, so keep every {MIN_TRANSITION_FRAMES + 1} to "
            f"{MAX_TRANSITION_FRAMES + 1} frames"
        )
    keys = list(range(CONTEXT_FRAMES - 1 + keep_every, frame_count, keep_every))
    last = keys[-1] if keys else CONTEXT_FRAMES - 1
    if frame_count - 1 - last - 1 >= MIN_TRANSITION_FRAMES:
        keys.append(frame_count - 1)
    return keys


def upsample_frames(model: TransitionModel, frames, root_xz_m, root_yaw_rad, keep_every):
    frames, xz, yaw = frames.copy(), root_xz_m.copy(), root_yaw_rad.copy()
    generated = np.zeros(len(frames), dtype=bool)
    target_of = np.arange(len(frames))
    previous = CONTEXT_FRAMES - 1
    for key in keyframe_indices(len(frames), keep_every):
        length = key - previous - 1
        context = slice(previous - CONTEXT_FRAMES + 1, previous + 1)
        context_placements = placement(
            xz[context],
            yaw[context],
            np.repeat(xz[key : key + 1], CONTEXT_FRAMES, 0),
            np.repeat(yaw[key : key + 1], CONTEXT_FRAMES),
        )
        out, placements = model.generate(
            frames[None, context], context_placements[None], frames[key : key + 1], length
        )
        out, placements = target_blend(out, placements, frames[key : key + 1])
        world_xz, world_yaw = placement_to_world(
            placements[0, :length].astype(np.float64),
            np.repeat(xz[key : key + 1], length, 0),
            np.repeat(yaw[key : key + 1], length),
        )
        span = slice(previous + 1, key)
        frames[span], xz[span], yaw[span] = out[0, :length], world_xz, world_yaw
        generated[span], target_of[span] = True, key
        previous = key
    return Upsampled(frames, xz, yaw, generated, target_of)


def to_bvh_motion(motion: BvhMotion, upsampled: Upsampled, ground_m: np.ndarray) -> BvhMotion:
    """The upsampled frames as the clip's BVH motion: rotations from the frames' axes, the
    hips at their root-frame position above each root (ground heights from the clip)."""
    skeleton = motion.skeleton()
    parts = split_frame(upsampled.frames.astype(np.float64), skeleton.parents)
    local, _ = rotations_from_directions(
        skeleton, parts.forwards, parts.ups, upsampled.root_yaw_rad
    )
    hips = np.empty((len(local), 3))
    hips[:, [0, 2]] = from_root_xz(
        parts.positions_m[:, None, 0, [0, 2]], upsampled.root_xz_m, upsampled.root_yaw_rad
    )[:, 0]
    hips[:, 1] = ground_m + parts.positions_m[:, 0, 1]
    rotations = np.where(upsampled.generated[:, None, None], local, motion.local_rotations)
    rotations = rotations.astype(np.float64)
    positions = np.where(upsampled.generated[:, None], hips * 100.0, motion.root_positions_cm)
    return motion.with_motion(positions, rotations)


def _too_short(clip_path: Path, frames: int, needed: int):
    raise ValueError(
        f"{clip_path}: {frames} frames; upsampling needs at least {needed} at 60 fps (the "
        f"{CONTEXT_FRAMES} context frames and a transition of {MIN_TRANSITION_FRAMES} to a kept "
        "frame)"
    )


def upsample_clip(model_path, clip_path: Path, out: Path, keep_every: int) -> dict:
    model = TransitionModel(model_path)
    motion = read_bvh(clip_path)
    reason = not_dog_reason(motion.skeleton())
    if reason:
        raise ValueError(f"{clip_path}: {reason}")
    needed = CONTEXT_FRAMES + MIN_TRANSITION_FRAMES + 1
    if motion.duration_s * 60 < needed - 1:  # too short to label: numpy's gradient error
        _too_short(clip_path, motion.frame_count, needed)
    clip = process_clip(motion)
    frames = clip_frames(clip)
    if not keyframe_indices(len(frames), keep_every):  # numpy's messages, on an empty mean
        _too_short(clip_path, len(frames), needed)
    yaw = yaw_from_direction(clip.facing)
    result = upsample_frames(model, frames, clip.root_positions_m[:, [0, 2]], yaw, keep_every)
    write_bvh(out, to_bvh_motion(motion, result, clip.root_positions_m[:, 1]))
    return {"frames": len(frames), "regenerated": int(result.generated.sum())} | error_report(
        clip.skeleton, frames, clip.root_positions_m[:, [0, 2]], yaw, result
    )


def error_report(skeleton, true_frames, true_xz, true_yaw, result: Upsampled, std=None) -> dict:
    """Mean joint position error (cm) over the regenerated frames and, given the position
    standard deviations (J, 3) of the evaluation, their L2P; both in the frame of the kept
    frame each transition leads to, as in `canis evaluate transitions`."""
    mask = result.generated
    key = result.target_of[mask]

    def pose(frames, xz, yaw):
        p = placement(xz[mask], yaw[mask], true_xz[key], true_yaw[key])
        return global_pose(skeleton, frames[mask], p)[0]

    truth = pose(true_frames, true_xz, true_yaw)
    ours = pose(result.frames, result.root_xz_m, result.root_yaw_rad)
    report = {"joint_error_cm": float(np.linalg.norm(ours - truth, axis=-1).mean() * 100)}
    if std is not None:
        report["l2p"] = l2p(ours[:, None], truth[:, None], std)
    return report
