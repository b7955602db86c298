"""The model card's fine-tuning lines (export/model_card.py): what `canis finetune` did to a
checkpoint, its log, and the one command that reproduces it (the config file it ran from,
or every setting)."""

from __future__ import annotations

from pathlib import Path

from canis.training.schedules import DROPOUT, WEIGHT_DECAY


def fine_tuning_lines(config: dict, rows: list[dict]) -> list[str]:
    """What `canis finetune` did after the training above (training/finetune.py)."""
    loop = config["closed_loop"]
    speed = [float(r["frames_per_s"]) for r in rows if "frames_per_s" in r]
    recipe = config.get("closed_loop_config")
    command = f"canis finetune --config {recipe['file']}" if recipe else "canis finetune"
    return [
        f"- **Fine-tuning** (`{command}`): from `{fine_tuning_start(config)}`, "
        f"{config['closed_loop_epoch']} epochs of {loop['steps_per_epoch']} steps, batch "
        f"{loop['batch_size']} stretches, AdamW lr {loop['lr']}; stretches of "
        f"{loop['ground_truth_frames']} mocap inputs then up to {loop['own_frames']} rebuilt "
        f"from the network's own outputs (curriculum over {loop['curriculum_epochs']} epochs; "
        "0: one-step), contact weight "
        f"{loop['contact_weight']}" + f", dropout {loop.get('dropout', DROPOUT)}, weight decay "
        f"{loop.get('weight_decay', WEIGHT_DECAY)}"
        + (
            f", leg-motion weight {loop['leg_motion_weight']} over each batch on the "
            "stretches (training/finetune_losses.py)"
            if loop.get("leg_motion_weight")
            else ""
        )
        + (
            f", placed-stillness weight {loop['placed_stillness_weight']} on "
            f"{loop['placed_dogs']} placed dogs (training/placed_stillness.py)"
            if loop.get("placed_stillness_weight")
            else ""
        )
        + (
            f", placed-speed weight {loop['placed_speed_weight']} on "
            f"{loop['placed_dogs']} moving dogs (training/placed_speed.py)"
            if loop.get("placed_speed_weight")
            else ""
        )
        + (
            f", moving-legs weight {loop['moving_legs_weight']} on "
            f"{loop['placed_dogs']} moving dogs"
            + (
                f", those asked under {loop['moving_legs_below_mps']:g} m/s"
                if loop.get("moving_legs_below_mps")
                else ""
            )
            + " (training/finetune_moving.py)"
            if loop.get("moving_legs_weight")
            else ""
        )
        + (
            f", moving-skating weight {loop['moving_skating_weight']} on "
            f"{loop['placed_dogs']} moving dogs (training/finetune_moving.py)"
            if loop.get("moving_skating_weight")
            else ""
        )
        + (
            f", moving-course weight {loop['moving_course_weight']} on "
            f"{loop['placed_dogs']} moving dogs (training/finetune_moving.py)"
            if loop.get("moving_course_weight")
            else ""
        )
        + (
            f", moving-gait weight {loop['moving_gait_weight']} on "
            f"{loop['placed_dogs']} moving dogs, straight ones"
            + (
                ", the mocap's most used gait's"
                if loop.get("moving_gait_reference", "all") == "most-used"
                else ""
            )
            + " (training/finetune_moving.py)"
            if loop.get("moving_gait_weight")
            else ""
        )
        + (
            f", stopping-pops weight {loop['stopping_pops_weight']} on "
            f"{loop['placed_dogs']} stopping dogs (training/stopping_pops.py)"
            if loop.get("stopping_pops_weight")
            else ""
        )
        + (
            f", getting-up-pops weight {loop['getting_up_pops_weight']} on "
            f"{loop['placed_dogs']} dogs getting up"
            + (
                f", {loop['getting_up_settling']:g} of them settling into the posture instead"
                if loop.get("getting_up_settling")
                else ""
            )
            + " (training/getting_up_pops.py)"
            if loop.get("getting_up_pops_weight")
            else ""
        )
        + (
            f", posture-stillness weight {loop['posture_stillness_weight']:g} on "
            f"{loop['placed_dogs']} dogs holding a posture (training/posture_stillness.py)"
            if loop.get("posture_stillness_weight")
            else ""
        )
        + (
            f", the jump's frames weighed {loop['jump_weight']:g}x"
            if loop.get("jump_weight", 1.0) != 1.0
            else ""
        )
        + (
            f", {loop['jump_share']:.0%} of each batch's stretches through a jump"
            if loop.get("jump_share")
            else ""
        )
        + (f"; {min(speed):.0f}-{max(speed):.0f} frames/s." if speed else "."),
    ]


