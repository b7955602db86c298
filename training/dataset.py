"""`canis dataset build`: raw dog BVH -> one compressed .npz of MANN training pairs.

Every clip is used twice, as captured and mirrored left/right (each joint's frame mirrored
with the half turn the whole set asks for, training.clips, so the mirrors keep the
captured clips' axis conventions); pairs are built through the runtime's feature
contract. Whole clips are held out for validation by a seeded rule (validation_clips): the
clips are ranked by sha256("<seed>:<clip file stem>"); first, for every gait and action that
at least two clips show, the first-ranked clip showing it is held out unless a held-out clip
shows it already (up to twice VALIDATION_PERCENT of the clips), so the held-out clips cover
what the data has and training keeps some of each; then the ranking fills up to
VALIDATION_PERCENT of the usable clips (rounded up). A clip
and its mirror always land on the same side.

The file (numpy .npz, no pickled objects) holds X (N, 480) and Y (N, 363) float32, their
training-set means and standard deviations, per-row clip index, frame, mirrored flag, action,
gait, PFNN phase and phase increment, validation flag and sampling weight, the clip names,
and a JSON metadata string (layout hash, contract, settings, skipped clips).
"""

from __future__ import annotations

import hashlib
import json
import logging
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

import numpy as np
from canis.runtime.features import (
    ACTIONS,
    FPS,
    INPUT,
    TRAJECTORY_OFFSETS_FRAMES,
    contract_description,
    layout_hash,
)
from canis.runtime.readouts import GAITS, NO_GAIT
from canis.runtime.root import wrap_angle_rad
from canis.runtime.skeleton import DOG_JOINT_NAMES, not_dog_reason
from canis.training.bvh import BvhError, read_bvh, resample, same_rate
from canis.training.clips import (
    MIN_CLIP_FRAMES,
    clip_pairs,
    data_set_corrections,
    process_clip,
    turned_joints,
)
from canis.training.labels import sniffing, sniffing_walk

log = logging.getLogger("canis.dataset")

VALIDATION_PERCENT = 10
# The paper copies trot and canter cycles 11 times because they are rare; sampling their
# frames with 11 times the weight is the same in expectation without growing the file.
OVERSAMPLE_WEIGHTS = {"trot": 11.0, "canter": 11.0}
# Dimensions whose spread is below this stay unscaled (std set to 1), e.g. the constant
# current trajectory sample, which is the root itself.
MIN_STD = 1e-4
FORMAT_VERSION = 1
# Clips captured at another frame rate are resampled to the features' FPS; outside this range
# the header is more likely wrong than the capture (and 60x interpolation makes no motion).
MIN_SOURCE_FPS, MAX_SOURCE_FPS = 20, 480


# A clip shows a gait or an action when at least this many of its frames are labelled so.
MIN_SHOWN_FRAMES = 30


def shown_classes(labels) -> set[str]:
    """The gaits and actions a clip's labels show for MIN_SHOWN_FRAMES frames or more."""
    shown = set()
    for kind, names, index in (
        ("gait", GAITS, labels.gait_index),
        ("action", ACTIONS, labels.action_index),
    ):
        counts = np.bincount(index[index >= 0], minlength=len(names))
        shown |= {f"{kind} {names[i]}" for i in np.flatnonzero(counts >= MIN_SHOWN_FRAMES)}
    return shown


