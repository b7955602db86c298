"""Where a trained network's validation error lies: per held-out clip, per labelled action and
gait, and per output field, beside the same figures on the training rows (the
generalisation study, docs/EVALUATION.md, issue 17 item 3). A loss that a few clips or one
output field carry reads differently from one spread evenly.

    python -m canis.training.validation_breakdown --dataset data/dog_dataset.npz \
        RUN/last.safetensors [RUN2/last.safetensors ...] [--json OUT.json]

Errors are the training's: squared error on standardised outputs, eval mode (no dropout), a
row's error the mean over its outputs. A clip and its mirror are one row of the clip table.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np
import torch
from canis.runtime.features import ACTIONS, OUTPUT
from canis.runtime.readouts import GAITS, NO_GAIT

# Rows of the training split sampled for its per-field errors (all of them take minutes).
TRAINING_SAMPLE_ROWS = 20_000


@torch.no_grad()
def squared_errors(model, kind: str, x, y, phase, batch: int = 8192) -> np.ndarray:
    """(rows, outputs) squared errors of the model's predictions, in eval mode."""
    from canis.training.train import _predict

    model.eval()
    parts = []
    for start in range(0, len(x), batch):
        end = start + batch
        prediction = _predict(model, kind, x[start:end], phase[start:end])
        parts.append(((prediction - y[start:end]) ** 2).numpy())
    return np.concatenate(parts)


def kept_pose_errors(data, x, y) -> np.ndarray:
    """(rows, outputs) squared errors, standardised as the network's, of predicting the next
    pose as the current one (the input's joint block carried over, training/models.pose_skip;
    NaN outside the joint block): the yardstick a network that moves on from the pose it is in
    should beat, and the part a --pose-residual network gets for free."""
    from canis.training.models import OUTPUT_JOINTS, carried_pose, pose_skip

    errors = np.full(tuple(y.shape), np.nan, dtype=np.float32)
    kept = carried_pose(x, *pose_skip(data.normalisation))
    errors[:, OUTPUT_JOINTS] = ((kept - y[:, OUTPUT_JOINTS]) ** 2).numpy()
    return errors


def output_fields() -> dict[str, np.ndarray]:
    """Flat output indices of each `block.field` of the motion networks' output."""
    return {
        f"{block.name}.{field}": OUTPUT.indices(block.name, field)
        for block in OUTPUT.blocks
        for field, _ in block.fields
    }


def majority(labels: np.ndarray, names: tuple[str, ...], none: str = "none") -> str:
    values, counts = np.unique(labels, return_counts=True)
    top = values[np.argmax(counts)]
    share = counts.max() / counts.sum()
    return f"{names[top] if top != NO_GAIT else none} {share:.0%}"


def breakdown(checkpoint_path: Path, dataset: str) -> dict:
    from canis.training.checkpoint import load_checkpoint
    from canis.training.models import restored_model
    from canis.training.train import TrainingData, _check_same_dataset, split_settings

    checkpoint = load_checkpoint(checkpoint_path)
    config = checkpoint.config
    kind = config["kind"]
    data = TrainingData(dataset, kind, torch.device("cpu"), **split_settings(checkpoint))
    _check_same_dataset(checkpoint, data, argparse.Namespace(dataset=dataset), checkpoint_path)
    model = restored_model(checkpoint, checkpoint_path)
    with np.load(dataset, allow_pickle=False) as npz:
        columns = {
            k: npz[k]
            for k in ("clip", "frame", "mirrored", "gait", "action", "speed", "validation")
        }
        clip_names = npz["clip_names"]
    held_out = columns["validation"]
    errors = squared_errors(model, kind, data.x_val, data.y_val, data.phase_val)
    # The first rows of the training split in a fixed random order: the same rows for every
    # checkpoint of one dataset.
    sample = np.random.default_rng(0).permutation(len(data.x_train))[:TRAINING_SAMPLE_ROWS]
    sample = torch.as_tensor(np.sort(sample))
    training_errors = squared_errors(
        model, kind, data.x_train[sample], data.y_train[sample], data.phase_train[sample]
    )
    kept = kept_pose_errors(data, data.x_val, data.y_val)
    training_kept = kept_pose_errors(data, data.x_train[sample], data.y_train[sample])
    outputs = errors.shape[1]
    row_error = errors.mean(axis=1)
    total = row_error.sum()
    stems = np.array([str(name).removesuffix("_mirror") for name in clip_names])
    clip = stems[columns["clip"][held_out]]
    gait, action = columns["gait"][held_out], columns["action"][held_out]
    speed = columns["speed"][held_out]
    clips = [
        {
            "clip": stem,
            "rows": int((clip == stem).sum()),
            "mse": float(row_error[clip == stem].mean()),
            "share_of_error": float(row_error[clip == stem].sum() / total),
            "action": majority(action[clip == stem], ACTIONS),
            "gait": majority(gait[clip == stem], GAITS),
            "mean_speed_mps": float(speed[clip == stem].mean()),
        }
        for stem in sorted(set(clip))
    ]
    side = columns["mirrored"][held_out].astype(np.int8)  # a network trained without mirrors
    by_label = {}
    for label, values, names in (
        ("action", action, ACTIONS),
        ("gait", gait, GAITS),
        ("side", side, ("captured", "mirrored")),
    ):
        by_label[label] = [
            {
                "label": names[value] if value != NO_GAIT else "none",
                "rows": int((values == value).sum()),
                "mse": float(row_error[values == value].mean()),
                "share_of_error": float(row_error[values == value].sum() / total),
            }
            for value in np.unique(values)
        ]
    fields = [
        {
            "field": name,
            "outputs": len(indices),
            "validation_mse": float(errors[:, indices].mean()),
            "training_mse": float(training_errors[:, indices].mean()),
            "share_of_validation_error": float(errors[:, indices].sum() / errors.sum()),
        }
        | (
            {
                "kept_pose_validation_mse": float(kept[:, indices].mean()),
                "kept_pose_training_mse": float(training_kept[:, indices].mean()),
            }
            if name.startswith("joints.")
            else {}
        )
        for name, indices in output_fields().items()
        if indices.max() < outputs
    ]
    frame = columns["frame"][held_out]
    segments = {
        stem: clip_segments(row_error[clip == stem], frame[clip == stem], action[clip == stem])
        for stem in sorted(set(clip))
    }
    return {
        "checkpoint": str(checkpoint_path),
        "validation_mse": float(errors.mean()),
        "training_sample_mse": float(training_errors.mean()),
        "training_sample_rows": len(sample),
        "clips": sorted(clips, key=lambda c: -c["share_of_error"]),
        "labels": by_label,
        "fields": fields,
        "segments": segments,
    }