def averaged_lines(config: dict) -> list[str]:
    """What `canis average` did (training/checkpoint_average.py)."""
    sources = config["averaged_from"]
    return [
        "- **Averaged** (`canis average`, training/checkpoint_average.py): the weights are the "
        f"mean of {len(sources)} checkpoints' ("
        + "; ".join(
            f"`{Path(s['file']).name}`, epoch {s['closed_loop_epoch']}, seed {s['seed']}, "
            f"SHA-256 {s['sha256'][:12]}"
            for s in sources
        )
        + "); the Fine-tuning line is the last one's run."
    ]


def averaging_step(config: dict, checkpoint_name: str) -> str:
    """The `canis average` step of the Reproduce line of an averaged checkpoint."""
    files = " ".join(str(s["file"]) for s in config["averaged_from"])
    return f"`./run canis average {files} --out runs/NAME/{checkpoint_name}` then "


def fine_tuning_start(config: dict) -> str:
    """The model fine-tuning began from: the shipped ONNX when it was converted (the
    converted checkpoint in the run folder is an intermediate)."""
    return config.get("from_onnx") or config["closed_loop_start"]


def fine_tuning_log(rows: list[dict]) -> list[str]:
    lines = [
        "| epoch | own frames | train loss | contact term | validation loss | closed-loop "
        "validation loss |",
        "|---|---|---|---|---|---|",
    ]
    return lines + [
        f"| {r['epoch']} | {r['own_frames']} | {float(r['train_loss']):.4f} | "
        f"{float(r['contact_term']):.4f} | {float(r['validation_loss']):.4f} | "
        f"{float(r['validation_closed_loop_loss']):.4f} |"
        for r in rows
    ]


def config_reproduce(config: dict) -> str | None:
    """`canis finetune --config FILE` and the flags given beside it, for a run from a config
    file (training/configs/*.json) whose recorded settings are the run's own; None otherwise
    (the Reproduce line then lists every setting)."""
    recipe, loop = config.get("closed_loop_config"), config["closed_loop"]
    if not recipe:
        return None
    settings = recipe["values"] | recipe["overrides"]
    if any(loop.get(key) != value for key, value in settings.items() if key != "epochs"):
        return None  # the run resolved a setting otherwise than the file says
    flags = "".join(
        f" --{key.replace('_', '-')}" + ("" if value is True else f" {value}")
        for key, value in recipe["overrides"].items()
        if key != "epochs"
    )
    if config["closed_loop_epoch"] != settings.get("epochs", 8):
        flags += f" --epochs {config['closed_loop_epoch']}"
    return f"--config {recipe['file']} --start {fine_tuning_start(config)} --out runs/NAME{flags}"