def validation_clips(
    clip_stems: list[str], seed: int, shown: dict[str, set[str]] | None = None
) -> set[str]:
    """The held-out clips (module docstring): covering every gait and action of `shown`
    ({stem: shown_classes}) that two clips or more show, then filled up in the seeded order."""
    ranked = sorted(clip_stems, key=lambda s: hashlib.sha256(f"{seed}:{s}".encode()).hexdigest())
    held: list[str] = []
    shown = shown or {}
    classes = sorted({c for stem in ranked for c in shown.get(stem, ())})
    by_rarity = sorted(classes, key=lambda c: sum(c in shown.get(s, ()) for s in ranked))
    share = -(-len(ranked) * VALIDATION_PERCENT // 100)
    most = -(-len(ranked) * 2 * VALIDATION_PERCENT // 100)  # a small set keeps its clips
    for wanted in by_rarity if most > share else ():  # a set too small keeps its clips
        showing = [s for s in ranked if wanted in shown.get(s, ())]
        if len(held) >= most:
            break
        if len(showing) >= 2 and not any(wanted in shown.get(s, ()) for s in held):
            held.append(showing[0])
    for stem in ranked:
        if len(held) >= share:
            break
        if stem not in held:
            held.append(stem)
    return set(held)


def validation_coverage(held: set[str], shown: dict[str, set[str]]) -> list[str]:
    """The gaits and actions the held-out clips show (stated in the dataset's metadata)."""
    return sorted({c for stem in held for c in shown.get(stem, ())})


def sampling_weights(gait_index: np.ndarray) -> np.ndarray:
    weights = np.ones(len(gait_index), dtype=np.float32)
    for name, weight in OVERSAMPLE_WEIGHTS.items():
        weights[gait_index == GAITS.index(name)] = weight
    return weights


def balanced_weights(gait_index: np.ndarray, action_index: np.ndarray) -> np.ndarray:
    """Per-row sampling weights that even out the (gait, action) classes: each row weighs
    1/sqrt(its class's rows), so a class's share of the batches grows with the square root
    of its size instead of its size. Fully even classes (1/n) would show the 475 jump rows as
    often as the 27k idle ones, 57 times over each: sqrt tempers that to about 8."""
    classes = gait_index.astype(np.int64) * 64 + action_index.astype(np.int64)
    _, inverse, counts = np.unique(classes, return_inverse=True, return_counts=True)
    return (1.0 / np.sqrt(counts[inverse])).astype(np.float64)


# x's column of the Head joint's height over the ground (the root stands on the ground).
HEAD_HEIGHT_COLUMN = int(INPUT.indices("joints", "position", DOG_JOINT_NAMES.index("Head"))[1])


def sniffing_rows(arrays: dict[str, np.ndarray], walks: bool = False) -> np.ndarray:
    """training/labels.py `sniffing` (`walks`: `sniffing_walk`) over each clip's rows, against
    the median head height of the training clips' idle rows."""
    head_m = arrays["X"][:, HEAD_HEIGHT_COLUMN]
    idle = arrays["action"] == ACTIONS.index("idle")
    standing_m = float(np.median(head_m[idle & ~arrays["validation"]]))
    marked = np.zeros(len(head_m), dtype=bool)
    for clip in np.unique(arrays["clip"]):
        rows = np.flatnonzero(arrays["clip"] == clip)
        action, head = arrays["action"][rows], head_m[rows]
        marked[rows] = (
            sniffing_walk(action, arrays["speed"][rows], head, standing_m)
            if walks
            else sniffing(action, head, standing_m)
        )
    return marked


def standardisation(values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    mean = values.mean(axis=0, dtype=np.float64)
    std = values.std(axis=0, dtype=np.float64)
    std[std < MIN_STD] = 1.0
    return mean.astype(np.float32), std.astype(np.float32)


@dataclass
class BuildResult:
    arrays: dict[str, np.ndarray]
    metadata: dict
    clips: list = field(default_factory=list)  # processed, unmirrored Clip objects for plots


def readable_motions(
    files, min_frames: int, skipped: list, progress: bool, window: str, resampled=None
):
    """(path, motion) of every file that parses and has at least min_frames frames, at the
    features' 60 fps: a clip captured at another rate is resampled (and added to `resampled`),
    or skipped when the rate is implausible. Skipped clips are logged and added to `skipped`
    with the reason (`window` names what needs the frames)."""
    from tqdm import tqdm

    for path in tqdm(files, desc="clips", unit="clip", disable=not progress):
        try:
            motion = read_bvh(path)
        except BvhError as error:
            skipped.append({"clip": path.stem, "reason": str(error)})
            log.warning("skipping %s: %s", path.name, error)
            continue
        reason = not_dog_reason(motion.skeleton())
        if reason:
            skipped.append({"clip": path.stem, "reason": reason})
            log.warning("skipping %s: %s", path.name, reason)
            continue
        if not same_rate(motion.frame_time_s, FPS):
            if not MIN_SOURCE_FPS <= motion.fps <= MAX_SOURCE_FPS:
                reason = (
                    f"recorded at {motion.fps:.4g} fps (Frame Time {motion.frame_time_s:g} s); "
                    f"only {MIN_SOURCE_FPS}-{MAX_SOURCE_FPS} fps is resampled to {FPS}"
                )
                skipped.append({"clip": path.stem, "reason": reason})
                log.warning("skipping %s: %s", path.name, reason)
                continue
            log.warning("%s: resampled from %.4g to %d fps", path.name, motion.fps, FPS)
            if resampled is not None:
                resampled.append({"clip": path.stem, "from_fps": round(motion.fps, 4)})
            motion = resample(motion, FPS)
        if motion.frame_count < min_frames:
            reason = f"{motion.frame_count} frames, shorter than the {min_frames}-frame {window}"
            skipped.append({"clip": path.stem, "reason": reason})
            log.warning("skipping %s: %s", path.name, reason)
            continue
        yield path, motion


def build(bvh_dir: Path, seed: int = 0, progress: bool = True, keep_clips=False) -> BuildResult:

    files = sorted(Path(bvh_dir).glob("*.bvh"))
    if not files:
        raise FileNotFoundError(f"no .bvh files in {bvh_dir}")
    start = time.perf_counter()
    parts: dict[str, list] = {
        k: []
        for k in (
            "X",
            "Y",
            "clip",
            "frame",
            "mirrored",
            "action",
            "gait",
            "speed",
            "phase",
            "phase_delta",
            "contact_next",
        )
    }
    clip_names, clip_stems, skipped, kept, resampled = [], [], [], [], []
    clips = list(
        readable_motions(files, MIN_CLIP_FRAMES, skipped, progress, "trajectory window", resampled)
    )
    mirror_turns = data_set_corrections([motion for _, motion in clips]) if clips else None
    shown: dict[str, set[str]] = {}
    for path, motion in clips:
        for mirrored in (False, True):
            clip = process_clip(motion, mirrored, mirror_turns)
            if not mirrored:
                shown[path.stem] = shown_classes(clip.labels)
            x, y, frames = clip_pairs(clip)
            if not (np.all(np.isfinite(x)) and np.all(np.isfinite(y))):
                skipped.append({"clip": clip.name, "reason": "non-finite features"})
                log.warning("skipping %s: its features are not finite", clip.name)
                continue
            if keep_clips and not mirrored:
                kept.append(clip)
            index = len(clip_names)
            clip_names.append(clip.name)
            clip_stems.append(path.stem)
            labels = clip.labels
            parts["X"].append(x)
            parts["Y"].append(y)
            parts["clip"].append(np.full(len(frames), index, dtype=np.int16))
            parts["frame"].append(frames.astype(np.int32))
            parts["mirrored"].append(np.full(len(frames), mirrored))
            parts["action"].append(labels.action_index[frames].astype(np.int8))
            parts["gait"].append(labels.gait_index[frames].astype(np.int8))
            parts["speed"].append(labels.root_speed_mps[frames].astype(np.float32))
            parts["phase"].append(labels.phase_rad[frames].astype(np.float32))
            delta = wrap_angle_rad(labels.phase_rad[frames + 1] - labels.phase_rad[frames])
            parts["phase_delta"].append(delta.astype(np.float32))
            # The paws planted in y's frame (the next one): the contact loss reads it.
            parts["contact_next"].append(labels.contacts[frames + 1])
    if not clip_names:
        raise ValueError(f"no usable clips in {bvh_dir}; skipped: {skipped}")

    arrays = {key: np.concatenate(values) for key, values in parts.items()}
    held_out = validation_clips(sorted(set(clip_stems)), seed, shown)  # among the usable clips
    validation = np.array([stem in held_out for stem in clip_stems])[arrays["clip"]]
    arrays["validation"] = validation
    arrays["sample_weight"] = sampling_weights(arrays["gait"])
    arrays["sniffing"] = sniffing_rows(arrays)
    arrays["sniffing_walk"] = sniffing_rows(arrays, walks=True)
    arrays["x_mean"], arrays["x_std"] = standardisation(arrays["X"][~validation])
    arrays["y_mean"], arrays["y_std"] = standardisation(arrays["Y"][~validation])
    arrays["clip_names"] = np.array(clip_names)
    metadata = {
        "format_version": FORMAT_VERSION,
        "layout_hash": layout_hash(),
        "contract": contract_description(),
        "source": str(bvh_dir),
        "seed": seed,
        "validation_rule": (
            "a clip for every gait and action two clips or more show, then the first "
            f"{VALIDATION_PERCENT}% of clips by sha256('<seed>:<clip>')"
        ),
        "validation_clips": sorted(held_out),
        "validation_covers": validation_coverage(held_out, shown),
        "oversample_weights": OVERSAMPLE_WEIGHTS,
        "skipped": skipped,
        "resampled": resampled,
        "mirror_half_turns": turned_joints(clips[0][1].skeleton(), mirror_turns),
        "build_seconds": round(time.perf_counter() - start, 1),
        "built": datetime.now(UTC).isoformat(timespec="seconds"),
        "licence": "derived from the MANN dog mocap: CC BY-NC 4.0",
    }
    return BuildResult(arrays, metadata, kept)


def save(result: BuildResult, path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".partial")
    with open(tmp, "wb") as file:  # a file object, so numpy does not append .npz to the name
        np.savez_compressed(file, metadata=np.array(json.dumps(result.metadata)), **result.arrays)
    tmp.replace(path)  # atomic: a crash never leaves a half-written dataset under `path`


@dataclass
class Dataset:
    path: Path
    arrays: dict[str, np.ndarray]
    metadata: dict

    def __getitem__(self, key: str) -> np.ndarray:
        return self.arrays[key]


def load(path: str | Path) -> Dataset:
    path = Path(path)
    try:
        with np.load(path, allow_pickle=False) as npz:
            arrays = {key: npz[key] for key in npz.files}
    except FileNotFoundError:
        raise
    except Exception as error:  # zipfile/numpy raise many types for a damaged file
        raise ValueError(f"{path}: not a readable canis dataset ({error})") from error
    if "metadata" not in arrays:
        raise ValueError(f"{path}: not a canis dataset (no metadata)")
    metadata = json.loads(str(arrays.pop("metadata")))
    if metadata.get("layout_hash") != layout_hash():
        raise ValueError(
            f"{path}: built for feature layout {metadata.get('layout_hash')}, but this runtime "
            f"uses {layout_hash()}; rebuild it with `canis dataset build`"
        )
    for key, values in arrays.items():  # NaN rows made every trained weight NaN
        if values.dtype.kind == "f" and not np.all(np.isfinite(values)):
            rows = np.flatnonzero(~np.isfinite(values.reshape(len(values), -1)).all(axis=1))
            raise ValueError(
                f"{path}: {key} has non-finite values in {len(rows)} rows (the first, row "
                f"{rows[0]}); rebuild it with `canis dataset build`"
            )
    return Dataset(path, arrays, metadata)


def class_balance(arrays: dict[str, np.ndarray]) -> dict:
    """Shares of actions (all rows) and gaits (locomotion rows), before and after weighting."""
    weights = arrays["sample_weight"].astype(np.float64)
    moving = arrays["gait"] != NO_GAIT
    balance = {}
    for label, mask in (("before", None), ("after", weights)):
        w = np.ones(len(weights)) if mask is None else mask
        balance[label] = {
            "actions": {
                name: float(w[arrays["action"] == i].sum() / w.sum())
                for i, name in enumerate(ACTIONS)
            },
            "gaits": {
                name: float(w[arrays["gait"] == i].sum() / w[moving].sum())
                for i, name in enumerate(GAITS)
            },
        }
    return balance


# Which rows `canis train` trains on and which it validates on (`--holdout`, `--no-mirrored`).
# `clips` (the default) trains on every row of the clips the dataset does not hold out (its
# `validation` column: whole clips, a clip and its mirror together). `within-clips` also keeps
# those held-out clips out of training, so that every run is validated on the same held-out
# clips, and in addition holds out the last TAIL_FRACTION of every training clip: a second
# validation set of motions the network has seen the start of. A gap of GAP_FRAMES on each side
# of the cut is dropped, so that no training row's window of frames (the trajectory's -50..+60
# frames, the output's next frame) overlaps a within-clip validation row's: the two sets then
# share motions, not frames. A clip and its mirror have the same frames, so they are cut at the
# same frame.
HOLDOUTS = ("clips", "within-clips")
TAIL_FRACTION = 0.15
# A row at frame f reads frames f-50 .. f+60 (+1 for its output); with this gap on each side
# of the cut, a training row and a within-clip validation row are at least 121 frames apart.
GAP_FRAMES = max(TRAJECTORY_OFFSETS_FRAMES)


def tail_cuts(clip: np.ndarray, frame: np.ndarray) -> np.ndarray:
    """Per row, the frame at which its clip's held-out tail (with the gap around it) is cut:
    the first frame of the clip's last TAIL_FRACTION of rows' frames."""
    clips = np.unique(clip)
    first = np.array([frame[clip == c].min() for c in clips])
    last = np.array([frame[clip == c].max() for c in clips])
    cut = first + np.ceil((1 - TAIL_FRACTION) * (last - first + 1)).astype(np.int64)
    return cut[np.searchsorted(clips, clip)]


def split_rows(arrays, holdout: str, mirrored: bool = True) -> tuple[np.ndarray, np.ndarray]:
    """(training rows, within-clip validation rows) as boolean masks over the dataset's rows.
    The held-out-clip validation rows are always the dataset's `validation` column; the
    within-clip rows are empty for `clips`. `mirrored=False` trains on the captured rows only
    (validation keeps both, so runs compare on the same rows)."""
    if holdout not in HOLDOUTS:
        raise ValueError(f"--holdout {holdout!r}: choose one of {', '.join(HOLDOUTS)}")
    training = ~arrays["validation"]
    within = np.zeros_like(training)
    if holdout == "within-clips":
        cut = tail_cuts(arrays["clip"], arrays["frame"])
        within = training & (arrays["frame"] >= cut + GAP_FRAMES)
        training = training & (arrays["frame"] < cut - GAP_FRAMES)
    if not mirrored:
        training = training & ~arrays["mirrored"].astype(bool)
    if not training.any():
        raise ValueError(f"--holdout {holdout}: leaves no training rows in the dataset")
    return training, within