def clip_segments(row_error, frame, action, seconds: float = 2.0) -> list[dict]:
    """A held-out clip's error over time: MSE of each `seconds` of frames (the clip and its
    mirror together) and the action labelled most there, to see whether a stretch of it or
    all of it carries the error."""
    from canis.runtime.features import FPS

    length = int(seconds * FPS)
    segment = (frame - frame.min()) // length
    return [
        {
            "start_s": round(float(frame[segment == i].min() / FPS), 1),
            "rows": int((segment == i).sum()),
            "mse": float(row_error[segment == i].mean()),
            "action": majority(action[segment == i], ACTIONS),
        }
        for i in np.unique(segment)
    ]


def markdown(result: dict) -> str:
    lines = [
        f"`{result['checkpoint']}`: validation MSE {result['validation_mse']:.4f}, training "
        f"MSE {result['training_sample_mse']:.4f} (eval mode, {result['training_sample_rows']} "
        "rows sampled)",
        "",
        "| held-out clip (and mirror) | rows | MSE | share of error | action | gait | mean "
        "speed m/s |",
        "|---|---|---|---|---|---|---|",
    ]
    lines += [
        f"| {c['clip']} | {c['rows']} | {c['mse']:.3f} | {c['share_of_error']:.0%} | "
        f"{c['action']} | {c['gait']} | {c['mean_speed_mps']:.2f} |"
        for c in result["clips"]
    ]
    for label, rows in result["labels"].items():
        lines += [
            "",
            f"| {label} (held-out rows) | rows | MSE | share of error |",
            "|---|---|---|---|",
        ]
        lines += [
            f"| {r['label']} | {r['rows']} | {r['mse']:.3f} | {r['share_of_error']:.0%} |"
            for r in rows
        ]
    lines += [
        "",
        "| output field | outputs | validation MSE | training MSE | validation / training | "
        "share of validation error | keeping the pose: validation / training MSE |",
        "|---|---|---|---|---|---|---|",
    ]
    lines += [
        f"| {f['field']} | {f['outputs']} | {f['validation_mse']:.3f} | "
        f"{f['training_mse']:.3f} | {f['validation_mse'] / f['training_mse']:.1f}x | "
        f"{f['share_of_validation_error']:.0%} | "
        + (
            f"{f['kept_pose_validation_mse']:.3f} / {f['kept_pose_training_mse']:.3f} |"
            if "kept_pose_validation_mse" in f
            else "|"
        )
        for f in result["fields"]
    ]
    worst = result["clips"][0]["clip"]
    lines += [
        "",
        f"{worst} over time (2 s segments from its first row; MSE, the action labelled most): "
        + ", ".join(
            f"{s['start_s']:.0f} s {s['mse']:.2f} {s['action']}" for s in result["segments"][worst]
        ),
    ]
    return "\n".join(lines)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("checkpoints", type=Path, nargs="+", help="canis train checkpoints")
    parser.add_argument("--dataset", type=Path, default=Path("data/dog_dataset.npz"))
    parser.add_argument("--json", type=Path, help="also write the figures here")
    args = parser.parse_args(argv)
    if not args.dataset.exists():
        parser.error(f"--dataset {args.dataset}: no such file")
    results = []
    for path in args.checkpoints:
        results.append(breakdown(path, str(args.dataset)))
        print(markdown(results[-1]) + "\n", flush=True)
    if args.json:
        args.json.write_text(json.dumps(results, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
