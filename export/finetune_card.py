"""The model card's fine-tuning lines (export/model_card.py): what `canis finetune` did to a
checkpoint, its log, and the one command that reproduces it (the config file it ran from)."""

from __future__ import annotations

from dataclasses import fields
from pathlib import Path

from canis.training.optimisation import DROPOUT, WEIGHT_DECAY


def _changed_settings(loop: dict) -> list[str]:
    """Each loss setting the run gave a value other than its default, as `key value`."""
    from canis.training.finetune_config import ClosedLoopConfig

    defaults = {f.name: f.default for f in fields(ClosedLoopConfig)}
    return [
        f"{key} {value:g}" if isinstance(value, float) else f"{key} {value}"
        for key, value in loop.items()
        if key in defaults and value != defaults[key]
    ]


def fine_tuning_lines(config: dict, rows: list[dict]) -> list[str]:
    """What `canis finetune` did after the training above (training/finetune.py)."""
    loop = config["closed_loop"]
    speed = [float(r["frames_per_s"]) for r in rows if "frames_per_s" in r]
    recipe = config.get("closed_loop_config")
    command = "canis finetune"
    if recipe:
        file = recipe["file"]
        command = f"{file}, [finetune]" if file.endswith(".toml") else f"{command} --config {file}"
    dropout, decay = loop.get("dropout", DROPOUT), loop.get("weight_decay", WEIGHT_DECAY)
    settings = ", ".join(_changed_settings(loop)) or "defaults"
    start = fine_tuning_start(config)
    if recipe and recipe["file"].endswith(".toml"):
        # The recipe's own training stage, named by its place in any run folder (RUN: the
        # --out a user chose), not by the folder this one happened to run in.
        start = f"RUN/{Path(start).parent.name}/{Path(start).name}"
    return [
        f"- **Fine-tuning** (`{command}`, training/finetune.py): from "
        f"`{start}`, {config['closed_loop_epoch']} epochs of "
        f"{loop['steps_per_epoch']} steps, batch {loop['batch_size']} stretches, AdamW lr "
        f"{loop['lr']}, seed {loop['seed']}, dropout {dropout}, weight decay {decay}; "
        f"settings: {settings}"
        + (f"; {min(speed):.0f}-{max(speed):.0f} frames/s." if speed else "."),
    ]


def fine_tuning_start(config: dict) -> str:
    """The model fine-tuning began from: the shipped ONNX when it was converted (the
    converted checkpoint in the run folder is an intermediate)."""
    return config.get("from_onnx") or config["closed_loop_start"]


def fine_tuning_log(rows: list[dict]) -> list[str]:
    lines = [
        "| epoch | own frames | train loss | validation loss | closed-loop validation loss |",
        "|---|---|---|---|---|",
    ]
    return lines + [
        f"| {r['epoch']} | {r['own_frames']} | {float(r['train_loss']):.4f} | "
        f"{float(r['validation_loss']):.4f} | {float(r['validation_closed_loop_loss']):.4f} |"
        for r in rows
    ]


def fine_tuning_reproduce(config: dict, model_path: Path, checkpoint_name: str) -> str:
    """The Reproduce line of a fine-tuned checkpoint: `canis finetune --config FILE` from its
    start, then the export."""
    recipe = config.get("closed_loop_config")
    export = (
        f"`./run canis export runs/NAME/{checkpoint_name} --out {model_path.name} --dataset "
        "data/dog_dataset.npz --card`."
    )
    if not recipe:
        return "- **Reproduce**: not recorded (fine-tuned without a config file)."
    epochs = config["closed_loop_epoch"]
    stop = "" if epochs == recipe["values"].get("epochs") else f" (its first {epochs} epochs)"
    return (
        f"- **Reproduce**: `./run canis dataset build` then `./run canis finetune --config "
        f"{recipe['file']} --start {fine_tuning_start(config)} --out runs/NAME`{stop} then "
        f"{export}"
    )