def fine_tuning_reproduce(config: dict, model_path: Path, checkpoint_name: str) -> str:
    loop = config["closed_loop"]
    start = fine_tuning_start(config)
    average = averaging_step(config, checkpoint_name) if config.get("averaged_from") else ""
    export = (
        f"`./run canis export runs/NAME/{checkpoint_name} --out {model_path.name} --dataset "
        "data/dog_dataset.npz --card`."
    )
    from_config = config_reproduce(config)
    if from_config is not None:
        return (
            f"- **Reproduce**: `./run canis dataset build` then `./run canis finetune "
            f"{from_config}` then {average}{export}"
        )
    # Options added after the first fine-tunes: named only where a run set them.
    later = ""
    if loop.get("leg_motion_weight"):
        later += f" --leg-motion-weight {loop['leg_motion_weight']}"
    if loop.get("placed_stillness_weight"):
        later += (
            f" --placed-stillness-weight {loop['placed_stillness_weight']} "
            f"--placed-dogs {loop['placed_dogs']}"
        )
    if loop.get("placed_speed_weight"):
        later += f" --placed-speed-weight {loop['placed_speed_weight']}"
    if loop.get("moving_legs_weight"):
        later += f" --moving-legs-weight {loop['moving_legs_weight']}"
    if loop.get("moving_legs_both_ways"):
        later += " --moving-legs-both-ways"
    if loop.get("moving_legs_below_mps"):
        later += f" --moving-legs-below-mps {loop['moving_legs_below_mps']:g}"
    if loop.get("moving_skating_weight"):
        later += f" --moving-skating-weight {loop['moving_skating_weight']}"
    if loop.get("moving_course_weight"):
        later += f" --moving-course-weight {loop['moving_course_weight']:g}"
    if loop.get("moving_gait_weight"):
        later += f" --moving-gait-weight {loop['moving_gait_weight']:g}"
    if loop.get("moving_gait_reference", "all") != "all":
        later += f" --moving-gait-reference {loop['moving_gait_reference']}"
    if loop.get("moving_paws_both_ways"):
        later += " --moving-paws-both-ways"
    if loop.get("moving_paws_down"):
        down = float(loop["moving_paws_down"])
        later += " --moving-paws-down" + ("" if down == 1 else f" {down:g}")
    if loop.get("moving_skating_relative"):
        later += " --moving-skating-relative"
    if loop.get("moving_skating_scale", 1.0) != 1.0:
        later += f" --moving-skating-scale {loop['moving_skating_scale']:g}"
    if loop.get("moving_paws_swing"):
        later += " --moving-paws-swing"
    if loop.get("moving_paws_swing_below_mps"):
        later += f" --moving-paws-swing-below-mps {loop['moving_paws_swing_below_mps']:g}"
    if loop.get("jump_share"):
        later += f" --jump-share {loop['jump_share']:g}"
    if loop.get("jump_weight", 1.0) != 1.0:
        later += f" --jump-weight {loop['jump_weight']:g}"
    if loop.get("stopping_pops_weight"):
        later += f" --stopping-pops-weight {loop['stopping_pops_weight']:g}"
    if loop.get("getting_up_pops_weight"):
        later += f" --getting-up-pops-weight {loop['getting_up_pops_weight']:g}"
    if loop.get("getting_up_settling"):
        later += f" --getting-up-settling {loop['getting_up_settling']:g}"
    if loop.get("posture_stillness_weight"):
        later += f" --posture-stillness-weight {loop['posture_stillness_weight']:g}"
    if loop.get("moving_max_turn_degps", 60.0) != 60.0:
        later += f" --moving-max-turn-degps {loop['moving_max_turn_degps']}"
    if loop.get("moving_turn_switch_s"):
        later += f" --moving-turn-switch-s {loop['moving_turn_switch_s']}"
    if loop.get("moving_dogs_per_step", 8) != 8:
        later += f" --moving-dogs-per-step {loop['moving_dogs_per_step']}"
    if loop.get("moving_unroll_frames", 1) != 1:
        later += f" --moving-unroll-frames {loop['moving_unroll_frames']}"
    placed = (
        "placed_stillness_weight", "placed_speed_weight", "moving_legs_weight",
        "moving_skating_weight", "moving_course_weight", "moving_gait_weight",
    )  # fmt: skip
    if not loop.get("placed_stillness_weight") and any(loop.get(key) for key in placed):
        later += f" --placed-dogs {loop['placed_dogs']}"
    if loop.get("placed_refresh_steps"):
        later += f" --placed-refresh-steps {loop['placed_refresh_steps']}"
    return (
        f"- **Reproduce**: `./run canis dataset build` then `./run canis finetune --start {start}"
        f" --out runs/NAME --epochs {config['closed_loop_epoch']} --steps-per-epoch "
        f"{loop['steps_per_epoch']} --batch-size {loop['batch_size']} --lr {loop['lr']} "
        f"--seed {loop['seed']} --ground-truth-frames {loop['ground_truth_frames']} "
        f"--own-frames {loop['own_frames']} --curriculum-epochs {loop['curriculum_epochs']} "
        f"--contact-weight {loop['contact_weight']} --dropout {loop.get('dropout', DROPOUT)} "
        f"--weight-decay {loop.get('weight_decay', WEIGHT_DECAY)}{later} --precision "
        f"{loop.get('precision', 'fp32')}` then {average}`./run canis export "
        f"runs/NAME/{checkpoint_name} --out {model_path.name} --dataset data/dog_dataset.npz "
        "--card`."
    )
